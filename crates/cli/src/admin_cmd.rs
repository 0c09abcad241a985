//! `isoe admin`: talks to a running `isoe target` through its control
//! socket. Every change is put into force at once and written back to the
//! target's configuration file; `--json` prints the target's answer as it
//! came, for scripts.

use clap::{Args, Subcommand};
use isoe_target::admin::socket::client::{Connection, Peer};
use serde_json::{json, Map, Value as Json};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

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
    #[command(subcommand)]
    command: AdminCommand,
}

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
    let reply = Connection::open(&path, args.target_uid).and_then(|connection| {
        let peer = connection.peer();
        connection.request(&request).map(|reply| (peer, reply))
    });
    let reply = match reply {
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
    if reply.get("ok").and_then(Json::as_bool) == Some(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Which target answered: the default socket path is whichever target
/// took it first, so it is said every time (on stderr, which keeps
/// `--json`'s output one object).
fn speaking_to(peer: Peer, reply: &Json, path: &std::path::Path) -> String {
    let file = match reply.get("server").map(|s| &s["config_file"]) {
        Some(Json::String(file)) => format!(" (config {file})"),
        Some(Json::Null) => " (no configuration file)".into(),
        _ => String::new(),
    };
    format!("target pid {}{file} at {}", peer.pid, path.display())
}

fn request(command: AdminCommand) -> Result<Json, String> {
    Ok(match command {
        AdminCommand::Show => json!({"op": "show"}),
        AdminCommand::List { what } => {
            json!({"op": "list", "what": format!("{what:?}").to_lowercase()})
        }
        AdminCommand::Reload { force } => json!({"op": "reload", "force": force}),
        AdminCommand::Stats => json!({"op": "stats"}),
        AdminCommand::Logout { tsih } => json!({"op": "logout", "tsih": tsih}),
        AdminCommand::Target(TargetCommand::Add { name, keys: k }) => {
            json!({"op": "target-add", "name": name, "keys": keys(&k)?})
        }
        AdminCommand::Target(TargetCommand::Remove { name }) => {
            json!({"op": "target-remove", "name": name})
        }
        AdminCommand::Lun(LunCommand::Add {
            target,
            number,
            keys: k,
        }) => json!({"op": "lun-add", "target": target, "number": number, "keys": keys(&k)?}),
        AdminCommand::Lun(LunCommand::Remove { target, number }) => {
            json!({"op": "lun-remove", "target": target, "number": number})
        }
        AdminCommand::Lun(LunCommand::Offline { target, number }) => {
            json!({"op": "lun-offline", "target": target, "number": number})
        }
        AdminCommand::Lun(LunCommand::Online { target, number }) => {
            json!({"op": "lun-online", "target": target, "number": number})
        }
        AdminCommand::Acl(AclCommand::Add { target, initiator }) => {
            json!({"op": "acl-add", "target": target, "initiator": initiator})
        }
        AdminCommand::Acl(AclCommand::Remove {
            target,
            initiator,
            allow_all,
        }) => {
            json!({"op": "acl-remove", "target": target, "initiator": initiator, "allow_all": allow_all})
        }
        AdminCommand::Chap(ChapCommand::Set { target, keys: k }) => {
            json!({"op": "chap-set", "target": chap_target(target), "keys": keys(&k)?})
        }
        AdminCommand::Chap(ChapCommand::Clear { target }) => {
            json!({"op": "chap-clear", "target": chap_target(target)})
        }
        AdminCommand::Portal(PortalCommand::Add { address }) => {
            json!({"op": "portal-add", "address": address})
        }
        AdminCommand::Portal(PortalCommand::Remove { address }) => {
            json!({"op": "portal-remove", "address": address})
        }
    })
}

/// `discovery` stands for [discovery.chap] (no iSCSI name is a bare word).
fn chap_target(target: String) -> Json {
    if target == "discovery" {
        Json::Null
    } else {
        Json::String(target)
    }
}

/// KEY=VALUE arguments as a JSON object. A value is read as a TOML value
/// when it is one (`true`, `4096`, `["MD5"]`, `"quoted"`), else as a
/// string (`1GiB`, `/srv/db.img`); `secret=-` and `mutual_secret=-` read
/// the secret from standard input, so that it is not in the process list.
fn keys(pairs: &[String]) -> Result<Map<String, Json>, String> {
    let mut map = Map::new();
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
        toml_edit::Value::Integer(i) => json!(*i.value()),
        toml_edit::Value::Float(f) => json!(*f.value()),
        toml_edit::Value::Boolean(b) => json!(*b.value()),
        toml_edit::Value::Array(a) => Json::Array(a.iter().map(toml_to_json).collect()),
        other => Json::String(other.to_string().trim().to_string()),
    }
}

fn print_human(request: &Json, reply: &Json) {
    if reply.get("ok").and_then(Json::as_bool) != Some(true) {
        let error = reply
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or("refused");
        eprintln!("isoe admin: {error}");
        return;
    }
    match request.get("op").and_then(Json::as_str) {
        Some("show") => print!("{}", reply["config"].as_str().unwrap_or_default()),
        Some("list") => print_status(&reply["status"], request["what"].as_str().unwrap_or("all")),
        Some("stats") => print_stats(reply),
        _ => {
            for line in reply["changes"].as_array().into_iter().flatten() {
                println!("{}", line.as_str().unwrap_or_default());
            }
            for key in reply["at_restart"].as_array().into_iter().flatten() {
                println!(
                    "{} changed: takes effect at the next start",
                    key.as_str().unwrap_or_default()
                );
            }
            if let Some(file) = reply["file"].as_str() {
                println!("{file}");
            }
        }
    }
}

fn print_status(status: &Json, what: &str) {
    let list = |v: &Json| v.as_array().cloned().unwrap_or_default();
    let shown = |section: &str| what == "all" || what == section;
    if shown("portals") {
        println!("portals:");
    }
    for p in list(&status["portals"]).iter().filter(|_| shown("portals")) {
        println!(
            "  {} (listening on {})",
            str_of(&p["configured"]),
            str_of(&p["listening"])
        );
    }
    if shown("targets") {
        println!("targets:");
    }
    for t in list(&status["targets"]).iter().filter(|_| shown("targets")) {
        let acl = list(&t["allowed_initiators"]);
        let acl = if acl.is_empty() {
            "every initiator".to_string()
        } else {
            acl.iter().map(str_of).collect::<Vec<_>>().join(", ")
        };
        let chap = match t["chap_user"].as_str() {
            Some(user) => format!("CHAP user {user:?}"),
            None => "no CHAP".into(),
        };
        println!(
            "  {}  ({} session(s); allowed: {acl}; {chap})",
            str_of(&t["name"]),
            t["sessions"]
        );
        for l in list(&t["luns"]) {
            println!(
                "    LUN {:<5} {:<32} {:>8} MiB  serial {}{}{}",
                l["number"],
                str_of(&l["store"]),
                l["size_bytes"].as_u64().unwrap_or(0) >> 20,
                str_of(&l["serial"]),
                if l["read_only"].as_bool() == Some(true) {
                    "  read-only"
                } else {
                    ""
                },
                if l["offline"].as_bool() == Some(true) {
                    "  OFFLINE"
                } else {
                    ""
                },
            );
        }
    }
    if shown("sessions") {
        println!("sessions:");
    }
    for s in list(&status["sessions"])
        .iter()
        .filter(|_| shown("sessions"))
    {
        println!(
            "  TSIH {:<5} {} -> {}  ({})",
            s["tsih"],
            str_of(&s["initiator"]),
            s["target"].as_str().unwrap_or("discovery"),
            str_of(&s["type"])
        );
        for c in list(&s["connections"]) {
            println!(
                "    CID {:<3} from {} on {}  age {} s  digests {}/{}  in flight {}",
                c["cid"],
                str_of(&c["initiator_address"]),
                str_of(&c["portal"]),
                c["age_s"],
                str_of(&c["header_digest"]),
                str_of(&c["data_digest"]),
                c["commands_in_flight"]
            );
        }
    }
}

/// Mean latency in microseconds of an op's totals.
fn mean_us(op: &Json) -> String {
    let n = op["commands"].as_u64().unwrap_or(0);
    if n == 0 {
        return "-".into();
    }
    format!(
        "{:.0}",
        op["latency_sum_ns"].as_u64().unwrap_or(0) as f64 / n as f64 / 1e3
    )
}

/// A LUN's second line, under its reads: UNMAP and WRITE SAME (commands /
/// bytes of the medium deallocated or covered), SYNCHRONIZE CACHE and the
/// other commands.
fn range_line(t: &Json) -> String {
    let n = |v: &Json| v.as_u64().unwrap_or(0);
    format!(
        "{:47}unmap {} / {}   write_same {} / {}   sync_cache {}   other {}",
        "",
        n(&t["unmap"]["commands"]),
        short_bytes(n(&t["unmap"]["bytes"])),
        n(&t["write_same"]["commands"]),
        short_bytes(n(&t["write_same"]["bytes"])),
        n(&t["sync_cache"]),
        n(&t["other"]),
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

fn print_stats(reply: &Json) {
    if reply["counting"].as_bool() == Some(false) {
        println!(
            "counting is off ([metrics] enabled = false): only logins and resources are counted"
        );
    }
    let s = &reply["stats"];
    println!(
        "{:<40} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "target", "lun", "reads", "writes", "MiB read", "MiB wrtn", "rd µs", "wr µs", "errors"
    );
    for (target, luns) in s["luns"].as_object().into_iter().flatten() {
        for (lun, t) in luns.as_object().into_iter().flatten() {
            let errors: u64 = t["sense"]
                .as_object()
                .into_iter()
                .flatten()
                .chain(t["status"].as_object().into_iter().flatten())
                .map(|(_, n)| n.as_u64().unwrap_or(0))
                .sum();
            println!(
                "{:<40} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}",
                target,
                lun,
                t["read"]["commands"].as_u64().unwrap_or(0),
                t["write"]["commands"].as_u64().unwrap_or(0),
                t["read"]["bytes"].as_u64().unwrap_or(0) >> 20,
                t["write"]["bytes"].as_u64().unwrap_or(0) >> 20,
                mean_us(&t["read"]),
                mean_us(&t["write"]),
                errors
            );
            println!("{}", range_line(t));
        }
    }
    println!("sessions:");
    for session in s["sessions"].as_array().into_iter().flatten() {
        println!(
            "  TSIH {:<5} {} -> {}: {} reads, {} writes, {} connection(s)",
            session["tsih"],
            str_of(&session["initiator"]),
            str_of(&session["target"]),
            session["totals"]["read"]["commands"],
            session["totals"]["write"]["commands"],
            session["connections"].as_array().map_or(0, Vec::len)
        );
    }
    let pairs = |v: &Json| {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("logins: {}", pairs(&s["logins"]));
    println!(
        "connections refused by limit: {}",
        pairs(&s["connection_refusals"])
    );
    println!(
        "connections closed to make room, by limit: {}",
        pairs(&s["connection_evictions"])
    );
    println!("resources:");
    for r in s["resources"].as_array().into_iter().flatten() {
        println!(
            "  {:<16} {:>12} of {}",
            str_of(&r["name"]),
            r["in_use"],
            r["limit"]
        );
    }
}

fn str_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => "-".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lun_s_second_line_names_unmap_write_same_and_sync_cache() {
        let t = serde_json::json!({
            "unmap": {"commands": 3, "bytes": 5u64 << 30},
            "write_same": {"commands": 2, "bytes": 1536},
            "sync_cache": 7,
            "other": 12,
        });
        let line = range_line(&t);
        assert_eq!(
            line.trim_start(),
            "unmap 3 / 5 GiB   write_same 2 / 1.5 KiB   sync_cache 7   other 12"
        );
        assert_eq!(line.len() - line.trim_start().len(), 47, "under the reads");
        assert_eq!(short_bytes(0), "0 B");
        assert_eq!(short_bytes(1023), "1023 B");
        assert_eq!(short_bytes(4096), "4 KiB");
    }
}
