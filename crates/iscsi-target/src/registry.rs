//! The running target: its targets and LUNs, its sessions, and the login
//! policy that admits initiators.
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
use crate::budget::Budget;
use crate::config::{ChapConfig, Config, DigestChoice, LunSpec, Params, StoreSpec, TargetConfig};
use crate::identity;
use crate::session::Session;
use arc_swap::ArcSwap;
use isoe_scsi::{LogicalUnit, LunConfig};
use isoe_store::{BlockStore, FileStore, MemoryStore, Store};
use isoe_wire::chap::{ChallengeLog, CHALLENGE_LOG_CAPACITY};
use isoe_wire::login::{Admission, AuthPolicy, LoginFailure, LoginPolicy, TargetLoginConfig};
use isoe_wire::negotiate::{Digest, SessionType};
use isoe_wire::pdu::login_status;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use thiserror::Error;

/// Why the target could not be set up from its configuration.
#[derive(Debug, Error)]
pub enum SetupError {
    /// A LUN's store could not be opened or created.
    #[error("target {target}, LUN {lun}: {source}")]
    Store {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What the store said.
        source: isoe_store::StoreError,
    },
    /// A LUN's settings are not valid for the SCSI layer.
    #[error("target {target}, LUN {lun}: {source}")]
    Lun {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What is wrong.
        source: isoe_scsi::ConfigError,
    },
    /// A LUN's store holds less than one logical block.
    #[error(
        "target {target}, LUN {lun}: the store holds {size_bytes} bytes, \
         less than one block of {block_size}"
    )]
    NoBlocks {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// The store's size.
        size_bytes: u64,
        /// The LUN's logical block size.
        block_size: u32,
    },
    /// A file LUN's `size` is smaller than its file: a LUN never shrinks
    /// at start, where nothing could ask whether the tail may go.
    #[error(
        "target {target}, LUN {lun}: size {} is smaller than its file {}, {}; a file LUN \
         never shrinks at start: give the file's size (or none), and shrink it on the running \
         target with `isoe admin reload --force`",
        isoe_size::describe_bytes(*size_bytes),
        path.display(),
        isoe_size::describe_bytes(*file_bytes)
    )]
    FileLarger {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// The file.
        path: std::path::PathBuf,
        /// The configured size.
        size_bytes: u64,
        /// The file's size.
        file_bytes: u64,
    },
    /// A LUN's persisted identity could not be read or written, or its
    /// backing file vanished after it was provisioned.
    #[error("target {target}, LUN {lun}: {source}")]
    Identity {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What went wrong.
        source: identity::IdentityError,
    },
}

/// Who may log into a target and how its sessions are set up: what the
/// control plane and a reload change while sessions run. Read at login and
/// discovery only, never on the command path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// TargetAlias, if any.
    pub alias: Option<String>,
    /// Initiators allowed to see and log into it (empty: all).
    pub allowed_initiators: Vec<String>,
    /// CHAP required of logins to it, if any.
    pub chap: Option<ChapConfig>,
    /// iSCSI parameters for sessions to it.
    pub params: Params,
}

impl Policy {
    /// True when `initiator` may see and use the target.
    pub fn admits(&self, initiator: &str) -> bool {
        self.allowed_initiators.is_empty() || self.allowed_initiators.iter().any(|a| a == initiator)
    }
}

/// A target's logical units at one moment, by ascending LUN. A command
/// borrows the table it started with (see [`Target::luns`]); a LUN added
/// or removed meanwhile is in the next table.
#[derive(Debug, Default)]
pub struct LunTable {
    luns: Vec<(u16, Arc<LogicalUnit>)>,
    numbers: Vec<u16>,
}

impl LunTable {
    fn new(mut luns: Vec<(u16, Arc<LogicalUnit>)>) -> LunTable {
        luns.sort_by_key(|(n, _)| *n);
        let numbers = luns.iter().map(|(n, _)| *n).collect();
        LunTable { luns, numbers }
    }

    /// Every logical unit, by ascending LUN.
    pub fn units(&self) -> impl Iterator<Item = &Arc<LogicalUnit>> {
        self.luns.iter().map(|(_, lu)| lu)
    }

    /// The logical unit with number `number`.
    pub fn lun(&self, number: u16) -> Option<&Arc<LogicalUnit>> {
        self.luns
            .binary_search_by_key(&number, |(n, _)| *n)
            .ok()
            .map(|i| &self.luns[i].1)
    }

    /// All LUN numbers, ascending (REPORT LUNS).
    pub fn numbers(&self) -> &[u16] {
        &self.numbers
    }

    /// The unit whose NAA designator is `naa` (EXTENDED COPY's targets).
    pub fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        self.units().find(|lu| lu.config().naa[..] == *naa).cloned()
    }
}

/// One iSCSI target node with its logical units. Its name is fixed; its
/// [`Policy`] and its LUNs change while it serves (the control plane,
/// SIGHUP).
#[derive(Debug)]
pub struct Target {
    /// The target's iSCSI name.
    pub name: String,
    policy: RwLock<Arc<Policy>>,
    /// Swapped whole when a LUN comes or goes. A command's load takes no
    /// lock and touches no reference count shared with other threads
    /// (arc-swap's per-thread debt slots; datapath rule 4).
    luns: ArcSwap<LunTable>,
}

impl Target {
    /// A target with `policy` and `luns`.
    pub fn new(name: String, policy: Policy, luns: Vec<(u16, Arc<LogicalUnit>)>) -> Target {
        Target {
            name,
            policy: RwLock::new(Arc::new(policy)),
            luns: ArcSwap::from_pointee(LunTable::new(luns)),
        }
    }

    /// The LUN table now; hold it for the length of one command.
    pub fn luns(&self) -> arc_swap::Guard<Arc<LunTable>> {
        self.luns.load()
    }

    /// The LUN table now, as an owned handle (work that leaves the thread).
    pub fn luns_full(&self) -> Arc<LunTable> {
        self.luns.load_full()
    }

    /// Replaces the LUN table: `change` gets the units now and returns the
    /// new set. Callers serialize changes (the control plane's lock).
    pub fn replace_luns(&self, change: impl FnOnce(&LunTable) -> Vec<(u16, Arc<LogicalUnit>)>) {
        let now = self.luns.load_full();
        self.luns.store(Arc::new(LunTable::new(change(&now))));
    }

    /// The policy now.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the policy; logins from now on see the new one.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
    }

    /// True when `initiator` may see and use this target.
    pub fn admits(&self, initiator: &str) -> bool {
        self.policy().admits(initiator)
    }
}

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
    /// Failed authentications per source, to slow down guessing.
    pub auth_failures: FailureLog,
    /// Why `[limits] connections` was lowered at start, if it was.
    pub limits_note: Option<String>,
    /// Logins by outcome, and what ended connections counted.
    pub stats: crate::metrics::ServerStats,
    /// The ALUA target port groups every target reports, one per portal group.
    port_groups: isoe_scsi::PortGroups,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

fn digest_list(choices: &[DigestChoice]) -> Vec<Digest> {
    choices
        .iter()
        .map(|c| match c {
            DigestChoice::None => Digest::None,
            DigestChoice::Crc32c => Digest::Crc32c,
        })
        .collect()
}

/// Builds the login settings of a target's sessions from its parameters.
pub fn login_config(params: &Params, portal_group_tag: u16) -> TargetLoginConfig {
    TargetLoginConfig {
        max_recv_data_segment_length: params.max_recv_data_segment_length,
        max_burst_length: params.max_burst_length,
        first_burst_length: params.first_burst_length,
        max_connections: params.max_connections,
        max_outstanding_r2t: params.max_outstanding_r2t,
        initial_r2t: params.initial_r2t,
        immediate_data: params.immediate_data,
        header_digest: digest_list(&params.header_digest),
        data_digest: digest_list(&params.data_digest),
        default_time2wait: 2,
        default_time2retain: 0,
        target_portal_group_tag: portal_group_tag,
        error_recovery_level: 0,
    }
}

/// What a login must prove under `chap` (RFC 7143 §12.1.3).
pub fn auth_policy(chap: Option<&ChapConfig>) -> AuthPolicy {
    match chap {
        None => AuthPolicy::None,
        Some(c) => AuthPolicy::Chap {
            initiator_user: c.user.clone(),
            initiator_secret: c.secret.clone(),
            mutual: c.mutual.clone(),
            algorithms: c.algorithms.clone(),
        },
    }
}

/// An opened store, and the RBD image under it when it is one (its
/// gateways share the unit's reservations through the cluster).
type Opened = (Arc<dyn Store>, Option<Arc<isoe_rbd::RbdStore>>);

fn open_store(spec: &StoreSpec, read_only: bool) -> Result<Opened, isoe_store::StoreError> {
    if let StoreSpec::Rbd(spec) = spec {
        let image = Arc::new(isoe_rbd::RbdStore::open(spec)?);
        return Ok((Arc::clone(&image) as Arc<dyn Store>, Some(image)));
    }
    let store: Arc<dyn Store> = match spec {
        StoreSpec::Memory { size_bytes, .. } => Arc::new(MemoryStore::try_new(*size_bytes)?),
        StoreSpec::File { path, size_bytes } if read_only && size_bytes.is_none() => {
            Arc::new(FileStore::open_read_only(path)?)
        }
        StoreSpec::File { path, size_bytes } => Arc::new(FileStore::open(path, *size_bytes)?),
        StoreSpec::Block { path } => Arc::new(BlockStore::open(path, read_only)?),
        StoreSpec::Rbd(_) => unreachable!("opened above"),
    };
    Ok((store, None))
}

/// Wraps a LUN's store as it is opened, given the target's name and the
/// LUN: how tests put a slow or failing store under a running target.
pub type WrapStore<'a> = &'a dyn Fn(&str, u16, Arc<dyn Store>) -> Arc<dyn Store>;

/// Opens one LUN's store and builds its logical unit: the identity comes
/// from `state_dir` (made the first time), the backing file must not have
/// vanished since it was provisioned.
pub fn build_lun(
    config: &Config,
    target: &str,
    spec: &LunSpec,
    wrap: WrapStore<'_>,
) -> Result<Arc<LogicalUnit>, SetupError> {
    let identity_error = |source| SetupError::Identity {
        target: target.to_string(),
        lun: spec.number,
        source,
    };
    // The configuration checked this too; the file may have gone since.
    identity::check_backing_file(config.state_dir.as_deref(), target, spec)
        .map_err(identity_error)?;
    let store_error = |source| SetupError::Store {
        target: target.to_string(),
        lun: spec.number,
        source,
    };
    if let StoreSpec::File {
        path,
        size_bytes: Some(size_bytes),
    } = &spec.store
    {
        let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        if file_bytes > *size_bytes {
            return Err(SetupError::FileLarger {
                target: target.to_string(),
                lun: spec.number,
                path: path.clone(),
                size_bytes: *size_bytes,
                file_bytes,
            });
        }
    }
    let (store, image) = open_store(&spec.store, spec.read_only).map_err(store_error)?;
    let store = wrap(target, spec.number, store);
    unit_over(config, target, spec, store, image)
}

/// Builds LUN `spec` of `target` over `store`, already open (a new one, or
/// the store of the unit it replaces, whose data it keeps): the identity
/// comes from `state_dir`; `image`, when the store is an RBD image, shares
/// the unit's reservations with its other gateways.
pub fn unit_over(
    config: &Config,
    target: &str,
    spec: &LunSpec,
    store: Arc<dyn Store>,
    image: Option<Arc<isoe_rbd::RbdStore>>,
) -> Result<Arc<LogicalUnit>, SetupError> {
    let identity_error = |source| SetupError::Identity {
        target: target.to_string(),
        lun: spec.number,
        source,
    };
    let store_error = |source| SetupError::Store {
        target: target.to_string(),
        lun: spec.number,
        source,
    };
    if store.size_bytes() < u64::from(spec.block_size) {
        return Err(SetupError::NoBlocks {
            target: target.to_string(),
            lun: spec.number,
            size_bytes: store.size_bytes(),
            block_size: spec.block_size,
        });
    }
    let id = identity::resolve(config.state_dir.as_deref(), target, spec, store.identity())
        .map_err(identity_error)?;
    let product = match spec.store {
        StoreSpec::Memory { .. } => "MEMORY",
        StoreSpec::File { .. } => "FILE",
        StoreSpec::Block { .. } => "BLOCK",
        StoreSpec::Rbd(_) => "RBD",
    };
    let lun_config = LunConfig {
        read_only: spec.read_only,
        block_size: spec.block_size,
        physical_block_size: spec.physical_block_size,
        sanitize_bytes_per_s: spec.sanitize_bytes_per_s,
        vendor: "ISOE".into(),
        product: product.into(),
        revision: env!("CARGO_PKG_VERSION")
            .chars()
            .filter(|c| *c != '.')
            .take(4)
            .collect(),
        unit_serial: id.serial,
        naa: id.naa,
        target_name: target.to_string(),
        lun_number: spec.number,
        // An image's reservations live in its cluster, shared by its gateways.
        reservations_file: config
            .state_dir
            .as_deref()
            .filter(|_| image.is_none())
            .map(|dir| identity::reservations_file(dir, target, spec.number)),
    };
    lun_config.validate().map_err(|source| SetupError::Lun {
        target: target.to_string(),
        lun: spec.number,
        source,
    })?;
    let lu = Arc::new(LogicalUnit::new(store, lun_config));
    lu.set_offline(spec.offline);
    if let Some(image) = image {
        let local = config.port_groups().iter().map(|g| g.id).collect();
        crate::gateways::share(&lu, &image, local).map_err(|message| {
            store_error(isoe_store::StoreError::Remote {
                what: format!("rbd image {}", image.name()),
                message: format!("sharing its reservations: {message}"),
            })
        })?;
    }
    Ok(lu)
}

/// The [`Policy`] a target's configuration asks for.
pub fn policy_of(t: &TargetConfig) -> Policy {
    Policy {
        alias: t.alias.clone(),
        allowed_initiators: t.allowed_initiators.clone(),
        chap: t.chap.clone(),
        params: t.params.clone(),
    }
}

/// Builds a target and opens its LUNs' stores.
pub fn build_target(
    config: &Config,
    t: &TargetConfig,
    wrap: WrapStore<'_>,
) -> Result<Target, SetupError> {
    let luns = t
        .luns
        .iter()
        .map(|spec| Ok((spec.number, build_lun(config, &t.name, spec, wrap)?)))
        .collect::<Result<Vec<_>, SetupError>>()?;
    Ok(Target::new(t.name.clone(), policy_of(t), luns))
}

/// Makes `lu` LUN `number` of `target`, in place of any unit of that number.
fn swap_in(target: &Target, number: u16, lu: &Arc<LogicalUnit>) {
    target.replace_luns(|now| {
        let mut luns: Vec<_> = now
            .luns
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
            task_sets: std::sync::OnceLock::new(),
            challenges: Mutex::new(ChallengeLog::new(CHALLENGE_LOG_CAPACITY)),
            next_serial: AtomicU64::new(1),
            write_budget: Budget::new(write_buffer),
            gate,
            output_bytes: Arc::default(),
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
        read(&self.targets).clone()
    }

    /// The target named `name`.
    pub fn target(&self, name: &str) -> Option<Arc<Target>> {
        read(&self.targets).iter().find(|t| t.name == name).cloned()
    }

    /// Adds a target (the control plane checked that its name is new).
    pub fn add_target(&self, target: Arc<Target>) {
        write(&self.targets).push(target);
    }

    /// Removes the target named `name`: no new login reaches it; its
    /// sessions are closed (their connections go to `wake`) and its stores
    /// flushed. Returns it, or None when there is none.
    pub fn remove_target(&self, name: &str, wake: &mut Vec<u64>) -> Option<Arc<Target>> {
        let target = {
            let mut targets = write(&self.targets);
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
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        // Dropped once the lock is released: a store may take its time to
        // close.
        let mut replaced = Vec::new();
        for target in self.targets() {
            let numbers: Vec<u16> = target
                .luns()
                .luns
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
        replaced
    }

    /// Removes LUN `number` of `target` and returns it: commands already
    /// running finish; later ones get LOGICAL UNIT NOT SUPPORTED, and the
    /// other units tell every session REPORTED LUNS DATA HAS CHANGED.
    pub fn remove_lun(&self, target: &Arc<Target>, number: u16) -> Option<Arc<LogicalUnit>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let removed = target.luns().lun(number).cloned()?;
        target.replace_luns(|now| {
            now.luns
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
        read(&self.portals).clone()
    }

    /// Replaces the portals SendTargets lists.
    pub fn set_portals(&self, portals: Vec<(std::net::SocketAddr, u16)>) {
        *write(&self.portals) = portals;
    }

    /// `[discovery.chap]` now.
    pub fn discovery_chap(&self) -> Option<Arc<ChapConfig>> {
        read(&self.discovery_chap).clone()
    }

    /// Replaces `[discovery.chap]` for discovery logins from now on.
    pub fn set_discovery_chap(&self, chap: Option<ChapConfig>) {
        *write(&self.discovery_chap) = chap.map(Arc::new);
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
    ) -> Result<Arc<Session>, SessionLimit> {
        let (initiator_name, isid, target_name, portal_group_tag) = key;
        let key = SessionKey {
            initiator_name: initiator_name.to_string(),
            isid,
            target_name: target_name.map(str::to_string),
            portal_group_tag,
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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
        }
        let limit = self.gate.limits().sessions;
        if sessions.len() >= limit {
            self.gate.refused.sessions.fetch_add(1, Ordering::Relaxed);
            return Err(SessionLimit(limit));
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
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|(_, s)| !Arc::ptr_eq(s, session));
    }

    /// Whether the initiator closed every connection of the session that
    /// is `nexus`, though the connections' threads have not yet ended it
    /// (see [`isoe_scsi::UnitDirectory::nexus_closed`]).
    pub fn nexus_closed(&self, nexus: &isoe_scsi::Nexus) -> bool {
        let session = {
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// The sessions logged in to `target`.
    pub fn sessions_of(&self, target: &Arc<Target>) -> Vec<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, s)| s.target.as_ref().is_some_and(|t| Arc::ptr_eq(t, target)))
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// Number of live sessions.
    pub fn session_count(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Asks every connection to finish: sessions are closed (each
    /// connection sees it at its next wake-up; the driver wakes them all).
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
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

/// A login would create more sessions than `[limits] sessions` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} sessions already (limits.sessions)")]
pub struct SessionLimit(pub usize);

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
        let mut log = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        log.insert(challenge)
    }

    fn is_own_challenge(&self, challenge: &[u8]) -> bool {
        let log = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        log.contains(challenge)
    }
}
