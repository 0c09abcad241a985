//! Store calls made only when they need not wait on a device.
//!
//! An event loop that serves many connections may make a store call itself
//! when the call will not sleep (the data is in the page cache) and must
//! hand it to a thread that may block otherwise. [`without_waiting`] runs a
//! closure with the calling thread in that mode: reads of files and block
//! devices are made with `preadv2(RWF_NOWAIT)`, and every call that would
//! (or might) wait fails at once with [`StoreError::WouldBlock`] instead
//! (writes: buffered writes with `RWF_NOWAIT` are refused by most file
//! systems; flushes, deallocation and allocation queries always may wait).
//! The caller learns that some call would have waited, drops what the
//! closure produced, and runs the whole operation again where blocking is
//! allowed; it must only try operations whose retry is harmless. Memory
//! stores never wait and ignore the mode.

use crate::StoreError;
use std::cell::Cell;

thread_local! {
    /// None: calls may wait. Some(blocked): they may not; `blocked` once
    /// one would have.
    static MODE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Runs `f` with this thread's store calls made only if they need not
/// wait; returns what it gave and whether any call would have waited (then
/// failed with [`StoreError::WouldBlock`]).
pub fn without_waiting<T>(f: impl FnOnce() -> T) -> (T, bool) {
    let outer = MODE.with(|m| m.replace(Some(false)));
    let value = f();
    let blocked = MODE.with(|m| m.replace(outer)) == Some(true);
    (value, blocked)
}

/// For a store made outside this crate whose call `op` would wait on
/// something (a device, a cluster): the error to return instead, noted for
/// [`without_waiting`], when the calling thread may not wait; `None` when
/// it may.
pub fn refuse_to_wait(op: &'static str) -> Option<StoreError> {
    must_not_wait().then(|| would_block(op))
}

/// Whether this thread's store calls must not wait ([`without_waiting`]).
pub(crate) fn must_not_wait() -> bool {
    MODE.with(|m| m.get().is_some())
}

/// The error of call `op` that would have waited; notes it for
/// [`without_waiting`].
pub(crate) fn would_block(op: &'static str) -> StoreError {
    MODE.with(|m| {
        if m.get().is_some() {
            m.set(Some(true));
        }
    });
    StoreError::WouldBlock { op }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_outside_refuses_to_wait_only_where_asked() {
        assert!(refuse_to_wait("pread").is_none());
        let (refused, blocked) = without_waiting(|| refuse_to_wait("pread"));
        assert!(matches!(
            refused,
            Some(StoreError::WouldBlock { op: "pread" })
        ));
        assert!(blocked);
    }

    #[test]
    fn the_mode_is_scoped_and_reports_a_call_that_would_wait() {
        assert!(!must_not_wait());
        let ((), blocked) = without_waiting(|| assert!(must_not_wait()));
        assert!(!blocked);
        let (error, blocked) = without_waiting(|| would_block("fdatasync"));
        assert!(blocked);
        assert!(matches!(error, StoreError::WouldBlock { op: "fdatasync" }));
        assert!(!must_not_wait(), "the mode ends with the closure");
    }
}
