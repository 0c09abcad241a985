//! One consistent reading of every counter: what `isoe admin stats` prints
//! and the Prometheus listener serves.

use super::{is_retired, ConnTotals, LunTotals, MediaTotals, Name, Totals, LOGIN_OUTCOMES};
use crate::registry::Server;
use isoe_sync::MutexExt;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// One connection's counts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConnectionSnapshot {
    /// Its session's TSIH.
    pub tsih: u16,
    /// Its CID.
    pub cid: u16,
    /// The initiator's address.
    pub address: String,
    /// What it counted, all LUNs together.
    pub totals: LunTotals,
    /// R2Ts, task management, digest errors.
    pub connection: ConnTotals,
}

/// One session's counts: its connections now and those that ended.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SessionSnapshot {
    /// TSIH.
    pub tsih: u16,
    /// The initiator's name.
    pub initiator: String,
    /// The target's name.
    pub target: String,
    /// All LUNs together.
    pub totals: LunTotals,
    /// Its connections now.
    pub connections: Vec<ConnectionSnapshot>,
}

/// A resource with a bound (`[limits]`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Resource {
    /// The `[limits]` key.
    pub name: Name,
    /// In use now.
    pub in_use: u64,
    /// The bound.
    pub limit: u64,
}

/// Every counter of the target at one moment.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Per target, per LUN: every connection that ever used it.
    pub luns: BTreeMap<String, BTreeMap<u16, LunTotals>>,
    /// Per target, per LUN it has now: what its store counts of its own.
    /// Absent from the answer of a target older than the field.
    #[serde(default)]
    pub media: BTreeMap<String, BTreeMap<u16, MediaTotals>>,
    /// Per target: R2Ts, task management, digest errors.
    pub targets: BTreeMap<String, ConnTotals>,
    /// The sessions logged in now.
    pub sessions: Vec<SessionSnapshot>,
    /// Logins by outcome.
    pub logins: BTreeMap<Name, u64>,
    /// Connections refused before login, by the limit that refused them.
    pub connection_refusals: BTreeMap<Name, u64>,
    /// Connections closed while logging in (silent, or stalled on their
    /// peer) to make room for a new one, by the limit that bound.
    pub connection_evictions: BTreeMap<Name, u64>,
    /// Resources against their bounds.
    pub resources: Vec<Resource>,
}

/// Reads every counter of `server`.
pub fn snapshot(server: &Server) -> Snapshot {
    // Held throughout: a connection that ends meanwhile is folded into
    // the totals either before (and skipped below) or after (and read
    // below), never both or neither.
    let retired = server.stats.lock_retired();
    let mut per_target: BTreeMap<String, Totals> = retired.clone();
    for t in server.targets() {
        let totals = per_target.entry(t.name.clone()).or_default();
        for n in t.luns().numbers() {
            totals.luns.entry(*n).or_default();
        }
    }
    let mut sessions = Vec::new();
    for session in server.sessions() {
        let Some(target) = &session.target else {
            continue;
        };
        let mut session_totals = session.retired.lock_unpoisoned().clone();
        let mut connections = Vec::new();
        for (cid, info) in session.member_stats() {
            if is_retired(&info.stats) {
                continue;
            }
            let totals = Totals::of(&info.stats);
            connections.push(ConnectionSnapshot {
                tsih: session.tsih,
                cid,
                address: info.peer.to_string(),
                totals: totals.all_luns(),
                connection: totals.connection.clone(),
            });
            session_totals.merge(&totals);
            per_target
                .entry(target.name.clone())
                .or_default()
                .merge(&totals);
        }
        sessions.push(SessionSnapshot {
            tsih: session.tsih,
            initiator: session.initiator_name.clone(),
            target: target.name.clone(),
            totals: session_totals.all_luns(),
            connections,
        });
    }
    drop(retired);
    let logins = LOGIN_OUTCOMES
        .iter()
        .zip(&server.stats.logins)
        .map(|(name, c)| (Name::Borrowed(*name), c.load(Ordering::Relaxed)))
        .collect();
    let refused = &server.gate.refused;
    let connection_refusals = [
        ("connections", &refused.connections),
        ("connections_per_initiator", &refused.per_initiator),
        ("logins", &refused.logins),
        ("sessions", &refused.sessions),
    ]
    .into_iter()
    .map(|(name, c)| (Name::Borrowed(name), c.load(Ordering::Relaxed)))
    .collect();
    let evicted = &server.gate.evicted;
    let connection_evictions = [
        ("connections", &evicted.connections),
        ("connections_per_initiator", &evicted.per_initiator),
        ("logins", &evicted.logins),
    ]
    .into_iter()
    .map(|(name, c)| (Name::Borrowed(name), c.load(Ordering::Relaxed)))
    .collect();
    let resources = resources(server);
    Snapshot {
        luns: per_target
            .iter()
            .map(|(t, totals)| (t.clone(), totals.luns.clone()))
            .collect(),
        media: super::media::media(server),
        targets: per_target
            .into_iter()
            .map(|(t, totals)| (t, totals.connection))
            .collect(),
        sessions,
        logins,
        connection_refusals,
        connection_evictions,
        resources,
    }
}

/// What each `[limits]` bound counts now, beside the bound.
fn resources(server: &Server) -> Vec<Resource> {
    let limits = server.gate.limits();
    vec![
        Resource {
            name: Name::Borrowed("connections"),
            in_use: server.gate.connections() as u64,
            limit: limits.connections as u64,
        },
        Resource {
            name: Name::Borrowed("logins"),
            in_use: server.gate.logins() as u64,
            limit: limits.logins as u64,
        },
        Resource {
            name: Name::Borrowed("sessions"),
            in_use: server.session_count() as u64,
            limit: limits.sessions as u64,
        },
        Resource {
            name: Name::Borrowed("write_buffer"),
            in_use: server.write_budget.held() as u64,
            limit: server.write_budget.limit() as u64,
        },
        Resource {
            name: Name::Borrowed("response_buffer"),
            in_use: server.output_bytes.load(Ordering::Relaxed) as u64,
            limit: limits.response_buffer as u64,
        },
        Resource {
            name: Name::Borrowed("receive_buffer"),
            in_use: server.receive_bytes.load(Ordering::Relaxed) as u64,
            limit: limits.receive_buffer as u64,
        },
    ]
}
