//! `BlockStore`: a block device as media.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom};
use std::path::Path;

use crate::positional::PositionalFile;
use crate::{Store, StoreError};

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

impl Store for BlockStore {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.inner.write_at(offset, buf)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.punch_hole(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.zero_range(offset, len)
    }

    fn kind(&self) -> &'static str {
        "block"
    }
}
