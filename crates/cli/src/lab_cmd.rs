//! `isoe lab`: arguments to a plan run, and what is printed at the end.

use clap::Args;
use isoe_lab::plan::Plan;
use isoe_lab::runner::{self, LabOptions};
use std::io::IsTerminal;
use std::path::PathBuf;
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
    /// A shipped plan's name, or a plan file (TOML).
    #[arg(long, value_name = "NAME|FILE", default_value = DEFAULT_PLAN)]
    plan: String,
    /// Where results.jsonl, report.md and report.html go (default: lab-out/PLAN).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Start over instead of resuming the runs already in DIR/results.jsonl.
    #[arg(long)]
    fresh: bool,
    /// No progress line.
    #[arg(long)]
    no_progress: bool,
}

/// Runs `isoe lab`.
pub fn run(args: LabArgs) -> ExitCode {
    if args.list {
        for (name, description) in Plan::list_embedded() {
            println!("{name:20} {description}");
        }
        return ExitCode::SUCCESS;
    }
    match lab(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("isoe lab: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn lab(args: &LabArgs) -> Result<ExitCode, String> {
    let plan = Plan::from_arg(&args.plan).map_err(|e| e.to_string())?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("lab-out").join(&plan.name));
    let isoe = std::env::current_exe().map_err(|e| format!("cannot find the isoe binary: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| e.to_string())?;
    }
    println!(
        "isoe lab: plan {} ({}), results in {}",
        plan.name,
        plan.source,
        out_dir.display()
    );
    let outcome = runner::run_plan(LabOptions {
        plan,
        out_dir,
        isoe,
        fresh: args.fresh,
        progress: !args.no_progress && std::io::stderr().is_terminal(),
        stop,
    })
    .map_err(|e| e.to_string())?;
    for note in &outcome.notes {
        println!("note: {note}");
    }
    for (case, why) in &outcome.skipped {
        println!("skipped, not measured: {case}: {why}");
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
