//! isoe-wire: the iSCSI protocol core (RFC 7143), with no I/O.
//!
//! Owns PDU encoding and decoding (BHS, AHS, padding, CRC32C digests), text
//! keys and their negotiation, the login stages and CHAP, iSCSI names and
//! the escaping of peer text for log lines, and serial number arithmetic.
//! It never touches sockets, threads or clocks, and keeps no state but the
//! CPU's CRC features, tested once: callers feed bytes in and take bytes out.
//! `unsafe` is denied but in one place, `digest`'s call of the `crc32`
//! instruction on a CPU shown to have it.
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod bhs;
pub mod chap;
mod code;
pub mod digest;
mod fields;
pub mod frame;
pub mod keys;
pub mod login;
pub mod name;
pub mod negotiate;
pub mod pdu;
pub mod serial;
pub mod text;

pub use bhs::{padded_len, Bhs, BHS_LEN};
pub use pdu::{Lun, Opcode, ParseError, Pdu};
