//! PREVENT ALLOW MEDIUM REMOVAL (SBC-4 5.12).

use crate::Sense;

/// The medium is not removable (RMB=0 in INQUIRY) and START STOP UNIT
/// refuses LOEJ, so it can never leave: preventing removal (PREVENT 01b) or
/// allowing it (00b) asks for nothing the unit does not already guarantee,
/// and both complete with GOOD. PREVENT 10b and 11b concern medium changer
/// elements (obsolete for SBC) and are invalid.
pub(crate) fn prevent_allow_medium_removal(cdb: &[u8]) -> Result<(), Sense> {
    if cdb[4] & 0x02 != 0 {
        return Err(Sense::invalid_field_in_cdb(4, 1));
    }
    Ok(())
}
