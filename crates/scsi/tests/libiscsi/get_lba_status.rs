//! SCSI.GetLBAStatus, and thin provisioning on a file-backed unit: UNMAP and
//! WRITE SAME with UNMAP punch holes that GET LBA STATUS reports and that
//! give the file's blocks back.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use isoe_scsi::LogicalUnit;
use isoe_store::{FileStore, Store};

use crate::harness::*;

/// (LBA, blocks, provisioning status) of every descriptor returned.
fn status(unit: &LogicalUnit, lba: u64, allocation_length: u32) -> Vec<(u64, u32, u8)> {
    let (completion, data) = run(unit, &get_lba_status_cdb(lba, allocation_length));
    assert_good(completion);
    assert_eq!(
        be32(&data, 0) as usize + 4,
        8 + 16 * ((data.len() - 8) / 16)
    );
    data[8..]
        .chunks_exact(16)
        .map(|d| (be64(d, 0), be32(d, 8), d[12] & 0x0f))
        .collect()
}

fn unmap(unit: &LogicalUnit, lba: u64, blocks: u32) {
    let mut parameters = vec![0, 22, 0, 16, 0, 0, 0, 0];
    parameters.extend_from_slice(&lba.to_be_bytes());
    parameters.extend_from_slice(&blocks.to_be_bytes());
    parameters.extend_from_slice(&[0; 4]);
    let cdb = [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    assert_good(run_out(unit, &cdb, &parameters).0);
}

fn write(unit: &LogicalUnit, lba: u64, blocks: u32) {
    let data = vec![0x41u8; blocks as usize * BLOCK_SIZE];
    assert_good(run_out(unit, &block_cdb(0x8a, 16, lba, blocks, 0), &data).0);
}

#[test]
fn extents_follow_writes_and_unmaps_at_page_granularity() {
    let unit = unit();
    assert_eq!(status(&unit, 0, 24), [(0, BLOCKS as u32, 1)]);
    write(&unit, 0, 264);
    assert_eq!(
        status(&unit, 0, 1024),
        [(0, 264, 0), (264, BLOCKS as u32 - 264, 1)]
    );
    // A whole 4 KiB page of the store (8 logical blocks) deallocates; less does not.
    unmap(&unit, 16, 8);
    unmap(&unit, 40, 3);
    assert_eq!(
        status(&unit, 0, 1024),
        [
            (0, 16, 0),
            (16, 8, 1),
            (24, 240, 0),
            (264, BLOCKS as u32 - 264, 1)
        ]
    );
    // The first descriptor starts at the requested LBA.
    assert_eq!(status(&unit, 17, 24), [(17, 7, 1)]);
    assert_eq!(status(&unit, 25, 24), [(25, 239, 0)]);
    assert_eq!(status(&unit, BLOCKS - 1, 1024), [(BLOCKS - 1, 1, 1)]);
}

#[test]
fn allocation_length_bounds_the_descriptors_without_error() {
    let unit = unit();
    for lba in (0..64).step_by(16) {
        write(&unit, lba, 8);
    }
    assert_eq!(status(&unit, 0, 40).len(), 2);
    assert_eq!(status(&unit, 0, 8 + 16 * 5).len(), 5);
    for allocation_length in 0..24u32 {
        let (completion, data) = run(&unit, &get_lba_status_cdb(0, allocation_length));
        assert_good(completion);
        assert_eq!(data.len(), allocation_length as usize);
    }
    let (_, data) = run(&unit, &get_lba_status_cdb(0, 16));
    assert_eq!(
        be32(&data, 0),
        4 + 16,
        "PARAMETER DATA LENGTH counts the descriptor"
    );
}

#[test]
fn refusals() {
    let unit = unit();
    assert_lba_out_of_range(run(&unit, &get_lba_status_cdb(BLOCKS, 24)).0);
    assert_lba_out_of_range(run(&unit, &get_lba_status_cdb(u64::MAX, 24)).0);
    let mut cdb = get_lba_status_cdb(0, 24);
    cdb[14] = 0x01;
    let sense = assert_invalid_field_in_cdb(run(&unit, &cdb).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 14);
}

#[test]
fn file_backed_unit_gives_blocks_back_on_unmap_and_write_same_unmap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun.img");
    let blocks = 16384u64; // 8 MiB
    let store: Arc<dyn Store> =
        Arc::new(FileStore::open(&path, Some(blocks * BLOCK_SIZE as u64)).unwrap());
    let unit = LogicalUnit::new(store, config());
    let allocated = || std::fs::metadata(&path).unwrap().blocks();
    assert_eq!(status(&unit, 0, 24), [(0, blocks as u32, 1)]);

    for lba in (0..blocks).step_by(4096) {
        write(&unit, lba, 4096);
    }
    let written = allocated();
    assert!(written >= blocks, "st_blocks {written} after writing 8 MiB");
    assert_eq!(status(&unit, 0, 24), [(0, blocks as u32, 0)]);

    unmap(&unit, 0, 8192);
    let after_unmap = allocated();
    assert!(
        after_unmap <= written / 2 + 64,
        "UNMAP of half the unit: st_blocks {written} -> {after_unmap}"
    );
    assert_eq!(status(&unit, 0, 1024)[0], (0, 8192, 1));

    // WRITE SAME (16) with UNMAP and a zero block, through the last LBA.
    let cdb = block_cdb(0x93, 16, 8192, 0, 0x08);
    assert_good(run_out(&unit, &cdb, &[0; BLOCK_SIZE]).0);
    let after_write_same = allocated();
    assert!(
        after_write_same <= 64,
        "WRITE SAME UNMAP of the rest: st_blocks {after_unmap} -> {after_write_same}"
    );
    assert_eq!(status(&unit, 0, 1024), [(0, blocks as u32, 1)]);
    let (completion, data) = run(&unit, &block_cdb(0x88, 16, 8000, 400, 0));
    assert_good(completion);
    assert!(
        data.iter().all(|&b| b == 0),
        "deallocated blocks read as zeros"
    );
}
