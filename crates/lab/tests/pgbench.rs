//! pgbench's summary and per-transaction logs, as PostgreSQL 15's pgbench
//! wrote them (tests/fixtures/pgbench: a 2 s TPC-B-like run, 2 clients on 2
//! threads, and 100 select-only transactions), read into a report's figures.

use isoe_lab::pgbench::{PgbenchError, Summary, TransactionLog};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/pgbench/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_summary_gives_tps_transactions_failures_and_mean_latency() {
    let s = Summary::parse(&fixture("tpcb-stdout.txt")).unwrap();
    assert_eq!(s.transactions, 916);
    assert_eq!(s.failed, 0);
    assert_eq!(s.latency_avg_ms, 4.372);
    assert_eq!(s.tps, 457.425017);
    // With -t, the count is "done/asked".
    let s = Summary::parse(&fixture("select-stdout.txt")).unwrap();
    assert_eq!(s.transactions, 100);
    assert_eq!(s.tps, 16136.840407);
}

#[test]
fn the_per_thread_logs_together_hold_every_transaction_the_summary_counts() {
    let text = fixture("tpcb-log.0") + &fixture("tpcb-log.1");
    let log = TransactionLog::parse(&text).unwrap();
    let summary = Summary::parse(&fixture("tpcb-stdout.txt")).unwrap();
    let lat = log.summary();
    assert_eq!(lat.count, summary.transactions);
    assert_eq!((log.failed, log.skipped), (0, 0));
    // The log's mean (4,354.7 µs, by awk over the fixture) within the
    // histogram's 0.1% of pgbench's own average, 4.372 ms.
    assert!((lat.mean_us - 4354.7).abs() < 5.0, "mean {}", lat.mean_us);
    assert!((lat.mean_us / 1000.0 - summary.latency_avg_ms).abs() < 0.05);
    assert!(lat.min_us <= lat.p50_us && lat.p50_us <= lat.p99_us);
    assert!(lat.p99_us <= lat.p999_us && lat.p999_us <= lat.max_us);
    // 2 s of transactions, ended within about that.
    let (first, last) = log.span_us.unwrap();
    assert!(
        last - first > 1_500_000 && last - first < 2_500_000,
        "{first} {last}"
    );
}

#[test]
fn skipped_and_failed_transactions_are_counted_apart_from_latencies() {
    let text = "0 1 1500 0 1795819221 100000\n\
                0 2 skipped 0 1795819221 200000 12\n\
                1 1 failed 0 1795819222 5\n\
                1 2 serialization 0 1795819222 10 0 2\n\
                \n\
                1 3 2500 0 1795819222 900000 0 1\n";
    let log = TransactionLog::parse(text).unwrap();
    assert_eq!(log.summary().count, 2);
    assert_eq!(log.skipped, 1);
    assert_eq!(log.failed, 2);
    assert!((log.summary().mean_us - 2000.0).abs() < 2.0);
    assert_eq!(
        log.span_us,
        Some((1_795_819_221_100_000, 1_795_819_222_900_000))
    );
}

#[test]
fn a_line_that_is_not_a_transaction_is_an_error_naming_it() {
    let err = TransactionLog::parse("0 1 1500 0 1795819221 100000\n0 2 soon 0 1 2\n").unwrap_err();
    assert!(
        matches!(&err, PgbenchError::LogLine { line: 2, text, .. } if text == "0 2 soon 0 1 2"),
        "{err}"
    );
    assert!(err.to_string().contains("line 2"), "{err}");
    let err = TransactionLog::parse("0 1 1500\n").unwrap_err();
    assert!(err.to_string().contains("6 to 8 fields"), "{err}");
    let err = TransactionLog::parse("0 1 1500 0 1795819221 1000000\n").unwrap_err();
    assert!(err.to_string().contains("time_us"), "{err}");
    assert_eq!(
        Summary::parse("pgbench (15)\ntps = 1.0 (without initial connection time)\n"),
        Err(PgbenchError::SummaryMissing(
            "number of transactions actually processed"
        ))
    );
}

#[test]
fn a_window_keeps_only_the_transactions_that_ended_within_it() {
    let text = fixture("tpcb-log.0") + &fixture("tpcb-log.1");
    // The run's second second: 492 of its 916 transactions ended in it
    // (counted by awk over the fixture's time_epoch and time_us).
    let from = 1_795_819_222_000_000;
    let log = TransactionLog::parse_between(&text, from, from + 999_999).unwrap();
    assert_eq!(log.summary().count, 492);
    let (first, last) = log.span_us.unwrap();
    assert!(first >= from && last < from + 1_000_000, "{first} {last}");
    let none = TransactionLog::parse_between(&text, 0, 1).unwrap();
    assert_eq!((none.summary().count, none.span_us), (0, None));
}
