//! What the device server answers when its store fails, with the store made
//! to fail by `isoe_store::FailingStore`: a write the file system has no
//! room for is DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (every
//! isoe unit is thin provisioned); any other failure is MEDIUM ERROR; and a
//! command that promises durability (FUA, SYNCHRONIZE CACHE) is never
//! answered GOOD when the flush behind it fails.

use std::sync::Arc;

use isoe_scsi::{Completion, LogicalUnit};
use isoe_store::{FailingStore, Fault, MemoryStore, Ops};

use crate::harness::*;

const MEDIUM_ERROR: u8 = 0x03;
/// (key, ASC, ASCQ) of the answers to store failures.
const SPACE_ALLOCATION_FAILED: (u8, u8, u8) = (DATA_PROTECT, 0x27, 0x07);
const WRITE_ERROR: (u8, u8, u8) = (MEDIUM_ERROR, 0x0c, 0x00);
const UNRECOVERED_READ_ERROR: (u8, u8, u8) = (MEDIUM_ERROR, 0x11, 0x00);
/// Byte 1 of the 10/12/16-byte READ/WRITE family: FUA.
const FUA: u8 = 0x08;

type Failing = FailingStore<MemoryStore>;

/// A unit whose store passes `succeed` operations of kinds `ops`, then
/// fails them with `fault`.
fn failing_unit(ops: Ops, succeed: u64, fault: Fault) -> (LogicalUnit, Arc<Failing>) {
    let memory = MemoryStore::new(BLOCKS * BLOCK_SIZE as u64);
    let store = Arc::new(FailingStore::new(memory, ops, succeed, fault));
    (LogicalUnit::new(store.clone(), config()), store)
}

/// One command: a name for messages, the CDB and its Data-Out.
struct Case {
    name: &'static str,
    cdb: Vec<u8>,
    data_out: Vec<u8>,
}

fn case(name: &'static str, cdb: Vec<u8>, data_out: Vec<u8>) -> Case {
    Case {
        name,
        cdb,
        data_out,
    }
}

/// `blocks` blocks of a pattern that is not all zeros.
fn data(blocks: usize) -> Vec<u8> {
    pattern(blocks * BLOCK_SIZE, 0x5a)
}

/// Runs `case` on a fresh unit whose `ops` fail at once with `fault`;
/// returns the completion and how many store operations failed.
fn run_failing(case: &Case, ops: Ops, fault: Fault) -> (Completion, u64) {
    let (unit, store) = failing_unit(ops, 0, fault);
    let completion = run_out(&unit, &case.cdb, &case.data_out).0;
    (completion, store.failures())
}

/// Checks every case under `ops` failing with each fault: the no-space
/// faults give `no_space`, EIO gives `io` (key, ASC, ASCQ).
fn check_cases(cases: &[Case], ops: Ops, no_space: (u8, u8, u8), io: (u8, u8, u8)) {
    for (fault, expected) in [
        (Fault::NoSpace, no_space),
        (Fault::QuotaExceeded, no_space),
        (Fault::Io, io),
    ] {
        for case in cases {
            let (completion, failures) = run_failing(case, ops, fault);
            let sense = completion.sense.unwrap_or_else(|| {
                panic!(
                    "{}, {fault:?}: {completion:?}, not CHECK CONDITION",
                    case.name
                )
            });
            assert_eq!(
                (sense.key, sense.asc, sense.ascq),
                expected,
                "{}, {fault:?}",
                case.name
            );
            assert!(failures > 0, "{}: the store was reached", case.name);
        }
    }
}

/// Commands that write data to the medium.
fn writing_commands() -> Vec<Case> {
    vec![
        case("WRITE(6)", block_cdb(0x0a, 6, 1, 1, 0), data(1)),
        case("WRITE(10)", block_cdb(0x2a, 10, 1, 2, 0), data(2)),
        case("WRITE(12)", block_cdb(0xaa, 12, 1, 2, 0), data(2)),
        case("WRITE(16)", block_cdb(0x8a, 16, 1, 2, 0), data(2)),
        case(
            "WRITE AND VERIFY(16)",
            block_cdb(0x8e, 16, 1, 2, 0),
            data(2),
        ),
        case("WRITE SAME(16)", block_cdb(0x93, 16, 8, 16, 0), data(1)),
        case("ORWRITE(16)", block_cdb(0x8b, 16, 1, 2, 0), data(2)),
        case(
            "COMPARE AND WRITE",
            caw_cdb(1, 1, 0),
            [vec![0; BLOCK_SIZE], data(1)].concat(),
        ),
        case("WRITE ATOMIC(16)", atomic_cdb(8, 8, 0, 0), data(8)),
    ]
}

#[test]
fn a_write_the_store_has_no_room_for_is_space_allocation_failed() {
    check_cases(
        &writing_commands(),
        Ops::WRITE,
        SPACE_ALLOCATION_FAILED,
        WRITE_ERROR,
    );
}

#[test]
fn a_failed_write_changes_nothing_and_the_unit_recovers_with_its_store() {
    let (unit, store) = failing_unit(Ops::WRITE, 1, Fault::NoSpace);
    fill(&unit, 0, 1, 0x11);
    let write = block_cdb(0x2a, 10, 0, 2, 0);
    let completion = run_out(&unit, &write, &data(2)).0;
    assert_sense(completion, DATA_PROTECT, 0x27, 0x07);
    assert_eq!(
        read(&unit, 0, 2),
        [vec![0x11; BLOCK_SIZE], vec![0; BLOCK_SIZE]].concat()
    );
    // Reading and flushing still work on a full file system.
    assert_good(run(&unit, &block_cdb(0x35, 10, 0, 0, 0)).0);
    // SPACE ALLOCATION FAILED is the answer to one command, not a state:
    // once there is room again, the same write succeeds.
    store.recover();
    assert_good(run_out(&unit, &write, &data(2)).0);
    assert_eq!(read(&unit, 0, 2), data(2));
}

/// Commands that promise their data durable before GOOD: each flushes.
fn durable_commands() -> Vec<Case> {
    vec![
        case("WRITE(10) FUA", block_cdb(0x2a, 10, 1, 2, FUA), data(2)),
        case("WRITE(12) FUA", block_cdb(0xaa, 12, 1, 2, FUA), data(2)),
        case("WRITE(16) FUA", block_cdb(0x8a, 16, 1, 2, FUA), data(2)),
        case(
            "WRITE AND VERIFY(10)",
            block_cdb(0x2e, 10, 1, 2, 0),
            data(2),
        ),
        case(
            "WRITE AND VERIFY(16)",
            block_cdb(0x8e, 16, 1, 2, 0),
            data(2),
        ),
        case("ORWRITE(16) FUA", block_cdb(0x8b, 16, 1, 2, FUA), data(2)),
        case(
            "COMPARE AND WRITE FUA",
            caw_cdb(1, 1, FUA),
            [vec![0; BLOCK_SIZE], data(1)].concat(),
        ),
        case("WRITE ATOMIC(16) FUA", atomic_cdb(8, 8, FUA, 0), data(8)),
        case(
            "SYNCHRONIZE CACHE(10)",
            block_cdb(0x35, 10, 0, 0, 0),
            vec![],
        ),
        case(
            "SYNCHRONIZE CACHE(16)",
            block_cdb(0x91, 16, 0, 0, 0),
            vec![],
        ),
        case(
            "START STOP UNIT (stop)",
            start_stop_unit(false, 0, false, false, false),
            vec![],
        ),
    ]
}

#[test]
fn a_flush_that_fails_is_never_answered_good() {
    check_cases(
        &durable_commands(),
        Ops::FLUSH,
        SPACE_ALLOCATION_FAILED,
        WRITE_ERROR,
    );
    // Commands that promise no durability do not flush, so they are GOOD.
    for case in [
        case("WRITE(10)", block_cdb(0x2a, 10, 1, 2, 0), data(2)),
        case("WRITE(16)", block_cdb(0x8a, 16, 1, 2, 0), data(2)),
    ] {
        let (completion, failures) = run_failing(&case, Ops::FLUSH, Fault::Io);
        assert_good(completion);
        assert_eq!(failures, 0, "{}", case.name);
    }
}

/// Commands that read the medium (or its allocation map) first.
fn reading_commands() -> Vec<Case> {
    vec![
        case("READ(6)", block_cdb(0x08, 6, 1, 1, 0), vec![]),
        case("READ(10)", block_cdb(0x28, 10, 1, 2, 0), vec![]),
        case("READ(12)", block_cdb(0xa8, 12, 1, 2, 0), vec![]),
        case("READ(16)", block_cdb(0x88, 16, 1, 2, 0), vec![]),
        case(
            "VERIFY(10) BYTCHK=1",
            block_cdb(0x2f, 10, 1, 2, 0x02),
            data(2),
        ),
        case("ORWRITE(16)", block_cdb(0x8b, 16, 1, 2, 0), data(2)),
        case(
            "COMPARE AND WRITE",
            caw_cdb(1, 1, 0),
            [vec![0; BLOCK_SIZE], data(1)].concat(),
        ),
        case("GET LBA STATUS", get_lba_status_cdb(0, 64), vec![]),
    ]
}

#[test]
fn a_read_that_fails_is_unrecovered_read_error_whatever_the_errno() {
    check_cases(
        &reading_commands(),
        Ops::READ,
        UNRECOVERED_READ_ERROR,
        UNRECOVERED_READ_ERROR,
    );
}

#[test]
fn a_deallocation_that_fails_is_answered_like_a_write() {
    let unmap = case("UNMAP", unmap_cdb(false, 24), unmap_parameters(&[(0, 64)]));
    let write_same_unmap = case(
        "WRITE SAME(16) UNMAP",
        block_cdb(0x93, 16, 0, 64, 0x08),
        data(1),
    );
    check_cases(
        &[unmap, write_same_unmap],
        Ops::UNMAP,
        SPACE_ALLOCATION_FAILED,
        WRITE_ERROR,
    );
    let zeros = case(
        "WRITE SAME(16) of zeros",
        block_cdb(0x93, 16, 0, 64, 0),
        vec![0; BLOCK_SIZE],
    );
    check_cases(
        &[zeros],
        Ops::WRITE_ZEROES,
        SPACE_ALLOCATION_FAILED,
        WRITE_ERROR,
    );
}

#[test]
fn a_sanitize_that_runs_out_of_room_fails_with_space_allocation_failed() {
    let (unit, store) = failing_unit(Ops::WRITE, 0, Fault::NoSpace);
    let list = overwrite_list(1, &[0xa5]);
    let completion = run_out(&unit, &sanitize_cdb(0x01, list.len() as u16), &list).0;
    assert_sense(completion, DATA_PROTECT, 0x27, 0x07);
    assert_eq!(store.failures(), 1);
    // SBC-4 4.11: after a failed sanitize the medium is not accessed.
    assert_sense(
        run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0,
        MEDIUM_ERROR,
        0x31,
        0x03,
    );
}
