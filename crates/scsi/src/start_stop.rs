//! START STOP UNIT (SBC-4 5.28).

use std::sync::atomic::Ordering;

use crate::{LogicalUnit, Sense};

/// Byte 4 bit 1: LOEJ, load or eject the medium.
const LOEJ: u8 = 0x02;
/// Byte 4 bit 0: START.
const START: u8 = 0x01;
/// Byte 4 bit 2: NO_FLUSH.
const NO_FLUSH: u8 = 0x04;

/// The medium is not removable (RMB=0), so LOEJ is refused; START/STOP is
/// recorded, flushing first on STOP unless NO_FLUSH. POWER CONDITION values
/// the standard defines are accepted with nothing to do, reserved ones refused.
pub(crate) fn start_stop_unit(unit: &LogicalUnit, cdb: &[u8]) -> Result<(), Sense> {
    let power_condition = cdb[4] >> 4;
    match power_condition {
        // START_VALID: process START and LOEJ.
        0x0 => {}
        // ACTIVE, IDLE, STANDBY, LU_CONTROL, FORCE_IDLE_0, FORCE_STANDBY_0:
        // a virtual disk has no power states to move between.
        0x1 | 0x2 | 0x3 | 0x7 | 0xa | 0xb => return Ok(()),
        _ => return Err(Sense::invalid_field_in_cdb(4, 7)),
    }
    if cdb[4] & LOEJ != 0 {
        // SBC-4 5.28: there is no medium to load or eject on this unit.
        return Err(Sense::invalid_field_in_cdb(4, 1));
    }
    let start = cdb[4] & START != 0;
    if !start && cdb[4] & NO_FLUSH == 0 {
        unit.store.flush().map_err(|e| unit.write_failed(e))?;
    }
    unit.stopped.store(!start, Ordering::Relaxed);
    Ok(())
}
