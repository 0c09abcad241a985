//! The statistical rules of seed 001 §3.3 and §4 (METHODOLOGY.md): at least
//! `min_runs` runs, more while the relative standard deviation exceeds the
//! target, up to a cap; an effect counts only above a threshold.

use serde::{Deserialize, Serialize};

/// The rules a plan runs by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Runs at least this many times (3).
    pub min_runs: u32,
    /// Never more than this many (6).
    pub max_runs: u32,
    /// Run again while the RSD is above this, in % (1.0).
    pub rsd_target_pct: f64,
    /// An effect is significant above this share of the baseline, in % (5.0).
    pub significance_pct: f64,
    /// A run with more host CPU steal than this, in %, is repeated (5.0).
    pub steal_max_pct: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            min_runs: 3,
            max_runs: 6,
            rsd_target_pct: 1.0,
            significance_pct: 5.0,
            steal_max_pct: 5.0,
        }
    }
}

/// Mean, median, spread and count of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: u32,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Sample standard deviation (n - 1).
    pub stddev: f64,
    /// Relative standard deviation: stddev / mean × 100; 0 for one value.
    pub rsd_pct: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; None for an empty sample.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let stddev = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let rsd_pct = if mean != 0.0 {
            100.0 * stddev / mean.abs()
        } else {
            0.0
        };
        Some(Summary {
            n: n as u32,
            mean,
            median,
            stddev,
            rsd_pct,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }
}

/// What to do after the runs so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run again.
    RunAgain,
    /// Done: the RSD is within the target.
    Converged,
    /// Done: the cap was reached with the RSD still above the target.
    NotConverged,
}

impl Rules {
    /// The decision after `values` (one per valid run so far).
    pub fn next(&self, values: &[f64]) -> Next {
        let n = values.len() as u32;
        if n < self.min_runs.max(1) {
            return Next::RunAgain;
        }
        let rsd = Summary::of(values).map_or(0.0, |s| s.rsd_pct);
        if rsd <= self.rsd_target_pct {
            Next::Converged
        } else if n >= self.max_runs.max(self.min_runs) {
            Next::NotConverged
        } else {
            Next::RunAgain
        }
    }

    /// The change of `value` over `baseline` in %, and whether it is significant.
    pub fn effect(&self, baseline: f64, value: f64) -> Option<Effect> {
        if baseline == 0.0 || !baseline.is_finite() || !value.is_finite() {
            return None;
        }
        let change_pct = 100.0 * (value - baseline) / baseline.abs();
        Some(Effect {
            change_pct,
            significant: change_pct.abs() > self.significance_pct,
        })
    }
}

/// A case's difference from the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// (case − baseline) / baseline × 100.
    pub change_pct: f64,
    /// |change| above the significance threshold.
    pub significant: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_hand_made_sample() {
        // 98, 100, 102: mean 100, sample variance (4 + 0 + 4) / 2 = 4, stddev 2, RSD 2%.
        let s = Summary::of(&[102.0, 98.0, 100.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.stddev, s.rsd_pct),
            (3, 100.0, 100.0, 2.0, 2.0)
        );
        assert_eq!((s.min, s.max), (98.0, 102.0));
        // Even count: median of 1, 2, 3, 10 is 2.5; mean 4.
        let s = Summary::of(&[10.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.mean), (2.5, 4.0));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[5.0]).unwrap().rsd_pct, 0.0);
    }

    #[test]
    fn runs_continue_while_rsd_is_high_up_to_the_cap() {
        let r = Rules::default();
        assert_eq!(r.next(&[100.0, 100.0]), Next::RunAgain, "fewer than 3 runs");
        // 100, 100.5, 99.5: stddev 0.5, RSD 0.5% <= 1%.
        assert_eq!(r.next(&[100.0, 100.5, 99.5]), Next::Converged);
        // 98, 100, 102: RSD 2% > 1% with 3 runs: again.
        assert_eq!(r.next(&[98.0, 100.0, 102.0]), Next::RunAgain);
        // Six spread runs: the cap, not converged.
        assert_eq!(
            r.next(&[90.0, 110.0, 95.0, 105.0, 100.0, 100.0]),
            Next::NotConverged
        );
        let capped = Rules { max_runs: 4, ..r };
        assert_eq!(capped.next(&[90.0, 110.0, 95.0, 105.0]), Next::NotConverged);
    }

    #[test]
    fn effects_count_only_above_the_threshold() {
        let r = Rules::default();
        let e = r.effect(200.0, 212.0).unwrap();
        assert_eq!(e.change_pct, 6.0);
        assert!(e.significant);
        let e = r.effect(200.0, 192.0).unwrap();
        assert_eq!(e.change_pct, -4.0);
        assert!(!e.significant);
        // Exactly 5% is not above 5%.
        assert!(!r.effect(100.0, 105.0).unwrap().significant);
        assert_eq!(r.effect(0.0, 1.0), None);
    }
}
