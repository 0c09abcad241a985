//! A session: the state its connections share (RFC 7143 §4.2).
//!
//! The command window (ExpCmdSN, MaxCmdSN) lives here, so that commands of a
//! session arriving on several connections (MC/S) reach the SCSI layer in
//! CmdSN order. The lock is per session, never process-wide
//! (ARCHITECTURE.md, datapath rule 4); a single-connection session takes it
//! uncontended.

use crate::target::Target;
use isoe_scsi::Nexus;
use isoe_sync::MutexExt;
use isoe_wire::negotiate::SessionParams;
use isoe_wire::pdu::Lun;
use isoe_wire::serial::{sn_ge, sn_gt, sn_in_window, sn_lt};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many commands past ExpCmdSN an initiator may have outstanding.
pub const COMMAND_WINDOW: u32 = 128;

/// How far MaxCmdSN falls behind where it could be, at most, while the
/// window has room to spare ([`Session::max_cmd_sn`]).
const WINDOW_STEP: u32 = 8;

/// How long a command that arrived ahead of a CmdSN gap waits for the gap to fill.
pub const CMD_SN_GAP_WAIT: Duration = Duration::from_secs(30);

/// Where a command's CmdSN falls against the session's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// In order: deliver now (the window has advanced past it).
    Deliver,
    /// Outside [ExpCmdSN, MaxCmdSN]: RFC 7143 §4.2.2.1 says ignore it silently.
    OutsideWindow,
    /// Ahead of a gap: the connection keeps the command unread until the
    /// session wakes it ([`Session::admit_ordered`] lists whom to wake).
    Wait,
    /// In order, but a task management function answered before it came
    /// ended it ([`Session::end_unreceived`]): taken, and dropped unrun.
    Ended,
    /// The session was closed.
    Closed,
}

/// Asks whether the peer of one connection has closed it, without taking
/// data from it; the driver supplies it (a peek on the socket), tests a flag.
pub type PeerProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// A connection could not join: the session has MaxConnections already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("session already has MaxConnections={max_connections}")]
pub struct SessionFull {
    /// The negotiated limit.
    pub max_connections: u16,
}

/// One connection of a session, as the session sees it.
pub struct Member {
    /// The connection ID the initiator chose.
    pub cid: u16,
    /// Unique per connection in the process; the driver routes wake-ups by it.
    pub serial: u64,
    /// Whether the peer closed this connection, asked without its driver.
    pub peer_gone: Option<PeerProbe>,
    /// Set when another connection ended this one (logout of its CID,
    /// reinstatement); the connection closes at its next wake-up.
    pub ended: bool,
    /// Tasks a task management function on another connection ended here,
    /// taken at the next wake-up ([`Session::take_orders`]).
    pub orders: Vec<AbortOrder>,
    /// What `isoe admin` shows of the connection.
    pub info: Option<Arc<ConnInfo>>,
}

/// One connection as the control plane shows it: its addresses, when it
/// logged in, what it negotiated, and what it has under way. The
/// connection's own thread writes the gauge; readers only load it.
#[derive(Debug)]
pub struct ConnInfo {
    /// The initiator's address.
    pub peer: std::net::SocketAddr,
    /// The portal it came in on.
    pub local: std::net::SocketAddr,
    /// When its login completed.
    pub since: std::time::Instant,
    /// HeaderDigest=CRC32C was negotiated.
    pub header_digest: bool,
    /// DataDigest=CRC32C was negotiated.
    pub data_digest: bool,
    /// MaxRecvDataSegmentLength the target declared.
    pub max_recv_data_segment_length: u32,
    /// MaxRecvDataSegmentLength the initiator declared (what the target sends).
    pub max_send_data_segment_length: u32,
    /// Commands received and not yet answered: waiting for write data or
    /// for a store call on an I/O thread. Updated once per batch.
    pub in_flight: AtomicU32,
    /// What the connection counts ([`crate::metrics`]).
    pub stats: crate::metrics::ConnStats,
}

impl Member {
    /// A connection as it joins, with nothing to do yet.
    pub fn new(cid: u16, serial: u64, peer_gone: Option<PeerProbe>) -> Member {
        Member {
            cid,
            serial,
            peer_gone,
            ended: false,
            orders: Vec::new(),
            info: None,
        }
    }
}

/// Which tasks a task management function ends on a connection it did not
/// come on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortScope {
    /// One task, by its Initiator Task Tag (ABORT TASK).
    Task(u32),
    /// The tasks of one logical unit (ABORT TASK SET, CLEAR TASK SET,
    /// LOGICAL UNIT RESET).
    Lun(Lun),
    /// Every task (TARGET WARM RESET, TARGET COLD RESET).
    All,
}

impl AbortScope {
    /// Whether the command tagged `initiator_task_tag` for `lun` is in scope.
    pub fn covers(&self, lun: &Lun, initiator_task_tag: u32) -> bool {
        match self {
            AbortScope::Task(tag) => *tag == initiator_task_tag,
            AbortScope::Lun(scope) => scope == lun,
            AbortScope::All => true,
        }
    }
}

/// Commands a task management function ended before they came: the
/// function acts on every command of the session with a CmdSN below its
/// own (RFC 7143 §3.2.2.1, §11.5.1), and one answered ahead of a CmdSN
/// gap ends those still to come (on this connection or another) as if
/// received and aborted. Each rule lasts until ExpCmdSN passes the last
/// CmdSN it covers. Bounded by construction: one range per logical unit
/// (a later function on the same unit widens it) and one for all; one
/// task per CmdSN of the window.
///
/// An immediate command (RFC 7143 §3.2.2.1) may come after ExpCmdSN
/// passed its CmdSN (it carries the next command's CmdSN, and may travel on
/// a slower connection), so it is held to rules that last longer: per
/// scope the highest CmdSN of a function that ended the commands below it,
/// kept until ExpCmdSN is [`FLOOR_SPAN`] past it; and the last
/// [`COMMAND_WINDOW`] ABORT TASK rules.
#[derive(Debug, Default)]
struct Unreceived {
    /// (scope, the first CmdSN not covered): `Lun` or `All` only.
    ranges: Vec<(AbortScope, u32)>,
    /// ABORT TASK of a command not yet come: (its CmdSN, its tag).
    tasks: Vec<(u32, u32)>,
    /// For immediate commands: (scope, the first CmdSN not covered), one
    /// per scope, as many as the logical units and one for all.
    floors: Vec<(AbortScope, u32)>,
    /// For immediate commands: the last ABORT TASK rules.
    aborted: std::collections::VecDeque<(u32, u32)>,
}

/// How far ExpCmdSN moves past a function before an immediate command
/// with a lower CmdSN is no longer taken as sent before it: far beyond any
/// real delay, well inside serial arithmetic's half range (RFC 1982).
const FLOOR_SPAN: u32 = 1 << 30;

impl Unreceived {
    /// No rule binds an ordinary command (the floors bind only immediate
    /// ones).
    fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.tasks.is_empty()
    }

    /// Whether the immediate command `cmd_sn` tagged `tag` for `lun` was
    /// sent before a function that ended it.
    fn ends_immediate(&self, cmd_sn: u32, lun: &Lun, tag: u32) -> bool {
        self.ends(cmd_sn, lun, tag)
            || self
                .floors
                .iter()
                .any(|(scope, below)| sn_lt(cmd_sn, *below) && scope.covers(lun, tag))
            || self.aborted.iter().any(|&(sn, t)| sn == cmd_sn && t == tag)
    }

    /// Whether the command `cmd_sn` tagged `tag` for `lun` is ended.
    fn ends(&self, cmd_sn: u32, lun: &Lun, tag: u32) -> bool {
        self.ranges
            .iter()
            .any(|(scope, below)| sn_lt(cmd_sn, *below) && scope.covers(lun, tag))
            || self.tasks.iter().any(|&(sn, t)| sn == cmd_sn && t == tag)
    }

    /// Forgets what no command from `exp` on can match.
    fn passed(&mut self, exp: u32) {
        self.ranges.retain(|(_, below)| sn_gt(*below, exp));
        self.tasks.retain(|(sn, _)| sn_ge(*sn, exp));
        if !self.floors.is_empty() {
            self.floors
                .retain(|(_, below)| exp.wrapping_sub(*below) < FLOOR_SPAN);
        }
    }
}

/// Counts the connections that still have tasks to end for one task
/// management function, whose response waits until none has (SAM-5 7.1:
/// the function completes once every task it aborts has ended).
pub struct AbortBarrier {
    remaining: AtomicUsize,
    /// Whether a connection it counts found a task in the function's scope
    /// (ABORT TASK answers "Task does not exist" when none did).
    found: AtomicBool,
    /// The connection the function came on: woken when the count ends.
    origin: u64,
    /// Or, for tasks ended from outside any connection (a reservation
    /// preempted, another gateway's reset), what runs when it ends.
    then: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for AbortBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortBarrier")
            .field("remaining", &self.remaining)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The origin of a barrier that no connection holds.
pub const NO_CONNECTION: u64 = u64::MAX;

impl AbortBarrier {
    /// A barrier for a function that came on connection `origin`, held by
    /// the origin itself until it has ordered every other connection.
    pub fn new(origin: u64) -> Arc<AbortBarrier> {
        Arc::new(AbortBarrier {
            remaining: AtomicUsize::new(1),
            found: AtomicBool::new(false),
            origin,
            then: Mutex::new(None),
        })
    }

    /// A barrier held by its maker ([`NO_CONNECTION`]) until it has ordered
    /// every connection; `then` runs when the count ends.
    pub fn then(then: Box<dyn FnOnce() + Send>) -> Arc<AbortBarrier> {
        Arc::new(AbortBarrier {
            remaining: AtomicUsize::new(1),
            found: AtomicBool::new(false),
            origin: NO_CONNECTION,
            then: Mutex::new(Some(then)),
        })
    }

    /// One holder is done; returns the connection to wake when it was the
    /// last and not the origin itself. A barrier of no connection runs
    /// what it was given instead.
    pub fn done(&self, by: u64) -> Option<u64> {
        let last = self.remaining.fetch_sub(1, Ordering::AcqRel) == 1;
        if !last {
            return None;
        }
        if self.origin == NO_CONNECTION {
            let then = self.then.lock_unpoisoned().take();
            if let Some(then) = then {
                then();
            }
            return None;
        }
        (by != self.origin).then_some(self.origin)
    }

    /// A connection found a task in scope (before it says it is done).
    pub fn found_task(&self) {
        self.found.store(true, Ordering::Release);
    }

    /// Whether any connection found a task in scope.
    pub fn any_found(&self) -> bool {
        self.found.load(Ordering::Acquire)
    }

    /// Whether every connection has ended its tasks.
    pub fn is_done(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }
}

/// An order to end tasks, from a function that came on another connection.
#[derive(Debug, Clone)]
pub struct AbortOrder {
    /// The tasks to end.
    pub scope: AbortScope,
    /// In the function's own session, only the commands with a CmdSN
    /// below this (the function's CmdSN, RFC 7143 §11.5.1); None in
    /// another session, whose CmdSNs are its own.
    pub below: Option<u32>,
    /// Told once they have ended.
    pub barrier: Arc<AbortBarrier>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("cid", &self.cid)
            .field("serial", &self.serial)
            .field("ended", &self.ended)
            .field("orders", &self.orders.len())
            .finish()
    }
}

#[derive(Debug)]
struct Window {
    exp_cmd_sn: u32,
    /// Connections that hold a command ahead of a gap: (its CmdSN, serial).
    /// At most one entry per connection, so bounded by MaxConnections.
    waiting: Vec<(u32, u64)>,
    /// Commands ended before they came.
    unreceived: Unreceived,
}

/// State shared by the connections of one session.
#[derive(Debug)]
pub struct Session {
    /// Target Session Identifying Handle.
    pub tsih: u16,
    /// Initiator Session ID.
    pub isid: [u8; 6],
    /// The initiator's iSCSI name.
    pub initiator_name: String,
    /// The target of a normal session; None for discovery.
    pub target: Option<Arc<Target>>,
    /// Negotiated session-wide parameters.
    pub params: SessionParams,
    /// The I_T nexus handed to the SCSI layer: initiator name and ISID,
    /// through the target port of the session's portal group (relative
    /// target port = the TargetPortalGroupTag its login declared).
    pub nexus: Nexus,
    window: Mutex<Window>,
    /// Mirror of ExpCmdSN for lock-free reads when building responses.
    exp_cmd_sn: AtomicU32,
    /// The highest MaxCmdSN announced: never lowered (an initiator keeps
    /// the highest it saw, RFC 7143 §3.2.2.1), and what a command's CmdSN
    /// is admitted against.
    max_cmd_sn: AtomicU32,
    members: Mutex<Vec<Member>>,
    /// Counts notices to members (an order to end tasks, a connection
    /// ended), so that a connection woken only for its next CmdSN learns
    /// there is nothing for it without taking the members' lock.
    notices: AtomicU64,
    closed: AtomicBool,
    /// Set once the I_T nexus was detached from the target's units.
    nexus_ended: AtomicBool,
    /// What its connections that have ended counted.
    pub retired: Mutex<crate::metrics::Totals>,
    /// Store work handed out for its commands and not yet returned: a
    /// write among it may still land, after the session ended too.
    store_work: AtomicUsize,
    /// Its writes waiting for their data on its connections
    /// ([`WaitingWrites`]).
    waiting_writes: AtomicUsize,
    /// The work of connections that left with store work out
    /// ([`Session::leave`]), which functions ordered later wait for too.
    left_work: Mutex<Vec<Arc<ConnectionWork>>>,
}

impl Session {
    /// A new session whose first non-immediate command will carry `cmd_sn`.
    pub fn new(
        tsih: u16,
        isid: [u8; 6],
        initiator_name: String,
        target: Option<Arc<Target>>,
        params: SessionParams,
        cmd_sn: u32,
    ) -> Session {
        // Each portal group is one SCSI target port, numbered as its tag.
        let nexus = Nexus {
            relative_target_port: params
                .target_portal_group_tag
                .unwrap_or(crate::config::DEFAULT_PORTAL_GROUP_TAG),
            ..Nexus::new(initiator_name.clone(), isid)
        };
        // SAM-5 5.14: the nexus hears of unit attention conditions from its
        // login until the session ends (`end_nexus`).
        if let Some(target) = &target {
            for lu in target.luns().units() {
                lu.attach(&nexus);
            }
        }
        Session {
            tsih,
            isid,
            initiator_name,
            target,
            params,
            nexus,
            window: Mutex::new(Window {
                exp_cmd_sn: cmd_sn,
                waiting: Vec::new(),
                unreceived: Unreceived::default(),
            }),
            exp_cmd_sn: AtomicU32::new(cmd_sn),
            max_cmd_sn: AtomicU32::new(cmd_sn.wrapping_add(COMMAND_WINDOW - 1)),
            members: Mutex::new(Vec::new()),
            notices: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            nexus_ended: AtomicBool::new(false),
            retired: Mutex::default(),
            store_work: AtomicUsize::new(0),
            waiting_writes: AtomicUsize::new(0),
            left_work: Mutex::default(),
        }
    }

    /// Store work of its commands still out ([`StoreWork`]).
    pub fn store_work(&self) -> usize {
        self.store_work.load(Ordering::Acquire)
    }

    /// ExpCmdSN as last advanced.
    pub fn exp_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn.load(Ordering::Acquire)
    }

    /// MaxCmdSN to announce: COMMAND_WINDOW commands past ExpCmdSN, less
    /// one for each piece of store work still out and each write waiting
    /// for its data, so that the commands a session has at the target
    /// stay within the window when its store or its peer stalls (the
    /// window advances as commands arrive, and closes as they pile up);
    /// never below what was announced before. While the window has room
    /// to spare (half of it), it is raised in steps of [`WINDOW_STEP`], so
    /// that a busy session pays one atomic exchange every few commands.
    #[inline]
    pub fn max_cmd_sn(&self) -> u32 {
        let exp = self.exp_cmd_sn();
        let held = self.store_work() + self.waiting_writes.load(Ordering::Acquire);
        let out = held.min(COMMAND_WINDOW as usize) as u32;
        let candidate = exp.wrapping_add(COMMAND_WINDOW - 1).wrapping_sub(out);
        let mut announced = self.max_cmd_sn.load(Ordering::Acquire);
        let room = announced.wrapping_add(1).wrapping_sub(exp);
        if room >= COMMAND_WINDOW / 2 && candidate.wrapping_sub(announced) < WINDOW_STEP {
            return announced;
        }
        while sn_gt(candidate, announced) {
            match self.max_cmd_sn.compare_exchange_weak(
                announced,
                candidate,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return candidate,
                Err(now) => announced = now,
            }
        }
        announced
    }

    /// Admits a non-immediate command with `cmd_sn` arriving on connection
    /// `serial`. In order, the window advances, and the connections whose
    /// waiting command is now next are pushed to `wake` (RFC 7143
    /// §3.2.2.1: delivery in CmdSN order across a session's connections).
    /// Ahead of a gap, the connection is remembered and told to wait;
    /// nothing blocks. A SCSI command gives its `task` (LUN and tag): in
    /// order, it may have been ended before it came ([`Admit::Ended`]).
    pub fn admit_ordered(
        &self,
        cmd_sn: u32,
        serial: u64,
        wake: &mut Vec<u64>,
        task: Option<(&Lun, u32)>,
    ) -> Admit {
        if self.is_closed() {
            return Admit::Closed;
        }
        let mut window = self.window.lock_unpoisoned();
        // Whatever was announced stands: an initiator may use it.
        let max = self.max_cmd_sn.load(Ordering::Acquire);
        if !sn_in_window(cmd_sn, window.exp_cmd_sn, max) {
            window.waiting.retain(|&(_, s)| s != serial);
            return Admit::OutsideWindow;
        }
        if sn_gt(cmd_sn, window.exp_cmd_sn) {
            match window.waiting.iter_mut().find(|(_, s)| *s == serial) {
                Some(entry) => entry.0 = cmd_sn,
                None => window.waiting.push((cmd_sn, serial)),
            }
            return Admit::Wait;
        }
        window.exp_cmd_sn = cmd_sn.wrapping_add(1);
        self.exp_cmd_sn.store(window.exp_cmd_sn, Ordering::Release);
        let ended = !window.unreceived.is_empty() && {
            let ended = task.is_some_and(|(lun, tag)| window.unreceived.ends(cmd_sn, lun, tag));
            let exp = window.exp_cmd_sn;
            window.unreceived.passed(exp);
            ended
        };
        if !window.waiting.is_empty() {
            window.waiting.retain(|&(_, s)| s != serial);
            // The next command may wait on another connection; one whose
            // command is now behind the window learns it is a duplicate.
            let exp = window.exp_cmd_sn;
            wake.extend(
                window
                    .waiting
                    .iter()
                    .filter(|&&(sn, _)| !sn_gt(sn, exp))
                    .map(|&(_, s)| s),
            );
        }
        if ended {
            Admit::Ended
        } else {
            Admit::Deliver
        }
    }

    /// A task management function with `cmd_sn` ended the commands in
    /// `scope` with a lower CmdSN: those still to come are ended as they
    /// come. For ABORT TASK, `task` is the referenced command's CmdSN
    /// (its RefCmdSN) and the scope its tag.
    pub fn end_unreceived(&self, scope: AbortScope, cmd_sn: u32, task: Option<u32>) {
        let mut window = self.window.lock_unpoisoned();
        let exp = window.exp_cmd_sn;
        let u = &mut window.unreceived;
        match (scope, task) {
            (AbortScope::Task(tag), Some(ref_cmd_sn)) => {
                if sn_ge(ref_cmd_sn, exp) && !u.tasks.iter().any(|&(sn, _)| sn == ref_cmd_sn) {
                    u.tasks.push((ref_cmd_sn, tag));
                }
                if u.aborted.len() == COMMAND_WINDOW as usize {
                    u.aborted.pop_front();
                }
                u.aborted.push_back((ref_cmd_sn, tag));
            }
            (AbortScope::Task(_), None) => {}
            (range, _) => {
                match u.floors.iter_mut().find(|(s, _)| *s == range) {
                    Some((_, below)) if sn_gt(cmd_sn, *below) => *below = cmd_sn,
                    Some(_) => {}
                    None => u.floors.push((range, cmd_sn)),
                }
                if !sn_gt(cmd_sn, exp) {
                    return;
                }
                match u.ranges.iter_mut().find(|(s, _)| *s == range) {
                    Some((_, below)) if sn_gt(cmd_sn, *below) => *below = cmd_sn,
                    Some(_) => {}
                    None => u.ranges.push((range, cmd_sn)),
                }
            }
        }
        debug_assert!(u.tasks.len() <= COMMAND_WINDOW as usize);
    }

    /// Forgets that connection `serial` waits (it gave up or closed).
    pub fn stop_waiting(&self, serial: u64) {
        self.window
            .lock_unpoisoned()
            .waiting
            .retain(|&(_, s)| s != serial);
    }

    /// Admits an immediate command: delivered at once, its CmdSN neither
    /// checked against the window nor advancing it (RFC 7143 §3.2.2.1:
    /// an immediate command's CmdSN may lie outside the window, as when
    /// it comes on a slower connection than later commands that moved
    /// ExpCmdSN past it; ignoring it would leave a function unanswered).
    ///
    /// An immediate command for a task (`task`: its LUN and tag) sent
    /// before a function that ended it is taken and dropped unrun, as an
    /// ordinary one is ([`Session::end_unreceived`]).
    pub fn admit_immediate(&self, cmd_sn: u32, task: Option<(&Lun, u32)>) -> Admit {
        if self.is_closed() {
            return Admit::Closed;
        }
        if let Some((lun, tag)) = task {
            let window = self.window.lock_unpoisoned();
            if window.unreceived.ends_immediate(cmd_sn, lun, tag) {
                return Admit::Ended;
            }
        }
        Admit::Deliver
    }

    /// Adds a connection; fails when MaxConnections are already in use. A
    /// connection with the same CID is reinstated (RFC 7143 §6.3.4): the
    /// old one is ended, and its serial pushed to `wake` so that it closes.
    pub fn join(&self, member: Member, wake: &mut Vec<u64>) -> Result<(), SessionFull> {
        let mut members = self.members.lock_unpoisoned();
        if let Some(pos) = members.iter().position(|m| m.cid == member.cid && !m.ended) {
            members[pos].ended = true;
            self.notices.fetch_add(1, Ordering::Release);
            wake.push(members[pos].serial);
        }
        let live = members.iter().filter(|m| !m.ended).count();
        if live >= self.params.max_connections as usize {
            return Err(SessionFull {
                max_connections: self.params.max_connections,
            });
        }
        members.push(member);
        Ok(())
    }

    /// Removes a connection; returns true when it was the last one. Orders
    /// it had not taken count as done (its tasks end with it); the
    /// connections they free go to `wake`.
    pub fn leave(&self, serial: u64, work: &Arc<ConnectionWork>, wake: &mut Vec<u64>) -> bool {
        self.stop_waiting(serial);
        let mut members = self.members.lock_unpoisoned();
        if let Some(pos) = members.iter().position(|m| m.serial == serial) {
            let member = members.remove(pos);
            for order in &member.orders {
                if !work.keep(&order.barrier) {
                    wake.extend(order.barrier.done(serial));
                }
            }
        }
        if work.is_out() {
            let mut left = self.left_work.lock_unpoisoned();
            left.retain(|w| w.is_out());
            left.push(Arc::clone(work));
        }
        members.is_empty()
    }

    /// Orders every connection but `except` to end the tasks in `scope`,
    /// counting each in `barrier`; they go to `wake`.
    pub fn order_abort(
        &self,
        scope: AbortScope,
        below: Option<u32>,
        except: u64,
        barrier: &Arc<AbortBarrier>,
        wake: &mut Vec<u64>,
    ) {
        // Work of connections gone that may still land: waited for too.
        self.left_work
            .lock_unpoisoned()
            .retain(|work| work.count_and_keep(barrier));
        let mut members = self.members.lock_unpoisoned();
        for m in members
            .iter_mut()
            .filter(|m| m.serial != except && !m.ended)
        {
            barrier.remaining.fetch_add(1, Ordering::AcqRel);
            m.orders.push(AbortOrder {
                scope,
                below,
                barrier: Arc::clone(barrier),
            });
            self.notices.fetch_add(1, Ordering::Release);
            wake.push(m.serial);
        }
    }

    /// How many notices members have been given: a connection that saw
    /// this count before has none new when it is unchanged (each notice
    /// is counted before the connection it is for is woken).
    pub fn notices(&self) -> u64 {
        self.notices.load(Ordering::Acquire)
    }

    /// The orders to end tasks given to connection `serial` since it last looked.
    pub fn take_orders(&self, serial: u64) -> Vec<AbortOrder> {
        self.members
            .lock_unpoisoned()
            .iter_mut()
            .find(|m| m.serial == serial)
            .map(|m| std::mem::take(&mut m.orders))
            .unwrap_or_default()
    }

    /// Whether connection `serial` was ended by another (see [`Member::ended`]).
    pub fn is_ended(&self, serial: u64) -> bool {
        self.members
            .lock_unpoisoned()
            .iter()
            .any(|m| m.serial == serial && m.ended)
    }

    /// Whether the initiator has closed every connection of the session,
    /// as the connections' probes see it without taking data from them.
    /// False if any connection is open or can't be looked at.
    pub fn closed_by_peer(&self) -> bool {
        let members = self.members.lock_unpoisoned();
        !members.is_empty()
            && members
                .iter()
                .all(|m| m.ended || m.peer_gone.as_ref().is_some_and(|gone| gone()))
    }

    /// The serial of the session's first connection still in it: the one
    /// the others are placed beside.
    pub fn leader(&self) -> Option<u64> {
        self.members
            .lock_unpoisoned()
            .iter()
            .find(|m| !m.ended)
            .map(|m| m.serial)
    }

    /// The serials of the connections now in the session.
    pub fn member_serials(&self) -> Vec<u64> {
        self.members
            .lock_unpoisoned()
            .iter()
            .filter(|m| !m.ended)
            .map(|m| m.serial)
            .collect()
    }

    /// Number of connections now in the session.
    pub fn connection_count(&self) -> usize {
        self.members
            .lock_unpoisoned()
            .iter()
            .filter(|m| !m.ended)
            .count()
    }

    /// True when connection `cid` is part of the session.
    pub fn has_cid(&self, cid: u16) -> bool {
        self.members
            .lock_unpoisoned()
            .iter()
            .any(|m| m.cid == cid && !m.ended)
    }

    /// Ends connection `cid` (not `except_serial`), for Logout of another
    /// connection; its serial goes to `wake`.
    pub fn close_cid(&self, cid: u16, except_serial: u64, wake: &mut Vec<u64>) {
        let mut members = self.members.lock_unpoisoned();
        for m in members
            .iter_mut()
            .filter(|m| m.cid == cid && m.serial != except_serial)
        {
            m.ended = true;
            self.notices.fetch_add(1, Ordering::Release);
            wake.push(m.serial);
        }
    }

    /// Closes the whole session: every connection but `except_serial` goes
    /// to `wake`, to close at its next wake-up.
    pub fn close(&self, except_serial: u64, wake: &mut Vec<u64>) {
        self.closed.store(true, Ordering::Release);
        let members = self.members.lock_unpoisoned();
        wake.extend(
            members
                .iter()
                .filter(|m| m.serial != except_serial)
                .map(|m| m.serial),
        );
    }

    /// The I_T nexus ends (SAM-5 I_T nexus loss): the units forget it, and
    /// an SPC-2 reservation it held is released. Runs once; called before a
    /// Logout Response and when the last connection leaves, so an initiator
    /// that goes on through another session never meets the old nexus.
    pub fn end_nexus(&self) {
        if self.nexus_ended.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(target) = &self.target {
            for lu in target.luns().units() {
                lu.detach(&self.nexus);
            }
        }
    }

    /// Whether this is a normal session to `target`.
    pub fn is_on(&self, target: &Arc<Target>) -> bool {
        self.target.as_ref().is_some_and(|t| Arc::ptr_eq(t, target))
    }

    /// What the connections now in the session are ([`ConnInfo`]), by CID.
    pub fn connections(&self) -> Vec<(u16, Option<Arc<ConnInfo>>)> {
        self.members
            .lock_unpoisoned()
            .iter()
            .filter(|m| !m.ended)
            .map(|m| (m.cid, m.info.clone()))
            .collect()
    }

    /// The counters of every connection still in the member list, ended
    /// or not (an ended one counts until it has left; see
    /// [`crate::metrics`]).
    pub fn member_stats(&self) -> Vec<(u16, Arc<ConnInfo>)> {
        self.members
            .lock_unpoisoned()
            .iter()
            .filter_map(|m| Some((m.cid, Arc::clone(m.info.as_ref()?))))
            .collect()
    }

    /// True once the session was closed (logout, reinstatement, shutdown).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl Drop for Session {
    /// The I_T nexus is gone at the latest when the last handle to its
    /// session is.
    fn drop(&mut self) {
        self.end_nexus();
    }
}

/// The writes of one session waiting for their data on one connection,
/// counted in the session's window ([`Session::max_cmd_sn`]); what is
/// still counted when the connection goes is given back then.
#[derive(Debug, Default)]
pub struct WaitingWrites {
    session: Option<Arc<Session>>,
    count: usize,
}

impl WaitingWrites {
    /// One more write of `session` waits for its data.
    pub fn add(&mut self, session: &Arc<Session>) {
        let counted = self.session.get_or_insert_with(|| Arc::clone(session));
        counted.waiting_writes.fetch_add(1, Ordering::AcqRel);
        self.count += 1;
    }

    /// One write no longer waits (its data came, or it ended).
    pub fn remove(&mut self) {
        if let Some(session) = self.session.as_ref().filter(|_| self.count > 0) {
            session.waiting_writes.fetch_sub(1, Ordering::AcqRel);
            self.count -= 1;
        }
    }
}

impl Drop for WaitingWrites {
    fn drop(&mut self) {
        if let Some(session) = &self.session {
            session
                .waiting_writes
                .fetch_sub(self.count, Ordering::AcqRel);
        }
    }
}

/// One piece of store work of a session's commands, counted while it is
/// out (from being handed to a thread until the store call returned),
/// whether or not its connection or session still lives: a login that
/// reinstates the session waits until none is left, so that a write of
/// the old session cannot land after the new one's.
#[derive(Debug)]
pub struct StoreWork(Arc<Session>, Arc<ConnectionWork>);

impl StoreWork {
    /// Counts one more piece of `session`'s store work out, handed out by
    /// the connection whose work `work` counts.
    pub fn begin(session: &Arc<Session>, work: &Arc<ConnectionWork>) -> StoreWork {
        session.store_work.fetch_add(1, Ordering::AcqRel);
        work.begin();
        StoreWork(Arc::clone(session), Arc::clone(work))
    }
}

impl Drop for StoreWork {
    fn drop(&mut self) {
        self.0.store_work.fetch_sub(1, Ordering::AcqRel);
        self.1.end();
    }
}

/// The store work one connection handed out and that has not returned,
/// and the task management functions that wait for it once the
/// connection has gone: a write under way cannot be called back, so a
/// function that ends its task is answered only when the store call
/// returned, whether or not its connection is still there to say so.
#[derive(Debug, Default)]
pub struct ConnectionWork {
    state: Mutex<ConnectionWorkState>,
}

#[derive(Debug, Default)]
struct ConnectionWorkState {
    out: usize,
    /// Each counted once in its barrier, done when `out` comes to 0.
    waiting: Vec<Arc<AbortBarrier>>,
}

impl ConnectionWork {
    fn begin(&self) {
        self.state.lock_unpoisoned().out += 1;
    }

    fn end(&self) {
        let waiting = {
            let mut state = self.state.lock_unpoisoned();
            state.out = state.out.saturating_sub(1);
            if state.out > 0 {
                return;
            }
            std::mem::take(&mut state.waiting)
        };
        // The functions' connections see it at their next tick.
        for barrier in waiting {
            let _ = barrier.done(NO_CONNECTION);
        }
    }

    /// Whether any of its work is out.
    pub fn is_out(&self) -> bool {
        self.state.lock_unpoisoned().out > 0
    }

    /// Keeps `barrier`, already counted for this connection, until its
    /// work is back; false (nothing kept) when none is out.
    pub fn keep(&self, barrier: &Arc<AbortBarrier>) -> bool {
        let mut state = self.state.lock_unpoisoned();
        if state.out == 0 {
            return false;
        }
        state.waiting.push(Arc::clone(barrier));
        true
    }

    /// Counts `barrier` once more and keeps it until this work is back;
    /// false (not counted) when none is out.
    fn count_and_keep(&self, barrier: &Arc<AbortBarrier>) -> bool {
        let mut state = self.state.lock_unpoisoned();
        if state.out == 0 {
            return false;
        }
        barrier.remaining.fetch_add(1, Ordering::AcqRel);
        state.waiting.push(Arc::clone(barrier));
        true
    }
}
