//! `isoe admin` and SIGHUP against a running `isoe target`: changes made
//! while a verified benchmark runs leave its sessions untouched, are in
//! force at once, are written back to the configuration file, and come
//! back after a restart; a change that would break the file is refused
//! with its file, line and key, and the file stays as it was.
//!
//! The libiscsi write test needs fio built with libiscsi
//! (`crates/lab/fio-libiscsi`, which `.ci/run` runs); without it, the test
//! skips that step and says so, unless CI is set.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::cli::isoe;
use support::tools::{run, run_program, ToolOutput};
use support::{ci, Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:admin";
const BENCH_INITIATOR: &str = "iqn.2026-11.io.isoe:initiator";
const FIO_INITIATOR: &str = "iqn.2019-04.org.fio:fio";
const INQ_INITIATOR: &str = "iqn.2026-11.io.isoe:inq";
const VISITOR: &str = "iqn.2026-11.io.isoe:visitor";
const OLD_SECRET: &str = "first-secret-1234";
const NEW_SECRET: &str = "second-secret-5678";

fn config(dir_hint: &str) -> TargetConfig {
    let config = TargetConfig::new("");
    let socket = config.dir().join("control.sock");
    let text = format!(
        "# {dir_hint}: the administrator's comment stays\n\
         portals = [\"127.0.0.1:0\"]\n\n\
         [control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n\
         allowed_initiators = [\"{BENCH_INITIATOR}\", \"{FIO_INITIATOR}\", \"{INQ_INITIATOR}\"]\n\
\n\
         [[target.lun]]\nnumber = 0\nmemory = \"128MiB\"\n",
        socket.display()
    );
    std::fs::write(config.path(), text).unwrap();
    config
}

fn socket(config: &TargetConfig) -> String {
    config.dir().join("control.sock").display().to_string()
}

/// `isoe admin --socket S ARGS...`, asserted to succeed.
fn admin(config: &TargetConfig, args: &[&str]) -> String {
    let out = admin_raw(config, args);
    assert!(out.success(), "isoe admin {args:?}: {}", out.describe());
    out.stdout
}

fn admin_raw(config: &TargetConfig, args: &[&str]) -> ToolOutput {
    let socket = socket(config);
    let mut all = vec!["admin", "--socket", socket.as_str()];
    all.extend_from_slice(args);
    isoe(&all)
}

fn admin_json(config: &TargetConfig, args: &[&str]) -> serde_json::Value {
    let socket = socket(config);
    let mut all = vec!["admin", "--json", "--socket", socket.as_str()];
    all.extend_from_slice(args);
    let out = isoe(&all);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.describe()))
}

/// iscsi-inq as `initiator` with `secret`: whether the login succeeded.
fn inquiry_logs_in(target: &Target, initiator: &str, secret: &str) -> bool {
    let url = format!("iscsi://alice%{secret}@{}/{TARGET}/0", target.addr());
    run(
        "iscsi-inq",
        &["-i", initiator, &url],
        Duration::from_secs(30),
    )
    .success()
}

/// The bench's sessions (TSIH) as the target lists them.
fn bench_sessions(config: &TargetConfig) -> Vec<u64> {
    let list = admin_json(config, &["list"]);
    let mut tsihs: Vec<u64> = list["status"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["initiator"] == BENCH_INITIATOR)
        .map(|s| s["tsih"].as_u64().unwrap())
        .collect();
    tsihs.sort_unstable();
    tsihs
}

fn fio_write_and_verify(target: &Target, lun: u16) {
    let fio = match isoe_lab::peers::fio::usable_fio() {
        Ok(fio) => fio,
        Err(why) if ci() => panic!("fio with libiscsi is needed in CI (.ci/run builds it): {why}"),
        Err(why) => {
            eprintln!("SKIPPED the libiscsi write of LUN {lun}: {why}");
            return;
        }
    };
    let url = format!("iscsi://{}/{TARGET}/{lun}", target.addr());
    let file = format!("--filename={}", url.replace(':', "\\:"));
    let out = run_program(
        Path::new(&fio),
        &[
            "--name=admin",
            "--ioengine=libiscsi",
            &file,
            "--rw=randwrite",
            "--bs=16k",
            "--size=16M",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!(
        out.success() && out.stdout.contains("err= 0"),
        "fio (libiscsi) write and read-back of LUN {lun}: {}",
        out.describe()
    );
}

#[test]
fn live_changes_leave_a_verified_bench_untouched_and_survive_a_restart() {
    let config = config("live");
    let mut target = Target::with_config_portals(&config, 1);
    let json = config.dir().join("bench.jsonl");
    let url = format!("iscsi://{}/{TARGET}/0", target.addr());
    let bench = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args([
            "bench",
            &url,
            "--bs",
            "4k",
            "--read-pct",
            "50",
            "--random-pct",
            "100",
            "--qd",
            "8",
            "--sessions",
            "4",
            "--duration",
            "30",
            "--ramp",
            "0.5",
            "--verify",
            "--no-progress",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The bench's four sessions are logged in before anything changes.
    let deadline = Instant::now() + Duration::from_secs(20);
    while bench_sessions(&config).len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the bench's 4 sessions did not log in"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let sessions_before = bench_sessions(&config);

    // A LUN added live, written and read back through libiscsi (fio's
    // libiscsi engine logs in without CHAP, so before CHAP is set).
    let out = admin(&config, &["lun", "add", TARGET, "1", "memory=64MiB"]);
    assert!(
        out.contains("LUN 1 of iqn.2026-11.io.isoe:admin added"),
        "{out}"
    );
    fio_write_and_verify(&target, 1);
    // CHAP set, then changed, live: the old secret no longer logs in, the
    // new one does.
    admin(
        &config,
        &[
            "chap",
            "set",
            TARGET,
            "user=alice",
            &format!("secret={OLD_SECRET}"),
        ],
    );
    assert!(inquiry_logs_in(&target, INQ_INITIATOR, OLD_SECRET));
    admin(
        &config,
        &[
            "chap",
            "set",
            TARGET,
            "user=alice",
            &format!("secret={NEW_SECRET}"),
        ],
    );
    assert!(!inquiry_logs_in(&target, INQ_INITIATOR, OLD_SECRET));
    assert!(inquiry_logs_in(&target, INQ_INITIATOR, NEW_SECRET));
    assert_lists_lun(&target, NEW_SECRET, 1);

    // An ACL entry added then removed: the visitor gets in, then is refused.
    assert!(!inquiry_logs_in(&target, VISITOR, NEW_SECRET));
    admin(&config, &["acl", "add", TARGET, VISITOR]);
    assert!(inquiry_logs_in(&target, VISITOR, NEW_SECRET));
    admin(&config, &["acl", "remove", TARGET, VISITOR]);
    assert!(!inquiry_logs_in(&target, VISITOR, NEW_SECRET));

    // LUN 1 removed; the bench's sessions are the same four.
    admin(&config, &["lun", "remove", TARGET, "1"]);
    assert_eq!(bench_sessions(&config), sessions_before);

    let bench = bench.wait_with_output().unwrap();
    assert!(
        bench.status.success(),
        "bench: {}\n{}",
        String::from_utf8_lossy(&bench.stdout),
        String::from_utf8_lossy(&bench.stderr)
    );
    let text = std::fs::read_to_string(&json).unwrap();
    let run: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(run["verify_errors"], 0, "{run}");
    assert_eq!(run["errors"], 0, "{run}");
    // Each session heard REPORTED LUNS DATA HAS CHANGED as LUN 1 came and
    // went, and repeated the command that met it.
    assert!(
        run["unit_attentions_retried"].as_u64().unwrap() >= 4,
        "{run}"
    );
    assert!(run["read"]["ios"].as_u64().unwrap() > 1000, "{run}");
    eprintln!(
        "bench through the changes: {} reads, {} writes, {} errors, {} verify errors, \
         {} commands repeated after a unit attention",
        run["read"]["ios"],
        run["write"]["ios"],
        run["errors"],
        run["verify_errors"],
        run["unit_attentions_retried"]
    );

    // What was not undone is in the file, and a restart comes back with it.
    let file = std::fs::read_to_string(config.path()).unwrap();
    assert!(
        file.starts_with("# live: the administrator's comment stays\n"),
        "{file}"
    );
    assert!(
        file.contains(NEW_SECRET) && !file.contains(OLD_SECRET),
        "{file}"
    );
    assert!(
        !file.contains(VISITOR) && !file.contains("number = 1"),
        "{file}"
    );
    target.restart();
    assert!(inquiry_logs_in(&target, INQ_INITIATOR, NEW_SECRET));
    assert!(!inquiry_logs_in(&target, INQ_INITIATOR, OLD_SECRET));
    assert!(!inquiry_logs_in(&target, VISITOR, NEW_SECRET));
}

#[test]
fn a_change_that_would_break_the_file_is_refused_with_file_line_and_key() {
    let config = config("refused");
    let target = Target::with_config_portals(&config, 1);
    let before = std::fs::read(config.path()).unwrap();
    let out = admin_raw(&config, &["lun", "add", TARGET, "1", "memory=ten"]);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(1),
        "{}",
        out.describe()
    );
    let expected = format!(
        "{}:17: target[0].lun[1].memory: expected a size like 4k, 256KiB or 1MiB, found \"ten\"",
        config.path().display()
    );
    assert!(out.stderr.contains(&expected), "{}", out.describe());
    let out = admin_raw(&config, &["lun", "add", TARGET, "0", "memory=1GiB"]);
    assert!(
        out.stderr.contains("has a LUN 0 already"),
        "{}",
        out.describe()
    );
    let out = admin_raw(&config, &["acl", "remove", TARGET, VISITOR]);
    assert!(
        out.stderr.contains("is not in allowed_initiators"),
        "{}",
        out.describe()
    );
    assert_eq!(std::fs::read(config.path()).unwrap(), before);
    // Nothing changed in the running target either.
    let list = admin_json(&config, &["list"]);
    assert_eq!(
        list["status"]["targets"][0]["luns"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    drop(target);
}

#[test]
fn sighup_applies_a_valid_file_and_keeps_serving_on_a_broken_one() {
    let config = config("sighup");
    let mut target = Target::with_config_portals(&config, 1);
    let original = std::fs::read_to_string(config.path()).unwrap();
    std::fs::write(
        config.path(),
        format!("{original}\n[[target.lun]]\nnumber = 3\nmemory = \"32MiB\"\n"),
    )
    .unwrap();
    target.signal(libc::SIGHUP);
    target.wait_for_output("LUN 3 of iqn.2026-11.io.isoe:admin added");
    assert_lists_lun(&target, OLD_SECRET, 3);

    let broken = format!("{original}\n[[target.lun]]\nnumber = 3\nmemory = \"lots\"\n");
    std::fs::write(config.path(), &broken).unwrap();
    target.signal(libc::SIGHUP);
    target.wait_for_output("reload refused, the running configuration stays");
    assert!(
        target.output().contains("target[0].lun[1].memory"),
        "{}",
        target.output()
    );
    target.assert_running("after a SIGHUP with a broken file");
    assert!(inquiry_logs_in(&target, INQ_INITIATOR, OLD_SECRET));
    let list = admin_json(&config, &["list"]);
    assert_eq!(list["status"]["targets"][0]["luns"][1]["number"], 3);
    // The broken file is the administrator's to fix: it is not overwritten.
    assert_eq!(std::fs::read_to_string(config.path()).unwrap(), broken);
    target.stop_cleanly();
}

#[test]
fn portals_come_and_go_and_the_socket_is_for_root_only() {
    let config = config("portals");
    let target = Target::with_config_portals(&config, 1);
    let out = admin_raw(&config, &["portal", "add", "127.0.0.1:0"]);
    assert!(
        out.stderr.contains("is in portals already"),
        "{}",
        out.describe()
    );
    let out = admin(&config, &["portal", "add", "127.0.0.2:0"]);
    assert!(
        out.contains("portal 127.0.0.2:0 added to portal group 1 (listening on 127.0.0.2:"),
        "{out}"
    );
    let list = admin_json(&config, &["list"]);
    let portals = list["status"]["portals"].as_array().unwrap().clone();
    assert_eq!(portals.len(), 2, "{list}");
    let second = portals[1]["listening"].as_str().unwrap().to_string();
    let report = run(
        "iscsi-ls",
        &[
            "-s",
            "-i",
            INQ_INITIATOR,
            &format!("iscsi://alice%{OLD_SECRET}@{second}/"),
        ],
        Duration::from_secs(30),
    );
    assert!(report.stdout.contains("Lun:0"), "{}", report.describe());
    // SendTargets lists both portals.
    assert!(report.stdout.contains(&second), "{}", report.describe());
    admin(&config, &["portal", "remove", "127.0.0.2:0"]);
    assert!(std::net::TcpStream::connect(&second).is_err());
    let file = std::fs::read_to_string(config.path()).unwrap();
    assert!(file.contains("portals = [\"127.0.0.1:0\"]"), "{file}");
    let mode = std::fs::metadata(socket(&config)).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    drop(target);
}

/// iscsi-ls through the target's portal, with CHAP `secret`, lists `lun`.
fn assert_lists_lun(target: &Target, secret: &str, lun: u16) {
    let report = run(
        "iscsi-ls",
        &[
            "-s",
            "-i",
            INQ_INITIATOR,
            &format!("iscsi://alice%{secret}@{}/", target.addr()),
        ],
        Duration::from_secs(30),
    );
    assert!(
        report.stdout.contains(&format!("Lun:{lun} ")),
        "{}",
        report.describe()
    );
}

#[test]
fn targets_and_file_luns_come_and_go_and_a_session_is_logged_out() {
    let config = config("targets");
    let target = Target::with_config_portals(&config, 1);
    let other = "iqn.2026-11.io.isoe:other";
    admin(&config, &["target", "add", other, "alias=scratch"]);
    let out = admin(
        &config,
        &["lun", "add", other, "0", "file=other.img", "size=16MiB"],
    );
    assert!(
        out.contains("LUN 0 of iqn.2026-11.io.isoe:other added (file "),
        "{out}"
    );
    assert_eq!(
        std::fs::metadata(config.dir().join("other.img"))
            .unwrap()
            .len(),
        16 << 20,
        "the file LUN is made, relative to the configuration's directory"
    );
    let mut client = support::Client::login_normal(target.addr(), other);
    client.ready(0);
    client
        .write(0, 8, &[0x5a; 4096])
        .assert_good("a write to the new file LUN");
    assert_eq!(client.read(0, 8, 8), vec![0x5a; 4096]);

    // The session is listed with its connection, and logged out on demand.
    let list = admin_json(&config, &["list", "sessions"]);
    let session = list["status"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["target"] == other)
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(session["tsih"], u64::from(client.tsih), "{session}");
    let connection = &session["connections"][0];
    assert_eq!(connection["cid"], 0, "{session}");
    assert!(connection["initiator_address"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert_eq!(connection["data_digest"], "None");
    admin(&config, &["logout", &client.tsih.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.recv(Duration::from_millis(200)) {
            Ok(support::Received::Closed) | Err(_) => break,
            Ok(_) => assert!(Instant::now() < deadline, "the session was not ended"),
        }
    }

    // The target goes; its sessions end and it is no longer offered.
    let mut client = support::Client::login_normal(target.addr(), other);
    client.ready(0);
    admin(&config, &["target", "remove", other]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.recv(Duration::from_millis(200)) {
            Ok(support::Received::Closed) | Err(_) => break,
            Ok(_) => assert!(
                Instant::now() < deadline,
                "the removed target's session stayed"
            ),
        }
    }
    let refused = support::Client::login(target.addr(), &support::LoginParams::normal(other));
    assert!(refused.is_err(), "a login to the removed target is refused");
    let file = std::fs::read_to_string(config.path()).unwrap();
    assert!(!file.contains(other), "{file}");
    // Its data stay: removing a LUN never deletes a file.
    assert!(config.dir().join("other.img").exists());
}

/// The control socket's directory removed under a running target (a
/// cleaned /run, a test's temporary directory) does not hold up its stop:
/// the socket thread's accept is woken without the path.
#[test]
fn a_removed_socket_directory_does_not_hold_up_the_stop() {
    let config = TargetConfig::new("");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sub").join("control.sock");
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[control]\nsocket = \"{}\"\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n",
        socket.display()
    );
    std::fs::write(config.path(), text).unwrap();
    let mut target = Target::with_config_portals(&config, 1);
    assert!(socket.exists());
    std::fs::remove_dir_all(dir.path().join("sub")).unwrap();
    let started = std::time::Instant::now();
    let status = target.stop().expect("the target ran");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(10), "the stop took {took:?}");
}
