//! The report's sections in order (METHODOLOGY.md "Reports"): the answer
//! to the plan's question, findings, headline, test cases, % change over
//! the baseline, CPU effectiveness, throughput beside CPU, throughput
//! second by second, latency, retransmissions and CPU, recommended
//! configuration, notes, environment, and the plan file.

use super::charts::{self, knobs_line};
use super::document::{para, table, Block, Cell, Span};
use super::effects::{effect_cell, test_name};
use super::numbers::{change, change_ci, num, pct, short_us, small_pct};
use super::recommend::{self, Finding};
use super::{notes, summarize, Buckets, CellSummary, Latency, ReportInput, WorkloadInfo};
use crate::stats::{Effect, Next};

/// Every block of the report.
pub fn build(input: &ReportInput) -> Vec<Block> {
    let cells = summarize(input);
    let mut b = Vec::new();
    b.extend(front(input, &cells));
    b.extend(not_measured(input));
    b.extend(super::answer::build(input, &cells));
    b.extend(super::findings::build(input, &cells));
    b.extend(headline(input, &cells));
    b.extend(cases(input));
    b.extend(change_section(input, &cells));
    b.extend(cpu_change_section(input, &cells));
    b.extend(effectiveness(input, &cells));
    b.extend(throughput_beside_cpu(input, &cells));
    b.extend(over_time(input));
    b.extend(latency(input, &cells));
    b.extend(super::applications::section(input));
    b.extend(super::by_component::section(input));
    b.extend(retransmissions(input, &cells));
    b.extend(recommended(input, &cells));
    b.extend(notes_section(input, &cells));
    b.extend(environment(input));
    b.extend(appendix(input));
    b
}

fn cell<'a>(cells: &'a [CellSummary], case: &str, workload: &str) -> Option<&'a CellSummary> {
    cells
        .iter()
        .find(|c| c.case == case && c.workload == workload)
}

fn of_workload<'a>(
    input: &'a ReportInput,
    cells: &'a [CellSummary],
    w: &'a WorkloadInfo,
) -> impl Iterator<Item = (&'a str, Option<&'a CellSummary>)> + 'a {
    input
        .cases
        .iter()
        .filter(|c| c.runs(&w.name))
        .map(move |c| (c.name.as_str(), cell(cells, &c.name, &w.name)))
}

/// The seeds' RSD verdict: "yes", "no (cap)", "no" (the rounds stopped
/// on a conclusive comparison first); "unfinished" for a cell that did not
/// get its rounds, whose RSD is provisional; "no valid runs", "not run".
pub fn convergence(c: Option<&CellSummary>) -> &'static str {
    match c {
        Some(c) if c.runs_valid + c.runs_invalid == 0 => "not run",
        Some(c) if c.runs_valid == 0 => "no valid runs",
        Some(c) if c.unfinished => "unfinished",
        Some(c) => match c.next {
            Next::Converged => "yes",
            Next::NotConverged => "no (cap)",
            Next::RunAgain => "no",
        },
        None => "not run",
    }
}

/// A change over the case's reference, emphasised when significant, the
/// reference named when it is not the baseline.
fn change_cell(input: &ReportInput, case: &str, c: Option<&CellSummary>) -> Cell {
    let baseline = input.baseline().map_or("baseline", |b| b.name.as_str());
    if case == baseline {
        return "baseline".into();
    }
    let reference = input.reference_of(case);
    let against = if reference == baseline {
        String::new()
    } else {
        format!(" vs {reference}")
    };
    effect_cell(c.and_then(|c| c.effect), &against)
}

fn front(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let env = &input.environment;
    let r = &input.rules;
    let valid: usize = input.records.iter().filter(|r| r.valid).count();
    let when = match (env.started_at.is_empty(), env.finished_at.is_empty()) {
        (false, false) => format!("{} to {}", env.started_at, env.finished_at),
        (false, true) => format!("{} (unfinished)", env.started_at),
        _ => "unknown".to_string(),
    };
    let converged = cells.iter().filter(|c| c.converged).count();
    let compared = cells.iter().filter(|c| c.effect.is_some()).count();
    let conclusive = cells
        .iter()
        .filter(|c| c.effect.is_some_and(|e| e.conclusive))
        .count();
    let item = |k: &str, v: String| {
        (
            vec![Span::Strong(format!("{k}:")), Span::Text(format!(" {v}"))],
            vec![],
        )
    };
    let mut b = vec![Block::Heading(
        1,
        format!("isoe lab report: {}", input.plan_name),
        None,
    )];
    if !input.plan_description.is_empty() {
        b.push(para(input.plan_description.clone()));
    }
    b.push(Block::List(vec![
        item(
            "Plan",
            format!("{}, from {}", input.plan_name, input.plan_source),
        ),
        item("Reproduces", super::seeds::describe(&input.seeds)),
        item("Topology", input.topology.clone()),
        item("Date", when),
        item(
            "Host",
            format!(
                "{} — {}, {} CPUs, kernel {}",
                env.host, env.cpu_model, env.ncpus, env.kernel
            ),
        ),
        item(
            "Rules",
            format!(
                "every case runs beside its reference in rounds, in a shuffled order, at least {} \
                 rounds and at most {}, until each comparison's 95% confidence interval lies \
                 wholly beyond or wholly within ±{}%; an effect is significant beyond ±{}% when \
                 a t-test also rejects \"no change\" at 5%; runs with more than {}% CPU steal \
                 or more than {}% of a CPU used by other processes are repeated. The seeds' \
                 rule (RSD at most {}%) is shown per cell.",
                r.min_runs,
                r.max_runs,
                r.significance_pct,
                r.significance_pct,
                r.steal_max_pct,
                r.foreign_max_pct,
                r.rsd_target_pct
            ),
        ),
        item(
            "CPU placement",
            if input.pin_cpus {
                "the initiator's processes held to the first CPU, the target's to the last \
                 (pin_cpus)"
                    .to_string()
            } else {
                "as the scheduler places them (pin_cpus off)".to_string()
            },
        ),
        item(
            "Runs",
            format!(
                "{} cases × {} workloads, {} valid runs of {}; {} of {} comparisons conclusive; \
                 {} of {} cells met the seeds' RSD target",
                input.cases.len(),
                input.workloads.len(),
                valid,
                input.records.len(),
                conclusive,
                compared,
                converged,
                cells.len()
            ),
        ),
        item(
            "Units",
            "MB = 10^6 bytes, KiB = 1024 bytes; CPU% is a share of all the host's CPUs (0–100); \
             CPU-µs per I/O is busy CPU time ÷ commands"
                .to_string(),
        ),
    ]));
    b
}

/// The cases that did not run, and why, before anything is concluded: a
/// reader must not take the findings for the whole plan.
fn not_measured(input: &ReportInput) -> Option<Block> {
    if input.skipped_cases.is_empty() {
        return None;
    }
    let items = input
        .skipped_cases
        .iter()
        .map(|(case, why)| {
            let earlier = input.records.iter().filter(|r| r.case == *case).count();
            if earlier == 0 {
                format!("{case}: {why}")
            } else {
                format!(
                    "{case}: {why} (the {earlier} runs of it shown are from an earlier invocation)"
                )
            }
        })
        .collect();
    Some(Block::Warning {
        title: "Skipped: not measured.".into(),
        text: "These cases did not run here, because the machine lacks what they need; \
               the findings and tables say nothing about their settings."
            .into(),
        items,
    })
}

fn headline(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "Headline".into(), Some("headline")),
        Block::Para(vec![
            Span::Text("One table per workload. ".into()),
            Span::Strong("Bold".into()),
            Span::Text(format!(
                " changes are significant and conclusive (beyond ±{}% of the reference, \
                 \"no change\" rejected at 5%, the 95% interval wholly beyond ±{}%). A change is \
                 over the baseline unless it names the case it is measured against (the plan's \
                 compare_to). RSD: relative standard deviation of the runs; seed RSD: the seeds' \
                 target of at most {}% met. Foreign CPU: other processes' CPU during the valid runs, \
                 % of one CPU. CPU-µs per I/O, one figure per side: host, every CPU of the \
                 initiator's machine (its processes, kernel threads and softirq; on one machine, \
                 both sides), the figure that compares every kind of initiator alike; initiator \
                 and target process, their own processes' time (isoe attach's for its block \
                 devices; none for the kernel's initiator, and fio, the load on a block device, \
                 is not the initiator); target host, where the target has a machine of its own, \
                 every CPU of it (none where that machine also runs the bed's VM). MB/s per CPU%: \
                 host-wide, all CPUs.",
                input.rules.significance_pct,
                input.rules.significance_pct,
                input.rules.rsd_target_pct
            )),
        ]),
    ];
    for w in &input.workloads {
        b.push(Block::Heading(
            3,
            format!("{} ({})", w.name, w.metric.label()),
            None,
        ));
        if !w.description.is_empty() {
            b.push(para(w.description.clone()));
        }
        let m = w.metric.label();
        // The target's host column only where a target had a host of its
        // own (a test bed): in namespaces the host's figure is both sides'.
        let target_host = of_workload(input, cells, w)
            .any(|(_, c)| c.is_some_and(|c| c.target_host_cpu_us_per_io.is_some()));
        let rows = of_workload(input, cells, w)
            .map(|(case, c)| {
                let s = c.and_then(|c| c.stats);
                let mut row: Vec<Cell> = vec![
                    case.into(),
                    num(s.map(|s| s.mean)).into(),
                    num(s.map(|s| s.median)).into(),
                    pct(s.map(|s| s.rsd_pct)).into(),
                    c.map_or(0, |c| c.runs_valid).to_string().into(),
                    convergence(c).into(),
                    change_cell(input, case, c),
                    pct(c.and_then(|c| c.foreign_pct)).into(),
                    num(c.and_then(|c| c.system.cpu_us_per_io)).into(),
                    num(c.and_then(|c| c.initiator.cpu_us_per_io)).into(),
                    num(c.and_then(|c| c.target.cpu_us_per_io)).into(),
                ];
                if target_host {
                    row.push(num(c.and_then(|c| c.target_host_cpu_us_per_io)).into());
                }
                row.push(num(c.and_then(|c| c.system.mb_per_s_per_cpu_pct)).into());
                row
            })
            .collect();
        let mean = format!("{m} mean");
        let mut head = vec![
            "case",
            &mean,
            "median",
            "RSD %",
            "N",
            "seed RSD",
            "change (95% CI)",
            "foreign CPU %",
            "host CPU-µs/IO",
            "initiator process CPU-µs/IO",
            "target process CPU-µs/IO",
        ];
        if target_host {
            head.push("target host CPU-µs/IO");
        }
        head.push("MB/s per CPU%");
        let right: Vec<bool> = (0..head.len()).map(|i| i != 0 && i != 5).collect();
        b.push(table(&head, &right, rows));
    }
    b
}

fn cases(input: &ReportInput) -> Vec<Block> {
    let rows = input
        .cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let knobs = if i == 0 {
                let all: Vec<String> = input
                    .baseline_knobs
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect();
                if all.is_empty() {
                    "(the baseline: defaults)".to_string()
                } else {
                    format!("(the baseline) {}", all.join(", "))
                }
            } else {
                knobs_line(input, &c.name)
            };
            // The topology its runs used (a plan may run a case elsewhere).
            let mut topologies: Vec<&str> = input
                .records
                .iter()
                .filter(|r| r.case == c.name)
                .map(|r| r.topology.as_str())
                .collect();
            topologies.sort_unstable();
            topologies.dedup();
            let topology = if topologies.is_empty() {
                input.topology.clone()
            } else {
                topologies.join(", ")
            };
            let against = if i == 0 {
                "–"
            } else {
                input.reference_of(&c.name)
            };
            vec![
                c.name.as_str().into(),
                knobs.into(),
                against.into(),
                topology.into(),
                c.description.as_str().into(),
            ]
        })
        .collect();
    vec![
        Block::Heading(2, "Test cases".into(), Some("cases")),
        para(
            "The baseline, then cases that each change one setting (or a few) from it (seed 001 \
             Tables 1–5); a case measured against another case (a cumulative series, seed 002) \
             says which.",
        ),
        table(
            &[
                "case",
                "changes from the baseline",
                "measured against",
                "topology",
                "description",
            ],
            &[false, false, false, false, false],
            rows,
        ),
    ]
}

/// The change matrix: cases × workloads, or workloads × cases when there
/// are more workloads than cases, so that the table stays narrow.
fn change_table(input: &ReportInput, cells: &[CellSummary]) -> Block {
    let cases: Vec<&str> = input
        .cases
        .iter()
        .skip(1)
        .map(|c| c.name.as_str())
        .collect();
    let workloads: Vec<String> = input
        .workloads
        .iter()
        .map(|w| format!("{} ({})", w.name, w.metric.label()))
        .collect();
    let value = |case: &str, w: usize| {
        let workload = &input.workloads[w].name;
        change_cell(input, case, cell(cells, case, workload))
    };
    let by_workload = workloads.len() > cases.len();
    let (corner, columns) = if by_workload {
        (
            "workload",
            cases.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        )
    } else {
        ("case", workloads.clone())
    };
    let rows = if by_workload {
        (0..workloads.len())
            .map(|w| {
                let mut row: Vec<Cell> = vec![workloads[w].as_str().into()];
                row.extend(cases.iter().map(|c| value(c, w)));
                row
            })
            .collect()
    } else {
        cases
            .iter()
            .map(|c| {
                let mut row: Vec<Cell> = vec![(*c).into()];
                row.extend((0..workloads.len()).map(|w| value(c, w)));
                row
            })
            .collect()
    };
    let mut head = vec![corner.to_string()];
    head.extend(columns.iter().cloned());
    let mut right = vec![false];
    right.extend(columns.iter().map(|_| true));
    Block::Table { head, right, rows }
}

fn change_section(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let t = input.rules.significance_pct;
    let mut b = vec![
        Block::Heading(2, "% change over the baseline".into(), Some("change")),
        para(format!(
            "Each case's mean against the baseline's mean, or against the case it is compared to \
             (named under the case and in the table), per workload (seed 001 Figures 3–9). \
             Changes within ±{t}% are not significant: hatched in the chart, plain in the table."
        )),
        Block::Figure {
            svg: charts::change_over_baseline(input, cells),
            caption: format!(
                "% change over the reference; solid bars are significant (beyond ±{t}%), the grey band is ±{t}%."
            ),
        },
    ];
    if input.cases.len() > 1 {
        b.push(change_table(input, cells));
    } else {
        b.push(para("No cases besides the baseline: nothing to compare."));
    }
    b
}

/// Each case's CPU per I/O against its reference's, with intervals, per
/// side: the comparison seeds 000, 003 and 004 make between initiators.
fn cpu_change_section(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let baseline = input.baseline().map_or("baseline", |b| b.name.as_str());
    let mut rows = Vec::new();
    for w in &input.workloads {
        for case in input.cases.iter().filter(|c| c.name != baseline) {
            let Some(c) = cell(cells, &case.name, &w.name) else {
                continue;
            };
            let effects = [c.cpu_effect, c.initiator_cpu_effect, c.target_cpu_effect];
            if effects.iter().all(Option::is_none) {
                continue;
            }
            let mut row: Vec<Cell> = vec![
                w.name.as_str().into(),
                case.name.as_str().into(),
                input.reference_of(&case.name).into(),
            ];
            row.extend(effects.into_iter().map(|e| effect_cell(e, "")));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Heading(
            2,
            "CPU per I/O against the reference".into(),
            Some("cpu-change"),
        ),
        para(
            "Each case's CPU-µs per I/O against its reference's, paired round by round, with \
             95% confidence intervals (negative: the case costs less CPU per command). Host: \
             busy time of all the CPUs of the initiator's machine (on a test bed) or of this \
             machine, from /proc/stat, taken the same way for every initiator; initiator and \
             target: their processes' own time (on a test bed, LIO's is its host's busy time; \
             an initiator in the kernel or behind a block device has none: fio, the load, is \
             not the initiator, and the initiator's work is in the host's figure).",
        ),
        Block::Table {
            head: [
                "workload",
                "case",
                "against",
                "host CPU-µs/IO",
                "initiator process CPU-µs/IO",
                "target process CPU-µs/IO",
            ]
            .map(String::from)
            .to_vec(),
            right: vec![false, false, false, true, true, true],
            rows,
        },
    ]
}

fn effectiveness(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "CPU effectiveness: MB/s per CPU%".into(), Some("effectiveness")),
        para(
            "Throughput per percent of the host's CPU (seed 000's headline metric): host-wide from \
             /proc/stat, and per process for the initiator and the target. Higher is better.",
        ),
    ];
    for (i, w) in input.workloads.iter().enumerate() {
        b.push(Block::Figure {
            svg: charts::effectiveness(input, cells, w, i),
            caption: format!(
                "{}: MB/s per CPU%, host-wide, initiator and target, per case.",
                w.name
            ),
        });
    }
    let rows = input
        .workloads
        .iter()
        .flat_map(|w| {
            of_workload(input, cells, w).map(|(case, c)| {
                vec![
                    w.name.as_str().into(),
                    case.into(),
                    num(c.and_then(|c| c.system.mb_per_s_per_cpu_pct)).into(),
                    num(c.and_then(|c| c.initiator.mb_per_s_per_cpu_pct)).into(),
                    num(c.and_then(|c| c.target.mb_per_s_per_cpu_pct)).into(),
                    num(c.and_then(|c| c.system.iops_per_cpu_pct)).into(),
                    num(c.and_then(|c| c.initiator.iops_per_cpu_pct)).into(),
                ]
            })
        })
        .collect();
    b.push(table(
        &[
            "workload",
            "case",
            "host MB/s per CPU%",
            "initiator MB/s per CPU%",
            "target MB/s per CPU%",
            "host IOPS per CPU%",
            "initiator IOPS per CPU%",
        ],
        &[false, false, true, true, true, true, true],
        rows,
    ));
    b
}

fn throughput_beside_cpu(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "Throughput beside CPU".into(), Some("throughput")),
        para(
            "Seed 004's layout: large-block workloads in MB/s, small-block workloads in IOPS, each \
             beside the CPU it cost on each side (CPU% of all CPUs, and CPU-µs per I/O), and the \
             commands its runs kept in flight in all, over every path and worker (the seeds' \
             outstanding I/Os).",
        ),
    ];
    for large in [true, false] {
        let (title, unit) = if large {
            ("Large-block workloads (MB/s)", "MB/s")
        } else {
            ("Small-block workloads (IOPS)", "IOPS")
        };
        b.push(Block::Heading(3, title.into(), None));
        let rows: Vec<Vec<Cell>> = input
            .workloads
            .iter()
            .filter(|w| w.large_block == large)
            .flat_map(|w| {
                of_workload(input, cells, w).map(move |(case, c)| {
                    let value = if large {
                        c.and_then(|c| c.mb_per_s)
                    } else {
                        c.and_then(|c| c.iops)
                    };
                    let in_flight = c
                        .map(|c| c.in_flight.iter().map(u64::to_string).collect::<Vec<_>>())
                        .filter(|v| !v.is_empty())
                        .map_or_else(|| "–".to_string(), |v| v.join(", "));
                    vec![
                        w.name.as_str().into(),
                        case.into(),
                        in_flight.into(),
                        num(value).into(),
                        pct(c.and_then(|c| c.initiator.cpu_pct)).into(),
                        pct(c.and_then(|c| c.target.cpu_pct)).into(),
                        pct(c.and_then(|c| c.system.cpu_pct)).into(),
                        num(c.and_then(|c| c.initiator.cpu_us_per_io)).into(),
                        num(c.and_then(|c| c.target.cpu_us_per_io)).into(),
                        num(c.and_then(|c| c.system.cpu_us_per_io)).into(),
                    ]
                })
            })
            .collect();
        if rows.is_empty() {
            b.push(para(format!(
                "None in this plan: no workload is {}.",
                if large { "large-block" } else { "small-block" }
            )));
            continue;
        }
        b.push(table(
            &[
                "workload",
                "case",
                "in flight",
                unit,
                "initiator CPU %",
                "target CPU %",
                "host busy %",
                "initiator CPU-µs/IO",
                "target CPU-µs/IO",
                "host CPU-µs/IO",
            ],
            &[false, false, true, true, true, true, true, true, true, true],
            rows,
        ));
    }
    b
}

/// Sparkline characters, lowest to highest.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Characters at most in a per-second sparkline.
const SECONDS_SPARK_MAX: usize = 60;

/// Per-second values as block characters scaled from 0 to the highest (·
/// for 0), so a steady run reads as a flat top and a stall as a dip; more
/// than 60 seconds are shown 60 groups wide, each group by its lowest second.
fn seconds_sparkline(values: &[f64]) -> String {
    let hi = values.iter().copied().fold(0.0, f64::max);
    if values.is_empty() || hi <= 0.0 {
        return "–".into();
    }
    let groups = values.len().min(SECONDS_SPARK_MAX);
    (0..groups)
        .map(|g| {
            let (a, b) = (
                g * values.len() / groups,
                ((g + 1) * values.len() / groups).max(g * values.len() / groups + 1),
            );
            let v = values[a..b].iter().copied().fold(f64::INFINITY, f64::min);
            if v <= 0.0 {
                '·'
            } else {
                LEVELS[(((v / hi) * 8.0).ceil() as usize).clamp(1, 8) - 1]
            }
        })
        .collect()
}

fn over_time(input: &ReportInput) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "Throughput second by second".into(), Some("over-time")),
        para(
            "Each workload's metric in each second of the measured window, from the most recent \
             valid run of each case (isoe bench's per-second series): a steady run is flat, a \
             stall is a dip. Lowest second: the slowest second as a share of the run's mean \
             second. fio runs (libiscsi, block devices) record no per-second series.",
        ),
    ];
    let apps: Vec<&str> = super::applications::workloads(input)
        .iter()
        .map(|(w, _)| w.name.as_str())
        .collect();
    if !apps.is_empty() {
        b.push(para(format!(
            "Not shown: {}, whose application runs (pgbench, or fio on a file system) record \
             no per-second series.",
            apps.join(", ")
        )));
    }
    for w in input
        .workloads
        .iter()
        .filter(|w| !apps.contains(&w.name.as_str()))
    {
        let m = w.metric.label();
        b.push(Block::Heading(
            3,
            format!("{} ({m}) second by second", w.name),
            None,
        ));
        let mut rows: Vec<Vec<Cell>> = Vec::new();
        let mut missing = Vec::new();
        for case in input.cases.iter().filter(|c| c.runs(&w.name)) {
            rows.push(over_time_row(input, &case.name, w, &mut missing));
        }
        let caption = if missing.is_empty() {
            format!(
                "{}: {m} per second, each case's most recent valid run.",
                w.name
            )
        } else {
            format!(
                "{}: {m} per second, each case's most recent valid run. Not drawn: {}.",
                w.name,
                missing.join("; ")
            )
        };
        b.push(Block::Figure {
            svg: charts::over_time(input, w),
            caption,
        });
        b.push(table(
            &[
                "case",
                "run",
                "seconds",
                &format!("lowest {m}"),
                "mean",
                "highest",
                "lowest second, % of mean",
                "per second",
            ],
            &[false, true, true, true, true, true, true, false],
            rows,
        ));
    }
    b
}

/// A case's row of the second-by-second table; what is missing is said
/// in `missing` and in the row.
fn over_time_row(
    input: &ReportInput,
    case: &str,
    w: &WorkloadInfo,
    missing: &mut Vec<String>,
) -> Vec<Cell> {
    match charts::latest_series(input, case, &w.name) {
        Ok(r) => {
            let (lo, mean, hi) = charts::series_range(w.metric, r);
            let values: Vec<f64> = r
                .series
                .iter()
                .map(|p| charts::per_second(w.metric, p))
                .collect();
            let span: f64 = r.series.iter().map(|p| p.span_s).sum();
            vec![
                case.into(),
                r.run.to_string().into(),
                format!("{span:.1}").into(),
                num(Some(lo)).into(),
                num(Some(mean)).into(),
                num(Some(hi)).into(),
                pct((mean > 0.0).then(|| 100.0 * lo / mean)).into(),
                seconds_sparkline(&values).into(),
            ]
        }
        Err(why) => {
            missing.push(format!("{case}: {why}"));
            vec![
                case.into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                why.into(),
            ]
        }
    }
}

/// A histogram as a line of block characters over `uppers` (· for empty).
fn sparkline(uppers: &[f64], hist: &Buckets) -> String {
    let total: u64 = hist.iter().map(|b| b.1).sum();
    if total == 0 {
        return "–".into();
    }
    let counts = charts::aligned(uppers, hist);
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    counts
        .iter()
        .map(|&c| {
            if c == 0 {
                '·'
            } else {
                LEVELS[(((c as f64 / max) * 8.0).ceil() as usize).clamp(1, 8) - 1]
            }
        })
        .collect()
}

/// "read p50 120 µs, p99 250 µs", or "no reads".
fn percentiles(direction: &str, l: &Latency) -> String {
    match (l.us_p50, l.us_p99) {
        (None, None) => format!("no {direction}s"),
        (p50, p99) => format!("{direction} p50 {} µs, p99 {} µs", num(p50), num(p99)),
    }
}

fn latency(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "Latency".into(), Some("latency")),
        para(
            "Per command, submit to status, in µs (seed 003; for an application workload, its \
             block I/O from issue to completion at the block layer). Percentiles are the means of \
             the runs' percentiles; histograms sum the runs' log2 buckets (a bucket holds latencies above half \
             its bound up to its bound) and show each direction's share of its I/Os.",
        ),
    ];
    for w in &input.workloads {
        b.push(Block::Heading(3, format!("{} latency", w.name), None));
        let hists: Vec<&Buckets> = of_workload(input, cells, w)
            .filter_map(|(_, c)| c)
            .flat_map(|c| [&c.read.hist, &c.write.hist])
            .collect();
        let uppers = charts::shared_uppers(&hists);
        let svgs = charts::histograms(input, cells, w);
        let grid = of_workload(input, cells, w)
            .zip(svgs)
            .map(|((case, c), svg)| {
                let caption = match c {
                    Some(c) if c.runs_valid > 0 => format!(
                        "{case}: {}; {} ({} of {} runs with a histogram)",
                        percentiles("read", &c.read),
                        percentiles("write", &c.write),
                        c.hist_runs,
                        c.runs_valid
                    ),
                    _ => format!("{case}: no valid runs"),
                };
                (svg, caption)
            })
            .collect();
        b.push(Block::Grid(grid));
        let range = match (uppers.first(), uppers.last()) {
            (Some(lo), Some(hi)) => format!(", {}–{} µs", short_us(lo / 2.0), short_us(*hi)),
            _ => String::new(),
        };
        let rows = of_workload(input, cells, w)
            .map(|(case, c)| {
                let empty = Buckets::new();
                let (rh, wh) = c.map_or((&empty, &empty), |c| (&c.read.hist, &c.write.hist));
                vec![
                    case.into(),
                    num(c.and_then(|c| c.read.us_p50)).into(),
                    num(c.and_then(|c| c.read.us_p99)).into(),
                    num(c.and_then(|c| c.write.us_p50)).into(),
                    num(c.and_then(|c| c.write.us_p99)).into(),
                    sparkline(&uppers, rh).into(),
                    sparkline(&uppers, wh).into(),
                ]
            })
            .collect();
        b.push(table(
            &[
                "case",
                "read p50 µs",
                "read p99 µs",
                "write p50 µs",
                "write p99 µs",
                &format!("read histogram{range}"),
                &format!("write histogram{range}"),
            ],
            &[false, true, true, true, true, false, false],
            rows,
        ));
    }
    b
}

fn retransmissions(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let mut b = vec![
        Block::Heading(2, "Retransmissions and CPU".into(), Some("retransmissions")),
        para(
            "TCP segments retransmitted as a share of segments sent (/proc/net/snmp), with the D-SACK \
             segments received beside them: on veth most retransmissions are spurious (reordering), \
             and a D-SACK says so. The initiator side's counters first, then the target side's (its \
             own namespace's or host's; – where it shares the initiator's). CPU beside it, as in \
             seed 001 Figure 6. Counts are means per run.",
        ),
    ];
    for (i, w) in input.workloads.iter().enumerate() {
        b.push(Block::Heading(
            3,
            format!("{} retransmissions and CPU", w.name),
            None,
        ));
        b.push(Block::Figure {
            svg: charts::retrans_and_cpu(input, cells, w, i),
            caption: format!(
                "{}: retransmitted segments (% of sent, D-SACKs beside) and CPU per side.",
                w.name
            ),
        });
        let rows = of_workload(input, cells, w)
            .map(|(case, c)| {
                vec![
                    case.into(),
                    c.and_then(|c| c.retrans_pct)
                        .map_or("–".into(), small_pct)
                        .into(),
                    num(c.and_then(|c| c.retrans_segs)).into(),
                    num(c.and_then(|c| c.dsack_segs)).into(),
                    num(c.and_then(|c| c.out_segs)).into(),
                    c.and_then(|c| c.target_retrans_pct)
                        .map_or("–".into(), small_pct)
                        .into(),
                    num(c.and_then(|c| c.target_retrans_segs)).into(),
                    num(c.and_then(|c| c.target_out_segs)).into(),
                    pct(c.and_then(|c| c.system.cpu_pct)).into(),
                    pct(c.and_then(|c| c.initiator.cpu_pct)).into(),
                    pct(c.and_then(|c| c.target.cpu_pct)).into(),
                ]
            })
            .collect();
        b.push(table(
            &[
                "case",
                "retransmitted %",
                "retransmitted segs",
                "D-SACK segs",
                "sent segs",
                "target retransmitted %",
                "target retransmitted segs",
                "target sent segs",
                "host busy %",
                "initiator CPU %",
                "target CPU %",
            ],
            &[
                false, true, true, true, true, true, true, true, true, true, true,
            ],
            rows,
        ));
    }
    b
}

fn finding_item(verdict: &str, f: &Finding) -> (Vec<Span>, Vec<String>) {
    let mut spans = vec![Span::Strong(format!("{verdict}:")), Span::Text(" ".into())];
    for (i, s) in f.settings.iter().enumerate() {
        if i > 0 {
            spans.push(Span::Text(", ".into()));
        }
        spans.push(Span::Code(format!("{} = {}", s.knob, s.value)));
        spans.push(Span::Text(format!(" ({}: {})", f.reference, s.from)));
    }
    if f.settings.is_empty() {
        spans.push(Span::Text("(no knobs named)".into()));
    }
    let cpu = f.cpu_effect.map_or(String::new(), |c| {
        format!("; host CPU-µs per I/O {}", change_ci(&c))
    });
    let mut caveat = String::new();
    if !f.skipped.is_empty() {
        caveat.push_str(&format!(
            "; not applied in some runs: {}",
            f.skipped.join(", ")
        ));
    }
    let against = if f.reference == "baseline" {
        String::new()
    } else {
        format!(" against {}", f.reference)
    };
    spans.push(Span::Text(format!(
        " — case {}{against}: {} {}, {}{cpu}{caveat}",
        f.case,
        change_ci(&f.effect),
        f.metric.label(),
        test_name(&f.effect)
    )));
    (spans, vec![])
}

fn recommended(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let t = input.rules.significance_pct;
    let advice = recommend::recommend(input, cells);
    let overall = recommend::overall(input, &advice);
    let mut b = vec![
        Block::Heading(2, "Recommended configuration".into(), Some("recommended")),
        para(format!(
            "As in seed 001 Tables 6–9: only settings whose case changed a workload's metric by more \
             than ±{t}% of its reference (the baseline, or the case it is compared to), with a \
             t-test rejecting \"no change\" at 5% and the 95% confidence interval wholly beyond \
             ±{t}%, are listed, each as it differs from that reference; the gains and losses \
             columns say what backs each line (the change, its interval and the test). Gains are \
             recommended for that workload, losses are to avoid; a setting that only saved CPU \
             (host CPU-µs per I/O down by the same rule) is listed apart. Inconclusive \
             comparisons recommend nothing."
        )),
        Block::Heading(3, "Over all workloads".into(), None),
    ];
    let elsewhere: Vec<String> = input
        .cases
        .iter()
        .filter_map(|c| {
            let (own, theirs) = input.topology_change(&c.name)?;
            Some(format!(
                "{} ({own}, against {} on {theirs})",
                c.name,
                input.reference_of(&c.name)
            ))
        })
        .collect();
    if !elsewhere.is_empty() {
        b.push(para(format!(
            "Left out: cases measured against a case on another topology, whose effect is the \
             topology's as much as their settings': {}.",
            elsewhere.join("; ")
        )));
    }
    if overall.is_empty() {
        b.push(para(format!(
            "No setting had a significant effect (beyond ±{t}%) on any workload: keep the baseline."
        )));
    } else {
        b.push(overall_table(&overall));
    }
    for a in &advice {
        b.extend(workload_advice(a, t));
    }
    b
}

/// The settings that changed any workload, one row each.
fn overall_table(overall: &[recommend::OverallAdvice]) -> Block {
    let effects = |list: &[(String, Effect)]| {
        if list.is_empty() {
            "–".to_string()
        } else {
            list.iter()
                .map(|(w, e)| format!("{w} {}, {}", change_ci(e), test_name(e)))
                .collect::<Vec<_>>()
                .join("; ")
        }
    };
    let rows = overall
        .iter()
        .map(|o| {
            let settings = o
                .settings
                .iter()
                .map(|s| s.knob.clone())
                .collect::<Vec<_>>()
                .join(", ");
            let from = o
                .settings
                .iter()
                .map(|s| s.from.clone())
                .collect::<Vec<_>>()
                .join(", ");
            let value = o
                .settings
                .iter()
                .map(|s| s.value.clone())
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                if settings.is_empty() {
                    "(no knobs named)".into()
                } else {
                    settings.into()
                },
                from.into(),
                value.into(),
                o.case.as_str().into(),
                o.reference.as_str().into(),
                effects(&o.gains).into(),
                effects(&o.losses).into(),
                Cell {
                    text: o.verdict.label().into(),
                    strong: true,
                },
            ]
        })
        .collect();
    table(
        &[
            "setting", "from", "to", "case", "against", "gains", "losses", "verdict",
        ],
        &[false, false, false, false, false, false, false, false],
        rows,
    )
}

/// One workload's advice: what to set, what to avoid, what saves CPU,
/// what is inconclusive or was not applied.
fn workload_advice(a: &recommend::WorkloadAdvice, t: f64) -> [Block; 2] {
    let heading = Block::Heading(3, format!("{} ({})", a.workload, a.metric.label()), None);
    let mut items: Vec<(Vec<Span>, Vec<String>)> = Vec::new();
    items.extend(a.gains.iter().map(|f| finding_item("Recommended", f)));
    items.extend(a.losses.iter().map(|f| finding_item("Avoid", f)));
    items.extend(a.cpu_savings.iter().map(|f| finding_item("Saves CPU", f)));
    items.extend(
        a.inconclusive
            .iter()
            .map(|f| finding_item("Inconclusive, recommends nothing", f)),
    );
    items.extend(a.not_applied.iter().map(|f| {
        (
            vec![
                Span::Strong("Not applied:".into()),
                Span::Text(format!(
                    " case {} could not apply {}, so its {} {} says nothing about the setting.",
                    f.case,
                    f.skipped.join(", "),
                    change(f.change_pct),
                    f.metric.label()
                )),
            ],
            vec![],
        )
    }));
    if a.gains.is_empty() && a.losses.is_empty() {
        let text = if a.compared == 0 {
            "No data: no case could be compared with the baseline on this workload.".to_string()
        } else {
            format!(
                "No significant, conclusive effect: no case changed {} by more than ±{t}% \
                 with an interval wholly beyond it ({} compared).",
                a.metric.label(),
                if a.compared == 1 {
                    "1 case".to_string()
                } else {
                    format!("{} cases", a.compared)
                }
            )
        };
        items.insert(0, (vec![Span::Text(text)], vec![]));
    }
    [heading, Block::List(items)]
}

fn notes_section(input: &ReportInput, cells: &[CellSummary]) -> Vec<Block> {
    let notes = notes(input, cells);
    let mut b = vec![Block::Heading(2, "Notes".into(), Some("notes"))];
    if notes.is_empty() {
        b.push(para(
            "Nothing to note: every cell converged, no run was left out, every knob was applied.",
        ));
    } else {
        b.push(Block::List(
            notes
                .into_iter()
                .map(|n| (vec![Span::Text(n.text)], n.items))
                .collect(),
        ));
    }
    b
}

fn environment(input: &ReportInput) -> Vec<Block> {
    let e = &input.environment;
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_string()
        } else {
            s.to_string()
        }
    };
    let mut rows: Vec<Vec<Cell>> = vec![
        vec!["host".into(), or_unknown(&e.host).into()],
        vec!["kernel".into(), or_unknown(&e.kernel).into()],
        vec![
            "CPU".into(),
            format!("{} ({} CPUs)", or_unknown(&e.cpu_model), e.ncpus).into(),
        ],
        vec!["memory".into(), or_unknown(&e.memory).into()],
        vec!["isoe".into(), or_unknown(&e.isoe_version).into()],
        vec!["topology".into(), input.topology.as_str().into()],
        vec!["started".into(), or_unknown(&e.started_at).into()],
        vec!["finished".into(), or_unknown(&e.finished_at).into()],
    ];
    rows.extend(
        e.peer_versions
            .iter()
            .map(|(k, v)| vec![k.as_str().into(), v.as_str().into()]),
    );
    let mut b = vec![
        Block::Heading(2, "Environment".into(), Some("environment")),
        table(&["item", "value"], &[false, false], rows),
        Block::Heading(3, "NIC features (ethtool)".into(), None),
    ];
    if e.nic_features.trim().is_empty() {
        b.push(para("Not recorded."));
    } else {
        b.push(Block::Code {
            lang: String::new(),
            text: e.nic_features.clone(),
        });
    }
    b
}

fn appendix(input: &ReportInput) -> Vec<Block> {
    vec![
        Block::Heading(2, "Appendix: the plan file".into(), Some("plan")),
        Block::Para(vec![
            Span::Text("Source: ".into()),
            Span::Code(input.plan_source.clone()),
        ]),
        if input.plan_text.trim().is_empty() {
            para("Not recorded.")
        } else {
            Block::Code {
                lang: "toml".into(),
                text: input.plan_text.clone(),
            }
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_the_largest_bucket() {
        let uppers = [16.0, 32.0, 64.0, 128.0];
        let hist: Buckets = vec![(16.0, 1), (64.0, 8), (128.0, 4)];
        assert_eq!(sparkline(&uppers, &hist), "▁·█▄");
        assert_eq!(sparkline(&uppers, &Buckets::new()), "–");
    }

    #[test]
    fn per_second_sparklines_show_a_stall_as_a_dip() {
        assert_eq!(
            seconds_sparkline(&[100.0, 100.0, 50.0, 0.0, 100.0]),
            "██▄·█"
        );
        assert_eq!(seconds_sparkline(&[]), "–");
        assert_eq!(seconds_sparkline(&[0.0, 0.0]), "–");
        // 120 seconds in 60 characters, each the lower of its two.
        let mut long = vec![100.0; 120];
        long[77] = 10.0;
        let line = seconds_sparkline(&long);
        assert_eq!(line.chars().count(), 60);
        assert_eq!(line.chars().nth(38), Some('▁'));
        assert_eq!(line.chars().filter(|&c| c == '█').count(), 59);
    }
}
