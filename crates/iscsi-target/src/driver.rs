//! The target's I/O driver: one listener thread per portal, one thread per
//! connection doing blocking reads into a large buffer (every complete PDU
//! of a read is handled before the one vectored send of its responses), and
//! a graceful shutdown.
//!
//! A thread per connection keeps a connection's work on one core with no
//! event-loop bookkeeping: a read returns everything the socket has, which is
//! the batching datapath rule 2 asks for, at one syscall per batch each way.
//!
//! With `[datapath] batching = false` the same loop runs one PDU per system
//! call instead (see [`crate::config::Datapath::batching`]): each read asks
//! only for the rest of the PDU being assembled, and the responses to each
//! PDU are sent, one write per PDU, before the next read.

use crate::config::Config;
use crate::connection::{Connection, Flow};
use crate::registry::{Server, SetupError};
use isoe_wire::frame::{decode, header_bytes_needed, Decoded};
use isoe_wire::BHS_LEN;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// How often an idle connection wakes to run timers (NOP-In, shutdown).
const TICK: Duration = Duration::from_millis(1000);
/// How soon a background command's response goes out after its work ends.
const BACKGROUND_TICK: Duration = Duration::from_millis(20);
/// Receive buffer per connection: room for several PDUs per read.
const RECV_BUFFER_BYTES: usize = 512 << 10;
/// How long shutdown waits for connections to finish.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Why the target could not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// Opening LUNs failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A portal could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The portal address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
}

/// A receive buffer holding bytes read but not yet decoded.
struct RecvBuffer {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuffer {
    fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer {
            bytes: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Makes room so that a frame of `total` bytes fits from `start`.
    fn make_room(&mut self, total: usize) {
        if self.start + total > self.bytes.len() {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if total > self.bytes.len() {
                self.bytes.resize(total, 0);
            }
        }
    }

    fn spare(&mut self) -> &mut [u8] {
        if self.end == self.bytes.len() {
            self.make_room(self.bytes.len());
        }
        &mut self.bytes[self.end..]
    }
}

/// Serves one accepted connection until it closes.
fn serve(server: Arc<Server>, stream: TcpStream) {
    let local = match stream.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TICK));
    let mut conn = Connection::new(
        server.clone(),
        local,
        stream.try_clone().ok(),
        Instant::now(),
    );
    let batching = server.config.datapath.batching;
    let mut set_tick = |tick| {
        let _ = stream.set_read_timeout(Some(tick));
    };
    run(
        &server,
        &mut conn,
        (&stream, &mut set_tick),
        &mut &stream,
        batching,
    );
    conn.detach();
    let _ = stream.shutdown(Shutdown::Both);
}

/// How many bytes the next read may ask for: all the buffer has room for
/// when batching, else no more than the rest of the PDU being assembled, so
/// that a read never takes bytes of the PDU after it. `need_total` is the
/// length of the whole PDU as far as the bytes held tell
/// ([`Decoded::NeedMore`]).
fn read_len(batching: bool, spare: usize, held: usize, need_total: usize) -> usize {
    if batching {
        return spare;
    }
    debug_assert!(
        need_total > held,
        "a complete PDU is handled before reading"
    );
    // At least one byte (a zero-length read would look like the peer's
    // close), at most the room there is; `clamp` would panic on no room.
    need_total.saturating_sub(held).max(1).min(spare)
}

/// The connection's loop: read, decode and handle every complete PDU, send
/// the responses; until the peer closes, an error, or shutdown. `source`
/// times out every [`TICK`] so that timers run, every [`BACKGROUND_TICK`]
/// while commands run in the background (its second half sets the timeout).
fn run<R: Read, W: Write>(
    server: &Server,
    conn: &mut Connection,
    (mut source, set_tick): (R, &mut dyn FnMut(Duration)),
    sink: &mut W,
    batching: bool,
) {
    let mut tick = TICK;
    let mut recv = RecvBuffer::new(RECV_BUFFER_BYTES);
    // The length of the PDU being assembled, as far as known: at first its
    // header (a BHS, and a header digest once one is negotiated).
    let mut need_total = header_bytes_needed(&[], &conn.recv_limits());
    'connection: loop {
        let held = recv.data().len();
        let spare = recv.spare();
        let want = read_len(batching, spare.len(), held, need_total);
        let read = source.read(&mut spare[..want]);
        let now = Instant::now();
        match read {
            Ok(0) => break,
            Ok(n) => recv.end += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let flow = conn.handle_tick(now);
                if conn.flush(sink).is_err() || flow == Flow::Close {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        loop {
            let limits = conn.recv_limits();
            match decode(recv.data(), &limits) {
                Ok(Decoded::Frame { frame, len }) => {
                    let flow = conn.handle_frame(&frame, now);
                    recv.consume(len);
                    if flow == Flow::Close {
                        let _ = conn.flush(sink);
                        break 'connection;
                    }
                    // Unbatched, what this PDU produced leaves now, one
                    // write per PDU, before anything else is read.
                    if !batching && conn.flush(sink).is_err() {
                        break 'connection;
                    }
                }
                Ok(Decoded::NeedMore { total_len }) => {
                    recv.make_room(total_len);
                    need_total = if recv.data().len() < BHS_LEN {
                        // The header's length is unknown until the BHS is
                        // in; no PDU is shorter than this.
                        header_bytes_needed(recv.data(), &limits)
                    } else {
                        total_len
                    };
                    break;
                }
                Err(error) => {
                    let (flow, skip) = conn.handle_frame_error(&error);
                    if flow == Flow::Close {
                        let _ = conn.flush(sink);
                        break 'connection;
                    }
                    recv.consume(skip);
                }
            }
        }
        conn.poll_background();
        if conn.flush(sink).is_err() || server.is_shutting_down() {
            break;
        }
        let wanted = if conn.has_background() {
            BACKGROUND_TICK
        } else {
            TICK
        };
        if wanted != tick {
            tick = wanted;
            set_tick(tick);
        }
    }
}

/// A running target: its portals and connection threads.
pub struct Running {
    server: Arc<Server>,
    portals: Vec<SocketAddr>,
    listeners: Vec<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Running {
    /// The addresses actually bound (a port 0 in the config becomes the chosen port).
    pub fn portals(&self) -> &[SocketAddr] {
        &self.portals
    }

    /// The server state.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// Stops accepting, closes every session, waits for connections, syncs stores.
    pub fn shutdown(self) -> Result<(), isoe_store::StoreError> {
        self.server.begin_shutdown();
        for addr in &self.portals {
            // Wake the blocking accept so the listener sees the flag.
            let _ = TcpStream::connect_timeout(&wake_address(*addr), Duration::from_millis(200));
        }
        for l in self.listeners {
            let _ = l.join();
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        let handles: Vec<_> =
            std::mem::take(&mut *self.connections.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        self.server.flush_stores()
    }
}

fn wake_address(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        let ip = if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        SocketAddr::new(ip, addr.port())
    } else {
        addr
    }
}

/// Binds every portal, opens the LUNs and starts serving. Portals are bound
/// first so that a port 0 in the configuration is advertised (SendTargets)
/// as the port the system chose.
pub fn start(mut config: Config) -> Result<Running, StartError> {
    let mut bound = Vec::with_capacity(config.portals.len());
    for addr in &config.portals {
        let listener = TcpListener::bind(addr).map_err(|source| StartError::Bind {
            addr: *addr,
            source,
        })?;
        let local = listener.local_addr().map_err(|source| StartError::Bind {
            addr: *addr,
            source,
        })?;
        bound.push((listener, local));
    }
    config.portals = bound.iter().map(|(_, local)| *local).collect();
    let server = Arc::new(Server::new(config)?);
    let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
    let portals = bound.iter().map(|(_, local)| *local).collect();
    let listeners = bound
        .into_iter()
        .map(|(listener, _)| {
            let server = server.clone();
            let connections = connections.clone();
            std::thread::spawn(move || accept_loop(listener, server, connections))
        })
        .collect();
    Ok(Running {
        server,
        portals,
        listeners,
        connections,
    })
}

fn accept_loop(
    listener: TcpListener,
    server: Arc<Server>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    for stream in listener.incoming() {
        if server.is_shutting_down() {
            break;
        }
        let Ok(stream) = stream else { continue };
        let server = server.clone();
        let handle = std::thread::Builder::new()
            .name("isoe-conn".into())
            .spawn(move || serve(server, stream));
        if let Ok(handle) = handle {
            let mut list = connections.lock().unwrap_or_else(|e| e.into_inner());
            list.retain(|h| !h.is_finished());
            list.push(handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_wire::digest::Crc32cImpl;
    use isoe_wire::frame::{encode, FrameLimits};
    use isoe_wire::login::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
    use isoe_wire::negotiate::{Digest, LocalParams, SessionType};
    use isoe_wire::pdu::{Lun, NopOut, ScsiCommand, RESERVED_TAG};
    use isoe_wire::Pdu;

    const TARGET: &str = "iqn.2026-11.io.isoe:driver";

    fn server(datapath: &str) -> Arc<Server> {
        let text = format!(
            "portals = [\"127.0.0.1:0\"]\n[[target]]\nname = \"{TARGET}\"\n\
             [[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n[datapath]\n{datapath}\n"
        );
        Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
    }

    /// Decodes every PDU of `bytes` (which must hold whole PDUs only).
    fn pdus(bytes: &[u8], limits: &FrameLimits) -> Vec<(Pdu, Vec<u8>)> {
        let mut rest = bytes;
        let mut out = Vec::new();
        while !rest.is_empty() {
            match decode(rest, limits).expect("valid output") {
                Decoded::Frame { frame, len } => {
                    out.push((frame.pdu().expect("known opcode"), frame.data.to_vec()));
                    rest = &rest[len..];
                }
                Decoded::NeedMore { .. } => panic!("a PDU cut short: {} bytes left", rest.len()),
            }
        }
        out
    }

    /// Logs a connection in without the driver; returns the initiator's
    /// full-feature limits (hardware CRC, whatever the target uses).
    fn login(conn: &mut Connection, digests: bool) -> FrameLimits {
        let digest = if digests {
            Digest::Crc32c
        } else {
            Digest::None
        };
        let config = InitiatorLoginConfig {
            initiator_name: "iqn.2026-11.io.isoe:driver-test".into(),
            initiator_alias: None,
            target_name: Some(TARGET.into()),
            session_type: SessionType::Normal,
            isid: [0x80, 0, 0, 0, 0, 1],
            tsih: 0,
            cid: 1,
            initiator_task_tag: 1,
            cmd_sn: 10,
            params: LocalParams {
                header_digest: vec![digest],
                data_digest: vec![digest],
                max_recv_data_segment_length: 4096,
                ..LocalParams::default()
            },
            chap: None,
        };
        let mut login = InitiatorLogin::new(config, [7; 32]);
        let mut step = login.start();
        for _ in 0..8 {
            match step {
                InitiatorStep::Send { request, data } => {
                    let mut bytes = Vec::new();
                    encode(
                        &mut bytes,
                        &Pdu::LoginRequest(request),
                        &[],
                        &data,
                        &FrameLimits::LOGIN,
                    );
                    let Ok(Decoded::Frame { frame, .. }) = decode(&bytes, &FrameLimits::LOGIN)
                    else {
                        panic!("a login request frames")
                    };
                    assert_eq!(conn.handle_frame(&frame, Instant::now()), Flow::Continue);
                    let mut sent = Vec::new();
                    conn.flush(&mut sent).expect("flush to a Vec");
                    let (Pdu::LoginResponse(resp), text) = &pdus(&sent, &FrameLimits::LOGIN)[0]
                    else {
                        panic!("a login response")
                    };
                    step = login.handle_response(resp, text).expect("login accepted");
                }
                InitiatorStep::Complete { negotiated, .. } => {
                    let c = negotiated.connection;
                    assert_eq!(c.header_digest, digests);
                    return FrameLimits {
                        max_recv_data_segment_length: 1 << 20,
                        header_digest: c.header_digest,
                        data_digest: c.data_digest,
                        crc: Crc32cImpl::Hardware,
                    };
                }
            }
        }
        panic!("login did not complete")
    }

    /// Bytes handed out as asked, each read recorded as (asked, given).
    struct Script {
        bytes: Vec<u8>,
        at: usize,
        reads: Vec<(usize, usize)>,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.bytes.len() - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            self.reads.push((buf.len(), n));
            Ok(n)
        }
    }

    use crate::output::tests::Calls;

    fn scsi(itt: u32, cmd_sn: u32, opcode: u8, lba: u32, blocks: u16) -> ScsiCommand {
        let mut cdb = [0u8; 16];
        cdb[0] = opcode;
        cdb[2..6].copy_from_slice(&lba.to_be_bytes());
        cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
        ScsiCommand {
            final_bit: true,
            read: opcode == 0x28,
            write: opcode == 0x2a,
            attr: 1,
            lun: Lun::from_number(0),
            initiator_task_tag: itt,
            expected_data_transfer_length: u32::from(blocks) * 512,
            cmd_sn,
            cdb,
            ..Default::default()
        }
    }

    /// What the script sends once logged in, with where each PDU ends:
    /// a 4 KiB read, a 4 KiB write with immediate data, a 16 KiB read (four
    /// Data-In PDUs of the initiator's 4 KiB), and a NOP-Out ping with data.
    fn commands(limits: &FrameLimits) -> (Vec<u8>, Vec<usize>) {
        let block: Vec<u8> = (0..4096u32).map(|i| (i * 5 + 1) as u8).collect();
        let ping = Pdu::NopOut(NopOut {
            initiator_task_tag: 4,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: 13,
            ..Default::default()
        });
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for (pdu, data) in [
            (Pdu::ScsiCommand(scsi(1, 10, 0x28, 0, 8)), &[][..]),
            (Pdu::ScsiCommand(scsi(2, 11, 0x2a, 8, 8)), &block[..]),
            (Pdu::ScsiCommand(scsi(3, 12, 0x28, 0, 32)), &[][..]),
            (ping, &b"ping"[..]),
        ] {
            encode(&mut bytes, &pdu, &[], data, limits);
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    /// Runs the driver loop over the script; returns the reads and writes.
    fn drive(
        datapath: &str,
        digests: bool,
    ) -> (Vec<(usize, usize)>, Vec<usize>, Calls, FrameLimits) {
        let server = server(datapath);
        let mut conn = Connection::new(
            server.clone(),
            "127.0.0.1:3260".parse().unwrap(),
            None,
            Instant::now(),
        );
        let limits = login(&mut conn, digests);
        let (bytes, ends) = commands(&limits);
        let mut script = Script {
            bytes,
            at: 0,
            reads: Vec::new(),
        };
        let mut sink = Calls::default();
        let batching = server.config.datapath.batching;
        let mut set_tick = |_| {};
        run(
            &server,
            &mut conn,
            (&mut script, &mut set_tick),
            &mut sink,
            batching,
        );
        assert_eq!(script.at, script.bytes.len(), "everything was read");
        (script.reads, ends, sink, limits)
    }

    /// The responses the script's commands get, in order, as PDU kinds.
    fn kinds(responses: &[(Pdu, Vec<u8>)]) -> Vec<&'static str> {
        responses
            .iter()
            .map(|(p, _)| match p {
                Pdu::DataIn(d) if d.status_present => "data-in+status",
                Pdu::DataIn(_) => "data-in",
                Pdu::ScsiResponse(r) if r.status == 0 => "good",
                Pdu::NopIn(_) => "nop-in",
                _ => "other",
            })
            .collect()
    }

    const EXPECTED: [&str; 7] = [
        "data-in+status",
        "good",
        "data-in",
        "data-in",
        "data-in",
        "data-in+status",
        "nop-in",
    ];

    #[test]
    fn batched_reads_everything_and_answers_with_one_write() {
        for digests in [false, true] {
            let (reads, ends, sink, limits) = drive("batching = true", digests);
            assert_eq!(
                reads[0],
                (RECV_BUFFER_BYTES, *ends.last().unwrap()),
                "one read takes all four PDUs"
            );
            assert_eq!(reads.len(), 2, "then the end of the stream: {reads:?}");
            assert_eq!(sink.0.len(), 1, "one write for all seven responses");
            assert_eq!(kinds(&pdus(&sink.0[0], &limits)), EXPECTED);
        }
    }

    #[test]
    fn unbatched_reads_and_writes_one_pdu_per_call() {
        for (datapath, digests) in [
            ("batching = false", false),
            ("batching = false", true),
            (
                "batching = false\ncrc = \"software\"\nbuffer_pool = false",
                true,
            ),
        ] {
            let (reads, ends, sink, limits) = drive(datapath, digests);
            // No read takes bytes of two PDUs, and none asks for more than
            // the rest of the PDU being assembled.
            let mut at = 0;
            for &(asked, given) in &reads[..reads.len() - 1] {
                let end = *ends
                    .iter()
                    .find(|&&end| end > at)
                    .expect("within the script");
                assert!(
                    at + asked <= end,
                    "{datapath}: a read at {at} asked for {asked} bytes past the PDU ending at {end}"
                );
                at += given;
            }
            let (header, data_digest) = if digests { (52, 4) } else { (48, 0) };
            assert_eq!(
                reads.iter().map(|r| r.0).collect::<Vec<_>>(),
                [
                    header,
                    header,
                    4096 + data_digest,
                    header,
                    header,
                    4 + data_digest,
                    header
                ],
                "{datapath}, digests {digests}: header, then the rest of each PDU (the last read sees the end)"
            );
            // Each write carries exactly one whole PDU.
            assert_eq!(
                sink.0.len(),
                EXPECTED.len(),
                "{datapath}: one write per response"
            );
            let mut responses = Vec::new();
            for call in &sink.0 {
                let one = pdus(call, &limits);
                assert_eq!(one.len(), 1, "{datapath}: one PDU per write");
                responses.extend(one);
            }
            assert_eq!(kinds(&responses), EXPECTED, "{datapath}");
        }
    }

    #[test]
    fn an_unbatched_read_asks_for_the_rest_of_the_pdu() {
        assert_eq!(read_len(true, 1000, 10, 48), 1000);
        assert_eq!(read_len(false, 1000, 0, 48), 48);
        assert_eq!(read_len(false, 1000, 20, 48), 28);
        assert_eq!(read_len(false, 100, 48, 4200), 100, "no more than the room");
        assert_eq!(read_len(false, 0, 48, 4200), 0, "no room: no panic");
    }
}
