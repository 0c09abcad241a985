//! `MemoryStore`: sparse RAM media with one lock per chunk.

use std::sync::{PoisonError, RwLock};

use crate::range::check_range;
use crate::{Store, StoreError};

/// Bytes per chunk; memory is committed one chunk at a time, on first write.
const CHUNK_SIZE_BYTES: u64 = 1 << 20;

/// One chunk: `None` until written (reads as zeros), then its bytes.
type Chunk = RwLock<Option<Box<[u8]>>>;

/// RAM-backed media. Chunks are allocated on first write and each has its own
/// lock, so there is no store-wide lock on the hot path and an unwritten
/// logical unit costs only the chunk table.
#[derive(Debug)]
pub struct MemoryStore {
    size_bytes: u64,
    chunks: Box<[Chunk]>,
}

impl MemoryStore {
    /// Creates a store of `size_bytes`, all zeros, with no data memory committed.
    pub fn new(size_bytes: u64) -> Self {
        let chunk_count = size_bytes.div_ceil(CHUNK_SIZE_BYTES);
        let chunk_count =
            usize::try_from(chunk_count).expect("memory store larger than the address space");
        let chunks = (0..chunk_count).map(|_| RwLock::new(None)).collect();
        Self { size_bytes, chunks }
    }

    /// Length of chunk `index` (the last one may be short).
    fn chunk_len(&self, index: usize) -> usize {
        let start = index as u64 * CHUNK_SIZE_BYTES;
        (self.size_bytes - start).min(CHUNK_SIZE_BYTES) as usize
    }

    /// Splits `offset..offset+len` into (chunk index, offset in chunk, length)
    /// pieces. The caller has range-checked.
    fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (usize, usize, usize)> {
        let end = offset + len;
        let mut position = offset;
        std::iter::from_fn(move || {
            if position >= end {
                return None;
            }
            let index = (position / CHUNK_SIZE_BYTES) as usize;
            let within = (position % CHUNK_SIZE_BYTES) as usize;
            let piece = (end - position).min(CHUNK_SIZE_BYTES - within as u64) as usize;
            position += piece as u64;
            Some((index, within, piece))
        })
    }

    /// Zeros a range; whole chunks are released, partial ones cleared in place.
    fn release(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        check_range(offset, len, self.size_bytes)?;
        for (index, within, piece) in Self::pieces(offset, len) {
            let mut chunk = self.chunks[index]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            if within == 0 && piece == self.chunk_len(index) {
                *chunk = None;
            } else if let Some(bytes) = chunk.as_mut() {
                bytes[within..within + piece].fill(0);
            }
        }
        Ok(())
    }
}

impl Store for MemoryStore {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        check_range(offset, buf.len() as u64, self.size_bytes)?;
        let mut done = 0;
        for (index, within, piece) in Self::pieces(offset, buf.len() as u64) {
            let target = &mut buf[done..done + piece];
            let chunk = self.chunks[index]
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match chunk.as_ref() {
                Some(bytes) => target.copy_from_slice(&bytes[within..within + piece]),
                None => target.fill(0),
            }
            done += piece;
        }
        debug_assert_eq!(done, buf.len());
        Ok(())
    }

    /// Each byte written once: copied from its chunk, or zero for a chunk
    /// never written. (The default would zero the room first, then copy:
    /// a 256 KiB read paid a 256 KiB memset.)
    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), StoreError> {
        check_range(offset, len as u64, self.size_bytes)?;
        out.reserve(len);
        for (index, within, piece) in Self::pieces(offset, len as u64) {
            let chunk = self.chunks[index]
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match chunk.as_ref() {
                Some(bytes) => out.extend_from_slice(&bytes[within..within + piece]),
                None => out.resize(out.len() + piece, 0),
            }
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        check_range(offset, buf.len() as u64, self.size_bytes)?;
        let mut done = 0;
        for (index, within, piece) in Self::pieces(offset, buf.len() as u64) {
            let mut chunk = self.chunks[index]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let chunk_len = self.chunk_len(index);
            let bytes = chunk.get_or_insert_with(|| vec![0u8; chunk_len].into_boxed_slice());
            bytes[within..within + piece].copy_from_slice(&buf[done..done + piece]);
            done += piece;
        }
        debug_assert_eq!(done, buf.len());
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.release(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        // Zeros and "unmapped" read back the same from RAM; releasing whole
        // chunks is the cheaper way to write them.
        self.release(offset, len)
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_store_commits_no_chunks() {
        let store = MemoryStore::new(1 << 30);
        assert_eq!(store.chunks.len(), 1024);
        assert!(store.chunks.iter().all(|c| c.read().unwrap().is_none()));
    }

    #[test]
    fn whole_chunk_unmap_releases_memory() {
        let store = MemoryStore::new(3 * CHUNK_SIZE_BYTES);
        store.write_at(CHUNK_SIZE_BYTES, &[1u8; 10]).unwrap();
        assert!(store.chunks[1].read().unwrap().is_some());
        store.unmap(CHUNK_SIZE_BYTES, CHUNK_SIZE_BYTES).unwrap();
        assert!(store.chunks[1].read().unwrap().is_none());
    }

    #[test]
    fn short_last_chunk() {
        let store = MemoryStore::new(CHUNK_SIZE_BYTES + 100);
        store.write_at(CHUNK_SIZE_BYTES + 90, &[7u8; 10]).unwrap();
        assert_eq!(store.chunks[1].read().unwrap().as_ref().unwrap().len(), 100);
        assert!(store.write_at(CHUNK_SIZE_BYTES + 95, &[7u8; 10]).is_err());
    }
}
