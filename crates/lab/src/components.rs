//! Where a command's time goes: seed 003's table of latency by component
//! (host software stack, adapter, network, storage), rebuilt from what the
//! lab measures on each side.
//!
//! - The initiator measures a command's whole latency (fio's or `isoe
//!   bench`'s submission to completion).
//! - The target splits a sample of its commands at the store
//!   (`isoe_lun_stage_seconds`): receipt to store and store to sent are its
//!   protocol time, the store's own time is storage.
//! - The network is a raw TCP request and response of the command's sizes
//!   over the same path, both hosts' TCP stacks and the wire included.
//!
//! What is left of the initiator's latency is its own stack: the block
//! layer, the iSCSI initiator, the NIC driver. Means are subtracted, so the
//! parts add up to the initiator's mean; when the others together exceed
//! it (noise, or measurements from different moments) the initiator's part
//! is 0 and the excess is kept, not hidden.

/// The means that go in, µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measured {
    /// The initiator's mean latency, submission to completion.
    pub initiator_us: f64,
    /// A raw TCP request/response of the command's sizes over the same path.
    pub network_us: f64,
    /// The target's stages.
    pub receipt_to_store_us: f64,
    pub store_us: f64,
    pub store_to_sent_us: f64,
}

/// A command's mean latency in parts, µs; `initiator_stack_us +
/// network_us + target_protocol_us + storage_us` is the initiator's mean
/// whenever `excess_us` is 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    /// The initiator's own software (and its NIC's driver).
    pub initiator_stack_us: f64,
    /// Both TCP stacks and the wire.
    pub network_us: f64,
    /// The target's iSCSI and SCSI work, receive and send sides.
    pub target_protocol_us: f64,
    /// The target's store.
    pub storage_us: f64,
    /// How far the other parts together exceed the initiator's latency
    /// (then `initiator_stack_us` is 0); 0 when they fit.
    pub excess_us: f64,
}

/// The parts' names, in a command's order from the application out, as
/// the report's table and stacked bar label them.
pub const PARTS: [&str; 4] = ["initiator stack", "network", "target protocol", "storage"];

impl Breakdown {
    /// Splits `m`. Negative or non-finite inputs count as 0.
    pub fn of(m: &Measured) -> Breakdown {
        let clean = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
        let network_us = clean(m.network_us);
        let target_protocol_us = clean(m.receipt_to_store_us) + clean(m.store_to_sent_us);
        let storage_us = clean(m.store_us);
        let rest = clean(m.initiator_us) - network_us - target_protocol_us - storage_us;
        Breakdown {
            initiator_stack_us: rest.max(0.0),
            network_us,
            target_protocol_us,
            storage_us,
            excess_us: (-rest).max(0.0),
        }
    }

    /// The parts in [`PARTS`] order, µs.
    pub fn parts(&self) -> [f64; 4] {
        [
            self.initiator_stack_us,
            self.network_us,
            self.target_protocol_us,
            self.storage_us,
        ]
    }

    /// Each part's share of their sum, % (all 0 when the sum is 0).
    pub fn shares_pct(&self) -> [f64; 4] {
        let parts = self.parts();
        let total: f64 = parts.iter().sum();
        if total <= 0.0 {
            return [0.0; 4];
        }
        parts.map(|p| p / total * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Initiator, network, and the target's three stages, µs.
    fn measured(initiator: f64, network: f64, stages: [f64; 3]) -> Measured {
        Measured {
            initiator_us: initiator,
            network_us: network,
            receipt_to_store_us: stages[0],
            store_us: stages[1],
            store_to_sent_us: stages[2],
        }
    }

    #[test]
    fn the_initiator_stack_is_what_the_other_parts_leave() {
        let b = Breakdown::of(&measured(250.0, 80.0, [12.0, 30.0, 8.0]));
        assert_eq!(b.initiator_stack_us, 120.0);
        assert_eq!(b.network_us, 80.0);
        assert_eq!(b.target_protocol_us, 20.0);
        assert_eq!(b.storage_us, 30.0);
        assert_eq!(b.excess_us, 0.0);
        assert_eq!(b.parts().iter().sum::<f64>(), 250.0);
        assert_eq!(b.shares_pct(), [48.0, 32.0, 8.0, 12.0]);
    }

    #[test]
    fn parts_beyond_the_initiator_s_latency_are_kept_as_excess() {
        let b = Breakdown::of(&measured(100.0, 90.0, [10.0, 15.0, 5.0]));
        assert_eq!(b.initiator_stack_us, 0.0);
        assert_eq!(b.excess_us, 20.0);
        assert_eq!(b.target_protocol_us, 15.0);
    }

    #[test]
    fn missing_or_nonsense_inputs_count_as_nothing() {
        let b = Breakdown::of(&measured(40.0, f64::NAN, [-3.0, 10.0, f64::INFINITY]));
        assert_eq!(b.parts(), [30.0, 0.0, 0.0, 10.0]);
        assert_eq!(b.shares_pct(), [75.0, 0.0, 0.0, 25.0]);
        assert_eq!(Breakdown::of(&Measured::default()).shares_pct(), [0.0; 4]);
    }
}
