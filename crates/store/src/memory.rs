//! `MemoryStore`: sparse RAM media with one lock per chunk, whose bytes a
//! large read may borrow instead of copying ([`Lent`]).

use isoe_sync::RwLockExt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::huge_pages::{HugeBytes, HUGE_PAGE_BYTES};
use crate::range::check_range;
use crate::{Extent, Store, StoreError};

/// Bytes per chunk, one huge page; memory is committed one chunk at a
/// time, on first write.
const CHUNK_SIZE_BYTES: u64 = HUGE_PAGE_BYTES as u64;

/// Allocation is tracked per page of this many bytes: a page is mapped once
/// written and deallocated again when an unmap covers all of it.
const PAGE_SIZE_BYTES: usize = 4096;

/// The bytes each cached page CRC covers ([`Store::read_append_with_crcs`],
/// [`Lent::page_crcs`]): one allocation page.
pub const CRC_PAGE_BYTES: usize = PAGE_SIZE_BYTES;

/// A page CRC slot holding this bit holds a CRC32C in its low 32 bits; 0 is
/// "not known".
const CRC_KNOWN: u64 = 1 << 32;

/// CRC32C of a page of zeros: what a never-written chunk's pages have.
/// `tests::the_zero_page_crc_is_the_crc_of_a_zero_page` checks it.
const ZERO_PAGE_CRC: u32 = 0x98f9_4189;

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
    /// Per page, its CRC32C once a reader computed it (`CRC_KNOWN | crc`),
    /// else 0. Readers fill it in under the chunk's read lock, or through a
    /// [`Lent`] whose bytes cannot change; every write clears the pages it
    /// touches. 4 KiB per 2 MiB chunk.
    crcs: Box<[AtomicU64]>,
}

impl ChunkData {
    fn new(len: usize) -> Self {
        Self {
            bytes: HugeBytes::zeroed(len),
            mapped: [0; MAP_WORDS],
            crcs: (0..PAGES_PER_CHUNK).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The CRC32C of page `page`: the one kept, else `crc` of its bytes,
    /// then kept. The caller guarantees the bytes cannot change meanwhile
    /// (the chunk's read lock, or a [`Lent`] holding it).
    fn page_crc(&self, page: usize, crc: &dyn Fn(&[u8]) -> u32) -> u32 {
        let slot = &self.crcs[page];
        let kept = slot.load(Ordering::Relaxed);
        if kept & CRC_KNOWN != 0 {
            return kept as u32;
        }
        let start = page * CRC_PAGE_BYTES;
        let end = (start + CRC_PAGE_BYTES).min(self.bytes.len());
        let value = crc(&self.bytes[start..end]);
        slot.store(CRC_KNOWN | u64::from(value), Ordering::Relaxed);
        value
    }

    /// Forgets the CRCs of the pages `range` (bytes in the chunk) touches.
    fn forget_crcs(&mut self, range: Range<usize>) {
        for page in range.start / CRC_PAGE_BYTES..range.end.div_ceil(CRC_PAGE_BYTES) {
            *self.crcs[page].get_mut() = 0;
        }
    }

    fn is_mapped(&self, page: usize) -> bool {
        self.mapped[page / 64] & (1 << (page % 64)) != 0
    }

    /// Whether every page in `pages` is mapped: a mask per bitmap word, so
    /// that a read of written data pays a word or two, not a test per page.
    fn all_mapped(&self, pages: Range<usize>) -> bool {
        let mut page = pages.start;
        while page < pages.end {
            let word = page / 64;
            let (first, end) = (page % 64, (pages.end - word * 64).min(64));
            let mask = (u64::MAX >> (64 - (end - first))) << first;
            if self.mapped[word] & mask != mask {
                return false;
            }
            page = word * 64 + end;
        }
        true
    }

    /// Bytes of `range` (bytes in the chunk) that lie on pages not mapped:
    /// never written, or deallocated since.
    fn unmapped_bytes(&self, range: Range<usize>) -> usize {
        if range.is_empty() {
            return 0;
        }
        let pages = range.start / PAGE_SIZE_BYTES..range.end.div_ceil(PAGE_SIZE_BYTES);
        if self.all_mapped(pages.clone()) {
            return 0;
        }
        pages
            .filter(|&page| !self.is_mapped(page))
            .map(|page| {
                let start = (page * PAGE_SIZE_BYTES).max(range.start);
                let end = ((page + 1) * PAGE_SIZE_BYTES).min(range.end);
                end - start
            })
            .sum()
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
            crcs: self
                .crcs
                .iter()
                .map(|slot| AtomicU64::new(slot.load(Ordering::Relaxed)))
                .collect(),
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
    /// The lent range starts on a page boundary of the store, so its
    /// whole pages have CRCs a chunk may keep.
    page_aligned: bool,
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

    /// Passes to `each`, in order, the CRC32C of every page of `range`
    /// (byte offsets into the lent bytes) as the chunks keep them, computing
    /// with `crc` (and keeping) any not known yet; a never-written chunk's
    /// pages have the zero page's. False, and nothing passed, unless the
    /// lent range began on a page boundary of the store and `range` is
    /// whole pages ([`CRC_PAGE_BYTES`]) inside it.
    pub fn page_crcs(
        &self,
        range: Range<usize>,
        crc: &dyn Fn(&[u8]) -> u32,
        each: &mut dyn FnMut(u32),
    ) -> bool {
        if !self.page_aligned
            || !range.start.is_multiple_of(CRC_PAGE_BYTES)
            || !range.end.is_multiple_of(CRC_PAGE_BYTES)
            || range.end > self.len
        {
            return false;
        }
        let mut piece_start = 0;
        for piece in &self.pieces[..self.count] {
            let (piece_len, chunk) = match piece {
                Piece::Chunk(data, within) => (within.len(), Some((data, within.start))),
                Piece::Zeros(len) => (*len, None),
                Piece::Empty => (0, None),
            };
            let piece_end = piece_start + piece_len;
            let mut at = range.start.max(piece_start);
            while at < range.end.min(piece_end) {
                each(match chunk {
                    // Chunk boundaries are page boundaries, so a lent range
                    // that starts on one keeps every page whole.
                    Some((data, within)) => {
                        data.page_crc((within + at - piece_start) / CRC_PAGE_BYTES, crc)
                    }
                    None => ZERO_PAGE_CRC,
                });
                at += CRC_PAGE_BYTES;
            }
            piece_start = piece_end;
        }
        true
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
/// tracked per chunk, for [`Store::allocation`] and for
/// [`Store::unwritten_read_bytes`].
#[derive(Debug)]
pub struct MemoryStore {
    size_bytes: u64,
    chunks: Box<[Chunk]>,
    /// Bytes served to reads from pages not mapped (see
    /// `MemoryStore::served_unwritten`). Shared by every reader, but
    /// written only by reads of zeros made on the fly, never by a read of
    /// written data.
    unwritten_read_bytes: OwnLine,
}

/// A counter on a cache line of its own (128 bytes: two lines, for the
/// adjacent-line prefetcher), so that reads of unwritten bytes adding to
/// it do not take the line that every read of written data loads the
/// chunk table from.
#[derive(Debug, Default)]
#[repr(align(128))]
struct OwnLine(AtomicU64);

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
            unwritten_read_bytes: OwnLine::default(),
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
            let mut chunk = self.chunks[index].write_unpoisoned();
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
            data.forget_crcs(within..within + piece);
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

    /// Counts `bytes` served by a read from pages not mapped: of a chunk
    /// never written, or pages of a written chunk that no write reached or
    /// that an unmap (or a write of zeros, which releases too) deallocated
    /// since. A deallocated page legitimately reads as zeros, but it holds
    /// no written data any more, and a read of it measures no medium.
    /// Allocation is tracked per page, so the bytes of a page a write
    /// touched only in part count as written, as do bytes a partial unmap
    /// zeroed in a page still mapped. A read sums its pieces and calls this
    /// once; the shared counter is touched only when some were unwritten.
    fn served_unwritten(&self, bytes: usize) {
        if bytes > 0 {
            self.unwritten_read_bytes
                .0
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
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
        let mut unwritten = 0;
        for (index, within, piece) in Self::pieces(offset, buf.len() as u64) {
            let target = &mut buf[done..done + piece];
            let chunk = self.chunks[index].read_unpoisoned();
            match chunk.as_ref() {
                Some(data) => {
                    target.copy_from_slice(&data.bytes[within..within + piece]);
                    unwritten += data.unmapped_bytes(within..within + piece);
                }
                None => {
                    target.fill(0);
                    unwritten += piece;
                }
            }
            done += piece;
        }
        debug_assert_eq!(done, buf.len());
        self.served_unwritten(unwritten);
        Ok(())
    }

    /// Each byte written once: copied from its chunk, or zero for a chunk
    /// never written. (The default would zero the room first, then copy:
    /// a 256 KiB read paid a 256 KiB memset.)
    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), StoreError> {
        check_range(offset, len as u64, self.size_bytes)?;
        out.reserve(len);
        let mut unwritten = 0;
        for (index, within, piece) in Self::pieces(offset, len as u64) {
            let chunk = self.chunks[index].read_unpoisoned();
            match chunk.as_ref() {
                Some(data) => {
                    out.extend_from_slice(&data.bytes[within..within + piece]);
                    unwritten += data.unmapped_bytes(within..within + piece);
                }
                None => {
                    out.resize(out.len() + piece, 0);
                    unwritten += piece;
                }
            }
        }
        self.served_unwritten(unwritten);
        Ok(())
    }

    /// Copies as [`Store::read_append`] does, and takes each page's CRC
    /// from its chunk (computed from the bytes just copied, while they are
    /// in cache, the first time a page is read after a write).
    fn read_append_with_crcs(
        &self,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
        crc: &dyn Fn(&[u8]) -> u32,
        crcs: &mut [u32],
    ) -> Result<bool, StoreError> {
        if !offset.is_multiple_of(CRC_PAGE_BYTES as u64)
            || !len.is_multiple_of(CRC_PAGE_BYTES)
            || crcs.len() != len / CRC_PAGE_BYTES
        {
            return self.read_append(offset, len, out).map(|()| false);
        }
        check_range(offset, len as u64, self.size_bytes)?;
        out.reserve(len);
        let mut unwritten = 0;
        let mut slots = crcs.iter_mut();
        for (index, within, piece) in Self::pieces(offset, len as u64) {
            let chunk = self.chunks[index].read_unpoisoned();
            let pages = within / CRC_PAGE_BYTES..(within + piece) / CRC_PAGE_BYTES;
            match chunk.as_ref() {
                Some(data) => {
                    // The bytes just copied are in cache for a CRC not kept
                    // yet (the read lock keeps writers out meanwhile).
                    out.extend_from_slice(&data.bytes[within..within + piece]);
                    for (page, slot) in pages.zip(&mut slots) {
                        *slot = data.page_crc(page, crc);
                    }
                    unwritten += data.unmapped_bytes(within..within + piece);
                }
                None => {
                    out.resize(out.len() + piece, 0);
                    for slot in slots.by_ref().take(pages.len()) {
                        *slot = ZERO_PAGE_CRC;
                    }
                    unwritten += piece;
                }
            }
        }
        self.served_unwritten(unwritten);
        Ok(true)
    }

    /// Counted by every read, copied or lent, as it serves the bytes: those
    /// of a chunk never written and those of pages not mapped (never
    /// written, or deallocated by an unmap or a write of zeros since),
    /// tracked per 4 KiB page.
    fn unwritten_read_bytes(&self) -> Option<u64> {
        Some(self.unwritten_read_bytes.0.load(Ordering::Relaxed))
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        check_range(offset, buf.len() as u64, self.size_bytes)?;
        let mut done = 0;
        for (index, within, piece) in Self::pieces(offset, buf.len() as u64) {
            let mut chunk = self.chunks[index].write_unpoisoned();
            let chunk_len = self.chunk_len(index);
            let data = chunk.get_or_insert_with(|| Arc::new(ChunkData::new(chunk_len)));
            // A chunk some read still holds ([`Lent`]) is copied first.
            let data = Arc::make_mut(data);
            data.bytes[within..within + piece].copy_from_slice(&buf[done..done + piece]);
            data.forget_crcs(within..within + piece);
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
            page_aligned: offset.is_multiple_of(CRC_PAGE_BYTES as u64),
        };
        // Counted once lent: a range too long to lend is copied instead,
        // and counted then.
        let mut unwritten = 0;
        for (index, within, piece) in Self::pieces(offset, len as u64) {
            if lent.count == LENT_PIECES_MAX {
                return None;
            }
            let chunk = self.chunks[index].read_unpoisoned();
            lent.pieces[lent.count] = match chunk.as_ref() {
                Some(data) => {
                    unwritten += data.unmapped_bytes(within..within + piece);
                    Piece::Chunk(Arc::clone(data), within..within + piece)
                }
                None => {
                    unwritten += piece;
                    Piece::Zeros(piece)
                }
            };
            lent.count += 1;
        }
        self.served_unwritten(unwritten);
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
            let chunk = self.chunks[index].read_unpoisoned();
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

    #[test]
    fn the_zero_page_crc_is_the_crc_of_a_zero_page() {
        assert_eq!(ZERO_PAGE_CRC, crc32c::crc32c(&[0u8; CRC_PAGE_BYTES]));
    }

    /// A CRC function that counts its calls.
    struct Counting(std::cell::Cell<usize>);

    impl Counting {
        fn crc(&self) -> impl Fn(&[u8]) -> u32 + '_ {
            |bytes| {
                self.0.set(self.0.get() + 1);
                crc32c::crc32c(bytes)
            }
        }

        fn take(&self) -> usize {
            self.0.replace(0)
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// Reads `pages` pages at `at` with their CRCs, checks both against
    /// the bytes, and returns the bytes.
    fn read_checked(
        store: &MemoryStore,
        at: u64,
        pages: usize,
        crc: &dyn Fn(&[u8]) -> u32,
    ) -> Vec<u8> {
        let mut out = vec![0xee; 3];
        let mut crcs = vec![0u32; pages];
        let len = pages * CRC_PAGE_BYTES;
        assert!(store
            .read_append_with_crcs(at, len, &mut out, crc, &mut crcs)
            .unwrap());
        let mut plain = vec![0u8; len];
        store.read_at(at, &mut plain).unwrap();
        assert_eq!(&out[3..], &plain[..]);
        for (page, value) in plain.chunks(CRC_PAGE_BYTES).zip(&crcs) {
            assert_eq!(*value, crc32c::crc32c(page));
        }
        out.split_off(3)
    }

    #[test]
    fn page_crcs_are_computed_once_and_forgotten_by_writes() {
        let store = MemoryStore::new(3 * CHUNK_SIZE_BYTES);
        let counting = Counting(Default::default());
        let crc = counting.crc();
        // Never written: the zero page's CRC, nothing computed.
        let at = CHUNK_SIZE_BYTES - 2 * CRC_PAGE_BYTES as u64;
        read_checked(&store, at, 4, &crc);
        assert_eq!(counting.take(), 0);
        // Written across the chunk boundary: each page computed once.
        store.write_at(at, &pattern(4 * CRC_PAGE_BYTES, 1)).unwrap();
        read_checked(&store, at, 4, &crc);
        assert_eq!(counting.take(), 4);
        read_checked(&store, at, 4, &crc);
        assert_eq!(counting.take(), 0, "kept");
        // A 512-byte write forgets its page; a partial unmap its pages.
        store.write_at(at + 5000, &[9u8; 512]).unwrap();
        read_checked(&store, at, 4, &crc);
        assert_eq!(counting.take(), 1);
        store
            .unmap(at + 3 * CRC_PAGE_BYTES as u64 - 100, 200)
            .unwrap();
        read_checked(&store, at, 4, &crc);
        assert_eq!(counting.take(), 2);
        // Unaligned ranges, and a wrong number of slots, give no CRCs.
        let mut out = Vec::new();
        let mut crcs = [7u32; 1];
        assert!(!store
            .read_append_with_crcs(at + 512, 4096, &mut out, &crc, &mut crcs)
            .unwrap());
        assert!(!store
            .read_append_with_crcs(at, 4096, &mut out, &crc, &mut [0; 2])
            .unwrap());
        assert_eq!(crcs, [7]);
        assert_eq!(out.len(), 8192, "the bytes are read all the same");
        assert!(store
            .read_append_with_crcs(3 * CHUNK_SIZE_BYTES, 4096, &mut out, &crc, &mut crcs)
            .is_err());
    }

    #[test]
    fn lent_page_crcs_share_the_chunks_and_stay_with_the_lent_bytes() {
        let store = MemoryStore::new(3 * CHUNK_SIZE_BYTES);
        let counting = Counting(Default::default());
        let crc = counting.crc();
        let at = CHUNK_SIZE_BYTES - 8 * CRC_PAGE_BYTES as u64;
        let len = 16 * CRC_PAGE_BYTES;
        // Half written, half in a chunk never written.
        store.write_at(at, &pattern(8 * CRC_PAGE_BYTES, 2)).unwrap();
        let lent = store.lend(at, len).unwrap();
        let bytes = lent_bytes(&lent);
        let expected: Vec<u32> = bytes.chunks(CRC_PAGE_BYTES).map(crc32c::crc32c).collect();
        let mut got = Vec::new();
        assert!(lent.page_crcs(0..len, &crc, &mut |c| got.push(c)));
        assert_eq!(got, expected);
        assert_eq!(counting.take(), 8, "zero pages cost nothing");
        // Kept in the chunk, for lent and copied reads alike.
        got.clear();
        assert!(
            lent.page_crcs(4 * CRC_PAGE_BYTES..12 * CRC_PAGE_BYTES, &crc, &mut |c| got
                .push(c))
        );
        assert_eq!(got, expected[4..12]);
        read_checked(&store, at, 16, &crc);
        assert_eq!(counting.take(), 0);
        // Rewritten while lent: the lent bytes and their CRCs stay; new
        // reads see the new bytes' CRCs.
        store.write_at(at, &pattern(CRC_PAGE_BYTES, 3)).unwrap();
        got.clear();
        assert!(lent.page_crcs(0..len, &crc, &mut |c| got.push(c)));
        assert_eq!(got, expected);
        read_checked(&store, at, 16, &crc);
        assert_eq!(counting.take(), 1);
        // Not whole pages, or not from a page boundary: no CRCs.
        assert!(!lent.page_crcs(0..100, &crc, &mut |_| panic!()));
        assert!(!lent.page_crcs(0..len + CRC_PAGE_BYTES, &crc, &mut |_| panic!()));
        let off = store.lend(at + 512, CRC_PAGE_BYTES).unwrap();
        assert!(!off.page_crcs(0..0, &crc, &mut |_| panic!()));
    }

    /// The store's count of unwritten bytes served.
    fn unwritten(store: &MemoryStore) -> u64 {
        store.unwritten_read_bytes().expect("memory knows")
    }

    /// Reads `len` bytes at `at` through every read path, one after the
    /// other, and returns what each added to the count.
    fn counted_by_each_read(store: &MemoryStore, at: u64, len: usize) -> [u64; 4] {
        let crc = |bytes: &[u8]| crc32c::crc32c(bytes);
        let mut counts = [0; 4];
        for (path, count) in counts.iter_mut().enumerate() {
            let before = unwritten(store);
            let mut out = Vec::new();
            match path {
                0 => store.read_at(at, &mut vec![0; len]).unwrap(),
                1 => store.read_append(at, len, &mut out).unwrap(),
                2 => {
                    let mut crcs = vec![0; len / CRC_PAGE_BYTES];
                    store
                        .read_append_with_crcs(at, len, &mut out, &crc, &mut crcs)
                        .unwrap();
                }
                _ => drop(store.lend(at, len).expect("lent")),
            }
            *count = unwritten(store) - before;
        }
        counts
    }

    #[test]
    fn reads_of_never_written_bytes_are_counted_on_every_path() {
        let store = MemoryStore::new(4 * CHUNK_SIZE_BYTES);
        assert_eq!(unwritten(&store), 0);
        // Fresh: a read counts its whole length, across a chunk boundary too.
        let at = CHUNK_SIZE_BYTES - 16 * CRC_PAGE_BYTES as u64;
        assert_eq!(counted_by_each_read(&store, at, 64 << 10), [64 << 10; 4]);
        // Written: nothing.
        store.write_at(at, &pattern(64 << 10, 1)).unwrap();
        assert_eq!(counted_by_each_read(&store, at, 64 << 10), [0; 4]);
        // Straddling written and unwritten pages (in a written chunk, and
        // in the chunk after): just the unwritten part.
        let before = at - 2 * CRC_PAGE_BYTES as u64;
        assert_eq!(
            counted_by_each_read(&store, before, 4 * CRC_PAGE_BYTES),
            [2 * CRC_PAGE_BYTES as u64; 4]
        );
        let end = at + (64 << 10);
        assert_eq!(
            counted_by_each_read(&store, end - 4096, 3 * CRC_PAGE_BYTES),
            [2 * CRC_PAGE_BYTES as u64; 4]
        );
        // Unmapped whole pages read as zeros and count again; a partial
        // unmap leaves its page mapped, and counts nothing.
        store.unmap(at, 2 * CRC_PAGE_BYTES as u64).unwrap();
        store.unmap(at + 2 * CRC_PAGE_BYTES as u64, 512).unwrap();
        assert_eq!(
            counted_by_each_read(&store, at, 4 * CRC_PAGE_BYTES),
            [2 * CRC_PAGE_BYTES as u64; 4]
        );
        // A whole chunk released is a chunk never written.
        store.unmap(0, CHUNK_SIZE_BYTES).unwrap();
        assert_eq!(
            counted_by_each_read(&store, 0, CRC_PAGE_BYTES),
            [CRC_PAGE_BYTES as u64; 4]
        );
    }

    #[test]
    fn unwritten_bytes_are_counted_per_byte_at_the_ends_of_a_read() {
        let store = MemoryStore::new(2 * CHUNK_SIZE_BYTES);
        store.write_at(8192, &[1u8; 4096]).unwrap();
        // 100 bytes of page 1, page 2 (written), 50 bytes of page 3.
        let mut buf = vec![0u8; 100 + 4096 + 50];
        store.read_at(8192 - 100, &mut buf).unwrap();
        assert_eq!(unwritten(&store), 150);
        // A page written in part counts as written, all of it.
        store.write_at(CHUNK_SIZE_BYTES + 10, &[1u8; 10]).unwrap();
        store.read_at(CHUNK_SIZE_BYTES, &mut buf[..4096]).unwrap();
        assert_eq!(unwritten(&store), 150);
        // Errors count nothing; neither does a range too long to lend.
        assert!(store.read_at(2 * CHUNK_SIZE_BYTES - 1, &mut buf).is_err());
        assert!(store.lend(0, 2 * CHUNK_SIZE_BYTES as usize + 1).is_none());
        let three_pieces = MemoryStore::new(4 * CHUNK_SIZE_BYTES);
        assert!(three_pieces
            .lend(CHUNK_SIZE_BYTES - 1, CHUNK_SIZE_BYTES as usize + 2)
            .is_none());
        assert_eq!(unwritten(&store), 150);
        assert_eq!(unwritten(&three_pieces), 0);
    }

    #[test]
    fn all_mapped_tests_whole_words_and_their_ends() {
        let mut data = ChunkData::new(CHUNK_SIZE_BYTES as usize);
        for page in 3..200 {
            data.set_mapped(page, true);
        }
        assert!(data.all_mapped(3..200));
        assert!(data.all_mapped(64..128));
        assert!(data.all_mapped(63..65));
        assert!(!data.all_mapped(2..200));
        assert!(!data.all_mapped(3..201));
        assert!(!data.all_mapped(199..201));
        assert!(data.all_mapped(5..5));
        assert_eq!(
            data.unmapped_bytes(0..PAGE_SIZE_BYTES * 4),
            3 * PAGE_SIZE_BYTES
        );
        assert_eq!(data.unmapped_bytes(5000..5000), 0);
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
