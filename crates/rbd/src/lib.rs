//! isoe-rbd: Ceph RBD images as the media of logical units.
//!
//! [`RbdStore`] implements [`isoe_store::Store`] with librbd's blocking
//! calls (for deallocation, write-zeroes, compare-and-write and the
//! allocation map, which the target runs on threads that may wait) and
//! [`isoe_store::AsyncStore`] with its asynchronous reads, writes and
//! flushes, many in flight, each completion called on librbd's own thread.
//!
//! librbd and librados are loaded when the first image is opened
//! (`ffi.rs`), not linked: isoe builds and runs on machines without Ceph.
//! One connection per cluster and client serves every image of the process
//! (`cluster.rs`).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod channel;
mod cluster;
mod fence;
mod ffi;
mod image;

pub use channel::{Channel, Handler, Notified, Reply, Written};
pub use cluster::{connections, ClusterSpec};
pub use image::{RbdSpec, RbdStore};

use std::ffi::c_char;
use std::path::PathBuf;

/// Why an image could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RbdError {
    /// librados or librbd could not be loaded, or lacks a function.
    #[error("{0}")]
    Library(String),
    /// The cluster could not be reached with this configuration.
    #[error("ceph cluster of {}: {message}", conf.display())]
    Cluster {
        /// The configuration file.
        conf: PathBuf,
        /// What failed, with the cluster's error.
        message: String,
    },
    /// The pool or the image could not be opened or created.
    #[error("rbd image {name}: {message}")]
    Image {
        /// `pool/image`.
        name: String,
        /// What failed, with the cluster's error.
        message: String,
    },
    /// A name holds a NUL character.
    #[error("{0:?} holds a NUL character")]
    Name(String),
}

impl From<RbdError> for isoe_store::StoreError {
    fn from(error: RbdError) -> Self {
        let what = match &error {
            RbdError::Image { name, .. } => format!("rbd image {name}"),
            RbdError::Cluster { conf, .. } => format!("ceph cluster of {}", conf.display()),
            RbdError::Library(_) | RbdError::Name(_) => "rbd".to_string(),
        };
        let message = match error {
            RbdError::Image { message, .. } | RbdError::Cluster { message, .. } => message,
            other => other.to_string(),
        };
        isoe_store::StoreError::Remote { what, message }
    }
}

/// A negative errno as text: "No such file or directory (ENOENT)".
pub(crate) fn errno_text(code: i32) -> String {
    let error = std::io::Error::from_raw_os_error(-code);
    format!("{error}")
}

/// The text of a NUL-terminated buffer a C function filled.
pub(crate) fn c_buffer_text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
