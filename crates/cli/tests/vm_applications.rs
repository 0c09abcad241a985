//! The application workloads on the test bed VM, end to end: the shipped
//! `applications` plan's cases (the kernel initiator's disk, isoe attach's
//! ublk device) with a small database and mail files, one run each,
//! against isoe's target on this machine and against LIO in the VM.
//! Every run gives the application's figures, its block I/O's latency
//! histograms and the latency by component (with the target's stages from
//! isoe's target, merged into the initiator's part for LIO); the report
//! has the application table and the breakdown; nothing is left mounted,
//! running or in a cgroup in the VM. Mechanics, not speed: under emulation
//! the figures are the emulated CPU's.

mod support;

use isoe_lab::plan::Plan;
use std::process::{Command, Stdio};
use support::vm::Vm;

/// The shipped plan, one short run a cell, a database and mail files small
/// enough to make in seconds under emulation (still larger than the memory
/// the database server may keep); neither other processes' load nor steal
/// spoils a run (the test checks the mechanics).
fn short_plan() -> String {
    let shipped = Plan::embedded_text("applications").expect("a shipped plan");
    let text = shipped
        .replace("min_runs = 3", "min_runs = 1")
        .replace("max_runs = 4", "max_runs = 1\nforeign_max_pct = 1000.0")
        .replace("steal_max_pct = 5.0", "steal_max_pct = 100.0")
        .replace("duration_s = 10.0", "duration_s = 3.0")
        .replace("ramp_s = 2.0", "ramp_s = 1.0")
        .replace("scale = 10", "scale = 4")
        .replace("memory = \"128MiB\"", "memory = \"64MiB\"")
        .replace("database = \"192MiB\"", "database = \"48MiB\"")
        .replace("log = \"32MiB\"", "log = \"8MiB\"");
    // The select-only mix adds nothing to the mechanics.
    let select = text
        .find("[[workload]]\nname = \"oltp-select\"")
        .expect("oltp-select");
    let after = text[select + 1..].find("[[workload]]").expect("mail") + select + 1;
    format!("{}{}", &text[..select], &text[after..])
}

fn lab(dir: &std::path::Path, plan: &str, bed: &str, out: &str, extra: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args([
            "lab",
            "--plan",
            plan,
            "--testbed",
            bed,
            "--fresh",
            "--no-install",
            "--no-progress",
        ])
        .arg("--out")
        .arg(dir.join(out))
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run isoe lab");
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

fn records(dir: &std::path::Path, out: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join(out).join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every case ran both workloads with a valid result carrying the
/// application's figures, histograms of its reads and writes, and a
/// breakdown whose target stages are present exactly when `stages`.
fn check_runs(records: &[serde_json::Value], cases: &[&str], stages: bool, output: &str) {
    for case in cases {
        for workload in ["oltp-tpcb", "mail"] {
            let r = records
                .iter()
                .find(|r| r["case"] == *case && r["workload"] == workload)
                .unwrap_or_else(|| panic!("{case}/{workload} ran: {output}"));
            assert_eq!(r["valid"], true, "{case}/{workload}: {r}");
            let b = &r["bench"];
            let app = &b["application"];
            if workload == "oltp-tpcb" {
                assert!(app["tps"].as_f64().unwrap() > 0.0, "{app}");
                assert!(app["latency_ms"]["p99"].as_f64().unwrap() > 0.0, "{app}");
                assert!(
                    app["cpu_us_per_transaction"].as_f64().unwrap() > 0.0,
                    "{app}"
                );
            } else {
                assert!(app["transactional_iops"].as_f64().unwrap() > 0.0, "{app}");
                assert!(app["log_write_avg_ms"].as_f64().unwrap() > 0.0, "{app}");
            }
            assert!(app["processor_time_pct"].as_f64().unwrap() > 0.0, "{app}");
            let writes = b["lat_hist"]["write"]
                .as_array()
                .expect("a write histogram");
            assert!(!writes.is_empty(), "{case}/{workload} wrote: {b}");
            let part = &b["breakdown"]["write"];
            assert!(part["initiator_us"].as_f64().unwrap() > 0.0, "{part}");
            assert!(part["network_us"].as_f64().unwrap() > 0.0, "{part}");
            assert_eq!(
                part["store_us"].is_number(),
                stages,
                "{case}/{workload}: {part}"
            );
        }
    }
}

/// Nothing of the lab's is left in the VM.
fn check_clean(vm: &Vm) {
    let left = vm.ssh(
        "mount | grep isoe-lab; ls -d /sys/fs/cgroup/isoe-lab* /tmp/isoe-lab* 2>/dev/null; \
         pgrep -a postgres; pgrep -a blktrace; true",
    );
    assert!(
        left.stdout.trim().is_empty(),
        "left in the VM: {}",
        left.stdout
    );
}

#[test]
fn applications_run_on_the_vm_s_block_devices_against_isoe_and_lio() {
    let Some(vm) =
        Vm::start_or_skip("applications_run_on_the_vm_s_block_devices_against_isoe_and_lio")
    else {
        return;
    };
    eprintln!("VM up ({})", vm.accel());
    let tmp = tempfile::tempdir().expect("a directory for the lab");
    let dir = tmp.path();
    let plan = dir.join("apps.toml");
    std::fs::write(&plan, short_plan()).unwrap();
    let plan = plan.display().to_string();
    let bed = |name: &str, target: &str| {
        let path = dir.join(format!("bed-{name}.toml"));
        let text = format!(
            "ssh_key = \"{}\"\nlocal_processes = [\"qemu-system-x86_64\", \"isoe\"]\n\
             [initiator]\nhost = \"{}\"\n\n[target]\n{target}\n",
            vm.key().display(),
            vm.ssh_url()
        );
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };

    // Against isoe's target here: both initiators, the target's stages.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let here = format!(
        "host = \"local\"\nportals = [\"10.0.2.2:{port}\"]\nlisten = [\"127.0.0.1:{port}\"]"
    );
    let (ok, output) = lab(dir, &plan, &bed("here", &here), "isoe", &[]);
    assert!(ok, "{output}");
    let ublk_here = vm
        .ssh("test -e /dev/ublk-control && echo yes")
        .stdout
        .contains("yes");
    let cases: &[&str] = if ublk_here {
        &["baseline", "isoe-ublk"]
    } else {
        &["baseline"]
    };
    check_runs(&records(dir, "isoe"), cases, true, &output);
    let report = std::fs::read_to_string(dir.join("isoe").join("report.md")).unwrap();
    for section in [
        "## Applications",
        "## Latency by component",
        "oltp-tpcb latency",
    ] {
        assert!(report.contains(section), "{section}:\n{report}");
    }
    if ublk_here {
        assert!(
            report.contains("95% CI"),
            "changes have intervals:\n{report}"
        );
    }
    check_clean(&vm);

    // Against LIO in the VM: its stages are not known, so the target's
    // part stays with the initiator's.
    let in_vm = format!(
        "host = \"{}\"\nportals = [\"127.0.0.1:3260\"]",
        vm.ssh_url()
    );
    let (ok, output) = lab(dir, &plan, &bed("lio", &in_vm), "lio", &["--target", "lio"]);
    assert!(ok, "{output}");
    check_runs(&records(dir, "lio"), cases, false, &output);
    let report = std::fs::read_to_string(dir.join("lio").join("report.md")).unwrap();
    assert!(
        report.contains(isoe_report::components::MERGED_PART),
        "{report}"
    );
    check_clean(&vm);
}
