//! docs/ARCHITECTURE.md against the code it describes: its dependency
//! table against `cargo metadata`, and its list of the files that hold
//! `unsafe` code against the sources. A change to either side that forgets
//! the other fails here, with the difference.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A crate's direct dependencies by kind, by package name.
#[derive(Debug, Default, PartialEq, Eq)]
struct Dependencies {
    normal: BTreeSet<String>,
    dev: BTreeSet<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

fn architecture_doc() -> String {
    let path = workspace_root().join("docs/ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the first table after the heading `heading` (a whole line),
/// each split into its cells, the header and separator rows left out.
fn table_after(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let mut lines = doc.lines().skip_while(|l| *l != heading);
    assert!(
        lines.next().is_some(),
        "docs/ARCHITECTURE.md has no heading {heading:?}"
    );
    // Within the section: up to the next heading.
    let rows: Vec<Vec<String>> = lines
        .take_while(|l| !l.starts_with("## ") && !l.starts_with("### "))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            inner.split('|').map(|c| c.trim().to_string()).collect()
        })
        .collect();
    assert!(
        rows.len() >= 2,
        "no table under {heading:?} in docs/ARCHITECTURE.md"
    );
    rows.into_iter().skip(2).collect()
}

/// A cell that lists names: `a`, `b` (each in backticks, comma-separated),
/// or `none`. Anything else is a mistake in the doc, and says where.
fn names_in(cell: &str, row: &str) -> BTreeSet<String> {
    if cell == "none" {
        return BTreeSet::new();
    }
    cell.split(',')
        .map(|item| {
            let item = item.trim();
            item.strip_prefix('`')
                .and_then(|i| i.strip_suffix('`'))
                .filter(|name| !name.is_empty() && !name.contains('`'))
                .unwrap_or_else(|| {
                    panic!(
                        "docs/ARCHITECTURE.md, Dependencies, row {row}: {item:?} is not a \
                         name in backticks (a cell is `a`, `b` or none)"
                    )
                })
                .to_string()
        })
        .collect()
}

fn documented_dependencies(doc: &str) -> BTreeMap<String, Dependencies> {
    let mut crates = BTreeMap::new();
    for row in table_after(doc, "## Dependencies") {
        let [name, normal, dev] = row.as_slice() else {
            panic!("docs/ARCHITECTURE.md, Dependencies: a row needs three cells: {row:?}");
        };
        let name: Vec<String> = names_in(name, name).into_iter().collect();
        let [name] = name.as_slice() else {
            panic!("docs/ARCHITECTURE.md, Dependencies: one crate per row: {row:?}");
        };
        let deps = Dependencies {
            normal: names_in(normal, name),
            dev: names_in(dev, name),
        };
        assert!(
            crates.insert(name.clone(), deps).is_none(),
            "docs/ARCHITECTURE.md, Dependencies: {name} has two rows"
        );
    }
    crates
}

fn metadata_dependencies() -> BTreeMap<String, Dependencies> {
    let root = workspace_root();
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .current_dir(&root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("a package list");
    let mut crates = BTreeMap::new();
    for package in packages {
        let name = package["name"].as_str().expect("a package name");
        let mut deps = Dependencies::default();
        for dep in package["dependencies"]
            .as_array()
            .expect("a dependency list")
        {
            let dep_name = dep["name"].as_str().expect("a dependency name").to_string();
            match dep["kind"].as_str() {
                None => deps.normal.insert(dep_name),
                Some("dev") => deps.dev.insert(dep_name),
                Some(kind) => panic!(
                    "{name} has a {kind} dependency ({dep_name}), which the table in \
                     docs/ARCHITECTURE.md has no column for: add one, here and there"
                ),
            };
        }
        crates.insert(name.to_string(), deps);
    }
    crates
}

/// What differs between the doc's sets and cargo's, one line each.
fn differences(
    doc: &BTreeMap<String, Dependencies>,
    cargo: &BTreeMap<String, Dependencies>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let names: BTreeSet<&String> = doc.keys().chain(cargo.keys()).collect();
    for name in names {
        match (doc.get(name), cargo.get(name)) {
            (Some(_), None) => lines.push(format!("{name}: in the doc, not a workspace crate")),
            (None, Some(_)) => {
                lines.push(format!("{name}: a workspace crate the doc has no row for"))
            }
            (Some(d), Some(c)) => {
                for (kind, d, c) in [
                    ("depends on", &d.normal, &c.normal),
                    ("in its tests also", &d.dev, &c.dev),
                ] {
                    let missing: Vec<_> = c.difference(d).collect();
                    let extra: Vec<_> = d.difference(c).collect();
                    if !missing.is_empty() {
                        lines.push(format!("{name}, {kind}: the doc lacks {missing:?}"));
                    }
                    if !extra.is_empty() {
                        lines.push(format!(
                            "{name}, {kind}: the doc has {extra:?}, which cargo does not"
                        ));
                    }
                }
            }
            (None, None) => unreachable!("a name from one of the two maps"),
        }
    }
    lines
}

#[test]
fn the_dependency_table_is_cargo_metadatas() {
    let doc = documented_dependencies(&architecture_doc());
    let cargo = metadata_dependencies();
    let differences = differences(&doc, &cargo);
    assert!(
        differences.is_empty(),
        "docs/ARCHITECTURE.md's Dependencies table differs from `cargo metadata`:\n{}",
        differences.join("\n")
    );
}

/// `text` with its comments removed and the contents of its string and
/// character literals blanked, lines kept, so that a word or a brace found
/// in what is left is code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && raw_prefix(&chars, i) {
            // A raw string: r"...", r#"..."#, br"...", and so on.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(&other) => out.push(blank(other)),
                }
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&inner) = chars.get(i) {
                    out.push(blank(inner));
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1b}') or a lifetime ('a).
            if next == Some('\\') {
                // Past the escaped character, which may be a quote.
                let mut j = i + 3;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && is_ident(chars[i - 1])
}

/// Whether the `r` at `i` starts a raw string's prefix (`r`, or `br`)
/// rather than ending an identifier.
fn raw_prefix(chars: &[char], i: usize) -> bool {
    !ident_before(chars, i) || (chars[i - 1] == 'b' && !ident_before(chars, i - 1))
}

/// The byte ranges of `code`'s inline `#[cfg(test)] mod NAME { ... }`.
fn test_modules(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let start = from + at;
        from = start + "#[cfg(test)]".len();
        let mut rest = code[from..].trim_start();
        // Other attributes of the same module.
        while let Some(attribute) = rest.strip_prefix("#[") {
            let Some(close) = attribute.find(']') else {
                break;
            };
            rest = attribute[close + 1..].trim_start();
        }
        let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
        let Some(rest) = rest.strip_prefix("mod ") else {
            continue;
        };
        let name_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let after_name = rest[name_len..].trim_start();
        if !after_name.starts_with('{') {
            continue; // `mod NAME;`: a file of its own.
        }
        let open = code.len() - after_name.len();
        let mut depth = 0usize;
        let mut end = code.len();
        for (k, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        ranges.push(start..end);
        from = end;
    }
    ranges
}

/// Whether `code` holds the keyword `unsafe` as code does: before a block,
/// `fn`, `impl`, `extern` or `trait`, and outside `ranges`.
fn has_unsafe_code(code: &str, outside: &[std::ops::Range<usize>]) -> bool {
    let mut from = 0;
    while let Some(at) = code[from..].find("unsafe") {
        let start = from + at;
        let end = start + "unsafe".len();
        from = end;
        let before = code[..start].chars().next_back();
        let after = code[end..].chars().next();
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            continue; // unsafe_code, Unsafe, unsafe_...
        }
        if outside.iter().any(|r| r.contains(&start)) {
            continue;
        }
        let rest = code[end..].trim_start();
        let word_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if rest.starts_with('{') || ["fn", "impl", "extern", "trait"].contains(&&rest[..word_len]) {
            return true;
        }
    }
    false
}

/// Every `.rs` file under `dir`, by its path from the workspace root,
/// leaving out what only tests compile: `tests/` directories and
/// `tests.rs` files.
fn sources(root: &Path, dir: &Path, found: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "tests" && name != "target" {
                sources(root, &path, found);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            let relative = path.strip_prefix(root).expect("under the root");
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

fn files_with_unsafe_code() -> BTreeSet<String> {
    let root = workspace_root();
    let mut files = Vec::new();
    sources(&root, &root.join("crates"), &mut files);
    files
        .into_iter()
        .filter(|file| {
            let text =
                std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            let code = code_only(&text);
            has_unsafe_code(&code, &test_modules(&code))
        })
        .collect()
}

#[test]
fn the_unsafe_list_names_exactly_the_files_with_unsafe_code() {
    let doc = architecture_doc();
    let mut listed = BTreeSet::new();
    for row in table_after(&doc, "### Where `unsafe` is") {
        let Some(files) = row.first() else {
            panic!("docs/ARCHITECTURE.md, Where `unsafe` is: an empty row");
        };
        for file in names_in(files, files) {
            assert!(
                listed.insert(file.clone()),
                "docs/ARCHITECTURE.md, Where `unsafe` is: {file} twice"
            );
        }
    }
    let found = files_with_unsafe_code();
    let unlisted: Vec<_> = found.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&found).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "docs/ARCHITECTURE.md's Where `unsafe` is differs from the sources:\n\
         holding unsafe code but not listed: {unlisted:?}\n\
         listed but holding no unsafe code: {stale:?}"
    );
}

#[test]
fn code_only_sees_through_comments_and_literals() {
    let code = code_only(
        "// unsafe { in a comment }\n/* unsafe { */ let s = \"unsafe {\"; let c = '{';\n\
         let r = r#\"unsafe \"{\"#; fn f<'a>(x: &'a u8) {}\n",
    );
    assert!(!has_unsafe_code(&code, &[]), "{code}");
    assert_eq!(code.matches('{').count(), 1, "{code}");
    let code = code_only("let q = '\\''; let r#type = 1; let b = br\"\\\"; unsafe { }\n");
    assert!(has_unsafe_code(&code, &[]), "{code}");
    let code = code_only("#![forbid(unsafe_code)]\nstruct Unsafe; let unsafe_ = 1;\n");
    assert!(!has_unsafe_code(&code, &[]));
    let code = code_only("fn f() { unsafe { g() } }\n");
    assert!(has_unsafe_code(&code, &[]));
    let code = code_only("fn f() {}\n#[cfg(test)]\nmod tests {\n fn t() { unsafe { g() } }\n}\n");
    assert!(!has_unsafe_code(&code, &test_modules(&code)));
    let code = code_only("unsafe impl Send for X {}\n");
    assert!(has_unsafe_code(&code, &[]));
}
