//! REQUEST SENSE (SPC-5 6.39).

use crate::data_in::truncate_to_allocation_length;
use crate::Sense;

/// Returns `pending` as sense data in Data-In: fixed format, or descriptor
/// format when DESC (byte 1 bit 0) is set. Sense is delivered with each
/// CHECK CONDITION (autosense), so there is normally nothing pending and the
/// caller passes NO SENSE.
pub(crate) fn request_sense(
    cdb: &[u8],
    pending: &Sense,
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let descriptor_format = cdb[1] & 0x01 != 0;
    let allocation_length = u32::from(cdb[4]);
    if descriptor_format {
        data_in.extend_from_slice(&pending.to_descriptor());
    } else {
        data_in.extend_from_slice(&pending.to_fixed());
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}
