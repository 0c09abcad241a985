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
use isoe_attach::modules::{self, Kind};
use isoe_attach::scsi::{self, Lu};
use isoe_attach::serve::{self, Observer, Stats};
use isoe_attach::settings::{self, Settings, Transport};
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
}

/// Why `isoe attach` stopped, and its exit code.
enum Failure {
    /// Exit 2: the command line, the file, or this machine.
    Usage(String),
    /// Exit 1.
    Operational(String),
}

pub fn run_attach(args: AttachArgs) -> ExitCode {
    let result = if args.list {
        list(args.json)
    } else {
        attach(args)
    };
    exit(result, "attach")
}

pub fn run_detach(args: DetachArgs) -> ExitCode {
    // A killed attach's ublk disk, which waits to be resumed: deleted.
    if let Ok(Some(record)) = state::find(&args.device) {
        if let (state::ORPHANED, Some(id)) = (record.state.as_str(), record.ublk_id) {
            let result = ublk::delete_dead(id)
                .map(|()| {
                    let _ = state::remove(&record.name);
                    println!(
                        "deleted ublk device {id} ({}), whose attach was gone",
                        record.name
                    );
                })
                .map_err(|e| Failure::Operational(e.to_string()));
            return exit(result, "detach");
        }
    }
    let result = state::detach(&args.device, Duration::from_secs(args.timeout))
        .map(|record| {
            println!(
                "detached {} ({})",
                record.device.as_deref().unwrap_or("a device being started"),
                record.name
            );
        })
        .map_err(|e| Failure::Operational(e.to_string()));
    exit(result, "detach")
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
    let records = state::list()
        .map_err(|e| Failure::Operational(format!("reading {}: {e}", state::dir().display())))?;
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

fn write_table(out: &mut impl Write, records: &[Record]) -> io::Result<()> {
    if records.is_empty() {
        return writeln!(out, "no devices attached");
    }
    writeln!(
        out,
        "{:<16} {:<14} {:<5} {:>8} {:>10} {:>10} {:>10} {:>7} {:>6} {:>5}  URL",
        "NAME", "DEVICE", "VIA", "PID", "COMMANDS", "READ", "WRITTEN", "MEAN", "ERRORS", "RECON"
    )?;
    for r in records {
        let s = &r.stats;
        writeln!(
            out,
            "{:<16} {:<14} {:<5} {:>8} {:>10} {:>10} {:>10} {:>5}us {:>6} {:>5}  {}",
            r.name,
            r.device.as_deref().unwrap_or(&r.state),
            r.transport,
            r.pid,
            s.commands,
            isoe_size::describe_bytes(s.read_bytes),
            isoe_size::describe_bytes(s.write_bytes),
            s.latency_mean_us(),
            s.errors,
            s.reconnects,
            r.urls.join(" ")
        )?;
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
    if state::name_in_use(&name) {
        return Err(Failure::Usage(format!(
            "a device named {name} is attached already (isoe attach --list); give --name"
        )));
    }
    let configs = settings
        .urls
        .iter()
        .map(|url| session_config(url, &settings))
        .collect::<Result<Vec<_>, _>>()?;
    let kind = choose_kind(settings.transport)?;
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
    };
    let served = match kind {
        Kind::Ublk => {
            let options = ublk::Options {
                queue_depth: settings.queue_depth,
                recover: resumable(&name, &settings),
            };
            if let Some(id) = options.recover {
                eprintln!("isoe attach: resuming ublk device {id}, whose attach was killed");
            }
            let mut device = ublk::UblkDevice::create(&lu.geometry, options)
                .map_err(|e| Failure::Operational(e.to_string()))?;
            watch.record.ublk_id = Some(device.dev_id());
            serve_device(&mut engine, session, &lu, &mut device, &mut watch)
        }
        Kind::Nbd => {
            let options = nbd::Options {
                queue_depth: settings.queue_depth,
                ..nbd::Options::default()
            };
            let mut device = nbd::Nbd::open(&lu.geometry, options)
                .map_err(|e| Failure::Operational(format!("NBD: {e}")))?;
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

/// The ublk device a killed attach of this name left quiesced, if it was
/// serving the same LU: the new attach resumes it, and the file system on
/// it never notices.
fn resumable(name: &str, settings: &Settings) -> Option<u32> {
    let record = state::orphan(name)?;
    let id = record.ublk_id?;
    if record.urls != settings.urls {
        eprintln!(
            "isoe attach: ublk device {id} of a killed attach named {name} served {}, not this LU: \
             not resuming it (isoe detach {name} deletes it)",
            record.urls.join(" ")
        );
        return None;
    }
    // The kernel quiesces it once it sees its server gone; creating with
    // `recover` waits for that.
    ublk::info(id).ok()?.orphaned().then_some(id)
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
        let index = engine
            .open_multipath(configs, options)
            .map_err(|e| Failure::Operational(chap_args::login_failure_text(&e, chap.as_ref())))?;
        return Ok((index, lun));
    }
    let (config, _) = configs.into_iter().next().expect("one URL at least");
    let session = engine
        .login(config)
        .map_err(|e| Failure::Operational(chap_args::login_failure_text(&e, chap.as_ref())))?;
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
}

impl Observer for Watch {
    fn ready(&mut self, path: &Path) -> io::Result<()> {
        self.record.device = Some(path.display().to_string());
        self.record.state = "serving".into();
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
            self.record.state = "stopping".into();
        }
        if let Err(e) = self.record.save() {
            tracing::debug!("cannot write the state file: {e}");
        }
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}
