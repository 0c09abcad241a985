//! The typed values of the BHS fields that every PDU kind shares (RFC 7143
//! §11.2.1): the opcode, the LUN, the reserved tag, and why a header is
//! refused. They sit below both the checked view ([`crate::bhs`]), which
//! reads and writes them, and the PDU kinds ([`crate::pdu`]), which hold
//! them; `pdu` hands them on under its own path.

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

/// Why a BHS could not be turned into a [`Pdu`](crate::pdu::Pdu).
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
    /// Where byte 0 holds the address method: its top two bits.
    const ADDRESS_METHOD_SHIFT: u32 = 6;
    /// Address method 00b, peripheral device addressing.
    const PERIPHERAL: u8 = 0b00;
    /// Address method 01b, flat space addressing.
    const FLAT_SPACE: u8 = 0b01;
    /// The LUN's top six bits, in byte 0 beside the flat space method.
    const FLAT_SPACE_HIGH_BITS: u8 = 0x3f;

    /// Encodes a LUN number below 16384 with the SAM peripheral / flat addressing method.
    pub fn from_number(number: u16) -> Lun {
        let mut raw = [0u8; 8];
        let [high, low] = number.to_be_bytes();
        if number >= 256 {
            raw[0] = (Self::FLAT_SPACE << Self::ADDRESS_METHOD_SHIFT)
                | (high & Self::FLAT_SPACE_HIGH_BITS);
        }
        raw[1] = low;
        Lun(raw)
    }

    /// Decodes peripheral (00b) and flat (01b) single-level addressing; None for others.
    #[inline]
    pub fn number(&self) -> Option<u16> {
        if self.0[2..].iter().any(|&b| b != 0) {
            return None;
        }
        let [byte0, byte1] = [self.0[0], self.0[1]];
        match byte0 >> Self::ADDRESS_METHOD_SHIFT {
            // The peripheral method's bus identifier must be 0: one level.
            Self::PERIPHERAL if byte0 == 0 => Some(u16::from(byte1)),
            Self::FLAT_SPACE => Some(u16::from_be_bytes([
                byte0 & Self::FLAT_SPACE_HIGH_BITS,
                byte1,
            ])),
            _ => None,
        }
    }
}

/// The reserved Initiator/Target Task Tag value (RFC 7143 §11.2.1.8).
pub const RESERVED_TAG: u32 = 0xffff_ffff;
