//! The report's opening: the question the plan asks (its `question`, or
//! one made from its cases) and the answer, per workload in the plan's
//! order, one sentence per comparison of a case with its reference that
//! names both sides in words ("libiscsi through fio spends 5.32x the CPU
//! per I/O of isoe's initiator, ..."), with the ratios and their 95%
//! intervals.
//!
//! Every number is one of the paired comparisons the report already makes
//! ([`CellSummary`]'s effects): a ratio is one plus the change, and its
//! interval one plus each end of the change's. A figure is stated as an
//! answer only when its comparison is significant and conclusive;
//! otherwise the sentence says "within ±5%" (conclusive, no meaningful
//! change) or "inconclusive after N rounds", never the point estimate.

use super::document::{para, Block, Span};
use super::naming::{self, End};
use super::{CaseInfo, CellSummary, ReportInput, WorkloadInfo};
use crate::record::Metric;
use crate::stats::{Effect, Test};

/// The section's blocks: the question, how to read the sentences, and one
/// list of sentences per workload.
pub fn build(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let t = input.rules.significance_pct;
    let (question, whose) = match input.question.as_deref().map(str::trim) {
        Some(q) if !q.is_empty() => (q.to_string(), "The plan asks"),
        _ => (
            default_question(input),
            "The plan names no question; from its cases",
        ),
    };
    let mut b = vec![
        Block::Heading(2, "The answer".into(), Some("answer")),
        Block::Para(vec![
            Span::Strong(format!("{whose}:")),
            Span::Text(format!(" {question}")),
        ]),
        para(format!(
            "Each sentence compares a case with its reference, paired round by round: a ratio \
             is the case's figure over the reference's (×1 is no change), with its 95% \
             confidence interval. A difference is stated only where it is beyond ±{t}% and \
             its whole interval is too; \"within ±{t}%\" means the interval lies wholly inside. \
             CPU per I/O is that of the side named: an initiator's or a target's own process{}, \
             or the host ({}).",
            if input.cases.iter().any(|c| naming::is_floor(input, &c.name)) {
                " (the raw-TCP floor's client and server)"
            } else {
                ""
            },
            host_words(input)
        )),
    ];
    // A case the site could not run (or whose reference it could not)
    // answers nothing: one line names them all, rather than a sentence
    // under every workload that reads like a failure.
    let skipped = |name: &str| input.skipped_cases.iter().any(|(s, _)| s == name);
    let unrun: Vec<String> = input
        .cases
        .iter()
        .filter(|c| skipped(&c.name) || skipped(input.reference_of(&c.name)))
        .map(|c| c.name.clone())
        .collect();
    if !unrun.is_empty() {
        b.push(para(format!(
            "Not measured here, so not answered below: {} (the skipped cases at the top say \
             what each needs).",
            naming::join(&unrun)
        )));
    }
    let baseline = input.baseline().map_or("baseline", |c| c.name.as_str());
    for w in &input.workloads {
        let sentences: Vec<(Vec<Span>, Vec<String>)> = input
            .cases
            .iter()
            .filter(|c| c.name != baseline && c.runs(&w.name) && !unrun.contains(&c.name))
            .map(|c| {
                let cell = cells
                    .iter()
                    .find(|x| x.case == c.name && x.workload == w.name);
                (vec![Span::Text(sentence(input, w, c, cell))], vec![])
            })
            .collect();
        if sentences.is_empty() {
            continue;
        }
        b.push(Block::Heading(
            3,
            format!("{} ({})", w.name, w.metric.label()),
            None,
        ));
        b.push(Block::List(sentences));
    }
    b
}

/// What "the host" is on this plan's topology.
fn host_words(input: &ReportInput) -> &'static str {
    if input.topology == "physical" {
        "every CPU of the initiator's machine"
    } else {
        "every CPU of this machine, both sides' processes, kernel threads and softirq"
    }
}

/// The question of a plan that names none, from its cases and workloads.
fn default_question(input: &ReportInput) -> String {
    let mut metrics: Vec<String> = Vec::new();
    for w in &input.workloads {
        let label = w.metric.label().to_string();
        if !metrics.contains(&label) {
            metrics.push(label);
        }
    }
    let metrics = if metrics.is_empty() {
        "throughput".to_string()
    } else {
        naming::join(&metrics)
    };
    let cases: Vec<&CaseInfo> = input.cases.iter().skip(1).collect();
    let listed: Vec<String> = cases
        .iter()
        .map(|c| {
            if c.description.trim().is_empty() {
                c.name.clone()
            } else {
                c.description.trim().to_string()
            }
        })
        .collect();
    if (1..=6).contains(&cases.len()) {
        format!(
            "What does each case ({}) change against its reference, in {metrics} and in the \
             CPU each I/O costs?",
            listed.join("; ")
        )
    } else {
        format!(
            "What does each of the {} cases change against its reference, in {metrics} and \
             in the CPU each I/O costs?",
            cases.len()
        )
    }
}

/// A ratio for people: "5.32x", "15.4x", "0.082x".
fn times(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.1}x")
    } else if ratio >= 0.1 {
        format!("{ratio:.2}x")
    } else {
        format!("{ratio:.3}x")
    }
}

/// What a comparison's test allows a sentence to say.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    /// Significant and conclusive: the ratio and its interval, (ratio,
    /// low, high).
    Stated(f64, f64, f64),
    /// Conclusive within the threshold: no measurable difference.
    Same,
    /// Inconclusive (or untested): how far the rounds went.
    Open(Test),
    /// No comparison: a side has no figure.
    Missing,
}

fn verdict(effect: Option<Effect>) -> Verdict {
    let Some(e) = effect else {
        return Verdict::Missing;
    };
    let ratio = |pct: f64| 1.0 + pct / 100.0;
    match (e.conclusive, e.significant, e.ci_low_pct, e.ci_high_pct) {
        (true, true, Some(lo), Some(hi)) => {
            Verdict::Stated(ratio(e.change_pct), ratio(lo), ratio(hi))
        }
        (true, false, _, _) => Verdict::Same,
        _ => Verdict::Open(e.test),
    }
}

/// "95% CI 1.61x to 2.56x".
fn ci(low: f64, high: f64) -> String {
    format!("95% CI {} to {}", times(low), times(high))
}

/// "inconclusive after 4 rounds", or why there is no verdict.
fn open_words(test: Test) -> String {
    match test {
        Test::Paired { rounds } => format!("inconclusive after {rounds} rounds"),
        Test::Welch {
            n_reference,
            n_case,
        } => format!("inconclusive ({n_case} runs against {n_reference}, unpaired)"),
        Test::None => "untested (too few runs)".to_string(),
    }
}

/// Whose CPU a figure is, in a comparison.
enum Whose {
    /// An end's process whose program differs: (the case's, the
    /// reference's).
    Changed(String, String),
    /// An end's process that is the same program on both sides, and what
    /// it works with in the case (" serving libiscsi through fio"), if the
    /// other end changed.
    Same(String, String),
    /// The host, with the programs that differ (the case's, the
    /// reference's), if any.
    Host(Option<(String, String)>),
    /// The host's MB/s per CPU% (seed 000's CPU effectiveness), with the
    /// programs that differ (the case's, the reference's), if any.
    Effectiveness(Option<(String, String)>),
}

/// One CPU figure of a comparison and its effect.
struct Figure {
    whose: Whose,
    effect: Option<Effect>,
}

impl Figure {
    /// The figure as a clause, or None when there is nothing to say.
    fn clause(&self, t: f64) -> Option<String> {
        let v = verdict(self.effect);
        Some(match (&self.whose, v) {
            (_, Verdict::Missing) => return None,
            (Whose::Changed(own, theirs), Verdict::Stated(r, lo, hi)) => format!(
                "{own} spends {} the CPU per I/O of {theirs} ({})",
                times(r),
                ci(lo, hi)
            ),
            (Whose::Changed(own, theirs), Verdict::Same) => {
                format!("{own} spends the CPU per I/O of {theirs} within ±{t}%")
            }
            (Whose::Changed(own, theirs), Verdict::Open(test)) => format!(
                "the CPU per I/O of {own} against {theirs} is {}",
                open_words(test)
            ),
            (Whose::Same(who, with), Verdict::Stated(r, lo, hi)) => format!(
                "{who} spends {} as much CPU per I/O{with} ({})",
                times(r),
                ci(lo, hi)
            ),
            (Whose::Same(who, with), Verdict::Same) => {
                format!("{who} spends the same CPU per I/O{with} within ±{t}%")
            }
            (Whose::Same(who, with), Verdict::Open(test)) => {
                format!("the CPU per I/O of {who}{with} is {}", open_words(test))
            }
            (Whose::Host(Some((own, theirs))), Verdict::Stated(r, lo, hi)) => format!(
                "{own} costs the host {} the CPU per I/O that {theirs} does ({})",
                times(r),
                ci(lo, hi)
            ),
            (Whose::Host(Some((own, theirs))), Verdict::Same) => {
                format!("{own} costs the host the CPU per I/O that {theirs} does within ±{t}%")
            }
            (Whose::Host(Some((own, theirs))), Verdict::Open(test)) => format!(
                "the host's CPU per I/O with {own} against {theirs} is {}",
                open_words(test)
            ),
            (Whose::Host(None), Verdict::Stated(r, lo, hi)) => format!(
                "the host spends {} as much CPU per I/O ({})",
                times(r),
                ci(lo, hi)
            ),
            (Whose::Host(None), Verdict::Same) => {
                format!("the host spends the same CPU per I/O within ±{t}%")
            }
            (Whose::Host(None), Verdict::Open(test)) => {
                format!("the host's CPU per I/O is {}", open_words(test))
            }
            (Whose::Effectiveness(ends), v) => {
                let (with, that) = ends
                    .as_ref()
                    .map_or((String::new(), String::new()), |(own, o)| {
                        (format!(" with {own}"), format!(" that with {o}"))
                    });
                let what = format!("CPU effectiveness (MB/s per % of the host's CPU){with}");
                match v {
                    Verdict::Stated(r, lo, hi) => {
                        format!("{what} is {}{that} ({})", times(r), ci(lo, hi))
                    }
                    Verdict::Same => format!("{what} is the same{that} within ±{t}%"),
                    Verdict::Open(test) => format!("{what} is {}", open_words(test)),
                    Verdict::Missing => return None,
                }
            }
        })
    }
}

/// The workload's throughput as the tail of the first clause: ", at 0.45x
/// its IOPS (95% CI ...)"; `whose` is "its", "the" or "the ... of X".
fn throughput_tail(effect: Option<Effect>, metric: Metric, whose: &str, t: f64) -> String {
    let m = metric.label();
    match verdict(effect) {
        Verdict::Stated(r, lo, hi) => format!(", at {} {whose} {m} ({})", times(r), ci(lo, hi)),
        Verdict::Same => format!(", at the same {m} within ±{t}%"),
        Verdict::Open(test) => format!(", with {m} {}", open_words(test)),
        Verdict::Missing => String::new(),
    }
}

/// A sentence's first letter in capitals when it begins with a common
/// word ("The floor's server ..."); a name keeps its own case ("isoe's
/// target", "libiscsi", "tgt").
fn capital(s: &str) -> String {
    let first = s.split(' ').next().unwrap_or_default();
    if !["the", "a", "an", "at", "no", "one", "with", "both"].contains(&first) {
        return s.to_string();
    }
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The knobs `case` changes from its reference that some run of `case` ×
/// `workload` could not apply.
fn not_applied(input: &ReportInput, case: &str, workload: &str) -> (Vec<String>, usize) {
    let changed = input.changes_from_reference(case).len();
    (super::recommend::skipped(input, case, workload), changed)
}

/// One comparison of `case` with its reference on `w`, as a sentence.
fn sentence(
    input: &ReportInput,
    w: &WorkloadInfo,
    case: &CaseInfo,
    cell: Option<&CellSummary>,
) -> String {
    let t = input.rules.significance_pct;
    let reference = input.reference_of(&case.name);
    let ends = naming::changed_ends(input, &case.name);
    let settings = naming::settings(input, &case.name);
    // The two sides as a whole: "MTU 9000 against MTU 1500", "tgt against
    // isoe's target".
    let (own, theirs) = match (ends.as_slice(), &settings) {
        ([end], _) => (
            naming::end_name(input, &case.name, *end),
            naming::end_name(input, reference, *end),
        ),
        // A change of settings of isoe's ends says only the settings; of
        // other ends, whose.
        ([], Some((own, theirs))) => match naming::pair_name(input, &case.name) {
            pair if pair == "isoe's initiator and target" => (own.clone(), theirs.clone()),
            pair => (format!("{pair} with {own}"), theirs.clone()),
        },
        _ => (
            naming::pair_name(input, &case.name),
            naming::pair_name(input, reference),
        ),
    };
    // What both sides share: " at 2 sessions, with tgt as the target".
    let shared = naming::shared(input, &case.name);
    let at = if shared.is_empty() {
        String::new()
    } else {
        format!(" {}", shared.join(", "))
    };
    let (skipped, changed) = not_applied(input, &case.name, &w.name);
    if changed > 0 && skipped.len() == changed {
        return format!(
            "{} against {theirs}{at}: no answer: {} could not be applied (see Skipped knobs).",
            capital(&own),
            naming::join(&skipped)
        );
    }
    let Some(c) = cell.filter(|c| c.effect.is_some()) else {
        return format!(
            "{} against {theirs}{at}: not compared: a side has no valid run.",
            capital(&own)
        );
    };
    let mut figures = figures(input, w, case, &ends, c);
    // What is stated leads; the primary figures first.
    figures
        .sort_by_key(|(f, primary)| (!primary, !matches!(verdict(f.effect), Verdict::Stated(..))));
    let (primary, secondary) = figures.split_at(figures.iter().filter(|f| f.1).count());
    let main = |v: Verdict| matches!(v, Verdict::Stated(..));
    let answered = primary.iter().any(|f| main(verdict(f.0.effect))) || main(verdict(c.effect));
    let verdicts: Vec<Verdict> = primary
        .iter()
        .map(|f| verdict(f.0.effect))
        .chain([verdict(c.effect)])
        .filter(|v| *v != Verdict::Missing)
        .collect();
    let caveat = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            " ({} not applied in some runs: see Skipped knobs)",
            naming::join(&skipped)
        )
    };
    if !answered {
        let rest = if verdicts.iter().all(|v| *v == Verdict::Same) {
            format!(
                "no measurable difference: {} and CPU per I/O within ±{t}%",
                w.metric.label()
            )
        } else {
            let open = verdicts.iter().find_map(|v| match v {
                Verdict::Open(test) => Some(open_words(*test)),
                _ => None,
            });
            open.unwrap_or_else(|| "no test".to_string())
        };
        return format!("{} against {theirs}{at}: {rest}{caveat}.", capital(&own));
    }
    // Whose throughput the case's is compared with.
    let whose_throughput = match (ends.len(), &settings) {
        (0, _) => "the".to_string(),
        (1, None) => "its".to_string(),
        _ => format!("{theirs}'s"),
    };
    let mut clauses: Vec<String> = Vec::new();
    for (figure, _) in primary {
        let Some(mut clause) = figure.clause(t) else {
            continue;
        };
        if clauses.is_empty() {
            clause += &throughput_tail(c.effect, w.metric, &whose_throughput, t);
        }
        clauses.push(clause);
    }
    if clauses.is_empty() {
        clauses.push(format!(
            "{own} against {theirs}{}",
            throughput_tail(c.effect, w.metric, &whose_throughput, t)
        ));
    }
    for (figure, _) in secondary {
        if main(verdict(figure.effect)) {
            clauses.extend(figure.clause(t));
        }
    }
    let prefix = match &settings {
        Some((own, theirs)) if at.is_empty() => format!("With {own} (against {theirs}), "),
        Some((own, theirs)) => format!("With {own} (against {theirs}),{at}, "),
        None if !at.is_empty() => format!("{}, ", capital(at.trim_start())),
        None => String::new(),
    };
    capital(&format!("{prefix}{}{caveat}.", clauses.join("; ")))
}

/// The CPU figures of a comparison, each flagged primary (said whatever
/// its verdict) or not (said only when stated): the ends whose program
/// changed (the host's figure where an end has no process of its own),
/// or, for a change of settings, the host's; on an MB/s workload the
/// host's CPU effectiveness (seed 000's headline) in place of its CPU per
/// I/O; then the ends that stayed, primary for a change of settings.
fn figures(
    input: &ReportInput,
    w: &WorkloadInfo,
    case: &CaseInfo,
    ends: &[End],
    c: &CellSummary,
) -> Vec<(Figure, bool)> {
    let reference = input.reference_of(&case.name);
    let name = |case: &str, end| naming::end_name_on(input, case, end, &w.name);
    let process = |end| match end {
        End::Initiator => c.initiator_cpu_effect,
        End::Target => c.target_cpu_effect,
    };
    let by_mb = w.metric == Metric::MbPerS;
    let mut primary: Vec<Figure> = Vec::new();
    let mut host_said = false;
    for &end in ends {
        if process(end).is_some() {
            primary.push(Figure {
                whose: Whose::Changed(name(&case.name, end), name(reference, end)),
                effect: process(end),
            });
        } else if !host_said && !by_mb {
            host_said = true;
            primary.push(Figure {
                whose: Whose::Host(Some((name(&case.name, end), name(reference, end)))),
                effect: c.cpu_effect,
            });
        }
    }
    let differing = match ends {
        [end] => Some((name(&case.name, *end), name(reference, *end))),
        [] => None,
        _ => Some((
            naming::pair_name(input, &case.name),
            naming::pair_name(input, reference),
        )),
    };
    if by_mb {
        primary.push(Figure {
            whose: Whose::Effectiveness(differing),
            effect: c.effectiveness_effect,
        });
    } else if ends.is_empty() {
        primary.push(Figure {
            whose: Whose::Host(None),
            effect: c.cpu_effect,
        });
    }
    // Effectiveness leads a change of settings on an MB/s workload.
    if by_mb && ends.is_empty() {
        primary.rotate_right(1);
    }
    let mut out: Vec<(Figure, bool)> = primary.into_iter().map(|f| (f, true)).collect();
    for end in [End::Target, End::Initiator] {
        if ends.contains(&end) {
            continue;
        }
        let with = match (end, ends) {
            (End::Target, [End::Initiator]) => {
                format!(" serving {}", name(&case.name, End::Initiator))
            }
            (End::Initiator, [End::Target]) => {
                format!(" against {}", name(&case.name, End::Target))
            }
            _ => String::new(),
        };
        out.push((
            Figure {
                whose: Whose::Same(name(&case.name, end), with),
                effect: process(end),
            },
            false,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Block;
    use crate::record::RunRecord;
    use crate::{summarize, CaseInfo, WorkloadInfo};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// A run of `case` on `workload` in `round`: its metric, and CPU-µs per
    /// I/O of the initiator's process, the target's and the host's.
    fn run(case: &str, workload: &str, round: u32, value: f64, cpu: [f64; 3]) -> RunRecord {
        RunRecord {
            plan: "t".into(),
            case: case.into(),
            workload: workload.into(),
            run: round,
            topology: "loopback".into(),
            knobs: BTreeMap::new(),
            skipped_knobs: BTreeMap::new(),
            metric: if workload == "large" {
                Metric::MbPerS
            } else {
                Metric::Iops
            },
            value,
            steal_pct: 0.0,
            valid: true,
            invalid_reason: None,
            round,
            foreign: None,
            bench: json!({
                "initiator_cpu_us_per_io": cpu[0],
                "target_cpu_us_per_io": cpu[1],
                "system_cpu_us_per_io": cpu[2],
                "mb_per_s_per_cpu_pct": 1000.0 / cpu[2],
            }),
            series: Vec::new(),
            started_at: String::new(),
        }
    }

    fn case(name: &str, knobs: &[(&str, &str)], workloads: &[&str]) -> CaseInfo {
        CaseInfo {
            name: name.into(),
            knobs_changed: knobs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            workloads: workloads.iter().map(|w| w.to_string()).collect(),
            ..CaseInfo::default()
        }
    }

    /// The baseline (isoe's initiator, MTU 1500); "libiscsi", whose
    /// initiator spends about 5x the CPU per I/O at about half the IOPS,
    /// its interval tight; "jumbo" (MTU 9000), whose IOPS and CPU swing
    /// ±20% round to round: inconclusive. "jumbo" runs only "small".
    fn input() -> ReportInput {
        let mut records = Vec::new();
        let wobble = [1.0, 1.02, 0.98];
        let swing = [1.25, 0.8, 1.1];
        for (i, (w, s)) in wobble.iter().zip(swing).enumerate() {
            let round = i as u32 + 1;
            for workload in ["small", "large"] {
                records.push(run("baseline", workload, round, 1000.0, [2.0, 3.0, 6.0]));
                records.push(run(
                    "libiscsi",
                    workload,
                    round,
                    500.0 * w,
                    [10.0 * w, 3.0, 12.0 * w],
                ));
            }
            records.push(run(
                "jumbo",
                "small",
                round,
                1000.0 * s,
                [2.0 * s, 3.0 * s, 6.0 * s],
            ));
        }
        let workload = |name: &str, metric| WorkloadInfo {
            name: name.into(),
            metric,
            large_block: metric == Metric::MbPerS,
            description: String::new(),
        };
        ReportInput {
            question: Some("Which initiator spends least CPU per I/O?".into()),
            baseline_knobs: BTreeMap::from([("mtu".to_string(), "1500".to_string())]),
            cases: vec![
                case("baseline", &[], &[]),
                case("libiscsi", &[("initiator", "libiscsi")], &[]),
                case("jumbo", &[("mtu", "9000")], &["small"]),
            ],
            workloads: vec![
                workload("small", Metric::Iops),
                workload("large", Metric::MbPerS),
            ],
            topology: "loopback".into(),
            records,
            ..ReportInput::default()
        }
    }

    /// The section's workload headings and the sentences under each.
    fn answers(input: &ReportInput) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for block in build(input, &summarize(input)) {
            match block {
                Block::Heading(3, title, _) => out.push((title, Vec::new())),
                Block::List(items) => {
                    let last = out.last_mut().expect("a list under a workload");
                    for (spans, _) in items {
                        last.1.push(
                            spans
                                .iter()
                                .map(|s| match s {
                                    Span::Text(t) | Span::Strong(t) | Span::Code(t) => t.as_str(),
                                })
                                .collect(),
                        );
                    }
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn a_sentence_names_both_sides_and_the_ratio_with_its_interval() {
        let input = input();
        let cells = summarize(&input);
        let cell = cells
            .iter()
            .find(|c| c.case == "libiscsi" && c.workload == "small")
            .unwrap();
        let e = cell.initiator_cpu_effect.unwrap();
        assert!(e.significant && e.conclusive, "{e:?}");
        // The ratio is 1 + the change, and so is each end of its interval.
        let (lo, hi) = (
            1.0 + e.ci_low_pct.unwrap() / 100.0,
            1.0 + e.ci_high_pct.unwrap() / 100.0,
        );
        assert!(lo < 5.0 && 5.0 < hi && hi < 6.0, "{lo} {hi}");
        let small = &answers(&input)[0];
        assert_eq!(small.0, "small (IOPS)");
        let expected = format!(
            "libiscsi through fio spends 5.00x the CPU per I/O of isoe's initiator (95% CI {} \
             to {}), at 0.50x its IOPS (95% CI ",
            times(lo),
            times(hi)
        );
        assert!(small.1[0].starts_with(&expected), "{}", small.1[0]);
        // The target served both alike: nothing said of it.
        assert!(!small.1[0].contains("isoe's target"), "{}", small.1[0]);
        // On an MB/s workload, seed 000's ratio: MB/s per % of host CPU,
        // half the baseline's (its host spends twice the CPU per I/O).
        let large = &answers(&input)[1];
        assert_eq!(large.0, "large (MB/s)");
        assert!(
            large.1[0].contains(
                "CPU effectiveness (MB/s per % of the host's CPU) with libiscsi through fio is \
                 0.50x that with isoe's initiator (95% CI 0."
            ),
            "{}",
            large.1[0]
        );
    }

    #[test]
    fn an_inconclusive_comparison_is_not_stated_as_an_answer() {
        let input = input();
        let small = &answers(&input)[0];
        let jumbo = &small.1[1];
        assert_eq!(
            jumbo, "MTU 9000 against MTU 1500: inconclusive after 3 rounds.",
            "{small:?}"
        );
        // No figure of it becomes a ratio anywhere in the answer.
        for (_, sentences) in answers(&input) {
            for s in sentences.iter().filter(|s| s.contains("MTU 9000")) {
                assert!(!s.contains("x ") && !s.contains("spends"), "{s}");
            }
        }
    }

    #[test]
    fn a_case_the_site_could_not_run_is_named_once_not_answered_as_a_failure() {
        let mut input = input();
        input
            .cases
            .push(case("kernel", &[("initiator", "kernel")], &["small"]));
        input
            .cases
            .push(case("ublk", &[("initiator", "isoe-ublk")], &["small"]));
        input.skipped_cases = vec![(
            "kernel".into(),
            "initiator = kernel runs on a test bed of machines only".into(),
        )];
        let small = &answers(&input)[0].1;
        assert!(!small.iter().any(|s| s.contains("open-iscsi")), "{small:?}");
        let said = build(&input, &summarize(&input)).iter().any(|b| {
            matches!(b, Block::Para(spans) if spans.iter().any(|s| matches!(s,
                Span::Text(t) if t.starts_with("Not measured here, so not answered below: kernel ("))))
        });
        assert!(said, "the answer names the case it could not run");
        // A case that ran and has no valid run is still said to have none.
        let ublk = small.iter().find(|s| s.contains("ublk")).unwrap();
        assert!(
            ublk.ends_with(": not compared: a side has no valid run."),
            "{small:?}"
        );
    }

    #[test]
    fn sentences_are_grouped_by_workload_in_the_plan_s_order() {
        let mut input = input();
        let headings: Vec<String> = answers(&input).into_iter().map(|(h, _)| h).collect();
        assert_eq!(headings, ["small (IOPS)", "large (MB/s)"]);
        let count: Vec<usize> = answers(&input).iter().map(|(_, s)| s.len()).collect();
        // "jumbo" runs only "small": one sentence there, none under "large".
        assert_eq!(count, [2, 1]);
        input.workloads.reverse();
        let headings: Vec<String> = answers(&input).into_iter().map(|(h, _)| h).collect();
        assert_eq!(headings, ["large (MB/s)", "small (IOPS)"]);
    }

    #[test]
    fn the_question_is_the_plan_s_or_one_made_from_its_cases() {
        let mut input = input();
        let asked = |input: &ReportInput| match &build(input, &summarize(input))[1] {
            Block::Para(spans) => format!("{spans:?}"),
            other => panic!("{other:?}"),
        };
        assert!(
            asked(&input).contains("Which initiator spends least CPU per I/O?"),
            "{}",
            asked(&input)
        );
        input.question = None;
        input.cases[2].description = "jumbo frames".into();
        assert!(
            asked(&input).contains(
                "What does each case (libiscsi; jumbo frames) change against its reference, in \
                 IOPS and MB/s and in the CPU each I/O costs?"
            ),
            "{}",
            asked(&input)
        );
    }

    #[test]
    fn a_sentence_opens_with_a_capital_unless_it_opens_with_a_name() {
        assert_eq!(
            capital("both sides' TSO off against on"),
            "Both sides' TSO off against on"
        );
        assert_eq!(capital("the host spends"), "The host spends");
        assert_eq!(
            capital("isoe's initiator spends"),
            "isoe's initiator spends"
        );
    }
}
