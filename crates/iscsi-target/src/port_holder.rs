//! Who holds a TCP port another listener wanted: so that "address in use"
//! names the process (`pid 4242 (tgtd)`) instead of leaving the
//! administrator to find it.
//!
//! Read from procfs, as `ss -ltnp` does: the listening sockets of
//! `/proc/net/tcp` and `/proc/net/tcp6` give the socket's inode, and the
//! process whose descriptor links to `socket:[inode]` holds it. Another
//! user's descriptors are unreadable without privilege; the answer then
//! says so.

use std::net::SocketAddr;
use std::path::Path;

/// TCP state LISTEN in `/proc/net/tcp` (include/net/tcp_states.h).
const TCP_LISTEN: &str = "0A";

/// Processes looked at, at most: a bound on the scan.
const PROCESSES_MAX: usize = 65_536;

/// Who listens on `addr`'s port (on its address or on every address), in
/// words: `pid 4242 (tgtd)`, or why that is not known.
pub fn describe(addr: SocketAddr) -> String {
    let inodes = listening_inodes(addr.port());
    if inodes.is_empty() {
        return "no listening socket found for the port (it may be in TIME_WAIT, or \
                another network namespace)"
            .into();
    }
    match holder(&inodes) {
        Some((pid, comm)) => format!("held by pid {pid} ({comm})"),
        None => "held by a process this user cannot see (try `ss -ltnp` as root)".into(),
    }
}

/// The inodes of the sockets listening on `port`, IPv4 and IPv6.
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        inodes.extend(text.lines().skip(1).filter_map(|l| listener_inode(l, port)));
    }
    inodes
}

/// The inode of a `/proc/net/tcp` line's socket, if it listens on `port`.
fn listener_inode(line: &str, port: u16) -> Option<u64> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    let local = fields.get(1)?;
    let state = fields.get(3)?;
    let inode = fields.get(9)?;
    let (_, port_hex) = local.rsplit_once(':')?;
    let listening = *state == TCP_LISTEN && u16::from_str_radix(port_hex, 16).ok()? == port;
    listening.then(|| inode.parse().ok()).flatten()
}

/// The first process with a descriptor on one of `inodes`: pid and name.
fn holder(inodes: &[u64]) -> Option<(u32, String)> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let processes = std::fs::read_dir("/proc").ok()?;
    for entry in processes.flatten().take(PROCESSES_MAX) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if holds(&entry.path(), &wanted) {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            return Some((pid, comm.trim().to_string()));
        }
    }
    None
}

/// Whether the process at `/proc/PID` has a descriptor linking to one of
/// `wanted`.
fn holds(process: &Path, wanted: &[String]) -> bool {
    let Ok(fds) = std::fs::read_dir(process.join("fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|link| wanted.iter().any(|w| link.as_os_str() == w.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_of_a_port_is_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let said = describe(listener.local_addr().unwrap());
        let me = std::process::id();
        assert!(said.starts_with(&format!("held by pid {me} (")), "{said}");
    }

    #[test]
    fn a_proc_net_tcp_line_is_read_for_listeners_only() {
        let listen = "   0: 0100007F:0CBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listener_inode(listen, 3260), Some(12345));
        assert_eq!(listener_inode(listen, 3261), None);
        let established = listen.replace(" 0A ", " 01 ");
        assert_eq!(listener_inode(&established, 3260), None);
    }
}
