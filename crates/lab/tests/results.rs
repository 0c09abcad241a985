//! What a run's record keeps of its result (`results.jsonl`'s `bench`): an
//! `isoe bench` line byte for byte, and a fio run's figures with nothing
//! made up for what fio does not measure.

use isoe_bench::BenchOutput;
use isoe_lab::peers::fio::{self, FioEngine, FioJob, FioOutput};
use isoe_lab::record::RunResult;
use isoe_lab::sampled::Sample;
use isoe_report::record::RunRecord;
use std::time::{Duration, Instant};

fn fixture(path: &str) -> String {
    let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn an_isoe_bench_line_is_kept_as_bench_printed_it_its_series_apart() {
    // A record an `isoe lab` run wrote (docs/results, 2026-11-28), and the
    // line `isoe bench --json` printed for it: its `bench` with its
    // `series` back in.
    let line = fixture("results/isoe-bench-run.jsonl");
    let record: RunRecord = serde_json::from_str(line.trim()).unwrap();
    let mut printed = record.bench.clone();
    printed["series"] = serde_json::to_value(&record.series).unwrap();
    let output: BenchOutput = serde_json::from_value(printed).unwrap();
    let mut result = RunResult::of_bench(output);
    let series = result.bench.series.take().unwrap_or_default();
    assert_eq!(series, record.series);
    assert_eq!(
        serde_json::to_string(&result.to_json()).unwrap(),
        serde_json::to_string(&record.bench).unwrap()
    );
}

/// fio's and the target's counters 4 s apart.
fn samples() -> (Sample, Sample) {
    let stat = "cpu  100 0 100 800 0 5 7 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n";
    let later = "cpu  400 0 400 1200 3 9 20 2 0 0\ncpu0 200 0 200 600 0 0 0 0 0 0\n";
    let process =
        |ticks: u64| format!("1 (fio) S 0 0 0 0 0 0 0 0 0 0 {ticks} {ticks} 0 0 20 0 1 0 0 0 0");
    let snmp = |out: u64, retrans: u64| format!("Tcp: OutSegs RetransSegs\nTcp: {out} {retrans}\n");
    let netstat = |dsack: u64| format!("TcpExt: TCPDSACKRecvSegs\nTcpExt: {dsack}\n");
    let t0 = Instant::now();
    let first = Sample::parse(
        stat,
        &process(0),
        Some(&process(0)),
        &snmp(1000, 0),
        &netstat(0),
        t0,
    )
    .unwrap();
    let last = Sample::parse(
        later,
        &process(100),
        Some(&process(50)),
        &snmp(51_000, 7),
        &netstat(3),
        t0 + Duration::from_secs(4),
    )
    .unwrap();
    (first, last)
}

#[test]
fn a_fio_run_has_bench_s_fields_that_fio_measures_and_no_others() {
    // A real fio 3.33 json+ output: its first job (the mail database's
    // random reads and writes) read as one group.
    let output: FioOutput = serde_json::from_str(&fixture("fio/mail-json-plus.json")).unwrap();
    let job = FioJob {
        engine: FioEngine::Libiscsi,
        urls: vec!["iscsi://10.99.1.2:3260/iqn.2026-11.io.isoe:lab/0".into()],
        block_size_bytes: 8192,
        read_pct: 60,
        random_pct: 100,
        queue_depth: 8,
        workers: 2,
        duration_s: 5.0,
        ramp_s: 1.0,
        size_bytes: fio::FIO_SPAN_BYTES,
    };
    let (first, last) = samples();
    let bench = fio::result(&output, &job, &first, &last, Some(7)).to_json();
    let keys: Vec<&str> = bench
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "cpu",
            "cpu_window_s",
            "dsack_segs",
            "elapsed_s",
            "errors",
            "foreign",
            "initiator",
            "initiator_cpu_pct",
            "initiator_cpu_s",
            "initiator_cpu_us_per_io",
            "initiator_cpu_us_per_kib",
            "initiator_iops_per_cpu_pct",
            "initiator_mb_per_s_per_cpu_pct",
            "iops",
            "iops_per_cpu_pct",
            "lat_us",
            "mb_per_s",
            "mb_per_s_per_cpu_pct",
            "out_segs",
            "read",
            "retrans_pct",
            "retrans_segs",
            "steal_pct",
            "stopped",
            "system_cpu_us_per_io",
            "system_cpu_us_per_kib",
            "target_cpu_pct",
            "target_cpu_s",
            "target_cpu_us_per_io",
            "target_cpu_us_per_kib",
            "target_mb_per_s_per_cpu_pct",
            "target_pid",
            "workload",
            "write",
        ]
    );
    // Not measured: null (unknown), never 0.
    for unknown in [
        "foreign",
        "initiator_cpu_us_per_kib",
        "initiator_iops_per_cpu_pct",
        "stopped",
        "system_cpu_us_per_kib",
        "target_cpu_us_per_kib",
    ] {
        assert!(bench[unknown].is_null(), "{unknown}");
    }
    // fio's own figures, in bench's units.
    assert_eq!(bench["initiator"], "libiscsi (fio)");
    assert_eq!(bench["iops"], 22463.268366 + 14986.006997);
    assert_eq!(bench["read"]["ios"], 44949);
    assert_eq!(bench["read"]["lat_us"]["p50"], 185.344);
    assert_eq!(
        bench["lat_us"], bench["read"]["lat_us"],
        "the busier direction's"
    );
    assert_eq!(bench["elapsed_s"], 5.0);
    assert_eq!(bench["errors"], 0);
    assert_eq!(bench["workload"]["workers"], 2);
    assert_eq!(
        bench["workload"]["urls"][0],
        "iscsi://10.99.1.2:3260/iqn.2026-11.io.isoe:lab/0"
    );
    // The lab's samples: 2 CPU-s of fio's in 4 s, 1 of the target's.
    assert_eq!(
        (
            bench["cpu_window_s"].as_f64(),
            bench["initiator_cpu_s"].as_f64()
        ),
        (Some(4.0), Some(2.0))
    );
    assert_eq!(bench["target_cpu_s"], 1.0);
    assert_eq!(
        (bench["out_segs"].as_u64(), bench["retrans_segs"].as_u64()),
        (Some(50_000), Some(7))
    );
}
