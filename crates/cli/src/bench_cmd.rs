//! `isoe bench`: arguments to workloads, runs, and their output.

mod fill;

use crate::chap_args::{self, ChapArgs};
use clap::Args;
use isoe_bench::halt::ErrorBound;
use isoe_bench::profiles::{self, Profile};
use isoe_bench::run::{self, RunConfig, SessionTemplate};
use isoe_bench::{BenchResult, Workload};
use isoe_initiator::{IscsiUrl, MultipathOptions, SocketOptions};
use isoe_wire::login::InitiatorChap;
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Arguments of `isoe bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Targets to drive: iscsi://[user[%password]@]host[:port]/IQN/LUN (several = several volumes at once).
    #[arg(value_name = "URL", required_unless_present = "list_profiles")]
    urls: Vec<String>,
    /// Print the named workloads and exit.
    #[arg(long)]
    list_profiles: bool,
    /// Write every block of each URL's LU once, LBA 0 to the last, with
    /// data that is neither zeros nor one block repeated, then exit: a
    /// read benchmark must read written data (a memory LU makes zeros up
    /// for blocks never written). --bs is the write size (default 1 MiB),
    /// --qd the writes in flight per LU (default 8); reads nothing.
    #[arg(
        long,
        conflicts_with_all = [
            "duration", "ramp", "profiles", "matrix", "verify", "read_pct",
            "random_pct", "workers", "sessions", "series", "multipath",
            "max_error_pct", "target_pid",
        ]
    )]
    fill: bool,
    /// Drive only the first SIZE bytes of each LU (as fio's --size), or
    /// with --fill write only those (rounded up to whole blocks): a run
    /// reads only what a fill of the same span wrote; by default the whole LU.
    #[arg(long, value_name = "SIZE", value_parser = parse_span)]
    span: Option<u64>,
    /// A named workload (repeatable; "all" runs every one). Options below override its values.
    #[arg(long = "profile", value_name = "NAME")]
    profiles: Vec<String>,
    /// Seed 003's matrix: workers {1,2,4,8} x QD {1,4,16,32}, read then write.
    #[arg(long, conflicts_with = "profiles")]
    matrix: bool,
    /// I/O size: bytes or 4k, 256KiB, 1MiB (k = K = KB = KiB = 1024; every SIZE alike).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    bs: Option<u32>,
    /// Share of reads, 0-100.
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u8).range(0..=100))]
    read_pct: Option<u8>,
    /// Share of random accesses, 0-100 (the rest sequential).
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u8).range(0..=100))]
    random_pct: Option<u8>,
    /// Commands in flight per worker per URL, shared evenly by its
    /// --sessions (each keeps its share, as each fio job keeps its iodepth).
    #[arg(long, value_name = "N")]
    qd: Option<u32>,
    /// Worker threads, each with its own sessions.
    #[arg(long, value_name = "N")]
    workers: Option<u32>,
    /// Sessions per worker per URL.
    #[arg(long, value_name = "N", default_value_t = 1)]
    sessions: u32,
    /// Connections per session (MC/S).
    #[arg(long, value_name = "N", default_value_t = 1)]
    connections: u32,
    /// Measured seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    ramp: f64,
    /// Write the results as JSON lines (one object per run) to FILE ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The target's PID, to report its CPU (found automatically for a target on this machine).
    #[arg(long, value_name = "PID")]
    target_pid: Option<u32>,
    /// Write patterns carrying LBA and generation; check every read; mismatches fail the run.
    #[arg(long)]
    verify: bool,
    /// The URLs are paths of one logical unit (say, one per gateway): drive
    /// it as one volume through the path ALUA says is optimized, failing
    /// over to another when a path dies. URLs of different LUs are refused.
    #[arg(long)]
    multipath: bool,
    /// With --multipath: how long a command may wait for a path that serves
    /// it before it fails.
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "multipath",
        value_parser = parse_seconds
    )]
    failover_timeout: Option<f64>,
    /// Stop the run when a worker's failed commands pass PCT percent of its
    /// completed ones (judged from 1000 completions on; 100 = never). A run
    /// also stops after 32 failures in a row, and at once when its LUN is
    /// gone (LOGICAL UNIT NOT SUPPORTED).
    #[arg(long, value_name = "PCT", default_value_t = 1.0, value_parser = parse_pct)]
    max_error_pct: f64,
    /// No live progress line.
    #[arg(long)]
    no_progress: bool,
    /// Also print the measured window second by second under each table
    /// (the JSON always has it, as `series`).
    #[arg(long)]
    series: bool,
    /// InitiatorName.
    #[arg(long, value_name = "IQN", default_value = isoe_initiator::DEFAULT_INITIATOR_NAME)]
    initiator_name: String,
    #[command(flatten)]
    chap: ChapArgs,
    /// HeaderDigest=CRC32C.
    #[arg(long)]
    header_digest: bool,
    /// DataDigest=CRC32C.
    #[arg(long)]
    data_digest: bool,
    /// ImmediateData (yes/no).
    #[arg(long, value_name = "YES|NO", value_parser = parse_yes_no)]
    immediate_data: Option<bool>,
    /// InitialR2T (yes/no).
    #[arg(long, value_name = "YES|NO", value_parser = parse_yes_no)]
    initial_r2t: Option<bool>,
    /// MaxRecvDataSegmentLength we declare.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_recv_data_segment_length: Option<u32>,
    /// FirstBurstLength we offer.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    first_burst_length: Option<u32>,
    /// MaxBurstLength we offer.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_burst_length: Option<u32>,
    /// TCP_NODELAY (Nagle off); yes by default.
    // A bool field is a bare flag to clap unless the action says it takes a
    // value: without it "--nodelay no" made "no" a URL.
    #[arg(
        long,
        value_name = "YES|NO",
        value_parser = parse_yes_no,
        default_value = "yes",
        action = clap::ArgAction::Set
    )]
    nodelay: bool,
    /// TCP_QUICKACK after every receive (delayed ACK off).
    #[arg(long)]
    quickack: bool,
    /// Fixed SO_RCVBUF (stops receive-window auto-tuning).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    rcvbuf: Option<u32>,
    /// Fixed SO_SNDBUF; 256 KiB by default (paces Data-Out to what the
    /// socket drains), 0 = the kernel's auto-tuning.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    sndbuf: Option<u32>,
    /// SO_BUSY_POLL microseconds.
    #[arg(long, value_name = "US")]
    busy_poll: Option<u32>,
}

/// A SIZE flag: the grammar of [`isoe_size`] (`4k`, `256KiB`, `1m`, `512`;
/// every unit a power of 1024), as in lab plans and target configurations,
/// below 4 GiB.
pub(crate) fn parse_size(text: &str) -> Result<u32, String> {
    let bytes = isoe_size::parse_bytes(text).map_err(|e| e.to_string())?;
    u32::try_from(bytes).map_err(|_| format!("{text:?} is too large: at most 4294967295 bytes"))
}

/// A SIZE of at least one byte, as large as an LU may be.
fn parse_span(text: &str) -> Result<u64, String> {
    match isoe_size::parse_bytes(text).map_err(|e| e.to_string())? {
        0 => Err(format!("{text:?}: a span of at least one block")),
        bytes => Ok(bytes),
    }
}

/// A positive number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
        return Err(format!(
            "{text:?}: expected more than 0 and at most 3600 seconds"
        ));
    }
    Ok(seconds)
}

/// A percentage, 0 to 100.
fn parse_pct(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(pct),
        _ => Err(format!("{text:?}: expected a percentage from 0 to 100")),
    }
}

fn parse_yes_no(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "on" | "true" | "1" => Ok(true),
        "no" | "off" | "false" | "0" => Ok(false),
        _ => Err(format!("{text:?}: expected yes or no")),
    }
}

/// The signal that cut a run short, and the flag the runs watch.
struct Interrupt {
    /// Set by SIGINT or SIGTERM: the run in progress ends its window early.
    stop: Arc<AtomicBool>,
    /// The number of the signal last received, 0 for none.
    signal: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Watches SIGINT and SIGTERM: the first ends the run in progress early
    /// (it is measured as is and its result says `interrupted`, the runs
    /// after it do not start); a second one ends the process at once with
    /// the same status, should draining the commands in flight hang.
    fn register() -> Result<Interrupt, String> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(AtomicBool::new(false));
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM] {
            // The shutdown must be registered first: it checks the flag
            // before the first signal's own action sets it.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, stop.clone())
                .map_err(|e| e.to_string())?;
            signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)
                .map_err(|e| e.to_string())?;
            signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
        }
        Ok(Interrupt { stop, signal })
    }

    /// 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as a
    /// shell reports a process a signal ended; None when none came.
    fn exit_status(&self) -> Option<u8> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            sig => Some(u8::try_from(128 + sig).unwrap_or(u8::MAX)),
        }
    }
}

/// Runs `isoe bench`: exits 0 when every run was clean (or every LU was
/// filled), 1 on a run that stopped itself (its LUN gone, failures past
/// the bound), failed commands, verify mismatches, a failed fill or an
/// error, and 128 + the signal's number
/// (130 for SIGINT, 143 for SIGTERM) when a signal cut the runs short, its
/// JSON written all the same with `"interrupted": true`.
pub fn run(args: BenchArgs) -> ExitCode {
    if args.list_profiles {
        print!("{}", profiles::list_text());
        return ExitCode::SUCCESS;
    }
    let interrupt = match Interrupt::register() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("isoe bench: error: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = if args.fill {
        fill::fill_and_report(&args, &interrupt.stop).map(|()| true)
    } else {
        plan_and_run(&args, &interrupt.stop)
    };
    if let Some(status) = interrupt.exit_status() {
        if let Err(e) = outcome {
            eprintln!("isoe bench: error: {e}");
        }
        eprintln!("isoe bench: interrupted by a signal: exit status {status}");
        return ExitCode::from(status);
    }
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("isoe bench: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The workloads asked for, in run order.
fn workloads(args: &BenchArgs, redacted: &[String]) -> Result<Vec<Workload>, String> {
    let (duration, ramp) = (args.duration, args.ramp);
    let mut list = Vec::new();
    if args.matrix {
        for cell in profiles::matrix() {
            list.push(Workload::from_matrix_cell(
                &cell,
                redacted.to_vec(),
                duration,
                ramp,
            ));
        }
    } else if args.profiles.is_empty() {
        // Custom: 4 KiB random read at QD 32 unless told otherwise.
        list.push(Workload {
            profile: None,
            block_size_bytes: 4096,
            read_pct: 100,
            random_pct: 100,
            queue_depth: 32,
            workers: 1,
            sessions: 1,
            connections: 1,
            duration_s: duration,
            ramp_s: ramp,
            urls: redacted.to_vec(),
            verify: false,
            multipath: false,
            span_bytes: None,
        });
    } else {
        for name in &args.profiles {
            let chosen: Vec<&Profile> = if name == "all" {
                profiles::profiles().iter().collect()
            } else {
                vec![profiles::find(name).ok_or_else(|| {
                    format!("no profile named {name:?}; `isoe bench --list-profiles` lists them")
                })?]
            };
            for p in chosen {
                list.push(Workload::from_profile(p, redacted.to_vec(), duration, ramp));
            }
        }
    }
    for w in &mut list {
        if let Some(v) = args.bs {
            w.block_size_bytes = v;
        }
        if let Some(v) = args.read_pct {
            w.read_pct = v;
        }
        if let Some(v) = args.random_pct {
            w.random_pct = v;
        }
        if !args.matrix {
            if let Some(v) = args.qd {
                w.queue_depth = v;
            }
            if let Some(v) = args.workers {
                w.workers = v;
            }
        }
        w.sessions = args.sessions;
        w.connections = args.connections;
        w.verify = args.verify;
        w.multipath = args.multipath;
        w.span_bytes = args.span;
        w.validate().map_err(|e| e.to_string())?;
    }
    Ok(list)
}

/// How the run's sessions log in; `chap` is each URL's, from
/// [`url_chap`].
fn template(args: &BenchArgs, chap: Vec<(IscsiUrl, InitiatorChap)>) -> SessionTemplate {
    SessionTemplate {
        initiator_name: args.initiator_name.clone(),
        header_digest: args.header_digest,
        data_digest: args.data_digest,
        socket: SocketOptions {
            nodelay: args.nodelay,
            quickack: args.quickack,
            rcvbuf_bytes: args.rcvbuf,
            sndbuf_bytes: match args.sndbuf {
                None => SocketOptions::default().sndbuf_bytes,
                Some(0) => None,
                Some(bytes) => Some(bytes),
            },
            busy_poll_us: args.busy_poll,
        },
        chap,
        immediate_data: args.immediate_data,
        initial_r2t: args.initial_r2t,
        max_recv_data_segment_length: args.max_recv_data_segment_length,
        first_burst_length: args.first_burst_length,
        max_burst_length: args.max_burst_length,
    }
}

/// The CHAP each URL logs in with: the same rules as every initiator
/// command's (flags, then ISOE_CHAP_SECRET, then the URL's user and password).
fn url_chap(urls: &[IscsiUrl], args: &ChapArgs) -> Result<Vec<(IscsiUrl, InitiatorChap)>, String> {
    let mut chap = Vec::new();
    for url in urls {
        let resolved = chap_args::chap_config(url.user.as_deref(), url.password.as_ref(), args)
            .map_err(|e| format!("{url}: {e}"))?;
        chap.extend(resolved.map(|c| (url.clone(), c)));
    }
    Ok(chap)
}

/// A run's error for people: a refused login says what to check.
fn run_error_text(e: &run::RunError, session: &SessionTemplate) -> String {
    match e {
        run::RunError::Login { url, source } => {
            let chap = session
                .chap
                .iter()
                .find(|(u, _)| u.to_string() == *url)
                .map(|(_, c)| c);
            format!(
                "{url}: {}",
                chap_args::login_failure_text(source, chap, chap_args::Secrets::Flags)
            )
        }
        other => other.to_string(),
    }
}

/// Where `--json` goes: the file, created, or stdout for "-"; None
/// without the flag.
fn open_json(args: &BenchArgs) -> Result<Option<Box<dyn Write>>, String> {
    Ok(match &args.json {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(p) => {
            Some(Box::new(File::create(p).map_err(|e| {
                format!("cannot create {}: {e}", p.display())
            })?))
        }
    })
}

/// Ok(true) when every run finished without errors or mismatches; stops
/// early when `stop` is set.
fn plan_and_run(args: &BenchArgs, stop: &Arc<AtomicBool>) -> Result<bool, String> {
    let mut urls = Vec::new();
    for u in &args.urls {
        urls.push(IscsiUrl::parse(u).map_err(|e| e.to_string())?);
    }
    let redacted: Vec<String> = urls.iter().map(ToString::to_string).collect();
    let list = workloads(args, &redacted)?;
    let session = template(args, url_chap(&urls, &args.chap)?);
    let mut json = open_json(args)?;
    let json_to_stdout = args.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    let progress = !args.no_progress && std::io::stderr().is_terminal();
    let mut clean = true;
    for workload in list {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = workload.profile.clone().unwrap_or_else(|| "custom".into());
        if !json_to_stdout {
            println!("== {name}: {}", describe(&workload));
        }
        let outcome = run::run(RunConfig {
            workload,
            urls: urls.clone(),
            multipath: multipath_options(args),
            session: session.clone(),
            target_pid: args.target_pid,
            progress,
            stop: stop.clone(),
            error_bound: ErrorBound {
                max_error_pct: args.max_error_pct,
            },
        })
        .map_err(|e| run_error_text(&e, &session))?;
        let result = BenchResult::compute(&outcome.measurements);
        if !json_to_stdout {
            print_outcome(args, &outcome, &result);
        }
        clean &= warn_of_failures(&name, &outcome, &result);
        if let Some(out) = json.as_mut() {
            let line = serde_json::to_string(&outcome.json(&result)).map_err(|e| e.to_string())?;
            writeln!(out, "{line}").map_err(|e| format!("writing JSON: {e}"))?;
            out.flush().map_err(|e| format!("writing JSON: {e}"))?;
        }
    }
    Ok(clean)
}

/// A run's table and what only the runner knows, on stdout.
fn print_outcome(args: &BenchArgs, outcome: &run::RunOutcome, result: &BenchResult) {
    print!("{}", result.table());
    if args.series && result.stopped.is_none() {
        print!("{}", result.series_table());
    }
    if outcome.total_ios > 0 {
        let e = outcome.engine;
        println!(
            "  syscalls per I/O (initiator): {:.2}; reconnects {}",
            (e.sends + e.recvs + e.polls) as f64 / outcome.total_ios as f64,
            e.reconnects
        );
    }
    // The result's own run: its measurements hold what it reports.
    let m = &outcome.measurements;
    if m.workload.verify {
        println!(
            "  verify: {} reads checked, {} mismatches",
            outcome.verified_reads, m.verify_errors
        );
    }
    if let Some(m) = &outcome.multipath {
        print!("{}", multipath_lines(m, outcome.io_gap_max_s));
    }
}

/// The run's messages, why it stopped and what failed, on stderr; true
/// when nothing did.
fn warn_of_failures(name: &str, outcome: &run::RunOutcome, result: &BenchResult) -> bool {
    for m in &outcome.messages {
        eprintln!("isoe bench: {m}");
    }
    if let Some(why) = &result.stopped {
        eprintln!("isoe bench: {name}: stopped: {why}");
    }
    let verify_errors = outcome.measurements.verify_errors;
    let failed = result.errors > 0 || verify_errors > 0 || result.stopped.is_some();
    if failed {
        eprintln!(
            "isoe bench: {name}: {} failed commands, {verify_errors} verify mismatches",
            result.errors
        );
    }
    !failed
}

/// The options of a multipath run, or None.
fn multipath_options(args: &BenchArgs) -> Option<MultipathOptions> {
    args.multipath.then(|| {
        let mut options = MultipathOptions::default();
        if let Some(s) = args.failover_timeout {
            options.failover_timeout = std::time::Duration::from_secs_f64(s);
        }
        options
    })
}

/// The multipath lines under a run's table: failovers, and each path.
fn multipath_lines(m: &run::MultipathOutcome, io_gap_max_s: f64) -> String {
    let mut out = format!(
        "  multipath: {} failover(s), {} command(s) reissued, {} retried, {} failed for want \
         of a path; longest failover gap {:.3} s, longest time without an answer {:.3} s\n",
        m.failovers, m.reissued, m.retried, m.expired, m.failover_gap_max_s, io_gap_max_s
    );
    for (i, p) in m.paths.iter().enumerate() {
        let group = p
            .target_port_group
            .map_or_else(|| "no group".to_string(), |g| format!("group {g}"));
        let state = p.alua_state.as_deref().unwrap_or("state unknown");
        out.push_str(&format!(
            "    path {} {}: {group}, {state}{}, {}: {} commands, {} connection loss(es){}\n",
            i + 1,
            p.url,
            if p.preferred { " (preferred)" } else { "" },
            p.status,
            p.commands,
            p.downs,
            p.reason
                .as_deref()
                .map_or_else(String::new, |r| format!("; last: {r}"))
        ));
    }
    out
}

fn describe(w: &Workload) -> String {
    format!(
        "{} B, {}% read, {}% random, QD {} x {} worker(s), {} session(s) x {} connection(s), {} URL(s){}, {} s + {} s ramp{}",
        w.block_size_bytes,
        w.read_pct,
        w.random_pct,
        w.queue_depth,
        w.workers,
        w.sessions,
        w.connections,
        w.urls.len(),
        if w.multipath {
            " as paths of one LU"
        } else {
            ""
        },
        w.duration_s,
        w.ramp_s,
        if w.verify { ", verified" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_the_grammar_shared_with_lab_and_target() {
        for (text, bytes) in [
            ("4k", 4096),
            ("4KiB", 4096),
            ("4KB", 4096),
            ("256KiB", 262_144),
            ("1M", 1 << 20),
            ("1.5m", 3 << 19),
            ("512", 512),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        assert_eq!(
            parse_size("ten").unwrap_err(),
            "expected a size like 4k, 256KiB or 1MiB, found \"ten\""
        );
        assert!(parse_size("8g").unwrap_err().contains("too large"));
        assert!(parse_size("0.5k").is_ok());
        assert!(parse_size("0.3k").unwrap_err().contains("whole number"));
    }

    #[test]
    fn size_flags_take_the_shared_grammar() {
        let b = parse(&["--bs".into(), "4KiB".into(), "--rcvbuf".into(), "1m".into()]);
        assert_eq!(b.bs, Some(4096));
        assert_eq!(b.rcvbuf, Some(1 << 20));
    }

    #[derive(clap::Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }

    #[test]
    fn sndbuf_defaults_to_pacing_and_zero_leaves_auto_tuning() {
        let sndbuf = |extra: &[&str]| {
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            template(&parse(&extra), Vec::new()).socket.sndbuf_bytes
        };
        assert_eq!(sndbuf(&[]), Some(isoe_initiator::DEFAULT_SNDBUF_BYTES));
        assert_eq!(sndbuf(&["--sndbuf", "0"]), None);
        assert_eq!(sndbuf(&["--sndbuf", "1m"]), Some(1 << 20));
    }

    /// `isoe bench URL EXTRA...` parsed; panics when refused.
    pub(super) fn parse(extra: &[String]) -> BenchArgs {
        let argv = ["bench", "iscsi://10.99.1.2/iqn.2026-11.io.isoe:lab/0"]
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().cloned());
        match <Bench as clap::Parser>::try_parse_from(argv) {
            Ok(b) => b.args,
            Err(e) => panic!("isoe bench refuses {extra:?}: {e}"),
        }
    }

    /// What clap says of `isoe bench URL EXTRA...`, when it refuses it.
    fn refusal(extra: &[&str]) -> Option<String> {
        let argv = ["bench", "iscsi://10.99.1.2/iqn.2026-11.io.isoe:lab/0"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string());
        <Bench as clap::Parser>::try_parse_from(argv)
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn the_fill_refuses_the_options_of_a_measured_run_by_name() {
        for extra in [
            &["--duration", "5"][..],
            &["--ramp", "1"],
            &["--profile", "oltp-8k"],
            &["--matrix"],
            &["--verify"],
            &["--read-pct", "50"],
            &["--random-pct", "0"],
            &["--workers", "2"],
            &["--sessions", "2"],
            &["--series"],
            &["--multipath"],
            &["--max-error-pct", "5"],
            &["--target-pid", "1"],
        ] {
            let args: Vec<&str> = std::iter::once("--fill")
                .chain(extra.iter().copied())
                .collect();
            let err = refusal(&args).unwrap_or_else(|| panic!("{args:?} accepted"));
            assert!(
                err.contains("'--fill' cannot be used with") && err.contains(extra[0]),
                "{args:?}: {err}"
            );
        }
        // What a fill takes: the write size, the depth, the session options.
        let b = parse(
            &[
                "--fill",
                "--bs",
                "256k",
                "--qd",
                "4",
                "--connections",
                "2",
                "--json",
                "-",
            ]
            .map(String::from),
        );
        assert!(b.fill);
        assert_eq!((b.bs, b.qd), (Some(262_144), Some(4)));
    }

    #[test]
    fn multipath_flags_parse_and_bad_ones_are_refused() {
        let b = parse(&[
            "--multipath".into(),
            "--failover-timeout".into(),
            "2.5".into(),
        ]);
        assert!(b.multipath);
        let options = multipath_options(&b).expect("multipath options");
        assert_eq!(
            options.failover_timeout,
            std::time::Duration::from_millis(2500)
        );
        assert_eq!(multipath_options(&parse(&[])), None);
        let default = multipath_options(&parse(&["--multipath".into()])).unwrap();
        assert_eq!(default, MultipathOptions::default());
        for (extra, want) in [
            (&["--failover-timeout", "5"][..], "--multipath"),
            (
                &["--multipath", "--failover-timeout", "0"][..],
                "more than 0",
            ),
            (
                &["--multipath", "--failover-timeout", "soon"][..],
                "not a number",
            ),
        ] {
            let argv = ["bench", "iscsi://10.99.1.2/iqn.2026-11.io.isoe:lab/0"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string());
            let err = match <Bench as clap::Parser>::try_parse_from(argv) {
                Ok(_) => panic!("{extra:?} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains(want), "{extra:?}: {want:?} in {err}");
        }
    }

    #[test]
    fn the_error_bound_defaults_to_the_libraries_and_its_help_states_it() {
        use isoe_bench::halt::{CONSECUTIVE_FAILURES_MAX, MIN_COMPLETIONS};
        let bound = ErrorBound::default().max_error_pct;
        assert_eq!(parse(&[]).max_error_pct, bound);
        let b = parse(&["--max-error-pct".into(), "5".into()]);
        assert_eq!(b.max_error_pct, 5.0);
        assert!(parse_pct("101").is_err() && parse_pct("-1").is_err());
        let help = <Bench as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for said in [
            format!("judged from {MIN_COMPLETIONS} completions on"),
            format!("after {CONSECUTIVE_FAILURES_MAX} failures in a row"),
            format!("[default: {bound}]"),
        ] {
            assert!(help.contains(&said), "{said:?} not in {help}");
        }
    }

    /// What the lab records as a run's commands in flight is what `isoe
    /// bench` is told to keep: the lab's arguments for dell-2013 (40 in
    /// flight, seed 001's 8 volumes x 5 threads) and qsan-2012 (8) on the
    /// two-portal base SAN, parsed as `isoe bench` parses them.
    #[test]
    fn the_lab_s_in_flight_is_what_bench_is_told_to_keep() {
        use isoe_lab::plan::Plan;
        let second = "iscsi://10.99.2.2/iqn.2026-11.io.isoe:lab/0".to_string();
        for (name, total) in [("dell-2013", 40), ("qsan-2012", 8)] {
            let plan = Plan::embedded(name).unwrap();
            for case in plan.resolved_cases() {
                if case.topology.paths() != Some(2)
                    || case.knobs.initiator_impl() != isoe_lab::knobs::InitiatorImpl::Isoe
                {
                    continue;
                }
                for w in case.workloads.iter().filter_map(|w| plan.workload(w)) {
                    let shape = w.shape(&case.knobs, 2);
                    let mut extra = vec![second.clone()];
                    extra.extend(w.bench_args(&case.knobs, &shape));
                    extra.extend(case.knobs.bench_args());
                    let args = parse(&extra);
                    let run = workloads(&args, &args.urls).unwrap();
                    let what = format!("{name}/{}/{}: {extra:?}", case.name, w.name);
                    assert_eq!(run.len(), 1, "{what}");
                    assert_eq!(isoe_lab::record::bench_in_flight(&run[0]), total, "{what}");
                }
            }
        }
    }

    /// The lab passes its initiator-side knobs to `isoe bench` as
    /// arguments: every knob, both ways, must parse and land where it means.
    #[test]
    fn every_lab_knob_parses_as_bench_arguments() {
        use isoe_lab::knobs::KnobSet;
        for on in [true, false] {
            let knobs = KnobSet {
                header_digest: Some(on),
                data_digest: Some(on),
                immediate_data: Some(on),
                initial_r2t: Some(!on),
                max_recv_data_segment_length: Some(65_536),
                first_burst_length: Some(131_072),
                max_burst_length: Some(524_288),
                nodelay: Some(on),
                quickack: Some(on),
                rcvbuf_bytes: Some(1 << 20),
                sndbuf_bytes: Some(2 << 20),
                busy_poll_us: Some(50),
                connections: Some(2),
                sessions: Some(3),
                workers: Some(4),
                ..KnobSet::default()
            };
            let b = parse(&knobs.bench_args());
            assert_eq!(b.header_digest, on);
            assert_eq!(b.data_digest, on);
            assert_eq!(b.immediate_data, Some(on));
            assert_eq!(b.initial_r2t, Some(!on));
            assert_eq!(b.max_recv_data_segment_length, Some(65_536));
            assert_eq!(b.first_burst_length, Some(131_072));
            assert_eq!(b.max_burst_length, Some(524_288));
            assert_eq!(b.nodelay, on, "nodelay {on}");
            assert_eq!(b.quickack, on);
            assert_eq!(b.rcvbuf, Some(1 << 20));
            assert_eq!(b.sndbuf, Some(2 << 20));
            assert_eq!(b.busy_poll, Some(50));
            assert_eq!(b.connections, 2);
            assert_eq!(b.sessions, 3);
            assert_eq!(b.workers, Some(4));
        }
        // Nagle stays off unless asked for.
        assert!(parse(&[]).nodelay);
    }
}
