//! isoe-initiator: an iSCSI initiator on the shared `wire` core.
//!
//! Owns SendTargets discovery, login (with CHAP), sessions with several
//! connections (MC/S), the command queue up to the target's CmdSN window,
//! Data-Out by R2T, immediate and unsolicited data, Data-In reassembly,
//! keepalives, task management, logout, and ERL 0 session reinstatement
//! after a connection loss. It never interprets SCSI beyond building the
//! few CDBs its users send and parsing their answers (`cdb`); the device
//! server logic lives in the target.
//!
//! The protocol state is in [`session`], with no I/O; [`Engine`] is the
//! driver: one per thread, no locks. [`multipath`] makes one logical unit
//! of several sessions (paths) and follows ALUA across them.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cdb;
pub mod channel;
pub mod command;
pub mod config;
pub mod discovery;
pub mod engine;
pub mod error;
pub mod login;
pub mod multipath;
mod out_queue;
mod recv_buf;
pub mod sense;
pub mod session;
mod sys;
pub mod url;

pub use command::{
    describe_status, describe_status_in_words, Chunk, Command, Completion, DataPlane, Direction,
    Outcome, Residual, ScsiStatus, TaskAttr, TaskError, TaskManagement,
};
pub use config::{
    Keepalive, RetryPolicy, SessionConfig, SocketOptions, DEFAULT_INITIATOR_NAME,
    DEFAULT_SNDBUF_BYTES,
};
pub use discovery::{send_targets, DiscoveredTarget, DiscoveryConfig};
pub use engine::{Engine, EngineStats, Refused, ReloginStart};
pub use error::InitiatorError;
/// The codes an outcome carries: a task management function's answer
/// ([`Outcome::TaskManagement`]), a logout's ([`Outcome::Logout`]), a
/// Reject's reason ([`TaskError::Rejected`]).
pub use isoe_wire::pdu::{LogoutResponseCode, RejectReason, TmfResponse};
pub use multipath::{AccessState, MultipathOptions, MultipathStats, PathReport, PathStatus};
pub use url::{IscsiUrl, Portal, UrlError};
