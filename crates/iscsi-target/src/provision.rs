//! From a LUN's configuration to a logical unit: its store opened (or
//! created), its identity resolved, its settings checked by the SCSI layer;
//! and a target built of such units.

use crate::config::{Config, LunSpec, StoreSpec, TargetConfig};
use crate::identity;
use crate::policy::policy_of;
use crate::target::Target;
use isoe_scsi::{LogicalUnit, LunConfig};
use isoe_store::{BlockStore, FileStore, MemoryStore, Store};
use std::sync::Arc;
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
