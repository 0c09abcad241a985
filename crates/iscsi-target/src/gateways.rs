//! Several targets (gateways) serving one RBD image as one logical unit.
//!
//! What the unit holds besides its data is kept in the cluster, beside the
//! image, and each gateway hears of the others' changes through the
//! image's watched object ([`isoe_rbd::Channel`]):
//!
//! - reservations, resets and software write protect: `isoe_scsi`'s
//!   [`UnitPeers`] over the channel ([`Peers`]);
//! - ALUA ([`Ownership`]): the unit lists every gateway's port groups; one
//!   gateway owns the unit and is active/optimized, the others
//!   active/non-optimized. The owner takes the image's exclusive lock when
//!   it becomes owner. librbd then passes the lock to whichever gateway
//!   writes (initiators that follow ALUA write through the owner, so it
//!   stays there), which moves no state: a unit attention on every lock
//!   movement would break initiators that write through both paths. The
//!   owner changes when SET TARGET PORT GROUPS makes another gateway's
//!   group active/optimized, or when the owner is dead: a thread of the
//!   process looks once a second whether this gateway holds the lock of
//!   an image it does not own (librbd broke a dead holder's lock for a
//!   write here, blocklisting it, so nothing it had in flight lands), asks
//!   whether the owner still answers, and takes the unit over if not.
//!   While a gateway takes the unit over (takes the lock for SET TARGET
//!   PORT GROUPS, tells the others) it reports its own groups
//!   transitioning, and commands through them end in 02/04/0A, which
//!   initiators retry; the others keep reporting the old owner until they
//!   are told. Every gateway's initiators then hear ASYMMETRIC ACCESS
//!   STATE CHANGED.
//! - fencing: a gateway whose client the cluster blocklisted (its lock
//!   broken while it did not answer) reports its groups unavailable; the
//!   poller then tries, every few seconds and less often after each
//!   failure ([`Rejoin`]), to serve again: the image opened again through
//!   a new connection (`isoe_rbd` never hands out a fenced one), a new
//!   unit over it shared as at start, put in the old one's place through
//!   the transport ([`LogicalUnit::replace_with`]). Its groups are then
//!   active/non-optimized (another gateway owns the unit), and its
//!   initiators hear ASYMMETRIC ACCESS STATE CHANGED.
//!
//! Messages on the channel, one line of text each: `isoe-hello 1 TAGS`
//! (a gateway starts; each answers `isoe-gateway 1 TAGS owner TAGS|-`),
//! `isoe-ping 1` (answered the same way), `isoe-owner 1 TAGS` (this
//! gateway owns the unit now), and the messages of `isoe_scsi`
//! (reservation changes, resets, mode pages).

use isoe_sync::MutexExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use isoe_rbd::{Channel, RbdStore, Written};
use isoe_scsi::{AccessState, ExplicitAlua, LogicalUnit, PortGroup, PortGroups, Sense, UnitPeers};
use isoe_store::Store;

/// How long a change waits for the other gateways to take it in. A gateway
/// that died without closing its watch holds a change this long, until the
/// cluster drops its watch (osd_client_watch_timeout).
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a reset, handled on a worker, waits for the other gateways:
/// live ones answer in milliseconds.
const BRIEF_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the hello at start waits for answers: a gateway that answers
/// in this time serves the unit already.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// How often each gateway asks whether it holds each shared image.
const OWNER_POLL: Duration = Duration::from_secs(1);
/// How long a live owner has to answer whether it is alive.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// A fenced gateway's first try to serve again, after it noticed the
/// fence; each failed try doubles the wait, up to [`REJOIN_MAX_DELAY`].
const REJOIN_FIRST_DELAY: Duration = Duration::from_secs(2);
/// The longest wait between two tries to serve again.
const REJOIN_MAX_DELAY: Duration = Duration::from_secs(30);
/// A failed try to serve again is logged as a warning at most this often
/// (at debug otherwise).
const REJOIN_WARN_EVERY: Duration = Duration::from_secs(60);
/// The states a shared unit's group may be reported in: the owner's, the
/// others', a fenced gateway's, and a gateway's taking the unit over.
const SHARED_STATES: [AccessState; 4] = [
    AccessState::ActiveOptimized,
    AccessState::ActiveNonOptimized,
    AccessState::Unavailable,
    AccessState::Transitioning,
];

/// The unit's link to the other gateways.
struct Peers {
    channel: Arc<Channel>,
}

impl UnitPeers for Peers {
    fn load(&self) -> Result<(Vec<u8>, u64), String> {
        self.channel.read()
    }

    fn store(&self, state: &[u8], expected: u64) -> Result<Option<u64>, String> {
        Ok(match self.channel.write(state, expected)? {
            Written::Stored(version) => Some(version),
            Written::Conflict => None,
        })
    }

    fn publish(&self, message: &[u8]) -> Result<(), String> {
        self.notify(message, PUBLISH_TIMEOUT)
    }

    fn publish_briefly(&self, message: &[u8]) -> Result<(), String> {
        self.notify(message, BRIEF_TIMEOUT)
    }
}

impl Peers {
    /// Notifies every gateway; an error names those that did not answer
    /// within `timeout`.
    fn notify(&self, message: &[u8], timeout: Duration) -> Result<(), String> {
        let missed = self.channel.notify(message, timeout)?.missed;
        if missed > 0 {
            return Err(format!(
                "{missed} gateway(s) did not answer within {timeout:?}"
            ));
        }
        Ok(())
    }
}

/// One shared unit's ALUA, as this gateway sees it.
#[derive(Debug)]
struct Ownership {
    unit: Weak<LogicalUnit>,
    image: Arc<RbdStore>,
    channel: OnceLock<Arc<Channel>>,
    /// This gateway's port groups (tags).
    local: Vec<u16>,
    /// Every gateway's groups known here, and which of them own the image.
    view: Mutex<View>,
    /// This gateway owns the unit.
    holds: AtomicBool,
    /// This gateway is taking the unit over: its groups are transitioning.
    transitioning: AtomicBool,
    /// The cluster fenced this gateway: its groups are unavailable.
    fenced: AtomicBool,
    /// Once fenced: the way back to serving the unit.
    rejoin: Mutex<Option<Rejoin>>,
}

/// A fenced gateway's tries to serve the unit again ([`Ownership::rejoin`]).
#[derive(Debug)]
struct Rejoin {
    /// When the fence was noticed.
    fenced_at: Instant,
    /// No try before this.
    next_try: Instant,
    /// The wait after the next failed try.
    delay: Duration,
    /// Tries so far.
    tries: u32,
    /// When a failed try was last logged as a warning.
    warned: Option<Instant>,
    /// A new unit serves in this one's place: nothing more to do here.
    done: bool,
}

impl Rejoin {
    fn new(now: Instant) -> Rejoin {
        Rejoin {
            fenced_at: now,
            next_try: now + REJOIN_FIRST_DELAY,
            delay: REJOIN_FIRST_DELAY,
            tries: 0,
            warned: None,
            done: false,
        }
    }

    /// A try failed at `now`: the next waits longer. Whether to warn.
    fn failed(&mut self, now: Instant) -> bool {
        self.delay = (self.delay * 2).min(REJOIN_MAX_DELAY);
        self.next_try = now + self.delay;
        let warn = self
            .warned
            .is_none_or(|at| now.duration_since(at) >= REJOIN_WARN_EVERY);
        if warn {
            self.warned = Some(now);
        }
        warn
    }
}

#[derive(Debug, Default)]
struct View {
    /// Group tag → its relative ports.
    groups: BTreeMap<u16, Vec<u16>>,
    /// The tags of the gateway that holds the image, if known.
    owner: Vec<u16>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Peers")
    }
}

impl Ownership {
    fn tags(tags: &[u16]) -> String {
        if tags.is_empty() {
            return "-".into();
        }
        tags.iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    fn parse_tags(text: &str) -> Vec<u16> {
        text.split(',').filter_map(|t| t.parse().ok()).collect()
    }

    /// Learns groups (tag, ports = [tag], as isoe numbers them) and, if
    /// given, the owner; rebuilds or restates the unit's groups.
    fn learn(&self, groups: &[u16], owner: Option<Vec<u16>>) {
        let Some(unit) = self.unit.upgrade() else {
            return;
        };
        let mut view = self.view.lock_unpoisoned();
        let mut grew = false;
        for &tag in groups {
            grew |= view.groups.insert(tag, vec![tag]).is_none();
        }
        let moved = owner.is_some_and(|owner| {
            let moved = view.owner != owner;
            view.owner = owner;
            moved
        });
        if grew || unit.own_port_groups().is_none() {
            let groups = view
                .groups
                .iter()
                .map(|(tag, ports)| PortGroup {
                    id: *tag,
                    state: self.state_of(*tag, &view),
                    preferred: false,
                    relative_ports: ports.clone(),
                })
                .collect();
            let groups = PortGroups::new(groups);
            groups.support(&SHARED_STATES);
            unit.set_port_groups(Arc::new(groups));
        } else {
            self.restate(&unit, &view);
        }
        drop(view);
        if moved {
            unit.access_states_changed();
        }
    }

    /// The state of group `tag` as this gateway reports it.
    fn state_of(&self, tag: u16, view: &View) -> AccessState {
        let local = self.local.contains(&tag);
        if local && self.fenced.load(Ordering::Acquire) {
            AccessState::Unavailable
        } else if local && self.transitioning.load(Ordering::Acquire) {
            AccessState::Transitioning
        } else if view.owner.contains(&tag) {
            AccessState::ActiveOptimized
        } else {
            AccessState::ActiveNonOptimized
        }
    }

    /// Puts every group of the unit in the state [`Ownership::state_of`] gives.
    fn restate(&self, unit: &LogicalUnit, view: &View) {
        if let Some(groups) = unit.own_port_groups() {
            for tag in view.groups.keys() {
                groups.set_state(*tag, self.state_of(*tag, view));
            }
        }
    }

    /// Restates the groups after a flag of this gateway changed.
    fn restate_now(&self) {
        if let Some(unit) = self.unit.upgrade() {
            let view = self.view.lock_unpoisoned();
            self.restate(&unit, &view);
        }
    }

    /// Takes the unit over: this gateway's groups are transitioning (SPC-5
    /// 5.16.2.4.6) while it takes the image's lock (when `lock`) and tells
    /// the others, then active/optimized. None when a takeover is under
    /// way already; the error of a lock not taken, the states as before.
    fn take_over(&self, lock: bool) -> Option<Result<(), String>> {
        if self.transitioning.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.restate_now();
        tracing::info!(image = %self.image.name(), groups = %Self::tags(&self.local), "taking the unit over: transitioning");
        if lock {
            if let Err(e) = self.image.take_lock() {
                self.transitioning.store(false, Ordering::Release);
                self.restate_now();
                return Some(Err(e));
            }
        }
        self.now_holding();
        Some(Ok(()))
    }

    /// This gateway holds the image now: the others are told (which waits
    /// for each), then its groups are active/optimized.
    fn now_holding(&self) {
        self.holds.store(true, Ordering::Release);
        if let Some(channel) = self.channel.get() {
            let message = format!("isoe-owner 1 {}", Self::tags(&self.local));
            if let Err(e) = channel.notify(message.as_bytes(), PUBLISH_TIMEOUT) {
                tracing::warn!(image = %self.image.name(), error = %e, "could not tell the other gateways");
            }
        }
        self.transitioning.store(false, Ordering::Release);
        self.learn(&self.local, Some(self.local.clone()));
        tracing::info!(image = %self.image.name(), groups = %Self::tags(&self.local), "this gateway holds the image: active/optimized");
    }

    /// One look (the poller's): takes the unit over when this gateway holds
    /// the image's lock and the owner is gone or there is none; marks this
    /// gateway's groups unavailable once the cluster has fenced it, and
    /// then tries to serve again.
    fn poll(&self) {
        if self.fenced.load(Ordering::Acquire) {
            return self.rejoin_when_due();
        }
        if self.image.is_fenced() {
            return self.now_fenced();
        }
        if self.holds.load(Ordering::Acquire) {
            return;
        }
        match self.image.is_lock_owner() {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::debug!(error = %e, "lock owner poll failed");
                return;
            }
        }
        let owner = self.view.lock_unpoisoned().owner.clone();
        if !owner.is_empty() && self.answers(&owner) {
            return;
        }
        if !owner.is_empty() {
            tracing::warn!(image = %self.image.name(), owner = %Self::tags(&owner), "the owning gateway does not answer; taking the unit over");
        }
        // The lock is held already; None: a SET TARGET PORT GROUPS here
        // is taking the unit over.
        let _ = self.take_over(false);
    }

    /// The cluster blocklisted this gateway's client (another gateway broke
    /// its lock while it did not answer): nothing it sends lands any more.
    /// Its groups become unavailable, so that initiators go through the
    /// others (commands here end in 02/04/0C), until it serves again
    /// through a new client ([`Ownership::rejoin`]).
    fn now_fenced(&self) {
        self.fenced.store(true, Ordering::Release);
        self.holds.store(false, Ordering::Release);
        *self.rejoin.lock_unpoisoned() = Some(Rejoin::new(Instant::now()));
        tracing::error!(
            image = %self.image.name(),
            groups = %Self::tags(&self.local),
            "the cluster fenced this gateway (another gateway took the image over while this one did not answer): its paths are unavailable until it serves again through a new client"
        );
        let Some(unit) = self.unit.upgrade() else {
            return;
        };
        if let Some(groups) = unit.own_port_groups() {
            for tag in &self.local {
                groups.set_state(*tag, AccessState::Unavailable);
            }
        }
        unit.access_states_changed();
    }

    /// The poller's look at a fenced gateway: a try to serve again once the
    /// wait is over. The fenced image's requests have all ended by then:
    /// the fence answered those under way, and refuses the others at once
    /// (librbd may keep a fenced client's requests for good, so waiting
    /// for it to let go could be forever). A try holds up the poller for
    /// as long as reaching the cluster takes (at most its 30 s timeouts).
    fn rejoin_when_due(&self) {
        let mut guard = self.rejoin.lock_unpoisoned();
        let Some(rejoin) = guard.as_mut().filter(|r| !r.done) else {
            return;
        };
        let now = Instant::now();
        if now < rejoin.next_try {
            return;
        }
        rejoin.tries += 1;
        match self.rejoin() {
            Ok(()) => {
                rejoin.done = true;
                tracing::info!(
                    image = %self.image.name(),
                    groups = %Self::tags(&self.local),
                    after_ms = rejoin.fenced_at.elapsed().as_millis() as u64,
                    tries = rejoin.tries,
                    "the fenced gateway serves the unit again, through a new client"
                );
            }
            Err(e) if rejoin.failed(now) => {
                tracing::warn!(image = %self.image.name(), error = %e, tries = rejoin.tries, next_try_s = rejoin.delay.as_secs(), "the fenced gateway could not serve the unit again yet; retrying");
            }
            Err(e) => {
                tracing::debug!(image = %self.image.name(), error = %e, "serving again failed")
            }
        }
    }

    /// Serves the unit again after a fence: a new unit over the image
    /// opened again through a new client (the fenced one is never used
    /// again), shared with the other gateways as at start (its reservations
    /// read from the cluster, its groups as the owner reports them), put in
    /// the old unit's place; its initiators hear ASYMMETRIC ACCESS STATE
    /// CHANGED.
    fn rejoin(&self) -> Result<(), String> {
        let Some(old) = self.unit.upgrade() else {
            // The unit went (a reload removed it): nothing to serve.
            return Ok(());
        };
        let image = Arc::new(self.image.reopen().map_err(|e| e.to_string())?);
        let store: Arc<dyn Store> = Arc::clone(&image) as Arc<dyn Store>;
        let unit = Arc::new(LogicalUnit::new(store, old.config().clone()));
        unit.set_offline(old.is_offline());
        share(&unit, &image, self.local.clone())?;
        if !old.replace_with(&unit, &[Sense::asymmetric_access_state_changed()]) {
            tracing::info!(image = %self.image.name(), "the fenced unit is not served any more (a reload replaced or removed it)");
        }
        Ok(())
    }

    /// Whether the gateway of groups `owner` answers a ping.
    fn answers(&self, owner: &[u16]) -> bool {
        let Some(channel) = self.channel.get() else {
            return false;
        };
        let Ok(notified) = channel.notify(b"isoe-ping 1", PING_TIMEOUT) else {
            // The cluster did not take the ping: nothing is known; wait.
            return true;
        };
        notified.answers.iter().any(|answer| {
            let text = String::from_utf8_lossy(answer);
            let words: Vec<&str> = text.split_whitespace().collect();
            matches!(words.as_slice(), ["isoe-gateway", "1", tags, ..]
                if Self::parse_tags(tags).iter().any(|t| owner.contains(t)))
        })
    }

    /// What another gateway sent; the answer to a hello.
    fn message(&self, text: &str) -> Option<Vec<u8>> {
        let mut words = text.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("isoe-hello" | "isoe-ping"), Some("1"), tags) => {
                if let Some(tags) = tags {
                    self.learn(&Self::parse_tags(tags), None);
                }
                let owner = self.view.lock_unpoisoned().owner.clone();
                let answer = format!(
                    "isoe-gateway 1 {} owner {}",
                    Self::tags(&self.local),
                    Self::tags(&owner)
                );
                Some(answer.into_bytes())
            }
            (Some("isoe-owner"), Some("1"), Some(tags)) => {
                let owner = Self::parse_tags(tags);
                if !owner.iter().any(|t| self.local.contains(t)) {
                    self.holds.store(false, Ordering::Release);
                }
                self.learn(&owner, Some(owner.clone()));
                Some(Vec::new())
            }
            _ => None,
        }
    }
}

impl Ownership {
    /// [`Ownership::take_over`] for SET TARGET PORT GROUPS: another
    /// takeover under way answers 02/04/0A (the initiator asks again), a
    /// lock not taken HARDWARE ERROR, INTERNAL TARGET FAILURE.
    fn take_over_for_initiator(&self) -> Result<(), Sense> {
        use isoe_scsi::sense::sense_key::{HARDWARE_ERROR, NOT_READY};
        match self.take_over(true) {
            Some(Ok(())) => Ok(()),
            None => Err(Sense::new(NOT_READY, 0x04, 0x0a)),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "SET TARGET PORT GROUPS could not take the image");
                Err(Sense::new(HARDWARE_ERROR, 0x44, 0x00))
            }
        }
    }
}

impl ExplicitAlua for Ownership {
    fn set_target_port_groups(
        &self,
        _relative_port: u16,
        requests: &[(u16, AccessState)],
    ) -> Result<(), Sense> {
        let refuse = || Err(Sense::invalid_field_in_parameter_list(4, None));
        for (tag, state) in requests {
            let local = self.local.contains(tag);
            let owner = self.view.lock_unpoisoned().owner.contains(tag);
            match state {
                // A gateway makes only its own groups active/optimized.
                AccessState::ActiveOptimized if local => {
                    if !self.holds.load(Ordering::Acquire) {
                        self.take_over_for_initiator()?;
                    }
                }
                AccessState::ActiveOptimized if owner => {}
                AccessState::ActiveNonOptimized if !owner => {}
                _ => return refuse(),
            }
        }
        Ok(())
    }
}

/// Shares `unit` with the other gateways of `image`: its reservations,
/// resets and mode pages, and ALUA by ownership of the image. `local` are
/// this gateway's port group tags.
pub(crate) fn share(
    unit: &Arc<LogicalUnit>,
    image: &Arc<RbdStore>,
    local: Vec<u16>,
) -> Result<(), String> {
    let ownership = Arc::new(Ownership {
        unit: Arc::downgrade(unit),
        image: Arc::clone(image),
        channel: OnceLock::new(),
        local: local.clone(),
        view: Mutex::default(),
        holds: AtomicBool::new(false),
        transitioning: AtomicBool::new(false),
        fenced: AtomicBool::new(false),
        rejoin: Mutex::new(None),
    });
    let heard = Arc::downgrade(&ownership);
    let weak_unit = Arc::downgrade(unit);
    let handler: isoe_rbd::Handler = Arc::new(
        move |message: Option<&[u8]>, own: bool, reply: isoe_rbd::Reply| {
            if own {
                return;
            }
            let text = message.and_then(|m| std::str::from_utf8(m).ok());
            if let (Some(text), Some(ownership)) = (text, heard.upgrade()) {
                if let Some(answer) = ownership.message(text) {
                    return reply.send(&answer);
                }
            }
            if let Some(unit) = weak_unit.upgrade() {
                // Acknowledged once in force here: a message that ends
                // tasks (PREEMPT AND ABORT, a reset) holds the sender's
                // command until they have ended.
                unit.peer_message(message, Box::new(move || reply.send(&[])));
            }
        },
    );
    let channel = Arc::new(Channel::open(image, handler).map_err(|e| e.to_string())?);
    let _ = ownership.channel.set(Arc::clone(&channel));
    ownership.learn(&local, None);
    let hello = format!("isoe-hello 1 {}", Ownership::tags(&local));
    let notified = channel.notify(hello.as_bytes(), HELLO_TIMEOUT)?;
    // Whoever answers serves the unit already; this gateway counts itself.
    let first = notified.answers.len() <= 1;
    for answer in &notified.answers {
        let text = String::from_utf8_lossy(answer);
        let words: Vec<&str> = text.split_whitespace().collect();
        if let ["isoe-gateway", "1", tags, "owner", owner] = words.as_slice() {
            let owner = Ownership::parse_tags(owner);
            ownership.learn(
                &Ownership::parse_tags(tags),
                (!owner.is_empty()).then_some(owner),
            );
        }
    }
    unit.share_reservations(Arc::new(Peers { channel }), first)?;
    if first && !image.is_lock_owner()? {
        // Alone: this gateway takes the image, so that some path is
        // active/optimized from the start.
        image.take_lock()?;
    }
    ownership.poll();
    unit.set_explicit_alua(Arc::clone(&ownership) as Arc<dyn ExplicitAlua>);
    watch_owner(Arc::downgrade(&ownership));
    Ok(())
}

/// The shared units the poller looks at.
static WATCHED: Mutex<Vec<Weak<Ownership>>> = Mutex::new(Vec::new());

/// Adds `ownership` to the poller's list, starting the poller (one thread
/// for the process) the first time.
fn watch_owner(ownership: Weak<Ownership>) {
    static POLLER: OnceLock<()> = OnceLock::new();
    WATCHED.lock_unpoisoned().push(ownership);
    POLLER.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("isoe-alua".into())
            .spawn(|| loop {
                std::thread::sleep(OWNER_POLL);
                let live: Vec<Arc<Ownership>> = {
                    let mut watched = WATCHED.lock_unpoisoned();
                    watched.retain(|w| w.strong_count() > 0);
                    watched.iter().filter_map(Weak::upgrade).collect()
                };
                for ownership in live {
                    ownership.poll();
                }
            });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_gateway_tries_again_less_and_less_often_and_warns_rarely() {
        let fenced = Instant::now();
        let mut rejoin = Rejoin::new(fenced);
        assert_eq!(rejoin.next_try, fenced + REJOIN_FIRST_DELAY);
        let mut now = rejoin.next_try;
        let mut waits = Vec::new();
        let mut warned = Vec::new();
        for _ in 0..7 {
            warned.push(rejoin.failed(now));
            waits.push((rejoin.next_try - now).as_secs());
            now = rejoin.next_try;
        }
        assert_eq!(waits, [4, 8, 16, 30, 30, 30, 30]);
        // Tries at 2, 6, 14, 30, 60, 90, 120 s: warned at 2, 90 (after 60 s).
        assert_eq!(warned, [true, false, false, false, false, true, false]);
    }
}
