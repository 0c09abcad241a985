//! A topology as the report shows it (its environment section): namespaces,
//! interfaces with kind, MTU, addresses and root qdisc, and the offload
//! lines `ethtool -k` prints for each interface.

use super::Topology;
use crate::netcmd;
use serde::Serialize;
use std::fmt;

/// The `ethtool -k` lines a description keeps: the groups the knobs act on,
/// TCP segmentation itself, LRO and tunnel segmentation (seed 002's VxLAN
/// offload).
const SHOWN_FEATURES: [&str; 9] = [
    "rx-checksumming",
    "tx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "tx-tcp-segmentation",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "large-receive-offload",
    "tx-udp_tnl-segmentation",
];

/// A topology as made, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Description {
    /// `loopback`, `base`, `congested` or `vxlan`.
    pub kind: String,
    /// Why this is the degraded host loopback, if it is.
    pub degraded: Option<String>,
    /// Target portals, in order.
    pub portals: Vec<String>,
    /// The initiator's addresses.
    pub host_addresses: Vec<String>,
    /// Caveats (shared devices, default rate).
    pub notes: Vec<String>,
    /// Each namespace with its interfaces.
    pub namespaces: Vec<NamespaceDescription>,
}

/// One namespace of a topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamespaceDescription {
    /// Its name, `isoe-lab-<PID>-<n>-<role>`.
    pub name: String,
    /// Interfaces, as `ip -d addr` lists them.
    pub interfaces: Vec<InterfaceDescription>,
    /// What could not be read.
    pub errors: Vec<String>,
}

/// One interface as the kernel reports it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterfaceDescription {
    /// Interface name.
    pub name: String,
    /// `veth`, `bridge`, `vxlan`, `loopback`.
    pub kind: String,
    /// MTU in bytes (`ip -d link`).
    pub mtu: u32,
    /// Operational state (UP, DOWN, UNKNOWN).
    pub state: String,
    /// IPv4 addresses with prefix length.
    pub addresses: Vec<String>,
    /// The root qdisc: its kind and parameters (`tc qdisc show`).
    pub qdisc: String,
    /// Offload lines of `ethtool -k`, e.g. `generic-receive-offload: off`.
    pub features: Vec<String>,
}

/// (interface, MTU) pairs from `ip -j addr show`.
pub(crate) fn mtus(json: &str) -> Vec<(String, u32)> {
    interfaces_from_json(json)
        .into_iter()
        .map(|i| (i.name, i.mtu))
        .collect()
}

/// Interfaces from `ip -d -j addr show` (features and qdisc left empty).
fn interfaces_from_json(json: &str) -> Vec<InterfaceDescription> {
    let Ok(serde_json::Value::Array(links)) = serde_json::from_str::<serde_json::Value>(json)
    else {
        return Vec::new();
    };
    let text = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string()
    };
    links
        .iter()
        .map(|link| {
            let kind = link
                .get("linkinfo")
                .and_then(|li| li.get("info_kind"))
                .and_then(|k| k.as_str())
                .map_or_else(|| text(link, "link_type"), str::to_string);
            let addresses = link
                .get("addr_info")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
                .filter(|a| a.get("family").and_then(|f| f.as_str()) == Some("inet"))
                .map(|a| {
                    format!(
                        "{}/{}",
                        text(a, "local"),
                        a.get("prefixlen").and_then(|p| p.as_u64()).unwrap_or(0)
                    )
                })
                .collect();
            InterfaceDescription {
                name: text(link, "ifname"),
                kind,
                mtu: link.get("mtu").and_then(|m| m.as_u64()).unwrap_or(0) as u32,
                state: text(link, "operstate"),
                addresses,
                qdisc: text(link, "qdisc"),
                features: Vec::new(),
            }
        })
        .collect()
}

/// A device's root qdisc from `tc qdisc show`, as its kind and parameters
/// ("tbf rate 1Gbit burst 131000b lat 20ms", "noqueue").
fn root_qdisc(tc_output: &str, dev: &str) -> Option<String> {
    let needle = format!(" dev {dev} root ");
    let line = tc_output.lines().find(|l| l.contains(&needle))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let kind = words.get(1)?;
    let params = match words.iter().position(|w| *w == "refcnt") {
        Some(i) => &words[(i + 2).min(words.len())..],
        None => &[][..],
    };
    Some(
        std::iter::once(*kind)
            .chain(params.iter().copied())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

impl Topology {
    /// Describe the topology as it is now (after knobs were applied, it
    /// shows them). Commands that fail leave a note in `errors`, never a
    /// panic: a report should still be written.
    pub fn describe(&self) -> Description {
        let namespaces = self
            .namespaces
            .iter()
            .map(|ns| describe_namespace(ns))
            .collect();
        Description {
            kind: self.kind.to_string(),
            degraded: self.degraded.clone(),
            portals: self.portals.iter().map(ToString::to_string).collect(),
            host_addresses: self
                .host_addresses
                .iter()
                .map(ToString::to_string)
                .collect(),
            notes: self.notes.clone(),
            namespaces,
        }
    }
}

fn describe_namespace(ns: &str) -> NamespaceDescription {
    let mut errors = Vec::new();
    let mut interfaces = match netcmd::run(&netcmd::addr_show_json(ns)) {
        Ok(json) => interfaces_from_json(&json),
        Err(e) => {
            errors.push(e.to_string());
            Vec::new()
        }
    };
    let qdiscs =
        netcmd::run(&["tc", "-n", ns, "qdisc", "show"].map(String::from)).unwrap_or_else(|e| {
            errors.push(e.to_string());
            String::new()
        });
    for i in &mut interfaces {
        if let Some(q) = root_qdisc(&qdiscs, &i.name) {
            i.qdisc = q;
        }
        match netcmd::run(&netcmd::ethtool_show(ns, &i.name)) {
            Ok(out) => {
                i.features = netcmd::parse_ethtool_features(&out)
                    .into_iter()
                    .filter(|f| SHOWN_FEATURES.contains(&f.name.as_str()))
                    .map(|f| f.text)
                    .collect();
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    NamespaceDescription {
        name: ns.to_string(),
        interfaces,
        errors,
    }
}

impl fmt::Display for Description {
    /// Markdown: one bullet per namespace, one sub-bullet per interface.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Topology `{}`: portals {}; initiator at {}",
            self.kind,
            self.portals.join(", "),
            self.host_addresses.join(", ")
        )?;
        writeln!(f)?;
        if let Some(d) = &self.degraded {
            writeln!(f, "- **degraded**: {d}")?;
        }
        for note in &self.notes {
            writeln!(f, "- {note}")?;
        }
        for ns in &self.namespaces {
            writeln!(f, "- namespace `{}`", ns.name)?;
            for i in &ns.interfaces {
                let addresses = if i.addresses.is_empty() {
                    "no address".to_string()
                } else {
                    i.addresses.join(", ")
                };
                writeln!(
                    f,
                    "  - `{}` ({}), MTU {}, {}, {}; qdisc {}",
                    i.name, i.kind, i.mtu, i.state, addresses, i.qdisc
                )?;
                if !i.features.is_empty() {
                    writeln!(f, "    - {}", i.features.join("; "))?;
                }
            }
            for e in &ns.errors {
                writeln!(f, "  - error: {e}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"[{"ifindex":1,"ifname":"lo","mtu":65536,"qdisc":"noqueue","operstate":"UNKNOWN","link_type":"loopback",
        "addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},
        {"ifindex":3,"link":"t0","ifname":"h0","mtu":9000,"qdisc":"tbf","operstate":"UP","link_type":"ether",
        "linkinfo":{"info_kind":"veth"},"addr_info":[{"family":"inet","local":"10.99.1.1","prefixlen":24},
        {"family":"inet6","local":"fe80::1","prefixlen":64}]}]"#;

    #[test]
    fn ip_json_gives_kind_mtu_state_and_ipv4_addresses() {
        let i = interfaces_from_json(JSON);
        assert_eq!(i.len(), 2);
        assert_eq!(
            (i[0].name.as_str(), i[0].kind.as_str(), i[0].mtu),
            ("lo", "loopback", 65536)
        );
        assert_eq!(
            (i[1].kind.as_str(), i[1].mtu, i[1].state.as_str()),
            ("veth", 9000, "UP")
        );
        assert_eq!(i[1].addresses, ["10.99.1.1/24"]);
        assert_eq!(
            mtus(JSON),
            [("lo".to_string(), 65536), ("h0".to_string(), 9000)]
        );
        assert!(mtus("not json").is_empty());
    }

    #[test]
    fn root_qdisc_is_found_by_device() {
        let tc = "qdisc noqueue 0: dev lo root refcnt 2 \n\
qdisc tbf 8001: dev h0 root refcnt 3 rate 1Gbit burst 131072b lat 20ms \n";
        assert_eq!(
            root_qdisc(tc, "h0").unwrap(),
            "tbf rate 1Gbit burst 131072b lat 20ms"
        );
        assert_eq!(root_qdisc(tc, "lo").unwrap(), "noqueue");
        assert_eq!(root_qdisc(tc, "h1"), None);
    }

    #[test]
    fn markdown_lists_namespaces_and_interfaces() {
        let d = Description {
            kind: "base".into(),
            degraded: None,
            portals: vec!["10.99.1.2:3260".into()],
            host_addresses: vec!["10.99.1.1".into()],
            notes: vec![],
            namespaces: vec![NamespaceDescription {
                name: "isoe-lab-1-0-host".into(),
                interfaces: interfaces_from_json(JSON),
                errors: vec![],
            }],
        };
        let md = d.to_string();
        assert!(
            md.starts_with("Topology `base`: portals 10.99.1.2:3260; initiator at 10.99.1.1\n"),
            "{md}"
        );
        assert!(
            md.contains("  - `h0` (veth), MTU 9000, UP, 10.99.1.1/24; qdisc tbf\n"),
            "{md}"
        );
    }
}
