//! The Basic Header Segment (RFC 7143 §11.2): 48 bytes, offsets named once.

use crate::pdu::Lun;

/// Length of the Basic Header Segment in bytes.
pub const BHS_LEN: usize = 48;

/// Byte offsets shared by several PDU kinds (RFC 7143 §11.2.1).
pub mod field {
    use core::ops::Range;
    /// TotalAHSLength, in 4-byte words.
    pub const TOTAL_AHS_LENGTH: usize = 4;
    /// DataSegmentLength, 3 bytes big-endian.
    pub const DATA_SEGMENT_LENGTH: Range<usize> = 5..8;
    /// LUN or opcode-specific bytes 8..16.
    pub const LUN: Range<usize> = 8..16;
    /// TSIH (login), bytes 14..16.
    pub const TSIH: usize = 14;
    /// Initiator Task Tag.
    pub const ITT: usize = 16;
    /// Target Transfer Tag (where present).
    pub const TTT: usize = 20;
    /// Word at byte 20 (EDTL, Referenced Task Tag, SNACK Tag).
    pub const W20: usize = 20;
    /// CID (login, logout), bytes 20..22.
    pub const CID: usize = 20;
    /// CmdSN (requests) / StatSN (responses).
    pub const SN_24: usize = 24;
    /// ExpStatSN (requests) / ExpCmdSN (responses).
    pub const SN_28: usize = 28;
    /// MaxCmdSN (responses) / RefCmdSN (TMF).
    pub const SN_32: usize = 32;
    /// DataSN, R2TSN, ExpDataSN.
    pub const SN_36: usize = 36;
    /// Buffer Offset, BegRun, Time2Wait.
    pub const W40: usize = 40;
    /// Time2Retain (logout response).
    pub const W42: usize = 42;
    /// Residual Count, Desired Data Transfer Length, RunLength.
    pub const W44: usize = 44;
    /// The CDB in a SCSI Command.
    pub const CDB: Range<usize> = 32..48;
}

/// A read-only view of a BHS.
#[derive(Clone, Copy)]
pub struct Bhs<'a>(pub &'a [u8; BHS_LEN]);

impl<'a> Bhs<'a> {
    /// Big-endian u32 at `at`.
    pub fn u32(&self, at: usize) -> u32 {
        u32::from_be_bytes([self.0[at], self.0[at + 1], self.0[at + 2], self.0[at + 3]])
    }
    /// Big-endian u16 at `at`.
    pub fn u16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.0[at], self.0[at + 1]])
    }
    /// The LUN field.
    pub fn lun(&self) -> Lun {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.0[field::LUN]);
        Lun(raw)
    }
    /// The ISID (login PDUs), bytes 8..14.
    pub fn isid(&self) -> [u8; 6] {
        let mut isid = [0u8; 6];
        isid.copy_from_slice(&self.0[8..14]);
        isid
    }
    /// TotalAHSLength in bytes.
    pub fn total_ahs_len(&self) -> usize {
        self.0[field::TOTAL_AHS_LENGTH] as usize * 4
    }
    /// DataSegmentLength in bytes, without padding.
    pub fn data_segment_len(&self) -> usize {
        let d = &self.0[field::DATA_SEGMENT_LENGTH];
        ((d[0] as usize) << 16) | ((d[1] as usize) << 8) | d[2] as usize
    }
}

/// A writable view of a BHS.
pub struct BhsMut<'a>(pub &'a mut [u8; BHS_LEN]);

impl<'a> BhsMut<'a> {
    /// Writes a big-endian u32 at `at`.
    pub fn u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes a big-endian u16 at `at`.
    pub fn u16(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes the LUN field.
    pub fn lun(&mut self, lun: Lun) {
        self.0[field::LUN].copy_from_slice(&lun.0);
    }
}

/// Rounds a data segment length up to the 4-byte boundary (RFC 7143 §11.2.3).
pub fn padded_len(len: usize) -> usize {
    (len + 3) & !3
}
