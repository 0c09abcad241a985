//! `isoe bench --multipath` run as a process, and its JSON read back, for
//! the failover tests of `multipath.rs` (file LUNs) and `gateways.rs`
//! (RBD gateways).

use serde_json::Value;
use std::path::Path;
use std::time::Duration;

use super::tools::{run_program, ToolOutput};

/// `isoe bench --multipath URLS... --verify` for `seconds`, JSON to `json`.
pub fn bench_args(urls: &[String], seconds: &str, json: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["bench".into(), "--multipath".into()];
    args.extend(urls.iter().cloned());
    for a in [
        "--bs",
        "4k",
        "--read-pct",
        "50",
        "--random-pct",
        "100",
        "--qd",
        "8",
        "--duration",
        seconds,
        "--ramp",
        "1",
        "--verify",
        "--no-progress",
        "--json",
    ] {
        args.push(a.into());
    }
    args.push(json.display().to_string());
    args
}

pub fn run_bench(args: &[String], timeout: Duration) -> ToolOutput {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_program(Path::new(env!("CARGO_BIN_EXE_isoe")), &args, &[], timeout)
}

pub fn result(json: &Path, out: &ToolOutput) -> Value {
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|e| panic!("no JSON ({e}):\n{}", out.describe()));
    let line = text.lines().next().expect("one run");
    serde_json::from_str(line).expect("a JSON object")
}

/// The number at `path`, where a segment that is a number indexes an array.
pub fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for k in path {
        cur = match k.parse::<usize>() {
            Ok(i) if cur.is_array() => &cur[i],
            _ => &cur[*k],
        };
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}
