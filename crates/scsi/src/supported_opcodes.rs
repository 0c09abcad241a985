//! REPORT SUPPORTED OPERATION CODES (SPC-5 6.35) and the table of every
//! command this device server executes, with its CDB usage data.

use crate::data_in::truncate_to_allocation_length;
use crate::opcode::*;
use crate::{cdb, Sense};

/// One supported command: opcode, service action if the opcode is
/// multiplexed, and CDB USAGE DATA (SPC-5 6.35.3): a bit set for every CDB
/// bit the device server looks at; byte 0 is the opcode and a service
/// action field holds the service action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedCommand {
    /// OPERATION CODE.
    pub opcode: u8,
    /// SERVICE ACTION, for opcodes that have them.
    pub service_action: Option<u16>,
    /// CDB USAGE DATA; its length is the CDB length.
    pub usage_data: &'static [u8],
}

const fn command(opcode: u8, usage_data: &'static [u8]) -> SupportedCommand {
    SupportedCommand {
        opcode,
        service_action: None,
        usage_data,
    }
}

const fn with_service_action(
    opcode: u8,
    service_action: u16,
    usage_data: &'static [u8],
) -> SupportedCommand {
    SupportedCommand {
        opcode,
        service_action: Some(service_action),
        usage_data,
    }
}

/// Every command `LogicalUnit::execute` implements, ascending by opcode.
/// Byte 1 of READ/WRITE is DPO|FUA (18h): libiscsi checks it against DPOFUA.
pub const SUPPORTED_COMMANDS: &[SupportedCommand] = &[
    command(TEST_UNIT_READY, &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
    command(REQUEST_SENSE, &[0x03, 0x01, 0x00, 0x00, 0xff, 0x00]),
    command(READ_6, &[0x08, 0x1f, 0xff, 0xff, 0xff, 0x00]),
    command(WRITE_6, &[0x0a, 0x1f, 0xff, 0xff, 0xff, 0x00]),
    command(INQUIRY, &[0x12, 0x01, 0xff, 0xff, 0xff, 0x00]),
    command(RESERVE_6, &[0x16, 0x00, 0x00, 0x00, 0x00, 0x00]),
    command(RELEASE_6, &[0x17, 0x00, 0x00, 0x00, 0x00, 0x00]),
    command(MODE_SELECT_6, &[0x15, 0x1f, 0x00, 0x00, 0xff, 0x00]),
    command(MODE_SENSE_6, &[0x1a, 0x08, 0xff, 0xff, 0xff, 0x00]),
    command(START_STOP_UNIT, &[0x1b, 0x01, 0x00, 0x0f, 0xf7, 0x00]),
    command(
        PREVENT_ALLOW_MEDIUM_REMOVAL,
        &[0x1e, 0x00, 0x00, 0x00, 0x03, 0x00],
    ),
    command(
        READ_CAPACITY_10,
        &[0x25, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    ),
    command(
        READ_10,
        &[0x28, 0x18, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        WRITE_10,
        &[0x2a, 0x18, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        WRITE_AND_VERIFY_10,
        &[0x2e, 0x12, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        VERIFY_10,
        &[0x2f, 0x16, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        PRE_FETCH_10,
        &[0x34, 0x02, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        SYNCHRONIZE_CACHE_10,
        &[0x35, 0x02, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        READ_DEFECT_DATA_10,
        &[0x37, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    command(
        WRITE_SAME_10,
        &[0x41, 0x08, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0x00],
    ),
    command(
        UNMAP,
        &[0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        SANITIZE,
        0x01,
        &[0x48, 0xa1, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        SANITIZE,
        0x02,
        &[0x48, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        SANITIZE,
        0x03,
        &[0x48, 0xa3, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        SANITIZE,
        0x1f,
        &[0x48, 0xbf, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    command(
        MODE_SELECT_10,
        &[0x55, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    command(
        MODE_SENSE_10,
        &[0x5a, 0x18, 0xff, 0xff, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        EXTENDED_COPY,
        0x00,
        &[
            0x83, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0x00, 0x00,
        ],
    ),
    with_service_action(
        RECEIVE_COPY_RESULTS,
        0x00,
        &[
            0x84, 0x00, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0x00, 0x00,
        ],
    ),
    with_service_action(
        RECEIVE_COPY_RESULTS,
        0x03,
        &[
            0x84, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0x00, 0x00,
        ],
    ),
    with_service_action(
        RECEIVE_COPY_RESULTS,
        0x04,
        &[
            0x84, 0x04, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0x00, 0x00,
        ],
    ),
    command(
        RESERVE_10,
        &[0x56, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    ),
    command(
        RELEASE_10,
        &[0x57, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_IN,
        0,
        &[0x5e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_IN,
        1,
        &[0x5e, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_IN,
        2,
        &[0x5e, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_IN,
        3,
        &[0x5e, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        0,
        &[0x5f, 0x00, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        1,
        &[0x5f, 0x01, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        2,
        &[0x5f, 0x02, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        3,
        &[0x5f, 0x03, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        4,
        &[0x5f, 0x04, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        5,
        &[0x5f, 0x05, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        6,
        &[0x5f, 0x06, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    with_service_action(
        PERSISTENT_RESERVE_OUT,
        7,
        &[0x5f, 0x07, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
    ),
    command(
        READ_16,
        &[
            0x88, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        COMPARE_AND_WRITE,
        &[
            0x89, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0xff,
            0x1f, 0x00,
        ],
    ),
    command(
        WRITE_16,
        &[
            0x8a, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        ORWRITE_16,
        &[
            0x8b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x00,
        ],
    ),
    command(
        WRITE_AND_VERIFY_16,
        &[
            0x8e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        VERIFY_16,
        &[
            0x8f, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        PRE_FETCH_16,
        &[
            0x90, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        SYNCHRONIZE_CACHE_16,
        &[
            0x91, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        WRITE_SAME_16,
        &[
            0x93, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x3f, 0x00,
        ],
    ),
    command(
        WRITE_ATOMIC_16,
        &[
            0x9c, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x00,
        ],
    ),
    with_service_action(
        SERVICE_ACTION_IN_16,
        READ_CAPACITY_16_SA,
        &[
            0x9e, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0x00, 0x00,
        ],
    ),
    with_service_action(
        SERVICE_ACTION_IN_16,
        GET_LBA_STATUS_SA,
        &[
            0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x03, 0x00,
        ],
    ),
    command(
        REPORT_LUNS,
        &[
            0xa0, 0x00, 0xff, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        ],
    ),
    // Byte 1: PARAMETER DATA FORMAT (bits 7:5) and the service action.
    with_service_action(
        MAINTENANCE_IN,
        REPORT_TARGET_PORT_GROUPS_SA,
        &[
            0xa3, 0xea, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        ],
    ),
    with_service_action(
        MAINTENANCE_IN,
        REPORT_SUPPORTED_OPERATION_CODES_SA,
        &[
            0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        ],
    ),
    command(
        READ_12,
        &[
            0xa8, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00,
        ],
    ),
    command(
        WRITE_12,
        &[
            0xaa, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00,
        ],
    ),
    command(
        WRITE_AND_VERIFY_12,
        &[
            0xae, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00,
        ],
    ),
    command(
        VERIFY_12,
        &[
            0xaf, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00,
        ],
    ),
    command(
        READ_DEFECT_DATA_12,
        &[
            0xb7, 0x1f, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        ],
    ),
];

/// SPC-5 6.35.4 command timeouts descriptor: NOMINAL COMMAND PROCESSING
/// TIMEOUT (0: not specified) and RECOMMENDED COMMAND TIMEOUT, in seconds.
const NOMINAL_TIMEOUT_SECONDS: u32 = 0;
const RECOMMENDED_TIMEOUT_SECONDS: u32 = 30;

/// Byte 2 of the CDB: RCTD (bit 7) and REPORTING OPTIONS (bits 2:0).
const RCTD: u8 = 0x80;

/// The commands whose opcode matches, or every command for `None`.
fn has_service_actions(opcode: u8) -> bool {
    SUPPORTED_COMMANDS
        .iter()
        .any(|c| c.opcode == opcode && c.service_action.is_some())
}

fn push_timeouts_descriptor(data_in: &mut Vec<u8>) {
    data_in.extend_from_slice(&[0x00, 0x0a, 0x00, 0x00]);
    data_in.extend_from_slice(&NOMINAL_TIMEOUT_SECONDS.to_be_bytes());
    data_in.extend_from_slice(&RECOMMENDED_TIMEOUT_SECONDS.to_be_bytes());
}

/// REPORT SUPPORTED OPERATION CODES, reporting options 000b (all commands),
/// 001b (one opcode without service actions), 010b (one opcode and service
/// action) and 011b (one opcode, with or without a service action).
pub(crate) fn report_supported_operation_codes(
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let return_timeouts = cdb[2] & RCTD != 0;
    let reporting_options = cdb[2] & 0x07;
    let requested_opcode = cdb[3];
    let requested_service_action = cdb::u16_at(cdb, 4);
    let allocation_length = cdb::u32_at(cdb, 6);
    match reporting_options {
        0b000 => all_commands(return_timeouts, data_in),
        0b001 => {
            // SPC-5 6.35.1: an opcode with service actions cannot be asked for alone.
            if has_service_actions(requested_opcode) {
                return Err(Sense::invalid_field_in_cdb(2, 2));
            }
            one_command(requested_opcode, None, return_timeouts, data_in);
        }
        0b010 => {
            if !has_service_actions(requested_opcode) {
                return Err(Sense::invalid_field_in_cdb(2, 2));
            }
            one_command(
                requested_opcode,
                Some(requested_service_action),
                return_timeouts,
                data_in,
            );
        }
        0b011 => {
            let service_action =
                has_service_actions(requested_opcode).then_some(requested_service_action);
            if service_action.is_none() && requested_service_action != 0 {
                // No such service action exists: report "not supported".
                data_in.extend_from_slice(&[0x00, 0x01, 0x00, 0x00]);
            } else {
                one_command(requested_opcode, service_action, return_timeouts, data_in);
            }
        }
        _ => return Err(Sense::invalid_field_in_cdb(2, 2)),
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// SPC-5 6.35.2: the all_commands parameter data format.
fn all_commands(return_timeouts: bool, data_in: &mut Vec<u8>) {
    data_in.extend_from_slice(&[0; 4]);
    for command in SUPPORTED_COMMANDS {
        data_in.push(command.opcode);
        data_in.push(0);
        data_in.extend_from_slice(&command.service_action.unwrap_or(0).to_be_bytes());
        data_in.push(0);
        let ctdp = if return_timeouts { 0x02 } else { 0x00 };
        let servactv = u8::from(command.service_action.is_some());
        data_in.push(ctdp | servactv);
        data_in.extend_from_slice(&(command.usage_data.len() as u16).to_be_bytes());
        if return_timeouts {
            push_timeouts_descriptor(data_in);
        }
    }
    let command_data_length = (data_in.len() - 4) as u32;
    data_in[0..4].copy_from_slice(&command_data_length.to_be_bytes());
}

/// SPC-5 6.35.3: the one_command parameter data format. SUPPORT 011b with
/// usage data when found, 001b (not supported) and nothing else when not.
fn one_command(
    opcode: u8,
    service_action: Option<u16>,
    return_timeouts: bool,
    data_in: &mut Vec<u8>,
) {
    let found = SUPPORTED_COMMANDS.iter().find(|c| {
        c.opcode == opcode && (service_action.is_none() || c.service_action == service_action)
    });
    let Some(command) = found else {
        data_in.extend_from_slice(&[0x00, 0x01, 0x00, 0x00]);
        return;
    };
    let ctdp = if return_timeouts { 0x80 } else { 0x00 };
    data_in.push(0);
    data_in.push(ctdp | 0x03);
    data_in.extend_from_slice(&(command.usage_data.len() as u16).to_be_bytes());
    data_in.extend_from_slice(command.usage_data);
    if return_timeouts {
        push_timeouts_descriptor(data_in);
    }
}
