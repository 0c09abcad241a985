//! `isoe lab` on the test bed VM, end to end, one VM for all of
//! it (booting one under TCG takes half a minute):
//!
//! 1. `software-vs-offload`'s cases (the kernel's iscsi_tcp, isoe's
//!    initiator, libiscsi, isoe's initiator as a ublk and an NBD device,
//!    the five offload transports) against isoe's target on this machine,
//!    the initiators in the VM: every initiator gives results (`isoe
//!    attach`'s, or a skip with the reason where the VM's kernel lacks the
//!    driver), the offload cases are skipped with the reason, and the
//!    report compares the initiators' CPU per I/O;
//! 2. the same cases against LIO in the VM (`--target lio`), and against
//!    an external array (`--target external`: an isoe target this test
//!    starts, which the lab neither starts nor sees);
//! 3. knobs on the VM's port and a sysctl, set per case and put back: the
//!    dump of its ethtool settings, MTU and the sysctl is the same before
//!    and after a full run, and after a run stopped by SIGINT halfway;
//! 4. the VM powered off mid-run: the lab ends the case, says so in the
//!    report, and leaves no target running on this machine.
//!
//! The plans are the shipped plan's cases with one short workload, so the
//! whole takes minutes under emulation. They check the mechanics, not
//! speed: neither other processes' load nor steal spoils a run here.

mod support;

use isoe_lab::host::Host;
use isoe_lab::hostknobs::{self, Port};
use isoe_lab::link::Side;
use isoe_lab::plan::Plan;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::vm::Vm;
use support::{ci, Target, TargetConfig, DEFAULT_TARGET};

/// The longest one `isoe lab` invocation may take here.
const LAB_TIMEOUT: Duration = Duration::from_secs(900);

/// The shipped plan's cases over one short workload, `runs` runs each
/// (a case's own subset of the shipped workloads is dropped: it names
/// workloads this plan does not have).
fn software_vs_offload(runs: u32) -> String {
    let shipped = Plan::embedded_text("software-vs-offload").expect("a shipped plan");
    let cases: String = shipped[shipped.find("[[case]]").expect("the plan has cases")..]
        .lines()
        .filter(|l| !l.starts_with("workloads = "))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        r#"name = "svo-ci"
description = "CI: software-vs-offload's cases, one short workload"
seeds = ["000"]
topology = "physical"
[run]
duration_s = 3.0
ramp_s = 1.0
# A small region to write before the reads: a fill crosses the emulated
# VM's network at tens of MB/s.
span = "16MiB"
[stats]
min_runs = {runs}
max_runs = {runs}
foreign_max_pct = 1000.0
steal_max_pct = 100.0
[baseline]
initiator = "kernel"
transport = "tcp"
[[workload]]
name = "rand-read-4k-qd16"
profile = "matrix-read-4k-w1-qd16"

{cases}"#
    )
}

/// Knobs on the VM's port and a sysctl, one case each, isoe's initiator.
const KNOBS_PLAN: &str = r#"name = "knobs-ci"
description = "CI: knobs on a test bed's port, set and put back"
seeds = ["001"]
topology = "physical"
[run]
duration_s = 2.0
ramp_s = 0.5
span = "16MiB"
[stats]
min_runs = 1
max_runs = 1
foreign_max_pct = 1000.0
steal_max_pct = 100.0
[baseline]
initiator = "isoe"
[[workload]]
name = "rand-read-4k-qd16"
profile = "matrix-read-4k-w1-qd16"
[[case]]
name = "mtu-1400"
mtu = 1400
[[case]]
name = "gro-off"
gro = false
[[case]]
name = "timestamps-off"
[case.sysctl]
"net.ipv4.tcp_timestamps" = 0
[[case]]
name = "ring-half"
rx_ring = 128
"#;

/// A test bed file: initiators in the VM, the target where `target` says.
fn bed(vm: &Vm, dev: Option<&str>, target: &str) -> String {
    let interfaces = dev.map_or(String::new(), |d| format!("interfaces = [\"{d}\"]\n"));
    format!(
        "ssh_key = \"{key}\"\nlocal_processes = [\"qemu-system-x86_64\", \"isoe\"]\n\
         [initiator]\nhost = \"{url}\"\n{interfaces}\n[target]\n{target}\n",
        key = vm.key().display(),
        url = vm.ssh_url(),
    )
}

struct Lab {
    dir: PathBuf,
}

impl Lab {
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a lab file");
        path.display().to_string()
    }

    /// `isoe lab --plan PLAN --testbed BED --out DIR EXTRA...` to its end.
    fn run(&self, plan: &str, bed: &str, out: &str, extra: &[&str]) -> (i32, String) {
        let mut child = self.command(plan, bed, out, extra);
        let status = wait(&mut child, LAB_TIMEOUT);
        let text = output_of(child);
        (status.and_then(|s| s.code()).unwrap_or(-1), text)
    }

    fn command(&self, plan: &str, bed: &str, out: &str, extra: &[&str]) -> std::process::Child {
        let out = self.dir.join(out);
        Command::new(env!("CARGO_BIN_EXE_isoe"))
            .args([
                "lab",
                "--plan",
                plan,
                "--testbed",
                bed,
                "--fresh",
                "--no-install",
            ])
            .arg("--out")
            .arg(&out)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start isoe lab")
    }

    fn records(&self, out: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join(out).join("results.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn report(&self, out: &str) -> String {
        std::fs::read_to_string(self.dir.join(out).join("report.md")).expect("report.md")
    }
}

fn wait(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn output_of(child: std::process::Child) -> String {
    let out = child.wait_with_output().expect("isoe lab's output");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The runs of `case` that gave a result, with the result.
fn results<'r>(records: &'r [serde_json::Value], case: &str) -> Vec<&'r serde_json::Value> {
    records
        .iter()
        .filter(|r| r["case"] == case && !r["bench"].is_null())
        .collect()
}

/// Every initiator gave results; the offload transports are skipped with
/// the reason; the target was the one asked for.
fn check_software_vs_offload(lab: &Lab, out: &str, target: &str, output: &str) {
    let records = lab.records(out);
    for case in ["baseline", "isoe", "libiscsi"] {
        let runs = results(&records, case);
        assert!(!runs.is_empty(), "{out}: no result for {case}:\n{output}");
        for r in runs {
            // Unset is the default, isoe's.
            let chosen = r["knobs"]["target"].as_str().unwrap_or("isoe");
            assert_eq!(chosen, target, "{out}: {r}");
            assert!(r["bench"]["iops"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
            assert!(
                r["bench"]["system_cpu_us_per_io"].as_f64().unwrap_or(0.0) > 0.0,
                "the initiator host's CPU per I/O: {r}"
            );
            // Reads read written data: the plan's span written first on
            // the targets the lab starts (an external LU it may not write
            // is left alone), and isoe's target served no read of the run
            // from a block never written.
            let fill = &r["bench"]["lun_fill"]["bytes"];
            if target == "external" {
                assert!(fill.is_null(), "{out}: {r}");
            } else {
                assert_eq!(fill, 16u64 << 20, "{out}: {r}");
            }
            if target == "isoe" {
                assert_eq!(r["bench"]["target_unwritten_read_bytes"], 0, "{out}: {r}");
            }
        }
    }
    // isoe's initiator as a block device: results, labelled as such, or
    // skipped with the reason (a kernel without the driver, or an isoe
    // without `attach`).
    let report = lab.report(out);
    for case in ["isoe-ublk", "isoe-nbd"] {
        let runs = results(&records, case);
        for r in &runs {
            assert!(
                r["bench"]["initiator"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("isoe attach"),
                "{r}"
            );
            if target == "isoe" {
                assert_eq!(r["bench"]["target_unwritten_read_bytes"], 0, "{out}: {r}");
            }
        }
        assert!(
            !runs.is_empty() || report.contains(&format!("{case}: ")),
            "{out}: {case} gave results or was skipped with the reason:\n{report}"
        );
    }
    let kernel = results(&records, "baseline")[0];
    assert!(
        kernel["bench"]["initiator"]
            .as_str()
            .unwrap_or_default()
            .contains("Linux kernel"),
        "{kernel}"
    );
    for transport in ["cxgb4i", "bnx2i", "qedi", "be2iscsi", "qla4xxx"] {
        assert!(
            report.contains(&format!("no {transport} iface on root@127.0.0.1")),
            "{out}: offload-{transport} skipped with the reason:\n{report}"
        );
    }
}

/// The VM's port: the device of its default route.
fn vm_port(host: &Host) -> String {
    let route = host
        .run(&["ip", "-j", "route", "show", "default"])
        .expect("ip route in the VM");
    let route: serde_json::Value = serde_json::from_str(&route).expect("ip -j");
    route[0]["dev"]
        .as_str()
        .expect("a default route")
        .to_owned()
}

/// Processes on this machine running a target the lab started (its
/// configuration lives in the lab's work directory on the target host).
fn lab_targets_here() -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("/tmp/isoe-lab.") && cmdline.contains("target.toml") {
            found.push(cmdline);
        }
    }
    found
}

#[test]
fn the_lab_runs_software_vs_offload_knobs_and_a_lost_host_on_the_vm() {
    let Some(vm) =
        Vm::start_or_skip("the_lab_runs_software_vs_offload_knobs_and_a_lost_host_on_the_vm")
    else {
        return;
    };
    eprintln!("VM up ({})", vm.accel());
    let tmp = tempfile::tempdir().expect("a directory for the lab");
    let lab = Lab {
        dir: tmp.path().to_path_buf(),
    };
    let fio_ready = isoe_lab::peers::fio::usable_fio();
    assert!(
        fio_ready.is_ok() || !ci(),
        "fio with libiscsi is needed in CI: {fio_ready:?}"
    );
    if let Err(why) = fio_ready {
        eprintln!("SKIPPED the VM lab test: fio with libiscsi: {why}");
        return;
    }
    let host = Host::parse(&vm.ssh_url(), Some(vm.key()), vm.run_dir()).expect("the VM's URL");
    let dev = vm_port(&host);

    // 1. Against isoe's target here, two runs a cell so that effects have
    // intervals.
    let port = free_port();
    let here = format!(
        "host = \"local\"\nportals = [\"10.0.2.2:{port}\"]\nlisten = [\"127.0.0.1:{port}\"]"
    );
    let plan = lab.write("svo.toml", &software_vs_offload(2));
    let bed_here = lab.write("bed-here.toml", &bed(&vm, None, &here));
    let (code, output) = lab.run(&plan, &bed_here, "isoe", &[]);
    assert_eq!(code, 0, "{output}");
    check_software_vs_offload(&lab, "isoe", "isoe", &output);
    let report = lab.report("isoe");
    let compared = report
        .lines()
        .skip_while(|l| !l.contains("CPU per I/O against the reference"))
        .find(|l| l.contains("| isoe ") && l.contains("| baseline "))
        .unwrap_or_default();
    assert!(
        compared.contains("95% CI") && report.contains("initiator host's /proc/stat"),
        "the report compares isoe's CPU per I/O with the kernel's, with intervals, and says \
         where it comes from:\n{report}"
    );
    assert!(lab_targets_here().is_empty(), "{:?}", lab_targets_here());

    // 2. Against LIO in the VM, and an external array.
    let plan1 = lab.write("svo1.toml", &software_vs_offload(1));
    let in_vm = format!(
        "host = \"{}\"\nportals = [\"127.0.0.1:3260\"]",
        vm.ssh_url()
    );
    let bed_lio = lab.write("bed-lio.toml", &bed(&vm, None, &in_vm));
    let (code, output) = lab.run(&plan1, &bed_lio, "lio", &["--target", "lio"]);
    assert_eq!(code, 0, "{output}");
    check_software_vs_offload(&lab, "lio", "lio", &output);
    let left = host
        .run(&["ls", "/sys/kernel/config/target/iscsi"])
        .unwrap_or_default();
    assert!(!left.contains("iqn."), "LIO's target is gone: {left}");

    let mut array = Target::with_config(&TargetConfig::memory_lun("1GiB"));
    let external = format!(
        "host = \"local\"\nportals = [\"10.0.2.2:{port}\"]\nexternal = \"iscsi://10.0.2.2:{}/{DEFAULT_TARGET}/0\"",
        array.port()
    );
    let bed_ext = lab.write("bed-ext.toml", &bed(&vm, None, &external));
    let (code, output) = lab.run(&plan1, &bed_ext, "external", &["--target", "external"]);
    assert_eq!(code, 0, "{output}");
    check_software_vs_offload(&lab, "external", "external", &output);
    for r in results(&lab.records("external"), "isoe") {
        assert!(
            r["bench"]["target_cpu_us_per_io"].is_null(),
            "an external array's CPU is not known: {r}"
        );
    }
    array.assert_running("the external array served the lab");
    array.stop_cleanly();

    // 3. Knobs on the VM's port: put back after a full run and after SIGINT.
    let ports = [Port::new(host.clone(), &dev, Side::Initiator)];
    let sysctls = ["net.ipv4.tcp_timestamps".to_owned()];
    let before = hostknobs::dump(&ports, &sysctls);
    let knobs_plan = lab.write("knobs.toml", KNOBS_PLAN);
    let bed_knobs = lab.write("bed-knobs.toml", &bed(&vm, Some(&dev), &here));
    let (code, output) = lab.run(&knobs_plan, &bed_knobs, "knobs", &[]);
    assert_eq!(code, 0, "{output}");
    let records = lab.records("knobs");
    assert_eq!(records.len(), 5, "{output}");
    let mtu = records
        .iter()
        .find(|r| r["case"] == "mtu-1400")
        .expect("mtu");
    assert_eq!(mtu["knobs"]["mtu"], "1400", "{mtu}");
    assert!(
        mtu["skipped_knobs"]
            .as_object()
            .is_some_and(|m| m.is_empty()),
        "the MTU was set: {mtu}"
    );
    assert_eq!(
        hostknobs::dump(&ports, &sysctls),
        before,
        "after a full run"
    );
    assert!(!lab.dir.join("knobs").join("knobs-journal.json").exists());

    let mut child = lab.command(&knobs_plan, &bed_knobs, "knobs-int", &[]);
    let t0 = Instant::now();
    while lab.records("knobs-int").is_empty() && t0.elapsed() < LAB_TIMEOUT {
        assert!(child.try_wait().expect("the lab").is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: kill(2) on the PID of our own child, not yet reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let status = wait(&mut child, Duration::from_secs(180));
    let output = output_of(child);
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{output}");
    assert!(
        lab.records("knobs-int").len() < 5,
        "stopped halfway: {output}"
    );
    assert_eq!(hostknobs::dump(&ports, &sysctls), before, "after Ctrl-C");
    assert!(lab_targets_here().is_empty(), "{:?}", lab_targets_here());

    // 4. The VM goes away mid-run.
    let mut child = lab.command(&plan1, &bed_here, "gone", &[]);
    let t0 = Instant::now();
    while lab.records("gone").is_empty() && t0.elapsed() < LAB_TIMEOUT {
        assert!(child.try_wait().expect("the lab").is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    vm.power_off();
    let status = wait(&mut child, Duration::from_secs(300));
    let output = output_of(child);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{output}");
    let report = lab.report("gone");
    assert!(
        report.contains("went away"),
        "the report says the host went away:\n{report}\n{output}"
    );
    assert!(lab_targets_here().is_empty(), "{:?}", lab_targets_here());
}

/// A TCP port free on this machine's loopback now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("an address").port()
}
