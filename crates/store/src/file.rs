//! `FileStore`: a regular (normally sparse) file as media.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::positional::{Positional, PositionalFile};
use crate::StoreError;

/// A regular file as media, accessed with positional I/O; unmapped ranges
/// become holes.
#[derive(Debug)]
pub struct FileStore {
    inner: PositionalFile,
}

impl FileStore {
    /// Opens, creating a sparse file of size_bytes if absent (size_bytes
    /// required then); an existing file keeps its size unless size_bytes is
    /// larger (grow).
    pub fn open(path: &Path, size_bytes: Option<u64>) -> Result<Self, StoreError> {
        Self::open_sized(path, size_bytes, false)
    }

    /// Opens `path` to present exactly `size_bytes`: a smaller file grows
    /// as with [`FileStore::open`]; a larger one keeps its tail beyond
    /// `size_bytes`, unread and unwritten, for the caller to cut off once
    /// no other store reads it (a forced shrink).
    pub fn open_exact(path: &Path, size_bytes: u64) -> Result<Self, StoreError> {
        Self::open_sized(path, Some(size_bytes), true)
    }

    fn open_sized(path: &Path, size_bytes: Option<u64>, exact: bool) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let exists = path.exists();
        if !exists && size_bytes.is_none() {
            return Err(StoreError::SizeRequired {
                path: path.to_owned(),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(open_error)?;
        let current_bytes = file.metadata().map_err(open_error)?.len();
        let wanted_bytes = match size_bytes {
            Some(size) if exact => size,
            _ => size_bytes.unwrap_or(0).max(current_bytes),
        };
        if wanted_bytes > current_bytes {
            // A hole costs nothing now, but every block of it must be there
            // when an initiator writes it.
            let free_bytes = free_bytes(&file).map_err(open_error)?;
            if exists && wanted_bytes - current_bytes > free_bytes {
                return Err(StoreError::GrowthBeyondFree {
                    path: path.to_owned(),
                    current_bytes,
                    wanted_bytes,
                    free_bytes,
                });
            }
            // set_len extends with a hole: no blocks are allocated.
            file.set_len(wanted_bytes).map_err(open_error)?;
        }
        Ok(Self {
            inner: PositionalFile::new(file, wanted_bytes, false),
        })
    }

    /// Opens an existing file for reading only; its size is the file's size.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(open_error)?;
        let size_bytes = file.metadata().map_err(open_error)?.len();
        Ok(Self {
            inner: PositionalFile::new(file, size_bytes, true),
        })
    }
}

/// Bytes free for an unprivileged user on `file`'s file system.
fn free_bytes(file: &File) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: the descriptor is open for the call, and statvfs fills
    // `stat` whole when it returns 0.
    let stat = unsafe {
        if libc::fstatvfs(file.as_raw_fd(), stat.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        stat.assume_init()
    };
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

impl FileStore {
    /// The store, holding `claim` on its file for as long as it lives
    /// (see [`crate::Claims`]).
    pub fn with_claim(mut self, claim: crate::Claim) -> Self {
        self.inner.hold(claim);
        self
    }
}

impl Positional for FileStore {
    fn positional(&self) -> &PositionalFile {
        &self.inner
    }

    fn kind(&self) -> &'static str {
        "file"
    }
}
