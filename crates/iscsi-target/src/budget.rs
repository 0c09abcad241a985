//! A byte budget shared by every connection of the process: write data
//! solicited and not yet stored. A connection takes from it before each
//! R2T and gives back when the command's data is stored or dropped, so
//! peers that announce large writes and never send the data hold at most
//! the budget between them (TigerBeetle's "put a limit on everything"). One
//! initiator address may hold at most half of it, so that one peer cannot
//! starve the others' writes.

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

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

#[cfg(test)]
mod tests {
    use super::Budget;

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
}
