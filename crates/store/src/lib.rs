//! isoe-store: the media behind a logical unit.
//!
//! Owns byte-addressed backing storage (memory, regular file, block device)
//! with read, write, flush, unmap, write-zeroes and allocation (hole) queries.
//! Knows nothing of SCSI, iSCSI or sockets: offsets and lengths are bytes,
//! and range checks are against the store's size only.
//!
//! A store on the network (Ceph RBD, in `isoe-rbd`) also offers
//! [`AsyncStore`]: reads, writes and flushes started now and completed
//! later, many at once.
//!
//! A file or device store may hold a [`Claim`] on its file: a lock other
//! processes see, so that two processes do not serve one file as two
//! media ([`Claims`]).
//!
//! [`FailingStore`] wraps any store and fails its operations after a
//! countdown, with the errors the operating system gives (EIO, ENOSPC,
//! EDQUOT), for tests of the layers above.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod asynchronous;
mod block;
mod claim;
mod error;
mod failing;
mod file;
mod huge_pages;
mod memory;
mod nowait;
mod positional;
mod range;
mod store;

pub use asynchronous::{AsyncStore, Io, IoDone, IoKind};
pub use block::BlockStore;
pub use claim::{Claim, ClaimError, Claims, Conflict, Holder, Sharing};
pub use error::StoreError;
pub use failing::{FailingStore, Fault, Ops};
pub use file::FileStore;
pub use memory::{Lent, MemoryStore, CRC_PAGE_BYTES};
pub use nowait::{refuse_to_wait, without_waiting};
pub use store::{Extent, Store};
