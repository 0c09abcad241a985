//! The `isoe` binary's initiator commands, run as a user runs them, with a
//! timeout so that a hung command fails its test instead of the whole run.

use super::tools::{run_program, ToolOutput};
use std::path::Path;
use std::time::Duration;

/// The longest an initiator command may take in a test.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `isoe args...`.
pub fn isoe(args: &[&str]) -> ToolOutput {
    isoe_with_env(args, &[])
}

/// Runs `isoe args...` with `env` added to its environment.
pub fn isoe_with_env(args: &[&str], env: &[(&str, &str)]) -> ToolOutput {
    run_program(
        Path::new(env!("CARGO_BIN_EXE_isoe")),
        args,
        env,
        COMMAND_TIMEOUT,
    )
}

/// The exit code; panics, with the output, if the command was killed at the timeout.
pub fn exit_code(out: &ToolOutput) -> i32 {
    out.status
        .and_then(|s| s.code())
        .unwrap_or_else(|| panic!("isoe did not exit by itself:\n{}", out.describe()))
}

/// Runs `isoe args...`, asserts it succeeded, and parses its stdout as one JSON object.
pub fn isoe_json(args: &[&str]) -> serde_json::Value {
    let out = isoe(args);
    assert!(out.success(), "isoe {args:?} failed:\n{}", out.describe());
    parse_json(&out)
}

/// Stdout as one JSON object; panics, with the output, if it is not.
pub fn parse_json(out: &ToolOutput) -> serde_json::Value {
    let value: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}):\n{}", out.describe()));
    assert!(value.is_object(), "not a JSON object:\n{}", out.describe());
    value
}
