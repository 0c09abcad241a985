//! Why the test bed cannot be used, or a program cannot be put on one of
//! its hosts: errors of their own file, so that the lab's error, which
//! carries them, imports nothing that imports it.

use crate::attach_device::AttachError;
use crate::hostknobs::KnobsError;
use crate::peers::fio::FioUnusable;
use crate::ssh::HostError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a program could not be put on a host.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// This machine has no fio with libiscsi to copy.
    #[error("fio with libiscsi on this machine: {0}")]
    LocalFio(#[source] FioUnusable),
    /// The program could not be read here.
    #[error("reading {}: {source}", path.display())]
    Reading {
        /// It.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The program could not be written there.
    #[error("copying {} to {host}: {source}", path.display())]
    Copying {
        /// It.
        path: PathBuf,
        /// The host.
        host: String,
        /// Why.
        source: Box<HostError>,
    },
}

/// Why the test bed cannot be used, or a case cannot run on it.
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// A host stopped answering: [`Bed::gone`](super::Bed::gone)'s words.
    #[error("{0}")]
    Gone(String),
    /// The SSH control directory could not be made.
    #[error("making {}: {source}", dir.display())]
    SshDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The test bed file names a host that is not one.
    #[error("{testbed}: {source}")]
    HostUrl {
        /// The test bed file.
        testbed: String,
        /// Why.
        source: Box<HostError>,
    },
    /// A host's work directory could not be made.
    #[error("the test bed's host {host} cannot be used: {source}")]
    WorkDir {
        /// The host.
        host: String,
        /// Why.
        source: Box<HostError>,
    },
    /// The interfaces' state could not be read first.
    #[error("the test bed's interfaces: {0}")]
    Interfaces(#[source] KnobsError),
    /// A program could not be put on a host.
    #[error("{0}")]
    Place(#[from] Arc<PlaceError>),
    /// fio with libiscsi on the initiator host could not be asked its engines.
    #[error("{fio} on {host}: {source}")]
    FioEngines {
        /// The program.
        fio: String,
        /// The host.
        host: String,
        /// Why.
        source: Box<HostError>,
    },
    /// fio on the initiator host has no libiscsi engine.
    #[error("{fio} on {host} does not list the libiscsi engine")]
    FioNoLibiscsi {
        /// The program.
        fio: String,
        /// The host.
        host: String,
    },
    /// A command or file on a host failed (LIO, the target's
    /// configuration, a program that would not start).
    #[error("{0}")]
    Host(#[source] Box<HostError>),
    /// A log file of this machine could not be made.
    #[error("{}: {source}", path.display())]
    Log {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `isoe target` did not listen in time.
    #[error(
        "case {case}: isoe target on {host} did not listen on {listen} within {within_s} s: {said}"
    )]
    NotListening {
        /// The case.
        case: String,
        /// The target host.
        host: String,
        /// The addresses, comma-separated.
        listen: String,
        /// How long it had, s.
        within_s: u64,
        /// The last of its stderr.
        said: String,
    },
    /// The kernel initiator has no iface of the case's transport.
    #[error("no {transport} iface on {host}")]
    NoIface {
        /// The transport.
        transport: &'static str,
        /// The initiator host.
        host: String,
    },
    /// The kernel initiator could not log in.
    #[error("the kernel initiator's login: {0}")]
    KernelLogin(#[source] Box<BedError>),
    /// `isoe attach` made no device.
    #[error("{0}")]
    Attach(#[source] Box<AttachError>),
    /// A run did not end in time.
    #[error("{program} did not finish within {} s", limit.as_secs())]
    RunHung {
        /// What ran.
        program: String,
        /// How long it was given.
        limit: Duration,
    },
}
