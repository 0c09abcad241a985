//! `isoe attach`, `isoe attach --list` and `isoe detach`: an iSCSI LU as a
//! Linux block device on isoe's initiator (the `isoe-attach` crate does the
//! work; this is the command line, signals, systemd and the exit codes).
//!
//! Exit codes: 0 after a detach (SIGTERM, SIGINT, `isoe detach`); 2 when
//! the command line or the device file is wrong or this machine cannot
//! make block devices (no ublk or nbd module, not root); 1 when the target,
//! the network or the kernel failed us.

use crate::chap_args;
use crate::target_cmd::notify;
use clap::Args;
use isoe_attach::guard::{self, Guarded};
use isoe_attach::holders;
use isoe_attach::modules::{self, Kind};
use isoe_attach::scheduling;
use isoe_attach::scsi::{self, Lu};
use isoe_attach::serve::{self, Observer, Stats};
use isoe_attach::settings::{self, Scheduling, Settings, Transport};
use isoe_attach::state::{self, Record};
use isoe_attach::{nbd, ublk, BlockDevice};
use isoe_initiator::{
    Command, Engine, IscsiUrl, MultipathOptions, RetryPolicy, SessionConfig, DEFAULT_INITIATOR_NAME,
};
use isoe_wire::chap::Secret;
use isoe_wire::login::InitiatorChap;
use isoe_wire::negotiate::Digest;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `isoe attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// iscsi://host[:port]/IQN/LUN of the LU; several are paths of one LU
    /// (with --multipath). A CHAP secret goes in ISOE_CHAP_SECRET or
    /// --chap-secret-file, never in the URL.
    #[arg(value_name = "URL")]
    urls: Vec<String>,
    /// Read the device's settings from this TOML file (what the
    /// isoe-attach@NAME service does with /etc/isoe/attach/NAME.toml)
    /// instead of the URL and options.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "multipath", "nbd", "ublk"])]
    config: Option<PathBuf>,
    /// The URLs are paths of one LU: fail over between them (ALUA).
    #[arg(long)]
    multipath: bool,
    /// Serve through the kernel's nbd driver (/dev/nbdN).
    #[arg(long, conflicts_with = "ublk")]
    nbd: bool,
    /// Serve through ublk (/dev/ublkbN) and fail where it is missing; by
    /// default ublk is used where it exists and NBD elsewhere.
    #[arg(long)]
    ublk: bool,
    /// The name `--list` shows and `isoe detach` takes (default: from the
    /// target and LUN).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Requests the kernel may have outstanding.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=4096))]
    queue_depth: Option<u16>,
    /// How long I/O waits for a lost session (or, with --multipath, for a
    /// path) before it fails, in seconds (open-iscsi's replacement_timeout).
    #[arg(long, value_name = "SECONDS")]
    replacement_timeout: Option<u64>,
    /// Connections in the session (MC/S).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    connections: Option<u16>,
    /// How the serving thread is scheduled: normal (the default) or
    /// realtime (SCHED_FIFO 1, as the kernel initiator's softirq work runs).
    #[arg(long, value_name = "POLICY", value_parser = ["normal", "realtime"])]
    scheduling: Option<String>,
    /// Keep ublk's copying path where the kernel offers zero copy (reads'
    /// data received straight into the request's pages).
    #[arg(long)]
    no_zero_copy: bool,
    /// Require CRC32C header digests.
    #[arg(long)]
    header_digest: bool,
    /// Require CRC32C data digests.
    #[arg(long)]
    data_digest: bool,
    /// InitiatorName to log in with.
    #[arg(long, value_name = "IQN")]
    initiator_name: Option<String>,
    /// CHAP user name.
    #[arg(long, value_name = "USER")]
    chap_user: Option<String>,
    /// A file holding the CHAP secret (mode 0600); or set ISOE_CHAP_SECRET.
    #[arg(long, value_name = "FILE")]
    chap_secret_file: Option<PathBuf>,
    /// Mutual CHAP: the name the target must authenticate with.
    #[arg(long, value_name = "USER")]
    target_user: Option<String>,
    /// Mutual CHAP: a file holding the target's secret; or set ISOE_TARGET_SECRET.
    #[arg(long, value_name = "FILE")]
    target_secret_file: Option<PathBuf>,
    /// List the attached devices and their counters instead.
    #[arg(long, conflicts_with_all = ["urls", "config"])]
    list: bool,
    /// With --list: one JSON array on stdout.
    #[arg(long, requires = "list")]
    json: bool,
}

/// `isoe detach`.
#[derive(Args, Debug)]
pub struct DetachArgs {
    /// The device (/dev/ublkb0, ublkb0, /dev/nbd1) or its attach name.
    #[arg(value_name = "DEV|NAME")]
    device: String,
    /// How long to wait for the flush and removal, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    timeout: u64,
    /// Detach a device that is mounted, swapped on or held by another
    /// device (its file system then loses what it had not written back).
    #[arg(long)]
    force: bool,
}

/// `isoe attach-guard` (hidden): the bound on a ublk disk whose attach
/// dies (`isoe_attach::guard`); each ublk attach starts its own.
#[derive(Args, Debug)]
pub struct GuardArgs {
    #[arg(long)]
    ublk_id: u32,
    #[arg(long)]
    pid: u32,
    #[arg(long)]
    name: String,
    /// Seconds.
    #[arg(long)]
    bound: u64,
}

/// Why `isoe attach` stopped, and its exit code.
enum Failure {
    /// Exit 2: the command line, the file, or this machine.
    Usage(String),
    /// Exit 1.
    Operational(String),
}

pub fn run_attach(args: AttachArgs) -> ExitCode {
    let result = log_to_stderr().and_then(|()| {
        if args.list {
            list(args.json)
        } else {
            attach(args)
        }
    });
    exit(result, "attach")
}

pub fn run_detach(args: DetachArgs) -> ExitCode {
    let result = log_to_stderr().and_then(|()| detach(&args));
    exit(result, "detach")
}

pub fn run_guard(args: GuardArgs) -> ExitCode {
    let result = log_to_stderr().and_then(|()| {
        let guarded = Guarded {
            dev_id: args.ublk_id,
            pid: args.pid,
            name: args.name,
            bound: Duration::from_secs(args.bound),
        };
        guard::watch(&guarded)
            .map(drop)
            .map_err(|e| Failure::Operational(format!("ublk device {}: {e}", args.ublk_id)))
    });
    exit(result, guard::SUBCOMMAND)
}

/// The log (connection loss, reinstatement, failed requests, the guard's
/// deletions) to stderr, which the unit's journal keeps: `RUST_LOG` as
/// the filter, info by default; no timestamps under systemd, whose journal
/// has its own.
fn log_to_stderr() -> Result<(), Failure> {
    let config = isoe_target::config::LogConfig {
        timestamps: std::env::var_os("JOURNAL_STREAM").is_none(),
        ..isoe_target::config::LogConfig::default()
    };
    crate::logging::install(&config).map_err(Failure::Usage)
}

fn detach(args: &DetachArgs) -> Result<(), Failure> {
    let record = state::find(&args.device)
        .map_err(|e| Failure::Operational(format!("reading {}: {e}", state::dir().display())))?;
    // A disk whose attach is gone (or that no record names) is deleted
    // here; a live attach is told to stop.
    let orphan = match &record {
        Some(r) if r.state == state::ORPHANED => r.ublk_id,
        Some(_) => None,
        None => recordless_orphan(&args.device),
    };
    let disk = match (&record, orphan) {
        (_, Some(id)) => Some(format!("/dev/ublkb{id}")),
        (Some(r), None) => r.device.clone(),
        (None, None) => None,
    };
    if let Some(disk) = disk.as_deref().filter(|_| !args.force) {
        let users = holders::holders(Path::new(disk));
        if !users.is_empty() {
            return Err(Failure::Operational(format!(
                "{disk} is in use: {}. Unmount it (or stop what holds it) first; \
                 `isoe detach --force` pulls it from under its users, and a file system on it \
                 loses what it had not written back",
                users.join("; ")
            )));
        }
    }
    if let Some(id) = orphan {
        let name = record.as_ref().map_or("no record", |r| r.name.as_str());
        ublk::delete_dead(id).map_err(|e| Failure::Operational(e.to_string()))?;
        if let Some(r) = &record {
            state::remove_if_pid(&r.name, r.pid);
        }
        println!(
            "deleted ublk device {id} ({name}), whose attach was gone; its held requests failed"
        );
        return Ok(());
    }
    let record = state::detach(&args.device, Duration::from_secs(args.timeout))
        .map_err(|e| Failure::Operational(e.to_string()))?;
    println!(
        "detached {} ({})",
        record.device.as_deref().unwrap_or("a device being started"),
        record.name
    );
    Ok(())
}

/// The ublk device `what` names (`/dev/ublkbN`, `ublkbN`, `/dev/ublkcN`),
/// if it exists and its server is gone: an orphan that no record names
/// (its record lost, or written to another state directory).
fn recordless_orphan(what: &str) -> Option<u32> {
    let base = what.rsplit('/').next()?;
    let id: u32 = base
        .strip_prefix("ublkb")
        .or_else(|| base.strip_prefix("ublkc"))?
        .parse()
        .ok()?;
    ublk::info(id).ok()?.orphaned().then_some(id)
}

fn exit(result: Result<(), Failure>, name: &str) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(text)) => {
            eprintln!("isoe {name}: error: {text}");
            ExitCode::from(2)
        }
        Err(Failure::Operational(text)) => {
            eprintln!("isoe {name}: error: {text}");
            ExitCode::FAILURE
        }
    }
}

fn list(json: bool) -> Result<(), Failure> {
    let mut records = state::list()
        .map_err(|e| Failure::Operational(format!("reading {}: {e}", state::dir().display())))?;
    records.extend(recordless_orphans(&records));
    let mut out = io::stdout().lock();
    let written = if json {
        serde_json::to_writer_pretty(&mut out, &records)
            .map_err(io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        write_table(&mut out, &records)
    };
    written.map_err(|e| Failure::Operational(format!("writing to stdout: {e}")))
}

/// ublk disks whose server is gone and that no record names, as records
/// named after their disk (`ublkb0`, which `isoe detach` takes), state
/// [`state::ORPHANED`]. None where ublk is not loaded or cannot be asked.
fn recordless_orphans(records: &[Record]) -> Vec<Record> {
    let Ok(devices) = ublk::list() else {
        return Vec::new();
    };
    devices
        .into_iter()
        .filter(|d| d.orphaned() && !records.iter().any(|r| r.ublk_id == Some(d.id)))
        .map(|d| Record {
            pid: u32::try_from(d.pid).unwrap_or(0),
            device: Some(format!("/dev/ublkb{}", d.id)),
            ublk_id: Some(d.id),
            state: state::ORPHANED.into(),
            started_unix: 0,
            ..Record::new(&format!("ublkb{}", d.id), "ublk", Vec::new(), false)
        })
        .collect()
}

fn write_table(out: &mut impl Write, records: &[Record]) -> io::Result<()> {
    if records.is_empty() {
        return writeln!(out, "no devices attached");
    }
    let header = [
        "NAME", "DEVICE", "STATE", "VIA", "PID", "COMMANDS", "READ", "WRITTEN", "MEAN", "ERRORS",
        "RECON", "URL",
    ];
    let rows: Vec<[String; 12]> = records
        .iter()
        .map(|r| {
            let s = &r.stats;
            [
                r.name.clone(),
                r.device.clone().unwrap_or_else(|| "-".into()),
                r.state.clone(),
                match &r.data_path {
                    Some(path) => format!("{}/{path}", r.transport),
                    None => r.transport.clone(),
                },
                r.pid.to_string(),
                s.commands.to_string(),
                isoe_size::describe_bytes(s.read_bytes),
                isoe_size::describe_bytes(s.write_bytes),
                format!("{}us", s.latency_mean_us()),
                s.errors.to_string(),
                s.reconnects.to_string(),
                if r.urls.is_empty() {
                    "(no record: isoe detach deletes it)".into()
                } else {
                    r.urls.join(" ")
                },
            ]
        })
        .collect();
    // Each column as wide as its widest cell: names and URLs of any length
    // keep the columns aligned.
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Text left, numbers right; the URL last, unpadded.
    let left = [
        true, true, true, true, false, false, false, false, false, false, false, true,
    ];
    let line = |cells: &[&str]| -> String {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            if i == cells.len() - 1 {
                text.push_str(cell);
            } else if left[i] {
                text.push_str(&format!("{cell:<w$}", w = widths[i]));
            } else {
                text.push_str(&format!("{cell:>w$}", w = widths[i]));
            }
        }
        text
    };
    writeln!(out, "{}", line(&header))?;
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}

/// The settings from the device file, or from the command line.
fn settings_of(args: &AttachArgs) -> Result<Settings, Failure> {
    if let Some(path) = &args.config {
        return settings::read(path).map_err(|e| Failure::Usage(e.to_string()));
    }
    if args.urls.is_empty() {
        return Err(Failure::Usage(
            "name the LU: isoe attach iscsi://HOST/IQN/LUN (or --config FILE)".into(),
        ));
    }
    if args.urls.len() > 1 && !args.multipath {
        return Err(Failure::Usage(format!(
            "{} URLs given: with --multipath they are paths of one LU; one LU per isoe attach otherwise",
            args.urls.len()
        )));
    }
    let defaults = Settings::default();
    Ok(Settings {
        urls: args.urls.clone(),
        multipath: args.multipath,
        transport: if args.nbd {
            Transport::Nbd
        } else if args.ublk {
            Transport::Ublk
        } else {
            Transport::Auto
        },
        queue_depth: args.queue_depth.unwrap_or(defaults.queue_depth),
        replacement_timeout: args
            .replacement_timeout
            .map_or(defaults.replacement_timeout, Duration::from_secs),
        connections: args.connections.unwrap_or(defaults.connections),
        scheduling: args
            .scheduling
            .as_deref()
            .and_then(Scheduling::from_name)
            .unwrap_or(defaults.scheduling),
        zero_copy: !args.no_zero_copy,
        header_digest: args.header_digest,
        data_digest: args.data_digest,
        initiator_name: args.initiator_name.clone(),
        chap_user: args.chap_user.clone(),
        chap_secret_file: args.chap_secret_file.clone(),
        target_user: args.target_user.clone(),
        target_secret_file: args.target_secret_file.clone(),
    })
}

/// The kernel interface to use: the one asked for, or ublk where it exists
/// and NBD elsewhere.
fn choose_kind(transport: Transport) -> Result<Kind, Failure> {
    modules::ensure_root().map_err(Failure::Usage)?;
    match transport {
        Transport::Ublk => modules::ensure(Kind::Ublk)
            .map(|()| Kind::Ublk)
            .map_err(|e| Failure::Usage(format!("{e}; or use --nbd"))),
        Transport::Nbd => modules::ensure(Kind::Nbd)
            .map(|()| Kind::Nbd)
            .map_err(Failure::Usage),
        Transport::Auto => match modules::ensure(Kind::Ublk) {
            Ok(()) => Ok(Kind::Ublk),
            Err(no_ublk) => match modules::ensure(Kind::Nbd) {
                Ok(()) => {
                    tracing::info!("ublk is missing ({no_ublk}): serving through NBD");
                    Ok(Kind::Nbd)
                }
                Err(no_nbd) => Err(Failure::Usage(format!(
                    "this machine cannot make block devices: {no_ublk}. {no_nbd}"
                ))),
            },
        },
    }
}

/// The session configuration of one URL and its LUN, with CHAP from the
/// files or the environment.
fn session_config(url: &str, s: &Settings) -> Result<(SessionConfig, u16), Failure> {
    let parsed = IscsiUrl::parse(url).map_err(|e| Failure::Usage(e.to_string()))?;
    if parsed.password.is_some() {
        return Err(Failure::Usage(
            "the URL carries a CHAP secret, which `ps` and the logs would show: \
             put it in ISOE_CHAP_SECRET or --chap-secret-file"
                .into(),
        ));
    }
    let Some(lun) = parsed.lun else {
        return Err(Failure::Usage(format!(
            "{url} names no LUN: add /LUN after the target name, e.g. {url}/0"
        )));
    };
    let mut config = SessionConfig::from_url(&parsed);
    config.initiator_name = s
        .initiator_name
        .clone()
        .unwrap_or_else(|| DEFAULT_INITIATOR_NAME.to_owned());
    config.chap = chap_of(parsed.user.as_deref(), s)?;
    config.connections = s.connections;
    config.retry = retry_for(s.replacement_timeout);
    if s.header_digest {
        config.params.header_digest = vec![Digest::Crc32c];
    }
    if s.data_digest {
        config.params.data_digest = vec![Digest::Crc32c];
    }
    Ok((config, lun))
}

/// CHAP: the user from the settings (or the URL), each secret from its file
/// or the environment; never from the command line.
fn chap_of(url_user: Option<&str>, s: &Settings) -> Result<Option<InitiatorChap>, Failure> {
    let secret = |file: &Option<PathBuf>, env: &str, flag: &str, whose: &str| match file {
        Some(path) => settings::read_secret(path).map_err(|e| Failure::Usage(e.to_string())),
        None => match std::env::var_os(env) {
            Some(v) if !v.is_empty() => Ok(Secret::new(v.into_encoded_bytes())),
            _ => Err(Failure::Usage(format!(
                "{whose} has no secret: give {flag} FILE or set {env}"
            ))),
        },
    };
    let Some(user) = s.chap_user.as_deref().or(url_user) else {
        if s.target_user.is_some() || s.chap_secret_file.is_some() {
            return Err(Failure::Usage(
                "CHAP needs a user: --chap-user USER (chap_user in the file)".into(),
            ));
        }
        return Ok(None);
    };
    let own = secret(
        &s.chap_secret_file,
        settings::ENV_CHAP_SECRET,
        "--chap-secret-file",
        &format!("CHAP user {user:?}"),
    )?;
    let mutual = match &s.target_user {
        Some(target) => Some((
            target.clone(),
            secret(
                &s.target_secret_file,
                settings::ENV_TARGET_SECRET,
                "--target-secret-file",
                &format!("mutual CHAP user {target:?}"),
            )?,
        )),
        None => None,
    };
    Ok(Some(isoe_initiator::config::chap(user, own, mutual)))
}

/// Reconnection attempts that span about `replacement`: the engine waits
/// 100 ms, doubling to 2 s, between them.
fn retry_for(replacement: Duration) -> RetryPolicy {
    let base = RetryPolicy::default();
    let mut attempts = 0;
    let mut spent = Duration::ZERO;
    while spent < replacement {
        spent += base.delay(attempts);
        attempts += 1;
    }
    RetryPolicy { attempts, ..base }
}

fn attach(args: AttachArgs) -> Result<(), Failure> {
    let settings = settings_of(&args)?;
    let name = match &args.name {
        Some(name) if !state::valid_name(name) => {
            return Err(Failure::Usage(format!(
                "{name:?} is not a device name: 1 to 64 of A-Z a-z 0-9 _ . -"
            )))
        }
        Some(name) => name.clone(),
        None => state::default_name(&settings.urls[0]),
    };
    let configs = settings
        .urls
        .iter()
        .map(|url| session_config(url, &settings))
        .collect::<Result<Vec<_>, _>>()?;
    let kind = choose_kind(settings.transport)?;
    let recover = claim(&name, &settings, kind)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| Failure::Operational(format!("installing a signal handler: {e}")))?;
    }

    let mut engine = Engine::new();
    let (session, lun) = open(&mut engine, configs, &settings)?;
    let lu = scsi::probe(&mut engine, session, lun)
        .map_err(|e| Failure::Operational(format!("probing LUN {lun}: {e}")))?;
    let mut record = Record::new(
        &name,
        kind.name(),
        settings.urls.clone(),
        settings.multipath,
    );
    let mut watch = Watch {
        record,
        stop,
        quiet: false,
        scheduling: settings.scheduling,
    };
    let served = match kind {
        Kind::Ublk => {
            let options = ublk::Options {
                queue_depth: settings.queue_depth,
                recover,
                // A data digest is computed over the bytes as they land,
                // which a request's registered pages do not show.
                zero_copy: settings.zero_copy && !settings.data_digest,
            };
            if let Some(id) = options.recover {
                tracing::info!("resuming ublk device {id}, whose attach was killed");
            }
            let mut device = ublk::UblkDevice::create(&lu.geometry, options)
                .map_err(|e| Failure::Operational(e.to_string()))?;
            watch.record.ublk_id = Some(device.dev_id());
            watch.record.data_path = Some(device.data_path().name().into());
            tracing::info!(
                "ublk device {}: data path {}",
                device.dev_id(),
                device.data_path().name()
            );
            start_guard(device.dev_id(), &name, settings.replacement_timeout);
            serve_device(&mut engine, session, &lu, &mut device, &mut watch)
        }
        Kind::Nbd => {
            let options = nbd::Options {
                queue_depth: settings.queue_depth,
                ..nbd::Options::default()
            };
            let mut device = nbd::Nbd::open(&lu.geometry, options)
                .map_err(|e| Failure::Operational(format!("NBD: {e}")))?;
            watch.record.data_path = Some(ublk::DataPath::Copy.name().into());
            let served = serve_device(&mut engine, session, &lu, &mut device, &mut watch);
            if let Err(e) = device.finish() {
                tracing::warn!("closing {}: {e}", device.path().display());
            }
            served
        }
    };
    record = watch.record;
    let _ = state::remove(&record.name);
    let stats = served?;
    finish(&mut engine, session, &lu, &record, &stats);
    Ok(())
}

/// Checks that `name` and the LU are free before anything is made: no
/// live attach has the name; an orphaned disk of that name (its attach
/// killed) is resumed, and only by an attach of its own LU through ublk;
/// no other device serves one of the LU's URLs. Returns the ublk device
/// to resume, if any.
fn claim(name: &str, settings: &Settings, kind: Kind) -> Result<Option<u32>, Failure> {
    let records = state::list()
        .map_err(|e| Failure::Operational(format!("reading {}: {e}", state::dir().display())))?;
    let mut recover = None;
    if let Some(r) = records.iter().find(|r| r.name == name) {
        let shown = r.device.as_deref().unwrap_or(&r.state);
        if r.state != state::ORPHANED {
            return Err(Failure::Usage(format!(
                "a device named {name} is attached already ({shown}, pid {}; isoe attach --list): \
                 give another --name",
                r.pid
            )));
        }
        let id = r.ublk_id.unwrap_or_default();
        let how = format!(
            "`isoe attach {} --name {name}` resumes it, `isoe detach {name}` deletes it (the \
             requests it holds then fail); or give another --name",
            r.urls.join(" ")
        );
        if !same_lus(&r.urls, &settings.urls) {
            return Err(Failure::Usage(format!(
                "a device named {name} is orphaned: {shown}, whose attach of {} was killed, \
                 holds its requests until it is resumed. {how}",
                r.urls.join(" ")
            )));
        }
        if kind != Kind::Ublk {
            return Err(Failure::Usage(format!(
                "a device named {name} is orphaned: {shown}, a ublk disk, which only ublk can \
                 resume (drop --nbd). {how}"
            )));
        }
        recover = Some(id);
    }
    let others: Vec<Record> = records.into_iter().filter(|r| r.name != name).collect();
    if let Some((r, url)) = state::serving_lu(&others, &settings.urls) {
        return Err(Failure::Usage(format!(
            "{url} is attached already as {} ({}): two block devices of one LU on one machine \
             each cache it, and a file system mounted through both is corrupted. Use {}, or \
             `isoe detach {}` first",
            r.name,
            r.device.as_deref().unwrap_or(&r.state),
            r.device.as_deref().unwrap_or(&r.name),
            r.name
        )));
    }
    Ok(recover)
}

/// Whether two URL lists name the same LUs, whatever their spelling.
fn same_lus(a: &[String], b: &[String]) -> bool {
    let keys = |urls: &[String]| {
        let mut k: Vec<Option<String>> = urls.iter().map(|u| state::lu_key(u)).collect();
        k.sort();
        k
    };
    keys(a) == keys(b)
}

/// Starts the guard that deletes ublk device `dev_id` should this attach
/// die and no other resume it within `bound` (`isoe_attach::guard`). A
/// guard that cannot start is logged, not fatal: the disk then waits for
/// a resume as long as it takes.
fn start_guard(dev_id: u32, name: &str, bound: Duration) {
    let guarded = Guarded {
        dev_id,
        pid: std::process::id(),
        name: name.to_string(),
        bound,
    };
    let started = std::env::current_exe().and_then(|exe| guard::spawn(&exe, &guarded));
    if let Err(e) = started {
        tracing::warn!(
            "cannot start the guard of /dev/ublkb{dev_id} ({e}): should this attach die, its \
             requests wait until an attach of {name} resumes it"
        );
    }
}

/// Logs in: one session, or a multipath LU of every URL. Returns what
/// commands go to and the LUN.
fn open(
    engine: &mut Engine,
    configs: Vec<(SessionConfig, u16)>,
    settings: &Settings,
) -> Result<(usize, u16), Failure> {
    let chap = configs[0].0.chap.clone();
    let lun = configs[0].1;
    if settings.multipath {
        let options = MultipathOptions {
            failover_timeout: settings.replacement_timeout,
            ..MultipathOptions::default()
        };
        let index = engine.open_multipath(configs, options).map_err(|e| {
            Failure::Operational(chap_args::login_failure_text(
                &e,
                chap.as_ref(),
                chap_args::Secrets::Files,
            ))
        })?;
        return Ok((index, lun));
    }
    let (config, _) = configs.into_iter().next().expect("one URL at least");
    let session = engine.login(config).map_err(|e| {
        Failure::Operational(chap_args::login_failure_text(
            &e,
            chap.as_ref(),
            chap_args::Secrets::Files,
        ))
    })?;
    Ok((session, lun))
}

fn serve_device<D: BlockDevice>(
    engine: &mut Engine,
    session: usize,
    lu: &Lu,
    device: &mut D,
    watch: &mut Watch,
) -> Result<Stats, Failure> {
    if let Err(e) = watch.record.save() {
        tracing::warn!("cannot write {}: {e}", state::dir().display());
    }
    if let Err(e) = scheduling::apply(watch.scheduling) {
        tracing::warn!(
            "cannot schedule the serving thread as {} ({e}): it runs as a normal one, \
             and its requests wait behind the applications on a busy CPU",
            watch.scheduling
        );
    }
    let (stats, _) = serve::serve(engine, session, lu, device, watch)
        .map_err(|e| Failure::Operational(e.to_string()))?;
    Ok(stats)
}

/// After the device is gone: the LU's cache to stable media, and logout.
fn finish(engine: &mut Engine, session: usize, lu: &Lu, record: &Record, stats: &Stats) {
    if lu.geometry.volatile_cache {
        let sync = Command::new(lu.lun, &isoe_initiator::cdb::synchronize_cache16());
        match engine.execute(session, sync).map(|c| c.good().map(|_| ())) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => tracing::warn!("SYNCHRONIZE CACHE at detach: {why}"),
            Err(e) => tracing::warn!("SYNCHRONIZE CACHE at detach: {e}"),
        }
    }
    if let Err(e) = engine.logout(session) {
        tracing::warn!("logout: {e}");
    }
    eprintln!(
        "isoe attach: {} detached after {} requests ({} read, {} written, {} failed)",
        record.device.as_deref().unwrap_or(&record.name),
        stats.commands,
        isoe_size::describe_bytes(stats.read_bytes),
        isoe_size::describe_bytes(stats.write_bytes),
        stats.errors
    );
}

/// The serving loop's observer: prints the device, tells systemd, keeps
/// the state file, and watches for SIGTERM.
struct Watch {
    record: Record,
    stop: Arc<AtomicBool>,
    quiet: bool,
    /// The serving thread's policy.
    scheduling: Scheduling,
}

impl Observer for Watch {
    fn ready(&mut self, path: &Path) -> io::Result<()> {
        self.record.device = Some(path.display().to_string());
        self.record.state = state::SERVING.into();
        if let Err(e) = self.record.save() {
            tracing::warn!("cannot write {}: {e}", state::dir().display());
        }
        if !self.quiet {
            let mut out = io::stdout().lock();
            writeln!(out, "{}", path.display())?;
            out.flush()?;
        }
        notify::ready().map(|_| ())
    }

    fn tick(&mut self, stats: &Stats) {
        self.record.stats = stats.clone();
        if self.stop.load(Ordering::Relaxed) {
            self.record.state = state::STOPPING.into();
        }
        if let Err(e) = self.record.save() {
            tracing::debug!("cannot write the state file: {e}");
        }
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn reconnecting(&mut self, reconnecting: bool) {
        let state = match (reconnecting, self.record.state.as_str()) {
            (true, state::SERVING) => state::RECONNECTING,
            (false, state::RECONNECTING) => state::SERVING,
            _ => return,
        };
        self.record.state = state.into();
        if let Err(e) = self.record.save() {
            tracing::debug!("cannot write the state file: {e}");
        }
    }

    fn offline(&mut self, offline: bool) {
        self.record.state = if offline {
            state::OFFLINE
        } else {
            state::SERVING
        }
        .into();
        if let Err(e) = self.record.save() {
            tracing::debug!("cannot write the state file: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_fits_long_names_and_says_each_state() {
        let mut a = Record::new(
            "a-rather-long-device-name-of-forty-chars",
            "ublk",
            vec!["iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0".into()],
            false,
        );
        a.state = state::OFFLINE.into();
        a.device = Some("/dev/ublkb12".into());
        a.stats.commands = 1_234_567_890;
        a.data_path = Some(ublk::DataPath::ZeroCopy.name().into());
        let mut b = Record::new("db", "nbd", vec![], false);
        b.state = state::ORPHANED.into();
        let mut out = Vec::new();
        write_table(&mut out, &[a, b]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // Every column starts where its header does.
        for column in ["DEVICE", "STATE", "VIA", "URL"] {
            let at = lines[0].find(column).unwrap();
            for line in &lines[1..] {
                assert!(
                    line[..at].ends_with("  ") && !line[at..].starts_with(' '),
                    "{column} at {at}:\n{text}"
                );
            }
        }
        assert!(
            lines[1].contains("offline")
                && lines[1].contains("1234567890")
                && lines[1].contains("ublk/zero-copy"),
            "{text}"
        );
        assert!(
            lines[2].contains("orphaned") && lines[2].contains("(no record"),
            "{text}"
        );
        let mut out = Vec::new();
        write_table(&mut out, &[]).unwrap();
        assert_eq!(out, b"no devices attached\n");
    }

    #[test]
    fn the_same_lus_whatever_the_order_and_spelling() {
        let v = |u: &[&str]| u.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(same_lus(
            &v(&["iscsi://a/iqn.x:y/0", "iscsi://b/iqn.x:y/0"]),
            &v(&["iscsi://B:3260/IQN.X:Y/0", "iscsi://a/iqn.x:y/0"])
        ));
        assert!(!same_lus(
            &v(&["iscsi://a/iqn.x:y/0"]),
            &v(&["iscsi://a/iqn.x:y/1"])
        ));
        assert!(!same_lus(
            &v(&["iscsi://a/iqn.x:y/0"]),
            &v(&["iscsi://a/iqn.x:y/0", "iscsi://b/iqn.x:y/0"])
        ));
    }
}
