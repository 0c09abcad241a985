//! The serving end of a stream (see [`super::stream`]): the connection
//! that asked for it, taken out of the server's epoll set, on a thread of
//! its own with blocking sockets, at most [`super::STREAMS_MAX`] at once.
//! Each stream ends when the client closes its connection, when the
//! server stops, when it has lasted the seconds its hello asked and
//! [`STREAM_SLACK`] more, or when nothing moves for [`super::RR_IDLE`].

use super::stream::{
    is_transient, Direction, Hello, StreamKind, ACK_BYTES, MARK_WINDOW, RECV_BYTES, UDP_MSG_MAX,
    UDP_MSG_MIN,
};
use super::{RR_IDLE, STREAMS_MAX};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a stream may outlast what its hello asked.
const STREAM_SLACK: Duration = Duration::from_secs(30);
/// How often a blocked stream looks at the stop flag and its deadline.
const TICK: Duration = Duration::from_millis(100);
/// Datagrams between two looks at the client's connection.
const DATAGRAMS_PER_LOOK: u32 = 256;
/// The longest a receiver drains its socket after the client is done.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// Serves the stream `hello` asks for on `control` on a thread of its own;
/// refuses it (answers 1) when [`STREAMS_MAX`] are under way.
pub(super) fn start(
    mut control: TcpStream,
    hello: Hello,
    stop: &Arc<AtomicBool>,
    running: &Arc<AtomicUsize>,
) {
    if running.fetch_add(1, Ordering::AcqRel) >= STREAMS_MAX {
        running.fetch_sub(1, Ordering::AcqRel);
        let _ = control.set_nonblocking(false);
        let _ = control.write_all(&[1, 0, 0, 0]);
        return;
    }
    let (stop, counted) = (Arc::clone(stop), Arc::clone(running));
    let spawned = std::thread::Builder::new()
        .name("isoe-stream".into())
        .spawn(move || {
            // Errors end the stream; the client sees it closed.
            let _ = serve(control, hello, &stop);
            counted.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// When a stream must end, whatever the client does.
struct Limits<'a> {
    stop: &'a AtomicBool,
    deadline: Instant,
}

impl Limits<'_> {
    fn reached(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }
}

fn serve(mut control: TcpStream, hello: Hello, stop: &AtomicBool) -> io::Result<()> {
    control.set_nonblocking(false)?;
    control.set_read_timeout(Some(TICK))?;
    control.set_write_timeout(Some(TICK))?;
    let limits = Limits {
        stop,
        deadline: Instant::now() + Duration::from_secs(u64::from(hello.seconds)) + STREAM_SLACK,
    };
    let shape = hello.shape;
    match (shape.kind, shape.direction) {
        (StreamKind::Tcp, Direction::ClientToServer) => {
            ack(&mut control, 0)?;
            tcp_receive(&mut control, &limits)
        }
        (StreamKind::Tcp, Direction::ServerToClient) => {
            ack(&mut control, 0)?;
            tcp_send(&mut control, shape.msg, &limits)
        }
        (StreamKind::Udp, Direction::ClientToServer) => {
            let socket = UdpSocket::bind((control.local_addr()?.ip(), 0))?;
            socket.set_read_timeout(Some(TICK))?;
            ack(&mut control, socket.local_addr()?.port())?;
            udp_receive(&mut control, &socket, &limits)
        }
        (StreamKind::Udp, Direction::ServerToClient) => {
            let socket = UdpSocket::bind((control.local_addr()?.ip(), 0))?;
            let to = SocketAddr::new(control.peer_addr()?.ip(), hello.udp_port);
            socket.connect(to)?;
            ack(&mut control, 0)?;
            udp_send(&mut control, &socket, shape.msg, &limits)
        }
    }
}

fn ack(control: &mut TcpStream, udp_port: u16) -> io::Result<()> {
    let mut out = [0u8; ACK_BYTES];
    out[2..].copy_from_slice(&udp_port.to_be_bytes());
    control.write_all(&out)
}

/// Reads and throws away until the client closes its side, then closes.
fn tcp_receive(control: &mut TcpStream, limits: &Limits) -> io::Result<()> {
    let mut buf = vec![0u8; RECV_BYTES];
    let mut last = Instant::now();
    while !limits.reached() && last.elapsed() < RR_IDLE {
        match control.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => last = Instant::now(),
            Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e),
        }
    }
    control.shutdown(Shutdown::Both)
}

/// Writes `msg` bytes at a time until the client closes the connection.
fn tcp_send(control: &mut TcpStream, msg: u32, limits: &Limits) -> io::Result<()> {
    let out = vec![0u8; msg as usize];
    let mut last = Instant::now();
    while !limits.reached() && last.elapsed() < RR_IDLE {
        match control.write(&out) {
            Ok(_) => last = Instant::now(),
            Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::TimedOut => {}
            // The client closed: the stream is over.
            Err(_) => break,
        }
    }
    Ok(())
}

/// What the client said on its connection, looked at without waiting.
enum Said {
    Nothing,
    Done,
    Gone,
}

fn look(control: &mut TcpStream) -> Said {
    let mut byte = [0u8; 1];
    match control.read(&mut byte) {
        Ok(0) => Said::Gone,
        Ok(_) => Said::Done,
        Err(e) if is_transient(&e) => Said::Nothing,
        Err(_) => Said::Gone,
    }
}

/// Counts the datagrams the client marked as in its window until it says
/// it is done, drains the socket, and answers with the count and bytes.
fn udp_receive(control: &mut TcpStream, socket: &UdpSocket, limits: &Limits) -> io::Result<()> {
    control.set_nonblocking(true)?;
    let mut buf = vec![0u8; UDP_MSG_MAX as usize];
    let (mut datagrams, mut bytes) = (0u64, 0u64);
    let mut count = |n: usize, buf: &[u8]| {
        if n >= UDP_MSG_MIN as usize && buf[0] == MARK_WINDOW {
            datagrams += 1;
            bytes += n as u64;
        }
    };
    let mut since_look = 0;
    loop {
        if limits.reached() {
            return Ok(());
        }
        match socket.recv(&mut buf) {
            Ok(n) => {
                count(n, &buf);
                since_look += 1;
                if since_look < DATAGRAMS_PER_LOOK {
                    continue;
                }
            }
            Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e),
        }
        since_look = 0;
        match look(control) {
            Said::Nothing => {}
            Said::Gone => return Ok(()),
            Said::Done => break,
        }
    }
    // What the client sent last may still be on its way.
    let drain_end = Instant::now() + DRAIN_MAX;
    while Instant::now() < drain_end {
        match socket.recv(&mut buf) {
            Ok(n) => count(n, &buf),
            Err(_) => break,
        }
    }
    control.set_nonblocking(false)?;
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&datagrams.to_be_bytes());
    out[8..].copy_from_slice(&bytes.to_be_bytes());
    control.write_all(&out)
}

/// Sends numbered datagrams of `msg` bytes until the client closes its
/// connection or its socket.
fn udp_send(
    control: &mut TcpStream,
    socket: &UdpSocket,
    msg: u32,
    limits: &Limits,
) -> io::Result<()> {
    control.set_nonblocking(true)?;
    let mut datagram = vec![0u8; msg as usize];
    let mut seq = 0u64;
    let mut since_look = 0;
    while !limits.reached() {
        datagram[1..9].copy_from_slice(&seq.to_be_bytes());
        match socket.send(&datagram) {
            Ok(_) => seq += 1,
            Err(e) if is_transient(&e) => {}
            // The client's socket is closed (ICMP port unreachable).
            Err(_) => return Ok(()),
        }
        since_look += 1;
        if since_look >= DATAGRAMS_PER_LOOK {
            since_look = 0;
            if !matches!(look(control), Said::Nothing) {
                return Ok(());
            }
        }
    }
    Ok(())
}
