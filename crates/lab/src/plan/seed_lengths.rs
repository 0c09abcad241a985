//! The seeds' own run lengths (`isoe lab --seed-durations`): how long each
//! run measured and how many runs each cell had, where a seed's text says.
//! The shipped plans are scaled to finish within half an hour on a small
//! machine; these are for whoever has the hours.

use super::Plan;

/// What one seed states of its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedRunLength {
    /// The seed ("000" ... "004").
    pub seed: &'static str,
    /// Measured seconds per run; None where the seed states none.
    pub duration_s: Option<f64>,
    /// Runs per cell; None where the seed states none.
    pub runs: Option<u32>,
    /// Where the seed says so, for people.
    pub says: &'static str,
}

/// Every seed, with what its text states: seed 001 §3.3 ("each vdbench
/// workload was run three times for twenty minute durations"), seed 004
/// ("the median score of three test runs"); seeds 000, 002 and 003 state
/// neither.
pub const SEED_RUN_LENGTHS: [SeedRunLength; 5] = [
    SeedRunLength {
        seed: "000",
        duration_s: None,
        runs: None,
        says: "states no run length",
    },
    SeedRunLength {
        seed: "001",
        duration_s: Some(1200.0),
        runs: Some(3),
        says: "three runs of twenty minutes each (§3.3)",
    },
    SeedRunLength {
        seed: "002",
        duration_s: None,
        runs: None,
        says: "states no run length",
    },
    SeedRunLength {
        seed: "003",
        duration_s: None,
        runs: None,
        says: "states no run length",
    },
    SeedRunLength {
        seed: "004",
        duration_s: None,
        runs: Some(3),
        says: "the median of three test runs, of no stated length",
    },
];

impl Plan {
    /// Lays the run lengths its seeds state over the plan's: the longest
    /// stated duration becomes `[run] duration_s`, the most stated runs
    /// `min_runs` (and `max_runs` when below it); what no seed states stays
    /// the plan's. The ramp stays the plan's (no seed states one). Returns
    /// one line per seed saying what it changed or that it kept the
    /// plan's, for the console and the report's notes.
    pub fn use_seed_durations(&mut self) -> Vec<String> {
        let stated: Vec<&SeedRunLength> = SEED_RUN_LENGTHS
            .iter()
            .filter(|s| self.seeds.iter().any(|mine| mine == s.seed))
            .collect();
        let duration = stated.iter().filter_map(|s| s.duration_s).reduce(f64::max);
        let runs = stated.iter().filter_map(|s| s.runs).max();
        let mut notes: Vec<String> = stated
            .iter()
            .map(|s| format!("--seed-durations: seed {} {}", s.seed, s.says))
            .collect();
        match duration {
            Some(d) => {
                notes.push(format!(
                    "--seed-durations: runs measure {d} s (the plan's {} s)",
                    self.run.duration_s
                ));
                self.run.duration_s = d;
            }
            None => notes.push(format!(
                "--seed-durations: no seed of this plan states a run length: runs keep the plan's {} s",
                self.run.duration_s
            )),
        }
        match runs {
            Some(n) => {
                notes.push(format!(
                    "--seed-durations: at least {n} runs per cell (the plan's {})",
                    self.rules.min_runs
                ));
                self.rules.min_runs = n;
                self.rules.max_runs = self.rules.max_runs.max(n);
            }
            None => notes.push(format!(
                "--seed-durations: no seed of this plan states a number of runs: cells keep the plan's {} to {}",
                self.rules.min_runs, self.rules.max_runs
            )),
        }
        debug_assert!(self.rules.min_runs <= self.rules.max_runs);
        notes
    }
}
