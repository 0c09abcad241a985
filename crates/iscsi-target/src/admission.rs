//! Gatekeeper against `[limits]`: connections in total and per initiator
//! address, logins in progress, sessions; with counters of what each limit
//! turned away, so that an administrator can tell a limit from a fault.
//!
//! A connection counts against the connection and login limits from the
//! moment it is admitted. When a limit binds, a login in progress that
//! waits on its peer is closed to make room for the newcomer (an
//! eviction), and only if there is none is the newcomer refused:
//!
//! 1. first a silent connection, one that has sent no byte since it was
//!    admitted, the oldest first;
//! 2. then a stalled login, one whose peer has sent nothing for longer than
//!    [`STALL_GRACE`], the one that has waited longest first.
//!
//! From the same address for the per-initiator limits, from any for the
//! totals. So neither connections that never speak nor logins left
//! hanging after a request, from anyone sharing an address, can keep an
//! initiator from logging in; a login whose peer keeps sending, a first
//! PDU that comes in pieces included, is never cut short for a newcomer,
//! nor is one whose answer the target holds back (after failed
//! authentications, [`FailureLog`]): it waits on the target, not its peer.
//! A newcomer that no login waiting on its peer makes room for is refused,
//! so logins under way finish however many more come.

use crate::config::Limits;
use isoe_sync::MutexExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Descriptors kept free for the target's own files (stores, state, the
/// listeners, epoll and eventfds) when the open-files limit bounds
/// connections.
pub const DESCRIPTOR_RESERVE: u64 = 64;

/// How long a login's peer may leave it waiting, after the first byte,
/// before the login may be closed to make room for a newcomer: above the
/// round trips and retransmissions (200 ms and up) of a peer that is
/// logging in, so that logins under way are not closed for each other when
/// more come than a limit lets in; well below the login deadline.
pub const STALL_GRACE: Duration = Duration::from_secs(1);

/// Why a new connection was turned away, or a waiting one closed.
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

/// How many logins waiting on their peers each limit closed to make room
/// for a new connection.
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

/// What made an evicted connection the one to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// It had sent no byte since it was admitted.
    Silent,
    /// Its login had waited this long, past [`STALL_GRACE`], on its peer.
    Stalled(Duration),
}

impl std::fmt::Display for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Idle::Silent => write!(f, "it had sent nothing"),
            Idle::Stalled(d) => write!(f, "its login had waited {} ms on it", d.as_millis()),
        }
    }
}

/// A login waiting on its peer, closed to make room for a new connection;
/// the driver closes its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction {
    /// The connection's serial.
    pub serial: u64,
    /// Its initiator's address.
    pub peer: IpAddr,
    /// The limit that bound.
    pub why: Refusal,
    /// What made it the one to go.
    pub idle: Idle,
}

/// Where a connection stands in the queues of those that may be closed to
/// make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Admitted, no byte yet: its turn among the silent (admission order).
    Silent(u64),
    /// Logging in, waiting on its peer since it last sent a byte.
    Waiting(Instant),
    /// Never closed for a newcomer: logged in, its answer held back, or
    /// not admitted (the in-memory driver's).
    Kept,
}

/// What the gate counts for one connection.
#[derive(Debug, Clone, Copy)]
struct Entry {
    peer: IpAddr,
    /// Counted among the connections ([`Gatekeeper::admit_connection`]).
    connected: bool,
    /// Counted among the logins in progress.
    logging_in: bool,
    standing: Standing,
}

/// Connections that may be closed to make room, in the order they go.
#[derive(Debug, Default)]
struct Queues {
    /// Silent ones: turn to serial.
    silent: BTreeMap<u64, u64>,
    /// Logins waiting on their peers, by the time their peer last sent.
    waiting: BTreeSet<(Instant, u64)>,
}

impl Queues {
    fn insert(&mut self, standing: Standing, serial: u64) {
        match standing {
            Standing::Silent(turn) => {
                self.silent.insert(turn, serial);
            }
            Standing::Waiting(since) => {
                self.waiting.insert((since, serial));
            }
            Standing::Kept => {}
        }
    }

    fn remove(&mut self, standing: Standing, serial: u64) {
        match standing {
            Standing::Silent(turn) => {
                self.silent.remove(&turn);
            }
            Standing::Waiting(since) => {
                self.waiting.remove(&(since, serial));
            }
            Standing::Kept => {}
        }
    }

    fn is_empty(&self) -> bool {
        self.silent.is_empty() && self.waiting.is_empty()
    }

    /// The first connection to go at `now`, not among `chosen`: the
    /// oldest silent one, else the login stalled longest past the grace.
    fn victim(&self, chosen: &[Eviction], now: Instant) -> Option<(u64, Idle)> {
        let free = |serial: &u64| !chosen.iter().any(|e| e.serial == *serial);
        if let Some(&serial) = self.silent.values().find(|s| free(s)) {
            return Some((serial, Idle::Silent));
        }
        let stalled_by = now.checked_sub(STALL_GRACE)?;
        let &(since, serial) = self
            .waiting
            .iter()
            .take_while(|(since, _)| *since <= stalled_by)
            .find(|(_, s)| free(s))?;
        Some((serial, Idle::Stalled(now.saturating_duration_since(since))))
    }
}

/// What one initiator address holds.
#[derive(Debug, Default)]
struct Holding {
    connections: usize,
    logins: usize,
    /// Its connections that may be closed to make room.
    queues: Queues,
}

/// The counts, every admitted connection's entry, and the queues of those
/// that may be closed to make room; all bounded by the connections open.
#[derive(Debug, Default)]
struct Open {
    connections: usize,
    logins: usize,
    by_address: HashMap<IpAddr, Holding>,
    entries: HashMap<u64, Entry>,
    /// Every address's connections that may be closed to make room.
    queues: Queues,
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

    /// Counts a newly admitted connection as open, logging in and silent.
    fn add(&mut self, serial: u64, peer: IpAddr) {
        let standing = Standing::Silent(self.next_turn);
        self.next_turn += 1;
        self.connections += 1;
        self.logins += 1;
        let mine = self.holding(peer);
        mine.connections += 1;
        mine.logins += 1;
        let entry = Entry {
            peer,
            connected: true,
            logging_in: true,
            standing: Standing::Kept,
        };
        self.entries.insert(serial, entry);
        self.stand(serial, standing);
    }

    /// Moves `serial` to `standing` in the queues, its address's and all.
    fn stand(&mut self, serial: u64, standing: Standing) {
        let Some(entry) = self.entries.get_mut(&serial) else {
            return;
        };
        let (peer, was) = (entry.peer, entry.standing);
        entry.standing = standing;
        self.queues.remove(was, serial);
        self.queues.insert(standing, serial);
        if let Some(mine) = self.by_address.get_mut(&peer) {
            mine.queues.remove(was, serial);
            mine.queues.insert(standing, serial);
        }
    }

    /// Bytes came from `serial`'s peer at `now`: a silent or waiting login
    /// waits on its peer from then.
    fn heard(&mut self, serial: u64, now: Instant) {
        let standing = self.entries.get(&serial).map(|e| e.standing);
        if matches!(standing, Some(Standing::Silent(_) | Standing::Waiting(_))) {
            self.stand(serial, Standing::Waiting(now));
        }
    }

    /// Stops counting `serial` among the logins in progress.
    fn end_login(&mut self, serial: u64) {
        self.stand(serial, Standing::Kept);
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
            .is_some_and(|h| h.connections == 0 && h.logins == 0 && h.queues.is_empty())
        {
            self.by_address.remove(&peer);
        }
    }

    /// The counts `peer`'s admission is checked against once `chosen` are
    /// gone (each evictee is open and logging in).
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

    /// The connection in `scope` to go next at `now`, not among `chosen`,
    /// with its address.
    fn victim(
        &self,
        scope: Scope,
        peer: IpAddr,
        chosen: &[Eviction],
        now: Instant,
    ) -> Option<(u64, IpAddr, Idle)> {
        let queues = match scope {
            Scope::All => &self.queues,
            Scope::Address => &self.by_address.get(&peer)?.queues,
        };
        let (serial, idle) = queues.victim(chosen, now)?;
        let entry = self.entries.get(&serial)?;
        debug_assert!(entry.connected && entry.logging_in, "{entry:?}");
        Some((serial, entry.peer, idle))
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

    /// Admits a new connection `serial` from `peer` at `now`, counted as
    /// open and logging in, and returns the logins waiting on their peers
    /// closed to make room for it (the caller closes them); or says which
    /// limit refuses it, when no such login holds a slot of that limit.
    /// Logins in progress are limited per address too, so that one address
    /// with logins under way cannot keep every other initiator from
    /// logging in.
    pub fn admit_connection(
        &self,
        peer: IpAddr,
        serial: u64,
        now: Instant,
    ) -> Result<Vec<Eviction>, Refusal> {
        let mut open = self.lock();
        let evicted = self.make_room(&open, peer, now).inspect_err(|why| {
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

    /// The logins waiting on their peers whose going lets `peer` in, in
    /// the order of [`Queues::victim`] within the scope of each limit that
    /// binds; nothing is changed.
    fn make_room(&self, open: &Open, peer: IpAddr, now: Instant) -> Result<Vec<Eviction>, Refusal> {
        let mut chosen = Vec::new();
        for _ in 0..=LIMITS_CHECKED {
            let held = open.held_without(peer, &chosen);
            let Some((why, scope)) = self.binding(held) else {
                return Ok(chosen);
            };
            let Some((serial, victim, idle)) = open.victim(scope, peer, &chosen, now) else {
                return Err(why);
            };
            chosen.push(Eviction {
                serial,
                peer: victim,
                why,
                idle,
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
            standing: Standing::Kept,
        };
        open.entries.insert(serial, entry);
    }

    /// Bytes of connection `serial`'s login came at `now`, a piece of a
    /// PDU or more: it is no longer silent, and waits on its peer from
    /// `now`.
    pub fn heard(&self, serial: u64, now: Instant) {
        self.lock().heard(serial, now);
    }

    /// The target holds back its answer to the login on connection
    /// `serial`: the login waits on the target, not its peer, and is no
    /// longer closed to make room for others.
    pub fn answer_held(&self, serial: u64) {
        self.lock().stand(serial, Standing::Kept);
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

    /// The time the tests start from.
    fn t0() -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Admits `serial` from `peer` and has it send a byte: a login under
    /// way, not evicted within [`STALL_GRACE`] of [`t0`].
    fn speaking(gate: &Gatekeeper, peer: IpAddr, serial: u64) {
        assert_eq!(gate.admit_connection(peer, serial, t0()), Ok(vec![]));
        gate.heard(serial, t0());
    }

    /// Silent connections `serials` of `peer`, evicted as `why` binds.
    fn evicted(serials: &[u64], peer: IpAddr, why: Refusal) -> Result<Vec<Eviction>, Refusal> {
        Ok(serials
            .iter()
            .map(|&serial| Eviction {
                serial,
                peer,
                why,
                idle: Idle::Silent,
            })
            .collect())
    }

    /// Every count and queue of the gate is empty.
    fn assert_empty(gate: &Gatekeeper) {
        let open = gate.lock();
        assert_eq!((open.connections, open.logins), (0, 0));
        assert!(open.entries.is_empty(), "{:?}", open.entries);
        assert!(open.queues.is_empty() && open.by_address.is_empty());
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
            a.admit_connection(busy, 4, t0()),
            Err(Refusal::LoginsPerInitiator(3))
        );
        assert_eq!(
            a.admit_connection(other, 5, t0()),
            Ok(vec![]),
            "room kept for others"
        );
        a.login_ended(1);
        assert_eq!(a.admit_connection(busy, 6, t0()), Ok(vec![]));
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
        assert_eq!(
            a.admit_connection(one, 3, t0()),
            Err(Refusal::PerInitiator(2))
        );
        speaking(&a, two, 4);
        a.login_ended(4);
        assert_eq!(
            a.admit_connection(two, 5, t0()),
            Err(Refusal::Connections(3))
        );
        a.release_connection(1);
        speaking(&a, two, 6);
        assert_eq!(a.logins(), 1);
        a.release_connection(2);
        speaking(&a, one, 7);
        assert_eq!(
            a.admit_connection(ip("10.0.0.3"), 8, t0()),
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
    fn the_oldest_silent_connection_of_the_address_makes_room() {
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
        assert_eq!(a.admit_connection(other, 2, t0()), Ok(vec![]));
        assert_eq!(a.admit_connection(crowd, 3, t0()), Ok(vec![]));
        assert_eq!(a.admit_connection(crowd, 4, t0()), Ok(vec![]));
        let why = Refusal::LoginsPerInitiator(3);
        assert_eq!(
            a.admit_connection(crowd, 5, t0()),
            evicted(&[3], crowd, why),
            "the oldest silent one of the address, not the login under way nor another address's"
        );
        assert_eq!(
            a.admit_connection(crowd, 6, t0()),
            evicted(&[4], crowd, why)
        );
        a.heard(5, t0());
        a.heard(6, t0());
        assert_eq!(
            a.admit_connection(crowd, 7, t0()),
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
    fn a_total_limit_evicts_the_oldest_silent_one_of_any_address() {
        let (a, _) = Gatekeeper::new(
            Limits {
                connections: 3,
                ..Limits::default()
            },
            None,
        );
        let (x, y) = (ip("10.0.0.1"), ip("10.0.0.2"));
        assert_eq!(a.admit_connection(x, 10, t0()), Ok(vec![]));
        speaking(&a, y, 11);
        assert_eq!(a.admit_connection(y, 12, t0()), Ok(vec![]));
        assert_eq!(
            a.admit_connection(y, 13, t0()),
            evicted(&[10], x, Refusal::Connections(3))
        );
        assert_eq!(
            a.admit_connection(x, 14, t0()),
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
        assert_eq!(a.admit_connection(x, 1, t0()), Ok(vec![]));
        assert_eq!(a.admit_connection(x, 2, t0()), Ok(vec![]));
        assert_eq!(
            a.admit_connection(x, 3, t0()),
            evicted(&[1], x, Refusal::LoginsPerInitiator(2))
        );
        assert_eq!(a.evicted.logins.load(Ordering::Relaxed), 1);
        assert_eq!(a.evicted.connections.load(Ordering::Relaxed), 0);
        // Another address: the totals bind; a silent connection of any
        // address makes room, and with none left the newcomer is refused.
        a.heard(2, t0());
        assert_eq!(
            a.admit_connection(y, 4, t0()),
            evicted(&[3], x, Refusal::Logins(2))
        );
        a.heard(4, t0());
        assert_eq!(a.admit_connection(y, 5, t0()), Err(Refusal::Logins(2)));
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
        assert_eq!(a.admit_connection(x, 1, t0()), Ok(vec![]));
        assert_eq!(a.admit_connection(x, 2, t0()).map(|e| e.len()), Ok(1));
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
        a.heard(7, t0());
        a.login_ended(7);
        a.release_connection(7);
        assert_empty(&a);
    }

    /// A gate whose only binding limit is 3 logins per address.
    fn three_logins_per_address() -> Gatekeeper {
        let limits = Limits {
            logins_per_initiator: 3,
            ..Limits::default()
        };
        Gatekeeper::new(limits, None).0
    }

    #[test]
    fn a_login_stalled_past_the_grace_makes_room_the_one_stalled_longest_first() {
        let a = three_logins_per_address();
        let x = ip("10.0.0.1");
        for (serial, heard_ms) in [(1, 0), (2, 200), (3, 100)] {
            assert_eq!(a.admit_connection(x, serial, t0()), Ok(vec![]));
            a.heard(serial, t0() + ms(heard_ms));
        }
        let why = Refusal::LoginsPerInitiator(3);
        assert_eq!(
            a.admit_connection(x, 4, t0() + ms(900)),
            Err(why),
            "no login has waited on its peer past the grace"
        );
        let stalled = |serial, waited_ms| Eviction {
            serial,
            peer: x,
            why,
            idle: Idle::Stalled(ms(waited_ms)),
        };
        let at = t0() + ms(1300);
        assert_eq!(a.admit_connection(x, 5, at), Ok(vec![stalled(1, 1300)]));
        a.heard(5, at);
        assert_eq!(a.admit_connection(x, 6, at), Ok(vec![stalled(3, 1200)]));
        // A byte from 2's peer: it is logging in again; and a silent
        // newcomer goes before any login that has sent something.
        a.heard(2, at);
        assert_eq!(
            a.admit_connection(x, 7, at + ms(2000)),
            evicted(&[6], x, why)
        );
        assert_eq!(a.evicted.logins.load(Ordering::Relaxed), 3);
        assert_eq!(a.refused.logins.load(Ordering::Relaxed), 1);
        for serial in [2, 5, 7] {
            a.release_connection(serial);
        }
        assert_empty(&a);
    }

    #[test]
    fn a_silent_connection_goes_before_a_login_that_has_sent_part_of_a_pdu() {
        let a = three_logins_per_address();
        let x = ip("10.0.0.1");
        assert_eq!(a.admit_connection(x, 1, t0()), Ok(vec![]));
        // Half a PDU, then nothing for longer than the grace.
        a.heard(1, t0());
        let later = t0() + ms(1500);
        assert_eq!(a.admit_connection(x, 2, later), Ok(vec![]));
        assert_eq!(a.admit_connection(x, 3, later), Ok(vec![]));
        let why = Refusal::LoginsPerInitiator(3);
        assert_eq!(a.admit_connection(x, 4, later), evicted(&[2], x, why));
        assert_eq!(a.admit_connection(x, 5, later), evicted(&[3], x, why));
        assert!(a.holds(1), "the login with bytes in is still there");
    }

    #[test]
    fn a_login_whose_answer_is_held_back_or_that_ended_is_never_closed_for_a_newcomer() {
        let limits = Limits {
            connections_per_initiator: 3,
            ..Limits::default()
        };
        let (a, _) = Gatekeeper::new(limits, None);
        let x = ip("10.0.0.1");
        for serial in 1..=3 {
            speaking(&a, x, serial);
        }
        a.answer_held(1);
        a.login_ended(2);
        // A byte that comes meanwhile changes nothing.
        a.heard(1, t0());
        a.heard(2, t0());
        let much_later = t0() + ms(20_000);
        assert_eq!(
            a.admit_connection(x, 4, much_later).map(|e| e[0].serial),
            Ok(3),
            "only the login that waits on its peer"
        );
        a.heard(4, much_later);
        assert_eq!(
            a.admit_connection(x, 5, much_later),
            Err(Refusal::PerInitiator(3))
        );
        assert!(a.holds(1) && a.holds(2));
    }

    #[test]
    fn a_total_limit_evicts_the_login_stalled_longest_of_any_address() {
        let (a, _) = Gatekeeper::new(
            Limits {
                logins: 2,
                ..Limits::default()
            },
            None,
        );
        let (x, y, z) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
        assert_eq!(a.admit_connection(x, 1, t0()), Ok(vec![]));
        a.heard(1, t0() + ms(100));
        assert_eq!(a.admit_connection(y, 2, t0()), Ok(vec![]));
        a.heard(2, t0());
        let evicted = a.admit_connection(z, 3, t0() + ms(5000));
        assert_eq!(
            evicted,
            Ok(vec![Eviction {
                serial: 2,
                peer: y,
                why: Refusal::Logins(2),
                idle: Idle::Stalled(ms(5000)),
            }])
        );
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
