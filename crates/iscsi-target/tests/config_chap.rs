//! `[target.chap]` and `[discovery.chap]`: what they read into, and every
//! way they are refused, each error naming the file, the line and the key
//! and never quoting a secret.

mod common;

use isoe_target::config::{ChapConfig, Config};
use isoe_wire::chap::{ChapAlgorithm, Secret};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const SECRET: &str = "alice-secret-12";
const MUTUAL: &str = "target-secret-34";

fn target(chap: &str) -> String {
    format!("[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n[target.chap]\n{chap}")
}

fn parse(text: &str) -> Config {
    Config::parse(text, Some(Path::new("isoe.toml"))).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn chap_of(text: &str) -> ChapConfig {
    parse(text).targets[0]
        .chap
        .clone()
        .expect("chap configured")
}

/// The error for `text`, checked to name `isoe.toml`, `line` and `key`, to
/// contain `needle`, and to quote no secret of the test.
fn refused(text: &str, line: usize, key: &str, needle: &str) -> String {
    let shown = common::refused_at(text, line, key, needle);
    for secret in [SECRET, MUTUAL, "short-one", "1234567890123"] {
        assert!(!shown.contains(secret), "a secret in {shown:?}");
    }
    shown
}

/// A directory for secret files, removed at the end of the test.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("isoe-chap-config-")
        .tempdir()
        .unwrap()
}

fn secret_file(dir: &Path, name: &str, content: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn a_target_chap_table_reads_user_secret_and_the_default_algorithms() {
    let chap = chap_of(&target(&format!(
        "user = \"alice\"\nsecret = \"{SECRET}\"\n"
    )));
    assert_eq!(chap.user, "alice");
    assert_eq!(chap.secret, Secret::from(SECRET));
    assert_eq!(chap.mutual, None);
    assert_eq!(chap.algorithms, ChapAlgorithm::ALL.to_vec());
    assert!(
        parse(&target(&format!("user = \"a\"\nsecret = \"{SECRET}\"\n")))
            .discovery
            .chap
            .is_none()
    );
}

#[test]
fn mutual_credentials_and_algorithms_are_read_in_their_order() {
    let chap = chap_of(&target(&format!(
        "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_user = \"tgt\"\n\
         mutual_secret = \"{MUTUAL}\"\nalgorithms = [\"MD5\", \"SHA3-256\"]\n"
    )));
    assert_eq!(chap.mutual, Some(("tgt".to_string(), Secret::from(MUTUAL))));
    assert_eq!(
        chap.algorithms,
        vec![ChapAlgorithm::Md5, ChapAlgorithm::Sha3_256]
    );
}

#[test]
fn discovery_chap_is_its_own_table() {
    let text = format!(
        "[discovery.chap]\nuser = \"disc\"\nsecret = \"{SECRET}\"\nalgorithms = [\"SHA-256\"]\n\n\
         [[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n"
    );
    let config = parse(&text);
    let chap = config.discovery.chap.expect("discovery chap");
    assert_eq!(chap.user, "disc");
    assert_eq!(chap.algorithms, vec![ChapAlgorithm::Sha256]);
    assert!(config.targets[0].chap.is_none());
    refused(
        "[discovery]\nchapp = 1\n[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n",
        2,
        "discovery.chapp",
        "did you mean `chap`?",
    );
}

#[test]
fn secrets_never_show_in_debug_output() {
    let config = parse(&target(&format!(
        "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_user = \"tgt\"\nmutual_secret = \"{MUTUAL}\"\n"
    )));
    let shown = format!("{config:?}");
    assert!(shown.contains("alice"), "{shown}");
    assert!(
        !shown.contains(SECRET) && !shown.contains(MUTUAL),
        "{shown}"
    );
}

#[test]
fn secret_file_is_read_without_its_trailing_newline_relative_to_the_config() {
    let dir = scratch();
    secret_file(dir.path(), "alice.secret", &format!("{SECRET}\n"), 0o600);
    secret_file(dir.path(), "tgt.secret", &format!("{MUTUAL}\r\n"), 0o640);
    let text = target(
        "user = \"alice\"\nsecret_file = \"alice.secret\"\n\
         mutual_user = \"tgt\"\nmutual_secret_file = \"tgt.secret\"\n",
    );
    let config_path = dir.path().join("isoe.toml");
    std::fs::write(&config_path, &text).unwrap();
    let chap = Config::load(&config_path).unwrap().targets[0]
        .chap
        .clone()
        .unwrap();
    assert_eq!(chap.secret, Secret::from(SECRET));
    assert_eq!(chap.mutual, Some(("tgt".into(), Secret::from(MUTUAL))));
}

#[test]
fn secret_file_problems_name_the_file_and_the_key() {
    let dir = scratch();
    let open = secret_file(dir.path(), "open.secret", SECRET, 0o644);
    let short = secret_file(dir.path(), "short.secret", "short-one\n", 0o600);
    let long = secret_file(dir.path(), "long.secret", &"x".repeat(300), 0o600);
    let missing = dir.path().join("missing.secret");
    let cases = [
        (&open, "accessible to other users (mode 644)"),
        (&short, "holds 9 bytes"),
        (&long, "holds more bytes"),
        (&missing, "cannot read"),
        (&dir.path().to_path_buf(), "not a regular file"),
    ];
    for (path, needle) in cases {
        let text = target(&format!(
            "user = \"alice\"\nsecret_file = \"{}\"\n",
            path.display()
        ));
        let shown = refused(&text, 5, "target[0].chap.secret_file", needle);
        assert!(shown.contains(&path.display().to_string()), "{shown}");
    }
}

#[test]
fn secrets_shorter_than_96_bits_or_longer_than_255_bytes_are_refused() {
    refused(
        &target("user = \"alice\"\nsecret = \"short-one\"\n"),
        5,
        "target[0].chap.secret",
        "the secret has 9 bytes; 12 to 255 are required (RFC 7143 §9.2.1",
    );
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{}\"\n",
            "y".repeat(256)
        )),
        5,
        "target[0].chap.secret",
        "256 bytes",
    );
    // Exactly 12 bytes is enough.
    assert_eq!(
        chap_of(&target("user = \"alice\"\nsecret = \"123456789012\"\n"))
            .secret
            .len(),
        12
    );
    // A secret of another type is refused without quoting it.
    refused(
        &target("user = \"alice\"\nsecret = 1234567890123\n"),
        5,
        "target[0].chap.secret",
        "expected the secret as a string",
    );
}

#[test]
fn user_and_secret_are_required_and_given_once() {
    refused(
        &target(&format!("secret = \"{SECRET}\"\n")),
        3,
        "target[0].chap.user",
        "missing",
    );
    refused(
        &target("user = \"alice\"\n"),
        3,
        "target[0].chap.secret",
        "missing: give the initiator's CHAP secret as `secret` or `secret_file`",
    );
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\nsecret_file = \"x\"\n"
        )),
        6,
        "target[0].chap.secret_file",
        "not both",
    );
    refused(
        &target(&format!("user = \"\"\nsecret = \"{SECRET}\"\n")),
        4,
        "target[0].chap.user",
        "1 to 255 bytes",
    );
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\npassword = \"x\"\n"
        )),
        6,
        "target[0].chap.password",
        "unknown key",
    );
}

#[test]
fn mutual_chap_needs_both_halves_and_its_own_secret() {
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_user = \"tgt\"\n"
        )),
        6,
        "target[0].chap.mutual_user",
        "needs the target's secret too",
    );
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_secret = \"{MUTUAL}\"\n"
        )),
        6,
        "target[0].chap.mutual_secret",
        "needs `mutual_user`",
    );
    refused(
        &target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_user = \"tgt\"\nmutual_secret = \"{SECRET}\"\n"
        )),
        7,
        "target[0].chap.mutual_secret",
        "RFC 7143 §9.2.1 forbids one secret for both directions",
    );
}

#[test]
fn a_target_secret_may_not_authenticate_initiators_anywhere_in_the_file() {
    // Target b proves itself with the secret a's initiators log in with.
    let text = format!(
        "[[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n[target.chap]\nuser = \"alice\"\n\
         secret = \"{SECRET}\"\n\n\
         [[target]]\nname = \"iqn.2026-11.io.isoe:b\"\n[target.chap]\nuser = \"bob\"\n\
         secret = \"{MUTUAL}\"\nmutual_user = \"b\"\nmutual_secret = \"{SECRET}\"\n"
    );
    let shown = refused(
        &text,
        13,
        "target[1].chap.mutual_secret",
        "also the initiator secret target[0].chap.secret (line 5)",
    );
    assert!(shown.contains("§9.2.1"), "{shown}");
    // The same with discovery's initiator secret.
    let text = format!(
        "[discovery.chap]\nuser = \"d\"\nsecret = \"{MUTUAL}\"\n\n{}",
        target(&format!(
            "user = \"alice\"\nsecret = \"{SECRET}\"\nmutual_user = \"t\"\nmutual_secret = \"{MUTUAL}\"\n"
        ))
    );
    refused(
        &text,
        11,
        "target[0].chap.mutual_secret",
        "also the initiator secret discovery.chap.secret (line 3)",
    );
    // One initiator secret for several targets is allowed.
    let text = format!(
        "[discovery.chap]\nuser = \"d\"\nsecret = \"{SECRET}\"\n\n{}",
        target(&format!("user = \"alice\"\nsecret = \"{SECRET}\"\n"))
    );
    parse(&text);
}

#[test]
fn algorithms_are_named_listed_once_and_not_empty() {
    let base = format!("user = \"alice\"\nsecret = \"{SECRET}\"\n");
    refused(
        &target(&format!("{base}algorithms = [\"SHA-1\"]\n")),
        6,
        "target[0].chap.algorithms[0]",
        "expected \"SHA3-256\", \"SHA-256\" or \"MD5\" (CHAP_A 8, 7, 5), found \"SHA-1\"",
    );
    refused(
        &target(&format!("{base}algorithms = [\"MD5\", \"MD5\"]\n")),
        6,
        "target[0].chap.algorithms[1]",
        "MD5 is listed twice",
    );
    refused(
        &target(&format!("{base}algorithms = []\n")),
        6,
        "target[0].chap.algorithms",
        "at least one",
    );
    refused(
        &target(&format!("{base}algorithms = \"MD5\"\n")),
        6,
        "target[0].chap.algorithms",
        "expected a list",
    );
}

#[test]
fn the_example_configuration_shows_target_and_discovery_chap() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.toml");
    let config = Config::load(&example).unwrap();
    let discovery = config
        .discovery
        .chap
        .expect("[discovery.chap] in the example");
    assert_eq!(discovery.user, "discover");
    let db = config.targets[0]
        .chap
        .clone()
        .expect("[target.chap] in the example");
    assert_eq!(db.user, "alice");
    assert_eq!(
        db.mutual.as_ref().map(|(u, _)| u.as_str()),
        Some("db-target")
    );
    assert_eq!(db.algorithms, ChapAlgorithm::ALL.to_vec());
    assert!(
        config.targets[1].chap.is_none(),
        "the scratch target has no CHAP"
    );
}
