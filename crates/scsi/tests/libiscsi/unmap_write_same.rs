//! UNMAP and WRITE SAME (10/16): the thin provisioning commands the
//! Logical Block Provisioning VPD page advertises.

use crate::harness::*;

fn write_ones(unit: &isoe_scsi::LogicalUnit, lba: u64, blocks: u32) {
    let data = vec![0xffu8; blocks as usize * BLOCK_SIZE];
    assert_good(run_out(unit, &block_cdb(0x8a, 16, lba, blocks, 0), &data).0);
}

fn read_blocks(unit: &isoe_scsi::LogicalUnit, lba: u64, blocks: u32) -> Vec<u8> {
    let (completion, data) = run(unit, &block_cdb(0x88, 16, lba, blocks, 0));
    assert_good(completion);
    data
}

#[test]
fn unmapped_ranges_read_back_as_zeros() {
    let unit = unit();
    write_ones(&unit, 0, 64);
    let parameters = unmap_parameters(&[(1, 2), (10, 5), (40, 0)]);
    assert_good(
        run_out(
            &unit,
            &unmap_cdb(false, parameters.len() as u16),
            &parameters,
        )
        .0,
    );
    let data = read_blocks(&unit, 0, 64);
    for (block, bytes) in data.chunks(BLOCK_SIZE).enumerate() {
        let unmapped = (1..3).contains(&block) || (10..15).contains(&block);
        assert!(
            bytes.iter().all(|&b| b == if unmapped { 0 } else { 0xff }),
            "block {block}"
        );
    }
}

#[test]
fn unmap_checks_everything_before_unmapping_anything() {
    let unit = unit();
    write_ones(&unit, 0, 4);
    let parameters = unmap_parameters(&[(0, 4), (BLOCKS - 1, 2)]);
    assert_lba_out_of_range(
        run_out(
            &unit,
            &unmap_cdb(false, parameters.len() as u16),
            &parameters,
        )
        .0,
    );
    assert!(read_blocks(&unit, 0, 4).iter().all(|&b| b == 0xff));

    assert_good(run(&unit, &unmap_cdb(false, 0)).0);
    assert_invalid_field_in_cdb(
        run_out(&unit, &unmap_cdb(true, 24), &unmap_parameters(&[(0, 1)])).0,
    );
    assert_sense(
        run_out(&unit, &unmap_cdb(false, 4), &[0; 4]).0,
        ILLEGAL_REQUEST,
        0x1a,
        0x00,
    );
    let too_many: Vec<(u64, u32)> = (0..257).map(|i| (i, 1)).collect();
    let parameters = unmap_parameters(&too_many);
    assert_sense(
        run_out(
            &unit,
            &unmap_cdb(false, parameters.len() as u16),
            &parameters,
        )
        .0,
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    let parameters = unmap_parameters(&[(0, 1)]);
    assert_sense(
        run_out(
            &read_only_unit(),
            &unmap_cdb(false, parameters.len() as u16),
            &parameters,
        )
        .0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
}

#[test]
fn write_same_repeats_one_block() {
    let unit = unit();
    for (opcode, length) in [(0x41u8, 10usize), (0x93, 16)] {
        let block = pattern(BLOCK_SIZE, opcode);
        assert_good(run_out(&unit, &block_cdb(opcode, length, 100, 300, 0), &block).0);
        let data = read_blocks(&unit, 100, 300);
        assert!(data.chunks(BLOCK_SIZE).all(|b| b == block));
        // With UNMAP and a zero block the range is deallocated; it reads zeros.
        assert_good(
            run_out(
                &unit,
                &block_cdb(opcode, length, 100, 300, 0x08),
                &[0; BLOCK_SIZE],
            )
            .0,
        );
        assert!(read_blocks(&unit, 100, 300).iter().all(|&b| b == 0));
        // UNMAP unmaps whatever the block holds (SBC-4: UNMAP=1, ANCHOR=0
        // is an unmap operation); the range reads zeros, not the block.
        write_ones(&unit, 100, 16);
        assert_good(run_out(&unit, &block_cdb(opcode, length, 100, 16, 0x08), &block).0);
        assert!(read_blocks(&unit, 100, 16).iter().all(|&b| b == 0));
        write_ones(&unit, 0, 8);
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 8, 0), &[0; BLOCK_SIZE]).0);
        assert!(read_blocks(&unit, 0, 8).iter().all(|&b| b == 0));
    }
    write_ones(&unit, 0, 8);
    assert_good(run(&unit, &block_cdb(0x93, 16, 0, 8, 0x09)).0);
    assert!(
        read_blocks(&unit, 0, 8).iter().all(|&b| b == 0),
        "NDOB writes zeros"
    );
}

#[test]
fn write_same_refusals() {
    let unit = unit();
    let block = [1u8; BLOCK_SIZE];
    for (opcode, length) in [(0x41u8, 10usize), (0x93, 16)] {
        assert_lba_out_of_range(
            run_out(&unit, &block_cdb(opcode, length, BLOCKS - 1, 2, 0), &block).0,
        );
        assert_invalid_field_in_cdb(
            run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x10), &block).0,
        );
        assert_invalid_field_in_cdb(
            run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x20), &block).0,
        );
        assert_sense(
            run_out(&unit, &block_cdb(opcode, length, 0, 1, 0), &block[..10]).0,
            ILLEGAL_REQUEST,
            0x0e,
            0x03,
        );
        let read_only = read_only_unit();
        assert_sense(
            run_out(&read_only, &block_cdb(opcode, length, 0, 1, 0), &block).0,
            DATA_PROTECT,
            0x27,
            0x00,
        );
    }
    assert_invalid_field_in_cdb(run_out(&unit, &block_cdb(0x41, 10, 0, 1, 0x01), &block).0);
}

#[test]
fn write_same_of_zero_blocks_reaches_the_last_lba() {
    let unit = unit();
    let block = pattern(BLOCK_SIZE, 4);
    for (opcode, length) in [(0x41u8, 10usize), (0x93, 16)] {
        write_ones(&unit, 0, 8);
        assert_good(run_out(&unit, &block_cdb(opcode, length, BLOCKS - 3, 0, 0), &block).0);
        let data = read_blocks(&unit, BLOCKS - 4, 4);
        assert!(data[..BLOCK_SIZE].iter().all(|&b| b == 0));
        assert!(data[BLOCK_SIZE..].chunks(BLOCK_SIZE).all(|b| b == block));
        assert!(read_blocks(&unit, 0, 8).iter().all(|&b| b == 0xff));
        assert_lba_out_of_range(run_out(&unit, &block_cdb(opcode, length, BLOCKS, 0, 0), &block).0);
    }
    // Zero blocks from LBA 0 is the whole medium.
    assert_good(run_out(&unit, &block_cdb(0x93, 16, 0, 0, 0x08), &[0; BLOCK_SIZE]).0);
    assert!(read_blocks(&unit, 0, 8).iter().all(|&b| b == 0));
    // More than MAXIMUM WRITE SAME LENGTH (1 Mi blocks) to the end is refused.
    let big = unit_with(config(), (1 << 20) + 1);
    let sense = assert_invalid_field_in_cdb(run_out(&big, &block_cdb(0x93, 16, 0, 0, 0), &block).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 10);
    assert_good(run_out(&big, &block_cdb(0x93, 16, 1, 0, 0x08), &[0; BLOCK_SIZE]).0);
}

#[test]
fn transport_refuses_a_write_same_data_out_other_than_one_block() {
    let unit = unit();
    for (opcode, length) in [(0x41u8, 10usize), (0x93, 16)] {
        let cdb = block_cdb(opcode, length, 0, 8, 0x08);
        assert!(unit.check_data_out_length(&cdb, BLOCK_SIZE as u32).is_ok());
        for wrong in [BLOCK_SIZE as u32 / 2, 2 * BLOCK_SIZE as u32] {
            let completion = unit.check_data_out_length(&cdb, wrong).unwrap_err();
            assert_sense(completion, ILLEGAL_REQUEST, 0x0e, 0x03);
        }
    }
    // NDOB: no Data-Out at all is the right amount.
    let ndob = block_cdb(0x93, 16, 0, 8, 0x09);
    assert!(unit.check_data_out_length(&ndob, 0).is_ok());
}
