//! SCSI.Sanitize: OVERWRITE, BLOCK ERASE, CRYPTOGRAPHIC ERASE, EXIT FAILURE
//! MODE, IMMED, and the CDB and parameter list checks.

use std::time::{Duration, Instant};

use isoe_scsi::{Completion, LogicalUnit, LunConfig, NoUnits, Outcome};

use crate::harness::*;

const NOT_READY: u8 = 0x02;

fn overwrite(unit: &LogicalUnit, byte1: u8, list: &[u8]) -> Completion {
    run_out(unit, &sanitize_cdb(byte1 | 0x01, list.len() as u16), list).0
}

#[test]
fn overwrite_repeats_the_pattern_in_every_block() {
    let unit = unit();
    fill(&unit, 0, 16, b'a');
    fill(&unit, BLOCKS - 16, 16, b'a');
    assert_good(overwrite(&unit, 0, &overwrite_list(1, &[1, 2, 3, 4])));
    let expected: Vec<u8> = [1u8, 2, 3, 4].repeat(BLOCK_SIZE / 4);
    assert_eq!(read(&unit, 0, 1), expected);
    assert_eq!(read(&unit, BLOCKS - 1, 1), expected);
    // A pattern that does not divide the block starts again in each block.
    assert_good(overwrite(
        &unit,
        0,
        &overwrite_list(1, &[7; 100])[..4 + 100],
    ));
    let block = read(&unit, 3, 1);
    assert!(block.iter().all(|&b| b == 7));
}

#[test]
fn invert_flips_the_pattern_between_passes() {
    let unit = unit();
    let mut list = overwrite_list(2, &[0x0f]);
    list[0] |= 0x80;
    assert_good(overwrite(&unit, 0, &list));
    assert_eq!(
        read(&unit, 5, 1),
        vec![0xf0; BLOCK_SIZE],
        "second pass inverted"
    );
    let mut list = overwrite_list(3, &[0x0f]);
    list[0] |= 0x80;
    assert_good(overwrite(&unit, 0, &list));
    assert_eq!(read(&unit, 5, 1), vec![0x0f; BLOCK_SIZE], "third pass not");
}

#[test]
fn block_erase_and_cryptographic_erase_leave_zeros() {
    for service_action in [0x02u8, 0x03] {
        let unit = unit();
        fill(&unit, 0, 8, b'a');
        fill(&unit, BLOCKS - 8, 8, b'a');
        assert_good(run(&unit, &sanitize_cdb(service_action, 0)).0);
        assert_eq!(read(&unit, 0, 8), vec![0; 8 * BLOCK_SIZE]);
        assert_eq!(read(&unit, BLOCKS - 8, 8), vec![0; 8 * BLOCK_SIZE]);
        // No parameter list for these.
        let sense = assert_invalid_field_in_cdb(
            run_out(&unit, &sanitize_cdb(service_action, 8), &[0; 8]).0,
        );
        assert_eq!(sense.field_pointer.unwrap().byte, 7);
    }
}

#[test]
fn cdb_checks() {
    let unit = unit();
    for service_action in (0..=0x1fu8).filter(|sa| ![1, 2, 3, 0x1f].contains(sa)) {
        let sense = assert_invalid_field_in_cdb(run(&unit, &sanitize_cdb(service_action, 0)).0);
        assert_eq!(sense.field_pointer.unwrap().bit_pointer, Some(4));
    }
    let list = overwrite_list(1, &[0xaa; BLOCK_SIZE]);
    let sense = assert_invalid_field_in_cdb(overwrite(&unit, 0x40, &list));
    assert_eq!(sense.field_pointer.unwrap().bit_pointer, Some(6));
    for byte in 2..=6 {
        let mut cdb = sanitize_cdb(0x01, list.len() as u16);
        cdb[byte] = 1;
        let sense = assert_invalid_field_in_cdb(run_out(&unit, &cdb, &list).0);
        assert_eq!(usize::from(sense.field_pointer.unwrap().byte), byte);
    }
    // OVERWRITE: 5 to block size + 4 bytes of parameter list.
    for length in [0u16, 1, 4, BLOCK_SIZE as u16 + 5] {
        let data = vec![0u8; BLOCK_SIZE + 8];
        assert_invalid_field_in_cdb(run_out(&unit, &sanitize_cdb(0x01, length), &data).0);
    }
}

#[test]
fn overwrite_parameter_list_checks() {
    let unit = unit();
    let invalid_parameter = |list: &[u8], byte: u16| {
        let sense = assert_sense(overwrite(&unit, 0, list), ILLEGAL_REQUEST, 0x26, 0x00);
        assert_eq!(sense.field_pointer.unwrap().byte, byte);
    };
    invalid_parameter(&overwrite_list(0, &[0xaa; 8]), 0);
    let mut test_mode = overwrite_list(1, &[0xaa; 8]);
    test_mode[0] |= 0x20;
    invalid_parameter(&test_mode, 0);
    let mut zero_length = overwrite_list(1, &[0xaa; 8]);
    zero_length[3] = 0;
    invalid_parameter(&zero_length, 2);
    let mut too_long = overwrite_list(1, &[0xaa; BLOCK_SIZE]);
    too_long[2..4].copy_from_slice(&(BLOCK_SIZE as u16 + 4).to_be_bytes());
    invalid_parameter(&too_long, 2);
    // Less Data-Out than the parameter list length.
    assert_sense(
        run_out(&unit, &sanitize_cdb(0x01, 12), &[1, 0, 0, 8]).0,
        ILLEGAL_REQUEST,
        0x1a,
        0x00,
    );
}

#[test]
fn write_protected_units_refuse_to_sanitize() {
    let unit = read_only_unit();
    assert_sense(
        overwrite(&unit, 0, &overwrite_list(1, &[1])),
        DATA_PROTECT,
        0x27,
        0x00,
    );
    assert_sense(
        run(&unit, &sanitize_cdb(0x02, 0)).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
    assert_sense(
        run(&unit, &sanitize_cdb(0x03, 0)).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
    // Nothing to exit from: EXIT FAILURE MODE is harmless.
    assert_good(run(&unit, &sanitize_cdb(0x1f, 0)).0);
    assert_invalid_field_in_cdb(run_out(&unit, &sanitize_cdb(0x1f, 8), &[0; 8]).0);
}

#[test]
fn immed_returns_at_once_and_the_unit_is_not_ready_until_done() {
    // 2 MiB at 4 MiB/s: the overwrite takes at least half a second.
    let unit = unit_with(rate_limited(4 << 20), 4096);
    fill(&unit, 0, 1, b'a');
    let list = overwrite_list(1, &[0x5a]);
    assert_good(overwrite(&unit, 0x80, &list));
    // Until it finishes: media access is NOT READY, INQUIRY still works.
    let mut saw_in_progress = false;
    for _ in 0..2000 {
        let (tur, _) = run(&unit, &[0; 6]);
        if tur.status == isoe_scsi::Status::Good {
            break;
        }
        assert_sense(tur, NOT_READY, 0x04, 0x1b);
        if !saw_in_progress {
            saw_in_progress = true;
            assert_sense(
                run(&unit, &block_cdb(0x88, 16, 0, 1, 0)).0,
                NOT_READY,
                0x04,
                0x1b,
            );
            assert_good(run(&unit, &inquiry(false, 0, 96)).0);
            let (completion, sense) = run(&unit, &[0x03, 0, 0, 0, 18, 0]);
            assert_good(completion);
            assert_eq!((sense[2], sense[12], sense[13]), (NOT_READY, 0x04, 0x1b));
            assert_sense(overwrite(&unit, 0, &list), NOT_READY, 0x04, 0x1b);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_good(run(&unit, &[0; 6]).0);
    assert!(
        saw_in_progress,
        "half a second of overwriting outlasts the first TEST UNIT READY"
    );
    assert_eq!(read(&unit, 0, 1), vec![0x5a; BLOCK_SIZE]);
}

fn rate_limited(bytes_per_s: u64) -> LunConfig {
    LunConfig {
        sanitize_bytes_per_s: Some(bytes_per_s),
        ..config()
    }
}

#[test]
fn without_immed_the_unit_sanitizes_from_dispatch_until_the_work_returns() {
    let unit = unit();
    fill(&unit, 0, 1, b'a');
    let list = overwrite_list(1, &[0x5a]);
    let cdb = sanitize_cdb(0x01, list.len() as u16);
    let mut data_in = Vec::new();
    let outcome = unit.start(&nexus(), &NoUnits, &cdb, &list, &mut data_in);
    let Outcome::Later(work) = outcome else {
        panic!("SANITIZE without IMMED is left to run later: {outcome:?}");
    };
    // Admitted: later commands already see the sanitize, before any block
    // is written.
    assert_sense(run(&unit, &[0; 6]).0, NOT_READY, 0x04, 0x1b);
    assert_sense(overwrite(&unit, 0, &list), NOT_READY, 0x04, 0x1b);
    assert_good(run(&unit, &inquiry(false, 0, 96)).0);
    assert_good(work.run());
    assert_good(run(&unit, &[0; 6]).0);
    assert_eq!(read(&unit, 0, 1), vec![0x5a; BLOCK_SIZE]);
    // A refused SANITIZE leaves nothing for later.
    let outcome = unit.start(
        &nexus(),
        &NoUnits,
        &sanitize_cdb(0x01, 2),
        &list,
        &mut data_in,
    );
    assert!(
        matches!(outcome, Outcome::Done(c) if !c.is_good()),
        "{outcome:?}"
    );
    // Other commands finish at once.
    let outcome = unit.start(&nexus(), &NoUnits, &[0; 6], &[], &mut data_in);
    assert!(
        matches!(outcome, Outcome::Done(c) if c.is_good()),
        "{outcome:?}"
    );
}

#[test]
fn a_rate_limited_overwrite_writes_no_faster_than_its_rate() {
    // Two passes over 2 MiB at 16 MiB/s: a quarter of a second at least.
    let unit = unit_with(rate_limited(16 << 20), 4096);
    let started = Instant::now();
    assert_good(overwrite(&unit, 0, &overwrite_list(2, &[0x33])));
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(read(&unit, 4095, 1), vec![0x33; BLOCK_SIZE]);
}

/// A unit whose store fails every write-zeroes: a CRYPTOGRAPHIC ERASE on
/// it fails half-way.
fn failing_unit() -> LogicalUnit {
    let store = isoe_store::FailingStore::new(
        isoe_store::MemoryStore::new(BLOCKS * BLOCK_SIZE as u64),
        isoe_store::Ops::WRITE_ZEROES,
        0,
        isoe_store::Fault::Io,
    );
    LogicalUnit::new(std::sync::Arc::new(store), config())
}

#[test]
fn a_failed_sanitize_blocks_media_access_until_exit_failure_mode() {
    const MEDIUM_ERROR: u8 = 0x03;
    let unit = failing_unit();
    // AUSE=1: the failure may be left with EXIT FAILURE MODE.
    assert_sense(
        run(&unit, &sanitize_cdb(0x20 | 0x03, 0)).0,
        MEDIUM_ERROR,
        0x0c,
        0x00,
    );
    assert_sense(
        run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0,
        MEDIUM_ERROR,
        0x31,
        0x03,
    );
    assert_good(run(&unit, &[0; 6]).0);
    assert_good(run(&unit, &inquiry(false, 0, 96)).0);
    assert_good(run(&unit, &sanitize_cdb(0x1f, 0)).0);
    assert_good(run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0);

    // AUSE=0: only a successful SANITIZE gets the unit back.
    assert_sense(
        run(&unit, &sanitize_cdb(0x03, 0)).0,
        MEDIUM_ERROR,
        0x0c,
        0x00,
    );
    assert_invalid_field_in_cdb(run(&unit, &sanitize_cdb(0x1f, 0)).0);
    assert_sense(
        run(&unit, &block_cdb(0x2a, 10, 0, 1, 0)).0,
        MEDIUM_ERROR,
        0x31,
        0x03,
    );
    assert_good(run(&unit, &sanitize_cdb(0x02, 0)).0);
    assert_good(run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0);
}
