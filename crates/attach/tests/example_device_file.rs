//! The example device file the Debian package installs
//! (packaging/attach.toml) reads, each commented-out key included. The
//! template unit is checked with the target's in the `isoe` crate's
//! tests/packaging.rs.

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
