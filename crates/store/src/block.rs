//! `BlockStore`: a block device as media.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom};
use std::path::Path;

use crate::positional::{Positional, PositionalFile};
use crate::StoreError;

/// A block device (or any seekable file used as-is) as media. Its size is
/// found by seeking to the end, which block devices report exactly; unmap is
/// a fallocate punch-hole, which Linux turns into a discard.
#[derive(Debug)]
pub struct BlockStore {
    inner: PositionalFile,
}

impl BlockStore {
    /// Opens the device at `path`, for reading only if `read_only`.
    pub fn open(path: &Path, read_only: bool) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)
            .map_err(open_error)?;
        let size_bytes = file.seek(SeekFrom::End(0)).map_err(open_error)?;
        Ok(Self {
            inner: PositionalFile::new(file, size_bytes, read_only),
        })
    }
}

impl BlockStore {
    /// The store, holding `claim` on its file for as long as it lives
    /// (see [`crate::Claims`]).
    pub fn with_claim(mut self, claim: crate::Claim) -> Self {
        self.inner.hold(claim);
        self
    }
}

impl Positional for BlockStore {
    fn positional(&self) -> &PositionalFile {
        &self.inner
    }

    fn kind(&self) -> &'static str {
        "block"
    }
}
