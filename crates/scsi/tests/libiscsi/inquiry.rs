//! SCSI.Inquiry and the INQUIRY parts of SCSI.Mandatory.

use crate::harness::*;

#[test]
fn standard_data_is_well_formed() {
    let unit = unit();
    let (completion, data) = run(&unit, &inquiry(false, 0, 260));
    assert_good(completion);
    assert!(data.len() >= 36);
    assert_eq!(data[0], 0x00, "qualifier 0, direct access block device");
    assert_eq!(data[1] & 0x80, 0, "not removable");
    assert!(
        (4..=6).contains(&data[2]),
        "libiscsi accepts VERSION 4..6 only, got {}",
        data[2]
    );
    assert_eq!(data[3] & 0x0f, 2, "RESPONSE DATA FORMAT");
    assert_ne!(data[3] & 0x10, 0, "HISUP");
    assert_eq!(data[3] & 0xc0, 0, "AERC and TRMTSK clear");
    assert_eq!(usize::from(data[4]), data.len() - 5, "ADDITIONAL LENGTH");
    assert_ne!(data[7] & 0x02, 0, "CMDQUE");
    assert_eq!(data[5] & 0x30, 0x10, "TPGS 01b: implicit ALUA");
    assert_eq!(data[5] & 0x01, 0, "no PROTECT");
    for (i, &b) in data[8..36].iter().enumerate() {
        assert!(
            b == 0 || (0x20..=0x7e).contains(&b),
            "non-ASCII byte {b:#x} at {}",
            i + 8
        );
    }
    assert_eq!(&data[8..16], b"ISOE    ");
    assert_eq!(&data[16..32], b"MEMORY          ");
    let descriptors: Vec<u16> = (0..8).map(|i| be16(&data, 58 + 2 * i)).collect();
    assert!(
        descriptors.contains(&0x04c0),
        "SBC-3 claimed, so libiscsi runs its SBC-3 checks"
    );
    assert!(descriptors.contains(&0x0460), "SPC-4 claimed");
}

#[test]
fn every_allocation_length_from_0_to_256_works() {
    let unit = unit();
    let (_, full) = run(&unit, &inquiry(false, 0, 260));
    for allocation_length in 0..=256u16 {
        let (completion, data) = run(&unit, &inquiry(false, 0, allocation_length));
        assert_good(completion);
        assert_eq!(data.len(), full.len().min(usize::from(allocation_length)));
        assert_eq!(data[..], full[..data.len()]);
    }
}

#[test]
fn page_code_without_evpd_and_cmddt_are_invalid_fields() {
    let unit = unit();
    let sense = assert_invalid_field_in_cdb(run(&unit, &inquiry(false, 1, 256)).0);
    let pointer = sense.field_pointer.unwrap();
    assert!(pointer.c_d);
    assert_eq!(pointer.byte, 2);
    let mut cmddt = inquiry(false, 0, 256);
    cmddt[1] = 0x02;
    assert_invalid_field_in_cdb(run(&unit, &cmddt).0);
    assert_invalid_field_in_cdb(run(&unit, &inquiry(true, 0x87, 256)).0);
}

#[test]
fn every_supported_vpd_page_is_readable() {
    let unit = unit();
    let (completion, data) = run(&unit, &inquiry(true, 0x00, 255));
    assert_good(completion);
    assert_eq!(data[1], 0x00);
    let pages = &data[4..4 + usize::from(be16(&data, 2))];
    assert_eq!(pages, [0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2]);
    for &page in pages {
        let (completion, data) = run(&unit, &inquiry(true, page, 255));
        assert_good(completion);
        assert_eq!(data[1], page);
        assert_eq!(
            usize::from(be16(&data, 2)) + 4,
            data.len(),
            "page {page:#x} length"
        );
    }
}

#[test]
fn unit_serial_number_page() {
    let (completion, data) = run(&unit(), &inquiry(true, 0x80, 255));
    assert_good(completion);
    assert_eq!(&data[4..], b"SERIAL0001");
}

#[test]
fn device_identification_page_has_naa_name_relative_port_and_port_group() {
    let unit = unit();
    let (completion, data) = run(&unit, &inquiry(true, 0x83, 255));
    assert_good(completion);
    let mut designators = Vec::new();
    let mut at = 4;
    while at < data.len() {
        let length = usize::from(data[at + 3]);
        designators.push((
            data[at],
            data[at + 1],
            data[at + 4..at + 4 + length].to_vec(),
        ));
        at += 4 + length;
    }
    assert_eq!(at, data.len(), "designators fill the page exactly");
    let naa = designators
        .iter()
        .find(|d| d.1 & 0x0f == 3)
        .expect("NAA designator");
    assert_eq!(
        (naa.0, naa.1 & 0x30),
        (0x01, 0x00),
        "binary, logical unit association"
    );
    assert_eq!(naa.2, unit.config().naa);
    assert_eq!(naa.2[0] >> 4, 6, "NAA IEEE Registered Extended");
    let name = designators
        .iter()
        .find(|d| d.1 & 0x0f == 8)
        .expect("SCSI name string");
    assert_eq!(
        (name.0, name.1),
        (0x53, 0x98),
        "iSCSI, UTF-8, PIV, target port"
    );
    assert_eq!(name.2.len() % 4, 0);
    assert!(name.2.starts_with(b"iqn.2024-01.org.isoe:disk,t,0x0001\0"));
    let port = designators
        .iter()
        .find(|d| d.1 & 0x0f == 4)
        .expect("relative target port");
    assert_eq!(port.1 & 0x30, 0x10);
    assert_eq!(be16(&port.2, 2), 1);
    let group = designators
        .iter()
        .find(|d| d.1 & 0x0f == 5)
        .expect("target port group");
    assert_eq!(
        (group.0, group.1),
        (0x51, 0x95),
        "iSCSI, binary, PIV, target port"
    );
    assert_eq!(
        group.2,
        [0, 0, 0, 1],
        "the one group of a unit served alone"
    );
}

#[test]
fn block_limits_page_satisfies_sbc3_checks() {
    let (completion, data) = run(&unit(), &inquiry(true, 0xb0, 64));
    assert_good(completion);
    assert_eq!(data.len(), usize::from(data[3]) + 4);
    assert_eq!(data[3], 0x3c, "SBC-3 page length");
    let maximum_transfer_length = be32(&data, 8);
    assert!(
        maximum_transfer_length >= 256,
        "libiscsi transfers up to 256 blocks"
    );
    let max_unmap = be32(&data, 20);
    let max_unmap_descriptors = be32(&data, 24);
    assert!(
        max_unmap > 0 && max_unmap <= 1024 * 1024,
        "MAXIMUM UNMAP LBA COUNT {max_unmap}"
    );
    assert!(max_unmap_descriptors > 0 && max_unmap_descriptors <= 1024 * 1024);
    assert_eq!(data[4] & 0x01, 0, "WSNZ: zero blocks reaches the last LBA");
    assert_eq!(
        be32(&data, 28),
        8,
        "OPTIMAL UNMAP GRANULARITY: one 4 KiB page"
    );
    assert_eq!(be32(&data, 32), 0x8000_0000, "UGAVALID, aligned at LBA 0");
    assert_eq!(be64(&data, 36), 1 << 20, "MAXIMUM WRITE SAME LENGTH");
}

#[test]
fn characteristics_and_provisioning_pages() {
    let unit = unit();
    let (completion, data) = run(&unit, &inquiry(true, 0xb1, 255));
    assert_good(completion);
    assert_eq!(be16(&data, 4), 1, "non-rotating medium");
    assert_eq!(data[3], 0x3c);
    let (completion, data) = run(&unit, &inquiry(true, 0xb2, 64));
    assert_good(completion);
    assert_eq!(data[5] & 0xe0, 0xe0, "LBPU, LBPWS, LBPWS10");
    assert_eq!(data[5] >> 2 & 0x07, 1, "LBPRZ");
    assert_eq!(data[6] & 0x07, 0x02, "thin provisioned");
}

#[test]
fn mandatory_sbc_commands_succeed() {
    let unit = unit();
    let read10 = block_cdb(0x28, 10, 0, 1, 0);
    let read16 = block_cdb(0x88, 16, 0, 1, 0);
    for cdb in [
        inquiry(false, 0, 255),
        vec![0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        read_capacity16(15),
        read10,
        read16,
        vec![0; 6],
    ] {
        assert_good(run(&unit, &cdb).0);
    }
}
