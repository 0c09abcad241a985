//! The serving loop: one thread moves requests from a kernel front-end to
//! the iSCSI session and answers back.
//!
//! Each turn takes every request that arrived (no system call for ublk:
//! the completion ring is shared memory), turns each into its SCSI command
//! in the tag's own buffer (no allocation), lets the engine send them all
//! and wait, in one epoll set (`Engine::poll_or_wake`), for answers or for
//! the next requests, and hands the kernel every completion of the turn at once. A lost
//! connection is the engine's business: it logs in again (ERL 0
//! reinstatement) and sends the commands that were outstanding again, for
//! up to the replacement timeout; meanwhile requests wait in the kernel.
//! Past it the session has failed: requests fail at once (ENOLINK), and
//! the loop starts a login in the background every [`RELOGIN_EVERY`]
//! until one succeeds, as open-iscsi keeps trying past its
//! `replacement_timeout`; the device serves again from then on.
//!
//! What an administrator needs to hear goes to the log (`tracing`): the
//! session lost and back (the engine's events), the device offline and
//! online, and failed requests, counted once per [`TICK`] with the last
//! one's details, so that a failing device cannot flood the journal.

use crate::device::{BlockDevice, Op, Request};
use crate::scsi::{self, Lu, Verdict, MAX_TRIES, NOT_READY_PATIENCE};
use isoe_initiator::{Completion, Engine, InitiatorError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;

/// How often the observer hears the counters, at most.
const TICK: Duration = Duration::from_secs(1);
/// The longest one wait lasts (stop requests are checked between waits).
const WAIT: Duration = Duration::from_millis(250);
/// How often a failed session is logged in again (systemd's `RestartSec`
/// of the unit, which a failing attach would otherwise need).
pub const RELOGIN_EVERY: Duration = Duration::from_secs(5);

/// Counters of one device, as `isoe attach --list --json` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Requests completed, successfully or not.
    pub commands: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub write_zeroes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Of `read_bytes`, those received from the socket straight into the
    /// requests' pages (ublk zero copy); the rest went through the tags'
    /// buffers.
    #[serde(default)]
    pub zero_copy_read_bytes: u64,
    /// Requests that failed (an errno went back to the kernel).
    pub errors: u64,
    /// Commands sent again after a retryable answer.
    pub retries: u64,
    /// Sessions reinstated after a lost connection.
    pub reconnects: u64,
    /// With `--multipath`: times a path carrying commands became unusable
    /// and its commands went to another path (or waited for one).
    #[serde(default)]
    pub failovers: u64,
    /// With `--multipath`: the longest time without an answered command
    /// around a failover, in ms.
    #[serde(default)]
    pub failover_gap_max_ms: u64,
    /// Requests at the target now.
    pub in_flight: u64,
    /// Sum and maximum of request latencies (arrival to completion), µs.
    pub latency_total_us: u64,
    pub latency_max_us: u64,
}

impl Stats {
    /// Mean latency in µs, 0 before the first request.
    pub fn latency_mean_us(&self) -> u64 {
        self.latency_total_us
            .checked_div(self.commands)
            .unwrap_or_default()
    }
}

/// What the serving loop tells its owner, and asks it.
pub trait Observer {
    /// The device exists at `path` and serves.
    fn ready(&mut self, path: &Path) -> io::Result<()>;
    /// About once a second, and once at the end.
    fn tick(&mut self, stats: &Stats);
    /// True once the device should go (SIGTERM, `isoe detach`).
    fn stop_requested(&self) -> bool;
    /// The session failed for good (`true`: requests fail while it is
    /// logged in again) or is back (`false`).
    fn offline(&mut self, _offline: bool) {}
    /// The session's lost connections are being logged in again
    /// (`true`: requests wait) or that is over (`false`: back, or failed,
    /// which [`Observer::offline`] then says).
    fn reconnecting(&mut self, _reconnecting: bool) {}
}

/// Why serving ended other than by a stop.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error("the block device failed: {0}")]
    Device(#[source] io::Error),
    #[error("the block device could not start: {0}")]
    Start(#[source] io::Error),
    #[error(transparent)]
    Initiator(#[from] InitiatorError),
    #[error("{0}")]
    Observer(#[source] io::Error),
}

/// A request at the target (or waiting to go again).
#[derive(Debug, Clone, Copy)]
struct Slot {
    request: Request,
    arrived: Instant,
    tries: u8,
    not_ready_since: Option<Instant>,
    /// Bytes of the request done by earlier commands (a long discard or
    /// write-zeroes goes in pieces: [`scsi::piece`]).
    done: u32,
    /// Bytes the command at the target carries.
    piece: u32,
}

/// Serves `device` from LU `lu` of `session` (a session or a multipath LU
/// of `engine`) until the kernel stops the device, after a stop request or
/// on its own. Returns the final counters and the device's path.
pub fn serve<D: BlockDevice>(
    engine: &mut Engine,
    session: usize,
    lu: &Lu,
    device: &mut D,
    observer: &mut dyn Observer,
) -> Result<(Stats, Option<PathBuf>), ServeError> {
    let mut state = State {
        reconnects_before: engine.stats().reconnects,
        external_before: engine.stats().external_bytes,
        engine,
        session,
        lu,
        device,
        slots: Vec::new(),
        delayed: Vec::new(),
        stats: Stats::default(),
        offline_since: None,
        reconnecting: false,
        next_relogin: Instant::now(),
        failed: Failed::default(),
        label: format!("LUN {}", lu.lun),
    };
    let mut requests: Vec<Request> = Vec::with_capacity(256);
    let mut done: Vec<Completion> = Vec::with_capacity(256);
    let mut path: Option<PathBuf> = None;
    let mut stopping = false;
    let mut last_tick = Instant::now();
    loop {
        if path.is_none() {
            match state.device.ready() {
                Some(Ok(p)) => {
                    observer.ready(&p).map_err(ServeError::Observer)?;
                    state.label = p.display().to_string();
                    path = Some(p);
                }
                Some(Err(e)) => return Err(ServeError::Start(e)),
                None => {}
            }
        }
        if !stopping && observer.stop_requested() {
            stopping = true;
            state.device.stop().map_err(ServeError::Device)?;
        }
        if stopping {
            // The kernel waits for the requests the loop holds: those
            // waiting for a lost session fail now rather than when its
            // reconnection runs out.
            state
                .engine
                .give_up(state.session, "the device is being detached");
        }
        if !state
            .device
            .take_requests(&mut requests)
            .map_err(ServeError::Device)?
        {
            break;
        }
        // One clock read per turn: the requests of a turn arrived together.
        let now = Instant::now();
        for request in requests.drain(..) {
            let buffer = state.device.take_buffer(request.tag);
            let slot = Slot {
                request,
                arrived: now,
                tries: 0,
                not_ready_since: None,
                done: 0,
                piece: 0,
            };
            state.start(slot, buffer);
        }
        state.send_due(now);
        let wait = state
            .delayed
            .iter()
            .map(|d| d.0.saturating_duration_since(now))
            .min()
            .unwrap_or(WAIT)
            .min(WAIT);
        let wake = state.device.wake_fd();
        let plane = state.device.data_plane();
        state.engine.poll_with(&mut done, wait, wake, plane)?;
        let now = Instant::now();
        for c in done.drain(..) {
            state.finish(c, now);
        }
        state.device.flush().map_err(ServeError::Device)?;
        state.watch_session(now, observer);
        if now.duration_since(last_tick) >= TICK {
            last_tick = now;
            state.count_recovery();
            state.failed.log(&state.label);
            observer.tick(&state.stats);
        }
    }
    state.count_recovery();
    state.failed.log(&state.label);
    state.stats.in_flight = 0;
    observer.tick(&state.stats);
    Ok((state.stats, path))
}

/// The loop's state, with what it serves and through what.
struct State<'a, D> {
    engine: &'a mut Engine,
    /// The session (or multipath LU) commands go to.
    session: usize,
    lu: &'a Lu,
    device: &'a mut D,
    /// By tag.
    slots: Vec<Option<Slot>>,
    /// Commands waiting to go again: when, their tag, their buffer.
    delayed: Vec<(Instant, u16, Vec<u8>)>,
    stats: Stats,
    reconnects_before: u64,
    external_before: u64,
    /// Since when the session has failed for good, while it has.
    offline_since: Option<Instant>,
    /// The engine is reinstating the session (last seen).
    reconnecting: bool,
    /// When the next background login of a failed session may start.
    next_relogin: Instant,
    /// Requests failed since the last report.
    failed: Failed,
    /// The device in the log: its path once it exists.
    label: String,
}

/// Requests failed since the last [`Failed::log`], and the last of them.
#[derive(Debug, Default)]
struct Failed {
    count: u64,
    last: Option<(Request, i32)>,
}

impl Failed {
    fn note(&mut self, request: Request, errno: i32) {
        self.count += 1;
        self.last = Some((request, errno));
    }

    /// One warning for the requests failed since the last one.
    fn log(&mut self, device: &str) {
        let Some((r, errno)) = self.last.take() else {
            return;
        };
        tracing::warn!(
            target: "isoe::attach",
            device = %device,
            "{} request(s) failed; the last: {:?} of {} bytes at byte {}: {}",
            self.count,
            r.op,
            r.len,
            r.offset,
            io::Error::from_raw_os_error(errno)
        );
        self.count = 0;
    }
}

impl<D: BlockDevice> State<'_, D> {
    /// The engine's reconnections and failovers into the counters.
    fn count_recovery(&mut self) {
        let engine = self.engine.stats();
        self.stats.reconnects = engine.reconnects - self.reconnects_before;
        self.stats.zero_copy_read_bytes = engine.external_bytes - self.external_before;
        if let Some(m) = self.engine.multipath_stats(self.session) {
            self.stats.failovers = m.failovers;
            self.stats.failover_gap_max_ms = m.failover_gap_max.as_millis() as u64;
        }
    }

    /// A session that failed for good is logged in again every
    /// [`RELOGIN_EVERY`] in the background; the observer and the log hear
    /// when it fails and when it is back, and the observer while its lost
    /// connections are logged in again (requests wait meanwhile).
    fn watch_session(&mut self, now: Instant, observer: &mut dyn Observer) {
        let reinstating = self.engine.reinstating(self.session);
        if reinstating != self.reconnecting {
            self.reconnecting = reinstating;
            observer.reconnecting(reinstating);
        }
        match (self.engine.failure(self.session), self.offline_since) {
            (Some(why), None) => {
                tracing::error!(
                    target: "isoe::attach",
                    device = %self.label,
                    "the session failed ({why}); requests fail at once (ENOLINK) while it is \
                     logged in again every {} s",
                    RELOGIN_EVERY.as_secs()
                );
                self.offline_since = Some(now);
                self.next_relogin = now;
                observer.offline(true);
            }
            (None, Some(since)) => {
                tracing::info!(
                    target: "isoe::attach",
                    device = %self.label,
                    "the session is back after {:.1} s offline; the device serves again",
                    now.duration_since(since).as_secs_f64()
                );
                self.offline_since = None;
                observer.offline(false);
                return;
            }
            _ => {}
        }
        if self.offline_since.is_some() && now >= self.next_relogin {
            self.next_relogin = now + RELOGIN_EVERY;
            if let Err(e) = self.engine.relogin(self.session) {
                tracing::warn!(target: "isoe::attach", device = %self.label, "{e}");
            }
        }
    }

    /// Sends `slot`'s command, or fails the request at once when the
    /// session takes no more commands.
    fn start(&mut self, slot: Slot, buffer: Vec<u8>) {
        let tag = slot.request.tag;
        let index = usize::from(tag);
        if self.slots.len() <= index {
            self.slots.resize(index + 1, None);
        }
        let request = slot.request;
        let piece = scsi::piece(self.lu, &request, slot.done);
        self.slots[index] = Some(slot);
        self.stats.in_flight += 1;
        let refused = match piece {
            // A read or write longer than the tag's buffer (NBD's
            // max_sectors_kb raised past the LU's limit by hand).
            Some(_)
                if matches!(request.op, Op::Read | Op::Write)
                    && request.len as usize > buffer.len() =>
            {
                Some(libc::EINVAL)
            }
            // A discard the LU cannot take (the kernel was told so).
            None => Some(libc::EOPNOTSUPP),
            Some(_) => None,
        };
        if let Some(errno) = refused {
            self.end(tag, buffer, Err(errno), Instant::now());
            return;
        }
        let (offset, len) = piece.expect("checked above");
        if let Some(s) = self.slots[index].as_mut() {
            s.piece = len;
        }
        let mut command = scsi::command(self.lu, &request, offset, len, buffer);
        if self.device.external(&request) {
            command.external = Some(u32::from(tag));
        }
        if let Err(refused) = self
            .engine
            .submit_or_return(self.session, command, u64::from(tag))
        {
            self.end(
                tag,
                refused.command.buffer,
                Err(libc::ENOLINK),
                Instant::now(),
            );
        }
    }

    /// Sends again the delayed commands whose time has come.
    fn send_due(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 > now {
                i += 1;
                continue;
            }
            let (_, tag, buffer) = self.delayed.swap_remove(i);
            let Some(slot) = self.slots[usize::from(tag)].take() else {
                continue;
            };
            self.stats.in_flight -= 1;
            self.start(slot, buffer);
        }
    }

    /// A command's answer: completes its request, or sends it again.
    fn finish(&mut self, c: Completion, now: Instant) {
        let Ok(tag) = u16::try_from(c.token) else {
            return;
        };
        let Some(mut slot) = self.slots.get_mut(usize::from(tag)).and_then(Option::take) else {
            return;
        };
        slot.tries += 1;
        let result = match scsi::judge(&c.outcome) {
            Verdict::Good if slot.done + slot.piece < slot.request.len => {
                // The next piece of a long discard or write-zeroes.
                slot.done += slot.piece;
                slot.tries = 0;
                self.stats.in_flight -= 1;
                self.start(slot, c.buffer);
                return;
            }
            Verdict::Good => Ok(()),
            Verdict::Fail(errno) => Err(errno),
            Verdict::Retry(after) if slot.tries < MAX_TRIES => {
                return self.again(slot, c.buffer, now + after);
            }
            Verdict::NotReady
                if now.duration_since(*slot.not_ready_since.get_or_insert(now))
                    < NOT_READY_PATIENCE =>
            {
                return self.again(slot, c.buffer, now + scsi::BUSY_DELAY);
            }
            Verdict::Retry(_) | Verdict::NotReady => Err(libc::EIO),
        };
        self.slots[usize::from(tag)] = Some(slot);
        self.end(tag, c.buffer, result, now);
    }

    /// Sends `slot`'s command again at `when` (at once if that has come).
    fn again(&mut self, slot: Slot, buffer: Vec<u8>, when: Instant) {
        self.stats.retries += 1;
        let tag = slot.request.tag;
        if when <= Instant::now() {
            self.stats.in_flight -= 1;
            self.start(slot, buffer);
        } else {
            self.slots[usize::from(tag)] = Some(slot);
            self.delayed.push((when, tag, buffer));
        }
    }

    /// Completes request `tag` to the kernel and counts it.
    fn end(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>, now: Instant) {
        let Some(slot) = self.slots.get_mut(usize::from(tag)).and_then(Option::take) else {
            return;
        };
        let s = &mut self.stats;
        s.in_flight -= 1;
        s.commands += 1;
        let len = u64::from(slot.request.len);
        match slot.request.op {
            Op::Read => {
                s.reads += 1;
                s.read_bytes += len;
            }
            Op::Write => {
                s.writes += 1;
                s.write_bytes += len;
            }
            Op::Flush => s.flushes += 1,
            Op::Discard => s.discards += 1,
            Op::WriteZeroes => s.write_zeroes += 1,
        }
        if let Err(errno) = result {
            s.errors += 1;
            self.failed.note(slot.request, errno);
        }
        let us = now.duration_since(slot.arrived).as_micros() as u64;
        s.latency_total_us += us;
        s.latency_max_us = s.latency_max_us.max(us);
        self.device.complete(tag, buffer, result);
    }
}
