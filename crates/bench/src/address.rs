//! Where the next command goes: the read/write mix and random or sequential
//! offsets, as Iometer's access specifications and vdbench's workloads define them.

/// A fast, seedable generator (xorshift64*); workloads need speed and
/// repeatability, not cryptographic quality.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `pct`/100.
    pub fn percent(&mut self, pct: u8) -> bool {
        self.below(100) < u64::from(pct)
    }
}

/// One command's place: which I/O slot of the region, and its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Index of the block-size-aligned chunk within the region.
    pub chunk: u64,
    /// A write (else a read).
    pub write: bool,
}

/// Picks accesses within a region of `chunks` I/O-sized chunks.
#[derive(Debug, Clone)]
pub struct AccessPattern {
    chunks: u64,
    read_pct: u8,
    random_pct: u8,
    cursor: u64,
    rng: Rng,
}

impl AccessPattern {
    /// A pattern over `chunks` chunks (at least 1), starting its sequential
    /// cursor at `start`.
    pub fn new(chunks: u64, read_pct: u8, random_pct: u8, start: u64, seed: u64) -> AccessPattern {
        let chunks = chunks.max(1);
        AccessPattern {
            chunks,
            read_pct,
            random_pct,
            cursor: start % chunks,
            rng: Rng::new(seed),
        }
    }

    /// The next access: random with probability random_pct, else the next
    /// chunk after the cursor (wrapping); a read with probability read_pct.
    pub fn next_access(&mut self) -> Access {
        let write = !self.rng.percent(self.read_pct);
        let chunk = if self.random_pct > 0 && self.rng.percent(self.random_pct) {
            self.rng.below(self.chunks)
        } else {
            let c = self.cursor;
            self.cursor = (self.cursor + 1) % self.chunks;
            c
        };
        Access { chunk, write }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_wraps_and_mix_follows_the_percentages() {
        let mut p = AccessPattern::new(3, 100, 0, 2, 1);
        let chunks: Vec<u64> = (0..4).map(|_| p.next_access().chunk).collect();
        assert_eq!(chunks, vec![2, 0, 1, 2]);
        let mut p = AccessPattern::new(1000, 67, 100, 0, 7);
        let n = 100_000;
        let writes = (0..n).filter(|_| p.next_access().write).count();
        // 33% writes, within 1 point on 100k draws.
        assert!((32_000..34_000).contains(&writes), "{writes}");
        let mut p = AccessPattern::new(10, 0, 100, 0, 3);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let a = p.next_access();
            assert!(a.write);
            seen[a.chunk as usize] += 1;
        }
        assert!(seen.iter().all(|&s| (800..1200).contains(&s)), "{seen:?}");
    }
}
