//! Test beds of machines: `isoe lab --testbed FILE` runs a
//! plan on real machines, or VMs, instead of the namespaces of one machine.
//! The plan says what to measure; the test bed says where: which host
//! carries the initiators, which the target, and which interfaces carry
//! the portals (the link knobs act on them). `crates/lab/examples/
//! testbed-physical.toml` is a commented example for two machines.
//!
//! ```toml
//! ssh_key = "/root/.ssh/isoe-lab"   # optional: the key for every ssh:// host
//! local_processes = ["qemu-system-x86_64"]   # optional: this machine's programs that
//!                                   # are part of the bed (a VM), not foreign load
//!
//! [initiator]
//! host = "ssh://root@192.0.2.10"    # required: "local" or ssh://[USER@]HOST[:PORT]
//! interfaces = ["enp65s0f0np0"]     # optional: where the initiator side's link knobs act
//! isoe = "/usr/local/bin/isoe"      # optional: else the lab copies its own binary there
//! fio = "fio"                       # optional: fio with libaio, for the block devices
//!                                   # (the kernel initiator's, isoe attach's)
//! fio_libiscsi = "/opt/fio/fio"     # optional: fio with libiscsi; else the lab's own, copied
//!
//! [target]
//! host = "ssh://root@192.0.2.20"    # required: "local" or an ssh:// URL
//! interfaces = ["enp65s0f0np0"]     # optional: where the target side's link knobs act
//! portals = ["192.168.50.2:3260"]   # required: the target as the initiator reaches it
//! listen = ["0.0.0.0:3260"]         # optional: where the target listens, when not there
//!                                   # (NAT: a VM's forwarded port); one per portal
//! isoe = "/usr/local/bin/isoe"      # optional, as for the initiator
//! external = "iscsi://192.168.50.9:3260/iqn.2004-01.com.example:array/1"
//!                                   # optional: the array `target = "external"` measures
//! external_writable = false         # optional: true lets write workloads overwrite that
//!                                   # LUN's data; without it they are skipped
//! ```
//!
//! Errors name the file, the line and the key, as plans' do.

use crate::plan::PlanError;
use isoe_config::{Field, Table};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

const ROOT_KEYS: &[&str] = &["ssh_key", "local_processes", "initiator", "target"];
const INITIATOR_KEYS: &[&str] = &["host", "interfaces", "isoe", "fio", "fio_libiscsi"];
const TARGET_KEYS: &[&str] = &[
    "host",
    "interfaces",
    "portals",
    "listen",
    "isoe",
    "external",
    "external_writable",
];

type Reader = isoe_config::Reader<PlanError>;

/// The initiators' machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitiatorMachine {
    /// `local` or an `ssh://` URL.
    pub host: String,
    /// Interfaces the initiator side's link knobs act on.
    pub interfaces: Vec<String>,
    /// `isoe` on that host; None: the lab copies its own.
    pub isoe: Option<String>,
    /// fio with libaio (the load on the kernel initiator's and `isoe
    /// attach`'s block devices).
    pub fio: String,
    /// fio with the libiscsi engine; None: the lab's own, copied.
    pub fio_libiscsi: Option<String>,
}

/// The target's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetMachine {
    /// `local` or an `ssh://` URL.
    pub host: String,
    /// Interfaces the target side's link knobs act on.
    pub interfaces: Vec<String>,
    /// The portals as the initiator reaches them.
    pub portals: Vec<SocketAddr>,
    /// Where the target listens, one per portal (the portals unless given).
    pub listen: Vec<SocketAddr>,
    /// `isoe` on that host; None: the lab copies its own.
    pub isoe: Option<String>,
    /// The external array's URL (`iscsi://PORTAL/IQN/LUN`), if any.
    pub external: Option<ExternalTarget>,
    /// Whether write workloads may overwrite the external LUN's data.
    pub external_writable: bool,
}

/// An existing array, measured with `target = "external"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTarget {
    /// The URL as given.
    pub url: String,
    /// Its portal.
    pub portal: SocketAddr,
    /// Its target name.
    pub iqn: String,
    /// Its LUN.
    pub lun: u16,
}

/// A test bed file, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Testbed {
    /// The file it was read from.
    pub source: String,
    /// The key every ssh:// host is logged in to with.
    pub ssh_key: Option<PathBuf>,
    /// Programs on this machine that are part of the bed, by command name.
    pub local_processes: Vec<String>,
    /// The initiators' machine.
    pub initiator: InitiatorMachine,
    /// The target's machine.
    pub target: TargetMachine,
}

impl Testbed {
    /// Reads and checks the test bed file at `path`.
    pub fn load(path: &Path) -> Result<Testbed, PlanError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| isoe_config::FileError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Testbed::parse(&text, &path.display().to_string())
    }

    /// Checks test bed `text`; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Testbed, PlanError> {
        let r = Reader::new(text, source);
        let mut root = r.root(text)?;
        r.deny_unknown(&root, ROOT_KEYS)?;
        let ssh_key = match root.take("ssh_key") {
            Some(item) => Some(PathBuf::from(non_empty(&r, &item)?)),
            None => None,
        };
        let local_processes = match root.take("local_processes") {
            Some(item) => strings(&r, item)?,
            None => Vec::new(),
        };
        let why = "a test bed names the initiators' machine";
        let item = r.required(&mut root, "initiator", why)?;
        let initiator = read_initiator(&r, r.table(item, INITIATOR_KEYS)?)?;
        let why = "a test bed names the target's machine";
        let item = r.required(&mut root, "target", why)?;
        let target = read_target(&r, r.table(item, TARGET_KEYS)?)?;
        Ok(Testbed {
            source: source.to_owned(),
            ssh_key,
            local_processes,
            initiator,
            target,
        })
    }
}

fn non_empty(r: &Reader, item: &Field) -> Result<String, PlanError> {
    let s = r.string(item)?;
    if s.trim().is_empty() {
        return Err(r.at(item, "expected a non-empty string"));
    }
    Ok(s)
}

fn strings(r: &Reader, item: Field) -> Result<Vec<String>, PlanError> {
    r.array(item, "an array of strings")?
        .iter()
        .map(|e| non_empty(r, e))
        .collect()
}

/// `local` or an `ssh://` URL, checked as [`crate::host::Host::parse`] will.
fn read_host(r: &Reader, t: &mut Table, why: &str) -> Result<String, PlanError> {
    let item = r.required(t, "host", why)?;
    let host = non_empty(r, &item)?;
    if host != "local" {
        crate::ssh::SshHost::parse(&host, None, Path::new("/"))
            .map_err(|e| r.at(&item, format!("{e}, or \"local\"")))?;
    }
    Ok(host)
}

fn interfaces(r: &Reader, t: &mut Table) -> Result<Vec<String>, PlanError> {
    let Some(item) = t.take("interfaces") else {
        return Ok(Vec::new());
    };
    r.distinct(
        item,
        "an array of interface names",
        "an empty list: leave the key out for no interface",
        |e| {
            let name = non_empty(r, e)?;
            // The kernel's IFNAMSIZ - 1, and no character a shell or ethtool would read apart.
            let ok = name.len() <= 15
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if ok {
                Ok(name)
            } else {
                Err(r.at(e, format!("{name:?} is not an interface name")))
            }
        },
        |n| format!("{n:?}"),
    )
}

fn optional_string(r: &Reader, t: &mut Table, key: &str) -> Result<Option<String>, PlanError> {
    t.take(key).map(|item| non_empty(r, &item)).transpose()
}

fn read_initiator(r: &Reader, mut t: Table) -> Result<InitiatorMachine, PlanError> {
    let host = read_host(r, &mut t, "the machine the initiators run on")?;
    Ok(InitiatorMachine {
        host,
        interfaces: interfaces(r, &mut t)?,
        isoe: optional_string(r, &mut t, "isoe")?,
        fio: optional_string(r, &mut t, "fio")?.unwrap_or_else(|| "fio".to_owned()),
        fio_libiscsi: optional_string(r, &mut t, "fio_libiscsi")?,
    })
}

fn addresses(r: &Reader, item: Field) -> Result<Vec<SocketAddr>, PlanError> {
    r.distinct(
        item,
        "an array of ADDRESS:PORT strings",
        "at least one ADDRESS:PORT",
        |e| {
            let s = r.string(e)?;
            s.parse::<SocketAddr>().map_err(|_| {
                r.at(
                    e,
                    format!("{s:?} is not ADDRESS:PORT (192.0.2.1:3260, [fd00::1]:3260)"),
                )
            })
        },
        |a| a.to_string(),
    )
}

fn read_target(r: &Reader, mut t: Table) -> Result<TargetMachine, PlanError> {
    let host = read_host(r, &mut t, "the machine the target runs on")?;
    let interfaces = interfaces(r, &mut t)?;
    let why = "the target's portals, as the initiator reaches them";
    let item = r.required(&mut t, "portals", why)?;
    let portals = addresses(r, item)?;
    let listen = match t.take("listen") {
        Some(item) => {
            let offset = item.offset;
            let key = item.key.clone();
            let listen = addresses(r, item)?;
            if listen.len() != portals.len() {
                return Err(r.invalid(
                    offset,
                    &key,
                    format!(
                        "{} addresses for {} portals: one per portal, in the same order",
                        listen.len(),
                        portals.len()
                    ),
                ));
            }
            listen
        }
        None => portals.clone(),
    };
    let isoe = optional_string(r, &mut t, "isoe")?;
    let external = match t.take("external") {
        Some(item) => Some(external(r, &item)?),
        None => None,
    };
    let external_writable = match t.take("external_writable") {
        Some(item) if external.is_none() => {
            return Err(r.at(
                &item,
                "only with `external`, the array it allows writing to",
            ));
        }
        Some(item) => r.bool(&item)?,
        None => false,
    };
    Ok(TargetMachine {
        host,
        interfaces,
        portals,
        listen,
        isoe,
        external,
        external_writable,
    })
}

fn external(r: &Reader, item: &Field) -> Result<ExternalTarget, PlanError> {
    let url = non_empty(r, item)?;
    let bad = |why: &str| {
        r.at(
            item,
            format!("{url:?}: {why} (expected iscsi://ADDRESS:PORT/IQN/LUN)"),
        )
    };
    let rest = url
        .strip_prefix("iscsi://")
        .ok_or_else(|| bad("no iscsi:// scheme"))?;
    let mut parts = rest.splitn(3, '/');
    let portal = parts.next().unwrap_or_default();
    let portal: SocketAddr = portal
        .parse()
        .map_err(|_| bad("the portal is not ADDRESS:PORT"))?;
    let iqn = parts
        .next()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad("no target name"))?;
    let lun = parts
        .next()
        .ok_or_else(|| bad("no LUN"))?
        .parse::<u16>()
        .map_err(|_| bad("the LUN is not a number from 0 to 65535"))?;
    Ok(ExternalTarget {
        url: url.clone(),
        portal,
        iqn: iqn.to_owned(),
        lun,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_MACHINES: &str = r#"
ssh_key = "/root/.ssh/lab"

[initiator]
host = "ssh://root@192.0.2.10"
interfaces = ["enp65s0f0np0"]

[target]
host = "ssh://lab@192.0.2.20:2222"
interfaces = ["enp65s0f0np0", "enp65s0f1np1"]
portals = ["192.168.50.2:3260", "192.168.51.2:3260"]
external = "iscsi://192.168.50.9:3260/iqn.2004-01.com.example:array/1"
"#;

    #[test]
    fn writing_to_an_external_array_is_asked_for_by_name() {
        let text = TWO_MACHINES.replace("array/1\"\n", "array/1\"\nexternal_writable = true\n");
        let t = Testbed::parse(&text, "bed.toml").unwrap();
        assert!(t.target.external_writable);
    }

    #[test]
    fn the_shipped_example_reads() {
        let text = include_str!("../examples/testbed-physical.toml");
        let t = Testbed::parse(text, "testbed-physical.toml").unwrap();
        assert_eq!(t.initiator.interfaces, ["enp65s0f0np0"]);
        assert_eq!(t.target.portals, ["192.168.50.2:3260".parse().unwrap()]);
        assert_eq!(t.target.external, None);
    }

    #[test]
    fn a_two_machine_bed_reads_with_its_defaults() {
        let t = Testbed::parse(TWO_MACHINES, "bed.toml").unwrap();
        assert_eq!(t.ssh_key.as_deref(), Some(Path::new("/root/.ssh/lab")));
        assert_eq!(t.initiator.host, "ssh://root@192.0.2.10");
        assert_eq!(t.initiator.fio, "fio");
        assert_eq!(t.initiator.isoe, None);
        assert_eq!(t.target.portals.len(), 2);
        assert_eq!(
            t.target.listen, t.target.portals,
            "listen defaults to the portals"
        );
        assert!(
            !t.target.external_writable,
            "writing to an array is asked for"
        );
        let e = t.target.external.unwrap();
        assert_eq!(
            (e.portal.to_string().as_str(), e.iqn.as_str(), e.lun),
            ("192.168.50.9:3260", "iqn.2004-01.com.example:array", 1)
        );
    }

    #[test]
    fn mistakes_name_file_line_and_key() {
        let cases = [
            (
                "[initiator]\nhost = \"local\"\n",
                "bed.toml:1: target: missing: a test bed names the target's machine",
            ),
            (
                "[initiator]\nhost = \"root@x\"\n[target]\nhost = \"local\"\nportals = [\"127.0.0.1:3260\"]\n",
                "bed.toml:2: initiator.host:",
            ),
            (
                "[initiator]\nhost = \"local\"\n[target]\nhost = \"local\"\nportals = [\"10.0.2.2\"]\n",
                "bed.toml:5: target.portals[0]: \"10.0.2.2\" is not ADDRESS:PORT",
            ),
            (
                "[initiator]\nhost = \"local\"\n[target]\nhost = \"local\"\nportals = [\"10.0.2.2:3260\"]\nlisten = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n",
                "bed.toml:6: target.listen: 2 addresses for 1 portals",
            ),
            (
                "[initiator]\nhost = \"local\"\ninterfaces = [\"eth0; reboot\"]\n[target]\nhost = \"local\"\nportals = [\"10.0.2.2:3260\"]\n",
                "bed.toml:3: initiator.interfaces[0]: \"eth0; reboot\" is not an interface name",
            ),
            (
                "[initiator]\nhost = \"local\"\n[target]\nhost = \"local\"\nportals = [\"10.0.2.2:3260\"]\nexternal = \"iscsi://10.0.2.2:3260/iqn.x\"\n",
                "bed.toml:6: target.external: \"iscsi://10.0.2.2:3260/iqn.x\": no LUN",
            ),
            (
                "[initiator]\nhost = \"local\"\n[target]\nhost = \"local\"\nportals = [\"10.0.2.2:3260\"]\nexternal_writable = true\n",
                "bed.toml:6: target.external_writable: only with `external`",
            ),
            (
                "[initiator]\nhost = \"local\"\nfio_libscsi = \"x\"\n",
                "bed.toml:3: initiator.fio_libscsi: unknown key",
            ),
        ];
        for (text, expected) in cases {
            let e = Testbed::parse(text, "bed.toml").unwrap_err().to_string();
            assert!(e.starts_with(expected), "{e}\nexpected: {expected}");
        }
    }
}
