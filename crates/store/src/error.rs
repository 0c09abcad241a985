//! Errors of the store crate.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The operating system refused an I/O call.
    #[error("{op} at offset {offset} failed: {source}")]
    Io {
        /// Which operation ("pread", "pwrite", "fdatasync", "fallocate", ...).
        op: &'static str,
        /// Byte offset the operation started at.
        offset: u64,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file system (or the user's quota) has no room for the data:
    /// ENOSPC or EDQUOT. Kept apart from [`StoreError::Io`] because a
    /// thin-provisioned logical unit answers it differently (SBC-4 4.7.3.6).
    #[error("{op} at offset {offset} failed: {source}")]
    NoSpace {
        /// Which operation ("pwrite", "fdatasync", "fallocate", ...).
        op: &'static str,
        /// Byte offset the operation started at.
        offset: u64,
        /// The underlying error (ENOSPC or EDQUOT).
        #[source]
        source: std::io::Error,
    },
    /// The range does not lie inside the store.
    #[error("range {offset}+{len} is outside the store of {size} bytes")]
    OutOfRange {
        /// First byte of the requested range.
        offset: u64,
        /// Length of the requested range in bytes.
        len: u64,
        /// Size of the store in bytes.
        size: u64,
    },
    /// The call would have waited on a device and the thread may not
    /// ([`crate::without_waiting`]); it was not made.
    #[error("{op} would wait on the device")]
    WouldBlock {
        /// Which operation ("pread", "pwrite", "fdatasync", ...).
        op: &'static str,
    },
    /// A write, unmap or write-zeroes reached a store opened read-only.
    #[error("the store is read-only")]
    ReadOnly,
    /// Opening or creating the backing file or device failed.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A memory store's chunk table could not be allocated.
    #[error("cannot allocate the chunk table of a memory store of {size_bytes} bytes")]
    OutOfMemory {
        /// The size asked for.
        size_bytes: u64,
    },
    /// A store on the network (a Ceph cluster, an RBD image) could not be
    /// reached, opened or created.
    #[error("{what}: {message}")]
    Remote {
        /// What was being opened ("rbd image rbd/disk1", ...).
        what: String,
        /// Why, with the cluster's error.
        message: String,
    },
    /// The store refuses this process for good, though the medium is
    /// reachable through others: the cluster fenced (blocklisted) this
    /// client when another gateway took the image over. The path through
    /// this target is unavailable, not the medium broken.
    #[error("{what}: {message}")]
    Unavailable {
        /// The call ("rbd_aio_write at offset 4096", ...).
        what: String,
        /// Why.
        message: String,
    },
    /// Growing a file by more than its file system has free: the blocks
    /// would not be there when the initiator writes them.
    #[error(
        "growing {path} from {current_bytes} to {wanted_bytes} bytes needs {} bytes, \
         more than the {free_bytes} bytes free on its file system",
        wanted_bytes - current_bytes
    )]
    GrowthBeyondFree {
        /// The file.
        path: PathBuf,
        /// Its size now.
        current_bytes: u64,
        /// The size asked for.
        wanted_bytes: u64,
        /// What its file system has free for this user.
        free_bytes: u64,
    },
    /// A file that does not exist yet can only be created with a size.
    #[error("{path} does not exist and no size was given to create it")]
    SizeRequired {
        /// The path given.
        path: PathBuf,
    },
}

impl StoreError {
    /// The error of an I/O call `op` at `offset` that the operating system
    /// refused with `source`: [`StoreError::NoSpace`] for ENOSPC and EDQUOT,
    /// [`StoreError::Io`] for everything else.
    pub fn io(op: &'static str, offset: u64, source: std::io::Error) -> StoreError {
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => StoreError::NoSpace { op, offset, source },
            _ => StoreError::Io { op, offset, source },
        }
    }

    /// Whether the call was not made because it would have waited.
    pub fn is_would_block(&self) -> bool {
        matches!(self, StoreError::WouldBlock { .. })
    }

    /// Whether this process may no longer reach the store, though others
    /// may ([`StoreError::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// Whether the store gave up waiting for its medium (ETIMEDOUT: a
    /// network store's bound on an operation passed), which may answer
    /// if asked again.
    pub fn is_timed_out(&self) -> bool {
        matches!(self, StoreError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::TimedOut)
    }

    /// Whether the media ran out of room (ENOSPC, EDQUOT).
    pub fn is_no_space(&self) -> bool {
        matches!(self, StoreError::NoSpace { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_space_and_quota_are_told_apart_from_other_io_errors() {
        let os = std::io::Error::from_raw_os_error;
        assert!(StoreError::io("pwrite", 0, os(libc::ENOSPC)).is_no_space());
        assert!(StoreError::io("fdatasync", 0, os(libc::EDQUOT)).is_no_space());
        let eio = StoreError::io("pwrite", 4096, os(libc::EIO));
        assert!(!eio.is_no_space());
        assert!(matches!(eio, StoreError::Io { offset: 4096, .. }));
        let message = StoreError::io("pwrite", 512, os(libc::ENOSPC)).to_string();
        assert!(
            message.starts_with("pwrite at offset 512 failed: No space left on device"),
            "{message}"
        );
    }
}
