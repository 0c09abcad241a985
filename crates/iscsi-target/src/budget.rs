//! A byte budget shared by every connection of the process: write data
//! solicited and not yet stored. A connection takes from it before each
//! R2T and gives back when the command's data is stored or dropped, so
//! peers that announce large writes and never send the data hold at most
//! the budget between them (TigerBeetle's "put a limit on everything").

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes that may be held at once, and those held now.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    held: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Budget {
        Budget {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// Takes `bytes` if they fit under the limit.
    pub fn try_take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&sum| sum <= self.limit)
            })
            .is_ok()
    }

    /// Takes `bytes` whether or not they fit: data the peer may send
    /// unasked (immediate data, the unsolicited burst) is already bounded by
    /// the negotiated FirstBurstLength and cannot be refused.
    pub fn force_take(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Gives back `bytes` taken before.
    pub fn give(&self, bytes: usize) {
        let before = self.held.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(before >= bytes, "gave back more than was taken");
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::Budget;

    #[test]
    fn takes_fit_under_the_limit_and_gives_free_room() {
        let budget = Budget::new(100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41), "61 + 41 > 100");
        assert!(budget.try_take(40));
        assert_eq!(budget.held(), 100);
        budget.give(60);
        assert!(budget.try_take(50));
        budget.force_take(30);
        assert_eq!(budget.held(), 120, "unsolicited data goes over");
        assert!(!budget.try_take(1));
    }
}
