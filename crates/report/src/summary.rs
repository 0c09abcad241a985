//! One summary per case × workload: the statistics of seed 001 §3.3 on the
//! workload's metric, and the means of everything else the charts show,
//! taken from the `isoe bench` JSON of the cell's valid runs.

use super::ReportInput;
use crate::record::{Metric, RunRecord};
use crate::stats::{owed_a_round, Effect, Next, Sample, Summary};
use serde_json::Value;
use std::collections::BTreeMap;

/// A log2 latency histogram: `(upper_us, count)`, a bucket holding
/// latencies in (upper_us / 2, upper_us], ascending.
pub type Buckets = Vec<(f64, u64)>;

/// CPU figures of one side, each the mean over the cell's valid runs that
/// reported it (None when none did, e.g. the target's CPU when its process
/// was not found).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SideCpu {
    /// CPU used, % of all CPUs of the host (0–100).
    pub cpu_pct: Option<f64>,
    /// Service demand: CPU-µs per I/O.
    pub cpu_us_per_io: Option<f64>,
    /// Service demand: CPU-µs per KiB.
    pub cpu_us_per_kib: Option<f64>,
    /// CPU effectiveness: MB/s per CPU% (seed 000).
    pub mb_per_s_per_cpu_pct: Option<f64>,
    /// IOPS per CPU% (Iometer's field).
    pub iops_per_cpu_pct: Option<f64>,
}

/// Latency of one direction (or both), means of the runs' percentiles, and
/// the runs' log2 histograms merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Mean of the runs' medians, µs.
    pub us_p50: Option<f64>,
    /// Mean of the runs' 99th percentiles, µs.
    pub us_p99: Option<f64>,
    /// Sum of the runs' `lat_hist` buckets; empty when no run carried one
    /// (or the direction did no I/O).
    pub hist: Buckets,
}

/// The summary of one case × workload.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSummary {
    /// The case.
    pub case: String,
    /// The workload.
    pub workload: String,
    /// The metric the statistics are on.
    pub metric: Metric,
    /// Runs kept in the statistics.
    pub runs_valid: u32,
    /// Runs recorded but left out (steal, errors).
    pub runs_invalid: u32,
    /// Mean, median, RSD and N of the metric over the valid runs.
    pub stats: Option<Summary>,
    /// The seeds' RSD verdict on those values: `Converged`, `NotConverged`
    /// (cap reached), or `RunAgain` (RSD above the target below the cap;
    /// the rounds stop on the comparison, not on this, see `unfinished`).
    pub next: Next,
    /// `next == Converged`: the seeds' RSD target met.
    pub converged: bool,
    /// The cell did not get its rounds: the rules still owe it one
    /// ([`crate::stats::owed_a_round`]), because the plan stopped before
    /// or the cell was given up.
    pub unfinished: bool,
    /// The valid runs' values with their rounds, for the paired tests.
    pub samples: Vec<Sample>,
    /// What the effects are measured against: the baseline, or the case's
    /// `compare_to`; None for the baseline itself.
    pub reference: Option<String>,
    /// Change of the metric over the reference, with its interval and
    /// significance (paired by round); None for the baseline and when
    /// either side has no valid run.
    pub effect: Option<Effect>,
    /// Change of the host's CPU-µs per I/O over the reference's, tested the
    /// same way (negative saves CPU).
    pub cpu_effect: Option<Effect>,
    /// Change of the initiator's own CPU-µs per I/O, tested the same way.
    pub initiator_cpu_effect: Option<Effect>,
    /// Change of the target's own CPU-µs per I/O, tested the same way.
    pub target_cpu_effect: Option<Effect>,
    /// Change of the host's MB/s per CPU% (seed 000's CPU effectiveness),
    /// tested the same way (positive: more work per unit of CPU).
    pub effectiveness_effect: Option<Effect>,
    /// Mean MB/s (10^6 bytes/s).
    pub mb_per_s: Option<f64>,
    /// Mean IOPS.
    pub iops: Option<f64>,
    /// The initiator process.
    pub initiator: SideCpu,
    /// The target process.
    pub target: SideCpu,
    /// The whole host (`/proc/stat`): busy %, and its effectiveness.
    pub system: SideCpu,
    /// On a test bed whose target has a host of its own: that host's
    /// whole busy time per I/O, µs, mean (None elsewhere: in namespaces
    /// [`CellSummary::system`] holds both sides).
    pub target_host_cpu_us_per_io: Option<f64>,
    /// Mean host CPU steal, %.
    pub steal_pct: Option<f64>,
    /// Mean CPU of processes other than the lab's over the valid runs, %
    /// of one CPU (None when no run measured it).
    pub foreign_pct: Option<f64>,
    /// The largest foreign load of any run of the cell, valid or not, %
    /// of one CPU, with what it was.
    pub foreign_max: Option<(f64, String)>,
    /// Mean retransmitted segments, % of segments sent.
    pub retrans_pct: Option<f64>,
    /// Mean retransmitted segments per run.
    pub retrans_segs: Option<f64>,
    /// Mean D-SACK segments received per run (spurious retransmits).
    pub dsack_segs: Option<f64>,
    /// Mean D-SACK segments received as a share of segments sent, % (to
    /// draw beside `retrans_pct` on one axis).
    pub dsack_pct: Option<f64>,
    /// Mean segments sent per run.
    pub out_segs: Option<f64>,
    /// The target side's mean retransmitted segments, % of those it sent
    /// (its own namespace's or host's counters; None where it shares the
    /// initiator's, whose figures the fields above are).
    pub target_retrans_pct: Option<f64>,
    /// The target side's mean retransmitted segments per run.
    pub target_retrans_segs: Option<f64>,
    /// The target side's mean segments sent per run.
    pub target_out_segs: Option<f64>,
    /// All commands.
    pub latency: Latency,
    /// Reads.
    pub read: Latency,
    /// Writes.
    pub write: Latency,
    /// Valid runs whose bench JSON carried `lat_hist`.
    pub hist_runs: u32,
    /// The commands in flight in all (`in_flight`) the valid runs were
    /// given, each figure once, ascending: one figure unless the runs
    /// differ (empty for applications and results that predate the field).
    pub in_flight: Vec<u64>,
}

/// Summarises every case × workload of the plan, cases in the plan's order
/// (baseline first), workloads in the plan's order within each case.
pub fn summarize(input: &ReportInput) -> Vec<CellSummary> {
    let mut cells = Vec::with_capacity(input.cases.len() * input.workloads.len());
    for case in &input.cases {
        // A case the plan runs on fewer workloads has no cell for the others.
        for workload in input.workloads.iter().filter(|w| case.runs(&w.name)) {
            cells.push(cell(input, &case.name, &workload.name, workload.metric));
        }
    }
    // Effects need every reference cell first.
    let baseline = input.baseline().map(|c| c.name.clone()).unwrap_or_default();
    let by_key: BTreeMap<(String, String), CellSamples> = cells
        .iter()
        .map(|c| ((c.case.clone(), c.workload.clone()), samples_of(input, c)))
        .collect();
    for c in cells.iter_mut().filter(|c| c.case != baseline) {
        let reference = input.reference_of(&c.case).to_string();
        let key = |case: &str| (case.to_string(), c.workload.clone());
        if let (Some(r), Some(own)) = (by_key.get(&key(&reference)), by_key.get(&key(&c.case))) {
            let rules = &input.rules;
            c.effect = rules.compare(&r.metric, &own.metric);
            c.cpu_effect = rules.compare(&r.system_cpu, &own.system_cpu);
            c.initiator_cpu_effect = rules.compare(&r.initiator_cpu, &own.initiator_cpu);
            c.target_cpu_effect = rules.compare(&r.target_cpu, &own.target_cpu);
            c.effectiveness_effect = rules.compare(&r.effectiveness, &own.effectiveness);
        }
        c.reference = Some(reference);
    }
    for c in &mut cells {
        let conclusive = c
            .reference
            .as_ref()
            .map(|_| c.effect.is_some_and(|e| e.conclusive));
        c.unfinished = owed_a_round(&input.rules, c.runs_valid, conclusive);
    }
    cells
}

/// Per-run figures of a cell's valid runs, with their rounds.
struct CellSamples {
    metric: Vec<Sample>,
    system_cpu: Vec<Sample>,
    initiator_cpu: Vec<Sample>,
    target_cpu: Vec<Sample>,
    effectiveness: Vec<Sample>,
}

fn samples_of(input: &ReportInput, c: &CellSummary) -> CellSamples {
    let runs = valid_runs(input, &c.case, &c.workload);
    let of = |key: &str| samples(&runs, |b| field(b, &[key]));
    CellSamples {
        metric: c.samples.clone(),
        system_cpu: of("system_cpu_us_per_io"),
        initiator_cpu: of("initiator_cpu_us_per_io"),
        target_cpu: of("target_cpu_us_per_io"),
        effectiveness: of("mb_per_s_per_cpu_pct"),
    }
}

/// The valid runs of `case` × `workload`, in the records' order.
pub(super) fn valid_runs<'a>(
    input: &'a ReportInput,
    case: &str,
    workload: &str,
) -> Vec<&'a RunRecord> {
    input
        .records
        .iter()
        .filter(|r| r.case == case && r.workload == workload && r.valid)
        .collect()
}

/// `f` of each run that has it, with the run's round: what
/// [`crate::stats::Rules::compare`] pairs.
pub(super) fn samples(runs: &[&RunRecord], f: impl Fn(&Value) -> Option<f64>) -> Vec<Sample> {
    runs.iter()
        .filter_map(|r| {
            Some(Sample {
                round: r.round,
                value: f(&r.bench)?,
            })
        })
        .collect()
}

fn cell(input: &ReportInput, case: &str, workload: &str, metric: Metric) -> CellSummary {
    let mut runs: Vec<&RunRecord> = input
        .records
        .iter()
        .filter(|r| r.case == case && r.workload == workload)
        .collect();
    runs.sort_by_key(|r| r.run);
    let runs_invalid = runs.iter().filter(|r| !r.valid).count() as u32;
    let foreign_max = runs
        .iter()
        .filter_map(|r| r.foreign.as_ref())
        .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
        .map(|f| (f.cpu_pct, f.describe()));
    runs.retain(|r| r.valid && r.value.is_finite());
    let values: Vec<f64> = runs.iter().map(|r| r.value).collect();
    let next = input.rules.next(&values);
    let side = |prefix: &str| SideCpu {
        cpu_pct: mean(&runs, |b| field(b, &[&format!("{prefix}_cpu_pct")])),
        cpu_us_per_io: mean(&runs, |b| field(b, &[&format!("{prefix}_cpu_us_per_io")])),
        cpu_us_per_kib: mean(&runs, |b| field(b, &[&format!("{prefix}_cpu_us_per_kib")])),
        mb_per_s_per_cpu_pct: mean(&runs, |b| {
            field(b, &[&format!("{prefix}_mb_per_s_per_cpu_pct")])
        }),
        iops_per_cpu_pct: mean(&runs, |b| {
            field(b, &[&format!("{prefix}_iops_per_cpu_pct")]).or_else(|| {
                // bench reports no target IOPS per CPU%: derive it per run.
                let cpu = field(b, &[&format!("{prefix}_cpu_pct")]).filter(|c| *c > 0.0)?;
                Some(field(b, &["iops"])? / cpu)
            })
        }),
    };
    let hist_runs = runs
        .iter()
        .filter(|r| r.bench.get("lat_hist").is_some_and(Value::is_object))
        .count() as u32;
    let mut in_flight: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.bench.get("in_flight").and_then(Value::as_u64))
        .collect();
    in_flight.sort_unstable();
    in_flight.dedup();
    CellSummary {
        in_flight,
        case: case.to_string(),
        workload: workload.to_string(),
        metric,
        runs_valid: runs.len() as u32,
        runs_invalid,
        stats: Summary::of(&values),
        next,
        converged: next == Next::Converged,
        // Known once the effects are: see `summarize`.
        unfinished: false,
        samples: runs
            .iter()
            .map(|r| Sample {
                round: r.round,
                value: r.value,
            })
            .collect(),
        reference: None,
        effect: None,
        cpu_effect: None,
        initiator_cpu_effect: None,
        target_cpu_effect: None,
        effectiveness_effect: None,
        mb_per_s: mean(&runs, |b| field(b, &["mb_per_s"])),
        iops: mean(&runs, |b| field(b, &["iops"])),
        initiator: side("initiator"),
        target: side("target"),
        system: SideCpu {
            cpu_pct: mean(&runs, |b| field(b, &["cpu", "busy_pct"])),
            cpu_us_per_io: mean(&runs, |b| field(b, &["system_cpu_us_per_io"])),
            cpu_us_per_kib: mean(&runs, |b| field(b, &["system_cpu_us_per_kib"])),
            mb_per_s_per_cpu_pct: mean(&runs, |b| field(b, &["mb_per_s_per_cpu_pct"])),
            iops_per_cpu_pct: mean(&runs, |b| field(b, &["iops_per_cpu_pct"])),
        },
        target_host_cpu_us_per_io: mean(&runs, |b| field(b, &["target_host_cpu_us_per_io"])),
        steal_pct: mean(&runs, |b| field(b, &["steal_pct"])),
        foreign_pct: {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.foreign.as_ref())
                .map(|f| f.cpu_pct)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        },
        foreign_max,
        retrans_pct: mean(&runs, |b| field(b, &["retrans_pct"])),
        retrans_segs: mean(&runs, |b| field(b, &["retrans_segs"])),
        dsack_segs: mean(&runs, |b| field(b, &["dsack_segs"])),
        dsack_pct: mean(&runs, |b| {
            let out = field(b, &["out_segs"]).filter(|n| *n > 0.0)?;
            Some(100.0 * field(b, &["dsack_segs"])? / out)
        }),
        out_segs: mean(&runs, |b| field(b, &["out_segs"])),
        target_retrans_pct: mean(&runs, |b| field(b, &["target_tcp_retrans_pct"])),
        target_retrans_segs: mean(&runs, |b| field(b, &["target_tcp_retrans_segs"])),
        target_out_segs: mean(&runs, |b| field(b, &["target_tcp_out_segs"])),
        latency: latency(&runs, None),
        read: latency(&runs, Some("read")),
        write: latency(&runs, Some("write")),
        hist_runs,
    }
}

/// The number at `path` in a bench JSON object; None when absent, null,
/// or not finite.
pub(super) fn field(bench: &Value, path: &[&str]) -> Option<f64> {
    let mut v = bench;
    for key in path {
        v = v.get(key)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

/// Mean of `f` over the runs that have it.
pub(super) fn mean(runs: &[&RunRecord], f: impl Fn(&Value) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(|r| f(&r.bench)).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn latency(runs: &[&RunRecord], direction: Option<&str>) -> Latency {
    let lat = |b: &Value, q: &str| match direction {
        Some(d) => field(b, &[d, "lat_us", q]),
        None => field(b, &["lat_us", q]),
    };
    // A direction that did no I/O reports zeros: leave it out of the means.
    let did_io = |b: &Value| match direction {
        Some(d) => !matches!(field(b, &[d, "ios"]), Some(n) if n <= 0.0),
        None => true,
    };
    Latency {
        us_p50: mean(runs, |b| lat(b, "p50").filter(|_| did_io(b))),
        us_p99: mean(runs, |b| lat(b, "p99").filter(|_| did_io(b))),
        hist: match direction {
            Some(d) => merged_hist(runs, &[d]),
            None => merged_hist(runs, &["read", "write"]),
        },
    }
}

/// Sums the runs' `lat_hist` buckets of `directions`, bucket by upper bound.
fn merged_hist(runs: &[&RunRecord], directions: &[&str]) -> Buckets {
    // Upper bounds are whole powers of two in µs; key them by their bits.
    let mut sum: BTreeMap<u64, u64> = BTreeMap::new();
    for r in runs {
        for d in directions {
            let Some(buckets) = r
                .bench
                .get("lat_hist")
                .and_then(|h| h.get(d))
                .and_then(Value::as_array)
            else {
                continue;
            };
            for b in buckets {
                let upper = b.get(0).and_then(Value::as_f64);
                let count = b.get(1).and_then(Value::as_u64);
                if let (Some(upper), Some(count)) = (upper, count) {
                    if upper.is_finite() && upper > 0.0 {
                        *sum.entry(upper.to_bits()).or_default() += count;
                    }
                }
            }
        }
    }
    let mut out: Buckets = sum
        .into_iter()
        .map(|(bits, n)| (f64::from_bits(bits), n))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.retain(|&(_, n)| n > 0);
    out
}
