//! ORWRITE (16) (SBC-4 5.8).

use crate::block_cdb::BlockCdb;
use crate::block_cdb::{check_no_protection, FUA};
use crate::{LogicalUnit, Sense};

/// SBC-4 5.8: each Data-Out byte is ORed into the medium byte it addresses.
/// ORPROTECT (the protection field of byte 1) must be zero as this unit has
/// no protection information. The read, the OR and the write hold the range
/// lock together, so a concurrent writer's data is never lost between them.
/// Like WRITE, a Data-Out shorter than the CDB implies is applied in whole
/// blocks, as far as it goes.
pub(crate) fn orwrite(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let block = BlockCdb::decode(cdb);
    unit.check_transfer_length(&block)?;
    unit.check_writable()?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let block_size = unit.block_size();
    let wanted_bytes = u64::from(block.block_count) * block_size;
    let available_bytes = data_out.len() as u64 / block_size * block_size;
    let length_bytes = wanted_bytes.min(available_bytes) as usize;
    if length_bytes == 0 {
        return Ok(());
    }
    let data_out = &data_out[..length_bytes];
    let offset = block.logical_block_address * block_size;

    let _range = unit.range_locks.lock(
        block.logical_block_address,
        length_bytes as u64 / block_size,
    );
    // Bounded by MAXIMUM TRANSFER LENGTH.
    let mut medium = Vec::with_capacity(length_bytes);
    unit.store
        .read_append(offset, length_bytes, &mut medium)
        .map_err(|e| unit.read_failed(e))?;
    for (stored, ored) in medium.iter_mut().zip(data_out) {
        *stored |= ored;
    }
    unit.store
        .write_at(offset, &medium)
        .map_err(|e| unit.write_failed(e))?;
    if cdb[1] & FUA != 0 {
        unit.store.flush().map_err(|e| unit.write_failed(e))?;
    }
    Ok(())
}
