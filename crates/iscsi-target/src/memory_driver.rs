//! A driver with no sockets and no threads: one [`Connection`] with the
//! bytes it has received and not yet taken, driven by the same rules as the
//! target's worker (`driver/pump.rs`, `driver/worker.rs`), with the time
//! passed in: what it sends and ends goes at the last time it was given. No
//! clock is handed to the connection, so no command is sampled for its
//! stage timings. Its caller moves the bytes and decides when store work runs;
//! the pair harness of the tests and the fuzz targets drive connections
//! through it.
//!
//! The rules: every complete PDU received is handled until one waits
//! behind a CmdSN gap (then the PDUs behind it are only looked at for
//! immediate ones, until a wake-up or more bytes come, as the worker reads
//! on while a command waits) or the connection is to close (then its
//! output goes, it detaches from its session and the connections that
//! must hear of it are named); output that reaches its bound is taken at
//! once, as if the socket always had room. Input that pauses on what no
//! send frees (the store work of reads out, the process's Data-In budget)
//! is taken up again once the connection's output is no longer full after
//! a wake-up, a tick or returned work.

use crate::admission::{Eviction, Refusal};
use crate::connection::{Action, Connection, Endpoint, Finished, Flow, Work};
use crate::registry::Server;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// Where every connection driven in memory comes from.
const PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 40000);

/// What driving a connection gave: for the caller to carry out.
#[derive(Debug, Default)]
pub struct Drive {
    /// Bytes to send to the initiator: whole PDUs, in order.
    pub output: Vec<u8>,
    /// Serials of connections to wake ([`MemoryConnection::wake`]).
    pub wakes: Vec<u64>,
    /// Store work to run; its completion goes back through
    /// [`MemoryConnection::complete_work`] with the token.
    pub work: Vec<(u64, Work)>,
    /// The connection ended in this call.
    pub closed: bool,
}

/// One connection driven in memory.
pub struct MemoryConnection {
    conn: Connection,
    /// The last time the caller gave.
    now: Instant,
    received: Vec<u8>,
    waiting: bool,
    /// Input paused on output that sending did not free.
    paused: bool,
    open: bool,
}

impl MemoryConnection {
    /// A connection `server` has just accepted at `now`, from 127.0.0.1 to
    /// port 3260. Its random seed is made from its serial, so that a run
    /// repeats exactly.
    pub fn accept(server: &Arc<Server>, now: Instant) -> MemoryConnection {
        MemoryConnection::accept_in_group(server, now, crate::config::DEFAULT_PORTAL_GROUP_TAG)
    }

    /// As [`MemoryConnection::accept`], on a portal of the portal group
    /// `portal_group_tag` (at 127.0.0.1, port 3260 + the tag - 1).
    pub fn accept_in_group(
        server: &Arc<Server>,
        now: Instant,
        portal_group_tag: u16,
    ) -> MemoryConnection {
        MemoryConnection::with_serial(server, now, portal_group_tag, server.next_serial())
    }

    /// As [`MemoryConnection::accept`], admitted first under `[limits]` as
    /// the target's accept thread admits a connection (`driver/mod.rs`):
    /// with the connections evicted to make room for it, which the caller
    /// closes; or the limit that refuses it.
    pub fn admit(
        server: &Arc<Server>,
        now: Instant,
    ) -> Result<(MemoryConnection, Vec<Eviction>), Refusal> {
        let serial = server.next_serial();
        let evicted = server.gate.admit_connection(PEER.ip(), serial, now)?;
        let tag = crate::config::DEFAULT_PORTAL_GROUP_TAG;
        let conn = MemoryConnection::with_serial(server, now, tag, serial);
        Ok((conn, evicted))
    }

    fn with_serial(
        server: &Arc<Server>,
        now: Instant,
        portal_group_tag: u16,
        serial: u64,
    ) -> MemoryConnection {
        let port = 3260u16.wrapping_add(portal_group_tag.wrapping_sub(1));
        let endpoint = Endpoint {
            serial,
            local: ([127, 0, 0, 1], port).into(),
            portal_group_tag,
            peer: PEER,
            peer_gone: None,
        };
        let seed = [serial as u8; 32];
        MemoryConnection {
            conn: Connection::new(server.clone(), endpoint, now, seed),
            now,
            received: Vec::new(),
            waiting: false,
            paused: false,
            open: true,
        }
    }

    /// The connection's state machine.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// False once the connection ended.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Bytes received and not yet handled.
    pub fn unread(&self) -> usize {
        self.received.len()
    }

    /// Whether input waits behind a CmdSN gap for a wake-up.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// Whether input is paused until the connection's output is no
    /// longer full.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Bytes arrive: they are handled, or looked at past the command that
    /// waits.
    pub fn receive(&mut self, bytes: &[u8], now: Instant, drive: &mut Drive) {
        if !self.open {
            return;
        }
        self.now = now;
        self.received.extend_from_slice(bytes);
        self.feed(now, drive);
    }

    /// Another connection's wake-up ([`Drive::wakes`]): the connection
    /// closes if it was ended from elsewhere, else its held input is
    /// handled again.
    pub fn wake(&mut self, now: Instant, drive: &mut Drive) {
        if !self.open {
            return;
        }
        self.now = now;
        match self.conn.handle_wake() {
            Flow::Close => self.close(drive),
            _ if self.waiting => {
                self.waiting = false;
                self.feed(now, drive);
            }
            _ => self.settle(drive),
        }
    }

    /// Settles, then takes up paused input if the output now has room.
    fn settle_then_resume(&mut self, drive: &mut Drive) {
        self.settle(drive);
        if self.paused && !self.waiting && !self.conn.output_full() {
            self.feed(self.now, drive);
        }
    }

    /// The clock reached `now`: the connection's timers run.
    pub fn tick(&mut self, now: Instant, drive: &mut Drive) {
        if !self.open {
            return;
        }
        self.now = now;
        match self.conn.handle_tick(now) {
            Flow::Close => self.close(drive),
            Flow::Continue | Flow::Wait => self.settle_then_resume(drive),
        }
    }

    /// Store work handed out in [`Drive::work`] is done.
    pub fn complete_work(&mut self, token: u64, finished: Finished, drive: &mut Drive) {
        if !self.open {
            return;
        }
        self.conn.complete_work(token, finished);
        self.settle_then_resume(drive);
    }

    /// Ends the connection (the target decided so, or its peer left): what
    /// is queued goes, and it detaches from its session.
    pub fn close(&mut self, drive: &mut Drive) {
        if !self.open {
            return;
        }
        self.flush(drive);
        self.conn.detach(self.now);
        // As the worker drops a closed connection: what detaching queued
        // goes nowhere.
        self.conn.discard_output();
        self.open = false;
        self.waiting = false;
        self.paused = false;
        self.received.clear();
        drive.closed = true;
        while let Some(action) = self.conn.poll_action() {
            if let Action::Wake(serial) = action {
                drive.wakes.push(serial);
            }
        }
    }

    fn feed(&mut self, now: Instant, drive: &mut Drive) {
        self.waiting = false;
        self.paused = false;
        loop {
            let input = self.conn.handle_input(&self.received, now);
            self.received.drain(..input.consumed);
            match input.flow {
                Flow::Close => return self.close(drive),
                Flow::Wait => self.waiting = true,
                Flow::Continue if input.output_full => {
                    self.flush(drive);
                    if !self.conn.output_full() {
                        continue;
                    }
                    self.paused = true;
                }
                Flow::Continue => {}
            }
            break;
        }
        self.settle(drive);
    }

    /// Takes the connection's actions, then its output.
    fn settle(&mut self, drive: &mut Drive) {
        while let Some(action) = self.conn.poll_action() {
            match action {
                Action::Wake(serial) => drive.wakes.push(serial),
                Action::Run { token, work } => drive.work.push((token, work)),
            }
        }
        self.flush(drive);
    }

    fn flush(&mut self, drive: &mut Drive) {
        // Writing to a Vec cannot fail.
        let _ = self.conn.flush(&mut drive.output, self.now);
    }
}
