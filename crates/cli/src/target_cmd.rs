//! `isoe target`: load the configuration, serve until SIGINT/SIGTERM, shut down cleanly.

use isoe_target::config::{algorithm_name, ChapConfig, Datapath, PortalGroup, StoreSpec};
use isoe_target::Config;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

fn describe_store(spec: &StoreSpec) -> String {
    match spec {
        StoreSpec::Memory {
            size_bytes,
            overcommit,
        } => {
            let overcommitted = if *overcommit { ", overcommitted" } else { "" };
            format!("memory {} MiB{overcommitted}", size_bytes >> 20)
        }
        StoreSpec::File { path, .. } => format!("file {}", path.display()),
        StoreSpec::Block { path } => format!("block {}", path.display()),
    }
}

/// One line per CHAP or ACL rule in force: who must authenticate, with
/// which algorithms; names only, never a secret.
fn auth_summary(config: &Config) -> Vec<String> {
    let chap = |c: &ChapConfig| {
        let names: Vec<_> = c.algorithms.iter().map(|a| algorithm_name(*a)).collect();
        let mutual = if c.mutual.is_some() {
            ", mutual CHAP available"
        } else {
            ""
        };
        format!(
            "CHAP required (user {:?}, {}{mutual})",
            c.user,
            names.join(", ")
        )
    };
    let mut lines = Vec::new();
    if let Some(c) = &config.discovery.chap {
        lines.push(format!("discovery: {}", chap(c)));
    }
    for t in &config.targets {
        if let Some(c) = &t.chap {
            lines.push(format!("{}: {}", t.name, chap(c)));
        }
        if !t.allowed_initiators.is_empty() {
            lines.push(format!(
                "{}: only {} may discover and log in",
                t.name,
                t.allowed_initiators.join(", ")
            ));
        }
    }
    lines
}

/// One line per portal group, with its ALUA state and its portals (as
/// bound), when the configuration has groups of its own; nothing when every
/// portal is in group 1, active/optimized.
fn portal_group_summary(config: &Config) -> Vec<String> {
    if config.portal_groups == [PortalGroup::default_group(config.portals.len())] {
        return Vec::new();
    }
    config
        .portal_groups
        .iter()
        .map(|g| {
            let portals: Vec<String> = g
                .portals
                .iter()
                .filter_map(|&i| config.portals.get(i).map(ToString::to_string))
                .collect();
            let preferred = if g.preferred { ", preferred" } else { "" };
            format!(
                "portal group {} ({}{preferred}): {}",
                g.tag,
                g.alua_state,
                portals.join(", ")
            )
        })
        .collect()
}

/// Runs the target; returns when a signal asked it to stop.
pub fn run(config_path: Option<&Path>, listen: &[SocketAddr]) -> ExitCode {
    let mut config = match config_path {
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("isoe target: {e}");
                return ExitCode::from(2);
            }
        },
        None => Config::embedded_default(),
    };
    if !listen.is_empty() {
        // --listen replaces the file's portals and their groups: all in
        // portal group 1, active/optimized.
        config.set_portals(listen.to_vec());
    }
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("isoe target: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let summary: Vec<String> = config
        .targets
        .iter()
        .flat_map(|t| {
            t.luns
                .iter()
                .map(move |l| format!("{} LUN {} ({})", t.name, l.number, describe_store(&l.store)))
        })
        .collect();
    let auth = auth_summary(&config);
    let datapath = config.datapath;
    let running = match isoe_target::start(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("isoe target: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    if datapath != Datapath::default() {
        // Said only when it differs, and before "listening on" so that
        // whoever waits for that has seen it: a measurement of the slow
        // path must not be mistaken for one of the default.
        let on_off = |on: bool| if on { "on" } else { "off" };
        let _ = writeln!(
            stdout,
            "isoe target: datapath batching {}, crc {}, buffer_pool {}",
            on_off(datapath.batching),
            datapath.crc_name(),
            on_off(datapath.buffer_pool)
        );
    }
    for portal in running.portals() {
        let _ = writeln!(stdout, "isoe target: listening on {portal}");
    }
    for line in portal_group_summary(&running.server().config) {
        let _ = writeln!(stdout, "isoe target: {line}");
    }
    for line in &summary {
        let _ = writeln!(stdout, "isoe target: serving {line}");
    }
    for line in &auth {
        let _ = writeln!(stdout, "isoe target: {line}");
    }
    let _ = stdout.flush();
    let signal = signals.forever().next();
    eprintln!(
        "isoe target: signal {} received, shutting down",
        signal.unwrap_or(0)
    );
    match running.shutdown() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("isoe target: syncing stores at shutdown failed: {e}");
            ExitCode::FAILURE
        }
    }
}
