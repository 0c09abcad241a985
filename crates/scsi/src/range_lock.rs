//! Striped LBA range locks: what makes COMPARE AND WRITE (SBC-4 5.3) and
//! WRITE ATOMIC (SBC-4 5.49) atomic against every other command that
//! changes the medium, from any session or connection.
//!
//! The medium is cut into regions of `REGION_BYTES`; region `r` belongs to
//! stripe `r % STRIPES`. A medium-writing command locks the stripes of every
//! region its range touches, in ascending stripe order (so two commands never
//! wait on each other in a cycle), and holds them until its data is on the
//! store. Reads take no lock. An uncontended write costs one mutex per
//! megabyte it spans; unrelated ranges rarely share a stripe, so there is no
//! unit-wide lock on the command path (ARCHITECTURE datapath rule 4).

use isoe_sync::MutexExt;
use std::sync::{Mutex, MutexGuard};

/// Number of stripes per logical unit; a range is a set of stripes, held in
/// one `u64` mask.
const STRIPES: usize = 64;

/// Bytes of medium per region: large enough that a typical transfer takes
/// one or two stripes, small enough that unrelated I/O seldom collides.
const REGION_BYTES: u64 = 1 << 20;

/// The stripes of one logical unit.
#[derive(Debug)]
pub(crate) struct RangeLocks {
    stripes: [Mutex<()>; STRIPES],
    /// log2 of the logical blocks in one region.
    region_shift_blocks: u32,
}

/// The stripes one command holds; they are released when this is dropped.
pub(crate) struct RangeGuard<'a> {
    /// Held for their `Drop`, which unlocks.
    _guards: [Option<MutexGuard<'a, ()>>; STRIPES],
}

impl RangeLocks {
    /// Locks for a unit with `block_size`-byte logical blocks (a power of two
    /// no larger than a region).
    pub(crate) fn new(block_size: u32) -> Self {
        assert!(block_size.is_power_of_two() && u64::from(block_size) <= REGION_BYTES);
        Self {
            stripes: std::array::from_fn(|_| Mutex::new(())),
            region_shift_blocks: REGION_BYTES.trailing_zeros() - block_size.trailing_zeros(),
        }
    }

    /// The stripes covering `block_count` blocks from `logical_block_address`,
    /// as a bit mask. An empty range takes no stripe.
    fn stripe_mask(&self, logical_block_address: u64, block_count: u64) -> u64 {
        if block_count == 0 {
            return 0;
        }
        let first_region = logical_block_address >> self.region_shift_blocks;
        let last_block = logical_block_address.saturating_add(block_count - 1);
        let last_region = last_block >> self.region_shift_blocks;
        if last_region - first_region >= STRIPES as u64 - 1 {
            return u64::MAX;
        }
        (first_region..=last_region).fold(0u64, |mask, region| {
            mask | 1u64 << (region % STRIPES as u64)
        })
    }

    /// Blocks until this command owns every stripe of the range. The caller
    /// holds no other `RangeGuard` of this unit while it waits.
    pub(crate) fn lock(&self, logical_block_address: u64, block_count: u64) -> RangeGuard<'_> {
        let mask = self.stripe_mask(logical_block_address, block_count);
        let mut guards: [Option<MutexGuard<'_, ()>>; STRIPES] = std::array::from_fn(|_| None);
        // Lowest set bit first: ascending stripe order for every caller, so
        // no cycle of waiters can form.
        let mut remaining = mask;
        while remaining != 0 {
            let index = remaining.trailing_zeros() as usize;
            let stripe = &self.stripes[index];
            guards[index] = Some(stripe.lock_unpoisoned());
            remaining &= remaining - 1;
        }
        RangeGuard { _guards: guards }
    }
}

impl RangeGuard<'_> {
    /// How many stripes this guard holds.
    #[cfg(test)]
    fn held(&self) -> usize {
        self._guards.iter().filter(|g| g.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_follow_regions() {
        let locks = RangeLocks::new(512);
        let blocks_per_region = 2048;
        assert_eq!(locks.stripe_mask(0, 0), 0);
        assert_eq!(locks.stripe_mask(0, 1), 1);
        assert_eq!(locks.stripe_mask(blocks_per_region - 1, 2), 0b11);
        assert_eq!(locks.stripe_mask(blocks_per_region * 64, 1), 1);
        assert_eq!(
            locks.stripe_mask(blocks_per_region * 63, blocks_per_region + 1),
            1 | 1 << 63
        );
        assert_eq!(locks.stripe_mask(0, blocks_per_region * 64), u64::MAX);
        assert_eq!(
            locks.stripe_mask(u64::MAX - 1, 2),
            1 << ((u64::MAX >> 11) % 64)
        );
        let locks_4k = RangeLocks::new(4096);
        assert_eq!(locks_4k.stripe_mask(256, 1), 0b10);
    }

    #[test]
    fn overlapping_ranges_exclude_each_other_and_guards_release() {
        let locks = RangeLocks::new(512);
        let guard = locks.lock(0, 4096);
        assert_eq!(guard.held(), 2);
        assert!(locks.stripes[0].try_lock().is_err());
        assert!(locks.stripes[2].try_lock().is_ok());
        drop(guard);
        assert!(locks.stripes[0].try_lock().is_ok());
        assert_eq!(locks.lock(0, u64::MAX).held(), STRIPES);
    }
}
