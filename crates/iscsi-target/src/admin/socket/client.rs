//! The client side of the control socket, for `isoe admin`: it learns who
//! answers on the socket from the kernel (SO_PEERCRED, the credentials of
//! the process that listens) and sends nothing unless that is root or its
//! own user: a socket path another user took first must not be handed a
//! request, which may carry a CHAP secret.

use crate::admin::protocol::{to_json, Request};
use serde_json::Value as Json;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the target may take to answer: a change may create a large
/// file LUN or wait for a store.
const ANSWER_WAIT: Duration = Duration::from_secs(120);

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
    /// by root). Nothing is sent before the check.
    pub fn open(path: &Path, also: Option<u32>) -> Result<Connection, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
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

/// "neither root nor this user (uid 1000)", and the `--target-uid` uid.
fn not_trusted(own_uid: u32, also: Option<u32>) -> String {
    match also {
        Some(uid) => {
            format!("neither root, this user (uid {own_uid}) nor uid {uid} (--target-uid)")
        }
        None => format!("neither root nor this user (uid {own_uid})"),
    }
}

/// At most the first 200 characters of `text`, for a message.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(200) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}
