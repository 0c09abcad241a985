//! `isoe netprobe`: what the network alone costs to carry a command and its
//! answer. Raw TCP requests and responses of a command's sizes over the
//! path iSCSI takes (`isoe_lab::rr`). One end serves (`--serve`, every
//! connection on one thread); the other either times exchanges one at a
//! time, so that a command's latency can be split into network, initiator
//! and target (`isoe_report::components`), or, with `--duration`, keeps
//! `--depth` exchanges in flight on each of `--connections` connections
//! and reports the rate and each end's CPU per exchange: the floor under
//! the CPU per I/O of an iSCSI run of the same shape. With `--stream tcp`
//! or `--stream udp` and `--duration`, it sends bytes one way instead
//! (`--direction`), as seed 002's TCP and UDP stream tests, and reports
//! the throughput and each end's CPU per MB; the server needs no flag for
//! it, as the client's first message says what to serve.
//!
//! Exit codes: 0 done (a server: stopped by SIGTERM or SIGINT); 1 the probe
//! failed (nothing listening, a timeout, a dropped connection); 2 a usage
//! error.

use crate::bench_cmd::parse_size;
use isoe_bench::target_pid;
use isoe_lab::rr::{
    self, Direction, Exchange, LoadShape, RrServer, StreamKind, StreamShape, RR_BYTES_MAX,
};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct NetprobeArgs {
    /// The server to probe (`isoe netprobe --serve` on the target's host,
    /// at the address initiators reach the target by).
    #[arg(
        value_name = "ADDR:PORT",
        required_unless_present = "serve",
        conflicts_with = "serve"
    )]
    to: Option<SocketAddr>,
    /// Serve probes on ADDR:PORT (port 0: any; the address is printed)
    /// until SIGTERM or SIGINT.
    #[arg(long, value_name = "ADDR:PORT")]
    serve: Option<SocketAddr>,
    /// With --serve: send each response from 4 KiB pages taken at random
    /// out of SIZE bytes of written memory instead of one buffer hot in
    /// cache: the floor of a random read from a memory LUN of SIZE (up to
    /// 64GiB), which pays the same trips to memory.
    #[arg(long, value_name = "SIZE", requires = "serve", conflicts_with = "to", value_parser = parse_span)]
    span: Option<u64>,
    /// Bytes out per exchange, the probe's 8-byte header included: a SCSI
    /// Command PDU is 48; with 4 KiB of immediate data, 4144.
    #[arg(long, value_name = "SIZE", default_value = "48", value_parser = exchange_size)]
    request: u32,
    /// Bytes back per exchange: a 4 KiB read's Data-In with its status is
    /// 4144; a write's SCSI Response, 48.
    #[arg(long, value_name = "SIZE", default_value = "4144", value_parser = exchange_size)]
    response: u32,
    /// Exchanges timed.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    count: u32,
    /// Exchanges made first and not timed.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    warmup: u32,
    /// Load instead of probing: keep exchanges in flight for SECONDS
    /// (after --ramp) and report the rate and the CPU each end spends per
    /// exchange.
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, conflicts_with_all = ["count", "warmup"])]
    duration: Option<f64>,
    /// With --duration: seconds of load before the measured window.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = seconds, requires = "duration")]
    ramp: f64,
    /// With --duration: TCP connections, all driven by one thread.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "duration",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(rr::LOAD_CONNECTIONS_MAX)))]
    connections: u32,
    /// With --duration: exchanges in flight on each connection.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "duration",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(rr::LOAD_DEPTH_MAX)))]
    depth: u32,
    /// With --duration: a stream instead of exchanges, `tcp` (the
    /// client writes --msg bytes at a time) or `udp` (datagrams of --msg
    /// bytes); the server serves it without a flag of its own.
    #[arg(long, value_name = "KIND", value_enum, requires = "duration",
          conflicts_with_all = ["request", "response", "connections", "depth"])]
    stream: Option<StreamArg>,
    /// With --stream: which end sends, `client-to-server` or
    /// `server-to-client`.
    #[arg(
        long,
        value_enum,
        default_value = "client-to-server",
        requires = "stream"
    )]
    direction: DirectionArg,
    /// With --stream: bytes per write (TCP, default 128KiB as netperf's
    /// TCP_STREAM) or per datagram (UDP, 16 to 65507; default the largest
    /// that fits the path MTU unfragmented, 1472 at MTU 1500).
    #[arg(long, value_name = "SIZE", requires = "stream", value_parser = parse_size)]
    msg: Option<u32>,
    /// With --duration: the server's PID, to report its CPU (found
    /// automatically for a server on this machine).
    #[arg(long, value_name = "PID", requires = "duration")]
    server_pid: Option<u32>,
    /// Seconds one exchange (or the connect) may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout: u64,
    /// Print the figures as one JSON object (a probe: count, and min, mean,
    /// p50, p90, p99, p999, max in µs; a load: the shape, exchanges and
    /// exchanges_per_s, client_, server_ and system_cpu_us_per_exchange,
    /// steal_pct, and the latency as a probe's; a stream: stream,
    /// direction, msg, seconds, bytes, mb_per_s, for UDP datagrams_sent,
    /// datagrams_received, loss_pct and sent_mb_per_s, client_cpu_s,
    /// server_cpu_s, client_, server_ and system_cpu_us_per_mb, steal_pct).
    #[arg(long)]
    json: bool,
}

/// `--stream`'s values.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
enum StreamArg {
    Tcp,
    Udp,
}

/// `--direction`'s values.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
enum DirectionArg {
    ClientToServer,
    ServerToClient,
}

/// A SIZE of at most [`RR_BYTES_MAX`].
fn exchange_size(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text)?;
    if bytes > RR_BYTES_MAX {
        return Err(format!("{text:?}: at most 16MiB per exchange"));
    }
    Ok(bytes)
}

/// A SIZE the server can hold as its span.
fn parse_span(text: &str) -> Result<u64, String> {
    let bytes = isoe_size::parse_bytes(text).map_err(|e| e.to_string())?;
    if !(4096..=rr::RR_SPAN_MAX).contains(&bytes) {
        return Err(format!("{text:?}: a span from 4KiB to 64GiB"));
    }
    Ok(bytes)
}

/// Seconds, at least 0 and at most a day.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=86_400.0).contains(&s) => Ok(s),
        _ => Err(format!("{text:?}: seconds from 0 to 86400")),
    }
}

/// Seconds above 0.
fn positive_seconds(text: &str) -> Result<f64, String> {
    match seconds(text)? {
        s if s > 0.0 => Ok(s),
        _ => Err(format!("{text:?}: more than 0 seconds")),
    }
}

pub fn run(args: NetprobeArgs) -> ExitCode {
    match (args.serve, args.to) {
        (Some(listen), _) => serve(listen, args.span.unwrap_or(0)),
        (None, Some(to)) => match Exchange::new(args.request, args.response) {
            Err(e) => {
                eprintln!(
                    "isoe netprobe: --request {} --response {}: {e}",
                    args.request, args.response
                );
                ExitCode::from(2)
            }
            Ok(_) if args.stream.is_some() => stream(&args, to),
            Ok(exchange) if args.duration.is_some() => load(&args, to, exchange),
            Ok(exchange) => probe(&args, to, exchange),
        },
        (None, None) => unreachable!("clap requires one"),
    }
}

fn serve(listen: SocketAddr, span: u64) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("isoe netprobe: watching signals: {e}");
            return ExitCode::from(1);
        }
    }
    let server = match RrServer::start(listen, span) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("isoe netprobe: listening on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    println!("isoe netprobe: serving on {}", server.addr());
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    ExitCode::SUCCESS
}

fn probe(args: &NetprobeArgs, to: SocketAddr, exchange: Exchange) -> ExitCode {
    let timeout = Duration::from_secs(args.timeout);
    let s = match rr::probe(to, exchange, args.warmup, args.count, timeout) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("isoe netprobe: {to}: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&s).expect("plain numbers"));
    } else {
        println!(
            "isoe netprobe: {} exchanges with {to}, {} B out and {} B back: \
             mean {:.1} µs, p50 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
            s.count,
            args.request,
            args.response,
            s.mean_us,
            s.p50_us,
            s.p99_us,
            s.p999_us,
            s.max_us
        );
    }
    ExitCode::SUCCESS
}

/// The server's PID: given, or found for a server on this machine.
fn server_pid(args: &NetprobeArgs, to: SocketAddr) -> Option<u32> {
    args.server_pid.or_else(|| {
        target_pid::is_local(&to.ip().to_string())
            .then(|| target_pid::listener_pid(to.port()))
            .flatten()
    })
}

fn stream(args: &NetprobeArgs, to: SocketAddr) -> ExitCode {
    let kind = match args.stream.expect("a stream") {
        StreamArg::Tcp => StreamKind::Tcp,
        StreamArg::Udp => StreamKind::Udp,
    };
    let direction = match args.direction {
        DirectionArg::ClientToServer => Direction::ClientToServer,
        DirectionArg::ServerToClient => Direction::ServerToClient,
    };
    let msg = match (args.msg, kind) {
        (Some(msg), _) => msg,
        (None, StreamKind::Tcp) => rr::stream::TCP_MSG_DEFAULT,
        (None, StreamKind::Udp) => match rr::stream::udp_msg_for_path(to) {
            Ok(msg) => msg,
            Err(e) => {
                eprintln!("isoe netprobe: the path MTU to {to}: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let shape = match StreamShape::new(kind, direction, msg) {
        Ok(shape) => shape,
        Err(e) => {
            eprintln!("isoe netprobe: --msg {msg}: {e}");
            return ExitCode::from(2);
        }
    };
    let ran = rr::stream(
        to,
        shape,
        Duration::from_secs_f64(args.ramp),
        Duration::from_secs_f64(args.duration.expect("a stream has a duration")),
        Duration::from_secs(args.timeout),
        server_pid(args, to),
    );
    let f = match printed(args, to, ran) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let per_mb = |v: Option<f64>| v.map_or_else(|| "unknown".to_string(), |v| format!("{v:.1}"));
    let udp = match (f.datagrams_sent, f.datagrams_received, f.loss_pct) {
        (Some(sent), Some(received), Some(loss)) => {
            format!(", {received} of {sent} datagrams received ({loss:.2}% lost)")
        }
        _ => String::new(),
    };
    println!(
        "isoe netprobe: {} stream {} with {to}, {} B messages, {:.1} s: {:.1} MB/s{udp}\n\
         CPU-µs per MB: client {}, server {}, whole machine {} (steal {:.1}%)",
        f.stream.as_str(),
        f.direction.as_str(),
        f.msg,
        f.seconds,
        f.mb_per_s,
        per_mb(f.client_cpu_us_per_mb),
        per_mb(f.server_cpu_us_per_mb),
        per_mb(f.system_cpu_us_per_mb),
        f.steal_pct,
    );
    ExitCode::SUCCESS
}

/// A stream's or a load's figures, or the exit code that ends the command
/// here: 1 with the reason when it failed, 0 once `--json` printed them.
fn printed<T: serde::Serialize>(
    args: &NetprobeArgs,
    to: SocketAddr,
    ran: Result<T, impl std::fmt::Display>,
) -> Result<T, ExitCode> {
    let f = ran.map_err(|e| {
        eprintln!("isoe netprobe: {to}: {e}");
        ExitCode::from(1)
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&f).expect("plain numbers"));
        return Err(ExitCode::SUCCESS);
    }
    Ok(f)
}

fn load(args: &NetprobeArgs, to: SocketAddr, exchange: Exchange) -> ExitCode {
    let shape = LoadShape {
        connections: args.connections,
        depth: args.depth,
        exchange,
    };
    let server_pid = server_pid(args, to);
    let ran = rr::load(
        to,
        shape,
        Duration::from_secs_f64(args.ramp),
        Duration::from_secs_f64(args.duration.expect("a load has a duration")),
        Duration::from_secs(args.timeout),
        server_pid,
    );
    let f = match printed(args, to, ran) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let server = match f.server_cpu_us_per_exchange {
        Some(us) => format!("{us:.2}"),
        None => "unknown (--server-pid)".into(),
    };
    println!(
        "isoe netprobe: {} connections x {} in flight with {to}, {} B out and {} B back, {:.1} s: \
         {:.0} exchanges/s, mean {:.1} µs, p99 {:.1}\n\
         CPU-µs per exchange: client {:.2}, server {server}, whole machine {:.2} (steal {:.1}%)",
        f.connections,
        f.depth,
        f.request,
        f.response,
        f.seconds,
        f.exchanges_per_s,
        f.latency.mean_us,
        f.latency.p99_us,
        f.client_cpu_us_per_exchange,
        f.system_cpu_us_per_exchange,
        f.steal_pct,
    );
    ExitCode::SUCCESS
}
