//! Application workloads: what seed 003 measured beside Iometer, a
//! database's transactions and a mail server's database, run on a file
//! system on the block device each initiator makes.
//!
//! - **OLTP**: PostgreSQL's pgbench, the TPC-B-like mix or select-only,
//!   its database made on the file system for each case (`initdb`, `pgbench
//!   -i -s SCALE`), the server held in a memory cgroup so that the data set
//!   exceeds what the database and the page cache may keep (its reads reach
//!   the device), fsync on.
//! - **Mail**: fio with [`crate::mail::MailProfile`]: 32 KiB random database
//!   reads and writes beside 8 KiB synchronous log writes, O_DIRECT.
//!
//! This module holds what the plan says ([`Application`], [`Filesystem`]),
//! the shell that prepares and removes a case's file system and database on
//! the initiator host, and the reading of a run's results: pgbench's
//! per-transaction log and the block layer's trace of the application's
//! I/O ([`BlockTrace`]: blktrace's issue and complete events).

pub use crate::knobs::Filesystem;
use crate::mail::{MailProfile, MailResult};
use crate::pgbench::TransactionLog;
use crate::record::RunResult;
pub use crate::record::{
    ApplicationFigures, ApplicationResult, Breakdown, HostSeconds, KindFigures, MailFigures,
    OltpFigures, Parts, TransactionLatency,
};
use crate::sampled::{sampled_result, Rates, Sample};
use crate::shape::WorkloadShape;
use isoe_bench::latency::LatencyRecorder;
use isoe_bench::{DirectionResult, LatencyHistograms};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// pgbench's built-in scripts the plan may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OltpMix {
    /// TPC-B-like: three updates, a select and an insert per transaction.
    TpcbLike,
    /// One select by primary key per transaction.
    SelectOnly,
}

impl OltpMix {
    /// Both, in plan order.
    pub const ALL: [OltpMix; 2] = [OltpMix::TpcbLike, OltpMix::SelectOnly];

    /// pgbench's name for it (`-b NAME`), also the plan's.
    pub fn as_str(self) -> &'static str {
        match self {
            OltpMix::TpcbLike => "tpcb-like",
            OltpMix::SelectOnly => "select-only",
        }
    }
}

/// An OLTP workload: pgbench on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oltp {
    /// The transaction mix.
    pub mix: OltpMix,
    /// pgbench's scale factor: 100,000 accounts (about 16 MB) per unit.
    pub scale: u32,
    /// Client connections.
    pub clients: u32,
    /// The memory cgroup limit of the database server, bytes: its shared
    /// buffers and the page cache it fills, which the data set must exceed.
    pub memory_bytes: u64,
}

/// The database's shared buffers: small, so that the cgroup's limit, not
/// PostgreSQL's cache, decides what stays in memory.
pub const SHARED_BUFFERS: &str = "16MB";

/// Bytes a pgbench scale unit takes on disk, tables and indexes (PostgreSQL
/// 15: 100,000 accounts rows with their index, about 15 MiB, measured).
pub const BYTES_PER_SCALE: u64 = 15 << 20;

/// A mail server's database: fio with a Jetstress-like profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mail {
    /// The database file, bytes.
    pub database_bytes: u64,
    /// The log file, bytes.
    pub log_bytes: u64,
    /// Database I/Os in flight.
    pub threads: u32,
}

/// An application a workload runs instead of a synthetic profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Application {
    /// pgbench on PostgreSQL.
    Oltp(Oltp),
    /// fio's mail database profile.
    Mail(Mail),
}

impl Application {
    /// "oltp" or "mail".
    pub fn kind(&self) -> &'static str {
        match self {
            Application::Oltp(_) => "oltp",
            Application::Mail(_) => "mail",
        }
    }

    /// The block I/O it mostly makes, for tables that show a workload's
    /// shape: PostgreSQL's 8 KiB pages (all reads for select-only, about
    /// two thirds for TPC-B), the mail database's 32 KiB pages; as deep as
    /// its clients or threads.
    pub fn nominal_shape(&self) -> WorkloadShape {
        match self {
            Application::Oltp(o) => WorkloadShape {
                block_size_bytes: 8192,
                read_pct: match o.mix {
                    OltpMix::TpcbLike => 67,
                    OltpMix::SelectOnly => 100,
                },
                random_pct: 100,
                queue_depth: o.clients,
                workers: 1,
            },
            Application::Mail(m) => {
                let p = self.mail_profile(0, 0).expect("mail");
                WorkloadShape {
                    block_size_bytes: p.db_block_bytes,
                    read_pct: p.read_pct,
                    random_pct: 100,
                    queue_depth: m.threads,
                    workers: 1,
                }
            }
        }
    }

    /// The fio profile of a mail workload run for `duration_s` after
    /// `ramp_s`; None for OLTP.
    pub fn mail_profile(&self, duration_s: u64, ramp_s: u64) -> Option<MailProfile> {
        let Application::Mail(m) = self else {
            return None;
        };
        Some(MailProfile {
            db_bytes: m.database_bytes,
            log_bytes: m.log_bytes,
            threads: m.threads,
            duration_s,
            ramp_s,
            ..MailProfile::default()
        })
    }

    /// Bytes it puts on the file system (the data set), for checking it
    /// against the LUN.
    pub fn data_bytes(&self) -> u64 {
        match self {
            // Tables and indexes, and the write-ahead log up to max_wal_size.
            Application::Oltp(o) => u64::from(o.scale) * BYTES_PER_SCALE + (MAX_WAL_MB << 20),
            Application::Mail(m) => m.database_bytes + m.log_bytes,
        }
    }

    /// A line for people: "pgbench tpcb-like, scale 10, 4 clients".
    pub fn describe(&self) -> String {
        match self {
            Application::Oltp(o) => format!(
                "pgbench {}, scale {}, {} clients, server limited to {} MiB",
                o.mix.as_str(),
                o.scale,
                o.clients,
                o.memory_bytes >> 20
            ),
            Application::Mail(m) => format!(
                "fio mail database: {} MiB database, {} MiB log, {} threads",
                m.database_bytes >> 20,
                m.log_bytes >> 20,
                m.threads
            ),
        }
    }
}

/// PostgreSQL's `max_wal_size` in the lab's database, MB: checkpoints
/// come by size within a run as they would on a busy server.
pub const MAX_WAL_MB: u64 = 64;

/// The port PostgreSQL's socket is named after; it listens on a Unix
/// socket in the case's own directory only, so no other server is touched.
pub const PG_PORT: u16 = 5499;

/// Makes the file system `$3` on `$2` and mounts it on `$1/mnt`, `$1`
/// made readable by all first (PostgreSQL runs as its own user).
pub const MAKE_FS: &str = r#"set -eu
dir=$1 dev=$2 fs=$3
cd /
chmod 755 "$dir"
mkdir -p "$dir/mnt"
case $fs in
ext4) mkfs.ext4 -F -q -E nodiscard "$dev" ;;
xfs) mkfs.xfs -f -q -K "$dev" ;;
*) echo "unknown file system $fs" >&2; exit 2 ;;
esac
mount -o noatime "$dev" "$dir/mnt"
"#;

/// Makes the database in `$1/mnt/pgdata`, starts its server in the memory
/// cgroup `$2` (made, limited to `$3` bytes), fills it (`pgbench -i -s
/// $4`), and prints PostgreSQL's program directory.
pub const MAKE_DATABASE: &str = r#"set -eu
dir=$1 cg=$2 mem=$3 scale=$4
cd /
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "PostgreSQL's server (initdb) is not installed" >&2; exit 3; }
grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null ||
    { echo "no cgroup v2 memory controller at /sys/fs/cgroup" >&2; exit 3; }
data=$dir/mnt/pgdata sock=$dir/pgsock
mkdir -p "$data" "$sock"
chown postgres: "$data" "$sock"
chmod 700 "$data"
runuser -u postgres -- "$bin/initdb" -D "$data" -A trust -U postgres -N >/dev/null
mkdir -p "$cg"
echo "$mem" > "$cg/memory.max"
opts="-c shared_buffers=SHARED_BUFFERS -c listen_addresses= -c unix_socket_directories=$sock -c port=PG_PORT -c max_wal_size=MAX_WALMB -c min_wal_size=32MB -c fsync=on"
sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
    runuser -u postgres -- "$bin/pg_ctl" -D "$data" -l "$sock/server.log" -w -t 300 -o "$opts" start >/dev/null
"$bin/pgbench" -h "$sock" -p PG_PORT -U postgres -i -s "$scale" -q postgres >/dev/null
echo "$bin"
"#;

/// Stops what [`MAKE_DATABASE`] started and removes what [`MAKE_FS`] and
/// it made: `$1` the directory (removed too), `$2` the cgroup. Safe to run
/// when any part was never made; says on stderr what it could not undo,
/// and fails then.
pub const CLEANUP: &str = r#"dir=$1 cg=$2
cd /
bad=0
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -f "$dir/mnt/pgdata/postmaster.pid" ]; then
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/mnt/pgdata" -w -t 60 -m fast stop >/dev/null ||
        { echo "stopping PostgreSQL in $dir/mnt/pgdata failed" >&2; bad=1; }
fi
if mountpoint -q "$dir/mnt"; then
    umount "$dir/mnt" || { echo "unmounting $dir/mnt failed" >&2; bad=1; }
fi
if [ -d "$cg" ]; then
    rmdir "$cg" || { echo "removing the cgroup $cg failed" >&2; bad=1; }
fi
[ $bad = 0 ] && rm -rf "$dir"
exit $bad
"#;

/// [`MAKE_DATABASE`] with its constants filled in.
pub fn make_database_script() -> String {
    MAKE_DATABASE
        .replace("SHARED_BUFFERS", SHARED_BUFFERS)
        .replace("PG_PORT", &PG_PORT.to_string())
        .replace("MAX_WAL", &MAX_WAL_MB.to_string())
}

/// What goes before a pgbench run, outside its window, one statement per
/// transaction (VACUUM cannot run inside one): the TPC-B mix's own upkeep
/// (as pgbench does it unless `-n`: vacuum the small tables, empty the
/// history) and a checkpoint, so that no run inherits the last one's
/// dirty pages.
pub fn before_oltp_run(mix: OltpMix) -> &'static [&'static str] {
    match mix {
        OltpMix::TpcbLike => &[
            "VACUUM pgbench_branches",
            "VACUUM pgbench_tellers",
            "TRUNCATE pgbench_history",
            "CHECKPOINT",
        ],
        OltpMix::SelectOnly => &["CHECKPOINT"],
    }
}

/// The block layer's view of the application's I/O: each request's time
/// from issue to the driver (blktrace's D) to its completion (C), by
/// direction.
#[derive(Debug, Clone, Default)]
pub struct BlockTrace {
    /// Reads.
    pub read: Direction,
    /// Writes (flushes without data are not counted).
    pub write: Direction,
}

/// One direction's requests in a [`BlockTrace`].
#[derive(Debug, Clone, Default)]
pub struct Direction {
    /// Issue to completion.
    pub latency: LatencyRecorder,
    /// Bytes completed.
    pub bytes: u64,
}

impl Direction {
    /// Requests completed.
    pub fn count(&self) -> u64 {
        self.latency.count()
    }

    /// Mean bytes per request (0 with none).
    pub fn mean_bytes(&self) -> u64 {
        self.bytes.checked_div(self.count()).unwrap_or(0)
    }
}

/// blkparse's format for [`BlockTrace::parse`]: action, RWBS, sector,
/// sectors, seconds.nanoseconds since the trace began.
pub const BLKPARSE_FORMAT: &str = "%a %d %S %n %T.%9t\\n";

impl BlockTrace {
    /// Reads blkparse's output in [`BLKPARSE_FORMAT`], counting requests
    /// that complete within `[from_s, to_s]` of the trace. A completion
    /// whose issue is not in the trace (issued before it began) is left
    /// out; lines of other actions and blkparse's summary are ignored.
    pub fn parse(text: &str, from_s: f64, to_s: f64) -> BlockTrace {
        let mut issued: HashMap<(bool, u64), f64> = HashMap::new();
        let mut trace = BlockTrace::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let [action, rwbs, sector, sectors, at] = f[..] else {
                continue;
            };
            let (Ok(sector), Ok(sectors), Ok(at)) = (
                sector.parse::<u64>(),
                sectors.parse::<u64>(),
                at.parse::<f64>(),
            ) else {
                continue;
            };
            let write = rwbs.contains('W');
            if !(write || rwbs.contains('R')) || sectors == 0 {
                continue;
            }
            match action {
                "D" => {
                    issued.insert((write, sector), at);
                }
                "C" => {
                    let Some(start) = issued.remove(&(write, sector)) else {
                        continue;
                    };
                    if at < from_s || at > to_s || at < start {
                        continue;
                    }
                    let d = if write {
                        &mut trace.write
                    } else {
                        &mut trace.read
                    };
                    d.latency.record_ns(((at - start) * 1e9).round() as u64);
                    d.bytes += sectors * 512;
                }
                _ => {}
            }
        }
        trace
    }
}

/// What the application itself reported for a run's window.
#[derive(Debug, Clone)]
pub enum Figures {
    /// pgbench's per-transaction log over the window.
    Oltp {
        /// Transactions completed per second of the window.
        tps: f64,
        /// Their latencies.
        log: TransactionLog,
    },
    /// fio's mail database jobs.
    Mail(MailResult),
}

/// A command's mean time in each place the lab measures, per direction,
/// µs: what [`isoe_report::components::Measured`] is made of.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartsMeasured {
    /// The raw TCP request/response of the direction's mean sizes.
    pub network_us: Option<f64>,
    /// The target's stages (receipt to store, store, store to sent), when
    /// the target records them.
    pub stages_us: Option<[f64; 3]>,
}

/// An application run before its CPU is sampled: the block layer's view of
/// its I/O as an `isoe bench` result's rates, what the application reports
/// of itself and the latency by component, and the initiator.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplicationRun {
    /// The block I/O: `read`, `write`, `lat_us`; `iops` is the block
    /// rate (for mail, the database's transactional IOPS, its metric).
    pub rates: Rates,
    /// The initiator, for people.
    pub initiator: String,
    /// The rest of its result.
    pub figures: ApplicationResult,
}

impl ApplicationRun {
    /// The run of `app` on `fs` through `initiator`: its `figures`, the
    /// block `trace` over a window of `window_s`, and the `parts` measured
    /// of each direction.
    pub fn new(
        app: &Application,
        fs: Filesystem,
        initiator: &str,
        figures: &Figures,
        trace: &BlockTrace,
        window_s: f64,
        parts: [PartsMeasured; 2],
    ) -> ApplicationRun {
        let per_s = |n: f64| if window_s > 0.0 { n / window_s } else { 0.0 };
        let direction = |d: &Direction| DirectionResult {
            ios: d.count(),
            bytes: d.bytes,
            iops: per_s(d.count() as f64),
            mb_per_s: per_s(d.bytes as f64) / 1e6,
            lat_us: d.latency.summary(),
        };
        let mut both = trace.read.latency.clone();
        both.merge(&trace.write.latency);
        let block_iops = per_s((trace.read.count() + trace.write.count()) as f64);
        let mb_per_s = per_s((trace.read.bytes + trace.write.bytes) as f64) / 1e6;
        let breakdown = |d: &Direction, p: &PartsMeasured| {
            (d.count() > 0).then(|| {
                let stage = |i: usize| p.stages_us.map(|s| s[i]);
                Parts {
                    initiator_us: d.latency.summary().mean_us,
                    network_us: p.network_us,
                    receipt_to_store_us: stage(0),
                    store_us: stage(1),
                    store_to_sent_us: stage(2),
                }
            })
        };
        let (iops, tps, errors, kind) = match (figures, app) {
            (Figures::Oltp { tps, log }, Application::Oltp(o)) => {
                let oltp = oltp_figures(o, *tps, log);
                (
                    block_iops,
                    Some(*tps),
                    log.failed,
                    Some(KindFigures::Oltp(oltp)),
                )
            }
            (Figures::Mail(m), _) => {
                let mail = mail_figures(app, m);
                (
                    m.transactional_iops,
                    None,
                    m.errors,
                    Some(KindFigures::Mail(mail)),
                )
            }
            (Figures::Oltp { .. }, Application::Mail(_)) => (block_iops, None, 0, None),
        };
        ApplicationRun {
            rates: Rates {
                iops,
                mb_per_s,
                lat_us: both.summary(),
                read: direction(&trace.read),
                write: direction(&trace.write),
                elapsed_s: window_s,
                errors,
            },
            initiator: initiator.to_owned(),
            figures: ApplicationResult {
                tps,
                block_iops,
                application: ApplicationFigures {
                    kind: app.kind(),
                    filesystem: fs.as_str(),
                    description: app.describe(),
                    figures: kind,
                    processor_time_pct: None,
                    seconds: None,
                },
                lat_hist: LatencyHistograms {
                    read: trace.read.latency.buckets(),
                    write: trace.write.latency.buckets(),
                },
                breakdown: Breakdown {
                    read: breakdown(&trace.read, &parts[0]),
                    write: breakdown(&trace.write, &parts[1]),
                },
            },
        }
    }

    /// The run's result, with the CPU and TCP figures of the initiator
    /// host's samples ([`sampled_result`]; the target's when
    /// `target_pid` is sampled there too) and what needs them: the
    /// processor time (the initiator host's busy %, Jetstress's figure)
    /// and, for OLTP, CPU-µs per transaction.
    ///
    /// `tools_cpu_s`, the measurement's own programs' CPU-seconds on the
    /// host over the window (blktrace), is left out of the host's figures
    /// ([`RunResult::less_tools`]); `seconds`, the host second by second,
    /// adds the processor time's least and most and the memory used.
    pub fn result(
        self,
        first: &Sample,
        last: &Sample,
        target_pid: Option<u32>,
        tools_cpu_s: f64,
        seconds: Option<HostSeconds>,
    ) -> RunResult {
        let mut result = sampled_result(self.rates, first, last, target_pid);
        result.less_tools(tools_cpu_s);
        let mut figures = self.figures;
        let busy_s = result.host_busy_cpu_s();
        let elapsed_s = result.bench.cpu.elapsed_cpu_s;
        let per_transaction = match (result.lab.cpu_window_s, figures.tps) {
            (Some(window_s), Some(tps)) if window_s > 0.0 && tps > 0.0 => {
                Some(busy_s / window_s / tps * 1e6)
            }
            _ => None,
        };
        figures.application.processor_time_pct = Some(if elapsed_s > 0.0 {
            busy_s / elapsed_s * 100.0
        } else {
            0.0
        });
        figures.application.seconds = seconds;
        if let Some(KindFigures::Oltp(o)) = &mut figures.application.figures {
            o.cpu_us_per_transaction = per_transaction;
        }
        result.lab.initiator = Some(self.initiator);
        result.lab.application = Some(figures);
        result
    }
}

/// An OLTP run's figures: pgbench's rate and its transactions' latency.
fn oltp_figures(o: &Oltp, tps: f64, log: &TransactionLog) -> OltpFigures {
    let l = log.summary();
    let ms = |us: f64| us / 1000.0;
    OltpFigures {
        mix: o.mix.as_str(),
        scale: o.scale,
        clients: o.clients,
        tps,
        transactions: l.count,
        failed: log.failed,
        latency_ms: TransactionLatency {
            min: ms(l.min_us),
            mean: ms(l.mean_us),
            p50: ms(l.p50_us),
            p99: ms(l.p99_us),
            p999: ms(l.p999_us),
            max: ms(l.max_us),
        },
        cpu_us_per_transaction: None,
    }
}

/// A mail run's figures under Jetstress's names, with the profile it ran.
fn mail_figures(app: &Application, m: &MailResult) -> MailFigures {
    let p = app.mail_profile(0, 0).unwrap_or_default();
    MailFigures {
        db_block_bytes: p.db_block_bytes,
        read_pct: p.read_pct,
        log_block_bytes: p.log_block_bytes,
        threads: p.threads,
        transactional_iops: m.transactional_iops,
        db_reads_per_s: m.db_reads_per_s,
        db_writes_per_s: m.db_writes_per_s,
        db_read_avg_ms: m.db_read_avg_ms,
        db_write_avg_ms: m.db_write_avg_ms,
        log_writes_per_s: m.log_writes_per_s,
        log_write_avg_ms: m.log_write_avg_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_pairs_issue_and_completion_by_direction_and_sector() {
        let text = "\
D R 1000 16 0.100000000
D W 1000 8 0.100500000
D WS 2000 8 0.200000000
C W 1000 8 0.101500000
C R 1000 16 0.100200000
C WS 2000 8 0.203000000
D FN 0 0 0.300000000
C FN 0 0 0.300100000
C R 5000 8 0.400000000
D R 6000 8 1.900000000
C R 6000 8 2.100000000
CPU0 (sdb):
 Reads Queued: 0
";
        let t = BlockTrace::parse(text, 0.0, 2.0);
        assert_eq!(
            t.read.count(),
            1,
            "5000 was issued before the trace, 6000 ends after the window"
        );
        assert_eq!(t.read.bytes, 16 * 512);
        assert_eq!(t.read.latency.summary().mean_us.round(), 200.0);
        assert_eq!(t.write.count(), 2);
        assert_eq!(t.write.mean_bytes(), 4096);
        assert_eq!(t.write.latency.summary().mean_us.round(), 2000.0);
        let later = BlockTrace::parse(text, 0.15, 2.5);
        assert_eq!(later.read.count(), 1, "only 6000 completes in the window");
        assert_eq!(later.write.count(), 1);
    }

    #[test]
    fn the_scripts_have_their_constants_and_shapes_follow_the_application() {
        let s = make_database_script();
        assert!(s.contains("shared_buffers=16MB") && s.contains("port=5499"));
        assert!(s.contains("max_wal_size=64MB"), "{s}");
        assert!(!s.contains("PG_PORT") && !s.contains("SHARED_BUFFERS"));
        let select = Application::Oltp(Oltp {
            mix: OltpMix::SelectOnly,
            scale: 10,
            clients: 4,
            memory_bytes: 160 << 20,
        });
        assert_eq!(select.nominal_shape().read_pct, 100);
        assert_eq!(select.nominal_shape().queue_depth, 4);
        assert_eq!(select.data_bytes(), 10 * BYTES_PER_SCALE + (64 << 20));
        let mail = Application::Mail(Mail {
            database_bytes: 256 << 20,
            log_bytes: 32 << 20,
            threads: 16,
        });
        assert_eq!(mail.nominal_shape().block_size_bytes, 32 << 10);
        assert_eq!(mail.nominal_shape().queue_depth, 16);
        let p = mail.mail_profile(10, 2).unwrap();
        assert_eq!((p.db_bytes, p.threads, p.duration_s), (256 << 20, 16, 10));
        assert!(select.mail_profile(1, 1).is_none());
    }
}
