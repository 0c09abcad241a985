//! Fuzzes the SCSI device server: arbitrary CDBs and Data-Out through
//! `LogicalUnit::execute` on a small memory-backed unit.
//!
//! Input layout: one byte picks the unit (512 or 4096-byte blocks, read-only
//! or not, a pending unit attention or not); then commands, each a length
//! byte and that many CDB bytes (at most 32), a big-endian u16 Data-Out
//! length and that many bytes. The commands run in order on one unit, so
//! writes, UNMAP and reads meet.
//!
//! Checked on every completion (what the transport relies on):
//! sense is present exactly when the status is CHECK CONDITION; a failed
//! command returns no Data-In; Data-In never exceeds what the CDB says it
//! transfers (the allocation length, or the blocks read), and commands that
//! transfer nothing in, or out, return none; a CDB whose length cannot be
//! known fails.
#![no_main]

use std::sync::Arc;

use isoe_scsi::{DataDirection, LogicalUnit, LunConfig, Nexus, NoUnits, Sense, Status};
use isoe_store::MemoryStore;
use libfuzzer_sys::fuzz_target;

/// Small enough to build per input, large enough for several 4096-byte blocks.
const UNIT_BYTES: u64 = 64 << 10;
/// iSCSI carries 16 bytes of CDB in the BHS plus up to 16 more in an AHS.
const CDB_BYTES_MAX: usize = 32;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let config = LunConfig {
        block_size: if selector & 1 == 0 { 512 } else { 4096 },
        read_only: selector & 2 != 0,
        ..LunConfig::default()
    };
    let unit = LogicalUnit::new(Arc::new(MemoryStore::new(UNIT_BYTES)), config);
    let nexus = Nexus::new("iqn.2026-11.test:fuzz", [0x80, 0, 0, 0, 0, 1]);
    unit.attach(&nexus);
    if selector & 4 != 0 {
        // SAM-5 6.6: a reset leaves a unit attention for the next command.
        unit.reset(Sense::new(0x06, 0x29, 0x00));
    }
    let mut data_in = Vec::new();
    while let Some((&cdb_len, after)) = rest.split_first() {
        let cdb_len = usize::from(cdb_len) % (CDB_BYTES_MAX + 1);
        if after.len() < cdb_len + 2 {
            return;
        }
        let (cdb, after) = after.split_at(cdb_len);
        let out_len = usize::from(u16::from_be_bytes([after[0], after[1]]));
        let after = &after[2..];
        let (data_out, after) = after.split_at(out_len.min(after.len()));
        rest = after;

        let expected = unit.transfer_length(cdb);
        data_in.clear();
        let completion = unit.execute(&nexus, &NoUnits, cdb, data_out, &mut data_in);

        assert_eq!(
            completion.status == Status::CheckCondition,
            completion.sense.is_some(),
            "sense iff CHECK CONDITION: {completion:?}"
        );
        if !completion.is_good() {
            assert!(data_in.is_empty(), "Data-In on a failed command");
        }
        match expected {
            Ok((DataDirection::In, bytes)) => assert!(
                data_in.len() <= bytes as usize,
                "{} bytes of Data-In for a CDB that allows {bytes}: {cdb:02x?}",
                data_in.len()
            ),
            Ok((DataDirection::Out | DataDirection::None, _)) => assert!(
                data_in.is_empty(),
                "Data-In for a CDB that transfers none in: {cdb:02x?}"
            ),
            Err(_) => assert_eq!(
                completion.status,
                Status::CheckCondition,
                "a CDB of unknown length succeeded: {cdb:02x?}"
            ),
        }
    }
});
