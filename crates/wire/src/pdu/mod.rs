//! Typed representations of every PDU of RFC 7143 §11.
//!
//! Each PDU kind is a plain struct holding its Basic Header Segment fields
//! (never the data segment, which stays borrowed from the receive buffer),
//! as smoltcp's `Repr`s are: it reads itself from a [`Bhs`] view (`parse`)
//! and writes itself into one (`emit`), through the view's accessors, so
//! that no offset or mask is written anywhere but in [`crate::bhs`]. One
//! file holds each family of PDUs, the request beside its response, with
//! the codes of their fields. [`Pdu`] is any of them: [`Pdu::parse`] reads
//! the opcode and hands the BHS to its kind, [`Pdu::emit`] zeroes a BHS,
//! has the kind write itself and adds the framing lengths.

use crate::bhs::{Bhs, BHS_LEN};

mod async_message;
mod data;
mod login;
pub mod logout;
mod nop;
pub mod reject;
mod scsi;
mod snack;
mod text;
pub mod tmf;

pub use crate::fields::{Lun, Opcode, ParseError, RESERVED_TAG};
pub use async_message::{AsyncEvent, AsyncMessage};
pub use data::{DataIn, DataOut, R2t};
pub use login::{login_status, stage, LoginRequest, LoginResponse};
pub use logout::{LogoutReason, LogoutRequest, LogoutResponse, LogoutResponseCode};
pub use nop::{NopIn, NopOut};
pub use reject::{Reject, RejectReason};
pub use scsi::{ScsiCommand, ScsiResponse};
pub use snack::{SnackRequest, SnackType};
pub use text::{TextRequest, TextResponse};
pub use tmf::{TaskMgmtRequest, TaskMgmtResponse, TmfFunction, TmfResponse};

/// One PDU's Basic Header Segment, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pdu {
    /// NOP-Out (RFC 7143 §11.18).
    NopOut(NopOut),
    /// SCSI Command (RFC 7143 §11.3).
    ScsiCommand(ScsiCommand),
    /// SCSI Task Management Function Request (RFC 7143 §11.5).
    TaskMgmtRequest(TaskMgmtRequest),
    /// Login Request (RFC 7143 §11.12).
    LoginRequest(LoginRequest),
    /// Text Request (RFC 7143 §11.10).
    TextRequest(TextRequest),
    /// SCSI Data-Out (RFC 7143 §11.7).
    DataOut(DataOut),
    /// Logout Request (RFC 7143 §11.14).
    LogoutRequest(LogoutRequest),
    /// SNACK Request (RFC 7143 §11.16).
    SnackRequest(SnackRequest),
    /// NOP-In (RFC 7143 §11.19).
    NopIn(NopIn),
    /// SCSI Response (RFC 7143 §11.4).
    ScsiResponse(ScsiResponse),
    /// SCSI Task Management Function Response (RFC 7143 §11.6).
    TaskMgmtResponse(TaskMgmtResponse),
    /// Login Response (RFC 7143 §11.13).
    LoginResponse(LoginResponse),
    /// Text Response (RFC 7143 §11.11).
    TextResponse(TextResponse),
    /// SCSI Data-In (RFC 7143 §11.7).
    DataIn(DataIn),
    /// Logout Response (RFC 7143 §11.15).
    LogoutResponse(LogoutResponse),
    /// Ready To Transfer (RFC 7143 §11.8).
    R2t(R2t),
    /// Asynchronous Message (RFC 7143 §11.9).
    AsyncMessage(AsyncMessage),
    /// Reject (RFC 7143 §11.17).
    Reject(Reject),
}

impl Pdu {
    /// The opcode this PDU is sent with.
    pub fn opcode(&self) -> Opcode {
        match self {
            Pdu::NopOut(_) => NopOut::OPCODE,
            Pdu::ScsiCommand(_) => ScsiCommand::OPCODE,
            Pdu::TaskMgmtRequest(_) => TaskMgmtRequest::OPCODE,
            Pdu::LoginRequest(_) => LoginRequest::OPCODE,
            Pdu::TextRequest(_) => TextRequest::OPCODE,
            Pdu::DataOut(_) => DataOut::OPCODE,
            Pdu::LogoutRequest(_) => LogoutRequest::OPCODE,
            Pdu::SnackRequest(_) => SnackRequest::OPCODE,
            Pdu::NopIn(_) => NopIn::OPCODE,
            Pdu::ScsiResponse(_) => ScsiResponse::OPCODE,
            Pdu::TaskMgmtResponse(_) => TaskMgmtResponse::OPCODE,
            Pdu::LoginResponse(_) => LoginResponse::OPCODE,
            Pdu::TextResponse(_) => TextResponse::OPCODE,
            Pdu::DataIn(_) => DataIn::OPCODE,
            Pdu::LogoutResponse(_) => LogoutResponse::OPCODE,
            Pdu::R2t(_) => R2t::OPCODE,
            Pdu::AsyncMessage(_) => AsyncMessage::OPCODE,
            Pdu::Reject(_) => Reject::OPCODE,
        }
    }

    /// Parses a BHS. Lengths (TotalAHSLength, DataSegmentLength) are framing
    /// and are read by the decoder, not here.
    pub fn parse(raw: &[u8; BHS_LEN]) -> Result<Pdu, ParseError> {
        let bhs = Bhs::new_unchecked(raw);
        Ok(match bhs.opcode()? {
            Opcode::NopOut => Pdu::NopOut(NopOut::parse(&bhs)),
            Opcode::ScsiCommand => Pdu::ScsiCommand(ScsiCommand::parse(&bhs)),
            Opcode::TaskMgmtRequest => Pdu::TaskMgmtRequest(TaskMgmtRequest::parse(&bhs)),
            Opcode::LoginRequest => Pdu::LoginRequest(LoginRequest::parse(&bhs)?),
            Opcode::TextRequest => Pdu::TextRequest(TextRequest::parse(&bhs)),
            Opcode::DataOut => Pdu::DataOut(DataOut::parse(&bhs)),
            Opcode::LogoutRequest => Pdu::LogoutRequest(LogoutRequest::parse(&bhs)),
            Opcode::SnackRequest => Pdu::SnackRequest(SnackRequest::parse(&bhs)),
            Opcode::NopIn => Pdu::NopIn(NopIn::parse(&bhs)),
            Opcode::ScsiResponse => Pdu::ScsiResponse(ScsiResponse::parse(&bhs)),
            Opcode::TaskMgmtResponse => Pdu::TaskMgmtResponse(TaskMgmtResponse::parse(&bhs)),
            Opcode::LoginResponse => Pdu::LoginResponse(LoginResponse::parse(&bhs)),
            Opcode::TextResponse => Pdu::TextResponse(TextResponse::parse(&bhs)),
            Opcode::DataIn => Pdu::DataIn(DataIn::parse(&bhs)),
            Opcode::LogoutResponse => Pdu::LogoutResponse(LogoutResponse::parse(&bhs)),
            Opcode::R2t => Pdu::R2t(R2t::parse(&bhs)),
            Opcode::AsyncMessage => Pdu::AsyncMessage(AsyncMessage::parse(&bhs)),
            Opcode::Reject => Pdu::Reject(Reject::parse(&bhs)),
        })
    }

    /// Writes this PDU's BHS, with the given AHS length (in 4-byte words) and
    /// data segment length (unpadded bytes, at most 2^24 - 1).
    pub fn emit(&self, total_ahs_words: u8, data_segment_length: u32, out: &mut [u8; BHS_LEN]) {
        // Every kind writes its own fields only: reserved bytes stay zero.
        *out = [0u8; BHS_LEN];
        let mut bhs = Bhs::new_unchecked(out);
        match self {
            Pdu::NopOut(p) => p.emit(&mut bhs),
            Pdu::ScsiCommand(p) => p.emit(&mut bhs),
            Pdu::TaskMgmtRequest(p) => p.emit(&mut bhs),
            Pdu::LoginRequest(p) => p.emit(&mut bhs),
            Pdu::TextRequest(p) => p.emit(&mut bhs),
            Pdu::DataOut(p) => p.emit(&mut bhs),
            Pdu::LogoutRequest(p) => p.emit(&mut bhs),
            Pdu::SnackRequest(p) => p.emit(&mut bhs),
            Pdu::NopIn(p) => p.emit(&mut bhs),
            Pdu::ScsiResponse(p) => p.emit(&mut bhs),
            Pdu::TaskMgmtResponse(p) => p.emit(&mut bhs),
            Pdu::LoginResponse(p) => p.emit(&mut bhs),
            Pdu::TextResponse(p) => p.emit(&mut bhs),
            Pdu::DataIn(p) => p.emit(&mut bhs),
            Pdu::LogoutResponse(p) => p.emit(&mut bhs),
            Pdu::R2t(p) => p.emit(&mut bhs),
            Pdu::AsyncMessage(p) => p.emit(&mut bhs),
            Pdu::Reject(p) => p.emit(&mut bhs),
        }
        bhs.set_total_ahs_length(total_ahs_words);
        bhs.set_data_segment_length(data_segment_length);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_numbers_round_trip_through_both_addressing_methods() {
        assert_eq!(Lun::from_number(5).0, [0, 5, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Lun::from_number(300).0, [0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
        for number in 0..16384 {
            assert_eq!(Lun::from_number(number).number(), Some(number));
        }
        // A bus identifier, another method, or a second level: not one number.
        assert_eq!(Lun([0x01, 5, 0, 0, 0, 0, 0, 0]).number(), None);
        assert_eq!(Lun([0x80, 5, 0, 0, 0, 0, 0, 0]).number(), None);
        assert_eq!(Lun([0, 5, 0, 1, 0, 0, 0, 0]).number(), None);
    }
}

#[cfg(test)]
mod code_tests {
    use super::*;

    /// Every byte of every typed code comes back as it went, and a code
    /// is `Unknown` exactly when the RFC does not name it.
    #[test]
    fn every_code_of_every_kind_round_trips() {
        fn check<C: Copy + From<u8> + Into<u8>>(name: &str, known: &[u8], is_known: fn(C) -> bool) {
            for byte in 0..=u8::MAX {
                let code = C::from(byte);
                assert_eq!(code.into(), byte, "{name} {byte}");
                assert_eq!(is_known(code), known.contains(&byte), "{name} {byte}");
            }
        }
        check::<TmfFunction>("function", &[1, 2, 3, 4, 5, 6, 7, 8], TmfFunction::is_known);
        check::<TmfResponse>(
            "tmf response",
            &[0, 1, 2, 3, 4, 5, 6, 255],
            TmfResponse::is_known,
        );
        check::<RejectReason>(
            "reject",
            &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            RejectReason::is_known,
        );
        check::<LogoutReason>("logout reason", &[0, 1, 2], LogoutReason::is_known);
        check::<LogoutResponseCode>(
            "logout response",
            &[0, 1, 2, 3],
            LogoutResponseCode::is_known,
        );
        check::<SnackType>("snack", &[0, 1, 2, 3], SnackType::is_known);
        check::<AsyncEvent>(
            "async event",
            &[0, 1, 2, 3, 4, 5, 255],
            AsyncEvent::is_known,
        );
    }

    /// A Reject whose reason no RFC names is read, and written back the
    /// same, rather than refused: a receiver still learns the PDU it
    /// answers.
    #[test]
    fn a_pdu_with_an_unknown_code_round_trips_through_bytes() {
        let pdu = Pdu::Reject(Reject {
            reason: RejectReason::from_u8(0x77),
            stat_sn: 3,
            ..Default::default()
        });
        let mut bhs = [0u8; BHS_LEN];
        pdu.emit(0, 0, &mut bhs);
        let parsed = Pdu::parse(&bhs).expect("parses");
        assert_eq!(parsed, pdu);
        assert_eq!(bhs[2], 0x77);
    }
}
