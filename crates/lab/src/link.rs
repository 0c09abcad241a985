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

impl Side {
    /// As knob names give it (`initiator.tso`).
    pub fn name(self) -> &'static str {
        match self {
            Side::Initiator => "initiator",
            Side::Target => "target",
        }
    }
}

/// One ethtool offload knob. Its names and the `ethtool -k` lines that show
/// it are said here once, for the plans that name it, the topologies and
/// host knobs that apply it, and the reports that list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Offload {
    /// TCP segmentation offload.
    Tso,
    /// Generic segmentation offload.
    Gso,
    /// Generic receive offload.
    Gro,
    /// Transmit checksumming.
    Tx,
    /// Receive checksumming.
    Rx,
    /// Scatter-gather.
    Sg,
}

impl Offload {
    /// Every offload, in the order the seeds discuss them and `ethtool -K`
    /// gets them.
    pub const ALL: [Offload; 6] = [
        Offload::Tso,
        Offload::Gso,
        Offload::Gro,
        Offload::Tx,
        Offload::Rx,
        Offload::Sg,
    ];

    /// ethtool's short name (`ethtool -K DEV tso off`), which plans use too.
    pub fn name(self) -> &'static str {
        match self {
            Offload::Tso => "tso",
            Offload::Gso => "gso",
            Offload::Gro => "gro",
            Offload::Tx => "tx",
            Offload::Rx => "rx",
            Offload::Sg => "sg",
        }
    }

    /// The offload of a short name.
    pub fn named(name: &str) -> Option<Offload> {
        Offload::ALL.into_iter().find(|o| o.name() == name)
    }

    /// `ethtool -k`'s group line: its features are the lines under it, or
    /// the line itself when nothing is under it.
    pub fn ethtool_group(self) -> &'static str {
        match self {
            Offload::Tso => "tcp-segmentation-offload",
            Offload::Gso => "generic-segmentation-offload",
            Offload::Gro => "generic-receive-offload",
            Offload::Tx => "tx-checksumming",
            Offload::Rx => "rx-checksumming",
            Offload::Sg => "scatter-gather",
        }
    }

    /// The `ethtool -k` lines that say whether it is in effect where the
    /// group line can mislead (the `tcp-segmentation-offload` group also
    /// holds `tx-tcp-accecn-segmentation`, which `tx off` leaves on, so the
    /// group still reads "on"); empty where the group line says it.
    pub fn ethtool_specific(self) -> &'static [&'static str] {
        match self {
            Offload::Tso => &["tx-tcp-segmentation"],
            Offload::Sg => &["tx-scatter-gather"],
            Offload::Tx => &[
                "tx-checksum-ipv4",
                "tx-checksum-ip-generic",
                "tx-checksum-ipv6",
            ],
            Offload::Gso | Offload::Gro | Offload::Rx => &[],
        }
    }
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

impl std::fmt::Display for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Offloads {
    /// What the case asks of `offload`; None leaves the device's default.
    pub fn get(&self, offload: Offload) -> Option<bool> {
        match offload {
            Offload::Tso => self.tso,
            Offload::Gso => self.gso,
            Offload::Gro => self.gro,
            Offload::Tx => self.tx,
            Offload::Rx => self.rx,
            Offload::Sg => self.sg,
        }
    }

    /// Where the case's wish for `offload` is kept.
    pub fn slot(&mut self, offload: Offload) -> &mut Option<bool> {
        match offload {
            Offload::Tso => &mut self.tso,
            Offload::Gso => &mut self.gso,
            Offload::Gro => &mut self.gro,
            Offload::Tx => &mut self.tx,
            Offload::Rx => &mut self.rx,
            Offload::Sg => &mut self.sg,
        }
    }
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

impl LinkKnobs {
    /// The offloads of one side's ports.
    pub fn offloads(&self, side: Side) -> &Offloads {
        match side {
            Side::Initiator => &self.initiator,
            Side::Target => &self.target,
        }
    }

    /// The knob (`initiator.tso`) and value, when the case sets `offload`
    /// on `side`.
    pub fn offload_knob(&self, side: Side, offload: Offload) -> Option<(String, bool)> {
        self.offloads(side)
            .get(offload)
            .map(|on| (format!("{}.{}", side.name(), offload.name()), on))
    }
}
