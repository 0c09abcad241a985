//! SCSI.WriteAtomic16: WRITE ATOMIC (16) and the atomic fields of the Block
//! Limits VPD page it must obey.

use crate::harness::*;

/// (maximum atomic transfer length, alignment, granularity) from page B0h.
fn atomic_limits(unit: &isoe_scsi::LogicalUnit) -> (u32, u32, u32) {
    let (completion, page) = run(unit, &inquiry(true, 0xb0, 64));
    assert_good(completion);
    assert_eq!(page.len(), 64);
    assert_eq!(be32(&page, 56), 0, "no atomic boundary support");
    assert_eq!(be32(&page, 60), 0, "no atomic boundary support");
    (be32(&page, 44), be32(&page, 48), be32(&page, 52))
}

#[test]
fn block_limits_describe_page_atomicity() {
    let (maximum, alignment, granularity) = atomic_limits(&unit());
    assert_eq!((maximum, alignment, granularity), (2048, 8, 8));
    let (_, page) = run(&unit(), &inquiry(true, 0xb0, 64));
    assert!(maximum <= be32(&page, 8), "within MAXIMUM TRANSFER LENGTH");
    let unit_4k = unit_with(
        isoe_scsi::LunConfig {
            block_size: 4096,
            ..config()
        },
        64,
    );
    assert_eq!(atomic_limits(&unit_4k), (256, 1, 1));
}

#[test]
fn aligned_whole_pages_are_written() {
    let unit = unit();
    for (lba, blocks) in [(0u64, 8u16), (8, 256), (BLOCKS - 2048, 2048)] {
        let data = pattern(usize::from(blocks) * BLOCK_SIZE, blocks as u8);
        assert_good(run_out(&unit, &atomic_cdb(lba, blocks, 0, 0), &data).0);
        let (completion, back) = run(&unit, &block_cdb(0x88, 16, lba, u32::from(blocks), 0));
        assert_good(completion);
        assert_eq!(back, data);
    }
    assert_good(run_out(&unit, &atomic_cdb(0, 8, 0x18, 0), &[0; 8 * BLOCK_SIZE]).0);
    assert_good(run(&unit, &atomic_cdb(0, 0, 0, 0)).0);
}

#[test]
fn refusals_change_nothing() {
    let unit = unit();
    let data = vec![7u8; 4096 * BLOCK_SIZE];
    let pointer = |completion| {
        assert_invalid_field_in_cdb(completion)
            .field_pointer
            .unwrap()
            .byte
    };
    assert_eq!(
        pointer(run_out(&unit, &atomic_cdb(1, 8, 0, 0), &data).0),
        2,
        "misaligned"
    );
    assert_eq!(
        pointer(run_out(&unit, &atomic_cdb(0, 1, 0, 0), &data).0),
        12,
        "granularity"
    );
    assert_eq!(
        pointer(run_out(&unit, &atomic_cdb(0, 2056, 0, 0), &data).0),
        12,
        "too long"
    );
    assert_eq!(
        pointer(run_out(&unit, &atomic_cdb(0, 8, 0, 8), &data).0),
        10,
        "boundary"
    );
    assert_eq!(
        pointer(run_out(&unit, &atomic_cdb(0, 8, 0x20, 0), &data).0),
        1,
        "WRPROTECT"
    );
    assert_lba_out_of_range(run_out(&unit, &atomic_cdb(BLOCKS - 8, 16, 0, 0), &data).0);
    assert_lba_out_of_range(run_out(&unit, &atomic_cdb(u64::MAX - 7, 8, 0, 0), &data).0);
    // A Data-Out shorter than the transfer is not written in part.
    assert_sense(
        run_out(&unit, &atomic_cdb(0, 16, 0, 0), &data[..8 * BLOCK_SIZE]).0,
        ILLEGAL_REQUEST,
        0x0e,
        0x03,
    );
    assert_sense(
        run_out(&read_only_unit(), &atomic_cdb(0, 8, 0, 0), &data).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
    let (_, medium) = run(&unit, &block_cdb(0x88, 16, 0, 16, 0));
    assert!(medium.iter().all(|&b| b == 0));
}
