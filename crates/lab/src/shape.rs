//! A workload's shape: what plans, the floor and applications all size a
//! run by, apart from the plan that names it.

/// A workload's complete shape after overrides and knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadShape {
    /// Bytes per command.
    pub block_size_bytes: u32,
    /// Percent reads.
    pub read_pct: u8,
    /// Percent random.
    pub random_pct: u8,
    /// Commands outstanding per worker.
    pub queue_depth: u32,
    /// Worker threads.
    pub workers: u32,
}
