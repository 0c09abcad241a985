//! The copy manager's own state and limits (SPC-4 6.3, 6.18): how many
//! descriptors an EXTENDED COPY may carry, how it moves data, and the copy
//! status a unit holds per I_T nexus and list identifier for RECEIVE COPY
//! RESULTS. EXTENDED COPY (`extended_copy`) writes it; RECEIVE COPY
//! RESULTS and the Third-party Copy VPD page (`copy_results`) read it.

use isoe_sync::MutexExt;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use crate::{Nexus, Sense};

/// MAXIMUM CSCD DESCRIPTOR COUNT (SPC-4 6.18.4): more than a source and a
/// destination, few enough to resolve cheaply.
pub(crate) const MAX_CSCD_DESCRIPTORS: u16 = 8;
/// MAXIMUM SEGMENT DESCRIPTOR COUNT.
pub(crate) const MAX_SEGMENT_DESCRIPTORS: u16 = 16;
/// MAXIMUM DESCRIPTOR LIST LENGTH: every CSCD and segment descriptor at their
/// maximum counts and the sizes we support.
pub(crate) const MAX_DESCRIPTOR_LIST_LENGTH: u32 = MAX_CSCD_DESCRIPTORS as u32
    * CSCD_DESCRIPTOR_LEN as u32
    + MAX_SEGMENT_DESCRIPTORS as u32 * BLOCK_TO_BLOCK_SEGMENT_LEN as u32;
/// MAXIMUM INLINE DATA LENGTH: no segment descriptor type we support uses
/// inline data.
pub(crate) const MAX_INLINE_DATA_LENGTH: u32 = 0;
/// Bytes moved per store read and write: bounds the memory one copy holds.
pub(crate) const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Identification descriptor CSCD descriptor type code (SPC-4 6.3.6.2).
pub(crate) const IDENTIFICATION_DESCRIPTOR: u8 = 0xe4;
/// Block device to block device segment descriptor type code (SPC-4 6.3.7.5).
pub(crate) const BLOCK_TO_BLOCK: u8 = 0x02;

/// Every CSCD descriptor type E0h-E9h is 32 bytes (SPC-4 6.3.6.1).
pub(crate) const CSCD_DESCRIPTOR_LEN: usize = 32;
/// Block to block segment descriptor: 4-byte header and DESCRIPTOR LENGTH 18h.
pub(crate) const BLOCK_TO_BLOCK_SEGMENT_LEN: usize = 28;

/// Copies whose status is held at once, per logical unit; the oldest
/// finished one makes room for a new one.
pub(crate) const HELD_COPIES_MAX: usize = 32;

/// SPC-4 6.3.1 LIST ID USAGE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListIdUsage {
    /// 00b: hold the copy status for RECEIVE COPY RESULTS.
    Hold,
    /// 10b: the list identifier is unique while the copy runs; nothing is held after.
    Discard,
    /// 11b: the list identifier means nothing.
    None,
}

/// What an EXTENDED COPY did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CopyOutcome {
    /// Segment descriptors processed completely.
    pub(crate) segments_processed: u16,
    /// Bytes written to copy destinations.
    pub(crate) transferred_bytes: u64,
    /// The sense the command ended with, if it failed.
    pub(crate) sense: Option<Sense>,
}

#[derive(Debug)]
struct HeldCopy {
    nexus: Nexus,
    list_id: u8,
    /// None while the copy runs.
    outcome: Option<CopyOutcome>,
}

/// Copy status held per (I_T nexus, list identifier), bounded.
#[derive(Debug, Default)]
pub(crate) struct CopyResults {
    held: Mutex<VecDeque<HeldCopy>>,
}

impl CopyResults {
    fn lock(&self) -> MutexGuard<'_, VecDeque<HeldCopy>> {
        self.held.lock_unpoisoned()
    }

    /// A copy with `list_id` starts: OPERATION IN PROGRESS if one from the
    /// same nexus still runs (SPC-4 6.3.1); older held status is replaced.
    pub(crate) fn begin(&self, nexus: &Nexus, list_id: u8) -> Result<(), Sense> {
        let mut held = self.lock();
        if let Some(i) = held
            .iter()
            .position(|h| h.list_id == list_id && &h.nexus == nexus)
        {
            if held[i].outcome.is_none() {
                return Err(Sense::operation_in_progress());
            }
            held.remove(i);
        }
        if held.len() == HELD_COPIES_MAX {
            let Some(oldest_done) = held.iter().position(|h| h.outcome.is_some()) else {
                // Every slot holds a running copy: no resources for another.
                return Err(Sense::new(
                    crate::sense::sense_key::ILLEGAL_REQUEST,
                    0x55,
                    0x03,
                ));
            };
            held.remove(oldest_done);
        }
        held.push_back(HeldCopy {
            nexus: nexus.clone(),
            list_id,
            outcome: None,
        });
        debug_assert!(held.len() <= HELD_COPIES_MAX);
        Ok(())
    }

    /// The copy ended: keep its outcome for RECEIVE COPY RESULTS, or forget it.
    pub(crate) fn finish(&self, nexus: &Nexus, list_id: u8, keep: bool, outcome: CopyOutcome) {
        let mut held = self.lock();
        let Some(i) = held
            .iter()
            .position(|h| h.list_id == list_id && &h.nexus == nexus)
        else {
            return;
        };
        if keep {
            held[i].outcome = Some(outcome);
        } else {
            held.remove(i);
        }
    }

    /// The held status of `list_id` from `nexus`: None (never or no longer
    /// held), Some(None) while running, Some(Some(outcome)) when done.
    /// Reporting a successful copy's completion releases it; a failed one
    /// stays for FAILED SEGMENT DETAILS.
    pub(crate) fn copy_status(&self, nexus: &Nexus, list_id: u8) -> Option<Option<CopyOutcome>> {
        let mut held = self.lock();
        let i = held
            .iter()
            .position(|h| h.list_id == list_id && &h.nexus == nexus)?;
        let outcome = held[i].outcome;
        if matches!(outcome, Some(CopyOutcome { sense: None, .. })) {
            held.remove(i);
        }
        Some(outcome)
    }

    /// Takes a finished, failed copy's outcome; running or successful
    /// copies have no failed segment details.
    pub(crate) fn take_failed(&self, nexus: &Nexus, list_id: u8) -> Option<Option<CopyOutcome>> {
        let mut held = self.lock();
        let i = held
            .iter()
            .position(|h| h.list_id == list_id && &h.nexus == nexus)?;
        match held[i].outcome {
            None => Some(None),
            Some(outcome) if outcome.sense.is_some() => {
                held.remove(i);
                Some(Some(outcome))
            }
            Some(_) => None,
        }
    }
}
