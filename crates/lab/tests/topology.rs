//! The four topologies made for real: every portal reached from the host
//! namespace, knobs applied and read back with `ip`, `ethtool` and `tc`,
//! and nothing left behind, also after a panic and after a crash.
//!
//! They need root, iproute2 and ethtool. Without them they skip with the
//! reason, unless `CI` is set: then they fail. Each test makes its own
//! namespaces (`isoe-lab-<PID>-<n>-<role>`), so they run in parallel.

use isoe_lab::link::{LinkKnobs, Side};
use isoe_lab::netcmd;
use isoe_lab::topology::{self, Applied, Kind, Options, Role, Topology};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Whether the tests can run here; else print why (or panic under CI).
fn can_run(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("?");
    let missing: Vec<&str> = ["ip", "tc", "ethtool"]
        .into_iter()
        .filter(|p| netcmd::find_program(p).is_none())
        .collect();
    let reason = if euid != "0" {
        format!("not root (effective uid {euid})")
    } else if !missing.is_empty() {
        format!("{} not installed", missing.join(", "))
    } else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: {reason}; under CI these tests must run (as root, with iproute2 and ethtool)"
        );
    }
    eprintln!("skipping {test}: {reason}");
    false
}

/// Run `f` on a thread that has entered namespace `ns`: sockets it makes
/// belong to that namespace wherever they are used later.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("namespace file");
    std::thread::spawn(move || {
        // SAFETY: setns takes an open namespace descriptor (kept alive by
        // `file` for the call) and changes only this thread's network
        // namespace; the thread ends with `f`.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("thread in namespace")
}

/// Send `bytes` to a listener on `portal` in the target namespace from the
/// host namespace and have them echoed; returns the address the target saw.
fn echo(t: &Topology, portal: SocketAddr, bytes: usize) -> IpAddr {
    let (host, target) = (ns(t, Role::Host), ns(t, Role::Target));
    let listener = in_netns(&target, move || {
        TcpListener::bind(portal).expect("bind portal")
    });
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![0u8; bytes];
        s.read_exact(&mut buf).expect("server read");
        s.write_all(&buf).expect("server write");
        peer.ip()
    });
    in_netns(&host, move || {
        let mut c = TcpStream::connect_timeout(&portal, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {portal}: {e}"));
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let sent: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        let writer = {
            let mut c = c.try_clone().unwrap();
            let sent = sent.clone();
            std::thread::spawn(move || c.write_all(&sent).expect("client write"))
        };
        let mut back = vec![0u8; bytes];
        c.read_exact(&mut back)
            .unwrap_or_else(|e| panic!("echo of {bytes} bytes from {portal}: {e}"));
        writer.join().unwrap();
        assert!(back == sent, "echo from {portal} differs");
    });
    server.join().expect("server")
}

fn ns(t: &Topology, role: Role) -> String {
    t.namespace(role).expect("namespace").to_string()
}

/// Every portal answers from the host namespace: ping when installed, and
/// a TCP echo of `bytes`, which must come from one of the host addresses.
fn reach_every_portal(t: &Topology, bytes: usize) {
    for portal in t.portals() {
        if netcmd::find_program("ping").is_some() {
            let out = t
                .command(Role::Host, "ping")
                .args(["-c1", "-W2", &portal.ip().to_string()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "ping {portal}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        let seen = echo(t, portal, bytes);
        assert!(
            t.host_addresses().contains(&seen),
            "{portal} saw {seen}, not a host address"
        );
    }
}

fn run(argv: &[&str]) -> String {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    netcmd::run(&argv).unwrap_or_else(|e| panic!("{e}"))
}

fn mtu_of(ns: &str, dev: &str) -> u64 {
    let json = run(&["ip", "-n", ns, "-j", "link", "show", "dev", dev]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v[0]["mtu"].as_u64().unwrap()
}

fn tx_packets(ns: &str, dev: &str) -> u64 {
    let json = run(&["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v[0]["stats64"]["tx"]["packets"].as_u64().unwrap()
}

/// `ethtool -k` line for a feature, e.g. "tx-tcp-segmentation: off".
fn feature(ns: &str, dev: &str, name: &str) -> String {
    let out = run(&["ip", "netns", "exec", ns, "ethtool", "-k", dev]);
    out.lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} on {dev}"))
        .to_string()
}

fn qdisc(ns: &str, dev: &str) -> String {
    run(&["tc", "-n", ns, "qdisc", "show", "dev", dev])
}

fn all_ok(applied: &[Applied]) {
    for a in applied {
        assert!(
            a.outcome.is_ok(),
            "{} = {}: {:?}",
            a.knob,
            a.value,
            a.outcome
        );
    }
}

fn assert_gone(names: &[String]) {
    let left = topology::lab_namespaces();
    for n in names {
        assert!(!left.contains(n), "{n} is still there");
    }
    let listed = run(&["ip", "netns", "list"]);
    for n in names {
        assert!(
            !listed.contains(n.as_str()),
            "ip netns list still shows {n}"
        );
    }
}

/// Jumbo frames must cross the whole path: an echo of this many bytes
/// fills full-size segments both ways.
const BIG_ECHO: usize = 1 << 20;

/// Make `kind`, reach its portals, apply MTU 9000 and TSO off on both
/// sides, read them back, return to the defaults, describe, and destroy.
fn exercise(kind: Kind) {
    let started = Instant::now();
    let t = Topology::create(kind, Options::default()).unwrap();
    let created = started.elapsed();
    assert_eq!(t.kind(), kind);
    assert!(t.degraded().is_none(), "{:?}", t.degraded());
    for n in t.namespaces() {
        assert_eq!(topology::owner_pid(n), Some(std::process::id()), "{n}");
    }
    reach_every_portal(&t, 4096);

    let defaults: Vec<u64> = t
        .interfaces()
        .iter()
        .map(|i| mtu_of(&i.namespace, &i.name))
        .collect();
    let mut knobs = LinkKnobs {
        mtu: Some(9000),
        ..LinkKnobs::default()
    };
    knobs.initiator.tso = Some(false);
    knobs.target.tso = Some(false);
    let applied = t.apply(&knobs).unwrap();
    all_ok(&applied);
    let names: Vec<&str> = applied.iter().map(|a| a.knob.as_str()).collect();
    assert_eq!(names, ["mtu", "initiator.tso", "target.tso"]);
    for i in t.interfaces() {
        assert_eq!(
            mtu_of(&i.namespace, &i.name),
            9000 + u64::from(i.mtu_extra),
            "{} in {}",
            i.name,
            i.namespace
        );
    }
    for side in [Side::Initiator, Side::Target] {
        assert!(!t.ports(side).is_empty());
        for p in t.ports(side) {
            assert_eq!(
                feature(&p.namespace, &p.name, "tx-tcp-segmentation"),
                "tx-tcp-segmentation: off"
            );
        }
    }
    reach_every_portal(&t, BIG_ECHO);

    // The baseline again: every knob unset returns to its recorded default.
    let applied = t.apply(&LinkKnobs::default()).unwrap();
    assert!(applied.is_empty(), "{applied:?}");
    for (i, default) in t.interfaces().iter().zip(&defaults) {
        assert_eq!(mtu_of(&i.namespace, &i.name), *default, "{}", i.name);
    }
    for p in t.ports(Side::Initiator) {
        assert_eq!(
            feature(&p.namespace, &p.name, "tx-tcp-segmentation"),
            "tx-tcp-segmentation: on"
        );
    }
    reach_every_portal(&t, BIG_ECHO);

    let description = t.describe();
    eprintln!("{description}");
    assert_eq!(description.namespaces.len(), t.namespaces().len());
    for nsd in &description.namespaces {
        assert!(nsd.errors.is_empty(), "{:?}", nsd.errors);
        assert!(nsd.interfaces.iter().all(|i| !i.features.is_empty()));
    }

    let names = t.namespaces().to_vec();
    let started = Instant::now();
    t.destroy().unwrap();
    let destroyed = started.elapsed();
    assert_gone(&names);
    eprintln!("{kind}: create {created:.0?}, destroy {destroyed:.0?}");
}

#[test]
fn loopback_runs_both_sides_in_one_namespace_on_lo() {
    if !can_run("loopback") {
        return;
    }
    exercise(Kind::Loopback);
}

#[test]
fn base_has_two_paths_each_to_its_portal() {
    if !can_run("base") {
        return;
    }
    let t = Topology::create(Kind::Base, Options::default()).unwrap();
    assert_eq!(
        t.portals(),
        [
            "10.99.1.2:3260".parse().unwrap(),
            "10.99.2.2:3260".parse().unwrap()
        ]
    );
    // Each path is its own subnet: the target sees the host port of that path.
    assert_eq!(
        echo(&t, t.portals()[0], 16),
        "10.99.1.1".parse::<IpAddr>().unwrap()
    );
    assert_eq!(
        echo(&t, t.portals()[1], 16),
        "10.99.2.1".parse::<IpAddr>().unwrap()
    );
    drop(t);
    exercise(Kind::Base);
}

#[test]
fn congested_fans_four_portals_into_one_rate_limited_port() {
    if !can_run("congested") {
        return;
    }
    let t = Topology::create(Kind::Congested, Options::default()).unwrap();
    let (host, target, switch) = (
        ns(&t, Role::Host),
        ns(&t, Role::Target),
        ns(&t, Role::Switch),
    );
    assert!(
        qdisc(&host, "h0").contains("qdisc tbf"),
        "{}",
        qdisc(&host, "h0")
    );
    assert!(
        qdisc(&host, "h0").contains("rate 1Gbit"),
        "{}",
        qdisc(&host, "h0")
    );
    assert!(
        qdisc(&switch, "sh0").contains("rate 1Gbit"),
        "{}",
        qdisc(&switch, "sh0")
    );
    // Each portal's replies leave through its own target port (4:1 fan-in).
    for (n, portal) in t.portals().into_iter().enumerate() {
        let before: Vec<u64> = (0..4)
            .map(|i| tx_packets(&target, &format!("t{i}")))
            .collect();
        echo(&t, portal, 64 * 1024);
        let after: Vec<u64> = (0..4)
            .map(|i| tx_packets(&target, &format!("t{i}")))
            .collect();
        for i in 0..4 {
            let sent = after[i] - before[i];
            if i == n {
                assert!(sent >= 3, "portal {portal}: t{i} sent {sent}");
            } else {
                assert_eq!(
                    sent, 0,
                    "portal {portal}: t{i} sent {sent} packets for another port's portal"
                );
            }
        }
    }
    drop(t);
    exercise(Kind::Congested);
}

#[test]
fn vxlan_carries_the_path_over_an_overlay() {
    if !can_run("vxlan") {
        return;
    }
    let t = Topology::create(Kind::Vxlan, Options::default()).unwrap();
    let (host, target) = (ns(&t, Role::Host), ns(&t, Role::Target));
    let detail = run(&["ip", "-n", &host, "-d", "link", "show", "dev", "vx0"]);
    assert!(
        detail.contains("vxlan id 4242") && detail.contains("dstport 4789"),
        "{detail}"
    );
    assert_eq!((mtu_of(&host, "h0"), mtu_of(&host, "vx0")), (1500, 1450));
    assert_eq!(
        (mtu_of(&target, "t0"), mtu_of(&target, "vx0")),
        (1500, 1450)
    );
    assert_eq!(t.portals(), ["10.99.5.2:3260".parse().unwrap()]);
    // The portal's traffic is encapsulated: the underlay counts it.
    let before = tx_packets(&host, "h0");
    echo(&t, t.portals()[0], 64 * 1024);
    assert!(tx_packets(&host, "h0") > before);
    drop(t);
    exercise(Kind::Vxlan);
}

fn find<'a>(applied: &'a [Applied], knob: &str) -> &'a Applied {
    applied
        .iter()
        .find(|a| a.knob == knob)
        .unwrap_or_else(|| panic!("no {knob} in {applied:?}"))
}

#[test]
fn knobs_that_cannot_apply_say_why() {
    if !can_run("knobs_that_cannot_apply_say_why") {
        return;
    }
    let lo = Topology::create(Kind::Loopback, Options::default()).unwrap();
    let mut knobs = LinkKnobs {
        rate_mbit: Some(100),
        ..LinkKnobs::default()
    };
    knobs.target.rx = Some(false); // fixed on lo
    knobs.initiator.sg = Some(false); // fixed on lo
    knobs.initiator.gro = Some(false);
    knobs.target.gro = Some(true); // the same lo: a conflict
    knobs.initiator.gso = Some(false);
    let applied = lo.apply(&knobs).unwrap();
    eprintln!("{applied:#?}");
    let rx = find(&applied, "target.rx")
        .outcome
        .clone()
        .unwrap_err()
        .to_string();
    assert!(
        rx.contains("fixed on by the driver") && rx.contains("rx-checksumming: on [fixed]"),
        "{rx}"
    );
    assert!(find(&applied, "initiator.sg")
        .outcome
        .clone()
        .unwrap_err()
        .to_string()
        .contains("fixed"));
    assert!(find(&applied, "rate_mbit")
        .outcome
        .clone()
        .unwrap_err()
        .to_string()
        .contains("no link to rate-limit"));
    assert!(find(&applied, "initiator.gro")
        .outcome
        .clone()
        .unwrap_err()
        .to_string()
        .contains("both sides"));
    assert!(find(&applied, "target.gro").outcome.is_err());
    assert_eq!(find(&applied, "initiator.gso").outcome, Ok(()));
    let lo_ns = ns(&lo, Role::Host);
    assert_eq!(
        feature(&lo_ns, "lo", "generic-segmentation-offload"),
        "generic-segmentation-offload: off"
    );
    assert_eq!(
        feature(&lo_ns, "lo", "generic-receive-offload"),
        "generic-receive-offload: on"
    );
    lo.destroy().unwrap();

    // On veth, tx off keeps TSO off whatever is asked: reported, not hidden.
    let base = Topology::create(Kind::Base, Options::default()).unwrap();
    let mut knobs = LinkKnobs::default();
    knobs.initiator.tx = Some(false);
    knobs.initiator.tso = Some(true);
    knobs.target.gro = Some(true);
    let applied = base.apply(&knobs).unwrap();
    eprintln!("{applied:#?}");
    assert_eq!(find(&applied, "initiator.tx").outcome, Ok(()));
    assert_eq!(find(&applied, "target.gro").outcome, Ok(()));
    let tso = find(&applied, "initiator.tso")
        .outcome
        .clone()
        .unwrap_err()
        .to_string();
    assert!(
        tso.contains("the kernel keeps it off") && tso.contains("[requested on]"),
        "{tso}"
    );
    let host = ns(&base, Role::Host);
    assert_eq!(
        feature(&host, "h1", "tx-checksum-ip-generic"),
        "tx-checksum-ip-generic: off"
    );
    // Back to the baseline: tx on brings TSO back.
    all_ok(&base.apply(&LinkKnobs::default()).unwrap());
    assert_eq!(
        feature(&host, "h1", "tx-tcp-segmentation"),
        "tx-tcp-segmentation: on"
    );
    assert_eq!(
        feature(&ns(&base, Role::Target), "t0", "generic-receive-offload"),
        "generic-receive-offload: off"
    );
    base.destroy().unwrap();
}

#[test]
fn rate_is_a_tbf_on_the_host_port_and_its_peer_and_goes_back() {
    if !can_run("rate") {
        return;
    }
    let t = Topology::create(Kind::Base, Options::default()).unwrap();
    let (host, target) = (ns(&t, Role::Host), ns(&t, Role::Target));
    assert!(!qdisc(&host, "h0").contains("tbf"));
    let applied = t
        .apply(&LinkKnobs {
            rate_mbit: Some(200),
            ..LinkKnobs::default()
        })
        .unwrap();
    all_ok(&applied);
    assert_eq!(applied.len(), 1);
    for (n, dev) in [
        (&host, "h0"),
        (&host, "h1"),
        (&target, "t0"),
        (&target, "t1"),
    ] {
        assert!(
            qdisc(n, dev).contains("rate 200Mbit"),
            "{dev}: {}",
            qdisc(n, dev)
        );
    }
    assert!(t.apply(&LinkKnobs::default()).unwrap().is_empty());
    assert!(!qdisc(&host, "h0").contains("tbf"));
    assert!(!qdisc(&target, "t1").contains("tbf"));
    drop(t);

    let t = Topology::create(
        Kind::Congested,
        Options {
            congested_rate_mbit: 300,
            ..Options::default()
        },
    )
    .unwrap();
    let (host, switch) = (ns(&t, Role::Host), ns(&t, Role::Switch));
    assert!(qdisc(&host, "h0").contains("rate 300Mbit"));
    all_ok(
        &t.apply(&LinkKnobs {
            rate_mbit: Some(50),
            ..LinkKnobs::default()
        })
        .unwrap(),
    );
    assert!(
        qdisc(&host, "h0").contains("rate 50Mbit") && qdisc(&switch, "sh0").contains("rate 50Mbit")
    );
    assert!(t.apply(&LinkKnobs::default()).unwrap().is_empty());
    assert!(
        qdisc(&host, "h0").contains("rate 300Mbit")
            && qdisc(&switch, "sh0").contains("rate 300Mbit")
    );
}

#[test]
fn a_panic_still_removes_the_namespaces() {
    if !can_run("panic") {
        return;
    }
    let names = std::sync::Mutex::new(Vec::new());
    let result = std::panic::catch_unwind(|| {
        let t = Topology::create(Kind::Congested, Options::default()).unwrap();
        names.lock().unwrap().extend(t.namespaces().iter().cloned());
        assert_eq!(
            topology::lab_namespaces()
                .iter()
                .filter(|n| t.namespaces().contains(n))
                .count(),
            3
        );
        panic!("on purpose, with the topology alive");
    });
    assert!(result.is_err());
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 3);
    assert_gone(&names);
}

/// Set in the child of `cleanup_stale_removes_what_a_crashed_run_left`.
const CRASH_ENV: &str = "ISOE_LAB_TOPOLOGY_CRASH";

/// Not a test of its own: the body of the child process that makes a
/// topology and dies without dropping it.
#[test]
fn crash_helper() {
    if std::env::var_os(CRASH_ENV).is_none() {
        return;
    }
    let t = Topology::create(Kind::Vxlan, Options::default()).unwrap();
    println!("NAMESPACES {}", t.namespaces().join(" "));
    std::io::stdout().flush().unwrap();
    std::process::abort(); // no unwinding, no Drop: as a crash or kill -9
}

#[test]
fn cleanup_stale_removes_what_a_crashed_run_left() {
    if !can_run("cleanup_stale") {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_helper", "--nocapture", "--test-threads=1"])
        .env(CRASH_ENV, "1")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the helper should have aborted");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let left: Vec<String> = stdout
        .lines()
        .find_map(|l| l.split_once("NAMESPACES ").map(|(_, names)| names))
        .unwrap_or_else(|| panic!("helper printed no namespaces: {stdout}"))
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(left.len(), 2);
    let existing = topology::lab_namespaces();
    assert!(
        left.iter().all(|n| existing.contains(n)),
        "the crash left {left:?}; {existing:?} exist"
    );

    // A namespace named like ours but for a PID that is alive (this one) stays.
    let removed = topology::cleanup_stale();
    for n in &left {
        assert!(removed.contains(n), "{n} not removed: {removed:?}");
    }
    assert!(removed
        .iter()
        .all(|n| topology::owner_pid(n) != Some(std::process::id())));
    assert_gone(&left);
}

#[test]
fn create_and_destroy_timings() {
    if !can_run("timings") {
        return;
    }
    for kind in Kind::ALL {
        let mut ms = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let t = Topology::create(kind, Options::default()).unwrap();
            let created = started.elapsed();
            let started = Instant::now();
            t.destroy().unwrap();
            ms.push((created.as_millis(), started.elapsed().as_millis()));
        }
        eprintln!("timing {kind}: (create ms, destroy ms) x3 = {ms:?}");
    }
}

#[test]
fn nic_knobs_a_veth_lacks_are_skipped_and_sysctls_stay_in_the_namespaces() {
    if !can_run("nic_knobs_a_veth_lacks_are_skipped_and_sysctls_stay_in_the_namespaces") {
        return;
    }
    let t = Topology::create(Kind::Base, Options::default()).unwrap();
    let mut knobs = LinkKnobs::default();
    knobs.nic.rx_ring = Some(512);
    let applied = t.apply(&knobs).unwrap();
    let why = find(&applied, "rx_ring")
        .outcome
        .as_ref()
        .unwrap_err()
        .to_string();
    assert!(why.contains("Operation not supported"), "{why}");
    let host = ns(&t, Role::Host);
    let timestamps = |ns: &str| {
        run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "cat",
            "/proc/sys/net/ipv4/tcp_timestamps",
        ])
    };
    let machine = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let sysctls: std::collections::BTreeMap<String, String> = [
        ("net.ipv4.tcp_timestamps".to_string(), "0".to_string()),
        ("vm.swappiness".to_string(), "10".to_string()),
    ]
    .into();
    let applied = t.apply_sysctls(&sysctls);
    assert_eq!(
        find(&applied, "sysctl.net.ipv4.tcp_timestamps").outcome,
        Ok(())
    );
    let why = find(&applied, "sysctl.vm.swappiness")
        .outcome
        .as_ref()
        .unwrap_err()
        .to_string();
    assert!(why.contains("whole machine"), "{why}");
    assert_eq!(timestamps(&host).trim(), "0");
    assert_eq!(timestamps(&ns(&t, Role::Target)).trim(), "0");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        machine
    );
    // The next case sets none: back to the namespace's own.
    assert!(t.apply_sysctls(&Default::default()).is_empty());
    assert_eq!(timestamps(&host).trim(), "1");
    t.destroy().unwrap();
}
