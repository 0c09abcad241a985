//! Every validation error names the file, the line and the key.
//!
//! Most cases mark the offending line with `# <-` and check that the error
//! points there; a handful spell the expected line number out.

use isoe_target::config::{Config, ConfigError, StoreSpec};
use isoe_target::provision::{check_stores, check_stores_with_ram};
use std::path::Path;

const TARGET: &str = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";

mod common;
use common::error;

/// The 1-based line that carries the `# <-` marker.
fn marked_line(text: &str) -> usize {
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("# <-"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "mark exactly one line in:\n{text}");
    lines[0]
}

/// Checks that `text` fails at line `line`, key `key`, with a message containing `needle`.
fn check_at(text: &str, line: usize, key: &str, needle: &str) {
    let shown = common::refused_at(text, line, key, needle);
    assert!(
        shown.starts_with(&format!("isoe.toml:{line}: {key}: ")),
        "{shown}"
    );
}

/// As `check_at`, at the marked line.
fn check(text: &str, key: &str, needle: &str) {
    check_at(text, marked_line(text), key, needle);
}

fn with_target(rest: &str) -> String {
    format!("{TARGET}{rest}")
}

// ---- exact line numbers ----------------------------------------------------

#[test]
fn bad_size_message_is_exactly_as_documented() {
    let text = "portals = [\"0.0.0.0:3260\"]\n\
                \n\
                [[target]]\n\
                name = \"iqn.2026-11.io.isoe:a\"\n\
                \n\
                [[target]]\n\
                name = \"iqn.2026-11.io.isoe:b\"\n\
                [[target.lun]]\n\
                number = 0\n\
                file = \"/srv/b.img\"\n\
                size = \"ten\"\n";
    assert_eq!(
        error(text).to_string(),
        "isoe.toml:11: target[1].lun[0].size: expected a size like 4k, 256KiB or 1MiB, found \"ten\""
    );
}

#[test]
fn syntax_error_names_line_and_column() {
    let text = "portals = [\"0.0.0.0:3260\"]\n[[target]]\nname = \n";
    let err = error(text);
    match &err {
        ConfigError::Syntax {
            file,
            line,
            column,
            message,
        } => {
            assert_eq!(
                (file.as_str(), *line, *column),
                ("isoe.toml", 3, 8),
                "{err}"
            );
            assert!(!message.is_empty());
        }
        other => panic!("expected Syntax, got {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("isoe.toml:3:8: TOML syntax error: "),
        "{err}"
    );
    assert_eq!(err.line(), Some(3));
}

#[test]
fn syntax_error_duplicate_key() {
    let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n\nname = \"iqn.2026-11.io.isoe:b\"\n";
    let err = error(text);
    assert!(matches!(err, ConfigError::Syntax { line: 4, .. }), "{err}");
}

#[test]
fn duplicate_target_name_points_at_the_second() {
    let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n\
                [[target]]\nname = \"iqn.2026-11.io.isoe:b\"\n\
                [[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n";
    check_at(
        text,
        6,
        "target[2].name",
        "duplicate target name \"iqn.2026-11.io.isoe:a\" (first at line 2)",
    );
}

#[test]
fn duplicate_lun_number_points_at_the_second() {
    let text = with_target(
        "[[target.lun]]\nnumber = 3\nmemory = \"1MiB\"\n\
         [[target.lun]]\nnumber = 4\nmemory = \"1MiB\"\n\
         [[target.lun]]\nnumber = 3\nmemory = \"1MiB\"\n",
    );
    check_at(
        &text,
        10,
        "target[0].lun[2].number",
        "LUN 3 is already defined at line 4",
    );
}

#[test]
fn missing_store_points_at_the_lun_header() {
    let text = with_target("\n[[target.lun]]\nnumber = 0\nread_only = true\n");
    check_at(&text, 4, "target[0].lun[0]", "exactly one of");
}

#[test]
fn first_burst_above_max_burst_blames_the_override() {
    let text =
        "[defaults]\nfirst_burst_length = 65536\n\n[[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n\
                [target.params]\nimmediate_data = false\nmax_burst_length = 4096\n";
    check_at(
        text,
        8,
        "target[0].params.max_burst_length",
        "first_burst_length 65536 exceeds max_burst_length 4096",
    );
}

#[test]
fn no_target_at_all() {
    check_at(
        "portals = [\"0.0.0.0:3260\"]\n",
        1,
        "target",
        "at least one [[target]]",
    );
    check_at("", 1, "target", "at least one [[target]]");
    check_at("target = []\n", 1, "target", "at least one [[target]]");
}

// ---- marked lines ----------------------------------------------------------

#[test]
fn unknown_keys_are_named_everywhere() {
    check(
        &format!("listen = 1 # <-\n{TARGET}"),
        "listen",
        "unknown key; expected one of: state_dir, portals",
    );
    check(
        &format!("[defaults]\nmax_burst_lenght = 512 # <-\n{TARGET}"),
        "defaults.max_burst_lenght",
        "did you mean `max_burst_length`?",
    );
    check(
        &with_target("aliass = \"x\" # <-\n"),
        "target[0].aliass",
        "did you mean `alias`?",
    );
    check(
        &with_target("[target.params]\nimmediate = true # <-\n"),
        "target[0].params.immediate",
        "unknown key",
    );
    check(
        &with_target(
            "[[target.lun]]\nnumber = 0\nmemory = \"1GiB\"\n\
             [[target.lun]]\nnumber = 1\nmemory = \"1GiB\"\nsizee = 5 # <-\n",
        ),
        "target[0].lun[1].sizee",
        "did you mean `size`?",
    );
    check(
        &format!("[limits]\nfirst_pdu_timeout = 5000 # <-\n{TARGET}"),
        "limits.first_pdu_timeout",
        "did you mean `first_pdu_timeout_ms`?",
    );
    check(
        &with_target("\"odd key\" = 1 # <-\n"),
        "target[0].\"odd key\"",
        "unknown key",
    );
}

#[test]
fn wrong_types_say_what_was_expected() {
    check(
        &format!("[defaults]\nmax_connections = \"8\" # <-\n{TARGET}"),
        "defaults.max_connections",
        "expected an integer, found a string (\"8\")",
    );
    check(
        &format!("[defaults]\nimmediate_data = 1 # <-\n{TARGET}"),
        "defaults.immediate_data",
        "expected true or false, found an integer (1)",
    );
    check(
        &format!("portals = \"0.0.0.0:3260\" # <-\n{TARGET}"),
        "portals",
        "expected an array",
    );
    check(
        &format!("state_dir = 5 # <-\n{TARGET}"),
        "state_dir",
        "expected a string",
    );
    check(
        &format!("state_dir = 2026-11-01 # <-\n{TARGET}"),
        "state_dir",
        "found a date/time",
    );
    check(
        &format!("defaults = 3 # <-\n{TARGET}"),
        "defaults",
        "expected a table",
    );
    check(
        "[target] # <-\nname = \"iqn.2026-11.io.isoe:t\"\n",
        "target",
        "expected an array of tables ([[target]])",
    );
    check(
        &with_target("lun = 0 # <-\n"),
        "target[0].lun",
        "expected an array of tables ([[lun]])",
    );
    check(
        &with_target("name2 = 0\n").replace("name2 = 0", "[target.lun] # <-"),
        "target[0].lun",
        "array of tables",
    );
    check(
        &with_target("[[target.lun]]\nnumber = 0\nmemory = true # <-\n"),
        "target[0].lun[0].memory",
        "expected a size",
    );
    check(
        &with_target("[[target.lun]]\nnumber = 0\nmemory = 1.5 # <-\n"),
        "target[0].lun[0].memory",
        "found a float (1.5)",
    );
    check(
        &with_target("[[target.lun]]\nnumber = \"0\" # <-\nmemory = \"1GiB\"\n"),
        "target[0].lun[0].number",
        "expected an integer",
    );
}

#[test]
fn sizes_are_checked() {
    let lun = |line: &str| with_target(&format!("[[target.lun]]\nnumber = 0\n{line} # <-\n"));
    check(
        &lun("memory = \"12x\""),
        "target[0].lun[0].memory",
        "expected a size like 4k, 256KiB or 1MiB, found \"12x\"",
    );
    check(
        &lun("memory = \"-1GiB\""),
        "target[0].lun[0].memory",
        "a size cannot be negative",
    );
    check(
        &lun("memory = \"0\""),
        "target[0].lun[0].memory",
        "positive",
    );
    check(&lun("memory = -5"), "target[0].lun[0].memory", "positive");
    check(
        &lun("memory = \"1000\""),
        "target[0].lun[0].memory",
        "1000 bytes is not a multiple of the block size 512",
    );
    check(
        &with_target("[[target.lun]]\nnumber = 0\nblock_size = 4096\nmemory = \"6KB\" # <-\n"),
        "target[0].lun[0].memory",
        "6144 bytes is not a multiple of the block size 4096",
    );
    check(
        &with_target("[[target.lun]]\nnumber = 0\nfile = \"/x.img\"\nsize = \"1.3B\" # <-\n"),
        "target[0].lun[0].size",
        "not a whole number of bytes",
    );
}

#[test]
fn names_are_checked() {
    let target = |name: &str| format!("[[target]]\nname = \"{name}\" # <-\n");
    check(
        &target("iqn.2026-11.io.isoe:DB"),
        "target[0].name",
        "lower case",
    );
    check(
        &target("iqn.2026-13.io.isoe:db"),
        "target[0].name",
        "yyyy-mm",
    );
    check(
        &target("iqn.2026-11:db"),
        "target[0].name",
        "reversed domain",
    );
    check(&target("eui.0200456"), "target[0].name", "16 hex digits");
    check(
        &target("naa.0200456"),
        "target[0].name",
        "16 or 32 hex digits",
    );
    check(&target("db"), "target[0].name", "expected an iSCSI name");
    check(
        "[[target]] # <-\nalias = \"x\"\n",
        "target[0].name",
        "missing",
    );
    check(
        &with_target(
            "allowed_initiators = [\n  \"iqn.1994-05.com.redhat:a\",\n  \"client2\", # <-\n]\n",
        ),
        "target[0].allowed_initiators[1]",
        "expected an iSCSI name",
    );
    check(
        &with_target("alias = \"\" # <-\n"),
        "target[0].alias",
        "1 to 255 bytes",
    );
    // The character at fault is named escaped, with its place.
    check(
        &with_target("allowed_initiators = [\"iqn.2026-11.io.isoe:a\\u001bb\"] # <-\n"),
        "target[0].allowed_initiators[0]",
        "character '\\u{1b}' at byte 21",
    );
    check(
        &target("iqn.2026-11.io.isoe:caf\u{e9}"),
        "target[0].name",
        "isoe accepts only ASCII in iSCSI names",
    );
    check(
        &target("iqn.2026-11.io.isoe:DB"),
        "target[0].name",
        "write \"iqn.2026-11.io.isoe:db\"",
    );
}

#[test]
fn the_first_pdu_timeout_is_between_a_tick_and_the_login_deadline() {
    for value in [999, 30_001] {
        check(
            &format!("[limits]\nfirst_pdu_timeout_ms = {value} # <-\n{TARGET}"),
            "limits.first_pdu_timeout_ms",
            "out of range 1000..=30000",
        );
    }
}

#[test]
fn luns_are_checked() {
    let lun = |rest: &str| with_target(&format!("[[target.lun]]\n{rest}"));
    check(
        &lun("number = 16384 # <-\nmemory = \"1GiB\"\n"),
        "target[0].lun[0].number",
        "out of range 0..=16383",
    );
    check(
        &lun("number = -1 # <-\nmemory = \"1GiB\"\n"),
        "target[0].lun[0].number",
        "out of range",
    );
    check(
        &with_target("[[target.lun]] # <-\nmemory = \"1GiB\"\n"),
        "target[0].lun[0].number",
        "missing",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nfile = \"/x.img\" # <-\n"),
        "target[0].lun[0].file",
        "both memory and file",
    );
    check(
        &lun("number = 0\nblock = \"/dev/sda\"\nmemory = \"1GiB\" # <-\n"),
        "target[0].lun[0].memory",
        "both block and memory",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nblock_size = 1024 # <-\n"),
        "target[0].lun[0].block_size",
        "512 or 4096",
    );
    for physical in ["256", "3072", "131072", "\"4KiB\""] {
        check(
            &lun(&format!(
                "number = 0\nmemory = \"1GiB\"\nphysical_block_size = {physical} # <-\n"
            )),
            "target[0].lun[0].physical_block_size",
            "a power of two from the block size 512 to 65536",
        );
    }
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nblock_size = 4096\nphysical_block_size = 2048 # <-\n"),
        "target[0].lun[0].physical_block_size",
        "from the block size 4096",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nsanitize_bytes_per_s = 0 # <-\n"),
        "target[0].lun[0].sanitize_bytes_per_s",
        "positive",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nsize = \"1GiB\" # <-\n"),
        "target[0].lun[0].size",
        "does not apply to a memory LUN",
    );
    check(
        &lun("number = 0\nblock = \"/dev/sda\"\nsize = \"1GiB\" # <-\n"),
        "target[0].lun[0].size",
        "does not apply to a block LUN",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nread_only = \"yes\" # <-\n"),
        "target[0].lun[0].read_only",
        "true or false",
    );
    check(
        &lun(
            "number = 0\nmemory = \"1GiB\"\nserial = \"0123456789abcdef0123456789abcdef0\" # <-\n",
        ),
        "target[0].lun[0].serial",
        "1 to 32 printable ASCII",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nserial = \"caf\u{e9}\" # <-\n"),
        "target[0].lun[0].serial",
        "printable ASCII",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nnaa = \"0x6001405abc\" # <-\n"),
        "target[0].lun[0].naa",
        "32 hex digits",
    );
    check(
        &lun("number = 0\nmemory = \"1GiB\"\nnaa = \"0x5001405abcdef0123456789abcdef012\" # <-\n"),
        "target[0].lun[0].naa",
        "NAA type 5",
    );
    check(
        &lun("number = 0\nfile = \"\" # <-\nsize = 512\n"),
        "target[0].lun[0].file",
        "empty",
    );
}

#[test]
fn missing_file_needs_a_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("isoe.toml");
    let text = with_target("[[target.lun]]\nnumber = 0\nfile = \"absent.img\" # <-\n");
    std::fs::write(&path, &text).unwrap();
    let err = Config::load(&path)
        .and_then(|config| check_stores(&config))
        .unwrap_err()
        .to_string();
    let expected = format!(
        "{}:5: target[0].lun[0].file: {} does not exist; give `size`",
        path.display(),
        dir.path().join("absent.img").display()
    );
    assert!(err.starts_with(&expected), "{err}");
}

#[test]
fn params_ranges_follow_rfc_7143() {
    let param = |line: &str| format!("[defaults]\n{line} # <-\n{TARGET}");
    let cases = [
        (
            "max_recv_data_segment_length = 511",
            "max_recv_data_segment_length",
            "512..=16777215",
        ),
        (
            "max_recv_data_segment_length = 16777216",
            "max_recv_data_segment_length",
            "out of range",
        ),
        (
            "max_burst_length = 16777216",
            "max_burst_length",
            "512..=16777215",
        ),
        (
            "first_burst_length = 100",
            "first_burst_length",
            "512..=16777215",
        ),
        (
            "first_burst_length = 2097152",
            "first_burst_length",
            "exceeds max_burst_length 1048576",
        ),
        ("max_connections = 0", "max_connections", "1..=8"),
        ("max_connections = 9", "max_connections", "1..=8"),
        (
            "max_outstanding_r2t = 0",
            "max_outstanding_r2t",
            "1..=65535",
        ),
        (
            "max_outstanding_r2t = 65536",
            "max_outstanding_r2t",
            "1..=65535",
        ),
        ("nop_in_interval_s = -1", "nop_in_interval_s", "0..=3600"),
        ("nop_in_timeout_s = 0", "nop_in_timeout_s", "1..=3600"),
        ("header_digest = []", "header_digest", "at least one"),
        (
            "data_digest = \"crc32c\"",
            "data_digest",
            "expected \"None\" or \"CRC32C\", found \"crc32c\"",
        ),
        (
            "data_digest = [\"None\", \"None\"]",
            "data_digest[1]",
            "listed twice",
        ),
        (
            "header_digest = [1]",
            "header_digest[0]",
            "expected a string",
        ),
    ];
    for (line, key, needle) in cases {
        check(&param(line), &format!("defaults.{key}"), needle);
    }
    check(
        &with_target("[target.params]\nmax_connections = 16 # <-\n"),
        "target[0].params.max_connections",
        "1..=8",
    );
}

#[test]
fn portals_are_checked() {
    check(
        &format!("portals = [] # <-\n{TARGET}"),
        "portals",
        "at least one portal",
    );
    check(
        &format!("portals = [\"localhost:3260\"] # <-\n{TARGET}"),
        "portals[0]",
        "expected an address like",
    );
    check(
        &format!("portals = [\n  \"0.0.0.0:3260\",\n  \"0.0.0.0:99999\", # <-\n]\n{TARGET}"),
        "portals[1]",
        "found \"0.0.0.0:99999\"",
    );
    check(
        &format!("portals = [\"10.0.0.1\",\n \"10.0.0.1:3260\"] # <-\n{TARGET}"),
        "portals[1]",
        "listed twice",
    );
    check(
        &format!("portals = [3260] # <-\n{TARGET}"),
        "portals[0]",
        "expected a string",
    );
}

#[test]
fn errors_without_a_file_say_config() {
    let err = Config::parse("x = 1\n", None).unwrap_err();
    assert!(
        err.to_string().starts_with("<config>:1: x: unknown key"),
        "{err}"
    );
}

// ---- [datapath] --------------------------------------------------------------

#[test]
fn unknown_crc_implementation_is_named_with_file_line_and_key() {
    let text = format!("{TARGET}\n[datapath]\nbatching = true\ncrc = \"sse42\"\n");
    assert_eq!(
        error(&text).to_string(),
        "isoe.toml:6: datapath.crc: expected \"hardware\", \"instruction\" or \"software\", found \"sse42\""
    );
    // Names are lower case, as documented; no guessing.
    check(
        &format!("[datapath]\ncrc = \"Hardware\" # <-\n{TARGET}"),
        "datapath.crc",
        "expected \"hardware\", \"instruction\" or \"software\", found \"Hardware\"",
    );
}

#[test]
fn datapath_values_of_the_wrong_type() {
    check(
        &format!("{TARGET}[datapath]\nbatching = \"no\" # <-\n"),
        "datapath.batching",
        "expected true or false, found a string (\"no\")",
    );
    check(
        &format!("{TARGET}[datapath]\nbuffer_pool = 0 # <-\n"),
        "datapath.buffer_pool",
        "expected true or false, found an integer (0)",
    );
    check(
        &format!("{TARGET}[datapath]\ncrc = true # <-\n"),
        "datapath.crc",
        "expected a string, found a boolean (true)",
    );
    check(
        &format!("datapath = true # <-\n{TARGET}"),
        "datapath",
        "expected a table, found a boolean (true)",
    );
}

#[test]
fn datapath_unknown_keys_get_a_hint() {
    check(
        &format!("{TARGET}[datapath]\nbatchng = false # <-\n"),
        "datapath.batchng",
        "did you mean `batching`?",
    );
    check(
        &format!("{TARGET}[datapath]\nzero_copy = true # <-\n"),
        "datapath.zero_copy",
        "unknown key; expected one of: batching, crc, buffer_pool",
    );
    // A datapath option is not an iSCSI parameter.
    check(
        &format!("[defaults]\nbatching = false # <-\n{TARGET}"),
        "defaults.batching",
        "unknown key",
    );
}

#[test]
fn limits_out_of_range_name_their_key() {
    check(
        &format!("{TARGET}[limits]\nsessions = 0 # <-\n"),
        "limits.sessions",
        "1",
    );
    check(
        &format!("{TARGET}[limits]\nconnections = \"many\" # <-\n"),
        "limits.connections",
        "expected an integer",
    );
    check(
        &format!("{TARGET}[limits]\nwrite_buffer = \"4KiB\" # <-\n"),
        "limits.write_buffer",
        "a size of at least 1 MiB",
    );
    check(
        &format!("{TARGET}[limits]\nlogin = 3 # <-\n"),
        "limits.login",
        "logins",
    );
}

// ---- what a LUN's size must fit: one block, the machine's RAM ---------------

const GIB: u64 = 1 << 30;

/// `text` read as from `source`, its LUNs' stores checked as before they
/// are provisioned on a machine with `ram_bytes`.
fn provisioned(
    text: &str,
    source: Option<&Path>,
    ram_bytes: Option<u64>,
) -> Result<Config, ConfigError> {
    let config = Config::parse(text, source)?;
    check_stores_with_ram(&config, ram_bytes)?;
    Ok(config)
}

/// The error for `text` read as `isoe.toml` on a machine with `ram_bytes`.
fn error_with_ram(text: &str, ram_bytes: Option<u64>) -> ConfigError {
    match provisioned(text, Some(Path::new("isoe.toml")), ram_bytes) {
        Ok(config) => panic!("accepted:\n{text}\n{config:?}"),
        Err(e) => e,
    }
}

/// Checks that `text` on a machine with `ram_bytes` fails at the marked
/// line and `key` with a message containing `needle`.
fn check_with_ram(text: &str, ram_bytes: Option<u64>, key: &str, needle: &str) {
    let shown = error_with_ram(text, ram_bytes).to_string();
    let line = marked_line(text);
    assert!(
        shown.starts_with(&format!("isoe.toml:{line}: {key}: ")) && shown.contains(needle),
        "{shown:?} is not at line {line}, {key}, with {needle:?}"
    );
}

fn memory_lun(number: u16, size: &str, keys: &str) -> String {
    format!("[[target.lun]]\nnumber = {number}\nmemory = \"{size}\"{keys}\n")
}

#[test]
fn a_memory_lun_above_16_tib_is_refused_whatever_the_ram() {
    for size in ["17TiB", "1EiB", "16383PiB"] {
        for overcommit in ["", "\novercommit = true"] {
            let text = with_target(&memory_lun(0, size, &format!(" # <-{overcommit}")));
            check_with_ram(
                &text,
                Some(u64::MAX),
                "target[0].lun[0].memory",
                "a memory LUN is at most 16 TiB (its chunk table alone would take 1 GiB)",
            );
        }
    }
    let largest = with_target(&memory_lun(0, "16TiB", "\novercommit = true"));
    assert!(provisioned(&largest, None, Some(GIB)).is_ok());
}

#[test]
fn memory_luns_must_fit_in_ram_together_unless_overcommitted() {
    let ram = Some(8 * GIB);
    let one = with_target(&memory_lun(0, "9GiB", " # <-"));
    check_with_ram(
        &one,
        ram,
        "target[0].lun[0].memory",
        "the memory LUNs up to this one take 9 GiB, more than this machine's 8 GiB of RAM",
    );
    assert!(error_with_ram(&one, ram)
        .to_string()
        .contains("overcommit = true"));
    // The sum counts, across targets; the LUN that tips it over is named.
    let two_targets = format!(
        "{}[[target]]\nname = \"iqn.2026-11.io.isoe:u\"\n{}",
        with_target(&memory_lun(0, "5GiB", "")),
        memory_lun(3, "3.5GiB", " # <-")
    );
    check_with_ram(
        &two_targets,
        ram,
        "target[1].lun[0].memory",
        "take 8.5 GiB, more than this machine's 8 GiB",
    );
    // Overcommitted LUNs are left out of the sum.
    let overcommitted = with_target(&format!(
        "{}{}{}",
        memory_lun(0, "5GiB", ""),
        memory_lun(1, "64GiB", "\novercommit = true"),
        memory_lun(2, "3GiB", "")
    ));
    let config = provisioned(&overcommitted, None, ram).unwrap();
    let flags: Vec<_> = config.targets[0]
        .luns
        .iter()
        .map(|l| match l.store {
            StoreSpec::Memory { overcommit, .. } => overcommit,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(flags, [false, true, false]);
    // With the RAM unknown, only the fixed bound applies.
    assert!(provisioned(&one, None, None).is_ok());
}

#[test]
fn overcommit_is_a_boolean_of_memory_luns_only() {
    check(
        &with_target(
            "[[target.lun]]\nnumber = 0\nfile = \"/x.img\"\nsize = \"1MiB\"\novercommit = true # <-\n",
        ),
        "target[0].lun[0].overcommit",
        "`overcommit` applies only to a memory LUN",
    );
    check(
        &with_target(&memory_lun(0, "1MiB", "\novercommit = \"yes\" # <-")),
        "target[0].lun[0].overcommit",
        "expected true or false",
    );
}

#[test]
fn a_file_or_device_smaller_than_one_block_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("isoe.toml");
    let refused = |lun: &str, key: &str, needle: &str| {
        let text = with_target(lun);
        let shown = provisioned(&text, Some(&config), None)
            .unwrap_err()
            .to_string();
        let line = marked_line(&text);
        let prefix = format!("{}:{line}: {key}: ", config.display());
        assert!(
            shown.starts_with(&prefix) && shown.contains(needle),
            "{shown:?} lacks {prefix:?} or {needle:?}"
        );
    };
    std::fs::write(dir.path().join("empty.img"), b"").unwrap();
    std::fs::write(dir.path().join("short.img"), [0u8; 1000]).unwrap();
    refused(
        "[[target.lun]]\nnumber = 0\nfile = \"empty.img\" # <-\n",
        "target[0].lun[0].file",
        "empty.img holds 0 bytes, less than one block of 512: a LUN needs at least one \
         block; give `size` to grow it",
    );
    refused(
        "[[target.lun]]\nnumber = 0\nblock_size = 4096\nfile = \"short.img\" # <-\n",
        "target[0].lun[0].file",
        "short.img holds 1000 bytes, less than one block of 4096",
    );
    refused(
        "[[target.lun]]\nnumber = 0\nblock = \"empty.img\" # <-\n",
        "target[0].lun[0].block",
        "empty.img holds 0 bytes, less than one block of 512",
    );
    // A file of one block or more, or one that `size` grows, is served.
    for lun in [
        "[[target.lun]]\nnumber = 0\nfile = \"short.img\"\n",
        "[[target.lun]]\nnumber = 0\nfile = \"empty.img\"\nsize = \"1MiB\"\n",
    ] {
        let text = format!("state_dir = \"state\"\n{}", with_target(lun));
        assert!(provisioned(&text, Some(&config), None).is_ok(), "{text}");
    }
    // A file that shrinks after the configuration was read is refused at
    // the start.
    let text = format!(
        "state_dir = \"state\"\n{}",
        with_target("[[target.lun]]\nnumber = 0\nfile = \"short.img\"\n")
    );
    let parsed = Config::parse(&text, Some(&config)).unwrap();
    std::fs::write(dir.path().join("short.img"), [0u8; 100]).unwrap();
    let error = isoe_target::Server::new(parsed).unwrap_err();
    assert!(
        matches!(
            error,
            isoe_target::provision::SetupError::NoBlocks {
                lun: 0,
                size_bytes: 100,
                block_size: 512,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "target iqn.2026-11.io.isoe:t, LUN 0: the store holds 100 bytes, less than one block of 512"
    );
}

#[test]
fn rbd_luns_are_checked() {
    let lun = |keys: &str| with_target(&format!("[[target.lun]]\nnumber = 0\n{keys}"));
    check(
        &lun("rbd = \"disk1\" # <-\n"),
        "target[0].lun[0].rbd",
        "expected \"pool/image\"",
    );
    check(
        &lun("rbd = \"rbd/disk1@snap\" # <-\n"),
        "target[0].lun[0].rbd",
        "names a snapshot",
    );
    check(
        &lun("rbd = \"rbd//disk1\" # <-\n"),
        "target[0].lun[0].rbd",
        "an empty pool",
    );
    check(
        &lun("rbd = \"rbd/disk1\"\nceph_id = \"client.admin\" # <-\n"),
        "target[0].lun[0].ceph_id",
        "expected a client id such as \"admin\"",
    );
    check(
        &lun("memory = \"1MiB\"\nceph_conf = \"/etc/ceph/ceph.conf\" # <-\n"),
        "target[0].lun[0].ceph_conf",
        "`ceph_conf` applies only to an rbd LUN",
    );
    check(
        &lun("file = \"a.img\"\nrbd = \"rbd/disk1\" # <-\n"),
        "target[0].lun[0].rbd",
        "both file and rbd",
    );
    check(
        &lun("rbd = \"rbd/disk1\"\nsize = \"1000\" # <-\n"),
        "target[0].lun[0].size",
        "not a multiple of the block size",
    );
}

#[test]
fn an_rbd_lun_reads_its_image_and_cluster() {
    let text = with_target(
        "[[target.lun]]\nnumber = 0\nrbd = \"pool2/ns/disk1\"\nsize = \"1GiB\"\n\
         ceph_conf = \"/srv/ceph.conf\"\nceph_id = \"gw\"\nceph_keyring = \"/srv/gw.keyring\"\n\
         [[target.lun]]\nnumber = 1\nrbd = \"rbd/disk2\"\n",
    );
    let config = Config::parse(&text, None).expect("valid");
    let StoreSpec::Rbd(first) = &config.targets[0].luns[0].store else {
        panic!("{:?}", config.targets[0].luns[0].store);
    };
    assert_eq!(
        (
            first.pool.as_str(),
            first.namespace.as_deref(),
            first.image.as_str()
        ),
        ("pool2", Some("ns"), "disk1")
    );
    assert_eq!(first.create_bytes, Some(1 << 30));
    assert_eq!(first.cluster.conf, std::path::Path::new("/srv/ceph.conf"));
    assert_eq!(first.cluster.id, "gw");
    assert_eq!(
        first.cluster.keyring.as_deref(),
        Some(std::path::Path::new("/srv/gw.keyring"))
    );
    let StoreSpec::Rbd(second) = &config.targets[0].luns[1].store else {
        panic!("{:?}", config.targets[0].luns[1].store);
    };
    assert_eq!(
        second.cluster.conf,
        std::path::Path::new("/etc/ceph/ceph.conf")
    );
    assert_eq!(
        (second.cluster.id.as_str(), second.create_bytes),
        ("admin", None)
    );
}
