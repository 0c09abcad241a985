//! isoe-scsi: the SCSI device server (SPC-5 primary commands, SBC-4 block
//! commands) for isoe's logical units.
//!
//! Owns CDB decoding, status and sense, and the behaviour of a direct-access
//! block device: INQUIRY and its VPD pages, mode pages, READ CAPACITY, the
//! READ/WRITE/VERIFY family, cache and provisioning commands, REPORT LUNS,
//! REPORT SUPPORTED OPERATION CODES, and implicit ALUA (REPORT TARGET PORT
//! GROUPS, the access states of the target's ports). Media come from
//! `isoe-store`.
//! Never touches iSCSI PDUs or sockets: the transport hands in a CDB and
//! Data-Out bytes and takes back a `Completion` and Data-In bytes.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod alua;
pub mod attention;
mod background;
mod block_cdb;
mod capacity;
pub mod cdb;
mod compare_and_write;
mod completion;
mod config;
mod copy_manager;
mod copy_results;
mod data_in;
mod defect_data;
mod dispatch;
mod extended_copy;
mod get_lba_status;
mod inquiry;
pub mod lba;
pub mod limits;
mod logical_unit;
mod media;
mod medium_io;
pub mod mode;
mod mode_select;
mod mode_sense;
mod nexus;
mod no_lun;
pub mod opcode;
mod orwrite;
mod prefetch;
mod prevent_allow;
mod range_lock;
mod read_write;
mod report_luns;
mod request_sense;
pub mod reservation;
mod route;
mod sanitize;
mod sanitize_state;
pub mod sense;
mod start_stop;
mod status;
pub mod supported_opcodes;
mod sync_cache;
mod transfer;
mod unmap;
mod verify;
pub mod vpd;
mod write_atomic;
mod write_same;

pub use alua::{AccessState, ExplicitAlua, PortGroup, PortGroups};
pub use background::{copy_lent, Background, Outcome};
pub use completion::Completion;
pub use config::{ConfigError, LunConfig};
pub use logical_unit::{LogicalUnit, NoUnits, TaskSets, UnitDirectory};
pub use medium_io::MediumIo;
pub use nexus::Nexus;
pub use no_lun::execute_no_lun;
pub use report_luns::{encode_lun, report_luns};
pub use reservation::UnitPeers;
pub use route::{route, Luns, PageCrcs, PageDigests, Request, Residual, PAGE_CRCS_MAX};
pub use sense::{FieldPointer, Sense};
pub use status::Status;
pub use transfer::DataDirection;
