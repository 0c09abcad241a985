//! Responses queued by one wake-up and sent with vectored writes.
//!
//! Headers (and the short trailers after data: padding, data digest) go into
//! one contiguous buffer; data segments stay in the pooled buffers the SCSI
//! layer filled, or in the store's own memory when it lent them (a large
//! read from a memory LUN), so store data reaches the socket with no further
//! copy (ARCHITECTURE.md, datapath rules 1–3).
//!
//! Batched (the default), a flush sends everything queued with as few
//! `writev` calls as the socket allows. With per-PDU writes (the `[datapath]`
//! option `batching = false`) each PDU gets `writev` calls of its own: its
//! header, data and trailer, never a byte of another PDU.

use crate::buffer_pool::BufferPool;
use isoe_iovec::IoSlices;
use isoe_scsi::PageCrcs;
use isoe_store::{Lent, CRC_PAGE_BYTES};
use isoe_wire::digest::{self, PAGE_BYTES};
use isoe_wire::frame::{self, FrameLimits};
use isoe_wire::Pdu;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// At most this many slices go into one `writev` (Linux IOV_MAX is 1024).
/// They live on the stack: a flush allocates nothing.
const SLICES_PER_WRITE_MAX: usize = 512;

// The store keeps CRCs of the pages the digest folds.
const _: () = assert!(CRC_PAGE_BYTES == PAGE_BYTES);

/// Slices of one PDU: header, data segment, trailer.
const PDU_SLICES_MAX: usize = 3;

#[derive(Debug, Clone)]
enum Segment {
    /// Bytes in `Output::headers`.
    Header(Range<usize>),
    /// Bytes of `Output::buffers[index]`, a pooled buffer.
    Data { index: usize, range: Range<usize> },
    /// Bytes of piece `piece` of `Output::buffers[index]`, lent memory.
    Lent {
        index: usize,
        piece: usize,
        range: Range<usize>,
    },
}

/// The Data-In of one command: a pooled buffer the SCSI layer filled, or
/// the store's own memory, lent until it is sent.
#[derive(Debug)]
pub enum Payload {
    /// A buffer of the connection's pool; back to the pool once sent.
    Pooled(Vec<u8>),
    /// As `Pooled`, copied from a store that also gave the CRC of each of
    /// its pages: a data digest over whole pages is folded from them.
    Paged(Vec<u8>, PageCrcs),
    /// Store memory ([`isoe_scsi::Outcome::Lent`]); let go once sent.
    Lent(Lent),
}

impl Payload {
    /// Bytes in all.
    pub fn len(&self) -> usize {
        match self {
            Payload::Pooled(bytes) | Payload::Paged(bytes, _) => bytes.len(),
            Payload::Lent(lent) => lent.len(),
        }
    }

    /// The buffer, unless the bytes are lent.
    fn buffer(&self) -> Option<&[u8]> {
        match self {
            Payload::Pooled(bytes) | Payload::Paged(bytes, _) => Some(bytes),
            Payload::Lent(_) => None,
        }
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Back to `pool` if it came from one.
    pub fn recycle(self, pool: &mut BufferPool) {
        if let Payload::Pooled(buffer) | Payload::Paged(buffer, _) = self {
            pool.give(buffer);
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(buffer: Vec<u8>) -> Payload {
        Payload::Pooled(buffer)
    }
}

/// Outgoing PDUs of one connection, waiting for the next flush.
#[derive(Debug)]
pub struct Output {
    headers: Vec<u8>,
    segments: Vec<Segment>,
    buffers: Vec<Payload>,
    /// Buffers before this one were given back already: once the cursor
    /// passes a buffer's segments, it goes back when a flush stops short,
    /// not when the queue drains (a connection that keeps its queue busy
    /// would otherwise hold every response it sent since it was last
    /// empty). Buffers are adopted in the order of their segments.
    released: usize,
    /// Index of the first segment not fully written, and bytes of it already written.
    cursor: (usize, usize),
    /// Each PDU in `writev` calls of its own (`batching = false`).
    per_pdu_writes: bool,
    /// With `per_pdu_writes`: for each queued PDU, the index one past its
    /// last segment, in order.
    pdu_ends: Vec<usize>,
    /// The first entry of `pdu_ends` not yet fully written.
    next_pdu: usize,
    /// PDUs queued since the last flush, for metrics.
    pub pdus_queued: u64,
    /// Bytes queued and not yet written.
    pending: usize,
    /// The same, summed over every connection of the process.
    gauge: Option<Arc<AtomicUsize>>,
}

impl Output {
    /// An empty output; `per_pdu_writes` sends each PDU with its own write
    /// calls instead of batching all that is queued.
    pub fn new(per_pdu_writes: bool) -> Output {
        Output {
            headers: Vec::new(),
            segments: Vec::new(),
            buffers: Vec::new(),
            released: 0,
            cursor: (0, 0),
            per_pdu_writes,
            pdu_ends: Vec::new(),
            next_pdu: 0,
            pdus_queued: 0,
            pending: 0,
            gauge: None,
        }
    }

    /// As [`Output::new`], adding what is queued to `gauge`, shared by
    /// every connection, so that the process can bound the total.
    pub fn with_gauge(per_pdu_writes: bool, gauge: Arc<AtomicUsize>) -> Output {
        let mut output = Output::new(per_pdu_writes);
        output.gauge = Some(gauge);
        output
    }

    fn grow(&mut self, bytes: usize) {
        self.pending += bytes;
        if let Some(gauge) = &self.gauge {
            gauge.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn shrink(&mut self, bytes: usize) {
        self.pending -= bytes;
        if let Some(gauge) = &self.gauge {
            gauge.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// True when nothing waits to be sent.
    pub fn is_empty(&self) -> bool {
        self.cursor.0 >= self.segments.len()
    }

    /// Bytes queued and not yet written: the read data built ahead of the
    /// socket, which the connection bounds.
    pub fn pending_bytes(&self) -> usize {
        self.pending
    }

    fn push_header_range(&mut self, start: usize) {
        let end = self.headers.len();
        if start == end {
            return;
        }
        self.grow(end - start);
        // Batched, adjacent header bytes (one PDU's trailer, the next PDU's
        // header) share a slice; per PDU, a slice never spans two PDUs.
        if !self.per_pdu_writes {
            if let Some(Segment::Header(last)) = self.segments.last_mut() {
                if last.end == start {
                    last.end = end;
                    return;
                }
            }
        }
        self.segments.push(Segment::Header(start..end));
    }

    /// Marks the end of the PDU just queued.
    fn end_pdu(&mut self) {
        self.pdus_queued += 1;
        if self.per_pdu_writes {
            self.pdu_ends.push(self.segments.len());
        }
    }

    /// Queues a PDU whose data segment (if any) is copied in; for short data
    /// (text, sense, NOP ping data) where a copy costs less than a slice.
    pub fn push(&mut self, pdu: &Pdu, data: &[u8], limits: &FrameLimits) {
        let start = self.headers.len();
        frame::encode(&mut self.headers, pdu, &[], data, limits);
        self.push_header_range(start);
        self.end_pdu();
    }

    /// Takes ownership of a data buffer; returns its index for [`Output::push_with_data`].
    pub fn adopt(&mut self, buffer: impl Into<Payload>) -> usize {
        self.buffers.push(buffer.into());
        self.buffers.len() - 1
    }

    /// Queues a PDU whose data segment is `range` of adopted buffer `index`.
    pub fn push_with_data(
        &mut self,
        pdu: &Pdu,
        index: usize,
        range: Range<usize>,
        limits: &FrameLimits,
    ) {
        let start = self.headers.len();
        let data_len = (range.end - range.start) as u32;
        frame::encode_header(&mut self.headers, pdu, &[], data_len, limits);
        self.push_header_range(start);
        if data_len > 0 {
            let (trailer, trailer_len) = match &self.buffers[index] {
                Payload::Pooled(bytes) => {
                    self.segments.push(Segment::Data {
                        index,
                        range: range.clone(),
                    });
                    frame::data_trailer(&bytes[range.clone()], limits)
                }
                Payload::Paged(bytes, crcs) => {
                    self.segments.push(Segment::Data {
                        index,
                        range: range.clone(),
                    });
                    match fold_page_crcs(crcs.as_slice(), &range, limits) {
                        Some(crc) => frame::data_trailer_for_crc(crc, range.len(), limits),
                        None => frame::data_trailer(&bytes[range.clone()], limits),
                    }
                }
                Payload::Lent(lent) => {
                    // A segment per piece of lent memory the range covers.
                    for (piece, range) in lent_parts(lent, &range) {
                        self.segments.push(Segment::Lent {
                            index,
                            piece,
                            range,
                        });
                    }
                    // The digest, if any, from the pages' CRCs the chunks
                    // keep; else the pass that brings the bytes into the
                    // cache for the socket's copy.
                    let mut folded = 0;
                    let crc = |bytes: &[u8]| limits.crc.crc32c(bytes);
                    let mut fold = |page_crc| folded = digest::crc32c_extend_page(folded, page_crc);
                    if limits.data_digest && lent.page_crcs(range.clone(), &crc, &mut fold) {
                        frame::data_trailer_for_crc(folded, range.len(), limits)
                    } else {
                        let bytes = lent_parts(lent, &range).map(|(p, r)| lent_piece(lent, p, &r));
                        frame::data_trailer_of(bytes, range.len(), limits)
                    }
                }
            };
            self.grow(range.end - range.start);
            let start = self.headers.len();
            self.headers.extend_from_slice(&trailer[..trailer_len]);
            self.push_header_range(start);
        }
        self.end_pdu();
    }

    /// One past the last segment the next `writev` may take: the end of the
    /// current PDU with per-PDU writes, else the end of the queue.
    fn write_end(&mut self) -> usize {
        if !self.per_pdu_writes {
            return self.segments.len();
        }
        while self.pdu_ends[self.next_pdu] <= self.cursor.0 {
            self.next_pdu += 1;
        }
        self.pdu_ends[self.next_pdu]
    }

    /// Writes as much as the socket takes. Returns Ok(true) when everything
    /// was sent; on a blocking socket this loops until done or an error.
    pub fn flush<W: Write>(&mut self, sink: &mut W, pool: &mut BufferPool) -> io::Result<bool> {
        while !self.is_empty() {
            let written = if self.per_pdu_writes {
                self.write_once::<PDU_SLICES_MAX, W>(sink)
            } else {
                self.write_once::<SLICES_PER_WRITE_MAX, W>(sink)
            };
            match written {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "socket closed while sending",
                    ))
                }
                Ok(n) => self.advance(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.release_sent(pool);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        self.clear(pool);
        Ok(true)
    }

    /// One `writev` of up to `N` slices from the cursor, stopping at the end
    /// of the current PDU with per-PDU writes. The slices live on the stack,
    /// sized for the mode, so that a write allocates nothing; their slots
    /// stay uninitialized until used ([`IoSlices`]: filling all N, 512 in
    /// batched mode, 8 KiB, on every write cost more than the few slices a
    /// small batch uses).
    fn write_once<const N: usize, W: Write>(&mut self, sink: &mut W) -> io::Result<usize> {
        let end = self.write_end();
        let (first, skip) = self.cursor;
        let mut slices = IoSlices::<'_, N>::new();
        let pieces = self.segments[first..end]
            .iter()
            .enumerate()
            .map(|(i, seg)| {
                let bytes = match seg {
                    Segment::Header(r) => &self.headers[r.clone()],
                    Segment::Data { index, range } => match self.buffers[*index].buffer() {
                        Some(bytes) => &bytes[range.clone()],
                        None => unreachable!("lent bytes are queued as Segment::Lent"),
                    },
                    Segment::Lent {
                        index,
                        piece,
                        range,
                    } => match &self.buffers[*index] {
                        Payload::Lent(lent) => lent_piece(lent, *piece, range),
                        Payload::Pooled(_) | Payload::Paged(..) => {
                            unreachable!("pooled bytes are queued as Segment::Data")
                        }
                    },
                };
                // The cursor may be inside the first segment.
                if i == 0 {
                    &bytes[skip..]
                } else {
                    bytes
                }
            });
        slices.extend(pieces);
        debug_assert!(!slices.is_empty(), "called with something queued");
        sink.write_vectored(slices.as_slice())
    }

    fn segment_len(&self, seg: &Segment) -> usize {
        match seg {
            Segment::Header(r) => r.end - r.start,
            Segment::Data { range, .. } | Segment::Lent { range, .. } => range.end - range.start,
        }
    }

    fn advance(&mut self, mut written: usize) {
        self.shrink(written);
        while written > 0 {
            let (index, skip) = self.cursor;
            let remaining = self.segment_len(&self.segments[index]) - skip;
            if written >= remaining {
                written -= remaining;
                self.cursor = (index + 1, 0);
            } else {
                self.cursor = (index, skip + written);
                written = 0;
            }
        }
    }

    /// Gives back the buffers whose every segment is written (a flush
    /// stopped short of the end of the queue).
    fn release_sent(&mut self, pool: &mut BufferPool) {
        // The first buffer a segment still to write refers to; those
        // before it are all written.
        let live = self.segments[self.cursor.0.min(self.segments.len())..]
            .iter()
            .find_map(|seg| match seg {
                Segment::Data { index, .. } | Segment::Lent { index, .. } => Some(*index),
                Segment::Header(_) => None,
            })
            .unwrap_or(self.buffers.len());
        while self.released < live {
            let sent = std::mem::replace(
                &mut self.buffers[self.released],
                Payload::Pooled(Vec::new()),
            );
            sent.recycle(pool);
            self.released += 1;
        }
    }

    /// Drops everything queued, returning data buffers to the pool.
    pub fn clear(&mut self, pool: &mut BufferPool) {
        self.headers.clear();
        self.segments.clear();
        self.pdu_ends.clear();
        self.next_pdu = 0;
        self.cursor = (0, 0);
        self.shrink(self.pending);
        for buffer in self.buffers.drain(..) {
            buffer.recycle(pool);
        }
        self.released = 0;
    }
}

/// The CRC32C of bytes `range` of a Data-In whose pages have `crcs`, when
/// a data digest is sent and the range is whole pages that `crcs` covers.
fn fold_page_crcs(crcs: &[u32], range: &Range<usize>, limits: &FrameLimits) -> Option<u32> {
    let whole_pages =
        range.start.is_multiple_of(PAGE_BYTES) && range.end.is_multiple_of(PAGE_BYTES);
    if !limits.data_digest || !whole_pages || range.end / PAGE_BYTES > crcs.len() {
        return None;
    }
    let pages = &crcs[range.start / PAGE_BYTES..range.end / PAGE_BYTES];
    Some(
        pages
            .iter()
            .fold(0, |crc, &page| digest::crc32c_extend_page(crc, page)),
    )
}

/// Bytes `range` of piece `piece` of `lent`.
fn lent_piece<'a>(lent: &'a Lent, piece: usize, range: &Range<usize>) -> &'a [u8] {
    let bytes = lent.pieces().nth(piece).unwrap_or_default();
    &bytes[range.clone()]
}

/// Where `range` of the bytes of `lent` lies, in order: (piece, range
/// within the piece) for each piece it covers.
fn lent_parts<'a>(
    lent: &'a Lent,
    range: &Range<usize>,
) -> impl Iterator<Item = (usize, Range<usize>)> + 'a {
    let range = range.clone();
    lent.pieces()
        .scan(0, |at, bytes| {
            let from = *at;
            *at += bytes.len();
            Some((from, from + bytes.len()))
        })
        .enumerate()
        .filter_map(move |(piece, (from, to))| {
            let start = range.start.max(from);
            let end = range.end.min(to);
            (start < end).then(|| (piece, start - from..end - from))
        })
}

impl Drop for Output {
    /// A connection that ends with output unsent takes it off the gauge.
    fn drop(&mut self) {
        let pending = self.pending;
        self.shrink(pending);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use isoe_wire::pdu::NopIn;
    use std::io::IoSlice;

    /// A sink that accepts at most `chunk` bytes per call, to exercise partial writes.
    struct Trickle {
        chunk: usize,
        got: Vec<u8>,
    }
    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A sink that takes everything and records what each call carried.
    #[derive(Default)]
    pub(crate) struct Calls(pub(crate) Vec<Vec<u8>>);
    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.0
                .push(bufs.iter().flat_map(|b| b.iter().copied()).collect());
            Ok(bufs.iter().map(|b| b.len()).sum())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    const DIGESTS: FrameLimits = FrameLimits {
        max_recv_data_segment_length: 8192,
        header_digest: true,
        data_digest: true,
        crc: isoe_wire::digest::Crc32cImpl::Hardware,
    };

    fn nop_in() -> Pdu {
        Pdu::NopIn(NopIn {
            initiator_task_tag: 7,
            stat_sn: 3,
            ..Default::default()
        })
    }

    /// Queues three PDUs (copied data, adopted data, none); returns each
    /// PDU's bytes as `frame::encode` makes them.
    fn queue_three(out: &mut Output, limits: &FrameLimits) -> Vec<Vec<u8>> {
        let pdu = nop_in();
        let data: Vec<u8> = (0..1001u32).map(|i| i as u8).collect();
        let mut expected = vec![Vec::new(), Vec::new(), Vec::new()];
        frame::encode(&mut expected[0], &pdu, &[], b"ping", limits);
        frame::encode(&mut expected[1], &pdu, &[], &data[5..1001], limits);
        frame::encode(&mut expected[2], &pdu, &[], &[], limits);
        out.push(&pdu, b"ping", limits);
        let index = out.adopt(data);
        out.push_with_data(&pdu, index, 5..1001, limits);
        out.push(&pdu, &[], limits);
        expected
    }

    #[test]
    fn batched_output_goes_in_one_write() {
        let mut out = Output::new(false);
        let expected = queue_three(&mut out, &DIGESTS);
        let mut sink = Calls::default();
        assert!(out.flush(&mut sink, &mut BufferPool::default()).unwrap());
        assert_eq!(sink.0, vec![expected.concat()]);
    }

    #[test]
    fn per_pdu_output_writes_each_pdu_alone() {
        for limits in [FrameLimits::LOGIN, DIGESTS] {
            let mut out = Output::new(true);
            let expected = queue_three(&mut out, &limits);
            let mut sink = Calls::default();
            let mut pool = BufferPool::default();
            assert!(out.flush(&mut sink, &mut pool).unwrap());
            assert_eq!(sink.0, expected, "one write call per PDU, in order");
            assert_eq!(pool.idle(), 1, "the data buffer returns to the pool");
            // The output is reusable after a flush.
            let again = queue_three(&mut out, &limits);
            let mut sink = Calls::default();
            assert!(out.flush(&mut sink, &mut pool).unwrap());
            assert_eq!(sink.0, again);
        }
    }

    #[test]
    fn per_pdu_writes_never_mix_pdus_under_partial_writes() {
        let mut out = Output::new(true);
        let expected = queue_three(&mut out, &DIGESTS);
        let mut sink = Trickle {
            chunk: 37,
            got: Vec::new(),
        };
        let mut pool = BufferPool::default();
        assert!(out.flush(&mut sink, &mut pool).unwrap());
        assert_eq!(sink.got, expected.concat());
        // Each call of a per-PDU flush stays inside one PDU.
        let mut out = Output::new(true);
        let expected = queue_three(&mut out, &DIGESTS);
        let mut calls = TrickleCalls {
            chunk: 37,
            calls: Vec::new(),
        };
        assert!(out.flush(&mut calls, &mut pool).unwrap());
        let boundaries: Vec<usize> = expected
            .iter()
            .scan(0, |end, pdu| {
                *end += pdu.len();
                Some(*end)
            })
            .collect();
        let mut at = 0;
        for call in &calls.calls {
            let pdu_end = *boundaries.iter().find(|&&end| end > at).unwrap();
            assert!(at + call.len() <= pdu_end, "a write crossed a PDU boundary");
            at += call.len();
        }
        assert_eq!(at, expected.concat().len());
    }

    /// Partial writes, recording each call's bytes.
    struct TrickleCalls {
        chunk: usize,
        calls: Vec<Vec<u8>>,
    }
    impl Write for TrickleCalls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk);
            self.calls.push(buf[..n].to_vec());
            Ok(n)
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            self.write(&all)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lent_store_memory_goes_out_as_a_copied_buffer_would() {
        use isoe_store::{MemoryStore, Store};
        const MIB: u64 = 1 << 20;
        // Chunks of 2 MiB: the data crosses the first boundary.
        let store = MemoryStore::new(4 * MIB);
        let data: Vec<u8> = (0..300_001u32).map(|i| (i % 251) as u8).collect();
        let at = 2 * MIB - 100_000;
        store.write_at(at, &data).unwrap();
        let lent = store.lend(at, data.len()).unwrap();
        assert_eq!(
            lent.pieces().count(),
            2,
            "the range crosses a chunk boundary"
        );
        for limits in [FrameLimits::LOGIN, DIGESTS] {
            let pdu = nop_in();
            // Data segments before, across and after the boundary; one
            // with a length that needs padding.
            let ranges = [0..65_536, 65_536..165_537, 165_537..300_001];
            let mut expected = Vec::new();
            for r in &ranges {
                frame::encode(&mut expected, &pdu, &[], &data[r.clone()], &limits);
            }
            let mut out = Output::new(false);
            let index = out.adopt(Payload::Lent(lent.clone()));
            for r in &ranges {
                out.push_with_data(&pdu, index, r.clone(), &limits);
            }
            // Rewritten meanwhile: what was lent goes out as it was.
            store.write_at(at, &vec![0xee; data.len()]).unwrap();
            let mut sink = Trickle {
                chunk: 40_000,
                got: Vec::new(),
            };
            let mut pool = BufferPool::default();
            assert!(out.flush(&mut sink, &mut pool).unwrap());
            assert!(sink.got == expected, "lent bytes sent as encoded");
            assert_eq!(pool.idle(), 0, "lent memory is not a pooled buffer");
            store.write_at(at, &data).unwrap();
        }
    }

    /// Sends each of `ranges` of `payload` as a PDU and returns the bytes.
    fn sent(payload: Payload, ranges: &[Range<usize>], limits: &FrameLimits) -> Vec<u8> {
        let mut out = Output::new(false);
        let index = out.adopt(payload);
        for r in ranges {
            out.push_with_data(&nop_in(), index, r.clone(), limits);
        }
        let mut sink = Trickle {
            chunk: 40_000,
            got: Vec::new(),
        };
        assert!(out.flush(&mut sink, &mut BufferPool::default()).unwrap());
        sink.got
    }

    fn encoded(data: &[u8], ranges: &[Range<usize>], limits: &FrameLimits) -> Vec<u8> {
        let mut expected = Vec::new();
        for r in ranges {
            frame::encode(&mut expected, &nop_in(), &[], &data[r.clone()], limits);
        }
        expected
    }

    #[test]
    fn digests_folded_from_page_crcs_match_computed_ones() {
        use isoe_store::{MemoryStore, Store};
        const MIB: u64 = 1 << 20;
        let store = MemoryStore::new(6 * MIB);
        // Page-aligned, across a chunk boundary, ending in a chunk never
        // written (zero pages) and part way into a page.
        let at = 2 * MIB - 24 * PAGE_BYTES as u64;
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        store.write_at(at, &data).unwrap();
        let len = 300_001;
        let lent = store.lend(at, len).unwrap();
        let mut whole = Vec::new();
        lent.copy_to(&mut whole);
        // Whole pages before and across the boundary, then a segment that
        // ends mid-page (computed, not folded).
        let ranges = [0..65_536, 65_536..163_840, 163_840..len];
        for limits in [FrameLimits::LOGIN, DIGESTS] {
            let got = sent(Payload::Lent(lent.clone()), &ranges, &limits);
            assert!(got == encoded(&whole, &ranges, &limits), "lent, {limits:?}");
        }

        // A copied READ's page CRCs: whole-page segments fold them.
        let crc = |bytes: &[u8]| digest::crc32c(bytes);
        let mut copy = Vec::new();
        let mut crcs = [0u32; 16];
        let offset = at + 8 * PAGE_BYTES as u64;
        assert!(store
            .read_append_with_crcs(offset, 16 * PAGE_BYTES, &mut copy, &crc, &mut crcs)
            .unwrap());
        let page_crcs = PageCrcs::from_slice(&crcs).unwrap();
        let ranges = [0..8192, 8192..20_000, 20_000..65_536];
        for limits in [FrameLimits::LOGIN, DIGESTS] {
            let got = sent(Payload::Paged(copy.clone(), page_crcs), &ranges, &limits);
            assert!(got == encoded(&copy, &ranges, &limits), "paged, {limits:?}");
        }
        // The fold is what whole pages use: wrong page CRCs give a wrong
        // digest there, and nowhere else.
        let wrong = PageCrcs::from_slice(&crcs.map(|c| !c)).unwrap();
        let ranges = [0..8192, 8192..20_000];
        let got = sent(Payload::Paged(copy.clone(), wrong), &ranges, &DIGESTS);
        let expected = encoded(&copy, &ranges, &DIGESTS);
        let first = 52 + 8192 + 4;
        assert_ne!(got[..first], expected[..first]);
        assert_eq!(got[first..], expected[first..]);
    }

    #[test]
    fn without_pooling_sent_buffers_are_freed() {
        let mut out = Output::new(false);
        queue_three(&mut out, &DIGESTS);
        let mut pool = BufferPool::new(false);
        assert!(out.flush(&mut Calls::default(), &mut pool).unwrap());
        assert_eq!(pool.idle(), 0);
    }

    #[test]
    fn vectored_output_matches_contiguous_encoding_under_partial_writes() {
        let limits = DIGESTS;
        let pdu = Pdu::NopIn(NopIn {
            initiator_task_tag: 7,
            stat_sn: 3,
            ..Default::default()
        });
        let data: Vec<u8> = (0..1001u32).map(|i| i as u8).collect();
        let mut expected = Vec::new();
        frame::encode(&mut expected, &pdu, &[], b"ping", &limits);
        frame::encode(&mut expected, &pdu, &[], &data[5..1001], &limits);
        frame::encode(&mut expected, &pdu, &[], &[], &limits);

        let mut out = Output::new(false);
        out.push(&pdu, b"ping", &limits);
        let index = out.adopt(data.clone());
        out.push_with_data(&pdu, index, 5..1001, &limits);
        out.push(&pdu, &[], &limits);
        let mut pool = BufferPool::default();
        let mut sink = Trickle {
            chunk: 37,
            got: Vec::new(),
        };
        assert!(out.flush(&mut sink, &mut pool).unwrap());
        assert_eq!(sink.got, expected);
        assert!(out.is_empty());
        assert_eq!(pool.idle(), 1, "the data buffer returns to the pool");
    }

    #[test]
    fn the_shared_gauge_follows_what_is_queued_and_sent() {
        let gauge = Arc::new(AtomicUsize::new(0));
        let mut out = Output::with_gauge(false, Arc::clone(&gauge));
        let ping = Pdu::NopIn(NopIn::default());
        out.push(&ping, &[7; 100], &FrameLimits::LOGIN);
        let queued = out.pending_bytes();
        assert_eq!(gauge.load(Ordering::Relaxed), queued);
        let mut sink = Trickle {
            chunk: 10,
            got: Vec::new(),
        };
        out.write_once::<SLICES_PER_WRITE_MAX, _>(&mut sink)
            .map(|n| out.advance(n))
            .expect("a partial write");
        assert_eq!(gauge.load(Ordering::Relaxed), queued - 10);
        out.push(&ping, &[], &FrameLimits::LOGIN);
        drop(out);
        assert_eq!(
            gauge.load(Ordering::Relaxed),
            0,
            "an output dropped unsent leaves nothing"
        );
    }

    /// A connection whose queue never empties (each flush leaves some, and
    /// more is queued) gives back each response's buffer once it is sent,
    /// not when the queue drains.
    #[test]
    fn a_sent_buffer_goes_back_though_the_queue_never_drains() {
        /// Takes `room` bytes, then would block.
        struct Full {
            room: usize,
        }
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.room == 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                let n = buf.len().min(self.room);
                self.room -= n;
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = Output::new(false);
        let mut pool = BufferPool::default();
        let limits = FrameLimits::LOGIN;
        let ping = Pdu::NopIn(NopIn::default());
        for round in 0..4 {
            let index = out.adopt(vec![round as u8; 4096]);
            out.push_with_data(&ping, index, 0..4096, &limits);
            out.push(&ping, &[9; 64], &limits);
            // All but the last 20 bytes queued: the response is sent, the
            // ping after it not quite.
            let room = out.pending_bytes() - 20;
            assert!(!out.flush(&mut Full { room }, &mut pool).expect("flush"));
            assert_eq!(pool.idle(), round + 1, "round {round}: its buffer is back");
        }
        assert!(out
            .flush(&mut Full { room: usize::MAX }, &mut pool)
            .expect("flush"));
    }
}
