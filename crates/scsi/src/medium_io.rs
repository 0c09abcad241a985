//! A read, write or cache flush left to an asynchronous store.
//!
//! A unit whose store is asynchronous ([`isoe_store::Store::asynchronous`],
//! a network store) does not make READ, WRITE and SYNCHRONIZE CACHE itself:
//! it checks everything the command needs (unit attentions, access state,
//! reservations, the range, write protection) and hands the transport a
//! [`MediumIo`] in [`crate::Outcome::Medium`]. The transport gives it a
//! buffer and starts it ([`MediumIo::start`]); the store runs it and calls
//! back with the command's completion, from a thread of its own. So a
//! connection's thread never waits on the network, and many commands are in
//! flight at once.
//!
//! Such writes hold no range lock (there is nothing to hold it across): the
//! store's compare-and-write is atomic on its own
//! ([`isoe_store::Store::compare_and_write`]), and the unit refuses one it
//! could only make under its own lock (see `compare_and_write.rs`).

use std::fmt;
use std::sync::Arc;

use isoe_store::{Io, IoKind, Store};

use crate::media::{Access, MediaLog};
use crate::Completion;

/// A checked medium operation for the transport to start. Boxed: the
/// command path of every unit carries an `Option<MediumIo>` and returns an
/// [`crate::Outcome`] that may hold one, and a pointer keeps both small
/// for units whose store is not asynchronous.
pub struct MediumIo(Box<Operation>);

struct Operation {
    kind: IoKind,
    /// Bytes a write takes from the Data-Out (whole blocks).
    write_len: usize,
    store: Arc<dyn Store>,
    media_log: Arc<MediaLog>,
}

impl fmt::Debug for MediumIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediumIo")
            .field("kind", &self.0.kind)
            .finish()
    }
}

impl MediumIo {
    pub(crate) fn new(
        kind: IoKind,
        write_len: usize,
        store: &Arc<dyn Store>,
        media_log: &Arc<MediaLog>,
    ) -> Self {
        debug_assert!(store.asynchronous().is_some());
        Self(Box::new(Operation {
            kind,
            write_len,
            store: Arc::clone(store),
            media_log: Arc::clone(media_log),
        }))
    }

    /// Whether the operation reads (its buffer becomes the Data-In).
    pub fn is_read(&self) -> bool {
        matches!(self.0.kind, IoKind::Read { .. })
    }

    /// Starts the operation with `buffer`: for a read, an empty buffer the
    /// data is appended to; for a write, the command's Data-Out (of which
    /// the whole blocks the CDB asked for are written); for a flush, any
    /// buffer, given back. `done` runs once, on the store's thread, with
    /// the buffer and the command's completion (on a failure the buffer
    /// holds no Data-In).
    pub fn start(
        self,
        mut buffer: Vec<u8>,
        done: impl FnOnce(Vec<u8>, Completion) + Send + 'static,
    ) {
        let Operation {
            kind,
            write_len,
            store,
            media_log,
        } = *self.0;
        let access = match kind {
            IoKind::Read { .. } => {
                buffer.clear();
                Access::Read
            }
            IoKind::Write { .. } => {
                buffer.truncate(write_len);
                Access::Write
            }
            IoKind::Flush => Access::Write,
        };
        let Some(asynchronous) = store.asynchronous() else {
            unreachable!("a MediumIo is made only for an asynchronous store");
        };
        asynchronous.submit(
            Io { kind, buffer },
            Box::new(move |io, result| {
                let mut buffer = io.buffer;
                let completion = match result {
                    Ok(()) => Completion::good(),
                    Err(error) => {
                        if access == Access::Read {
                            buffer.clear();
                        }
                        Completion::check_condition(media_log.failed(access, &error))
                    }
                };
                done(buffer, completion);
            }),
        );
    }

    /// Runs the operation and waits for it, on a thread that may wait.
    pub fn run(self, buffer: Vec<u8>) -> (Vec<u8>, Completion) {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.start(buffer, move |buffer, completion| {
            // The receiver waits below; it is gone only if this thread is.
            let _ = sender.send((buffer, completion));
        });
        receiver.recv().unwrap_or_else(|_| {
            (
                Vec::new(),
                Completion::check_condition(crate::Sense::unrecovered_read_error()),
            )
        })
    }
}
