//! `--verify`: every written block carries its LBA, a generation number and
//! a filler derived from both; reads check what they find against the
//! generation last written there.

/// Bytes 16..24 of every verified block.
const MAGIC: &[u8; 8] = b"isoe-vfy";

/// Fills `buf` (whole blocks of `block_size` bytes) for a write at `lba`
/// with generation `generation`.
pub fn fill(buf: &mut [u8], lba: u64, block_size: usize, generation: u64) {
    for (i, block) in buf.chunks_mut(block_size).enumerate() {
        let this_lba = lba + i as u64;
        block[0..8].copy_from_slice(&this_lba.to_be_bytes());
        block[8..16].copy_from_slice(&generation.to_be_bytes());
        block[16..24].copy_from_slice(MAGIC);
        let mut x = this_lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ generation | 1;
        for word in block[24..].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = x.to_le_bytes();
            word.copy_from_slice(&bytes[..word.len()]);
        }
    }
}

/// A block that is not what was written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The block's LBA.
    pub lba: u64,
    /// The generation expected.
    pub expected_generation: u64,
    /// What the block's header says (LBA, generation), or None if it is not a verified block.
    pub found: Option<(u64, u64)>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.found {
            Some((lba, g)) if lba == self.lba && g == self.expected_generation => write!(
                f,
                "LBA {}: header matches (generation {g}) but the data differs",
                self.lba
            ),
            Some((lba, g)) => write!(
                f,
                "LBA {}: expected LBA {} generation {}, found LBA {lba} generation {g}",
                self.lba, self.lba, self.expected_generation
            ),
            None => write!(
                f,
                "LBA {}: expected LBA {} generation {}, found no isoe pattern",
                self.lba, self.lba, self.expected_generation
            ),
        }
    }
}

/// Checks `buf` read from `lba` against generation `generation`; returns
/// the first block that differs.
pub fn check(
    buf: &[u8],
    lba: u64,
    block_size: usize,
    generation: u64,
    scratch: &mut Vec<u8>,
) -> Option<Mismatch> {
    scratch.resize(block_size, 0);
    for (i, block) in buf.chunks(block_size).enumerate() {
        let this_lba = lba + i as u64;
        fill(scratch, this_lba, block_size, generation);
        if block != &scratch[..block.len()] {
            let found = (block.len() >= 24 && &block[16..24] == MAGIC).then(|| {
                (
                    u64::from_be_bytes(block[0..8].try_into().expect("8 bytes")),
                    u64::from_be_bytes(block[8..16].try_into().expect("8 bytes")),
                )
            });
            return Some(Mismatch {
                lba: this_lba,
                expected_generation: generation,
                found,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_written_checks_and_a_stale_block_is_named() {
        let mut buf = vec![0u8; 4096];
        fill(&mut buf, 100, 512, 7);
        let mut scratch = Vec::new();
        assert_eq!(check(&buf, 100, 512, 7, &mut scratch), None);
        // Block 3 holds an older generation.
        let mut old = vec![0u8; 512];
        fill(&mut old, 103, 512, 6);
        buf[1536..2048].copy_from_slice(&old);
        let m = check(&buf, 100, 512, 7, &mut scratch).unwrap();
        assert_eq!(
            m,
            Mismatch {
                lba: 103,
                expected_generation: 7,
                found: Some((103, 6))
            }
        );
        assert_eq!(
            m.to_string(),
            "LBA 103: expected LBA 103 generation 7, found LBA 103 generation 6"
        );
        // Zeros are not a pattern at all.
        let m = check(&[0u8; 512], 5, 512, 1, &mut scratch).unwrap();
        assert_eq!(m.found, None);
        // A flipped data byte with a good header.
        let mut buf = vec![0u8; 512];
        fill(&mut buf, 9, 512, 2);
        buf[300] ^= 1;
        assert!(check(&buf, 9, 512, 2, &mut scratch)
            .unwrap()
            .to_string()
            .contains("data differs"));
    }
}
