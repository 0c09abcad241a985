//! A run's record as `results.jsonl` keeps it (a record's `bench`): an
//! `isoe bench` result and what the lab adds of its own, with the parts
//! that other load generators' runs bring (a fio job, a floor's shape, an
//! application's figures). Plain data: the runs that make these import
//! this file, never the other way.

use isoe_bench::cpu::CpuSplit;
use isoe_bench::tcp::TcpCounters;
use isoe_bench::{BenchOutput, BenchResult, LatencyHistograms, RunnerFigures};
use isoe_report::record::Metric;
use serde::Serialize;

/// A run's result, as `results.jsonl` keeps it (a record's `bench`): an
/// `isoe bench` result, which `isoe bench` itself gave ([`BenchOutput`],
/// with its runner's figures) or which the lab made of another load
/// generator's output and its own `/proc` samples (fio, `isoe netprobe`,
/// an application), and what the lab adds of its own. One flat JSON
/// object, its keys sorted ([`RunResult::to_json`]), as before these were
/// types.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// The result, in `isoe bench`'s fields.
    #[serde(flatten)]
    pub bench: BenchResult,
    /// What `isoe bench`'s runner adds; None for the lab's other load
    /// generators.
    #[serde(flatten)]
    pub runner: Option<RunnerFigures>,
    /// What the lab adds.
    #[serde(flatten)]
    pub lab: LabFigures,
}

/// The fields the lab adds to a run's result, each left out when None.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LabFigures {
    /// The initiator, for people, when it is not `isoe bench` (fio's
    /// engine, an application's block device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiator: Option<String>,
    /// A fio run's job, as its `workload` (`isoe bench`'s own goes in
    /// [`BenchResult::workload`], which is None then).
    #[serde(rename = "workload", skip_serializing_if = "Option::is_none")]
    pub fio_workload: Option<FioWorkload>,
    /// The span between the lab's own `/proc` samples, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_window_s: Option<f64>,
    /// A floor run's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorShape>,
    /// A stream run's own figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<crate::stream_run::StreamRun>,
    /// An application run's figures.
    #[serde(flatten)]
    pub application: Option<ApplicationResult>,
    /// On a target host of its own: whose CPU `target_cpu_s` is,
    /// `process` (the target's) or `host` (all of its host's, for LIO and
    /// other kernel targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_cpu_scope: Option<String>,
    /// On a target host of its own: that host's CPU split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_host_cpu: Option<CpuSplit>,
    /// On a target host of its own: that host's busy time (every process,
    /// kernel thread and softirq on it) per I/O, µs: the target's side as
    /// the initiator host's `system_cpu_us_per_io` is the initiator's.
    /// Where one machine holds both (namespaces) the host's figure is
    /// both sides' and this is left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_host_cpu_us_per_io: Option<f64>,
    /// On a test bed: the initiator host's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed_initiator_host: Option<String>,
    /// On a test bed: the target host's name, or `external`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed_target_host: Option<String>,
    /// How the LUN was written before the case's first read (once per
    /// target start; every run of that start carries it). None: not
    /// written by the lab (no read workload, an application that writes
    /// its own data, an external target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lun_fill: Option<LunFill>,
    /// The bytes the target served from never-written blocks during this
    /// run (isoe's memory LUNs count them; the lab asks before and after):
    /// 0 when every read of the run read written data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_unwritten_read_bytes: Option<u64>,
    /// On a block device (the kernel's initiator, `isoe attach`): the load
    /// generator's own process (fio), which stands in for an application
    /// and is not the initiator; the `initiator_cpu_*` fields are then
    /// `isoe attach`'s process's (left out for the kernel's initiator,
    /// which has none), and the initiator host's CPU (`system_cpu_*`) is
    /// the figure to compare every kind of initiator by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_cpu_s: Option<f64>,
    /// The target side's TCP segments sent over the measured window, from
    /// its own network namespace's counters (or its own host's); None
    /// when the target shares the initiator's namespace (whose figures
    /// are `out_segs` and `retrans_segs`) or was not sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tcp_out_segs: Option<u64>,
    /// The target side's TCP segments retransmitted over the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tcp_retrans_segs: Option<u64>,
    /// The target side's retransmitted segments, % of those it sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tcp_retrans_pct: Option<f64>,
    /// The load generator's CPU-µs per I/O (see [`LabFigures::load_cpu_s`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_cpu_us_per_io: Option<f64>,
    /// The measurement's own programs' CPU-seconds on the initiator host
    /// over the window (blktrace, for an application), which the host's
    /// figures per I/O and per CPU% leave out (`cpu`, /proc/stat's split,
    /// keeps them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_cpu_s: Option<f64>,
    /// Commands in flight in all, over every path and worker, as the run
    /// was asked to keep them ([`RunResult::in_flight_commands`]): the
    /// figure a seed states ("8 outstanding", "8 volumes x 5 threads").
    /// None for an application, whose load is its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
}

/// The LUN written once, sequentially, before a case's reads (`isoe bench
/// --fill`): what it took, reported and not counted in any run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LunFill {
    /// Bytes written.
    pub bytes: u64,
    /// Seconds it took.
    pub seconds: f64,
}

impl RunResult {
    /// A run of fio on a block device: its process's CPU is the load's
    /// ([`LabFigures::load_cpu_s`]), not the initiator's, whose work is in
    /// the kernel or in `isoe attach` and shows in the host's CPU.
    pub fn load_is_not_the_initiator(&mut self) {
        let b = &mut self.bench;
        self.lab.load_cpu_s = Some(std::mem::take(&mut b.initiator_cpu_s));
        self.lab.load_cpu_us_per_io = b.initiator_cpu_us_per_io.take();
        b.initiator_cpu_pct = None;
        b.initiator_mb_per_s_per_cpu_pct = None;
        b.initiator_iops_per_cpu_pct = None;
    }

    /// Commands in flight in all, counted from what the load generator was
    /// given: `isoe bench`'s depth x URLs (one volume for all of them with
    /// multipath) x workers, its sessions sharing each worker's depth;
    /// fio's depth per file x files x jobs (its `--iodepth` x
    /// `--numjobs`); a floor's connections x depth. None for an
    /// application.
    pub fn in_flight_commands(&self) -> Option<u32> {
        if self.lab.application.is_some() {
            return None;
        }
        if let Some(w) = &self.bench.workload {
            return Some(bench_in_flight(w));
        }
        if let Some(f) = &self.lab.fio_workload {
            return Some(f.queue_depth * (f.urls.len() as u32).max(1) * f.workers);
        }
        self.lab.floor.map(|f| f.connections * f.depth)
    }

    /// The target side's TCP counters over the window, from its counters
    /// at the window's two ends (nothing when either is missing).
    pub fn add_target_tcp(&mut self, first: Option<&TcpCounters>, last: Option<&TcpCounters>) {
        let (Some(first), Some(last)) = (first, last) else {
            return;
        };
        let delta = first.delta(last);
        self.lab.target_tcp_out_segs = Some(delta.out_segs);
        self.lab.target_tcp_retrans_segs = Some(delta.retrans_segs);
        self.lab.target_tcp_retrans_pct = Some(delta.retrans_pct);
    }

    /// Takes the measurement's own programs' `tools_cpu_s` CPU-seconds out
    /// of the host's figures (CPU per I/O, MB/s and IOPS per CPU%), which
    /// then are the host's work less the lab's; /proc/stat's split stays
    /// as it was read. Nothing without a window.
    pub fn less_tools(&mut self, tools_cpu_s: f64) {
        let Some(window_s) = self.lab.cpu_window_s.filter(|w| *w > 0.0) else {
            return;
        };
        let b = &mut self.bench;
        let busy_s = (b.cpu.busy_cpu_s - tools_cpu_s).max(0.0);
        let busy_pct = if b.cpu.elapsed_cpu_s > 0.0 {
            busy_s / b.cpu.elapsed_cpu_s * 100.0
        } else {
            0.0
        };
        b.system_cpu_us_per_io = (b.iops > 0.0).then(|| busy_s / window_s / b.iops * 1e6);
        b.mb_per_s_per_cpu_pct =
            isoe_bench::demand::effectiveness_mb_per_s_per_cpu_pct(b.mb_per_s, busy_pct);
        b.iops_per_cpu_pct = isoe_bench::demand::iops_per_cpu_pct(b.iops, busy_pct);
        self.lab.tools_cpu_s = Some(tools_cpu_s);
    }

    /// The host's busy CPU-seconds over the window less the measurement's
    /// own programs' ([`RunResult::less_tools`]).
    pub fn host_busy_cpu_s(&self) -> f64 {
        (self.bench.cpu.busy_cpu_s - self.lab.tools_cpu_s.unwrap_or(0.0)).max(0.0)
    }

    /// What `isoe bench` printed, as it printed it.
    pub fn of_bench(output: BenchOutput) -> RunResult {
        RunResult {
            bench: output.result,
            runner: Some(output.runner),
            lab: LabFigures::default(),
        }
    }

    /// The value of `metric` in this result; None when it has none (a
    /// transaction rate of a run that is no application's).
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::Iops => Some(self.bench.iops),
            Metric::MbPerS => Some(self.bench.mb_per_s),
            Metric::Tps => self.lab.application.as_ref().and_then(|a| a.tps),
        }
    }

    /// The result as a record keeps it: one JSON object with its keys
    /// sorted (a number that is not finite is null, as serde_json writes
    /// it).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// For tests: a result of the lab's with the figures `fields` gives
    /// (bench's JSON names) and zeros for the figures a result must have.
    #[cfg(test)]
    pub(crate) fn for_tests(fields: serde_json::Value) -> RunResult {
        let mut bench = serde_json::json!({
            "iops": 0.0, "mb_per_s": 0.0, "lat_us": isoe_bench::LatencySummary::default(),
            "read": isoe_bench::DirectionResult::default(),
            "write": isoe_bench::DirectionResult::default(),
            "initiator_cpu_s": 0.0, "cpu": CpuSplit::default(), "steal_pct": 0.0,
            "out_segs": 0, "retrans_segs": 0, "retrans_pct": 0.0, "dsack_segs": 0,
            "elapsed_s": 0.0, "errors": 0,
        });
        if let (Some(into), serde_json::Value::Object(from)) = (bench.as_object_mut(), fields) {
            into.extend(from);
        }
        RunResult {
            bench: serde_json::from_value(bench).expect("a bench result"),
            runner: None,
            lab: LabFigures::default(),
        }
    }
}

/// Commands `isoe bench` keeps in flight running `w`: its depth on each
/// volume (a URL, or all of them as paths of one LU with multipath) of
/// each worker, the sessions of a volume sharing it.
pub fn bench_in_flight(w: &isoe_bench::Workload) -> u32 {
    let volumes = if w.multipath { 1 } else { w.urls.len() as u32 };
    w.queue_depth * volumes.max(1) * w.workers
}

/// What a fio run was asked to do, as its result's `workload` says it:
/// the fields of `isoe bench`'s workload that a fio job has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FioWorkload {
    /// Bytes per command.
    pub block_size_bytes: u32,
    /// Share of reads, %.
    pub read_pct: u8,
    /// Share of random accesses, %.
    pub random_pct: u8,
    /// Outstanding I/Os per job.
    pub queue_depth: u32,
    /// Jobs per URL.
    pub workers: u32,
    /// Measured seconds.
    pub duration_s: f64,
    /// Ramp seconds.
    pub ramp_s: f64,
    /// What fio opened.
    pub urls: Vec<String>,
}

/// A floor run's shape, as its result's `floor` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FloorShape {
    /// TCP connections.
    pub connections: u32,
    /// Exchanges in flight on each.
    pub depth: u32,
    /// Bytes out per exchange.
    pub request: u32,
    /// Bytes back per exchange.
    pub response: u32,
}

/// An application run's own figures and its block I/O's parts: the fields
/// of its result that are not `isoe bench`'s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplicationResult {
    /// The transaction rate, for OLTP (null for mail): its metric.
    pub tps: Option<f64>,
    /// The block layer's commands per second (`iops` is the mail
    /// database's transactional IOPS for mail, its metric).
    pub block_iops: f64,
    /// What the application reports of itself.
    pub application: ApplicationFigures,
    /// The block layer's latencies in log2 buckets, as `isoe bench`'s.
    pub lat_hist: LatencyHistograms,
    /// The latency by component.
    pub breakdown: Breakdown,
}

/// What an application reports of itself (`application` in its result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplicationFigures {
    /// `oltp` or `mail`.
    pub kind: &'static str,
    /// The file system it ran on.
    pub filesystem: &'static str,
    /// For people.
    pub description: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Option<KindFigures>,
    /// The initiator host's busy CPU, %: Jetstress's processor time (None
    /// until the CPU is sampled).
    pub processor_time_pct: Option<f64>,
    /// The host second by second: the processor time's least and most, the
    /// memory used (None where it was not read).
    #[serde(flatten)]
    pub seconds: Option<HostSeconds>,
}

/// An application run's initiator host second by second over the measured
/// window (seed 003's processor time minimum and maximum, and its memory
/// utilization).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostSeconds {
    /// Whole seconds read.
    pub seconds: u32,
    /// The least busy share of all CPUs in one second, %.
    pub processor_time_min_pct: f64,
    /// The most, %.
    pub processor_time_max_pct: f64,
    /// The host's used memory at its most (MemTotal less MemAvailable),
    /// MiB.
    pub memory_used_max_mib: Option<f64>,
    /// The initiator's own processes' resident memory at its most (`isoe
    /// attach`'s, every device's added up), MiB; None for the kernel's
    /// initiator, which has none.
    pub initiator_rss_max_mib: Option<f64>,
}

/// An application's figures, by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum KindFigures {
    /// pgbench's.
    Oltp(OltpFigures),
    /// The mail workload's, as Jetstress names them.
    Mail(MailFigures),
}

/// pgbench's figures over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OltpFigures {
    /// The mix.
    pub mix: &'static str,
    /// pgbench's scale.
    pub scale: u32,
    /// Its clients.
    pub clients: u32,
    /// Transactions per second.
    pub tps: f64,
    /// Transactions completed.
    pub transactions: u64,
    /// Transactions that failed.
    pub failed: u64,
    /// Their latency, ms.
    pub latency_ms: TransactionLatency,
    /// The initiator host's busy CPU-µs per transaction; null when there is
    /// nothing to divide by.
    pub cpu_us_per_transaction: Option<f64>,
}

/// A transaction's latency, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TransactionLatency {
    /// Least (seed 003's "minimum latency").
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// The mail workload's shape and figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MailFigures {
    /// One database page, bytes.
    pub db_block_bytes: u32,
    /// Database reads among database I/Os, %.
    pub read_pct: u8,
    /// One log write, bytes.
    pub log_block_bytes: u32,
    /// Database I/Os in flight.
    pub threads: u32,
    /// Database reads and writes per second.
    pub transactional_iops: f64,
    /// Database reads per second.
    pub db_reads_per_s: f64,
    /// Database writes per second.
    pub db_writes_per_s: f64,
    /// Mean database read latency, ms.
    pub db_read_avg_ms: f64,
    /// Mean database write latency, ms.
    pub db_write_avg_ms: f64,
    /// Log writes per second.
    pub log_writes_per_s: f64,
    /// Mean log write latency, ms.
    pub log_write_avg_ms: f64,
}

/// The latency by component of each direction (null for a direction
/// without I/O).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Breakdown {
    /// Reads.
    pub read: Option<Parts>,
    /// Writes.
    pub write: Option<Parts>,
}

/// A command's mean time in each place, µs: the initiator's (the block
/// layer's mean), the network's and the target's stages when measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Parts {
    /// The block layer's mean latency.
    pub initiator_us: f64,
    /// The raw TCP exchange of the direction's mean sizes.
    pub network_us: Option<f64>,
    /// The target's receipt to store.
    pub receipt_to_store_us: Option<f64>,
    /// The store.
    pub store_us: Option<f64>,
    /// Store to sent.
    pub store_to_sent_us: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_device_run_keeps_fio_s_cpu_as_the_load_s_not_the_initiator_s() {
        let mut r = RunResult::for_tests(serde_json::json!({
            "initiator_cpu_s": 1.5, "initiator_cpu_pct": 12.0,
            "initiator_cpu_us_per_io": 40.0, "initiator_mb_per_s_per_cpu_pct": 3.0,
            "system_cpu_us_per_io": 90.0,
        }));
        r.load_is_not_the_initiator();
        assert_eq!(
            (r.lab.load_cpu_s, r.lab.load_cpu_us_per_io),
            (Some(1.5), Some(40.0))
        );
        let json = r.to_json();
        for key in [
            "initiator_cpu_pct",
            "initiator_cpu_us_per_io",
            "initiator_mb_per_s_per_cpu_pct",
        ] {
            assert!(json[key].is_null(), "{key}: {json}");
        }
        // The figure that compares initiators stays: the host's.
        assert_eq!(json["system_cpu_us_per_io"], 90.0);
        assert_eq!(json["load_cpu_us_per_io"], 40.0);
    }

    #[test]
    fn the_measurement_s_own_programs_leave_the_host_s_figures() {
        // 3 busy CPU-seconds of 8 over a 4 s window at 1,000 IOPS: 750 µs
        // per I/O; blktrace's 1 CPU-second out leaves 500 µs and 25% busy.
        let mut r = RunResult::for_tests(serde_json::json!({
            "iops": 1000.0, "mb_per_s": 50.0, "system_cpu_us_per_io": 750.0,
        }));
        r.bench.cpu = CpuSplit {
            busy_cpu_s: 3.0,
            elapsed_cpu_s: 8.0,
            busy_pct: 37.5,
            ..CpuSplit::default()
        };
        r.lab.cpu_window_s = Some(4.0);
        r.less_tools(1.0);
        let json = r.to_json();
        assert_eq!(json["system_cpu_us_per_io"], 500.0);
        assert_eq!(json["mb_per_s_per_cpu_pct"], 2.0);
        assert_eq!(json["iops_per_cpu_pct"], 40.0);
        assert_eq!(json["tools_cpu_s"], 1.0);
        // /proc/stat's split is as read.
        assert_eq!(json["cpu"]["busy_pct"], 37.5);
        assert_eq!(r.host_busy_cpu_s(), 2.0);
    }
}
