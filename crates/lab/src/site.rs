//! Where a plan's cases run: the one seam between the run loop
//! (`runner`), which schedules rounds and records results, and the places
//! that run a case: network namespaces on this machine (`runner`'s
//! `Namespaces`) or a test bed of machines (`bed`'s `OnMachines`). A place
//! sets a case up, hands the loop a way to measure each workload, and
//! takes everything down again, or says why it cannot run the case.

use crate::error::LabError;
use crate::plan::{ResolvedCase, WorkloadSpec};
use crate::run::{BenchFailure, Measured};
use std::collections::BTreeMap;

/// How a case went at its site.
#[derive(Debug)]
pub(crate) enum CaseEnd {
    /// Its due workloads ran (or Ctrl-C stopped them).
    Ran,
    /// It was not measured, and why: a knob the site cannot apply
    /// faithfully, a program or module missing, a target that did not
    /// start.
    Skipped(String),
}

/// A case set up at its site, for the loop's records.
pub(crate) struct CaseSetup<'a> {
    /// The topology name results record (`loopback`, `physical`, ...).
    pub topology: &'static str,
    /// Knobs of the case that are not in effect, each with why.
    pub skipped: &'a BTreeMap<String, String>,
    /// The site's network as the report describes it, where it has one.
    pub nics: Option<String>,
}

/// One run of a workload of the case set up.
pub(crate) type Measure<'m> = dyn FnMut(&WorkloadSpec) -> Result<Measured, BenchFailure> + 'm;

/// The loop's part of a case: given the case set up and its [`Measure`],
/// it runs the due workloads and records each.
pub(crate) type CaseRuns<'r> =
    dyn FnMut(CaseSetup<'_>, &mut Measure<'_>) -> Result<(), LabError> + 'r;

/// A place where cases run.
pub(crate) trait Site {
    /// Sets `case` up, calls `runs` once with it set up (unless it is
    /// skipped), then takes it down, also when `runs` fails.
    fn run_case(
        &mut self,
        case: &ResolvedCase,
        workloads: &[String],
        runs: &mut CaseRuns<'_>,
    ) -> Result<CaseEnd, LabError>;

    /// Puts back what the site changed for the plan; what the report should
    /// say about it.
    fn close(self: Box<Self>) -> Vec<String>;
}
