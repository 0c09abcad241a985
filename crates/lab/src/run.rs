//! What a run is, whichever way a case runs (in namespaces on this
//! machine, `runner`, or on a test bed of machines, `bed`): the target and
//! LUN every run serves, the target's configuration, the measured window
//! and what a run gives back.

use crate::application::ApplicationResult;
use crate::floor::FloorShape;
use crate::foreign::{ForeignLoad, Snapshot};
use crate::knobs::KnobSet;
use crate::peers::fio::FioWorkload;
use isoe_bench::cpu::CpuSplit;
use isoe_bench::{BenchOutput, BenchResult, RunnerFigures};
use isoe_report::record::Metric;
use serde::Serialize;
use std::time::Duration;
use thiserror::Error;

/// The target every lab run serves.
pub const TARGET_IQN: &str = "iqn.2026-11.io.isoe:lab";
/// The LUN size: sparse memory, so only what is written costs memory.
pub(crate) const LUN_SIZE: &str = "1GiB";
/// [`LUN_SIZE`] in bytes, for targets that take a number (LIO's RAM disk).
pub(crate) const LUN_SIZE_BYTES: u64 = 1 << 30;
/// The configuration of the `isoe target` a case runs: `TARGET_IQN` with
/// LUN 0 a sparse memory LUN, listening on `portals`, negotiating what
/// `knobs` ask.
///
/// `control` is the control socket's path (`""`: none), so that the lab's
/// target never takes the default socket of a target an administrator runs.
pub(crate) fn isoe_target_config(
    case: &str,
    portals: &[String],
    knobs: &KnobSet,
    control: &str,
) -> String {
    let portal_list = portals
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "# isoe lab, case {case}\nportals = [{portal_list}]\n\n[control]\nsocket = {control:?}\n\n{defaults}\n[[target]]\nname = \"{TARGET_IQN}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"{LUN_SIZE}\"\n",
        defaults = knobs.target_defaults_toml(),
    ) + &knobs.target_datapath_toml()
}

/// Why a run gave no result.
pub(crate) enum BenchFailure {
    /// Ctrl-C.
    Stopped,
    /// No result, and why.
    Failed(String),
}

/// What one run gave: its result, when it began, and the foreign load
/// over its measured window.
pub(crate) struct Measured {
    pub(crate) result: RunResult,
    pub(crate) started_at: String,
    pub(crate) foreign: Option<ForeignLoad>,
}

/// A run's result, as `results.jsonl` keeps it (a record's `bench`): an
/// `isoe bench` result, which `isoe bench` itself gave ([`BenchOutput`],
/// with its runner's figures) or which the lab made of another load
/// generator's output and its own `/proc` samples (fio, `isoe netprobe`,
/// an application), and what the lab adds of its own. One flat JSON
/// object, its keys sorted ([`RunResult::to_json`]), as before these were
/// types.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// The result, in `isoe bench`'s fields.
    #[serde(flatten)]
    pub bench: BenchResult,
    /// What `isoe bench`'s runner adds; None for the lab's other load
    /// generators.
    #[serde(flatten)]
    pub runner: Option<RunnerFigures>,
    /// What the lab adds.
    #[serde(flatten)]
    pub lab: LabFigures,
}

/// The fields the lab adds to a run's result, each left out when None.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LabFigures {
    /// The initiator, for people, when it is not `isoe bench` (fio's
    /// engine, an application's block device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiator: Option<String>,
    /// A fio run's job, as its `workload` (`isoe bench`'s own goes in
    /// [`BenchResult::workload`], which is None then).
    #[serde(rename = "workload", skip_serializing_if = "Option::is_none")]
    pub fio_workload: Option<FioWorkload>,
    /// The span between the lab's own `/proc` samples, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_window_s: Option<f64>,
    /// A floor run's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorShape>,
    /// An application run's figures.
    #[serde(flatten)]
    pub application: Option<ApplicationResult>,
    /// On a target host of its own: whose CPU `target_cpu_s` is,
    /// `process` (the target's) or `host` (all of its host's, for LIO and
    /// other kernel targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_cpu_scope: Option<String>,
    /// On a target host of its own: that host's CPU split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_host_cpu: Option<CpuSplit>,
    /// On a test bed: the initiator host's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed_initiator_host: Option<String>,
    /// On a test bed: the target host's name, or `external`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed_target_host: Option<String>,
}

impl RunResult {
    /// What `isoe bench` printed, as it printed it.
    pub fn of_bench(output: BenchOutput) -> RunResult {
        RunResult {
            bench: output.result,
            runner: Some(output.runner),
            lab: LabFigures::default(),
        }
    }

    /// The value of `metric` in this result; None when it has none (a
    /// transaction rate of a run that is no application's).
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::Iops => Some(self.bench.iops),
            Metric::MbPerS => Some(self.bench.mb_per_s),
            Metric::Tps => self.lab.application.as_ref().and_then(|a| a.tps),
        }
    }

    /// The result as a record keeps it: one JSON object with its keys
    /// sorted (a number that is not finite is null, as serde_json writes
    /// it).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// For tests: a result of the lab's with the figures `fields` gives
    /// (bench's JSON names) and zeros for the figures a result must have.
    #[cfg(test)]
    pub(crate) fn for_tests(fields: serde_json::Value) -> RunResult {
        let mut bench = serde_json::json!({
            "iops": 0.0, "mb_per_s": 0.0, "lat_us": isoe_bench::LatencySummary::default(),
            "read": isoe_bench::DirectionResult::default(),
            "write": isoe_bench::DirectionResult::default(),
            "initiator_cpu_s": 0.0, "cpu": CpuSplit::default(), "steal_pct": 0.0,
            "out_segs": 0, "retrans_segs": 0, "retrans_pct": 0.0, "dsack_segs": 0,
            "elapsed_s": 0.0, "errors": 0,
        });
        if let (Some(into), serde_json::Value::Object(from)) = (bench.as_object_mut(), fields) {
            into.extend(from);
        }
        RunResult {
            bench: serde_json::from_value(bench).expect("a bench result"),
            runner: None,
            lab: LabFigures::default(),
        }
    }
}

/// Two `/proc` snapshots around a run's measured window, for its foreign
/// load; taken while the load generator is still alive (once reaped, its
/// time would count as nobody's).
pub(crate) struct Window {
    pub(crate) start: Duration,
    pub(crate) end: Duration,
    first: Option<Snapshot>,
    last: Option<Snapshot>,
    /// Command names of this machine's programs that belong to the test
    /// bed (a VM carrying a host), counted as the lab's own.
    bed_processes: Vec<String>,
}

impl Window {
    /// The window from `start` to `end` after the load generator started.
    pub(crate) fn new(start: Duration, end: Duration) -> Window {
        debug_assert!(end > start);
        Window {
            start,
            end,
            first: None,
            last: None,
            bed_processes: Vec::new(),
        }
    }

    /// Counts this machine's processes of these command names as the
    /// lab's own (the kernel keeps 15 bytes of a command name).
    pub(crate) fn owning(mut self, names: &[String]) -> Window {
        self.bed_processes = names.iter().map(|n| n.chars().take(15).collect()).collect();
        self
    }

    /// Called every few ms with the time since the start.
    pub(crate) fn tick(&mut self, t: Duration) {
        if self.first.is_none() && t >= self.start {
            self.first = Snapshot::take();
        } else if self.first.is_some() && self.last.is_none() && t >= self.end {
            self.last = Snapshot::take();
        }
    }

    /// Whether both snapshots were taken.
    pub(crate) fn complete(&self) -> bool {
        self.first.is_some() && self.last.is_some()
    }

    /// The load between the snapshots; the lab's own processes are this
    /// one and its descendants.
    pub(crate) fn load(&self) -> Option<ForeignLoad> {
        let first = self.first.as_ref()?;
        let mut roots = vec![std::process::id()];
        roots.extend(
            first
                .processes
                .iter()
                .filter(|(_, p)| self.bed_processes.contains(&p.comm))
                .map(|(pid, _)| *pid),
        );
        crate::foreign::between(first, self.last.as_ref()?, &roots)
    }
}

/// The measured window of a run of `ramp_s` + `duration_s`: from just after
/// the ramp to just before the end, at least 0.2 s.
pub(crate) fn measured_window(ramp_s: f64, duration_s: f64) -> Window {
    let start = ramp_s + 0.3;
    let end = (ramp_s + duration_s - 0.3).max(start + 0.2);
    Window::new(Duration::from_secs_f64(start), Duration::from_secs_f64(end))
}

/// Why a plan could not run.
#[derive(Debug, Error)]
pub enum LabError {
    /// Building or removing a topology failed.
    #[error("topology: {0}")]
    Topology(String),
    /// The test bed could not be used.
    #[error("topology: {0}")]
    TestBed(#[source] Box<crate::bed::BedError>),
    /// A case names a topology there is none of.
    #[error("topology: case {case}: {source}")]
    UnknownTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::UnknownKind,
    },
    /// A case's topology could not be built.
    #[error("topology: case {case}: {source}")]
    CaseTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::TopologyError,
    },
    /// A case's topology could not be removed.
    #[error("topology: removing the topology of case {case}: {source}")]
    RemovingTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::TopologyError,
    },
    /// tgt did not start for a case.
    #[error("target: case {case}: {source}")]
    Tgt {
        /// The case.
        case: String,
        /// Why.
        source: Box<crate::peers::tgt::TgtError>,
    },
    /// `isoe target` could not be started.
    #[error("target: cannot start {}: {source}", isoe.display())]
    TargetSpawn {
        /// The isoe binary.
        isoe: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The floor's server could not be started.
    #[error("target: case {case}: cannot start {} netprobe --serve: {source}", isoe.display())]
    FloorSpawn {
        /// The case.
        case: String,
        /// The isoe binary.
        isoe: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The target did not start.
    #[error("target: {0}")]
    Target(String),
    /// A bench run failed in a way that is not a measurement.
    #[error("bench: {0}")]
    Bench(String),
    /// Files in the output directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The output directory holds results of another plan.
    #[error("{0}")]
    Resume(String),
    /// The report, or what it is drawn from, could not be written or read
    /// back.
    #[error("report: {0}")]
    Report(#[from] isoe_report::stored::StoredError),
}
