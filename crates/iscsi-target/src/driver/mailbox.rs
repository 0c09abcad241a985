//! How other threads (acceptors, other workers, the I/O pool) reach a
//! worker: a queue of messages and the eventfd that wakes the worker's
//! epoll.

use super::slot::Slot;
use crate::connection::Finished;
use isoe_sync::MutexExt;
use rustix::event::{eventfd, EventfdFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;

/// What other threads ask of a worker.
pub(crate) enum Msg {
    /// Serve this accepted connection, admitted as `serial`.
    Adopt { serial: u64, accepted: Accepted },
    /// See [`crate::connection::Action::Wake`].
    Wake(u64),
    /// Close this connection: it was evicted to make room for a new one
    /// ([`crate::admission::Eviction`]).
    Evict(u64),
    /// Work handed to the I/O pool, or started on an asynchronous store,
    /// is done.
    Done {
        serial: u64,
        token: u64,
        finished: Finished,
    },
    /// Serve this connection, moved here from another worker to be beside
    /// the other connections of its session.
    Migrate { serial: u64, slot: Box<Slot> },
    /// Close every connection and end.
    Stop,
}

/// A worker's queue of messages and the eventfd that wakes its epoll.
pub(crate) struct Mailbox {
    queue: Mutex<Vec<Msg>>,
    event: OwnedFd,
}

impl Mailbox {
    /// An empty mailbox with its eventfd.
    pub(crate) fn new() -> std::io::Result<Mailbox> {
        let event = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Mailbox {
            queue: Mutex::new(Vec::new()),
            event,
        })
    }

    /// Queues `msg` and wakes the worker if the queue was empty (the worker
    /// reads the eventfd before it takes the queue, so no message is missed).
    pub(crate) fn post(&self, msg: Msg) {
        let was_empty = {
            let mut queue = self.queue.lock_unpoisoned();
            queue.push(msg);
            queue.len() == 1
        };
        if was_empty {
            let _ = rustix::io::write(&self.event, &1u64.to_ne_bytes());
        }
    }

    /// Moves every message queued into `into`, and clears the wake-up.
    pub(super) fn take(&self, into: &mut Vec<Msg>) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.event, &mut count);
        let mut queue = self.queue.lock_unpoisoned();
        into.append(&mut queue);
    }
}

/// The eventfd, for the worker's epoll: readable while messages wait.
impl AsFd for Mailbox {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }
}

/// A connection as its acceptor hands it over.
pub(crate) struct Accepted {
    pub(crate) stream: TcpStream,
    /// The address the initiator reached.
    pub(crate) local: SocketAddr,
    /// The tag of the portal group `local` belongs to.
    pub(crate) portal_group_tag: u16,
    pub(crate) peer: SocketAddr,
}
