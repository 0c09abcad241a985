//! SCSI.Verify10/12/16 and SCSI.WriteVerify10/12/16.

use crate::harness::*;

const VERIFIES: [(u8, usize); 3] = [(0x2f, 10), (0xaf, 12), (0x8f, 16)];
const WRITE_VERIFIES: [(u8, usize); 3] = [(0x2e, 10), (0xae, 12), (0x8e, 16)];
const BYTCHK: u8 = 0x02;

fn fill(unit: &isoe_scsi::LogicalUnit) -> Vec<u8> {
    let data = pattern(BLOCKS as usize * BLOCK_SIZE, 5);
    for (index, chunk) in data.chunks(256 * BLOCK_SIZE).enumerate() {
        let cdb = block_cdb(
            0x8a,
            16,
            index as u64 * 256,
            (chunk.len() / BLOCK_SIZE) as u32,
            0,
        );
        assert_good(run_out(unit, &cdb, chunk).0);
    }
    data
}

#[test]
fn verify_of_matching_data_is_good() {
    let unit = unit();
    let medium = fill(&unit);
    for (opcode, length) in VERIFIES {
        for blocks in [1usize, 2, 100, 256] {
            for lba in [0, BLOCKS as usize - blocks] {
                let expected = &medium[lba * BLOCK_SIZE..(lba + blocks) * BLOCK_SIZE];
                let cdb = block_cdb(opcode, length, lba as u64, blocks as u32, BYTCHK);
                assert_good(run_out(&unit, &cdb, expected).0);
                assert_good(
                    run(
                        &unit,
                        &block_cdb(opcode, length, lba as u64, blocks as u32, 0),
                    )
                    .0,
                );
            }
        }
        // Flags: DPO, and DPO with BYTCHK.
        assert_good(run(&unit, &block_cdb(opcode, length, 0, 1, 0x10)).0);
        assert_good(
            run_out(
                &unit,
                &block_cdb(opcode, length, 0, 1, 0x10 | BYTCHK),
                &medium[..BLOCK_SIZE],
            )
            .0,
        );
    }
}

#[test]
fn mismatch_is_miscompare_with_the_offset_and_ignored_without_bytchk() {
    let unit = unit();
    let medium = fill(&unit);
    for (opcode, length) in VERIFIES {
        for (blocks, flip) in [(1usize, 0usize), (1, 511), (4, 1000), (256, 256 * 512 - 1)] {
            let lba = BLOCKS as usize - blocks;
            let mut data = medium[lba * BLOCK_SIZE..(lba + blocks) * BLOCK_SIZE].to_vec();
            data[flip] ^= b'X';
            let cdb = block_cdb(opcode, length, lba as u64, blocks as u32, BYTCHK);
            let sense = assert_sense(run_out(&unit, &cdb, &data).0, MISCOMPARE, 0x1d, 0x00);
            assert_eq!(sense.information, Some(flip as u64));
            assert_eq!(
                sense.to_fixed()[0],
                0xf0,
                "VALID set with the offset in INFORMATION"
            );
            assert_eq!(be32(&sense.to_fixed(), 3), flip as u32);
            let no_compare = block_cdb(opcode, length, lba as u64, blocks as u32, 0);
            assert_good(run_out(&unit, &no_compare, &data).0);
        }
    }
}

#[test]
fn single_block_compare_checks_every_block() {
    let unit = unit();
    let block = vec![0x5au8; BLOCK_SIZE];
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 8, 3, 0), &block.repeat(3)).0);
    assert_good(run_out(&unit, &block_cdb(0x2f, 10, 8, 3, 0x06), &block).0);
    assert_sense(
        run_out(&unit, &block_cdb(0x2f, 10, 8, 4, 0x06), &block).0,
        MISCOMPARE,
        0x1d,
        0x00,
    );
    assert_invalid_field_in_cdb(run_out(&unit, &block_cdb(0x2f, 10, 8, 1, 0x04), &block).0);
}

#[test]
fn verify_beyond_end_zero_blocks_and_vrprotect() {
    let unit = unit();
    let data = vec![0u8; 256 * BLOCK_SIZE];
    for (opcode, length) in VERIFIES.into_iter().chain(WRITE_VERIFIES) {
        for blocks in [1u32, 2, 256] {
            let cdb = block_cdb(opcode, length, BLOCKS + 1 - u64::from(blocks), blocks, 0);
            assert_lba_out_of_range(run_out(&unit, &cdb, &data).0);
            let minus_one = if length == 16 { u64::MAX } else { 0xffff_ffff };
            assert_lba_out_of_range(
                run_out(
                    &unit,
                    &block_cdb(opcode, length, minus_one, blocks, 0),
                    &data,
                )
                .0,
            );
            assert_lba_out_of_range(
                run_out(
                    &unit,
                    &block_cdb(opcode, length, 0x8000_0000, blocks, 0),
                    &data,
                )
                .0,
            );
        }
        assert_good(run(&unit, &block_cdb(opcode, length, 0, 0, 0)).0);
        assert_lba_out_of_range(run(&unit, &block_cdb(opcode, length, BLOCKS + 1, 0, 0)).0);
        for protect in 1..8u8 {
            let cdb = block_cdb(opcode, length, 0, 1, protect << 5 | BYTCHK);
            assert_invalid_field_in_cdb(run_out(&unit, &cdb, &data[..BLOCK_SIZE]).0);
        }
    }
}

#[test]
fn write_and_verify_writes_and_accepts_dpo_and_bytchk() {
    let (unit, store) = counting_unit();
    for (opcode, length) in WRITE_VERIFIES {
        for blocks in [1u32, 7, 256] {
            let data = pattern(blocks as usize * BLOCK_SIZE, opcode);
            let lba = BLOCKS - u64::from(blocks);
            let before = store.flush_count();
            assert_good(run_out(&unit, &block_cdb(opcode, length, lba, blocks, 0), &data).0);
            assert!(
                store.flush_count() > before,
                "written to the medium before GOOD"
            );
            let (_, back) = run(&unit, &block_cdb(0x88, 16, lba, blocks, 0));
            assert!(back == data);
        }
        let data = vec![1u8; BLOCK_SIZE];
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x10), &data).0);
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 1, BYTCHK), &data).0);
        assert_invalid_field_in_cdb(
            run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x04), &data).0,
        );
    }
    let read_only = read_only_unit();
    for (opcode, length) in WRITE_VERIFIES {
        let cdb = block_cdb(opcode, length, 0, 1, 0);
        assert_sense(
            run_out(&read_only, &cdb, &[0u8; BLOCK_SIZE]).0,
            DATA_PROTECT,
            0x27,
            0x00,
        );
    }
}
