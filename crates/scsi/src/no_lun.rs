//! Commands addressed to a LUN with no logical unit behind it (SPC-5 4.6.4.2).

use crate::inquiry::standard_data;
use crate::opcode::{INQUIRY, REPORT_LUNS, REQUEST_SENSE};
use crate::report_luns::report_luns_result;
use crate::request_sense::request_sense;
use crate::{cdb, Completion, LunConfig, Sense};

/// PERIPHERAL QUALIFIER 011b, PERIPHERAL DEVICE TYPE 1Fh: no logical unit
/// can be here (SPC-5 6.7.2).
const NO_LOGICAL_UNIT: u8 = 0x7f;

/// A command addressed to a LUN that doesn't exist (SPC-5: INQUIRY returns
/// peripheral qualifier 011b type 1Fh; REQUEST SENSE returns LOGICAL UNIT NOT
/// SUPPORTED; REPORT LUNS works; everything else CHECK CONDITION ILLEGAL
/// REQUEST 25h/00h).
pub fn execute_no_lun(cdb: &[u8], lun_numbers: &[u16], data_in: &mut Vec<u8>) -> Completion {
    data_in.clear();
    let result = dispatch(cdb, lun_numbers, data_in);
    if result.is_err() {
        data_in.clear();
    }
    result.into()
}

fn dispatch(cdb: &[u8], lun_numbers: &[u16], data_in: &mut Vec<u8>) -> Result<(), Sense> {
    let Some(&opcode) = cdb.first() else {
        return Err(Sense::logical_unit_not_supported());
    };
    match opcode {
        INQUIRY | REQUEST_SENSE | REPORT_LUNS => {
            let length = cdb::checked_length(cdb)?;
            cdb::check_control(cdb, length)?;
        }
        _ => return Err(Sense::logical_unit_not_supported()),
    }
    match opcode {
        INQUIRY => {
            if cdb[1] & 0x03 != 0 || cdb[2] != 0 {
                // No vital product data exists for a LUN with nothing behind it.
                return Err(Sense::logical_unit_not_supported());
            }
            let config = LunConfig {
                product: String::new(),
                ..LunConfig::default()
            };
            standard_data(&config, NO_LOGICAL_UNIT, false, data_in);
            crate::data_in::truncate_to_allocation_length(data_in, u32::from(cdb::u16_at(cdb, 3)));
            Ok(())
        }
        REQUEST_SENSE => request_sense(cdb, &Sense::logical_unit_not_supported(), data_in),
        _ => report_luns_result(cdb, lun_numbers, data_in),
    }
}
