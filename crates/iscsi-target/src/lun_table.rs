//! A target's logical units at one moment, looked up by LUN on the command
//! path.

use isoe_scsi::LogicalUnit;
use std::sync::Arc;

/// A target's logical units at one moment, by ascending LUN. A command
/// borrows the table it started with (see [`crate::target::Target::luns`]); a LUN added
/// or removed meanwhile is in the next table.
#[derive(Debug, Default)]
pub struct LunTable {
    luns: Vec<(u16, Arc<LogicalUnit>)>,
    numbers: Vec<u16>,
}

impl LunTable {
    /// The table of `luns`, in any order.
    pub fn new(mut luns: Vec<(u16, Arc<LogicalUnit>)>) -> LunTable {
        luns.sort_by_key(|(n, _)| *n);
        let numbers = luns.iter().map(|(n, _)| *n).collect();
        LunTable { luns, numbers }
    }

    /// Every (LUN, unit) pair, by ascending LUN.
    pub fn entries(&self) -> &[(u16, Arc<LogicalUnit>)] {
        &self.luns
    }

    /// Every logical unit, by ascending LUN.
    pub fn units(&self) -> impl Iterator<Item = &Arc<LogicalUnit>> {
        self.luns.iter().map(|(_, lu)| lu)
    }

    /// The logical unit with number `number`.
    pub fn lun(&self, number: u16) -> Option<&Arc<LogicalUnit>> {
        self.luns
            .binary_search_by_key(&number, |(n, _)| *n)
            .ok()
            .map(|i| &self.luns[i].1)
    }

    /// All LUN numbers, ascending (REPORT LUNS).
    pub fn numbers(&self) -> &[u16] {
        &self.numbers
    }

    /// The unit whose NAA designator is `naa` (EXTENDED COPY's targets).
    pub fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        self.units().find(|lu| lu.config().naa[..] == *naa).cloned()
    }
}
