//! The client side of the control socket, for `isoe admin`: it learns who
//! answers on the socket from the kernel (SO_PEERCRED, the credentials of
//! the process that listens) and sends nothing unless that is root or its
//! own user: a socket path another user took first must not be handed a
//! request, which may carry a CHAP secret.
//!
//! A socket that is busy (its queue of connections full, or an answer
//! with `"busy": true`: the target did nothing with the request) is tried
//! again, after a pause that grows and is drawn at random so that clients
//! that met take turns, until the wait given ([`exchange`]) has passed.

use crate::admin::protocol::{to_json, Answer, Refusal, Request};
use rustix::net::{sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
use serde_json::Value as Json;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the target may take to answer: a change may create a large
/// file LUN or wait for a store.
const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// How long `isoe admin` waits for a busy control socket unless told.
pub const BUSY_WAIT_DEFAULT: Duration = Duration::from_secs(10);

/// The first pause before trying a busy socket again; each next one is
/// twice as long, up to [`PAUSE_MAX`].
const PAUSE_FIRST: Duration = Duration::from_millis(10);

/// The longest pause between two tries.
const PAUSE_MAX: Duration = Duration::from_millis(320);

/// Who answers on a control socket, as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its process.
    pub pid: u32,
    /// Its user.
    pub uid: u32,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the path, or this user may not connect.
    #[error(
        "cannot reach the target at {}: {source} (is `isoe target` running, with this \
         [control] socket?)",
        path.display()
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Another user's process answers on the path.
    #[error(
        "refusing {}: it is answered by uid {} (pid {}), which is {}: another user may have \
         taken the socket's path; nothing was sent",
        path.display(), peer.uid, peer.pid, not_trusted(*own_uid, *also)
    )]
    Untrusted {
        /// The socket.
        path: PathBuf,
        /// Who answered.
        peer: Peer,
        /// This process's user.
        own_uid: u32,
        /// The uid `--target-uid` trusts as well.
        also: Option<u32>,
    },
    /// The socket stayed busy for the whole wait.
    #[error(
        "the control socket {} stayed busy for {:.1} s ({}; the last time it said: {said}); \
         nothing was done: try again later, or wait longer (--wait SECONDS)",
        path.display(), waited.as_secs_f64(), tried(*tries)
    )]
    Busy {
        /// The socket.
        path: PathBuf,
        /// From the first try to giving up.
        waited: Duration,
        /// Connections tried.
        tries: u32,
        /// Why the last try was turned away.
        said: String,
    },
    /// Sending, or reading the answer, failed.
    #[error("the target at {} did not answer: {source}", path.display())]
    Exchange {
        /// The socket.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// A connection to a control socket whose peer is trusted.
pub struct Connection {
    stream: UnixStream,
    path: PathBuf,
    peer: Peer,
}

impl Connection {
    /// Connects to `path` and checks who answers: root, this process's
    /// user, or `also` (a target run as a user of its own, administered
    /// by root). Nothing is sent before the check. A socket whose queue of
    /// connections is full is waited on for at most `wait`, then is an
    /// error of kind `WouldBlock`.
    pub fn open(path: &Path, also: Option<u32>, wait: Duration) -> Result<Connection, ClientError> {
        let stream = connect(path, wait).map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        let cred =
            rustix::net::sockopt::socket_peercred(&stream).map_err(|e| ClientError::Exchange {
                path: path.to_path_buf(),
                source: e.into(),
            })?;
        let peer = Peer {
            pid: cred.pid.as_raw_nonzero().get().unsigned_abs(),
            uid: cred.uid.as_raw(),
        };
        let own_uid = rustix::process::geteuid().as_raw();
        if peer.uid != 0 && peer.uid != own_uid && Some(peer.uid) != also {
            return Err(ClientError::Untrusted {
                path: path.to_path_buf(),
                peer,
                own_uid,
                also,
            });
        }
        Ok(Connection {
            stream,
            path: path.to_path_buf(),
            peer,
        })
    }

    /// Who answers.
    pub fn peer(&self) -> Peer {
        self.peer
    }

    /// Sends `request` and returns the answer as it came, for the caller
    /// to print or to read as the [`Answer`](crate::admin::protocol::Answer)
    /// of its kind.
    pub fn request(self, request: &Request) -> Result<Json, ClientError> {
        let failed = |source| ClientError::Exchange {
            path: self.path.clone(),
            source,
        };
        let mut text = to_json(request).to_string();
        text.push('\n');
        self.stream
            .set_read_timeout(Some(ANSWER_WAIT))
            .map_err(failed)?;
        // A target that refuses at once (busy) may have answered and
        // closed before the request was all sent: its answer is still there
        // to read, and says more than the broken pipe.
        let sent = (&self.stream).write_all(text.as_bytes());
        let mut line = String::new();
        let read = BufReader::new(&self.stream).read_line(&mut line);
        if line.is_empty() {
            sent.map_err(failed)?;
            read.map_err(failed)?;
            return Err(failed(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "it closed the connection without an answer",
            )));
        }
        serde_json::from_str(&line).map_err(|e| {
            failed(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the answer is not JSON ({e}): {:?}", truncated(&line)),
            ))
        })
    }
}

/// What one try came to.
enum Try {
    /// Who answered, and the answer.
    Answered(Peer, Json),
    /// The socket was busy: why, as the target or the OS said.
    Busy(String),
}

/// Sends `request` to the target at `path` (who answers checked as
/// [`Connection::open`] does, `also` trusted besides) and returns who
/// answered and the answer as it came; a busy socket is tried again until
/// `wait` has passed since the first try, and once more then (a `wait` of
/// zero: one try).
pub fn exchange(
    path: &Path,
    also: Option<u32>,
    request: &Request,
    wait: Duration,
) -> Result<(Peer, Json), ClientError> {
    let started = Instant::now();
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = wait.saturating_sub(started.elapsed());
        let said = match try_once(path, also, request, left)? {
            Try::Answered(peer, reply) => return Ok((peer, reply)),
            Try::Busy(said) => said,
        };
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(ClientError::Busy {
                path: path.to_path_buf(),
                waited: started.elapsed(),
                tries,
                said,
            });
        }
        // The last try comes as the wait ends.
        std::thread::sleep(pause(tries).min(left));
    }
}

/// One connection and its request; `left` bounds the wait for a full queue.
fn try_once(
    path: &Path,
    also: Option<u32>,
    request: &Request,
    left: Duration,
) -> Result<Try, ClientError> {
    let connection = match Connection::open(path, also, left) {
        Ok(connection) => connection,
        Err(ClientError::Connect { source, .. }) if source.kind() == ErrorKind::WouldBlock => {
            return Ok(Try::Busy(
                "its queue of connections is full (the target takes none)".into(),
            ))
        }
        Err(e) => return Err(e),
    };
    let peer = connection.peer();
    let reply = connection.request(request)?;
    match Answer::<Refusal>::from_json(&reply) {
        Ok(answer) if !answer.ok && answer.body.is_busy() => Ok(Try::Busy(answer.body.error)),
        _ => Ok(Try::Answered(peer, reply)),
    }
}

/// The pause after the `tries`th busy try: [`PAUSE_FIRST`] doubled each
/// time up to [`PAUSE_MAX`], of which a random half to whole is taken, so
/// that clients turned away together come back apart.
fn pause(tries: u32) -> Duration {
    let doubled = PAUSE_FIRST.saturating_mul(1 << tries.saturating_sub(1).min(16));
    let most = doubled.min(PAUSE_MAX);
    let mut random = [0u8; 2];
    // Without randomness the pauses are whole: slower to part, no worse.
    let share = getrandom::getrandom(&mut random).map_or(u16::MAX, |()| u16::from_le_bytes(random));
    let pause = most / 2 + most / 2 * u32::from(share) / u32::from(u16::MAX);
    debug_assert!(pause <= PAUSE_MAX);
    pause
}

/// A stream connected to `path`, waiting at most `wait` (at least 1 ms)
/// while its queue of connections is full: a blocking connect to a Unix
/// socket waits for room as long as its send timeout, forever without one.
fn connect(path: &Path, wait: Duration) -> std::io::Result<UnixStream> {
    let addr = SocketAddrUnix::new(path)?;
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // A zero timeout would be none at all.
    let wait = wait.max(Duration::from_millis(1));
    sockopt::set_socket_timeout(&socket, sockopt::Timeout::Send, Some(wait))?;
    match rustix::net::connect(&socket, &addr) {
        // Interrupted, the connection may go on without this socket
        // knowing: a new one is cleaner, and the queue was full anyway.
        Err(rustix::io::Errno::INTR) => Err(ErrorKind::WouldBlock.into()),
        Err(e) => Err(e.into()),
        Ok(()) => {
            let stream = UnixStream::from(socket);
            stream.set_write_timeout(None)?;
            Ok(stream)
        }
    }
}

/// "neither root nor this user (uid 1000)", and the `--target-uid` uid.
fn not_trusted(own_uid: u32, also: Option<u32>) -> String {
    match also {
        Some(uid) => {
            format!("neither root, this user (uid {own_uid}) nor uid {uid} (--target-uid)")
        }
        None => format!("neither root nor this user (uid {own_uid})"),
    }
}

/// "tried once", "tried 3 times".
fn tried(tries: u32) -> String {
    match tries {
        1 => "tried once".into(),
        n => format!("tried {n} times"),
    }
}

/// At most the first 200 characters of `text`, for a message.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(200) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;

    /// A socket in a new directory that answers its `n`th client with
    /// `answers[n]` (and closes it), then stops; gives back how many came.
    fn server(
        answers: &'static [&'static str],
    ) -> (tempfile::TempDir, PathBuf, impl FnOnce() -> usize) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            for answer in answers {
                let (stream, _) = listener.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&stream).read_line(&mut line).unwrap();
                assert_eq!(line, "{\"op\":\"hello\"}\n");
                (&stream).write_all(answer.as_bytes()).unwrap();
            }
            answers.len()
        });
        (dir, path, move || thread.join().unwrap())
    }

    #[test]
    fn a_busy_socket_is_tried_again_until_it_answers() {
        const BUSY: &str = "{\"ok\":false,\"busy\":true,\"error\":\"full\"}\n";
        let (_dir, path, served) = server(&[BUSY, BUSY, "{\"ok\":true}\n"]);
        let wait = Duration::from_secs(10);
        let (peer, reply) = exchange(&path, None, &Request::Hello, wait).unwrap();
        assert_eq!(reply["ok"], true, "{reply}");
        assert_eq!(peer.pid, std::process::id());
        assert_eq!(served(), 3);
    }

    #[test]
    fn a_refusal_that_is_not_busy_is_the_answer() {
        let (_dir, path, served) = server(&["{\"ok\":false,\"error\":\"no such LUN\"}\n"]);
        let wait = Duration::from_secs(10);
        let (_, reply) = exchange(&path, None, &Request::Hello, wait).unwrap();
        assert_eq!(reply["error"], "no such LUN");
        assert_eq!(served(), 1);
    }

    #[test]
    fn a_socket_busy_for_the_whole_wait_says_so() {
        const BUSY: &str = "{\"ok\":false,\"busy\":true,\"error\":\"all in progress\"}\n";
        let (_dir, path, _served) = server(&[BUSY; 64]);
        let e = exchange(&path, None, &Request::Hello, Duration::from_millis(300)).unwrap_err();
        let ClientError::Busy { tries, waited, .. } = &e else {
            panic!("{e}");
        };
        assert!(*tries > 1 && *waited >= Duration::from_millis(300), "{e}");
        let text = e.to_string();
        assert!(text.contains("stayed busy for "), "{text}");
        assert!(text.contains("all in progress"), "{text}");
    }

    #[test]
    fn a_full_queue_is_waited_on_no_longer_than_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = rustix::net::socket(AddressFamily::UNIX, SocketType::STREAM, None).unwrap();
        rustix::net::bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        // A queue of none: one connection fills it, and none is accepted.
        rustix::net::listen(&listener, 0).unwrap();
        let _first = connect(&path, Duration::from_secs(1)).unwrap();
        let e = exchange(&path, None, &Request::Hello, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, ClientError::Busy { .. }), "{e}");
        assert!(
            e.to_string().contains("queue of connections is full"),
            "{e}"
        );
    }

    #[test]
    fn pauses_grow_to_a_bound_and_are_never_nothing() {
        for tries in [1, 2, 5, 6, 7, 40, u32::MAX] {
            let pause = pause(tries);
            assert!(
                pause >= PAUSE_FIRST / 2 && pause <= PAUSE_MAX,
                "{tries}: {pause:?}"
            );
        }
        assert!(pause(1) <= PAUSE_FIRST);
        assert!(pause(40) >= PAUSE_MAX / 2);
    }
}
