//! Gatekeeper against `[limits]`: connections in total and per initiator
//! address, logins in progress, sessions; with counters of what each limit
//! turned away, so that an administrator can tell a limit from a fault.

use crate::config::Limits;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Descriptors kept free for the target's own files (stores, state, the
/// listeners, epoll and eventfds) when the open-files limit bounds
/// connections.
pub const DESCRIPTOR_RESERVE: u64 = 64;

/// Why a new connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `[limits] connections` reached.
    #[error("{0} connections already (limits.connections)")]
    Connections(usize),
    /// `[limits] connections_per_initiator` reached for this address.
    #[error("{0} connections from this address already (limits.connections_per_initiator)")]
    PerInitiator(usize),
    /// `[limits] logins` reached.
    #[error("{0} logins in progress already (limits.logins)")]
    Logins(usize),
    /// `[limits] logins_per_initiator` reached for this address.
    #[error("{0} logins in progress from this address already (limits.logins_per_initiator)")]
    LoginsPerInitiator(usize),
}

/// How many times each limit turned something away.
#[derive(Debug, Default)]
pub struct Refusals {
    /// New connections, over `connections`.
    pub connections: AtomicU64,
    /// New connections, over `connections_per_initiator`.
    pub per_initiator: AtomicU64,
    /// New connections, over `logins` or `logins_per_initiator`.
    pub logins: AtomicU64,
    /// Logins, over `sessions`.
    pub sessions: AtomicU64,
}

/// What one initiator address holds.
#[derive(Debug, Default, Clone, Copy)]
struct Holding {
    connections: usize,
    logins: usize,
}

#[derive(Debug, Default)]
struct Open {
    connections: usize,
    logins: usize,
    by_address: HashMap<IpAddr, Holding>,
}

impl Open {
    fn forget_if_idle(&mut self, peer: IpAddr) {
        if self
            .by_address
            .get(&peer)
            .is_some_and(|h| h.connections == 0 && h.logins == 0)
        {
            self.by_address.remove(&peer);
        }
    }
}

/// The live counts and the limits they are held to.
#[derive(Debug)]
pub struct Gatekeeper {
    limits: Limits,
    open: Mutex<Open>,
    /// What the limits turned away.
    pub refused: Refusals,
}

impl Gatekeeper {
    /// Admission under `limits`, with `connections` lowered to what
    /// `open_files` (RLIMIT_NOFILE, if known) leaves after
    /// [`DESCRIPTOR_RESERVE`]. Also returns a note when it was lowered.
    pub fn new(mut limits: Limits, open_files: Option<u64>) -> (Gatekeeper, Option<String>) {
        let mut note = None;
        if let Some(files) = open_files {
            let room = files.saturating_sub(DESCRIPTOR_RESERVE).max(1);
            if (limits.connections as u64) > room {
                note = Some(format!(
                    "limits.connections lowered from {} to {room}: the open-files limit is {files} \
                     and {DESCRIPTOR_RESERVE} descriptors are kept for the target's own files \
                     (raise it with `ulimit -n` or LimitNOFILE=)",
                    limits.connections
                ));
                limits.connections = room as usize;
            }
        }
        let gate = Gatekeeper {
            limits,
            open: Mutex::new(Open::default()),
            refused: Refusals::default(),
        };
        (gate, note)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Admits a new connection from `peer`, or says which limit refuses it.
    /// Logins in progress are limited per address too, so that one address
    /// with idle connections cannot keep every other initiator from
    /// logging in.
    pub fn admit_connection(&self, peer: IpAddr) -> Result<(), Refusal> {
        let mut open = self.lock();
        let mine = open.by_address.get(&peer).copied().unwrap_or_default();
        let refusal = if open.logins >= self.limits.logins {
            Some((Refusal::Logins(open.logins), &self.refused.logins))
        } else if mine.logins >= self.limits.logins_per_initiator {
            Some((
                Refusal::LoginsPerInitiator(mine.logins),
                &self.refused.logins,
            ))
        } else if open.connections >= self.limits.connections {
            Some((
                Refusal::Connections(open.connections),
                &self.refused.connections,
            ))
        } else if mine.connections >= self.limits.connections_per_initiator {
            Some((
                Refusal::PerInitiator(mine.connections),
                &self.refused.per_initiator,
            ))
        } else {
            None
        };
        if let Some((why, counter)) = refusal {
            counter.fetch_add(1, Ordering::Relaxed);
            return Err(why);
        }
        open.connections += 1;
        open.by_address.entry(peer).or_default().connections += 1;
        Ok(())
    }

    /// A connection admitted from `peer` has closed.
    pub fn release_connection(&self, peer: IpAddr) {
        let mut open = self.lock();
        open.connections = open.connections.saturating_sub(1);
        if let Some(h) = open.by_address.get_mut(&peer) {
            h.connections = h.connections.saturating_sub(1);
        }
        open.forget_if_idle(peer);
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// A login from `peer` starts (a connection was created).
    pub fn login_started(&self, peer: IpAddr) {
        let mut open = self.lock();
        open.logins += 1;
        open.by_address.entry(peer).or_default().logins += 1;
    }

    /// A login from `peer` ended: full feature phase, failure or close.
    pub fn login_ended(&self, peer: IpAddr) {
        let mut open = self.lock();
        open.logins = open.logins.saturating_sub(1);
        if let Some(h) = open.by_address.get_mut(&peer) {
            h.logins = h.logins.saturating_sub(1);
        }
        open.forget_if_idle(peer);
    }

    /// Logins in progress now.
    pub fn logins(&self) -> usize {
        self.lock().logins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            connections: 3,
            connections_per_initiator: 2,
            logins: 2,
            ..Limits::default()
        }
    }

    #[test]
    fn one_address_cannot_take_every_login_slot() {
        let (a, _) = Gatekeeper::new(
            Limits {
                logins: 10,
                logins_per_initiator: 3,
                ..Limits::default()
            },
            None,
        );
        let idle: IpAddr = "10.0.0.9".parse().unwrap();
        let other: IpAddr = "10.0.0.10".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(a.admit_connection(idle), Ok(()));
            a.login_started(idle);
        }
        assert_eq!(
            a.admit_connection(idle),
            Err(Refusal::LoginsPerInitiator(3))
        );
        assert_eq!(a.admit_connection(other), Ok(()), "room kept for others");
        a.login_ended(idle);
        assert_eq!(a.admit_connection(idle), Ok(()));
    }

    #[test]
    fn each_limit_refuses_and_counts_and_closing_frees_room() {
        let (a, note) = Gatekeeper::new(limits(), None);
        assert!(note.is_none());
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let two: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(a.admit_connection(one), Ok(()));
        assert_eq!(a.admit_connection(one), Ok(()));
        assert_eq!(a.admit_connection(one), Err(Refusal::PerInitiator(2)));
        assert_eq!(a.admit_connection(two), Ok(()));
        assert_eq!(a.admit_connection(two), Err(Refusal::Connections(3)));
        a.release_connection(one);
        assert_eq!(a.admit_connection(two), Ok(()));
        a.login_started(one);
        a.login_started(two);
        assert_eq!(a.admit_connection(two), Err(Refusal::Logins(2)));
        a.login_ended(one);
        a.login_ended(two);
        a.login_ended(two);
        assert_eq!(a.logins(), 0, "never below zero");
        assert_eq!(a.refused.per_initiator.load(Ordering::Relaxed), 1);
        assert_eq!(a.refused.connections.load(Ordering::Relaxed), 1);
        assert_eq!(a.refused.logins.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_open_files_limit_lowers_the_connection_limit_with_a_reserve() {
        let (a, note) = Gatekeeper::new(Limits::default(), Some(1024));
        assert_eq!(a.limits().connections, 1024 - DESCRIPTOR_RESERVE as usize);
        assert!(note.unwrap().contains("open-files limit is 1024"));
        let (a, note) = Gatekeeper::new(Limits::default(), Some(1 << 20));
        assert_eq!(a.limits().connections, Limits::default().connections);
        assert!(note.is_none());
    }
}

/// Failed authentications remembered per address at most; beyond it the
/// stalest is forgotten.
const FAILURE_SOURCES_MAX: usize = 4096;
/// A source with no failure for this long starts afresh.
const FAILURE_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);
/// Failures answered at once before the answers slow down.
const FAILURES_FREE: u32 = 3;
/// The longest an answer to a failed authentication is held back.
pub const FAILURE_DELAY_MAX: std::time::Duration = std::time::Duration::from_secs(16);

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: std::time::Instant,
}

/// Failed authentications per source address: after a few, the answer to
/// each further one is held back longer (1 s, doubling to
/// [`FAILURE_DELAY_MAX`]), so that guessing CHAP secrets goes at a crawl.
#[derive(Debug, Default)]
pub struct FailureLog {
    sources: Mutex<HashMap<IpAddr, Failures>>,
}

impl FailureLog {
    /// Records a failed authentication from `source` at `now`; returns how
    /// long its answer is to be held back.
    pub fn failed(&self, source: IpAddr, now: std::time::Instant) -> std::time::Duration {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if sources.len() >= FAILURE_SOURCES_MAX && !sources.contains_key(&source) {
            if let Some(stalest) = sources.iter().min_by_key(|(_, f)| f.last).map(|(a, _)| *a) {
                sources.remove(&stalest);
            }
        }
        let entry = sources.entry(source).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.duration_since(entry.last) > FAILURE_MEMORY {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        match entry.count.checked_sub(FAILURES_FREE + 1) {
            None => std::time::Duration::ZERO,
            Some(doublings) => std::time::Duration::from_secs(1)
                .checked_mul(1u32 << doublings.min(8))
                .map_or(FAILURE_DELAY_MAX, |d| d.min(FAILURE_DELAY_MAX)),
        }
    }
}

#[cfg(test)]
mod failure_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn repeated_failures_from_one_source_are_held_back_longer_each_time() {
        let log = FailureLog::default();
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let delays: Vec<u64> = (0..9).map(|_| log.failed(a, now).as_secs()).collect();
        assert_eq!(delays, [0, 0, 0, 1, 2, 4, 8, 16, 16]);
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(
            log.failed(b, now),
            Duration::ZERO,
            "another source is not slowed"
        );
        let later = now + FAILURE_MEMORY + Duration::from_secs(1);
        assert_eq!(
            log.failed(a, later),
            Duration::ZERO,
            "forgotten after a quiet minute"
        );
    }
}
