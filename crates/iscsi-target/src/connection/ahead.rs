//! Immediate delivery past a CmdSN gap (RFC 7143 §3.2.2.1): while a
//! command waits for an earlier CmdSN, the immediate NOP-Outs and task
//! management functions that came after it on this connection are
//! delivered now, not behind it. A ping is answered while the gap lasts,
//! and an initiator that gave up on the waiting command can abort it.
//!
//! The input stays in the driver's buffer, in order: what was handled
//! ahead is remembered by its place in the stream and skipped when the
//! input reaches it. A function handled ahead also ends the waiting
//! commands before it that it covers (ABORT TASK by tag, the task-set
//! functions and resets by LUN, SAM-5 7): when such a command's turn
//! comes, its CmdSN is taken and it is dropped without running, as if it
//! had been aborted once received (RFC 7143 §11.5.1 (a)).

use super::*;
use isoe_wire::pdu::tmf;

/// Frames looked at past a waiting command, each time its input is fed:
/// a bound on the work a wake-up does.
const FRAMES_MAX: usize = 64;

/// A command waiting in the input, as a task management function sees it.
struct Waiting {
    initiator_task_tag: u32,
    lun: Lun,
}

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
        let mut waiting: Vec<Waiting> = Vec::new();
        let mut pos = 0;
        for _ in 0..FRAMES_MAX {
            let Ok(Decoded::Frame { frame, len }) = decode(&input[pos..], &self.recv_limits) else {
                break;
            };
            let place = at + pos as u64;
            if !self.ahead.handled.contains(&place) {
                let flow = match frame.pdu() {
                    Ok(Pdu::ScsiCommand(c)) if !c.immediate => {
                        waiting.push(Waiting {
                            initiator_task_tag: c.initiator_task_tag,
                            lun: c.lun,
                        });
                        Flow::Continue
                    }
                    Ok(Pdu::NopOut(n)) if pos >= waiting_len && n.immediate => {
                        self.handle_ahead(&frame, place, now)
                    }
                    Ok(Pdu::TaskMgmtRequest(t)) if pos >= waiting_len && t.immediate => {
                        self.end_ahead(&t, &waiting);
                        self.handle_ahead(&frame, place, now)
                    }
                    _ => Flow::Continue,
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

    /// Marks the waiting commands before the function `t` that it ends.
    fn end_ahead(&mut self, t: &TaskMgmtRequest, waiting: &[Waiting]) {
        let covers = |w: &Waiting| match t.function {
            tmf::ABORT_TASK => w.initiator_task_tag == t.referenced_task_tag,
            tmf::ABORT_TASK_SET | tmf::CLEAR_TASK_SET | tmf::LOGICAL_UNIT_RESET => w.lun == t.lun,
            tmf::TARGET_WARM_RESET | tmf::TARGET_COLD_RESET => true,
            _ => false,
        };
        for w in waiting.iter().filter(|w| covers(w)) {
            if self.ahead.full() {
                return;
            }
            if !self.ahead.ended.contains(&w.initiator_task_tag) {
                self.ahead.ended.push(w.initiator_task_tag);
            }
        }
    }
}
