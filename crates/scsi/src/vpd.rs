//! Vital product data pages (SPC-5 7.7, SBC-4 6.6).

use crate::logical_unit::Context;
use crate::{limits, LogicalUnit, Sense};

/// PERIPHERAL DEVICE TYPE 00h: direct access block device (SBC).
pub(crate) const DIRECT_ACCESS_BLOCK_DEVICE: u8 = 0x00;

/// SUPPORTED VPD PAGES (SPC-5 7.7.16).
pub const SUPPORTED_VPD_PAGES: u8 = 0x00;
/// UNIT SERIAL NUMBER (SPC-5 7.7.18).
pub const UNIT_SERIAL_NUMBER: u8 = 0x80;
/// DEVICE IDENTIFICATION (SPC-5 7.7.6).
pub const DEVICE_IDENTIFICATION: u8 = 0x83;
/// BLOCK LIMITS (SBC-4 6.6.4).
pub const BLOCK_LIMITS: u8 = 0xb0;
/// BLOCK DEVICE CHARACTERISTICS (SBC-4 6.6.2).
pub const BLOCK_DEVICE_CHARACTERISTICS: u8 = 0xb1;
/// LOGICAL BLOCK PROVISIONING (SBC-4 6.6.6).
pub const LOGICAL_BLOCK_PROVISIONING: u8 = 0xb2;
/// THIRD-PARTY COPY (SPC-4 7.8.17).
pub const THIRD_PARTY_COPY: u8 = 0x8f;

/// Every page we return, in ascending order as SPC-5 7.7.16 requires.
const PAGES: [u8; 7] = [
    SUPPORTED_VPD_PAGES,
    UNIT_SERIAL_NUMBER,
    DEVICE_IDENTIFICATION,
    THIRD_PARTY_COPY,
    BLOCK_LIMITS,
    BLOCK_DEVICE_CHARACTERISTICS,
    LOGICAL_BLOCK_PROVISIONING,
];

/// Appends VPD page `page_code` as seen through the I_T nexus of
/// `context`, or fails with INVALID FIELD IN CDB for a page we do not have.
pub(crate) fn vital_product_data(
    unit: &LogicalUnit,
    context: &Context<'_>,
    page_code: u8,
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let start = data_in.len();
    data_in.extend_from_slice(&[DIRECT_ACCESS_BLOCK_DEVICE, page_code, 0, 0]);
    match page_code {
        SUPPORTED_VPD_PAGES => data_in.extend_from_slice(&PAGES),
        UNIT_SERIAL_NUMBER => unit_serial_number(unit, data_in),
        DEVICE_IDENTIFICATION => device_identification(unit, context, data_in),
        THIRD_PARTY_COPY => crate::copy_results::third_party_copy_vpd(unit, data_in),
        BLOCK_LIMITS => block_limits(unit, data_in),
        BLOCK_DEVICE_CHARACTERISTICS => block_device_characteristics(data_in),
        LOGICAL_BLOCK_PROVISIONING => logical_block_provisioning(data_in),
        _ => return Err(Sense::invalid_field_in_cdb_byte(2)),
    }
    let page_length = (data_in.len() - start - 4) as u16;
    data_in[start + 2..start + 4].copy_from_slice(&page_length.to_be_bytes());
    Ok(())
}

/// SPC-5 7.7.18: PRODUCT SERIAL NUMBER, ASCII. Without a configured serial the
/// NAA designator in hex stands in, so the serial is still unique.
fn unit_serial_number(unit: &LogicalUnit, data_in: &mut Vec<u8>) {
    let serial = &unit.config.unit_serial;
    if serial.is_empty() {
        data_in.extend_from_slice(unit.config.naa_hex().as_bytes());
    } else {
        data_in.extend(
            serial
                .bytes()
                .map(|b| if (0x20..=0x7e).contains(&b) { b } else { b' ' }),
        );
    }
}

/// SPC-5 7.7.6: the logical unit's NAA designator, then the designators of
/// the target port the command came through: its SCSI name string, its
/// relative target port identifier, and its target port group. The port
/// is the I_T nexus's, so each path of a multipath initiator sees its own.
fn device_identification(unit: &LogicalUnit, context: &Context<'_>, data_in: &mut Vec<u8>) {
    // SPC-5 7.7.6.6.5 NAA IEEE Registered Extended: binary, LU association, type 3.
    data_in.extend_from_slice(&[0x01, 0x03, 0x00, 16]);
    data_in.extend_from_slice(&unit.config.naa);

    let port = context.nexus.relative_target_port;
    let target_name = &unit.config.target_name;
    if !target_name.is_empty() {
        // SPC-5 7.7.6.11 SCSI name string: protocol iSCSI (5h), UTF-8, PIV=1,
        // target port association, type 8; the iSCSI target port name
        // (RFC 7143 §4.4.1) `<target name>,t,0x<portal group tag>`, null
        // terminated, padded to 4 bytes.
        let port_name = format!("{target_name},t,0x{port:04x}");
        let name = port_name.as_bytes();
        let padded_len = (name.len() + 1).next_multiple_of(4).min(252);
        let mut designator = name[..name.len().min(padded_len - 1)].to_vec();
        designator.resize(padded_len, 0);
        data_in.extend_from_slice(&[0x53, 0x98, 0x00, padded_len as u8]);
        data_in.extend_from_slice(&designator);
    }

    // SPC-5 7.7.6.8 relative target port: protocol iSCSI, binary, PIV=1,
    // target port association, type 4.
    data_in.extend_from_slice(&[0x51, 0x94, 0x00, 4, 0, 0]);
    data_in.extend_from_slice(&port.to_be_bytes());

    // SPC-5 7.7.6.9 target port group: protocol iSCSI, binary, PIV=1,
    // target port association, type 5; the ALUA group REPORT TARGET PORT
    // GROUPS lists the port in.
    if let Some(group) = unit.groups(context.units).group_of_port(port) {
        data_in.extend_from_slice(&[0x51, 0x95, 0x00, 4, 0, 0]);
        data_in.extend_from_slice(&group.to_be_bytes());
    }
}

/// SBC-4 6.6.4 Block Limits, page length 3Ch.
fn block_limits(unit: &LogicalUnit, data_in: &mut Vec<u8>) {
    let block_size = unit.config.block_size;
    // WSNZ=0: WRITE SAME with zero blocks reaches the last LBA (SBC-4 5.47).
    data_in.push(0x00);
    data_in.push(unit.maximum_compare_and_write_blocks());
    let granularity = limits::optimal_unmap_granularity_blocks(block_size) as u16;
    data_in.extend_from_slice(&granularity.to_be_bytes()); // OPTIMAL TRANSFER LENGTH GRANULARITY
    data_in.extend_from_slice(&limits::maximum_transfer_length_blocks(block_size).to_be_bytes());
    data_in.extend_from_slice(&limits::optimal_transfer_length_blocks(block_size).to_be_bytes());
    data_in.extend_from_slice(&limits::maximum_transfer_length_blocks(block_size).to_be_bytes()); // MAXIMUM PREFETCH LENGTH
    data_in.extend_from_slice(&limits::MAXIMUM_UNMAP_LBA_COUNT.to_be_bytes());
    data_in.extend_from_slice(&limits::MAXIMUM_UNMAP_BLOCK_DESCRIPTOR_COUNT.to_be_bytes());
    data_in.extend_from_slice(&limits::optimal_unmap_granularity_blocks(block_size).to_be_bytes());
    // UGAVALID=1, UNMAP GRANULARITY ALIGNMENT 0: granules start at LBA 0,
    // so on 4 KiB page boundaries.
    data_in.extend_from_slice(&0x8000_0000u32.to_be_bytes());
    data_in.extend_from_slice(&limits::MAXIMUM_WRITE_SAME_LENGTH.to_be_bytes());
    data_in.extend_from_slice(
        &limits::maximum_atomic_transfer_length_blocks(block_size).to_be_bytes(),
    );
    data_in.extend_from_slice(&limits::atomic_alignment_blocks(block_size).to_be_bytes());
    data_in.extend_from_slice(
        &limits::atomic_transfer_length_granularity_blocks(block_size).to_be_bytes(),
    );
    // MAXIMUM ATOMIC TRANSFER LENGTH WITH ATOMIC BOUNDARY, MAXIMUM ATOMIC
    // BOUNDARY SIZE: atomic boundaries are not supported.
    data_in.extend_from_slice(&[0x00; 8]);
}

/// SBC-4 6.6.2 Block Device Characteristics: non-rotating medium; blocks
/// read back (as zeros) after a BLOCK ERASE or CRYPTOGRAPHIC ERASE sanitize.
fn block_device_characteristics(data_in: &mut Vec<u8>) {
    data_in.extend_from_slice(&1u16.to_be_bytes()); // MEDIUM ROTATION RATE 0001h: non-rotating
    data_in.push(0); // PRODUCT TYPE: not indicated
    data_in.push(0x40 | 0x10); // WABEREQ=01b, WACEREQ=01b; NOMINAL FORM FACTOR not reported
    data_in.resize(data_in.len() + 0x3c - 4, 0);
}

/// SBC-4 6.6.6 Logical Block Provisioning: thin provisioned, UNMAP and both
/// WRITE SAME commands may unmap, unmapped blocks read as zeros.
fn logical_block_provisioning(data_in: &mut Vec<u8>) {
    data_in.push(0); // THRESHOLD EXPONENT: no thresholds
    data_in.push(0x80 | 0x40 | 0x20 | 0x04); // LBPU, LBPWS, LBPWS10, LBPRZ=001b
    data_in.push(0x02); // PROVISIONING TYPE 010b: thin
    data_in.push(0); // THRESHOLD PERCENTAGE
}
