//! The run: worker threads, each with its own initiator [`Engine`] and
//! sessions, keep `queue_depth` commands in flight per URL; the main thread
//! times the ramp and the measured window and samples the CPU and TCP
//! counters at its edges.
//!
//! Workers share nothing on the command path: per-worker, per-URL
//! histograms and counters are merged after the run; progress goes through
//! two relaxed atomics per worker, updated once per batch; the per-second
//! series through a channel each worker sends its tally of a second down,
//! once a second (see [`crate::series`]).

use crate::address::{Access, AccessPattern};
use crate::cpu::{self, CpuSplit, CpuTimes, ProcessCpu};
use crate::foreign::{self, Snapshot};
use crate::halt::{ErrorBound, ErrorWatch, Halt};
use crate::host::Host;
use crate::report::{DirectionMeasurements, Measurements, UrlMeasurements};
use crate::series::{self, Collector, SecondMessage, SecondSampler, SecondTally};
use crate::target_pid;
use crate::tcp::TcpCounters;
use crate::verify;
use crate::workload::Workload;
use isoe_initiator::cdb::{self, Capacity};
use isoe_initiator::{
    describe_status_in_words, Command, Completion, Direction, Engine, EngineStats, InitiatorError,
    IscsiUrl, MultipathOptions, MultipathStats, Outcome, PathReport, SessionConfig, SocketOptions,
};
use isoe_wire::login::InitiatorChap;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};
use thiserror::Error;

/// Error and mismatch messages kept per run.
const MESSAGES_MAX: usize = 20;
/// How long outstanding commands may take to finish after the window.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Verified chunks tracked per worker and URL; beyond this the region is cut.
const VERIFY_CHUNKS_MAX: u64 = 1 << 26;

/// SPC-4 sense key UNIT ATTENTION.
pub(crate) const SENSE_UNIT_ATTENTION: u8 = 0x06;

const PHASE_SETUP: u8 = 0;
const PHASE_RAMP: u8 = 1;
const PHASE_MEASURE: u8 = 2;
const PHASE_DRAIN: u8 = 3;

/// Why a run could not be done.
#[derive(Debug, Error)]
pub enum RunError {
    /// The workload is not runnable.
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    /// A URL is malformed, or names no LUN.
    #[error("{0}")]
    Url(String),
    /// Logging in or sizing a LUN failed.
    #[error("{url}: {what}")]
    Setup {
        /// The URL, password removed.
        url: String,
        /// What failed.
        what: String,
    },
    /// Logging in to a URL failed: the target refused the login (CHAP, ACL,
    /// no such target) or could not be reached.
    #[error("{url}: {source}")]
    Login {
        /// The URL, password removed.
        url: String,
        /// Why (boxed: the error is large and this path is cold).
        source: Box<InitiatorError>,
    },
    /// The URLs given as paths of one LU cannot be: they name different
    /// LUs, one fails, or none serves I/O (the text says which).
    #[error("{0}")]
    Multipath(String),
    /// /proc could not be read.
    #[error("reading CPU or TCP counters: {0}")]
    Proc(#[from] crate::proc_error::ProcError),
}

/// How sessions are opened, beyond what the URL says.
#[derive(Debug, Clone)]
pub struct SessionTemplate {
    /// InitiatorName.
    pub initiator_name: String,
    /// Offer only HeaderDigest=CRC32C.
    pub header_digest: bool,
    /// Offer only DataDigest=CRC32C.
    pub data_digest: bool,
    /// TCP knobs.
    pub socket: SocketOptions,
    /// CHAP of each URL that logs in with it, as the caller resolved it
    /// (from flags, environment, the URL's user and password); a URL not
    /// listed logs in as [`SessionConfig::from_url`] says.
    pub chap: Vec<(IscsiUrl, InitiatorChap)>,
    /// ImmediateData / InitialR2T / MaxRecvDataSegmentLength / FirstBurstLength / MaxBurstLength overrides.
    pub immediate_data: Option<bool>,
    /// InitialR2T override.
    pub initial_r2t: Option<bool>,
    /// MaxRecvDataSegmentLength override.
    pub max_recv_data_segment_length: Option<u32>,
    /// FirstBurstLength override.
    pub first_burst_length: Option<u32>,
    /// MaxBurstLength override.
    pub max_burst_length: Option<u32>,
}

impl Default for SessionTemplate {
    fn default() -> Self {
        SessionTemplate {
            initiator_name: isoe_initiator::DEFAULT_INITIATOR_NAME.into(),
            header_digest: false,
            data_digest: false,
            socket: SocketOptions::default(),
            chap: Vec::new(),
            immediate_data: None,
            initial_r2t: None,
            max_recv_data_segment_length: None,
            first_burst_length: None,
            max_burst_length: None,
        }
    }
}

impl SessionTemplate {
    /// The session configuration for `url` with `connections` connections.
    pub fn config(&self, url: &IscsiUrl, connections: u16) -> SessionConfig {
        let mut c = SessionConfig::from_url(url);
        c.initiator_name = self.initiator_name.clone();
        c.set_digests(self.header_digest, self.data_digest);
        c.socket = self.socket;
        c.connections = connections;
        if let Some((_, chap)) = self.chap.iter().find(|(u, _)| u == url) {
            c.chap = Some(chap.clone());
        }
        let p = &mut c.params;
        if let Some(v) = self.immediate_data {
            p.immediate_data = v;
        }
        if let Some(v) = self.initial_r2t {
            p.initial_r2t = v;
        }
        if let Some(v) = self.max_recv_data_segment_length {
            p.max_recv_data_segment_length = v;
        }
        if let Some(v) = self.first_burst_length {
            p.first_burst_length = v;
        }
        if let Some(v) = self.max_burst_length {
            p.max_burst_length = v;
        }
        c
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// What to run (its `urls` are shown with passwords removed).
    pub workload: Workload,
    /// The URLs, with credentials.
    pub urls: Vec<IscsiUrl>,
    /// Some: the URLs are paths of one logical unit, driven as one volume
    /// through a multipath LU of the initiator with these options (each
    /// worker session is then one such LU).
    pub multipath: Option<MultipathOptions>,
    /// Session options.
    pub session: SessionTemplate,
    /// The target's PID; None looks for a local listener on the URL's port.
    pub target_pid: Option<u32>,
    /// Print a live progress line to stderr once a second.
    pub progress: bool,
    /// Set to end the run early (Ctrl-C); the window is cut short and
    /// measured as is, and the result says `interrupted`.
    pub stop: Arc<AtomicBool>,
    /// The failures that stop the run (its LUN gone stops it always).
    pub error_bound: ErrorBound,
}

/// A run's measurements and what went wrong in it.
#[derive(Debug)]
pub struct RunOutcome {
    /// The raw measurements (see [`crate::BenchResult::compute`]).
    pub measurements: Measurements,
    /// The first error and mismatch messages.
    pub messages: Vec<String>,
    /// The initiator engines' counters, summed (syscalls, reconnects).
    pub engine: EngineStats,
    /// Connections per session actually opened (the target may allow fewer).
    pub connections_per_session: u32,
    /// Commands completed over the whole run, ramp and drain included
    /// (the span the engine counters cover).
    pub total_ios: u64,
    /// Commands repeated after a UNIT ATTENTION (not errors).
    pub unit_attentions: u64,
    /// Reads checked against what was written (`--verify`).
    pub verified_reads: u64,
    /// The longest time, in any worker, between two answered commands
    /// while commands were outstanding, from the first command to the end
    /// of the window: what a failover costs the application.
    pub io_gap_max_s: f64,
    /// What the multipath LUs did, when the URLs were paths of one.
    pub multipath: Option<MultipathOutcome>,
}

/// What the multipath LUs did over a run (`"multipath"` in the JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultipathOutcome {
    /// Times a path carrying commands became unusable (its connection lost,
    /// or it refused with an ALUA state), in all the workers' LUs.
    pub failovers: u64,
    /// Commands sent again through another path after theirs was lost.
    pub reissued: u64,
    /// Commands sent again after an ALUA sense.
    pub retried: u64,
    /// Commands failed for want of a path within the failover time.
    pub expired: u64,
    /// The longest time without an answered command around one failover,
    /// seconds (the LU's own measure; `io_gap_max_s` is the workers').
    pub failover_gap_max_s: f64,
    /// The failover time the LUs ran with, seconds.
    pub failover_timeout_s: f64,
    /// Each path, in the order of the URLs.
    pub paths: Vec<PathOutcome>,
}

/// One path of a multipath run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathOutcome {
    /// The URL, password removed.
    pub url: String,
    /// Its target port group (VPD page 83h, REPORT TARGET PORT GROUPS).
    pub target_port_group: Option<u16>,
    /// Its relative target port.
    pub relative_target_port: Option<u16>,
    /// Its group's ALUA state when the run ended, as read through it.
    pub alua_state: Option<String>,
    /// PREF of its group.
    pub preferred: bool,
    /// `probing`, `ready`, `down` or `failed` when the run ended.
    pub status: String,
    /// Commands answered through it over the whole run (ramp and drain
    /// included), all workers.
    pub commands: u64,
    /// Times its connection was lost, all workers.
    pub downs: u64,
    /// Why it was last down or failed.
    pub reason: Option<String>,
}

impl MultipathOutcome {
    /// Adds one LU's figures; the paths' states are the first LU's.
    fn add(&mut self, stats: &MultipathStats, paths: &[PathReport]) {
        self.failovers += stats.failovers;
        self.reissued += stats.reissued;
        self.retried += stats.retried;
        self.expired += stats.expired;
        self.failover_gap_max_s = self
            .failover_gap_max_s
            .max(stats.failover_gap_max.as_secs_f64());
        let fresh = self.paths.is_empty();
        if fresh {
            self.paths = vec![PathOutcome::default(); paths.len()];
        }
        for (sum, p) in self.paths.iter_mut().zip(paths) {
            if fresh {
                sum.target_port_group = p.port_group;
                sum.relative_target_port = p.relative_port;
                sum.alua_state = p.state.map(|s| s.name().to_string());
                sum.preferred = p.preferred;
                sum.status = p.status.name().to_string();
            }
            sum.commands += p.commands;
            sum.downs += p.downs;
            if p.reason.is_some() {
                sum.reason.clone_from(&p.reason);
            }
        }
    }

    /// Another worker's figures.
    fn merge(&mut self, other: &MultipathOutcome) {
        self.failovers += other.failovers;
        self.reissued += other.reissued;
        self.retried += other.retried;
        self.expired += other.expired;
        self.failover_gap_max_s = self.failover_gap_max_s.max(other.failover_gap_max_s);
        if self.paths.is_empty() {
            self.paths.clone_from(&other.paths);
            return;
        }
        for (sum, p) in self.paths.iter_mut().zip(&other.paths) {
            sum.commands += p.commands;
            sum.downs += p.downs;
            if sum.reason.is_none() {
                sum.reason.clone_from(&p.reason);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Lun {
    block_size: u32,
    blocks: u64,
}

/// Runs `config` to the end and returns the measurements.
pub fn run(config: RunConfig) -> Result<RunOutcome, RunError> {
    config.workload.validate()?;
    if config.urls.is_empty() {
        return Err(RunError::Url("at least one iscsi:// URL is needed".into()));
    }
    let luns = match config.multipath {
        Some(options) => vec![probe_multipath(&config, options)?],
        None => (config.urls.iter())
            .map(|url| probe(url, &config))
            .collect::<Result<_, _>>()?,
    };
    let target_pid = config
        .target_pid
        .or_else(|| local_target_pid(&config.urls[0]));

    let w = &config.workload;
    let phase = Arc::new(AtomicU8::new(PHASE_SETUP));
    let halt = Arc::new(Halt::default());
    // When the measured window began: set before the phase says so.
    let window_start = Arc::new(OnceLock::<Instant>::new());
    let counters: Vec<Arc<(AtomicU64, AtomicU64)>> = (0..w.workers)
        .map(|_| Arc::new((AtomicU64::new(0), AtomicU64::new(0))))
        .collect();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<u32, String>>();
    let (second_tx, second_rx) = mpsc::channel::<SecondMessage>();
    let shared = Shared {
        phase: phase.clone(),
        window_start: window_start.clone(),
        halt: halt.clone(),
    };
    let handles = start_workers(&config, &luns, &shared, &counters, ready_tx, second_tx)?;
    let connections_per_session = match await_setup(&ready_rx, w.workers) {
        Ok(c) => c,
        Err(what) => {
            // Those whose sessions are up are told to end, and awaited.
            phase.store(PHASE_DRAIN, Ordering::SeqCst);
            handles.into_iter().for_each(|h| drop(h.join()));
            let url = config.urls[0].to_string();
            return Err(RunError::Setup { url, what });
        }
    };

    let mut progress = Progress::new(config.progress, &counters);
    let mut collector = Collector::new(w.workers);
    phase.store(PHASE_RAMP, Ordering::SeqCst);
    let cut = || config.stop.load(Ordering::Relaxed) || halt.is_set();
    let cut_in_ramp = progress.sleep(Duration::from_secs_f64(w.ramp_s), &cut, &mut || {});

    let hz = cpu::ticks_per_second();
    let before = Readings::take(target_pid)?;
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    // Stopped during the ramp: no window at all, nothing measured.
    let cut_in_window = !cut_in_ramp && {
        let _ = window_start.set(t0);
        phase.store(PHASE_MEASURE, Ordering::SeqCst);
        progress.sleep(Duration::from_secs_f64(w.duration_s), &cut, &mut || {
            collector.drain(&second_rx)
        })
    };
    phase.store(PHASE_DRAIN, Ordering::SeqCst);
    let elapsed_s = if cut_in_ramp {
        0.0
    } else {
        t0.elapsed().as_secs_f64()
    };
    // A signal interrupts; a halt is the run's own doing, said apart.
    let interrupted = (cut_in_ramp || cut_in_window) && !halt.is_set();
    let after = Readings::take_after(target_pid)?;
    progress.finish();

    let Gathered { per_url, sum: g } = gather(handles, &config);
    let mut read = DirectionMeasurements::default();
    let mut write = DirectionMeasurements::default();
    for u in &per_url {
        read.add(&u.read);
        write.add(&u.write);
    }
    let series = collector.finish(&second_rx, elapsed_s);
    let target_cpu_s = match (before.target, after.target) {
        (Some(a), Some(b)) => Some(a.delta_s(&b)),
        _ => None,
    };
    let own: Vec<u32> = std::iter::once(std::process::id())
        .chain(target_pid)
        .collect();
    let foreign = match (&before.snapshot, &after.snapshot) {
        (Some(a), Some(b)) => foreign::between(a, b, &own),
        _ => None,
    };
    let measurements = Measurements {
        workload: w.clone(),
        started_at,
        elapsed_s,
        read,
        write,
        errors: g.errors,
        verify_errors: g.verify_errors,
        cpu: CpuSplit::between(&before.cpu, &after.cpu, hz),
        initiator_cpu_s: before.own.delta_s(&after.own),
        target_cpu_s,
        target_pid: target_cpu_s.and(target_pid),
        tcp: before.tcp.delta(&after.tcp),
        host: Host::read(),
        per_url,
        series,
        interrupted,
        stopped: halt.reason().map(String::from),
        foreign,
    };
    Ok(RunOutcome {
        measurements,
        messages: g.messages,
        engine: g.engine,
        connections_per_session,
        total_ios: g.total_ios,
        unit_attentions: g.unit_attentions,
        verified_reads: g.verified_reads,
        io_gap_max_s: g.io_gap_max.as_secs_f64(),
        multipath: g.multipath,
    })
}

/// The PID of the target listening on `url`'s portal, when it is on this
/// machine and not this process.
fn local_target_pid(url: &IscsiUrl) -> Option<u32> {
    let p = &url.portal;
    target_pid::is_local(&p.host)
        .then(|| target_pid::listener_pid(p.port))
        .flatten()
        .filter(|pid| *pid != std::process::id())
}

/// The counters read at each end of the measured window.
struct Readings {
    /// Every process's CPU, for the foreign load.
    snapshot: Option<Snapshot>,
    cpu: CpuTimes,
    /// This process's CPU.
    own: ProcessCpu,
    target: Option<ProcessCpu>,
    tcp: TcpCounters,
}

impl Readings {
    /// At the window's start: the /proc walk first, outside the CPU
    /// readings (it costs the initiator CPU).
    fn take(target_pid: Option<u32>) -> Result<Readings, RunError> {
        let snapshot = Snapshot::take();
        Ok(Readings {
            snapshot,
            cpu: CpuTimes::read()?,
            own: cpu::self_cpu()?,
            target: target_pid.and_then(|p| cpu::read_process(p).ok()),
            tcp: TcpCounters::read()?,
        })
    }

    /// At the window's end: the /proc walk last, for the same reason.
    fn take_after(target_pid: Option<u32>) -> Result<Readings, RunError> {
        let cpu = CpuTimes::read()?;
        let own = cpu::self_cpu()?;
        let target = target_pid.and_then(|p| cpu::read_process(p).ok());
        let tcp = TcpCounters::read()?;
        Ok(Readings {
            snapshot: Snapshot::take(),
            cpu,
            own,
            target,
            tcp,
        })
    }
}

/// What the run shares with its workers.
struct Shared {
    phase: Arc<AtomicU8>,
    /// When the measured window began.
    window_start: Arc<OnceLock<Instant>>,
    halt: Arc<Halt>,
}

/// Starts one thread per worker of `config`'s workload, each reporting its
/// setup on `ready`, its seconds on `seconds_out` and its progress in its
/// `counters`.
fn start_workers(
    config: &RunConfig,
    luns: &[Lun],
    shared: &Shared,
    counters: &[Arc<(AtomicU64, AtomicU64)>],
    ready: mpsc::Sender<Result<u32, String>>,
    seconds_out: mpsc::Sender<SecondMessage>,
) -> Result<Vec<thread::JoinHandle<WorkerResult>>, RunError> {
    let w = &config.workload;
    let seconds = series::seconds_in(w.duration_s);
    let mut handles = Vec::new();
    for worker in 0..w.workers {
        let spec = WorkerSpec {
            worker,
            workers: w.workers,
            workload: w.clone(),
            urls: config.urls.clone(),
            luns: luns.to_vec(),
            template: config.session.clone(),
            multipath: config.multipath,
            error_bound: config.error_bound,
            halt: shared.halt.clone(),
        };
        let (phase, start, counters, ready) = (
            shared.phase.clone(),
            shared.window_start.clone(),
            counters[worker as usize].clone(),
            ready.clone(),
        );
        let sampler = SecondSampler::new(seconds_out.clone(), worker, seconds);
        handles.push(
            thread::Builder::new()
                .name(format!("bench-worker-{worker}"))
                .spawn(move || run_worker(spec, &phase, &start, &counters, ready, sampler))
                .map_err(|e| RunError::Url(format!("cannot start a worker thread: {e}")))?,
        );
    }
    Ok(handles)
}

/// Waits for every worker's word that its sessions are up: the fewest
/// connections a session got (0 with none), or the first setup error.
fn await_setup(ready: &mpsc::Receiver<Result<u32, String>>, workers: u32) -> Result<u32, String> {
    let mut connections_per_session = u32::MAX;
    let mut setup_error = None;
    for _ in 0..workers {
        match ready.recv() {
            Ok(Ok(c)) => connections_per_session = connections_per_session.min(c),
            Ok(Err(e)) => setup_error = setup_error.or(Some(e)),
            Err(_) => setup_error = setup_error.or(Some("a worker ended during setup".into())),
        }
    }
    match setup_error {
        Some(what) => Err(what),
        None if connections_per_session == u32::MAX => Ok(0),
        None => Ok(connections_per_session),
    }
}

/// What the workers did, summed once they have ended: per volume, and the
/// rest in one [`WorkerResult`] (its `urls` and `second` unused).
struct Gathered {
    per_url: Vec<UrlMeasurements>,
    sum: WorkerResult,
}

/// Joins the workers and sums their results (a worker that panicked
/// counts as an error).
fn gather(handles: Vec<thread::JoinHandle<WorkerResult>>, config: &RunConfig) -> Gathered {
    let mut per_url: Vec<UrlMeasurements> = volume_names(config)
        .into_iter()
        .map(|url| UrlMeasurements {
            url,
            ..UrlMeasurements::default()
        })
        .collect();
    let mut sum = WorkerResult {
        multipath: config.multipath.map(|options| MultipathOutcome {
            failover_timeout_s: options.failover_timeout.as_secs_f64(),
            ..MultipathOutcome::default()
        }),
        ..WorkerResult::default()
    };
    for h in handles {
        let r = h.join().unwrap_or_else(|_| WorkerResult::panicked());
        for (total, u) in per_url.iter_mut().zip(&r.urls) {
            total.read.add(&u.read);
            total.write.add(&u.write);
            total.errors += u.errors;
        }
        sum.errors += r.errors;
        sum.verify_errors += r.verify_errors;
        for m in r.messages {
            sum.note(m);
        }
        sum.engine.sends += r.engine.sends;
        sum.engine.recvs += r.engine.recvs;
        sum.engine.polls += r.engine.polls;
        sum.engine.reconnects += r.engine.reconnects;
        sum.total_ios += r.total_ios;
        sum.unit_attentions += r.unit_attentions;
        sum.verified_reads += r.verified_reads;
        sum.io_gap_max = sum.io_gap_max.max(r.io_gap_max);
        if let (Some(all), Some(mine)) = (sum.multipath.as_mut(), r.multipath.as_ref()) {
            all.merge(mine);
        }
    }
    if let Some(m) = sum.multipath.as_mut() {
        for (path, url) in m.paths.iter_mut().zip(&config.urls) {
            path.url = url.to_string();
        }
    }
    Gathered { per_url, sum }
}

/// What each volume is called in `per_url`: each URL, or all of them as
/// the paths of one LU.
fn volume_names(config: &RunConfig) -> Vec<String> {
    let urls = config.urls.iter().map(ToString::to_string);
    if config.multipath.is_some() {
        vec![format!(
            "multipath: {}",
            urls.collect::<Vec<_>>().join(", ")
        )]
    } else {
        urls.collect()
    }
}

/// The sessions of a multipath LU through every URL: each the URL's
/// session configuration and LUN.
fn multipath_paths(
    urls: &[IscsiUrl],
    template: &SessionTemplate,
    connections: u16,
) -> Vec<(SessionConfig, u16)> {
    urls.iter()
        .map(|u| (template.config(u, connections), u.lun.unwrap_or(0)))
        .collect()
}

/// Opens the URLs as one multipath LU (which checks that they are paths of
/// one LU, and that one serves) to learn its block size and capacity.
fn probe_multipath(config: &RunConfig, options: MultipathOptions) -> Result<Lun, RunError> {
    for url in &config.urls {
        if url.lun.is_none() {
            return Err(RunError::Url(format!(
                "{url}: the URL names no LUN (…/IQN/LUN)"
            )));
        }
    }
    let mut engine = Engine::new();
    let lu = engine
        .open_multipath(multipath_paths(&config.urls, &config.session, 1), options)
        .map_err(|e| RunError::Multipath(e.to_string()))?;
    let result = read_capacity(&mut engine, lu, 0, config);
    let _ = engine.logout(lu);
    result.map_err(|what| RunError::Multipath(format!("multipath: {what}")))
}

/// Logs in once to learn the LUN's block size and capacity.
fn probe(url: &IscsiUrl, config: &RunConfig) -> Result<Lun, RunError> {
    let setup = |what: String| RunError::Setup {
        url: url.to_string(),
        what,
    };
    let lun = url
        .lun
        .ok_or_else(|| RunError::Url(format!("{url}: the URL names no LUN (…/IQN/LUN)")))?;
    let mut engine = Engine::new();
    let s = engine
        .login(config.session.config(url, 1))
        .map_err(|source| RunError::Login {
            url: url.to_string(),
            source: Box::new(source),
        })?;
    let result = read_capacity(&mut engine, s, lun, config);
    let _ = engine.logout(s);
    result.map_err(setup)
}

/// READ CAPACITY (16) through `session` (or a multipath LU), checked
/// against the workload's I/O size.
fn read_capacity(
    engine: &mut Engine,
    session: usize,
    lun: u16,
    config: &RunConfig,
) -> Result<Lun, String> {
    let cap = capacity(engine, session, lun)?;
    let bs = config.workload.block_size_bytes;
    if cap.block_size_bytes == 0 || !bs.is_multiple_of(cap.block_size_bytes) {
        return Err(format!(
            "the I/O size {bs} is not a multiple of the LUN's {}-byte blocks",
            cap.block_size_bytes
        ));
    }
    if u64::from(bs) > cap.size_bytes() {
        return Err(format!(
            "the I/O size {bs} exceeds the LUN's {} bytes",
            cap.size_bytes()
        ));
    }
    Ok(Lun {
        block_size: cap.block_size_bytes,
        blocks: cap.blocks(),
    })
}

/// READ CAPACITY (16) of `lun` through `session` (or a multipath LU):
/// the LU's block size and last LBA, or why not.
pub(crate) fn capacity(engine: &mut Engine, session: usize, lun: u16) -> Result<Capacity, String> {
    let mut last = String::new();
    // A fresh session may first see UNIT ATTENTION (power on, reset): ask again.
    for _ in 0..4 {
        let done = engine
            .execute(session, Command::read(lun, &cdb::read_capacity16(), 32))
            .map_err(|e| e.to_string())?;
        match done.good() {
            Ok(_) => {
                return Capacity::parse(&done.buffer)
                    .ok_or_else(|| "READ CAPACITY (16) returned too little data".to_string())
            }
            Err(e) => last = e,
        }
    }
    Err(format!("READ CAPACITY (16) failed: {last}"))
}

struct WorkerSpec {
    worker: u32,
    workers: u32,
    workload: Workload,
    urls: Vec<IscsiUrl>,
    luns: Vec<Lun>,
    template: SessionTemplate,
    multipath: Option<MultipathOptions>,
    error_bound: ErrorBound,
    halt: Arc<Halt>,
}

#[derive(Default)]
struct WorkerResult {
    /// Per URL (volume), what completed in the window.
    urls: Vec<UrlTally>,
    /// The second of the window in progress (see [`SecondSampler`]).
    second: SecondTally,
    /// Whether the batch being handled is in the window.
    measuring: bool,
    errors: u64,
    verify_errors: u64,
    messages: Vec<String>,
    engine: EngineStats,
    total_ios: u64,
    unit_attentions: u64,
    verified_reads: u64,
    /// The longest time between two answered commands while some were
    /// outstanding.
    io_gap_max: Duration,
    multipath: Option<MultipathOutcome>,
}

impl WorkerResult {
    fn panicked() -> WorkerResult {
        WorkerResult {
            errors: 1,
            messages: vec!["a worker thread panicked".into()],
            ..WorkerResult::default()
        }
    }

    /// One answered command of `bytes` on `volume` in the window, `ns`
    /// after it was sent.
    fn count(&mut self, volume: usize, write: bool, bytes: u64, ns: u128) {
        let url = &mut self.urls[volume];
        let dir = if write { &mut url.write } else { &mut url.read };
        dir.ios += 1;
        dir.bytes += bytes;
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        dir.latency.record_ns(ns);
        self.second.record(write, bytes, ns);
    }

    fn note(&mut self, message: String) {
        if self.messages.len() < MESSAGES_MAX {
            self.messages.push(message);
        }
    }

    /// Counts a failure, of the URL `url` when it is one URL's.
    fn error(&mut self, url: Option<usize>, message: String) {
        self.errors += 1;
        if let Some(u) = url.and_then(|u| self.urls.get_mut(u)) {
            u.errors += 1;
        }
        if self.measuring {
            self.second.errors += 1;
        }
        self.note(message);
    }
}

/// One URL's counts in one worker.
#[derive(Default)]
struct UrlTally {
    read: DirectionMeasurements,
    write: DirectionMeasurements,
    errors: u64,
}

/// One URL as a worker drives it.
struct Volume {
    /// Its place in the URLs given.
    index: usize,
    worker: u32,
    lun: u16,
    sessions: Vec<usize>,
    pattern: AccessPattern,
    /// First LBA of this worker's region.
    base_lba: u64,
    blocks_per_io: u32,
    block_size: usize,
    /// Verify: the generation last written to each chunk (0 = unknown).
    generations: Vec<u32>,
}

struct Slot {
    volume: usize,
    /// The session of its volume it always goes to (an index into
    /// `Volume::sessions`): each session keeps its share of the queue
    /// depth, as each of fio's jobs keeps its iodepth, and a connection's
    /// answers are replaced by commands on the same connection, sent
    /// together.
    session: usize,
    buffer: Vec<u8>,
    started: Instant,
    chunk: u64,
    write: bool,
    generation: u32,
    busy: bool,
}

/// Logs a worker's sessions in, `sessions` per volume (one volume per
/// URL, or one for all of them as paths of one LU), and lays out each
/// volume's share of its LUN: the volumes and the fewest connections a
/// session got, or what failed.
fn open_volumes(spec: &WorkerSpec, engine: &mut Engine) -> Result<(Vec<Volume>, u32), String> {
    let w = &spec.workload;
    let mut volumes = Vec::new();
    let mut connections = u32::MAX;
    // One volume per URL, or one for all of them as paths of one LU.
    for (i, &lun) in spec.luns.iter().enumerate() {
        let url = &spec.urls[i];
        let mut sessions = Vec::new();
        for _ in 0..w.sessions {
            let opened = match spec.multipath {
                Some(options) => engine.open_multipath(
                    multipath_paths(&spec.urls, &spec.template, w.connections as u16),
                    options,
                ),
                None => engine.login(spec.template.config(url, w.connections as u16)),
            };
            match opened {
                Ok(s) => {
                    connections = connections.min(engine.connections(s) as u32);
                    sessions.push(s);
                }
                Err(e) if spec.multipath.is_some() => return Err(e.to_string()),
                Err(e) => return Err(format!("{url}: {e}")),
            }
        }
        let blocks_per_io = w.block_size_bytes / lun.block_size;
        let blocks = w.span_bytes.map_or(lun.blocks, |span| {
            (span / u64::from(lun.block_size)).clamp(1, lun.blocks)
        });
        let all_chunks = blocks / u64::from(blocks_per_io);
        // Verification needs regions no other worker writes; plain runs share the LUN.
        let (base_chunk, chunks) = if w.verify {
            let per = all_chunks / u64::from(spec.workers);
            (
                per * u64::from(spec.worker),
                per.clamp(1, VERIFY_CHUNKS_MAX),
            )
        } else {
            (0, all_chunks.max(1))
        };
        let start = if w.verify {
            0
        } else {
            chunks * u64::from(spec.worker) / u64::from(spec.workers)
        };
        let seed = (u64::from(spec.worker) << 32) ^ (i as u64) ^ 0x5eed;
        volumes.push(Volume {
            index: i,
            worker: spec.worker,
            lun: url.lun.unwrap_or(0),
            sessions,
            pattern: AccessPattern::new(chunks, w.read_pct, w.random_pct, start, seed),
            base_lba: base_chunk * u64::from(blocks_per_io),
            blocks_per_io,
            block_size: lun.block_size as usize,
            generations: if w.verify {
                vec![0; chunks as usize]
            } else {
                Vec::new()
            },
        });
    }
    Ok((volumes, connections))
}

/// One slot per command a worker keeps in flight, `queue_depth` per
/// volume, each bound to one of its volume's sessions; their buffers hold
/// the write pattern (zeros when verifying: each write fills its own).
fn make_slots(w: &Workload, volumes: &[Volume]) -> Vec<Slot> {
    let mut fill = vec![0u8; w.block_size_bytes as usize];
    let fill_len = fill.len();
    verify::fill(&mut fill, 0, fill_len, 0x15_0e);
    let qd = w.queue_depth as usize;
    (0..volumes.len() * qd)
        .map(|i| Slot {
            volume: i / qd,
            session: (i % qd) % volumes[i / qd].sessions.len(),
            buffer: if w.verify {
                vec![0; fill.len()]
            } else {
                fill.clone()
            },
            started: Instant::now(),
            chunk: 0,
            write: false,
            generation: 0,
            busy: false,
        })
        .collect()
}

fn run_worker(
    spec: WorkerSpec,
    phase: &AtomicU8,
    window_start: &OnceLock<Instant>,
    progress: &(AtomicU64, AtomicU64),
    ready: mpsc::Sender<Result<u32, String>>,
    mut sampler: SecondSampler,
) -> WorkerResult {
    let result = WorkerResult {
        urls: spec.luns.iter().map(|_| UrlTally::default()).collect(),
        ..WorkerResult::default()
    };
    let mut engine = Engine::new();
    let (volumes, connections) = match open_volumes(&spec, &mut engine) {
        Ok(opened) => opened,
        Err(why) => {
            let _ = ready.send(Err(why));
            return result;
        }
    };
    let _ = ready.send(Ok(connections));
    while phase.load(Ordering::Relaxed) == PHASE_SETUP {
        thread::sleep(Duration::from_millis(1));
    }
    let slots = make_slots(&spec.workload, &volumes);
    let mut worker = Worker {
        watch: ErrorWatch::new(spec.error_bound),
        spec,
        engine,
        volumes,
        slots,
        result,
        scratch: Vec::new(),
        busy: 0,
    };
    let mut done: Vec<Completion> = Vec::new();
    let now = Instant::now();
    for token in 0..worker.slots.len() {
        worker.submit(token, now);
    }
    let mut drain_deadline = None;
    let mut t0 = None;
    // The last batch that answered a command, until the drain: the gaps
    // between them are what a failover costs.
    let mut last_answer = Some(now);
    while worker.busy > 0 {
        // Acquire: a worker that sees the window begun sees when it began.
        let current = phase.load(Ordering::Acquire);
        if current == PHASE_DRAIN {
            let result = &mut worker.result;
            if let Some(last) = last_answer.take() {
                result.io_gap_max = result.io_gap_max.max(last.elapsed());
            }
            let deadline = *drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_TIMEOUT);
            if Instant::now() > deadline {
                result.note(format!(
                    "{} commands still outstanding {} s after the run",
                    worker.busy,
                    DRAIN_TIMEOUT.as_secs()
                ));
                break;
            }
        }
        if let Err(e) = worker.engine.poll(&mut done, Duration::from_millis(50)) {
            worker.result.error(None, e.to_string());
            break;
        }
        let now = Instant::now();
        let measuring = current == PHASE_MEASURE;
        worker.result.measuring = measuring;
        if measuring {
            if t0.is_none() {
                t0 = window_start.get().copied();
            }
            if let Some(t0) = t0 {
                // The seconds before this batch are done: off they go.
                sampler.at(now, t0, &mut worker.result.second);
            }
        }
        let (mut batch_ios, mut batch_bytes) = (0u64, 0u64);
        for c in done.drain(..) {
            if let Some(bytes) = worker.complete(c, now, current) {
                batch_ios += 1;
                batch_bytes += bytes;
            }
        }
        worker.result.total_ios += batch_ios;
        if batch_ios > 0 {
            if let Some(last) = last_answer.as_mut() {
                let gap = now.saturating_duration_since(*last);
                worker.result.io_gap_max = worker.result.io_gap_max.max(gap);
                *last = now;
            }
        }
        progress.0.fetch_add(batch_ios, Ordering::Relaxed);
        progress.1.fetch_add(batch_bytes, Ordering::Relaxed);
    }
    sampler.finish(&mut worker.result.second);
    worker.finish()
}

/// A worker's sessions, its commands' slots and what it has counted.
struct Worker {
    spec: WorkerSpec,
    engine: Engine,
    volumes: Vec<Volume>,
    slots: Vec<Slot>,
    result: WorkerResult,
    watch: ErrorWatch,
    /// The verifier's buffer, kept between reads.
    scratch: Vec<u8>,
    /// Slots with a command in flight.
    busy: usize,
}

impl Worker {
    /// Sends slot `token`'s next command.
    fn submit(&mut self, token: usize, now: Instant) {
        submit(
            &mut self.engine,
            &mut self.volumes,
            &mut self.slots,
            token,
            now,
            self.spec.workload.verify,
            &mut self.result,
        );
        if self.slots[token].busy {
            self.busy += 1;
        }
    }

    /// Takes one answered command in `phase`: counts it (its bytes, when
    /// it succeeded), checks what it read, and sends the slot's next
    /// command unless the run is draining or halted. A unit attention's
    /// command is sent again instead, as an OS does.
    fn complete(&mut self, c: Completion, now: Instant, phase: u8) -> Option<u64> {
        let w = &self.spec.workload;
        let measuring = phase == PHASE_MEASURE;
        // Halted: what is in flight completes, nothing new is sent.
        let sending = phase != PHASE_DRAIN && !self.spec.halt.is_set();
        let token = c.token as usize;
        let slot = &mut self.slots[token];
        slot.busy = false;
        self.busy -= 1;
        let failure = failure_in_words(&c);
        let unit_attention = matches!(&c.outcome, Outcome::Scsi(st) if st.sense_key().is_some_and(|k| k.0 == SENSE_UNIT_ATTENTION));
        slot.buffer = c.buffer;
        let volume = &mut self.volumes[slot.volume];
        let result = &mut self.result;
        if unit_attention && sending {
            // SAM-5 5.14: the command was not executed; the condition is
            // now cleared for this I_T nexus. Send it again.
            result.unit_attentions += 1;
            let access = Access {
                chunk: slot.chunk,
                write: slot.write,
            };
            issue(
                &mut self.engine,
                volume,
                slot,
                token,
                access,
                now,
                w.verify,
                false,
                result,
            );
            if slot.busy {
                self.busy += 1;
            }
            return None;
        }
        let lba = volume.base_lba + slot.chunk * u64::from(volume.blocks_per_io);
        let answered = if let Some((what, sense)) = failure {
            let what = format!(
                "{} at LBA {lba}: {what}",
                if slot.write { "write" } else { "read" }
            );
            if let Some(why) = self.watch.failed(&what, sense) {
                if phase != PHASE_DRAIN {
                    let url = &self.spec.urls[volume.index];
                    self.spec.halt.set(format!("{url}: {why}"));
                }
            }
            result.error(Some(slot.volume), what);
            if slot.write && w.verify {
                volume.generations[slot.chunk as usize] = 0;
            }
            None
        } else {
            self.watch.succeeded();
            if w.verify && !slot.write && slot.generation != 0 {
                let generation = generation_tag(self.spec.worker, slot.generation);
                result.verified_reads += 1;
                let (buffer, size) = (&slot.buffer, volume.block_size);
                if let Some(m) = verify::check(buffer, lba, size, generation, &mut self.scratch) {
                    result.verify_errors += 1;
                    result.note(format!("verify: {m}"));
                }
            }
            let bytes = u64::from(w.block_size_bytes);
            if measuring {
                let ns = now.saturating_duration_since(slot.started).as_nanos();
                result.count(slot.volume, slot.write, bytes, ns);
            }
            Some(bytes)
        };
        if sending && !self.spec.halt.is_set() {
            self.submit(token, now);
        }
        answered
    }

    /// Logs the sessions out; the worker's result, with its engine's
    /// counters and, for a multipath LU, what its paths did.
    fn finish(mut self) -> WorkerResult {
        if self.spec.multipath.is_some() {
            let mut outcome = MultipathOutcome::default();
            for &lu in self.volumes.iter().flat_map(|v| &v.sessions) {
                if let (Some(stats), Some(paths)) = (
                    self.engine.multipath_stats(lu),
                    self.engine.multipath_paths(lu),
                ) {
                    outcome.add(&stats, &paths);
                }
            }
            self.result.multipath = Some(outcome);
        }
        for v in &self.volumes {
            for &s in &v.sessions {
                let _ = self.engine.logout(s);
            }
        }
        self.result.engine = self.engine.stats();
        self.result
    }
}

/// A sense's key, ASC and ASCQ.
pub(crate) type SenseCodes = (u8, u8, u8);

/// Why a command failed, its sense in words, with its sense codes; None
/// when it succeeded.
pub(crate) fn failure_in_words(c: &Completion) -> Option<(String, Option<SenseCodes>)> {
    match &c.outcome {
        Outcome::Scsi(s) if !s.is_good() => Some((describe_status_in_words(s), s.sense_key())),
        _ => c.good().err().map(|what| (what, None)),
    }
}

/// The 64-bit generation written into blocks: the worker in the high half.
fn generation_tag(worker: u32, generation: u32) -> u64 {
    u64::from(worker) << 32 | u64::from(generation)
}

fn submit(
    engine: &mut Engine,
    volumes: &mut [Volume],
    slots: &mut [Slot],
    token: usize,
    now: Instant,
    verify: bool,
    result: &mut WorkerResult,
) {
    let v = slots[token].volume;
    let mut access = volumes[v].pattern.next_access();
    if verify {
        // Two commands in flight on one chunk have no defined order: pick another.
        for _ in 0..64 {
            let clash = slots
                .iter()
                .any(|s| s.busy && s.volume == v && s.chunk == access.chunk);
            if !clash {
                break;
            }
            access = volumes[v].pattern.next_access();
        }
        if slots
            .iter()
            .any(|s| s.busy && s.volume == v && s.chunk == access.chunk)
        {
            return;
        }
    }
    issue(
        engine,
        &mut volumes[v],
        &mut slots[token],
        token,
        access,
        now,
        verify,
        true,
        result,
    );
}

/// Sends `access` from slot `token`; `fresh` false repeats the slot's last
/// command as it was (same generation), after a UNIT ATTENTION.
#[allow(clippy::too_many_arguments)]
fn issue(
    engine: &mut Engine,
    volume: &mut Volume,
    slot: &mut Slot,
    token: usize,
    access: Access,
    now: Instant,
    verify: bool,
    fresh: bool,
    result: &mut WorkerResult,
) {
    let lba = volume.base_lba + access.chunk * u64::from(volume.blocks_per_io);
    let blocks = volume.blocks_per_io;
    let bytes = blocks * volume.block_size as u32;
    let mut buffer = std::mem::take(&mut slot.buffer);
    let command = if access.write {
        if verify {
            if fresh {
                let g = &mut volume.generations[access.chunk as usize];
                *g = g.wrapping_add(1).max(1);
                slot.generation = *g;
            }
            buffer.resize(bytes as usize, 0);
            let tag = generation_tag(volume.worker, slot.generation);
            verify::fill(&mut buffer, lba, volume.block_size, tag);
        }
        Command::write(volume.lun, &cdb::write16(lba, blocks, false), buffer)
    } else {
        if verify && fresh {
            slot.generation = volume.generations[access.chunk as usize];
        }
        // The slot's buffer receives the data: no allocation per read.
        Command::with(
            volume.lun,
            &cdb::read16(lba, blocks),
            Direction::Read(bytes),
            buffer,
        )
    };
    slot.chunk = access.chunk;
    slot.write = access.write;
    slot.started = now;
    let session = volume.sessions[slot.session];
    match engine.submit(session, command, token as u64) {
        Ok(()) => slot.busy = true,
        Err(e) => result.error(Some(volume.index), e.to_string()),
    }
}

/// The live line: rates over the last second, on stderr, when asked.
struct Progress<'a> {
    enabled: bool,
    counters: &'a [Arc<(AtomicU64, AtomicU64)>],
    start: Instant,
    last: (Instant, u64, u64),
}

impl<'a> Progress<'a> {
    fn new(enabled: bool, counters: &'a [Arc<(AtomicU64, AtomicU64)>]) -> Progress<'a> {
        let now = Instant::now();
        Progress {
            enabled,
            counters,
            start: now,
            last: (now, 0, 0),
        }
    }

    fn totals(&self) -> (u64, u64) {
        self.counters.iter().fold((0, 0), |(i, b), c| {
            (
                i + c.0.load(Ordering::Relaxed),
                b + c.1.load(Ordering::Relaxed),
            )
        })
    }

    /// Sleeps `total`, calling `tick` every 100 ms or so; true when `cut`
    /// said to end it early.
    fn sleep(&mut self, total: Duration, cut: &dyn Fn() -> bool, tick: &mut dyn FnMut()) -> bool {
        let end = Instant::now() + total;
        loop {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            if cut() {
                return true;
            }
            thread::sleep((end - now).min(Duration::from_millis(100)));
            tick();
            if self.enabled && self.last.0.elapsed() >= Duration::from_secs(1) {
                let (ios, bytes) = self.totals();
                let now = Instant::now();
                let window = now.duration_since(self.last.0).as_secs_f64();
                let line = crate::table::progress_line(
                    now.duration_since(self.start).as_secs_f64(),
                    ios - self.last.1,
                    bytes - self.last.2,
                    window,
                );
                eprint!("\r{line}");
                self.last = (now, ios, bytes);
            }
        }
    }

    fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }
}

/// What `isoe bench --json` prints for a run: every field of its
/// [`BenchResult`](crate::BenchResult), and beside them what only the
/// runner knows ([`RunnerFigures`]), in one flat object. The lab reads it
/// back as this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchOutput {
    /// The result.
    #[serde(flatten)]
    pub result: crate::BenchResult,
    /// The runner's own figures.
    #[serde(flatten)]
    pub runner: RunnerFigures,
}

/// What the runner adds to a run's result (see [`RunOutcome::output`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerFigures {
    /// The initiator engines' sends, receives and polls per command over
    /// the whole run; null when no command completed.
    pub initiator_syscalls_per_io: Option<f64>,
    /// Connections the engines opened again.
    pub reconnects: u64,
    /// Connections per session actually opened.
    pub connections_per_session: u32,
    /// The first error and mismatch messages.
    pub messages: Vec<String>,
    /// Commands repeated after a UNIT ATTENTION (not errors).
    pub unit_attentions_retried: u64,
    /// Reads checked against what was written (None, and left out of the
    /// JSON, in the output of an isoe bench older than the field, as the
    /// lab may read on a test bed's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_reads: Option<u64>,
    /// The longest time between two answered commands while commands were
    /// outstanding, s (see [`RunOutcome::io_gap_max_s`]; None as
    /// `verified_reads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_gap_max_s: Option<f64>,
    /// What the multipath LUs did, or null.
    #[serde(default)]
    pub multipath: Option<MultipathOutcome>,
    /// `/proc/stat`'s ticks against the wall clock, % (under this load the
    /// kernel accounts less time than passed, seen: 89-100%; the CPU split
    /// is a share of what it accounted); null with no window or no CPUs.
    pub cpu_accounted_pct: Option<f64>,
    /// Log2 latency buckets of each direction, for histograms.
    pub lat_hist: LatencyHistograms,
}

/// Each direction's latencies in log2 buckets: (upper bound µs, count),
/// as [`crate::LatencyRecorder::buckets`] gives them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyHistograms {
    /// Reads.
    pub read: Vec<(f64, u64)>,
    /// Writes.
    pub write: Vec<(f64, u64)>,
}

impl RunOutcome {
    /// What `isoe bench --json` prints of one run: every field of
    /// `result`, plus what only the runner knows (syscalls per I/O,
    /// reconnections, messages).
    pub fn output(&self, result: &crate::BenchResult) -> BenchOutput {
        let syscalls = self.engine.sends + self.engine.recvs + self.engine.polls;
        let ios = self.total_ios;
        let ncpus = result.host.as_ref().map_or(0, |h| h.ncpus);
        let wall_cpu_s = result.elapsed_s * f64::from(ncpus);
        let m = &self.measurements;
        BenchOutput {
            result: result.clone(),
            runner: RunnerFigures {
                initiator_syscalls_per_io: (ios > 0).then(|| syscalls as f64 / ios as f64),
                reconnects: self.engine.reconnects,
                connections_per_session: self.connections_per_session,
                messages: self.messages.clone(),
                unit_attentions_retried: self.unit_attentions,
                verified_reads: Some(self.verified_reads),
                io_gap_max_s: Some(self.io_gap_max_s),
                multipath: self.multipath.clone(),
                cpu_accounted_pct: (wall_cpu_s > 0.0)
                    .then(|| 100.0 * result.cpu.elapsed_cpu_s / wall_cpu_s),
                lat_hist: LatencyHistograms {
                    read: m.read.latency.buckets(),
                    write: m.write.latency.buckets(),
                },
            },
        }
    }

    /// [`RunOutcome::output`] as a JSON object, its keys sorted as
    /// `isoe bench --json` has always printed them.
    pub fn json(&self, result: &crate::BenchResult) -> serde_json::Value {
        serde_json::to_value(self.output(result)).unwrap_or(serde_json::Value::Null)
    }
}
