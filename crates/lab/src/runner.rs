//! The run loop: for each test case, a fresh topology with the case's link
//! knobs, an `isoe target` in the target namespace, and `isoe bench` in the
//! host namespace, run per workload until the statistics settle (seed 001
//! §3.3: at least `min_runs`, again while RSD > target, up to `max_runs`).
//!
//! Every run is appended to `results.jsonl` as soon as it ends, so an
//! interrupted plan resumes where it stopped; at the end (or on Ctrl-C)
//! the reports are written from what is there, with `report-input.json`
//! beside them (the rest of what they are drawn from), and the topology is
//! removed.

use crate::bed::{Bed, OnMachines};
pub use crate::error::LabError;
use crate::fill;
use crate::floor::FloorJob;
use crate::foreign::ForeignLoad;
use crate::knobs::{InitiatorImpl, KnobSet, TargetImpl};
use crate::peers::fio::{self, FioJob};
use crate::peers::tgt::TgtTarget;
use crate::plan::{Plan, ResolvedCase, WorkloadSpec};
use crate::record::{LunFill, RunResult};
use crate::rounds;
pub use crate::run::TARGET_IQN;
use crate::run::{isoe_target_config, measured_window, BenchFailure, Measured, Window};
use crate::sampled::Sample;
use crate::site::{CaseEnd, CaseRuns, CaseSetup, Site};
use crate::stream::{StreamJob, StreamWorkload};
use crate::testbed::Testbed;
use crate::topology::{self, Kind, Role, Topology};
use isoe_report::record::RunRecord;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a target may take to print its portal.
const TARGET_START: Duration = Duration::from_secs(20);
/// Slack beyond ramp + duration before a bench run is declared hung.
const BENCH_SLACK: Duration = Duration::from_secs(90);

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LabError + '_ {
    move |source| LabError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What `isoe lab` was asked to do.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The plan.
    pub plan: Plan,
    /// Where results.jsonl and the reports go.
    pub out_dir: PathBuf,
    /// The `isoe` binary to run as target and bench.
    pub isoe: PathBuf,
    /// Start over instead of resuming.
    pub fresh: bool,
    /// A progress line on stderr.
    pub progress: bool,
    /// Set on Ctrl-C.
    pub stop: Arc<AtomicBool>,
    /// Cases not to run, each with why (what [`crate::preflight`] found
    /// missing); they head the report as not measured.
    pub skip: Vec<(String, String)>,
    /// What the cases run without (link knobs on the host's own loopback),
    /// one line each, for the report's notes.
    pub lost: Vec<String>,
    /// How the plan was changed when it was invoked (`isoe lab
    /// --seed-durations`), one line each, for the report's notes.
    pub invoked: Vec<String>,
    /// The machines every case runs on, instead of namespaces
    /// (`isoe lab --testbed FILE`).
    pub testbed: Option<Testbed>,
}

/// What a finished (or interrupted) plan left.
#[derive(Debug, Clone)]
pub struct LabOutcome {
    /// results.jsonl.
    pub results: PathBuf,
    /// report.md.
    pub report_md: PathBuf,
    /// report.html.
    pub report_html: PathBuf,
    /// Runs in results.jsonl.
    pub runs: usize,
    /// Runs made by this invocation.
    pub new_runs: usize,
    /// Stopped by Ctrl-C before the end.
    pub interrupted: bool,
    /// Things the report says (skipped knobs, non-convergence, ...).
    pub notes: Vec<String>,
    /// Cases not measured, with why: those of [`LabOptions::skip`] and
    /// those a missing program stopped at their first run.
    pub skipped: Vec<(String, String)>,
}

/// Runs `options.plan` to the end (or to Ctrl-C) and writes the reports.
pub fn run_plan(options: LabOptions) -> Result<LabOutcome, LabError> {
    let plan = &options.plan;
    fs::create_dir_all(&options.out_dir).map_err(io_error(&options.out_dir))?;
    let results_path = options.out_dir.join("results.jsonl");
    let removed = topology::cleanup_stale();
    let mut notes: Vec<String> = removed
        .iter()
        .map(|ns| format!("removed stale namespace {ns} left by an earlier run"))
        .collect();
    let records = load_records(&results_path, &plan.name, options.fresh)?;
    let sink = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&results_path)
        .map_err(io_error(&results_path))?;
    let started_at = isoe_bench::timestamp::rfc3339_utc(std::time::SystemTime::now());
    let (mut cases, skipped) = runnable_cases(plan, &options.skip);
    notes.extend(options.lost.iter().cloned());
    notes.extend(options.invoked.iter().cloned());
    let site: Box<dyn Site> = match &options.testbed {
        Some(testbed) => {
            let sysctls =
                crate::hostknobs::sysctl_names(plan.resolved_cases().iter().map(|c| &c.knobs));
            let bed = Bed::connect(testbed.clone(), &options.isoe, &options.out_dir, &sysctls)
                .map_err(|e| LabError::TestBed(Box::new(e)))?;
            notes.extend(bed.notes());
            Box::new(OnMachines::new(bed, plan, &options.stop))
        }
        None => Box::new(Namespaces { options: &options }),
    };
    let mut lab = Lab {
        site: Some(site),
        options: &options,
        results_path: &results_path,
        sink,
        progress: Progress::new(options.progress, &records),
        records,
        new_runs: 0,
        environment_nics: String::new(),
        interrupted: false,
        skipped,
    };
    let ran = lab.run_rounds(&mut cases);
    if let Some(site) = lab.site.take() {
        notes.extend(site.close());
    }
    ran?;
    lab.progress.finish();
    notes.extend(convergence_notes(plan, &cases, &lab.records));
    notes.extend(fill::notes(&lab.records));
    if lab.interrupted {
        notes.push("interrupted by Ctrl-C: the report covers the runs made so far; run the same command again to resume".into());
    }
    let now = isoe_bench::timestamp::rfc3339_utc(std::time::SystemTime::now());
    let (started_at, finished_at) = report_dates(&lab.records, &started_at, now, lab.new_runs > 0);
    let input = crate::report_input::build(
        plan,
        &lab.records,
        &notes,
        &lab.skipped,
        std::mem::take(&mut lab.environment_nics),
        &started_at,
        &finished_at,
    );
    // What the report is drawn from besides the records is kept beside
    // them, so that `isoe lab --report` draws the same report again.
    let paths = isoe_report::stored::write(input, &options.out_dir)?;
    Ok(LabOutcome {
        results: results_path.clone(),
        report_md: paths.markdown,
        report_html: paths.html,
        runs: lab.records.len(),
        new_runs: lab.new_runs,
        interrupted: lab.interrupted,
        notes,
        skipped: lab.skipped,
    })
}

/// The plan's cases but those `skip` names, and `skip` as it applies to
/// this plan.
fn runnable_cases(
    plan: &Plan,
    skip: &[(String, String)],
) -> (Vec<ResolvedCase>, Vec<(String, String)>) {
    let cases: Vec<ResolvedCase> = plan.resolved_cases();
    let skipped: Vec<(String, String)> = skip
        .iter()
        .filter(|(name, _)| cases.iter().any(|c| c.name == *name))
        .cloned()
        .collect();
    let runnable = cases
        .into_iter()
        .filter(|c| !skipped.iter().any(|(name, _)| *name == c.name))
        .collect();
    (runnable, skipped)
}

/// A plan in progress: its records so far and where new ones go.
struct Lab<'a> {
    /// Where every case runs; out only while a case runs.
    site: Option<Box<dyn Site + 'a>>,
    options: &'a LabOptions,
    results_path: &'a Path,
    sink: File,
    records: Vec<RunRecord>,
    progress: Progress,
    new_runs: usize,
    environment_nics: String,
    interrupted: bool,
    /// Cases not measured, with why.
    skipped: Vec<(String, String)>,
}

/// Cases in network namespaces on this machine: a fresh topology per case
/// with its link knobs, a target in it, removed after the case's runs.
struct Namespaces<'a> {
    options: &'a LabOptions,
}

impl Site for Namespaces<'_> {
    fn run_case(
        &mut self,
        case: &ResolvedCase,
        workloads: &[String],
        runs: &mut CaseRuns<'_>,
    ) -> Result<CaseEnd, LabError> {
        let plan = &self.options.plan;
        let knobs = &case.knobs;
        if let Some(why) = knobs.needs_test_bed() {
            // Run in namespaces, isoe would stand in for what the case names.
            return Ok(CaseEnd::Skipped(why));
        }
        let kind: Kind =
            case.topology
                .as_str()
                .parse()
                .map_err(|source| LabError::UnknownTopology {
                    case: case.name.clone(),
                    source,
                })?;
        let mut topo = Topology::create(kind, Default::default()).map_err(|source| {
            LabError::CaseTopology {
                case: case.name.clone(),
                source,
            }
        })?;
        if plan.run.pin_cpus {
            topo.pin_roles();
        }
        let removed = |topo: Topology| {
            topo.destroy().map_err(|source| LabError::RemovingTopology {
                case: case.name.clone(),
                source,
            })
        };
        let applied = match topo.apply(&knobs.link) {
            Ok(applied) => applied,
            Err(missing) => {
                // Run without the knob, the case would measure noise as its effect.
                removed(topo)?;
                return Ok(CaseEnd::Skipped(missing.to_string()));
            }
        };
        let mut skipped: BTreeMap<String, String> = BTreeMap::new();
        for applied in applied.into_iter().chain(topo.apply_sysctls(&knobs.sysctl)) {
            if let Err(why) = applied.outcome {
                skipped.insert(applied.knob, why.to_string());
            }
        }
        for (knob, why) in knobs.unsupported_here() {
            skipped.insert(knob, why);
        }
        let paths = topo.portals().len() as u32;
        if let Some(why) = plan.uneven_depth(knobs, workloads, paths) {
            removed(topo)?;
            return Ok(CaseEnd::Skipped(why));
        }
        let target = start_target(self.options, &topo, knobs, case)?;
        let lun_fill = if fill::reads_blocks(plan, knobs, workloads) {
            match fill_lun(self.options, &topo, &target, knobs) {
                Ok(done) => Some(done),
                Err(why) => {
                    drop(target);
                    removed(topo)?;
                    if self.options.stop.load(Ordering::Relaxed) {
                        // Ctrl-C, not the case: it is due again on resuming.
                        return Ok(CaseEnd::Ran);
                    }
                    return Ok(CaseEnd::Skipped(format!(
                        "writing the LUN before its reads failed: {why}"
                    )));
                }
            }
        } else {
            None
        };
        let setup = CaseSetup {
            topology: topo.kind().as_str(),
            skipped: &skipped,
            nics: Some(topo.describe().to_string()),
        };
        runs(setup, &mut |workload| {
            let isoe = &self.options.isoe;
            let before = target.unwritten_read_bytes(isoe);
            let mut measured = run_bench(self.options, &topo, &target, knobs, workload)?;
            measured.result.lab.lun_fill = lun_fill;
            measured.result.lab.target_unwritten_read_bytes =
                fill::during(before, target.unwritten_read_bytes(isoe));
            Ok(measured)
        })?;
        drop(target);
        removed(topo)?;
        Ok(CaseEnd::Ran)
    }

    fn close(self: Box<Self>) -> Vec<String> {
        Vec::new()
    }
}

/// Rounds a plan may take at most, whatever its cells say: every cell
/// is capped at `max_runs + ATTEMPTS_OVER_CAP` attempts, so this only
/// guards against a schedule that never empties.
fn round_limit(plan: &Plan) -> u32 {
    2 * (plan.rules.max_runs + rounds::ATTEMPTS_OVER_CAP)
}

impl Lab<'_> {
    /// Round after round, each due case once in a shuffled order, until no
    /// cell is due or Ctrl-C. A case a missing program stops is dropped
    /// from `cases` (and listed as skipped) before the next round.
    fn run_rounds(&mut self, cases: &mut Vec<ResolvedCase>) -> Result<(), LabError> {
        let plan = &self.options.plan;
        let first = rounds::next_round(&self.records);
        for round in first..first + round_limit(plan) {
            let due = rounds::due(plan, cases, &self.records);
            if due.is_empty() {
                break;
            }
            for i in rounds::order(due.len(), &plan.name, round) {
                let (ci, workloads) = &due[i];
                if self.options.stop.load(Ordering::Relaxed) {
                    self.interrupted = true;
                    return Ok(());
                }
                if self.is_skipped(&cases[*ci].name) {
                    continue;
                }
                self.run_case(cases, &cases[*ci], workloads, round)?;
                if self.interrupted {
                    return Ok(());
                }
            }
            cases.retain(|c| !self.is_skipped(&c.name));
        }
        Ok(())
    }

    fn is_skipped(&self, case: &str) -> bool {
        self.skipped.iter().any(|(name, _)| name == case)
    }

    /// One case's runs in one round where the plan runs (its [`Site`]):
    /// one run per due workload, or the case skipped with why.
    fn run_case(
        &mut self,
        cases: &[ResolvedCase],
        case: &ResolvedCase,
        workloads: &[String],
        round: u32,
    ) -> Result<(), LabError> {
        let mut site = self.site.take().expect("the site is back between cases");
        let end = site.run_case(case, workloads, &mut |setup, measure| {
            if self.environment_nics.is_empty() {
                if let Some(nics) = setup.nics {
                    self.environment_nics = nics;
                }
            }
            let cell = Cell {
                cases,
                case,
                round,
                topology: setup.topology,
                skipped: setup.skipped,
            };
            self.run_workloads(&cell, workloads, measure)
        });
        self.site = Some(site);
        if let CaseEnd::Skipped(why) = end? {
            self.skip_case(case, why);
        }
        Ok(())
    }

    /// One run of each of `workloads` in `cell`'s case, measured by
    /// `measure`; stops at Ctrl-C.
    fn run_workloads(
        &mut self,
        cell: &Cell,
        workloads: &[String],
        measure: &mut dyn FnMut(&WorkloadSpec) -> Result<Measured, BenchFailure>,
    ) -> Result<(), LabError> {
        let plan = &self.options.plan;
        for name in workloads {
            let Some(workload) = plan.workload(name) else {
                continue;
            };
            let this = ThisRun {
                plan,
                case: cell.case,
                workload,
                round: cell.round,
                topology: cell.topology,
                knobs: &cell.case.knobs,
                skipped: cell.skipped,
            };
            if !self.run_cell_once(cell.cases, &this, &mut || measure(workload))? {
                self.interrupted = true;
                break;
            }
        }
        Ok(())
    }

    /// Lists `case` as not measured, with why, and says so.
    fn skip_case(&mut self, case: &ResolvedCase, why: String) {
        self.progress.finish();
        eprintln!("isoe lab: case {}: skipped, not measured: {why}", case.name);
        self.skipped.push((case.name.clone(), why));
    }

    /// One valid run of a cell in this round, repeating a run spoiled by
    /// steal or foreign load up to [`REPEATS_IN_ROUND`] times; false on Ctrl-C.
    pub(crate) fn run_cell_once(
        &mut self,
        cases: &[ResolvedCase],
        this: &ThisRun,
        measure: &mut dyn FnMut() -> Result<Measured, BenchFailure>,
    ) -> Result<bool, LabError> {
        let (case, workload) = (&this.case.name, &this.workload.name);
        for _ in 0..=REPEATS_IN_ROUND {
            if self.options.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let attempt = rounds::attempts(&self.records, case, workload) + 1;
            let left = rounds::runs_left(&self.options.plan, cases, &self.records);
            self.progress.show(this, attempt, left);
            let record = match measure() {
                Ok(measured) => this.record(attempt, measured),
                Err(BenchFailure::Stopped) => return Ok(false),
                Err(BenchFailure::Failed(why)) => this.failed(attempt, why),
            };
            let spoiled = !record.valid && !record.bench.is_null();
            self.append(record)?;
            let capped = rounds::attempts(&self.records, case, workload)
                >= self.options.plan.rules.max_runs + rounds::ATTEMPTS_OVER_CAP;
            if !spoiled || capped {
                break;
            }
        }
        Ok(true)
    }

    fn append(&mut self, record: RunRecord) -> Result<(), LabError> {
        let line = serde_json::to_string(&record).unwrap_or_default();
        writeln!(self.sink, "{line}").map_err(io_error(self.results_path))?;
        self.sink.flush().map_err(io_error(self.results_path))?;
        // Kept as results.jsonl gives it back: serde_json reads a float
        // back a unit in the last place off now and then, and the report,
        // drawn at the end and again by `isoe lab --report`, must rest on
        // the same values.
        let record = serde_json::from_str(&line).unwrap_or(record);
        self.records.push(record);
        self.new_runs += 1;
        self.progress.done_one();
        Ok(())
    }
}

/// Times a run spoiled by steal or foreign load is repeated at once, in
/// its round, before the round moves on.
const REPEATS_IN_ROUND: u32 = 2;

/// When the report's runs were made: from the first run (a resumed plan
/// began before this invocation) to now, or, when this invocation ran
/// nothing and only rewrote the report, to the start of the last run.
/// RFC 3339 UTC strings of one format order as their times do.
fn report_dates(records: &[RunRecord], began: &str, now: String, ran: bool) -> (String, String) {
    let first = records
        .iter()
        .map(|r| r.started_at.as_str())
        .filter(|t| !t.is_empty())
        .chain([began])
        .min()
        .unwrap_or(began)
        .to_string();
    let last = records.iter().map(|r| r.started_at.as_str()).max();
    match last {
        Some(last) if !ran && !last.is_empty() => (first, last.to_string()),
        _ => (first, now),
    }
}

/// Records of `plan` already in `path` (resume), or none with `fresh`.
fn load_records(path: &Path, plan: &str, fresh: bool) -> Result<Vec<RunRecord>, LabError> {
    if fresh && path.exists() {
        fs::remove_file(path).map_err(io_error(path))?;
    }
    let Ok(file) = File::open(path) else {
        return Ok(Vec::new());
    };
    let mut records = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_error(path))?;
        if line.trim().is_empty() {
            continue;
        }
        // A line cut short by a crash is dropped; the run is simply made again.
        let Ok(record) = serde_json::from_str::<RunRecord>(&line) else {
            continue;
        };
        if record.plan != plan {
            return Err(LabError::Resume(format!(
                "{}:{}: results of plan {:?}, not {plan:?}; choose another --out or add --fresh",
                path.display(),
                i + 1,
                record.plan
            )));
        }
        records.push(record);
    }
    Ok(records)
}

/// What the console and the report say of cells that gave up or lost runs.
fn convergence_notes(plan: &Plan, cases: &[ResolvedCase], records: &[RunRecord]) -> Vec<String> {
    let mut notes = Vec::new();
    for case in cases {
        for w in case.workloads.iter().filter_map(|n| plan.workload(n)) {
            let name = &case.name;
            if let Some(why) = rounds::given_up(records, name, &w.name) {
                notes.push(format!(
                    "{name} / {}: given up after {} runs in a row failed: {why}",
                    w.name,
                    rounds::FAILURES_IN_A_ROW
                ));
            }
            let spoiled: Vec<&RunRecord> = rounds::cell(records, name, &w.name)
                .filter(|r| !r.valid)
                .collect();
            if !spoiled.is_empty() {
                let why = spoiled
                    .last()
                    .and_then(|r| r.invalid_reason.clone())
                    .unwrap_or_default();
                notes.push(format!(
                    "{name} / {}: {} run(s) left out of the statistics (the last: {why})",
                    w.name,
                    spoiled.len()
                ));
            }
        }
    }
    notes
}

/// `isoe target` (or tgt) in the target namespace, stopped on Drop.
struct TargetProcess {
    /// `isoe target`; None for tgt, which `_tgt` stops.
    child: Option<Child>,
    pid: u32,
    portals: Vec<String>,
    /// The LUN the URLs name: 0 on isoe, 1 on tgt (its LUN 0 is the controller).
    lun: u16,
    /// isoe's control socket, which `isoe admin stats` reads, in a
    /// directory of its own (removed after the target stops).
    control: Option<(PathBuf, tempfile::TempDir)>,
    _config: Option<tempfile_path::TempPath>,
    /// isoe's target's or the floor server's log, removed with it.
    _log: Option<tempfile::NamedTempFile>,
    _tgt: Option<TgtTarget>,
}

impl TargetProcess {
    /// What the target says it served from never-written blocks of its
    /// LUN so far (isoe's target; None for others, or when it cannot say).
    fn unwritten_read_bytes(&self, isoe: &Path) -> Option<u64> {
        let (socket, _) = self.control.as_ref()?;
        let argv = fill::stats_argv(&isoe.display().to_string(), &socket.display().to_string());
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        fill::unwritten_read_bytes(&String::from_utf8_lossy(&out.stdout), TARGET_IQN, self.lun)
    }
}

impl Drop for TargetProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            stop_child(child, Duration::from_secs(20));
        }
    }
}

/// SIGTERM, a grace period, then SIGKILL: only to a child we started, by its PID.
fn stop_child(child: &mut Child, grace: Duration) {
    crate::host::stop_local(child, grace);
}

fn start_target(
    options: &LabOptions,
    topo: &Topology,
    knobs: &KnobSet,
    case: &ResolvedCase,
) -> Result<TargetProcess, LabError> {
    if knobs.is_floor() {
        return start_floor_server(options, topo, case);
    }
    if knobs.target_impl() == TargetImpl::Tgt {
        let tgt = TgtTarget::start(topo, knobs, options.plan.run.span_bytes).map_err(|source| {
            LabError::Tgt {
                case: case.name.clone(),
                source: Box::new(source),
            }
        })?;
        return Ok(TargetProcess {
            child: None,
            pid: tgt.pid(),
            portals: tgt.portals().to_vec(),
            lun: tgt.lun(),
            control: None,
            _config: None,
            _log: None,
            _tgt: Some(tgt),
        });
    }
    let portals: Vec<String> = topo.portals().iter().map(ToString::to_string).collect();
    // Short (a socket's path has at most 107 bytes) and in a directory
    // only this user can write, as the target requires of its socket's.
    let control_dir = tempfile::Builder::new()
        .prefix("isoe-lab-")
        .tempdir()
        .map_err(io_error(&std::env::temp_dir()))?;
    let control = control_dir.path().join("control.sock");
    let config = isoe_target_config(
        &case.name,
        &portals,
        knobs,
        &control.display().to_string(),
        options.plan.run.span_bytes,
    );
    let path = tempfile_path::TempPath::write(
        &options.out_dir,
        &format!(".target-{}.toml", std::process::id()),
        &config,
    )
    .map_err(io_error(&options.out_dir))?;
    // Its log (a few lines per session) goes to a file: a pipe nobody
    // reads would fill after a hundred or so logins and stop the target.
    let (log, log_file) =
        stderr_log(&options.out_dir, ".target-").map_err(io_error(&options.out_dir))?;
    let mut cmd = topo.command(Role::Target, &options.isoe);
    cmd.arg("target").arg("--config").arg(path.path());
    cmd.stdout(Stdio::piped())
        .stderr(log_file)
        .stdin(Stdio::null());
    let mut child = cmd.spawn().map_err(|source| LabError::TargetSpawn {
        isoe: options.isoe.clone(),
        source,
    })?;
    let pid = child.id();
    let rx = lines_of(child.stdout.take().expect("stdout was piped"));
    let deadline = Instant::now() + TARGET_START;
    let mut listening = 0;
    while listening < portals.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("listening on") => listening += 1,
            Ok(_) => {}
            Err(_) => {
                stop_child(&mut child, Duration::from_secs(2));
                let err = fs::read_to_string(log.path()).unwrap_or_default();
                return Err(LabError::Target(format!(
                    "case {}: the target did not start listening within {} s: {}",
                    case.name,
                    TARGET_START.as_secs(),
                    err.trim()
                )));
            }
        }
    }
    Ok(TargetProcess {
        child: Some(child),
        pid,
        portals,
        lun: 0,
        control: Some((control, control_dir)),
        _config: Some(path),
        _log: Some(log),
        _tgt: None,
    })
}

/// A file in `dir` for a server's stderr, named `PREFIX...-stderr.log`
/// with a name of its own (a stream's server may run beside the floor's):
/// the handle that removes it when dropped, and the file the child writes.
fn stderr_log(dir: &Path, prefix: &str) -> std::io::Result<(tempfile::NamedTempFile, File)> {
    let log = tempfile::Builder::new()
        .prefix(prefix)
        .suffix("-stderr.log")
        .tempfile_in(dir)?;
    let file = log.reopen()?;
    Ok((log, file))
}

/// A thread that reads `from` line by line to its end (so that the child
/// writing it never blocks) and hands each line to the receiver while
/// there is one.
fn lines_of(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The floor's server, `isoe netprobe --serve --span`, on the target's
/// side at the first portal, in place of a target.
fn start_floor_server(
    options: &LabOptions,
    topo: &Topology,
    case: &ResolvedCase,
) -> Result<TargetProcess, LabError> {
    let portal = topo
        .portals()
        .first()
        .map(ToString::to_string)
        .ok_or_else(|| {
            LabError::Target(format!("case {}: the topology has no portal", case.name))
        })?;
    // Answers from written memory the size of the region the cases read
    // (which the lab writes before their reads): the floor of the same
    // random read.
    let span = options.plan.run.span_bytes.to_string();
    let started = start_netprobe_server(options, topo, &["--serve", &portal, "--span", &span])
        .map_err(|e| match e {
            ServerFailure::Spawn(source) => LabError::FloorSpawn {
                case: case.name.clone(),
                isoe: options.isoe.clone(),
                source,
            },
            ServerFailure::NotServing(why) => {
                LabError::Target(format!("case {}: {why}", case.name))
            }
        })?;
    let (child, _, log) = started;
    Ok(TargetProcess {
        pid: child.id(),
        child: Some(child),
        portals: vec![portal],
        lun: 0,
        control: None,
        _config: None,
        _log: Some(log),
        _tgt: None,
    })
}

/// Why `isoe netprobe --serve` did not start.
enum ServerFailure {
    /// The program did not start.
    Spawn(std::io::Error),
    /// It did not say it serves, and what it said.
    NotServing(String),
}

/// `isoe netprobe ARGS` (`--serve ...`) in the target namespace, once it
/// says where it serves: the child, that address and its log (stderr, in
/// a file removed on drop).
fn start_netprobe_server(
    options: &LabOptions,
    topo: &Topology,
    args: &[&str],
) -> Result<(Child, String, tempfile::NamedTempFile), ServerFailure> {
    let (log, log_file) =
        stderr_log(&options.out_dir, ".netprobe-").map_err(ServerFailure::Spawn)?;
    let mut cmd = topo.command(Role::Target, &options.isoe);
    cmd.arg("netprobe").args(args);
    cmd.stdout(Stdio::piped())
        .stderr(log_file)
        .stdin(Stdio::null());
    let mut child = cmd.spawn().map_err(ServerFailure::Spawn)?;
    let rx = lines_of(child.stdout.take().expect("stdout was piped"));
    let serving = rx.recv_timeout(TARGET_START).ok().and_then(|line| {
        line.trim()
            .strip_prefix("isoe netprobe: serving on ")
            .map(str::to_owned)
    });
    if let Some(addr) = serving {
        return Ok((child, addr, log));
    }
    stop_child(&mut child, Duration::from_secs(2));
    let err = fs::read_to_string(log.path()).unwrap_or_default();
    Err(ServerFailure::NotServing(format!(
        "isoe netprobe {} did not start within {} s: {}",
        args.join(" "),
        TARGET_START.as_secs(),
        err.trim()
    )))
}

/// Writes the target's LUN once from the host namespace (`isoe bench
/// --fill`) before the case's reads; what it took.
fn fill_lun(
    options: &LabOptions,
    topo: &Topology,
    target: &TargetProcess,
    knobs: &KnobSet,
) -> Result<LunFill, String> {
    let portal = target.portals.first().ok_or("the target has no portal")?;
    let url = format!("iscsi://{portal}/{TARGET_IQN}/{}", target.lun);
    let argv = fill::fill_argv("isoe", &url, &options.plan, knobs);
    let mut cmd = topo.command(Role::Host, &options.isoe);
    cmd.args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", options.isoe.display()))?;
    let drained = Drained::start(&mut child);
    match wait_for_child(
        &mut child,
        "isoe bench --fill",
        fill::FILL_LIMIT,
        &options.stop,
        |_| {},
    ) {
        Ok(()) => {}
        Err(BenchFailure::Stopped) => return Err("interrupted".into()),
        Err(BenchFailure::Failed(why)) => return Err(why),
    }
    let out = drained
        .output(&mut child)
        .map_err(|e| format!("reading isoe bench --fill's output: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "isoe bench --fill exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    fill::parse_fill(&String::from_utf8_lossy(&out.stdout))
}

/// One `isoe bench` run in the host namespace; its JSON result.
fn run_bench(
    options: &LabOptions,
    topo: &Topology,
    target: &TargetProcess,
    knobs: &KnobSet,
    workload: &WorkloadSpec,
) -> Result<Measured, BenchFailure> {
    if let Some(stream) = workload.stream {
        return run_stream(options, topo, stream);
    }
    if knobs.is_floor() {
        return run_floor(options, topo, target, knobs, workload);
    }
    if knobs.initiator_impl() == InitiatorImpl::Libiscsi {
        return run_fio(options, topo, target, knobs, workload);
    }
    let plan = &options.plan;
    let mut cmd = topo.command(Role::Host, &options.isoe);
    cmd.arg("bench");
    // One URL per portal: the seeds' volumes, one per path.
    for portal in &target.portals {
        cmd.arg(format!("iscsi://{portal}/{TARGET_IQN}/{}", target.lun));
    }
    let shape = workload.shape(knobs, target.portals.len() as u32);
    cmd.args(workload.bench_args(knobs, &shape));
    cmd.args(knobs.bench_args());
    cmd.args(fill::span_args(plan));
    cmd.args([
        "--duration",
        &plan.run.duration_s.to_string(),
        "--ramp",
        &plan.run.ramp_s.to_string(),
    ]);
    cmd.args([
        "--json",
        "-",
        "--no-progress",
        "--target-pid",
        &target.pid.to_string(),
    ]);
    let (mut child, drained, started_at) = spawn_load(&mut cmd, "isoe bench")?;
    let limit = Duration::from_secs_f64(plan.run.duration_s + plan.run.ramp_s) + BENCH_SLACK;
    let mut window = measured_window(plan.run.ramp_s, plan.run.duration_s);
    // The target side's TCP counters at the window's ends (bench reads
    // only its own namespace's).
    let (load_pid, mut target_tcp) = (child.id(), [None, None]);
    wait_for_child(&mut child, "isoe bench", limit, &options.stop, |t| {
        let at = [window.start, window.end];
        for (slot, at) in target_tcp.iter_mut().zip(at) {
            if slot.is_none() && t >= at {
                *slot = Some(crate::sampled::target_tcp(target.pid, load_pid));
                break;
            }
        }
        window.tick(t)
    })?;
    let out = drained
        .output(&mut child)
        .map_err(|e| BenchFailure::Failed(format!("reading isoe bench's output: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
    else {
        return Err(BenchFailure::Failed(format!(
            "isoe bench exited with {:?} and no result: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    };
    let output = serde_json::from_str(line)
        .map_err(|e| BenchFailure::Failed(format!("isoe bench printed bad JSON: {e}")))?;
    let mut result = RunResult::of_bench(output);
    let [first, last] = target_tcp.map(Option::flatten);
    result.add_target_tcp(first.as_ref(), last.as_ref());
    Ok(Measured {
        result,
        started_at,
        foreign: window.load(),
    })
}

/// One fio run (libiscsi) in the host namespace, its CPU and TCP counters
/// sampled over the steady window; the result in `isoe bench`'s fields.
fn run_fio(
    options: &LabOptions,
    topo: &Topology,
    target: &TargetProcess,
    knobs: &KnobSet,
    workload: &WorkloadSpec,
) -> Result<Measured, BenchFailure> {
    let plan = &options.plan;
    let fio = fio::find_fio().ok_or_else(|| {
        BenchFailure::Failed(
            "fio with libiscsi not found: build it with crates/lab/fio-libiscsi (isoe lab does, \
             as root), or set ISOE_FIO"
                .into(),
        )
    })?;
    let shape = workload.shape(knobs, target.portals.len() as u32);
    let (workers, queue_depth) = fio::libiscsi_jobs(
        shape.workers,
        shape.queue_depth,
        knobs.sessions.unwrap_or(1),
    );
    let job = FioJob {
        engine: fio::FioEngine::Libiscsi,
        urls: target
            .portals
            .iter()
            .map(|p| format!("iscsi://{p}/{TARGET_IQN}/{}", target.lun))
            .collect(),
        block_size_bytes: shape.block_size_bytes,
        read_pct: shape.read_pct,
        random_pct: shape.random_pct,
        queue_depth,
        workers,
        duration_s: plan.run.duration_s.ceil().max(2.0),
        ramp_s: plan.run.ramp_s.ceil(),
        size_bytes: plan.run.span_bytes,
    };
    let mut cmd = topo.command(Role::Host, &fio);
    cmd.args(job.args());
    // The steady window: after the ramp (and login), until just before the end.
    let window_start = Duration::from_secs_f64(job.ramp_s + 0.5);
    let window_len = Duration::from_secs_f64((job.duration_s - 1.0).max(0.5));
    let window = Window::new(window_start, window_start + window_len);
    let limit = window_start + window_len + BENCH_SLACK;
    let run = run_sampled(&mut cmd, "fio", window, limit, target.pid, &options.stop)?;
    Ok(Measured {
        result: fio::result(&run.json, &job, &run.first, &run.last, Some(target.pid)),
        started_at: run.started_at,
        foreign: run.foreign,
    })
}

/// What a load generator gave whose CPU and TCP counters the lab sampled
/// itself ([`run_sampled`]).
struct Sampled<T> {
    /// Its JSON result (stdout from the first `{`).
    json: T,
    first: Sample,
    last: Sample,
    started_at: String,
    foreign: Option<ForeignLoad>,
}

/// Runs `cmd` (fio, `isoe netprobe`), sampling its and the target's
/// counters at `window`'s ends, and reads its JSON as a `T`.
fn run_sampled<T: serde::de::DeserializeOwned>(
    cmd: &mut Command,
    what: &str,
    mut window: Window,
    limit: Duration,
    target_pid: u32,
    stop: &AtomicBool,
) -> Result<Sampled<T>, BenchFailure> {
    let (mut child, drained, started_at) = spawn_load(cmd, what)?;
    let pid = child.id();
    let mut first = None;
    let mut last = None;
    wait_for_child(&mut child, what, limit, stop, |t| {
        if first.is_none() && t >= window.start {
            first = Sample::take(pid, Some(target_pid));
        } else if first.is_some() && last.is_none() && t >= window.end {
            last = Sample::take(pid, Some(target_pid));
        }
        window.tick(t);
    })?;
    let out = drained
        .output(&mut child)
        .map_err(|e| BenchFailure::Failed(format!("reading {what}'s output: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_start = stdout.find('{').ok_or_else(|| {
        BenchFailure::Failed(format!(
            "{what} exited with {:?} and no JSON: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })?;
    let json = serde_json::from_str(&stdout[json_start..])
        .map_err(|e| BenchFailure::Failed(format!("{what} printed bad JSON: {e}")))?;
    let (Some(first), Some(last)) = (first, last) else {
        return Err(BenchFailure::Failed(format!(
            "{what} ended before its CPU could be sampled"
        )));
    };
    debug_assert!(window.complete());
    Ok(Sampled {
        json,
        first,
        last,
        started_at,
        foreign: window.load(),
    })
}

/// One floor run (`isoe netprobe` loading the server the case started),
/// its CPU and TCP counters sampled over the steady window as fio's are;
/// the result in `isoe bench`'s fields.
fn run_floor(
    options: &LabOptions,
    topo: &Topology,
    server: &TargetProcess,
    knobs: &KnobSet,
    workload: &WorkloadSpec,
) -> Result<Measured, BenchFailure> {
    let plan = &options.plan;
    let portals = topo.portals().len() as u32;
    let job = FloorJob::new(
        &workload.shape(knobs, portals),
        knobs,
        portals,
        plan.run.duration_s,
        plan.run.ramp_s,
    )
    .map_err(|e| BenchFailure::Failed(e.to_string()))?;
    let mut cmd = topo.command(Role::Host, &options.isoe);
    cmd.args(job.args(&server.portals[0]));
    let window = measured_window(plan.run.ramp_s, plan.run.duration_s);
    let limit = Duration::from_secs_f64(plan.run.duration_s + plan.run.ramp_s) + BENCH_SLACK;
    let run = run_sampled(
        &mut cmd,
        "isoe netprobe",
        window,
        limit,
        server.pid,
        &options.stop,
    )?;
    Ok(Measured {
        result: job.result(&run.json, &run.first, &run.last, Some(server.pid)),
        started_at: run.started_at,
        foreign: run.foreign,
    })
}

/// One stream run: an `isoe netprobe --serve` of its own on the target's
/// side at the first portal's address (any port), and `isoe netprobe
/// --stream` from the initiator's, their CPU and TCP counters sampled over
/// the steady window as the floor's are; the result in `isoe bench`'s
/// fields.
fn run_stream(
    options: &LabOptions,
    topo: &Topology,
    stream: StreamWorkload,
) -> Result<Measured, BenchFailure> {
    let plan = &options.plan;
    let portal = topo
        .portals()
        .first()
        .copied()
        .ok_or_else(|| BenchFailure::Failed("the topology has no portal".into()))?;
    let listen = std::net::SocketAddr::new(portal.ip(), 0).to_string();
    let (mut server, addr, _log) = start_netprobe_server(options, topo, &["--serve", &listen])
        .map_err(|e| {
            BenchFailure::Failed(match e {
                ServerFailure::Spawn(e) => {
                    format!("starting {} netprobe --serve: {e}", options.isoe.display())
                }
                ServerFailure::NotServing(why) => why,
            })
        })?;
    let job = StreamJob {
        workload: stream,
        duration_s: plan.run.duration_s,
        ramp_s: plan.run.ramp_s,
    };
    let mut cmd = topo.command(Role::Host, &options.isoe);
    cmd.args(job.args(&addr));
    let window = measured_window(plan.run.ramp_s, plan.run.duration_s);
    let limit = Duration::from_secs_f64(plan.run.duration_s + plan.run.ramp_s) + BENCH_SLACK;
    let pid = server.id();
    let run = run_sampled(&mut cmd, "isoe netprobe", window, limit, pid, &options.stop);
    stop_child(&mut server, Duration::from_secs(5));
    let run = run?;
    Ok(Measured {
        result: job.result(&run.json, &run.first, &run.last, Some(pid)),
        started_at: run.started_at,
        foreign: run.foreign,
    })
}

/// Waits for `child` to exit, calling `each` with the time since the start
/// every 20 ms; stops it on Ctrl-C or after `limit`.
fn wait_for_child(
    child: &mut Child,
    what: &str,
    limit: Duration,
    stop: &AtomicBool,
    mut each: impl FnMut(Duration),
) -> Result<(), BenchFailure> {
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(e) => return Err(BenchFailure::Failed(format!("waiting for {what}: {e}"))),
        }
        if stop.load(Ordering::Relaxed) {
            stop_child(child, Duration::from_secs(5));
            return Err(BenchFailure::Stopped);
        }
        let t = t0.elapsed();
        if t > limit {
            stop_child(child, Duration::from_secs(5));
            return Err(BenchFailure::Failed(format!(
                "{what} did not finish within {} s",
                limit.as_secs()
            )));
        }
        each(t);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A case in a round, where it runs, and the knobs it runs without.
struct Cell<'a> {
    cases: &'a [ResolvedCase],
    case: &'a ResolvedCase,
    round: u32,
    topology: &'a str,
    skipped: &'a BTreeMap<String, String>,
}

/// One run of a case × workload: what its record says besides the result.
pub(crate) struct ThisRun<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) case: &'a ResolvedCase,
    pub(crate) workload: &'a WorkloadSpec,
    pub(crate) round: u32,
    pub(crate) topology: &'a str,
    pub(crate) knobs: &'a KnobSet,
    pub(crate) skipped: &'a BTreeMap<String, String>,
}

impl ThisRun<'_> {
    /// The record of a run that gave a result; invalid with CPU steal or
    /// foreign load over the limit, failed commands, or no I/O.
    fn record(&self, run: u32, measured: Measured) -> RunRecord {
        let Measured {
            mut result,
            started_at,
            foreign,
        } = measured;
        // The record keeps the series apart, once; fio's runs have none.
        let series = result.bench.series.take().unwrap_or_default();
        result.lab.in_flight = result.in_flight_commands();
        let Verdict {
            value,
            steal_pct,
            invalid_reason,
        } = judge(
            &self.plan.rules,
            self.workload.metric,
            &result,
            foreign.as_ref(),
        );
        RunRecord {
            bench: result.to_json(),
            series,
            ..self.record_of(run, value, steal_pct, invalid_reason, foreign, started_at)
        }
    }

    /// The record of a run that gave no result, and why: no figures
    /// (`bench` is null), invalid.
    fn failed(&self, run: u32, why: String) -> RunRecord {
        let now = isoe_bench::timestamp::rfc3339_utc(std::time::SystemTime::now());
        self.record_of(run, 0.0, 0.0, Some(why), None, now)
    }

    /// A record of this run with no result in it (`bench` null, no series).
    fn record_of(
        &self,
        run: u32,
        value: f64,
        steal_pct: f64,
        invalid_reason: Option<String>,
        foreign: Option<ForeignLoad>,
        started_at: String,
    ) -> RunRecord {
        RunRecord {
            plan: self.plan.name.clone(),
            case: self.case.name.clone(),
            workload: self.workload.name.clone(),
            run,
            topology: self.topology.to_string(),
            knobs: self.knobs.describe(),
            skipped_knobs: self.skipped.clone(),
            metric: self.workload.metric,
            value,
            steal_pct,
            valid: invalid_reason.is_none(),
            invalid_reason,
            round: self.round,
            foreign,
            bench: serde_json::Value::Null,
            series: Vec::new(),
            started_at,
        }
    }
}

/// What a run's result says of it: its metric, the steal, and why it is
/// left out of the statistics, if it is.
struct Verdict {
    value: f64,
    steal_pct: f64,
    invalid_reason: Option<String>,
}

/// Invalid with CPU steal or foreign load over the limit, a run that
/// stopped itself (its LUN gone, failures past the bound), a window cut
/// short by a signal, failed commands, or no I/O. A metric the result
/// lacks, or that is not a number, counts as no I/O (0).
fn judge(
    rules: &isoe_report::stats::Rules,
    metric: isoe_report::record::Metric,
    result: &RunResult,
    foreign: Option<&ForeignLoad>,
) -> Verdict {
    let bench = &result.bench;
    let finite = |x: f64| Some(x).filter(|x| x.is_finite()).unwrap_or(0.0);
    let value = finite(result.metric(metric).unwrap_or(0.0));
    let steal_pct = finite(bench.steal_pct);
    // Reads that were not verified had no mismatch found.
    let errors = bench
        .errors
        .saturating_add(bench.verify_errors.unwrap_or(0));
    let invalid_reason = if steal_pct > rules.steal_max_pct {
        Some(format!(
            "host CPU steal {steal_pct:.1}% above {}%",
            rules.steal_max_pct
        ))
    } else if let Some(f) = foreign.filter(|f| f.cpu_pct > rules.foreign_max_pct) {
        Some(format!(
            "foreign load {} above {}% of a CPU",
            f.describe(),
            rules.foreign_max_pct
        ))
    } else if let Some(why) = &bench.stopped {
        Some(format!("stopped before its window ended: {why}"))
    } else if bench.interrupted == Some(true) {
        Some(format!(
            "interrupted by a signal after {:.1} s of its window",
            finite(bench.elapsed_s)
        ))
    } else if errors > 0 {
        Some(format!("{errors} failed commands"))
    } else if value <= 0.0 {
        Some("no I/O completed".to_string())
    } else {
        None
    };
    Verdict {
        value,
        steal_pct,
        invalid_reason,
    }
}

/// Starts the load generator with its output captured; with when it began.
fn spawn_load(cmd: &mut Command, what: &str) -> Result<(Child, Drained, String), BenchFailure> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let started = isoe_bench::timestamp::rfc3339_utc(std::time::SystemTime::now());
    let mut child = cmd
        .spawn()
        .map_err(|e| BenchFailure::Failed(format!("cannot start {what}: {e}")))?;
    let drained = Drained::start(&mut child);
    Ok((child, drained, started))
}

/// A child's piped stdout and stderr, each read to its end by a thread of
/// its own while the child runs: a child that prints more than a pipe
/// holds (64 KiB: a long JSON result, a chatty log) is never left blocked
/// on a write that nobody reads.
struct Drained {
    stdout: Option<std::thread::JoinHandle<Vec<u8>>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Drained {
    /// Starts reading whichever of `child`'s stdout and stderr are piped.
    fn start(child: &mut Child) -> Drained {
        fn reader(
            mut from: impl std::io::Read + Send + 'static,
        ) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = from.read_to_end(&mut all);
                all
            })
        }
        Drained {
            stdout: child.stdout.take().map(reader),
            stderr: child.stderr.take().map(reader),
        }
    }

    /// Waits for `child` to end; its status and all it printed.
    fn output(self, child: &mut Child) -> std::io::Result<std::process::Output> {
        let status = child.wait()?;
        let all = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        Ok(std::process::Output {
            status,
            stdout: all(self.stdout),
            stderr: all(self.stderr),
        })
    }
}

/// The live line: round, case, workload, attempt, and an estimate of the
/// time left that counts the repeats it expects.
struct Progress {
    enabled: bool,
    start: Instant,
    done: usize,
}

impl Progress {
    fn new(enabled: bool, _records: &[RunRecord]) -> Progress {
        Progress {
            enabled,
            start: Instant::now(),
            done: 0,
        }
    }

    /// Before a run; `left` runs are expected after this one's start,
    /// this one included.
    fn show(&self, this: &ThisRun, attempt: u32, left: usize) {
        if !self.enabled {
            return;
        }
        let elapsed = self.start.elapsed().as_secs();
        let eta = if self.done > 0 {
            let per = self.start.elapsed().as_secs_f64() / self.done as f64;
            format!("~{}s left", (per * left.max(1) as f64) as u64)
        } else {
            "estimating".to_string()
        };
        let width = 20;
        let total = self.done + left.max(1);
        let filled = (width * self.done / total).min(width - 1);
        eprint!(
            "\r[{}{}] round {} | {} | {} | run {} | {}s elapsed, {}   ",
            "#".repeat(filled),
            ".".repeat(width - filled),
            this.round,
            this.case.name,
            this.workload.name,
            attempt,
            elapsed,
            eta
        );
    }

    fn done_one(&mut self) {
        self.done += 1;
    }

    fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }
}

/// A file removed on Drop (the target's generated configuration).
mod tempfile_path {
    use std::path::{Path, PathBuf};

    /// The path of a file this run wrote.
    #[derive(Debug)]
    pub struct TempPath(PathBuf);

    impl TempPath {
        /// Writes `text` to `dir/name`.
        pub fn write(dir: &Path, name: &str, text: &str) -> std::io::Result<TempPath> {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            Ok(TempPath(path))
        }

        /// Where it is.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_report::record::Metric;

    fn plan() -> Plan {
        Plan::parse(
            "name = \"t\"\ntopology = \"loopback\"\n[[workload]]\nprofile = \"oltp-8k\"\n",
            "t.toml",
        )
        .unwrap()
    }

    /// A load generator that prints more than a pipe holds on both
    /// streams ends and gives all of it back (read only after its end, it
    /// would block on its first full pipe and be stopped at the limit).
    #[test]
    fn a_child_that_prints_more_than_a_pipe_holds_is_not_blocked() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "yes out | head -c 300000; yes err | head -c 200000 >&2",
        ]);
        let (mut child, drained, _) = spawn_load(&mut cmd, "sh").unwrap();
        let stop = AtomicBool::new(false);
        wait_for_child(&mut child, "sh", Duration::from_secs(60), &stop, |_| {}).unwrap();
        let out = drained.output(&mut child).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 300_000);
        assert_eq!(out.stderr.len(), 200_000);
        assert!(out.stdout.starts_with(b"out\nout\n"));
    }

    /// A server's stdout is read to its end after the lines the lab waits
    /// for: a server that keeps printing is not stopped by a full pipe.
    #[test]
    fn a_servers_stdout_is_read_after_its_first_lines() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "echo listening on 1; yes more | head -c 500000; echo done >&2",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let rx = lines_of(child.stdout.take().unwrap());
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)).unwrap(),
            "listening on 1"
        );
        drop(rx);
        let stop = AtomicBool::new(false);
        wait_for_child(&mut child, "sh", Duration::from_secs(60), &stop, |_| {}).unwrap();
        assert!(child.wait().unwrap().success());
    }

    fn record(run: u32, value: f64, bench: serde_json::Value, why: Option<&str>) -> RunRecord {
        RunRecord {
            plan: "t".into(),
            case: "baseline".into(),
            workload: "oltp-8k".into(),
            run,
            topology: "loopback".into(),
            knobs: BTreeMap::new(),
            skipped_knobs: BTreeMap::new(),
            metric: Metric::Iops,
            value,
            steal_pct: 0.0,
            valid: why.is_none(),
            invalid_reason: why.map(String::from),
            round: run,
            foreign: None,
            bench,
            series: Vec::new(),
            started_at: String::new(),
        }
    }

    #[test]
    fn the_series_moves_out_of_the_result_and_an_interrupted_run_is_repeated() {
        let mut result = RunResult::for_tests(serde_json::json!({
            "iops": 1000.0,
            "elapsed_s": 2.4,
            "interrupted": true,
            "series": [
                {"t_s": 0.0, "span_s": 1.0, "ios": 1000, "iops": 1000.0, "mb_per_s": 8.192},
                {"t_s": 1.0, "span_s": 1.4, "ios": 1400, "iops": 1000.0, "mb_per_s": 8.192},
            ],
        }));
        let plan = plan();
        let cases = plan.resolved_cases();
        let this = ThisRun {
            plan: &plan,
            case: &cases[0],
            workload: &plan.workloads[0],
            round: 1,
            topology: "loopback",
            knobs: &cases[0].knobs,
            skipped: &BTreeMap::new(),
        };
        let measured = |result: RunResult| Measured {
            result,
            started_at: String::new(),
            foreign: None,
        };
        let record = this.record(1, measured(result.clone()));
        assert_eq!(record.series.len(), 2);
        assert_eq!(
            (
                record.series[1].t_s,
                record.series[1].span_s,
                record.series[1].ios
            ),
            (1.0, 1.4, 1400)
        );
        assert!(
            record.bench.get("series").is_none(),
            "kept once, in the record"
        );
        assert_eq!(record.value, 1000.0);
        assert_eq!(
            record.invalid_reason.as_deref(),
            Some("interrupted by a signal after 2.4 s of its window")
        );
        let rules = isoe_report::stats::Rules::default();
        result.bench.interrupted = Some(false);
        assert_eq!(
            judge(&rules, Metric::Iops, &result, None).invalid_reason,
            None
        );
        // A run that stopped itself says why, whatever its figures.
        result.bench.stopped = Some("the LUN is gone: read at LBA 8".into());
        assert_eq!(
            judge(&rules, Metric::Iops, &result, None)
                .invalid_reason
                .as_deref(),
            Some("stopped before its window ended: the LUN is gone: read at LBA 8")
        );
        // A result with no series (fio's) gives an empty one.
        result.bench.series = None;
        assert!(this.record(2, measured(result)).series.is_empty());
        // One that gave none is null, invalid for the reason given.
        let failed = this.failed(3, "bench exited 1".into());
        assert!(failed.bench.is_null() && failed.series.is_empty() && !failed.valid);
        assert_eq!(failed.invalid_reason.as_deref(), Some("bench exited 1"));
    }

    #[test]
    fn a_metric_the_result_lacks_or_that_is_no_number_counts_as_no_io() {
        let rules = isoe_report::stats::Rules::default();
        let mut result = RunResult::for_tests(serde_json::json!({"iops": 5.0, "mb_per_s": 1.0}));
        assert_eq!(
            judge(&rules, Metric::Tps, &result, None)
                .invalid_reason
                .as_deref(),
            Some("no I/O completed")
        );
        result.bench.iops = f64::NAN;
        let v = judge(&rules, Metric::Iops, &result, None);
        assert_eq!(
            (v.value, v.invalid_reason.as_deref()),
            (0.0, Some("no I/O completed"))
        );
        // Unverified reads found no mismatch; verified ones count.
        result.bench.iops = 5.0;
        assert_eq!(
            judge(&rules, Metric::Iops, &result, None).invalid_reason,
            None
        );
        result.bench.verify_errors = Some(2);
        assert_eq!(
            judge(&rules, Metric::Iops, &result, None)
                .invalid_reason
                .as_deref(),
            Some("2 failed commands")
        );
    }

    #[test]
    fn namespaces_skip_what_needs_a_test_bed_rather_than_run_isoe_for_it() {
        // Every case needs a test bed: none may start a topology or a
        // target, and each is listed with why (as preflight would have).
        let plan = Plan::parse(
            "name = \"bed-only\"\ntopology = \"loopback\"\n[baseline]\ninitiator = \"kernel\"\n\
             [[workload]]\nprofile = \"oltp-8k\"\n\
             [[case]]\nname = \"ublk\"\ninitiator = \"isoe-ublk\"\n\
             [[case]]\nname = \"nbd\"\ninitiator = \"isoe-nbd\"\n",
            "t.toml",
        )
        .unwrap();
        let out = tempfile::tempdir().unwrap();
        let outcome = run_plan(LabOptions {
            plan,
            out_dir: out.path().to_path_buf(),
            isoe: PathBuf::from("/nonexistent/isoe"),
            fresh: true,
            progress: false,
            stop: Arc::new(AtomicBool::new(false)),
            skip: Vec::new(),
            lost: Vec::new(),
            invoked: Vec::new(),
            testbed: None,
        })
        .unwrap();
        assert_eq!(outcome.runs, 0);
        let skipped: BTreeMap<&str, &str> = outcome
            .skipped
            .iter()
            .map(|(c, why)| (c.as_str(), why.as_str()))
            .collect();
        assert_eq!(
            skipped.keys().copied().collect::<Vec<_>>(),
            ["baseline", "nbd", "ublk"]
        );
        assert!(skipped["ublk"].starts_with("initiator = isoe-ublk runs on a test bed"));
        assert!(skipped["nbd"].starts_with("initiator = isoe-nbd runs on a test bed"));
        assert!(skipped["baseline"].starts_with("initiator = kernel runs on a test bed"));
        let report = fs::read_to_string(&outcome.report_md).unwrap();
        assert!(report.contains("isoe-nbd runs on a test bed"), "{report}");
    }

    #[test]
    fn a_cell_is_given_up_after_two_failures_in_a_row_but_not_for_steal() {
        let plan = plan();
        let ok = || serde_json::json!({"iops": 1000.0});
        let failed = |run| record(run, 0.0, serde_json::Value::Null, Some("bench exited 1"));
        let mut records = vec![record(1, 1000.0, ok(), None), failed(2)];
        assert_eq!(rounds::given_up(&records, "baseline", "oltp-8k"), None);
        let cases = plan.resolved_cases();
        assert_eq!(rounds::due(&plan, &cases, &records).len(), 1);
        // A run spoiled by steal has a result: it is repeated, not a failure.
        records.push(record(3, 900.0, ok(), Some("steal 9% > 5%")));
        records.push(failed(4));
        assert_eq!(rounds::given_up(&records, "baseline", "oltp-8k"), None);
        records.push(failed(5));
        assert_eq!(
            rounds::given_up(&records, "baseline", "oltp-8k").as_deref(),
            Some("bench exited 1")
        );
        assert!(rounds::due(&plan, &cases, &records).is_empty());
        // Another cell is untouched.
        assert_eq!(rounds::given_up(&records, "baseline", "other"), None);
    }

    #[test]
    fn report_dates_span_the_runs_also_when_only_the_report_is_rewritten() {
        let at = |t: &str| {
            let mut r = record(1, 1.0, serde_json::json!({}), None);
            r.started_at = t.into();
            r
        };
        let records = [at("2026-11-21T09:44:31Z"), at("2026-11-21T09:57:20Z")];
        let began = "2026-11-21T11:38:44Z";
        let now = || "2026-11-21T11:38:45Z".to_string();
        assert_eq!(
            report_dates(&records, began, now(), false),
            ("2026-11-21T09:44:31Z".into(), "2026-11-21T09:57:20Z".into())
        );
        assert_eq!(
            report_dates(&records, began, now(), true),
            ("2026-11-21T09:44:31Z".into(), now())
        );
        assert_eq!(
            report_dates(&[], began, now(), false),
            (began.to_string(), now())
        );
    }
}
