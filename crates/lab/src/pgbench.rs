//! pgbench's results: its summary on standard output and its
//! per-transaction log (`--log`), read into the figures a report shows
//! (transactions per second, latency mean and percentiles, a histogram).
//!
//! The per-transaction log has one line per transaction (PostgreSQL 15):
//! `client_id transaction_no time script_no time_epoch time_us
//! [schedule_lag] [retries]`, where `time` is the transaction's latency in
//! µs, or `skipped` (over `--latency-limit` with `--rate`), or `failed`,
//! `serialization`, `deadlock` (a transaction that ended in an error).
//! `time_epoch` and `time_us` say when it ended.

use isoe_bench::latency::{LatencyRecorder, LatencySummary};
use thiserror::Error;

/// A line pgbench wrote that is not what its documentation says.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PgbenchError {
    #[error("pgbench log line {line}: {why}: {text:?}")]
    LogLine {
        line: usize,
        why: &'static str,
        text: String,
    },
    #[error("pgbench's summary has no {0:?} line")]
    SummaryMissing(&'static str),
    #[error("pgbench's summary line {0:?} does not parse")]
    SummaryLine(String),
}

/// What a per-transaction log holds.
#[derive(Debug, Clone)]
pub struct TransactionLog {
    /// Latencies of the transactions that completed.
    pub latency: LatencyRecorder,
    /// Transactions that ended in an error (`failed`, `serialization`,
    /// `deadlock`).
    pub failed: u64,
    /// Transactions skipped for being late (`--latency-limit`).
    pub skipped: u64,
    /// When the first and the last logged transaction ended, µs since the
    /// epoch; `None` when the log is empty.
    pub span_us: Option<(u64, u64)>,
}

impl TransactionLog {
    /// Reads a log (several, concatenated, for pgbench's per-thread files).
    /// Blank lines are ignored; anything else that does not parse is an error
    /// naming its line.
    pub fn parse(text: &str) -> Result<TransactionLog, PgbenchError> {
        TransactionLog::parse_between(text, 0, u64::MAX)
    }

    /// [`TransactionLog::parse`], counting only the transactions that ended
    /// within `[from_us, to_us]` (µs since the epoch): a run's measured
    /// window, its ramp left out.
    pub fn parse_between(
        text: &str,
        from_us: u64,
        to_us: u64,
    ) -> Result<TransactionLog, PgbenchError> {
        let mut log = TransactionLog {
            latency: LatencyRecorder::new(),
            failed: 0,
            skipped: 0,
            span_us: None,
        };
        for (i, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            let bad = |why| PgbenchError::LogLine {
                line: i + 1,
                why,
                text: line.to_owned(),
            };
            if !(6..=8).contains(&fields.len()) {
                return Err(bad("expected 6 to 8 fields"));
            }
            let number = |s: &str, why| s.parse::<u64>().map_err(|_| bad(why));
            number(fields[0], "client_id is not a number")?;
            number(fields[1], "transaction_no is not a number")?;
            number(fields[3], "script_no is not a number")?;
            let epoch = number(fields[4], "time_epoch is not a number")?;
            let micros = number(fields[5], "time_us is not a number")?;
            if micros >= 1_000_000 {
                return Err(bad("time_us is not below 1,000,000"));
            }
            let end = epoch.saturating_mul(1_000_000) + micros;
            if end < from_us || end > to_us {
                continue;
            }
            match fields[2] {
                "skipped" => log.skipped += 1,
                "failed" | "serialization" | "deadlock" => log.failed += 1,
                t => {
                    let us = number(t, "time is not a number of µs")?;
                    log.latency.record_ns(us.saturating_mul(1_000));
                }
            }
            log.span_us = Some(match log.span_us {
                None => (end, end),
                Some((first, last)) => (first.min(end), last.max(end)),
            });
        }
        Ok(log)
    }

    /// Count, mean and percentiles of the completed transactions, µs.
    pub fn summary(&self) -> LatencySummary {
        self.latency.summary()
    }
}

/// The lines of pgbench's summary a report uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `number of transactions actually processed`.
    pub transactions: u64,
    /// `number of failed transactions` (0 where pgbench does not print it).
    pub failed: u64,
    /// `latency average`, ms.
    pub latency_avg_ms: f64,
    /// `tps = ... (without initial connection time)`.
    pub tps: f64,
}

impl Summary {
    /// Reads pgbench's standard output.
    pub fn parse(stdout: &str) -> Result<Summary, PgbenchError> {
        let line = |prefix: &'static str| {
            stdout
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with(prefix))
                .ok_or(PgbenchError::SummaryMissing(prefix))
        };
        let bad = |l: &str| PgbenchError::SummaryLine(l.to_owned());
        // The first number after `prefix` (and its ':' or '='), up to a space.
        let first_number = |l: &str, prefix: &str| -> Option<f64> {
            l[prefix.len()..]
                .trim_start_matches([':', '=', ' '])
                .split_ascii_whitespace()
                .next()?
                .parse()
                .ok()
        };
        let prefix = "number of transactions actually processed";
        let l = line(prefix)?;
        // "...: 1234" or, with a transaction count (-t), "...: 1234/1234".
        let transactions = l[prefix.len()..]
            .trim_start_matches([':', ' '])
            .split(['/', ' '])
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(l))?;
        let prefix = "number of failed transactions";
        let failed = match line(prefix) {
            Ok(l) => first_number(l, prefix).ok_or_else(|| bad(l))? as u64,
            Err(_) => 0,
        };
        let prefix = "latency average";
        let l = line(prefix)?;
        let latency_avg_ms = first_number(l, prefix).ok_or_else(|| bad(l))?;
        if !l.trim_end().ends_with("ms") {
            return Err(bad(l));
        }
        let prefix = "tps";
        let l = stdout
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("tps") && !l.contains("including"))
            .ok_or(PgbenchError::SummaryMissing(prefix))?;
        let tps = first_number(l, prefix).ok_or_else(|| bad(l))?;
        Ok(Summary {
            transactions,
            failed,
            latency_avg_ms,
            tps,
        })
    }
}
