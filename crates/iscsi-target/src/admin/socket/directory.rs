//! Whether a control socket's directory is the target's own: a user who
//! can write the directory (or rename one above it) can take the socket's
//! path before the target binds it, and answer `isoe admin` in its place,
//! CHAP secrets included.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Group- and other-write permission bits.
const WRITE_BY_OTHERS: u32 = 0o022;

/// The sticky bit: in such a directory only an entry's owner (or the
/// directory's, or root) may rename or remove the entry.
const STICKY: u32 = 0o1000;

/// Why a directory is not safe for the control socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsafe {
    /// The directory at fault.
    pub dir: PathBuf,
    /// What is wrong with it, as a sentence's end.
    pub why: String,
}

/// Makes the directory of `socket` (mode 0700) if it is missing, then
/// checks that only root and this process's user can change what is at
/// the socket's path: the directory and each one above it must be owned by
/// root or this user, and the directory must be writable by no one else;
/// one above it may be (as /tmp is) if it has the sticky bit, which keeps
/// others from renaming what they do not own.
pub fn check(socket: &Path) -> Result<(), CheckError> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| CheckError::Io {
            dir: dir.to_path_buf(),
            source,
        })?;
    let dir = std::fs::canonicalize(dir).map_err(|source| CheckError::Io {
        dir: dir.to_path_buf(),
        source,
    })?;
    let own_uid = rustix::process::geteuid().as_raw();
    for (depth, ancestor) in dir.ancestors().enumerate() {
        let meta = std::fs::metadata(ancestor).map_err(|source| CheckError::Io {
            dir: ancestor.to_path_buf(),
            source,
        })?;
        if let Some(why) = fault(meta.uid(), meta.mode(), own_uid, depth == 0) {
            return Err(CheckError::Unsafe(Unsafe {
                dir: ancestor.to_path_buf(),
                why,
            }));
        }
    }
    Ok(())
}

/// What is wrong with a directory of owner `uid` and `mode`, for a target
/// running as `own_uid`; `immediate`: the socket's own directory.
fn fault(uid: u32, mode: u32, own_uid: u32, immediate: bool) -> Option<String> {
    if uid != 0 && uid != own_uid {
        return Some(format!(
            "is owned by uid {uid}, neither root nor the target's user (uid {own_uid})"
        ));
    }
    let writable = mode & WRITE_BY_OTHERS;
    if writable == 0 || (!immediate && mode & STICKY != 0) {
        return None;
    }
    let who = if writable & 0o002 != 0 {
        "every user"
    } else {
        "its group"
    };
    Some(format!("is writable by {who} (mode {:04o})", mode & 0o7777))
}

/// Why the check could not pass.
#[derive(Debug)]
pub enum CheckError {
    /// The directory is not the target's own.
    Unsafe(Unsafe),
    /// It could not be made or looked at.
    Io {
        /// The directory.
        dir: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_root_and_the_own_user_may_own_or_write_the_directory() {
        assert_eq!(fault(0, 0o40755, 1000, true), None);
        assert_eq!(fault(1000, 0o40700, 1000, true), None);
        assert!(fault(1001, 0o40700, 1000, true)
            .unwrap()
            .contains("owned by uid 1001"));
        assert!(fault(0, 0o40777, 1000, true)
            .unwrap()
            .contains("writable by every user (mode 0777)"));
        assert!(fault(0, 0o40770, 1000, true)
            .unwrap()
            .contains("writable by its group (mode 0770)"));
        // /tmp's sticky bit protects the entries below it, not the socket
        // path in it.
        assert_eq!(fault(0, 0o41777, 1000, false), None);
        assert!(fault(0, 0o41777, 1000, true).is_some());
        assert!(fault(0, 0o40777, 1000, false).is_some());
    }

    #[test]
    fn a_missing_directory_is_made_private_and_an_open_one_refused() {
        let base = tempfile::tempdir().unwrap();
        let socket = base.path().join("run").join("isoe.sock");
        check(&socket).unwrap();
        let mode = std::fs::metadata(base.path().join("run")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        match check(&socket) {
            Err(CheckError::Unsafe(u)) => {
                assert_eq!(u.dir, std::fs::canonicalize(base.path()).unwrap());
                assert!(u.why.contains("every user"), "{}", u.why);
            }
            other => panic!("{other:?}"),
        }
    }
}
