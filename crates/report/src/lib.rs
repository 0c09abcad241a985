//! isoe-report: the report of a plan run (METHODOLOGY.md "Reports"):
//! `report.md`, readable as plain text, and `report.html`, one
//! self-contained file with inline CSS and hand-written SVG charts (no
//! scripts, no external fonts or images).
//!
//! Owns the lines of `results.jsonl` ([`record`]), the statistics a plan
//! decides by ([`stats`]), a command's latency split by component
//! ([`components`]), and the report drawn from them. Both files come from
//! the same [`summarize`] of the run records: per case × workload the
//! statistics of seed 001 §3.3 (mean, median, RSD, N, converged, % change
//! over the baseline and its significance) beside CPU, CPU effectiveness,
//! retransmissions and latency.
//!
//! It never runs anything and never looks at the machine: no processes, no
//! `/proc`, no network. What it says of the host comes in as values
//! ([`Environment`]), read by the lab; the only files it touches are those
//! of the run directory it is handed ([`write_reports`], [`stored`]).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod answer;
mod applications;
mod by_component;
mod charts;
pub mod components;
mod document;
mod effects;
mod escape;
mod findings;
mod html;
mod markdown;
mod naming;
mod notes;
mod numbers;
pub mod recommend;
pub mod record;
mod sections;
pub mod seeds;
mod stacked;
pub mod stats;
pub mod stored;
mod summary;
mod svg;

use crate::record::{Metric, RunRecord};
use crate::stats::Rules;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

pub use html::render_html;
pub use markdown::render_markdown;
pub use notes::{notes, Note};
pub use summary::{summarize, Buckets, CellSummary, Latency, SideCpu};

/// Everything a report is drawn from: the plan, how it ran, and its records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReportInput {
    /// The plan's name (`quick`, `dell-2013`, or a user's).
    pub plan_name: String,
    /// What the plan evaluates, one paragraph.
    pub plan_description: String,
    /// Where the plan came from: "built-in" or a file path.
    pub plan_source: String,
    /// The question the plan asks (its `question` key), which the report
    /// opens by answering; None for a plan without one (and runs recorded
    /// before plans had it), whose report asks a question made from its
    /// cases.
    #[serde(default)]
    pub question: Option<String>,
    /// The seeds the plan reproduces ("000" to "004").
    #[serde(default)]
    pub seeds: Vec<String>,
    /// Cases that did not run at all, with why (a program missing).
    #[serde(default)]
    pub skipped_cases: Vec<(String, String)>,
    /// The plan file's text, shown in an appendix.
    pub plan_text: String,
    /// The statistical rules the plan ran by.
    pub rules: Rules,
    /// Whether the initiator and the target were held to separate CPUs
    /// (`[run] pin_cpus` or `isoe lab --pin-cpus`).
    #[serde(default)]
    pub pin_cpus: bool,
    /// The topology the plan ran on.
    pub topology: String,
    /// The baseline's knobs, `name = value` for people.
    pub baseline_knobs: BTreeMap<String, String>,
    /// The test cases, the baseline first (named "baseline").
    pub cases: Vec<CaseInfo>,
    /// The workloads, in the plan's order.
    pub workloads: Vec<WorkloadInfo>,
    /// The machine and software the plan ran on.
    pub environment: Environment,
    /// Every run, valid or not, as read back from `results.jsonl`; left
    /// out of `report-input.json` ([`stored`]), since `results.jsonl`
    /// holds them.
    #[serde(skip)]
    pub records: Vec<RunRecord>,
    /// What the runner wants said (skipped knobs, interruptions, ...).
    pub notes: Vec<String>,
}

/// One test case of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseInfo {
    /// Its name, as in the records.
    pub name: String,
    /// What it tests, one line.
    pub description: String,
    /// The knobs it sets differently from the baseline, `name = value`.
    pub knobs_changed: BTreeMap<String, String>,
    /// The case its effects are measured against (seed 002's cumulative
    /// steps each against the step before); None or "baseline" for the
    /// baseline.
    #[serde(default)]
    pub compare_to: Option<String>,
    /// The workloads it runs (a plan may run a case on fewer than all);
    /// empty: every workload of the plan.
    #[serde(default)]
    pub workloads: Vec<String>,
    /// The topology it runs on; empty: the plan's.
    #[serde(default)]
    pub topology: String,
}

impl CaseInfo {
    /// Whether the case runs `workload` at all.
    pub fn runs(&self, workload: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == workload)
    }
}

/// One workload of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// Its name, as in the records.
    pub name: String,
    /// The metric its statistics and effects are computed on.
    pub metric: Metric,
    /// Large block (seed 004): reported in MB/s in the throughput tables;
    /// small block in IOPS.
    pub large_block: bool,
    /// What it does, one line (block size, read %, access, queue depth).
    pub description: String,
}

/// The machine and software a plan ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub ncpus: u32,
    /// Memory, for people ("7.8 GiB").
    pub memory: String,
    /// isoe's version (and commit).
    pub isoe_version: String,
    /// Other programs and their versions (fio, tgt, ethtool, iproute2, ...).
    pub peer_versions: BTreeMap<String, String>,
    /// NIC features as ethtool showed them, a text block.
    pub nic_features: String,
    /// When the plan started (RFC 3339 UTC).
    pub started_at: String,
    /// When it finished (RFC 3339 UTC).
    pub finished_at: String,
    /// The host's name.
    pub host: String,
}

/// Where [`write_reports`] put the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPaths {
    /// `report.md`.
    pub markdown: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
}

/// Writes `report.md` and `report.html` into `out_dir` (which must exist).
pub fn write_reports(input: &ReportInput, out_dir: &Path) -> io::Result<ReportPaths> {
    let paths = ReportPaths {
        markdown: out_dir.join("report.md"),
        html: out_dir.join("report.html"),
    };
    std::fs::write(&paths.markdown, render_markdown(input))?;
    std::fs::write(&paths.html, render_html(input))?;
    Ok(paths)
}

impl ReportInput {
    /// The baseline case: the first one.
    pub fn baseline(&self) -> Option<&CaseInfo> {
        self.cases.first()
    }

    /// The topology `case` runs on.
    pub fn topology_of(&self, case: &str) -> &str {
        self.cases
            .iter()
            .find(|c| c.name == case)
            .map(|c| c.topology.as_str())
            .filter(|t| !t.is_empty())
            .unwrap_or(&self.topology)
    }

    /// When `case` runs on another topology than its reference: both. Its
    /// effect is then the topology's as much as its settings', so it is
    /// shown but recommends nothing.
    pub fn topology_change(&self, case: &str) -> Option<(&str, &str)> {
        let (own, theirs) = (
            self.topology_of(case),
            self.topology_of(self.reference_of(case)),
        );
        (own != theirs).then_some((own, theirs))
    }

    /// The workload named `name`.
    pub fn workload(&self, name: &str) -> Option<&WorkloadInfo> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// The case `case` is measured against: its `compare_to` when that names
    /// another case of the plan, else the baseline.
    pub fn reference_of(&self, case: &str) -> &str {
        let baseline = self.baseline().map_or("baseline", |b| b.name.as_str());
        self.cases
            .iter()
            .find(|c| c.name == case)
            .and_then(|c| c.compare_to.as_deref())
            .filter(|r| *r != case && self.cases.iter().any(|c| c.name == *r))
            .unwrap_or(baseline)
    }

    /// The value `case` gives `knob`: its own, else the baseline's.
    pub fn value_in(&self, case: &str, knob: &str) -> String {
        self.cases
            .iter()
            .find(|c| c.name == case)
            .and_then(|c| c.knobs_changed.get(knob).cloned())
            .unwrap_or_else(|| self.baseline_value(knob))
    }

    /// The knobs whose values differ between `case` and its reference, as
    /// (knob, value in the reference, value in the case).
    pub fn changes_from_reference(&self, case: &str) -> Vec<(String, String, String)> {
        let reference = self.reference_of(case);
        let mut knobs: Vec<&String> = Vec::new();
        for c in self
            .cases
            .iter()
            .filter(|c| c.name == case || c.name == reference)
        {
            knobs.extend(c.knobs_changed.keys());
        }
        knobs.sort();
        knobs.dedup();
        knobs
            .into_iter()
            .map(|k| {
                (
                    k.clone(),
                    self.value_in(reference, k),
                    self.value_in(case, k),
                )
            })
            .filter(|(_, from, to)| from != to)
            .collect()
    }

    /// The baseline's value of `knob`: from the plan, else from a baseline
    /// run's record, else "default".
    pub fn baseline_value(&self, knob: &str) -> String {
        if let Some(v) = self.baseline_knobs.get(knob) {
            return v.clone();
        }
        let baseline = self.baseline().map(|c| c.name.as_str()).unwrap_or("");
        self.records
            .iter()
            .filter(|r| r.case == baseline)
            .find_map(|r| r.knobs.get(knob).cloned())
            .unwrap_or_else(|| "default".to_string())
    }
}
