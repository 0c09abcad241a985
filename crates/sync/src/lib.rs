//! isoe-sync: isoe's one way through a poisoned lock.
//!
//! A standard [`Mutex`] or [`RwLock`] is poisoned when a thread panics
//! while it holds the guard, and from then on every `lock`, `read`,
//! `write` and [`Condvar`] wait on it returns `Err(PoisonError)`, which
//! still carries the guard. Poisoning protects nothing: the value is there
//! either way, and the flag only reports that a panic happened inside
//! some critical section. isoe always takes the guard and carries on
//! ([`MutexExt::lock_unpoisoned`], [`RwLockExt::read_unpoisoned`],
//! [`RwLockExt::write_unpoisoned`], [`CondvarExt::wait_unpoisoned`], ...),
//! for these reasons:
//!
//! - A panic in isoe ends only the thread it happens on. No profile
//!   aborts on panic and nothing outside the tests catches one, so a bug
//!   that panics takes down one worker, one pool thread, one acceptor, one
//!   admin client or one poller, and the process goes on serving with the
//!   rest.
//! - The state those threads share (the target's sessions and LUN tables,
//!   a unit's reservations and unit attentions, a memory LUN's chunks, the
//!   metrics, an RBD image's requests in flight) is reached from many
//!   threads. Unwrapping a poisoned lock would turn that one panic into a
//!   panic of every thread that touches the state afterwards, shutdown
//!   included: every initiator of the target could lose its LUNs over one
//!   bug.
//! - So a lock's critical sections are written for it instead: what a
//!   panic part-way through one leaves behind must be a state the rest of
//!   the code accepts. Many changes under these locks are one insert, push,
//!   remove or assignment, which either happened or did not; where a site
//!   relies on something more (the state made whole before anything that
//!   may panic; a half-done change that errs towards doing the work again),
//!   a comment at the site says so.
//!
//! The poison flag stays set; each later call goes through the same `Err`
//! and hands back the guard, as the first did. The methods are
//! `#[inline]` wrappers of `unwrap_or_else(PoisonError::into_inner)`,
//! which every site wrote out before, so the datapath's locks (a memory
//! LUN's chunks, the range locks, a worker's mailbox) compile as they did:
//! `isoe-store`'s release assembly is the same with either spelling.
//!
//! Nothing here is for a lock whose holder may be left mid-change in a way
//! the state cannot tolerate: such a lock needs its own answer (unwrap, or
//! recovery), written at its site, not this one.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![forbid(unsafe_code)]

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    WaitTimeoutResult,
};
use std::time::Duration;

/// [`Mutex`] calls that carry on past poisoning (see the crate doc).
pub trait MutexExt<T: ?Sized> {
    /// [`Mutex::lock`], poisoned or not.
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T>;

    /// [`Mutex::get_mut`], poisoned or not.
    fn get_mut_unpoisoned(&mut self) -> &mut T;
}

impl<T: ?Sized> MutexExt<T> for Mutex<T> {
    #[inline]
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    fn get_mut_unpoisoned(&mut self) -> &mut T {
        self.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock`] calls that carry on past poisoning (see the crate doc).
pub trait RwLockExt<T: ?Sized> {
    /// [`RwLock::read`], poisoned or not.
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T>;

    /// [`RwLock::write`], poisoned or not.
    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    #[inline]
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`Condvar`] waits that carry on when the mutex they take back is
/// poisoned (see the crate doc).
pub trait CondvarExt {
    /// [`Condvar::wait`], the mutex poisoned or not.
    fn wait_unpoisoned<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;

    /// [`Condvar::wait_timeout`], the mutex poisoned or not.
    fn wait_timeout_unpoisoned<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult);
}

impl CondvarExt for Condvar {
    #[inline]
    fn wait_unpoisoned<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    fn wait_timeout_unpoisoned<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_timeout(guard, timeout)
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    /// Panics on another thread while `change` holds the lock, after it
    /// changed the value part-way.
    fn poison<L: Send + Sync + 'static>(lock: &Arc<L>, change: fn(&L)) {
        let held = Arc::clone(lock);
        let ended = thread::spawn(move || {
            change(&held);
        })
        .join();
        assert!(ended.is_err(), "the thread was to panic");
    }

    #[test]
    fn a_poisoned_mutex_still_yields_the_value_the_panic_left() {
        let lock = Arc::new(Mutex::new(vec![1, 2]));
        poison(&lock, |m| {
            let mut v = m.lock().unwrap();
            v.push(3);
            panic!("on purpose, holding the mutex");
        });
        assert!(lock.is_poisoned());
        assert_eq!(*lock.lock_unpoisoned(), [1, 2, 3]);
        // Still poisoned, and still usable.
        lock.lock_unpoisoned().push(4);
        assert!(lock.is_poisoned());
        assert_eq!(*lock.lock_unpoisoned(), [1, 2, 3, 4]);
        let mut lock = Arc::into_inner(lock).unwrap();
        lock.get_mut_unpoisoned().push(5);
        assert_eq!(*lock.get_mut_unpoisoned(), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_poisoned_rwlock_still_yields_the_value_the_panic_left() {
        let lock = Arc::new(RwLock::new(String::from("before")));
        poison(&lock, |l| {
            let mut s = l.write().unwrap();
            s.push_str(", during");
            panic!("on purpose, holding the write guard");
        });
        assert!(lock.is_poisoned());
        assert_eq!(*lock.read_unpoisoned(), "before, during");
        lock.write_unpoisoned().push_str(", after");
        assert_eq!(*lock.read_unpoisoned(), "before, during, after");
    }

    #[test]
    fn a_wait_on_a_poisoned_mutex_still_returns_its_guard() {
        let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
        poison(&pair, |(m, _)| {
            let mut held = m.lock().unwrap();
            *held = 1;
            panic!("on purpose, holding the mutex");
        });
        assert!(pair.0.is_poisoned());

        // Nobody notifies: the wait times out and takes the poisoned
        // mutex back.
        let (guard, waited) = pair
            .1
            .wait_timeout_unpoisoned(pair.0.lock_unpoisoned(), Duration::from_millis(1));
        assert!(waited.timed_out());
        assert_eq!(*guard, 1);
        drop(guard);

        let waiter = {
            let pair = Arc::clone(&pair);
            thread::spawn(move || {
                let (m, c) = &*pair;
                let mut guard = m.lock_unpoisoned();
                while *guard < 2 {
                    guard = c.wait_unpoisoned(guard);
                }
                *guard
            })
        };
        *pair.0.lock_unpoisoned() = 2;
        pair.1.notify_all();
        assert_eq!(waiter.join().unwrap(), 2);
    }
}
