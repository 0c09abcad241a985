//! The test bed's virtual machine: `scripts/vm` boots the Debian image
//! `scripts/vm-image` builds, for what needs a real kernel (the
//! Linux iSCSI initiator, LIO). [`Vm`] owns it and powers it off on Drop, so
//! a failing test leaves no QEMU behind.
//!
//! Outside CI, a machine without root, QEMU or debootstrap skips these tests
//! with a printed reason; with CI set they fail instead (CI installs them).

use super::ci;
use super::tools::{run_program, ToolOutput};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Building the image (once, then cached) and booting it under TCG.
const START_TIMEOUT: Duration = Duration::from_secs(900);
/// The longest one command in the VM may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// A booted VM, powered off on Drop.
pub struct Vm {
    dir: tempfile::TempDir,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

/// Why this machine cannot run the VM, if it cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (debootstrap needs it)".into());
    }
    ["qemu-system-x86_64", "qemu-img", "debootstrap"]
        .into_iter()
        .find(|tool| {
            !["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
                .iter()
                .any(|dir| Path::new(dir).join(tool).exists())
        })
        .map(|tool| {
            format!(
                "{tool} is not installed (apt-get install qemu-system-x86 qemu-utils debootstrap)"
            )
        })
}

impl Vm {
    /// Boots a VM, or prints why it cannot here and returns None (only
    /// outside CI).
    pub fn start_or_skip(test: &str) -> Option<Vm> {
        Vm::start_on_kernel_or_skip(test, None)
    }

    /// [`Vm::start_or_skip`] on the image's kernel of series `kernel`
    /// ("6.12"), or on its default (the newest) for None.
    pub fn start_on_kernel_or_skip(test: &str, kernel: Option<&str>) -> Option<Vm> {
        if let Some(why) = missing() {
            assert!(!ci(), "{test}: the VM test bed cannot run in CI: {why}");
            // Straight to fd 2: the test harness captures eprintln! of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("isoe-vm-")
            .tempdir()
            .expect("create the VM's run directory");
        let vm = Vm { dir };
        let env: Vec<(&str, &str)> = kernel.map(|k| ("ISOE_VM_KERNEL", k)).into_iter().collect();
        let out = vm.script_with_env("start", &[], &env, START_TIMEOUT);
        assert!(
            out.success(),
            "scripts/vm start failed:\n{}",
            out.describe()
        );
        Some(vm)
    }

    fn script(&self, verb: &str, args: &[&str], timeout: Duration) -> ToolOutput {
        self.script_with_env(verb, args, &[], timeout)
    }

    fn script_with_env(
        &self,
        verb: &str,
        args: &[&str],
        env: &[(&str, &str)],
        timeout: Duration,
    ) -> ToolOutput {
        let run = self.dir.path().to_str().expect("a UTF-8 temporary path");
        let mut all = vec![script("vm").to_str().expect("a UTF-8 path").to_owned()];
        all.push(verb.into());
        all.push(run.into());
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run_program(Path::new("/bin/bash"), &all, env, timeout)
    }

    /// Runs `command` (a shell command line) in the VM as root.
    pub fn ssh(&self, command: &str) -> ToolOutput {
        self.script("ssh", &[command], COMMAND_TIMEOUT)
    }

    /// Copies the local file `from` to `to` in the VM (mode 0755), through
    /// SSH's standard input.
    pub fn copy_in(&self, from: &Path, to: &str) {
        let run = self.dir.path().to_str().expect("a UTF-8 temporary path");
        let file =
            std::fs::File::open(from).unwrap_or_else(|e| panic!("open {}: {e}", from.display()));
        let status = std::process::Command::new("/bin/bash")
            .arg(script("vm"))
            .args([
                "ssh",
                run,
                &format!("cat > {to}.part && chmod 755 {to}.part && mv {to}.part {to}"),
            ])
            .stdin(file)
            .status()
            .expect("run scripts/vm ssh");
        assert!(
            status.success(),
            "copying {} into the VM failed",
            from.display()
        );
    }

    /// The host's loopback port that reaches the VM's port 3260.
    pub fn iscsi_port(&self) -> u16 {
        std::fs::read_to_string(self.dir.path().join("iscsi-port"))
            .expect("scripts/vm wrote iscsi-port")
            .trim()
            .parse()
            .expect("a port number")
    }

    /// The VM's SSH server as a lab host URL (`ssh://root@127.0.0.1:PORT`).
    pub fn ssh_url(&self) -> String {
        let port = std::fs::read_to_string(self.dir.path().join("ssh-port"))
            .expect("scripts/vm wrote ssh-port");
        format!("ssh://root@127.0.0.1:{}", port.trim())
    }

    /// The private key root logs in with.
    pub fn key(&self) -> PathBuf {
        let image =
            std::fs::read_to_string(self.dir.path().join("image")).expect("scripts/vm wrote image");
        Path::new(image.trim()).join("id_ed25519")
    }

    /// A directory for files that live as long as the VM.
    pub fn run_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Pulls the plug: SIGKILL to QEMU (by the PID it wrote), as a machine
    /// that dies or drops off the network would look to the lab.
    pub fn power_off(&self) {
        let pid = std::fs::read_to_string(self.dir.path().join("qemu.pid"))
            .expect("scripts/vm wrote qemu.pid");
        let pid: libc::pid_t = pid.trim().parse().expect("a PID");
        // SAFETY: kill(2) on the QEMU this VM's scripts/vm started, by its PID.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    /// The series of the kernel it booted ("6.18", "6.12").
    pub fn kernel(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kernel"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// How the VM runs: "tcg" or "kvm".
    pub fn accel(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("accel"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        let out = self.script("stop", &[], Duration::from_secs(60));
        if !out.success() {
            let _ = writeln!(std::io::stderr(), "scripts/vm stop:\n{}", out.describe());
        }
    }
}
