//! Test support shared by the integration tests of the `isoe` binary
//! (each test file says `mod support;`).
//!
//! - [`target`]: start `isoe target` on an ephemeral port, stop it on Drop;
//! - [`client`]: a small blocking raw iSCSI initiator over a `TcpStream`,
//!   built on `isoe_wire::frame` and `isoe_wire::pdu`, that lets a test send
//!   well-formed and malformed PDUs alike;
//! - [`tools`]: find and run the libiscsi command-line tools with a timeout;
//! - [`cli`]: run the `isoe` initiator commands with a timeout, parse `--json`;
//! - [`tgt`]: a private `tgtd` (Debian's userspace target) to interoperate with.
//! - [`bench`]: `isoe bench --multipath` as a process, its JSON read back;
//! - [`ceph`]: the test cluster of the RBD tests (`scripts/ceph-cluster`);
//! - [`vm`]: the test bed's QEMU virtual machine (`scripts/vm`), powered off on Drop;
//! - [`attach`]: `isoe attach` run in that VM, the steps its tests share.
//!
//! This is test scaffolding, not the product initiator: it is blocking,
//! handles one command at a time and panics loudly when something is off.
#![allow(dead_code, unused_imports)] // each test file uses a different part of it

pub mod attach;
pub mod bench;
pub mod ceph;
pub mod cli;
pub mod client;
pub mod target;
pub mod tgt;
pub mod tools;
pub mod vm;

pub use client::{Client, ClientError, LoginParams, Received, ScsiResult};
pub use target::{Target, TargetConfig, DEFAULT_TARGET};

/// True when running under CI (the variable CI set to anything but "",
/// "false" or "0"): tests that would skip for a missing tool fail instead.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A deterministic, position-dependent byte pattern: every 512-byte block of
/// a write differs from every other, so a misplaced block is caught.
pub fn pattern(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9) | 1;
    (0..len)
        .map(|_| {
            // xorshift32: cheap and never stuck at zero.
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Describes the first difference between two buffers, for assertion messages
/// that don't dump megabytes.
pub fn first_difference(expected: &[u8], actual: &[u8]) -> Option<String> {
    if expected.len() != actual.len() {
        return Some(format!(
            "length {} expected, {} found",
            expected.len(),
            actual.len()
        ));
    }
    let at = expected.iter().zip(actual).position(|(a, b)| a != b)?;
    Some(format!(
        "first difference at byte {at} (block {} of 512 bytes): expected {:#04x}, found {:#04x}",
        at / 512,
        expected[at],
        actual[at]
    ))
}
