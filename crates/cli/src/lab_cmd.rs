//! `isoe lab`: arguments to a plan run, and what is printed at the end;
//! `--report DIR` draws a stored run's reports again instead.

use clap::Args;
use isoe_lab::install::SystemInstaller;
use isoe_lab::knobs::TargetImpl;
use isoe_lab::plan::{Plan, TopologyKind};
use isoe_lab::preflight;
use isoe_lab::runner::{self, LabOptions};
use isoe_lab::testbed::Testbed;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The plan `isoe lab` runs when none is named.
const DEFAULT_PLAN: &str = "quick";

/// Arguments of `isoe lab`.
#[derive(Args, Debug)]
pub struct LabArgs {
    /// List the shipped plans and exit.
    #[arg(long)]
    list: bool,
    /// Draw DIR/report.md and DIR/report.html again from what a run stored
    /// in DIR (results.jsonl, and report-input.json: the plan as it ran, the
    /// machine, the runner's notes; either may be gzipped, as FILE.gz, as the
    /// runs in docs/results keep them) and exit; runs nothing, needs no
    /// root. For a report after a change to the writer, or where only the
    /// results were kept.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = [
            "list", "plan", "out", "fresh", "no_progress", "no_install",
            "skip_missing", "pin_cpus", "testbed", "target", "seed_durations",
        ]
    )]
    report: Option<PathBuf>,
    /// A shipped plan's name, or a plan file (TOML).
    #[arg(long, value_name = "NAME|FILE", default_value = DEFAULT_PLAN)]
    plan: String,
    /// Where results.jsonl, report-input.json, report.md and report.html go
    /// (default: lab-out/PLAN).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Start over instead of resuming the runs already in DIR/results.jsonl.
    #[arg(long)]
    fresh: bool,
    /// No progress line.
    #[arg(long)]
    no_progress: bool,
    /// Never install what the plan needs. By default, as root with apt-get,
    /// missing programs (iproute2, ethtool, tgt) are installed and fio with
    /// libiscsi is built (crates/lab/fio-libiscsi) before the first run; with
    /// this, the lab stops instead and prints the command that would.
    #[arg(long)]
    no_install: bool,
    /// When something a case needs is missing (and not installed), run the
    /// other cases instead of stopping; the skipped ones are listed before
    /// the first run and at the top of the report.
    #[arg(long)]
    skip_missing: bool,
    /// Hold the initiator's processes to the first CPU and the target's to
    /// the last (on), or leave them to the scheduler (off); overrides the
    /// plan's `[run] pin_cpus`. Off by default: measured, pinning did not
    /// lower the spread here (docs/results/2026-11-25-pinning.md).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pin_cpus: Option<bool>,
    /// Run every case on the machines this test bed file names (over SSH,
    /// or this machine) instead of network namespaces: the initiators'
    /// host, the target's, and the interfaces of the portals. An example:
    /// crates/lab/examples/testbed-physical.toml.
    #[arg(long, value_name = "FILE")]
    testbed: Option<PathBuf>,
    /// The target the baseline (and every case that names none) runs
    /// against, over the plan's: isoe, tgt, lio or external (the last two
    /// on a test bed; external is the array the test bed names).
    #[arg(long, value_name = "TARGET", value_parser = parse_target)]
    target: Option<TargetImpl>,
    /// Run as long as the plan's seeds did where their texts say: seed
    /// 001's three runs of 20 minutes per cell, seed 004's three runs; a
    /// seed that states no length leaves the plan's (each says so). Hours
    /// where the shipped plans take minutes; the estimate printed before
    /// the first run counts them.
    #[arg(long)]
    seed_durations: bool,
}

fn parse_target(text: &str) -> Result<TargetImpl, String> {
    TargetImpl::ALL
        .into_iter()
        .find(|t| t.as_str() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = TargetImpl::ALL.iter().map(|t| t.as_str()).collect();
            format!("expected one of {}, found {text:?}", names.join(", "))
        })
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, found {text:?}")),
    }
}

/// The exit status of a plan stopped before its first run because
/// something it needs is missing.
const EXIT_MISSING: u8 = 2;

/// Runs `isoe lab`.
pub fn run(args: LabArgs) -> ExitCode {
    if args.list {
        for (name, description) in Plan::list_embedded() {
            println!("{name:20} {description}");
        }
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = &args.report {
        return report(dir);
    }
    match lab(&args) {
        Ok(code) => code,
        Err(Failure::Missing(stop)) => {
            eprintln!("{stop}");
            ExitCode::from(EXIT_MISSING)
        }
        Err(Failure::Other(e)) => {
            eprintln!("isoe lab: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `isoe lab --report DIR`: the reports drawn again from the stored run.
fn report(dir: &Path) -> ExitCode {
    match isoe_report::stored::rebuild(dir) {
        Ok(paths) => {
            println!("report:  {}", paths.markdown.display());
            println!("html:    {}", paths.html.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("isoe lab: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Why `isoe lab` did not finish.
enum Failure {
    /// Something the plan needs is missing; nothing ran.
    Missing(preflight::Stop),
    /// Anything else.
    Other(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Other(e)
    }
}

/// What the plan needs, installed or found missing, before the first run;
/// the cases to skip and what the rest run without, printed.
fn preflight(args: &LabArgs, plan: &Plan) -> Result<preflight::Ready, Failure> {
    let policy = preflight::Policy {
        install: !args.no_install,
        skip_missing: args.skip_missing,
    };
    let mut stdout = std::io::stdout();
    let ready = preflight::prepare(
        &plan.name,
        &plan.resolved_cases(),
        policy,
        &preflight::Probe::default(),
        &mut SystemInstaller,
        &mut stdout,
    )
    .map_err(Failure::Missing)?;
    for line in &ready.installed {
        println!("installed: {line}");
    }
    if !ready.skipped.is_empty() {
        println!("skipped, not measured (also listed at the top of the report):");
        for (case, why) in &ready.skipped {
            println!("  - {case}: {why}");
        }
    }
    for line in &ready.lost {
        println!("note: {line}");
    }
    Ok(ready)
}

fn lab(args: &LabArgs) -> Result<ExitCode, Failure> {
    let mut plan = Plan::from_arg(&args.plan).map_err(|e| e.to_string())?;
    if let Some(pin) = args.pin_cpus {
        plan.run.pin_cpus = pin;
    }
    if let Some(target) = args.target {
        plan.baseline.target = Some(target);
    }
    let invoked = if args.seed_durations {
        plan.use_seed_durations()
    } else {
        Vec::new()
    };
    let testbed = match &args.testbed {
        Some(path) => Some(Testbed::load(path).map_err(|e| e.to_string())?),
        None => None,
    };
    if testbed.is_some() {
        // The bed replaces every namespace topology the plan names.
        plan.topology = TopologyKind::Physical;
        for case in &mut plan.cases {
            case.topology = None;
        }
    } else if plan
        .resolved_cases()
        .iter()
        .any(|c| c.topology == TopologyKind::Physical)
    {
        return Err(format!(
            "plan {} runs on machines (topology \"physical\"): name them with --testbed FILE \
             (an example: crates/lab/examples/testbed-physical.toml)",
            plan.name
        )
        .into());
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("lab-out").join(&plan.name));
    let isoe = std::env::current_exe().map_err(|e| format!("cannot find the isoe binary: {e}"))?;
    println!(
        "isoe lab: plan {} ({}), results in {}",
        plan.name,
        plan.source,
        out_dir.display()
    );
    for line in &invoked {
        println!("{line}");
    }
    let (min_s, max_s) = plan.estimated_duration_s();
    println!(
        "estimate: {} cells, {:.1} to {:.1} minutes ({min_s:.0}-{max_s:.0} s){}",
        plan.cell_count(),
        min_s / 60.0,
        max_s / 60.0,
        if args.seed_durations {
            ", with the seeds' run lengths"
        } else {
            ""
        }
    );
    let ready = preflight(args, &plan)?;
    // Installing is left to Ctrl-C's default (apt-get and the fio build
    // stop with the lab); from here on Ctrl-C ends the plan in order.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| e.to_string())?;
    }
    let outcome = runner::run_plan(LabOptions {
        plan,
        out_dir,
        isoe,
        fresh: args.fresh,
        progress: !args.no_progress && std::io::stderr().is_terminal(),
        stop,
        skip: ready.skipped,
        lost: ready.lost.clone(),
        invoked: invoked.clone(),
        testbed,
    })
    .map_err(|e| e.to_string())?;
    let printed = |n: &String| ready.lost.contains(n) || invoked.contains(n);
    for note in outcome.notes.iter().filter(|n| !printed(n)) {
        println!("note: {note}");
    }
    if !outcome.skipped.is_empty() {
        let names: Vec<&str> = outcome.skipped.iter().map(|(c, _)| c.as_str()).collect();
        println!(
            "skipped, not measured: {} (why: at the top of the report)",
            names.join(", ")
        );
    }
    println!(
        "{} runs ({} new){}",
        outcome.runs,
        outcome.new_runs,
        if outcome.interrupted {
            ", interrupted"
        } else {
            ""
        }
    );
    println!("report:  {}", outcome.report_md.display());
    println!("html:    {}", outcome.report_html.display());
    println!("results: {}", outcome.results.display());
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
