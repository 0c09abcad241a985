//! The serving end: one thread, one epoll set, every connection (see the
//! module doc of [`super`]).

use super::stream::{Hello, HELLO_BYTES, STREAM_HELLO, STREAM_VERSION};
use super::{stream_server, RR_BYTES_MAX, RR_CONNECTIONS_MAX, RR_HEADER_BYTES, RR_IDLE};
use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::fd::OwnedFd;
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the loop looks at the stop flag and for idle connections.
const TICK: Duration = Duration::from_millis(50);
/// Events taken per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;
/// The epoll key of the listener (connection slots never reach it).
const LISTENER_KEY: u64 = u64::MAX;
/// Bytes read per `recv`: the requests are thrown away once counted.
const SCRATCH_BYTES: usize = 64 << 10;
/// Slices per `sendmsg`: each the whole shared buffer of zeros, or one
/// page of the span ([`Source::Span`]).
const SLICES_PER_SEND: usize = 16;
/// The span's unit: a response is sent from pages of it taken at random.
const SPAN_PAGE_BYTES: usize = 4096;
/// The largest span a server takes.
pub const RR_SPAN_MAX: u64 = 64 << 30;
/// Past this many bytes owed, a connection is not read until it drains:
/// a client that sends and never reads costs no CPU.
const OWED_MAX: u64 = 64 << 20;

/// The serving side, until dropped.
#[derive(Debug)]
pub struct RrServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RrServer {
    /// Listens on `listen` (port 0: any) and serves on a thread of its own.
    /// With `span` 0 every response is sent from one small buffer, hot in
    /// cache: what the network alone costs. With a span, from pages taken
    /// at random out of that many bytes of memory, written first so each
    /// is its own: the floor of a 4 KiB random read from a memory LUN of
    /// that size, which pays the same trips to memory.
    pub fn start(listen: SocketAddr, span: u64) -> io::Result<RrServer> {
        let source = Source::new(span)?;
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &listener,
            EventData::new_u64(LISTENER_KEY),
            EventFlags::IN,
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let mut server = Server {
            stop: Arc::clone(&stop),
            streams: Arc::new(AtomicUsize::new(0)),
            listener,
            epoll,
            peers: Vec::new(),
            free: Vec::new(),
            ready: Vec::new(),
            scratch: vec![0; SCRATCH_BYTES].into_boxed_slice(),
            source,
        };
        let thread = std::thread::Builder::new()
            .name("isoe-rr".into())
            .spawn(move || server.run(&stopping))?;
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

/// Where a connection is in its stream of requests.
#[derive(Debug, Clone, Copy)]
enum Parse {
    /// Within a header: its bytes so far.
    Header { got: usize, bytes: [u8; 8] },
    /// Within a request's body: bytes still to come, then the response owed.
    Body { left: u32, response: u32 },
    /// Within a stream's hello ([`super::stream`]): its bytes so far.
    Hello {
        got: usize,
        bytes: [u8; HELLO_BYTES],
    },
}

/// What a batch of bytes from a connection came to.
#[derive(Debug)]
enum Consumed {
    /// Requests (or parts of them), counted.
    Requests,
    /// A stream's whole hello, and nothing after it.
    Stream(Hello),
    /// A request or hello the server refuses: the connection is closed.
    Refused,
}

#[derive(Debug)]
struct Peer {
    stream: TcpStream,
    parse: Parse,
    /// Response bytes not yet sent.
    owed: u64,
    /// In the list of connections to send to after this batch.
    ready: bool,
    /// It has made an exchange: a stream's hello may come only first.
    served: bool,
    /// What epoll reports for it now.
    interest: EventFlags,
    last_active: Instant,
}

struct Server {
    /// The server's stop flag, which its streams watch too.
    stop: Arc<AtomicBool>,
    /// Streams under way, each on a thread of its own.
    streams: Arc<AtomicUsize>,
    listener: TcpListener,
    epoll: OwnedFd,
    peers: Vec<Option<Peer>>,
    /// Empty slots of `peers`.
    free: Vec<usize>,
    /// Slots that owe bytes, to send to once the batch is read.
    ready: Vec<usize>,
    scratch: Box<[u8]>,
    source: Source,
}

/// Where response bytes are sent from.
enum Source {
    /// One shared buffer of zeros.
    Zeros(Box<[u8]>),
    /// Pages of a large buffer, taken at random.
    Span {
        data: Box<[u8]>,
        pick: fastrand::Rng,
    },
}

impl Source {
    fn new(span: u64) -> io::Result<Source> {
        if span == 0 {
            return Ok(Source::Zeros(vec![0; SCRATCH_BYTES].into_boxed_slice()));
        }
        if span > RR_SPAN_MAX || (span as usize) < SPAN_PAGE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a span of {span} bytes: from 4 KiB to 64 GiB"),
            ));
        }
        let mut data = Vec::new();
        data.try_reserve_exact(span as usize).map_err(|e| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("a span of {span} bytes: {e}"),
            )
        })?;
        // Written, not merely allocated: untouched pages would all be the
        // kernel's one zero page, hot in cache.
        for page in 0..span as usize / SPAN_PAGE_BYTES {
            data.resize(data.len() + SPAN_PAGE_BYTES, page as u8 | 1);
        }
        Ok(Source::Span {
            data: data.into_boxed_slice(),
            pick: fastrand::Rng::new(),
        })
    }

    /// Fills `slices` with up to `owed` bytes; returns how many it used.
    fn slices<'a>(&'a mut self, owed: u64, slices: &mut [IoSlice<'a>]) -> usize {
        let (data, mut pick): (&'a [u8], _) = match self {
            Source::Zeros(zeros) => (zeros, None),
            Source::Span { data, pick } => (data, Some(pick)),
        };
        let mut left = owed;
        let mut used = 0;
        while left > 0 && used < slices.len() {
            let piece = match pick.as_mut() {
                None => data,
                Some(pick) => {
                    let page = pick.usize(..data.len() / SPAN_PAGE_BYTES) * SPAN_PAGE_BYTES;
                    &data[page..page + SPAN_PAGE_BYTES]
                }
            };
            let take = left.min(piece.len() as u64) as usize;
            slices[used] = IoSlice::new(&piece[..take]);
            left -= take as u64;
            used += 1;
        }
        used
    }
}

impl Server {
    fn run(&mut self, stop: &AtomicBool) {
        let mut events = Vec::with_capacity(EVENTS_PER_WAIT);
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as _,
        };
        let mut next_tick = Instant::now() + TICK;
        while !stop.load(Ordering::Relaxed) {
            events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut events), Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
            let now = Instant::now();
            for event in &events {
                match event.data.u64() {
                    LISTENER_KEY => self.accept(now),
                    key => self.serve(key as usize, event.flags, now),
                }
            }
            for slot in std::mem::take(&mut self.ready) {
                self.send(slot);
            }
            if now >= next_tick {
                self.drop_idle(now);
                next_tick = now + TICK;
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Drained, or a connection that failed before it was taken.
                Err(_) => return,
            };
            let held = self.peers.len() - self.free.len();
            if held >= RR_CONNECTIONS_MAX
                || stream.set_nonblocking(true).is_err()
                || stream.set_nodelay(true).is_err()
            {
                continue; // dropped: closed
            }
            let slot = self.free.pop().unwrap_or_else(|| {
                self.peers.push(None);
                self.peers.len() - 1
            });
            if epoll::add(
                &self.epoll,
                &stream,
                EventData::new_u64(slot as u64),
                EventFlags::IN,
            )
            .is_err()
            {
                self.free.push(slot);
                continue;
            }
            self.peers[slot] = Some(Peer {
                stream,
                parse: Parse::Header {
                    got: 0,
                    bytes: [0; 8],
                },
                owed: 0,
                ready: false,
                served: false,
                interest: EventFlags::IN,
                last_active: now,
            });
        }
    }

    /// Reads what `slot` has (input), or sends what it owes (room to write).
    fn serve(&mut self, slot: usize, flags: EventFlags, now: Instant) {
        let Some(Some(peer)) = self.peers.get_mut(slot) else {
            return;
        };
        peer.last_active = now;
        if flags.contains(EventFlags::OUT) && !flags.contains(EventFlags::IN) {
            self.send(slot);
            return;
        }
        if peer.owed > OWED_MAX {
            return;
        }
        loop {
            let n = match peer.stream.read(&mut self.scratch) {
                Ok(0) => return self.close(slot),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.close(slot),
            };
            match consume(peer, &self.scratch[..n]) {
                Consumed::Requests => {}
                Consumed::Stream(hello) => return self.hand_off(slot, hello),
                Consumed::Refused => return self.close(slot),
            }
            if n < self.scratch.len() || peer.owed > OWED_MAX {
                break;
            }
        }
        if peer.owed > 0 && !peer.ready {
            peer.ready = true;
            self.ready.push(slot);
        }
    }

    /// Sends what `slot` owes until done or the socket is full; asks epoll
    /// for room only while bytes are left.
    fn send(&mut self, slot: usize) {
        let Some(Some(peer)) = self.peers.get_mut(slot) else {
            return;
        };
        peer.ready = false;
        while peer.owed > 0 {
            let mut slices = [IoSlice::new(&[]); SLICES_PER_SEND];
            let used = self.source.slices(peer.owed, &mut slices);
            match peer.stream.write_vectored(&slices[..used]) {
                Ok(n) => peer.owed -= n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(slot),
            }
        }
        let want = match (peer.owed > 0, peer.owed > OWED_MAX) {
            (false, _) => EventFlags::IN,
            (true, false) => EventFlags::IN | EventFlags::OUT,
            (true, true) => EventFlags::OUT,
        };
        if want != peer.interest {
            if epoll::modify(
                &self.epoll,
                &peer.stream,
                EventData::new_u64(slot as u64),
                want,
            )
            .is_err()
            {
                return self.close(slot);
            }
            peer.interest = want;
        }
    }

    fn drop_idle(&mut self, now: Instant) {
        for slot in 0..self.peers.len() {
            let idle = self.peers[slot]
                .as_ref()
                .is_some_and(|p| now.duration_since(p.last_active) >= RR_IDLE);
            if idle {
                self.close(slot);
            }
        }
    }

    /// Takes `slot`'s connection out of the epoll set and serves the
    /// stream its hello asks for ([`stream_server`]).
    fn hand_off(&mut self, slot: usize, hello: Hello) {
        if let Some(peer) = self.peers[slot].take() {
            let _ = epoll::delete(&self.epoll, &peer.stream);
            self.free.push(slot);
            stream_server::start(peer.stream, hello, &self.stop, &self.streams);
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(peer) = self.peers[slot].take() {
            let _ = epoll::delete(&self.epoll, &peer.stream);
            self.free.push(slot);
            // A slot in `ready` is skipped by `send` once empty.
        }
    }
}

/// Counts the requests in `bytes` into `peer.owed`; a stream's hello,
/// which must come first and alone (the client waits for the answer), is
/// read whole and handed back.
fn consume(peer: &mut Peer, mut bytes: &[u8]) -> Consumed {
    while !bytes.is_empty() {
        match &mut peer.parse {
            Parse::Header { got, bytes: header } => {
                let take = (header.len() - *got).min(bytes.len());
                header[*got..*got + take].copy_from_slice(&bytes[..take]);
                *got += take;
                bytes = &bytes[take..];
                if *got == header.len() {
                    let body = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
                    let response = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
                    peer.parse = match (body, response) {
                        (STREAM_HELLO, STREAM_VERSION) if peer.owed == 0 && !peer.served => {
                            Parse::Hello {
                                got: 0,
                                bytes: [0; HELLO_BYTES],
                            }
                        }
                        _ if body > RR_BYTES_MAX - RR_HEADER_BYTES || response > RR_BYTES_MAX => {
                            return Consumed::Refused
                        }
                        _ => Parse::Body {
                            left: body,
                            response,
                        },
                    };
                }
            }
            Parse::Body { left, .. } => {
                let take = (*left as usize).min(bytes.len());
                *left -= take as u32;
                bytes = &bytes[take..];
            }
            Parse::Hello { got, bytes: hello } => {
                let take = (hello.len() - *got).min(bytes.len());
                hello[*got..*got + take].copy_from_slice(&bytes[..take]);
                *got += take;
                bytes = &bytes[take..];
                if *got == hello.len() {
                    return match Hello::decode(hello) {
                        Some(hello) if bytes.is_empty() => Consumed::Stream(hello),
                        _ => Consumed::Refused,
                    };
                }
            }
        }
        if let Parse::Body { left: 0, response } = peer.parse {
            peer.owed += u64::from(response);
            peer.served = true;
            peer.parse = Parse::Header {
                got: 0,
                bytes: [0; 8],
            };
        }
    }
    Consumed::Requests
}
