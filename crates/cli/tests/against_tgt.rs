//! The isoe initiator commands against tgt, Debian's userspace target: a
//! private `tgtd` per test on its own loopback port (support::tgt).
//! Discovery, INQUIRY and READ CAPACITY, a write/read round trip checked in
//! tgt's backing file, and CHAP: one-way, wrong secrets, mutual.
//!
//! Skipped, with the reason printed, without root or without tgtd, unless
//! CI is set (then they fail): see support::tgt.

mod support;

use support::cli::{exit_code, isoe, isoe_json, isoe_with_env, parse_json};
use support::tgt::{Tgt, TGT_IQN, TGT_LUN};
use support::{first_difference, pattern};

const LUN_BYTES: u64 = 64 << 20;

/// Starts tgt, or returns from the test (skipping it) when it cannot run here.
macro_rules! tgt_or_skip {
    ($test:expr) => {
        match Tgt::start_or_skip($test, LUN_BYTES) {
            Some(tgt) => tgt,
            None => return,
        }
    };
}

#[test]
fn discovery_lists_tgts_target_and_portal() {
    let tgt = tgt_or_skip!("discovery_lists_tgts_target_and_portal");
    let json = isoe_json(&["discover", "--json", &tgt.portal()]);
    let targets = json["targets"].as_array().expect("a targets array");
    assert_eq!(targets.len(), 1, "{json}");
    assert_eq!(targets[0]["name"], TGT_IQN);
    assert_eq!(targets[0]["portals"][0]["address"], tgt.portal().as_str());
    assert_eq!(targets[0]["portals"][0]["portal_group_tag"], 1);

    let human = isoe(&["discover", &tgt.portal()]);
    assert!(human.success(), "{}", human.describe());
    assert_eq!(
        human.stdout,
        format!("{TGT_IQN}\n    {}  (portal group 1)\n", tgt.portal())
    );
}

#[test]
fn inquiry_capacity_and_luns_of_tgt() {
    let tgt = tgt_or_skip!("inquiry_capacity_and_luns_of_tgt");
    let inq = isoe_json(&["inquiry", "--json", &tgt.lun_url()]);
    assert_eq!(inq["vendor"], "IET");
    assert_eq!(inq["product"], "VIRTUAL-DISK");
    assert_eq!(inq["device_type"], 0);
    assert_eq!(inq["peripheral_qualifier"], 0);
    assert!(
        inq["serial"].as_str().is_some_and(|s| !s.is_empty()),
        "tgt reports a unit serial number: {inq}"
    );

    let cap = isoe_json(&["capacity", "--json", &tgt.lun_url()]);
    assert_eq!(cap["size_bytes"], LUN_BYTES);
    assert_eq!(cap["block_size_bytes"], 512);
    assert_eq!(cap["blocks"], LUN_BYTES / 512);
    assert_eq!(cap["thin_provisioning"], false);

    // tgt's LUN 0 is a controller, with no capacity; LUN 1 is the disk.
    let luns = isoe_json(&["luns", "--json", &tgt.target_url()]);
    let luns = luns["luns"].as_array().expect("a luns array");
    assert_eq!(luns.len(), 2, "{luns:?}");
    assert_eq!(luns[0]["lun"], 0);
    assert_eq!(luns[0]["device_type_name"], "storage array controller");
    assert!(luns[0]["capacity"].is_null(), "{luns:?}");
    assert_eq!(luns[1]["lun"], TGT_LUN);
    assert_eq!(luns[1]["capacity"]["size_bytes"], LUN_BYTES);
}

#[test]
fn a_file_written_through_tgt_lands_in_its_backing_file() {
    let tgt = tgt_or_skip!("a_file_written_through_tgt_lands_in_its_backing_file");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    // 3 MiB and 5 blocks: four WRITE (16) commands, the last a short one.
    let data = pattern(77, (3 << 20) + 5 * 512);
    std::fs::write(&input, &data).unwrap();
    let lba = 1000u64;

    let w = isoe(&[
        "write",
        &tgt.lun_url(),
        "--lba",
        &lba.to_string(),
        "-i",
        input.to_str().unwrap(),
    ]);
    assert!(w.success(), "{}", w.describe());
    let blocks = data.len() / 512;
    let r = isoe(&[
        "read",
        &tgt.lun_url(),
        "--lba",
        &lba.to_string(),
        "--blocks",
        &blocks.to_string(),
        "-o",
        output.to_str().unwrap(),
    ]);
    assert!(r.success(), "{}", r.describe());
    let back = std::fs::read(&output).unwrap();
    if let Some(diff) = first_difference(&data, &back) {
        panic!("read back through tgt differs: {diff}");
    }
    // Independent of our reader: the bytes are in tgt's file at LBA * 512.
    let file = std::fs::read(tgt.backing_file()).unwrap();
    let at = lba as usize * 512;
    if let Some(diff) = first_difference(&data, &file[at..at + data.len()]) {
        panic!("tgt's backing file differs: {diff}");
    }
    assert!(
        file[..at].iter().all(|&b| b == 0),
        "bytes before LBA {lba} were written"
    );
}

#[test]
fn chap_with_the_right_secret_logs_in() {
    let tgt = tgt_or_skip!("chap_with_the_right_secret_logs_in");
    tgt.add_chap_account("alice", "alice-secret-12");

    // Credentials in the URL.
    let inq = isoe_json(&[
        "inquiry",
        "--json",
        &tgt.lun_url_with_chap("alice", "alice-secret-12"),
    ]);
    assert_eq!(inq["product"], "VIRTUAL-DISK");

    // The user on the command line, the secret in the environment.
    let cap = isoe_with_env(
        &["capacity", "--json", "--chap-user", "alice", &tgt.lun_url()],
        &[("ISOE_CHAP_SECRET", "alice-secret-12")],
    );
    assert!(cap.success(), "{}", cap.describe());
    assert_eq!(parse_json(&cap)["size_bytes"], LUN_BYTES);

    // No credentials: tgt refuses, and the user learns CHAP is required.
    let none = isoe(&["inquiry", &tgt.lun_url()]);
    assert_eq!(exit_code(&none), 1, "{}", none.describe());
    assert_eq!(
        none.stderr,
        format!(
            "isoe inquiry: error: login to {TGT_IQN} at {} failed: target refused the login: \
             authentication failure (status 0x0201); the target requires CHAP: give \
             iscsi://USER%SECRET@..., or --chap-user with --chap-secret or ISOE_CHAP_SECRET\n",
            tgt.portal()
        )
    );
}

#[test]
fn a_wrong_chap_secret_fails_with_a_message_a_user_understands() {
    let tgt = tgt_or_skip!("a_wrong_chap_secret_fails_with_a_message_a_user_understands");
    tgt.add_chap_account("alice", "alice-secret-12");
    let expected = format!(
        "login to {TGT_IQN} at {} failed: target refused the login: authentication failure \
         (status 0x0201); authentication failed: check the CHAP user name and secret",
        tgt.portal()
    );

    let out = isoe(&[
        "inquiry",
        &tgt.lun_url_with_chap("alice", "wrong-secret-99"),
    ]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(out.stderr, format!("isoe inquiry: error: {expected}\n"));
    assert_eq!(out.stdout, "");

    let out = isoe_with_env(
        &[
            "read",
            "--json",
            "--chap-user",
            "alice",
            &tgt.lun_url(),
            "--blocks",
            "1",
        ],
        &[("ISOE_CHAP_SECRET", "wrong-secret-99")],
    );
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(parse_json(&out), serde_json::json!({ "error": expected }));

    // A wrong user name reads the same: the target does not say which was wrong.
    let out = isoe(&[
        "capacity",
        &tgt.lun_url_with_chap("mallory", "alice-secret-12"),
    ]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(out.stderr, format!("isoe capacity: error: {expected}\n"));
    for secret in ["wrong-secret-99", "alice-secret-12"] {
        assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));
    }
}

#[test]
fn mutual_chap_checks_tgts_identity() {
    let tgt = tgt_or_skip!("mutual_chap_checks_tgts_identity");
    tgt.add_chap_account("alice", "alice-secret-12");
    tgt.add_outgoing_account("tgt-out", "target-secret-34");
    let url = tgt.lun_url_with_chap("alice", "alice-secret-12");

    // Both sides prove themselves.
    let ok = isoe_with_env(
        &["inquiry", "--json", "--target-user", "tgt-out", &url],
        &[("ISOE_TARGET_SECRET", "target-secret-34")],
    );
    assert!(ok.success(), "{}", ok.describe());
    assert_eq!(parse_json(&ok)["vendor"], "IET");

    // tgt answers our challenge with a secret we do not expect: we refuse it.
    let wrong = isoe(&[
        "inquiry",
        "--target-user",
        "tgt-out",
        "--target-secret",
        "not-the-target-99",
        &url,
    ]);
    assert_eq!(exit_code(&wrong), 1, "{}", wrong.describe());
    assert_eq!(
        wrong.stderr,
        format!(
            "isoe inquiry: error: login to {TGT_IQN} at {} failed: the target failed mutual \
             CHAP authentication: CHAP_R does not verify for user \"tgt-out\"; the target did \
             not prove its identity: check --target-user and --target-secret (or \
             ISOE_TARGET_SECRET)\n",
            tgt.portal()
        )
    );

    // tgt names itself differently from what we expect.
    let name = isoe_with_env(
        &["inquiry", "--target-user", "someone-else", &url],
        &[("ISOE_TARGET_SECRET", "target-secret-34")],
    );
    assert_eq!(exit_code(&name), 1, "{}", name.describe());
    assert!(
        name.stderr
            .contains("CHAP_N \"tgt-out\" is not the configured user"),
        "{}",
        name.describe()
    );
    for out in [&ok, &wrong, &name] {
        for secret in ["alice-secret-12", "target-secret-34", "not-the-target-99"] {
            assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));
        }
    }
}

#[test]
fn bench_verify_reads_back_every_write_through_tgt_with_chap() {
    let tgt = tgt_or_skip!("bench_verify_reads_back_every_write_through_tgt_with_chap");
    tgt.add_chap_account("bench-user", "bench-secret-1234");
    let url = tgt.lun_url_with_chap("bench-user", "bench-secret-1234");
    // A mixed, random, deep workload over two workers; every read is checked
    // against the generation this run last wrote there.
    let out = isoe(&[
        "bench",
        &url,
        "--bs",
        "8k",
        "--read-pct",
        "50",
        "--random-pct",
        "100",
        "--qd",
        "16",
        "--workers",
        "2",
        "--duration",
        "2",
        "--ramp",
        "0.5",
        "--verify",
        "--json",
        "-",
        "--no-progress",
    ]);
    assert!(out.success(), "{}", out.describe());
    let run = parse_json(&out);
    assert_eq!(run["workload"]["verify"], true);
    assert_eq!(run["verify_errors"], 0, "{run}");
    assert_eq!(run["errors"], 0, "{run}");
    assert!(run["read"]["ios"].as_u64().unwrap() > 100, "{run}");
    assert!(run["write"]["ios"].as_u64().unwrap() > 100, "{run}");
    // The password never reaches the JSON.
    assert!(!out.stdout.contains("bench-secret-1234"), "{}", out.stdout);
}
