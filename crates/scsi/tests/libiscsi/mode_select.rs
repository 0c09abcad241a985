//! MODE SELECT (6)/(10): SCSI.ModeSense6.Control-SWP and SCSI.Sanitize.Readonly
//! set and clear SWP through it.

use isoe_scsi::{LogicalUnit, Nexus, NoUnits};

use crate::harness::*;

fn mode_select6(pf: bool, sp: bool, length: u8) -> Vec<u8> {
    vec![0x15, u8::from(pf) << 4 | u8::from(sp), 0, 0, length, 0]
}

fn mode_select10(length: u16) -> Vec<u8> {
    let [high, low] = length.to_be_bytes();
    vec![0x55, 0x10, 0, 0, 0, 0, 0, high, low, 0]
}

/// The current control page as MODE SENSE (6) returns it, with no header.
fn current_control_page(unit: &LogicalUnit) -> Vec<u8> {
    let (completion, data) = run(unit, &mode_sense6(true, 0, 0x0a, 0, 255));
    assert_good(completion);
    data[4..].to_vec()
}

/// A MODE SELECT (6) parameter list: header without block descriptors, then `page`.
fn parameter_list6(page: &[u8]) -> Vec<u8> {
    let mut list = vec![0, 0, 0, 0];
    list.extend_from_slice(page);
    list
}

fn set_swp(unit: &LogicalUnit, on: bool) -> isoe_scsi::Completion {
    let mut page = current_control_page(unit);
    if on {
        page[4] |= 0x08;
    } else {
        page[4] &= !0x08;
    }
    let list = parameter_list6(&page);
    run_out(unit, &mode_select6(true, false, list.len() as u8), &list).0
}

#[test]
fn swp_write_protects_until_cleared() {
    let unit = unit();
    assert_good(set_swp(&unit, true));
    assert_eq!(
        current_control_page(&unit)[4] & 0x08,
        0x08,
        "SWP reads back"
    );
    let (_, header) = run(&unit, &mode_sense6(true, 0, 0x0a, 0, 255));
    assert_eq!(
        header[2] & 0x80,
        0x80,
        "WP in the device-specific parameter"
    );
    assert_good(run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0);
    let write = block_cdb(0x2a, 10, 0, 1, 0);
    assert_sense(
        run_out(&unit, &write, &[0u8; BLOCK_SIZE]).0,
        DATA_PROTECT,
        0x27,
        0x02,
    );
    assert_good(set_swp(&unit, false));
    assert_good(run_out(&unit, &write, &[0u8; BLOCK_SIZE]).0);
}

#[test]
fn other_nexuses_hear_mode_parameters_changed() {
    let unit = unit();
    let other = Nexus::new("iqn.2026-11.io.isoe:other", [0x40, 0, 0, 0, 0, 2]);
    unit.attach(&nexus());
    unit.attach(&other);
    assert_good(set_swp(&unit, true));
    assert_eq!(unit.unit_attentions_queued(&nexus()), 0, "not the sender");
    let mut data_in = Vec::new();
    let tur = unit.execute(&other, &NoUnits, &[0; 6], &[], &mut data_in);
    assert_sense(tur, 0x06, 0x2a, 0x01);
    // Setting the same value again changes nothing and raises nothing.
    assert_good(set_swp(&unit, true));
    assert_eq!(unit.unit_attentions_queued(&other), 0);
}

#[test]
fn fixed_fields_pf_sp_and_truncation_are_rejected() {
    let unit = unit();
    let mut page = current_control_page(&unit);
    page[3] ^= 0x10; // QUEUE ALGORITHM MODIFIER is not changeable.
    let list = parameter_list6(&page);
    let sense = assert_sense(
        run_out(&unit, &mode_select6(true, false, list.len() as u8), &list).0,
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    let pointer = sense.field_pointer.expect("field pointer");
    assert_eq!(
        (pointer.c_d, pointer.byte, pointer.bit_pointer),
        (false, 4 + 3, Some(4))
    );

    let list = parameter_list6(&current_control_page(&unit));
    let sense = assert_invalid_field_in_cdb(
        run_out(&unit, &mode_select6(false, false, list.len() as u8), &list).0,
    );
    assert_eq!(sense.field_pointer.unwrap().bit_pointer, Some(4), "PF");
    let sense = assert_invalid_field_in_cdb(
        run_out(&unit, &mode_select6(true, true, list.len() as u8), &list).0,
    );
    assert_eq!(sense.field_pointer.unwrap().bit_pointer, Some(0), "SP");

    // The page is cut short by the parameter list length.
    let short = (list.len() - 1) as u8;
    assert_sense(
        run_out(&unit, &mode_select6(true, false, short), &list).0,
        ILLEGAL_REQUEST,
        0x1a,
        0x00,
    );
    // An unknown page.
    let mut unknown = list.clone();
    unknown[4] = 0x19;
    assert_sense(
        run_out(
            &unit,
            &mode_select6(true, false, list.len() as u8),
            &unknown,
        )
        .0,
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    // Zero length changes nothing.
    assert_good(run(&unit, &mode_select6(true, false, 0)).0);
}

#[test]
fn mode_select_10_with_a_block_descriptor() {
    let unit = unit();
    let mut page = current_control_page(&unit);
    page[4] |= 0x08;
    let mut list = vec![0, 0, 0, 0, 0, 0, 0, 8];
    list.extend_from_slice(&(BLOCKS as u32).to_be_bytes());
    list.extend_from_slice(&(BLOCK_SIZE as u32).to_be_bytes());
    list.extend_from_slice(&page);
    assert_good(run_out(&unit, &mode_select10(list.len() as u16), &list).0);
    assert_eq!(current_control_page(&unit)[4] & 0x08, 0x08);
    // A different block length cannot be selected.
    list[8 + 6] = 0x10;
    let sense = assert_sense(
        run_out(&unit, &mode_select10(list.len() as u16), &list).0,
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    assert_eq!(sense.field_pointer.unwrap().byte, 8 + 5);
}

#[test]
fn read_only_units_stay_write_protected() {
    let unit = read_only_unit();
    let write = block_cdb(0x2a, 10, 0, 1, 0);
    assert_sense(
        run_out(&unit, &write, &[0u8; BLOCK_SIZE]).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
    assert_good(set_swp(&unit, false));
    assert_sense(
        run_out(&unit, &write, &[0u8; BLOCK_SIZE]).0,
        DATA_PROTECT,
        0x27,
        0x00,
    );
}
