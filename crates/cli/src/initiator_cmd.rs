//! The initiator's subcommands: `discover`, `inquiry`, `capacity`, `read`,
//! `write` and `luns`, wired onto `isoe-initiator`.
//!
//! Each prints a report for people by default, or one JSON object on stdout
//! with `--json`. A failure prints `isoe CMD: error: ...` on stderr (or
//! `{"error": "..."}` on stdout with `--json`) and exits 1, or 2 when the
//! command line itself is wrong. CHAP secrets are never printed.
//!
//! Here: the arguments and the way results become output and exit codes.
//! [`login`] turns arguments into a session configuration, [`session`]
//! runs commands on a logged-in session, [`info`] and [`transfer`] are the
//! commands, [`display`] formats sizes and bytes.

mod display;
mod info;
mod login;
mod session;
mod transfer;

use crate::chap_args::ChapArgs;
use clap::{Args, Subcommand};
use isoe_initiator::{InitiatorError, DEFAULT_INITIATOR_NAME};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The initiator's subcommands, flattened into `isoe`'s.
#[derive(Subcommand, Debug)]
pub enum InitiatorCommand {
    /// Ask a portal which targets it serves (SendTargets discovery).
    Discover(DiscoverArgs),
    /// Show a LUN's standard INQUIRY data and its unit serial number.
    Inquiry(LunArgs),
    /// Show a LUN's size (READ CAPACITY 16).
    ///
    /// Sizes are given in bytes, in binary units (KiB, MiB, GiB, TiB: powers
    /// of 1024) and in decimal units (kB, MB, GB, TB: powers of 1000).
    Capacity(LunArgs),
    /// Read blocks from a LUN (READ 16, at most 1 MiB per command).
    ///
    /// Where the data goes: with -o FILE into FILE; with -o - to stdout as
    /// raw bytes; without -o, to stdout as raw bytes when stdout is a pipe or
    /// a file, and as a hex dump of the first 512 bytes when stdout is a
    /// terminal. With --json and no -o, the data is in the JSON object as hex
    /// (reads of at most 1 MiB).
    Read(ReadArgs),
    /// Write a file to a LUN (WRITE 16, at most 1 MiB per command).
    ///
    /// The file must be a whole number of the LUN's blocks and fit between
    /// --lba and the end of the LUN; both are checked before anything is
    /// sent. Unless --fua is given, a SYNCHRONIZE CACHE follows the writes,
    /// so a success means the data is on the target's stable storage.
    Write(WriteArgs),
    /// List a target's LUNs (REPORT LUNS) with each one's type, product and size.
    ///
    /// The URL may end at the target name; REPORT LUNS then goes to LUN 0.
    Luns(LunArgs),
}

/// How to log in: names, CHAP, timeouts, output form.
#[derive(Args, Debug)]
pub struct LoginArgs {
    /// InitiatorName to log in with.
    #[arg(long, value_name = "IQN", default_value = DEFAULT_INITIATOR_NAME)]
    initiator_name: String,
    #[command(flatten)]
    chap: ChapArgs,
    /// How long connecting, logging in or one request may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// Print one JSON object on stdout, errors included ({"error": "..."}).
    #[arg(long)]
    json: bool,
}

/// Digests (RFC 7143 §12.1): by default the target chooses.
#[derive(Args, Debug)]
pub struct DigestArgs {
    /// Require CRC32C header digests (the login fails if the target refuses them).
    #[arg(long)]
    header_digest: bool,
    /// Require CRC32C data digests (the login fails if the target refuses them).
    #[arg(long)]
    data_digest: bool,
}

/// `isoe discover`.
#[derive(Args, Debug)]
pub struct DiscoverArgs {
    /// The portal to ask: HOST[:PORT] (port 3260 by default), [IPv6]:PORT,
    /// or iscsi://[user[%password]@]HOST[:PORT].
    #[arg(value_name = "HOST[:PORT]")]
    portal: String,
    #[command(flatten)]
    login: LoginArgs,
}

/// Commands on one LUN (or target) named by a URL.
#[derive(Args, Debug)]
pub struct LunArgs {
    /// iscsi://[user[%password]@]host[:port]/IQN/LUN
    #[arg(value_name = "URL")]
    url: String,
    #[command(flatten)]
    login: LoginArgs,
    #[command(flatten)]
    digests: DigestArgs,
}

/// `isoe read`.
#[derive(Args, Debug)]
pub struct ReadArgs {
    #[command(flatten)]
    lun: LunArgs,
    /// The first logical block to read.
    #[arg(long, value_name = "N", default_value_t = 0)]
    lba: u64,
    /// How many logical blocks to read.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    blocks: u32,
    /// Write the data to FILE ("-": stdout, raw, even on a terminal).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `isoe write`.
#[derive(Args, Debug)]
pub struct WriteArgs {
    #[command(flatten)]
    lun: LunArgs,
    /// The first logical block to write (no default: a write to LBA 0 by
    /// mistake destroys a partition table).
    #[arg(long, value_name = "N")]
    lba: u64,
    /// The file whose bytes are written.
    #[arg(short, long, value_name = "FILE")]
    input: PathBuf,
    /// Set FUA on every WRITE (16) instead of a SYNCHRONIZE CACHE at the end.
    #[arg(long)]
    fua: bool,
}

impl InitiatorCommand {
    fn name(&self) -> &'static str {
        match self {
            InitiatorCommand::Discover(_) => "discover",
            InitiatorCommand::Inquiry(_) => "inquiry",
            InitiatorCommand::Capacity(_) => "capacity",
            InitiatorCommand::Read(_) => "read",
            InitiatorCommand::Write(_) => "write",
            InitiatorCommand::Luns(_) => "luns",
        }
    }

    fn json(&self) -> bool {
        match self {
            InitiatorCommand::Discover(a) => a.login.json,
            InitiatorCommand::Inquiry(a) | InitiatorCommand::Capacity(a) => a.login.json,
            InitiatorCommand::Luns(a) => a.login.json,
            InitiatorCommand::Read(a) => a.lun.login.json,
            InitiatorCommand::Write(a) => a.lun.login.json,
        }
    }
}

/// Why a command failed.
#[derive(Debug)]
enum Failure {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// The target, the network or a file failed us (exit 1).
    Operational(String),
}

impl From<InitiatorError> for Failure {
    fn from(e: InitiatorError) -> Failure {
        Failure::Operational(e.to_string())
    }
}

fn operational(text: impl Into<String>) -> Failure {
    Failure::Operational(text.into())
}

/// What a successful command prints.
struct Report {
    /// For people; None when stdout carried the data itself.
    human: Option<String>,
    /// For `--json`.
    json: Value,
}

/// Runs one subcommand and turns its result into output and an exit code.
pub fn run(command: InitiatorCommand) -> ExitCode {
    let (name, json) = (command.name(), command.json());
    let result = match command {
        InitiatorCommand::Discover(a) => info::discover(&a),
        InitiatorCommand::Inquiry(a) => info::inquiry(&a),
        InitiatorCommand::Capacity(a) => info::capacity(&a),
        InitiatorCommand::Read(a) => transfer::read(&a),
        InitiatorCommand::Write(a) => transfer::write(&a),
        InitiatorCommand::Luns(a) => info::luns(&a),
    };
    let mut stdout = io::stdout().lock();
    match result {
        Ok(report) => {
            let printed = if json {
                writeln!(stdout, "{}", report.json)
            } else {
                report
                    .human
                    .map_or(Ok(()), |text| stdout.write_all(text.as_bytes()))
            };
            match printed.and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("isoe {name}: error: writing to stdout: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(failure) => {
            let (code, text) = match failure {
                Failure::Usage(text) => (ExitCode::from(2), text),
                Failure::Operational(text) => (ExitCode::FAILURE, text),
            };
            if json {
                let _ = writeln!(stdout, "{}", json!({ "error": text }));
            } else {
                eprintln!("isoe {name}: error: {text}");
            }
            code
        }
    }
}

fn failure_text(f: Failure) -> String {
    match f {
        Failure::Usage(t) | Failure::Operational(t) => t,
    }
}
