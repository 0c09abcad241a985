//! A LUN whose keys change on a running target: what becomes of its data,
//! and what its sessions are told.
//!
//! A LUN's data is the administrator's, so a change never discards it
//! without being asked to: a memory LUN cannot change size (its data
//! would go), a store cannot become another store, and a file cannot
//! shrink, unless the reload is forced. Every other change keeps the
//! medium: a memory LUN's new unit serves the same memory, a file or
//! device is opened again, and the new unit takes over the old one's
//! reservations and software write protect. The sessions hear what
//! changed as a unit attention at their next command (SPC-5 5.14):
//! CAPACITY DATA HAS CHANGED, MODE PARAMETERS CHANGED (write protection),
//! INQUIRY DATA HAS CHANGED (identity), or, for a forced change of store,
//! NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED.

use crate::config::{Config, LunSpec, StoreSpec};
use crate::provision::{build_lun, unit_over, SetupError};
use isoe_scsi::{LogicalUnit, Sense};
use isoe_size::describe_bytes;
use isoe_store::FileStore;
use std::path::PathBuf;
use std::sync::Arc;

/// A change the reload refuses unless forced, and what it would lose.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what}; nothing changed (to do it anyway: `isoe admin reload --force`, \
     or \"force\": true in the reload request)"
)]
pub struct WouldLose {
    /// The LUN, the change and what would be lost.
    pub what: String,
}

/// A changed LUN's new unit, ready to go in.
pub struct Planned {
    /// Its configuration.
    pub spec: LunSpec,
    /// The new unit.
    pub lu: Arc<LogicalUnit>,
    /// What its sessions are told.
    pub conditions: Vec<Sense>,
    /// What changed, in one line.
    pub line: String,
    /// A forced change: what was lost, for a warning.
    pub lost: Option<String>,
    /// A forced shrink: the file and the size to cut it to once the old
    /// unit is out.
    pub cut: Option<(PathBuf, u64)>,
}

/// Why a changed LUN was not prepared.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The change would lose data and was not forced.
    #[error(transparent)]
    WouldLose(#[from] WouldLose),
    /// The new unit could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// One LUN's change, as a reload asks for it.
pub struct Change<'a> {
    /// What the LUN was.
    pub before: &'a LunSpec,
    /// The unit that serves it now.
    pub old: &'a Arc<LogicalUnit>,
    /// What it is to be.
    pub spec: &'a LunSpec,
    /// Its new size as the file writes it (`"256 GB"`), to echo back.
    pub given: Option<&'a str>,
    /// It may discard data.
    pub force: bool,
}

/// The new unit of LUN `change.spec` of `target`.
pub fn plan(config: &Config, target: &str, change: Change<'_>) -> Result<Planned, PlanError> {
    let Change {
        before,
        old,
        spec,
        given,
        force,
    } = change;
    let name = format!("LUN {} of {target}", spec.number);
    if let Some(what) = loss(&name, before, old, spec, given) {
        if !force {
            return Err(WouldLose { what }.into());
        }
        return forced(config, target, old, spec, what);
    }
    let lu = match &spec.store {
        // The same memory, under new keys.
        StoreSpec::Memory { .. } => unit_over(config, target, spec, Arc::clone(old.store()), None)?,
        _ => build_lun(config, target, spec, &|_, _, s| s)?,
    };
    if !matches!(spec.store, StoreSpec::Rbd(_)) {
        // An image's reservations live in its cluster, not in the unit.
        lu.take_over(old);
    }
    let changed = changed_keys(before, spec, old, &lu, given);
    Ok(Planned {
        spec: spec.clone(),
        conditions: conditions(old, &lu),
        line: format!(
            "{name} changed in place, its data kept: {}",
            changed.join(", ")
        ),
        lu,
        lost: None,
        cut: None,
    })
}

/// A forced change that loses `what`: a new store, or the file cut short.
fn forced(
    config: &Config,
    target: &str,
    old: &Arc<LogicalUnit>,
    spec: &LunSpec,
    what: String,
) -> Result<Planned, PlanError> {
    let shrink = match (&spec.store, shrink_of(old, spec)) {
        (StoreSpec::File { path, .. }, Some(size)) => Some((path.clone(), size)),
        _ => None,
    };
    let lu = match &shrink {
        Some((path, size)) => {
            // The same file as the old unit's: its claim is this process's.
            let claim = crate::file_users::claim(target, spec, path)?;
            let store = FileStore::open_exact(path, *size).map_err(|source| SetupError::Store {
                target: target.to_string(),
                lun: spec.number,
                source,
            })?;
            let store = match claim {
                Some(claim) => store.with_claim(claim),
                None => store,
            };
            let lu = unit_over(config, target, spec, Arc::new(store), None)?;
            lu.take_over(old);
            lu
        }
        None => build_lun(config, target, spec, &|_, _, s| s)?,
    };
    let mut conditions = conditions(old, &lu);
    if shrink.is_none() {
        // SPC-5 table F.2: 28/00, the medium may have changed.
        conditions.push(Sense::new(
            isoe_scsi::sense::sense_key::UNIT_ATTENTION,
            0x28,
            0x00,
        ));
    }
    Ok(Planned {
        spec: spec.clone(),
        line: format!("{what} (forced)"),
        conditions,
        lu,
        lost: Some(what),
        cut: shrink,
    })
}

/// `bytes` as given (`"256 GB" = 274877906944 bytes (256 GiB)`), or in
/// bytes and a binary unit when the text is not known.
fn as_given(bytes: u64, given: Option<&str>) -> String {
    match given {
        Some(text) => format!("{text:?} = {}", describe_bytes(bytes)),
        None => describe_bytes(bytes),
    }
}

/// What the change from `before` to `spec` would lose, if anything;
/// `given`: the new size as written.
fn loss(
    name: &str,
    before: &LunSpec,
    old: &LogicalUnit,
    spec: &LunSpec,
    given: Option<&str>,
) -> Option<String> {
    match (&before.store, &spec.store) {
        (StoreSpec::Memory { size_bytes: a, .. }, StoreSpec::Memory { size_bytes: b, .. })
            if a != b =>
        {
            Some(format!(
                "{name}: a memory LUN cannot change size ({} to {}): the {} it holds would be \
                 discarded",
                describe_bytes(*a),
                as_given(*b, given),
                describe_bytes(*a)
            ))
        }
        (a, b) if !same_medium(a, b) => Some(format!(
            "{name}: its store would change from {} to {}: {}",
            a.describe(),
            b.describe(),
            match a {
                StoreSpec::Memory { size_bytes, .. } => format!(
                    "the {} it holds in memory would be discarded",
                    describe_bytes(*size_bytes)
                ),
                _ => format!(
                    "its initiators would see other data ({} itself is left as it is)",
                    a.describe()
                ),
            }
        )),
        (StoreSpec::File { path, .. }, _) => shrink_of(old, spec).map(|size| {
            let now = old.store().size_bytes();
            format!(
                "{name}: size {} is smaller than its file {}, {}: shrinking would cut off \
                 the last {}",
                as_given(size, given),
                path.display(),
                describe_bytes(now),
                describe_bytes(now - size)
            )
        }),
        _ => None,
    }
}

/// The size a file LUN would shrink to, if `spec` shrinks it.
fn shrink_of(old: &LogicalUnit, spec: &LunSpec) -> Option<u64> {
    match spec.store {
        StoreSpec::File {
            size_bytes: Some(size),
            ..
        } if size < old.store().size_bytes() => Some(size),
        _ => None,
    }
}

/// Whether two stores are the same medium: the same memory (same size),
/// the same file or device, the same image.
fn same_medium(a: &StoreSpec, b: &StoreSpec) -> bool {
    match (a, b) {
        (StoreSpec::Memory { size_bytes: x, .. }, StoreSpec::Memory { size_bytes: y, .. }) => {
            x == y
        }
        (StoreSpec::File { path: x, .. }, StoreSpec::File { path: y, .. }) => x == y,
        (StoreSpec::Block { path: x }, StoreSpec::Block { path: y }) => x == y,
        (StoreSpec::Rbd(x), StoreSpec::Rbd(y)) => x.name() == y.name() && x.cluster == y.cluster,
        _ => false,
    }
}

/// The unit attentions that tell a session what the new unit reports
/// differently from the old.
fn conditions(old: &LogicalUnit, new: &LogicalUnit) -> Vec<Sense> {
    let (a, b) = (old.config(), new.config());
    let mut conditions = Vec::new();
    if old.capacity_blocks() != new.capacity_blocks()
        || a.block_size != b.block_size
        || a.physical_block_size != b.physical_block_size
    {
        conditions.push(Sense::capacity_data_changed());
    }
    if a.read_only != b.read_only {
        conditions.push(Sense::mode_parameters_changed());
    }
    if a.unit_serial != b.unit_serial || a.naa != b.naa {
        conditions.push(Sense::inquiry_data_changed());
    }
    conditions
}

/// The keys that changed, as `key old -> new`, sizes in bytes and units.
fn changed_keys(
    before: &LunSpec,
    spec: &LunSpec,
    old: &LogicalUnit,
    new: &LogicalUnit,
    given: Option<&str>,
) -> Vec<String> {
    let mut keys = Vec::new();
    let (size_old, size_new) = (old.store().size_bytes(), new.store().size_bytes());
    if size_old != size_new {
        keys.push(format!(
            "size {} -> {}",
            describe_bytes(size_old),
            as_given(size_new, given)
        ));
    }
    let mut key = |name: &str, a: String, b: String| {
        if a != b {
            keys.push(format!("{name} {a} -> {b}"));
        }
    };
    key(
        "read_only",
        before.read_only.to_string(),
        spec.read_only.to_string(),
    );
    key(
        "block_size",
        before.block_size.to_string(),
        spec.block_size.to_string(),
    );
    key(
        "physical_block_size",
        format!("{:?}", before.physical_block_size),
        format!("{:?}", spec.physical_block_size),
    );
    key(
        "sanitize_bytes_per_s",
        format!("{:?}", before.sanitize_bytes_per_s),
        format!("{:?}", spec.sanitize_bytes_per_s),
    );
    key(
        "serial",
        format!("{:?}", before.serial),
        format!("{:?}", spec.serial),
    );
    key(
        "naa",
        format!("{:?}", before.naa),
        format!("{:?}", spec.naa),
    );
    if keys.is_empty() {
        keys.push(format!("store keys ({})", spec.store.describe()));
    }
    keys
}
