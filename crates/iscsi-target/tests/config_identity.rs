//! LUN identities: configured values win, memory LUNs derive theirs, file and
//! block LUNs persist generated ones in the state directory; a file LUN
//! whose record outlived its file is refused, never recreated empty.

use isoe_target::config::{Config, ConfigError, LunSpec, StoreSpec};
use isoe_target::identity::{check_backing_file, resolve, state_file, IdentityError, LunIdentity};
use isoe_target::provision::{check_stores, SetupError};
use isoe_target::Server;
use std::path::PathBuf;

const TARGET: &str = "iqn.2026-11.io.isoe:db";

fn lun(number: u16, store: StoreSpec) -> LunSpec {
    LunSpec {
        number,
        store,
        read_only: false,
        block_size: 512,
        physical_block_size: None,
        sanitize_bytes_per_s: None,
        serial: None,
        naa: None,
        offline: false,
    }
}

fn memory(number: u16) -> LunSpec {
    lun(
        number,
        StoreSpec::Memory {
            size_bytes: 1 << 20,
            overcommit: false,
        },
    )
}

fn file(number: u16) -> LunSpec {
    lun(
        number,
        StoreSpec::File {
            path: PathBuf::from("/srv/x.img"),
            size_bytes: None,
        },
    )
}

fn block(number: u16) -> LunSpec {
    lun(
        number,
        StoreSpec::Block {
            path: PathBuf::from("/dev/sdx"),
        },
    )
}

fn assert_well_formed(id: &LunIdentity) {
    assert!(!id.serial.is_empty() && id.serial.len() <= 32, "{id:?}");
    assert!(id.serial.bytes().all(|b| b.is_ascii_graphic()), "{id:?}");
    assert_eq!(id.naa[0] >> 4, 6, "NAA type 6: {id:?}");
    assert_eq!(
        &id.naa[..4],
        &[0x60, 0x21, 0x50, id.naa[3]],
        "company_id 0x02150E: {id:?}"
    );
    assert_eq!(id.naa[3] >> 4, 0xe);
}

#[test]
fn generated_identity_persists_across_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let first = resolve(Some(dir.path()), TARGET, &file(1), None).unwrap();
    assert_well_formed(&first);
    let path = state_file(dir.path(), TARGET, 1);
    assert_eq!(
        path,
        dir.path().join("iqn.2026-11.io.isoe_db").join("lun-1.toml")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("serial = {:?}", first.serial)),
        "{text}"
    );
    let second = resolve(Some(dir.path()), TARGET, &file(1), None).unwrap();
    assert_eq!(first, second);
    // The store kind does not matter, only (target, LUN): a file moved to a
    // block device keeps its identity.
    assert_eq!(
        resolve(Some(dir.path()), TARGET, &block(1), None).unwrap(),
        first
    );
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["lun-1.toml"]);
}

#[test]
fn distinct_luns_get_distinct_identities() {
    let dir = tempfile::tempdir().unwrap();
    let ids = [
        resolve(Some(dir.path()), TARGET, &file(0), None).unwrap(),
        resolve(Some(dir.path()), TARGET, &block(1), None).unwrap(),
        resolve(
            Some(dir.path()),
            "iqn.2026-11.io.isoe:other",
            &file(0),
            None,
        )
        .unwrap(),
        resolve(None, TARGET, &memory(0), None).unwrap(),
        resolve(None, TARGET, &memory(1), None).unwrap(),
        resolve(None, "iqn.2026-11.io.isoe:other", &memory(0), None).unwrap(),
    ];
    for (i, a) in ids.iter().enumerate() {
        assert_well_formed(a);
        for b in &ids[i + 1..] {
            assert_ne!(a.serial, b.serial);
            assert_ne!(a.naa, b.naa);
        }
    }
}

#[test]
fn memory_identity_is_deterministic_and_needs_no_state() {
    let a = resolve(None, TARGET, &memory(5), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = resolve(Some(dir.path()), TARGET, &memory(5), None).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "memory LUNs write nothing"
    );
    assert_well_formed(&a);
}

#[test]
fn configured_values_win() {
    let naa = [0x60, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    let configured = LunSpec {
        serial: Some("DB1".into()),
        naa: Some(naa),
        ..file(1)
    };
    // Both configured: no state directory needed, none written.
    let id = resolve(None, TARGET, &configured, None).unwrap();
    assert_eq!(
        id,
        LunIdentity {
            serial: "DB1".into(),
            naa
        }
    );
    let memory = LunSpec {
        serial: Some("M0".into()),
        naa: Some(naa),
        ..memory(0)
    };
    assert_eq!(
        resolve(None, TARGET, &memory, None).unwrap(),
        LunIdentity {
            serial: "M0".into(),
            naa
        }
    );

    // One configured: the other comes from the state file.
    let dir = tempfile::tempdir().unwrap();
    let generated = resolve(Some(dir.path()), TARGET, &file(1), None).unwrap();
    let serial_only = LunSpec {
        serial: Some("DB1".into()),
        ..file(1)
    };
    assert_eq!(
        resolve(Some(dir.path()), TARGET, &serial_only, None).unwrap(),
        LunIdentity {
            serial: "DB1".into(),
            naa: generated.naa
        }
    );
    let naa_only = LunSpec {
        naa: Some(naa),
        ..file(1)
    };
    assert_eq!(
        resolve(Some(dir.path()), TARGET, &naa_only, None).unwrap(),
        LunIdentity {
            serial: generated.serial.clone(),
            naa
        }
    );
    let memory_serial = LunSpec {
        serial: Some("M0".into()),
        ..self::memory(0)
    };
    let derived = resolve(None, TARGET, &self::memory(0), None).unwrap();
    assert_eq!(
        resolve(None, TARGET, &memory_serial, None).unwrap(),
        LunIdentity {
            serial: "M0".into(),
            naa: derived.naa
        }
    );
}

#[test]
fn file_lun_without_state_dir_is_an_error() {
    let err = resolve(None, TARGET, &file(2), None).unwrap_err();
    assert!(
        matches!(err, IdentityError::NoStateDir { lun: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("set state_dir"), "{err}");
}

#[test]
fn hand_edited_state_file_is_used_and_corrupt_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = state_file(dir.path(), TARGET, 3);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let state = |lun: u16, serial: &str, naa: &str| {
        format!("target = \"{TARGET}\"\nlun = {lun}\nserial = \"{serial}\"\nnaa = \"{naa}\"\n")
    };
    let naa = "0x6001405abcdef0123456789abcdef012";
    std::fs::write(&path, state(3, "HAND", naa)).unwrap();
    let id = resolve(Some(dir.path()), TARGET, &file(3), None).unwrap();
    assert_eq!(id.serial, "HAND");
    assert_eq!(id.naa[..4], [0x60, 0x01, 0x40, 0x5a]);

    for (text, needle) in [
        ("garbage".to_string(), "lun-3.toml"),
        (state(4, "X", naa), "belongs to LUN 4"),
        (state(3, "", naa), "serial"),
        (state(3, "X", "0x1"), "naa"),
    ] {
        std::fs::write(&path, &text).unwrap();
        let err = resolve(Some(dir.path()), TARGET, &file(3), None).unwrap_err();
        assert!(matches!(err, IdentityError::Corrupt { .. }), "{err:?}");
        let shown = err.to_string();
        assert!(
            shown.contains(needle) && shown.contains("remove it"),
            "{shown}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "never overwritten"
        );
    }
}

#[test]
fn unwritable_state_dir_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let err = resolve(Some(&blocker), TARGET, &file(0), None).unwrap_err();
    assert!(matches!(err, IdentityError::Io { .. }), "{err:?}");
}

/// A configuration with one file LUN, `lun0.img` next to it, and its state
/// directory `state` there too; `lun_keys` go in the LUN's table.
fn file_lun_config(dir: &std::path::Path, lun_keys: &str) -> String {
    let text = format!(
        "state_dir = \"state\"\n[[target]]\nname = \"{TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nfile = \"lun0.img\" # line 6\nsize = \"1MiB\"\n{lun_keys}"
    );
    let path = dir.join("isoe.toml");
    std::fs::write(&path, &text).unwrap();
    text
}

/// The configuration `dir/isoe.toml`, read and its LUNs' stores checked
/// as before they are provisioned.
fn parse(dir: &std::path::Path) -> Result<Config, ConfigError> {
    let path = dir.join("isoe.toml");
    let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), Some(&path))?;
    check_stores(&config)?;
    Ok(config)
}

#[test]
fn a_provisioned_file_lun_whose_file_vanished_is_refused_not_recreated() {
    let dir = tempfile::tempdir().unwrap();
    file_lun_config(dir.path(), "");
    let file = dir.path().join("lun0.img");
    let record = state_file(&dir.path().join("state"), TARGET, 0);

    // First start: no identity yet, so the file is created with one.
    let config = parse(dir.path()).unwrap();
    drop(Server::new(config.clone()).unwrap());
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 20);
    let identity = resolve(
        config.state_dir.as_deref(),
        TARGET,
        &config.targets[0].luns[0],
        None,
    );
    let serial = identity.unwrap().serial;

    std::fs::remove_file(&file).unwrap();
    // The configuration refuses it, at the `file` key...
    let error = parse(dir.path()).unwrap_err();
    let shown = error.to_string();
    let prefix = format!(
        "{}:6: target[0].lun[0].file: ",
        dir.path().join("isoe.toml").display()
    );
    assert!(shown.starts_with(&prefix), "{shown}");
    for needle in [
        format!("the backing file {} is missing", file.display()),
        format!("the identity record {} (serial {serial})", record.display()),
        "restore the file".to_string(),
        "remove the identity record to provision a new, empty LUN".to_string(),
    ] {
        assert!(shown.contains(&needle), "{shown}\nlacks {needle}");
    }
    // ...and so does the start, for a file that vanished after the
    // configuration was read.
    let Err(error) = Server::new(config.clone()) else {
        panic!("a LUN without its file was served");
    };
    match &error {
        SetupError::Identity {
            lun: 0,
            source:
                IdentityError::BackingFileMissing {
                    file: missing,
                    record: kept,
                    serial: Some(s),
                },
            ..
        } => assert_eq!((missing, kept, s), (&file, &record, &serial)),
        other => panic!("{other:?}"),
    }
    assert!(error
        .to_string()
        .starts_with(&format!("target {TARGET}, LUN 0: ")));
    assert!(!file.exists(), "no empty file was created");

    // Removing the record provisions a new, empty LUN with a new identity.
    std::fs::remove_file(&record).unwrap();
    let config = parse(dir.path()).unwrap();
    drop(Server::new(config.clone()).unwrap());
    assert!(file.exists());
    let renewed = resolve(
        config.state_dir.as_deref(),
        TARGET,
        &config.targets[0].luns[0],
        None,
    );
    assert_ne!(renewed.unwrap().serial, serial);
}

#[test]
fn a_file_lun_with_its_identity_configured_is_created_whatever_the_state() {
    let dir = tempfile::tempdir().unwrap();
    file_lun_config(dir.path(), "");
    drop(Server::new(parse(dir.path()).unwrap()).unwrap());
    std::fs::remove_file(dir.path().join("lun0.img")).unwrap();
    // Serial and NAA in the configuration: the record plays no part, and a
    // missing file is what a new LUN looks like.
    file_lun_config(
        dir.path(),
        "serial = \"DB1\"\nnaa = \"0x6001405abcdef0123456789abcdef012\"\n",
    );
    drop(Server::new(parse(dir.path()).unwrap()).unwrap());
    assert!(dir.path().join("lun0.img").exists());
}

#[test]
fn check_backing_file_passes_all_but_a_provisioned_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = lun(
        1,
        StoreSpec::File {
            path: dir.path().join("gone.img"),
            size_bytes: Some(1 << 20),
        },
    );
    // No record yet, or no state directory: a first provisioning.
    assert!(check_backing_file(Some(dir.path()), TARGET, &missing).is_ok());
    assert!(check_backing_file(None, TARGET, &missing).is_ok());
    resolve(Some(dir.path()), TARGET, &missing, None).unwrap();
    assert!(matches!(
        check_backing_file(Some(dir.path()), TARGET, &missing),
        Err(IdentityError::BackingFileMissing { .. })
    ));
    // A record of another LUN, or of a memory or block LUN, does not count.
    assert!(check_backing_file(
        Some(dir.path()),
        TARGET,
        &LunSpec {
            number: 2,
            ..missing.clone()
        }
    )
    .is_ok());
    assert!(check_backing_file(Some(dir.path()), TARGET, &memory(1)).is_ok());
    assert!(check_backing_file(Some(dir.path()), TARGET, &block(1)).is_ok());
}

#[test]
fn a_shared_medium_gives_every_gateway_one_identity() {
    // Two targets (gateways) with different names serving one RBD image:
    // the identity comes from the image, not from the target or the LUN.
    let image = "fsid-1/3//1a2b3c";
    let a = resolve(None, TARGET, &memory(0), Some(image)).unwrap();
    let b = resolve(
        None,
        "iqn.2026-11.io.isoe:gateway-b",
        &memory(7),
        Some(image),
    )
    .unwrap();
    assert_eq!(a, b);
    assert_ne!(
        a,
        resolve(None, TARGET, &memory(0), Some("fsid-1/3//ffff")).unwrap()
    );
    assert_ne!(a, resolve(None, TARGET, &memory(0), None).unwrap());
}
