//! SCSI.ExtendedCopy and SCSI.ReceiveCopyResults: EXTENDED COPY (LID1)
//! between units found through a `UnitDirectory`, and the results it holds.

use std::sync::Arc;

use isoe_scsi::{Completion, LogicalUnit, LunConfig, UnitDirectory};

use crate::harness::*;

const COPY_ABORTED: u8 = 0x0a;

/// A target with a few units, found by their NAA designator.
struct Units(Vec<Arc<LogicalUnit>>);

impl UnitDirectory for Units {
    fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        self.0.iter().find(|u| u.config().naa == naa).cloned()
    }
}

fn naa(last: u8) -> [u8; 16] {
    let mut naa = config().naa;
    naa[15] = last;
    naa
}

/// Two units: the first answers EXTENDED COPY, the second is elsewhere in the target.
fn two_units() -> Units {
    let first = Arc::new(unit_with(config(), BLOCKS));
    let second = Arc::new(unit_with(
        LunConfig {
            naa: naa(2),
            lun_number: 1,
            ..config()
        },
        BLOCKS,
    ));
    Units(vec![first, second])
}

fn xcopy_cdb(parameter_list_length: u32) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x83;
    cdb[10..14].copy_from_slice(&parameter_list_length.to_be_bytes());
    cdb
}

fn rcr_cdb(service_action: u8, list_id: u8) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x84;
    cdb[1] = service_action;
    cdb[2] = list_id;
    cdb[10..14].copy_from_slice(&1024u32.to_be_bytes());
    cdb
}

/// An identification CSCD descriptor (E4h) naming `naa`.
fn identification(naa: &[u8; 16], byte1: u8) -> Vec<u8> {
    let mut d = vec![0u8; 32];
    d[0] = 0xe4;
    d[1] = byte1;
    d[4] = 0x01; // binary
    d[5] = 0x03; // LU association, NAA
    d[7] = 16;
    d[8..24].copy_from_slice(naa);
    d[29..32].copy_from_slice(&(BLOCK_SIZE as u32).to_be_bytes()[1..]);
    d
}

/// A block-to-block segment descriptor (02h).
fn segment(
    source: u16,
    destination: u16,
    blocks: u16,
    source_lba: u64,
    destination_lba: u64,
) -> Vec<u8> {
    let mut d = vec![0u8; 28];
    d[0] = 0x02;
    d[2..4].copy_from_slice(&0x18u16.to_be_bytes());
    d[4..6].copy_from_slice(&source.to_be_bytes());
    d[6..8].copy_from_slice(&destination.to_be_bytes());
    d[10..12].copy_from_slice(&blocks.to_be_bytes());
    d[12..20].copy_from_slice(&source_lba.to_be_bytes());
    d[20..28].copy_from_slice(&destination_lba.to_be_bytes());
    d
}

/// Header (list ID, LIST ID USAGE) and the descriptors.
fn parameter_list(list_id: u8, usage: u8, cscds: &[Vec<u8>], segments: &[Vec<u8>]) -> Vec<u8> {
    let cscd_len: usize = cscds.iter().map(Vec::len).sum();
    let segment_len: usize = segments.iter().map(Vec::len).sum();
    let mut list = vec![0u8; 16];
    list[0] = list_id;
    list[1] = usage << 3;
    list[2..4].copy_from_slice(&(cscd_len as u16).to_be_bytes());
    list[8..12].copy_from_slice(&(segment_len as u32).to_be_bytes());
    for d in cscds.iter().chain(segments) {
        list.extend_from_slice(d);
    }
    list
}

fn xcopy(units: &Units, list: &[u8]) -> Completion {
    let mut data_in = Vec::new();
    units.0[0].execute(
        &nexus(),
        units,
        &xcopy_cdb(list.len() as u32),
        list,
        &mut data_in,
    )
}

fn rcr(units: &Units, service_action: u8, list_id: u8) -> (Completion, Vec<u8>) {
    let mut data_in = Vec::new();
    let completion = units.0[0].execute(
        &nexus(),
        units,
        &rcr_cdb(service_action, list_id),
        &[],
        &mut data_in,
    );
    (completion, data_in)
}

#[test]
fn copies_between_two_units_and_holds_the_status() {
    let units = two_units();
    let (first, second) = (&units.0[0], &units.0[1]);
    fill(first, 10, 300, b'A');
    let list = parameter_list(
        7,
        0b00,
        &[identification(&naa(1), 0), identification(&naa(2), 0)],
        &[segment(0, 1, 300, 10, 100)],
    );
    assert_good(xcopy(&units, &list));
    assert_eq!(read(second, 100, 300), vec![b'A'; 300 * BLOCK_SIZE]);
    assert_eq!(read(second, 99, 1), vec![0; BLOCK_SIZE], "nothing before");

    let (completion, status) = rcr(&units, 0x00, 7);
    assert_good(completion);
    assert_eq!(be32(&status, 0), 8, "AVAILABLE DATA");
    assert_eq!(status[4], 0x01, "completed without errors");
    assert_eq!(be16(&status, 5), 1, "segments processed");
    assert_eq!((status[7], be32(&status, 8)), (0, 300 * BLOCK_SIZE as u32));
    // Reported once; then the list identifier is free.
    assert_invalid_field_in_cdb(rcr(&units, 0x00, 7).0);
}

#[test]
fn copies_within_one_unit_even_when_the_ranges_overlap() {
    let units = Units(vec![Arc::new(unit())]);
    let unit = &units.0[0];
    for lba in 0..8u64 {
        fill(unit, lba * 300, 300, lba as u8 + 1);
    }
    // 2400 blocks (over one chunk) moved up by 100 blocks onto themselves.
    let list = parameter_list(
        1,
        0b11,
        &[identification(&naa(1), 0)],
        &[segment(0, 0, 2400, 0, 100)],
    );
    assert_good(xcopy(&units, &list));
    let moved = read(unit, 100, 2400);
    for lba in 0..8usize {
        let block = &moved[lba * 300 * BLOCK_SIZE..][..BLOCK_SIZE];
        assert!(block.iter().all(|&b| b == lba as u8 + 1), "block run {lba}");
    }
}

#[test]
fn parameter_list_errors() {
    let units = two_units();
    let one = [identification(&naa(1), 0)];
    let good = parameter_list(1, 0, &one, &[segment(0, 0, 8, 0, 64)]);
    // Truncated descriptors.
    let truncated = &good[..good.len() - 1];
    let mut data_in = Vec::new();
    let completion = units.0[0].execute(
        &nexus(),
        &units,
        &xcopy_cdb(truncated.len() as u32),
        truncated,
        &mut data_in,
    );
    assert_sense(completion, ILLEGAL_REQUEST, 0x1a, 0x00);
    // Length 0 copies nothing.
    assert_good(units.0[0].execute(&nexus(), &units, &xcopy_cdb(0), &[], &mut data_in));
    // Unsupported descriptor types.
    let mut fc = identification(&naa(1), 0);
    fc[0] = 0xe0;
    assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &[fc], &[segment(0, 0, 8, 0, 64)]),
        ),
        ILLEGAL_REQUEST,
        0x26,
        0x07,
    );
    let mut stream = segment(0, 0, 8, 0, 64);
    stream[0] = 0x03;
    assert_sense(
        xcopy(&units, &parameter_list(1, 0, &one, &[stream])),
        ILLEGAL_REQUEST,
        0x26,
        0x09,
    );
    // Too many descriptors, and too long a list.
    let nine = vec![identification(&naa(1), 0); 9];
    assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &nine, &[segment(0, 0, 8, 0, 64)]),
        ),
        ILLEGAL_REQUEST,
        0x26,
        0x06,
    );
    let seventeen = vec![segment(0, 0, 8, 0, 64); 17];
    assert_sense(
        xcopy(&units, &parameter_list(1, 0, &one, &seventeen)),
        ILLEGAL_REQUEST,
        0x26,
        0x08,
    );
    assert_sense(
        xcopy(&units, &parameter_list(1, 0, &nine, &seventeen)),
        ILLEGAL_REQUEST,
        0x1a,
        0x00,
    );
    // Reserved LIST ID USAGE and inline data.
    let sense = assert_sense(
        xcopy(&units, &parameter_list(1, 0b01, &one, &[])),
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    assert_eq!(sense.field_pointer.unwrap().byte, 1);
    let mut inline = parameter_list(1, 0, &one, &[]);
    inline[15] = 4;
    inline.extend_from_slice(&[0; 4]);
    assert_sense(xcopy(&units, &inline), ILLEGAL_REQUEST, 0x26, 0x0b);
    // SPC-4 made LU ID TYPE and NUL obsolete: they are ignored.
    let obsolete_bits = [identification(&naa(1), 0xe0)];
    assert_good(xcopy(
        &units,
        &parameter_list(1, 0, &obsolete_bits, &[segment(0, 0, 8, 0, 64)]),
    ));
    // Only block devices.
    let sense = assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &[identification(&naa(1), 0x01)], &[]),
        ),
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    assert_eq!(sense.field_pointer.unwrap().byte, 17);
}

#[test]
fn unreachable_targets_and_ranges_abort_the_copy() {
    let units = two_units();
    let one = [identification(&naa(1), 0)];
    // Index past the CSCD list.
    let sense = assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &one, &[segment(0, 1, 8, 0, 64)]),
        ),
        COPY_ABORTED,
        0x08,
        0x04,
    );
    assert_eq!(sense.field_pointer.unwrap().byte, 16 + 32 + 6);
    // A unit the target does not have.
    let nowhere = [identification(&naa(9), 0)];
    assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &nowhere, &[segment(0, 0, 8, 0, 64)]),
        ),
        COPY_ABORTED,
        0x08,
        0x04,
    );
    // A designator of another type (EUI-64) names no unit here.
    let mut eui = identification(&naa(1), 0);
    eui[5] = 0x02;
    assert_sense(
        xcopy(
            &units,
            &parameter_list(1, 0, &[eui], &[segment(0, 0, 8, 0, 64)]),
        ),
        COPY_ABORTED,
        0x08,
        0x04,
    );
    // Past the end of the destination.
    let list = parameter_list(
        3,
        0,
        &one,
        &[segment(0, 0, 8, 8, 64), segment(0, 0, 8, 0, BLOCKS - 1)],
    );
    let sense = assert_sense(xcopy(&units, &list), COPY_ABORTED, 0x00, 0x00);
    assert_eq!(sense.field_pointer.unwrap().byte, 16 + 32 + 28 + 20);
    // The held status says one segment was done before the failure.
    let (completion, status) = rcr(&units, 0x00, 3);
    assert_good(completion);
    assert_eq!((status[4], be16(&status, 5)), (0x02, 1));
    let (completion, details) = rcr(&units, 0x04, 3);
    assert_good(completion);
    assert_eq!(details[56], 0x02, "CHECK CONDITION");
    let sense_len = usize::from(be16(&details, 58));
    assert_eq!(details[60 + 2] & 0x0f, COPY_ABORTED);
    assert_eq!(details.len(), 60 + sense_len);
    assert_eq!(be32(&details, 0) as usize, details.len() - 4);
}

#[test]
fn a_read_only_destination_is_write_protected() {
    let source = Arc::new(unit_with(config(), BLOCKS));
    let destination = Arc::new(unit_with(
        LunConfig {
            naa: naa(2),
            read_only: true,
            ..config()
        },
        BLOCKS,
    ));
    let units = Units(vec![source, destination]);
    let list = parameter_list(
        1,
        0b11,
        &[identification(&naa(1), 0), identification(&naa(2), 0)],
        &[segment(0, 1, 8, 0, 0)],
    );
    assert_sense(xcopy(&units, &list), DATA_PROTECT, 0x27, 0x00);
}

#[test]
fn operating_parameters_and_the_third_party_copy_page_agree() {
    let units = two_units();
    let (completion, params) = rcr(&units, 0x03, 0);
    assert_good(completion);
    assert_eq!(be32(&params, 0) as usize, params.len() - 4);
    let (max_cscd, max_segments, max_list) =
        (be16(&params, 8), be16(&params, 10), be32(&params, 12));
    assert_eq!((max_cscd, max_segments), (8, 16));
    assert!(
        u32::from(max_cscd + 1) * 32 + 28 <= max_list,
        "too many CSCDs is not too long a list"
    );
    assert!(32 + u32::from(max_segments + 1) * 28 <= max_list);
    assert_eq!(&params[43..], [2, 0x02, 0xe4]);

    let (completion, page) = run(&units.0[0], &inquiry(true, 0x8f, 1024));
    assert_good(completion);
    assert_eq!(usize::from(be16(&page, 2)) + 4, page.len());
    let mut at = 4;
    let mut types = Vec::new();
    while at < page.len() {
        let length = usize::from(be16(&page, at + 2));
        assert_eq!(length % 4, 0, "descriptors are padded to 4 bytes");
        types.push(be16(&page, at));
        if be16(&page, at) == 0x0004 {
            assert_eq!(
                (
                    be16(&page, at + 8),
                    be16(&page, at + 10),
                    be32(&page, at + 12)
                ),
                (max_cscd, max_segments, max_list)
            );
        }
        at += 4 + length;
    }
    assert_eq!(at, page.len());
    assert_eq!(types, [0x0001, 0x0004, 0x0008, 0x000c, 0x8001]);
    // Standard INQUIRY says 3PC.
    let (_, standard) = run(&units.0[0], &inquiry(false, 0, 96));
    assert_eq!(standard[5] & 0x08, 0x08);
}
