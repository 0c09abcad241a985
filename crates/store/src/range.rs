//! Range checking shared by every store.

use crate::StoreError;

/// Checks that `offset..offset+len` lies inside a store of `size` bytes,
/// without overflowing on hostile offsets.
pub(crate) fn check_range(offset: u64, len: u64, size: u64) -> Result<(), StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(StoreError::OutOfRange { offset, len, size }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_edges_and_overflow() {
        assert!(check_range(0, 10, 10).is_ok());
        assert!(check_range(10, 0, 10).is_ok());
        assert!(check_range(5, 6, 10).is_err());
        assert!(check_range(11, 0, 10).is_err());
        assert!(check_range(u64::MAX, 2, 10).is_err());
    }
}
