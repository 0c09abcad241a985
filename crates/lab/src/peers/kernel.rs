//! The Linux kernel's iSCSI initiator (open-iscsi) on an SSH host, as the
//! lab drives it: SendTargets discovery, stored nowhere, that
//! must list the target, then a node record made by hand (the answer may
//! name an address the host cannot reach, behind NAT), the
//! lab's knobs written into it, login, the block device the session made,
//! and logout with the record removed.
//!

use crate::host::Host;
use crate::knobs::KnobSet;
use crate::ssh::HostError;

/// Settings written into the node record before login; None leaves
/// open-iscsi's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSettings {
    /// HeaderDigest: CRC32C when true.
    pub header_digest: Option<bool>,
    /// DataDigest: CRC32C when true.
    pub data_digest: Option<bool>,
    /// MaxRecvDataSegmentLength the initiator declares.
    pub max_recv_data_segment_length: Option<u32>,
    /// FirstBurstLength asked for.
    pub first_burst_length: Option<u32>,
    /// MaxBurstLength asked for.
    pub max_burst_length: Option<u32>,
    /// ImmediateData asked for.
    pub immediate_data: Option<bool>,
    /// InitialR2T asked for.
    pub initial_r2t: Option<bool>,
    /// The SCSI device's queue depth.
    pub queue_depth: Option<u32>,
    /// Seconds a lost session may take to come back before I/O fails.
    pub replacement_timeout: Option<u32>,
}

fn yes_no(on: bool) -> String {
    if on { "Yes" } else { "No" }.to_owned()
}

fn digest(on: bool) -> String {
    if on { "CRC32C" } else { "None" }.to_owned()
}

impl NodeSettings {
    /// The node record's keys and values (`iscsiadm -m node -o update -n
    /// KEY -v VALUE`) for the settings given.
    pub fn updates(&self) -> Vec<(&'static str, String)> {
        let number = |n: Option<u32>| n.map(|n| n.to_string());
        [
            (
                "node.conn[0].iscsi.HeaderDigest",
                self.header_digest.map(digest),
            ),
            (
                "node.conn[0].iscsi.DataDigest",
                self.data_digest.map(digest),
            ),
            (
                "node.conn[0].iscsi.MaxRecvDataSegmentLength",
                number(self.max_recv_data_segment_length),
            ),
            (
                "node.session.iscsi.FirstBurstLength",
                number(self.first_burst_length),
            ),
            (
                "node.session.iscsi.MaxBurstLength",
                number(self.max_burst_length),
            ),
            (
                "node.session.iscsi.ImmediateData",
                self.immediate_data.map(yes_no),
            ),
            (
                "node.session.iscsi.InitialR2T",
                self.initial_r2t.map(yes_no),
            ),
            ("node.session.queue_depth", number(self.queue_depth)),
            (
                "node.session.timeo.replacement_timeout",
                number(self.replacement_timeout),
            ),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect()
    }
}

/// Whether a SendTargets answer as iscsiadm prints it (`ADDR:PORT,TPGT
/// IQN` per line) lists `target`.
fn discovered(listing: &str, target: &str) -> bool {
    listing
        .lines()
        .any(|line| line.split_whitespace().nth(1) == Some(target))
}

/// `iscsiadm -m node -T TARGET -p PORTAL -I IFACE EXTRA...`.
fn node(target: &str, portal: &str, iface: &str, extra: &[&str]) -> Vec<String> {
    [
        "iscsiadm", "-m", "node", "-T", target, "-p", portal, "-I", iface,
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect()
}

/// The iface records of `host` that use `transport` (`iscsiadm -m iface`
/// prints `NAME TRANSPORT,HWADDRESS,IPADDRESS,NETDEV,INITIATORNAME`); the
/// software transport `tcp` always has open-iscsi's own `default`.
pub fn ifaces(host: &Host, transport: &str) -> Result<Vec<String>, HostError> {
    if transport == "tcp" {
        return Ok(vec!["default".to_owned()]);
    }
    let listing = host.run(&["iscsiadm", "-m", "iface"])?;
    Ok(parse_ifaces(&listing, transport))
}

fn parse_ifaces(listing: &str, transport: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(char::is_whitespace)?;
            let t = rest.trim_start().split(',').next()?;
            (t == transport).then(|| name.to_owned())
        })
        .collect()
}

/// A kernel initiator's session on a host, logged out by [`KernelSession::logout`].
#[derive(Debug)]
pub struct KernelSession<'h> {
    host: &'h Host,
    target: String,
    portal: String,
    iface: String,
    /// The block device of the LUN (`/dev/sdX`).
    pub device: String,
}

impl<'h> KernelSession<'h> {
    /// Makes the node record for `target` at `portal` (`ADDR:PORT` as the
    /// host reaches it) through `iface` (`default` for `iscsi_tcp`, or an
    /// offload adapter's, see [`ifaces`]), writes `settings` into it, logs
    /// in and finds the block device of `lun`. On failure the record is
    /// removed again.
    pub fn login(
        host: &'h Host,
        portal: &str,
        target: &str,
        iface: &str,
        lun: u16,
        settings: &NodeSettings,
    ) -> Result<KernelSession<'h>, HostError> {
        // SendTargets first, stored nowhere: the portal must answer and list
        // the target. The record itself is made by hand, since the answer
        // names the portals as the target sees them (behind NAT, not these).
        let listing = host.run(&[
            "iscsiadm",
            "-m",
            "discovery",
            "-t",
            "sendtargets",
            "-p",
            portal,
            "-I",
            iface,
            "-o",
            "nonpersistent",
        ])?;
        if !discovered(&listing, target) {
            return Err(HostError::Failed {
                host: host.name(),
                command: format!("iscsiadm -m discovery -t sendtargets -p {portal}"),
                status: "exit status: 0".into(),
                stderr: format!("{target} is not among the targets it lists: {listing}"),
            });
        }
        let with = |extra: &[&str]| node(target, portal, iface, extra);
        host.run(&with(&["-o", "new"]))?;
        let session = KernelSession {
            host,
            target: target.to_owned(),
            portal: portal.to_owned(),
            iface: iface.to_owned(),
            device: String::new(),
        };
        let logged_in = (|| {
            for (key, value) in settings.updates() {
                host.run(&with(&["-o", "update", "-n", key, "-v", &value]))?;
            }
            host.run(&with(&["--login"]))?;
            host.run(&["udevadm", "settle"])?;
            let by_path = format!("/dev/disk/by-path/ip-{portal}-iscsi-{target}-lun-{lun}");
            host.run(&["readlink", "-e", &by_path])
        })();
        match logged_in {
            Ok(device) => Ok(KernelSession {
                device: device.trim().to_owned(),
                ..session
            }),
            Err(e) => {
                let _ = session.logout();
                Err(e)
            }
        }
    }

    /// What `iscsiadm -m session -P 2` says of the host's sessions (the
    /// negotiated parameters among it).
    pub fn describe(&self) -> Result<String, HostError> {
        self.host.run(&["iscsiadm", "-m", "session", "-P", "2"])
    }

    /// Logs out and removes the node record; both are tried, and the
    /// first failure is returned.
    pub fn logout(self) -> Result<(), HostError> {
        let with = |extra: &[&str]| node(&self.target, &self.portal, &self.iface, extra);
        let out = self.host.run(&with(&["--logout"]));
        let deleted = self.host.run(&with(&["-o", "delete"]));
        out.and(deleted).map(|_| ())
    }
}

/// Knobs the kernel initiator cannot honour, by [`KnobSet::describe`]
/// name, with the reason: it sets its own socket
/// options, and open-iscsi has no MC/S.
pub fn limits(knobs: &KnobSet) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, set) in [
        ("nodelay", knobs.nodelay.is_some()),
        ("quickack", knobs.quickack.is_some()),
        ("rcvbuf", knobs.rcvbuf_bytes.is_some()),
        ("sndbuf", knobs.sndbuf_bytes.is_some()),
        ("busy_poll_us", knobs.busy_poll_us.is_some()),
    ] {
        if set {
            out.push((
                key.to_string(),
                "the kernel initiator sets its own socket options (iscsi_tcp); open-iscsi has no setting for this"
                    .to_string(),
            ));
        }
    }
    if knobs.connections.is_some_and(|n| n > 1) {
        out.push((
            "connections".into(),
            "open-iscsi opens one connection per session (no MC/S)".into(),
        ));
    }
    if knobs.sessions.is_some_and(|n| n > 1) {
        out.push((
            "sessions".into(),
            "the lab logs the kernel initiator in once per portal; use workers for more load"
                .into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_must_list_the_target() {
        let listing = "127.0.0.1:3262,1 iqn.2026-11.io.isoe:array\n\
                       [fd00::2]:3260,1 iqn.2026-11.io.isoe:lab\n";
        assert!(discovered(listing, "iqn.2026-11.io.isoe:array"));
        assert!(discovered(listing, "iqn.2026-11.io.isoe:lab"));
        assert!(!discovered(listing, "iqn.2026-11.io.isoe:arr"));
        assert!(!discovered("", "iqn.2026-11.io.isoe:lab"));
    }

    #[test]
    fn offload_ifaces_are_found_by_their_transport() {
        let listing = "default tcp,<empty>,<empty>,<empty>,<empty>\n\
                       iser iser,<empty>,<empty>,<empty>,<empty>\n\
                       cxgb4i.00:07:43:3a:1b:20 cxgb4i,00:07:43:3a:1b:20,<empty>,<empty>,<empty>\n\
                       bnx2i.00:10:18:aa:bb:cc bnx2i,00:10:18:aa:bb:cc,<empty>,<empty>,<empty>\n";
        assert_eq!(
            parse_ifaces(listing, "cxgb4i"),
            ["cxgb4i.00:07:43:3a:1b:20"]
        );
        assert_eq!(parse_ifaces(listing, "qedi"), Vec::<String>::new());
        assert_eq!(parse_ifaces(listing, "tcp"), ["default"]);
    }

    #[test]
    fn only_the_settings_given_reach_the_node_record() {
        assert!(NodeSettings::default().updates().is_empty());
        let settings = NodeSettings {
            header_digest: Some(true),
            data_digest: Some(false),
            first_burst_length: Some(65536),
            immediate_data: Some(false),
            initial_r2t: Some(true),
            queue_depth: Some(64),
            ..NodeSettings::default()
        };
        assert_eq!(
            settings.updates(),
            [
                ("node.conn[0].iscsi.HeaderDigest", "CRC32C".to_owned()),
                ("node.conn[0].iscsi.DataDigest", "None".to_owned()),
                ("node.session.iscsi.FirstBurstLength", "65536".to_owned()),
                ("node.session.iscsi.ImmediateData", "No".to_owned()),
                ("node.session.iscsi.InitialR2T", "Yes".to_owned()),
                ("node.session.queue_depth", "64".to_owned()),
            ]
        );
    }
}
