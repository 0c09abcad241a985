//! isoe-attach: an iSCSI logical unit as a Linux block device.
//!
//! `isoe attach` logs in with isoe's initiator and serves the LU to the
//! kernel through one of two front-ends, each a [`device::BlockDevice`]:
//! ublk (`ublk_drv`: requests through io_uring, the default) and NBD (the
//! kernel's `nbd` driver on a socket pair). The serving loop turns block
//! requests into SCSI commands and SCSI status into the errno Linux's own
//! SCSI disk would give.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod device;
pub mod guard;
pub mod holders;
pub mod modules;
pub mod nbd;
pub mod scheduling;
pub mod scsi;
pub mod serve;
pub mod settings;
pub mod state;
pub mod ublk;

pub use device::{BlockDevice, Geometry, Op, Request};
