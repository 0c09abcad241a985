//! tgt, Debian's userspace iSCSI target, as a peer for interoperability tests.
//!
//! [`Tgt::start_or_skip`] runs a private `tgtd -f` in its own process group:
//! its own iSCSI port on 127.0.0.1 and its own control port (the
//! `/var/run/tgtd/socket.N` that `tgtadm -C N` talks to), both distinct per
//! instance so tests run in parallel, and a sparse backing file in its own
//! temporary directory. It serves [`TGT_IQN`] with LUN [`TGT_LUN`] to every
//! initiator. On Drop it is stopped by its PID: tgtd ignores SIGTERM, so
//! first `tgtadm --op delete --mode system`, then SIGTERM, then SIGKILL; its
//! control socket files and the directory go with it.
//!
//! tgtd needs root. Without root or without tgtd the tests are skipped with
//! a printed reason, unless the environment variable CI is set: CI installs
//! tgt (.ci/run) and runs as root, so there a missing tgtd fails the test.

use super::ci;
use super::tools::{run_program, ToolOutput};
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The target tgt serves.
pub const TGT_IQN: &str = "iqn.2026-11.test:isoe-interop";
/// The LUN of its disk (tgt's LUN 0 is its controller).
pub const TGT_LUN: u16 = 1;

/// Where tgtd keeps its control sockets.
const SOCKET_DIR: &str = "/var/run/tgtd";
/// How long tgtd may take to answer tgtadm after it starts.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one tgtadm call may take.
const TGTADM_TIMEOUT: Duration = Duration::from_secs(10);
/// How long tgtd may take to exit after each way of asking it to.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// Fresh ports to try when the chosen ones turn out to be taken.
const START_ATTEMPTS: u32 = 5;
/// Control ports are chosen in this range (tgtd keeps the port in a C short).
const CONTROL_PORT_MIN: u32 = 20_000;
const CONTROL_PORT_SPAN: u32 = 12_000;

/// A running private tgtd, stopped on Drop.
pub struct Tgt {
    child: Option<Child>,
    port: u16,
    control_port: u16,
    dir: tempfile::TempDir,
    tgtadm: PathBuf,
}

/// Why a start attempt failed in a way new ports may cure.
enum Retry {
    /// Another tgtd holds the control port.
    ControlPort,
    /// Something else bound the iSCSI port first.
    Portal(String),
}

impl Tgt {
    /// Starts tgtd with a LUN of `size_bytes`, or prints why tgt tests cannot
    /// run here and returns None (only outside CI: see the module docs).
    pub fn start_or_skip(test: &str, size_bytes: u64) -> Option<Tgt> {
        match programs() {
            Ok((tgtd, tgtadm)) => Some(Tgt::start(&tgtd, &tgtadm, size_bytes)),
            Err(why) if ci() => panic!("{test}: tgt interoperability cannot run in CI: {why}"),
            Err(why) => {
                // Straight to fd 2: the test harness captures eprintln! of passing tests.
                let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
                None
            }
        }
    }

    fn start(tgtd: &Path, tgtadm: &Path, size_bytes: u64) -> Tgt {
        let dir = tempfile::Builder::new()
            .prefix("isoe-tgt-")
            .tempdir()
            .expect("create a temporary directory");
        let backing = dir.path().join("lun1.img");
        File::create(&backing)
            .and_then(|f| f.set_len(size_bytes))
            .expect("create the sparse backing file");
        let mut tgt = Tgt {
            child: None,
            port: 0,
            control_port: 0,
            dir,
            tgtadm: tgtadm.to_path_buf(),
        };
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match tgt.launch(tgtd) {
                Ok(()) => {
                    tgt.configure(&backing);
                    return tgt;
                }
                Err(Retry::ControlPort) => failures.push(format!(
                    "control port {} is another tgtd's",
                    tgt.control_port
                )),
                Err(Retry::Portal(portals)) => failures.push(format!(
                    "port {} was taken; tgtd listed the portals {portals:?}",
                    tgt.port
                )),
            }
        }
        panic!("tgtd did not start in {START_ATTEMPTS} attempts: {failures:?}");
    }

    /// One attempt on fresh ports; on a retryable failure tgtd is stopped again.
    fn launch(&mut self, tgtd: &Path) -> Result<(), Retry> {
        self.port = free_port();
        self.control_port = control_port();
        let log = File::create(self.log_path()).expect("create the tgtd log");
        let child = Command::new(tgtd)
            .arg("-f")
            .arg("--control-port")
            .arg(self.control_port.to_string())
            .arg("--iscsi")
            .arg(format!("portal=127.0.0.1:{}", self.port))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("duplicate the log file"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", tgtd.display()));
        self.child = Some(child);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let log = self.log();
                if log.contains("another tgtd is using") {
                    return Err(Retry::ControlPort);
                }
                panic!("tgtd exited ({status}) before it answered tgtadm; its log:\n{log}");
            }
            if self
                .try_tgtadm(&["--mode", "target", "--op", "show"])
                .success()
            {
                break;
            }
            if Instant::now() > deadline {
                panic!(
                    "tgtd did not answer tgtadm within {STARTUP_TIMEOUT:?}; its log:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
        // tgtd that cannot bind its portal falls back to 0.0.0.0:3260: accept
        // exactly our loopback portal and nothing else.
        let portals = self.tgtadm(&["--mode", "portal", "--op", "show"]).stdout;
        let listed: Vec<&str> = portals.lines().map(str::trim).collect();
        if listed != [format!("Portal: 127.0.0.1:{},1", self.port)] {
            self.stop();
            return Err(Retry::Portal(portals));
        }
        Ok(())
    }

    fn configure(&self, backing: &Path) {
        self.tgtadm(&[
            "--mode",
            "target",
            "--op",
            "new",
            "--tid",
            "1",
            "--targetname",
            TGT_IQN,
        ]);
        let backing = backing.to_str().expect("a UTF-8 temporary path");
        self.tgtadm(&[
            "--mode",
            "logicalunit",
            "--op",
            "new",
            "--tid",
            "1",
            "--lun",
            &TGT_LUN.to_string(),
            "--bstype",
            "rdwr",
            "--backing-store",
            backing,
        ]);
        self.tgtadm(&[
            "--mode",
            "target",
            "--op",
            "bind",
            "--tid",
            "1",
            "--initiator-address",
            "ALL",
        ]);
    }

    /// Requires CHAP: the initiator must log in as `user` with `secret`.
    pub fn add_chap_account(&self, user: &str, secret: &str) {
        self.new_account(user, secret);
        self.tgtadm(&[
            "--mode", "account", "--op", "bind", "--tid", "1", "--user", user,
        ]);
    }

    /// Mutual CHAP: tgt proves itself to the initiator as `user` with `secret`.
    pub fn add_outgoing_account(&self, user: &str, secret: &str) {
        self.new_account(user, secret);
        self.tgtadm(&[
            "--mode",
            "account",
            "--op",
            "bind",
            "--tid",
            "1",
            "--user",
            user,
            "--outgoing",
        ]);
    }

    fn new_account(&self, user: &str, secret: &str) {
        self.tgtadm(&[
            "--mode",
            "account",
            "--op",
            "new",
            "--user",
            user,
            "--password",
            secret,
        ]);
    }

    /// Runs `tgtadm -C PORT --lld iscsi args...` and panics, with tgtd's log, if it fails.
    pub fn tgtadm(&self, args: &[&str]) -> ToolOutput {
        let out = self.try_tgtadm(args);
        assert!(
            out.success(),
            "tgtadm {args:?} failed:\n{}\n--- tgtd log ---\n{}",
            out.describe(),
            self.log()
        );
        out
    }

    fn try_tgtadm(&self, args: &[&str]) -> ToolOutput {
        let control = self.control_port.to_string();
        let mut all = vec!["-C", control.as_str(), "--lld", "iscsi"];
        all.extend_from_slice(args);
        run_program(&self.tgtadm, &all, &[], TGTADM_TIMEOUT)
    }

    /// `127.0.0.1:PORT`.
    pub fn portal(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `iscsi://127.0.0.1:PORT/IQN/1`.
    pub fn lun_url(&self) -> String {
        format!("iscsi://{}/{TGT_IQN}/{TGT_LUN}", self.portal())
    }

    /// `iscsi://USER%SECRET@127.0.0.1:PORT/IQN/1`.
    pub fn lun_url_with_chap(&self, user: &str, secret: &str) -> String {
        format!(
            "iscsi://{user}%{secret}@{}/{TGT_IQN}/{TGT_LUN}",
            self.portal()
        )
    }

    /// `iscsi://127.0.0.1:PORT/IQN`, no LUN.
    pub fn target_url(&self) -> String {
        format!("iscsi://{}/{TGT_IQN}", self.portal())
    }

    /// The file behind LUN 1.
    pub fn backing_file(&self) -> PathBuf {
        self.dir.path().join("lun1.img")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("tgtd.log")
    }

    /// What tgtd printed so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(self.log_path()) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Stops tgtd by its PID and removes its control socket files.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            // tgtd's SIGTERM handler does nothing: ask it over its control
            // socket, the way tgt's init script does (it exits only once it
            // serves no target).
            for args in [
                &[
                    "--mode", "sys", "--op", "update", "--name", "State", "-v", "offline",
                ][..],
                &[
                    "--mode", "target", "--op", "delete", "--force", "--tid", "1",
                ],
                &["--mode", "system", "--op", "delete"],
            ] {
                let _ = self.try_tgtadm(args);
            }
            if !exited_within(&mut child, EXIT_GRACE) {
                send_signal(child.id(), libc::SIGTERM);
                if !exited_within(&mut child, Duration::from_secs(1)) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        // Files of the control port this tgtd owned (tgtd leaves them behind).
        for suffix in ["", ".lock"] {
            let _ =
                std::fs::remove_file(format!("{SOCKET_DIR}/socket.{}{suffix}", self.control_port));
        }
    }
}

impl Drop for Tgt {
    fn drop(&mut self) {
        // Stopped first: tgtd's stdio buffers its log until it exits.
        self.stop();
        if thread::panicking() {
            eprintln!(
                "---- tgtd log (port {}, control port {}) ----\n{}---- end of tgtd log ----",
                self.port,
                self.control_port,
                self.log()
            );
        }
    }
}

fn exited_within(child: &mut Child, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(_) => return false,
        }
    }
    false
}

/// tgtd and tgtadm, or why the tests cannot use them.
fn programs() -> Result<(PathBuf, PathBuf), String> {
    let tgtd = find("tgtd").ok_or(
        "tgtd is not installed (Debian package tgt: `apt-get install -y tgt`; .ci/run installs it)",
    )?;
    let tgtadm = find("tgtadm").ok_or("tgtadm is not installed (Debian package tgt)")?;
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("tgtd needs root (run the tests as root)".into());
    }
    Ok((tgtd, tgtadm))
}

/// `name` in PATH, or in the sbin directories a non-root PATH may lack.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A port the kernel just had free on 127.0.0.1 (tgtd binds it a moment
/// later; [`Tgt::launch`] checks that it got it).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("its address").port()
}

/// A control port distinct per process and per call: tests in one binary
/// run in parallel, and several test binaries may run at once.
fn control_port() -> u16 {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mix = std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(nanos)
        .wrapping_add(call.wrapping_mul(7919));
    u16::try_from(CONTROL_PORT_MIN + mix % CONTROL_PORT_SPAN).expect("below 32768")
}

/// kill(2) on our own child.
fn send_signal(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own,
    // not yet reaped child, so it cannot name an unrelated process.
    unsafe {
        libc::kill(pid, signal);
    }
}
