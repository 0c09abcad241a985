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
//!
//! A target that reports no stages (LIO, an external array) cannot be
//! split from the initiator's stack: what the network leaves is then the
//! initiator's stack and the whole target together, and it is named so
//! ([`MERGED_PART`]), not passed off as the initiator's own.

/// The means that go in, µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measured {
    /// The initiator's mean latency, submission to completion.
    pub initiator_us: f64,
    /// A raw TCP request/response of the command's sizes over the same path.
    pub network_us: f64,
    /// The target's stages; None when the target does not report them
    /// (LIO, an external array), and then its parts cannot be told apart
    /// from the initiator's stack.
    pub target: Option<Stages>,
}

/// The target's stages of a command, split at the store, means in µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stages {
    /// From the command's receipt to the store's call.
    pub receipt_to_store_us: f64,
    /// The store's own time.
    pub store_us: f64,
    /// From the store's return to the status sent.
    pub store_to_sent_us: f64,
}

/// The target's parts of a command's latency, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetParts {
    /// The target's iSCSI and SCSI work, receive and send sides.
    pub protocol_us: f64,
    /// The target's store.
    pub storage_us: f64,
}

/// A command's mean latency in parts, µs; `initiator_stack_us +
/// network_us` and the target's parts add up to the initiator's mean
/// whenever `excess_us` is 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    /// The initiator's own software (and its NIC's driver); with the
    /// target's parts when `target` is None ([`Breakdown::labels`] then
    /// names it [`MERGED_PART`]).
    pub initiator_stack_us: f64,
    /// Both TCP stacks and the wire.
    pub network_us: f64,
    /// The target's parts; None when its stages are unknown.
    pub target: Option<TargetParts>,
    /// How far the other parts together exceed the initiator's latency
    /// (then `initiator_stack_us` is 0); 0 when they fit.
    pub excess_us: f64,
}

/// The parts' names, in a command's order from the application out, as
/// the report's table and stacked bar label them.
pub const PARTS: [&str; 4] = ["initiator stack", "network", "target protocol", "storage"];

/// The first part's name when the target's stages are unknown: what the
/// network leaves of the initiator's latency is the initiator's stack and
/// the whole target together.
pub const MERGED_PART: &str = "initiator stack and target";

impl Breakdown {
    /// Splits `m`. Negative or non-finite inputs count as 0.
    pub fn of(m: &Measured) -> Breakdown {
        let network_us = clean(m.network_us);
        let target = m.target.map(|s| TargetParts {
            protocol_us: clean(s.receipt_to_store_us) + clean(s.store_to_sent_us),
            storage_us: clean(s.store_us),
        });
        let target_us = target.map_or(0.0, |t| t.protocol_us + t.storage_us);
        let rest = clean(m.initiator_us) - network_us - target_us;
        Breakdown {
            initiator_stack_us: rest.max(0.0),
            network_us,
            target,
            excess_us: (-rest).max(0.0),
        }
    }

    /// The parts' names in [`PARTS`] order: the first is [`MERGED_PART`]
    /// when the target's stages are unknown.
    pub fn labels(&self) -> [&'static str; 4] {
        let mut labels = PARTS;
        if self.target.is_none() {
            labels[0] = MERGED_PART;
        }
        labels
    }

    /// The parts in [`PARTS`] order, µs; the target's None when unknown
    /// (they are then inside the first).
    pub fn parts(&self) -> [Option<f64>; 4] {
        [
            Some(self.initiator_stack_us),
            Some(self.network_us),
            self.target.map(|t| t.protocol_us),
            self.target.map(|t| t.storage_us),
        ]
    }

    /// The parts' sum, µs: the initiator's mean plus `excess_us`.
    pub fn total_us(&self) -> f64 {
        self.parts().iter().flatten().sum()
    }

    /// Each part's share of their sum, % (all known ones 0 when the sum
    /// is 0); None where the part is.
    pub fn shares_pct(&self) -> [Option<f64>; 4] {
        let total = self.total_us();
        self.parts()
            .map(|p| p.map(|p| if total > 0.0 { p / total * 100.0 } else { 0.0 }))
    }
}

/// A mean as it goes in: negative or non-finite counts as 0.
fn clean(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 {
        v
    } else {
        0.0
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
            target: Some(Stages {
                receipt_to_store_us: stages[0],
                store_us: stages[1],
                store_to_sent_us: stages[2],
            }),
        }
    }

    #[test]
    fn the_initiator_stack_is_what_the_other_parts_leave() {
        let b = Breakdown::of(&measured(250.0, 80.0, [12.0, 30.0, 8.0]));
        assert_eq!(b.initiator_stack_us, 120.0);
        assert_eq!(b.network_us, 80.0);
        assert_eq!(
            b.target,
            Some(TargetParts {
                protocol_us: 20.0,
                storage_us: 30.0
            })
        );
        assert_eq!(b.excess_us, 0.0);
        assert_eq!(b.total_us(), 250.0);
        assert_eq!(b.labels(), PARTS);
        assert_eq!(
            b.shares_pct(),
            [Some(48.0), Some(32.0), Some(8.0), Some(12.0)]
        );
    }

    #[test]
    fn parts_beyond_the_initiator_s_latency_are_kept_as_excess() {
        let b = Breakdown::of(&measured(100.0, 90.0, [10.0, 15.0, 5.0]));
        assert_eq!(b.initiator_stack_us, 0.0);
        assert_eq!(b.excess_us, 20.0);
        assert_eq!(b.parts()[2], Some(15.0));
        assert_eq!(b.total_us(), 120.0);
    }

    #[test]
    fn missing_or_nonsense_inputs_count_as_nothing() {
        let b = Breakdown::of(&measured(40.0, f64::NAN, [-3.0, 10.0, f64::INFINITY]));
        assert_eq!(b.parts(), [Some(30.0), Some(0.0), Some(0.0), Some(10.0)]);
        assert_eq!(
            b.shares_pct(),
            [Some(75.0), Some(0.0), Some(0.0), Some(25.0)]
        );
        let nothing = Breakdown::of(&measured(0.0, 0.0, [0.0; 3]));
        assert_eq!(nothing.shares_pct(), [Some(0.0); 4]);
    }

    #[test]
    fn an_unknown_target_stays_inside_the_initiator_s_part_and_says_so() {
        let known = Breakdown::of(&measured(900.0, 400.0, [7.0, 6.0, 20.0]));
        assert_eq!(known.initiator_stack_us, 467.0);
        let unknown = Breakdown::of(&Measured {
            target: None,
            ..measured(900.0, 400.0, [0.0; 3])
        });
        // The 33 µs the target took are no longer told apart.
        assert_eq!(unknown.initiator_stack_us, 500.0);
        assert_eq!(unknown.target, None);
        assert_eq!(unknown.labels()[0], MERGED_PART);
        assert_eq!(&unknown.labels()[1..], &PARTS[1..]);
        assert_eq!(unknown.parts(), [Some(500.0), Some(400.0), None, None]);
        assert_eq!(unknown.total_us(), 900.0);
        let shares = unknown.shares_pct();
        assert_eq!(shares[2..], [None, None]);
        assert!((shares[0].unwrap() - 500.0 / 9.0).abs() < 1e-9);
        assert_eq!(
            Breakdown::of(&Measured::default()).shares_pct()[..2],
            [Some(0.0); 2]
        );
    }
}
