//! What applying the lab's network knobs comes to, whichever way they are
//! applied (a topology of namespaces the lab made, `topology`, or the ports
//! of machines, `hostknobs`): one [`Applied`] per knob, and an offload's
//! state as `ethtool -k` shows it. The offloads themselves are
//! [`crate::link::Offload`].

use crate::link::Offload;
use crate::netcmd::FeatureLine;

/// One knob of a case as applied to a topology or a machine, or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// `mtu`, `rate_mbit`, or side and feature such as `initiator.tso`.
    pub knob: String,
    /// The value asked for, as people read it (`9000`, `off`).
    pub value: String,
    /// Ok when the devices now have it; Err with why not (the knob was
    /// skipped: no root, a fixed feature, no such link in this topology).
    pub outcome: Result<(), NotApplied>,
}

/// Why a knob is not in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotApplied {
    /// Link knobs are not applied where initiator and target share this
    /// machine's own stack (the degraded loopback, the reason given).
    #[error("link knobs cannot be applied on the {0}")]
    LinkOn(String),
    /// Sysctls neither (they would change this machine).
    #[error("sysctls cannot be applied on the {0}")]
    SysctlsOn(String),
    /// What the knob changes could not be read first, so it could not be
    /// put back: the error's text.
    #[error("could not be read first: {0}")]
    NotReadFirst(String),
    /// The topology has no link to rate-limit.
    #[error("the {0} topology has no link to rate-limit (initiator and target share lo)")]
    NoLinkToLimit(String),
    /// A rate of 0.
    #[error("a rate of 0 Mbit/s carries nothing")]
    ZeroRate,
    /// Setting it went wrong: each problem, for people (a device and what
    /// its command said, a fixed feature, a sysctl the kernel lacks).
    #[error("{}", .0.join("; "))]
    Problems(Vec<String>),
}

impl NotApplied {
    /// Ok without problems, else [`NotApplied::Problems`].
    pub fn unless(problems: Vec<String>) -> Result<(), NotApplied> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(NotApplied::Problems(problems))
        }
    }
}

/// One offload knob's state on an interface, as `ethtool -k` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureDefault {
    /// On.
    pub on: bool,
    /// The driver does not let it change.
    pub fixed: bool,
    /// ethtool's line(s) for it.
    pub text: String,
}

/// An offload's state on a device, from its `ethtool -k` lines: the
/// specific features where the group line can mislead
/// ([`Offload::ethtool_specific`]), else the group line; on if any of them
/// is on, fixed if all are fixed.
pub fn knob_state(lines: &[FeatureLine], offload: Offload) -> Option<FeatureDefault> {
    let (specific, group) = (offload.ethtool_specific(), offload.ethtool_group());
    let mut found: Vec<&FeatureLine> = lines
        .iter()
        .filter(|l| specific.contains(&l.name.as_str()))
        .collect();
    if found.is_empty() {
        found = lines.iter().filter(|l| l.name == group).collect();
    }
    if found.is_empty() {
        return None;
    }
    Some(FeatureDefault {
        on: found.iter().any(|l| l.on),
        fixed: found.iter().all(|l| l.fixed),
        text: found
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}
