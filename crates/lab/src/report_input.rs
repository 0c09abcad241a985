//! What the report is built from: the plan, the runs, the notes, and the
//! machine they ran on.

use crate::plan::Plan;
use isoe_report::record::RunRecord;
use isoe_report::{CaseInfo, Environment, ReportInput, WorkloadInfo};
use std::collections::BTreeMap;

/// Assembles the report's input once the runs are done.
pub fn build(
    plan: &Plan,
    records: &[RunRecord],
    notes: &[String],
    skipped_cases: &[(String, String)],
    nic_features: String,
    started_at: &str,
    finished_at: &str,
) -> ReportInput {
    let cases = plan
        .resolved_cases()
        .into_iter()
        .map(|c| CaseInfo {
            name: c.name,
            description: c.description,
            knobs_changed: c.changes.describe(),
            compare_to: c.compare_to,
            workloads: c.workloads,
            topology: c.topology.as_str().to_string(),
        })
        .collect();
    let workloads = plan
        .workloads
        .iter()
        .map(|w| WorkloadInfo {
            name: w.name.clone(),
            metric: w.metric,
            large_block: w.large_block(),
            description: describe_workload(plan, w),
        })
        .collect();
    let plan_text = if let Some(name) = plan.source.strip_prefix("embedded:") {
        Plan::embedded_text(name).unwrap_or_default().to_string()
    } else {
        std::fs::read_to_string(&plan.source).unwrap_or_default()
    };
    ReportInput {
        plan_name: plan.name.clone(),
        plan_description: plan.description.clone(),
        plan_source: plan.source.clone(),
        question: plan.question.clone(),
        seeds: plan.seeds.clone(),
        skipped_cases: skipped_cases.to_vec(),
        plan_text,
        rules: plan.rules,
        pin_cpus: plan.run.pin_cpus,
        topology: plan.topology.as_str().to_string(),
        baseline_knobs: plan.baseline.describe(),
        cases,
        workloads,
        environment: environment(nic_features, started_at, finished_at),
        records: records.to_vec(),
        notes: notes.to_vec(),
    }
}

/// A workload in one line: its profile, shape and depth, as the baseline
/// runs it on the plan's topology; with `in_flight`, the total and how it
/// is shared (on a test bed, over the paths its file names).
fn describe_workload(plan: &Plan, w: &crate::plan::WorkloadSpec) -> String {
    if let Some(stream) = &w.stream {
        return stream.describe();
    }
    let paths = plan.topology.paths();
    let s = w.shape(&plan.baseline, paths.unwrap_or(1));
    let depth = match (w.overrides.in_flight, paths) {
        (Some(total), Some(paths)) => format!(
            "{total} in flight: QD {} x {paths} path(s) x {} worker(s)",
            s.queue_depth, s.workers
        ),
        (Some(total), None) => format!(
            "{total} in flight over the test bed's paths and {} worker(s)",
            s.workers
        ),
        (None, _) => format!("QD {} x {} worker(s)", s.queue_depth, s.workers),
    };
    format!(
        "{} ({} B, {}% read, {}% random, {depth})",
        w.profile, s.block_size_bytes, s.read_pct, s.random_pct
    )
}

/// The machine: kernel, CPU, memory, versions.
fn environment(nic_features: String, started_at: &str, finished_at: &str) -> Environment {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split(':').nth(1))
        })
        .map(|m| m.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let memory = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .map(|l| l.trim_start_matches("MemTotal:").trim().to_string())
        .unwrap_or_default();
    let mut peer_versions = BTreeMap::new();
    if let Some(fio) = crate::peers::fio::find_fio() {
        if let Ok(out) = std::process::Command::new(&fio).arg("--version").output() {
            peer_versions.insert(
                "fio".into(),
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            );
        }
    }
    for tool in ["ethtool", "ip"] {
        if let Ok(out) = std::process::Command::new(tool).arg("-V").output() {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !text.is_empty() {
                peer_versions.insert(tool.into(), text);
            }
        }
    }
    let host = isoe_bench::Host::read();
    Environment {
        kernel: host.kernel_release,
        cpu_model,
        ncpus: host.ncpus,
        memory,
        isoe_version: env!("CARGO_PKG_VERSION").to_string(),
        peer_versions,
        nic_features,
        started_at: started_at.to_string(),
        finished_at: finished_at.to_string(),
        host: read("/proc/sys/kernel/hostname").trim().to_string(),
    }
}
