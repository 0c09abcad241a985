//! The record's copies of what `isoe bench` measures read and write the
//! same JSON as bench's own types, byte for byte, and say the same words:
//! `results.jsonl` written through either is one file.

use isoe_report::record::{ForeignLoad, SeriesPoint};

fn bench_foreign() -> isoe_bench::foreign::ForeignLoad {
    isoe_bench::foreign::ForeignLoad {
        cpu_pct: 23.125,
        kernel_threads_pct: 1.5,
        interrupts_pct: 60.73059360730593,
        ours_pct: 189.04109589041096,
        top: vec![
            ("stress-ng-cpu".into(), 22.0),
            ("memfd:sealed-91".into(), 0.25),
        ],
    }
}

fn bench_point() -> isoe_bench::SeriesPoint {
    isoe_bench::SeriesPoint {
        t_s: 4.0,
        span_s: 1.25,
        ios: 322_061,
        iops: 257_648.8,
        mb_per_s: 1_055.3,
        read_iops: 200_000.5,
        read_mb_per_s: 819.2,
        write_iops: 57_648.3,
        write_mb_per_s: 236.1,
        errors: 2,
        lat_us: isoe_bench::LatencySummary {
            count: 322_059,
            min_us: 50.912,
            mean_us: 198.717,
            p50_us: 172.671,
            p90_us: 304.895,
            p99_us: 418.047,
            p999_us: 624.127,
            max_us: 2_983.935,
        },
    }
}

#[test]
fn foreign_load_is_the_same_json_and_words() {
    let bench = bench_foreign();
    let json = serde_json::to_string(&bench).unwrap();
    let ours: ForeignLoad = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&ours).unwrap(), json);
    assert_eq!(ours.describe(), bench.describe());
    let quiet = ForeignLoad {
        top: Vec::new(),
        ..ours
    };
    let bench_quiet = isoe_bench::foreign::ForeignLoad {
        top: Vec::new(),
        ..bench
    };
    assert_eq!(quiet.describe(), bench_quiet.describe());
}

#[test]
fn series_points_are_the_same_json() {
    let json = serde_json::to_string(&bench_point()).unwrap();
    let ours: SeriesPoint = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&ours).unwrap(), json);
    // A field missing from bench's JSON reads as 0 in both.
    let sparse = r#"{"t_s":1.0,"iops":5.0}"#;
    let ours: SeriesPoint = serde_json::from_str(sparse).unwrap();
    let theirs: isoe_bench::SeriesPoint = serde_json::from_str(sparse).unwrap();
    assert_eq!(
        serde_json::to_string(&ours).unwrap(),
        serde_json::to_string(&theirs).unwrap()
    );
}

#[test]
fn the_foreign_load_limit_is_bench_s() {
    assert_eq!(
        isoe_report::stats::FOREIGN_MAX_PCT,
        isoe_bench::foreign::FOREIGN_MAX_PCT
    );
}
