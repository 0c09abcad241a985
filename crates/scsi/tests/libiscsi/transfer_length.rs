//! What `transfer_length` tells the transport before any data moves.

use isoe_scsi::DataDirection::{In, None as NoData, Out};

use crate::harness::*;

#[test]
fn directions_and_byte_counts() {
    let unit = unit();
    let mut unmap = vec![0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    let cases: Vec<(Vec<u8>, isoe_scsi::DataDirection, u32)> = vec![
        (vec![0; 6], NoData, 0),
        (inquiry(false, 0, 300), In, 300),
        (mode_sense6(false, 0, 0x3f, 0, 200), In, 200),
        (vec![0x5a, 0, 0x3f, 0, 0, 0, 0, 0x01, 0x02, 0], In, 0x102),
        (vec![0x03, 0, 0, 0, 18, 0], In, 18),
        (vec![0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], In, 8),
        (read_capacity16(32), In, 32),
        (report_supported_opcodes(false, 0, 0, 0, 65535), In, 65535),
        (block_cdb(0x08, 6, 0, 0, 0), In, 256 * 512),
        (block_cdb(0x28, 10, 0, 8, 0), In, 8 * 512),
        (block_cdb(0xa8, 12, 0, 9, 0), In, 9 * 512),
        (block_cdb(0x88, 16, 0, 10, 0), In, 10 * 512),
        (block_cdb(0x0a, 6, 0, 3, 0), Out, 3 * 512),
        (block_cdb(0x2a, 10, 0, 8, 0), Out, 8 * 512),
        (block_cdb(0x8e, 16, 0, 2, 0), Out, 2 * 512),
        (block_cdb(0x2f, 10, 0, 8, 0), NoData, 0),
        (block_cdb(0x2f, 10, 0, 8, 0x02), Out, 8 * 512),
        (block_cdb(0xaf, 12, 0, 8, 0x06), Out, 512),
        (block_cdb(0x41, 10, 0, 100, 0x08), Out, 512),
        (block_cdb(0x93, 16, 0, 100, 0x01), NoData, 0),
        (block_cdb(0x35, 10, 0, 100, 0), NoData, 0),
        (block_cdb(0x90, 16, 0, 100, 0), NoData, 0),
        (vec![0x1b, 0, 0, 0, 1, 0], NoData, 0),
        (unmap.clone(), Out, 24),
        (vec![0x15, 0x10, 0, 0, 12, 0], Out, 12),
    ];
    for (cdb, direction, bytes) in cases {
        assert_eq!(
            unit.transfer_length(&cdb),
            Ok((direction, bytes)),
            "cdb {cdb:02x?}"
        );
    }
    unmap[7] = 1;
    assert_eq!(unit.transfer_length(&unmap), Ok((Out, 256 + 24)));
}

#[test]
fn huge_transfers_saturate_and_short_cdbs_are_refused() {
    let unit = unit();
    assert_eq!(
        unit.transfer_length(&block_cdb(0x88, 16, 0, u32::MAX, 0)),
        Ok((In, u32::MAX))
    );
    let refused = unit.transfer_length(&[0x28, 0, 0, 0]).unwrap_err();
    assert_invalid_field_in_cdb(refused);
    assert_invalid_opcode(unit.transfer_length(&[]).unwrap_err());
    // iSCSI pads CDBs to 16 bytes: the padding is ignored.
    let mut padded = block_cdb(0x28, 10, 0, 4, 0);
    padded.resize(16, 0xee);
    assert_eq!(unit.transfer_length(&padded), Ok((In, 4 * 512)));
    assert_good(run(&unit, &padded).0);
}
