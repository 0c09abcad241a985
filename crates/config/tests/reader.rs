//! The reader on small documents of a made-up schema: lines, key paths,
//! hints and the refusals every schema relies on.

use isoe_config::{closest, join_key, Field, Node, Reader, Table};
use std::fmt;

/// A schema's own error, as a schema with one of its own keeps it.
#[derive(Debug, PartialEq, Eq)]
enum Problem {
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
}

/// The reader's problems, as a schema with its own error type takes them.
impl From<isoe_config::FileError> for Problem {
    fn from(e: isoe_config::FileError) -> Problem {
        match e {
            isoe_config::FileError::Syntax {
                file,
                line,
                column,
                message,
            } => Problem::Syntax {
                file,
                line,
                column,
                message,
            },
            isoe_config::FileError::Invalid {
                file,
                line,
                key,
                message,
            } => Problem::Invalid {
                file,
                line,
                key,
                message,
            },
            other => panic!("the reader reads no files: {other}"),
        }
    }
}

isoe_config::impl_read_error!(Problem);

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Syntax {
                file,
                line,
                column,
                message,
            } => write!(f, "{file}:{line}:{column}: TOML syntax error: {message}"),
            Problem::Invalid {
                file,
                line,
                key,
                message,
            } => write!(f, "{file}:{line}: {key}: {message}"),
        }
    }
}

/// The reader of `text` and its document table.
fn read(text: &str) -> (Reader<Problem>, Table) {
    let r = Reader::new(text, "t.toml");
    let root = r.root(text).expect("well-formed");
    (r, root)
}

fn message(result: Result<impl std::fmt::Debug, Problem>) -> String {
    result.expect_err("refused").to_string()
}

#[test]
fn a_key_in_a_nested_array_of_tables_has_its_own_line_and_path() {
    let text = "# disks\n\
                [[host]]\n\
                name = \"a\"\n\
                [[host]]\n\
                name = \"b\"\n\
                [[host.disk]]\n\
                size = 1\n\
                [[host.disk]]\n\
                \n\
                size = 70000\n";
    let (r, mut root) = read(text);
    let hosts = r.tables(root.take("host").unwrap(), &["name", "disk"]);
    let mut hosts = hosts.unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(
        (hosts[1].key.as_str(), r.line(hosts[1].offset)),
        ("host[1]", 4)
    );
    let disks = r.tables(hosts[1].take("disk").unwrap(), &["size"]).unwrap();
    let fields: Vec<Field> = disks
        .into_iter()
        .map(|mut t| t.take("size").unwrap())
        .collect();
    assert_eq!(fields[1].key, "host[1].disk[1].size");
    assert_eq!(r.line(fields[1].offset), 10);
    assert_eq!(r.u16_in(&fields[0], 1, 4096), Ok(1));
    assert_eq!(
        message(r.u16_in(&fields[1], 1, 4096)),
        "t.toml:10: host[1].disk[1].size: 70000 is out of range 1..=4096"
    );
}

#[test]
fn an_integer_out_of_range_names_the_range() {
    let (r, mut root) = read("a = -1\nb = 4294967296\nc = 7\nd = 1.5\n");
    let a = root.take("a").unwrap();
    assert_eq!(
        message(r.u32_in(&a, 0, 10)),
        "t.toml:1: a: -1 is out of range 0..=10"
    );
    let b = root.take("b").unwrap();
    assert_eq!(
        message(r.u32_in(&b, 0, u32::MAX)),
        "t.toml:2: b: 4294967296 is out of range 0..=4294967295"
    );
    assert_eq!(r.int_in(&b, 0, i64::MAX), Ok(1 << 32));
    assert_eq!(r.u32_in(&root.take("c").unwrap(), 7, 7), Ok(7));
    assert_eq!(
        message(r.u32_in(&root.take("d").unwrap(), 0, 10)),
        "t.toml:4: d: expected an integer, found a float (1.5)"
    );
}

#[test]
fn a_datetime_is_refused_as_a_datetime() {
    let text =
        "when = 2026-11-01\nat = 1979-05-27T07:32:00Z\n[t]\nlist = [1, 2026-11-01T10:00:00]\n";
    let (r, mut root) = read(text);
    let when = root.take("when").unwrap();
    assert!(matches!(when.node, Node::Datetime));
    assert_eq!(
        message(r.string(&when)),
        "t.toml:1: when: expected a string, found a date/time"
    );
    assert_eq!(
        message(r.int_in(&root.take("at").unwrap(), 0, 1)),
        "t.toml:2: at: expected an integer, found a date/time"
    );
    let mut t = r.table(root.take("t").unwrap(), &["list"]).unwrap();
    let list = r.array(t.take("list").unwrap(), "a list").unwrap();
    assert_eq!(
        message(r.bool(&list[1])),
        "t.toml:4: t.list[1]: expected true or false, found a date/time"
    );
}

#[test]
fn unknown_keys_get_a_hint_at_the_key_meant() {
    let keys = ["batching", "crc", "buffer_pool"];
    let (r, root) = read("\ncrc = \"x\"\nbatchng = false\n");
    assert_eq!(
        message(r.deny_unknown(&root, &keys)),
        "t.toml:3: batchng: unknown key (did you mean `batching`?); \
         expected one of: batching, crc, buffer_pool"
    );
    // Nothing close: no hint.
    let (r, root) = read("zero_copy = true\n");
    assert_eq!(
        message(r.deny_unknown(&root, &keys)),
        "t.toml:1: zero_copy: unknown key; expected one of: batching, crc, buffer_pool"
    );
    // The nearest, not the first within reach; keys that are not bare
    // are quoted in the path.
    let (r, mut root) = read("[x]\n\"odd key\" = 1\n");
    let x = root.take("x").unwrap();
    assert_eq!(
        message(r.table(x, &["odd_keys", "odd_key"])),
        "t.toml:2: x.\"odd key\": unknown key (did you mean `odd_key`?); \
         expected one of: odd_keys, odd_key"
    );
    assert!(r.deny_unknown(&root, &[]).is_ok(), "x was taken");
}

#[test]
fn typo_hints() {
    let keys = ["mtu", "rate_mbit", "initiator_tso", "quickack"];
    assert_eq!(closest("mut", keys.iter().copied()), Some("mtu"));
    assert_eq!(closest("quickak", keys.iter().copied()), Some("quickack"));
    assert_eq!(
        closest("initator_tso", keys.iter().copied()),
        Some("initiator_tso")
    );
    assert_eq!(closest("zzzzzz", keys.iter().copied()), None);
    // Two edits reach a short key; longer keys allow a fifth of their length.
    assert_eq!(closest("sizee", ["size"]), Some("size"));
    assert_eq!(closest("blocksize", ["block_size"]), Some("block_size"));
    assert_eq!(closest("abc", ["xyz"]), None);
    assert_eq!(
        closest("max_recv_segment_length", ["max_recv_data_segment_length"]),
        Some("max_recv_data_segment_length")
    );
}

#[test]
fn lines_are_one_based() {
    let r: Reader<Problem> = Reader::new("a\nbb\n\nc", "t.toml");
    let lines = [0, 1, 2, 4, 5, 6].map(|offset| r.line(offset));
    assert_eq!(lines, [1, 1, 2, 2, 3, 4]);
}

#[test]
fn syntax_errors_give_line_and_column_in_characters() {
    let text = "a = 1\nb = \"é\" x\n";
    let r: Reader<Problem> = Reader::new(text, "t.toml");
    let error = message(r.root(text));
    assert!(
        error.starts_with("t.toml:2:9: TOML syntax error: "),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn wrong_types_say_what_was_found() {
    let long = "x".repeat(50);
    let text = format!("s = \"{long}\"\nt = [1]\n[[u]]\n");
    let (r, mut root) = read(&text);
    assert_eq!(
        message(r.table(root.take("s").unwrap(), &[])),
        format!(
            "t.toml:1: s: expected a table, found a string (\"{}\"...)",
            "x".repeat(40)
        )
    );
    assert_eq!(
        message(r.tables(root.take("t").unwrap(), &[])),
        "t.toml:2: t[0]: expected a table, found an integer (1)"
    );
    let u = root.take("u").unwrap();
    assert_eq!(
        message(r.string(&u)),
        "t.toml:3: u: expected a string, found an array"
    );
    assert_eq!(
        message(r.array(
            Field {
                node: Node::Bool(true),
                ..u
            },
            "a list of names"
        )),
        "t.toml:3: u: expected a list of names, found a boolean (true)"
    );
}

#[test]
fn numbers_and_choices() {
    let (r, mut root) = read("f = 2\ng = inf\nc = \"hardware\"\nd = \"fast\"\n");
    assert_eq!(r.f64_in(&root.take("f").unwrap(), 0.0, 2.0), Ok(2.0));
    assert_eq!(
        message(r.f64_in(&root.take("g").unwrap(), 0.0, 2.0)),
        "t.toml:2: g: inf is out of range 0..=2"
    );
    let choices = ["hardware", "software"];
    assert_eq!(r.choice(&root.take("c").unwrap(), &choices), Ok("hardware"));
    assert_eq!(
        message(r.choice(&root.take("d").unwrap(), &choices)),
        "t.toml:4: d: expected one of \"hardware\", \"software\", found \"fast\""
    );
}

#[test]
fn distinct_lists_refuse_repeats_and_emptiness() {
    let read_list = |text: &str| {
        let (r, mut root) = read(text);
        let field = root.take("l").unwrap();
        r.distinct(
            field,
            "an array of names",
            "at least one name is needed",
            |item| r.string(item),
            |name| format!("name {name:?}"),
        )
    };
    assert_eq!(
        read_list("l = [\"a\", \"b\"]\n"),
        Ok(vec!["a".into(), "b".into()])
    );
    for (text, refusal) in [
        (
            "l = [\n  \"a\",\n  \"b\",\n  \"a\",\n]\n",
            "t.toml:4: l[2]: name \"a\" is listed twice",
        ),
        ("\nl = []\n", "t.toml:2: l: at least one name is needed"),
        (
            "l = [1]\n",
            "t.toml:1: l[0]: expected a string, found an integer (1)",
        ),
        (
            "l = \"a\"\n",
            "t.toml:1: l: expected an array of names, found a string (\"a\")",
        ),
    ] {
        assert_eq!(message(read_list(text)), refusal, "{text:?}");
    }
}

#[test]
fn a_missing_key_is_blamed_on_its_table() {
    let (r, mut root) = read("[[disk]]\nsize = 1\n\n[[disk]]\nname = \"b\"\n");
    let mut disks = r
        .tables(root.take("disk").unwrap(), &["size", "name"])
        .unwrap();
    let size = r.required(&mut disks[0], "size", "every disk has a size");
    assert_eq!(size.map(|f| f.key), Ok("disk[0].size".to_string()));
    assert_eq!(
        message(r.required(&mut disks[1], "size", "every disk has a size")),
        "t.toml:4: disk[1].size: missing: every disk has a size"
    );
    assert_eq!(
        r.missing(&root, "name", "every file has a name")
            .to_string(),
        "t.toml:1: name: missing: every file has a name"
    );
}

#[test]
fn key_paths_quote_what_is_not_bare() {
    assert_eq!(join_key("", "target"), "target");
    assert_eq!(
        join_key("target[1].lun[0]", "size"),
        "target[1].lun[0].size"
    );
    assert_eq!(join_key("t", "a b"), "t.\"a b\"");
    assert_eq!(join_key("t", ""), "t.\"\"");
    assert_eq!(join_key("t", "é"), "t.\"é\"");
}

#[test]
fn position_finds_a_key_without_taking_it() {
    let (r, mut root) = read("a = 1\n\nb = 2\n");
    assert_eq!(root.position("b").map(|at| r.line(at)), Some(3));
    assert_eq!(root.position("c"), None);
    assert!(root.take("b").is_some());
    assert_eq!(root.position("b"), None);
}
