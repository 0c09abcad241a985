//! The `Store` trait: the whole seam between the SCSI device server and media.

use crate::StoreError;

/// Backing media of one logical unit. Offsets and lengths in bytes. Called
/// concurrently from several connection threads.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Capacity in bytes; fixed for the life of the store.
    fn size_bytes(&self) -> u64;
    /// Fills `buf` from `offset`; the whole range must lie inside the store.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError>;
    /// Writes all of `buf` at `offset`; the whole range must lie inside the store.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError>;
    /// Makes every completed write durable (fdatasync on files).
    fn flush(&self) -> Result<(), StoreError>;
    /// Deallocates a range; it reads back as zeros (holes on files:
    /// fallocate PUNCH_HOLE|KEEP_SIZE, falling back to writing zeros).
    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError>;
    /// Writes zeros over a range, keeping it allocated where the media allows.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError>;
    /// "memory" | "file" | "block"
    fn kind(&self) -> &'static str;
}
