//! Puts a new configuration into force on a running target: the
//! difference between what runs and what the new file says, applied to
//! targets, LUNs, access rules and portals while sessions run.
//!
//! Everything that can fail (opening a store, binding a portal) is done
//! first; only then is anything changed, so that a change that cannot be
//! made leaves the target as it was. Sessions not concerned by a change
//! never notice it: a LUN added or removed tells the target's sessions
//! REPORTED LUNS DATA HAS CHANGED on its other units; an initiator taken
//! off `allowed_initiators` loses its sessions; a removed target's
//! sessions end; CHAP and iSCSI parameters apply to logins from then on.

use super::lun_change::{self, PlanError, Planned, WouldLose};
use crate::config::{Config, LunSpec, TargetConfig};
use crate::driver::{Handle, StartError};
use crate::policy::policy_of;
use crate::provision::{build_lun, build_target, SetupError};
use crate::registry::Server;
use crate::target::Target;
use isoe_scsi::LogicalUnit;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// What applying a configuration did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// One line per change put into force.
    pub changes: Vec<String>,
    /// Keys that changed in the file but hold only from the next start.
    pub at_restart: Vec<String>,
}

/// Why a configuration could not be put into force; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A LUN or target could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A portal could not be bound.
    #[error(transparent)]
    Portal(#[from] StartError),
    /// A LUN's change would discard data, and was not forced.
    #[error(transparent)]
    WouldLose(#[from] WouldLose),
}

impl From<PlanError> for ApplyError {
    fn from(e: PlanError) -> ApplyError {
        match e {
            PlanError::WouldLose(e) => ApplyError::WouldLose(e),
            PlanError::Setup(e) => ApplyError::Setup(e),
        }
    }
}

/// A portal's listening socket and the address it is bound to.
type Bound = (TcpListener, SocketAddr);

/// What was prepared for one target that stays.
struct TargetPlan {
    target: Arc<Target>,
    old: TargetConfig,
    new: TargetConfig,
    /// LUNs to add, already opened.
    luns: Vec<(LunSpec, Arc<LogicalUnit>)>,
    /// LUNs whose keys changed, their new units ready.
    changed: Vec<Planned>,
}

/// Whether two LUN specifications differ only in being offline.
fn same_but_offline(a: &LunSpec, b: &LunSpec) -> bool {
    LunSpec {
        offline: b.offline,
        ..a.clone()
    } == *b
}

fn describe_lun(spec: &LunSpec) -> String {
    let store = spec.store.describe();
    let read_only = if spec.read_only { ", read-only" } else { "" };
    format!("{store}{read_only}")
}

/// What a change asks of [`apply`] besides the new configuration.
#[derive(Clone, Copy)]
pub struct Asked<'a> {
    /// A LUN's change may discard data (see [`lun_change`]).
    pub force: bool,
    /// The new configuration as written, for echoing the sizes given.
    pub doc: &'a toml_edit::DocumentMut,
}

/// Applies `new` over `old`, which is what `server` runs now, as `asked`.
pub fn apply(
    server: &Arc<Server>,
    handle: &Handle,
    old: &Config,
    new: &Config,
    asked: Asked<'_>,
) -> Result<Applied, ApplyError> {
    // Prepare: everything that may fail, nothing visible yet.
    let mut added_targets = Vec::new();
    let mut kept = Vec::new();
    for t in &new.targets {
        match old.targets.iter().find(|o| o.name == t.name) {
            None => added_targets.push((t.clone(), Arc::new(build_target(new, t, &|_, _, s| s)?))),
            Some(o) if o == t => {}
            Some(o) => kept.extend(plan_target(server, new, o, t, asked)?),
        }
    }
    let portals = plan_portals(old, new)?;

    // Commit: nothing below fails.
    let mut applied = Applied::default();
    let mut wake = Vec::new();
    for o in old
        .targets
        .iter()
        .filter(|o| !new.targets.iter().any(|t| t.name == o.name))
    {
        if let Some(target) = server.remove_target(&o.name, &mut wake) {
            flush_units(target.luns().units());
            applied.changes.push(format!("target {} removed", o.name));
        }
    }
    for (config, target) in added_targets {
        server.add_target(target);
        applied.changes.push(format!(
            "target {} added with {} LUN(s)",
            config.name,
            config.luns.len()
        ));
    }
    for plan in kept {
        apply_target(server, plan, &mut wake, &mut applied.changes);
    }
    if old.discovery.chap != new.discovery.chap {
        server.set_discovery_chap(new.discovery.chap.clone());
        applied.changes.push(match &new.discovery.chap {
            Some(c) => format!("discovery CHAP set (user {:?})", c.user),
            None => "discovery CHAP removed".into(),
        });
    }
    for (addr, _) in &portals.removed {
        if handle.remove(*addr) {
            applied.changes.push(format!("portal {addr} removed"));
        }
    }
    for (configured, tag, bound) in portals.listeners {
        let served = match bound {
            Some((listener, local)) => Ok((listener, local)),
            None => crate::driver::bind(configured, new.portal_place(configured)),
        }
        .and_then(|(listener, local)| {
            handle
                .serve(configured, listener, local, tag)
                .map(|()| local)
        });
        match served {
            Ok(local) => applied.changes.push(format!(
                "portal {configured} added to portal group {tag} (listening on {local})"
            )),
            Err(e) => applied
                .changes
                .push(format!("portal {configured} not served: {e}")),
        }
    }
    handle.wake(&wake);
    let restart_only = [
        ("[[portal_group]] and the portals", portals.groups_changed),
        ("state_dir", old.state_dir != new.state_dir),
        ("[datapath]", old.datapath != new.datapath),
        ("[limits]", old.limits != new.limits),
        ("[control]", old.control != new.control),
        ("[metrics]", old.metrics != new.metrics),
        ("[log]", old.log != new.log),
    ];
    applied.at_restart = restart_only
        .iter()
        .filter(|(_, changed)| *changed)
        .map(|(key, _)| key.to_string())
        .collect();
    Ok(applied)
}

/// What changes in target `t`, which runs now as `o`: the LUNs to add,
/// opened, and those whose keys changed, planned; nothing when the target
/// is gone from the server meanwhile.
fn plan_target(
    server: &Server,
    new: &Config,
    o: &TargetConfig,
    t: &TargetConfig,
    asked: Asked<'_>,
) -> Result<Option<TargetPlan>, ApplyError> {
    let Some(target) = server.target(&t.name) else {
        return Ok(None);
    };
    let mut luns = Vec::new();
    let mut changed = Vec::new();
    for spec in &t.luns {
        let before = o.luns.iter().find(|l| l.number == spec.number);
        let running = target.luns().lun(spec.number).cloned();
        match (before, running) {
            (Some(b), _) if same_but_offline(b, spec) => {}
            (Some(b), Some(lu)) => {
                let said =
                    |key: &str| super::edit::lun_value_text(asked.doc, &t.name, spec.number, key);
                let given = said("size").or_else(|| said("memory"));
                let change = lun_change::Change {
                    before: b,
                    old: &lu,
                    spec,
                    given: given.as_deref(),
                    force: asked.force,
                };
                changed.push(lun_change::plan(new, &t.name, change)?);
            }
            _ => luns.push((spec.clone(), build_lun(new, &t.name, spec, &|_, _, s| s)?)),
        }
    }
    Ok(Some(TargetPlan {
        target,
        old: o.clone(),
        new: t.clone(),
        luns,
        changed,
    }))
}

/// The portals to stop serving and those to serve, bound already where
/// they can be.
struct PortalPlan {
    /// The portal groups themselves changed: portals wait for a restart.
    groups_changed: bool,
    removed: Vec<(SocketAddr, u16)>,
    listeners: Vec<(SocketAddr, u16, Option<Bound>)>,
}

/// How the portals go from `old` to `new`; binds every new portal that
/// does not move from another group.
fn plan_portals(old: &Config, new: &Config) -> Result<PortalPlan, ApplyError> {
    // Portals come and go live within the portal groups the target runs
    // with; a change to the groups themselves (tags, ALUA states) is for
    // the next start, portals and all, since initiators learn the groups
    // from REPORT TARGET PORT GROUPS.
    let groups_changed = group_definitions(old) != group_definitions(new);
    let (old_portals, new_portals) = if groups_changed {
        (Vec::new(), Vec::new())
    } else {
        (tagged_portals(old), tagged_portals(new))
    };
    let removed: Vec<_> = old_portals
        .iter()
        .filter(|p| !new_portals.contains(p))
        .copied()
        .collect();
    let mut listeners: Vec<(SocketAddr, u16, Option<Bound>)> = Vec::new();
    for &(addr, tag) in new_portals.iter().filter(|p| !old_portals.contains(p)) {
        // A portal that moves to another group is bound once its old
        // listener has gone (below); any other is bound now.
        let bound = if removed.iter().any(|(a, _)| *a == addr) {
            None
        } else {
            Some(crate::driver::bind(addr, new.portal_place(addr))?)
        };
        listeners.push((addr, tag, bound));
    }

    Ok(PortalPlan {
        groups_changed,
        removed,
        listeners,
    })
}

/// Each portal as configured, with its portal group's tag.
fn tagged_portals(config: &Config) -> Vec<(SocketAddr, u16)> {
    (0..config.portals.len())
        .map(|i| (config.portals[i], config.portal_group_tag(i)))
        .collect()
}

/// What initiators are told of the portal groups: tags, states, PREF.
fn group_definitions(config: &Config) -> Vec<(u16, isoe_scsi::AccessState, bool)> {
    let mut groups: Vec<_> = config
        .portal_groups
        .iter()
        .map(|g| (g.tag, g.alua_state, g.preferred))
        .collect();
    groups.sort_by_key(|g| g.0);
    groups
}

fn flush_units<'a>(units: impl Iterator<Item = &'a Arc<LogicalUnit>>) {
    for lu in units {
        // A flush that fails was logged by the store's error path; the
        // unit is gone from the target either way.
        let _ = lu.store().flush();
    }
}

fn apply_target(server: &Server, plan: TargetPlan, wake: &mut Vec<u64>, changes: &mut Vec<String>) {
    let TargetPlan {
        target,
        old,
        new,
        luns,
        changed,
    } = plan;
    let name = &new.name;
    let (old_policy, new_policy) = (policy_of(&old), policy_of(&new));
    if old_policy != new_policy {
        target.set_policy(new_policy.clone());
        if old_policy.allowed_initiators != new_policy.allowed_initiators {
            changes.push(format!(
                "allowed_initiators of {name}: {}",
                if new_policy.allowed_initiators.is_empty() {
                    "every initiator".to_string()
                } else {
                    new_policy.allowed_initiators.join(", ")
                }
            ));
            for session in server.sessions_of(&target) {
                if !new_policy.admits(&session.initiator_name) {
                    session.close(u64::MAX, wake);
                    changes.push(format!(
                        "session TSIH {} of {} to {name} closed: no longer allowed",
                        session.tsih,
                        isoe_wire::name::escape_for_log(&session.initiator_name)
                    ));
                }
            }
        }
        if old_policy.chap != new_policy.chap {
            changes.push(match &new_policy.chap {
                Some(c) => format!(
                    "CHAP of {name} set (user {:?}); sessions logged in stay",
                    c.user
                ),
                None => format!("CHAP of {name} removed"),
            });
        }
        if old_policy.alias != new_policy.alias || old_policy.params != new_policy.params {
            changes.push(format!(
                "alias or parameters of {name} changed; they apply to new logins"
            ));
        }
    }
    for o in old
        .luns
        .iter()
        .filter(|o| !new.luns.iter().any(|l| l.number == o.number))
    {
        if let Some(lu) = server.remove_lun(&target, o.number) {
            flush_units(std::iter::once(&lu));
            changes.push(format!("LUN {} of {name} removed", o.number));
        }
    }
    for (spec, lu) in luns {
        server.add_lun(&target, spec.number, lu);
        changes.push(format!(
            "LUN {} of {name} added ({})",
            spec.number,
            describe_lun(&spec)
        ));
    }
    for planned in changed {
        replace_lun(server, &target, planned, changes);
    }
    for spec in &new.luns {
        let Some(before) = old.luns.iter().find(|l| l.number == spec.number) else {
            continue;
        };
        if before.offline != spec.offline && same_but_offline(before, spec) {
            if let Some(lu) = target.luns().lun(spec.number) {
                lu.set_offline(spec.offline);
                changes.push(format!(
                    "LUN {} of {name} {}",
                    spec.number,
                    if spec.offline { "offline" } else { "online" }
                ));
            }
        }
    }
}

/// Puts a changed LUN's new unit in place of the old one.
fn replace_lun(server: &Server, target: &Arc<Target>, planned: Planned, changes: &mut Vec<String>) {
    let Planned {
        spec,
        lu,
        conditions,
        line,
        lost,
        cut,
    } = planned;
    let replaced = server.replace_lun(target, spec.number, Arc::clone(&lu), &conditions);
    if let Some(old_lu) = replaced {
        flush_units(std::iter::once(&old_lu));
    }
    if let Some(lost) = &lost {
        tracing::warn!(target: "isoe_target::config", "forced change: {lost}");
    }
    if let Some((path, size_bytes)) = cut {
        // The new unit serves only what stays; the tail goes now. Commands
        // of the old unit still running may write there: that data was
        // given up when the shrink was forced.
        let cut = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(size_bytes));
        if let Err(e) = cut {
            changes.push(format!(
                "{} not cut to {size_bytes} bytes ({e}); the LUN serves only those",
                path.display()
            ));
        }
    }
    changes.push(line);
}
