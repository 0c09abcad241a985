//! Writes a sample `report.md` and `report.html` from made-up but plausible
//! runs, so the report can be looked at (and its charts checked in a
//! browser) without running a plan:
//!
//! ```text
//! cargo run -p isoe-report --example sample_report -- OUTDIR
//! ```
//!
//! The numbers are synthetic (a fixed pseudo-random sequence around
//! hand-picked means); every kind of note the report can make appears once:
//! a cell that does not converge, runs repeated for steal, an invalid run, a
//! skipped knob, runs without latency histograms or a per-second series, a
//! run that stalls for a second, an unknown target CPU.

use isoe_report::record::{LatencySummary, Metric, RunRecord, SeriesPoint};
use isoe_report::stats::Rules;
use isoe_report::{write_reports, CaseInfo, Environment, ReportInput, WorkloadInfo};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A fixed pseudo-random sequence (xorshift), so the sample never changes.
struct Noise(u64);

impl Noise {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// One workload's shape: block size, read share, and the baseline's figures.
struct Shape {
    name: &'static str,
    block_kib: f64,
    read_pct: f64,
    metric: Metric,
    iops: f64,
    lat_us: f64,
}

/// One case's effect: factors on IOPS, CPU per I/O, retransmissions.
struct Effect {
    iops: f64,
    cpu: f64,
    retrans_pct: f64,
    spread: f64,
}

/// A case of the sample: name, knobs changed, description, effect per workload.
type SampleCase = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
    [Effect; 3],
);

fn lat_hist(median_us: f64, ios: f64) -> Value {
    // A log-normal-ish bump around the median, in log2 buckets.
    let centre = median_us.log2();
    let mut buckets = Vec::new();
    for k in 0..20 {
        let upper = 2f64.powi(k);
        let d = (upper.log2() - 0.5 - centre).abs();
        let share = (-d * d / 1.2).exp();
        let count = (ios * share / 2.1).round();
        if count >= 1.0 {
            buckets.push(json!([upper, count as u64]));
        }
    }
    Value::Array(buckets)
}

fn bench(
    shape: &Shape,
    effect: &Effect,
    noise: &mut Noise,
    with_hist: bool,
    target_cpu: bool,
) -> Value {
    let elapsed_s = 10.0;
    let iops = shape.iops * effect.iops * (1.0 + effect.spread * noise.next());
    let ios = iops * elapsed_s;
    let mb_per_s = iops * shape.block_kib * 1024.0 / 1e6;
    let read_share = shape.read_pct / 100.0;
    let ini_us = 9.5 * shape.block_kib.sqrt() / 2.8 * effect.cpu * (1.0 + 0.02 * noise.next());
    let tgt_us = 14.0 * shape.block_kib.sqrt() / 2.8 * effect.cpu * (1.0 + 0.02 * noise.next());
    let sys_us = (ini_us + tgt_us) * 1.35;
    let ncpus = 2.0;
    let cpu_pct = |us: f64| (us * iops / 1e6 / ncpus * 100.0).min(100.0);
    let busy = cpu_pct(sys_us);
    let lat = shape.lat_us / effect.iops;
    let out_segs = ios * (shape.block_kib / 8.0).max(1.0) * 1.4;
    let retrans_segs = (out_segs * effect.retrans_pct / 100.0).round();
    let lat_obj = |m: f64| json!({"count": ios, "min": m * 0.3, "mean": m * 1.08, "p50": m, "p90": m * 1.3, "p99": m * 2.1, "p999": m * 5.0, "max": m * 40.0});
    let dir = |share: f64, m: f64| json!({"ios": ios * share, "bytes": ios * share * shape.block_kib * 1024.0, "iops": iops * share, "mb_per_s": mb_per_s * share, "lat_us": lat_obj(m)});
    let mut v = json!({
        "iops": iops, "mb_per_s": mb_per_s, "ios": ios, "bytes": ios * shape.block_kib * 1024.0,
        "lat_us": lat_obj(lat),
        "read": dir(read_share, lat * 0.95),
        "write": dir(1.0 - read_share, lat * 1.1),
        "initiator_cpu_pct": cpu_pct(ini_us), "initiator_cpu_us_per_io": ini_us,
        "initiator_cpu_us_per_kib": ini_us / shape.block_kib,
        "initiator_mb_per_s_per_cpu_pct": mb_per_s / cpu_pct(ini_us),
        "initiator_iops_per_cpu_pct": iops / cpu_pct(ini_us),
        "target_pid": 4242,
        "target_cpu_pct": cpu_pct(tgt_us), "target_cpu_us_per_io": tgt_us,
        "target_cpu_us_per_kib": tgt_us / shape.block_kib,
        "target_mb_per_s_per_cpu_pct": mb_per_s / cpu_pct(tgt_us),
        "system_cpu_us_per_io": sys_us, "system_cpu_us_per_kib": sys_us / shape.block_kib,
        "cpu": {"busy_pct": busy, "idle_pct": 100.0 - busy, "steal_pct": 0.2},
        "steal_pct": 0.2,
        "mb_per_s_per_cpu_pct": mb_per_s / busy, "iops_per_cpu_pct": iops / busy,
        "out_segs": out_segs, "retrans_segs": retrans_segs,
        "retrans_pct": 100.0 * retrans_segs / out_segs, "dsack_segs": (retrans_segs * 0.8).round(),
        "elapsed_s": elapsed_s, "errors": 0, "verify_errors": 0,
        "host": {"kernel_release": "6.18.44", "ncpus": 2},
    });
    if with_hist {
        v["lat_hist"] = json!({
            "read": if read_share > 0.0 { lat_hist(lat * 0.95, ios * read_share) } else { json!([]) },
            "write": if read_share < 1.0 { lat_hist(lat * 1.1, ios * (1.0 - read_share)) } else { json!([]) },
        });
    }
    if !target_cpu {
        for k in [
            "target_pid",
            "target_cpu_pct",
            "target_cpu_us_per_io",
            "target_cpu_us_per_kib",
            "target_mb_per_s_per_cpu_pct",
        ] {
            v[k] = Value::Null;
        }
    }
    v
}

/// Ten seconds around the run's IOPS and MB/s (a noise of its own, so that
/// the other figures stay as they were); `stall` seconds at a third.
fn series(bench: &Value, noise: &mut Noise, stall: Option<usize>) -> Vec<SeriesPoint> {
    let (iops, mb) = (
        bench["iops"].as_f64().unwrap_or(0.0),
        bench["mb_per_s"].as_f64().unwrap_or(0.0),
    );
    let p99 = bench["lat_us"]["p99"].as_f64().unwrap_or(0.0);
    (0..10)
        .map(|i| {
            let f = if stall == Some(i) {
                0.33
            } else {
                1.0 + 0.015 * noise.next()
            };
            SeriesPoint {
                t_s: i as f64,
                span_s: 1.0,
                ios: (iops * f).round() as u64,
                iops: iops * f,
                mb_per_s: mb * f,
                lat_us: LatencySummary {
                    count: (iops * f).round() as u64,
                    p99_us: if stall == Some(i) { p99 * 8.0 } else { p99 },
                    ..Default::default()
                },
                ..Default::default()
            }
        })
        .collect()
}

fn main() {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .map_or_else(|| "sample-report".into(), PathBuf::from);
    std::fs::create_dir_all(&out).expect("create the output directory");
    let shapes = [
        Shape {
            name: "oltp-8k",
            block_kib: 8.0,
            read_pct: 67.0,
            metric: Metric::Iops,
            iops: 36_500.0,
            lat_us: 128.0,
        },
        Shape {
            name: "seq-read-256k",
            block_kib: 256.0,
            read_pct: 100.0,
            metric: Metric::MbPerS,
            iops: 12_400.0,
            lat_us: 400.0,
        },
        Shape {
            name: "seq-write-256k",
            block_kib: 256.0,
            read_pct: 0.0,
            metric: Metric::MbPerS,
            iops: 6_100.0,
            lat_us: 820.0,
        },
    ];
    // (case, knobs, description, effect per workload)
    let cases: Vec<SampleCase> = vec![
        (
            "baseline",
            vec![],
            "MTU 1500, offloads on, no digests",
            [
                Effect {
                    iops: 1.0,
                    cpu: 1.0,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 1.0,
                    retrans_pct: 0.007,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 1.0,
                    retrans_pct: 0.01,
                    spread: 0.006,
                },
            ],
        ),
        (
            "jumbo",
            vec![("mtu", "9000")],
            "jumbo frames on every link",
            [
                Effect {
                    iops: 1.02,
                    cpu: 0.97,
                    retrans_pct: 0.003,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.31,
                    cpu: 0.71,
                    retrans_pct: 0.002,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.18,
                    cpu: 0.8,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
            ],
        ),
        (
            "no-tso",
            vec![("initiator.tso", "off"), ("target.tso", "off")],
            "TCP segmentation offload off on both sides",
            [
                Effect {
                    iops: 0.99,
                    cpu: 1.03,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 0.78,
                    cpu: 1.4,
                    retrans_pct: 0.02,
                    spread: 0.12,
                },
                Effect {
                    iops: 0.86,
                    cpu: 1.25,
                    retrans_pct: 0.03,
                    spread: 0.006,
                },
            ],
        ),
        (
            "digests",
            vec![("HeaderDigest", "CRC32C"), ("DataDigest", "CRC32C")],
            "header and data digests",
            [
                Effect {
                    iops: 0.97,
                    cpu: 1.04,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 0.93,
                    cpu: 1.12,
                    retrans_pct: 0.006,
                    spread: 0.006,
                },
                Effect {
                    iops: 0.96,
                    cpu: 1.1,
                    retrans_pct: 0.01,
                    spread: 0.006,
                },
            ],
        ),
        (
            "jumbo-no-tso",
            vec![
                ("mtu", "9000"),
                ("initiator.tso", "off"),
                ("target.tso", "off"),
            ],
            "TSO off at MTU 9000, against jumbo frames with TSO on",
            [
                Effect {
                    iops: 1.01,
                    cpu: 1.0,
                    retrans_pct: 0.003,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.22,
                    cpu: 0.85,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.145,
                    cpu: 0.88,
                    retrans_pct: 0.005,
                    spread: 0.006,
                },
            ],
        ),
        (
            "batching",
            vec![("isoe.batch", "on")],
            "isoe's datapath batches PDUs per send",
            [
                Effect {
                    iops: 1.01,
                    cpu: 0.9,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 0.92,
                    retrans_pct: 0.007,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 0.91,
                    retrans_pct: 0.01,
                    spread: 0.006,
                },
            ],
        ),
        (
            "busy-poll",
            vec![("busy_poll_us", "50")],
            "SO_BUSY_POLL on the initiator's sockets (skipped: no root)",
            [
                Effect {
                    iops: 1.06,
                    cpu: 1.0,
                    retrans_pct: 0.004,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 1.0,
                    retrans_pct: 0.007,
                    spread: 0.006,
                },
                Effect {
                    iops: 1.0,
                    cpu: 1.0,
                    retrans_pct: 0.01,
                    spread: 0.006,
                },
            ],
        ),
    ];
    let rules = Rules::default();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut seconds = Noise(0x2545_f491_4f6c_dd1d);
    let mut records = Vec::new();
    for (ci, (case, knobs, _, effects)) in cases.iter().enumerate() {
        for (shape, effect) in shapes.iter().zip(effects) {
            let mut values = Vec::new();
            let mut run = 0;
            while rules.next(&values) == isoe_report::stats::Next::RunAgain {
                run += 1;
                // One run in the sample is taken under steal and repeated.
                let stolen = ci == 3 && shape.name == "oltp-8k" && run == 2;
                let bench = bench(
                    shape,
                    effect,
                    &mut noise,
                    *case != "digests",
                    *case != "busy-poll",
                );
                let value = bench[shape.metric.field()].as_f64().unwrap_or(0.0);
                let steal_pct = if stolen { 9.3 } else { 0.2 };
                let valid = !stolen;
                if valid {
                    values.push(value);
                }
                let mut all_knobs: BTreeMap<String, String> = [
                    ("mtu", "1500"),
                    ("initiator.tso", "on"),
                    ("target.tso", "on"),
                    ("HeaderDigest", "None"),
                    ("DataDigest", "None"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                all_knobs.extend(knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
                let skipped: BTreeMap<String, String> = if *case == "busy-poll" {
                    [(
                        "busy_poll_us".to_string(),
                        "needs CAP_NET_ADMIN; running unprivileged".to_string(),
                    )]
                    .into()
                } else {
                    BTreeMap::new()
                };
                records.push(RunRecord {
                    plan: "sample".into(),
                    case: case.to_string(),
                    workload: shape.name.into(),
                    run,
                    topology: "loopback".into(),
                    knobs: all_knobs,
                    skipped_knobs: skipped,
                    metric: shape.metric,
                    value,
                    steal_pct,
                    valid,
                    invalid_reason: (!valid)
                        .then(|| format!("steal {steal_pct}% above {}%", rules.steal_max_pct)),
                    round: run,
                    foreign: None,
                    // No TSO stalls a second of its sequential reads; the
                    // digests case ran with an isoe bench that kept none.
                    series: if *case == "digests" {
                        Vec::new()
                    } else {
                        let stall =
                            (*case == "no-tso" && shape.name == "seq-read-256k").then_some(6);
                        series(&bench, &mut seconds, stall)
                    },
                    bench,
                    started_at: format!("2026-11-21T08:{:02}:00Z", records.len() % 60),
                });
            }
        }
    }
    let plan_text = "name = \"sample\"\ndescription = \"A sample plan: jumbo frames, TSO off, digests, busy polling\"\n\
                     topology = \"loopback\"\n\n[baseline]\nmtu = 1500\n\n[[case]]\nname = \"jumbo\"\nmtu = 9000\n\n\
                     [[case]]\nname = \"no-tso\"\ninitiator.tso = false\ntarget.tso = false\n\n[[case]]\nname = \"digests\"\n\
                     HeaderDigest = \"CRC32C\"\nDataDigest = \"CRC32C\"\n\n[[case]]\nname = \"jumbo-no-tso\"\ncompare_to = \"jumbo\"\nmtu = 9000\ninitiator.tso = false\ntarget.tso = false\n\n[[case]]\nname = \"batching\"\nisoe.batch = true\n\n[[case]]\nname = \"busy-poll\"\nbusy_poll_us = 50\n\n\
                     workloads = [\"oltp-8k\", \"seq-read-256k\", \"seq-write-256k\"]\n";
    let input = ReportInput {
        plan_name: "sample".into(),
        plan_description: "A synthetic sample of the report: the baseline, then jumbo frames, TSO off, \
                           digests, batching and busy polling, each on seed 001's three workloads."
            .into(),
        plan_source: "examples/sample_report.rs (synthetic)".into(),
        question: Some(
            "Which of jumbo frames, TSO off, digests, batching and busy polling buys throughput \
             or saves CPU per I/O on seed 001's workloads?"
                .into(),
        ),
        seeds: vec!["001".into()],
        skipped_cases: Vec::new(),
        plan_text: plan_text.into(),
        rules,
        pin_cpus: false,
        topology: "loopback".into(),
        baseline_knobs: [("mtu", "1500"), ("initiator.tso", "on"), ("target.tso", "on"), ("HeaderDigest", "None"), ("DataDigest", "None")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        cases: cases
            .iter()
            .map(|(name, knobs, description, _)| CaseInfo {
                name: name.to_string(),
                description: description.to_string(),
                knobs_changed: knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                compare_to: (*name == "jumbo-no-tso").then(|| "jumbo".to_string()),
                workloads: Vec::new(),
                topology: String::new(),
            })
            .collect(),
        workloads: shapes
            .iter()
            .map(|s| WorkloadInfo {
                name: s.name.into(),
                metric: s.metric,
                large_block: s.block_kib >= 256.0,
                description: format!(
                    "{} KiB, {}% read, {}",
                    s.block_kib,
                    s.read_pct,
                    if s.metric == Metric::Iops { "random, QD 5" } else { "sequential, QD 8" }
                ),
            })
            .collect(),
        environment: Environment {
            kernel: "6.18.44-fc-v445".into(),
            cpu_model: "Intel(R) Xeon(R) Processor (sample)".into(),
            ncpus: 2,
            memory: "3.8 GiB".into(),
            isoe_version: "0.1.0 (sample)".into(),
            peer_versions: [("ethtool", "6.11"), ("iproute2", "6.12.0"), ("fio", "not installed")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            nic_features: "lo:\n  tcp-segmentation-offload: on\n  generic-segmentation-offload: on\n  \
                           generic-receive-offload: on\n  tx-checksumming: on\n  rx-checksumming: on [fixed]\n"
                .into(),
            started_at: "2026-11-21T08:00:00Z".into(),
            finished_at: "2026-11-21T08:24:10Z".into(),
            host: "sample-host".into(),
        },
        records,
        notes: vec!["This report is synthetic: made by examples/sample_report.rs, not measured.".into()],
    };
    let paths = write_reports(&input, &out).expect("write the reports");
    println!("{}\n{}", paths.markdown.display(), paths.html.display());
}
