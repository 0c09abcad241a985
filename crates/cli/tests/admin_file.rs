//! The configuration file is the administrator's: `isoe admin` never
//! overwrites a hand edit it has not read, never follows a link planted
//! beside the file, keeps the file's owner and mode, and never leaves a
//! CHAP secret in a file others can read; a reload says what it did.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use support::cli::isoe;
use support::tools::ToolOutput;
use support::{Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:file";

fn config() -> TargetConfig {
    let config = TargetConfig::new("");
    let text = format!(
        "# the administrator's comment stays\n\
         portals = [\"127.0.0.1:0\"]\n\n\
         [control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n",
        config.dir().join("control.sock").display()
    );
    std::fs::write(config.path(), text).unwrap();
    config
}

fn admin(config: &TargetConfig, args: &[&str]) -> ToolOutput {
    let socket = config.dir().join("control.sock").display().to_string();
    let mut all = vec!["admin", "--socket", socket.as_str()];
    all.extend_from_slice(args);
    isoe(&all)
}

fn lun_numbers(config: &TargetConfig) -> Vec<u64> {
    let socket = config.dir().join("control.sock").display().to_string();
    let out = isoe(&["admin", "--json", "--socket", &socket, "list"]);
    let list: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.describe()));
    list["status"]["targets"][0]["luns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["number"].as_u64().unwrap())
        .collect()
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

#[test]
fn a_hand_edit_not_yet_reloaded_is_refused_not_overwritten() {
    let config = config();
    let target = Target::with_config_portals(&config, 1);
    let edited = format!(
        "{}\n[[target.lun]]\nnumber = 3\nmemory = \"8MiB\"\n",
        std::fs::read_to_string(config.path()).unwrap()
    );
    std::fs::write(config.path(), &edited).unwrap();
    let out = admin(&config, &["lun", "add", TARGET, "1", "memory=8MiB"]);
    assert!(!out.success(), "{}", out.describe());
    assert!(
        out.stderr.contains(
            "changed on disk since it was loaded; reload (SIGHUP or `isoe admin reload`) first"
        ),
        "{}",
        out.describe()
    );
    assert_eq!(std::fs::read_to_string(config.path()).unwrap(), edited);
    assert_eq!(lun_numbers(&config), [0], "the running target changed");

    let out = admin(&config, &["reload"]);
    assert!(out.success(), "{}", out.describe());
    assert!(out.stdout.contains("LUN 3 of"), "{}", out.describe());
    let out = admin(&config, &["lun", "add", TARGET, "1", "memory=8MiB"]);
    assert!(out.success(), "{}", out.describe());
    let text = std::fs::read_to_string(config.path()).unwrap();
    assert!(
        text.contains("number = 3") && text.contains("number = 1"),
        "{text}"
    );
    assert_eq!(lun_numbers(&config), [0, 1, 3]);
    drop(target);
}

#[test]
fn a_save_follows_no_planted_link_and_keeps_owner_and_mode() {
    let config = config();
    let target = Target::with_config_portals(&config, 1);
    let root = is_root();
    if root {
        std::os::unix::fs::chown(config.path(), Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = std::fs::metadata(config.path()).unwrap();
    // A file the attacker wants overwritten, and links at the name every
    // earlier save used.
    let victim = config.dir().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let name = config.path().file_name().unwrap().to_string_lossy();
    let planted = config.dir().join(format!(".{name}.isoe-new"));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();

    let out = admin(&config, &["lun", "add", TARGET, "1", "memory=8MiB"]);
    assert!(out.success(), "{}", out.describe());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(is_symlink(&planted), "the planted link was replaced");
    assert!(
        !is_symlink(config.path()),
        "the configuration became a link"
    );
    let after = std::fs::metadata(config.path()).unwrap();
    assert_eq!(
        (after.uid(), after.gid(), after.mode() & 0o7777),
        (before.uid(), before.gid(), 0o640),
        "owner or mode changed by the save"
    );
    assert!(std::fs::read_to_string(config.path())
        .unwrap()
        .contains("number = 1"));
    // No staged file is left beside it.
    let left: Vec<_> = std::fs::read_dir(config.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".isoe-new") && !is_symlink(&config.dir().join(n)))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(target);
}

#[test]
fn a_chap_secret_never_stays_in_a_file_others_can_read() {
    let config = config();
    let target = Target::with_config_portals(&config, 1);
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = admin(
        &config,
        &[
            "chap",
            "set",
            TARGET,
            "user=alice",
            "secret=alice-secret-123",
        ],
    );
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout
            .contains("is now mode 0600 (was 0644): it holds a CHAP secret"),
        "{}",
        out.describe()
    );
    let mode = std::fs::metadata(config.path()).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o600);
    drop(target);
}

#[test]
fn a_reload_says_what_became_of_the_file() {
    let config = config();
    let target = Target::with_config_portals(&config, 1);
    let out = admin(&config, &["reload"]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains("unchanged since it was loaded"),
        "{}",
        out.describe()
    );
    assert!(!out.stdout.contains("without a configuration file"));
    drop(target);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
