//! Which knobs of a set cannot apply with a given initiator and target,
//! and why: the peers' limits gathered in one place above the knob model
//! (each peer's own list is its module's, e.g. [`crate::peers::lio::unsupported`]),
//! so that a run reports such knobs as skipped instead of measuring a case
//! that is not what it says.

use crate::knobs::{InitiatorImpl, KnobSet, TargetImpl, ISOE_TARGET_ACCEPTS_DATAPATH};
use crate::peers::{fio, kernel, lio};

impl KnobSet {
    /// The knobs of this set that cannot apply with `initiator` and
    /// `target`, by [`KnobSet::describe`] name, each with the reason.
    pub fn unsupported(
        &self,
        initiator: InitiatorImpl,
        target: TargetImpl,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.is_floor() {
            return self.floor_limits();
        }
        if let Some(why) = datapath_limit(target) {
            for (key, set) in [
                ("batching", self.batching.is_some()),
                ("crc", self.crc.is_some()),
                ("buffer_pool", self.buffer_pool.is_some()),
            ] {
                if set {
                    out.push((key.to_string(), why.to_string()));
                }
            }
        }
        match initiator {
            InitiatorImpl::Libiscsi => out.extend(fio::limits(self)),
            InitiatorImpl::Kernel => out.extend(kernel::limits(self)),
            InitiatorImpl::IsoeUblk | InitiatorImpl::IsoeNbd => out.extend(self.attach_limits()),
            InitiatorImpl::Isoe => {}
        }
        if initiator != InitiatorImpl::Kernel && self.transport.is_some() {
            out.push((
                "transport".into(),
                format!(
                    "an open-iscsi iface transport; the initiator is {}",
                    initiator.as_str()
                ),
            ));
        }
        if target == TargetImpl::Lio {
            for (key, why) in lio::unsupported(self) {
                if !out.iter().any(|(k, _)| *k == key) {
                    out.push((key, why));
                }
            }
        }
        if target == TargetImpl::External {
            for key in [
                "header_digest",
                "data_digest",
                "immediate_data",
                "initial_r2t",
                "max_recv_data_segment_length",
                "first_burst_length",
                "max_burst_length",
            ] {
                if self.describe().contains_key(key) {
                    out.push((
                        key.to_string(),
                        "only the initiator's offer is set: an external array's side is its own"
                            .into(),
                    ));
                }
            }
        }
        out
    }

    /// [`KnobSet::unsupported`] with the initiator and target this set chooses.
    pub fn unsupported_here(&self) -> Vec<(String, String)> {
        self.unsupported(self.initiator_impl(), self.target_impl())
    }
}

/// Why the datapath knobs cannot apply with `target`, if they cannot: the
/// one place that knows whether the isoe target reads `[datapath]`.
fn datapath_limit(target: TargetImpl) -> Option<&'static str> {
    match target {
        TargetImpl::Tgt => Some("an isoe target datapath option; the target is tgt"),
        TargetImpl::Lio => Some("an isoe target datapath option; the target is LIO"),
        TargetImpl::External => {
            Some("an isoe target datapath option; the target is an external array")
        }
        TargetImpl::Isoe if !ISOE_TARGET_ACCEPTS_DATAPATH => {
            Some("not implemented by isoe target yet (no [datapath] table)")
        }
        TargetImpl::Isoe => None,
    }
}
