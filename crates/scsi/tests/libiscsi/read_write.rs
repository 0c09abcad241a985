//! SCSI.Read6/10/12/16 and SCSI.Write10/12/16 (Simple, BeyondEol, ZeroBlocks,
//! ReadProtect/WriteProtect, DpoFua) plus iSCSI residual behaviour.

use crate::harness::*;

const READS: [(u8, usize); 4] = [(0x08, 6), (0x28, 10), (0xa8, 12), (0x88, 16)];
const WRITES: [(u8, usize); 4] = [(0x0a, 6), (0x2a, 10), (0xaa, 12), (0x8a, 16)];

#[test]
fn write_then_read_round_trips_at_start_and_end() {
    let unit = unit();
    for ((write, length), (read, _)) in WRITES.into_iter().zip(READS) {
        for blocks in [1u32, 2, 17, 255] {
            for lba in [0, BLOCKS - u64::from(blocks)] {
                let data = pattern(blocks as usize * BLOCK_SIZE, blocks as u8 ^ write);
                assert_good(run_out(&unit, &block_cdb(write, length, lba, blocks, 0), &data).0);
                let (completion, back) = run(&unit, &block_cdb(read, length, lba, blocks, 0));
                assert_good(completion);
                assert!(back == data, "opcode {read:#x} lba {lba} blocks {blocks}");
            }
        }
    }
}

#[test]
fn read6_and_write6_length_zero_means_256_blocks() {
    let unit = unit();
    let data = pattern(256 * BLOCK_SIZE, 3);
    assert_good(run_out(&unit, &block_cdb(0x0a, 6, 10, 0, 0), &data).0);
    let (completion, back) = run(&unit, &block_cdb(0x08, 6, 10, 0, 0));
    assert_good(completion);
    assert_eq!(back.len(), 256 * BLOCK_SIZE);
    assert!(back == data);
}

#[test]
fn beyond_end_of_lun_is_lba_out_of_range() {
    let unit = unit();
    for (opcode, length) in READS.into_iter().chain(WRITES) {
        let data = vec![0u8; 256 * BLOCK_SIZE];
        let max_blocks = if length == 6 { 255 } else { 256 };
        for blocks in 1..=max_blocks {
            let one_past = block_cdb(opcode, length, BLOCKS + 1 - u64::from(blocks), blocks, 0);
            assert_lba_out_of_range(run_out(&unit, &one_past, &data).0);
            if blocks >= 2 {
                let all_but_one = block_cdb(opcode, length, BLOCKS - 1, blocks, 0);
                assert_lba_out_of_range(run_out(&unit, &all_but_one, &data).0);
            }
            let far = match length {
                6 => 0x1f_ffff,
                10 | 12 => 0x8000_0000,
                _ => 0x8000_0000_0000_0000,
            };
            assert_lba_out_of_range(
                run_out(&unit, &block_cdb(opcode, length, far, blocks, 0), &data).0,
            );
            if length > 6 {
                let minus_one = if length == 16 { u64::MAX } else { 0xffff_ffff };
                assert_lba_out_of_range(
                    run_out(
                        &unit,
                        &block_cdb(opcode, length, minus_one, blocks, 0),
                        &data,
                    )
                    .0,
                );
            }
        }
    }
}

#[test]
fn zero_blocks_succeed_in_range_and_fail_past_the_end() {
    let unit = unit();
    for (opcode, length) in READS
        .into_iter()
        .chain(WRITES)
        .filter(|&(_, length)| length > 6)
    {
        let (completion, data) = run(&unit, &block_cdb(opcode, length, 0, 0, 0));
        assert_good(completion);
        assert!(data.is_empty());
        assert_good(run(&unit, &block_cdb(opcode, length, BLOCKS - 1, 0, 0)).0);
        for lba in [BLOCKS + 1, 0x8000_0000, 0xffff_ffff] {
            assert_lba_out_of_range(run(&unit, &block_cdb(opcode, length, lba, 0, 0)).0);
        }
    }
}

#[test]
fn nonzero_rdprotect_and_wrprotect_are_invalid_fields() {
    let unit = unit();
    let data = vec![0u8; BLOCK_SIZE];
    for (opcode, length) in READS
        .into_iter()
        .chain(WRITES)
        .filter(|&(_, length)| length > 6)
    {
        for protect in 1..8u8 {
            let cdb = block_cdb(opcode, length, 0, 1, protect << 5);
            let sense = assert_invalid_field_in_cdb(run_out(&unit, &cdb, &data).0);
            let pointer = sense.field_pointer.unwrap();
            assert_eq!(
                (pointer.c_d, pointer.byte, pointer.bit_pointer),
                (true, 1, Some(7))
            );
        }
    }
}

#[test]
fn dpo_and_fua_are_accepted_and_fua_flushes() {
    let (unit, store) = counting_unit();
    let data = vec![7u8; BLOCK_SIZE];
    for (opcode, length) in READS.into_iter().filter(|&(_, length)| length > 6) {
        for flags in [0x10, 0x08, 0x18] {
            assert_good(run(&unit, &block_cdb(opcode, length, 0, 1, flags)).0);
        }
    }
    for (opcode, length) in WRITES.into_iter().filter(|&(_, length)| length > 6) {
        let before = store.flush_count();
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x10), &data).0);
        assert_eq!(store.flush_count(), before, "DPO alone does not flush");
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x08), &data).0);
        assert_eq!(store.flush_count(), before + 1, "FUA flushes before GOOD");
        assert_good(run_out(&unit, &block_cdb(opcode, length, 0, 1, 0x18), &data).0);
        assert_eq!(store.flush_count(), before + 2);
    }
}

#[test]
fn writes_to_a_read_only_unit_are_write_protected() {
    let unit = read_only_unit();
    let data = vec![0u8; BLOCK_SIZE];
    for (opcode, length) in WRITES {
        assert_sense(
            run_out(&unit, &block_cdb(opcode, length, 0, 1, 0), &data).0,
            DATA_PROTECT,
            0x27,
            0x00,
        );
    }
    assert_good(run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0);
}

#[test]
fn transfers_past_the_maximum_transfer_length_are_invalid_fields() {
    // 32 MiB: 65536 blocks, more than READ (10) can ask for, so READ (16).
    let unit = unit_with(config(), (1 << 16) + 1);
    let (_, limits) = run(&unit, &inquiry(true, 0xb0, 64));
    let maximum = be32(&limits, 8);
    assert_eq!(maximum, 1 << 16);
    assert_good(run(&unit, &block_cdb(0x88, 16, 0, maximum, 0)).0);
    let sense = assert_invalid_field_in_cdb(run(&unit, &block_cdb(0x88, 16, 0, maximum + 1, 0)).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 10);
    assert_invalid_field_in_cdb(run(&unit, &block_cdb(0x88, 16, 0, u32::MAX, 0)).0);
}

#[test]
fn short_data_out_writes_only_the_whole_blocks_received() {
    // iSCSIResiduals: EDTL below the transfer length is GOOD and writes only
    // what arrived; a partial block is not written.
    let unit = unit();
    let a = vec![b'a'; 2 * BLOCK_SIZE];
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 0, 2, 0), &a).0);
    let b = vec![b'b'; 2 * BLOCK_SIZE];
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 0, 2, 0), &b[..BLOCK_SIZE]).0);
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 1, 1, 0), &b[..200]).0);
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 1, 1, 0), &[]).0);
    let (_, back) = run(&unit, &block_cdb(0x28, 10, 0, 2, 0));
    assert!(back[..BLOCK_SIZE].iter().all(|&x| x == b'b'));
    assert!(back[BLOCK_SIZE..].iter().all(|&x| x == b'a'));
    // More Data-Out than the CDB asks for: only the CDB's blocks are written.
    assert_good(
        run_out(
            &unit,
            &block_cdb(0x2a, 10, 0, 1, 0),
            &[b'c'; 2 * BLOCK_SIZE],
        )
        .0,
    );
    let (_, back) = run(&unit, &block_cdb(0x28, 10, 0, 2, 0));
    assert!(back[..BLOCK_SIZE].iter().all(|&x| x == b'c'));
    assert!(back[BLOCK_SIZE..].iter().all(|&x| x == b'a'));
}

#[test]
fn naca_in_the_control_byte_is_refused_and_unknown_opcodes_are_invalid() {
    let unit = unit();
    let mut cdb = block_cdb(0x28, 10, 0, 1, 0);
    cdb[9] = 0x04;
    let sense = assert_invalid_field_in_cdb(run(&unit, &cdb).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 9);
    for opcode in [0x3bu8, 0x8c, 0x7f, 0xc0, 0x02] {
        let mut cdb = vec![0u8; 16];
        cdb[0] = opcode;
        assert_invalid_opcode(run(&unit, &cdb).0);
    }
    assert_invalid_field_in_cdb(run(&unit, &[0x28, 0, 0]).0);
    assert_invalid_opcode(run(&unit, &[]).0);
}

#[test]
fn failed_commands_return_no_data_in() {
    let unit = unit();
    let mut data_in = vec![1, 2, 3];
    let completion = unit.execute(
        &nexus(),
        &isoe_scsi::NoUnits,
        &block_cdb(0x28, 10, BLOCKS, 1, 0),
        &[],
        &mut data_in,
    );
    assert_lba_out_of_range(completion);
    assert!(data_in.is_empty());
}

/// A READ of 128 KiB or more from a memory unit comes back as the store's
/// memory, lent; one shorter as a copy. A write after the READ does not
/// change the lent data, and the next READ sees the write.
#[test]
fn large_reads_lend_store_memory_that_a_later_write_leaves_alone() {
    let unit = unit();
    let blocks = 256u32; // 128 KiB
    let old = pattern(blocks as usize * BLOCK_SIZE, 1);
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 8, blocks, 0), &old).0);
    let mut data_in = Vec::new();
    let read = block_cdb(0x28, 10, 8, blocks, 0);
    let outcome = unit.start(&nexus(), &isoe_scsi::NoUnits, &read, &[], &mut data_in);
    let isoe_scsi::Outcome::Lent(lent) = outcome else {
        panic!("a 128 KiB read is lent, got {outcome:?}");
    };
    assert!(data_in.is_empty(), "nothing copied");
    let new = pattern(blocks as usize * BLOCK_SIZE, 2);
    assert_good(run_out(&unit, &block_cdb(0x2a, 10, 8, blocks, 0), &new).0);
    let mut sent = Vec::new();
    lent.copy_to(&mut sent);
    assert!(sent == old, "the lent data is what was read");
    let (completion, back) = run(&unit, &read);
    assert_good(completion);
    assert!(back == new, "a later read sees the write");
    let short = block_cdb(0x28, 10, 8, blocks - 1, 0);
    let outcome = unit.start(&nexus(), &isoe_scsi::NoUnits, &short, &[], &mut data_in);
    assert!(
        matches!(outcome, isoe_scsi::Outcome::Done(ref c) if c.is_good()),
        "a shorter read is copied: {outcome:?}"
    );
    assert!(data_in[..] == new[..new.len() - BLOCK_SIZE]);
}
