//! `MemoryStore`: sparse RAM media with one lock per chunk, whose bytes a
//! large read may borrow instead of copying ([`Lent`]).

use std::ops::Range;
use std::sync::{Arc, PoisonError, RwLock};

use crate::huge_pages::{HugeBytes, HUGE_PAGE_BYTES};
use crate::range::check_range;
use crate::{Extent, Store, StoreError};

/// Bytes per chunk, one huge page; memory is committed one chunk at a
/// time, on first write.
const CHUNK_SIZE_BYTES: u64 = HUGE_PAGE_BYTES as u64;

/// Allocation is tracked per page of this many bytes: a page is mapped once
/// written and deallocated again when an unmap covers all of it.
const PAGE_SIZE_BYTES: usize = 4096;

/// Pages per chunk, and the words of the bitmap that records which are mapped.
const PAGES_PER_CHUNK: usize = CHUNK_SIZE_BYTES as usize / PAGE_SIZE_BYTES;
const MAP_WORDS: usize = PAGES_PER_CHUNK / 64;

/// The committed memory of one chunk. Shared with the [`Lent`] reads of it
/// still being sent; a write to a shared chunk writes to a copy
/// (`Arc::make_mut`), so lent bytes never change.
#[derive(Debug)]
struct ChunkData {
    bytes: HugeBytes,
    /// Bit `p` set: page `p` is mapped. A clear page holds only zeros.
    mapped: [u64; MAP_WORDS],
}

impl ChunkData {
    fn new(len: usize) -> Self {
        Self {
            bytes: HugeBytes::zeroed(len),
            mapped: [0; MAP_WORDS],
        }
    }

    fn is_mapped(&self, page: usize) -> bool {
        self.mapped[page / 64] & (1 << (page % 64)) != 0
    }

    fn set_mapped(&mut self, page: usize, mapped: bool) {
        let bit = 1 << (page % 64);
        if mapped {
            self.mapped[page / 64] |= bit;
        } else {
            self.mapped[page / 64] &= !bit;
        }
    }
}

impl Clone for ChunkData {
    fn clone(&self) -> Self {
        Self {
            bytes: HugeBytes::copy_of(&self.bytes),
            mapped: self.mapped,
        }
    }
}

/// One chunk: `None` until written (reads as zeros, deallocated), then its data.
type Chunk = RwLock<Option<Arc<ChunkData>>>;

/// What a never-written chunk reads as, lent like a chunk's bytes.
static ZEROS: [u8; CHUNK_SIZE_BYTES as usize] = [0; CHUNK_SIZE_BYTES as usize];

/// A read of at most this many chunks may be lent (a 256 KiB read crosses
/// at most one chunk boundary); a longer one is copied.
const LENT_PIECES_MAX: usize = 2;

/// Bytes of a store lent to a reader without a copy ([`Store::lend`]): the
/// reader sends them from the store's own memory. They stay as they were
/// when lent until this is dropped; a write to them meanwhile goes to a copy
/// of their chunk, and this keeps the old one alive.
#[derive(Debug, Clone)]
pub struct Lent {
    pieces: [Piece; LENT_PIECES_MAX],
    count: usize,
    len: usize,
}

#[derive(Debug, Clone, Default)]
enum Piece {
    #[default]
    Empty,
    Chunk(Arc<ChunkData>, Range<usize>),
    Zeros(usize),
}

impl Lent {
    /// Bytes lent in all.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is lent.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The lent bytes in order, as contiguous pieces (one per chunk crossed).
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        self.pieces[..self.count].iter().map(|piece| match piece {
            Piece::Chunk(data, range) => &data.bytes[range.clone()],
            Piece::Zeros(len) => &ZEROS[..*len],
            Piece::Empty => &[],
        })
    }

    /// Appends a copy of the lent bytes to `out`.
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.len);
        for piece in self.pieces() {
            out.extend_from_slice(piece);
        }
    }
}

/// RAM-backed media. Chunks are allocated on first write and each has its own
/// lock, so there is no store-wide lock on the hot path and an unwritten
/// logical unit costs only the chunk table. Which 4 KiB pages are mapped is
/// tracked per chunk, for [`Store::allocation`].
#[derive(Debug)]
pub struct MemoryStore {
    size_bytes: u64,
    chunks: Box<[Chunk]>,
}

impl MemoryStore {
    /// Creates a store of `size_bytes`, all zeros, with no data memory committed.
    ///
    /// # Panics
    /// If its chunk table cannot be allocated; see [`MemoryStore::try_new`].
    pub fn new(size_bytes: u64) -> Self {
        Self::try_new(size_bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`MemoryStore::new`], or [`StoreError::OutOfMemory`] when the
    /// chunk table (one entry per MiB) cannot be allocated, rather than an
    /// abort.
    pub fn try_new(size_bytes: u64) -> Result<Self, StoreError> {
        let out_of_memory = || StoreError::OutOfMemory { size_bytes };
        let chunk_count =
            usize::try_from(size_bytes.div_ceil(CHUNK_SIZE_BYTES)).map_err(|_| out_of_memory())?;
        let mut chunks = Vec::new();
        chunks
            .try_reserve_exact(chunk_count)
            .map_err(|_| out_of_memory())?;
        chunks.extend((0..chunk_count).map(|_| RwLock::new(None)));
        Ok(Self {
            size_bytes,
            chunks: chunks.into_boxed_slice(),
        })
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

    /// Zeros a range and deallocates the pages it covers whole; a chunk left
    /// with no mapped page is released.
    fn release(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        check_range(offset, len, self.size_bytes)?;
        for (index, within, piece) in Self::pieces(offset, len) {
            let mut chunk = self.chunks[index]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let chunk_len = self.chunk_len(index);
            if piece == chunk_len {
                // The whole chunk: released without copying a lent one.
                *chunk = None;
                continue;
            }
            let Some(data) = chunk.as_mut() else {
                continue;
            };
            let data = Arc::make_mut(data);
            data.bytes[within..within + piece].fill(0);
            let first_whole_page = within.div_ceil(PAGE_SIZE_BYTES);
            for page in first_whole_page..PAGES_PER_CHUNK {
                let page_end = ((page + 1) * PAGE_SIZE_BYTES).min(chunk_len);
                if page * PAGE_SIZE_BYTES >= chunk_len || page_end > within + piece {
                    break;
                }
                data.set_mapped(page, false);
            }
            if data.mapped.iter().all(|&word| word == 0) {
                *chunk = None;
            }
        }
        Ok(())
    }

    /// Length from `within` of the run of pages in one chunk that share the
    /// state of the page holding `within`, at most `wanted` bytes.
    fn run_in_chunk(data: &ChunkData, within: usize, wanted: usize) -> (bool, usize) {
        let mapped = data.is_mapped(within / PAGE_SIZE_BYTES);
        let mut end = (within / PAGE_SIZE_BYTES + 1) * PAGE_SIZE_BYTES;
        while end < within + wanted && data.is_mapped(end / PAGE_SIZE_BYTES) == mapped {
            end += PAGE_SIZE_BYTES;
        }
        (mapped, end.min(within + wanted) - within)
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
                Some(data) => target.copy_from_slice(&data.bytes[within..within + piece]),
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
                Some(data) => out.extend_from_slice(&data.bytes[within..within + piece]),
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
            let data = chunk.get_or_insert_with(|| Arc::new(ChunkData::new(chunk_len)));
            // A chunk some read still holds ([`Lent`]) is copied first.
            let data = Arc::make_mut(data);
            data.bytes[within..within + piece].copy_from_slice(&buf[done..done + piece]);
            for page in within / PAGE_SIZE_BYTES..(within + piece).div_ceil(PAGE_SIZE_BYTES) {
                data.set_mapped(page, true);
            }
            done += piece;
        }
        debug_assert_eq!(done, buf.len());
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The chunks' own memory, when the range crosses at most one chunk
    /// boundary.
    fn lend(&self, offset: u64, len: usize) -> Option<Lent> {
        check_range(offset, len as u64, self.size_bytes).ok()?;
        let mut lent = Lent {
            pieces: Default::default(),
            count: 0,
            len,
        };
        for (index, within, piece) in Self::pieces(offset, len as u64) {
            if lent.count == LENT_PIECES_MAX {
                return None;
            }
            let chunk = self.chunks[index]
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            lent.pieces[lent.count] = match chunk.as_ref() {
                Some(data) => Piece::Chunk(Arc::clone(data), within..within + piece),
                None => Piece::Zeros(piece),
            };
            lent.count += 1;
        }
        Some(lent)
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

    fn may_block(&self) -> bool {
        false
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        check_range(offset, len, self.size_bytes)?;
        let mut state = None;
        let mut run_bytes = 0u64;
        for (index, within, piece) in Self::pieces(offset, len) {
            let chunk = self.chunks[index]
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let (mapped, same) = match chunk.as_ref() {
                None => (false, piece),
                Some(data) => Self::run_in_chunk(data, within, piece),
            };
            if state.is_some_and(|s| s != mapped) {
                break;
            }
            state = Some(mapped);
            run_bytes += same as u64;
            if same < piece {
                break;
            }
        }
        Ok(Extent {
            mapped: state.unwrap_or(false),
            len_bytes: run_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_table_too_large_to_allocate_is_an_error() {
        let error = MemoryStore::try_new(u64::MAX).unwrap_err();
        assert!(matches!(
            error,
            StoreError::OutOfMemory {
                size_bytes: u64::MAX
            }
        ));
        assert!(
            error.to_string().contains("18446744073709551615 bytes"),
            "{error}"
        );
        assert_eq!(
            MemoryStore::try_new(3 * CHUNK_SIZE_BYTES)
                .unwrap()
                .chunks
                .len(),
            3
        );
    }

    #[test]
    fn unwritten_store_commits_no_chunks() {
        let store = MemoryStore::new(1 << 30);
        assert_eq!(store.chunks.len(), 512);
        assert!(store.chunks.iter().all(|c| c.read().unwrap().is_none()));
    }

    #[test]
    fn whole_chunk_unmap_releases_memory() {
        let store = MemoryStore::new(3 * CHUNK_SIZE_BYTES);
        store.write_at(CHUNK_SIZE_BYTES, &[1u8; 10]).unwrap();
        assert!(store.chunks[1].read().unwrap().is_some());
        store.unmap(CHUNK_SIZE_BYTES, CHUNK_SIZE_BYTES).unwrap();
        assert!(store.chunks[1].read().unwrap().is_none());
        // Unmapping every written page releases the chunk too.
        store.write_at(CHUNK_SIZE_BYTES + 5000, &[1u8; 10]).unwrap();
        store.unmap(CHUNK_SIZE_BYTES + 4096, 4096).unwrap();
        assert!(store.chunks[1].read().unwrap().is_none());
    }

    #[test]
    fn short_last_chunk() {
        let store = MemoryStore::new(CHUNK_SIZE_BYTES + 100);
        store.write_at(CHUNK_SIZE_BYTES + 90, &[7u8; 10]).unwrap();
        assert_eq!(
            store.chunks[1]
                .read()
                .unwrap()
                .as_ref()
                .unwrap()
                .bytes
                .len(),
            100
        );
        assert!(store.write_at(CHUNK_SIZE_BYTES + 95, &[7u8; 10]).is_err());
    }

    fn lent_bytes(lent: &Lent) -> Vec<u8> {
        let mut out = Vec::new();
        lent.copy_to(&mut out);
        assert_eq!(out.len(), lent.len());
        out
    }

    #[test]
    fn lent_bytes_stay_as_lent_while_the_range_is_rewritten() {
        let store = MemoryStore::new(4 * CHUNK_SIZE_BYTES);
        let at = CHUNK_SIZE_BYTES - 1000;
        store.write_at(at, &[1u8; 3000]).unwrap();
        // Crossing one chunk boundary: two pieces, the chunks' own memory.
        let lent = store.lend(at, 3000).expect("lent");
        assert_eq!(
            lent.pieces().map(<[u8]>::len).collect::<Vec<_>>(),
            [1000, 2000]
        );
        store.write_at(at + 500, &[2u8; 1000]).unwrap();
        store.unmap(CHUNK_SIZE_BYTES, CHUNK_SIZE_BYTES).unwrap();
        assert_eq!(
            lent_bytes(&lent),
            vec![1u8; 3000],
            "what was lent does not change"
        );
        let mut now = vec![0u8; 3000];
        store.read_at(at, &mut now).unwrap();
        assert_eq!(&now[..500], &[1u8; 500][..]);
        assert_eq!(&now[500..1000], &[2u8; 500][..]);
        assert!(
            now[1000..].iter().all(|&b| b == 0),
            "the unmap is seen by new reads"
        );
        // A write to a chunk nobody holds any more goes in place.
        drop(lent);
        store.write_at(at, &[3u8; 10]).unwrap();
        let again = store.lend(at, 10).unwrap();
        assert_eq!(lent_bytes(&again), vec![3u8; 10]);
    }

    #[test]
    fn unwritten_chunks_lend_zeros_and_long_or_outside_ranges_are_not_lent() {
        let store = MemoryStore::new(4 * CHUNK_SIZE_BYTES);
        let lent = store.lend(0, 256 << 10).unwrap();
        assert!(lent_bytes(&lent).iter().all(|&b| b == 0));
        assert!(store
            .lend(CHUNK_SIZE_BYTES - 1, CHUNK_SIZE_BYTES as usize + 2)
            .is_none());
        assert!(store.lend(4 * CHUNK_SIZE_BYTES - 10, 11).is_none());
        assert!(store.lend(0, 0).unwrap().is_empty());
    }

    fn extent(mapped: bool, len_bytes: u64) -> Extent {
        Extent { mapped, len_bytes }
    }

    #[test]
    fn allocation_follows_writes_and_whole_page_unmaps() {
        let store = MemoryStore::new(3 * CHUNK_SIZE_BYTES);
        let all = 3 * CHUNK_SIZE_BYTES;
        assert_eq!(store.allocation(0, all).unwrap(), extent(false, all));
        // A write maps every page it touches.
        store.write_at(4096 + 100, &[1u8; 5000]).unwrap();
        assert_eq!(store.allocation(0, all).unwrap(), extent(false, 4096));
        assert_eq!(
            store.allocation(4096, all - 4096).unwrap(),
            extent(true, 8192)
        );
        assert_eq!(store.allocation(5000, 100).unwrap(), extent(true, 100));
        assert_eq!(store.allocation(12288, 4096).unwrap(), extent(false, 4096));
        // An unmap of part of a page zeros it but leaves it mapped.
        store.unmap(4096, 512).unwrap();
        assert_eq!(store.allocation(4096, 8192).unwrap(), extent(true, 8192));
        let mut back = [9u8; 512];
        store.read_at(4096 + 100, &mut back).unwrap();
        assert!(back[..412].iter().all(|&b| b == 0) && back[412..].iter().all(|&b| b == 1));
        // An unmap of a whole page deallocates it.
        store.unmap(8192, 4096).unwrap();
        assert_eq!(
            store.allocation(4096, all - 4096).unwrap(),
            extent(true, 4096)
        );
        assert_eq!(
            store.allocation(8192, all - 8192).unwrap(),
            extent(false, all - 8192)
        );
        // Runs continue across chunks.
        store
            .write_at(CHUNK_SIZE_BYTES - 4096, &[1u8; 8192])
            .unwrap();
        let at = CHUNK_SIZE_BYTES - 4096;
        assert_eq!(store.allocation(at, all - at).unwrap(), extent(true, 8192));
        assert!(store.allocation(all, 1).is_err());
        assert_eq!(store.allocation(all, 0).unwrap(), extent(false, 0));
    }
}
