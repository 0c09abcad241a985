//! libiscsi through fio as the initiator (the seeds' "software initiator"
//! analogue): the command line, and its JSON ([`FioOutput`]) turned into an
//! `isoe bench` result ([`result`]), with CPU and TCP counters sampled from
//! /proc over the steady part of the run as `isoe bench` samples them
//! ([`sampled_result`], which the lab's other load generators share).

use crate::knobs::{KnobSet, LIBISCSI_FIXED_LENGTH_BYTES};
use crate::record::{FioWorkload, RunResult};
use crate::sampled::{sampled_result, Rates, Sample};
use isoe_bench::{DirectionResult, LatencySummary};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `crates/lab/fio-libiscsi`, built into the binary so that `isoe lab` can
/// build fio also where isoe was installed with `cargo install` and no
/// checkout is around.
pub const BUILD_SCRIPT: &str = include_str!("../../fio-libiscsi");

/// Where the script is in the checkout this binary was built from, if that
/// checkout is still there (for the command a person is told to run).
pub fn script_in_checkout() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fio-libiscsi");
    path.canonicalize().ok().filter(|p| p.is_file())
}

/// Where `crates/lab/fio-libiscsi` keeps what it builds: `ISOE_TOOLS_CACHE`,
/// else `~/.cache/isoe-tools` (the script's own rule).
pub fn tools_cache() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("ISOE_TOOLS_CACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(Path::new(&home).join(".cache/isoe-tools"))
}

/// The binary `crates/lab/fio-libiscsi` builds, whether it is there or not.
pub fn built_fio() -> Option<PathBuf> {
    Some(tools_cache()?.join("fio-libiscsi/fio"))
}

/// Where fio with the libiscsi engine is: `ISOE_FIO`, else what
/// `crates/lab/fio-libiscsi` built into its cache ([`built_fio`]).
pub fn find_fio() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ISOE_FIO").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    built_fio().filter(|p| p.exists())
}

/// Why there is no usable fio with the libiscsi engine ([`usable_fio`]).
#[derive(Debug, thiserror::Error)]
pub enum FioUnusable {
    /// Neither built nor named.
    #[error("not built: no {place}, and ISOE_FIO is not set")]
    NotBuilt {
        /// Where the build script puts it.
        place: String,
    },
    /// It could not be run.
    #[error("{} cannot run: {source}", fio.display())]
    CannotRun {
        /// The program.
        fio: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It has no libiscsi engine (Debian's own fio).
    #[error("{} does not list the libiscsi engine in fio --enghelp", fio.display())]
    NoLibiscsi {
        /// The program.
        fio: PathBuf,
    },
}

/// fio with the libiscsi engine, checked: found ([`find_fio`]) and listing
/// `libiscsi` among its engines (Debian's own fio does not); else why not.
pub fn usable_fio() -> Result<PathBuf, FioUnusable> {
    let Some(fio) = find_fio() else {
        let place = built_fio().map_or("~/.cache/isoe-tools/fio-libiscsi/fio".into(), |p| {
            p.display().to_string()
        });
        return Err(FioUnusable::NotBuilt { place });
    };
    let out = match Command::new(&fio)
        .arg("--enghelp")
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(source) => return Err(FioUnusable::CannotRun { fio, source }),
    };
    let engines = String::from_utf8_lossy(&out.stdout);
    if engines.split_whitespace().any(|w| w == "libiscsi") {
        Ok(fio)
    } else {
        Err(FioUnusable::NoLibiscsi { fio })
    }
}

/// How fio reaches the LUN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FioEngine {
    /// libiscsi in fio's process: the files are `iscsi://` URLs.
    Libiscsi,
    /// libaio with O_DIRECT on the block devices a kernel initiator's
    /// sessions made: the files are `/dev/sdX`.
    KernelLibaio,
}

impl FioEngine {
    /// The initiator, as a result names it.
    pub fn initiator(self) -> &'static str {
        match self {
            FioEngine::Libiscsi => "libiscsi (fio)",
            FioEngine::KernelLibaio => "Linux kernel (open-iscsi; fio libaio O_DIRECT)",
        }
    }
}

/// What one fio run is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    /// How fio reaches the LUN.
    pub engine: FioEngine,
    /// What fio opens: iscsi:// URLs (libiscsi) or block devices (libaio),
    /// one per portal, each driven by every job.
    pub urls: Vec<String>,
    /// Block size in bytes.
    pub block_size_bytes: u32,
    /// Share of reads, %.
    pub read_pct: u8,
    /// Share of random accesses, %.
    pub random_pct: u8,
    /// Outstanding I/Os per job.
    pub queue_depth: u32,
    /// Jobs per URL.
    pub workers: u32,
    /// Measured seconds.
    pub duration_s: f64,
    /// Ramp seconds.
    pub ramp_s: f64,
    /// The span of the LUN the job addresses, bytes.
    pub size_bytes: u64,
}

/// fio's jobs per URL and the depth of each for a libiscsi run of
/// `workers` workers at `queue_depth` with `sessions` sessions each: fio's
/// libiscsi engine opens one session per job, so each session is a job and
/// the sessions share a worker's depth, as `isoe bench`'s do.
pub fn libiscsi_jobs(workers: u32, queue_depth: u32, sessions: u32) -> (u32, u32) {
    let sessions = sessions.max(1);
    (workers * sessions, (queue_depth / sessions).max(1))
}

/// The span a fio job addresses unless the LUN is smaller.
pub const FIO_SPAN_BYTES: u64 = 512 << 20;

impl FioJob {
    /// fio's arguments, laid out as `isoe bench` lays out its work so the two
    /// initiators are compared like for like: `workers` jobs (threads), each
    /// driving every URL (fio's files) with `queue_depth` commands in flight
    /// per URL, reported as one group.
    pub fn args(&self) -> Vec<String> {
        let rw = match (self.read_pct, self.random_pct > 0) {
            (100, false) => "read",
            (100, true) => "randread",
            (0, false) => "write",
            (0, true) => "randwrite",
            (_, false) => "rw",
            (_, true) => "randrw",
        };
        // fio splits file names at ':'; libiscsi URLs escape theirs.
        let files: Vec<String> = self.urls.iter().map(|u| u.replace(':', "\\:")).collect();
        let depth = self.queue_depth * self.urls.len().max(1) as u32;
        let engine = match self.engine {
            FioEngine::Libiscsi => "--ioengine=libiscsi",
            FioEngine::KernelLibaio => "--ioengine=libaio",
        };
        let mut args = vec![
            "--group_reporting".to_string(),
            "--thread".to_string(),
            "--output-format=json".to_string(),
            "--name=lab".to_string(),
            engine.to_string(),
            format!("--filename={}", files.join(":")),
            format!("--rw={rw}"),
        ];
        if self.engine == FioEngine::KernelLibaio {
            // Past the page cache, as libiscsi and isoe bench are.
            args.push("--direct=1".into());
        }
        if self.read_pct != 0 && self.read_pct != 100 {
            args.push(format!("--rwmixread={}", self.read_pct));
        }
        if self.random_pct != 0 && self.random_pct != 100 {
            args.push(format!("--percentage_random={}", self.random_pct));
        }
        args.push(format!("--bs={}", self.block_size_bytes));
        args.push(format!("--iodepth={depth}"));
        args.push(format!("--numjobs={}", self.workers));
        args.push("--time_based".into());
        args.push(format!("--runtime={}", self.duration_s.ceil() as u64));
        args.push(format!("--ramp_time={}", self.ramp_s.ceil() as u64));
        args.push(format!("--size={}", self.size_bytes));
        args
    }
}

/// fio's `--output-format=json` (or `json+`), as far as the lab reads it.
/// What fio leaves out reads as empty or 0, as fio's own zeros: a
/// direction without commands has no percentiles.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FioOutput {
    /// One entry per job, or one for the group (`--group_reporting`).
    #[serde(default)]
    pub jobs: Vec<FioJobOutput>,
}

/// One job (or group) of [`FioOutput`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FioJobOutput {
    /// Its `--name`.
    #[serde(default)]
    pub jobname: String,
    /// Nonzero when the job failed.
    #[serde(default)]
    pub error: i64,
    /// Its reads.
    #[serde(default)]
    pub read: FioDirection,
    /// Its writes.
    #[serde(default)]
    pub write: FioDirection,
}

/// One direction of a [`FioJobOutput`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FioDirection {
    /// Commands completed.
    #[serde(default)]
    pub total_ios: u64,
    /// Bytes they moved.
    #[serde(default)]
    pub io_bytes: u64,
    /// Commands per second (None when fio wrote none).
    #[serde(default)]
    pub iops: Option<f64>,
    /// Bytes per second.
    #[serde(default)]
    pub bw_bytes: f64,
    /// Completion latency, ns: submission to completion as the engine saw
    /// it.
    #[serde(default)]
    pub clat_ns: FioLatency,
    /// Total latency, ns (None when fio wrote none).
    #[serde(default)]
    pub lat_ns: Option<FioLatency>,
}

/// A latency of a [`FioDirection`], ns.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FioLatency {
    /// Commands counted.
    #[serde(default, rename = "N")]
    pub count: u64,
    /// Smallest.
    #[serde(default)]
    pub min: f64,
    /// Largest.
    #[serde(default)]
    pub max: f64,
    /// Mean (None when fio wrote none).
    #[serde(default)]
    pub mean: Option<f64>,
    /// Percentiles by fio's key ("99.900000"); none without commands.
    #[serde(default)]
    pub percentile: BTreeMap<String, f64>,
    /// `json+` only: commands by latency, `{"ns": count}`.
    #[serde(default)]
    pub bins: BTreeMap<String, u64>,
}

/// fio's output and the two samples as an `isoe bench` result: one
/// direction's figures from fio's group, the latency of the busier
/// direction as the whole's, failed jobs as errors; what fio does not
/// report (commands in all, per URL, a series, verification) is absent.
pub fn result(
    fio: &FioOutput,
    job: &FioJob,
    first: &Sample,
    last: &Sample,
    target_pid: Option<u32>,
) -> RunResult {
    let group = fio.jobs.first().cloned().unwrap_or_default();
    let direction = |x: &FioDirection| {
        let lat = &x.clat_ns;
        let pct = |p: &str| lat.percentile.get(p).copied().unwrap_or(0.0) / 1000.0;
        DirectionResult {
            ios: x.total_ios,
            bytes: x.io_bytes,
            iops: x.iops.unwrap_or(0.0),
            mb_per_s: x.bw_bytes / 1e6,
            lat_us: LatencySummary {
                count: lat.count,
                min_us: lat.min / 1000.0,
                mean_us: lat.mean.unwrap_or(0.0) / 1000.0,
                p50_us: pct("50.000000"),
                p90_us: pct("90.000000"),
                p99_us: pct("99.000000"),
                p999_us: pct("99.900000"),
                max_us: lat.max / 1000.0,
            },
        }
    };
    let read = direction(&group.read);
    let write = direction(&group.write);
    let errors = fio.jobs.iter().filter(|j| j.error != 0).count() as u64;
    let lat_us = if read.ios >= write.ios {
        read.lat_us
    } else {
        write.lat_us
    };
    let rates = Rates {
        iops: read.iops + write.iops,
        mb_per_s: read.mb_per_s + write.mb_per_s,
        lat_us,
        read,
        write,
        elapsed_s: job.duration_s,
        errors,
    };
    let mut result = sampled_result(rates, first, last, target_pid);
    result.lab.initiator = Some(job.engine.initiator().to_owned());
    result.lab.fio_workload = Some(FioWorkload {
        block_size_bytes: job.block_size_bytes,
        read_pct: job.read_pct,
        random_pct: job.random_pct,
        queue_depth: job.queue_depth,
        workers: job.workers,
        duration_s: job.duration_s,
        ramp_s: job.ramp_s,
        urls: job.urls.clone(),
    });
    result
}

/// Knobs libiscsi (as fio's engine drives it) cannot honour, by
/// [`KnobSet::describe`] name, with the reason. The worker count is fio's
/// `--numjobs` (the runners build it from the workload's shape); the iSCSI
/// parameters reach a libiscsi session through the target's offer
/// ([`KnobSet::target_defaults_toml`]) where negotiation allows it.
pub fn limits(knobs: &KnobSet) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut no = |key: &str, why: String| out.push((key.to_string(), why));
    if knobs.nodelay == Some(false) {
        no(
            "nodelay",
            "libiscsi always sets TCP_NODELAY on its socket".into(),
        );
    }
    if knobs.quickack == Some(true) {
        no(
            "quickack",
            "libiscsi never sets TCP_QUICKACK and fio has no option for it".into(),
        );
    }
    for (key, v) in [
        ("rcvbuf", knobs.rcvbuf_bytes),
        ("sndbuf", knobs.sndbuf_bytes),
        ("busy_poll_us", knobs.busy_poll_us),
    ] {
        if v.is_some() {
            no(
                key,
                "libiscsi sets no SO_RCVBUF, SO_SNDBUF or SO_BUSY_POLL and fio has no option for them"
                    .into(),
            );
        }
    }
    if knobs.data_digest == Some(true) {
        no(
            "data_digest",
            "libiscsi always offers DataDigest=None".into(),
        );
    }
    if let Some(v) = knobs.max_recv_data_segment_length {
        if v != LIBISCSI_FIXED_LENGTH_BYTES {
            no(
                "max_recv_data_segment_length",
                format!(
                    "libiscsi declares MaxRecvDataSegmentLength={LIBISCSI_FIXED_LENGTH_BYTES} itself; only the target's declaration changes"
                ),
            );
        }
    }
    for (key, param, v) in [
        (
            "first_burst_length",
            "FirstBurstLength",
            knobs.first_burst_length,
        ),
        ("max_burst_length", "MaxBurstLength", knobs.max_burst_length),
    ] {
        if v.is_some_and(|v| v > LIBISCSI_FIXED_LENGTH_BYTES) {
            no(
                key,
                format!(
                    "libiscsi offers {param}={LIBISCSI_FIXED_LENGTH_BYTES} and the smaller offer wins (RFC 7143 §13.13, §13.14)"
                ),
            );
        }
    }
    if knobs.connections.is_some_and(|n| n > 1) {
        no(
            "connections",
            "libiscsi offers MaxConnections=1 (no MC/S)".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libiscsi_sessions_are_jobs_sharing_a_workers_depth() {
        assert_eq!(libiscsi_jobs(1, 64, 32), (32, 2));
        assert_eq!(libiscsi_jobs(2, 64, 2), (4, 32));
        assert_eq!(libiscsi_jobs(1, 32, 1), (1, 32));
        // Never a job with nothing to do.
        assert_eq!(libiscsi_jobs(1, 2, 4), (4, 1));
    }

    #[test]
    fn fio_arguments_escape_urls_and_mix_reads() {
        let job = FioJob {
            engine: FioEngine::Libiscsi,
            urls: vec!["iscsi://10.99.1.2:3260/iqn.2026-11.io.isoe:lab/0".into()],
            block_size_bytes: 8192,
            read_pct: 67,
            random_pct: 100,
            queue_depth: 5,
            workers: 1,
            duration_s: 5.0,
            ramp_s: 1.0,
            size_bytes: FIO_SPAN_BYTES,
        };
        let args = job.args();
        assert!(
            args.contains(
                &"--filename=iscsi\\://10.99.1.2\\:3260/iqn.2026-11.io.isoe\\:lab/0".to_string()
            ),
            "{args:?}"
        );
        assert!(args.contains(&"--rw=randrw".to_string()));
        assert!(args.contains(&"--rwmixread=67".to_string()));
        assert!(!args.iter().any(|a| a.starts_with("--percentage_random")));
        assert!(args.contains(&"--iodepth=5".to_string()));
        let seq = FioJob {
            read_pct: 100,
            random_pct: 0,
            ..job.clone()
        }
        .args();
        assert!(seq.contains(&"--rw=read".to_string()));
        let web = FioJob {
            read_pct: 95,
            random_pct: 75,
            ..job
        }
        .args();
        assert!(web.contains(&"--percentage_random=75".to_string()));
        let kernel = FioJob {
            engine: FioEngine::KernelLibaio,
            urls: vec!["/dev/sdb".into(), "/dev/sdc".into()],
            read_pct: 100,
            random_pct: 100,
            ..seq_job()
        }
        .args();
        for arg in [
            "--ioengine=libaio",
            "--direct=1",
            "--filename=/dev/sdb:/dev/sdc",
            "--rw=randread",
            "--iodepth=10",
        ] {
            assert!(kernel.contains(&arg.to_string()), "{arg} in {kernel:?}");
        }
    }

    fn seq_job() -> FioJob {
        FioJob {
            engine: FioEngine::Libiscsi,
            urls: vec!["iscsi://a:1/t:x/0".into()],
            block_size_bytes: 4096,
            read_pct: 100,
            random_pct: 0,
            queue_depth: 5,
            workers: 1,
            duration_s: 5.0,
            ramp_s: 1.0,
            size_bytes: FIO_SPAN_BYTES,
        }
    }

    #[test]
    fn two_portals_are_one_job_driving_both() {
        // As isoe bench counts it: QD per URL, so fio's depth is QD x URLs.
        let two = FioJob {
            engine: FioEngine::Libiscsi,
            urls: vec!["iscsi://a:1/t:x/0".into(), "iscsi://b:2/t:x/0".into()],
            block_size_bytes: 262144,
            read_pct: 100,
            random_pct: 0,
            queue_depth: 8,
            workers: 2,
            duration_s: 5.0,
            ramp_s: 1.0,
            size_bytes: FIO_SPAN_BYTES,
        }
        .args();
        let files = "--filename=iscsi\\://a\\:1/t\\:x/0:iscsi\\://b\\:2/t\\:x/0";
        assert!(two.contains(&files.to_string()), "{two:?}");
        assert!(two.contains(&"--iodepth=16".to_string()));
        assert!(two.contains(&"--numjobs=2".to_string()));
        assert_eq!(two.iter().filter(|a| a.starts_with("--name=")).count(), 1);
    }

    /// The number a command line carries: `--NAME=N`.
    fn arg_value(args: &[String], name: &str) -> u32 {
        let prefix = format!("--{name}=");
        let found = args.iter().find_map(|a| a.strip_prefix(&prefix));
        found
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {args:?}"))
    }

    #[test]
    fn a_run_records_the_in_flight_total_its_command_line_carries() {
        // dell-2013's software initiator on the congested SAN: 40 in
        // flight over 4 portals x 2 workers, with and without sessions
        // (five: each a job of depth 1).
        let plan = crate::plan::Plan::embedded("dell-2013").unwrap();
        let cases = plan.resolved_cases();
        let case = cases
            .iter()
            .find(|c| c.name == "congested-software-initiator")
            .unwrap();
        let urls: Vec<String> = (0..4)
            .map(|i| format!("iscsi://10.99.3.{i}/t:x/0"))
            .collect();
        for sessions in [1, 5] {
            let shape = plan
                .workload("seq-read-256k")
                .unwrap()
                .shape(&case.knobs, 4);
            let (workers, queue_depth) = libiscsi_jobs(shape.workers, shape.queue_depth, sessions);
            for (engine, urls) in [
                (FioEngine::Libiscsi, urls.clone()),
                (
                    FioEngine::KernelLibaio,
                    vec!["/dev/sdb".into(), "/dev/sdc".into()],
                ),
            ] {
                let job = FioJob {
                    engine,
                    urls,
                    queue_depth,
                    workers,
                    ..seq_job()
                };
                let args = job.args();
                let carried = arg_value(&args, "iodepth") * arg_value(&args, "numjobs");
                let sample = Sample {
                    cpu: Default::default(),
                    fio: Default::default(),
                    target: None,
                    tcp: Default::default(),
                    target_tcp: None,
                    at: std::time::Instant::now(),
                };
                let ran = result(&FioOutput::default(), &job, &sample, &sample, None);
                assert_eq!(ran.in_flight_commands(), Some(carried), "{args:?}");
                if job.urls.len() == 4 {
                    assert_eq!(carried, 40, "{args:?}");
                }
            }
        }
    }

    #[test]
    fn libiscsi_names_what_it_fixes_itself() {
        let not_applied = limits(&crate::knobs::tests::everything());
        let keys: Vec<&str> = not_applied.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "nodelay",
                "quickack",
                "rcvbuf",
                "sndbuf",
                "busy_poll_us",
                "data_digest",
                "max_recv_data_segment_length",
                "max_burst_length",
                "connections",
            ]
        );
        assert!(not_applied.iter().all(|(_, why)| !why.is_empty()));
        // What negotiation lets the target decide is not listed: header
        // digest, ImmediateData, InitialR2T, bursts up to libiscsi's 256 KiB.
        let fine = KnobSet {
            header_digest: Some(true),
            immediate_data: Some(false),
            initial_r2t: Some(true),
            first_burst_length: Some(65_536),
            max_burst_length: Some(262_144),
            max_recv_data_segment_length: Some(262_144),
            nodelay: Some(true),
            connections: Some(1),
            ..KnobSet::default()
        };
        assert!(limits(&fine).is_empty(), "{:?}", limits(&fine));
    }
}
