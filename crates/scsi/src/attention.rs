//! Unit attention conditions (SAM-5 5.14, SPC-5 5.14): events one I_T nexus
//! must hear about before its next command runs, queued per nexus.
//!
//! The command path pays one relaxed atomic load while nothing is queued.

use isoe_sync::MutexExt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::opcode::{INQUIRY, REPORT_LUNS, REQUEST_SENSE};
use crate::sense::sense_key::UNIT_ATTENTION;
use crate::{Nexus, Sense};

/// Conditions kept per nexus beyond which the oldest are dropped (SPC-5
/// 5.14: a device server may report fewer than it established).
const QUEUE_MAX: usize = 8;

#[derive(Debug, Default)]
struct NexusState {
    /// Sessions now on this I_T nexus (a reinstated session overlaps its predecessor).
    sessions: u32,
    queue: VecDeque<Sense>,
}

/// The unit attention queues of one logical unit.
#[derive(Debug, Default)]
pub(crate) struct Attentions {
    /// Conditions queued over all nexuses.
    pending: AtomicUsize,
    nexuses: Mutex<HashMap<Nexus, NexusState>>,
}

/// How a command meets a pending unit attention (SAM-5 5.14, SPC-5 table 45).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Nothing pending: run the command.
    Run,
    /// REQUEST SENSE takes this condition as its sense data.
    AsSense(Sense),
    /// The command ends in CHECK CONDITION with this condition.
    Report(Sense),
}

impl Attentions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Nexus, NexusState>> {
        // A panic elsewhere cannot leave the map half-updated: every change
        // below is a single insert, push or pop.
        self.nexuses.lock_unpoisoned()
    }

    pub(crate) fn attach(&self, nexus: &Nexus) {
        self.lock().entry(nexus.clone()).or_default().sessions += 1;
    }

    /// Returns true when that was the nexus's last session (I_T nexus loss).
    pub(crate) fn detach(&self, nexus: &Nexus) -> bool {
        let mut map = self.lock();
        let Some(state) = map.get_mut(nexus) else {
            return true;
        };
        state.sessions = state.sessions.saturating_sub(1);
        if state.sessions > 0 {
            return false;
        }
        let dropped = state.queue.len();
        map.remove(nexus);
        self.pending.fetch_sub(dropped, Ordering::Relaxed);
        true
    }

    /// Queues `sense` for every attached nexus that `which` selects.
    pub(crate) fn raise(&self, which: impl Fn(&Nexus) -> bool, sense: Sense) {
        let mut map = self.lock();
        for (nexus, state) in map.iter_mut() {
            if !which(nexus) {
                continue;
            }
            if state
                .queue
                .iter()
                .any(|s| s.asc == sense.asc && s.ascq == sense.ascq)
            {
                continue;
            }
            if state.queue.len() >= QUEUE_MAX {
                state.queue.pop_front();
            } else {
                self.pending.fetch_add(1, Ordering::Relaxed);
            }
            state.queue.push_back(sense);
        }
    }

    /// What a command with `opcode` from `nexus` meets.
    pub(crate) fn deliver(&self, nexus: &Nexus, opcode: u8) -> Delivery {
        if self.pending.load(Ordering::Relaxed) == 0 {
            return Delivery::Run;
        }
        // SPC-5 5.14: INQUIRY and REPORT LUNS run and leave the condition.
        if opcode == INQUIRY || opcode == REPORT_LUNS {
            return Delivery::Run;
        }
        let mut map = self.lock();
        let Some(sense) = map.get_mut(nexus).and_then(|s| s.queue.pop_front()) else {
            return Delivery::Run;
        };
        self.pending.fetch_sub(1, Ordering::Relaxed);
        if opcode == REQUEST_SENSE {
            Delivery::AsSense(sense)
        } else {
            Delivery::Report(sense)
        }
    }

    /// Moves every condition still queued here to `to`, for the nexuses
    /// attached there, oldest first and ahead of what `to` queued already
    /// (a unit replacing this one: no nexus loses a condition, and none
    /// hears one twice, since it leaves this unit as it goes).
    pub(crate) fn hand_over(&self, to: &Attentions) {
        let queued: Vec<(Nexus, VecDeque<Sense>)> = {
            let mut map = self.lock();
            let moved = map
                .iter_mut()
                .filter(|(_, s)| !s.queue.is_empty())
                .map(|(n, s)| (n.clone(), std::mem::take(&mut s.queue)))
                .collect::<Vec<_>>();
            let count: usize = moved.iter().map(|(_, q)| q.len()).sum();
            self.pending.fetch_sub(count, Ordering::Relaxed);
            moved
        };
        let mut map = to.lock();
        for (nexus, old) in queued {
            let Some(state) = map.get_mut(&nexus) else {
                continue;
            };
            let mut queue = old;
            for sense in state.queue.drain(..) {
                if !queue
                    .iter()
                    .any(|s| s.asc == sense.asc && s.ascq == sense.ascq)
                {
                    queue.push_back(sense);
                }
            }
            while queue.len() > QUEUE_MAX {
                queue.pop_front();
            }
            let before = state.queue.len();
            to.pending
                .fetch_add(queue.len() - before, Ordering::Relaxed);
            state.queue = queue;
        }
    }

    /// The attached nexuses `which` selects (SPEC_I_PT by initiator name).
    pub(crate) fn attached(&self, which: impl Fn(&Nexus) -> bool) -> Vec<Nexus> {
        self.lock()
            .iter()
            .filter(|(n, s)| s.sessions > 0 && which(n))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Number of conditions queued for `nexus` (tests and metrics).
    pub(crate) fn queued(&self, nexus: &Nexus) -> usize {
        self.lock().get(nexus).map_or(0, |s| s.queue.len())
    }
}

/// Unit attention sense for ASC/ASCQ.
pub(crate) const fn unit_attention(asc: u8, ascq: u8) -> Sense {
    Sense::new(UNIT_ATTENTION, asc, ascq)
}

/// 29h/03h BUS DEVICE RESET FUNCTION OCCURRED: a LOGICAL UNIT RESET or TARGET RESET.
pub const RESET_OCCURRED: Sense = unit_attention(0x29, 0x03);
/// 29h/01h POWER ON OCCURRED: a cold reset.
pub const POWER_ON_OCCURRED: Sense = unit_attention(0x29, 0x01);
/// 2Ah/01h MODE PARAMETERS CHANGED.
pub const MODE_PARAMETERS_CHANGED: Sense = unit_attention(0x2a, 0x01);
/// 2Ah/03h RESERVATIONS PREEMPTED.
pub const RESERVATIONS_PREEMPTED: Sense = unit_attention(0x2a, 0x03);
/// 2Ah/04h RESERVATIONS RELEASED.
pub const RESERVATIONS_RELEASED: Sense = unit_attention(0x2a, 0x04);
/// 2Ah/05h REGISTRATIONS PREEMPTED.
pub const REGISTRATIONS_PREEMPTED: Sense = unit_attention(0x2a, 0x05);
/// 2Ah/09h CAPACITY DATA HAS CHANGED.
pub const CAPACITY_DATA_CHANGED: Sense = unit_attention(0x2a, 0x09);
/// 2Fh/00h COMMANDS CLEARED BY ANOTHER INITIATOR (PREEMPT AND ABORT, CLEAR TASK SET).
pub const COMMANDS_CLEARED_BY_ANOTHER_INITIATOR: Sense = unit_attention(0x2f, 0x00);

#[cfg(test)]
mod tests {
    use super::*;

    fn nexus(n: u8) -> Nexus {
        Nexus::new("iqn.2026-11.io.isoe:test", [0x40, 0, 0, 0, 0, n])
    }

    #[test]
    fn a_raised_condition_is_reported_once_then_the_command_runs() {
        let attentions = Attentions::default();
        let (a, b) = (nexus(1), nexus(2));
        attentions.attach(&a);
        attentions.attach(&b);
        attentions.raise(|n| n != &a, MODE_PARAMETERS_CHANGED);
        assert_eq!(attentions.deliver(&a, 0x00), Delivery::Run);
        assert_eq!(attentions.deliver(&b, INQUIRY), Delivery::Run);
        assert_eq!(
            attentions.deliver(&b, 0x00),
            Delivery::Report(MODE_PARAMETERS_CHANGED)
        );
        assert_eq!(attentions.deliver(&b, 0x00), Delivery::Run);
    }

    #[test]
    fn request_sense_takes_the_condition_and_duplicates_fold() {
        let attentions = Attentions::default();
        let a = nexus(1);
        attentions.attach(&a);
        attentions.raise(|_| true, RESET_OCCURRED);
        attentions.raise(|_| true, RESET_OCCURRED);
        assert_eq!(attentions.queued(&a), 1);
        assert_eq!(
            attentions.deliver(&a, REQUEST_SENSE),
            Delivery::AsSense(RESET_OCCURRED)
        );
        assert_eq!(attentions.queued(&a), 0);
    }

    #[test]
    fn queues_are_bounded_and_vanish_with_the_last_session() {
        let attentions = Attentions::default();
        let a = nexus(1);
        attentions.attach(&a);
        attentions.attach(&a);
        for ascq in 0..20 {
            attentions.raise(|_| true, unit_attention(0x3f, ascq));
        }
        assert_eq!(attentions.queued(&a), QUEUE_MAX);
        attentions.detach(&a);
        assert_eq!(attentions.queued(&a), QUEUE_MAX);
        attentions.detach(&a);
        assert_eq!(attentions.queued(&a), 0);
        assert_eq!(attentions.pending.load(Ordering::Relaxed), 0);
        // A nexus that never attached hears nothing.
        attentions.raise(|_| true, RESET_OCCURRED);
        assert_eq!(attentions.deliver(&a, 0x00), Delivery::Run);
    }
}
