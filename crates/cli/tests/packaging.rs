//! The files the Debian package installs (packaging/): the systemd unit
//! says what docs/ADMINISTRATION.md says it does, and the configuration
//! installed as /etc/isoe/target.toml loads and starts on any machine.
//! scripts/package-test installs and runs them for real (CI runs it); these
//! checks are here too so that a change to the target's configuration or
//! limits that the packaging must follow fails `cargo test` at once.

use isoe_target::admission::DESCRIPTOR_RESERVE;
use isoe_target::config::{Limits, StoreSpec};
use isoe_target::Config;
use std::path::{Path, PathBuf};

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

/// The `[Service]` section's settings of isoe-target.service, in order (a
/// key may repeat).
fn service_settings() -> Vec<(String, String)> {
    unit_settings("isoe-target.service", "[Service]")
}

/// A section's settings of a unit file in packaging/, in order.
fn unit_settings(unit: &str, section: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(packaging().join(unit)).unwrap();
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
fn the_unit_runs_the_installed_binary_with_the_installed_configuration() {
    let s = service_settings();
    assert_eq!(
        setting(&s, "ExecStart"),
        ["/usr/bin/isoe target --config /etc/isoe/target.toml"]
    );
    // isoe target sends READY=1 once its portals listen.
    assert_eq!(setting(&s, "Type"), ["notify"]);
    // The target stops cleanly (flushes file LUNs, exits 0) on SIGTERM.
    assert_eq!(setting(&s, "KillSignal"), ["SIGTERM"]);
    assert_eq!(setting(&s, "ExecReload"), ["/bin/kill -HUP $MAINPID"]);
    assert_eq!(setting(&s, "Restart"), ["on-failure"]);
    // A configuration error exits 2: no restart loop for it.
    assert_eq!(setting(&s, "RestartPreventExitStatus"), ["2"]);
}

#[test]
fn the_unit_leaves_the_descriptors_the_default_connection_cap_needs() {
    let s = service_settings();
    let nofile: u64 = setting(&s, "LimitNOFILE")[0].parse().unwrap();
    let needed = Limits::default().connections as u64 + DESCRIPTOR_RESERVE;
    assert!(
        nofile >= needed,
        "LimitNOFILE={nofile} would lower limits.connections: the default needs {needed}"
    );
}

#[test]
fn the_unit_is_sandboxed_but_may_write_its_state_and_configuration() {
    let s = service_settings();
    for (key, value) in [
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("LockPersonality", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("StateDirectory", "isoe"),
        ("RuntimeDirectory", "isoe"),
    ] {
        assert_eq!(setting(&s, key), [value], "{key}");
    }
    let writable: Vec<&str> = setting(&s, "ReadWritePaths")
        .iter()
        .flat_map(|v| v.split_whitespace())
        .collect();
    assert!(writable.contains(&"/etc/isoe"), "{writable:?}");
    // Block LUNs open /dev/sdX and the like.
    assert!(setting(&s, "PrivateDevices").is_empty());
    assert!(setting(&s, "DevicePolicy").is_empty());
}

#[test]
fn the_installed_configuration_starts_anywhere_and_exposes_nothing() {
    let config = Config::load(&packaging().join("target.toml")).unwrap();
    // StateDirectory=isoe: the one state directory the service may write.
    assert_eq!(
        config.state_dir.as_deref(),
        Some(Path::new("/var/lib/isoe"))
    );
    assert!(
        config.portals.iter().all(|p| p.ip().is_loopback()),
        "{:?}",
        config.portals
    );
    for target in &config.targets {
        for lun in &target.luns {
            assert!(
                matches!(lun.store, StoreSpec::Memory { .. }),
                "LUN {} of {} needs a file or device: the package must start as installed",
                lun.number,
                target.name
            );
        }
    }
}

#[test]
fn the_unit_attaches_the_instance_s_device_file() {
    let s = unit_settings("isoe-attach@.service", "[Service]");
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
    let u = unit_settings("isoe-attach@.service", "[Unit]");
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
