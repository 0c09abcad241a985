//! libiscsi's command-line tools (iscsi-ls, iscsi-inq, iscsi-readcapacity16)
//! against `isoe target`: discovery, login and the basic SCSI commands as a
//! real, independent initiator sends them.

mod support;

use std::time::Duration;
use support::tools::{self, ToolOutput};
use support::{Target, TargetConfig, DEFAULT_TARGET};

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

fn run_ok(name: &str, args: &[&str], target: &mut Target) -> ToolOutput {
    let out = tools::run(name, args, TOOL_TIMEOUT);
    target.assert_running(&format!("after {name}"));
    assert!(
        out.success(),
        "`{name} {}` failed: {}",
        args.join(" "),
        out.describe()
    );
    out
}

/// The value after `label` on the line that starts with it.
fn field<'a>(out: &'a str, label: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
}

#[test]
fn iscsi_ls_lists_the_default_target_and_its_lun() {
    let mut target = Target::start();
    let url = format!("{}/", target.url());
    let out = run_ok("iscsi-ls", &["-s", &url], &mut target);
    let text = &out.stdout;
    assert!(
        text.contains(&format!("Target:{DEFAULT_TARGET} Portal:{}", target.addr())),
        "iscsi-ls did not list {DEFAULT_TARGET} at {}: {}",
        target.addr(),
        out.describe()
    );
    let lun = text
        .lines()
        .find(|l| l.trim_start().starts_with("Lun:0"))
        .unwrap_or_else(|| panic!("no Lun:0 line: {}", out.describe()));
    assert!(
        lun.contains("Type:DIRECT_ACCESS"),
        "LUN 0 is not a direct access device: {lun}"
    );
    // iscsi-ls prints the size in MiB, of the last LBA: 1023M for 1 GiB.
    let size = lun.split("Size:").nth(1).and_then(|s| {
        s.trim_end_matches(')')
            .trim_end_matches('M')
            .parse::<u64>()
            .ok()
    });
    assert!(
        matches!(size, Some(1023..=1024)),
        "LUN 0 should be 1 GiB: {lun}"
    );
    assert_eq!(
        text.matches("Lun:").count(),
        1,
        "the default target has exactly one LUN: {text}"
    );
}

#[test]
fn iscsi_ls_lists_every_configured_target_and_lun() {
    let config = TargetConfig::new(
        r#"portals = ["127.0.0.1:0"]

[[target]]
name = "iqn.2026-11.io.isoe:alpha"
[[target.lun]]
number = 0
memory = "16MiB"
[[target.lun]]
number = 3
memory = "32MiB"

[[target]]
name = "iqn.2026-11.io.isoe:beta"
[[target.lun]]
number = 0
memory = "8MiB"
"#,
    );
    let mut target = Target::with_config(&config);
    let url = format!("{}/", target.url());
    let out = run_ok("iscsi-ls", &["-s", &url], &mut target);
    for name in ["iqn.2026-11.io.isoe:alpha", "iqn.2026-11.io.isoe:beta"] {
        assert!(
            out.stdout.contains(&format!("Target:{name} ")),
            "{name} missing: {}",
            out.describe()
        );
    }
    assert_eq!(
        out.stdout.matches("Lun:").count(),
        3,
        "three LUNs in all: {}",
        out.describe()
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("Lun:3")),
        "LUN 3 missing: {}",
        out.describe()
    );
}

#[test]
fn iscsi_inq_reports_a_direct_access_device_from_isoe() {
    let mut target = Target::start();
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let out = run_ok("iscsi-inq", &[&url], &mut target);
    let text = &out.stdout;
    assert_eq!(
        field(text, "Peripheral Device Type:"),
        Some("DIRECT_ACCESS"),
        "{}",
        out.describe()
    );
    assert_eq!(field(text, "Vendor:"), Some("ISOE"), "{}", out.describe());
    assert_eq!(
        field(text, "Peripheral Qualifier:"),
        Some("CONNECTED"),
        "{}",
        out.describe()
    );

    // VPD: the supported pages list, and the unit serial number page.
    let out = run_ok("iscsi-inq", &["-e", "1", "-c", "0", &url], &mut target);
    assert!(
        out.stdout.contains("Page:0x80 UNIT_SERIAL_NUMBER"),
        "page 0x80 not listed: {}",
        out.describe()
    );
    // iscsi-inq reads the page code in decimal.
    let out = run_ok("iscsi-inq", &["-e", "1", "-c", "128", &url], &mut target);
    assert!(
        out.stdout.contains("Unit Serial Number:"),
        "no serial number: {}",
        out.describe()
    );
}

#[test]
fn iscsi_readcapacity16_reports_the_configured_size() {
    let mut target = Target::start();
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let out = run_ok("iscsi-readcapacity16", &[&url], &mut target);
    assert_eq!(
        field(&out.stdout, "RETURNED LOGICAL BLOCK ADDRESS:"),
        Some("2097151"),
        "{}",
        out.describe()
    );
    assert_eq!(
        field(&out.stdout, "LOGICAL BLOCK LENGTH IN BYTES:"),
        Some("512"),
        "{}",
        out.describe()
    );
    assert_eq!(
        field(&out.stdout, "Total size:"),
        Some("1073741824"),
        "{}",
        out.describe()
    );

    // A file LUN of a configured size.
    let config = TargetConfig::file_lun("48MiB");
    let mut target = Target::with_config(&config);
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let out = run_ok("iscsi-readcapacity16", &[&url], &mut target);
    assert_eq!(
        field(&out.stdout, "Total size:"),
        Some("50331648"),
        "{}",
        out.describe()
    );
}

#[test]
fn tools_fail_cleanly_on_a_target_or_lun_that_does_not_exist() {
    let mut target = Target::start();
    let out = tools::run(
        "iscsi-inq",
        &[&target.lun_url("iqn.2026-11.io.isoe:nope", 0)],
        TOOL_TIMEOUT,
    );
    assert!(
        out.status.is_some() && !out.success(),
        "login to an unknown target should fail: {}",
        out.describe()
    );
    let out = tools::run(
        "iscsi-readcapacity16",
        &[&target.lun_url(DEFAULT_TARGET, 7)],
        TOOL_TIMEOUT,
    );
    assert!(
        out.status.is_some() && !out.success(),
        "LUN 7 does not exist: {}",
        out.describe()
    );
    target.assert_running("after the failed logins");
}
