//! PRE-FETCH (10/16) (SBC-4 5.9, 5.10).

use crate::block_cdb::BlockCdb;
use crate::{LogicalUnit, Sense};

/// Range-checks and returns GOOD. SBC-4 5.9 returns CONDITION MET only when
/// the blocks were placed in a cache with room for them all; this unit has
/// no cache of its own, so GOOD is the answer (libiscsi expects GOOD too).
pub(crate) fn pre_fetch(unit: &LogicalUnit, cdb: &[u8]) -> Result<(), Sense> {
    let block = BlockCdb::decode(cdb);
    unit.check_range(block.logical_block_address, u64::from(block.block_count))
}
