//! GET LBA STATUS (SBC-4 5.6): which LBAs are mapped and which deallocated.

use crate::data_in::truncate_to_allocation_length;
use crate::{cdb, LogicalUnit, Sense};

/// Parameter data header length (SBC-4 5.6.2).
const HEADER_LEN: usize = 8;
/// LBA status descriptor length (SBC-4 5.6.3).
const DESCRIPTOR_LEN: usize = 16;
/// Most descriptors returned at once: bounds the store queries one command
/// can cause; an initiator asks again from where the list ended.
const DESCRIPTORS_MAX: usize = 64;
/// PROVISIONING STATUS (SBC-4 table 54).
const MAPPED: u8 = 0x0;
const DEALLOCATED: u8 = 0x1;

/// SBC-4 5.6: descriptors of consecutive extents from STARTING LOGICAL
/// BLOCK ADDRESS, each wholly mapped or wholly deallocated, as many as fit
/// the allocation length (at least one), up to the end of the medium. A
/// store that cannot see holes reports everything mapped.
pub(crate) fn get_lba_status(
    unit: &LogicalUnit,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let starting_lba = cdb::u64_at(cdb, 2);
    let allocation_length = cdb::u32_at(cdb, 10);
    if cdb[14] & 0x03 != 0 {
        // REPORT TYPE other than 00b (all LBAs) is not supported.
        return Err(Sense::invalid_field_in_cdb(14, 1));
    }
    unit.check_range(starting_lba, 0)?;
    let block_size = unit.block_size();
    let room = (allocation_length as usize).saturating_sub(HEADER_LEN) / DESCRIPTOR_LEN;
    let descriptors_max = room.clamp(1, DESCRIPTORS_MAX);

    data_in.extend_from_slice(&[0; HEADER_LEN]);
    let mut lba = starting_lba;
    for _ in 0..descriptors_max {
        if lba >= unit.capacity_blocks {
            break;
        }
        // A descriptor counts at most 2^32 - 1 blocks.
        let blocks_max = (unit.capacity_blocks - lba).min(u64::from(u32::MAX));
        let extent = unit
            .store
            .allocation(lba * block_size, blocks_max * block_size)
            .map_err(|e| unit.read_failed(e))?;
        let blocks = (extent.len_bytes / block_size).clamp(1, blocks_max);
        data_in.extend_from_slice(&lba.to_be_bytes());
        data_in.extend_from_slice(&(blocks as u32).to_be_bytes());
        data_in.push(if extent.mapped { MAPPED } else { DEALLOCATED });
        data_in.extend_from_slice(&[0; 3]);
        lba += blocks;
    }
    let parameter_data_length = (data_in.len() - 4) as u32;
    data_in[0..4].copy_from_slice(&parameter_data_length.to_be_bytes());
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}
