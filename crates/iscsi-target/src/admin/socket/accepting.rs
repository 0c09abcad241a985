//! The control socket's accepting thread: it takes every client, checks
//! who it is, and reads the requests of all of them at once (poll), so
//! that a client that sends nothing or trickles its bytes holds no serving
//! thread and holds up no one.
//!
//! Bounds: at most [`ARRIVING_MAX`] clients are read at once; one more
//! closes the one that has waited longest, answering it that the socket
//! is busy (`isoe admin` sends its request as it connects, so the oldest
//! is a client that hangs, or one that may try again). Each has
//! [`REQUEST_DEADLINE`] from its connection for its whole request.
//! Dropping the wake stream's other end stops the thread at once.

use super::arriving::{Arriving, Progress};
use super::serving::{refusal, Serving};
use super::{ARRIVING_MAX, REQUEST_DEADLINE};
use crate::admin::protocol::{to_json, Answer};
use rustix::event::{PollFd, PollFlags};
use std::io::ErrorKind;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::Instant;

/// How long accepting pauses after an error other than "none waiting"
/// (out of descriptors, say), which would otherwise wake the poll at once
/// again and again.
use crate::metrics::prometheus::listener::ACCEPT_PAUSE;

/// The accepting thread's state.
pub struct Accepting {
    /// Non-blocking.
    listener: UnixListener,
    /// Readable (closed) when the socket stops.
    woken: UnixStream,
    /// Oldest first.
    arriving: Vec<Arriving>,
    /// Accepting waits until then after an error.
    accept_after: Option<Instant>,
    serving: Arc<Serving>,
}

impl Accepting {
    /// Takes the clients of `listener` for `serving` until `woken` wakes.
    pub fn new(listener: UnixListener, woken: UnixStream, serving: Arc<Serving>) -> Accepting {
        Accepting {
            listener,
            woken,
            arriving: Vec::with_capacity(ARRIVING_MAX),
            accept_after: None,
            serving,
        }
    }

    /// Serves until woken; the clients still sending are closed then.
    pub fn run(mut self) {
        loop {
            let now = Instant::now();
            self.expire(now);
            if self.accept_after.is_some_and(|t| t <= now) {
                self.accept_after = None;
            }
            let Some(ready) = self.wait(now) else {
                return;
            };
            self.read_ready(&ready);
            if self.accept_after.is_none() {
                self.accept_all();
            }
            assert!(self.arriving.len() <= ARRIVING_MAX);
        }
    }

    /// Answers the clients whose deadline has passed, and closes them.
    fn expire(&mut self, now: Instant) {
        let (late, on_time) = std::mem::take(&mut self.arriving)
            .into_iter()
            .partition(|a| a.deadline() <= now);
        self.arriving = on_time;
        for arriving in late {
            let why = format!(
                "the request did not come whole within {} s of the connection",
                REQUEST_DEADLINE.as_secs()
            );
            self.serving.answer_now(arriving.stream(), refusal(why));
        }
    }

    /// Waits until the wake stream, the listener or a client is ready, or
    /// the nearest deadline; returns each client's readiness, or None when
    /// it is time to stop.
    fn wait(&self, now: Instant) -> Option<Vec<PollFlags>> {
        let mut fds = Vec::with_capacity(self.arriving.len() + 2);
        fds.push(PollFd::new(&self.woken, PollFlags::IN));
        // A paused listener is polled for nothing, so that it cannot wake
        // the poll at once again.
        let accepting = match self.accept_after {
            None => PollFlags::IN,
            Some(_) => PollFlags::empty(),
        };
        fds.push(PollFd::new(&self.listener, accepting));
        for a in &self.arriving {
            fds.push(PollFd::new(a.stream(), PollFlags::IN));
        }
        let nearest = self
            .arriving
            .iter()
            .map(Arriving::deadline)
            .chain(self.accept_after)
            .min();
        crate::metrics::prometheus::listener::wait_for(&mut fds, nearest, now)
    }

    /// Reads the clients `ready` says have something (or have closed).
    fn read_ready(&mut self, ready: &[PollFlags]) {
        debug_assert_eq!(ready.len(), self.arriving.len());
        let arriving = std::mem::take(&mut self.arriving);
        for (i, a) in arriving.into_iter().enumerate() {
            let has_news = ready.get(i).is_some_and(|flags| !flags.is_empty());
            let kept = if has_news { self.settle(a) } else { Some(a) };
            self.arriving.extend(kept);
        }
    }

    /// Takes every client waiting, keeping at most [`ARRIVING_MAX`].
    fn accept_all(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.accept_after = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            };
            self.arrive(stream);
        }
    }

    /// A new client: refused unless it may use the socket, else read.
    fn arrive(&mut self, stream: UnixStream) {
        if !Serving::allowed(&stream) {
            let why = "the control socket serves only root and the target's own user";
            self.serving.answer_now(&stream, refusal(why.into()));
            return;
        }
        let Ok(arriving) = Arriving::new(stream, Instant::now(), REQUEST_DEADLINE) else {
            return;
        };
        if self.arriving.len() >= ARRIVING_MAX {
            let oldest = self.arriving.remove(0);
            let why = format!(
                "the control socket is busy: {ARRIVING_MAX} clients were sending their \
                 requests at once and this one had waited longest; send the whole request \
                 as you connect, and try again"
            );
            self.serving
                .answer_now(oldest.stream(), to_json(&Answer::busy(why)));
        }
        // Its request has usually come with it.
        let kept = self.settle(arriving);
        self.arriving.extend(kept);
    }

    /// Reads what `arriving` has sent and acts on it; gives it back while
    /// more is to come.
    fn settle(&self, mut arriving: Arriving) -> Option<Arriving> {
        match arriving.read() {
            Progress::Coming => return Some(arriving),
            Progress::Whole(line) => self.serving.take(arriving.into_stream(), line),
            Progress::Gone => {}
            Progress::Broken(why) => self.serving.answer_now(arriving.stream(), refusal(why)),
        }
        None
    }
}
