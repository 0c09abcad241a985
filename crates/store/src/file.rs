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
        let wanted_bytes = size_bytes.unwrap_or(0).max(current_bytes);
        if wanted_bytes > current_bytes {
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

impl Positional for FileStore {
    fn positional(&self) -> &PositionalFile {
        &self.inner
    }

    fn kind(&self) -> &'static str {
        "file"
    }
}
