//! Everything one `isoe target` process serves ([`Server`]): its targets,
//! its sessions, and the login policy that admits initiators.
//!
//! The policy, in the order it is applied to a login (RFC 7143 §11.13.5):
//! an unknown TargetName is 0x0203 (target not found); an InitiatorName not
//! in the target's `allowed_initiators` is 0x0202 (authorization failure);
//! then the target's (or, for discovery, `[discovery.chap]`'s) CHAP is
//! required, and a login without it or with a wrong response is 0x0201
//! (authentication failure). CHAP challenges come from the operating
//! system's CSPRNG (the connection draws them); the server remembers the
//! last [`CHALLENGE_LOG_CAPACITY`] it issued, so that none goes out twice
//! (RFC 1994 §2.3, replay) and none is answered when an initiator sends it
//! back on any connection (RFC 7143 §9.2.1, reflection).

use crate::admission::{FailureLog, Gatekeeper};
use crate::budget::{Budget, SharedBudget};
use crate::config::{ChapConfig, Config};
use crate::policy::{auth_policy, login_config};
use crate::provision::{build_target, SetupError, WrapStore};
use crate::session::Session;
use crate::target::Target;
use isoe_scsi::LogicalUnit;
use isoe_sync::{MutexExt, RwLockExt};
use isoe_wire::chap::{ChallengeLog, CHALLENGE_LOG_CAPACITY};
use isoe_wire::login::{Admission, LoginFailure, LoginPolicy};
use isoe_wire::negotiate::SessionType;
use isoe_wire::pdu::login_status;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Key under which a session is known: ISID reuse by the same initiator on
/// the same target through the same portal group reinstates the session
/// (RFC 7143 §6.3.5; the session identifier is the ISID with the target
/// portal group tag). Through another portal group it is another session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SessionKey {
    initiator_name: String,
    isid: [u8; 6],
    target_name: Option<String>,
    portal_group_tag: u16,
}

/// Everything one `isoe target` process serves.
#[derive(Debug)]
pub struct Server {
    /// The configuration it was started with. Its targets, portals and
    /// discovery CHAP are the start's; what runs now is in [`Server::targets`],
    /// [`Server::portals`] and [`Server::discovery_chap`], which the control
    /// plane changes. The rest (`datapath`, `limits`, `state_dir`) holds
    /// until a restart.
    pub config: Config,
    targets: RwLock<Vec<Arc<Target>>>,
    /// The portals SendTargets lists (bound addresses), with their
    /// portal group's tag.
    portals: RwLock<Vec<(std::net::SocketAddr, u16)>>,
    discovery_chap: RwLock<Option<Arc<ChapConfig>>>,
    sessions: Mutex<Vec<(SessionKey, Arc<Session>)>>,
    /// Sessions ended (closed, reinstated) while store work of theirs was
    /// out: one that would reinstate them waits until it has returned.
    draining: Mutex<Vec<(SessionKey, Arc<Session>)>>,
    /// How units end tasks under way ([`Server::enable_task_sets`]).
    pub(crate) task_sets: std::sync::OnceLock<Arc<dyn isoe_scsi::TaskSets>>,
    /// CHAP challenges issued lately; logins only, never the command path.
    challenges: Mutex<ChallengeLog>,
    next_serial: AtomicU64,
    shutdown: AtomicBool,
    /// Write data solicited and not yet stored, all connections together.
    pub write_budget: Budget,
    /// Connections, logins and sessions against `[limits]`.
    pub gate: Gatekeeper,
    /// Response bytes built and not yet sent, all connections together
    /// (bounded by `[limits] response_buffer`).
    pub output_bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// The Data-In of reads admitted and not yet sent, all connections
    /// together: each connection holds its part before it takes a read
    /// (bounded by `[limits] response_buffer`, half per address).
    pub data_in_budget: Arc<SharedBudget>,
    /// Receive buffer bytes beyond each connection's first, all
    /// connections together (bounded by `[limits] receive_buffer`).
    pub receive_bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// Idle capacity of every connection's buffer pool (bounded by
    /// `buffer_pool::PROCESS_POOL_BYTES_MAX`).
    pub pooled_bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// Failed authentications per source, to slow down guessing.
    pub auth_failures: FailureLog,
    /// Why `[limits] connections` was lowered at start, if it was.
    pub limits_note: Option<String>,
    /// Logins by outcome, and what ended connections counted.
    pub stats: crate::metrics::ServerStats,
    /// The ALUA target port groups every target reports, one per portal group.
    port_groups: isoe_scsi::PortGroups,
}

/// Makes `lu` LUN `number` of `target`, in place of any unit of that number.
fn swap_in(target: &Target, number: u16, lu: &Arc<LogicalUnit>) {
    target.replace_luns(|now| {
        let mut luns: Vec<_> = now
            .entries()
            .iter()
            .filter(|(n, _)| *n != number)
            .cloned()
            .collect();
        luns.push((number, Arc::clone(lu)));
        luns
    });
}

impl Server {
    /// Opens every LUN's store and resolves its identity.
    pub fn new(config: Config) -> Result<Server, SetupError> {
        Server::with_stores_wrapped(config, &|_, _, store| store)
    }

    /// [`Server::new`], with each store passed through `wrap` once opened.
    pub fn with_stores_wrapped(config: Config, wrap: WrapStore<'_>) -> Result<Server, SetupError> {
        let mut targets = Vec::with_capacity(config.targets.len());
        for t in &config.targets {
            targets.push(Arc::new(build_target(&config, t, wrap)?));
        }
        let open_files = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let (gate, limits_note) = Gatekeeper::new(config.limits, open_files);
        let write_buffer = config.limits.write_buffer;
        let response_buffer = config.limits.response_buffer;
        let port_groups = isoe_scsi::PortGroups::new(config.port_groups());
        Ok(Server {
            targets: RwLock::new(targets),
            portals: RwLock::new(
                (0..config.portals.len())
                    .map(|i| (config.portals[i], config.portal_group_tag(i)))
                    .collect(),
            ),
            discovery_chap: RwLock::new(config.discovery.chap.clone().map(Arc::new)),
            config,
            sessions: Mutex::new(Vec::new()),
            draining: Mutex::new(Vec::new()),
            task_sets: std::sync::OnceLock::new(),
            challenges: Mutex::new(ChallengeLog::new(CHALLENGE_LOG_CAPACITY)),
            next_serial: AtomicU64::new(1),
            write_budget: Budget::new(write_buffer),
            gate,
            output_bytes: Arc::default(),
            data_in_budget: SharedBudget::new(response_buffer),
            receive_bytes: Arc::default(),
            pooled_bytes: Arc::default(),
            auth_failures: FailureLog::default(),
            limits_note,
            port_groups,
            shutdown: AtomicBool::new(false),
            stats: Default::default(),
        })
    }

    /// The target port groups (ALUA) of every target: each portal group is
    /// one, with the state the configuration gives it.
    pub fn port_groups(&self) -> &isoe_scsi::PortGroups {
        &self.port_groups
    }

    /// All targets now.
    pub fn targets(&self) -> Vec<Arc<Target>> {
        self.targets.read_unpoisoned().clone()
    }

    /// The target named `name`.
    pub fn target(&self, name: &str) -> Option<Arc<Target>> {
        self.targets
            .read_unpoisoned()
            .iter()
            .find(|t| t.name == name)
            .cloned()
    }

    /// Adds a target (the control plane checked that its name is new).
    pub fn add_target(&self, target: Arc<Target>) {
        self.targets.write_unpoisoned().push(target);
    }

    /// Removes the target named `name`: no new login reaches it; its
    /// sessions are closed (their connections go to `wake`) and its stores
    /// flushed. Returns it, or None when there is none.
    pub fn remove_target(&self, name: &str, wake: &mut Vec<u64>) -> Option<Arc<Target>> {
        let target = {
            let mut targets = self.targets.write_unpoisoned();
            let pos = targets.iter().position(|t| t.name == name)?;
            targets.remove(pos)
        };
        for session in self.sessions_of(&target) {
            session.close(u64::MAX, wake);
        }
        Some(target)
    }

    /// Adds `lu` as LUN `number` of `target` (replacing one of that
    /// number): the sessions logged in to the target hear of its unit
    /// attentions from now on, and every other unit of the target tells
    /// each of them REPORTED LUNS DATA HAS CHANGED. Done under the sessions'
    /// lock, so that a session logging in meanwhile is attached once.
    pub fn add_lun(&self, target: &Arc<Target>, number: u16, lu: Arc<LogicalUnit>) {
        if let Some(tasks) = self.task_sets.get() {
            lu.set_task_sets(Arc::clone(tasks));
        }
        let sessions = self.sessions.lock_unpoisoned();
        swap_in(target, number, &lu);
        for (_, s) in sessions.iter().filter(|(_, s)| s.is_on(target)) {
            lu.attach(&s.nexus);
        }
        for other in target.luns().units().filter(|u| !Arc::ptr_eq(u, &lu)) {
            other.report_luns_changed();
        }
    }

    /// Puts `lu` in the place of LUN `number` of `target`, which it
    /// replaces (its keys changed): the sessions logged in to the target
    /// attach to it and hear each of `conditions` (what changed) at their
    /// next command to it; the LUN inventory is as it was. Returns the
    /// unit replaced.
    pub fn replace_lun(
        &self,
        target: &Arc<Target>,
        number: u16,
        lu: Arc<LogicalUnit>,
        conditions: &[isoe_scsi::Sense],
    ) -> Option<Arc<LogicalUnit>> {
        let sessions = self.sessions.lock_unpoisoned();
        self.swap_lun(&sessions, target, number, lu, conditions)
    }

    /// Puts `new` wherever `old` is served (any target, any number) as
    /// [`Server::replace_lun`] does: how a shared unit whose gateway was
    /// fenced serves again. False when nothing serves `old` any more (a
    /// reload replaced or removed it meanwhile).
    pub fn replace_unit(
        &self,
        old: &LogicalUnit,
        new: &Arc<LogicalUnit>,
        conditions: &[isoe_scsi::Sense],
    ) -> bool {
        // Under the sessions' lock, as every change of a LUN table: a
        // reload cannot replace `old` between the look and the swap.
        let sessions = self.sessions.lock_unpoisoned();
        // Dropped once the lock is released: a store may take its time to
        // close.
        let mut replaced = Vec::new();
        for target in self.targets() {
            let numbers: Vec<u16> = target
                .luns()
                .entries()
                .iter()
                .filter(|(_, lu)| std::ptr::eq(Arc::as_ptr(lu), old))
                .map(|(n, _)| *n)
                .collect();
            for number in numbers {
                replaced.extend(self.swap_lun(
                    &sessions,
                    &target,
                    number,
                    Arc::clone(new),
                    conditions,
                ));
            }
        }
        drop(sessions);
        !replaced.is_empty()
    }

    /// [`Server::replace_lun`], the sessions' lock held.
    fn swap_lun(
        &self,
        sessions: &[(SessionKey, Arc<Session>)],
        target: &Arc<Target>,
        number: u16,
        lu: Arc<LogicalUnit>,
        conditions: &[isoe_scsi::Sense],
    ) -> Option<Arc<LogicalUnit>> {
        if let Some(tasks) = self.task_sets.get() {
            lu.set_task_sets(Arc::clone(tasks));
        }
        let replaced = target.luns().lun(number).cloned();
        for (_, s) in sessions.iter().filter(|(_, s)| s.is_on(target)) {
            lu.attach(&s.nexus);
        }
        for condition in conditions {
            lu.raise_unit_attention(*condition);
        }
        swap_in(target, number, &lu);
        if let Some(old) = &replaced {
            lu.take_over_finally(old);
            lu.take_unit_attentions_of(old);
        }
        replaced
    }

    /// Removes LUN `number` of `target` and returns it: commands already
    /// running finish; later ones get LOGICAL UNIT NOT SUPPORTED, and the
    /// other units tell every session REPORTED LUNS DATA HAS CHANGED.
    pub fn remove_lun(&self, target: &Arc<Target>, number: u16) -> Option<Arc<LogicalUnit>> {
        let sessions = self.sessions.lock_unpoisoned();
        let removed = target.luns().lun(number).cloned()?;
        target.replace_luns(|now| {
            now.entries()
                .iter()
                .filter(|(n, _)| *n != number)
                .cloned()
                .collect()
        });
        for (_, s) in sessions.iter().filter(|(_, s)| s.is_on(target)) {
            removed.detach(&s.nexus);
        }
        for other in target.luns().units() {
            other.report_luns_changed();
        }
        Some(removed)
    }

    /// Closes the session with `tsih`; its connections go to `wake`.
    /// Returns whether there was one.
    pub fn close_session(&self, tsih: u16, wake: &mut Vec<u64>) -> bool {
        let Some(session) = self.sessions().into_iter().find(|s| s.tsih == tsih) else {
            return false;
        };
        session.close(u64::MAX, wake);
        true
    }

    /// The portals SendTargets lists now.
    pub fn portals(&self) -> Vec<(std::net::SocketAddr, u16)> {
        self.portals.read_unpoisoned().clone()
    }

    /// Replaces the portals SendTargets lists.
    pub fn set_portals(&self, portals: Vec<(std::net::SocketAddr, u16)>) {
        *self.portals.write_unpoisoned() = portals;
    }

    /// `[discovery.chap]` now.
    pub fn discovery_chap(&self) -> Option<Arc<ChapConfig>> {
        self.discovery_chap.read_unpoisoned().clone()
    }

    /// Replaces `[discovery.chap]` for discovery logins from now on.
    pub fn set_discovery_chap(&self, chap: Option<ChapConfig>) {
        *self.discovery_chap.write_unpoisoned() = chap.map(Arc::new);
    }

    /// A process-unique number (connection serials, I_T nexus IDs).
    pub fn next_serial(&self) -> u64 {
        self.next_serial.fetch_add(1, Ordering::Relaxed)
    }

    /// A TSIH not in use, starting from `random` (RFC 7143 §11.12.8 wants
    /// it unique; unpredictable, it tells a peer nothing of other sessions).
    fn allocate_tsih(sessions: &[(SessionKey, Arc<Session>)], random: u16) -> u16 {
        let mut tsih = random;
        loop {
            if tsih != 0 && !sessions.iter().any(|(_, s)| s.tsih == tsih) {
                return tsih;
            }
            tsih = tsih.wrapping_add(1);
        }
    }

    /// Registers a new session, reinstating (closing) any older session with
    /// the same initiator name, ISID, target and portal group tag (its
    /// connections go to `wake`). `make` gets the new TSIH, drawn from
    /// `random`.
    pub fn create_session(
        &self,
        key: (&str, [u8; 6], Option<&str>, u16),
        random: u16,
        wake: &mut Vec<u64>,
        make: impl FnOnce(u16) -> Session,
    ) -> Result<Arc<Session>, SessionRefused> {
        let (initiator_name, isid, target_name, portal_group_tag) = key;
        let key = SessionKey {
            initiator_name: initiator_name.to_string(),
            isid,
            target_name: target_name.map(str::to_string),
            portal_group_tag,
        };
        let mut sessions = self.sessions.lock_unpoisoned();
        let mut tsih = random;
        if let Some(pos) = sessions.iter().position(|(k, _)| *k == key) {
            let (_, old) = sessions.swap_remove(pos);
            old.close(u64::MAX, wake);
            tracing::info!(
                initiator = %isoe_wire::name::escape_for_log(initiator_name),
                target = target_name.map(tracing::field::display),
                old_tsih = old.tsih,
                isid = %isid.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "session reinstated: the old session is closed"
            );
            if tsih == old.tsih {
                // A reinstated session gets a TSIH of its own.
                tsih = tsih.wrapping_add(1);
            }
            self.drain_later(key.clone(), old);
        }
        {
            // RFC 7143 §6.3.5: reinstatement ends the old session's tasks
            // first. A write of it still in the store could land after the
            // new session's writes to the same blocks: the login is refused
            // as "service unavailable" (the initiator tries again) until it
            // has returned.
            let mut draining = self.draining.lock_unpoisoned();
            draining.retain(|(_, s)| s.store_work() > 0);
            if let Some((_, old)) = draining.iter().find(|(k, _)| *k == key) {
                return Err(SessionRefused::Draining {
                    old_tsih: old.tsih,
                    work: old.store_work(),
                });
            }
        }
        let limit = self.gate.limits().sessions;
        if sessions.len() >= limit {
            self.gate.refused.sessions.fetch_add(1, Ordering::Relaxed);
            return Err(SessionRefused::Limit(limit));
        }
        let tsih = Self::allocate_tsih(&sessions, tsih);
        let session = Arc::new(make(tsih));
        sessions.push((key, session.clone()));
        Ok(session)
    }

    /// The live session a connection asks to join (RFC 7143 §6.3.1, TSIH ≠ 0).
    pub fn find_session(
        &self,
        initiator_name: &str,
        isid: [u8; 6],
        tsih: u16,
    ) -> Option<Arc<Session>> {
        let sessions = self.sessions.lock_unpoisoned();
        sessions
            .iter()
            .find(|(k, s)| {
                s.tsih == tsih
                    && k.isid == isid
                    && k.initiator_name == initiator_name
                    && !s.is_closed()
            })
            .map(|(_, s)| s.clone())
    }

    /// Forgets a session once its last connection is gone.
    pub fn remove_session(&self, session: &Arc<Session>) {
        let mut sessions = self.sessions.lock_unpoisoned();
        if let Some(pos) = sessions.iter().position(|(_, s)| Arc::ptr_eq(s, session)) {
            let (key, old) = sessions.swap_remove(pos);
            drop(sessions);
            self.drain_later(key, old);
        }
    }

    /// Keeps an ended session whose store work is still out, for a login
    /// that would reinstate it to wait on ([`Server::create_session`]).
    fn drain_later(&self, key: SessionKey, session: Arc<Session>) {
        if session.store_work() == 0 {
            return;
        }
        let mut draining = self.draining.lock_unpoisoned();
        draining.retain(|(_, s)| s.store_work() > 0);
        draining.push((key, session));
    }

    /// Whether the initiator closed every connection of the session that
    /// is `nexus`, though the connections' threads have not yet ended it
    /// (see [`isoe_scsi::UnitDirectory::nexus_closed`]).
    pub fn nexus_closed(&self, nexus: &isoe_scsi::Nexus) -> bool {
        let session = {
            let sessions = self.sessions.lock_unpoisoned();
            sessions
                .iter()
                .find(|(_, s)| s.nexus == *nexus)
                .map(|(_, s)| Arc::clone(s))
        };
        session.is_some_and(|s| s.is_closed() || s.closed_by_peer())
    }

    /// Every session logged in.
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions
            .lock_unpoisoned()
            .iter()
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// The sessions logged in to `target`.
    pub fn sessions_of(&self, target: &Arc<Target>) -> Vec<Arc<Session>> {
        self.sessions
            .lock_unpoisoned()
            .iter()
            .filter(|(_, s)| s.target.as_ref().is_some_and(|t| Arc::ptr_eq(t, target)))
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// Number of live sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.lock_unpoisoned().len()
    }

    /// Asks every connection to finish: sessions are closed (each
    /// connection sees it at its next wake-up; the driver wakes them all).
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        let sessions = self.sessions.lock_unpoisoned();
        let mut ignored = Vec::new();
        for (_, s) in sessions.iter() {
            s.close(u64::MAX, &mut ignored);
        }
    }

    /// True once shutdown began.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Makes every store durable (shutdown).
    pub fn flush_stores(&self) -> Result<(), isoe_store::StoreError> {
        for target in self.targets() {
            for lu in target.luns().units() {
                lu.store().flush()?;
            }
        }
        Ok(())
    }
}

/// Why a login could not make its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionRefused {
    /// It would make more sessions than `[limits] sessions` allows.
    #[error("{0} sessions already (limits.sessions)")]
    Limit(usize),
    /// It reinstates a session whose store work is still out.
    #[error(
        "the session it reinstates (TSIH {old_tsih}) has {work} store operation(s) still \
         out; try again once they return"
    )]
    Draining { old_tsih: u16, work: usize },
}

impl LoginPolicy for Server {
    fn admit(
        &self,
        session_type: SessionType,
        initiator_name: &str,
        target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure> {
        let refuse = |detail: u8, reason: String| LoginFailure {
            status_class: login_status::INITIATOR_ERROR,
            status_detail: detail,
            reason,
        };
        match session_type {
            SessionType::Discovery => Ok(Admission {
                target_alias: None,
                auth: auth_policy(self.discovery_chap().as_deref()),
                overrides: None,
            }),
            SessionType::Normal => {
                let Some(name) = target_name else {
                    return Err(refuse(
                        login_status::MISSING_PARAMETER,
                        "TargetName is required on a normal session".into(),
                    ));
                };
                let Some(target) = self.target(name) else {
                    return Err(refuse(
                        login_status::NOT_FOUND,
                        format!("no target named {name}"),
                    ));
                };
                let policy = target.policy();
                if !policy.admits(initiator_name) {
                    return Err(refuse(
                        login_status::AUTHORIZATION_FAILURE,
                        format!("{initiator_name} is not in allowed_initiators of {name}"),
                    ));
                }
                Ok(Admission {
                    target_alias: policy.alias.clone(),
                    auth: auth_policy(policy.chap.as_ref()),
                    // The connection puts its portal group's tag in
                    // (connection/login.rs, ThroughPortalGroup).
                    overrides: Some(login_config(&policy.params, 1)),
                })
            }
        }
    }

    fn record_challenge(&self, challenge: &[u8]) -> bool {
        let mut log = self.challenges.lock_unpoisoned();
        log.insert(challenge)
    }

    fn is_own_challenge(&self, challenge: &[u8]) -> bool {
        let log = self.challenges.lock_unpoisoned();
        log.contains(challenge)
    }
}
