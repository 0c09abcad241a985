//! A plan's cases on a test bed of machines ([`crate::testbed`]):
//! the initiators on one host, the target on another (or the same, or an
//! external array), each reached as a [`Host`].
//!
//! Per case: the initiator and target the knobs choose are checked on
//! their hosts (a missing one skips the case, with the reason); the target
//! starts (`isoe target` with a generated configuration, LIO through
//! configfs, or nothing for an external array); the kernel initiator logs
//! in once per portal, or `isoe attach` makes one ublk or NBD device per
//! portal; each workload runs on the initiator host (`isoe bench`, fio
//! with libiscsi, or fio with libaio on those block devices); then
//! everything stops, in reverse order (logout, or SIGTERM to `isoe
//! attach`, which removes its device).
//!
//! CPU is taken the same way for every initiator: `/proc/stat` of the
//! initiator host over the measured window (a kernel initiator works in
//! kernel threads and softirq that no process is charged for), read over
//! SSH with `/proc/uptime` as that host's clock, beside the initiator
//! process's own time. The target's CPU is its process's time on its host,
//! or, for LIO (kernel threads) on a host of its own, that host's busy time;
//! an external array's is unknown.
//!
//! A host that stops answering (ssh exits 255 and a plain `true` fails)
//! ends the case at once: what runs on the other hosts is stopped, the run
//! is recorded as failed with the reason, and the remaining cases are
//! skipped with it.

mod apps;
pub mod error;
mod series;

pub(crate) use apps::Apps;
pub use error::{BedError, PlaceError};

use crate::attach_device::{self, Attach, AttachError, AttachKind, AttachedDevice};
use crate::error::LabError;
use crate::fill;
use crate::host::{self, Host, Running};
use crate::hostknobs::{Guard, Port};
use crate::knobs::{InitiatorImpl, KnobSet, TargetImpl};
use crate::link::Side;
use crate::peers::fio::{self, FioEngine, FioJob, FioOutput};
use crate::peers::kernel::{self, KernelSession, NodeSettings};
use crate::plan::{Plan, ResolvedCase, WorkloadSpec};
use crate::record::{LunFill, RunResult};
use crate::run::{self, BenchFailure, Measured, Window, TARGET_IQN};
use crate::sampled::Sample;
use crate::site::{CaseEnd, CaseRuns, CaseSetup, Site};
use crate::ssh::HostError;
use crate::testbed::Testbed;
use isoe_bench::cpu::{self, CpuSplit, CpuTimes, ProcessCpu};
use isoe_bench::demand;
use isoe_bench::tcp::TcpCounters;
use isoe_bench::BenchOutput;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a target may take to print its portals.
const TARGET_START: Duration = Duration::from_secs(30);
/// Slack beyond ramp + duration before a run on a bed is declared hung
/// (a VM under emulation starts programs slowly).
const RUN_SLACK: Duration = Duration::from_secs(120);
/// Where, in the output directory, the last run's initiator and the
/// target print their errors (removed when the bed closes).
const INITIATOR_STDERR: &str = ".initiator-stderr.log";
const TARGET_STDERR: &str = ".target-stderr.log";
/// The file in the output directory that keeps the bed's knobs' state
/// before the plan until all of it is back.
pub const KNOB_JOURNAL: &str = "knobs-journal.json";
/// The control socket of the bed's `isoe target`, in the target host's
/// work directory: the lab reads the target's stage timings through it.
const CONTROL_SOCKET: &str = "control.sock";
/// SIGTERM's grace before SIGKILL for what the lab started on a host.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// LIO's LUN at most: a RAM disk, which takes its memory whole when
/// enabled (the test bed's VM has 2 GiB, and an application workload needs
/// room for its data), unlike isoe's sparse memory LUN.
const LIO_LUN_SIZE_BYTES_MAX: u64 = 512 << 20;
/// The queue depth of the block devices fio drives (the kernel
/// initiator's SCSI device, `isoe attach`'s): the seeds' deepest queue is
/// 64 per worker, and open-iscsi's default of 32 would cap it below what
/// fio asks.
pub const DEVICE_QUEUE_DEPTH: u32 = 128;

/// A test bed connected for a plan: its hosts, a work directory on each,
/// and the programs placed there. [`Bed::close`] removes what it made.
pub struct Bed {
    /// The file it came from.
    pub testbed: Testbed,
    /// The initiators' host.
    pub initiator: Host,
    /// The target's host.
    pub target: Host,
    /// Whether both are one machine.
    same_host: bool,
    /// SSH control sockets live here (a short path: a socket's is limited).
    ssh_dir: PathBuf,
    initiator_dir: String,
    target_dir: String,
    /// The lab's own `isoe`, copied to hosts that have none.
    isoe_local: PathBuf,
    /// Programs placed on a host, by (host name, program).
    placed: RefCell<HashMap<(String, &'static str), Placed>>,
    /// Set when a host stopped answering: why.
    gone: RefCell<Option<String>>,
    /// Where the remote programs' stderr goes, for the errors.
    log_dir: PathBuf,
    /// The interfaces' and sysctls' state before the plan, put back at the
    /// end (also on Ctrl-C and errors; a journal keeps it if the lab dies).
    knobs: Option<Guard>,
}

/// Where a program is on a host, or why it could not be put there (kept
/// for every later ask, hence shared).
type Placed = Result<String, Arc<PlaceError>>;

impl From<HostError> for BedError {
    fn from(e: HostError) -> BedError {
        BedError::Host(Box::new(e))
    }
}

impl From<AttachError> for BedError {
    fn from(e: AttachError) -> BedError {
        BedError::Attach(Box::new(e))
    }
}

impl Bed {
    /// Reaches both hosts, makes a work directory on each, and reads what
    /// the plan's knobs will change on the bed's interfaces and hosts
    /// (`sysctls`) into a journal in `log_dir` before anything changes.
    pub fn connect(
        testbed: Testbed,
        isoe_local: &Path,
        log_dir: &Path,
        sysctls: &[String],
    ) -> Result<Bed, BedError> {
        let ssh_dir = std::env::temp_dir().join(format!("isoe-lab-ssh-{}", std::process::id()));
        if let Err(source) = std::fs::create_dir_all(&ssh_dir) {
            return Err(BedError::SshDir {
                dir: ssh_dir,
                source,
            });
        }
        let key = testbed.ssh_key.clone();
        let parse = |url: &str| {
            Host::parse(url, key.clone(), &ssh_dir).map_err(|source| BedError::HostUrl {
                testbed: testbed.source.clone(),
                source: Box::new(source),
            })
        };
        let initiator = parse(&testbed.initiator.host)?;
        let target = parse(&testbed.target.host)?;
        let same_host = initiator == target;
        let work_dir = |host: &Host| {
            host.run(&["mktemp", "-d", "/tmp/isoe-lab.XXXXXX"])
                .map(|d| d.trim().to_owned())
                .map_err(|source| BedError::WorkDir {
                    host: host.name(),
                    source: Box::new(source),
                })
        };
        let initiator_dir = work_dir(&initiator)?;
        let target_dir = if same_host {
            initiator_dir.clone()
        } else {
            match work_dir(&target) {
                Ok(d) => d,
                Err(e) => {
                    let _ = initiator.run(&["rm", "-rf", &initiator_dir]);
                    initiator.close();
                    return Err(e);
                }
            }
        };
        let mut ports: Vec<Port> = Vec::new();
        for dev in &testbed.initiator.interfaces {
            ports.push(Port::new(initiator.clone(), dev.clone(), Side::Initiator));
        }
        for dev in &testbed.target.interfaces {
            ports.push(Port::new(target.clone(), dev.clone(), Side::Target));
        }
        let knobs = if ports.is_empty() {
            None
        } else {
            let journal = log_dir.join(KNOB_JOURNAL);
            match Guard::begin(&ports, sysctls, &journal) {
                Ok(guard) => Some(guard),
                Err(e) => {
                    let _ = initiator.run(&["rm", "-rf", &initiator_dir]);
                    if !same_host {
                        let _ = target.run(&["rm", "-rf", &target_dir]);
                    }
                    return Err(BedError::Interfaces(e));
                }
            }
        };
        Ok(Bed {
            knobs,
            testbed,
            initiator,
            target,
            same_host,
            ssh_dir,
            initiator_dir,
            target_dir,
            isoe_local: isoe_local.to_path_buf(),
            placed: RefCell::new(HashMap::new()),
            gone: RefCell::new(None),
            log_dir: log_dir.to_path_buf(),
        })
    }

    /// Removes the work directories and ends the SSH connections; what
    /// could not be removed, one line each.
    pub fn close(mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(guard) = self.knobs.take() {
            if let Err(left) = guard.finish() {
                problems.push(format!(
                    "knobs not put back (the journal {} keeps them for the next run): {}",
                    self.log_dir.join(KNOB_JOURNAL).display(),
                    left.join("; ")
                ));
            }
        }
        let mut dirs = vec![(&self.initiator, &self.initiator_dir)];
        if !self.same_host {
            dirs.push((&self.target, &self.target_dir));
        }
        // A host that went away mid-run cannot be told; this machine can.
        let reachable = self.gone.borrow().is_none();
        for (host, dir) in dirs.into_iter().filter(|(h, _)| reachable || h.is_local()) {
            if let Err(e) = host.run(&["rm", "-rf", dir]) {
                problems.push(format!("removing {dir} on {}: {e}", host.name()));
            }
        }
        self.initiator.close();
        self.target.close();
        let _ = std::fs::remove_dir_all(&self.ssh_dir);
        // The programs' stderr, kept only for the errors of the plan's runs.
        for log in [INITIATOR_STDERR, TARGET_STDERR] {
            let _ = std::fs::remove_file(self.log_dir.join(log));
        }
        problems
    }

    /// Sets the case's link, NIC and sysctl knobs on the bed's interfaces
    /// and hosts (what it leaves unset goes back to the saved state); the
    /// knobs that could not be set, each with why.
    pub fn apply_knobs(&mut self, knobs: &KnobSet) -> Vec<(String, String)> {
        match &mut self.knobs {
            Some(guard) => guard
                .apply(knobs)
                .into_iter()
                .filter_map(|a| a.outcome.err().map(|why| (a.knob, why.to_string())))
                .collect(),
            None => {
                let link_only = KnobSet {
                    link: knobs.link,
                    sysctl: knobs.sysctl.clone(),
                    ..KnobSet::default()
                };
                let why = format!(
                    "the test bed {} names no interfaces ([initiator] or [target] interfaces)",
                    self.testbed.source
                );
                link_only
                    .describe()
                    .into_keys()
                    .map(|k| (k, why.clone()))
                    .collect()
            }
        }
    }

    /// Why the bed can no longer be used, once a host went away.
    pub fn gone(&self) -> Option<String> {
        self.gone.borrow().clone()
    }

    /// Lines for the report: what the bed is and how its CPU is read.
    pub fn notes(&self) -> Vec<String> {
        let t = &self.testbed;
        let target_host = if self.same_host {
            "the same host".to_owned()
        } else {
            self.target.name()
        };
        vec![
            format!(
                "test bed {}: initiators on {}, target on {target_host}, portals {}",
                t.source,
                self.initiator.name(),
                t.target
                    .portals
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "on a test bed, system CPU is the initiator host's /proc/stat over the measured \
             window, taken the same way for every initiator (a kernel initiator works in kernel \
             threads and softirq); other processes' load is checked on this machine only"
                .to_owned(),
        ]
    }

    /// Whether `host` stopped answering; if so the bed is marked gone.
    fn check_gone(&self, host: &Host, during: &str) -> bool {
        if self.gone.borrow().is_some() {
            return true;
        }
        if host.is_local() || host.run(&["true"]).is_ok() {
            return false;
        }
        *self.gone.borrow_mut() = Some(format!(
            "the test bed's host {} went away during {during}; the remaining cases were not run",
            host.name()
        ));
        true
    }

    /// The error for a failure on `host`: its text, and whether the host went away.
    fn failure(&self, host: &Host, during: &str, e: impl Into<BedError>) -> BedError {
        if self.check_gone(host, during) {
            BedError::Gone(self.gone().unwrap_or_default())
        } else {
            e.into()
        }
    }

    /// What to say of a failure on the initiator host: `e`, or that the
    /// host went away.
    pub(crate) fn failure_on_initiator(&self, during: &str, e: impl std::fmt::Display) -> String {
        if self.check_gone(&self.initiator, during) {
            self.gone().unwrap_or_default()
        } else {
            e.to_string()
        }
    }

    fn dir_of(&self, host: &Host) -> &str {
        if host == &self.initiator {
            &self.initiator_dir
        } else {
            &self.target_dir
        }
    }

    /// `isoe` on `host`: the test bed's path, this binary on this machine,
    /// else this binary copied into the host's work directory.
    fn isoe_on(&self, host: &Host, given: Option<&String>) -> Placed {
        self.place(host, "isoe", given, || Ok(self.isoe_local.clone()))
    }

    /// fio with the libiscsi engine on the initiator host, checked.
    fn fio_libiscsi(&self) -> Result<String, BedError> {
        let host = &self.initiator;
        let path = self.place(
            host,
            "fio-libiscsi",
            self.testbed.initiator.fio_libiscsi.as_ref(),
            || fio::usable_fio().map_err(PlaceError::LocalFio),
        )?;
        let engines = match host.run(&[path.as_str(), "--enghelp"]) {
            Ok(engines) => engines,
            Err(source) => {
                return Err(BedError::FioEngines {
                    fio: path,
                    host: host.name(),
                    source: Box::new(source),
                })
            }
        };
        if engines.split_whitespace().any(|w| w == "libiscsi") {
            Ok(path)
        } else {
            Err(BedError::FioNoLibiscsi {
                fio: path,
                host: host.name(),
            })
        }
    }

    /// A program on `host`: `given` if the bed names one, else `local()`'s
    /// file, copied over when the host is another machine. Once per host.
    fn place(
        &self,
        host: &Host,
        what: &'static str,
        given: Option<&String>,
        local: impl FnOnce() -> Result<PathBuf, PlaceError>,
    ) -> Placed {
        let key = (host.name(), what);
        if let Some(done) = self.placed.borrow().get(&key) {
            return done.clone();
        }
        let placed = match given {
            Some(path) => Ok(path.clone()),
            None => local()
                .and_then(|path| {
                    if host.is_local() {
                        return Ok(path.display().to_string());
                    }
                    let bytes = match std::fs::read(&path) {
                        Ok(bytes) => bytes,
                        Err(source) => return Err(PlaceError::Reading { path, source }),
                    };
                    let there = format!("{}/{what}", self.dir_of(host));
                    let copied = host
                        .write(&there, &bytes)
                        .and_then(|()| host.run(&["chmod", "0755", &there]));
                    match copied {
                        Ok(_) => Ok(there),
                        Err(source) => Err(PlaceError::Copying {
                            path,
                            host: host.name(),
                            source: Box::new(source),
                        }),
                    }
                })
                .map_err(Arc::new),
        };
        self.placed.borrow_mut().insert(key, placed.clone());
        placed
    }

    /// Why the case with `knobs` cannot run on this bed, if it cannot:
    /// a peer its host lacks, an offload transport no adapter provides.
    pub fn unavailable(
        &self,
        plan: &Plan,
        knobs: &KnobSet,
        workloads: &[String],
    ) -> Option<String> {
        if let Some(why) = self.gone() {
            return Some(why);
        }
        let why = self.lacks(plan, knobs, workloads)?;
        // A host that stopped answering fails every check: say that instead.
        for host in [&self.initiator, &self.target] {
            if self.check_gone(host, "the checks before a case") {
                return self.gone();
            }
        }
        Some(why)
    }

    /// The paths a case with `knobs` has: the external array's one portal,
    /// else every portal the bed file names.
    fn paths(&self, knobs: &KnobSet) -> u32 {
        match knobs.target_impl() {
            TargetImpl::External => 1,
            _ => self.testbed.target.portals.len() as u32,
        }
    }

    /// What the case lacks on the bed's hosts, if anything.
    fn lacks(&self, plan: &Plan, knobs: &KnobSet, workloads: &[String]) -> Option<String> {
        if knobs.is_floor() {
            return Some(
                "floor = true runs on the namespace topologies only (loopback, veth, ...), not on a test bed yet"
                    .into(),
            );
        }
        let initiator = &self.initiator;
        let why = match knobs.initiator_impl() {
            InitiatorImpl::Isoe => self
                .isoe_on(initiator, self.testbed.initiator.isoe.as_ref())
                .err()
                .map(|e| e.to_string()),
            InitiatorImpl::Libiscsi => self.fio_libiscsi().err().map(|e| e.to_string()),
            InitiatorImpl::Kernel => self.kernel_unavailable(knobs),
            InitiatorImpl::IsoeUblk => self.attach_unavailable(AttachKind::Ublk),
            InitiatorImpl::IsoeNbd => self.attach_unavailable(AttachKind::Nbd),
        };
        if why.is_some() {
            return why;
        }
        if let Some(why) = self.applications_unavailable(plan, workloads) {
            return Some(why);
        }
        if let Some(why) = plan.uneven_depth(knobs, workloads, self.paths(knobs)) {
            return Some(format!("{why} on this test bed"));
        }
        match knobs.target_impl() {
            TargetImpl::Isoe => self
                .isoe_on(&self.target, self.testbed.target.isoe.as_ref())
                .err()
                .map(|e| e.to_string()),
            TargetImpl::Tgt => Some(
                "tgt runs in the namespace topologies only; on a test bed the targets are \
                 isoe, lio and external"
                    .into(),
            ),
            TargetImpl::Lio => crate::peers::lio::unavailable(&self.target),
            TargetImpl::External => self.external_unavailable(plan, workloads),
        }
    }

    /// What the case's application workloads lack on the initiator host:
    /// the block layer's tracer, the file systems' tools, PostgreSQL.
    fn applications_unavailable(&self, plan: &Plan, workloads: &[String]) -> Option<String> {
        let apps: Vec<_> = workloads
            .iter()
            .filter_map(|w| plan.workload(w)?.application)
            .collect();
        if apps.is_empty() {
            return None;
        }
        let mut programs = vec!["blktrace", "blkparse", "mkfs.ext4", "mount", "runuser"];
        let mut packages = vec!["blktrace", "e2fsprogs"];
        if plan
            .resolved_cases()
            .iter()
            .any(|c| c.knobs.filesystem == Some(crate::application::Filesystem::Xfs))
        {
            programs.push("mkfs.xfs");
            packages.push("xfsprogs");
        }
        let oltp = apps.iter().any(|a| a.kind() == "oltp");
        if oltp {
            packages.push("postgresql");
        }
        let script = r#"oltp=$1; shift
missing=""
for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ "$oltp" = 1 ] && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    missing="$missing PostgreSQL's-server"
fi
echo $missing"#;
        let mut argv = vec!["sh", "-c", script, "sh", if oltp { "1" } else { "0" }];
        argv.extend(&programs);
        let host = &self.initiator;
        match host.run(&argv) {
            Ok(out) if out.trim().is_empty() => None,
            Ok(out) => Some(format!(
                "the application workloads need {} on {} (Debian packages: {})",
                out.trim(),
                host.name(),
                packages.join(", ")
            )),
            Err(e) => Some(format!("checking {}'s programs: {e}", host.name())),
        }
    }

    fn kernel_unavailable(&self, knobs: &KnobSet) -> Option<String> {
        let host = &self.initiator;
        if let Err(e) = host.run(&["iscsiadm", "--version"]) {
            return Some(format!(
                "the kernel initiator needs open-iscsi (iscsiadm) on {}: {e}",
                host.name()
            ));
        }
        let fio = &self.testbed.initiator.fio;
        if let Err(e) = host.run(&[fio.as_str(), "--version"]) {
            return Some(format!("{fio} (with libaio) on {}: {e}", host.name()));
        }
        let transport = knobs.transport.unwrap_or(crate::knobs::Transport::Tcp);
        match kernel::ifaces(host, transport.as_str()) {
            Ok(ifaces) if !ifaces.is_empty() => None,
            Ok(_) => Some(format!(
                "no {t} iface on {h}: `iscsiadm -m iface` lists none, so {h} has no adapter \
                 with {t} offload (or its driver is not loaded)",
                t = transport.as_str(),
                h = host.name()
            )),
            Err(e) => Some(format!("listing the ifaces of {}: {e}", host.name())),
        }
    }

    /// What `isoe attach` with `kind` lacks on the initiator host: isoe
    /// (the bed's, or the lab's copied there), fio with libaio, root, and
    /// the driver (its device node, or its module loaded now).
    fn attach_unavailable(&self, kind: AttachKind) -> Option<String> {
        let host = &self.initiator;
        let attach = format!("isoe attach {}", kind.flag());
        if let Err(e) = self.isoe_on(host, self.testbed.initiator.isoe.as_ref()) {
            return Some(format!("isoe for {attach} on {}: {e}", host.name()));
        }
        let fio = &self.testbed.initiator.fio;
        if let Err(e) = host.run(&[fio.as_str(), "--version"]) {
            return Some(format!("{fio} (with libaio) on {}: {e}", host.name()));
        }
        match host.run(&["id", "-u"]) {
            Ok(uid) if uid.trim() == "0" => {}
            Ok(uid) => {
                return Some(format!(
                    "{attach} needs root on the initiator host, and the lab is uid {} on {}",
                    uid.trim(),
                    host.name()
                ))
            }
            Err(e) => return Some(format!("`id -u` on {}: {e}", host.name())),
        }
        if let Err(e) = host.run(&kind.driver_check()) {
            let release = host
                .run(&["uname", "-r"])
                .map(|r| r.trim().to_owned())
                .unwrap_or_else(|_| "unknown".into());
            return Some(format!(
                "the initiator host {} has no {} for {attach} ({}; its kernel is {release}): {e}",
                host.name(),
                kind.module(),
                kind.requirement()
            ));
        }
        None
    }

    fn external_unavailable(&self, plan: &Plan, workloads: &[String]) -> Option<String> {
        let Some(external) = &self.testbed.target.external else {
            return Some(format!(
                "target = external needs `external = \"iscsi://PORTAL/IQN/LUN\"` in [target] of {}",
                self.testbed.source
            ));
        };
        let writes = workloads
            .iter()
            .filter_map(|w| plan.workload(w))
            .any(|w| w.read_pct() < 100);
        if writes && !self.testbed.target.external_writable {
            return Some(format!(
                "the workloads write, and {} may hold data: set `external_writable = true` in \
                 [target] of {} to allow it",
                external.url, self.testbed.source
            ));
        }
        None
    }

    /// Starts the target the knobs choose, listening where the bed says.
    /// Its LUN (isoe's, LIO's) is `lun_bytes`, the plan's span.
    pub fn start_target(
        &self,
        case: &str,
        knobs: &KnobSet,
        lun_bytes: u64,
    ) -> Result<BedTarget<'_>, BedError> {
        let t = &self.testbed.target;
        let host = &self.target;
        match knobs.target_impl() {
            TargetImpl::External => {
                let e = t.external.as_ref().expect("checked by unavailable");
                Ok(BedTarget {
                    started: Started::External,
                    pid: None,
                    portals: vec![e.portal],
                    iqn: e.iqn.clone(),
                    lun: e.lun,
                    // Unknown until read; fio addresses the plan's span.
                    size_bytes: u64::MAX,
                })
            }
            TargetImpl::Lio => {
                let size = lun_bytes.min(LIO_LUN_SIZE_BYTES_MAX);
                let lio =
                    crate::peers::lio::LioTarget::start(host, TARGET_IQN, size, &t.listen, knobs)
                        .map_err(|e| self.failure(host, &format!("case {case}"), e))?;
                Ok(BedTarget {
                    lun: lio.lun(),
                    size_bytes: size,
                    started: Started::Lio(lio),
                    pid: None,
                    portals: t.portals.clone(),
                    iqn: TARGET_IQN.to_owned(),
                })
            }
            TargetImpl::Isoe | TargetImpl::Tgt => {
                let isoe = self.isoe_on(host, t.isoe.as_ref())?;
                let listen: Vec<String> = t.listen.iter().map(ToString::to_string).collect();
                let control = format!("{}/{CONTROL_SOCKET}", self.target_dir);
                let config = run::isoe_target_config(case, &listen, knobs, &control, lun_bytes);
                let path = format!("{}/target.toml", self.target_dir);
                host.write(&path, config.as_bytes())
                    .map_err(|e| self.failure(host, &format!("case {case}"), e))?;
                let log = self.log_dir.join(TARGET_STDERR);
                let stderr = File::create(&log).map_err(|source| BedError::Log {
                    path: log.clone(),
                    source,
                })?;
                let mut running = host
                    .spawn(
                        &[isoe.as_str(), "target", "--config", &path],
                        Stdio::from(stderr),
                    )
                    .map_err(|e| self.failure(host, &format!("case {case}"), e))?;
                let lines = host::lines(running.take_stdout().expect("stdout is piped"));
                let deadline = Instant::now() + TARGET_START;
                let mut listening = 0;
                while listening < listen.len() {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match lines.recv_timeout(left) {
                        Ok(line) if line.contains("listening on") => listening += 1,
                        Ok(_) => {}
                        Err(_) => {
                            let _ = running.stop(STOP_GRACE);
                            let err = std::fs::read_to_string(&log).unwrap_or_default();
                            let why = BedError::NotListening {
                                case: case.to_owned(),
                                host: host.name(),
                                listen: listen.join(", "),
                                within_s: TARGET_START.as_secs(),
                                said: err.trim().to_owned(),
                            };
                            return Err(self.failure(host, &format!("case {case}"), why));
                        }
                    }
                }
                let pid = running.pid();
                Ok(BedTarget {
                    started: Started::Isoe(running),
                    pid: Some(pid),
                    portals: t.portals.clone(),
                    iqn: TARGET_IQN.to_owned(),
                    lun: 0,
                    size_bytes: lun_bytes,
                })
            }
        }
    }

    /// Writes `target`'s LUN once from the initiator host (`isoe bench
    /// --fill`) when the case reads blocks; what it took. None: nothing to
    /// fill, or an external LUN the bed may not write.
    fn fill_lun(
        &self,
        plan: &Plan,
        knobs: &KnobSet,
        workloads: &[String],
        target: &BedTarget<'_>,
    ) -> Result<Option<LunFill>, String> {
        let external = matches!(target.started, Started::External);
        if !fill::reads_blocks(plan, knobs, workloads)
            || (external && !self.testbed.target.external_writable)
        {
            return Ok(None);
        }
        let host = &self.initiator;
        let isoe = self
            .isoe_on(host, self.testbed.initiator.isoe.as_ref())
            .map_err(|e| e.to_string())?;
        let url = target
            .urls()
            .into_iter()
            .next()
            .ok_or("the target has no portal")?;
        let out = host
            .run(&fill::fill_argv(&isoe, &url, plan, knobs))
            .map_err(|e| e.to_string())?;
        fill::parse_fill(&out).map(Some)
    }

    /// What `target` says it served from never-written blocks so far:
    /// isoe's target, asked through its control socket; None for others.
    fn unwritten_read_bytes(&self, knobs: &KnobSet, target: &BedTarget<'_>) -> Option<u64> {
        if !matches!(target.started, Started::Isoe(_)) || !fill::target_counts_unwritten(knobs) {
            return None;
        }
        let host = &self.target;
        let isoe = self.isoe_on(host, self.testbed.target.isoe.as_ref()).ok()?;
        let socket = format!("{}/{CONTROL_SOCKET}", self.target_dir);
        let out = host.run(&fill::stats_argv(&isoe, &socket)).ok()?;
        fill::unwritten_read_bytes(&out, &target.iqn, target.lun)
    }

    /// Logs the kernel initiator in to every portal of `target`.
    pub fn kernel_login<'b>(
        &'b self,
        case: &str,
        knobs: &KnobSet,
        target: &BedTarget<'_>,
    ) -> Result<Vec<KernelSession<'b>>, BedError> {
        let host = &self.initiator;
        let transport = knobs.transport.unwrap_or(crate::knobs::Transport::Tcp);
        let iface = kernel::ifaces(host, transport.as_str())
            .map_err(|e| self.failure(host, &format!("case {case}"), e))?
            .into_iter()
            .next()
            .ok_or_else(|| BedError::NoIface {
                transport: transport.as_str(),
                host: host.name(),
            })?;
        let settings = node_settings(knobs);
        let mut sessions = Vec::new();
        for portal in &target.portals {
            match KernelSession::login(
                host,
                &portal.to_string(),
                &target.iqn,
                &iface,
                target.lun,
                &settings,
            ) {
                Ok(s) => sessions.push(s),
                Err(e) => {
                    let why = self.failure(host, &format!("case {case}"), e);
                    for s in sessions {
                        let _ = s.logout();
                    }
                    return Err(BedError::KernelLogin(Box::new(why)));
                }
            }
        }
        Ok(sessions)
    }

    /// `isoe attach` once per portal of `target`, each device named
    /// `isoe-lab-PID-N` (N the portal's index); the devices made so far are
    /// detached again when one fails.
    pub fn attach_devices<'b>(
        &'b self,
        case: &str,
        kind: AttachKind,
        knobs: &KnobSet,
        target: &BedTarget<'_>,
    ) -> Result<Vec<AttachedDevice<'b>>, BedError> {
        let host = &self.initiator;
        let isoe = self.isoe_on(host, self.testbed.initiator.isoe.as_ref())?;
        let mut devices = Vec::new();
        for (i, url) in target.urls().into_iter().enumerate() {
            let attach = attach_request(&isoe, url, kind, i, knobs);
            let log = self.log_dir.join(format!(".attach-{i}-stderr.log"));
            match AttachedDevice::attach(host, &attach, &log, attach_device::ATTACH_START) {
                Ok(device) => devices.push(device),
                Err(e) => {
                    let why = self.failure(host, &format!("case {case}"), e);
                    for device in devices {
                        let _ = device.detach();
                    }
                    return Err(why);
                }
            }
        }
        Ok(devices)
    }

    /// The block devices the case's initiator needs on the initiator host
    /// before its runs: the kernel initiator's sessions, `isoe attach`'s
    /// devices, or none (isoe bench and libiscsi reach the target
    /// themselves).
    pub fn block_devices<'b>(
        &'b self,
        case: &str,
        knobs: &KnobSet,
        target: &BedTarget<'_>,
    ) -> Result<BlockDevices<'b>, BedError> {
        let initiator = knobs.initiator_impl();
        if initiator == InitiatorImpl::Kernel {
            return self
                .kernel_login(case, knobs, target)
                .map(BlockDevices::Kernel);
        }
        match initiator.attach_kind() {
            Some(kind) => self
                .attach_devices(case, kind, knobs, target)
                .map(BlockDevices::Attached),
            None => Ok(BlockDevices::None),
        }
    }

    /// One run of `workload` on the initiator host; its result in `isoe
    /// bench`'s fields, with both hosts' CPU over the measured window.
    /// `on` holds what the case made: its target, the block devices
    /// [`Bed::block_devices`] made, what its application workloads made.
    pub(crate) fn run_workload(
        &self,
        plan: &Plan,
        knobs: &KnobSet,
        workload: &WorkloadSpec,
        on: &mut OnBed<'_, '_>,
        stop: &AtomicBool,
    ) -> Result<Measured, BenchFailure> {
        let (target, devices) = (on.target, on.devices);
        if workload.stream.is_some() {
            return Err(BenchFailure::Failed(
                "a stream workload runs on the namespace topologies only (loopback, veth, ...), not on a test bed yet"
                    .into(),
            ));
        }
        if let Some(app) = &workload.application {
            // One device: with several portals, the first portal's.
            let device = devices.paths().into_iter().next().ok_or_else(|| {
                BenchFailure::Failed(format!(
                    "{} runs on a block device, and the case made none",
                    app.kind()
                ))
            })?;
            let pids = devices.initiator_pids();
            return self.run_application(
                plan,
                knobs,
                app,
                target,
                &device,
                &pids,
                &mut on.apps,
                stop,
            );
        }
        let load = self
            .load_command(plan, knobs, workload, target, devices)
            .map_err(|e| BenchFailure::Failed(e.to_string()))?;
        let bounds = (load.window.start, load.window.end);
        let run_s = plan.run.ramp_s + plan.run.duration_s;
        let initiator_pids = devices.initiator_pids();
        let watched = Watched {
            initiator: &initiator_pids,
            tools: &[],
        };
        let mut ran = self.measure_with(&load.argv, load.window, target, run_s, watched, stop)?;
        let mut result = match &load.job {
            None => self.bench_result(&ran)?,
            Some(job) => {
                let target_pid_here = target.pid.filter(|_| self.same_host);
                let mut result = self.fio_result(&mut ran, job, knobs, bounds, target_pid_here)?;
                add_initiator_process(&mut result, &ran.first, &ran.last);
                result
            }
        };
        if !self.same_host {
            add_target_side(
                &mut result,
                &ran.first,
                &ran.last,
                target,
                self.vm_on_target_host(),
            );
        }
        result.lab.testbed_initiator_host = Some(self.initiator.name());
        result.lab.testbed_target_host = Some(match target.started {
            Started::External => "external".to_owned(),
            _ => self.target.name(),
        });
        Ok(Measured {
            result,
            started_at: ran.started_at,
            foreign: ran.foreign,
        })
    }
    /// The command line of a run of `workload` on the initiator host
    /// (`isoe bench`, or fio on isoe's or the kernel's block devices or
    /// through libiscsi), and the window to measure it over.
    fn load_command(
        &self,
        plan: &Plan,
        knobs: &KnobSet,
        workload: &WorkloadSpec,
        target: &BedTarget<'_>,
        devices: &BlockDevices,
    ) -> Result<Load, BedError> {
        let host = &self.initiator;
        // One path per portal: a URL, or the block device made through it.
        let paths = target.portals.len() as u32;
        let shape = workload.shape(knobs, paths);
        let run = &plan.run;
        let target_pid_here = target.pid.filter(|_| self.same_host);
        Ok(match knobs.initiator_impl() {
            InitiatorImpl::Isoe => {
                let isoe = self.isoe_on(host, self.testbed.initiator.isoe.as_ref())?;
                let mut argv = vec![isoe, "bench".to_owned()];
                argv.extend(target.urls());
                argv.extend(workload.bench_args(knobs, &shape));
                argv.extend(knobs.bench_args());
                argv.extend(fill::span_args(plan));
                argv.extend([
                    "--duration".to_owned(),
                    run.duration_s.to_string(),
                    "--ramp".to_owned(),
                    run.ramp_s.to_string(),
                    "--json".to_owned(),
                    "-".to_owned(),
                    "--no-progress".to_owned(),
                ]);
                if let Some(pid) = target_pid_here {
                    argv.extend(["--target-pid".to_owned(), pid.to_string()]);
                }
                let window = run::measured_window(run.ramp_s, run.duration_s);
                Load {
                    argv,
                    job: None,
                    window,
                }
            }
            kind => {
                let (engine, program, files) = if kind.makes_block_device() {
                    let fio = self.testbed.initiator.fio.clone();
                    (FioEngine::KernelLibaio, fio, devices.paths())
                } else {
                    let fio = self.fio_libiscsi()?;
                    (FioEngine::Libiscsi, fio, target.urls())
                };
                let (workers, queue_depth) = match engine {
                    FioEngine::Libiscsi => fio::libiscsi_jobs(
                        shape.workers,
                        shape.queue_depth,
                        knobs.sessions.unwrap_or(1),
                    ),
                    _ => (shape.workers, shape.queue_depth),
                };
                let job = FioJob {
                    engine,
                    urls: files,
                    block_size_bytes: shape.block_size_bytes,
                    read_pct: shape.read_pct,
                    random_pct: shape.random_pct,
                    queue_depth,
                    workers,
                    duration_s: run.duration_s.ceil().max(2.0),
                    ramp_s: run.ramp_s.ceil(),
                    size_bytes: plan.run.span_bytes.min(target.size_bytes),
                };
                let mut argv = vec![program];
                argv.extend(job.args());
                // A second short of fio's end, from its process's start:
                // with four jobs, fio on the VM ended before a window
                // closing half a second short of it (2 runs of 81).
                let start = Duration::from_secs_f64(job.ramp_s + 0.5);
                let len = Duration::from_secs_f64((job.duration_s - 1.5).max(0.5));
                Load {
                    argv,
                    job: Some(job),
                    window: Window::new(start, start + len),
                }
            }
        })
    }

    /// `isoe bench`'s JSON result, the last JSON line it printed.
    fn bench_result(&self, ran: &Ran) -> Result<RunResult, BenchFailure> {
        let line = ran
            .stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| {
                BenchFailure::Failed(format!(
                    "isoe bench on {} exited with {} and no result: {}",
                    self.initiator.name(),
                    ran.status,
                    tail(&ran.stderr_text)
                ))
            })?;
        serde_json::from_str::<BenchOutput>(line)
            .map(RunResult::of_bench)
            .map_err(|e| BenchFailure::Failed(format!("isoe bench printed bad JSON: {e}")))
    }

    /// fio's JSON result as an `isoe bench` result, with the initiator
    /// host's CPU over the window `bounds` (its end moved to the initiator
    /// host's clock in `ran`).
    fn fio_result(
        &self,
        ran: &mut Ran,
        job: &FioJob,
        knobs: &KnobSet,
        bounds: (Duration, Duration),
        target_pid_here: Option<u32>,
    ) -> Result<RunResult, BenchFailure> {
        let (status, stderr_text) = (ran.status, &ran.stderr_text);
        let start = ran.stdout.find('{').ok_or_else(|| {
            BenchFailure::Failed(format!(
                "fio on {} exited with {status} and no JSON: {}",
                self.initiator.name(),
                tail(stderr_text)
            ))
        })?;
        let fio_json: FioOutput = serde_json::from_str(&ran.stdout[start..])
            .map_err(|e| BenchFailure::Failed(format!("fio printed bad JSON: {e}")))?;
        let (first, last) = (&ran.first, &mut ran.last);
        // The window as the initiator host's clock saw it.
        if let (Some(a), Some(b)) = (&first.initiator, &mut last.initiator) {
            let span = (last.uptime_s - first.uptime_s).max(0.0);
            b.at = a.at + Duration::from_secs_f64(span);
        }
        let (Some(a), Some(b)) = (&first.initiator, &last.initiator) else {
            let which = if first.initiator.is_none() {
                "start"
            } else {
                "end"
            };
            return Err(BenchFailure::Failed(format!(
                "fio's /proc counters could not be read at the window's {which} \
                 ({:.1} s after it started; it exited with {status}): {}",
                if first.initiator.is_none() {
                    bounds.0
                } else {
                    bounds.1
                }
                .as_secs_f64(),
                tail(stderr_text)
            )));
        };
        let mut result = fio::result(&fio_json, job, a, b, target_pid_here);
        if let Some(kind) = knobs.initiator_impl().attach_kind() {
            // fio's libaio on isoe's device, not on the kernel's.
            result.lab.initiator = Some(kind.label().to_owned());
        }
        if job.engine == FioEngine::KernelLibaio {
            result.load_is_not_the_initiator();
        }
        Ok(result)
    }

    /// Runs `argv` on the initiator host for about `run_s` seconds, its CPU
    /// and the target's sampled at the ends of `window` (timed from its
    /// start), with the processes `watched` names on the initiator host
    /// (the initiator's own, where it is not the program run: `isoe
    /// attach` under fio; the measurement's tools): what it printed, how
    /// it ended, and the samples; Ctrl-C, a hang or a host gone are errors.
    fn measure_with(
        &self,
        argv: &[String],
        window: Window,
        target: &BedTarget<'_>,
        run_s: f64,
        watched: Watched<'_>,
        stop: &AtomicBool,
    ) -> Result<Ran, BenchFailure> {
        let host = &self.initiator;
        let mut ours = self.testbed.local_processes.clone();
        if !(self.initiator.is_local() && self.target.is_local()) {
            // The SSH ControlMaster the lab started lives on, detached.
            ours.push("ssh".to_owned());
        }
        let mut window = window.owning(&ours);
        let log = self.log_dir.join(INITIATOR_STDERR);
        let stderr = File::create(&log)
            .map_err(|e| BenchFailure::Failed(format!("{}: {e}", log.display())))?;
        let started_at = isoe_bench::timestamp::rfc3339_utc(std::time::SystemTime::now());
        let mut running = host
            .spawn(argv, Stdio::from(stderr))
            .map_err(|e| BenchFailure::Failed(self.failure(host, "a run", e).to_string()))?;
        let output = host::collect(running.take_stdout().expect("stdout is piped"));
        let pid = running.pid();
        let limit = Duration::from_secs_f64(run_s) + RUN_SLACK;
        let t0 = Instant::now();
        let samplers = self.start_samplers(pid, watched, target, &window, t0.elapsed());
        let status = loop {
            match running.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => {
                    return Err(BenchFailure::Failed(format!(
                        "waiting for {}: {e}",
                        argv[0]
                    )))
                }
            }
            if stop.load(Ordering::Relaxed) {
                let _ = running.stop(STOP_GRACE);
                samplers.stop();
                return Err(BenchFailure::Stopped);
            }
            let t = t0.elapsed();
            if t > limit {
                let _ = running.stop(STOP_GRACE);
                samplers.stop();
                let why = BedError::RunHung {
                    program: argv[0].clone(),
                    limit,
                };
                return Err(BenchFailure::Failed(
                    self.failure(host, "a run", why).to_string(),
                ));
            }
            window.tick(t);
            std::thread::sleep(Duration::from_millis(20));
        };
        if stop.load(Ordering::Relaxed) {
            // It ended because of Ctrl-C: no result, and no failure.
            samplers.stop();
            return Err(BenchFailure::Stopped);
        }
        let samples = samplers.finish();
        let stdout = output
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default();
        let stderr_text = std::fs::read_to_string(&log).unwrap_or_default();
        if status.code() == Some(255) && self.check_gone(host, "a run") {
            return Err(BenchFailure::Failed(self.gone().unwrap_or_default()));
        }
        let [Some(first), Some(last)] = samples.map_err(|e| BenchFailure::Failed(e.to_string()))?
        else {
            return Err(BenchFailure::Failed(format!(
                "{} on {} ended ({status}) before its CPU could be sampled: {}",
                argv[0],
                host.name(),
                tail(&stderr_text)
            )));
        };
        Ok(Ran {
            stdout,
            stderr_text,
            status,
            first,
            last,
            started_at,
            foreign: window.load(),
        })
    }

    /// Whether the target's host is this machine and the test bed file
    /// names programs here that are part of the bed (`local_processes`:
    /// the VM that is the initiator host), whose CPU would be most of that
    /// host's ([`add_target_side`] gives no host figure then).
    fn vm_on_target_host(&self) -> bool {
        self.target.is_local() && !self.testbed.local_processes.is_empty()
    }

    /// Starts the programs that read both hosts' counters at the window's
    /// two ends, each on the host it reads ([`SAMPLER`]), so that neither
    /// an SSH round trip nor a slow host moves the moments: the initiator
    /// host's /proc/stat and the initiator process's counters (with TCP),
    /// timed from that process's start; on a target host of its own, its
    /// /proc/stat and the target process's, timed from now.
    fn start_samplers(
        &self,
        initiator_pid: u32,
        watched: Watched<'_>,
        target: &BedTarget<'_>,
        window: &Window,
        since_start: Duration,
    ) -> Samplers {
        let target_here = target.pid.filter(|_| self.same_host);
        let mut paths = vec![
            "/proc/uptime".to_owned(),
            "/proc/stat".to_owned(),
            format!("/proc/{initiator_pid}/stat"),
            format!("/proc/{initiator_pid}/net/snmp"),
            format!("/proc/{initiator_pid}/net/netstat"),
        ];
        if let Some(pid) = target_here {
            paths.push(format!("/proc/{pid}/stat"));
        }
        let initiator_processes = paths.len()..paths.len() + watched.initiator.len();
        paths.extend(
            watched
                .initiator
                .iter()
                .map(|pid| format!("/proc/{pid}/stat")),
        );
        let tools = paths.len()..paths.len() + watched.tools.len();
        paths.extend(watched.tools.iter().map(|pid| format!("/proc/{pid}/stat")));
        let (a, b) = (window.start.as_secs_f64(), window.end.as_secs_f64());
        let initiator = Sampler::start(&self.initiator, initiator_pid, a, b, paths);
        let target_side =
            (!self.same_host && !matches!(target.started, Started::External)).then(|| {
                // The host's own namespace: its TCP counters are the target's.
                let mut paths = [
                    "/proc/uptime",
                    "/proc/stat",
                    "/proc/net/snmp",
                    "/proc/net/netstat",
                ]
                .map(str::to_owned)
                .to_vec();
                if let Some(pid) = target.pid {
                    paths.push(format!("/proc/{pid}/stat"));
                }
                let now = since_start.as_secs_f64();
                let (a, b) = ((a - now).max(0.0), (b - now).max(0.1));
                Sampler::start(&self.target, 0, a, b, paths)
            });
        Samplers {
            initiator,
            initiator_processes,
            tools,
            target: target_side,
        }
    }
}

/// Reads a host's counters twice, at `$2` and `$3` seconds after process
/// `$1` started (or after now, for 0), printing the files given after them
/// as [`Host::read_many`] does, each set ended by a marker line. It sleeps
/// on the host's own clock, /proc/uptime; field 22 of /proc/PID/stat is the
/// process's start in clock ticks since boot.
const SAMPLER: &str = r#"anchor=$1 a=$2 b=$3; shift 3
if [ "$anchor" != 0 ]; then
    hz=$(getconf CLK_TCK)
    t0=$(sed 's/.*) //' "/proc/$anchor/stat" | awk -v hz="$hz" '{ printf "%.3f", $20 / hz }')
else
    t0=$(awk '{ print $1 }' /proc/uptime)
fi
snap() {
    at=$(awk -v t0="$t0" -v o="$1" '{ d = t0 + o - $1; if (d > 0) printf "%.3f", d; else print 0 }' /proc/uptime)
    shift
    sleep "$at"
    for f; do
        if cat "$f" 2>/dev/null; then echo; echo @@isoe-ok@@; else echo; echo @@isoe-missing@@; fi
    done
    echo @@isoe-sample@@
}
snap "$a" "$@"
snap "$b" "$@"
"#;

/// One host's sampler: the program, what it prints, and the files it reads.
struct Sampler {
    running: Option<Running>,
    output: Option<std::sync::mpsc::Receiver<String>>,
    files: usize,
    host: String,
    error: Option<HostError>,
}

/// Why a run's counters were not sampled on a host.
#[derive(Debug, thiserror::Error)]
enum SampleError {
    /// The sampler could not be started.
    #[error("sampling {host}: {source}")]
    Start {
        /// The host.
        host: String,
        /// Why.
        source: Box<HostError>,
    },
    /// It printed nothing in time.
    #[error("the counters of {0} did not come")]
    NoOutput(String),
    /// It printed fewer than both samples.
    #[error("{host} gave {got} of the 2 samples of its counters")]
    Short {
        /// The host.
        host: String,
        /// The samples it gave.
        got: usize,
    },
}

impl Sampler {
    fn start(host: &Host, anchor: u32, a: f64, b: f64, paths: Vec<String>) -> Sampler {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            SAMPLER.to_owned(),
            "sh".to_owned(),
            anchor.to_string(),
            format!("{a:.3}"),
            format!("{b:.3}"),
        ];
        let files = paths.len();
        argv.extend(paths);
        match host.spawn(&argv, Stdio::null()) {
            Ok(mut running) => {
                let output = running.take_stdout().map(host::collect);
                Sampler {
                    running: Some(running),
                    output,
                    files,
                    host: host.name(),
                    error: None,
                }
            }
            Err(e) => Sampler {
                running: None,
                output: None,
                files,
                host: host.name(),
                error: Some(e),
            },
        }
    }

    /// The two sets of files' texts, once the sampler has printed them.
    fn finish(mut self) -> Result<[Vec<Option<String>>; 2], SampleError> {
        if let Some(source) = self.error.take() {
            return Err(SampleError::Start {
                host: self.host,
                source: Box::new(source),
            });
        }
        let text = self
            .output
            .take()
            .and_then(|rx| rx.recv_timeout(SAMPLER_WAIT).ok());
        if let Some(running) = self.running.take() {
            let _ = running.stop(Duration::from_secs(1));
        }
        let Some(text) = text else {
            return Err(SampleError::NoOutput(self.host));
        };
        let sets: Vec<&str> = text.split("@@isoe-sample@@\n").collect();
        if sets.len() < 3 {
            return Err(SampleError::Short {
                host: self.host,
                got: sets.len().saturating_sub(1),
            });
        }
        Ok([
            host::split_many(sets[0], self.files),
            host::split_many(sets[1], self.files),
        ])
    }

    fn stop(mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop(Duration::from_secs(1));
        }
    }
}

/// How long after a run the lab waits for its samplers' last output.
const SAMPLER_WAIT: Duration = Duration::from_secs(30);

/// The samplers of one run.
struct Samplers {
    initiator: Sampler,
    /// Where the initiator's own processes' files are among the
    /// initiator sampler's.
    initiator_processes: std::ops::Range<usize>,
    /// Where the measurement's own programs' files are among them.
    tools: std::ops::Range<usize>,
    target: Option<Sampler>,
}

impl Samplers {
    fn stop(self) {
        self.initiator.stop();
        if let Some(t) = self.target {
            t.stop();
        }
    }

    /// Both moments' counters; an error saying why when a set is missing
    /// (the program ended before the window closed).
    fn finish(self) -> Result<[Option<BedSample>; 2], SampleError> {
        let at = Instant::now();
        let processes = self.initiator_processes.clone();
        let tools = self.tools.clone();
        let initiator = self.initiator.finish()?;
        let target = self.target.map(Sampler::finish).transpose()?;
        let mut out = [None, None];
        for (i, slot) in out.iter_mut().enumerate() {
            let files = &initiator[i];
            let Some(uptime) = files[0].as_deref().and_then(parse_uptime) else {
                continue;
            };
            let fio = (|| {
                Sample::parse(
                    files[1].as_deref()?,
                    files[2].as_deref()?,
                    files
                        .get(5)
                        .filter(|_| processes.start > 5)
                        .and_then(|f| f.as_deref()),
                    files[3].as_deref()?,
                    files[4].as_deref()?,
                    at,
                )
            })();
            let target_side = target.as_ref().and_then(|t| {
                let files = &t[i];
                Some(HostCpu {
                    uptime_s: parse_uptime(files[0].as_deref()?)?,
                    cpu: CpuTimes::parse(files[1].as_deref()?).ok()?,
                    tcp: TcpCounters::parse(files[2].as_deref()?, files[3].as_deref()?).ok(),
                    process: files
                        .get(4)
                        .and_then(|f| f.as_deref())
                        .and_then(|t| ProcessCpu::parse(t).ok()),
                })
            });
            *slot = Some(BedSample {
                uptime_s: uptime,
                initiator: fio,
                initiator_process: sum_processes(&files[processes.clone()]),
                tools: sum_processes(&files[tools.clone()]),
                target: target_side,
            });
        }
        Ok(out)
    }
}

/// The last lines of a program's stderr, for an error.
fn tail(text: &str) -> String {
    crate::ssh::tail(text.as_bytes())
}

/// Seconds since boot, the first field of `/proc/uptime`.
fn parse_uptime(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// What a measured run on the initiator host left.
/// A run's command line and the window it is measured over.
struct Load {
    argv: Vec<String>,
    /// The fio job, when the load is fio's.
    job: Option<FioJob>,
    window: Window,
}

struct Ran {
    /// Its standard output.
    stdout: String,
    /// Its standard error.
    stderr_text: String,
    status: std::process::ExitStatus,
    /// The counters at the window's start and end.
    first: BedSample,
    last: BedSample,
    /// When it started (RFC 3339 UTC).
    started_at: String,
    /// Other processes' load on this machine over the window.
    foreign: Option<crate::foreign::ForeignLoad>,
}

/// One moment's counters on a bed.
struct BedSample {
    /// The initiator host's clock.
    uptime_s: f64,
    /// The initiator host's /proc/stat and the initiator process's.
    initiator: Option<Sample>,
    /// The initiator's own processes, added up, where the program run is
    /// not the initiator (`isoe attach` under fio); None when there are
    /// none or one could not be read.
    initiator_process: Option<ProcessCpu>,
    /// The measurement's own programs there (blktrace), added up.
    tools: Option<ProcessCpu>,
    /// A target host of its own.
    target: Option<HostCpu>,
}

/// A target host's counters.
struct HostCpu {
    uptime_s: f64,
    cpu: CpuTimes,
    /// Its TCP counters (`/proc/net/snmp`, `/proc/net/netstat`).
    tcp: Option<TcpCounters>,
    process: Option<ProcessCpu>,
}

/// The measurement's own programs' CPU-seconds on the initiator host
/// between two readings (0 without any).
fn tools_cpu_s(first: &BedSample, last: &BedSample) -> f64 {
    match (&first.tools, &last.tools) {
        (Some(a), Some(b)) => a.delta_s(b),
        _ => 0.0,
    }
}

/// The initiator host's processes a run samples besides the program it
/// runs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Watched<'a> {
    /// The initiator's own (`isoe attach`'s), whose CPU is then the
    /// initiator process's.
    pub initiator: &'a [u32],
    /// The measurement's own programs (blktrace), whose CPU the host's
    /// figures leave out.
    pub tools: &'a [u32],
}

/// The texts of processes' `/proc/PID/stat`, their CPU added up; None
/// when there are none or one is missing (a process that ended mid-run
/// would make the sum a part).
fn sum_processes(stats: &[Option<String>]) -> Option<ProcessCpu> {
    if stats.is_empty() {
        return None;
    }
    stats.iter().try_fold(
        ProcessCpu {
            utime_ticks: 0,
            stime_ticks: 0,
        },
        |sum, text| {
            let p = ProcessCpu::parse(text.as_deref()?).ok()?;
            Some(ProcessCpu {
                utime_ticks: sum.utime_ticks + p.utime_ticks,
                stime_ticks: sum.stime_ticks + p.stime_ticks,
            })
        },
    )
}

/// The initiator's own processes' CPU over the window (`isoe attach`
/// under fio), as the initiator's: the column a block device's initiator
/// shares with `isoe bench` and libiscsi. The kernel's initiator has none.
fn add_initiator_process(result: &mut RunResult, first: &BedSample, last: &BedSample) {
    let (Some(a), Some(b)) = (&first.initiator_process, &last.initiator_process) else {
        return;
    };
    let Some(fb) = &last.initiator else {
        return;
    };
    // The initiator host's own clock between the two readings.
    let window_s = (last.uptime_s - first.uptime_s).max(0.0);
    let cpu_s = a.delta_s(b);
    let bench = &mut result.bench;
    let pct = demand::cpu_pct_of_machine(cpu_s, window_s, fb.cpu.ncpus);
    bench.initiator_cpu_s = cpu_s;
    bench.initiator_cpu_pct = pct;
    bench.initiator_cpu_us_per_io =
        (bench.iops > 0.0 && window_s > 0.0).then(|| cpu_s / window_s / bench.iops * 1e6);
    bench.initiator_mb_per_s_per_cpu_pct =
        pct.and_then(|p| demand::effectiveness_mb_per_s_per_cpu_pct(bench.mb_per_s, p));
}

/// The target's CPU over the window, from its own host's counters: its
/// process's time, or (LIO, kernel threads) the host's busy time; the
/// host's whole busy time per I/O unless `vm_here` (the bed's VM runs on
/// it too); and the host's TCP counters, the target side's retransmissions.
fn add_target_side(
    result: &mut RunResult,
    first: &BedSample,
    last: &BedSample,
    target: &BedTarget<'_>,
    vm_here: bool,
) {
    let (Some(a), Some(b)) = (&first.target, &last.target) else {
        return;
    };
    result.add_target_tcp(a.tcp.as_ref(), b.tcp.as_ref());
    let window_s = b.uptime_s - a.uptime_s;
    let bench = &mut result.bench;
    let (iops, mb_per_s) = (bench.iops, bench.mb_per_s);
    let split = CpuSplit::between(&a.cpu, &b.cpu, cpu::ticks_per_second());
    let (cpu_s, scope) = match (&a.process, &b.process, target.pid) {
        (Some(x), Some(y), Some(_)) => (x.delta_s(y), "process"),
        (_, _, None) => (split.busy_cpu_s, "host"),
        _ => return,
    };
    let pct = demand::cpu_pct_of_machine(cpu_s, window_s, b.cpu.ncpus);
    let per_io = (iops > 0.0 && window_s > 0.0).then(|| cpu_s / window_s / iops * 1e6);
    bench.target_pid = target.pid;
    bench.target_cpu_s = Some(cpu_s);
    bench.target_cpu_pct = pct;
    bench.target_cpu_us_per_io = per_io;
    bench.target_mb_per_s_per_cpu_pct =
        pct.and_then(|p| demand::effectiveness_mb_per_s_per_cpu_pct(mb_per_s, p));
    result.lab.target_cpu_scope = Some(scope.to_owned());
    // The host's whole busy time, unless the bed's own programs run there
    // too: the VM that is the initiator host takes most of such a host's
    // CPU, and the busy time less the VM's is within the two readings'
    // error of the target's own (measured on the TCG bed: from 0 to 1.6
    // times the target process's), so there is no figure to give.
    result.lab.target_host_cpu_us_per_io = (iops > 0.0 && window_s > 0.0 && !vm_here)
        .then(|| split.busy_cpu_s / window_s / iops * 1e6);
    result.lab.target_host_cpu = Some(split);
}

/// The `isoe attach` of the portal numbered `index` (`url`), for `knobs`:
/// named after the lab's PID and the portal, as deep as the kernel
/// initiator's device, with the session options `isoe attach` takes.
pub fn attach_request(
    isoe: &str,
    url: String,
    kind: AttachKind,
    index: usize,
    knobs: &KnobSet,
) -> Attach {
    Attach {
        isoe: isoe.to_owned(),
        url,
        kind,
        name: format!("isoe-lab-{}-{index}", std::process::id()),
        queue_depth: DEVICE_QUEUE_DEPTH,
        options: knobs.attach_args(),
    }
}

/// Cases on a test bed of machines ([`Bed`]): the target each case
/// chooses started there, the kernel initiator logged in or `isoe attach`'s
/// devices made when one of them is the initiator, one run per due
/// workload, then all of it stopped. A case the bed cannot run is skipped
/// with the reason; a host that stops answering fails the rest.
pub(crate) struct OnMachines<'a> {
    bed: Bed,
    plan: &'a Plan,
    stop: &'a AtomicBool,
}

impl<'a> OnMachines<'a> {
    /// Runs `plan`'s cases on `bed` until `stop`.
    pub(crate) fn new(bed: Bed, plan: &'a Plan, stop: &'a AtomicBool) -> OnMachines<'a> {
        OnMachines { bed, plan, stop }
    }
}

impl Site for OnMachines<'_> {
    fn run_case(
        &mut self,
        case: &ResolvedCase,
        workloads: &[String],
        runs: &mut CaseRuns<'_>,
    ) -> Result<CaseEnd, LabError> {
        let (plan, knobs, stop) = (self.plan, &case.knobs, self.stop);
        let bed = &mut self.bed;
        if let Some(why) = bed.unavailable(plan, knobs, workloads) {
            return Ok(CaseEnd::Skipped(why));
        }
        let mut skipped: BTreeMap<String, String> = knobs.unsupported_here().into_iter().collect();
        skipped.extend(bed.apply_knobs(knobs));
        let bed = &*bed;
        let target = match bed.start_target(&case.name, knobs, plan.run.span_bytes) {
            Ok(target) => target,
            Err(why) => return Ok(CaseEnd::Skipped(why.to_string())),
        };
        let lun_fill = match bed.fill_lun(plan, knobs, workloads, &target) {
            Ok(done) => done,
            // Ctrl-C reaches the fill too: the case is due again on resuming.
            Err(_) if stop.load(Ordering::Relaxed) => return Ok(CaseEnd::Ran),
            Err(why) => {
                return Ok(CaseEnd::Skipped(format!(
                    "writing the LUN before its reads failed: {why}"
                )))
            }
        };
        let devices = match bed.block_devices(&case.name, knobs, &target) {
            Ok(devices) => devices,
            Err(why) => return Ok(CaseEnd::Skipped(why.to_string())),
        };
        let setup = CaseSetup {
            topology: crate::plan::TopologyKind::Physical.as_str(),
            skipped: &skipped,
            nics: None,
        };
        let mut on = OnBed {
            target: &target,
            devices: &devices,
            apps: Apps::new(bed),
        };
        let ran = runs(setup, &mut |workload| {
            if let Some(why) = bed.gone() {
                // Recorded as failed; the rest of the plan is skipped.
                return Err(BenchFailure::Failed(why));
            }
            let before = bed.unwritten_read_bytes(knobs, &target);
            let mut measured = bed.run_workload(plan, knobs, workload, &mut on, stop)?;
            measured.result.lab.lun_fill = lun_fill;
            measured.result.lab.target_unwritten_read_bytes =
                fill::during(before, bed.unwritten_read_bytes(knobs, &target));
            Ok(measured)
        });
        if bed.gone().is_none() {
            for e in on.apps.cleanup() {
                let why = bed.failure_on_initiator(&format!("case {}", case.name), e);
                eprintln!("isoe lab: case {}: {why}", case.name);
            }
        }
        if bed.gone().is_none() {
            for e in devices.release() {
                let why = bed.failure_on_initiator(&format!("case {}", case.name), e);
                eprintln!("isoe lab: case {}: {why}", case.name);
            }
        }
        if let Err(e) = target.stop() {
            eprintln!("isoe lab: case {}: stopping the target: {e}", case.name);
        }
        ran.map(|()| CaseEnd::Ran)
    }

    fn close(self: Box<Self>) -> Vec<String> {
        let mut notes: Vec<String> = self.bed.gone().into_iter().collect();
        notes.extend(self.bed.close());
        notes
    }
}

/// What a case made on the bed for its runs.
pub(crate) struct OnBed<'c, 'b> {
    /// Its target.
    pub target: &'c BedTarget<'b>,
    /// Its initiator's block devices.
    pub devices: &'c BlockDevices<'b>,
    /// What its application workloads made.
    pub apps: Apps<'b>,
}

/// What a case's initiator made on the initiator host for fio to drive:
/// the kernel initiator's sessions, `isoe attach`'s devices, or nothing.
/// [`BlockDevices::release`] undoes it at the end of the case.
#[derive(Debug)]
pub enum BlockDevices<'b> {
    /// isoe bench and libiscsi need none.
    None,
    /// One open-iscsi session per portal.
    Kernel(Vec<KernelSession<'b>>),
    /// One `isoe attach` per portal.
    Attached(Vec<AttachedDevice<'b>>),
}

impl BlockDevices<'_> {
    /// The block devices, one per portal (`/dev/sdX`, `/dev/ublkbN`, `/dev/nbdN`).
    pub fn paths(&self) -> Vec<String> {
        match self {
            BlockDevices::None => Vec::new(),
            BlockDevices::Kernel(sessions) => sessions.iter().map(|s| s.device.clone()).collect(),
            BlockDevices::Attached(devices) => devices.iter().map(|d| d.device.clone()).collect(),
        }
    }

    /// The initiator's own processes on the initiator host: the `isoe
    /// attach` of each device. None for the kernel's initiator (its work
    /// is in kernel threads and softirq, which only the host's CPU shows)
    /// and where fio or isoe bench is the initiator.
    pub fn initiator_pids(&self) -> Vec<u32> {
        match self {
            BlockDevices::Attached(devices) => devices.iter().filter_map(|d| d.pid()).collect(),
            BlockDevices::None | BlockDevices::Kernel(_) => Vec::new(),
        }
    }

    /// Logs the sessions out, or detaches the devices (SIGTERM, and `isoe
    /// attach` exiting 0 once its device is gone); each failure's text.
    pub fn release(self) -> Vec<String> {
        match self {
            BlockDevices::None => Vec::new(),
            BlockDevices::Kernel(sessions) => sessions
                .into_iter()
                .filter_map(|s| s.logout().err().map(|e| format!("logging out: {e}")))
                .collect(),
            BlockDevices::Attached(devices) => devices
                .into_iter()
                .filter_map(|d| d.detach().err().map(|e| format!("detaching: {e}")))
                .collect(),
        }
    }
}

/// The kernel initiator's node settings for `knobs`: the iSCSI parameters
/// it offers, and the SCSI queue depth deep enough for the workload.
pub fn node_settings(knobs: &KnobSet) -> NodeSettings {
    NodeSettings {
        header_digest: knobs.header_digest,
        data_digest: knobs.data_digest,
        max_recv_data_segment_length: knobs.max_recv_data_segment_length,
        first_burst_length: knobs.first_burst_length,
        max_burst_length: knobs.max_burst_length,
        immediate_data: knobs.immediate_data,
        initial_r2t: knobs.initial_r2t,
        queue_depth: Some(DEVICE_QUEUE_DEPTH),
        // A lost session fails its I/O after 15 s rather than 120 s, so a
        // bed whose target went away ends the run instead of hanging it.
        replacement_timeout: Some(15),
    }
}

/// What serves a case on a bed.
pub enum Started<'b> {
    /// `isoe target` on the target host.
    Isoe(Running),
    /// LIO through configfs.
    Lio(crate::peers::lio::LioTarget<'b>),
    /// An existing array.
    External,
}

/// A target a bed started (or an external one), stopped on Drop.
pub struct BedTarget<'b> {
    /// What it is.
    pub started: Started<'b>,
    /// Its process's PID on its host, when it has one.
    pub pid: Option<u32>,
    /// The portals, as the initiator reaches them.
    pub portals: Vec<SocketAddr>,
    /// Its name.
    pub iqn: String,
    /// The LUN the runs use.
    pub lun: u16,
    /// Its size, bytes.
    pub size_bytes: u64,
}

impl BedTarget<'_> {
    /// `iscsi://PORTAL/IQN/LUN`, one per portal.
    pub fn urls(&self) -> Vec<String> {
        self.portals
            .iter()
            .map(|p| format!("iscsi://{p}/{}/{}", self.iqn, self.lun))
            .collect()
    }

    /// Stops it; an error when its host could not be told.
    pub fn stop(mut self) -> Result<(), HostError> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<(), HostError> {
        match std::mem::replace(&mut self.started, Started::External) {
            Started::Isoe(running) => running.stop(STOP_GRACE),
            Started::Lio(lio) => lio.stop(),
            Started::External => Ok(()),
        }
    }
}

impl Drop for BedTarget<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.stop_now() {
            eprintln!("isoe lab: stopping the target: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn isoe_attach_s_processes_are_the_initiator_s_cpu_beside_fio_s() {
        let proc_stat = |ticks: u64| {
            format!("7 (isoe) S 0 0 0 0 0 0 0 0 0 0 {ticks} {ticks} 0 0 20 0 1 0 0 0 0")
        };
        let stat = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n";
        let snmp = "Tcp: OutSegs RetransSegs\nTcp: 0 0\n";
        let netstat = "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n";
        let t0 = Instant::now();
        let sample = |at: Instant, fio: u64, attach: [u64; 2]| BedSample {
            uptime_s: 100.0 + at.duration_since(t0).as_secs_f64(),
            initiator: Sample::parse(stat, &proc_stat(fio), None, snmp, netstat, at),
            initiator_process: sum_processes(&attach.map(|t| Some(proc_stat(t)))),
            tools: None,
            target: None,
        };
        // Two devices' processes, 100 + 50 ticks each of user and system
        // time over 2 s: 3 CPU-seconds, at 1,000 IOPS 1,500 µs per I/O.
        let first = sample(t0, 0, [0, 0]);
        let last = sample(t0 + Duration::from_secs(2), 400, [100, 50]);
        let mut result = RunResult::for_tests(json!({"iops": 1000.0, "initiator_cpu_s": 8.0}));
        result.load_is_not_the_initiator();
        add_initiator_process(&mut result, &first, &last);
        let hz = cpu::ticks_per_second() as f64;
        let cpu_s = 300.0 / hz;
        assert!((result.bench.initiator_cpu_s - cpu_s).abs() < 1e-9);
        let per_io = result.bench.initiator_cpu_us_per_io.unwrap();
        assert!(
            (per_io - cpu_s / 2.0 / 1000.0 * 1e6).abs() < 1e-6,
            "{per_io}"
        );
        // fio's own time stays the load's.
        assert_eq!(result.lab.load_cpu_s, Some(8.0));
        // One process unread: no figure rather than half of one.
        assert!(sum_processes(&[Some(proc_stat(1)), None]).is_none());
        assert!(sum_processes(&[]).is_none());
    }

    #[test]
    fn uptime_is_the_first_field() {
        assert_eq!(parse_uptime("4123.56 8000.12\n"), Some(4123.56));
        assert_eq!(parse_uptime(""), None);
    }

    #[test]
    fn the_kernel_initiator_offers_the_knobs_and_a_deep_queue() {
        let knobs = KnobSet {
            header_digest: Some(true),
            immediate_data: Some(false),
            max_burst_length: Some(262_144),
            ..KnobSet::default()
        };
        let s = node_settings(&knobs);
        assert_eq!(s.header_digest, Some(true));
        assert_eq!(s.immediate_data, Some(false));
        assert_eq!(s.max_burst_length, Some(262_144));
        assert_eq!(s.data_digest, None, "unset knobs keep open-iscsi's default");
        assert_eq!(s.queue_depth, Some(128));
    }

    #[test]
    fn attach_is_asked_for_a_named_device_as_deep_as_the_kernel_s() {
        let knobs = KnobSet {
            header_digest: Some(true),
            connections: Some(2),
            workers: Some(4),
            ..KnobSet::default()
        };
        let url = "iscsi://10.0.2.2:3260/iqn.2026-11.io.isoe:lab/0".to_owned();
        let a = attach_request("/tmp/isoe-lab.x/isoe", url, AttachKind::Nbd, 1, &knobs);
        assert_eq!(
            a.argv(),
            [
                "/tmp/isoe-lab.x/isoe",
                "attach",
                "iscsi://10.0.2.2:3260/iqn.2026-11.io.isoe:lab/0",
                "--nbd",
                "--name",
                &format!("isoe-lab-{}-1", std::process::id()),
                "--queue-depth",
                "128",
                "--header-digest",
                "--connections",
                "2",
            ]
        );
        assert_eq!(node_settings(&knobs).queue_depth, Some(a.queue_depth));
        assert!(BlockDevices::None.paths().is_empty());
        assert!(BlockDevices::None.release().is_empty());
    }

    /// A bed of this machine alone, with two portals, its initiators'
    /// `isoe` the script `isoe` in `dir`: it records its arguments in
    /// `args-NAME`, runs `on_start` (`$name` is the device's name), then
    /// serves `/dev/ublkbN` for the device named `isoe-lab-PID-N` until
    /// SIGTERM, on which it writes `detached-NAME` and exits 0.
    fn local_bed(dir: &Path, on_start: &str) -> (Bed, BedTarget<'static>) {
        use std::os::unix::fs::PermissionsExt;
        let isoe = dir.join("isoe");
        let d = dir.display();
        std::fs::write(
            &isoe,
            format!(
                "#!/bin/sh\nname=$5\nprintf '%s\\n' \"$@\" > '{d}/args-'\"$name\"\n{on_start}\n\
                 trap 'touch \"{d}/detached-$name\"; exit 0' TERM\n\
                 echo \"/dev/ublkb${{name##*-}}\"\nwhile :; do sleep 0.05; done\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&isoe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let testbed = Testbed::parse(
            &format!(
                "[initiator]\nhost = \"local\"\nisoe = \"{}\"\n[target]\nhost = \"local\"\n\
                 portals = [\"127.0.0.1:3260\", \"127.0.0.2:3260\"]\n",
                isoe.display()
            ),
            "bed.toml",
        )
        .unwrap();
        let bed = Bed::connect(testbed, &isoe, dir, &[]).unwrap();
        let target = BedTarget {
            started: Started::External,
            pid: None,
            portals: bed.testbed.target.portals.clone(),
            iqn: TARGET_IQN.to_owned(),
            lun: 0,
            size_bytes: 0,
        };
        (bed, target)
    }

    /// A bed whose initiator host went away mid-run still removes what
    /// it made on this machine.
    #[test]
    fn closing_after_a_host_went_away_still_cleans_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (bed, target) = local_bed(dir.path(), "");
        drop(target);
        let work = PathBuf::from(&bed.initiator_dir);
        assert!(work.is_dir(), "{}", work.display());
        *bed.gone.borrow_mut() = Some("the initiator host stopped answering".into());
        let problems = bed.close();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(!work.exists(), "{} left behind", work.display());
    }

    #[test]
    fn a_case_attaches_one_device_per_portal_and_detaches_them() {
        let dir = tempfile::tempdir().unwrap();
        let (bed, target) = local_bed(dir.path(), "");
        let knobs = KnobSet {
            initiator: Some(InitiatorImpl::IsoeUblk),
            data_digest: Some(true),
            ..KnobSet::default()
        };
        let devices = bed.block_devices("ublk", &knobs, &target).unwrap();
        assert_eq!(devices.paths(), ["/dev/ublkb0", "/dev/ublkb1"]);
        let name = format!("isoe-lab-{}-1", std::process::id());
        let args = std::fs::read_to_string(dir.path().join(format!("args-{name}"))).unwrap();
        assert_eq!(
            args.lines().collect::<Vec<_>>(),
            [
                "attach",
                "iscsi://127.0.0.2:3260/iqn.2026-11.io.isoe:lab/0",
                "--ublk",
                "--name",
                &name,
                "--queue-depth",
                "128",
                "--data-digest",
            ]
        );
        assert_eq!(devices.release(), Vec::<String>::new());
        for n in 0..2 {
            let id = std::process::id();
            assert!(dir
                .path()
                .join(format!("detached-isoe-lab-{id}-{n}"))
                .exists());
        }
        // isoe bench makes no device.
        let isoe_bench = KnobSet::default();
        assert!(matches!(
            bed.block_devices("isoe", &isoe_bench, &target),
            Ok(BlockDevices::None)
        ));
        drop(target);
        assert!(bed.close().is_empty());
    }

    #[test]
    fn a_portal_that_fails_to_attach_detaches_the_others_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let (bed, target) = local_bed(
            dir.path(),
            "case $name in *-1) echo 'login to 127.0.0.2:3260 refused' >&2; exit 1;; esac",
        );
        let knobs = KnobSet {
            initiator: Some(InitiatorImpl::IsoeNbd),
            ..KnobSet::default()
        };
        let why = bed
            .block_devices("nbd", &knobs, &target)
            .unwrap_err()
            .to_string();
        assert!(
            why.starts_with("isoe attach --nbd iscsi://127.0.0.2:3260/iqn.2026-11.io.isoe:lab/0 on this machine could not log in")
                && why.contains("login to 127.0.0.2:3260 refused"),
            "{why}"
        );
        let first = format!("detached-isoe-lab-{}-0", std::process::id());
        assert!(dir.path().join(first).exists(), "the first device went");
        drop(target);
        assert!(bed.close().is_empty());
    }

    #[test]
    fn a_target_host_of_its_own_gives_the_target_cpu() {
        let stat = |busy: u64, idle: u64| {
            CpuTimes::parse(&format!(
                "cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n"
            ))
            .unwrap()
        };
        let process = |ticks: u64| {
            ProcessCpu::parse(&format!(
                "7 (isoe) S 1 7 7 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 4 0 1 0 0"
            ))
            .unwrap()
        };
        let tcp = |out: u64, retrans: u64| {
            TcpCounters::parse(
                &format!("Tcp: OutSegs RetransSegs\nTcp: {out} {retrans}\n"),
                "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n",
            )
            .unwrap()
        };
        let sample = |t: f64, busy, idle, ticks, segs: (u64, u64)| BedSample {
            uptime_s: t,
            initiator: None,
            initiator_process: None,
            tools: None,
            target: Some(HostCpu {
                uptime_s: t,
                cpu: stat(busy, idle),
                tcp: Some(tcp(segs.0, segs.1)),
                process: Some(process(ticks)),
            }),
        };
        let hz = cpu::ticks_per_second();
        let (a, b) = (
            sample(100.0, 0, 0, 0, (5_000, 40)),
            sample(102.0, hz, hz, hz / 2, (105_000, 151)),
        );
        let target = BedTarget {
            started: Started::External,
            pid: Some(7),
            portals: Vec::new(),
            iqn: String::new(),
            lun: 0,
            size_bytes: 0,
        };
        let mut result = RunResult::for_tests(json!({"iops": 1000.0, "mb_per_s": 4.0}));
        add_target_side(&mut result, &a, &b, &target, false);
        let bench = result.to_json();
        // Half a CPU-second over 2 s at 1000 IOPS: 250 µs per I/O.
        assert_eq!(bench["target_cpu_s"], json!(0.5));
        assert_eq!(bench["target_cpu_us_per_io"], json!(250.0));
        assert_eq!(bench["target_cpu_scope"], json!("process"));
        assert_eq!(bench["target_cpu_pct"], json!(25.0));
        // The target host's own retransmissions: 111 of 100,000 sent.
        assert_eq!(bench["target_tcp_out_segs"], json!(100_000));
        assert_eq!(bench["target_tcp_retrans_segs"], json!(111));
        assert_eq!(bench["target_tcp_retrans_pct"], json!(0.111));
        // The host's whole busy time beside it: one CPU-second, 500 µs.
        assert_eq!(bench["target_host_cpu_us_per_io"], json!(500.0));
        // A host that runs the bed's own programs too (the VM) has no such
        // figure: the VM's time is most of it.
        let mut result = RunResult::for_tests(json!({"iops": 1000.0, "mb_per_s": 4.0}));
        add_target_side(&mut result, &a, &b, &target, true);
        assert_eq!(result.lab.target_host_cpu_us_per_io, None);
        assert_eq!(result.bench.target_cpu_us_per_io, Some(250.0));
    }
}
