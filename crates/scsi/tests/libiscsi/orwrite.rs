//! SCSI.OrWrite: ORWRITE (16) ORs the Data-Out into the medium.

use crate::harness::*;

fn orwrite_cdb(lba: u64, blocks: u32, byte1: u8) -> Vec<u8> {
    block_cdb(0x8b, 16, lba, blocks, byte1)
}

#[test]
fn ors_into_the_medium() {
    let unit = unit();
    for (lba, blocks) in [(0u64, 1u32), (BLOCKS - 256, 256)] {
        let length = blocks as usize * BLOCK_SIZE;
        let zeros = vec![0u8; length];
        assert_good(run_out(&unit, &block_cdb(0x8a, 16, lba, blocks, 0), &zeros).0);
        assert_good(run_out(&unit, &orwrite_cdb(lba, blocks, 0), &vec![0xa5; length]).0);
        assert_good(run_out(&unit, &orwrite_cdb(lba, blocks, 0x18), &vec![0x5a; length]).0);
        let (completion, data) = run(&unit, &block_cdb(0x88, 16, lba, blocks, 0));
        assert_good(completion);
        assert!(data.iter().all(|&b| b == 0xff));
    }
    let mixed = pattern(BLOCK_SIZE, 3);
    let ored = pattern(BLOCK_SIZE, 9);
    assert_good(run_out(&unit, &block_cdb(0x8a, 16, 5, 1, 0), &mixed).0);
    assert_good(run_out(&unit, &orwrite_cdb(5, 1, 0), &ored).0);
    let (_, data) = run(&unit, &block_cdb(0x88, 16, 5, 1, 0));
    let expected: Vec<u8> = mixed.iter().zip(&ored).map(|(a, b)| a | b).collect();
    assert_eq!(data, expected);
}

#[test]
fn refusals() {
    let unit = unit();
    let block = [1u8; BLOCK_SIZE];
    assert_good(run(&unit, &orwrite_cdb(0, 0, 0)).0);
    assert_good(run(&unit, &orwrite_cdb(BLOCKS - 1, 0, 0)).0);
    assert_lba_out_of_range(run_out(&unit, &orwrite_cdb(BLOCKS, 1, 0), &block).0);
    assert_lba_out_of_range(run_out(&unit, &orwrite_cdb(u64::MAX, 1, 0), &block).0);
    for orprotect in 1..8u8 {
        let sense = assert_invalid_field_in_cdb(
            run_out(&unit, &orwrite_cdb(0, 1, orprotect << 5), &block).0,
        );
        assert_eq!(sense.field_pointer.unwrap().byte, 1);
    }
    assert_sense(
        run_out(&read_only_unit(), &orwrite_cdb(0, 1, 0), &block).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
    let (_, data) = run(&unit, &block_cdb(0x88, 16, 0, 1, 0));
    assert!(
        data.iter().all(|&b| b == 0),
        "refused ORWRITEs changed nothing"
    );
}
