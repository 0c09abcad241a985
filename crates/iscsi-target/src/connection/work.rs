//! Work a connection hands its driver to run where blocking is allowed
//! ([`super::Action::Run`]), and what running it gave ([`Finished`]), for
//! [`super::Connection::complete_work`]. See `execute.rs` for when a
//! command's work goes out and how its completion comes back.

use super::target_view::TargetView;
use crate::lun_table::LunTable;
use crate::registry::Server;
use crate::session::{Session, StoreWork};
use isoe_scsi::{Background, Completion, MediumIo, Outcome, Residual};
use std::sync::Arc;

/// Work a connection hands its driver, to run on a thread that may block.
/// It counts as its session's store work until it has run
/// ([`crate::session::StoreWork`]).
pub struct Work {
    pub(super) job: Job,
    pub(super) counted: Option<StoreWork>,
}

pub(super) enum Job {
    /// The rest of an admitted command; it produces no Data-In.
    Later(Background),
    /// A whole command, routed to its unit on the thread that runs it.
    Command(Box<CommandJob>),
    /// A checked read, write or flush for an asynchronous store, with the
    /// buffer it reads into or writes from ([`Work::start`]).
    Medium(MediumIo, Vec<u8>),
}

/// Everything a command needs away from its connection.
pub(super) struct CommandJob {
    /// The session the command came in.
    pub(super) session: Arc<Session>,
    /// The LUN table it started with.
    pub(super) luns: Arc<LunTable>,
    /// The server, for the target's view.
    pub(super) server: Arc<Server>,
    /// The LUN it addresses, if it addresses one.
    pub(super) lun: Option<u16>,
    /// The W bit.
    pub(super) write: bool,
    /// Its Expected Data Transfer Length.
    pub(super) expected_length: u32,
    /// Its CDB.
    pub(super) cdb: Vec<u8>,
    /// Its write data.
    pub(super) data_out: Vec<u8>,
    /// A buffer for its Data-In.
    pub(super) data_in: Vec<u8>,
}

/// What running a [`Work`] gave, for [`super::Connection::complete_work`].
pub struct Finished {
    pub(super) completion: Completion,
    /// The command's Data-In (empty for work left for later).
    pub(super) data_in: Vec<u8>,
    /// The write data buffer, back for reuse.
    pub(super) data_out: Vec<u8>,
    /// The residual the router worked out, for a whole command.
    pub(super) residual: Option<Residual>,
}

impl Finished {
    /// The status and sense the work ended with.
    pub fn completion(&self) -> &Completion {
        &self.completion
    }
}

impl Work {
    /// Does the work on the calling thread; blocks until done.
    pub fn run(self) -> Finished {
        let Work { job, counted } = self;
        let finished = match job {
            Job::Later(background) => Finished {
                completion: background.run(),
                data_in: Vec::new(),
                data_out: Vec::new(),
                residual: None,
            },
            Job::Command(job) => (*job).run(),
            Job::Medium(io, buffer) => {
                let read = io.is_read();
                let (buffer, completion) = io.run(buffer);
                Finished::of_medium(read, buffer, completion)
            }
        };
        drop(counted);
        finished
    }

    /// Starts work that needs no thread of its own (a store operation that
    /// completes asynchronously): `done` runs once it ended, on the store's
    /// thread. Any other work comes back, for a thread that may block.
    pub fn start(self, done: impl FnOnce(Finished) + Send + 'static) -> Result<(), Work> {
        match self.job {
            Job::Medium(io, buffer) => {
                let read = io.is_read();
                let counted = self.counted;
                io.start(buffer, move |buffer, completion| {
                    drop(counted);
                    done(Finished::of_medium(read, buffer, completion));
                });
                Ok(())
            }
            job => Err(Work {
                job,
                counted: self.counted,
            }),
        }
    }
}

impl Finished {
    /// What a store operation gave: a read's buffer is the Data-In, a
    /// write's goes back for reuse.
    fn of_medium(read: bool, buffer: Vec<u8>, completion: Completion) -> Finished {
        let (data_in, data_out) = if read {
            (buffer, Vec::new())
        } else {
            (Vec::new(), buffer)
        };
        Finished {
            completion,
            data_in,
            data_out,
            residual: None,
        }
    }
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.job {
            Job::Later(_) => f.write_str("Work::Later"),
            Job::Command(job) => write!(f, "Work::Command({:02x})", job.cdb[0]),
            Job::Medium(io, _) => write!(f, "Work::Medium({io:?})"),
        }
    }
}

impl CommandJob {
    fn run(self) -> Finished {
        let CommandJob {
            session,
            luns,
            server,
            lun,
            write,
            expected_length,
            cdb,
            data_out,
            mut data_in,
        } = self;
        let view = TargetView {
            luns: &luns,
            server: &server,
        };
        let request = isoe_scsi::Request {
            lun,
            write,
            expected_length,
            cdb: &cdb,
            data_out: &data_out,
            // File and block stores keep no page CRCs.
            page_digests: None,
        };
        let (outcome, residual) = isoe_scsi::route(&session.nexus, &view, &request, &mut data_in);
        let completion = match outcome {
            Outcome::Done(completion) => completion,
            // Sent from this job's buffer: the I/O thread's result goes
            // back through the worker's mailbox, a copy is due anyway.
            Outcome::Lent(lent) => isoe_scsi::copy_lent(&lent, &mut data_in),
            // This thread may block: what the unit left for later runs here.
            Outcome::Later(background) => {
                data_in.clear();
                background.run()
            }
            Outcome::Medium(io) => {
                let read = io.is_read();
                let buffer = if read {
                    std::mem::take(&mut data_in)
                } else {
                    data_out.clone()
                };
                let (buffer, completion) = io.run(buffer);
                if read {
                    data_in = buffer;
                }
                completion
            }
        };
        Finished {
            completion,
            data_in,
            data_out,
            residual: Some(residual),
        }
    }
}
