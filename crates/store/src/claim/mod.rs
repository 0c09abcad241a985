//! Claims on the files and devices under stores: how processes that serve
//! media keep each other off a file that is taken, for as long as it is.
//!
//! A claim is a lock on the file that other processes see: `flock(2)`,
//! exclusive for a medium served [`Sharing::Alone`], shared for one served
//! [`Sharing::As`] an identity, with a read lock on one byte that marks the
//! identity (`lock.rs`), so that sharers with another identity are found.
//! Both locks go with the process, however it ends.
//!
//! Within a process, the claims on one file share one open description
//! and its locks ([`Claims`]): a claim never conflicts with another of its
//! own process, so that a unit replacing another over the same file (a
//! reload) takes it over, and the file is let go when the last claim on it
//! is dropped. Conflicts inside one process are the configuration's to
//! refuse, where it can name both users.

mod holder;
mod lock;

pub use holder::Holder;

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// How a claim shares its medium with other processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Sharing {
    /// With none: the medium is one process's.
    Alone,
    /// With processes that claim it as the same identity (the logical
    /// unit every one of them presents), and with no other.
    As(String),
}

/// What another process's claim is to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// It holds the medium alone, or this one wanted it alone.
    InUse,
    /// It shares the medium as another identity.
    OtherIdentity,
}

/// Why a medium could not be claimed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// Another process holds the medium.
    #[error("{} is {}: {}", path.display(), match conflict {
        Conflict::InUse => "in use by another process",
        Conflict::OtherIdentity => "shared by another process as another identity",
    }, describe_holders(holders))]
    Busy {
        /// The path given.
        path: PathBuf,
        /// What the other claim is to this one.
        conflict: Conflict,
        /// Who holds it, as far as `/proc` tells (empty when it does not).
        holders: Vec<Holder>,
    },
    /// The file system takes no locks (a network or FUSE file system may
    /// not): the medium cannot be claimed, nor seen claimed.
    #[error("{}: its file system takes no locks: {source}", path.display())]
    Unsupported {
        /// The path given.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Opening or locking the file failed otherwise.
    #[error("cannot claim {}: {source}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// Holders in words: `pid 4242 (isoe target --config b.toml)`, or that
/// none was found.
fn describe_holders(holders: &[Holder]) -> String {
    if holders.is_empty() {
        return "its holder is not found in /proc/locks (a process of another PID \
                namespace, or one whose descriptors this user cannot read)"
            .into();
    }
    let named: Vec<String> = holders
        .iter()
        .map(|h| match h.command.is_empty() {
            true => format!("pid {}", h.pid),
            false => format!("pid {} ({})", h.pid, h.command.join(" ")),
        })
        .collect();
    named.join(", ")
}

/// Which file: its file system and inode.
type FileId = (u64, u64);

/// The claims of one process, by file. [`Claims::process`] is the
/// process's; another set acts, on the same files, as another process
/// would (for tests).
#[derive(Debug, Default)]
pub struct Claims {
    files: Mutex<HashMap<FileId, Entry>>,
}

/// One claimed file: the description whose locks other processes see, and
/// how many claims hold it, by sharing.
#[derive(Debug)]
struct Entry {
    file: File,
    sharings: Vec<(Sharing, usize)>,
}

/// A medium claimed, until dropped.
#[derive(Debug)]
pub struct Claim {
    claims: Arc<Claims>,
    id: FileId,
    sharing: Sharing,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.claims.release(self.id, &self.sharing);
    }
}

/// The error of `io` on `path`: locks the file system does not take told
/// apart.
fn io_error(path: &Path, source: std::io::Error) -> ClaimError {
    let path = path.to_owned();
    match source.raw_os_error() {
        Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS) => {
            ClaimError::Unsupported { path, source }
        }
        _ => ClaimError::Io { path, source },
    }
}

impl Claims {
    /// A set of claims of its own, which conflict with every other set's.
    pub fn new() -> Arc<Claims> {
        Arc::new(Claims::default())
    }

    /// This process's claims.
    pub fn process() -> &'static Arc<Claims> {
        static PROCESS: OnceLock<Arc<Claims>> = OnceLock::new();
        PROCESS.get_or_init(Claims::new)
    }

    /// Claims the file or device at `path` (which must exist), shared as
    /// `sharing` says, until the claim is dropped.
    pub fn claim(self: &Arc<Self>, path: &Path, sharing: Sharing) -> Result<Claim, ClaimError> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        let id = (meta.dev(), meta.ino());
        let mut files = self.files.lock_unpoisoned();
        let taken = match files.get_mut(&id) {
            Some(entry) => entry.add(&sharing),
            None => Entry::take(file, &sharing).map(|entry| {
                files.insert(id, entry);
            }),
        };
        match taken {
            Ok(()) => Ok(Claim {
                claims: Arc::clone(self),
                id,
                sharing,
            }),
            Err(Taken::Conflict(conflict)) => Err(busy(path, conflict, &meta)),
            Err(Taken::Io(source)) => Err(io_error(path, source)),
        }
    }

    /// Whether `path` could be claimed as `sharing` now, without keeping
    /// it: a file this set claims already, or that does not exist, could.
    pub fn check(self: &Arc<Self>, path: &Path, sharing: Sharing) -> Result<(), ClaimError> {
        let Ok(file) = File::open(path) else {
            return Ok(());
        };
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        let files = self.files.lock_unpoisoned();
        if files.contains_key(&(meta.dev(), meta.ino())) {
            return Ok(());
        }
        match Entry::take(file, &sharing) {
            Ok(_dropped) => Ok(()),
            Err(Taken::Conflict(conflict)) => Err(busy(path, conflict, &meta)),
            Err(Taken::Io(source)) => Err(io_error(path, source)),
        }
    }

    fn release(&self, id: FileId, sharing: &Sharing) {
        let mut files = self.files.lock_unpoisoned();
        let Some(entry) = files.get_mut(&id) else {
            debug_assert!(false, "a claim outlived its entry");
            return;
        };
        entry.remove(sharing);
        if entry.sharings.is_empty() {
            // Closing the description lets go of its every lock.
            files.remove(&id);
        }
    }
}

/// The error of a claim another process's holds off.
fn busy(path: &Path, conflict: Conflict, meta: &std::fs::Metadata) -> ClaimError {
    ClaimError::Busy {
        path: path.to_owned(),
        conflict,
        holders: holder::holders(meta),
    }
}

/// Why an entry's locks were not taken.
enum Taken {
    Conflict(Conflict),
    Io(std::io::Error),
}

impl From<std::io::Error> for Taken {
    fn from(e: std::io::Error) -> Taken {
        Taken::Io(e)
    }
}

impl Entry {
    /// The locks of a first claim on `file`.
    fn take(file: File, sharing: &Sharing) -> Result<Entry, Taken> {
        let operation = match sharing {
            Sharing::Alone => libc::LOCK_EX,
            Sharing::As(_) => libc::LOCK_SH,
        };
        if !lock::flock(&file, operation)? {
            return Err(Taken::Conflict(Conflict::InUse));
        }
        let mut entry = Entry {
            file,
            sharings: Vec::new(),
        };
        entry.add(sharing)?;
        Ok(entry)
    }

    /// One more claim, as `sharing`: the locks grow to cover it.
    fn add(&mut self, sharing: &Sharing) -> Result<(), Taken> {
        if let Some((_, count)) = self.sharings.iter_mut().find(|(s, _)| s == sharing) {
            *count += 1;
            return Ok(());
        }
        match sharing {
            Sharing::Alone if !self.sharings.is_empty() => {
                // Every claim so far shares: the lock becomes exclusive, if
                // no other process shares it. A failed conversion dropped
                // the shared lock (flock(2)); it is taken again.
                if !lock::flock(&self.file, libc::LOCK_EX)? {
                    let _ = lock::flock(&self.file, libc::LOCK_SH);
                    return Err(Taken::Conflict(Conflict::InUse));
                }
            }
            Sharing::Alone => {}
            Sharing::As(identity) => {
                // Marked first, then looked for others: of two processes
                // that mark at once, each sees the other.
                let at = lock::marker_of(identity);
                lock::set_marker(&self.file, at, libc::F_RDLCK)?;
                if lock::other_marker(&self.file, at)? {
                    lock::set_marker(&self.file, at, libc::F_UNLCK)?;
                    return Err(Taken::Conflict(Conflict::OtherIdentity));
                }
            }
        }
        self.sharings.push((sharing.clone(), 1));
        Ok(())
    }

    /// One claim less, as `sharing`: the locks shrink to what is left.
    fn remove(&mut self, sharing: &Sharing) {
        let Some(i) = self.sharings.iter().position(|(s, _)| s == sharing) else {
            debug_assert!(false, "a claim released twice");
            return;
        };
        self.sharings[i].1 -= 1;
        if self.sharings[i].1 > 0 {
            return;
        }
        self.sharings.remove(i);
        if self.sharings.is_empty() {
            return;
        }
        // Letting go cannot conflict; a failure leaves more locked, not less.
        match sharing {
            Sharing::As(identity) => {
                let _ = lock::set_marker(&self.file, lock::marker_of(identity), libc::F_UNLCK);
            }
            Sharing::Alone => {
                let _ = lock::flock(&self.file, libc::LOCK_SH);
            }
        }
    }
}
