//! A pair in virtual time: the target's `Connection`s against the
//! initiator's session core ([`SessionCore`]), joined by queues of bytes
//! instead of sockets, with no threads and no sleeps (quinn-proto's tests
//! pair a client and a server the same way).
//!
//! The pair owns the clock: an `Instant` fixed at the start plus a
//! `Duration` that moves only when a test says so ([`Pair::advance`]), in
//! steps of [`TICK`], the target worker's tick. It moves what each side
//! flushes to the other (whole, or in pieces of sizes the test chooses),
//! and holds a connection's deliveries in one direction for as long as the
//! test says (a CmdSN gap between the connections of one session, a peer
//! that never answers). The target's connections run under
//! `isoe_target::memory_driver` (the worker's rules, no sockets); the pair
//! carries out what they ask: wake-ups at the end of each round, store work
//! at once or when the test releases it. Logins are the real ones on both
//! sides.

use isoe_initiator::login::{LoginExchange, LoginStep};
use isoe_initiator::session::SessionCore;
use isoe_initiator::{
    Command, Completion, IscsiUrl, Keepalive, Outcome, ScsiStatus, SessionConfig, TaskManagement,
};
use isoe_target::admission::Refusal;
use isoe_target::connection::Work;
use isoe_target::memory_driver::{Drive, MemoryConnection};
use isoe_target::{Config, Server};
use isoe_wire::frame::{decode, encode, Decoded, FrameLimits};
use isoe_wire::negotiate::LocalParams;
use isoe_wire::pdu::RESERVED_TAG;
use isoe_wire::serial::sn_lt;
use isoe_wire::Pdu;
use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const TARGET: &str = "iqn.2026-11.io.isoe:pair";
/// Block size of the test LUN.
pub const BLOCK: usize = 512;
/// How far the clock moves between two rounds of timers: the target's
/// worker ticks once a second.
pub const TICK: Duration = Duration::from_secs(1);
/// Rounds of moving bytes without quiet before the pair calls it a livelock.
const ROUNDS_MAX: usize = 100_000;
/// The CmdSN the initiator's engine starts a session at.
const FIRST_CMD_SN: u32 = 1;

/// A server with one target and a 4 MiB memory LUN 0; `defaults` are lines
/// of its `[defaults]` table.
pub fn server(defaults: &str) -> Arc<Server> {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[defaults]\n{defaults}\n[[target]]\nname = \"{TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n"
    );
    Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
}

/// What the initiator logs in with: `params`, `connections` connections,
/// the ISID's last byte `isid`, no keepalive pings of its own (a test that
/// wants them sets [`SessionConfig::keepalive`]).
pub fn session_config(params: LocalParams, connections: u16, isid: u8) -> SessionConfig {
    let url = IscsiUrl::parse(&format!("iscsi://127.0.0.1/{TARGET}/0")).expect("url");
    let mut config = SessionConfig::from_url(&url);
    config.params = params;
    config.connections = connections;
    config.isid = [0x80, 0, 0, 0, 0x0b, isid];
    config.keepalive = Keepalive {
        interval: None,
        ..Keepalive::default()
    };
    config
}

/// Deliveries on their way in one direction, one flush each, the first
/// perhaps handed over in part already.
#[derive(Default)]
struct Deliveries {
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the first delivery handed over.
    taken: usize,
}

impl Deliveries {
    fn push(&mut self, bytes: Vec<u8>) {
        self.queue.push_back(bytes);
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.taken = 0;
    }

    /// The next `len` bytes at most (all of the first delivery's rest when
    /// `len` is None).
    fn next_piece(&mut self, len: Option<usize>) -> Option<Vec<u8>> {
        let front = self.queue.front()?;
        let rest = &front[self.taken..];
        let piece = rest[..len.unwrap_or(rest.len()).min(rest.len())].to_vec();
        self.taken += piece.len();
        if self.taken == front.len() {
            self.queue.pop_front();
            self.taken = 0;
        }
        Some(piece)
    }
}

/// One connection: the target's state machine and the bytes between it
/// and the initiator's side.
struct Link {
    conn: MemoryConnection,
    /// The initiator's session and connection index, in full feature phase;
    /// None while logging in and for links a test drives by hand, whose
    /// bytes from the target wait in `initiator_rx`.
    initiator: Option<(usize, usize)>,
    /// How PDUs to the target are framed, and the target's are decoded.
    send_limits: FrameLimits,
    recv_limits: FrameLimits,
    /// Deliveries on their way, and bytes arrived but not yet taken, in
    /// each direction.
    to_target: Deliveries,
    to_initiator: Deliveries,
    initiator_rx: Vec<u8>,
    hold_to_target: bool,
    hold_to_initiator: bool,
    /// When the target ended the connection.
    closed_at: Option<Duration>,
    /// Every PDU the target sent, with the time.
    sent: Vec<(Duration, Pdu)>,
    /// The StatSN the target's next status must carry, and the last
    /// ExpCmdSN it sent.
    next_stat_sn: Option<u32>,
    exp_cmd_sn: Option<u32>,
    /// Why the initiator's side failed the connection, if it did.
    failure: Option<String>,
    /// The initiator let the connection go ([`Pair::reinstate`]): what the
    /// target sends on it is read by nobody, and its close is no news.
    abandoned: bool,
}

impl Link {
    /// RFC 7143 §4.2.2.2, §4.2.2.1: each status the target sends on a
    /// connection carries the next StatSN, the PDUs between carry it
    /// unadvanced, and ExpCmdSN never goes back.
    fn check_numbers(&mut self, pdu: &Pdu) {
        let (stat_sn, exp_cmd_sn, advances) = match pdu {
            Pdu::LoginResponse(r) => (r.stat_sn, r.exp_cmd_sn, true),
            Pdu::ScsiResponse(r) => (r.stat_sn, r.exp_cmd_sn, true),
            Pdu::DataIn(d) if d.status_present => (d.stat_sn, d.exp_cmd_sn, true),
            Pdu::DataIn(d) => (self.next_stat_sn.unwrap_or(0), d.exp_cmd_sn, false),
            Pdu::NopIn(n) => (
                n.stat_sn,
                n.exp_cmd_sn,
                n.initiator_task_tag != RESERVED_TAG,
            ),
            Pdu::R2t(r) => (r.stat_sn, r.exp_cmd_sn, false),
            Pdu::TaskMgmtResponse(r) => (r.stat_sn, r.exp_cmd_sn, true),
            Pdu::LogoutResponse(r) => (r.stat_sn, r.exp_cmd_sn, true),
            Pdu::TextResponse(r) => (r.stat_sn, r.exp_cmd_sn, true),
            Pdu::Reject(r) => (r.stat_sn, r.exp_cmd_sn, true),
            other => panic!("the target sent an initiator's PDU: {other:?}"),
        };
        let expected = *self.next_stat_sn.get_or_insert(stat_sn);
        assert_eq!(stat_sn, expected, "StatSN out of sequence in {pdu:?}");
        if advances {
            self.next_stat_sn = Some(expected.wrapping_add(1));
        }
        if !matches!(pdu, Pdu::LoginResponse(_)) {
            if let Some(last) = self.exp_cmd_sn {
                assert!(!sn_lt(exp_cmd_sn, last), "ExpCmdSN went back in {pdu:?}");
            }
            self.exp_cmd_sn = Some(exp_cmd_sn);
        }
    }
}

/// Store work the test holds back.
struct HeldWork {
    link: usize,
    token: u64,
    work: Work,
}

pub struct Pair {
    pub server: Arc<Server>,
    start: Instant,
    elapsed: Duration,
    sessions: Vec<SessionCore>,
    /// Each session's links, by connection index.
    links_of: Vec<Vec<usize>>,
    links: Vec<Link>,
    /// Sizes the bytes of every delivery are handed over in, cycled; empty:
    /// each delivery whole.
    chunks: Vec<usize>,
    next_chunk: usize,
    /// Store work waits for [`Pair::release_work`] instead of running at once.
    pub hold_work: bool,
    /// Prints every PDU an initiator's session sends, as it goes.
    pub print_to_target: bool,
    /// Why logins that reinstate a session were refused ([`Pair::reinstate`]).
    pub reinstate_refusals: Vec<String>,
    /// The portal group new connections arrive through (1 unless a test
    /// sets another).
    pub portal_group: u16,
    held_work: Vec<HeldWork>,
    wakes: Vec<u64>,
    done: Vec<Completion>,
    next_token: u64,
    /// A count the test moves at the events it orders (a store's writes):
    /// each completion is stamped with it as the initiator takes it in.
    pub clock: Arc<AtomicU64>,
    stamps: HashMap<u64, u64>,
}

impl Pair {
    pub fn new(server: Arc<Server>) -> Pair {
        Pair {
            server,
            start: Instant::now(),
            elapsed: Duration::ZERO,
            sessions: Vec::new(),
            links_of: Vec::new(),
            links: Vec::new(),
            chunks: Vec::new(),
            next_chunk: 0,
            hold_work: false,
            print_to_target: false,
            reinstate_refusals: Vec::new(),
            portal_group: 1,
            held_work: Vec::new(),
            wakes: Vec::new(),
            done: Vec::new(),
            next_token: 1,
            clock: Arc::new(AtomicU64::new(0)),
            stamps: HashMap::new(),
        }
    }

    /// Virtual time since the pair began.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    fn now(&self) -> Instant {
        self.start + self.elapsed
    }

    /// Hands the bytes of every later delivery over in pieces of these
    /// sizes, in turn.
    pub fn set_chunks(&mut self, sizes: &[usize]) {
        assert!(sizes.iter().all(|&n| n > 0));
        self.chunks = sizes.to_vec();
    }

    // ---- connections and logins ------------------------------------------

    /// A new connection the target has just accepted on a portal of
    /// [`Pair::portal_group`].
    pub fn connect(&mut self) -> usize {
        let conn = MemoryConnection::accept_in_group(&self.server, self.now(), self.portal_group);
        self.add_link(conn)
    }

    /// A new connection from 127.0.0.1, admitted under `[limits]` as the
    /// target's accept thread admits one: the connections evicted to make
    /// room for it are closed; or the limit that refused it.
    pub fn connect_admitted(&mut self) -> Result<usize, Refusal> {
        let (conn, evicted) = MemoryConnection::admit(&self.server, self.now())?;
        for eviction in evicted {
            let link = self
                .links
                .iter()
                .position(|l| l.conn.is_open() && l.conn.connection().serial() == eviction.serial)
                .expect("an evicted connection is open");
            let mut drive = Drive::default();
            self.links[link].conn.close(&mut drive);
            self.carry_out(link, drive);
        }
        Ok(self.add_link(conn))
    }

    fn add_link(&mut self, conn: MemoryConnection) -> usize {
        self.links.push(Link {
            conn,
            initiator: None,
            send_limits: FrameLimits::LOGIN,
            recv_limits: FrameLimits::LOGIN,
            to_target: Deliveries::default(),
            to_initiator: Deliveries::default(),
            initiator_rx: Vec::new(),
            hold_to_target: false,
            hold_to_initiator: false,
            closed_at: None,
            sent: Vec::new(),
            next_stat_sn: None,
            exp_cmd_sn: None,
            failure: None,
            abandoned: false,
        });
        self.links.len() - 1
    }

    /// Logs a session in as the initiator's engine does (each connection's
    /// login run by [`LoginExchange`] against the target's own login) and
    /// returns its index.
    pub fn login(&mut self, config: &SessionConfig) -> usize {
        let link = self.connect();
        self.login_on(link, config)
    }

    /// [`Pair::login`] with its first connection on `link`, a connection
    /// no login has used yet.
    pub fn login_on(&mut self, link: usize, config: &SessionConfig) -> usize {
        let index = self.sessions.len();
        let first = self.login_connection(link, config.login_config(0, 0, FIRST_CMD_SN));
        let now = self.now();
        let mut core = SessionCore::from_login(index, config.keepalive, FIRST_CMD_SN, &first, now);
        // Consecutive commands alternate between the session's connections,
        // as the ordering tests place them.
        core.set_run_slack(0);
        let links = self.join_the_rest(index, config, &first, &mut core, FIRST_CMD_SN, link);
        self.sessions.push(core);
        self.links_of.push(links);
        index
    }

    /// Logs in the session's other connections beside `first` (on
    /// `link`), adds them to `core`, and ties each link to session `s`:
    /// the session's links, in connection order.
    fn join_the_rest(
        &mut self,
        s: usize,
        config: &SessionConfig,
        first: &isoe_initiator::login::LoginResult,
        core: &mut SessionCore,
        cmd_sn: u32,
        link: usize,
    ) -> Vec<usize> {
        let now = self.now();
        let mut links = vec![link];
        for cid in 1..config.connections {
            let login = config.login_config(cid, first.tsih, cmd_sn);
            let link = self.connect();
            let more = self.login_connection(link, login);
            core.add_login(&more, now);
            links.push(link);
        }
        for (c, &link) in links.iter().enumerate() {
            self.links[link].initiator = Some((s, c));
        }
        links
    }

    fn login_connection(
        &mut self,
        link: usize,
        config: isoe_wire::login::InitiatorLoginConfig,
    ) -> isoe_initiator::login::LoginResult {
        self.try_login_connection(link, config)
            .expect("login accepted")
    }

    fn try_login_connection(
        &mut self,
        link: usize,
        config: isoe_wire::login::InitiatorLoginConfig,
    ) -> Result<isoe_initiator::login::LoginResult, isoe_wire::login::InitiatorLoginError> {
        let mut exchange = LoginExchange::new(config, [0; 32]);
        let mut step = exchange.start();
        loop {
            match step {
                LoginStep::Send { request, data } => {
                    self.send(link, &Pdu::LoginRequest(request), &data);
                    self.run();
                    let (pdu, data) = self.take_pdu(link).expect("a Login Response");
                    let Pdu::LoginResponse(response) = pdu else {
                        panic!("a Login Response expected, got {pdu:?}");
                    };
                    step = exchange.handle_response(&response, &data)?;
                }
                LoginStep::Done(result) => {
                    let (recv, send) = result.limits();
                    let link_state = &mut self.links[link];
                    link_state.recv_limits = recv;
                    link_state.send_limits = send;
                    return Ok(result);
                }
            }
        }
    }

    /// The initiator loses every connection of session `s` at once, as
    /// when its network fails: the target hears each peer leave (bytes on
    /// their way are lost), the initiator's session takes back what was
    /// sent and not answered, and it logs in again with the same ISID
    /// (session reinstatement, RFC 7143 §6.3.5) as the initiator's engine
    /// does: at the CmdSN it had reached, each command it took back going
    /// again on the new connections. Store work of the old connections
    /// that the test holds stays held, and runs when released.
    pub fn reinstate(&mut self, s: usize, config: &SessionConfig) {
        for link in self.links_of[s].clone() {
            self.drop_link(link);
        }
        self.sessions[s].connections_lost();
        let cmd_sn = self.sessions[s].cmd_sn();
        let now = self.now();
        let mut attempts = 0;
        let (link, first) = loop {
            let link = self.connect();
            match self.try_login_connection(link, config.login_config(0, 0, cmd_sn)) {
                Ok(first) => break (link, first),
                // Refused while the old session's store work is out (a
                // target error, to try again): the store finishes it
                // meanwhile, and the initiator waits a while.
                Err(e) if attempts < 3 => {
                    attempts += 1;
                    self.links[link].abandoned = true;
                    self.reinstate_refusals.push(e.to_string());
                    self.release_work_where(|l| l.abandoned);
                    self.advance(TICK);
                }
                Err(e) => panic!("reinstatement refused {attempts} times: {e}"),
            }
        };
        let mut fresh = SessionCore::from_login(s, config.keepalive, cmd_sn, &first, now);
        let links = self.join_the_rest(s, config, &first, &mut fresh, cmd_sn, link);
        self.sessions[s].adopt(fresh);
        self.links_of[s] = links;
    }

    /// Connection `c` of session `s` is lost alone, as on a reset: the
    /// target's side closes, and the initiator's side sends and hears
    /// nothing more on it (the engine would then fail the session; at
    /// ErrorRecoveryLevel 0 the way back is [`Pair::reinstate`]).
    pub fn lose_connection(&mut self, s: usize, c: usize) {
        self.drop_link(self.links_of[s][c]);
        self.sessions[s].conns[c].alive = false;
    }

    /// The initiator lets `link` go and the target's connection closes;
    /// nothing in flight either way arrives.
    fn drop_link(&mut self, link: usize) {
        let l = &mut self.links[link];
        l.initiator = None;
        l.abandoned = true;
        l.to_target.clear();
        l.to_initiator.clear();
        let mut drive = Drive::default();
        l.conn.close(&mut drive);
        self.carry_out(link, drive);
    }

    /// Session `s` logs out (CLOSE_SESSION, in CmdSN order behind what it
    /// sent) and runs until quiet: the Logout's outcome, if it came. Its
    /// links are let go then, as the initiator's engine closes its
    /// sockets: their close is no news ([`Pair::abandoned`]).
    pub fn log_out(&mut self, s: usize) -> Option<Outcome> {
        let token = self.token();
        self.sessions[s]
            .submit_logout(token)
            .expect("a slot for the Logout");
        self.run();
        for link in self.links_of[s].clone() {
            let l = &mut self.links[link];
            l.abandoned = true;
            l.closed_at = None;
        }
        self.take(token).map(|c| c.outcome)
    }

    /// Whether the initiator let `link` go ([`Pair::reinstate`]).
    pub fn abandoned(&self, link: usize) -> bool {
        self.links[link].abandoned
    }

    /// The link of connection `c` of session `s`.
    pub fn link(&self, s: usize, c: usize) -> usize {
        self.links_of[s][c]
    }

    /// The initiator's session core.
    pub fn session(&mut self, s: usize) -> &mut SessionCore {
        &mut self.sessions[s]
    }

    // ---- what a test sees and steers -------------------------------------

    /// Stops (or resumes) the deliveries from the initiator to the target
    /// on `link`; what is sent meanwhile waits, in order.
    pub fn hold_to_target(&mut self, link: usize, hold: bool) {
        self.links[link].hold_to_target = hold;
    }

    /// Whether deliveries to the target on `link` are held.
    pub fn held_to_target(&self, link: usize) -> bool {
        self.links[link].hold_to_target
    }

    /// How many links there are.
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// The same from the target to the initiator.
    pub fn hold_to_initiator(&mut self, link: usize, hold: bool) {
        self.links[link].hold_to_initiator = hold;
    }

    /// Whether the target's input on `link` waits behind a CmdSN gap.
    pub fn waiting(&self, link: usize) -> bool {
        self.links[link].conn.is_waiting()
    }

    /// Whether the target's input on `link` is paused until its output
    /// has room (the Data-In budget, store work of reads out).
    pub fn paused(&self, link: usize) -> bool {
        self.links[link].conn.is_paused()
    }

    /// Bytes the target's side of `link` received and has not handled.
    pub fn unread(&self, link: usize) -> usize {
        self.links[link].conn.unread()
    }

    /// When the target ended `link`, if it did.
    pub fn closed_at(&self, link: usize) -> Option<Duration> {
        self.links[link].closed_at
    }

    /// Every PDU the target sent on `link`, with the time it was sent.
    pub fn sent_by_target(&self, link: usize) -> &[(Duration, Pdu)] {
        &self.links[link].sent
    }

    /// Why the initiator failed `link`, if it did.
    pub fn failure(&self, link: usize) -> Option<&str> {
        self.links[link].failure.as_deref()
    }

    /// Store work held back so far ([`Pair::hold_work`]).
    pub fn held_work(&self) -> usize {
        self.held_work.len()
    }

    /// Runs the held store work and hands each completion back to its
    /// connection; then runs until quiet.
    pub fn release_work(&mut self) {
        self.release_work_where(|_| true);
    }

    /// Lets the held store work of the links `which` picks run.
    fn release_work_where(&mut self, which: impl Fn(&Link) -> bool) {
        let (go, stay): (Vec<HeldWork>, Vec<HeldWork>) = std::mem::take(&mut self.held_work)
            .into_iter()
            .partition(|h| which(&self.links[h.link]));
        self.held_work = stay;
        for held in go {
            let mut drive = Drive::default();
            let completion = held.work.run();
            self.links[held.link]
                .conn
                .complete_work(held.token, completion, &mut drive);
            self.carry_out(held.link, drive);
        }
        self.run();
    }

    // ---- commands ----------------------------------------------------------

    /// Queues a command on session `s`; returns its token.
    pub fn submit(&mut self, s: usize, command: Command) -> u64 {
        let token = self.token();
        self.sessions[s]
            .submit(command, token)
            .expect("command accepted");
        token
    }

    /// Sends a task management function on session `s`; returns its token.
    pub fn task_management(&mut self, s: usize, request: TaskManagement) -> u64 {
        self.task_management_on(s, request, None)
    }

    /// The same on connection `on` of the session, when given.
    pub fn task_management_on(
        &mut self,
        s: usize,
        request: TaskManagement,
        on: Option<usize>,
    ) -> u64 {
        let token = self.token();
        self.sessions[s]
            .submit_task_management_on(request, token, on)
            .expect("task management accepted");
        token
    }

    /// [`Pair::clock`] when the initiator took in the completion of
    /// `token`, once it did.
    pub fn completed_at(&self, token: u64) -> Option<u64> {
        self.stamps.get(&token).copied()
    }

    /// Moves session `s`'s completions to the done list, stamped.
    fn collect(&mut self, s: usize) {
        let from = self.done.len();
        self.sessions[s].drain_completions(&mut self.done);
        let now = self.clock.load(Ordering::SeqCst);
        for c in &self.done[from..] {
            self.stamps.insert(c.token, now);
        }
    }

    fn token(&mut self) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    /// The completion of `token`, once it came.
    pub fn take(&mut self, token: u64) -> Option<Completion> {
        let index = self.done.iter().position(|c| c.token == token)?;
        Some(self.done.swap_remove(index))
    }

    /// Submits `command`, runs until quiet, and returns its completion.
    pub fn execute(&mut self, s: usize, command: Command) -> Completion {
        let token = self.submit(s, command);
        self.run();
        self.take(token).expect("the command completed")
    }

    /// The SCSI status of `command`, which must complete with one.
    pub fn status(&mut self, s: usize, command: Command) -> ScsiStatus {
        match self.execute(s, command).outcome {
            Outcome::Scsi(status) => status,
            other => panic!("a SCSI status expected, got {other:?}"),
        }
    }

    /// Writes `data` at `lba` of LUN 0; panics unless GOOD.
    pub fn write(&mut self, s: usize, lba: u64, data: Vec<u8>) {
        let blocks = (data.len() / BLOCK) as u32;
        let cdb = isoe_initiator::cdb::write16(lba, blocks, false);
        let done = self.execute(s, Command::write(0, &cdb, data));
        done.good().expect("write GOOD");
    }

    /// Reads `blocks` at `lba` of LUN 0; panics unless GOOD.
    pub fn read(&mut self, s: usize, lba: u64, blocks: usize) -> Vec<u8> {
        let cdb = isoe_initiator::cdb::read16(lba, blocks as u32);
        let done = self.execute(s, Command::read(0, &cdb, (blocks * BLOCK) as u32));
        done.good().expect("read GOOD");
        done.buffer
    }

    // ---- bytes by hand -------------------------------------------------------

    /// Sends a PDU on `link` as its initiator would, behind whatever the
    /// initiator's session has queued there.
    pub fn send(&mut self, link: usize, pdu: &Pdu, data: &[u8]) {
        self.initiator_sends(link);
        let mut bytes = Vec::new();
        encode(&mut bytes, pdu, &[], data, &self.links[link].send_limits);
        self.links[link].to_target.push(bytes);
    }

    /// Sends `bytes` on `link` as they are (part of a PDU, say).
    pub fn send_bytes(&mut self, link: usize, bytes: &[u8]) {
        self.initiator_sends(link);
        self.links[link].to_target.push(bytes.to_vec());
    }

    /// The next whole PDU the target sent on a link no session reads.
    pub fn take_pdu(&mut self, link: usize) -> Option<(Pdu, Vec<u8>)> {
        let l = &mut self.links[link];
        match decode(&l.initiator_rx, &FrameLimits::LOGIN).expect("frame") {
            Decoded::Frame { frame, len } => {
                let pdu = frame.pdu().expect("known PDU");
                let data = frame.data.to_vec();
                l.initiator_rx.drain(..len);
                Some((pdu, data))
            }
            Decoded::NeedMore { .. } => None,
        }
    }

    // ---- the drivers -------------------------------------------------------

    /// Moves bytes and runs both sides until nothing more happens.
    pub fn run(&mut self) {
        for _ in 0..ROUNDS_MAX {
            if !self.round() {
                return;
            }
        }
        panic!("still busy after {ROUNDS_MAX} rounds");
    }

    /// Moves the clock on by `by`, a [`TICK`] at a time: each tick runs
    /// both sides' timers, then everything until quiet.
    pub fn advance(&mut self, by: Duration) {
        let end = self.elapsed + by;
        while self.elapsed < end {
            self.elapsed = (self.elapsed + TICK).min(end);
            self.tick();
            self.run();
        }
    }

    fn tick(&mut self) {
        let now = self.now();
        for link in 0..self.links.len() {
            let mut drive = Drive::default();
            self.links[link].conn.tick(now, &mut drive);
            self.carry_out(link, drive);
        }
        for core in &mut self.sessions {
            // The engine would fail the session; the pair only marks the
            // connection, and a test looks.
            for c in core.handle_tick(now) {
                core.conns[c].alive = false;
            }
        }
    }

    /// One round: each side sends, each link delivers, wake-ups run.
    /// Whether anything moved.
    fn round(&mut self) -> bool {
        let mut busy = false;
        for core in &mut self.sessions {
            core.pump();
        }
        for link in 0..self.links.len() {
            busy |= self.initiator_sends(link);
            busy |= self.deliver_to_target(link);
            busy |= self.deliver_to_initiator(link);
        }
        for s in 0..self.sessions.len() {
            self.collect(s);
        }
        while let Some(serial) = self.wakes.pop() {
            busy = true;
            self.wake(serial);
        }
        busy
    }

    /// What the initiator's session queued on `link` goes on its way.
    fn initiator_sends(&mut self, link: usize) -> bool {
        let Some((s, c)) = self.links[link].initiator else {
            return false;
        };
        let core = &mut self.sessions[s];
        if !core.conns[c].has_output() {
            return false;
        }
        let mut bytes = Vec::new();
        core.flush(c, |iov: &[IoSlice<'_>]| {
            iov.iter().for_each(|b| bytes.extend_from_slice(b));
            Ok(iov.iter().map(|b| b.len()).sum())
        })
        .expect("flush into memory");
        let l = &mut self.links[link];
        if self.print_to_target {
            let mut rest = &bytes[..];
            while let Ok(Decoded::Frame { frame, len }) = decode(rest, &l.send_limits) {
                println!(
                    "TRACE {:?} to target link {link}: {:?}",
                    self.elapsed,
                    frame.pdu()
                );
                rest = &rest[len..];
            }
        }
        if l.closed_at.is_none() {
            l.to_target.push(bytes);
        }
        true
    }

    /// How long the next piece of a delivery is at most: `chunks` says.
    fn piece_len(&mut self) -> Option<usize> {
        let n = self.chunks.len();
        if n == 0 {
            return None;
        }
        self.next_chunk += 1;
        Some(self.chunks[(self.next_chunk - 1) % n])
    }

    fn deliver_to_target(&mut self, link: usize) -> bool {
        let l = &self.links[link];
        if l.hold_to_target || l.closed_at.is_some() || l.to_target.is_empty() {
            return false;
        }
        let now = self.now();
        loop {
            let len = self.piece_len();
            let l = &mut self.links[link];
            let Some(piece) = l.to_target.next_piece(len) else {
                return true;
            };
            let mut drive = Drive::default();
            l.conn.receive(&piece, now, &mut drive);
            self.carry_out(link, drive);
            if self.links[link].closed_at.is_some() {
                return true;
            }
        }
    }

    /// Carries out what driving the target's connection on `link` gave:
    /// its output goes on its way, each PDU in it decoded for
    /// [`Pair::sent_by_target`]; wake-ups wait for the end of the round;
    /// store work runs at once, or waits for [`Pair::release_work`].
    fn carry_out(&mut self, link: usize, drive: Drive) {
        let elapsed = self.elapsed;
        let l = &mut self.links[link];
        if !drive.output.is_empty() {
            let mut rest = &drive.output[..];
            while !rest.is_empty() {
                // Under the initiator's limits: its MaxRecvDataSegmentLength too.
                match decode(rest, &l.recv_limits).expect("the target's output decodes") {
                    Decoded::Frame { frame, len } => {
                        let pdu = frame.pdu().expect("a PDU the initiator knows");
                        l.check_numbers(&pdu);
                        l.sent.push((elapsed, pdu));
                        rest = &rest[len..];
                    }
                    Decoded::NeedMore { .. } => panic!("the target sent part of a PDU"),
                }
            }
            l.to_initiator.push(drive.output);
        }
        if drive.closed && !l.abandoned {
            l.closed_at = Some(elapsed);
            l.to_target.clear();
        }
        self.wakes.extend(drive.wakes);
        for (token, work) in drive.work {
            if self.hold_work {
                self.held_work.push(HeldWork { link, token, work });
                continue;
            }
            let mut next = Drive::default();
            let completion = work.run();
            self.links[link]
                .conn
                .complete_work(token, completion, &mut next);
            self.carry_out(link, next);
        }
    }

    fn deliver_to_initiator(&mut self, link: usize) -> bool {
        let l = &self.links[link];
        if l.hold_to_initiator || l.failure.is_some() {
            return false;
        }
        let moved = !l.to_initiator.is_empty();
        loop {
            let len = self.piece_len();
            let l = &mut self.links[link];
            let Some(piece) = l.to_initiator.next_piece(len) else {
                break;
            };
            l.initiator_rx.extend_from_slice(&piece);
            self.feed_initiator(link);
        }
        let l = &self.links[link];
        if l.closed_at.is_some() {
            if let Some((s, c)) = l.initiator {
                // The socket is at its end: the engine would fail the session.
                self.sessions[s].conns[c].alive = false;
            }
        }
        moved
    }

    fn feed_initiator(&mut self, link: usize) {
        let now = self.now();
        let l = &mut self.links[link];
        let Some((s, c)) = l.initiator else {
            return;
        };
        if l.failure.is_some() {
            return;
        }
        match self.sessions[s].handle_input(c, &l.initiator_rx, now) {
            Ok((used, _)) => {
                l.initiator_rx.drain(..used);
            }
            Err(failure) => {
                l.failure = Some(failure.0);
                self.sessions[s].conns[c].alive = false;
            }
        }
        self.collect(s);
    }

    /// A wake-up for the connection with `serial`, as the worker runs it.
    fn wake(&mut self, serial: u64) {
        let now = self.now();
        let Some(link) = self
            .links
            .iter()
            .position(|l| l.conn.is_open() && l.conn.connection().serial() == serial)
        else {
            return;
        };
        let mut drive = Drive::default();
        self.links[link].conn.wake(now, &mut drive);
        self.carry_out(link, drive);
    }
}
