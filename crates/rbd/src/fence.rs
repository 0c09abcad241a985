//! The fence of one cluster client: when the cluster blocklists a client
//! (another gateway broke its lock), every image opened through it must
//! stop at once. The connection (`cluster.rs`) and each image's requests
//! (`image.rs`) hold the same [`Fence`]: whichever learns of the
//! blocklist first raises it, and it ends every member's requests.

use isoe_sync::MutexExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// What a fence ends: an image's requests under way.
pub(crate) trait Member: Send + Sync {
    /// Every request not answered yet is answered as unavailable, and
    /// later ones are refused.
    fn end_all(&self);
}

/// Whether a client is fenced, and the members it ends when it is.
#[derive(Default)]
pub(crate) struct Fence {
    raised: AtomicBool,
    members: Mutex<Vec<Weak<dyn Member>>>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("raised", &self.is_raised())
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// Whether the cluster blocklisted the client.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// The cluster blocklisted the client: every member ends its
    /// requests, each only once it is out of the lock (a request's
    /// completion runs here).
    pub(crate) fn raise(&self) {
        let members: Vec<Arc<dyn Member>> = {
            let mut members = self.members.lock_unpoisoned();
            self.raised.store(true, Ordering::Release);
            members.retain(|w| w.strong_count() > 0);
            members.iter().filter_map(Weak::upgrade).collect()
        };
        for member in members {
            member.end_all();
        }
    }

    /// Counts `member` among those [`Fence::raise`] ends; ended at once if
    /// the fence is up already. Members that are gone are pruned at the
    /// next raise.
    pub(crate) fn enroll(&self, member: Arc<dyn Member>) {
        let mut members = self.members.lock_unpoisoned();
        if self.is_raised() {
            drop(members);
            return member.end_all();
        }
        members.push(Arc::downgrade(&member));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Member for Counting {
        fn end_all(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_raised_fence_ends_its_members_and_a_late_one_at_once() {
        let fence = Fence::default();
        let early = Arc::new(Counting::default());
        let gone = Arc::new(Counting::default());
        fence.enroll(early.clone());
        fence.enroll(gone.clone());
        drop(gone);
        assert!(!fence.is_raised());
        assert_eq!(early.0.load(Ordering::Relaxed), 0);
        fence.raise();
        assert!(fence.is_raised());
        assert_eq!(early.0.load(Ordering::Relaxed), 1);
        let late = Arc::new(Counting::default());
        fence.enroll(late.clone());
        assert_eq!(late.0.load(Ordering::Relaxed), 1, "ended as it enrolls");
        assert!(
            fence.members.lock_unpoisoned().len() <= 1,
            "the gone one pruned"
        );
    }
}
