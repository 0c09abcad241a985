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
