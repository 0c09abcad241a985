//! What the reader must be told besides the numbers: the runner's notes,
//! cells that did not converge or did not finish, runs left out and why,
//! knobs that could not be applied, and data the charts lack.

use super::{CellSummary, ReportInput};
use crate::stats::Next;
use std::collections::{BTreeMap, BTreeSet};

/// One note: a sentence, and the cases it lists (plain text; the renderers
/// escape it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The sentence.
    pub text: String,
    /// What it is about, one item a line.
    pub items: Vec<String>,
}

impl Note {
    fn new(text: impl Into<String>, items: Vec<String>) -> Note {
        Note {
            text: text.into(),
            items,
        }
    }
}

/// Every note, the runner's first.
pub fn notes(input: &ReportInput, cells: &[CellSummary]) -> Vec<Note> {
    let mut out: Vec<Note> = input
        .notes
        .iter()
        .map(|n| Note::new(n.clone(), Vec::new()))
        .collect();
    let cell_name = |c: &CellSummary| format!("{} × {}", c.case, c.workload);

    out.extend(cell_notes(input, cells));
    out.extend(not_run(input, cells));
    out.extend(invalid_runs(input));
    out.extend(skipped_knobs(input));

    let no_hist: Vec<String> = cells
        .iter()
        .filter(|c| c.runs_valid > 0 && c.hist_runs < c.runs_valid)
        .map(|c| {
            format!(
                "{}: {} of {} runs without lat_hist",
                cell_name(c),
                c.runs_valid - c.hist_runs,
                c.runs_valid
            )
        })
        .collect();
    if !no_hist.is_empty() {
        out.push(Note::new(
            "Latency histograms incomplete: some runs' results carry no lat_hist (older \
             isoe bench, or fio), so their histograms are missing or drawn from fewer runs; \
             the percentiles still come from every run.",
            no_hist,
        ));
    }

    let no_target_cpu: Vec<String> = cells
        .iter()
        .filter(|c| c.runs_valid > 0 && c.target.cpu_pct.is_none())
        .map(cell_name)
        .collect();
    if !no_target_cpu.is_empty() {
        out.push(Note::new(
            "Target CPU unknown: the target's process was not found in these cells, so its \
             CPU columns show “–” (the host-wide figures still count it).",
            no_target_cpu,
        ));
    }

    out.extend(stray_records(input));
    out
}

/// The cells that are above the RSD target, unfinished, or have no valid run.
fn cell_notes(input: &ReportInput, cells: &[CellSummary]) -> Vec<Note> {
    let mut out = Vec::new();
    let r = &input.rules;
    let cell_name = |c: &CellSummary| format!("{} × {}", c.case, c.workload);

    let not_converged: Vec<String> = cells
        .iter()
        .filter(|c| c.next == Next::NotConverged)
        .filter_map(|c| {
            let s = c.stats?;
            Some(format!(
                "{}: RSD {:.2}% after {}",
                cell_name(c),
                s.rsd_pct,
                runs(s.n as usize)
            ))
        })
        .collect();
    if !not_converged.is_empty() {
        out.push(Note::new(
            format!(
                "Above the seeds' RSD target: {} of {} cells had an RSD above {}% after their \
                 runs. The verdicts do not rest on it: each comparison is paired by round and \
                 decided by its confidence interval (see Findings); a cell's spread widens that \
                 interval, and a comparison it leaves straddling ±{}% is reported inconclusive.",
                not_converged.len(),
                cells.len(),
                r.rsd_target_pct,
                r.significance_pct
            ),
            not_converged,
        ));
    }

    let unfinished: Vec<String> = cells
        .iter()
        .filter(|c| c.unfinished && c.runs_valid > 0)
        .map(|c| format!("{}: {} valid", cell_name(c), runs(c.runs_valid as usize)))
        .collect();
    if !unfinished.is_empty() {
        out.push(Note::new(
            format!(
                "Unfinished: these cells did not get their rounds ({} each, up to {} while \
                 their comparison is inconclusive): the plan stopped before, or gave them up \
                 (see the invalid runs). Rerun the plan with the same output directory to \
                 resume a stopped plan.",
                r.min_runs, r.max_runs
            ),
            unfinished,
        ));
    }

    let empty: Vec<String> = cells
        .iter()
        .filter(|c| c.runs_valid == 0 && c.runs_invalid > 0)
        .map(|c| {
            format!(
                "{}: {} invalid",
                cell_name(c),
                runs(c.runs_invalid as usize)
            )
        })
        .collect();
    if !empty.is_empty() {
        out.push(Note::new(
            "No valid runs: these cells appear in the tables as “–” and in the charts as “n/a”.",
            empty,
        ));
    }
    out
}

/// "1 run", "3 runs".
fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".to_string()
    } else {
        format!("{n} runs")
    }
}

/// Cells without a single record, per case.
fn not_run(input: &ReportInput, cells: &[CellSummary]) -> Option<Note> {
    let items: Vec<String> = input
        .cases
        .iter()
        .filter(|case| !input.skipped_cases.iter().any(|(s, _)| *s == case.name))
        .filter_map(|case| {
            let missing: Vec<&str> = cells
                .iter()
                .filter(|c| c.case == case.name && c.runs_valid + c.runs_invalid == 0)
                .filter(|c| case.runs(&c.workload))
                .map(|c| c.workload.as_str())
                .collect();
            (!missing.is_empty()).then(|| format!("{}: {}", case.name, missing.join(", ")))
        })
        .collect();
    (!items.is_empty()).then(|| {
        Note::new(
            "Not run: these cases have no runs of these workloads (the plan stopped before \
             them); the tables show “not run” and “–”.",
            items,
        )
    })
}

/// Runs left out of the statistics, those repeated for steal apart.
fn invalid_runs(input: &ReportInput) -> Vec<Note> {
    let steal_max = input.rules.steal_max_pct;
    let mut steal = Vec::new();
    let mut other = Vec::new();
    for r in input.records.iter().filter(|r| !r.valid) {
        let name = format!("{} × {} run {}", r.case, r.workload, r.run);
        let reason = r.invalid_reason.as_deref();
        if r.steal_pct > steal_max {
            let steal_pct = format!("steal {:.1}%", r.steal_pct);
            steal.push(match reason {
                Some(why) if !why.contains(&steal_pct) => format!("{name}: {steal_pct}; {why}"),
                _ => format!("{name}: {steal_pct}"),
            });
        } else {
            other.push(format!(
                "{name}: {}",
                reason.unwrap_or("no reason recorded")
            ));
        }
    }
    let mut out = Vec::new();
    if !steal.is_empty() {
        out.push(Note::new(
            format!(
                "Repeated for CPU steal: {} lost more than {steal_max}% of the host's CPU to \
                 the hypervisor. Such runs are run again, kept in results.jsonl, and left out \
                 of the statistics.",
                runs(steal.len())
            ),
            steal,
        ));
    }
    if !other.is_empty() {
        out.push(Note::new(
            format!(
                "Invalid runs: {} left out of the statistics.",
                runs(other.len())
            ),
            other,
        ));
    }
    out
}

/// Knobs the runs could not apply, each reason once with the cases it hit.
fn skipped_knobs(input: &ReportInput) -> Option<Note> {
    let mut seen: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for r in &input.records {
        for (knob, reason) in &r.skipped_knobs {
            seen.entry((knob.clone(), reason.clone()))
                .or_default()
                .insert(r.case.clone());
        }
    }
    if seen.is_empty() {
        return None;
    }
    let items = seen
        .into_iter()
        .map(|((knob, reason), cases)| {
            let cases: Vec<String> = cases.into_iter().collect();
            format!("{knob}: {reason} (cases: {})", cases.join(", "))
        })
        .collect();
    Some(Note::new(
        "Skipped knobs: these settings could not be applied, so the cases that set them ran \
         without them; their results measure the rest of the case only.",
        items,
    ))
}

/// Records the plan does not name, and cases run on another topology.
fn stray_records(input: &ReportInput) -> Vec<Note> {
    let cases: BTreeSet<&str> = input.cases.iter().map(|c| c.name.as_str()).collect();
    let workloads: BTreeSet<&str> = input.workloads.iter().map(|w| w.name.as_str()).collect();
    let mut unknown: BTreeMap<String, u32> = BTreeMap::new();
    let mut topologies: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in &input.records {
        if !cases.contains(r.case.as_str()) || !workloads.contains(r.workload.as_str()) {
            *unknown
                .entry(format!("{} × {}", r.case, r.workload))
                .or_default() += 1;
        }
        if r.topology != input.topology {
            topologies.entry(&r.case).or_default().insert(&r.topology);
        }
    }
    let mut out = Vec::new();
    if !unknown.is_empty() {
        out.push(Note::new(
            "Records not in the plan (left out of the report; a changed plan file?).",
            unknown
                .into_iter()
                .map(|(k, n)| format!("{k}: {}", runs(n as usize)))
                .collect(),
        ));
    }
    if !topologies.is_empty() {
        out.push(Note::new(
            format!(
                "Other topologies: these cases ran (in part) on another topology than the \
                 plan's {}, so their change over the baseline includes the topology's.",
                input.topology
            ),
            topologies
                .into_iter()
                .map(|(case, t)| {
                    format!("{case}: {}", t.into_iter().collect::<Vec<_>>().join(", "))
                })
                .collect(),
        ));
    }
    out
}
