//! A byte budget shared by every connection of the process: write data
//! solicited and not yet stored. A connection takes from it before each
//! R2T and gives back when the command's data is stored or dropped, so
//! peers that announce large writes and never send the data hold at most
//! the budget between them (TigerBeetle's "put a limit on everything"). One
//! initiator address may hold at most half of it, so that one peer cannot
//! starve the others' writes.
//!
//! [`SharedBudget`] bounds the same way the Data-In a process has promised
//! and not yet sent (`[limits] response_buffer`), with no lock on the
//! command path: each connection holds a [`Hold`] on it for its address.

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// Bytes that may be held at once, and those held now.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    held: Mutex<Held>,
}

impl Budget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Budget {
        Budget {
            limit,
            held: Mutex::new(Held::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock_unpoisoned()
    }

    /// Takes `bytes` for `peer` if they fit under the limit and under the
    /// peer's share (half the limit).
    pub fn try_take(&self, peer: IpAddr, bytes: usize) -> bool {
        let mut held = self.lock();
        let mine = held.by_address.get(&peer).copied().unwrap_or(0);
        if held.total + bytes > self.limit || mine + bytes > self.limit / 2 {
            return false;
        }
        held.total += bytes;
        *held.by_address.entry(peer).or_default() += bytes;
        true
    }

    /// Takes `bytes` for `peer` whether or not they fit: data the peer may
    /// send unasked (immediate data, the unsolicited burst) is already
    /// bounded by the negotiated FirstBurstLength and cannot be refused.
    pub fn force_take(&self, peer: IpAddr, bytes: usize) {
        let mut held = self.lock();
        held.total += bytes;
        *held.by_address.entry(peer).or_default() += bytes;
    }

    /// Gives back `bytes` taken for `peer` before.
    pub fn give(&self, peer: IpAddr, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut held = self.lock();
        debug_assert!(held.total >= bytes, "gave back more than was taken");
        held.total = held.total.saturating_sub(bytes);
        if let Some(mine) = held.by_address.get_mut(&peer) {
            *mine = mine.saturating_sub(bytes);
            if *mine == 0 {
                held.by_address.remove(&peer);
            }
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.lock().total
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// Bytes a [`Hold`] takes at least when it must take more, so that a
/// batch of small reads takes from the shared counters once, not per
/// command; what a connection holds beyond its need goes back at its next
/// send ([`Hold::release_to`]).
const HOLD_STEP: usize = 1 << 20;

/// A byte budget shared by every connection of the process, one address
/// holding at most half of it, taken and given with atomic counters
/// rather than a lock: the Data-In of reads admitted and not yet sent.
#[derive(Debug)]
pub struct SharedBudget {
    limit: usize,
    total: AtomicUsize,
    /// Each address's counter, shared by its connections' holds; an entry
    /// whose holds are all gone is pruned when another address comes, so
    /// there are at most as many as connections.
    addresses: Mutex<HashMap<IpAddr, Weak<AtomicUsize>>>,
}

impl SharedBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Arc<SharedBudget> {
        Arc::new(SharedBudget {
            limit,
            total: AtomicUsize::new(0),
            addresses: Mutex::new(HashMap::new()),
        })
    }

    /// What one address may hold: half the limit.
    pub fn share(&self) -> usize {
        self.limit / 2
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes held now, all addresses together.
    pub fn held(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// A hold, holding nothing yet, for a connection from `peer` (once
    /// per connection: this takes a lock).
    pub fn hold(self: &Arc<SharedBudget>, peer: IpAddr) -> Hold {
        let mut addresses = self.addresses.lock_unpoisoned();
        let address = match addresses.get(&peer).and_then(Weak::upgrade) {
            Some(address) => address,
            None => {
                addresses.retain(|_, counter| counter.strong_count() > 0);
                let address = Arc::new(AtomicUsize::new(0));
                addresses.insert(peer, Arc::downgrade(&address));
                address
            }
        };
        Hold {
            budget: Arc::clone(self),
            address,
            held: 0,
            share: self.share(),
        }
    }

    /// Adds `bytes` to `counter` if the sum stays within `bound`.
    fn add_within(counter: &AtomicUsize, bytes: usize, bound: usize) -> bool {
        counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                now.checked_add(bytes).filter(|&sum| sum <= bound)
            })
            .is_ok()
    }
}

/// One connection's part of a [`SharedBudget`]: what it holds, counted in
/// its address's share and in the total, given back when dropped.
#[derive(Debug)]
pub struct Hold {
    budget: Arc<SharedBudget>,
    address: Arc<AtomicUsize>,
    held: usize,
    /// The budget's share, kept here: read on every command.
    share: usize,
}

impl Hold {
    /// What one address may hold ([`SharedBudget::share`]).
    #[inline]
    pub fn share(&self) -> usize {
        self.share
    }

    /// Holds `bytes` in all, taking what it lacks if that fits under the
    /// limit and the address's share (in steps of [`HOLD_STEP`] where they
    /// fit, else just what it lacks). False, holding what it held, if not.
    #[inline]
    pub fn cover(&mut self, bytes: usize) -> bool {
        if bytes <= self.held {
            return true;
        }
        self.cover_more(bytes)
    }

    #[cold]
    fn cover_more(&mut self, bytes: usize) -> bool {
        let lack = bytes - self.held;
        let step = lack.max(HOLD_STEP);
        self.take(step) || (step > lack && self.take(lack))
    }

    /// Whether [`Hold::cover`] of `bytes` would succeed now.
    pub fn fits(&self, bytes: usize) -> bool {
        let Some(lack) = bytes.checked_sub(self.held).filter(|&l| l > 0) else {
            return true;
        };
        let budget = &self.budget;
        budget.total.load(Ordering::Relaxed) + lack <= budget.limit
            && self.address.load(Ordering::Relaxed) + lack <= self.share
    }

    fn take(&mut self, bytes: usize) -> bool {
        let budget = &self.budget;
        if !SharedBudget::add_within(&self.address, bytes, self.share) {
            return false;
        }
        if !SharedBudget::add_within(&budget.total, bytes, budget.limit) {
            self.address.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        self.held += bytes;
        true
    }

    /// Gives back what is held beyond `keep`.
    pub fn release_to(&mut self, keep: usize) {
        if let Some(extra) = self.held.checked_sub(keep).filter(|&e| e > 0) {
            self.address.fetch_sub(extra, Ordering::Relaxed);
            self.budget.total.fetch_sub(extra, Ordering::Relaxed);
            self.held = keep;
        }
    }

    /// Bytes this hold holds.
    pub fn held(&self) -> usize {
        self.held
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, SharedBudget, HOLD_STEP};

    use std::net::IpAddr;

    #[test]
    fn takes_fit_under_the_limit_and_a_peer_gets_half_at_most() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let budget = Budget::new(100);
        assert!(budget.try_take(a, 50));
        assert!(!budget.try_take(a, 1), "a has its half");
        assert!(budget.try_take(b, 40));
        assert!(!budget.try_take(c, 11), "50 + 40 + 11 > 100");
        assert!(budget.try_take(c, 10));
        assert_eq!(budget.held(), 100);
        budget.give(a, 50);
        assert!(budget.try_take(b, 10));
        budget.force_take(a, 60);
        assert_eq!(budget.held(), 120, "unsolicited data goes over");
        assert!(!budget.try_take(c, 1));
        budget.give(a, 60);
        budget.give(b, 50);
        budget.give(c, 10);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn holds_fit_under_the_limit_and_an_address_gets_half_at_most() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let budget = SharedBudget::new(16 * HOLD_STEP);
        let mut a1 = budget.hold(a);
        let mut a2 = budget.hold(a);
        let mut b1 = budget.hold(b);
        assert!(a1.cover(4096));
        assert_eq!(a1.held(), HOLD_STEP, "a small need takes a whole step");
        assert!(a1.cover(HOLD_STEP), "already held");
        assert!(a2.cover(7 * HOLD_STEP));
        assert!(!a1.fits(HOLD_STEP + 1), "a has its half");
        assert!(!a1.cover(HOLD_STEP + 1));
        assert_eq!(a1.held(), HOLD_STEP, "a refused cover keeps what it held");
        assert!(b1.cover(8 * HOLD_STEP));
        assert_eq!(budget.held(), 16 * HOLD_STEP);
        a2.release_to(HOLD_STEP);
        assert!(a1.fits(3 * HOLD_STEP) && a1.cover(3 * HOLD_STEP));
        drop(b1);
        assert_eq!(budget.held(), 4 * HOLD_STEP, "a dropped hold gives back");
        let mut b2 = budget.hold(b);
        assert!(
            b2.cover(HOLD_STEP / 2) && b2.held() == HOLD_STEP,
            "a step where it fits"
        );
        drop((a1, a2, b2));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_hold_takes_just_what_it_lacks_where_a_step_does_not_fit() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let budget = SharedBudget::new(4 * HOLD_STEP);
        let mut hold = budget.hold(a);
        assert!(hold.cover(HOLD_STEP + 4096));
        assert_eq!(hold.held(), HOLD_STEP + 4096, "more than a step: just that");
        assert!(
            hold.cover(2 * HOLD_STEP),
            "a step does not fit the share; the lack does"
        );
        assert_eq!(hold.held(), 2 * HOLD_STEP);
        assert!(!hold.cover(2 * HOLD_STEP + 1));
        assert_eq!(budget.held(), 2 * HOLD_STEP);
    }
}
