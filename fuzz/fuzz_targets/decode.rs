//! Fuzzes the PDU decoder: arbitrary bytes through `frame::decode` and
//! `Frame::pdu`, under several limits, consuming frames the way a connection
//! would (skip what can be skipped, stop where framing is lost).
//!
//! Random bytes almost never carry a valid CRC32C, so with digests on the
//! decoder would stop at the header digest every time. The input is therefore
//! also replayed with correct digests written in where the frame layout puts
//! them, which lets the fuzzer reach the AHS and data paths behind them.
#![no_main]

use isoe_wire::digest::{crc32c, to_wire, Crc32cImpl};
use isoe_wire::frame::{decode, Decoded, FrameError, FrameLimits};
use isoe_wire::padded_len;
use libfuzzer_sys::fuzz_target;

/// The limits a connection can be in: login, full feature with and without digests.
const LIMITS: [FrameLimits; 4] = [
    FrameLimits::LOGIN,
    FrameLimits {
        max_recv_data_segment_length: 262_144,
        header_digest: false,
        data_digest: false,
        crc: Crc32cImpl::Hardware,
    },
    FrameLimits {
        max_recv_data_segment_length: 512,
        header_digest: true,
        data_digest: false,
        crc: Crc32cImpl::Hardware,
    },
    FrameLimits {
        max_recv_data_segment_length: 65_536,
        header_digest: true,
        data_digest: true,
        crc: Crc32cImpl::Hardware,
    },
];

fuzz_target!(|data: &[u8]| {
    for limits in &LIMITS {
        consume(data, limits);
    }
    // Full feature limits with digests, on input whose digests are made right.
    let header_only = with_digests(data, false);
    consume(&header_only, &LIMITS[2]);
    let both = with_digests(data, true);
    consume(&both, &LIMITS[3]);
});

/// A copy of `input` with the CRC32C of each frame's header (and, if
/// `data_digest`, of its data and padding) written where the digests go.
fn with_digests(input: &[u8], data_digest: bool) -> Vec<u8> {
    let mut buf = input.to_vec();
    let mut at = 0usize;
    while at + 48 <= buf.len() {
        let ahs_len = buf[at + 4] as usize * 4;
        let dsl = u32::from_be_bytes([0, buf[at + 5], buf[at + 6], buf[at + 7]]) as usize;
        let digest_at = at + 48 + ahs_len;
        if digest_at + 4 > buf.len() {
            break;
        }
        let crc = crc32c(&buf[at..digest_at]);
        buf[digest_at..digest_at + 4].copy_from_slice(&to_wire(crc));
        let data_start = digest_at + 4;
        let data_end = data_start + padded_len(dsl);
        at = data_end;
        if data_digest && dsl > 0 {
            if data_end + 4 > buf.len() {
                break;
            }
            let crc = crc32c(&buf[data_start..data_end]);
            buf[data_end..data_end + 4].copy_from_slice(&to_wire(crc));
            at += 4;
        }
    }
    buf
}

fn consume(mut buf: &[u8], limits: &FrameLimits) {
    // Every iteration consumes at least 48 bytes or returns.
    loop {
        match decode(buf, limits) {
            Ok(Decoded::Frame { frame, len }) => {
                assert!(len >= 48 && len <= buf.len() && len % 4 == 0);
                assert!(frame.data.len() <= limits.max_recv_data_segment_length as usize);
                let _ = frame.pdu();
                let cdb = frame.cdb();
                assert!(cdb.len() >= 16);
                let _ = frame.bidi_read_length();
                buf = &buf[len..];
            }
            Ok(Decoded::NeedMore { total_len }) => {
                assert!(total_len > buf.len());
                return;
            }
            Err(FrameError::HeaderDigest { expected, found }) => {
                assert_ne!(expected, found);
                return;
            }
            Err(
                FrameError::DataSegmentTooLong { frame_len, .. }
                | FrameError::DataDigest { frame_len, .. }
                | FrameError::Ahs { frame_len, .. },
            ) => {
                assert!(frame_len >= 48);
                match buf.get(frame_len..) {
                    Some(rest) => buf = rest,
                    None => return,
                }
            }
        }
    }
}
