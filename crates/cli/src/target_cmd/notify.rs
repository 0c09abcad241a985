//! systemd's readiness notification (sd_notify(3)) for `Type=notify`
//! units, without libsystemd: one datagram, "READY=1", to the Unix socket
//! named by `$NOTIFY_SOCKET` (a path, or an abstract name written with a
//! leading '@'). Outside systemd the variable is unset and nothing is sent.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Tells the service manager that the portals are listening, if one asked
/// (`$NOTIFY_SOCKET` set). Returns whether a notification was sent.
pub fn ready() -> io::Result<bool> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(socket) if !socket.is_empty() => send(&socket, "READY=1").map(|()| true),
        _ => Ok(false),
    }
}

/// Sends `state` (newline-separated `KEY=value` assignments) to `socket`.
fn send(socket: &OsStr, state: &str) -> io::Result<()> {
    let address = match socket.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(socket)?,
    };
    let sent = UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &address)?;
    if sent != state.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("{sent} of {} bytes sent", state.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn received(listener: &UnixDatagram) -> String {
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn a_path_socket_gets_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1").unwrap();
        assert_eq!(received(&listener), "READY=1");
    }

    #[test]
    fn an_abstract_socket_is_written_with_an_at_sign() {
        let name = format!("isoe-notify-test-{}", std::process::id());
        let listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        send(OsStr::new(&format!("@{name}")), "READY=1").unwrap();
        assert_eq!(received(&listener), "READY=1");
    }

    #[test]
    fn a_socket_nobody_listens_on_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nobody");
        assert!(send(path.as_os_str(), "READY=1").is_err());
    }
}
