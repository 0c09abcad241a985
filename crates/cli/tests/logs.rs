//! The log of `isoe target` (stderr, through `tracing`): one line per
//! login, refusal and logout with the initiator's name and address, a time
//! stamp and a level; the level set by `[log] level` unless `RUST_LOG` is
//! set; JSON lines on request; and never a CHAP secret, even at trace.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::cli::{exit_code, isoe};
use support::tools::{self, ToolOutput};
use support::{Target, TargetConfig};

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

const SECURE: &str = "iqn.2026-11.io.isoe:logged";
const INITIATOR: &str = "iqn.2026-11.io.isoe:log-test-host";

const USER: &str = "alice";
const SECRET: &str = "alice-log-secret-5081";
const WRONG: &str = "wrong-log-secret-7263";
const TARGET_USER: &str = "isoe-target";
const TARGET_SECRET: &str = "target-log-secret-9174";
const DISCOVERY_USER: &str = "finder";
const DISCOVERY_SECRET: &str = "discovery-log-secret-3346";

/// Every secret the tests use: none may appear in the target's output.
const SECRETS: [&str; 4] = [SECRET, WRONG, TARGET_SECRET, DISCOVERY_SECRET];

/// A CHAP target (secret from a file, mutual secret in the configuration)
/// behind CHAP discovery, with `log` appended to the configuration.
fn config(log: &str) -> TargetConfig {
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n\
         [discovery.chap]\nuser = \"{DISCOVERY_USER}\"\nsecret = \"{DISCOVERY_SECRET}\"\n\n\
         [[target]]\nname = \"{SECURE}\"\n\
         [target.chap]\nuser = \"{USER}\"\nsecret_file = \"alice.secret\"\n\
         mutual_user = \"{TARGET_USER}\"\nmutual_secret = \"{TARGET_SECRET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n\n{log}"
    ));
    let secret_path = config.dir().join("alice.secret");
    std::fs::write(&secret_path, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&secret_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    config
}

fn lun_url(target: &Target, secret: &str) -> String {
    format!("iscsi://{USER}%{secret}@{}/{SECURE}/0", target.addr())
}

/// `isoe inquiry` as `INITIATOR`, with mutual CHAP.
fn inquiry(target: &Target, secret: &str) -> ToolOutput {
    isoe(&[
        "inquiry",
        "--initiator-name",
        INITIATOR,
        "--target-user",
        TARGET_USER,
        "--target-secret",
        TARGET_SECRET,
        &lun_url(target, secret),
    ])
}

fn discover(target: &Target, secret: &str) -> ToolOutput {
    isoe(&[
        "discover",
        "--initiator-name",
        INITIATOR,
        &format!("iscsi://{DISCOVERY_USER}%{secret}@{}", target.addr()),
    ])
}

/// The bytes of `text` in hex, lower and upper case.
fn hex_forms(text: &str) -> [String; 2] {
    let lower: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    [lower.clone(), lower.to_uppercase()]
}

fn assert_no_secret(log: &str) {
    for secret in SECRETS {
        assert!(!log.contains(secret), "the log shows {secret:?}:\n{log}");
        for hex in hex_forms(secret) {
            assert!(
                !log.contains(&hex),
                "the log shows {secret:?} in hex:\n{log}"
            );
        }
    }
    // No login text reaches the log: no challenge, no response.
    for key in ["CHAP_R=", "CHAP_C=", "CHAP_I="] {
        assert!(!log.contains(key), "the log shows {key}:\n{log}");
    }
}

/// The log's lines that contain every one of `needles`.
fn lines_with<'a>(log: &'a str, needles: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .collect()
}

/// The one line with every one of `needles`; panics with the log if there
/// is none. Checks that it starts with an RFC 3339 UTC time and `level`.
fn line_with<'a>(log: &'a str, level: &str, needles: &[&str]) -> &'a str {
    let found = lines_with(log, needles);
    let line = found
        .first()
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{log}"));
    let (time, rest) = line.split_once(' ').expect("a time, then the rest");
    assert!(
        time.len() >= 20
            && time.as_bytes()[4] == b'-'
            && time.as_bytes()[10] == b'T'
            && time.ends_with('Z'),
        "{line}"
    );
    assert!(rest.trim_start().starts_with(level), "not {level}: {line}");
    line
}

#[test]
fn logins_refusals_and_logouts_are_logged_without_a_secret_even_at_trace() {
    let config = config("");
    let mut target = Target::with_config_and_env(&config, &[("RUST_LOG", "trace")]);

    let good = inquiry(&target, SECRET);
    assert!(good.success(), "mutual CHAP login: {}", good.describe());
    let wrong = inquiry(&target, WRONG);
    assert_eq!(exit_code(&wrong), 1, "{}", wrong.describe());
    let found = discover(&target, DISCOVERY_SECRET);
    assert!(found.success(), "{}", found.describe());
    assert!(found.stdout.contains(SECURE), "{}", found.describe());
    let refused = discover(&target, WRONG);
    assert!(!refused.success(), "{}", refused.describe());
    // libiscsi's CHAP (MD5) and its URL form, with mutual CHAP.
    let url = lun_url(&target, SECRET);
    let mutual = [
        ("LIBISCSI_CHAP_TARGET_USERNAME", TARGET_USER),
        ("LIBISCSI_CHAP_TARGET_PASSWORD", TARGET_SECRET),
    ];
    let inq = tools::run_program(&tools::require("iscsi-inq"), &[&url], &mutual, TOOL_TIMEOUT);
    assert!(inq.success(), "{}", inq.describe());
    let wrong_url = lun_url(&target, WRONG);
    let inq = tools::run_program(
        &tools::require("iscsi-inq"),
        &[&wrong_url],
        &[],
        TOOL_TIMEOUT,
    );
    assert!(!inq.success(), "{}", inq.describe());
    let ls_url = format!(
        "iscsi://{DISCOVERY_USER}%{DISCOVERY_SECRET}@{}",
        target.addr()
    );
    let ls = tools::run_program(&tools::require("iscsi-ls"), &[&ls_url], &[], TOOL_TIMEOUT);
    assert!(ls.success(), "{}", ls.describe());

    target.stop_cleanly();
    let log = target.output();
    assert_no_secret(&log);

    let who = format!("initiator={INITIATOR} addr=127.0.0.1:");
    let login = line_with(&log, "INFO", &["login accepted: new normal session", &who]);
    assert!(login.contains(&format!("target={SECURE}")), "{login}");
    assert!(
        login.contains(" tsih=") && login.contains(" cid=0"),
        "{login}"
    );
    line_with(&log, "DEBUG", &["login negotiated", "header_digest="]);
    let refusal = line_with(
        &log,
        "WARN",
        &["login refused (authentication failure)", &who],
    );
    assert!(
        refusal.contains("CHAP_R does not verify for user \"alice\"")
            && refusal.contains("status=0x0201"),
        "{refusal}"
    );
    line_with(&log, "INFO", &["logout to close the session: closed", &who]);
    line_with(&log, "INFO", &["connection closed after logout", &who]);
    line_with(
        &log,
        "INFO",
        &["login accepted: new discovery session", &who],
    );
    assert_eq!(
        lines_with(&log, &["login refused (authentication failure)", &who]).len(),
        2,
        "the refused normal and discovery logins:\n{log}"
    );
    // libiscsi's logins and refusals too, under its own name.
    assert!(
        lines_with(&log, &["login accepted", "libiscsi"]).len() >= 2,
        "{log}"
    );
    assert!(
        !lines_with(&log, &["login refused", "libiscsi"]).is_empty(),
        "{log}"
    );
    line_with(&log, "INFO", &["signal 15 received, shutting down"]);
    line_with(&log, "INFO", &["shut down"]);
    // The startup report stays on stdout as it was.
    assert!(
        log.lines()
            .any(|l| l.starts_with("isoe target: listening on 127.0.0.1:")),
        "{log}"
    );
}

#[test]
fn the_configured_level_holds_unless_rust_log_is_set() {
    // warn: the refusal, not the login.
    let config = config("[log]\nlevel = \"warn\"\n");
    let mut target = Target::with_config(&config);
    assert!(inquiry(&target, SECRET).success());
    assert!(!inquiry(&target, WRONG).success());
    target.stop_cleanly();
    let log = target.output();
    line_with(&log, "WARN", &["login refused", INITIATOR]);
    assert!(lines_with(&log, &["login accepted"]).is_empty(), "{log}");
    assert!(lines_with(&log, &[" INFO "]).is_empty(), "{log}");
    assert_no_secret(&log);

    // RUST_LOG wins over the file, both ways.
    let config = self::config("[log]\nlevel = \"error\"\n");
    let mut target = Target::with_config_and_env(&config, &[("RUST_LOG", "info")]);
    assert!(inquiry(&target, SECRET).success());
    target.stop_cleanly();
    let log = target.output();
    line_with(&log, "INFO", &["login accepted", INITIATOR]);
    assert!(lines_with(&log, &[" DEBUG "]).is_empty(), "{log}");
}

#[test]
fn a_bad_rust_log_stops_the_target_before_it_listens() {
    let config = config("");
    let out = support::cli::isoe_with_env(
        &[
            "target",
            "--listen",
            "127.0.0.1:0",
            "--config",
            &config.path().display().to_string(),
        ],
        &[("RUST_LOG", "isoe_target=loudest")],
    );
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(
        out.stderr
            .starts_with("isoe target: RUST_LOG=\"isoe_target=loudest\": "),
        "{}",
        out.describe()
    );
    assert!(!out.stdout.contains("listening on"), "{}", out.describe());
}

#[test]
fn json_lines_carry_the_fields_and_no_timestamp_when_asked() {
    let config = config("[log]\nformat = \"json\"\ntimestamps = false\n");
    let mut target = Target::with_config(&config);
    assert!(inquiry(&target, SECRET).success());
    assert!(!inquiry(&target, WRONG).success());
    target.stop_cleanly();
    let log = target.output();
    assert_no_secret(&log);
    let events: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(events.iter().all(|e| e.get("timestamp").is_none()), "{log}");
    let login = events
        .iter()
        .find(|e| {
            e["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("login accepted"))
        })
        .unwrap_or_else(|| panic!("no login event in:\n{log}"));
    assert_eq!(login["level"], "INFO");
    assert_eq!(login["target"], "isoe_target::connection::login");
    assert_eq!(login["fields"]["initiator"], INITIATOR);
    assert_eq!(login["fields"]["target"], SECURE);
    assert!(
        login["fields"]["addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{login}"
    );
    let refusal = events
        .iter()
        .find(|e| e["level"] == "WARN")
        .unwrap_or_else(|| panic!("no refusal in:\n{log}"));
    assert_eq!(refusal["fields"]["status"], "0x0201");
    assert_eq!(refusal["fields"]["initiator"], INITIATOR);
}

#[test]
fn reinstatements_resets_and_dropped_connections_are_logged() {
    use isoe_wire::pdu::{tmf, Lun, TaskMgmtRequest, RESERVED_TAG};
    use isoe_wire::Pdu;
    use support::{Client, LoginParams, DEFAULT_TARGET};

    let mut target = Target::start();
    let params = LoginParams::normal(DEFAULT_TARGET);
    let first = Client::login(target.addr(), &params).expect("first login");
    // The same initiator and ISID again, TSIH 0: the first session goes.
    let mut second = Client::connect(target.addr()).expect("connect");
    second.isid = first.isid;
    second.do_login(&params).expect("reinstating login");

    let itt = second.next_itt();
    let reset = Pdu::TaskMgmtRequest(TaskMgmtRequest {
        immediate: true,
        function: tmf::TmfFunction::LogicalUnitReset,
        lun: Lun::from_number(0),
        initiator_task_tag: itt,
        referenced_task_tag: RESERVED_TAG,
        cmd_sn: second.cmd_sn,
        exp_stat_sn: second.exp_stat_sn,
        ..Default::default()
    });
    second.send_pdu(&reset, &[]).expect("send LUN RESET");
    match second.expect_pdu().expect("a response").0 {
        Pdu::TaskMgmtResponse(r) => assert_eq!(r.response, tmf::TmfResponse::Complete),
        other => panic!("not a task management response: {other:?}"),
    }
    // A data segment past what the target declared: a protocol error.
    let mut bhs = [0u8; 48];
    bhs[0] = 0x01; // SCSI Command
    bhs[5..8].copy_from_slice(&(1u32 << 20).to_be_bytes()[1..]);
    second.send_raw(&bhs).expect("send the header");
    for _ in 0..100 {
        if !lines_with(&target.output(), &["connection dropped"]).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    target.stop_cleanly();
    let log = target.output();
    let who = format!("initiator={} addr=127.0.0.1:", params.initiator_name);
    let reinstated = line_with(&log, "INFO", &["session reinstated", "old_tsih="]);
    assert!(
        reinstated.contains(&format!("initiator={}", params.initiator_name)),
        "{reinstated}"
    );
    assert!(reinstated.contains("login{addr=127.0.0.1:"), "{reinstated}");
    let reset = line_with(
        &log,
        "WARN",
        &[
            "task management: LOGICAL UNIT RESET: function complete",
            &who,
        ],
    );
    assert!(reset.contains(" lun=0"), "{reset}");
    line_with(
        &log,
        "WARN",
        &[
            "connection dropped: protocol error: data segment of 1048576 bytes",
            &who,
        ],
    );
}
