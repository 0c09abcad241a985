//! Finding the local process that listens on a TCP port, so a target on
//! this machine is measured without being told its PID.

use std::fs;
use std::net::IpAddr;

/// True for addresses on this machine's loopback.
pub fn is_local(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// The PID of the process with a listening TCP socket on `port`, if exactly
/// one such process can be seen (IPv4 or IPv6).
pub fn listener_pid(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let mut found = None;
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().and_then(socket_inode))
                .is_some_and(|inode| inodes.contains(&inode))
        });
        if owns {
            if found.is_some_and(|f| f != pid) {
                return None;
            }
            found = Some(pid);
        }
    }
    found
}

fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Inodes of sockets in state LISTEN (0A) on `port` in a /proc/net/tcp table.
pub fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local = f.get(1)?;
            let state = f.get(3)?;
            let inode = f.get(9)?.parse::<u64>().ok()?;
            let p = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (*state == "0A" && p == port).then_some(inode)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_found_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:0CBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:0CBC 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1\n";
        assert_eq!(listening_inodes(table, 3260), vec![4242]);
        assert!(listening_inodes(table, 3261).is_empty());
        assert!(is_local("127.0.0.1") && is_local("::1") && is_local("localhost"));
        assert!(!is_local("10.99.0.1"));
    }

    #[test]
    fn our_own_listener_is_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(listener_pid(port), Some(std::process::id()));
    }
}
