//! What the control socket does with a client once it is known: a whole
//! request is carried out on a serving thread of its own (at most
//! [`CLIENTS_MAX`] at once, [`Clients`]); a client with no room, one that
//! may not use the socket, and one whose request broke are answered at
//! once, without waiting on them, and closed.

use super::clients::Clients;
use super::{ANSWER_DEADLINE, CLIENTS_MAX};
use crate::admin::protocol::{to_json, Answer, Refusal, Request, ServerInfo};
use crate::admin::Admin;
use serde_json::Value as Json;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// What the accepting thread and the serving threads share.
pub struct Serving {
    /// What carries the requests out.
    pub admin: Arc<Admin>,
    /// The `"server"` member of every answer.
    pub server: ServerInfo,
    /// The serving threads.
    pub clients: Arc<Clients>,
}

impl Serving {
    /// Whether the client on `stream` is root or the target's own user.
    pub fn allowed(stream: &UnixStream) -> bool {
        let own_uid = rustix::process::geteuid().as_raw();
        rustix::net::sockopt::socket_peercred(stream)
            .map(|cred| {
                let uid = cred.uid.as_raw();
                uid == 0 || uid == own_uid
            })
            .unwrap_or(false)
    }

    /// Carries out the request `line` of `stream` on a serving thread,
    /// or answers at once that there is no room for it.
    pub fn take(self: &Arc<Self>, stream: UnixStream, line: Vec<u8>) {
        // The serving thread may wait, for its answer to be taken.
        if stream.set_nonblocking(false).is_err() {
            return;
        }
        let serving = Arc::clone(self);
        let served = self.clients.spawn(stream, move |stream| {
            let reply = serving.reply(&line);
            let _ = stream.set_write_timeout(Some(ANSWER_DEADLINE));
            let _ = answer(stream, serving.named(reply));
        });
        if let Err(stream) = served {
            let error = format!(
                "the control socket is busy: it carries out {CLIENTS_MAX} requests at once \
                 and all are in progress; try again"
            );
            self.answer_now(&stream, to_json(&Answer::busy(error)));
        }
    }

    /// Answers `reply` to a client without waiting for it, takes what it
    /// has sent, and closes its side: the answer fits the socket's
    /// buffer, to which nothing else was written.
    pub fn answer_now(&self, stream: &UnixStream, reply: Json) {
        let _ = stream.set_nonblocking(true);
        let _ = answer(stream, self.named(reply));
        // A request left unread when the socket closes makes the client's
        // next read fail (ECONNRESET): take what has come, without waiting.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(
            &mut stream.take(super::REQUEST_MAX_BYTES as u64),
            &mut std::io::sink(),
        );
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
pub fn refusal(why: String) -> Json {
    to_json(&Answer::<Refusal>::refused(why))
}

fn answer(mut stream: &UnixStream, reply: Json) -> std::io::Result<()> {
    let mut text = reply.to_string();
    text.push('\n');
    stream.write_all(text.as_bytes())
}
