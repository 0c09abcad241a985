//! Reading fields out of a CDB (SPC-5 4.2): lengths by group code, big-endian
//! integers, the CONTROL byte.

use crate::Sense;

/// Length of the CDB for `opcode` by its group code (SPC-5 4.2.5.1), or None
/// for groups whose length the opcode alone does not give (variable length,
/// reserved and vendor specific groups).
pub fn cdb_length(opcode: u8) -> Option<usize> {
    match opcode >> 5 {
        0 => Some(6),
        1 | 2 => Some(10),
        4 => Some(16),
        5 => Some(12),
        _ => None,
    }
}

/// Checks that `cdb` is long enough for its opcode, and returns that length.
/// The transport may hand us a longer buffer (iSCSI pads CDBs to 16 bytes).
pub fn checked_length(cdb: &[u8]) -> Result<usize, Sense> {
    let opcode = *cdb.first().ok_or_else(Sense::invalid_opcode)?;
    match cdb_length(opcode) {
        Some(length) if cdb.len() >= length => Ok(length),
        Some(_) => Err(Sense::invalid_field_in_cdb_byte(0)),
        None => Err(Sense::invalid_opcode()),
    }
}

/// SPC-5 4.2.5.6: the CONTROL byte is the last byte of the CDB. NACA=1 asks for
/// ACA, which this device server does not support (NormACA=0 in INQUIRY).
pub fn check_control(cdb: &[u8], length: usize) -> Result<(), Sense> {
    let control_byte = length - 1;
    if cdb[control_byte] & 0x04 != 0 {
        return Err(Sense::invalid_field_in_cdb(control_byte as u16, 2));
    }
    Ok(())
}

/// Big-endian u16 at `at`. The caller has checked the CDB length.
pub fn u16_at(cdb: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([cdb[at], cdb[at + 1]])
}

/// Big-endian u32 at `at`.
pub fn u32_at(cdb: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([cdb[at], cdb[at + 1], cdb[at + 2], cdb[at + 3]])
}

/// Big-endian u64 at `at`.
pub fn u64_at(cdb: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&cdb[at..at + 8]);
    u64::from_be_bytes(bytes)
}

/// The service action field (byte 1, bits 4:0) of SERVICE ACTION IN (16) and
/// MAINTENANCE IN.
pub fn service_action(cdb: &[u8]) -> u16 {
    u16::from(cdb[1] & 0x1f)
}

/// Allocation length of the commands that return data and carry one, or None
/// for commands that do not.
pub fn allocation_length(cdb: &[u8]) -> Option<u32> {
    use crate::opcode::*;
    let length = match cdb[0] {
        REQUEST_SENSE | MODE_SENSE_6 => u32::from(cdb[4]),
        INQUIRY => u32::from(u16_at(cdb, 3)),
        MODE_SENSE_10 | PERSISTENT_RESERVE_IN => u32::from(u16_at(cdb, 7)),
        SERVICE_ACTION_IN_16 => u32_at(cdb, 10),
        REPORT_LUNS | MAINTENANCE_IN => u32_at(cdb, 6),
        READ_DEFECT_DATA_10 => u32::from(u16_at(cdb, 7)),
        RECEIVE_COPY_RESULTS => u32_at(cdb, 10),
        READ_DEFECT_DATA_12 => u32_at(cdb, 6),
        _ => return None,
    };
    Some(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_by_group() {
        assert_eq!(cdb_length(0x00), Some(6));
        assert_eq!(cdb_length(0x28), Some(10));
        assert_eq!(cdb_length(0x5a), Some(10));
        assert_eq!(cdb_length(0x88), Some(16));
        assert_eq!(cdb_length(0xa8), Some(12));
        assert_eq!(cdb_length(0x7f), None);
        assert!(checked_length(&[0x28, 0, 0]).is_err());
        assert!(checked_length(&[]).is_err());
        assert_eq!(
            checked_length(&[0x12, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Ok(6)
        );
    }
}
