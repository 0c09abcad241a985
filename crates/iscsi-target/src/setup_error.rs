//! Why the target could not be set up from its configuration: what
//! provisioning a LUN (`provision`) and claiming its file (`file_users`)
//! fail with.

use crate::identity;
use thiserror::Error;

/// Why the target could not be set up from its configuration.
#[derive(Debug, Error)]
pub enum SetupError {
    /// A LUN's store could not be opened or created.
    #[error("target {target}, LUN {lun}: {source}")]
    Store {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What the store said.
        source: isoe_store::StoreError,
    },
    /// A LUN's file or device is another process's
    /// ([`crate::file_users`]), or could not be claimed.
    #[error("target {target}, LUN {lun}: {message}")]
    Claim {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// Why, naming the other process.
        message: String,
    },
    /// A LUN's settings are not valid for the SCSI layer.
    #[error("target {target}, LUN {lun}: {source}")]
    Lun {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What is wrong.
        source: isoe_scsi::ConfigError,
    },
    /// A LUN's store holds less than one logical block.
    #[error(
        "target {target}, LUN {lun}: the store holds {size_bytes} bytes, \
         less than one block of {block_size}"
    )]
    NoBlocks {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// The store's size.
        size_bytes: u64,
        /// The LUN's logical block size.
        block_size: u32,
    },
    /// A file LUN's `size` is smaller than its file: a LUN never shrinks
    /// at start, where nothing could ask whether the tail may go.
    #[error(
        "target {target}, LUN {lun}: size {} is smaller than its file {}, {}; a file LUN \
         never shrinks at start: give the file's size (or none), and shrink it on the running \
         target with `isoe admin reload --force`",
        isoe_size::describe_bytes(*size_bytes),
        path.display(),
        isoe_size::describe_bytes(*file_bytes)
    )]
    FileLarger {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// The file.
        path: std::path::PathBuf,
        /// The configured size.
        size_bytes: u64,
        /// The file's size.
        file_bytes: u64,
    },
    /// A LUN's persisted identity could not be read or written, or its
    /// backing file vanished after it was provisioned.
    #[error("target {target}, LUN {lun}: {source}")]
    Identity {
        /// Target IQN.
        target: String,
        /// LUN number.
        lun: u16,
        /// What went wrong.
        source: identity::IdentityError,
    },
}
