//! The report's first section: what the run shows, one sentence per
//! significant and conclusive effect with its interval (on the workload's
//! throughput, or on the initiator's or the target's CPU per I/O), then what was
//! inconclusive and why, then the knobs that could not be applied (the
//! cases that did not run at all come before, in the report's first box).
//!
//! A reader who stops here must not carry away noise: only effects that
//! [`recommend`](super::recommend) files as gains, losses or CPU savings
//! are stated as findings; everything else is named as inconclusive or as
//! no meaningful change, with the numbers that say why.

use super::document::{para, Block, Span};
use super::effects::test_name;
use super::numbers::change_ci;
use super::recommend::{self, CpuFinding, Finding, Setting};
use super::{CellSummary, ReportInput};
use crate::record::Metric;
use crate::stats::Effect;

/// The findings section's blocks.
pub fn build(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let t = input.rules.significance_pct;
    let advice = recommend::recommend(input, cells);
    let mut b = vec![
        Block::Heading(2, "Findings".into(), Some("findings")),
        para(format!(
            "Each finding is a change beyond ±{t}% of its reference, in a workload's throughput \
             or in the CPU per I/O of the host (the initiator's machine: every kind of \
             initiator alike), of the initiator's process or of the target's, with a t-test \
             rejecting \"no change\" at 5% and the 95% confidence interval wholly beyond \
             ±{t}%. Cases ran beside their reference in shuffled rounds and are compared round \
             by round."
        )),
    ];
    let mut found: Vec<(Vec<Span>, Vec<String>)> = Vec::new();
    for a in &advice {
        for f in a.gains.iter().chain(&a.losses) {
            found.push((vec![Span::Text(sentence(input, f, &a.workload))], vec![]));
        }
        for f in &a.cpu_savings {
            if let Some(text) = cpu_sentence(f, &a.workload) {
                found.push((vec![Span::Text(text)], vec![]));
            }
        }
        for f in &a.cpu_per_io {
            let text = side_cpu_sentence(input, f, &a.workload);
            found.push((vec![Span::Text(text)], vec![]));
        }
    }
    if found.is_empty() {
        b.push(para(format!(
            "No setting had a significant, conclusive effect on any workload: nothing here backs a \
             change from the baseline (threshold ±{t}%)."
        )));
    } else {
        b.push(Block::List(found));
    }
    b.extend(inconclusive(input, cells, &advice));
    b.extend(no_change(cells));
    b.extend(skipped(input));
    b.extend(machine(input, cells));
    b
}

/// What a case sets, for a sentence: " (mtu = 9000)" (its reference's
/// values left to the tables).
fn settings_text(f: &Finding) -> String {
    settings_list(&f.settings)
}

/// " (mtu = 9000, gro = on)", or nothing for no settings.
fn settings_list(settings: &[Setting]) -> String {
    if settings.is_empty() {
        return String::new();
    }
    let list: Vec<String> = settings
        .iter()
        .map(|s| format!("{} = {}", s.knob, s.value))
        .collect();
    format!(" ({})", list.join(", "))
}

fn quantity(metric: Metric) -> &'static str {
    match metric {
        Metric::MbPerS => "throughput",
        Metric::Iops => "IOPS",
        Metric::Tps => "transactions per second",
    }
}

/// "by 41.0% (95% CI 37.9 to 44.2%)": the size of a change and its
/// interval, as magnitudes when the sentence's verb gives the sign.
fn by(e: &Effect) -> String {
    let size = e.change_pct.abs();
    match (e.ci_low_pct, e.ci_high_pct) {
        (Some(lo), Some(hi)) => {
            let (a, b) = if e.change_pct < 0.0 {
                (-hi, -lo)
            } else {
                (lo, hi)
            };
            format!("by {size:.1}% (95% CI {a:.1} to {b:.1}%)")
        }
        _ => format!("by {size:.1}%"),
    }
}

/// " against fast" when the reference is not the baseline.
fn against(input: &ReportInput, reference: &str) -> String {
    if reference == input.baseline().map_or("baseline", |b| b.name.as_str()) {
        String::new()
    } else {
        format!(" against {reference}")
    }
}

/// "digests (header_digest = on) raises initiator CPU per I/O on oltp by
/// 19.6% (95% CI 12.4 to 27.3%) (×1.20); paired t-test over 6 rounds."
fn side_cpu_sentence(input: &ReportInput, f: &CpuFinding, workload: &str) -> String {
    let e = &f.effect;
    let verb = if e.change_pct > 0.0 { "raises" } else { "cuts" };
    let times = 1.0 + e.change_pct / 100.0;
    let settings = settings_list(&f.settings);
    format!(
        "{}{settings}{} {verb} {} CPU per I/O on {workload} {} (×{times:.2}); {}.",
        f.case,
        against(input, &f.reference),
        f.side,
        by(e),
        test_name(e)
    )
}

fn sentence(input: &ReportInput, f: &Finding, workload: &str) -> String {
    let verb = if f.change_pct > 0.0 {
        "raises"
    } else {
        "lowers"
    };
    format!(
        "{}{}{} {verb} {workload} {} {}; {}.",
        f.case,
        settings_text(f),
        against(input, &f.reference),
        quantity(f.metric),
        by(&f.effect),
        test_name(&f.effect)
    )
}

fn cpu_sentence(f: &Finding, workload: &str) -> Option<String> {
    let e = f.cpu_effect?;
    Some(format!(
        "{}{} leaves {workload} {} unchanged within the threshold ({}) and cuts host CPU per I/O {}; {}.",
        f.case,
        settings_text(f),
        quantity(f.metric),
        change_ci(&f.effect),
        by(&e),
        test_name(&e)
    ))
}

fn inconclusive(
    input: &ReportInput,
    cells: &[CellSummary],
    advice: &[recommend::WorkloadAdvice],
) -> Vec<Block> {
    let t = input.rules.significance_pct;
    let mut items: Vec<(Vec<Span>, Vec<String>)> = Vec::new();
    for a in advice {
        for f in &a.inconclusive {
            let why = match (f.effect.ci_low_pct, f.effect.ci_high_pct) {
                (Some(lo), Some(hi)) if lo <= t && hi >= t || lo <= -t && hi >= -t => format!(
                    "the interval straddles ±{t}% ({}): more rounds (stats.max_runs) could settle it",
                    test_name(&f.effect)
                ),
                (Some(_), Some(_)) => test_name(&f.effect),
                _ => "too few valid runs for a test".to_string(),
            };
            items.push((
                vec![Span::Text(format!(
                    "{} on {}: {} {}; {why}.",
                    f.case,
                    a.workload,
                    change_ci(&f.effect),
                    f.metric.label()
                ))],
                vec![],
            ));
        }
        for f in &a.not_applied {
            items.push((
                vec![Span::Text(format!(
                    "{} on {}: not applied ({}), so its {} says nothing about the setting.",
                    f.case,
                    a.workload,
                    f.skipped.join(", "),
                    change_ci(&f.effect)
                ))],
                vec![],
            ));
        }
    }
    let baseline = input.baseline().map_or("", |b| b.name.as_str());
    for c in cells
        .iter()
        .filter(|c| c.effect.is_none() && c.case != baseline)
    {
        if c.runs_valid + c.runs_invalid == 0
            && input.skipped_cases.iter().any(|(s, _)| *s == c.case)
        {
            continue;
        }
        let why = if c.runs_valid == 0 {
            format!(
                "no valid run ({} left out){}",
                c.runs_invalid,
                c.foreign_max
                    .as_ref()
                    .map_or(String::new(), |(_, what)| format!(
                        "; the largest foreign load was {what}"
                    ))
            )
        } else {
            format!(
                "its reference {} has no valid run",
                input.reference_of(&c.case)
            )
        };
        items.push((
            vec![Span::Text(format!("{} on {}: {why}.", c.case, c.workload))],
            vec![],
        ));
    }
    if items.is_empty() {
        return vec![];
    }
    vec![
        Block::Heading(3, "Inconclusive: recommends nothing".into(), None),
        Block::List(items),
    ]
}

fn no_change(cells: &[CellSummary]) -> Vec<Block> {
    let list: Vec<String> = cells
        .iter()
        .filter_map(|c| {
            let e = c.effect.filter(|e| e.conclusive && !e.significant)?;
            Some(format!("{} on {}: {}", c.case, c.workload, change_ci(&e)))
        })
        .collect();
    if list.is_empty() {
        return vec![];
    }
    vec![
        Block::Heading(3, "No meaningful change".into(), None),
        para(format!(
            "Conclusive within the threshold: {}.",
            list.join("; ")
        )),
    ]
}

/// Knobs runs could not apply (the cases that did not run at all head the
/// report, in its "Skipped: not measured" box).
fn skipped(input: &ReportInput) -> Vec<Block> {
    let mut items: Vec<(Vec<Span>, Vec<String>)> = Vec::new();
    let mut knobs: Vec<(String, String, String)> = input
        .records
        .iter()
        .flat_map(|r| {
            r.skipped_knobs
                .iter()
                .map(|(k, why)| (r.case.clone(), k.clone(), why.clone()))
        })
        .collect();
    knobs.sort();
    knobs.dedup();
    items.extend(knobs.into_iter().map(|(case, knob, why)| {
        (
            vec![Span::Text(format!(
                "case {case}: knob {knob} not applied: {why}."
            ))],
            vec![],
        )
    }));
    if items.is_empty() {
        return vec![];
    }
    vec![
        Block::Heading(3, "Skipped knobs".into(), None),
        Block::List(items),
    ]
}

/// How quiet the machine was: foreign load and steal over the runs.
fn machine(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let measured: Vec<f64> = input
        .records
        .iter()
        .filter_map(|r| r.foreign.as_ref().map(|f| f.cpu_pct))
        .collect();
    if measured.is_empty() {
        return vec![];
    }
    let r = &input.rules;
    let spoiled = input
        .records
        .iter()
        .filter(|x| {
            x.foreign
                .as_ref()
                .is_some_and(|f| f.cpu_pct > r.foreign_max_pct)
        })
        .count();
    let worst = cells
        .iter()
        .filter_map(|c| c.foreign_max.as_ref())
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, what)| what.clone())
        .unwrap_or_default();
    let mean = measured.iter().sum::<f64>() / measured.len() as f64;
    vec![
        Block::Heading(3, "The machine".into(), None),
        para(format!(
            "Other processes used {mean:.1}% of a CPU on average over the {} measured runs (the \
             largest: {worst}); {spoiled} run(s) above {}% of a CPU were left out and repeated.",
            measured.len(),
            r.foreign_max_pct
        )),
    ]
}
