//! SCSI.ReadCapacity10 and SCSI.ReadCapacity16.

use std::sync::Arc;

use isoe_scsi::{LogicalUnit, LunConfig};
use isoe_store::MemoryStore;

use crate::harness::*;

const READ_CAPACITY_10: [u8; 10] = [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0];

#[test]
fn read_capacity_10_reports_last_lba_and_block_length() {
    let (completion, data) = run(&unit(), &READ_CAPACITY_10);
    assert_good(completion);
    assert_eq!(data.len(), 8);
    assert_eq!(u64::from(be32(&data, 0)), BLOCKS - 1);
    assert_eq!(be32(&data, 4), 512);
}

#[test]
fn read_capacity_10_saturates_past_32_bits() {
    let blocks = (1u64 << 32) + 8;
    let unit = LogicalUnit::new(Arc::new(MemoryStore::new(blocks * 512)), config());
    let (completion, data) = run(&unit, &READ_CAPACITY_10);
    assert_good(completion);
    assert_eq!(be32(&data, 0), 0xffff_ffff);
    let (completion, data) = run(&unit, &read_capacity16(32));
    assert_good(completion);
    assert_eq!(be64(&data, 0), blocks - 1);
}

#[test]
fn read_capacity_16_reports_thin_provisioning_and_no_protection() {
    let (completion, data) = run(&unit(), &read_capacity16(96));
    assert_good(completion);
    assert_eq!(data.len(), 32);
    assert_eq!(be64(&data, 0), BLOCKS - 1);
    assert_eq!(be32(&data, 8), 512);
    assert_eq!(data[12] & 0x0f, 0, "P_TYPE and PROT_EN zero");
    assert_eq!(data[13] >> 4, 0, "P_I_EXPONENT zero");
    assert_eq!(
        data[13] & 0x0f,
        0,
        "by default the physical block is the logical block"
    );
    assert_eq!(data[14] & 0x80, 0x80, "LBPME");
    assert_eq!(data[14] & 0x40, 0x40, "LBPRZ");
    assert_eq!(
        be16(&data, 14) & 0x3fff,
        0,
        "LOWEST ALIGNED LOGICAL BLOCK ADDRESS"
    );
}

#[test]
fn read_capacity_16_reports_the_configured_physical_block() {
    for (block_size, physical, exponent) in [(512, 4096, 3), (512, 512, 0), (4096, 65536, 4)] {
        let config = LunConfig {
            block_size,
            physical_block_size: Some(physical),
            ..config()
        };
        let (completion, data) = run(&unit_with(config, 64), &read_capacity16(32));
        assert_good(completion);
        assert_eq!(data[13] & 0x0f, exponent, "{physical} over {block_size}");
    }
    for (block_size, physical) in [(512, 256), (4096, 2048), (512, 3072), (512, 1 << 17)] {
        let config = LunConfig {
            block_size,
            physical_block_size: Some(physical),
            ..config()
        };
        assert!(config.validate().is_err(), "{physical} over {block_size}");
    }
}

#[test]
fn read_capacity_16_allocation_lengths_0_to_15_are_not_errors() {
    let unit = unit();
    for allocation_length in 0..16u32 {
        let (completion, data) = run(&unit, &read_capacity16(allocation_length));
        assert_good(completion);
        assert_eq!(data.len(), allocation_length as usize);
    }
}

#[test]
fn four_kib_blocks() {
    let config = LunConfig {
        block_size: 4096,
        ..config()
    };
    let unit = unit_with(config, 100);
    let (completion, data) = run(&unit, &read_capacity16(32));
    assert_good(completion);
    assert_eq!((be64(&data, 0), be32(&data, 8)), (99, 4096));
    assert_eq!(
        data[13] & 0x0f,
        0,
        "a 4 KiB logical block is a physical block"
    );
    let (completion, data) = run(&unit, &block_cdb(0x28, 10, 99, 1, 0));
    assert_good(completion);
    assert_eq!(data.len(), 4096);
    assert_lba_out_of_range(run(&unit, &block_cdb(0x28, 10, 100, 1, 0)).0);
}

#[test]
fn unknown_service_action_in_points_at_byte_1() {
    // libiscsi reads INVALID FIELD IN CDB pointing at byte 1 of a 9Eh CDB as
    // "service action not implemented".
    let mut cdb = read_capacity16(32);
    cdb[1] = 0x1f;
    let sense = assert_invalid_field_in_cdb(run(&unit(), &cdb).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 1);
}
