//! A session: the state its connections share (RFC 7143 §4.2).
//!
//! The command window (ExpCmdSN, MaxCmdSN) lives here, so that commands of a
//! session arriving on several connections (MC/S) reach the SCSI layer in
//! CmdSN order. The lock is per session, never process-wide
//! (ARCHITECTURE.md, datapath rule 4); a single-connection session takes it
//! uncontended.

use crate::registry::Target;
use isoe_scsi::Nexus;
use isoe_wire::negotiate::SessionParams;
use isoe_wire::serial::{sn_gt, sn_in_window, sn_lt};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How many commands past ExpCmdSN an initiator may have outstanding.
pub const COMMAND_WINDOW: u32 = 128;

/// How long a command that arrived ahead of a CmdSN gap waits for the gap to fill.
pub const CMD_SN_GAP_WAIT: Duration = Duration::from_secs(30);

/// Where a command's CmdSN falls against the session's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// In order: deliver now (the window has advanced past it).
    Deliver,
    /// Outside [ExpCmdSN, MaxCmdSN]: RFC 7143 §4.2.2.1 says ignore it silently.
    OutsideWindow,
    /// The gap before it did not fill in time, or the session closed.
    GapTimeout,
}

#[derive(Debug)]
struct Window {
    exp_cmd_sn: u32,
    /// Connections waiting in `admit_ordered` for a lower CmdSN: only then
    /// does advancing the window need a wake-up (a futex system call).
    waiters: u32,
}

/// A connection could not join: the session has MaxConnections already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("session already has MaxConnections={max_connections}")]
pub struct SessionFull {
    /// The negotiated limit.
    pub max_connections: u16,
}

/// One connection of a session, as the session sees it.
#[derive(Debug)]
pub struct Member {
    /// The connection ID the initiator chose.
    pub cid: u16,
    /// A handle to shut the socket down from another thread (logout, reinstatement).
    pub socket: Option<TcpStream>,
    /// Unique per connection in the process.
    pub serial: u64,
}

/// State shared by the connections of one session.
#[derive(Debug)]
pub struct Session {
    /// Target Session Identifying Handle.
    pub tsih: u16,
    /// Initiator Session ID.
    pub isid: [u8; 6],
    /// The initiator's iSCSI name.
    pub initiator_name: String,
    /// The target of a normal session; None for discovery.
    pub target: Option<Arc<Target>>,
    /// Negotiated session-wide parameters.
    pub params: SessionParams,
    /// The I_T nexus handed to the SCSI layer: initiator name and ISID,
    /// through target port 1.
    pub nexus: Nexus,
    window: Mutex<Window>,
    advanced: Condvar,
    /// Mirror of ExpCmdSN for lock-free reads when building responses.
    exp_cmd_sn: AtomicU32,
    members: Mutex<Vec<Member>>,
    closed: AtomicBool,
    /// Set once the I_T nexus was detached from the target's units.
    nexus_ended: AtomicBool,
}

impl Session {
    /// A new session whose first non-immediate command will carry `cmd_sn`.
    pub fn new(
        tsih: u16,
        isid: [u8; 6],
        initiator_name: String,
        target: Option<Arc<Target>>,
        params: SessionParams,
        cmd_sn: u32,
    ) -> Session {
        let nexus = Nexus::new(initiator_name.clone(), isid);
        // SAM-5 5.14: the nexus hears of unit attention conditions from its
        // login until the session ends (Drop below).
        if let Some(target) = &target {
            for lu in target.units() {
                lu.attach(&nexus);
            }
        }
        Session {
            tsih,
            isid,
            initiator_name,
            target,
            params,
            nexus,
            window: Mutex::new(Window {
                exp_cmd_sn: cmd_sn,
                waiters: 0,
            }),
            advanced: Condvar::new(),
            exp_cmd_sn: AtomicU32::new(cmd_sn),
            members: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            nexus_ended: AtomicBool::new(false),
        }
    }

    /// ExpCmdSN as last advanced.
    pub fn exp_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn.load(Ordering::Acquire)
    }

    /// MaxCmdSN: the window stays COMMAND_WINDOW commands wide.
    pub fn max_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn().wrapping_add(COMMAND_WINDOW - 1)
    }

    /// Admits a non-immediate command with `cmd_sn`, waiting (bounded) when
    /// it arrived on one connection ahead of a lower CmdSN still in flight
    /// on another (RFC 7143 §3.2.2.1: delivery in CmdSN order).
    pub fn admit_ordered(&self, cmd_sn: u32) -> Admit {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let max = window.exp_cmd_sn.wrapping_add(COMMAND_WINDOW - 1);
        if !sn_in_window(cmd_sn, window.exp_cmd_sn, max) {
            return Admit::OutsideWindow;
        }
        if sn_gt(cmd_sn, window.exp_cmd_sn) {
            let deadline = std::time::Instant::now() + CMD_SN_GAP_WAIT;
            while sn_lt(window.exp_cmd_sn, cmd_sn) {
                if self.closed.load(Ordering::Acquire) {
                    return Admit::GapTimeout;
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    return Admit::GapTimeout;
                }
                let wait = (deadline - now).min(Duration::from_millis(500));
                window.waiters += 1;
                window = self
                    .advanced
                    .wait_timeout(window, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                window.waiters -= 1;
            }
            if window.exp_cmd_sn != cmd_sn {
                // Someone else delivered this CmdSN meanwhile: a duplicate.
                return Admit::OutsideWindow;
            }
        }
        window.exp_cmd_sn = cmd_sn.wrapping_add(1);
        self.exp_cmd_sn.store(window.exp_cmd_sn, Ordering::Release);
        // std's notify_all makes a system call even with nobody waiting;
        // with one connection nobody ever is.
        let waiters = window.waiters;
        drop(window);
        if waiters > 0 {
            self.advanced.notify_all();
        }
        Admit::Deliver
    }

    /// Checks an immediate command's CmdSN: it must lie in the window but does not advance it.
    pub fn admit_immediate(&self, cmd_sn: u32) -> Admit {
        let exp = self.exp_cmd_sn();
        if sn_in_window(cmd_sn, exp, exp.wrapping_add(COMMAND_WINDOW - 1)) {
            Admit::Deliver
        } else {
            Admit::OutsideWindow
        }
    }

    /// Adds a connection; fails when MaxConnections are already in use. A
    /// connection with the same CID is reinstated: the old one is shut down.
    pub fn join(&self, member: Member) -> Result<(), SessionFull> {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pos) = members.iter().position(|m| m.cid == member.cid) {
            // RFC 7143 §6.3.4: connection reinstatement on CID reuse.
            let old = members.swap_remove(pos);
            if let Some(s) = old.socket {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        if members.len() >= self.params.max_connections as usize {
            return Err(SessionFull {
                max_connections: self.params.max_connections,
            });
        }
        members.push(member);
        Ok(())
    }

    /// Removes a connection; returns true when it was the last one.
    pub fn leave(&self, serial: u64) -> bool {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        members.retain(|m| m.serial != serial);
        members.is_empty()
    }

    /// Whether the initiator has closed every connection of the session
    /// (FIN or RST waiting on each socket), seen without taking data from
    /// the sockets. False if any connection is open or can't be looked at.
    pub fn closed_by_peer(&self) -> bool {
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        !members.is_empty()
            && members
                .iter()
                .all(|m| m.socket.as_ref().is_some_and(peer_closed))
    }

    /// Number of connections now in the session.
    pub fn connection_count(&self) -> usize {
        self.members.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when connection `cid` is part of the session.
    pub fn has_cid(&self, cid: u16) -> bool {
        self.members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|m| m.cid == cid)
    }

    /// Shuts down connection `cid` (not `except_serial`), for Logout of another connection.
    pub fn close_cid(&self, cid: u16, except_serial: u64) {
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        for m in members
            .iter()
            .filter(|m| m.cid == cid && m.serial != except_serial)
        {
            if let Some(s) = &m.socket {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// Closes the whole session: every connection but `except_serial` is shut down now.
    pub fn close(&self, except_serial: u64) {
        self.closed.store(true, Ordering::Release);
        self.advanced.notify_all();
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        for m in members.iter().filter(|m| m.serial != except_serial) {
            if let Some(s) = &m.socket {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// The I_T nexus ends (SAM-5 I_T nexus loss): the units forget it, and
    /// an SPC-2 reservation it held is released. Runs once; called before a
    /// Logout Response and when the last connection leaves, so an initiator
    /// that goes on through another session never meets the old nexus.
    pub fn end_nexus(&self) {
        if self.nexus_ended.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(target) = &self.target {
            for lu in target.units() {
                lu.detach(&self.nexus);
            }
        }
    }

    /// True once the session was closed (logout, reinstatement, shutdown).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl Drop for Session {
    /// The I_T nexus is gone at the latest when the last handle to its
    /// session is.
    fn drop(&mut self) {
        self.end_nexus();
    }
}

/// Whether the peer of `socket` has closed it: a peek that does not wait
/// finds the end of the stream (or a reset) and no data before it.
fn peer_closed(socket: &std::net::TcpStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut byte = [0u8; 1];
    match recv(socket, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((0, _)) => true,
        Ok(_) => false,
        Err(e) => e == rustix::io::Errno::CONNRESET || e == rustix::io::Errno::NOTCONN,
    }
}

#[cfg(test)]
mod tests {
    use super::peer_closed;
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// A connected pair on loopback: (initiator's end, target's end).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    /// Polls `peer_closed` until it says `expected` (the FIN crosses
    /// loopback asynchronously) or a generous time passes.
    fn settles_to(socket: &TcpStream, expected: bool) -> bool {
        let give_up = Instant::now() + Duration::from_secs(10);
        while Instant::now() < give_up {
            if peer_closed(socket) == expected {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn a_peek_tells_a_closed_connection_from_an_open_or_busy_one() {
        let (client, server) = pair();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert!(!peer_closed(&server), "open and idle: not closed, no wait");
        (&client).write_all(b"x").expect("write");
        assert!(settles_to(&server, false));
        drop(client);
        // Data sent before the close still waits to be read: not closed yet.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!peer_closed(&server));

        let (client, server) = pair();
        client.shutdown(Shutdown::Write).expect("shutdown");
        assert!(settles_to(&server, true), "FIN seen without reading");
        drop(client);
        assert!(settles_to(&server, true));
    }
}
