//! One iSCSI connection on the target side: login, then full feature phase.
//!
//! A state machine in the sans-IO manner: no sockets, threads, clocks or
//! randomness inside. The driver feeds it bytes ([`Connection::handle_input`])
//! or decoded frames ([`Connection::handle_frame`]), clock ticks
//! ([`Connection::handle_tick`]) and wake-ups ([`Connection::handle_wake`]),
//! with the time passed in, and a random seed at creation. It sends what
//! accumulates in [`Connection::out`] and carries out what
//! [`Connection::poll_action`] asks: wake another connection (its CmdSN gap
//! filled, its session closed), or run store work off the event loop and
//! hand the result back ([`Connection::complete_work`]).
//!
//! SCSI commands execute inline, so a connection's work stays on its
//! worker (ARCHITECTURE.md, datapath rule 4); the exception is a command the
//! device server leaves for later (SANITIZE without IMMED,
//! [`isoe_scsi::Outcome::Later`]), whose work goes out as an action while
//! the connection goes on with other commands.

use crate::buffer_pool::BufferPool;
use crate::discovery;
use crate::output::Output;
use crate::registry::{login_config, Server, Target};
use crate::session::{Admit, Member, PeerProbe, Session, CMD_SN_GAP_WAIT};
use crate::write_task::{DataOutError, WriteTask};
use isoe_scsi::{Background, Completion, LogicalUnit, Nexus, Outcome, Status};
use isoe_wire::frame::{decode, header_bytes_needed, Decoded, Frame, FrameError, FrameLimits};
use isoe_wire::login::{LoginOutcome, TargetLogin};
use isoe_wire::name::escape_for_log;
use isoe_wire::negotiate::SessionType;
use isoe_wire::pdu::{
    self, login_status, logout, reject, tmf, DataIn, DataOut, LoginRequest, LogoutRequest,
    LogoutResponse, Lun, NopIn, NopOut, Reject, ScsiCommand, ScsiResponse, TaskMgmtRequest,
    TaskMgmtResponse, TextRequest, TextResponse, RESERVED_TAG,
};
use isoe_wire::{ParseError, Pdu};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SCSI opcode of REPORT LUNS, answered for the whole target (SPC-5 6.33).
const REPORT_LUNS: u8 = 0xa0;
/// Write tasks a connection keeps waiting for Data-Out at once.
const WRITE_TASKS_MAX: usize = 256;
/// Largest Expected Data Transfer Length accepted for a write (bounds what a peer makes us buffer).
pub const WRITE_TRANSFER_BYTES_MAX: u32 = 64 << 20;
/// Tasks ended early whose late Data-Out is still dropped quietly.
const BURIED_TASKS_MAX: usize = 32;
/// Largest text a peer may send across continued Text Requests.
const TEXT_REQUEST_BYTES_MAX: usize = 64 << 10;

/// How long a login may take from the connection's first byte to full
/// feature phase, continued requests and all.
pub const LOGIN_DEADLINE: Duration = Duration::from_secs(30);

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
        /// The work (SANITIZE's overwrite, say).
        work: Background,
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
    /// The initiator's address.
    pub peer: SocketAddr,
    /// Whether the peer closed the connection, asked from elsewhere (see
    /// [`crate::session::Session::closed_by_peer`]).
    pub peer_gone: Option<PeerProbe>,
}

struct LoginPhase {
    machine: TargetLogin,
    first_request: Option<LoginRequest>,
    /// The InitiatorName the login text gave, for the log.
    initiator: Option<String>,
}

/// Longest iSCSI name (RFC 7143 §4.2.7.1); a longer one is cut in the log.
const NAME_BYTES_MAX: usize = 223;

/// The InitiatorName key of a login text segment, if it holds one.
fn initiator_name_in(data: &[u8]) -> Option<String> {
    let value = data
        .split(|&b| b == 0)
        .find_map(|pair| pair.strip_prefix(b"InitiatorName="))?;
    let value = &value[..value.len().min(NAME_BYTES_MAX)];
    Some(String::from_utf8_lossy(value).into_owned())
}

enum Phase {
    Login(Box<LoginPhase>),
    Full(Arc<Session>),
    Closed,
}

/// A command whose work runs elsewhere ([`Action::Run`]).
struct BackgroundTask {
    token: u64,
    command: ScsiCommand,
    residual: Residual,
}

/// A login failure's answer held back ([`crate::admission::FailureLog`]).
struct HeldAnswer {
    response: isoe_wire::pdu::LoginResponse,
    data: Vec<u8>,
    until: Instant,
}

struct PendingText {
    target_transfer_tag: u32,
    data: Vec<u8>,
    sent: usize,
}

struct Ping {
    target_transfer_tag: u32,
    sent_at: Instant,
}

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
    next_ttt: u32,
    text_in: Vec<u8>,
    text_out: Option<PendingText>,
    last_rx: Instant,
    /// When the connection was accepted (the login deadline runs from it).
    opened: Instant,
    /// Since when a command has waited behind a CmdSN gap.
    waiting_since: Option<Instant>,
    ping: Option<Ping>,
    nop_interval: Duration,
    nop_timeout: Duration,
    bound: Option<Arc<Session>>,
    buried: VecDeque<u32>,
    /// Write tasks waiting for write budget before their next R2T.
    starved: VecDeque<u32>,
    background: Vec<BackgroundTask>,
    next_token: u64,
    /// Counted among the logins in progress ([`crate::admission`]).
    logging_in: bool,
    /// The answer to a failed login, held back until its time.
    held_answer: Option<HeldAnswer>,
    /// Connections to wake, then work to run, for [`Connection::poll_action`].
    wake: Vec<u64>,
    runs: VecDeque<(u64, Background)>,
    /// Counters.
    pub stats: ConnectionStats,
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
        let machine = TargetLogin::new(login_config(defaults, 1));
        let Endpoint {
            serial,
            local,
            peer,
            peer_gone,
        } = endpoint;
        server.gate.login_started();
        let nop_interval = Duration::from_secs(defaults.nop_in_interval_s as u64);
        let nop_timeout = Duration::from_secs(defaults.nop_in_timeout_s as u64);
        let datapath = server.config.datapath;
        Connection {
            server,
            serial,
            local,
            peer,
            peer_gone,
            random: StdRng::from_seed(seed),
            phase: Phase::Login(Box::new(LoginPhase {
                machine,
                first_request: None,
                initiator: None,
            })),
            recv_limits: FrameLimits::LOGIN,
            send_limits: FrameLimits::LOGIN,
            max_send_segment: FrameLimits::LOGIN.max_recv_data_segment_length,
            stat_sn: 0,
            cid: 0,
            out: Output::new(!datapath.batching),
            pool: BufferPool::new(datapath.buffer_pool),
            writes: HashMap::new(),
            next_ttt: 1,
            text_in: Vec::new(),
            text_out: None,
            last_rx: now,
            opened: now,
            waiting_since: None,
            ping: None,
            nop_interval,
            nop_timeout,
            bound: None,
            buried: VecDeque::new(),
            starved: VecDeque::new(),
            background: Vec::new(),
            next_token: 1,
            logging_in: true,
            held_answer: None,
            wake: Vec::new(),
            runs: VecDeque::new(),
            stats: ConnectionStats::default(),
        }
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
        let one_pdu = !self.server.config.datapath.batching;
        let mut consumed = 0;
        loop {
            let limits = self.recv_limits;
            let rest = &input[consumed..];
            if self.out.pending_bytes() >= OUTPUT_BYTES_MAX && !rest.is_empty() {
                let need = header_bytes_needed(rest, &limits);
                let mut input = self.input(consumed, Flow::Continue, need);
                input.output_full = true;
                return input;
            }
            match decode(rest, &limits) {
                Ok(Decoded::Frame { frame, len }) => {
                    let flow = self.handle_frame(&frame, now);
                    if flow == Flow::Wait {
                        return self.input(consumed, Flow::Wait, len);
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

    fn input(&self, consumed: usize, flow: Flow, need: usize) -> Input {
        Input {
            consumed,
            flow,
            need,
            output_full: false,
        }
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

    /// Work handed out by [`Action::Run`] is done: its response is queued,
    /// unless the command was aborted meanwhile.
    pub fn complete_work(&mut self, token: u64, completion: Completion) {
        let Some(index) = self.background.iter().position(|b| b.token == token) else {
            return;
        };
        let task = self.background.remove(index);
        let Phase::Full(session) = &self.phase else {
            return;
        };
        let session = Arc::clone(session);
        let empty = self.take_buffer();
        self.complete(&session, &task.command, completion, empty, task.residual);
    }

    /// Another connection woke this one ([`Action::Wake`]): its session or
    /// the connection itself may have been ended, or the CmdSN it waits for
    /// come. The driver feeds the input it holds again when this says
    /// [`Flow::Continue`].
    pub fn handle_wake(&mut self) -> Flow {
        match &self.phase {
            Phase::Full(session) if session.is_closed() || session.is_ended(self.serial) => {
                Flow::Close
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

    /// Sends queued output and returns data buffers to the pool.
    pub fn flush<W: Write>(&mut self, sink: &mut W) -> std::io::Result<bool> {
        self.out.flush(sink, &mut self.pool)
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

    fn reject(&mut self, reason: u8, bhs: &[u8; 48]) {
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
    }

    /// A framing error the decoder found: answer per RFC 7143 and say whether
    /// the connection survives (and how many bytes to skip if so).
    pub fn handle_frame_error(&mut self, error: &FrameError) -> (Flow, usize) {
        match error {
            // RFC 7143 §7.8: a header digest error leaves the PDU boundary unknown; at ERL 0 the connection ends.
            FrameError::HeaderDigest { .. } => (Flow::Close, 0),
            // RFC 7143 §7.8, §11.17.1: data digest error → Reject, reason "Data (payload) Digest Error", PDU discarded.
            FrameError::DataDigest { frame_len, bhs, .. } => {
                self.reject(reject::DATA_DIGEST_ERROR, bhs);
                (Flow::Continue, *frame_len)
            }
            // RFC 7143 §7.2: exceeding the declared MaxRecvDataSegmentLength is a protocol error.
            FrameError::DataSegmentTooLong { bhs, .. } | FrameError::Ahs { bhs, .. } => {
                if matches!(self.phase, Phase::Full(_)) {
                    self.reject(reject::PROTOCOL_ERROR, bhs);
                }
                (Flow::Close, 0)
            }
        }
    }

    /// Feeds one complete PDU.
    pub fn handle_frame(&mut self, frame: &Frame<'_>, now: Instant) -> Flow {
        self.last_rx = now;
        self.stats.pdus_in += 1;
        let pdu = match frame.pdu() {
            Ok(pdu) => pdu,
            Err(e) => {
                if !matches!(self.phase, Phase::Full(_)) {
                    // RFC 7143 §6.1: before full feature phase only Login PDUs are valid.
                    return Flow::Close;
                }
                let reason = match e {
                    ParseError::UnknownOpcode(_) => reject::COMMAND_NOT_SUPPORTED,
                    ParseError::InvalidField { .. } => reject::INVALID_PDU_FIELD,
                };
                self.reject(reason, frame.bhs);
                return Flow::Continue;
            }
        };
        match &self.phase {
            Phase::Login(_) => self.login(pdu, frame.data),
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

    fn login(&mut self, pdu: Pdu, data: &[u8]) -> Flow {
        let Pdu::LoginRequest(req) = pdu else {
            // RFC 7143 §6.3: anything but a Login Request during login ends the connection.
            return Flow::Close;
        };
        let mut random = [0u8; 32];
        self.random.fill_bytes(&mut random);
        let Phase::Login(phase) = &mut self.phase else {
            return Flow::Close;
        };
        let first = *phase.first_request.get_or_insert(req);
        if phase.initiator.is_none() {
            phase.initiator = initiator_name_in(data);
        }
        let step = phase
            .machine
            .handle_request(&req, data, &*self.server, &random);
        let initiator = phase.initiator.clone();
        let mut response = step.response;
        response.tsih = first.tsih;
        response.stat_sn = self.take_stat_sn();
        response.exp_cmd_sn = first.cmd_sn;
        response.max_cmd_sn = first.cmd_sn;
        let limits = FrameLimits::LOGIN;
        match step.outcome {
            LoginOutcome::Continue => {
                self.out
                    .push(&Pdu::LoginResponse(response), &step.data, &limits);
                Flow::Continue
            }
            LoginOutcome::Failed(failure) => {
                let delay = if response.status_class == login_status::INITIATOR_ERROR
                    && response.status_detail == login_status::AUTHENTICATION_FAILURE
                {
                    self.server
                        .auth_failures
                        .failed(self.peer.ip(), self.last_rx)
                } else {
                    Duration::ZERO
                };
                eprintln!(
                    "isoe: login from {} ({}) on {} refused: {}",
                    self.peer,
                    escape_for_log(initiator.as_deref().unwrap_or("?")),
                    self.local,
                    escape_for_log(&failure.reason)
                );
                self.phase = Phase::Closed;
                if !delay.is_zero() {
                    // Repeated failures from this address: the answer waits
                    // (handle_tick sends it), and nothing more is read.
                    self.held_answer = Some(HeldAnswer {
                        response,
                        data: step.data,
                        until: self.last_rx + delay,
                    });
                    return Flow::Wait;
                }
                self.out
                    .push(&Pdu::LoginResponse(response), &step.data, &limits);
                Flow::Close
            }
            LoginOutcome::Complete(negotiated) => {
                let bound = self.bind_session(&first, &negotiated);
                match bound {
                    Ok(session) => {
                        response.tsih = session.tsih;
                        response.exp_cmd_sn = session.exp_cmd_sn();
                        response.max_cmd_sn = session.max_cmd_sn();
                        self.out
                            .push(&Pdu::LoginResponse(response), &step.data, &limits);
                        let c = negotiated.connection;
                        self.cid = negotiated.cid;
                        self.recv_limits = FrameLimits {
                            max_recv_data_segment_length: c.max_recv_data_segment_length,
                            header_digest: c.header_digest,
                            data_digest: c.data_digest,
                            crc: self.server.config.datapath.crc,
                        };
                        self.send_limits = FrameLimits {
                            max_recv_data_segment_length: c.max_send_data_segment_length,
                            ..self.recv_limits
                        };
                        self.max_send_segment = c.max_send_data_segment_length;
                        if let Some(t) = &session.target {
                            self.nop_interval =
                                Duration::from_secs(t.params.nop_in_interval_s as u64);
                            self.nop_timeout =
                                Duration::from_secs(t.params.nop_in_timeout_s as u64);
                        }
                        eprintln!(
                            "isoe: login from {} ({}) on {}: {} session TSIH {}, CID {}{}",
                            self.peer,
                            escape_for_log(&session.initiator_name),
                            self.local,
                            if session.target.is_some() {
                                "normal"
                            } else {
                                "discovery"
                            },
                            session.tsih,
                            self.cid,
                            session
                                .target
                                .as_ref()
                                .map(|t| format!(", target {}", t.name))
                                .unwrap_or_default()
                        );
                        self.bound = Some(session.clone());
                        self.phase = Phase::Full(session);
                        self.end_login();
                        Flow::Continue
                    }
                    Err((detail, why)) => {
                        eprintln!(
                            "isoe: login from {} ({}) on {} refused: {}",
                            self.peer,
                            escape_for_log(&negotiated.session.initiator_name),
                            self.local,
                            escape_for_log(&why)
                        );
                        response.transit = false;
                        response.status_class = if detail == login_status::OUT_OF_RESOURCES {
                            login_status::TARGET_ERROR
                        } else {
                            login_status::INITIATOR_ERROR
                        };
                        response.status_detail = detail;
                        self.out.push(&Pdu::LoginResponse(response), &[], &limits);
                        self.phase = Phase::Closed;
                        Flow::Close
                    }
                }
            }
        }
    }

    /// Creates the session (TSIH 0) or joins the existing one (MC/S).
    fn bind_session(
        &mut self,
        first: &LoginRequest,
        negotiated: &isoe_wire::login::Negotiated,
    ) -> Result<Arc<Session>, (u8, String)> {
        let params = &negotiated.session;
        let target = match (&params.session_type, &params.target_name) {
            (SessionType::Normal, Some(name)) => match self.server.target(name) {
                Some(t) => Some(t.clone()),
                None => return Err((login_status::NOT_FOUND, format!("no target named {name}"))),
            },
            (SessionType::Normal, None) => {
                return Err((login_status::MISSING_PARAMETER, "TargetName missing".into()))
            }
            (SessionType::Discovery, _) => None,
        };
        let member = Member {
            cid: negotiated.cid,
            serial: self.serial,
            peer_gone: self.peer_gone.clone(),
            ended: false,
        };
        if negotiated.tsih_requested == 0 {
            let target_name = target.as_ref().map(|t| t.name.clone());
            let random = self.random.next_u32() as u16;
            let session = self
                .server
                .create_session(
                    (&params.initiator_name, first.isid, target_name.as_deref()),
                    random,
                    &mut self.wake,
                    |tsih| {
                        Session::new(
                            tsih,
                            first.isid,
                            params.initiator_name.clone(),
                            target,
                            params.clone(),
                            first.cmd_sn,
                        )
                    },
                )
                .map_err(|e| (login_status::OUT_OF_RESOURCES, e.to_string()))?;
            session
                .join(member, &mut self.wake)
                .map_err(|e| (login_status::TOO_MANY_CONNECTIONS, e.to_string()))?;
            Ok(session)
        } else {
            let Some(session) = self.server.find_session(
                &params.initiator_name,
                first.isid,
                negotiated.tsih_requested,
            ) else {
                return Err((
                    login_status::SESSION_DOES_NOT_EXIST,
                    format!("no session with TSIH {}", negotiated.tsih_requested),
                ));
            };
            let same_target = match (&session.target, &target) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same_target {
                return Err((
                    login_status::CANT_INCLUDE_IN_SESSION,
                    "connection names another target than its session".into(),
                ));
            }
            session
                .join(member, &mut self.wake)
                .map_err(|e| (login_status::TOO_MANY_CONNECTIONS, e.to_string()))?;
            Ok(session)
        }
    }

    /// Admits a command by CmdSN: `None` to deliver it, else the flow that
    /// ends its handling (ignored outside the window, waiting behind a gap,
    /// or the session closed).
    fn admit(&mut self, session: &Session, immediate: bool, cmd_sn: u32) -> Option<Flow> {
        let admit = if immediate {
            session.admit_immediate(cmd_sn)
        } else {
            session.admit_ordered(cmd_sn, self.serial, &mut self.wake)
        };
        match admit {
            Admit::Deliver | Admit::OutsideWindow => self.waiting_since = None,
            Admit::Wait => {
                self.waiting_since.get_or_insert(self.last_rx);
            }
            Admit::Closed => {}
        }
        match admit {
            Admit::Deliver => None,
            Admit::OutsideWindow => Some(Flow::Continue),
            Admit::Wait => Some(Flow::Wait),
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
            Pdu::TaskMgmtRequest(t) => self.task_management(session, &t),
            Pdu::TextRequest(t) => self.text(session, &t, frame.data),
            Pdu::LogoutRequest(l) => self.logout(session, &l),
            // RFC 7143 §11.16: SNACK is not supported at ErrorRecoveryLevel 0.
            Pdu::SnackRequest(_) => {
                self.reject(reject::PROTOCOL_ERROR, frame.bhs);
                Flow::Continue
            }
            // A second login on a connection in full feature phase, or a target-side opcode.
            _ => {
                self.reject(reject::PROTOCOL_ERROR, frame.bhs);
                Flow::Continue
            }
        }
    }

    fn scsi_command(
        &mut self,
        session: &Arc<Session>,
        cmd: &ScsiCommand,
        frame: &Frame<'_>,
    ) -> Flow {
        // Borrowed from the caller's session handle, not cloned: no atomic
        // reference-count traffic per command.
        let Some(target) = session.target.as_deref() else {
            // RFC 7143 §4.3: a discovery session carries no SCSI commands.
            self.reject(reject::PROTOCOL_ERROR, frame.bhs);
            return Flow::Continue;
        };
        if let Some(flow) = self.admit(session, cmd.immediate, cmd.cmd_sn) {
            return flow;
        }
        let cdb = frame.cdb();
        let lu = cmd.lun.number().and_then(|n| target.lun(n));
        let edtl = cmd.expected_data_transfer_length;
        if frame.data.len() as u32 > edtl
            || (!frame.data.is_empty() && !session.params.immediate_data)
        {
            // RFC 7143 §11.3: immediate data beyond EDTL, or when ImmediateData=No, is a protocol error.
            self.reject(reject::PROTOCOL_ERROR, frame.bhs);
            return Flow::Continue;
        }
        let all_in = frame.data.len() as u32 == edtl;
        if !cmd.write || edtl == 0 || all_in || !worth_soliciting(lu, &cdb, edtl) {
            // Data is asked for only once the LUN and the command are known
            // good: a command that will fail (or wants no data) is answered
            // now, and whatever data the peer still sends unasked is dropped.
            let data_out = if cmd.write { frame.data } else { &[][..] };
            if cmd.write && !all_in {
                self.bury(cmd.initiator_task_tag);
            }
            self.execute(session, target, lu, cmd, &cdb, data_out);
            return Flow::Continue;
        }
        if edtl > WRITE_TRANSFER_BYTES_MAX
            || self.writes.len() >= WRITE_TASKS_MAX
            || self.writes.contains_key(&cmd.initiator_task_tag)
        {
            self.reject(reject::PROTOCOL_ERROR, frame.bhs);
            return Flow::Close;
        }
        let params = &session.params;
        let buffer = self.take_buffer();
        let mut task = WriteTask::new(
            *cmd,
            cdb.into_owned(),
            buffer,
            frame.data,
            params.initial_r2t,
            params.first_burst_length,
            params.max_burst_length,
            params.max_outstanding_r2t,
        );
        // What the peer may send unasked is bounded by FirstBurstLength and
        // cannot be refused: it is charged whatever the budget says.
        task.charged = task.unsolicited_len() as usize;
        self.server
            .write_budget
            .force_take(self.peer.ip(), task.charged);
        task.last_data = Some(self.last_rx);
        self.writes.insert(cmd.initiator_task_tag, task);
        self.solicit(session, cmd.initiator_task_tag);
        Flow::Continue
    }

    /// Sends R2Ts for a write task up to MaxOutstandingR2T, as far as the
    /// process's write budget allows; a task that gets none waits in
    /// `starved` for budget given back.
    fn solicit(&mut self, session: &Session, itt: u32) {
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        loop {
            let Some(task) = self.writes.get_mut(&itt) else {
                return;
            };
            let Some(len) = task.next_r2t_len() else {
                return;
            };
            if !self
                .server
                .write_budget
                .try_take(self.peer.ip(), len as usize)
            {
                if !task.awaits_data() && !self.starved.contains(&itt) {
                    self.starved.push_back(itt);
                }
                return;
            }
            task.charged += len as usize;
            task.last_data = Some(self.last_rx);
            let ttt = self.next_target_transfer_tag();
            let Some(task) = self.writes.get_mut(&itt) else {
                return;
            };
            let Some(r2t) = task.next_r2t(ttt) else {
                return;
            };
            let pdu = Pdu::R2t(pdu::R2t {
                lun: task.command.lun,
                initiator_task_tag: itt,
                target_transfer_tag: r2t.target_transfer_tag,
                // RFC 7143 §11.8.4: an R2T carries the next StatSN without advancing it.
                stat_sn: self.stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                r2t_sn: r2t.r2t_sn,
                buffer_offset: r2t.buffer_offset,
                desired_data_transfer_length: r2t.desired_data_transfer_length,
            });
            let limits = self.send_limits;
            self.out.push(&pdu, &[], &limits);
        }
    }

    fn data_out(&mut self, session: &Arc<Session>, d: &DataOut, frame: &Frame<'_>) -> Flow {
        let Some(task) = self.writes.get_mut(&d.initiator_task_tag) else {
            if self.buried.contains(&d.initiator_task_tag) {
                return Flow::Continue;
            }
            // RFC 7143 §11.7: Data-Out for a task we don't know: Reject, "Invalid PDU field".
            self.reject(reject::INVALID_PDU_FIELD, frame.bhs);
            return Flow::Continue;
        };
        task.last_data = Some(self.last_rx);
        match task.accept(d, frame.data) {
            Ok(false) => {
                self.solicit(session, d.initiator_task_tag);
                Flow::Continue
            }
            Ok(true) => {
                let task = self.take_write(d.initiator_task_tag).expect("task present");
                let Some(target) = session.target.as_deref() else {
                    return Flow::Close;
                };
                let lu = task.command.lun.number().and_then(|n| target.lun(n));
                let (command, cdb, buffer) = task.into_parts();
                self.execute(session, target, lu, &command, &cdb, &buffer);
                self.recycle(buffer);
                Flow::Continue
            }
            Err(DataOutError::UnknownTransferTag(_)) => {
                self.reject(reject::INVALID_PDU_FIELD, frame.bhs);
                Flow::Continue
            }
            Err(error) => {
                // At ERL 0 a task whose Data-Out sequence is broken can't be
                // recovered: end it with CHECK CONDITION (SAM-5 ABORTED
                // COMMAND, iSCSI ASCs of SPC-5 table 49) and keep the
                // connection for the session's other tasks.
                let (asc, ascq) = match error {
                    DataOutError::DataSn { .. } => (0x4b, 0x00),
                    DataOutError::Offset { .. } => (0x4b, 0x05),
                    DataOutError::Overrun | DataOutError::Unsolicited => (0x4b, 0x02),
                    DataOutError::UnknownTransferTag(_) => (0x4b, 0x01),
                };
                if let Some(task) = self.take_write(d.initiator_task_tag) {
                    let (command, _, buffer) = task.into_parts();
                    self.recycle(buffer);
                    self.bury(command.initiator_task_tag);
                    let sense = isoe_scsi::Sense::new(
                        isoe_scsi::sense::sense_key::ABORTED_COMMAND,
                        asc,
                        ascq,
                    );
                    let completion = Completion {
                        status: Status::CheckCondition,
                        sense: Some(sense),
                    };
                    let empty = self.take_buffer();
                    self.complete(session, &command, completion, empty, Residual::default());
                }
                Flow::Continue
            }
        }
    }

    /// The login is over (full feature phase, or the connection ends): it
    /// no longer counts against `[limits] logins`.
    fn end_login(&mut self) {
        if std::mem::take(&mut self.logging_in) {
            self.server.gate.login_ended();
        }
    }

    /// Removes a write task, giving its bytes back to the write budget.
    fn take_write(&mut self, itt: u32) -> Option<WriteTask> {
        let task = self.writes.remove(&itt)?;
        self.server.write_budget.give(self.peer.ip(), task.charged);
        Some(task)
    }

    /// Solicits data for tasks that waited for write budget, oldest first,
    /// while there is budget.
    fn feed_starved(&mut self) {
        let Phase::Full(session) = &self.phase else {
            return;
        };
        let session = Arc::clone(session);
        for _ in 0..self.starved.len() {
            let Some(itt) = self.starved.pop_front() else {
                return;
            };
            self.solicit(&session, itt);
            if self.starved.back() == Some(&itt) {
                // Still no budget: the others wait too.
                return;
            }
        }
    }

    /// Remembers a task that ended early, so the rest of its Data-Out is dropped quietly.
    fn bury(&mut self, initiator_task_tag: u32) {
        if self.buried.len() >= BURIED_TASKS_MAX {
            self.buried.pop_front();
        }
        self.buried.push_back(initiator_task_tag);
    }

    fn recycle(&mut self, buffer: Vec<u8>) {
        self.pool.give(buffer);
    }

    /// Runs a command and queues its Data-In and status.
    fn execute(
        &mut self,
        session: &Session,
        target: &Target,
        lu: Option<&Arc<LogicalUnit>>,
        cmd: &ScsiCommand,
        cdb: &[u8],
        data_out: &[u8],
    ) {
        let mut data_in = self.take_buffer();
        let view = TargetView {
            target,
            server: &self.server,
        };
        let (outcome, write_residual) =
            run_command(&session.nexus, &view, lu, cmd, cdb, data_out, &mut data_in);
        self.stats.commands += 1;
        match outcome {
            Outcome::Done(completion) => {
                self.complete(session, cmd, completion, data_in, write_residual);
            }
            Outcome::Later(work) => {
                self.recycle(data_in);
                self.run_in_background(cmd, work, write_residual);
            }
        }
    }

    /// Hands a command's remaining work to the driver ([`Action::Run`]);
    /// its response goes out from [`Connection::complete_work`].
    fn run_in_background(&mut self, cmd: &ScsiCommand, work: Background, residual: Residual) {
        let token = self.next_token;
        self.next_token += 1;
        self.background.push(BackgroundTask {
            token,
            command: *cmd,
            residual,
        });
        self.runs.push_back((token, work));
    }

    /// Whether commands are running in the background.
    pub fn has_background(&self) -> bool {
        !self.background.is_empty()
    }

    fn complete(
        &mut self,
        session: &Session,
        cmd: &ScsiCommand,
        completion: Completion,
        data_in: Vec<u8>,
        write_residual: Residual,
    ) {
        let edtl = cmd.expected_data_transfer_length;
        let produced = data_in.len() as u32;
        let send_len = if cmd.read { produced.min(edtl) } else { 0 };
        let residual = if cmd.read {
            Residual::between(produced, edtl)
        } else {
            write_residual
        };
        let good = completion.status == Status::Good && completion.sense.is_none();
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        let limits = self.send_limits;
        if send_len == 0 {
            self.recycle(data_in);
        } else {
            let index = self.out.adopt(data_in);
            let segment = self.max_send_segment.max(512);
            let mut offset = 0u32;
            let mut data_sn = 0u32;
            while offset < send_len {
                let len = segment.min(send_len - offset);
                let last = offset + len == send_len;
                let with_status = last && good;
                let pdu = Pdu::DataIn(DataIn {
                    final_bit: last,
                    acknowledge: false,
                    overflow: with_status && residual.overflow,
                    underflow: with_status && residual.underflow,
                    status_present: with_status,
                    status: completion.status as u8,
                    lun: cmd.lun,
                    initiator_task_tag: cmd.initiator_task_tag,
                    target_transfer_tag: RESERVED_TAG,
                    stat_sn: if with_status {
                        self.take_stat_sn()
                    } else {
                        self.stat_sn
                    },
                    exp_cmd_sn,
                    max_cmd_sn,
                    data_sn,
                    buffer_offset: offset,
                    residual_count: if with_status { residual.count } else { 0 },
                });
                self.out.push_with_data(
                    &pdu,
                    index,
                    offset as usize..(offset + len) as usize,
                    &limits,
                );
                offset += len;
                data_sn += 1;
            }
            if good {
                return;
            }
        }
        let mut sense_segment = [0u8; 2 + SENSE_BYTES_MAX];
        let sense_len = match &completion.sense {
            Some(sense) => {
                let fixed = sense.to_fixed();
                let n = fixed.len().min(SENSE_BYTES_MAX);
                sense_segment[..2].copy_from_slice(&(n as u16).to_be_bytes());
                sense_segment[2..2 + n].copy_from_slice(&fixed[..n]);
                2 + n
            }
            None => 0,
        };
        let pdu = Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            overflow: residual.overflow,
            underflow: residual.underflow,
            response: 0,
            status: completion.status as u8,
            initiator_task_tag: cmd.initiator_task_tag,
            snack_tag: 0,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
            exp_data_sn: 0,
            bidi_read_residual_count: 0,
            residual_count: residual.count,
        });
        self.out.push(&pdu, &sense_segment[..sense_len], &limits);
    }

    fn nop_out(&mut self, session: &Arc<Session>, n: &NopOut, data: &[u8], _now: Instant) -> Flow {
        if n.initiator_task_tag == RESERVED_TAG {
            // RFC 7143 §11.18: the answer to our NOP-In ping (or an unsolicited ack); no response.
            if self
                .ping
                .as_ref()
                .is_some_and(|p| p.target_transfer_tag == n.target_transfer_tag)
            {
                self.ping = None;
            }
            return Flow::Continue;
        }
        if let Some(flow) = self.admit(session, n.immediate, n.cmd_sn) {
            return flow;
        }
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        let pdu = Pdu::NopIn(NopIn {
            lun: n.lun,
            initiator_task_tag: n.initiator_task_tag,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
        });
        let limits = self.send_limits;
        // RFC 7143 §11.19: a ping's data is echoed back.
        self.out.push(&pdu, data, &limits);
        Flow::Continue
    }

    /// Time passes: send a NOP-In ping when the link was idle, drop it
    /// when a ping went unanswered, a login overran its deadline or a
    /// command waited too long behind a CmdSN gap.
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
            Phase::Login(_) => {
                // The whole login, not each request, has a deadline: a peer
                // that keeps a login alive with slow continued requests
                // still holds it no longer than this.
                if now.duration_since(self.opened) > LOGIN_DEADLINE {
                    eprintln!(
                        "isoe: login from {} on {} abandoned: not done within {:?}",
                        self.peer, self.local, LOGIN_DEADLINE
                    );
                    return Flow::Close;
                }
                return Flow::Continue;
            }
            Phase::Closed => return Flow::Close,
        };
        if session.is_closed() || session.is_ended(self.serial) {
            return Flow::Close;
        }
        let overdue = self.writes.values().any(|t| {
            t.awaits_data()
                && t.last_data
                    .is_some_and(|at| now.duration_since(at) >= DATA_OUT_WAIT)
        });
        if overdue {
            eprintln!(
                "isoe: connection from {} ({}) dropped: solicited write data not sent within {:?}",
                self.peer,
                escape_for_log(&session.initiator_name),
                DATA_OUT_WAIT
            );
            return Flow::Close;
        }
        if !self.starved.is_empty() {
            self.feed_starved();
        }
        let Phase::Full(session) = &self.phase else {
            return Flow::Close;
        };
        if let Some(since) = self.waiting_since {
            if now.duration_since(since) >= CMD_SN_GAP_WAIT {
                eprintln!(
                    "isoe: connection from {} ({}) dropped: a command waited {:?} for a CmdSN gap to fill",
                    self.peer, escape_for_log(&session.initiator_name), CMD_SN_GAP_WAIT
                );
                session.stop_waiting(self.serial);
                return Flow::Close;
            }
            // The ping's answer waits behind the same gap.
            return Flow::Continue;
        }
        if let Some(ping) = &self.ping {
            if !self.nop_timeout.is_zero() && now.duration_since(ping.sent_at) >= self.nop_timeout {
                eprintln!(
                    "isoe: connection from {} ({}) on {} dropped: NOP-In ping unanswered for {:?}",
                    self.peer,
                    escape_for_log(&session.initiator_name),
                    self.local,
                    self.nop_timeout
                );
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

    fn task_management(&mut self, session: &Arc<Session>, t: &TaskMgmtRequest) -> Flow {
        let exp_before = session.exp_cmd_sn();
        if let Some(flow) = self.admit(session, t.immediate, t.cmd_sn) {
            return flow;
        }
        let target = session.target.clone();
        let lun_exists = |lun: &Lun| {
            target
                .as_ref()
                .and_then(|tg| lun.number().and_then(|n| tg.lun(n)))
                .is_some()
        };
        let mut close = false;
        let response = match t.function {
            tmf::ABORT_TASK => {
                let referenced = t.referenced_task_tag;
                if let Some(task) = self.take_write(referenced) {
                    let (_, _, buffer) = task.into_parts();
                    self.recycle(buffer);
                    self.bury(referenced);
                    tmf::RESP_COMPLETE
                } else if let Some(index) = self
                    .background
                    .iter()
                    .position(|b| b.command.initiator_task_tag == referenced)
                {
                    // The command ends without a response; its work goes on
                    // (SBC-4: a sanitize operation survives aborts and resets).
                    self.background.remove(index);
                    tmf::RESP_COMPLETE
                } else if isoe_wire::serial::sn_in_window(
                    t.ref_cmd_sn,
                    exp_before,
                    session.max_cmd_sn(),
                ) && isoe_wire::serial::sn_lt(t.ref_cmd_sn, t.cmd_sn)
                {
                    // RFC 7143 §11.5.1 (a): RefCmdSN in the window and below the TMF's own: treat as received, "Function complete".
                    tmf::RESP_COMPLETE
                } else {
                    // RFC 7143 §11.5.1 (b): the task is gone (completed) or never was.
                    tmf::RESP_NO_TASK
                }
            }
            tmf::ABORT_TASK_SET | tmf::CLEAR_TASK_SET | tmf::LOGICAL_UNIT_RESET => {
                if !lun_exists(&t.lun) {
                    tmf::RESP_NO_LUN
                } else {
                    self.abort_tasks(|command| command.lun == t.lun);
                    if t.function == tmf::LOGICAL_UNIT_RESET {
                        reset_units(session, Some(&t.lun), isoe_scsi::attention::RESET_OCCURRED);
                    }
                    tmf::RESP_COMPLETE
                }
            }
            tmf::TARGET_WARM_RESET => {
                self.abort_tasks(|_| true);
                reset_units(session, None, isoe_scsi::attention::RESET_OCCURRED);
                tmf::RESP_COMPLETE
            }
            tmf::TARGET_COLD_RESET => {
                self.abort_tasks(|_| true);
                reset_units(session, None, isoe_scsi::attention::POWER_ON_OCCURRED);
                close = true;
                tmf::RESP_COMPLETE
            }
            tmf::TASK_REASSIGN => tmf::RESP_REASSIGN_UNSUPPORTED,
            tmf::CLEAR_ACA => tmf::RESP_NOT_SUPPORTED,
            _ => tmf::RESP_REJECTED,
        };
        let pdu = Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response,
            initiator_task_tag: t.initiator_task_tag,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn: session.exp_cmd_sn(),
            max_cmd_sn: session.max_cmd_sn(),
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
        if close {
            Flow::Close
        } else {
            Flow::Continue
        }
    }

    /// Ends the commands `which` picks without a response: those waiting
    /// for Data-Out, and those running in the background (whose work goes
    /// on, its completion unsent).
    fn abort_tasks(&mut self, which: impl Fn(&ScsiCommand) -> bool) {
        self.background.retain(|b| !which(&b.command));
        let tags: Vec<u32> = self
            .writes
            .iter()
            .filter(|(_, t)| which(&t.command))
            .map(|(k, _)| *k)
            .collect();
        for tag in tags {
            if let Some(task) = self.take_write(tag) {
                let (_, _, buffer) = task.into_parts();
                self.recycle(buffer);
                self.bury(tag);
            }
        }
    }

    fn text(&mut self, session: &Arc<Session>, t: &TextRequest, data: &[u8]) -> Flow {
        if let Some(flow) = self.admit(session, t.immediate, t.cmd_sn) {
            return flow;
        }
        let continuing = self.text_out.as_ref().is_some_and(|p| {
            p.target_transfer_tag == t.target_transfer_tag && t.target_transfer_tag != RESERVED_TAG
        });
        if !continuing {
            self.text_out = None;
            if self.text_in.len() + data.len() > TEXT_REQUEST_BYTES_MAX {
                self.text_in.clear();
                return Flow::Close;
            }
            self.text_in.extend_from_slice(data);
            if t.continue_bit {
                // RFC 7143 §11.10.2: more text follows; answer with an empty response.
                self.queue_text_response(session, t, Vec::new(), true);
                return Flow::Continue;
            }
            let request = std::mem::take(&mut self.text_in);
            let answer = discovery::answer_text(&self.server, session, &request, self.local);
            self.queue_text_response(session, t, answer, false);
        } else {
            self.send_text_chunk(session, t);
        }
        Flow::Continue
    }

    fn queue_text_response(
        &mut self,
        session: &Session,
        t: &TextRequest,
        data: Vec<u8>,
        empty_continue: bool,
    ) {
        if empty_continue {
            let pdu = Pdu::TextResponse(TextResponse {
                final_bit: false,
                continue_bit: false,
                lun: t.lun,
                initiator_task_tag: t.initiator_task_tag,
                target_transfer_tag: self.next_target_transfer_tag(),
                stat_sn: self.take_stat_sn(),
                exp_cmd_sn: session.exp_cmd_sn(),
                max_cmd_sn: session.max_cmd_sn(),
            });
            let limits = self.send_limits;
            self.out.push(&pdu, &[], &limits);
            return;
        }
        self.text_out = Some(PendingText {
            target_transfer_tag: RESERVED_TAG,
            data,
            sent: 0,
        });
        self.send_text_chunk(session, t);
    }

    fn send_text_chunk(&mut self, session: &Session, t: &TextRequest) {
        let Some(mut pending) = self.text_out.take() else {
            return;
        };
        let chunk = (pending.data.len() - pending.sent).min(self.max_send_segment as usize);
        let done = pending.sent + chunk == pending.data.len();
        let ttt = if done {
            RESERVED_TAG
        } else {
            self.next_target_transfer_tag()
        };
        let pdu = Pdu::TextResponse(TextResponse {
            final_bit: done,
            continue_bit: !done,
            lun: t.lun,
            initiator_task_tag: t.initiator_task_tag,
            target_transfer_tag: ttt,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn: session.exp_cmd_sn(),
            max_cmd_sn: session.max_cmd_sn(),
        });
        let limits = self.send_limits;
        self.out.push(
            &pdu,
            &pending.data[pending.sent..pending.sent + chunk],
            &limits,
        );
        pending.sent += chunk;
        if !done {
            pending.target_transfer_tag = ttt;
            self.text_out = Some(pending);
        }
    }

    fn logout(&mut self, session: &Arc<Session>, l: &LogoutRequest) -> Flow {
        if let Some(flow) = self.admit(session, l.immediate, l.cmd_sn) {
            return flow;
        }
        let mut flow = Flow::Continue;
        let response = match l.reason_code {
            logout::CLOSE_SESSION => {
                session.close(self.serial, &mut self.wake);
                // RFC 7143 11.15: the response says cleanup is done, so the
                // nexus (and a reservation it held) ends before it is sent.
                session.end_nexus();
                flow = Flow::Close;
                logout::RESP_CLOSED
            }
            logout::CLOSE_CONNECTION if l.cid == self.cid => {
                flow = Flow::Close;
                logout::RESP_CLOSED
            }
            logout::CLOSE_CONNECTION if session.has_cid(l.cid) => {
                session.close_cid(l.cid, self.serial, &mut self.wake);
                logout::RESP_CLOSED
            }
            logout::CLOSE_CONNECTION => logout::RESP_CID_NOT_FOUND,
            logout::REMOVE_CONNECTION_FOR_RECOVERY => logout::RESP_RECOVERY_UNSUPPORTED,
            _ => logout::RESP_CLEANUP_FAILED,
        };
        let pdu = Pdu::LogoutResponse(LogoutResponse {
            response,
            initiator_task_tag: l.initiator_task_tag,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn: session.exp_cmd_sn(),
            max_cmd_sn: session.max_cmd_sn(),
            time2wait: 0,
            time2retain: 0,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
        eprintln!(
            "isoe: logout from {} ({}) on {}: reason {}, CID {}, response {response}",
            self.peer,
            escape_for_log(&session.initiator_name),
            self.local,
            l.reason_code,
            l.cid
        );
        if flow == Flow::Close {
            self.phase = Phase::Closed;
        }
        flow
    }

    /// Detaches from the session once the socket is done: pending writes are
    /// dropped, and a session whose last connection this was is forgotten
    /// (its other connections, if it was closed, come out of
    /// [`Connection::poll_action`] to be woken).
    pub fn detach(&mut self) {
        self.end_login();
        self.abort_tasks(|_| true);
        self.phase = Phase::Closed;
        if let Some(session) = self.bound.take() {
            if session.leave(self.serial) || session.is_closed() {
                session.close(self.serial, &mut self.wake);
                session.end_nexus();
                self.server.remove_session(&session);
            }
        }
    }
}

/// Whether a write's data is worth asking for: the LUN exists, the CDB is
/// whole, it moves data out, and the amount fits what the command must
/// carry. Anything else is answered before any data is solicited.
fn worth_soliciting(lu: Option<&Arc<LogicalUnit>>, cdb: &[u8], edtl: u32) -> bool {
    let Some(lu) = lu else {
        return false;
    };
    matches!(lu.transfer_length(cdb), Ok((isoe_scsi::DataDirection::Out, wanted)) if wanted > 0)
        && lu.check_data_out_length(cdb, edtl).is_ok()
}

/// Bytes of sense data carried at most (fixed format with SKS fits in 18).
const SENSE_BYTES_MAX: usize = 252;

/// Residual over- or underflow of one command (RFC 7143 §11.4.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residual {
    /// O bit: the command wanted more than EDTL.
    pub overflow: bool,
    /// U bit: less than EDTL was transferred.
    pub underflow: bool,
    /// The count that goes with the bit.
    pub count: u32,
}

impl Residual {
    /// Residual of a transfer of `actual` bytes against an EDTL of `expected`.
    pub fn between(actual: u32, expected: u32) -> Residual {
        if actual > expected {
            Residual {
                overflow: true,
                underflow: false,
                count: actual - expected,
            }
        } else if actual < expected {
            Residual {
                overflow: false,
                underflow: true,
                count: expected - actual,
            }
        } else {
            Residual::default()
        }
    }
}

/// SAM-5 6.6: a LOGICAL UNIT RESET (one unit) or TARGET RESET (every unit
/// of the session's target) tells every I_T nexus with the `condition` unit
/// attention.
fn reset_units(session: &Session, lun: Option<&Lun>, condition: isoe_scsi::Sense) {
    let Some(target) = session.target.as_deref() else {
        return;
    };
    match lun {
        Some(lun) => {
            if let Some(lu) = lun.number().and_then(|n| target.lun(n)) {
                lu.reset(condition);
            }
        }
        None => target.units().for_each(|lu| lu.reset(condition)),
    }
}

/// What a command may ask of the target beyond its own unit: the target's
/// other units, and whether another I_T nexus's connections are closed.
struct TargetView<'a> {
    target: &'a Target,
    server: &'a Server,
}

impl isoe_scsi::UnitDirectory for TargetView<'_> {
    fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        self.target.unit_by_naa(naa)
    }

    fn nexus_closed(&self, nexus: &Nexus) -> bool {
        self.server.nexus_closed(nexus)
    }
}

/// Starts one SCSI command against `lu` (or the target for REPORT LUNS /
/// an absent LUN), returning its outcome and, for writes, the residual
/// between what the CDB asked for and EDTL.
fn run_command(
    nexus: &Nexus,
    view: &TargetView<'_>,
    lu: Option<&Arc<LogicalUnit>>,
    cmd: &ScsiCommand,
    cdb: &[u8],
    data_out: &[u8],
    data_in: &mut Vec<u8>,
) -> (Outcome, Residual) {
    let target = view.target;
    if cdb.first() == Some(&REPORT_LUNS) {
        return (
            Outcome::Done(isoe_scsi::report_luns(cdb, target.lun_numbers(), data_in)),
            Residual::default(),
        );
    }
    let Some(lu) = lu else {
        return (
            Outcome::Done(isoe_scsi::execute_no_lun(
                cdb,
                target.lun_numbers(),
                data_in,
            )),
            Residual::default(),
        );
    };
    if !cmd.write {
        return (
            lu.start(nexus, view, cdb, data_out, data_in),
            Residual::default(),
        );
    }
    let wanted = match lu.transfer_length(cdb) {
        Ok((_, bytes)) => bytes,
        Err(completion) => return (Outcome::Done(completion), Residual::default()),
    };
    let edtl = cmd.expected_data_transfer_length;
    if let Err(completion) = lu.check_data_out_length(cdb, edtl) {
        return (Outcome::Done(completion), Residual::between(wanted, edtl));
    }
    let residual = Residual::between(wanted, edtl);
    let usable = &data_out[..data_out.len().min(wanted as usize)];
    (lu.start(nexus, view, cdb, usable, data_in), residual)
}
