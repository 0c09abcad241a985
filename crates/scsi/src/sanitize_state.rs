//! Where a logical unit stands with sanitizing (SBC-4 4.11.2): idle, in
//! progress, or failed; every command's gate reads it, and SANITIZE
//! (`sanitize`) moves it.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::Sense;

/// Sanitize states (SBC-4 4.11.2).
const IDLE: u8 = 0;
const IN_PROGRESS: u8 = 1;
/// The last sanitize failed and was sent with AUSE=0: only another
/// SANITIZE gets the unit out.
const FAILED: u8 = 2;
/// The last sanitize failed and was sent with AUSE=1: EXIT FAILURE MODE
/// gets the unit out too.
const FAILED_EXIT_ALLOWED: u8 = 3;

/// Where a logical unit stands with sanitizing; shared with the thread that
/// runs an IMMED sanitize.
#[derive(Debug, Default)]
pub(crate) struct SanitizeState {
    state: AtomicU8,
}

impl SanitizeState {
    /// Moves from idle or failed to in progress; false if one already runs.
    pub(crate) fn start(&self) -> bool {
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if current == IN_PROGRESS {
                return false;
            }
            match self.state.compare_exchange(
                current,
                IN_PROGRESS,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// A started sanitize ended.
    pub(crate) fn finish(&self, succeeded: bool, allow_exit: bool) {
        let next = match (succeeded, allow_exit) {
            (true, _) => IDLE,
            (false, false) => FAILED,
            (false, true) => FAILED_EXIT_ALLOWED,
        };
        let previous = self.state.swap(next, Ordering::AcqRel);
        debug_assert_eq!(previous, IN_PROGRESS);
    }

    /// SBC-4 4.11.2: NOT READY while a sanitize runs, MEDIUM ERROR after
    /// one failed.
    pub(crate) fn check_medium(&self) -> Result<(), Sense> {
        match self.state.load(Ordering::Acquire) {
            IDLE => Ok(()),
            IN_PROGRESS => Err(Sense::sanitize_in_progress()),
            _ => Err(Sense::sanitize_command_failed()),
        }
    }

    /// Whether a sanitize runs now.
    pub(crate) fn in_progress(&self) -> bool {
        self.state.load(Ordering::Acquire) == IN_PROGRESS
    }

    /// EXIT FAILURE MODE (SBC-4 5.30.2.4): back to idle if the failed
    /// sanitize allowed it; nothing to do on a unit that did not fail.
    pub(crate) fn exit_failure_mode(&self) -> Result<(), Sense> {
        match self.state.compare_exchange(
            FAILED_EXIT_ALLOWED,
            IDLE,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) | Err(IDLE) => Ok(()),
            Err(IN_PROGRESS) => Err(Sense::sanitize_in_progress()),
            Err(_) => Err(Sense::invalid_field_in_cdb(1, 4)),
        }
    }
}
