//! One run's result: the raw measurements in, every derived metric out, as
//! JSON (`BenchResult` is serde) and as a table for people ([`BenchResult::table`]).
//!
//! All derived arithmetic is in [`BenchResult::compute`], on top of the pure
//! functions of [`crate::demand`].
//!
//! The JSON object of a run has one field per field of [`BenchResult`],
//! named as they are, documented on each; besides the totals:
//!
//! - `interrupted`: true when SIGINT or SIGTERM cut the measured window
//!   short; every figure then covers the seconds actually measured
//!   (`elapsed_s`), and `isoe bench` exits with 128 + the signal's number;
//! - `stopped`: why the run stopped itself before its window ended (its
//!   LUN gone, or failed commands past the bound of [`crate::halt`]), or
//!   null; the figures of such a run are no measurement, and `isoe bench`
//!   exits with 1;
//! - `foreign` and `foreign_warning`: the CPU processes other than this
//!   one and the target used over the window, in % of one CPU, split as
//!   [`crate::foreign::ForeignLoad`] does (the largest named in `top`), and
//!   whether it passed the lab's limit of [`FOREIGN_MAX_PCT`];
//! - `per_url`: one [`UrlResult`] per URL, in the order given: commands,
//!   bytes, IOPS, MB/s, latency and failed commands of that URL alone (their
//!   `ios` add up to the total's);
//! - `series`: one [`SeriesPoint`] per second of the measured window (at
//!   most [`crate::series::SERIES_MAX`]): its start `t_s` and length
//!   `span_s`, IOPS and MB/s in all and per direction, failed commands, and
//!   that second's own latency summary `lat_us` (µs); their `ios` add up to
//!   the total's.
//!
//! The runner adds a few fields it alone knows (see
//! [`crate::run::RunOutcome::json`]): `initiator_syscalls_per_io`,
//! `reconnects`, `connections_per_session`, `messages`,
//! `unit_attentions_retried`, `cpu_accounted_pct` and `lat_hist`.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::cpu::CpuSplit;
use crate::demand::{
    cpu_pct_of_machine, effectiveness_mb_per_s_per_cpu_pct, iops, iops_per_cpu_pct, mb_per_s,
    service_demand_us_per_io, service_demand_us_per_kib,
};
use crate::foreign::{ForeignLoad, FOREIGN_MAX_PCT};
use crate::host::Host;
use crate::latency::{LatencyRecorder, LatencySummary};
use crate::series::{SecondMeasurements, SeriesPoint};
use crate::tcp::TcpDelta;
use crate::timestamp::rfc3339_utc;
use crate::workload::Workload;

pub use crate::table::progress_line;

/// What one direction (reads or writes) did during the measured window.
#[derive(Debug, Clone, Default)]
pub struct DirectionMeasurements {
    /// Commands that completed with GOOD status.
    pub ios: u64,
    /// Bytes those commands moved.
    pub bytes: u64,
    /// Their latencies, submit to status.
    pub latency: LatencyRecorder,
}

impl DirectionMeasurements {
    /// Adds `other`'s commands, bytes and latencies to these.
    pub fn add(&mut self, other: &DirectionMeasurements) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.latency.merge(&other.latency);
    }
}

/// What the commands to one URL did during the measured window.
#[derive(Debug, Clone, Default)]
pub struct UrlMeasurements {
    /// The URL, password removed.
    pub url: String,
    /// Reads.
    pub read: DirectionMeasurements,
    /// Writes.
    pub write: DirectionMeasurements,
    /// Commands to it that failed, over the whole run as `errors` counts.
    pub errors: u64,
}

/// The raw deltas of one measured window, as the runner collected them.
#[derive(Debug, Clone)]
pub struct Measurements {
    /// What was run.
    pub workload: Workload,
    /// Wall-clock time the measured window began (after the ramp).
    pub started_at: SystemTime,
    /// Length of the measured window, seconds.
    pub elapsed_s: f64,
    /// Reads.
    pub read: DirectionMeasurements,
    /// Writes.
    pub write: DirectionMeasurements,
    /// Commands that failed (not counted in `read.ios` / `write.ios`).
    pub errors: u64,
    /// Reads whose data did not match what was written.
    pub verify_errors: u64,
    /// System-wide CPU over the window.
    pub cpu: CpuSplit,
    /// CPU-seconds used by the initiator process over the window.
    pub initiator_cpu_s: f64,
    /// CPU-seconds used by the target process, when its PID is known.
    pub target_cpu_s: Option<f64>,
    /// The target's PID, when known.
    pub target_pid: Option<u32>,
    /// TCP counters over the window.
    pub tcp: TcpDelta,
    /// The machine.
    pub host: Host,
    /// Per URL, in the workload's order (their reads and writes add up to
    /// `read` and `write`).
    pub per_url: Vec<UrlMeasurements>,
    /// The window second by second.
    pub series: Vec<SecondMeasurements>,
    /// Whether a signal cut the window short.
    pub interrupted: bool,
    /// Why the run stopped itself (see [`crate::halt`]); None when it ran
    /// its course.
    pub stopped: Option<String>,
    /// What processes other than the initiator and the target used over
    /// the window; None when `/proc` could not be read.
    pub foreign: Option<ForeignLoad>,
}

/// One direction's share of a result.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DirectionResult {
    /// Commands completed.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Commands per second.
    pub iops: f64,
    /// MB/s, MB = 10^6 bytes.
    pub mb_per_s: f64,
    /// Latency, µs.
    pub lat_us: LatencySummary,
}

/// One URL's share of a result (`per_url`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UrlResult {
    /// The URL, password removed.
    pub url: String,
    /// Commands completed, reads and writes.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Commands per second.
    pub iops: f64,
    /// MB/s, MB = 10^6 bytes.
    pub mb_per_s: f64,
    /// Latency of its commands, µs.
    pub lat_us: LatencySummary,
    /// Its reads alone.
    pub read: DirectionResult,
    /// Its writes alone.
    pub write: DirectionResult,
    /// Its failed commands (the total `errors` also counts failures of no
    /// one URL, such as a lost connection).
    pub errors: u64,
}

/// The units every figure is in, written into every result so a reader of
/// the JSON alone knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Units {
    /// Throughput unit.
    pub throughput: String,
    /// Size unit of service demand per KiB.
    pub size: String,
    /// Latency unit.
    pub latency: String,
    /// CPU percentage base.
    pub cpu: String,
    /// Service demand unit.
    pub service_demand: String,
}

impl Default for Units {
    fn default() -> Self {
        Units {
            throughput: "MB/s, MB = 10^6 bytes".to_string(),
            size: "KiB = 1024 bytes".to_string(),
            latency: "µs (microseconds)".to_string(),
            cpu: "% of all CPUs of the host (0-100)".to_string(),
            service_demand: "CPU-µs per I/O and per KiB (busy CPU-s × 10^6 ÷ work)".to_string(),
        }
    }
}

/// The result of one run, as written to the JSON lines file.
///
/// `None` written as JSON null means unknown: no target PID was given, or
/// nothing was done to divide by.
///
/// The lab writes the results of its other load generators (fio, `isoe
/// netprobe`, applications) as this type too, with the figures they
/// measure. What `isoe bench` always knows and they do not report is an
/// `Option` that is left out of the JSON when `None` ("not reported", never
/// a made-up 0): `ios`, `bytes`, `per_url`, `interrupted`,
/// `foreign_warning`, `verify_errors`, `workload`, `units`, `started_at`,
/// `host` and `series`. `isoe bench` fills every one of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Commands per second, reads and writes.
    pub iops: f64,
    /// MB/s, reads and writes, MB = 10^6 bytes.
    pub mb_per_s: f64,
    /// Commands completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ios: Option<u64>,
    /// Bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Latency of all commands, µs.
    pub lat_us: LatencySummary,
    /// Reads alone.
    pub read: DirectionResult,
    /// Writes alone.
    pub write: DirectionResult,
    /// Each URL alone, in the order given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_url: Option<Vec<UrlResult>>,
    /// CPU-seconds used by the initiator process.
    pub initiator_cpu_s: f64,
    /// Initiator process CPU, % of all CPUs.
    pub initiator_cpu_pct: Option<f64>,
    /// Initiator CPU-µs per command.
    pub initiator_cpu_us_per_io: Option<f64>,
    /// Initiator CPU-µs per KiB moved.
    #[serde(default)]
    pub initiator_cpu_us_per_kib: Option<f64>,
    /// The target's PID, when known.
    pub target_pid: Option<u32>,
    /// CPU-seconds used by the target process.
    pub target_cpu_s: Option<f64>,
    /// Target process CPU, % of all CPUs.
    pub target_cpu_pct: Option<f64>,
    /// Target CPU-µs per command.
    pub target_cpu_us_per_io: Option<f64>,
    /// Target CPU-µs per KiB moved.
    #[serde(default)]
    pub target_cpu_us_per_kib: Option<f64>,
    /// System-wide busy CPU-µs per command (includes softirq, which no
    /// process is charged for).
    pub system_cpu_us_per_io: Option<f64>,
    /// System-wide busy CPU-µs per KiB moved.
    #[serde(default)]
    pub system_cpu_us_per_kib: Option<f64>,
    /// System-wide CPU split.
    pub cpu: CpuSplit,
    /// Stolen by a hypervisor, % of all CPUs (copied from `cpu`).
    pub steal_pct: f64,
    /// MB/s per system-wide busy CPU% (seed 000's headline). System-wide,
    /// because loopback TCP runs in softirq charged to no process.
    pub mb_per_s_per_cpu_pct: Option<f64>,
    /// IOPS per system-wide busy CPU% (Iometer's field).
    pub iops_per_cpu_pct: Option<f64>,
    /// MB/s per initiator process CPU%.
    pub initiator_mb_per_s_per_cpu_pct: Option<f64>,
    /// IOPS per initiator process CPU%.
    #[serde(default)]
    pub initiator_iops_per_cpu_pct: Option<f64>,
    /// MB/s per target process CPU%.
    pub target_mb_per_s_per_cpu_pct: Option<f64>,
    /// TCP segments sent.
    pub out_segs: u64,
    /// TCP segments retransmitted.
    pub retrans_segs: u64,
    /// retrans_segs / out_segs × 100.
    pub retrans_pct: f64,
    /// Segments carrying D-SACKs received: retransmits the peer found needless.
    pub dsack_segs: u64,
    /// Length of the measured window, seconds.
    pub elapsed_s: f64,
    /// A signal (SIGINT, SIGTERM) cut the window short: the figures cover
    /// `elapsed_s`, not the workload's duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    /// Why the run stopped itself before its window ended: its LUN is gone
    /// or its commands failed past the bound (see [`crate::halt`]). The
    /// figures then cover a run that no longer did its workload: no
    /// measurement, only what happened.
    #[serde(default)]
    pub stopped: Option<String>,
    /// The CPU that processes other than this one and the target used
    /// over the window (see [`crate::foreign`]; % of one CPU), or null
    /// when unknown.
    #[serde(default)]
    pub foreign: Option<ForeignLoad>,
    /// `foreign.cpu_pct` above [`FOREIGN_MAX_PCT`], the lab's limit: the
    /// figures may be moved by the competition for the CPUs, and the lab
    /// would repeat such a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_warning: Option<bool>,
    /// Commands that failed.
    pub errors: u64,
    /// Reads whose data did not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_errors: Option<u64>,
    /// What was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// The units of every figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Units>,
    /// When the measured window began, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// The machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
    /// One entry per second of the measured window (see [`SeriesPoint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<SeriesPoint>>,
}

impl DirectionResult {
    fn compute(m: &DirectionMeasurements, elapsed_s: f64) -> DirectionResult {
        DirectionResult {
            ios: m.ios,
            bytes: m.bytes,
            iops: iops(m.ios, elapsed_s).unwrap_or(0.0),
            mb_per_s: mb_per_s(m.bytes, elapsed_s).unwrap_or(0.0),
            lat_us: m.latency.summary(),
        }
    }
}

impl UrlResult {
    fn compute(m: &UrlMeasurements, elapsed_s: f64) -> UrlResult {
        let ios = m.read.ios.saturating_add(m.write.ios);
        let bytes = m.read.bytes.saturating_add(m.write.bytes);
        let mut all = m.read.latency.clone();
        all.merge(&m.write.latency);
        UrlResult {
            url: m.url.clone(),
            ios,
            bytes,
            iops: iops(ios, elapsed_s).unwrap_or(0.0),
            mb_per_s: mb_per_s(bytes, elapsed_s).unwrap_or(0.0),
            lat_us: all.summary(),
            read: DirectionResult::compute(&m.read, elapsed_s),
            write: DirectionResult::compute(&m.write, elapsed_s),
            errors: m.errors,
        }
    }
}

impl BenchResult {
    /// Derives every metric from the raw measurements.
    pub fn compute(m: &Measurements) -> BenchResult {
        let elapsed_s = m.elapsed_s;
        let ncpus = m.host.ncpus;
        let ios = m.read.ios.saturating_add(m.write.ios);
        let bytes = m.read.bytes.saturating_add(m.write.bytes);
        let total_iops = iops(ios, elapsed_s).unwrap_or(0.0);
        let total_mb_per_s = mb_per_s(bytes, elapsed_s).unwrap_or(0.0);
        let mut all = m.read.latency.clone();
        all.merge(&m.write.latency);

        let initiator_cpu_pct = cpu_pct_of_machine(m.initiator_cpu_s, elapsed_s, ncpus);
        let target_cpu_pct = m
            .target_cpu_s
            .and_then(|s| cpu_pct_of_machine(s, elapsed_s, ncpus));
        let per_cpu_pct = |pct: Option<f64>| {
            (
                pct.and_then(|p| effectiveness_mb_per_s_per_cpu_pct(total_mb_per_s, p)),
                pct.and_then(|p| iops_per_cpu_pct(total_iops, p)),
            )
        };
        let (mb_per_s_per_cpu_pct, iops_per_cpu_pct) = per_cpu_pct(Some(m.cpu.busy_pct));
        let (initiator_mb_per_s_per_cpu_pct, initiator_iops_per_cpu_pct) =
            per_cpu_pct(initiator_cpu_pct);
        let (target_mb_per_s_per_cpu_pct, _) = per_cpu_pct(target_cpu_pct);

        BenchResult {
            iops: total_iops,
            mb_per_s: total_mb_per_s,
            ios: Some(ios),
            bytes: Some(bytes),
            lat_us: all.summary(),
            read: DirectionResult::compute(&m.read, elapsed_s),
            write: DirectionResult::compute(&m.write, elapsed_s),
            per_url: Some(
                m.per_url
                    .iter()
                    .map(|u| UrlResult::compute(u, elapsed_s))
                    .collect(),
            ),
            initiator_cpu_s: m.initiator_cpu_s,
            initiator_cpu_pct,
            initiator_cpu_us_per_io: service_demand_us_per_io(m.initiator_cpu_s, ios),
            initiator_cpu_us_per_kib: service_demand_us_per_kib(m.initiator_cpu_s, bytes),
            target_pid: m.target_pid,
            target_cpu_s: m.target_cpu_s,
            target_cpu_pct,
            target_cpu_us_per_io: m
                .target_cpu_s
                .and_then(|s| service_demand_us_per_io(s, ios)),
            target_cpu_us_per_kib: m
                .target_cpu_s
                .and_then(|s| service_demand_us_per_kib(s, bytes)),
            system_cpu_us_per_io: service_demand_us_per_io(m.cpu.busy_cpu_s, ios),
            system_cpu_us_per_kib: service_demand_us_per_kib(m.cpu.busy_cpu_s, bytes),
            cpu: m.cpu,
            steal_pct: m.cpu.steal_pct,
            mb_per_s_per_cpu_pct,
            iops_per_cpu_pct,
            initiator_mb_per_s_per_cpu_pct,
            initiator_iops_per_cpu_pct,
            target_mb_per_s_per_cpu_pct,
            out_segs: m.tcp.out_segs,
            retrans_segs: m.tcp.retrans_segs,
            retrans_pct: m.tcp.retrans_pct,
            dsack_segs: m.tcp.dsack_recv_segs,
            elapsed_s,
            interrupted: Some(m.interrupted),
            stopped: m.stopped.clone(),
            foreign: m.foreign.clone(),
            foreign_warning: Some(
                m.foreign
                    .as_ref()
                    .is_some_and(|f| f.cpu_pct > FOREIGN_MAX_PCT),
            ),
            errors: m.errors,
            verify_errors: Some(m.verify_errors),
            workload: Some(m.workload.clone()),
            units: Some(Units::default()),
            started_at: Some(rfc3339_utc(m.started_at)),
            host: Some(m.host.clone()),
            series: Some(m.series.iter().map(crate::series::point).collect()),
        }
    }

    /// Steal above this share of all CPUs makes CPU figures unreliable.
    pub const STEAL_PCT_WARN: f64 = 5.0;

    /// Whether a hypervisor stole enough CPU to warn about.
    pub fn steal_warning(&self) -> bool {
        self.steal_pct > Self::STEAL_PCT_WARN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn workload() -> Workload {
        Workload::from_profile(
            crate::profiles::find("oltp-8k").unwrap(),
            vec!["iscsi://u%pw@127.0.0.1:3260/iqn.2026-11.io.isoe:t0/0".to_string()],
            10.0,
            2.0,
        )
    }

    /// `ios` commands of 8 KiB, each `ns` long.
    fn direction(ios: u64, ns: &[u64]) -> DirectionMeasurements {
        let mut latency = LatencyRecorder::new();
        for &n in ns {
            latency.record_ns(n);
        }
        DirectionMeasurements {
            ios,
            bytes: ios * 8192,
            latency,
        }
    }

    /// 10 s; 300000 reads and 100000 writes of 8 KiB; 2 CPUs at 40% busy;
    /// two URLs, the first with 200000 reads, the second with the rest; two
    /// seconds in the series.
    fn measurements() -> Measurements {
        let mut read_latency = LatencyRecorder::new();
        let mut write_latency = LatencyRecorder::new();
        // Reads 1 µs, writes 2 µs: below 2048 ns HdrHistogram's bins are
        // 1 ns wide, so these come back exactly.
        read_latency.record_ns(1_000);
        read_latency.record_ns(1_000);
        read_latency.record_ns(1_000);
        write_latency.record_ns(2_000);
        let per_url = vec![
            UrlMeasurements {
                url: "iscsi://u@127.0.0.1:3260/iqn.2026-11.io.isoe:t0/0".into(),
                read: direction(200_000, &[1_000, 1_000]),
                write: DirectionMeasurements::default(),
                errors: 2,
            },
            UrlMeasurements {
                url: "iscsi://u@127.0.0.2:3260/iqn.2026-11.io.isoe:t0/0".into(),
                read: direction(100_000, &[1_000]),
                write: direction(100_000, &[2_000]),
                errors: 0,
            },
        ];
        let second = |start_s: f64, end_s: f64, reads: u64, writes: u64| SecondMeasurements {
            start_s,
            end_s,
            read_ios: reads,
            read_bytes: reads * 8192,
            write_ios: writes,
            write_bytes: writes * 8192,
            errors: 0,
            lat_us: LatencySummary {
                count: reads + writes,
                mean_us: 1.5,
                p99_us: 2.0,
                ..LatencySummary::default()
            },
        };
        Measurements {
            workload: workload(),
            started_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            elapsed_s: 10.0,
            read: DirectionMeasurements {
                ios: 300_000,
                bytes: 300_000 * 8192,
                latency: read_latency,
            },
            write: DirectionMeasurements {
                ios: 100_000,
                bytes: 100_000 * 8192,
                latency: write_latency,
            },
            errors: 2,
            verify_errors: 1,
            cpu: CpuSplit {
                user_pct: 10.0,
                system_pct: 15.0,
                irq_pct: 0.0,
                softirq_pct: 14.0,
                steal_pct: 1.0,
                iowait_pct: 0.0,
                idle_pct: 60.0,
                busy_pct: 40.0,
                busy_cpu_s: 8.0,
                elapsed_cpu_s: 20.0,
            },
            initiator_cpu_s: 3.0,
            target_cpu_s: Some(2.0),
            target_pid: Some(4242),
            tcp: TcpDelta {
                out_segs: 200_000,
                retrans_segs: 100,
                dsack_recv_segs: 80,
                retrans_pct: 0.05,
            },
            host: Host {
                kernel_release: "6.18.44".to_string(),
                ncpus: 2,
            },
            per_url,
            series: vec![
                second(0.0, 1.0, 30_000, 10_000),
                second(9.0, 10.0, 25_000, 5_000),
            ],
            interrupted: false,
            stopped: None,
            foreign: Some(ForeignLoad {
                cpu_pct: 1.5,
                kernel_threads_pct: 2.0,
                interrupts_pct: 14.0,
                ours_pct: 25.0,
                top: vec![("cron".into(), 1.0)],
            }),
        }
    }

    #[test]
    fn compute_derives_every_field() {
        let r = BenchResult::compute(&measurements());
        // 400000 I/Os, 400000 × 8192 = 3_276_800_000 bytes = 3_200_000 KiB, 10 s.
        assert_eq!(r.ios, Some(400_000));
        assert_eq!(r.bytes, Some(3_276_800_000));
        assert_eq!(r.iops, 40_000.0);
        assert_eq!(r.mb_per_s, 327.68); // 3_276_800_000 / 10^6 / 10
        assert_eq!(r.read.ios, 300_000);
        assert_eq!(r.read.iops, 30_000.0);
        assert_eq!(r.read.mb_per_s, 245.76); // 2_457_600_000 / 10^6 / 10
        assert_eq!(r.write.iops, 10_000.0);
        assert_eq!(r.write.mb_per_s, 81.92);
        // Latency: reads 3 × 1 µs, writes 1 × 2 µs; all = 4 commands.
        assert_eq!(r.read.lat_us.count, 3);
        assert_eq!(r.read.lat_us.p50_us, 1.0);
        assert_eq!(r.write.lat_us.count, 1);
        assert_eq!(r.write.lat_us.max_us, 2.0);
        assert_eq!(r.lat_us.count, 4);
        assert_eq!(r.lat_us.min_us, 1.0);
        assert_eq!(r.lat_us.p50_us, 1.0); // 2nd of 4
        assert_eq!(r.lat_us.p99_us, 2.0);
        assert_eq!(r.lat_us.max_us, 2.0);
        assert_eq!(r.lat_us.mean_us, 1.25); // (3 × 1 + 2) / 4
                                            // Initiator: 3 CPU-s / (10 s × 2 CPUs) = 15%;
                                            // 3e6 µs / 400000 = 7.5 µs per I/O; 3e6 / 3_200_000 KiB = 0.9375 µs per KiB.
        assert_eq!(r.initiator_cpu_s, 3.0);
        assert_eq!(r.initiator_cpu_pct, Some(15.0));
        assert_eq!(r.initiator_cpu_us_per_io, Some(7.5));
        assert_eq!(r.initiator_cpu_us_per_kib, Some(0.9375));
        // Target: 2 CPU-s -> 10%; 5 µs per I/O; 0.625 µs per KiB.
        assert_eq!(r.target_pid, Some(4242));
        assert_eq!(r.target_cpu_s, Some(2.0));
        assert_eq!(r.target_cpu_pct, Some(10.0));
        assert_eq!(r.target_cpu_us_per_io, Some(5.0));
        assert_eq!(r.target_cpu_us_per_kib, Some(0.625));
        // System: 8 busy CPU-s -> 20 µs per I/O; 8e6 / 3.2e6 = 2.5 µs per KiB.
        assert_eq!(r.system_cpu_us_per_io, Some(20.0));
        assert_eq!(r.system_cpu_us_per_kib, Some(2.5));
        assert_eq!(r.cpu.busy_pct, 40.0);
        assert_eq!(r.steal_pct, 1.0);
        assert!(!r.steal_warning());
        // Effectiveness over system busy 40%: 327.68 / 40 = 8.192; 40000 / 40 = 1000.
        assert_eq!(r.mb_per_s_per_cpu_pct, Some(8.192));
        assert_eq!(r.iops_per_cpu_pct, Some(1000.0));
        // Over initiator 15%: 327.68 / 15 = 21.845333...; 40000 / 15 = 2666.67.
        assert_eq!(r.initiator_mb_per_s_per_cpu_pct, Some(327.68 / 15.0));
        assert_eq!(r.initiator_iops_per_cpu_pct, Some(40_000.0 / 15.0));
        // Over target 10%: 32.768.
        assert_eq!(r.target_mb_per_s_per_cpu_pct, Some(327.68 / 10.0));
        assert_eq!(
            (r.out_segs, r.retrans_segs, r.dsack_segs),
            (200_000, 100, 80)
        );
        assert_eq!(r.retrans_pct, 0.05);
        assert_eq!((r.elapsed_s, r.errors, r.verify_errors), (10.0, 2, Some(1)));
        assert_eq!(r.workload, Some(workload()));
        assert_eq!(r.started_at.as_deref(), Some("2023-11-14T22:13:20Z"));
        assert_eq!(r.host.as_ref().map(|h| h.ncpus), Some(2));
        assert_eq!(r.units, Some(Units::default()));
    }

    #[test]
    fn unknown_target_and_nothing_done_give_nulls() {
        let mut m = measurements();
        m.target_cpu_s = None;
        m.target_pid = None;
        m.read = DirectionMeasurements::default();
        m.write = DirectionMeasurements::default();
        m.cpu = CpuSplit::default();
        let r = BenchResult::compute(&m);
        assert_eq!((r.iops, r.mb_per_s, r.ios), (0.0, 0.0, Some(0)));
        assert_eq!(r.lat_us, LatencySummary::default());
        assert_eq!(r.target_cpu_pct, None);
        assert_eq!(r.target_cpu_us_per_io, None);
        assert_eq!(r.target_cpu_us_per_kib, None);
        assert_eq!(r.target_mb_per_s_per_cpu_pct, None);
        assert_eq!(r.initiator_cpu_us_per_io, None);
        assert_eq!(r.initiator_cpu_us_per_kib, None);
        assert_eq!(r.system_cpu_us_per_io, None);
        assert_eq!(r.mb_per_s_per_cpu_pct, None); // busy 0%
        assert_eq!(r.iops_per_cpu_pct, None);
        assert_eq!(r.initiator_cpu_pct, Some(15.0));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["target_cpu_us_per_io"].is_null());
        assert!(json["target_pid"].is_null());
    }

    #[test]
    fn zero_elapsed_does_not_divide_by_zero() {
        let mut m = measurements();
        m.elapsed_s = 0.0;
        let r = BenchResult::compute(&m);
        assert_eq!((r.iops, r.mb_per_s), (0.0, 0.0));
        assert_eq!(r.initiator_cpu_pct, None);
        assert_eq!(r.initiator_mb_per_s_per_cpu_pct, None);
        assert!(serde_json::to_string(&r).is_ok());
    }

    #[test]
    fn json_has_the_documented_fields_and_round_trips() {
        let r = BenchResult::compute(&measurements());
        let json = serde_json::to_value(&r).unwrap();
        for key in [
            "iops",
            "mb_per_s",
            "lat_us",
            "read",
            "write",
            "initiator_cpu_us_per_io",
            "initiator_cpu_us_per_kib",
            "initiator_cpu_pct",
            "target_cpu_us_per_io",
            "target_cpu_us_per_kib",
            "target_cpu_pct",
            "target_pid",
            "system_cpu_us_per_io",
            "cpu",
            "steal_pct",
            "mb_per_s_per_cpu_pct",
            "iops_per_cpu_pct",
            "initiator_mb_per_s_per_cpu_pct",
            "retrans_segs",
            "out_segs",
            "retrans_pct",
            "dsack_segs",
            "elapsed_s",
            "errors",
            "verify_errors",
            "workload",
            "units",
            "started_at",
            "host",
            "interrupted",
            "stopped",
            "foreign",
            "foreign_warning",
            "per_url",
            "series",
        ] {
            assert!(json.get(key).is_some(), "no {key}");
        }
        assert_eq!(json["lat_us"]["p99"], 2.0);
        assert_eq!(json["read"]["lat_us"]["p50"], 1.0);
        assert_eq!(json["cpu"]["softirq_pct"], 14.0);
        assert_eq!(json["units"]["throughput"], "MB/s, MB = 10^6 bytes");
        assert_eq!(json["host"]["kernel_release"], "6.18.44");
        // The workload's URL is written without its password.
        let urls = json["workload"]["urls"].to_string();
        assert!(
            urls.contains("iscsi://u@127.0.0.1") && !urls.contains("pw"),
            "{urls}"
        );
        let back: BenchResult = serde_json::from_value(json).unwrap();
        assert_eq!(back.iops, r.iops);
        assert_eq!(back.lat_us, r.lat_us);
        assert_eq!(back.cpu, r.cpu);
        assert_eq!(back.target_cpu_us_per_io, r.target_cpu_us_per_io);
    }

    #[test]
    fn the_json_output_reads_back_as_itself() {
        let output = crate::BenchOutput {
            result: BenchResult::compute(&measurements()),
            runner: crate::RunnerFigures {
                initiator_syscalls_per_io: Some(0.75),
                reconnects: 1,
                connections_per_session: 2,
                messages: vec!["read at LBA 8: CHECK CONDITION".into()],
                unit_attentions_retried: 3,
                verified_reads: Some(0),
                io_gap_max_s: Some(0.125),
                multipath: None,
                cpu_accounted_pct: Some(97.5),
                lat_hist: crate::LatencyHistograms {
                    read: vec![(1.0, 3)],
                    write: vec![(2.0, 1)],
                },
            },
        };
        let json = serde_json::to_value(&output).unwrap();
        // One flat object, as `isoe bench --json` has always printed it.
        assert_eq!(json["iops"], 40_000.0);
        assert_eq!(json["reconnects"], 1);
        assert_eq!(json["lat_hist"]["read"][0][1], 3);
        assert!(json["multipath"].is_null() && json.get("multipath").is_some());
        // Read back, it writes the same JSON (the URLs' passwords were
        // never written).
        let back: crate::BenchOutput = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back.runner, output.runner);
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
    }

    #[test]
    fn table_shows_each_section() {
        let t = BenchResult::compute(&measurements()).table();
        for needle in [
            "isoe bench oltp-8k",
            "2023-11-14T22:13:20Z",
            "8 KiB, 67% read, 100% random, QD 5 x 1 worker, 1 session x 1 connection, 1 URL,",
            "327.7 MB/s  40.0k IOPS",
            "MB = 10^6 bytes",
            "p99.9",
            "softirq 14.0",
            "busy 40.0",
            "100 of 200000 segments retransmitted (0.050%), 80 D-SACK",
            "2 failed commands, 1 verify mismatches",
        ] {
            assert!(t.contains(needle), "no {needle:?} in\n{t}");
        }
        let row = |name: &str| t.lines().find(|l| l.starts_with(name)).unwrap().to_string();
        // initiator: 15.0%, 7.50 µs/IO, 0.938 µs/KiB, 21.85 MB/s per %, 2667 IOPS per %
        let initiator: Vec<String> = row("initiator")
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(
            initiator,
            ["initiator", "15.0", "7.50", "0.938", "21.85", "2667"]
        );
        let target: Vec<String> = row("target").split_whitespace().map(String::from).collect();
        assert_eq!(target, ["target", "10.0", "5.00", "0.625", "32.77", "4000"]);
        let system: Vec<String> = row("system busy")
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(
            system,
            ["system", "busy", "40.0", "20.00", "2.500", "8.19", "1000"]
        );
        let read: Vec<String> = row("read").split_whitespace().map(String::from).collect();
        assert_eq!(read[..4], ["read", "300000", "245.8", "30.0k"]);
        assert!(!t.contains("WARNING"));
        assert!(!t.contains("target CPU unknown"));
    }

    #[test]
    fn table_marks_unknowns_and_warns_on_steal() {
        let mut m = measurements();
        m.target_cpu_s = None;
        m.target_pid = None;
        m.cpu.steal_pct = 7.25;
        m.write = DirectionMeasurements::default();
        let t = BenchResult::compute(&m).table();
        let target: Vec<&str> = t
            .lines()
            .find(|l| l.starts_with("target"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(target, ["target", "-", "-", "-", "-", "-"]);
        assert!(t.contains("target CPU unknown"), "{t}");
        assert!(t.contains("WARNING: steal 7.2% > 5%"), "{t}");
        let write = t.lines().find(|l| l.starts_with("write")).unwrap();
        assert!(write.trim_end().ends_with('-'), "{write}");
    }

    #[test]
    fn per_url_shares_and_the_series_are_derived_and_written() {
        let r = BenchResult::compute(&measurements());
        let per_url = r.per_url.as_deref().unwrap();
        assert_eq!(per_url.len(), 2);
        let (a, b) = (&per_url[0], &per_url[1]);
        assert_eq!(Some(a.ios + b.ios), r.ios);
        assert_eq!(
            (a.ios, a.read.ios, a.write.ios, a.errors),
            (200_000, 200_000, 0, 2)
        );
        assert_eq!(a.iops, 20_000.0);
        assert_eq!(a.mb_per_s, 163.84); // 200000 × 8192 / 10^6 / 10 s
        assert_eq!(
            (b.ios, b.read.iops, b.write.iops),
            (200_000, 10_000.0, 10_000.0)
        );
        // The second URL's latency: one read of 1 µs, one write of 2 µs.
        assert_eq!(
            (b.lat_us.count, b.lat_us.min_us, b.lat_us.max_us),
            (2, 1.0, 2.0)
        );
        assert_eq!(a.lat_us.max_us, 1.0);
        let series = r.series.as_deref().unwrap();
        assert_eq!(series.len(), 2);
        let (s0, s9) = (&series[0], &series[1]);
        assert_eq!((s0.t_s, s0.span_s, s0.ios), (0.0, 1.0, 40_000));
        assert_eq!(
            (s0.iops, s0.read_iops, s0.write_iops),
            (40_000.0, 30_000.0, 10_000.0)
        );
        assert_eq!(s0.read_mb_per_s, 245.76); // 30000 × 8192 / 10^6
        assert_eq!((s9.t_s, s9.ios, s9.mb_per_s), (9.0, 30_000, 245.76));
        assert_eq!(r.interrupted, Some(false));

        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["interrupted"], false);
        assert_eq!(json["series"][0]["lat_us"]["p99"], 2.0);
        assert_eq!(json["series"][1]["t_s"], 9.0);
        assert_eq!(json["per_url"][1]["write"]["ios"], 100_000);
        assert_eq!(
            json["per_url"][1]["url"],
            "iscsi://u@127.0.0.2:3260/iqn.2026-11.io.isoe:t0/0"
        );
        let back: BenchResult = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            (back.series, back.per_url),
            (r.series.clone(), r.per_url.clone())
        );
        // A result written before these fields existed still reads, and
        // says it did not report them (and writes them no more than it read
        // them).
        let mut old = json;
        for key in [
            "interrupted",
            "series",
            "per_url",
            "stopped",
            "foreign",
            "foreign_warning",
        ] {
            old.as_object_mut().unwrap().remove(key);
        }
        let back: BenchResult = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(
            (
                back.interrupted,
                back.series.as_ref(),
                back.per_url.as_ref(),
                back.foreign_warning
            ),
            (None, None, None, None)
        );
        let again = serde_json::to_value(&back).unwrap();
        for key in ["interrupted", "series", "per_url", "foreign_warning"] {
            assert!(again.get(key).is_none(), "{key}");
        }
        // Null, as bench has always written an unknown: stopped, foreign.
        assert!(again["stopped"].is_null() && again.get("stopped").is_some());
    }

    #[test]
    fn table_shows_each_url_when_several_and_says_when_interrupted() {
        let mut m = measurements();
        let t = BenchResult::compute(&m).table();
        let row = |t: &str, start: &str| -> Vec<String> {
            t.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no row {start:?} in\n{t}"))
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        assert_eq!(
            row(&t, "1  "),
            [
                "1",
                "200000",
                "163.8",
                "20.0k",
                "1.0",
                "1.0",
                "2",
                "iscsi://u@127.0.0.1:3260/iqn.2026-11.io.isoe:t0/0"
            ]
        );
        assert_eq!(row(&t, "2  ")[..4], ["2", "200000", "163.8", "20.0k"]);
        assert!(!t.contains("INTERRUPTED"), "{t}");
        // The series is not in the table unless asked for.
        assert!(!t.contains("second"), "{t}");
        let series = BenchResult::compute(&m).series_table();
        let rows: Vec<&str> = series.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(rows.len(), 3, "{series}");
        assert_eq!(
            row(&series, "      0").join(" "),
            "0 1.00 40000 327.7 40.0k 1.5 2.0 0"
        );

        m.interrupted = true;
        m.elapsed_s = 4.0;
        m.per_url.truncate(1);
        let t = BenchResult::compute(&m).table();
        assert!(
            t.contains("INTERRUPTED: the window was cut short after 4.00 s of 10.0 s"),
            "{t}"
        );
        // One URL: its share is the total, not repeated.
        assert!(!t.contains("iscsi://"), "{t}");
        m.series.clear();
        assert_eq!(BenchResult::compute(&m).series_table(), "");
    }

    #[test]
    fn other_processes_cpu_is_shown_and_flagged_above_the_labs_limit() {
        let mut m = measurements();
        let r = BenchResult::compute(&m);
        assert_eq!(r.foreign_warning, Some(false));
        let t = r.table();
        assert!(
            t.contains(
                "other processes 1.5% of a CPU (cron 1.0%); kernel threads 2.0%, interrupts 14.0%"
            ),
            "{t}"
        );
        assert!(!t.contains("WARNING"), "{t}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["foreign"]["cpu_pct"], 1.5);
        assert_eq!(json["foreign_warning"], false);

        // Just above the limit: flagged, in the table and the JSON.
        let f = m.foreign.as_mut().unwrap();
        f.cpu_pct = FOREIGN_MAX_PCT + 0.1;
        f.top = vec![("stress-ng-cpu".into(), 5.0)];
        let r = BenchResult::compute(&m);
        assert_eq!(r.foreign_warning, Some(true));
        assert!(
            r.table().contains(
                "WARNING: other processes used 5.1% of a CPU (stress-ng-cpu 5.0%) > 5% of a CPU"
            ),
            "{}",
            r.table()
        );
        assert_eq!(serde_json::to_value(&r).unwrap()["foreign_warning"], true);
        // At the limit, not above it: no flag, as the lab judges.
        m.foreign.as_mut().unwrap().cpu_pct = FOREIGN_MAX_PCT;
        assert_eq!(BenchResult::compute(&m).foreign_warning, Some(false));
        m.foreign = None;
        let r = BenchResult::compute(&m);
        assert!(r.table().contains("other processes unknown"));
        assert!(serde_json::to_value(&r).unwrap()["foreign"].is_null());
    }

    #[test]
    fn a_stopped_run_shows_why_and_no_rates() {
        let mut m = measurements();
        m.stopped = Some("the LUN is gone: read at LBA 8: CHECK CONDITION, X".into());
        m.elapsed_s = 2.5;
        let r = BenchResult::compute(&m);
        let t = r.table();
        assert!(
            t.contains("STOPPED after 2.50 s of 10.0 s: the LUN is gone: read at LBA 8"),
            "{t}"
        );
        assert!(t.contains("400000 commands completed, 2 failed"), "{t}");
        for rate in ["MB/s", "IOPS", "p99", "initiator"] {
            assert!(!t.contains(rate), "{rate} in\n{t}");
        }
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["stopped"],
            "the LUN is gone: read at LBA 8: CHECK CONDITION, X"
        );
        // A result written before the field existed reads as not stopped.
        let mut old = json;
        old.as_object_mut().unwrap().remove("stopped");
        let back: BenchResult = serde_json::from_value(old).unwrap();
        assert_eq!(back.stopped, None);
    }

    #[test]
    fn steal_above_5_pct_warns() {
        let mut m = measurements();
        m.cpu.steal_pct = 5.5;
        assert!(BenchResult::compute(&m).steal_warning());
        m.cpu.steal_pct = 5.0;
        assert!(!BenchResult::compute(&m).steal_warning());
    }
}
