//! The target's I/O driver: one listener thread per portal, one thread per
//! connection doing blocking reads into a large buffer (every complete PDU
//! of a read is handled before the one vectored send of its responses), and
//! a graceful shutdown.
//!
//! A thread per connection keeps a connection's work on one core with no
//! event-loop bookkeeping: a read returns everything the socket has, which is
//! the batching datapath rule 2 asks for, at one syscall per batch each way.

use crate::config::Config;
use crate::connection::{Connection, Flow};
use crate::registry::{Server, SetupError};
use isoe_wire::frame::{decode, Decoded};
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// How often an idle connection wakes to run timers (NOP-In, shutdown).
const TICK: Duration = Duration::from_millis(1000);
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
    let mut recv = RecvBuffer::new(RECV_BUFFER_BYTES);
    let mut sink = &stream;
    'connection: loop {
        let read = (&stream).read(recv.spare());
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
                if conn.flush(&mut sink).is_err() || flow == Flow::Close {
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
                        let _ = conn.flush(&mut sink);
                        break 'connection;
                    }
                }
                Ok(Decoded::NeedMore { total_len }) => {
                    recv.make_room(total_len);
                    break;
                }
                Err(error) => {
                    let (flow, skip) = conn.handle_frame_error(&error);
                    if flow == Flow::Close {
                        let _ = conn.flush(&mut sink);
                        break 'connection;
                    }
                    recv.consume(skip);
                }
            }
        }
        if conn.flush(&mut sink).is_err() || server.is_shutting_down() {
            break;
        }
    }
    conn.detach();
    let _ = stream.shutdown(Shutdown::Both);
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
