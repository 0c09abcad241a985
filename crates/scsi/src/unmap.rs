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
    let parameters = &data_out[..parameter_list_length.min(data_out.len())];
    let block_descriptor_data_length = usize::from(cdb::u16_at(parameters, 2));
    let descriptors_end = (HEADER_LEN + block_descriptor_data_length).min(parameters.len());
    let descriptors = &parameters[HEADER_LEN..descriptors_end];
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
