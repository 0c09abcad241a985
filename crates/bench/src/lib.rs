//! isoe-bench: measuring an iSCSI initiator–target pair as METHODOLOGY.md
//! defines it.
//!
//! Owns the seeds' named workloads and seed 003's workers × queue-depth
//! matrix, the description of a run ([`Workload`]), per-command latency
//! histograms, system and per-process CPU counters from `/proc/stat` and
//! `/proc/PID/stat`, the CPU other processes used meanwhile ([`foreign`]),
//! TCP retransmission counters from `/proc/net`, the arithmetic of
//! throughput, service demand and CPU effectiveness, and the
//! JSON result and the table for people; and the fill ([`fill`]) that
//! writes every block of a LU before a read benchmark reads it.
//!
//! It never touches target internals: the target is observed from outside,
//! through the iSCSI commands the initiator sends and the `/proc` counters
//! of its process. Units: MB = 10^6 bytes, KiB = 1024 bytes, latency in µs,
//! CPU% of all CPUs (foreign load: % of one CPU, as the lab gives it).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod address;
pub mod cpu;
pub mod demand;
pub mod fill;
pub mod foreign;
pub mod halt;
pub mod host;
pub mod latency;
pub mod proc_error;
pub mod profiles;
pub mod report;
pub mod run;
pub mod series;
pub mod table;
pub mod target_pid;
pub mod tcp;
pub mod timestamp;
pub mod verify;
pub mod workload;

pub use cpu::{CpuSplit, CpuTimes, ProcessCpu};
pub use fill::{FillOutput, FillReport, FilledLun};
pub use host::Host;
pub use latency::{LatencyRecorder, LatencySummary};
pub use proc_error::ProcError;
pub use profiles::{MatrixCell, Profile};
pub use report::{
    BenchResult, DirectionMeasurements, DirectionResult, Measurements, Units, UrlMeasurements,
    UrlResult,
};
pub use run::{BenchOutput, LatencyHistograms, RunnerFigures};
pub use series::SeriesPoint;
pub use tcp::{TcpCounters, TcpDelta};
pub use workload::{redact_url, Workload, WorkloadError};
