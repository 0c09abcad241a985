//! An application run's result as the report reads it: pgbench's log and
//! fio's mail database JSON (real runs, tests/fixtures) and a block trace
//! made by hand, into `isoe bench`-shaped fields.

use isoe_lab::application::{
    Application, ApplicationRun, BlockTrace, Figures, Filesystem, HostSeconds, Mail, Oltp, OltpMix,
    PartsMeasured,
};
use isoe_lab::mail::MailResult;
use isoe_lab::peers::fio::FioOutput;
use isoe_lab::pgbench::TransactionLog;
use isoe_lab::sampled::Sample;
use std::time::{Duration, Instant};

fn fixture(path: &str) -> String {
    let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Two reads of 8 KiB (100 and 300 µs) and one write of 16 KiB (1 ms),
/// within a 2 s window, in blkparse's format.
const TRACE: &str = "\
D R 100 16 0.500000000
C R 100 16 0.500100000
D R 200 16 0.600000000
C R 200 16 0.600300000
D W 300 32 0.700000000
C W 300 32 0.701000000
";

/// The initiator host's counters 2 s apart: 1.5 of 4 CPU-seconds busy
/// (37.5%, at 100 ticks a second).
fn samples() -> (Sample, Sample) {
    let stat = |busy: u64, idle: u64| {
        format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n")
    };
    let process = "1 (postgres) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0";
    let snmp = "Tcp: OutSegs RetransSegs\nTcp: 0 0\n";
    let netstat = "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n";
    let t0 = Instant::now();
    let first = Sample::parse(&stat(0, 0), process, None, snmp, netstat, t0).unwrap();
    let last = Sample::parse(
        &stat(150, 250),
        process,
        None,
        snmp,
        netstat,
        t0 + Duration::from_secs(2),
    )
    .unwrap();
    (first, last)
}

const PARTS: [PartsMeasured; 2] = [
    PartsMeasured {
        network_us: Some(50.0),
        stages_us: Some([5.0, 10.0, 20.0]),
    },
    PartsMeasured {
        network_us: Some(60.0),
        stages_us: None,
    },
];

#[test]
fn an_oltp_run_gives_transactions_block_io_and_its_parts() {
    let app = Application::Oltp(Oltp {
        mix: OltpMix::TpcbLike,
        scale: 10,
        clients: 2,
        memory_bytes: 128 << 20,
    });
    let log =
        TransactionLog::parse(&(fixture("pgbench/tpcb-log.0") + &fixture("pgbench/tpcb-log.1")))
            .unwrap();
    let figures = Figures::Oltp { tps: 458.0, log };
    let trace = BlockTrace::parse(TRACE, 0.0, 2.0);
    let run = ApplicationRun::new(
        &app,
        Filesystem::Ext4,
        "kernel",
        &figures,
        &trace,
        2.0,
        PARTS,
    );
    let (first, last) = samples();
    let bench = run.clone().result(&first, &last, None, 0.0, None).to_json();
    let a = &bench["application"];
    assert_eq!(a["kind"], "oltp");
    assert_eq!(a["mix"], "tpcb-like");
    assert_eq!(a["transactions"], 916);
    assert_eq!(bench["tps"], 458.0);
    // pgbench's log: 4,354.7 µs mean (awk over the fixture).
    let mean_ms = a["latency_ms"]["mean"].as_f64().unwrap();
    assert!((mean_ms - 4.3547).abs() < 0.005, "{mean_ms}");
    assert!(a["latency_ms"]["p99"].as_f64().unwrap() >= mean_ms);
    // The block layer: 3 I/Os in 2 s, 32 KiB.
    assert_eq!(bench["iops"], 1.5);
    assert_eq!(bench["read"]["ios"], 2);
    assert_eq!(bench["mb_per_s"], 32768.0 / 2.0 / 1e6);
    assert_eq!(
        bench["read"]["lat_us"]["mean"].as_f64().unwrap().round(),
        200.0
    );
    let hist = bench["lat_hist"]["read"].as_array().unwrap();
    let counted: u64 = hist.iter().map(|b| b[1].as_u64().unwrap()).sum();
    assert_eq!(counted, 2);
    // The parts: the read's stages, the write's without the target's.
    let read = &bench["breakdown"]["read"];
    assert_eq!(read["initiator_us"].as_f64().unwrap().round(), 200.0);
    assert_eq!(read["network_us"], 50.0);
    assert_eq!(read["store_us"], 10.0);
    let write = &bench["breakdown"]["write"];
    assert_eq!(write["network_us"], 60.0);
    assert!(write["receipt_to_store_us"].is_null());
    // Host CPU: 1.5 CPU-s busy over a 2 s window at 458 TPS.
    assert_eq!(bench["cpu_window_s"], 2.0);
    assert_eq!(bench["cpu"]["busy_pct"], 37.5);
    assert_eq!(bench["application"]["processor_time_pct"], 37.5);
    let per_tx = bench["application"]["cpu_us_per_transaction"]
        .as_f64()
        .unwrap();
    assert!((per_tx - 1.5 / 2.0 / 458.0 * 1e6).abs() < 1e-6, "{per_tx}");
    // The least latency, seed 003's SQL Server figure.
    let min_ms = a["latency_ms"]["min"].as_f64().unwrap();
    assert!(min_ms > 0.0 && min_ms <= a["latency_ms"]["p50"].as_f64().unwrap());
    // What the block trace does not say is not made up.
    for absent in ["ios", "bytes", "verify_errors", "series", "per_url"] {
        assert!(bench.get(absent).is_none(), "{absent}");
    }
    for absent in ["processor_time_min_pct", "memory_used_max_mib"] {
        assert!(a.get(absent).is_none(), "{absent}");
    }
    // blktrace's half CPU-second out of the host's 1.5, and the host
    // second by second beside it.
    let seconds = HostSeconds {
        seconds: 2,
        processor_time_min_pct: 20.0,
        processor_time_max_pct: 30.0,
        memory_used_max_mib: Some(512.0),
        initiator_rss_max_mib: None,
    };
    let bench = run
        .result(&first, &last, None, 0.5, Some(seconds))
        .to_json();
    let a = &bench["application"];
    assert_eq!(a["processor_time_pct"], 25.0);
    assert_eq!(bench["cpu"]["busy_pct"], 37.5);
    assert_eq!(bench["tools_cpu_s"], 0.5);
    let per_tx = a["cpu_us_per_transaction"].as_f64().unwrap();
    assert!((per_tx - 1.0 / 2.0 / 458.0 * 1e6).abs() < 1e-6, "{per_tx}");
    assert_eq!(
        (
            a["processor_time_min_pct"].as_f64(),
            a["processor_time_max_pct"].as_f64()
        ),
        (Some(20.0), Some(30.0))
    );
    assert_eq!(a["memory_used_max_mib"], 512.0);
    assert!(a["initiator_rss_max_mib"].is_null());
}

#[test]
fn a_mail_run_reports_as_jetstress_does() {
    let app = Application::Mail(Mail {
        database_bytes: 64 << 20,
        log_bytes: 16 << 20,
        threads: 8,
    });
    let fio: FioOutput = serde_json::from_str(&fixture("fio/mail-json-plus.json")).unwrap();
    let figures = Figures::Mail(MailResult::from_fio(&fio).unwrap());
    let trace = BlockTrace::parse(TRACE, 0.0, 2.0);
    let run = ApplicationRun::new(
        &app,
        Filesystem::Xfs,
        "isoe-ublk",
        &figures,
        &trace,
        2.0,
        PARTS,
    );
    let (first, last) = samples();
    let bench = run.result(&first, &last, None, 0.0, None).to_json();
    let a = &bench["application"];
    assert_eq!(
        (a["kind"].as_str(), a["filesystem"].as_str()),
        (Some("mail"), Some("xfs"))
    );
    // fio's database job: 22,463.3 reads/s and 14,986.0 writes/s.
    let t = a["transactional_iops"].as_f64().unwrap();
    assert!((t - (22463.268366 + 14986.006997)).abs() < 1e-3, "{t}");
    assert_eq!(
        bench["iops"].as_f64().unwrap(),
        t,
        "the mail workload's metric"
    );
    assert!((a["db_read_avg_ms"].as_f64().unwrap() - 0.202863).abs() < 1e-5);
    assert!((a["log_write_avg_ms"].as_f64().unwrap() - 0.401782).abs() < 1e-5);
    assert!(bench["tps"].is_null() && bench.get("tps").is_some());
    assert_eq!(bench["block_iops"], 1.5);
    assert_eq!(bench["initiator"], "isoe-ublk");
    assert_eq!(a["processor_time_pct"], 37.5);
    assert!(a.get("cpu_us_per_transaction").is_none(), "OLTP's alone");
}
