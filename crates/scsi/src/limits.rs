//! Limits the device server advertises in the Block Limits VPD page (SBC-4
//! 6.6.4) and enforces on commands.

/// Largest READ/WRITE/VERIFY in bytes; bounds the buffer a peer can make us
/// fill. 32 MiB (65536 blocks of 512 bytes) because initiators (libiscsi's
/// WRITE SAME tests among them) move as much data as MAXIMUM WRITE SAME
/// LENGTH allows with plain WRITE and READ; below the transport's 64 MiB
/// write buffer limit.
pub const MAXIMUM_TRANSFER_LENGTH_BYTES: u32 = 32 << 20;
/// Transfers of this size or a multiple are most efficient.
pub const OPTIMAL_TRANSFER_LENGTH_BYTES: u32 = 1 << 20;
/// Largest number of blocks one UNMAP may deallocate (libiscsi wants <= 1 Mi).
pub const MAXIMUM_UNMAP_LBA_COUNT: u32 = 1 << 20;
/// Largest number of block descriptors in one UNMAP parameter list.
pub const MAXIMUM_UNMAP_BLOCK_DESCRIPTOR_COUNT: u32 = 256;
/// Largest number of blocks one WRITE SAME may touch.
pub const MAXIMUM_WRITE_SAME_LENGTH: u64 = 1 << 20;
/// MAXIMUM COMPARE AND WRITE LENGTH in logical blocks (SBC-4 6.6.4): the
/// largest NUMBER OF LOGICAL BLOCKS its one-byte field can hold. The compare
/// and the write hold the range lock together, so this bounds how long one
/// COMPARE AND WRITE can keep writers of the same stripes waiting.
pub const MAXIMUM_COMPARE_AND_WRITE_LENGTH: u8 = 255;
/// Unmap granularity in bytes: file systems punch holes in 4 KiB pages.
pub const UNMAP_GRANULARITY_BYTES: u32 = 4096;
/// Atomic writes are aligned to and made of 4 KiB pages, the unit that file
/// systems, the page cache and hole punching work in.
pub const ATOMIC_GRANULE_BYTES: u32 = 4096;
/// Largest WRITE ATOMIC (16) in bytes; one atomic write holds its range's
/// lock stripes for the whole write, so it is kept well below the largest
/// transfer.
pub const MAXIMUM_ATOMIC_TRANSFER_LENGTH_BYTES: u32 = 1 << 20;

/// MAXIMUM TRANSFER LENGTH in logical blocks.
pub fn maximum_transfer_length_blocks(block_size: u32) -> u32 {
    MAXIMUM_TRANSFER_LENGTH_BYTES / block_size
}

/// OPTIMAL TRANSFER LENGTH in logical blocks.
pub fn optimal_transfer_length_blocks(block_size: u32) -> u32 {
    OPTIMAL_TRANSFER_LENGTH_BYTES / block_size
}

/// MAXIMUM ATOMIC TRANSFER LENGTH in logical blocks (SBC-4 6.6.4).
pub fn maximum_atomic_transfer_length_blocks(block_size: u32) -> u32 {
    MAXIMUM_ATOMIC_TRANSFER_LENGTH_BYTES / block_size
}

/// ATOMIC ALIGNMENT in logical blocks: atomic writes start on a page.
pub fn atomic_alignment_blocks(block_size: u32) -> u32 {
    (ATOMIC_GRANULE_BYTES / block_size).max(1)
}

/// ATOMIC TRANSFER LENGTH GRANULARITY in logical blocks: atomic writes cover
/// whole pages.
pub fn atomic_transfer_length_granularity_blocks(block_size: u32) -> u32 {
    (ATOMIC_GRANULE_BYTES / block_size).max(1)
}

/// OPTIMAL UNMAP GRANULARITY in logical blocks.
pub fn optimal_unmap_granularity_blocks(block_size: u32) -> u32 {
    (UNMAP_GRANULARITY_BYTES / block_size).max(1)
}
