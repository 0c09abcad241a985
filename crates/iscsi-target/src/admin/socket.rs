//! The control socket: a Unix socket where `isoe admin` sends one request
//! and reads one answer, each a JSON object on one line.
//!
//! Only the target's own user (root, for a service) may use it: the socket
//! file is made with mode 0600, and each client's credentials
//! (SO_PEERCRED) must be root's or the target's own user's. One thread
//! serves one client at a time, each with a 10 s deadline and requests of
//! at most 1 MiB, so a client that hangs or floods holds nothing but its
//! own turn.

use super::Admin;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest request line taken.
const REQUEST_MAX_BYTES: u64 = 1 << 20;

/// How long a client has to send its request and read its answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(10);

/// Why the control socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another process answers on the path.
    #[error("{} is in use by another running target", path.display())]
    InUse {
        /// The socket's path.
        path: PathBuf,
    },
    /// Making the directory, binding or setting the mode failed.
    #[error("cannot make the control socket {}: {source}", path.display())]
    Io {
        /// The socket's path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// A control socket being served; dropping it stops it and removes the file.
pub struct ControlSocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    /// The listening socket, to wake the thread's accept when stopping.
    listener: UnixListener,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Binds `path` (its directory made if missing; a stale socket file of
    /// a target that is gone replaced) and serves `admin` on it.
    pub fn start(path: &Path, admin: Arc<Admin>) -> Result<ControlSocket, SocketError> {
        let io = |source| SocketError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        let listener = UnixListener::bind(path).map_err(io)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let own = listener.try_clone().map_err(io)?;
        let thread = std::thread::Builder::new()
            .name("isoe-control".into())
            .spawn(move || serve(listener, &admin, &flag))
            .map_err(io)?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            stop,
            listener: own,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept: shutting a listening socket down makes
        // it return at once (a connection to the path would too, but the
        // file may have been removed, with its directory).
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(listener: UnixListener, admin: &Admin, stop: &AtomicBool) {
    let own_uid = rustix::process::geteuid().as_raw();
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(stream) = stream else {
            // Out of descriptors, say: the next client tries again.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let allowed = rustix::net::sockopt::socket_peercred(&stream)
            .map(|cred| {
                let uid = cred.uid.as_raw();
                uid == 0 || uid == own_uid
            })
            .unwrap_or(false);
        if !allowed {
            let _ = answer(
                &stream,
                &json!({"ok": false, "error": "the control socket serves only root and the target's own user"}),
            );
            continue;
        }
        let _ = stream.set_read_timeout(Some(CLIENT_DEADLINE));
        let _ = stream.set_write_timeout(Some(CLIENT_DEADLINE));
        let mut line = String::new();
        let read = BufReader::new((&stream).take(REQUEST_MAX_BYTES)).read_line(&mut line);
        let reply = match read {
            Ok(0) => continue,
            Ok(_) if !line.ends_with('\n') => {
                json!({"ok": false, "error": "a request is one JSON object on one line of at most 1 MiB"})
            }
            Ok(_) => match serde_json::from_str(&line) {
                Ok(request) => admin.answer(&request),
                Err(e) => json!({"ok": false, "error": format!("the request is not JSON: {e}")}),
            },
            Err(_) => continue,
        };
        let _ = answer(&stream, &reply);
    }
}

fn answer(mut stream: &UnixStream, reply: &serde_json::Value) -> std::io::Result<()> {
    let mut text = reply.to_string();
    text.push('\n');
    stream.write_all(text.as_bytes())
}

/// Sends `request` to the control socket at `path` and returns the answer
/// (the client side, for `isoe admin`).
pub fn request(path: &Path, request: &serde_json::Value) -> std::io::Result<serde_json::Value> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut text = request.to_string();
    text.push('\n');
    stream.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
