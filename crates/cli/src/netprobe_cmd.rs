//! `isoe netprobe`: how long the network alone takes to carry a command and
//! its answer. A raw TCP request and response of a command's sizes, timed
//! one at a time over the path iSCSI takes (`isoe_lab::rr`), so that a
//! command's latency can be split into network, initiator and target
//! (`isoe_lab::components`). One end serves (`--serve`), the other probes.
//!
//! Exit codes: 0 done (a server: stopped by SIGTERM or SIGINT); 1 the probe
//! failed (nothing listening, a timeout, a dropped connection); 2 a usage
//! error.

use crate::bench_cmd::parse_size;
use isoe_lab::rr::{self, RrServer, RR_BYTES_MAX};
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
    /// until SIGTERM or SIGINT, one connection at a time.
    #[arg(long, value_name = "ADDR:PORT")]
    serve: Option<SocketAddr>,
    /// Bytes out per exchange: a SCSI Command PDU is 48; with 4 KiB of
    /// immediate data, 4144.
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
    /// Seconds one exchange (or the connect) may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout: u64,
    /// Print the figures as one JSON object (count, and min, mean, p50,
    /// p90, p99, p999, max in µs).
    #[arg(long)]
    json: bool,
}

/// A SIZE of at most [`RR_BYTES_MAX`].
fn exchange_size(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text)?;
    if bytes > RR_BYTES_MAX {
        return Err(format!("{text:?}: at most 16MiB per exchange"));
    }
    Ok(bytes)
}

pub fn run(args: NetprobeArgs) -> ExitCode {
    match (args.serve, args.to) {
        (Some(listen), _) => serve(listen),
        (None, Some(to)) => probe(&args, to),
        (None, None) => unreachable!("clap requires one"),
    }
}

fn serve(listen: SocketAddr) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("isoe netprobe: watching signals: {e}");
            return ExitCode::from(1);
        }
    }
    let server = match RrServer::start(listen) {
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

fn probe(args: &NetprobeArgs, to: SocketAddr) -> ExitCode {
    let timeout = Duration::from_secs(args.timeout);
    let s = match rr::probe(
        to,
        args.request,
        args.response,
        args.warmup,
        args.count,
        timeout,
    ) {
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
