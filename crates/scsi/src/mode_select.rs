//! MODE SELECT (6) and (10) (SPC-5 6.11, 6.12): the initiator sends back mode
//! pages with the changeable fields (those MODE SENSE's changeable values
//! mark) set as it wants them. Today only the control page's SWP changes.

use crate::mode::{self, ALL_PAGES, CONTROL_PAGE, CONTROL_SWP_BIT, CONTROL_SWP_BYTE};
use crate::mode_sense::{push_page, PageControl};
use crate::opcode::MODE_SELECT_10;
use crate::{attention, cdb, LogicalUnit, Nexus, Sense};

/// Byte 1 of the CDB: PF (page format) and SP (save pages).
const PF: u8 = 0x10;
const SP: u8 = 0x01;

/// One page the parameter list asks to set, checked against our pages.
struct PageRequest {
    code: u8,
    /// Where the page starts in the parameter list.
    bytes_at: usize,
    /// Its length, header included.
    len: usize,
}

/// MODE SELECT (6) or (10): validates the whole parameter list before any
/// change takes effect, then applies it and tells every other I_T nexus.
pub(crate) fn mode_select(
    unit: &LogicalUnit,
    nexus: &Nexus,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    let ten_byte = cdb[0] == MODE_SELECT_10;
    if cdb[1] & PF == 0 {
        // SPC-5 6.11: PF=0 means vendor specific pages; ours follow SPC-5.
        return Err(Sense::invalid_field_in_cdb(1, 4));
    }
    if cdb[1] & SP != 0 {
        // SPC-5 6.11: no page is saveable, so SP=1 cannot be honoured.
        return Err(Sense::invalid_field_in_cdb(1, 0));
    }
    if cdb[1] & 0x0e != 0 {
        return Err(Sense::invalid_field_in_cdb(1, 3));
    }
    let parameter_list_length = if ten_byte {
        usize::from(cdb::u16_at(cdb, 7))
    } else {
        usize::from(cdb[4])
    };
    if parameter_list_length == 0 {
        // SPC-5 6.11: no data, nothing changes; not an error.
        return Ok(());
    }
    if data_out.len() < parameter_list_length {
        return Err(Sense::parameter_list_length_error());
    }
    let list = &data_out[..parameter_list_length];
    let pages = check_parameter_list(unit, list, ten_byte)?;
    let mut changed = false;
    for page in &pages {
        if page.code == CONTROL_PAGE {
            let swp = list[page.bytes_at + CONTROL_SWP_BYTE] & CONTROL_SWP_BIT != 0;
            changed |= unit.mode.set_software_write_protect(swp);
        }
    }
    if changed {
        // SPC-5 7.5.1: other I_T nexuses learn of the change by a unit attention.
        unit.raise_unit_attention_for_others(nexus, attention::MODE_PARAMETERS_CHANGED);
        // A shared unit's other gateways take the new value, and their
        // nexuses hear of it.
        let swp = u8::from(unit.mode.software_write_protect());
        let message = format!("{} {swp}", crate::logical_unit::MODE_MESSAGE);
        unit.reservations.publish(message.as_bytes());
    }
    Ok(())
}

/// SPC-5 7.5.2-7.5.4: header, block descriptors, then whole pages. Returns
/// the pages, each checked against the current and changeable values.
fn check_parameter_list(
    unit: &LogicalUnit,
    list: &[u8],
    ten_byte: bool,
) -> Result<Vec<PageRequest>, Sense> {
    let header_len = if ten_byte { 8 } else { 4 };
    if list.len() < header_len {
        return Err(Sense::parameter_list_length_error());
    }
    // MODE DATA LENGTH is reserved for MODE SELECT; the device-specific
    // parameter's WP bit is ignored (SBC-4 6.5.1).
    let (medium_type_at, block_descriptor_length, long_lba) = if ten_byte {
        (2, usize::from(cdb::u16_at(list, 6)), list[4] & 0x01 != 0)
    } else {
        (1, usize::from(list[3]), false)
    };
    if list[medium_type_at] != 0 {
        return Err(Sense::invalid_field_in_parameter_list(
            medium_type_at as u16,
            None,
        ));
    }
    let descriptors_end = header_len + block_descriptor_length;
    if descriptors_end > list.len() {
        return Err(Sense::parameter_list_length_error());
    }
    check_block_descriptors(
        unit,
        &list[header_len..descriptors_end],
        header_len,
        long_lba,
    )?;

    let mut pages = Vec::new();
    let mut at = descriptors_end;
    // Each page is at least 2 bytes, so the loop ends within list.len()/2 turns.
    while at < list.len() {
        let page = check_page(unit, list, at)?;
        at += page.len;
        pages.push(page);
    }
    Ok(pages)
}

/// SBC-4 6.5.2: a block descriptor may be sent back, but neither the number
/// of blocks nor the block length can change (0 blocks means "unchanged").
fn check_block_descriptors(
    unit: &LogicalUnit,
    descriptors: &[u8],
    offset: usize,
    long_lba: bool,
) -> Result<(), Sense> {
    let descriptor_len = if long_lba { 16 } else { 8 };
    if !descriptors.len().is_multiple_of(descriptor_len) || descriptors.len() > descriptor_len {
        // One descriptor at most for a direct-access device.
        let field = if long_lba { 6 } else { 3 };
        return Err(Sense::invalid_field_in_parameter_list(field, None));
    }
    let Some(descriptor) = descriptors.get(..descriptor_len) else {
        return Ok(());
    };
    let (blocks, block_length, length_at) = if long_lba {
        (cdb::u64_at(descriptor, 0), cdb::u32_at(descriptor, 12), 12)
    } else {
        let length = u32::from_be_bytes([0, descriptor[5], descriptor[6], descriptor[7]]);
        (u64::from(cdb::u32_at(descriptor, 0)), length, 5)
    };
    let current_blocks = if long_lba {
        unit.capacity_blocks
    } else {
        u64::from(u32::try_from(unit.capacity_blocks).unwrap_or(u32::MAX))
    };
    if blocks != 0 && blocks != current_blocks {
        return Err(Sense::invalid_field_in_parameter_list(offset as u16, None));
    }
    if block_length != unit.config.block_size {
        return Err(Sense::invalid_field_in_parameter_list(
            (offset + length_at) as u16,
            None,
        ));
    }
    Ok(())
}

/// One mode page at `at`: known code, our page length, and no bit changed
/// outside the changeable mask.
fn check_page(unit: &LogicalUnit, list: &[u8], at: usize) -> Result<PageRequest, Sense> {
    if list.len() - at < 2 {
        return Err(Sense::parameter_list_length_error());
    }
    let code = list[at] & 0x3f;
    let subpage_format = list[at] & 0x40 != 0;
    if subpage_format || code == ALL_PAGES || !mode::is_supported_page(code) {
        return Err(Sense::invalid_field_in_parameter_list(at as u16, Some(5)));
    }
    let mut current = Vec::new();
    push_page(unit, code, PageControl::Current, &mut current);
    let mut changeable = Vec::new();
    push_page(unit, code, PageControl::Changeable, &mut changeable);
    debug_assert_eq!(current.len(), changeable.len());
    if usize::from(list[at + 1]) != current.len() - 2 {
        return Err(Sense::invalid_field_in_parameter_list(
            (at + 1) as u16,
            None,
        ));
    }
    let Some(sent) = list.get(at..at + current.len()) else {
        return Err(Sense::parameter_list_length_error());
    };
    // Byte 0 holds PS (reserved in MODE SELECT) and the page code; the
    // page length was checked above.
    for (i, ((&sent, &now), &mask)) in sent
        .iter()
        .zip(&current)
        .zip(&changeable)
        .enumerate()
        .skip(2)
    {
        let fixed_bits_changed = (sent ^ now) & !mask;
        if fixed_bits_changed != 0 {
            let bit = 7 - fixed_bits_changed.leading_zeros() as u8;
            return Err(Sense::invalid_field_in_parameter_list(
                (at + i) as u16,
                Some(bit),
            ));
        }
    }
    Ok(PageRequest {
        code,
        bytes_at: at,
        len: current.len(),
    })
}
