//! tgt as the lab's target (`target = "tgt"`): `isoe_lab::peers::tgt` starts a
//! private tgtd in a loopback topology's namespace with a case's iSCSI
//! parameters, `isoe bench` measures it (target CPU included), and nothing
//! is left afterwards: no tgtd, no control socket file, no backing file,
//! no namespace. Then `isoe lab` runs a tiny plan with a tgt case.
//!
//! Needs root and tgt (Debian package tgt); skipped with the reason
//! otherwise, unless CI is set: CI installs tgt and runs as root, so there
//! a missing piece fails the test.

use isoe_lab::knobs::KnobSet;
use isoe_lab::peers::tgt::{self, TgtTarget, TGT_LUN};
use isoe_lab::runner::TARGET_IQN;
use isoe_lab::topology::{Kind, Role, Topology};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// False, with the reason printed, when tgt cannot run here (panics in CI).
fn tgt_or_skip(test: &str) -> bool {
    match tgt::programs() {
        Ok(_) => true,
        Err(why) if ci() => panic!("{test}: tgt as the lab's target cannot run in CI: {why}"),
        Err(why) => {
            // Straight to fd 2: the harness captures eprintln! of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

/// Whether `pid` is a live tgtd (not a zombie, not a reused PID).
fn is_tgtd(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let name = status.lines().next().unwrap_or_default();
    name.ends_with("tgtd") && !status.contains("State:\tZ")
}

fn lab_namespaces_of(pid: u32) -> Vec<String> {
    isoe_lab::topology::lab_namespaces()
        .into_iter()
        .filter(|n| isoe_lab::topology::owner_pid(n) == Some(pid))
        .collect()
}

fn state_dirs_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .chain(std::fs::read_dir(std::env::temp_dir()))
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| tgt::state_owner_pid(n) == Some(pid))
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn tgt_in_a_loopback_topology_is_measured_and_leaves_nothing() {
    let test = "tgt_in_a_loopback_topology_is_measured_and_leaves_nothing";
    if !tgt_or_skip(test) {
        return;
    }
    let topo = Topology::create(Kind::Loopback, Default::default()).expect("a loopback topology");
    if let Some(why) = topo.degraded() {
        assert!(!ci(), "{test}: no namespace in CI: {why}");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        return;
    }
    let knobs = KnobSet {
        max_recv_data_segment_length: Some(65_536),
        immediate_data: Some(false),
        ..KnobSet::default()
    };
    let tgt = TgtTarget::start(&topo, &knobs, 64 << 20).expect("tgt starts");
    assert_eq!(tgt.lun(), TGT_LUN);
    assert_eq!(tgt.portals(), ["127.0.0.1:3260"]);
    let shown = tgt
        .tgtadm(&["--mode", "target", "--op", "show", "--tid", "1"])
        .expect("tgtadm show");
    for line in [
        "MaxRecvDataSegmentLength=65536",
        "MaxXmitDataSegmentLength=65536",
        "ImmediateData=No",
    ] {
        assert!(shown.lines().any(|l| l.trim() == line), "{line}:\n{shown}");
    }
    assert!(
        shown.contains(TARGET_IQN) || {
            let all = tgt
                .tgtadm(&["--mode", "target", "--op", "show"])
                .unwrap_or_default();
            all.contains(TARGET_IQN)
        },
        "tgt does not serve {TARGET_IQN}"
    );
    let pid = tgt.pid();
    assert!(is_tgtd(pid), "PID {pid} is not tgtd");
    let sockets = tgt.socket_files();
    assert!(sockets[0].exists(), "{}", sockets[0].display());
    let dir = tgt.state_dir().to_path_buf();
    let backing = tgt.backing_file();
    assert_eq!(std::fs::metadata(&backing).unwrap().len(), 64 << 20);

    let url = format!("iscsi://{}/{TARGET_IQN}/{}", tgt.portals()[0], tgt.lun());
    let out = topo
        .command(Role::Host, env!("CARGO_BIN_EXE_isoe"))
        .arg("bench")
        .arg(&url)
        .args(["--profile", "oltp-8k", "--qd", "4"])
        .args(["--duration", "1", "--ramp", "0.2", "--json", "-"])
        .args(["--no-progress", "--target-pid", &pid.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run isoe bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON result: {}\n{}", text(&out), tgt.log()));
    let result: serde_json::Value = serde_json::from_str(line).unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(result["errors"], 0, "{result}");
    assert_eq!(result["verify_errors"], 0, "{result}");
    assert!(result["iops"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["read"]["ios"].as_u64().unwrap() > 0, "{result}");
    assert!(result["write"]["ios"].as_u64().unwrap() > 0, "{result}");
    assert_eq!(result["target_pid"], pid, "{result}");
    let target_cpu = result["target_cpu_pct"].as_f64();
    assert!(
        target_cpu.is_some_and(|p| p > 0.0),
        "no target CPU: {result}"
    );
    eprintln!(
        "tgt: {:.0} IOPS, target CPU {:.1}%",
        result["iops"].as_f64().unwrap(),
        target_cpu.unwrap()
    );

    drop(tgt);
    assert!(!is_tgtd(pid), "tgtd {pid} still runs");
    for f in &sockets {
        assert!(!f.exists(), "{} left behind", f.display());
    }
    assert!(!backing.exists(), "{} left behind", backing.display());
    assert!(!dir.exists(), "{} left behind", dir.display());
    let namespaces = topo.namespaces().to_vec();
    topo.destroy().expect("the topology goes");
    let left: Vec<_> = isoe_lab::topology::lab_namespaces()
        .into_iter()
        .filter(|n| namespaces.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

const TGT_PLAN: &str = r#"
name = "tgt-tiny"
description = "isoe target vs tgt, one short workload"
topology = "loopback"
[run]
duration_s = 1.0
ramp_s = 0.2
[stats]
min_runs = 1
max_runs = 1
# Tests run beside each other: other processes' CPU and the host's steal
# must not spoil runs here.
foreign_max_pct = 1000.0
steal_max_pct = 100.0
[baseline]
max_recv_data_segment_length = "64KiB"
[[workload]]
name = "rand-read-4k"
profile = "exchange-email-4k"
qd = 4
[[case]]
name = "tgt"
description = "tgt as the target"
target = "tgt"
"#;

#[test]
fn isoe_lab_runs_a_tgt_case_and_leaves_nothing() {
    let test = "isoe_lab_runs_a_tgt_case_and_leaves_nothing";
    if !tgt_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("tgt.toml");
    std::fs::write(&plan, TGT_PLAN).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--no-progress", "--no-install", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run isoe lab");
    let lab_pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let records: Vec<serde_json::Value> = read(&dir.path().join("out/results.jsonl"));
    assert_eq!(records.len(), 2, "{records:?}\n{}", text(&out));
    let tgt_run = records
        .iter()
        .find(|r| r["case"] == "tgt")
        .unwrap_or_else(|| panic!("no tgt run: {}", text(&out)));
    assert_eq!(tgt_run["valid"], true, "{tgt_run}");
    assert_eq!(tgt_run["knobs"]["target"], "tgt", "{tgt_run}");
    let bench = &tgt_run["bench"];
    assert!(bench["target_cpu_pct"].as_f64().is_some_and(|p| p > 0.0));
    let urls = bench["workload"]["urls"].to_string();
    assert!(urls.contains(&format!("{TARGET_IQN}/1")), "{urls}");
    let tgtd = bench["target_pid"].as_u64().expect("tgtd's PID") as u32;
    assert!(!is_tgtd(tgtd), "tgtd {tgtd} still runs");
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(!md.contains("skipped: target = tgt"), "{md}");
    assert!(lab_namespaces_of(lab_pid).is_empty());
    assert!(
        state_dirs_of(lab_pid).is_empty(),
        "{:?}",
        state_dirs_of(lab_pid)
    );
}

fn read(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Children of `pid` (all its threads'), from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

#[test]
fn the_tgtd_of_a_lab_that_was_killed_is_stopped_at_the_next_start() {
    let test = "the_tgtd_of_a_lab_that_was_killed_is_stopped_at_the_next_start";
    if !tgt_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("tgt.toml");
    // Only the tgt case, and long runs, so the kill lands in one.
    std::fs::write(
        &plan,
        TGT_PLAN
            .replace("duration_s = 1.0", "duration_s = 30.0")
            .replace("[baseline]\n", "[baseline]\ntarget = \"tgt\"\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--no-progress", "--no-install", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run isoe lab");
    let lab_pid = child.id();
    // Wait for isoe bench: tgtd is then configured and serving.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let bench = loop {
        let bench = children_of(lab_pid)
            .into_iter()
            .find(|&p| cmdline(p).contains(" bench "));
        if let Some(b) = bench {
            break b;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the lab never started isoe bench against tgt");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let state = state_dirs_of(lab_pid);
    assert_eq!(state.len(), 1, "{state:?}");
    let recorded = ["/dev/shm", &std::env::temp_dir().to_string_lossy()]
        .iter()
        .find_map(|base| {
            std::fs::read_to_string(Path::new(base).join(&state[0]).join("tgtd.pid")).ok()
        })
        .expect("tgtd.pid in the state directory");
    let mut fields = recorded
        .split_whitespace()
        .map(|f| f.parse::<u32>().unwrap());
    let (tgtd, port) = (fields.next().unwrap(), fields.next().unwrap() as u16);
    assert!(is_tgtd(tgtd), "{recorded}");
    // The lab dies without cleaning up; its bench (our grandchild) goes too.
    let _ = child.kill();
    let _ = child.wait();
    // SAFETY: kill(2) on isoe bench, a child of the lab this test started.
    unsafe {
        libc::kill(bench as libc::pid_t, libc::SIGKILL);
    }
    assert!(is_tgtd(tgtd), "tgtd died with the lab; nothing to test");

    // (A lab starting tgt in a test running beside this one may get there first.)
    let _ = tgt::cleanup_stale();
    assert!(!is_tgtd(tgtd), "the stale tgtd {tgtd} still runs");
    for f in tgt::socket_files(port) {
        assert!(!f.exists(), "{} left behind", f.display());
    }
    assert!(state_dirs_of(lab_pid).is_empty());
    isoe_lab::topology::cleanup_stale();
    assert!(lab_namespaces_of(lab_pid).is_empty());
}
