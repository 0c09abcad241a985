//! What a caller submits (a SCSI command or a task management function)
//! and what it gets back.

use crate::sense::{sense_key_name, sense_text};
use isoe_wire::pdu::Lun;
use std::io;
use std::os::fd::RawFd;
use thiserror::Error;

/// The longest CDB carried in the BHS; longer ones need an extended-CDB AHS,
/// which no command this initiator builds uses.
pub const CDB_MAX_BYTES: usize = 16;

/// Which way a command's data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// No data (TEST UNIT READY, SYNCHRONIZE CACHE, ...).
    None,
    /// Data-In of up to this many bytes, into the command's buffer.
    Read(u32),
    /// Data-Out: the first this-many bytes of the command's buffer.
    Write(u32),
}

/// SCSI task attribute (RFC 7143 §11.3.1 ATTR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskAttr {
    /// Untagged.
    Untagged = 0,
    /// SIMPLE: the target may reorder.
    Simple = 1,
    /// ORDERED.
    Ordered = 2,
    /// HEAD OF QUEUE.
    HeadOfQueue = 3,
}

impl TaskAttr {
    /// The attribute of an ATTR field's value (RFC 7143 §11.3.1); the
    /// reserved values 4-7 read as SIMPLE.
    pub fn from_code(code: u8) -> TaskAttr {
        match code & 0x07 {
            0 => TaskAttr::Untagged,
            2 => TaskAttr::Ordered,
            3 => TaskAttr::HeadOfQueue,
            _ => TaskAttr::Simple,
        }
    }
}

/// One SCSI command.
///
/// The buffer travels with the command and comes back in the
/// [`Completion`], so a caller that reuses it allocates nothing per command.
#[derive(Debug)]
pub struct Command {
    /// The logical unit.
    pub lun: Lun,
    /// The CDB, zero-padded to 16 bytes.
    pub cdb: [u8; CDB_MAX_BYTES],
    /// Data direction and length.
    pub direction: Direction,
    /// Task attribute.
    pub attr: TaskAttr,
    /// Write: holds the data. Read: receives it (resized to the length).
    pub buffer: Vec<u8>,
    /// The id of the caller's external buffer (see [`DataPlane`]). Read:
    /// a large Data-In may be received into it instead of `buffer`; data
    /// not received there still lands in `buffer`, and the data plane
    /// knows which bytes it took. Write: the data is sent from it, not
    /// from `buffer` (refused on a connection with data digests).
    pub external: Option<u32>,
    /// Sent for immediate delivery (RFC 7143 §3.2.2.1): the I bit set,
    /// carrying the CmdSN the next command will have without advancing
    /// it, so that the target takes it at once rather than in CmdSN order.
    pub immediate: bool,
}

impl Command {
    /// A command with no data.
    pub fn new(lun: u16, cdb: &[u8]) -> Command {
        Command::with(lun, cdb, Direction::None, Vec::new())
    }

    /// A command reading up to `len` bytes.
    pub fn read(lun: u16, cdb: &[u8], len: u32) -> Command {
        Command::with(lun, cdb, Direction::Read(len), Vec::new())
    }

    /// A command writing `data`.
    pub fn write(lun: u16, cdb: &[u8], data: Vec<u8>) -> Command {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        Command::with(lun, cdb, Direction::Write(len), data)
    }

    /// Everything spelled out. A CDB longer than 16 bytes is cut (see
    /// [`CDB_MAX_BYTES`]); the engine refuses such commands before that.
    pub fn with(lun: u16, cdb: &[u8], direction: Direction, buffer: Vec<u8>) -> Command {
        let mut bytes = [0u8; CDB_MAX_BYTES];
        let n = cdb.len().min(CDB_MAX_BYTES);
        bytes[..n].copy_from_slice(&cdb[..n]);
        Command {
            lun: Lun::from_number(lun),
            cdb: bytes,
            direction,
            attr: TaskAttr::Simple,
            buffer,
            external: None,
            immediate: false,
        }
    }

    /// Bytes of data the command moves (Expected Data Transfer Length).
    pub fn transfer_len(&self) -> u32 {
        match self.direction {
            Direction::None => 0,
            Direction::Read(n) | Direction::Write(n) => n,
        }
    }
}

pub use crate::session::Chunk;

/// Memory outside this process's reach that a read's data can be received
/// into straight from the socket, and a write's data sent from: a ublk
/// request's own pages, registered with the io_uring that serves the
/// device. The engine hands it the large Data-In segments of commands that
/// name an external buffer ([`Command::external`]), and the output of
/// connections that carry such a write's data, during
/// [`crate::Engine::poll_with`].
pub trait DataPlane {
    /// Receives at most `len` bytes from socket `fd` into external buffer
    /// `buffer` at byte `offset`, without blocking: Ok(0) at the end of
    /// the stream, `WouldBlock` when nothing is there yet.
    fn receive(&mut self, buffer: u32, offset: usize, len: usize, fd: RawFd) -> io::Result<usize>;

    /// Sends `chunks` (bytes in memory and ranges of external buffers) on
    /// socket `fd` in order, without blocking, stopping at the first that
    /// does not go whole; returns the bytes sent, `WouldBlock` when none
    /// went for want of room.
    fn send(&mut self, chunks: &[Chunk<'_>], fd: RawFd) -> io::Result<usize>;

    /// True when something the caller waits for came in while
    /// [`DataPlane::receive`] ran (requests read off the ring it shares):
    /// the engine's wait then ends.
    fn woken(&self) -> bool;
}

/// A task management function (RFC 7143 §11.5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskManagement {
    /// ABORT TASK: the task submitted with this token.
    AbortTask {
        /// The LUN of the task.
        lun: u16,
        /// The caller's token of the task to abort.
        token: u64,
    },
    /// ABORT TASK SET on a LUN.
    AbortTaskSet(u16),
    /// CLEAR TASK SET on a LUN.
    ClearTaskSet(u16),
    /// LOGICAL UNIT RESET.
    LogicalUnitReset(u16),
    /// TARGET WARM RESET.
    TargetWarmReset,
}

/// Residual over- or underflow of a command (RFC 7143 §11.4.5.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residual {
    /// O bit: the target had more data than expected.
    pub overflow: bool,
    /// U bit: less data moved than expected.
    pub underflow: bool,
    /// Residual Count in bytes.
    pub count: u32,
}

/// The target's answer to a SCSI command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScsiStatus {
    /// iSCSI Response: 0 = command completed at target.
    pub response: u8,
    /// SCSI status: 0 GOOD, 2 CHECK CONDITION, 8 BUSY, 0x18 RESERVATION CONFLICT...
    pub status: u8,
    /// Sense data (without the 2-byte SenseLength), when the target sent it.
    pub sense: Vec<u8>,
    /// Residual.
    pub residual: Residual,
    /// Data-In bytes received.
    pub data_in_len: u32,
}

impl ScsiStatus {
    /// GOOD status from a completed command.
    pub fn is_good(&self) -> bool {
        self.response == 0 && self.status == 0
    }

    /// Sense key, ASC and ASCQ from fixed or descriptor sense data.
    pub fn sense_key(&self) -> Option<(u8, u8, u8)> {
        let s = &self.sense;
        match s.first()? & 0x7f {
            0x70 | 0x71 if s.len() >= 14 => Some((s[2] & 0x0f, s[12], s[13])),
            0x72 | 0x73 if s.len() >= 4 => Some((s[1] & 0x0f, s[2], s[3])),
            _ => None,
        }
    }
}

/// Why a task ended without a SCSI status.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TaskError {
    /// The target rejected a PDU of the task (RFC 7143 §11.17).
    #[error("the target rejected the command (Reject reason {:#04x})", reason.to_u8())]
    Rejected {
        /// The Reject reason.
        reason: isoe_wire::pdu::RejectReason,
    },
    /// A task management function aborted the task.
    #[error("aborted by a task management function")]
    Aborted,
    /// The session failed and reconnection gave up.
    #[error("the session failed: {0}")]
    SessionFailed(String),
    /// The command cannot be sent as built.
    #[error("invalid command: {0}")]
    Invalid(String),
    /// A multipath logical unit had no path to serve the command within
    /// its failover time; says what each path was.
    #[error("no path to the logical unit: {0}")]
    NoPath(String),
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A SCSI command completed with a status.
    Scsi(ScsiStatus),
    /// A task management function answered (RFC 7143 §11.6.1).
    TaskManagement(isoe_wire::pdu::TmfResponse),
    /// A logout answered (RFC 7143 §11.15.1 response code).
    Logout(isoe_wire::pdu::LogoutResponseCode),
    /// The task ended without a status.
    Failed(TaskError),
}

/// A finished task, with the caller's token and buffer.
#[derive(Debug)]
pub struct Completion {
    /// Which session (the index [`crate::Engine::login`] returned).
    pub session: usize,
    /// The caller's token from submission.
    pub token: u64,
    /// What happened.
    pub outcome: Outcome,
    /// The command's buffer: read data, or the written data, handed back.
    pub buffer: Vec<u8>,
}

impl Completion {
    /// The SCSI status if the command completed with GOOD, else a description of what went wrong.
    pub fn good(&self) -> Result<&ScsiStatus, String> {
        match &self.outcome {
            Outcome::Scsi(s) if s.is_good() => Ok(s),
            Outcome::Scsi(s) => Err(describe_status(s)),
            Outcome::TaskManagement(r) => Err(format!("task management response {}", r.to_u8())),
            Outcome::Logout(r) => Err(format!("logout response {}", r.to_u8())),
            Outcome::Failed(e) => Err(e.to_string()),
        }
    }
}

/// A status as a storage administrator reads it, e.g.
/// `CHECK CONDITION (0x02), ILLEGAL REQUEST sense, ASC/ASCQ 0x21/0x00`.
pub fn describe_status(s: &ScsiStatus) -> String {
    if s.response != 0 {
        return format!("iSCSI response {:#04x} (target failure)", s.response);
    }
    let status = status_name(s.status);
    match s.sense_key() {
        Some((key, asc, ascq)) => format!(
            "{status} ({:#04x}), {} sense, ASC/ASCQ {asc:#04x}/{ascq:#04x}",
            s.status,
            sense_key_name(key)
        ),
        None => format!("{status} ({:#04x})", s.status),
    }
}

/// A status with its sense in words, e.g. `CHECK CONDITION, ILLEGAL
/// REQUEST, LOGICAL UNIT NOT SUPPORTED (05/25/00)` (see [`sense_text`]).
pub fn describe_status_in_words(s: &ScsiStatus) -> String {
    if s.response != 0 {
        return format!("iSCSI response {:#04x} (target failure)", s.response);
    }
    let status = status_name(s.status);
    match s.sense_key() {
        Some((key, asc, ascq)) => format!("{status}, {}", sense_text(key, asc, ascq)),
        None => format!("{status} ({:#04x})", s.status),
    }
}

/// SAM-5's name of a status byte.
fn status_name(status: u8) -> &'static str {
    match status {
        0x00 => "GOOD",
        0x02 => "CHECK CONDITION",
        0x04 => "CONDITION MET",
        0x08 => "BUSY",
        0x18 => "RESERVATION CONFLICT",
        0x28 => "TASK SET FULL",
        0x30 => "ACA ACTIVE",
        0x40 => "TASK ABORTED",
        _ => "status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sense_is_read_from_fixed_and_descriptor_formats() {
        let mut fixed = vec![0u8; 18];
        fixed[0] = 0x70;
        fixed[2] = 0x05;
        fixed[12] = 0x21;
        let s = ScsiStatus {
            status: 2,
            sense: fixed,
            ..Default::default()
        };
        assert_eq!(s.sense_key(), Some((5, 0x21, 0)));
        assert_eq!(
            describe_status(&s),
            "CHECK CONDITION (0x02), ILLEGAL REQUEST sense, ASC/ASCQ 0x21/0x00"
        );
        let desc = ScsiStatus {
            status: 2,
            sense: vec![0x72, 0x06, 0x29, 0x01],
            ..Default::default()
        };
        assert_eq!(desc.sense_key(), Some((6, 0x29, 1)));
        assert!(!desc.is_good());
    }

    #[test]
    fn commands_pad_their_cdb() {
        let c = Command::read(2, &[0x12, 0, 0, 0, 96, 0], 96);
        assert_eq!(c.cdb[..6], [0x12, 0, 0, 0, 96, 0]);
        assert_eq!(c.cdb[6..], [0; 10]);
        assert_eq!(c.transfer_len(), 96);
        assert_eq!(c.lun, Lun::from_number(2));
    }
}
