//! WRITE ATOMIC (16) (SBC-4 5.49).

use crate::block_cdb::{check_no_protection, FUA};
use crate::{cdb, limits, LogicalUnit, Sense};

/// Byte offset of ATOMIC BOUNDARY in the CDB.
const ATOMIC_BOUNDARY_AT: u16 = 10;
/// Byte offset of TRANSFER LENGTH (two bytes) in the CDB.
const TRANSFER_LENGTH_AT: usize = 12;

/// TRANSFER LENGTH of a WRITE ATOMIC (16) CDB, in blocks.
pub(crate) fn block_count(cdb: &[u8]) -> u32 {
    u32::from(cdb::u16_at(cdb, TRANSFER_LENGTH_AT))
}

/// SBC-4 5.49: writes the Data-Out as one atomic operation (SBC-4 4.29).
/// The whole range is checked first, against the Block Limits page's atomic
/// fields too, and the write holds the LBA range lock, so no other write,
/// COMPARE AND WRITE or ORWRITE of these blocks is interleaved with it. The
/// unit advertises no atomic boundary (MAXIMUM ATOMIC BOUNDARY SIZE 0), so
/// a nonzero ATOMIC BOUNDARY is refused, and a Data-Out shorter than the
/// transfer is refused rather than written in part.
pub(crate) fn write_atomic(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    if cdb::u16_at(cdb, ATOMIC_BOUNDARY_AT as usize) != 0 {
        return Err(Sense::invalid_field_in_cdb_byte(ATOMIC_BOUNDARY_AT));
    }
    let logical_block_address = cdb::u64_at(cdb, 2);
    let block_count = block_count(cdb);
    unit.check_writable()?;
    unit.check_range(logical_block_address, u64::from(block_count))?;
    let block_size = unit.config.block_size;
    let length_field = Sense::invalid_field_in_cdb_byte(TRANSFER_LENGTH_AT as u16);
    if block_count > limits::maximum_atomic_transfer_length_blocks(block_size) {
        return Err(length_field);
    }
    if !logical_block_address.is_multiple_of(u64::from(limits::atomic_alignment_blocks(block_size)))
    {
        return Err(Sense::invalid_field_in_cdb_byte(2));
    }
    if !block_count.is_multiple_of(limits::atomic_transfer_length_granularity_blocks(
        block_size,
    )) {
        return Err(length_field);
    }
    if block_count == 0 {
        // SBC-4 5.49: zero blocks transfers and writes nothing; not an error.
        return Ok(());
    }
    let length_bytes = block_count as usize * block_size as usize;
    let Some(data) = data_out.get(..length_bytes) else {
        return Err(Sense::invalid_field_in_information_unit());
    };
    let _range = unit
        .range_locks
        .lock(logical_block_address, u64::from(block_count));
    unit.store
        .write_at(logical_block_address * unit.block_size(), data)
        .map_err(|e| unit.write_failed(e))?;
    if cdb[1] & FUA != 0 {
        unit.store.flush().map_err(|e| unit.write_failed(e))?;
    }
    Ok(())
}
