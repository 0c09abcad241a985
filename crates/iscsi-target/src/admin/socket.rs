//! The control socket: a Unix socket where `isoe admin` sends one request
//! and reads one answer, each a JSON object on one line.
//!
//! Only the target's own user (root, for a service) may use it: the socket
//! file is made with mode 0600 in a directory no one else can write
//! ([`check_directory`]: another user could take the path first), and each
//! client's credentials (SO_PEERCRED) must be root's or the target's own
//! user's. [`client`] checks the same of the target before it sends
//! anything.
//!
//! One thread takes the clients and reads their requests, all at once
//! (`accepting.rs`): at most [`ARRIVING_MAX`] at a time, the longest
//! waiting told the socket is busy when one more comes, and each has
//! [`REQUEST_DEADLINE`] for its whole request (a trickle of bytes does not
//! extend it) of at most 1 MiB. A whole request is carried out on a thread
//! of its own, [`CLIENTS_MAX`] at once (`serving.rs`); one more is told
//! the socket is busy (`"busy": true`, which `isoe admin` answers by trying
//! again). So neither threads nor memory grow with the clients, and a
//! client that hangs before its request is whole holds no serving thread.
//! Stopping wakes the accepting thread and shuts every served client's
//! stream down, so a hung client never delays it. Every answer names the
//! target (`"server": {"pid", "config_file"}`), so that `isoe admin` can
//! say which target it spoke to.

mod accepting;
mod arriving;
pub mod client;
mod clients;
mod directory;
mod serving;

use super::protocol::{Answer, Nothing, ServerInfo, HELLO};
use super::Admin;
use arriving::REQUEST_MAX_BYTES;
use clients::Clients;
use serde_json::Value as Json;
use serving::Serving;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use directory::Unsafe;

/// How long a client has from its connection to the end of its request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a client has to take its answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// Clients whose requests are read at once, none of them whole yet.
pub const ARRIVING_MAX: usize = 8;

/// Requests carried out at once, a thread each.
pub const CLIENTS_MAX: usize = 8;

/// How long the target asks a running one on its path who it is.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// Why the control socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another process answers on the path.
    #[error("{} is in use by another running target ({})", path.display(), describe(holder))]
    InUse {
        /// The socket's path.
        path: PathBuf,
        /// Who answers there, when it said.
        holder: Option<Holder>,
    },
    /// The socket's directory, or one above it, is not the target's own.
    #[error(
        "the control socket {} is refused: {} {}; another user could take the path first and \
         answer `isoe admin` in the target's place: use a directory only root and the \
         target's user can write (chmod go-w), or set [control] socket elsewhere",
        path.display(), unsafe_.dir.display(), unsafe_.why
    )]
    Unsafe {
        /// The socket's path.
        path: PathBuf,
        /// What is wrong.
        unsafe_: Unsafe,
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

/// A running target found on a control socket's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process (from the kernel).
    pub pid: u32,
    /// Its configuration file, as it said: Some(None) when it has none,
    /// None when it did not say.
    pub config_file: Option<Option<String>>,
}

fn describe(holder: &Option<Holder>) -> String {
    let Some(Holder { pid, config_file }) = holder else {
        return "it did not say who it is".into();
    };
    match config_file {
        Some(Some(file)) => format!("pid {pid}, config {file}"),
        Some(None) => format!("pid {pid}, no configuration file"),
        None => format!("pid {pid}"),
    }
}

/// Makes the directory of the control socket `path` if missing (mode
/// 0700) and checks that no one but root and this user can write it or
/// rename it: see [`directory::check`].
pub fn check_directory(path: &Path) -> Result<(), SocketError> {
    directory::check(path).map_err(|e| match e {
        directory::CheckError::Unsafe(unsafe_) => SocketError::Unsafe {
            path: path.to_path_buf(),
            unsafe_,
        },
        directory::CheckError::Io { dir, source } => SocketError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(source.kind(), format!("{}: {source}", dir.display())),
        },
    })
}

/// A control socket being served; dropping it stops it and removes the file.
pub struct ControlSocket {
    path: PathBuf,
    /// Closed on drop: its peer, in the accepting thread's poll, wakes it.
    wake: Option<UnixStream>,
    clients: Arc<Clients>,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Binds `path` (its directory checked, and made if missing; a stale
    /// socket file of a target that is gone replaced) and serves `admin`
    /// on it; `config_file` is what each answer names as the target's file.
    pub fn start(
        path: &Path,
        admin: Arc<Admin>,
        config_file: Option<&Path>,
    ) -> Result<ControlSocket, SocketError> {
        let io = |source| SocketError::Io {
            path: path.to_path_buf(),
            source,
        };
        check_directory(path)?;
        if path.exists() {
            if let Ok(stream) = UnixStream::connect(path) {
                return Err(SocketError::InUse {
                    path: path.to_path_buf(),
                    holder: holder(&stream),
                });
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        let listener = UnixListener::bind(path).map_err(io)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let server = ServerInfo {
            pid: std::process::id(),
            config_file: config_file.map(|p| p.display().to_string()),
        };
        let clients = Clients::new(CLIENTS_MAX);
        let serving = Arc::new(Serving {
            admin,
            server,
            clients: Arc::clone(&clients),
        });
        let (wake, woken) = UnixStream::pair().map_err(io)?;
        let accepting = accepting::Accepting::new(listener, woken, serving);
        let thread = std::thread::Builder::new()
            .name("isoe-control".into())
            .spawn(move || accepting.run())
            .map_err(io)?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            wake: Some(wake),
            clients,
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
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // No client is taken now; those served are woken, not waited for
        // (a change in progress is, to its end).
        self.clients.stop();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Who answers on `stream`: its pid from the kernel, its file as it says.
fn holder(stream: &UnixStream) -> Option<Holder> {
    let cred = rustix::net::sockopt::socket_peercred(stream).ok()?;
    let pid = cred.pid.as_raw_nonzero().get().unsigned_abs();
    let _ = stream.set_read_timeout(Some(PROBE_WAIT));
    let _ = stream.set_write_timeout(Some(PROBE_WAIT));
    let mut answer = Vec::new();
    let asked = (&*stream).write_all(HELLO).is_ok()
        && stream.take(64 << 10).read_to_end(&mut answer).is_ok();
    let said = asked
        .then(|| serde_json::from_slice::<Json>(&answer).ok())
        .flatten()
        .and_then(|answer| Answer::<Nothing>::from_json(&answer).ok());
    let config_file = said.and_then(|a| a.server).map(|server| server.config_file);
    Some(Holder { pid, config_file })
}
