//! `isoe bench --fill`: the arguments to a [`FillConfig`], and what a fill
//! prints: its line for people and, with `--json`, its one JSON line.

use super::{open_json, run_error_text, template, url_chap, BenchArgs};
use isoe_bench::fill::{self, FillConfig, FillError, FillOutput, FillUrl};
use isoe_initiator::IscsiUrl;
use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Fills every URL's LU as `args` say. The line `isoe bench: filled ...`
/// goes to stdout, or to stderr with `--json` (which may be stdout, and
/// then holds the JSON line alone).
pub(super) fn fill_and_report(args: &BenchArgs, stop: &Arc<AtomicBool>) -> Result<(), String> {
    let config = fill_config(args, stop)?;
    // Opened first: a JSON path that cannot be written fails before the LUs are.
    let mut json = open_json(args)?;
    let report = fill::fill(&config).map_err(|e| match &e {
        // A refused login says what to check, as a run's does.
        FillError::Setup(setup) => run_error_text(setup, &config.session),
        other => other.to_string(),
    })?;
    let line = format!("isoe bench: {}", report.summary());
    let Some(out) = json.as_mut() else {
        println!("{line}");
        return Ok(());
    };
    eprintln!("{line}");
    let text = serde_json::to_string(&FillOutput { fill: report }).map_err(|e| e.to_string())?;
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing JSON: {e}"))
}

/// The fill `args` ask for: the URLs, the session options every run
/// takes, `--bs` and `--qd` with the fill's own defaults.
fn fill_config(args: &BenchArgs, stop: &Arc<AtomicBool>) -> Result<FillConfig, String> {
    let mut urls = Vec::new();
    for u in &args.urls {
        urls.push(FillUrl::parse(u).map_err(|e| e.to_string())?);
    }
    let parsed: Vec<IscsiUrl> = urls.iter().map(|u| u.url.clone()).collect();
    let session = template(args, url_chap(&parsed, &args.chap)?);
    let connections = u16::try_from(args.connections)
        .map_err(|_| format!("--connections {}: at most 65535", args.connections))?;
    Ok(FillConfig {
        urls,
        session,
        connections,
        write_bytes: args.bs.unwrap_or(fill::DEFAULT_WRITE_BYTES),
        queue_depth: args.qd.unwrap_or(fill::DEFAULT_QUEUE_DEPTH),
        span_bytes: args.span,
        progress: !args.no_progress && std::io::stderr().is_terminal(),
        stop: stop.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::parse;
    use super::*;

    #[test]
    fn the_fill_takes_its_own_defaults_and_the_run_options() {
        let stop = Arc::new(AtomicBool::new(false));
        let c = fill_config(&parse(&["--fill".into()]), &stop).unwrap();
        assert_eq!(c.write_bytes, 1 << 20);
        assert_eq!(c.queue_depth, 8);
        assert_eq!(c.connections, 1);
        assert_eq!(
            c.urls[0].name,
            "iscsi://10.99.1.2/iqn.2026-11.io.isoe:lab/0"
        );
        let args: Vec<String> = [
            "--fill",
            "--bs",
            "64k",
            "--qd",
            "3",
            "--connections",
            "2",
            "--header-digest",
            "--immediate-data",
            "no",
            "--sndbuf",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = fill_config(&parse(&args), &stop).unwrap();
        assert_eq!(
            (c.write_bytes, c.queue_depth, c.connections),
            (65_536, 3, 2)
        );
        assert!(c.session.header_digest);
        assert_eq!(c.session.immediate_data, Some(false));
        assert_eq!(c.session.socket.sndbuf_bytes, None);
    }
}
