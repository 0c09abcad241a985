//! The attach files the Debian package installs (packaging/): the example
//! device file reads, each commented-out key included, and the template
//! unit runs what the device file and `isoe detach` expect.
//! scripts/package-test checks the installed unit with systemd-analyze.

use isoe_attach::settings::{self, Transport, KEYS};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

#[test]
fn the_example_device_file_reads_as_written() {
    let path = packaging().join("attach.toml");
    let s = settings::read(&path).unwrap();
    assert_eq!(s.urls, ["iscsi://192.0.2.10/iqn.2026-11.io.isoe:target0/0"]);
    assert_eq!(
        s,
        settings::Settings {
            urls: s.urls.clone(),
            ..Default::default()
        },
        "every other key is commented out, at its default"
    );
}

#[test]
fn every_commented_key_of_the_example_reads_and_shows_its_default() {
    let path = packaging().join("attach.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    // Uncomment every `# key = value` line and the `urls` list; drop `url`.
    let mut uncommented = String::new();
    let mut shown = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let body = line.strip_prefix("# ").unwrap_or("");
        let key = body.split_once(" = ").map(|(k, _)| k);
        if let Some(key) = key.filter(|k| KEYS.contains(k)) {
            shown.push(key);
            in_list = body.ends_with('[');
            uncommented.push_str(body);
        } else if in_list && (body.starts_with(' ') || body == "]") {
            in_list = body != "]";
            uncommented.push_str(body);
        } else if !line.starts_with("url = ") {
            uncommented.push_str(line);
        }
        uncommented.push('\n');
    }
    shown.push("url");
    shown.sort();
    let mut keys = KEYS.to_vec();
    keys.sort();
    assert_eq!(shown, keys, "the example shows every key");

    let s = settings::parse(&uncommented, &path).unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    assert_eq!(s.urls.len(), 2);
    assert!(s.multipath);
    assert_eq!(s.transport, Transport::Auto);
    assert_eq!(s.queue_depth, settings::DEFAULT_QUEUE_DEPTH);
    assert_eq!(s.replacement_timeout, Duration::from_secs(120));
    assert_eq!(s.connections, 1);
    assert!(!s.header_digest && !s.data_digest);
    assert!(s.initiator_name.is_some() && s.chap_user.is_some() && s.target_user.is_some());
    assert!(s.chap_secret_file.is_some() && s.target_secret_file.is_some());
}

/// The `[Unit]` or `[Service]` section's settings, in order.
fn unit_settings(section: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(packaging().join("isoe-attach@.service")).unwrap();
    let mut current = String::new();
    let mut settings = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            current = line.to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a setting: {line:?}"));
        if current == section {
            settings.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    settings
}

fn setting<'a>(settings: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    settings
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

#[test]
fn the_unit_attaches_the_instance_s_device_file() {
    let s = unit_settings("[Service]");
    assert_eq!(
        setting(&s, "ExecStart"),
        ["/usr/bin/isoe attach --config /etc/isoe/attach/%i.toml --name %i"]
    );
    // isoe attach sends READY=1 once the device exists.
    assert_eq!(setting(&s, "Type"), ["notify"]);
    // SIGTERM flushes and detaches, as `isoe detach` asks.
    assert_eq!(setting(&s, "KillSignal"), ["SIGTERM"]);
    assert_eq!(setting(&s, "TimeoutStopSec"), ["90s"]);
    assert_eq!(setting(&s, "Restart"), ["on-failure"]);
    assert_eq!(setting(&s, "RestartSec"), ["5s"]);
    // A device-file mistake or a kernel without ublk and NBD exits 2.
    assert_eq!(setting(&s, "RestartPreventExitStatus"), ["2"]);
    // ublk and NBD need /dev, module loading and CAP_SYS_ADMIN.
    for key in [
        "PrivateDevices",
        "DevicePolicy",
        "ProtectKernelModules",
        "CapabilityBoundingSet",
        "User",
        "DynamicUser",
    ] {
        assert!(setting(&s, key).is_empty(), "{key}");
    }
    assert_ne!(setting(&s, "ProtectSystem"), ["strict"]);
    let u = unit_settings("[Unit]");
    for key in ["Wants", "After"] {
        assert!(setting(&u, key).contains(&"network-online.target"), "{key}");
    }
    for key in ["Wants", "Before"] {
        assert!(setting(&u, key).contains(&"remote-fs-pre.target"), "{key}");
    }
    // The state directory (/run/isoe-attach) stays writable.
    assert!(state_dir_writable(&s));
}

/// /run is writable unless ProtectSystem=strict or a ReadOnlyPaths= says
/// otherwise.
fn state_dir_writable(s: &[(String, String)]) -> bool {
    setting(s, "ProtectSystem") != ["strict"]
        && setting(s, "ReadOnlyPaths").iter().all(|v| {
            !v.split_whitespace()
                .any(|p| "/run/isoe-attach".starts_with(p))
        })
}
