//! One iSCSI connection on the target side: login, then full feature phase.
//!
//! A state machine in the sans-IO manner: no sockets, threads, clocks or
//! randomness inside. The driver feeds it bytes ([`Connection::handle_input`])
//! or decoded frames ([`Connection::handle_frame`]), clock ticks
//! ([`Connection::handle_tick`]) and wake-ups ([`Connection::handle_wake`]),
//! with the time passed in (as it is to [`Connection::flush`] and
//! [`Connection::detach`]), and a random seed at creation. It sends what
//! accumulates in [`Connection::out`] and carries out what
//! [`Connection::poll_action`] asks: wake another connection (its CmdSN gap
//! filled, its session closed), or run store work off the event loop and
//! hand the result back ([`Connection::complete_work`]). The one clock it
//! consults is the driver's, handed in with [`Connection::set_stage_clock`]:
//! a sampled command's stage timings need the time around its store call,
//! inside one `handle_input`; without it no stages are sampled.
//!
//! SCSI commands to memory execute inline, so a connection's work stays on
//! its worker (ARCHITECTURE.md, datapath rule 4); a command whose store
//! calls may wait on a device, and the rest of one the device server leaves
//! for later (SANITIZE without IMMED), go out as an action while the
//! connection goes on with other commands (`execute.rs`).

mod ahead;
mod execute;
mod login;
mod logout_request;
mod nop;
mod scsi;
mod state;
mod target_view;
mod task_management;
mod text;
mod work;

pub use crate::config::LOGIN_DEADLINE;
pub use isoe_scsi::Residual;
use state::{Ahead, BackgroundTask, HeldAnswer, HeldTmf, LoginPhase, PendingText, Phase, Ping};
pub use work::{Finished, Work};

use crate::buffer_pool::BufferPool;
use crate::discovery;
use crate::lun_table::LunTable;
use crate::output::{Output, Payload};
use crate::policy::login_config;
use crate::registry::Server;
use crate::session::{
    AbortBarrier, AbortScope, Admit, Member, PeerProbe, Session, CMD_SN_GAP_WAIT,
};
use crate::write_task::{DataOutError, WriteTask};
use isoe_scsi::{Completion, LogicalUnit, Outcome, Status};
use isoe_wire::frame::{decode, header_bytes_needed, Decoded, Frame, FrameError, FrameLimits};
use isoe_wire::login::{LoginOutcome, TargetLogin};
use isoe_wire::name::escape_for_log;
use isoe_wire::negotiate::SessionType;
use isoe_wire::pdu::{
    self, login_status, logout, reject, DataIn, DataOut, LoginRequest, LogoutRequest,
    LogoutResponse, Lun, NopIn, NopOut, Reject, ScsiCommand, ScsiResponse, TaskMgmtRequest,
    TaskMgmtResponse, TextRequest, TextResponse, RESERVED_TAG,
};
use isoe_wire::{ParseError, Pdu};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Write tasks a connection keeps waiting for Data-Out at once.
const WRITE_TASKS_MAX: usize = 256;
/// Largest Expected Data Transfer Length accepted for a write (bounds what a peer makes us buffer).
pub const WRITE_TRANSFER_BYTES_MAX: u32 = 64 << 20;
/// Tasks ended early whose late Data-Out is still dropped quietly: as
/// many as one function can end on a connection at once (every write
/// waiting for data, and every command of the window ended before it
/// came), so that none of their data is answered with a Reject; 1.5 KiB
/// of tags at most.
const BURIED_TASKS_MAX: usize = WRITE_TASKS_MAX + crate::session::COMMAND_WINDOW as usize;
/// Largest text a peer may send across continued Text Requests.
const TEXT_REQUEST_BYTES_MAX: usize = 64 << 10;

/// What the driver should do after feeding an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// The PDU was not taken: it waits behind a CmdSN gap on another
    /// connection. Feed it again after [`Action::Wake`] names this connection.
    Wait,
    /// Send what is queued, then close the connection.
    Close,
}

/// What a connection asks of its driver besides sending bytes.
pub enum Action {
    /// Call [`Connection::handle_wake`] on the connection with this serial
    /// (perhaps on another worker): its CmdSN gap filled, or its session or
    /// the connection itself was ended from elsewhere.
    Wake(u64),
    /// Run this store work where blocking is allowed, then hand its
    /// completion to [`Connection::complete_work`] with the same token.
    Run {
        /// Identifies the work to its connection.
        token: u64,
        /// The work (a file LUN's read, SANITIZE's overwrite).
        work: Work,
    },
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Wake(serial) => write!(f, "Wake({serial})"),
            Action::Run { token, .. } => write!(f, "Run {{ token: {token} }}"),
        }
    }
}

/// What [`Connection::handle_input`] did with the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// Bytes taken; the rest must be offered again.
    pub consumed: usize,
    /// What to do next.
    pub flow: Flow,
    /// How long the PDU being assembled is as far as the bytes tell (its
    /// header until that is in): a reader that must not take bytes of the
    /// next PDU asks for no more.
    pub need: usize,
    /// Input stopped because the output waiting for the socket reached
    /// [`OUTPUT_BYTES_MAX`]: offer the rest again once some is sent.
    pub output_full: bool,
}

/// How long a write task may wait for Data-Out it asked for (or that the
/// peer may send unasked) before the connection is deemed failed (RFC 7143
/// §7.1.4 at ErrorRecoveryLevel 0).
pub const DATA_OUT_WAIT: Duration = Duration::from_secs(30);

/// Response bytes a connection builds ahead of its socket before it stops
/// taking new PDUs (one command's response may go beyond it).
pub const OUTPUT_BYTES_MAX: usize = 8 << 20;

/// Where a connection is, as its driver and the log need it.
#[derive(Clone)]
pub struct Endpoint {
    /// Unique per connection in the process; [`Action::Wake`] names it.
    pub serial: u64,
    /// The portal address the connection arrived on.
    pub local: SocketAddr,
    /// The tag of that portal's group: the TargetPortalGroupTag its login
    /// declares, and the relative target port of the session it makes.
    pub portal_group_tag: u16,
    /// The initiator's address.
    pub peer: SocketAddr,
    /// Whether the peer closed the connection, asked from elsewhere (see
    /// [`crate::session::Session::closed_by_peer`]).
    pub peer_gone: Option<PeerProbe>,
}

/// The clock a driver hands a connection for the stage timings of sampled
/// commands ([`Connection::set_stage_clock`]).
pub type StageClock = fn() -> Instant;

/// Latencies waiting to be recorded beyond which a flush records them
/// itself ([`Connection::record_latencies`]).
const LATENCIES_PENDING_MAX: usize = 1024;

/// Counters a connection keeps for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConnectionStats {
    /// SCSI commands completed.
    pub commands: u64,
    /// PDUs received.
    pub pdus_in: u64,
    /// Rejects sent.
    pub rejects: u64,
}

/// The target side of one connection.
pub struct Connection {
    server: Arc<Server>,
    serial: u64,
    local: SocketAddr,
    portal_group_tag: u16,
    peer: SocketAddr,
    peer_gone: Option<PeerProbe>,
    random: StdRng,
    phase: Phase,
    recv_limits: FrameLimits,
    send_limits: FrameLimits,
    max_send_segment: u32,
    stat_sn: u32,
    cid: u16,
    /// PDUs waiting to be sent.
    pub out: Output,
    pool: BufferPool,
    writes: HashMap<u32, WriteTask>,
    /// `writes`, counted in the session's window.
    waiting_writes: crate::session::WaitingWrites,
    /// The store work it handed out that has not returned.
    conn_work: Arc<crate::session::ConnectionWork>,
    next_ttt: u32,
    text_in: Vec<u8>,
    text_out: Option<PendingText>,
    last_rx: Instant,
    /// When the connection was accepted (the login deadline runs from it).
    opened: Instant,
    /// Since when a command has waited behind a CmdSN gap.
    waiting_since: Option<Instant>,
    /// Commands were taken and dropped unanswered ([`Admit::Ended`]): the
    /// window moved with no response to say so.
    window_unsaid: bool,
    /// Immediate PDUs delivered past that command ([`ahead`]).
    ahead: Ahead,
    /// Bytes of input taken since the connection began: where the input
    /// fed next starts in the stream.
    rx_offset: u64,
    /// Where the input fed so far ends in the stream: bytes fed past it
    /// are new.
    rx_end: u64,
    ping: Option<Ping>,
    nop_interval: Duration,
    nop_timeout: Duration,
    bound: Option<Arc<Session>>,
    buried: VecDeque<u32>,
    /// Write tasks waiting for write budget before their next R2T.
    starved: VecDeque<u32>,
    background: Vec<BackgroundTask>,
    /// The Data-In the reads among `background` will bring (their expected
    /// lengths): counted with the unsent output against its bound, so
    /// that work out cannot pile up responses past it.
    reads_out: usize,
    /// This connection's part of the process's Data-In budget: at least
    /// its unsent output and reads out once it took a read.
    data_in: crate::budget::Hold,
    /// The Data-In the read next in the input wants, while the budget
    /// cannot cover it: input pauses until it can.
    read_wanted: usize,
    next_token: u64,
    /// Counted among the logins in progress ([`crate::admission`]).
    logging_in: bool,
    /// The answer to a failed login, held back until its time.
    held_answer: Option<HeldAnswer>,
    /// Connections to wake, then work to run, for [`Connection::poll_action`].
    wake: Vec<u64>,
    runs: VecDeque<(u64, Work)>,
    /// Task management responses waiting for aborted work to return.
    held_tmf: Vec<HeldTmf>,
    /// Functions from other connections whose tasks here have ended, to
    /// be told so once the aborted work still out has returned.
    owed: Vec<Arc<AbortBarrier>>,
    /// [`Session::notices`] when this connection last looked at its orders.
    seen_notices: u64,
    /// Counters.
    pub stats: ConnectionStats,
    /// What the control plane shows of this connection, once logged in.
    info: Option<Arc<crate::session::ConnInfo>>,
    /// `[metrics] enabled`: count each command.
    counting: bool,
    /// This connection's handles to its per-LUN counters.
    lun_stats: crate::metrics::LunCache,
    /// When the command being completed was taken (see `complete`).
    command_started: Instant,
    /// The bytes of the medium the command being completed covers, when it
    /// is an UNMAP or a WRITE SAME (see `execute`; `complete` takes it).
    command_range_bytes: u64,
    /// Latencies recorded at the next flush.
    latencies: crate::metrics::PendingLatencies,
    /// When the store of the command being run was called, if it is
    /// sampled for its stages (see `execute`; `complete` takes it).
    store_called: Option<Instant>,
    /// The driver's clock for the stage timings; None: none are sampled.
    stage_clock: Option<StageClock>,
    /// From when a command is sampled for its stages whatever the count:
    /// [`crate::metrics::STAGE_SAMPLE_GAP`] after the last sample's batch.
    sample_due: Instant,
    /// Whether the input being handled came at or after `sample_due`:
    /// looked at once per call of [`Connection::handle_input`], not per
    /// command.
    sample_now: bool,
}

impl Connection {
    /// A connection that has just been accepted at `endpoint`; `seed`
    /// (from the operating system's random source) seeds its CHAP
    /// challenges and the TSIH of a session it creates.
    pub fn new(
        server: Arc<Server>,
        endpoint: Endpoint,
        now: Instant,
        seed: [u8; 32],
    ) -> Connection {
        let defaults = &server.config.defaults;
        let Endpoint {
            serial,
            local,
            portal_group_tag,
            peer,
            peer_gone,
        } = endpoint;
        let machine = TargetLogin::new(login_config(defaults, portal_group_tag));
        server.gate.login_started(serial, peer.ip());
        let output_gauge = Arc::clone(&server.output_bytes);
        let data_in = server.data_in_budget.hold(peer.ip());
        let pooled = Arc::clone(&server.pooled_bytes);
        let nop_interval = Duration::from_secs(defaults.nop_in_interval_s as u64);
        let nop_timeout = Duration::from_secs(defaults.nop_in_timeout_s as u64);
        let datapath = server.config.datapath;
        let counting = server.config.metrics.enabled;
        Connection {
            server,
            serial,
            local,
            portal_group_tag,
            peer,
            peer_gone,
            random: StdRng::from_seed(seed),
            phase: Phase::Login(Box::new(LoginPhase {
                machine,
                first_request: None,
                initiator: None,
                target: None,
            })),
            recv_limits: FrameLimits::LOGIN,
            send_limits: FrameLimits::LOGIN,
            max_send_segment: FrameLimits::LOGIN.max_recv_data_segment_length,
            stat_sn: 0,
            cid: 0,
            out: Output::with_gauge(!datapath.batching, output_gauge),
            pool: BufferPool::shared(datapath.buffer_pool, pooled),
            writes: HashMap::new(),
            waiting_writes: crate::session::WaitingWrites::default(),
            conn_work: Arc::default(),
            next_ttt: 1,
            text_in: Vec::new(),
            text_out: None,
            last_rx: now,
            opened: now,
            waiting_since: None,
            window_unsaid: false,
            ahead: Ahead::default(),
            rx_offset: 0,
            rx_end: 0,
            ping: None,
            nop_interval,
            nop_timeout,
            bound: None,
            buried: VecDeque::new(),
            starved: VecDeque::new(),
            background: Vec::new(),
            reads_out: 0,
            data_in,
            read_wanted: 0,
            next_token: 1,
            logging_in: true,
            held_answer: None,
            wake: Vec::new(),
            runs: VecDeque::new(),
            held_tmf: Vec::new(),
            owed: Vec::new(),
            seen_notices: 0,
            stats: ConnectionStats::default(),
            info: None,
            counting,
            lun_stats: Default::default(),
            command_started: now,
            command_range_bytes: 0,
            latencies: Default::default(),
            store_called: None,
            stage_clock: None,
            sample_due: now,
            sample_now: false,
        }
    }

    /// Samples one command in [`crate::metrics::STAGE_SAMPLE_EVERY`] (and
    /// one a [`crate::metrics::STAGE_SAMPLE_GAP`] when fewer come) for
    /// its stage timings, read from `clock` around its store call (the
    /// target's worker hands in `Instant::now`).
    pub fn set_stage_clock(&mut self, clock: StageClock) {
        self.stage_clock = Some(clock);
    }

    /// The server the connection belongs to.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// What incoming frames are checked against (changes when login completes).
    pub fn recv_limits(&self) -> FrameLimits {
        self.recv_limits
    }

    /// This connection's serial (see [`Endpoint::serial`]).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// Feeds bytes received: every complete PDU in `input` is handled, in
    /// order, until one must wait behind a CmdSN gap, the connection is to
    /// close, or (with `[datapath] batching = false`) one PDU was handled.
    pub fn handle_input(&mut self, input: &[u8], now: Instant) -> Input {
        self.note_received(input.len(), now);
        self.sample_now = now >= self.sample_due;
        let one_pdu = !self.server.config.datapath.batching;
        let mut consumed = 0;
        loop {
            let limits = self.recv_limits;
            let rest = &input[consumed..];
            if self.output_full() && !rest.is_empty() {
                let need = header_bytes_needed(rest, &limits);
                let mut input = self.input(consumed, Flow::Continue, need);
                input.output_full = true;
                return input;
            }
            match decode(rest, &limits) {
                Ok(Decoded::Frame { frame, len }) => {
                    let at = self.rx_offset + consumed as u64;
                    if self.ahead.reached(at) {
                        consumed += len;
                        continue;
                    }
                    if !self.cover_read(frame.bhs) {
                        let mut input = self.input(consumed, Flow::Continue, len);
                        input.output_full = true;
                        return input;
                    }
                    let flow = self.feed_frame(&frame, now);
                    if flow == Flow::Wait {
                        let flow = self.deliver_ahead(rest, len, at, now);
                        return self.input(consumed, flow, len);
                    }
                    consumed += len;
                    if flow == Flow::Close || one_pdu {
                        let need = header_bytes_needed(&input[consumed..], &self.recv_limits);
                        return self.input(consumed, flow, need);
                    }
                }
                Ok(Decoded::NeedMore { total_len }) => {
                    let need = if rest.len() < isoe_wire::BHS_LEN {
                        // The header's length is unknown until the BHS is
                        // in; no PDU is shorter than this.
                        header_bytes_needed(rest, &limits)
                    } else {
                        total_len
                    };
                    return self.input(consumed, Flow::Continue, need);
                }
                Err(error) => {
                    let (flow, skip) = self.handle_frame_error(&error);
                    if flow == Flow::Close {
                        return self.input(consumed, Flow::Close, 0);
                    }
                    consumed += skip;
                }
            }
        }
    }

    /// `held` bytes are fed: while logging in, admission hears of any new
    /// among them, a piece of a PDU too, so that a login whose peer is
    /// sending is not closed to make room for others.
    fn note_received(&mut self, held: usize, now: Instant) {
        let end = self.rx_offset + held as u64;
        if end <= self.rx_end {
            return;
        }
        self.rx_end = end;
        if self.logging_in && matches!(self.phase, Phase::Login(_)) {
            self.server.gate.heard(self.serial, now);
        }
    }

    /// Whether this connection's output is at its bound: its own (8 MiB),
    /// or the process's (`[limits] response_buffer`) while it has output
    /// of its own waiting (one with none may always go on, so every
    /// connection makes progress). Reads whose work is out count as the
    /// output they will be.
    pub fn output_full(&self) -> bool {
        let mine = self.unsent();
        mine >= OUTPUT_BYTES_MAX
            || (mine > 0
                && self
                    .server
                    .output_bytes
                    .load(std::sync::atomic::Ordering::Relaxed)
                    >= self.server.config.limits.response_buffer)
            || (self.read_wanted > 0 && !self.data_in.fits(mine + self.read_wanted))
    }

    /// Output queued and the Data-In of reads whose work is out.
    fn unsent(&self) -> usize {
        self.out.pending_bytes() + self.reads_out
    }

    /// Before a PDU whose answer carries data is taken (a READ: its
    /// expected length; a NOP-Out: the echo of its data), the process's
    /// Data-In budget must cover that data beside what this connection has
    /// unsent: else the PDU stays in the input, which pauses until the
    /// budget can (false). A read longer than an address's share counts as
    /// the share, so that it can go once its connection has sent
    /// everything.
    fn cover_read(&mut self, bhs: &[u8; isoe_wire::BHS_LEN]) -> bool {
        use isoe_wire::Opcode;
        // Out of full feature phase the PDU only ends the login; what it
        // took goes back at the next send.
        let bhs = isoe_wire::Bhs::new_unchecked(bhs);
        let wanted = if bhs.opcode_is(Opcode::ScsiCommand) && bhs.read() {
            bhs.expected_data_transfer_length() as usize
        } else if bhs.opcode_is(Opcode::NopOut) {
            bhs.data_segment_len()
        } else {
            return true;
        };
        let wanted = wanted.min(self.data_in.share());
        if self.data_in.cover(self.unsent() + wanted) {
            self.read_wanted = 0;
            return true;
        }
        self.read_wanted = wanted;
        false
    }

    fn input(&mut self, consumed: usize, flow: Flow, need: usize) -> Input {
        self.rx_offset += consumed as u64;
        if self.window_unsaid {
            self.say_window();
        }
        Input {
            consumed,
            flow,
            need,
            output_full: false,
        }
    }

    /// Tells the initiator where the window stands after commands it
    /// will hear nothing of moved it: an unsolicited NOP-In, which neither
    /// asks for an answer nor advances StatSN (RFC 7143 §11.19.1). Without
    /// it, an initiator whose window those commands had filled would wait
    /// for a response that never comes.
    fn say_window(&mut self) {
        self.window_unsaid = false;
        if !matches!(self.phase, Phase::Full(_)) {
            return;
        }
        let (exp_cmd_sn, max_cmd_sn) = self.window();
        let pdu = Pdu::NopIn(NopIn {
            lun: Lun::default(),
            initiator_task_tag: RESERVED_TAG,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: self.stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
    }

    /// The next thing the driver must do for this connection besides
    /// sending its output, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        if let Some(serial) = self.wake.pop() {
            return Some(Action::Wake(serial));
        }
        self.runs
            .pop_front()
            .map(|(token, work)| Action::Run { token, work })
    }

    /// Another connection woke this one ([`Action::Wake`]): its session or
    /// the connection itself may have been ended, or the CmdSN it waits for
    /// come. The driver feeds the input it holds again when this says
    /// [`Flow::Continue`].
    pub fn handle_wake(&mut self) -> Flow {
        match &self.phase {
            Phase::Full(session) if session.is_closed() => Flow::Close,
            Phase::Full(session) => {
                // Most wake-ups say only that this connection's command is
                // next in CmdSN order: the members' lock is taken only when
                // the session has given out a notice since the last look.
                let notices = session.notices();
                if notices != self.seen_notices {
                    self.seen_notices = notices;
                    if session.is_ended(self.serial) {
                        return Flow::Close;
                    }
                    let session = Arc::clone(session);
                    self.take_orders(&session);
                } else if !self.owed.is_empty() || !self.held_tmf.is_empty() {
                    // A function's tasks elsewhere may have ended.
                    self.release_held();
                }
                Flow::Continue
            }
            Phase::Closed => Flow::Close,
            _ => Flow::Continue,
        }
    }

    /// The session, once in full feature phase.
    pub fn session(&self) -> Option<&Arc<Session>> {
        match &self.phase {
            Phase::Full(s) => Some(s),
            _ => None,
        }
    }

    /// Data buffers waiting for reuse (none with `[datapath] buffer_pool = false`).
    pub fn idle_buffers(&self) -> usize {
        self.pool.idle()
    }

    /// Sends queued output and returns data buffers to the pool; `now` is
    /// the time the driver last read.
    pub fn flush<W: Write>(&mut self, sink: &mut W, now: Instant) -> std::io::Result<bool> {
        if let Some(info) = &self.info {
            // Once per batch, by this thread only: no contention.
            let in_flight = (self.writes.len() + self.background.len()) as u32;
            info.in_flight
                .store(in_flight, std::sync::atomic::Ordering::Relaxed);
        }
        if self.latencies.len() > LATENCIES_PENDING_MAX {
            // A driver that does not call `record_latencies` (or not
            // often): the list stays bounded.
            self.latencies.record(&self.lun_stats, now);
        }
        let sent = self.out.flush(sink, &mut self.pool);
        if self.data_in.held() > 0 {
            // What was sent, and what reads came to less than they
            // announced, goes back to the process.
            self.data_in.release_to(self.unsent());
        }
        sent
    }

    /// Drops the output still queued (the connection is gone: nothing
    /// will send it), giving back what it counted and held.
    pub fn discard_output(&mut self) {
        self.out.clear(&mut self.pool);
    }

    /// Whether commands answered since the last [`Connection::record_latencies`]
    /// wait for their latency to be recorded.
    pub fn has_pending_latencies(&self) -> bool {
        !self.latencies.is_empty()
    }

    /// Records the latencies of the commands answered since the last call,
    /// as ending at `end`: the driver calls it once their output is sent,
    /// with the time it reads anyway.
    pub fn record_latencies(&mut self, end: Instant) {
        self.latencies.record(&self.lun_stats, end);
    }

    fn take_buffer(&mut self) -> Vec<u8> {
        self.pool.take()
    }

    fn next_target_transfer_tag(&mut self) -> u32 {
        let ttt = self.next_ttt;
        self.next_ttt = self.next_ttt.wrapping_add(1);
        if self.next_ttt == RESERVED_TAG {
            self.next_ttt = 1;
        }
        ttt
    }

    fn window(&self) -> (u32, u32) {
        match &self.phase {
            Phase::Full(s) => (s.exp_cmd_sn(), s.max_cmd_sn()),
            _ => (0, 0),
        }
    }

    /// Takes the next StatSN for a response that carries status.
    fn take_stat_sn(&mut self) -> u32 {
        let sn = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        sn
    }

    fn reject(&mut self, reason: reject::RejectReason, bhs: &[u8; 48]) {
        let (exp_cmd_sn, max_cmd_sn) = self.window();
        let pdu = Pdu::Reject(Reject {
            reason,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
            data_sn_or_r2t_sn: 0,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, bhs, &limits);
        self.stats.rejects += 1;
        if let Some(info) = &self.info {
            info.stats.rejects.add(1);
        }
    }

    /// A framing error the decoder found: answer per RFC 7143 and say whether
    /// the connection survives (and how many bytes to skip if so).
    pub fn handle_frame_error(&mut self, error: &FrameError) -> (Flow, usize) {
        if let FrameError::DataDigest { .. } = error {
            // The connection survives; a line each would let a bad link flood the log.
            tracing::debug!(addr = %self.peer, cid = self.cid, "PDU rejected: {error}");
        } else {
            self.log_drop(format_args!("protocol error: {error}"));
        }
        match error {
            // RFC 7143 §7.8: a header digest error leaves the PDU boundary unknown; at ERL 0 the connection ends.
            FrameError::HeaderDigest { .. } => {
                if let Some(info) = &self.info {
                    info.stats.header_digest_errors.add(1);
                }
                (Flow::Close, 0)
            }
            // RFC 7143 §7.8, §11.17.1: data digest error → Reject, reason "Data (payload) Digest Error", PDU discarded.
            FrameError::DataDigest { frame_len, bhs, .. } => {
                if let Some(info) = &self.info {
                    info.stats.data_digest_errors.add(1);
                }
                self.reject(reject::RejectReason::DataDigestError, bhs);
                (Flow::Continue, *frame_len)
            }
            // RFC 7143 §7.2: exceeding the declared MaxRecvDataSegmentLength is a protocol error.
            FrameError::DataSegmentTooLong { bhs, .. } | FrameError::Ahs { bhs, .. } => {
                if matches!(self.phase, Phase::Full(_)) {
                    self.reject(reject::RejectReason::ProtocolError, bhs);
                }
                (Flow::Close, 0)
            }
        }
    }

    /// Feeds one complete PDU. A PDU answered with [`Flow::Wait`] was not
    /// taken and is fed again later; it is counted once, when taken.
    pub fn handle_frame(&mut self, frame: &Frame<'_>, now: Instant) -> Flow {
        self.sample_now = now >= self.sample_due;
        self.feed_frame(frame, now)
    }

    /// [`Connection::handle_frame`] within a call of
    /// [`Connection::handle_input`], which looked at the time once.
    fn feed_frame(&mut self, frame: &Frame<'_>, now: Instant) -> Flow {
        self.last_rx = now;
        let flow = self.take_frame(frame, now);
        if flow != Flow::Wait {
            self.stats.pdus_in += 1;
        }
        flow
    }

    fn take_frame(&mut self, frame: &Frame<'_>, now: Instant) -> Flow {
        let pdu = match frame.pdu() {
            Ok(pdu) => pdu,
            Err(e) => {
                if !matches!(self.phase, Phase::Full(_)) {
                    // RFC 7143 §6.1: before full feature phase only Login PDUs are valid.
                    self.log_drop(format_args!("protocol error during login: {e}"));
                    return Flow::Close;
                }
                let reason = match e {
                    ParseError::UnknownOpcode(_) => reject::RejectReason::CommandNotSupported,
                    ParseError::InvalidField { .. } => reject::RejectReason::InvalidPduField,
                };
                self.reject(reason, frame.bhs);
                return Flow::Continue;
            }
        };
        match &self.phase {
            Phase::Login(_) => self.login(pdu, frame.data, now),
            Phase::Full(session) => {
                let session = session.clone();
                let flow = self.full_feature(&session, pdu, frame, now);
                if !self.starved.is_empty() {
                    self.feed_starved();
                }
                flow
            }
            Phase::Closed => Flow::Close,
        }
    }

    /// Admits a command by CmdSN: `None` to deliver it, else the flow that
    /// ends its handling (ignored outside the window, waiting behind a gap,
    /// or the session closed).
    /// Whether a PDU with `cmd_sn` is taken now; `task` is a SCSI
    /// command's LUN and tag (one ended before it came is buried here).
    fn admit(
        &mut self,
        session: &Session,
        immediate: bool,
        cmd_sn: u32,
        task: Option<(&Lun, u32)>,
    ) -> Option<Flow> {
        let admit = if immediate {
            session.admit_immediate(cmd_sn, task)
        } else {
            session.admit_ordered(cmd_sn, self.serial, &mut self.wake, task)
        };
        match admit {
            Admit::Deliver => {
                self.waiting_since = None;
                None
            }
            Admit::Ended => {
                self.waiting_since = None;
                // Aborted by a function answered before it came: received,
                // not run (RFC 7143 §11.5.1 (a)).
                if let Some((_, tag)) = task {
                    self.bury(tag);
                }
                self.window_unsaid = true;
                Some(Flow::Continue)
            }
            Admit::OutsideWindow => {
                self.waiting_since = None;
                Some(Flow::Continue)
            }
            Admit::Wait => {
                self.waiting_since.get_or_insert(self.last_rx);
                Some(Flow::Wait)
            }
            Admit::Closed => Some(Flow::Close),
        }
    }

    fn full_feature(
        &mut self,
        session: &Arc<Session>,
        pdu: Pdu,
        frame: &Frame<'_>,
        now: Instant,
    ) -> Flow {
        match pdu {
            Pdu::ScsiCommand(cmd) => self.scsi_command(session, &cmd, frame),
            Pdu::DataOut(d) => self.data_out(session, &d, frame),
            Pdu::NopOut(n) => self.nop_out(session, &n, frame.data, now),
            Pdu::TaskMgmtRequest(t) => self.task_management(session, &t, frame),
            Pdu::TextRequest(t) => self.text(session, &t, frame.data, frame.bhs),
            Pdu::LogoutRequest(l) => self.logout(session, &l),
            // RFC 7143 §11.16: SNACK is not supported at ErrorRecoveryLevel 0.
            Pdu::SnackRequest(_) => {
                self.reject(reject::RejectReason::ProtocolError, frame.bhs);
                Flow::Continue
            }
            // A second login on a connection in full feature phase, or a target-side opcode.
            _ => {
                self.reject(reject::RejectReason::ProtocolError, frame.bhs);
                Flow::Continue
            }
        }
    }

    /// How long a new connection may wait before its first complete PDU
    /// (`[limits] first_pdu_timeout_ms`).
    fn first_pdu_timeout(&self) -> Duration {
        Duration::from_millis(self.server.config.limits.first_pdu_timeout_ms)
    }

    /// Time passes: send a NOP-In ping when the link was idle, drop it
    /// when a ping went unanswered, no first PDU came in time, a login
    /// overran its deadline or a command waited too long behind a CmdSN
    /// gap.
    pub fn handle_tick(&mut self, now: Instant) -> Flow {
        if self.server.is_shutting_down() {
            return Flow::Close;
        }
        if let Some(held) = &self.held_answer {
            if now < held.until {
                return Flow::Wait;
            }
            let held = self.held_answer.take().expect("checked above");
            self.out.push(
                &Pdu::LoginResponse(held.response),
                &held.data,
                &FrameLimits::LOGIN,
            );
            return Flow::Close;
        }
        let session = match &self.phase {
            Phase::Full(session) => session,
            Phase::Login(login) => return self.login_timers(login.first_request.is_some(), now),
            Phase::Closed => return Flow::Close,
        };
        if session.is_closed() || session.is_ended(self.serial) {
            return Flow::Close;
        }
        // Behind a CmdSN gap the connection reads nothing, the awaited data
        // included; the gap has its own deadline below.
        // Nor while input is paused on what its peer cannot hasten: the
        // Data-In budget other peers hold, or its own reads in the store.
        // The peer's data and a ping's answer wait behind it.
        let paused_by_us =
            self.read_wanted > 0 || (self.out.pending_bytes() == 0 && self.output_full());
        let overdue = self.waiting_since.is_none()
            && !paused_by_us
            && self.writes.values().any(|t| {
                t.awaits_data()
                    && t.last_data
                        .is_some_and(|at| now.duration_since(at) >= DATA_OUT_WAIT)
            });
        if overdue {
            self.log_drop(format_args!(
                "solicited write data not sent within {DATA_OUT_WAIT:?}"
            ));
            return Flow::Close;
        }
        if !self.starved.is_empty() {
            self.feed_starved();
        }
        if !self.held_tmf.is_empty() {
            // A function may wait on work of a connection gone, which
            // wakes no one when it returns.
            self.release_held();
        }
        let Phase::Full(session) = &self.phase else {
            return Flow::Close;
        };
        if let Some(since) = self.waiting_since {
            if now.duration_since(since) >= CMD_SN_GAP_WAIT {
                self.log_drop(format_args!(
                    "a command waited {CMD_SN_GAP_WAIT:?} for a CmdSN gap to fill"
                ));
                session.stop_waiting(self.serial);
                return Flow::Close;
            }
            // The ping's answer waits behind the same gap.
            return Flow::Continue;
        }
        if paused_by_us {
            return Flow::Continue;
        }
        if let Some(ping) = &self.ping {
            if !self.nop_timeout.is_zero() && now.duration_since(ping.sent_at) >= self.nop_timeout {
                self.log_drop(format_args!(
                    "NOP-In ping unanswered for {:?}",
                    self.nop_timeout
                ));
                return Flow::Close;
            }
            return Flow::Continue;
        }
        if self.nop_interval.is_zero() || now.duration_since(self.last_rx) < self.nop_interval {
            return Flow::Continue;
        }
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        let target_transfer_tag = self.next_target_transfer_tag();
        let pdu = Pdu::NopIn(NopIn {
            lun: Lun::default(),
            initiator_task_tag: RESERVED_TAG,
            target_transfer_tag,
            // RFC 7143 §11.19: with the reserved ITT, StatSN is not advanced.
            stat_sn: self.stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
        self.ping = Some(Ping {
            target_transfer_tag,
            sent_at: now,
        });
        Flow::Continue
    }

    /// The timers of a connection still logging in (`started`: its first
    /// PDU came): the first PDU's timeout, then the whole login's deadline.
    fn login_timers(&self, started: bool, now: Instant) -> Flow {
        let open_for = now.duration_since(self.opened);
        if !started && open_for > self.first_pdu_timeout() {
            // Debug: a flood of silent connections is no news per
            // connection (the evictions and refusals say so).
            tracing::debug!(
                addr = %self.peer,
                portal = %self.local,
                "connection closed: no complete PDU within {:?}",
                self.first_pdu_timeout()
            );
            return Flow::Close;
        }
        // The whole login, not each request, has a deadline: a peer
        // that keeps a login alive with slow continued requests
        // still holds it no longer than this.
        if open_for > LOGIN_DEADLINE {
            tracing::warn!(
                addr = %self.peer,
                portal = %self.local,
                "login abandoned: not done within {LOGIN_DEADLINE:?}"
            );
            return Flow::Close;
        }
        Flow::Continue
    }

    /// Detaches from the session once the socket is done: pending writes are
    /// dropped, and a session whose last connection this was is forgotten
    /// (its other connections, if it was closed, come out of
    /// [`Connection::poll_action`] to be woken). The latencies not yet
    /// recorded end at `now`.
    pub fn detach(&mut self, now: Instant) {
        // Full feature phase ends in Closed only by a logout's response.
        let after_logout = matches!(self.phase, Phase::Closed);
        self.end_login();
        self.abort_tasks(|_| true);
        // Its tasks have ended (work still out finds no connection); the
        // functions that waited on them wait on, for the work still out
        // (a write under way may yet land).
        for barrier in std::mem::take(&mut self.owed) {
            if !self.conn_work.keep(&barrier) {
                self.wake.extend(barrier.done(self.serial));
            }
        }
        self.background.clear();
        self.reads_out = 0;
        // What it holds of the Data-In budget goes back now: a driver may
        // keep a closed connection a while before dropping it.
        self.data_in.release_to(0);
        self.read_wanted = 0;
        self.release_held();
        self.phase = Phase::Closed;
        let Some(session) = self.bound.take() else {
            tracing::debug!(
                addr = %self.peer,
                portal = %self.local,
                by_peer = self.closed_by_peer(),
                "connection closed before full feature phase"
            );
            return;
        };
        self.latencies.record(&self.lun_stats, now);
        if let (Some(info), Some(target)) = (&self.info, &session.target) {
            self.server
                .stats
                .retire(&target.name, &info.stats, &session.retired);
        }
        let mut session_ended = false;
        if session.leave(self.serial, &self.conn_work, &mut self.wake) || session.is_closed() {
            session.close(self.serial, &mut self.wake);
            session.end_nexus();
            self.server.remove_session(&session);
            session_ended = true;
        }
        tracing::info!(
            initiator = %escape_for_log(&session.initiator_name),
            addr = %self.peer,
            target = session.target.as_ref().map(|t| tracing::field::display(&t.name)),
            tsih = session.tsih,
            cid = self.cid,
            session_ended,
            "connection closed{}",
            if after_logout {
                " after logout"
            } else if self.server.is_shutting_down() {
                ": the target is shutting down"
            } else if self.closed_by_peer() {
                " by the initiator, without logout"
            } else {
                // Dropped (logged with the reason), its session closed or
                // reinstated, or the socket failed.
                ""
            }
        );
    }

    /// Whether the peer closed the socket; a peek at it, so asked only
    /// where a log line is written (inside the event's macro).
    fn closed_by_peer(&self) -> bool {
        self.peer_gone.as_ref().is_some_and(|gone| gone())
    }

    /// The connection ends for `why` (a timeout, a protocol error): one
    /// warning with who it was.
    fn log_drop(&self, why: fmt::Arguments<'_>) {
        let Some(session) = &self.bound else {
            tracing::warn!(
                addr = %self.peer,
                portal = %self.local,
                "connection dropped: {why}"
            );
            return;
        };
        tracing::warn!(
            initiator = %escape_for_log(&session.initiator_name),
            addr = %self.peer,
            target = session.target.as_ref().map(|t| tracing::field::display(&t.name)),
            tsih = session.tsih,
            cid = self.cid,
            "connection dropped: {why}"
        );
    }
}
