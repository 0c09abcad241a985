//! A file LUN's file as the configuration names it, checked before anything
//! is bound or applied ([`check_stores`]): a file a start would create
//! needs its directory.

use isoe_target::config::{Config, ConfigError};
use isoe_target::provision::check_stores;
use std::path::Path;

/// `text` written as `dir/isoe.toml`, read, and its LUNs' stores checked.
fn checked(dir: &Path, text: &str) -> Result<Config, ConfigError> {
    let path = dir.join("isoe.toml");
    std::fs::write(&path, text).unwrap();
    let config = Config::parse(text, Some(&path))?;
    check_stores(&config)?;
    Ok(config)
}

/// A target `name` with one file LUN, `file = "path"`, on its 4th line
/// counted from the target's table.
fn target(name: &str, number: u16, path: &str) -> String {
    format!(
        "[[target]]\nname = \"iqn.2026-11.io.isoe:{name}\"\n\
         [[target.lun]]\nnumber = {number}\nfile = \"{path}\"\nsize = \"1MiB\"\n"
    )
}

#[test]
fn a_file_in_a_directory_that_does_not_exist_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("state_dir = \"state\"\n{}", target("a", 0, "gone/lun0.img"));
    let error = checked(dir.path(), &text).unwrap_err().to_string();
    let prefix = format!(
        "{}:6: target[0].lun[0].file: ",
        dir.path().join("isoe.toml").display()
    );
    assert!(error.starts_with(&prefix), "{error}");
    let gone = dir.path().join("gone");
    assert!(
        error.contains(&format!("directory {} does not exist", gone.display())),
        "{error}"
    );

    // A file where the directory should be is refused too.
    std::fs::write(&gone, b"").unwrap();
    let error = checked(dir.path(), &text).unwrap_err().to_string();
    assert!(error.starts_with(&prefix), "{error}");
    assert!(error.contains("is not a directory"), "{error}");

    std::fs::remove_file(&gone).unwrap();
    std::fs::create_dir(&gone).unwrap();
    checked(dir.path(), &text).unwrap();
    assert!(
        !gone.join("lun0.img").exists(),
        "the check created the file"
    );
}

/// The place of `key` in `dir/isoe.toml` at `line`, as errors start.
fn place(dir: &Path, line: usize, key: &str) -> String {
    format!("{}:{line}: {key}: ", dir.join("isoe.toml").display())
}

#[test]
fn two_luns_of_one_target_on_one_file_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    // One file, not made yet, written two ways.
    let text = format!(
        "{}[[target.lun]]\nnumber = 3\nfile = \"./sub/../a.img\"\nsize = \"1MiB\"\n",
        target("a", 0, "a.img")
    );
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let error = checked(dir.path(), &text).unwrap_err().to_string();
    assert!(
        error.starts_with(&place(dir.path(), 9, "target[0].lun[1].file")),
        "{error}"
    );
    for needle in [
        "target iqn.2026-11.io.isoe:a LUN 3 and target iqn.2026-11.io.isoe:a LUN 0",
        "(line 5, target[0].lun[0].file)",
        "two disks that are one",
    ] {
        assert!(error.contains(needle), "{needle:?} not in {error}");
    }
    assert!(
        !dir.path().join("a.img").exists(),
        "the check made the file"
    );
}

#[test]
fn two_targets_on_one_file_through_a_link_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.img");
    std::fs::write(&file, vec![0; 4096]).unwrap();
    std::os::unix::fs::symlink(&file, dir.path().join("link.img")).unwrap();
    std::fs::hard_link(&file, dir.path().join("hard.img")).unwrap();
    for other in ["link.img", "hard.img", "./a.img", file.to_str().unwrap()] {
        let text = format!("{}{}", target("a", 0, "a.img"), target("b", 7, other));
        let error = checked(dir.path(), &text).unwrap_err().to_string();
        assert!(
            error.starts_with(&place(dir.path(), 11, "target[1].lun[0].file")),
            "{other}: {error}"
        );
        let both = "target iqn.2026-11.io.isoe:b LUN 7 and target iqn.2026-11.io.isoe:a LUN 0 \
                    (line 5, target[0].lun[0].file)";
        assert!(error.contains(both), "{other}: {error}");
    }
    // Two files are two LUNs.
    let text = format!("{}{}", target("a", 0, "a.img"), target("b", 7, "b.img"));
    checked(dir.path(), &text).unwrap();
}

#[test]
fn a_file_another_process_holds_is_refused_at_its_key_and_this_process_s_own_passes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.img");
    std::fs::write(&file, vec![0; 4096]).unwrap();
    let text = target("a", 0, "a.img");
    // Another set of claims acts as another process: this one is named.
    let other = isoe_store::Claims::new().claim(&file, isoe_store::Sharing::Alone);
    let error = checked(dir.path(), &text).unwrap_err().to_string();
    assert!(
        error.starts_with(&place(dir.path(), 5, "target[0].lun[0].file")),
        "{error}"
    );
    let holder = format!(
        "{} is in use by another process: pid {} (",
        file.display(),
        std::process::id()
    );
    assert!(error.contains(&holder), "{error}");
    drop(other);

    // A running target's own claim (a reload's check) passes.
    let own = isoe_store::Claims::process().claim(&file, isoe_store::Sharing::Alone);
    checked(dir.path(), &text).unwrap();
    drop(own);
}
