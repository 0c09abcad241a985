//! Writing the configuration file back: the file is the administrator's,
//! so a save never overwrites a hand edit it has not read, never follows a
//! link someone planted beside it, and leaves the file with the owner and
//! mode it had.
//!
//! A save runs in two steps around putting the change into force:
//! [`Staged::write`] checks that the file on disk is still the text last
//! read or written, then writes the new text to a new file of its own in
//! the same directory (a random name, created exclusively: `O_CREAT |
//! O_EXCL` never opens an existing file or a symbolic link) with the
//! original's owner and mode, and syncs it; [`Staged::commit`] renames it
//! over the file and syncs the directory, so that a crash leaves either
//! file whole.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the file was not saved; it is as it was.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The file is no longer the text the target last read or wrote.
    #[error(
        "{} changed on disk since it was loaded; reload (SIGHUP or `isoe admin reload`) first",
        path.display()
    )]
    ChangedOnDisk {
        /// The configuration file.
        path: PathBuf,
    },
    /// The configuration path names a symbolic link, which a save would
    /// replace with a file.
    #[error(
        "{} is a symbolic link; `isoe admin` saves only to a regular file: start the target \
         with --config naming the file itself",
        path.display()
    )]
    Symlink {
        /// The configuration file.
        path: PathBuf,
    },
    /// The new file could not get the original's owner.
    #[error(
        "cannot give {} the owner of {} (uid {uid}, gid {gid}): {source}; nothing was saved",
        temp.display(),
        path.display()
    )]
    Owner {
        /// The new file.
        temp: PathBuf,
        /// The configuration file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// Its group.
        gid: u32,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Reading, writing, syncing or renaming failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file the OS refused.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// The owner and mode the saved file keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ownership {
    uid: u32,
    gid: u32,
    mode: u32,
}

/// The configuration file as it is on disk now, read without following
/// a symbolic link: its text (None when it is gone) and ownership.
fn read_current(path: &Path) -> Result<Option<(Vec<u8>, Ownership)>, SaveError> {
    let io = |source| SaveError::Io {
        path: path.to_path_buf(),
        source,
    };
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW on a symbolic link: ELOOP.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(SaveError::Symlink {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let mut text = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut text).map_err(io)?;
    let owner = Ownership {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
    };
    Ok(Some((text, owner)))
}

/// A new configuration text written beside the file and synced, not yet
/// in its place.
pub struct Staged {
    temp: tempfile::TempPath,
    path: PathBuf,
    /// Set when the new file is more private than the old one, and why.
    pub mode_note: Option<String>,
}

impl Staged {
    /// Stages `text` to replace `path`, which must still hold `loaded`
    /// (what the target last read or wrote there). `holds_secret`: the
    /// text has an inline CHAP secret, so group and others lose access.
    pub fn write(
        path: &Path,
        loaded: &str,
        text: &str,
        holds_secret: bool,
    ) -> Result<Staged, SaveError> {
        let changed = || SaveError::ChangedOnDisk {
            path: path.to_path_buf(),
        };
        let (current, owner) = read_current(path)?.ok_or_else(changed)?;
        if current != loaded.as_bytes() {
            return Err(changed());
        }
        let mut mode = owner.mode;
        let mut mode_note = None;
        if holds_secret && mode & 0o077 != 0 {
            mode &= 0o7700;
            mode_note = Some(format!(
                "{} is now mode {mode:04o} (was {:04o}): it holds a CHAP secret",
                path.display(),
                owner.mode
            ));
        }
        let temp = create_beside(path)?;
        let temp_path = temp.path().to_path_buf();
        let io = |source| SaveError::Io {
            path: temp_path.clone(),
            source,
        };
        let (file, temp) = temp.into_parts();
        keep_owner(&file, path, &temp_path, owner)?;
        // After the owner: chown clears set-id bits.
        file.set_permissions(Permissions::from_mode(mode))
            .map_err(io)?;
        write_synced(file, text).map_err(io)?;
        Ok(Staged {
            temp,
            path: path.to_path_buf(),
            mode_note,
        })
    }

    /// Puts the staged file in place of the configuration file.
    pub fn commit(self) -> Result<PathBuf, SaveError> {
        let Staged { temp, path, .. } = self;
        temp.persist(&path).map_err(|e| SaveError::Io {
            path: path.clone(),
            source: e.error,
        })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename is durable once the directory is; a failure here
            // leaves the new file in place, which is what runs.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(path)
    }
}

/// A new, empty file with a random name in `path`'s directory, made with
/// `O_CREAT | O_EXCL` and mode 0600 until its contents are decided.
fn create_beside(path: &Path) -> Result<tempfile::NamedTempFile, SaveError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "config".into(), |n| n.to_string_lossy().into_owned());
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".isoe-new")
        .rand_bytes(12)
        .permissions(Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|source| SaveError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

/// Gives `file` the configuration file's owner, unless it has it already.
fn keep_owner(file: &File, path: &Path, temp: &Path, owner: Ownership) -> Result<(), SaveError> {
    let meta = file.metadata().map_err(|source| SaveError::Io {
        path: temp.to_path_buf(),
        source,
    })?;
    if (meta.uid(), meta.gid()) == (owner.uid, owner.gid) {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(owner.uid), Some(owner.gid)).map_err(|source| {
        SaveError::Owner {
            temp: temp.to_path_buf(),
            path: path.to_path_buf(),
            uid: owner.uid,
            gid: owner.gid,
            source,
        }
    })
}

fn write_synced(mut file: File, text: &str) -> std::io::Result<()> {
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("target.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_save_keeps_the_mode_and_leaves_no_other_file() {
        let (dir, path) = setup("a = 1\n", 0o640);
        let staged = Staged::write(&path, "a = 1\n", "a = 2\n", false).unwrap();
        assert_eq!(staged.mode_note, None);
        staged.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 2\n");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!(names(dir.path()), ["target.toml"]);
    }

    #[test]
    fn a_save_keeps_another_users_ownership() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIPPED: giving a file another owner needs root");
            return;
        }
        let (_dir, path) = setup("a = 1\n", 0o640);
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        Staged::write(&path, "a = 1\n", "a = 2\n", false)
            .unwrap()
            .commit()
            .unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (65534, 65534, 0o640)
        );
    }

    #[test]
    fn a_file_edited_by_hand_since_it_was_read_is_not_overwritten() {
        let (dir, path) = setup("a = 1\nb = 2\n", 0o644);
        let err = Staged::write(&path, "a = 1\n", "a = 3\n", false)
            .err()
            .unwrap();
        assert!(matches!(err, SaveError::ChangedOnDisk { .. }), "{err}");
        assert!(err.to_string().contains("reload (SIGHUP"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 1\nb = 2\n");
        assert_eq!(names(dir.path()), ["target.toml"]);
    }

    #[test]
    fn a_secret_makes_a_readable_file_private_and_says_so() {
        let (_dir, path) = setup("a = 1\n", 0o644);
        let staged = Staged::write(&path, "a = 1\n", "secret = \"s\"\n", true).unwrap();
        let note = staged.mode_note.clone().unwrap();
        assert!(note.contains("0600 (was 0644)"), "{note}");
        staged.commit().unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_symlinked_configuration_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("elsewhere.toml");
        std::fs::write(&real, "a = 1\n").unwrap();
        let path = dir.path().join("target.toml");
        std::os::unix::fs::symlink(&real, &path).unwrap();
        let err = Staged::write(&path, "a = 1\n", "a = 2\n", false)
            .err()
            .unwrap();
        assert!(matches!(err, SaveError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "a = 1\n");
        assert!(std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn links_planted_at_the_old_fixed_name_are_left_alone() {
        let (dir, path) = setup("a = 1\n", 0o600);
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let planted = dir.path().join(".target.toml.isoe-new");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        Staged::write(&path, "a = 1\n", "a = 2\n", false)
            .unwrap()
            .commit()
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 2\n");
    }

    #[test]
    fn an_uncommitted_stage_leaves_nothing_behind() {
        let (dir, path) = setup("a = 1\n", 0o600);
        drop(Staged::write(&path, "a = 1\n", "a = 2\n", false).unwrap());
        assert_eq!(names(dir.path()), ["target.toml"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 1\n");
    }
}
