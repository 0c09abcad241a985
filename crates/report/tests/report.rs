//! The report on hand-made records: the summaries against arithmetic done
//! by hand, the Markdown's headline rows and recommendations, the HTML's
//! well-formedness and escaping, and charts that say when they have no data.

use isoe_report::record::{Metric, RunRecord};
use isoe_report::stats::{Next, Rules, Test};
use isoe_report::{
    render_html, render_markdown, summarize, write_reports, CaseInfo, CellSummary, Environment,
    ReportInput, WorkloadInfo,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use support::section;

mod support;

const EVIL: &str = "<script>";

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A run whose bench JSON holds the metric and a few CPU figures.
fn run(case: &str, workload: &str, n: u32, metric: Metric, value: f64, cpu_us: f64) -> RunRecord {
    let mut bench = json!({
        "iops": if metric == Metric::Iops { value } else { value * 4.0 },
        "mb_per_s": if metric == Metric::MbPerS { value } else { value / 100.0 },
        "initiator_cpu_us_per_io": cpu_us,
        "target_cpu_us_per_io": cpu_us * 2.0,
        "system_cpu_us_per_io": cpu_us * 3.0,
        "initiator_cpu_pct": 10.0,
        "target_cpu_pct": 20.0,
        "cpu": {"busy_pct": 40.0},
        "mb_per_s_per_cpu_pct": 2.5,
        "retrans_pct": 0.5,
        "out_segs": 1000.0,
        "retrans_segs": 5.0,
        "dsack_segs": 4.0,
        "read": {"ios": 10, "lat_us": {"p50": 100.0, "p99": 300.0}},
        "write": {"ios": 0, "lat_us": {"p50": 0.0, "p99": 0.0}},
        "lat_hist": {"read": [[64.0, 2], [128.0, 6], [512.0, 2]], "write": []},
    });
    if case != "baseline" {
        // Only the baseline's runs carry histograms, and the target's CPU
        // is unknown in case "fast" (tgt's process not found).
        bench.as_object_mut().unwrap().remove("lat_hist");
    }
    if case == "fast" {
        bench["target_cpu_us_per_io"] = Value::Null;
        bench["target_cpu_pct"] = Value::Null;
    }
    RunRecord {
        plan: "hand".into(),
        case: case.into(),
        workload: workload.into(),
        run: n,
        topology: "loopback".into(),
        knobs: BTreeMap::new(),
        skipped_knobs: BTreeMap::new(),
        metric,
        value,
        steal_pct: 0.1,
        valid: true,
        invalid_reason: None,
        round: n,
        foreign: None,
        bench,
        series: Vec::new(),
        started_at: "2026-11-21T08:00:00Z".into(),
    }
}

/// baseline, "fast" (mtu = 9000), "<script>" (tso = off) and "faster" (mtu
/// = 9000, gro = on, compared to fast) on an IOPS and an MB/s workload:
///
/// | case     | small (IOPS)                       | large (MB/s)          |
/// |----------|------------------------------------|-----------------------|
/// | baseline | 1000, 1010, 990                    | 100, 100, 100         |
/// | fast     | 1100, 1100, 1100                   | 103, 104, 102         |
/// | <script> | 920, 960, 930, 950, 940, 940       | 80, 80, 80 (+1 stolen)|
/// | faster   | 1210, 1210, 1210                   | not in the case       |
fn input() -> ReportInput {
    let (s, l) = (Metric::Iops, Metric::MbPerS);
    let mut records = Vec::new();
    for (i, v) in [1000.0, 1010.0, 990.0].into_iter().enumerate() {
        // CPU-µs per I/O 10, 12, 14: mean 12.
        records.push(run(
            "baseline",
            "small",
            i as u32 + 1,
            s,
            v,
            10.0 + 2.0 * i as f64,
        ));
    }
    for (i, v) in [100.0, 100.0, 100.0].into_iter().enumerate() {
        records.push(run("baseline", "large", i as u32 + 1, l, v, 50.0));
    }
    for (i, v) in [1100.0, 1100.0, 1100.0].into_iter().enumerate() {
        records.push(run("fast", "small", i as u32 + 1, s, v, 9.0));
    }
    for (i, v) in [103.0, 104.0, 102.0].into_iter().enumerate() {
        records.push(run("fast", "large", i as u32 + 1, l, v, 45.0));
    }
    for (i, v) in [920.0, 960.0, 930.0, 950.0, 940.0, 940.0]
        .into_iter()
        .enumerate()
    {
        records.push(run(EVIL, "small", i as u32 + 1, s, v, 13.0));
    }
    // faster runs only the small workload: 1210 ×3, against fast's 1100.
    for (i, v) in [1210.0, 1210.0, 1210.0].into_iter().enumerate() {
        records.push(run("faster", "small", i as u32 + 1, s, v, 9.0));
    }
    for (i, v) in [80.0, 50.0, 80.0, 80.0].into_iter().enumerate() {
        let mut r = run(EVIL, "large", i as u32 + 1, l, v, 60.0);
        if i == 1 {
            r.valid = false;
            r.steal_pct = 9.0;
            r.invalid_reason = Some("steal 9.0% above 5%".into());
        }
        r.skipped_knobs = if i == 0 {
            map(&[("gro", "fixed on the device")])
        } else {
            BTreeMap::new()
        };
        records.push(r);
    }
    ReportInput {
        plan_name: "hand & <made>".into(),
        plan_description: "Hand-made records.".into(),
        plan_source: "tests/report.rs".into(),
        question: None,
        seeds: vec!["001".into()],
        skipped_cases: Vec::new(),
        plan_text: "name = \"hand\"\n# ``` a fence inside\n".into(),
        rules: Rules::default(),
        pin_cpus: false,
        topology: "loopback".into(),
        baseline_knobs: map(&[("mtu", "1500"), ("tso", "on")]),
        cases: vec![
            CaseInfo {
                name: "baseline".into(),
                description: "defaults".into(),
                knobs_changed: BTreeMap::new(),
                compare_to: None,
                ..Default::default()
            },
            CaseInfo {
                name: "fast".into(),
                description: "jumbo frames".into(),
                knobs_changed: map(&[("mtu", "9000")]),
                compare_to: None,
                ..Default::default()
            },
            CaseInfo {
                name: EVIL.into(),
                description: "a hostile name".into(),
                knobs_changed: map(&[("tso", "off")]),
                compare_to: Some("baseline".into()),
                ..Default::default()
            },
            CaseInfo {
                name: "faster".into(),
                description: "jumbo frames and GRO, against jumbo frames alone".into(),
                knobs_changed: map(&[("mtu", "9000"), ("gro", "on")]),
                compare_to: Some("fast".into()),
                workloads: vec!["small".into()],
                ..Default::default()
            },
        ],
        workloads: vec![
            WorkloadInfo {
                name: "small".into(),
                metric: s,
                large_block: false,
                description: "8 KiB random".into(),
            },
            WorkloadInfo {
                name: "large".into(),
                metric: l,
                large_block: true,
                description: "256 KiB sequential".into(),
            },
        ],
        environment: Environment {
            kernel: "6.1".into(),
            ncpus: 2,
            ..Environment::default()
        },
        records,
        notes: vec!["A note from the runner.".into()],
    }
}

fn cell<'a>(cells: &'a [CellSummary], case: &str, workload: &str) -> &'a CellSummary {
    cells
        .iter()
        .find(|c| c.case == case && c.workload == workload)
        .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn summaries_match_the_arithmetic_by_hand() {
    let cells = summarize(&input());
    assert_eq!(
        cells.len(),
        7,
        "4 cases × 2 workloads, faster on small only"
    );

    // baseline × small: 1000, 1010, 990: mean 1000, median 1000, sample
    // variance (0 + 100 + 100) / 2 = 100, sd 10, RSD 1.0% ≤ 1%: converged.
    let c = cell(&cells, "baseline", "small");
    let s = c.stats.unwrap();
    assert_eq!((s.n, s.mean, s.median), (3, 1000.0, 1000.0));
    assert!(close(s.rsd_pct, 1.0));
    assert!(c.converged);
    assert_eq!(c.effect, None, "no effect for the baseline itself");
    // CPU-µs per I/O 10, 12, 14: mean 12; target twice that; host three times.
    assert!(close(c.initiator.cpu_us_per_io.unwrap(), 12.0));
    assert!(close(c.target.cpu_us_per_io.unwrap(), 24.0));
    assert!(close(c.system.cpu_us_per_io.unwrap(), 36.0));
    assert_eq!(c.system.cpu_pct, Some(40.0));
    assert_eq!(c.read.us_p50, Some(100.0));
    assert_eq!(c.write.us_p50, None, "no writes: no write latency");
    assert_eq!(c.hist_runs, 3);
    // Histograms summed over the three runs.
    assert_eq!(c.read.hist, vec![(64.0, 6), (128.0, 18), (512.0, 6)]);
    assert!(c.write.hist.is_empty());

    // fast × small: 1100 ×3 against 1000, 1010, 990 round by round:
    // ratios 1.1, 1.089, 1.111, geometric mean +10.0%, a tight interval
    // wholly above 5%: significant and conclusive. Host CPU-µs/IO 27
    // against 30, 36, 42: the geometric mean of the ratios, −24.3%.
    let c = cell(&cells, "fast", "small");
    let e = c.effect.unwrap();
    assert!(
        (e.change_pct - 10.0).abs() < 0.01 && e.significant && e.conclusive,
        "{e:?}"
    );
    assert!(
        e.ci_low_pct.unwrap() > 5.0 && e.ci_high_pct.unwrap() < 15.0,
        "{e:?}"
    );
    assert_eq!(e.test, Test::Paired { rounds: 3 });
    assert!(c.converged);
    assert!((c.cpu_effect.unwrap().change_pct + 24.29).abs() < 0.01);
    assert_eq!(c.target.cpu_us_per_io, None, "target CPU unknown");
    assert_eq!(c.hist_runs, 0);

    // fast × large: 103, 104, 102: mean 103, median 103, sd 1,
    // RSD 1/103 = 0.971%; +3% over 100: not significant.
    let c = cell(&cells, "fast", "large");
    let s = c.stats.unwrap();
    assert_eq!((s.mean, s.median), (103.0, 103.0));
    assert!(close(s.rsd_pct, 100.0 / 103.0));
    // +3% over 100 (ratios 1.03, 1.04, 1.02): not significant, and the
    // interval reaches past +5%: inconclusive.
    let e = c.effect.unwrap();
    assert!(
        (e.change_pct - 3.0).abs() < 0.01 && !e.significant && !e.conclusive,
        "{e:?}"
    );

    // <script> × small: 920, 960, 930, 950, 940, 940: mean 940; deviations
    // −20, 20, −10, 10, 0, 0: variance 1000 / 5 = 200, sd 14.14, RSD 1.504%
    // > 1% at the cap of 6: not converged. Median (940 + 940) / 2. Paired
    // with the baseline's three rounds: 0.92, 0.950, 0.939: −6.3%, beyond
    // 5% and "no change" rejected, but the interval reaches −2.4%:
    // significant and inconclusive.
    let c = cell(&cells, EVIL, "small");
    let s = c.stats.unwrap();
    assert_eq!((s.n, s.mean, s.median), (6, 940.0, 940.0));
    assert!(close(s.rsd_pct, 100.0 * 200f64.sqrt() / 940.0));
    assert_eq!(c.next, Next::NotConverged);
    assert!(!c.converged);
    let e = c.effect.unwrap();
    assert!(
        (e.change_pct + 6.35).abs() < 0.05 && e.significant && !e.conclusive,
        "{e:?}"
    );

    // faster × small against fast, not the baseline: (1210 − 1100) / 1100 =
    // +10%, where against the baseline it would be +21%.
    let c = cell(&cells, "faster", "small");
    assert_eq!(c.reference.as_deref(), Some("fast"));
    assert!(close(c.effect.unwrap().change_pct, 10.0));
    assert_eq!(
        cell(&cells, "fast", "small").reference.as_deref(),
        Some("baseline")
    );
    assert!(
        !cells
            .iter()
            .any(|c| c.case == "faster" && c.workload == "large"),
        "no cell for a workload the case does not run"
    );

    // <script> × large: the stolen run (50) of round 2 is left out: 80 ×3,
    // paired with the baseline in rounds 1 and 3 (it has no round 4): −20%.
    let c = cell(&cells, EVIL, "large");
    assert_eq!((c.runs_valid, c.runs_invalid), (3, 1));
    assert_eq!(c.stats.unwrap().mean, 80.0);
    let e = c.effect.unwrap();
    assert!(close(e.change_pct, -20.0) && e.conclusive, "{e:?}");
    assert_eq!(e.test, Test::Paired { rounds: 2 });
}

#[test]
fn markdown_has_the_headline_rows_and_the_recommendations() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_reports(&input(), dir.path()).unwrap();
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    assert!(
        md.starts_with("# isoe lab report: hand & \\<made\\>\n"),
        "{md}"
    );

    let row = |case: &str, needles: &[&str]| {
        let found = md
            .lines()
            .any(|l| l.starts_with(&format!("| {case} ")) && needles.iter().all(|n| l.contains(n)));
        assert!(found, "no row for {case} with {needles:?} in\n{md}");
    };
    // Headline rows: mean, median, RSD, N, converged, change.
    row(
        "baseline",
        &[
            "1,000", " 1.00 ", " 3 ", "yes", "baseline", "12.00", "24.00", "2.500",
        ],
    );
    row(
        "fast",
        &[
            "1,100",
            " 0.00 ",
            "yes",
            "**+10.0% (95% CI +7.3 to +12.8)**",
            "9.000",
            " – ",
        ],
    );
    row(
        "fast",
        &[
            "103.0",
            " 0.97 ",
            "+3.0% (95% CI +0.5 to +5.5), inconclusive",
        ],
    );
    row(
        "\\<script\\>",
        &[
            "940.0",
            " 1.50 ",
            " 6 ",
            "no (cap)",
            "-6.3% (95% CI -10.1 to -2.4), inconclusive",
        ],
    );
    row(
        "\\<script\\>",
        &["80.00", "**-20.0% (95% CI -20.0 to -20.0)**"],
    );
    // A change that is not significant, or inconclusive, is not bold.
    assert!(!md.contains("**+3.0%"));
    assert!(!md.contains("**-6.3%"));

    // Findings lead: one sentence per significant, conclusive effect.
    let findings = md.split("## Findings").nth(1).unwrap();
    let findings = &findings[..findings.find("\n## ").unwrap()];
    assert!(findings.contains(
        "- fast (mtu = 9000) raises small IOPS by 10.0% (95% CI 7.3 to 12.8%); paired t-test over 3 rounds."
    ), "{findings}");
    assert!(
        findings.contains("- faster (gro = on) against fast raises small IOPS by 10.0%"),
        "{findings}"
    );
    assert!(findings.contains(
        "- \\<script\\> (tso = off) lowers large throughput by 20.0% (95% CI 20.0 to 20.0%); paired t-test over 2 rounds."
    ), "{findings}");
    // Its CPU per I/O, a finding of its own on each side that has it.
    for side in ["initiator", "target"] {
        assert!(
            findings.contains(&format!(
            "- \\<script\\> (tso = off) raises {side} CPU per I/O on large by 20.0% (95% CI 20.0 \
             to 20.0%) (×1.20); paired t-test over 2 rounds."
        )),
            "{findings}"
        );
    }
    // fast's target CPU is unknown: its initiator alone has a CPU finding.
    assert!(findings.contains("- fast (mtu = 9000) cuts initiator CPU per I/O on large by 10.0%"));
    assert!(
        !findings.contains("- fast (mtu = 9000) cuts target CPU"),
        "{findings}"
    );
    assert!(
        findings.contains("### Inconclusive: recommends nothing\n"),
        "{findings}"
    );
    assert!(findings.contains(
        "- \\<script\\> on small: -6.3% (95% CI -10.1 to -2.4) IOPS; the interval straddles ±5%"
    ), "{findings}");
    assert!(findings.contains("- case \\<script\\>: knob gro not applied: fixed on the device."));
    assert!(md.find("## Findings").unwrap() < md.find("## Headline").unwrap());

    // Recommended configuration, per workload and overall.
    assert!(
        md.contains(
            "- **Recommended:** `mtu = 9000` (baseline: 1500) — case fast: +10.0% (95% CI +7.3 to \
             +12.8) IOPS, paired t-test over 3 rounds; host CPU-µs per I/O -24.3%"
        ),
        "{md}"
    );
    assert!(md.contains(
        "- **Inconclusive, recommends nothing:** `tso = off` (baseline: on) — case \\<script\\>: \
         -6.3% (95% CI -10.1 to -2.4) IOPS"
    ), "{md}");
    assert!(md.contains(
        "- **Avoid:** `tso = off` (baseline: on) — case \\<script\\>: -20.0% (95% CI -20.0 to -20.0) MB/s"
    ));
    let overall = md.lines().find(|l| l.starts_with("| mtu ")).unwrap();
    assert!(
        overall.contains("**recommended**")
            && overall.contains("small +10.0% (95% CI +7.3 to +12.8), paired t-test over 3 rounds"),
        "{overall}"
    );

    // A case compared to another: its change, its setting and its verdict
    // are against that case.
    row(
        "faster",
        &["1,210", "**+10.0% (95% CI +10.0 to +10.0) vs fast**"],
    );
    assert!(
        md.contains(
            "- **Recommended:** `gro = on` (fast: default) — case faster against fast: +10.0% (95% CI"
        ),
        "{md}"
    );
    let overall = md.lines().find(|l| l.starts_with("| gro ")).unwrap();
    assert!(
        overall.contains("| fast ") && overall.contains("**recommended**"),
        "{overall}"
    );

    // Notes: the runner's, non-convergence, the stolen run, the skipped knob.
    for needle in [
        "- A note from the runner.",
        "- Above the seeds' RSD target: 1 of 7 cells",
        "  - \\<script\\> × small: RSD 1.50% after 6 runs",
        "  - \\<script\\> × large run 2: steal 9.0%\n",
        "  - gro: fixed on the device (cases: \\<script\\>)",
        "Latency histograms incomplete",
        "  - fast × small",
    ] {
        assert!(md.contains(needle), "no {needle:?} in\n{md}");
    }
    // faster runs only the small workload: no row of it under large, and
    // no "not run" for a workload the plan never gave it.
    assert!(!md.contains("- Not run: "), "{md}");
    let large = md.split("### large").nth(1).unwrap();
    let large = &large[..large.find("\n#").unwrap_or(large.len())];
    assert!(!large.contains("| faster "), "{large}");
    // The plan file, fenced past its own backticks.
    assert!(md.contains("````toml\nname = \"hand\"\n# ``` a fence inside\n````\n"));
    assert!(!md.contains("<script>"), "raw markup in the Markdown");
}

#[test]
fn with_no_significant_effect_the_recommendation_says_so() {
    let mut input = input();
    input
        .records
        .retain(|r| r.case == "baseline" || r.case == "fast");
    input.cases.truncate(2);
    let md = render_markdown(&input);
    assert!(
        md.contains(
            "- No significant, conclusive effect: no case changed MB/s by more than ±5% with an \
             interval wholly beyond it (1 case compared)."
        ),
        "{md}"
    );
}

/// Every tag of `html` opened is closed in order (void elements aside).
fn assert_balanced(html: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let end = start + rest[start..].find('>').expect("unclosed tag");
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if matches!(name.as_str(), "meta" | "br") {
            continue;
        }
        if tag.starts_with('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.as_str()),
                "misnested </{name}>"
            );
        } else {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[test]
fn html_is_well_formed_self_contained_and_escaped() {
    let html = render_html(&input());
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    // 1 change chart, 2 effectiveness, 2 second by second, 2
    // retransmission, 4 + 3 histograms (faster runs only the small workload).
    assert_eq!(html.matches("<svg").count(), 14);
    assert_balanced(&html);
    assert!(html.contains("&lt;script&gt;"));
    assert!(
        !html.contains("<script"),
        "no scripts, and user text escaped"
    );
    assert!(html.contains("<title>isoe lab report: hand &amp; &lt;made&gt;</title>"));
    // Self-contained: the SVG namespace is the only URL.
    let urls = html.matches("http").count();
    assert_eq!(urls, html.matches("http://www.w3.org/2000/svg").count());
    assert!(!html.contains("@import") && !html.contains("<link") && !html.contains("<img"));
    // Significant bars are solid, the others hatched.
    assert!(html.contains("fill=\"url(#change-h"));
    // A histogram for a case without lat_hist says why.
    assert!(html.contains(">no histogram: the runs&#39; results</text>"));
    assert!(html.contains("(0 of 3 runs with a histogram)"));
}

#[test]
fn charts_without_data_say_so() {
    // Only the baseline: nothing to compare.
    let mut only_baseline = input();
    only_baseline.cases.truncate(1);
    let html = render_html(&only_baseline);
    assert!(html.contains("No data: the plan has no case besides the baseline"));
    let md = render_markdown(&only_baseline);
    assert!(md.contains("No cases besides the baseline: nothing to compare."));

    // No records at all: every chart says so, nothing panics.
    let mut empty = input();
    empty.records.clear();
    let html = render_html(&empty);
    assert!(html.contains("No data: no case has valid runs on a workload"));
    assert!(html.contains("No data: no case has valid runs of small with CPU figures."));
    assert!(html.contains("No data: no case has valid runs of large."));
    assert!(html.contains(">not run</text>"));
    assert_balanced(&html);
    let md = render_markdown(&empty);
    assert!(md.contains("No data: no case could be compared with the baseline on this workload."));
    assert!(md.contains("- Not run: "));
    assert!(md.contains("  - fast: small, large"));
    assert!(md
        .lines()
        .any(|l| l.starts_with("| fast ") && l.contains("not run")));
}

#[test]
fn an_empty_input_still_makes_a_report() {
    let input = ReportInput::default();
    assert!(summarize(&input).is_empty());
    let html = render_html(&input);
    assert_balanced(&html);
    assert!(html.contains("No data: the plan has no case besides the baseline"));
    assert!(render_markdown(&input).contains("## Recommended configuration"));
}

#[test]
fn null_and_missing_fields_show_as_dashes() {
    let mut input = input();
    for r in &mut input.records {
        r.bench = json!({"iops": null, "cpu": null});
    }
    let cells = summarize(&input);
    let c = cell(&cells, "baseline", "small");
    // The statistics use the record's value; the bench figures are absent.
    assert_eq!(c.stats.unwrap().mean, 1000.0);
    assert_eq!(
        (c.iops, c.system.cpu_pct, c.retrans_pct),
        (None, None, None)
    );
    let md = render_markdown(&input);
    assert!(md.contains("| baseline "));
    assert_balanced(&render_html(&input));
}

/// A run as `isoe bench` writes it: its own `BenchResult` serialised, plus
/// `lat_hist` from its `LatencyRecorder::buckets` as the runner adds it.
fn real_bench() -> Value {
    use isoe_bench::{
        profiles, BenchResult, CpuSplit, DirectionMeasurements, Host, LatencyRecorder,
        Measurements, TcpDelta, Workload,
    };
    let mut read = LatencyRecorder::new();
    for ns in [90_000, 100_000, 110_000, 400_000] {
        read.record_ns(ns);
    }
    let m = Measurements {
        workload: Workload::from_profile(
            profiles::find("oltp-8k").unwrap(),
            vec!["iscsi://127.0.0.1/iqn.x/0".into()],
            10.0,
            1.0,
        ),
        started_at: std::time::UNIX_EPOCH,
        elapsed_s: 10.0,
        read: DirectionMeasurements {
            ios: 100_000,
            bytes: 100_000 * 8192,
            latency: read.clone(),
        },
        write: DirectionMeasurements::default(),
        errors: 0,
        verify_errors: 0,
        cpu: CpuSplit {
            busy_pct: 40.0,
            busy_cpu_s: 8.0,
            elapsed_cpu_s: 20.0,
            ..CpuSplit::default()
        },
        initiator_cpu_s: 3.0,
        target_cpu_s: Some(2.0),
        target_pid: Some(4242),
        tcp: TcpDelta {
            out_segs: 200_000,
            retrans_segs: 100,
            dsack_recv_segs: 80,
            retrans_pct: 0.05,
        },
        host: Host {
            kernel_release: "6.1".into(),
            ncpus: 2,
        },
        per_url: Vec::new(),
        series: Vec::new(),
        interrupted: false,
        stopped: None,
        foreign: None,
    };
    let result = BenchResult::compute(&m);
    let mut v = serde_json::to_value(&result).unwrap();
    v["lat_hist"] = json!({"read": read.buckets(), "write": []});
    v
}

#[test]
fn summaries_read_the_fields_isoe_bench_writes() {
    let bench = real_bench();
    let mut input = input();
    for r in &mut input.records {
        r.bench = bench.clone();
    }
    let cells = summarize(&input);
    let c = cell(&cells, "baseline", "small");
    let f = |key: &str| bench[key].as_f64();
    // Means of equal values, up to rounding; both present (a field bench
    // no longer writes fails here rather than passing as None = None).
    let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => assert!(close(a, b), "{a} != {b}"),
        (a, b) => panic!("{a:?} against {b:?}"),
    };
    same(c.iops, f("iops"));
    same(c.mb_per_s, f("mb_per_s"));
    same(c.initiator.cpu_pct, f("initiator_cpu_pct"));
    same(c.initiator.cpu_us_per_io, f("initiator_cpu_us_per_io"));
    same(c.initiator.cpu_us_per_kib, f("initiator_cpu_us_per_kib"));
    same(
        c.initiator.mb_per_s_per_cpu_pct,
        f("initiator_mb_per_s_per_cpu_pct"),
    );
    same(c.target.cpu_pct, f("target_cpu_pct"));
    same(c.target.cpu_us_per_io, f("target_cpu_us_per_io"));
    same(
        c.target.mb_per_s_per_cpu_pct,
        f("target_mb_per_s_per_cpu_pct"),
    );
    same(c.system.cpu_pct, Some(40.0));
    same(c.system.cpu_us_per_io, f("system_cpu_us_per_io"));
    same(c.system.mb_per_s_per_cpu_pct, f("mb_per_s_per_cpu_pct"));
    same(c.system.iops_per_cpu_pct, f("iops_per_cpu_pct"));
    same(c.retrans_pct, Some(0.05));
    same(c.dsack_segs, Some(80.0));
    same(c.out_segs, Some(200_000.0));
    same(c.read.us_p50, bench["read"]["lat_us"]["p50"].as_f64());
    assert!(c.read.us_p50.is_some() && c.latency.us_p99.is_some());
    assert_eq!(c.write.us_p50, None, "no writes in the run");
    // 90, 100, 110 µs fall in (64, 128]; 400 µs in (256, 512]; × 3 runs.
    assert_eq!(c.read.hist, vec![(128.0, 9), (512.0, 3)]);
    assert_eq!(c.hist_runs, 3);
}

#[test]
fn a_case_on_another_topology_than_its_reference_recommends_nothing() {
    let mut input = input();
    input.cases[1].topology = "congested".into();
    let md = render_markdown(&input);
    let section = md.split("## Recommended configuration").nth(1).unwrap();
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    // fast (congested) against the baseline (loopback), and faster
    // (loopback) against fast: both shown in the tables, neither advised.
    assert!(
        section.contains(
            "Left out: cases measured against a case on another topology, whose effect is the \
             topology's as much as their settings': fast (congested, against baseline on \
             loopback); faster (loopback, against fast on congested)."
        ),
        "{section}"
    );
    assert!(!section.contains("| fast "), "{section}");
    assert!(!section.contains("case fast:"), "{section}");
    assert!(!section.contains("case faster "), "{section}");
    // The third case, on the plan's topology, is still advised against.
    assert!(section.contains("case \\<script\\>"), "{section}");
    // And the headline still shows fast's change.
    assert!(md.contains("**+10.0% (95% CI +7.3 to +12.8)**"));
}

/// A series of one value per second, `metric`'s field set to it and the
/// other to something else, so that the wrong field shows.
fn seconds(metric: Metric, values: &[f64]) -> Vec<isoe_report::record::SeriesPoint> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| isoe_report::record::SeriesPoint {
            t_s: i as f64,
            span_s: 1.0,
            iops: if metric == Metric::Iops { v } else { v * 4.0 },
            mb_per_s: if metric == Metric::MbPerS {
                v
            } else {
                v / 100.0
            },
            ..Default::default()
        })
        .collect()
}

#[test]
fn each_case_latest_valid_run_is_shown_second_by_second() {
    let mut input = input();
    let (s, l) = (Metric::Iops, Metric::MbPerS);
    for r in &mut input.records {
        match (r.case.as_str(), r.workload.as_str(), r.run) {
            // The baseline's latest run is steady; an earlier one is not
            // the one shown.
            ("baseline", "small", 1) => r.series = seconds(s, &[5.0, 5.0]),
            ("baseline", "small", 3) => r.series = seconds(s, &[1000.0; 4]),
            // fast stalls in its third second: 110 of 1100.
            ("fast", "small", 3) => r.series = seconds(s, &[1100.0, 1100.0, 110.0, 1100.0]),
            // The MB/s workload charts MB/s.
            ("baseline", "large", 3) => r.series = seconds(l, &[100.0, 90.0, 110.0]),
            // <script>'s runs went through fio: no series.
            (EVIL, _, _) => r.bench["initiator"] = json!("libiscsi (fio)"),
            _ => {}
        }
    }
    // <script>'s stolen large run (invalid) has a series: never shown.
    let stolen = input
        .records
        .iter_mut()
        .find(|r| r.case == EVIL && r.workload == "large" && !r.valid)
        .unwrap();
    stolen.series = seconds(l, &[1.0, 1.0]);

    let md = render_markdown(&input);
    let over = section(&md, "## Throughput second by second");
    let small = section(over, "### small (IOPS) second by second");
    let row = |part: &str, case: &str| -> Vec<String> {
        let line = part
            .lines()
            .find(|l| l.starts_with(&format!("| {case} ")))
            .unwrap_or_else(|| panic!("no row for {case} in\n{part}"));
        line.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // case, run, seconds, lowest, mean, highest, lowest % of mean, sparkline.
    assert_eq!(
        row(small, "baseline"),
        [
            "baseline",
            "3",
            "4.0",
            "1,000",
            "1,000",
            "1,000",
            "100.00",
            "████"
        ]
    );
    // fast: mean (3 × 1100 + 110) / 4 = 852.5; lowest 110 = 12.9% of it.
    assert_eq!(
        row(small, "fast"),
        [
            "fast",
            "3",
            "4.0",
            "110.0",
            "852.5",
            "1,100",
            "12.90",
            "██▁█"
        ]
    );
    let evil = row(small, "\\<script\\>");
    assert_eq!(
        evil[7],
        "fio runs (libiscsi, block devices) record no per-second series"
    );
    let faster = row(small, "faster");
    assert!(faster[7].contains("older isoe bench"), "{faster:?}");
    let large = section(over, "### large (MB/s) second by second");
    assert_eq!(
        row(large, "baseline")[3..7],
        ["90.00", "100.0", "110.0", "90.00"]
    );
    assert!(row(large, "\\<script\\>")[7].contains("fio"));
    assert!(!large.contains("| faster "), "faster does not run large");

    let html = render_html(&input);
    assert_balanced(&html);
    assert!(html.contains("<a href=\"#over-time\">Throughput second by second</a>"));
    let figure = |title: &str| -> &str {
        let at = html.find(&format!("<title>{title}</title>")).unwrap();
        let end = at + html[at..].find("</svg>").unwrap();
        &html[at..end]
    };
    let small_svg = figure("small: IOPS second by second");
    // baseline and fast drawn, four points each; <script> and faster not.
    assert_eq!(small_svg.matches("<polyline").count(), 2, "{small_svg}");
    assert_eq!(small_svg.matches("<circle").count(), 8);
    assert!(small_svg.contains("baseline (run 3)") && small_svg.contains("fast (run 3)"));
    assert!(
        small_svg.contains("110.0 IOPS per second lowest"),
        "{small_svg}"
    );
    assert!(html.contains(
        "Not drawn: &lt;script&gt;: fio runs (libiscsi, block devices) record no per-second series; faster: \
         its runs carry no per-second series"
    ));
    let large_svg = figure("large: MB/s second by second");
    assert_eq!(large_svg.matches("<polyline").count(), 1);
    // A workload no run has a series of says so instead of drawing.
    for r in &mut input.records {
        r.series.clear();
    }
    let html = render_html(&input);
    assert!(html.contains("No per-second data for small: baseline: its runs carry no"));
}

#[test]
fn skipped_cases_head_the_report_before_the_findings() {
    let mut skipping = input();
    let why = "offloads tso off needs ethtool (ethtool not found on PATH, /usr/sbin or /sbin)";
    skipping.skipped_cases = vec![("offloads-off".into(), why.into())];
    skipping.cases.push(CaseInfo {
        name: "offloads-off".into(),
        description: "TSO off".into(),
        knobs_changed: map(&[("initiator.tso", "off"), ("target.tso", "off")]),
        ..CaseInfo::default()
    });
    let md = render_markdown(&skipping);
    let warning = md.find("> **Skipped: not measured.**").expect("the box");
    let findings = md.find("## Findings").unwrap();
    assert!(warning < findings, "{md}");
    assert!(md[..warning].lines().all(|l| !l.starts_with("## ")), "{md}");
    assert!(
        md.contains("> - offloads-off: offloads tso off needs ethtool"),
        "{md}"
    );
    // Said once at the top, not again as a case that merely did not run.
    assert!(!md.contains("Not run: these cases"), "{md}");
    assert!(!md.contains("offloads-off on "), "{md}");
    let html = render_html(&skipping);
    assert_balanced(&html);
    let boxed = html.find("<div class=\"warning\">").expect("the box");
    assert!(boxed < html.find("id=\"findings\"").unwrap());
    assert!(html.contains("<li>offloads-off: offloads tso off needs ethtool (ethtool"));
    // Nothing skipped: no box.
    assert!(!render_markdown(&input()).contains("Skipped: not measured"));
}

#[test]
fn the_header_says_where_the_processes_ran() {
    let mut input = input();
    assert!(render_markdown(&input).contains("**CPU placement:** as the scheduler places them"));
    input.pin_cpus = true;
    let md = render_markdown(&input);
    assert!(
        md.contains("**CPU placement:** the initiator's processes held to the first CPU"),
        "{md}"
    );
}

/// The Markdown list item of the note that starts with `start`, with its
/// sub-items.
fn note<'a>(md: &'a str, start: &str) -> Option<&'a str> {
    let at = md.find(&format!("- {start}"))?;
    let rest = &md[at..];
    let end = rest[2..].find("\n- ").map_or(rest.len(), |i| i + 2);
    Some(&rest[..end])
}

/// Cells that got their rounds are never "unfinished", whatever their
/// RSD; cells that did not are, in the table and in the notes.
#[test]
fn unfinished_means_only_a_cell_that_did_not_get_its_rounds() {
    let mut input = input();
    let small = |name: &str| CaseInfo {
        name: name.into(),
        description: name.into(),
        knobs_changed: map(&[("mtu", "4000")]),
        workloads: vec!["small".into()],
        ..Default::default()
    };
    input.cases.push(small("noisy"));
    input.cases.push(small("short"));
    // noisy: 1500, 1530, 1470: RSD 2%, above the seeds' 1%, but +50% over
    // the baseline with a tight interval: conclusive after its 3 rounds,
    // so the rounds stopped there, short of the cap of 6.
    for (i, v) in [1500.0, 1530.0, 1470.0].into_iter().enumerate() {
        let r = run("noisy", "small", i as u32 + 1, Metric::Iops, v, 9.0);
        input.records.push(r);
    }
    // short: 2 rounds of the 3 every cell gets.
    for (i, v) in [1100.0, 1100.0].into_iter().enumerate() {
        let r = run("short", "small", i as u32 + 1, Metric::Iops, v, 9.0);
        input.records.push(r);
    }
    let cells = summarize(&input);
    let noisy = cell(&cells, "noisy", "small");
    assert!(noisy.stats.unwrap().rsd_pct > 1.9, "{noisy:?}");
    assert!(noisy.effect.unwrap().conclusive, "{noisy:?}");
    assert!(!noisy.unfinished, "{noisy:?}");
    assert!(cell(&cells, "short", "small").unfinished);
    assert!(!cell(&cells, "baseline", "small").unfinished);
    // fast × large is inconclusive after 3 of up to 6 rounds: owed more.
    assert!(cell(&cells, "fast", "large").unfinished);

    let md = render_markdown(&input);
    let row = |case: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {case} ")))
            .unwrap_or_else(|| panic!("no row {case} in\n{md}"))
    };
    assert!(!row("noisy").contains("unfinished"), "{}", row("noisy"));
    assert!(row("noisy").contains("| no "), "{}", row("noisy"));
    assert!(row("short").contains("| unfinished "), "{}", row("short"));
    let unfinished = note(&md, "Unfinished").unwrap_or_else(|| panic!("no note in\n{md}"));
    assert!(
        unfinished.contains("short × small: 2 runs valid"),
        "{unfinished}"
    );
    assert!(
        unfinished.contains("fast × large: 3 runs valid"),
        "{unfinished}"
    );
    assert!(!unfinished.contains("noisy"), "{unfinished}");
}

/// A case whose throughput does not move but whose CPU per I/O does, on
/// either side, has findings of its own: CPU per unit of work is what the
/// seeds measure.
#[test]
fn cpu_per_io_effects_beyond_the_threshold_are_findings_for_each_side() {
    let mut input = input();
    input.cases.push(CaseInfo {
        name: "digests".into(),
        description: "CRC32C digests".into(),
        knobs_changed: map(&[("header_digest", "on")]),
        workloads: vec!["small".into()],
        ..Default::default()
    });
    // IOPS as the baseline's, round by round: no change. Initiator CPU-µs
    // per I/O about +20% over the baseline's 10, 12, 14; the target's
    // about -10% of its 20, 24, 28; the host's within 2%.
    let initiator = [12.1, 14.28, 16.8];
    let target = [18.0, 21.7, 25.1];
    let host = [30.3, 36.4, 42.2];
    for (i, v) in [1000.0, 1010.0, 990.0].into_iter().enumerate() {
        let mut r = run("digests", "small", i as u32 + 1, Metric::Iops, v, 0.0);
        r.bench["initiator_cpu_us_per_io"] = json!(initiator[i]);
        r.bench["target_cpu_us_per_io"] = json!(target[i]);
        r.bench["system_cpu_us_per_io"] = json!(host[i]);
        input.records.push(r);
    }
    let md = render_markdown(&input);
    let findings = section(&md, "## Findings");
    let list: Vec<&str> = findings.lines().filter(|l| l.starts_with("- ")).collect();
    let about = |side: &str| {
        list.iter()
            .filter(|l| l.starts_with("- digests ") && l.contains(side))
            .copied()
            .collect::<Vec<&str>>()
    };
    let initiator = about("initiator CPU per I/O");
    assert_eq!(initiator.len(), 1, "{findings}");
    assert!(
        initiator[0].starts_with(
            "- digests (header_digest = on) raises initiator CPU per I/O on small by 20.0% (95% CI "
        ),
        "{findings}"
    );
    let target = about("target CPU per I/O");
    assert_eq!(target.len(), 1, "{findings}");
    assert!(
        target[0].starts_with(
            "- digests (header_digest = on) cuts target CPU per I/O on small by 10.0% (95% CI "
        ),
        "{findings}"
    );
    // Each backed by its test, its interval wholly beyond ±5%.
    for line in initiator.iter().chain(&target) {
        assert!(line.contains("paired t-test over 3 rounds."), "{line}");
    }
    // The throughput did not move: no throughput finding for it.
    assert!(
        !findings.contains("- digests (header_digest = on) raises small"),
        "{findings}"
    );
    assert!(
        !findings.contains("- digests (header_digest = on) lowers small"),
        "{findings}"
    );
    // A CPU change inside ±5% (the host's) is no finding.
    assert!(about("host CPU").is_empty(), "{findings}");
}

/// An initiator behind a block device has no process of its own (fio, the
/// load, is not the initiator): its CPU per I/O is the host's, which the
/// headline shows beside the processes' and the findings judge like theirs.
#[test]
fn a_block_device_initiator_is_judged_by_its_host_s_cpu() {
    let mut input = input();
    input.cases.push(CaseInfo {
        name: "ublk".into(),
        description: "isoe attach --ublk".into(),
        knobs_changed: map(&[("initiator", "isoe-ublk")]),
        workloads: vec!["small".into()],
        ..Default::default()
    });
    // IOPS up 20%; the host's CPU-µs per I/O about -25% of the baseline's
    // 30.3, 36.4, 42.2 (run()'s); no initiator process figure.
    let host = [22.7, 27.3, 31.7];
    for (i, v) in [1200.0, 1212.0, 1188.0].into_iter().enumerate() {
        let mut r = run("ublk", "small", i as u32 + 1, Metric::Iops, v, 0.0);
        r.bench["system_cpu_us_per_io"] = json!(host[i]);
        r.bench
            .as_object_mut()
            .unwrap()
            .remove("initiator_cpu_us_per_io");
        input.records.push(r);
    }
    let md = render_markdown(&input);
    let findings = section(&md, "## Findings");
    assert!(
        findings.contains("- ublk (initiator = isoe-ublk) cuts host CPU per I/O on small by "),
        "{findings}"
    );
    assert!(
        !findings.contains("ublk (initiator = isoe-ublk) cuts initiator CPU"),
        "{findings}"
    );
    let headline = section(&md, "## Headline");
    assert!(
        headline.contains(
            "| host CPU-µs/IO | initiator process CPU-µs/IO | target process CPU-µs/IO |"
        ),
        "{headline}"
    );
}

/// The number after `name="` in `tag`.
fn attr(tag: &str, name: &str) -> f64 {
    let key = format!(" {name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    tag[at..at + tag[at..].find('"').unwrap()].parse().unwrap()
}

/// The change chart draws each effect's 95% interval as an error bar from
/// its low to its high end, on the scale of the bars.
#[test]
fn the_change_chart_draws_each_interval_as_an_error_bar() {
    let input = input();
    let cells = summarize(&input);
    let html = render_html(&input);
    let title = html.find("<title>% change over the baseline").unwrap();
    let start = html[..title].rfind("<svg").unwrap();
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    // Every compared cell with an interval has one error bar.
    let with_ci = cells
        .iter()
        .filter(|c| c.effect.is_some_and(|e| e.ci_low_pct.is_some()))
        .count();
    assert_eq!(svg.matches("<g class=\"ci\">").count(), with_ci, "{svg}");
    for (case, workload) in [("fast", "small"), ("fast", "large"), ("faster", "small")] {
        let e = cell(&cells, case, workload).effect.unwrap();
        let (lo, hi) = (e.ci_low_pct.unwrap(), e.ci_high_pct.unwrap());
        // The bar: from 0 to the change, the scale's px per %.
        let title = format!("<title>{case} × {workload}: ");
        let at = svg
            .find(&title)
            .unwrap_or_else(|| panic!("no {title} in {svg}"));
        let rect = &svg[svg[..at].rfind("<rect").unwrap()..at];
        let (x, width) = (attr(rect, "x"), attr(rect, "width"));
        let px_per_pct = width / e.change_pct;
        let x_of = |v: f64| x + v * px_per_pct;
        // Its error bar follows it: a line from lo to hi, and two caps.
        let ci = &svg[at + svg[at..].find("<g class=\"ci\">").unwrap()..];
        let ci = &ci[..ci.find("</g>").unwrap()];
        assert!(
            ci.contains(&format!("95% CI {lo:+.1} to {hi:+.1}")),
            "{case} × {workload}: {ci}"
        );
        let line = &ci[ci.find("<line").unwrap()..];
        // 0.1 px written, and the bar's own rounding: within 0.3 px.
        assert!(
            (attr(line, "x1") - x_of(lo)).abs() < 0.3,
            "{lo} {ci} {rect}"
        );
        assert!(
            (attr(line, "x2") - x_of(hi)).abs() < 0.3,
            "{hi} {ci} {rect}"
        );
        assert_eq!(ci.matches("<line").count(), 3, "{ci}");
    }
}

#[test]
fn a_target_host_of_its_own_gets_a_column_and_one_machine_does_not() {
    let md = render_markdown(&input());
    let headline = section(&md, "## Headline");
    assert!(!headline.contains("target host CPU-µs/IO"), "{headline}");
    let mut input = input();
    for r in &mut input.records {
        r.bench["target_host_cpu_us_per_io"] =
            json!(r.bench["target_cpu_us_per_io"].as_f64().map(|v| v * 1.5));
    }
    let md = render_markdown(&input);
    let headline = section(&md, "## Headline");
    assert!(
        headline.contains("| target process CPU-µs/IO | target host CPU-µs/IO | MB/s per CPU% |"),
        "{headline}"
    );
}

#[test]
fn each_cell_shows_the_commands_its_runs_kept_in_flight() {
    let mut input = input();
    for r in &mut input.records {
        // The baseline's runs at 40 in all; one run of "fast" at 20.
        let total = if r.case == "fast" && r.run == 2 {
            20
        } else {
            40
        };
        r.bench["in_flight"] = json!(total);
    }
    let cells = summarize(&input);
    assert_eq!(cell(&cells, "baseline", "small").in_flight, [40]);
    assert_eq!(cell(&cells, "fast", "small").in_flight, [20, 40]);
    // The table's rows with their padding squeezed out.
    let squeezed = |md: &str| {
        let t = section(md, "## Throughput beside CPU");
        t.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let table = squeezed(&render_markdown(&input));
    assert!(table.contains("| workload | case | in flight |"), "{table}");
    assert!(table.contains("| small | baseline | 40 |"), "{table}");
    assert!(table.contains("| small | fast | 20, 40 |"), "{table}");
    // Results without the field show a dash.
    for r in &mut input.records {
        r.bench.as_object_mut().unwrap().remove("in_flight");
    }
    let table = squeezed(&render_markdown(&input));
    assert!(table.contains("| small | baseline | – |"), "{table}");
}

#[test]
fn the_target_side_s_retransmissions_show_beside_the_initiator_s() {
    let mut input = input();
    for r in input.records.iter_mut().filter(|r| r.case == "baseline") {
        r.bench["target_tcp_retrans_pct"] = json!(0.11);
        r.bench["target_tcp_retrans_segs"] = json!(22);
        r.bench["target_tcp_out_segs"] = json!(20_000);
    }
    let cells = summarize(&input);
    let c = cell(&cells, "baseline", "small");
    assert_eq!(
        (
            c.target_retrans_pct,
            c.target_retrans_segs,
            c.target_out_segs
        ),
        (Some(0.11), Some(22.0), Some(20_000.0))
    );
    // A case whose target shared the initiator's namespace has none.
    assert_eq!(cell(&cells, "fast", "small").target_retrans_pct, None);
    let md = render_markdown(&input);
    assert!(md.contains("target retransmitted %"), "{md}");
    let row = md
        .lines()
        .skip_while(|l| !l.contains("target retransmitted %"))
        .find(|l| l.starts_with("| baseline"))
        .unwrap();
    assert!(row.contains("0.11") && row.contains("22"), "{row}");
    assert_balanced(&render_html(&input));
}
