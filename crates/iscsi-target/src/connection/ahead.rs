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

/// PDUs handled ahead and not yet reached, and commands ended ahead of
/// their turn: a bound on what a peer can make us remember.
const MARKS_MAX: usize = 32;

/// What was delivered ahead of a waiting command.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    /// Places in the stream (bytes since the connection began) of the
    /// PDUs handled ahead, oldest first.
    handled: VecDeque<u64>,
    /// Initiator task tags of commands a function handled ahead ended.
    ended: Vec<u32>,
}

impl Ahead {
    /// Whether the PDU at `at` was handled ahead (and forgets it: it is
    /// reached now).
    pub(super) fn reached(&mut self, at: u64) -> bool {
        if self.handled.front() == Some(&at) {
            self.handled.pop_front();
            return true;
        }
        false
    }

    /// Whether the command tagged `initiator_task_tag` was ended by a
    /// function handled ahead of it (and forgets it).
    pub(super) fn take_ended(&mut self, initiator_task_tag: u32) -> bool {
        let Some(i) = self.ended.iter().position(|t| *t == initiator_task_tag) else {
            return false;
        };
        self.ended.swap_remove(i);
        true
    }

    /// Whether anything was ended ahead: the command path's one check.
    pub(super) fn any_ended(&self) -> bool {
        !self.ended.is_empty()
    }

    fn full(&self) -> bool {
        self.handled.len() + self.ended.len() >= MARKS_MAX
    }
}

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
