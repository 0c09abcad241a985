//! The statistics a plan decides by (docs/METHODOLOGY.md "Statistical rules").
//!
//! Seed 001 §3.3 and §4 ask for at least three runs within 1% RSD and call
//! an effect significant beyond 5%. On a shared two-core machine that rule
//! reversed verdicts between reruns: a mean 5% away is often noise, and
//! drift between cases run minutes apart is read as an effect. So here:
//!
//! - a case and its reference run in the same rounds, in a shuffled order
//!   per round, and an effect is the mean of the per-round ratios (paired on
//!   the log scale, so that a drift hitting a whole round cancels);
//! - its 95% confidence interval comes from Student's t (a paired t-test
//!   when two or more rounds hold both sides, Welch's test on the two
//!   samples otherwise);
//! - an effect is *significant* only when its size is above the plan's
//!   threshold **and** the test rejects "no change" at 5%;
//! - a comparison is *conclusive* when its interval lies wholly on one side
//!   of each threshold (wholly above +T, wholly below −T, or wholly within
//!   ±T): rounds go on while one is not, up to the plan's cap, and an
//!   inconclusive comparison recommends nothing.
//!
//! The seeds' RSD target is still computed and shown per cell.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The rules a plan runs by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Rounds at least this many times (3).
    pub min_runs: u32,
    /// Never more rounds than this (6).
    pub max_runs: u32,
    /// The seeds' convergence target, RSD in % (1.0): shown per cell; the
    /// rounds stop on the confidence intervals instead.
    pub rsd_target_pct: f64,
    /// An effect is significant above this share of the reference, in % (5.0),
    /// when the test also rejects "no change".
    pub significance_pct: f64,
    /// A run with more host CPU steal than this, in %, is repeated (5.0).
    pub steal_max_pct: f64,
    /// A run during which processes other than the lab's own used more CPU
    /// than this, in % of one CPU, is repeated (5.0).
    #[serde(default = "default_foreign_max_pct")]
    pub foreign_max_pct: f64,
}

/// The default of [`Rules::foreign_max_pct`], % of one CPU: the limit
/// above which `isoe bench` flags a run's foreign load (`isoe-bench` uses
/// this constant).
pub const FOREIGN_MAX_PCT: f64 = 5.0;

fn default_foreign_max_pct() -> f64 {
    FOREIGN_MAX_PCT
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            min_runs: 3,
            max_runs: 6,
            rsd_target_pct: 1.0,
            significance_pct: 5.0,
            steal_max_pct: 5.0,
            foreign_max_pct: default_foreign_max_pct(),
        }
    }
}

/// Whether the rules owe a cell with `valid_runs` valid runs another
/// round: below `min_runs`, or below `max_runs` while its comparison with
/// its reference is not conclusive (`conclusive`: None when it has no
/// reference, as the baseline). The schedule runs what is owed, and the
/// report calls a cell still owed a round unfinished.
pub fn owed_a_round(rules: &Rules, valid_runs: u32, conclusive: Option<bool>) -> bool {
    if valid_runs < rules.min_runs.max(1) {
        return true;
    }
    valid_runs < rules.max_runs.max(rules.min_runs) && conclusive == Some(false)
}

/// The confidence level of every interval the lab reports.
pub const CONFIDENCE: f64 = 0.95;

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
    /// The seeds' verdict on one cell's `values` (one per valid run): run
    /// again below `min_runs`, then converged once the RSD is within the
    /// target, not converged at the cap. Shown per cell; the rounds stop on
    /// [`Effect::conclusive`].
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

    /// The effect of `case` over `reference`, each a cell's valid runs:
    /// paired by round when at least two rounds hold both, Welch's test on
    /// the two samples otherwise; None when either side has no value or a
    /// mean is not positive.
    pub fn compare(&self, reference: &[Sample], case: &[Sample]) -> Option<Effect> {
        let pairs = pair_by_round(reference, case);
        let estimate = if pairs.len() >= 2 {
            paired(&pairs)
        } else {
            unpaired(&values(reference), &values(case))?
        };
        Some(self.judge(estimate))
    }

    /// The change of `value` over `baseline` in %, with no test: for figures
    /// that are means of means (CPU per I/O of a side). Never significant.
    pub fn change(&self, baseline: f64, value: f64) -> Option<Effect> {
        if baseline <= 0.0 || !baseline.is_finite() || !value.is_finite() {
            return None;
        }
        Some(self.judge(Estimate {
            log_ratio: (value / baseline).ln(),
            interval: None,
            test: Test::None,
        }))
    }

    fn judge(&self, e: Estimate) -> Effect {
        let to_pct = |log_ratio: f64| 100.0 * (log_ratio.exp() - 1.0);
        let change_pct = to_pct(e.log_ratio);
        let threshold = self.significance_pct;
        let ci = e.interval.map(|(lo, hi, _)| (to_pct(lo), to_pct(hi)));
        let p_value = e.interval.map(|(_, _, p)| p);
        let rejects_no_change = p_value.is_some_and(|p| p < 1.0 - CONFIDENCE);
        let conclusive = ci.is_some_and(|(lo, hi)| {
            lo > threshold || hi < -threshold || (lo >= -threshold && hi <= threshold)
        });
        Effect {
            change_pct,
            ci_low_pct: ci.map(|c| c.0),
            ci_high_pct: ci.map(|c| c.1),
            p_value,
            test: e.test,
            significant: change_pct.abs() > threshold && rejects_no_change,
            conclusive,
        }
    }
}

/// One valid run of a cell: its value and the round it ran in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The round (1-based; 0 for records of a lab that had no rounds).
    pub round: u32,
    /// The workload's metric.
    pub value: f64,
}

/// The test behind an effect's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// Paired t-test on the log ratios of this many rounds.
    Paired {
        /// Rounds that hold both sides.
        rounds: u32,
    },
    /// Welch's t-test on the log of the two means.
    Welch {
        /// Runs of the reference.
        n_reference: u32,
        /// Runs of the case.
        n_case: u32,
    },
    /// Too few runs for a test.
    None,
}

/// A case's difference from its reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// (case − reference) / reference × 100 (paired: the geometric mean of
    /// the rounds' ratios).
    pub change_pct: f64,
    /// Lower end of the 95% confidence interval of the change, %.
    pub ci_low_pct: Option<f64>,
    /// Upper end of it, %.
    pub ci_high_pct: Option<f64>,
    /// The test's two-sided p-value for "no change".
    pub p_value: Option<f64>,
    /// Which test.
    pub test: Test,
    /// |change| above the threshold and "no change" rejected at 5%.
    pub significant: bool,
    /// The interval lies wholly above +threshold, wholly below −threshold,
    /// or wholly within ±threshold: more runs would not change the verdict.
    pub conclusive: bool,
}

/// A change on the log scale, with (low, high, p-value) when tested.
struct Estimate {
    log_ratio: f64,
    interval: Option<(f64, f64, f64)>,
    test: Test,
}

fn values(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.value).collect()
}

/// (reference, case) per round that holds both, each the mean of its runs
/// in that round (a repeated run may leave two); rounds ascending.
fn pair_by_round(reference: &[Sample], case: &[Sample]) -> Vec<(f64, f64)> {
    let mean_in = |samples: &[Sample], round: u32| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.round == round)
            .map(|s| s.value)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut rounds: Vec<u32> = case.iter().map(|s| s.round).filter(|r| *r > 0).collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds
        .into_iter()
        .filter_map(|r| Some((mean_in(reference, r)?, mean_in(case, r)?)))
        .filter(|(a, b)| *a > 0.0 && *b > 0.0)
        .collect()
}

/// Student's t quantile for the two-sided interval, and the two-sided
/// p-value of `t`, at `df` degrees of freedom.
fn t_test(t: f64, df: f64) -> (f64, f64) {
    let dist = StudentsT::new(0.0, 1.0, df).expect("df > 0 and finite");
    let quantile = dist.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0);
    let p = if t.is_finite() {
        2.0 * (1.0 - dist.cdf(t.abs()))
    } else {
        0.0
    };
    (quantile, p)
}

fn paired(pairs: &[(f64, f64)]) -> Estimate {
    debug_assert!(pairs.len() >= 2);
    let d: Vec<f64> = pairs.iter().map(|(r, c)| (c / r).ln()).collect();
    let s = Summary::of(&d).expect("two pairs or more");
    let n = d.len() as f64;
    let se = s.stddev / n.sqrt();
    Estimate {
        log_ratio: s.mean,
        interval: Some(interval(s.mean, se, n - 1.0)),
        test: Test::Paired {
            rounds: d.len() as u32,
        },
    }
}

fn unpaired(reference: &[f64], case: &[f64]) -> Option<Estimate> {
    let (r, c) = (Summary::of(reference)?, Summary::of(case)?);
    if r.mean <= 0.0 || c.mean <= 0.0 {
        return None;
    }
    let log_ratio = (c.mean / r.mean).ln();
    if r.n < 2 || c.n < 2 {
        return Some(Estimate {
            log_ratio,
            interval: None,
            test: Test::None,
        });
    }
    // The delta method: var(ln mean) ≈ s² / (n · mean²); Welch–Satterthwaite
    // degrees of freedom on those two variances.
    let var = |s: &Summary| (s.stddev / s.mean).powi(2) / f64::from(s.n);
    let (vr, vc) = (var(&r), var(&c));
    let se = (vr + vc).sqrt();
    let df = if se > 0.0 {
        (vr + vc).powi(2) / (vr.powi(2) / f64::from(r.n - 1) + vc.powi(2) / f64::from(c.n - 1))
    } else {
        f64::from(r.n + c.n - 2)
    };
    Some(Estimate {
        log_ratio,
        interval: Some(interval(log_ratio, se, df)),
        test: Test::Welch {
            n_reference: r.n,
            n_case: c.n,
        },
    })
}

/// (low, high, p) of `mean` ± t·`se`; with no spread at all the interval
/// is the point and any change rejects "no change".
fn interval(mean: f64, se: f64, df: f64) -> (f64, f64, f64) {
    if se <= 0.0 || !se.is_finite() {
        let p = if mean == 0.0 { 1.0 } else { 0.0 };
        return (mean, mean, p);
    }
    let (q, p) = t_test(mean / se, df.max(1.0));
    (mean - q * se, mean + q * se, p)
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

    /// `values` as the runs of rounds 1, 2, ...
    fn rounds(values: &[f64]) -> Vec<Sample> {
        values
            .iter()
            .enumerate()
            .map(|(i, &value)| Sample {
                round: i as u32 + 1,
                value,
            })
            .collect()
    }

    /// `values` with no round (an older lab's records): Welch's test.
    fn unrounded(values: &[f64]) -> Vec<Sample> {
        values
            .iter()
            .map(|&value| Sample { round: 0, value })
            .collect()
    }

    /// Six runs of mean `mean` and sample RSD `rsd_pct`, the noise
    /// independent of `phase` (so paired rounds do not cancel it).
    fn noisy(mean: f64, rsd_pct: f64, phase: usize) -> Vec<f64> {
        // Deviations with mean 0 and sample standard deviation 1.
        let z = [1.2, -0.8, 0.3, -1.4, 0.9, -0.2];
        let m = z.iter().sum::<f64>() / 6.0;
        let sd = (z.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 5.0).sqrt();
        (0..6)
            .map(|i| mean * (1.0 + rsd_pct / 100.0 * (z[(i + phase) % 6] - m) / sd))
            .collect()
    }

    #[test]
    fn an_8_pct_change_is_significant_at_1_pct_rsd_and_not_at_20() {
        let r = Rules::default();
        for (reference, case) in [
            (noisy(100.0, 20.0, 0), noisy(108.0, 20.0, 3)),
            (noisy(100.0, 1.0, 0), noisy(108.0, 1.0, 3)),
        ] {
            let rsd = Summary::of(&case).unwrap().rsd_pct;
            assert!(
                (rsd - 20.0).abs() < 1e-6 || (rsd - 1.0).abs() < 1e-6,
                "{rsd}"
            );
            for (how, e) in [
                ("paired", r.compare(&rounds(&reference), &rounds(&case))),
                (
                    "welch",
                    r.compare(&unrounded(&reference), &unrounded(&case)),
                ),
            ] {
                let e = e.unwrap();
                assert!((e.change_pct - 8.0).abs() < 3.0, "{how}: {e:?}");
                let (lo, hi) = (e.ci_low_pct.unwrap(), e.ci_high_pct.unwrap());
                assert!(lo < e.change_pct && e.change_pct < hi, "{how}: {e:?}");
                if rsd > 10.0 {
                    assert!(!e.significant, "{how} at 20% RSD: {e:?}");
                    assert!(!e.conclusive, "{how}: the interval straddles 5%: {e:?}");
                    assert!(lo < 0.0 && hi > 5.0, "{how}: {e:?}");
                } else {
                    assert!(e.significant, "{how} at 1% RSD: {e:?}");
                    assert!(e.conclusive, "{how}: wholly above 5%: {e:?}");
                    assert!(lo > 5.0 && hi < 11.0, "{how}: {e:?}");
                }
            }
        }
    }

    #[test]
    fn pairing_by_round_cancels_a_drift_that_hits_both_sides() {
        // The machine speeds up 30% per round; the case is always 6% ahead
        // of the reference run beside it, give or take 0.5%.
        let drift = [1.0, 1.3, 1.69, 2.197];
        let wobble = [0.005, -0.005, 0.0, 0.003];
        let reference: Vec<f64> = drift.iter().map(|d| 1000.0 * d).collect();
        let case: Vec<f64> = drift
            .iter()
            .zip(wobble)
            .map(|(d, w)| 1060.0 * d * (1.0 + w))
            .collect();
        let r = Rules::default();
        let paired = r.compare(&rounds(&reference), &rounds(&case)).unwrap();
        assert_eq!(paired.test, Test::Paired { rounds: 4 });
        assert!(paired.significant && paired.conclusive, "{paired:?}");
        // Unpaired, the drift swamps the 6%.
        let welch = r
            .compare(&unrounded(&reference), &unrounded(&case))
            .unwrap();
        assert!(matches!(welch.test, Test::Welch { .. }));
        assert!(!welch.significant && !welch.conclusive, "{welch:?}");
    }

    #[test]
    fn a_small_effect_measured_tightly_is_conclusive_but_not_significant() {
        let r = Rules::default();
        let e = r
            .compare(
                &rounds(&noisy(100.0, 0.5, 0)),
                &rounds(&noisy(102.0, 0.5, 2)),
            )
            .unwrap();
        assert!(!e.significant, "2% is within the threshold: {e:?}");
        assert!(e.conclusive, "and its interval stays within ±5%: {e:?}");
    }

    #[test]
    fn too_few_runs_give_no_interval_and_no_verdict() {
        let r = Rules::default();
        let e = r.compare(&rounds(&[100.0]), &rounds(&[150.0])).unwrap();
        assert_eq!(e.test, Test::None);
        assert_eq!((e.ci_low_pct, e.p_value), (None, None));
        assert!(!e.significant && !e.conclusive, "{e:?}");
        assert!((e.change_pct - 50.0).abs() < 1e-9);
        assert_eq!(r.compare(&[], &rounds(&[1.0])), None);
        assert_eq!(r.compare(&rounds(&[0.0, 0.0]), &rounds(&[1.0, 2.0])), None);
        // Identical runs: the interval is the point.
        let e = r
            .compare(&rounds(&[100.0, 100.0]), &rounds(&[120.0, 120.0]))
            .unwrap();
        assert!(e.significant && e.conclusive, "{e:?}");
    }

    #[test]
    fn a_plain_change_is_never_significant() {
        let r = Rules::default();
        let e = r.change(200.0, 212.0).unwrap();
        assert!((e.change_pct - 6.0).abs() < 1e-9);
        assert!(!e.significant && !e.conclusive);
        assert_eq!(r.change(0.0, 1.0), None);
    }
}
