//! Authentication and access control of `isoe target`, driven from outside:
//! CHAP required per target and for discovery (RFC 7143 §12.1.3), checked
//! with libiscsi's tools (MD5, one-way and mutual) and with isoe's own
//! initiator (SHA-256, SHA3-256, mutual); and `allowed_initiators`, which
//! hides a target from discovery and refuses its login with 0x0202; and
//! `isoe bench` taking CHAP as the other initiator commands do.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::cli::{exit_code, isoe, isoe_json, isoe_with_env};
use support::tools::{self, ToolOutput};
use support::{Target, TargetConfig};

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

const SECURE: &str = "iqn.2026-11.io.isoe:secure";
const OPEN: &str = "iqn.2026-11.io.isoe:open";
const SHA256: &str = "iqn.2026-11.io.isoe:sha256";
const SHA3: &str = "iqn.2026-11.io.isoe:sha3";

const USER: &str = "alice";
const SECRET: &str = "alice-secret-12";
const WRONG: &str = "wrong-secret-99";
const TARGET_USER: &str = "isoe-target";
const TARGET_SECRET: &str = "target-secret-34";

/// Every secret a test uses: none may appear in any output.
const SECRETS: [&str; 3] = [SECRET, WRONG, TARGET_SECRET];

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
    }
}

/// `iscsi://[user%secret@]127.0.0.1:PORT/IQN/0`.
fn lun_url(target: &Target, iqn: &str, credentials: Option<(&str, &str)>) -> String {
    match credentials {
        Some((user, secret)) => format!("iscsi://{user}%{secret}@{}/{iqn}/0", target.addr()),
        None => target.lun_url(iqn, 0),
    }
}

/// `iscsi://[user%secret@]127.0.0.1:PORT`, iscsi-ls's discovery portal.
fn portal_url(target: &Target, credentials: Option<(&str, &str)>) -> String {
    match credentials {
        Some((user, secret)) => format!("iscsi://{user}%{secret}@{}", target.addr()),
        None => target.url(),
    }
}

fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> ToolOutput {
    let out = tools::run_program(&tools::require(name), args, env, TOOL_TIMEOUT);
    assert!(out.status.is_some(), "{name} hung: {}", out.describe());
    out
}

fn assert_refused(out: &ToolOutput, why: &str, context: &str) {
    assert!(!out.success(), "{context}: accepted: {}", out.describe());
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(why),
        "{context}: no {why:?}: {}",
        out.describe()
    );
}

/// One CHAP target (`SECURE`, secret read from a file) and one open one;
/// discovery requires the same credentials as `SECURE`.
fn chap_target(discovery_chap: bool) -> (TargetConfig, Target) {
    let discovery = if discovery_chap {
        format!("[discovery.chap]\nuser = \"{USER}\"\nsecret_file = \"alice.secret\"\n\n")
    } else {
        String::new()
    };
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n{discovery}\
         [[target]]\nname = \"{SECURE}\"\n\
         [target.chap]\nuser = \"{USER}\"\nsecret_file = \"alice.secret\"\n\
         mutual_user = \"{TARGET_USER}\"\nmutual_secret = \"{TARGET_SECRET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n\n\
         [[target]]\nname = \"{OPEN}\"\n[[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n"
    ));
    let secret_path = config.dir().join("alice.secret");
    std::fs::write(&secret_path, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&secret_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let target = Target::with_config(&config);
    (config, target)
}

#[test]
fn iscsi_inq_logs_in_only_with_the_right_chap_credentials() {
    let (_config, mut target) = chap_target(false);
    let none = run("iscsi-inq", &[&lun_url(&target, SECURE, None)], &[]);
    assert_refused(&none, "Authentication failure(513)", "no credentials");
    let wrong = run(
        "iscsi-inq",
        &[&lun_url(&target, SECURE, Some((USER, WRONG)))],
        &[],
    );
    assert_refused(&wrong, "Authentication failure(513)", "wrong secret");
    let wrong_user = run(
        "iscsi-inq",
        &[&lun_url(&target, SECURE, Some(("mallory", SECRET)))],
        &[],
    );
    assert_refused(&wrong_user, "Authentication failure(513)", "wrong user");

    let good = run(
        "iscsi-inq",
        &[&lun_url(&target, SECURE, Some((USER, SECRET)))],
        &[],
    );
    assert!(good.success(), "right credentials: {}", good.describe());
    assert!(good.stdout.contains("Vendor:ISOE"), "{}", good.describe());

    // The open target needs no credentials, and libiscsi offering them
    // anyway (AuthMethod=CHAP,None, answered None) still logs in.
    for creds in [None, Some((USER, SECRET))] {
        let out = run("iscsi-inq", &[&lun_url(&target, OPEN, creds)], &[]);
        assert!(out.success(), "open target, {creds:?}: {}", out.describe());
    }

    target.assert_running("after the refused logins");
    // The log is read on another thread: its lines may trail the answers.
    for line in [
        "does not verify for user",
        "is not the configured user",
        "the login skipped the security stage",
    ] {
        target.wait_for_output(line);
    }
    let log = target.output();
    assert!(
        log.contains("CHAP: CHAP_R does not verify for user \"alice\""),
        "the target says why it refused:\n{log}"
    );
    assert!(
        log.contains("CHAP_N \"mallory\" is not the configured user"),
        "{log}"
    );
    assert!(
        log.contains("authentication is required but the login skipped the security stage"),
        "{log}"
    );
    assert_no_secret("the target's output", &log);
}

#[test]
fn libiscsi_mutual_chap_checks_the_targets_secret() {
    let (_config, mut target) = chap_target(false);
    let url = lun_url(&target, SECURE, Some((USER, SECRET)));
    let env_ok = [
        ("LIBISCSI_CHAP_TARGET_USERNAME", TARGET_USER),
        ("LIBISCSI_CHAP_TARGET_PASSWORD", TARGET_SECRET),
    ];
    let out = run("iscsi-inq", &[&url], &env_ok);
    assert!(out.success(), "mutual CHAP: {}", out.describe());
    assert!(out.stdout.contains("Vendor:ISOE"), "{}", out.describe());

    // libiscsi expects another target secret: the target's answer fails.
    let env_wrong = [
        ("LIBISCSI_CHAP_TARGET_USERNAME", TARGET_USER),
        ("LIBISCSI_CHAP_TARGET_PASSWORD", WRONG),
    ];
    let out = run("iscsi-inq", &[&url], &env_wrong);
    assert_refused(
        &out,
        "Invalid CHAP_R response from the target",
        "wrong target secret",
    );
    target.assert_running("after mutual CHAP");
    assert_no_secret("the target's output", &target.output());
}

#[test]
fn iscsi_ls_discovers_only_with_the_right_discovery_credentials() {
    let (_config, mut target) = chap_target(true);
    let none = run("iscsi-ls", &[&portal_url(&target, None)], &[]);
    assert_refused(
        &none,
        "Authentication failure(513)",
        "discovery, no credentials",
    );
    let wrong = run(
        "iscsi-ls",
        &[&portal_url(&target, Some((USER, WRONG)))],
        &[],
    );
    assert_refused(
        &wrong,
        "Authentication failure(513)",
        "discovery, wrong secret",
    );

    // The same credentials then log into each target to list its LUNs.
    let good = run(
        "iscsi-ls",
        &["-s", &portal_url(&target, Some((USER, SECRET)))],
        &[],
    );
    assert!(good.success(), "{}", good.describe());
    for iqn in [SECURE, OPEN] {
        assert!(
            good.stdout
                .contains(&format!("Target:{iqn} Portal:{}", target.addr())),
            "{iqn} missing: {}",
            good.describe()
        );
    }
    assert_eq!(
        good.stdout.matches("Lun:0").count(),
        2,
        "both targets' LUNs listed: {}",
        good.describe()
    );
    target.assert_running("after discovery");
    assert_no_secret("the target's output", &target.output());
}

#[test]
fn open_discovery_lists_a_chap_target_whose_luns_need_the_credentials() {
    let (_config, target) = chap_target(false);
    // Without credentials: discovery works, the LUN listing of SECURE does not.
    let out = run("iscsi-ls", &["-s", &portal_url(&target, None)], &[]);
    assert!(
        out.stdout.contains(&format!("Target:{SECURE} ")),
        "{}",
        out.describe()
    );
    assert_refused(
        &out,
        "Authentication failure(513)",
        "LUNs without credentials",
    );
    // With them, every LUN is listed.
    let out = run(
        "iscsi-ls",
        &["-s", &portal_url(&target, Some((USER, SECRET)))],
        &[],
    );
    assert!(out.success(), "{}", out.describe());
    assert_eq!(out.stdout.matches("Lun:0").count(), 2, "{}", out.describe());
}

/// Targets accepting only SHA-256 or only SHA3-256, both with mutual CHAP.
fn algorithm_targets() -> (TargetConfig, Target) {
    let chap = |algorithm: &str| {
        format!(
            "[target.chap]\nuser = \"{USER}\"\nsecret = \"{SECRET}\"\n\
             mutual_user = \"{TARGET_USER}\"\nmutual_secret = \"{TARGET_SECRET}\"\n\
             algorithms = [\"{algorithm}\"]\n"
        )
    };
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n\
         [[target]]\nname = \"{SHA256}\"\n{}[[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n\n\
         [[target]]\nname = \"{SHA3}\"\n{}[[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n",
        chap("SHA-256"),
        chap("SHA3-256")
    ));
    let target = Target::with_config(&config);
    (config, target)
}

#[test]
fn isoe_initiator_authenticates_both_ways_with_sha256_and_sha3_256() {
    let (_config, mut target) = algorithm_targets();
    for (iqn, bytes) in [(SHA256, 8u64 << 20), (SHA3, 16 << 20)] {
        let url = lun_url(&target, iqn, Some((USER, SECRET)));
        // Each target accepts one algorithm only, so a login proves it was used.
        let cap = isoe_json(&[
            "capacity",
            "--json",
            "--target-user",
            TARGET_USER,
            "--target-secret",
            TARGET_SECRET,
            &url,
        ]);
        assert_eq!(cap["size_bytes"], bytes, "{iqn}");

        // The mutual secret from the environment, the algorithm named.
        let algorithm = if iqn == SHA3 { "SHA3-256" } else { "SHA-256" };
        let out = isoe_with_env(
            &[
                "inquiry",
                "--json",
                "--chap-algorithms",
                algorithm,
                "--target-user",
                TARGET_USER,
                &url,
            ],
            &[("ISOE_TARGET_SECRET", TARGET_SECRET)],
        );
        assert!(out.success(), "{iqn}: {}", out.describe());

        // The target answers with a secret the initiator does not expect: refused.
        let out = isoe(&[
            "inquiry",
            "--target-user",
            TARGET_USER,
            "--target-secret",
            WRONG,
            &url,
        ]);
        assert_eq!(exit_code(&out), 1, "{iqn}: {}", out.describe());
        assert!(
            out.stderr.contains(&format!(
                "the target failed mutual CHAP authentication: CHAP_R does not verify for \
                 user \"{TARGET_USER}\"; the target did not prove its identity"
            )),
            "{iqn}: {}",
            out.describe()
        );

        // An initiator offering only MD5 has no algorithm in common: 0x0201.
        let out = isoe(&["inquiry", "--chap-algorithms", "MD5", &url]);
        assert_eq!(exit_code(&out), 1, "{iqn}: {}", out.describe());
        assert!(
            out.stderr
                .contains("authentication failure (status 0x0201)"),
            "{iqn}: {}",
            out.describe()
        );
        assert_no_secret("isoe's output", &format!("{}{}", out.stdout, out.stderr));
    }
    // A wrong initiator secret: 0x0201 with the hint to check the credentials.
    let out = isoe(&["inquiry", &lun_url(&target, SHA3, Some((USER, WRONG)))]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert!(
        out.stderr.contains(
            "authentication failure (status 0x0201); authentication failed: check the CHAP \
             user name and secret"
        ),
        "{}",
        out.describe()
    );
    assert_no_secret("isoe's output", &out.stderr);
    target.assert_running("after the logins");
    target.wait_for_output("none of the offered CHAP_A");
    let log = target.output();
    assert!(
        log.contains("none of the offered CHAP_A algorithms \"5\" is enabled"),
        "{log}"
    );
    assert_no_secret("the target's output", &log);
}

#[test]
fn an_initiator_outside_the_acl_neither_sees_nor_logs_into_the_target() {
    const ALLOWED: &str = "iqn.2026-11.io.isoe:allowed-host";
    const OTHER: &str = "iqn.2026-11.io.isoe:other-host";
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n\
         [[target]]\nname = \"{SECURE}\"\nallowed_initiators = [\"{ALLOWED}\"]\n\
         [[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n\n\
         [[target]]\nname = \"{OPEN}\"\n[[target.lun]]\nnumber = 0\nmemory = \"8MiB\"\n"
    ));
    let mut target = Target::with_config(&config);
    let portal = target.addr().to_string();
    let names = |initiator: &str| -> Vec<String> {
        let json = isoe_json(&["discover", "--json", "--initiator-name", initiator, &portal]);
        json["targets"]
            .as_array()
            .expect("a target list")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(ALLOWED), vec![SECURE.to_string(), OPEN.to_string()]);
    assert_eq!(names(OTHER), vec![OPEN.to_string()], "SECURE is hidden");

    let url = target.lun_url(SECURE, 0);
    let allowed = isoe(&["capacity", "--initiator-name", ALLOWED, &url]);
    assert!(allowed.success(), "{}", allowed.describe());
    let other = isoe(&["capacity", "--initiator-name", OTHER, &url]);
    assert_eq!(exit_code(&other), 1, "{}", other.describe());
    assert!(
        other
            .stderr
            .contains("target refused the login: authorization failure (status 0x0202)"),
        "{}",
        other.describe()
    );

    // libiscsi's tools log in under their own names, outside the ACL.
    let ls = run("iscsi-ls", &[&format!("{}/", target.url())], &[]);
    assert!(ls.success(), "{}", ls.describe());
    assert!(
        ls.stdout.contains(&format!("Target:{OPEN} ")),
        "{}",
        ls.describe()
    );
    assert!(!ls.stdout.contains(SECURE), "{}", ls.describe());
    let inq = run("iscsi-inq", &[&url], &[]);
    assert_refused(
        &inq,
        "Authorization failure(514)",
        "iscsi-inq outside the ACL",
    );

    // A target that does not exist: 0x0203.
    let missing = isoe(&["capacity", &target.lun_url("iqn.2026-11.io.isoe:nope", 0)]);
    assert_eq!(exit_code(&missing), 1, "{}", missing.describe());
    assert!(
        missing
            .stderr
            .contains("target refused the login: target not found (status 0x0203)"),
        "{}",
        missing.describe()
    );
    target.assert_running("after the refused logins");
    assert!(
        target
            .output()
            .contains(&format!("{OTHER} is not in allowed_initiators of {SECURE}")),
        "{}",
        target.output()
    );
}

/// `isoe bench` takes CHAP as the other initiator commands do: the URL's
/// user with ISOE_CHAP_SECRET logs in; a wrong secret fails the login with
/// the hint to check the credentials, before any I/O.
#[test]
fn bench_logs_in_with_the_urls_user_and_the_secret_from_the_environment() {
    let (_config, mut target) = chap_target(false);
    let url = format!("iscsi://{USER}@{}/{SECURE}/0", target.addr());
    let bench = |secret: &str| {
        isoe_with_env(
            &[
                "bench",
                &url,
                "--duration",
                "0.5",
                "--ramp",
                "0",
                "--no-progress",
            ],
            &[("ISOE_CHAP_SECRET", secret)],
        )
    };
    let good = bench(SECRET);
    assert!(good.success(), "right secret: {}", good.describe());
    assert!(good.stdout.contains("IOPS"), "{}", good.describe());
    assert_no_secret("bench's output", &format!("{}{}", good.stdout, good.stderr));

    let wrong = bench(WRONG);
    assert_eq!(exit_code(&wrong), 1, "wrong secret: {}", wrong.describe());
    assert!(
        wrong.stderr.contains(
            "authentication failure (status 0x0201); authentication failed: check the CHAP \
             user name and secret"
        ),
        "wrong secret: {}",
        wrong.describe()
    );
    assert_no_secret(
        "bench's output",
        &format!("{}{}", wrong.stdout, wrong.stderr),
    );
    target.assert_running("after bench's logins");
    let log = target.output();
    assert!(
        !log.contains("the login skipped the security stage"),
        "bench logged in without CHAP:\n{log}"
    );
}
