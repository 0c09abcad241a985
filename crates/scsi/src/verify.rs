//! VERIFY (10/12/16) (SBC-4 5.33-5.35).

use crate::block_cdb::check_no_protection;
use crate::block_cdb::BlockCdb;
use crate::{LogicalUnit, Sense};

/// Medium is read back in pieces of at most this many bytes when comparing.
const COMPARE_PIECE_BYTES: usize = 1 << 20;

/// VERIFY. BYTCHK (byte 1 bits 2:1): 00b checks the range only (our media have
/// no unreadable blocks to find), 01b compares the Data-Out with the medium,
/// 11b compares one Data-Out block with every block in the range.
pub(crate) fn verify(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> Result<(), Sense> {
    check_no_protection(cdb)?;
    let byte_check = (cdb[1] >> 1) & 0x03;
    if byte_check == 0b10 {
        return Err(Sense::invalid_field_in_cdb(1, 2));
    }
    let block = BlockCdb::decode(cdb);
    unit.check_transfer_length(&block)?;
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    let block_size = unit.block_size() as usize;
    let wanted_bytes = block.block_count as usize * block_size;
    match byte_check {
        0b01 => {
            // Compare whole blocks of what the transport delivered.
            let usable = wanted_bytes.min(data_out.len() / block_size * block_size);
            compare_with_medium(unit, block.logical_block_address, &data_out[..usable])
        }
        0b11 => {
            let Some(pattern) = data_out.get(..block_size) else {
                return Err(Sense::invalid_field_in_information_unit());
            };
            for index in 0..u64::from(block.block_count) {
                compare_with_medium(unit, block.logical_block_address + index, pattern)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Compares `expected` with the medium from `logical_block_address`; a
/// difference is MISCOMPARE with the offset of its first byte in INFORMATION.
pub(crate) fn compare_with_medium(
    unit: &LogicalUnit,
    logical_block_address: u64,
    expected: &[u8],
) -> Result<(), Sense> {
    let mut medium = vec![0u8; expected.len().min(COMPARE_PIECE_BYTES)];
    let start_bytes = logical_block_address * unit.block_size();
    for (piece_index, piece) in expected.chunks(COMPARE_PIECE_BYTES).enumerate() {
        let piece_offset = piece_index * COMPARE_PIECE_BYTES;
        let medium = &mut medium[..piece.len()];
        unit.store
            .read_at(start_bytes + piece_offset as u64, medium)
            .map_err(|e| unit.read_failed(e))?;
        if let Some(position) = piece.iter().zip(medium.iter()).position(|(a, b)| a != b) {
            return Err(Sense::miscompare((piece_offset + position) as u64));
        }
    }
    Ok(())
}
