//! What a run is, whichever way a case runs (in namespaces on this
//! machine, `runner`, or on a test bed of machines, `bed`): the target and
//! LUN every run serves, the target's configuration, the measured window
//! and what a run gives back.

use crate::foreign::{ForeignLoad, Snapshot};
use crate::knobs::KnobSet;
use crate::record::RunResult;
use std::time::Duration;

/// The target every lab run serves.
pub const TARGET_IQN: &str = "iqn.2026-11.io.isoe:lab";
/// The configuration of the `isoe target` a case runs: `TARGET_IQN` with
/// LUN 0 a sparse memory LUN of `lun_bytes` (the plan's span), listening
/// on `portals`, negotiating what `knobs` ask.
///
/// `control` is the control socket's path (`""`: none), so that the lab's
/// target never takes the default socket of a target an administrator runs.
pub(crate) fn isoe_target_config(
    case: &str,
    portals: &[String],
    knobs: &KnobSet,
    control: &str,
    lun_bytes: u64,
) -> String {
    let portal_list = portals
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "# isoe lab, case {case}\nportals = [{portal_list}]\n\n[control]\nsocket = {control:?}\n\n{defaults}\n[[target]]\nname = \"{TARGET_IQN}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"{lun_bytes}\"\n",
        defaults = knobs.target_defaults_toml(),
    ) + &knobs.target_datapath_toml()
}

/// Why a run gave no result.
#[derive(Debug)]
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
