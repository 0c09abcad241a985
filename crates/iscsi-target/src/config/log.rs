//! The `[log]` table: how much the target logs, and in which form.
//!
//! The target only emits events (see [`crate::log`]); the `isoe` binary
//! installs the subscriber that writes them, and reads this table for it.
//! `RUST_LOG`, when set, takes the place of `level`.

use super::error::ConfigError;
use super::reader::Reader;
use isoe_config::Table;
use std::fmt;

/// The `[log]` table; every key optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// `level`: the least severe events written. `RUST_LOG` (the
    /// `tracing-subscriber` filter syntax), when set, decides instead.
    pub level: LogLevel,
    /// `timestamps`: each line starts with the time (UTC, RFC 3339). Off
    /// where the log's collector stamps lines itself (journald).
    pub timestamps: bool,
    /// `format`: one line of text per event, or one JSON object per line.
    pub format: LogFormat,
}

impl Default for LogConfig {
    /// Info and above, as text lines with timestamps.
    fn default() -> Self {
        LogConfig {
            level: LogLevel::Info,
            timestamps: true,
            format: LogFormat::Text,
        }
    }
}

/// `[log] level`, from the most to the least severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// `"error"`: what failed (store errors, a worker that stopped).
    Error,
    /// `"warn"`: refusals, dropped connections, resets.
    Warn,
    /// `"info"`, the default: logins, logouts, closes, configuration changes.
    Info,
    /// `"debug"`: negotiated parameters, connections before login, ABORT TASK.
    Debug,
    /// `"trace"`: everything.
    Trace,
}

impl LogLevel {
    /// Every level, as written in the configuration, most severe first.
    pub const NAMES: [&'static str; 5] = ["error", "warn", "info", "debug", "trace"];

    /// The level as written in the configuration (and in `RUST_LOG`).
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[log] format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `"text"`: time, level, module, message, then the fields as `key=value`.
    Text,
    /// `"json"`: one JSON object per line, the fields under `"fields"`.
    Json,
}

pub(super) const LOG_KEYS: &[&str] = &["level", "timestamps", "format"];

/// Reads the `[log]` table; a key left out keeps its default.
pub(super) fn read_log(r: &Reader, mut t: Table) -> Result<LogConfig, ConfigError> {
    let mut log = LogConfig::default();
    if let Some(f) = t.take("level") {
        let name = r.choice(&f, &LogLevel::NAMES)?;
        log.level = [
            LogLevel::Error,
            LogLevel::Warn,
            LogLevel::Info,
            LogLevel::Debug,
            LogLevel::Trace,
        ]
        .into_iter()
        .find(|l| l.as_str() == name)
        .expect("choice returns one of the names");
    }
    if let Some(f) = t.take("timestamps") {
        log.timestamps = r.bool(&f)?;
    }
    if let Some(f) = t.take("format") {
        log.format = match r.choice(&f, &["text", "json"])? {
            "json" => LogFormat::Json,
            _ => LogFormat::Text,
        };
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok(log)
}
