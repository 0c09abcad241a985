//! Why a configuration was refused: every message names the file, the
//! 1-based line and the key path.

use std::io;
use std::path::{Path, PathBuf};

/// A configuration that could not be read or is not acceptable; the message
/// names the file, the line and the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The text is not well-formed TOML.
    #[error("{file}:{line}:{column}: TOML syntax error: {message}")]
    Syntax {
        /// The file as given, or `<config>` for text with no file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What the TOML parser said.
        message: String,
    },
    /// Well-formed TOML with a key or value isoe does not accept.
    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        /// The file as given, or `<config>` for text with no file.
        file: String,
        /// 1-based line of the key (or of the table that lacks it).
        line: usize,
        /// Path of the key, e.g. `target[1].lun[0].size` (indices from 0).
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

impl ConfigError {
    /// The 1-based line the error points at, if it points into a file.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { line, .. } | ConfigError::Invalid { line, .. } => Some(*line),
        }
    }
}

// Syntax and Invalid are the problems the shared reader finds.
isoe_config::impl_read_error!(ConfigError);

/// How errors name a configuration read from `source`: the path as given,
/// or `<config>` for text with no file.
pub fn file_label(source: Option<&Path>) -> String {
    source.map_or_else(|| "<config>".to_string(), |p| p.display().to_string())
}
