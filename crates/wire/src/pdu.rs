//! Typed representations of every PDU of RFC 7143 §11.
//!
//! Each PDU kind is a plain struct holding its Basic Header Segment fields
//! (never the data segment, which stays borrowed from the receive buffer).
//! [`Pdu::parse`] validates a 48-byte BHS into one of them; [`Pdu::emit`]
//! writes one back. Byte offsets are named once, in [`field`].

use crate::bhs::{field, Bhs, BHS_LEN};
use thiserror::Error;

/// PDU opcodes (RFC 7143 §11.2.1.2), without the immediate bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// NOP-Out (initiator).
    NopOut = 0x00,
    /// SCSI Command.
    ScsiCommand = 0x01,
    /// SCSI Task Management Function Request.
    TaskMgmtRequest = 0x02,
    /// Login Request.
    LoginRequest = 0x03,
    /// Text Request.
    TextRequest = 0x04,
    /// SCSI Data-Out.
    DataOut = 0x05,
    /// Logout Request.
    LogoutRequest = 0x06,
    /// SNACK Request.
    SnackRequest = 0x10,
    /// NOP-In (target).
    NopIn = 0x20,
    /// SCSI Response.
    ScsiResponse = 0x21,
    /// SCSI Task Management Function Response.
    TaskMgmtResponse = 0x22,
    /// Login Response.
    LoginResponse = 0x23,
    /// Text Response.
    TextResponse = 0x24,
    /// SCSI Data-In.
    DataIn = 0x25,
    /// Logout Response.
    LogoutResponse = 0x26,
    /// Ready To Transfer.
    R2t = 0x31,
    /// Asynchronous Message.
    AsyncMessage = 0x32,
    /// Reject.
    Reject = 0x3f,
}

impl Opcode {
    /// Maps the low six bits of BHS byte 0 to an opcode.
    pub fn from_u8(value: u8) -> Option<Opcode> {
        use Opcode::*;
        Some(match value & 0x3f {
            0x00 => NopOut,
            0x01 => ScsiCommand,
            0x02 => TaskMgmtRequest,
            0x03 => LoginRequest,
            0x04 => TextRequest,
            0x05 => DataOut,
            0x06 => LogoutRequest,
            0x10 => SnackRequest,
            0x20 => NopIn,
            0x21 => ScsiResponse,
            0x22 => TaskMgmtResponse,
            0x23 => LoginResponse,
            0x24 => TextResponse,
            0x25 => DataIn,
            0x26 => LogoutResponse,
            0x31 => R2t,
            0x32 => AsyncMessage,
            0x3f => Reject,
            _ => return None,
        })
    }

    /// True for opcodes an initiator sends (RFC 7143 §11.2.1.2).
    pub fn is_initiator_opcode(self) -> bool {
        (self as u8) < 0x20
    }
}

/// Why a BHS could not be turned into a [`Pdu`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The opcode is not defined by RFC 7143 (answer: Reject, "Command not supported").
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// A field holds a value the RFC forbids.
    #[error("invalid {field}: {value:#x}")]
    InvalidField {
        /// The field's name as in RFC 7143 §11.
        field: &'static str,
        /// The offending value.
        value: u32,
    },
}

/// The 8-byte LUN field, kept raw (SAM-5 §4.6 encodings are decoded by `scsi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lun(pub [u8; 8]);

impl Lun {
    /// Encodes a LUN number below 16384 with the SAM peripheral / flat addressing method.
    pub fn from_number(number: u16) -> Lun {
        let mut raw = [0u8; 8];
        if number < 256 {
            raw[1] = number as u8;
        } else {
            raw[0] = 0x40 | ((number >> 8) as u8 & 0x3f);
            raw[1] = number as u8;
        }
        Lun(raw)
    }

    /// Decodes peripheral (00b) and flat (01b) single-level addressing; None for others.
    pub fn number(&self) -> Option<u16> {
        if self.0[2..].iter().any(|&b| b != 0) {
            return None;
        }
        match self.0[0] >> 6 {
            0 if self.0[0] == 0 => Some(self.0[1] as u16),
            1 => Some((((self.0[0] & 0x3f) as u16) << 8) | self.0[1] as u16),
            _ => None,
        }
    }
}

/// The reserved Initiator/Target Task Tag value (RFC 7143 §11.2.1.8).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// NOP-Out (RFC 7143 §11.18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NopOut {
    pub immediate: bool,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

/// SCSI Command (RFC 7143 §11.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScsiCommand {
    pub immediate: bool,
    pub final_bit: bool,
    pub read: bool,
    pub write: bool,
    /// Task attribute (0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA).
    pub attr: u8,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub expected_data_transfer_length: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    /// The first 16 CDB bytes; longer CDBs continue in an extended-CDB AHS.
    pub cdb: [u8; 16],
}

/// Task management function codes (RFC 7143 §11.5.1).
pub mod tmf {
    pub const ABORT_TASK: u8 = 1;
    pub const ABORT_TASK_SET: u8 = 2;
    pub const CLEAR_ACA: u8 = 3;
    pub const CLEAR_TASK_SET: u8 = 4;
    pub const LOGICAL_UNIT_RESET: u8 = 5;
    pub const TARGET_WARM_RESET: u8 = 6;
    pub const TARGET_COLD_RESET: u8 = 7;
    pub const TASK_REASSIGN: u8 = 8;
    /// Response: function complete.
    pub const RESP_COMPLETE: u8 = 0;
    /// Response: task does not exist.
    pub const RESP_NO_TASK: u8 = 1;
    /// Response: LUN does not exist.
    pub const RESP_NO_LUN: u8 = 2;
    /// Response: task still allegiant.
    pub const RESP_STILL_ALLEGIANT: u8 = 3;
    /// Response: task allegiance reassignment not supported.
    pub const RESP_REASSIGN_UNSUPPORTED: u8 = 4;
    /// Response: function not supported.
    pub const RESP_NOT_SUPPORTED: u8 = 5;
    /// Response: function authorization failed.
    pub const RESP_AUTH_FAILED: u8 = 6;
    /// Response: function rejected.
    pub const RESP_REJECTED: u8 = 255;
}

/// SCSI Task Management Function Request (RFC 7143 §11.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: u8,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub referenced_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

/// Login stages (RFC 7143 §11.12.3).
pub mod stage {
    pub const SECURITY: u8 = 0;
    pub const OPERATIONAL: u8 = 1;
    pub const FULL_FEATURE: u8 = 3;
}

/// Login Request (RFC 7143 §11.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoginRequest {
    pub transit: bool,
    pub continue_bit: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub initiator_task_tag: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

/// Text Request (RFC 7143 §11.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextRequest {
    pub immediate: bool,
    pub final_bit: bool,
    pub continue_bit: bool,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

/// SCSI Data-Out (RFC 7143 §11.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataOut {
    pub final_bit: bool,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub exp_stat_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

/// Logout reason codes (RFC 7143 §11.14.1).
pub mod logout {
    pub const CLOSE_SESSION: u8 = 0;
    pub const CLOSE_CONNECTION: u8 = 1;
    pub const REMOVE_CONNECTION_FOR_RECOVERY: u8 = 2;
    /// Response: connection or session closed successfully.
    pub const RESP_CLOSED: u8 = 0;
    /// Response: CID not found.
    pub const RESP_CID_NOT_FOUND: u8 = 1;
    /// Response: connection recovery is not supported.
    pub const RESP_RECOVERY_UNSUPPORTED: u8 = 2;
    /// Response: cleanup failed.
    pub const RESP_CLEANUP_FAILED: u8 = 3;
}

/// Logout Request (RFC 7143 §11.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason_code: u8,
    pub initiator_task_tag: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

/// SNACK Request (RFC 7143 §11.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnackRequest {
    pub snack_type: u8,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub exp_stat_sn: u32,
    pub beg_run: u32,
    pub run_length: u32,
}

/// NOP-In (RFC 7143 §11.19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NopIn {
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

/// SCSI Response (RFC 7143 §11.4). The data segment carries SenseLength + sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScsiResponse {
    pub bidi_overflow: bool,
    pub bidi_underflow: bool,
    pub overflow: bool,
    pub underflow: bool,
    /// iSCSI service response: 0 command completed at target, 1 target failure.
    pub response: u8,
    pub status: u8,
    pub initiator_task_tag: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
    pub bidi_read_residual_count: u32,
    pub residual_count: u32,
}

/// SCSI Task Management Function Response (RFC 7143 §11.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskMgmtResponse {
    pub response: u8,
    pub initiator_task_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

/// Login status classes (RFC 7143 §11.13.5).
pub mod login_status {
    pub const SUCCESS: u8 = 0;
    pub const REDIRECTION: u8 = 1;
    pub const INITIATOR_ERROR: u8 = 2;
    pub const TARGET_ERROR: u8 = 3;
    /// Detail (class 2): initiator error, miscellaneous.
    pub const INITIATOR_ERROR_DETAIL: u8 = 0x00;
    /// Detail (class 2): authentication failure.
    pub const AUTHENTICATION_FAILURE: u8 = 0x01;
    /// Detail (class 2): authorization failure.
    pub const AUTHORIZATION_FAILURE: u8 = 0x02;
    /// Detail (class 2): target not found.
    pub const NOT_FOUND: u8 = 0x03;
    /// Detail (class 2): target removed.
    pub const TARGET_REMOVED: u8 = 0x04;
    /// Detail (class 2): unsupported version.
    pub const UNSUPPORTED_VERSION: u8 = 0x05;
    /// Detail (class 2): too many connections.
    pub const TOO_MANY_CONNECTIONS: u8 = 0x06;
    /// Detail (class 2): missing parameter.
    pub const MISSING_PARAMETER: u8 = 0x07;
    /// Detail (class 2): can't include in session.
    pub const CANT_INCLUDE_IN_SESSION: u8 = 0x08;
    /// Detail (class 2): session type not supported.
    pub const SESSION_TYPE_NOT_SUPPORTED: u8 = 0x09;
    /// Detail (class 2): session does not exist.
    pub const SESSION_DOES_NOT_EXIST: u8 = 0x0a;
    /// Detail (class 2): invalid request during login.
    pub const INVALID_DURING_LOGIN: u8 = 0x0b;
    /// Detail (class 3): target error, miscellaneous.
    pub const TARGET_ERROR_DETAIL: u8 = 0x00;
    /// Detail (class 3): service unavailable.
    pub const SERVICE_UNAVAILABLE: u8 = 0x01;
    /// Detail (class 3): out of resources.
    pub const OUT_OF_RESOURCES: u8 = 0x02;
}

/// Login Response (RFC 7143 §11.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoginResponse {
    pub transit: bool,
    pub continue_bit: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub initiator_task_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub status_class: u8,
    pub status_detail: u8,
}

/// Text Response (RFC 7143 §11.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextResponse {
    pub final_bit: bool,
    pub continue_bit: bool,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

/// SCSI Data-In (RFC 7143 §11.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataIn {
    pub final_bit: bool,
    pub acknowledge: bool,
    pub overflow: bool,
    pub underflow: bool,
    /// S bit: the status is in this PDU (only with F).
    pub status_present: bool,
    pub status: u8,
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
    pub residual_count: u32,
}

/// Logout Response (RFC 7143 §11.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogoutResponse {
    pub response: u8,
    pub initiator_task_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
}

/// Ready To Transfer (RFC 7143 §11.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct R2t {
    pub lun: Lun,
    pub initiator_task_tag: u32,
    pub target_transfer_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub r2t_sn: u32,
    pub buffer_offset: u32,
    pub desired_data_transfer_length: u32,
}

/// Asynchronous Message (RFC 7143 §11.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AsyncMessage {
    pub lun: Lun,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub async_event: u8,
    pub async_vcode: u8,
    pub parameter1: u16,
    pub parameter2: u16,
    pub parameter3: u16,
}

/// Reject reasons (RFC 7143 §11.17.1).
pub mod reject {
    pub const DATA_DIGEST_ERROR: u8 = 0x02;
    pub const SNACK_REJECT: u8 = 0x03;
    pub const PROTOCOL_ERROR: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
    pub const IMMEDIATE_COMMAND_REJECT: u8 = 0x06;
    pub const TASK_IN_PROGRESS: u8 = 0x07;
    pub const INVALID_DATA_ACK: u8 = 0x08;
    pub const INVALID_PDU_FIELD: u8 = 0x09;
    pub const LONG_OPERATION_REJECT: u8 = 0x0a;
    pub const DEPRECATED_NEGOTIATION_RESET: u8 = 0x0b;
    pub const WAITING_FOR_LOGOUT: u8 = 0x0c;
}

/// Reject (RFC 7143 §11.17). The data segment is the rejected PDU's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reject {
    pub reason: u8,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn_or_r2t_sn: u32,
}

/// One PDU's Basic Header Segment, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pdu {
    NopOut(NopOut),
    ScsiCommand(ScsiCommand),
    TaskMgmtRequest(TaskMgmtRequest),
    LoginRequest(LoginRequest),
    TextRequest(TextRequest),
    DataOut(DataOut),
    LogoutRequest(LogoutRequest),
    SnackRequest(SnackRequest),
    NopIn(NopIn),
    ScsiResponse(ScsiResponse),
    TaskMgmtResponse(TaskMgmtResponse),
    LoginResponse(LoginResponse),
    TextResponse(TextResponse),
    DataIn(DataIn),
    LogoutResponse(LogoutResponse),
    R2t(R2t),
    AsyncMessage(AsyncMessage),
    Reject(Reject),
}

impl Pdu {
    /// The opcode this PDU is sent with.
    pub fn opcode(&self) -> Opcode {
        match self {
            Pdu::NopOut(_) => Opcode::NopOut,
            Pdu::ScsiCommand(_) => Opcode::ScsiCommand,
            Pdu::TaskMgmtRequest(_) => Opcode::TaskMgmtRequest,
            Pdu::LoginRequest(_) => Opcode::LoginRequest,
            Pdu::TextRequest(_) => Opcode::TextRequest,
            Pdu::DataOut(_) => Opcode::DataOut,
            Pdu::LogoutRequest(_) => Opcode::LogoutRequest,
            Pdu::SnackRequest(_) => Opcode::SnackRequest,
            Pdu::NopIn(_) => Opcode::NopIn,
            Pdu::ScsiResponse(_) => Opcode::ScsiResponse,
            Pdu::TaskMgmtResponse(_) => Opcode::TaskMgmtResponse,
            Pdu::LoginResponse(_) => Opcode::LoginResponse,
            Pdu::TextResponse(_) => Opcode::TextResponse,
            Pdu::DataIn(_) => Opcode::DataIn,
            Pdu::LogoutResponse(_) => Opcode::LogoutResponse,
            Pdu::R2t(_) => Opcode::R2t,
            Pdu::AsyncMessage(_) => Opcode::AsyncMessage,
            Pdu::Reject(_) => Opcode::Reject,
        }
    }

    /// Parses a BHS. Lengths (TotalAHSLength, DataSegmentLength) are framing
    /// and are read by the decoder, not here.
    pub fn parse(raw: &[u8; BHS_LEN]) -> Result<Pdu, ParseError> {
        let b = Bhs(raw);
        let opcode = Opcode::from_u8(raw[0]).ok_or(ParseError::UnknownOpcode(raw[0] & 0x3f))?;
        let immediate = raw[0] & 0x40 != 0;
        let flags = raw[1];
        let f = flags & 0x80 != 0;
        Ok(match opcode {
            Opcode::NopOut => Pdu::NopOut(NopOut {
                immediate,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                cmd_sn: b.u32(field::SN_24),
                exp_stat_sn: b.u32(field::SN_28),
            }),
            Opcode::ScsiCommand => {
                let mut cdb = [0u8; 16];
                cdb.copy_from_slice(&raw[field::CDB]);
                Pdu::ScsiCommand(ScsiCommand {
                    immediate,
                    final_bit: f,
                    read: flags & 0x40 != 0,
                    write: flags & 0x20 != 0,
                    attr: flags & 0x07,
                    lun: b.lun(),
                    initiator_task_tag: b.u32(field::ITT),
                    expected_data_transfer_length: b.u32(field::W20),
                    cmd_sn: b.u32(field::SN_24),
                    exp_stat_sn: b.u32(field::SN_28),
                    cdb,
                })
            }
            Opcode::TaskMgmtRequest => Pdu::TaskMgmtRequest(TaskMgmtRequest {
                immediate,
                function: flags & 0x7f,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                referenced_task_tag: b.u32(field::W20),
                cmd_sn: b.u32(field::SN_24),
                exp_stat_sn: b.u32(field::SN_28),
                ref_cmd_sn: b.u32(field::SN_32),
                exp_data_sn: b.u32(field::SN_36),
            }),
            Opcode::LoginRequest => {
                let csg = (flags >> 2) & 0x03;
                let nsg = flags & 0x03;
                if csg == 2 {
                    return Err(ParseError::InvalidField {
                        field: "CSG",
                        value: csg as u32,
                    });
                }
                Pdu::LoginRequest(LoginRequest {
                    transit: f,
                    continue_bit: flags & 0x40 != 0,
                    csg,
                    nsg,
                    version_max: raw[2],
                    version_min: raw[3],
                    isid: b.isid(),
                    tsih: b.u16(field::TSIH),
                    initiator_task_tag: b.u32(field::ITT),
                    cid: b.u16(field::CID),
                    cmd_sn: b.u32(field::SN_24),
                    exp_stat_sn: b.u32(field::SN_28),
                })
            }
            Opcode::TextRequest => Pdu::TextRequest(TextRequest {
                immediate,
                final_bit: f,
                continue_bit: flags & 0x40 != 0,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                cmd_sn: b.u32(field::SN_24),
                exp_stat_sn: b.u32(field::SN_28),
            }),
            Opcode::DataOut => Pdu::DataOut(DataOut {
                final_bit: f,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                exp_stat_sn: b.u32(field::SN_28),
                data_sn: b.u32(field::SN_36),
                buffer_offset: b.u32(field::W40),
            }),
            Opcode::LogoutRequest => Pdu::LogoutRequest(LogoutRequest {
                immediate,
                reason_code: flags & 0x7f,
                initiator_task_tag: b.u32(field::ITT),
                cid: b.u16(field::CID),
                cmd_sn: b.u32(field::SN_24),
                exp_stat_sn: b.u32(field::SN_28),
            }),
            Opcode::SnackRequest => Pdu::SnackRequest(SnackRequest {
                snack_type: flags & 0x0f,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                exp_stat_sn: b.u32(field::SN_28),
                beg_run: b.u32(field::W40),
                run_length: b.u32(field::W44),
            }),
            Opcode::NopIn => Pdu::NopIn(NopIn {
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
            }),
            Opcode::ScsiResponse => Pdu::ScsiResponse(ScsiResponse {
                bidi_overflow: flags & 0x10 != 0,
                bidi_underflow: flags & 0x08 != 0,
                overflow: flags & 0x04 != 0,
                underflow: flags & 0x02 != 0,
                response: raw[2],
                status: raw[3],
                initiator_task_tag: b.u32(field::ITT),
                snack_tag: b.u32(field::W20),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                exp_data_sn: b.u32(field::SN_36),
                bidi_read_residual_count: b.u32(field::W40),
                residual_count: b.u32(field::W44),
            }),
            Opcode::TaskMgmtResponse => Pdu::TaskMgmtResponse(TaskMgmtResponse {
                response: raw[2],
                initiator_task_tag: b.u32(field::ITT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
            }),
            Opcode::LoginResponse => Pdu::LoginResponse(LoginResponse {
                transit: f,
                continue_bit: flags & 0x40 != 0,
                csg: (flags >> 2) & 0x03,
                nsg: flags & 0x03,
                version_max: raw[2],
                version_active: raw[3],
                isid: b.isid(),
                tsih: b.u16(field::TSIH),
                initiator_task_tag: b.u32(field::ITT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                status_class: raw[36],
                status_detail: raw[37],
            }),
            Opcode::TextResponse => Pdu::TextResponse(TextResponse {
                final_bit: f,
                continue_bit: flags & 0x40 != 0,
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
            }),
            Opcode::DataIn => Pdu::DataIn(DataIn {
                final_bit: f,
                acknowledge: flags & 0x40 != 0,
                overflow: flags & 0x04 != 0,
                underflow: flags & 0x02 != 0,
                status_present: flags & 0x01 != 0,
                status: raw[3],
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                data_sn: b.u32(field::SN_36),
                buffer_offset: b.u32(field::W40),
                residual_count: b.u32(field::W44),
            }),
            Opcode::LogoutResponse => Pdu::LogoutResponse(LogoutResponse {
                response: raw[2],
                initiator_task_tag: b.u32(field::ITT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                time2wait: b.u16(field::W40),
                time2retain: b.u16(field::W42),
            }),
            Opcode::R2t => Pdu::R2t(R2t {
                lun: b.lun(),
                initiator_task_tag: b.u32(field::ITT),
                target_transfer_tag: b.u32(field::TTT),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                r2t_sn: b.u32(field::SN_36),
                buffer_offset: b.u32(field::W40),
                desired_data_transfer_length: b.u32(field::W44),
            }),
            Opcode::AsyncMessage => Pdu::AsyncMessage(AsyncMessage {
                lun: b.lun(),
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                async_event: raw[36],
                async_vcode: raw[37],
                parameter1: b.u16(38),
                parameter2: b.u16(field::W40),
                parameter3: b.u16(field::W42),
            }),
            Opcode::Reject => Pdu::Reject(Reject {
                reason: raw[2],
                stat_sn: b.u32(field::SN_24),
                exp_cmd_sn: b.u32(field::SN_28),
                max_cmd_sn: b.u32(field::SN_32),
                data_sn_or_r2t_sn: b.u32(field::SN_36),
            }),
        })
    }

    /// Writes this PDU's BHS, with the given AHS length (in 4-byte words) and
    /// data segment length (unpadded bytes, at most 2^24 - 1).
    pub fn emit(&self, total_ahs_words: u8, data_segment_length: u32, out: &mut [u8; BHS_LEN]) {
        debug_assert!(data_segment_length < 1 << 24);
        *out = [0u8; BHS_LEN];
        out[0] = self.opcode() as u8;
        out[4] = total_ahs_words;
        out[5..8].copy_from_slice(&data_segment_length.to_be_bytes()[1..]);
        let mut w = crate::bhs::BhsMut(out);
        let bit = |v: bool, mask: u8| if v { mask } else { 0 };
        match self {
            Pdu::NopOut(p) => {
                w.0[0] |= bit(p.immediate, 0x40);
                w.0[1] = 0x80;
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
            }
            Pdu::ScsiCommand(p) => {
                w.0[0] |= bit(p.immediate, 0x40);
                w.0[1] = bit(p.final_bit, 0x80)
                    | bit(p.read, 0x40)
                    | bit(p.write, 0x20)
                    | (p.attr & 0x07);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::W20, p.expected_data_transfer_length);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
                w.0[field::CDB].copy_from_slice(&p.cdb);
            }
            Pdu::TaskMgmtRequest(p) => {
                w.0[0] |= bit(p.immediate, 0x40);
                w.0[1] = 0x80 | (p.function & 0x7f);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::W20, p.referenced_task_tag);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
                w.u32(field::SN_32, p.ref_cmd_sn);
                w.u32(field::SN_36, p.exp_data_sn);
            }
            Pdu::LoginRequest(p) => {
                // RFC 7143 §11.12: the immediate bit is always 1 on a Login Request.
                w.0[0] |= 0x40;
                w.0[1] = bit(p.transit, 0x80)
                    | bit(p.continue_bit, 0x40)
                    | ((p.csg & 3) << 2)
                    | (p.nsg & 3);
                w.0[2] = p.version_max;
                w.0[3] = p.version_min;
                w.0[8..14].copy_from_slice(&p.isid);
                w.u16(field::TSIH, p.tsih);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u16(field::CID, p.cid);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
            }
            Pdu::TextRequest(p) => {
                w.0[0] |= bit(p.immediate, 0x40);
                w.0[1] = bit(p.final_bit, 0x80) | bit(p.continue_bit, 0x40);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
            }
            Pdu::DataOut(p) => {
                w.0[1] = bit(p.final_bit, 0x80);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_28, p.exp_stat_sn);
                w.u32(field::SN_36, p.data_sn);
                w.u32(field::W40, p.buffer_offset);
            }
            Pdu::LogoutRequest(p) => {
                w.0[0] |= bit(p.immediate, 0x40);
                w.0[1] = 0x80 | (p.reason_code & 0x7f);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u16(field::CID, p.cid);
                w.u32(field::SN_24, p.cmd_sn);
                w.u32(field::SN_28, p.exp_stat_sn);
            }
            Pdu::SnackRequest(p) => {
                w.0[1] = 0x80 | (p.snack_type & 0x0f);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_28, p.exp_stat_sn);
                w.u32(field::W40, p.beg_run);
                w.u32(field::W44, p.run_length);
            }
            Pdu::NopIn(p) => {
                w.0[1] = 0x80;
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
            }
            Pdu::ScsiResponse(p) => {
                w.0[1] = 0x80
                    | bit(p.bidi_overflow, 0x10)
                    | bit(p.bidi_underflow, 0x08)
                    | bit(p.overflow, 0x04)
                    | bit(p.underflow, 0x02);
                w.0[2] = p.response;
                w.0[3] = p.status;
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::W20, p.snack_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.u32(field::SN_36, p.exp_data_sn);
                w.u32(field::W40, p.bidi_read_residual_count);
                w.u32(field::W44, p.residual_count);
            }
            Pdu::TaskMgmtResponse(p) => {
                w.0[1] = 0x80;
                w.0[2] = p.response;
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
            }
            Pdu::LoginResponse(p) => {
                w.0[1] = bit(p.transit, 0x80)
                    | bit(p.continue_bit, 0x40)
                    | ((p.csg & 3) << 2)
                    | (p.nsg & 3);
                w.0[2] = p.version_max;
                w.0[3] = p.version_active;
                w.0[8..14].copy_from_slice(&p.isid);
                w.u16(field::TSIH, p.tsih);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.0[36] = p.status_class;
                w.0[37] = p.status_detail;
            }
            Pdu::TextResponse(p) => {
                w.0[1] = bit(p.final_bit, 0x80) | bit(p.continue_bit, 0x40);
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
            }
            Pdu::DataIn(p) => {
                w.0[1] = bit(p.final_bit, 0x80)
                    | bit(p.acknowledge, 0x40)
                    | bit(p.overflow, 0x04)
                    | bit(p.underflow, 0x02)
                    | bit(p.status_present, 0x01);
                w.0[3] = if p.status_present { p.status } else { 0 };
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.u32(field::SN_36, p.data_sn);
                w.u32(field::W40, p.buffer_offset);
                w.u32(field::W44, p.residual_count);
            }
            Pdu::LogoutResponse(p) => {
                w.0[1] = 0x80;
                w.0[2] = p.response;
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.u16(field::W40, p.time2wait);
                w.u16(field::W42, p.time2retain);
            }
            Pdu::R2t(p) => {
                w.0[1] = 0x80;
                w.lun(p.lun);
                w.u32(field::ITT, p.initiator_task_tag);
                w.u32(field::TTT, p.target_transfer_tag);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.u32(field::SN_36, p.r2t_sn);
                w.u32(field::W40, p.buffer_offset);
                w.u32(field::W44, p.desired_data_transfer_length);
            }
            Pdu::AsyncMessage(p) => {
                w.0[1] = 0x80;
                w.lun(p.lun);
                w.u32(field::ITT, RESERVED_TAG);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.0[36] = p.async_event;
                w.0[37] = p.async_vcode;
                w.u16(38, p.parameter1);
                w.u16(field::W40, p.parameter2);
                w.u16(field::W42, p.parameter3);
            }
            Pdu::Reject(p) => {
                w.0[1] = 0x80;
                w.0[2] = p.reason;
                w.u32(field::ITT, RESERVED_TAG);
                w.u32(field::SN_24, p.stat_sn);
                w.u32(field::SN_28, p.exp_cmd_sn);
                w.u32(field::SN_32, p.max_cmd_sn);
                w.u32(field::SN_36, p.data_sn_or_r2t_sn);
            }
        }
    }

    /// The Initiator Task Tag, where the PDU has one.
    pub fn initiator_task_tag(&self) -> u32 {
        match self {
            Pdu::NopOut(p) => p.initiator_task_tag,
            Pdu::ScsiCommand(p) => p.initiator_task_tag,
            Pdu::TaskMgmtRequest(p) => p.initiator_task_tag,
            Pdu::LoginRequest(p) => p.initiator_task_tag,
            Pdu::TextRequest(p) => p.initiator_task_tag,
            Pdu::DataOut(p) => p.initiator_task_tag,
            Pdu::LogoutRequest(p) => p.initiator_task_tag,
            Pdu::SnackRequest(p) => p.initiator_task_tag,
            Pdu::NopIn(p) => p.initiator_task_tag,
            Pdu::ScsiResponse(p) => p.initiator_task_tag,
            Pdu::TaskMgmtResponse(p) => p.initiator_task_tag,
            Pdu::LoginResponse(p) => p.initiator_task_tag,
            Pdu::TextResponse(p) => p.initiator_task_tag,
            Pdu::DataIn(p) => p.initiator_task_tag,
            Pdu::LogoutResponse(p) => p.initiator_task_tag,
            Pdu::R2t(p) => p.initiator_task_tag,
            Pdu::AsyncMessage(_) | Pdu::Reject(_) => RESERVED_TAG,
        }
    }
}
