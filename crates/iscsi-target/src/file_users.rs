//! Who uses a LUN's file or device: one medium is one LUN's. Two LUNs on
//! one file would show initiators two disks (two serials, two NAAs) that
//! are one, and each initiator's cache of one would go stale under the
//! other's writes.
//!
//! The same file is the same inode, whatever the path says: a symbolic
//! link, a hard link, `./a.img` and `a.img` all name one. A device is its
//! device number, whichever node names it. A file not made yet is its
//! directory's inode and its name.

use crate::config::{file_label, Config, ConfigError, KeyPlace, StoreSpec};
use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// What a file or device is, whatever path names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Medium {
    /// A file (or any node but a block device): its file system and inode.
    Inode { dev: u64, ino: u64 },
    /// A block device: its device number.
    Device { rdev: u64 },
    /// A file a start would create: its directory's file system and inode,
    /// and its name there.
    New { dev: u64, ino: u64, name: OsString },
}

/// What `path` is, or None when neither it nor its directory can be looked
/// at (the checks of each store say why).
fn medium(path: &Path) -> Option<Medium> {
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => Some(Medium::Device { rdev: m.rdev() }),
        Ok(m) => Some(Medium::Inode {
            dev: m.dev(),
            ino: m.ino(),
        }),
        Err(_) => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            let m = std::fs::metadata(dir.unwrap_or(Path::new("."))).ok()?;
            Some(Medium::New {
                dev: m.dev(),
                ino: m.ino(),
                name: path.file_name()?.to_os_string(),
            })
        }
    }
}

/// A LUN of the configuration that uses a file or device.
struct User<'a> {
    medium: Medium,
    path: &'a Path,
    target: &'a str,
    lun: u16,
    place: Option<&'a KeyPlace>,
}

/// Refuses a configuration in which two LUNs (of one target or of two)
/// name one file or device, at the second one's key, naming both.
pub fn check_one_lun_per_file(config: &Config) -> Result<(), ConfigError> {
    let mut users: Vec<User<'_>> = Vec::new();
    for t in &config.targets {
        for lun in &t.luns {
            let path = match &lun.store {
                StoreSpec::File { path, .. } | StoreSpec::Block { path } => path.as_path(),
                StoreSpec::Memory { .. } | StoreSpec::Rbd(_) => continue,
            };
            let Some(medium) = medium(path) else {
                continue;
            };
            let user = User {
                medium,
                path,
                target: &t.name,
                lun: lun.number,
                place: config.store_places.get(&t.name, lun.number),
            };
            if let Some(first) = users.iter().find(|u| u.medium == user.medium) {
                return Err(two_users(config, first, &user));
            }
            users.push(user);
        }
    }
    Ok(())
}

/// The error of `second` naming the medium of `first`, at `second`'s key.
fn two_users(config: &Config, first: &User<'_>, second: &User<'_>) -> ConfigError {
    let first_at = match first.place {
        Some(p) => format!(" (line {}, {})", p.line, p.key),
        None => String::new(),
    };
    let files = if first.path == second.path {
        format!("one file, {}", first.path.display())
    } else {
        format!(
            "one file ({} is {})",
            second.path.display(),
            first.path.display()
        )
    };
    let message = format!(
        "target {} LUN {} and target {} LUN {}{first_at} name {files}: initiators would \
         see two disks that are one, each with its own serial, and writes through one \
         would corrupt what they read through the other; give each LUN a file of its own",
        second.target, second.lun, first.target, first.lun
    );
    let place = second.place.cloned().unwrap_or_else(|| KeyPlace {
        line: 0,
        key: format!("target {} LUN {}", second.target, second.lun),
    });
    ConfigError::Invalid {
        file: file_label(config.source.as_deref()),
        line: place.line,
        key: place.key,
        message,
    }
}
