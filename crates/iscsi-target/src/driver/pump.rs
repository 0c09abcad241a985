//! One connection's bytes between its socket and its sans-IO state machine:
//! reads into a receive buffer, feeds the connection, flushes its output.
//! Generic over `Read` and `Write` so that tests drive it with scripts.

use crate::connection::{Connection, Flow};
use isoe_wire::frame::header_bytes_needed;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Largest receive buffer: room for many PDUs per read (the batching of
/// datapath rule 2). A buffer starts at [`RECV_BUFFER_START_BYTES`] and
/// doubles each time a read fills it, so an idle or logging-in connection
/// costs little and a busy one soon reads in large batches; what buffers
/// hold beyond their start, all connections together, is bounded by
/// `[limits] receive_buffer` ([`RecvMeter`]).
pub(crate) const RECV_BUFFER_BYTES: usize = 512 << 10;
/// A new connection's receive buffer.
pub(crate) const RECV_BUFFER_START_BYTES: usize = 16 << 10;

/// The bytes every connection's receive buffer holds beyond its start,
/// against their bound. Growth for batching takes from it only while it
/// fits; growth to hold one PDU longer than the buffer always does (the
/// connection could not go on otherwise, and it is bounded by the PDU
/// length the target declared); a buffer gives back what it took when it
/// shrinks or goes.
#[derive(Clone)]
pub(crate) struct RecvMeter {
    pub(crate) bytes: Arc<AtomicUsize>,
    pub(crate) limit: usize,
}

impl RecvMeter {
    /// Takes `more` bytes if they fit under the limit (or whatever `force`).
    fn take(&self, more: usize, force: bool) -> bool {
        if force {
            self.bytes.fetch_add(more, Ordering::Relaxed);
            return true;
        }
        self.bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(more).filter(|&after| after <= self.limit)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Over half the bound is held: idle buffers shrink back.
    fn pressed(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) > self.limit / 2
    }
}

/// A receive buffer holding bytes read but not yet handled.
pub(crate) struct RecvBuffer {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
    meter: Option<RecvMeter>,
}

impl Drop for RecvBuffer {
    fn drop(&mut self) {
        if let Some(meter) = &self.meter {
            meter.give(self.beyond_start());
        }
    }
}

impl RecvBuffer {
    pub(crate) fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer {
            bytes: vec![0; capacity],
            start: 0,
            end: 0,
            meter: None,
        }
    }

    /// A new connection's buffer, its growth counted by `meter`.
    pub(crate) fn metered(meter: RecvMeter) -> RecvBuffer {
        let mut buffer = RecvBuffer::new(RECV_BUFFER_START_BYTES);
        buffer.meter = Some(meter);
        buffer
    }

    fn beyond_start(&self) -> usize {
        self.bytes.len().saturating_sub(RECV_BUFFER_START_BYTES)
    }

    /// Grows the buffer to `len` bytes if the meter lets it (or whatever
    /// `force`); whether it did.
    fn grow(&mut self, len: usize, force: bool) -> bool {
        let more = len.saturating_sub(RECV_BUFFER_START_BYTES) - self.beyond_start();
        if let Some(meter) = &self.meter {
            if !meter.take(more, force) {
                return false;
            }
        }
        self.bytes.resize(len, 0);
        true
    }

    /// An empty buffer grown beyond its start goes back to it while the
    /// bound is pressed (at least half of it held), so that idle
    /// connections do not keep what busy ones need.
    pub(crate) fn trim(&mut self) {
        let Some(meter) = &self.meter else { return };
        if self.start == self.end && self.beyond_start() > 0 && meter.pressed() {
            meter.give(self.beyond_start());
            self.bytes = vec![0; RECV_BUFFER_START_BYTES];
            self.start = 0;
            self.end = 0;
        }
    }

    pub(crate) fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.trim();
        }
    }

    /// Makes room so that a frame of `total` bytes fits from `start`.
    fn make_room(&mut self, total: usize) {
        if self.start + total > self.bytes.len() {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if total > self.bytes.len() {
                self.grow(total, true);
            }
        }
    }

    /// Whether a read has room without growing the buffer.
    fn has_room(&self) -> bool {
        self.start > 0 || self.end < self.bytes.len()
    }

    fn spare(&mut self) -> &mut [u8] {
        if self.end == self.bytes.len() {
            self.make_room(self.bytes.len());
        }
        &mut self.bytes[self.end..]
    }

    /// A read filled all the room there was: the peer sends faster than
    /// the buffer takes, so it grows (up to [`RECV_BUFFER_BYTES`]).
    fn filled(&mut self) {
        if self.end == self.bytes.len() && self.bytes.len() < RECV_BUFFER_BYTES {
            let doubled = (self.bytes.len() * 2).min(RECV_BUFFER_BYTES);
            self.grow(doubled, false);
        }
    }
}

/// How many bytes the next read may ask for: all the buffer has room for
/// when batching, else no more than the rest of the PDU being assembled, so
/// that a read never takes bytes of the PDU after it. `need_total` is the
/// length of the whole PDU as far as the bytes held tell.
pub(crate) fn read_len(batching: bool, spare: usize, held: usize, need_total: usize) -> usize {
    if batching {
        return spare;
    }
    // At least one byte (a zero-length read would look like the peer's
    // close), at most the room there is; `clamp` would panic on no room.
    need_total.saturating_sub(held).max(1).min(spare)
}

/// Whether a connection goes on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    Open,
    Closed,
}

/// A connection with its receive buffer.
pub(crate) struct Pump {
    pub(crate) conn: Connection,
    recv: RecvBuffer,
    /// Length of the PDU being assembled, as far as known.
    need: usize,
    batching: bool,
    /// Input waits behind a CmdSN gap until the connection is woken.
    pub(crate) waiting: bool,
    /// Input paused until the output drains below its bound.
    output_full: bool,
    /// The peer has shut its side (EPOLLRDHUP): reads go on to the end of
    /// the stream, since no further edge will announce it.
    pub(crate) peer_done: bool,
    /// The socket may hold bytes not read yet: the last read filled all it
    /// asked for, or an edge came while input was paused. A resumed
    /// connection reads only then.
    unread: bool,
}

impl Pump {
    pub(crate) fn new(conn: Connection, batching: bool) -> Pump {
        let need = header_bytes_needed(&[], &conn.recv_limits());
        let meter = RecvMeter {
            bytes: Arc::clone(&conn.server().receive_bytes),
            limit: conn.server().config.limits.receive_buffer,
        };
        Pump {
            conn,
            recv: RecvBuffer::metered(meter),
            need,
            batching,
            waiting: false,
            output_full: false,
            peer_done: false,
            unread: true,
        }
    }

    /// Gives back an idle receive buffer's growth while the bound is
    /// pressed ([`RecvBuffer::trim`]).
    pub(crate) fn trim(&mut self) {
        self.recv.trim();
    }

    /// Whether the socket should be polled for reading. A connection whose
    /// command waits behind a CmdSN gap reads on while its buffer has room
    /// (batching), so that the immediate PDUs behind that command are
    /// delivered (RFC 7143 §3.2.2.1); a full buffer holds the peer back.
    pub(crate) fn wants_read(&self) -> bool {
        !self.output_full && (!self.waiting || (self.batching && self.recv.has_room()))
    }

    /// Reads what `source` has, until it would block or input must pause,
    /// handling what arrives and leaving the answers to the last read unsent
    /// (but for output at its bound) for the caller to send once it has
    /// handled every event of the batch: one send per connection per batch,
    /// however many times it was woken in it.
    pub(crate) fn on_readable_unsent<R: Read, W: Write>(
        &mut self,
        source: R,
        sink: &mut W,
        now: Instant,
    ) -> Progress {
        self.read_then(source, sink, now, false)
    }

    fn read_then<R: Read, W: Write>(
        &mut self,
        mut source: R,
        sink: &mut W,
        now: Instant,
        send: bool,
    ) -> Progress {
        if !self.wants_read() {
            // Left in the socket until input resumes.
            self.unread = true;
        }
        while self.wants_read() {
            let held = self.recv.data().len();
            let spare = self.recv.spare();
            let want = read_len(self.batching, spare.len(), held, self.need);
            match source.read(&mut spare[..want]) {
                Ok(0) => return Progress::Closed,
                Ok(n) => {
                    self.unread = n == want || self.peer_done;
                    self.recv.end += n;
                    if self.batching {
                        self.recv.filled();
                    }
                    // A read that filled all it asked for is followed by
                    // another: what this one produced (R2Ts above all, which
                    // the peer waits for to send more) goes first, not after
                    // the whole stream is read. Left for the batch is only
                    // what the last read of a drained socket produced.
                    let again = n == want || self.peer_done;
                    if self.process_then(sink, now, send || again) == Progress::Closed {
                        return Progress::Closed;
                    }
                    if !again {
                        // The socket is drained: reading again would only
                        // learn so with a system call, and the next bytes
                        // to arrive raise a new edge.
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.unread = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Progress::Closed,
            }
        }
        if self.peer_done && self.waiting && !self.wants_read() {
            // The peer has gone, and the end of its stream lies behind
            // bytes that wait for a CmdSN gap with the buffer full: it would
            // be read only once the gap fills or its deadline passes. The
            // connection ends now, as when a read finds the end.
            return Progress::Closed;
        }
        Progress::Open
    }

    /// The socket takes output again: send, and take up input that paused
    /// for it (the held bytes, then the socket: with edge-triggered polling
    /// no new event comes for bytes that arrived meanwhile).
    pub(crate) fn on_writable<R: Read, W: Write>(
        &mut self,
        source: R,
        sink: &mut W,
        now: Instant,
    ) -> Progress {
        if self.conn.flush(sink, now).is_err() {
            return Progress::Closed;
        }
        if self.output_full && !self.conn.output_full() {
            return self.resume(source, sink, now);
        }
        Progress::Open
    }

    /// Takes up paused input: the bytes held, then what the socket has.
    pub(crate) fn resume<R: Read, W: Write>(
        &mut self,
        source: R,
        sink: &mut W,
        now: Instant,
    ) -> Progress {
        self.resume_then(source, sink, now, true)
    }

    /// [`Pump::resume`], leaving what it produced unsent for the caller to
    /// send once it has run every connection that has work: a session's
    /// connections woken one after the other, each for the command now next
    /// in CmdSN order, then leave with one send each rather than one per
    /// command.
    pub(crate) fn resume_unsent<R: Read, W: Write>(
        &mut self,
        source: R,
        sink: &mut W,
        now: Instant,
    ) -> Progress {
        self.resume_then(source, sink, now, false)
    }

    fn resume_then<R: Read, W: Write>(
        &mut self,
        source: R,
        sink: &mut W,
        now: Instant,
        send: bool,
    ) -> Progress {
        if self.process_then(sink, now, send) == Progress::Closed {
            return Progress::Closed;
        }
        if !self.unread {
            return Progress::Open;
        }
        self.read_then(source, sink, now, send)
    }

    /// Handles the input held (after a read, a wake-up, or output drained),
    /// sending what it produced when `send`.
    fn process_then<W: Write>(&mut self, sink: &mut W, now: Instant, send: bool) -> Progress {
        self.waiting = false;
        loop {
            let input = self.conn.handle_input(self.recv.data(), now);
            self.recv.consume(input.consumed);
            self.need = input.need;
            self.output_full = input.output_full;
            match input.flow {
                Flow::Close => {
                    let _ = self.conn.flush(sink, now);
                    return Progress::Closed;
                }
                Flow::Wait => {
                    self.waiting = true;
                    break;
                }
                Flow::Continue => {}
            }
            self.recv.make_room(self.need);
            if self.output_full {
                // Send what can go; go on only if that made room.
                match self.conn.flush(sink, now) {
                    Err(_) => return Progress::Closed,
                    Ok(_) if !self.conn.output_full() => continue,
                    Ok(_) => return Progress::Open,
                }
            }
            if self.batching || input.consumed == 0 {
                break;
            }
            // Unbatched: what this PDU produced leaves now, one write per
            // PDU, before the next is handled.
            if self.conn.flush(sink, now).is_err() {
                return Progress::Closed;
            }
        }
        if !send {
            return Progress::Open;
        }
        match self.conn.flush(sink, now) {
            Ok(_) => Progress::Open,
            Err(_) => Progress::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RecvBuffer, RecvMeter, RECV_BUFFER_BYTES, RECV_BUFFER_START_BYTES};
    use std::sync::atomic::Ordering;

    /// Fills what room there is, as a read that takes it all.
    fn fill(recv: &mut RecvBuffer) {
        let room = recv.spare().len();
        recv.end += room;
        recv.filled();
    }

    #[test]
    fn receive_buffers_grow_for_batching_only_within_their_bound_and_give_it_back() {
        let meter = RecvMeter {
            bytes: Default::default(),
            limit: 100 << 10,
        };
        let held = || meter.bytes.load(Ordering::Relaxed);
        let mut a = RecvBuffer::metered(meter.clone());
        let mut b = RecvBuffer::metered(meter.clone());
        for _ in 0..8 {
            fill(&mut a);
            a.consume(a.data().len());
        }
        assert_eq!(a.bytes.len(), 64 << 10, "16 -> 32 -> 64 KiB, not 128");
        assert_eq!(held(), 48 << 10, "what it holds beyond its start");
        for _ in 0..8 {
            fill(&mut b);
        }
        assert_eq!(b.bytes.len(), 64 << 10, "b holds all it read, 48 KiB over");
        assert_eq!(held(), 96 << 10);
        // A PDU longer than the buffer is held whatever the bound.
        b.make_room(b.data().len() + (300 << 10));
        assert!(b.bytes.len() >= 364 << 10);
        assert!(held() > meter.limit, "forced past the bound");
        // a is idle: it shrinks back while the bound is pressed.
        a.trim();
        assert_eq!(a.bytes.len(), RECV_BUFFER_START_BYTES);
        drop(b);
        assert_eq!(held(), 0, "every byte given back");
        drop(a);
        assert_eq!(held(), 0);
    }

    #[test]
    fn the_receive_buffer_doubles_when_a_read_fills_it_up_to_its_bound() {
        let mut recv = RecvBuffer::new(RECV_BUFFER_START_BYTES);
        let mut sizes = vec![recv.bytes.len()];
        while recv.bytes.len() < RECV_BUFFER_BYTES {
            let room = recv.spare().len();
            recv.end += room;
            recv.filled();
            sizes.push(recv.bytes.len());
            recv.consume(recv.data().len());
        }
        assert_eq!(
            sizes,
            [16, 32, 64, 128, 256, 512].map(|k| k << 10),
            "16 KiB to 512 KiB by doubling"
        );
        recv.end = recv.bytes.len();
        recv.filled();
        assert_eq!(
            recv.bytes.len(),
            RECV_BUFFER_BYTES,
            "never beyond the bound"
        );

        let mut partial = RecvBuffer::new(RECV_BUFFER_START_BYTES);
        partial.end = 100;
        partial.filled();
        assert_eq!(
            partial.bytes.len(),
            RECV_BUFFER_START_BYTES,
            "a short read: no growth"
        );
    }
}
