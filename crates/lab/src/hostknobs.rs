//! Knobs on the interfaces and sysctls of real machines: this
//! machine or SSH hosts ([`Host`]), or network namespaces on them. What a
//! test bed's NICs and kernels have is read before anything changes
//! ([`Saved::read`]), each case's knobs are applied over it
//! ([`Saved::apply`]), and at the end, on an error and on Ctrl-C it is all
//! put back ([`Saved::restore`], which [`Guard`] calls when dropped). The
//! saved state is written to a journal file first, so a lab that was
//! killed leaves what the next run puts back ([`restore_from_journal`]).
//!
//! What is read, applied and put back, per interface:
//!
//! | knob | read | set |
//! |---|---|---|
//! | `mtu` | `ip -j link show dev DEV` | `ip link set dev DEV mtu N` |
//! | offloads (`tso` ... `sg`, per side) | `ethtool -k` | `ethtool -K DEV FEATURE on\|off ...` |
//! | `rx_ring` `tx_ring` | `ethtool -g` | `ethtool -G DEV rx N tx N` |
//! | `rx_usecs` `tx_usecs` | `ethtool -c` | `ethtool -C DEV rx-usecs N tx-usecs N` |
//! | `channels` | `ethtool -l` | `ethtool -L DEV combined N` |
//! | `flow_control` | `ethtool -a` | `ethtool -A DEV autoneg off rx on\|off tx on\|off` |
//! | `rate_mbit` (initiator side) | `tc -j qdisc show dev DEV` | `tc qdisc replace dev DEV root tbf ...` |
//!
//! and per machine (or namespace) each sysctl the plan names, read from and
//! written to `/proc/sys`.
//!
//! Rules:
//!
//! - A knob the case leaves unset returns to the saved value, so a case
//!   after another never inherits its knobs; a value already as asked is not
//!   set again (a ring change resets many NICs).
//! - What a device does not support is skipped with ethtool's own words
//!   (`netlink error: Operation not supported`), as an [`Applied`] whose
//!   outcome is the reason; nothing is silently ignored.
//! - Offloads are set and put back feature by feature (`tx-checksum-sctp`,
//!   not `tx`): `ethtool -K DEV tx on` would turn on every Tx checksum
//!   feature, also those that were off before. What the kernel keeps off
//!   for a dependency (`off [requested on]`) is put back as requested.
//! - The link is never taken down or up: only the settings above change.
//!   The interface that carries the SSH connection to a host is noted
//!   ([`PortState::carries_ssh`]); its changes are the plan's to choose (an
//!   MTU above what the switch forwards would cut the connection, and no
//!   command could then put it back).
//! - A rate replaces only the kernel's own root qdisc (handle `0:`), which
//!   `tc qdisc del dev DEV root` brings back; a qdisc someone configured is
//!   left alone and the rate skipped, since the lab could not rebuild it.
//! - In a network namespace only `net.` sysctls are the namespace's own;
//!   the others would change the whole machine, and are skipped there.

mod apply;
pub mod parse;
#[cfg(test)]
mod tests;

use crate::applied::Applied;
use crate::host::Host;
use crate::knobs::KnobSet;
use crate::link::Side;
use crate::netcmd::{self, FeatureLine};
use crate::ssh::HostError;
use parse::{RootQdisc, Settings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// An interface the knobs reach: a device on a host, maybe in a network
/// namespace there, and whose side of the path it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The machine.
    pub host: Host,
    /// The network namespace on it; None for the machine's own.
    pub netns: Option<String>,
    /// The device (`eth0`, `ens3`).
    pub dev: String,
    /// Whose knobs apply to it (offloads are per side; the rate applies to
    /// the initiator's ports).
    pub side: Side,
}

impl Port {
    /// `dev` on `host`, in the machine's own namespace.
    pub fn new(host: Host, dev: impl Into<String>, side: Side) -> Port {
        Port {
            host,
            netns: None,
            dev: dev.into(),
            side,
        }
    }

    /// The same device in network namespace `netns` on the host.
    pub fn in_netns(mut self, netns: impl Into<String>) -> Port {
        self.netns = Some(netns.into());
        self
    }
}

/// How a journal names a host, for a later run to reach it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostId {
    /// `local` or `ssh://USER@HOST:PORT` ([`Host::url`]).
    pub url: String,
    /// The private key an SSH host was logged into with.
    pub key: Option<PathBuf>,
}

/// One interface as it was before the lab changed anything. An ethtool
/// query the device does not answer is kept as ethtool's message: the
/// knobs it would have read are skipped with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortState {
    /// Index into [`Journal::hosts`].
    pub host: usize,
    /// The network namespace; None for the machine's own.
    pub netns: Option<String>,
    /// The device.
    pub dev: String,
    /// Whose knobs apply (both when a machine is both ends).
    pub sides: Vec<Side>,
    /// Whether the SSH connection to the host runs over it.
    pub carries_ssh: bool,
    /// Its MTU.
    pub mtu: u32,
    /// `ethtool -k`.
    pub features: Result<Vec<FeatureLine>, Unanswered>,
    /// `ethtool -g`.
    pub rings: Result<Settings, Unanswered>,
    /// `ethtool -c`.
    pub coalesce: Result<Settings, Unanswered>,
    /// `ethtool -l`.
    pub channels: Result<Settings, Unanswered>,
    /// `ethtool -a`.
    pub pause: Result<Settings, Unanswered>,
    /// The root qdisc.
    pub qdisc: Result<RootQdisc, Unanswered>,
}

/// A query of a port's state that the device did not answer, kept (in
/// the journal too, as the text) as its message: the knobs it shows are
/// then left alone, with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{0}")]
pub struct Unanswered(pub String);

/// A command at a place that failed, told by what it said ([`said`]).
#[derive(Debug, thiserror::Error)]
#[error("{}", said(.0))]
pub struct CommandFailed(#[source] pub HostError);

/// Why a device's root qdisc could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QdiscError {
    /// `tc qdisc show` failed.
    #[error("tc qdisc show dev {dev}: {}", said(.source))]
    Show {
        /// The device.
        dev: String,
        /// Why.
        source: HostError,
    },
    /// What it printed could not be read.
    #[error("{0}")]
    Parse(#[from] parse::ParseError),
}

/// The sysctls of one machine or namespace as they were; None for a name
/// the kernel does not have (or that cannot be read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlState {
    /// Index into [`Journal::hosts`].
    pub host: usize,
    /// The network namespace; None for the machine's own.
    pub netns: Option<String>,
    /// Each name's value, whitespace runs as one space (`4096 131072 6291456`).
    pub values: BTreeMap<String, Option<String>>,
}

/// Everything [`Saved`] holds, as the journal file has it (JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// The machines, in the order ports first name them.
    pub hosts: Vec<HostId>,
    /// Each interface once.
    pub ports: Vec<PortState>,
    /// Each machine or namespace of the ports once.
    pub sysctls: Vec<SysctlState>,
}

/// Why the state could not be read or the journal kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KnobsError {
    /// A host did not answer, or an interface is not there.
    #[error("{place}: {why}")]
    Read {
        /// The interface or machine.
        place: String,
        /// What went wrong.
        why: String,
    },
    /// The journal could not be written, read or removed.
    #[error("knob journal {}: {why}", path.display())]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A journal an earlier run left could not be put back whole; reading
    /// now would take its changes for the machines' own settings.
    #[error("knob journal {} left by an earlier run could not be restored: {}", path.display(), problems.join("; "))]
    Leftover {
        /// The journal file, kept.
        path: PathBuf,
        /// What could not be put back.
        problems: Vec<String>,
    },
}

/// The knobs' state before a run, and the machines to put it back on.
#[derive(Debug)]
pub struct Saved {
    journal: Journal,
    /// One per [`Journal::hosts`].
    hosts: Vec<Host>,
}

/// Where commands run: a host, and a network namespace on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    pub host: &'a Host,
    pub netns: Option<&'a str>,
}

impl Place<'_> {
    /// Runs `argv` there (`ip netns exec NS` first for a namespace); on this
    /// machine the program is looked up in /usr/sbin and /sbin too.
    pub fn run(&self, argv: &[&str]) -> Result<String, HostError> {
        let mut full: Vec<String> = Vec::with_capacity(argv.len() + 4);
        if let Some(ns) = self.netns {
            full.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        full.extend(argv.iter().map(|a| a.to_string()));
        if self.host.is_local() {
            if let Some(path) = netcmd::find_program(&full[0]) {
                full[0] = path.display().to_string();
            }
        }
        self.host.run(&full)
    }

    /// `this machine`, `root@box:22`, `this machine (netns NS)`.
    pub fn name(&self) -> String {
        match self.netns {
            Some(ns) => format!("{} (netns {ns})", self.host.name()),
            None => self.host.name(),
        }
    }
}

/// What a failed command said: its stderr (ethtool's reason), else the error.
pub(crate) fn said(e: &HostError) -> String {
    match e {
        HostError::Failed { stderr, .. } if !stderr.trim().is_empty() => {
            stderr.trim().replace('\n', "; ")
        }
        other => other.to_string(),
    }
}

/// Every sysctl name a knob set writes, for [`Saved::read`].
pub fn sysctl_names<'k>(sets: impl IntoIterator<Item = &'k KnobSet>) -> Vec<String> {
    let mut names: Vec<String> = sets
        .into_iter()
        .flat_map(|k| k.sysctl.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `/proc/sys/...` for a sysctl name (dots are directories).
fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// A sysctl value as compared and kept: whitespace runs as one space.
fn normalize(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads sysctls `names` at `place` in one round trip; None for one that
/// is not there.
pub(crate) fn read_sysctls(
    place: Place,
    names: &[String],
) -> Result<BTreeMap<String, Option<String>>, HostError> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let script = "for p; do if [ -r \"$p\" ] && v=$(cat \"$p\" 2>/dev/null); then \
                  printf '%s\\n' \"$v\"; else echo @@isoe-missing@@; fi; echo @@isoe-end@@; done";
    let paths: Vec<String> = names.iter().map(|n| sysctl_path(n)).collect();
    let mut argv = vec!["sh", "-c", script, "sh"];
    argv.extend(paths.iter().map(String::as_str));
    let out = place.run(&argv)?;
    let mut values = out.split("@@isoe-end@@\n").map(|v| match v.trim() {
        "@@isoe-missing@@" => None,
        v => Some(normalize(v)),
    });
    Ok(names
        .iter()
        .map(|n| (n.clone(), values.next().flatten()))
        .collect())
}

/// Writes sysctl `name` at `place`.
pub(crate) fn write_sysctl(place: Place, name: &str, value: &str) -> Result<(), CommandFailed> {
    let path = sysctl_path(name);
    let argv = [
        "sh",
        "-c",
        "printf '%s\\n' \"$2\" > \"$1\"",
        "sh",
        &path,
        value,
    ];
    place.run(&argv).map(|_| ()).map_err(CommandFailed)
}

/// The interface that carries the SSH connection to `host` (the route
/// back to the client `$SSH_CONNECTION` names); None on this machine or
/// when it cannot be told.
fn ssh_device(host: &Host) -> Option<String> {
    if host.is_local() {
        return None;
    }
    let client = host.run(&["sh", "-c", "echo \"$SSH_CONNECTION\""]).ok()?;
    let client = client.split_whitespace().next()?.to_string();
    let json = host.run(&["ip", "-j", "route", "get", &client]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&json).ok()?;
    v[0]["dev"].as_str().map(str::to_string)
}

impl Saved {
    /// Reads the state of `ports` (each interface once, however many sides
    /// name it) and the sysctls `sysctls` on each machine or namespace the
    /// ports are in. Changes nothing. An interface that is not there, or a
    /// host that does not answer, is an error; an ethtool query the device
    /// does not answer is kept as its message.
    pub fn read(ports: &[Port], sysctls: &[String]) -> Result<Saved, KnobsError> {
        let mut saved = Saved {
            journal: Journal::default(),
            hosts: Vec::new(),
        };
        let mut ssh_devs: BTreeMap<usize, Option<String>> = BTreeMap::new();
        for port in ports {
            let host = saved.host_index(&port.host);
            let same =
                |p: &&mut PortState| p.host == host && p.netns == port.netns && p.dev == port.dev;
            if let Some(p) = saved.journal.ports.iter_mut().find(same) {
                if !p.sides.contains(&port.side) {
                    p.sides.push(port.side);
                }
                continue;
            }
            let ssh_dev = ssh_devs
                .entry(host)
                .or_insert_with(|| ssh_device(&port.host));
            let carries_ssh = port.netns.is_none() && ssh_dev.as_deref() == Some(&port.dev);
            let place = Place {
                host: &port.host,
                netns: port.netns.as_deref(),
            };
            let state = read_port(place, host, &port.dev, port.side, carries_ssh)?;
            saved.journal.ports.push(state);
            let scope = (host, port.netns.clone());
            if !saved
                .journal
                .sysctls
                .iter()
                .any(|s| (s.host, s.netns.clone()) == scope)
            {
                let values = read_sysctls(place, sysctls).map_err(|e| KnobsError::Read {
                    place: place.name(),
                    why: e.to_string(),
                })?;
                saved.journal.sysctls.push(SysctlState {
                    host,
                    netns: port.netns.clone(),
                    values,
                });
            }
        }
        Ok(saved)
    }

    fn host_index(&mut self, host: &Host) -> usize {
        if let Some(i) = self.hosts.iter().position(|h| h == host) {
            return i;
        }
        self.hosts.push(host.clone());
        self.journal.hosts.push(HostId {
            url: host.url(),
            key: host.key().map(Path::to_path_buf),
        });
        self.hosts.len() - 1
    }

    /// The state as read (what the journal holds).
    pub fn state(&self) -> &Journal {
        &self.journal
    }

    /// The state from a journal's JSON; SSH hosts' control sockets go in
    /// `run_dir`.
    pub fn from_journal(journal: Journal, run_dir: &Path) -> Result<Saved, HostError> {
        let hosts = journal
            .hosts
            .iter()
            .map(|h| Host::parse(&h.url, h.key.clone(), run_dir))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Saved { journal, hosts })
    }

    /// Writes the state to `path` (a new file, then renamed over the old,
    /// so a crash leaves the old journal or the new one, never half).
    pub fn write_journal(&self, path: &Path) -> Result<(), KnobsError> {
        let err = |why: String| KnobsError::Journal {
            path: path.to_path_buf(),
            why,
        };
        let json = serde_json::to_vec_pretty(&self.journal).map_err(|e| err(e.to_string()))?;
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| err(e.to_string()))
    }

    /// Applies a case's full knob set: what it sets is set, what it leaves
    /// unset goes back to the saved state, what is already as asked is not
    /// touched. One [`Applied`] per knob the case sets (its outcome the
    /// reason it was skipped, naming the interface), and one per knob that
    /// could not go back to its saved value.
    pub fn apply(&self, knobs: &KnobSet) -> Vec<Applied> {
        let mut ledger = apply::Ledger::new(knobs);
        for port in &self.journal.ports {
            let place = self.place(port.host, port.netns.as_deref());
            apply::mtu(place, port, knobs.link.mtu, &mut ledger);
            apply::offloads(place, port, &knobs.link, &mut ledger);
            apply::nic(place, port, &knobs.link.nic, &mut ledger);
            apply::rate(place, port, knobs.link.rate_mbit, &mut ledger);
        }
        self.apply_sysctls(&knobs.sysctl, &mut ledger);
        self.note_missing_sides(knobs, &mut ledger);
        ledger.into_applied()
    }

    /// A side's offloads, or a rate, asked of ports that include none of
    /// that side: said, rather than reported as applied.
    fn note_missing_sides(&self, knobs: &KnobSet, ledger: &mut apply::Ledger) {
        let has = |side: Side| self.journal.ports.iter().any(|p| p.sides.contains(&side));
        for (side, name) in [(Side::Initiator, "initiator"), (Side::Target, "target")] {
            if has(side) {
                continue;
            }
            for (knob, _) in knobs.describe() {
                if knob.starts_with(&format!("{name}.")) {
                    ledger.problem(&knob, format!("no {name} port among the interfaces"));
                }
            }
        }
        if knobs.link.rate_mbit.is_some() && !has(Side::Initiator) {
            ledger.problem("rate_mbit", "no initiator port to rate-limit".to_string());
        }
    }

    /// Only the NIC queue knobs (rings, coalescing, channels, flow
    /// control): what a topology's namespaces take from here.
    pub(crate) fn apply_nic(&self, nic: &crate::link::NicKnobs) -> Vec<Applied> {
        let knobs = KnobSet {
            link: crate::link::LinkKnobs {
                nic: *nic,
                ..Default::default()
            },
            ..KnobSet::default()
        };
        let mut ledger = apply::Ledger::new(&knobs);
        for port in &self.journal.ports {
            let place = self.place(port.host, port.netns.as_deref());
            apply::nic(place, port, nic, &mut ledger);
        }
        ledger.into_applied()
    }

    /// Only the sysctls.
    pub(crate) fn apply_sysctl_knobs(&self, sysctls: &BTreeMap<String, String>) -> Vec<Applied> {
        let knobs = KnobSet {
            sysctl: sysctls.clone(),
            ..KnobSet::default()
        };
        let mut ledger = apply::Ledger::new(&knobs);
        self.apply_sysctls(sysctls, &mut ledger);
        ledger.into_applied()
    }

    fn apply_sysctls(&self, sysctls: &BTreeMap<String, String>, ledger: &mut apply::Ledger) {
        for name in sysctls.keys() {
            let known = self
                .journal
                .sysctls
                .iter()
                .any(|s| s.values.contains_key(name));
            if !known {
                ledger.problem(
                    &crate::knobs::sysctl_knob(name),
                    "it was not read before the run, so it could not be put back; not set"
                        .to_string(),
                );
            }
        }
        for scope in &self.journal.sysctls {
            let place = self.place(scope.host, scope.netns.as_deref());
            apply::sysctls(place, scope, sysctls, ledger);
        }
    }

    /// Puts everything back as it was read; what could not be, one line each.
    pub fn restore(&self) -> Result<(), Vec<String>> {
        let problems: Vec<String> = self
            .apply(&KnobSet::default())
            .into_iter()
            .filter_map(|a| a.outcome.err().map(|why| format!("{}: {why}", a.knob)))
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The ports as they were given, for [`dump`].
    pub fn ports(&self) -> Vec<Port> {
        self.journal
            .ports
            .iter()
            .flat_map(|p| {
                p.sides.iter().map(|&side| Port {
                    host: self.hosts[p.host].clone(),
                    netns: p.netns.clone(),
                    dev: p.dev.clone(),
                    side,
                })
            })
            .collect()
    }

    /// The sysctl names it holds.
    pub fn sysctl_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .journal
            .sysctls
            .iter()
            .flat_map(|s| s.values.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn place<'a>(&'a self, host: usize, netns: Option<&'a str>) -> Place<'a> {
        Place {
            host: &self.hosts[host],
            netns,
        }
    }
}

fn read_port(
    place: Place,
    host: usize,
    dev: &str,
    side: Side,
    carries_ssh: bool,
) -> Result<PortState, KnobsError> {
    let link = place
        .run(&["ip", "-j", "link", "show", "dev", dev])
        .map_err(|e| KnobsError::Read {
            place: format!("{dev} on {}", place.name()),
            why: said(&e),
        })?;
    let (mtu, _) = parse::parse_link(&link).map_err(|e| KnobsError::Read {
        place: format!("{dev} on {}", place.name()),
        why: e.to_string(),
    })?;
    let query = |option: &str| {
        place
            .run(&["ethtool", option, dev])
            .map_err(|e| Unanswered(format!("ethtool {option} {dev}: {}", said(&e))))
    };
    Ok(PortState {
        host,
        netns: place.netns.map(str::to_string),
        dev: dev.to_string(),
        sides: vec![side],
        carries_ssh,
        mtu,
        features: query("-k").map(|o| netcmd::parse_ethtool_features(&o)),
        rings: query("-g").map(|o| parse::parse_settings(&o)),
        coalesce: query("-c").map(|o| parse::parse_settings(&o)),
        channels: query("-l").map(|o| parse::parse_settings(&o)),
        pause: query("-a").map(|o| parse::parse_settings(&o)),
        qdisc: read_qdisc(place, dev).map_err(|e| Unanswered(e.to_string())),
    })
}

pub(crate) fn read_qdisc(place: Place, dev: &str) -> Result<RootQdisc, QdiscError> {
    let json = place
        .run(&["tc", "-j", "qdisc", "show", "dev", dev])
        .map_err(|source| QdiscError::Show {
            dev: dev.to_owned(),
            source,
        })?;
    Ok(parse::parse_root_qdisc(&json)?)
}

/// A [`Saved`] state with its journal on disk, put back when dropped: the
/// way a run makes sure that an error or Ctrl-C (which ends the run loop,
/// then drops this) leaves the machines as they were. A run that is killed
/// leaves the journal for [`restore_from_journal`].
#[derive(Debug)]
pub struct Guard {
    saved: Saved,
    journal: PathBuf,
    done: bool,
}

impl Guard {
    /// Puts back what a journal at `journal` left (an earlier run killed
    /// midway), then reads the state and writes it to `journal` before
    /// anything changes.
    pub fn begin(ports: &[Port], sysctls: &[String], journal: &Path) -> Result<Guard, KnobsError> {
        restore_from_journal(journal).map_err(|problems| KnobsError::Leftover {
            path: journal.to_path_buf(),
            problems,
        })?;
        let saved = Saved::read(ports, sysctls)?;
        saved.write_journal(journal)?;
        Ok(Guard {
            saved,
            journal: journal.to_path_buf(),
            done: false,
        })
    }

    /// The saved state.
    pub fn saved(&self) -> &Saved {
        &self.saved
    }

    /// [`Saved::apply`].
    pub fn apply(&mut self, knobs: &KnobSet) -> Vec<Applied> {
        self.done = false;
        self.saved.apply(knobs)
    }

    /// Puts everything back and, when all of it went back, removes the
    /// journal; else keeps it for the next run and says what did not.
    pub fn finish(mut self) -> Result<(), Vec<String>> {
        self.finish_now()
    }

    fn finish_now(&mut self) -> Result<(), Vec<String>> {
        self.done = true;
        self.saved.restore()?;
        match std::fs::remove_file(&self.journal) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(vec![format!("removing {}: {e}", self.journal.display())]),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(problems) = self.finish_now() {
            eprintln!(
                "isoe-lab: knobs not put back (the journal {} keeps them for the next run): {}",
                self.journal.display(),
                problems.join("; ")
            );
        }
    }
}

/// Puts back what the journal at `path` holds, if there is one: the state
/// an earlier run saved before it was killed. Removes the file once all of
/// it is back and says true; false when there is no file; the problems
/// when some could not go back (the file stays). SSH control sockets go in
/// the journal's folder.
pub fn restore_from_journal(path: &Path) -> Result<bool, Vec<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(vec![format!("reading {}: {e}", path.display())]),
    };
    let journal: Journal = serde_json::from_str(&text)
        .map_err(|e| vec![format!("{} is not a knob journal: {e}", path.display())])?;
    let run_dir = path.parent().unwrap_or(Path::new("."));
    let saved = Saved::from_journal(journal, run_dir).map_err(|e| vec![e.to_string()])?;
    saved.restore()?;
    std::fs::remove_file(path).map_err(|e| vec![format!("removing {}: {e}", path.display())])?;
    Ok(true)
}

/// A text of everything the knobs touch on `ports` and of `sysctls` on
/// their machines and namespaces, stable from one reading to the next
/// while nothing changes: to compare before and after a run. Per interface
/// its MTU and whether it is up, `ethtool -k -g -c -l -a` and `tc qdisc
/// show` as printed (or what they said when they failed); per machine or
/// namespace each sysctl.
pub fn dump(ports: &[Port], sysctls: &[String]) -> String {
    let mut out = String::new();
    let mut seen_ports: Vec<(String, Option<String>, String)> = Vec::new();
    let mut seen_scopes: Vec<(String, Option<String>)> = Vec::new();
    for port in ports {
        let place = Place {
            host: &port.host,
            netns: port.netns.as_deref(),
        };
        let key = (port.host.url(), port.netns.clone(), port.dev.clone());
        if !seen_ports.contains(&key) {
            seen_ports.push(key);
            dump_port(&mut out, place, &port.dev);
        }
        let scope = (port.host.url(), port.netns.clone());
        if !seen_scopes.contains(&scope) && !sysctls.is_empty() {
            seen_scopes.push(scope);
            let _ = writeln!(out, "# {} sysctls", place.name());
            match read_sysctls(place, sysctls) {
                Ok(values) => {
                    for (name, v) in values {
                        let v = v.unwrap_or_else(|| "(none)".to_string());
                        let _ = writeln!(out, "{name} = {v}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "error: {}", said(&e));
                }
            }
        }
    }
    out
}

fn dump_port(out: &mut String, place: Place, dev: &str) {
    let _ = writeln!(out, "# {dev} on {}", place.name());
    let commands: [&[&str]; 7] = [
        &["ip", "-j", "link", "show", "dev", dev],
        &["ethtool", "-k", dev],
        &["ethtool", "-g", dev],
        &["ethtool", "-c", dev],
        &["ethtool", "-l", dev],
        &["ethtool", "-a", dev],
        &["tc", "qdisc", "show", "dev", dev],
    ];
    for argv in commands {
        let result = place.run(argv);
        if argv[0] == "ip" {
            // The link's counters and carrier change on their own: only
            // what the knobs touch (MTU) and the admin state are compared.
            let link = match result {
                Ok(json) => parse::parse_link(&json).map_err(|e| e.to_string()),
                Err(e) => Err(said(&e)),
            };
            match link {
                Ok((mtu, up)) => {
                    let _ = writeln!(out, "mtu {mtu}, {}", if up { "up" } else { "down" });
                }
                Err(why) => {
                    let _ = writeln!(out, "ip link: error: {why}");
                }
            }
            continue;
        }
        let _ = writeln!(out, "## {}", argv.join(" "));
        match result {
            Ok(text) => {
                for line in text.lines() {
                    let _ = writeln!(out, "{}", line.trim_end());
                }
            }
            Err(e) => {
                let _ = writeln!(out, "error: {}", said(&e));
            }
        }
    }
}
