//! PDU framing (RFC 7143 §11.2): an incremental decoder over a growing
//! receive buffer, and the encoder.
//!
//! A PDU on the wire is, in order (RFC 7143 §11.2):
//!
//! ```text
//! BHS (48) | AHS (TotalAHSLength * 4) | HeaderDigest (0/4)
//!          | Data (DataSegmentLength) | pad to 4 | DataDigest (0/4)
//! ```
//!
//! The decoder borrows everything from the caller's buffer and never
//! allocates. It checks, as early as the bytes allow:
//!
//! 1. with header digests on, the header digest, as soon as BHS, AHS and
//!    digest are in (at most 1072 bytes): every length in the header is
//!    untrusted until then;
//! 2. DataSegmentLength against our MaxRecvDataSegmentLength, as soon as the
//!    BHS is in (or, with header digests, as soon as the digest matched), so a
//!    peer can never make us buffer more than we declared;
//! 3. the AHS chain, once the header is in;
//! 4. the data digest, once the whole frame is in.
//!
//! [`peek_header`] makes checks 1 to 3 alone and hands back the [`Header`]
//! with its lengths, so that a driver can receive a large data segment
//! straight into its destination; [`Header::verify_data_digest`] then makes
//! check 4 over the data where it landed.
//!
//! Opcodes are not checked here: an unknown opcode still frames (its
//! [`Frame::pdu`] returns [`ParseError::UnknownOpcode`]), so the caller can
//! Reject it and skip exactly `len` bytes.

use std::borrow::Cow;

use crate::bhs::{Bhs, BHS_LEN};
use crate::digest::{self, Crc32cImpl, DIGEST_LEN};
use crate::{padded_len, ParseError, Pdu};

/// The largest AHS a BHS can announce: TotalAHSLength is one byte of 4-byte words.
pub const MAX_AHS_LEN: usize = 255 * 4;

/// The largest DataSegmentLength the 3-byte field can carry (RFC 7143 §11.2.1.6).
pub const MAX_DATA_SEGMENT_LENGTH: u32 = (1 << 24) - 1;

/// AHS type codes (RFC 7143 §11.2.2.1).
pub mod ahs_type {
    /// Extended CDB (RFC 7143 §11.3.5).
    pub const EXTENDED_CDB: u8 = 1;
    /// Bidirectional Read Expected Data Transfer Length (RFC 7143 §11.3.6).
    pub const BIDI_READ_LENGTH: u8 = 2;
}

/// What the decoder checks a frame against; changed when login completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// The MaxRecvDataSegmentLength we declared (RFC 7143 §13.12).
    pub max_recv_data_segment_length: u32,
    /// HeaderDigest=CRC32C was negotiated (RFC 7143 §13.1).
    pub header_digest: bool,
    /// DataDigest=CRC32C was negotiated (RFC 7143 §13.1).
    pub data_digest: bool,
    /// Which implementation computes and checks the digests: a datapath
    /// option of the caller, not a protocol value ([`Crc32cImpl::Hardware`]
    /// unless the caller measures the alternative).
    pub crc: Crc32cImpl,
}

impl FrameLimits {
    /// Limits in force during login: RFC 7143 §6.2 and §13.12, MaxRecvDataSegmentLength
    /// defaults to 8192 and digests only start with the Full Feature Phase.
    pub const LOGIN: FrameLimits = FrameLimits {
        max_recv_data_segment_length: 8192,
        header_digest: false,
        data_digest: false,
        crc: Crc32cImpl::Hardware,
    };

    #[inline]
    fn header_digest_len(&self) -> usize {
        if self.header_digest {
            DIGEST_LEN
        } else {
            0
        }
    }

    /// RFC 7143 §11.2.4: a zero-length data segment has no data digest either.
    #[inline]
    fn data_digest_len(&self, data_len: usize) -> usize {
        if self.data_digest && data_len > 0 {
            DIGEST_LEN
        } else {
            0
        }
    }
}

/// A complete PDU borrowed from the receive buffer.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The Basic Header Segment.
    pub bhs: &'a [u8; BHS_LEN],
    /// All Additional Header Segments, as on the wire (already checked to chain correctly).
    pub ahs: &'a [u8],
    /// The data segment, without padding or digest.
    pub data: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The typed BHS.
    pub fn pdu(&self) -> Result<Pdu, ParseError> {
        Pdu::parse(self.bhs)
    }

    /// The full CDB: BHS bytes 32..48 followed by an Extended CDB AHS (type 1)
    /// if present (RFC 7143 §11.3.5). Borrowed unless the CDB is longer than 16.
    #[inline]
    pub fn cdb(&self) -> Cow<'a, [u8]> {
        let base = Bhs::new_unchecked(self.bhs).cdb();
        if self.ahs.is_empty() {
            // Nearly every command: no AHS to look through.
            return Cow::Borrowed(base);
        }
        self.extended_cdb(base)
    }

    /// [`Frame::cdb`] where an AHS may carry the CDB's rest.
    fn extended_cdb(&self, base: &'a [u8]) -> Cow<'a, [u8]> {
        match ahs_segments(self.ahs).find(|s| s.ahs_type == ahs_type::EXTENDED_CDB) {
            // RFC 7143 §11.3.5: AHSLength = CDBLength - 15, the first byte
            // after the type is reserved, then CDB bytes 16 onwards.
            Some(seg) if seg.body.len() > 1 => {
                let mut cdb = Vec::with_capacity(base.len() + seg.body.len() - 1);
                cdb.extend_from_slice(base);
                cdb.extend_from_slice(&seg.body[1..]);
                Cow::Owned(cdb)
            }
            _ => Cow::Borrowed(base),
        }
    }

    /// Expected Bidirectional Read Data Length AHS (type 2), if present.
    pub fn bidi_read_length(&self) -> Option<u32> {
        // RFC 7143 §11.3.6: AHSLength 5, one reserved byte, then the length.
        let seg = ahs_segments(self.ahs).find(|s| s.ahs_type == ahs_type::BIDI_READ_LENGTH)?;
        let len = seg.body.get(1..5)?;
        Some(u32::from_be_bytes([len[0], len[1], len[2], len[3]]))
    }
}

/// What [`decode`] found at the start of the buffer.
#[derive(Debug, Clone, Copy)]
pub enum Decoded<'a> {
    /// A whole PDU.
    Frame {
        /// The PDU, borrowed from the buffer.
        frame: Frame<'a>,
        /// Bytes consumed, including digests and padding.
        len: usize,
    },
    /// The buffer holds only part of a PDU.
    NeedMore {
        /// Bytes needed in all, once known (48 until the BHS is complete).
        /// With header digests on and an oversized DataSegmentLength it is
        /// the header length: the error follows once the digest vouches for it.
        total_len: usize,
    },
}

/// Why the bytes at the start of the buffer are not a valid PDU frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// DataSegmentLength exceeds what we declared; detected as soon as the BHS is in, before buffering data. Carries the BHS (for a Reject) and the whole frame length.
    #[error("data segment of {len} bytes exceeds MaxRecvDataSegmentLength {max}")]
    DataSegmentTooLong {
        /// DataSegmentLength as received.
        len: u32,
        /// Our MaxRecvDataSegmentLength.
        max: u32,
        /// Bytes the whole frame occupies, to skip it.
        frame_len: usize,
        /// The offending BHS.
        bhs: [u8; BHS_LEN],
    },
    /// Header digest mismatch: the header can't be trusted; at ERL 0 the connection must be dropped.
    #[error("header digest mismatch: computed {expected:#010x}, received {found:#010x}")]
    HeaderDigest {
        /// The digest computed over BHS and AHS.
        expected: u32,
        /// The digest received.
        found: u32,
    },
    /// Data digest mismatch: frame length known, so the frame can be skipped and Rejected (reason 0x02).
    #[error("data digest mismatch: computed {expected:#010x}, received {found:#010x}")]
    DataDigest {
        /// The digest computed over data and padding.
        expected: u32,
        /// The digest received.
        found: u32,
        /// Bytes the whole frame occupies, to skip it.
        frame_len: usize,
        /// The BHS of the damaged PDU.
        bhs: [u8; BHS_LEN],
    },
    /// AHS malformed (lengths inconsistent).
    #[error("malformed AHS")]
    Ahs {
        /// Bytes the whole frame occupies, to skip it.
        frame_len: usize,
        /// The offending BHS.
        bhs: [u8; BHS_LEN],
    },
}

/// Lengths of one frame, all derived from its BHS and the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    ahs_len: usize,
    /// BHS + AHS + header digest.
    header_len: usize,
    data_len: usize,
    /// Everything, through the data digest.
    frame_len: usize,
}

impl Layout {
    fn of(bhs: &[u8; BHS_LEN], limits: &FrameLimits) -> Layout {
        let view = Bhs::new_unchecked(bhs);
        let ahs_len = view.total_ahs_len();
        let data_len = view.data_segment_len();
        let header_len = BHS_LEN + ahs_len + limits.header_digest_len();
        let frame_len = header_len + padded_len(data_len) + limits.data_digest_len(data_len);
        Layout {
            ahs_len,
            header_len,
            data_len,
            frame_len,
        }
    }

    /// Padding and data digest: what follows the data segment.
    fn trailer_len(&self) -> usize {
        self.frame_len - self.header_len - self.data_len
    }

    fn pad_len(&self) -> usize {
        padded_len(self.data_len) - self.data_len
    }
}

/// A PDU header whose lengths and digest were checked, taken before its
/// data segment need have arrived (see [`peek_header`]).
///
/// Only [`peek_header`] makes one, so every `Header` has passed the checks
/// [`decode`] makes of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    bhs: [u8; BHS_LEN],
    layout: Layout,
    crc: Crc32cImpl,
}

impl Header {
    /// The Basic Header Segment.
    pub fn bhs(&self) -> &[u8; BHS_LEN] {
        &self.bhs
    }

    /// The typed BHS.
    pub fn pdu(&self) -> Result<Pdu, ParseError> {
        Pdu::parse(&self.bhs)
    }

    /// BHS, AHS and header digest: where the data segment starts.
    pub fn header_len(&self) -> usize {
        self.layout.header_len
    }

    /// DataSegmentLength: the data bytes, without padding or digest.
    pub fn data_len(&self) -> usize {
        self.layout.data_len
    }

    /// Padding and data digest after the data segment (0 to 7 bytes).
    pub fn trailer_len(&self) -> usize {
        self.layout.trailer_len()
    }

    /// The whole frame, header through data digest.
    pub fn frame_len(&self) -> usize {
        self.layout.frame_len
    }

    /// True when a data digest ends the trailer.
    pub fn has_data_digest(&self) -> bool {
        self.layout.trailer_len() > self.layout.pad_len()
    }

    /// Checks the data digest of a frame whose data segment arrived apart
    /// from the rest: `data_crc` is [`digest::crc32c`] of the data segment
    /// (built with [`digest::crc32c_append`] as the pieces came; any
    /// [`Crc32cImpl`] gives the same value), `trailer`
    /// the [`Header::trailer_len`] bytes that followed it.
    ///
    /// Passes whenever there is no data digest. Panics when `trailer` has
    /// the wrong length: that is the caller's bug, not the peer's.
    pub fn verify_data_digest(&self, data_crc: u32, trailer: &[u8]) -> Result<(), FrameError> {
        assert_eq!(
            trailer.len(),
            self.trailer_len(),
            "verify_data_digest: trailer of {} bytes for a {}-byte trailer",
            trailer.len(),
            self.trailer_len()
        );
        if !self.has_data_digest() {
            return Ok(());
        }
        // RFC 7143 §11.2.3 / §13.1: the data digest covers data and padding,
        // as received (decode does not require the padding to be zero either).
        let pad = self.layout.pad_len();
        let expected = self.crc.append(data_crc, &trailer[..pad]);
        let found = read_digest(&trailer[pad..]);
        if expected != found {
            return Err(FrameError::DataDigest {
                expected,
                found,
                frame_len: self.layout.frame_len,
                bhs: self.bhs,
            });
        }
        Ok(())
    }
}

/// What [`check_header`] found at the start of the buffer.
enum HeaderCheck<'a> {
    /// The header is not all in; the whole buffer needs `total_len` bytes
    /// (as [`Decoded::NeedMore`] reports it).
    NeedMore { total_len: usize },
    /// The header is in and passed every check.
    Checked {
        bhs: &'a [u8; BHS_LEN],
        ahs: &'a [u8],
        layout: Layout,
    },
}

/// Checks 1 to 3 of the module documentation: everything that can be
/// checked before the data segment is in.
fn check_header<'a>(buf: &'a [u8], limits: &FrameLimits) -> Result<HeaderCheck<'a>, FrameError> {
    let Some(bhs) = buf.first_chunk::<BHS_LEN>() else {
        return Ok(HeaderCheck::NeedMore { total_len: BHS_LEN });
    };
    let layout = Layout::of(bhs, limits);
    let data_len_u32 = layout.data_len as u32; // at most 2^24 - 1
    let too_long = data_len_u32 > limits.max_recv_data_segment_length;
    let too_long_error = || FrameError::DataSegmentTooLong {
        len: data_len_u32,
        max: limits.max_recv_data_segment_length,
        frame_len: layout.frame_len,
        bhs: *bhs,
    };

    // Without a header digest the BHS is all there is to trust: reject an
    // oversized segment right away, before any of its data is buffered.
    if too_long && !limits.header_digest {
        return Err(too_long_error());
    }
    let Some(header) = buf.get(..layout.header_len) else {
        // With a header digest, an oversized length is reported only once the
        // digest vouches for it; until then ask only for the header.
        let total_len = if too_long {
            layout.header_len
        } else {
            layout.frame_len
        };
        return Ok(HeaderCheck::NeedMore { total_len });
    };
    let ahs_end = BHS_LEN + layout.ahs_len;
    if limits.header_digest {
        // RFC 7143 §11.2.3 / §13.1: the header digest covers BHS and AHS.
        let expected = limits.crc.crc32c(&header[..ahs_end]);
        let found = read_digest(&header[ahs_end..]);
        if expected != found {
            return Err(FrameError::HeaderDigest { expected, found });
        }
        if too_long {
            return Err(too_long_error());
        }
    }
    let ahs = &header[BHS_LEN..ahs_end];
    if !ahs_is_well_formed(ahs) {
        return Err(FrameError::Ahs {
            frame_len: layout.frame_len,
            bhs: *bhs,
        });
    }
    Ok(HeaderCheck::Checked { bhs, ahs, layout })
}

/// Decodes the PDU at the start of `buf`, or says how many bytes it needs.
///
/// Never panics and never allocates. On [`Decoded::Frame`] the caller
/// consumes `len` bytes; on an error that carries `frame_len` it may Reject
/// and skip that many bytes once they have arrived; on
/// [`FrameError::HeaderDigest`] framing is lost.
pub fn decode<'a>(buf: &'a [u8], limits: &FrameLimits) -> Result<Decoded<'a>, FrameError> {
    let (bhs, ahs, layout) = match check_header(buf, limits)? {
        HeaderCheck::NeedMore { total_len } => return Ok(Decoded::NeedMore { total_len }),
        HeaderCheck::Checked { bhs, ahs, layout } => (bhs, ahs, layout),
    };
    let Some(frame_bytes) = buf.get(..layout.frame_len) else {
        return Ok(Decoded::NeedMore {
            total_len: layout.frame_len,
        });
    };
    let data_start = layout.header_len;
    let padded_end = data_start + padded_len(layout.data_len);
    if limits.data_digest_len(layout.data_len) > 0 {
        // RFC 7143 §11.2.3 / §13.1: the data digest covers data and padding.
        let expected = limits.crc.crc32c(&frame_bytes[data_start..padded_end]);
        let found = read_digest(&frame_bytes[padded_end..]);
        if expected != found {
            return Err(FrameError::DataDigest {
                expected,
                found,
                frame_len: layout.frame_len,
                bhs: *bhs,
            });
        }
    }
    let frame = Frame {
        bhs,
        ahs,
        data: &frame_bytes[data_start..data_start + layout.data_len],
    };
    Ok(Decoded::Frame {
        frame,
        len: layout.frame_len,
    })
}

/// The header of the PDU at the start of `buf`, checked as [`decode`]
/// checks it (header digest, AHS, DataSegmentLength against
/// MaxRecvDataSegmentLength), once the header is in and whether or not its
/// data segment is: `Ok(None)` until then.
///
/// A driver uses it to receive a large data segment straight into its final
/// place instead of into the receive buffer. Errors are those [`decode`]
/// returns for the same bytes.
pub fn peek_header(buf: &[u8], limits: &FrameLimits) -> Result<Option<Header>, FrameError> {
    match check_header(buf, limits)? {
        HeaderCheck::NeedMore { .. } => Ok(None),
        HeaderCheck::Checked { bhs, layout, .. } => Ok(Some(Header {
            bhs: *bhs,
            layout,
            crc: limits.crc,
        })),
    }
}

/// Bytes the header of the PDU starting at `buf` occupies, as far as `buf`
/// tells: BHS and header digest while the BHS is incomplete (the AHS is
/// unknown until then), BHS, AHS and header digest after.
///
/// Receiving exactly this many bytes never reads past the header, so a
/// driver that wants the header alone (to place the data segment itself)
/// asks for `header_bytes_needed(held) - held.len()`.
pub fn header_bytes_needed(buf: &[u8], limits: &FrameLimits) -> usize {
    match buf.first_chunk::<BHS_LEN>() {
        Some(bhs) => Layout::of(bhs, limits).header_len,
        None => BHS_LEN + limits.header_digest_len(),
    }
}

/// The digest in the first four bytes of `bytes` (the caller sized the slice).
fn read_digest(bytes: &[u8]) -> u32 {
    let mut raw = [0u8; DIGEST_LEN];
    raw.copy_from_slice(&bytes[..DIGEST_LEN]);
    digest::from_wire(raw)
}

/// One Additional Header Segment (RFC 7143 §11.2.2).
struct AhsSegment<'a> {
    ahs_type: u8,
    /// The AHSLength bytes after the type: the type-specific byte, then data.
    body: &'a [u8],
}

/// Walks the AHS chain; stops at the end or at the first inconsistent length.
fn ahs_segments(mut ahs: &[u8]) -> impl Iterator<Item = AhsSegment<'_>> {
    std::iter::from_fn(move || {
        // RFC 7143 §11.2.2: AHSLength (2 bytes) counts the bytes after the
        // type byte, excluding padding to a 4-byte boundary.
        let (head, rest) = ahs.split_first_chunk::<3>()?;
        let body_len = u16::from_be_bytes([head[0], head[1]]) as usize;
        let body = rest.get(..body_len)?;
        let segment_len = padded_len(3 + body_len);
        ahs = ahs.get(segment_len..)?;
        Some(AhsSegment {
            ahs_type: head[2],
            body,
        })
    })
}

/// True when the AHS chain covers `ahs` exactly.
fn ahs_is_well_formed(ahs: &[u8]) -> bool {
    let mut covered = 0usize;
    for seg in ahs_segments(ahs) {
        covered += padded_len(3 + seg.body.len());
    }
    covered == ahs.len()
}

/// Appends a whole PDU (BHS, AHS, header digest, data, padding, data digest) to `out`.
///
/// `ahs` must be whole 4-byte words (at most [`MAX_AHS_LEN`] bytes) and `data`
/// at most [`MAX_DATA_SEGMENT_LENGTH`] bytes; these are caller bugs and panic.
pub fn encode(out: &mut Vec<u8>, pdu: &Pdu, ahs: &[u8], data: &[u8], limits: &FrameLimits) {
    let data_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    let data_start = begin_pdu(out, pdu, ahs, data_len, limits);
    out.extend_from_slice(data);
    finish_pdu(out, data_start, limits);
}

/// Two-step encoding so a caller can read store data straight into the output buffer (one copy):
/// writes header (+AHS +header digest) for a data segment of data_len bytes; returns the offset where data starts.
pub fn begin_pdu(
    out: &mut Vec<u8>,
    pdu: &Pdu,
    ahs: &[u8],
    data_len: u32,
    limits: &FrameLimits,
) -> usize {
    encode_header(out, pdu, ahs, data_len, limits);
    out.len()
}

/// After the caller appended exactly data_len bytes at data_start: pads and appends the data digest.
pub fn finish_pdu(out: &mut Vec<u8>, data_start: usize, limits: &FrameLimits) {
    assert!(
        data_start <= out.len(),
        "finish_pdu: data_start {data_start} past the end {}",
        out.len()
    );
    let data_len = out.len() - data_start;
    // RFC 7143 §11.2.3: pad with zeros to a 4-byte boundary.
    out.resize(data_start + padded_len(data_len), 0);
    if limits.data_digest_len(data_len) > 0 {
        let crc = limits.crc.crc32c(&out[data_start..]);
        out.extend_from_slice(&digest::to_wire(crc));
    }
}

/// For vectored sends where the data stays in another buffer: header part only (BHS+AHS+header digest) ...
pub fn encode_header(
    out: &mut Vec<u8>,
    pdu: &Pdu,
    ahs: &[u8],
    data_len: u32,
    limits: &FrameLimits,
) {
    assert!(
        ahs.len() & 3 == 0 && ahs.len() <= MAX_AHS_LEN,
        "AHS of {} bytes is not whole words",
        ahs.len()
    );
    assert!(
        data_len <= MAX_DATA_SEGMENT_LENGTH,
        "data segment of {data_len} bytes does not fit 24 bits"
    );
    let mut bhs = [0u8; BHS_LEN];
    pdu.emit((ahs.len() / 4) as u8, data_len, &mut bhs);
    let header_start = out.len();
    out.extend_from_slice(&bhs);
    out.extend_from_slice(ahs);
    if limits.header_digest {
        // RFC 7143 §11.2.3 / §13.1: the header digest covers BHS and AHS.
        let crc = limits.crc.crc32c(&out[header_start..]);
        out.extend_from_slice(&digest::to_wire(crc));
    }
}

/// ... and the trailer that follows the data: padding then the data digest (computed over data+padding). Returns bytes and count.
#[inline]
pub fn data_trailer(data: &[u8], limits: &FrameLimits) -> ([u8; 8], usize) {
    data_trailer_of(std::iter::once(data), data.len(), limits)
}

/// As [`data_trailer`], for a data segment of `len` bytes in all that lies
/// in several pieces (sent from where they are, not gathered first).
#[inline]
pub fn data_trailer_of<'a>(
    pieces: impl Iterator<Item = &'a [u8]>,
    len: usize,
    limits: &FrameLimits,
) -> ([u8; 8], usize) {
    let crc = if limits.data_digest_len(len) == 0 {
        0
    } else {
        pieces.fold(0, |crc, piece| limits.crc.append(crc, piece))
    };
    data_trailer_for_crc(crc, len, limits)
}

/// As [`data_trailer`], for a data segment of `len` bytes whose CRC32C
/// (`data_crc`, padding not included) is already known, such as one folded
/// from a memory LUN's page CRCs ([`digest::crc32c_extend_page`]).
#[inline]
pub fn data_trailer_for_crc(data_crc: u32, len: usize, limits: &FrameLimits) -> ([u8; 8], usize) {
    let pad = padded_len(len) - len;
    if limits.data_digest_len(len) == 0 {
        // Without a data digest (the common case): the padding only, on
        // the caller's path, once per Data-In PDU.
        return ([0u8; 8], pad);
    }
    digest_trailer(data_crc, pad, limits)
}

/// The padding and the data digest, `data_crc` extended over the padding.
fn digest_trailer(data_crc: u32, pad: usize, limits: &FrameLimits) -> ([u8; 8], usize) {
    const ZEROS: [u8; 3] = [0; 3];
    let mut trailer = [0u8; 8];
    let crc = limits.crc.append(data_crc, &ZEROS[..pad]);
    trailer[pad..pad + DIGEST_LEN].copy_from_slice(&digest::to_wire(crc));
    (trailer, pad + DIGEST_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::{NopIn, NopOut, ScsiCommand};

    const FFP: FrameLimits = FrameLimits {
        max_recv_data_segment_length: 65536,
        header_digest: true,
        data_digest: true,
        crc: Crc32cImpl::Hardware,
    };

    fn nop_out() -> Pdu {
        Pdu::NopOut(NopOut {
            initiator_task_tag: 7,
            target_transfer_tag: 0xffff_ffff,
            cmd_sn: 3,
            ..Default::default()
        })
    }

    fn expect_frame<'a>(d: Result<Decoded<'a>, FrameError>) -> (Frame<'a>, usize) {
        match d {
            Ok(Decoded::Frame { frame, len }) => (frame, len),
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    #[test]
    fn empty_and_short_buffers_need_the_bhs() {
        for n in 0..BHS_LEN {
            let buf = vec![0u8; n];
            assert!(matches!(
                decode(&buf, &FFP),
                Ok(Decoded::NeedMore { total_len: BHS_LEN })
            ));
        }
    }

    #[test]
    fn frame_length_with_padding_and_digests() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], b"hello", &FFP);
        // 48 BHS + 4 HD + 8 padded data + 4 DD
        assert_eq!(out.len(), 64);
        let (frame, len) = expect_frame(decode(&out, &FFP));
        assert_eq!(len, 64);
        assert_eq!(frame.data, b"hello");
        assert_eq!(frame.pdu().unwrap(), nop_out());
    }

    #[test]
    fn no_data_digest_without_data() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], &[], &FFP);
        assert_eq!(out.len(), 52);
        assert_eq!(expect_frame(decode(&out, &FFP)).1, 52);
    }

    #[test]
    fn need_more_reports_whole_frame_once_bhs_is_in() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], &[1u8; 100], &FrameLimits::LOGIN);
        assert_eq!(out.len(), 148);
        for n in BHS_LEN..out.len() {
            assert!(matches!(
                decode(&out[..n], &FrameLimits::LOGIN),
                Ok(Decoded::NeedMore { total_len: 148 })
            ));
        }
    }

    #[test]
    fn oversized_segment_is_refused_from_the_bhs_alone() {
        let mut out = Vec::new();
        encode_header(&mut out, &nop_out(), &[], 8193, &FrameLimits::LOGIN);
        match decode(&out, &FrameLimits::LOGIN) {
            Err(FrameError::DataSegmentTooLong {
                len: 8193,
                max: 8192,
                frame_len,
                bhs,
            }) => {
                assert_eq!(frame_len, 48 + 8196);
                assert_eq!(&bhs[..], &out[..48]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn oversized_segment_with_header_digest_waits_for_the_digest() {
        let limits = FrameLimits {
            max_recv_data_segment_length: 512,
            ..FFP
        };
        let mut out = Vec::new();
        encode_header(&mut out, &nop_out(), &[], 513, &limits);
        assert!(matches!(
            decode(&out[..48], &limits),
            Ok(Decoded::NeedMore { total_len: 52 })
        ));
        assert!(matches!(
            decode(&out, &limits),
            Err(FrameError::DataSegmentTooLong { len: 513, .. })
        ));
        // A damaged header is a header digest error, not a length error.
        out[6] ^= 0x40;
        assert!(matches!(
            decode(&out, &limits),
            Err(FrameError::HeaderDigest { .. })
        ));
    }

    #[test]
    fn damaged_header_digest() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], &[], &FFP);
        out[20] ^= 1;
        assert!(matches!(
            decode(&out, &FFP),
            Err(FrameError::HeaderDigest { .. })
        ));
    }

    #[test]
    fn damaged_data_digest_carries_frame_length() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], b"abc", &FFP);
        out[53] ^= 1;
        match decode(&out, &FFP) {
            Err(FrameError::DataDigest {
                frame_len: 60, bhs, ..
            }) => assert_eq!(&bhs[..], &out[..48]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn damaged_padding_fails_the_data_digest() {
        // RFC 7143 §13.1: the padding is inside the data digest.
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], b"abc", &FFP);
        out[55] = 0xee;
        assert!(matches!(
            decode(&out, &FFP),
            Err(FrameError::DataDigest { .. })
        ));
    }

    #[test]
    fn unknown_opcode_still_frames() {
        let mut out = Vec::new();
        encode(&mut out, &nop_out(), &[], b"xy", &FrameLimits::LOGIN);
        out[0] = 0x1c;
        let (frame, len) = expect_frame(decode(&out, &FrameLimits::LOGIN));
        assert_eq!(len, 52);
        assert_eq!(frame.pdu(), Err(ParseError::UnknownOpcode(0x1c)));
    }

    fn extended_cdb_ahs(cdb_tail: &[u8]) -> Vec<u8> {
        // RFC 7143 §11.3.5: AHSLength = CDBLength - 15, type 1, reserved byte.
        let mut ahs = Vec::new();
        ahs.extend_from_slice(&((cdb_tail.len() + 1) as u16).to_be_bytes());
        ahs.push(ahs_type::EXTENDED_CDB);
        ahs.push(0);
        ahs.extend_from_slice(cdb_tail);
        ahs.resize(padded_len(ahs.len()), 0);
        ahs
    }

    #[test]
    fn extended_cdb_and_bidi_length() {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x7f;
        let cmd = Pdu::ScsiCommand(ScsiCommand {
            final_bit: true,
            cdb,
            ..Default::default()
        });
        let tail: Vec<u8> = (100u8..116).collect(); // a 32-byte CDB
        let mut ahs = extended_cdb_ahs(&tail);
        // RFC 7143 §11.3.6: AHSLength 5, type 2, reserved, length.
        ahs.extend_from_slice(&[0, 5, ahs_type::BIDI_READ_LENGTH, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        let mut out = Vec::new();
        encode(&mut out, &cmd, &ahs, &[], &FFP);
        let (frame, _) = expect_frame(decode(&out, &FFP));
        let full = frame.cdb();
        assert_eq!(full.len(), 32);
        assert_eq!(&full[..16], &cdb);
        assert_eq!(&full[16..], &tail[..]);
        assert_eq!(frame.bidi_read_length(), Some(0x0001_0000));
    }

    #[test]
    fn plain_cdb_is_borrowed() {
        let mut out = Vec::new();
        let cmd = Pdu::ScsiCommand(ScsiCommand {
            cdb: [0x12; 16],
            ..Default::default()
        });
        encode(&mut out, &cmd, &[], &[], &FFP);
        let (frame, _) = expect_frame(decode(&out, &FFP));
        assert!(matches!(frame.cdb(), Cow::Borrowed(c) if c == [0x12; 16]));
        assert_eq!(frame.bidi_read_length(), None);
    }

    #[test]
    fn ahs_longer_than_announced_is_malformed() {
        let mut out = Vec::new();
        // One AHS word whose AHSLength claims 9 bytes.
        encode(
            &mut out,
            &nop_out(),
            &[0, 9, 1, 0],
            &[],
            &FrameLimits::LOGIN,
        );
        assert!(matches!(
            decode(&out, &FrameLimits::LOGIN),
            Err(FrameError::Ahs { frame_len: 52, .. })
        ));
    }

    #[test]
    fn two_step_and_vectored_encodings_match_encode() {
        let data = b"seven b";
        for limits in [FrameLimits::LOGIN, FFP] {
            let mut whole = Vec::new();
            encode(
                &mut whole,
                &Pdu::NopIn(NopIn::default()),
                &[],
                data,
                &limits,
            );

            let mut two_step = Vec::new();
            let start = begin_pdu(
                &mut two_step,
                &Pdu::NopIn(NopIn::default()),
                &[],
                data.len() as u32,
                &limits,
            );
            two_step.extend_from_slice(data);
            finish_pdu(&mut two_step, start, &limits);
            assert_eq!(two_step, whole);

            let mut vectored = Vec::new();
            encode_header(
                &mut vectored,
                &Pdu::NopIn(NopIn::default()),
                &[],
                data.len() as u32,
                &limits,
            );
            vectored.extend_from_slice(data);
            let (trailer, n) = data_trailer(data, &limits);
            vectored.extend_from_slice(&trailer[..n]);
            assert_eq!(vectored, whole);
        }
    }

    #[test]
    fn data_trailer_shapes() {
        assert_eq!(data_trailer(&[], &FFP).1, 0);
        assert_eq!(data_trailer(&[1, 2, 3, 4], &FFP).1, 4);
        assert_eq!(data_trailer(&[1], &FFP).1, 7);
        assert_eq!(data_trailer(&[1], &FrameLimits::LOGIN), ([0u8; 8], 3));
    }

    fn data_in_frame(data: &[u8], limits: &FrameLimits) -> Vec<u8> {
        let mut out = Vec::new();
        let pdu = Pdu::DataIn(crate::pdu::DataIn {
            final_bit: true,
            initiator_task_tag: 9,
            buffer_offset: 4096,
            ..Default::default()
        });
        encode(&mut out, &pdu, &[], data, limits);
        out
    }

    #[test]
    fn peek_header_waits_for_the_header_only() {
        let data = [7u8; 1001];
        for limits in [FrameLimits::LOGIN, FFP] {
            let out = data_in_frame(&data, &limits);
            let header_len = if limits.header_digest { 52 } else { 48 };
            for n in 0..header_len {
                assert_eq!(peek_header(&out[..n], &limits), Ok(None), "{n} bytes");
            }
            for n in [header_len, header_len + 1, out.len() - 1, out.len()] {
                let h = peek_header(&out[..n], &limits)
                    .unwrap()
                    .expect("header is in");
                assert_eq!(h.header_len(), header_len);
                assert_eq!(h.data_len(), 1001);
                assert_eq!(h.has_data_digest(), limits.data_digest);
                assert_eq!(h.trailer_len(), if limits.data_digest { 7 } else { 3 });
                assert_eq!(h.frame_len(), out.len());
                assert_eq!(&h.bhs()[..], &out[..48]);
                assert!(matches!(h.pdu(), Ok(Pdu::DataIn(d)) if d.buffer_offset == 4096));
            }
        }
    }

    #[test]
    fn peek_header_refuses_what_decode_refuses() {
        // A damaged header digest.
        let mut out = data_in_frame(&[1u8; 64], &FFP);
        out[20] ^= 1;
        assert!(matches!(
            peek_header(&out[..52], &FFP),
            Err(FrameError::HeaderDigest { .. })
        ));
        // An oversized segment, from the BHS alone without a header digest.
        let mut out = Vec::new();
        encode_header(&mut out, &nop_out(), &[], 8193, &FrameLimits::LOGIN);
        assert_eq!(
            peek_header(&out, &FrameLimits::LOGIN),
            decode(&out, &FrameLimits::LOGIN).map(|_| None)
        );
        assert!(peek_header(&out, &FrameLimits::LOGIN).is_err());
        // A malformed AHS.
        let mut out = Vec::new();
        encode(
            &mut out,
            &nop_out(),
            &[0, 9, 1, 0],
            &[],
            &FrameLimits::LOGIN,
        );
        assert!(matches!(
            peek_header(&out, &FrameLimits::LOGIN),
            Err(FrameError::Ahs { frame_len: 52, .. })
        ));
    }

    #[test]
    fn header_bytes_needed_never_reaches_past_the_header() {
        let out = data_in_frame(&[3u8; 100], &FFP);
        assert_eq!(header_bytes_needed(&[], &FFP), 52);
        assert_eq!(header_bytes_needed(&out[..47], &FFP), 52);
        assert_eq!(header_bytes_needed(&out[..48], &FFP), 52);
        assert_eq!(header_bytes_needed(&[], &FrameLimits::LOGIN), 48);
        // An AHS is known once the BHS is in.
        let mut with_ahs = Vec::new();
        encode(&mut with_ahs, &nop_out(), &[0, 1, 9, 0], b"zz", &FFP);
        assert_eq!(header_bytes_needed(&with_ahs[..48], &FFP), 56);
    }

    #[test]
    fn data_digest_verified_apart_from_the_header() {
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 31) as u8).collect();
        let out = data_in_frame(&data, &FFP);
        let h = peek_header(&out, &FFP).unwrap().unwrap();
        let trailer = &out[h.header_len() + h.data_len()..];
        assert_eq!(trailer.len(), h.trailer_len());
        // The CRC built from pieces, as a driver receiving in pieces does.
        let crc = data.chunks(300).fold(0, digest::crc32c_append);
        assert_eq!(crc, digest::crc32c(&data));
        assert_eq!(h.verify_data_digest(crc, trailer), Ok(()));

        // One damaged data byte: the same error decode reports.
        let mut bad = out.clone();
        bad[h.header_len() + 500] ^= 0x10;
        let bad_crc = digest::crc32c(&bad[h.header_len()..h.header_len() + h.data_len()]);
        let placed = h.verify_data_digest(bad_crc, trailer);
        assert!(matches!(placed, Err(FrameError::DataDigest { .. })));
        assert_eq!(placed.map(|_| ()), decode(&bad, &FFP).map(|_| ()));

        // Damaged padding fails too (RFC 7143 §13.1: it is digested).
        let mut bad_pad = trailer.to_vec();
        bad_pad[1] = 0xee;
        assert!(h.verify_data_digest(crc, &bad_pad).is_err());

        // Without a data digest there is nothing to verify.
        let plain = data_in_frame(&data, &FrameLimits::LOGIN);
        let h = peek_header(&plain, &FrameLimits::LOGIN).unwrap().unwrap();
        assert!(!h.has_data_digest());
        assert_eq!(h.verify_data_digest(0xdead, &[0, 0, 0]), Ok(()));
    }

    #[test]
    #[should_panic(expected = "verify_data_digest")]
    fn a_trailer_of_the_wrong_length_is_a_caller_bug() {
        let out = data_in_frame(&[1u8; 8], &FFP);
        let h = peek_header(&out, &FFP).unwrap().unwrap();
        let _ = h.verify_data_digest(0, &[0u8; 3]);
    }

    proptest::proptest! {
        /// Data placed apart from the header, checked with the header's
        /// lengths and `verify_data_digest`, gives what decode gives for
        /// the whole frame, damaged or not.
        #[test]
        fn placement_agrees_with_decode(
            len in 0usize..3000,
            hd: bool,
            dd: bool,
            flip in proptest::option::of(0usize..4000),
            split in 1usize..1000,
            software: bool,
        ) {
            let crc = if software { Crc32cImpl::Software } else { Crc32cImpl::Hardware };
            let limits = FrameLimits { max_recv_data_segment_length: 4096, header_digest: hd, data_digest: dd, crc };
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let mut out = data_in_frame(&data, &limits);
            let h = peek_header(&out, &limits).unwrap().unwrap();
            proptest::prop_assert_eq!(h.header_len() + h.data_len() + h.trailer_len(), h.frame_len());
            proptest::prop_assert_eq!(h.frame_len(), out.len());
            if let Some(at) = flip {
                // Damage a data or trailer byte only: the header stays valid.
                let body = out.len() - h.header_len();
                if body > 0 {
                    let at = h.header_len() + at % body;
                    out[at] ^= 0x01;
                }
            }
            let segment = &out[h.header_len()..h.header_len() + h.data_len()];
            let crc = segment
                .chunks(split)
                .fold(0, digest::crc32c_append);
            let placed = h.verify_data_digest(crc, &out[h.header_len() + h.data_len()..]);
            proptest::prop_assert_eq!(placed, decode(&out, &limits).map(|_| ()));
        }

        /// Frames encoded with one CRC32C implementation decode with the
        /// other, and a damaged byte fails both alike: the choice is
        /// invisible on the wire.
        #[test]
        fn crc_implementations_are_interchangeable_on_the_wire(
            len in 0usize..3000,
            hd: bool,
            dd: bool,
            flip in proptest::option::of(0usize..4000),
        ) {
            let hardware = FrameLimits { max_recv_data_segment_length: 4096, header_digest: hd, data_digest: dd, crc: Crc32cImpl::Hardware };
            let software = FrameLimits { crc: Crc32cImpl::Software, ..hardware };
            let data: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
            let mut out = data_in_frame(&data, &software);
            proptest::prop_assert_eq!(&out, &data_in_frame(&data, &hardware));
            let mut vectored = Vec::new();
            encode_header(&mut vectored, &Pdu::DataIn(crate::pdu::DataIn {
                final_bit: true,
                initiator_task_tag: 9,
                buffer_offset: 4096,
                ..Default::default()
            }), &[], len as u32, &software);
            vectored.extend_from_slice(&data);
            let (trailer, n) = data_trailer(&data, &software);
            vectored.extend_from_slice(&trailer[..n]);
            proptest::prop_assert_eq!(&vectored, &out);
            if let Some(at) = flip {
                let at = at % out.len();
                out[at] ^= 0x20;
            }
            let by_hardware = decode(&out, &hardware).map(|d| match d {
                Decoded::Frame { frame, len } => Some((frame.data.to_vec(), len)),
                Decoded::NeedMore { .. } => None,
            });
            let by_software = decode(&out, &software).map(|d| match d {
                Decoded::Frame { frame, len } => Some((frame.data.to_vec(), len)),
                Decoded::NeedMore { .. } => None,
            });
            proptest::prop_assert_eq!(&by_hardware, &by_software);
            if flip.is_none() {
                proptest::prop_assert_eq!(by_software, Ok(Some((data, out.len()))));
            }
        }
    }

    #[test]
    fn login_limits() {
        // RFC 7143 §6.2: 8192 bytes and no digests until login completes.
        assert_eq!(
            FrameLimits::LOGIN,
            FrameLimits {
                max_recv_data_segment_length: 8192,
                header_digest: false,
                data_digest: false,
                crc: Crc32cImpl::Hardware,
            }
        );
    }
}
