//! Gatekeeper against `[limits]`: connections in total and per initiator
//! address, logins in progress, sessions; with counters of what each limit
//! turned away, so that an administrator can tell a limit from a fault.
//!
//! A connection counts against the connection and login limits from the
//! moment it is admitted. Until its first complete PDU arrives it is
//! "unheard", and it is the first to go: when a limit binds, the oldest
//! unheard connection that holds a slot of that limit is closed to make
//! room (an eviction), and only if there is none is the new connection
//! refused. So connections that never speak, from anyone sharing an
//! address, cannot keep an initiator from logging in; a login under way is
//! never cut short for a newcomer.

use crate::config::Limits;
use isoe_sync::MutexExt;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Descriptors kept free for the target's own files (stores, state, the
/// listeners, epoll and eventfds) when the open-files limit bounds
/// connections.
pub const DESCRIPTOR_RESERVE: u64 = 64;

/// Why a new connection was turned away, or an unheard one closed.
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

impl Refusals {
    /// The counter of `why`.
    fn of(&self, why: Refusal) -> &AtomicU64 {
        match why {
            Refusal::Connections(_) => &self.connections,
            Refusal::PerInitiator(_) => &self.per_initiator,
            Refusal::Logins(_) | Refusal::LoginsPerInitiator(_) => &self.logins,
        }
    }
}

/// How many unheard connections each limit closed to make room for a new
/// one.
#[derive(Debug, Default)]
pub struct Evictions {
    /// Over `connections`.
    pub connections: AtomicU64,
    /// Over `connections_per_initiator`.
    pub per_initiator: AtomicU64,
    /// Over `logins` or `logins_per_initiator`.
    pub logins: AtomicU64,
}

impl Evictions {
    /// The counter of `why`.
    fn of(&self, why: Refusal) -> &AtomicU64 {
        match why {
            Refusal::Connections(_) => &self.connections,
            Refusal::PerInitiator(_) => &self.per_initiator,
            Refusal::Logins(_) | Refusal::LoginsPerInitiator(_) => &self.logins,
        }
    }
}

/// An unheard connection closed to make room for a new one; the driver
/// closes its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction {
    /// The connection's serial.
    pub serial: u64,
    /// Its initiator's address.
    pub peer: IpAddr,
    /// The limit that bound.
    pub why: Refusal,
}

/// What the gate counts for one connection.
#[derive(Debug, Clone, Copy)]
struct Entry {
    peer: IpAddr,
    /// Counted among the connections ([`Gatekeeper::admit_connection`]).
    connected: bool,
    /// Counted among the logins in progress.
    logging_in: bool,
    /// While no complete PDU has come: its turn in the queues of unheard
    /// connections (admission order, oldest first).
    unheard: Option<u64>,
}

/// What one initiator address holds.
#[derive(Debug, Default)]
struct Holding {
    connections: usize,
    logins: usize,
    /// Its unheard connections: turn to serial.
    unheard: BTreeMap<u64, u64>,
}

/// The counts, every admitted connection's entry, and the unheard ones in
/// admission order; all bounded by the connections open.
#[derive(Debug, Default)]
struct Open {
    connections: usize,
    logins: usize,
    by_address: HashMap<IpAddr, Holding>,
    entries: HashMap<u64, Entry>,
    /// Every address's unheard connections: turn to serial.
    unheard: BTreeMap<u64, u64>,
    next_turn: u64,
}

/// The counts an admission is checked against, less those of the
/// connections chosen to be evicted.
#[derive(Debug, Clone, Copy)]
struct Held {
    connections: usize,
    logins: usize,
    mine_connections: usize,
    mine_logins: usize,
}

/// Where a binding limit's evictee may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Address,
    All,
}

/// Limits an admission is checked against; one eviction per limit is
/// enough, since no count is ever over its limit.
const LIMITS_CHECKED: usize = 4;

impl Open {
    fn holding(&mut self, peer: IpAddr) -> &mut Holding {
        self.by_address.entry(peer).or_default()
    }

    /// Counts a newly admitted connection as open, logging in and unheard.
    fn add(&mut self, serial: u64, peer: IpAddr) {
        let turn = self.next_turn;
        self.next_turn += 1;
        self.connections += 1;
        self.logins += 1;
        self.unheard.insert(turn, serial);
        let mine = self.holding(peer);
        mine.connections += 1;
        mine.logins += 1;
        mine.unheard.insert(turn, serial);
        let entry = Entry {
            peer,
            connected: true,
            logging_in: true,
            unheard: Some(turn),
        };
        self.entries.insert(serial, entry);
    }

    /// Takes `serial` out of the queues of unheard connections.
    fn heard(&mut self, serial: u64) {
        let Some(entry) = self.entries.get_mut(&serial) else {
            return;
        };
        let (peer, turn) = (entry.peer, entry.unheard.take());
        if let Some(turn) = turn {
            self.unheard.remove(&turn);
            if let Some(mine) = self.by_address.get_mut(&peer) {
                mine.unheard.remove(&turn);
            }
        }
    }

    /// Stops counting `serial` among the logins in progress.
    fn end_login(&mut self, serial: u64) {
        self.heard(serial);
        let Some(entry) = self.entries.get_mut(&serial) else {
            return;
        };
        if std::mem::take(&mut entry.logging_in) {
            let peer = entry.peer;
            self.logins = self.logins.saturating_sub(1);
            if let Some(mine) = self.by_address.get_mut(&peer) {
                mine.logins = mine.logins.saturating_sub(1);
            }
        }
        self.forget_if_done(serial);
    }

    /// Stops counting `serial` at all.
    fn remove(&mut self, serial: u64) {
        self.end_login(serial);
        let Some(entry) = self.entries.remove(&serial) else {
            return;
        };
        if entry.connected {
            self.connections = self.connections.saturating_sub(1);
            if let Some(mine) = self.by_address.get_mut(&entry.peer) {
                mine.connections = mine.connections.saturating_sub(1);
            }
        }
        self.forget_address_if_idle(entry.peer);
    }

    fn forget_if_done(&mut self, serial: u64) {
        let Some(entry) = self.entries.get(&serial) else {
            return;
        };
        if !entry.connected && !entry.logging_in {
            let peer = entry.peer;
            self.entries.remove(&serial);
            self.forget_address_if_idle(peer);
        }
    }

    fn forget_address_if_idle(&mut self, peer: IpAddr) {
        if self
            .by_address
            .get(&peer)
            .is_some_and(|h| h.connections == 0 && h.logins == 0 && h.unheard.is_empty())
        {
            self.by_address.remove(&peer);
        }
    }

    /// The counts `peer`'s admission is checked against once `chosen` are
    /// gone (each unheard connection is open and logging in).
    fn held_without(&self, peer: IpAddr, chosen: &[Eviction]) -> Held {
        let mine = self.by_address.get(&peer);
        let gone = chosen.len();
        let mine_gone = chosen.iter().filter(|e| e.peer == peer).count();
        Held {
            connections: self.connections.saturating_sub(gone),
            logins: self.logins.saturating_sub(gone),
            mine_connections: mine.map_or(0, |h| h.connections).saturating_sub(mine_gone),
            mine_logins: mine.map_or(0, |h| h.logins).saturating_sub(mine_gone),
        }
    }

    /// The oldest unheard connection in `scope` not among `chosen`.
    fn oldest_unheard(
        &self,
        scope: Scope,
        peer: IpAddr,
        chosen: &[Eviction],
    ) -> Option<(u64, IpAddr)> {
        let queue = match scope {
            Scope::All => &self.unheard,
            Scope::Address => &self.by_address.get(&peer)?.unheard,
        };
        let serial = *queue
            .values()
            .find(|s| !chosen.iter().any(|e| e.serial == **s))?;
        Some((serial, self.entries.get(&serial)?.peer))
    }
}

/// The live counts and the limits they are held to.
#[derive(Debug)]
pub struct Gatekeeper {
    limits: Limits,
    open: Mutex<Open>,
    /// What the limits turned away.
    pub refused: Refusals,
    /// Unheard connections closed to make room, by the limit that bound.
    pub evicted: Evictions,
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
            evicted: Evictions::default(),
        };
        (gate, note)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock_unpoisoned()
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Admits a new connection `serial` from `peer`, counted as open and
    /// logging in, and returns the unheard connections closed to make room
    /// for it (the caller closes them); or says which limit refuses it,
    /// when no unheard connection holds a slot of that limit. Logins in
    /// progress are limited per address too, so that one address with
    /// logins under way cannot keep every other initiator from logging in.
    pub fn admit_connection(&self, peer: IpAddr, serial: u64) -> Result<Vec<Eviction>, Refusal> {
        let mut open = self.lock();
        let evicted = self.make_room(&open, peer).inspect_err(|why| {
            self.refused.of(*why).fetch_add(1, Ordering::Relaxed);
        })?;
        for eviction in &evicted {
            open.remove(eviction.serial);
            self.evicted
                .of(eviction.why)
                .fetch_add(1, Ordering::Relaxed);
        }
        open.add(serial, peer);
        Ok(evicted)
    }

    /// The unheard connections whose going lets `peer` in, oldest first
    /// within the scope of each limit that binds; nothing is changed.
    fn make_room(&self, open: &Open, peer: IpAddr) -> Result<Vec<Eviction>, Refusal> {
        let mut chosen = Vec::new();
        for _ in 0..=LIMITS_CHECKED {
            let held = open.held_without(peer, &chosen);
            let Some((why, scope)) = self.binding(held) else {
                return Ok(chosen);
            };
            let Some((serial, victim)) = open.oldest_unheard(scope, peer, &chosen) else {
                return Err(why);
            };
            chosen.push(Eviction {
                serial,
                peer: victim,
                why,
            });
        }
        // Unreachable while no count is over its limit; refused to be safe.
        let held = open.held_without(peer, &[]);
        Err(self
            .binding(held)
            .map_or(Refusal::Connections(held.connections), |b| b.0))
    }

    /// The first limit `held` leaves no room under, and where an evictee
    /// for it may come from. The address's own limits come first: an
    /// evictee of its own makes room under the totals too.
    fn binding(&self, held: Held) -> Option<(Refusal, Scope)> {
        let l = &self.limits;
        if held.mine_logins >= l.logins_per_initiator {
            Some((
                Refusal::LoginsPerInitiator(held.mine_logins),
                Scope::Address,
            ))
        } else if held.mine_connections >= l.connections_per_initiator {
            Some((Refusal::PerInitiator(held.mine_connections), Scope::Address))
        } else if held.logins >= l.logins {
            Some((Refusal::Logins(held.logins), Scope::All))
        } else if held.connections >= l.connections {
            Some((Refusal::Connections(held.connections), Scope::All))
        } else {
            None
        }
    }

    /// Whether connection `serial` is still admitted (it was not evicted
    /// before its driver took it up).
    pub fn holds(&self, serial: u64) -> bool {
        self.lock()
            .entries
            .get(&serial)
            .is_some_and(|e| e.connected)
    }

    /// Connection `serial` has closed: nothing of it counts any more.
    pub fn release_connection(&self, serial: u64) {
        self.lock().remove(serial);
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// A login on connection `serial` from `peer` starts. An admitted
    /// connection counts as logging in already; one made without admission
    /// (the in-memory driver's) is counted from here.
    pub fn login_started(&self, serial: u64, peer: IpAddr) {
        let mut open = self.lock();
        if open.entries.contains_key(&serial) {
            return;
        }
        open.logins += 1;
        open.holding(peer).logins += 1;
        let entry = Entry {
            peer,
            connected: false,
            logging_in: true,
            unheard: None,
        };
        open.entries.insert(serial, entry);
    }

    /// Connection `serial` sent its first complete PDU: it is no longer
    /// closed to make room for others.
    pub fn first_pdu(&self, serial: u64) {
        self.lock().heard(serial);
    }

    /// The login on connection `serial` ended: full feature phase, failure
    /// or close.
    pub fn login_ended(&self, serial: u64) {
        self.lock().end_login(serial);
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

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// Admits `serial` from `peer` and has it send its first PDU: a login
    /// under way, never evicted.
    fn speaking(gate: &Gatekeeper, peer: IpAddr, serial: u64) {
        assert_eq!(gate.admit_connection(peer, serial), Ok(vec![]));
        gate.first_pdu(serial);
    }

    fn evicted(serials: &[u64], peer: IpAddr, why: Refusal) -> Result<Vec<Eviction>, Refusal> {
        Ok(serials
            .iter()
            .map(|&serial| Eviction { serial, peer, why })
            .collect())
    }

    /// Every count and queue of the gate is empty.
    fn assert_empty(gate: &Gatekeeper) {
        let open = gate.lock();
        assert_eq!((open.connections, open.logins), (0, 0));
        assert!(open.entries.is_empty(), "{:?}", open.entries);
        assert!(open.unheard.is_empty() && open.by_address.is_empty());
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
        let busy = ip("10.0.0.9");
        let other = ip("10.0.0.10");
        for serial in 1..=3 {
            speaking(&a, busy, serial);
        }
        assert_eq!(
            a.admit_connection(busy, 4),
            Err(Refusal::LoginsPerInitiator(3))
        );
        assert_eq!(
            a.admit_connection(other, 5),
            Ok(vec![]),
            "room kept for others"
        );
        a.login_ended(1);
        assert_eq!(a.admit_connection(busy, 6), Ok(vec![]));
    }

    #[test]
    fn each_limit_refuses_and_counts_and_closing_frees_room() {
        let (a, note) = Gatekeeper::new(limits(), None);
        assert!(note.is_none());
        let one = ip("10.0.0.1");
        let two = ip("10.0.0.2");
        speaking(&a, one, 1);
        a.login_ended(1);
        speaking(&a, one, 2);
        a.login_ended(2);
        assert_eq!(a.admit_connection(one, 3), Err(Refusal::PerInitiator(2)));
        speaking(&a, two, 4);
        a.login_ended(4);
        assert_eq!(a.admit_connection(two, 5), Err(Refusal::Connections(3)));
        a.release_connection(1);
        speaking(&a, two, 6);
        assert_eq!(a.logins(), 1);
        a.release_connection(2);
        speaking(&a, one, 7);
        assert_eq!(
            a.admit_connection(ip("10.0.0.3"), 8),
            Err(Refusal::Logins(2))
        );
        a.login_ended(6);
        a.login_ended(6);
        a.login_ended(7);
        assert_eq!(a.logins(), 0, "never below zero");
        assert_eq!(a.refused.per_initiator.load(Ordering::Relaxed), 1);
        assert_eq!(a.refused.connections.load(Ordering::Relaxed), 1);
        assert_eq!(a.refused.logins.load(Ordering::Relaxed), 1);
        for serial in [4, 6, 7] {
            a.release_connection(serial);
        }
        assert_empty(&a);
    }

    #[test]
    fn the_oldest_unheard_connection_of_the_address_makes_room() {
        let (a, _) = Gatekeeper::new(
            Limits {
                logins_per_initiator: 3,
                ..Limits::default()
            },
            None,
        );
        let crowd = ip("10.0.0.1");
        let other = ip("10.0.0.2");
        speaking(&a, crowd, 1);
        assert_eq!(a.admit_connection(other, 2), Ok(vec![]));
        assert_eq!(a.admit_connection(crowd, 3), Ok(vec![]));
        assert_eq!(a.admit_connection(crowd, 4), Ok(vec![]));
        let why = Refusal::LoginsPerInitiator(3);
        assert_eq!(
            a.admit_connection(crowd, 5),
            evicted(&[3], crowd, why),
            "the oldest unheard of the address, not the login under way nor another address's"
        );
        assert_eq!(a.admit_connection(crowd, 6), evicted(&[4], crowd, why));
        a.first_pdu(5);
        a.first_pdu(6);
        assert_eq!(
            a.admit_connection(crowd, 7),
            Err(why),
            "every slot holds a login under way"
        );
        assert_eq!(a.evicted.logins.load(Ordering::Relaxed), 2);
        assert_eq!(a.refused.logins.load(Ordering::Relaxed), 1);
        assert_eq!((a.connections(), a.logins()), (4, 4), "1, 2, 5 and 6");
        for serial in [1, 2, 5, 6] {
            a.release_connection(serial);
        }
        assert_empty(&a);
    }

    #[test]
    fn a_total_limit_evicts_the_oldest_unheard_of_any_address() {
        let (a, _) = Gatekeeper::new(
            Limits {
                connections: 3,
                ..Limits::default()
            },
            None,
        );
        let (x, y) = (ip("10.0.0.1"), ip("10.0.0.2"));
        assert_eq!(a.admit_connection(x, 10), Ok(vec![]));
        speaking(&a, y, 11);
        assert_eq!(a.admit_connection(y, 12), Ok(vec![]));
        assert_eq!(
            a.admit_connection(y, 13),
            evicted(&[10], x, Refusal::Connections(3))
        );
        assert_eq!(
            a.admit_connection(x, 14),
            evicted(&[12], y, Refusal::Connections(3))
        );
        assert_eq!(a.evicted.connections.load(Ordering::Relaxed), 2);
        assert!(!a.holds(10) && !a.holds(12) && a.holds(13));
        // The evicted connections' closes come later and change nothing.
        a.login_ended(10);
        a.release_connection(10);
        a.release_connection(12);
        assert_eq!((a.connections(), a.logins()), (3, 3), "11, 13 and 14");
        a.login_ended(11);
        assert_eq!(a.logins(), 2, "11 logged in");
        for serial in [11, 13, 14] {
            a.release_connection(serial);
        }
        assert_empty(&a);
    }

    #[test]
    fn one_evictee_of_the_address_makes_room_under_every_limit_that_binds() {
        let (a, _) = Gatekeeper::new(
            Limits {
                connections: 2,
                connections_per_initiator: 2,
                logins: 2,
                logins_per_initiator: 2,
                ..Limits::default()
            },
            None,
        );
        let (x, y) = (ip("10.0.0.1"), ip("10.0.0.2"));
        assert_eq!(a.admit_connection(x, 1), Ok(vec![]));
        assert_eq!(a.admit_connection(x, 2), Ok(vec![]));
        assert_eq!(
            a.admit_connection(x, 3),
            evicted(&[1], x, Refusal::LoginsPerInitiator(2))
        );
        assert_eq!(a.evicted.logins.load(Ordering::Relaxed), 1);
        assert_eq!(a.evicted.connections.load(Ordering::Relaxed), 0);
        // Another address: the totals bind; an unheard connection of any
        // address makes room, and with none left the newcomer is refused.
        a.first_pdu(2);
        assert_eq!(
            a.admit_connection(y, 4),
            evicted(&[3], x, Refusal::Logins(2))
        );
        a.first_pdu(4);
        assert_eq!(a.admit_connection(y, 5), Err(Refusal::Logins(2)));
        a.release_connection(2);
        a.release_connection(4);
        assert_empty(&a);
    }

    #[test]
    fn a_connection_evicted_before_its_driver_took_it_up_counts_nothing() {
        let (a, _) = Gatekeeper::new(
            Limits {
                logins_per_initiator: 1,
                ..Limits::default()
            },
            None,
        );
        let x = ip("10.0.0.1");
        assert_eq!(a.admit_connection(x, 1), Ok(vec![]));
        assert_eq!(a.admit_connection(x, 2).map(|e| e.len()), Ok(1));
        assert!(!a.holds(1), "its driver drops it unserved");
        // Taken up anyway, in a race: its login counts until it closes.
        a.login_started(1, x);
        a.login_started(2, x);
        assert_eq!(a.logins(), 2);
        a.login_ended(1);
        a.release_connection(1);
        a.login_ended(2);
        a.release_connection(2);
        assert_empty(&a);
    }

    #[test]
    fn a_connection_made_without_admission_counts_its_login_only() {
        let (a, _) = Gatekeeper::new(limits(), None);
        let x = ip("10.0.0.1");
        a.login_started(7, x);
        a.login_started(7, x);
        assert_eq!((a.connections(), a.logins()), (0, 1));
        assert!(!a.holds(7));
        a.first_pdu(7);
        a.login_ended(7);
        a.release_connection(7);
        assert_empty(&a);
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
/// The longest an answer to a failed authentication is held back: well
/// below the 15 s that initiators wait for a login answer (open-iscsi's
/// `node.conn[0].timeo.login_timeout`, isoe's own), so that a wrong secret
/// reads as an authentication failure, never as a target that does not
/// answer.
pub const FAILURE_DELAY_MAX: std::time::Duration = std::time::Duration::from_secs(8);

/// How long initiators wait for a login answer by default (open-iscsi,
/// isoe): what [`FAILURE_DELAY_MAX`] stays below.
pub const INITIATOR_LOGIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

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
        let mut sources = self.sources.lock_unpoisoned();
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
    fn a_held_answer_comes_well_within_the_initiators_login_timeout() {
        let log = FailureLog::default();
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let longest = (0..64).map(|_| log.failed(a, now)).max().unwrap();
        // Room for the network and the initiator's own work besides.
        assert!(
            longest * 3 / 2 < INITIATOR_LOGIN_TIMEOUT,
            "a failed login's answer held {longest:?}, too near the initiators' \
             {INITIATOR_LOGIN_TIMEOUT:?}"
        );
    }

    #[test]
    fn repeated_failures_from_one_source_are_held_back_longer_each_time() {
        let log = FailureLog::default();
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let delays: Vec<u64> = (0..9).map(|_| log.failed(a, now).as_secs()).collect();
        assert_eq!(delays, [0, 0, 0, 1, 2, 4, 8, 8, 8]);
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
