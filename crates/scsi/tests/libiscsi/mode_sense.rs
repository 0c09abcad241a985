//! SCSI.ModeSense6 and the mode data other suites read (DPOFUA, WP, SWP).

use crate::harness::*;

const CURRENT: u8 = 0;
const CHANGEABLE: u8 = 1;
const DEFAULT: u8 = 2;
const SAVED: u8 = 3;

/// Splits mode data (after header and block descriptors) into (page code, page bytes).
fn pages(data: &[u8], header_len: usize, block_descriptor_len: usize) -> Vec<(u8, Vec<u8>)> {
    let mut pages = Vec::new();
    let mut at = header_len + block_descriptor_len;
    while at < data.len() {
        let length = usize::from(data[at + 1]) + 2;
        pages.push((data[at] & 0x3f, data[at..at + length].to_vec()));
        at += length;
    }
    assert_eq!(at, data.len(), "pages fill the mode data exactly");
    pages
}

#[test]
fn all_pages_holds_caching_control_and_informational_exceptions() {
    let unit = unit();
    let (completion, data) = run(&unit, &mode_sense6(false, CURRENT, 0x3f, 0, 255));
    assert_good(completion);
    assert!(data[0] >= 3);
    assert_eq!(usize::from(data[0]) + 1, data.len(), "MODE DATA LENGTH");
    assert_eq!(data[2], 0x10, "DPOFUA set, WP clear");
    assert_eq!(data[3], 8, "one short block descriptor");
    assert_eq!(u64::from(be32(&data, 4)), BLOCKS);
    assert_eq!(be32(&data, 8) & 0xff_ffff, 512);
    let codes: Vec<u8> = pages(&data, 4, 8).iter().map(|p| p.0).collect();
    assert_eq!(codes, [0x08, 0x0a, 0x1c]);
    let (completion, same) = run(&unit, &mode_sense6(false, CURRENT, 0x3f, 0xff, 255));
    assert_good(completion);
    assert_eq!(same, data, "no subpages: 3Fh/FFh equals 3Fh/00h");
}

#[test]
fn control_page_direct_matches_all_pages_and_is_sane() {
    let unit = unit();
    let (_, all) = run(&unit, &mode_sense6(false, CURRENT, 0x3f, 0, 255));
    let from_all = pages(&all, 4, 8)
        .into_iter()
        .find(|p| p.0 == 0x0a)
        .unwrap()
        .1;
    let (completion, direct) = run(&unit, &mode_sense6(false, CURRENT, 0x0a, 0, 255));
    assert_good(completion);
    let direct_pages = pages(&direct, 4, 8);
    assert_eq!(direct_pages.len(), 1);
    let control = &direct_pages[0].1;
    assert_eq!(control, &from_all);
    assert_eq!(control[1], 0x0a);
    assert!(control[2] >> 5 <= 1, "TST 0 or 1");
    assert_eq!(control[2] & 0x04, 0, "D_SENSE clear: fixed format sense");
    let queue_algorithm_modifier = control[3] >> 4;
    assert!(queue_algorithm_modifier <= 1 || queue_algorithm_modifier > 7);
    assert_ne!(control[3] >> 1 & 0x03, 2, "QERR is not 2");
    assert_ne!(control[4] >> 4 & 0x03, 1, "UA_INTLCK_CTRL is not 1");
    assert!(control[5] & 0x07 <= 2, "AUTOLOAD");
}

#[test]
fn d_sense_clear_means_fixed_format_sense() {
    let unit = unit();
    let completion = run(&unit, &block_cdb(0x88, 16, u64::MAX, 1, 0)).0;
    assert_lba_out_of_range(completion);
    assert_eq!(completion.sense.unwrap().to_fixed()[0] & 0x7f, 0x70);
}

#[test]
fn only_swp_is_changeable() {
    let unit = unit();
    let (completion, data) = run(&unit, &mode_sense6(true, CHANGEABLE, 0x0a, 0, 255));
    assert_good(completion);
    assert_eq!(data[3], 0, "DBD: no block descriptor");
    let control = &pages(&data, 4, 0)[0].1;
    assert_eq!(control[4], 0x08, "SWP changeable");
    assert!(
        control[2..]
            .iter()
            .enumerate()
            .all(|(i, &b)| i == 2 || b == 0),
        "nothing else is changeable"
    );
}

#[test]
fn default_equals_current_and_saved_is_not_supported() {
    let unit = unit();
    let (_, current) = run(&unit, &mode_sense6(false, CURRENT, 0x3f, 0, 255));
    let (completion, default) = run(&unit, &mode_sense6(false, DEFAULT, 0x3f, 0, 255));
    assert_good(completion);
    assert_eq!(default, current);
    assert_sense(
        run(&unit, &mode_sense6(false, SAVED, 0x3f, 0, 255)).0,
        ILLEGAL_REQUEST,
        0x39,
        0x00,
    );
}

#[test]
fn allocation_length_truncates_without_error() {
    let unit = unit();
    let (_, full) = run(&unit, &mode_sense6(false, CURRENT, 0x3f, 0, 255));
    for allocation_length in [0u8, 1, 4, 12, 30] {
        let (completion, data) = run(
            &unit,
            &mode_sense6(false, CURRENT, 0x3f, 0, allocation_length),
        );
        assert_good(completion);
        assert_eq!(data[..], full[..usize::from(allocation_length)]);
    }
}

#[test]
fn unknown_pages_and_subpages_are_invalid_fields() {
    let unit = unit();
    let sense =
        assert_invalid_field_in_cdb(run(&unit, &mode_sense6(false, CURRENT, 0x19, 0, 255)).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 2);
    let sense =
        assert_invalid_field_in_cdb(run(&unit, &mode_sense6(false, CURRENT, 0x0a, 0x01, 255)).0);
    assert_eq!(sense.field_pointer.unwrap().byte, 3);
}

#[test]
fn read_only_units_set_wp() {
    let (_, data) = run(
        &read_only_unit(),
        &mode_sense6(false, CURRENT, 0x3f, 0, 255),
    );
    assert_eq!(data[2] & 0x80, 0x80);
}

#[test]
fn mode_sense_10_short_and_long_block_descriptors() {
    let unit = unit();
    let mut cdb = vec![0x5a, 0x00, 0x3f, 0x00, 0, 0, 0, 0x01, 0x00, 0];
    let (completion, data) = run(&unit, &cdb);
    assert_good(completion);
    assert_eq!(usize::from(be16(&data, 0)) + 2, data.len());
    assert_eq!(data[3], 0x10);
    assert_eq!(be16(&data, 6), 8);
    assert_eq!(pages(&data, 8, 8).len(), 3);
    cdb[1] = 0x10; // LLBAA
    let (completion, data) = run(&unit, &cdb);
    assert_good(completion);
    assert_eq!(data[4] & 0x01, 1, "LONGLBA");
    assert_eq!(be16(&data, 6), 16);
    assert_eq!(be64(&data, 8), BLOCKS);
    assert_eq!(be32(&data, 20), 512);
    cdb[1] = 0x18; // LLBAA and DBD
    let (_, data) = run(&unit, &cdb);
    assert_eq!((data[4], be16(&data, 6)), (0, 0));
}
