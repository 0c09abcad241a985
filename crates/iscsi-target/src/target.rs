//! One iSCSI target node: its fixed name, its login [`Policy`] and its LUN
//! table, both replaced whole while it serves.

use crate::lun_table::LunTable;
use crate::policy::Policy;
use arc_swap::ArcSwap;
use isoe_scsi::LogicalUnit;
use isoe_sync::RwLockExt;
use std::sync::{Arc, RwLock};

/// One iSCSI target node with its logical units. Its name is fixed; its
/// [`Policy`] and its LUNs change while it serves (the control plane,
/// SIGHUP).
#[derive(Debug)]
pub struct Target {
    /// The target's iSCSI name.
    pub name: String,
    policy: RwLock<Arc<Policy>>,
    /// Swapped whole when a LUN comes or goes. A command's load takes no
    /// lock and touches no reference count shared with other threads
    /// (arc-swap's per-thread debt slots; datapath rule 4).
    luns: ArcSwap<LunTable>,
}

impl Target {
    /// A target with `policy` and `luns`.
    pub fn new(name: String, policy: Policy, luns: Vec<(u16, Arc<LogicalUnit>)>) -> Target {
        Target {
            name,
            policy: RwLock::new(Arc::new(policy)),
            luns: ArcSwap::from_pointee(LunTable::new(luns)),
        }
    }

    /// The LUN table now; hold it for the length of one command.
    #[inline]
    pub fn luns(&self) -> arc_swap::Guard<Arc<LunTable>> {
        self.luns.load()
    }

    /// The LUN table now, as an owned handle (work that leaves the thread).
    pub fn luns_full(&self) -> Arc<LunTable> {
        self.luns.load_full()
    }

    /// Replaces the LUN table: `change` gets the units now and returns the
    /// new set. Callers serialize changes (the control plane's lock).
    pub fn replace_luns(&self, change: impl FnOnce(&LunTable) -> Vec<(u16, Arc<LogicalUnit>)>) {
        let now = self.luns.load_full();
        self.luns.store(Arc::new(LunTable::new(change(&now))));
    }

    /// The policy now.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read_unpoisoned())
    }

    /// Replaces the policy; logins from now on see the new one.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write_unpoisoned() = Arc::new(policy);
    }

    /// True when `initiator` may see and use this target.
    pub fn admits(&self, initiator: &str) -> bool {
        self.policy().admits(initiator)
    }
}
