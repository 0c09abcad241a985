//! RECEIVE COPY RESULTS (SPC-4 6.18; SPC-5 6.19 THIRD-PARTY COPY IN) and
//! what the copy manager tells about itself: the copy status it holds per
//! I_T nexus and list identifier, its operating parameters, and the
//! Third-party Copy VPD page (SPC-4 7.8.17).

use crate::copy_manager::{
    CopyOutcome, BLOCK_TO_BLOCK, COPY_CHUNK_BYTES, HELD_COPIES_MAX, IDENTIFICATION_DESCRIPTOR,
    MAX_CSCD_DESCRIPTORS, MAX_DESCRIPTOR_LIST_LENGTH, MAX_INLINE_DATA_LENGTH,
    MAX_SEGMENT_DESCRIPTORS,
};
use crate::data_in::truncate_to_allocation_length;
use crate::opcode::{EXTENDED_COPY, RECEIVE_COPY_RESULTS};
use crate::{cdb, LogicalUnit, Nexus, Sense};

/// RECEIVE COPY RESULTS service actions (SPC-4 table 243).
pub(crate) const COPY_STATUS_SA: u8 = 0x00;
/// OPERATING PARAMETERS.
pub(crate) const OPERATING_PARAMETERS_SA: u8 = 0x03;
/// FAILED SEGMENT DETAILS.
pub(crate) const FAILED_SEGMENT_DETAILS_SA: u8 = 0x04;

/// The largest MAXIMUM SEGMENT LENGTH: NUMBER OF BLOCKS is 16 bits.
fn maximum_segment_length_bytes(unit: &LogicalUnit) -> u32 {
    u32::try_from(u64::from(u16::MAX) * unit.block_size()).unwrap_or(u32::MAX)
}

/// RECEIVE COPY RESULTS (LID1 service actions).
pub(crate) fn receive_copy_results(
    unit: &LogicalUnit,
    nexus: &Nexus,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let list_id = cdb[2];
    let allocation_length = cdb::u32_at(cdb, 10);
    match cdb[1] & 0x1f {
        COPY_STATUS_SA => {
            let status = unit
                .copy_results
                .copy_status(nexus, list_id)
                .ok_or_else(|| Sense::invalid_field_in_cdb_byte(2))?;
            copy_status(status, data_in);
        }
        OPERATING_PARAMETERS_SA => operating_parameters(unit, data_in),
        FAILED_SEGMENT_DETAILS_SA => {
            let failed = unit
                .copy_results
                .take_failed(nexus, list_id)
                .ok_or_else(|| Sense::invalid_field_in_cdb_byte(2))?;
            failed_segment_details(failed, data_in);
        }
        _ => return Err(Sense::invalid_field_in_cdb(1, 4)),
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// SPC-4 6.18.3 COPY STATUS: 12 bytes.
fn copy_status(status: Option<CopyOutcome>, data_in: &mut Vec<u8>) {
    let (copy_manager_status, outcome) = match status {
        None => (0x00, CopyOutcome::default()),
        Some(outcome) if outcome.sense.is_none() => (0x01, outcome),
        Some(outcome) => (0x02, outcome),
    };
    // TRANSFER COUNT UNITS: the smallest power of 1024 that fits in 32 bits.
    let mut units = 0u8;
    let mut count = outcome.transferred_bytes;
    while count > u64::from(u32::MAX) {
        count >>= 10;
        units += 1;
    }
    data_in.extend_from_slice(&8u32.to_be_bytes()); // AVAILABLE DATA
    data_in.push(copy_manager_status); // HDD=0
    data_in.extend_from_slice(&outcome.segments_processed.to_be_bytes());
    data_in.push(units);
    data_in.extend_from_slice(&(count as u32).to_be_bytes());
}

/// SPC-4 6.18.4 OPERATING PARAMETERS: the limits `extended_copy` enforces.
fn operating_parameters(unit: &LogicalUnit, data_in: &mut Vec<u8>) {
    let start = data_in.len();
    data_in.extend_from_slice(&[0; 4]); // AVAILABLE DATA, set below
    data_in.push(0x01); // SNLID: LIST ID USAGE 11b is supported
    data_in.extend_from_slice(&[0; 3]);
    data_in.extend_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    data_in.extend_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    data_in.extend_from_slice(&MAX_DESCRIPTOR_LIST_LENGTH.to_be_bytes());
    data_in.extend_from_slice(&maximum_segment_length_bytes(unit).to_be_bytes());
    data_in.extend_from_slice(&MAX_INLINE_DATA_LENGTH.to_be_bytes());
    data_in.extend_from_slice(&0u32.to_be_bytes()); // HELD DATA LIMIT: no data is held
    data_in.extend_from_slice(&0u32.to_be_bytes()); // MAXIMUM STREAM DEVICE TRANSFER SIZE
    data_in.extend_from_slice(&[0; 2]);
    data_in.extend_from_slice(&(HELD_COPIES_MAX as u16).to_be_bytes()); // TOTAL CONCURRENT COPIES
    data_in.push(HELD_COPIES_MAX as u8); // MAXIMUM CONCURRENT COPIES
    data_in.push(COPY_CHUNK_BYTES.trailing_zeros() as u8); // DATA SEGMENT GRANULARITY (log2)
    data_in.push(0); // INLINE DATA GRANULARITY
    data_in.push(0); // HELD DATA GRANULARITY
    data_in.extend_from_slice(&[0; 3]);
    data_in.push(2); // IMPLEMENTED DESCRIPTOR LIST LENGTH
    data_in.extend_from_slice(&[BLOCK_TO_BLOCK, IDENTIFICATION_DESCRIPTOR]);
    let available = (data_in.len() - start - 4) as u32;
    data_in[start..start + 4].copy_from_slice(&available.to_be_bytes());
}

/// SPC-4 6.18.5 FAILED SEGMENT DETAILS: the failed command's status and
/// sense; AVAILABLE DATA 0 while the copy runs.
fn failed_segment_details(failed: Option<CopyOutcome>, data_in: &mut Vec<u8>) {
    let Some(sense) = failed.and_then(|outcome| outcome.sense) else {
        data_in.extend_from_slice(&[0; 4]);
        return;
    };
    let sense_data = sense.to_fixed();
    let available = (60 + sense_data.len() - 4) as u32;
    data_in.extend_from_slice(&available.to_be_bytes());
    data_in.resize(data_in.len() + 52, 0);
    data_in.push(0x02); // COPY COMMAND STATUS: CHECK CONDITION
    data_in.push(0);
    data_in.extend_from_slice(&(sense_data.len() as u16).to_be_bytes());
    data_in.extend_from_slice(&sense_data);
}

/// Appends the body of the Third-party Copy VPD page (SPC-4 7.8.17): the
/// commands, limits, descriptors and general copy operations above.
pub(crate) fn third_party_copy_vpd(unit: &LogicalUnit, data_in: &mut Vec<u8>) {
    // 0001h Supported Commands (SPC-4 7.8.17.3).
    let commands = [
        EXTENDED_COPY,
        1,
        0x00,
        RECEIVE_COPY_RESULTS,
        3,
        COPY_STATUS_SA,
        OPERATING_PARAMETERS_SA,
        FAILED_SEGMENT_DETAILS_SA,
    ];
    let mut body = vec![commands.len() as u8];
    body.extend_from_slice(&commands);
    push_descriptor(0x0001, &body, data_in);

    // 0004h Parameter Data (SPC-4 7.8.17.4).
    let mut body = vec![0; 4];
    body.extend_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    body.extend_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    body.extend_from_slice(&MAX_DESCRIPTOR_LIST_LENGTH.to_be_bytes());
    body.extend_from_slice(&MAX_INLINE_DATA_LENGTH.to_be_bytes());
    body.resize(28, 0);
    push_descriptor(0x0004, &body, data_in);

    // 0008h Supported Descriptors (SPC-4 7.8.17.5).
    push_descriptor(
        0x0008,
        &[2, BLOCK_TO_BLOCK, IDENTIFICATION_DESCRIPTOR],
        data_in,
    );

    // 000Ch Supported CSCD Descriptor IDs (SPC-4 7.8.17.6): only list indexes.
    push_descriptor(0x000c, &[0, 0], data_in);

    // 8001h General Copy Operations (SPC-4 7.8.17.9).
    let mut body = Vec::with_capacity(32);
    body.extend_from_slice(&(HELD_COPIES_MAX as u32).to_be_bytes()); // TOTAL CONCURRENT COPIES
    body.extend_from_slice(&(HELD_COPIES_MAX as u32).to_be_bytes()); // MAXIMUM IDENTIFIED CONCURRENT COPIES
    body.extend_from_slice(&maximum_segment_length_bytes(unit).to_be_bytes());
    body.push(COPY_CHUNK_BYTES.trailing_zeros() as u8); // DATA SEGMENT GRANULARITY
    body.push(0); // INLINE DATA GRANULARITY
    body.resize(32, 0);
    push_descriptor(0x8001, &body, data_in);
}

/// One third-party copy descriptor: type, length, body padded to 4 bytes.
fn push_descriptor(descriptor_type: u16, body: &[u8], data_in: &mut Vec<u8>) {
    let padded_len = body.len().next_multiple_of(4);
    data_in.extend_from_slice(&descriptor_type.to_be_bytes());
    data_in.extend_from_slice(&(padded_len as u16).to_be_bytes());
    data_in.extend_from_slice(body);
    data_in.resize(data_in.len() + padded_len - body.len(), 0);
}
