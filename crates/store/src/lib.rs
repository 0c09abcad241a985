//! isoe-store: the media behind a logical unit.
//!
//! Owns byte-addressed backing storage (memory, regular file, block device)
//! with read, write, flush, unmap, write-zeroes and allocation (hole) queries.
//! Knows nothing of SCSI, iSCSI or sockets: offsets and lengths are bytes,
//! and range checks are against the store's size only.
//!
//! [`FailingStore`] wraps any store and fails its operations after a
//! countdown, with the errors the operating system gives (EIO, ENOSPC,
//! EDQUOT), for tests of the layers above.

mod block;
mod error;
mod failing;
mod file;
mod memory;
mod nowait;
mod positional;
mod range;
mod store;

pub use block::BlockStore;
pub use error::StoreError;
pub use failing::{FailingStore, Fault, Ops};
pub use file::FileStore;
pub use memory::MemoryStore;
pub use nowait::without_waiting;
pub use store::{Extent, Store};
