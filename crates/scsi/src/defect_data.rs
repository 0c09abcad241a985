//! READ DEFECT DATA (10) and (12) (SBC-4 5.18, 5.19). A virtual medium has
//! no defects: both lists are valid and empty.

use crate::data_in::truncate_to_allocation_length;
use crate::opcode::READ_DEFECT_DATA_12;
use crate::{cdb, Sense};

/// Byte 2 (10) or byte 1 (12) of the CDB: REQ_PLIST, REQ_GLIST.
const REQ_PLIST: u8 = 0x10;
const REQ_GLIST: u8 = 0x08;
/// DEFECT LIST FORMAT 111b is reserved (SBC-4 table 99); every other format
/// describes an empty list equally well.
const RESERVED_FORMAT: u8 = 0x07;

/// READ DEFECT DATA (10) or (12): a header whose PLISTV/GLISTV say the
/// requested lists are valid, in the requested format, with no entries.
pub(crate) fn read_defect_data(cdb: &[u8], data_in: &mut Vec<u8>) -> Result<(), Sense> {
    let twelve_byte = cdb[0] == READ_DEFECT_DATA_12;
    let (flags_at, allocation_length) = if twelve_byte {
        (1, cdb::u32_at(cdb, 6))
    } else {
        (2, u32::from(cdb::u16_at(cdb, 7)))
    };
    let flags = cdb[flags_at];
    let format = flags & 0x07;
    if format == RESERVED_FORMAT {
        return Err(Sense::invalid_field_in_cdb(flags_at as u16, 2));
    }
    // PLISTV and GLISTV sit where REQ_PLIST and REQ_GLIST sit in the CDB.
    let header_byte1 = flags & (REQ_PLIST | REQ_GLIST | 0x07);
    if twelve_byte {
        // SBC-4 5.19.2: GENERATION CODE 0 (not supported), 4-byte length.
        data_in.extend_from_slice(&[0, header_byte1, 0, 0, 0, 0, 0, 0]);
    } else {
        // SBC-4 5.18.2: DEFECT LIST LENGTH 0.
        data_in.extend_from_slice(&[0, header_byte1, 0, 0]);
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}
