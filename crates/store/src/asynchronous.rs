//! Stores that start a read, write or cache flush and report its end later.
//!
//! A network store (Ceph RBD) answers in hundreds of microseconds and serves
//! many requests at once; a thread that waited for each would serve one.
//! Such a store offers [`AsyncStore`] beside the blocking [`crate::Store`]
//! calls: the caller hands over a request with its buffer and a completion,
//! and goes on; the store calls the completion once, from a thread of its
//! own, in whatever order its requests end. The blocking calls remain for
//! the rarer operations (deallocation, allocation queries, compare and
//! write), which the target runs on threads that may wait.

use crate::StoreError;

/// What a request asks of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// Appends `len` bytes from `offset` to the request's buffer.
    Read {
        /// First byte.
        offset: u64,
        /// Bytes to read.
        len: usize,
    },
    /// Writes the whole buffer at `offset`; `fua` asks that it be durable
    /// when the request ends.
    Write {
        /// First byte.
        offset: u64,
        /// Force unit access.
        fua: bool,
    },
    /// Makes every write that ended before this request durable.
    Flush,
}

/// One request and the buffer it reads into or writes from; the store
/// gives both back to the completion.
#[derive(Debug)]
pub struct Io {
    /// What to do.
    pub kind: IoKind,
    /// A read appends to it (on error it is as it was); a write writes it
    /// whole; a flush ignores it.
    pub buffer: Vec<u8>,
}

/// What runs when a request ends: the request back, and its result.
pub type IoDone = Box<dyn FnOnce(Io, Result<(), StoreError>) + Send>;

/// A store that runs requests asynchronously, many at once.
pub trait AsyncStore: Send + Sync {
    /// Starts `io`. `done` runs exactly once, on a thread of the store's
    /// (or on this one, before `submit` returns, when the request could
    /// not be started), with the request and its result. Requests may end
    /// in any order; two writes to overlapping ranges in flight together
    /// land in an unspecified order, as on a disk.
    fn submit(&self, io: Io, done: IoDone);
}
