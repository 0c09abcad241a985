//! The lab's knobs on a real NIC over SSH: the test bed VM's
//! virtio port, which answers more of ethtool than a veth does (rings,
//! channels) and is also the port the SSH connection runs over (QEMU's user
//! network), so the case keeps to changes that leave it usable: MTU 1400,
//! GRO off, a smaller receive ring, a rate of 500 Mbit/s, two sysctls.
//! Before and after, the dump of the port's ethtool settings, MTU, qdisc
//! and the sysctls must be identical.

mod support;

use isoe_lab::host::Host;
use isoe_lab::hostknobs::{self, Guard, Port};
use isoe_lab::knobs::KnobSet;
use isoe_lab::link::{LinkKnobs, NicKnobs, Offloads, Side};
use std::collections::BTreeMap;
use support::vm::Vm;

#[test]
fn knobs_on_the_vms_ssh_port_are_applied_and_put_back() {
    let Some(vm) = Vm::start_or_skip("knobs_on_the_vms_ssh_port_are_applied_and_put_back") else {
        return;
    };
    let host = Host::parse(&vm.ssh_url(), Some(vm.key()), vm.run_dir()).expect("the VM's URL");
    let route = host
        .run(&["ip", "-j", "route", "show", "default"])
        .expect("ip route");
    let route: serde_json::Value = serde_json::from_str(&route).expect("ip -j");
    let dev = route[0]["dev"]
        .as_str()
        .expect("a default route")
        .to_owned();
    // One machine is both ends here: one port with both sides.
    let ports = [
        Port::new(host.clone(), &dev, Side::Initiator),
        Port::new(host.clone(), &dev, Side::Target),
    ];
    let names = ["net.ipv4.tcp_timestamps", "vm.swappiness"].map(String::from);
    let before = hostknobs::dump(&ports, &names);
    assert!(before.contains("mtu 1500, up"), "{before}");
    let journal = vm.run_dir().join("knobs.journal");
    let mut guard = Guard::begin(&ports, &names, &journal).expect("read the VM's knobs");
    let state = &guard.saved().state().ports;
    assert_eq!(state.len(), 1);
    assert!(state[0].carries_ssh, "{dev} carries the SSH connection");

    let rings = hostknobs::parse::parse_settings(&host.run(&["ethtool", "-g", &dev]).unwrap());
    let smaller_ring = rings.number("RX").expect("virtio has rings") / 2;
    let case = KnobSet {
        link: LinkKnobs {
            mtu: Some(1400),
            rate_mbit: Some(500),
            initiator: Offloads {
                gro: Some(false),
                ..Offloads::default()
            },
            target: Offloads {
                gro: Some(false),
                ..Offloads::default()
            },
            nic: NicKnobs {
                rx_ring: Some(smaller_ring),
                channels: Some(1),
                rx_usecs: Some(10),
                flow_control: Some(false),
                ..NicKnobs::default()
            },
        },
        sysctl: [("net.ipv4.tcp_timestamps", "0"), ("vm.swappiness", "10")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ..KnobSet::default()
    };
    let got: BTreeMap<String, Result<(), String>> = guard
        .apply(&case)
        .into_iter()
        .map(|a| (a.knob, a.outcome.map_err(|e| e.to_string())))
        .collect();
    eprintln!("applied on the VM: {got:#?}");
    for ok in [
        "mtu",
        "rate_mbit",
        "initiator.gro",
        "target.gro",
        "rx_ring",
        "channels",
        "sysctl.net.ipv4.tcp_timestamps",
        "sysctl.vm.swappiness",
    ] {
        assert_eq!(got[ok], Ok(()), "{ok}: {got:#?}");
    }
    // virtio_net takes no interrupt coalescing in usecs and no pause:
    // skipped with ethtool's words.
    for skipped in ["rx_usecs", "flow_control"] {
        let why = got[skipped].as_ref().unwrap_err();
        assert!(why.contains("Operation not supported"), "{skipped}: {why}");
    }
    let read = |path: &str| host.read(path).expect("read").trim().to_owned();
    assert_eq!(read(&format!("/sys/class/net/{dev}/mtu")), "1400");
    assert_eq!(read("/proc/sys/net/ipv4/tcp_timestamps"), "0");
    assert_eq!(read("/proc/sys/vm/swappiness"), "10");
    let now = hostknobs::parse::parse_settings(&host.run(&["ethtool", "-g", &dev]).unwrap());
    assert_eq!(now.number("RX"), Some(smaller_ring));
    let qdisc = host.run(&["tc", "qdisc", "show", "dev", &dev]).unwrap();
    assert!(
        qdisc.contains("tbf") && qdisc.contains("500Mbit"),
        "{qdisc}"
    );
    // Over the port just changed, SSH still carries a screenful both ways.
    let big = host
        .run(&["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"])
        .expect("200 kB over the changed port");
    assert_eq!(big.len(), 200_000);

    guard.finish().expect("everything back");
    assert!(!journal.exists());
    let after = hostknobs::dump(&ports, &names);
    assert_eq!(after, before, "the VM's port and sysctls as they were");
    host.close();
}
