//! Good configurations parse into the structs the target is built from.

use isoe_target::config::{
    Config, ConfigError, Datapath, DigestChoice, LunSpec, Params, StoreSpec,
};
use isoe_wire::digest::Crc32cImpl;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

const FULL: &str = r#"
state_dir = "state"
portals = ["0.0.0.0:3260", "[::]:3261", "10.0.0.1"]

[defaults]
max_recv_data_segment_length = 131072
max_burst_length = 524288
first_burst_length = 65536
immediate_data = true
initial_r2t = false
max_connections = 4
max_outstanding_r2t = 2
header_digest = ["CRC32C", "None"]
data_digest = "CRC32C"
nop_in_interval_s = 0
nop_in_timeout_s = 10

[[target]]
name = "iqn.2026-11.io.isoe:db"
alias = "database"
allowed_initiators = ["iqn.1994-05.com.redhat:client1", "eui.02004567a425678d"]
[target.params]
immediate_data = false
max_connections = 1

[[target.lun]]
number = 0
memory = "1GiB"
physical_block_size = 4096
sanitize_bytes_per_s = "64MiB"
[[target.lun]]
number = 1
file = "images/db1.img"
size = "1.5TiB"
read_only = true
block_size = 4096
serial = "DB1"
naa = "0x6001405abcdef0123456789abcdef012"
[[target.lun]]
number = 16383
block = "/dev/nvme0n1"

[[target]]
name = "naa.52004567ba64678d"
lun = [{ number = 0, memory = 1048576 }]
"#;

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

#[test]
fn full_config_parses_to_expected_structs() {
    let source = Path::new("/etc/isoe/isoe.toml");
    let config = Config::parse(FULL, Some(source)).unwrap();
    let defaults = Params {
        max_recv_data_segment_length: 131_072,
        max_burst_length: 524_288,
        first_burst_length: 65_536,
        immediate_data: true,
        initial_r2t: false,
        max_connections: 4,
        max_outstanding_r2t: 2,
        header_digest: vec![DigestChoice::Crc32c, DigestChoice::None],
        data_digest: vec![DigestChoice::Crc32c],
        nop_in_interval_s: 0,
        nop_in_timeout_s: 10,
    };
    assert_eq!(config.source.as_deref(), Some(source));
    assert_eq!(config.state_dir, Some(PathBuf::from("/etc/isoe/state")));
    assert_eq!(
        config.portals,
        vec![
            addr("0.0.0.0:3260"),
            addr("[::]:3261"),
            addr("10.0.0.1:3260")
        ]
    );
    assert_eq!(config.defaults, defaults);
    assert_eq!(config.targets.len(), 2);

    let db = &config.targets[0];
    assert_eq!(db.name, "iqn.2026-11.io.isoe:db");
    assert_eq!(db.alias.as_deref(), Some("database"));
    assert_eq!(
        db.allowed_initiators,
        ["iqn.1994-05.com.redhat:client1", "eui.02004567a425678d"]
    );
    assert_eq!(
        db.params,
        Params {
            immediate_data: false,
            max_connections: 1,
            ..defaults.clone()
        }
    );
    assert_eq!(
        db.luns,
        vec![
            LunSpec {
                number: 0,
                store: StoreSpec::Memory {
                    size_bytes: 1 << 30,
                    overcommit: false,
                },
                read_only: false,
                block_size: 512,
                physical_block_size: Some(4096),
                sanitize_bytes_per_s: Some(64 << 20),
                serial: None,
                naa: None,
                offline: false,
            },
            LunSpec {
                number: 1,
                store: StoreSpec::File {
                    path: PathBuf::from("/etc/isoe/images/db1.img"),
                    size_bytes: Some(3 << 39),
                },
                read_only: true,
                block_size: 4096,
                physical_block_size: None,
                sanitize_bytes_per_s: None,
                serial: Some("DB1".into()),
                naa: Some([
                    0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc,
                    0xde, 0xf0, 0x12
                ]),
                offline: false,
            },
            LunSpec {
                number: 16383,
                store: StoreSpec::Block {
                    path: PathBuf::from("/dev/nvme0n1")
                },
                read_only: false,
                block_size: 512,
                physical_block_size: None,
                sanitize_bytes_per_s: None,
                serial: None,
                naa: None,
                offline: false,
            },
        ]
    );

    let naa = &config.targets[1];
    assert_eq!(naa.name, "naa.52004567ba64678d");
    assert_eq!(naa.alias, None);
    assert!(naa.allowed_initiators.is_empty());
    assert_eq!(naa.params, defaults);
    assert_eq!(
        naa.luns[0].store,
        StoreSpec::Memory {
            size_bytes: 1 << 20,
            overcommit: false,
        }
    );
}

#[test]
fn absent_keys_take_their_defaults() {
    let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";
    let config = Config::parse(text, None).unwrap();
    assert_eq!(config.source, None);
    assert_eq!(
        config.state_dir, None,
        "no file, no default state directory"
    );
    assert_eq!(config.portals, vec![addr("127.0.0.1:3260")]);
    assert_eq!(config.defaults, Params::default());
    assert_eq!(config.targets[0].params, Params::default());
    assert!(config.targets[0].luns.is_empty());

    let config = Config::parse(text, Some(Path::new("/etc/isoe/isoe.toml"))).unwrap();
    assert_eq!(
        config.state_dir,
        Some(PathBuf::from("/etc/isoe/.isoe-state"))
    );
}

#[test]
fn sizes_use_the_grammar_shared_with_bench_and_lab() {
    // isoe-size's grammar: every unit a power of 1024, any case, B optional.
    let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n\
                [[target.lun]]\nnumber = 0\nfile = \"a.img\"\nsize = \"1g\"\n\
                sanitize_bytes_per_s = \"4k\"\n\
                [[target.lun]]\nnumber = 1\nmemory = \"1GB\"\n\
                [[target.lun]]\nnumber = 2\nmemory = \"0.5 mib\"\n";
    let config = Config::parse(text, None).unwrap();
    let luns = &config.targets[0].luns;
    assert_eq!(
        luns[0].store,
        StoreSpec::File {
            path: PathBuf::from("a.img"),
            size_bytes: Some(1 << 30)
        }
    );
    assert_eq!(luns[0].sanitize_bytes_per_s, Some(4096));
    assert_eq!(
        luns[1].store,
        StoreSpec::Memory {
            size_bytes: 1 << 30,
            overcommit: false,
        }
    );
    assert_eq!(
        luns[2].store,
        StoreSpec::Memory {
            size_bytes: 1 << 19,
            overcommit: false,
        }
    );
}

#[test]
fn datapath_defaults_are_the_efficient_datapath() {
    let config = Config::parse("[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n", None).unwrap();
    assert_eq!(config.datapath, Datapath::default());
    assert_eq!(
        Datapath::default(),
        Datapath {
            batching: true,
            crc: Crc32cImpl::Hardware,
            buffer_pool: true,
            workers: 0,
            io_threads: 4,
        }
    );
    assert_eq!(Config::embedded_default().datapath, Datapath::default());
    assert_eq!(Datapath::default().crc_name(), "hardware");
}

#[test]
fn datapath_table_sets_each_option() {
    let target = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";
    let parse = |table: &str| {
        Config::parse(&format!("{target}[datapath]\n{table}"), None)
            .unwrap_or_else(|e| panic!("{table}: {e}"))
            .datapath
    };
    assert_eq!(
        parse(""),
        Datapath::default(),
        "an empty table changes nothing"
    );
    assert_eq!(
        parse("batching = false\n"),
        Datapath {
            batching: false,
            ..Datapath::default()
        }
    );
    let software = parse("crc = \"software\"\n");
    assert_eq!(
        software,
        Datapath {
            crc: Crc32cImpl::Software,
            ..Datapath::default()
        }
    );
    assert_eq!(software.crc_name(), "software");
    let instruction = parse("crc = \"instruction\"\n");
    assert_eq!(instruction.crc, Crc32cImpl::Instruction);
    assert_eq!(instruction.crc_name(), "instruction");
    assert_eq!(parse("crc = \"hardware\"\n"), Datapath::default());
    assert_eq!(
        parse("buffer_pool = false\n"),
        Datapath {
            buffer_pool: false,
            ..Datapath::default()
        }
    );
    assert_eq!(
        parse("batching = false\ncrc = \"software\"\nbuffer_pool = false\nworkers = 3\nio_threads = 0\n"),
        Datapath {
            batching: false,
            crc: Crc32cImpl::Software,
            buffer_pool: false,
            workers: 3,
            io_threads: 0,
        }
    );
    for (table, message) in [
        ("workers = 257\n", "datapath.workers"),
        ("io_threads = -1\n", "datapath.io_threads"),
        ("io_threads = \"4\"\n", "datapath.io_threads"),
    ] {
        let error = Config::parse(
            &format!("{target}[datapath]\n{table}"),
            Some(Path::new("t.toml")),
        )
        .expect_err(table)
        .to_string();
        assert!(
            error.starts_with("t.toml:4: ") && error.contains(message),
            "{table}: {error}"
        );
    }
    // Anywhere in the file, inline too; the rest of the file is unaffected.
    let config = Config::parse(
        &format!("datapath = {{ batching = false }}\nportals = [\"127.0.0.1:0\"]\n{target}"),
        None,
    )
    .unwrap();
    assert!(!config.datapath.batching);
    assert_eq!(config.portals, vec![addr("127.0.0.1:0")]);
    assert_eq!(config.targets.len(), 1);
}

#[test]
fn params_defaults_are_the_documented_ones() {
    let p = Params::default();
    assert_eq!(
        (
            p.max_recv_data_segment_length,
            p.max_burst_length,
            p.first_burst_length
        ),
        (262_144, 1_048_576, 262_144)
    );
    assert!(p.immediate_data && !p.initial_r2t);
    assert_eq!((p.max_connections, p.max_outstanding_r2t), (8, 1));
    assert_eq!(p.header_digest, [DigestChoice::None, DigestChoice::Crc32c]);
    assert_eq!(p.data_digest, [DigestChoice::None, DigestChoice::Crc32c]);
    assert_eq!((p.nop_in_interval_s, p.nop_in_timeout_s), (30, 30));
    assert_eq!(DigestChoice::Crc32c.as_str(), "CRC32C");
    assert_eq!(DigestChoice::None.to_string(), "None");
}

#[test]
fn existing_file_needs_no_size() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("disk.img"), vec![0u8; 4096]).unwrap();
    let path = dir.path().join("isoe.toml");
    let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n\
                [[target.lun]]\nnumber = 0\nfile = \"disk.img\"\n";
    std::fs::write(&path, text).unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(
        config.targets[0].luns[0].store,
        StoreSpec::File {
            path: dir.path().join("disk.img"),
            size_bytes: None
        }
    );
    assert_eq!(config.source.as_deref(), Some(path.as_path()));
    assert_eq!(config.state_dir, Some(dir.path().join(".isoe-state")));
}

#[test]
fn missing_file_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let err = Config::load(&path).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read {}: ", path.display())),
        "{err}"
    );
    assert_eq!(err.line(), None);
}

#[test]
fn embedded_default_matches_its_documentation() {
    let config = Config::embedded_default();
    assert_eq!(config.source, None);
    assert_eq!(config.portals, vec![addr("127.0.0.1:3260")]);
    assert_eq!(config.targets.len(), 1);
    let target = &config.targets[0];
    assert_eq!(target.name, "iqn.2026-11.io.isoe:target0");
    assert_eq!(target.params, Params::default());
    assert_eq!(target.luns.len(), 1);
    assert_eq!(target.luns[0].number, 0);
    assert_eq!(
        target.luns[0].store,
        StoreSpec::Memory {
            size_bytes: 1 << 30,
            overcommit: false,
        }
    );
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

#[test]
fn example_target_toml_parses() {
    let config = Config::load(&example("target.toml")).unwrap();
    assert_eq!(config.state_dir, Some(PathBuf::from("/var/lib/isoe")));
    assert_eq!(
        config.portals,
        vec![
            addr("0.0.0.0:3260"),
            addr("[::]:3260"),
            addr("192.168.7.10:3260")
        ]
    );
    let groups: Vec<_> = config
        .portal_groups
        .iter()
        .map(|g| (g.tag, g.portals.clone(), g.alua_state.name(), g.preferred))
        .collect();
    assert_eq!(
        groups,
        [
            (1, vec![0, 1], "active/optimized", false),
            (2, vec![2], "active/non-optimized", false)
        ]
    );
    assert_eq!(
        config.defaults,
        Params::default(),
        "the example documents the defaults"
    );
    let db = &config.targets[0];
    assert_eq!(db.name, "iqn.2026-11.io.isoe:db");
    assert!(!db.params.immediate_data);
    assert_eq!(db.luns.len(), 3);
    assert_eq!(db.luns[1].serial.as_deref(), Some("DB1"));
    assert_eq!(
        db.luns[1].store,
        StoreSpec::File {
            path: PathBuf::from("/srv/isoe/db1.img"),
            size_bytes: Some(10 << 30)
        }
    );
    assert_eq!(
        db.luns[2].store,
        StoreSpec::Block {
            path: PathBuf::from("/dev/nvme0n1")
        }
    );
    assert_eq!(config.targets[1].luns[0].block_size, 4096);
    assert_eq!(
        config.datapath,
        Datapath::default(),
        "the example documents the datapath defaults"
    );
    assert_eq!(
        config.limits,
        isoe_target::config::Limits::default(),
        "the example documents the limits' defaults"
    );
}

#[test]
fn example_minimal_toml_is_the_embedded_default() {
    let config = Config::load(&example("minimal.toml")).unwrap();
    let default = Config::embedded_default();
    assert_eq!(config.portals, default.portals);
    assert_eq!(config.portal_groups, default.portal_groups);
    assert_eq!(config.defaults, default.defaults);
    assert_eq!(config.targets, default.targets);
}

#[test]
fn every_example_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
            count += 1;
        }
    }
    assert!(count >= 2);
}

#[test]
fn limits_table_sets_each_bound_and_keeps_the_rest() {
    let target = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";
    let parse = |table: &str| {
        Config::parse(&format!("{target}[limits]\n{table}"), None)
            .unwrap_or_else(|e| panic!("{table}: {e}"))
            .limits
    };
    let absent = Config::parse(target, None).expect("config").limits;
    assert_eq!(absent, isoe_target::config::Limits::default());
    assert_eq!(parse(""), absent, "an empty table changes nothing");
    let set = parse(
                "connections = 100\nconnections_per_initiator = 4\nsessions = 10\nlogins = 5\nlogins_per_initiator = 2\nfirst_pdu_timeout_ms = 2500\nwrite_buffer = \"64MiB\"\nresponse_buffer = \"32MiB\"\nreceive_buffer = \"8MiB\"\n",
    );
    assert_eq!(
        set,
        isoe_target::config::Limits {
            connections: 100,
            connections_per_initiator: 4,
            sessions: 10,
            logins: 5,
            logins_per_initiator: 2,
            first_pdu_timeout_ms: 2500,
            write_buffer: 64 << 20,
            response_buffer: 32 << 20,
            receive_buffer: 8 << 20,
        }
    );
}
