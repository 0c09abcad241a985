//! UNMAP (SBC-4 5.32).

use crate::{cdb, limits, LogicalUnit, Sense};

/// Parameter list header length (SBC-4 5.32.2).
const HEADER_LEN: usize = 8;
/// UNMAP block descriptor length (SBC-4 5.32.3).
const DESCRIPTOR_LEN: usize = 16;

/// Deallocates every range in the parameter list. All descriptors are
/// checked before any range is unmapped, so a bad list changes nothing.
pub(crate) fn unmap(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> Result<(), Sense> {
    if cdb[1] & 0x01 != 0 {
        // ANCHOR needs ANC_SUP, which the provisioning VPD page leaves clear.
        return Err(Sense::invalid_field_in_cdb(1, 0));
    }
    let parameter_list_length = usize::from(cdb::u16_at(cdb, 7));
    unit.check_writable()?;
    if parameter_list_length == 0 {
        return Ok(());
    }
    if parameter_list_length < HEADER_LEN || data_out.len() < HEADER_LEN {
        return Err(Sense::parameter_list_length_error());
    }
    let descriptors = descriptor_bytes(cdb, data_out);
    let descriptor_count = descriptors.len() / DESCRIPTOR_LEN;
    if descriptor_count > limits::MAXIMUM_UNMAP_BLOCK_DESCRIPTOR_COUNT as usize {
        return Err(Sense::invalid_field_in_parameter_list(2, None));
    }

    let mut total_blocks = 0u64;
    for (index, descriptor) in descriptors.chunks_exact(DESCRIPTOR_LEN).enumerate() {
        let logical_block_address = cdb::u64_at(descriptor, 0);
        let block_count = u64::from(cdb::u32_at(descriptor, 8));
        total_blocks += block_count;
        if block_count > 0 {
            unit.check_range(logical_block_address, block_count)?;
        }
        if total_blocks > u64::from(limits::MAXIMUM_UNMAP_LBA_COUNT) {
            let at = (HEADER_LEN + index * DESCRIPTOR_LEN + 8) as u16;
            return Err(Sense::invalid_field_in_parameter_list(at, None));
        }
    }
    for descriptor in descriptors.chunks_exact(DESCRIPTOR_LEN) {
        let logical_block_address = cdb::u64_at(descriptor, 0);
        let block_count = u64::from(cdb::u32_at(descriptor, 8));
        if block_count > 0 {
            let _range = unit.range_locks.lock(logical_block_address, block_count);
            unit.store
                .unmap(
                    logical_block_address * unit.block_size(),
                    block_count * unit.block_size(),
                )
                .map_err(|e| unit.write_failed(e))?;
        }
    }
    Ok(())
}

/// The block descriptors of UNMAP's parameter list, as far as the CDB's
/// PARAMETER LIST LENGTH, the list's BLOCK DESCRIPTOR DATA LENGTH and the
/// Data-Out received all reach (only whole descriptors of it are used);
/// empty for a list too short to have a header.
fn descriptor_bytes<'a>(cdb: &[u8], data_out: &'a [u8]) -> &'a [u8] {
    let parameter_list_length = usize::from(cdb::u16_at(cdb, 7));
    if parameter_list_length < HEADER_LEN || data_out.len() < HEADER_LEN {
        return &[];
    }
    let parameters = &data_out[..parameter_list_length.min(data_out.len())];
    let block_descriptor_data_length = usize::from(cdb::u16_at(parameters, 2));
    let descriptors_end = (HEADER_LEN + block_descriptor_data_length).min(parameters.len());
    &parameters[HEADER_LEN..descriptors_end]
}

/// The blocks [`unmap`] deallocates for this CDB and parameter list when it
/// completes GOOD: the sum of its descriptors' NUMBER OF LOGICAL BLOCKS.
/// What a list [`unmap`] refuses would give means nothing; a list longer
/// than any [`unmap`] accepts gives 0, without reading it all.
pub(crate) fn block_count(cdb: &[u8], data_out: &[u8]) -> u64 {
    let descriptors = descriptor_bytes(cdb, data_out);
    if descriptors.len() / DESCRIPTOR_LEN > limits::MAXIMUM_UNMAP_BLOCK_DESCRIPTOR_COUNT as usize {
        return 0;
    }
    descriptors
        .chunks_exact(DESCRIPTOR_LEN)
        .map(|descriptor| u64::from(cdb::u32_at(descriptor, 8)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ranges: &[(u64, u32)]) -> Vec<u8> {
        let mut list = vec![0u8; HEADER_LEN];
        let descriptors = (ranges.len() * DESCRIPTOR_LEN) as u16;
        list[0..2].copy_from_slice(&(descriptors + 6).to_be_bytes());
        list[2..4].copy_from_slice(&descriptors.to_be_bytes());
        for (lba, blocks) in ranges {
            list.extend_from_slice(&lba.to_be_bytes());
            list.extend_from_slice(&blocks.to_be_bytes());
            list.extend_from_slice(&[0; 4]);
        }
        list
    }

    fn cdb(parameter_list_length: usize) -> [u8; 10] {
        let mut cdb = [0u8; 10];
        cdb[0] = crate::opcode::UNMAP;
        cdb[7..9].copy_from_slice(&(parameter_list_length as u16).to_be_bytes());
        cdb
    }

    #[test]
    fn the_block_count_is_the_sum_of_the_descriptors_unmap_reads() {
        let data = list(&[(0, 8), (100, 2048), (5000, 0)]);
        assert_eq!(block_count(&cdb(data.len()), &data), 2056);
        // PARAMETER LIST LENGTH cuts the second descriptor off: unmap()
        // deallocates the first range only.
        assert_eq!(block_count(&cdb(HEADER_LEN + DESCRIPTOR_LEN + 8), &data), 8);
        assert_eq!(block_count(&cdb(0), &data), 0);
        assert_eq!(block_count(&cdb(data.len()), &data[..4]), 0);
        let too_many = vec![(0, 1); limits::MAXIMUM_UNMAP_BLOCK_DESCRIPTOR_COUNT as usize + 1];
        let data = list(&too_many);
        assert_eq!(block_count(&cdb(data.len()), &data), 0);
    }
}
