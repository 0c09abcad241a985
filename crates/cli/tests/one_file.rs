//! One file is one LUN's, across processes too: a second `isoe target`
//! whose LUN names a file another serves is refused, by `--check` and at
//! start, before any portal is bound, with its own `file:line: key:` and
//! the other process's pid, configuration file and LUN; gateways of one
//! LU (the same `serial` and `naa`, as `multipath.rs` runs them) share the
//! file, and another identity is refused; a reload that moves a LUN to
//! another file lets the first go, and one that changes it in place keeps
//! it.

mod support;

use std::path::Path;
use support::cli::isoe;
use support::{Target, TargetConfig, DEFAULT_TARGET};

const OTHER: &str = "iqn.2026-11.io.isoe:other";
const NAA: &str = "0x6001405abcdef0123456789abcdef0a1";
const OTHER_NAA: &str = "0x6001405abcdef0123456789abcdef0b2";

/// A configuration of target [`OTHER`] whose LUN 0 (at line 7) is `file`,
/// with `lun_keys`.
fn other_config(file: &Path, lun_keys: &str) -> TargetConfig {
    TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{OTHER}\"\n\n\
         [[target.lun]]\nfile = \"{}\"\nnumber = 0\n{lun_keys}",
        file.display()
    ))
}

/// `isoe ARGS...` until it exits: its status and all it printed.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = isoe(args);
    let status = out.status.and_then(|s| s.code());
    (status, format!("{}{}", out.stdout, out.stderr))
}

/// `--check` of `config`: its status and output.
fn check(config: &TargetConfig) -> (Option<i32>, String) {
    let path = config.path().to_str().unwrap();
    run(&[
        "target",
        "--check",
        "--listen",
        "127.0.0.1:0",
        "--config",
        path,
    ])
}

/// Asserts that `output` refuses LUN 0 of `config` at its `file` key
/// because `holder` serves the file as `holder_config`'s target
/// `holder_target`.
fn assert_names_both(output: &str, config: &TargetConfig, holder: &Target, holder_config: &Path) {
    let place = format!("{}:7: target[0].lun[0].file: ", config.path().display());
    assert!(output.contains(&place), "{place:?} not in\n{output}");
    let pid = format!("pid {} (", holder.pid().unwrap());
    assert!(output.contains(&pid), "{pid:?} not in\n{output}");
    let named = format!(
        "whose configuration {} names it as target {DEFAULT_TARGET} LUN 0 (line 8)",
        holder_config.display()
    );
    assert!(output.contains(&named), "{named:?} not in\n{output}");
}

#[test]
fn a_second_target_on_a_served_file_is_refused_naming_the_first() {
    let first = TargetConfig::file_lun("1MiB");
    let mut target = Target::with_config(&first);
    // The same file through a link: the same inode.
    let second_dir = tempfile::tempdir().unwrap();
    let link = second_dir.path().join("link.img");
    std::os::unix::fs::symlink(first.lun_file(), &link).unwrap();
    let second = other_config(&link, "");

    let (status, output) = check(&second);
    assert_eq!(status, Some(2), "{output}");
    assert!(output.contains("in use by another process"), "{output}");
    assert_names_both(&output, &second, &target, first.path());

    let path = second.path().to_str().unwrap();
    let (status, output) = run(&["target", "--listen", "127.0.0.1:0", "--config", path]);
    assert_eq!(status, Some(2), "{output}");
    assert!(
        !output.contains("listening on"),
        "a portal was bound:\n{output}"
    );
    assert_names_both(&output, &second, &target, first.path());

    target.stop_cleanly();
    let (status, output) = check(&second);
    assert_eq!(status, Some(0), "the file stayed claimed:\n{output}");
}

#[test]
fn gateways_of_one_lu_share_a_file_and_another_identity_is_refused() {
    let keys = |naa: &str| format!("serial = \"MPATH-A1\"\nnaa = \"{naa}\"\n");
    let first = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nfile = \"lun0.img\"\nsize = \"1MiB\"\n{}",
        keys(NAA)
    ));
    let target = Target::with_config(&first);

    let gateway = other_config(&first.lun_file(), &keys(NAA));
    let (status, output) = check(&gateway);
    assert_eq!(status, Some(0), "{output}");

    let another = other_config(&first.lun_file(), &keys(OTHER_NAA));
    let (status, output) = check(&another);
    assert_eq!(status, Some(2), "{output}");
    assert!(output.contains("as another LU"), "{output}");
    assert_names_both(&output, &another, &target, first.path());

    // A LUN of its own identity cannot share it either.
    let alone = other_config(&first.lun_file(), "");
    let (status, output) = check(&alone);
    assert_eq!(status, Some(2), "{output}");
    assert_names_both(&output, &alone, &target, first.path());
}

/// `config`'s target (with a control socket) serving LUN 0 as `lun_keys`.
fn write_served(config: &TargetConfig, lun_keys: &str) {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\n[control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{DEFAULT_TARGET}\"\n\n[[target.lun]]\nnumber = 0\n{lun_keys}\n",
        config.dir().join("control.sock").display()
    );
    std::fs::write(config.path(), text).unwrap();
}

fn reload(config: &TargetConfig, force: bool) {
    let socket = config.dir().join("control.sock");
    let mut args = vec!["admin", "--socket", socket.to_str().unwrap(), "reload"];
    if force {
        args.push("--force");
    }
    let (status, output) = run(&args);
    assert_eq!(status, Some(0), "{output}");
}

#[test]
fn a_reload_keeps_the_file_of_a_lun_changed_in_place_and_lets_go_of_a_replaced_one() {
    let config = TargetConfig::new("");
    let (x, y) = (config.dir().join("x.img"), config.dir().join("y.img"));
    let keys = |file: &Path| format!("file = \"{}\"\nsize = \"1MiB\"", file.display());
    write_served(&config, &keys(&x));
    let _target = Target::with_config_portals(&config, 1);
    let (on_x, on_y) = (other_config(&x, ""), other_config(&y, "size = \"1MiB\"\n"));
    assert_eq!(check(&on_x).0, Some(2));

    // In place: the new unit over x takes the claim over.
    write_served(&config, &format!("{}\nread_only = true", keys(&x)));
    reload(&config, false);
    let (status, output) = check(&on_x);
    assert_eq!(status, Some(2), "x was let go:\n{output}");

    // Another file (one that exists: the LUN's identity record says it
    // was provisioned): x is let go, y taken.
    std::fs::write(&y, vec![0; 1 << 20]).unwrap();
    write_served(&config, &keys(&y));
    reload(&config, true);
    let (status, output) = check(&on_x);
    assert_eq!(status, Some(0), "x is still claimed:\n{output}");
    let (status, output) = check(&on_y);
    assert_eq!(status, Some(2), "y is not claimed:\n{output}");
}
