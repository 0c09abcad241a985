//! COMPARE AND WRITE (SBC-4 5.3).

use crate::block_cdb::{check_no_protection, FUA};
use crate::verify::compare_with_medium;
use crate::{cdb, LogicalUnit, Sense};

/// Byte offset of NUMBER OF LOGICAL BLOCKS in the 16-byte CDB.
const NUMBER_OF_LOGICAL_BLOCKS_AT: usize = 13;

/// NUMBER OF LOGICAL BLOCKS of a COMPARE AND WRITE CDB.
pub(crate) fn block_count(cdb: &[u8]) -> u32 {
    u32::from(cdb[NUMBER_OF_LOGICAL_BLOCKS_AT])
}

/// SBC-4 5.3: the Data-Out Buffer holds NUMBER OF LOGICAL BLOCKS of verify
/// data followed as many blocks of write data. The verify data is compared
/// with the medium; if it all matches, the write data replaces it, else
/// nothing is written and the command ends in MISCOMPARE with the offset of
/// the first differing byte in INFORMATION. A store that compares and
/// writes atomically itself (an RBD image, for every gateway that serves
/// it) does both; otherwise the range lock makes the compare and the write
/// one step for every other command that writes.
pub(crate) fn compare_and_write(
    unit: &LogicalUnit,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let logical_block_address = cdb::u64_at(cdb, 2);
    let block_count = block_count(cdb);
    let maximum = unit.maximum_compare_and_write_blocks();
    if maximum == 0 {
        return Err(Sense::invalid_opcode());
    }
    if block_count > u32::from(maximum) {
        return Err(Sense::invalid_field_in_cdb_byte(
            NUMBER_OF_LOGICAL_BLOCKS_AT as u16,
        ));
    }
    unit.check_writable()?;
    unit.check_range(logical_block_address, u64::from(block_count))?;
    if block_count == 0 {
        // SBC-4 5.3: zero blocks is no compare and no write, and not an error.
        return Ok(());
    }
    let half_bytes = block_count as usize * unit.block_size() as usize;
    let Some(buffer) = data_out.get(..2 * half_bytes) else {
        return Err(Sense::invalid_field_in_information_unit());
    };
    let (verify_data, write_data) = buffer.split_at(half_bytes);
    let offset = logical_block_address * unit.block_size();
    if let Some(result) = unit
        .store
        .compare_and_write(offset, verify_data, write_data)
    {
        if let Some(position) = result.map_err(|e| unit.write_failed(e))? {
            return Err(Sense::miscompare(position));
        }
        if cdb[1] & FUA != 0 {
            unit.store.flush().map_err(|e| unit.write_failed(e))?;
        }
        return Ok(());
    }

    let _range = unit
        .range_locks
        .lock(logical_block_address, u64::from(block_count));
    compare_with_medium(unit, logical_block_address, verify_data)?;
    unit.store
        .write_at(logical_block_address * unit.block_size(), write_data)
        .map_err(|e| unit.write_failed(e))?;
    if cdb[1] & FUA != 0 {
        unit.store.flush().map_err(|e| unit.write_failed(e))?;
    }
    Ok(())
}
