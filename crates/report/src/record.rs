//! One line of `results.jsonl`: a single run of one workload under one
//! test case. The lab's runner appends them as it goes (so an interrupted
//! plan resumes where it stopped); the report reads them back.
//!
//! The parts of a line that `isoe bench` measures ([`ForeignLoad`],
//! [`SeriesPoint`], [`LatencySummary`]) are defined here, once: plain
//! figures, which `isoe-bench` computes and writes as these very types
//! (it depends on this crate, never the other way round), so that the
//! report reads a run's figures and knows nothing of the machine that
//! measured them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The metric a workload's statistics and effects are computed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Commands per second (small-block workloads).
    Iops,
    /// MB/s, 10^6 bytes per second (large-block workloads).
    MbPerS,
    /// Transactions per second (an OLTP application's).
    Tps,
}

impl Metric {
    /// The field of an `isoe bench` JSON result that holds it.
    pub fn field(self) -> &'static str {
        match self {
            Metric::Iops => "iops",
            Metric::MbPerS => "mb_per_s",
            Metric::Tps => "tps",
        }
    }

    /// For people: "IOPS" or "MB/s".
    pub fn label(self) -> &'static str {
        match self {
            Metric::Iops => "IOPS",
            Metric::MbPerS => "MB/s",
            Metric::Tps => "TPS",
        }
    }
}

/// One run, as appended to `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The plan's name.
    pub plan: String,
    /// The test case ("baseline" for the baseline).
    pub case: String,
    /// The workload (a profile name, or a matrix cell name).
    pub workload: String,
    /// 1-based run number within this case × workload.
    pub run: u32,
    /// The topology the run used.
    pub topology: String,
    /// Every knob in force, as `name = value` for people (baseline merged with the case).
    pub knobs: BTreeMap<String, String>,
    /// Knobs the run could not apply, with the reason.
    pub skipped_knobs: BTreeMap<String, String>,
    /// Which metric the statistics use for this workload.
    pub metric: Metric,
    /// Its value in this run.
    pub value: f64,
    /// Host CPU steal during the run, % of all CPUs.
    pub steal_pct: f64,
    /// False when the run is kept only for the record (steal above the
    /// limit, or errors) and left out of the statistics.
    pub valid: bool,
    /// Why the run is not valid.
    pub invalid_reason: Option<String>,
    /// The round the run belongs to: every case runs once per round, in a
    /// shuffled order, so that its effect is paired with the reference run
    /// beside it (0 in results of a lab that had no rounds).
    #[serde(default)]
    pub round: u32,
    /// CPU used by processes other than the lab's own during the measured
    /// window (None when it could not be read).
    #[serde(default)]
    pub foreign: Option<ForeignLoad>,
    /// The `isoe bench` JSON result of the run (for fio runs, the same
    /// fields, converted), its `series` moved to [`RunRecord::series`].
    pub bench: serde_json::Value,
    /// The measured window second by second, as `isoe bench` wrote it in
    /// its `series`: empty for fio runs, which have none, and in results
    /// written before it existed.
    #[serde(default)]
    pub series: Vec<SeriesPoint>,
    /// When the run began (RFC 3339 UTC).
    pub started_at: String,
}

/// What a run's window cost the machine outside the run's own processes
/// (`isoe bench`'s `foreign`, as the lab measures it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForeignLoad {
    /// Busy time of neither the lab's processes, nor kernel threads, nor
    /// interrupts, in % of one CPU.
    pub cpu_pct: f64,
    /// Kernel threads, % of one CPU (mostly the runs' own network work).
    pub kernel_threads_pct: f64,
    /// irq and softirq time, % of one CPU.
    pub interrupts_pct: f64,
    /// The run's own processes (the roots and their descendants), % of one CPU.
    pub ours_pct: f64,
    /// The largest foreign processes seen in both snapshots, as (command,
    /// % of one CPU), largest first.
    pub top: Vec<(String, f64)>,
}

impl ForeignLoad {
    /// For people: "23.1% of a CPU (stress-ng-cpu 22.0%, ...)", as `isoe
    /// bench` says it.
    pub fn describe(&self) -> String {
        let top: Vec<String> = self
            .top
            .iter()
            .map(|(comm, pct)| format!("{comm} {pct:.1}%"))
            .collect();
        if top.is_empty() {
            format!("{:.1}% of a CPU", self.cpu_pct)
        } else {
            format!("{:.1}% of a CPU ({})", self.cpu_pct, top.join(", "))
        }
    }
}

/// One entry of a result's `series`: a second of the measured window. A
/// field missing from the JSON reads as 0.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesPoint {
    /// Its start, seconds since the measured window began (0, 1, 2, ...).
    pub t_s: f64,
    /// Its length, s: 1, but for the last entry, which runs to the end of
    /// the window and lasts 0.5 to 1.5 s (less only when the whole window
    /// was shorter than that).
    pub span_s: f64,
    /// Commands completed with GOOD status, reads and writes.
    pub ios: u64,
    /// Commands per second.
    pub iops: f64,
    /// MB/s, MB = 10^6 bytes.
    pub mb_per_s: f64,
    /// Reads per second.
    pub read_iops: f64,
    /// Read MB/s.
    pub read_mb_per_s: f64,
    /// Writes per second.
    pub write_iops: f64,
    /// Write MB/s.
    pub write_mb_per_s: f64,
    /// Commands that failed in this second.
    pub errors: u64,
    /// Latency of this second's commands alone, µs (a histogram of its own,
    /// not a running one).
    pub lat_us: LatencySummary,
}

/// Latency statistics in microseconds. In JSON the fields are named without
/// the unit (`p50`, `max`, ...) because the object sits under a `lat_us` key.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Commands recorded.
    pub count: u64,
    /// Smallest latency, µs.
    #[serde(rename = "min")]
    pub min_us: f64,
    /// Mean latency, µs.
    #[serde(rename = "mean")]
    pub mean_us: f64,
    /// Median, µs.
    #[serde(rename = "p50")]
    pub p50_us: f64,
    /// 90th percentile, µs.
    #[serde(rename = "p90")]
    pub p90_us: f64,
    /// 99th percentile, µs.
    #[serde(rename = "p99")]
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    #[serde(rename = "p999")]
    pub p999_us: f64,
    /// Largest latency, µs.
    #[serde(rename = "max")]
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of results.jsonl as a lab without series wrote it.
    const OLD_LINE: &str = r#"{"plan":"quick","case":"baseline","workload":"oltp-8k","run":1,
        "topology":"loopback","knobs":{},"skipped_knobs":{},"metric":"iops","value":1000.0,
        "steal_pct":0.1,"valid":true,"invalid_reason":null,"round":1,"foreign":null,
        "bench":{"iops":1000.0},"started_at":"2026-11-21T08:00:00Z"}"#;

    #[test]
    fn old_records_load_without_a_series_and_new_ones_keep_it() {
        let old: RunRecord = serde_json::from_str(OLD_LINE).unwrap();
        assert!(old.series.is_empty());
        assert_eq!(old.value, 1000.0);
        let mut new = old.clone();
        new.series = vec![SeriesPoint {
            t_s: 0.0,
            span_s: 1.0,
            ios: 990,
            iops: 990.0,
            ..Default::default()
        }];
        let line = serde_json::to_string(&new).unwrap();
        let back: RunRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, new);
        assert_eq!(back.series[0].iops, 990.0);
    }
}
