//! tgt, the userspace iSCSI target of Linux distributions, as the lab's
//! target (the `target = "tgt"` knob).
//!
//! [`TgtTarget::start`] runs a private `tgtd -f` inside the topology's target
//! namespace, listening on every portal of the topology and on a control
//! port of its own (`tgtd --control-port N`, `tgtadm -C N`), so that it
//! never meets the machine's own tgtd or another lab's. It serves
//! [`TARGET_IQN`] (every lab run's) with LUN [`TGT_LUN`] backed by a sparse
//! file of the plan's LUN size in a private directory (on /dev/shm when there is
//! one, so that, like the isoe target's memory LUN, only what is written
//! costs memory and no disk is in the path), accepts every initiator, and
//! takes the case's iSCSI parameters ([`params`]) with
//! `tgtadm --op update` before any initiator logs in.
//!
//! tgt's quirks, each handled here:
//!
//! - **LUN 0 is tgt's controller**; the data LUN is 1.
//! - **tgtd ignores SIGTERM.** Stopping takes `tgtadm` (state offline,
//!   target deleted, `--mode system --op delete`), then SIGKILL if it is
//!   still there; only the PID of the tgtd we started is signalled.
//! - **A portal tgtd cannot bind is not an error to it**: it falls back to
//!   0.0.0.0:3260. The portals it lists must be exactly the topology's.
//! - **Its control socket files stay behind** (`/var/run/tgtd/socket.N`,
//!   `socket.N.lock`): they are removed once our tgtd is gone, and only
//!   for a control port our tgtd held (one that found the port taken exits
//!   with "another tgtd is using", and another port is tried).
//! - **The first command of each new session gets UNIT ATTENTION**;
//!   `isoe bench` repeats it.
//!
//! Dropping a [`TgtTarget`] leaves nothing: no process, no socket file, no
//! backing file. A lab killed outright leaves its directory (named after
//! the lab's PID) with tgtd's PID and control port in it; the next
//! [`TgtTarget::start`] stops such a tgtd and removes what it left.

use crate::knobs::KnobSet;
use crate::run::TARGET_IQN;
use crate::topology::{Role, Topology};
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The LUN of tgt's disk (its LUN 0 is the controller).
pub const TGT_LUN: u16 = 1;
/// Where tgtd keeps its control sockets.
pub const SOCKET_DIR: &str = "/var/run/tgtd";
/// The start of every state directory's name (`isoe-lab-tgt-<PID>-<n>`).
pub const STATE_PREFIX: &str = "isoe-lab-tgt-";

/// tgtd's target id for the one target.
const TID: &str = "1";
/// How long tgtd may take to answer tgtadm after it starts.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one tgtadm call may take.
const TGTADM_TIMEOUT: Duration = Duration::from_secs(10);
/// How long tgtd may take to exit once asked over its control port.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// Control ports to try when the chosen one is another tgtd's.
const START_ATTEMPTS: u32 = 5;
/// Control ports are chosen in 32000..32767: tgtd keeps the port in a C
/// short, and isoe's own tgt tests choose below 32000.
const CONTROL_PORT_MIN: u32 = 32_000;
const CONTROL_PORT_SPAN: u32 = 767;

/// Why tgt could not be started or configured.
#[derive(Debug, thiserror::Error)]
pub enum TgtError {
    /// tgt cannot run here ([`programs`]).
    #[error("tgt: {0}")]
    Unavailable(#[from] TgtUnavailable),
    /// A tgtadm command failed.
    #[error("tgt: {0}")]
    Tgtadm(#[from] TgtadmError),
    /// Its state directory could not be made.
    #[error("tgt: its state directory: {0}")]
    StateDir(#[source] std::io::Error),
    /// The LUN's sparse backing file could not be made.
    #[error("tgt: sparse backing file {}: {source}", path.display())]
    Backing {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A directory or file of tgtd's (its socket directory, its log).
    #[error("tgt: {}: {source}", path.display())]
    File {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Every control port tried was held by another tgtd.
    #[error("tgt: every control port tried was another tgtd's: {0:?}")]
    ControlPortsTaken(Vec<u16>),
    /// tgtd could not be started.
    #[error("tgt: cannot start {}: {source}", tgtd.display())]
    Start {
        /// The program.
        tgtd: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// tgtd ended before it answered.
    #[error("tgt: tgtd exited ({status}) before it answered tgtadm; its log:\n{log}")]
    Exited {
        /// How it ended.
        status: std::process::ExitStatus,
        /// What it printed.
        log: String,
    },
    /// tgtd did not answer in time.
    #[error(
        "tgt: tgtd did not answer tgtadm on control port {control_port} within {} s; its log:\n{log}",
        STARTUP_TIMEOUT.as_secs()
    )]
    NoAnswer {
        /// Its control port.
        control_port: u16,
        /// What it printed.
        log: String,
    },
    /// tgtd listens elsewhere than on the topology's portals.
    #[error(
        "tgt: tgtd listens on {listed:?}, not on the topology's portals {wanted:?} \
         (a portal it cannot bind makes it fall back to 0.0.0.0:3260)"
    )]
    Portals {
        /// Where it listens.
        listed: Vec<String>,
        /// The topology's portals.
        wanted: Vec<String>,
    },
    /// tgtadm takes the backing file's path as text.
    #[error("tgt: {} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// tgtadm refused a parameter.
    #[error("tgt: setting {name}={value}: {source}")]
    Setting {
        /// The parameter.
        name: String,
        /// Its value.
        value: String,
        /// What tgtadm said.
        source: TgtadmError,
    },
    /// tgtadm accepted parameters its target does not show.
    #[error("tgt: tgtd did not take {}; its target shows:\n{shown}", .wrong.join(", "))]
    NotTaken {
        /// The parameters, `name=value`.
        wrong: Vec<String>,
        /// What it shows.
        shown: String,
    },
}

/// Why the lab cannot run tgt here ([`programs`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TgtUnavailable {
    /// No tgtd.
    #[error("tgtd is not installed (Debian package tgt: `apt-get install -y tgt`)")]
    NoTgtd,
    /// No tgtadm.
    #[error("tgtadm is not installed (Debian package tgt)")]
    NoTgtadm,
    /// Not root.
    #[error("tgtd needs root")]
    NotRoot,
}

/// A tgtadm command that could not run, failed, or did not answer.
#[derive(Debug, thiserror::Error)]
pub enum TgtadmError {
    /// It could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It exited with an error.
    #[error("tgtadm -C {control_port} --lld iscsi {args}: {status}: {said}")]
    Failed {
        /// Its control port.
        control_port: u16,
        /// Its other arguments, as typed.
        args: String,
        /// How it ended.
        status: std::process::ExitStatus,
        /// Its stderr and stdout.
        said: String,
    },
    /// It did not answer within [`TGTADM_TIMEOUT`].
    #[error(
        "tgtadm -C {control_port} --lld iscsi {args}: no answer within {} s",
        TGTADM_TIMEOUT.as_secs()
    )]
    NoAnswer {
        /// Its control port.
        control_port: u16,
        /// Its other arguments, as typed.
        args: String,
    },
}

/// The programs tgt needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TgtPrograms {
    /// The daemon.
    pub tgtd: PathBuf,
    /// Its administration tool.
    pub tgtadm: PathBuf,
}

/// tgtd and tgtadm, or why the lab cannot run tgt here (not installed, or
/// not root: tgtd needs root, and so do the lab's namespaces).
pub fn programs() -> Result<TgtPrograms, TgtUnavailable> {
    let tgtd = crate::netcmd::find_program("tgtd").ok_or(TgtUnavailable::NoTgtd)?;
    let tgtadm = crate::netcmd::find_program("tgtadm").ok_or(TgtUnavailable::NoTgtadm)?;
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(TgtUnavailable::NotRoot);
    }
    Ok(TgtPrograms { tgtd, tgtadm })
}

/// A private tgtd in a topology's target namespace; stopped on Drop.
#[derive(Debug)]
pub struct TgtTarget {
    child: Option<Child>,
    pid: u32,
    control_port: u16,
    /// Our tgtd held the control port, so its socket files are ours to remove.
    owns_control_port: bool,
    portals: Vec<String>,
    dir: PathBuf,
    tgtadm: PathBuf,
}

impl TgtTarget {
    /// Starts tgtd in `topo`'s target namespace on all its portals, with
    /// [`TARGET_IQN`], LUN [`TGT_LUN`] of `lun_bytes` and `knobs`' iSCSI
    /// parameters. On error nothing is left running.
    pub fn start(topo: &Topology, knobs: &KnobSet, lun_bytes: u64) -> Result<TgtTarget, TgtError> {
        let programs = programs()?;
        cleanup_stale();
        let dir = state_dir().map_err(TgtError::StateDir)?;
        let mut tgt = TgtTarget {
            child: None,
            pid: 0,
            control_port: 0,
            owns_control_port: false,
            portals: topo.portals().iter().map(ToString::to_string).collect(),
            dir,
            tgtadm: programs.tgtadm,
        };
        // On any error below, `tgt` drops: tgtd stopped, files removed.
        let backing = tgt.backing_file();
        File::create(&backing)
            .and_then(|f| f.set_len(lun_bytes))
            .map_err(|source| TgtError::Backing {
                path: backing.clone(),
                source,
            })?;
        fs::create_dir_all(SOCKET_DIR).map_err(|source| TgtError::File {
            path: PathBuf::from(SOCKET_DIR),
            source,
        })?;
        let mut taken = Vec::new();
        loop {
            match tgt.launch(topo, &programs.tgtd)? {
                Launch::Ready => break,
                Launch::ControlPortTaken if taken.len() + 1 < START_ATTEMPTS as usize => {
                    taken.push(tgt.control_port);
                }
                Launch::ControlPortTaken => {
                    taken.push(tgt.control_port);
                    return Err(TgtError::ControlPortsTaken(taken));
                }
            }
        }
        tgt.check_portals()?;
        tgt.configure(&backing, knobs)?;
        Ok(tgt)
    }

    /// tgtd's PID (for its CPU time).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The portals it listens on, `ADDR:PORT`, the topology's order.
    pub fn portals(&self) -> &[String] {
        &self.portals
    }

    /// The LUN initiators should address: [`TGT_LUN`].
    pub fn lun(&self) -> u16 {
        TGT_LUN
    }

    /// Its control port (`tgtadm -C`).
    pub fn control_port(&self) -> u16 {
        self.control_port
    }

    /// Its control socket files.
    pub fn socket_files(&self) -> [PathBuf; 2] {
        socket_files(self.control_port)
    }

    /// The private directory (backing file, log, PID).
    pub fn state_dir(&self) -> &Path {
        &self.dir
    }

    /// The file behind LUN 1.
    pub fn backing_file(&self) -> PathBuf {
        self.dir.join("lun1.img")
    }

    /// What tgtd printed so far (its stdio is buffered: most of it appears
    /// only once it exits).
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(self.dir.join("tgtd.log")) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// `tgtadm -C PORT --lld iscsi ARGS...`: its stdout, or what went wrong.
    pub fn tgtadm(&self, args: &[&str]) -> Result<String, TgtadmError> {
        tgtadm(&self.tgtadm, self.control_port, args)
    }

    /// One attempt on a fresh control port.
    fn launch(&mut self, topo: &Topology, tgtd: &Path) -> Result<Launch, TgtError> {
        self.control_port = control_port();
        let log_path = self.dir.join("tgtd.log");
        let file_error = |source| TgtError::File {
            path: log_path.clone(),
            source,
        };
        let log = File::create(&log_path).map_err(file_error)?;
        let log2 = log.try_clone().map_err(file_error)?;
        let mut cmd = topo.command(Role::Target, tgtd);
        cmd.arg("-f")
            .arg("--control-port")
            .arg(self.control_port.to_string())
            .arg("--iscsi")
            .arg(portal_param(&self.portals))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            // Its own process group: a Ctrl-C at the terminal reaches the
            // lab, which stops tgtd in order, and not tgtd directly.
            .process_group(0);
        let child = cmd.spawn().map_err(|source| TgtError::Start {
            tgtd: tgtd.to_path_buf(),
            source,
        })?;
        // `ip netns exec` execs tgtd: the child's PID is tgtd's.
        self.pid = child.id();
        self.child = Some(child);
        let _ = fs::write(
            self.dir.join("tgtd.pid"),
            format!("{} {}\n", self.pid, self.control_port),
        );
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                let log = self.log();
                if log.contains("another tgtd is using") {
                    return Ok(Launch::ControlPortTaken);
                }
                return Err(TgtError::Exited { status, log });
            }
            if self.tgtadm(&["--mode", "target", "--op", "show"]).is_ok() {
                self.owns_control_port = true;
                return Ok(Launch::Ready);
            }
            if Instant::now() > deadline {
                // Whether it holds the port is unknown: leave its files.
                self.kill();
                return Err(TgtError::NoAnswer {
                    control_port: self.control_port,
                    log: self.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// tgtd that cannot bind a portal listens on 0.0.0.0:3260 instead:
    /// accept exactly the topology's portals.
    fn check_portals(&self) -> Result<(), TgtError> {
        let shown = self.tgtadm(&["--mode", "portal", "--op", "show"])?;
        let mut listed = listed_portals(&shown);
        let mut wanted = self.portals.clone();
        listed.sort();
        wanted.sort();
        if listed != wanted {
            return Err(TgtError::Portals { listed, wanted });
        }
        Ok(())
    }

    /// The target, its LUN, every initiator allowed, the case's parameters.
    fn configure(&self, backing: &Path, knobs: &KnobSet) -> Result<(), TgtError> {
        let backing = backing
            .to_str()
            .ok_or_else(|| TgtError::NotUtf8(backing.to_path_buf()))?;
        let lun = TGT_LUN.to_string();
        for args in [
            &[
                "--mode",
                "target",
                "--op",
                "new",
                "--tid",
                TID,
                "--targetname",
                TARGET_IQN,
            ][..],
            &[
                "--mode",
                "logicalunit",
                "--op",
                "new",
                "--tid",
                TID,
                "--lun",
                &lun,
                "--bstype",
                "rdwr",
                "--backing-store",
                backing,
            ],
            &[
                "--mode",
                "target",
                "--op",
                "bind",
                "--tid",
                TID,
                "--initiator-address",
                "ALL",
            ],
        ] {
            self.tgtadm(args)?;
        }
        let params = params(knobs);
        for (name, value) in &params {
            self.tgtadm(&[
                "--mode", "target", "--op", "update", "--tid", TID, "--name", name, "--value",
                value,
            ])
            .map_err(|source| TgtError::Setting {
                name: name.to_string(),
                value: value.to_string(),
                source,
            })?;
        }
        // tgtadm accepts some values it then does not keep: read them back.
        let shown = self.tgtadm(&["--mode", "target", "--op", "show", "--tid", TID])?;
        let wrong = params_not_shown(&params, &shown);
        if !wrong.is_empty() {
            return Err(TgtError::NotTaken { wrong, shown });
        }
        Ok(())
    }

    /// SIGKILL to our tgtd, if it still runs, and reap it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops tgtd (see the module docs) and removes its socket files.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if matches!(child.try_wait(), Ok(None)) {
                for args in STOP_REQUESTS {
                    let _ = self.tgtadm(args);
                }
                if !exited_within(&mut child, EXIT_GRACE) {
                    let _ = child.kill();
                }
            }
            let _ = child.wait();
        }
        if self.owns_control_port {
            for f in self.socket_files() {
                let _ = fs::remove_file(f);
            }
            self.owns_control_port = false;
        }
    }
}

impl Drop for TgtTarget {
    fn drop(&mut self) {
        self.stop();
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("isoe-lab: removing {}: {e}", self.dir.display());
            }
        }
    }
}

/// What one launch attempt came to.
enum Launch {
    /// tgtd answers tgtadm on its control port.
    Ready,
    /// Another tgtd holds the control port; ours exited.
    ControlPortTaken,
}

/// What the tgt init script asks before tgtd exits: no new logins, the
/// target gone (it exits only once it serves none), then the daemon.
const STOP_REQUESTS: [&[&str]; 3] = [
    &[
        "--mode", "sys", "--op", "update", "--name", "State", "-v", "offline",
    ],
    &[
        "--mode", "target", "--op", "delete", "--force", "--tid", TID,
    ],
    &["--mode", "system", "--op", "delete"],
];

/// `portal=A:P,portal=B:Q`: tgtd's `--iscsi` takes several, comma-separated.
pub fn portal_param(portals: &[String]) -> String {
    portals
        .iter()
        .map(|p| format!("portal={p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The portals in `tgtadm --mode portal --op show` output
/// (`Portal: 127.0.0.1:3260,1`: address, port, portal group).
pub fn listed_portals(shown: &str) -> Vec<String> {
    shown
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Portal:"))
        .map(|p| {
            let p = p.trim();
            p.rsplit_once(',')
                .map_or(p, |(addr, _group)| addr)
                .to_string()
        })
        .collect()
}

/// The `NAME=VALUE` pairs of `params` that `tgtadm --op show --tid T`
/// output does not show with that value.
pub fn params_not_shown(params: &[(&str, String)], shown: &str) -> Vec<String> {
    params
        .iter()
        .filter(|(name, value)| {
            !shown
                .lines()
                .filter_map(|l| l.trim().split_once('='))
                .any(|(n, v)| n == *name && v == value)
        })
        .map(|(name, value)| format!("{name}={value}"))
        .collect()
}

/// `/var/run/tgtd/socket.N` and `socket.N.lock`.
pub fn socket_files(control_port: u16) -> [PathBuf; 2] {
    [
        PathBuf::from(format!("{SOCKET_DIR}/socket.{control_port}")),
        PathBuf::from(format!("{SOCKET_DIR}/socket.{control_port}.lock")),
    ]
}

/// Runs tgtadm against `control_port` with a time limit.
fn tgtadm(program: &Path, control_port: u16, args: &[&str]) -> Result<String, TgtadmError> {
    let mut child = Command::new(program)
        .arg("-C")
        .arg(control_port.to_string())
        .args(["--lld", "iscsi"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TgtadmError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let status = if exited_within(&mut child, TGTADM_TIMEOUT) {
        child.wait().ok()
    } else {
        let _ = child.kill();
        let _ = child.wait();
        None
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(out),
        Some(status) => Err(TgtadmError::Failed {
            control_port,
            args: args.join(" "),
            status,
            said: [err.trim(), out.trim()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        }),
        None => Err(TgtadmError::NoAnswer {
            control_port,
            args: args.join(" "),
        }),
    }
}

fn exited_within(child: &mut Child, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return false,
        }
    }
}

/// Where state directories go: /dev/shm (memory, like the isoe target's
/// LUN) when it exists, else the temporary directory.
fn state_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A fresh `isoe-lab-tgt-<PID>-<n>` directory, readable only by us.
fn state_dir() -> std::io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = state_base();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{STATE_PREFIX}{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A control port distinct per call and per process.
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

/// The lab PID in a state directory's name (`isoe-lab-tgt-<PID>-<n>`).
pub fn state_owner_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix(STATE_PREFIX)?.split_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `pid` is a tgtd started with `--control-port PORT` (so a reused
/// PID is never taken for a leftover tgtd).
fn is_tgtd_on(pid: u32, port: u16) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let port = port.to_string();
    args.first().is_some_and(|a0| a0.ends_with(b"tgtd"))
        && args
            .windows(2)
            .any(|w| w[0] == b"--control-port" && w[1] == port.as_bytes())
}

/// Removes what labs that died left: their tgtd (asked to exit, then
/// SIGKILL), its socket files and the state directory. Returns the
/// directories removed. A directory of a live lab is never touched.
pub fn cleanup_stale() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(state_base()) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = state_owner_pid(&name) else {
            continue;
        };
        if alive(owner) {
            continue;
        }
        let dir = entry.path();
        let recorded = fs::read_to_string(dir.join("tgtd.pid")).unwrap_or_default();
        let mut fields = recorded.split_whitespace().map(str::parse::<u32>);
        if let (Some(Ok(pid)), Some(Ok(port))) = (fields.next(), fields.next()) {
            if let Ok(port) = u16::try_from(port) {
                stop_stale(pid, port);
            }
        }
        if fs::remove_dir_all(&dir).is_ok() {
            eprintln!(
                "isoe-lab: removed {} left by a lab that died",
                dir.display()
            );
            removed.push(dir);
        }
    }
    removed
}

/// Stops a leftover tgtd (not our child: by PID, once it is known to be
/// that tgtd) and removes its socket files once no tgtd holds them.
fn stop_stale(pid: u32, port: u16) {
    if is_tgtd_on(pid, port) {
        if let Some(tgtadm_path) = crate::netcmd::find_program("tgtadm") {
            for args in STOP_REQUESTS {
                let _ = tgtadm(&tgtadm_path, port, args);
            }
        }
        let deadline = Instant::now() + EXIT_GRACE;
        while is_tgtd_on(pid, port) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if is_tgtd_on(pid, port) {
            if let Ok(p) = libc::pid_t::try_from(pid) {
                // SAFETY: kill(2) has no memory-safety preconditions; `pid`
                // was just seen to be the tgtd this state directory names.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if !is_tgtd_on(pid, port) {
        for f in socket_files(port) {
            let _ = fs::remove_file(f);
        }
    }
}

/// The iSCSI parameters for tgt, as `tgtadm --lld iscsi --mode target
/// --op update --tid T --name NAME --value VALUE` pairs. tgt always
/// accepts None for a digest and picks CRC32C when both ends offer it;
/// its MaxXmitDataSegmentLength (what it sends per PDU) follows the
/// MaxRecvDataSegmentLength knob so that both directions use it.
pub fn params(knobs: &KnobSet) -> Vec<(&'static str, String)> {
    let mut p = Vec::new();
    if let Some(v) = knobs.header_digest {
        p.push(("HeaderDigest", crate::knobs::digest(v).to_string()));
    }
    if let Some(v) = knobs.data_digest {
        p.push(("DataDigest", crate::knobs::digest(v).to_string()));
    }
    let tgt_bool = |b: bool| if b { "Yes" } else { "No" }.to_string();
    if let Some(v) = knobs.immediate_data {
        p.push(("ImmediateData", tgt_bool(v)));
    }
    if let Some(v) = knobs.initial_r2t {
        p.push(("InitialR2T", tgt_bool(v)));
    }
    if let Some(n) = knobs.max_recv_data_segment_length {
        p.push(("MaxRecvDataSegmentLength", n.to_string()));
        p.push(("MaxXmitDataSegmentLength", n.to_string()));
    }
    if let Some(n) = knobs.first_burst_length {
        p.push(("FirstBurstLength", n.to_string()));
    }
    if let Some(n) = knobs.max_burst_length {
        p.push(("MaxBurstLength", n.to_string()));
    }
    if let Some(n) = knobs.connections.filter(|&n| n > 1) {
        // tgt's default MaxConnections is 1; the smaller offer wins.
        p.push(("MaxConnections", n.to_string()));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portals_go_comma_separated_to_one_iscsi_option() {
        assert_eq!(
            portal_param(&["10.99.1.2:3260".into(), "10.99.2.2:3260".into()]),
            "portal=10.99.1.2:3260,portal=10.99.2.2:3260"
        );
        assert_eq!(
            portal_param(&["127.0.0.1:3260".into()]),
            "portal=127.0.0.1:3260"
        );
    }

    #[test]
    fn listed_portals_drop_the_portal_group() {
        let shown = "Portal: 10.99.2.2:3260,1\nPortal: 10.99.1.2:3260,1\n";
        assert_eq!(
            listed_portals(shown),
            ["10.99.2.2:3260".to_string(), "10.99.1.2:3260".to_string()]
        );
        assert_eq!(listed_portals("Portal: 0.0.0.0:3260,1\n"), ["0.0.0.0:3260"]);
        assert!(listed_portals("").is_empty());
    }

    #[test]
    fn parameters_are_checked_against_what_tgt_shows() {
        let shown = "nop_interval=0\nMaxRecvDataSegmentLength=65536\nHeaderDigest=None\n\
                     MaxXmitDataSegmentLength=8192\n";
        let params = vec![
            ("MaxRecvDataSegmentLength", "65536".to_string()),
            ("MaxXmitDataSegmentLength", "65536".to_string()),
            ("HeaderDigest", "None".to_string()),
            ("DataDigest", "CRC32C".to_string()),
        ];
        assert_eq!(
            params_not_shown(&params, shown),
            ["MaxXmitDataSegmentLength=65536", "DataDigest=CRC32C"]
        );
        assert!(params_not_shown(&[], shown).is_empty());
    }

    #[test]
    fn state_directories_name_their_lab() {
        assert_eq!(state_owner_pid("isoe-lab-tgt-1234-0"), Some(1234));
        assert_eq!(state_owner_pid("isoe-lab-tgt-1234-17"), Some(1234));
        assert_eq!(state_owner_pid("isoe-lab-tgt-1234-"), None);
        assert_eq!(state_owner_pid("isoe-lab-tgt-12a4-0"), None);
        assert_eq!(state_owner_pid("isoe-lab-tgt--0"), None);
        assert_eq!(state_owner_pid("isoe-lab-1234-0-host"), None);
    }

    #[test]
    fn socket_files_are_the_control_ports() {
        assert_eq!(
            socket_files(32001),
            [
                PathBuf::from("/var/run/tgtd/socket.32001"),
                PathBuf::from("/var/run/tgtd/socket.32001.lock")
            ]
        );
    }

    #[test]
    fn control_ports_stay_in_a_short_and_above_the_tests_range() {
        for _ in 0..1000 {
            let p = control_port();
            assert!((32_000..32_767).contains(&p), "{p}");
        }
    }

    #[test]
    fn this_process_is_not_a_tgtd() {
        assert!(!is_tgtd_on(std::process::id(), 32_000));
    }

    #[test]
    fn the_knobs_become_tgt_parameters() {
        let everything = crate::knobs::tests::everything();
        let expected: Vec<(&str, String)> = [
            ("HeaderDigest", "CRC32C"),
            ("DataDigest", "CRC32C"),
            ("ImmediateData", "No"),
            ("InitialR2T", "Yes"),
            ("MaxRecvDataSegmentLength", "65536"),
            ("MaxXmitDataSegmentLength", "65536"),
            ("FirstBurstLength", "65536"),
            ("MaxBurstLength", "524288"),
            ("MaxConnections", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        assert_eq!(params(&everything), expected);
        assert!(params(&KnobSet::default()).is_empty());
    }
}
