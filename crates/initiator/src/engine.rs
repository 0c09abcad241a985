//! The initiator's I/O driver: one thread's sessions, their sockets, and
//! the loop that moves bytes between them and the session state machines.
//!
//! An `Engine` is owned by one thread and never locks. A caller submits
//! commands, then calls [`Engine::poll`] in a loop; each call sends what was
//! queued with one vectored send per connection, waits for input, and hands
//! back what completed. A lone connection waits in a blocking `recv`, so a
//! batch costs two system calls (send + receive); several connections wait
//! in one epoll set, each socket added once (when it logs in) and changed
//! only when it starts or stops waiting for room to send, so a wait costs
//! the kernel the connections that are ready, not all of them.
//!
//! A Data-In whose data is large (at least 16 KiB still to come once its
//! header is in) is received straight into the command's buffer, as the
//! session core directs (`session::placement`): one copy, by the kernel,
//! instead of two. Once one PDU was placed the next header is received
//! alone, so that the next large data segment is not received into the
//! receive buffer first; small PDUs are still decoded many per `recv`.

use crate::channel::{Channel, LoginResult};
use crate::command::{Command, Completion, DataPlane, Outcome, TaskError, TaskManagement};
use crate::config::SessionConfig;
use crate::error::InitiatorError;
use crate::recv_buf::RecvBuf;
use crate::session::{ConnFailure, Output, Placement, SessionCore};

use crate::sys;
use isoe_wire::frame;
use isoe_wire::login::InitiatorLoginConfig;
use isoe_wire::negotiate::SessionParams;
use multipath::{LuEntry, Reconnected};
use relogin::Relogin;
pub use relogin::ReloginStart;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A session's event in the log (`isoe::session`), with its portal and
/// target name: `session_log!(warn, entry.config, "...", args)`.
macro_rules! session_log {
    ($level:ident, $config:expr, $($message:tt)+) => {
        tracing::$level!(
            target: "isoe::session",
            portal = %$config.portal,
            iqn = %$config.target_name,
            $($message)+
        )
    };
}

mod multipath;
mod relogin;

/// How often keepalives are checked while waiting.
const TICK: Duration = Duration::from_millis(250);
/// Tokens the engine uses for its own synchronous requests.
const SYNC_TOKEN_BASE: u64 = 1 << 63;
/// The CmdSN a new session starts at.
const INITIAL_CMD_SN: u32 = 1;
/// Data-In data still to come, at least, for it to be received straight
/// into the task's buffer; smaller PDUs go through the receive buffer,
/// many to one `recv`.
const DIRECT_MIN_BYTES: usize = 16 * 1024;
/// With several connections, [`Engine::poll`] holds completions until at
/// least this share (1/N) of the commands in flight have completed...
const COALESCE_SHARE: usize = 4;
/// ...but never more than this many...
const COALESCE_MAX: usize = 8;
/// ...nor longer than this after the first of them came in.
const COALESCE_HOLD: Duration = Duration::from_millis(1);
/// PDUs received header first after a placed one: enough to get past a
/// SCSI Response or two between large Data-In, few enough that a run of
/// small PDUs soon goes back to many per `recv`.
const HEADER_FIRST_PDUS: u8 = 4;

/// Counters of the work the engine did, for syscalls-per-I/O figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// `sendmsg` calls.
    pub sends: u64,
    /// `recv` calls.
    pub recvs: u64,
    /// Waits on several descriptors (`epoll_wait` calls).
    pub polls: u64,
    /// `setsockopt` calls on the receive path (timeouts, wake-up thresholds).
    pub sockopts: u64,
    /// Sessions reinstated after a connection loss.
    pub reconnects: u64,
    /// Data-In PDUs whose data was received straight into the task's buffer.
    pub placed_pdus: u64,
    /// Data bytes received straight into task buffers (not those that had
    /// arrived with the header, which are copied).
    pub placed_bytes: u64,
    /// Of those, bytes received into external buffers
    /// ([`crate::Command::external`]): straight into a block request's
    /// pages.
    pub external_bytes: u64,
}

#[derive(Debug)]
struct Sock {
    stream: TcpStream,
    fd: RawFd,
    rbuf: RecvBuf,
    /// Bytes the partial PDU at the front of `rbuf` needs in all.
    need: usize,
    rcvtimeo: Option<Duration>,
    /// A Data-In whose data is being received into its task's buffer;
    /// `rbuf` is empty meanwhile.
    placement: Option<Placement>,
    /// A recent PDU was placed: receive the next header alone, so that its
    /// data, if large, is not received into `rbuf` first. Counts down per
    /// PDU that comes whole; zero as soon as a header shows data too small
    /// to place.
    header_first: u8,
    /// SO_RCVLOWAT as set: the rest of the PDU while placing, so that the
    /// wait ends once, when all of it is in; 1 otherwise.
    rcvlowat: usize,
    /// The key and interest it is in the engine's epoll set with, once added.
    registered: Option<(u64, u32)>,
}

#[derive(Debug)]
struct Entry {
    core: SessionCore,
    socks: Vec<Sock>,
    config: SessionConfig,
    tsih: u16,
    /// A connection failed; recovery runs at the next opportunity.
    broken: Option<String>,
    /// (LU, path) when the session is a path of a multipath LU: its
    /// completions go to the LU, and a lost connection moves its commands
    /// to another path instead of waiting for it to be reinstated.
    path_of: Option<(usize, usize)>,
    /// A background login of this failed session is under way
    /// ([`Engine::relogin`]).
    relogging: bool,
    /// Why the last of those logins failed.
    relogin_error: Option<String>,
    /// The session's connections were lost and a thread logs it in again
    /// ([`Engine::reinstating`]).
    reinstating: bool,
    /// Tells this session from one that later takes its index, for the
    /// background logins' answers.
    serial: u64,
}

/// A command [`Engine::submit_or_return`] refused, and why.
#[derive(Debug)]
pub struct Refused {
    pub error: InitiatorError,
    pub command: Command,
}

impl Refused {
    fn new(why: String, command: Command) -> Box<Refused> {
        Box::new(Refused {
            error: InitiatorError::Usage(why),
            command,
        })
    }
}

/// One thread's initiator: sessions, sockets and the event loop.
#[derive(Debug, Default)]
pub struct Engine {
    sessions: Vec<Option<Entry>>,
    stats: EngineStats,
    stash: Vec<Completion>,
    next_sync_token: u64,
    /// The set several connections (and the wake descriptor) wait in, made
    /// at the first such wait.
    epoll: Option<sys::Epoll>,
    /// Reused: what the last wait found ready.
    ready: Vec<(u64, u32)>,
    /// The wake descriptor in `epoll`, if one is.
    wake_registered: Option<RawFd>,
    /// Failed sessions logged in again in the background come back through
    /// this ([`Engine::relogin`]).
    relogins: Option<(mpsc::Sender<Relogin>, mpsc::Receiver<Relogin>)>,
    /// The last [`Entry::serial`] given.
    next_serial: u64,
    /// Multipath LUs; index `LU_INDEX_BASE + i` names `lus[i]`.
    lus: Vec<Option<LuEntry>>,
    /// Paths logged in again in the background come back through this.
    reconnected: Option<(mpsc::Sender<Reconnected>, mpsc::Receiver<Reconnected>)>,
    /// Reused: a path's completions on their way to its LU.
    mp_completions: Vec<Completion>,
    /// Reused: a lost path's commands on their way to another.
    mp_commands: Vec<(u64, Command)>,
    /// Numbers the LUs opened, so that a late answer from a background
    /// login finds no LU that took the place of its own.
    lu_generation: u64,
    /// A descriptor of the caller's that ends a wait when it becomes
    /// readable ([`Engine::poll_or_wake`]).
    wake: Option<RawFd>,
    /// `wake` became readable during this call.
    woken: bool,
}

/// The epoll key of the caller's wake descriptor; a connection's is
/// `session << 16 | connection` (connections per session fit in 16 bits).
const WAKE_KEY: u64 = u64::MAX;

fn sock_key(s: usize, c: usize) -> u64 {
    (s as u64) << 16 | c as u64
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Background logins of lost paths stop at their next step.
        for lu in self.lus.iter().flatten() {
            lu.stop_reconnecting();
        }
    }
}

impl Engine {
    /// An engine with no sessions.
    pub fn new() -> Engine {
        Engine::default()
    }

    /// Counters so far.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// NOP-Out/NOP-In traffic of a session.
    pub fn nop_counters(&self, session: usize) -> Option<crate::session::NopCounters> {
        Some(self.sessions.get(session)?.as_ref()?.core.nops)
    }

    /// Opens a session: logs in its first connection, then as many more as
    /// asked for and the target's MaxConnections allows. Returns its index.
    pub fn login(&mut self, config: SessionConfig) -> Result<usize, InitiatorError> {
        let index = self
            .sessions
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.sessions.len());
        let (core, socks, tsih) = connect_session(index, &config, INITIAL_CMD_SN, Instant::now())?;
        let entry = Entry {
            core,
            socks,
            config,
            tsih,
            broken: None,
            path_of: None,
            relogging: false,
            reinstating: false,
            serial: {
                self.next_serial += 1;
                self.next_serial
            },
            relogin_error: None,
        };
        if index == self.sessions.len() {
            self.sessions.push(Some(entry));
        } else {
            self.sessions[index] = Some(entry);
        }
        Ok(index)
    }

    fn entry(&mut self, session: usize) -> Result<&mut Entry, InitiatorError> {
        self.sessions
            .get_mut(session)
            .and_then(Option::as_mut)
            .ok_or_else(|| InitiatorError::Usage(format!("no session {session}")))
    }

    /// What the session negotiated.
    pub fn params(&self, session: usize) -> Option<&SessionParams> {
        Some(&self.sessions.get(session)?.as_ref()?.core.params)
    }

    /// Connections the session has now; of a multipath LU, the fewest of
    /// any path that is connected.
    pub fn connections(&self, session: usize) -> usize {
        if let Some(lu) = multipath::lu_slot(session) {
            return self.multipath_connections(lu);
        }
        self.sessions
            .get(session)
            .and_then(Option::as_ref)
            .map_or(0, |e| e.socks.len())
    }

    /// The negotiated per-connection limits of the session's first connection.
    pub fn connection_limits(&self, session: usize) -> Option<(u32, u32, bool, bool)> {
        let e = self.sessions.get(session)?.as_ref()?;
        let c = e.core.conns.first()?;
        Some((
            c.send_limits.max_recv_data_segment_length,
            c.recv_limits.max_recv_data_segment_length,
            c.send_limits.header_digest,
            c.send_limits.data_digest,
        ))
    }

    /// Queues a command; `token` comes back in its [`Completion`].
    /// `session` may name a multipath LU ([`Engine::open_multipath`]).
    pub fn submit(
        &mut self,
        session: usize,
        command: Command,
        token: u64,
    ) -> Result<(), InitiatorError> {
        self.submit_or_return(session, command, token)
            .map_err(|refused| refused.error)
    }

    /// [`Engine::submit`] that hands the command back when it is refused
    /// (a failed session, a full task table), so that its buffer is not
    /// lost: a block device's buffers are the kernel's to find again.
    pub fn submit_or_return(
        &mut self,
        session: usize,
        command: Command,
        token: u64,
    ) -> Result<(), Box<Refused>> {
        if let Some(lu) = multipath::lu_slot(session) {
            return self.submit_multipath(lu, command, token);
        }
        let Some(entry) = self.sessions.get_mut(session).and_then(Option::as_mut) else {
            return Err(Refused::new(format!("no session {session}"), command));
        };
        entry
            .core
            .submit(command, token)
            .map_err(|(e, c)| Refused::new(e.to_string(), c))
    }

    /// Sends a task management function; its answer comes back as a completion with `token`.
    pub fn task_management(
        &mut self,
        session: usize,
        request: TaskManagement,
        token: u64,
    ) -> Result<(), InitiatorError> {
        if multipath::lu_slot(session).is_some() {
            return Err(InitiatorError::Usage(
                "task management goes to one session, not to a multipath LU".into(),
            ));
        }
        let entry = self.entry(session)?;
        entry
            .core
            .submit_task_management(request, token)
            .map_err(|e| InitiatorError::Usage(e.to_string()))
    }

    /// Sends what is queued, waits up to `timeout` for input, and appends
    /// what completed to `out`. Returns early as soon as something completed.
    pub fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        timeout: Duration,
    ) -> Result<(), InitiatorError> {
        self.poll_into(out, timeout, None)
    }

    /// [`Engine::poll`], receiving large Data-In of commands that name an
    /// external buffer through `plane`.
    fn poll_into(
        &mut self,
        out: &mut Vec<Completion>,
        timeout: Duration,
        plane: Option<&mut (dyn DataPlane + '_)>,
    ) -> Result<(), InitiatorError> {
        // Completions kept by `execute` come back at once (sends still go).
        let timeout = if self.stash.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        out.append(&mut self.stash);
        let batch = self.completion_batch();
        self.run(out, timeout, batch, plane)
    }

    /// [`Engine::poll`] that also returns, with `true`, as soon as `wake`
    /// (the caller's descriptor: a ublk ring, an NBD socket) is readable,
    /// so that one thread waits on its own input and the iSCSI sockets at
    /// once. While a wake descriptor is given the engine waits in its epoll
    /// set even with a lone connection. The descriptor stays in the set
    /// between calls (a wait without one takes it out), so it must stay
    /// open while it is given.
    pub fn poll_or_wake(
        &mut self,
        out: &mut Vec<Completion>,
        timeout: Duration,
        wake: RawFd,
    ) -> Result<bool, InitiatorError> {
        self.poll_with(out, timeout, wake, None)
    }

    /// [`Engine::poll_or_wake`] with a [`DataPlane`]: the large Data-In of
    /// commands that name an external buffer is received into it, and
    /// their Data-Out sent from it.
    pub fn poll_with(
        &mut self,
        out: &mut Vec<Completion>,
        timeout: Duration,
        wake: RawFd,
        plane: Option<&mut (dyn DataPlane + '_)>,
    ) -> Result<bool, InitiatorError> {
        self.wake = Some(wake);
        self.woken = false;
        let result = self.poll_into(out, timeout, plane);
        self.wake = None;
        result.map(|()| std::mem::take(&mut self.woken))
    }

    /// Completions [`Engine::poll`] waits for before it returns
    /// (completion coalescing, as an HBA moderates its interrupts). With
    /// several connections each wake-up brings one connection's PDU, so
    /// returning at the first completion sends the caller's next command
    /// alone and wakes the target once per command; holding until a
    /// quarter of the window is in sends them in runs (measured on two
    /// portals of one target, 256 KiB reads QD8 each: 1.35x MB/s at 0.65x
    /// initiator and 0.8x target CPU per I/O, level with libiscsi through
    /// fio). One connection gains nothing measurable (its large PDUs come
    /// one per wake-up however long it waits): it returns at the first.
    fn completion_batch(&self) -> usize {
        let live = self
            .sessions
            .iter()
            .flatten()
            .filter(|e| e.broken.is_none());
        let (sockets, in_flight) = live.fold((0, 0), |(s, f), e| {
            (s + e.socks.len(), f + e.core.tasks_in_flight())
        });
        if sockets < 2 {
            return 1;
        }
        (in_flight / COALESCE_SHARE).clamp(1, COALESCE_MAX)
    }

    fn tasks_in_flight(&self) -> usize {
        self.sessions
            .iter()
            .flatten()
            .map(|e| e.core.tasks_in_flight())
            .sum()
    }

    /// Runs the loop until `batch` completions (or any, once
    /// [`COALESCE_HOLD`] has passed since the first, or nothing more is in
    /// flight) are in `out`, or `timeout` passes.
    fn run(
        &mut self,
        out: &mut Vec<Completion>,
        timeout: Duration,
        batch: usize,
        mut plane: Option<&mut (dyn DataPlane + '_)>,
    ) -> Result<(), InitiatorError> {
        let mut deadline = Instant::now() + timeout;
        let before = out.len();
        let mut holding = false;
        loop {
            if !self.lus.is_empty() {
                self.service_multipath(out);
            }
            self.send_all(plane.as_deref_mut());
            self.recover_broken();
            self.take_relogins();
            for entry in self.sessions.iter_mut().flatten() {
                // A path's completions are its LU's (`service_multipath`).
                if entry.path_of.is_none() {
                    entry.core.drain_completions(out);
                }
            }
            let got = out.len() - before;
            if got >= batch || (got > 0 && self.tasks_in_flight() == 0) || self.woken {
                return Ok(());
            }
            let now = Instant::now();
            if got > 0 && !holding {
                holding = true;
                deadline = deadline.min(now + COALESCE_HOLD);
            }
            if now >= deadline {
                return Ok(());
            }
            let mut wait = (deadline - now).min(TICK);
            if !self.lus.is_empty() {
                wait = self.multipath_wait(now, wait);
            }
            // A lone connection blocks in recv with a timeout that stays the
            // same from call to call (no setsockopt per wait); the deadline is
            // checked here, so a wait overshoots it by at most that timeout.
            self.wait_and_receive(wait, timeout.min(TICK), plane.as_deref_mut())?;
            self.tick();
        }
    }

    fn send_all(&mut self, mut plane: Option<&mut (dyn DataPlane + '_)>) {
        for entry in self.sessions.iter_mut().flatten() {
            if entry.broken.is_some() {
                continue;
            }
            entry.core.pump();
            for (c, sock) in entry.socks.iter().enumerate() {
                if !entry.core.conns[c].has_output() {
                    continue;
                }
                let fd = sock.fd;
                let sends = &mut self.stats.sends;
                let woken = &mut self.woken;
                let result = entry.core.flush_output(c, |out| {
                    *sends += 1;
                    match (out, plane.as_deref_mut()) {
                        (Output::Bytes(iov), _) => sys::send_vectored(fd, iov),
                        (Output::Chunks(chunks), Some(plane)) => {
                            let sent = plane.send(chunks, fd);
                            // Requests read off the ring meanwhile end the run.
                            *woken |= plane.woken();
                            sent
                        }
                        (Output::Chunks(_), None) => Err(io::Error::other(
                            "an external buffer's data, and no data plane to send it",
                        )),
                    }
                });
                if let Err(e) = result {
                    entry.broken = Some(format!("send failed: {e}"));
                    break;
                }
            }
        }
    }

    fn wait_and_receive(
        &mut self,
        wait: Duration,
        recv_timeout: Duration,
        plane: Option<&mut (dyn DataPlane + '_)>,
    ) -> Result<(), InitiatorError> {
        self.arm_lowat();
        let mut live = 0;
        let mut lone = None;
        for (s, entry) in self.sessions.iter().enumerate() {
            let Some(entry) = entry else { continue };
            if entry.broken.is_some() {
                continue;
            }
            for c in 0..entry.socks.len() {
                live += 1;
                lone = Some((s, c, entry.core.conns[c].has_output()));
            }
        }
        match (live, lone) {
            (0, _) if self.wake.is_none() => {
                std::thread::sleep(wait.min(Duration::from_millis(10)));
                return Ok(());
            }
            (1, Some((s, c, false))) if self.wake.is_none() => {
                // One connection with nothing to send: wait in recv itself.
                self.receive(s, c, Some(recv_timeout), None);
                return Ok(());
            }
            _ => {}
        }
        self.register()?;
        let epoll = self.epoll.as_mut().expect("made by register");
        self.stats.polls += 1;
        let mut ready = std::mem::take(&mut self.ready);
        epoll.wait(&mut ready, wait).map_err(epoll_error)?;
        self.receive_ready(&ready, plane);
        self.ready = ready;
        Ok(())
    }

    /// SO_RCVLOWAT on every live connection for the coming wait.
    fn arm_lowat(&mut self) {
        for entry in self.sessions.iter_mut().flatten() {
            if entry.broken.is_some() {
                continue;
            }
            for sock in &mut entry.socks {
                if let Err(e) = wake_when_whole(sock, &mut self.stats) {
                    entry.broken = Some(format!("setting SO_RCVLOWAT failed: {e}"));
                    break;
                }
            }
        }
    }

    /// Every live connection (and the wake-up descriptor, while one is
    /// set) in the epoll set, each with the interest it has now: readable,
    /// and writable while it has output.
    fn register(&mut self) -> Result<(), InitiatorError> {
        if self.epoll.is_none() {
            self.epoll = Some(sys::Epoll::new().map_err(epoll_error)?);
        }
        let epoll = self.epoll.as_mut().expect("made above");
        for (s, entry) in self.sessions.iter_mut().enumerate() {
            let Some(entry) = entry else { continue };
            if entry.broken.is_some() {
                continue;
            }
            for (c, sock) in entry.socks.iter_mut().enumerate() {
                let want = (
                    sock_key(s, c),
                    sys::interest(entry.core.conns[c].has_output()),
                );
                if sock.registered == Some(want) {
                    continue;
                }
                let result = match sock.registered {
                    None => epoll.add(sock.fd, want.0, want.1),
                    Some(_) => epoll.modify(sock.fd, want.0, want.1),
                };
                if let Err(e) = result {
                    entry.broken = Some(format!("waiting on the connection failed: {e}"));
                    break;
                }
                sock.registered = Some(want);
            }
        }
        match (self.wake, self.wake_registered) {
            (Some(w), Some(r)) if w == r => {}
            (Some(w), old) => {
                if let Some(old) = old {
                    let _ = epoll.delete(old);
                }
                epoll
                    .add(w, WAKE_KEY, sys::interest(false))
                    .map_err(epoll_error)?;
                self.wake_registered = Some(w);
            }
            (None, Some(old)) => {
                // Not watched now: a readable one would end every wait.
                let _ = epoll.delete(old);
                self.wake_registered = None;
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// Receives on each connection `ready` names readable; a wake-up ends
    /// the run.
    fn receive_ready(
        &mut self,
        ready: &[(u64, u32)],
        mut plane: Option<&mut (dyn DataPlane + '_)>,
    ) {
        for &(key, events) in ready {
            if key == WAKE_KEY {
                self.woken = true;
                continue;
            }
            let (s, c) = ((key >> 16) as usize, (key & 0xffff) as usize);
            let current = self
                .sessions
                .get(s)
                .and_then(Option::as_ref)
                .is_some_and(|e| {
                    e.broken.is_none() && e.socks.get(c).is_some_and(|k| k.registered.is_some())
                });
            if current && sys::readable(events) {
                self.receive(s, c, None, plane.as_deref_mut());
            }
        }
    }

    /// One `recv` on connection `c` of session `s`, then decoding. `wait`
    /// Some: block up to that long.
    ///
    /// While a Data-In is being placed the `recv` goes into the task's
    /// buffer, its trailer, and then into `rbuf` for at most the next header.
    fn receive(
        &mut self,
        s: usize,
        c: usize,
        wait: Option<Duration>,
        plane: Option<&mut (dyn DataPlane + '_)>,
    ) {
        let Some(entry) = self.sessions[s].as_mut() else {
            return;
        };
        let quickack = entry.config.socket.quickack;
        let sock = &mut entry.socks[c];
        if let Some(w) = wait {
            let w = w.max(Duration::from_millis(1));
            if sock.rcvtimeo != Some(w) {
                self.stats.sockopts += 1;
                if let Err(e) = sock.stream.set_read_timeout(Some(w)) {
                    entry.broken = Some(format!("setting the receive timeout failed: {e}"));
                    return;
                }
                sock.rcvtimeo = Some(w);
            }
            if let Err(e) = wake_when_whole(sock, &mut self.stats) {
                entry.broken = Some(format!("setting SO_RCVLOWAT failed: {e}"));
                return;
            }
        }
        self.stats.recvs += 1;
        let limits = entry.core.conns[c].recv_limits;
        let fd = sock.fd;
        let external = match (plane, sock.placement.as_mut()) {
            (Some(plane), Some(p)) => entry.core.placement_external(p).map(|to| (plane, to)),
            _ => None,
        };
        let result = match (external, sock.placement.as_mut()) {
            (Some((plane, (buffer, offset, len))), _) => {
                let n = plane.receive(buffer, offset, len, fd);
                // Requests read off the ring meanwhile end the run.
                self.woken |= plane.woken();
                if let Ok(n) = n {
                    self.stats.external_bytes += n as u64;
                }
                n
            }
            (None, Some(p)) => {
                let header_len = frame::header_bytes_needed(&[], &limits);
                let tail = &mut sock.rbuf.spare(header_len)[..header_len];
                let (mut iov, count) = entry.core.placement_buffers(p, tail);
                sys::recv_vectored(fd, &mut iov[..count], wait.is_some())
            }
            (None, None) => {
                let limit = header_first_limit(sock, &limits);
                let spare = sock.rbuf.spare(sock.need);
                let room = spare.len().min(limit);
                sys::recv(fd, &mut spare[..room], wait.is_some())
            }
        };
        let n = match result {
            Ok(0) => {
                entry.broken = Some("the target closed the connection".into());
                return;
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                return
            }
            Err(e) => {
                entry.broken = Some(format!("receive failed: {e}"));
                return;
            }
        };
        if quickack {
            let _ = sys::set_quickack(fd);
        }
        if let Err(why) = absorb(&mut entry.core, sock, c, n, &mut self.stats) {
            entry.broken = Some(why);
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        for entry in self.sessions.iter_mut().flatten() {
            let dead = entry.core.handle_tick(now);
            if let Some(&c) = dead.first() {
                let secs = entry.config.keepalive.timeout.as_secs();
                entry.broken = Some(format!(
                    "connection {c} did not answer a NOP-Out ping within {secs} s"
                ));
            }
        }
    }

    /// Starts reinstating every session whose connection failed (ERL 0),
    /// with the session's retry policy, on a thread of its own
    /// ([`Engine::reinstate`]): the engine's loop goes on meanwhile, so
    /// that its caller still serves its own events (a stop request, other
    /// sessions). Tasks that were outstanding are reissued once it is
    /// back.
    fn recover_broken(&mut self) {
        for s in 0..self.sessions.len() {
            let Some(entry) = self.sessions[s].as_mut() else {
                continue;
            };
            // A path of a multipath LU fails over instead (`service_multipath`).
            if entry.broken.is_none() || entry.path_of.is_some() {
                continue;
            }
            let Some(why) = entry.broken.take() else {
                continue;
            };
            entry.socks.clear();
            entry.core.connections_lost();
            if entry.core.failure().is_some() {
                continue;
            }
            self.reinstate(s, why);
        }
    }

    /// A token for a synchronous request, apart from every caller's tokens.
    fn sync_token(&mut self) -> u64 {
        let token = SYNC_TOKEN_BASE | self.next_sync_token;
        self.next_sync_token = self.next_sync_token.wrapping_add(1) & !SYNC_TOKEN_BASE;
        token
    }

    /// Submits `command` and waits for it alone; other completions are kept
    /// for the next [`Engine::poll`].
    pub fn execute(
        &mut self,
        session: usize,
        command: Command,
    ) -> Result<Completion, InitiatorError> {
        let token = self.sync_token();
        self.submit(session, command, token)?;
        self.wait_for(session, token)
    }

    /// Runs a task management function and waits for its answer.
    pub fn execute_task_management(
        &mut self,
        session: usize,
        request: TaskManagement,
    ) -> Result<isoe_wire::pdu::TmfResponse, InitiatorError> {
        let token = self.sync_token();
        self.task_management(session, request, token)?;
        let done = self.wait_for(session, token)?;
        match done.outcome {
            Outcome::TaskManagement(code) => Ok(code),
            Outcome::Failed(e) => Err(InitiatorError::Usage(e.to_string())),
            other => Err(InitiatorError::Usage(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    fn wait_for(&mut self, session: usize, token: u64) -> Result<Completion, InitiatorError> {
        let mut done = Vec::new();
        loop {
            self.run(&mut done, TICK, 1, None)?;
            if let Some(i) = done
                .iter()
                .position(|c| c.session == session && c.token == token)
            {
                let mine = done.swap_remove(i);
                self.stash.append(&mut done);
                return Ok(mine);
            }
            self.stash.append(&mut done);
            self.wait_round(session)?;
        }
    }

    fn wait_round(&mut self, session: usize) -> Result<(), InitiatorError> {
        if multipath::lu_slot(session).is_some() {
            // An LU answers every command, if only with NoPath.
            return Ok(());
        }
        let entry = self.entry(session)?;
        if let Some(why) = entry.core.failure() {
            if entry.core.tasks_in_flight() == 0 {
                return Err(InitiatorError::SessionFailed {
                    target: entry.config.target_name.clone(),
                    attempts: entry.config.retry.attempts,
                    last: why.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Logs the session out (RFC 7143 §11.14) and closes its connections;
    /// of a multipath LU, every path's session.
    pub fn logout(&mut self, session: usize) -> Result<(), InitiatorError> {
        if let Some(lu) = multipath::lu_slot(session) {
            return self.close_multipath(lu);
        }
        let token = self.sync_token();
        let entry = self.entry(session)?;
        // No reconnection for a session that is being closed.
        entry.config.retry.attempts = 0;
        if entry.reinstating {
            // Nothing can go out before it is back (the login under way
            // is dropped when it ends): its commands fail, and it is gone.
            entry.core.fail("logged out while being reinstated");
            let mut failed = Vec::new();
            entry.core.drain_completions(&mut failed);
            self.stash.append(&mut failed);
            self.sessions[session] = None;
            return Ok(());
        }
        let timeout = entry.config.timeout;
        let result = entry.core.submit_logout(token);
        let outcome = match result {
            Ok(()) => self.wait_until(session, token, timeout),
            Err(e) => Err(InitiatorError::Usage(e.to_string())),
        };
        self.sessions[session] = None;
        match outcome? {
            Outcome::Logout(isoe_wire::pdu::LogoutResponseCode::Closed) => Ok(()),
            Outcome::Logout(code) => Err(InitiatorError::Usage(format!(
                "the target answered the logout with response {}",
                code.to_u8()
            ))),
            Outcome::Failed(TaskError::SessionFailed(_)) => Ok(()),
            other => Err(InitiatorError::Usage(format!(
                "logout ended with {other:?}"
            ))),
        }
    }

    fn wait_until(
        &mut self,
        session: usize,
        token: u64,
        timeout: Duration,
    ) -> Result<Outcome, InitiatorError> {
        let deadline = Instant::now() + timeout;
        let mut done = Vec::new();
        while Instant::now() < deadline {
            self.run(&mut done, TICK, 1, None)?;
            if let Some(i) = done
                .iter()
                .position(|c| c.session == session && c.token == token)
            {
                let mine = done.swap_remove(i);
                self.stash.append(&mut done);
                return Ok(mine.outcome);
            }
            self.stash.append(&mut done);
            self.wait_round(session)?;
        }
        Err(InitiatorError::Timeout {
            portal: self
                .sessions
                .get(session)
                .and_then(Option::as_ref)
                .map_or_else(String::new, |e| e.config.portal.to_string()),
            seconds: timeout.as_secs(),
            during: "waiting for the Logout Response",
        })
    }
}

/// Logs in every connection of a session; the first is the leading login.
fn connect_session(
    index: usize,
    config: &SessionConfig,
    cmd_sn: u32,
    now: Instant,
) -> Result<(SessionCore, Vec<Sock>, u16), InitiatorError> {
    let (first, first_sock) = login_one(config, config.login_config(0, 0, cmd_sn))?;
    let tsih = first.tsih;
    let wanted = config
        .connections
        .max(1)
        .min(first.negotiated.session.max_connections.max(1));
    let mut core = SessionCore::from_login(index, config.keepalive, cmd_sn, &first, now);
    let mut socks = vec![first_sock];
    for cid in 1..wanted {
        let (more, sock) = login_one(config, config.login_config(cid, tsih, cmd_sn))?;
        core.add_login(&more, now);
        socks.push(sock);
    }
    Ok((core, socks, tsih))
}

fn login_one(
    config: &SessionConfig,
    login: InitiatorLoginConfig,
) -> Result<(LoginResult, Sock), InitiatorError> {
    let mut channel = Channel::connect(&config.portal, config.timeout, &config.socket)?;
    let result = channel.login(login)?;
    let (stream, rbuf) = channel.into_parts();
    let fd = stream.as_raw_fd();
    Ok((
        result,
        Sock {
            stream,
            fd,
            rbuf,
            need: 0,
            rcvtimeo: None,
            placement: None,
            header_first: 0,
            rcvlowat: 1,
            registered: None,
        },
    ))
}

/// How much the next `recv` into `sock.rbuf` may take: shortly after a
/// placed PDU, only the rest of the next header; otherwise all there is
/// room for (many PDUs per `recv`).
fn header_first_limit(sock: &mut Sock, limits: &frame::FrameLimits) -> usize {
    if sock.header_first > 0 {
        let held = sock.rbuf.data();
        let header_len = frame::header_bytes_needed(held, limits);
        if held.len() < header_len {
            return header_len - held.len();
        }
        // A whole header that did not start a placement: its data is small.
        sock.header_first = 0;
    }
    usize::MAX
}

/// An epoll call that failed.
fn epoll_error(source: io::Error) -> InitiatorError {
    InitiatorError::Io {
        portal: "epoll".into(),
        source,
    }
}

/// Takes the `n` bytes one `recv` brought on connection `c` (into a
/// placement or the receive buffer), decodes what is whole, and starts
/// placing a large Data-In straight into its task's buffer; Err with why
/// the connection is broken.
fn absorb(
    core: &mut SessionCore,
    sock: &mut Sock,
    c: usize,
    n: usize,
    stats: &mut EngineStats,
) -> Result<(), String> {
    let now = Instant::now();
    match sock.placement.take() {
        Some(mut p) => {
            let data_left = p.data_left();
            let tail = core.placement_received(&mut p, n, now);
            stats.placed_bytes += (data_left - p.data_left()) as u64;
            sock.rbuf.filled(tail);
            if !p.is_complete() {
                sock.placement = Some(p);
                return Ok(());
            }
            core.finish_placement(p).map_err(|ConnFailure(why)| why)?;
            stats.placed_pdus += 1;
            sock.header_first = HEADER_FIRST_PDUS;
        }
        None => sock.rbuf.filled(n),
    }
    match core.handle_input(c, sock.rbuf.data(), now) {
        Ok((used, need)) => {
            sock.rbuf.consume(used);
            sock.need = need;
            if used > 0 {
                sock.header_first = sock.header_first.saturating_sub(1);
            }
        }
        Err(ConnFailure(why)) => return Err(why),
    }
    let held = sock.rbuf.data().len();
    if held > 0 && sock.need >= held + DIRECT_MIN_BYTES {
        if let Some(p) = core.begin_placement(c, sock.rbuf.data(), DIRECT_MIN_BYTES) {
            sock.rbuf.consume(held);
            sock.need = 0;
            sock.placement = Some(p);
        }
    }
    Ok(())
}

/// Sets SO_RCVLOWAT for the next wait on `sock`: while a Data-In is placed,
/// the rest of it, so the wait ends once, when the PDU is whole (and the
/// next header, if in by then, comes with it), instead of once per TCP
/// segment; 1 otherwise, so that any byte ends a wait for a header. A
/// system call only when the value changes: back-to-back PDUs of one size
/// keep it.
fn wake_when_whole(sock: &mut Sock, stats: &mut EngineStats) -> io::Result<()> {
    let want = sock.placement.as_ref().map_or(1, Placement::bytes_left);
    if sock.rcvlowat != want {
        stats.sockopts += 1;
        sys::set_rcvlowat(sock.fd, want)?;
        sock.rcvlowat = want;
    }
    Ok(())
}
