//! READ (6/10/12/16), WRITE (6/10/12/16) and WRITE AND VERIFY (10/12/16)
//! (SBC-4 5.13-5.16, 5.38-5.44).

use isoe_store::IoKind;

use crate::block_cdb::{check_no_protection, BlockCdb, FUA};
use crate::logical_unit::Context;
use crate::route::{PageCrcs, PAGE_CRCS_MAX};
use crate::verify::compare_with_medium;
use crate::{LogicalUnit, Sense};

/// A READ at least this long is sent from the store's memory when the
/// store lends it ([`isoe_store::Store::lend`]), rather than copied into
/// the Data-In buffer first. A write to a chunk a read still holds copies
/// the whole chunk, which a sequential read/write mix of 64 KiB commands
/// did for nearly every write when 64 KiB reads were lent (pt-2009's
/// os-paging-64k, 90% read: half the IOPS at twice the target CPU per
/// I/O); from 128 KiB up the copy saved is worth that risk.
const LEND_MIN_BYTES: u64 = 128 * 1024;

/// READ: returns `block_count` blocks from the medium in Data-In.
pub(crate) fn read(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let block = BlockCdb::decode(cdb);
    unit.check_transfer_length(&block)?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let length_bytes = u64::from(block.block_count) * unit.block_size();
    // Bounded by MAXIMUM TRANSFER LENGTH, so it fits comfortably in memory.
    data_in.clear();
    if unit.is_asynchronous() && length_bytes > 0 {
        let offset = block.logical_block_address * unit.block_size();
        let len = length_bytes as usize;
        unit.submit(context, IoKind::Read { offset, len }, 0);
        return Ok(());
    }
    if length_bytes >= LEND_MIN_BYTES {
        let offset = block.logical_block_address * unit.block_size();
        if let Some(lent) = unit.store.lend(offset, length_bytes as usize) {
            context.lent.set(Some(lent));
            return Ok(());
        }
    }
    let offset = block.logical_block_address * unit.block_size();
    let pages = length_bytes as usize / isoe_store::CRC_PAGE_BYTES;
    if let Some(digests) = context.page_digests.filter(|_| pages <= PAGE_CRCS_MAX) {
        // The transport sends a data digest: the store may have the
        // pages' CRCs, which spares it a pass over the data.
        let mut crcs = PageCrcs::slots(pages);
        let kept = unit
            .store
            .read_append_with_crcs(
                offset,
                length_bytes as usize,
                data_in,
                digests.crc,
                crcs.as_mut_slice(),
            )
            .map_err(|e| unit.read_failed(e))?;
        if kept {
            digests.crcs.set(Some(crcs));
        }
        return Ok(());
    }
    unit.store
        .read_append(offset, length_bytes as usize, data_in)
        .map_err(|e| unit.read_failed(e))
}

/// WRITE: stores the Data-Out blocks; FUA makes them durable before GOOD.
pub(crate) fn write(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let block = BlockCdb::decode(cdb);
    unit.check_transfer_length(&block)?;
    unit.check_writable()?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let fua = cdb.len() > 6 && cdb[1] & FUA != 0;
    if unit.is_asynchronous() {
        let len = writable_bytes(unit, &block, data_out);
        if len > 0 {
            let offset = block.logical_block_address * unit.block_size();
            unit.submit(context, IoKind::Write { offset, fua }, len);
            return Ok(());
        }
    }
    write_blocks(unit, &block, data_out)?;
    if fua {
        unit.store.flush().map_err(|e| unit.write_failed(e))?;
    }
    Ok(())
}

/// WRITE AND VERIFY: writes, makes the data durable, then reads it back;
/// BYTCHK=01b also compares it with the Data-Out (SBC-4 5.42).
pub(crate) fn write_and_verify(
    unit: &LogicalUnit,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let byte_check = (cdb[1] >> 1) & 0x03;
    if byte_check > 1 {
        return Err(Sense::invalid_field_in_cdb(1, 2));
    }
    let block = BlockCdb::decode(cdb);
    unit.check_transfer_length(&block)?;
    unit.check_writable()?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let written = write_blocks(unit, &block, data_out)?;
    unit.store.flush().map_err(|e| unit.write_failed(e))?;
    compare_with_medium(unit, block.logical_block_address, &data_out[..written])
}

/// The bytes of `data_out` a write takes: the whole blocks the CDB asked
/// for, or fewer if fewer came.
fn writable_bytes(unit: &LogicalUnit, block: &BlockCdb, data_out: &[u8]) -> usize {
    let wanted_bytes = u64::from(block.block_count) * unit.block_size();
    let available_bytes = data_out.len() as u64 / unit.block_size() * unit.block_size();
    wanted_bytes.min(available_bytes) as usize
}

/// Writes the whole blocks of `data_out` that the CDB asked for and returns
/// how many bytes that was. A transport that delivered less than the CDB
/// implies (iSCSI EDTL below the transfer length) gets exactly what it sent
/// written, whole blocks only, as libiscsi's residual tests expect.
fn write_blocks(unit: &LogicalUnit, block: &BlockCdb, data_out: &[u8]) -> Result<usize, Sense> {
    let length_bytes = writable_bytes(unit, block, data_out);
    if length_bytes > 0 {
        let _range = unit.range_locks.lock(
            block.logical_block_address,
            length_bytes as u64 / unit.block_size(),
        );
        unit.store
            .write_at(
                block.logical_block_address * unit.block_size(),
                &data_out[..length_bytes],
            )
            .map_err(|e| unit.write_failed(e))?;
    }
    Ok(length_bytes)
}
