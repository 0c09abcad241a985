//! `isoe attach` on this machine, whose kernel has neither ublk nor nbd:
//! it says which module is missing and what kernel it needs, exits 2, and
//! never panics; its command line and device files refuse what is wrong
//! before anything is made. (The devices themselves run in the test bed's
//! VM: tests/vm_attach.rs.)

mod support;

use std::path::Path;
use support::cli::{exit_code, isoe, isoe_with_env};

/// True where this kernel could make the device after all (some other
/// machine): the missing-module checks do not apply there.
fn has_block_driver() -> bool {
    Path::new("/dev/ublk-control").exists() || Path::new("/dev/nbd0").exists()
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn without_ublk_or_nbd_attach_names_the_modules_and_exits_2() {
    if has_block_driver() {
        eprintln!("SKIPPED: this kernel has ublk or nbd loaded");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let url = "iscsi://127.0.0.1:9/iqn.2026-11.io.isoe:nothing/0";
    for (flag, module) in [("--ublk", "ublk_drv"), ("--nbd", "nbd"), ("", "ublk_drv")] {
        let mut args = vec!["attach", url];
        if !flag.is_empty() {
            args.push(flag);
        }
        let out = isoe(&args);
        assert_eq!(exit_code(&out), 2, "{}", out.describe());
        assert!(!out.stderr.contains("panicked"), "{}", out.describe());
        if !root {
            assert!(out.stderr.contains("needs root"), "{}", out.describe());
            continue;
        }
        assert!(out.stderr.contains(module), "{}", out.describe());
        assert!(out.stderr.contains(&release()), "{}", out.describe());
        if flag.is_empty() {
            // Neither is there: both are named.
            assert!(out.stderr.contains("ublk_drv") && out.stderr.contains("nbd"));
        }
        if module == "ublk_drv" {
            assert!(out.stderr.contains("6.0"), "{}", out.describe());
        }
    }
}

#[test]
fn bad_command_lines_and_device_files_are_refused_with_reasons() {
    let cases: [(&[&str], &str); 4] = [
        (&["attach"], "name the LU"),
        (
            &[
                "attach",
                "iscsi://127.0.0.1/iqn.2026-11.io.isoe:a/0",
                "iscsi://127.0.0.2/iqn.2026-11.io.isoe:a/0",
            ],
            "--multipath",
        ),
        (
            &[
                "attach",
                "iscsi://u%secret@127.0.0.1/iqn.2026-11.io.isoe:a/0",
            ],
            "ISOE_CHAP_SECRET",
        ),
        (
            &[
                "attach",
                "iscsi://127.0.0.1/iqn.2026-11.io.isoe:a/0",
                "--name",
                "a/b",
            ],
            "not a device name",
        ),
    ];
    for (args, expected) in cases {
        let out = isoe(args);
        assert_eq!(exit_code(&out), 2, "{args:?}: {}", out.describe());
        assert!(
            out.stderr.contains(expected),
            "{args:?}: {}",
            out.describe()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("db.toml");
    std::fs::write(
        &file,
        "url = \"iscsi://127.0.0.1/iqn.2026-11.io.isoe:a/0\"\nqueue_dept = 4\n",
    )
    .unwrap();
    let out = isoe(&["attach", "--config", file.to_str().unwrap()]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(
        out.stderr.contains("db.toml:2") && out.stderr.contains("queue_depth"),
        "the error names the file, the line and the key it meant: {}",
        out.describe()
    );
}

#[test]
fn list_with_nothing_attached_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("ISOE_ATTACH_STATE_DIR", dir.path().to_str().unwrap())];
    let out = isoe_with_env(&["attach", "--list"], &env);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains("no devices attached"),
        "{}",
        out.describe()
    );
    let out = isoe_with_env(&["attach", "--list", "--json"], &env);
    assert!(out.success(), "{}", out.describe());
    assert_eq!(out.stdout.trim(), "[]");
    let out = isoe_with_env(&["detach", "ublkb7"], &env);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert!(out.stderr.contains("ublkb7"), "{}", out.describe());
}
