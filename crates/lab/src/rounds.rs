//! The schedule of a plan's runs: rounds in which every case still due runs
//! once, beside its reference, in a shuffled order (docs/METHODOLOGY.md
//! "Statistical rules").
//!
//! Running a case's runs one after another and then the next case's lets a
//! machine that drifts over minutes (another tenant, a build, the CPU's
//! clock) pass for an effect. In rounds, the drift hits a case and its
//! reference alike and the per-round ratio cancels it; the shuffle keeps a
//! fixed position in the round (first after a quiet spell, last after the
//! others warmed the caches) from favouring one case.
//!
//! A cell (case × workload) is due while it has fewer than `min_runs` valid
//! runs, or while its comparison with its reference is not conclusive and
//! it has fewer than `max_runs`; a reference is due in every round in which
//! a case compared with it is.

use crate::plan::{Plan, ResolvedCase};
use isoe_report::record::RunRecord;
use isoe_report::stats::{owed_a_round, Sample};
use std::collections::BTreeSet;

/// Runs a cell may take in all beyond `max_runs`, counting those spoiled
/// by steal or foreign load.
pub const ATTEMPTS_OVER_CAP: u32 = 3;
/// Runs in a row that ended without a result (the bench or the target
/// failed) after which a cell is given up: such a failure repeats.
pub const FAILURES_IN_A_ROW: usize = 2;

/// The runs of one case × workload.
pub fn cell<'a>(
    records: &'a [RunRecord],
    case: &'a str,
    workload: &'a str,
) -> impl Iterator<Item = &'a RunRecord> {
    records
        .iter()
        .filter(move |r| r.case == case && r.workload == workload)
}

/// The valid runs of a cell, with their rounds.
pub fn samples(records: &[RunRecord], case: &str, workload: &str) -> Vec<Sample> {
    cell(records, case, workload)
        .filter(|r| r.valid && r.value.is_finite())
        .map(|r| Sample {
            round: r.round,
            value: r.value,
        })
        .collect()
}

/// Runs of a cell, valid or not.
pub fn attempts(records: &[RunRecord], case: &str, workload: &str) -> u32 {
    cell(records, case, workload).count() as u32
}

/// Why a cell was given up: its last runs all failed without a result,
/// and the newest says why.
pub fn given_up(records: &[RunRecord], case: &str, workload: &str) -> Option<String> {
    let runs: Vec<&RunRecord> = cell(records, case, workload).collect();
    let last = runs
        .len()
        .checked_sub(FAILURES_IN_A_ROW)
        .map(|i| &runs[i..])?;
    if last.iter().all(|r| r.bench.is_null()) {
        last.last()?.invalid_reason.clone()
    } else {
        None
    }
}

/// The round after the newest in `records` (1 for none).
pub fn next_round(records: &[RunRecord]) -> u32 {
    records.iter().map(|r| r.round).max().unwrap_or(0) + 1
}

/// The case `case` is compared with: its `compare_to`, else the first
/// (the baseline); None for the baseline itself.
pub fn reference_of<'a>(cases: &'a [ResolvedCase], case: &ResolvedCase) -> Option<&'a str> {
    let baseline = cases.first()?.name.as_str();
    if case.name == baseline {
        return None;
    }
    let named = case.compare_to.as_deref();
    Some(
        named
            .and_then(|r| cases.iter().find(|c| c.name == r))
            .map_or(baseline, |c| c.name.as_str()),
    )
}

/// Whether a cell needs another run, the reference aside.
fn needs_more(
    plan: &Plan,
    cases: &[ResolvedCase],
    records: &[RunRecord],
    ci: usize,
    w: &str,
) -> bool {
    let case = &cases[ci];
    let rules = &plan.rules;
    if attempts(records, &case.name, w) >= rules.max_runs + ATTEMPTS_OVER_CAP
        || given_up(records, &case.name, w).is_some()
    {
        return false;
    }
    let own = samples(records, &case.name, w);
    // A reference given up leaves nothing to compare with: as none.
    let conclusive = reference_of(cases, case)
        .filter(|r| given_up(records, r, w).is_none())
        .map(|reference| {
            let theirs = samples(records, reference, w);
            rules
                .compare(&theirs, &own)
                .is_some_and(|effect| effect.conclusive)
        });
    owed_a_round(rules, own.len() as u32, conclusive)
}

/// The cells due in the next round: per case (an index into `cases`), the
/// workloads it runs, in the plan's order; cases in `cases`' order.
pub fn due(
    plan: &Plan,
    cases: &[ResolvedCase],
    records: &[RunRecord],
) -> Vec<(usize, Vec<String>)> {
    let mut due: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (ci, case) in cases.iter().enumerate() {
        for (wi, w) in plan.workloads.iter().enumerate() {
            if case.workloads.contains(&w.name) && needs_more(plan, cases, records, ci, &w.name) {
                due.insert((ci, wi));
                // The reference runs beside it, in the same round.
                if let Some(r) = reference_of(cases, case) {
                    if let Some(ri) = cases.iter().position(|c| c.name == r) {
                        let runnable = given_up(records, r, &w.name).is_none();
                        if runnable && cases[ri].workloads.contains(&w.name) {
                            due.insert((ri, wi));
                        }
                    }
                }
            }
        }
    }
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    for (ci, wi) in due {
        let name = plan.workloads[wi].name.clone();
        match out.last_mut() {
            Some((last, ws)) if *last == ci => ws.push(name),
            _ => out.push((ci, vec![name])),
        }
    }
    out
}

/// The order of `n` cases in round `round`: a shuffle seeded by the plan's
/// name and the round, so a resumed plan repeats it.
pub fn order(n: usize, plan_name: &str, round: u32) -> Vec<usize> {
    let seed = plan_name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) ^ u64::from(round);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    order
}

/// Runs still expected before the plan ends: each due cell to `min_runs`,
/// or to `max_runs` once past it (an inconclusive comparison runs to the
/// cap), its reference alongside, scaled by the share of runs so far that
/// had to be repeated.
pub fn runs_left(plan: &Plan, cases: &[ResolvedCase], records: &[RunRecord]) -> usize {
    let rules = &plan.rules;
    let mut rounds_left: std::collections::BTreeMap<(usize, String), u32> = Default::default();
    for (ci, workloads) in due(plan, cases, records) {
        for w in workloads {
            let n = samples(records, &cases[ci].name, &w).len() as u32;
            let goal = if n < rules.min_runs {
                rules.min_runs
            } else {
                rules.max_runs
            };
            rounds_left.insert((ci, w), goal.saturating_sub(n).max(1));
        }
    }
    // A reference runs as long as the longest of its cases.
    for (ci, case) in cases.iter().enumerate() {
        let Some(r) = reference_of(cases, case) else {
            continue;
        };
        let Some(ri) = cases.iter().position(|c| c.name == r) else {
            continue;
        };
        for w in &case.workloads {
            if let Some(&left) = rounds_left.get(&(ci, w.clone())) {
                let theirs = rounds_left.entry((ri, w.clone())).or_insert(0);
                *theirs = (*theirs).max(left);
            }
        }
    }
    let runs: u32 = rounds_left.values().sum();
    let valid = records.iter().filter(|r| r.valid).count().max(1);
    let repeat = (records.len() as f64 / valid as f64).clamp(1.0, 4.0);
    (f64::from(runs) * repeat).ceil() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_report::record::Metric;

    fn plan() -> Plan {
        Plan::parse(
            "name = \"t\"\ntopology = \"loopback\"\n[stats]\nmin_runs = 3\nmax_runs = 5\n\
             [[workload]]\nprofile = \"oltp-8k\"\n\
             [[case]]\nname = \"a\"\nmtu = 9000\n[[case]]\nname = \"b\"\ndata_digest = true\n",
            "t.toml",
        )
        .unwrap()
    }

    fn run(case: &str, round: u32, value: f64, valid: bool) -> RunRecord {
        RunRecord {
            plan: "t".into(),
            case: case.into(),
            workload: "oltp-8k".into(),
            run: round,
            topology: "loopback".into(),
            knobs: Default::default(),
            skipped_knobs: Default::default(),
            metric: Metric::Iops,
            value,
            steal_pct: 0.0,
            valid,
            invalid_reason: (!valid).then(|| "foreign load".to_string()),
            round,
            foreign: None,
            bench: serde_json::json!({ "iops": value }),
            series: Vec::new(),
            started_at: String::new(),
        }
    }

    fn names(plan: &Plan, due: &[(usize, Vec<String>)]) -> Vec<String> {
        let cases = plan.resolved_cases();
        due.iter().map(|(ci, _)| cases[*ci].name.clone()).collect()
    }

    #[test]
    fn every_case_is_due_until_min_runs_and_a_round_holds_each_once() {
        let plan = plan();
        let cases = plan.resolved_cases();
        assert_eq!(
            names(&plan, &due(&plan, &cases, &[])),
            ["baseline", "a", "b"]
        );
        for round in 1..=8 {
            let mut o = order(3, "t", round);
            assert_eq!(o.len(), 3);
            o.sort_unstable();
            assert_eq!(o, [0, 1, 2], "round {round}: each case once");
        }
        // The order changes between rounds and is the same for the same round.
        let orders: BTreeSet<Vec<usize>> = (1..=8).map(|r| order(3, "t", r)).collect();
        assert!(orders.len() > 1, "{orders:?}");
        assert_eq!(order(3, "t", 5), order(3, "t", 5));
        let firsts: BTreeSet<usize> = (1..=16).map(|r| order(3, "t", r)[0]).collect();
        assert_eq!(firsts.len(), 3, "the baseline is not always first");
    }

    #[test]
    fn a_conclusive_case_stops_and_its_reference_runs_only_for_the_others() {
        let plan = plan();
        let cases = plan.resolved_cases();
        let mut records = Vec::new();
        for round in 1..=3 {
            let wobble = [0.0, 3.0, -3.0][round as usize - 1];
            records.push(run("baseline", round, 1000.0 + wobble, true));
            // a: +20%, tight: conclusive after three rounds.
            records.push(run("a", round, 1200.0 + wobble, true));
            // b: +6% give or take 8%: straddles the threshold.
            records.push(run(
                "b",
                round,
                [1140.0, 1000.0, 1040.0][round as usize - 1],
                true,
            ));
        }
        assert_eq!(next_round(&records), 4);
        let d = due(&plan, &cases, &records);
        assert_eq!(names(&plan, &d), ["baseline", "b"]);
        // Up to max_runs (5), then nothing is due.
        for round in 4..=5 {
            records.push(run("baseline", round, 1000.0, true));
            records.push(run("b", round, [1150.0, 980.0][round as usize - 4], true));
        }
        assert!(due(&plan, &cases, &records).is_empty());
    }

    #[test]
    fn spoiled_runs_are_retried_up_to_a_cap_and_counted_in_the_estimate() {
        let plan = plan();
        let cases = plan.resolved_cases();
        let mut records = vec![run("baseline", 1, 1000.0, true), run("a", 1, 1200.0, true)];
        let left_before = runs_left(&plan, &cases, &records);
        // b's runs are all spoiled by foreign load.
        for round in 1..=7 {
            records.push(run("b", round, 900.0, false));
        }
        let left_after = runs_left(&plan, &cases, &records);
        assert!(
            left_after > left_before,
            "{left_before} -> {left_after}: repeats are expected"
        );
        // 7 attempts = max_runs 5 + ATTEMPTS_OVER_CAP - 1: one more try.
        assert!(names(&plan, &due(&plan, &cases, &records)).contains(&"b".to_string()));
        records.push(run("b", 8, 900.0, false));
        assert!(!names(&plan, &due(&plan, &cases, &records)).contains(&"b".to_string()));
    }
}
