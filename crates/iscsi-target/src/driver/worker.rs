//! A worker: one thread, one epoll instance, the connections placed on it.
//!
//! Sockets are non-blocking and registered once, edge-triggered, for input
//! and output, so that the steady state makes no `epoll_ctl` calls: a read
//! takes what is there (a short read means the socket is drained, and the
//! next bytes raise a new edge), a send what the socket accepts, and the
//! rest goes when the socket says it is writable, so a peer that stops
//! reading holds up only its own connection. Input pauses (the socket is
//! not read) while a command waits behind a CmdSN gap or the output built
//! ahead of the socket is at its bound, and resumes by reading, since its
//! edge has passed (only when bytes may be left in the socket). Timers run
//! once a second whatever the sockets do. Other threads (acceptors, other
//! workers, the I/O pool) reach a worker through its mailbox, an
//! eventfd-signalled queue.
//!
//! A session's connections live on one worker: one that joins a session
//! moves, once logged in, to the worker of the session's first connection
//! ([`Worker::place`]), so that the wake-ups that deliver the session's
//! commands in CmdSN order across its connections are calls within the
//! thread, not messages between threads.
//!
//! Output leaves once per batch of events: a connection read (to a drained
//! socket), woken or handed back finished work any number of times in one
//! `epoll_wait`'s batch sends once, after all of it (but for output at its
//! bound, sent at once to make room, and what a read that filled its buffer
//! produced, sent before the next read). With one busy connection that is one
//! send per read, as before; with a session's connections taking turns in
//! CmdSN order it is one send per connection, not one per turn.

use super::mailbox::{Accepted, Mailbox, Msg};
use super::pool::{IoPool, Job};
use super::pump::{Progress, Pump};
use super::slot::Slot;
use super::sock::Sock;
use crate::connection::{Action, Connection, Endpoint};
use crate::registry::Server;
use isoe_sync::MutexExt;
use rustc_hash::FxHashMap;
use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::fd::OwnedFd;
use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often timers run (NOP-In, login and CmdSN-gap deadlines, shutdown).
const TICK: Duration = Duration::from_millis(1000);
/// Events taken per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;
/// The epoll key of the mailbox (connection serials never reach it).
const MAILBOX_KEY: u64 = u64::MAX;
/// Bits of a serial that name its worker.
pub(crate) const WORKER_BITS: u32 = 8;
/// Most workers a target runs.
pub(crate) const WORKERS_MAX: usize = 1 << WORKER_BITS;

/// The worker a connection serial lives on.
pub(crate) fn worker_of(serial: u64) -> usize {
    (serial & (WORKERS_MAX as u64 - 1)) as usize
}

/// What every worker shares.
pub(crate) struct Shared {
    pub(crate) server: Arc<Server>,
    pub(crate) mailboxes: Vec<Arc<Mailbox>>,
    pub(crate) pool: IoPool,
    /// Connections that moved away from the worker their serial names, and
    /// where to; touched when one moves or closes, and when a message for
    /// it reaches the worker it left.
    pub(crate) moved: Mutex<HashMap<u64, usize>>,
    /// Connections placed on each worker: new ones go to the least loaded.
    pub(crate) load: Vec<AtomicUsize>,
    /// The sequence of the next connection's serial.
    pub(crate) next_sequence: AtomicU64,
}

impl Shared {
    /// The least loaded worker, ties broken by `turn` (round robin), for a
    /// new connection (counted there once admitted: [`Shared::place_on`]).
    pub(crate) fn pick_worker(&self, turn: usize) -> usize {
        let count = self.load.len();
        (0..count)
            .map(|i| (turn + i) % count)
            .min_by_key(|&w| self.load[w].load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// A new connection's serial, naming `worker`.
    pub(crate) fn new_serial(&self, worker: usize) -> u64 {
        let sequence = self.next_sequence.fetch_add(1, Ordering::Relaxed);
        (sequence << WORKER_BITS) | worker as u64
    }

    /// Hands the admitted connection `serial` to its worker.
    pub(crate) fn place_on(&self, worker: usize, serial: u64, accepted: Accepted) {
        self.load[worker].fetch_add(1, Ordering::Relaxed);
        self.mailboxes[worker].post(Msg::Adopt { serial, accepted });
    }

    /// Has the worker of connection `serial` close it.
    pub(crate) fn evict(&self, serial: u64) {
        self.mailboxes[self.worker_of(serial)].post(Msg::Evict(serial));
    }

    /// Connections on each worker now.
    pub(crate) fn connections_by_worker(&self) -> Vec<usize> {
        self.load
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }

    /// The worker that serves connection `serial` now.
    pub(crate) fn worker_of(&self, serial: u64) -> usize {
        let moved = self.moved.lock_unpoisoned();
        moved
            .get(&serial)
            .copied()
            .unwrap_or_else(|| worker_of(serial))
    }

    /// Wakes the connections `serials` on their workers.
    pub(crate) fn wake(&self, serials: &[u64]) {
        for &serial in serials {
            self.mailboxes[self.worker_of(serial)].post(Msg::Wake(serial));
        }
    }
}

/// What every connection's socket is polled for, once and for all.
fn interest() -> EventFlags {
    EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET
}

/// One worker's state.
pub(crate) struct Worker {
    index: usize,
    shared: Arc<Shared>,
    epoll: OwnedFd,
    /// Keyed by serial; serials are ours, not a peer's, so a fast
    /// non-keyed hash will do (SipHash cost 2% of a 4x4 run's CPU).
    slots: FxHashMap<u64, Slot>,
    /// When the current batch of events came: the time every handler of
    /// the batch is given (one clock read per `epoll_wait`, not per call).
    now: Instant,
    /// Wake-ups for connections of this worker, run after the current event.
    local_wakes: Vec<u64>,
    /// Scratch for the wake-ups one connection asks for.
    wakes: Vec<u64>,
    /// Connections with output to send once the current batch of events
    /// and messages is handled: each sends once per batch, whether it was
    /// read, woken or had work come back, and however often.
    unsent: Vec<u64>,
    /// Connections whose answered commands wait for their latency, recorded
    /// once the batch's output is out.
    timed: Vec<u64>,
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Whether the peer of `socket` has closed it: a peek that does not wait
/// finds the end of the stream (or a reset) and no data before it.
pub(crate) fn peer_closed(socket: &TcpStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut byte = [0u8; 1];
    match recv(socket, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((0, _)) => true,
        Ok(_) => false,
        Err(e) => e == rustix::io::Errno::CONNRESET || e == rustix::io::Errno::NOTCONN,
    }
}

impl Worker {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> std::io::Result<Worker> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &*shared.mailboxes[index],
            EventData::new_u64(MAILBOX_KEY),
            EventFlags::IN,
        )?;
        Ok(Worker {
            index,
            shared,
            epoll,
            slots: FxHashMap::default(),
            now: Instant::now(),
            local_wakes: Vec::new(),
            wakes: Vec::new(),
            unsent: Vec::new(),
            timed: Vec::new(),
        })
    }

    /// The event loop, until told to stop.
    pub(crate) fn run(mut self) {
        let mut events = Vec::with_capacity(EVENTS_PER_WAIT);
        let mut messages = Vec::new();
        let mut next_tick = Instant::now() + TICK;
        let mut stopping = false;
        // The time read after the last batch's output went out, if one was.
        let mut sent_at: Option<Instant> = None;
        while !stopping {
            let before_wait = sent_at.take().unwrap_or_else(Instant::now);
            let timeout = timespec(next_tick.saturating_duration_since(before_wait));
            events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut events), Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    tracing::error!(worker = self.index, "worker stops: epoll_wait: {e}");
                    break;
                }
            }
            self.now = Instant::now();
            for event in &events {
                let key = event.data.u64();
                if key == MAILBOX_KEY {
                    self.shared.mailboxes[self.index].take(&mut messages);
                    for msg in messages.drain(..) {
                        stopping |= self.on_message(msg);
                    }
                } else {
                    self.on_socket(key, event.flags);
                }
                self.run_local_wakes();
            }
            self.send_unsent();
            if !self.timed.is_empty() {
                // The clock read the wait above needs anyway, taken now:
                // the end of the latency of every command answered.
                let end = Instant::now();
                for serial in self.timed.drain(..) {
                    if let Some(slot) = self.slots.get_mut(&serial) {
                        slot.pump.conn.record_latencies(end);
                    }
                }
                sent_at = Some(end);
            }
            let now = self.now;
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK;
            }
        }
        let serials: Vec<u64> = self.slots.keys().copied().collect();
        for serial in serials {
            self.close(serial);
        }
    }

    /// Returns true when the worker is to stop.
    fn on_message(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Adopt { serial, accepted } => self.adopt(serial, accepted),
            Msg::Wake(serial) => self.route_wake(serial),
            Msg::Evict(serial) => self.evict(serial),
            Msg::Done {
                serial,
                token,
                finished,
            } => {
                if let Some(slot) = self.slots.get_mut(&serial) {
                    slot.pump.conn.complete_work(token, finished);
                    // Completions that came together leave in one send.
                    self.send_later(serial);
                } else {
                    let worker = self.shared.worker_of(serial);
                    if worker != self.index {
                        // It moved after handing out the work.
                        self.shared.mailboxes[worker].post(Msg::Done {
                            serial,
                            token,
                            finished,
                        });
                    }
                }
            }
            Msg::Migrate { serial, slot } => self.take_in(serial, *slot),
            Msg::Stop => return true,
        }
        false
    }

    /// Queues connection `serial` to send at the end of the batch.
    fn send_later(&mut self, serial: u64) {
        if let Some(slot) = self.slots.get_mut(&serial) {
            if !slot.unsent {
                slot.unsent = true;
                self.unsent.push(serial);
            }
        }
    }

    /// Sends what connections produced in this batch of events, and takes
    /// up input that paused for output to drain.
    fn send_unsent(&mut self) {
        let now = self.now;
        while let Some(serial) = self.unsent.pop() {
            if let Some(slot) = self.slots.get_mut(&serial) {
                slot.unsent = false;
                let mut stream = Sock(&slot.stream);
                let progress = slot.pump.on_writable(stream, &mut stream, now);
                if slot.pump.conn.has_pending_latencies() {
                    self.timed.push(serial);
                }
                self.settle(serial, progress);
                self.run_local_wakes();
            }
        }
    }

    fn adopt(&mut self, serial: u64, accepted: Accepted) {
        let Accepted {
            stream,
            local,
            portal_group_tag,
            peer,
        } = accepted;
        if !self.shared.server.gate.holds(serial) {
            // Evicted before it got here: its Evict found nothing to close.
            self.shared.load[self.index].fetch_sub(1, Ordering::Relaxed);
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            self.release(serial);
            return;
        }
        let _ = stream.set_nodelay(true);
        let stream = Arc::new(stream);
        let probe = Arc::clone(&stream);
        let mut seed = [0u8; 32];
        if getrandom::getrandom(&mut seed).is_err() {
            // No randomness, no CHAP challenges worth the name: refuse.
            tracing::error!(
                addr = %peer,
                portal = %local,
                "connection from {peer} refused: no random numbers from the system"
            );
            self.release(serial);
            return;
        }
        tracing::debug!(addr = %peer, portal = %local, worker = self.index, "connection accepted");
        let endpoint = Endpoint {
            serial,
            local,
            portal_group_tag,
            peer,
            peer_gone: Some(Arc::new(move || peer_closed(&probe))),
        };
        let server = Arc::clone(&self.shared.server);
        let batching = server.config.datapath.batching;
        let mut conn = Connection::new(server, endpoint, self.now, seed);
        conn.set_stage_clock(Instant::now);
        let mut pump = Pump::new(conn, batching);
        if epoll::add(
            &self.epoll,
            &*stream,
            EventData::new_u64(serial),
            interest(),
        )
        .is_err()
        {
            pump.conn.detach(self.now);
            self.release(serial);
            return;
        }
        self.slots.insert(
            serial,
            Slot {
                stream,
                pump,
                placed: false,
                unsent: false,
            },
        );
    }

    fn on_socket(&mut self, serial: u64, flags: EventFlags) {
        let Some(slot) = self.slots.get_mut(&serial) else {
            return;
        };
        let now = self.now;
        let mut stream = Sock(&slot.stream);
        let mut progress = Progress::Open;
        if flags.contains(EventFlags::RDHUP) {
            slot.pump.peer_done = true;
        }
        if flags.intersects(EventFlags::IN | EventFlags::RDHUP) {
            // A paused connection leaves the bytes in the socket; it reads
            // them when it resumes.
            progress = slot.pump.on_readable_unsent(stream, &mut stream, now);
        }
        if flags.intersects(EventFlags::HUP | EventFlags::ERR) {
            // Both directions are gone (or the socket failed): nothing more
            // can be sent or received.
            progress = Progress::Closed;
        }
        // What it answered, or what waited for the socket to take more
        // (EPOLLOUT), goes with the batch.
        if progress == Progress::Open {
            self.send_later(serial);
        }
        self.settle(serial, progress);
        self.place(serial);
    }

    /// After an event: carry out the connection's actions, then close it
    /// if it is done.
    fn settle(&mut self, serial: u64, mut progress: Progress) {
        while self.dispatch(serial) && progress == Progress::Open {
            // Work ran here: send its response (which may resume input and
            // so produce more actions).
            let Some(slot) = self.slots.get_mut(&serial) else {
                return;
            };
            let mut stream = Sock(&slot.stream);
            progress = slot.pump.on_writable(stream, &mut stream, self.now);
        }
        if progress == Progress::Closed {
            self.close(serial);
        }
    }

    /// Carries out what connection `serial` asks besides sending; returns
    /// whether work ran on this thread (the I/O pool's queue was full).
    fn dispatch(&mut self, serial: u64) -> bool {
        let Some(slot) = self.slots.get_mut(&serial) else {
            return false;
        };
        // Reused, not allocated per call: most calls in a CmdSN chain wake
        // one connection.
        let mut wakes = std::mem::take(&mut self.wakes);
        let mut inline = Vec::new();
        while let Some(action) = slot.pump.conn.poll_action() {
            match action {
                Action::Wake(other) => wakes.push(other),
                Action::Run { token, work } => {
                    // A store that completes on its own threads needs
                    // none of the pool's: its completion comes to this
                    // worker's mailbox as the pool's would.
                    let mailbox = Arc::clone(&self.shared.mailboxes[self.index]);
                    let started = work.start(move |finished| {
                        mailbox.post(Msg::Done {
                            serial,
                            token,
                            finished,
                        });
                    });
                    let Err(work) = started else { continue };
                    let job = Job {
                        worker: self.index,
                        serial,
                        token,
                        work,
                    };
                    if let Err(job) = self.shared.pool.submit(job) {
                        inline.push((job.token, job.work));
                    }
                }
            }
        }
        let ran = !inline.is_empty();
        for (token, work) in inline {
            // No pool thread to be had: the work is admitted and must run,
            // so it runs here, holding up this worker but losing nothing.
            let finished = work.run();
            slot.pump.conn.complete_work(token, finished);
        }
        for other in wakes.drain(..) {
            self.route_wake(other);
        }
        self.wakes = wakes;
        ran
    }

    /// A connection of this worker has ended: the limits and the worker's
    /// load no longer count it.
    fn release(&self, serial: u64) {
        self.shared.server.gate.release_connection(serial);
        self.shared.load[self.index].fetch_sub(1, Ordering::Relaxed);
    }

    /// Closes connection `serial`, evicted to make room for a new one; or
    /// passes the order on to where it moved since.
    fn evict(&mut self, serial: u64) {
        if self.slots.contains_key(&serial) {
            self.close(serial);
            return;
        }
        let worker = self.shared.worker_of(serial);
        if worker != self.index {
            self.shared.mailboxes[worker].post(Msg::Evict(serial));
        }
        // Otherwise it closed already, or is yet to be adopted (and will
        // find itself no longer admitted).
    }

    /// Sends a wake-up to the worker of connection `serial`: this one when
    /// it is here (the case of a session's connections, placed together).
    fn route_wake(&mut self, serial: u64) {
        if self.slots.contains_key(&serial) {
            self.local_wakes.push(serial);
            return;
        }
        let worker = self.shared.worker_of(serial);
        if worker != self.index {
            if let Some(mailbox) = self.shared.mailboxes.get(worker) {
                mailbox.post(Msg::Wake(serial));
            }
        }
        // Otherwise it has closed: nothing to wake.
    }

    /// Moves connection `serial`, once in full feature phase, to the
    /// worker of its session's first connection, so that the wake-ups
    /// that keep a session's commands in CmdSN order across its
    /// connections stay within one thread. A connection waiting behind a
    /// CmdSN gap stays where it is.
    fn place(&mut self, serial: u64) {
        let Some(slot) = self.slots.get_mut(&serial) else {
            return;
        };
        if slot.placed {
            return;
        }
        let Some(leader) = slot.pump.conn.session().and_then(|s| s.leader()) else {
            return;
        };
        slot.placed = true;
        let home = self.shared.worker_of(leader);
        if home == self.index || slot.pump.waiting {
            return;
        }
        let Some(slot) = self.slots.remove(&serial) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, &*slot.stream);
        self.shared.moved.lock_unpoisoned().insert(serial, home);
        self.shared.load[self.index].fetch_sub(1, Ordering::Relaxed);
        self.shared.load[home].fetch_add(1, Ordering::Relaxed);
        self.shared.mailboxes[home].post(Msg::Migrate {
            serial,
            slot: Box::new(slot),
        });
    }

    /// Serves a connection another worker moved here ([`Worker::place`]).
    fn take_in(&mut self, serial: u64, slot: Slot) {
        if epoll::add(
            &self.epoll,
            &*slot.stream,
            EventData::new_u64(serial),
            interest(),
        )
        .is_err()
        {
            self.slots.insert(serial, slot);
            self.close(serial);
            return;
        }
        self.slots.insert(
            serial,
            Slot {
                unsent: false,
                ..slot
            },
        );
        // Bytes may have come meanwhile, and the edge that announced them
        // reached the other worker: take them up now.
        let Some(slot) = self.slots.get_mut(&serial) else {
            return;
        };
        let mut stream = Sock(&slot.stream);
        let progress = slot.pump.resume(stream, &mut stream, self.now);
        self.settle(serial, progress);
    }

    fn run_local_wakes(&mut self) {
        while let Some(serial) = self.local_wakes.pop() {
            let Some(slot) = self.slots.get_mut(&serial) else {
                // Moved away since the wake-up was queued (or closed).
                self.route_wake(serial);
                continue;
            };
            let mut stream = Sock(&slot.stream);
            let progress = match slot.pump.conn.handle_wake() {
                crate::connection::Flow::Close => Progress::Closed,
                _ if slot.pump.waiting => slot.pump.resume_unsent(stream, &mut stream, self.now),
                // What the wake-up queued (a task management response whose
                // tasks elsewhere have ended) goes with the batch.
                _ => Progress::Open,
            };
            if progress == Progress::Open {
                self.send_later(serial);
            }
            self.settle(serial, progress);
        }
    }

    /// Runs every connection's timers and sends what they queued.
    fn tick(&mut self, now: Instant) {
        let serials: Vec<u64> = self.slots.keys().copied().collect();
        for serial in serials {
            let Some(slot) = self.slots.get_mut(&serial) else {
                continue;
            };
            slot.pump.trim();
            let progress = match slot.pump.conn.handle_tick(now) {
                crate::connection::Flow::Close => {
                    let _ = slot.pump.conn.flush(&mut Sock(&slot.stream), now);
                    Progress::Closed
                }
                _ => {
                    let mut stream = Sock(&slot.stream);
                    slot.pump.on_writable(stream, &mut stream, now)
                }
            };
            self.settle(serial, progress);
        }
        self.run_local_wakes();
    }

    /// Ends connection `serial`: what is queued goes if the socket takes
    /// it now, the session hears of it, the socket closes.
    fn close(&mut self, serial: u64) {
        let Some(mut slot) = self.slots.remove(&serial) else {
            return;
        };
        let _ = slot.pump.conn.flush(&mut Sock(&slot.stream), self.now);
        slot.pump.conn.detach(self.now);
        while let Some(action) = slot.pump.conn.poll_action() {
            if let Action::Wake(other) = action {
                self.route_wake(other);
            }
        }
        if worker_of(serial) != self.index {
            let mut moved = self.shared.moved.lock_unpoisoned();
            moved.remove(&serial);
        }
        let _ = epoll::delete(&self.epoll, &*slot.stream);
        let _ = slot.stream.shutdown(Shutdown::Both);
        self.release(serial);
    }
}

#[cfg(test)]
mod tests {
    use super::peer_closed;
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// A connected pair on loopback: (initiator's end, target's end).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    /// Polls `peer_closed` until it says `expected` (the FIN crosses
    /// loopback asynchronously) or a generous time passes.
    fn settles_to(socket: &TcpStream, expected: bool) -> bool {
        let give_up = Instant::now() + Duration::from_secs(10);
        while Instant::now() < give_up {
            if peer_closed(socket) == expected {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn a_peek_tells_a_closed_connection_from_an_open_or_busy_one() {
        let (client, server) = pair();
        assert!(!peer_closed(&server), "open and idle: not closed, no wait");
        (&client).write_all(b"x").expect("write");
        assert!(settles_to(&server, false));
        drop(client);
        // Data sent before the close still waits to be read: not closed yet.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!peer_closed(&server));

        let (client, server) = pair();
        client.shutdown(Shutdown::Write).expect("shutdown");
        assert!(settles_to(&server, true), "FIN seen without reading");
        drop(client);
        assert!(settles_to(&server, true));
    }

    #[test]
    fn a_serial_names_its_worker() {
        for worker in [0usize, 1, 7, super::WORKERS_MAX - 1] {
            let serial = (12345u64 << super::WORKER_BITS) | worker as u64;
            assert_eq!(super::worker_of(serial), worker);
        }
    }
}
