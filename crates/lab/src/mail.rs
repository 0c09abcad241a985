//! A mail server's storage load, shaped after what Microsoft Exchange's
//! database engine (ESE) asks of a disk and reported in the terms Exchange
//! Jetstress 2013 uses (seed 003's table: achieved transactional I/O per
//! second, database read average latency, log write average latency,
//! processor time). fio makes the load on a file system on the initiator's
//! block device. It is not Jetstress and its figures are not Jetstress's:
//! there is no ESE, no checksumming of pages, no background database
//! maintenance, and the read/write ratio and log write size are the plan's,
//! not measured from Exchange (METHODOLOGY.md, "The mail workload").
//!
//! Two fio jobs run side by side:
//! - `db`: the database file, random reads and writes of one ESE page
//!   (32 KiB in Exchange 2013), `threads` in flight (Jetstress's thread
//!   count), `read_pct` of them reads;
//! - `log`: the transaction log, sequential writes of `log_block_bytes`,
//!   one at a time, each write-through (`O_DSYNC`, as ESE opens its logs),
//!   so its latency is a commit's.

use crate::peers::fio::{FioJobOutput, FioOutput};
use isoe_bench::latency::LatencyRecorder;
use std::collections::BTreeMap;
use thiserror::Error;

/// The database job's name in fio's arguments and output.
pub const DB_JOB: &str = "db";
/// The log job's name.
pub const LOG_JOB: &str = "log";

/// The load's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct MailProfile {
    /// The database file's size, bytes.
    pub db_bytes: u64,
    /// The log file's size, bytes (written round and round).
    pub log_bytes: u64,
    /// Database I/Os in flight.
    pub threads: u32,
    /// Database reads among database I/Os, %.
    pub read_pct: u8,
    /// One database page, bytes.
    pub db_block_bytes: u32,
    /// One log write, bytes.
    pub log_block_bytes: u32,
    /// Measured seconds.
    pub duration_s: u64,
    /// Seconds run before measuring.
    pub ramp_s: u64,
}

impl Default for MailProfile {
    /// Exchange 2013's 32 KiB page; 32 threads as seed 003 ran; reads 60% of
    /// database I/O; 8 KiB log writes.
    fn default() -> Self {
        MailProfile {
            db_bytes: 1 << 30,
            log_bytes: 128 << 20,
            threads: 32,
            read_pct: 60,
            db_block_bytes: 32 << 10,
            log_block_bytes: 8 << 10,
            duration_s: 30,
            ramp_s: 5,
        }
    }
}

impl MailProfile {
    /// fio's arguments for both jobs, their files in `dir` (a directory on
    /// the file system under test). Output is `json+`, whose latency bins
    /// give the histograms.
    pub fn fio_args(&self, dir: &str) -> Vec<String> {
        vec![
            "--output-format=json+".into(),
            "--thread".into(),
            format!("--directory={dir}"),
            "--ioengine=libaio".into(),
            "--direct=1".into(),
            "--time_based".into(),
            format!("--runtime={}", self.duration_s),
            format!("--ramp_time={}", self.ramp_s),
            format!("--name={DB_JOB}"),
            "--filename=mail.edb".into(),
            format!("--size={}", self.db_bytes),
            "--rw=randrw".into(),
            format!("--rwmixread={}", self.read_pct),
            format!("--bs={}", self.db_block_bytes),
            format!("--iodepth={}", self.threads),
            format!("--name={LOG_JOB}"),
            "--filename=mail.log".into(),
            format!("--size={}", self.log_bytes),
            "--rw=write".into(),
            format!("--bs={}", self.log_block_bytes),
            "--iodepth=1".into(),
            "--sync=dsync".into(),
        ]
    }
}

/// fio's output lacks what the report needs.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum MailError {
    #[error("fio's output has no job {0:?}")]
    NoJob(&'static str),
    #[error("fio's job {job:?} has no {field}")]
    Missing { job: &'static str, field: String },
}

/// The figures, as Jetstress names them, plus the histograms.
#[derive(Debug, Clone)]
pub struct MailResult {
    /// Database reads and writes per second together: Jetstress's
    /// "achieved transactional I/O per second".
    pub transactional_iops: f64,
    pub db_reads_per_s: f64,
    pub db_writes_per_s: f64,
    /// Mean database read latency, submission to completion, ms.
    pub db_read_avg_ms: f64,
    pub db_write_avg_ms: f64,
    pub log_writes_per_s: f64,
    /// Mean log write latency, ms.
    pub log_write_avg_ms: f64,
    /// Completion latencies of the database's reads and writes, from
    /// fio's bins.
    pub db_read_latency: LatencyRecorder,
    pub db_write_latency: LatencyRecorder,
    /// Jobs fio reports an error for.
    pub errors: u64,
}

impl MailResult {
    /// Reads fio's `json+` output of [`MailProfile::fio_args`].
    pub fn from_fio(fio: &FioOutput) -> Result<MailResult, MailError> {
        let job = |name: &'static str| {
            fio.jobs
                .iter()
                .find(|j| j.jobname == name)
                .ok_or(MailError::NoJob(name))
        };
        let (db, log) = (job(DB_JOB)?, job(LOG_JOB)?);
        let missing = |job: &'static str, field: &str| MailError::Missing {
            job,
            field: field.to_string(),
        };
        let iops = |j: &FioJobOutput, name: &'static str, write: bool| {
            let (d, field) = if write {
                (&j.write, "write.iops")
            } else {
                (&j.read, "read.iops")
            };
            d.iops.ok_or_else(|| missing(name, field))
        };
        let mean = |j: &FioJobOutput, name: &'static str, write: bool| {
            let (d, field) = if write {
                (&j.write, "write.lat_ns.mean")
            } else {
                (&j.read, "read.lat_ns.mean")
            };
            d.lat_ns
                .as_ref()
                .and_then(|l| l.mean)
                .ok_or_else(|| missing(name, field))
        };
        let db_reads_per_s = iops(db, DB_JOB, false)?;
        let db_writes_per_s = iops(db, DB_JOB, true)?;
        let ms = |ns: f64| ns / 1e6;
        Ok(MailResult {
            transactional_iops: db_reads_per_s + db_writes_per_s,
            db_reads_per_s,
            db_writes_per_s,
            db_read_avg_ms: ms(mean(db, DB_JOB, false)?),
            db_write_avg_ms: ms(mean(db, DB_JOB, true)?),
            log_writes_per_s: iops(log, LOG_JOB, true)?,
            log_write_avg_ms: ms(mean(log, LOG_JOB, true)?),
            db_read_latency: bins(&db.read.clat_ns.bins),
            db_write_latency: bins(&db.write.clat_ns.bins),
            errors: fio.jobs.iter().filter(|j| j.error != 0).count() as u64,
        })
    }
}

/// fio's `json+` latency bins (`{"ns": count}`) in a histogram; none when
/// fio wrote none (plain `json` output).
fn bins(bins: &BTreeMap<String, u64>) -> LatencyRecorder {
    let mut recorder = LatencyRecorder::new();
    for (ns, count) in bins {
        if let Ok(ns) = ns.parse::<u64>() {
            recorder.record_n(ns, *count);
        }
    }
    recorder
}
