//! `FailingStore`: a store that starts failing after a countdown, for tests
//! of what the layers above do when media fail.
//!
//! It wraps any store and passes every operation through until a chosen
//! number of the operations it watches have succeeded; from then on each
//! watched operation fails, without reaching the inner store, with the
//! error the operating system would have given (EIO, ENOSPC or EDQUOT),
//! classified by [`StoreError::io`] exactly as a real failure is. A full
//! disk stays full: once the countdown has run out, every watched operation
//! fails until [`FailingStore::recover`].
//!
//! ```
//! use isoe_store::{Fault, FailingStore, MemoryStore, Ops, Store, StoreError};
//!
//! // Two writes succeed, the third finds the file system full.
//! let store = FailingStore::new(MemoryStore::new(1 << 20), Ops::WRITE, 2, Fault::NoSpace);
//! store.write_at(0, &[1; 512]).unwrap();
//! store.write_at(512, &[2; 512]).unwrap();
//! let error = store.write_at(1024, &[3; 512]).unwrap_err();
//! assert!(error.is_no_space());
//! // Reads are not watched: they still work.
//! let mut back = [0u8; 512];
//! store.read_at(512, &mut back).unwrap();
//! assert_eq!(back, [2; 512]);
//! assert_eq!(store.failures(), 1);
//! ```

use std::ops::BitOr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Extent, Store, StoreError};

/// Which operations a [`FailingStore`] watches: counts down, then fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ops(u8);

impl Ops {
    /// `read_at`, `read_append` and `allocation` (the hole map is read too).
    pub const READ: Ops = Ops(1);
    /// `write_at`.
    pub const WRITE: Ops = Ops(1 << 1);
    /// `flush` (fdatasync on files).
    pub const FLUSH: Ops = Ops(1 << 2);
    /// `unmap` (fallocate PUNCH_HOLE on files).
    pub const UNMAP: Ops = Ops(1 << 3);
    /// `write_zeroes` (fallocate ZERO_RANGE on files).
    pub const WRITE_ZEROES: Ops = Ops(1 << 4);
    /// Every operation above.
    pub const ALL: Ops = Ops(0b1_1111);

    /// Whether every operation of `other` is in `self`.
    pub fn contains(self, other: Ops) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Ops {
    type Output = Ops;

    fn bitor(self, other: Ops) -> Ops {
        Ops(self.0 | other.0)
    }
}

/// The error a [`FailingStore`] injects, as the operating system reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// EIO: the device or file system failed the I/O.
    Io,
    /// ENOSPC: no space left on the file system.
    NoSpace,
    /// EDQUOT: the user's disk quota is used up.
    QuotaExceeded,
}

impl Fault {
    /// The errno this fault stands for.
    pub fn errno(self) -> i32 {
        match self {
            Fault::Io => libc::EIO,
            Fault::NoSpace => libc::ENOSPC,
            Fault::QuotaExceeded => libc::EDQUOT,
        }
    }
}

/// A store that fails the operations in `ops` once `succeed` of them have
/// gone through (see the module documentation).
#[derive(Debug)]
pub struct FailingStore<S> {
    inner: S,
    ops: Ops,
    fault: Fault,
    /// Watched operations still allowed to succeed.
    remaining: AtomicU64,
    /// Failures injected so far.
    failures: AtomicU64,
}

impl<S: Store> FailingStore<S> {
    /// Wraps `inner`: the first `succeed` operations of kinds `ops` pass
    /// through; every later one fails with `fault`. Operations not in
    /// `ops` always pass through and are not counted.
    pub fn new(inner: S, ops: Ops, succeed: u64, fault: Fault) -> Self {
        Self {
            inner,
            ops,
            fault,
            remaining: AtomicU64::new(succeed),
            failures: AtomicU64::new(0),
        }
    }

    /// How many operations have been failed so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The fault is gone (space was freed, the device came back): every
    /// operation passes through from now on.
    pub fn recover(&self) {
        self.remaining.store(u64::MAX, Ordering::Relaxed);
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Counts one operation of kind `op` at `offset`: Ok to let it through,
    /// or the injected error.
    fn check(&self, op: Ops, name: &'static str, offset: u64) -> Result<(), StoreError> {
        if !self.ops.contains(op) {
            return Ok(());
        }
        let allowed = self
            .remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if allowed {
            return Ok(());
        }
        self.failures.fetch_add(1, Ordering::Relaxed);
        let source = std::io::Error::from_raw_os_error(self.fault.errno());
        Err(StoreError::io(name, offset, source))
    }
}

impl<S: Store> Store for FailingStore<S> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.check(Ops::READ, "read", offset)?;
        self.inner.read_at(offset, buf)
    }

    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), StoreError> {
        self.check(Ops::READ, "read", offset)?;
        self.inner.read_append(offset, len, out)
    }

    fn unwritten_read_bytes(&self) -> Option<u64> {
        self.inner.unwritten_read_bytes()
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.check(Ops::WRITE, "write", offset)?;
        self.inner.write_at(offset, buf)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.check(Ops::FLUSH, "flush", 0)?;
        self.inner.flush()
    }

    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.check(Ops::UNMAP, "unmap", offset)?;
        self.inner.unmap(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.check(Ops::WRITE_ZEROES, "write_zeroes", offset)?;
        self.inner.write_zeroes(offset, len)
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        self.check(Ops::READ, "allocation", offset)?;
        self.inner.allocation(offset, len)
    }
}
