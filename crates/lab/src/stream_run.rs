//! What a stream run (`stream`) records in its result: which side sent,
//! and its own figures. Below the result (`record`), which holds it.

use crate::rr::StreamKind;
use serde::{Deserialize, Serialize};

/// Which side of the lab's topology sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamDirection {
    /// The initiator's side sends (as in a write).
    InitiatorToTarget,
    /// The target's side sends (as in a read).
    TargetToInitiator,
}

impl StreamDirection {
    /// Its name in a plan.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamDirection::InitiatorToTarget => "initiator-to-target",
            StreamDirection::TargetToInitiator => "target-to-initiator",
        }
    }

    /// Every direction, in a plan's names.
    pub const ALL: [StreamDirection; 2] = [
        StreamDirection::InitiatorToTarget,
        StreamDirection::TargetToInitiator,
    ];
}

/// A stream run's own figures, as its result's `stream` says them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamRun {
    /// "tcp" or "udp".
    pub kind: StreamKind,
    /// Which side sent.
    pub direction: StreamDirection,
    /// Bytes per write or datagram.
    pub msg: u32,
    /// UDP: datagrams sent in the window.
    pub datagrams_sent: Option<u64>,
    /// UDP: those received.
    pub datagrams_received: Option<u64>,
    /// UDP: those lost, % of those sent.
    pub loss_pct: Option<f64>,
    /// UDP: what the sender sent, MB/s.
    pub sent_mb_per_s: Option<f64>,
    /// The initiator side's CPU-µs per MB carried (the lab's samples).
    pub initiator_cpu_us_per_mb: Option<f64>,
    /// The target side's.
    pub target_cpu_us_per_mb: Option<f64>,
    /// The whole machine's.
    pub system_cpu_us_per_mb: Option<f64>,
}
