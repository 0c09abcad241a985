//! The `[log]` table: its defaults, each key, and errors that name the
//! file, the line and the key.

use isoe_target::config::{Config, LogConfig, LogFormat, LogLevel};

mod common;
use common::{error, refused_at};

const TARGET: &str = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";

fn log_of(table: &str) -> LogConfig {
    Config::parse(&format!("{TARGET}[log]\n{table}"), None)
        .unwrap_or_else(|e| panic!("{table}: {e}"))
        .log
}

#[test]
fn without_the_table_the_log_is_info_text_with_timestamps() {
    let expected = LogConfig {
        level: LogLevel::Info,
        timestamps: true,
        format: LogFormat::Text,
    };
    assert_eq!(LogConfig::default(), expected);
    assert_eq!(Config::parse(TARGET, None).unwrap().log, expected);
    assert_eq!(Config::embedded_default().log, expected);
    assert_eq!(log_of(""), expected, "an empty table keeps the defaults");
}

#[test]
fn each_key_is_read() {
    for (name, level) in [
        ("error", LogLevel::Error),
        ("warn", LogLevel::Warn),
        ("info", LogLevel::Info),
        ("debug", LogLevel::Debug),
        ("trace", LogLevel::Trace),
    ] {
        assert_eq!(log_of(&format!("level = \"{name}\"\n")).level, level);
        assert_eq!(level.as_str(), name);
    }
    assert!(!log_of("timestamps = false\n").timestamps);
    assert_eq!(log_of("format = \"json\"\n").format, LogFormat::Json);
    assert_eq!(log_of("format = \"text\"\n").format, LogFormat::Text);
}

#[test]
fn a_bad_level_names_the_file_the_line_and_the_key() {
    let text = format!("{TARGET}\n[log]\nlevel = \"loud\"\n");
    assert_eq!(
        error(&text).to_string(),
        "isoe.toml:5: log.level: expected one of \"error\", \"warn\", \"info\", \"debug\", \
         \"trace\", found \"loud\""
    );
    // Levels are lower case, as RUST_LOG writes them; no guessing.
    refused_at(
        &format!("[log]\nlevel = \"INFO\"\n{TARGET}"),
        2,
        "log.level",
        "found \"INFO\"",
    );
    refused_at(
        &format!("[log]\nlevel = 3\n{TARGET}"),
        2,
        "log.level",
        "expected one of",
    );
}

#[test]
fn other_bad_values_and_unknown_keys_are_refused_at_their_line() {
    refused_at(
        &format!("{TARGET}[log]\ntimestamps = \"no\"\n"),
        4,
        "log.timestamps",
        "expected true or false",
    );
    refused_at(
        &format!("{TARGET}[log]\nformat = \"xml\"\n"),
        4,
        "log.format",
        "expected one of \"text\", \"json\", found \"xml\"",
    );
    refused_at(
        &format!("{TARGET}[log]\nlevl = \"debug\"\n"),
        4,
        "log.levl",
        "did you mean `level`?",
    );
    refused_at(
        &format!("log = \"debug\"\n{TARGET}"),
        1,
        "log",
        "expected a table",
    );
}

#[test]
fn the_example_documents_the_log_defaults() {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    assert!(text.contains("\n[log]\n"), "the example shows [log]");
    let config = Config::load(&example).unwrap();
    assert_eq!(config.log, LogConfig::default());
}
