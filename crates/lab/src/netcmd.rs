//! The `ip`, `ethtool`, `tc` and `sh` command lines the lab runs to build
//! topologies and apply link knobs, as pure functions returning argument
//! vectors (program first) so each one is unit-tested exactly; plus
//! [`run`], which executes one, and a parser for `ethtool -k` output.
//!
//! Every command names a namespace: `ip -n NS` and `tc -n NS` switch
//! namespaces themselves; `ethtool` and `sh` are wrapped in
//! `ip netns exec NS`. Nothing here touches the caller's own namespace.

use std::path::PathBuf;
use std::process::Command;

/// UDP port of the VxLAN overlay (IANA's, RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;

/// `tbf` queue limit in time: what a switch port may buffer before it drops
/// (a 2013 10GbE switch port held a few MB, about this at 1 Gbit/s).
pub const TBF_LATENCY_MS: u32 = 20;

/// `ip netns add NS`.
pub fn netns_add(ns: &str) -> Vec<String> {
    argv(&["ip", "netns", "add", ns])
}

/// `ip netns del NS`: also destroys every interface, bridge, VxLAN device and
/// qdisc inside once no process holds the namespace.
pub fn netns_del(ns: &str) -> Vec<String> {
    argv(&["ip", "netns", "del", ns])
}

/// `ip netns pids NS`: processes still inside.
pub fn netns_pids(ns: &str) -> Vec<String> {
    argv(&["ip", "netns", "pids", ns])
}

/// `ip netns exec NS PROGRAM ARGS...`.
pub fn in_ns(ns: &str, program_and_args: &[&str]) -> Vec<String> {
    let mut v = argv(&["ip", "netns", "exec", ns]);
    v.extend(program_and_args.iter().map(|s| s.to_string()));
    v
}

/// A veth pair made straight into two namespaces, so no half-made interface
/// is ever left in the caller's namespace.
pub fn veth_pair(ns_a: &str, dev_a: &str, ns_b: &str, dev_b: &str) -> Vec<String> {
    argv(&[
        "ip", "-n", ns_a, "link", "add", dev_a, "type", "veth", "peer", "name", dev_b, "netns",
        ns_b,
    ])
}

/// A Linux bridge (the seed 001 Figure 2 switch); STP stays off (the
/// default), so ports forward at once.
pub fn bridge_add(ns: &str, bridge: &str) -> Vec<String> {
    argv(&["ip", "-n", ns, "link", "add", bridge, "type", "bridge"])
}

/// Make `dev` a port of `bridge`.
pub fn set_master(ns: &str, dev: &str, bridge: &str) -> Vec<String> {
    argv(&["ip", "-n", ns, "link", "set", "dev", dev, "master", bridge])
}

/// A VxLAN device with a fixed VNI over the `underlay` device, point to point.
pub fn vxlan_add(
    ns: &str,
    dev: &str,
    vni: u32,
    local: &str,
    remote: &str,
    underlay: &str,
) -> Vec<String> {
    argv(&[
        "ip",
        "-n",
        ns,
        "link",
        "add",
        dev,
        "type",
        "vxlan",
        "id",
        &vni.to_string(),
        "local",
        local,
        "remote",
        remote,
        "dstport",
        &VXLAN_PORT.to_string(),
        "dev",
        underlay,
    ])
}

/// `ip -n NS addr add CIDR dev DEV`.
pub fn addr_add(ns: &str, dev: &str, cidr: &str) -> Vec<String> {
    argv(&["ip", "-n", ns, "addr", "add", cidr, "dev", dev])
}

/// `ip -n NS link set dev DEV up`.
pub fn link_up(ns: &str, dev: &str) -> Vec<String> {
    argv(&["ip", "-n", ns, "link", "set", "dev", dev, "up"])
}

/// `ip -n NS link set dev DEV mtu MTU`.
pub fn set_mtu(ns: &str, dev: &str, mtu: u32) -> Vec<String> {
    argv(&[
        "ip",
        "-n",
        ns,
        "link",
        "set",
        "dev",
        dev,
        "mtu",
        &mtu.to_string(),
    ])
}

/// Policy routing: traffic from `source` looks up `table`.
pub fn rule_add(ns: &str, source: &str, table: u32) -> Vec<String> {
    argv(&[
        "ip",
        "-n",
        ns,
        "rule",
        "add",
        "from",
        source,
        "table",
        &table.to_string(),
    ])
}

/// A connected route for `cidr` out of `dev` in routing table `table`.
pub fn route_add_table(ns: &str, cidr: &str, dev: &str, source: &str, table: u32) -> Vec<String> {
    argv(&[
        "ip",
        "-n",
        ns,
        "route",
        "add",
        cidr,
        "dev",
        dev,
        "src",
        source,
        "table",
        &table.to_string(),
    ])
}

/// `ip -n NS -d -j addr show`: every interface with its details and
/// addresses, as JSON.
pub fn addr_show_json(ns: &str) -> Vec<String> {
    argv(&["ip", "-n", ns, "-d", "-j", "addr", "show"])
}

/// Write sysctls inside a namespace. `/proc/sys/net` is per namespace, so a
/// shell run by `ip netns exec` writes the namespace's own. Keys that do
/// not exist on this kernel (IPv6 compiled out) are skipped, not errors.
pub fn sysctls(ns: &str, settings: &[(&str, &str)]) -> Vec<String> {
    let script: Vec<String> = settings
        .iter()
        .map(|(key, value)| {
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_'),
                "sysctl key {key:?}"
            );
            assert!(
                value.bytes().all(|b| b.is_ascii_digit()),
                "sysctl value {value:?}"
            );
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            format!("if [ -e {path} ]; then echo {value} > {path} || exit 1; fi")
        })
        .collect();
    in_ns(ns, &["sh", "-c", &script.join("; ")])
}

/// `ethtool -K DEV NAME on|off ...` inside a namespace. Feature names are
/// ethtool's short ones (`tso`, `gso`, `gro`, `tx`, `rx`, `sg`).
pub fn ethtool_features(ns: &str, dev: &str, features: &[(&str, bool)]) -> Vec<String> {
    let mut v = in_ns(ns, &["ethtool", "-K", dev]);
    for (name, on) in features {
        v.push(name.to_string());
        v.push(on_off(*on).to_string());
    }
    v
}

/// `ethtool -k DEV` inside a namespace: the device's feature list.
pub fn ethtool_show(ns: &str, dev: &str) -> Vec<String> {
    in_ns(ns, &["ethtool", "-k", dev])
}

/// Rate-limit `dev`'s egress to `rate_mbit` with a token bucket (METHODOLOGY
/// "flow control / link speed"): `tc qdisc replace ... root tbf`, so it also
/// replaces an earlier rate.
pub fn tbf(ns: &str, dev: &str, rate_mbit: u32) -> Vec<String> {
    argv(&[
        "tc",
        "-n",
        ns,
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{rate_mbit}mbit"),
        "burst",
        &tbf_burst_bytes(rate_mbit).to_string(),
        "latency",
        &format!("{TBF_LATENCY_MS}ms"),
    ])
}

/// The token bucket's depth: 1 ms at the rate, and never less than two
/// 64 KiB GSO segments, so tbf does not have to split GSO packets (which
/// would cost CPU the unlimited path does not pay) and jumbo frames fit.
pub fn tbf_burst_bytes(rate_mbit: u32) -> u64 {
    let per_ms = u64::from(rate_mbit) * 1_000_000 / 8 / 1000;
    per_ms.max(2 * 65_536)
}

/// Remove the root qdisc of `dev` (back to the device's default).
pub fn qdisc_del_root(ns: &str, dev: &str) -> Vec<String> {
    argv(&["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"])
}

/// `tc -n NS qdisc show dev DEV`.
pub fn qdisc_show(ns: &str, dev: &str) -> Vec<String> {
    argv(&["tc", "-n", ns, "qdisc", "show", "dev", dev])
}

/// `on` or `off`, as ethtool spells them.
pub fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// A command that failed to start or exited with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{command}` failed: {detail}")]
pub struct CommandError {
    /// The command line, as typed.
    pub command: String,
    /// Why: the exit status with stderr, or why it could not start.
    pub detail: String,
}

/// Run one argument vector (program first), returning its stdout.
///
/// The program is looked up on `PATH` and then in `/usr/sbin` and `/sbin`,
/// where Debian keeps iproute2 and ethtool and a non-login shell may not look.
pub fn run(argv: &[String]) -> Result<String, CommandError> {
    assert!(!argv.is_empty(), "an empty command line");
    let command = argv.join(" ");
    let program = find_program(&argv[0]).ok_or_else(|| CommandError {
        command: command.clone(),
        detail: format!("{} not found on PATH, /usr/sbin or /sbin", argv[0]),
    })?;
    let output = Command::new(program)
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let said = [stderr.trim(), stdout.trim()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    Err(CommandError {
        command,
        detail: format!("{}: {said}", output.status),
    })
}

/// Names the lab treats as not installed, comma-separated, whatever is on
/// the machine: how tests show what `isoe lab` does where a program is
/// missing (a test cannot uninstall ethtool from under the others).
pub const PRETEND_MISSING_ENV: &str = "ISOE_LAB_PRETEND_MISSING";

/// Whether [`PRETEND_MISSING_ENV`] names `program`.
pub fn pretend_missing(program: &str) -> bool {
    std::env::var(PRETEND_MISSING_ENV)
        .is_ok_and(|list| list.split(',').any(|p| p.trim() == program))
}

/// Where `program` is: on `PATH`, else in `/usr/sbin` or `/sbin`; None
/// also when [`PRETEND_MISSING_ENV`] names it.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    if pretend_missing(program) {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// One line of `ethtool -k` output: `name: on|off [fixed]|[requested on]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeatureLine {
    /// ethtool's long name (`tcp-segmentation-offload`, `tx-tcp-segmentation`).
    pub name: String,
    /// Whether it is on now.
    pub on: bool,
    /// `[fixed]`: the driver does not let it change.
    pub fixed: bool,
    /// `[requested on|off]`: what was asked when the kernel keeps another
    /// value (a dependency, such as TSO needing Tx checksumming).
    pub requested: Option<bool>,
    /// Indented under a group line (`tcp-segmentation-offload` has
    /// `tx-tcp-segmentation` and others under it).
    pub child: bool,
    /// The line as ethtool printed it, trimmed.
    pub text: String,
}

/// Parse `ethtool -k` output; lines that are not features are skipped.
pub fn parse_ethtool_features(output: &str) -> Vec<FeatureLine> {
    output.lines().filter_map(parse_feature_line).collect()
}

fn parse_feature_line(line: &str) -> Option<FeatureLine> {
    let child = line.starts_with(['\t', ' ']);
    let text = line.trim();
    let (name, rest) = text.split_once(": ")?;
    if name.contains(' ') {
        return None; // "Features for eth0:" has no ": " value; be safe anyway
    }
    let mut words = rest.split_whitespace();
    let on = match words.next()? {
        "on" => true,
        "off" => false,
        _ => return None,
    };
    let note = rest.split_once('[').map(|(_, n)| n.trim_end_matches(']'));
    let requested = match note {
        Some("requested on") => Some(true),
        Some("requested off") => Some(false),
        _ => None,
    };
    Some(FeatureLine {
        name: name.to_string(),
        on,
        fixed: note == Some("fixed"),
        requested,
        child,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        argv(v)
    }

    #[test]
    fn ethtool_features_runs_in_the_namespace() {
        assert_eq!(
            ethtool_features("isoe-lab-1-0-host", "h0", &[("tso", false), ("gro", true)]),
            s(&[
                "ip",
                "netns",
                "exec",
                "isoe-lab-1-0-host",
                "ethtool",
                "-K",
                "h0",
                "tso",
                "off",
                "gro",
                "on"
            ])
        );
        assert_eq!(
            ethtool_show("n", "lo"),
            s(&["ip", "netns", "exec", "n", "ethtool", "-k", "lo"])
        );
    }

    #[test]
    fn tbf_replaces_the_root_qdisc_with_a_rate_burst_and_latency() {
        assert_eq!(
            tbf("n", "h0", 1000),
            s(&[
                "tc", "-n", "n", "qdisc", "replace", "dev", "h0", "root", "tbf", "rate",
                "1000mbit", "burst", "131072", "latency", "20ms"
            ])
        );
        // 10 Gbit/s: 1 ms of tokens is more than the floor.
        assert_eq!(tbf_burst_bytes(10_000), 1_250_000);
        assert_eq!(tbf_burst_bytes(1), 131_072);
        assert_eq!(
            qdisc_del_root("n", "h0"),
            s(&["tc", "-n", "n", "qdisc", "del", "dev", "h0", "root"])
        );
    }

    #[test]
    fn ip_commands_name_their_namespace() {
        assert_eq!(
            set_mtu("n", "t0", 9000),
            s(&["ip", "-n", "n", "link", "set", "dev", "t0", "mtu", "9000"])
        );
        assert_eq!(
            veth_pair("a", "h0", "b", "t0"),
            s(&[
                "ip", "-n", "a", "link", "add", "h0", "type", "veth", "peer", "name", "t0",
                "netns", "b"
            ])
        );
        assert_eq!(
            vxlan_add("a", "vx0", 4242, "10.99.4.1", "10.99.4.2", "h0"),
            s(&[
                "ip",
                "-n",
                "a",
                "link",
                "add",
                "vx0",
                "type",
                "vxlan",
                "id",
                "4242",
                "local",
                "10.99.4.1",
                "remote",
                "10.99.4.2",
                "dstport",
                "4789",
                "dev",
                "h0"
            ])
        );
        assert_eq!(
            addr_add("a", "h0", "10.99.1.1/24"),
            s(&["ip", "-n", "a", "addr", "add", "10.99.1.1/24", "dev", "h0"])
        );
        assert_eq!(
            route_add_table("t", "10.99.3.0/24", "t1", "10.99.3.3", 101),
            s(&[
                "ip",
                "-n",
                "t",
                "route",
                "add",
                "10.99.3.0/24",
                "dev",
                "t1",
                "src",
                "10.99.3.3",
                "table",
                "101"
            ])
        );
        assert_eq!(
            rule_add("t", "10.99.3.3", 101),
            s(&[
                "ip",
                "-n",
                "t",
                "rule",
                "add",
                "from",
                "10.99.3.3",
                "table",
                "101"
            ])
        );
    }

    #[test]
    fn sysctls_write_proc_inside_the_namespace() {
        assert_eq!(
            sysctls("n", &[("net.ipv4.conf.all.arp_ignore", "1")]),
            s(&[
                "ip",
                "netns",
                "exec",
                "n",
                "sh",
                "-c",
                "if [ -e /proc/sys/net/ipv4/conf/all/arp_ignore ]; then echo 1 > /proc/sys/net/ipv4/conf/all/arp_ignore || exit 1; fi"
            ])
        );
    }

    #[test]
    #[should_panic(expected = "sysctl key")]
    fn sysctls_refuse_a_key_that_could_escape_the_script() {
        sysctls("n", &[("net; rm -rf /", "1")]);
    }

    #[test]
    fn ethtool_output_is_parsed_with_fixed_and_requested() {
        let out = "Features for lo:\n\
rx-checksumming: on [fixed]\n\
tx-checksumming: on\n\
\ttx-checksum-ip-generic: on [fixed]\n\
tcp-segmentation-offload: on\n\
\ttx-tcp-segmentation: off [requested on]\n\
generic-receive-offload: off\n";
        let f = parse_ethtool_features(out);
        assert_eq!(f.len(), 6);
        assert_eq!(f[0].name, "rx-checksumming");
        assert!(f[0].on && f[0].fixed && !f[0].child);
        assert!(f[2].child && f[2].fixed);
        assert_eq!(f[4].requested, Some(true));
        assert!(!f[4].on && !f[4].fixed && f[4].child);
        assert_eq!(f[4].text, "tx-tcp-segmentation: off [requested on]");
    }
}
