//! The session state machine, with no I/O: the command window, tasks and
//! their tags, each connection's sequence numbers and output, and what the
//! target's PDUs do to them (RFC 7143 §3.2, §4.2, §11).
//!
//! Bytes come in through [`SessionCore::handle_input`]; output leaves through
//! [`SessionCore::flush`], which hands a vectored send to a closure; time is
//! passed to [`SessionCore::handle_tick`]. The engine owns the sockets.
//!
//! A large Data-In data segment may instead be received straight into its
//! task's buffer: [`SessionCore::begin_placement`] and the rest of
//! [`placement`] say where each byte goes, the driver only receives.

use crate::command::{
    Command, Completion, Direction, Outcome, Residual, ScsiStatus, TaskAttr, TaskError,
    TaskManagement,
};
use crate::config::Keepalive;
use crate::login::LoginResult;
use crate::out_queue::{OutQueue, Piece};
use isoe_iovec::IoSlices;
use isoe_wire::frame::{self, Decoded, Frame, FrameLimits};
use isoe_wire::negotiate::SessionParams;
use isoe_wire::pdu::{
    logout, tmf, DataIn, DataOut, LogoutRequest, Lun, NopIn, NopOut, R2t, ScsiCommand,
    ScsiResponse, TaskMgmtRequest, RESERVED_TAG,
};
use isoe_wire::serial::{sn_ge, sn_gt, sn_le, sn_lt};
use isoe_wire::{Pdu, BHS_LEN};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::time::Instant;

mod placement;
#[cfg(test)]
mod testing;
pub use placement::Placement;

/// Tasks one session can have at once: the slot number is 16 bits of the tag.
pub const TASKS_MAX: usize = 0xffff;
/// Token of internal tasks (keepalive pings), never reported.
const INTERNAL_TOKEN: u64 = u64::MAX;
/// Pieces handed to one send.
const IOV_MAX: usize = 256;
/// Runs of bytes and external ranges handed to one send at most.
const CHUNKS_MAX: usize = 32;

/// What [`SessionCore::flush_output`] hands its sender.
#[derive(Debug, Clone, Copy)]
pub enum Output<'a> {
    /// Everything queued is in memory: one vectored send.
    Bytes(&'a [IoSlice<'a>]),
    /// Some of it is in external buffers: send these in order, stopping
    /// at the first that does not go whole.
    Chunks(&'a [Chunk<'a>]),
}

/// A run of output for a [`crate::DataPlane`].
#[derive(Debug, Clone, Copy)]
pub enum Chunk<'a> {
    /// Bytes in memory.
    Bytes(&'a [IoSlice<'a>]),
    /// `len` bytes at `offset` of the caller's external buffer `buffer`.
    External {
        buffer: u32,
        offset: usize,
        len: usize,
    },
}

/// A [`Chunk`] before `iov` is whole: a range of its slices, or an
/// external range.
#[derive(Debug, Clone, Copy)]
enum Run {
    Bytes(usize, usize),
    External {
        buffer: u32,
        offset: usize,
        len: usize,
    },
}

/// What a task is.
#[derive(Debug)]
enum Kind {
    Scsi {
        lun: Lun,
        cdb: [u8; 16],
        direction: Direction,
        attr: u8,
        /// [`Command::external`].
        external: Option<u32>,
        /// [`Command::immediate`].
        immediate: bool,
    },
    Tmf {
        function: tmf::TmfFunction,
        lun: Lun,
        referenced_tag: u32,
        ref_cmd_sn: u32,
    },
    Ping,
    Logout,
}

#[derive(Debug)]
struct Task {
    token: u64,
    kind: Kind,
    buffer: Vec<u8>,
    /// The connection the task is allegiant to, once sent.
    conn: Option<usize>,
    cmd_sn: u32,
    data_in_bytes: u32,
    /// Output pieces still pointing into `buffer`.
    queued_pieces: u32,
    /// The outcome, once known, held while `queued_pieces` > 0.
    finished: Option<Outcome>,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u16,
    task: Option<Task>,
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct ConnCore {
    /// CID.
    pub cid: u16,
    /// What we accept.
    pub recv_limits: FrameLimits,
    /// How we send (digests; the target's MaxRecvDataSegmentLength).
    pub send_limits: FrameLimits,
    exp_stat_sn: u32,
    out: OutQueue,
    outstanding: u32,
    /// False once the connection failed.
    pub alive: bool,
    last_rx: Instant,
    ping: Option<(u32, Instant)>,
}

impl ConnCore {
    /// A connection fresh from login.
    pub fn new(
        cid: u16,
        recv: FrameLimits,
        send: FrameLimits,
        exp_stat_sn: u32,
        now: Instant,
    ) -> ConnCore {
        ConnCore {
            cid,
            recv_limits: recv,
            send_limits: send,
            exp_stat_sn,
            out: OutQueue::default(),
            outstanding: 0,
            alive: true,
            last_rx: now,
            ping: None,
        }
    }

    /// A connection fresh from `login`, with the limits it negotiated.
    pub fn from_login(login: &LoginResult, now: Instant) -> ConnCore {
        let (recv, send) = login.limits();
        ConnCore::new(login.negotiated.cid, recv, send, login.exp_stat_sn, now)
    }

    /// True when output waits to be sent.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }
}

/// NOP-Out/NOP-In traffic of a session (RFC 7143 §11.18, §11.19).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NopCounters {
    /// Keepalive pings we sent.
    pub pings_sent: u64,
    /// Answers to our pings.
    pub pings_answered: u64,
    /// The target's pings we echoed.
    pub target_pings_echoed: u64,
}

/// Why a connection must be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnFailure(pub String);

/// How many commands more than the least loaded connection the last
/// command's connection may carry and still take the next one.
pub const RUN_SLACK: u32 = 8;

/// The state of one session.
#[derive(Debug)]
pub struct SessionCore {
    /// The index callers know the session by.
    pub index: usize,
    /// What login negotiated for the session.
    pub params: SessionParams,
    keepalive: Keepalive,
    cmd_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    /// Connections; a failed one stays with `alive` false until recovery.
    pub conns: Vec<ConnCore>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    waiting: VecDeque<u32>,
    completions: Vec<Completion>,
    scratch: Vec<u8>,
    failed: Option<String>,
    /// NOP traffic so far.
    pub nops: NopCounters,
    /// Counts connection losses: a [`Placement`] taken before the last one
    /// belongs to a connection that is gone.
    conns_epoch: u32,
    /// Where placed data goes when its task ended meanwhile; allocated on first use.
    sink: Vec<u8>,
    /// The connection the last command went on ([`SessionCore::pick_for_command`]).
    last_conn: Option<usize>,
    /// See [`SessionCore::set_run_slack`].
    run_slack: u32,
}

impl SessionCore {
    /// A session whose login gave `params` and the first window.
    pub fn new(
        index: usize,
        params: SessionParams,
        keepalive: Keepalive,
        cmd_sn: u32,
        exp_cmd_sn: u32,
        max_cmd_sn: u32,
    ) -> SessionCore {
        SessionCore {
            index,
            params,
            keepalive,
            cmd_sn,
            exp_cmd_sn,
            max_cmd_sn,
            conns: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            waiting: VecDeque::new(),
            completions: Vec::new(),
            scratch: Vec::with_capacity(64),
            failed: None,
            nops: NopCounters::default(),
            last_conn: None,
            run_slack: RUN_SLACK,
            conns_epoch: 0,
            sink: Vec::new(),
        }
    }

    /// A session whose leading login gave `first`, its first command to go
    /// with `cmd_sn`.
    pub fn from_login(
        index: usize,
        keepalive: Keepalive,
        cmd_sn: u32,
        first: &LoginResult,
        now: Instant,
    ) -> SessionCore {
        let mut core = SessionCore::new(
            index,
            first.negotiated.session.clone(),
            keepalive,
            cmd_sn,
            first.exp_cmd_sn,
            first.max_cmd_sn,
        );
        core.add_login(first, now);
        core
    }

    /// Adds a connection whose login gave `login` (the leading one, or one
    /// joining the session).
    pub fn add_login(&mut self, login: &LoginResult, now: Instant) {
        self.add_connection(
            ConnCore::from_login(login, now),
            login.exp_cmd_sn,
            login.max_cmd_sn,
        );
    }

    /// The next CmdSN (what a new connection's login carries).
    pub fn cmd_sn(&self) -> u32 {
        self.cmd_sn
    }

    /// Tasks submitted and not yet completed.
    pub fn tasks_in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Why the session failed for good, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Moves finished tasks to `out`.
    pub fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.completions);
    }

    /// True when completions wait to be drained.
    pub fn has_completions(&self) -> bool {
        !self.completions.is_empty()
    }

    /// Adds a connection that finished login.
    pub fn add_connection(&mut self, conn: ConnCore, exp_cmd_sn: u32, max_cmd_sn: u32) {
        self.conns.push(conn);
        self.update_window(exp_cmd_sn, max_cmd_sn);
    }

    // ---- submission --------------------------------------------------

    /// Queues a SCSI command; it goes out when the window and a connection allow.
    pub fn submit(&mut self, mut cmd: Command, token: u64) -> Result<(), (TaskError, Command)> {
        if let Some(why) = &self.failed {
            return Err((TaskError::SessionFailed(why.clone()), cmd));
        }
        if self.free.is_empty() && self.slots.len() >= TASKS_MAX {
            let why = format!("more than {TASKS_MAX} tasks in flight");
            return Err((TaskError::Invalid(why), cmd));
        }
        let len = cmd.transfer_len() as usize;
        let digested = self.conns.iter().any(|c| c.send_limits.data_digest);
        if cmd.external.is_some() && matches!(cmd.direction, Direction::Write(_)) && digested {
            let why = "a write from an external buffer on a connection with data digests \
                       (the digest is computed over the bytes, which it does not show)"
                .to_string();
            return Err((TaskError::Invalid(why), cmd));
        }
        match cmd.direction {
            Direction::Write(_) if cmd.buffer.len() < len => {
                let why = format!("write of {len} bytes with a buffer of {}", cmd.buffer.len());
                return Err((TaskError::Invalid(why), cmd));
            }
            Direction::Read(_) => {
                // Reuse the buffer as it is when it is long enough: no memset per command.
                if cmd.buffer.len() < len {
                    cmd.buffer.resize(len, 0);
                } else {
                    cmd.buffer.truncate(len);
                }
            }
            _ => {}
        }
        let kind = Kind::Scsi {
            lun: cmd.lun,
            cdb: cmd.cdb,
            direction: cmd.direction,
            attr: cmd.attr as u8,
            external: cmd.external,
            immediate: cmd.immediate,
        };
        let slot = self
            .alloc(token, kind, cmd.buffer)
            .expect("a free slot was checked above");
        self.waiting.push_back(slot);
        Ok(())
    }

    /// Sends a task management function at once (immediate delivery), on
    /// the connection of the task it aborts, else the least loaded.
    pub fn submit_task_management(
        &mut self,
        request: TaskManagement,
        token: u64,
    ) -> Result<(), TaskError> {
        self.submit_task_management_on(request, token, None)
    }

    /// As [`SessionCore::submit_task_management`], on connection `on` when
    /// given and alive (RFC 7143 §11.5: a function may go on any
    /// connection of the session).
    pub fn submit_task_management_on(
        &mut self,
        request: TaskManagement,
        token: u64,
        on: Option<usize>,
    ) -> Result<(), TaskError> {
        if let Some(why) = &self.failed {
            return Err(TaskError::SessionFailed(why.clone()));
        }
        let (function, lun) = match request {
            TaskManagement::AbortTask { lun, .. } => (tmf::TmfFunction::AbortTask, lun),
            TaskManagement::AbortTaskSet(lun) => (tmf::TmfFunction::AbortTaskSet, lun),
            TaskManagement::ClearTaskSet(lun) => (tmf::TmfFunction::ClearTaskSet, lun),
            TaskManagement::LogicalUnitReset(lun) => (tmf::TmfFunction::LogicalUnitReset, lun),
            TaskManagement::TargetWarmReset => (tmf::TmfFunction::TargetWarmReset, 0),
        };
        let lun = Lun::from_number(lun);
        let mut referenced_tag = RESERVED_TAG;
        let mut ref_cmd_sn = self.cmd_sn;
        let mut conn = None;
        if let TaskManagement::AbortTask { token: victim, .. } = request {
            let found = self.find_token(victim);
            match found.and_then(|slot| self.task(slot).map(|t| (slot, t.conn, t.cmd_sn))) {
                Some((slot, None, _)) => {
                    // Never sent: nothing to ask the target, end it here.
                    self.waiting.retain(|s| *s != slot);
                    self.finish(slot, Outcome::Failed(TaskError::Aborted));
                    self.completions.push(Completion {
                        session: self.index,
                        token,
                        outcome: Outcome::TaskManagement(tmf::TmfResponse::Complete),
                        buffer: Vec::new(),
                    });
                    return Ok(());
                }
                Some((slot, Some(c), sn)) => {
                    referenced_tag = self.tag(slot);
                    ref_cmd_sn = sn;
                    conn = Some(c);
                }
                None => {
                    self.completions.push(Completion {
                        session: self.index,
                        token,
                        outcome: Outcome::TaskManagement(tmf::TmfResponse::NoTask),
                        buffer: Vec::new(),
                    });
                    return Ok(());
                }
            }
        }
        let kind = Kind::Tmf {
            function,
            lun,
            referenced_tag,
            ref_cmd_sn,
        };
        let slot = self
            .alloc(token, kind, Vec::new())
            .ok_or_else(|| TaskError::Invalid(format!("more than {TASKS_MAX} tasks in flight")))?;
        let chosen = on.filter(|&c| self.conns.get(c).is_some_and(|c| c.alive));
        let Some(c) = chosen.or(conn).or_else(|| self.pick_connection()) else {
            self.finish(
                slot,
                Outcome::Failed(TaskError::SessionFailed("no connection".into())),
            );
            return Ok(());
        };
        self.send_tmf(slot, c);
        Ok(())
    }

    /// Queues a Logout that closes the session (RFC 7143 §11.14).
    pub fn submit_logout(&mut self, token: u64) -> Result<(), TaskError> {
        let slot = self
            .alloc(token, Kind::Logout, Vec::new())
            .ok_or_else(|| TaskError::Invalid("task table full".into()))?;
        self.waiting.push_back(slot);
        Ok(())
    }

    /// Sends what the window allows from the waiting queue.
    pub fn pump(&mut self) {
        while let Some(&slot) = self.waiting.front() {
            if !sn_le(self.cmd_sn, self.max_cmd_sn) {
                break;
            }
            let Some(c) = self.pick_for_command() else {
                break;
            };
            self.waiting.pop_front();
            let is_logout = matches!(self.task(slot).map(|t| &t.kind), Some(Kind::Logout));
            if is_logout {
                self.send_logout(slot, c);
            } else {
                self.send_command(slot, c);
            }
        }
    }

    /// How many commands beyond the least loaded connection the last
    /// command's connection may carry and still take the next
    /// ([`RUN_SLACK`] unless set); 0 sends every command to the least
    /// loaded, so that consecutive commands alternate between connections
    /// (what tests of a target's CmdSN ordering across connections want).
    pub fn set_run_slack(&mut self, slack: u32) {
        self.run_slack = slack;
    }

    /// The connection for the next command: the last one's again while
    /// it carries no more than the run slack beyond the least loaded, else
    /// the least loaded. Consecutive CmdSNs thus go in runs on
    /// one connection, not one per connection in turn: a target delivers a
    /// session's commands in CmdSN order (RFC 7143 §3.2.2.1), and commands
    /// that alternate between connections make it switch connection for
    /// every one (at 4 sessions x 4 connections, 0.9 switches per command
    /// on isoe's target), while the load stays balanced within the slack.
    fn pick_for_command(&mut self) -> Option<usize> {
        let least = self.pick_connection()?;
        let c = match self.last_conn {
            Some(last)
                if self.conns.get(last).is_some_and(|c| {
                    c.alive && c.outstanding <= self.conns[least].outstanding + self.run_slack
                }) =>
            {
                last
            }
            _ => least,
        };
        self.last_conn = Some(c);
        Some(c)
    }

    fn pick_connection(&self) -> Option<usize> {
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.alive)
            .min_by_key(|(_, c)| c.outstanding)
            .map(|(i, _)| i)
    }

    // ---- slots and tags --------------------------------------------------

    fn alloc(&mut self, token: u64, kind: Kind, buffer: Vec<u8>) -> Option<u32> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.slots.len() < TASKS_MAX => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let entry = &mut self.slots[slot as usize];
        // 15 bits of generation keep every tag below the reserved 0xffffffff.
        entry.generation = entry.generation.wrapping_add(1) & 0x7fff;
        entry.task = Some(Task {
            token,
            kind,
            buffer,
            conn: None,
            cmd_sn: 0,
            data_in_bytes: 0,
            queued_pieces: 0,
            finished: None,
        });
        Some(slot)
    }

    fn tag(&self, slot: u32) -> u32 {
        u32::from(self.slots[slot as usize].generation) << 16 | slot
    }

    fn slot_of(&self, tag: u32) -> Option<u32> {
        let slot = tag & 0xffff;
        let entry = self.slots.get(slot as usize)?;
        let live = entry.task.as_ref().is_some_and(|t| t.finished.is_none());
        (live && u32::from(entry.generation) == tag >> 16).then_some(slot)
    }

    fn task(&self, slot: u32) -> Option<&Task> {
        self.slots.get(slot as usize)?.task.as_ref()
    }

    fn task_mut(&mut self, slot: u32) -> Option<&mut Task> {
        self.slots.get_mut(slot as usize)?.task.as_mut()
    }

    fn find_token(&self, token: u64) -> Option<u32> {
        self.slots.iter().enumerate().find_map(|(i, s)| {
            s.task
                .as_ref()
                .filter(|t| {
                    t.token == token && t.finished.is_none() && matches!(t.kind, Kind::Scsi { .. })
                })
                .map(|_| i as u32)
        })
    }

    /// Ends a task: reported now, or once its queued output is gone.
    fn finish(&mut self, slot: u32, outcome: Outcome) {
        let index = self.index;
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        if task.finished.is_some() {
            return;
        }
        if let Some(c) = task.conn {
            if let Some(conn) = self.conns.get_mut(c) {
                conn.outstanding = conn.outstanding.saturating_sub(1);
            }
        }
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        if task.queued_pieces > 0 {
            task.finished = Some(outcome);
            return;
        }
        let task = self.slots[slot as usize]
            .task
            .take()
            .expect("task checked above");
        self.free.push(slot);
        if task.token != INTERNAL_TOKEN {
            self.completions.push(Completion {
                session: index,
                token: task.token,
                outcome,
                buffer: task.buffer,
            });
        }
    }

    fn release_piece(&mut self, slot: u32) {
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        task.queued_pieces = task.queued_pieces.saturating_sub(1);
        if task.queued_pieces == 0 {
            if let Some(outcome) = task.finished.take() {
                // `finish` already counted the connection down; report now.
                let task = self.slots[slot as usize].task.take().expect("task present");
                self.free.push(slot);
                if task.token != INTERNAL_TOKEN {
                    self.completions.push(Completion {
                        session: self.index,
                        token: task.token,
                        outcome,
                        buffer: task.buffer,
                    });
                }
            }
        }
    }

    // ---- output --------------------------------------------------------

    fn push_header(&mut self, c: usize, pdu: &Pdu, data_len: u32) {
        self.scratch.clear();
        frame::encode_header(
            &mut self.scratch,
            pdu,
            &[],
            data_len,
            &self.conns[c].send_limits,
        );
        let conn = &mut self.conns[c];
        conn.out.push_bytes(&self.scratch);
    }

    /// Queues `buffer[start..end]` of a task and its padding and digest.
    fn push_task_data(&mut self, c: usize, slot: u32, start: u32, end: u32) {
        let limits = self.conns[c].send_limits;
        let Some(task) = self.slots[slot as usize].task.as_mut() else {
            return;
        };
        // An external buffer is never sent with a data digest (`submit`
        // refuses it): the trailer is the padding alone.
        let (trailer, trailer_len) =
            frame::data_trailer(&task.buffer[start as usize..end as usize], &limits);
        task.queued_pieces += 1;
        let external = match task.kind {
            Kind::Scsi {
                external,
                direction: Direction::Write(_),
                ..
            } => external,
            _ => None,
        };
        let out = &mut self.conns[c].out;
        match external {
            Some(buffer) => out.push_external(slot, buffer, start, end),
            None => out.push_task(slot, start, end),
        }
        out.push_bytes(&trailer[..trailer_len]);
    }

    fn send_command(&mut self, slot: u32, c: usize) {
        let cmd_sn = self.cmd_sn;
        let immediate = matches!(
            self.task(slot).map(|t| &t.kind),
            Some(Kind::Scsi {
                immediate: true,
                ..
            })
        );
        if !immediate {
            self.cmd_sn = cmd_sn.wrapping_add(1);
        }
        let tag = self.tag(slot);
        let max_send = self.conns[c].send_limits.max_recv_data_segment_length;
        let exp_stat_sn = self.conns[c].exp_stat_sn;
        self.conns[c].outstanding += 1;
        let params = &self.params;
        let (immediate_data, initial_r2t, first_burst) = (
            params.immediate_data,
            params.initial_r2t,
            params.first_burst_length,
        );
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        task.conn = Some(c);
        task.cmd_sn = cmd_sn;
        task.data_in_bytes = 0;
        let Kind::Scsi {
            lun,
            cdb,
            direction,
            attr,
            ..
        } = task.kind
        else {
            return;
        };
        let (read, write, edtl) = match direction {
            Direction::None => (false, false, 0),
            Direction::Read(n) => (true, false, n),
            Direction::Write(n) => (false, true, n),
        };
        // RFC 7143 §13.11, §13.10, §13.14: immediate data, then unsolicited
        // Data-Out, together at most FirstBurstLength.
        let immediate_len = if write && immediate_data {
            edtl.min(first_burst).min(max_send)
        } else {
            0
        };
        let unsolicited_end = if write && !initial_r2t {
            edtl.min(first_burst)
        } else {
            immediate_len
        };
        let pdu = Pdu::ScsiCommand(ScsiCommand {
            immediate,
            // F: no unsolicited Data-Out follows (RFC 7143 §11.3.4).
            final_bit: unsolicited_end == immediate_len,
            read,
            write,
            attr,
            lun,
            initiator_task_tag: tag,
            expected_data_transfer_length: edtl,
            cmd_sn,
            exp_stat_sn,
            cdb,
        });
        self.push_header(c, &pdu, immediate_len);
        if immediate_len > 0 {
            self.push_task_data(c, slot, 0, immediate_len);
        }
        if unsolicited_end > immediate_len {
            self.queue_data_out(slot, c, RESERVED_TAG, immediate_len, unsolicited_end);
        }
    }

    /// Data-Out PDUs for `[start, end)` of a task, one sequence (RFC 7143 §11.7).
    fn queue_data_out(&mut self, slot: u32, c: usize, ttt: u32, start: u32, end: u32) {
        let max_send = self.conns[c]
            .send_limits
            .max_recv_data_segment_length
            .max(512);
        let tag = self.tag(slot);
        let Some(Kind::Scsi { lun, .. }) = self.task(slot).map(|t| &t.kind) else {
            return;
        };
        let lun = *lun;
        let mut offset = start;
        let mut data_sn = 0u32;
        while offset < end {
            let len = max_send.min(end - offset);
            let pdu = Pdu::DataOut(DataOut {
                final_bit: offset + len == end,
                lun,
                initiator_task_tag: tag,
                target_transfer_tag: ttt,
                exp_stat_sn: self.conns[c].exp_stat_sn,
                data_sn,
                buffer_offset: offset,
            });
            self.push_header(c, &pdu, len);
            self.push_task_data(c, slot, offset, offset + len);
            offset += len;
            data_sn = data_sn.wrapping_add(1);
        }
    }

    fn send_tmf(&mut self, slot: u32, c: usize) {
        let tag = self.tag(slot);
        let cmd_sn = self.cmd_sn;
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        task.conn = Some(c);
        task.cmd_sn = cmd_sn;
        let Kind::Tmf {
            function,
            lun,
            referenced_tag,
            ref_cmd_sn,
        } = task.kind
        else {
            return;
        };
        self.conns[c].outstanding += 1;
        let pdu = Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function,
            lun,
            initiator_task_tag: tag,
            referenced_task_tag: referenced_tag,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.conns[c].exp_stat_sn,
            ref_cmd_sn,
            exp_data_sn: 0,
        });
        self.push_header(c, &pdu, 0);
    }

    fn send_logout(&mut self, slot: u32, c: usize) {
        let tag = self.tag(slot);
        let cmd_sn = self.cmd_sn;
        self.cmd_sn = cmd_sn.wrapping_add(1);
        if let Some(task) = self.task_mut(slot) {
            task.conn = Some(c);
        }
        self.conns[c].outstanding += 1;
        let pdu = Pdu::LogoutRequest(LogoutRequest {
            immediate: false,
            reason_code: logout::LogoutReason::CloseSession,
            initiator_task_tag: tag,
            cid: self.conns[c].cid,
            cmd_sn,
            exp_stat_sn: self.conns[c].exp_stat_sn,
        });
        self.push_header(c, &pdu, 0);
    }

    fn send_ping(&mut self, c: usize, now: Instant) {
        let Some(slot) = self.alloc(INTERNAL_TOKEN, Kind::Ping, Vec::new()) else {
            return;
        };
        let tag = self.tag(slot);
        if let Some(task) = self.task_mut(slot) {
            task.conn = Some(c);
        }
        let conn = &mut self.conns[c];
        conn.outstanding += 1;
        conn.ping = Some((slot, now));
        self.nops.pings_sent += 1;
        let pdu = Pdu::NopOut(NopOut {
            immediate: true,
            lun: Lun::default(),
            initiator_task_tag: tag,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: conn.exp_stat_sn,
        });
        self.push_header(c, &pdu, 0);
    }

    /// Sends what connection `c` has queued through `send` (a vectored,
    /// non-blocking send). Ok(true) when everything went; Ok(false) when the
    /// socket is full. A connection carrying an external buffer's data
    /// needs [`SessionCore::flush_output`].
    pub fn flush(
        &mut self,
        c: usize,
        mut send: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    ) -> io::Result<bool> {
        self.flush_output(c, |out| match out {
            Output::Bytes(iov) => send(iov),
            Output::Chunks(_) => Err(io::Error::other(
                "an external buffer's data, and no data plane to send it",
            )),
        })
    }

    /// The bytes a queued piece (not an external one) stands for.
    fn piece_bytes<'a>(&'a self, piece: &'a Piece) -> &'a [u8] {
        match piece {
            Piece::Inline { bytes, len } => &bytes[..usize::from(*len)],
            Piece::Owned(v) => v,
            Piece::Task { slot, start, end } => match self.task(*slot) {
                Some(t) => &t.buffer[*start as usize..*end as usize],
                None => &[],
            },
            Piece::External { .. } => &[],
        }
    }

    /// [`SessionCore::flush`] for every kind of output: what is queued goes
    /// to `send` as one vectored send ([`Output::Bytes`]) or, while an
    /// external buffer's data is queued, as runs of bytes and external
    /// ranges in order ([`Output::Chunks`], for a [`crate::DataPlane`]).
    /// `send` says how many bytes went, in order.
    pub fn flush_output(
        &mut self,
        c: usize,
        mut send: impl FnMut(Output<'_>) -> io::Result<usize>,
    ) -> io::Result<bool> {
        loop {
            let n = {
                let conn = &self.conns[c];
                if conn.out.is_empty() {
                    return Ok(true);
                }
                // Slots left uninitialized: filling all IOV_MAX (4 KiB) per
                // send cost more than the few slices a connection at low
                // depth uses.
                let mut iov = IoSlices::<IOV_MAX>::new();
                let front_sent = conn.out.front_sent;
                let result = if conn.out.externals == 0 {
                    iov.extend(conn.out.pieces.iter().enumerate().map(|(i, piece)| {
                        let bytes = self.piece_bytes(piece);
                        if i == 0 {
                            &bytes[front_sent..]
                        } else {
                            bytes
                        }
                    }));
                    send(Output::Bytes(iov.as_slice()))
                } else {
                    // Runs of consecutive byte pieces (slices of `iov`) and
                    // external ranges, as many as fit.
                    let mut runs = [Run::Bytes(0, 0); CHUNKS_MAX];
                    let mut count = 0;
                    for (i, piece) in conn.out.pieces.iter().enumerate() {
                        let skip = if i == 0 { front_sent } else { 0 };
                        let run = match piece {
                            Piece::External {
                                buffer, start, end, ..
                            } => Run::External {
                                buffer: *buffer,
                                offset: *start as usize + skip,
                                len: (*end - *start) as usize - skip,
                            },
                            _ if iov.is_full() => break,
                            _ => {
                                iov.push(&self.piece_bytes(piece)[skip..]);
                                match runs[..count].last_mut() {
                                    Some(Run::Bytes(_, to)) => {
                                        *to += 1;
                                        continue;
                                    }
                                    _ => Run::Bytes(iov.len() - 1, iov.len()),
                                }
                            }
                        };
                        if count == CHUNKS_MAX {
                            // (A byte piece's slice may be in `iov`: no run
                            // names it, so it is not sent.)
                            break;
                        }
                        runs[count] = run;
                        count += 1;
                    }
                    let slices = iov.as_slice();
                    let mut chunks = [Chunk::Bytes(&[]); CHUNKS_MAX];
                    for (chunk, run) in chunks.iter_mut().zip(&runs[..count]) {
                        *chunk = match *run {
                            Run::Bytes(from, to) => Chunk::Bytes(&slices[from..to]),
                            Run::External {
                                buffer,
                                offset,
                                len,
                            } => Chunk::External {
                                buffer,
                                offset,
                                len,
                            },
                        };
                    }
                    send(Output::Chunks(&chunks[..count]))
                };
                match result {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                    Err(e) => return Err(e),
                }
            };
            let mut released = Vec::new();
            self.conns[c].out.advance(n, |slot| released.push(slot));
            for slot in released {
                self.release_piece(slot);
            }
        }
    }

    // ---- input ---------------------------------------------------------

    /// Decodes and handles every whole PDU at the start of `data`; returns
    /// the bytes consumed and, when more is needed, how many bytes the
    /// partial PDU needs in all.
    pub fn handle_input(
        &mut self,
        c: usize,
        data: &[u8],
        now: Instant,
    ) -> Result<(usize, usize), ConnFailure> {
        let mut used = 0;
        self.conns[c].last_rx = now;
        loop {
            let limits = self.conns[c].recv_limits;
            match frame::decode(&data[used..], &limits) {
                Ok(Decoded::Frame { frame, len }) => {
                    self.handle_frame(c, &frame)?;
                    used += len;
                }
                Ok(Decoded::NeedMore { total_len }) => return Ok((used, total_len)),
                Err(e) => return Err(ConnFailure(format!("bad PDU from the target: {e}"))),
            }
        }
    }

    fn handle_frame(&mut self, c: usize, frame: &Frame<'_>) -> Result<(), ConnFailure> {
        let pdu = frame
            .pdu()
            .map_err(|e| ConnFailure(format!("undecodable PDU header: {e}")))?;
        match pdu {
            Pdu::DataIn(d) => self.on_data_in(c, &d, frame.data),
            Pdu::ScsiResponse(r) => {
                self.on_status(c, r.stat_sn, r.exp_cmd_sn, r.max_cmd_sn);
                self.on_scsi_response(&r, frame.data);
                Ok(())
            }
            Pdu::R2t(r) => self.on_r2t(c, &r),
            Pdu::NopIn(n) => {
                self.on_nop_in(c, &n, frame.data);
                Ok(())
            }
            Pdu::TaskMgmtResponse(t) => {
                self.on_status(c, t.stat_sn, t.exp_cmd_sn, t.max_cmd_sn);
                if let Some(slot) = self.slot_of(t.initiator_task_tag) {
                    self.on_tmf_done(slot, t.response);
                }
                Ok(())
            }
            Pdu::LogoutResponse(l) => {
                self.on_status(c, l.stat_sn, l.exp_cmd_sn, l.max_cmd_sn);
                if let Some(slot) = self.slot_of(l.initiator_task_tag) {
                    self.finish(slot, Outcome::Logout(l.response));
                }
                Ok(())
            }
            Pdu::Reject(r) => {
                self.on_status(c, r.stat_sn, r.exp_cmd_sn, r.max_cmd_sn);
                // The data segment is the rejected header; its ITT names the task.
                if frame.data.len() >= BHS_LEN {
                    let itt = u32::from_be_bytes([
                        frame.data[16],
                        frame.data[17],
                        frame.data[18],
                        frame.data[19],
                    ]);
                    if let Some(slot) = self.slot_of(itt) {
                        self.finish(
                            slot,
                            Outcome::Failed(TaskError::Rejected { reason: r.reason }),
                        );
                    }
                }
                Ok(())
            }
            Pdu::AsyncMessage(a) => {
                use isoe_wire::pdu::AsyncEvent;
                self.on_status(c, a.stat_sn, a.exp_cmd_sn, a.max_cmd_sn);
                // RFC 7143 §11.9.1: a logout requested, or the target drops
                // connections.
                match a.async_event {
                    AsyncEvent::LogoutRequest
                    | AsyncEvent::ConnectionDrop
                    | AsyncEvent::SessionDrop => Err(ConnFailure(format!(
                        "the target asked to end the connection (async event {})",
                        a.async_event.to_u8()
                    ))),
                    _ => Ok(()),
                }
            }
            Pdu::TextResponse(t) => {
                self.on_status(c, t.stat_sn, t.exp_cmd_sn, t.max_cmd_sn);
                Ok(())
            }
            other => Err(ConnFailure(format!(
                "the target sent an initiator PDU ({:?})",
                other.opcode()
            ))),
        }
    }

    /// StatSN and the window from a PDU that carries a status.
    fn on_status(&mut self, c: usize, stat_sn: u32, exp_cmd_sn: u32, max_cmd_sn: u32) {
        let conn = &mut self.conns[c];
        if sn_ge(stat_sn, conn.exp_stat_sn) {
            conn.exp_stat_sn = stat_sn.wrapping_add(1);
        }
        self.update_window(exp_cmd_sn, max_cmd_sn);
    }

    /// RFC 7143 §4.2.2.1: take a newer ExpCmdSN/MaxCmdSN, ignore a window
    /// with MaxCmdSN < ExpCmdSN - 1.
    fn update_window(&mut self, exp_cmd_sn: u32, max_cmd_sn: u32) {
        if sn_lt(max_cmd_sn, exp_cmd_sn.wrapping_sub(1)) {
            return;
        }
        if sn_gt(exp_cmd_sn, self.exp_cmd_sn) {
            self.exp_cmd_sn = exp_cmd_sn;
        }
        if sn_gt(max_cmd_sn, self.max_cmd_sn) {
            self.max_cmd_sn = max_cmd_sn;
        }
    }

    fn on_data_in(&mut self, c: usize, d: &DataIn, data: &[u8]) -> Result<(), ConnFailure> {
        self.update_window(d.exp_cmd_sn, d.max_cmd_sn);
        let Some(slot) = self.data_in_task(d, data.len())? else {
            return Ok(());
        };
        let task = self.slots[slot as usize]
            .task
            .as_mut()
            .expect("data_in_task checked it");
        let start = d.buffer_offset as usize;
        task.buffer[start..start + data.len()].copy_from_slice(data);
        self.data_in_landed(c, d, slot, data.len());
        Ok(())
    }

    /// The live read task a Data-In PDU with `len` data bytes belongs to, or
    /// None for a task that ended meanwhile (its late data is dropped).
    /// Checks that the data fits the task's buffer.
    fn data_in_task(&self, d: &DataIn, len: usize) -> Result<Option<u32>, ConnFailure> {
        let Some(slot) = self.slot_of(d.initiator_task_tag) else {
            return Ok(None);
        };
        let task = self.task(slot).expect("slot_of checked it");
        if !matches!(
            task.kind,
            Kind::Scsi {
                direction: Direction::Read(_),
                ..
            }
        ) {
            return Err(ConnFailure("Data-In for a task that reads nothing".into()));
        }
        let end = d.buffer_offset as usize + len;
        if end > task.buffer.len() {
            return Err(ConnFailure(format!(
                "Data-In ends at byte {end}, past the expected {} bytes",
                task.buffer.len()
            )));
        }
        Ok(Some(slot))
    }

    /// A Data-In PDU's `len` data bytes are in the task's buffer: counts
    /// them, and ends the task when the PDU carries the status (the S bit,
    /// RFC 7143 §11.7).
    fn data_in_landed(&mut self, c: usize, d: &DataIn, slot: u32, len: usize) {
        let Some(task) = self.task_mut(slot) else {
            return;
        };
        task.data_in_bytes = task.data_in_bytes.saturating_add(len as u32);
        if d.status_present {
            self.on_status(c, d.stat_sn, d.exp_cmd_sn, d.max_cmd_sn);
            let data_in_len = self.task(slot).map_or(0, |t| t.data_in_bytes);
            let status = ScsiStatus {
                response: 0,
                status: d.status,
                sense: Vec::new(),
                residual: Residual {
                    overflow: d.overflow,
                    underflow: d.underflow,
                    count: d.residual_count,
                },
                data_in_len,
            };
            self.finish(slot, Outcome::Scsi(status));
        }
    }

    fn on_scsi_response(&mut self, r: &ScsiResponse, data: &[u8]) {
        let Some(slot) = self.slot_of(r.initiator_task_tag) else {
            return;
        };
        // RFC 7143 §11.4.7: SenseLength, then the sense data.
        let sense = match data {
            [hi, lo, rest @ ..] => {
                let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(rest.len());
                rest[..n].to_vec()
            }
            _ => Vec::new(),
        };
        let data_in_len = self.task(slot).map_or(0, |t| t.data_in_bytes);
        let status = ScsiStatus {
            response: r.response,
            status: r.status,
            sense,
            residual: Residual {
                overflow: r.overflow,
                underflow: r.underflow,
                count: r.residual_count,
            },
            data_in_len,
        };
        self.finish(slot, Outcome::Scsi(status));
    }

    fn on_r2t(&mut self, c: usize, r: &R2t) -> Result<(), ConnFailure> {
        self.update_window(r.exp_cmd_sn, r.max_cmd_sn);
        let Some(slot) = self.slot_of(r.initiator_task_tag) else {
            return Ok(());
        };
        let task = self.task(slot).expect("slot_of checked it");
        let Kind::Scsi {
            direction: Direction::Write(edtl),
            ..
        } = task.kind
        else {
            return Err(ConnFailure("R2T for a task that writes nothing".into()));
        };
        if task.conn != Some(c) {
            return Err(ConnFailure(
                "R2T on a connection the task is not allegiant to".into(),
            ));
        }
        let end = u64::from(r.buffer_offset) + u64::from(r.desired_data_transfer_length);
        if r.desired_data_transfer_length == 0 || end > u64::from(edtl) {
            return Err(ConnFailure(format!(
                "R2T for bytes {}..{end} of a {edtl}-byte write",
                r.buffer_offset
            )));
        }
        self.queue_data_out(slot, c, r.target_transfer_tag, r.buffer_offset, end as u32);
        Ok(())
    }

    fn on_nop_in(&mut self, c: usize, n: &NopIn, data: &[u8]) {
        if n.initiator_task_tag != RESERVED_TAG {
            // The answer to our ping.
            self.on_status(c, n.stat_sn, n.exp_cmd_sn, n.max_cmd_sn);
            if let Some(slot) = self.slot_of(n.initiator_task_tag) {
                if self.conns[c].ping.is_some_and(|(s, _)| s == slot) {
                    self.conns[c].ping = None;
                    self.nops.pings_answered += 1;
                }
                self.finish(
                    slot,
                    Outcome::Logout(isoe_wire::pdu::LogoutResponseCode::Closed),
                );
            }
            return;
        }
        // RFC 7143 §11.19.1: an unsolicited NOP-In does not advance StatSN.
        self.update_window(n.exp_cmd_sn, n.max_cmd_sn);
        if n.target_transfer_tag != RESERVED_TAG {
            // The target's ping: echo it (RFC 7143 §11.18).
            self.nops.target_pings_echoed += 1;
            let pdu = Pdu::NopOut(NopOut {
                immediate: true,
                lun: n.lun,
                initiator_task_tag: RESERVED_TAG,
                target_transfer_tag: n.target_transfer_tag,
                cmd_sn: self.cmd_sn,
                exp_stat_sn: self.conns[c].exp_stat_sn,
            });
            let len = data.len() as u32;
            self.push_header(c, &pdu, len);
            if !data.is_empty() {
                let limits = self.conns[c].send_limits;
                let (trailer, trailer_len) = frame::data_trailer(data, &limits);
                let out = &mut self.conns[c].out;
                out.push_bytes(data);
                out.push_bytes(&trailer[..trailer_len]);
            }
        }
    }

    fn on_tmf_done(&mut self, slot: u32, response: tmf::TmfResponse) {
        let Some(Kind::Tmf {
            function,
            lun,
            referenced_tag,
            ..
        }) = self.task(slot).map(|t| &t.kind)
        else {
            return;
        };
        let (function, lun, referenced_tag) = (*function, *lun, *referenced_tag);
        let tmf_cmd_sn = self.task(slot).map_or(0, |t| t.cmd_sn);
        self.finish(slot, Outcome::TaskManagement(response));
        if response != tmf::TmfResponse::Complete {
            return;
        }
        // RFC 7143 §11.5.1: the affected tasks get no response of their
        // own; a function acts on the commands with a CmdSN below its own,
        // so those sent after it are answered as ever.
        let victims: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| {
                let tag = self.tag(s);
                match self.task(s) {
                    Some(t)
                        if t.finished.is_none()
                            && t.conn.is_some()
                            && sn_lt(t.cmd_sn, tmf_cmd_sn) =>
                    {
                        match (&t.kind, function) {
                            (Kind::Scsi { .. }, tmf::TmfFunction::AbortTask) => {
                                tag == referenced_tag
                            }
                            (
                                Kind::Scsi { lun: l, .. },
                                tmf::TmfFunction::AbortTaskSet
                                | tmf::TmfFunction::ClearTaskSet
                                | tmf::TmfFunction::LogicalUnitReset,
                            ) => *l == lun,
                            (
                                Kind::Scsi { .. },
                                tmf::TmfFunction::TargetWarmReset
                                | tmf::TmfFunction::TargetColdReset,
                            ) => true,
                            _ => false,
                        }
                    }
                    _ => false,
                }
            })
            .collect();
        for s in victims {
            self.finish(s, Outcome::Failed(TaskError::Aborted));
        }
    }

    // ---- time and failure ----------------------------------------------

    /// Keepalive pings; returns the connections whose ping went unanswered.
    pub fn handle_tick(&mut self, now: Instant) -> Vec<usize> {
        let mut dead = Vec::new();
        for c in 0..self.conns.len() {
            let conn = &self.conns[c];
            if !conn.alive {
                continue;
            }
            match conn.ping {
                Some((_, sent)) if now.duration_since(sent) > self.keepalive.timeout => {
                    dead.push(c)
                }
                Some(_) => {}
                None => {
                    if let Some(interval) = self.keepalive.interval {
                        if now.duration_since(conn.last_rx) >= interval {
                            self.send_ping(c, now);
                        }
                    }
                }
            }
        }
        dead
    }

    /// ERL 0 (RFC 7143 §7.1.5, §6.3.5): a failed connection fails the
    /// session. Every connection is dropped; SCSI tasks go back to the
    /// waiting queue, in CmdSN order, to be reissued once the session is
    /// reinstated; other tasks end.
    pub fn connections_lost(&mut self) {
        let mut released = Vec::new();
        for conn in &mut self.conns {
            conn.out.clear(|slot| released.push(slot));
        }
        for slot in released {
            self.release_piece(slot);
        }
        self.conns.clear();
        self.conns_epoch = self.conns_epoch.wrapping_add(1);
        let mut reissue: Vec<(u32, u32)> = Vec::new();
        for s in 0..self.slots.len() as u32 {
            let Some(task) = self.task_mut(s) else {
                continue;
            };
            if task.finished.is_some() {
                continue;
            }
            let was_sent = task.conn.take().is_some();
            match task.kind {
                Kind::Scsi { .. } if was_sent => reissue.push((task.cmd_sn, s)),
                Kind::Scsi { .. } => {}
                Kind::Logout => {
                    // The session is gone, which is what the logout asked for.
                    self.waiting.retain(|w| *w != s);
                    self.finish(s, Outcome::Logout(logout::LogoutResponseCode::Closed));
                }
                Kind::Tmf { .. } => self.finish(
                    s,
                    Outcome::Failed(TaskError::SessionFailed(
                        "the connection failed during task management".into(),
                    )),
                ),
                Kind::Ping => self.finish(
                    s,
                    Outcome::Logout(isoe_wire::pdu::LogoutResponseCode::Closed),
                ),
            }
        }
        // Oldest first, ahead of tasks never sent.
        reissue.sort_by(|a, b| {
            if sn_lt(a.0, b.0) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
        for (_, s) in reissue.into_iter().rev() {
            self.waiting.push_front(s);
        }
    }

    /// Takes every SCSI command out of the session, as the commands they
    /// were, with their buffers and tokens, oldest first (the order
    /// [`SessionCore::connections_lost`] left them in): a multipath LU sends
    /// them through another path instead of waiting for this one to be
    /// reinstated. Call it after `connections_lost`, when nothing is on a
    /// connection; a task still on one stays.
    pub fn take_commands(&mut self, out: &mut Vec<(u64, Command)>) {
        for _ in 0..self.waiting.len() {
            let Some(slot) = self.waiting.pop_front() else {
                break;
            };
            let movable = self.task(slot).is_some_and(|t| {
                t.conn.is_none()
                    && t.queued_pieces == 0
                    && t.finished.is_none()
                    && matches!(t.kind, Kind::Scsi { .. })
            });
            if !movable {
                self.waiting.push_back(slot);
                continue;
            }
            let task = self.slots[slot as usize]
                .task
                .take()
                .expect("checked above");
            self.free.push(slot);
            if let Kind::Scsi {
                lun,
                cdb,
                direction,
                attr,
                external,
                immediate,
            } = task.kind
            {
                out.push((
                    task.token,
                    Command {
                        lun,
                        cdb,
                        direction,
                        attr: TaskAttr::from_code(attr),
                        buffer: task.buffer,
                        external,
                        immediate,
                    },
                ));
            }
        }
    }

    /// Takes the connections, parameters and window of `fresh`, a session
    /// just logged in to reinstate this one; the tasks waiting here are
    /// reissued on them.
    pub fn adopt(&mut self, fresh: SessionCore) {
        debug_assert!(self.conns.is_empty(), "adopting while connections remain");
        self.params = fresh.params;
        self.conns = fresh.conns;
        self.cmd_sn = fresh.cmd_sn;
        self.exp_cmd_sn = fresh.exp_cmd_sn;
        self.max_cmd_sn = fresh.max_cmd_sn;
    }

    /// Takes `fresh` as [`SessionCore::adopt`] does, for a session that
    /// had failed for good ([`SessionCore::fail`]): it takes commands
    /// again.
    pub fn revive(&mut self, fresh: SessionCore) {
        debug_assert!(self.failed.is_some(), "reviving a session that lives");
        debug_assert_eq!(self.tasks_in_flight(), 0, "a failed session holds no task");
        self.adopt(fresh);
        self.failed = None;
    }

    /// The session is reinstated: a new window starts at `cmd_sn`.
    pub fn reinstated(&mut self, cmd_sn: u32, exp_cmd_sn: u32, max_cmd_sn: u32) {
        self.cmd_sn = cmd_sn;
        self.exp_cmd_sn = exp_cmd_sn;
        self.max_cmd_sn = max_cmd_sn;
    }

    /// Reconnection gave up: every task ends with `why`.
    pub fn fail(&mut self, why: &str) {
        self.connections_lost();
        self.failed = Some(why.to_string());
        self.waiting.clear();
        for s in 0..self.slots.len() as u32 {
            self.finish(
                s,
                Outcome::Failed(TaskError::SessionFailed(why.to_string())),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{sent, session};
    use super::RUN_SLACK;
    use crate::command::Command;
    use isoe_wire::pdu::Pdu;

    #[test]
    fn a_lost_sessions_commands_are_taken_back_oldest_first_with_their_buffers() {
        let mut core = session(1, false);
        core.submit(Command::write(0, &[0x8a], vec![7u8; 512]), 10)
            .unwrap();
        core.submit(Command::read(0, &[0x88], 512), 11).unwrap();
        core.pump();
        assert_eq!(sent(&mut core, 0).len(), 2);
        // One more, never sent.
        core.submit(Command::read(3, &[0x88, 1], 1024), 12).unwrap();
        core.connections_lost();
        let mut taken = Vec::new();
        core.take_commands(&mut taken);
        let tokens: Vec<u64> = taken.iter().map(|(t, _)| *t).collect();
        assert_eq!(tokens, [10, 11, 12]);
        let (_, write) = &taken[0];
        assert_eq!(write.direction, crate::command::Direction::Write(512));
        assert_eq!(write.buffer, vec![7u8; 512]);
        assert_eq!(write.cdb[0], 0x8a);
        let (_, read) = &taken[2];
        assert_eq!(read.lun, isoe_wire::pdu::Lun::from_number(3));
        assert_eq!(read.cdb[..2], [0x88, 1]);
        assert_eq!(read.direction, crate::command::Direction::Read(1024));
        assert_eq!(core.tasks_in_flight(), 0);
        let mut done = Vec::new();
        core.drain_completions(&mut done);
        assert!(done.is_empty(), "nothing is answered: they went elsewhere");
    }

    #[test]
    fn consecutive_commands_go_in_runs_on_one_connection_and_the_load_stays_balanced() {
        let mut core = session(4, false);
        for token in 0..40 {
            core.submit(Command::read(0, &[0x88], 512), token).unwrap();
        }
        core.pump();
        let mut counts = Vec::new();
        for c in 0..4 {
            let cmd_sns: Vec<u32> = sent(&mut core, c)
                .iter()
                .map(|pdu| match pdu {
                    Pdu::ScsiCommand(cmd) => cmd.cmd_sn,
                    other => panic!("a command, not {other:?}"),
                })
                .collect();
            // Each connection carries runs of consecutive CmdSNs, the
            // first RUN_SLACK + 1 long.
            let runs = 1 + cmd_sns.windows(2).filter(|w| w[1] != w[0] + 1).count();
            assert!(
                cmd_sns.len() >= (RUN_SLACK + 1) as usize && runs <= 2,
                "connection {c} got CmdSNs {cmd_sns:?}"
            );
            counts.push(cmd_sns.len() as u32);
        }
        assert_eq!(counts.iter().sum::<u32>(), 40);
        let spread = counts.iter().max().unwrap() - counts.iter().min().unwrap();
        assert!(
            spread <= RUN_SLACK + 1,
            "balanced within the slack: {counts:?}"
        );
    }
}
