//! The HTTP listener of `[metrics] listen`: `GET /metrics` only, on one
//! thread that waits on every connection at once (poll), so that no client
//! holds up another or the stop.
//!
//! Bounds: at most [`CONNECTIONS_MAX`] connections are kept (descriptors
//! come from the target's reserve); one more closes the oldest that is
//! still sending its request, so that idle connections cannot shut a
//! scrape out. Each connection has [`CONNECTION_DEADLINE`] from its accept
//! to send its request head (at most 8 KiB) and take the whole answer; a
//! byte now and then does not extend it. Dropping the listener wakes the
//! thread at once, whatever its clients do.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest request head read.
const REQUEST_MAX_BYTES: usize = 8192;

/// Connections kept at once.
pub const CONNECTIONS_MAX: usize = 16;

/// How long a connection has, from its accept, to send its request and
/// take the answer.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);

/// How long accepting pauses after an error other than "none waiting"
/// (out of descriptors, say), which would otherwise wake the poll at once
/// again and again.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Polls `fds` until one is ready or `nearest` (a deadline) comes: `fds[0]`
/// is the stop signal (None once it is ready), `fds[1]` the listener, the
/// rest the clients, whose readiness is returned in order. The metrics
/// listener and the control socket's accepting thread wait alike.
pub(crate) fn wait_for(
    fds: &mut [PollFd<'_>],
    nearest: Option<Instant>,
    now: Instant,
) -> Option<Vec<PollFlags>> {
    let timeout = nearest.and_then(|t| Timespec::try_from(t.saturating_duration_since(now)).ok());
    match poll(fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        // Not expected with valid descriptors; wait a little rather than
        // spin.
        Err(_) => std::thread::sleep(ACCEPT_PAUSE),
    }
    if !fds[0].revents().is_empty() {
        return None;
    }
    Some(fds[2..].iter().map(PollFd::revents).collect())
}

/// The listener; dropping it stops it.
pub struct Listener {
    addr: SocketAddr,
    /// Closed on drop: its peer, in the poll, wakes the thread.
    wake: Option<UnixStream>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Binds `addr` and serves what `render` returns on each scrape.
    pub fn start(
        addr: SocketAddr,
        render: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<Listener> {
        // A burst of scrapers or of idle connections deeper than std's
        // backlog of 128 would wait for retransmitted SYN-ACKs (1 s and
        // more): the portals' deep backlog serves here too.
        let listener = crate::driver::listen(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (wake, woken) = UnixStream::pair()?;
        let thread = std::thread::Builder::new()
            .name("isoe-metrics".into())
            .spawn(move || Serve::new(listener, woken).run(&render))?;
        Ok(Listener {
            addr,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// The address bound (port 0 becomes the port chosen).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One client: reading its head, then writing its answer.
struct Connection {
    stream: TcpStream,
    deadline: Instant,
    head: Vec<u8>,
    /// The answer, once the head is whole; empty while reading.
    answer: Vec<u8>,
    sent: usize,
}

/// What a step of a connection left.
#[derive(PartialEq, Eq)]
enum Step {
    Open,
    Done,
}

struct Serve {
    listener: TcpListener,
    woken: UnixStream,
    connections: Vec<Connection>,
    /// Accepting waits until then after an error.
    accept_after: Option<Instant>,
}

impl Serve {
    fn new(listener: TcpListener, woken: UnixStream) -> Serve {
        Serve {
            listener,
            woken,
            connections: Vec::new(),
            accept_after: None,
        }
    }

    fn run(mut self, render: &dyn Fn() -> String) {
        loop {
            let now = Instant::now();
            self.connections.retain(|c| c.deadline > now);
            if self.accept_after.is_some_and(|t| t <= now) {
                self.accept_after = None;
            }
            let Some(ready) = self.wait(now) else {
                return;
            };
            let mut i = 0;
            self.connections.retain_mut(|c| {
                let flags = ready.get(i).copied().unwrap_or(PollFlags::empty());
                i += 1;
                flags.is_empty() || c.step(render) == Step::Open
            });
            if self.accept_after.is_none() {
                self.accept_all(render);
            }
        }
    }

    /// Waits until the wake stream, the listener or a connection is ready,
    /// or the nearest deadline; returns each connection's readiness, or
    /// None when it is time to stop.
    fn wait(&self, now: Instant) -> Option<Vec<PollFlags>> {
        let mut fds = Vec::with_capacity(self.connections.len() + 2);
        fds.push(PollFd::new(&self.woken, PollFlags::IN));
        // A paused listener is polled for nothing, so that it cannot wake
        // the poll at once again.
        let accepting = if self.accept_after.is_none() {
            PollFlags::IN
        } else {
            PollFlags::empty()
        };
        fds.push(PollFd::new(&self.listener, accepting));
        for c in &self.connections {
            let wanted = if c.answer.is_empty() {
                PollFlags::IN
            } else {
                PollFlags::OUT
            };
            fds.push(PollFd::new(&c.stream, wanted));
        }
        let nearest = self
            .connections
            .iter()
            .map(|c| c.deadline)
            .chain(self.accept_after)
            .min();
        wait_for(&mut fds, nearest, now)
    }

    /// Takes every connection waiting, keeping at most [`CONNECTIONS_MAX`].
    fn accept_all(&mut self, render: &dyn Fn() -> String) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.accept_after = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.connections.len() >= CONNECTIONS_MAX {
                // The oldest still sending its request goes: a scrape sends
                // its head at once, idle and trickling clients do not.
                match self.connections.iter().position(|c| c.answer.is_empty()) {
                    Some(oldest) => drop(self.connections.remove(oldest)),
                    None => continue,
                }
            }
            let mut c = Connection {
                stream,
                deadline: Instant::now() + CONNECTION_DEADLINE,
                head: Vec::new(),
                answer: Vec::new(),
                sent: 0,
            };
            // Its head has usually come with it.
            if c.step(render) == Step::Open {
                self.connections.push(c);
            }
        }
    }
}

impl Connection {
    /// Reads what has come, or writes what the socket takes.
    fn step(&mut self, render: &dyn Fn() -> String) -> Step {
        if self.answer.is_empty() {
            match self.read_head() {
                Ok(true) => self.answer = answer(&self.head, render),
                Ok(false) => return Step::Open,
                Err(()) => return Step::Done,
            }
        }
        self.write()
    }

    /// Ok(true) once the head is whole; Err when the client closed, sent
    /// too much, or failed.
    fn read_head(&mut self) -> Result<bool, ()> {
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(()),
                Ok(n) if self.head.len() + n > REQUEST_MAX_BYTES => return Err(()),
                Ok(n) => self.head.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Err(()),
            }
            if self.head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
        }
    }

    fn write(&mut self) -> Step {
        while self.sent < self.answer.len() {
            match self.stream.write(&self.answer[self.sent..]) {
                Ok(0) => return Step::Done,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Open,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Step::Done,
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        Step::Done
    }
}

/// The HTTP answer to a request `head`.
fn answer(head: &[u8], render: &dyn Fn() -> String) -> Vec<u8> {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next(), parts.next());
    let (status, content_type, body) = match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(),
        ),
        (Some(b"GET"), _) => (
            "404 Not Found",
            "text/plain",
            "isoe serves /metrics only\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_string(),
        ),
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(body.as_bytes());
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        stream.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn idle_connections_beyond_the_bound_do_not_shut_a_scrape_out() {
        let listener = Listener::start("127.0.0.1:0".parse().unwrap(), || "m 1\n".into()).unwrap();
        let idle: Vec<TcpStream> = (0..CONNECTIONS_MAX * 3)
            .map(|_| TcpStream::connect(listener.addr()).unwrap())
            .collect();
        let text = scrape(listener.addr());
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nm 1\n"), "{text}");
        let mut gone = 0;
        for mut c in idle {
            c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            if matches!(c.read(&mut [0u8; 1]), Ok(0) | Err(_)) {
                gone += 1;
            }
            if gone == CONNECTIONS_MAX * 2 {
                break;
            }
        }
        assert_eq!(gone, CONNECTIONS_MAX * 2, "the oldest were closed");
    }

    #[test]
    fn a_trickle_is_cut_at_the_deadline_and_does_not_hold_up_the_drop() {
        let listener = Listener::start("127.0.0.1:0".parse().unwrap(), String::new).unwrap();
        let mut trickle = TcpStream::connect(listener.addr()).unwrap();
        let started = Instant::now();
        let cut = loop {
            if trickle.write_all(b"G").is_err() {
                break started.elapsed();
            }
            assert!(started.elapsed() < CONNECTION_DEADLINE * 2, "never cut off");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(cut >= CONNECTION_DEADLINE, "cut after {cut:?}");
        let mut trickle = TcpStream::connect(listener.addr()).unwrap();
        trickle.write_all(b"GET /met").unwrap();
        let started = Instant::now();
        drop(listener);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
