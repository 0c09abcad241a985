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
//! Up to [`CLIENTS_MAX`] clients are served at once, a thread each; one
//! more is told the socket is busy (`"busy": true`, which `isoe admin`
//! answers by trying again) and closed at once. A client has
//! [`REQUEST_DEADLINE`] for its whole request (a trickle of bytes does not
//! extend it) and at most 1 MiB; stopping shuts every client's stream
//! down, so a hung client never delays it. Every answer names the target
//! (`"server": {"pid", "config_file"}`), so that `isoe admin` can say which
//! target it spoke to.

pub mod client;
mod clients;
mod directory;

use super::protocol::{to_json, Answer, Nothing, Refusal, Request, ServerInfo, HELLO};
use super::Admin;
use clients::Clients;
use serde_json::Value as Json;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use directory::Unsafe;

/// The longest request line taken.
const REQUEST_MAX_BYTES: usize = 1 << 20;

/// How long a client has from its connection to the end of its request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a client has to take its answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// Clients served at once.
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
    stop: Arc<AtomicBool>,
    /// The listening socket, to wake the thread's accept when stopping.
    listener: UnixListener,
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
        let server = ServerInfo {
            pid: std::process::id(),
            config_file: config_file.map(|p| p.display().to_string()),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let clients = Clients::new(CLIENTS_MAX);
        let own = listener.try_clone().map_err(io)?;
        let serving = Serving {
            admin,
            server,
            stop: Arc::clone(&stop),
            clients: Arc::clone(&clients),
        };
        let thread = std::thread::Builder::new()
            .name("isoe-control".into())
            .spawn(move || serving.accept(listener))
            .map_err(io)?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            stop,
            listener: own,
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
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept: shutting a listening socket down makes
        // it return at once (a connection to the path would too, but the
        // file may have been removed, with its directory).
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
        let _ = UnixStream::connect(&self.path);
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

/// What the serving threads share.
struct Serving {
    admin: Arc<Admin>,
    /// The `"server"` member of every answer.
    server: ServerInfo,
    stop: Arc<AtomicBool>,
    clients: Arc<Clients>,
}

impl Serving {
    fn accept(self, listener: UnixListener) {
        let this = Arc::new(self);
        for stream in listener.incoming() {
            if this.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = stream else {
                // Out of descriptors, say: the next client tries again.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let serving = Arc::clone(&this);
            if let Err(stream) = this.clients.spawn(stream, move |s| serving.client(s)) {
                this.busy(&stream);
            }
        }
    }

    /// Tells a client beyond [`CLIENTS_MAX`] to come back, without waiting
    /// for it: the answer fits the socket's buffer, which is empty.
    fn busy(&self, stream: &UnixStream) {
        let _ = stream.set_nonblocking(true);
        let error = format!(
            "the control socket serves {CLIENTS_MAX} clients at once and all are busy; try again"
        );
        let _ = answer(stream, self.named(to_json(&Answer::busy(error))));
        // A request left unread when the socket closes makes the client's
        // next read fail (ECONNRESET): take what has come, without waiting.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(
            &mut stream.take(REQUEST_MAX_BYTES as u64),
            &mut std::io::sink(),
        );
    }

    fn client(&self, stream: &UnixStream) {
        let own_uid = rustix::process::geteuid().as_raw();
        let allowed = rustix::net::sockopt::socket_peercred(stream)
            .map(|cred| {
                let uid = cred.uid.as_raw();
                uid == 0 || uid == own_uid
            })
            .unwrap_or(false);
        let reply = if !allowed {
            refusal("the control socket serves only root and the target's own user".into())
        } else {
            match read_request(stream, Instant::now() + REQUEST_DEADLINE) {
                Ok(Some(line)) => self.reply(&line),
                Ok(None) => return,
                Err(why) => refusal(why),
            }
        };
        let _ = stream.set_write_timeout(Some(ANSWER_DEADLINE));
        let _ = answer(stream, self.named(reply));
    }

    fn reply(&self, line: &[u8]) -> Json {
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(e) => {
                let at = e.valid_up_to();
                return refusal(format!("the request is not UTF-8 (byte {at} is not valid)"));
            }
        };
        let request = match serde_json::from_str::<Json>(text) {
            Ok(request) => request,
            Err(e) => return refusal(format!("the request is not JSON: {e}")),
        };
        match serde_json::from_value::<Request>(request) {
            Ok(request) => self.admin.answer(&request),
            Err(e) => refusal(e.to_string()),
        }
    }

    /// `reply` with the target's name in it.
    fn named(&self, mut reply: Json) -> Json {
        if let Json::Object(map) = &mut reply {
            map.insert("server".into(), to_json(&self.server));
        }
        reply
    }
}

/// The answer refusing a request, for `why`.
fn refusal(why: String) -> Json {
    to_json(&Answer::<Refusal>::refused(why))
}

/// Reads one request line from `stream` by `deadline`: Ok(None) when the
/// client closed without sending anything; Err: what to answer instead.
fn read_request(stream: &UnixStream, deadline: Instant) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the request did not come whole within {} s",
                REQUEST_DEADLINE.as_secs()
            ));
        }
        // The timeout is what is left of the whole deadline, so that a
        // byte now and then does not extend it.
        let _ = stream.set_read_timeout(Some(left));
        let n = match (&*stream).read(&mut chunk) {
            Ok(0) if line.is_empty() => return Ok(None),
            Ok(0) => {
                return Err("a request is one JSON object on one line, ended by a newline".into())
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(format!("reading the request failed: {e}")),
        };
        let start = line.len();
        line.extend_from_slice(&chunk[..n]);
        if let Some(end) = line[start..].iter().position(|&b| b == b'\n') {
            line.truncate(start + end);
            return Ok(Some(line));
        }
        if line.len() > REQUEST_MAX_BYTES {
            return Err("a request is one JSON object on one line of at most 1 MiB".into());
        }
    }
}

fn answer(mut stream: &UnixStream, reply: Json) -> std::io::Result<()> {
    let mut text = reply.to_string();
    text.push('\n');
    stream.write_all(text.as_bytes())
}
