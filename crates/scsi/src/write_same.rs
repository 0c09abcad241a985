//! WRITE SAME (10/16) (SBC-4 5.47, 5.48).

use crate::block_cdb::check_no_protection;
use crate::block_cdb::BlockCdb;
use crate::{limits, LogicalUnit, Sense};

/// Byte 1 bit 4: ANCHOR.
const ANCHOR: u8 = 0x10;
/// Byte 1 bit 3: UNMAP.
const UNMAP: u8 = 0x08;
/// Byte 1 bit 0 of WRITE SAME (16): NDOB, no Data-Out buffer (zeros).
const NDOB: u8 = 0x01;

/// Largest buffer of repeated blocks written at once.
const PATTERN_BUFFER_BYTES: u64 = 1 << 20;

/// Writes one block of Data-Out (or zeros with NDOB) over a range. With UNMAP
/// the range is deallocated instead, whatever the block holds: SBC-4 (WRITE
/// SAME, ANCHOR and UNMAP bits) makes UNMAP=1, ANCHOR=0 an unmap operation
/// on each LBA, not a write, and unmapped blocks read as zeros (LBPRZ=1).
pub(crate) fn write_same(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let sixteen_byte = cdb.len() == 16;
    if cdb[1] & ANCHOR != 0 {
        return Err(Sense::invalid_field_in_cdb(1, 4));
    }
    if !sixteen_byte && cdb[1] & NDOB != 0 {
        return Err(Sense::invalid_field_in_cdb(1, 0));
    }
    let block = BlockCdb::decode(cdb);
    unit.check_writable()?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let block_count = blocks_of(unit, &block);
    if block_count > limits::MAXIMUM_WRITE_SAME_LENGTH {
        return Err(Sense::invalid_field_in_cdb_byte(block.block_count_at));
    }

    let block_size = unit.block_size();
    let no_data_out = sixteen_byte && cdb[1] & NDOB != 0;
    let pattern: &[u8] = if no_data_out {
        &[]
    } else {
        data_out
            .get(..block_size as usize)
            .ok_or_else(Sense::invalid_field_in_information_unit)?
    };
    let offset = block.logical_block_address * block_size;
    let length = block_count * block_size;
    let all_zero = pattern.iter().all(|&b| b == 0);
    let _range = unit
        .range_locks
        .lock(block.logical_block_address, block_count);
    let result = if cdb[1] & UNMAP != 0 {
        unit.store.unmap(offset, length)
    } else if all_zero {
        unit.store.write_zeroes(offset, length)
    } else {
        write_pattern(unit, pattern, offset, length)
    };
    result.map_err(|e| unit.write_failed(e))
}

/// The blocks a WRITE SAME covers. SBC-4 5.47 with WSNZ=0: zero blocks
/// means through the last LBA.
fn blocks_of(unit: &LogicalUnit, block: &BlockCdb) -> u64 {
    match block.block_count {
        0 => unit
            .capacity_blocks
            .saturating_sub(block.logical_block_address),
        count => u64::from(count),
    }
}

/// The blocks [`write_same`] writes or deallocates for this (checked) CDB
/// when it completes GOOD.
pub(crate) fn block_count(unit: &LogicalUnit, cdb: &[u8]) -> u64 {
    blocks_of(unit, &BlockCdb::decode(cdb))
}

/// Writes `pattern` repeatedly over `length` bytes from `offset`.
fn write_pattern(
    unit: &LogicalUnit,
    pattern: &[u8],
    offset: u64,
    length: u64,
) -> Result<(), isoe_store::StoreError> {
    let repeats = (PATTERN_BUFFER_BYTES / pattern.len() as u64).max(1);
    let buffer = pattern.repeat(repeats.min(length / pattern.len() as u64) as usize);
    let mut position = 0;
    while position < length {
        let piece = (length - position).min(buffer.len() as u64) as usize;
        unit.store.write_at(offset + position, &buffer[..piece])?;
        position += piece as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::opcode::{SYNCHRONIZE_CACHE_10, UNMAP, WRITE_SAME_10, WRITE_SAME_16};
    use crate::{LogicalUnit, LunConfig};
    use std::sync::Arc;

    #[test]
    fn range_bytes_are_the_blocks_covered_times_the_block_size() {
        let store = Arc::new(isoe_store::MemoryStore::new(1 << 20));
        let config = LunConfig {
            block_size: 4096,
            ..LunConfig::default()
        };
        let unit = LogicalUnit::new(store, config);
        let mut ws16 = [0u8; 16];
        ws16[0] = WRITE_SAME_16;
        ws16[2..10].copy_from_slice(&10u64.to_be_bytes());
        ws16[10..14].copy_from_slice(&6u32.to_be_bytes());
        assert_eq!(unit.range_bytes(&ws16, &[0; 4096]), 6 * 4096);
        // Zero blocks: through the last LBA (256 blocks of 4 KiB).
        ws16[10..14].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(unit.range_bytes(&ws16, &[]), (256 - 10) * 4096);
        // iSCSI pads a 10-byte CDB to 16.
        let mut ws10 = [0u8; 16];
        ws10[0] = WRITE_SAME_10;
        ws10[7..9].copy_from_slice(&3u16.to_be_bytes());
        ws10[10..14].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
        assert_eq!(unit.range_bytes(&ws10, &[0; 4096]), 3 * 4096);
        let mut unmap = [0u8; 16];
        unmap[0] = UNMAP;
        unmap[7..9].copy_from_slice(&24u16.to_be_bytes());
        let mut list = vec![0, 22, 0, 16, 0, 0, 0, 0];
        list.extend_from_slice(&7u64.to_be_bytes());
        list.extend_from_slice(&5u32.to_be_bytes());
        list.extend_from_slice(&[0; 4]);
        assert_eq!(unit.range_bytes(&unmap, &list), 5 * 4096);
        let mut sync = [0u8; 16];
        sync[0] = SYNCHRONIZE_CACHE_10;
        assert_eq!(unit.range_bytes(&sync, &[]), 0);
        assert_eq!(unit.range_bytes(&[], &[]), 0);
    }
}
