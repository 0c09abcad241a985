//! isoe-target: the iSCSI target.
//!
//! Owns portals, sessions and connections, login and authorization policy,
//! the TOML configuration and the target's I/O driver. Protocol encoding
//! lives in `isoe-wire`, SCSI semantics in `isoe-scsi`, media in `isoe-store`.
//! No `unsafe` here: the one piece the datapath needs (the uninitialized
//! stack array of a vectored write's slices) is `isoe-iovec`'s safe API.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![forbid(unsafe_code)]

pub mod admin;
pub mod admission;
pub mod budget;
pub mod buffer_pool;
pub mod config;
pub mod connection;
pub mod discovery;
pub mod driver;
pub mod file_users;
mod gateways;
pub mod identity;
pub mod log;
pub mod lun_table;
pub mod memory_driver;
pub mod metrics;
pub mod output;
pub mod policy;
pub mod port_holder;
pub mod provision;
pub mod registry;
pub mod session;
pub mod setup_error;
pub mod target;
pub mod task_sets;
pub mod write_task;

pub use config::Config;
pub use driver::{start, Running, StartError};
pub use registry::Server;
