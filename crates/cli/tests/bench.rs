//! `isoe bench` against `isoe target`: every named profile runs and writes
//! the JSON fields METHODOLOGY.md asks for; `--verify` passes on an honest
//! target and catches data that changed under it; bad arguments get
//! specific errors.

mod support;

use serde_json::Value;
use std::process::{Command, Output};
use support::{Target, TargetConfig, DEFAULT_TARGET};

fn isoe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(args)
        .output()
        .expect("run isoe")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("read the JSON file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect()
}

fn number(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for k in path {
        cur = &cur[*k];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

#[test]
fn list_profiles_names_every_workload_of_the_methodology() {
    let out = isoe(&["bench", "--list-profiles"]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = String::from_utf8_lossy(&out.stdout);
    for name in isoe_bench::profiles::profiles().iter().map(|p| p.name) {
        assert!(listing.contains(name), "{name} missing from:\n{listing}");
    }
}

#[test]
fn every_profile_runs_and_reports_each_side() {
    let target = Target::with_config(&TargetConfig::memory_lun("256MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.jsonl");
    let out = isoe(&[
        "bench",
        &url,
        "--profile",
        "all",
        "--duration",
        "1",
        "--ramp",
        "0.2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let runs = json_lines(&json);
    let expected = isoe_bench::profiles::profiles();
    assert_eq!(runs.len(), expected.len());
    for (run, profile) in runs.iter().zip(expected) {
        assert_eq!(run["workload"]["profile"], profile.name, "{run}");
        assert_eq!(
            number(run, &["workload", "block_size_bytes"]),
            f64::from(profile.block_size_bytes)
        );
        assert!(number(run, &["iops"]) > 0.0, "{run}");
        assert!(number(run, &["mb_per_s"]) > 0.0, "{run}");
        for p in ["p50", "p90", "p99", "p999", "max"] {
            assert!(number(run, &["lat_us", p]) > 0.0, "{p} in {run}");
        }
        assert!(number(run, &["lat_us", "p50"]) <= number(run, &["lat_us", "p99"]));
        assert!(number(run, &["initiator_cpu_us_per_io"]) >= 0.0);
        // The target is local: its PID is found and its CPU reported.
        assert_eq!(
            run["target_pid"].as_u64(),
            target.pid().map(u64::from),
            "{run}"
        );
        assert!(number(run, &["target_cpu_us_per_io"]) >= 0.0);
        for k in [
            "user_pct",
            "system_pct",
            "softirq_pct",
            "steal_pct",
            "busy_pct",
        ] {
            assert!(run["cpu"][k].is_number(), "cpu.{k} in {run}");
        }
        for k in ["steal_pct", "retrans_segs", "dsack_segs"] {
            assert!(run[k].is_number(), "{k} in {run}");
        }
        assert_eq!(number(run, &["errors"]), 0.0, "{run}");
        // Reads and writes in the profile's proportion show up apart.
        if profile.read_pct == 100 {
            assert_eq!(number(run, &["write", "ios"]), 0.0);
        }
        if profile.read_pct == 0 {
            assert_eq!(number(run, &["read", "ios"]), 0.0);
        }
    }
}

#[test]
fn verify_passes_over_several_workers_and_connections() {
    let target = Target::with_config(&TargetConfig::memory_lun("64MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("verify.jsonl");
    let out = isoe(&[
        "bench",
        &url,
        "--bs",
        "8k",
        "--read-pct",
        "50",
        "--random-pct",
        "100",
        "--qd",
        "16",
        "--workers",
        "2",
        "--connections",
        "2",
        "--duration",
        "2",
        "--ramp",
        "0.5",
        "--verify",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let run = &json_lines(&json)[0];
    assert_eq!(run["workload"]["verify"], true);
    assert_eq!(number(run, &["verify_errors"]), 0.0);
    assert!(number(run, &["read", "ios"]) > 100.0, "{run}");
    assert!(number(run, &["write", "ios"]) > 100.0, "{run}");
    assert_eq!(number(run, &["connections_per_session"]), 2.0);
}

#[test]
fn verify_catches_data_changed_under_it() {
    // Two verified runs over one small LUN overwrite each other's blocks:
    // each finds generations it did not write.
    let target = Target::with_config(&TargetConfig::memory_lun("4MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let args = [
        "bench",
        url.as_str(),
        "--bs",
        "4k",
        "--read-pct",
        "50",
        "--random-pct",
        "100",
        "--qd",
        "8",
        "--duration",
        "2",
        "--ramp",
        "0",
        "--verify",
        "--no-progress",
    ];
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_isoe"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let failed: Vec<&Output> = outs.iter().filter(|o| !o.status.success()).collect();
    assert!(
        !failed.is_empty(),
        "neither run noticed:\n{}\n{}",
        text(&outs[0]),
        text(&outs[1])
    );
    for o in failed {
        assert_eq!(o.status.code(), Some(1), "{}", text(o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("verify: LBA "), "{err}");
        assert!(
            err.contains("expected LBA") && err.contains("generation"),
            "{err}"
        );
        assert!(err.contains("verify mismatches"), "{err}");
    }
}

#[test]
fn bad_arguments_get_specific_errors() {
    let target = Target::with_config(&TargetConfig::memory_lun("16MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let no_lun = format!("{}/{DEFAULT_TARGET}", target.url());
    let cases: [(&[&str], &str); 4] = [
        (
            &["bench", &url, "--profile", "nope"],
            "no profile named \"nope\"",
        ),
        (&["bench", &no_lun, "--duration", "1"], "names no LUN"),
        (&["bench", &url, "--bs", "1000", "--duration", "1"], "512"),
        (&["bench", "http://x/y/0"], "not an iSCSI URL"),
    ];
    for (args, want) in cases {
        let out = isoe(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: expected {want:?} in {err}");
    }
}
