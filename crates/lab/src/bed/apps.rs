//! Application workloads on a test bed ([`crate::application`]): per case,
//! a file system on the initiator's block device, the database or the mail
//! files on it (made at the first run that needs them), and a raw TCP
//! echo server beside the target for the network's part of a command's
//! latency; per run, the block layer's trace of the application's I/O and
//! the target's stage timings around it. [`Apps::cleanup`] removes it all.

use super::series::SecondsSampler;
use super::{tail, Bed, BedTarget, PlaceError, Ran, Started, Watched, STOP_GRACE};
use crate::application::{
    self, Application, ApplicationRun, BlockTrace, Figures, Filesystem, PartsMeasured,
    BLKPARSE_FORMAT, CLEANUP, MAKE_FS, PG_PORT,
};
use crate::host::{self, Running};
use crate::knobs::KnobSet;
use crate::mail::MailResult;
use crate::peers::fio::FioOutput;
use crate::pgbench::TransactionLog;
use crate::plan::Plan;
use crate::record::{HostSeconds, RunResult};
use crate::run::{BenchFailure, Measured, Window};
use crate::ssh::HostError;
use isoe_bench::LatencySummary;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds pgbench runs past the run's end, outside every figure's window:
/// the last counters of the window are read from its process, which must
/// still be there when a starved VM's sampler wakes late.
const PGBENCH_TAIL_S: f64 = 2.0;

/// How long the lab waits for blktrace to set its trace up before the run.
const TRACE_START: Duration = Duration::from_secs(10);
/// How long the echo server may take to listen.
const PROBE_START: Duration = Duration::from_secs(30);
/// Exchanges the network probe times per direction (after 50 unmeasured).
const PROBE_COUNT: &str = "500";
/// An iSCSI PDU's basic header segment, bytes: each side of a command's
/// exchange carries one besides its data.
const BHS_BYTES: u64 = 48;

/// Why an application workload could not be prepared on the test bed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppsError {
    /// A command on the initiator host failed (its work directory).
    #[error("{0}")]
    Host(#[source] Box<HostError>),
    /// The file system could not be made.
    #[error("making {fs} on {device}: {source}")]
    MakeFs {
        /// ext4 or xfs.
        fs: &'static str,
        /// The block device.
        device: String,
        /// Why.
        source: Box<HostError>,
    },
    /// The pgbench database could not be made.
    #[error("making the pgbench database (scale {scale}): {source}")]
    Database {
        /// pgbench's scale.
        scale: u32,
        /// Why.
        source: Box<HostError>,
    },
    /// The mail workload's files could not be laid out.
    #[error("laying out the mail files: {0}")]
    MailFiles(#[source] Box<HostError>),
    /// The test bed names no portal to probe beside.
    #[error("the test bed names no portal")]
    NoPortal,
    /// isoe could not be put on the target host.
    #[error("{0}")]
    Place(#[from] Arc<PlaceError>),
    /// The echo server could not be started.
    #[error("isoe netprobe --serve {listen} on {host}: {source}")]
    ProbeSpawn {
        /// Its address.
        listen: SocketAddr,
        /// The target host.
        host: String,
        /// Why.
        source: Box<HostError>,
    },
    /// The echo server did not say it serves.
    #[error("isoe netprobe --serve {listen} on {host} did not start (the port taken?)")]
    ProbeStart {
        /// Its address.
        listen: SocketAddr,
        /// The target host.
        host: String,
    },
}

impl From<HostError> for AppsError {
    fn from(e: HostError) -> AppsError {
        AppsError::Host(Box::new(e))
    }
}

/// What a case's application workloads made on its hosts.
pub(crate) struct Apps<'b> {
    bed: &'b Bed,
    /// The initiator host's directory for the file system's mount point and
    /// the database's socket, once made.
    dir: Option<String>,
    /// PostgreSQL's program directory, once the database exists.
    pg_bin: Option<String>,
    /// Whether the mail files are laid out.
    mail_made: bool,
    /// The database server's memory cgroup.
    cgroup: String,
    /// The echo server on the target host, or why it is not there.
    probe: Option<Result<(Running, SocketAddr), Arc<AppsError>>>,
}

impl<'b> Apps<'b> {
    /// Nothing made yet.
    pub(crate) fn new(bed: &'b Bed) -> Apps<'b> {
        Apps {
            bed,
            dir: None,
            pg_bin: None,
            mail_made: false,
            cgroup: format!("/sys/fs/cgroup/isoe-lab-{}", std::process::id()),
            probe: None,
        }
    }

    /// Stops and removes what was made; each failure's text.
    pub(crate) fn cleanup(mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(Ok((server, _))) = self.probe.take() {
            if let Err(e) = server.stop(STOP_GRACE) {
                problems.push(format!("stopping isoe netprobe --serve: {e}"));
            }
        }
        if let Some(dir) = self.dir.take() {
            let host = &self.bed.initiator;
            if let Err(e) = host.run(&["sh", "-c", CLEANUP, "sh", &dir, &self.cgroup]) {
                problems.push(format!("removing the application's file system: {e}"));
            }
        }
        problems
    }

    /// The file system on `device`, made at the first call.
    fn ensure_fs(&mut self, device: &str, fs: Filesystem) -> Result<String, AppsError> {
        if let Some(dir) = &self.dir {
            return Ok(dir.clone());
        }
        let host = &self.bed.initiator;
        let dir = host
            .run(&["mktemp", "-d", "/tmp/isoe-lab-app.XXXXXX"])?
            .trim()
            .to_owned();
        self.dir = Some(dir.clone());
        host.run(&["sh", "-c", MAKE_FS, "sh", &dir, device, fs.as_str()])
            .map_err(|source| AppsError::MakeFs {
                fs: fs.as_str(),
                device: device.to_owned(),
                source: Box::new(source),
            })?;
        Ok(dir)
    }

    /// The application's data on the file system, made at its first run.
    fn ensure_data(&mut self, app: &Application, dir: &str) -> Result<(), AppsError> {
        let host = &self.bed.initiator;
        match app {
            Application::Oltp(o) if self.pg_bin.is_none() => {
                let script = application::make_database_script();
                let bin = host
                    .run(&[
                        "sh",
                        "-c",
                        &script,
                        "sh",
                        dir,
                        &self.cgroup,
                        &o.memory_bytes.to_string(),
                        &o.scale.to_string(),
                    ])
                    .map_err(|source| AppsError::Database {
                        scale: o.scale,
                        source: Box::new(source),
                    })?;
                self.pg_bin = Some(bin.trim().to_owned());
            }
            Application::Mail(_) if !self.mail_made => {
                let profile = app.mail_profile(1, 0).expect("mail");
                let mail_dir = format!("{dir}/mnt/mail");
                let mut argv = vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    r#"mkdir -p "$1" && shift && exec "$@" --create_only=1 --output=/dev/null"#
                        .to_owned(),
                    "sh".to_owned(),
                    mail_dir.clone(),
                    self.bed.testbed.initiator.fio.clone(),
                ];
                argv.extend(profile.fio_args(&mail_dir));
                host.run(&argv)
                    .map_err(|e| AppsError::MailFiles(Box::new(e)))?;
                self.mail_made = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// The echo server beside the target, started at the first call, and
    /// the address the initiator host reaches it at: the first portal's
    /// port + 1 (and the first listen address's on the target host).
    fn probe_address(&mut self, target: &BedTarget<'_>) -> Result<SocketAddr, Arc<AppsError>> {
        let probe = match self.probe.take() {
            Some(probe) => probe,
            None => self.start_probe(target).map_err(Arc::new),
        };
        let addr = match &probe {
            Ok((_, addr)) => Ok(*addr),
            Err(why) => Err(why.clone()),
        };
        self.probe = Some(probe);
        addr
    }

    fn start_probe(&self, target: &BedTarget<'_>) -> Result<(Running, SocketAddr), AppsError> {
        let bed = self.bed;
        let t = &bed.testbed.target;
        let (Some(listen), Some(portal)) = (t.listen.first(), target.portals.first()) else {
            return Err(AppsError::NoPortal);
        };
        let plus_one = |a: &SocketAddr| {
            let mut a = *a;
            a.set_port(a.port().wrapping_add(1));
            a
        };
        let (listen, portal) = (plus_one(listen), plus_one(portal));
        let host = &bed.target;
        let isoe = bed.isoe_on(host, t.isoe.as_ref())?;
        let mut running = host
            .spawn(
                &[isoe.as_str(), "netprobe", "--serve", &listen.to_string()],
                Stdio::null(),
            )
            .map_err(|source| AppsError::ProbeSpawn {
                listen,
                host: host.name(),
                source: Box::new(source),
            })?;
        let lines = host::lines(running.take_stdout().expect("stdout is piped"));
        match lines.recv_timeout(PROBE_START) {
            Ok(line) if line.contains("serving on") => Ok((running, portal)),
            _ => {
                let _ = running.stop(STOP_GRACE);
                Err(AppsError::ProbeStart {
                    listen,
                    host: host.name(),
                })
            }
        }
    }

    /// The mean of a raw TCP exchange of `out` bytes and `back` bytes, µs,
    /// from the initiator host to the echo server; None (and a line on
    /// stderr) when it cannot be measured.
    fn network_us(&mut self, target: &BedTarget<'_>, out: u64, back: u64) -> Option<f64> {
        let addr = match self.probe_address(target) {
            Ok(a) => a,
            Err(why) => {
                eprintln!("isoe lab: the network's part of the latency is not measured: {why}");
                return None;
            }
        };
        let bed = self.bed;
        let host = &bed.initiator;
        let isoe = bed
            .isoe_on(host, bed.testbed.initiator.isoe.as_ref())
            .ok()?;
        let argv = [
            isoe.as_str(),
            "netprobe",
            &addr.to_string(),
            "--request",
            &out.to_string(),
            "--response",
            &back.to_string(),
            "--count",
            PROBE_COUNT,
            "--warmup",
            "50",
            "--json",
        ];
        match host.run(&argv) {
            // The summary in µs, as isoe bench's latency summary.
            Ok(text) => {
                let mean = serde_json::from_str::<LatencySummary>(&text)
                    .ok()
                    .map(|s| s.mean_us);
                if mean.is_none() {
                    eprintln!(
                        "isoe lab: isoe netprobe {addr} printed no mean: {}",
                        text.trim()
                    );
                }
                mean
            }
            Err(e) => {
                eprintln!("isoe lab: isoe netprobe {addr}: {e}");
                None
            }
        }
    }
}

impl Bed {
    /// One run of the application `app` on the case's block device:
    /// its file system and data made if this is the case's first, the
    /// block layer traced and the target's stages read around it, the
    /// network probed after it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_application(
        &self,
        plan: &Plan,
        knobs: &KnobSet,
        app: &Application,
        target: &BedTarget<'_>,
        device: &str,
        initiator_pids: &[u32],
        apps: &mut Apps<'_>,
        stop: &AtomicBool,
    ) -> Result<Measured, BenchFailure> {
        let failed = |e: String| BenchFailure::Failed(e);
        let fs = knobs.filesystem.unwrap_or_default();
        let needed = app.data_bytes();
        if needed > target.size_bytes / 10 * 8 {
            return Err(failed(format!(
                "{} needs {} MiB on the file system, more than 80% of the LUN's {} MiB",
                app.describe(),
                needed >> 20,
                target.size_bytes >> 20
            )));
        }
        let dir = apps
            .ensure_fs(device, fs)
            .map_err(|e| failed(e.to_string()))?;
        apps.ensure_data(app, &dir)
            .map_err(|e| failed(e.to_string()))?;
        let host = &self.initiator;
        let run = &plan.run;
        let (ramp_s, duration_s) = (run.ramp_s.ceil(), run.duration_s.ceil().max(2.0));
        let argv = self.app_command(app, apps, &dir, ramp_s, duration_s)?;
        let stages_before = self.stages(target);
        let trace_dir = format!("{dir}/blktrace");
        let (tracer, traced_at) = self.start_trace(device, &trace_dir, ramp_s + duration_s)?;
        let lead_s = traced_at.elapsed().as_secs_f64();
        // As for fio: from half a second after the ramp, to 1.5 s before the end.
        let start = Duration::from_secs_f64(ramp_s + 0.5);
        let len = Duration::from_secs_f64((duration_s - 1.5).max(0.5));
        let seconds = SecondsSampler::start(
            host,
            start.as_secs_f64(),
            len.as_secs() as u32,
            initiator_pids,
        );
        // blktrace is the measurement's, not the host's work.
        let tools = [tracer.pid()];
        let watched = Watched {
            initiator: initiator_pids,
            tools: &tools,
        };
        let ran = self.measure_with(
            &argv,
            Window::new(start, start + len),
            target,
            ramp_s + duration_s,
            watched,
            stop,
        );
        let seconds = seconds.finish();
        let trace_text = self.finish_trace(tracer, &trace_dir);
        let ran = ran?;
        let trace = BlockTrace::parse(&trace_text?, lead_s + ramp_s, lead_s + ramp_s + duration_s);
        let stages_after = self.stages(target);
        if !ran.status.success() {
            return Err(failed(format!(
                "{} on {} exited with {}: {}",
                app.kind(),
                host.name(),
                ran.status,
                tail(&ran.stderr_text)
            )));
        }
        let figures = self.app_figures(app, &ran, &dir, ramp_s, duration_s)?;
        let stages = stage_means(stages_before.as_ref(), stages_after.as_ref());
        let read_bytes = trace.read.mean_bytes();
        let write_bytes = trace.write.mean_bytes();
        let parts = [
            PartsMeasured {
                network_us: (trace.read.count() > 0)
                    .then(|| apps.network_us(target, BHS_BYTES, BHS_BYTES + read_bytes))
                    .flatten(),
                stages_us: stages[0],
            },
            PartsMeasured {
                network_us: (trace.write.count() > 0)
                    .then(|| apps.network_us(target, BHS_BYTES + write_bytes, BHS_BYTES))
                    .flatten(),
                stages_us: stages[1],
            },
        ];
        let label = knobs
            .initiator_impl()
            .attach_kind()
            .map_or("kernel", |k| k.label());
        let run = ApplicationRun::new(app, fs, label, &figures, &trace, duration_s, parts);
        let result = self.finish_result(run, &ran, target, seconds)?;
        Ok(Measured {
            result,
            started_at: ran.started_at,
            foreign: ran.foreign,
        })
    }

    /// The command line of one run of `app` in `dir` (for OLTP, after the
    /// mix's upkeep, a checkpoint and the memory limit, run at once,
    /// outside the window).
    fn app_command(
        &self,
        app: &Application,
        apps: &Apps<'_>,
        dir: &str,
        ramp_s: f64,
        duration_s: f64,
    ) -> Result<Vec<String>, BenchFailure> {
        let host = &self.initiator;
        Ok(match app {
            Application::Oltp(o) => {
                let bin = apps.pg_bin.clone().expect("made by ensure_data");
                let sock = format!("{dir}/pgsock");
                let sql = application::before_oltp_run(o.mix);
                // Between runs, outside the window: the mix's upkeep, a
                // checkpoint, the memory limit the workload asks.
                let mut argv: Vec<String> = [
                    "sh",
                    "-c",
                    r#"echo "$1" > "$2/memory.max" && rm -f "$3"/pgblog* && shift 3 && exec "$@""#,
                    "sh",
                ]
                .map(String::from)
                .to_vec();
                argv.extend([
                    o.memory_bytes.to_string(),
                    apps.cgroup.clone(),
                    dir.to_owned(),
                    format!("{bin}/psql"),
                    "-q".into(),
                    "-h".into(),
                    sock.clone(),
                    "-p".into(),
                    PG_PORT.to_string(),
                    "-U".into(),
                    "postgres".into(),
                ]);
                for statement in sql {
                    argv.extend(["-c".to_owned(), (*statement).to_owned()]);
                }
                argv.push("postgres".into());
                host.run(&argv).map_err(|e| {
                    BenchFailure::Failed(format!("before the run, {}: {e}", sql.join("; ")))
                })?;
                let threads = o.clients.min(4);
                vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    r#"date +%s%6N; exec "$@""#.to_owned(),
                    "sh".to_owned(),
                    format!("{bin}/pgbench"),
                    "-n".to_owned(),
                    "-h".to_owned(),
                    sock,
                    "-p".to_owned(),
                    PG_PORT.to_string(),
                    "-U".to_owned(),
                    "postgres".to_owned(),
                    "-b".to_owned(),
                    o.mix.as_str().to_owned(),
                    "-c".to_owned(),
                    o.clients.to_string(),
                    "-j".to_owned(),
                    threads.to_string(),
                    "-T".to_owned(),
                    format!("{}", (ramp_s + duration_s + PGBENCH_TAIL_S) as u64),
                    "--log".to_owned(),
                    format!("--log-prefix={dir}/pgblog"),
                    "postgres".to_owned(),
                ]
            }
            Application::Mail(_) => {
                let profile = app
                    .mail_profile(duration_s as u64, ramp_s as u64)
                    .expect("mail");
                let mut argv = vec![self.testbed.initiator.fio.clone()];
                argv.extend(profile.fio_args(&format!("{dir}/mnt/mail")));
                argv
            }
        })
    }

    /// What a run of `app` did, from pgbench's transaction log in `dir` or
    /// fio's JSON.
    fn app_figures(
        &self,
        app: &Application,
        ran: &Ran,
        dir: &str,
        ramp_s: f64,
        duration_s: f64,
    ) -> Result<Figures, BenchFailure> {
        Ok(match app {
            Application::Oltp(_) => {
                let log = self.pgbench_log(ran, dir, ramp_s, duration_s)?;
                let tps = log.summary().count as f64 / duration_s;
                Figures::Oltp { tps, log }
            }
            Application::Mail(_) => {
                let start = ran.stdout.find('{').unwrap_or(ran.stdout.len());
                let fio: FioOutput = serde_json::from_str(&ran.stdout[start..])
                    .map_err(|e| BenchFailure::Failed(format!("fio printed bad JSON: {e}")))?;
                Figures::Mail(
                    MailResult::from_fio(&fio).map_err(|e| BenchFailure::Failed(e.to_string()))?,
                )
            }
        })
    }

    /// blktrace on `device`, its issue and complete events only, for
    /// `run_s` seconds and a little more, into `dir`; with when it was
    /// ready.
    fn start_trace(
        &self,
        device: &str,
        dir: &str,
        run_s: f64,
    ) -> Result<(Running, Instant), BenchFailure> {
        let host = &self.initiator;
        let failed = |e: String| BenchFailure::Failed(e);
        host.run(&["mkdir", "-p", dir])
            .map_err(|e| failed(e.to_string()))?;
        let secs = format!("{}", run_s as u64 + 3);
        let tracer = host
            .spawn(
                &[
                    "blktrace", "-d", device, "-a", "issue", "-a", "complete", "-w", &secs, "-D",
                    dir, "-o", "trace",
                ],
                Stdio::null(),
            )
            .map_err(|e| failed(format!("blktrace on {}: {e}", host.name())))?;
        let deadline = Instant::now() + TRACE_START;
        let ready = format!("ls {dir}/trace.blktrace.* >/dev/null 2>&1");
        while host.run(&["sh", "-c", &ready]).is_err() {
            if Instant::now() > deadline {
                let _ = tracer.stop(STOP_GRACE);
                return Err(failed(format!(
                    "blktrace on {} made no trace of {device} within {} s",
                    host.name(),
                    TRACE_START.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok((tracer, Instant::now()))
    }

    /// Waits for blktrace to end (or ends it), and reads its trace with
    /// blkparse in [`BLKPARSE_FORMAT`]; the trace files are removed.
    fn finish_trace(&self, mut tracer: Running, dir: &str) -> Result<String, BenchFailure> {
        let host = &self.initiator;
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(tracer.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = tracer.stop(STOP_GRACE);
        let text = host.run(&[
            "blkparse",
            "-q",
            "-i",
            "trace",
            "-D",
            dir,
            "-a",
            "issue",
            "-a",
            "complete",
            "-f",
            BLKPARSE_FORMAT,
        ]);
        let _ = host.run(&["rm", "-rf", dir]);
        text.map_err(|e| BenchFailure::Failed(format!("blkparse on {}: {e}", host.name())))
    }

    /// pgbench's per-transaction log of the run's window: from `ramp_s`
    /// after its start (the first line it printed, µs since the epoch)
    /// for `duration_s`.
    fn pgbench_log(
        &self,
        ran: &Ran,
        dir: &str,
        ramp_s: f64,
        duration_s: f64,
    ) -> Result<TransactionLog, BenchFailure> {
        let failed = |e: String| BenchFailure::Failed(e);
        let start_us: u64 = ran
            .stdout
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| {
                failed(format!(
                    "pgbench's start time is missing: {}",
                    tail(&ran.stdout)
                ))
            })?;
        let text = self
            .initiator
            .run(&["sh", "-c", r#"cat "$1"/pgblog.*"#, "sh", dir])
            .map_err(|e| failed(format!("reading pgbench's log: {e}")))?;
        let from = start_us + (ramp_s * 1e6) as u64;
        let to = from + (duration_s * 1e6) as u64;
        TransactionLog::parse_between(&text, from, to).map_err(|e| failed(e.to_string()))
    }

    /// The target's per-LUN counters (`isoe admin stats`), when the target
    /// is the bed's `isoe target`.
    fn stages(&self, target: &BedTarget<'_>) -> Option<Value> {
        let Started::Isoe(_) = target.started else {
            return None;
        };
        let host = &self.target;
        let isoe = self.isoe_on(host, self.testbed.target.isoe.as_ref()).ok()?;
        let socket = format!("{}/{}", self.target_dir, super::CONTROL_SOCKET);
        let text = host
            .run(&[
                isoe.as_str(),
                "admin",
                "--socket",
                &socket,
                "--json",
                "stats",
            ])
            .map_err(|e| eprintln!("isoe lab: reading the target's stage timings: {e}"))
            .ok()?;
        let stats: Value = serde_json::from_str(&text).ok()?;
        let lun = stats["stats"]["luns"][&target.iqn][target.lun.to_string()].clone();
        lun.is_object().then_some(lun)
    }

    /// The run's result: the CPU fields from its samples, and the
    /// target's side.
    fn finish_result(
        &self,
        run: ApplicationRun,
        ran: &Ran,
        target: &BedTarget<'_>,
        seconds: Option<HostSeconds>,
    ) -> Result<RunResult, BenchFailure> {
        let (Some(a), Some(b)) = (&ran.first.initiator, &ran.last.initiator) else {
            return Err(BenchFailure::Failed(format!(
                "the application's /proc counters could not be read at the window's ends: {}",
                tail(&ran.stderr_text)
            )));
        };
        let mut b = b.clone();
        let span = (ran.last.uptime_s - ran.first.uptime_s).max(0.0);
        b.at = a.at + Duration::from_secs_f64(span);
        let target_pid_here = target.pid.filter(|_| self.same_host);
        let tools_s = super::tools_cpu_s(&ran.first, &ran.last);
        let mut result = run.result(a, &b, target_pid_here, tools_s, seconds);
        // The application is the load, as fio is on a block device; the
        // initiator's process is isoe attach's (the kernel's has none).
        result.load_is_not_the_initiator();
        super::add_initiator_process(&mut result, &ran.first, &ran.last);
        if !self.same_host {
            let vm_here = self.vm_on_target_host();
            super::add_target_side(&mut result, &ran.first, &ran.last, target, vm_here);
        }
        Ok(result)
    }
}

/// The target's mean stage times between two `isoe admin stats` LUN
/// entries, µs, for reads and writes: receipt to store, store, store to
/// sent; None for a direction without sampled commands between them.
pub(crate) fn stage_means(before: Option<&Value>, after: Option<&Value>) -> [Option<[f64; 3]>; 2] {
    let (Some(before), Some(after)) = (before, after) else {
        return [None, None];
    };
    ["read", "write"].map(|op| {
        let mut means = [0.0; 3];
        for (i, stage) in ["receipt_to_store", "store", "store_to_sent"]
            .iter()
            .enumerate()
        {
            let field = |v: &Value, f: &str| v[op]["stages"][stage][f].as_u64().unwrap_or(0);
            let count = field(after, "count").saturating_sub(field(before, "count"));
            let sum_ns = field(after, "sum_ns").saturating_sub(field(before, "sum_ns"));
            if count == 0 {
                return None;
            }
            means[i] = sum_ns as f64 / count as f64 / 1000.0;
        }
        Some(means)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stage_means_are_the_differences_over_the_window() {
        let lun = |count: u64, sum: u64| {
            json!({
                "read": {"stages": {
                    "receipt_to_store": {"count": count, "sum_ns": sum},
                    "store": {"count": count, "sum_ns": sum * 2},
                    "store_to_sent": {"count": count, "sum_ns": sum * 3},
                }},
                "write": {"stages": {}},
            })
        };
        let [read, write] = stage_means(Some(&lun(10, 50_000)), Some(&lun(30, 250_000)));
        // 20 commands, 200 µs more: 10 µs each, and twice and three times that.
        assert_eq!(read, Some([10.0, 20.0, 30.0]));
        assert_eq!(write, None, "no writes sampled");
        assert_eq!(stage_means(None, Some(&lun(1, 1))), [None, None]);
    }
}
