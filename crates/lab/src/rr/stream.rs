//! Streams: bytes one way as fast as they go, TCP or UDP, as seed 002's
//! TCP_STREAM and UDP_STREAM tests (netperf) measure a NIC's offloads:
//! the throughput and what each side's CPU pays for it, the sender's and
//! the receiver's apart.
//!
//! The server is the same [`super::RrServer`]: a connection whose first
//! request header carries [`STREAM_HELLO`] as its body length (no exchange
//! is that long) asks for a stream instead, in the 12 bytes after it
//! ([`Hello`]): TCP or UDP, which way, the message size, and how long the
//! server may keep it. The server answers with 4 bytes (0 and, for UDP,
//! the port of the socket it opened for the datagrams; 1: refused, too
//! many streams at once) and serves that stream on a thread of its own
//! until the client closes the connection, so one server serves both the
//! floor's exchanges and every kind of stream, and the client alone says
//! what to measure.
//!
//! - TCP, client to server: the client writes `msg` bytes at a time and
//!   counts what it wrote in its window; the server reads and throws away.
//! - TCP, server to client: the server writes `msg` bytes at a time; the
//!   client reads and counts what it read in its window.
//! - UDP, client to server: datagrams of `msg` bytes, each marked as sent
//!   before, in or after the client's window; once done the client asks,
//!   on the TCP connection, how many of the window's the server received.
//! - UDP, server to client: datagrams numbered in order; the client counts
//!   those its window received and takes the numbers' span as the number
//!   sent, so the loss is what the span lacks.
//!
//! The client samples its own CPU, the server's (by PID, as a load does)
//! and the machine's at its window's two ends.

use super::load::Sample;
use super::RR_BYTES_MAX;
use isoe_bench::cpu::{self, CpuSplit};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// The body length of a request header that opens a stream instead.
pub const STREAM_HELLO: u32 = u32::MAX;
/// The stream protocol's version, in the hello header's response field.
pub const STREAM_VERSION: u32 = 1;
/// The bytes of a hello after its 8-byte header.
pub(super) const HELLO_BYTES: usize = 12;
/// The bytes of the server's answer to a hello.
pub(super) const ACK_BYTES: usize = 4;
/// TCP's default message: netperf's TCP_STREAM writes 128 KiB.
pub const TCP_MSG_DEFAULT: u32 = 128 << 10;
/// The largest UDP payload over IPv4.
pub const UDP_MSG_MAX: u32 = 65_507;
/// A datagram's mark and number: its smallest size.
pub const UDP_MSG_MIN: u32 = 16;
/// The longest stream a client may ask for, seconds.
pub const STREAM_SECONDS_MAX: u32 = 90_000;
/// Bytes read at a time by a receiver, and the most any side holds.
pub(super) const RECV_BYTES: usize = 1 << 20;
/// A datagram's mark: sent before the client's window, in it, after it.
pub(super) const MARK_RAMP: u8 = 0;
pub(super) const MARK_WINDOW: u8 = 1;

/// TCP or UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    /// A TCP connection's bytes (netperf TCP_STREAM).
    Tcp,
    /// Datagrams (netperf UDP_STREAM).
    Udp,
}

impl StreamKind {
    /// "tcp" or "udp".
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Tcp => "tcp",
            StreamKind::Udp => "udp",
        }
    }
}

/// Which end sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// The client sends, the server receives.
    ClientToServer,
    /// The server sends, the client receives.
    ServerToClient,
}

impl Direction {
    /// "client-to-server" or "server-to-client".
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client-to-server",
            Direction::ServerToClient => "server-to-client",
        }
    }
}

/// One stream: its kind, direction and message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamShape {
    /// TCP or UDP.
    pub kind: StreamKind,
    /// Which end sends.
    pub direction: Direction,
    /// Bytes per write (TCP) or per datagram (UDP).
    pub msg: u32,
}

impl StreamShape {
    /// Checks the message size: TCP 1 byte to [`RR_BYTES_MAX`], UDP
    /// [`UDP_MSG_MIN`] to [`UDP_MSG_MAX`].
    pub fn new(kind: StreamKind, direction: Direction, msg: u32) -> io::Result<StreamShape> {
        let (min, max) = match kind {
            StreamKind::Tcp => (1, RR_BYTES_MAX),
            StreamKind::Udp => (UDP_MSG_MIN, UDP_MSG_MAX),
        };
        if !(min..=max).contains(&msg) {
            return Err(invalid(format!(
                "a {} message of {msg} bytes: from {min} to {max}",
                kind.as_str()
            )));
        }
        Ok(StreamShape {
            kind,
            direction,
            msg,
        })
    }
}

/// The largest UDP payload that fits the path MTU to `to`, unfragmented
/// (1472 at MTU 1500 over IPv4), at most [`UDP_MSG_MAX`]: the route's MTU
/// as the kernel knows it, less the IP and UDP headers.
pub fn udp_msg_for_path(to: SocketAddr) -> io::Result<u32> {
    let any: SocketAddr = match to.ip() {
        IpAddr::V4(_) => "0.0.0.0:0".parse().expect("an address"),
        IpAddr::V6(_) => "[::]:0".parse().expect("an address"),
    };
    let socket = UdpSocket::bind(any)?;
    socket.connect(to)?;
    let (mtu, headers) = match to.ip() {
        IpAddr::V4(_) => (rustix::net::sockopt::ip_mtu(&socket)?, 20 + 8),
        IpAddr::V6(_) => (rustix::net::sockopt::ipv6_mtu(&socket)?, 40 + 8),
    };
    Ok(mtu.saturating_sub(headers).clamp(UDP_MSG_MIN, UDP_MSG_MAX))
}

/// What a client asks of the server after [`STREAM_HELLO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) shape: StreamShape,
    /// How long the server may keep the stream, seconds (it stops sooner
    /// when the client closes the connection).
    pub(super) seconds: u32,
    /// For UDP from the server: the client's port for the datagrams.
    pub(super) udp_port: u16,
}

impl Hello {
    /// The header and the hello, as the client sends them.
    fn encode(&self) -> [u8; 8 + HELLO_BYTES] {
        let mut out = [0u8; 8 + HELLO_BYTES];
        out[..4].copy_from_slice(&STREAM_HELLO.to_be_bytes());
        out[4..8].copy_from_slice(&STREAM_VERSION.to_be_bytes());
        out[8] = match self.shape.kind {
            StreamKind::Tcp => 1,
            StreamKind::Udp => 2,
        };
        out[9] = match self.shape.direction {
            Direction::ClientToServer => 1,
            Direction::ServerToClient => 2,
        };
        out[10..12].copy_from_slice(&self.udp_port.to_be_bytes());
        out[12..16].copy_from_slice(&self.shape.msg.to_be_bytes());
        out[16..20].copy_from_slice(&self.seconds.to_be_bytes());
        out
    }

    /// The hello after its header; None when a field is out of range.
    pub(super) fn decode(bytes: &[u8; HELLO_BYTES]) -> Option<Hello> {
        let kind = match bytes[0] {
            1 => StreamKind::Tcp,
            2 => StreamKind::Udp,
            _ => return None,
        };
        let direction = match bytes[1] {
            1 => Direction::ClientToServer,
            2 => Direction::ServerToClient,
            _ => return None,
        };
        let udp_port = u16::from_be_bytes([bytes[2], bytes[3]]);
        let msg = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
        let seconds = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let shape = StreamShape::new(kind, direction, msg).ok()?;
        (1..=STREAM_SECONDS_MAX)
            .contains(&seconds)
            .then_some(Hello {
                shape,
                seconds,
                udp_port,
            })
    }
}

/// What a stream measured over the client's window (`isoe netprobe
/// --stream --json`'s line, which the lab reads back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    /// "tcp" or "udp".
    pub stream: StreamKind,
    /// Which end sent.
    pub direction: Direction,
    /// Bytes per write or datagram.
    pub msg: u32,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Bytes carried in the window: TCP, those the client wrote (to the
    /// server) or read (from it); UDP, those the receiver got.
    pub bytes: u64,
    /// `bytes` per second, MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// UDP: datagrams sent in the window (from the server: the span of the
    /// numbers received).
    pub datagrams_sent: Option<u64>,
    /// UDP: datagrams of the window received.
    pub datagrams_received: Option<u64>,
    /// UDP: datagrams sent and not received, % of those sent.
    pub loss_pct: Option<f64>,
    /// UDP: what the sender sent, MB/s.
    pub sent_mb_per_s: Option<f64>,
    /// This process's CPU over the window, seconds.
    pub client_cpu_s: f64,
    /// ... per MB carried, µs.
    pub client_cpu_us_per_mb: Option<f64>,
    /// The server's PID, when known.
    pub server_pid: Option<u32>,
    /// Its CPU over the window, seconds.
    pub server_cpu_s: Option<f64>,
    /// ... per MB carried, µs.
    pub server_cpu_us_per_mb: Option<f64>,
    /// The machine's busy CPU per MB, µs: what the kernel charged to no
    /// process (loopback in softirq) included.
    pub system_cpu_us_per_mb: Option<f64>,
    /// The machine's CPU steal over the window, %.
    pub steal_pct: f64,
}

/// The window's bounds and its samples, as a stream goes.
struct Clock {
    start: Instant,
    end: Instant,
    server_pid: Option<u32>,
    first: Option<Sample>,
}

impl Clock {
    fn new(ramp: Duration, duration: Duration, server_pid: Option<u32>) -> Clock {
        let start = Instant::now() + ramp;
        Clock {
            start,
            end: start + duration,
            server_pid,
            first: None,
        }
    }

    /// Takes the first sample once the window opens; whether `now` is in it.
    fn measuring(&mut self, now: Instant) -> io::Result<bool> {
        if self.first.is_none() && now >= self.start {
            self.first = Some(Sample::take(self.server_pid, now)?);
        }
        Ok(self.first.is_some())
    }

    fn over(&self, now: Instant) -> bool {
        self.first.is_some() && now >= self.end
    }
}

/// Streams `shape` with the server at `addr` for `ramp`, then measures
/// `duration`; fails when the server refuses, or no byte moves for
/// `timeout`. The server's CPU is read from `server_pid`'s `/proc` entry
/// when given.
pub fn stream(
    addr: SocketAddr,
    shape: StreamShape,
    ramp: Duration,
    duration: Duration,
    timeout: Duration,
    server_pid: Option<u32>,
) -> io::Result<StreamFigures> {
    let shape = StreamShape::new(shape.kind, shape.direction, shape.msg)?;
    let mut control = TcpStream::connect_timeout(&addr, timeout)?;
    control.set_nodelay(true)?;
    control.set_read_timeout(Some(timeout))?;
    control.set_write_timeout(Some(timeout))?;
    let inbound = match (shape.kind, shape.direction) {
        (StreamKind::Udp, Direction::ServerToClient) => {
            let socket = UdpSocket::bind((control.local_addr()?.ip(), 0))?;
            socket.set_read_timeout(Some(Duration::from_millis(100)))?;
            Some(socket)
        }
        _ => None,
    };
    let total = ramp + duration + Duration::from_secs(1);
    let hello = Hello {
        shape,
        seconds: total.as_secs().clamp(1, u64::from(STREAM_SECONDS_MAX)) as u32,
        udp_port: match &inbound {
            Some(s) => s.local_addr()?.port(),
            None => 0,
        },
    };
    control.write_all(&hello.encode())?;
    let server_port = read_ack(&mut control, addr)?;
    let mut clock = Clock::new(ramp, duration, server_pid);
    let moved = match (shape.kind, shape.direction, inbound) {
        (StreamKind::Tcp, Direction::ClientToServer, _) => {
            tcp_send(&mut control, &shape, &mut clock)?
        }
        (StreamKind::Tcp, Direction::ServerToClient, _) => tcp_receive(&mut control, &mut clock)?,
        (StreamKind::Udp, Direction::ClientToServer, _) => {
            let to = SocketAddr::new(addr.ip(), server_port);
            udp_send(&mut control, to, &shape, &mut clock)?
        }
        (StreamKind::Udp, Direction::ServerToClient, Some(socket)) => {
            udp_receive(&socket, &mut clock, timeout, addr)?
        }
        (StreamKind::Udp, Direction::ServerToClient, None) => unreachable!("bound above"),
    };
    let first = clock.first.take().expect("a stream ends after its window");
    let last = Sample::take(server_pid, moved.ended)?;
    Ok(figures(&shape, server_pid, &first, &last, &moved))
}

/// The server's answer to a hello: the port of its UDP socket (0 for TCP).
fn read_ack(control: &mut TcpStream, addr: SocketAddr) -> io::Result<u16> {
    let mut ack = [0u8; ACK_BYTES];
    control.read_exact(&mut ack).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{addr} closed the connection at a stream's hello: not an isoe netprobe --serve that serves streams"),
        ),
        _ => e,
    })?;
    match ack[0] {
        0 => Ok(u16::from_be_bytes([ack[2], ack[3]])),
        _ => Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "{addr} refused the stream: it serves {} streams at once",
                super::STREAMS_MAX
            ),
        )),
    }
}

/// What a stream moved in the window.
struct Moved {
    bytes: u64,
    /// UDP: datagrams sent and received in the window.
    datagrams: Option<(u64, u64)>,
    /// UDP: the bytes the sender sent in the window.
    sent_bytes: Option<u64>,
    /// When the window closed.
    ended: Instant,
}

/// Calls `io` (one write or one read) until the window closes, counting
/// the bytes it moved inside the measured span: those bytes, and when the
/// window closed.
fn pump(
    clock: &mut Clock,
    mut io: impl FnMut() -> io::Result<usize>,
) -> io::Result<(u64, Instant)> {
    let mut bytes = 0u64;
    loop {
        let n = match io() {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if clock.over(now) {
            return Ok((bytes, now));
        }
        if clock.measuring(now)? {
            bytes += n as u64;
        }
    }
}

/// TCP from the client: `msg`-byte writes until the window closes.
fn tcp_send(control: &mut TcpStream, shape: &StreamShape, clock: &mut Clock) -> io::Result<Moved> {
    let out = vec![0x5au8; shape.msg as usize];
    let (bytes, ended) = pump(clock, || control.write(&out))?;
    // The server closes once it has read everything.
    control.shutdown(Shutdown::Write)?;
    let mut rest = [0u8; 64];
    while control.read(&mut rest)? > 0 {}
    Ok(Moved {
        bytes,
        datagrams: None,
        sent_bytes: None,
        ended,
    })
}

/// TCP from the server: reads until the window closes, then closes.
fn tcp_receive(control: &mut TcpStream, clock: &mut Clock) -> io::Result<Moved> {
    let mut buf = vec![0u8; RECV_BYTES];
    let (bytes, ended) = pump(clock, || match control.read(&mut buf) {
        Ok(0) => Err(closed()),
        read => read,
    })?;
    Ok(Moved {
        bytes,
        datagrams: None,
        sent_bytes: None,
        ended,
    })
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the stream before its window ended",
    )
}

/// UDP from the client: marked datagrams to `to` until the window closes,
/// then the server's count of the window's, asked on `control`.
fn udp_send(
    control: &mut TcpStream,
    to: SocketAddr,
    shape: &StreamShape,
    clock: &mut Clock,
) -> io::Result<Moved> {
    let socket = UdpSocket::bind((control.local_addr()?.ip(), 0))?;
    socket.connect(to)?;
    let mut datagram = vec![0x5au8; shape.msg as usize];
    let (mut seq, mut sent) = (0u64, 0u64);
    let ended = loop {
        let now = Instant::now();
        if clock.over(now) {
            break now;
        }
        let measuring = clock.measuring(now)?;
        datagram[0] = if measuring { MARK_WINDOW } else { MARK_RAMP };
        datagram[1..9].copy_from_slice(&seq.to_be_bytes());
        match socket.send(&datagram) {
            Ok(_) => {
                seq += 1;
                sent += u64::from(measuring);
            }
            // A full queue drops the datagram, as a full NIC would.
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    };
    // Done: the server drains its socket and says what it received.
    control.write_all(&[1])?;
    let mut counts = [0u8; 16];
    control.read_exact(&mut counts)?;
    let received = u64::from_be_bytes(counts[..8].try_into().expect("8 bytes"));
    let bytes = u64::from_be_bytes(counts[8..].try_into().expect("8 bytes"));
    Ok(Moved {
        bytes,
        datagrams: Some((sent, received)),
        sent_bytes: Some(sent * u64::from(shape.msg)),
        ended,
    })
}

/// A send that failed for want of room or a signal, to try again.
pub(super) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// UDP from the server: counts the window's datagrams and the span of
/// their numbers; then closing `control` (the caller's) stops the server.
fn udp_receive(
    socket: &UdpSocket,
    clock: &mut Clock,
    timeout: Duration,
    addr: SocketAddr,
) -> io::Result<Moved> {
    let mut buf = vec![0u8; UDP_MSG_MAX as usize];
    let (mut received, mut bytes) = (0u64, 0u64);
    let mut span: Option<(u64, u64)> = None;
    let mut last_datagram = Instant::now();
    let ended = loop {
        let got = socket.recv(&mut buf);
        let now = Instant::now();
        if clock.over(now) {
            break now;
        }
        let measuring = clock.measuring(now)?;
        let n = match got {
            Ok(n) if n >= UDP_MSG_MIN as usize => n,
            Ok(_) => continue,
            Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::TimedOut => {
                if now.duration_since(last_datagram) >= timeout {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no datagram from {addr} in {} s", timeout.as_secs()),
                    ));
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        last_datagram = now;
        if measuring {
            let seq = u64::from_be_bytes(buf[1..9].try_into().expect("8 bytes"));
            span = Some(span.map_or((seq, seq), |(lo, hi)| (lo.min(seq), hi.max(seq))));
            received += 1;
            bytes += n as u64;
        }
    };
    let sent = span.map_or(0, |(lo, hi)| hi - lo + 1);
    let msg = bytes.checked_div(received).unwrap_or(0);
    Ok(Moved {
        bytes,
        datagrams: Some((sent, received)),
        sent_bytes: Some(sent * msg),
        ended,
    })
}

/// The figures of what moved between the samples `first` and `last`.
fn figures(
    shape: &StreamShape,
    server_pid: Option<u32>,
    first: &Sample,
    last: &Sample,
    moved: &Moved,
) -> StreamFigures {
    let seconds = last.at.duration_since(first.at).as_secs_f64();
    let rate = |bytes: u64| bytes as f64 / seconds.max(f64::MIN_POSITIVE) / 1e6;
    let mb = moved.bytes as f64 / 1e6;
    let per_mb = |cpu_s: f64| (mb > 0.0).then(|| cpu_s * 1e6 / mb);
    let split = CpuSplit::between(&first.system, &last.system, cpu::ticks_per_second());
    let client_cpu_s = first.client.delta_s(&last.client);
    let server_cpu_s = match (&first.server, &last.server) {
        (Some(a), Some(b)) => Some(a.delta_s(b)),
        _ => None,
    };
    StreamFigures {
        stream: shape.kind,
        direction: shape.direction,
        msg: shape.msg,
        seconds,
        bytes: moved.bytes,
        mb_per_s: rate(moved.bytes),
        datagrams_sent: moved.datagrams.map(|(sent, _)| sent),
        datagrams_received: moved.datagrams.map(|(_, received)| received),
        loss_pct: moved.datagrams.map(|(sent, received)| match sent {
            0 => 0.0,
            sent => 100.0 * sent.saturating_sub(received) as f64 / sent as f64,
        }),
        sent_mb_per_s: moved.sent_bytes.map(rate),
        client_cpu_s,
        client_cpu_us_per_mb: per_mb(client_cpu_s),
        server_pid,
        server_cpu_s,
        server_cpu_us_per_mb: server_cpu_s.and_then(per_mb),
        system_cpu_us_per_mb: per_mb(split.busy_cpu_s),
        steal_pct: split.steal_pct,
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::{RrServer, STREAMS_MAX};

    fn loopback() -> RrServer {
        RrServer::start("127.0.0.1:0".parse().unwrap(), 0).unwrap()
    }

    fn run(server: &RrServer, kind: StreamKind, direction: Direction, msg: u32) -> StreamFigures {
        let shape = StreamShape::new(kind, direction, msg).unwrap();
        let ms = Duration::from_millis;
        // The server is a thread of this process.
        let pid = Some(std::process::id());
        stream(
            server.addr(),
            shape,
            ms(100),
            ms(400),
            Duration::from_secs(5),
            pid,
        )
        .unwrap()
    }

    #[test]
    fn tcp_streams_carry_bytes_each_way_and_measure_both_ends() {
        let server = loopback();
        for direction in [Direction::ClientToServer, Direction::ServerToClient] {
            let f = run(&server, StreamKind::Tcp, direction, TCP_MSG_DEFAULT);
            assert_eq!(
                (f.stream, f.direction, f.msg),
                (StreamKind::Tcp, direction, 128 << 10)
            );
            assert!(f.seconds > 0.3 && f.seconds < 5.0, "{f:?}");
            assert!(f.bytes > 0, "{f:?}");
            assert!((f.mb_per_s - f.bytes as f64 / f.seconds / 1e6).abs() < 1e-6);
            assert!(f.datagrams_sent.is_none() && f.loss_pct.is_none(), "{f:?}");
            assert!(
                f.client_cpu_us_per_mb.is_some() && f.server_cpu_s.is_some(),
                "{f:?}"
            );
        }
        // The same server still answers exchanges.
        let exchange = crate::rr::Exchange::new(48, 4144).unwrap();
        let t = Duration::from_secs(5);
        assert_eq!(
            crate::rr::probe(server.addr(), exchange, 0, 3, t)
                .unwrap()
                .count,
            3
        );
    }

    #[test]
    fn udp_streams_count_the_window_s_datagrams_and_their_loss() {
        let server = loopback();
        for direction in [Direction::ClientToServer, Direction::ServerToClient] {
            let f = run(&server, StreamKind::Udp, direction, 1472);
            let (sent, received) = (f.datagrams_sent.unwrap(), f.datagrams_received.unwrap());
            assert!(received > 0 && received <= sent, "{f:?}");
            assert_eq!(f.bytes, received * 1472, "{f:?}");
            let loss = 100.0 * (sent - received) as f64 / sent as f64;
            assert!((f.loss_pct.unwrap() - loss).abs() < 1e-9, "{f:?}");
            assert!(f.sent_mb_per_s.unwrap() >= f.mb_per_s, "{f:?}");
        }
    }

    #[test]
    fn a_hello_reads_back_as_sent_and_bad_ones_are_refused() {
        let shape = StreamShape::new(StreamKind::Udp, Direction::ServerToClient, 1472).unwrap();
        let hello = Hello {
            shape,
            seconds: 12,
            udp_port: 40_000,
        };
        let wire = hello.encode();
        assert_eq!(wire[..4], STREAM_HELLO.to_be_bytes());
        assert_eq!(Hello::decode(wire[8..].try_into().unwrap()), Some(hello));
        for (at, byte) in [(8, 3u8), (9, 0), (12, 0xff), (16, 0xff)] {
            let mut bad = wire;
            bad[at] = byte;
            assert_eq!(Hello::decode(bad[8..].try_into().unwrap()), None, "{at}");
        }
        for (kind, msg) in [
            (StreamKind::Udp, 15),
            (StreamKind::Udp, 65_508),
            (StreamKind::Tcp, 0),
        ] {
            let err = StreamShape::new(kind, Direction::ClientToServer, msg).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        }
        // A server drops a connection whose hello is bad, and serves on.
        let server = loopback();
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut bad = wire;
        bad[8] = 9;
        raw.write_all(&bad).unwrap();
        let mut byte = [0u8; 1];
        assert!(matches!(raw.read(&mut byte), Ok(0) | Err(_)));
        run(&server, StreamKind::Tcp, Direction::ServerToClient, 4096);
    }

    #[test]
    fn streams_past_the_most_at_once_are_refused_clearly() {
        let server = loopback();
        let shape = StreamShape::new(StreamKind::Tcp, Direction::ClientToServer, 4096).unwrap();
        let hello = Hello {
            shape,
            seconds: 5,
            udp_port: 0,
        };
        let open: Vec<TcpStream> = (0..STREAMS_MAX)
            .map(|_| {
                let mut c = TcpStream::connect(server.addr()).unwrap();
                c.write_all(&hello.encode()).unwrap();
                let mut ack = [9u8; ACK_BYTES];
                c.read_exact(&mut ack).unwrap();
                assert_eq!(ack[0], 0);
                c
            })
            .collect();
        let ms = Duration::from_millis;
        let err = stream(server.addr(), shape, ms(10), ms(100), ms(2000), None).unwrap_err();
        assert!(err.to_string().contains("refused the stream"), "{err}");
        drop(open);
        // Their threads end once the clients close; a stream goes through again.
        let deadline = Instant::now() + Duration::from_secs(5);
        while stream(server.addr(), shape, ms(10), ms(100), ms(2000), None).is_err() {
            assert!(
                Instant::now() < deadline,
                "the streams' slots never came back"
            );
            std::thread::sleep(ms(50));
        }
    }

    #[test]
    fn the_udp_message_fits_the_path() {
        // Loopback's MTU is 65536: the largest datagram there is.
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(udp_msg_for_path(to).unwrap(), UDP_MSG_MAX);
    }
}
