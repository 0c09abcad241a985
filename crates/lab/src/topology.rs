//! Topologies (METHODOLOGY.md "Topologies"): the seeds' test beds rebuilt
//! with network namespaces as hosts, veth pairs as NIC ports, a Linux bridge
//! as the switch and VxLAN devices as the overlay.
//!
//! | kind | namespaces | portals | host addresses |
//! |---|---|---|---|
//! | `loopback` | `…-lo` (only `lo`) | 127.0.0.1:3260 | 127.0.0.1 |
//! | `base` (seed 001 Figure 1) | `…-host` (h0, h1), `…-tgt` (t0, t1) | 10.99.1.2, 10.99.2.2 | 10.99.1.1, 10.99.2.1 |
//! | `congested` (seed 001 Figure 2) | `…-host` (h0), `…-sw` (br0: sh0, st0–st3), `…-tgt` (t0–t3) | 10.99.3.2–10.99.3.5 | 10.99.3.1 |
//! | `vxlan` (seed 002) | `…-host` (h0, vx0), `…-tgt` (t0, vx0) | 10.99.5.2 (overlay) | 10.99.5.1 |
//!
//! Namespaces are named `isoe-lab-<PID>-<n>-<role>` (n counts topologies
//! within the process, so tests can run in parallel), which lets
//! [`cleanup_stale`] recognise the leftovers of a run that died. Addresses
//! from 10.99.0.0/16 exist only inside these namespaces; nothing is added
//! to the caller's namespace (veth pairs are created straight into theirs).
//!
//! A [`Topology`] removes what it made when dropped or [`Topology::destroy`]ed:
//! deleting a namespace deletes its veths, bridge, VxLAN devices and qdiscs.
//! Processes started in it with [`Topology::command`] must be stopped first;
//! the namespace lingers, nameless, until they exit.
//!
//! Without root or iproute2, `loopback` degrades to the caller's own
//! loopback ("host loopback"), where no link knob can be applied; the other
//! kinds refuse with [`TopologyError::NeedsRoot`].

mod apply;
mod describe;
mod layout;
mod stale;

pub use crate::applied::Applied;
use crate::applied::FeatureDefault;
pub use apply::MissingProgram;
pub use describe::{Description, InterfaceDescription, NamespaceDescription};
pub use layout::{VXLAN_OVERHEAD, VXLAN_VNI};
pub use stale::{cleanup_own, cleanup_stale, lab_namespaces, owner_pid, NAMESPACE_PREFIX};

use crate::link::Side;
use crate::netcmd;
use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The four test beds of METHODOLOGY.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Target and initiator on 127.0.0.1 in one namespace: the quick default.
    Loopback,
    /// Seed 001 Figure 1: host with two ports, two portals, 1:1, two paths.
    Base,
    /// Seed 001 Figure 2: four portals into one rate-limited host port, 4:1.
    Congested,
    /// Seed 002: the base path over a VxLAN overlay.
    Vxlan,
}

impl Kind {
    /// Every kind, in METHODOLOGY order.
    pub const ALL: [Kind; 4] = [Kind::Loopback, Kind::Base, Kind::Congested, Kind::Vxlan];

    /// The name plans and reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Loopback => "loopback",
            Kind::Base => "base",
            Kind::Congested => "congested",
            Kind::Vxlan => "vxlan",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A topology name that is none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown topology {0:?}: expected loopback, base, congested or vxlan")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Whose namespace: where a program runs and where an interface lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The host: the initiator (`isoe bench`) runs here.
    Host,
    /// The storage: the target (`isoe target`) runs here.
    Target,
    /// The switch of `congested` (a bridge); no program of ours runs here.
    Switch,
}

impl Role {
    /// The role's part of a namespace name (`host`, `tgt`, `sw`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Target => "tgt",
            Role::Switch => "sw",
        }
    }
}

/// How to make a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// TCP port of every portal (3260, iSCSI's).
    pub port: u16,
    /// The `congested` host port's rate when a case sets none, in Mbit/s.
    /// 1000: far below what a veth pair carries (one TCP stream at MTU 1500
    /// moved about 12 Gbit/s on this 2-core machine), so the host port is
    /// the bottleneck, as in seed 001 Figure 2.
    pub congested_rate_mbit: u32,
    /// Use network namespaces (needs root and iproute2). When false,
    /// `loopback` is the degraded host loopback and other kinds refuse.
    pub namespaces: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            port: 3260,
            congested_rate_mbit: 1000,
            namespaces: true,
        }
    }
}

/// Why a topology could not be made or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// Namespaces are needed and cannot be made here.
    #[error("the {kind} topology needs network namespaces, which need root and iproute2 (`ip`): {reason}")]
    NeedsRoot {
        /// The kind asked for.
        kind: Kind,
        /// What is missing.
        reason: String,
    },
    /// A command building the topology failed; what it made is removed.
    #[error("making the {kind} topology: {source}")]
    Setup {
        /// The kind asked for.
        kind: Kind,
        /// The failing command.
        source: netcmd::CommandError,
    },
    /// Removing the topology left something behind.
    #[error("removing the topology: {}", .0.join("; "))]
    Teardown(Vec<String>),
}

/// One interface of a topology and the knobs that reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The namespace's role.
    pub role: Role,
    /// The namespace it lives in.
    pub namespace: String,
    /// Its name (at most 15 bytes, the kernel's IFNAMSIZ − 1).
    pub name: String,
    /// `veth`, `bridge`, `vxlan` or `loopback`.
    pub kind: &'static str,
    /// Whose offload knobs apply to it (both on `loopback`'s `lo`; none on
    /// the switch's ports).
    pub sides: Vec<Side>,
    /// Added to the MTU knob for this interface (a VxLAN underlay carries
    /// the overlay's frames plus [`VXLAN_OVERHEAD`]).
    pub mtu_extra: u32,
    /// Whether the rate knob (`tc tbf`) applies to its egress.
    pub rate_limited: bool,
    /// Its address, `a.b.c.d/len`, if it has one.
    pub address: Option<String>,
}

/// Device defaults recorded at creation, what unset knobs return to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Defaults {
    /// MTU per interface index.
    pub mtu: Vec<u32>,
    /// Offload state per interface index, by ethtool short name; `Err` when
    /// `ethtool -k` could not be read.
    pub features: Vec<Result<HashMap<&'static str, FeatureDefault>, netcmd::CommandError>>,
    /// Rate of the host port.
    pub rate_mbit: Option<u32>,
}

/// A made topology. Removed on drop; see the module docs.
#[derive(Debug)]
pub struct Topology {
    kind: Kind,
    /// Namespaces this topology made and must delete (empty when degraded).
    namespaces: Vec<String>,
    /// Namespace per role; None for roles this kind lacks (and all when degraded).
    host_ns: Option<String>,
    target_ns: Option<String>,
    switch_ns: Option<String>,
    interfaces: Vec<Interface>,
    portals: Vec<SocketAddr>,
    host_addresses: Vec<IpAddr>,
    notes: Vec<String>,
    /// Why this is the degraded host loopback, if it is.
    degraded: Option<String>,
    defaults: Defaults,
    /// What the links are set to now; behind a lock so that applying
    /// knobs needs only `&self`, like writing to a `&File`.
    state: Mutex<LinkState>,
    /// The CPU each role's programs are held to, when pinned.
    cpu_of_host: Option<usize>,
    cpu_of_target: Option<usize>,
}

/// The link settings a topology has applied, to skip commands that would
/// change nothing.
#[derive(Debug, Default)]
pub(crate) struct LinkState {
    /// MTU now, per interface index.
    pub mtu_now: Vec<u32>,
    /// Offloads changed from the defaults, per interface index.
    pub features_dirty: Vec<bool>,
    /// Rate now; None when unknown after a failed change.
    pub rate_now: Option<Option<u32>>,
    /// The ports' rings, coalescing, channels and pause as they were made,
    /// read when a case first sets one of them.
    pub nic_saved: Option<crate::hostknobs::Saved>,
    /// The namespaces' sysctls as they were made, read name by name as
    /// cases first set them.
    pub sysctls_saved: Vec<crate::hostknobs::Saved>,
}

static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Make a topology of `kind`. On failure everything made so far is removed.
    pub fn create(kind: Kind, options: Options) -> Result<Topology, TopologyError> {
        assert!(
            options.congested_rate_mbit > 0,
            "a congested rate of 0 Mbit/s"
        );
        let unavailable = if options.namespaces {
            namespaces_unavailable()
        } else {
            Some("namespaces turned off in the options".to_string())
        };
        if let Some(reason) = unavailable {
            return match kind {
                Kind::Loopback => Ok(Topology::host_loopback(options.port, reason)),
                _ => Err(TopologyError::NeedsRoot { kind, reason }),
            };
        }
        let n = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{NAMESPACE_PREFIX}{}-{n}", std::process::id());
        let names = layout::Names::new(&prefix, kind);
        let l = layout::layout(kind, &names, options.port, options.congested_rate_mbit);
        let mut made = Vec::new();
        let built = build(&l, &mut made);
        if let Err(source) = built {
            let _ = delete_namespaces(&made);
            if kind == Kind::Loopback {
                // Root without the right to make namespaces (a container):
                // still run, on the caller's loopback, and say why.
                let reason = format!("could not make its namespace: {source}");
                return Ok(Topology::host_loopback(options.port, reason));
            }
            return Err(TopologyError::Setup { kind, source });
        }
        let role_ns = |role: Role| {
            l.namespaces
                .contains(&names.of(role).to_string())
                .then(|| names.of(role).to_string())
        };
        let mut t = Topology {
            kind,
            host_ns: role_ns(Role::Host),
            target_ns: role_ns(Role::Target),
            switch_ns: role_ns(Role::Switch),
            namespaces: made,
            interfaces: l.interfaces,
            portals: l.portals,
            host_addresses: l.host_addresses,
            notes: l.notes,
            degraded: None,
            defaults: Defaults {
                rate_mbit: l.default_rate_mbit,
                ..Defaults::default()
            },
            state: Mutex::new(LinkState {
                rate_now: Some(l.default_rate_mbit),
                ..LinkState::default()
            }),
            cpu_of_host: None,
            cpu_of_target: None,
        };
        // On error `t` drops here and deletes its namespaces.
        t.record_defaults()
            .map_err(|source| TopologyError::Setup { kind, source })?;
        Ok(t)
    }

    /// The caller's own loopback, no namespace: what `loopback` becomes
    /// without root.
    fn host_loopback(port: u16, reason: String) -> Topology {
        let localhost = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
        Topology {
            kind: Kind::Loopback,
            namespaces: Vec::new(),
            host_ns: None,
            target_ns: None,
            switch_ns: None,
            interfaces: Vec::new(),
            portals: vec![SocketAddr::new(localhost, port)],
            host_addresses: vec![localhost],
            notes: vec![format!(
                "host loopback (degraded): {reason}; target and initiator share the \
                 machine's own lo and no link knob can be applied"
            )],
            degraded: Some(format!("host loopback without a namespace ({reason})")),
            defaults: Defaults::default(),
            state: Mutex::new(LinkState {
                rate_now: Some(None),
                ..LinkState::default()
            }),
            cpu_of_host: None,
            cpu_of_target: None,
        }
    }

    fn record_defaults(&mut self) -> Result<(), netcmd::CommandError> {
        let mut mtus: HashMap<(String, String), u32> = HashMap::new();
        for ns in &self.namespaces {
            let json = netcmd::run(&netcmd::addr_show_json(ns))?;
            for (dev, mtu) in describe::mtus(&json) {
                mtus.insert((ns.clone(), dev), mtu);
            }
        }
        for i in &self.interfaces {
            let mtu = mtus.get(&(i.namespace.clone(), i.name.clone())).copied();
            self.defaults.mtu.push(mtu.unwrap_or(1500));
            let features = if i.sides.is_empty() {
                Ok(HashMap::new())
            } else {
                apply::read_features(&i.namespace, &i.name)
            };
            self.defaults.features.push(features);
        }
        let state = self.state.get_mut_unpoisoned();
        state.mtu_now = self.defaults.mtu.clone();
        state.features_dirty = vec![false; self.interfaces.len()];
        Ok(())
    }

    /// Which topology this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Target portals, in order (the target listens on each).
    pub fn portals(&self) -> Vec<SocketAddr> {
        self.portals.clone()
    }

    /// The initiator's addresses, one per host port.
    pub fn host_addresses(&self) -> Vec<IpAddr> {
        self.host_addresses.clone()
    }

    /// The namespace a role runs in; None for a role this kind lacks and for
    /// every role of the degraded host loopback.
    pub fn namespace(&self, role: Role) -> Option<&str> {
        match role {
            Role::Host => self.host_ns.as_deref(),
            Role::Target => self.target_ns.as_deref(),
            Role::Switch => self.switch_ns.as_deref(),
        }
    }

    /// Every namespace this topology made (and will delete).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Every interface knobs may touch, with its namespace.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// The interfaces a side's offload knobs apply to (on `loopback`, `lo`
    /// for both sides).
    pub fn ports(&self, side: Side) -> Vec<&Interface> {
        self.interfaces
            .iter()
            .filter(|i| i.sides.contains(&side))
            .collect()
    }

    /// Why this is the degraded host loopback, or None for a real topology.
    pub fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }

    /// What a reader of the report should know (shared devices, default rate,
    /// degradation).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A command running `program` inside `role`'s namespace
    /// (`ip netns exec NS program`); add arguments to it. `ip` enters the
    /// namespace and then execs the program, so the child's PID is the
    /// program's own: stop it by that PID before destroying the topology.
    /// In the degraded host loopback it runs `program` directly.
    ///
    /// # Panics
    /// For [`Role::Switch`] on a topology without a switch: no program of
    /// ours belongs there and asking is a bug.
    pub fn command(&self, role: Role, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = self.unpinned_command(role, program);
        let cpu = match role {
            Role::Host => self.cpu_of_host,
            Role::Target => self.cpu_of_target,
            Role::Switch => None,
        };
        if let Some(cpu) = cpu {
            pin_to(&mut c, cpu);
        }
        c
    }

    /// Holds the initiator's programs to the first CPU and the target's to
    /// the last, from the next [`Topology::command`] on; nothing on a
    /// machine of one CPU.
    pub fn pin_roles(&mut self) {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        if cpus >= 2 {
            self.cpu_of_host = Some(0);
            self.cpu_of_target = Some(cpus - 1);
        }
    }

    fn unpinned_command(&self, role: Role, program: impl AsRef<std::ffi::OsStr>) -> Command {
        if self.degraded.is_some() {
            return Command::new(program);
        }
        let ns = self.namespace(role).unwrap_or_else(|| {
            panic!(
                "the {} topology has no {} namespace",
                self.kind,
                role.as_str()
            )
        });
        let ip = netcmd::find_program("ip").unwrap_or_else(|| "ip".into());
        let mut c = Command::new(ip);
        c.args(["netns", "exec", ns]).arg(program);
        c
    }

    /// Remove everything this topology made, reporting what could not be.
    pub fn destroy(mut self) -> Result<(), TopologyError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), TopologyError> {
        let namespaces = std::mem::take(&mut self.namespaces);
        let problems = delete_namespaces(&namespaces);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(TopologyError::Teardown(problems))
        }
    }
}

/// Sets the child's CPU affinity to `cpu` between fork and exec: `ip netns
/// exec` and the program it execs keep it, and so do their threads.
fn pin_to(command: &mut Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls
    // only sched_setaffinity(2) on a set built on its stack, which is
    // async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("isoe-lab: {e}");
        }
    }
}

/// Add the namespaces (recording each in `made` at once, so a failure
/// later removes it) and run the setup commands.
fn build(l: &layout::Layout, made: &mut Vec<String>) -> Result<(), netcmd::CommandError> {
    for ns in &l.namespaces {
        netcmd::run(&netcmd::netns_add(ns))?;
        made.push(ns.clone());
    }
    for cmd in &l.setup {
        netcmd::run(cmd)?;
    }
    Ok(())
}

/// Delete namespaces, last made first; say what went wrong, including
/// processes still inside (which keep the namespace alive, nameless).
fn delete_namespaces(namespaces: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for ns in namespaces.iter().rev() {
        if let Ok(pids) = netcmd::run(&netcmd::netns_pids(ns)) {
            let pids: Vec<&str> = pids.split_whitespace().collect();
            if !pids.is_empty() {
                problems.push(format!(
                    "{ns}: processes {} are still inside; its interfaces go when they exit",
                    pids.join(", ")
                ));
            }
        }
        if let Err(e) = netcmd::run(&netcmd::netns_del(ns)) {
            problems.push(e.to_string());
        }
    }
    problems
}

/// Why network namespaces cannot be made here, or None when they can.
fn namespaces_unavailable() -> Option<String> {
    match effective_uid() {
        Some(0) => {}
        Some(uid) => return Some(format!("not root (effective uid {uid})")),
        None => return Some("effective uid unknown (/proc/self/status unreadable)".to_string()),
    }
    if netcmd::find_program("ip").is_none() {
        return Some("`ip` (iproute2) not found".to_string());
    }
    None
}

/// The effective uid, from `/proc/self/status` ("Uid: real effective ...").
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_effective_uid(&status)
}

fn parse_effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in Kind::ALL {
            assert_eq!(k.as_str().parse::<Kind>(), Ok(k));
            assert_eq!(k.to_string(), k.as_str());
        }
        let e = "bridge".parse::<Kind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown topology \"bridge\": expected loopback, base, congested or vxlan"
        );
    }

    #[test]
    fn effective_uid_is_the_second_uid() {
        assert_eq!(
            parse_effective_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n"),
            Some(0)
        );
        assert_eq!(parse_effective_uid("Uid:\t0\t1000\t0\t0\n"), Some(1000));
        assert_eq!(parse_effective_uid("Name: x\n"), None);
    }

    #[test]
    fn without_namespaces_loopback_degrades_and_the_rest_refuse() {
        let options = Options {
            namespaces: false,
            ..Options::default()
        };
        let t = Topology::create(Kind::Loopback, options.clone()).unwrap();
        assert!(t.degraded().is_some());
        assert!(t.namespaces().is_empty());
        assert_eq!(t.portals(), ["127.0.0.1:3260".parse().unwrap()]);
        let c = t.command(Role::Target, "true");
        assert_eq!(c.get_program(), "true");
        for kind in [Kind::Base, Kind::Congested, Kind::Vxlan] {
            let e = Topology::create(kind, options.clone()).unwrap_err();
            assert!(matches!(e, TopologyError::NeedsRoot { .. }), "{e}");
            assert!(
                e.to_string()
                    .contains("needs network namespaces, which need root"),
                "{e}"
            );
        }
        t.destroy().unwrap();
    }
}
