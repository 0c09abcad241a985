//! READ CAPACITY (10) and (16) (SBC-4 5.20, 5.21).

use crate::data_in::truncate_to_allocation_length;
use crate::{cdb, LogicalUnit, Sense};

/// SBC-4 5.20: last LBA (FFFFFFFFh if it does not fit) and block length.
/// The LBA and PMI fields are obsolete and ignored.
pub(crate) fn read_capacity_10(unit: &LogicalUnit, data_in: &mut Vec<u8>) -> Result<(), Sense> {
    let last_lba = unit.capacity_blocks.saturating_sub(1);
    let returned = u32::try_from(last_lba).unwrap_or(u32::MAX);
    data_in.extend_from_slice(&returned.to_be_bytes());
    data_in.extend_from_slice(&unit.config.block_size.to_be_bytes());
    Ok(())
}

/// SBC-4 5.21: 32 bytes of parameter data: last LBA, block length, no
/// protection information, the configured physical block (LOWEST ALIGNED LBA 0),
/// LBPME=1 (thin provisioned) and LBPRZ=1.
pub(crate) fn read_capacity_16(
    unit: &LogicalUnit,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let allocation_length = cdb::u32_at(cdb, 10);
    let last_lba = unit.capacity_blocks.saturating_sub(1);
    data_in.extend_from_slice(&last_lba.to_be_bytes());
    data_in.extend_from_slice(&unit.config.block_size.to_be_bytes());
    data_in.push(0x00); // P_TYPE, PROT_EN: no protection information
                        // P_I_EXPONENT 0; LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT.
    data_in.push(unit.config.logical_blocks_per_physical_block_exponent());
    data_in.push(0xc0); // LBPME, LBPRZ; LOWEST ALIGNED LBA (high bits) 0
    data_in.push(0x00);
    data_in.resize(data_in.len() + 16, 0);
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}
