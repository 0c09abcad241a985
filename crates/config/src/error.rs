//! The one error a hand-written file can give whatever its schema: it could
//! not be read, it is not TOML, or a key or value is not accepted. Each
//! names the file, the 1-based line and the key path; a schema whose
//! errors have kinds of their own wraps it.

use crate::reader::ReadError;
use std::io;
use std::path::PathBuf;

/// A file that could not be read or accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
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
        /// The file as given, or a name such as `<config>` for text with no
        /// file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What the TOML parser said.
        message: String,
    },
    /// Well-formed TOML with a key or value the schema does not accept.
    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        /// The file as given, or a name such as `<config>`.
        file: String,
        /// 1-based line of the key (or of the table that lacks it).
        line: usize,
        /// Path of the key, e.g. `target[1].lun[0].size` (indices from 0).
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

impl FileError {
    /// The 1-based line the error points at, if it points into a file.
    pub fn line(&self) -> Option<usize> {
        match self {
            FileError::Read { .. } => None,
            FileError::Syntax { line, .. } | FileError::Invalid { line, .. } => Some(*line),
        }
    }
}

impl ReadError for FileError {
    fn syntax(file: String, line: usize, column: usize, message: String) -> Self {
        FileError::Syntax {
            file,
            line,
            column,
            message,
        }
    }

    fn invalid(file: String, line: usize, key: String, message: String) -> Self {
        FileError::Invalid {
            file,
            line,
            key,
            message,
        }
    }
}
