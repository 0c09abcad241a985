//! Commands that outlast their dispatch. A SANITIZE without IMMED runs for
//! as long as the medium takes to overwrite, and SAM-5 lets the other
//! commands of the I_T nexus (TEST UNIT READY, INQUIRY, REPORT LUNS) complete
//! meanwhile: such a command checks its CDB and changes the unit's state
//! when dispatched, then hands the rest of its work back as a [`Background`]
//! for the transport to run off its connection thread.

use std::fmt;

use crate::Completion;

/// The rest of a command's work, already admitted: running it yields the
/// command's completion (it sends no Data-In).
pub struct Background {
    work: Box<dyn FnOnce() -> Completion + Send>,
}

impl Background {
    pub(crate) fn new(work: impl FnOnce() -> Completion + Send + 'static) -> Self {
        Self {
            work: Box::new(work),
        }
    }

    /// Does the work, on whatever thread the caller chose; blocks until done.
    pub fn run(self) -> Completion {
        (self.work)()
    }
}

impl fmt::Debug for Background {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Background")
    }
}

/// What [`crate::LogicalUnit::start`] made of a command.
#[derive(Debug)]
pub enum Outcome {
    /// Finished: status, sense, and Data-In in the caller's buffer.
    Done(Completion),
    /// Admitted; the command completes when this work returns.
    Later(Background),
    /// Checked; the command completes when this read, write or flush of
    /// an asynchronous store ends (see [`crate::MediumIo`]).
    Medium(crate::MediumIo),
    /// Finished GOOD; its Data-In is these bytes of the store's own memory,
    /// lent rather than copied into the caller's buffer (a large READ from
    /// a store that lends, [`isoe_store::Store::lend`]).
    Lent(isoe_store::Lent),
}

/// The completion of an [`Outcome::Lent`] for a caller that sends from its
/// own buffer: the lent Data-In copied into `data_in`, GOOD.
pub fn copy_lent(lent: &isoe_store::Lent, data_in: &mut Vec<u8>) -> crate::Completion {
    data_in.clear();
    lent.copy_to(data_in);
    crate::Completion::good()
}
