//! `LogicalUnit`: one SBC direct-access block device served from a `Store`;
//! the state its commands share, what a command's handler may know besides
//! its CDB ([`Context`]), and what a unit may ask of the target around it
//! ([`UnitDirectory`]). Commands reach their handlers through
//! `dispatch.rs`, above every command's file; this file knows none of them.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use isoe_store::{Store, StoreError};

use crate::alua::ExplicitAlua;
use crate::attention::Attentions;
use crate::block_cdb::BlockCdb;
use crate::media::{Access, MediaLog};
use crate::range_lock::RangeLocks;
use crate::reservation::Reservations;
use crate::{lba, limits, Background, LunConfig, MediumIo, Nexus, PortGroups, Sense};

/// One logical unit: its media, its configuration and a little unit state.
/// Shared by every connection thread; no lock is held across store I/O.
#[derive(Debug)]
pub struct LogicalUnit {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: LunConfig,
    /// Number of whole logical blocks on the medium.
    pub(crate) capacity_blocks: u64,
    /// START STOP UNIT with START=0 was the last power request (SBC-4 4.20).
    pub(crate) stopped: AtomicBool,
    /// It took over a unit it replaces ([`LogicalUnit::take_over`]).
    took_over: AtomicBool,
    /// Taken offline by the administrator ([`LogicalUnit::set_offline`]).
    offline: AtomicBool,
    /// Unit attention conditions per I_T nexus.
    pub(crate) attentions: Attentions,
    /// SPC-2 and persistent reservations.
    pub(crate) reservations: Reservations,
    /// Current values of the changeable mode parameters (MODE SELECT).
    pub(crate) mode: crate::mode::ModeState,
    /// EXTENDED COPY status held for RECEIVE COPY RESULTS.
    pub(crate) copy_results: crate::copy_manager::CopyResults,
    /// Whether a SANITIZE runs or failed (shared with an IMMED sanitize's thread).
    pub(crate) sanitize: Arc<crate::sanitize_state::SanitizeState>,
    /// Striped LBA range locks that every medium-writing command holds
    /// while it writes (COMPARE AND WRITE atomicity).
    pub(crate) range_locks: RangeLocks,
    /// The sense and the log of store failures (shared with a sanitize's thread).
    pub(crate) media_log: Arc<MediaLog>,
    /// This unit's own port groups, instead of the target's: a unit several
    /// gateways serve lists every gateway's ([`LogicalUnit::set_port_groups`]).
    own_groups: OnceLock<arc_swap::ArcSwap<PortGroups>>,
    /// Who acts on SET TARGET PORT GROUPS, for a unit with explicit ALUA.
    explicit_alua: OnceLock<Arc<dyn ExplicitAlua>>,
    /// The store has an asynchronous side (fixed with the store): read
    /// once, not by a virtual call on every READ and WRITE.
    asynchronous: bool,
    /// Who ends tasks of this unit that are under way in the transport
    /// (PREEMPT AND ABORT, another gateway's reset).
    task_sets: OnceLock<Arc<dyn TaskSets>>,
}

/// What the transport does for a unit from outside a command: ends tasks
/// outside a task management function (PREEMPT AND ABORT ends the tasks of
/// the preempted I_T nexuses, SPC-5 5.13.11.2.6, and a reset through
/// another gateway of a shared unit ends every task here), and puts a
/// unit's replacement in its place (a shared unit whose gateway serves
/// again after a fence).
pub trait TaskSets: Send + Sync + std::fmt::Debug {
    /// Ends, without a response, the tasks of `unit` that came through
    /// `nexuses` (every nexus when None); `done` runs once none of them can
    /// change the medium any more (a store call under way has returned),
    /// on whatever thread saw that last, possibly this one.
    fn abort(&self, unit: &LogicalUnit, nexuses: Option<&[Nexus]>, done: Box<dyn FnOnce() + Send>);

    /// Serves `new` wherever `unit` is served: the sessions that reach
    /// `unit` reach `new` from now on and hear `conditions` there. False
    /// when nothing serves `unit` any more, or the transport cannot.
    fn replace(&self, _unit: &LogicalUnit, _new: &Arc<LogicalUnit>, _conditions: &[Sense]) -> bool {
        false
    }
}

/// The port groups a command of a unit consults: the target's, or the
/// unit's own.
pub(crate) enum Groups<'a> {
    Target(&'a PortGroups),
    Unit(arc_swap::Guard<Arc<PortGroups>>),
}

impl std::ops::Deref for Groups<'_> {
    type Target = PortGroups;
    fn deref(&self) -> &PortGroups {
        match self {
            Groups::Target(groups) => groups,
            Groups::Unit(groups) => groups,
        }
    }
}

/// The message that tells a shared unit's other gateways of a reset:
/// followed by the condition's sense key, ASC and ASCQ in hex.
const RESET_MESSAGE: &str = "isoe-lu-reset 1";

/// The message that tells a shared unit's other gateways of a MODE SELECT:
/// followed by the control page's SWP, 0 or 1.
pub(crate) const MODE_MESSAGE: &str = "isoe-mode 1 swp";

/// " KEY ASC ASCQ" in hex.
fn parse_sense(text: &str) -> Option<Sense> {
    let mut fields = text
        .split_whitespace()
        .map(|f| u8::from_str_radix(f, 16).ok());
    let sense = Sense::new(fields.next()??, fields.next()??, fields.next()??);
    fields.next().is_none().then_some(sense)
}

/// What a command handler may know besides its CDB and data: who sent it,
/// and the target around the unit.
pub(crate) struct Context<'a> {
    pub(crate) nexus: &'a Nexus,
    /// EXTENDED COPY resolves its identification descriptors here; ALUA
    /// finds the target's port groups here.
    pub(crate) units: &'a dyn UnitDirectory,
    /// Work a command left to finish after dispatch (see [`Outcome::Later`]).
    pub(crate) later: Cell<Option<Background>>,
    /// The store operation a command left to an asynchronous store (see
    /// [`Outcome::Medium`]).
    pub(crate) medium: Cell<Option<MediumIo>>,
    /// A READ's data, lent by the store instead of copied (see
    /// [`Outcome::Lent`]).
    pub(crate) lent: Cell<Option<isoe_store::Lent>>,
    /// Where a copied READ leaves its pages' CRCs, when the transport
    /// wants them ([`crate::Request::page_digests`]).
    pub(crate) page_digests: Option<&'a crate::PageDigests<'a>>,
}

/// What a unit may ask of the target around it: the other logical units,
/// for commands that name another unit (EXTENDED COPY's identification
/// descriptors), what the transport knows of an I_T nexus, and the target's
/// port groups.
pub trait UnitDirectory: Send + Sync {
    /// The unit whose NAA designator (VPD page 83h, 16 bytes) is `naa`.
    fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>>;

    /// Whether the initiator has already closed every connection of
    /// `nexus`, though the target has not yet ended the nexus (the close
    /// is in flight on another thread). False when unknown.
    fn nexus_closed(&self, _nexus: &Nexus) -> bool {
        false
    }

    /// The target port groups of the target (ALUA, SPC-5 5.16): REPORT
    /// TARGET PORT GROUPS lists them, and a command through a port in
    /// standby or unavailable is refused. By default one group, 1, of
    /// one port, 1, active/optimized ([`PortGroups::single`]).
    fn port_groups(&self) -> &PortGroups {
        PortGroups::single()
    }
}

/// A directory with no units: for a unit served alone (tests, tools).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoUnits;

impl UnitDirectory for NoUnits {
    fn unit_by_naa(&self, _naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        None
    }
}

impl LogicalUnit {
    /// Serves `store` with `config`.
    ///
    /// # Panics
    /// If `config.validate()` fails: the target validates configuration
    /// before it builds logical units.
    pub fn new(store: Arc<dyn Store>, config: LunConfig) -> Self {
        if let Err(error) = config.validate() {
            panic!("invalid LunConfig: {error}");
        }
        let capacity_blocks = store.size_bytes() / u64::from(config.block_size);
        let reservations = Reservations::new(config.reservations_file.clone());
        let range_locks = RangeLocks::new(config.block_size);
        let media_log = Arc::new(MediaLog::new(&config));
        let asynchronous = store.asynchronous().is_some();
        Self {
            store,
            config,
            capacity_blocks,
            stopped: AtomicBool::new(false),
            took_over: AtomicBool::new(false),
            offline: AtomicBool::new(false),
            attentions: Attentions::default(),
            reservations,
            mode: crate::mode::ModeState::default(),
            copy_results: crate::copy_manager::CopyResults::default(),
            sanitize: Arc::default(),
            range_locks,
            media_log,
            own_groups: OnceLock::new(),
            explicit_alua: OnceLock::new(),
            asynchronous,
            task_sets: OnceLock::new(),
        }
    }

    /// From now on tasks of this unit are ended through `task_sets` when a
    /// reservation or another gateway says so (see [`TaskSets`]). Without
    /// it there is nothing under way to end.
    pub fn set_task_sets(&self, task_sets: Arc<dyn TaskSets>) {
        let _ = self.task_sets.set(task_sets);
    }

    /// Ends the tasks of `nexuses` (all when None); `done` runs once they
    /// have ended.
    pub(crate) fn abort_tasks(&self, nexuses: Option<&[Nexus]>, done: Box<dyn FnOnce() + Send>) {
        match self.task_sets.get() {
            Some(task_sets) => task_sets.abort(self, nexuses, done),
            None => done(),
        }
    }

    /// From now on this unit answers with `groups` rather than the
    /// target's (REPORT TARGET PORT GROUPS, VPD 83h, the access checks):
    /// every gateway's groups, for a unit several gateways serve. Called
    /// again when the set of groups changes; states change in place
    /// ([`PortGroups::set_state`]), then [`LogicalUnit::access_states_changed`].
    pub fn set_port_groups(&self, groups: Arc<PortGroups>) {
        match self.own_groups.get() {
            Some(current) => current.store(groups),
            None => {
                let _ = self.own_groups.set(arc_swap::ArcSwap::new(groups));
            }
        }
    }

    /// This unit's own port groups, if it has them.
    pub fn own_port_groups(&self) -> Option<Arc<PortGroups>> {
        self.own_groups.get().map(|groups| groups.load_full())
    }

    /// SET TARGET PORT GROUPS is accepted and handed to `handler`, and
    /// INQUIRY reports explicit ALUA as well (TPGS = 11b).
    pub fn set_explicit_alua(&self, handler: Arc<dyn ExplicitAlua>) {
        let _ = self.explicit_alua.set(handler);
    }

    /// Whether SET TARGET PORT GROUPS is accepted.
    pub(crate) fn has_explicit_alua(&self) -> bool {
        self.explicit_alua.get().is_some()
    }

    /// Who acts on SET TARGET PORT GROUPS, if the unit accepts it.
    pub(crate) fn explicit_alua(&self) -> Option<&Arc<dyn ExplicitAlua>> {
        self.explicit_alua.get()
    }

    /// Some port group's access state changed: every attached I_T nexus
    /// hears ASYMMETRIC ACCESS STATE CHANGED (06/2A/06, SPC-5 5.16.2.6).
    pub fn access_states_changed(&self) {
        self.attentions
            .raise(|_| true, Sense::asymmetric_access_state_changed());
    }

    /// Has the transport serve `new` in this unit's place (see
    /// [`TaskSets::replace`]); false without a transport, or when nothing
    /// serves this unit any more.
    pub fn replace_with(&self, new: &Arc<LogicalUnit>, conditions: &[Sense]) -> bool {
        self.task_sets
            .get()
            .is_some_and(|t| t.replace(self, new, conditions))
    }

    /// The port groups commands of this unit consult.
    pub(crate) fn groups<'a>(&self, units: &'a dyn UnitDirectory) -> Groups<'a> {
        match self.own_groups.get() {
            Some(groups) => Groups::Unit(groups.load()),
            None => Groups::Target(units.port_groups()),
        }
    }

    /// The store under this unit.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The configuration this unit was built with.
    pub fn config(&self) -> &LunConfig {
        &self.config
    }

    /// Whether `cdb` may wait on a device here: it touches the medium of a
    /// store whose calls may wait, or it changes reservations that persist
    /// through power loss (a file written and synced). The transport runs
    /// such commands off its event loops.
    pub fn may_block(&self, cdb: &[u8]) -> bool {
        use crate::opcode::{
            MODE_SELECT_10, MODE_SELECT_6, RELEASE_10, RELEASE_6, RESERVE_10, RESERVE_6,
        };
        use crate::opcode::{PERSISTENT_RESERVE_IN, PERSISTENT_RESERVE_OUT};
        let Some(&op) = cdb.first() else {
            return false;
        };
        // The common case first: reads and writes.
        if crate::opcode::touches_medium(op) {
            return self.store.may_block()
                && !(self.asynchronous && crate::opcode::is_submitted(op));
        }
        match op {
            // A shared unit's reservations live in the cluster.
            PERSISTENT_RESERVE_IN
            | PERSISTENT_RESERVE_OUT
            | RESERVE_6
            | RESERVE_10
            | RELEASE_6
            | RELEASE_10
            | MODE_SELECT_6
            | MODE_SELECT_10
                if self.reservations.is_shared() =>
            {
                true
            }
            // Moving ownership waits on the cluster.
            crate::opcode::MAINTENANCE_OUT => self.has_explicit_alua(),
            PERSISTENT_RESERVE_OUT => self.config.reservations_file.is_some(),
            _ => false,
        }
    }

    /// From now on this unit's reservations are shared with the other
    /// targets that serve its medium (see [`crate::UnitPeers`]): the state
    /// is read from them now. `first`: no other target serves the unit
    /// yet, so non-persistent reservations left from before are dropped,
    /// as at power-on.
    pub fn share_reservations(
        &self,
        peers: Arc<dyn crate::UnitPeers>,
        first: bool,
    ) -> Result<(), String> {
        self.reservations.share(peers, first)
    }

    /// What another target serving this unit published (see
    /// [`crate::UnitPeers::publish`]), or None when messages may have been
    /// missed. `done` runs once the message has taken effect here: at once,
    /// or, when it ends tasks (a reset, PREEMPT AND ABORT), once they have
    /// ended, so that the sender completes its command only then.
    pub fn peer_message(&self, message: Option<&[u8]>, done: Box<dyn FnOnce() + Send>) {
        let reset = message
            .and_then(|m| std::str::from_utf8(m).ok())
            .and_then(|m| m.strip_prefix(RESET_MESSAGE))
            .and_then(parse_sense);
        let text = message.and_then(|m| std::str::from_utf8(m).ok());
        let swp = text
            .and_then(|m| m.strip_prefix(MODE_MESSAGE))
            .map(|v| v.trim() == "1");
        match (reset, swp) {
            (Some(condition), _) => {
                // SAM-5 6.6: the reset ends every task of the unit, here too.
                self.attentions.raise(|_| true, condition);
                self.abort_tasks(None, done);
            }
            (None, Some(swp)) => {
                if self.mode.set_software_write_protect(swp) {
                    self.attentions
                        .raise(|_| true, crate::attention::MODE_PARAMETERS_CHANGED);
                }
                done();
            }
            (None, None) => match self.reservations.apply_message(&self.attentions, message) {
                Some(preempted) => self.abort_tasks(Some(&preempted), done),
                None => done(),
            },
        }
    }

    /// Number of logical blocks (READ CAPACITY reports one less, the last LBA).
    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_blocks
    }

    /// Whether the last START STOP UNIT asked the unit to stop. Informational:
    /// a stopped unit still serves media commands, as a virtual disk has
    /// nothing to spin down.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// An I_T nexus now has a session that may use this unit: it will hear
    /// of unit attention conditions from now on.
    pub fn attach(&self, nexus: &Nexus) {
        self.attentions.attach(nexus);
    }

    /// A session on `nexus` ended (logout, connection loss, reinstatement).
    pub fn detach(&self, nexus: &Nexus) {
        if self.attentions.detach(nexus) {
            self.reservations.nexus_lost(&self.attentions, nexus);
        }
    }

    /// LOGICAL UNIT RESET, or this unit's part of a TARGET RESET (SAM-5
    /// 6.6): every attached nexus hears `condition` (29h/xx).
    /// SPC-2 reservations end; persistent ones stay.
    pub fn reset(&self, condition: Sense) {
        self.reservations.reset(&self.attentions);
        self.attentions.raise(|_| true, condition);
        // The nexuses through the other gateways of a shared unit hear it too.
        let message = format!(
            "{RESET_MESSAGE} {:x} {:x} {:x}",
            condition.key, condition.asc, condition.ascq
        );
        // A reset is handled on the worker: a gateway that died without
        // closing its watch must not hold it up for long.
        self.reservations.publish_briefly(message.as_bytes());
    }

    /// The target's LUN inventory changed (a LUN added or removed): every
    /// attached nexus hears REPORTED LUNS DATA HAS CHANGED (06/3F/0E, SPC-5
    /// 5.14) at its next command here.
    pub fn report_luns_changed(&self) {
        self.attentions
            .raise(|_| true, Sense::reported_luns_data_changed());
    }

    /// Takes the unit offline (true) or back online. Offline, every command
    /// but INQUIRY, REPORT LUNS and REQUEST SENSE ends in NOT READY,
    /// LOGICAL UNIT NOT READY, OFFLINE (02/04/12); nothing reaches the store.
    pub fn set_offline(&self, offline: bool) {
        self.offline.store(offline, Ordering::Release);
    }

    /// Whether the unit is offline ([`LogicalUnit::set_offline`]).
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// This unit replaces `previous` over the same medium (a reload changed
    /// its keys): it keeps the reservations and registrations, and the
    /// software write protect, that `previous` held. Call before the unit
    /// serves commands.
    pub fn take_over(&self, previous: &LogicalUnit) {
        self.reservations.take_over(&previous.reservations);
        self.mode
            .set_software_write_protect(previous.mode.software_write_protect());
        self.took_over.store(true, Ordering::Release);
    }

    /// This unit, which took over `previous` ([`LogicalUnit::take_over`]),
    /// now serves in its place: what changed on `previous` since then
    /// comes too, and `previous` takes no more reservation changes (one
    /// still reaching it is answered NOT READY, and its retry comes here).
    /// Nothing for a unit that did not take over.
    pub fn take_over_finally(&self, previous: &LogicalUnit) {
        if !self.took_over.load(Ordering::Acquire) {
            return;
        }
        self.reservations.hand_over(&previous.reservations);
        self.mode
            .set_software_write_protect(previous.mode.software_write_protect());
    }

    /// This unit now serves in place of `previous`: the unit attention
    /// conditions `previous` still holds for a nexus (a reset's, say) move
    /// here, ahead of those this unit queued, so that none is lost with
    /// the old unit. Call once this unit serves the LUN and its nexuses are
    /// attached: a command still on `previous` then finds none left, and
    /// one here finds them all.
    pub fn take_unit_attentions_of(&self, previous: &LogicalUnit) {
        previous.attentions.hand_over(&self.attentions);
    }

    /// Queues a unit attention `condition` for every attached nexus: what
    /// the unit reports changed under its sessions (capacity, write
    /// protection, identity).
    pub fn raise_unit_attention(&self, condition: Sense) {
        self.attentions.raise(|_| true, condition);
    }

    /// Queues a unit attention `condition` for every attached nexus but `except`.
    pub fn raise_unit_attention_for_others(&self, except: &Nexus, condition: Sense) {
        self.attentions.raise(|n| n != except, condition);
    }

    /// Unit attention conditions queued for `nexus`.
    pub fn unit_attentions_queued(&self, nexus: &Nexus) -> usize {
        self.attentions.queued(nexus)
    }

    /// Whether the store runs reads, writes and flushes asynchronously
    /// ([`Outcome::Medium`]).
    #[inline]
    pub(crate) fn is_asynchronous(&self) -> bool {
        self.asynchronous
    }

    /// The operation for an asynchronous store to run, when the unit has
    /// one (see [`MediumIo`]): noted in `context` for [`LogicalUnit::start`]
    /// to return. Callers check [`LogicalUnit::is_asynchronous`] first.
    pub(crate) fn submit(&self, context: &Context<'_>, kind: isoe_store::IoKind, write_len: usize) {
        debug_assert!(self.asynchronous);
        let io = MediumIo::new(kind, write_len, &self.store, &self.media_log);
        context.medium.set(Some(io));
    }

    /// MAXIMUM COMPARE AND WRITE LENGTH (SBC-4 6.6.4), in blocks. A unit
    /// whose writes go to an asynchronous store holds no range lock while
    /// they run, so only the store can make a COMPARE AND WRITE atomic:
    /// as long a one as the store's own operation takes (an RBD image: one
    /// 512-byte block), and none (0) where that is less than one block.
    pub(crate) fn maximum_compare_and_write_blocks(&self) -> u8 {
        if !self.asynchronous {
            return limits::MAXIMUM_COMPARE_AND_WRITE_LENGTH;
        }
        let blocks = self.store.compare_and_write_max_bytes() / self.block_size();
        blocks.min(u64::from(limits::MAXIMUM_COMPARE_AND_WRITE_LENGTH)) as u8
    }

    /// Logical block length in bytes.
    pub(crate) fn block_size(&self) -> u64 {
        u64::from(self.config.block_size)
    }

    /// SBC-4 4.5 range check against this unit's capacity.
    pub(crate) fn check_range(
        &self,
        logical_block_address: u64,
        block_count: u64,
    ) -> Result<(), Sense> {
        lba::check_range(logical_block_address, block_count, self.capacity_blocks)
    }

    /// SBC-4 6.6.4: a transfer longer than MAXIMUM TRANSFER LENGTH is an
    /// invalid field in the CDB.
    pub(crate) fn check_transfer_length(&self, block: &BlockCdb) -> Result<(), Sense> {
        if block.block_count > limits::maximum_transfer_length_blocks(self.config.block_size) {
            return Err(Sense::invalid_field_in_cdb_byte(block.block_count_at));
        }
        Ok(())
    }

    /// The sense for a store failure while reading (see [`crate::media`]); logs it.
    pub(crate) fn read_failed(&self, error: StoreError) -> Sense {
        self.media_log.failed(Access::Read, &error)
    }

    /// The sense for a store failure while writing, flushing or
    /// deallocating (see [`crate::media`]); logs it.
    pub(crate) fn write_failed(&self, error: StoreError) -> Sense {
        self.media_log.failed(Access::Write, &error)
    }

    /// DATA PROTECT for commands that would modify a read-only medium, or
    /// one write protected through the control mode page's SWP bit.
    pub(crate) fn check_writable(&self) -> Result<(), Sense> {
        if self.config.read_only {
            return Err(Sense::write_protected());
        }
        if self.mode.software_write_protect() {
            return Err(Sense::software_write_protected());
        }
        Ok(())
    }
}
