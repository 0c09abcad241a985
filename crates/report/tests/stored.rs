//! A run's directory read back: the report drawn again is the report the
//! run wrote, byte for byte, from its files plain or gzipped, and what
//! cannot be read back is named (the file, the line, what is wrong) before
//! anything is written.

use isoe_report::record::{ForeignLoad, LatencySummary, Metric, RunRecord, SeriesPoint};
use isoe_report::stats::Rules;
use isoe_report::stored::{self, StoredError, GZ_SUFFIX, INPUT_FILE, RESULTS_FILE};
use isoe_report::{CaseInfo, Environment, ReportInput, WorkloadInfo};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A fixed pseudo-random sequence (xorshift): figures with all their
/// digits, as measured ones have, not round numbers.
struct Noise(u64);

impl Noise {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn run(case: &str, round: u32, noise: &mut Noise) -> RunRecord {
    let factor = if case == "baseline" { 1.0 } else { 1.3 };
    let iops = factor * (50_000.0 + 9_000.0 * noise.next());
    let cpu_us = 7.0 / factor + noise.next();
    let p50 = 90.0 + 20.0 * noise.next();
    RunRecord {
        plan: "stored".into(),
        case: case.into(),
        workload: "rand-read-4k".into(),
        run: round,
        topology: "loopback".into(),
        knobs: BTreeMap::from([("mtu".to_string(), "1500".to_string())]),
        skipped_knobs: BTreeMap::new(),
        metric: Metric::Iops,
        value: iops,
        steal_pct: noise.next(),
        valid: true,
        invalid_reason: None,
        round,
        foreign: Some(ForeignLoad {
            cpu_pct: noise.next(),
            kernel_threads_pct: noise.next(),
            interrupts_pct: 30.0 * noise.next(),
            ours_pct: 150.0 + 40.0 * noise.next(),
            top: vec![("cron".into(), noise.next())],
        }),
        bench: json!({
            "iops": iops,
            "mb_per_s": iops * 4096.0 / 1e6,
            "initiator_cpu_us_per_io": cpu_us,
            "target_cpu_us_per_io": cpu_us * 1.1,
            "system_cpu_us_per_io": cpu_us * 2.3,
            "initiator_cpu_pct": 40.0 * noise.next(),
            "target_cpu_pct": 40.0 * noise.next(),
            "cpu": {"busy_pct": 90.0 * noise.next()},
            "mb_per_s_per_cpu_pct": 3.0 * noise.next(),
            "retrans_pct": noise.next() / 100.0,
            "out_segs": 123_457,
            "retrans_segs": 3,
            "dsack_segs": 1,
            "read": {"ios": 250_000, "lat_us": {"p50": p50, "p99": 3.0 * p50}},
            "write": {"ios": 0, "lat_us": {"p50": 0.0, "p99": 0.0}},
            "lat_hist": {"read": [[64.0, 20], [128.0, 900], [512.0, 80]], "write": []},
        }),
        series: (0..3)
            .map(|t| SeriesPoint {
                t_s: f64::from(t),
                span_s: 1.0,
                ios: 50_000,
                iops: iops * (0.9 + 0.2 * noise.next()),
                mb_per_s: iops * 4096.0 / 1e6,
                lat_us: LatencySummary {
                    count: 50_000,
                    p50_us: p50,
                    ..LatencySummary::default()
                },
                ..SeriesPoint::default()
            })
            .collect(),
        started_at: format!("2026-11-28T05:3{round}:00Z"),
    }
}

/// Two cases, one workload, three rounds; the runner's notes, a skipped
/// case, NIC features ending in a newline (which report.md drops and
/// report.html keeps).
fn input() -> ReportInput {
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut records = Vec::new();
    for round in 1..=3 {
        for case in ["baseline", "jumbo"] {
            records.push(run(case, round, &mut noise));
        }
    }
    ReportInput {
        plan_name: "stored".into(),
        plan_description: "Read back & drawn again.".into(),
        plan_source: "embedded:stored".into(),
        question: Some("Do jumbo frames pay on 4 KiB random reads?".into()),
        seeds: vec!["001".into()],
        skipped_cases: vec![("offload".into(), "no adapter".into())],
        plan_text: "name = \"stored\"\n".into(),
        rules: Rules::default(),
        pin_cpus: true,
        topology: "loopback".into(),
        baseline_knobs: BTreeMap::from([("mtu".to_string(), "1500".to_string())]),
        cases: vec![
            CaseInfo {
                name: "baseline".into(),
                description: "defaults".into(),
                ..CaseInfo::default()
            },
            CaseInfo {
                name: "jumbo".into(),
                description: "MTU 9000".into(),
                knobs_changed: BTreeMap::from([("mtu".to_string(), "9000".to_string())]),
                ..CaseInfo::default()
            },
            CaseInfo {
                name: "offload".into(),
                description: "an adapter's".into(),
                ..CaseInfo::default()
            },
        ],
        workloads: vec![WorkloadInfo {
            name: "rand-read-4k".into(),
            metric: Metric::Iops,
            large_block: false,
            description: "4 KiB random reads".into(),
        }],
        environment: Environment {
            kernel: "6.1.0".into(),
            cpu_model: "Test CPU".into(),
            ncpus: 2,
            memory: "8 GiB".into(),
            isoe_version: "0.1.0".into(),
            peer_versions: BTreeMap::from([("fio".to_string(), "fio-3.33".to_string())]),
            nic_features: "lo: tso on\n\n".into(),
            started_at: "2026-11-28T05:31:00Z".into(),
            finished_at: "2026-11-28T05:39:00Z".into(),
            host: "bench-host".into(),
        },
        records,
        notes: vec!["removed stale namespace isoe-lab-1-0-lo left by an earlier run".into()],
    }
}

/// `input`'s records appended to `dir`'s results.jsonl as the runner does,
/// and kept as it keeps them: each as its line reads back.
fn store_records(input: &mut ReportInput, dir: &Path) {
    let mut file = std::fs::File::create(dir.join(RESULTS_FILE)).unwrap();
    for record in &mut input.records {
        let line = serde_json::to_string(record).unwrap();
        writeln!(file, "{line}").unwrap();
        *record = serde_json::from_str(&line).unwrap();
    }
}

/// A run directory as the runner leaves it: records, input and reports.
fn stored_run(dir: &Path) {
    let mut input = input();
    store_records(&mut input, dir);
    stored::write(input, dir).unwrap();
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn the_report_drawn_again_is_the_report_the_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    let (md, html) = (
        read(dir.path().join("report.md")),
        read(dir.path().join("report.html")),
    );
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    std::fs::remove_file(dir.path().join("report.html")).unwrap();
    let paths = stored::rebuild(dir.path()).unwrap();
    assert_eq!(paths.markdown, dir.path().join("report.md"));
    assert!(read(&paths.markdown) == md, "report.md differs");
    assert!(read(&paths.html) == html, "report.html differs");
    // What a report says of the machine and the run comes from the input.
    let text = String::from_utf8(md).unwrap();
    for said in [
        "bench-host — Test CPU, 2 CPUs, kernel 6.1.0",
        "removed stale namespace isoe-lab-1-0-lo",
        "offload: no adapter",
        "held to the first CPU",
        "| fio      | fio-3.33",
    ] {
        assert!(text.contains(said), "{said:?} not in\n{text}");
    }
}

#[test]
fn the_input_file_holds_everything_but_the_records() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    let text = std::fs::read_to_string(dir.path().join(INPUT_FILE)).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(value.get("records").is_none(), "{text}");
    assert_eq!(value["environment"]["host"], "bench-host");
    let back = stored::load(dir.path()).unwrap();
    let mut expected = input();
    store_records(&mut expected, tempfile::tempdir().unwrap().path());
    assert_eq!(back.records, expected.records);
    assert_eq!(back.environment, expected.environment);
    assert_eq!(back.cases, expected.cases);
    assert_eq!(back.notes, expected.notes);
    assert_eq!(back.question, expected.question);
}

/// The error `load` gives on `dir`, and that nothing was written.
fn refused(dir: &Path) -> StoredError {
    let e = stored::rebuild(dir).unwrap_err();
    assert!(!dir.join("report.md").exists(), "written despite {e}");
    e
}

#[test]
fn a_directory_without_results_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = refused(dir.path());
    assert!(matches!(e, StoredError::NoResults { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: no results.jsonl or results.jsonl.gz here: not the directory of an `isoe lab` \
             run",
            dir.path().display()
        )
    );
    let gone = dir.path().join("gone");
    assert!(matches!(
        stored::rebuild(&gone),
        Err(StoredError::Io { path, .. }) if path == gone
    ));
}

#[test]
fn a_run_without_its_report_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    std::fs::remove_file(dir.path().join(INPUT_FILE)).unwrap();
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    let e = refused(dir.path());
    assert!(matches!(e, StoredError::NoInput { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}: missing: `isoe lab` writes it beside results.jsonl",
            dir.path().join(INPUT_FILE).display()
        )),
        "{e}"
    );
}

/// `results.jsonl` with line `n` (from 1) replaced by `line`, after a
/// blank line that is passed over.
fn with_line(n: usize, line: &str) -> (tempfile::TempDir, StoredError) {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    let path = dir.path().join(RESULTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[n - 1] = line;
    lines.insert(1, "  ");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    let e = refused(dir.path());
    (dir, e)
}

#[test]
fn a_line_that_is_not_a_record_is_named_with_its_number() {
    // Cut short, as a crash leaves it: line 4 once the blank line is in.
    let (dir, e) = with_line(3, r#"{"plan":"stored","case":"baseline","#);
    assert!(matches!(e, StoredError::Record { line: 4, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}:4: not a run record: EOF while parsing a value (column 35)",
            dir.path().join(RESULTS_FILE).display()
        )
    );
    // Well-formed JSON that lacks a field of the record.
    let (_dir, e) = with_line(2, r#"{"plan":"stored","case":"jumbo"}"#);
    assert!(
        e.to_string()
            .ends_with(":3: not a run record: missing field `workload` (column 32)"),
        "{e}"
    );
}

#[test]
fn runs_of_another_plan_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    let path = dir.path().join(RESULTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[4] = lines[4].replacen(r#""plan":"stored""#, r#""plan":"quick""#, 1);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    let e = refused(dir.path());
    assert_eq!(
        e.to_string(),
        format!(
            "{}:5: a run of plan \"quick\", but report-input.json is plan \"stored\"",
            path.display()
        )
    );
}

#[test]
fn a_report_input_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    std::fs::write(dir.path().join(INPUT_FILE), "{\"plan_name\": 7}\n").unwrap();
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    let e = refused(dir.path());
    assert!(matches!(e, StoredError::Input { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}: not a report input: invalid type: integer `7`",
            dir.path().join(INPUT_FILE).display()
        )),
        "{e}"
    );
}

/// `dir`'s file `name` replaced by `name.gz`, as `gzip -9 name` leaves
/// it; the path of the gzipped file.
fn gzip(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(name);
    let gzipped = dir.join(format!("{name}{GZ_SUFFIX}"));
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&gzipped).unwrap(),
        flate2::Compression::best(),
    );
    encoder.write_all(&read(&plain)).unwrap();
    encoder.finish().unwrap();
    std::fs::remove_file(&plain).unwrap();
    gzipped
}

#[test]
fn gzipped_files_draw_the_same_report() {
    for names in [
        &[RESULTS_FILE][..],
        &[INPUT_FILE][..],
        &[RESULTS_FILE, INPUT_FILE][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        stored_run(dir.path());
        let plain = stored::load(dir.path()).unwrap();
        let (md, html) = (
            read(dir.path().join("report.md")),
            read(dir.path().join("report.html")),
        );
        std::fs::remove_file(dir.path().join("report.md")).unwrap();
        std::fs::remove_file(dir.path().join("report.html")).unwrap();
        for name in names {
            gzip(dir.path(), name);
            assert!(!dir.path().join(name).exists());
        }
        let back = stored::load(dir.path()).unwrap();
        assert_eq!(back.records, plain.records, "{names:?}");
        assert_eq!(back.cases, plain.cases, "{names:?}");
        let paths = stored::rebuild(dir.path()).unwrap();
        assert!(read(&paths.markdown) == md, "report.md differs: {names:?}");
        assert!(read(&paths.html) == html, "report.html differs: {names:?}");
    }
}

#[test]
fn the_plain_file_is_read_where_both_are() {
    let dir = tempfile::tempdir().unwrap();
    stored_run(dir.path());
    let md = read(dir.path().join("report.md"));
    // Not gzip, and not read: the plain files are there.
    for name in [RESULTS_FILE, INPUT_FILE] {
        std::fs::write(dir.path().join(format!("{name}{GZ_SUFFIX}")), "not gzip\n").unwrap();
    }
    std::fs::remove_file(dir.path().join("report.md")).unwrap();
    let paths = stored::rebuild(dir.path()).unwrap();
    assert!(read(&paths.markdown) == md, "report.md differs");
}

#[test]
fn a_line_of_a_gzipped_file_is_named_with_its_number() {
    let (dir, _) = with_line(3, r#"{"plan":"stored","case":"baseline","#);
    let path = gzip(dir.path(), RESULTS_FILE);
    let e = refused(dir.path());
    assert_eq!(
        e.to_string(),
        format!(
            "{}:4: not a run record: EOF while parsing a value (column 35)",
            path.display()
        )
    );
}

#[test]
fn a_gzipped_file_that_is_not_gzip_is_refused() {
    for name in [RESULTS_FILE, INPUT_FILE] {
        let dir = tempfile::tempdir().unwrap();
        stored_run(dir.path());
        std::fs::remove_file(dir.path().join("report.md")).unwrap();
        let path = gzip(dir.path(), name);
        // Cut short, as an interrupted copy leaves it.
        let bytes = read(&path);
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let e = refused(dir.path());
        assert!(
            matches!(&e, StoredError::Io { path: p, .. } if *p == path),
            "{name}: {e:?}"
        );
        assert!(
            e.to_string().starts_with(&format!("{}: ", path.display())),
            "{e}"
        );
    }
}
