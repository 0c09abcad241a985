//! The `Store` trait: the whole seam between the SCSI device server and media.

use crate::range::check_range;
use crate::{AsyncStore, Lent, StoreError};

/// A run of bytes that share one allocation state (see [`Store::allocation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The bytes hold data (mapped) rather than being a hole (deallocated).
    pub mapped: bool,
    /// Length of the run in bytes.
    pub len_bytes: u64,
}

/// Backing media of one logical unit. Offsets and lengths in bytes. Called
/// concurrently from several connection threads.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Capacity in bytes; fixed for the life of the store.
    fn size_bytes(&self) -> u64;
    /// Fills `buf` from `offset`; the whole range must lie inside the store.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError>;
    /// Appends `len` bytes from `offset` to `out`; on error `out` is as it
    /// was. The default zero-fills the room and then reads into it; a store
    /// that can write each byte once (memory) does better.
    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let start = out.len();
        out.resize(start + len, 0);
        let result = self.read_at(offset, &mut out[start..]);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }
    /// As [`Store::read_append`], and fills `crcs` with the CRC32C of each
    /// [`crate::CRC_PAGE_BYTES`] page of the range, for a store that keeps
    /// them (memory: computed with `crc` the first time a page is read after
    /// a write, then kept). True when it did; false, with `crcs` untouched,
    /// when the store keeps none, or the range is not whole aligned pages,
    /// or `crcs` does not have one slot per page. The data digest of a
    /// Data-In is then folded from the pages' CRCs instead of computed.
    fn read_append_with_crcs(
        &self,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
        crc: &dyn Fn(&[u8]) -> u32,
        crcs: &mut [u32],
    ) -> Result<bool, StoreError> {
        let _ = (crc, crcs);
        self.read_append(offset, len, out).map(|()| false)
    }
    /// The `len` bytes at `offset` without a copy, when the store can lend
    /// them: they stay as they are until the [`Lent`] is dropped, whatever
    /// is written meanwhile. None (the default) when it cannot, or when
    /// the range is not inside the store; the caller then copies
    /// ([`Store::read_append`]). Memory lends a range that crosses at most
    /// one 2 MiB chunk boundary.
    fn lend(&self, offset: u64, len: usize) -> Option<Lent> {
        let _ = (offset, len);
        None
    }
    /// Bytes this store has served to reads from blocks never written since
    /// it was created (None: the store does not know, e.g. a file or RBD
    /// store). Blocks deallocated (unmapped) since their write count too:
    /// they hold no written data now. A benchmark that reads such blocks
    /// measures zeros made on the fly, not the medium; this is how a
    /// reader of the target's counters proves it did not.
    fn unwritten_read_bytes(&self) -> Option<u64> {
        None
    }
    /// Writes all of `buf` at `offset`; the whole range must lie inside the store.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError>;
    /// Makes every completed write durable (fdatasync on files).
    fn flush(&self) -> Result<(), StoreError>;
    /// Deallocates a range; it reads back as zeros (holes on files:
    /// fallocate PUNCH_HOLE|KEEP_SIZE, falling back to writing zeros).
    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError>;
    /// Writes zeros over a range, keeping it allocated where the media allows.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError>;
    /// "memory" | "file" | "block" | "rbd"
    fn kind(&self) -> &'static str;
    /// What identifies the medium wherever it is opened, when several
    /// processes may serve it (an RBD image: its cluster, pool and image
    /// ids): a target derives the logical unit's serial number and NAA
    /// from it, so that every gateway presents the same logical unit.
    fn identity(&self) -> Option<&str> {
        None
    }
    /// The asynchronous side of a store that has one: reads, writes and
    /// flushes are then started with [`AsyncStore::submit`] rather than
    /// made with the blocking calls.
    fn asynchronous(&self) -> Option<&dyn AsyncStore> {
        None
    }
    /// The longest range [`Store::compare_and_write`] takes, in bytes, and
    /// the alignment it must keep (a range may not cross a multiple of it);
    /// 0 when the store has no such operation.
    fn compare_and_write_max_bytes(&self) -> u64 {
        0
    }
    /// COMPARE AND WRITE made atomic by the store itself, against every
    /// other writer of the medium, including other processes (a network
    /// store shared by several targets): compares `compare` with the
    /// medium at `offset` and, if equal, writes `write` (the same length)
    /// there. `Ok(None)` when written, `Ok(Some(i))` when byte `i` of the
    /// range differed and nothing was written. `None` when the store has
    /// no such operation for this range (see
    /// [`Store::compare_and_write_max_bytes`]): the caller then makes the
    /// read, the comparison and the write itself, under its own lock.
    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        write: &[u8],
    ) -> Option<Result<Option<u64>, StoreError>> {
        let _ = (offset, compare, write);
        None
    }
    /// Whether a call may wait on a device (a read from disk, an
    /// fdatasync): the target then makes it off its event loops. Calls on
    /// memory never wait.
    fn may_block(&self) -> bool {
        true
    }
    /// The allocation state at `offset`, and how far it lasts: an extent of
    /// at most `len` bytes from `offset` that is wholly mapped or wholly
    /// deallocated. Stores find holes at their own granularity (memory: 4 KiB
    /// pages; files: the file system's blocks). The default reports
    /// everything mapped, which is true of stores that never deallocate.
    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        check_range(offset, len, self.size_bytes())?;
        Ok(Extent {
            mapped: true,
            len_bytes: len,
        })
    }
}
