//! The report's charts, from the cell summaries to SVG:
//!
//! 1. % change over the baseline per workload (seed 001 Figures 3–9);
//! 2. MB/s per CPU% per case and side (seed 000);
//! 3. log2 latency histograms, reads and writes (seed 003);
//! 4. retransmissions and CPU per case (seed 001 Figure 6);
//! 5. the workload's metric second by second, each case's latest valid run.

use super::numbers::{change, change_ci, num, pct, small_pct, verdict};
use super::svg::{
    Band, Bar, BarChart, Histogram, Interval, Key, Line, LineChart, Panel, Row, Series,
};
use super::{Buckets, CellSummary, ReportInput, WorkloadInfo};
use crate::record::{Metric, RunRecord, SeriesPoint};
use crate::stats::Effect;

/// Colours for workloads (Tableau 10 and two more), in the plan's order.
const WORKLOAD_COLORS: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f",
    "#ff9da7", "#bab0ac", "#1f4e79", "#8c564b",
];
/// Host-wide, initiator, target.
const SIDE_COLORS: [&str; 3] = ["#4e79a7", "#f28e2b", "#59a14f"];
const READ_COLOR: &str = "#4e79a7";
const WRITE_COLOR: &str = "#f28e2b";
const RETRANS_COLOR: &str = "#e15759";
const DSACK_COLOR: &str = "#b07aa1";
/// The retransmission panel's axis reaches at least this, % of segments.
const RETRANS_AXIS_FLOOR_PCT: f64 = 1.0;

fn cell<'a>(cells: &'a [CellSummary], case: &str, workload: &str) -> Option<&'a CellSummary> {
    cells
        .iter()
        .find(|c| c.case == case && c.workload == workload)
}

/// What a case changes, on one line: "mtu = 9000, tso = off".
pub fn knobs_line(input: &ReportInput, case: &str) -> String {
    input
        .cases
        .iter()
        .find(|c| c.name == case)
        .map(|c| {
            c.knobs_changed
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// What a case changes from its reference, on one line, the reference
/// named when it is not the baseline: "vs tso-off: tx = false".
fn changes_line(input: &ReportInput, case: &str) -> String {
    let changes = input
        .changes_from_reference(case)
        .into_iter()
        .map(|(k, _, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let reference = input.reference_of(case);
    if input.baseline().is_some_and(|b| b.name == reference) {
        changes
    } else {
        format!("vs {reference}: {changes}")
    }
}

fn case_rows(input: &ReportInput, skip_baseline: bool) -> Vec<Row> {
    input
        .cases
        .iter()
        .skip(usize::from(skip_baseline))
        .enumerate()
        .map(|(i, c)| Row {
            label: c.name.clone(),
            sublabel: match (i == 0 && !skip_baseline, c.name == "baseline") {
                (true, true) => String::new(),
                (true, false) => "(the baseline)".to_string(),
                _ => changes_line(input, &c.name),
            },
        })
        .collect()
}

/// The error bar of an effect: its 95% interval, when a test gave one.
fn interval(e: &Effect) -> Option<Interval> {
    let (lo, hi) = (e.ci_low_pct?, e.ci_high_pct?);
    Some(Interval {
        lo,
        hi,
        label: format!("95% CI {lo:+.1} to {hi:+.1}%"),
    })
}

/// Chart 1: one group per case, one bar per workload, its % change over the
/// baseline; significant bars solid, the others hatched; the ±threshold
/// band; each change's 95% interval as an error bar.
pub fn change_over_baseline(input: &ReportInput, cells: &[CellSummary]) -> String {
    let threshold = input.rules.significance_pct;
    let series: Vec<Series> = input
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| Series {
            name: format!("{} ({})", w.name, w.metric.label()),
            color: WORKLOAD_COLORS[i % WORKLOAD_COLORS.len()],
        })
        .collect();
    let bars = input
        .cases
        .iter()
        .skip(1)
        .map(|case| {
            input
                .workloads
                .iter()
                .map(|w| {
                    let e = cell(cells, &case.name, &w.name)?.effect?;
                    Some(Bar {
                        value: e.change_pct,
                        solid: e.significant && e.conclusive,
                        label: change(e.change_pct),
                        tooltip: format!(
                            "{} × {}: {} {} over {} ({})",
                            case.name,
                            w.name,
                            change_ci(&e),
                            w.metric.label(),
                            input.reference_of(&case.name),
                            verdict(&e)
                        ),
                        interval: interval(&e),
                    })
                })
                .collect()
        })
        .collect();
    BarChart {
        id: "change".into(),
        title: format!(
            "% change over the baseline (or the case compared to), per workload ({})",
            input.plan_name
        ),
        rows: case_rows(input, true),
        panels: vec![Panel {
            title: "change of the workload's metric over the reference's mean".into(),
            unit: "%".into(),
            series,
            bars,
            band: Some(Band {
                lo: -threshold,
                hi: threshold,
            }),
            axis_floor: 0.0,
        }],
        keys: vec![
            Key::Hatched(format!(
                "not significant (within ±{threshold}%, or no test rejects 0) or inconclusive"
            )),
            Key::Band(format!("±{threshold}% of the reference's mean")),
            Key::ErrorBar("95% confidence interval of the change".into()),
        ],
        empty_message: if input.cases.len() < 2 {
            "No data: the plan has no case besides the baseline, so there is nothing to compare."
                .into()
        } else {
            "No data: no case has valid runs on a workload where the baseline has valid runs."
                .into()
        },
    }
    .render()
}

/// Chart 2 for one workload: MB/s per CPU% of each case, host-wide, the
/// initiator's and the target's.
pub fn effectiveness(
    input: &ReportInput,
    cells: &[CellSummary],
    w: &WorkloadInfo,
    id: usize,
) -> String {
    let series = side_series();
    let bars = input
        .cases
        .iter()
        .map(|case| {
            let c = cell(cells, &case.name, &w.name);
            [
                c.and_then(|c| c.system.mb_per_s_per_cpu_pct),
                c.and_then(|c| c.initiator.mb_per_s_per_cpu_pct),
                c.and_then(|c| c.target.mb_per_s_per_cpu_pct),
            ]
            .iter()
            .zip(&series)
            .map(|(v, s)| {
                v.map(|v| Bar {
                    value: v,
                    solid: true,
                    label: num(Some(v)),
                    tooltip: format!(
                        "{} × {}, {}: {} MB/s per CPU%",
                        case.name,
                        w.name,
                        s.name,
                        num(Some(v))
                    ),
                    // A mean of ratios of means: no interval is computed.
                    interval: None,
                })
            })
            .collect()
        })
        .collect();
    BarChart {
        id: format!("eff-{id}"),
        title: format!("{}: MB/s per CPU% (higher is better)", w.name),
        rows: case_rows(input, false),
        panels: vec![Panel {
            title: "MB/s ÷ CPU% (CPU% of all the host's CPUs)".into(),
            unit: String::new(),
            series,
            bars,
            band: None,
            axis_floor: 0.0,
        }],
        keys: vec![],
        empty_message: format!(
            "No data: no case has valid runs of {} with CPU figures.",
            w.name
        ),
    }
    .render()
}

fn side_series() -> Vec<Series> {
    ["host (system-wide)", "initiator process", "target process"]
        .iter()
        .zip(SIDE_COLORS)
        .map(|(n, c)| Series {
            name: n.to_string(),
            color: c,
        })
        .collect()
}

/// Chart 4 for one workload: retransmitted segments and D-SACKs received,
/// both as % of the segments sent, beside CPU% per side, per case.
pub fn retrans_and_cpu(
    input: &ReportInput,
    cells: &[CellSummary],
    w: &WorkloadInfo,
    id: usize,
) -> String {
    let mut retrans = Vec::new();
    let mut cpu = Vec::new();
    for case in &input.cases {
        let c = cell(cells, &case.name, &w.name);
        let tooltip = format!(
            "{} × {}: {} of {} segments sent retransmitted per run, {} D-SACK segments received",
            case.name,
            w.name,
            num(c.and_then(|c| c.retrans_segs)),
            num(c.and_then(|c| c.out_segs)),
            num(c.and_then(|c| c.dsack_segs)),
        );
        let bar = |v: f64| Bar {
            value: v,
            solid: true,
            label: format!("{}%", small_pct(v)),
            tooltip: tooltip.clone(),
            // Means of the runs' counts: no interval is computed.
            interval: None,
        };
        retrans.push(vec![
            c.and_then(|c| c.retrans_pct).map(bar),
            c.and_then(|c| c.dsack_pct).map(bar),
        ]);
        let sides = [
            ("host", c.and_then(|c| c.system.cpu_pct)),
            ("initiator", c.and_then(|c| c.initiator.cpu_pct)),
            ("target", c.and_then(|c| c.target.cpu_pct)),
        ];
        cpu.push(
            sides
                .iter()
                .map(|(side, v)| {
                    v.map(|v| Bar {
                        value: v,
                        solid: true,
                        label: format!("{}%", pct(Some(v))),
                        tooltip: format!(
                            "{} × {}: {side} CPU {}% of all CPUs",
                            case.name,
                            w.name,
                            pct(Some(v))
                        ),
                        interval: None,
                    })
                })
                .collect(),
        );
    }
    let mut cpu_series = side_series();
    cpu_series[0].name = "host busy (system-wide)".into();
    BarChart {
        id: format!("retr-{id}"),
        title: format!("{}: retransmissions and CPU", w.name),
        rows: case_rows(input, false),
        panels: vec![
            Panel {
                title: "retransmitted and D-SACK, % of segments sent".into(),
                unit: "%".into(),
                series: vec![
                    Series {
                        name: "retransmitted segments".into(),
                        color: RETRANS_COLOR,
                    },
                    Series {
                        name: "D-SACKs received (spurious retransmits)".into(),
                        color: DSACK_COLOR,
                    },
                ],
                bars: retrans,
                band: None,
                // 1% of segments: below it retransmissions cost next to
                // nothing, and a 0.0001% bar must not look like a full one.
                axis_floor: RETRANS_AXIS_FLOOR_PCT,
            },
            Panel {
                title: "CPU, % of all CPUs".into(),
                unit: "%".into(),
                series: cpu_series,
                bars: cpu,
                band: None,
                axis_floor: 0.0,
            },
        ],
        keys: vec![],
        empty_message: format!("No data: no case has valid runs of {}.", w.name),
    }
    .render()
}

/// The x categories shared by a workload's histograms: every bucket any case
/// has, and the doublings between them, ascending (at most 64).
pub fn shared_uppers(hists: &[&Buckets]) -> Vec<f64> {
    let mut all: Vec<f64> = hists.iter().flat_map(|h| h.iter().map(|b| b.0)).collect();
    all.sort_by(f64::total_cmp);
    all.dedup();
    let mut out: Vec<f64> = Vec::new();
    for u in all {
        if let Some(&last) = out.last() {
            let mut next = last * 2.0;
            while next < u * 0.999 && out.len() < 64 {
                out.push(next);
                next *= 2.0;
            }
        }
        if out.len() < 64 {
            out.push(u);
        }
    }
    out
}

/// `hist`'s counts at each of `uppers` (0 where it has no such bucket).
pub(super) fn aligned(uppers: &[f64], hist: &Buckets) -> Vec<u64> {
    uppers
        .iter()
        .map(|u| {
            hist.iter()
                .filter(|b| (b.0 - u).abs() <= u * 1e-9)
                .map(|b| b.1)
                .sum()
        })
        .collect()
}

/// Chart 3 for one workload: a small multiple per case, reads and writes.
pub fn histograms(input: &ReportInput, cells: &[CellSummary], w: &WorkloadInfo) -> Vec<String> {
    let of_workload: Vec<&CellSummary> = input
        .cases
        .iter()
        .filter(|c| c.runs(&w.name))
        .filter_map(|c| cell(cells, &c.name, &w.name))
        .collect();
    let hists: Vec<&Buckets> = of_workload
        .iter()
        .flat_map(|c| [&c.read.hist, &c.write.hist])
        .collect();
    let uppers = shared_uppers(&hists);
    input
        .cases
        .iter()
        .filter(|case| case.runs(&w.name))
        .map(|case| {
            let c = cell(cells, &case.name, &w.name);
            let empty_message = match c {
                Some(c) if c.runs_valid + c.runs_invalid == 0 => "not run".to_string(),
                Some(c) if c.runs_valid == 0 => "no valid runs".to_string(),
                Some(c) if c.hist_runs == 0 => {
                    "no histogram: the runs' results carry no lat_hist".to_string()
                }
                _ => "no histogram".to_string(),
            };
            let empty = Buckets::new();
            let (read, write) = c.map_or((&empty, &empty), |c| (&c.read.hist, &c.write.hist));
            Histogram {
                title: case.name.clone(),
                uppers: uppers.clone(),
                series: vec![
                    (
                        Series {
                            name: "read".into(),
                            color: READ_COLOR,
                        },
                        aligned(&uppers, read),
                    ),
                    (
                        Series {
                            name: "write".into(),
                            color: WRITE_COLOR,
                        },
                        aligned(&uppers, write),
                    ),
                ],
                empty_message,
            }
            .render()
        })
        .collect()
}

/// The value of `metric` in one second of a run.
pub fn per_second(metric: Metric, p: &SeriesPoint) -> f64 {
    match metric {
        Metric::Iops => p.iops,
        Metric::MbPerS => p.mb_per_s,
        // An application's runs have no per-second series.
        Metric::Tps => 0.0,
    }
}

/// The run of `case` × `workload` whose seconds the report shows: the most
/// recent valid one that has a series; or why there is none.
pub fn latest_series<'a>(
    input: &'a ReportInput,
    case: &str,
    workload: &str,
) -> Result<&'a RunRecord, &'static str> {
    let runs: Vec<&RunRecord> = input
        .records
        .iter()
        .filter(|r| r.case == case && r.workload == workload)
        .collect();
    let valid: Vec<&RunRecord> = runs.iter().copied().filter(|r| r.valid).collect();
    if let Some(r) = valid.iter().rev().find(|r| !r.series.is_empty()) {
        return Ok(r);
    }
    Err(if runs.is_empty() {
        "not run"
    } else if valid.is_empty() {
        "no valid runs"
    } else if valid.iter().all(|r| {
        r.bench["initiator"]
            .as_str()
            .is_some_and(|i| i.contains("fio"))
    }) {
        "fio runs (libiscsi, block devices) record no per-second series"
    } else {
        "its runs carry no per-second series (written by an older isoe bench)"
    })
}

/// Lowest, mean and highest per-second value of `r`'s series.
pub fn series_range(metric: Metric, r: &RunRecord) -> (f64, f64, f64) {
    let values: Vec<f64> = r.series.iter().map(|p| per_second(metric, p)).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    (lo.min(hi), mean, hi)
}

/// Chart 5 for one workload: its metric second by second, one line per
/// case (its most recent valid run), so that a stall shows as a dip; the
/// cases without a series are left out (the caption names them).
pub fn over_time(input: &ReportInput, w: &WorkloadInfo) -> String {
    let metric = w.metric;
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    for (i, case) in input
        .cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.runs(&w.name))
    {
        match latest_series(input, &case.name, &w.name) {
            Ok(r) => {
                let (lo, mean, hi) = series_range(metric, r);
                lines.push(Line {
                    series: Series {
                        name: format!("{} (run {})", case.name, r.run),
                        color: WORKLOAD_COLORS[i % WORKLOAD_COLORS.len()],
                    },
                    // Each second's rate at its middle.
                    points: r
                        .series
                        .iter()
                        .map(|p| (p.t_s + p.span_s / 2.0, per_second(metric, p)))
                        .collect(),
                    tooltip: format!(
                        "{} × {}, run {}: {} {m} per second lowest, {} mean, {} highest, over {} s",
                        case.name,
                        w.name,
                        r.run,
                        num(Some(lo)),
                        num(Some(mean)),
                        num(Some(hi)),
                        r.series.len(),
                        m = metric.label()
                    ),
                });
            }
            Err(why) => missing.push(format!("{}: {why}", case.name)),
        }
    }
    LineChart {
        title: format!("{}: {} second by second", w.name, metric.label()),
        x_label: "seconds into the measured window".into(),
        y_label: metric.label().into(),
        lines,
        empty_message: format!(
            "No per-second data for {}: {}.",
            w.name,
            if missing.is_empty() {
                "no case runs it".to_string()
            } else {
                missing.join("; ")
            }
        ),
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_uppers_fill_the_doublings() {
        let a: Buckets = vec![(16.0, 1), (64.0, 2)];
        let b: Buckets = vec![(256.0, 1)];
        assert_eq!(
            shared_uppers(&[&a, &b]),
            vec![16.0, 32.0, 64.0, 128.0, 256.0]
        );
        assert_eq!(aligned(&[16.0, 32.0, 64.0], &a), vec![1, 0, 2]);
        assert!(shared_uppers(&[]).is_empty());
    }
}
