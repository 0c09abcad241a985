//! The Basic Header Segment (RFC 7143 §11.2.1): a checked view over its 48
//! bytes that reads and writes every field by its RFC 7143 name.
//!
//! [`Bhs`] wraps any buffer of at least [`BHS_LEN`] bytes, as smoltcp's
//! `Packet` wraps a TCP header: [`Bhs::new_checked`] refuses a shorter
//! one, and a `&[u8; BHS_LEN]` (what the frame decoder hands out) can never
//! be short. Each byte range is named once, in the private `field` module,
//! and each flag bit once, in `flag`; the accessors below are the only code
//! that knows an offset or a mask.
//!
//! Most bytes past the first eight mean something different in each PDU
//! kind: bytes 20..24 are the Target Transfer Tag of a Data-Out and the
//! Expected Data Transfer Length of a SCSI Command. The view names each
//! field as its figure in RFC 7143 §11 does and does not know which
//! opcode has which; the PDU kinds in [`crate::pdu`] read and write the
//! fields of their own figure.

use crate::fields::{Lun, Opcode, ParseError};

/// Length of the Basic Header Segment in bytes (RFC 7143 §11.2.1).
pub const BHS_LEN: usize = 48;

/// Why a buffer is not a BHS: it is shorter than [`BHS_LEN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a BHS is {BHS_LEN} bytes, the buffer {len}")]
pub struct Truncated {
    /// The buffer's length.
    pub len: usize,
}

/// Byte ranges of the BHS's fields, by the names of RFC 7143 §11's figures.
mod field {
    use core::ops::Range;

    /// A field's bytes.
    pub type Field = Range<usize>;

    // Common to every PDU (RFC 7143 §11.2.1).
    /// The reserved bit, the I bit and the opcode (§11.2.1.1, §11.2.1.2).
    pub const OPCODE: usize = 0;
    /// The F bit and the opcode-specific flags (§11.2.1.3, §11.2.1.4).
    pub const FLAGS: usize = 1;
    /// TotalAHSLength, in 4-byte words (§11.2.1.5).
    pub const TOTAL_AHS_LENGTH: usize = 4;
    /// DataSegmentLength, in bytes without padding (§11.2.1.6).
    pub const DATA_SEGMENT_LENGTH: Field = 5..8;
    /// Logical Unit Number (§11.2.1.7).
    pub const LUN: Field = 8..16;
    /// Initiator Task Tag (§11.2.1.8).
    pub const INITIATOR_TASK_TAG: Field = 16..20;

    // Bytes 2 and 3.
    /// Response of a SCSI Response, a Task Management Function Response
    /// and a Logout Response (§11.4.3, §11.6.1, §11.15.1).
    pub const RESPONSE: usize = 2;
    /// Reason of a Reject (§11.17.1).
    pub const REASON: usize = 2;
    /// Version-max of a Login Request and a Login Response (§11.12.4, §11.13.1).
    pub const VERSION_MAX: usize = 2;
    /// Status of a SCSI Response and a Data-In (§11.4.2, §11.7.3).
    pub const STATUS: usize = 3;
    /// Version-min of a Login Request (§11.12.4).
    pub const VERSION_MIN: usize = 3;
    /// Version-active of a Login Response (§11.13.2).
    pub const VERSION_ACTIVE: usize = 3;

    // Bytes 8..16 of the login PDUs, in the LUN's place.
    /// ISID (§11.12.5).
    pub const ISID: Field = 8..14;
    /// TSIH (§11.12.6, §11.13.3).
    pub const TSIH: Field = 14..16;

    // Bytes 20..24.
    /// Target Transfer Tag (§11.7.4, §11.8.5, §11.10.4, §11.16.5, §11.18.2).
    pub const TARGET_TRANSFER_TAG: Field = 20..24;
    /// Expected Data Transfer Length of a SCSI Command (§11.3.4).
    pub const EXPECTED_DATA_TRANSFER_LENGTH: Field = 20..24;
    /// Referenced Task Tag of a Task Management Function Request (§11.5.4).
    pub const REFERENCED_TASK_TAG: Field = 20..24;
    /// SNACK Tag of a SCSI Response (§11.4.4).
    pub const SNACK_TAG: Field = 20..24;
    /// CID of a Login Request and a Logout Request (§11.12.7, §11.14.3).
    pub const CID: Field = 20..22;

    // Bytes 24..36: the sequence numbers.
    /// CmdSN of a request (§11.3.2).
    pub const CMD_SN: Field = 24..28;
    /// StatSN of a response (§11.4.9).
    pub const STAT_SN: Field = 24..28;
    /// ExpStatSN of a request (§11.3.3).
    pub const EXP_STAT_SN: Field = 28..32;
    /// ExpCmdSN of a response (§11.4.10).
    pub const EXP_CMD_SN: Field = 28..32;
    /// MaxCmdSN of a response (§11.4.11).
    pub const MAX_CMD_SN: Field = 32..36;
    /// RefCmdSN of a Task Management Function Request (§11.5.5).
    pub const REF_CMD_SN: Field = 32..36;
    /// The CDB's first 16 bytes, in a SCSI Command (§11.3.5).
    pub const CDB: Field = 32..48;

    // Bytes 36..40.
    /// ExpDataSN of a SCSI Response and a TMF Request (§11.4.8, §11.5.6).
    pub const EXP_DATA_SN: Field = 36..40;
    /// DataSN of a Data-Out and a Data-In (§11.7.5).
    pub const DATA_SN: Field = 36..40;
    /// R2TSN of an R2T (§11.8.2).
    pub const R2T_SN: Field = 36..40;
    /// DataSN/R2TSN of a Reject (§11.17.2).
    pub const DATA_SN_OR_R2T_SN: Field = 36..40;
    /// Status-Class of a Login Response (§11.13.5).
    pub const STATUS_CLASS: usize = 36;
    /// Status-Detail of a Login Response (§11.13.5).
    pub const STATUS_DETAIL: usize = 37;
    /// AsyncEvent of an Asynchronous Message (§11.9.1).
    pub const ASYNC_EVENT: usize = 36;
    /// AsyncVCode of an Asynchronous Message (§11.9.2).
    pub const ASYNC_VCODE: usize = 37;
    /// Parameter1 of an Asynchronous Message (§11.9).
    pub const PARAMETER1: Field = 38..40;

    // Bytes 40..48.
    /// Buffer Offset of a Data-Out, a Data-In and an R2T (§11.7.6, §11.8.4).
    pub const BUFFER_OFFSET: Field = 40..44;
    /// BegRun of a SNACK Request (§11.16.6).
    pub const BEG_RUN: Field = 40..44;
    /// Bidirectional Read Residual Count of a SCSI Response (§11.4.6).
    pub const BIDI_READ_RESIDUAL_COUNT: Field = 40..44;
    /// Time2Wait of a Logout Response (§11.15.3).
    pub const TIME2WAIT: Field = 40..42;
    /// Time2Retain of a Logout Response (§11.15.4).
    pub const TIME2RETAIN: Field = 42..44;
    /// Parameter2 of an Asynchronous Message (§11.9).
    pub const PARAMETER2: Field = 40..42;
    /// Parameter3 of an Asynchronous Message (§11.9).
    pub const PARAMETER3: Field = 42..44;
    /// Residual Count of a SCSI Response and a Data-In (§11.4.5, §11.7.3).
    pub const RESIDUAL_COUNT: Field = 44..48;
    /// Desired Data Transfer Length of an R2T (§11.8.4).
    pub const DESIRED_DATA_TRANSFER_LENGTH: Field = 44..48;
    /// RunLength of a SNACK Request (§11.16.7).
    pub const RUN_LENGTH: Field = 44..48;
}

/// Bits of bytes 0 and 1 (RFC 7143 §11.2.1 and each PDU's "Flags").
mod flag {
    // Byte 0.
    /// I: an immediate delivery (§11.2.1.1).
    pub const IMMEDIATE: u8 = 0x40;
    /// The opcode (§11.2.1.2).
    pub const OPCODE: u8 = 0x3f;

    // Byte 1.
    /// F: the last PDU of a sequence (§11.2.1.3).
    pub const FINAL: u8 = 0x80;
    /// T: the initiator or target would move to the next stage (§11.12.1, §11.13.6).
    pub const TRANSIT: u8 = 0x80;
    /// C: the text is not complete (§11.10.2, §11.11.2, §11.12.2, §11.13.7).
    pub const CONTINUE: u8 = 0x40;
    /// R: the command reads (§11.3.1).
    pub const READ: u8 = 0x40;
    /// W: the command writes (§11.3.1).
    pub const WRITE: u8 = 0x20;
    /// ATTR: the task attribute (§11.3.1).
    pub const TASK_ATTR: u8 = 0x07;
    /// A: the target asks for a positive acknowledgement (§11.7.2).
    pub const ACKNOWLEDGE: u8 = 0x40;
    /// o: Bidirectional Read Residual Overflow (§11.4.1).
    pub const BIDI_OVERFLOW: u8 = 0x10;
    /// u: Bidirectional Read Residual Underflow (§11.4.1).
    pub const BIDI_UNDERFLOW: u8 = 0x08;
    /// O: Residual Overflow (§11.4.1, §11.7.3).
    pub const OVERFLOW: u8 = 0x04;
    /// U: Residual Underflow (§11.4.1, §11.7.3).
    pub const UNDERFLOW: u8 = 0x02;
    /// S: the Data-In carries the status (§11.7.3).
    pub const STATUS: u8 = 0x01;
    /// CSG: the current stage (§11.12.3).
    pub const CSG: u8 = 0x0c;
    /// NSG: the next stage (§11.12.3).
    pub const NSG: u8 = 0x03;
    /// The task management function (§11.5.1).
    pub const FUNCTION: u8 = 0x7f;
    /// The logout reason code (§11.14.1).
    pub const REASON_CODE: u8 = 0x7f;
    /// The SNACK type (§11.16.1).
    pub const SNACK_TYPE: u8 = 0x0f;
}

/// A read and write view of a Basic Header Segment (RFC 7143 §11.2.1).
#[derive(Debug, Clone, Copy)]
pub struct Bhs<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bhs<T> {
    /// Wraps a buffer without looking at its length: an accessor panics if
    /// the buffer is shorter than [`BHS_LEN`]. A `&[u8; BHS_LEN]` never is.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Bhs<T> {
        Bhs { buffer }
    }

    /// Wraps a buffer, or says that it is too short to hold a BHS.
    pub fn new_checked(buffer: T) -> Result<Bhs<T>, Truncated> {
        let bhs = Bhs::new_unchecked(buffer);
        bhs.check_len()?;
        Ok(bhs)
    }

    /// Whether every accessor can read: the buffer holds [`BHS_LEN`] bytes
    /// or more (those past the BHS are not the view's).
    pub fn check_len(&self) -> Result<(), Truncated> {
        let len = self.buffer.as_ref().len();
        if len < BHS_LEN {
            return Err(Truncated { len });
        }
        Ok(())
    }

    /// The buffer the view wraps.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The opcode (RFC 7143 §11.2.1.2), or why it is not one RFC 7143
    /// defines (answered with a Reject, "Command not supported").
    #[inline]
    pub fn opcode(&self) -> Result<Opcode, ParseError> {
        let raw = self.buffer.as_ref()[field::OPCODE] & flag::OPCODE;
        Opcode::from_u8(raw).ok_or(ParseError::UnknownOpcode(raw))
    }

    /// Whether the opcode is `opcode`: one compare, for a caller that
    /// looks at every PDU before it is parsed.
    #[inline]
    pub fn opcode_is(&self, opcode: Opcode) -> bool {
        self.buffer.as_ref()[field::OPCODE] & flag::OPCODE == opcode as u8
    }

    /// TotalAHSLength in bytes (RFC 7143 §11.2.1.5).
    #[inline]
    pub fn total_ahs_len(&self) -> usize {
        usize::from(self.total_ahs_length()) * 4
    }

    /// DataSegmentLength (RFC 7143 §11.2.1.6): the data segment's bytes,
    /// without padding.
    #[inline]
    pub fn data_segment_length(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::DATA_SEGMENT_LENGTH];
        u32::from_be_bytes([0, d[0], d[1], d[2]])
    }

    /// [`Bhs::data_segment_length`] as a length in memory.
    #[inline]
    pub fn data_segment_len(&self) -> usize {
        self.data_segment_length() as usize
    }

    /// The LUN field, kept raw (RFC 7143 §11.2.1.7).
    #[inline]
    pub fn lun(&self) -> Lun {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.buffer.as_ref()[field::LUN]);
        Lun(raw)
    }

    /// The ISID of a login PDU (RFC 7143 §11.12.5).
    #[inline]
    pub fn isid(&self) -> [u8; 6] {
        let mut isid = [0u8; 6];
        isid.copy_from_slice(&self.buffer.as_ref()[field::ISID]);
        isid
    }

    /// CSG: the current stage of a login PDU (RFC 7143 §11.12.3).
    #[inline]
    pub fn csg(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] & flag::CSG) >> flag::CSG.trailing_zeros()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Bhs<&'a T> {
    /// The first 16 bytes of a SCSI Command's CDB (RFC 7143 §11.3.5),
    /// borrowed for as long as the buffer is.
    #[inline]
    pub fn cdb(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::CDB]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bhs<T> {
    /// Sets the opcode (RFC 7143 §11.2.1.2), leaving the I bit as it is.
    #[inline]
    pub fn set_opcode(&mut self, opcode: Opcode) {
        let byte = &mut self.buffer.as_mut()[field::OPCODE];
        *byte = (*byte & !flag::OPCODE) | opcode as u8;
    }

    /// Sets DataSegmentLength (RFC 7143 §11.2.1.6); `length` must fit 24 bits.
    #[inline]
    pub fn set_data_segment_length(&mut self, length: u32) {
        debug_assert!(length < 1 << 24, "DataSegmentLength {length} past 24 bits");
        let bytes = length.to_be_bytes();
        self.buffer.as_mut()[field::DATA_SEGMENT_LENGTH].copy_from_slice(&bytes[1..]);
    }

    /// Sets the LUN field (RFC 7143 §11.2.1.7).
    #[inline]
    pub fn set_lun(&mut self, lun: Lun) {
        self.buffer.as_mut()[field::LUN].copy_from_slice(&lun.0);
    }

    /// Sets the ISID of a login PDU (RFC 7143 §11.12.5).
    #[inline]
    pub fn set_isid(&mut self, isid: [u8; 6]) {
        self.buffer.as_mut()[field::ISID].copy_from_slice(&isid);
    }

    /// Sets the first 16 bytes of a SCSI Command's CDB (RFC 7143 §11.3.5).
    #[inline]
    pub fn set_cdb(&mut self, cdb: &[u8; 16]) {
        self.buffer.as_mut()[field::CDB].copy_from_slice(cdb);
    }

    /// Sets CSG, the current stage of a login PDU (RFC 7143 §11.12.3),
    /// to the low two bits of `stage`.
    #[inline]
    pub fn set_csg(&mut self, stage: u8) {
        let shift = flag::CSG.trailing_zeros();
        self.set_bits(field::FLAGS, flag::CSG, stage << shift);
    }

    /// Sets the bits of `mask` in byte `at` to those of `value`.
    #[inline]
    fn set_bits(&mut self, at: usize, mask: u8, value: u8) {
        let byte = &mut self.buffer.as_mut()[at];
        *byte = (*byte & !mask) | (value & mask);
    }
}

/// Reads the big-endian bytes of `range`; `N` is the field's width.
#[inline]
fn read_be<const N: usize>(data: &[u8], range: field::Field) -> [u8; N] {
    let mut raw = [0u8; N];
    raw.copy_from_slice(&data[range]);
    raw
}

/// A getter and a setter for each whole field, big-endian as every
/// multi-byte integer of RFC 7143 (§11.1).
macro_rules! integer_fields {
    ($($(#[$doc:meta])* $get:ident, $set:ident: $ty:ty = $range:expr;)*) => {
        impl<T: AsRef<[u8]>> Bhs<T> {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $get(&self) -> $ty {
                    <$ty>::from_be_bytes(read_be(self.buffer.as_ref(), $range))
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Bhs<T> {
            $(
                #[doc = concat!("Sets the field [`Bhs::", stringify!($get), "`] reads.")]
                #[inline]
                pub fn $set(&mut self, value: $ty) {
                    self.buffer.as_mut()[$range].copy_from_slice(&value.to_be_bytes());
                }
            )*
        }
    };
}

/// A getter and a setter for each field of one byte.
macro_rules! byte_fields {
    ($($(#[$doc:meta])* $get:ident, $set:ident = $at:expr;)*) => {
        integer_fields! {
            $($(#[$doc])* $get, $set: u8 = $at..$at + 1;)*
        }
    };
}

/// A getter and a setter for each one-bit flag.
macro_rules! flag_bits {
    ($($(#[$doc:meta])* $get:ident, $set:ident = $at:expr, $mask:expr;)*) => {
        impl<T: AsRef<[u8]>> Bhs<T> {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $get(&self) -> bool {
                    self.buffer.as_ref()[$at] & $mask != 0
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Bhs<T> {
            $(
                #[doc = concat!("Sets the bit [`Bhs::", stringify!($get), "`] reads.")]
                #[inline]
                pub fn $set(&mut self, value: bool) {
                    self.set_bits($at, $mask, if value { $mask } else { 0 });
                }
            )*
        }
    };
}

/// A getter and a setter for each field of a few bits that start at bit 0
/// of their byte; a setter keeps what fits the field.
macro_rules! low_bits {
    ($($(#[$doc:meta])* $get:ident, $set:ident = $at:expr, $mask:expr;)*) => {
        impl<T: AsRef<[u8]>> Bhs<T> {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $get(&self) -> u8 {
                    self.buffer.as_ref()[$at] & $mask
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Bhs<T> {
            $(
                #[doc = concat!("Sets the bits [`Bhs::", stringify!($get), "`] reads.")]
                #[inline]
                pub fn $set(&mut self, value: u8) {
                    self.set_bits($at, $mask, value);
                }
            )*
        }
    };
}

flag_bits! {
    /// I: the PDU is for immediate delivery (RFC 7143 §11.2.1.1).
    immediate, set_immediate = field::OPCODE, flag::IMMEDIATE;
    /// F: the last PDU of a command, a sequence or a text (RFC 7143 §11.2.1.3).
    final_bit, set_final_bit = field::FLAGS, flag::FINAL;
    /// T: a login PDU's sender would move to the next stage (RFC 7143 §11.12.1, §11.13.6).
    transit, set_transit = field::FLAGS, flag::TRANSIT;
    /// C: the text of a login or text PDU goes on in the next one (RFC 7143 §11.10.2, §11.12.2).
    continue_bit, set_continue_bit = field::FLAGS, flag::CONTINUE;
    /// R: a SCSI Command reads data from the target (RFC 7143 §11.3.1).
    read, set_read = field::FLAGS, flag::READ;
    /// W: a SCSI Command writes data to the target (RFC 7143 §11.3.1).
    write, set_write = field::FLAGS, flag::WRITE;
    /// A: a Data-In asks for a positive acknowledgement (RFC 7143 §11.7.2).
    acknowledge, set_acknowledge = field::FLAGS, flag::ACKNOWLEDGE;
    /// o: Bidirectional Read Residual Overflow (RFC 7143 §11.4.1).
    bidi_overflow, set_bidi_overflow = field::FLAGS, flag::BIDI_OVERFLOW;
    /// u: Bidirectional Read Residual Underflow (RFC 7143 §11.4.1).
    bidi_underflow, set_bidi_underflow = field::FLAGS, flag::BIDI_UNDERFLOW;
    /// O: Residual Overflow (RFC 7143 §11.4.1, §11.7.3).
    overflow, set_overflow = field::FLAGS, flag::OVERFLOW;
    /// U: Residual Underflow (RFC 7143 §11.4.1, §11.7.3).
    underflow, set_underflow = field::FLAGS, flag::UNDERFLOW;
    /// S: a Data-In carries the command's status (RFC 7143 §11.7.3).
    status_present, set_status_present = field::FLAGS, flag::STATUS;
}

low_bits! {
    /// ATTR: a SCSI Command's task attribute (RFC 7143 §11.3.1).
    task_attr, set_task_attr = field::FLAGS, flag::TASK_ATTR;
    /// NSG: the next stage of a login PDU (RFC 7143 §11.12.3).
    nsg, set_nsg = field::FLAGS, flag::NSG;
    /// Function of a Task Management Function Request (RFC 7143 §11.5.1).
    function, set_function = field::FLAGS, flag::FUNCTION;
    /// Reason Code of a Logout Request (RFC 7143 §11.14.1).
    reason_code, set_reason_code = field::FLAGS, flag::REASON_CODE;
    /// Type of a SNACK Request (RFC 7143 §11.16.1).
    snack_type, set_snack_type = field::FLAGS, flag::SNACK_TYPE;
}

byte_fields! {
    /// TotalAHSLength, in 4-byte words (RFC 7143 §11.2.1.5).
    total_ahs_length, set_total_ahs_length = field::TOTAL_AHS_LENGTH;
    /// Response of a SCSI Response, a Task Management Function Response or
    /// a Logout Response (RFC 7143 §11.4.3, §11.6.1, §11.15.1).
    response, set_response = field::RESPONSE;
    /// Reason of a Reject (RFC 7143 §11.17.1).
    reason, set_reason = field::REASON;
    /// Version-max of a login PDU (RFC 7143 §11.12.4, §11.13.1).
    version_max, set_version_max = field::VERSION_MAX;
    /// Status of a SCSI Response or a Data-In (RFC 7143 §11.4.2, §11.7.3).
    status, set_status = field::STATUS;
    /// Version-min of a Login Request (RFC 7143 §11.12.4).
    version_min, set_version_min = field::VERSION_MIN;
    /// Version-active of a Login Response (RFC 7143 §11.13.2).
    version_active, set_version_active = field::VERSION_ACTIVE;
    /// Status-Class of a Login Response (RFC 7143 §11.13.5).
    status_class, set_status_class = field::STATUS_CLASS;
    /// Status-Detail of a Login Response (RFC 7143 §11.13.5).
    status_detail, set_status_detail = field::STATUS_DETAIL;
    /// AsyncEvent of an Asynchronous Message (RFC 7143 §11.9.1).
    async_event, set_async_event = field::ASYNC_EVENT;
    /// AsyncVCode of an Asynchronous Message (RFC 7143 §11.9.2).
    async_vcode, set_async_vcode = field::ASYNC_VCODE;
}

integer_fields! {
    /// TSIH of a login PDU (RFC 7143 §11.12.6, §11.13.3).
    tsih, set_tsih: u16 = field::TSIH;
    /// Initiator Task Tag (RFC 7143 §11.2.1.8).
    initiator_task_tag, set_initiator_task_tag: u32 = field::INITIATOR_TASK_TAG;
    /// Target Transfer Tag (RFC 7143 §11.7.4, §11.8.5, §11.10.4, §11.18.2).
    target_transfer_tag, set_target_transfer_tag: u32 = field::TARGET_TRANSFER_TAG;
    /// Expected Data Transfer Length of a SCSI Command (RFC 7143 §11.3.4).
    expected_data_transfer_length, set_expected_data_transfer_length: u32 =
        field::EXPECTED_DATA_TRANSFER_LENGTH;
    /// Referenced Task Tag of a Task Management Function Request (RFC 7143 §11.5.4).
    referenced_task_tag, set_referenced_task_tag: u32 = field::REFERENCED_TASK_TAG;
    /// SNACK Tag of a SCSI Response (RFC 7143 §11.4.4).
    snack_tag, set_snack_tag: u32 = field::SNACK_TAG;
    /// CID of a Login Request or a Logout Request (RFC 7143 §11.12.7, §11.14.3).
    cid, set_cid: u16 = field::CID;
    /// CmdSN of a request (RFC 7143 §11.3.2).
    cmd_sn, set_cmd_sn: u32 = field::CMD_SN;
    /// StatSN of a response (RFC 7143 §11.4.9).
    stat_sn, set_stat_sn: u32 = field::STAT_SN;
    /// ExpStatSN of a request (RFC 7143 §11.3.3).
    exp_stat_sn, set_exp_stat_sn: u32 = field::EXP_STAT_SN;
    /// ExpCmdSN of a response (RFC 7143 §11.4.10).
    exp_cmd_sn, set_exp_cmd_sn: u32 = field::EXP_CMD_SN;
    /// MaxCmdSN of a response (RFC 7143 §11.4.11).
    max_cmd_sn, set_max_cmd_sn: u32 = field::MAX_CMD_SN;
    /// RefCmdSN of a Task Management Function Request (RFC 7143 §11.5.5).
    ref_cmd_sn, set_ref_cmd_sn: u32 = field::REF_CMD_SN;
    /// ExpDataSN of a SCSI Response or a TMF Request (RFC 7143 §11.4.8, §11.5.6).
    exp_data_sn, set_exp_data_sn: u32 = field::EXP_DATA_SN;
    /// DataSN of a Data-Out or a Data-In (RFC 7143 §11.7.5).
    data_sn, set_data_sn: u32 = field::DATA_SN;
    /// R2TSN of an R2T (RFC 7143 §11.8.2).
    r2t_sn, set_r2t_sn: u32 = field::R2T_SN;
    /// DataSN/R2TSN of a Reject (RFC 7143 §11.17.2).
    data_sn_or_r2t_sn, set_data_sn_or_r2t_sn: u32 = field::DATA_SN_OR_R2T_SN;
    /// Parameter1 of an Asynchronous Message (RFC 7143 §11.9).
    parameter1, set_parameter1: u16 = field::PARAMETER1;
    /// Buffer Offset of a Data-Out, a Data-In or an R2T (RFC 7143 §11.7.6, §11.8.4).
    buffer_offset, set_buffer_offset: u32 = field::BUFFER_OFFSET;
    /// BegRun of a SNACK Request (RFC 7143 §11.16.6).
    beg_run, set_beg_run: u32 = field::BEG_RUN;
    /// Bidirectional Read Residual Count of a SCSI Response (RFC 7143 §11.4.6).
    bidi_read_residual_count, set_bidi_read_residual_count: u32 =
        field::BIDI_READ_RESIDUAL_COUNT;
    /// Time2Wait of a Logout Response, in seconds (RFC 7143 §11.15.3).
    time2wait, set_time2wait: u16 = field::TIME2WAIT;
    /// Time2Retain of a Logout Response, in seconds (RFC 7143 §11.15.4).
    time2retain, set_time2retain: u16 = field::TIME2RETAIN;
    /// Parameter2 of an Asynchronous Message (RFC 7143 §11.9).
    parameter2, set_parameter2: u16 = field::PARAMETER2;
    /// Parameter3 of an Asynchronous Message (RFC 7143 §11.9).
    parameter3, set_parameter3: u16 = field::PARAMETER3;
    /// Residual Count of a SCSI Response or a Data-In (RFC 7143 §11.4.5, §11.7.3).
    residual_count, set_residual_count: u32 = field::RESIDUAL_COUNT;
    /// Desired Data Transfer Length of an R2T (RFC 7143 §11.8.4).
    desired_data_transfer_length, set_desired_data_transfer_length: u32 =
        field::DESIRED_DATA_TRANSFER_LENGTH;
    /// RunLength of a SNACK Request (RFC 7143 §11.16.7).
    run_length, set_run_length: u32 = field::RUN_LENGTH;
}

/// Rounds a data segment length up to the 4-byte boundary (RFC 7143 §11.2.3).
pub fn padded_len(len: usize) -> usize {
    (len + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_buffer_is_refused_and_a_long_one_read_from_its_start() {
        assert_eq!(
            Bhs::new_checked(&[0u8; BHS_LEN - 1][..]).err(),
            Some(Truncated { len: BHS_LEN - 1 })
        );
        let mut long = [0u8; BHS_LEN + 4];
        long[16..20].copy_from_slice(&7u32.to_be_bytes());
        let bhs = Bhs::new_checked(&long[..]).expect("long enough");
        assert_eq!(bhs.initiator_task_tag(), 7);
    }

    #[test]
    fn setters_change_only_their_own_bits() {
        let mut raw = [0xffu8; BHS_LEN];
        let mut bhs = Bhs::new_unchecked(&mut raw);
        bhs.set_final_bit(false);
        bhs.set_nsg(0);
        bhs.set_csg(2);
        bhs.set_data_segment_length(0x01_0203);
        assert_eq!(bhs.csg(), 2);
        assert_eq!(bhs.nsg(), 0);
        assert!(bhs.continue_bit());
        assert_eq!(raw[1], 0x78);
        assert_eq!(raw[4..8], [0xff, 1, 2, 3]);
    }
}
