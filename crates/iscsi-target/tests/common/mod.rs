//! What the configuration tests share: parsing a text that must be refused,
//! and checking that the error names the file, the line and the key.

use isoe_target::config::{Config, ConfigError};
use std::path::Path;

/// The error for `text`, read as `isoe.toml`; panics if it is accepted.
pub fn error(text: &str) -> ConfigError {
    match Config::parse(text, Some(Path::new("isoe.toml"))) {
        Ok(config) => panic!("accepted:\n{text}\n{config:?}"),
        Err(e) => e,
    }
}

/// Checks that `text` is refused at `line`, `key`, with a message containing
/// `needle`; returns the error as shown.
pub fn refused_at(text: &str, line: usize, key: &str, needle: &str) -> String {
    let err = error(text);
    let shown = err.to_string();
    match &err {
        ConfigError::Invalid {
            file,
            line: l,
            key: k,
            message,
        } => {
            assert_eq!(
                (file.as_str(), *l, k.as_str()),
                ("isoe.toml", line, key),
                "{shown}\n{text}"
            );
            assert!(message.contains(needle), "{shown:?} lacks {needle:?}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    shown
}
