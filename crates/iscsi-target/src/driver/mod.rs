//! The target's I/O driver: a fixed number of workers, each a thread with
//! its own epoll event loop (`worker.rs`), connections placed across them as
//! they are accepted; a small pool of threads for store work that may block
//! for long (`pool.rs`); one accept thread per portal; a graceful shutdown.
//!
//! Thread count does not grow with connections. A connection's work stays on
//! its worker (datapath rule 4); a read takes everything the socket has,
//! every complete PDU of it is handled, and the responses go out in one
//! vectored send (rule 2). With `[datapath] batching = false` the same
//! loop runs one PDU per system call instead (see
//! [`crate::config::Datapath::batching`]): each read asks only for the rest
//! of the PDU being assembled, and the responses to each PDU are sent, one
//! write per PDU, before the next is handled (`pump.rs`).

mod mailbox;
mod pool;
mod pump;
mod slot;
mod sock;
mod worker;

use crate::config::Config;
use crate::provision::{SetupError, WrapStore};
use crate::registry::Server;
use isoe_sync::MutexExt;
use mailbox::{Accepted, Mailbox, Msg};
use pool::IoPool;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;
use worker::{Shared, Worker, WORKERS_MAX};

/// Longest pause of an acceptor that ran out of descriptors.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why the target could not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// Opening LUNs failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A portal could not be bound.
    #[error("{}cannot listen on {addr}: {source}{holder}", at.as_ref().map(|a| format!("{a}: ")).unwrap_or_default())]
    Bind {
        /// Where the configuration file names the portal
        /// (`target.toml:3: portals[1]`); None for one of no file.
        at: Option<String>,
        /// The portal address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
        /// For an address in use: `; held by pid N (name)` (see
        /// [`crate::port_holder`]); else empty.
        holder: String,
    },
    /// A worker's event loop could not be set up.
    #[error("cannot start a worker: {0}")]
    Worker(io::Error),
}

/// A running target: its portals, acceptors and workers.
pub struct Running {
    server: Arc<Server>,
    handle: Arc<Handle>,
    workers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// One portal being served: the address as configured, the address bound
/// (port 0 becomes the port chosen), and its accept thread.
struct Acceptor {
    configured: SocketAddr,
    local: SocketAddr,
    /// Its portal group's tag.
    group_tag: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: JoinHandle<()>,
}

/// What the control plane needs of a running target: its portals, which
/// it adds to and removes from while the target serves (removing a portal
/// stops new connections to it; connections already made through it
/// stay), and a way to wake connections whose session it closed.
pub struct Handle {
    shared: Arc<Shared>,
    next: Arc<AtomicUsize>,
    list: std::sync::Mutex<Vec<Acceptor>>,
}

impl Handle {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Acceptor>> {
        self.list.lock_unpoisoned()
    }

    /// Each portal as configured, with the address it is bound to.
    pub fn bound(&self) -> Vec<(SocketAddr, SocketAddr)> {
        self.list()
            .iter()
            .map(|a| (a.configured, a.local))
            .collect()
    }

    /// Each portal as configured, with its portal group's tag.
    pub fn groups(&self) -> Vec<(SocketAddr, u16)> {
        self.list()
            .iter()
            .map(|a| (a.configured, a.group_tag))
            .collect()
    }

    /// Serves `listener` (bound by [`bind`] to `local`) as the portal
    /// configured as `configured`, in portal group `group_tag`.
    pub fn serve(
        &self,
        configured: SocketAddr,
        listener: TcpListener,
        local: SocketAddr,
        group_tag: u16,
    ) -> Result<(), StartError> {
        let acceptor = self.spawn(configured, listener, local, group_tag)?;
        self.list().push(acceptor);
        self.advertise();
        Ok(())
    }

    fn spawn(
        &self,
        configured: SocketAddr,
        listener: TcpListener,
        local: SocketAddr,
        group_tag: u16,
    ) -> Result<Acceptor, StartError> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (shared, next, flag) = (
            Arc::clone(&self.shared),
            Arc::clone(&self.next),
            Arc::clone(&stop),
        );
        let thread = std::thread::Builder::new()
            .name("isoe-accept".into())
            .spawn(move || {
                let portal = Portal { local, group_tag };
                accept_loop(listener, portal, &shared, &next, &flag)
            })
            .map_err(StartError::Worker)?;
        Ok(Acceptor {
            configured,
            local,
            group_tag,
            stop,
            thread,
        })
    }

    /// Stops serving the portal configured as `addr`; false if there is none.
    pub fn remove(&self, addr: SocketAddr) -> bool {
        let acceptor = {
            let mut list = self.list();
            let Some(pos) = list.iter().position(|a| a.configured == addr) else {
                return false;
            };
            list.remove(pos)
        };
        self.advertise();
        stop_acceptor(acceptor);
        true
    }

    /// Wakes the connections `serials` (their session was closed, say),
    /// on their workers.
    pub fn wake(&self, serials: &[u64]) {
        self.shared.wake(serials);
    }

    /// SendTargets lists the portals served now.
    fn advertise(&self) {
        let portals = self.list().iter().map(|a| (a.local, a.group_tag)).collect();
        self.shared.server.set_portals(portals);
    }
}

fn stop_acceptor(acceptor: Acceptor) {
    acceptor
        .stop
        .store(true, std::sync::atomic::Ordering::Release);
    // Wake the blocking accept so the thread sees the flag.
    let _ = TcpStream::connect_timeout(&wake_address(acceptor.local), Duration::from_millis(200));
    let _ = acceptor.thread.join();
}

/// The listen backlog asked for: as deep as `net.core.somaxconn` allows
/// (the kernel lowers it to that). Connections whose handshake finds the
/// accept queue full are not refused: the initiator's side completes, the
/// target's waits for a retransmitted SYN-ACK (after 1, 3, 7, 15 s ...), so
/// a burst of logins (hosts reconnecting after a failover) deeper than the
/// queue would trickle in over a minute. Rust's default of 128 did that.
const LISTEN_BACKLOG: i32 = 65_535;

/// Binds a portal's listening socket; returns it with the address bound.
/// `at`: where the configuration names it ([`Config::portal_place`]), for
/// the error.
pub fn bind(addr: SocketAddr, at: Option<String>) -> Result<(TcpListener, SocketAddr), StartError> {
    let failed = |source: io::Error| StartError::Bind {
        at: at.clone(),
        addr,
        holder: in_use_by(addr, &source),
        source,
    };
    let listener = listen(addr).map_err(failed)?;
    let local = listener.local_addr().map_err(failed)?;
    Ok((listener, local))
}

/// For an address in use, `; ` and who holds it; else nothing.
pub fn in_use_by(addr: SocketAddr, error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::AddrInUse {
        format!("; {}", crate::port_holder::describe(addr))
    } else {
        String::new()
    }
}

/// A listening socket on `addr` as `TcpListener::bind` makes one (address
/// reuse, close-on-exec), with a backlog of [`LISTEN_BACKLOG`]: the
/// portals' and the metrics listener's.
pub(crate) fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&socket, true)?;
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    Ok(TcpListener::from(socket))
}

impl Running {
    /// The addresses bound now (a port 0 in the config becomes the chosen port).
    pub fn portals(&self) -> Vec<SocketAddr> {
        self.handle.bound().into_iter().map(|(_, l)| l).collect()
    }

    /// The portals and wake-ups, for the control plane.
    pub fn handle(&self) -> &Arc<Handle> {
        &self.handle
    }

    /// The server state.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// How many connections each worker serves now. A session's
    /// connections share its first connection's worker; new connections go
    /// to the least loaded.
    pub fn connections_by_worker(&self) -> Vec<usize> {
        self.shared.connections_by_worker()
    }

    /// For each session (by TSIH), the worker of each of its connections.
    pub fn session_workers(&self) -> Vec<(u16, Vec<usize>)> {
        self.server
            .sessions()
            .iter()
            .map(|s| {
                let serials = s.member_serials();
                let workers = serials.iter().map(|&c| self.shared.worker_of(c));
                (s.tsih, workers.collect())
            })
            .collect()
    }

    /// Stops accepting, closes every connection, ends the workers, syncs stores.
    pub fn shutdown(self) -> Result<(), isoe_store::StoreError> {
        self.server.begin_shutdown();
        let acceptors = std::mem::take(&mut *self.handle.list());
        for acceptor in acceptors {
            stop_acceptor(acceptor);
        }
        for mailbox in &self.shared.mailboxes {
            mailbox.post(Msg::Stop);
        }
        for w in self.workers {
            let _ = w.join();
        }
        self.shared.pool.stop();
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

/// How many workers: one per CPU the process may use.
/// `[datapath] workers`, or one per CPU.
fn worker_count(configured: usize) -> usize {
    let count = match configured {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    count.clamp(1, WORKERS_MAX)
}

/// Binds every portal, opens the LUNs and starts serving. Portals are bound
/// first so that a port 0 in the configuration is advertised (SendTargets)
/// as the port the system chose.
pub fn start(config: Config) -> Result<Running, StartError> {
    start_with_stores_wrapped(config, &|_, _, store| store)
}

/// [`start`], with each LUN's store passed through `wrap` once opened
/// ([`crate::provision::WrapStore`]).
pub fn start_with_stores_wrapped(
    mut config: Config,
    wrap: WrapStore<'_>,
) -> Result<Running, StartError> {
    let mut bound = Vec::with_capacity(config.portals.len());
    for addr in &config.portals {
        let (listener, local) = bind(*addr, config.portal_place(*addr))?;
        bound.push((*addr, listener, local));
    }
    config.portals = bound.iter().map(|(_, _, local)| *local).collect();
    let server = Arc::new(Server::with_stores_wrapped(config, wrap)?);
    if let Some(note) = &server.limits_note {
        tracing::warn!("{note}");
    }
    let datapath = server.config.datapath;
    let mailboxes = (0..worker_count(datapath.workers))
        .map(|_| Mailbox::new().map(Arc::new))
        .collect::<io::Result<Vec<_>>>()
        .map_err(StartError::Worker)?;
    let shared = Arc::new(Shared {
        server: Arc::clone(&server),
        // SANITIZE's overwrite goes to the pool even with io_threads = 0:
        // it lasts as long as the medium takes.
        pool: IoPool::start(datapath.io_threads.max(1), mailboxes.clone()),
        load: (0..mailboxes.len()).map(|_| Default::default()).collect(),
        mailboxes,
        moved: Default::default(),
        next_sequence: std::sync::atomic::AtomicU64::new(1),
    });
    // Weak: the server outlives the workers' shared state otherwise.
    let reach = Arc::downgrade(&shared);
    server.enable_task_sets(Box::new(move |serials| {
        if let Some(shared) = reach.upgrade() {
            shared.wake(serials);
        }
    }));
    let mut workers = Vec::with_capacity(shared.mailboxes.len());
    for index in 0..shared.mailboxes.len() {
        let worker = Worker::new(index, Arc::clone(&shared)).map_err(StartError::Worker)?;
        let handle = std::thread::Builder::new()
            .name(format!("isoe-worker-{index}"))
            .spawn(move || worker.run())
            .map_err(StartError::Worker)?;
        workers.push(handle);
    }
    let handle = Arc::new(Handle {
        shared: Arc::clone(&shared),
        next: Arc::new(AtomicUsize::new(0)),
        list: Default::default(),
    });
    for (index, (configured, listener, local)) in bound.into_iter().enumerate() {
        let group_tag = handle.shared.server.config.portal_group_tag(index);
        let acceptor = handle.spawn(configured, listener, local, group_tag)?;
        handle.list().push(acceptor);
    }
    Ok(Running {
        server,
        handle,
        workers,
        shared,
    })
}

/// A portal as its accept loop knows it.
#[derive(Clone, Copy)]
struct Portal {
    /// The address bound.
    local: SocketAddr,
    /// The tag of its portal group: its connections' TargetPortalGroupTag
    /// and their sessions' relative target port.
    group_tag: u16,
}

/// Accepts connections on one portal and places them on the workers in
/// turn. Out of descriptors (EMFILE, ENFILE), it pauses, longer each time
/// up to [`ACCEPT_BACKOFF_MAX`], rather than spin on the pending connection.
fn accept_loop(
    listener: TcpListener,
    portal: Portal,
    shared: &Shared,
    next: &AtomicUsize,
    stop: &std::sync::atomic::AtomicBool,
) {
    let local = portal.local;
    let mut backoff = Duration::ZERO;
    let mut log = AdmissionLog::default();
    loop {
        let accepted = listener.accept();
        if shared.server.is_shutting_down() || stop.load(Ordering::Acquire) {
            break;
        }
        match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::ZERO;
                // The address the initiator reached, not the listener's: on
                // a wildcard portal SendTargets must name the former.
                let reached = stream.local_addr().unwrap_or(local);
                let accepted = Accepted {
                    stream,
                    local: reached,
                    portal_group_tag: portal.group_tag,
                    peer,
                };
                admit(shared, next, accepted, &mut log);
            }
            Err(e) if e.raw_os_error().is_some_and(is_out_of_descriptors) => {
                if backoff.is_zero() {
                    tracing::warn!(portal = %local, "cannot accept: {e}; pausing");
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), ACCEPT_BACKOFF_MAX);
                std::thread::sleep(backoff);
            }
            Err(_) => {}
        }
    }
}

/// Admits an accepted connection and hands it to a worker, after closing
/// the logins waiting on their peers evicted to make room for it (silent
/// or stalled, `admission.rs`); or closes it at
/// once, before any login, so that nothing is held for it.
fn admit(shared: &Shared, next: &AtomicUsize, accepted: Accepted, log: &mut AdmissionLog) {
    let worker = shared.pick_worker(next.fetch_add(1, Ordering::Relaxed));
    let serial = shared.new_serial(worker);
    let (peer, local) = (accepted.peer, accepted.local);
    let now = std::time::Instant::now();
    match shared.server.gate.admit_connection(peer.ip(), serial, now) {
        Ok(evicted) => {
            for eviction in &evicted {
                shared.evict(eviction.serial);
                log.evicted(local, peer, eviction);
            }
            shared.place_on(worker, serial, accepted);
        }
        // Dropped here: the peer sees its connection end before any login.
        Err(why) => log.refused(local, peer, &why),
    }
}

/// How often refused or evicted connections are reported at most.
const ADMISSION_LOG_EVERY: Duration = Duration::from_secs(10);

/// Events logged the first time and then as a count at most every
/// [`ADMISSION_LOG_EVERY`], so that a flood cannot flood the log.
#[derive(Default)]
struct Throttle {
    last: Option<std::time::Instant>,
    unreported: u64,
}

impl Throttle {
    /// Counts one event; returns how many to report now, if it is time.
    fn note(&mut self) -> Option<u64> {
        self.unreported += 1;
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|at| now.duration_since(at) < ADMISSION_LOG_EVERY)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

/// One portal's log of what its limits turned away or closed.
#[derive(Default)]
struct AdmissionLog {
    refusals: Throttle,
    evictions: Throttle,
}

impl AdmissionLog {
    fn refused(&mut self, local: SocketAddr, peer: SocketAddr, why: &crate::admission::Refusal) {
        let Some(count) = self.refusals.note() else {
            return;
        };
        tracing::warn!(
            addr = %peer,
            portal = %local,
            "connection from {peer} refused: {why} ({count} refused since the last report)"
        );
    }

    fn evicted(
        &mut self,
        local: SocketAddr,
        peer: SocketAddr,
        eviction: &crate::admission::Eviction,
    ) {
        let Some(count) = self.evictions.note() else {
            return;
        };
        tracing::warn!(
            addr = %peer,
            portal = %local,
            evicted = %eviction.peer,
            "connection from {} closed while logging in, to make room for one from {peer} \
             ({}): {} ({count} closed so since the last report)",
            eviction.peer,
            eviction.idle,
            eviction.why
        );
    }
}

/// EMFILE or ENFILE: the process or the system has no descriptor to spare.
fn is_out_of_descriptors(errno: i32) -> bool {
    let e = rustix::io::Errno::from_raw_os_error(errno);
    e == rustix::io::Errno::MFILE || e == rustix::io::Errno::NFILE
}

#[cfg(test)]
mod tests {
    use super::pump::{read_len, Progress, Pump, RECV_BUFFER_START_BYTES};
    use super::*;
    use crate::connection::{Connection, Endpoint, Flow};
    use isoe_wire::digest::Crc32cImpl;
    use isoe_wire::frame::{decode, Decoded};
    use isoe_wire::frame::{encode, FrameLimits};
    use isoe_wire::login::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
    use isoe_wire::negotiate::{Digest, LocalParams, SessionType};
    use isoe_wire::pdu::{Lun, NopOut, ScsiCommand, RESERVED_TAG};
    use isoe_wire::Pdu;
    use std::io::Read;
    use std::time::Instant;

    const TARGET: &str = "iqn.2026-11.io.isoe:driver";

    #[test]
    fn a_portal_queues_a_burst_of_connections_deeper_than_128() {
        // Nothing accepts while the burst connects: each handshake must wait
        // in the accept queue, not for a retransmitted SYN-ACK.
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        let burst = 1000.min(somaxconn);
        let (listener, local) = bind("127.0.0.1:0".parse().unwrap(), None).expect("bind");
        let clients: Vec<TcpStream> = (0..burst)
            .map_while(|_| TcpStream::connect_timeout(&local, Duration::from_millis(500)).ok())
            .collect();
        assert_eq!(clients.len(), burst, "every connect completes");
        listener.set_nonblocking(true).unwrap();
        let mut accepted = 0;
        while listener.accept().is_ok() {
            accepted += 1;
        }
        assert_eq!(
            accepted, burst,
            "the accept queue held the whole burst (net.core.somaxconn {somaxconn})"
        );
    }

    fn server(datapath: &str) -> Arc<Server> {
        let text = format!(
            "portals = [\"127.0.0.1:0\"]\n[[target]]\nname = \"{TARGET}\"\n\
             [[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n[datapath]\n{datapath}\n"
        );
        Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            serial: 1,
            local: "127.0.0.1:3260".parse().unwrap(),
            portal_group_tag: 1,
            peer: "127.0.0.1:40000".parse().unwrap(),
            peer_gone: None,
        }
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
                    let now = Instant::now();
                    assert_eq!(conn.handle_frame(&frame, now), Flow::Continue);
                    let mut sent = Vec::new();
                    conn.flush(&mut sent, now).expect("flush to a Vec");
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
        let mut conn = Connection::new(server.clone(), endpoint(), Instant::now(), [3; 32]);
        let limits = login(&mut conn, digests);
        let (bytes, ends) = commands(&limits);
        let mut script = Script {
            bytes,
            at: 0,
            reads: Vec::new(),
        };
        let mut sink = Calls::default();
        let batching = server.config.datapath.batching;
        let mut pump = Pump::new(conn, batching);
        // As a worker would: read again while the pump stays open (a short
        // read ends each call), sending once after each, until the script's
        // end closes it.
        for _ in 0..16 {
            if pump.on_readable_unsent(&mut script, &mut sink, Instant::now()) == Progress::Closed {
                break;
            }
            let mut no_more = io::empty();
            if pump.on_writable(&mut no_more, &mut sink, Instant::now()) == Progress::Closed {
                break;
            }
        }
        assert!(
            script.at == script.bytes.len(),
            "the script was read to its end"
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
                (RECV_BUFFER_START_BYTES, *ends.last().unwrap()),
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
