//! CRC32C header and data digests (RFC 7143 §13.1, generator 0x11EDC6F41).
//!
//! The CRC itself comes from one of two crates, chosen per call by what the
//! CPU has ([`Crc32cImpl::Hardware`]):
//!
//! - where x86-64 has AVX-512 with VPCLMULQDQ, `crc-fast`: it folds 64 bytes
//!   per carry-less multiply of 512-bit registers, blended with the `crc32`
//!   instruction, at 46 GB/s on 4 KiB and 80 GB/s on 256 KiB on a Xeon of
//!   that kind (4x the instruction alone);
//! - everywhere else, the `crc32c` crate: the SSE4.2 `crc32` instruction (or
//!   ARMv8 CRC) in three interleaved streams. Without AVX-512, `crc-fast`'s
//!   128- and 256-bit folding measured slower than this (8.8 against
//!   11 GB/s on 4 KiB, Zen 3), so it is not used there.
//!
//! [`Crc32cImpl`] also offers a portable table-driven implementation
//! ([`crc32c_software`]), so that a benchmark can show what the instructions
//! save (ARCHITECTURE.md, datapath rule 5). The choice travels with the
//! caller's [`crate::frame::FrameLimits`]. Data of at most 256 bytes (header
//! digests) goes to the `crc32` instruction inline, where neither crate's
//! entry cost is worth paying. What the CPU has is tested once and cached.
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
    Crc32cImpl::Hardware.crc32c(data)
}

/// Continues a CRC32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    Crc32cImpl::Hardware.append(crc, data)
}

/// True where 512-bit carry-less multiplies make folding faster than the
/// `crc32` instruction (x86-64 with AVX-512F, AVX-512VL and VPCLMULQDQ).
#[inline]
pub fn has_wide_clmul() -> bool {
    cpu().wide_clmul
}

/// What this CPU offers a CRC32C, tested once: three feature tests per CRC
/// were 1% of a target's samples at 4 KiB. A fact of the machine, cached as
/// the standard library caches the features themselves.
#[derive(Clone, Copy)]
struct Cpu {
    wide_clmul: bool,
    #[cfg(target_arch = "x86_64")]
    sse42: Option<sse42::Sse42>,
}

#[inline]
fn cpu() -> Cpu {
    static CPU: std::sync::OnceLock<Cpu> = std::sync::OnceLock::new();
    *CPU.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Cpu {
                wide_clmul: std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("vpclmulqdq"),
                sse42: sse42::Sse42::detect(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Cpu { wide_clmul: false }
        }
    })
}

/// Up to this many bytes (a header digest's 48, with AHS a few more) the
/// `crc32` instruction run inline, 8 bytes at a time, is fastest: 4-9 ns
/// for 48 bytes against 16-20 through `crc-fast` and 25-30 through the
/// `crc32c` crate, whose entry (feature test, alignment prologue, stream
/// split) costs more than the work. Beyond about 256 bytes folding wins.
const SHORT_MAX: usize = 256;

/// The `crc32` instruction called directly, for short data. The one place
/// `wire` allows `unsafe`: calling a function compiled for SSE4.2, which is
/// sound only on a CPU that has it. [`sse42::Sse42`] is the proof: it can
/// only be made by testing the CPU.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod sse42 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    /// Made only where the CPU has SSE4.2 ([`Sse42::detect`]).
    #[derive(Clone, Copy)]
    pub(super) struct Sse42(());

    impl Sse42 {
        pub(super) fn detect() -> Option<Sse42> {
            std::arch::is_x86_feature_detected!("sse4.2").then_some(Sse42(()))
        }

        /// Continues a CRC32C over `data`.
        #[inline]
        pub(super) fn append(self, crc: u32, data: &[u8]) -> u32 {
            // SAFETY: `self` exists only if the CPU has SSE4.2 (`detect`),
            // the one feature `append_sse42` is compiled for.
            unsafe { append_sse42(crc, data) }
        }
    }

    #[target_feature(enable = "sse4.2")]
    fn append_sse42(crc: u32, data: &[u8]) -> u32 {
        let mut crc = u64::from(!crc);
        if let Ok(header) = <&[u8; 48]>::try_from(data) {
            // A basic header segment, the commonest case: six steps, no loop.
            for word in header.as_chunks::<8>().0 {
                crc = _mm_crc32_u64(crc, u64::from_le_bytes(*word));
            }
            return !(crc as u32);
        }
        let mut words = data.chunks_exact(8);
        for word in &mut words {
            let word: [u8; 8] = word.try_into().expect("chunks of 8");
            crc = _mm_crc32_u64(crc, u64::from_le_bytes(word));
        }
        // The instruction's register is 32 bits wide whatever the operand.
        let mut crc = crc as u32;
        for &byte in words.remainder() {
            crc = _mm_crc32_u8(crc, byte);
        }
        !crc
    }
}

/// Continues a CRC32C with `crc-fast` (see the module's notes).
#[inline]
fn crc_fast_append(crc: u32, data: &[u8]) -> u32 {
    if crc == 0 {
        // A CRC from the start (every header digest): the entry point
        // that skips building a `Digest`, a few ns of a 48-byte header's 20.
        return crc_fast::crc32_iscsi(data);
    }
    // crc-fast continues from the raw register: the complement of a
    // finished CRC32C.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// Which CRC32C implementation computes digests. Both give the same values;
/// they differ only in CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Crc32cImpl {
    /// The fastest the CPU offers: `crc-fast`'s 512-bit folding where
    /// [`has_wide_clmul`], else the `crc32c` crate's use of the CRC32C
    /// instruction (SSE4.2 `crc32`, ARMv8 CRC), which is everywhere isoe is
    /// measured; on x86-64, up to 256 bytes, the instruction inline.
    #[default]
    Hardware,
    /// The CRC32C instruction alone whatever the CPU (the `crc32c` crate, or
    /// inline up to 256 bytes as for [`Crc32cImpl::Hardware`]), for
    /// comparing against [`Crc32cImpl::Hardware`]'s folding.
    Instruction,
    /// [`crc32c_software`]: slicing-by-8 over 8 KiB of tables, no special
    /// instruction, the kind of CRC a software iSCSI stack without the
    /// instruction runs.
    Software,
}

impl Crc32cImpl {
    /// CRC32C of `data` (as [`crc32c`]).
    #[inline]
    pub fn crc32c(self, data: &[u8]) -> u32 {
        self.append(0, data)
    }

    /// Continues a CRC32C (as [`crc32c_append`]).
    #[inline]
    pub fn append(self, crc: u32, data: &[u8]) -> u32 {
        // Short data, inline at the caller: one cached load and a call of
        // the instruction's loop, not the long path's frame.
        #[cfg(target_arch = "x86_64")]
        if data.len() <= SHORT_MAX && self != Crc32cImpl::Software {
            if let Some(sse42) = cpu().sse42 {
                return sse42.append(crc, data);
            }
        }
        self.append_long(crc, data)
    }

    #[inline(never)]
    fn append_long(self, crc: u32, data: &[u8]) -> u32 {
        if data.is_empty() {
            // The padding of a data digest whose segment needs none.
            return crc;
        }
        match self {
            Crc32cImpl::Software => crc32c_software(crc, data),
            Crc32cImpl::Hardware if cpu().wide_clmul => crc_fast_append(crc, data),
            Crc32cImpl::Hardware | Crc32cImpl::Instruction => crc32c::crc32c_append(crc, data),
        }
    }

    /// The data digest over `data` and its zero padding (as [`data_digest`]).
    pub fn data_digest(self, data: &[u8]) -> u32 {
        const ZEROS: [u8; 3] = [0; 3];
        let pad = crate::padded_len(data.len()) - data.len();
        self.append(self.crc32c(data), &ZEROS[..pad])
    }
}

/// The reflected CRC32C polynomial (0x1EDC6F41 bit-reversed).
const POLY_REFLECTED: u32 = 0x82f6_3b78;

/// Slicing-by-8 tables: `TABLES[0]` is the classic byte-at-a-time table,
/// `TABLES[k][b]` the CRC of byte `b` followed by `k` zero bytes. Computed
/// at compile time; immutable data, not state.
static TABLES: [[u32; 256]; 8] = software_tables();

const fn software_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut crc = b as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][b] = crc;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// Continues a CRC32C in portable software: the same values as
/// [`crc32c_append`], eight bytes per step through [`TABLES`], the
/// unaligned head and tail a byte at a time.
pub fn crc32c_software(crc: u32, data: &[u8]) -> u32 {
    let mut crc = !crc;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let hi = u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
        crc = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xff) as usize]
            ^ TABLES[2][((hi >> 8) & 0xff) as usize]
            ^ TABLES[1][((hi >> 16) & 0xff) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &byte in chunks.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(byte)) & 0xff) as usize];
    }
    !crc
}

/// The length of the blocks [`crc32c_extend_page`] appends: a 4 KiB page,
/// the unit whose CRC a memory LUN keeps.
pub const PAGE_BYTES: usize = 4096;

/// `crc32c_extend_page(crc32c(a), crc32c(page)) == crc32c(a ++ page)` for
/// any `a` and any `page` of [`PAGE_BYTES`]: the CRC of data whose pages'
/// CRCs are known, without reading the data (a target sends a data digest
/// from a memory LUN's kept page CRCs this way). Four table lookups.
///
/// Appending `n` zero bytes to a CRC32C register is linear over GF(2), and
/// with initial value and final XOR both all ones, `crc(a ++ b)` is `crc(a)`
/// shifted through `len(b)` zero bytes, XOR `crc(b)` (zlib's
/// `crc32_combine`). The shift through one page is a fixed 32x32 bit
/// matrix, applied a byte of the CRC at a time through [`SHIFT_PAGE`].
pub fn crc32c_extend_page(crc: u32, page_crc: u32) -> u32 {
    SHIFT_PAGE[0][(crc & 0xff) as usize]
        ^ SHIFT_PAGE[1][((crc >> 8) & 0xff) as usize]
        ^ SHIFT_PAGE[2][((crc >> 16) & 0xff) as usize]
        ^ SHIFT_PAGE[3][(crc >> 24) as usize]
        ^ page_crc
}

/// `SHIFT_PAGE[k][b]`: byte `b` in byte `k` of a CRC register, shifted
/// through [`PAGE_BYTES`] zero bytes. Computed at compile time.
static SHIFT_PAGE: [[u32; 256]; 4] = shift_tables(PAGE_BYTES);

const fn shift_tables(zero_bytes: usize) -> [[u32; 256]; 4] {
    // Each register bit alone, shifted through the zero bytes: the
    // matrix's columns.
    let mut columns = [0u32; 32];
    let mut bit = 0;
    while bit < 32 {
        let mut reg = 1u32 << bit;
        let mut n = 0;
        while n < zero_bytes {
            reg = (reg >> 8) ^ TABLES[0][(reg & 0xff) as usize];
            n += 1;
        }
        columns[bit] = reg;
        bit += 1;
    }
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            let mut value = 0;
            let mut j = 0;
            while j < 8 {
                if b & (1 << j) != 0 {
                    value ^= columns[8 * k + j];
                }
                j += 1;
            }
            t[k][b] = value;
            b += 1;
        }
        k += 1;
    }
    t
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
    Crc32cImpl::Hardware.data_digest(data)
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

    const BOTH: [Crc32cImpl; 2] = [Crc32cImpl::Hardware, Crc32cImpl::Software];

    #[test]
    fn rfc3720_appendix_b4_vectors() {
        for (input, wire) in rfc3720_vectors() {
            let crc = crc32c(&input);
            assert_eq!(to_wire(crc), wire, "input {input:02x?}");
            assert_eq!(from_wire(wire), crc);
        }
    }

    #[test]
    fn rfc3720_appendix_b4_vectors_with_each_implementation() {
        for implementation in BOTH {
            for (input, wire) in rfc3720_vectors() {
                let crc = implementation.crc32c(&input);
                assert_eq!(to_wire(crc), wire, "{implementation:?}, input {input:02x?}");
            }
        }
        // The software path on its own, byte-at-a-time tail included.
        assert_eq!(crc32c_software(0, &[0u8; 32]), 0x8a91_36aa);
        assert_eq!(
            crc32c_software(0, b"123456789"),
            0xe306_9283,
            "the CRC-32C check value"
        );
        assert_eq!(crc32c_software(0, &[]), 0);
    }

    #[test]
    fn software_tables_start_from_the_polynomial() {
        // Byte 0x80 is bit 7 alone: one shift through the reflected polynomial.
        assert_eq!(TABLES[0][0x80], POLY_REFLECTED);
        assert_eq!(TABLES[0][0], 0);
        for (k, table) in TABLES.iter().enumerate() {
            assert_eq!(table[0], 0, "table {k}");
        }
    }

    #[test]
    fn every_implementation_gives_the_check_value() {
        for implementation in [
            Crc32cImpl::Hardware,
            Crc32cImpl::Instruction,
            Crc32cImpl::Software,
        ] {
            assert_eq!(
                implementation.crc32c(b"123456789"),
                0xe306_9283,
                "{implementation:?}"
            );
        }
        assert_eq!(crc_fast_append(0, b"123456789"), 0xe306_9283);
        assert_eq!(
            crc_fast_append(crc_fast_append(0, b"1234"), b"56789"),
            0xe306_9283
        );
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

        /// The portable implementation agrees with the crc32c crate on any
        /// input, from any starting CRC, whatever the alignment of the slice.
        #[test]
        fn software_equals_hardware(data in proptest::collection::vec(any::<u8>(), 0..5000),
                                    start: u32,
                                    skip in 0usize..8) {
            let data = &data[skip.min(data.len())..];
            prop_assert_eq!(crc32c_software(0, data), crc32c::crc32c(data));
            prop_assert_eq!(crc32c_software(start, data), crc32c::crc32c_append(start, data));
            prop_assert_eq!(Crc32cImpl::Software.crc32c(data), Crc32cImpl::Hardware.crc32c(data));
            prop_assert_eq!(Crc32cImpl::Software.data_digest(data), data_digest(data));
            prop_assert_eq!(Crc32cImpl::Instruction.append(start, data), crc32c_software(start, data));
        }

        /// The inline instruction (short data) continues a CRC as the
        /// portable code does, at every length around its 8-byte steps and
        /// its limit, from any start, at any alignment.
        #[test]
        fn short_data_equals_the_portable_crc(data in proptest::collection::vec(any::<u8>(), 0..SHORT_MAX + 24),
                                              start: u32,
                                              skip in 0usize..8) {
            let data = &data[skip.min(data.len())..];
            for len in 0..=data.len() {
                let data = &data[..len];
                prop_assert_eq!(Crc32cImpl::Hardware.append(start, data), crc32c_software(start, data));
                prop_assert_eq!(Crc32cImpl::Instruction.append(start, data), crc32c_software(start, data));
            }
        }

        /// `crc-fast` (whatever path it takes on this CPU) continues a CRC
        /// exactly as the instruction does, over lengths that reach its
        /// 512-bit folding loop and its tails, at any alignment.
        #[test]
        fn folding_equals_the_instruction(len in prop_oneof![0usize..600, 4000usize..4200, 65_000usize..70_000],
                                          seed: u64,
                                          start: u32,
                                          skip in 0usize..64) {
            let mut state = seed | 1;
            let buffer: Vec<u8> = (0..len + skip)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let data = &buffer[skip..];
            prop_assert_eq!(crc_fast_append(start, data), crc32c::crc32c_append(start, data));
            prop_assert_eq!(Crc32cImpl::Hardware.append(start, data), crc32c::crc32c_append(start, data));
            prop_assert_eq!(Crc32cImpl::Hardware.crc32c(data), crc32c::crc32c(data));
        }

        /// Pages' CRCs extend a CRC as the pages' bytes do.
        #[test]
        fn extending_by_page_crcs_equals_the_crc_of_the_pages(prefix in proptest::collection::vec(any::<u8>(), 0..100),
                                                             seed: u8,
                                                             pages in 1usize..4) {
            let data: Vec<u8> = (0..pages * PAGE_BYTES).map(|i| (i as u8).wrapping_mul(seed) ^ (i >> 8) as u8).collect();
            let folded = data
                .chunks(PAGE_BYTES)
                .fold(crc32c(&prefix), |crc, page| crc32c_extend_page(crc, crc32c(page)));
            let mut whole = prefix.clone();
            whole.extend_from_slice(&data);
            prop_assert_eq!(folded, crc32c(&whole));
        }

        #[test]
        fn wire_round_trip(crc: u32) {
            prop_assert_eq!(from_wire(to_wire(crc)), crc);
        }
    }
}
