//! `isoe lab` end to end on a tiny plan: the four files are written (and
//! `--report` draws the same reports again from two of them), the runs
//! obey the plan's statistics, every read reads blocks the lab wrote first
//! (the target's own count of reads of never-written blocks stays 0), a second invocation resumes instead of
//! repeating, Ctrl-C stops it with the report written, and no namespace of
//! the run is left behind.
//!
//! Before its first run the lab checks what the plan needs: a plan whose
//! case needs a program the machine lacks stops (exit 2) with the command
//! that would install it, or with `--skip-missing` runs the rest and heads
//! its report with the skipped case. Every test here passes `--no-install`,
//! so that none ever installs anything, and the missing program is made up
//! (`ISOE_LAB_PRETEND_MISSING`), so that none has to uninstall one.
//!
//! Needs root (network namespaces); skipped with the reason otherwise,
//! unless CI is set. The libiscsi test also needs fio built with libiscsi
//! (`crates/lab/fio-libiscsi`, which `.ci/run` runs), and fails in CI without it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TINY_PLAN: &str = r#"
name = "tiny"
description = "CI: one case, one workload, two short runs each"
topology = "loopback"
[run]
duration_s = 1.0
ramp_s = 0.2
[stats]
min_runs = 2
max_runs = 2
# Tests run beside each other (and beside builds): this one checks the
# mechanics, so neither other processes' CPU nor the host's steal spoils
# its runs (a repeated run would change the counts it checks).
foreign_max_pct = 1000.0
steal_max_pct = 100.0
[baseline]
mtu = 1500
[[workload]]
name = "rand-read-4k"
profile = "exchange-email-4k"
qd = 4
[[case]]
name = "jumbo"
description = "MTU 9000"
mtu = 9000
"#;

fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: CI runs as root, but this is not root"
        );
        eprintln!("SKIPPED {test}: network namespaces need root");
    }
    root
}

fn lab(dir: &Path, extra: &[&str]) -> Output {
    let plan = dir.join("tiny.toml");
    std::fs::write(&plan, TINY_PLAN).unwrap();
    Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(dir.join("out"))
        .args(["--no-progress", "--no-install"])
        .args(extra)
        .output()
        .expect("run isoe lab")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The namespaces of the topology that lab `pid` has up. Its preflight's
/// probe (`isoe-lab-PID-probe`, made and removed at once) is not one: a
/// test that saw it would wait for nothing.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("isoe-lab-{pid}-")) && !n.ends_with("-probe"))
        .map(str::to_string)
        .collect()
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("out/results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_plan_runs_writes_its_reports_resumes_and_leaves_nothing() {
    if !root_or_skip("a_plan_runs_writes_its_reports_resumes_and_leaves_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = lab(dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    for f in [
        "results.jsonl",
        "report-input.json",
        "report.md",
        "report.html",
    ] {
        assert!(
            dir.path().join("out").join(f).exists(),
            "{f} missing: {}",
            text(&out)
        );
    }
    let runs = records(dir.path());
    // Two cases (baseline, jumbo) x one workload x exactly two runs.
    assert_eq!(runs.len(), 4, "{runs:?}");
    for r in &runs {
        assert_eq!(r["plan"], "tiny");
        assert_eq!(r["valid"], true, "{r}");
        assert!(r["value"].as_f64().unwrap() > 0.0);
        assert_eq!(r["metric"], "iops");
    }
    let jumbo: Vec<_> = runs.iter().filter(|r| r["case"] == "jumbo").collect();
    assert_eq!(jumbo.len(), 2);
    // Interleaved: each round holds one run of each case, and every run
    // measured the CPU of processes other than the lab's.
    for round in [1, 2] {
        let mut cases: Vec<&str> = runs
            .iter()
            .filter(|r| r["round"] == round)
            .map(|r| r["case"].as_str().unwrap())
            .collect();
        cases.sort_unstable();
        assert_eq!(cases, ["baseline", "jumbo"], "round {round}: {runs:?}");
    }
    assert!(
        runs.iter()
            .all(|r| r["foreign"]["cpu_pct"].as_f64().is_some()),
        "{runs:?}"
    );
    assert_eq!(jumbo[0]["knobs"]["mtu"], "9000");
    // Reads read written data: each target start wrote the span every
    // run addresses (the whole 512 MiB LU) before the first read, and
    // the target served no read from a block never written.
    for r in &runs {
        assert_eq!(r["bench"]["lun_fill"]["bytes"], 512u64 << 20, "{r}");
        assert_eq!(r["bench"]["workload"]["span_bytes"], 512u64 << 20, "{r}");
        assert!(
            r["bench"]["lun_fill"]["seconds"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert_eq!(r["bench"]["target_unwritten_read_bytes"], 0, "{r}");
    }
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(md.contains("reads read written data"), "{md}");
    assert!(md.contains("## Headline"), "{md}");
    assert!(md.contains("## Findings"), "{md}");
    assert!(md.contains("| jumbo"), "{md}");
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    // Drawn again from what the run stored: the same bytes.
    let rebuilt = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--report"])
        .arg(dir.path().join("out"))
        .output()
        .expect("run isoe lab --report");
    assert!(rebuilt.status.success(), "{}", text(&rebuilt));
    assert!(std::fs::read_to_string(dir.path().join("out/report.md")).unwrap() == md);
    assert!(std::fs::read_to_string(dir.path().join("out/report.html")).unwrap() == html);

    // The same command again: every cell is done, nothing is run twice.
    let again = lab(dir.path(), &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("4 runs (0 new)"),
        "{}",
        text(&again)
    );
    assert_eq!(records(dir.path()).len(), 4);
}

#[test]
fn ctrl_c_stops_the_plan_writes_the_report_and_removes_the_namespaces() {
    if !root_or_skip("ctrl_c_stops_the_plan_writes_the_report_and_removes_the_namespaces") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("tiny.toml");
    // Long runs, so the interrupt lands in the middle of one.
    std::fs::write(
        &plan,
        TINY_PLAN.replace("duration_s = 1.0", "duration_s = 30.0"),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--no-progress", "--no-install", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while namespaces_of(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !namespaces_of(pid).is_empty(),
        "the lab never made its namespace"
    );
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on our own child's PID.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "took {:?} to stop",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("interrupted"),
        "{}",
        text(&out)
    );
    assert!(dir.path().join("out/report.md").exists());
    assert!(
        namespaces_of(pid).is_empty(),
        "left behind: {:?}",
        namespaces_of(pid)
    );
}

/// TINY_PLAN with a case that turns offloads off, which takes ethtool.
fn offload_plan(dir: &Path) -> std::path::PathBuf {
    let plan = dir.join("offloads.toml");
    let text = TINY_PLAN.replace("name = \"tiny\"", "name = \"offloads\"")
        + "[[case]]\nname = \"offloads-off\"\ndescription = \"TSO off\"\ntso = false\n";
    std::fs::write(&plan, text).unwrap();
    plan
}

/// `isoe lab` on `plan` with ethtool made to look missing.
fn lab_without_ethtool(dir: &Path, plan: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--no-progress", "--no-install", "--plan"])
        .arg(plan)
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra)
        .env(isoe_lab::netcmd::PRETEND_MISSING_ENV, "ethtool")
        .output()
        .expect("run isoe lab")
}

#[test]
fn a_plan_needing_a_missing_program_stops_before_any_run_with_the_command() {
    let test = "a_plan_needing_a_missing_program_stops_before_any_run_with_the_command";
    if !root_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = offload_plan(dir.path());
    let out = lab_without_ethtool(dir.path(), &plan, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "plan offloads needs what this machine does not have; nothing was run",
        "  - ethtool (Debian package ethtool): ethtool not found",
        "needed by offloads-off (offloads tso off)",
        "Not installed: --no-install.",
        "  apt-get install -y --no-install-recommends ethtool\n",
        "--skip-missing",
    ] {
        assert!(stderr.contains(expected), "{expected:?}: {}", text(&out));
    }
    assert!(records(dir.path()).is_empty(), "runs were made");
    assert!(!dir.path().join("out/report.md").exists());
}

#[test]
fn skip_missing_runs_the_rest_and_heads_the_report_with_the_skipped_case() {
    let test = "skip_missing_runs_the_rest_and_heads_the_report_with_the_skipped_case";
    if !root_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = offload_plan(dir.path());
    let out = lab_without_ethtool(dir.path(), &plan, &["--skip-missing"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Listed before the first run (the run count comes at the end).
    let listed = stdout
        .find("skipped, not measured (also listed at the top of the report):\n  - offloads-off: offloads tso off needs ethtool")
        .unwrap_or_else(|| panic!("not listed: {}", text(&out)));
    assert!(listed < stdout.find(" runs (").unwrap(), "{}", text(&out));
    let runs = records(dir.path());
    let cases: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(
        cases.into_iter().collect::<Vec<_>>(),
        ["baseline", "jumbo"],
        "{runs:?}"
    );
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    let boxed = md.find("> **Skipped: not measured.**").expect("the box");
    assert!(boxed < md.find("## Findings").unwrap(), "{md}");
    assert!(
        md.contains("> - offloads-off: offloads tso off needs ethtool"),
        "{md}"
    );
}

/// False, with the reason printed, when fio with libiscsi is not here
/// (panics in CI, which builds it).
fn fio_or_skip(test: &str) -> bool {
    match isoe_lab::peers::fio::usable_fio() {
        Ok(_) => true,
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: fio with libiscsi is needed in CI (.ci/run builds it): {why}")
        }
        Err(why) => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: fio with libiscsi: {why}"
            );
            false
        }
    }
}

/// `isoe lab` on a plan of this text, into `dir/out`.
fn lab_with_plan(dir: &Path, plan_text: &str) -> Output {
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, plan_text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--no-progress", "--no-install", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .expect("run isoe lab")
}

#[test]
fn a_libiscsi_case_is_measured_with_fio() {
    let test = "a_libiscsi_case_is_measured_with_fio";
    if !root_or_skip(test) || !fio_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fio_plan = TINY_PLAN
        .replace("name = \"tiny\"", "name = \"fio\"")
        .replace("min_runs = 2\nmax_runs = 2", "min_runs = 1\nmax_runs = 1")
        .replace(
            "name = \"jumbo\"\ndescription = \"MTU 9000\"\nmtu = 9000",
            "name = \"libiscsi\"\ndescription = \"fio\"\ninitiator = \"libiscsi\"",
        );
    let out = lab_with_plan(dir.path(), &fio_plan);
    assert!(out.status.success(), "{}", text(&out));
    let runs = records(dir.path());
    let fio = runs
        .iter()
        .find(|r| r["case"] == "libiscsi")
        .unwrap_or_else(|| panic!("no libiscsi run: {runs:?}\n{}", text(&out)));
    assert_eq!(fio["valid"], true, "{fio}");
    assert_eq!(fio["bench"]["initiator"], "libiscsi (fio)", "{fio}");
    assert!(fio["value"].as_f64().unwrap() > 0.0, "{fio}");
}

#[test]
fn a_floor_case_runs_raw_tcp_at_the_sessions_shape_beside_the_iscsi_runs() {
    let test = "a_floor_case_runs_raw_tcp_at_the_sessions_shape_beside_the_iscsi_runs";
    if !root_or_skip(test) || !fio_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let floor_plan = TINY_PLAN
        .replace("name = \"tiny\"", "name = \"floor\"")
        .replace("min_runs = 2\nmax_runs = 2", "min_runs = 1\nmax_runs = 1")
        .replace("mtu = 1500", "sessions = 2")
        .replace(
            "profile = \"exchange-email-4k\"",
            "profile = \"matrix-read-4k-w1-qd32\"",
        )
        .replace(
            "name = \"jumbo\"\ndescription = \"MTU 9000\"\nmtu = 9000",
            "name = \"floor\"\ndescription = \"raw TCP\"\nfloor = true\n\n\
             [[case]]\nname = \"libiscsi\"\ndescription = \"fio\"\ninitiator = \"libiscsi\"",
        );
    let out = lab_with_plan(dir.path(), &floor_plan);
    assert!(out.status.success(), "{}", text(&out));
    let runs = records(dir.path());
    let case = |name: &str| {
        runs.iter()
            .find(|r| r["case"] == name)
            .unwrap_or_else(|| panic!("no {name} run: {runs:?}\n{}", text(&out)))
            .clone()
    };
    // Two sessions sharing QD 4: two connections with two in flight each,
    // a 4 KiB read's sizes, both ends' CPU measured.
    let floor = case("floor");
    assert_eq!(floor["valid"], true, "{floor}");
    let shape = &floor["bench"]["floor"];
    assert_eq!(
        (
            &shape["connections"],
            &shape["depth"],
            &shape["request"],
            &shape["response"]
        ),
        (&2.into(), &2.into(), &48.into(), &4144.into()),
        "{floor}"
    );
    assert!(floor["value"].as_f64().unwrap() > 0.0, "{floor}");
    for side in ["target", "initiator"] {
        let key = format!("{side}_cpu_us_per_io");
        assert!(floor["bench"][&key].as_f64().is_some(), "{key}: {floor}");
    }
    assert_eq!(floor["knobs"]["floor"], "on", "{floor}");
    // fio runs the sessions as jobs sharing the depth, as isoe bench does.
    let fio = case("libiscsi");
    assert_eq!(fio["valid"], true, "{fio}");
    assert!(fio["value"].as_f64().unwrap() > 0.0, "{fio}");
    assert!(
        !fio["skipped_knobs"]
            .as_object()
            .is_some_and(|s| s.contains_key("sessions")),
        "{fio}"
    );
}
