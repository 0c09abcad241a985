//! `isoe`: argument parsing and wiring; the logic lives in the crates.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

mod admin_cmd;
mod attach_cmd;
mod bench_cmd;
mod chap_args;
mod initiator_cmd;
mod lab_cmd;
mod logging;
mod netprobe_cmd;
mod target_cmd;

/// isoe: a software iSCSI stack with offload-class CPU efficiency.
#[derive(Parser, Debug)]
#[command(name = "isoe", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve LUNs over iSCSI. With no options: 127.0.0.1:3260,
    /// iqn.2026-11.io.isoe:target0, LUN 0 = 1 GiB memory.
    Target {
        /// Portal to listen on (repeatable); replaces the configured portals
        /// and portal groups: all in portal group 1, active/optimized.
        #[arg(long = "listen", value_name = "ADDR:PORT")]
        listen: Vec<SocketAddr>,
        /// TOML configuration file (portals, targets, LUNs, ACLs, parameters).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Check the configuration without starting: read and validate it,
        /// look at each LUN's store (creating nothing), bind-test each
        /// portal and the metrics address; exit 0 when nothing is wrong,
        /// 2 otherwise.
        #[arg(long)]
        check: bool,
    },
    /// Administer a running `isoe target` through its control socket: list
    /// sessions, add and remove LUNs, ACL entries, CHAP, portals, live.
    Admin(admin_cmd::AdminArgs),
    /// Drive targets with the seeds' workloads and measure throughput,
    /// latency and the CPU each side spends (METHODOLOGY.md).
    Bench(bench_cmd::BenchArgs),
    /// Rebuild the seeds' test beds in network namespaces, toggle one knob at
    /// a time against a baseline, and write a report (the main job; with no
    /// options it runs the `quick` plan).
    Lab(lab_cmd::LabArgs),
    /// Serve an iSCSI LU as a Linux block device (ublk, or NBD where ublk
    /// is missing) until SIGTERM or `isoe detach`; prints the device path.
    Attach(attach_cmd::AttachArgs),
    /// Flush and remove a device `isoe attach` serves.
    Detach(attach_cmd::DetachArgs),
    /// The guard of a ublk disk whose attach may die (started by `isoe
    /// attach`, not by hand).
    #[command(name = "attach-guard", hide = true)]
    AttachGuard(attach_cmd::GuardArgs),
    /// Time a raw TCP request and response of a command's sizes between
    /// initiator and target (the network's part of a command's latency);
    /// one end serves (--serve), the other probes.
    Netprobe(netprobe_cmd::NetprobeArgs),
    #[command(flatten)]
    Initiator(initiator_cmd::InitiatorCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Target {
            listen,
            config,
            check: true,
        } => target_cmd::check::run(config.as_deref(), &listen),
        Command::Target { listen, config, .. } => target_cmd::run(config.as_deref(), &listen),
        Command::Admin(args) => admin_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Lab(args) => lab_cmd::run(args),
        Command::Attach(args) => attach_cmd::run_attach(args),
        Command::Detach(args) => attach_cmd::run_detach(args),
        Command::AttachGuard(args) => attach_cmd::run_guard(args),
        Command::Netprobe(args) => netprobe_cmd::run(args),
        Command::Initiator(command) => initiator_cmd::run(command),
    }
}
