//! Responses queued by one wake-up and sent with vectored writes.
//!
//! Headers (and the short trailers after data: padding, data digest) go into
//! one contiguous buffer; data segments stay in the pooled buffers the SCSI
//! layer filled, so store data reaches the socket with no further copy
//! (ARCHITECTURE.md, datapath rules 1–3).

use isoe_wire::frame::{self, FrameLimits};
use isoe_wire::Pdu;
use std::io::{self, IoSlice, Write};
use std::ops::Range;

/// At most this many slices go into one `writev` (Linux IOV_MAX is 1024).
const SLICES_PER_WRITE_MAX: usize = 512;

#[derive(Debug, Clone)]
enum Segment {
    /// Bytes in `Output::headers`.
    Header(Range<usize>),
    /// Bytes of `Output::buffers[index]`.
    Data { index: usize, range: Range<usize> },
}

/// Outgoing PDUs of one connection, waiting for the next flush.
#[derive(Debug, Default)]
pub struct Output {
    headers: Vec<u8>,
    segments: Vec<Segment>,
    buffers: Vec<Vec<u8>>,
    /// Index of the first segment not fully written, and bytes of it already written.
    cursor: (usize, usize),
    /// PDUs queued since the last flush, for metrics.
    pub pdus_queued: u64,
}

impl Output {
    /// True when nothing waits to be sent.
    pub fn is_empty(&self) -> bool {
        self.cursor.0 >= self.segments.len()
    }

    fn push_header_range(&mut self, start: usize) {
        let end = self.headers.len();
        if start == end {
            return;
        }
        if let Some(Segment::Header(last)) = self.segments.last_mut() {
            if last.end == start {
                last.end = end;
                return;
            }
        }
        self.segments.push(Segment::Header(start..end));
    }

    /// Queues a PDU whose data segment (if any) is copied in; for short data
    /// (text, sense, NOP ping data) where a copy costs less than a slice.
    pub fn push(&mut self, pdu: &Pdu, data: &[u8], limits: &FrameLimits) {
        let start = self.headers.len();
        frame::encode(&mut self.headers, pdu, &[], data, limits);
        self.push_header_range(start);
        self.pdus_queued += 1;
    }

    /// Takes ownership of a data buffer; returns its index for [`Output::push_with_data`].
    pub fn adopt(&mut self, buffer: Vec<u8>) -> usize {
        self.buffers.push(buffer);
        self.buffers.len() - 1
    }

    /// The bytes of an adopted buffer.
    pub fn buffer(&self, index: usize) -> &[u8] {
        &self.buffers[index]
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
            let (trailer, trailer_len) =
                frame::data_trailer(&self.buffers[index][range.clone()], limits);
            self.segments.push(Segment::Data { index, range });
            let start = self.headers.len();
            self.headers.extend_from_slice(&trailer[..trailer_len]);
            self.push_header_range(start);
        }
        self.pdus_queued += 1;
    }

    /// Writes as much as the socket takes. Returns Ok(true) when everything
    /// was sent; on a blocking socket this loops until done or an error.
    pub fn flush<W: Write>(&mut self, sink: &mut W, pool: &mut Vec<Vec<u8>>) -> io::Result<bool> {
        while !self.is_empty() {
            let mut slices: Vec<IoSlice<'_>> =
                Vec::with_capacity(SLICES_PER_WRITE_MAX.min(self.segments.len()));
            let (first, skip) = self.cursor;
            for (i, seg) in self.segments[first..]
                .iter()
                .enumerate()
                .take(SLICES_PER_WRITE_MAX)
            {
                let bytes = match seg {
                    Segment::Header(r) => &self.headers[r.clone()],
                    Segment::Data { index, range } => &self.buffers[*index][range.clone()],
                };
                slices.push(IoSlice::new(if i == 0 { &bytes[skip..] } else { bytes }));
            }
            let written = match sink.write_vectored(&slices) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "socket closed while sending",
                    ))
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            };
            drop(slices);
            self.advance(written);
        }
        self.clear(pool);
        Ok(true)
    }

    fn segment_len(&self, seg: &Segment) -> usize {
        match seg {
            Segment::Header(r) => r.end - r.start,
            Segment::Data { range, .. } => range.end - range.start,
        }
    }

    fn advance(&mut self, mut written: usize) {
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

    /// Drops everything queued, returning data buffers to the pool.
    pub fn clear(&mut self, pool: &mut Vec<Vec<u8>>) {
        self.headers.clear();
        self.segments.clear();
        self.cursor = (0, 0);
        for mut buffer in self.buffers.drain(..) {
            buffer.clear();
            if pool.len() < POOL_BUFFERS_MAX {
                pool.push(buffer);
            }
        }
    }
}

/// Buffers kept per connection for reuse (bounds memory a peer can make us hold idle).
pub const POOL_BUFFERS_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_wire::pdu::NopIn;

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

    #[test]
    fn vectored_output_matches_contiguous_encoding_under_partial_writes() {
        let limits = FrameLimits {
            max_recv_data_segment_length: 8192,
            header_digest: true,
            data_digest: true,
            crc: isoe_wire::digest::Crc32cImpl::Hardware,
        };
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

        let mut out = Output::default();
        out.push(&pdu, b"ping", &limits);
        let index = out.adopt(data.clone());
        out.push_with_data(&pdu, index, 5..1001, &limits);
        out.push(&pdu, &[], &limits);
        let mut pool = Vec::new();
        let mut sink = Trickle {
            chunk: 37,
            got: Vec::new(),
        };
        assert!(out.flush(&mut sink, &mut pool).unwrap());
        assert_eq!(sink.got, expected);
        assert!(out.is_empty());
        assert_eq!(pool.len(), 1, "the data buffer returns to the pool");
    }
}
