//! Ending a unit's tasks from outside a task management function: PREEMPT
//! AND ABORT ends the tasks of the nexuses it preempted, and a reset made
//! through another gateway of a shared unit ends every task here
//! ([`isoe_scsi::TaskSets`]). The tasks are ended as a task management
//! function ends those on its other connections: each connection of a
//! session of the nexus is ordered to end the unit's tasks and counts
//! itself done once no store call of an ended task is under way. And a
//! shared unit's replacement, made where the server is not reachable (a
//! gateway that serves again after a fence, on the poller's thread), put
//! in its place ([`Server::replace_unit`]).

use std::sync::{Arc, Weak};

use isoe_scsi::{LogicalUnit, Nexus, Sense, TaskSets};
use isoe_wire::pdu::Lun;

use crate::registry::Server;
use crate::session::{AbortBarrier, AbortScope, NO_CONNECTION};

/// Wakes connections (by serial) on their workers.
pub type Waker = Box<dyn Fn(&[u64]) + Send + Sync>;

/// The running target's connections, as units reach them.
pub(crate) struct ServerTasks {
    pub(crate) server: Weak<Server>,
    pub(crate) wake: Waker,
}

impl std::fmt::Debug for ServerTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTasks")
    }
}

impl TaskSets for ServerTasks {
    fn abort(&self, unit: &LogicalUnit, nexuses: Option<&[Nexus]>, done: Box<dyn FnOnce() + Send>) {
        let Some(server) = self.server.upgrade() else {
            return done();
        };
        let barrier = AbortBarrier::then(done);
        let mut wake = Vec::new();
        for target in server.targets() {
            let luns = target.luns();
            // The unit may be mapped under any number, in any target.
            let numbers = luns.numbers().iter().filter(|&&n| {
                luns.lun(n)
                    .is_some_and(|lu| std::ptr::eq(Arc::as_ptr(lu), unit))
            });
            for &number in numbers {
                for session in server.sessions_of(&target) {
                    if nexuses.is_some_and(|list| !list.contains(&session.nexus)) {
                        continue;
                    }
                    let scope = AbortScope::Lun(Lun::from_number(number));
                    session.order_abort(scope, None, NO_CONNECTION, &barrier, &mut wake);
                }
            }
        }
        (self.wake)(&wake);
        // The maker's own hold: `done` runs now if no connection had tasks
        // to end, or when the last one has.
        let _ = barrier.done(NO_CONNECTION);
    }

    fn replace(&self, unit: &LogicalUnit, new: &Arc<LogicalUnit>, conditions: &[Sense]) -> bool {
        self.server
            .upgrade()
            .is_some_and(|server| server.replace_unit(unit, new, conditions))
    }
}

impl Server {
    /// Lets the units end tasks under way (see [`TaskSets`]): the running
    /// target's units now, and those added later. `wake` reaches the
    /// connections on their workers.
    pub fn enable_task_sets(self: &Arc<Self>, wake: Waker) {
        let tasks: Arc<dyn TaskSets> = Arc::new(ServerTasks {
            server: Arc::downgrade(self),
            wake,
        });
        if self.task_sets.set(Arc::clone(&tasks)).is_err() {
            return;
        }
        for target in self.targets() {
            for unit in target.luns().units() {
                unit.set_task_sets(Arc::clone(&tasks));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn server() -> Arc<Server> {
        let config = Config::parse(
            "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n\n\
             [[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n\n\
             [[target.lun]]\nnumber = 3\nmemory = \"1MiB\"\n",
            None,
        )
        .expect("config");
        Arc::new(Server::new(config).expect("server"))
    }

    fn twin(unit: &LogicalUnit) -> Arc<LogicalUnit> {
        Arc::new(LogicalUnit::new(
            Arc::clone(unit.store()),
            unit.config().clone(),
        ))
    }

    #[test]
    fn a_unit_is_replaced_where_it_is_served_once_the_units_reach_the_server() {
        let server = server();
        let target = server.target("iqn.2026-11.io.isoe:t").expect("target");
        let old = Arc::clone(target.luns().lun(3).expect("LUN 3"));
        let new = twin(&old);
        let changed = [Sense::asymmetric_access_state_changed()];
        assert!(!old.replace_with(&new, &changed), "no transport yet");
        server.enable_task_sets(Box::new(|_| {}));
        let other = Arc::clone(target.luns().lun(0).expect("LUN 0"));

        assert!(old.replace_with(&new, &changed));
        let luns = target.luns();
        assert!(
            Arc::ptr_eq(luns.lun(3).expect("LUN 3"), &new),
            "in its place"
        );
        assert!(
            Arc::ptr_eq(luns.lun(0).expect("LUN 0"), &other),
            "the others stay"
        );
        assert_eq!(luns.numbers(), [0, 3]);
        assert!(
            !old.replace_with(&twin(&old), &changed),
            "served nowhere any more"
        );
    }
}
