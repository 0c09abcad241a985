//! Why a counter could not be read from `/proc`.

/// A `/proc` file could not be read, or its text was not in the shape the
/// kernel documents (proc(5)). Parsers return this instead of panicking: a
/// truncated or unfamiliar file must not take a benchmark down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// Reading the file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line or field the parser needs is absent.
    #[error("{file}: {what} not found")]
    Missing {
        /// Which file's text was parsed (e.g. "/proc/stat").
        file: &'static str,
        /// What was looked for (e.g. "the aggregate \"cpu \" line").
        what: String,
    },
    /// A field that must be an unsigned integer is not.
    #[error("{file}: {field} is {text:?}, not an unsigned integer")]
    BadNumber {
        /// Which file's text was parsed.
        file: &'static str,
        /// The field's name.
        field: String,
        /// The text found instead.
        text: String,
    },
}

impl ProcError {
    /// Reads `path` to a string, naming the path in the error.
    pub(crate) fn read_to_string(path: &str) -> Result<String, ProcError> {
        std::fs::read_to_string(path).map_err(|source| ProcError::Io {
            path: path.to_string(),
            source,
        })
    }

    /// Parses `text` as a `u64` counter, naming the field in the error.
    pub(crate) fn parse_u64(file: &'static str, field: &str, text: &str) -> Result<u64, ProcError> {
        text.parse::<u64>().map_err(|_| ProcError::BadNumber {
            file,
            field: field.to_string(),
            text: text.to_string(),
        })
    }

    /// A `Missing` error.
    pub(crate) fn missing(file: &'static str, what: impl Into<String>) -> ProcError {
        ProcError::Missing {
            file,
            what: what.into(),
        }
    }
}
