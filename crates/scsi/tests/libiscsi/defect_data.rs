//! SCSI.ReadDefectData10 / ReadDefectData12: an empty defect list.

use crate::harness::*;

#[test]
fn read_defect_data_10_returns_an_empty_list_in_the_requested_format() {
    let unit = unit();
    let cdb = [0x37, 0, 0x18 | 0x05, 0, 0, 0, 0, 0, 32, 0];
    let (completion, data) = run(&unit, &cdb);
    assert_good(completion);
    assert_eq!(
        data,
        [0, 0x1d, 0, 0],
        "PLISTV, GLISTV, format 101b, length 0"
    );
    let (completion, data) = run(&unit, &[0x37, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
    assert_good(completion);
    assert_eq!(data, [0, 0], "truncated to the allocation length");
    let sense = assert_invalid_field_in_cdb(run(&unit, &[0x37, 0, 0x07, 0, 0, 0, 0, 0, 32, 0]).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 2);
}

#[test]
fn read_defect_data_12_has_a_four_byte_length() {
    let unit = unit();
    let mut cdb = vec![0u8; 12];
    cdb[0] = 0xb7;
    cdb[1] = 0x08 | 0x03;
    cdb[9] = 32;
    let (completion, data) = run(&unit, &cdb);
    assert_good(completion);
    assert_eq!(data, [0, 0x0b, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        unit.transfer_length(&cdb),
        Ok((isoe_scsi::DataDirection::In, 32))
    );
}
