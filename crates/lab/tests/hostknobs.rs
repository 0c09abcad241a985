//! Knobs on real interfaces, here a veth pair in a network
//! namespace of its own: the state read before, a case applied and checked
//! with `ip`, `ethtool`, `tc` and `/proc/sys`, the next case returning what
//! it leaves unset, and at the end the dump of everything identical to the
//! one before: after finishing, after the guard is dropped (an error, or
//! Ctrl-C ending the run loop), and after a run killed by SIGINT halfway,
//! put back from its journal by the next one.
//!
//! They need root, iproute2 and ethtool. Without them they skip with the
//! reason, unless `CI` is set: then they fail. Each test makes its own
//! namespace (`isoe-lab-<PID>-k<n>`) and deletes it, also when it fails.

use isoe_lab::host::Host;
use isoe_lab::hostknobs::{self, Guard, Port, Saved};
use isoe_lab::knobs::KnobSet;
use isoe_lab::link::{LinkKnobs, NicKnobs, Offloads, Side};
use isoe_lab::netcmd;
use isoe_lab::topology::{Applied, NAMESPACE_PREFIX};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether the tests can run here; else print why (or panic under CI).
fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let missing: Vec<&str> = ["ip", "tc", "ethtool"]
        .into_iter()
        .filter(|p| netcmd::find_program(p).is_none())
        .collect();
    let reason = if euid != 0 {
        format!("not root (effective uid {euid})")
    } else if !missing.is_empty() {
        format!("{} not installed", missing.join(", "))
    } else {
        return true;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: {reason}; under CI these tests must run (as root, with iproute2 and ethtool)"
    );
    eprintln!("skipping {test}: {reason}");
    false
}

fn run(argv: &[&str]) -> String {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    netcmd::run(&argv).unwrap_or_else(|e| panic!("{e}"))
}

/// A namespace with a veth pair `a0` (initiator) – `a1` (target), both
/// up; deleted on drop, so a failing test leaves nothing.
struct Bed {
    ns: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Bed {
    fn new() -> Bed {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let bed = Bed {
            ns: format!("{NAMESPACE_PREFIX}{}-k{n}", std::process::id()),
        };
        run(&["ip", "netns", "add", &bed.ns]);
        let ns = bed.ns.as_str();
        run(&[
            "ip", "-n", ns, "link", "add", "a0", "type", "veth", "peer", "name", "a1",
        ]);
        for dev in ["a0", "a1"] {
            run(&["ip", "-n", ns, "link", "set", "dev", dev, "up"]);
        }
        bed
    }

    fn ports(&self) -> Vec<Port> {
        vec![
            Port::new(Host::Local, "a0", Side::Initiator).in_netns(&self.ns),
            Port::new(Host::Local, "a1", Side::Target).in_netns(&self.ns),
        ]
    }

    fn sh(&self, script: &str) -> String {
        run(&["ip", "netns", "exec", &self.ns, "sh", "-c", script])
            .trim()
            .to_string()
    }

    fn mtu(&self, dev: &str) -> String {
        self.sh(&format!("cat /sys/class/net/{dev}/mtu"))
    }

    fn feature(&self, dev: &str, name: &str) -> String {
        self.sh(&format!("ethtool -k {dev} | grep '^\t*{name}:'"))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = netcmd::run(&["ip".into(), "netns".into(), "del".into(), self.ns.clone()]);
    }
}

/// The sysctls the cases touch: two of the namespace's own, and one of
/// the machine's, which must be refused inside a namespace.
fn sysctl_names() -> Vec<String> {
    [
        "net.ipv4.tcp_timestamps",
        "net.ipv4.tcp_sack",
        "vm.swappiness",
    ]
    .map(String::from)
    .to_vec()
}

/// MTU 9000, TSO off on the initiator's port, GRO off on both, a tbf at
/// 1000 Mbit/s, rings and combined channels (which a veth lacks), two
/// sysctls of the namespace and one of the machine's.
fn jumbo_case() -> KnobSet {
    KnobSet {
        link: LinkKnobs {
            mtu: Some(9000),
            rate_mbit: Some(1000),
            initiator: Offloads {
                tso: Some(false),
                gro: Some(false),
                ..Offloads::default()
            },
            target: Offloads {
                gro: Some(false),
                ..Offloads::default()
            },
            nic: NicKnobs {
                rx_ring: Some(512),
                channels: Some(2),
                ..NicKnobs::default()
            },
        },
        sysctl: [("net.ipv4.tcp_timestamps", "0"), ("vm.swappiness", "10")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..KnobSet::default()
    }
}

fn outcomes(applied: Vec<Applied>) -> BTreeMap<String, Result<(), String>> {
    applied
        .into_iter()
        .map(|a| (a.knob, a.outcome.map_err(|e| e.to_string())))
        .collect()
}

fn host_sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_case_is_applied_the_next_returns_what_it_leaves_and_the_end_puts_all_back() {
    if !can_run("a_case_is_applied_the_next_returns_what_it_leaves_and_the_end_puts_all_back") {
        return;
    }
    let bed = Bed::new();
    let (ports, names) = (bed.ports(), sysctl_names());
    let machine_swappiness = host_sysctl("vm.swappiness");
    let machine_timestamps = host_sysctl("net.ipv4.tcp_timestamps");
    let before = hostknobs::dump(&ports, &names);
    assert!(before.contains("mtu 1500, up"), "{before}");
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("knobs.journal");
    let mut guard = Guard::begin(&ports, &names, &journal).unwrap();
    assert!(journal.exists(), "the journal is written before any change");
    assert_eq!(guard.saved().state().ports.len(), 2);

    let got = outcomes(guard.apply(&jumbo_case()));
    for ok in [
        "mtu",
        "rate_mbit",
        "initiator.tso",
        "initiator.gro",
        "target.gro",
        "sysctl.net.ipv4.tcp_timestamps",
    ] {
        assert_eq!(got[ok], Ok(()), "{ok}: {got:#?}");
    }
    let rings = got["rx_ring"].as_ref().unwrap_err();
    assert!(
        rings.contains("a0 on this machine (netns") && rings.contains("Operation not supported"),
        "ethtool's own reason: {rings}"
    );
    let channels = got["channels"].as_ref().unwrap_err();
    assert!(channels.contains("Combined: n/a"), "{channels}");
    let swappiness = got["sysctl.vm.swappiness"].as_ref().unwrap_err();
    assert!(swappiness.contains("whole machine"), "{swappiness}");
    assert_eq!(got.len(), 9, "one per knob set: {got:#?}");
    // Took effect, in the namespace only.
    assert_eq!(
        (bed.mtu("a0"), bed.mtu("a1")),
        ("9000".into(), "9000".into())
    );
    assert_eq!(
        bed.feature("a0", "tx-tcp-segmentation"),
        "tx-tcp-segmentation: off"
    );
    assert_eq!(
        bed.feature("a1", "tx-tcp-segmentation"),
        "tx-tcp-segmentation: on"
    );
    assert_eq!(
        bed.feature("a1", "generic-receive-offload"),
        "generic-receive-offload: off"
    );
    assert!(
        bed.sh("tc qdisc show dev a0").contains("tbf"),
        "rate on the initiator's port"
    );
    assert!(
        !bed.sh("tc qdisc show dev a1").contains("tbf"),
        "not on the target's"
    );
    assert_eq!(bed.sh("cat /proc/sys/net/ipv4/tcp_timestamps"), "0");
    assert_eq!(host_sysctl("net.ipv4.tcp_timestamps"), machine_timestamps);
    assert_eq!(host_sysctl("vm.swappiness"), machine_swappiness);
    // The same case again changes nothing and says the same.
    assert_eq!(outcomes(guard.apply(&jumbo_case())), got);

    // The next case sets only GRO on the target: everything else goes back.
    let next = KnobSet {
        link: LinkKnobs {
            target: Offloads {
                gro: Some(true),
                ..Offloads::default()
            },
            ..LinkKnobs::default()
        },
        ..KnobSet::default()
    };
    let got = outcomes(guard.apply(&next));
    assert_eq!(
        got,
        [("target.gro".to_string(), Ok(()))].into(),
        "nothing failed to go back"
    );
    assert_eq!(bed.mtu("a0"), "1500");
    assert_eq!(
        bed.feature("a0", "tx-tcp-segmentation"),
        "tx-tcp-segmentation: on"
    );
    assert_eq!(
        bed.feature("a1", "generic-receive-offload"),
        "generic-receive-offload: on"
    );
    assert!(!bed.sh("tc qdisc show dev a0").contains("tbf"));
    assert_eq!(bed.sh("cat /proc/sys/net/ipv4/tcp_timestamps"), "1");

    guard.finish().unwrap();
    assert!(!journal.exists(), "removed once all is back");
    assert_eq!(hostknobs::dump(&ports, &names), before);

    // Dropped without finishing (an error, or Ctrl-C ending the run loop):
    // put back all the same.
    {
        let mut guard = Guard::begin(&ports, &names, &journal).unwrap();
        guard.apply(&jumbo_case());
        assert_ne!(hostknobs::dump(&ports, &names), before);
    }
    assert!(!journal.exists());
    assert_eq!(hostknobs::dump(&ports, &names), before);
}

/// Set in the child of `a_run_killed_by_ctrl_c_is_put_back_from_its_journal`:
/// the namespace and the journal to use.
const CHILD_ENV: &str = "ISOE_HOSTKNOBS_CHILD";

#[test]
fn ctrl_c_child() {
    let Some(spec) = std::env::var_os(CHILD_ENV) else {
        return; // only as the child
    };
    let spec = spec.into_string().unwrap();
    let (ns, journal) = spec.split_once(' ').unwrap();
    let bed_ports = Bed { ns: ns.to_string() };
    let mut guard = Guard::begin(&bed_ports.ports(), &sysctl_names(), Path::new(journal)).unwrap();
    guard.apply(&jumbo_case());
    // The parent owns the namespace.
    std::mem::forget(bed_ports);
    // Ctrl-C with no handler: the process ends here, nothing dropped. A
    // test run started in the background by a shell without job control
    // inherits SIGINT ignored, so its default action is put back first.
    // SAFETY: signal(2) and raise(2) on this process only.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::raise(libc::SIGINT);
    }
    unreachable!("SIGINT ends the process");
}

#[test]
fn a_run_killed_by_ctrl_c_is_put_back_from_its_journal() {
    if !can_run("a_run_killed_by_ctrl_c_is_put_back_from_its_journal") {
        return;
    }
    let bed = Bed::new();
    let (ports, names) = (bed.ports(), sysctl_names());
    let before = hostknobs::dump(&ports, &names);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("knobs.journal");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ctrl_c_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{} {}", bed.ns, journal.display()))
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGINT),
        "the child ends by SIGINT: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(journal.exists(), "the killed run left its journal");
    assert_eq!(
        bed.mtu("a0"),
        "9000",
        "killed halfway: the case is still on"
    );
    assert_ne!(hostknobs::dump(&ports, &names), before);
    // The next run reads the journal first and puts it all back.
    assert_eq!(hostknobs::restore_from_journal(&journal), Ok(true));
    assert!(!journal.exists());
    assert_eq!(hostknobs::dump(&ports, &names), before);
    assert_eq!(hostknobs::restore_from_journal(&journal), Ok(false));
    // And a Guard begun over a leftover journal restores it before reading.
    let saved = Saved::read(&ports, &names).unwrap();
    saved.apply(&jumbo_case());
    saved.write_journal(&journal).unwrap();
    let guard = Guard::begin(&ports, &names, &journal).unwrap();
    assert_eq!(
        guard.saved().state().ports[0].mtu,
        1500,
        "read after the put-back"
    );
    guard.finish().unwrap();
    assert_eq!(hostknobs::dump(&ports, &names), before);
}
