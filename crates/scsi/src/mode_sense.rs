//! MODE SENSE (6) and (10) (SPC-5 6.13, 6.14): a unit's mode pages
//! ([`crate::mode`]) as their current, changeable or default values.

use crate::data_in::truncate_to_allocation_length;
use crate::mode::{
    ALL_PAGES, ALL_SUBPAGES, CACHING_PAGE, CONTROL_PAGE, CONTROL_SWP_BIT, CONTROL_SWP_BYTE,
    INFORMATIONAL_EXCEPTIONS_PAGE, PAGES,
};
use crate::opcode::MODE_SENSE_10;
use crate::{cdb, LogicalUnit, Sense};

/// SPC-5 6.13.2 PAGE CONTROL field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageControl {
    Current,
    Changeable,
    Default,
}

/// The device-specific parameter of the mode parameter header (SBC-4 6.5.1):
/// WP for a read-only or software write protected unit, DPOFUA since DPO
/// and FUA are honoured.
fn device_specific_parameter(unit: &LogicalUnit) -> u8 {
    let protected = unit.config.read_only || unit.mode.software_write_protect();
    let write_protect = if protected { 0x80 } else { 0x00 };
    write_protect | 0x10
}

/// MODE SENSE (6) or (10).
pub(crate) fn mode_sense(
    unit: &LogicalUnit,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let ten_byte = cdb[0] == MODE_SENSE_10;
    let disable_block_descriptors = cdb[1] & 0x08 != 0;
    let long_lba_accepted = ten_byte && cdb[1] & 0x10 != 0;
    let page_code = cdb[2] & 0x3f;
    let subpage_code = cdb[3];
    let allocation_length = if ten_byte {
        u32::from(cdb::u16_at(cdb, 7))
    } else {
        u32::from(cdb[4])
    };
    let page_control = match cdb[2] >> 6 {
        0 => PageControl::Current,
        1 => PageControl::Changeable,
        2 => PageControl::Default,
        _ => return Err(Sense::saving_parameters_not_supported()),
    };
    if subpage_code != 0x00 && subpage_code != ALL_SUBPAGES {
        return Err(Sense::invalid_field_in_cdb_byte(3));
    }
    let pages: &[u8] = match page_code {
        ALL_PAGES => &PAGES,
        CACHING_PAGE => &PAGES[0..1],
        CONTROL_PAGE => &PAGES[1..2],
        INFORMATIONAL_EXCEPTIONS_PAGE => &PAGES[2..3],
        _ => return Err(Sense::invalid_field_in_cdb(2, 5)),
    };

    let header_len = if ten_byte { 8 } else { 4 };
    data_in.resize(header_len, 0);
    if !disable_block_descriptors {
        push_block_descriptor(unit, long_lba_accepted, page_control, data_in);
    }
    let block_descriptor_len = data_in.len() - header_len;
    for &page in pages {
        push_page(unit, page, page_control, data_in);
    }

    let device_specific = device_specific_parameter(unit);
    if ten_byte {
        let mode_data_length = (data_in.len() - 2) as u16;
        data_in[0..2].copy_from_slice(&mode_data_length.to_be_bytes());
        data_in[3] = device_specific;
        data_in[4] = u8::from(long_lba_accepted && !disable_block_descriptors); // LONGLBA
        data_in[6..8].copy_from_slice(&(block_descriptor_len as u16).to_be_bytes());
    } else {
        data_in[0] = (data_in.len() - 1) as u8;
        data_in[2] = device_specific;
        data_in[3] = block_descriptor_len as u8;
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// SBC-4 6.5.2: short (8-byte) or long LBA (16-byte) block descriptor.
/// Nothing in it is changeable, so the changeable values are zeros.
fn push_block_descriptor(
    unit: &LogicalUnit,
    long_lba: bool,
    page_control: PageControl,
    data_in: &mut Vec<u8>,
) {
    let (blocks, block_length) = match page_control {
        PageControl::Changeable => (0, 0),
        _ => (unit.capacity_blocks, unit.config.block_size),
    };
    if long_lba {
        data_in.extend_from_slice(&blocks.to_be_bytes());
        data_in.extend_from_slice(&[0; 4]);
        data_in.extend_from_slice(&block_length.to_be_bytes());
    } else {
        // SBC-4 6.5.2.2: a count that does not fit is reported as FFFFFFFFh.
        let short_blocks = u32::try_from(blocks).unwrap_or(u32::MAX);
        data_in.extend_from_slice(&short_blocks.to_be_bytes());
        data_in.push(0);
        data_in.extend_from_slice(&block_length.to_be_bytes()[1..]);
    }
}

/// Appends one mode page; PS=0 since no page can be saved. The changeable
/// values have a bit set for every bit MODE SELECT may change.
pub(crate) fn push_page(
    unit: &LogicalUnit,
    page: u8,
    page_control: PageControl,
    data_in: &mut Vec<u8>,
) {
    let changeable = page_control == PageControl::Changeable;
    match page {
        CACHING_PAGE => {
            // WCE=1: writes land in the host page cache until SYNCHRONIZE
            // CACHE or FUA; nothing is changeable.
            let mut page = [0u8; 20];
            page[0] = CACHING_PAGE;
            page[1] = 0x12;
            if !changeable {
                page[2] = 0x04;
            }
            data_in.extend_from_slice(&page);
        }
        CONTROL_PAGE => {
            // TST=000b, D_SENSE=0 (fixed format sense), QUEUE ALGORITHM
            // MODIFIER=1 (unrestricted reordering), QERR=00b, BUSY TIMEOUT
            // PERIOD unlimited; SWP as MODE SELECT last set it (the only
            // changeable field).
            let mut page = [0u8; 12];
            page[0] = CONTROL_PAGE;
            page[1] = 0x0a;
            match page_control {
                PageControl::Changeable => page[CONTROL_SWP_BYTE] = CONTROL_SWP_BIT,
                PageControl::Current | PageControl::Default => {
                    page[3] = 0x10;
                    page[8..10].copy_from_slice(&0xffffu16.to_be_bytes());
                }
            }
            if page_control == PageControl::Current && unit.mode.software_write_protect() {
                page[CONTROL_SWP_BYTE] |= CONTROL_SWP_BIT;
            }
            data_in.extend_from_slice(&page);
        }
        _ => {
            // Informational exceptions: DEXCPT=1, nothing is ever reported.
            let mut page = [0u8; 12];
            page[0] = INFORMATIONAL_EXCEPTIONS_PAGE;
            page[1] = 0x0a;
            if !changeable {
                page[2] = 0x08;
            }
            data_in.extend_from_slice(&page);
        }
    }
}
