//! From a LUN's configuration to a logical unit: first the checks of what
//! its store is on this machine ([`check_stores`]), then its store opened
//! (or created), its identity resolved, its settings checked by the SCSI
//! layer; and a target built of such units.

use crate::config::{
    file_label, show_bytes, Config, ConfigError, KeyPlace, LunSpec, StoreSpec, TargetConfig,
};
use crate::file_users::claim;
use crate::identity;
use crate::policy::policy_of;
pub use crate::setup_error::SetupError;
use crate::target::Target;
use isoe_scsi::{LogicalUnit, LunConfig};
use isoe_store::{BlockStore, FileStore, MemoryStore, Store};
use std::path::Path;
use std::sync::Arc;

/// The checks of each LUN's store that look past the configuration file,
/// made before a configuration is served or applied (`isoe target` and
/// `--check` once the file is read, the control plane before it puts a
/// change in force): at the file system (a missing file without `size` or
/// in a directory that does not exist, a file or device smaller than one
/// block, a file whose identity record says it was provisioned and is
/// gone, two LUNs on one file, a file another process serves:
/// [`crate::file_users`]) and at the
/// machine's RAM, which the memory LUNs
/// without `overcommit` must fit in together (MemTotal of /proc/meminfo).
/// Errors name the file, the line and the key of the LUN's store, as the
/// reading's do; the first LUN in file order that fails is named.
pub fn check_stores(config: &Config) -> Result<(), ConfigError> {
    check_stores_with_ram(config, memory_total_bytes())
}

/// [`check_stores`] on a machine with `ram_bytes` of RAM; `None` (RAM
/// unknown) leaves the memory LUNs unchecked.
pub fn check_stores_with_ram(config: &Config, ram_bytes: Option<u64>) -> Result<(), ConfigError> {
    let mut memory_bytes = 0u64;
    for (t_index, t) in config.targets.iter().enumerate() {
        for (l_index, lun) in t.luns.iter().enumerate() {
            let fail = |message: String| {
                let place = config.store_places.get(&t.name, lun.number).cloned();
                let KeyPlace { line, key } = place.unwrap_or_else(|| KeyPlace {
                    line: 0,
                    key: format!("target[{t_index}].lun[{l_index}].{}", store_key(&lun.store)),
                });
                let file = file_label(config.source.as_deref());
                ConfigError::Invalid {
                    file,
                    line,
                    key,
                    message,
                }
            };
            check_store(config, &t.name, lun, ram_bytes, &mut memory_bytes).map_err(fail)?;
        }
    }
    crate::file_users::check_one_lun_per_file(config)?;
    crate::file_users::check_not_held_elsewhere(config)
}

/// The key a LUN's store is written under.
fn store_key(store: &StoreSpec) -> &'static str {
    match store {
        StoreSpec::Memory { .. } => "memory",
        StoreSpec::File { .. } => "file",
        StoreSpec::Block { .. } => "block",
        StoreSpec::Rbd(_) => "rbd",
    }
}

/// [`check_stores`] of one LUN of `target_name`; `memory_bytes` sums the
/// memory LUNs so far that count against `ram_bytes`.
fn check_store(
    config: &Config,
    target_name: &str,
    lun: &LunSpec,
    ram_bytes: Option<u64>,
    memory_bytes: &mut u64,
) -> Result<(), String> {
    let block_size = u64::from(lun.block_size);
    let too_small = |path: &Path, len: u64| {
        format!(
            "{} holds {len} bytes, less than one block of {block_size}: \
             a LUN needs at least one block",
            path.display()
        )
    };
    match &lun.store {
        StoreSpec::Memory {
            size_bytes,
            overcommit,
        } => {
            if *overcommit {
                return Ok(());
            }
            *memory_bytes += size_bytes;
            match ram_bytes {
                Some(ram) if *memory_bytes > ram => Err(format!(
                    "the memory LUNs up to this one take {}, more than this machine's {} \
                     of RAM (MemTotal in /proc/meminfo): written full, they would exhaust \
                     it; make them smaller, or set `overcommit = true` on the LUN if it \
                     will never be written full",
                    show_bytes(*memory_bytes),
                    show_bytes(ram)
                )),
                _ => Ok(()),
            }
        }
        StoreSpec::File { path, size_bytes } => {
            if !path.exists() {
                let state_dir = config.state_dir.as_deref();
                identity::check_backing_file(state_dir, target_name, lun)
                    .map_err(|e| e.to_string())?;
                if size_bytes.is_none() {
                    return Err(format!(
                        "{} does not exist; give `size` to create it (sparse)",
                        path.display()
                    ));
                }
                return check_directory(path);
            }
            match std::fs::metadata(path) {
                Ok(m) if size_bytes.is_none() && m.len() < block_size => Err(format!(
                    "{}; give `size` to grow it",
                    too_small(path, m.len())
                )),
                _ => Ok(()),
            }
        }
        // The cluster is asked when the target opens the image.
        StoreSpec::Rbd(_) => Ok(()),
        StoreSpec::Block { path } => {
            // A device that cannot be opened here is left for the target's
            // start, which says why.
            let len = std::fs::File::open(path)
                .and_then(|mut device| std::io::Seek::seek(&mut device, std::io::SeekFrom::End(0)));
            match len {
                Ok(len) if len < block_size => Err(too_small(path, len)),
                _ => Ok(()),
            }
        }
    }
}

/// Whether a start could create the file `path` (which does not exist):
/// its directory must. A start makes no directories, so that a file
/// system not mounted is not filled in its mount point.
fn check_directory(path: &Path) -> Result<(), String> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{} is not a directory: a start could not create {} in it",
            dir.display(),
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "the directory {} does not exist: a start could not create {} in it \
             (a start makes no directories: make it, or mount its file system)",
            dir.display(),
            path.display()
        )),
        Err(e) => Err(format!(
            "cannot look at the directory {}: {e}: a start could not create {} in it",
            dir.display(),
            path.display()
        )),
    }
}

/// The machine's RAM: MemTotal of /proc/meminfo, or None where it cannot be read.
pub fn memory_total_bytes() -> Option<u64> {
    parse_mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// MemTotal of a /proc/meminfo text, in bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => kib.checked_mul(1024),
        _ => None,
    }
}

/// An opened store, and the RBD image under it when it is one (its
/// gateways share the unit's reservations through the cluster).
type Opened = (Arc<dyn Store>, Option<Arc<isoe_rbd::RbdStore>>);

/// Opens the store of LUN `spec` of `target`; a file or device store
/// holds its claim on the file ([`crate::file_users::claim`]).
fn open_store(target: &str, spec: &LunSpec) -> Result<Opened, SetupError> {
    let store_error = |source: isoe_store::StoreError| SetupError::Store {
        target: target.to_string(),
        lun: spec.number,
        source,
    };
    let read_only = spec.read_only;
    let store: Arc<dyn Store> = match &spec.store {
        StoreSpec::Rbd(rbd) => {
            // The cluster's own exclusive lock follows the writer, and every
            // gateway derives one identity from the image.
            let image = Arc::new(isoe_rbd::RbdStore::open(rbd).map_err(|e| store_error(e.into()))?);
            return Ok((Arc::clone(&image) as Arc<dyn Store>, Some(image)));
        }
        StoreSpec::Memory { size_bytes, .. } => {
            Arc::new(MemoryStore::try_new(*size_bytes).map_err(store_error)?)
        }
        StoreSpec::File { path, size_bytes } => {
            // Claimed before it is opened, so that a file another process
            // serves is not grown; one not made yet, once it is.
            let early = path.exists();
            let held = early.then(|| claim(target, spec, path)).transpose()?;
            let store = match size_bytes {
                None if read_only => FileStore::open_read_only(path),
                _ => FileStore::open(path, *size_bytes),
            }
            .map_err(store_error)?;
            let held = match held {
                Some(held) => held,
                None => claim(target, spec, path)?,
            };
            Arc::new(match held {
                Some(claim) => store.with_claim(claim),
                None => store,
            })
        }
        StoreSpec::Block { path } => {
            let held = claim(target, spec, path)?;
            let store = BlockStore::open(path, read_only).map_err(store_error)?;
            Arc::new(match held {
                Some(claim) => store.with_claim(claim),
                None => store,
            })
        }
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
    let (store, image) = open_store(target, spec)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:       24683656 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_683_656 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 12 MB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert!(memory_total_bytes().is_some_and(|bytes| bytes > 1 << 20));
    }
}
