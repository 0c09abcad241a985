//! A multipath logical unit: one LU reached through several paths (each
//! path one session, to one portal), which follows ALUA (SPC-5 5.16) the
//! way Linux dm-multipath with the `alua` handler does, with no I/O.
//!
//! [`MultipathCore`] decides; the engine (`engine/multipath.rs`) moves the
//! bytes. Through each path it reads VPD page 83h (the LU's designator, to
//! refuse a path to another LU, and the path's target port group and
//! relative target port) and then REPORT TARGET PORT GROUPS through that
//! same path (a gateway may know only its own groups), and sends each
//! command through an active/optimized path, else an active/non-optimized
//! one, never a standby, unavailable, offline or transitioning one; among
//! paths of one rank, PREF first, then the one with fewer commands
//! outstanding.
//!
//! Commands come back through the path they went on. The sense by which a
//! path says it cannot serve them (see [`Verdict`]) sends them again, after
//! the states are read anew, or a short wait, or through another path. A
//! path whose connection is lost gives back its outstanding commands (the
//! session core takes them out, [`crate::session::SessionCore::take_commands`]),
//! and they go through another path at once; the path is logged in again
//! in the background and probed afresh before it serves. A command that
//! finds no path for [`MultipathOptions::failover_timeout`] from its first
//! trouble fails with [`TaskError::NoPath`], which says what each path was.
//!
//! Why a write may be sent again through another path: the paths reach one
//! LU, so the reissued write puts the same data at the same LBAs. The
//! caller had no answer for it, so it has issued nothing it orders after
//! it (SCSI orders nothing among SIMPLE tasks in flight). The first path's
//! copy either ran before its gateway went away or never will: a gateway
//! that is gone (its process killed, the kernel closed its sockets) runs
//! nothing more, and a gateway cut off from the network has ended its
//! commands long before the initiator, which needs a keepalive timeout
//! (seconds) to call the path dead, gives up on it; a store write still
//! running past that could, in principle, land after the reissued one.
//! Commands that are not idempotent (COMPARE AND WRITE, reservations) are
//! sent again all the same, as dm-multipath does; their caller must read
//! their outcome with that in mind.
//!
//! The cost: the LU keeps a table of its commands (a slot per command in
//! flight, reused; no allocation per command once warm) and chooses a path
//! per command by looking at each path's rank. A session that is not a path
//! of a multipath LU pays nothing for any of this.

mod alua;
#[cfg(test)]
mod tests;

pub use alua::{
    classify, parse_device_identification, parse_report_target_port_groups, AccessState, LuName,
    PathIdentity, PortGroup, Verdict,
};

use crate::cdb;
use crate::command::{
    describe_status, Command, Completion, Direction, Outcome, TaskAttr, TaskError,
};
use crate::config::Keepalive;
use isoe_wire::pdu::Lun;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Commands one multipath LU holds at once, as one session does.
pub const LU_TASKS_MAX: usize = crate::session::TASKS_MAX;
/// The bit of the tokens of the probes the LU sends through its paths;
/// its own commands go with their slot number, below it.
const PROBE_TOKEN: u64 = 1 << 62;
/// Probe: INQUIRY, VPD page 83h.
const PROBE_VPD83: u64 = 1;
/// Probe: REPORT TARGET PORT GROUPS.
const PROBE_RTPG: u64 = 2;
/// Times a probe is asked again after a unit attention, BUSY or TASK SET FULL.
const PROBE_TRIES: u8 = 5;
/// Allocation length of the VPD page 83h probe.
const VPD83_LEN: u16 = 1024;
/// Allocation length of the REPORT TARGET PORT GROUPS probe.
const RTPG_LEN: u32 = 8192;
/// A path between states is asked for them again this often.
pub const TRANSITION_POLL: Duration = Duration::from_millis(200);
/// The first wait before a command refused with 02/04/0A is sent again.
pub const TRANSITION_RETRY: Duration = Duration::from_millis(100);
/// The worst rank of an active/optimized path ([`Path::rank`]).
const RANK_OPTIMIZED_MAX: u8 = 1;
/// The longest wait between two sendings of one command.
const RETRY_DELAY_MAX: Duration = Duration::from_secs(1);

/// How a multipath LU behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultipathOptions {
    /// How long a command may wait for a path that serves it, from the
    /// moment its path was lost or refused it, before it fails with
    /// [`TaskError::NoPath`]. 10 s by default.
    pub failover_timeout: Duration,
    /// The keepalive of each path's session, replacing the session's own:
    /// a path that stops answering is found dead within `interval +
    /// timeout` (2 s + 5 s by default), so that its commands move on well
    /// within 30 s.
    pub path_keepalive: Keepalive,
}

impl Default for MultipathOptions {
    fn default() -> Self {
        MultipathOptions {
            failover_timeout: Duration::from_secs(10),
            path_keepalive: Keepalive {
                interval: Some(Duration::from_secs(2)),
                timeout: Duration::from_secs(5),
            },
        }
    }
}

/// Where a path stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStatus {
    /// Logged in; VPD page 83h and REPORT TARGET PORT GROUPS are being read.
    Probing,
    /// Its state is known (serving or not, as the state says).
    Ready,
    /// Its connection was lost; it is being logged in again.
    Down,
    /// Out for good: it reaches another LU, its probe failed, or its
    /// login is refused.
    Failed,
}

impl PathStatus {
    /// A word for reports.
    pub fn name(self) -> &'static str {
        match self {
            PathStatus::Probing => "probing",
            PathStatus::Ready => "ready",
            PathStatus::Down => "down",
            PathStatus::Failed => "failed",
        }
    }
}

/// One path as the LU sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathReport {
    /// `iscsi://portal/target/lun`.
    pub label: String,
    /// Where it stands.
    pub status: PathStatus,
    /// Its target port group, when VPD page 83h or REPORT TARGET PORT
    /// GROUPS named one.
    pub port_group: Option<u16>,
    /// Its relative target port.
    pub relative_port: Option<u16>,
    /// Its group's state, as last read through it.
    pub state: Option<AccessState>,
    /// PREF of its group.
    pub preferred: bool,
    /// The caller's commands answered through it.
    pub commands: u64,
    /// Times its connection was lost.
    pub downs: u64,
    /// Why it is down or failed (or was, last).
    pub reason: Option<String>,
}

/// What the LU did besides sending commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MultipathStats {
    /// Times a path carrying commands became unusable (lost, or refusing
    /// with an ALUA state), so that commands went elsewhere or waited.
    pub failovers: u64,
    /// Commands sent again through another path after theirs was lost.
    pub reissued: u64,
    /// Commands sent again after an ALUA sense (states changed,
    /// transitioning, standby, unavailable).
    pub retried: u64,
    /// Commands failed for want of a path within the failover time.
    pub expired: u64,
    /// The longest time without an answered command around a failover:
    /// from the last good answer before it to the first one after it.
    pub failover_gap_max: Duration,
    /// The same, for the last failover that has ended.
    pub failover_gap_last: Option<Duration>,
}

/// A command for the driver to submit to path `path`'s session, with `token`.
#[derive(Debug)]
pub struct Dispatch {
    /// The path (its index in the order given).
    pub path: usize,
    /// The token to submit it with; its completion comes back with it.
    pub token: u64,
    /// The command.
    pub command: Command,
}

#[derive(Debug)]
struct Path {
    label: String,
    /// The LU's number behind this path (gateways may number it apart).
    lun: u16,
    status: PathStatus,
    identity: Option<LuName>,
    relative_port: Option<u16>,
    port_group: Option<u16>,
    state: Option<AccessState>,
    preferred: bool,
    /// A REPORT TARGET PORT GROUPS is out to read the state again.
    refreshing: bool,
    /// Sendings of the probe under way.
    tries: u8,
    /// Transitioning: when to read the state again.
    poll_at: Option<Instant>,
    /// The LU's commands outstanding on it.
    outstanding: u32,
    commands: u64,
    downs: u64,
    reason: Option<String>,
}

impl Path {
    fn new(label: String, lun: u16) -> Path {
        Path {
            label,
            lun,
            status: PathStatus::Probing,
            identity: None,
            relative_port: None,
            port_group: None,
            state: None,
            preferred: false,
            refreshing: false,
            tries: 0,
            poll_at: None,
            outstanding: 0,
            commands: 0,
            downs: 0,
            reason: None,
        }
    }

    /// Lower is better; None: not for I/O now.
    fn rank(&self) -> Option<u8> {
        if self.status != PathStatus::Ready || self.refreshing {
            return None;
        }
        let base = match self.state? {
            AccessState::ActiveOptimized => 0,
            AccessState::ActiveNonOptimized => 2,
            _ => return None,
        };
        Some(base + u8::from(!self.preferred))
    }

    /// "iscsi://… (group 2, standby)".
    fn describe(&self) -> String {
        let group = self
            .port_group
            .map_or_else(String::new, |g| format!("group {g}, "));
        let what = match (self.status, self.state) {
            (PathStatus::Ready, Some(state)) if self.refreshing => {
                format!("{state}, its state being read again")
            }
            (PathStatus::Ready, Some(state)) => state.to_string(),
            (status, _) => status.name().to_string(),
        };
        match &self.reason {
            Some(why) if self.status != PathStatus::Ready => {
                format!("{} ({group}{what}: {why})", self.label)
            }
            _ => format!("{} ({group}{what})", self.label),
        }
    }
}

#[derive(Debug)]
struct LuTask {
    /// The caller's token.
    token: u64,
    cdb: [u8; 16],
    direction: Direction,
    attr: TaskAttr,
    /// [`Command::external`].
    external: Option<u32>,
    /// The path it is outstanding on.
    path: Option<usize>,
    /// Its buffer while it waits here.
    buffer: Vec<u8>,
    /// When its path first failed it; None while all is well.
    trouble_since: Option<Instant>,
    /// Waiting: not to be sent before this.
    not_before: Option<Instant>,
    /// Sendings after a path's refusal.
    retries: u32,
}

/// The state of one multipath LU.
#[derive(Debug)]
pub struct MultipathCore {
    /// What its completions carry as `session`.
    index: usize,
    options: MultipathOptions,
    paths: Vec<Path>,
    /// The LU's name, once the paths agreed on it.
    identity: Option<LuName>,
    tasks: Vec<Option<LuTask>>,
    free: Vec<u32>,
    /// Commands waiting for a path, or for their time to be sent again.
    held: VecDeque<u32>,
    dispatches: VecDeque<Dispatch>,
    completions: Vec<Completion>,
    /// The path the last command went through.
    current: Option<usize>,
    stats: MultipathStats,
    /// The last good answer's time.
    last_good: Option<Instant>,
    /// A failover is under way: the last good answer before it.
    gap_from: Option<Instant>,
}

impl MultipathCore {
    /// An LU through `paths`, each a label (`iscsi://…`) and the LU's
    /// number behind it (each path's session already logged in); its
    /// completions carry `index` as their session. Each path's VPD page
    /// 83h probe is queued at once.
    pub fn new(
        index: usize,
        paths: Vec<(String, u16)>,
        options: MultipathOptions,
    ) -> MultipathCore {
        let mut core = MultipathCore {
            index,
            options,
            paths: paths
                .into_iter()
                .map(|(label, lun)| Path::new(label, lun))
                .collect(),
            identity: None,
            tasks: Vec::new(),
            free: Vec::new(),
            held: VecDeque::new(),
            dispatches: VecDeque::new(),
            completions: Vec::new(),
            current: None,
            stats: MultipathStats::default(),
            last_good: None,
            gap_from: None,
        };
        for p in 0..core.paths.len() {
            core.probe(p, PROBE_VPD83);
        }
        core
    }

    /// The options it runs with.
    pub fn options(&self) -> &MultipathOptions {
        &self.options
    }

    /// Its paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// The LU's name, once [`MultipathCore::check_paths`] accepted them.
    pub fn identity(&self) -> Option<&LuName> {
        self.identity.as_ref()
    }

    /// True while a path is being probed.
    pub fn probing(&self) -> bool {
        self.paths.iter().any(|p| p.status == PathStatus::Probing)
    }

    /// Commands taken and not yet answered.
    pub fn tasks_in_flight(&self) -> usize {
        self.tasks.len() - self.free.len()
    }

    /// Once every path's first probe ended: checks that every path
    /// answered, that all reach the same LU, and that one serves I/O; the
    /// LU takes its name from them. Err says which path is wrong, and how.
    pub fn check_paths(&mut self) -> Result<(), String> {
        for p in &self.paths {
            match p.status {
                PathStatus::Ready => {}
                PathStatus::Probing => {
                    return Err(format!(
                        "{}: no answer to INQUIRY (VPD page 83h) and REPORT TARGET PORT GROUPS",
                        p.label
                    ))
                }
                PathStatus::Down | PathStatus::Failed => {
                    return Err(format!(
                        "{}: {}",
                        p.label,
                        p.reason.as_deref().unwrap_or("the path failed")
                    ))
                }
            }
        }
        let first = &self.paths[0];
        let name = first
            .identity
            .clone()
            .ok_or_else(|| format!("{}: VPD page 83h named no logical unit", first.label))?;
        for p in &self.paths[1..] {
            if p.identity.as_ref() != Some(&name) {
                let theirs = p
                    .identity
                    .as_ref()
                    .map_or_else(|| "nothing".to_string(), ToString::to_string);
                return Err(format!(
                    "{} and {} are not paths of one logical unit: VPD page 83h names {name} \
                     through the first and {theirs} through the second",
                    first.label, p.label
                ));
            }
        }
        if self.choose().is_none() {
            return Err(format!(
                "no path serves I/O (none is active/optimized or active/non-optimized): {}",
                self.describe_paths()
            ));
        }
        self.identity = Some(name);
        Ok(())
    }

    /// What each path is now, for reports.
    pub fn paths(&self) -> Vec<PathReport> {
        self.paths
            .iter()
            .map(|p| PathReport {
                label: p.label.clone(),
                status: p.status,
                port_group: p.port_group,
                relative_port: p.relative_port,
                state: p.state,
                preferred: p.preferred,
                commands: p.commands,
                downs: p.downs,
                reason: p.reason.clone(),
            })
            .collect()
    }

    /// Counters so far.
    pub fn stats(&self) -> MultipathStats {
        self.stats
    }

    // ---- commands --------------------------------------------------

    /// Takes a command; it goes through the best path there is, or waits
    /// for one (see [`MultipathOptions::failover_timeout`]). Its LUN is
    /// replaced by the LU's number behind the path it goes through.
    pub fn submit(&mut self, command: Command, token: u64) -> Result<(), (TaskError, Command)> {
        if self.paths.iter().all(|p| p.status == PathStatus::Failed) {
            let why = format!("every path failed: {}", self.describe_paths());
            return Err((TaskError::NoPath(why), command));
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.tasks.len() < LU_TASKS_MAX => {
                self.tasks.push(None);
                (self.tasks.len() - 1) as u32
            }
            None => {
                let why = format!("more than {LU_TASKS_MAX} commands in flight");
                return Err((TaskError::Invalid(why), command));
            }
        };
        let Command {
            cdb,
            direction,
            attr,
            buffer,
            external,
            ..
        } = command;
        self.tasks[slot as usize] = Some(LuTask {
            token,
            cdb,
            direction,
            attr,
            external,
            path: None,
            buffer: Vec::new(),
            trouble_since: None,
            not_before: None,
            retries: 0,
        });
        match self.choose() {
            Some(p) => self.send(slot, p, buffer),
            None => self.hold(slot, buffer),
        }
        Ok(())
    }

    /// The next command for the driver to submit to a path's session.
    pub fn poll_dispatch(&mut self) -> Option<Dispatch> {
        self.dispatches.pop_front()
    }

    /// The path's session would not take `command` (sent as `token`):
    /// the command fails with `error`, a probe fails its path.
    pub fn dispatch_refused(
        &mut self,
        path: usize,
        token: u64,
        command: Command,
        error: TaskError,
        now: Instant,
    ) {
        if token & PROBE_TOKEN != 0 {
            self.disqualify(path, format!("its session refused a probe: {error}"), now);
            self.release_held(now);
            return;
        }
        let slot = token as u32;
        if self.task_on(slot, path).is_none() {
            return;
        }
        if let Some(p) = self.paths.get_mut(path) {
            p.outstanding = p.outstanding.saturating_sub(1);
        }
        self.finish(slot, Outcome::Failed(error), command.buffer, None);
    }

    /// A completion from path `path`'s session.
    pub fn handle_completion(&mut self, path: usize, c: Completion, now: Instant) {
        if c.token & PROBE_TOKEN != 0 {
            self.on_probe(path, c, now);
            return;
        }
        let slot = c.token as u32;
        if self.task_on(slot, path).is_none() {
            return;
        }
        if let Some(task) = self.tasks[slot as usize].as_mut() {
            task.path = None;
        }
        let p = &mut self.paths[path];
        p.outstanding = p.outstanding.saturating_sub(1);
        match classify(&c.outcome) {
            Verdict::Done => self.finish(slot, c.outcome, c.buffer, Some((path, now))),
            Verdict::StatesChanged => {
                self.refresh_all();
                self.retry(slot, c.buffer, now, Duration::ZERO);
            }
            Verdict::Transitioning => {
                let p = &mut self.paths[path];
                p.state = Some(AccessState::Transitioning);
                p.poll_at = Some(now + TRANSITION_POLL);
                self.unusable(path, now);
                self.retry(slot, c.buffer, now, TRANSITION_RETRY);
            }
            Verdict::Inaccessible(state) => {
                self.paths[path].state = Some(state);
                self.unusable(path, now);
                self.refresh_all();
                self.retry(slot, c.buffer, now, Duration::ZERO);
            }
        }
    }

    /// Moves what was answered to `out`.
    pub fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.completions);
    }

    // ---- paths -----------------------------------------------------

    /// Path `path`'s connection was lost (`why`); `commands` are the ones
    /// its session held, as [`crate::session::SessionCore::take_commands`]
    /// gave them back. They go through another path, or wait for one.
    pub fn path_lost(
        &mut self,
        path: usize,
        why: &str,
        commands: impl IntoIterator<Item = (u64, Command)>,
        now: Instant,
    ) {
        self.unusable(path, now);
        let p = &mut self.paths[path];
        p.status = PathStatus::Down;
        p.downs += 1;
        p.reason = Some(format!("connection lost: {why}"));
        p.refreshing = false;
        p.poll_at = None;
        p.outstanding = 0;
        // Commands chosen for it but not yet handed to its session come
        // back too: its session will not send them.
        let mut queued = Vec::new();
        let mut i = 0;
        while i < self.dispatches.len() {
            if self.dispatches[i].path == path {
                queued.extend(self.dispatches.remove(i).map(|d| (d.token, d.command)));
            } else {
                i += 1;
            }
        }
        for (token, command) in commands.into_iter().chain(queued) {
            if token & PROBE_TOKEN != 0 {
                continue;
            }
            let slot = token as u32;
            let Some(task) = self.task_on(slot, path) else {
                continue;
            };
            task.path = None;
            task.trouble_since.get_or_insert(now);
            task.buffer = command.buffer;
            self.stats.reissued += 1;
            self.held.push_back(slot);
        }
        self.release_held(now);
    }

    /// Path `path` is logged in again: it is probed before it serves.
    pub fn path_reconnected(&mut self, path: usize) {
        let p = &mut self.paths[path];
        p.status = PathStatus::Probing;
        p.refreshing = false;
        p.tries = 0;
        p.outstanding = 0;
        self.probe(path, PROBE_VPD83);
    }

    /// Path `path` cannot be logged in again (`why`): out for good.
    pub fn path_failed(&mut self, path: usize, why: &str, now: Instant) {
        self.disqualify(path, why.to_string(), now);
        self.release_held(now);
    }

    /// Time passes: states of transitioning paths are read again, waiting
    /// commands are sent or, past the failover time, failed.
    pub fn handle_tick(&mut self, now: Instant) {
        for p in 0..self.paths.len() {
            let path = &mut self.paths[p];
            if path.status == PathStatus::Ready
                && !path.refreshing
                && path.poll_at.is_some_and(|t| t <= now)
            {
                path.poll_at = None;
                path.refreshing = true;
                path.tries = 0;
                self.probe(p, PROBE_RTPG);
            }
        }
        self.release_held(now);
    }

    /// When [`MultipathCore::handle_tick`] has something to do next, if it does.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let polls = self.paths.iter().filter_map(|p| p.poll_at);
        let held = self.held.iter().filter_map(|&s| {
            let task = self.tasks[s as usize].as_ref()?;
            let deadline = task.trouble_since? + self.options.failover_timeout;
            Some(task.not_before.map_or(deadline, |t| t.min(deadline)))
        });
        polls.chain(held).min()
    }

    // ---- inside ----------------------------------------------------

    /// The task in `slot` if it is outstanding on `path`.
    fn task_on(&mut self, slot: u32, path: usize) -> Option<&mut LuTask> {
        self.tasks
            .get_mut(slot as usize)?
            .as_mut()
            .filter(|t| t.path == Some(path))
    }

    /// The path for the next command: the best rank, then the fewest
    /// commands outstanding, then the first given. While the states are
    /// read again, only an active/optimized path is taken at once: another
    /// path being asked may turn out optimized.
    fn choose(&self) -> Option<usize> {
        let mut best: Option<(u8, u32, usize)> = None;
        let mut refreshing = false;
        for (i, p) in self.paths.iter().enumerate() {
            refreshing |= p.refreshing;
            let Some(rank) = p.rank() else { continue };
            if best.is_none_or(|(r, o, _)| (rank, p.outstanding) < (r, o)) {
                best = Some((rank, p.outstanding, i));
            }
        }
        match best {
            Some((rank, _, _)) if refreshing && rank > RANK_OPTIMIZED_MAX => None,
            _ => best.map(|(_, _, i)| i),
        }
    }

    fn send(&mut self, slot: u32, path: usize, buffer: Vec<u8>) {
        let Some(task) = self.tasks[slot as usize].as_mut() else {
            return;
        };
        task.path = Some(path);
        task.not_before = None;
        let command = Command {
            lun: Lun::from_number(self.paths[path].lun),
            cdb: task.cdb,
            direction: task.direction,
            attr: task.attr,
            buffer,
            external: task.external,
            // Failed over from path to path: in CmdSN order on each.
            immediate: false,
        };
        self.paths[path].outstanding += 1;
        self.current = Some(path);
        self.dispatches.push_back(Dispatch {
            path,
            token: u64::from(slot),
            command,
        });
    }

    fn hold(&mut self, slot: u32, buffer: Vec<u8>) {
        if let Some(task) = self.tasks[slot as usize].as_mut() {
            task.buffer = buffer;
            self.held.push_back(slot);
        }
    }

    /// A path refused the command: it waits `wait` at least (longer each
    /// time it is refused again), then goes through the best path there is.
    fn retry(&mut self, slot: u32, buffer: Vec<u8>, now: Instant, wait: Duration) {
        let Some(task) = self.tasks[slot as usize].as_mut() else {
            return;
        };
        task.trouble_since.get_or_insert(now);
        task.retries += 1;
        let wait = wait.max(backoff(task.retries));
        task.not_before = (!wait.is_zero()).then(|| now + wait);
        self.stats.retried += 1;
        self.hold(slot, buffer);
        self.release_held(now);
    }

    /// Sends the waiting commands whose time has come while a path serves;
    /// fails those that waited past the failover time.
    fn release_held(&mut self, now: Instant) {
        let all_failed = self.paths.iter().all(|p| p.status == PathStatus::Failed);
        for _ in 0..self.held.len() {
            let Some(slot) = self.held.pop_front() else {
                break;
            };
            let Some(task) = self.tasks[slot as usize].as_mut() else {
                continue;
            };
            let since = *task.trouble_since.get_or_insert(now);
            let waited = now.saturating_duration_since(since);
            if all_failed || waited >= self.options.failover_timeout {
                let buffer = std::mem::take(&mut task.buffer);
                let why = if all_failed {
                    format!("every path failed: {}", self.describe_paths())
                } else {
                    format!(
                        "none served it within {:.1} s: {}",
                        self.options.failover_timeout.as_secs_f64(),
                        self.describe_paths()
                    )
                };
                self.stats.expired += 1;
                self.finish(slot, Outcome::Failed(TaskError::NoPath(why)), buffer, None);
                continue;
            }
            if task.not_before.is_some_and(|t| t > now) {
                self.held.push_back(slot);
                continue;
            }
            match self.choose() {
                Some(p) => {
                    let buffer = self.tasks[slot as usize]
                        .as_mut()
                        .map(|t| std::mem::take(&mut t.buffer))
                        .unwrap_or_default();
                    self.send(slot, p, buffer);
                }
                None => self.held.push_back(slot),
            }
        }
    }

    /// Ends the task in `slot` with `outcome`; `through` is the path that
    /// answered and when.
    fn finish(
        &mut self,
        slot: u32,
        outcome: Outcome,
        buffer: Vec<u8>,
        through: Option<(usize, Instant)>,
    ) {
        let Some(task) = self.tasks[slot as usize].take() else {
            return;
        };
        self.free.push(slot);
        if let Some((path, now)) = through {
            self.paths[path].commands += 1;
            if matches!(&outcome, Outcome::Scsi(s) if s.is_good()) {
                if let Some(from) = self.gap_from.take() {
                    let gap = now.saturating_duration_since(from);
                    self.stats.failover_gap_last = Some(gap);
                    self.stats.failover_gap_max = self.stats.failover_gap_max.max(gap);
                }
                self.last_good = Some(now);
            }
        }
        self.completions.push(Completion {
            session: self.index,
            token: task.token,
            outcome,
            buffer,
        });
    }

    /// Path `path` serves no more I/O: a failover when it carried commands
    /// or was the one in use.
    fn unusable(&mut self, path: usize, now: Instant) {
        let p = &self.paths[path];
        if p.outstanding > 0 || self.current == Some(path) {
            self.stats.failovers += 1;
            if self.current == Some(path) {
                self.current = None;
            }
            if self.gap_from.is_none() {
                self.gap_from = Some(self.last_good.unwrap_or(now));
            }
        }
    }

    /// Out for good, with `why`.
    fn disqualify(&mut self, path: usize, why: String, now: Instant) {
        self.unusable(path, now);
        let p = &mut self.paths[path];
        p.status = PathStatus::Failed;
        p.refreshing = false;
        p.poll_at = None;
        p.reason = Some(why);
    }

    /// Reads every serving path's state again (SPC-5 5.16.2.6: after a
    /// state change, REPORT TARGET PORT GROUPS).
    fn refresh_all(&mut self) {
        for p in 0..self.paths.len() {
            let path = &mut self.paths[p];
            if path.status == PathStatus::Ready && !path.refreshing {
                path.refreshing = true;
                path.tries = 0;
                self.probe(p, PROBE_RTPG);
            }
        }
    }

    fn probe(&mut self, path: usize, step: u64) {
        let lun = self.paths[path].lun;
        let command = match step {
            PROBE_VPD83 => Command::read(
                lun,
                &cdb::inquiry(Some(0x83), VPD83_LEN),
                u32::from(VPD83_LEN),
            ),
            _ => Command::read(lun, &cdb::report_target_port_groups(RTPG_LEN), RTPG_LEN),
        };
        self.dispatches.push_back(Dispatch {
            path,
            token: PROBE_TOKEN | (path as u64) << 8 | step,
            command,
        });
    }

    fn on_probe(&mut self, path: usize, c: Completion, now: Instant) {
        let step = c.token & 0xff;
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        let current = match p.status {
            PathStatus::Probing => true,
            PathStatus::Ready => p.refreshing && step == PROBE_RTPG,
            PathStatus::Down | PathStatus::Failed => false,
        };
        if !current {
            return;
        }
        let what = if step == PROBE_VPD83 {
            "INQUIRY (VPD page 83h)"
        } else {
            "REPORT TARGET PORT GROUPS"
        };
        let status = match &c.outcome {
            Outcome::Scsi(status) => status,
            other => {
                let why = match other {
                    Outcome::Failed(e) => e.to_string(),
                    other => format!("{other:?}"),
                };
                self.disqualify(path, format!("{what} through it failed: {why}"), now);
                self.release_held(now);
                return;
            }
        };
        if status.is_good() {
            let len = (status.data_in_len as usize).min(c.buffer.len());
            let data = &c.buffer[..len];
            if step == PROBE_VPD83 {
                self.on_identity(path, data, now);
            } else {
                self.on_port_groups(path, data, now);
            }
        } else if alua::retry_probe(status) && p.tries < PROBE_TRIES {
            p.tries += 1;
            self.probe(path, step);
        } else if step == PROBE_RTPG && alua::illegal_request(status) {
            // No ALUA: every path serves alike.
            p.state = Some(AccessState::ActiveOptimized);
            p.preferred = false;
            self.settled(path, now);
        } else {
            let why = describe_status(status);
            self.disqualify(path, format!("{what} through it failed: {why}"), now);
            self.release_held(now);
        }
    }

    fn on_identity(&mut self, path: usize, data: &[u8], now: Instant) {
        match parse_device_identification(data) {
            Ok(id) => {
                if let Some(name) = &self.identity {
                    if *name != id.lu {
                        let why = format!(
                            "it now reaches another logical unit: VPD page 83h names {}, not {name}",
                            id.lu
                        );
                        self.disqualify(path, why, now);
                        self.release_held(now);
                        return;
                    }
                }
                let p = &mut self.paths[path];
                p.identity = Some(id.lu);
                p.relative_port = id.relative_port;
                p.port_group = id.port_group;
                p.tries = 0;
                self.probe(path, PROBE_RTPG);
            }
            Err(why) => {
                self.disqualify(path, why, now);
                self.release_held(now);
            }
        }
    }

    fn on_port_groups(&mut self, path: usize, data: &[u8], now: Instant) {
        let groups = match parse_report_target_port_groups(data) {
            Ok(groups) => groups,
            Err(why) => {
                self.disqualify(path, why, now);
                self.release_held(now);
                return;
            }
        };
        let p = &mut self.paths[path];
        let mine = groups
            .iter()
            .find(|g| Some(g.group) == p.port_group)
            .or_else(|| {
                let port = p.relative_port?;
                groups.iter().find(|g| g.ports.contains(&port))
            });
        let Some(group) = mine else {
            let why = format!(
                "REPORT TARGET PORT GROUPS through it lists no group of its port \
                 (target port group {}, relative target port {})",
                p.port_group
                    .map_or_else(|| "not given".to_string(), |g| g.to_string()),
                p.relative_port
                    .map_or_else(|| "not given".to_string(), |r| r.to_string()),
            );
            self.disqualify(path, why, now);
            self.release_held(now);
            return;
        };
        p.port_group = Some(group.group);
        p.preferred = group.preferred;
        p.state = Some(group.state.unwrap_or(AccessState::Unavailable));
        self.settled(path, now);
    }

    /// The path's state is known: it serves, or waits, as the state says.
    fn settled(&mut self, path: usize, now: Instant) {
        let p = &mut self.paths[path];
        p.status = PathStatus::Ready;
        p.refreshing = false;
        p.tries = 0;
        p.poll_at = (p.state == Some(AccessState::Transitioning)).then(|| now + TRANSITION_POLL);
        if p.rank().is_none() {
            self.unusable(path, now);
        }
        self.release_held(now);
    }

    /// Every path, as [`Path::describe`] says it, for errors.
    fn describe_paths(&self) -> String {
        self.paths
            .iter()
            .map(Path::describe)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The wait before the `n`th sending after a refusal: none for the first,
/// then 10 ms doubling up to 1 s, so that paths that keep refusing are
/// not asked in a busy loop.
fn backoff(n: u32) -> Duration {
    if n <= 1 {
        return Duration::ZERO;
    }
    let factor = 1u32 << (n - 2).min(10);
    Duration::from_millis(10)
        .saturating_mul(factor)
        .min(RETRY_DELAY_MAX)
}
