//! The parsers on output captured from real devices (`testdata/`): this
//! machine's virtio port (`eth0`), a veth in a namespace, and the test bed
//! VM's virtio port (`ens3`); the journal's round trip; and what a case
//! that leaves a knob unset asks for (the saved value).

use super::apply::{feature_changes, sysctl_wants, wanted_features, Ledger};
use super::parse::*;
use super::*;
use crate::applied::NotApplied;
use crate::link::Offload;
use crate::netcmd::parse_ethtool_features;

const ETH0_G: &str = include_str!("testdata/eth0-g.txt");
const ETH0_C: &str = include_str!("testdata/eth0-c.txt");
const ETH0_L: &str = include_str!("testdata/eth0-l.txt");
const ETH0_K: &str = include_str!("testdata/eth0-k.txt");
const VETH_L: &str = include_str!("testdata/veth-l.txt");
const VETH_K: &str = include_str!("testdata/veth-k.txt");
const VETH_K_TX_OFF: &str = include_str!("testdata/veth-k-tx-off.txt");
const VM_G: &str = include_str!("testdata/vm-g.txt");
const VM_C: &str = include_str!("testdata/vm-c.txt");
const VM_L: &str = include_str!("testdata/vm-l.txt");

/// `ethtool -a` as ethtool 6.1 prints it (netlink/pause.c): none of the
/// devices at hand has pause parameters, so this is its format by hand.
const PAUSE: &str = "Pause parameters for enp1s0:\n\
Autonegotiate:\ton\n\
RX:\t\ton\n\
TX:\t\toff\n\
RX negotiated: on\n\
TX negotiated: off\n";

#[test]
fn rings_read_maximums_and_current_values() {
    let s = parse_settings(ETH0_G);
    assert_eq!((s.number("RX"), s.number("TX")), (Some(256), Some(256)));
    assert_eq!((s.maximum("RX"), s.maximum("TX")), (Some(256), Some(256)));
    assert_eq!(s.number("RX Mini"), None, "n/a");
    assert_eq!(s.value("RX Mini"), Some("n/a"));
    assert_eq!(s.value("TX Push"), Some("off"));
    assert_eq!(s.value("TCP data split"), Some("n/a"));
    assert_eq!(s.0[0].section, MAXIMUMS);
    let vm = parse_settings(VM_G);
    assert!(
        vm.number("RX").is_some() && vm.maximum("RX").is_some(),
        "{vm:?}"
    );
}

#[test]
fn coalescing_reads_both_settings_of_a_double_line() {
    let s = parse_settings(ETH0_C);
    assert_eq!(
        (s.number("rx-usecs"), s.number("tx-usecs")),
        (Some(0), Some(0))
    );
    assert_eq!(s.number("rx-frames"), Some(1));
    assert_eq!(s.value("Adaptive RX"), Some("off"));
    assert_eq!(s.value("Adaptive TX"), Some("n/a"));
    assert_eq!(s.value("CQE mode RX"), Some("n/a"));
    assert_eq!(s.value("CQE mode TX"), Some("n/a"));
    assert_eq!(s.value("rx-usecs-irq"), Some("n/a"));
    assert!(s
        .0
        .iter()
        .all(|x| x.section == "Coalesce parameters for eth0"));
    let vm = parse_settings(VM_C);
    assert!(vm.value("rx-usecs").is_some(), "{vm:?}");
}

#[test]
fn channels_read_combined_or_separate_queues() {
    let s = parse_settings(ETH0_L);
    assert_eq!(
        (s.number("Combined"), s.maximum("Combined")),
        (Some(1), Some(1))
    );
    assert_eq!(s.number("RX"), None);
    // A veth has separate RX and TX queues and no combined ones.
    let v = parse_settings(VETH_L);
    assert_eq!((v.number("RX"), v.maximum("RX")), (Some(1), Some(2)));
    assert_eq!(
        (v.number("Combined"), v.value("Combined")),
        (None, Some("n/a"))
    );
    let vm = parse_settings(VM_L);
    assert!(vm.number("Combined").is_some(), "{vm:?}");
}

#[test]
fn pause_reads_its_three_settings() {
    let p = Pause::from_settings(&parse_settings(PAUSE)).unwrap();
    assert_eq!(
        p,
        Pause {
            autoneg: true,
            rx: true,
            tx: false
        }
    );
    assert_eq!(parse_settings(PAUSE).value("RX negotiated"), Some("on"));
    assert_eq!(Pause::from_settings(&parse_settings(ETH0_G)), None);
}

#[test]
fn qdisc_and_link_read_from_json() {
    // A veth that is down has no qdisc yet: the kernel's, as far as the rate goes.
    let none = parse_root_qdisc(include_str!("testdata/veth-qdisc.json")).unwrap();
    assert_eq!((none.kind.as_str(), none.is_default()), ("none", true));
    let noqueue = parse_root_qdisc(
        r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]"#,
    )
    .unwrap();
    assert_eq!(
        (noqueue.kind.as_str(), noqueue.is_default()),
        ("noqueue", true)
    );
    let tbf = parse_root_qdisc(include_str!("testdata/veth-qdisc-tbf.json")).unwrap();
    assert!(!tbf.is_default());
    assert!(tbf.is_tbf_at(1000) && !tbf.is_tbf_at(100), "{tbf:?}");
    let pfifo = parse_root_qdisc(include_str!("testdata/eth0-qdisc.json")).unwrap();
    assert_eq!(
        (pfifo.kind.as_str(), pfifo.handle.as_str()),
        ("pfifo_fast", "0:")
    );
    assert!(parse_root_qdisc("{}").is_err());
    let (mtu, up) = parse_link(include_str!("testdata/veth-link.json")).unwrap();
    assert_eq!((mtu, up), (1500, false), "M-DOWN is not UP");
    assert_eq!(
        parse_link(r#"[{"ifname":"e","flags":["BROADCAST","UP","LOWER_UP"],"mtu":9000}]"#).unwrap(),
        (9000, true)
    );
    assert_eq!(
        parse_link(r#"[{"ifname":"e"}]"#).unwrap_err().to_string(),
        "ip -j link show has no mtu"
    );
}

fn port_state(features: &str) -> PortState {
    PortState {
        host: 0,
        netns: Some("ns".into()),
        dev: "v0".into(),
        sides: vec![Side::Initiator],
        carries_ssh: false,
        mtu: 1500,
        features: Ok(parse_ethtool_features(features)),
        rings: Err(Unanswered(
            "ethtool -g v0: netlink error: Operation not supported".into(),
        )),
        coalesce: Ok(parse_settings(ETH0_C)),
        channels: Ok(parse_settings(VETH_L)),
        pause: Ok(parse_settings(PAUSE)),
        qdisc: Ok(RootQdisc {
            kind: "noqueue".into(),
            handle: "0:".into(),
            rate_bytes_per_s: None,
        }),
    }
}

#[test]
fn the_journal_reads_back_what_was_written() {
    let mut values = BTreeMap::new();
    values.insert("net.ipv4.tcp_timestamps".to_string(), Some("1".to_string()));
    values.insert("net.ipv4.no_such".to_string(), None);
    let journal = Journal {
        hosts: vec![
            HostId {
                url: "local".into(),
                key: None,
            },
            HostId {
                url: "ssh://root@[fe80::1]:2222".into(),
                key: Some("/k/id".into()),
            },
        ],
        ports: vec![port_state(VETH_K)],
        sysctls: vec![SysctlState {
            host: 0,
            netns: None,
            values,
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("knobs.journal");
    let saved = Saved::from_journal(journal.clone(), dir.path()).unwrap();
    saved.write_journal(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let back: Journal = serde_json::from_str(&text).unwrap();
    assert_eq!(back, journal);
    assert!(!path.with_extension("tmp").exists(), "renamed into place");
    let again = Saved::from_journal(back, dir.path()).unwrap();
    assert_eq!(again.hosts[1].url(), "ssh://root@[fe80::1]:2222");
    assert_eq!(
        again.sysctl_names(),
        ["net.ipv4.no_such", "net.ipv4.tcp_timestamps"]
    );
    // No journal: nothing to do; a broken one is said, and kept.
    assert_eq!(restore_from_journal(&dir.path().join("absent")), Ok(false));
    std::fs::write(&path, "{").unwrap();
    let e = restore_from_journal(&path).unwrap_err();
    assert!(e[0].contains("is not a knob journal"), "{e:?}");
    assert!(path.exists());
}

/// (knob names, feature, value) as [`apply::offloads`] builds them.
fn ask(knob: &str, on: bool) -> Vec<(Vec<String>, Offload, bool)> {
    let f = Offload::ALL
        .into_iter()
        .find(|f| knob.ends_with(f.name()))
        .unwrap();
    vec![(vec![knob.to_string()], f, on)]
}

#[test]
fn an_unset_offload_returns_to_its_saved_features() {
    let saved = parse_ethtool_features(VETH_K);
    let after_tx_off = parse_ethtool_features(VETH_K_TX_OFF);
    let mut ledger = Ledger::new(&KnobSet::default());
    // The next case sets nothing: every feature `tx off` and `tso off`
    // turned off goes back on, by its own name, and nothing else is sent.
    let want = wanted_features("v0", &saved, &[], &mut ledger);
    let changes = feature_changes(&want, &after_tx_off);
    assert_eq!(
        changes,
        [
            ("tx-checksum-ip-generic", true),
            ("tx-checksum-sctp", true),
            ("tx-tcp-accecn-segmentation", true),
            ("tx-tcp-ecn-segmentation", true),
            ("tx-tcp-mangleid-segmentation", true),
            ("tx-tcp-segmentation", true),
            ("tx-tcp6-segmentation", true),
        ]
    );
    // "off [requested on]" is already requested on: nothing to send for it.
    assert!(!changes.iter().any(|(n, _)| *n == "tx-udp-segmentation"));
    assert!(ledger.into_applied().is_empty());
    // From the saved state, a case asking tx off sends each Tx checksum
    // feature that is not fixed, and no other.
    let mut ledger = Ledger::new(&KnobSet::default());
    let want = wanted_features("v0", &saved, &ask("initiator.tx", false), &mut ledger);
    assert_eq!(
        feature_changes(&want, &saved),
        [
            ("tx-checksum-ip-generic", false),
            ("tx-checksum-sctp", false)
        ]
    );
    // Asked for what it has: nothing to send.
    let want = wanted_features("v0", &saved, &ask("initiator.gso", true), &mut ledger);
    assert!(feature_changes(&want, &saved).is_empty());
}

#[test]
fn a_fixed_offload_is_skipped_with_ethtools_line() {
    // This machine's virtio port has rx checksumming fixed on.
    let saved = parse_ethtool_features(ETH0_K);
    let mut ledger = Ledger::new(&KnobSet::default());
    let want = wanted_features(
        "eth0 on this machine",
        &saved,
        &ask("target.rx", false),
        &mut ledger,
    );
    assert!(feature_changes(&want, &saved).is_empty());
    let applied = ledger.into_applied();
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].knob, "target.rx");
    assert_eq!(applied[0].value, "as before");
    assert_eq!(
        applied[0].outcome,
        Err(NotApplied::Problems(vec![
            "eth0 on this machine: fixed on by the driver (rx-checksumming: on [fixed])".into()
        ]))
    );
}

#[test]
fn an_unset_sysctl_returns_to_its_saved_value() {
    let saved: BTreeMap<String, Option<String>> = [
        ("net.ipv4.tcp_timestamps", Some("1")),
        ("net.ipv4.tcp_rmem", Some("4096 131072 6291456")),
        ("net.ipv4.gone", None),
        ("vm.swappiness", Some("60")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
    .collect();
    let asked: BTreeMap<String, String> = [
        ("net.ipv4.tcp_rmem", "4096\t65536   65536"),
        ("net.ipv4.gone", "1"),
        ("vm.swappiness", "10"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let knobs = KnobSet {
        sysctl: asked.clone(),
        ..KnobSet::default()
    };
    // In a namespace: vm. is the machine's, never written there.
    let mut ledger = Ledger::new(&knobs);
    let want = sysctl_wants("ns", true, &saved, &asked, &mut ledger);
    assert_eq!(
        want,
        [
            ("net.ipv4.tcp_rmem", "4096 65536 65536".to_string()),
            ("net.ipv4.tcp_timestamps", "1".to_string()),
        ],
        "the unset tcp_timestamps goes back to 1"
    );
    let outcomes: BTreeMap<String, Result<(), String>> = ledger
        .into_applied()
        .into_iter()
        .map(|a| (a.knob, a.outcome.map_err(|e| e.to_string())))
        .collect();
    assert_eq!(
        outcomes["sysctl.net.ipv4.gone"],
        Err("ns: no such sysctl (/proc/sys/net/ipv4/gone does not exist)".into())
    );
    assert!(outcomes["sysctl.vm.swappiness"]
        .as_ref()
        .unwrap_err()
        .contains("would change the whole machine"));
    assert_eq!(outcomes["sysctl.net.ipv4.tcp_rmem"], Ok(()));
    // On a machine's own stack vm. is written, and back to 60 when unset.
    let mut ledger = Ledger::new(&KnobSet::default());
    let want = sysctl_wants("host", false, &saved, &BTreeMap::new(), &mut ledger);
    assert!(want.contains(&("vm.swappiness", "60".to_string())));
    assert!(ledger.into_applied().is_empty());
}

#[test]
fn sysctl_names_gather_every_set() {
    let a = KnobSet {
        sysctl: [("net.b".to_string(), "1".to_string())].into(),
        ..KnobSet::default()
    };
    let b = KnobSet {
        sysctl: [
            ("net.a".to_string(), "1".to_string()),
            ("net.b".to_string(), "0".to_string()),
        ]
        .into(),
        ..KnobSet::default()
    };
    assert_eq!(sysctl_names([&a, &b]), ["net.a", "net.b"]);
    assert_eq!(
        sysctl_path("net.ipv4.conf.all.rp_filter"),
        "/proc/sys/net/ipv4/conf/all/rp_filter"
    );
    assert_eq!(normalize(" 4096\t131072  6291456\n"), "4096 131072 6291456");
}
