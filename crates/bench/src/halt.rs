//! When a run stops itself before its window ends: its LUN is gone, or its
//! commands fail past a bound. Either way what it would measure is no
//! longer the workload (failed commands complete in microseconds and carry
//! no data), so the run stops at once, says why, and its figures are marked
//! as no measurement (`stopped` in the result).

use std::sync::OnceLock;

/// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (05/25/00): the target no
/// longer has the LUN, and no command to it will succeed again.
const LUN_GONE: (u8, u8, u8) = (0x05, 0x25, 0x00);

/// Completed commands a worker counts before its share of failures is
/// judged: a share of a few commands says little, and a run of failures
/// among them is caught by [`CONSECUTIVE_FAILURES_MAX`].
pub const MIN_COMPLETIONS: u64 = 1000;

/// Failed commands in a row, in one worker, that stop the run whatever the
/// share: a LUN or target that fails everything fails it fast.
pub const CONSECUTIVE_FAILURES_MAX: u64 = 32;

/// How many failures a run tolerates before it stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorBound {
    /// A worker's failed commands above this percentage of its completed
    /// ones (counted from [`MIN_COMPLETIONS`] on) stop the run; 100 never.
    pub max_error_pct: f64,
}

impl Default for ErrorBound {
    /// 1%: a share of failures that skews the throughput and latency
    /// measured more than their usual spread does.
    fn default() -> Self {
        ErrorBound { max_error_pct: 1.0 }
    }
}

/// Why the run stopped: set once, by the first worker that finds a reason;
/// the workers then send nothing new and the main thread ends the window.
#[derive(Debug, Default)]
pub struct Halt {
    reason: OnceLock<String>,
}

impl Halt {
    /// Stops the run for `why`, unless it was stopped already.
    pub fn set(&self, why: String) {
        let _ = self.reason.set(why);
    }

    /// Why the run stopped; None while it runs.
    pub fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    /// Whether the run stopped.
    pub fn is_set(&self) -> bool {
        self.reason.get().is_some()
    }
}

/// One worker's completions, judged against the bound.
#[derive(Debug)]
pub struct ErrorWatch {
    bound: ErrorBound,
    completions: u64,
    failures: u64,
    consecutive: u64,
}

impl ErrorWatch {
    /// A watch with nothing counted.
    pub fn new(bound: ErrorBound) -> ErrorWatch {
        ErrorWatch {
            bound,
            completions: 0,
            failures: 0,
            consecutive: 0,
        }
    }

    /// Counts a command that succeeded.
    pub fn succeeded(&mut self) {
        self.completions += 1;
        self.consecutive = 0;
    }

    /// Counts a failed command, `what` its description and `sense` its
    /// key, ASC and ASCQ; Some(why the run must stop) when it must.
    pub fn failed(&mut self, what: &str, sense: Option<(u8, u8, u8)>) -> Option<String> {
        self.completions += 1;
        self.failures += 1;
        self.consecutive += 1;
        if sense == Some(LUN_GONE) {
            return Some(format!("the LUN is gone: {what}"));
        }
        if self.consecutive >= CONSECUTIVE_FAILURES_MAX {
            return Some(format!(
                "{} commands in a row failed, the last: {what}",
                self.consecutive
            ));
        }
        let pct = 100.0 * self.failures as f64 / self.completions as f64;
        (self.completions >= MIN_COMPLETIONS && pct > self.bound.max_error_pct).then(|| {
            format!(
                "{} of {} commands failed ({pct:.1}%, more than {}%), the last: {what}",
                self.failures, self.completions, self.bound.max_error_pct
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lun_gone_stops_at_the_first_failure() {
        let mut w = ErrorWatch::new(ErrorBound::default());
        for _ in 0..5000 {
            w.succeeded();
        }
        let why = w.failed("read at LBA 8: X", Some(LUN_GONE)).expect("stops");
        assert_eq!(why, "the LUN is gone: read at LBA 8: X");
        assert_eq!(w.failed("y", Some((0x05, 0x24, 0x00))), None);
    }

    #[test]
    fn failures_in_a_row_stop_the_run() {
        let mut w = ErrorWatch::new(ErrorBound {
            max_error_pct: 100.0,
        });
        for _ in 1..CONSECUTIVE_FAILURES_MAX {
            assert_eq!(w.failed("x", None), None);
        }
        let why = w.failed("write at LBA 0: Y", None).expect("stops");
        assert_eq!(
            why,
            "32 commands in a row failed, the last: write at LBA 0: Y"
        );
        // One success between them starts the count again.
        let mut w = ErrorWatch::new(ErrorBound {
            max_error_pct: 100.0,
        });
        for _ in 0..100 {
            w.succeeded();
            assert_eq!(w.failed("x", None), None);
        }
    }

    #[test]
    fn a_share_above_the_bound_stops_the_run_once_enough_completed() {
        let mut w = ErrorWatch::new(ErrorBound::default());
        // 2 of 20: 10%, but too few commands to judge a share.
        for _ in 0..18 {
            w.succeeded();
        }
        assert_eq!(w.failed("x", None), None);
        assert_eq!(w.failed("x", None), None);
        // 10 of 1000 is 1%, not more: it runs on.
        for _ in 0..972 {
            w.succeeded();
        }
        for _ in 0..8 {
            assert_eq!(w.failed("x", None), None);
        }
        assert_eq!(w.completions, 1000);
        let why = w.failed("read at LBA 1: Z", None).expect("11 of 1001");
        assert_eq!(
            why,
            "11 of 1001 commands failed (1.1%, more than 1%), the last: read at LBA 1: Z"
        );
    }

    #[test]
    fn the_first_reason_is_kept() {
        let halt = Halt::default();
        assert!(!halt.is_set() && halt.reason().is_none());
        halt.set("first".into());
        halt.set("second".into());
        assert_eq!(halt.reason(), Some("first"));
    }
}
