//! What a connection keeps between PDUs for the exchanges under way: its
//! phase, a login's state, a ping waiting for its answer, a long Text
//! Response, what was delivered ahead of a CmdSN gap, commands whose work
//! runs elsewhere and task management responses held for them. Data only:
//! the behaviour is in the files of each exchange.

use crate::session::{AbortBarrier, Session};
use isoe_scsi::Residual;
use isoe_wire::login::TargetLogin;
use isoe_wire::pdu::{LoginRequest, LoginResponse, ScsiCommand};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// Where a connection is in its life (RFC 7143 §6, §7.1).
pub(super) enum Phase {
    /// Logging in: the login's state machine and what it has seen.
    Login(Box<LoginPhase>),
    /// Full feature phase, in this session.
    Full(Arc<Session>),
    /// Logged out, refused or dropped: nothing more is taken.
    Closed,
}

/// A NOP-In ping of ours waiting for its NOP-Out.
pub(super) struct Ping {
    /// The Target Transfer Tag the answer echoes.
    pub(super) target_transfer_tag: u32,
    /// When it was sent (the NOP-In timeout runs from it).
    pub(super) sent_at: Instant,
}

/// A login under way.
pub(super) struct LoginPhase {
    pub(super) machine: TargetLogin,
    pub(super) first_request: Option<LoginRequest>,
    /// The InitiatorName the login text gave, for the log.
    pub(super) initiator: Option<String>,
    /// The TargetName the login text gave, for the log.
    pub(super) target: Option<String>,
}

/// A login failure's answer held back ([`crate::admission::FailureLog`]).
pub(super) struct HeldAnswer {
    pub(super) response: LoginResponse,
    pub(super) data: Vec<u8>,
    pub(super) until: Instant,
}

/// A Text Response longer than one PDU, sent a piece per continued
/// request (RFC 7143 §11.10.2).
pub(super) struct PendingText {
    /// The Target Transfer Tag the next request must carry.
    pub(super) target_transfer_tag: u32,
    /// The whole answer.
    pub(super) data: Vec<u8>,
    /// Bytes of it sent so far.
    pub(super) sent: usize,
}

/// PDUs handled ahead and not yet reached: a bound on what a peer can
/// make us remember.
const MARKS_MAX: usize = 32;

/// What was delivered ahead of a waiting command (see `ahead.rs`).
#[derive(Debug, Default)]
pub(super) struct Ahead {
    /// Places in the stream (bytes since the connection began) of the
    /// PDUs handled ahead, oldest first.
    pub(super) handled: VecDeque<u64>,
    /// Where the look past the waiting command stopped: every frame
    /// before it was looked at once.
    pub(super) scanned: u64,
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

    /// Whether it holds all it may ([`MARKS_MAX`]).
    pub(super) fn full(&self) -> bool {
        self.handled.len() >= MARKS_MAX
    }
}

/// A command whose work runs elsewhere.
pub(super) struct BackgroundTask {
    pub(super) token: u64,
    pub(super) command: ScsiCommand,
    /// For work left for later: the residual known at dispatch.
    pub(super) residual: Residual,
    /// A task management function must wait for this work to return
    /// before it completes (a whole command's store calls).
    pub(super) holds: bool,
    /// Ended by a task management function; its response is not sent.
    pub(super) aborted: bool,
    /// When the command was taken.
    pub(super) started: Instant,
    /// Its bytes of the medium, for an UNMAP or WRITE SAME (counted when
    /// it completes GOOD).
    pub(super) range_bytes: u64,
    /// When it was handed out, if it is sampled for its stages: the wait
    /// for an I/O thread counts as the store's.
    pub(super) store_called: Option<Instant>,
}

/// A task management response waiting for aborted work to return, here
/// and on the other connections the function reached.
pub(super) struct HeldTmf {
    pub(super) initiator_task_tag: u32,
    pub(super) response: isoe_wire::pdu::TmfResponse,
    pub(super) barrier: Option<Arc<AbortBarrier>>,
    /// An ABORT TASK whose task was not here: "Task does not exist" unless
    /// a connection the barrier counts found it.
    pub(super) unless_found: bool,
}
