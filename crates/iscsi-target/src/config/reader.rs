//! The reader of the target's configuration: the shared reader of
//! [`isoe_config`] and the values only this schema has, sizes and paths
//! relative to the file.

use super::error::{file_label, ConfigError};
use isoe_config::{Field, Node};
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// The shared reader ([`isoe_config::Reader`]: lines, key paths, typed
/// values, [`ConfigError`]s) and what only the target's schema needs: where
/// relative paths start.
pub(super) struct Reader {
    shared: isoe_config::Reader<ConfigError>,
    /// The configuration file's directory, which relative paths start from;
    /// `None` for text with no file.
    pub(super) base_dir: Option<PathBuf>,
}

impl Deref for Reader {
    type Target = isoe_config::Reader<ConfigError>;

    fn deref(&self) -> &Self::Target {
        &self.shared
    }
}

impl Reader {
    pub(super) fn new(text: &str, source: Option<&Path>) -> Reader {
        Reader {
            shared: isoe_config::Reader::new(text, file_label(source)),
            base_dir: source.map(|p| p.parent().unwrap_or(Path::new("")).to_path_buf()),
        }
    }

    /// A size in bytes: an integer or a string with a unit (the grammar of
    /// [`isoe_size`]).
    pub(super) fn size(&self, field: &Field) -> Result<u64, ConfigError> {
        let bytes = match &field.node {
            Node::Int(v) if *v > 0 => *v as u64,
            Node::Int(v) => {
                return Err(self.at(field, format!("a size must be positive, found {v}")))
            }
            Node::Str(s) => isoe_size::parse_bytes(s).map_err(|e| self.at(field, e.to_string()))?,
            _ => return Err(self.wrong_type(field, "a size like \"10GiB\" or a number of bytes")),
        };
        if bytes == 0 {
            return Err(self.at(field, "a size must be positive"));
        }
        Ok(bytes)
    }

    /// A non-empty path, resolved against the configuration file's directory.
    pub(super) fn path(&self, field: &Field) -> Result<PathBuf, ConfigError> {
        let text = self.string(field)?;
        if text.is_empty() {
            return Err(self.at(field, "expected a path, found an empty string"));
        }
        let path = PathBuf::from(text);
        Ok(match &self.base_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        })
    }
}
