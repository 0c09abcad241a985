//! Logical block address range checks (SBC-4 4.5).

use crate::Sense;

/// SBC-4 4.5: a command whose range reaches past the last LBA fails with
/// LOGICAL BLOCK ADDRESS OUT OF RANGE; so does a zero-length command whose
/// LBA itself lies past it. Overflowing ranges (LBA near 2^64) fail too.
pub fn check_range(
    logical_block_address: u64,
    block_count: u64,
    capacity_blocks: u64,
) -> Result<(), Sense> {
    let end = logical_block_address.checked_add(block_count.max(1));
    match end {
        Some(end) if end <= capacity_blocks => Ok(()),
        _ => Err(Sense::lba_out_of_range()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges() {
        assert!(check_range(0, 0, 100).is_ok());
        assert!(check_range(99, 1, 100).is_ok());
        assert!(check_range(99, 0, 100).is_ok());
        assert!(check_range(100, 0, 100).is_err());
        assert!(check_range(99, 2, 100).is_err());
        assert!(check_range(u64::MAX, 1, 100).is_err());
        assert!(check_range(0, 0, 0).is_err());
    }
}
