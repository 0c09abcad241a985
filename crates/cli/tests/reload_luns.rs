//! A reload that changes a LUN's keys never discards its data without
//! being forced, and tells the sessions what changed: a memory LUN keeps
//! its data when it becomes read-only or reports 4 KiB physical blocks,
//! and is resized only with `--force`; a file LUN grows within its file
//! system's free space and shrinks only with `--force`; each change raises
//! its unit attention once.

mod support;

use support::cli::isoe;
use support::client::{Client, ScsiResult, TEST_UNIT_READY};
use support::tools::ToolOutput;
use support::{pattern, Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:reload";

fn config(lun_keys: &str) -> TargetConfig {
    let config = TargetConfig::new("");
    write_config(&config, lun_keys);
    config
}

fn write_config(config: &TargetConfig, lun_keys: &str) {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\n\
         [control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\n{lun_keys}\n",
        config.dir().join("control.sock").display()
    );
    std::fs::write(config.path(), text).unwrap();
}

fn admin(config: &TargetConfig, args: &[&str]) -> ToolOutput {
    let socket = config.dir().join("control.sock").display().to_string();
    let mut all = vec!["admin", "--socket", socket.as_str()];
    all.extend_from_slice(args);
    isoe(&all)
}

/// ASC and ASCQ of a CHECK CONDITION's sense data.
fn asc(result: &ScsiResult) -> Option<(u8, u8)> {
    match result.sense.first()? & 0x7f {
        0x70 | 0x71 => Some((*result.sense.get(12)?, *result.sense.get(13)?)),
        0x72 | 0x73 => Some((*result.sense.get(2)?, *result.sense.get(3)?)),
        _ => None,
    }
}

/// The next commands' unit attentions, in order, then GOOD: each
/// condition is raised once.
fn assert_attentions(client: &mut Client, expected: &[(u8, u8)]) {
    for condition in expected {
        let r = client.command(0, &TEST_UNIT_READY, &[], 0).unwrap();
        assert_eq!(
            r.status, 2,
            "no CHECK CONDITION for {condition:02x?}: {r:?}"
        );
        assert_eq!(r.sense_key(), Some(6), "{r:?}");
        assert_eq!(asc(&r), Some(*condition), "{r:?}");
    }
    let next = client.command(0, &TEST_UNIT_READY, &[], 0).unwrap();
    next.assert_good("TEST UNIT READY after the unit attentions");
}

fn assert_attention_once(client: &mut Client, expected: (u8, u8)) {
    assert_attentions(client, &[expected]);
}

fn capacity_bytes(client: &mut Client) -> u64 {
    // READ CAPACITY (16): the last LBA and the block length.
    let cdb = [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    let r = client.command(0, &cdb, &[], 32).unwrap();
    r.assert_good("READ CAPACITY (16)");
    let last = u64::from_be_bytes(r.data[0..8].try_into().unwrap());
    let block = u32::from_be_bytes(r.data[8..12].try_into().unwrap());
    (last + 1) * u64::from(block)
}

#[test]
fn a_memory_lun_resize_is_refused_unless_forced_and_its_data_stays() {
    let config = config("memory = \"16MiB\"");
    let target = Target::with_config_portals(&config, 1);
    let mut client = Client::login_normal(target.addr(), TARGET);
    client.ready(0);
    let data = pattern(7, 64 * 1024);
    client.write(0, 100, &data);

    write_config(&config, "memory = \"32MiB\"");
    let out = admin(&config, &["reload"]);
    assert!(!out.success(), "{}", out.describe());
    assert!(
        out.stderr.contains(
            "LUN 0 of iqn.2026-11.io.isoe:reload: a memory LUN cannot change size \
             (16777216 bytes (16 MiB) to \"32MiB\" = 33554432 bytes (32 MiB))"
        ) && out.stderr.contains("nothing changed"),
        "{}",
        out.describe()
    );
    // Same session, no attention, the data as written.
    assert_eq!(client.read(0, 100, 128), data);
    assert_eq!(capacity_bytes(&mut client), 16 << 20);

    let out = admin(&config, &["reload", "--force"]);
    assert!(out.success(), "{}", out.describe());
    assert!(out.stdout.contains("(forced)"), "{}", out.describe());
    target.wait_for_output("forced change: LUN 0 of iqn.2026-11.io.isoe:reload");
    assert!(target.output().contains("WARN"), "{}", target.output());
    // The capacity changed, and so did the medium.
    assert_attentions(&mut client, &[(0x2a, 0x09), (0x28, 0x00)]);
    assert_eq!(capacity_bytes(&mut client), 32 << 20);
    drop(target);
}

#[test]
fn read_only_and_physical_blocks_change_in_place_with_their_attentions() {
    let config = config("memory = \"16MiB\"");
    let target = Target::with_config_portals(&config, 1);
    let mut client = Client::login_normal(target.addr(), TARGET);
    client.ready(0);
    let data = pattern(9, 32 * 1024);
    client.write(0, 8, &data);

    write_config(&config, "memory = \"16MiB\"\nread_only = true");
    let out = admin(&config, &["reload"]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout
            .contains("changed in place, its data kept: read_only false -> true"),
        "{}",
        out.describe()
    );
    assert_attention_once(&mut client, (0x2a, 0x01));
    assert_eq!(client.read(0, 8, 64), data, "data lost by read_only");
    let refused = client
        .command(0, &support::client::write16(0, 1), &[0u8; 512], 0)
        .unwrap();
    assert_eq!(refused.sense_key(), Some(7), "a write got {refused:?}");

    write_config(
        &config,
        "memory = \"16MiB\"\nread_only = true\nphysical_block_size = 4096",
    );
    let out = admin(&config, &["reload"]);
    assert!(out.success(), "{}", out.describe());
    assert_attention_once(&mut client, (0x2a, 0x09));
    assert_eq!(
        client.read(0, 8, 64),
        data,
        "data lost by physical_block_size"
    );
    drop(target);
}

#[test]
fn a_file_lun_grows_within_free_space_and_shrinks_only_when_forced() {
    let config = TargetConfig::new("");
    let image = config.dir().join("lun0.img");
    let keys = |size: &str| format!("file = \"{}\"\nsize = \"{size}\"", image.display());
    write_config(&config, &keys("4MiB"));
    let target = Target::with_config_portals(&config, 1);
    let mut client = Client::login_normal(target.addr(), TARGET);
    client.ready(0);
    let data = pattern(3, 64 * 1024);
    client.write(0, 1024, &data);

    // Sizes are echoed as written, in bytes, and in binary units (MB = MiB).
    write_config(&config, &keys("8 MB"));
    let out = admin(&config, &["reload"]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout
            .contains("size 4194304 bytes (4 MiB) -> \"8 MB\" = 8388608 bytes (8 MiB)"),
        "{}",
        out.describe()
    );
    assert_attention_once(&mut client, (0x2a, 0x09));
    assert_eq!(capacity_bytes(&mut client), 8 << 20);
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 8 << 20);
    assert_eq!(client.read(0, 1024, 128), data);

    write_config(&config, &keys("1PiB"));
    let out = admin(&config, &["reload"]);
    assert!(!out.success(), "{}", out.describe());
    assert!(
        out.stderr.contains("bytes free on its file system"),
        "{}",
        out.describe()
    );
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 8 << 20);

    write_config(&config, &keys("1MiB"));
    let out = admin(&config, &["reload"]);
    assert!(!out.success(), "{}", out.describe());
    assert!(
        out.stderr
            .contains("size \"1MiB\" = 1048576 bytes (1 MiB) is smaller than its file"),
        "{}",
        out.describe()
    );
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 8 << 20);
    assert_eq!(client.read(0, 1024, 128), data);

    let out = admin(&config, &["reload", "--force"]);
    assert!(out.success(), "{}", out.describe());
    assert_attention_once(&mut client, (0x2a, 0x09));
    assert_eq!(capacity_bytes(&mut client), 1 << 20);
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 1 << 20);
    drop(target);
}

#[test]
fn a_start_never_shrinks_a_file_lun_silently() {
    let config = TargetConfig::new("");
    let image = config.dir().join("lun0.img");
    std::fs::write(&image, vec![0u8; 2 << 20]).unwrap();
    write_config(
        &config,
        &format!("file = \"{}\"\nsize = \"1MiB\"", image.display()),
    );
    let path = config.path().display().to_string();
    let out = isoe(&["target", "--config", &path]);
    assert_ne!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr
            .contains("size 1048576 bytes (1 MiB) is smaller than its file")
            && out.stderr.contains("never shrinks at start"),
        "{}",
        out.describe()
    );
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 2 << 20);
}
