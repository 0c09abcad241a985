//! Reservations: SPC-2 RESERVE/RELEASE (6/10) and SPC-5 persistent
//! reservations (PERSISTENT RESERVE IN/OUT, SPC-5 5.13, 6.16, 6.17).
//!
//! One mutex per logical unit guards the registrations and the reservation;
//! the command path reads one relaxed atomic while no reservation exists, so
//! a unit nobody reserves pays nothing for this (ARCHITECTURE datapath rule 4).
//! With APTPL the state is written to a file (temporary file, fsync, rename)
//! before the command that changed it completes, and read back at start.
//!
//! A unit several targets serve (the gateways of one RBD image) keeps the
//! state with them instead ([`UnitPeers`]): every reservation command reads
//! it, changes it, writes it back under compare-and-set (and does it again
//! from the new state when another gateway wrote first), and then tells the
//! other gateways, with the unit attentions it raised, before it completes;
//! they take the new state and raise those attentions for their own I_T
//! nexuses. The command path keeps reading the local copy, which the
//! messages keep current. The state lives in the cluster, so APTPL is
//! always possible there (PTPL_C=1).

use isoe_sync::MutexExt;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::attention::{
    Attentions, REGISTRATIONS_PREEMPTED, RESERVATIONS_PREEMPTED, RESERVATIONS_RELEASED,
};
use crate::data_in::truncate_to_allocation_length;
use crate::opcode::*;
use crate::{cdb, Nexus, Sense};

/// PERSISTENT RESERVE OUT service actions (SPC-5 6.17.2, table 172).
mod out_action {
    pub const REGISTER: u8 = 0x00;
    pub const RESERVE: u8 = 0x01;
    pub const RELEASE: u8 = 0x02;
    pub const CLEAR: u8 = 0x03;
    pub const PREEMPT: u8 = 0x04;
    pub const PREEMPT_AND_ABORT: u8 = 0x05;
    pub const REGISTER_AND_IGNORE_EXISTING_KEY: u8 = 0x06;
    pub const REGISTER_AND_MOVE: u8 = 0x07;
}

/// PERSISTENT RESERVE IN service actions (SPC-5 6.16.1, table 160).
mod in_action {
    pub const READ_KEYS: u8 = 0x00;
    pub const READ_RESERVATION: u8 = 0x01;
    pub const REPORT_CAPABILITIES: u8 = 0x02;
    pub const READ_FULL_STATUS: u8 = 0x03;
}

/// Persistent reservation types (SPC-5 6.16.3.4, table 166).
pub mod kind {
    /// Write Exclusive.
    pub const WRITE_EXCLUSIVE: u8 = 0x1;
    /// Exclusive Access.
    pub const EXCLUSIVE_ACCESS: u8 = 0x3;
    /// Write Exclusive, Registrants Only.
    pub const WRITE_EXCLUSIVE_REGISTRANTS_ONLY: u8 = 0x5;
    /// Exclusive Access, Registrants Only.
    pub const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 0x6;
    /// Write Exclusive, All Registrants.
    pub const WRITE_EXCLUSIVE_ALL_REGISTRANTS: u8 = 0x7;
    /// Exclusive Access, All Registrants.
    pub const EXCLUSIVE_ACCESS_ALL_REGISTRANTS: u8 = 0x8;
}

/// PR OUT basic parameter list length (SPC-5 6.17.3).
const PARAMETER_LIST_LEN: usize = 24;
/// Registrations kept per unit; more are refused with INSUFFICIENT
/// REGISTRATION RESOURCES (SPC-5 5.13.7).
const REGISTRATIONS_MAX: usize = 256;
/// iSCSI TransportID: FORMAT CODE 01b (with ISID), PROTOCOL IDENTIFIER 5h.
const ISCSI_TRANSPORT_ID_WITH_ISID: u8 = 0x45;
/// iSCSI TransportID: FORMAT CODE 00b (name only), PROTOCOL IDENTIFIER 5h.
const ISCSI_TRANSPORT_ID_NAME: u8 = 0x05;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Registration {
    nexus: Nexus,
    key: u64,
    all_target_ports: bool,
}

/// A persistent reservation (LU_SCOPE, the only scope SPC-5 keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Persistent {
    /// TYPE (see [`kind`]).
    kind: u8,
}

#[derive(Debug, Default, Clone)]
struct State {
    /// The shared state's version this copy is at (0: not shared, or never read).
    version: u64,
    generation: u32,
    registrations: Vec<Registration>,
    /// The persistent reservation and, unless it is an all-registrants
    /// type, its holder.
    reservation: Option<(Persistent, Option<Nexus>)>,
    /// Activate persist through power loss, as the last PR OUT asked.
    aptpl: bool,
    /// SPC-2 RESERVE holder.
    legacy: Option<Nexus>,
    /// A unit replacing this one took the state over for good
    /// ([`Reservations::hand_over`]): a change made here would be lost, so
    /// it is refused with a NOT READY the initiator retries, on the new
    /// unit by then.
    moved: bool,
}

fn all_registrants(kind: u8) -> bool {
    matches!(
        kind,
        kind::WRITE_EXCLUSIVE_ALL_REGISTRANTS | kind::EXCLUSIVE_ACCESS_ALL_REGISTRANTS
    )
}

fn registrants_only_or_all(kind: u8) -> bool {
    matches!(
        kind,
        kind::WRITE_EXCLUSIVE_REGISTRANTS_ONLY
            | kind::EXCLUSIVE_ACCESS_REGISTRANTS_ONLY
            | kind::WRITE_EXCLUSIVE_ALL_REGISTRANTS
            | kind::EXCLUSIVE_ACCESS_ALL_REGISTRANTS
    )
}

fn write_exclusive(kind: u8) -> bool {
    matches!(
        kind,
        kind::WRITE_EXCLUSIVE
            | kind::WRITE_EXCLUSIVE_REGISTRANTS_ONLY
            | kind::WRITE_EXCLUSIVE_ALL_REGISTRANTS
    )
}

fn valid_kind(kind: u8) -> bool {
    write_exclusive(kind) || matches!(kind, 0x3 | 0x6 | 0x8)
}

impl State {
    /// Every nexus the state names.
    fn nexuses(&self) -> Vec<Nexus> {
        let mut nexuses: Vec<Nexus> = self.registrations.iter().map(|r| r.nexus.clone()).collect();
        nexuses.extend(self.legacy.iter().cloned());
        nexuses
    }

    fn registration(&self, nexus: &Nexus) -> Option<&Registration> {
        self.registrations.iter().find(|r| &r.nexus == nexus)
    }

    /// The nexuses `nexus`'s registration covers: all those of its
    /// initiator port registered with ALL_TG_PT when it was, else itself.
    fn covered_by(&self, nexus: &Nexus) -> Vec<Nexus> {
        let same_port =
            |n: &Nexus| n.initiator_name == nexus.initiator_name && n.isid == nexus.isid;
        match self.registration(nexus) {
            Some(r) if r.all_target_ports => self
                .registrations
                .iter()
                .filter(|r| r.all_target_ports && same_port(&r.nexus))
                .map(|r| r.nexus.clone())
                .collect(),
            _ => vec![nexus.clone()],
        }
    }

    fn is_holder(&self, nexus: &Nexus) -> bool {
        match &self.reservation {
            Some((p, _)) if all_registrants(p.kind) => self.registration(nexus).is_some(),
            Some((_, Some(holder))) => holder == nexus,
            _ => false,
        }
    }

    /// The key READ RESERVATION reports: the holder's, or zero for the
    /// all-registrants types (SPC-5 6.16.3.3).
    fn reservation_key(&self) -> u64 {
        match &self.reservation {
            Some((p, _)) if all_registrants(p.kind) => 0,
            Some((_, Some(holder))) => self.registration(holder).map_or(0, |r| r.key),
            _ => 0,
        }
    }

    /// Drops the registration of `nexus`, releasing the reservation when it
    /// held it (SPC-5 5.13.11.2.2). Returns whether the reservation went.
    fn unregister(&mut self, nexus: &Nexus) -> bool {
        let was_holder = self.is_holder(nexus);
        self.registrations.retain(|r| &r.nexus != nexus);
        let Some((p, _)) = self.reservation else {
            return false;
        };
        let release = if all_registrants(p.kind) {
            self.registrations.is_empty()
        } else {
            was_holder
        };
        if release {
            self.reservation = None;
        }
        release
    }
}

/// What a unit shares with the other targets that serve its medium (the
/// gateways of one RBD image): a state kept beside the medium under
/// compare-and-set, and messages to the others.
pub trait UnitPeers: Send + Sync {
    /// The shared state (empty when none was written) and its version.
    fn load(&self) -> Result<(Vec<u8>, u64), String>;
    /// Writes `state` if the stored one is still at `expected`: the new
    /// version, or None when another wrote first.
    fn store(&self, state: &[u8], expected: u64) -> Result<Option<u64>, String>;
    /// Tells the others; returns once each live one has taken it in.
    fn publish(&self, message: &[u8]) -> Result<(), String>;
    /// Tells the others, waiting for them only briefly: for a caller that
    /// should not wait long on the cluster (a reset, handled on an event
    /// loop, whose other connections wait meanwhile). The default waits as
    /// [`UnitPeers::publish`] does.
    fn publish_briefly(&self, message: &[u8]) -> Result<(), String> {
        self.publish(message)
    }
}

/// Where reservation commands raise unit attentions: the unit's own, or a
/// recorder that also tells the other gateways.
pub(crate) trait Raise {
    /// Queues `sense` for the attached nexuses `which` picks.
    fn raise(&self, which: &dyn Fn(&Nexus) -> bool, sense: Sense);
    /// The attached nexuses `which` picks.
    fn attached(&self, which: &dyn Fn(&Nexus) -> bool) -> Vec<Nexus>;
}

impl Raise for Attentions {
    fn raise(&self, which: &dyn Fn(&Nexus) -> bool, sense: Sense) {
        Attentions::raise(self, which, sense);
    }
    fn attached(&self, which: &dyn Fn(&Nexus) -> bool) -> Vec<Nexus> {
        Attentions::attached(self, which)
    }
}

/// Unit attentions a shared change raised, kept until the change is stored:
/// then raised here and sent to the other gateways.
struct Recorder<'a> {
    local: &'a Attentions,
    /// Every nexus the state names: only they hear reservation attentions.
    candidates: Vec<Nexus>,
    raised: RefCell<Vec<(Nexus, Sense)>>,
}

impl Raise for Recorder<'_> {
    fn raise(&self, which: &dyn Fn(&Nexus) -> bool, sense: Sense) {
        let mut raised = self.raised.borrow_mut();
        for nexus in self.candidates.iter().filter(|n| which(n)) {
            raised.push((nexus.clone(), sense));
        }
    }
    fn attached(&self, which: &dyn Fn(&Nexus) -> bool) -> Vec<Nexus> {
        self.local.attached(which)
    }
}

/// Passes raises on, noting the attached nexuses that lose their
/// registration to a preemption: PREEMPT AND ABORT ends their tasks.
struct Preempting<'a> {
    inner: &'a dyn Raise,
    preempted: RefCell<Vec<Nexus>>,
}

impl Raise for Preempting<'_> {
    fn raise(&self, which: &dyn Fn(&Nexus) -> bool, sense: Sense) {
        if sense == REGISTRATIONS_PREEMPTED {
            self.preempted
                .borrow_mut()
                .extend(self.inner.attached(which));
        }
        self.inner.raise(which, sense);
    }
    fn attached(&self, which: &dyn Fn(&Nexus) -> bool) -> Vec<Nexus> {
        self.inner.attached(which)
    }
}

/// The reservation state of one logical unit.
#[derive(Default)]
pub(crate) struct Reservations {
    /// True while a persistent or SPC-2 reservation exists, or any
    /// registration (which makes RESERVE/RELEASE conflict): the command
    /// path's fast check.
    active: AtomicBool,
    state: Mutex<State>,
    /// Where APTPL state is kept; None: PTPL_C=0.
    persist_path: Option<PathBuf>,
    /// The other gateways, for a unit they serve too.
    shared: OnceLock<Arc<dyn UnitPeers>>,
    /// Serializes this gateway's shared changes (read, change, store, tell).
    changing: Mutex<()>,
}

impl std::fmt::Debug for Reservations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservations")
            .field("state", &self.state)
            .field("shared", &self.shared.get().is_some())
            .finish_non_exhaustive()
    }
}

/// How many times a shared change is made again when another gateway wrote
/// first, before the command fails.
const SHARED_ATTEMPTS: usize = 16;

/// How a command is treated under a reservation (SPC-5 table 67, SBC-4 table 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Allowed whatever the reservation.
    Always,
    /// Reads the medium or unit state: allowed under Write Exclusive types.
    Read,
    /// Changes the medium or unit state.
    Write,
}

fn access_of(cdb: &[u8]) -> Access {
    match cdb[0] {
        INQUIRY
        | REPORT_LUNS
        | REQUEST_SENSE
        | TEST_UNIT_READY
        | PERSISTENT_RESERVE_IN
        | PERSISTENT_RESERVE_OUT
        | MAINTENANCE_IN
        | READ_CAPACITY_10 => Access::Always,
        SERVICE_ACTION_IN_16 if cdb::service_action(cdb) == READ_CAPACITY_16_SA => Access::Always,
        READ_6 | READ_10 | READ_12 | READ_16 | VERIFY_10 | VERIFY_12 | VERIFY_16 | MODE_SENSE_6
        | MODE_SENSE_10 | PRE_FETCH_10 | PRE_FETCH_16 | SERVICE_ACTION_IN_16
        | READ_DEFECT_DATA_10 | READ_DEFECT_DATA_12 | RECEIVE_COPY_RESULTS => Access::Read,
        _ => Access::Write,
    }
}

impl Reservations {
    pub(crate) fn new(persist_path: Option<PathBuf>) -> Self {
        let mut state = State::default();
        if let Some(path) = &persist_path {
            if let Some(loaded) = load(path) {
                state = loaded;
            }
        }
        let reservations = Self {
            active: AtomicBool::new(false),
            state: Mutex::new(state),
            persist_path,
            shared: OnceLock::new(),
            changing: Mutex::new(()),
        };
        let guard = reservations.lock();
        reservations.refresh(&guard);
        drop(guard);
        reservations
    }

    /// Takes the registrations and reservations of `previous`, the state
    /// of the unit this one replaces (its keys changed, its medium stays).
    pub(crate) fn take_over(&self, previous: &Reservations) {
        let taken = previous.lock().clone();
        let mut state = self.lock();
        *state = taken;
        self.refresh(&state);
    }

    /// As [`Reservations::take_over`], once this unit serves in place of
    /// `previous`: what changed there since the first copy comes too, and
    /// `previous` takes no change after it (a PR OUT, RESERVE or RELEASE
    /// still reaching it is answered NOT READY, BECOMING READY, and its
    /// retry reaches this unit).
    pub(crate) fn hand_over(&self, previous: &Reservations) {
        let mut old = previous.lock();
        let mut state = self.lock();
        *state = old.clone();
        state.moved = false;
        old.moved = true;
        self.refresh(&state);
    }

    /// The refusal of a change to a state another unit took over.
    fn refuse_if_moved(state: &State) -> Result<(), Refusal> {
        if state.moved {
            return Err(Sense::not_ready_becoming_ready().into());
        }
        Ok(())
    }

    /// Sends `message` to the other gateways of a shared unit (nothing
    /// otherwise); a failure is logged.
    pub(crate) fn publish(&self, message: &[u8]) {
        if let Some(peers) = self.shared.get() {
            if let Err(e) = peers.publish(message) {
                tracing::warn!(error = %e, "the other gateways may not have heard of a change");
            }
        }
    }

    /// As [`Reservations::publish`], waiting only briefly for the others.
    pub(crate) fn publish_briefly(&self, message: &[u8]) {
        if let Some(peers) = self.shared.get() {
            if let Err(e) = peers.publish_briefly(message) {
                tracing::warn!(error = %e, "the other gateways may not have heard of a reset");
            }
        }
    }

    /// Whether the state is shared with other gateways.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.get().is_some()
    }

    /// Whether APTPL can be honoured: a file to keep the state in, or the
    /// cluster that keeps it anyway.
    fn persistent(&self) -> bool {
        self.persist_path.is_some() || self.shared.get().is_some()
    }

    /// From now on the state is the one shared with `peers`: read it now.
    /// The first gateway of a unit (no other one answered the hello `peers`
    /// sent) starts it as a power-on would: without APTPL, registrations
    /// and reservations go.
    pub(crate) fn share(&self, peers: Arc<dyn UnitPeers>, first: bool) -> Result<(), String> {
        let peers = self.shared.get_or_init(|| peers);
        self.sync(peers.as_ref()).map_err(|e| format!("{e:?}"))?;
        let volatile = {
            let state = self.lock();
            !state.aptpl
                && (state.reservation.is_some()
                    || state.legacy.is_some()
                    || !state.registrations.is_empty())
        };
        if first && volatile {
            let _guard = self.changing.lock_unpoisoned();
            let version = self.lock().version;
            let empty = encode(&State::default());
            if let Ok(Some(version)) = peers.store(empty.as_bytes(), version) {
                let mut state = self.lock();
                *state = State {
                    version,
                    ..State::default()
                };
                self.refresh(&state);
            }
        }
        Ok(())
    }

    /// Reads the shared state into the local copy.
    fn sync(&self, peers: &dyn UnitPeers) -> Result<(), Refusal> {
        let (bytes, version) = peers.load().map_err(shared_failure)?;
        let loaded = if bytes.is_empty() {
            Some(State::default())
        } else {
            std::str::from_utf8(&bytes).ok().and_then(decode)
        };
        let Some(mut loaded) = loaded else {
            return Err(shared_failure(
                "the shared reservation state does not parse".into(),
            ));
        };
        loaded.version = version;
        let mut state = self.lock();
        *state = loaded;
        self.refresh(&state);
        Ok(())
    }

    /// Runs a command that may change the state: here only, or, for a
    /// shared unit, on the shared state (see the module's documentation).
    /// `aborts`: the change ends the tasks of the nexuses it preempts
    /// (PREEMPT AND ABORT), on the other gateways before they answer.
    fn change(
        &self,
        attentions: &Attentions,
        aborts: bool,
        op: impl Fn(&dyn Raise) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let Some(peers) = self.shared.get() else {
            return op(attentions);
        };
        let _guard = self.changing.lock_unpoisoned();
        for _ in 0..SHARED_ATTEMPTS {
            self.sync(peers.as_ref())?;
            let (before, version, candidates) = {
                let state = self.lock();
                (encode(&state), state.version, state.nexuses())
            };
            let recorder = Recorder {
                local: attentions,
                candidates,
                raised: RefCell::default(),
            };
            let result = op(&recorder);
            let after = encode(&self.lock());
            if after == before {
                return result;
            }
            match peers.store(after.as_bytes(), version) {
                Ok(Some(stored)) => {
                    self.lock().version = stored;
                    let raised = recorder.raised.into_inner();
                    for (nexus, sense) in &raised {
                        attentions.raise(|n| n == nexus, *sense);
                    }
                    let message = encode_message(stored, aborts, &raised, &after);
                    if let Err(e) = peers.publish(message.as_bytes()) {
                        tracing::warn!(error = %e, "the other gateways may not have heard of a reservation change");
                    }
                    return result;
                }
                // Another gateway wrote first: start again from its state.
                Ok(None) => continue,
                Err(e) => {
                    let _ = self.sync(peers.as_ref());
                    return Err(shared_failure(e));
                }
            }
        }
        let _ = self.sync(peers.as_ref());
        Err(shared_failure(
            "other gateways kept changing the reservations".into(),
        ))
    }

    /// A message another gateway published: takes its state if newer and
    /// raises its unit attentions here (the caller leaves out this
    /// gateway's own). None when messages may have been missed: the state
    /// is read again. Messages of other kinds are ignored. Returns the
    /// nexuses whose tasks a PREEMPT AND ABORT ends.
    pub(crate) fn apply_message(
        &self,
        attentions: &Attentions,
        message: Option<&[u8]>,
    ) -> Option<Vec<Nexus>> {
        let peers = self.shared.get()?;
        let Some(message) = message else {
            if let Err(e) = self.sync(peers.as_ref()) {
                tracing::warn!(error = ?e, "could not read the shared reservation state");
            }
            return None;
        };
        // Other messages share the channel.
        match std::str::from_utf8(message).ok().and_then(decode_message) {
            None => None,
            Some(Message {
                version,
                aborts,
                raised,
                state: text,
            }) => {
                if let Some(mut loaded) = decode(text) {
                    let mut state = self.lock();
                    if version > state.version {
                        loaded.version = version;
                        *state = loaded;
                        self.refresh(&state);
                    }
                }
                for (nexus, sense) in &raised {
                    attentions.raise(|n| n == nexus, *sense);
                }
                aborts.then(|| {
                    raised
                        .into_iter()
                        .filter(|(_, sense)| *sense == REGISTRATIONS_PREEMPTED)
                        .map(|(nexus, _)| nexus)
                        .collect()
                })
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change below leaves the state whole before it can panic.
        self.state.lock_unpoisoned()
    }

    fn refresh(&self, state: &State) {
        let active = state.reservation.is_some()
            || state.legacy.is_some()
            || !state.registrations.is_empty();
        self.active.store(active, Ordering::Release);
    }

    /// Whether `cdb` from `nexus` may run now, or ends in RESERVATION CONFLICT.
    /// PR OUT and RESERVE/RELEASE check themselves.
    pub(crate) fn permits(&self, nexus: &Nexus, cdb: &[u8]) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return true;
        }
        let state = self.lock();
        if let Some(holder) = &state.legacy {
            // SPC-2 5.5.1: a reservation by another initiator refuses all
            // but the commands that report state.
            return holder == nexus
                || matches!(
                    cdb[0],
                    INQUIRY | REPORT_LUNS | REQUEST_SENSE | MAINTENANCE_IN | RELEASE_6 | RELEASE_10
                );
        }
        let Some((persistent, _)) = &state.reservation else {
            return true;
        };
        let access = access_of(cdb);
        if access == Access::Always || state.is_holder(nexus) {
            return true;
        }
        if registrants_only_or_all(persistent.kind) && state.registration(nexus).is_some() {
            return true;
        }
        access == Access::Read && write_exclusive(persistent.kind)
    }

    /// Ends SPC-2 reservations (LOGICAL UNIT RESET, TARGET RESET: SPC-2 5.5.1);
    /// persistent reservations survive resets.
    pub(crate) fn reset(&self, attentions: &Attentions) {
        // The local copy is current (other gateways' changes come as
        // messages): with no SPC-2 reservation there is nothing to clear,
        // and a reset, handled on an event loop, need not ask the cluster.
        if self.lock().legacy.is_none() {
            return;
        }
        let clear = |_: &dyn Raise| {
            let mut state = self.lock();
            state.legacy = None;
            self.refresh(&state);
            Ok(())
        };
        let _ = self.change(attentions, false, clear);
    }

    /// The I_T nexus is gone: its SPC-2 reservation ends (SPC-2 5.5.1).
    /// The I_T nexus holding an SPC-2 reservation, if any.
    pub(crate) fn legacy_holder(&self) -> Option<Nexus> {
        self.lock().legacy.clone()
    }

    pub(crate) fn nexus_lost(&self, attentions: &Attentions, nexus: &Nexus) {
        if self.lock().legacy.as_ref() != Some(nexus) {
            return;
        }
        let _ = self.change(attentions, false, |_| {
            let mut state = self.lock();
            if state.legacy.as_ref() == Some(nexus) {
                state.legacy = None;
                self.refresh(&state);
            }
            Ok(())
        });
    }

    /// RESERVE (6) / RESERVE (10) (SPC-2 7.21, 7.22).
    pub(crate) fn reserve(
        &self,
        attentions: &Attentions,
        nexus: &Nexus,
        cdb: &[u8],
    ) -> Result<(), Refusal> {
        self.change(attentions, false, |_| self.reserve_here(nexus, cdb))
    }

    fn reserve_here(&self, nexus: &Nexus, cdb: &[u8]) -> Result<(), Refusal> {
        if cdb[0] == RESERVE_10 && cdb[1] & 0x12 != 0 {
            // 3RDPTY and LONGID: reserving for another initiator is not supported.
            return Err(Sense::invalid_field_in_cdb(1, 4).into());
        }
        if cdb[0] == RESERVE_6 && cdb[1] & 0x01 != 0 {
            // Extent reservations are obsolete.
            return Err(Sense::invalid_field_in_cdb(1, 0).into());
        }
        let mut state = self.lock();
        Self::refuse_if_moved(&state)?;
        if state.reservation.is_some() || !state.registrations.is_empty() {
            return Err(Refusal::Conflict);
        }
        match &state.legacy {
            Some(holder) if holder != nexus => Err(Refusal::Conflict),
            _ => {
                state.legacy = Some(nexus.clone());
                self.refresh(&state);
                Ok(())
            }
        }
    }

    /// RELEASE (6) / RELEASE (10) (SPC-2 7.17, 7.18): releasing what another
    /// nexus holds, or nothing, is a GOOD no-op.
    pub(crate) fn release(
        &self,
        attentions: &Attentions,
        nexus: &Nexus,
        cdb: &[u8],
    ) -> Result<(), Refusal> {
        self.change(attentions, false, |_| self.release_here(nexus, cdb))
    }

    fn release_here(&self, nexus: &Nexus, cdb: &[u8]) -> Result<(), Refusal> {
        if cdb[0] == RELEASE_10 && cdb[1] & 0x12 != 0 {
            return Err(Sense::invalid_field_in_cdb(1, 4).into());
        }
        let mut state = self.lock();
        Self::refuse_if_moved(&state)?;
        if state.reservation.is_some() || !state.registrations.is_empty() {
            return Err(Refusal::Conflict);
        }
        if state.legacy.as_ref() == Some(nexus) {
            state.legacy = None;
            self.refresh(&state);
        }
        Ok(())
    }

    /// PERSISTENT RESERVE IN (SPC-5 6.16).
    pub(crate) fn persistent_reserve_in(
        &self,
        cdb: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Result<(), Sense> {
        let allocation_length = u32::from(cdb::u16_at(cdb, 7));
        if let Some(peers) = self.shared.get() {
            // What another gateway changed is here already (its message
            // came before its command completed); reading makes sure of it.
            self.sync(peers.as_ref()).map_err(Refusal::sense)?;
        }
        let state = self.lock();
        match cdb[1] & 0x1f {
            in_action::READ_KEYS => {
                data_in.extend_from_slice(&state.generation.to_be_bytes());
                let length = (state.registrations.len() * 8) as u32;
                data_in.extend_from_slice(&length.to_be_bytes());
                for registration in &state.registrations {
                    data_in.extend_from_slice(&registration.key.to_be_bytes());
                }
            }
            in_action::READ_RESERVATION => {
                data_in.extend_from_slice(&state.generation.to_be_bytes());
                match &state.reservation {
                    None => data_in.extend_from_slice(&0u32.to_be_bytes()),
                    Some((persistent, _)) => {
                        data_in.extend_from_slice(&16u32.to_be_bytes());
                        data_in.extend_from_slice(&state.reservation_key().to_be_bytes());
                        data_in.extend_from_slice(&[0; 4]);
                        data_in.push(0);
                        // SCOPE 0h (LU_SCOPE), TYPE.
                        data_in.push(persistent.kind & 0x0f);
                        data_in.extend_from_slice(&[0; 2]);
                    }
                }
            }
            in_action::REPORT_CAPABILITIES => {
                // SPC-5 6.16.4: CRH=1 (RESERVE/RELEASE succeed... never: they
                // conflict under registrations, so CRH=0), SIP_C=1, ATP_C=1,
                // PTPL_C when a persist path exists; TMV=1 with every type.
                let ptpl_c = u8::from(self.persistent());
                data_in.extend_from_slice(&[0x00, 0x08]);
                data_in.push(0x08 | 0x04 | ptpl_c);
                data_in.push(0x80 | u8::from(state.aptpl));
                // WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX; EX_AC_AR.
                data_in.push(0x80 | 0x40 | 0x20 | 0x08 | 0x02);
                data_in.push(0x01);
                data_in.extend_from_slice(&[0; 2]);
            }
            in_action::READ_FULL_STATUS => {
                data_in.extend_from_slice(&state.generation.to_be_bytes());
                data_in.extend_from_slice(&[0; 4]);
                for registration in &state.registrations {
                    let holder = state.is_holder(&registration.nexus);
                    data_in.extend_from_slice(&registration.key.to_be_bytes());
                    data_in.extend_from_slice(&[0; 4]);
                    data_in.push(u8::from(registration.all_target_ports) << 1 | u8::from(holder));
                    let scope_type = match (&state.reservation, holder) {
                        (Some((p, _)), true) => p.kind & 0x0f,
                        _ => 0,
                    };
                    data_in.push(scope_type);
                    data_in.extend_from_slice(&[0; 4]);
                    data_in
                        .extend_from_slice(&registration.nexus.relative_target_port.to_be_bytes());
                    let transport_id = transport_id(&registration.nexus);
                    data_in.extend_from_slice(&(transport_id.len() as u32).to_be_bytes());
                    data_in.extend_from_slice(&transport_id);
                }
                let length = (data_in.len() - 8) as u32;
                data_in[4..8].copy_from_slice(&length.to_be_bytes());
            }
            _ => return Err(Sense::invalid_field_in_cdb(1, 4)),
        }
        truncate_to_allocation_length(data_in, allocation_length);
        Ok(())
    }

    /// PERSISTENT RESERVE OUT (SPC-5 6.17). Unit attentions for other nexuses
    /// go through `attentions`. A PREEMPT AND ABORT returns the nexuses
    /// attached here whose tasks it ends (their registrations went); the
    /// other gateways ended theirs before this returns.
    pub(crate) fn persistent_reserve_out(
        &self,
        nexus: &Nexus,
        attentions: &Attentions,
        cdb: &[u8],
        data_out: &[u8],
        target_ports: &[u16],
    ) -> Result<Vec<Nexus>, Refusal> {
        let aborts = cdb[1] & 0x1f == out_action::PREEMPT_AND_ABORT;
        let preempted = RefCell::new(Vec::new());
        self.change(attentions, aborts, |raise| {
            let tap = Preempting {
                inner: raise,
                preempted: RefCell::default(),
            };
            let result = self.persistent_reserve_out_here(nexus, &tap, cdb, data_out, target_ports);
            // The change may be made again on a newer state: the last counts.
            *preempted.borrow_mut() = tap.preempted.into_inner();
            result
        })?;
        Ok(if aborts {
            preempted.into_inner()
        } else {
            Vec::new()
        })
    }

    fn persistent_reserve_out_here(
        &self,
        nexus: &Nexus,
        attentions: &dyn Raise,
        cdb: &[u8],
        data_out: &[u8],
        target_ports: &[u16],
    ) -> Result<(), Refusal> {
        let action = cdb[1] & 0x1f;
        let scope = cdb[2] >> 4;
        let kind = cdb[2] & 0x0f;
        let parameter_list_length = cdb::u32_at(cdb, 5) as usize;
        if action > out_action::REGISTER_AND_MOVE {
            return Err(Sense::invalid_field_in_cdb(1, 4).into());
        }
        if data_out.len() < parameter_list_length || parameter_list_length < PARAMETER_LIST_LEN {
            return Err(Sense::parameter_list_length_error().into());
        }
        let parameters = &data_out[..parameter_list_length];
        let key = cdb::u64_at(parameters, 0);
        let action_key = cdb::u64_at(parameters, 8);

        let mut state = self.lock();
        Self::refuse_if_moved(&state)?;
        if state.legacy.as_ref().is_some_and(|holder| holder != nexus) {
            return Err(Refusal::Conflict);
        }
        if action == out_action::REGISTER_AND_MOVE {
            let result = register_and_move(&mut state, nexus, scope, kind, parameters);
            return self.finish(state, result, parameters[17] & 0x01 != 0);
        }
        let spec_i_pt = parameters[20] & 0x08 != 0;
        let all_target_ports = parameters[20] & 0x04 != 0;
        let aptpl = parameters[20] & 0x01 != 0;
        if parameter_list_length != PARAMETER_LIST_LEN
            && !(spec_i_pt && action == out_action::REGISTER)
        {
            return Err(Sense::parameter_list_length_error().into());
        }
        if aptpl && !self.persistent() {
            // SPC-5 6.17.3: APTPL without PTPL_C.
            return Err(Sense::invalid_field_in_parameter_list(20, Some(0)).into());
        }
        let registered_key = state.registration(nexus).map(|r| r.key);
        let result = match action {
            out_action::REGISTER | out_action::REGISTER_AND_IGNORE_EXISTING_KEY => {
                let ignore = action == out_action::REGISTER_AND_IGNORE_EXISTING_KEY;
                if spec_i_pt && ignore {
                    return Err(Sense::invalid_field_in_parameter_list(20, Some(3)).into());
                }
                register(
                    &mut state,
                    attentions,
                    nexus,
                    Register {
                        key,
                        action_key,
                        ignore,
                        all_target_ports: all_target_ports.then_some(target_ports),
                        specified: spec_i_pt.then(|| &parameters[PARAMETER_LIST_LEN..]),
                    },
                )
            }
            _ if registered_key != Some(key) => Err(Refusal::Conflict),
            out_action::RESERVE => reserve(&mut state, nexus, scope, kind),
            out_action::RELEASE => release(&mut state, attentions, nexus, scope, kind),
            out_action::CLEAR => Ok(clear(&mut state, attentions, nexus)),
            out_action::PREEMPT | out_action::PREEMPT_AND_ABORT => {
                preempt(&mut state, attentions, nexus, scope, kind, action_key)
            }
            _ => Err(Sense::invalid_field_in_cdb(1, 4).into()),
        };
        self.finish(state, result, aptpl)
    }

    /// Bumps the generation, keeps APTPL state durable and the fast flag
    /// current after a PR OUT.
    fn finish(
        &self,
        mut state: MutexGuard<'_, State>,
        result: Result<Change, Refusal>,
        aptpl: bool,
    ) -> Result<(), Refusal> {
        let change = result?;
        if change == Change::Registrations {
            state.generation = state.generation.wrapping_add(1);
        }
        if change != Change::None {
            // SPC-5 5.13.5: the APTPL bit of the last command that changed
            // the state decides whether it persists.
            state.aptpl = aptpl;
            if let (Some(path), None) = (&self.persist_path, self.shared.get()) {
                let saved = if state.aptpl {
                    save(path, &state)
                } else {
                    remove(path)
                };
                if saved.is_err() {
                    // The change took effect but could not be made to persist.
                    self.refresh(&state);
                    return Err(
                        Sense::new(crate::sense::sense_key::HARDWARE_ERROR, 0x44, 0x00).into(),
                    );
                }
            }
        }
        self.refresh(&state);
        Ok(())
    }
}

/// PERSISTENT RESERVE OUT with RESERVE: `nexus`, registered,
/// takes the reservation of type `kind`, or holds it already.
fn reserve(state: &mut State, nexus: &Nexus, scope: u8, kind: u8) -> Result<Change, Refusal> {
    check_scope_and_kind(scope, kind)?;
    match &state.reservation {
        None => {
            let holder = (!all_registrants(kind)).then(|| nexus.clone());
            state.reservation = Some((Persistent { kind }, holder));
            Ok(Change::Other)
        }
        Some((p, _)) if p.kind == kind && state.is_holder(nexus) => Ok(Change::None),
        Some(_) => Err(Refusal::Conflict),
    }
}

/// PERSISTENT RESERVE OUT with RELEASE (SPC-5 5.13.11.2): the holder gives
/// the reservation up; anyone else's RELEASE changes nothing.
fn release(
    state: &mut State,
    attentions: &dyn Raise,
    nexus: &Nexus,
    scope: u8,
    kind: u8,
) -> Result<Change, Refusal> {
    let Some((p, _)) = state.reservation else {
        return Ok(Change::None);
    };
    if !state.is_holder(nexus) {
        return Ok(Change::None);
    }
    if scope != 0 || p.kind != kind {
        // SPC-5 5.13.11.2.2: INVALID RELEASE OF PERSISTENT RESERVATION.
        return Err(Sense::new(crate::sense::sense_key::ILLEGAL_REQUEST, 0x26, 0x04).into());
    }
    state.reservation = None;
    if registrants_only_or_all(p.kind) {
        attentions.raise(
            &|n| n != nexus && state.registration(n).is_some(),
            RESERVATIONS_RELEASED,
        );
    }
    Ok(Change::Other)
}

/// PERSISTENT RESERVE OUT with CLEAR: every registration
/// and the reservation gone; the others are told.
fn clear(state: &mut State, attentions: &dyn Raise, nexus: &Nexus) -> Change {
    let others: Vec<Nexus> = state
        .registrations
        .iter()
        .filter(|r| &r.nexus != nexus)
        .map(|r| r.nexus.clone())
        .collect();
    state.registrations.clear();
    state.reservation = None;
    attentions.raise(&|n| others.contains(n), RESERVATIONS_PREEMPTED);
    Change::Registrations
}

/// Why a reservation command did not complete GOOD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// RESERVATION CONFLICT status (SAM-5 5.3.1), no sense.
    Conflict,
    /// CHECK CONDITION with this sense.
    Sense(Sense),
}

impl Refusal {
    /// The sense of a refusal that has one; a conflict has none, so it
    /// reads as an internal failure where only sense can be returned.
    fn sense(self) -> Sense {
        match self {
            Refusal::Sense(sense) => sense,
            Refusal::Conflict => Sense::new(crate::sense::sense_key::HARDWARE_ERROR, 0x44, 0x00),
        }
    }
}

/// The refusal of a command whose shared state could not be read or
/// written: INTERNAL TARGET FAILURE (44h/00h), logged.
fn shared_failure(error: String) -> Refusal {
    tracing::warn!(error = %error, "shared reservation state unavailable");
    Sense::new(crate::sense::sense_key::HARDWARE_ERROR, 0x44, 0x00).into()
}

impl From<Sense> for Refusal {
    fn from(sense: Sense) -> Self {
        Refusal::Sense(sense)
    }
}

impl From<Result<(), Refusal>> for crate::Completion {
    fn from(result: Result<(), Refusal>) -> Self {
        match result {
            Ok(()) => crate::Completion::good(),
            Err(Refusal::Conflict) => crate::Completion::reservation_conflict(),
            Err(Refusal::Sense(sense)) => crate::Completion::check_condition(sense),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    None,
    /// Registrations changed: PRgeneration increments (SPC-5 6.16.2).
    Registrations,
    /// Only the reservation changed.
    Other,
}

fn check_scope_and_kind(scope: u8, kind: u8) -> Result<(), Sense> {
    if scope != 0 {
        return Err(Sense::invalid_field_in_cdb(2, 7));
    }
    if !valid_kind(kind) {
        return Err(Sense::invalid_field_in_cdb(2, 3));
    }
    Ok(())
}

struct Register<'a> {
    key: u64,
    action_key: u64,
    ignore: bool,
    /// ALL_TG_PT: every target port of the unit, to register the
    /// initiator port through each.
    all_target_ports: Option<&'a [u16]>,
    /// SPEC_I_PT: the TransportID list after the basic parameters.
    specified: Option<&'a [u8]>,
}

/// REGISTER / REGISTER AND IGNORE EXISTING KEY (SPC-5 5.13.7, 5.13.8).
fn register(
    state: &mut State,
    attentions: &dyn Raise,
    nexus: &Nexus,
    request: Register<'_>,
) -> Result<Change, Refusal> {
    let registered = state.registration(nexus).map(|r| r.key);
    match registered {
        None => {
            if !request.ignore && request.key != 0 {
                return Err(Refusal::Conflict);
            }
            if request.action_key == 0 {
                if request.specified.is_some() {
                    return Err(Sense::invalid_field_in_parameter_list(8, None).into());
                }
                return Ok(Change::None);
            }
            let mut nexuses = vec![nexus.clone()];
            // SPC-5 5.13.7: ALL_TG_PT registers the initiator port through
            // every target port of the unit, not only this one.
            for port in request.all_target_ports.unwrap_or_default() {
                let through = Nexus {
                    relative_target_port: *port,
                    ..nexus.clone()
                };
                if state.registration(&through).is_some() {
                    return Err(Refusal::Conflict);
                }
                if !nexuses.contains(&through) {
                    nexuses.push(through);
                }
            }
            if let Some(list) = request.specified {
                for other in specified_nexuses(list, nexus.relative_target_port, attentions)? {
                    if state.registration(&other).is_some() {
                        return Err(Refusal::Conflict);
                    }
                    if !nexuses.contains(&other) {
                        nexuses.push(other);
                    }
                }
            }
            if state.registrations.len() + nexuses.len() > REGISTRATIONS_MAX {
                // INSUFFICIENT REGISTRATION RESOURCES (55h/04h).
                return Err(
                    Sense::new(crate::sense::sense_key::ILLEGAL_REQUEST, 0x55, 0x04).into(),
                );
            }
            for n in nexuses {
                state.registrations.push(Registration {
                    nexus: n,
                    key: request.action_key,
                    all_target_ports: request.all_target_ports.is_some(),
                });
            }
            Ok(Change::Registrations)
        }
        Some(current) => {
            if !request.ignore && request.key != current {
                return Err(Refusal::Conflict);
            }
            if request.specified.is_some() {
                // SPC-5 6.17.3: SPEC_I_PT from a registered nexus.
                return Err(Sense::invalid_field_in_parameter_list(20, Some(3)).into());
            }
            // A registration made with ALL_TG_PT changes, or goes, through
            // every target port it was made for.
            let covered = state.covered_by(nexus);
            if request.action_key == 0 {
                let kind = state.reservation.as_ref().map(|(p, _)| p.kind);
                let mut released = false;
                for n in &covered {
                    released |= state.unregister(n);
                }
                // SPC-5 5.13.11.2.2: the holder of a registrants-only
                // reservation unregistering releases it; the others hear.
                if released && kind.is_some_and(registrants_only_or_all) {
                    attentions.raise(&|n| state.registration(n).is_some(), RESERVATIONS_RELEASED);
                }
            } else {
                for r in state
                    .registrations
                    .iter_mut()
                    .filter(|r| covered.contains(&r.nexus))
                {
                    r.key = request.action_key;
                }
            }
            Ok(Change::Registrations)
        }
    }
}

/// PREEMPT / PREEMPT AND ABORT (SPC-5 5.13.11.4). The nexuses that lose
/// their registrations hear REGISTRATIONS PREEMPTED; for PREEMPT AND ABORT
/// the caller ends their tasks as well (see [`Preempting`]).
fn preempt(
    state: &mut State,
    attentions: &dyn Raise,
    nexus: &Nexus,
    scope: u8,
    kind: u8,
    action_key: u64,
) -> Result<Change, Refusal> {
    let reservation = state.reservation.clone();
    let preempted = |state: &State, key: u64| -> Vec<Nexus> {
        state
            .registrations
            .iter()
            .filter(|r| r.key == key && &r.nexus != nexus)
            .map(|r| r.nexus.clone())
            .collect()
    };
    match reservation {
        Some((p, _)) if all_registrants(p.kind) && action_key == 0 => {
            // SPC-5 5.13.11.4.3: preempting an all-registrants reservation
            // with key zero removes every other registration and makes a new
            // reservation.
            check_scope_and_kind(scope, kind)?;
            let removed: Vec<Nexus> = state
                .registrations
                .iter()
                .filter(|r| &r.nexus != nexus)
                .map(|r| r.nexus.clone())
                .collect();
            state.registrations.retain(|r| &r.nexus == nexus);
            let holder = (!all_registrants(kind)).then(|| nexus.clone());
            state.reservation = Some((Persistent { kind }, holder));
            attentions.raise(&|n| removed.contains(n), REGISTRATIONS_PREEMPTED);
            Ok(Change::Registrations)
        }
        Some((p, Some(holder)))
            if !all_registrants(p.kind)
                && state.registration(&holder).map(|r| r.key) == Some(action_key) =>
        {
            // The key names the holder: its registrations go and the
            // preempting nexus takes a new reservation.
            check_scope_and_kind(scope, kind)?;
            let removed = preempted(state, action_key);
            state.registrations.retain(|r| !removed.contains(&r.nexus));
            state.reservation = Some((
                Persistent { kind },
                (!all_registrants(kind)).then(|| nexus.clone()),
            ));
            attentions.raise(&|n| removed.contains(n), REGISTRATIONS_PREEMPTED);
            if p.kind != kind {
                attentions.raise(
                    &|n| n != nexus && state.registration(n).is_some(),
                    RESERVATIONS_RELEASED,
                );
            }
            Ok(Change::Registrations)
        }
        _ => {
            if action_key == 0 {
                return Err(Sense::invalid_field_in_parameter_list(8, None).into());
            }
            let removed = preempted(state, action_key);
            let own_key_matches = state.registration(nexus).map(|r| r.key) == Some(action_key);
            if removed.is_empty() && !own_key_matches {
                return Err(Refusal::Conflict);
            }
            state.registrations.retain(|r| !removed.contains(&r.nexus));
            if let Some((p, _)) = state.reservation {
                if all_registrants(p.kind) && state.registrations.is_empty() {
                    state.reservation = None;
                }
            }
            attentions.raise(&|n| removed.contains(n), REGISTRATIONS_PREEMPTED);
            Ok(Change::Registrations)
        }
    }
}

/// REGISTER AND MOVE (SPC-5 5.13.9, 6.17.4).
fn register_and_move(
    state: &mut State,
    nexus: &Nexus,
    scope: u8,
    kind: u8,
    parameters: &[u8],
) -> Result<Change, Refusal> {
    let key = cdb::u64_at(parameters, 0);
    let action_key = cdb::u64_at(parameters, 8);
    let unregister = parameters[17] & 0x02 != 0;
    let relative_target_port = cdb::u16_at(parameters, 18);
    let transport_id_length = cdb::u32_at(parameters, 20) as usize;
    if state.registration(nexus).map(|r| r.key) != Some(key) {
        return Err(Refusal::Conflict);
    }
    match &state.reservation {
        Some((p, Some(holder))) if holder == nexus && !all_registrants(p.kind) => {}
        // SPC-5 5.13.9: only the holder of a reservation that is not of an
        // all-registrants type may move it.
        _ => return Err(Refusal::Conflict),
    }
    // SPC-5 6.17.4: the moved reservation takes the CDB's SCOPE and TYPE.
    check_scope_and_kind(scope, kind)?;
    if action_key == 0 {
        return Err(Sense::invalid_field_in_parameter_list(8, None).into());
    }
    let transport_ids = parameters
        .get(PARAMETER_LIST_LEN..PARAMETER_LIST_LEN + transport_id_length)
        .ok_or_else(Sense::parameter_list_length_error)?;
    let (destination, _) = parse_transport_id(transport_ids, PARAMETER_LIST_LEN)?;
    let Some(isid) = destination.isid else {
        // A move names one I_T nexus: the TransportID must carry the ISID.
        return Err(Sense::invalid_field_in_parameter_list(PARAMETER_LIST_LEN as u16, None).into());
    };
    let destination = Nexus {
        initiator_name: destination.name,
        isid,
        relative_target_port,
    };
    if destination == *nexus {
        return Err(Sense::invalid_field_in_parameter_list(PARAMETER_LIST_LEN as u16, None).into());
    }
    match state
        .registrations
        .iter_mut()
        .find(|r| r.nexus == destination)
    {
        Some(r) => r.key = action_key,
        None => state.registrations.push(Registration {
            nexus: destination.clone(),
            key: action_key,
            all_target_ports: false,
        }),
    }
    state.reservation = Some((Persistent { kind }, Some(destination)));
    if unregister {
        state.registrations.retain(|r| &r.nexus != nexus);
    }
    Ok(Change::Registrations)
}

/// An initiator port named by a TransportID.
struct NamedPort {
    name: String,
    isid: Option<[u8; 6]>,
}

/// Parses one iSCSI TransportID (SPC-5 7.6.4.6) at the start of `data`;
/// returns it and its length. `at` is its offset in the parameter list.
fn parse_transport_id(data: &[u8], at: usize) -> Result<(NamedPort, usize), Sense> {
    let bad = |offset: usize| Sense::invalid_field_in_parameter_list((at + offset) as u16, None);
    if data.len() < 4 {
        return Err(Sense::parameter_list_length_error());
    }
    let format = data[0];
    if format != ISCSI_TRANSPORT_ID_WITH_ISID && format != ISCSI_TRANSPORT_ID_NAME {
        return Err(bad(0));
    }
    let length = usize::from(cdb::u16_at(data, 2));
    if length < 4 || length % 4 != 0 {
        return Err(bad(2));
    }
    let body = data
        .get(4..4 + length)
        .ok_or_else(Sense::parameter_list_length_error)?;
    let end = body.iter().position(|&b| b == 0).ok_or_else(|| bad(4))?;
    let text = std::str::from_utf8(&body[..end]).map_err(|_| bad(4))?;
    let port = if format == ISCSI_TRANSPORT_ID_WITH_ISID {
        let (name, isid_hex) = text.split_once(",i,0x").ok_or_else(|| bad(4))?;
        if isid_hex.len() != 12 {
            return Err(bad(4));
        }
        let mut isid = [0u8; 6];
        for (i, byte) in isid.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&isid_hex[2 * i..2 * i + 2], 16).map_err(|_| bad(4))?;
        }
        NamedPort {
            name: name.to_owned(),
            isid: Some(isid),
        }
    } else {
        NamedPort {
            name: text.to_owned(),
            isid: None,
        }
    };
    if port.name.is_empty() {
        return Err(bad(4));
    }
    Ok((port, 4 + length))
}

/// The nexuses SPEC_I_PT names (SPC-5 6.17.3): the list starts with its
/// 4-byte length. A name-only TransportID stands for every session of that
/// initiator now logged in.
fn specified_nexuses(
    list: &[u8],
    relative_target_port: u16,
    attentions: &dyn Raise,
) -> Result<Vec<Nexus>, Sense> {
    if list.len() < 4 {
        return Err(Sense::parameter_list_length_error());
    }
    let length = cdb::u32_at(list, 0) as usize;
    let mut data = list
        .get(4..4 + length)
        .ok_or_else(Sense::parameter_list_length_error)?;
    let mut at = PARAMETER_LIST_LEN + 4;
    let mut nexuses = Vec::new();
    while !data.is_empty() {
        let (port, used) = parse_transport_id(data, at)?;
        match port.isid {
            Some(isid) => nexuses.push(Nexus {
                initiator_name: port.name,
                isid,
                relative_target_port,
            }),
            None => nexuses.extend(attentions.attached(&|n| n.initiator_name == port.name)),
        }
        data = &data[used..];
        at += used;
    }
    Ok(nexuses)
}

/// The iSCSI TransportID of `nexus`, format 01b: name ",i,0x" ISID, NUL,
/// padded to a multiple of four (SPC-5 7.6.4.6).
fn transport_id(nexus: &Nexus) -> Vec<u8> {
    let name = nexus.initiator_port_name();
    let body = (name.len() + 1).div_ceil(4) * 4;
    let mut id = vec![ISCSI_TRANSPORT_ID_WITH_ISID, 0];
    id.extend_from_slice(&(body as u16).to_be_bytes());
    id.extend_from_slice(name.as_bytes());
    id.resize(4 + body, 0);
    id
}

/// The APTPL file: one line per registration and one for the reservation,
/// text so an administrator can read it.
fn save(path: &Path, state: &State) -> std::io::Result<()> {
    use std::io::Write;
    let text = encode(state);
    if let Some(directory) = path.parent() {
        std::fs::create_dir_all(directory)?;
    }
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(directory) = path.parent() {
        if let Ok(directory) = std::fs::File::open(directory) {
            let _ = directory.sync_all();
        }
    }
    Ok(())
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn parse_port(text: &str, relative_target_port: u16) -> Option<Nexus> {
    let (name, isid_hex) = text.split_once(",i,0x")?;
    let mut isid = [0u8; 6];
    if isid_hex.len() != 12 {
        return None;
    }
    for (i, byte) in isid.iter_mut().enumerate() {
        *byte = u8::from_str_radix(isid_hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(Nexus {
        initiator_name: name.to_owned(),
        isid,
        relative_target_port,
    })
}

/// Reads an APTPL file; None when there is none or it is not ours.
fn load(path: &Path) -> Option<State> {
    decode(&std::fs::read_to_string(path).ok()?)
}

/// The state as text: the APTPL file's content, and the shared state's.
/// `aptpl` and `legacy` lines only when they say something (an APTPL file
/// exists only with APTPL set; SPC-2 reservations do not persist).
fn encode(state: &State) -> String {
    let mut text = format!("isoe-pr 1\ngeneration {}\n", state.generation);
    for r in &state.registrations {
        text.push_str(&format!(
            "register {:016x} {} {} {}\n",
            r.key,
            u8::from(r.all_target_ports),
            r.nexus.relative_target_port,
            r.nexus.initiator_port_name()
        ));
    }
    if let Some((p, holder)) = &state.reservation {
        // The holder's target port too: an initiator port registered with
        // ALL_TG_PT has a registration through each, and holds through one.
        let holder = holder.as_ref().map_or_else(
            || "-".to_owned(),
            |h| format!("{} {}", h.relative_target_port, h.initiator_port_name()),
        );
        text.push_str(&format!("reserve {:x} {holder}\n", p.kind));
    }
    if !state.aptpl {
        text.push_str("aptpl 0\n");
    }
    if let Some(holder) = &state.legacy {
        text.push_str(&format!(
            "legacy {} {}\n",
            holder.relative_target_port,
            holder.initiator_port_name()
        ));
    }
    text
}

/// A message to the other gateways: the new state's version, whether the
/// preempted nexuses' tasks end (`abort`), the unit attentions raised
/// (sense key, ASC, ASCQ, the nexus), then the state.
fn encode_message(version: u64, aborts: bool, raised: &[(Nexus, Sense)], state: &str) -> String {
    let mut text = format!("isoe-pr-change 1\nversion {version}\n");
    if aborts {
        text.push_str("abort\n");
    }
    for (nexus, sense) in raised {
        text.push_str(&format!(
            "attention {:x} {:x} {:x} {} {}\n",
            sense.key,
            sense.asc,
            sense.ascq,
            nexus.relative_target_port,
            nexus.initiator_port_name()
        ));
    }
    text.push_str("state\n");
    text.push_str(state);
    text
}

/// A change another gateway made.
struct Message<'a> {
    version: u64,
    /// PREEMPT AND ABORT: the nexuses that lost their registrations lose
    /// their tasks too.
    aborts: bool,
    /// The unit attentions it raised.
    raised: Vec<(Nexus, Sense)>,
    /// The state's text.
    state: &'a str,
}

/// What [`encode_message`] wrote.
fn decode_message(text: &str) -> Option<Message<'_>> {
    let (head, state) = text.split_once("state\n")?;
    let mut lines = head.lines();
    if lines.next()? != "isoe-pr-change 1" {
        return None;
    }
    let version = lines.next()?.strip_prefix("version ")?.parse().ok()?;
    let mut raised = Vec::new();
    let mut aborts = false;
    for line in lines {
        if line == "abort" {
            aborts = true;
            continue;
        }
        let fields: Vec<&str> = line.split(' ').collect();
        let ["attention", key, asc, ascq, port, name] = fields.as_slice() else {
            return None;
        };
        let hex = |t: &str| u8::from_str_radix(t, 16).ok();
        let sense = Sense::new(hex(key)?, hex(asc)?, hex(ascq)?);
        raised.push((parse_port(name, port.parse().ok()?)?, sense));
    }
    Some(Message {
        version,
        aborts,
        raised,
        state,
    })
}

/// What [`encode`] wrote; None when it is not ours.
fn decode(text: &str) -> Option<State> {
    let mut lines = text.lines();
    if lines.next()? != "isoe-pr 1" {
        return None;
    }
    let mut state = State {
        aptpl: true,
        ..State::default()
    };
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["generation", n] => state.generation = n.parse().ok()?,
            ["aptpl", "0"] => state.aptpl = false,
            ["legacy", port, name] => state.legacy = Some(parse_port(name, port.parse().ok()?)?),
            ["register", key, all, port, name] => {
                let relative_target_port = port.parse().ok()?;
                state.registrations.push(Registration {
                    nexus: parse_port(name, relative_target_port)?,
                    key: u64::from_str_radix(key, 16).ok()?,
                    all_target_ports: *all == "1",
                });
            }
            ["reserve", kind, "-"] => {
                let kind = u8::from_str_radix(kind, 16).ok()?;
                state.reservation = Some((Persistent { kind }, None));
            }
            ["reserve", kind, port, holder] => {
                let kind = u8::from_str_radix(kind, 16).ok()?;
                let holder = parse_port(holder, port.parse().ok()?)?;
                state.reservation = Some((Persistent { kind }, Some(holder)));
            }
            // Written before the holder's port was: the port of the
            // initiator port's first registration.
            ["reserve", kind, holder] => {
                let kind = u8::from_str_radix(kind, 16).ok()?;
                let port = state
                    .registrations
                    .iter()
                    .find(|r| r.nexus.initiator_port_name() == *holder)?
                    .nexus
                    .relative_target_port;
                let holder = parse_port(holder, port)?;
                state.reservation = Some((Persistent { kind }, Some(holder)));
            }
            _ => return None,
        }
    }
    Some(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: &str = "iqn.2026-11.io.isoe:host,i,0x400000000001";

    fn through(port: u16) -> Nexus {
        Nexus {
            relative_target_port: port,
            ..Nexus::new("iqn.2026-11.io.isoe:host", [0x40, 0, 0, 0, 0, 1])
        }
    }

    /// Once a unit replacing this one took the state over for good, a
    /// change still reaching this one is refused with a NOT READY the
    /// initiator retries; the new one takes it.
    #[test]
    fn a_handed_over_state_refuses_changes_and_the_new_one_takes_them() {
        let old = Reservations::new(None);
        let new = Reservations::new(None);
        let attentions = Attentions::default();
        let nexus = through(1);
        let reserve = [crate::opcode::RESERVE_6, 0, 0, 0, 0, 0];
        new.take_over(&old);
        new.hand_over(&old);
        assert_eq!(
            old.reserve(&attentions, &nexus, &reserve),
            Err(Sense::not_ready_becoming_ready().into())
        );
        assert_eq!(new.reserve(&attentions, &nexus, &reserve), Ok(()));
        assert_eq!(new.legacy_holder(), Some(nexus));
    }

    #[test]
    fn the_holder_keeps_its_target_port_through_the_text() {
        let registration = |port| Registration {
            nexus: through(port),
            key: 0x7,
            all_target_ports: true,
        };
        let state = State {
            generation: 3,
            registrations: vec![registration(1), registration(2)],
            reservation: Some((Persistent { kind: 1 }, Some(through(2)))),
            aptpl: true,
            ..State::default()
        };
        let text = encode(&state);
        assert!(text.contains(&format!("reserve 1 2 {PORT}\n")), "{text}");
        let back = decode(&text).expect("decodes");
        assert_eq!(back.reservation, state.reservation);
        assert_eq!(back.registrations, state.registrations);
    }

    #[test]
    fn a_file_written_without_the_holders_port_still_reads() {
        let text = format!(
            "isoe-pr 1\ngeneration 1\nregister 0000000000000007 0 2 {PORT}\nreserve 1 {PORT}\n"
        );
        let state = decode(&text).expect("decodes");
        assert_eq!(
            state.reservation,
            Some((Persistent { kind: 1 }, Some(through(2))))
        );
        let text = "isoe-pr 1\ngeneration 1\nreserve 7 -\n";
        let state = decode(text).expect("decodes");
        assert_eq!(state.reservation, Some((Persistent { kind: 7 }, None)));
    }
}
