//! `isoe target`: load the configuration, serve until SIGINT/SIGTERM, shut down cleanly.
//!
//! Stdout carries the startup report (portals, LUNs, access rules), which
//! tests and the lab read; stderr the log (`crate::logging`), set up once
//! the configuration is read: a configuration error is printed before it.

use isoe_target::admin::socket::{self, ControlSocket, SocketError};
use isoe_target::admin::Admin;
use isoe_target::config::ConfigError;
use isoe_target::config::{algorithm_name, ChapConfig, Datapath, PortalGroup};
use isoe_target::Config;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

pub mod check;
pub mod notify;

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

/// Starts the control socket of `[control] socket`, if any. A socket
/// another target answers on, or one that cannot be made, leaves this
/// target without one, serving all the same, and says so loudly: in the
/// log and on stdout with the report (the returned line), naming the
/// target that has the path. Each answer names `config_path`.
fn control_socket(
    path: Option<&Path>,
    admin: &Arc<Admin>,
    config_path: Option<&Path>,
) -> (Option<ControlSocket>, Option<String>) {
    let Some(path) = path else {
        return (None, None);
    };
    // Absolute, so that `isoe admin` names the file whatever directory
    // the target was started in.
    let config_file =
        config_path.map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
    match ControlSocket::start(path, Arc::clone(admin), config_file.as_deref()) {
        Ok(socket) => (Some(socket), None),
        Err(e) => {
            let said = format!(
                "no control socket: {e}; `isoe admin` cannot reach this target \
                 (set [control] socket to another path, or \"\" for none)"
            );
            tracing::error!("{said}");
            (None, Some(said))
        }
    }
}

/// False, having said why, when the control socket's directory is one
/// others can write: a configuration error, said before any portal binds,
/// since serving with it would hand `isoe admin` to whoever takes the
/// path first.
fn control_directory_is_safe(config: &Config) -> bool {
    let Some(path) = &config.control.socket else {
        return true;
    };
    match socket::check_directory(path) {
        Err(e @ SocketError::Unsafe { .. }) => {
            tracing::error!("{e}");
            false
        }
        // Anything else (a directory that cannot be made) leaves the
        // target without a socket, which the start says in its turn.
        _ => true,
    }
}

/// SIGHUP: the file is read again and what changed put into force; an
/// error is logged and the running configuration stays.
fn reload(admin: &Admin) {
    match admin.reload(false) {
        Ok(outcome)
            if outcome.applied.changes.is_empty() && outcome.applied.at_restart.is_empty() =>
        {
            tracing::info!("SIGHUP: the configuration file is unchanged");
        }
        Ok(_) => {}
        Err(e) => isoe_target::log::config_change_refused(
            "reload",
            format_args!("SIGHUP: reload refused, the running configuration stays: {e}"),
        ),
    }
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

/// `config`, read from a file, once what its LUNs' stores are on this
/// machine passed the checks a configuration gets before it is served.
fn checked(config: Config) -> Result<Config, ConfigError> {
    isoe_target::provision::check_stores(&config)?;
    Ok(config)
}

/// What a started target says on stdout, once everything serves: whoever
/// waits for "listening on" (tests, the lab) may use the control socket
/// and the metrics at once.
struct Started<'a> {
    running: &'a isoe_target::Running,
    datapath: Datapath,
    summary: &'a [String],
    auth: &'a [String],
    control: Option<&'a Path>,
    no_control: Option<&'a str>,
    metrics: Option<SocketAddr>,
}

impl Started<'_> {
    fn print(&self) {
        let mut stdout = std::io::stdout();
        if self.datapath != Datapath::default() {
            // Said only when it differs, and before "listening on" so that
            // whoever waits for that has seen it: a measurement of the slow
            // path must not be mistaken for one of the default.
            let on_off = |on: bool| if on { "on" } else { "off" };
            let _ = writeln!(
                stdout,
                "isoe target: datapath batching {}, crc {}, buffer_pool {}",
                on_off(self.datapath.batching),
                self.datapath.crc_name(),
                on_off(self.datapath.buffer_pool)
            );
        }
        for portal in self.running.portals() {
            let _ = writeln!(stdout, "isoe target: listening on {portal}");
        }
        for line in portal_group_summary(&self.running.server().config) {
            let _ = writeln!(stdout, "isoe target: {line}");
        }
        for line in self.summary {
            let _ = writeln!(stdout, "isoe target: serving {line}");
        }
        for line in self.auth {
            let _ = writeln!(stdout, "isoe target: {line}");
        }
        if let Some(socket) = self.control {
            let _ = writeln!(stdout, "isoe target: control socket {}", socket.display());
        }
        if let Some(said) = self.no_control {
            let _ = writeln!(stdout, "isoe target: {said}");
        }
        if let Some(addr) = self.metrics {
            let _ = writeln!(stdout, "isoe target: metrics on http://{addr}/metrics");
        }
        let _ = stdout.flush();
    }
}

/// The Prometheus listener on `addr`; an error is logged, naming what
/// holds the address.
fn serve_metrics(
    addr: SocketAddr,
    running: &isoe_target::Running,
) -> Result<isoe_target::metrics::prometheus::Listener, ()> {
    let server = Arc::clone(running.server());
    let render = move || {
        isoe_target::metrics::prometheus::render(&isoe_target::metrics::snapshot::snapshot(&server))
    };
    isoe_target::metrics::prometheus::Listener::start(addr, render).map_err(|e| {
        tracing::error!(
            "cannot serve metrics on {addr}: {e}{} ([metrics] listen)",
            isoe_target::driver::in_use_by(addr, &e)
        );
    })
}

/// The configuration at `config_path` (and its text, which the control
/// plane edits), or the embedded default; `listen` replaces its portals
/// and their groups (all in portal group 1, active/optimized). The
/// logging it asks for is installed.
fn load(
    config_path: Option<&Path>,
    listen: &[SocketAddr],
) -> Result<(Option<String>, Config), String> {
    // Read once: the control plane edits this very text.
    let (text, mut config) = match config_path {
        Some(path) => {
            let (text, config) = Config::read_file(path)
                .and_then(|(text, config)| Ok((text, checked(config)?)))
                .map_err(|e| e.to_string())?;
            (Some(text), config)
        }
        None => (None, Config::embedded_default()),
    };
    if !listen.is_empty() {
        config.set_portals(listen.to_vec());
    }
    crate::logging::install(&config.log).map_err(|e| e.to_string())?;
    Ok((text, config))
}

/// Each LUN the target serves, one line each.
fn lun_summary(config: &Config) -> Vec<String> {
    config
        .targets
        .iter()
        .flat_map(|t| {
            t.luns
                .iter()
                .map(move |l| format!("{} LUN {} ({})", t.name, l.number, l.store.describe()))
        })
        .collect()
}

/// Runs the target; returns when a signal asked it to stop.
pub fn run(config_path: Option<&Path>, listen: &[SocketAddr]) -> ExitCode {
    let (text, config) = match load(config_path, listen) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("isoe target: {e}");
            return ExitCode::from(2);
        }
    };
    let configured = config.clone();
    let mut signals = match Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let summary = lun_summary(&config);
    let auth = auth_summary(&config);
    let datapath = config.datapath;
    if !control_directory_is_safe(&configured) {
        return ExitCode::from(2);
    }
    let running = match isoe_target::start(config) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let admin = match Admin::new(
        Arc::clone(running.server()),
        Arc::clone(running.handle()),
        configured.clone(),
        config_path.zip(text.as_deref()),
        (!listen.is_empty()).then(|| listen.to_vec()),
    ) {
        Ok(admin) => Arc::new(admin),
        Err(e) => {
            // The text was read by the same reader a moment ago; only a
            // document the TOML editor cannot take ends here.
            tracing::error!("{e}");
            let _ = running.shutdown();
            return ExitCode::from(2);
        }
    };
    let (control, no_control) =
        control_socket(configured.control.socket.as_deref(), &admin, config_path);
    let metrics = match configured.metrics.listen {
        Some(addr) => match serve_metrics(addr, &running) {
            Ok(listener) => Some(listener),
            Err(()) => {
                let _ = running.shutdown();
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // Said once everything that can fail to start has started.
    tracing::info!(
        version = %env!("CARGO_PKG_VERSION"),
        portals = ?running.portals(),
        "isoe target started"
    );
    // The report comes once everything serves: whoever waits for
    // "listening on" (tests, the lab) may use the control socket and the
    // metrics at once.
    let said = Started {
        running: &running,
        datapath,
        summary: &summary,
        auth: &auth,
        control: control.as_ref().map(|c| c.path()),
        no_control: no_control.as_deref(),
        metrics: metrics.as_ref().map(|m| m.addr()),
    };
    said.print();
    // Under systemd (Type=notify, packaging/isoe-target.service): every
    // portal, the control socket and the metrics serve now, so `systemctl
    // start` may return.
    if let Err(e) = notify::ready() {
        tracing::warn!("cannot tell the service manager it is ready ($NOTIFY_SOCKET): {e}");
    }
    let mut signal = 0;
    for received in signals.forever() {
        if received == SIGHUP {
            reload(&admin);
            continue;
        }
        signal = received;
        break;
    }
    tracing::info!("signal {signal} received, shutting down");
    drop(control);
    drop(metrics);
    match running.shutdown() {
        Ok(()) => {
            tracing::info!("shut down: every connection closed, every store synced");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("syncing stores at shutdown failed: {e}");
            ExitCode::FAILURE
        }
    }
}
