//! Why a configuration was refused: every message names the file, the
//! 1-based line and the key path.

use std::path::Path;

/// A configuration that could not be read or is not acceptable; the message
/// names the file, the line and the key. The one error of every file people
/// write for isoe ([`isoe_config::FileError`]).
pub type ConfigError = isoe_config::FileError;

/// How errors name a configuration read from `source`: the path as given,
/// or `<config>` for text with no file.
pub fn file_label(source: Option<&Path>) -> String {
    source.map_or_else(|| "<config>".to_string(), |p| p.display().to_string())
}
