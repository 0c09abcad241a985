//! What a CDB says it transfers, for the transport's residual and R2T logic.

use crate::block_cdb::BlockCdb;
use crate::opcode::*;
use crate::{cdb, Completion, LogicalUnit, Sense};

/// Direction of the data phase of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataDirection {
    /// No data phase.
    None,
    /// Device server to initiator (Data-In).
    In,
    /// Initiator to device server (Data-Out).
    Out,
}

impl LogicalUnit {
    /// What the CDB itself says it transfers (direction, bytes): lets the
    /// transport compute residuals and how much Data-Out to solicit.
    /// Err(sense) for a CDB so malformed its length can't be known (e.g. too
    /// short for its opcode). Byte counts past u32 saturate; such commands
    /// exceed MAXIMUM TRANSFER LENGTH and fail in `execute` anyway.
    pub fn transfer_length(&self, cdb: &[u8]) -> Result<(DataDirection, u32), Completion> {
        let length = cdb::checked_length(cdb).map_err(Completion::check_condition)?;
        Ok(expected_transfer(&cdb[..length], self.config.block_size))
    }

    /// Most commands take a Data-Out shorter or longer than their CDB implies
    /// as an iSCSI underflow or overflow (RFC 7143 §11.4.5.2). COMPARE AND
    /// WRITE (SBC-4 5.3: the buffer is exactly twice NUMBER OF LOGICAL BLOCKS)
    /// and WRITE SAME (SBC-4 5.47: exactly one block) cannot be carried out
    /// on a different amount, so the transport refuses those before they run.
    pub fn check_data_out_length(
        &self,
        cdb: &[u8],
        expected_data_transfer_length: u32,
    ) -> Result<(), Completion> {
        let length = cdb::checked_length(cdb).map_err(Completion::check_condition)?;
        let cdb = &cdb[..length];
        let (_, wanted) = expected_transfer(cdb, self.config.block_size);
        if wanted == expected_data_transfer_length {
            return Ok(());
        }
        let refusal = match cdb[0] {
            // NUMBER OF LOGICAL BLOCKS disagrees with the data sent, as when
            // an initiator wraps a count above 255 into the one-byte field.
            COMPARE_AND_WRITE => Sense::invalid_field_in_cdb_byte(13),
            WRITE_SAME_10 | WRITE_SAME_16 if wanted != 0 => {
                Sense::invalid_field_in_information_unit()
            }
            _ => return Ok(()),
        };
        Err(Completion::check_condition(refusal))
    }
}

fn blocks_to_bytes(block_count: u64, block_size: u32) -> u32 {
    u32::try_from(block_count * u64::from(block_size)).unwrap_or(u32::MAX)
}

/// Direction and byte count implied by a length-checked CDB.
fn expected_transfer(cdb: &[u8], block_size: u32) -> (DataDirection, u32) {
    let block_bytes = || blocks_to_bytes(u64::from(BlockCdb::decode(cdb).block_count), block_size);
    if let Some(allocation_length) = cdb::allocation_length(cdb) {
        return (DataDirection::In, allocation_length);
    }
    match cdb[0] {
        READ_6 | READ_10 | READ_12 | READ_16 => (DataDirection::In, block_bytes()),
        WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16 | WRITE_AND_VERIFY_10 | WRITE_AND_VERIFY_12
        | WRITE_AND_VERIFY_16 | ORWRITE_16 => (DataDirection::Out, block_bytes()),
        READ_CAPACITY_10 => (DataDirection::In, 8),
        VERIFY_10 | VERIFY_12 | VERIFY_16 => match (cdb[1] >> 1) & 0x03 {
            0b01 => (DataDirection::Out, block_bytes()),
            0b11 => (DataDirection::Out, block_size),
            _ => (DataDirection::None, 0),
        },
        COMPARE_AND_WRITE => (
            DataDirection::Out,
            blocks_to_bytes(
                2 * u64::from(crate::compare_and_write::block_count(cdb)),
                block_size,
            ),
        ),
        WRITE_ATOMIC_16 => (
            DataDirection::Out,
            blocks_to_bytes(u64::from(crate::write_atomic::block_count(cdb)), block_size),
        ),
        WRITE_SAME_16 if cdb[1] & 0x01 != 0 => (DataDirection::None, 0),
        WRITE_SAME_10 | WRITE_SAME_16 => (DataDirection::Out, block_size),
        UNMAP => (DataDirection::Out, u32::from(cdb::u16_at(cdb, 7))),
        PERSISTENT_RESERVE_OUT => (DataDirection::Out, cdb::u32_at(cdb, 5)),
        SANITIZE => (DataDirection::Out, u32::from(cdb::u16_at(cdb, 7))),
        EXTENDED_COPY => (DataDirection::Out, cdb::u32_at(cdb, 10)),
        MAINTENANCE_OUT => (DataDirection::Out, cdb::u32_at(cdb, 6)),
        MODE_SELECT_6 => (DataDirection::Out, u32::from(cdb[4])),
        MODE_SELECT_10 => (DataDirection::Out, u32::from(cdb::u16_at(cdb, 7))),
        _ => (DataDirection::None, 0),
    }
}
