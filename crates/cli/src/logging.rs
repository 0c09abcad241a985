//! The log of `isoe target`: the one `tracing` subscriber of the process.
//!
//! The library crates emit events (`isoe_target::log` lists them); this
//! writes them to stderr, one line each: the time (UTC, RFC 3339), the
//! level, the module, the message, then the fields as `key=value`, or one
//! JSON object per line with `[log] format = "json"`. `RUST_LOG`, when set,
//! is the filter (`tracing-subscriber`'s syntax, `isoe_target=debug,info`);
//! otherwise `[log] level` is.

use isoe_target::config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

/// The environment variable whose filter wins over `[log] level`.
pub const RUST_LOG: &str = "RUST_LOG";

/// The filter of events: `rust_log` (the value of `RUST_LOG`) when it is
/// set and not blank, else the configuration's level. A `RUST_LOG` that
/// does not parse is an error that quotes it.
pub fn filter(rust_log: Option<&str>, config: &LogConfig) -> Result<EnvFilter, String> {
    match rust_log.map(str::trim).filter(|d| !d.is_empty()) {
        Some(directives) => EnvFilter::builder()
            .parse(directives)
            .map_err(|e| format!("{RUST_LOG}={directives:?}: {e}")),
        None => Ok(EnvFilter::new(config.level.as_str())),
    }
}

/// Installs the subscriber for the rest of the process; `RUST_LOG` is read
/// from the environment.
pub fn install(config: &LogConfig) -> Result<(), String> {
    let rust_log = match std::env::var(RUST_LOG) {
        Ok(value) => Some(value),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(format!("{RUST_LOG} is not valid UTF-8"))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(rust_log.as_deref(), config)?)
        .with_writer(std::io::stderr);
    let installed = match (config.format, config.timestamps) {
        (LogFormat::Text, true) => builder.try_init(),
        (LogFormat::Text, false) => builder.without_time().try_init(),
        (LogFormat::Json, true) => builder.json().try_init(),
        (LogFormat::Json, false) => builder.json().without_time().try_init(),
    };
    installed.map_err(|e| format!("cannot set up the log: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_target::config::LogLevel;
    use tracing_subscriber::filter::LevelFilter;

    fn level(level: LogLevel) -> LogConfig {
        LogConfig {
            level,
            ..LogConfig::default()
        }
    }

    fn most_verbose(rust_log: Option<&str>, config: &LogConfig) -> Option<LevelFilter> {
        filter(rust_log, config).expect("a filter").max_level_hint()
    }

    #[test]
    fn the_configured_level_holds_without_rust_log() {
        for (configured, expected) in [
            (LogLevel::Error, LevelFilter::ERROR),
            (LogLevel::Warn, LevelFilter::WARN),
            (LogLevel::Info, LevelFilter::INFO),
            (LogLevel::Debug, LevelFilter::DEBUG),
            (LogLevel::Trace, LevelFilter::TRACE),
        ] {
            assert_eq!(
                most_verbose(None, &level(configured)),
                Some(expected),
                "{configured}"
            );
        }
        assert_eq!(
            most_verbose(None, &LogConfig::default()),
            Some(LevelFilter::INFO),
            "info by default"
        );
        // Set but blank is as good as unset.
        assert_eq!(
            most_verbose(Some("  "), &level(LogLevel::Warn)),
            Some(LevelFilter::WARN)
        );
    }

    #[test]
    fn rust_log_wins_over_the_configured_level() {
        assert_eq!(
            most_verbose(Some("trace"), &level(LogLevel::Error)),
            Some(LevelFilter::TRACE)
        );
        assert_eq!(
            most_verbose(Some("error"), &level(LogLevel::Debug)),
            Some(LevelFilter::ERROR),
            "quieter too"
        );
        assert_eq!(
            most_verbose(
                Some("warn,isoe_target::connection=debug"),
                &level(LogLevel::Error)
            ),
            Some(LevelFilter::DEBUG),
            "per module"
        );
    }

    #[test]
    fn a_rust_log_that_does_not_parse_is_an_error_quoting_it() {
        let error =
            filter(Some("isoe_target=loudest"), &LogConfig::default()).expect_err("no such level");
        assert!(
            error.starts_with("RUST_LOG=\"isoe_target=loudest\": "),
            "{error}"
        );
    }
}
