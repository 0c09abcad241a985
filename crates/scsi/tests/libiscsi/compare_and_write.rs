//! SCSI.CompareAndWrite and MultipathIO.CompareAndWriteAsync: COMPARE AND
//! WRITE compares, writes only on a match, reports the first differing byte,
//! and is atomic against every other writer.

use std::sync::atomic::{AtomicBool, Ordering};

use isoe_scsi::{Completion, LogicalUnit};

use crate::harness::*;

fn write(unit: &LogicalUnit, lba: u64, data: &[u8]) {
    let blocks = (data.len() / BLOCK_SIZE) as u32;
    assert_good(run_out(unit, &block_cdb(0x8a, 16, lba, blocks, 0), data).0);
}

fn read(unit: &LogicalUnit, lba: u64, blocks: u32) -> Vec<u8> {
    let (completion, data) = run(unit, &block_cdb(0x88, 16, lba, blocks, 0));
    assert_good(completion);
    data
}

fn caw(unit: &LogicalUnit, lba: u64, verify: &[u8], new: &[u8]) -> Completion {
    let blocks = (verify.len() / BLOCK_SIZE) as u8;
    run_out(unit, &caw_cdb(lba, blocks, 0), &[verify, new].concat()).0
}

#[test]
fn match_writes_and_miscompare_reports_the_first_differing_byte() {
    let unit = unit();
    for (lba, blocks) in [(0u64, 1usize), (7, 3), (BLOCKS - 255, 255)] {
        let old = pattern(blocks * BLOCK_SIZE, 1);
        let new = pattern(blocks * BLOCK_SIZE, 2);
        write(&unit, lba, &old);
        assert_good(caw(&unit, lba, &old, &new));
        assert_eq!(read(&unit, lba, blocks as u32), new);

        let mut stale = new.clone();
        let differing_at = blocks * BLOCK_SIZE - 27;
        stale[differing_at] ^= 0xff;
        let sense = assert_sense(caw(&unit, lba, &stale, &old), MISCOMPARE, 0x1d, 0x00);
        assert_eq!(sense.information, Some(differing_at as u64));
        assert_eq!(read(&unit, lba, blocks as u32), new, "nothing written");
    }
}

#[test]
fn refusals() {
    let unit = unit();
    let two_blocks = [0u8; 2 * BLOCK_SIZE];
    // Zero blocks: no compare, no write, not an error.
    assert_good(run(&unit, &caw_cdb(0, 0, 0)).0);
    // DPO and FUA are honoured (the mode page says DPOFUA).
    assert_good(run_out(&unit, &caw_cdb(0, 1, 0x18), &two_blocks).0);
    // Past the end of the medium.
    assert_lba_out_of_range(run_out(&unit, &caw_cdb(BLOCKS, 1, 0), &two_blocks).0);
    assert_lba_out_of_range(run_out(&unit, &caw_cdb(u64::MAX, 1, 0), &two_blocks).0);
    // WRPROTECT without protection information.
    let sense = assert_invalid_field_in_cdb(run_out(&unit, &caw_cdb(0, 1, 0x20), &two_blocks).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 1);
    // Less Data-Out than two times the blocks.
    assert_sense(
        run_out(&unit, &caw_cdb(0, 2, 0), &two_blocks).0,
        ILLEGAL_REQUEST,
        0x0e,
        0x03,
    );
    assert_sense(
        run_out(&read_only_unit(), &caw_cdb(0, 1, 0), &two_blocks).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
}

#[test]
fn block_limits_advertise_the_maximum_and_supported_opcodes_list_it() {
    let unit = unit();
    let (_, limits) = run(&unit, &inquiry(true, 0xb0, 64));
    assert_eq!(limits[5], 255, "MAXIMUM COMPARE AND WRITE LENGTH");
    let (completion, one) = run(&unit, &report_supported_opcodes(false, 1, 0x89, 0, 64));
    assert_good(completion);
    assert_eq!(one[1] & 0x07, 0x03, "supported");
    assert_eq!(one[4 + 1] & 0x18, 0x18, "DPO and FUA in the usage data");
}

#[test]
fn transport_refuses_a_data_out_of_another_length() {
    let unit = unit();
    let cdb = caw_cdb(0, 1, 0);
    assert!(unit
        .check_data_out_length(&cdb, 2 * BLOCK_SIZE as u32)
        .is_ok());
    for wrong in [0, BLOCK_SIZE as u32, 4 * BLOCK_SIZE as u32] {
        let completion = unit.check_data_out_length(&cdb, wrong).unwrap_err();
        assert_invalid_field_in_cdb(completion);
    }
    // Zero blocks with data: the count was wrapped or is wrong.
    assert!(unit.check_data_out_length(&caw_cdb(0, 0, 0), 512).is_err());
    // READ and WRITE keep iSCSI residual semantics.
    let write = block_cdb(0x8a, 16, 0, 1, 0);
    assert!(unit
        .check_data_out_length(&write, 4 * BLOCK_SIZE as u32)
        .is_ok());
}

/// Threads increment a counter with COMPARE AND WRITE retry loops while
/// others WRITE neighbouring blocks in the same lock stripes. The counter
/// straddles a memory chunk boundary (1 MiB, LBA 2048), so without the range
/// lock two compares could both see the same old value and an increment
/// would be lost.
#[test]
fn concurrent_compare_and_write_counters_end_exact() {
    const THREADS: u64 = 4;
    const INCREMENTS: u64 = 200;
    let unit = unit();
    let counter_lba = 2047;
    let encode = |value: u64| -> Vec<u8> {
        (0..2 * BLOCK_SIZE / 8)
            .flat_map(|_| value.to_le_bytes())
            .collect()
    };
    write(&unit, counter_lba, &encode(0));
    let writers_done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for writer in 0..2u8 {
            let (unit, writers_done) = (&unit, &writers_done);
            scope.spawn(move || {
                let noise = pattern(4 * BLOCK_SIZE, writer);
                let lba = if writer == 0 { 2040 } else { 2050 };
                while !writers_done.load(Ordering::Relaxed) {
                    write(unit, lba, &noise);
                }
            });
        }
        let counters: Vec<_> = (0..THREADS)
            .map(|_| {
                let unit = &unit;
                scope.spawn(move || {
                    for _ in 0..INCREMENTS {
                        loop {
                            let current = read(unit, counter_lba, 2);
                            let value = u64::from_le_bytes(current[..8].try_into().unwrap());
                            let completion = caw(unit, counter_lba, &current, &encode(value + 1));
                            if completion.is_good() {
                                break;
                            }
                            assert_sense(completion, MISCOMPARE, 0x1d, 0x00);
                        }
                    }
                })
            })
            .collect();
        for counter in counters {
            counter.join().unwrap();
        }
        writers_done.store(true, Ordering::Relaxed);
    });
    let last = read(&unit, counter_lba, 2);
    let value = u64::from_le_bytes(last[..8].try_into().unwrap());
    assert_eq!(value, THREADS * INCREMENTS, "increments lost");
    assert!(last == encode(value), "torn counter");
}
