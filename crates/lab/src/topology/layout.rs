//! What each topology is made of, as data: the commands that build it inside
//! its namespaces, its portals and host addresses, and every interface with
//! the knobs that touch it. Pure, so the exact command lines are tested
//! without root.

use super::{Interface, Kind, Role};
use crate::link::Side;
use crate::netcmd;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// VxLAN network identifier of the `vxlan` topology's overlay.
pub const VXLAN_VNI: u32 = 4242;

/// Bytes VxLAN over IPv4 adds to a frame: outer Ethernet 14 + IPv4 20 +
/// UDP 8 + VxLAN 8 (RFC 7348 §5). The underlay's MTU is the overlay's
/// plus this, as the kernel's own default for a VxLAN device assumes.
pub const VXLAN_OVERHEAD: u32 = 50;

/// First routing table of the `congested` target's per-portal tables.
const CONGESTED_TABLE_BASE: u32 = 100;

/// The namespace names of one topology instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    pub host: String,
    pub target: String,
    pub switch: String,
}

impl Names {
    /// Names for instance `prefix` (`isoe-lab-<PID>-<n>`); on `loopback`
    /// host and target share one namespace, `<prefix>-lo`.
    pub fn new(prefix: &str, kind: Kind) -> Names {
        if kind == Kind::Loopback {
            let lo = format!("{prefix}-lo");
            return Names {
                host: lo.clone(),
                target: lo,
                switch: String::new(),
            };
        }
        Names {
            host: format!("{prefix}-host"),
            target: format!("{prefix}-tgt"),
            switch: format!("{prefix}-sw"),
        }
    }

    /// The namespace a role runs in.
    pub fn of(&self, role: Role) -> &str {
        match role {
            Role::Host => &self.host,
            Role::Target => &self.target,
            Role::Switch => &self.switch,
        }
    }
}

/// A topology before it is made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    /// Namespaces to add, in order.
    pub namespaces: Vec<String>,
    /// Commands run after the namespaces exist, in order.
    pub setup: Vec<Vec<String>>,
    /// Target portals, in order.
    pub portals: Vec<SocketAddr>,
    /// The initiator's addresses, one per host port.
    pub host_addresses: Vec<IpAddr>,
    /// Every interface knobs may touch.
    pub interfaces: Vec<Interface>,
    /// The host port's rate when a case does not set one.
    pub default_rate_mbit: Option<u32>,
    /// What a reader of the report should know about this topology.
    pub notes: Vec<String>,
}

/// Sysctls of every lab namespace: no IPv6, so no router solicitations or
/// MLD reports run over the measured links (and per-port counters count
/// only the test's traffic).
const QUIET: [(&str, &str); 2] = [
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
];

/// Build the layout of `kind`.
pub(crate) fn layout(kind: Kind, names: &Names, port: u16, congested_rate_mbit: u32) -> Layout {
    let mut l = match kind {
        Kind::Loopback => loopback(names, port),
        Kind::Base => base(names, port),
        Kind::Congested => congested(names, port, congested_rate_mbit),
        Kind::Vxlan => vxlan(names, port),
    };
    // Quiet links first, before any interface exists, so `default` covers them.
    let quiet: Vec<Vec<String>> = l
        .namespaces
        .iter()
        .map(|ns| netcmd::sysctls(ns, &QUIET))
        .collect();
    let lo_up: Vec<Vec<String>> = l
        .namespaces
        .iter()
        .map(|ns| netcmd::link_up(ns, "lo"))
        .collect();
    l.setup.splice(0..0, quiet.into_iter().chain(lo_up));
    l
}

fn empty(namespaces: Vec<String>) -> Layout {
    Layout {
        namespaces,
        setup: Vec::new(),
        portals: Vec::new(),
        host_addresses: Vec::new(),
        interfaces: Vec::new(),
        default_rate_mbit: None,
        notes: Vec::new(),
    }
}

fn iface(role: Role, names: &Names, name: &str, kind: &'static str, sides: &[Side]) -> Interface {
    Interface {
        role,
        namespace: names.of(role).to_string(),
        name: name.to_string(),
        kind,
        sides: sides.to_vec(),
        mtu_extra: 0,
        rate_limited: false,
        address: None,
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

/// One namespace with only `lo`: target and initiator both on 127.0.0.1, so
/// knobs on `lo` touch nothing outside the lab.
fn loopback(names: &Names, port: u16) -> Layout {
    let mut l = empty(vec![names.host.clone()]);
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    l.portals.push(SocketAddr::new(localhost, port));
    l.host_addresses.push(localhost);
    let mut lo = iface(
        Role::Host,
        names,
        "lo",
        "loopback",
        &[Side::Initiator, Side::Target],
    );
    lo.address = Some("127.0.0.1/8".to_string());
    l.interfaces.push(lo);
    l.notes.push(
        "loopback: initiator and target share lo, so an offload set for either side \
         applies to both; there is no link to rate-limit"
            .to_string(),
    );
    l
}

/// Seed 001 Figure 1: a host with two ports, two target portals, 1:1, two
/// paths. Each path is one veth pair in its own /24 (the seed's two switches
/// carry no other traffic, so a direct link stands in for each).
fn base(names: &Names, port: u16) -> Layout {
    let mut l = empty(vec![names.host.clone(), names.target.clone()]);
    for i in 0..2u8 {
        let (h, t) = (format!("h{i}"), format!("t{i}"));
        let (host_ip, target_ip) = (v4(10, 99, 1 + i, 1), v4(10, 99, 1 + i, 2));
        add_veth(
            &mut l,
            names,
            (Role::Host, &h, Some(Side::Initiator)),
            (Role::Target, &t, Some(Side::Target)),
        );
        address(&mut l, Role::Host, &h, names, &format!("{host_ip}/24"));
        address(&mut l, Role::Target, &t, names, &format!("{target_ip}/24"));
        l.portals.push(SocketAddr::new(IpAddr::V4(target_ip), port));
        l.host_addresses.push(IpAddr::V4(host_ip));
    }
    // Rate (a link speed): the host port limits what it sends, its peer what
    // the host receives.
    for i in l.interfaces.iter_mut() {
        i.rate_limited = true;
    }
    up_all(&mut l);
    l
}

/// Seed 001 Figure 2: four target ports into one host port through one
/// switch (a Linux bridge in its own namespace), 4:1, the host port
/// rate-limited so it is the bottleneck.
fn congested(names: &Names, port: u16, rate_mbit: u32) -> Layout {
    let mut l = empty(vec![
        names.host.clone(),
        names.target.clone(),
        names.switch.clone(),
    ]);
    let (host_ns, target_ns, sw_ns) = (&names.host, &names.target, &names.switch);
    l.setup.push(netcmd::bridge_add(sw_ns, "br0"));
    add_veth(
        &mut l,
        names,
        (Role::Host, "h0", Some(Side::Initiator)),
        (Role::Switch, "sh0", None),
    );
    for i in 0..4 {
        add_veth(
            &mut l,
            names,
            (Role::Target, &format!("t{i}"), Some(Side::Target)),
            (Role::Switch, &format!("st{i}"), None),
        );
    }
    // The bridge comes last so MTU changes reach its ports first.
    l.interfaces
        .push(iface(Role::Switch, names, "br0", "bridge", &[]));
    for dev in ["sh0", "st0", "st1", "st2", "st3"] {
        l.setup.push(netcmd::set_master(sw_ns, dev, "br0"));
    }
    let host_ip = v4(10, 99, 3, 1);
    address(&mut l, Role::Host, "h0", names, &format!("{host_ip}/24"));
    l.host_addresses.push(IpAddr::V4(host_ip));
    // Four ports of one namespace in one subnet: answer ARP only on the port
    // that owns the address (arp_ignore=1, arp_announce=2) and send each
    // portal's replies out of its own port (a routing table per source), or
    // every portal's traffic would share t0 and the 4:1 fan-in would be 1:1.
    l.setup.push(netcmd::sysctls(
        target_ns,
        &[
            ("net.ipv4.conf.all.arp_ignore", "1"),
            ("net.ipv4.conf.all.arp_announce", "2"),
        ],
    ));
    for i in 0..4u8 {
        let ip = v4(10, 99, 3, 2 + i);
        address(
            &mut l,
            Role::Target,
            &format!("t{i}"),
            names,
            &format!("{ip}/24"),
        );
        l.portals.push(SocketAddr::new(IpAddr::V4(ip), port));
    }
    up_all(&mut l);
    for i in 0..4u8 {
        let (ip, table) = (
            v4(10, 99, 3, 2 + i).to_string(),
            CONGESTED_TABLE_BASE + u32::from(i),
        );
        l.setup.push(netcmd::route_add_table(
            target_ns,
            "10.99.3.0/24",
            &format!("t{i}"),
            &ip,
            table,
        ));
        l.setup.push(netcmd::rule_add(target_ns, &ip, table));
    }
    // Rate: the host port's egress (writes) and the switch port facing the
    // host (reads: the four target ports converge there, as on the seed's
    // switch).
    for i in l
        .interfaces
        .iter_mut()
        .filter(|i| i.name == "h0" || i.name == "sh0")
    {
        i.rate_limited = true;
    }
    l.setup.push(netcmd::tbf(host_ns, "h0", rate_mbit));
    l.setup.push(netcmd::tbf(sw_ns, "sh0", rate_mbit));
    l.default_rate_mbit = Some(rate_mbit);
    l.notes.push(format!(
        "congested: host port h0 and the switch port facing it (sh0) rate-limited by tc tbf \
         to {rate_mbit} Mbit/s unless a case sets rate_mbit"
    ));
    l
}

/// Seed 002: one base path carried over a VxLAN overlay: an underlay veth
/// pair, a VxLAN device on each end (fixed VNI, UDP 4789), the portal on
/// the overlay. Underlay MTU = overlay MTU + 50.
fn vxlan(names: &Names, port: u16) -> Layout {
    let mut l = empty(vec![names.host.clone(), names.target.clone()]);
    add_veth(
        &mut l,
        names,
        (Role::Host, "h0", Some(Side::Initiator)),
        (Role::Target, "t0", Some(Side::Target)),
    );
    let (h_under, t_under) = (v4(10, 99, 4, 1), v4(10, 99, 4, 2));
    let (h_over, t_over) = (v4(10, 99, 5, 1), v4(10, 99, 5, 2));
    address(&mut l, Role::Host, "h0", names, &format!("{h_under}/24"));
    address(&mut l, Role::Target, "t0", names, &format!("{t_under}/24"));
    for i in l.interfaces.iter_mut() {
        i.mtu_extra = VXLAN_OVERHEAD;
        i.rate_limited = true;
    }
    for (role, side, under, local, remote, over) in [
        (Role::Host, Side::Initiator, "h0", h_under, t_under, h_over),
        (Role::Target, Side::Target, "t0", t_under, h_under, t_over),
    ] {
        let ns = names.of(role);
        l.setup.push(netcmd::vxlan_add(
            ns,
            "vx0",
            VXLAN_VNI,
            &local.to_string(),
            &remote.to_string(),
            under,
        ));
        // Offloads apply to the underlay port (seed 002 toggles them on the
        // physical NIC) and to the VxLAN device too, whose own TSO and GRO
        // decide whether TCP segments before or after encapsulation here.
        l.interfaces
            .push(iface(role, names, "vx0", "vxlan", &[side]));
        address(&mut l, role, "vx0", names, &format!("{over}/24"));
    }
    l.portals.push(SocketAddr::new(IpAddr::V4(t_over), port));
    l.host_addresses.push(IpAddr::V4(h_over));
    up_all(&mut l);
    l.notes.push(format!(
        "vxlan: VNI {VXLAN_VNI}, UDP port {}; the MTU knob is the overlay's (vx0), the \
         underlay (h0, t0) gets {VXLAN_OVERHEAD} more; offloads apply to both",
        netcmd::VXLAN_PORT
    ));
    l
}

fn add_veth(
    l: &mut Layout,
    names: &Names,
    a: (Role, &str, Option<Side>),
    b: (Role, &str, Option<Side>),
) {
    l.setup
        .push(netcmd::veth_pair(names.of(a.0), a.1, names.of(b.0), b.1));
    for (role, dev, side) in [a, b] {
        l.interfaces
            .push(iface(role, names, dev, "veth", side.as_slice()));
    }
}

fn address(l: &mut Layout, role: Role, dev: &str, names: &Names, cidr: &str) {
    l.setup.push(netcmd::addr_add(names.of(role), dev, cidr));
    if let Some(i) = l
        .interfaces
        .iter_mut()
        .find(|i| i.role == role && i.name == dev)
    {
        i.address = Some(cidr.to_string());
    }
}

/// Bring every interface made so far up, underlays before the devices on them.
fn up_all(l: &mut Layout) {
    let mut order: Vec<&Interface> = l.interfaces.iter().collect();
    order.sort_by_key(|i| std::cmp::Reverse(i.mtu_extra));
    let ups: Vec<Vec<String>> = order
        .iter()
        .map(|i| netcmd::link_up(&i.namespace, &i.name))
        .collect();
    l.setup.extend(ups);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(kind: Kind) -> Names {
        Names::new("isoe-lab-7-0", kind)
    }

    fn has(l: &Layout, cmd: &[&str]) -> bool {
        l.setup
            .iter()
            .any(|c| c.iter().map(String::as_str).eq(cmd.iter().copied()))
    }

    #[test]
    fn names_carry_pid_counter_and_role_and_fit_interfaces_in_15_chars() {
        let n = names(Kind::Base);
        assert_eq!(
            (n.host.as_str(), n.target.as_str(), n.switch.as_str()),
            ("isoe-lab-7-0-host", "isoe-lab-7-0-tgt", "isoe-lab-7-0-sw")
        );
        let lo = names(Kind::Loopback);
        assert_eq!(
            (lo.host.as_str(), lo.target.as_str()),
            ("isoe-lab-7-0-lo", "isoe-lab-7-0-lo")
        );
        for kind in Kind::ALL {
            for i in layout(kind, &names(kind), 3260, 1000).interfaces {
                assert!(i.name.len() <= 15, "{}", i.name);
            }
        }
    }

    #[test]
    fn the_plans_count_of_paths_is_each_layout_s_portals() {
        // A plan derives its depths from TopologyKind::paths before any
        // namespace exists: it must be what the layout makes.
        for kind in Kind::ALL {
            let plan_kind = crate::plan::TopologyKind::ALL
                .into_iter()
                .find(|t| t.as_str() == kind.to_string())
                .unwrap();
            let portals = layout(kind, &names(kind), 3260, 1000).portals.len() as u32;
            assert_eq!(plan_kind.paths(), Some(portals), "{kind}");
        }
    }

    #[test]
    fn loopback_is_lo_alone_shared_by_both_sides() {
        let l = layout(Kind::Loopback, &names(Kind::Loopback), 3260, 1000);
        assert_eq!(l.namespaces, ["isoe-lab-7-0-lo"]);
        assert_eq!(l.portals, ["127.0.0.1:3260".parse().unwrap()]);
        assert_eq!(l.interfaces.len(), 1);
        assert_eq!(l.interfaces[0].sides, [Side::Initiator, Side::Target]);
        assert!(!l.interfaces[0].rate_limited);
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-lo",
                "link",
                "set",
                "dev",
                "lo",
                "up"
            ]
        ));
        assert_eq!(l.default_rate_mbit, None);
    }

    #[test]
    fn base_has_two_paths_one_subnet_each() {
        let l = layout(Kind::Base, &names(Kind::Base), 3260, 1000);
        assert_eq!(
            l.portals,
            [
                "10.99.1.2:3260".parse().unwrap(),
                "10.99.2.2:3260".parse().unwrap()
            ]
        );
        assert_eq!(
            l.host_addresses,
            [
                "10.99.1.1".parse::<IpAddr>().unwrap(),
                "10.99.2.1".parse().unwrap()
            ]
        );
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-host",
                "link",
                "add",
                "h1",
                "type",
                "veth",
                "peer",
                "name",
                "t1",
                "netns",
                "isoe-lab-7-0-tgt"
            ]
        ));
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-tgt",
                "addr",
                "add",
                "10.99.2.2/24",
                "dev",
                "t1"
            ]
        ));
        let initiator: Vec<&str> = l
            .interfaces
            .iter()
            .filter(|i| i.sides == [Side::Initiator])
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(initiator, ["h0", "h1"]);
        // The first commands quiet IPv6 before any interface exists.
        assert_eq!(l.setup[0][4..6], ["sh".to_string(), "-c".to_string()]);
    }

    #[test]
    fn congested_fans_four_ports_into_one_through_a_bridge_with_tbf() {
        let l = layout(Kind::Congested, &names(Kind::Congested), 3260, 1000);
        assert_eq!(l.namespaces.len(), 3);
        assert_eq!(l.portals.len(), 4);
        assert_eq!(l.portals[3], "10.99.3.5:3260".parse().unwrap());
        assert_eq!(l.host_addresses, ["10.99.3.1".parse::<IpAddr>().unwrap()]);
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-sw",
                "link",
                "set",
                "dev",
                "st3",
                "master",
                "br0"
            ]
        ));
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-tgt",
                "rule",
                "add",
                "from",
                "10.99.3.4",
                "table",
                "102"
            ]
        ));
        assert!(has(
            &l,
            &[
                "tc",
                "-n",
                "isoe-lab-7-0-host",
                "qdisc",
                "replace",
                "dev",
                "h0",
                "root",
                "tbf",
                "rate",
                "1000mbit",
                "burst",
                "131072",
                "latency",
                "20ms"
            ]
        ));
        assert!(has(
            &l,
            &[
                "tc",
                "-n",
                "isoe-lab-7-0-sw",
                "qdisc",
                "replace",
                "dev",
                "sh0",
                "root",
                "tbf",
                "rate",
                "1000mbit",
                "burst",
                "131072",
                "latency",
                "20ms"
            ]
        ));
        let limited: Vec<&str> = l
            .interfaces
            .iter()
            .filter(|i| i.rate_limited)
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(limited, ["h0", "sh0"]);
        assert_eq!(l.default_rate_mbit, Some(1000));
        // Routes name an up device, so they come after the links are up.
        let pos = |cmd: &[&str]| {
            l.setup
                .iter()
                .position(|c| c.iter().map(String::as_str).eq(cmd.iter().copied()))
                .unwrap()
        };
        assert!(
            pos(&[
                "ip",
                "-n",
                "isoe-lab-7-0-tgt",
                "link",
                "set",
                "dev",
                "t0",
                "up"
            ]) < pos(&[
                "ip",
                "-n",
                "isoe-lab-7-0-tgt",
                "route",
                "add",
                "10.99.3.0/24",
                "dev",
                "t0",
                "src",
                "10.99.3.2",
                "table",
                "100"
            ])
        );
        assert_eq!(l.interfaces.last().unwrap().name, "br0");
    }

    #[test]
    fn vxlan_overlay_rides_the_underlay_50_bytes_smaller() {
        let l = layout(Kind::Vxlan, &names(Kind::Vxlan), 3260, 1000);
        assert_eq!(l.portals, ["10.99.5.2:3260".parse().unwrap()]);
        assert_eq!(l.host_addresses, ["10.99.5.1".parse::<IpAddr>().unwrap()]);
        assert!(has(
            &l,
            &[
                "ip",
                "-n",
                "isoe-lab-7-0-tgt",
                "link",
                "add",
                "vx0",
                "type",
                "vxlan",
                "id",
                "4242",
                "local",
                "10.99.4.2",
                "remote",
                "10.99.4.1",
                "dstport",
                "4789",
                "dev",
                "t0"
            ]
        ));
        let extra: Vec<(&str, u32)> = l
            .interfaces
            .iter()
            .map(|i| (i.name.as_str(), i.mtu_extra))
            .collect();
        assert_eq!(extra, [("h0", 50), ("t0", 50), ("vx0", 0), ("vx0", 0)]);
        let pos = |ns: &str, dev: &str| {
            l.setup
                .iter()
                .position(|c| {
                    c.iter()
                        .map(String::as_str)
                        .eq(["ip", "-n", ns, "link", "set", "dev", dev, "up"])
                })
                .unwrap()
        };
        assert!(pos("isoe-lab-7-0-host", "h0") < pos("isoe-lab-7-0-host", "vx0"));
    }
}
