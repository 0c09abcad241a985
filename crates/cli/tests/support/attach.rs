//! `isoe attach` in the test bed's VM: the steps the attach tests share
//! (the binary copied in, an attach started in the background and its
//! device awaited, a detach checked, a process awaited).

use super::vm::Vm;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an attach may take to print its device under TCG.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `isoe` binary without its debug info: a few MB to copy, not hundreds.
pub fn stripped_isoe(dir: &Path) -> PathBuf {
    let out = dir.join("isoe");
    let status = std::process::Command::new("objcopy")
        .args(["--strip-debug", env!("CARGO_BIN_EXE_isoe")])
        .arg(&out)
        .status()
        .expect("run objcopy (binutils)");
    assert!(status.success(), "objcopy --strip-debug failed");
    out
}

pub fn ok(vm: &Vm, command: &str) -> String {
    let out = vm.ssh(command);
    assert!(out.success(), "in the VM: {command}\n{}", out.describe());
    out.stdout
}

/// Starts `isoe attach` in the VM in the background and waits for the
/// device it prints. Its stdout and stderr go to /tmp/NAME.out and .err.
pub fn attach(vm: &Vm, url: &str, name: &str, flags: &str) -> String {
    ok(
        vm,
        &format!(
            "nohup isoe attach {url} --name {name} {flags} >/tmp/{name}.out 2>/tmp/{name}.err \
             </dev/null & echo $! >/tmp/{name}.pid"
        ),
    );
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        let out = vm.ssh(&format!("cat /tmp/{name}.out"));
        if let Some(dev) = out.stdout.lines().next().filter(|l| l.starts_with("/dev/")) {
            return dev.to_owned();
        }
        let alive = vm.ssh(&format!("kill -0 $(cat /tmp/{name}.pid)")).success();
        assert!(
            alive && Instant::now() < deadline,
            "isoe attach {url} {flags} printed no device (running: {alive}):\n{}",
            vm.ssh(&format!("cat /tmp/{name}.err")).stdout
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `isoe detach NAME`; the attach process exits 0 and the device is gone.
pub fn detach(vm: &Vm, name: &str, dev: &str) {
    let out = vm.ssh(&format!("isoe detach {name}"));
    assert!(out.success(), "isoe detach {name}:\n{}", out.describe());
    let err = ok(vm, &format!("cat /tmp/{name}.err"));
    assert!(
        err.contains("detached"),
        "the attach says it detached:\n{err}"
    );
    let gone = ok(
        vm,
        &format!("for i in $(seq 50); do [ -b {dev} ] && [ -s /sys/block/$(basename {dev})/size ] && [ $(cat /sys/block/$(basename {dev})/size) != 0 ] || break; sleep 0.2; done; cat /sys/block/$(basename {dev})/size 2>/dev/null || echo gone"),
    );
    assert!(
        gone.trim() == "gone" || gone.trim() == "0",
        "{dev} is still there after detach: {gone}"
    );
}

/// Waits for the VM process whose PID is in `pid_file` to end (its exit
/// status is not ours to collect: the caller checks its output).
pub fn wait_for_exit(vm: &Vm, pid_file: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let out = vm.ssh(&format!("kill -0 $(cat {pid_file}) 2>/dev/null"));
        if !out.success() {
            return;
        }
        assert!(Instant::now() < deadline, "{pid_file}'s process still runs");
        std::thread::sleep(Duration::from_secs(2));
    }
}
