//! Raw TCP requests and responses: the network alone, with no iSCSI, SCSI
//! or storage in it, over the path the iSCSI traffic takes and with its
//! sizes; and streams, TCP or UDP, one way at a time.
//!
//! - [`probe`] times exchanges one at a time: the network part of a
//!   command's latency (`components`).
//! - [`load`] keeps `depth` exchanges in flight on each of `connections`
//!   connections and measures their rate and the CPU each end spends per
//!   exchange: the floor under a target's and an initiator's CPU per I/O
//!   at the same shape of load.
//! - [`stream`] sends bytes one way as fast as they go and measures the
//!   throughput and each end's CPU per MB: seed 002's TCP and UDP stream
//!   tests, whose sender and receiver are the ends an offload acts on
//!   (the wire and the server's side: [`mod@stream`]).
//!
//! The wire: each request is an 8-byte header (the bytes of the request
//! that follow the header and the bytes of the response, both big-endian
//! u32) and those bytes; the server answers with the response's bytes, in
//! order. A request's size counts its header, so a 48-byte request is a
//! SCSI Command PDU's 48 bytes on the wire. The server ([`RrServer`]) is one
//! thread serving every connection from one epoll set, as a target worker
//! does: it reads what each ready connection has, then sends each one's
//! answers once per batch of events, with no copy in user space: from one
//! shared buffer of zeros, hot in cache (the network alone), or with a span
//! from 4 KiB pages taken at random out of that much written memory (the
//! floor of a random read from a memory LUN that size, which the network
//! alone flatters: the target's data comes from memory, not cache). It
//! holds no bytes per exchange, takes at most
//! [`RR_CONNECTIONS_MAX`] connections, refuses an exchange larger than
//! [`RR_BYTES_MAX`], and drops a connection idle for [`RR_IDLE`]. A
//! connection that asks for a stream leaves the epoll set for a thread of
//! its own, at most [`STREAMS_MAX`] at once.

mod load;
mod server;
pub mod stream;
mod stream_server;

pub use load::{load, LoadFigures, LoadShape, LOAD_CONNECTIONS_MAX, LOAD_DEPTH_MAX};
pub use server::{RrServer, RR_SPAN_MAX};
pub use stream::{stream, Direction, StreamFigures, StreamKind, StreamShape};

use isoe_bench::latency::{LatencyRecorder, LatencySummary};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The largest request or response one exchange may carry.
pub const RR_BYTES_MAX: u32 = 16 << 20;
/// The bytes of a request's header, the smallest request.
pub const RR_HEADER_BYTES: u32 = 8;
/// How long the server keeps a connection that sends and owes nothing.
pub const RR_IDLE: Duration = Duration::from_secs(10);
/// The most connections the server holds at once; more are closed at accept.
pub const RR_CONNECTIONS_MAX: usize = 4096;
/// The most streams the server serves at once; more are refused.
pub const STREAMS_MAX: usize = 8;

/// The sizes of one exchange, both counted on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Bytes out, the 8-byte header included.
    pub request: u32,
    /// Bytes back.
    pub response: u32,
}

impl Exchange {
    /// Checks the sizes: a request holds its header, neither passes
    /// [`RR_BYTES_MAX`].
    pub fn new(request: u32, response: u32) -> io::Result<Exchange> {
        if request < RR_HEADER_BYTES {
            return Err(invalid(format!(
                "a request is at least its {RR_HEADER_BYTES}-byte header"
            )));
        }
        if request > RR_BYTES_MAX || response > RR_BYTES_MAX {
            return Err(invalid(format!(
                "request and response are at most {RR_BYTES_MAX} bytes"
            )));
        }
        Ok(Exchange { request, response })
    }

    /// One request's bytes: the header, then filler.
    fn request_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.request as usize);
        out.extend_from_slice(&(self.request - RR_HEADER_BYTES).to_be_bytes());
        out.extend_from_slice(&self.response.to_be_bytes());
        out.resize(self.request as usize, 0x5a);
        out
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Times `count` exchanges of `exchange`'s sizes with the server at
/// `addr`, one at a time, after `warmup` untimed ones; each waits at most
/// `timeout`.
pub fn probe(
    addr: SocketAddr,
    exchange: Exchange,
    warmup: u32,
    count: u32,
    timeout: Duration,
) -> io::Result<LatencySummary> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let out = exchange.request_bytes();
    let mut back = vec![0u8; exchange.response as usize];
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
    use std::net::TcpStream;

    fn loopback() -> RrServer {
        RrServer::start("127.0.0.1:0".parse().unwrap(), 0).unwrap()
    }

    fn exchange(request: u32, response: u32) -> Exchange {
        Exchange::new(request, response).unwrap()
    }

    #[test]
    fn every_exchange_is_timed_with_the_sizes_asked() {
        let server = loopback();
        let t = Duration::from_secs(10);
        let s = probe(server.addr(), exchange(48, 4096 + 48), 5, 200, t).unwrap();
        assert_eq!(s.count, 200);
        assert!(s.min_us > 0.0 && s.min_us <= s.p50_us && s.p50_us <= s.max_us);
        let s = probe(server.addr(), exchange(4096 + 48, 48), 0, 10, t).unwrap();
        assert_eq!(s.count, 10);
        // A bare header with nothing back is an exchange too.
        assert_eq!(
            probe(server.addr(), exchange(8, 0), 0, 3, t).unwrap().count,
            3
        );
    }

    #[test]
    fn the_server_answers_byte_for_byte_what_each_request_asks() {
        let server = loopback();
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // Three requests in one write, the third split across two writes:
        // 5 + 70000 + 3 bytes owed, in order.
        let mut out = Vec::new();
        for (body, back) in [(0u32, 5u32), (100_000, 70_000), (2, 3)] {
            out.extend_from_slice(&body.to_be_bytes());
            out.extend_from_slice(&back.to_be_bytes());
            out.resize(out.len() + body as usize, 1);
        }
        let split = out.len() - 5;
        raw.write_all(&out[..split]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        raw.write_all(&out[split..]).unwrap();
        let mut back = vec![0xffu8; 5 + 70_000 + 3];
        raw.read_exact(&mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        // Nothing more comes.
        raw.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut more = [0u8; 1];
        assert!(raw.read(&mut more).is_err());
    }

    #[test]
    fn a_span_server_answers_from_its_written_pages_and_refuses_odd_spans() {
        let server = RrServer::start("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let back_bytes = 16 * 4096 + 48;
        raw.write_all(&[0, 0, 0, 0]).unwrap();
        raw.write_all(&(back_bytes as u32).to_be_bytes()).unwrap();
        let mut back = vec![0u8; back_bytes];
        raw.read_exact(&mut back).unwrap();
        // Written pages (never zero), each page one value, taken at random:
        // 16 pages of 256 can hardly all be one.
        assert!(back.iter().all(|&b| b != 0));
        let firsts: std::collections::BTreeSet<u8> =
            back.chunks(4096).map(|page| page[0]).collect();
        assert!(firsts.len() > 1, "{firsts:?}");
        assert!(back
            .chunks(4096)
            .all(|page| page.iter().all(|&b| b == page[0])));
        for span in [1, 4095, RR_SPAN_MAX + 1] {
            let err = RrServer::start("127.0.0.1:0".parse().unwrap(), span).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{span}");
            assert!(err.to_string().contains("from 4 KiB to 64 GiB"), "{err}");
        }
    }

    #[test]
    fn sizes_out_of_range_are_refused_on_both_sides() {
        for (request, response) in [(7, 0), (RR_BYTES_MAX + 1, 0), (8, RR_BYTES_MAX + 1)] {
            let err = Exchange::new(request, response).unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::InvalidInput,
                "{request} {response}"
            );
        }
        // A client that asks anyway is dropped, and the server serves on.
        let server = loopback();
        let t = Duration::from_secs(5);
        let mut raw = TcpStream::connect(server.addr()).unwrap();
        raw.set_read_timeout(Some(t)).unwrap();
        raw.write_all(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0])
            .unwrap();
        let mut byte = [0u8; 1];
        assert!(matches!(raw.read(&mut byte), Ok(0) | Err(_)));
        assert_eq!(
            probe(server.addr(), exchange(9, 1), 0, 2, t).unwrap().count,
            2
        );
    }

    #[test]
    fn a_server_that_is_gone_is_an_error_not_a_hang() {
        let addr = loopback().addr();
        // Dropped: nothing listens there any more.
        let err = probe(addr, exchange(48, 48), 0, 1, Duration::from_secs(2)).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut
            ),
            "{err}"
        );
    }

    #[test]
    fn a_load_keeps_every_connection_busy_and_measures_both_ends() {
        let server = loopback();
        let shape = LoadShape {
            connections: 8,
            depth: 3,
            exchange: exchange(48, 4144),
        };
        let pid = std::process::id();
        let f = load(
            server.addr(),
            shape,
            Duration::from_millis(100),
            Duration::from_millis(400),
            Duration::from_secs(10),
            // The server is a thread of this process.
            Some(pid),
        )
        .unwrap();
        assert_eq!(
            (f.connections, f.depth, f.request, f.response),
            (8, 3, 48, 4144)
        );
        assert!(f.seconds > 0.3 && f.seconds < 5.0, "{f:?}");
        assert!(f.exchanges > 0, "{f:?}");
        assert_eq!(f.latency.count, f.exchanges, "{f:?}");
        assert!(f.latency.min_us > 0.0 && f.latency.min_us <= f.latency.max_us);
        assert!((f.exchanges_per_s - f.exchanges as f64 / f.seconds).abs() < 1e-6);
        assert_eq!(f.server_pid, Some(pid));
        assert!(f.server_cpu_us_per_exchange.is_some());
    }

    #[test]
    fn a_load_of_a_bad_shape_or_a_silent_server_fails_clearly() {
        let server = loopback();
        let t = Duration::from_secs(2);
        let bad = |connections, depth, response| LoadShape {
            connections,
            depth,
            exchange: exchange(48, response),
        };
        for shape in [
            bad(0, 1, 48),
            bad(1, 0, 48),
            bad(1, LOAD_DEPTH_MAX + 1, 48),
            bad(1, 1, 0),
        ] {
            let err = load(server.addr(), shape, t, t, t, None).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{shape:?}");
        }
        // A listener that never answers: the load gives up after `timeout`.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let shape = bad(2, 2, 48);
        let err = load(
            silent.local_addr().unwrap(),
            shape,
            t,
            t,
            Duration::from_millis(300),
            None,
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    }
}
