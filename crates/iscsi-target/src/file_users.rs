//! Who uses a LUN's file or device: one medium is one LUN's. Two LUNs on
//! one file would show initiators two disks (two serials, two NAAs) that
//! are one, and each initiator's cache of one would go stale under the
//! other's writes.
//!
//! The same file is the same inode, whatever the path says: a symbolic
//! link, a hard link, `./a.img` and `a.img` all name one. A device is its
//! device number, whichever node names it. A file not made yet is its
//! directory's inode and its name.
//!
//! Within one configuration, the checks refuse a second LUN on a file
//! ([`check_one_lun_per_file`]). Across processes, each file or block LUN's
//! store holds a claim on its file ([`isoe_store::Claims`]): a lock other
//! processes see, alone, or shared with the processes that present the
//! same LU (the same `serial` and `naa`: [`sharing`]). A claim refused
//! names the processes that hold the file, with their command lines, and
//! what the configuration file of an `isoe target` among them says of
//! the file as it reads now.

use crate::config::{file_label, Config, ConfigError, KeyPlace, LunSpec, StoreSpec};
use crate::setup_error::SetupError;
use isoe_store::{Claim, ClaimError, Claims, Conflict, Holder, Sharing};
use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

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

/// How LUN `spec` shares its file with other processes: as the identity
/// its configuration names, when it names both `serial` and `naa` (the
/// gateways of one LU, each in its own process, name the same), else not
/// at all: a generated identity is one process's.
pub fn sharing(spec: &LunSpec) -> Sharing {
    match (&spec.serial, &spec.naa) {
        (Some(serial), Some(naa)) => {
            let naa: String = naa.iter().map(|b| format!("{b:02x}")).collect();
            Sharing::As(format!("{serial}/{naa}"))
        }
        _ => Sharing::Alone,
    }
}

/// Claims `path`, the file or device of LUN `spec` of `target`, for this
/// process, for as long as the returned claim lives (its store holds it).
/// None, with a warning, where the file system takes no locks: the LUN is
/// served unguarded, as before claims.
pub fn claim(target: &str, spec: &LunSpec, path: &Path) -> Result<Option<Claim>, SetupError> {
    match Claims::process().claim(path, sharing(spec)) {
        Ok(claim) => Ok(Some(claim)),
        Err(ClaimError::Unsupported { .. }) => {
            tracing::warn!(
                target = %target,
                lun = spec.number,
                "{} is on a file system that takes no locks: the LUN is served unclaimed, \
                 and another process could serve the file as another disk unseen",
                path.display()
            );
            Ok(None)
        }
        Err(e) => Err(SetupError::Claim {
            target: target.to_string(),
            lun: spec.number,
            message: refusal(&e),
        }),
    }
}

/// Refuses a configuration with a LUN whose file or device another
/// process holds, at the LUN's key, naming that process. Files this
/// process holds (a running target's, being reloaded) are its own to
/// hand over, and pass.
pub fn check_not_held_elsewhere(config: &Config) -> Result<(), ConfigError> {
    for t in &config.targets {
        for lun in &t.luns {
            let path = match &lun.store {
                StoreSpec::File { path, .. } | StoreSpec::Block { path } => path,
                StoreSpec::Memory { .. } | StoreSpec::Rbd(_) => continue,
            };
            let error = match Claims::process().check(path, sharing(lun)) {
                Err(e @ ClaimError::Busy { .. }) => e,
                // Locks the file system does not take are warned of at
                // start; a file that cannot be opened, the store says why.
                _ => continue,
            };
            let place = config.store_places.get(&t.name, lun.number).cloned();
            let place = place.unwrap_or_else(|| KeyPlace {
                line: 0,
                key: format!("target {} LUN {}", t.name, lun.number),
            });
            return Err(ConfigError::Invalid {
                file: file_label(config.source.as_deref()),
                line: place.line,
                key: place.key,
                message: refusal(&error),
            });
        }
    }
    Ok(())
}

/// A claim's refusal in words: what the other process is to this LUN, who
/// it is, and what to do.
fn refusal(error: &ClaimError) -> String {
    let ClaimError::Busy {
        path,
        conflict,
        holders,
    } = error
    else {
        return error.to_string();
    };
    let who = if holders.is_empty() {
        "its holder is not found in /proc/locks (a process of another PID namespace, \
         or one whose descriptors this user cannot read)"
            .to_string()
    } else {
        let named: Vec<String> = holders.iter().map(|h| holder_in_words(h, path)).collect();
        named.join("; ")
    };
    match conflict {
        Conflict::InUse => format!(
            "{} is in use by another process: {who}; a file is one LUN's: two processes \
             serving it would show initiators two disks that are one (the gateways of one \
             LU name the same `serial` and `naa` in each process)",
            path.display()
        ),
        Conflict::OtherIdentity => format!(
            "{} is served by another process as another LU (another `serial` or `naa`): \
             {who}; the gateways of one LU name the same `serial` and `naa` in each process",
            path.display()
        ),
    }
}

/// `pid 4242 (isoe target --config b.toml), whose configuration
/// /etc/isoe/b.toml names it as target T LUN 0 (line 8)`: the holder, and
/// what its configuration file, as it reads now, says of `path`.
fn holder_in_words(holder: &Holder, path: &Path) -> String {
    let mut words = match holder.command.is_empty() {
        true => format!("pid {}", holder.pid),
        false => format!("pid {} ({})", holder.pid, holder.command.join(" ")),
    };
    let Some(config_path) = config_of(holder) else {
        return words;
    };
    let Ok(config) = Config::load(&config_path) else {
        words.push_str(&format!(
            ", whose configuration is {}",
            config_path.display()
        ));
        return words;
    };
    let users = users_of(&config, path);
    words.push_str(&format!(", whose configuration {}", config_path.display()));
    if users.is_empty() {
        words.push_str(" does not name it now (changed since it was read?)");
    } else {
        words.push_str(&format!(" names it as {}", users.join(" and ")));
    }
    words
}

/// The configuration file of an `isoe target --config FILE` command line,
/// from the holder's working directory when relative.
fn config_of(holder: &Holder) -> Option<PathBuf> {
    let args = &holder.command;
    let given = args
        .iter()
        .enumerate()
        .find_map(|(i, arg)| match arg.as_str() {
            "--config" => args.get(i + 1).cloned(),
            _ => arg.strip_prefix("--config=").map(str::to_string),
        })?;
    let given = PathBuf::from(given);
    match &holder.cwd {
        Some(cwd) if given.is_relative() => Some(cwd.join(given)),
        _ => Some(given),
    }
}

/// `target T LUN n (line L)` for each LUN of `config` on the file `path`.
fn users_of(config: &Config, path: &Path) -> Vec<String> {
    let Some(wanted) = medium(path) else {
        return Vec::new();
    };
    let mut users = Vec::new();
    for t in &config.targets {
        for lun in &t.luns {
            let (StoreSpec::File { path, .. } | StoreSpec::Block { path }) = &lun.store else {
                continue;
            };
            if medium(path).as_ref() != Some(&wanted) {
                continue;
            }
            let line = match config.store_places.get(&t.name, lun.number) {
                Some(place) => format!(" (line {})", place.line),
                None => String::new(),
            };
            users.push(format!("target {} LUN {}{line}", t.name, lun.number));
        }
    }
    users
}
