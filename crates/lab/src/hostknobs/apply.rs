//! One case's knobs on one saved interface or machine: read what it has
//! now, set what differs from what is wanted (the case's value, else the
//! saved one), and note in a [`Ledger`] why a knob could not be.

use super::parse::{self, Pause, Settings};
use super::{
    read_qdisc, read_sysctls, said, write_sysctl, Place, PortState, SysctlState, Unanswered,
};
use crate::applied::{knob_state, Applied, NotApplied};
use crate::knobs::{nic_entries, sysctl_knob, KnobSet};
use crate::link::{LinkKnobs, NicKnobs, Offload, Side};
use crate::netcmd::{self, on_off, FeatureLine};
use std::collections::BTreeMap;

/// What the knobs of one apply came to: each knob the case set, and each
/// one that could not go back to its saved value, with its problems.
pub(crate) struct Ledger {
    entries: Vec<(String, String, Vec<String>)>,
}

/// The value a knob the case did not set is going back to.
const AS_BEFORE: &str = "as before";

impl Ledger {
    /// Every knob `knobs` sets, by [`KnobSet::describe`] name, with no
    /// problem yet.
    pub fn new(knobs: &KnobSet) -> Ledger {
        let entries = knobs
            .describe()
            .into_iter()
            .filter(|(k, _)| is_host_knob(k))
            .map(|(k, v)| (k, v, Vec::new()))
            .collect();
        Ledger { entries }
    }

    /// A problem with `knob`; a knob the case did not set is added, going
    /// back to its saved value.
    pub fn problem(&mut self, knob: &str, problem: String) {
        match self.entries.iter_mut().find(|e| e.0 == knob) {
            Some(e) => e.2.push(problem),
            None => self
                .entries
                .push((knob.to_string(), AS_BEFORE.to_string(), vec![problem])),
        }
    }

    /// One [`Applied`] per entry.
    pub fn into_applied(self) -> Vec<Applied> {
        self.entries
            .into_iter()
            .map(|(knob, value, problems)| Applied {
                knob,
                value,
                outcome: NotApplied::unless(problems),
            })
            .collect()
    }
}

/// Whether a [`KnobSet::describe`] name is one this module applies.
fn is_host_knob(name: &str) -> bool {
    name == "mtu"
        || name == "rate_mbit"
        || name.starts_with("initiator.")
        || name.starts_with("target.")
        || name.starts_with("sysctl.")
        || nic_entries(&NicKnobs::default())
            .iter()
            .any(|(k, _)| *k == name)
}

fn where_(place: Place, port: &PortState) -> String {
    format!("{} on {}", port.dev, place.name())
}

pub(super) fn mtu(place: Place, port: &PortState, mtu: Option<u32>, ledger: &mut Ledger) {
    let want = mtu.unwrap_or(port.mtu);
    let now = match place.run(&["ip", "-j", "link", "show", "dev", &port.dev]) {
        Ok(json) => parse::parse_link(&json).map_err(|e| e.to_string()),
        Err(e) => Err(said(&e)),
    };
    let problem = match now {
        Ok((now, _)) if now == want => return,
        Ok(_) => {
            let value = want.to_string();
            match place.run(&["ip", "link", "set", "dev", &port.dev, "mtu", &value]) {
                Ok(_) => return,
                Err(e) => said(&e),
            }
        }
        Err(why) => why,
    };
    ledger.problem("mtu", format!("{}: {problem}", where_(place, port)));
}

/// The features of a group line: the lines indented under it, else itself.
fn leaves<'l>(lines: &'l [FeatureLine], group: &str) -> Vec<&'l FeatureLine> {
    let Some(at) = lines.iter().position(|l| !l.child && l.name == group) else {
        return Vec::new();
    };
    let children: Vec<&FeatureLine> = lines[at + 1..].iter().take_while(|l| l.child).collect();
    if children.is_empty() {
        vec![&lines[at]]
    } else {
        children
    }
}

/// Whether a line is a feature of its own (not a group with lines under it).
fn is_leaf(lines: &[FeatureLine], i: usize) -> bool {
    lines[i].child || !lines.get(i + 1).is_some_and(|next| next.child)
}

/// What the kernel was asked for: "off [requested on]" was asked on.
fn wanted(l: &FeatureLine) -> bool {
    l.requested.unwrap_or(l.on)
}

pub(super) fn offloads(place: Place, port: &PortState, link: &LinkKnobs, ledger: &mut Ledger) {
    let here = where_(place, port);
    // (knob name per side, feature, value) for each offload the case sets here.
    let mut asked: Vec<(Vec<String>, Offload, bool)> = Vec::new();
    for f in Offload::ALL {
        let per_side: Vec<(String, bool)> = port
            .sides
            .iter()
            .filter_map(|&s| link.offload_knob(s, f))
            .collect();
        if per_side.is_empty() {
            continue;
        }
        let knobs: Vec<String> = per_side.iter().map(|(k, _)| k.clone()).collect();
        if per_side.iter().any(|(_, v)| *v != per_side[0].1) {
            for k in &knobs {
                ledger.problem(k, format!(
                    "{here}: both sides are this one device and ask for different values; left as before"
                ));
            }
            continue;
        }
        asked.push((knobs, f, per_side[0].1));
    }
    let saved = match &port.features {
        Ok(lines) => lines,
        Err(why) => {
            for (knobs, _, _) in &asked {
                for k in knobs {
                    ledger.problem(k, format!("{here}: {why}"));
                }
            }
            return;
        }
    };
    let want = wanted_features(&here, saved, &asked, ledger);
    let now = match read_features(place, &port.dev) {
        Ok(now) => now,
        Err(why) => {
            for (knobs, _, _) in &asked {
                for k in knobs {
                    ledger.problem(k, format!("{here}: {why}"));
                }
            }
            ledger.problem("offloads", format!("{here}: {why}"));
            return;
        }
    };
    let changes = feature_changes(&want, &now);
    let mut said_err = String::new();
    if !changes.is_empty() {
        let mut argv = vec!["ethtool", "-K", &port.dev];
        for (name, on) in &changes {
            argv.push(name);
            argv.push(on_off(*on));
        }
        if let Err(e) = place.run(&argv) {
            said_err = format!("; ethtool said {}", said(&e));
        }
    }
    let after = if changes.is_empty() {
        Ok(now)
    } else {
        read_features(place, &port.dev)
    };
    check_back(&here, saved, &asked, after, &said_err, ledger);
}

/// What every changeable feature of its own should be: its saved request,
/// but for the features of a knob the case sets that the device does not
/// have as asked. A knob that cannot change goes to the ledger.
pub(super) fn wanted_features<'l>(
    here: &str,
    saved: &'l [FeatureLine],
    asked: &[(Vec<String>, Offload, bool)],
    ledger: &mut Ledger,
) -> BTreeMap<&'l str, bool> {
    // Every feature of its own goes to its saved request, but those of a
    // knob the case sets and the device does not have as asked.
    let mut want: BTreeMap<&str, bool> = BTreeMap::new();
    for (i, l) in saved.iter().enumerate() {
        if is_leaf(saved, i) && !l.fixed {
            want.insert(&l.name, wanted(l));
        }
    }
    for (knobs, f, on) in asked {
        let Some(state) = knob_state(saved, *f) else {
            for k in knobs {
                ledger.problem(k, format!("{here}: ethtool -k shows no {f} feature"));
            }
            continue;
        };
        if state.on == *on {
            continue;
        }
        let changeable: Vec<&FeatureLine> = leaves(saved, f.ethtool_group())
            .into_iter()
            .filter(|l| !l.fixed)
            .collect();
        if changeable.is_empty() || state.fixed {
            for k in knobs {
                ledger.problem(
                    k,
                    format!(
                        "{here}: fixed {} by the driver ({})",
                        on_off(state.on),
                        state.text
                    ),
                );
            }
            continue;
        }
        for l in changeable {
            want.insert(&l.name, *on);
        }
    }
    want
}

/// The `ethtool -K` features and values that take `now` to `want`.
pub(super) fn feature_changes<'w>(
    want: &BTreeMap<&'w str, bool>,
    now: &[FeatureLine],
) -> Vec<(&'w str, bool)> {
    want.iter()
        .filter(|(name, on)| {
            now.iter()
                .find(|l| l.name == **name)
                .is_some_and(|l| wanted(l) != **on)
        })
        .map(|(name, on)| (*name, *on))
        .collect()
}

fn read_features(place: Place, dev: &str) -> Result<Vec<FeatureLine>, Unanswered> {
    place
        .run(&["ethtool", "-k", dev])
        .map(|o| netcmd::parse_ethtool_features(&o))
        .map_err(|e| Unanswered(format!("ethtool -k {dev}: {}", said(&e))))
}

/// Reads the features back: each knob the case set must now be as asked,
/// and every other feature as saved (ethtool exits 0 when the kernel
/// keeps a value, so its status says little).
fn check_back(
    here: &str,
    saved: &[FeatureLine],
    asked: &[(Vec<String>, Offload, bool)],
    after: Result<Vec<FeatureLine>, Unanswered>,
    said_err: &str,
    ledger: &mut Ledger,
) {
    let after = match after {
        Ok(lines) => lines,
        Err(why) => {
            ledger.problem(
                "offloads",
                format!("{here}: could not read back: {why}{said_err}"),
            );
            return;
        }
    };
    let mut mine: Vec<&str> = Vec::new();
    for (knobs, f, on) in asked {
        mine.extend(
            leaves(saved, f.ethtool_group())
                .iter()
                .map(|l| l.name.as_str()),
        );
        let problem = match knob_state(&after, *f) {
            Some(s) if s.on == *on => continue,
            Some(s) if s.text.contains("[requested") => format!(
                "{here}: the kernel keeps it {} because a feature it needs is off \
                 (TSO needs tx and sg, GSO needs sg): {}{said_err}",
                on_off(s.on),
                s.text
            ),
            Some(s) if s.fixed => {
                format!("{here}: fixed {} by the driver ({})", on_off(s.on), s.text)
            }
            Some(s) => format!("{here}: still {} ({}){said_err}", on_off(s.on), s.text),
            None => format!("{here}: ethtool -k no longer shows {f}{said_err}"),
        };
        for k in knobs {
            ledger.problem(k, problem.clone());
        }
    }
    // Features no knob of the case touches are back as they were asked.
    let astray: Vec<String> = saved
        .iter()
        .enumerate()
        .filter(|(i, l)| is_leaf(saved, *i) && !l.fixed && !mine.contains(&l.name.as_str()))
        .filter_map(|(_, l)| {
            let now = after.iter().find(|a| a.name == l.name)?;
            (wanted(now) != wanted(l)).then(|| format!("{} (was {})", now.text, l.text))
        })
        .collect();
    if !astray.is_empty() {
        ledger.problem(
            "offloads",
            format!(
                "{here}: not back as before: {}{said_err}",
                astray.join(", ")
            ),
        );
    }
}

/// A NIC setting set by a number: its knob, the ethtool query that shows
/// it and the option that sets it, the option's parameter and the key
/// the query prints it under.
struct Numeric {
    knob: &'static str,
    show: &'static str,
    set: &'static str,
    param: &'static str,
    key: &'static str,
}

const NUMERIC: [Numeric; 5] = [
    Numeric {
        knob: "rx_ring",
        show: "-g",
        set: "-G",
        param: "rx",
        key: "RX",
    },
    Numeric {
        knob: "tx_ring",
        show: "-g",
        set: "-G",
        param: "tx",
        key: "TX",
    },
    Numeric {
        knob: "rx_usecs",
        show: "-c",
        set: "-C",
        param: "rx-usecs",
        key: "rx-usecs",
    },
    Numeric {
        knob: "tx_usecs",
        show: "-c",
        set: "-C",
        param: "tx-usecs",
        key: "tx-usecs",
    },
    Numeric {
        knob: "channels",
        show: "-l",
        set: "-L",
        param: "combined",
        key: "Combined",
    },
];

fn numeric_value(nic: &NicKnobs, knob: &str) -> Option<u32> {
    match knob {
        "rx_ring" => nic.rx_ring,
        "tx_ring" => nic.tx_ring,
        "rx_usecs" => nic.rx_usecs,
        "tx_usecs" => nic.tx_usecs,
        "channels" => nic.channels,
        _ => unreachable!("not a numeric NIC knob: {knob}"),
    }
}

fn saved_settings<'p>(port: &'p PortState, show: &str) -> &'p Result<Settings, Unanswered> {
    match show {
        "-g" => &port.rings,
        "-c" => &port.coalesce,
        "-l" => &port.channels,
        _ => &port.pause,
    }
}

pub(super) fn nic(place: Place, port: &PortState, nic: &NicKnobs, ledger: &mut Ledger) {
    for show in ["-g", "-c", "-l"] {
        numeric_group(place, port, nic, show, ledger);
    }
    pause(place, port, nic.flow_control, ledger);
}

/// The knobs one ethtool query shows, set with one command.
fn numeric_group(place: Place, port: &PortState, nic: &NicKnobs, show: &str, ledger: &mut Ledger) {
    let here = where_(place, port);
    let members: Vec<&Numeric> = NUMERIC.iter().filter(|n| n.show == show).collect();
    let saved = match saved_settings(port, show) {
        Ok(s) => s,
        Err(why) => {
            for n in &members {
                if numeric_value(nic, n.knob).is_some() {
                    ledger.problem(n.knob, format!("{here}: {why}"));
                }
            }
            return;
        }
    };
    // (member, wanted value) for each setting the device has.
    let mut want: Vec<(&Numeric, u32)> = Vec::new();
    for n in members {
        match (numeric_value(nic, n.knob), saved.number(n.key)) {
            (Some(_), None) => ledger.problem(
                n.knob,
                format!(
                    "{here}: the device has no such setting (ethtool {show} {} shows {}: {})",
                    port.dev,
                    n.key,
                    saved.value(n.key).unwrap_or("nothing")
                ),
            ),
            (Some(v), Some(_)) | (None, Some(v)) => want.push((n, v)),
            (None, None) => {}
        }
    }
    if want.is_empty() {
        return;
    }
    let now = match place.run(&["ethtool", show, &port.dev]) {
        Ok(text) => parse::parse_settings(&text),
        Err(e) => {
            for (n, _) in &want {
                ledger.problem(n.knob, format!("{here}: ethtool {show}: {}", said(&e)));
            }
            return;
        }
    };
    let differ: Vec<(&Numeric, String)> = want
        .into_iter()
        .filter(|(n, v)| now.number(n.key) != Some(*v))
        .map(|(n, v)| (n, v.to_string()))
        .collect();
    if differ.is_empty() {
        return;
    }
    let set = differ[0].0.set;
    let mut argv = vec!["ethtool", set, &port.dev];
    for (n, v) in &differ {
        argv.push(n.param);
        argv.push(v);
    }
    if let Err(e) = place.run(&argv) {
        let why = format!("{here}: {}", said(&e));
        for (n, _) in &differ {
            ledger.problem(n.knob, why.clone());
        }
    }
}

fn pause(place: Place, port: &PortState, flow_control: Option<bool>, ledger: &mut Ledger) {
    let here = where_(place, port);
    let saved = match &port.pause {
        Ok(s) => Pause::from_settings(s),
        Err(why) => {
            if flow_control.is_some() {
                ledger.problem("flow_control", format!("{here}: {why}"));
            }
            return;
        }
    };
    let Some(saved) = saved else {
        if flow_control.is_some() {
            ledger.problem(
                "flow_control",
                format!("{here}: ethtool -a shows no Autonegotiate, RX and TX lines"),
            );
        }
        return;
    };
    let want = match flow_control {
        Some(on) => Pause {
            autoneg: false,
            rx: on,
            tx: on,
        },
        None => saved,
    };
    let now = place
        .run(&["ethtool", "-a", &port.dev])
        .map_err(|e| said(&e))
        .map(|text| Pause::from_settings(&parse::parse_settings(&text)));
    let problem = match now {
        Ok(Some(now)) if now == want => return,
        Ok(_) => {
            let argv = [
                "ethtool",
                "-A",
                &port.dev,
                "autoneg",
                on_off(want.autoneg),
                "rx",
                on_off(want.rx),
                "tx",
                on_off(want.tx),
            ];
            match place.run(&argv) {
                Ok(_) => return,
                Err(e) => said(&e),
            }
        }
        Err(why) => format!("ethtool -a: {why}"),
    };
    ledger.problem("flow_control", format!("{here}: {problem}"));
}

pub(super) fn rate(place: Place, port: &PortState, rate_mbit: Option<u32>, ledger: &mut Ledger) {
    if !port.sides.contains(&Side::Initiator) {
        return;
    }
    let here = where_(place, port);
    let saved = match &port.qdisc {
        Ok(q) => q,
        Err(why) => {
            if rate_mbit.is_some() {
                ledger.problem("rate_mbit", format!("{here}: {why}"));
            }
            return;
        }
    };
    if !saved.is_default() {
        if rate_mbit.is_some() {
            ledger.problem(
                "rate_mbit",
                format!(
                    "{here}: it has a root qdisc of its own ({} {}), which the lab would not \
                     put back exactly; not replaced",
                    saved.kind, saved.handle
                ),
            );
        }
        return;
    }
    let now = match read_qdisc(place, &port.dev) {
        Ok(q) => q,
        Err(why) => {
            ledger.problem("rate_mbit", format!("{here}: {why}"));
            return;
        }
    };
    let result = match rate_mbit {
        Some(r) if now.is_tbf_at(r) => return,
        Some(r) => {
            let rate = format!("{r}mbit");
            let burst = netcmd::tbf_burst_bytes(r).to_string();
            let latency = format!("{}ms", netcmd::TBF_LATENCY_MS);
            place.run(&[
                "tc", "qdisc", "replace", "dev", &port.dev, "root", "tbf", "rate", &rate, "burst",
                &burst, "latency", &latency,
            ])
        }
        None if now.is_default() => return,
        None => place.run(&["tc", "qdisc", "del", "dev", &port.dev, "root"]),
    };
    if let Err(e) = result {
        ledger.problem("rate_mbit", format!("{here}: {}", said(&e)));
    }
}

pub(super) fn sysctls(
    place: Place,
    scope: &SysctlState,
    asked: &BTreeMap<String, String>,
    ledger: &mut Ledger,
) {
    let here = place.name();
    let want = sysctl_wants(&here, place.netns.is_some(), &scope.values, asked, ledger);
    if want.is_empty() {
        return;
    }
    let names: Vec<String> = want.iter().map(|(n, _)| n.to_string()).collect();
    let now = match read_sysctls(place, &names) {
        Ok(now) => now,
        Err(e) => {
            for (name, _) in &want {
                ledger.problem(&sysctl_knob(name), format!("{here}: {}", said(&e)));
            }
            return;
        }
    };
    for (name, value) in want {
        if now.get(name).cloned().flatten().as_deref() == Some(value.as_str()) {
            continue;
        }
        if let Err(why) = write_sysctl(place, name, &value) {
            ledger.problem(&sysctl_knob(name), format!("{here}: {why}"));
        }
    }
}

/// The sysctls to have at a machine or namespace, each with its value:
/// the case's, else the saved one. A name outside `net.` is never written
/// in a namespace (it is the machine's); one the kernel lacks is skipped.
pub(super) fn sysctl_wants<'s>(
    here: &str,
    in_netns: bool,
    saved: &'s BTreeMap<String, Option<String>>,
    asked: &BTreeMap<String, String>,
    ledger: &mut Ledger,
) -> Vec<(&'s str, String)> {
    let mut want: Vec<(&str, String)> = Vec::new();
    for (name, saved) in saved {
        let knob = sysctl_knob(name);
        let case = asked.get(name).map(|v| super::normalize(v));
        // Outside net. a namespace shares the machine's value: never written there.
        if in_netns && !name.starts_with("net.") {
            if case.is_some() {
                ledger.problem(
                    &knob,
                    format!(
                        "{here}: not a network namespace's own setting; writing it would \
                         change the whole machine"
                    ),
                );
            }
            continue;
        }
        match (case, saved) {
            (Some(_), None) => ledger.problem(
                &knob,
                format!(
                    "{here}: no such sysctl ({} does not exist)",
                    super::sysctl_path(name)
                ),
            ),
            (Some(v), Some(_)) => want.push((name, v)),
            (None, Some(v)) => want.push((name, v.clone())),
            (None, None) => {}
        }
    }
    want
}
