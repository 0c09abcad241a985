//! EXTENDED COPY (LID1) (SPC-4 6.3; SPC-5 6.6 calls it THIRD-PARTY COPY
//! OUT, service action 00h): the copy manager copies blocks from one logical
//! unit of this target to another (or within one) without the data crossing
//! the network. Identification descriptors (E4h) name the units by their NAA
//! designator; block-to-block segment descriptors (02h) say what to copy.
//! The copy runs synchronously, in bounded chunks.

use std::ops::Deref;
use std::sync::Arc;

use crate::copy_manager::{
    CopyOutcome, ListIdUsage, BLOCK_TO_BLOCK, BLOCK_TO_BLOCK_SEGMENT_LEN, COPY_CHUNK_BYTES,
    CSCD_DESCRIPTOR_LEN, IDENTIFICATION_DESCRIPTOR, MAX_CSCD_DESCRIPTORS,
    MAX_DESCRIPTOR_LIST_LENGTH, MAX_INLINE_DATA_LENGTH, MAX_SEGMENT_DESCRIPTORS,
};
use crate::logical_unit::Context;
use crate::{cdb, lba, LogicalUnit, Sense};

/// SPC-4 6.3.1 parameter list header length.
const HEADER_LEN: usize = 16;
/// CSCD descriptor types EAh (IPv6) and EBh (IP copy service) are 64 bytes.
const LONG_CSCD_DESCRIPTOR_LEN: usize = 64;

/// ASCQs of ASC 26h for the parameter list checks (SPC-4 6.3.1).
const TOO_MANY_TARGET_DESCRIPTORS: u8 = 0x06;
const UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE: u8 = 0x07;
const TOO_MANY_SEGMENT_DESCRIPTORS: u8 = 0x08;
const UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE: u8 = 0x09;
const INLINE_DATA_LENGTH_EXCEEDED: u8 = 0x0b;

/// A parsed, checked parameter list.
#[derive(Debug)]
struct CopyRequest {
    list_id: u8,
    list_id_usage: ListIdUsage,
    cscds: Vec<Cscd>,
    segments: Vec<Segment>,
}

/// One identification CSCD descriptor (SPC-4 6.3.6.2).
#[derive(Debug)]
struct Cscd {
    /// Offset of the descriptor in the parameter list, for sense pointers.
    at: usize,
    /// The NAA designator naming a logical unit, or None for a designator
    /// of another type, which no unit here has.
    naa: Option<[u8; 16]>,
    /// DISK BLOCK LENGTH the initiator expects of the unit.
    block_length: u32,
}

/// One block device to block device segment descriptor (SPC-4 6.3.7.5).
#[derive(Debug)]
struct Segment {
    at: usize,
    source: u16,
    destination: u16,
    /// DC: NUMBER OF BLOCKS counts destination blocks, not source blocks.
    destination_count: bool,
    blocks: u16,
    source_lba: u64,
    destination_lba: u64,
}

/// EXTENDED COPY (LID1): checks the whole parameter list, then copies
/// segment by segment; the outcome is held per list identifier for
/// RECEIVE COPY RESULTS when LIST ID USAGE asks for it.
pub(crate) fn extended_copy(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    if cdb[1] & 0x1f != 0 {
        // LID4 (01h) and the ROD token service actions are not supported.
        return Err(Sense::invalid_field_in_cdb(1, 4));
    }
    let parameter_list_length = usize::try_from(cdb::u32_at(cdb, 10)).unwrap_or(usize::MAX);
    if parameter_list_length == 0 {
        // SPC-4 6.3.1: a zero length copies nothing and is not an error.
        return Ok(());
    }
    if data_out.len() < parameter_list_length {
        return Err(Sense::parameter_list_length_error());
    }
    let request = parse(&data_out[..parameter_list_length])?;
    let copies = &unit.copy_results;
    let held = request.list_id_usage != ListIdUsage::None;
    if held {
        copies.begin(context.nexus, request.list_id)?;
    }
    let mut outcome = CopyOutcome::default();
    let result = run_segments(unit, context, &request, &mut outcome);
    outcome.sense = result.err();
    if held {
        let keep = request.list_id_usage == ListIdUsage::Hold;
        copies.finish(context.nexus, request.list_id, keep, outcome);
    }
    result
}

/// SPC-4 6.3.1: header, CSCD descriptors, segment descriptors.
fn parse(list: &[u8]) -> Result<CopyRequest, Sense> {
    if list.len() < HEADER_LEN {
        return Err(Sense::parameter_list_length_error());
    }
    let list_id = list[0];
    let list_id_usage = match (list[1] >> 3) & 0x03 {
        0b00 => ListIdUsage::Hold,
        0b10 => ListIdUsage::Discard,
        0b11 => ListIdUsage::None,
        _ => return Err(Sense::invalid_field_in_parameter_list(1, Some(4))),
    };
    let cscd_list_length = usize::from(cdb::u16_at(list, 2));
    let segment_list_length = cdb::u32_at(list, 8) as usize;
    let inline_data_length = cdb::u32_at(list, 12);
    if inline_data_length > MAX_INLINE_DATA_LENGTH {
        return Err(Sense::copy_parameter_error(INLINE_DATA_LENGTH_EXCEEDED, 12));
    }
    let descriptors_length = cscd_list_length.saturating_add(segment_list_length);
    if descriptors_length > MAX_DESCRIPTOR_LIST_LENGTH as usize
        || HEADER_LEN + descriptors_length > list.len()
    {
        return Err(Sense::parameter_list_length_error());
    }
    let cscd_end = HEADER_LEN + cscd_list_length;
    let cscds = parse_cscds(list, cscd_end)?;
    let segments = parse_segments(list, cscd_end, cscd_end + segment_list_length)?;
    Ok(CopyRequest {
        list_id,
        list_id_usage,
        cscds,
        segments,
    })
}

/// CSCD descriptors from the header's end to `end`.
fn parse_cscds(list: &[u8], end: usize) -> Result<Vec<Cscd>, Sense> {
    let mut cscds = Vec::new();
    let mut at = HEADER_LEN;
    while at < end {
        if cscds.len() == usize::from(MAX_CSCD_DESCRIPTORS) {
            return Err(Sense::copy_parameter_error(TOO_MANY_TARGET_DESCRIPTORS, 2));
        }
        let type_code = list[at];
        let length = match type_code {
            0xe0..=0xe9 => CSCD_DESCRIPTOR_LEN,
            0xea | 0xeb => LONG_CSCD_DESCRIPTOR_LEN,
            _ => 0,
        };
        if type_code != IDENTIFICATION_DESCRIPTOR || length == 0 {
            return Err(Sense::copy_parameter_error(
                UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE,
                at as u16,
            ));
        }
        let Some(descriptor) = list.get(at..at + length).filter(|_| at + length <= end) else {
            return Err(Sense::invalid_field_in_parameter_list(2, None));
        };
        cscds.push(parse_identification(descriptor, at)?);
        at += length;
    }
    Ok(cscds)
}

/// SPC-4 6.4.5.2 identification descriptor: a designation descriptor and the
/// block device parameters (SPC-4 6.4.5.4). Byte 1's LU ID TYPE and NUL
/// fields of SPC-3 are obsolete in SPC-4, which we claim, so they are ignored.
fn parse_identification(descriptor: &[u8], at: usize) -> Result<Cscd, Sense> {
    let peripheral_device_type = descriptor[1] & 0x1f;
    if peripheral_device_type != 0 {
        // Only block devices (SBC) can be copied to or from.
        return Err(Sense::invalid_field_in_parameter_list(
            (at + 1) as u16,
            Some(4),
        ));
    }
    // Designation descriptor (SPC-4 7.8.6.1) at byte 4: binary code set,
    // logical unit association, NAA type, 16 bytes: our units' designator.
    let code_set = descriptor[4] & 0x0f;
    let association = (descriptor[5] >> 4) & 0x03;
    let designator_type = descriptor[5] & 0x0f;
    let designator_length = usize::from(descriptor[7]);
    let naa = (code_set == 0x01
        && association == 0
        && designator_type == 0x03
        && designator_length == 16)
        .then(|| {
            let mut naa = [0u8; 16];
            naa.copy_from_slice(&descriptor[8..24]);
            naa
        });
    let block_length = u32::from_be_bytes([0, descriptor[29], descriptor[30], descriptor[31]]);
    Ok(Cscd {
        at,
        naa,
        block_length,
    })
}

/// Segment descriptors from `start` to `end`.
fn parse_segments(list: &[u8], start: usize, end: usize) -> Result<Vec<Segment>, Sense> {
    let mut segments = Vec::new();
    let mut at = start;
    while at < end {
        if segments.len() == usize::from(MAX_SEGMENT_DESCRIPTORS) {
            return Err(Sense::copy_parameter_error(TOO_MANY_SEGMENT_DESCRIPTORS, 8));
        }
        if list[at] != BLOCK_TO_BLOCK {
            return Err(Sense::copy_parameter_error(
                UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE,
                at as u16,
            ));
        }
        let Some(descriptor) = list
            .get(at..at + BLOCK_TO_BLOCK_SEGMENT_LEN)
            .filter(|_| at + BLOCK_TO_BLOCK_SEGMENT_LEN <= end)
        else {
            return Err(Sense::invalid_field_in_parameter_list(8, None));
        };
        if usize::from(cdb::u16_at(descriptor, 2)) != BLOCK_TO_BLOCK_SEGMENT_LEN - 4 {
            return Err(Sense::invalid_field_in_parameter_list(
                (at + 2) as u16,
                None,
            ));
        }
        segments.push(Segment {
            at,
            source: cdb::u16_at(descriptor, 4),
            destination: cdb::u16_at(descriptor, 6),
            destination_count: descriptor[1] & 0x02 != 0,
            blocks: cdb::u16_at(descriptor, 10),
            source_lba: cdb::u64_at(descriptor, 12),
            destination_lba: cdb::u64_at(descriptor, 20),
        });
        at += BLOCK_TO_BLOCK_SEGMENT_LEN;
    }
    Ok(segments)
}

/// A copy source or destination: this unit, or another of the target.
enum Resolved<'a> {
    This(&'a LogicalUnit),
    Other(Arc<LogicalUnit>),
}

impl Deref for Resolved<'_> {
    type Target = LogicalUnit;

    fn deref(&self) -> &LogicalUnit {
        match self {
            Resolved::This(unit) => unit,
            Resolved::Other(unit) => unit,
        }
    }
}

/// Finds the unit CSCD descriptor `index` names; a segment pointing at a
/// missing descriptor or an unknown unit cannot reach its copy target
/// (COPY ABORTED, UNREACHABLE COPY TARGET, SPC-4 6.3.7.1).
fn resolve<'a>(
    unit: &'a LogicalUnit,
    context: &Context<'_>,
    cscds: &[Cscd],
    index: u16,
    index_at: usize,
) -> Result<Resolved<'a>, Sense> {
    let unreachable = |at: usize| Sense::copy_aborted(0x08, 0x04, at as u16);
    let cscd = cscds
        .get(usize::from(index))
        .ok_or_else(|| unreachable(index_at))?;
    let naa = cscd.naa.ok_or_else(|| unreachable(cscd.at))?;
    let resolved = if naa == unit.config.naa {
        Resolved::This(unit)
    } else {
        Resolved::Other(
            context
                .units
                .unit_by_naa(&naa)
                .ok_or_else(|| unreachable(cscd.at))?,
        )
    };
    if cscd.block_length != resolved.config.block_size {
        return Err(Sense::invalid_field_in_parameter_list(
            (cscd.at + 29) as u16,
            None,
        ));
    }
    Ok(resolved)
}

/// Processes the segments in order, counting what was done in `outcome`.
fn run_segments(
    unit: &LogicalUnit,
    context: &Context<'_>,
    request: &CopyRequest,
    outcome: &mut CopyOutcome,
) -> Result<(), Sense> {
    for segment in &request.segments {
        let source = resolve(
            unit,
            context,
            &request.cscds,
            segment.source,
            segment.at + 4,
        )?;
        let destination = resolve(
            unit,
            context,
            &request.cscds,
            segment.destination,
            segment.at + 6,
        )?;
        let copied_bytes = copy_segment(&source, &destination, segment)?;
        outcome.segments_processed = outcome.segments_processed.saturating_add(1);
        outcome.transferred_bytes = outcome.transferred_bytes.saturating_add(copied_bytes);
    }
    Ok(())
}

/// SPC-4 6.3.7.5: copies NUMBER OF BLOCKS blocks (of the destination's size
/// with DC=1, else of the source's) and returns the bytes copied.
fn copy_segment(
    source: &LogicalUnit,
    destination: &LogicalUnit,
    segment: &Segment,
) -> Result<u64, Sense> {
    let counted_block_size = if segment.destination_count {
        destination.block_size()
    } else {
        source.block_size()
    };
    let length_bytes = u64::from(segment.blocks) * counted_block_size;
    if length_bytes % source.block_size() != 0 || length_bytes % destination.block_size() != 0 {
        // The blocks counted do not make whole blocks on the other side.
        return Err(Sense::invalid_field_in_parameter_list(
            (segment.at + 10) as u16,
            None,
        ));
    }
    let source_blocks = length_bytes / source.block_size();
    let destination_blocks = length_bytes / destination.block_size();
    // A range past a unit's end aborts the copy at this segment; the
    // pointer names the LBA field (SPC-4 6.3.7.1).
    lba::check_range(segment.source_lba, source_blocks, source.capacity_blocks)
        .map_err(|_| Sense::copy_aborted(0x00, 0x00, (segment.at + 12) as u16))?;
    lba::check_range(
        segment.destination_lba,
        destination_blocks,
        destination.capacity_blocks,
    )
    .map_err(|_| Sense::copy_aborted(0x00, 0x00, (segment.at + 20) as u16))?;
    destination.check_writable()?;
    destination.sanitize.check_medium()?;
    source.sanitize.check_medium()?;
    copy_bytes(
        source,
        segment.source_lba * source.block_size(),
        destination,
        segment.destination_lba * destination.block_size(),
        length_bytes,
    )?;
    Ok(length_bytes)
}

/// Moves `length_bytes` in chunks of at most [`COPY_CHUNK_BYTES`]. Within
/// one unit, a destination overlapping the source from above is copied
/// back to front so that no chunk reads bytes an earlier chunk overwrote.
fn copy_bytes(
    source: &LogicalUnit,
    source_offset: u64,
    destination: &LogicalUnit,
    destination_offset: u64,
    length_bytes: u64,
) -> Result<(), Sense> {
    let same_medium =
        std::ptr::eq(source, destination) || Arc::ptr_eq(&source.store, &destination.store);
    let backwards = same_medium
        && destination_offset > source_offset
        && destination_offset < source_offset + length_bytes;
    let chunk_bytes = COPY_CHUNK_BYTES as u64;
    let chunks = length_bytes.div_ceil(chunk_bytes);
    let mut buffer = Vec::with_capacity(COPY_CHUNK_BYTES.min(length_bytes as usize));
    for i in 0..chunks {
        let chunk = if backwards { chunks - 1 - i } else { i };
        let offset = chunk * chunk_bytes;
        let len = chunk_bytes.min(length_bytes - offset);
        buffer.clear();
        source
            .store
            .read_append(source_offset + offset, len as usize, &mut buffer)
            .map_err(|e| source.read_failed(e))?;
        // Like every medium writer, hold the destination's range lock so
        // COMPARE AND WRITE stays atomic against the copy.
        let block_size = destination.block_size();
        let first_block = (destination_offset + offset) / block_size;
        let _range = destination
            .range_locks
            .lock(first_block, (len as u64).div_ceil(block_size));
        destination
            .store
            .write_at(destination_offset + offset, &buffer)
            .map_err(|e| destination.write_failed(e))?;
    }
    Ok(())
}
