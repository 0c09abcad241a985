//! SYNCHRONIZE CACHE (10/16) (SBC-4 5.29, 5.30).

use crate::block_cdb::BlockCdb;
use crate::logical_unit::Context;
use crate::{LogicalUnit, Sense};

/// Range-checks, then makes every completed write durable. NUMBER OF LOGICAL
/// BLOCKS 0 means "to the end of the medium"; the whole store is flushed in
/// any case, which the standard allows. IMMED is honoured by finishing first.
pub(crate) fn synchronize_cache(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
) -> Result<(), Sense> {
    let block = BlockCdb::decode(cdb);
    unit.check_range(block.logical_block_address, u64::from(block.block_count))?;
    if unit.is_asynchronous() {
        unit.submit(context, isoe_store::IoKind::Flush, 0);
        return Ok(());
    }
    unit.store.flush().map_err(|e| unit.write_failed(e))
}
