//! Why a plan could not run: the lab's one error, whichever part failed.

use thiserror::Error;

/// Why a plan could not run.
#[derive(Debug, Error)]
pub enum LabError {
    /// Building or removing a topology failed.
    #[error("topology: {0}")]
    Topology(String),
    /// The test bed could not be used.
    #[error("topology: {0}")]
    TestBed(#[source] Box<crate::bed::error::BedError>),
    /// A case names a topology there is none of.
    #[error("topology: case {case}: {source}")]
    UnknownTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::UnknownKind,
    },
    /// A case's topology could not be built.
    #[error("topology: case {case}: {source}")]
    CaseTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::TopologyError,
    },
    /// A case's topology could not be removed.
    #[error("topology: removing the topology of case {case}: {source}")]
    RemovingTopology {
        /// The case.
        case: String,
        /// Why.
        source: crate::topology::TopologyError,
    },
    /// tgt did not start for a case.
    #[error("target: case {case}: {source}")]
    Tgt {
        /// The case.
        case: String,
        /// Why.
        source: Box<crate::peers::tgt::TgtError>,
    },
    /// `isoe target` could not be started.
    #[error("target: cannot start {}: {source}", isoe.display())]
    TargetSpawn {
        /// The isoe binary.
        isoe: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The floor's server could not be started.
    #[error("target: case {case}: cannot start {} netprobe --serve: {source}", isoe.display())]
    FloorSpawn {
        /// The case.
        case: String,
        /// The isoe binary.
        isoe: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The target did not start.
    #[error("target: {0}")]
    Target(String),
    /// A bench run failed in a way that is not a measurement.
    #[error("bench: {0}")]
    Bench(String),
    /// Files in the output directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The output directory holds results of another plan.
    #[error("{0}")]
    Resume(String),
    /// The report, or what it is drawn from, could not be written or read
    /// back.
    #[error("report: {0}")]
    Report(#[from] isoe_report::stored::StoredError),
}
