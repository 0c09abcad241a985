//! Target-level commands: REPORT LUNS and commands to a LUN with no unit.

use isoe_scsi::{encode_lun, execute_no_lun, report_luns, Status};

use crate::harness::*;

fn report_luns_cdb(select_report: u8, allocation_length: u32) -> Vec<u8> {
    let mut cdb = vec![0u8; 12];
    cdb[0] = 0xa0;
    cdb[2] = select_report;
    cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

#[test]
fn report_luns_lists_peripheral_and_flat_addresses() {
    let mut data = Vec::new();
    let completion = report_luns(&report_luns_cdb(0, 4096), &[0, 1, 300], &mut data);
    assert_good(completion);
    assert_eq!(be32(&data, 0), 24);
    assert_eq!(data.len(), 32);
    assert_eq!(&data[8..16], &[0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&data[16..24], &[0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&data[24..32], &[0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
    assert_eq!(encode_lun(16383), [0x7f, 0xff, 0, 0, 0, 0, 0, 0]);

    assert_good(report_luns(&report_luns_cdb(2, 4096), &[0, 1], &mut data));
    assert_eq!(be32(&data, 0), 16);
    assert_good(report_luns(&report_luns_cdb(1, 4096), &[0, 1], &mut data));
    assert_eq!(
        (be32(&data, 0), data.len()),
        (0, 8),
        "no well known logical units"
    );
    assert_good(report_luns(&report_luns_cdb(0, 16), &[0, 1, 2], &mut data));
    assert_eq!(
        (be32(&data, 0), data.len()),
        (24, 16),
        "list length is untruncated"
    );

    assert_invalid_field_in_cdb(report_luns(&report_luns_cdb(0, 15), &[0], &mut data));
    assert!(data.is_empty());
    assert_invalid_field_in_cdb(report_luns(&report_luns_cdb(0x03, 4096), &[0], &mut data));
}

#[test]
fn a_unit_answers_report_luns_with_itself() {
    let (completion, data) = run(&unit(), &report_luns_cdb(0, 4096));
    assert_good(completion);
    assert_eq!(be32(&data, 0), 8);
}

#[test]
fn missing_lun_inquiry_has_qualifier_011b_and_type_1fh() {
    let mut data = Vec::new();
    assert_good(execute_no_lun(&inquiry(false, 0, 255), &[0], &mut data));
    assert_eq!(data[0], 0x7f);
    assert_eq!(usize::from(data[4]), data.len() - 5);
    assert_good(execute_no_lun(&inquiry(false, 0, 5), &[0], &mut data));
    assert_eq!(data.len(), 5);
}

#[test]
fn missing_lun_request_sense_reports_logical_unit_not_supported() {
    let mut data = Vec::new();
    let completion = execute_no_lun(&[0x03, 0, 0, 0, 252, 0], &[0], &mut data);
    assert_eq!(completion.status, Status::Good);
    assert_eq!(data.len(), 18);
    assert_eq!(
        (data[0], data[2], data[12], data[13]),
        (0x70, ILLEGAL_REQUEST, 0x25, 0x00)
    );
}

#[test]
fn missing_lun_report_luns_works_and_everything_else_fails() {
    let mut data = Vec::new();
    assert_good(execute_no_lun(
        &report_luns_cdb(0, 4096),
        &[0, 5],
        &mut data,
    ));
    assert_eq!(be32(&data, 0), 16);
    for cdb in [
        vec![0u8; 6],
        block_cdb(0x28, 10, 0, 1, 0),
        vec![0x25; 10],
        vec![],
        inquiry(true, 0, 255),
    ] {
        assert_sense(
            execute_no_lun(&cdb, &[0], &mut data),
            ILLEGAL_REQUEST,
            0x25,
            0x00,
        );
        assert!(data.is_empty());
    }
}
