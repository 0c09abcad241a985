//! The outcome of one command: status plus sense.

use crate::{Sense, Status};

/// Status plus sense for one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The SCSI status byte.
    pub status: Status,
    /// Sense data; present exactly when status is CHECK CONDITION.
    pub sense: Option<Sense>,
}

impl Completion {
    /// GOOD, no sense.
    pub const fn good() -> Self {
        Self {
            status: Status::Good,
            sense: None,
        }
    }

    /// CHECK CONDITION with `sense`.
    pub const fn check_condition(sense: Sense) -> Self {
        Self {
            status: Status::CheckCondition,
            sense: Some(sense),
        }
    }

    /// RESERVATION CONFLICT, no sense (SAM-5 5.3.1).
    pub const fn reservation_conflict() -> Self {
        Self {
            status: Status::ReservationConflict,
            sense: None,
        }
    }

    /// Whether the command succeeded (GOOD or CONDITION MET).
    pub fn is_good(&self) -> bool {
        matches!(self.status, Status::Good | Status::ConditionMet)
    }
}

impl From<Result<(), Sense>> for Completion {
    fn from(result: Result<(), Sense>) -> Self {
        match result {
            Ok(()) => Self::good(),
            Err(sense) => Self::check_condition(sense),
        }
    }
}
