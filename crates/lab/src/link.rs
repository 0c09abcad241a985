//! Link-level knobs: what a test case sets on the NIC ports of a topology
//! (METHODOLOGY.md "Knobs"). The types are shared by plans (which name
//! them) and topologies (which apply them).

use serde::{Deserialize, Serialize};

/// Which end of a path a setting applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The initiator's (host's) ports.
    Initiator,
    /// The target's ports.
    Target,
}

/// ethtool offload features (`ethtool -K DEV NAME on|off`); None leaves the
/// device's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    /// TCP segmentation offload (`tso`).
    pub tso: Option<bool>,
    /// Generic segmentation offload (`gso`).
    pub gso: Option<bool>,
    /// Generic receive offload (`gro`).
    pub gro: Option<bool>,
    /// Transmit checksumming (`tx`); off also turns TSO off.
    pub tx: Option<bool>,
    /// Receive checksumming (`rx`).
    pub rx: Option<bool>,
    /// Scatter-gather (`sg`).
    pub sg: Option<bool>,
}

/// NIC queue settings on both sides' ports; None leaves the device's
/// value. A virtual device (veth, lo) has none of them, and a case that
/// sets one there reports it skipped with ethtool's reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicKnobs {
    /// Receive ring entries (`ethtool -G DEV rx N`).
    pub rx_ring: Option<u32>,
    /// Transmit ring entries (`ethtool -G DEV tx N`).
    pub tx_ring: Option<u32>,
    /// Receive interrupt coalescing, microseconds (`ethtool -C DEV rx-usecs N`).
    pub rx_usecs: Option<u32>,
    /// Transmit interrupt coalescing, microseconds (`ethtool -C DEV tx-usecs N`).
    pub tx_usecs: Option<u32>,
    /// Combined queues, which RSS spreads flows over (`ethtool -L DEV combined N`).
    pub channels: Option<u32>,
    /// Ethernet flow control (`ethtool -A DEV autoneg off rx on|off tx on|off`).
    pub flow_control: Option<bool>,
}

impl NicKnobs {
    /// True when none is set.
    pub fn is_empty(&self) -> bool {
        *self == NicKnobs::default()
    }
}

/// Everything a case sets on the links of a topology.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkKnobs {
    /// MTU on every link of the path (1500, 9000, ...).
    pub mtu: Option<u32>,
    /// Rate limit of the host port in Mbit/s (`tc tbf`).
    pub rate_mbit: Option<u32>,
    /// Offloads on the initiator's ports.
    pub initiator: Offloads,
    /// Offloads on the target's ports.
    pub target: Offloads,
    /// Rings, coalescing, queues and flow control on both sides' ports.
    #[serde(default)]
    pub nic: NicKnobs,
}
