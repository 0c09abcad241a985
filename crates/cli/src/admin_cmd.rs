//! `isoe admin`: talks to a running `isoe target` through its control
//! socket. Every change is put into force at once and written back to the
//! target's configuration file; `--json` prints the target's answer as it
//! came, for scripts.

use clap::{Args, Subcommand};
use isoe_target::admin::protocol::{
    Answer, Changed, ConnectionStatus, Counted, Keys, ListWhat as Shown, Listed, LoggedOut,
    Nothing, Refusal, Request, ServerInfo, Shown as Config, Status,
};
use isoe_target::admin::socket::client::{self, Peer, BUSY_WAIT_DEFAULT};
use isoe_target::metrics::snapshot::Snapshot;
use isoe_target::metrics::{LunTotals, OpTotals};
use serde_json::Value as Json;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `isoe admin` and its options.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// The target's control socket (`[control] socket`); by default
    /// /run/isoe/isoe.sock for root, $XDG_RUNTIME_DIR/isoe/isoe.sock otherwise.
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// Print the target's answer as JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Also trust a target that runs as this uid (root administering a
    /// target run as a user of its own); root and your own user always are.
    #[arg(long, value_name = "UID", global = true)]
    target_uid: Option<u32>,
    /// How long to keep trying while the control socket is busy (other
    /// administrators' requests fill it), in seconds; 0: try once.
    #[arg(long, value_name = "SECONDS", global = true,
          default_value_t = BUSY_WAIT_DEFAULT.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=WAIT_MAX_SECONDS))]
    wait: u64,
    #[command(subcommand)]
    command: AdminCommand,
}

/// The longest `--wait`: an hour.
const WAIT_MAX_SECONDS: u64 = 3600;

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// Print the running configuration (the file as it is now; inline secrets hidden).
    Show,
    /// List targets and LUNs, portals, or sessions and their connections.
    List {
        /// What to list.
        #[arg(value_enum, default_value = "all")]
        what: ListWhat,
    },
    /// Add or remove a target.
    #[command(subcommand)]
    Target(TargetCommand),
    /// Add or remove a LUN, or take one offline and back.
    #[command(subcommand)]
    Lun(LunCommand),
    /// Add or remove an initiator in a target's allowed_initiators.
    #[command(subcommand)]
    Acl(AclCommand),
    /// Set or remove the CHAP a target (or discovery) requires.
    #[command(subcommand)]
    Chap(ChapCommand),
    /// Add or remove a portal.
    #[command(subcommand)]
    Portal(PortalCommand),
    /// End a session (its connections close; the initiator may log in again).
    Logout {
        /// The session's TSIH (see `isoe admin list sessions`).
        tsih: u16,
    },
    /// Read the configuration file again and put what changed into force (as SIGHUP).
    Reload {
        /// Let a LUN's change discard data: a memory LUN resized, a LUN
        /// given another store, a file LUN shrunk (refused otherwise).
        #[arg(long)]
        force: bool,
    },
    /// Counters: commands, bytes, latency, errors per LUN and session;
    /// logins; resources against their bounds (`--json` for all of it).
    Stats,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ListWhat {
    All,
    Targets,
    Portals,
    Sessions,
}

#[derive(Subcommand, Debug)]
enum TargetCommand {
    /// Add a target: `isoe admin target add iqn.2026-11.io.example:db alias=db`.
    Add {
        /// Its iSCSI name.
        name: String,
        /// More keys of [[target]], as KEY=VALUE.
        #[arg(value_name = "KEY=VALUE")]
        keys: Vec<String>,
    },
    /// Remove a target: its sessions end.
    Remove {
        /// Its iSCSI name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum LunCommand {
    /// Add a LUN: `isoe admin lun add TARGET 1 memory=1GiB`, `file=/srv/db.img size=10GiB`, `block=/dev/sdb`, `rbd=pool/image size=10GiB`.
    Add {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
        /// Keys of [[target.lun]], as KEY=VALUE (exactly one of memory, file, block).
        #[arg(value_name = "KEY=VALUE", required = true)]
        keys: Vec<String>,
    },
    /// Remove a LUN: the target's sessions hear REPORTED LUNS DATA HAS CHANGED.
    Remove {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// Take a LUN offline: commands to it end in NOT READY until it is online again.
    Offline {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// Bring an offline LUN back.
    Online {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
}

#[derive(Subcommand, Debug)]
enum AclCommand {
    /// Allow an initiator (a target with a list admits only those listed).
    Add {
        /// The target's name.
        target: String,
        /// The initiator's iSCSI name.
        initiator: String,
    },
    /// Disallow an initiator: its sessions to the target end.
    Remove {
        /// The target's name.
        target: String,
        /// The initiator's iSCSI name.
        initiator: String,
        /// Allow removing the last entry, which lets every initiator in.
        #[arg(long)]
        allow_all: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ChapCommand {
    /// Require CHAP: `isoe admin chap set TARGET user=alice
    /// secret_file=/etc/isoe/alice.secret` (or `secret=-` to read the
    /// secret from standard input, one line); TARGET `discovery` sets
    /// [discovery.chap].
    Set {
        /// The target's name, or `discovery`.
        target: String,
        /// Keys of [target.chap], as KEY=VALUE.
        #[arg(value_name = "KEY=VALUE", required = true)]
        keys: Vec<String>,
    },
    /// Stop requiring CHAP (TARGET `discovery`: for discovery sessions).
    Clear {
        /// The target's name, or `discovery`.
        target: String,
    },
}

#[derive(Subcommand, Debug)]
enum PortalCommand {
    /// Listen on one more address (ADDR or ADDR:PORT).
    Add {
        /// The address as the file writes it.
        address: String,
    },
    /// Stop listening on an address; connections made through it stay.
    Remove {
        /// The address as the file writes it.
        address: String,
    },
}

/// Runs `isoe admin`.
pub fn run(args: AdminArgs) -> ExitCode {
    let request = match request(args.command) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("isoe admin: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(path) = args
        .socket
        .or_else(isoe_target::config::default_control_socket)
    else {
        eprintln!(
            "isoe admin: no control socket: give --socket PATH (the target's [control] socket)"
        );
        return ExitCode::from(2);
    };
    // Who answers is checked before anything is sent: the request may
    // carry a CHAP secret.
    let wait = Duration::from_secs(args.wait);
    let reply = match client::exchange(&path, args.target_uid, &request, wait) {
        Ok((peer, reply)) => {
            eprintln!("isoe admin: {}", speaking_to(peer, &reply, &path));
            reply
        }
        Err(e) => {
            eprintln!("isoe admin: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{reply}");
    } else {
        print_human(&request, &reply);
    }
    if Answer::<Nothing>::from_json(&reply).is_ok_and(|answer| answer.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Which target answered: the default socket path is whichever target
/// took it first, so it is said every time (on stderr, which keeps
/// `--json`'s output one object).
fn speaking_to(peer: Peer, reply: &Json, path: &std::path::Path) -> String {
    let server = reply
        .get("server")
        .and_then(|s| serde_json::from_value::<ServerInfo>(s.clone()).ok());
    let file = match server {
        Some(ServerInfo {
            config_file: Some(file),
            ..
        }) => format!(" (config {file})"),
        Some(ServerInfo {
            config_file: None, ..
        }) => " (no configuration file)".into(),
        None => String::new(),
    };
    format!("target pid {}{file} at {}", peer.pid, path.display())
}

fn request(command: AdminCommand) -> Result<Request, String> {
    Ok(match command {
        AdminCommand::Show => Request::Show,
        AdminCommand::List { what } => Request::List {
            what: match what {
                ListWhat::All => Shown::All,
                ListWhat::Targets => Shown::Targets,
                ListWhat::Portals => Shown::Portals,
                ListWhat::Sessions => Shown::Sessions,
            },
        },
        AdminCommand::Reload { force } => Request::Reload { force },
        AdminCommand::Stats => Request::Stats,
        AdminCommand::Logout { tsih } => Request::Logout { tsih },
        AdminCommand::Target(TargetCommand::Add { name, keys: k }) => Request::TargetAdd {
            name,
            keys: keys(&k)?,
        },
        AdminCommand::Target(TargetCommand::Remove { name }) => Request::TargetRemove { name },
        AdminCommand::Lun(LunCommand::Add {
            target,
            number,
            keys: k,
        }) => Request::LunAdd {
            target,
            number,
            keys: keys(&k)?,
        },
        AdminCommand::Lun(LunCommand::Remove { target, number }) => {
            Request::LunRemove { target, number }
        }
        AdminCommand::Lun(LunCommand::Offline { target, number }) => {
            Request::LunOffline { target, number }
        }
        AdminCommand::Lun(LunCommand::Online { target, number }) => {
            Request::LunOnline { target, number }
        }
        AdminCommand::Acl(AclCommand::Add { target, initiator }) => {
            Request::AclAdd { target, initiator }
        }
        AdminCommand::Acl(AclCommand::Remove {
            target,
            initiator,
            allow_all,
        }) => Request::AclRemove {
            target,
            initiator,
            allow_all,
        },
        AdminCommand::Chap(ChapCommand::Set { target, keys: k }) => Request::ChapSet {
            target: chap_target(target),
            keys: keys(&k)?,
        },
        AdminCommand::Chap(ChapCommand::Clear { target }) => Request::ChapClear {
            target: chap_target(target),
        },
        AdminCommand::Portal(PortalCommand::Add { address }) => Request::PortalAdd { address },
        AdminCommand::Portal(PortalCommand::Remove { address }) => {
            Request::PortalRemove { address }
        }
    })
}

/// `discovery` stands for [discovery.chap] (no iSCSI name is a bare word).
fn chap_target(target: String) -> Option<String> {
    (target != "discovery").then_some(target)
}

/// KEY=VALUE arguments as a JSON object. A value is read as a TOML value
/// when it is one (`true`, `4096`, `["MD5"]`, `"quoted"`), else as a
/// string (`1GiB`, `/srv/db.img`); `secret=-` and `mutual_secret=-` read
/// the secret from standard input, so that it is not in the process list.
fn keys(pairs: &[String]) -> Result<Keys, String> {
    let mut map = Keys::new();
    let mut stdin = std::io::stdin().lock();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not KEY=VALUE"));
        };
        let json = if value == "-" && key.ends_with("secret") {
            let mut line = String::new();
            stdin
                .read_line(&mut line)
                .map_err(|e| format!("{key}: cannot read standard input: {e}"))?;
            Json::String(line.trim_end_matches(['\n', '\r']).to_string())
        } else {
            match value.parse::<toml_edit::Value>() {
                Ok(v) => toml_to_json(&v),
                Err(_) => Json::String(value.to_string()),
            }
        };
        if map.insert(key.to_string(), json).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    Ok(map)
}

fn toml_to_json(v: &toml_edit::Value) -> Json {
    match v {
        toml_edit::Value::String(s) => Json::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Json::from(*i.value()),
        toml_edit::Value::Float(f) => Json::from(*f.value()),
        toml_edit::Value::Boolean(b) => Json::from(*b.value()),
        toml_edit::Value::Array(a) => Json::Array(a.iter().map(toml_to_json).collect()),
        other => Json::String(other.to_string().trim().to_string()),
    }
}

fn print_human(request: &Request, reply: &Json) {
    if !Answer::<Nothing>::from_json(reply).is_ok_and(|answer| answer.ok) {
        let error =
            Answer::<Refusal>::from_json(reply).map_or_else(|_| "refused".into(), |a| a.body.error);
        eprintln!("isoe admin: {error}");
        return;
    }
    let printed = match request {
        Request::Show => Answer::<Config>::from_json(reply).map(|a| print!("{}", a.body.config)),
        Request::List { what } => {
            Answer::<Listed>::from_json(reply).map(|a| print_status(&a.body.status, *what))
        }
        Request::Stats => Answer::<Counted>::from_json(reply).map(|a| print_stats(&a.body)),
        Request::Logout { .. } => Answer::<LoggedOut>::from_json(reply).map(|a| {
            for line in &a.body.changes {
                println!("{line}");
            }
        }),
        _ => Answer::<Changed>::from_json(reply).map(|a| print_changed(&a.body)),
    };
    if let Err(e) = printed {
        eprintln!("isoe admin: the answer does not read as one to this request: {e}");
    }
}

fn print_changed(changed: &Changed) {
    for line in &changed.changes {
        println!("{line}");
    }
    for key in &changed.at_restart {
        println!("{key} changed: takes effect at the next start");
    }
    println!("{}", changed.file);
}

/// `value`, or `-` when there is none.
fn or_dash(value: Option<&str>) -> &str {
    value.unwrap_or("-")
}

fn print_status(status: &Status, what: Shown) {
    let shown = |section: Shown| what == Shown::All || what == section;
    if shown(Shown::Portals) {
        println!("portals:");
        for p in &status.portals {
            println!("  {} (listening on {})", p.configured, p.listening);
        }
    }
    if shown(Shown::Targets) {
        println!("targets:");
        for t in &status.targets {
            let acl = if t.allowed_initiators.is_empty() {
                "every initiator".to_string()
            } else {
                t.allowed_initiators.join(", ")
            };
            let chap = match &t.chap_user {
                Some(user) => format!("CHAP user {user:?}"),
                None => "no CHAP".into(),
            };
            println!(
                "  {}  ({} session(s); allowed: {acl}; {chap})",
                t.name, t.sessions
            );
            for l in &t.luns {
                // The LUN is not padded: the answer's numbers never were.
                println!(
                    "    LUN {} {:<32} {:>8} MiB  serial {}{}{}",
                    l.number,
                    or_dash(l.store.as_deref()),
                    l.size_bytes >> 20,
                    l.serial,
                    if l.read_only { "  read-only" } else { "" },
                    if l.offline { "  OFFLINE" } else { "" },
                );
            }
        }
    }
    if shown(Shown::Sessions) {
        println!("sessions:");
        for s in &status.sessions {
            println!(
                "  TSIH {} {} -> {}  ({})",
                s.tsih,
                s.initiator,
                s.target.as_deref().unwrap_or("discovery"),
                s.kind
            );
            for c in &s.connections {
                print_connection(c);
            }
        }
    }
}

/// A connection's line; one that has not said more than its CID shows
/// dashes and nulls where its figures would be.
fn print_connection(c: &ConnectionStatus) {
    let d = c.detail.as_ref();
    let number = |n: Option<String>| n.unwrap_or_else(|| "null".into());
    println!(
        "    CID {} from {} on {}  age {} s  digests {}/{}  in flight {}",
        c.cid,
        or_dash(d.map(|d| d.initiator_address.as_str())),
        or_dash(d.map(|d| d.portal.as_str())),
        number(d.map(|d| d.age_s.to_string())),
        or_dash(d.map(|d| d.header_digest.as_str())),
        or_dash(d.map(|d| d.data_digest.as_str())),
        number(d.map(|d| d.commands_in_flight.to_string())),
    );
}

/// Mean latency in microseconds of an op's totals.
fn mean_us(op: &OpTotals) -> String {
    if op.commands == 0 {
        return "-".into();
    }
    format!("{:.0}", op.latency_sum_ns as f64 / op.commands as f64 / 1e3)
}

/// A LUN's second line, under its reads: UNMAP and WRITE SAME (commands /
/// bytes of the medium deallocated or covered), SYNCHRONIZE CACHE, the
/// other commands, and the bytes its store served from blocks never
/// written where the store counts them (memory).
fn range_line(t: &LunTotals, unwritten_read_bytes: Option<u64>) -> String {
    let unwritten = unwritten_read_bytes
        .map(|bytes| format!("   unwritten_read {}", short_bytes(bytes)))
        .unwrap_or_default();
    format!(
        "{:47}unmap {} / {}   write_same {} / {}   sync_cache {}   other {}{unwritten}",
        "",
        t.unmap.commands,
        short_bytes(t.unmap.bytes),
        t.write_same.commands,
        short_bytes(t.write_same.bytes),
        t.sync_cache,
        t.other,
    )
}

/// `bytes` in the largest power-of-1024 unit it reaches: `512 B`,
/// `4 KiB`, `1.5 GiB`.
fn short_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let Some(power) = (1..=UNITS.len() as u32)
        .rev()
        .find(|p| bytes >= 1u64 << (10 * p))
    else {
        return format!("{bytes} B");
    };
    let scale = 1u64 << (10 * power);
    let unit = UNITS[power as usize - 1];
    if bytes.is_multiple_of(scale) {
        format!("{} {unit}", bytes / scale)
    } else {
        format!("{:.1} {unit}", bytes as f64 / scale as f64)
    }
}

/// The table of LUNs, two lines each: reads and writes, then the rest
/// ([`range_line`]).
fn print_luns(s: &Snapshot) {
    println!(
        "{:<40} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "target", "lun", "reads", "writes", "MiB read", "MiB wrtn", "rd µs", "wr µs", "errors"
    );
    for (target, luns) in &s.luns {
        // In the order of the answer's keys, which are text: LUN 10 before 2.
        let media = s.media.get(target);
        let mut luns: Vec<(String, &LunTotals, Option<u64>)> = luns
            .iter()
            .map(|(lun, t)| {
                let unwritten = media
                    .and_then(|m| m.get(lun))
                    .and_then(|m| m.unwritten_read_bytes);
                (lun.to_string(), t, unwritten)
            })
            .collect();
        luns.sort_by(|a, b| a.0.cmp(&b.0));
        for (lun, t, unwritten) in luns {
            let errors: u64 = t.sense.values().chain(t.status.values()).sum();
            println!(
                "{:<40} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}",
                target,
                lun,
                t.read.commands,
                t.write.commands,
                t.read.bytes >> 20,
                t.write.bytes >> 20,
                mean_us(&t.read),
                mean_us(&t.write),
                errors
            );
            println!("{}", range_line(t, unwritten));
        }
    }
}

fn print_stats(counted: &Counted) {
    if !counted.counting {
        println!(
            "counting is off ([metrics] enabled = false): only logins and resources are counted"
        );
    }
    let s = &counted.stats;
    print_luns(s);
    println!("sessions:");
    for session in &s.sessions {
        println!(
            "  TSIH {} {} -> {}: {} reads, {} writes, {} connection(s)",
            session.tsih,
            session.initiator,
            session.target,
            session.totals.read.commands,
            session.totals.write.commands,
            session.connections.len()
        );
    }
    let pairs = |map: &std::collections::BTreeMap<isoe_target::metrics::Name, u64>| {
        map.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("logins: {}", pairs(&s.logins));
    println!(
        "connections refused by limit: {}",
        pairs(&s.connection_refusals)
    );
    println!(
        "connections closed to make room, by limit: {}",
        pairs(&s.connection_evictions)
    );
    println!("resources:");
    for r in &s.resources {
        // The count is not padded: the answer's numbers never were.
        println!("  {:<16} {} of {}", r.name, r.in_use, r.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lun_s_second_line_names_unmap_write_same_and_sync_cache() {
        let t = LunTotals {
            unmap: isoe_target::metrics::RangeTotals {
                commands: 3,
                bytes: 5u64 << 30,
            },
            write_same: isoe_target::metrics::RangeTotals {
                commands: 2,
                bytes: 1536,
            },
            sync_cache: 7,
            other: 12,
            ..LunTotals::default()
        };
        let line = range_line(&t, None);
        assert_eq!(
            line.trim_start(),
            "unmap 3 / 5 GiB   write_same 2 / 1.5 KiB   sync_cache 7   other 12"
        );
        assert_eq!(
            range_line(&t, Some(1 << 20)).trim_start(),
            "unmap 3 / 5 GiB   write_same 2 / 1.5 KiB   sync_cache 7   other 12   \
             unwritten_read 1 MiB",
            "where the store counts them"
        );
        assert_eq!(line.len() - line.trim_start().len(), 47, "under the reads");
        assert_eq!(short_bytes(0), "0 B");
        assert_eq!(short_bytes(1023), "1023 B");
        assert_eq!(short_bytes(4096), "4 KiB");
    }
}
