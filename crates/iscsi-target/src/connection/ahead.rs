//! Immediate delivery past a CmdSN gap (RFC 7143 §3.2.2.1): while a
//! command waits for an earlier CmdSN, the immediate NOP-Outs, task
//! management functions and Logouts that came after it on this connection
//! are delivered now, not behind it. A ping is answered while the gap
//! lasts, an initiator that gave up on the waiting command can abort it,
//! and one that gave up on the connection can log it out.
//!
//! The input stays in the driver's buffer, in order: what was handled
//! ahead is remembered by its place in the stream and skipped when the
//! input reaches it. A function handled ahead ends the commands with a
//! lower CmdSN that it covers and that have not come yet (the waiting
//! ones here, the gap's fill on another connection): the session keeps
//! that as a rule ([`crate::session::Session::end_unreceived`]), and each
//! such command is taken and dropped without running when its turn
//! comes, as if it had been aborted once received (RFC 7143 §11.5.1 (a)).
//! The rule is the session's, not a list of the waiting commands, so it
//! holds however many wait.

use super::*;

impl Connection {
    /// `input[..waiting_len]` waits behind a CmdSN gap and `input` starts
    /// `at` bytes into the stream: delivers the immediate NOP-Outs,
    /// functions and Logouts after it. Each frame is looked at once, however
    /// often the input is fed (the scan goes on from where the last one
    /// stopped), so the work is bounded by the bytes received, and a
    /// function behind any number of waiting commands is found. A frame
    /// that breaks the protocol ends the connection now, as it would in
    /// turn, rather than when the wait gives up. Returns [`Flow::Close`] if
    /// one ends the connection, else [`Flow::Wait`].
    pub(super) fn deliver_ahead(
        &mut self,
        input: &[u8],
        waiting_len: usize,
        at: u64,
        now: Instant,
    ) -> Flow {
        let start = self.ahead.scanned.max(at + waiting_len as u64);
        let mut pos = (start - at) as usize;
        while !self.ahead.full() && pos < input.len() {
            let frame = match decode(&input[pos..], &self.recv_limits) {
                Ok(Decoded::Frame { frame, len }) => (frame, len),
                Ok(Decoded::NeedMore { .. }) => break,
                Err(FrameError::DataDigest { frame_len, .. }) => {
                    // Rejected when its turn comes; its length is known.
                    pos += frame_len;
                    self.ahead.scanned = at + pos as u64;
                    continue;
                }
                Err(error) => return self.handle_frame_error(&error).0,
            };
            let (frame, len) = frame;
            let immediate = match frame.pdu() {
                Ok(Pdu::NopOut(n)) => n.immediate,
                Ok(Pdu::TaskMgmtRequest(t)) => t.immediate,
                Ok(Pdu::LogoutRequest(l)) => l.immediate,
                _ => false,
            };
            if immediate {
                match self.handle_ahead(&frame, at + pos as u64, now) {
                    Flow::Close => return Flow::Close,
                    // Not taken: looked at again on the next feed.
                    Flow::Wait => break,
                    Flow::Continue => {}
                }
            }
            pos += len;
            self.ahead.scanned = at + pos as u64;
        }
        Flow::Wait
    }

    /// Handles one immediate PDU ahead of the waiting command, which keeps
    /// waiting since when it began.
    fn handle_ahead(&mut self, frame: &Frame<'_>, place: u64, now: Instant) -> Flow {
        let waiting_since = self.waiting_since;
        let flow = self.feed_frame(frame, now);
        self.waiting_since = waiting_since;
        if flow != Flow::Wait {
            self.ahead.handled.push_back(place);
        }
        flow
    }
}
