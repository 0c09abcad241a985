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
    /// A file that does not exist yet can only be created with a size.
    #[error("{path} does not exist and no size was given to create it")]
    SizeRequired {
        /// The path given.
        path: PathBuf,
    },
}
