//! The `isoe` initiator commands (discover, inquiry, capacity, read, write,
//! luns) run as a user runs them, against `isoe target` on an ephemeral
//! loopback port: their output in both forms, their exit codes, and the
//! exact errors a user reads.

mod support;

use serde_json::Value;
use support::cli::{exit_code, isoe, isoe_json, isoe_with_env, parse_json};
use support::{first_difference, pattern, Target, TargetConfig, DEFAULT_TARGET};

/// LUN 0: 64 MiB of 512-byte blocks with a fixed serial; LUN 3: 8 MiB of 4096-byte blocks.
fn two_lun_target() -> (TargetConfig, Target) {
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\nserial = \"ISOE-CLI-0\"\n\n\
         [[target.lun]]\nnumber = 3\nmemory = \"8MiB\"\nblock_size = 4096\n"
    ));
    let target = Target::with_config(&config);
    (config, target)
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("isoe-cli-test-")
        .tempdir()
        .expect("create a temporary directory")
}

fn path_str(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

#[test]
fn discover_lists_the_target_and_its_portal() {
    let (_config, target) = two_lun_target();
    let portal = target.addr().to_string();

    let human = isoe(&["discover", &portal]);
    assert!(human.success(), "{}", human.describe());
    assert_eq!(
        human.stdout,
        format!("{DEFAULT_TARGET}\n    {portal}  (portal group 1)\n")
    );

    let json = isoe_json(&["discover", "--json", &portal]);
    assert_eq!(json["portal"], portal.as_str());
    assert_eq!(json["targets"].as_array().map(Vec::len), Some(1));
    assert_eq!(json["targets"][0]["name"], DEFAULT_TARGET);
    assert_eq!(json["targets"][0]["portals"][0]["address"], portal.as_str());
    assert_eq!(json["targets"][0]["portals"][0]["portal_group_tag"], 1);

    // The URL form of a portal works too.
    let url = isoe(&["discover", &target.url()]);
    assert_eq!(url.stdout, human.stdout, "{}", url.describe());
}

#[test]
fn inquiry_and_capacity_report_the_luns_values() {
    let (_config, target) = two_lun_target();
    let url0 = target.lun_url(DEFAULT_TARGET, 0);

    let inq = isoe_json(&["inquiry", "--json", &url0]);
    assert_eq!(inq["vendor"], "ISOE");
    assert_eq!(inq["product"], "MEMORY");
    assert_eq!(inq["device_type"], 0);
    assert_eq!(inq["device_type_name"], "direct access block device");
    assert_eq!(inq["peripheral_qualifier"], 0);
    assert_eq!(inq["version"], 6);
    assert_eq!(inq["version_name"], "SPC-4");
    assert_eq!(inq["removable"], false);
    assert_eq!(inq["serial"], "ISOE-CLI-0");
    assert_eq!(inq["lun"], 0);

    let human = isoe(&["inquiry", &url0]);
    assert!(human.success(), "{}", human.describe());
    for line in [
        "vendor:       ISOE",
        "device type:  0x00 (direct access block device)",
        "version:      0x06 (SPC-4)",
        "serial:       ISOE-CLI-0",
    ] {
        assert!(
            human.stdout.lines().any(|l| l == line),
            "no line {line:?}:\n{}",
            human.stdout
        );
    }

    let cap = isoe_json(&["capacity", "--json", &url0]);
    assert_eq!(cap["blocks"], 131_072);
    assert_eq!(cap["last_lba"], 131_071);
    assert_eq!(cap["block_size_bytes"], 512);
    assert_eq!(cap["size_bytes"], 64u64 << 20);
    assert_eq!(cap["size_binary"], "64 MiB");
    assert_eq!(cap["size_decimal"], "67.11 MB");
    assert!(cap["thin_provisioning"].is_boolean(), "{cap}");

    let cap3 = isoe_json(&["capacity", "--json", &target.lun_url(DEFAULT_TARGET, 3)]);
    assert_eq!(cap3["blocks"], 2048);
    assert_eq!(cap3["block_size_bytes"], 4096);
    assert_eq!(cap3["size_bytes"], 8u64 << 20);

    let human = isoe(&["capacity", &url0]);
    assert!(human.success(), "{}", human.describe());
    assert!(
        human
            .stdout
            .contains("size:               67108864 bytes = 64 MiB = 67.11 MB\n"),
        "{}",
        human.stdout
    );
}

#[test]
fn a_file_written_reads_back_identical() {
    let (_config, target) = two_lun_target();
    let dir = scratch();
    for (lun, block, lba) in [(0u16, 512usize, 7u64), (3, 4096, 5)] {
        let url = target.lun_url(DEFAULT_TARGET, lun);
        // 2 MiB and 3 blocks: three commands of at most 1 MiB each.
        let blocks = (2 << 20) / block + 3;
        let data = pattern(u32::from(lun) + 1, blocks * block);
        let input = dir.path().join(format!("in{lun}.bin"));
        let output = dir.path().join(format!("out{lun}.bin"));
        std::fs::write(&input, &data).unwrap();

        let w = isoe(&[
            "write",
            &url,
            "--lba",
            &lba.to_string(),
            "-i",
            path_str(&input),
        ]);
        assert!(w.success(), "{}", w.describe());
        assert_eq!(
            w.stdout,
            format!(
                "wrote {blocks} block(s) of {block} bytes ({} bytes) from {} at LBA {lba} of {url}, then synchronized the cache\n",
                data.len(),
                input.display()
            )
        );

        let r = isoe(&[
            "read",
            &url,
            "--lba",
            &lba.to_string(),
            "--blocks",
            &blocks.to_string(),
            "-o",
            path_str(&output),
        ]);
        assert!(r.success(), "{}", r.describe());
        let back = std::fs::read(&output).unwrap();
        if let Some(diff) = first_difference(&data, &back) {
            panic!("LUN {lun}: read back differs: {diff}");
        }

        // Without -o and with stdout a pipe, the raw bytes go to stdout.
        let raw = isoe(&["read", &url, "--lba", &lba.to_string(), "--blocks", "2"]);
        assert!(raw.success(), "{}", raw.describe());
        assert_eq!(raw.stdout_bytes, &data[..2 * block]);
    }

    // --json without -o carries a small read inline, as hex.
    let one = isoe_json(&[
        "read",
        "--json",
        &target.lun_url(DEFAULT_TARGET, 0),
        "--lba",
        "7",
        "--blocks",
        "1",
    ]);
    let expected: String = pattern(1, 512).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(one["data_hex"], expected.as_str());
    assert_eq!(one["bytes"], 512);
}

#[test]
fn luns_lists_every_lun_with_its_size() {
    let (_config, target) = two_lun_target();
    let url = target.url() + "/" + DEFAULT_TARGET;

    let json = isoe_json(&["luns", "--json", &url]);
    let luns = json["luns"].as_array().expect("a luns array");
    let numbers: Vec<&Value> = luns.iter().map(|l| &l["lun"]).collect();
    assert_eq!(numbers, [0, 3]);
    assert_eq!(luns[0]["product"], "MEMORY");
    assert_eq!(luns[0]["capacity"]["size_bytes"], 64u64 << 20);
    assert_eq!(luns[1]["capacity"]["block_size_bytes"], 4096);
    assert_eq!(luns[1]["capacity"]["blocks"], 2048);

    let human = isoe(&["luns", &url]);
    assert!(human.success(), "{}", human.describe());
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", human.stdout);
    assert!(lines[0].starts_with("LUN   TYPE"), "{}", human.stdout);
    assert!(
        lines[1].starts_with("0     direct access block device")
            && lines[1].ends_with("64 MiB = 67.11 MB (131072 blocks of 512 bytes)"),
        "{}",
        human.stdout
    );
    assert!(
        lines[2].ends_with("8 MiB = 8.39 MB (2048 blocks of 4096 bytes)"),
        "{}",
        human.stdout
    );
}

#[test]
fn login_to_an_unknown_target_names_it_and_says_not_found() {
    let (_config, target) = two_lun_target();
    let url = target.lun_url("iqn.2026-11.io.isoe:nosuch", 0);
    let expected = format!(
        "login to iqn.2026-11.io.isoe:nosuch at {} failed: target refused the login: \
         target not found (status 0x0203)",
        target.addr()
    );

    let out = isoe(&["inquiry", &url]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(out.stderr, format!("isoe inquiry: error: {expected}\n"));
    assert_eq!(out.stdout, "");

    let out = isoe(&["capacity", "--json", &url]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(parse_json(&out), serde_json::json!({ "error": expected }));
    assert_eq!(out.stderr, "");
}

#[test]
fn malformed_urls_get_specific_usage_errors() {
    // Parsing happens before any connection: no target needed.
    let cases = [
        (
            "http://127.0.0.1/iqn.x:y/0",
            "\"http://127.0.0.1/iqn.x:y/0\" is not an iSCSI URL: expected iscsi://[user[%password]@]host[:port]/IQN/LUN",
        ),
        (
            "iscsi://127.0.0.1:70000/iqn.x:y/0",
            "\"iscsi://127.0.0.1:70000/iqn.x:y/0\": port \"70000\" is not a number from 1 to 65535",
        ),
        (
            "iscsi://127.0.0.1/iqn.x:y/lun0",
            "\"iscsi://127.0.0.1/iqn.x:y/lun0\": LUN \"lun0\" is not a number from 0 to 16383",
        ),
        ("iscsi:///iqn.x:y/0", "\"iscsi:///iqn.x:y/0\": the host is missing"),
        (
            "iscsi://127.0.0.1/",
            "\"iscsi://127.0.0.1/\": the target name (IQN) is missing after the host",
        ),
        // The password never shows, even in an error about another part.
        (
            "iscsi://alice%hunter2hunter2@127.0.0.1:x/iqn.x:y/0",
            "\"iscsi://alice%***@127.0.0.1:x/iqn.x:y/0\": port \"x\" is not a number from 1 to 65535",
        ),
        (
            "iscsi://127.0.0.1:3260/iqn.x:y",
            "iscsi://127.0.0.1:3260/iqn.x:y names no LUN: add /LUN after the target name, \
             e.g. iscsi://127.0.0.1:3260/iqn.x:y/0",
        ),
    ];
    for (url, message) in cases {
        let out = isoe(&["inquiry", url]);
        assert_eq!(exit_code(&out), 2, "{url}: {}", out.describe());
        assert_eq!(
            out.stderr,
            format!("isoe inquiry: error: {message}\n"),
            "{url}"
        );
        let out = isoe(&["capacity", "--json", url]);
        assert_eq!(exit_code(&out), 2, "{url}: {}", out.describe());
        assert_eq!(parse_json(&out)["error"], message, "{url}");
    }
    let out = isoe(&["discover", "127.0.0.1:port"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert_eq!(
        out.stderr,
        "isoe discover: error: \"127.0.0.1:port\": port \"port\" is not a number from 1 to 65535\n"
    );
}

#[test]
fn a_write_that_is_not_a_whole_number_of_blocks_is_refused() {
    let (_config, target) = two_lun_target();
    let dir = scratch();
    let url = target.lun_url(DEFAULT_TARGET, 3); // 4096-byte blocks
    let input = dir.path().join("odd.bin");
    std::fs::write(&input, pattern(9, 6144)).unwrap();

    let out = isoe(&["write", &url, "--lba", "0", "-i", path_str(&input)]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(
        out.stderr,
        format!(
            "isoe write: error: {} is 6144 bytes, not a whole number of the LUN's 4096-byte \
             blocks (1 block(s) and 2048 bytes over); nothing was sent\n",
            input.display()
        )
    );
    // Nothing reached the LUN: its first block still reads as zeros.
    let back = isoe(&["read", &url, "--blocks", "1"]);
    assert!(back.success(), "{}", back.describe());
    assert_eq!(back.stdout_bytes, &[0u8; 4096][..]);
}

#[test]
fn transfers_past_the_end_of_the_lun_are_refused_before_sending() {
    let (_config, target) = two_lun_target();
    let dir = scratch();
    let url = target.lun_url(DEFAULT_TARGET, 3); // 2048 blocks of 4096 bytes
    let input = dir.path().join("two.bin");
    std::fs::write(&input, pattern(3, 8192)).unwrap();
    let out = isoe(&["write", &url, "--lba", "2047", "-i", path_str(&input)]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(
        out.stderr,
        "isoe write: error: writing 2 block(s) at LBA 2047 would pass the end of LUN 3, \
         which has 2048 blocks of 4096 bytes (the last LBA is 2047); nothing was sent\n"
    );
    let output = dir.path().join("never.bin");
    let out = isoe(&[
        "read",
        &url,
        "--lba",
        "18446744073709551615",
        "--blocks",
        "2",
        "-o",
        path_str(&output),
    ]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert!(
        out.stderr.contains("would pass the end of LUN 3"),
        "{}",
        out.describe()
    );
    assert!(!output.exists(), "a refused read left {output:?} behind");
}

#[test]
fn a_lun_the_target_lacks_is_named_in_the_error() {
    let (_config, target) = two_lun_target();
    let out = isoe(&["capacity", &target.lun_url(DEFAULT_TARGET, 5)]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(
        out.stderr,
        "isoe capacity: error: READ CAPACITY (16) on LUN 5 failed: CHECK CONDITION (0x02), \
         ILLEGAL REQUEST sense, ASC/ASCQ 0x25/0x00 (logical unit not supported: the target has \
         no such LUN; `isoe luns URL` lists them)\n"
    );
}

#[test]
fn incomplete_chap_options_are_usage_errors() {
    // All refused before connecting: port 9 has nothing listening anyway.
    let url = "iscsi://127.0.0.1:9/iqn.x:y/0";
    /// Flags, environment, the error a user reads.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (
            &["--chap-user", "bob"],
            &[],
            "CHAP user \"bob\" has no secret: give --chap-secret, set ISOE_CHAP_SECRET, \
             or write iscsi://bob%SECRET@...",
        ),
        (
            &["--chap-secret", "s3cr3ts3cr3t"],
            &[],
            "--chap-secret needs a CHAP user: --chap-user USER or iscsi://USER@...",
        ),
        (
            &["--target-user", "tgt"],
            &[("ISOE_CHAP_SECRET", "s3cr3ts3cr3t")],
            "mutual CHAP user \"tgt\" has no secret: give --target-secret or set ISOE_TARGET_SECRET",
        ),
        (
            &["--target-user", "tgt", "--target-secret", "s3cr3ts3cr3t"],
            &[],
            "mutual CHAP (--target-user) needs the initiator's CHAP user and secret too",
        ),
    ];
    for (flags, env, message) in cases {
        let mut args = vec!["inquiry", url];
        args.extend_from_slice(flags);
        let out = isoe_with_env(&args, env);
        assert_eq!(exit_code(&out), 2, "{args:?}: {}", out.describe());
        assert_eq!(out.stderr, format!("isoe inquiry: error: {message}\n"));
        assert!(!out.stderr.contains("s3cr3t"), "{}", out.stderr);
    }
}

#[test]
fn operational_failures_exit_1_with_the_cause() {
    let dir = scratch();
    let missing = dir.path().join("missing.bin");
    let out = isoe(&[
        "write",
        "iscsi://127.0.0.1:9/iqn.x:y/0",
        "--lba",
        "0",
        "-i",
        path_str(&missing),
    ]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(
        out.stderr,
        format!(
            "isoe write: error: cannot read {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    // Nothing listens on the discard port of loopback.
    let out = isoe(&["discover", "--json", "127.0.0.1:9"]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert_eq!(
        parse_json(&out)["error"],
        "cannot connect to 127.0.0.1:9: Connection refused (os error 111)"
    );
}

#[test]
fn json_with_raw_data_on_stdout_is_a_usage_error() {
    // Refused before connecting: port 9 has nothing listening anyway.
    let out = isoe(&[
        "read",
        "--json",
        "iscsi://127.0.0.1:9/iqn.x:y/0",
        "--blocks",
        "1",
        "-o",
        "-",
    ]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert_eq!(
        parse_json(&out)["error"],
        "--json and -o - both want stdout: give -o FILE, or drop one of them"
    );
}
