//! The loading end: `connections` connections, `depth` exchanges in flight
//! on each, all on one thread with one epoll set, as `isoe bench` drives its
//! sessions from one worker: a batch of events is read first, each answer
//! completed puts its connection's next request in place at once, and each
//! connection sends once per batch. The rate and each end's CPU per
//! exchange over a measured window are the floor under an iSCSI run of the
//! same shape (see the module doc of [`super`]).

use super::Exchange;
use isoe_bench::cpu::{self, CpuSplit, CpuTimes, ProcessCpu};
use isoe_bench::latency::{LatencyRecorder, LatencySummary};
use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::fd::OwnedFd;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Events taken per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;
/// Bytes read per `recv`: the answers are thrown away once counted.
const SCRATCH_BYTES: usize = 64 << 10;
/// The longest one wait sleeps, so that the window ends on time.
const WAIT_MAX: Duration = Duration::from_millis(50);
/// The most connections and the deepest queue one load may ask for.
pub const LOAD_CONNECTIONS_MAX: u32 = 4096;
pub const LOAD_DEPTH_MAX: u32 = 1024;

/// What to load the server with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadShape {
    /// TCP connections, all driven by one thread.
    pub connections: u32,
    /// Exchanges in flight on each.
    pub depth: u32,
    /// The sizes of each exchange.
    pub exchange: Exchange,
}

/// What a load measured over its window (`isoe netprobe --json`'s line,
/// which the lab reads back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    pub connections: u32,
    pub depth: u32,
    /// Bytes out per exchange, header included.
    pub request: u32,
    /// Bytes back per exchange.
    pub response: u32,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Exchanges answered within it.
    pub exchanges: u64,
    pub exchanges_per_s: f64,
    /// This process's CPU (the loading thread and nothing else of note).
    pub client_cpu_us_per_exchange: f64,
    /// The server's, when its PID is known.
    pub server_pid: Option<u32>,
    pub server_cpu_us_per_exchange: Option<f64>,
    /// The whole machine's busy CPU: what the kernel charged to no process
    /// (loopback TCP in softirq) included.
    pub system_cpu_us_per_exchange: f64,
    pub steal_pct: f64,
    /// Issue to answer of each exchange, as seen from the loading thread.
    pub latency: LatencySummary,
}

/// One connection's exchanges.
struct Conn {
    stream: TcpStream,
    /// When each exchange in flight was put in place, oldest first.
    issued: VecDeque<Instant>,
    /// Bytes of requests put in place and not yet written.
    unsent: usize,
    /// Where in one request the next byte to write is.
    offset: usize,
    /// Bytes of the answer under way received so far.
    partial: u64,
    ready: bool,
    interest: EventFlags,
}

/// Refuses a shape the load cannot make or count.
fn check(shape: &LoadShape) -> io::Result<()> {
    let LoadShape {
        connections,
        depth,
        exchange,
    } = *shape;
    if !(1..=LOAD_CONNECTIONS_MAX).contains(&connections) || !(1..=LOAD_DEPTH_MAX).contains(&depth)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "1 to {LOAD_CONNECTIONS_MAX} connections and 1 to {LOAD_DEPTH_MAX} in flight on each"
            ),
        ));
    }
    if exchange.response == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a load needs answers of at least one byte to count them",
        ));
    }
    Ok(())
}

/// Opens `shape.connections` connections to `addr`, each registered in
/// `epoll` under its index with `shape.depth` requests to send.
fn connect(
    addr: SocketAddr,
    shape: &LoadShape,
    epoll: &OwnedFd,
    started: Instant,
    timeout: Duration,
) -> io::Result<Vec<Conn>> {
    let (connections, depth) = (shape.connections, shape.depth);
    let request = shape.exchange.request as usize;
    let mut conns = Vec::with_capacity(connections as usize);
    for i in 0..connections {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        epoll::add(
            epoll,
            &stream,
            EventData::new_u64(u64::from(i)),
            EventFlags::IN,
        )?;
        conns.push(Conn {
            stream,
            issued: std::iter::repeat_n(started, depth as usize).collect(),
            unsent: request * depth as usize,
            offset: 0,
            partial: 0,
            ready: false,
            interest: EventFlags::IN,
        });
    }
    Ok(conns)
}

impl Conn {
    /// Reads what the server sent until it has no more, counting whole
    /// answers: each answered exchange is sent again (its latency in
    /// `latency` while measuring). Returns how many were answered.
    fn read_answers(
        &mut self,
        scratch: &mut [u8],
        exchange: Exchange,
        now: Instant,
        mut latency: Option<&mut LatencyRecorder>,
        addr: SocketAddr,
    ) -> io::Result<u64> {
        let response = u64::from(exchange.response);
        let mut answered = 0;
        loop {
            let n = match self.stream.read(scratch) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{addr} closed a connection"),
                    ))
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.partial += n as u64;
            let done = self.partial / response;
            self.partial %= response;
            for _ in 0..done {
                let Some(issued) = self.issued.pop_front() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{addr} answered more than it was asked"),
                    ));
                };
                if let Some(latency) = latency.as_deref_mut() {
                    latency.record_ns(now.duration_since(issued).as_nanos() as u64);
                }
                self.issued.push_back(now);
            }
            answered += done;
            self.unsent += exchange.request as usize * done as usize;
            if n < scratch.len() {
                break;
            }
        }
        Ok(answered)
    }
}

/// The figures of `answered` exchanges between the samples `first` and
/// `last`.
fn figures(
    shape: &LoadShape,
    server_pid: Option<u32>,
    first: &Sample,
    last: &Sample,
    answered: u64,
    latency: &LatencyRecorder,
) -> LoadFigures {
    let seconds = last.at.duration_since(first.at).as_secs_f64();
    let per = |cpu_s: f64| cpu_s * 1e6 / answered.max(1) as f64;
    let hz = cpu::ticks_per_second();
    let split = CpuSplit::between(&first.system, &last.system, hz);
    LoadFigures {
        connections: shape.connections,
        depth: shape.depth,
        request: shape.exchange.request,
        response: shape.exchange.response,
        seconds,
        exchanges: answered,
        exchanges_per_s: answered as f64 / seconds.max(f64::MIN_POSITIVE),
        client_cpu_us_per_exchange: per(first.client.delta_s(&last.client)),
        server_pid,
        server_cpu_us_per_exchange: match (&first.server, &last.server) {
            (Some(a), Some(b)) => Some(per(a.delta_s(b))),
            _ => None,
        },
        system_cpu_us_per_exchange: per(split.busy_cpu_s),
        steal_pct: split.steal_pct,
        latency: latency.summary(),
    }
}

/// Loads the server at `addr` with `shape` for `ramp` and then measures
/// `duration`; fails when no answer comes for `timeout`. The server's CPU is
/// read from `server_pid`'s `/proc` entry when given.
pub fn load(
    addr: SocketAddr,
    shape: LoadShape,
    ramp: Duration,
    duration: Duration,
    timeout: Duration,
    server_pid: Option<u32>,
) -> io::Result<LoadFigures> {
    let (depth, exchange) = (shape.depth, shape.exchange);
    check(&shape)?;
    let request = exchange.request as usize;
    // One request more than the deepest queue: a write may start anywhere
    // within the first.
    let requests = exchange.request_bytes().repeat(depth as usize + 1);
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let started = Instant::now();
    let mut conns = connect(addr, &shape, &epoll, started, timeout)?;
    let mut ready: Vec<usize> = (0..conns.len()).collect();
    let mut events = Vec::with_capacity(EVENTS_PER_WAIT);
    let mut scratch = vec![0u8; SCRATCH_BYTES];
    let mut latency = LatencyRecorder::new();
    let window_start = started + ramp;
    let window_end = window_start + duration;
    let mut first: Option<Sample> = None;
    let mut answered = 0u64;
    let mut last_answer = started;
    loop {
        for &i in &ready {
            send(&epoll, &mut conns[i], i, &requests, request)?;
        }
        ready.clear();
        let now = Instant::now();
        if first.is_none() && now >= window_start {
            first = Some(Sample::take(server_pid, now)?);
            answered = 0;
            latency.clear();
        }
        if now >= window_end && first.is_some() {
            break;
        }
        if now.duration_since(last_answer) >= timeout {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from {addr} in {} s", timeout.as_secs()),
            ));
        }
        let wait = window_start
            .max(window_end)
            .saturating_duration_since(now)
            .min(WAIT_MAX);
        let wait = Timespec {
            tv_sec: 0,
            tv_nsec: wait.as_nanos() as _,
        };
        events.clear();
        match epoll::wait(&epoll, spare_capacity(&mut events), Some(&wait)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let now = Instant::now();
        let measuring = first.is_some();
        for event in &events {
            let i = event.data.u64() as usize;
            let flags = event.flags;
            let conn = &mut conns[i];
            if flags.contains(EventFlags::OUT) && !conn.ready {
                conn.ready = true;
                ready.push(i);
            }
            if !flags.intersects(EventFlags::IN | EventFlags::ERR | EventFlags::HUP) {
                continue;
            }
            let recorder = measuring.then_some(&mut latency);
            let done = conn.read_answers(&mut scratch, exchange, now, recorder, addr)?;
            if done > 0 {
                answered += done;
                last_answer = now;
                if !conn.ready {
                    conn.ready = true;
                    ready.push(i);
                }
            }
        }
    }
    let first = first.expect("the loop ends only after the window started");
    let last = Sample::take(server_pid, Instant::now())?;
    Ok(figures(
        &shape, server_pid, &first, &last, answered, &latency,
    ))
}

/// Writes what `conn` has in place; asks epoll for room only while bytes
/// are left.
fn send(
    epoll: &rustix::fd::OwnedFd,
    conn: &mut Conn,
    key: usize,
    requests: &[u8],
    request: usize,
) -> io::Result<()> {
    conn.ready = false;
    while conn.unsent > 0 {
        match conn
            .stream
            .write(&requests[conn.offset..conn.offset + conn.unsent])
        {
            Ok(n) => {
                conn.unsent -= n;
                conn.offset = (conn.offset + n) % request;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let want = if conn.unsent > 0 {
        EventFlags::IN | EventFlags::OUT
    } else {
        EventFlags::IN
    };
    if want != conn.interest {
        epoll::modify(epoll, &conn.stream, EventData::new_u64(key as u64), want)?;
        conn.interest = want;
    }
    Ok(())
}

/// The CPU counters at one moment (a load's or a stream's).
pub(super) struct Sample {
    pub(super) at: Instant,
    pub(super) client: ProcessCpu,
    pub(super) server: Option<ProcessCpu>,
    pub(super) system: CpuTimes,
}

impl Sample {
    pub(super) fn take(server_pid: Option<u32>, at: Instant) -> io::Result<Sample> {
        let proc_error = |e: isoe_bench::proc_error::ProcError| io::Error::other(e.to_string());
        Ok(Sample {
            at,
            client: cpu::self_cpu().map_err(proc_error)?,
            // A server that is gone shows as no figure, not a failed load.
            server: server_pid.and_then(|pid| cpu::read_process(pid).ok()),
            system: CpuTimes::read().map_err(proc_error)?,
        })
    }
}
