//! REPORT LUNS (SPC-5 6.33): a target-level command.

use crate::data_in::truncate_to_allocation_length;
use crate::{cdb, Completion, Sense};

/// SPC-5 6.33: the smallest ALLOCATION LENGTH a device server must accept.
const ALLOCATION_LENGTH_MIN: u32 = 16;

/// Reports `lun_numbers` (SPC-5 6.33). SELECT REPORT 00h and 02h list them
/// all; 01h (well known) and 10h-12h (administrative, subsidiary) list none,
/// as this target has no well known or administrative logical units.
/// LUNs below 256 use peripheral device addressing, others flat space
/// addressing (SAM-5 4.7.7).
pub fn report_luns(cdb: &[u8], lun_numbers: &[u16], data_in: &mut Vec<u8>) -> Completion {
    data_in.clear();
    let result = cdb::checked_length(cdb)
        .and_then(|length| cdb::check_control(cdb, length))
        .and_then(|()| report_luns_result(cdb, lun_numbers, data_in));
    if result.is_err() {
        data_in.clear();
    }
    result.into()
}

/// REPORT LUNS on an already length-checked CDB.
pub(crate) fn report_luns_result(
    cdb: &[u8],
    lun_numbers: &[u16],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let select_report = cdb[2];
    let allocation_length = cdb::u32_at(cdb, 6);
    if allocation_length < ALLOCATION_LENGTH_MIN {
        return Err(Sense::invalid_field_in_cdb_byte(6));
    }
    let listed: &[u16] = match select_report {
        0x00 | 0x02 => lun_numbers,
        0x01 | 0x10 | 0x11 | 0x12 => &[],
        _ => return Err(Sense::invalid_field_in_cdb_byte(2)),
    };
    let list_length = (listed.len() * 8) as u32;
    data_in.extend_from_slice(&list_length.to_be_bytes());
    data_in.extend_from_slice(&[0; 4]);
    for &lun in listed {
        data_in.extend_from_slice(&encode_lun(lun));
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// SAM-5 4.7.7: single level LUN, peripheral device addressing (00b) below
/// 256 and flat space addressing (01b) up to 16383.
pub fn encode_lun(lun: u16) -> [u8; 8] {
    let mut encoded = [0u8; 8];
    if lun < 256 {
        encoded[1] = lun as u8;
    } else {
        encoded[0] = 0x40 | ((lun >> 8) as u8 & 0x3f);
        encoded[1] = lun as u8;
    }
    encoded
}
