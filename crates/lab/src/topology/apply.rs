//! Link knobs applied to a made topology (METHODOLOGY.md "Knobs"): MTU on
//! every link of the path, the host port's rate with `tc tbf`, and ethtool
//! offloads on each side's ports.
//!
//! [`Topology::apply`] takes the full set for a case: a knob left unset
//! returns to the device's default recorded when the topology was made, so
//! each case starts from the baseline whatever ran before. Every knob that
//! was set comes back as an [`Applied`], with the reason when it could not
//! be applied; nothing is silently ignored.
//!
//! Rings, coalescing, channels, flow control and sysctls go through
//! [`crate::hostknobs`], on the ports in their namespaces: what the devices
//! had is read when a case first sets one, and what a veth does not have
//! (rings, coalescing, combined channels, pause) is skipped with ethtool's
//! reason. Sysctls are written in the host's and the target's namespaces,
//! and only `net.` ones, which are each namespace's own.
//!
//! veth quirks (seed 002, METHODOLOGY): GRO is off by default on veth and
//! only takes effect when the sender's TSO is off (a TSO sender hands the
//! peer whole 64 KiB segments, leaving GRO nothing to merge); `tx off` also
//! turns TSO off, and `sg off` turns TSO and GSO off, because the kernel
//! keeps a feature off while one it depends on is. ethtool's exit status
//! does not tell: it exits 0 when the kernel kept a value and 1 when
//! nothing changed, so every requested feature is read back with
//! `ethtool -k`. On `lo`, `rx`, `tx` and `sg` are fixed on.

use super::{Interface, LinkState, Topology};
use crate::applied::{knob_state, Applied, FeatureDefault, NotApplied};
use crate::host::Host;
use crate::hostknobs::{Port, Saved};
use crate::link::{LinkKnobs, NicKnobs, Offload, Side};
use crate::netcmd::{self, FeatureLine};
use isoe_sync::MutexExt;
use std::collections::{BTreeMap, HashMap};

/// A link knob whose program is not installed. A case that sets it cannot
/// be what it says, so it is not measured at all (measured without the
/// knob, its "effect" would be noise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{program} is not installed (Debian package {package}), so {} cannot be applied",
    knobs.join(", ")
)]
pub struct MissingProgram {
    /// `ethtool` or `tc`.
    pub program: &'static str,
    /// Its Debian package.
    pub package: &'static str,
    /// The knobs that need it, as [`Applied::knob`] names them.
    pub knobs: Vec<String>,
}

/// Every offload knob a case sets, as (`side.feature`, on).
fn offload_knobs(knobs: &LinkKnobs) -> Vec<(String, bool)> {
    knobs_of_sides(knobs, &[Side::Initiator, Side::Target])
}

/// The offload knobs the case sets on `sides`, side by side.
fn knobs_of_sides(knobs: &LinkKnobs, sides: &[Side]) -> Vec<(String, bool)> {
    sides
        .iter()
        .flat_map(|&side| {
            Offload::ALL
                .into_iter()
                .filter_map(move |f| knobs.offload_knob(side, f))
        })
        .collect()
}

/// The six knobs' state on a device, by `ethtool -k`.
pub(crate) fn read_features(
    ns: &str,
    dev: &str,
) -> Result<HashMap<&'static str, FeatureDefault>, netcmd::CommandError> {
    let lines = read_lines(ns, dev)?;
    Ok(Offload::ALL
        .into_iter()
        .filter_map(|f| knob_state(&lines, f).map(|s| (f.name(), s)))
        .collect())
}

fn read_lines(ns: &str, dev: &str) -> Result<Vec<FeatureLine>, netcmd::CommandError> {
    let out = netcmd::run(&netcmd::ethtool_show(ns, dev))?;
    Ok(netcmd::parse_ethtool_features(&out))
}

fn where_(i: &Interface) -> String {
    format!("{} ({})", i.name, i.role.as_str())
}

/// Problems per offload knob name, kept in the order the case set them.
struct Ledger(Vec<(String, bool, Vec<String>)>);

impl Ledger {
    fn problem(&mut self, knob: &str, problem: String) {
        if let Some(entry) = self.0.iter_mut().find(|e| e.0 == knob) {
            entry.2.push(problem);
        }
    }
}

/// One requested feature on one device, to read back after `ethtool -K`.
struct Wanted {
    feature: Offload,
    on: bool,
    knobs: Vec<String>,
}

impl Topology {
    /// Apply a case's full set of link knobs; unset ones return to the
    /// device defaults recorded at creation. Returns one [`Applied`] per
    /// knob that was set (and one for any failed return to a default).
    ///
    /// MTU goes on every link of the path: both ends of every veth, the
    /// bridge and its ports, the VxLAN overlay (the knob's value) and its
    /// underlay (50 more), `lo` on `loopback`. Rate is a `tc tbf` on the
    /// host port and on the port facing it (see [`Interface::rate_limited`]);
    /// `loopback` has no link to limit. Offloads go on the side's ports; on
    /// `loopback` both sides are the same `lo`, and conflicting values for
    /// the two sides are refused.
    ///
    /// A knob whose program (`ethtool`, `tc`) is not installed is an error,
    /// before anything changes: the case cannot be measured as it says.
    pub fn apply(&self, knobs: &LinkKnobs) -> Result<Vec<Applied>, MissingProgram> {
        let mut out = Vec::new();
        if let Some(reason) = &self.degraded {
            let mut set: Vec<(String, String)> = Vec::new();
            set.extend(knobs.mtu.map(|m| ("mtu".to_string(), m.to_string())));
            set.extend(
                knobs
                    .rate_mbit
                    .map(|r| ("rate_mbit".to_string(), r.to_string())),
            );
            set.extend(
                offload_knobs(knobs)
                    .into_iter()
                    .map(|(k, on)| (k, netcmd::on_off(on).to_string())),
            );
            set.extend(
                crate::knobs::nic_entries(&knobs.nic)
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v))),
            );
            for (knob, value) in set {
                let outcome = Err(NotApplied::LinkOn(reason.to_string()));
                out.push(Applied {
                    knob,
                    value,
                    outcome,
                });
            }
            return Ok(out);
        }
        self.programs_for(knobs)?;
        // A poisoned lock only means an earlier apply panicked midway; the
        // state then errs towards running commands again, which is safe.
        let mut state = self.state.lock_unpoisoned();
        self.apply_mtu(&mut state, knobs.mtu, &mut out);
        self.apply_rate(&mut state, knobs.rate_mbit, &mut out);
        self.apply_offloads(&mut state, knobs, &mut out);
        self.apply_nic(&mut state, &knobs.nic, &mut out);
        Ok(out)
    }

    /// Apply a case's full set of sysctls in the host's and the target's
    /// namespaces; a name the case leaves unset goes back to what the
    /// namespace had when a case first set it. Only `net.` sysctls are a
    /// namespace's own: others are skipped with the reason, as is every
    /// sysctl on the degraded host loopback (it would change this machine).
    pub fn apply_sysctls(&self, sysctls: &BTreeMap<String, String>) -> Vec<Applied> {
        if let Some(reason) = &self.degraded {
            return sysctls
                .iter()
                .map(|(name, value)| Applied {
                    knob: crate::knobs::sysctl_knob(name),
                    value: value.clone(),
                    outcome: Err(NotApplied::SysctlsOn(reason.to_string())),
                })
                .collect();
        }
        let mut state = self.state.lock_unpoisoned();
        let known: Vec<String> = state
            .sysctls_saved
            .iter()
            .flat_map(Saved::sysctl_names)
            .collect();
        let new: Vec<String> = sysctls
            .keys()
            .filter(|n| !known.contains(n))
            .cloned()
            .collect();
        let mut out = Vec::new();
        if !new.is_empty() {
            match Saved::read(&self.side_ports(), &new) {
                Ok(saved) => state.sysctls_saved.push(saved),
                Err(e) => {
                    for name in &new {
                        out.push(Applied {
                            knob: crate::knobs::sysctl_knob(name),
                            value: sysctls[name].clone(),
                            outcome: Err(NotApplied::NotReadFirst(e.to_string())),
                        });
                    }
                }
            }
        }
        for saved in &state.sysctls_saved {
            let mine: BTreeMap<String, String> = sysctls
                .iter()
                .filter(|(n, _)| saved.sysctl_names().contains(n))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect();
            out.extend(saved.apply_sysctl_knobs(&mine));
        }
        out
    }

    /// Each side's port as a [`Port`] on this machine in its namespace.
    fn side_ports(&self) -> Vec<Port> {
        self.interfaces
            .iter()
            .flat_map(|i| {
                i.sides.iter().map(|&side| {
                    Port::new(Host::Local, i.name.clone(), side).in_netns(i.namespace.clone())
                })
            })
            .collect()
    }

    fn apply_nic(&self, state: &mut LinkState, nic: &NicKnobs, out: &mut Vec<Applied>) {
        if state.nic_saved.is_none() {
            if nic.is_empty() {
                return; // never changed: nothing to put back
            }
            match Saved::read(&self.side_ports(), &[]) {
                Ok(saved) => state.nic_saved = Some(saved),
                Err(e) => {
                    for (knob, value) in crate::knobs::nic_entries(nic) {
                        if let Some(value) = value {
                            out.push(Applied {
                                knob: knob.to_string(),
                                value,
                                outcome: Err(NotApplied::NotReadFirst(e.to_string())),
                            });
                        }
                    }
                    return;
                }
            }
        }
        let saved = state.nic_saved.as_ref().expect("read above");
        out.extend(saved.apply_nic(nic));
    }

    /// Whether the programs the set knobs need are installed: `ethtool`
    /// for offloads and NIC queue knobs on a device that takes them, `tc` for a rate on a
    /// topology with a link to limit. (`ip` made the topology.)
    fn programs_for(&self, knobs: &LinkKnobs) -> Result<(), MissingProgram> {
        let mut offloads: Vec<String> = offload_knobs(knobs).into_iter().map(|(k, _)| k).collect();
        offloads.extend(
            crate::knobs::nic_entries(&knobs.nic)
                .into_iter()
                .filter(|(_, v)| v.is_some())
                .map(|(k, _)| k.to_string()),
        );
        let has_ports = self.interfaces.iter().any(|i| !i.sides.is_empty());
        if !offloads.is_empty() && has_ports && netcmd::find_program("ethtool").is_none() {
            return Err(MissingProgram {
                program: "ethtool",
                package: "ethtool",
                knobs: offloads,
            });
        }
        let limited = self.interfaces.iter().any(|i| i.rate_limited);
        if knobs.rate_mbit.is_some() && limited && netcmd::find_program("tc").is_none() {
            return Err(MissingProgram {
                program: "tc",
                package: "iproute2",
                knobs: vec!["rate_mbit".into()],
            });
        }
        Ok(())
    }

    fn apply_mtu(&self, state: &mut LinkState, mtu: Option<u32>, out: &mut Vec<Applied>) {
        let targets: Vec<u32> = (0..self.interfaces.len())
            .map(|i| mtu.map_or(self.defaults.mtu[i], |m| m + self.interfaces[i].mtu_extra))
            .collect();
        let mut order: Vec<usize> = (0..targets.len())
            .filter(|&i| targets[i] != state.mtu_now[i])
            .collect();
        // Lower first, overlays before underlays; then raise, underlays
        // before overlays: a VxLAN device's MTU may not exceed its
        // underlay's minus 50. The bridge is last among equals (layout order).
        order.sort_by_key(|&i| {
            let extra = i64::from(self.interfaces[i].mtu_extra);
            let raise = targets[i] > state.mtu_now[i];
            (raise, if raise { -extra } else { extra }, i)
        });
        let mut problems = Vec::new();
        for i in order {
            let iface = &self.interfaces[i];
            match netcmd::run(&netcmd::set_mtu(&iface.namespace, &iface.name, targets[i])) {
                Ok(_) => state.mtu_now[i] = targets[i],
                Err(e) => problems.push(format!("{}: {}", where_(iface), e.detail)),
            }
        }
        let outcome = NotApplied::unless(problems);
        match mtu {
            Some(m) => out.push(Applied {
                knob: "mtu".into(),
                value: m.to_string(),
                outcome,
            }),
            None if outcome.is_err() => out.push(Applied {
                knob: "mtu".into(),
                value: "default".into(),
                outcome,
            }),
            None => {}
        }
    }

    fn apply_rate(&self, state: &mut LinkState, rate: Option<u32>, out: &mut Vec<Applied>) {
        let limited: Vec<usize> = (0..self.interfaces.len())
            .filter(|&i| self.interfaces[i].rate_limited)
            .collect();
        let value = rate.map_or_else(|| "default".to_string(), |r| r.to_string());
        if let Some(r) = rate {
            let refuse = if limited.is_empty() {
                Some(NotApplied::NoLinkToLimit(self.kind.to_string()))
            } else if r == 0 {
                Some(NotApplied::ZeroRate)
            } else {
                None
            };
            if let Some(reason) = refuse {
                out.push(Applied {
                    knob: "rate_mbit".into(),
                    value,
                    outcome: Err(reason),
                });
                return;
            }
        }
        let want = rate.or(self.defaults.rate_mbit);
        if state.rate_now == Some(want) {
            if rate.is_some() {
                out.push(Applied {
                    knob: "rate_mbit".into(),
                    value,
                    outcome: Ok(()),
                });
            }
            return;
        }
        let mut problems = Vec::new();
        for &i in &limited {
            let iface = &self.interfaces[i];
            let cmd = match want {
                Some(r) => netcmd::tbf(&iface.namespace, &iface.name, r),
                None => netcmd::qdisc_del_root(&iface.namespace, &iface.name),
            };
            if let Err(e) = netcmd::run(&cmd) {
                problems.push(format!("{}: {}", where_(iface), e.detail));
            }
        }
        // After a failure the qdiscs are in an unknown state: redo next time.
        state.rate_now = problems.is_empty().then_some(want);
        let outcome = NotApplied::unless(problems);
        if rate.is_some() || outcome.is_err() {
            out.push(Applied {
                knob: "rate_mbit".into(),
                value,
                outcome,
            });
        }
    }

    fn apply_offloads(&self, state: &mut LinkState, knobs: &LinkKnobs, out: &mut Vec<Applied>) {
        let mut ledger = Ledger(
            offload_knobs(knobs)
                .into_iter()
                .map(|(k, on)| (k, on, Vec::new()))
                .collect(),
        );
        let mut restore_problems = Vec::new();
        for idx in 0..self.interfaces.len() {
            let iface = &self.interfaces[idx];
            if iface.sides.is_empty() {
                continue;
            }
            let defaults = match &self.defaults.features[idx] {
                Ok(d) => d,
                Err(e) => {
                    for (knob, _) in explicit_knobs(iface, knobs) {
                        ledger.problem(
                            &knob,
                            format!("{}: its features could not be read: {e}", where_(iface)),
                        );
                    }
                    continue;
                }
            };
            let (command, wanted) = plan_device(iface, knobs, defaults, &mut ledger);
            if wanted.is_empty() && !state.features_dirty[idx] {
                continue; // at its defaults already: no command
            }
            let ran = if command.is_empty() {
                Ok(String::new())
            } else {
                netcmd::run(&netcmd::ethtool_features(
                    &iface.namespace,
                    &iface.name,
                    &command,
                ))
            };
            state.features_dirty[idx] = !wanted.is_empty();
            if wanted.is_empty() {
                if let Err(e) = ran {
                    state.features_dirty[idx] = true;
                    restore_problems.push(format!("{}: {}", where_(iface), e.detail));
                }
                continue;
            }
            check_back(iface, &wanted, ran.err(), &mut ledger);
        }
        for (knob, on, problems) in ledger.0 {
            let outcome = NotApplied::unless(problems);
            out.push(Applied {
                knob,
                value: netcmd::on_off(on).to_string(),
                outcome,
            });
        }
        if !restore_problems.is_empty() {
            out.push(Applied {
                knob: "offloads".into(),
                value: "default".into(),
                outcome: Err(NotApplied::Problems(restore_problems)),
            });
        }
    }
}

/// The offload knobs of `iface`'s sides that the case sets.
fn explicit_knobs(iface: &Interface, knobs: &LinkKnobs) -> Vec<(String, bool)> {
    knobs_of_sides(knobs, &iface.sides)
}

/// The `ethtool -K` features for one device (every changeable knob, set or
/// default) and the ones the case set, to read back. Fixed features and
/// conflicts go straight to the ledger.
fn plan_device(
    iface: &Interface,
    knobs: &LinkKnobs,
    defaults: &HashMap<&'static str, FeatureDefault>,
    ledger: &mut Ledger,
) -> (Vec<(&'static str, bool)>, Vec<Wanted>) {
    let (mut command, mut wanted) = (Vec::new(), Vec::new());
    for offload in Offload::ALL {
        let f = offload.name();
        let requests: Vec<(String, bool)> = iface
            .sides
            .iter()
            .filter_map(|&s| knobs.offload_knob(s, offload))
            .collect();
        let Some(default) = defaults.get(f) else {
            for (knob, _) in &requests {
                ledger.problem(
                    knob,
                    format!("{}: ethtool -k shows no {f} feature", where_(iface)),
                );
            }
            continue;
        };
        if requests.iter().any(|r| r.1 != requests[0].1) {
            for (knob, _) in &requests {
                ledger.problem(knob, format!(
                    "{}: both sides are this one device and ask for different values; left at its default ({})",
                    where_(iface), netcmd::on_off(default.on)
                ));
            }
            if !default.fixed {
                command.push((f, default.on));
            }
            continue;
        }
        let on = requests.first().map_or(default.on, |r| r.1);
        if default.fixed {
            if on != default.on {
                for (knob, _) in &requests {
                    ledger.problem(
                        knob,
                        format!(
                            "{}: fixed {} by the driver ({})",
                            where_(iface),
                            netcmd::on_off(default.on),
                            default.text
                        ),
                    );
                }
            }
            continue;
        }
        command.push((f, on));
        if !requests.is_empty() {
            wanted.push(Wanted {
                feature: offload,
                on,
                knobs: requests.into_iter().map(|r| r.0).collect(),
            });
        }
    }
    (command, wanted)
}

/// Read the device's features back and note each requested one the
/// kernel did not take, with ethtool's own line and its complaint.
fn check_back(
    iface: &Interface,
    wanted: &[Wanted],
    ran: Option<netcmd::CommandError>,
    ledger: &mut Ledger,
) {
    let said = ran
        .map(|e| format!("; ethtool said {}", e.detail))
        .unwrap_or_default();
    let lines = match read_lines(&iface.namespace, &iface.name) {
        Ok(lines) => lines,
        Err(e) => {
            for w in wanted {
                for knob in &w.knobs {
                    ledger.problem(
                        knob,
                        format!("{}: could not read back: {e}{said}", where_(iface)),
                    );
                }
            }
            return;
        }
    };
    for w in wanted {
        let problem = match knob_state(&lines, w.feature) {
            Some(s) if s.on == w.on => continue,
            Some(s) if s.text.contains("[requested") => format!(
                "{}: the kernel keeps it {} because a feature it needs is off \
                 (TSO needs tx and sg, GSO needs sg): {}{said}",
                where_(iface),
                netcmd::on_off(s.on),
                s.text
            ),
            Some(s) => format!(
                "{}: still {} ({}){said}",
                where_(iface),
                netcmd::on_off(s.on),
                s.text
            ),
            None => format!(
                "{}: ethtool -k no longer shows {}{said}",
                where_(iface),
                w.feature.name()
            ),
        };
        for knob in &w.knobs {
            ledger.problem(knob, problem.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Role;

    const VETH_TX_OFF: &str = "Features for h0:\n\
rx-checksumming: on\n\
tx-checksumming: off\n\
\ttx-checksum-ipv4: off [fixed]\n\
\ttx-checksum-ip-generic: off\n\
\ttx-checksum-ipv6: off [fixed]\n\
scatter-gather: on\n\
\ttx-scatter-gather: on\n\
tcp-segmentation-offload: on\n\
\ttx-tcp-segmentation: off [requested on]\n\
\ttx-tcp-accecn-segmentation: on\n\
generic-segmentation-offload: on\n\
generic-receive-offload: off\n";

    const LO: &str = "Features for lo:\n\
rx-checksumming: on [fixed]\n\
tx-checksumming: on\n\
\ttx-checksum-ipv4: off [fixed]\n\
\ttx-checksum-ip-generic: on [fixed]\n\
\ttx-checksum-ipv6: off [fixed]\n\
scatter-gather: on\n\
\ttx-scatter-gather: on [fixed]\n\
tcp-segmentation-offload: on\n\
\ttx-tcp-segmentation: on\n\
generic-segmentation-offload: on\n\
generic-receive-offload: on\n";

    fn state(out: &str, f: &str) -> (bool, bool) {
        let s = knob_state(
            &netcmd::parse_ethtool_features(out),
            Offload::named(f).unwrap(),
        )
        .unwrap();
        (s.on, s.fixed)
    }

    #[test]
    fn tso_reads_the_tcp_feature_not_the_group_line() {
        // The group line says "on" (accecn), but TCP segmentation is off.
        assert_eq!(state(VETH_TX_OFF, "tso"), (false, false));
        assert_eq!(state(VETH_TX_OFF, "tx"), (false, false));
        assert_eq!(state(VETH_TX_OFF, "gro"), (false, false));
        assert_eq!(state(VETH_TX_OFF, "sg"), (true, false));
    }

    #[test]
    fn lo_has_rx_tx_and_sg_fixed() {
        assert_eq!(state(LO, "rx"), (true, true));
        assert_eq!(state(LO, "tx"), (true, true));
        assert_eq!(state(LO, "sg"), (true, true));
        assert_eq!(state(LO, "tso"), (true, false));
        assert_eq!(state(LO, "gso"), (true, false));
    }

    fn lo_iface() -> Interface {
        Interface {
            role: Role::Host,
            namespace: "n".into(),
            name: "lo".into(),
            kind: "loopback",
            sides: vec![Side::Initiator, Side::Target],
            mtu_extra: 0,
            rate_limited: false,
            address: None,
        }
    }

    fn lo_defaults() -> HashMap<&'static str, FeatureDefault> {
        let lines = netcmd::parse_ethtool_features(LO);
        Offload::ALL
            .into_iter()
            .filter_map(|f| knob_state(&lines, f).map(|s| (f.name(), s)))
            .collect()
    }

    fn ledger_for(knobs: &LinkKnobs) -> Ledger {
        Ledger(
            offload_knobs(knobs)
                .into_iter()
                .map(|(k, on)| (k, on, Vec::new()))
                .collect(),
        )
    }

    #[test]
    fn a_fixed_feature_is_skipped_with_the_reason() {
        let mut knobs = LinkKnobs::default();
        knobs.target.rx = Some(false);
        knobs.initiator.tso = Some(false);
        let mut ledger = ledger_for(&knobs);
        let (command, wanted) = plan_device(&lo_iface(), &knobs, &lo_defaults(), &mut ledger);
        // Every changeable feature is sent (set or default); fixed ones never.
        assert_eq!(command, [("tso", false), ("gso", true), ("gro", true)]);
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].knobs, ["initiator.tso"]);
        let rx = &ledger.0.iter().find(|e| e.0 == "target.rx").unwrap().2;
        assert_eq!(
            rx,
            &["lo (host): fixed on by the driver (rx-checksumming: on [fixed])"]
        );
    }

    #[test]
    fn a_fixed_feature_asked_for_its_own_value_is_fine() {
        let mut knobs = LinkKnobs::default();
        knobs.initiator.sg = Some(true);
        let mut ledger = ledger_for(&knobs);
        let (_, wanted) = plan_device(&lo_iface(), &knobs, &lo_defaults(), &mut ledger);
        assert!(wanted.is_empty());
        assert!(ledger.0[0].2.is_empty());
    }

    #[test]
    fn the_two_sides_of_lo_may_not_disagree() {
        let mut knobs = LinkKnobs::default();
        knobs.initiator.gro = Some(false);
        knobs.target.gro = Some(true);
        let mut ledger = ledger_for(&knobs);
        let (command, wanted) = plan_device(&lo_iface(), &knobs, &lo_defaults(), &mut ledger);
        assert!(wanted.is_empty());
        assert!(command.contains(&("gro", true)));
        for e in &ledger.0 {
            assert!(e.2[0].contains("both sides are this one device"), "{:?}", e);
        }
    }

    #[test]
    fn offload_knobs_are_named_side_dot_feature_in_order() {
        let mut knobs = LinkKnobs::default();
        knobs.target.gro = Some(true);
        knobs.initiator.tx = Some(false);
        knobs.initiator.tso = Some(false);
        assert_eq!(
            offload_knobs(&knobs),
            [
                ("initiator.tso".to_string(), false),
                ("initiator.tx".to_string(), false),
                ("target.gro".to_string(), true)
            ]
        );
    }
}
