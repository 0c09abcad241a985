use super::*;
use crate::knobs::InitiatorImpl;
use crate::link::{Offloads, Side};
use crate::rr::StreamKind;
use crate::stream::StreamDirection;

/// A small valid plan; bad plans below are this with one thing broken.
const GOOD: &str = r#"name = "t"
description = "test plan"
seeds = ["001"]
topology = "base"

[run]
duration_s = 5
ramp_s = 1.5

[stats]
min_runs = 2
max_runs = 4

[baseline]
mtu = 9000
tso = true
nodelay = false
workers = 2

[[workload]]
profile = "oltp-8k"

[[workload]]
name = "seq-read-qd8"
profile = "seq-read-256k"
qd = 8
bs = "128KiB"

[[workload]]
profile = "matrix-read-4k-w2-qd16"

[[case]]
name = "standard-frames"
description = "MTU 1500"
mtu = 1500
initiator_tso = false

[[case]]
name = "congested"
topology = "congested"
workloads = ["seq-read-qd8"]

[[case]]
name = "congested-libiscsi"
topology = "congested"
compare_to = "congested"
workloads = ["seq-read-qd8"]
initiator = "libiscsi"
rcvbuf = "64KiB"
header_digest = "CRC32C"
"#;

fn error_of(text: &str) -> String {
    match Plan::parse(text, "bad.toml") {
        Ok(plan) => panic!("accepted: {plan:?}"),
        Err(e) => e.to_string(),
    }
}

/// GOOD with the first occurrence of `from` replaced by `to`.
fn good_with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?} is not in GOOD");
    GOOD.replacen(from, to, 1)
}

#[test]
fn a_plan_s_span_is_a_size_of_at_least_a_mib() {
    let with = |span: &str| GOOD.replacen("[run]\n", &format!("[run]\nspan = {span}\n"), 1);
    let p = Plan::parse(&with("\"64MiB\""), "good.toml").unwrap();
    assert_eq!(p.run.span_bytes, 64 << 20);
    let e = Plan::parse(&with("\"4k\""), "good.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("good.toml:") && e.contains("span"), "{e}");
}

#[test]
fn a_plan_s_question_is_one_line_the_report_opens_with() {
    assert_eq!(Plan::parse(GOOD, "good.toml").unwrap().question, None);
    let asking = |q: &str| good_with("seeds = ", &format!("question = {q}\nseeds = "));
    let p = Plan::parse(&asking("\"  Do jumbo frames pay?  \""), "good.toml").unwrap();
    assert_eq!(p.question.as_deref(), Some("Do jumbo frames pay?"));
    for (q, expected) in [
        (
            "\"  \"".to_string(),
            "bad.toml:3: question: an empty question: ask what the plan answers, or leave the key out",
        ),
        (
            "\"Which?\\nAnd why?\"".to_string(),
            "bad.toml:3: question: a question is one line: the report opens with it as a sentence",
        ),
        (
            format!("\"{}?\"", "x".repeat(300)),
            "bad.toml:3: question: a question of 301 characters: at most 300, one sentence",
        ),
        (
            "42".to_string(),
            "bad.toml:3: question: expected a string, found an integer (42)",
        ),
    ] {
        assert_eq!(error_of(&asking(&q)), expected, "{q}");
    }
}

#[test]
fn a_plan_reads_into_its_parts() {
    let p = Plan::parse(GOOD, "good.toml").unwrap();
    assert_eq!(
        (p.name.as_str(), p.description.as_str(), p.source.as_str()),
        ("t", "test plan", "good.toml")
    );
    assert_eq!(p.seeds, ["001"]);
    assert_eq!(p.topology, TopologyKind::Base);
    assert_eq!(
        p.run,
        RunLength {
            duration_s: 5.0,
            ramp_s: 1.5,
            pin_cpus: false,
            span_bytes: DEFAULT_SPAN_BYTES,
        }
    );
    assert_eq!((p.rules.min_runs, p.rules.max_runs), (2, 4));
    assert_eq!(p.rules.rsd_target_pct, Rules::default().rsd_target_pct);
    assert_eq!(p.baseline.link.mtu, Some(9000));
    assert_eq!(p.baseline.link.initiator.tso, Some(true));
    assert_eq!(p.baseline.link.target.tso, Some(true));
    assert_eq!(p.baseline.nodelay, Some(false));
    let names: Vec<&str> = p.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["oltp-8k", "seq-read-qd8", "matrix-read-4k-w2-qd16"]);
    assert_eq!(p.workloads[0].metric, Metric::Iops);
    assert_eq!(p.workloads[1].metric, Metric::MbPerS);
    assert!(p.workloads[1].large_block());
    assert_eq!(p.workloads[2].metric, Metric::Iops);
    assert_eq!(
        p.workloads[1].overrides,
        WorkloadOverrides {
            qd: Some(8),
            bs: Some(131_072),
            ..WorkloadOverrides::default()
        }
    );
    assert_eq!(p.cases.len(), 3);
    let c = &p.cases[2];
    assert_eq!(c.compare_to.as_deref(), Some("congested"));
    assert_eq!(c.topology, Some(TopologyKind::Congested));
    assert_eq!(c.knobs.initiator, Some(InitiatorImpl::Libiscsi));
    assert_eq!(c.knobs.rcvbuf_bytes, Some(65_536));
    assert_eq!(c.knobs.header_digest, Some(true));
}

#[test]
fn every_initiator_is_read_by_its_name() {
    for initiator in InitiatorImpl::ALL {
        let to = format!("initiator = \"{}\"", initiator.as_str());
        let p = Plan::parse(&good_with("initiator = \"libiscsi\"", &to), "good.toml").unwrap();
        assert_eq!(p.cases[2].knobs.initiator, Some(initiator), "{to}");
        // The name results carry, and read back.
        let json = serde_json::to_string(&initiator).unwrap();
        assert_eq!(json, format!("\"{}\"", initiator.as_str()));
        assert_eq!(
            serde_json::from_str::<InitiatorImpl>(&json).unwrap(),
            initiator
        );
    }
    let ublk = Plan::parse(
        &good_with("initiator = \"libiscsi\"", "initiator = \"isoe-ublk\""),
        "good.toml",
    )
    .unwrap();
    let case = &ublk.resolved_cases()[3];
    assert_eq!(case.knobs.initiator_impl(), InitiatorImpl::IsoeUblk);
    assert_eq!(case.knobs.describe()["initiator"], "isoe-ublk");
}

#[test]
fn sizes_use_the_grammar_shared_with_bench_and_target() {
    // isoe-size's grammar: 4k = 4KiB = 4KB = 4096, any case.
    let p = Plan::parse(
        &good_with("bs = \"128KiB\"", "bs = \"4k\"").replacen(
            "rcvbuf = \"64KiB\"",
            "rcvbuf = \"1.5 mb\"",
            1,
        ),
        "good.toml",
    )
    .unwrap();
    assert_eq!(p.workloads[1].overrides.bs, Some(4096));
    assert_eq!(p.cases[2].knobs.rcvbuf_bytes, Some(1_572_864));
    for (bs, bytes) in [
        ("4KiB", 4096),
        ("4KB", 4096),
        ("1m", 1 << 20),
        ("512B", 512),
    ] {
        let text = good_with("bs = \"128KiB\"", &format!("bs = \"{bs}\""));
        let p = Plan::parse(&text, "good.toml").unwrap();
        assert_eq!(p.workloads[1].overrides.bs, Some(bytes), "{bs}");
    }
}

#[test]
fn cases_lay_their_knobs_over_the_baseline() {
    let p = Plan::parse(GOOD, "good.toml").unwrap();
    let cases = p.resolved_cases();
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "baseline",
            "standard-frames",
            "congested",
            "congested-libiscsi"
        ]
    );
    let base = &cases[0];
    assert_eq!(base.knobs, p.baseline);
    assert!(base.changes.is_empty());
    assert_eq!(base.compare_to, None);
    assert_eq!(base.workloads.len(), 3);

    let frames = &cases[1];
    assert_eq!(frames.topology, TopologyKind::Base);
    assert_eq!(frames.compare_to.as_deref(), Some("baseline"));
    assert_eq!(frames.knobs.link.mtu, Some(1500), "the case wins");
    assert_eq!(
        frames.knobs.link.initiator,
        Offloads {
            tso: Some(false),
            ..Offloads::default()
        },
        "one side changed"
    );
    assert_eq!(frames.knobs.link.target.tso, Some(true), "the other kept");
    assert_eq!(frames.knobs.nodelay, Some(false), "baseline kept");
    assert_eq!(frames.knobs.workers, Some(2));
    assert_eq!(
        frames.changes.describe().into_iter().collect::<Vec<_>>(),
        [
            ("initiator.tso".to_string(), "off".to_string()),
            ("mtu".to_string(), "1500".to_string())
        ]
    );

    let lib = &cases[3];
    assert_eq!(lib.topology, TopologyKind::Congested);
    assert_eq!(lib.workloads, ["seq-read-qd8"]);
    assert_eq!(lib.knobs.link.mtu, Some(9000));
    assert_eq!(
        lib.knobs.unsupported_here(),
        [
            (
                "nodelay".to_string(),
                "libiscsi always sets TCP_NODELAY on its socket".to_string()
            ),
            (
                "rcvbuf".to_string(),
                "libiscsi sets no SO_RCVBUF, SO_SNDBUF or SO_BUSY_POLL and fio has no option for them"
                    .to_string()
            ),
        ]
    );
    assert_eq!(Case::baseline(&p).name, "baseline");
}

#[test]
fn workloads_give_bench_their_shape() {
    let p = Plan::parse(GOOD, "good.toml").unwrap();
    let none = KnobSet::default();
    let two = KnobSet {
        workers: Some(2),
        ..KnobSet::default()
    };
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        p.workloads[0].bench_args(&none, &p.workloads[0].shape(&none, 2)),
        strings(&["--profile", "oltp-8k"])
    );
    assert_eq!(
        p.workloads[1].bench_args(&none, &p.workloads[1].shape(&none, 2)),
        strings(&["--profile", "seq-read-256k", "--bs", "131072", "--qd", "8"])
    );
    // A matrix cell is no profile: its whole shape is spelled out, and the
    // knob's --workers (from KnobSet::bench_args) replaces the cell's.
    assert_eq!(
        p.workloads[2].bench_args(&none, &p.workloads[2].shape(&none, 2)),
        strings(&[
            "--bs",
            "4096",
            "--read-pct",
            "100",
            "--random-pct",
            "100",
            "--qd",
            "16",
            "--workers",
            "2"
        ])
    );
    assert_eq!(
        p.workloads[2].bench_args(&two, &p.workloads[2].shape(&two, 2)),
        strings(&[
            "--bs",
            "4096",
            "--read-pct",
            "100",
            "--random-pct",
            "100",
            "--qd",
            "16"
        ])
    );
    let shape = p.workloads[1].shape(&two, 2);
    assert_eq!(
        shape,
        WorkloadShape {
            block_size_bytes: 131_072,
            read_pct: 100,
            random_pct: 0,
            queue_depth: 8,
            workers: 2
        }
    );
    assert_eq!(p.workloads[0].shape(&none, 2).workers, 1);
    assert!(p.workloads[2].is_matrix_cell() && !p.workloads[0].is_matrix_cell());
}

#[test]
fn estimates_count_cells_runs_and_overhead() {
    let p = Plan::parse(GOOD, "good.toml").unwrap();
    // baseline 3 + standard-frames 3 + congested 1 + congested-libiscsi 1.
    assert_eq!(p.cell_count(), 8);
    // Each run: 1.5 ramp + 5 measured + 2 overhead = 8.5 s; 2 to 4 runs.
    assert_eq!(p.estimated_duration_s(), (8.0 * 2.0 * 8.5, 8.0 * 4.0 * 8.5));
}

#[test]
fn every_shipped_plan_parses_and_fits_its_time() {
    let listed = Plan::list_embedded();
    assert_eq!(listed[0].0, DEFAULT_PLAN);
    assert_eq!(
        listed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        [
            "quick",
            "qsan-2012",
            "dell-2013",
            "openstack-offloads",
            "pt-2009",
            "demartek-2016",
            "software-vs-offload",
            "block-devices",
            "applications",
            "sessions-sweep",
            "peers"
        ]
    );
    for (name, description) in &listed {
        let plan = Plan::embedded(name).unwrap();
        assert_eq!(&plan.name, name);
        assert_eq!(plan.source, format!("embedded:{name}"));
        assert_eq!(&plan.description, description);
        assert!(!plan.seeds.is_empty(), "{name}");
        // The report opens with the answer to it.
        let question = plan.question.as_deref().unwrap_or_default();
        assert!(question.ends_with('?'), "{name}: question {question:?}");
        let (min_s, max_s) = plan.estimated_duration_s();
        let applications = plan.workloads.iter().any(|w| w.application.is_some());
        let limit_s = match (name.as_str(), applications) {
            ("quick", _) => 600.0,
            // Seed 002's iSCSI series and its own stream tests beside them.
            ("openstack-offloads", _) => 2400.0,
            // Applications run on a test bed, under emulation in CI's VM.
            (_, true) => 3600.0,
            _ => 1800.0,
        };
        assert!(max_s <= limit_s, "{name}: up to {max_s} s");
        // The description states the estimate this function computes.
        let stated = if min_s == max_s {
            format!("({max_s:.0} s)")
        } else {
            format!("({min_s:.0}-{max_s:.0} s)")
        };
        assert!(
            description.ends_with(&stated),
            "{name}: description should end with {stated}: {description}"
        );
        for case in plan.resolved_cases() {
            assert!(!case.workloads.is_empty(), "{name}/{}", case.name);
        }
    }
    assert!(Plan::embedded("nope").is_none());
}

#[test]
fn shipped_plans_say_what_their_seeds_did() {
    let quick = Plan::embedded("quick").unwrap();
    assert_eq!(quick.topology, TopologyKind::Loopback);
    assert_eq!(quick.workloads.len(), 2);
    let qd8 = quick.workloads[0].shape(&KnobSet::default(), 1);
    assert_eq!(
        (qd8.block_size_bytes, qd8.queue_depth, qd8.random_pct),
        (262_144, 8, 0)
    );
    let qd32 = quick.workloads[1].shape(&KnobSet::default(), 1);
    assert_eq!(
        (qd32.block_size_bytes, qd32.queue_depth, qd32.random_pct),
        (4096, 32, 100)
    );

    // Seed 002's order, cumulative, each step against the one before.
    let os = Plan::embedded("openstack-offloads").unwrap();
    let steps: Vec<(&str, Option<&str>)> = os.cases[..5]
        .iter()
        .map(|c| (c.name.as_str(), c.compare_to.as_deref()))
        .collect();
    assert_eq!(
        steps,
        [
            ("tso-off", None),
            ("tx-csum-off", Some("tso-off")),
            ("gso-off", Some("tx-csum-off")),
            ("gro-off", Some("gso-off")),
            ("rx-csum-off", Some("gro-off"))
        ]
    );
    let all_off = os.baseline.overlay(&os.cases[4].knobs).link.initiator;
    assert_eq!(
        all_off,
        Offloads {
            tso: Some(false),
            gso: Some(false),
            gro: Some(false),
            tx: Some(false),
            rx: Some(false),
            sg: None
        }
    );

    // Seed 002's stream tests, TCP both ways and UDP, in the MTU 1500
    // series only.
    let streams: Vec<(&str, StreamWorkload)> = os
        .workloads
        .iter()
        .filter_map(|w| Some((w.name.as_str(), w.stream?)))
        .collect();
    let tcp = |direction, msg| StreamWorkload {
        kind: StreamKind::Tcp,
        direction,
        msg,
    };
    assert_eq!(
        streams,
        [
            (
                "tcp-stream-tx",
                tcp(StreamDirection::InitiatorToTarget, Some(128 << 10))
            ),
            (
                "tcp-stream-rx",
                tcp(StreamDirection::TargetToInitiator, Some(128 << 10))
            ),
            (
                "udp-stream-tx",
                StreamWorkload {
                    kind: StreamKind::Udp,
                    direction: StreamDirection::InitiatorToTarget,
                    msg: Some(1472)
                }
            ),
        ]
    );
    for case in os.resolved_cases() {
        let runs_streams = case.workloads.iter().any(|w| w.contains("stream"));
        // The MTU 1500 series on the base SAN; the per-side cases run
        // only the iSCSI workload their side sends or receives.
        let mtu_1500 = case.knobs.link.mtu.is_none_or(|m| m == 1500)
            && case.topology == TopologyKind::Base
            && !case.name.contains("transmitter")
            && !case.name.contains("receiver");
        assert_eq!(runs_streams, mtu_1500, "{}", case.name);
    }

    // Seed 004: the twelve access specifications, exactly three runs each.
    let pt = Plan::embedded("pt-2009").unwrap();
    assert_eq!(pt.workloads.len(), 12);
    assert_eq!((pt.rules.min_runs, pt.rules.max_runs), (3, 3));

    // Seed 001: three workloads; the congested series runs seq read only.
    let dell = Plan::embedded("dell-2013").unwrap();
    let wl: Vec<&str> = dell.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(wl, ["oltp-8k", "seq-read-256k", "seq-write-256k"]);
    let congested: Vec<&Case> = dell
        .cases
        .iter()
        .filter(|c| c.topology == Some(TopologyKind::Congested))
        .collect();
    assert_eq!(congested.len(), 2);

    // Seeds 000/003/004 on a test bed: the kernel's software initiator is
    // the reference of every initiator, isoe's as a block device included.
    let svo = Plan::embedded("software-vs-offload").unwrap();
    assert_eq!(svo.topology, TopologyKind::Physical);
    let cases = svo.resolved_cases();
    assert_eq!(cases[0].knobs.initiator_impl(), InitiatorImpl::Kernel);
    for (name, initiator) in [
        ("isoe-ublk", InitiatorImpl::IsoeUblk),
        ("isoe-nbd", InitiatorImpl::IsoeNbd),
    ] {
        let case = cases.iter().find(|c| c.name == name).unwrap();
        assert_eq!(case.knobs.initiator_impl(), initiator);
        assert_eq!(case.compare_to.as_deref(), Some("baseline"));
        assert_eq!(case.workloads.len(), 6, "{:?}", case.workloads);
    }

    // Seed 003: matrix cells, and the applications for the initiators
    // that make a disk, compared with the kernel's.
    let dm = Plan::embedded("demartek-2016").unwrap();
    assert_eq!(dm.workloads.len(), 26);
    let (apps, matrix): (Vec<_>, Vec<_>) =
        dm.workloads.iter().partition(|w| w.application.is_some());
    assert_eq!(apps.len(), 2);
    assert!(matrix.iter().all(|w| w.is_matrix_cell()));
    let cases = dm.resolved_cases();
    assert_eq!(cases[0].workloads.len(), 24, "isoe bench runs the matrix");
    let ublk = cases
        .iter()
        .find(|c| c.name == "isoe-ublk-applications")
        .unwrap();
    assert_eq!(ublk.workloads, ["oltp-tpcb", "mail"]);
    assert_eq!(ublk.compare_to.as_deref(), Some("kernel-applications"));
}

#[test]
fn the_commented_example_parses() {
    let text = include_str!("../../plans/example.toml");
    let plan = Plan::parse(text, "example.toml").unwrap();
    assert_eq!(plan.name, "example");
    assert_eq!(plan.cases.len(), 5);
    assert_eq!(plan.baseline.sysctl["net.ipv4.tcp_timestamps"], "1");
    assert_eq!(plan.cases[2].knobs.link.nic.channels, Some(4));
    assert_eq!(plan.cases[2].knobs.sysctl["net.ipv4.tcp_timestamps"], "0");
    let (_, max_s) = plan.estimated_duration_s();
    assert!(max_s > 0.0);
}

#[test]
fn plans_load_from_files_and_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, GOOD).unwrap();
    let p = Plan::from_arg(path.to_str().unwrap()).unwrap();
    assert_eq!(p.source, path.display().to_string());
    assert_eq!(Plan::from_arg("quick").unwrap().source, "embedded:quick");
    let e = Plan::from_arg("no-such-plan").unwrap_err();
    assert_eq!(
        e.to_string(),
        "no plan \"no-such-plan\": not an embedded plan (quick, qsan-2012, dell-2013, openstack-offloads, pt-2009, demartek-2016, software-vs-offload, block-devices, applications, sessions-sweep, peers) nor a file"
    );
    // Errors in a file name that file.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, good_with("mtu = 1500", "mtu = 100000")).unwrap();
    let e = Plan::load(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:35: case[0].mtu: 100000 is out of range 68..=65535",
            bad.display()
        )
    );
    assert_eq!(e.line(), Some(35));
    let missing = Plan::load(&dir.path().join("absent.toml")).unwrap_err();
    assert!(missing.to_string().starts_with("cannot read "));
    assert_eq!(missing.line(), None);
}

#[test]
fn errors_name_file_line_and_key() {
    let cases: Vec<(String, &str)> = vec![
        // Unknown keys, with a hint for a typo.
        (
            good_with("topology = \"base\"", "topolgy = \"base\""),
            "bad.toml:4: topolgy: unknown key (did you mean `topology`?); expected one of: name, description, question, seeds, topology, run, stats, baseline, workload, case",
        ),
        (
            good_with("ramp_s = 1.5", "ramp = 1.5"),
            "bad.toml:8: run.ramp: unknown key (did you mean `ramp_s`?); expected one of: duration_s, ramp_s",
        ),
        (
            good_with("initiator_tso = false", "initator_tso = false"),
            "bad.toml:36: case[0].initator_tso: unknown key (did you mean `initiator_tso`?)",
        ),
        // Wrong types.
        (
            good_with("nodelay = false", "nodelay = \"no\""),
            "bad.toml:17: baseline.nodelay: expected true or false, found a string (\"no\")",
        ),
        (
            good_with("duration_s = 5", "duration_s = \"5s\""),
            "bad.toml:7: run.duration_s: expected a number, found a string (\"5s\")",
        ),
        (
            good_with("seeds = [\"001\"]", "seeds = \"001\""),
            "bad.toml:3: seeds: expected an array of strings, found a string (\"001\")",
        ),
        (
            good_with("name = \"t\"", "name = 1979-05-27"),
            "bad.toml:1: name: expected a string, found a date/time",
        ),
        (
            good_with(
                "topology = \"base\"\n\n[run]\nduration_s = 5\nramp_s = 1.5\n",
                "topology = \"base\"\nrun = 3\n",
            ),
            "bad.toml:5: run: expected a table, found an integer (3)",
        ),
        // Out of range.
        (
            good_with("mtu = 9000", "mtu = 67"),
            "bad.toml:15: baseline.mtu: 67 is out of range 68..=65535",
        ),
        (
            good_with("mtu = 1500", "rate_mbit = 0"),
            "bad.toml:35: case[0].rate_mbit: 0 is out of range 1..=1000000",
        ),
        (
            good_with("max_runs = 4", "max_runs = 4\nrsd_target_pct = 120"),
            "bad.toml:13: stats.rsd_target_pct: 120 is out of range 0..=100",
        ),
        (
            good_with("max_runs = 4", "max_runs = 1"),
            "bad.toml:12: stats.max_runs: max_runs 1 is below min_runs 2",
        ),
        (
            good_with("qd = 8", "read_pct = 101"),
            "bad.toml:26: workload[1].read_pct: 101 is out of range 0..=100",
        ),
        (
            good_with("rcvbuf = \"64KiB\"", "rcvbuf = \"64x\""),
            "bad.toml:49: case[2].rcvbuf: expected a size like 4k, 256KiB or 1MiB, found \"64x\"",
        ),
        (
            good_with("workers = 2", "connections = 9"),
            "bad.toml:18: baseline.connections: 9 is out of range 1..=8",
        ),
        (
            good_with("bs = \"128KiB\"", "bs = 1000"),
            "bad.toml:27: workload[1].bs: 1000 bytes is not a multiple of 512",
        ),
        // Unknown profile, with a hint.
        (
            good_with("profile = \"oltp-8k\"", "profile = \"oltp-8\""),
            "bad.toml:21: workload[0].profile: no profile or matrix cell named \"oltp-8\" (did you mean \"oltp-8k\"?); `isoe bench --list-profiles` lists the profiles, and matrix cells are named like \"matrix-read-4k-w2-qd16\"",
        ),
        // Names.
        (
            good_with("name = \"congested\"", "name = \"standard-frames\""),
            "bad.toml:39: case[1].name: duplicate case name \"standard-frames\" (first at line 33)",
        ),
        (
            good_with("name = \"standard-frames\"", "name = \"baseline\""),
            "bad.toml:33: case[0].name: \"baseline\" is the plan's [baseline] table; give the case another name",
        ),
        (
            good_with("name = \"seq-read-qd8\"", "name = \"oltp-8k\""),
            "bad.toml:24: workload[1].name: duplicate workload name \"oltp-8k\" (first at line 21); give each a `name`",
        ),
        (
            good_with("name = \"t\"", "name = \"My Plan\""),
            "bad.toml:1: name: \"My Plan\": a name is 1 to 64 of a-z 0-9 - _ . and starts with a letter or digit",
        ),
        (
            good_with("name = \"t\"\n", ""),
            "bad.toml:1: name: missing: every plan has a name",
        ),
        // Workloads.
        (
            GOOD.split("[[workload]]").next().unwrap().to_string(),
            "bad.toml:1: workload: no workloads: add at least one [[workload]] table",
        ),
        (
            good_with("workloads = [\"seq-read-qd8\"]", "workloads = [\"seq-read\"]"),
            "bad.toml:41: case[1].workloads[0]: no workload named \"seq-read\" in this plan; it has: oltp-8k, seq-read-qd8, matrix-read-4k-w2-qd16",
        ),
        // Case structure.
        (
            good_with("compare_to = \"congested\"", "compare_to = \"later\""),
            "bad.toml:46: case[2].compare_to: \"later\" is neither \"baseline\" nor an earlier case",
        ),
        (
            good_with("topology = \"congested\"\nworkloads", "workloads"),
            "bad.toml:39: case[1].name: case \"congested\" changes nothing: set a knob or another topology",
        ),
        (
            good_with("topology = \"congested\"", "topology = \"ring\""),
            "bad.toml:40: case[1].topology: expected one of \"loopback\", \"base\", \"congested\", \"vxlan\", \"physical\", found \"ring\"",
        ),
        (
            good_with("initiator = \"libiscsi\"", "initiator = \"open-iscsi\""),
            "bad.toml:48: case[2].initiator: expected one of \"isoe\", \"libiscsi\", \"kernel\", \"isoe-ublk\", \"isoe-nbd\", found \"open-iscsi\"",
        ),
        (
            good_with("initiator_tso = false", "initiator_tso = false\ntso = true"),
            "bad.toml:36: case[0].initiator_tso: `tso` (line 37) already sets both sides; keep one of the two",
        ),
        (
            good_with("mtu = 1500", "first_burst_length = \"2MiB\""),
            "bad.toml:35: case[0].first_burst_length: first_burst_length 2097152 would exceed max_burst_length 1048576 (RFC 7143 §13.14)",
        ),
        // Missing keys point at the table that lacks them.
        (
            good_with("name = \"standard-frames\"\n", ""),
            "bad.toml:32: case[0].name: missing: every case has a name",
        ),
        (
            good_with("profile = \"oltp-8k\"\n", "qd = 4\n"),
            "bad.toml:20: workload[0].profile: missing: name an `isoe bench` profile or a matrix cell",
        ),
        // Not TOML at all.
        (
            good_with("mtu = 1500", "mtu = = 1500"),
            "bad.toml:35:7: TOML syntax error: invalid string; expected `\"`, `'`",
        ),
    ];
    for (text, expected) in cases {
        let got = error_of(&text);
        assert!(
            got.starts_with(expected),
            "\nexpected: {expected}\n     got: {got}"
        );
    }
}

#[test]
fn nic_knobs_and_sysctls_read_as_flat_keys_and_a_table() {
    // [baseline.sysctl] right after [baseline]'s keys, [case.sysctl] after
    // the last case's: TOML puts a sub-table after its table's own keys.
    let text = good_with(
        "workers = 2\n",
        "workers = 2\nrx_ring = 512\nflow_control = false\nchannels = 2\ntx_usecs = 0\n\n\
         [baseline.sysctl]\n\"net.ipv4.tcp_sack\" = 1\n",
    )
        + "tx_ring = 1024\nrx_usecs = 50\n\n[case.sysctl]\n\"net.ipv4.tcp_timestamps\" = \"0\"\n\
         \"net.ipv4.tcp_rmem\" = \"4096 131072 6291456\"\n";
    let p = Plan::parse(&text, "good.toml").unwrap();
    let nic = p.baseline.link.nic;
    assert_eq!(
        (
            nic.rx_ring,
            nic.tx_ring,
            nic.channels,
            nic.tx_usecs,
            nic.flow_control
        ),
        (Some(512), None, Some(2), Some(0), Some(false))
    );
    assert_eq!(p.baseline.sysctl["net.ipv4.tcp_sack"], "1");
    let last = p.resolved_cases().pop().unwrap();
    assert_eq!(last.changes.link.nic.tx_ring, Some(1024));
    assert_eq!(last.knobs.link.nic.rx_ring, Some(512), "the baseline's");
    assert_eq!(last.knobs.link.nic.rx_usecs, Some(50));
    assert_eq!(
        last.knobs.sysctl.iter().collect::<Vec<_>>(),
        [
            (
                &"net.ipv4.tcp_rmem".to_string(),
                &"4096 131072 6291456".to_string()
            ),
            (&"net.ipv4.tcp_sack".to_string(), &"1".to_string()),
            (&"net.ipv4.tcp_timestamps".to_string(), &"0".to_string()),
        ]
    );
    let d = last.changes.describe();
    assert_eq!(d["sysctl.net.ipv4.tcp_timestamps"], "0");
    assert_eq!(d["tx_ring"], "1024");
    // A case whose only change is a sysctl changes something.
    let only = GOOD.to_string()
        + "\n[[case]]\nname = \"no-ts\"\n[case.sysctl]\n\"net.ipv4.tcp_timestamps\" = 0\n";
    let p = Plan::parse(&only, "good.toml").unwrap();
    assert_eq!(p.cases[3].knobs.sysctl["net.ipv4.tcp_timestamps"], "0");
}

#[test]
fn nic_knob_and_sysctl_errors_name_line_and_key() {
    let with_case = |extra: &str| format!("{GOOD}\n[[case]]\nname = \"x\"\n{extra}");
    // GOOD has 50 lines; the case's name is on line 53 and its first key on 54.
    let cases: Vec<(String, &str)> = vec![
        (
            with_case("rx_ring = 0\n"),
            "bad.toml:54: case[3].rx_ring: 0 is out of range 1..=65536",
        ),
        (
            with_case("tx_ring = 100000\n"),
            "bad.toml:54: case[3].tx_ring: 100000 is out of range 1..=65536",
        ),
        (
            with_case("rx_usecs = -1\n"),
            "bad.toml:54: case[3].rx_usecs: -1 is out of range 0..=100000",
        ),
        (
            with_case("channels = 0\n"),
            "bad.toml:54: case[3].channels: 0 is out of range 1..=1024",
        ),
        (
            with_case("flow_control = \"on\"\n"),
            "bad.toml:54: case[3].flow_control: expected true or false, found a string (\"on\")",
        ),
        (
            with_case("sysctl = 1\n"),
            "bad.toml:54: case[3].sysctl: expected a table of sysctl names and values",
        ),
        (
            with_case("[case.sysctl]\n\"fs.file-max\" = 1\n"),
            "bad.toml:55: case[3].sysctl.\"fs.file-max\": \"fs.file-max\" is not a sysctl a plan may set: a-z 0-9 _ . - under net., vm., kernel.",
        ),
        (
            with_case("[case.sysctl]\n\"net.ipv4/../x\" = 1\n"),
            "bad.toml:55: case[3].sysctl.\"net.ipv4/../x\": \"net.ipv4/../x\" is not a sysctl",
        ),
        (
            with_case("[case.sysctl]\n\"net..x\" = 1\n"),
            "bad.toml:55: case[3].sysctl.\"net..x\": \"net..x\" is not a sysctl",
        ),
        (
            with_case("[case.sysctl]\n\"net.ipv4.tcp_sack\" = true\n"),
            "bad.toml:55: case[3].sysctl.\"net.ipv4.tcp_sack\": expected a string or an integer, found a boolean (true)",
        ),
        (
            with_case("[case.sysctl]\n\"net.ipv4.tcp_sack\" = \"1\\n0\"\n"),
            "bad.toml:55: case[3].sysctl.\"net.ipv4.tcp_sack\": \"1\\n0\": a sysctl value is 1 to 256 printable ASCII characters",
        ),
        (
            with_case("[case.sysctl]\n\"net.ipv4.tcp_sack\" = \" \"\n"),
            "bad.toml:55: case[3].sysctl.\"net.ipv4.tcp_sack\": \" \": a sysctl value is 1 to 256",
        ),
        (
            good_with("workers = 2", "workers = 2\nrx_rings = 4"),
            "bad.toml:19: baseline.rx_rings: unknown key (did you mean `rx_ring`?)",
        ),
    ];
    for (text, expected) in cases {
        let got = error_of(&text);
        assert!(
            got.starts_with(expected),
            "\nexpected: {expected}\n     got: {got}"
        );
    }
}

/// A plan with both applications, on the kernel initiator and isoe's.
const APPS: &str = r#"name = "apps"
description = "applications"
topology = "physical"

[baseline]
initiator = "kernel"

[[workload]]
profile = "oltp-8k"

[[workload]]
name = "oltp-select"
application = "oltp"
mix = "select-only"
scale = 20
clients = 8
memory = "192MiB"

[[workload]]
application = "mail"
database = "128MiB"
threads = 16

[[case]]
name = "ublk"
initiator = "isoe-ublk"
filesystem = "xfs"

[[case]]
name = "bench"
initiator = "isoe"
"#;

#[test]
fn application_workloads_parse_with_their_defaults_and_metric() {
    use crate::application::{Application, Filesystem, Mail, Oltp, OltpMix};
    let p = Plan::parse(APPS, "apps.toml").unwrap();
    let select = p.workload("oltp-select").unwrap();
    assert_eq!(
        select.application,
        Some(Application::Oltp(Oltp {
            mix: OltpMix::SelectOnly,
            scale: 20,
            clients: 8,
            memory_bytes: 192 << 20
        }))
    );
    assert_eq!(select.metric, Metric::Tps);
    let mail = p.workload("mail").unwrap();
    assert_eq!(
        mail.application,
        Some(Application::Mail(Mail {
            database_bytes: 128 << 20,
            log_bytes: 32 << 20,
            threads: 16
        }))
    );
    assert_eq!(mail.metric, Metric::Iops);
    assert_eq!(
        mail.shape(&KnobSet::default(), 1).block_size_bytes,
        32 << 10
    );
    let cases = p.resolved_cases();
    assert_eq!(cases[1].knobs.filesystem, Some(Filesystem::Xfs));
    // The kernel's and ublk's cases run everything; isoe bench makes no
    // block device, so it runs the synthetic profile only.
    assert_eq!(cases[0].workloads, ["oltp-8k", "oltp-select", "mail"]);
    assert_eq!(cases[1].workloads, ["oltp-8k", "oltp-select", "mail"]);
    assert_eq!(cases[2].workloads, ["oltp-8k"]);
}

#[test]
fn application_workloads_refuse_a_profile_s_keys_and_each_other_s() {
    let with = |from: &str, to: &str| error_of(&APPS.replacen(from, to, 1));
    let e = with("threads = 16", "threads = 16\nqd = 4");
    assert!(e.contains("`qd` shapes a synthetic profile"), "{e}");
    let e = with("threads = 16", "threads = 16\nscale = 4");
    assert!(
        e.contains("`scale` is not a key of application = \"mail\""),
        "{e}"
    );
    let e = with(
        "profile = \"oltp-8k\"",
        "profile = \"oltp-8k\"\nclients = 4",
    );
    assert!(
        e.contains("`clients` belongs to an application workload"),
        "{e}"
    );
    let e = with("mix = \"select-only\"", "mix = \"select\"");
    assert!(e.contains("tpcb-like") && e.contains("select-only"), "{e}");
    let e = with("application = \"mail\"", "application = \"exchange\"");
    assert!(e.contains("oltp") && e.contains("mail"), "{e}");
    let e = with(
        "initiator = \"isoe\"\n",
        "initiator = \"isoe\"\nworkloads = [\"oltp-8k\", \"mail\"]\n",
    );
    assert!(
        e.contains("workload \"mail\" is an application") && e.contains("initiator = isoe"),
        "{e}"
    );
    let e = with(
        "threads = 16",
        "threads = 16\n\n[[workload]]\nname = \"tpcb\"\napplication = \"oltp\"",
    );
    assert!(
        e.contains("\"tpcb\" has scale 10 and \"oltp-select\" scale 20")
            && e.contains("one database"),
        "{e}"
    );
    let e = with("filesystem = \"xfs\"", "filesystem = \"btrfs\"");
    assert!(e.contains("ext4") && e.contains("xfs"), "{e}");
}

/// A plan with a floor case beside iSCSI ones.
const FLOOR: &str = r#"name = "f"
description = "floor"
seeds = ["003"]
topology = "loopback"

[[workload]]
name = "read-64"
profile = "matrix-read-4k-w1-qd32"
qd = 64

[[workload]]
name = "mixed"
profile = "oltp-8k"

[[case]]
name = "floor-32x2"
floor = true
sessions = 32
"#;

#[test]
fn a_floor_case_runs_the_workloads_raw_tcp_can_shape_and_refuses_the_rest_by_name() {
    let p = Plan::parse(FLOOR, "f.toml").unwrap();
    let floor = &p.resolved_cases()[1];
    assert!(floor.knobs.is_floor());
    // The mixed workload (67% reads) has no single exchange size: not run.
    assert_eq!(floor.workloads, ["read-64"]);
    assert_eq!(p.resolved_cases()[0].workloads, ["read-64", "mixed"]);
    // Asked for by name, it is an error that says why.
    let e = error_of(&FLOOR.replace("sessions = 32", "sessions = 32\nworkloads = [\"mixed\"]"));
    assert!(
        e.contains("workload \"mixed\" has no floor") && e.contains("67% reads"),
        "{e}"
    );
    let e = error_of(&FLOOR.replace("sessions = 32", "sessions = 3\nworkloads = [\"read-64\"]"));
    assert!(e.contains("QD 64 does not share evenly over 3"), "{e}");
    // iSCSI sessions share the depth too: isoe's need one command each,
    // fio's jobs an equal share.
    let e = error_of(&FLOOR.replace("qd = 64", "qd = 16").replace(
        "floor = true\nsessions = 32",
        "sessions = 32\nworkloads = [\"read-64\"]",
    ));
    assert!(
        e.contains("QD 16 does not share evenly over 32 sessions"),
        "{e}"
    );
    let e = error_of(&FLOOR.replace(
        "floor = true\nsessions = 32",
        "initiator = \"libiscsi\"\nsessions = 3\nworkloads = [\"read-64\"]",
    ));
    assert!(
        e.contains("QD 64 does not share evenly over 3 sessions"),
        "{e}"
    );
    // The floor replaces both ends: naming one is an error at its line.
    let e = error_of(&FLOOR.replace("floor = true", "floor = true\ntarget = \"tgt\""));
    assert!(
        e.contains("bad.toml:17: case[0].floor") && e.contains("set neither with it"),
        "{e}"
    );
}

/// Commands in flight in all for a case's run of `w` on `paths` paths, as
/// the runners lay it out: `isoe bench` keeps the depth per URL and
/// worker; fio (libiscsi) makes each session a job and drives every URL
/// at its depth x URLs (the same count on the kernel's or `isoe attach`'s
/// block devices, one per path).
fn in_flight_of(w: &WorkloadSpec, knobs: &KnobSet, paths: u32) -> u32 {
    let s = w.shape(knobs, paths);
    match knobs.initiator_impl() {
        InitiatorImpl::Isoe => s.queue_depth * paths * s.workers,
        _ => {
            let sessions = knobs.sessions.unwrap_or(1);
            let (jobs, depth) =
                crate::peers::fio::libiscsi_jobs(s.workers, s.queue_depth, sessions);
            depth * paths * jobs
        }
    }
}

#[test]
fn qsan_and_dell_keep_their_seeds_in_flight_totals_on_every_case() {
    for (name, total) in [("qsan-2012", 8), ("dell-2013", 40)] {
        let plan = Plan::embedded(name).unwrap();
        let cases = plan.resolved_cases();
        assert!(cases.len() > 5, "{name}");
        for case in &cases {
            let paths = case.topology.paths().expect("namespace topologies");
            for w in case.workloads.iter().filter_map(|w| plan.workload(w)) {
                assert_eq!(w.overrides.in_flight, Some(total), "{name}/{}", w.name);
                assert_eq!(
                    in_flight_of(w, &case.knobs, paths),
                    total,
                    "{name}/{}/{} on {} paths",
                    case.name,
                    w.name,
                    paths
                );
            }
        }
    }
    // The cases whose layout differs: one worker, four portals, fio.
    let dell = Plan::embedded("dell-2013").unwrap();
    let cases = dell.resolved_cases();
    let depth = |case: &str| {
        let c = cases.iter().find(|c| c.name == case).unwrap();
        let paths = c.topology.paths().unwrap();
        let s = dell.workloads[1].shape(&c.knobs, paths);
        (paths, s.workers, s.queue_depth)
    };
    assert_eq!(depth("baseline"), (2, 2, 10));
    assert_eq!(depth("rss-off"), (2, 1, 20));
    assert_eq!(depth("congested-isoe"), (4, 2, 5));
    assert_eq!(depth("congested-software-initiator"), (4, 2, 5));
    let qsan = Plan::embedded("qsan-2012").unwrap();
    assert_eq!(qsan.workloads[0].shape(&qsan.baseline, 2).queue_depth, 4);
    // isoe bench is told the derived depth.
    let shape = dell.workloads[0].shape(&dell.baseline, 2);
    let args = dell.workloads[0].bench_args(&dell.baseline, &shape);
    assert_eq!(args, ["--profile", "oltp-8k", "--qd", "10"]);
}

#[test]
fn in_flight_must_share_evenly_and_never_beside_qd() {
    let with = |workload: &str| {
        GOOD.replacen(
            "name = \"seq-read-qd8\"\nprofile = \"seq-read-256k\"\nqd = 8\n",
            workload,
            1,
        )
    };
    // 16 on base (2 paths x 2 workers) and congested (4 x 2) shares.
    let p = Plan::parse(
        &with("name = \"seq-read-qd8\"\nprofile = \"seq-read-256k\"\nin_flight = 16\n"),
        "good.toml",
    )
    .unwrap();
    assert_eq!(p.workloads[1].overrides.in_flight, Some(16));
    assert_eq!(p.workloads[1].shape(&p.baseline, 4).queue_depth, 2);
    // 12 does not share over the congested case's 4 paths x 2 workers.
    let e = error_of(&with(
        "name = \"seq-read-qd8\"\nprofile = \"seq-read-256k\"\nin_flight = 12\n",
    ));
    assert_eq!(
        e,
        "bad.toml:26: workload[1].in_flight: workload \"seq-read-qd8\": in_flight = 12 does not share evenly over 4 path(s) x 2 worker(s) (8) in case \"congested\" on the congested topology: give a total that does"
    );
    let e = error_of(&with(
        "name = \"seq-read-qd8\"\nprofile = \"seq-read-256k\"\nqd = 8\nin_flight = 16\n",
    ));
    assert!(
        e.starts_with(
            "bad.toml:27: workload[1].in_flight: `in_flight` (commands in flight in all) and `qd`"
        ),
        "{e}"
    );
    let e = error_of(&with(
        "name = \"oltp\"\napplication = \"oltp\"\nin_flight = 16\n",
    ));
    assert!(
        e.contains("workload[1].in_flight: `in_flight` shapes a synthetic profile"),
        "{e}"
    );
    // A test bed's paths are known when a case runs: the runners ask then.
    let mut bed = p.clone();
    bed.topology = TopologyKind::Physical;
    let baseline = &bed.resolved_cases()[0];
    assert!(bed
        .uneven_depth(&baseline.knobs, &baseline.workloads, 2)
        .is_none());
    let why = bed
        .uneven_depth(&baseline.knobs, &baseline.workloads, 3)
        .unwrap();
    assert!(
        why.contains("in_flight = 16 does not share evenly over 3 path(s)"),
        "{why}"
    );
}

#[test]
fn openstack_offloads_turns_each_side_off_alone_where_it_sends_or_receives() {
    let os = Plan::embedded("openstack-offloads").unwrap();
    let cases = os.resolved_cases();
    let all_on = os.baseline.link.initiator;
    let (read, write) = ("iometer-seq-read-256k", "iometer-seq-write-256k");
    // (case, its workload, the side it changes, what goes off).
    let transmit = Offloads {
        tso: Some(false),
        gso: Some(false),
        tx: Some(false),
        ..Offloads::default()
    };
    let receive = Offloads {
        gro: Some(false),
        rx: Some(false),
        ..Offloads::default()
    };
    for (prefix, mtu, reference) in [("", 1500, "baseline"), ("mtu-9000-", 9000, "mtu-9000")] {
        for (name, workload, side, off) in [
            (
                "transmitter-offloads-off-read",
                read,
                Side::Target,
                transmit,
            ),
            (
                "transmitter-offloads-off-write",
                write,
                Side::Initiator,
                transmit,
            ),
            ("receiver-offloads-off-read", read, Side::Initiator, receive),
            ("receiver-offloads-off-write", write, Side::Target, receive),
        ] {
            let name = format!("{prefix}{name}");
            let case = cases.iter().find(|c| c.name == name).unwrap();
            assert_eq!(case.workloads, [workload], "{name}");
            assert_eq!(case.compare_to.as_deref(), Some(reference), "{name}");
            assert_eq!(case.knobs.link.mtu, Some(mtu), "{name}");
            // The case sets one side's offloads, and only those.
            let other = match side {
                Side::Initiator => Side::Target,
                Side::Target => Side::Initiator,
            };
            assert_eq!(*case.changes.link.offloads(side), off, "{name}");
            assert_eq!(
                *case.changes.link.offloads(other),
                Offloads::default(),
                "{name}"
            );
            // Run with the baseline under it: the other side keeps all on.
            assert_eq!(*case.knobs.link.offloads(other), all_on, "{name}");
        }
    }
}

#[test]
fn every_shipped_plan_s_header_says_what_stands_in_for_hardware() {
    for (name, _) in Plan::list_embedded() {
        let text = Plan::embedded_text(&name).unwrap();
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let at = header.iter().position(|l| l.starts_with("# Stand-ins: "));
        let estimate = header.iter().position(|l| l.starts_with("# Estimate: "));
        assert!(
            matches!((at, estimate), (Some(a), Some(e)) if a < e),
            "{name}: a \"# Stand-ins:\" paragraph before the estimate"
        );
        // It names the hardware the seeds used and the lab has not.
        let paragraph = header[at.unwrap()..estimate.unwrap()].join(" ");
        assert!(
            ["TOE", "offload", "hardware"]
                .iter()
                .any(|w| paragraph.contains(w)),
            "{name}: {paragraph}"
        );
    }
}

#[test]
fn seed_durations_give_seed_001_its_twenty_minute_runs_and_keep_what_no_seed_states() {
    // Seed 001: three runs of 20 minutes; the estimate counts them.
    let mut dell = Plan::embedded("dell-2013").unwrap();
    let (_, before_max_s) = dell.estimated_duration_s();
    let (ramp_s, max_runs) = (dell.run.ramp_s, dell.rules.max_runs);
    let notes = dell.use_seed_durations();
    assert_eq!(dell.run.duration_s, 1200.0);
    assert_eq!(dell.run.ramp_s, ramp_s);
    assert_eq!((dell.rules.min_runs, dell.rules.max_runs), (3, max_runs));
    let (min_s, max_s) = dell.estimated_duration_s();
    let cells = dell.cell_count() as f64;
    assert_eq!(min_s, cells * 3.0 * (ramp_s + 1200.0 + RUN_OVERHEAD_S));
    assert!(max_s > 100.0 * before_max_s, "{max_s} vs {before_max_s}");
    assert!(notes
        .iter()
        .any(|n| n.contains("seed 001 three runs of twenty minutes")));
    // Seed 000 states no length: qsan keeps its own, and says so.
    let mut qsan = Plan::embedded("qsan-2012").unwrap();
    let plan_s = qsan.estimated_duration_s();
    let notes = qsan.use_seed_durations();
    assert_eq!(qsan.estimated_duration_s(), plan_s);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no seed of this plan states a run length")),
        "{notes:?}"
    );
    // Seed 004 states three runs and no length.
    let mut pt = Plan::embedded("pt-2009").unwrap();
    let duration_s = pt.run.duration_s;
    pt.use_seed_durations();
    assert_eq!(pt.run.duration_s, duration_s);
    assert_eq!((pt.rules.min_runs, pt.rules.max_runs), (3, 3));
}

#[test]
fn a_stream_workload_takes_its_own_keys_and_none_of_a_profile_s() {
    let plan = |workload: &str| {
        Plan::parse(
            &format!("name = \"s\"\n[[workload]]\n{workload}\n"),
            "s.toml",
        )
    };
    let p = plan("stream = \"udp\"").unwrap();
    let w = &p.workloads[0];
    assert_eq!((w.name.as_str(), w.metric), ("udp-stream", Metric::MbPerS));
    assert_eq!(
        w.stream,
        Some(StreamWorkload {
            kind: StreamKind::Udp,
            direction: StreamDirection::InitiatorToTarget,
            msg: None
        })
    );
    assert!(!w.is_matrix_cell() && w.large_block());
    // It runs in every case, the floor's and another initiator's too.
    let knobs = KnobSet {
        floor: Some(true),
        ..KnobSet::default()
    };
    assert!(w.runs_with(&knobs, Some(2)));
    let p = plan(
        "name = \"rx\"\nstream = \"tcp\"\ndirection = \"target-to-initiator\"\nmsg = \"64KiB\"",
    )
    .unwrap();
    let shape = p.workloads[0].shape(&KnobSet::default(), 2);
    assert_eq!((shape.block_size_bytes, shape.read_pct), (65_536, 100));
    for (workload, error) in [
        ("stream = \"sctp\"", "\"tcp\""),
        (
            "stream = \"tcp\"\nqd = 4",
            "`qd` is not a key of a stream workload",
        ),
        (
            "stream = \"tcp\"\nmix = \"tpcb-like\"",
            "`mix` is not a key of a stream workload",
        ),
        (
            "stream = \"udp\"\nmsg = 65508",
            "65508 bytes is out of range 16..=65507",
        ),
        (
            "stream = \"tcp\"\ndirection = \"sideways\"",
            "initiator-to-target",
        ),
        (
            "profile = \"seq-read-256k\"\nmsg = 1472",
            "`msg` belongs to a stream workload",
        ),
    ] {
        let err = plan(workload).unwrap_err().to_string();
        assert!(err.contains(error), "{workload}: {err}");
        assert!(err.starts_with("s.toml:"), "{err}");
    }
}
