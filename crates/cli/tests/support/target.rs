//! `isoe target` as a child process on an ephemeral port.
//!
//! [`Target`] owns the process: it is stopped on Drop (SIGTERM, a grace
//! period, then SIGKILL) so that a failing test leaves nothing behind, and
//! its stdout and stderr are kept in memory and printed when the test
//! panics, to show what the target said.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The embedded default target's name (`isoe target` with no config).
pub const DEFAULT_TARGET: &str = "iqn.2026-11.io.isoe:target0";

/// How long a target may take to print its portal.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a target may take to exit after SIGTERM (it syncs its stores).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A configuration file in its own temporary directory; LUN files named with
/// relative paths live next to it and outlive any number of target restarts.
pub struct TargetConfig {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl TargetConfig {
    /// Writes `toml` as `target.toml` in a new temporary directory.
    pub fn new(toml: &str) -> TargetConfig {
        let dir = tempfile::Builder::new()
            .prefix("isoe-test-")
            .tempdir()
            .expect("create a temporary directory");
        let path = dir.path().join("target.toml");
        std::fs::write(&path, toml).expect("write the target configuration");
        TargetConfig { dir, path }
    }

    /// The default target's name with LUN 0 a memory store of `size` ("256MiB").
    pub fn memory_lun(size: &str) -> TargetConfig {
        TargetConfig::memory_lun_with(size, "")
    }

    /// As [`TargetConfig::memory_lun`], with more keys (`key = value` lines)
    /// in the LUN's table.
    pub fn memory_lun_with(size: &str, lun_keys: &str) -> TargetConfig {
        TargetConfig::new(&format!(
            "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"{size}\"\n{lun_keys}"
        ))
    }

    /// The default target's name with LUN 0 an RBD image, `store_keys`
    /// naming it ([`super::ceph::Ceph::lun_keys`]), and `lun_keys`.
    pub fn rbd_lun_with(store_keys: &str, lun_keys: &str) -> TargetConfig {
        TargetConfig::new(&format!(
            "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n[[target.lun]]\nnumber = 0\n{store_keys}{lun_keys}"
        ))
    }

    /// The default target's name with LUN 0 a file store `lun0.img` of `size`
    /// in the configuration's directory (see [`TargetConfig::lun_file`]).
    pub fn file_lun(size: &str) -> TargetConfig {
        TargetConfig::new(&format!(
            "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n[[target.lun]]\nnumber = 0\nfile = \"lun0.img\"\nsize = \"{size}\"\n"
        ))
    }

    /// The configuration file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding the configuration.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The backing file of [`TargetConfig::file_lun`].
    pub fn lun_file(&self) -> PathBuf {
        self.dir.path().join("lun0.img")
    }
}

/// A running `isoe target`, stopped on Drop.
pub struct Target {
    child: Option<Child>,
    addr: SocketAddr,
    /// Every portal, `addr` first.
    addrs: Vec<SocketAddr>,
    /// The `--listen` portals; none: the configuration's own.
    portals: Vec<String>,
    /// How many "listening on" lines to wait for.
    expected: usize,
    config: Option<PathBuf>,
    output: Arc<Mutex<String>>,
    /// The open-files limit the target runs with, when a test sets one.
    open_files: Option<u64>,
    /// Environment variables the target runs with besides the test's own
    /// (less `RUST_LOG`, which only a test that sets it here passes on).
    env: Vec<(String, String)>,
}

impl Target {
    /// The embedded default target: `iqn.2026-11.io.isoe:target0`, LUN 0 = 1 GiB memory.
    pub fn start() -> Target {
        Target::launch(None, &["127.0.0.1:0"])
    }

    /// A target serving `config` (its portals are replaced by an ephemeral one).
    pub fn with_config(config: &TargetConfig) -> Target {
        Target::launch(Some(config.path().to_path_buf()), &["127.0.0.1:0"])
    }

    /// A target serving `config` on each of `portals` (e.g. `127.0.0.2:0`),
    /// as multipath tests need.
    pub fn with_config_on(config: &TargetConfig, portals: &[&str]) -> Target {
        Target::launch(Some(config.path().to_path_buf()), portals)
    }

    /// A target serving `config` on the portals the configuration itself
    /// names (no `--listen`), `count` of them, as portal group tests and
    /// tests of portals changed at run time need. [`Target::addrs`] lists
    /// them in the configuration's order.
    pub fn with_config_portals(config: &TargetConfig, count: usize) -> Target {
        let output = Arc::new(Mutex::new(String::new()));
        let config = Some(config.path().to_path_buf());
        let (child, addrs) = spawn(config.as_deref(), &[], count, &output, None, &[]);
        Target {
            child: Some(child),
            addr: addrs[0],
            addrs,
            portals: Vec::new(),
            expected: count,
            config,
            output,
            open_files: None,
            env: Vec::new(),
        }
    }

    /// Sends `signal` (SIGHUP, say) to the running target.
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid() {
            send_signal(pid as libc::pid_t, signal);
        }
    }

    /// A target serving `config` with its open-files limit (RLIMIT_NOFILE)
    /// set to `open_files`, as a test of running out of descriptors needs.
    pub fn with_config_and_open_files(config: &TargetConfig, open_files: u64) -> Target {
        Target::launch_with(
            Some(config.path().to_path_buf()),
            &["127.0.0.1:0"],
            Some(open_files),
            Vec::new(),
        )
    }

    /// A target serving `config` with `env` added to its environment
    /// (`RUST_LOG`, for the tests of its log).
    pub fn with_config_and_env(config: &TargetConfig, env: &[(&str, &str)]) -> Target {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Target::launch_with(
            Some(config.path().to_path_buf()),
            &["127.0.0.1:0"],
            None,
            env,
        )
    }

    fn launch(config: Option<PathBuf>, portals: &[&str]) -> Target {
        Target::launch_with(config, portals, None, Vec::new())
    }

    fn launch_with(
        config: Option<PathBuf>,
        portals: &[&str],
        open_files: Option<u64>,
        env: Vec<(String, String)>,
    ) -> Target {
        let output = Arc::new(Mutex::new(String::new()));
        let portals: Vec<String> = portals.iter().map(|p| p.to_string()).collect();
        let expected = portals.len();
        let (child, addrs) = spawn(
            config.as_deref(),
            &portals,
            expected,
            &output,
            open_files,
            &env,
        );
        Target {
            child: Some(child),
            addr: addrs[0],
            addrs,
            portals,
            expected,
            config,
            output,
            open_files,
            env,
        }
    }

    /// `iscsi://ADDR/TARGET/LUN` for every portal, in the order given.
    pub fn lun_urls(&self, target: &str, lun: u16) -> Vec<String> {
        self.addrs
            .iter()
            .map(|addr| format!("iscsi://{addr}/{target}/{lun}"))
            .collect()
    }

    /// Every portal the target listens on, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The portal the target listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `iscsi://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("iscsi://{}", self.addr)
    }

    /// `iscsi://127.0.0.1:PORT/TARGET/LUN`, the URL form of libiscsi's tools.
    pub fn lun_url(&self, target: &str, lun: u16) -> String {
        format!("iscsi://{}/{target}/{lun}", self.addr)
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Panics, with the target's output, if the process has exited.
    pub fn assert_running(&mut self, context: &str) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "isoe target exited ({status}) {context}; its output:\n{}",
                    self.output()
                );
            }
        } else {
            panic!("isoe target is not running {context}");
        }
    }

    /// Everything the target printed on stdout and stderr so far.
    pub fn output(&self) -> String {
        self.output.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits up to 20 s for the target to print `text`; panics with its
    /// output if it never does.
    pub fn wait_for_output(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.output().contains(text) {
            assert!(
                std::time::Instant::now() < deadline,
                "the target never said {text:?}; its output:\n{}",
                self.output()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// SIGTERM, then waits (SIGKILL after a grace period). Returns the exit
    /// status, or None if the process was already stopped.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let pid = child.id() as libc::pid_t;
        send_signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let status = child.wait().ok();
        if let Ok(mut out) = self.output.lock() {
            out.push_str("\n[test support: target ignored SIGTERM and was killed]\n");
        }
        status
    }

    /// Stops the target and asserts it exited cleanly (status 0 after SIGTERM).
    pub fn stop_cleanly(&mut self) {
        let status = self.stop().expect("the target was running");
        assert!(
            status.success(),
            "isoe target exited with {status} after SIGTERM; its output:\n{}",
            self.output()
        );
    }

    /// SIGKILL: no chance to sync or clean up, like a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the target (cleanly, if it runs) and starts it again with the
    /// same configuration, on a new ephemeral port.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop_cleanly();
        }
        self.start_again();
    }

    /// Starts a stopped (or killed) target again with the same configuration.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "start_again on a running target");
        let (child, addrs) = spawn(
            self.config.as_deref(),
            &self.portals,
            self.expected,
            &self.output,
            self.open_files,
            &self.env,
        );
        self.child = Some(child);
        self.addr = addrs[0];
        self.addrs = addrs;
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop();
        if thread::panicking() {
            eprintln!(
                "---- isoe target output ({}) ----\n{}---- end of target output ----",
                self.addr,
                self.output()
            );
        }
    }
}

/// kill(2): the one `unsafe` call of the tests; std can only SIGKILL.
/// Only for a child the caller spawned and has not reaped.
pub fn send_signal(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own,
    // not yet reaped child, so it cannot name an unrelated process.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Starts the binary with a `--listen` per portal of `portals` and waits
/// for `expected` "listening on" lines.
fn spawn(
    config: Option<&Path>,
    portals: &[String],
    expected: usize,
    output: &Arc<Mutex<String>>,
    open_files: Option<u64>,
    env: &[(String, String)],
) -> (Child, Vec<SocketAddr>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_isoe"));
    command.arg("target");
    // The log's level is the configuration's unless the test says otherwise,
    // whatever RUST_LOG the tests run with.
    command.env_remove("RUST_LOG");
    command.envs(env.iter().map(|(k, v)| (k, v)));
    // An empty portal stands for one of the file's own (no --listen).
    for portal in portals.iter().filter(|p| !p.is_empty()) {
        command.arg("--listen").arg(portal);
    }
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(limit) = open_files {
        use std::os::unix::process::CommandExt;
        let rlimit = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: setrlimit is async-signal-safe, and the closure touches
        // nothing but its own copy of `rlimit`.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    let mut child = command.spawn().expect("spawn isoe target");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");

    let (tx, rx) = mpsc::channel::<SocketAddr>();
    let out = output.clone();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line
                .strip_prefix("isoe target: listening on ")
                .and_then(|a| a.trim().parse().ok())
            {
                let _ = tx.send(addr);
            }
            if let Ok(mut o) = out.lock() {
                o.push_str(&line);
                o.push('\n');
            }
        }
    });
    let err = output.clone();
    thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut chunk = [0u8; 4096];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut o) = err.lock() {
                o.push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        }
    });

    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let mut addrs = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(addr) => {
                addrs.push(addr);
                if addrs.len() == expected {
                    return (child, addrs);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            thread::sleep(Duration::from_millis(100)); // let the readers drain
            panic!(
                "isoe target exited ({status}) before listening; its output:\n{}",
                output.lock().unwrap()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("isoe target printed no 'listening on' line within {STARTUP_TIMEOUT:?}; its output:\n{}", output.lock().unwrap());
        }
    }
}
