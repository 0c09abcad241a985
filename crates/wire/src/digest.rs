//! CRC32C header and data digests (RFC 7143 §13.1, generator 0x11EDC6F41).
//!
//! The CRC itself comes from the `crc32c` crate, which uses the SSE4.2
//! `crc32` instruction (or ARMv8 CRC) when the CPU has it.
//!
//! # Byte order on the wire
//!
//! The digest is sent least significant byte first: the CRC register value
//! `0x8a9136aa` of 32 zero bytes goes on the wire as `aa 36 91 8a`, exactly as
//! RFC 3720 Appendix B.4 prints its examples. This is the reflected CRC's
//! natural order (it is what shifting the complemented register out bit 0
//! first produces) and is what libiscsi and tgt send; see
//! `tests/captures.rs` for header digests captured from them. Writing the
//! digest big-endian like every other iSCSI field is the classic mistake, so
//! all code goes through [`to_wire`] and [`from_wire`].

/// Length of a header or data digest in bytes.
pub const DIGEST_LEN: usize = 4;

/// CRC32C of `data` (initial value all ones, result complemented).
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continues a CRC32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// The four bytes a digest value is sent as (RFC 3720 Appendix B.4 order).
pub fn to_wire(crc: u32) -> [u8; DIGEST_LEN] {
    crc.to_le_bytes()
}

/// The digest value carried by four received bytes.
pub fn from_wire(bytes: [u8; DIGEST_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// The data digest: the CRC over the data segment and its zero padding.
///
/// RFC 7143 §11.2.3 and §13.1: padding bytes are included in the CRC. Padding
/// is zero, so `data` is extended with `padded_len(len) - len` zero bytes.
pub fn data_digest(data: &[u8]) -> u32 {
    const ZEROS: [u8; 3] = [0; 3];
    let pad = crate::padded_len(data.len()) - data.len();
    crc32c_append(crc32c(data), &ZEROS[..pad])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 3720 Appendix B.4: each example as (input, digest bytes on the wire).
    fn rfc3720_vectors() -> Vec<(Vec<u8>, [u8; 4])> {
        let read10_pdu: Vec<u8> = [
            0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, //
            0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, //
            0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]
        .to_vec();
        vec![
            (vec![0u8; 32], [0xaa, 0x36, 0x91, 0x8a]),
            (vec![0xffu8; 32], [0x43, 0xab, 0xa8, 0x62]),
            ((0u8..32).collect(), [0x4e, 0x79, 0xdd, 0x46]),
            ((0u8..32).rev().collect(), [0x5c, 0xdb, 0x3f, 0x11]),
            (read10_pdu, [0x56, 0x3a, 0x96, 0xd9]),
        ]
    }

    #[test]
    fn rfc3720_appendix_b4_vectors() {
        for (input, wire) in rfc3720_vectors() {
            let crc = crc32c(&input);
            assert_eq!(to_wire(crc), wire, "input {input:02x?}");
            assert_eq!(from_wire(wire), crc);
        }
    }

    #[test]
    fn thirty_two_zeros_is_lsb_first() {
        // The register value, to pin the byte order finding down in one line.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(to_wire(0x8a91_36aa), [0xaa, 0x36, 0x91, 0x8a]);
    }

    #[test]
    fn empty_input() {
        assert_eq!(crc32c(&[]), 0);
        assert_eq!(data_digest(&[]), 0);
    }

    #[test]
    fn data_digest_covers_padding() {
        // RFC 7143 §11.2.3: 5 data bytes are padded to 8 and all 8 are digested.
        let data = [1u8, 2, 3, 4, 5];
        assert_eq!(data_digest(&data), crc32c(&[1, 2, 3, 4, 5, 0, 0, 0]));
        assert_ne!(data_digest(&data), crc32c(&data));
        assert_eq!(data_digest(&[9u8; 8]), crc32c(&[9u8; 8]));
    }

    proptest! {
        #[test]
        fn append_equals_whole(a in proptest::collection::vec(any::<u8>(), 0..300),
                               b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut whole = a.clone();
            whole.extend_from_slice(&b);
            prop_assert_eq!(crc32c_append(crc32c(&a), &b), crc32c(&whole));
        }

        #[test]
        fn wire_round_trip(crc: u32) {
            prop_assert_eq!(from_wire(to_wire(crc)), crc);
        }
    }
}
