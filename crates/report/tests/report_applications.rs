//! The report on hand-made application runs (seed 003's OLTP and mail
//! tests): the application table's means and paired changes, the latency
//! by component and its stacked bars (a target without stages merged into
//! the initiator's part), the histograms of the application's block I/O,
//! and the sections written for block workloads saying sensible things.

use isoe_report::record::{Metric, RunRecord};
use isoe_report::stats::{Effect, Rules, Sample};
use isoe_report::{render_html, render_markdown, CaseInfo, ReportInput, WorkloadInfo};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use support::section;

mod support;

/// The cases, the baseline first: the kernel's initiator and isoe's over
/// isoe's target, and the kernel's initiator over LIO, whose stages are
/// unknown.
const CASES: [&str; 3] = ["kernel", "isoe-ublk", "kernel-lio"];

/// pgbench's transactions per second, per case, rounds 1 to 3.
const TPS: [[f64; 3]; 3] = [
    [100.0, 102.0, 98.0],
    [110.0, 113.0, 107.0],
    [90.0, 91.0, 89.0],
];

/// The read breakdown's initiator µs per case; network 400 µs and target
/// stages 7, 6, 20 µs throughout, but none from LIO.
const READ_INITIATOR_US: [f64; 3] = [1000.0, 900.0, 1200.0];

/// `breakdown.<direction>` of a case: the initiator's latency and the
/// network's, and the target's stages where isoe's target served it.
fn breakdown(case: usize, initiator_us: f64) -> Value {
    let stage = |v: f64| {
        if CASES[case] == "kernel-lio" {
            Value::Null
        } else {
            json!(v)
        }
    };
    json!({
        "initiator_us": initiator_us,
        "network_us": 400.0,
        "receipt_to_store_us": stage(7.0),
        "store_us": stage(6.0),
        "store_to_sent_us": stage(20.0),
    })
}

/// An OLTP run's bench JSON: figures scaled from the run's TPS so that
/// each case differs, a read and a write histogram of its block I/O.
fn oltp_bench(case: usize, tps: f64) -> Value {
    // isoe-ublk's writes exceed: network 400 µs beyond their 300 µs.
    let write = match case {
        0 => Value::Null,
        1 => breakdown(case, 300.0),
        _ => breakdown(case, 1500.0),
    };
    json!({
        "initiator": CASES[case],
        "application": {
            "kind": "oltp", "filesystem": "ext4", "mix": "tpcb-like", "scale": 10.0,
            "clients": 4.0, "tps": tps, "transactions": tps * 10.0, "failed": 0.0,
            "latency_ms": {"mean": 4000.0 / tps, "p50": 3000.0 / tps, "p99": 12000.0 / tps,
                           "p999": 20000.0 / tps, "max": 25000.0 / tps},
            "processor_time_pct": 26.4, "cpu_us_per_transaction": 850.0,
        },
        "tps": tps,
        "iops": tps * 20.0,
        "mb_per_s": tps * 0.3,
        "read": {"ios": 1000, "lat_us": {"mean": 500.0, "p50": 400.0, "p99": 2000.0}},
        "write": {"ios": 600, "lat_us": {"mean": 800.0, "p50": 700.0, "p99": 3000.0}},
        "lat_hist": {"read": [[256.0, 100], [512.0, 800], [2048.0, 100]],
                     "write": [[1024.0, 600]]},
        "breakdown": {"read": breakdown(case, READ_INITIATOR_US[case]), "write": write},
        "cpu": {"busy_pct": 26.4},
        "system_cpu_us_per_io": 300.0,
        "initiator_cpu_pct": 5.0,
        "target_cpu_pct": 3.0,
        "target_cpu_us_per_io": 40.0,
    })
}

/// A mail run's bench JSON: Jetstress's figures and the database job's
/// histograms, no breakdown at all.
fn mail_bench(case: usize, iops: f64) -> Value {
    json!({
        "initiator": CASES[case],
        "application": {
            "kind": "mail", "filesystem": "xfs", "transactional_iops": iops,
            "db_reads_per_s": iops * 0.6, "db_writes_per_s": iops * 0.4,
            "db_read_avg_ms": 2.09, "db_write_avg_ms": 3.1, "log_writes_per_s": 120.0,
            "log_write_avg_ms": 0.297, "processor_time_pct": 12.5,
        },
        "iops": iops,
        "read": {"ios": 100, "lat_us": {"mean": 2090.0, "p50": 2000.0, "p99": 9000.0}},
        "write": {"ios": 80, "lat_us": {"mean": 3100.0, "p50": 3000.0, "p99": 9000.0}},
        "lat_hist": {"read": [[2048.0, 100]], "write": [[4096.0, 80]]},
    })
}

fn record(case: usize, workload: &str, round: u32, metric: Metric, bench: Value) -> RunRecord {
    RunRecord {
        plan: "apps".into(),
        case: CASES[case].into(),
        workload: workload.into(),
        run: round,
        topology: "testbed".into(),
        knobs: BTreeMap::new(),
        skipped_knobs: BTreeMap::new(),
        metric,
        value: bench[metric.field()].as_f64().unwrap(),
        steal_pct: 0.1,
        valid: true,
        invalid_reason: None,
        round,
        foreign: None,
        bench,
        series: Vec::new(),
        started_at: "2026-11-28T08:00:00Z".into(),
    }
}

/// Three cases × an OLTP and a mail workload, three rounds each.
fn input() -> ReportInput {
    let mut records = Vec::new();
    for (case, runs) in TPS.iter().enumerate() {
        for (&tps, round) in runs.iter().zip(1..) {
            records.push(record(
                case,
                "pg",
                round,
                Metric::Tps,
                oltp_bench(case, tps),
            ));
            let bench = mail_bench(case, tps * 9.0);
            records.push(record(case, "mail", round, Metric::Iops, bench));
        }
    }
    let workload = |name: &str, metric| WorkloadInfo {
        name: name.into(),
        metric,
        large_block: false,
        description: String::new(),
    };
    ReportInput {
        plan_name: "applications".into(),
        rules: Rules::default(),
        topology: "testbed".into(),
        cases: CASES
            .iter()
            .map(|c| CaseInfo {
                name: c.to_string(),
                ..Default::default()
            })
            .collect(),
        workloads: vec![workload("pg", Metric::Tps), workload("mail", Metric::Iops)],
        records,
        ..Default::default()
    }
}

/// The cells of the Markdown table row that starts with `label`; the
/// `nth` such row (tables of one section repeat their labels).
fn row(md: &str, label: &str, nth: usize) -> Vec<String> {
    let line = md
        .lines()
        .filter(|l| l.starts_with(&format!("| {label} ")))
        .nth(nth)
        .unwrap_or_else(|| panic!("no row {label:?} in\n{md}"));
    line.trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

/// "+10.0% (95% CI +7.3 to +12.8)", as the report writes a change.
fn change_ci(e: &Effect) -> String {
    format!(
        "{:+.1}% (95% CI {:+.1} to {:+.1})",
        e.change_pct,
        e.ci_low_pct.unwrap(),
        e.ci_high_pct.unwrap()
    )
}

/// The case's TPS samples by round.
fn tps_samples(case: usize) -> Vec<Sample> {
    let rounds = TPS[case].iter().zip(1..);
    rounds
        .map(|(&value, round)| Sample { round, value })
        .collect()
}

#[test]
fn the_application_table_has_each_case_s_mean_and_paired_change() {
    let md = render_markdown(&input());
    let pg = section(
        &md,
        "### pg: OLTP (pgbench tpcb-like, scale 10, 4 clients, ext4)",
    );
    assert_eq!(
        row(pg, "figure", 0),
        ["figure", "kernel", "isoe-ublk", "kernel-lio"]
    );
    let tps = row(pg, "transactions/s", 0);
    assert_eq!(tps[1], "100.0", "the reference column: the mean alone");
    let e = Rules::default()
        .compare(&tps_samples(0), &tps_samples(1))
        .unwrap();
    assert!(e.ci_low_pct.is_some());
    // +10.0% beyond ±5% with a tight interval: significant, in bold.
    assert_eq!(tps[2], format!("**110.0, {}**", change_ci(&e)), "{pg}");
    assert!(tps[3].starts_with("**90.00, -10.0% (95% CI "), "{pg}");
    // Latency is 4000 / TPS ms: the mean of each run's.
    let mean: f64 = TPS[1].iter().map(|t| 4000.0 / t).sum::<f64>() / 3.0;
    let latency = row(pg, "transaction latency mean (ms)", 0);
    assert!(
        latency[2].starts_with(&format!("**{mean:.2}, -9.1% (95% CI")),
        "{latency:?}"
    );
    for label in [
        "transaction latency p50 (ms)",
        "transaction latency p99 (ms)",
        "transaction latency p99.9 (ms)",
        "block I/O per second",
        "block read latency mean (µs)",
        "block write latency mean (µs)",
        "processor time (%)",
        "CPU-µs per transaction",
    ] {
        assert_eq!(row(pg, label, 0).len(), 4, "{label}");
    }
    assert_eq!(row(pg, "block write latency mean (µs)", 0)[1], "800.0");
    // The same in every run: no change, and its interval says so.
    assert!(row(pg, "CPU-µs per transaction", 0)[2].starts_with("850.0, 0.0% (95% CI"));
    assert!(pg.contains("lower is better for latencies and CPU"), "{pg}");
    assert!(pg.contains("interval crosses 0 is not significant"), "{pg}");

    let mail = section(
        &md,
        "### mail: Mail database (fio, a Jetstress-like profile, xfs)",
    );
    assert_eq!(row(mail, "transactional IOPS", 0)[1], "900.0");
    assert_eq!(row(mail, "log write average latency (ms)", 0)[1], "0.297");
    assert!(row(mail, "database read average latency (ms)", 0)[2].contains("95% CI"));
}

#[test]
fn latency_by_component_splits_each_case_s_mean() {
    let md = render_markdown(&input());
    let pg = section(&md, "### pg: latency by component");
    assert_eq!(
        &row(pg, "part", 0)[..5],
        [
            "part",
            "kernel µs",
            "kernel %",
            "isoe-ublk µs",
            "isoe-ublk %"
        ]
    );
    // Reads: isoe-ublk 900 = 467 + 400 + 27 + 6.
    let stack = row(pg, "initiator stack", 0);
    assert_eq!(&stack[1..5], ["567.0", "56.70", "467.0", "51.89"], "{pg}");
    // LIO's stages are unknown: 1200 - 400 is the stack and the target.
    assert_eq!(stack[5], "800.0 †");
    assert_eq!(&row(pg, "network", 0)[3..5], ["400.0", "44.44"]);
    assert_eq!(
        &row(pg, "target protocol", 0)[3..7],
        ["27.00", "3.00", "–", "–"]
    );
    assert_eq!(&row(pg, "storage", 0)[3..5], ["6.000", "0.67"]);
    let total = row(pg, "total = the initiator's mean", 0);
    assert_eq!(
        [&total[1], &total[3], &total[5]],
        ["1,000", "900.0", "1,200"]
    );
    assert!(
        pg.contains("† initiator stack and target: the target's stages are unknown in kernel-lio"),
        "{pg}"
    );
    // Writes: the kernel's runs carry none; isoe-ublk's network exceeds.
    let writes = row(pg, "initiator stack", 1);
    assert_eq!(&writes[1..5], ["–", "–", "0", "0.00"], "{pg}");
    assert!(
        pg.contains("exceed the initiator's mean in isoe-ublk by 133.0 µs"),
        "{pg}"
    );
    // The mail runs carry no breakdown.
    let mail = section(&md, "### mail: latency by component");
    assert!(
        mail.contains("Not measured: no valid run of mail carries a breakdown."),
        "{mail}"
    );
}

/// The `<svg>` of the figure whose title starts with `title`.
fn svg<'a>(html: &'a str, title: &str) -> &'a str {
    let at = html
        .find(&format!("<title>{title}"))
        .unwrap_or_else(|| panic!("no chart {title:?}"));
    let start = html[..at].rfind("<svg").unwrap();
    &html[start..start + html[start..].find("</svg>").unwrap()]
}

#[test]
fn the_stacked_bars_have_one_bar_per_case_and_name_the_merged_part() {
    let html = render_html(&input());
    let reads = svg(&html, "pg: reads by component");
    assert_eq!(reads.matches("<g class=\"stack\">").count(), CASES.len());
    for part in ["initiator stack", "network", "target protocol", "storage"] {
        assert!(reads.contains(&format!(">{part}</text>")), "{part}");
    }
    assert!(
        reads.contains(">initiator stack and target</text>"),
        "{reads}"
    );
    assert!(reads.contains("<title>kernel-lio, initiator stack and target: 800.0 µs</title>"));
    assert!(reads.contains("<title>isoe-ublk, initiator stack: 467.0 µs</title>"));
    assert!(
        reads.contains(">1,200 µs</text>"),
        "the bar's end: the initiator's mean"
    );
    // Writes: the kernel has none, so two bars and an "n/a".
    let writes = svg(&html, "pg: writes by component");
    assert_eq!(writes.matches("<g class=\"stack\">").count(), 2);
    assert!(writes.contains(">n/a</text>"), "{writes}");
    assert!(writes.contains("exceeded by 133.0"), "{writes}");
}

#[test]
fn the_histograms_draw_the_application_s_block_io() {
    let input = input();
    let html = render_html(&input);
    for case in CASES {
        let caption = format!(
            "{case}: read p50 400.0 µs, p99 2,000 µs; write p50 700.0 µs, p99 3,000 µs \
             (3 of 3 runs with a histogram)"
        );
        assert!(html.contains(&caption), "{caption}");
    }
    let md = render_markdown(&input);
    let pg = section(&md, "### pg latency");
    // 256, 512, 1024, 2048 µs: reads in three buckets, writes in one.
    assert_eq!(&row(pg, "kernel", 0)[5..7], ["▁█·▁", "··█·"], "{pg}");
}

#[test]
fn the_block_workload_sections_say_sensible_things_about_applications() {
    let input = input();
    let md = render_markdown(&input);
    for bad in ["NaN", "inf", "older isoe bench"] {
        assert!(!md.contains(bad), "{bad} in\n{md}");
    }
    // No per-second series: said once, not in a table of dashes.
    let over_time = section(&md, "## Throughput second by second");
    assert!(
        over_time.contains("Not shown: pg, mail, whose application runs"),
        "{over_time}"
    );
    assert!(!over_time.contains("###"), "{over_time}");
    assert!(
        md.contains("### pg (TPS)\n"),
        "the headline names the metric"
    );
    let html = render_html(&input);
    assert!(!html.contains("NaN"));
}
