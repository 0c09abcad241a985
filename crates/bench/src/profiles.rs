//! The named workloads of METHODOLOGY.md, taken from the seed evaluations.
//!
//! `queue_depth` is the number of commands each worker keeps outstanding
//! (Iometer's "# of outstanding I/Os" per worker, vdbench's `threads=` per
//! storage definition). Block sizes are in bytes; the seeds' "KB" is KiB.

use std::fmt::Write as _;

const KIB: u32 = 1024;

/// One named workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The name `isoe bench --profile` takes.
    pub name: &'static str,
    /// The seed evaluation it comes from ("000" ... "004").
    pub seed: &'static str,
    /// Bytes per command.
    pub block_size_bytes: u32,
    /// Percent of commands that are reads; the rest are writes.
    pub read_pct: u8,
    /// Percent of commands at a random offset; the rest continue sequentially.
    pub random_pct: u8,
    /// Commands each worker keeps outstanding.
    pub queue_depth: u32,
    /// Worker threads.
    pub workers: u32,
    /// The seed reported this workload in MB/s (true) rather than IOPS.
    pub large_block: bool,
    /// Where it comes from and what it stands for.
    pub description: &'static str,
}

/// Seed 001 (vdbench, Appendix C): `threads=5` on each of 8 volumes.
const SEED_001_QUEUE_DEPTH: u32 = 5;
/// Seed 000: "outstanding is 8".
const SEED_000_QUEUE_DEPTH: u32 = 8;
/// Seed 004 does not state its outstanding-I/O count; isoe uses 16.
const SEED_004_QUEUE_DEPTH: u32 = 16;

const fn seed_001(
    name: &'static str,
    block_size_bytes: u32,
    read_pct: u8,
    random_pct: u8,
    description: &'static str,
) -> Profile {
    Profile {
        name,
        seed: "001",
        block_size_bytes,
        read_pct,
        random_pct,
        queue_depth: SEED_001_QUEUE_DEPTH,
        workers: 1,
        // Seed 001 §3.2: IOPS for 8K random, throughput for 256K sequential.
        large_block: random_pct == 0,
        description,
    }
}

const fn seed_000(name: &'static str, read_pct: u8, description: &'static str) -> Profile {
    Profile {
        name,
        seed: "000",
        block_size_bytes: 256 * KIB,
        read_pct,
        random_pct: 0,
        queue_depth: SEED_000_QUEUE_DEPTH,
        workers: 1,
        large_block: true,
        description,
    }
}

const fn seed_004(
    name: &'static str,
    block_kib: u32,
    read_pct: u8,
    random_pct: u8,
    large_block: bool,
    description: &'static str,
) -> Profile {
    Profile {
        name,
        seed: "004",
        block_size_bytes: block_kib * KIB,
        read_pct,
        random_pct,
        queue_depth: SEED_004_QUEUE_DEPTH,
        workers: 1,
        large_block,
        description,
    }
}

static PROFILES: [Profile; 17] = [
    // Seed 001 drove 8 volumes with 5 threads each: give 8 URLs for its shape.
    seed_001(
        "oltp-8k",
        8 * KIB,
        67,
        100,
        "vdbench 8 KB random, 67% read; seed ran 8 volumes x 5 threads (give 8 URLs)",
    ),
    seed_001(
        "seq-read-256k",
        256 * KIB,
        100,
        0,
        "vdbench 256 KB sequential read; seed ran 8 volumes x 5 threads (give 8 URLs)",
    ),
    seed_001(
        "seq-write-256k",
        256 * KIB,
        0,
        0,
        "vdbench 256 KB sequential write; seed ran 8 volumes x 5 threads (give 8 URLs)",
    ),
    seed_000(
        "iometer-seq-read-256k",
        100,
        "Iometer 256 KB 100% sequential read, 8 outstanding; headline MB/s per CPU%",
    ),
    seed_000(
        "iometer-seq-write-256k",
        0,
        "Iometer 256 KB 100% sequential write, 8 outstanding; headline MB/s per CPU%",
    ),
    seed_004(
        "web-file-server-4k",
        4,
        95,
        75,
        false,
        "Iometer access spec Web file server 4K",
    ),
    seed_004(
        "web-file-server-8k",
        8,
        95,
        75,
        false,
        "Iometer access spec Web file server 8K",
    ),
    seed_004(
        "web-file-server-64k",
        64,
        95,
        75,
        false,
        "Iometer access spec Web file server 64K",
    ),
    seed_004(
        "dss-1m",
        1024,
        100,
        100,
        true,
        "Iometer access spec DSS (decision support), 1 MB",
    ),
    seed_004(
        "media-streaming-64k",
        64,
        98,
        0,
        false,
        "Iometer access spec Media streaming 64K",
    ),
    seed_004(
        "sql-server-log-64k",
        64,
        0,
        0,
        false,
        "Iometer access spec SQL Server log 64K",
    ),
    seed_004(
        "os-paging-64k",
        64,
        90,
        0,
        false,
        "Iometer access spec OS paging 64K",
    ),
    seed_004(
        "web-server-log-8k",
        8,
        0,
        0,
        false,
        "Iometer access spec Web server log 8K",
    ),
    seed_004(
        "db-oltp-8k",
        8,
        70,
        100,
        false,
        "Iometer access spec DB-OLTP 8K",
    ),
    seed_004(
        "exchange-email-4k",
        4,
        67,
        100,
        false,
        "Iometer access spec Exchange email 4K",
    ),
    seed_004(
        "os-drive-8k",
        8,
        70,
        100,
        false,
        "Iometer access spec OS drive 8K",
    ),
    seed_004(
        "video-on-demand-512k",
        512,
        100,
        100,
        true,
        "Iometer access spec Video on Demand 512K",
    ),
];

/// Every named workload, in METHODOLOGY.md's order (seed 001, 000, 004).
pub fn profiles() -> &'static [Profile] {
    &PROFILES
}

/// The profile called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// One cell of seed 003's workers × queue depth matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixCell {
    /// Worker threads.
    pub workers: u32,
    /// Commands each worker keeps outstanding.
    pub queue_depth: u32,
    /// 100 for the read half of the matrix, 0 for the write half.
    pub read_pct: u8,
    /// Bytes per command.
    pub block_size_bytes: u32,
    /// Percent of commands at a random offset.
    pub random_pct: u8,
}

impl MatrixCell {
    /// A name for reports, e.g. `matrix-read-4k-w2-qd16`.
    pub fn name(&self) -> String {
        let op = match self.read_pct {
            100 => "read".to_string(),
            0 => "write".to_string(),
            pct => format!("read{pct}"),
        };
        let block = block_label(self.block_size_bytes)
            .replace(" KiB", "k")
            .replace(" MiB", "m")
            .replace(" B", "b");
        format!(
            "matrix-{op}-{block}-w{}-qd{}",
            self.workers, self.queue_depth
        )
    }
}

/// Seed 003's worker counts.
pub const MATRIX_WORKERS: [u32; 4] = [1, 2, 4, 8];
/// Seed 003's queue depths.
pub const MATRIX_QUEUE_DEPTHS: [u32; 4] = [1, 4, 16, 32];
/// Block size of [`matrix`]. Seed 003 ran "various combinations of block
/// sizes" without naming them; isoe uses 4 KiB, where per-command CPU cost —
/// what offload changes — dominates.
pub const MATRIX_BLOCK_SIZE_BYTES: u32 = 4 * KIB;
/// Random share of [`matrix`]: seed 003 does not say; isoe uses 100%.
pub const MATRIX_RANDOM_PCT: u8 = 100;

/// Seed 003's matrix at 4 KiB random: workers {1, 2, 4, 8} × QD {1, 4, 16,
/// 32}, reads (all 16 cells) then writes.
pub fn matrix() -> Vec<MatrixCell> {
    matrix_with_block_size(MATRIX_BLOCK_SIZE_BYTES)
}

/// Seed 003's matrix at another block size.
pub fn matrix_with_block_size(block_size_bytes: u32) -> Vec<MatrixCell> {
    let mut cells = Vec::with_capacity(2 * MATRIX_WORKERS.len() * MATRIX_QUEUE_DEPTHS.len());
    for read_pct in [100u8, 0] {
        for workers in MATRIX_WORKERS {
            for queue_depth in MATRIX_QUEUE_DEPTHS {
                cells.push(MatrixCell {
                    workers,
                    queue_depth,
                    read_pct,
                    block_size_bytes,
                    random_pct: MATRIX_RANDOM_PCT,
                });
            }
        }
    }
    cells
}

/// `8 KiB`, `256 KiB`, `1 MiB`, or bytes when not a whole KiB.
pub fn block_label(block_size_bytes: u32) -> String {
    const MIB: u32 = 1024 * KIB;
    if block_size_bytes >= MIB && block_size_bytes.is_multiple_of(MIB) {
        format!("{} MiB", block_size_bytes / MIB)
    } else if block_size_bytes >= KIB && block_size_bytes.is_multiple_of(KIB) {
        format!("{} KiB", block_size_bytes / KIB)
    } else {
        format!("{block_size_bytes} B")
    }
}

/// The table `isoe bench --list-profiles` prints.
pub fn list_text() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>4} {:>8} {:>5} {:>7} {:>3} {:>7}  {:<6} description",
        "name", "seed", "block", "read%", "random%", "QD", "workers", "report"
    );
    for p in profiles() {
        let _ = writeln!(
            out,
            "{:<24} {:>4} {:>8} {:>5} {:>7} {:>3} {:>7}  {:<6} {}",
            p.name,
            p.seed,
            block_label(p.block_size_bytes),
            p.read_pct,
            p.random_pct,
            p.queue_depth,
            p.workers,
            if p.large_block { "MB/s" } else { "IOPS" },
            p.description
        );
    }
    let _ = writeln!(
        out,
        "seed 003 matrix: workers {:?} x QD {:?}, read and write, {} {}% random",
        MATRIX_WORKERS,
        MATRIX_QUEUE_DEPTHS,
        block_label(MATRIX_BLOCK_SIZE_BYTES),
        MATRIX_RANDOM_PCT
    );
    let _ = writeln!(
        out,
        "QD = commands outstanding per worker; block sizes in KiB = 1024 bytes"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methodology_names_are_all_there() {
        let names = [
            "oltp-8k",
            "seq-read-256k",
            "seq-write-256k",
            "iometer-seq-read-256k",
            "iometer-seq-write-256k",
            "web-file-server-4k",
            "web-file-server-8k",
            "web-file-server-64k",
            "dss-1m",
            "media-streaming-64k",
            "sql-server-log-64k",
            "os-paging-64k",
            "web-server-log-8k",
            "db-oltp-8k",
            "exchange-email-4k",
            "os-drive-8k",
            "video-on-demand-512k",
        ];
        assert_eq!(profiles().len(), names.len());
        for name in names {
            assert_eq!(find(name).map(|p| p.name), Some(name), "{name}");
        }
        assert!(find("nope").is_none());
    }

    #[test]
    fn seed_004_access_specifications() {
        // (name, KiB, read %, random %) from METHODOLOGY.md's table.
        let table: [(&str, u32, u8, u8); 12] = [
            ("web-file-server-4k", 4, 95, 75),
            ("web-file-server-8k", 8, 95, 75),
            ("web-file-server-64k", 64, 95, 75),
            ("dss-1m", 1024, 100, 100),
            ("media-streaming-64k", 64, 98, 0),
            ("sql-server-log-64k", 64, 0, 0),
            ("os-paging-64k", 64, 90, 0),
            ("web-server-log-8k", 8, 0, 0),
            ("db-oltp-8k", 8, 70, 100),
            ("exchange-email-4k", 4, 67, 100),
            ("os-drive-8k", 8, 70, 100),
            ("video-on-demand-512k", 512, 100, 100),
        ];
        for (name, kib, read, random) in table {
            let p = find(name).unwrap();
            assert_eq!(
                (
                    p.seed,
                    p.block_size_bytes,
                    p.read_pct,
                    p.random_pct,
                    p.queue_depth
                ),
                ("004", kib * 1024, read, random, 16),
                "{name}"
            );
            let large = name == "dss-1m" || name == "video-on-demand-512k";
            assert_eq!(p.large_block, large, "{name}");
        }
    }

    #[test]
    fn seed_001_and_000_shapes() {
        let oltp = find("oltp-8k").unwrap();
        assert_eq!(
            (
                oltp.block_size_bytes,
                oltp.read_pct,
                oltp.random_pct,
                oltp.queue_depth
            ),
            (8192, 67, 100, 5)
        );
        assert!(!oltp.large_block);
        let w = find("seq-write-256k").unwrap();
        assert_eq!(
            (w.block_size_bytes, w.read_pct, w.random_pct),
            (262144, 0, 0)
        );
        assert!(w.large_block);
        let r = find("iometer-seq-read-256k").unwrap();
        assert_eq!(
            (
                r.seed,
                r.block_size_bytes,
                r.read_pct,
                r.random_pct,
                r.queue_depth
            ),
            ("000", 262144, 100, 0, 8)
        );
    }

    #[test]
    fn every_profile_is_sane() {
        for p in profiles() {
            assert!(
                p.block_size_bytes % 512 == 0 && p.block_size_bytes > 0,
                "{}",
                p.name
            );
            assert!(p.read_pct <= 100 && p.random_pct <= 100, "{}", p.name);
            assert!(p.queue_depth >= 1 && p.workers >= 1, "{}", p.name);
            assert!(!p.description.is_empty());
        }
    }

    #[test]
    fn matrix_is_4_by_4_by_read_and_write() {
        let m = matrix();
        assert_eq!(m.len(), 32);
        assert_eq!(
            m[0],
            MatrixCell {
                workers: 1,
                queue_depth: 1,
                read_pct: 100,
                block_size_bytes: 4096,
                random_pct: 100
            }
        );
        assert_eq!(
            (m[15].workers, m[15].queue_depth, m[15].read_pct),
            (8, 32, 100)
        );
        assert_eq!(
            (m[16].workers, m[16].queue_depth, m[16].read_pct),
            (1, 1, 0)
        );
        assert_eq!(m[6].name(), "matrix-read-4k-w2-qd16");
        assert_eq!(m[31].name(), "matrix-write-4k-w8-qd32");
        assert_eq!(
            matrix_with_block_size(1 << 20)[0].name(),
            "matrix-read-1m-w1-qd1"
        );
    }

    #[test]
    fn block_labels() {
        assert_eq!(block_label(8192), "8 KiB");
        assert_eq!(block_label(1 << 20), "1 MiB");
        assert_eq!(block_label(1536 * 1024), "1536 KiB");
        assert_eq!(block_label(512), "512 B");
    }

    #[test]
    fn list_has_a_row_per_profile() {
        let text = list_text();
        for p in profiles() {
            let row = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(p.name))
                .unwrap_or_else(|| panic!("no row for {}", p.name));
            assert!(row.contains(&block_label(p.block_size_bytes)), "{row}");
        }
        assert!(text.starts_with("name"));
        assert!(text.contains("seed 003 matrix"));
    }
}
