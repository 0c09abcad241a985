//! What a plan needs from the machine, checked before its first run: the
//! programs its cases run (`ip` and `tc` from iproute2, `ethtool`, tgt's
//! `tgtd` and `tgtadm`, fio built with libiscsi's engine), root, and the
//! kernel's network namespaces.
//!
//! [`check`] is a pure function of the plan's cases and a [`Machine`], the
//! view of what exists, so it is tested without touching this machine;
//! [`Probe`] is the real view. [`prepare`] acts on what it finds: as root
//! with apt-get it installs what is missing through an [`Installer`] (the
//! Debian packages, and fio built by `crates/lab/fio-libiscsi`), says so, and
//! checks again; otherwise it stops before any run with the command that
//! would install it, or, with `skip_missing`, lets the rest run and lists
//! the cases it skips.
//!
//! Root and namespaces cannot be installed, and a loopback plan has always
//! run without them, on the host's own 127.0.0.1. There a case that
//! changes a link knob from its reference (MTU, offloads) would measure
//! nothing and is skipped; link knobs every case shares with its reference,
//! such as the baseline's MTU, are lost and listed; a case that cannot run
//! at all without root (another topology, tgt) is skipped. Only when no
//! case is left does the lab stop.

use crate::install::Installer;
use crate::knobs::{InitiatorImpl, KnobSet, TargetImpl};
use crate::netcmd::{self, CommandError};
use crate::peers::fio::{self, FioUnusable};
use crate::plan::{ResolvedCase, TopologyKind};
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::io::Write;

/// Something a case needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Need {
    /// `ip` (iproute2): namespaces, veth pairs, bridges, VxLAN, MTU.
    Ip,
    /// `tc` (iproute2): the rate knob and the congested topology's tbf.
    Tc,
    /// `ethtool`: the offload knobs.
    Ethtool,
    /// tgt's `tgtd` and `tgtadm`: `target = "tgt"`.
    Tgt,
    /// fio built with libiscsi's engine: `initiator = "libiscsi"`.
    FioLibiscsi,
    /// Root: network namespaces need it, and so does tgtd.
    Root,
    /// The kernel's network namespaces: `ip netns add` works (it may not
    /// in a container, even as root).
    Namespaces,
}

impl Need {
    /// Its name for people.
    pub fn name(self) -> &'static str {
        match self {
            Need::Ip => "ip",
            Need::Tc => "tc",
            Need::Ethtool => "ethtool",
            Need::Tgt => "tgtd and tgtadm",
            Need::FioLibiscsi => "fio with the libiscsi engine",
            Need::Root => "root",
            Need::Namespaces => "network namespaces",
        }
    }

    /// The Debian package that installs it.
    pub fn package(self) -> Option<&'static str> {
        match self {
            Need::Ip | Need::Tc => Some("iproute2"),
            Need::Ethtool => Some("ethtool"),
            Need::Tgt => Some("tgt"),
            Need::FioLibiscsi | Need::Root | Need::Namespaces => None,
        }
    }

    /// Whether the lab can install it (a package, or fio through the script).
    pub fn installable(self) -> bool {
        self.package().is_some() || self == Need::FioLibiscsi
    }

    /// Where it comes from, for people.
    fn source(self) -> String {
        match self.package() {
            Some(p) => format!("Debian package {p}"),
            None if self == Need::FioLibiscsi => "built by crates/lab/fio-libiscsi".into(),
            None if self == Need::Root => "network namespaces and tgtd need it".into(),
            None => "the kernel's; not something to install".into(),
        }
    }
}

/// The view of what exists on a machine. [`Probe`] looks at this one.
pub trait Machine {
    /// Whether the lab runs as root.
    fn root(&self) -> bool;
    /// Whether `program` is installed (on PATH, /usr/sbin or /sbin).
    fn program(&self, program: &str) -> bool;
    /// Whether fio with libiscsi's engine is there; why not otherwise.
    fn fio_libiscsi(&self) -> Result<(), FioUnusable>;
    /// Whether a network namespace can be made; asked only as root with `ip`.
    fn namespaces(&self) -> Result<(), CommandError>;
}

/// How a case uses what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The case cannot run without it.
    Case,
    /// A link knob on the loopback topology the case shares with its
    /// reference: without namespaces both run on the host's own lo,
    /// without it, and their comparison still stands.
    SharedLink,
    /// A link knob on the loopback topology the case changes from its
    /// reference: without it the case would measure nothing.
    ChangedLink,
}

/// One thing a case needs, and the part of the case that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// What.
    pub need: Need,
    /// The setting that needs it, for people: `mtu 9000`, `target = tgt`.
    pub by: String,
    /// How the case uses it.
    pub scope: Scope,
}

/// Link knobs a case sets, by [`KnobSet::describe`] name: `mtu`,
/// `rate_mbit`, `initiator.tso`, ...
fn link_settings(knobs: &KnobSet) -> BTreeMap<String, String> {
    knobs
        .describe()
        .into_iter()
        .filter(|(k, _)| {
            k == "mtu"
                || k == "rate_mbit"
                || k.starts_with("initiator.")
                || k.starts_with("target.")
        })
        .collect()
}

/// The offload settings as people read them: `tso, gso, gro off`, with the
/// side named when the two sides differ.
fn offloads_text(offloads: &BTreeMap<String, String>) -> String {
    let mut by_value: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut names: Vec<&str> = offloads
        .keys()
        .filter_map(|k| k.split_once('.').map(|(_, f)| f))
        .collect();
    names.sort_by_key(|f| crate::link::Offload::named(f));
    names.dedup();
    for f in names {
        let i = offloads.get(&format!("initiator.{f}"));
        let t = offloads.get(&format!("target.{f}"));
        match (i, t) {
            (Some(i), Some(t)) if i == t => by_value.entry(i).or_default().push(f.into()),
            _ => {
                for (side, v) in [("initiator", i), ("target", t)] {
                    if let Some(v) = v {
                        by_value.entry(v).or_default().push(format!("{side}.{f}"));
                    }
                }
            }
        }
    }
    let parts: Vec<String> = by_value
        .into_iter()
        .rev() // "off" before "on": what a case usually changes first
        .map(|(v, fs)| format!("{} {v}", fs.join(", ")))
        .collect();
    format!("offloads {}", parts.join("; "))
}

/// What `case` needs, each with the setting that needs it. `reference` is
/// the case it is compared to (None for the baseline, whose link knobs
/// every case shares).
pub fn requirements(case: &ResolvedCase, reference: Option<&ResolvedCase>) -> Vec<Requirement> {
    let mut out = Vec::new();
    let mut push = |need, by: String, scope| out.push(Requirement { need, by, scope });
    let knobs = &case.knobs;
    if case.topology == TopologyKind::Physical {
        // A test bed's hosts are checked case by case when it runs
        // (`crate::bed::Bed::unavailable`): nothing here needs them.
        return out;
    }
    let loopback = case.topology == TopologyKind::Loopback;
    let link = link_settings(knobs);
    let reference_link = reference.map(|r| link_settings(&r.knobs));
    // Whether the case's values of these link knobs differ from its reference's.
    let changed = |keys: &dyn Fn(&str) -> bool| {
        reference_link.as_ref().is_some_and(|r| {
            let pick = |m: &BTreeMap<String, String>| {
                m.iter()
                    .filter(|(k, _)| keys(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>()
            };
            pick(r) != pick(&link)
        })
    };
    let link_scope = |changed: bool| match (loopback, changed) {
        (false, _) => Scope::Case,
        (true, true) => Scope::ChangedLink,
        (true, false) => Scope::SharedLink,
    };
    if !loopback {
        let by = format!("the {} topology", case.topology);
        push(Need::Namespaces, by, Scope::Case);
    }
    if case.topology == TopologyKind::Congested {
        let by = "the congested topology's rate limit (tc tbf)".to_string();
        push(Need::Tc, by, Scope::Case);
    }
    // On loopback a rate has no link to limit: the topology refuses it, needing nothing.
    if let (Some(rate), false) = (knobs.link.rate_mbit, loopback) {
        push(Need::Tc, format!("rate_mbit {rate}"), Scope::Case);
    }
    if let (Some(mtu), true) = (knobs.link.mtu, loopback) {
        let scope = link_scope(changed(&|k| k == "mtu"));
        push(Need::Namespaces, format!("mtu {mtu}"), scope);
    }
    let offloads: BTreeMap<String, String> = link
        .iter()
        .filter(|(k, _)| k.contains('.'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !offloads.is_empty() {
        let by = offloads_text(&offloads);
        let scope = link_scope(changed(&|k| k.contains('.')));
        if loopback {
            push(Need::Namespaces, by.clone(), scope);
        }
        push(Need::Ethtool, by, scope);
    }
    if knobs.target_impl() == TargetImpl::Tgt {
        push(Need::Tgt, "target = tgt".into(), Scope::Case);
        push(Need::Root, "target = tgt".into(), Scope::Case);
    }
    if knobs.initiator_impl() == InitiatorImpl::Libiscsi {
        push(
            Need::FioLibiscsi,
            "initiator = libiscsi".into(),
            Scope::Case,
        );
    }
    out
}

/// Something missing, with the cases that need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// What.
    pub need: Need,
    /// Why it counts as missing ("not found on PATH, /usr/sbin or /sbin").
    pub why: String,
    /// (case, the setting that needs it), in plan order.
    pub users: Vec<(String, String)>,
}

impl Missing {
    /// The cases that need it, once each, in plan order.
    pub fn cases(&self) -> Vec<&str> {
        let mut cases: Vec<&str> = Vec::new();
        for (case, _) in &self.users {
            if !cases.contains(&case.as_str()) {
                cases.push(case);
            }
        }
        cases
    }
}

/// Link knobs that cases run without (on the host's own loopback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// The setting: `mtu 1500`.
    pub what: String,
    /// Why it cannot be applied.
    pub why: String,
    /// The cases that run without it.
    pub cases: Vec<String>,
}

impl Lost {
    /// One line for the console and the report.
    pub fn line(&self) -> String {
        format!(
            "{} not applied in {} ({}): they run on the host's own loopback, without a namespace",
            self.what,
            self.cases.join(", "),
            self.why
        )
    }
}

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// What is missing, each with the cases that need it.
    pub missing: Vec<Missing>,
    /// The cases that cannot run here, each with why.
    pub blocked: Vec<(String, String)>,
    /// Link knobs cases run without.
    pub lost: Vec<Lost>,
}

impl Check {
    /// The missing things the lab could install.
    pub fn installable(&self) -> Vec<&Missing> {
        self.missing
            .iter()
            .filter(|m| m.need.installable())
            .collect()
    }

    /// Whether nothing is missing and nothing is lost.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.blocked.is_empty() && self.lost.is_empty()
    }
}

/// What a need resolves to on a machine: None when it is there, else the
/// need actually missing (namespaces may come down to root or `ip`) and why.
fn resolve(machine: &dyn Machine, need: Need) -> Option<(Need, String)> {
    let program = |name: &str| {
        (!machine.program(name)).then(|| format!("{name} not found on PATH, /usr/sbin or /sbin"))
    };
    let not_root = || "not root".to_string();
    let why = match need {
        Need::Ip => program("ip"),
        Need::Tc => program("tc"),
        Need::Ethtool => program("ethtool"),
        Need::Tgt => program("tgtd").or_else(|| program("tgtadm")),
        Need::FioLibiscsi => machine.fio_libiscsi().err().map(|e| e.to_string()),
        Need::Root => (!machine.root()).then(not_root),
        Need::Namespaces => {
            if !machine.root() {
                return Some((Need::Root, not_root()));
            }
            if let Some(why) = program("ip") {
                return Some((Need::Ip, why));
            }
            machine.namespaces().err().map(|e| e.to_string())
        }
    };
    why.map(|w| (need, w))
}

/// Which of `cases` can run on `machine`, what is missing for the others,
/// and what the rest run without. Pure: everything it knows of the machine
/// comes through `machine`.
pub fn check(cases: &[ResolvedCase], machine: &dyn Machine) -> Check {
    let mut cache: BTreeMap<Need, Option<(Need, String)>> = BTreeMap::new();
    let mut resolved = |need: Need| {
        cache
            .entry(need)
            .or_insert_with(|| resolve(machine, need))
            .clone()
    };
    let mut missing: Vec<Missing> = Vec::new();
    let mut note_missing = |need: Need, why: &str, case: &str, by: &str| {
        let user = (case.to_string(), by.to_string());
        match missing.iter_mut().find(|m| m.need == need) {
            Some(m) if !m.users.contains(&user) => m.users.push(user),
            Some(_) => {}
            None => missing.push(Missing {
                need,
                why: why.to_string(),
                users: vec![user],
            }),
        }
    };
    let mut blocked = Vec::new();
    let mut lost: Vec<Lost> = Vec::new();
    for case in cases {
        if case.topology != TopologyKind::Physical {
            // Nothing to install: the case needs machines, not namespaces.
            if let Some(why) = case.knobs.needs_test_bed() {
                blocked.push((case.name.clone(), why));
                continue;
            }
        }
        let reference = case
            .compare_to
            .as_ref()
            .and_then(|r| cases.iter().find(|c| c.name == *r));
        let namespaces_missing = resolved(Need::Namespaces).is_some();
        // (need, why, by) the case cannot do without; installable or not.
        let (mut fixed, mut installable) = (Vec::new(), Vec::new());
        let mut shared = Vec::new();
        for r in requirements(case, reference) {
            let link = r.scope != Scope::Case;
            // A program for a loopback link knob is moot without namespaces:
            // the knob cannot be applied anyway.
            if link && r.need != Need::Namespaces && namespaces_missing {
                continue;
            }
            let Some((need, why)) = resolved(r.need) else {
                continue;
            };
            let entry = (need, why, r.by, r.need);
            if r.scope == Scope::SharedLink && r.need == Need::Namespaces {
                shared.push(entry);
            } else if need.installable() {
                installable.push(entry);
            } else {
                fixed.push(entry);
            }
        }
        // What stops a case first: installing a package does not make root.
        let stoppers = if fixed.is_empty() {
            &installable
        } else {
            &fixed
        };
        for (need, why, by, _) in stoppers {
            note_missing(*need, why, &case.name, by);
        }
        for (need, why, by, _) in shared.iter().filter(|e| e.0.installable()) {
            note_missing(*need, why, &case.name, by);
        }
        if !stoppers.is_empty() {
            let why: Vec<String> = stoppers
                .iter()
                .map(|(need, why, by, asked)| match (need, asked) {
                    // "not root" says little: say what root is for.
                    (Need::Root, Need::Namespaces) => {
                        format!("{by} needs root, for a network namespace")
                    }
                    (Need::Root, _) => format!("{by} needs root, which tgtd runs as"),
                    _ => format!("{by} needs {} ({why})", need.name()),
                })
                .collect();
            blocked.push((case.name.clone(), why.join("; ")));
            continue;
        }
        for (need, why, by, _) in shared {
            let why = match need {
                Need::Root => why,
                Need::Namespaces => format!("network namespaces refused: {why}"),
                _ => format!("no {}: {why}", need.name()),
            };
            match lost.iter_mut().find(|l| l.what == by && l.why == why) {
                Some(l) => l.cases.push(case.name.clone()),
                None => lost.push(Lost {
                    what: by,
                    why,
                    cases: vec![case.name.clone()],
                }),
            }
        }
    }
    missing.sort_by_key(|m| m.need);
    Check {
        missing,
        blocked,
        lost,
    }
}

/// What `isoe lab` may do about what is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Install what is missing (as root, with apt-get).
    pub install: bool,
    /// Run the cases that can run when some cannot.
    pub skip_missing: bool,
}

/// Ready to run: the cases to leave out and what the others run without.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ready {
    /// (case, why) of every case not to run.
    pub skipped: Vec<(String, String)>,
    /// Link knobs the cases run without, one line each.
    pub lost: Vec<String>,
    /// What was installed, one line each.
    pub installed: Vec<String>,
}

/// Why the lab stops before its first run (exit status 2): the whole
/// message, naming each missing thing, its cases, and what would fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Stop(pub String);

/// The commands that would install what `missing` lists: one
/// `apt-get install` for the packages (`sudo` first when not root; where
/// there is no apt-get, the packages to find), then the fio script.
/// `script` is `crates/lab/fio-libiscsi` in a checkout, if there is one.
pub fn install_commands(
    missing: &[&Missing],
    root: bool,
    apt: bool,
    script: Option<&std::path::Path>,
) -> Vec<String> {
    let sudo = if root { "" } else { "sudo " };
    let mut packages: Vec<&str> = missing.iter().filter_map(|m| m.need.package()).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut out = Vec::new();
    if !packages.is_empty() {
        let list = packages.join(" ");
        out.push(if apt {
            format!("{sudo}apt-get install -y --no-install-recommends {list}")
        } else {
            format!("(no apt-get here) install what Debian calls {list} with this system's package manager")
        });
    }
    if missing.iter().any(|m| m.need == Need::FioLibiscsi) {
        out.push(match script {
            // The script calls sudo for apt-get itself; the binary goes to
            // the caller's cache, where the lab run by the same user looks.
            Some(path) => format!("bash {}", path.display()),
            None => format!(
                "{sudo}isoe lab (without --no-install: it builds fio from the copy of \
                 crates/lab/fio-libiscsi inside isoe)"
            ),
        });
    }
    out
}

/// The message of a stop for missing things: each with its cases, why it
/// was not installed, and the commands that would install it.
pub fn stop_message(plan: &str, check: &Check, not_installed: &str, commands: &[String]) -> String {
    let mut m =
        format!("isoe lab: plan {plan} needs what this machine does not have; nothing was run.\n");
    for x in &check.missing {
        let users: Vec<String> = x
            .users
            .iter()
            .map(|(case, by)| format!("{case} ({by})"))
            .collect();
        m += &format!(
            "  - {} ({}): {}; needed by {}\n",
            x.need.name(),
            x.need.source(),
            x.why,
            users.join(", ")
        );
    }
    if !commands.is_empty() {
        m += &format!("Not installed: {not_installed}. To install:\n");
        for c in commands {
            m += &format!("  {c}\n");
        }
        m += "then run the same command again; or add --skip-missing to run the other cases \
              now, these listed as skipped.";
    } else {
        m += "Add --skip-missing to run the other cases now, these listed as skipped.";
    }
    m
}

/// The check, then what to do about it: install (printing one line per
/// thing to `out`) and check again, stop, or go on without some cases.
pub fn prepare(
    plan: &str,
    cases: &[ResolvedCase],
    policy: Policy,
    machine: &dyn Machine,
    installer: &mut dyn Installer,
    out: &mut dyn Write,
) -> Result<Ready, Stop> {
    let mut found = check(cases, machine);
    let mut installed = Vec::new();
    let mut not_installed = String::new();
    // Twice at most: a second pass picks up what the first made checkable
    // (ethtool once iproute2 lets namespaces be made).
    for _ in 0..2 {
        let wanted = found.installable();
        if wanted.is_empty() {
            break;
        }
        not_installed = if !policy.install {
            "--no-install".into()
        } else if !machine.root() {
            "not root".into()
        } else if !machine.program("apt-get") {
            "apt-get not found".into()
        } else {
            String::new()
        };
        if !not_installed.is_empty() {
            break;
        }
        let failures = install(&wanted, installer, out, &mut installed);
        found = check(cases, machine);
        if !failures.is_empty() {
            not_installed = format!("installing failed: {}", failures.join("; "));
            break;
        }
    }
    if !found.installable().is_empty() && !policy.skip_missing {
        let commands = install_commands(
            &found.installable(),
            machine.root(),
            machine.program("apt-get"),
            fio::script_in_checkout().as_deref(),
        );
        return Err(Stop(stop_message(plan, &found, &not_installed, &commands)));
    }
    if !cases.is_empty() && found.blocked.len() == cases.len() {
        return Err(Stop(nothing_runs(plan, &found)));
    }
    Ok(Ready {
        skipped: found.blocked.clone(),
        lost: found.lost.iter().map(Lost::line).collect(),
        installed,
    })
}

/// Installs `wanted`, one line each on `out`; what failed.
fn install(
    wanted: &[&Missing],
    installer: &mut dyn Installer,
    out: &mut dyn Write,
    installed: &mut Vec<String>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut by_package: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in wanted {
        if let Some(p) = m.need.package() {
            let cases = by_package.entry(p).or_default();
            for c in m.cases() {
                if !cases.contains(&c) {
                    cases.push(c);
                }
            }
        }
    }
    if !by_package.is_empty() {
        for (package, cases) in &by_package {
            let _ = writeln!(
                out,
                "installing {package} (needed by {})...",
                cases.join(", ")
            );
        }
        let packages: Vec<&str> = by_package.keys().copied().collect();
        match installer.apt_install(&packages) {
            Ok(()) => installed.extend(packages.iter().map(|p| format!("Debian package {p}"))),
            Err(e) => failures.push(format!("apt-get install {}: {e}", packages.join(" "))),
        }
    }
    if let Some(m) = wanted.iter().find(|m| m.need == Need::FioLibiscsi) {
        let _ = writeln!(
            out,
            "building fio with the libiscsi engine (needed by {}) with crates/lab/fio-libiscsi; \
             a few minutes...",
            m.cases().join(", ")
        );
        match installer.build_fio() {
            Ok(path) => installed.push(format!("fio with libiscsi: {}", path.display())),
            Err(e) => failures.push(format!("building fio: {e}")),
        }
    }
    let _ = out.flush();
    failures
}

/// The message when no case can run here.
fn nothing_runs(plan: &str, check: &Check) -> String {
    let mut m = format!("isoe lab: no case of plan {plan} can run here; nothing was run.\n");
    for (case, why) in &check.blocked {
        m += &format!("  - {case}: {why}\n");
    }
    if check.missing.iter().any(|x| x.need == Need::Root) {
        m += "Run it as root: network namespaces and tgtd need root.";
    } else if check.missing.iter().any(|x| x.need == Need::Namespaces) {
        m += "This kernel (or container) does not let the lab make network namespaces.";
    } else if check.missing.is_empty() {
        // Only cases that need a test bed are left.
        m += "Name the machines with --testbed FILE (an example: \
              crates/lab/examples/testbed-physical.toml).";
    } else {
        m += "Install what they need (run without --no-install as root, or see above).";
    }
    m
}

/// The real machine.
#[derive(Debug, Default)]
pub struct Probe {
    namespaces: OnceCell<Result<(), CommandError>>,
}

impl Machine for Probe {
    fn root(&self) -> bool {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    fn program(&self, program: &str) -> bool {
        netcmd::find_program(program).is_some()
    }

    fn fio_libiscsi(&self) -> Result<(), FioUnusable> {
        fio::usable_fio().map(|_| ())
    }

    /// Makes a namespace and removes it, once per probe. Its name carries
    /// this process's PID like the topologies' (`isoe-lab-<PID>-probe`), so
    /// a lab killed in between leaves nothing the next start keeps.
    fn namespaces(&self) -> Result<(), CommandError> {
        self.namespaces
            .get_or_init(|| {
                let ns = format!(
                    "{}{}-probe",
                    crate::topology::NAMESPACE_PREFIX,
                    std::process::id()
                );
                netcmd::run(&netcmd::netns_add(&ns))?;
                netcmd::run(&netcmd::netns_del(&ns))?;
                Ok(())
            })
            .clone()
    }
}

#[cfg(test)]
mod tests;
