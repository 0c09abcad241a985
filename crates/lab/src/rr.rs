//! A raw TCP request and response, timed: the network part of a command's
//! latency (`components`), measured over the same path as the iSCSI
//! traffic with the same sizes, with no iSCSI, SCSI or storage in it.
//!
//! The client sends an 8-byte header (request and response lengths, both
//! big-endian u32) and the request's bytes; the server reads them and sends
//! the response's bytes; the client times each exchange, one at a time.
//! The server takes one connection at a time (a probe is one client) on
//! one thread, holds at most [`RR_BYTES_MAX`] per exchange, and drops a
//! connection that asks for more or stalls longer than [`RR_IDLE`].

use isoe_bench::latency::{LatencyRecorder, LatencySummary};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest request or response one exchange may carry.
pub const RR_BYTES_MAX: u32 = 16 << 20;
/// How long the server waits for a connection's next bytes.
pub const RR_IDLE: Duration = Duration::from_secs(10);

/// The serving side, until dropped.
#[derive(Debug)]
pub struct RrServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RrServer {
    /// Listens on `listen` (port 0: any) and serves on a thread of its own.
    pub fn start(listen: SocketAddr) -> io::Result<RrServer> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        // Non-blocking accepts, so that a drop is seen within a tick.
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("isoe-rr".into())
            .spawn(move || serve(&listener, &stopping))?;
        Ok(RrServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RrServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const TICK: Duration = Duration::from_millis(50);

fn serve(listener: &TcpListener, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // One connection at a time; an error ends only it.
                let _ = exchange_all(stream, stop);
            }
            // Nothing waiting (or a failed accept): look again shortly.
            Err(_) => std::thread::sleep(TICK),
        }
    }
}

/// Answers `stream`'s requests until it closes, errs, stalls or the server stops.
fn exchange_all(mut stream: TcpStream, stop: &AtomicBool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    // Short reads, so that a stop is seen; RR_IDLE of them in a row end it.
    stream.set_read_timeout(Some(TICK))?;
    stream.set_write_timeout(Some(RR_IDLE))?;
    let mut buf = Vec::new();
    loop {
        let mut header = [0u8; 8];
        if !read_full(&mut stream, &mut header, stop, true)? {
            return Ok(());
        }
        let request = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
        let response = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
        if request > RR_BYTES_MAX || response > RR_BYTES_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an exchange larger than 16 MiB",
            ));
        }
        buf.resize(request.max(response) as usize, 0);
        if !read_full(&mut stream, &mut buf[..request as usize], stop, false)? {
            return Ok(());
        }
        stream.write_all(&buf[..response as usize])?;
    }
}

/// Fills `buf`; false at a clean end of stream before its first byte (when
/// `may_end`), or when the server stops; an error on a stall of RR_IDLE.
fn read_full(
    stream: &mut TcpStream,
    buf: &mut [u8],
    stop: &AtomicBool,
    may_end: bool,
) -> io::Result<bool> {
    let mut got = 0;
    let mut idle_since = Instant::now();
    while got < buf.len() {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match stream.read(&mut buf[got..]) {
            Ok(0) if got == 0 && may_end => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                got += n;
                idle_since = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if idle_since.elapsed() >= RR_IDLE {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Times `count` exchanges of `request` bytes out and `response` bytes
/// back with the server at `addr`, one at a time, after `warmup` untimed
/// ones; each waits at most `timeout`.
pub fn probe(
    addr: SocketAddr,
    request: u32,
    response: u32,
    warmup: u32,
    count: u32,
    timeout: Duration,
) -> io::Result<LatencySummary> {
    if request > RR_BYTES_MAX || response > RR_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("request and response are at most {RR_BYTES_MAX} bytes"),
        ));
    }
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut out = Vec::with_capacity(8 + request as usize);
    out.extend_from_slice(&request.to_be_bytes());
    out.extend_from_slice(&response.to_be_bytes());
    out.resize(8 + request as usize, 0x5a);
    let mut back = vec![0u8; response as usize];
    let mut latency = LatencyRecorder::new();
    for i in 0..warmup + count {
        let started = Instant::now();
        stream.write_all(&out)?;
        stream.read_exact(&mut back)?;
        if i >= warmup {
            latency.record_ns(started.elapsed().as_nanos() as u64);
        }
    }
    Ok(latency.summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> RrServer {
        RrServer::start("127.0.0.1:0".parse().unwrap()).unwrap()
    }

    #[test]
    fn every_exchange_is_timed_with_the_sizes_asked() {
        let server = loopback();
        let t = Duration::from_secs(10);
        let s = probe(server.addr(), 48, 4096 + 48, 5, 200, t).unwrap();
        assert_eq!(s.count, 200);
        assert!(s.min_us > 0.0 && s.min_us <= s.p50_us && s.p50_us <= s.max_us);
        // A second client after the first: one connection at a time, in turn.
        let s = probe(server.addr(), 4096 + 48, 48, 0, 10, t).unwrap();
        assert_eq!(s.count, 10);
        // Empty both ways is an exchange too.
        assert_eq!(probe(server.addr(), 0, 0, 0, 3, t).unwrap().count, 3);
    }

    #[test]
    fn an_oversized_exchange_is_refused_on_both_sides() {
        let server = loopback();
        let t = Duration::from_secs(5);
        let err = probe(server.addr(), RR_BYTES_MAX + 1, 0, 0, 1, t).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        // A client that asks anyway is dropped, and the server serves on.
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(t)).unwrap();
        raw.write_all(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0])
            .unwrap();
        let mut byte = [0u8; 1];
        assert!(matches!(raw.read(&mut byte), Ok(0) | Err(_)));
        assert_eq!(probe(server.addr(), 1, 1, 0, 2, t).unwrap().count, 2);
    }

    #[test]
    fn a_server_that_is_gone_is_an_error_not_a_hang() {
        let addr = loopback().addr();
        // Dropped: nothing listens there any more.
        let err = probe(addr, 48, 48, 0, 1, Duration::from_secs(2)).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut
            ),
            "{err}"
        );
    }
}
