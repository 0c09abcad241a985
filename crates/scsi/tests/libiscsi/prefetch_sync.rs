//! SCSI.Prefetch10/16 and SYNCHRONIZE CACHE (10/16).

use crate::harness::*;

const PRE_FETCHES: [(u8, usize); 2] = [(0x34, 10), (0x90, 16)];
const SYNCS: [(u8, usize); 2] = [(0x35, 10), (0x91, 16)];

#[test]
fn pre_fetch_in_range_is_good_not_condition_met() {
    let unit = unit();
    for (opcode, length) in PRE_FETCHES {
        for blocks in 1..=256u32 {
            assert_good(run(&unit, &block_cdb(opcode, length, 0, blocks, 0)).0);
            assert_good(
                run(
                    &unit,
                    &block_cdb(opcode, length, BLOCKS - u64::from(blocks), blocks, 0),
                )
                .0,
            );
        }
        // IMMED, GROUP NUMBER 3, both.
        for (byte1, group) in [(0x02u8, 0u8), (0, 3), (0x02, 3)] {
            let mut cdb = block_cdb(opcode, length, 0, 1, byte1);
            cdb[if length == 10 { 6 } else { 14 }] = group;
            assert_good(run(&unit, &cdb).0);
        }
    }
}

#[test]
fn pre_fetch_and_sync_range_checks() {
    let unit = unit();
    for (opcode, length) in PRE_FETCHES.into_iter().chain(SYNCS) {
        for blocks in 1..=256u32 {
            assert_lba_out_of_range(
                run(
                    &unit,
                    &block_cdb(opcode, length, BLOCKS + 1 - u64::from(blocks), blocks, 0),
                )
                .0,
            );
            assert_lba_out_of_range(
                run(&unit, &block_cdb(opcode, length, 0x8000_0000, blocks, 0)).0,
            );
            let minus_one = if length == 16 { u64::MAX } else { 0xffff_ffff };
            assert_lba_out_of_range(run(&unit, &block_cdb(opcode, length, minus_one, blocks, 0)).0);
            if blocks > 1 {
                assert_lba_out_of_range(
                    run(&unit, &block_cdb(opcode, length, BLOCKS - 1, blocks, 0)).0,
                );
            }
        }
        assert_good(run(&unit, &block_cdb(opcode, length, 0, 0, 0)).0);
        for lba in [BLOCKS + 1, 0x8000_0000, 0xffff_ffff] {
            assert_lba_out_of_range(run(&unit, &block_cdb(opcode, length, lba, 0, 0)).0);
        }
    }
}

#[test]
fn synchronize_cache_flushes_the_store() {
    let (unit, store) = counting_unit();
    for (opcode, length) in SYNCS {
        for (lba, blocks, immed) in [(0, BLOCKS as u32, 0x02u8), (0, 0, 0), (10, 5, 0)] {
            let before = store.flush_count();
            assert_good(run(&unit, &block_cdb(opcode, length, lba, blocks, immed)).0);
            assert_eq!(store.flush_count(), before + 1);
        }
    }
}
