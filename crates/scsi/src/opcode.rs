//! Operation codes of the commands this device server knows (SPC-5 and SBC-4
//! command tables), and the service actions of the two multiplexed opcodes.

/// TEST UNIT READY (SPC-5 6.47).
pub const TEST_UNIT_READY: u8 = 0x00;
/// REQUEST SENSE (SPC-5 6.39).
pub const REQUEST_SENSE: u8 = 0x03;
/// READ (6) (SBC-4 5.13).
pub const READ_6: u8 = 0x08;
/// WRITE (6) (SBC-4 5.38).
pub const WRITE_6: u8 = 0x0a;
/// INQUIRY (SPC-5 6.7).
pub const INQUIRY: u8 = 0x12;
/// MODE SELECT (6) (SPC-5 6.11).
pub const MODE_SELECT_6: u8 = 0x15;
/// MODE SENSE (6) (SPC-5 6.13).
pub const MODE_SENSE_6: u8 = 0x1a;
/// START STOP UNIT (SBC-4 5.28).
pub const START_STOP_UNIT: u8 = 0x1b;
/// PREVENT ALLOW MEDIUM REMOVAL (SBC-4 5.12).
pub const PREVENT_ALLOW_MEDIUM_REMOVAL: u8 = 0x1e;
/// READ CAPACITY (10) (SBC-4 5.20).
pub const READ_CAPACITY_10: u8 = 0x25;
/// READ (10) (SBC-4 5.14).
pub const READ_10: u8 = 0x28;
/// WRITE (10) (SBC-4 5.39).
pub const WRITE_10: u8 = 0x2a;
/// WRITE AND VERIFY (10) (SBC-4 5.42).
pub const WRITE_AND_VERIFY_10: u8 = 0x2e;
/// VERIFY (10) (SBC-4 5.33).
pub const VERIFY_10: u8 = 0x2f;
/// PRE-FETCH (10) (SBC-4 5.9).
pub const PRE_FETCH_10: u8 = 0x34;
/// SYNCHRONIZE CACHE (10) (SBC-4 5.29).
pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
/// READ DEFECT DATA (10) (SBC-4 5.18).
pub const READ_DEFECT_DATA_10: u8 = 0x37;
/// WRITE SAME (10) (SBC-4 5.47).
pub const WRITE_SAME_10: u8 = 0x41;
/// UNMAP (SBC-4 5.32).
pub const UNMAP: u8 = 0x42;
/// SANITIZE (SBC-4 5.30).
pub const SANITIZE: u8 = 0x48;
/// MODE SELECT (10) (SPC-5 6.12).
pub const MODE_SELECT_10: u8 = 0x55;
/// MODE SENSE (10) (SPC-5 6.14).
pub const MODE_SENSE_10: u8 = 0x5a;
/// EXTENDED COPY (SPC-4 6.3): THIRD-PARTY COPY OUT in SPC-5; service action
/// 00h is EXTENDED COPY (LID1).
pub const EXTENDED_COPY: u8 = 0x83;
/// RECEIVE COPY RESULTS (SPC-4 6.18): THIRD-PARTY COPY IN in SPC-5.
pub const RECEIVE_COPY_RESULTS: u8 = 0x84;
/// READ (16) (SBC-4 5.16).
pub const READ_16: u8 = 0x88;
/// COMPARE AND WRITE (SBC-4 5.3).
pub const COMPARE_AND_WRITE: u8 = 0x89;
/// WRITE (16) (SBC-4 5.41).
pub const WRITE_16: u8 = 0x8a;
/// ORWRITE (16) (SBC-4 5.8).
pub const ORWRITE_16: u8 = 0x8b;
/// WRITE AND VERIFY (16) (SBC-4 5.44).
pub const WRITE_AND_VERIFY_16: u8 = 0x8e;
/// VERIFY (16) (SBC-4 5.35).
pub const VERIFY_16: u8 = 0x8f;
/// PRE-FETCH (16) (SBC-4 5.10).
pub const PRE_FETCH_16: u8 = 0x90;
/// SYNCHRONIZE CACHE (16) (SBC-4 5.30).
pub const SYNCHRONIZE_CACHE_16: u8 = 0x91;
/// WRITE SAME (16) (SBC-4 5.48).
pub const WRITE_SAME_16: u8 = 0x93;
/// WRITE ATOMIC (16) (SBC-4 5.49).
pub const WRITE_ATOMIC_16: u8 = 0x9c;
/// SERVICE ACTION IN (16) (SBC-4 table 36); see [`READ_CAPACITY_16_SA`].
pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
/// RESERVE (6) (SPC-2 7.21).
pub const RESERVE_6: u8 = 0x16;
/// RELEASE (6) (SPC-2 7.17).
pub const RELEASE_6: u8 = 0x17;
/// RESERVE (10) (SPC-2 7.22).
pub const RESERVE_10: u8 = 0x56;
/// RELEASE (10) (SPC-2 7.18).
pub const RELEASE_10: u8 = 0x57;
/// PERSISTENT RESERVE IN (SPC-5 6.16).
pub const PERSISTENT_RESERVE_IN: u8 = 0x5e;
/// PERSISTENT RESERVE OUT (SPC-5 6.17).
pub const PERSISTENT_RESERVE_OUT: u8 = 0x5f;
/// REPORT LUNS (SPC-5 6.33).
pub const REPORT_LUNS: u8 = 0xa0;
/// MAINTENANCE IN (SPC-5 table 3); see [`REPORT_SUPPORTED_OPERATION_CODES_SA`]
/// and [`REPORT_TARGET_PORT_GROUPS_SA`].
pub const MAINTENANCE_IN: u8 = 0xa3;
/// MAINTENANCE OUT (SPC-5 6.46): SET TARGET PORT GROUPS is its service action 0Ah.
pub const MAINTENANCE_OUT: u8 = 0xa4;
/// READ (12) (SBC-4 5.15).
pub const READ_12: u8 = 0xa8;
/// WRITE (12) (SBC-4 5.40).
pub const WRITE_12: u8 = 0xaa;
/// WRITE AND VERIFY (12) (SBC-4 5.43).
pub const WRITE_AND_VERIFY_12: u8 = 0xae;
/// VERIFY (12) (SBC-4 5.34).
pub const VERIFY_12: u8 = 0xaf;
/// READ DEFECT DATA (12) (SBC-4 5.19).
pub const READ_DEFECT_DATA_12: u8 = 0xb7;

/// READ CAPACITY (16): service action 10h of SERVICE ACTION IN (16) (SBC-4 5.21).
pub const READ_CAPACITY_16_SA: u16 = 0x10;
/// GET LBA STATUS: service action 12h of SERVICE ACTION IN (16) (SBC-4 5.6).
pub const GET_LBA_STATUS_SA: u16 = 0x12;
/// REPORT SUPPORTED OPERATION CODES: service action 0Ch of MAINTENANCE IN (SPC-5 6.35).
pub const REPORT_SUPPORTED_OPERATION_CODES_SA: u16 = 0x0c;
/// REPORT TARGET PORT GROUPS: service action 0Ah of MAINTENANCE IN (SPC-5 6.36).
pub const REPORT_TARGET_PORT_GROUPS_SA: u16 = 0x0a;
/// SET TARGET PORT GROUPS: service action 0Ah of MAINTENANCE OUT (SPC-5 6.46).
pub const SET_TARGET_PORT_GROUPS_SA: u16 = 0x0a;

/// Whether a command with operation code `op` goes to an asynchronous
/// store as one [`crate::MediumIo`] (READ, WRITE, SYNCHRONIZE CACHE)
/// rather than through its blocking calls.
pub fn is_submitted(op: u8) -> bool {
    matches!(
        op,
        READ_6
            | READ_10
            | READ_12
            | READ_16
            | WRITE_6
            | WRITE_10
            | WRITE_12
            | WRITE_16
            | SYNCHRONIZE_CACHE_10
            | SYNCHRONIZE_CACHE_16
    )
}

/// Whether a command with operation code `op` reads or changes the medium
/// (data, allocation, or the cache), so that on a store whose calls may
/// wait it waits on the device. SERVICE ACTION IN (16) counts for GET LBA
/// STATUS; EXTENDED COPY for the units it copies between.
pub fn touches_medium(op: u8) -> bool {
    matches!(
        op,
        READ_6
            | READ_10
            | READ_12
            | READ_16
            | WRITE_6
            | WRITE_10
            | WRITE_12
            | WRITE_16
            | WRITE_AND_VERIFY_10
            | WRITE_AND_VERIFY_12
            | WRITE_AND_VERIFY_16
            | VERIFY_10
            | VERIFY_12
            | VERIFY_16
            | PRE_FETCH_10
            | PRE_FETCH_16
            | SYNCHRONIZE_CACHE_10
            | SYNCHRONIZE_CACHE_16
            | WRITE_SAME_10
            | WRITE_SAME_16
            | UNMAP
            | SANITIZE
            | EXTENDED_COPY
            | COMPARE_AND_WRITE
            | ORWRITE_16
            | WRITE_ATOMIC_16
            | SERVICE_ACTION_IN_16
    )
}

/// Whether `op` is one of the READ commands: they change nothing before
/// their data is read, so one tried without waiting on the device
/// (`isoe_store::without_waiting`) can be made again in full.
pub fn is_read(op: u8) -> bool {
    matches!(op, READ_6 | READ_10 | READ_12 | READ_16)
}
