//! The fields every block-addressed command shares: LOGICAL BLOCK ADDRESS and
//! a block count, at offsets fixed by the CDB length (SBC-4 5.13-5.16 and the
//! commands shaped like them).

use crate::cdb::{u16_at, u32_at, u64_at};
use crate::Sense;

/// Byte 1 of the 10/12/16-byte forms: DPO (bit 4) and FUA (bit 3).
pub(crate) const FUA: u8 = 0x08;

/// SBC-4 5.14: RDPROTECT/WRPROTECT/VRPROTECT (byte 1 bits 7:5) nonzero asks
/// for protection information, which this unit does not have (PROTECT=0).
pub(crate) fn check_no_protection(cdb: &[u8]) -> Result<(), Sense> {
    if cdb.len() > 6 && cdb[1] & 0xe0 != 0 {
        return Err(Sense::invalid_field_in_cdb(1, 7));
    }
    Ok(())
}

/// LBA and block count of a READ/WRITE/VERIFY/PRE-FETCH/SYNCHRONIZE CACHE/
/// WRITE SAME CDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCdb {
    /// LOGICAL BLOCK ADDRESS.
    pub logical_block_address: u64,
    /// TRANSFER LENGTH (or NUMBER OF LOGICAL BLOCKS / PREFETCH LENGTH), in blocks.
    pub block_count: u32,
    /// Byte offset of the block count field, for field pointers.
    pub block_count_at: u16,
}

impl BlockCdb {
    /// Decodes a 10, 12 or 16 byte CDB, or a READ (6)/WRITE (6) CDB.
    pub fn decode(cdb: &[u8]) -> Self {
        match cdb.len() {
            6 => {
                // SBC-4 5.13: 21-bit LBA; a TRANSFER LENGTH of 0 means 256 blocks.
                let logical_block_address =
                    u64::from(cdb[1] & 0x1f) << 16 | u64::from(u16_at(cdb, 2));
                let block_count = if cdb[4] == 0 { 256 } else { u32::from(cdb[4]) };
                Self {
                    logical_block_address,
                    block_count,
                    block_count_at: 4,
                }
            }
            10 => Self {
                logical_block_address: u64::from(u32_at(cdb, 2)),
                block_count: u32::from(u16_at(cdb, 7)),
                block_count_at: 7,
            },
            12 => Self {
                logical_block_address: u64::from(u32_at(cdb, 2)),
                block_count: u32_at(cdb, 6),
                block_count_at: 6,
            },
            _ => Self {
                logical_block_address: u64_at(cdb, 2),
                block_count: u32_at(cdb, 10),
                block_count_at: 10,
            },
        }
    }
}
