//! The recommended configuration (seed 001 Tables 6–9): per workload, the
//! settings whose case gained significantly over its reference (the
//! baseline, or the case it is compared to), those whose
//! case lost significantly (avoid), and those that only saved CPU; then,
//! over all workloads, which settings to adopt.
//!
//! Seed 001 §5 recommends non-default settings "only when a compelling
//! difference in performance for one or more workloads was observed, or when
//! a setting is known to provide benefit during ... heavy CPU utilization";
//! here "compelling" means significant (beyond the plan's threshold, with a
//! t-test rejecting "no change") and conclusive (the 95% interval wholly
//! beyond the threshold): a comparison whose interval straddles it is
//! listed as inconclusive and recommends nothing.

use super::{CellSummary, ReportInput};
use crate::record::Metric;
use crate::stats::Effect;

/// One knob as a case sets it, beside its value in the case's reference
/// (the baseline, or the case named by `compare_to`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The knob's name.
    pub knob: String,
    /// Its value in the reference ("default" when the baseline leaves it).
    pub from: String,
    /// Its value in the case.
    pub value: String,
}

/// A case's significant effect on one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The case.
    pub case: String,
    /// What it is measured against: "baseline" or its `compare_to`.
    pub reference: String,
    /// What the case changes from its reference; empty when it names no knobs.
    pub settings: Vec<Setting>,
    /// The metric of the workload.
    pub metric: Metric,
    /// Change of the metric over the reference, %.
    pub change_pct: f64,
    /// The metric's effect, with its interval and test.
    pub effect: Effect,
    /// Change of the host's CPU-µs per I/O over the reference's, %.
    pub cpu_change_pct: Option<f64>,
    /// The host's CPU-µs per I/O effect, with its interval and test.
    pub cpu_effect: Option<Effect>,
    /// Knobs of the case that some of its runs could not apply (named as in
    /// the records' `skipped_knobs`).
    pub skipped: Vec<String>,
}

/// A change of one side's CPU-µs per I/O beyond the threshold, tested as
/// a throughput effect is (significant, its interval wholly beyond
/// ±threshold), whatever the throughput did: a finding of its own, since
/// CPU per unit of work is what the seeds measure. It recommends nothing
/// by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFinding {
    /// The case.
    pub case: String,
    /// What it is measured against: "baseline" or its `compare_to`.
    pub reference: String,
    /// What the case changes from its reference.
    pub settings: Vec<Setting>,
    /// Whose CPU: "initiator" or "target".
    pub side: &'static str,
    /// The change of that side's CPU-µs per I/O, with its interval and test.
    pub effect: Effect,
}

/// What a workload's results recommend.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadAdvice {
    /// The workload.
    pub workload: String,
    /// Its metric.
    pub metric: Metric,
    /// Significant gains, largest first.
    pub gains: Vec<Finding>,
    /// Significant losses, largest first.
    pub losses: Vec<Finding>,
    /// No significant change of the metric, but the host's CPU-µs per I/O
    /// fell by more than the threshold.
    pub cpu_savings: Vec<Finding>,
    /// Cases compared with their reference (both had valid runs).
    pub compared: usize,
    /// Cases none of whose knobs could be applied: whatever they measured,
    /// it was not their setting, so they recommend nothing.
    pub not_applied: Vec<Finding>,
    /// Cases whose interval straddles a threshold (or that had too few
    /// runs for a test): shown, recommending nothing.
    pub inconclusive: Vec<Finding>,
    /// Each side's CPU-µs per I/O changes beyond the threshold, of cases
    /// whose knobs were applied, in the plan's order of cases.
    pub cpu_per_io: Vec<CpuFinding>,
}

/// What to do with a setting, over all workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Gains in some workloads, losses in none.
    Adopt,
    /// Saves CPU in some workloads, losses in none, no throughput gain.
    AdoptForCpu,
    /// Gains in some workloads, losses in others.
    DependsOnWorkload,
    /// Losses only.
    Avoid,
}

impl Verdict {
    /// For people.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Adopt => "recommended",
            Verdict::AdoptForCpu => "recommended for CPU",
            Verdict::DependsOnWorkload => "depends on the workload",
            Verdict::Avoid => "avoid",
        }
    }
}

/// A case's effects over all workloads.
#[derive(Debug, Clone, PartialEq)]
pub struct OverallAdvice {
    /// The case.
    pub case: String,
    /// What it is measured against.
    pub reference: String,
    /// What it changes from its reference.
    pub settings: Vec<Setting>,
    /// Workloads it gained on, with the effect that backs it.
    pub gains: Vec<(String, Effect)>,
    /// Workloads it lost on, with the effect that backs it.
    pub losses: Vec<(String, Effect)>,
    /// Workloads where it only saved CPU, with the CPU-µs per I/O effect.
    pub cpu_savings: Vec<(String, Effect)>,
    /// What to do with it.
    pub verdict: Verdict,
}

/// The advice of each workload, in the plan's order.
pub fn recommend(input: &ReportInput, cells: &[CellSummary]) -> Vec<WorkloadAdvice> {
    input
        .workloads
        .iter()
        .map(|w| {
            let mut advice = WorkloadAdvice {
                workload: w.name.clone(),
                metric: w.metric,
                gains: Vec::new(),
                losses: Vec::new(),
                cpu_savings: Vec::new(),
                compared: 0,
                not_applied: Vec::new(),
                inconclusive: Vec::new(),
                cpu_per_io: Vec::new(),
            };
            for c in cells.iter().filter(|c| c.workload == w.name) {
                let Some(effect) = c.effect else { continue };
                if input.topology_change(&c.case).is_some() {
                    continue;
                }
                advice.compared += 1;
                let finding = Finding {
                    case: c.case.clone(),
                    reference: input.reference_of(&c.case).to_string(),
                    settings: settings(input, &c.case),
                    metric: w.metric,
                    change_pct: effect.change_pct,
                    effect,
                    cpu_change_pct: c.cpu_effect.map(|e| e.change_pct),
                    cpu_effect: c.cpu_effect,
                    skipped: skipped(input, &c.case, &w.name),
                };
                if applied(&finding) {
                    advice.cpu_per_io.extend(cpu_findings(c, &finding));
                }
                file(&mut advice, finding);
            }
            advice
                .gains
                .sort_by(|a, b| b.change_pct.total_cmp(&a.change_pct));
            advice
                .losses
                .sort_by(|a, b| a.change_pct.total_cmp(&b.change_pct));
            advice
        })
        .collect()
}

/// Whether some of the case's knobs were applied: else what it measured
/// was not its setting.
fn applied(finding: &Finding) -> bool {
    let changed = finding.settings.len();
    changed == 0 || finding.skipped.len() < changed
}

/// The host's, the initiator's and the target's CPU-per-I/O effects of
/// `cell` that are significant and conclusive (so their intervals exclude
/// ±threshold). The host's is the one figure every kind of initiator has
/// (one in the kernel or behind a block device has no process of its
/// own); a host saving beside an unchanged metric is left to the CPU
/// saving that [`file`] makes of the finding, which says it already.
fn cpu_findings(cell: &CellSummary, finding: &Finding) -> Vec<CpuFinding> {
    let unchanged = finding.effect.conclusive && !finding.effect.significant;
    [
        ("host", cell.cpu_effect),
        ("initiator", cell.initiator_cpu_effect),
        ("target", cell.target_cpu_effect),
    ]
    .into_iter()
    .filter_map(|(side, effect)| {
        let effect = effect.filter(|e| e.significant && e.conclusive)?;
        if side == "host" && unchanged && effect.change_pct < 0.0 {
            return None;
        }
        Some(CpuFinding {
            case: finding.case.clone(),
            reference: finding.reference.clone(),
            settings: finding.settings.clone(),
            side,
            effect,
        })
    })
    .collect()
}

/// Puts a finding in its list: not applied, inconclusive, a gain, a loss,
/// a CPU saving, or nowhere (no meaningful change).
fn file(advice: &mut WorkloadAdvice, finding: Finding) {
    if !applied(&finding) {
        advice.not_applied.push(finding);
        return;
    }
    let effect = finding.effect;
    let saves_cpu = finding
        .cpu_effect
        .is_some_and(|e| e.significant && e.conclusive && e.change_pct < 0.0);
    if !effect.conclusive {
        advice.inconclusive.push(finding);
    } else if effect.significant && effect.change_pct > 0.0 {
        advice.gains.push(finding);
    } else if effect.significant {
        advice.losses.push(finding);
    } else if saves_cpu {
        advice.cpu_savings.push(finding);
    }
}

/// Every case with a significant effect somewhere, in the plan's order.
pub fn overall(input: &ReportInput, advice: &[WorkloadAdvice]) -> Vec<OverallAdvice> {
    let mut out = Vec::new();
    for case in input.cases.iter().skip(1) {
        if input.topology_change(&case.name).is_some() {
            continue;
        }
        let pick = |list: fn(&WorkloadAdvice) -> &Vec<Finding>, cpu: bool| {
            advice
                .iter()
                .flat_map(|a| {
                    list(a)
                        .iter()
                        .filter(|f| f.case == case.name)
                        .filter_map(move |f| {
                            let effect = if cpu { f.cpu_effect? } else { f.effect };
                            Some((a.workload.clone(), effect))
                        })
                })
                .collect::<Vec<_>>()
        };
        let gains = pick(|a| &a.gains, false);
        let losses = pick(|a| &a.losses, false);
        let cpu_savings = pick(|a| &a.cpu_savings, true);
        let verdict = match (gains.is_empty(), losses.is_empty(), cpu_savings.is_empty()) {
            (false, true, _) => Verdict::Adopt,
            (false, false, _) => Verdict::DependsOnWorkload,
            (true, false, _) => Verdict::Avoid,
            (true, true, false) => Verdict::AdoptForCpu,
            (true, true, true) => continue,
        };
        out.push(OverallAdvice {
            case: case.name.clone(),
            reference: input.reference_of(&case.name).to_string(),
            settings: settings(input, &case.name),
            gains,
            losses,
            cpu_savings,
            verdict,
        });
    }
    out
}

/// The knobs `case` changes from its reference that some run of `case` ×
/// `workload` skipped.
pub(super) fn skipped(input: &ReportInput, case: &str, workload: &str) -> Vec<String> {
    input
        .changes_from_reference(case)
        .into_iter()
        .map(|(knob, _, _)| knob)
        .filter(|k| {
            input
                .records
                .iter()
                .filter(|r| r.case == case && r.workload == workload)
                .any(|r| r.skipped_knobs.contains_key(k))
        })
        .collect()
}

/// The knobs `case` changes from its reference, with the reference's values.
pub fn settings(input: &ReportInput, case: &str) -> Vec<Setting> {
    input
        .changes_from_reference(case)
        .into_iter()
        .map(|(knob, from, value)| Setting { knob, from, value })
        .collect()
}
