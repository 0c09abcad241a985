//! Immediate delivery past a CmdSN gap (RFC 7143 §3.2.2.1): while a
//! command waits for an earlier CmdSN, the immediate NOP-Outs and task
//! management functions that came after it on this connection are
//! delivered now, not behind it. A ping is answered while the gap lasts,
//! and an initiator that gave up on the waiting command can abort it.
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

/// Frames looked at past a waiting command, each time its input is fed:
/// a bound on the work a wake-up does.
const FRAMES_MAX: usize = 64;

impl Connection {
    /// `input[..waiting_len]` waits behind a CmdSN gap and `input` starts
    /// `at` bytes into the stream: delivers the immediate NOP-Outs and
    /// functions after it. Returns [`Flow::Close`] if one ends the
    /// connection, else [`Flow::Wait`].
    pub(super) fn deliver_ahead(
        &mut self,
        input: &[u8],
        waiting_len: usize,
        at: u64,
        now: Instant,
    ) -> Flow {
        let mut pos = 0;
        for _ in 0..FRAMES_MAX {
            let Ok(Decoded::Frame { frame, len }) = decode(&input[pos..], &self.recv_limits) else {
                break;
            };
            let place = at + pos as u64;
            if !self.ahead.handled.contains(&place) {
                let immediate = match frame.pdu() {
                    Ok(Pdu::NopOut(n)) => n.immediate,
                    Ok(Pdu::TaskMgmtRequest(t)) => t.immediate,
                    _ => false,
                };
                let flow = if immediate && pos >= waiting_len {
                    self.handle_ahead(&frame, place, now)
                } else {
                    Flow::Continue
                };
                if flow == Flow::Close {
                    return Flow::Close;
                }
            }
            if self.ahead.full() {
                break;
            }
            pos += len;
        }
        Flow::Wait
    }

    /// Handles one immediate PDU ahead of the waiting command, which keeps
    /// waiting since when it began.
    fn handle_ahead(&mut self, frame: &Frame<'_>, place: u64, now: Instant) -> Flow {
        let waiting_since = self.waiting_since;
        let flow = self.handle_frame(frame, now);
        self.waiting_since = waiting_since;
        if flow != Flow::Wait {
            self.ahead.handled.push_back(place);
        }
        flow
    }
}
