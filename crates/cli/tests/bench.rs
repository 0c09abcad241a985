//! `isoe bench` against `isoe target`: every named profile runs and writes
//! the JSON fields METHODOLOGY.md asks for; `--verify` passes on an honest
//! target and catches data that changed under it; bad arguments get
//! specific errors; SIGINT cuts a run short with its result marked; several
//! URLs are reported each beside the total; a LUN removed under a run
//! stops it with the sense in words; other processes' CPU is reported;
//! `--fill` writes every block with data of its own, and says where and
//! why it could not.

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
    let cases: [(&[&str], &str); 5] = [
        (
            &["bench", &url, "--profile", "nope"],
            "no profile named \"nope\"",
        ),
        (&["bench", &no_lun, "--duration", "1"], "names no LUN"),
        (
            &["bench", "--multipath", &url, &no_lun, "--duration", "1"],
            "names no LUN",
        ),
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

/// `key` of `v` as an unsigned count.
fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count in {v}"))
}

#[test]
fn a_signal_cuts_the_run_short_with_its_json_marked_interrupted() {
    let target = Target::with_config(&TargetConfig::memory_lun("64MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cut.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args([
            "bench",
            &url,
            "--duration",
            "120",
            "--ramp",
            "0.3",
            "--no-progress",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Login, the ramp, then a couple of seconds measured.
    std::thread::sleep(std::time::Duration::from_millis(2_800));
    support::target::send_signal(child.id() as libc::pid_t, libc::SIGINT);
    // The window ends at once; the commands in flight drain within 30 s.
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(60));
        // Still there a minute later: a second SIGINT ends it for good.
        support::target::send_signal(pid as libc::pid_t, libc::SIGINT);
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("INTERRUPTED"));
    let runs = json_lines(&json);
    assert_eq!(runs.len(), 1, "{}", text(&out));
    let run = &runs[0];
    assert_eq!(run["interrupted"], true, "{run}");
    let elapsed = number(run, &["elapsed_s"]);
    assert!(elapsed > 0.5 && elapsed < 60.0, "{run}");
    let series = run["series"].as_array().expect("a series");
    assert!(!series.is_empty(), "{run}");
    // One entry per second actually measured, the last 0.5 to 1.5 s long.
    assert_eq!(series.len(), elapsed.round().max(1.0) as usize, "{run}");
    let in_series: u64 = series.iter().map(|p| count(p, "ios")).sum();
    assert_eq!(in_series, count(run, "ios"));
    assert!(count(run, "ios") > 0);
    let last = series.last().unwrap();
    assert!(
        (number(last, &["t_s"]) + number(last, &["span_s"]) - elapsed).abs() < 1e-6,
        "{last} against {elapsed}"
    );
}

#[test]
fn several_urls_are_reported_each_beside_the_total() {
    let config = TargetConfig::memory_lun("64MiB");
    let target = Target::with_config_on(&config, &["127.0.0.1:0", "127.0.0.2:0"]);
    let urls = target.lun_urls(DEFAULT_TARGET, 0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("two.jsonl");
    let out = isoe(&[
        "bench",
        &urls[0],
        &urls[1],
        "--read-pct",
        "70",
        "--qd",
        "4",
        "--workers",
        "2",
        "--duration",
        "2",
        "--ramp",
        "0.3",
        "--series",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let run = &json_lines(&json)[0];
    assert_eq!(run["interrupted"], false);
    let per_url = run["per_url"].as_array().expect("per_url");
    assert_eq!(per_url.len(), 2, "{run}");
    for (u, url) in per_url.iter().zip(&urls) {
        assert_eq!(u["url"].as_str(), Some(url.as_str()));
        assert!(count(u, "ios") > 0, "{u}");
        assert!(number(u, &["iops"]) > 0.0 && number(u, &["mb_per_s"]) > 0.0);
        assert!(number(u, &["lat_us", "mean"]) > 0.0);
        assert!(number(u, &["lat_us", "p99"]) >= number(u, &["lat_us", "p50"]));
        assert_eq!(count(u, "errors"), 0);
        assert_eq!(
            count(u, "ios"),
            count(&u["read"], "ios") + count(&u["write"], "ios")
        );
    }
    // The URLs' shares add up to the totals.
    let sum = |of: &dyn Fn(&Value) -> u64| -> u64 { per_url.iter().map(of).sum() };
    assert_eq!(sum(&|u| count(u, "ios")), count(run, "ios"));
    assert_eq!(
        sum(&|u| count(&u["read"], "ios")),
        count(&run["read"], "ios")
    );
    assert_eq!(sum(&|u| count(u, "bytes")), count(run, "bytes"));
    let series = run["series"].as_array().expect("a series");
    assert_eq!(series.len(), 2, "{run}");
    let in_series: u64 = series.iter().map(|p| count(p, "ios")).sum();
    assert_eq!(in_series, count(run, "ios"));
    for p in series {
        assert!(number(p, &["iops"]) > 0.0, "{p}");
        assert!(number(p, &["lat_us", "p99"]) > 0.0, "{p}");
        assert!(
            number(p, &["read_iops"]) > number(p, &["write_iops"]),
            "{p}"
        );
    }
    // The table names each URL, and --series prints a row per second.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for url in &urls {
        assert!(stdout.contains(url.as_str()), "{stdout}");
    }
    assert!(stdout.contains(" second "), "{stdout}");
}

/// A target with LUNs 0 and 1 and a control socket, for `isoe admin`.
fn target_with_control() -> (TargetConfig, Target) {
    let config = TargetConfig::new("");
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\n[control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{DEFAULT_TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n\
         [[target.lun]]\nnumber = 1\nmemory = \"64MiB\"\n",
        config.dir().join("control.sock").display()
    );
    std::fs::write(config.path(), text).unwrap();
    let target = Target::with_config(&config);
    (config, target)
}

/// `isoe admin --socket S ARGS...`.
fn admin(config: &TargetConfig, args: &[&str]) -> Output {
    let socket = config.dir().join("control.sock");
    let mut all = vec!["admin", "--socket", socket.to_str().unwrap()];
    all.extend_from_slice(args);
    isoe(&all)
}

#[test]
fn a_lun_removed_under_the_run_stops_it_with_the_sense_in_words() {
    let (config, target) = target_with_control();
    let url = target.lun_url(DEFAULT_TARGET, 1);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gone.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args([
            "bench",
            &url,
            "--qd",
            "8",
            "--duration",
            "120",
            "--ramp",
            "0.3",
            "--no-progress",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Logged in and past the ramp before the LUN goes.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let removed = admin(&config, &["lun", "remove", DEFAULT_TARGET, "1"]);
    assert!(removed.status.success(), "{}", text(&removed));
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        // Still running a minute later (of a 120 s window): it did not stop.
        std::thread::sleep(std::time::Duration::from_secs(60));
        support::target::send_signal(pid as libc::pid_t, libc::SIGKILL);
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let words = "ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (05/25/00)";
    assert!(stderr.contains(words), "{}", text(&out));
    assert!(stdout.contains("STOPPED"), "{}", text(&out));
    // No throughput is shown as if it were measured.
    assert!(!stdout.contains("IOPS"), "{}", text(&out));
    let run = &json_lines(&json)[0];
    let stopped = run["stopped"].as_str().unwrap_or_else(|| panic!("{run}"));
    assert!(stopped.contains(words), "{run}");
    assert_eq!(run["interrupted"], false, "{run}");
    // At most the commands in flight when the LUN went fail: nothing more
    // is sent after the first.
    assert!(
        count(run, "errors") >= 1 && count(run, "errors") <= 8,
        "{run}"
    );
    assert!(number(run, &["elapsed_s"]) < 60.0, "{run}");
}

/// A process of no part in the run, burning a CPU: bench names it and
/// flags the run, as the lab flags a run spoiled by foreign load.
#[test]
fn other_processes_cpu_is_reported_and_flagged_above_the_labs_limit() {
    let target = Target::with_config(&TargetConfig::memory_lun("64MiB"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("busy.jsonl");
    let mut burner = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("start a busy shell");
    let out = isoe(&[
        "bench",
        &url,
        "--qd",
        "4",
        "--duration",
        "2",
        "--ramp",
        "0.3",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    burner.kill().unwrap();
    burner.wait().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run = &json_lines(&json)[0];
    let foreign = number(run, &["foreign", "cpu_pct"]);
    // A shell spinning on one CPU uses most of it, whatever else runs.
    assert!(foreign > 20.0, "{run}");
    let top = run["foreign"]["top"].to_string();
    assert!(top.contains("\"sh\""), "the busy shell is named: {top}");
    assert_eq!(run["foreign_warning"], true, "{run}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("other processes "), "{stdout}");
    assert!(
        stdout.contains("WARNING: other processes used ") && stdout.contains("> 5% of a CPU"),
        "{stdout}"
    );
}

/// `isoe bench --fill` writes the pattern of `isoe_bench::fill` at every
/// block of every LU given (the last write shortened), reports what it
/// wrote in its one JSON line, and the LUs read back hold exactly that:
/// no block of zeros, each block the data of its own offset.
#[test]
fn fill_writes_every_block_of_each_lu_with_data_of_its_own() {
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n\
         [[target.lun]]\nnumber = 1\nmemory = \"3MiB\"\nblock_size = 4096\n"
    ));
    let target = Target::with_config(&config);
    let urls = [
        target.lun_url(DEFAULT_TARGET, 0),
        target.lun_url(DEFAULT_TARGET, 1),
    ];
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fill.json");
    // 768 KiB writes: 8 MiB is 10 and a shortened 11th, 3 MiB is 4 exactly.
    let out = isoe(&[
        "bench",
        "--fill",
        &urls[0],
        &urls[1],
        "--bs",
        "768k",
        "--qd",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("isoe bench: filled 11 MiB on 2 LUs in "),
        "{}",
        text(&out)
    );
    let lines = json_lines(&json);
    assert_eq!(lines.len(), 1, "{}", text(&out));
    let report: isoe_bench::FillOutput =
        serde_json::from_value(lines[0].clone()).expect("the fill's JSON shape");
    let report = report.fill;
    assert_eq!(report.bytes, 11 << 20);
    assert!(report.seconds > 0.0);
    let expected = [(&urls[0], 512, 16_384), (&urls[1], 4096, 768)];
    assert_eq!(report.luns.len(), 2);
    for (lun, (url, block_size, blocks)) in report.luns.iter().zip(expected) {
        assert_eq!(&lun.url, url);
        assert_eq!((lun.block_size, lun.blocks), (block_size, blocks));
        assert_eq!(lun.bytes, u64::from(block_size) * blocks);
    }
    for url in &urls {
        let (block_size, data) = read_whole_lu(url);
        for (i, block) in data.chunks(block_size as usize).enumerate() {
            assert!(block.iter().any(|&b| b != 0), "{url}: block {i} is zeros");
        }
        assert_eq!(isoe_bench::fill::first_mismatch(&data, 0), None, "{url}");
    }
    // A span writes its own blocks from the start and no more: the
    // first 5000 bytes of a 4 KiB-block LU are its first two blocks.
    let out = isoe(&["bench", "--fill", &urls[1], "--span", "5000", "--json", "-"]);
    assert!(out.status.success(), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let spanned: isoe_bench::FillOutput = serde_json::from_str(line.trim()).expect("JSON");
    assert_eq!((spanned.fill.bytes, spanned.fill.luns[0].blocks), (8192, 2));
    let out = isoe(&["bench", "--span", "0", &urls[1]]);
    assert_eq!(out.status.code(), Some(2), "an empty span: {}", text(&out));
    // Writes of part of a 4 KiB block cannot be: refused, naming the LU.
    let out = isoe(&["bench", "--fill", &urls[1], "--bs", "512"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let want = format!(
        "{}: the write size 512 is not a multiple of the LU's 4096-byte blocks",
        urls[1]
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&want),
        "{}",
        text(&out)
    );
}

/// Every byte of `url`'s LU, read with the initiator library, and its
/// block size.
fn read_whole_lu(url: &str) -> (u32, Vec<u8>) {
    use isoe_initiator::cdb::{self, Capacity};
    use isoe_initiator::{Command, Engine, IscsiUrl, SessionConfig};
    let url = IscsiUrl::parse(url).unwrap();
    let lun = url.lun.unwrap();
    let mut engine = Engine::new();
    let s = engine.login(SessionConfig::from_url(&url)).expect("log in");
    // A fresh session may first get UNIT ATTENTION: ask again.
    let mut good = |make: &dyn Fn() -> Command| {
        let mut last = String::new();
        for _ in 0..4 {
            let done = engine.execute(s, make()).expect("an answer");
            match done.good() {
                Ok(_) => return done.buffer,
                Err(e) => last = e,
            }
        }
        panic!("{url}: {last}");
    };
    let cap = good(&|| Command::read(lun, &cdb::read_capacity16(), 32));
    let cap = Capacity::parse(&cap).expect("READ CAPACITY (16) data");
    let (block_size, blocks) = (cap.block_size_bytes, cap.blocks());
    let per_read = (1 << 20) / block_size;
    let mut data = Vec::new();
    let mut lba = 0;
    while lba < blocks {
        let n = (blocks - lba).min(u64::from(per_read)) as u32;
        let len = n * block_size;
        data.extend(good(&|| Command::read(lun, &cdb::read16(lba, n), len)));
        lba += u64::from(n);
    }
    assert_eq!(data.len() as u64, cap.size_bytes());
    (block_size, data)
}

/// A fill that cannot write stops at once and says where and why: the
/// URL, the LBA and the sense in words.
#[test]
fn a_fill_of_a_read_only_lu_fails_naming_the_url_lba_and_sense() {
    let target = Target::with_config(&TargetConfig::memory_lun_with("4MiB", "read_only = true\n"));
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let out = isoe(&["bench", "--fill", &url, "--bs", "64k"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{url}: write at LBA ")) && stderr.contains("DATA PROTECT"),
        "{}",
        text(&out)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("filled"));
}

#[test]
fn a_fill_refuses_the_options_of_a_measured_run() {
    let url = "iscsi://127.0.0.1:9/iqn.2026-11.io.isoe:nowhere/0";
    let out = isoe(&["bench", "--fill", url, "--duration", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'--fill' cannot be used with '--duration"),
        "{}",
        text(&out)
    );
}
