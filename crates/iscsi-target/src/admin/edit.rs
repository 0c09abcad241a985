//! Changes to the configuration file's text, made the way an administrator
//! would make them by hand: through its TOML document ([`toml_edit`]), so
//! that comments, key order and formatting survive. Each edit only
//! changes the text; whether the result is a valid configuration is the
//! configuration reader's to say (see [`super::Admin`]).

use std::fmt::Write as _;
use toml_edit::{Array, ArrayOfTables, DocumentMut, Item, Table, Value};

/// One change an administrator asks for.
#[derive(Debug, Clone)]
pub enum Edit {
    /// A new `[[target]]` named `name`, with more keys (`alias`, ...).
    TargetAdd {
        /// The iSCSI name.
        name: String,
        /// Further keys of the table, as TOML values.
        keys: Vec<(String, Value)>,
    },
    /// The `[[target]]` named `name` goes.
    TargetRemove {
        /// The iSCSI name.
        name: String,
    },
    /// A new `[[target.lun]]`.
    LunAdd {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
        /// The LUN's keys: exactly one of `memory`, `file`, `block`, and the rest.
        keys: Vec<(String, Value)>,
    },
    /// A `[[target.lun]]` goes.
    LunRemove {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// `offline = true`, or the key removed.
    LunOffline {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
        /// Offline (true) or online.
        offline: bool,
    },
    /// An initiator added to `allowed_initiators`.
    AclAdd {
        /// The target's name.
        target: String,
        /// The initiator's iSCSI name.
        initiator: String,
    },
    /// An initiator removed from `allowed_initiators`. Removing the last
    /// one would let every initiator in, so it needs `allow_all`.
    AclRemove {
        /// The target's name.
        target: String,
        /// The initiator's iSCSI name.
        initiator: String,
        /// Confirms that an empty list (every initiator) is meant.
        allow_all: bool,
    },
    /// `[target.chap]` (or `[discovery.chap]` when `target` is None) replaced.
    ChapSet {
        /// The target's name; None: discovery.
        target: Option<String>,
        /// `user`, `secret` or `secret_file`, and the optional keys.
        keys: Vec<(String, Value)>,
    },
    /// `[target.chap]` (or `[discovery.chap]`) removed: no CHAP required.
    ChapClear {
        /// The target's name; None: discovery.
        target: Option<String>,
    },
    /// An address added to `portals`.
    PortalAdd {
        /// The address as the file writes it.
        address: String,
    },
    /// An address removed from `portals`.
    PortalRemove {
        /// The address as the file writes it.
        address: String,
    },
}

/// Why an edit could not be made to the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EditError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, EditError> {
    Err(EditError(message.into()))
}

impl Edit {
    /// What the edit does, in one line for the log (never a secret).
    pub fn describe(&self) -> String {
        let keys = |keys: &[(String, Value)]| {
            let mut out = String::new();
            for (k, v) in keys {
                if k.contains("secret") && !k.ends_with("_file") {
                    let _ = write!(out, " {k}=(hidden)");
                } else {
                    let _ = write!(out, " {k}={}", v.to_string().trim());
                }
            }
            out
        };
        match self {
            Edit::TargetAdd { name, keys: k } => format!("target {name} added{}", keys(k)),
            Edit::TargetRemove { name } => format!("target {name} removed"),
            Edit::LunAdd {
                target,
                number,
                keys: k,
            } => format!("LUN {number} of {target} added:{}", keys(k)),
            Edit::LunRemove { target, number } => format!("LUN {number} of {target} removed"),
            Edit::LunOffline {
                target,
                number,
                offline,
            } => format!(
                "LUN {number} of {target} {}",
                if *offline { "offline" } else { "online" }
            ),
            Edit::AclAdd { target, initiator } => {
                format!("{initiator} added to allowed_initiators of {target}")
            }
            Edit::AclRemove {
                target, initiator, ..
            } => format!("{initiator} removed from allowed_initiators of {target}"),
            Edit::ChapSet { target, keys: k } => format!(
                "CHAP of {} set:{}",
                target.as_deref().unwrap_or("discovery"),
                keys(k)
            ),
            Edit::ChapClear { target } => format!(
                "CHAP of {} removed",
                target.as_deref().unwrap_or("discovery")
            ),
            Edit::PortalAdd { address } => format!("portal {address} added"),
            Edit::PortalRemove { address } => format!("portal {address} removed"),
        }
    }

    /// Makes the edit on `doc`. `running_portals` are the portals as the
    /// running configuration has them, written into a file that has no
    /// `portals` key before one is added or removed.
    pub fn apply(
        &self,
        doc: &mut DocumentMut,
        running_portals: &[String],
    ) -> Result<(), EditError> {
        match self {
            Edit::TargetAdd { name, keys } => target_add(doc, name, keys)?,
            Edit::TargetRemove { name } => {
                let Some(i) = find_target(doc, name) else {
                    return fail(format!("no target named {name}"));
                };
                targets(doc)?.remove(i);
            }
            Edit::LunAdd {
                target,
                number,
                keys,
            } => lun_add(doc, target, *number, keys)?,
            Edit::LunRemove { target, number } => {
                let t = target_table(doc, target)?;
                let Some(i) = find_lun(t, *number) else {
                    return fail(format!("{target} has no LUN {number}"));
                };
                luns(t, target)?.remove(i);
            }
            Edit::LunOffline {
                target,
                number,
                offline,
            } => lun_offline(doc, target, *number, *offline)?,
            Edit::AclAdd { target, initiator } => {
                let t = target_table(doc, target)?;
                let list = string_array(t, "allowed_initiators", target)?;
                if list.iter().any(|v| v.as_str() == Some(initiator)) {
                    return fail(format!(
                        "{initiator} is in allowed_initiators of {target} already"
                    ));
                }
                list.push(initiator.as_str());
            }
            Edit::AclRemove {
                target,
                initiator,
                allow_all,
            } => acl_remove(doc, target, initiator, *allow_all)?,
            Edit::ChapSet { target, keys } => {
                let parent = chap_parent(doc, target.as_deref())?;
                let mut table = Table::new();
                for (k, v) in keys {
                    table.insert(k, Item::Value(v.clone()));
                }
                parent.insert("chap", Item::Table(table));
            }
            Edit::ChapClear { target } => {
                let parent = chap_parent(doc, target.as_deref())?;
                if parent.remove("chap").is_none() {
                    return fail(format!(
                        "{} has no CHAP to remove",
                        target.as_deref().unwrap_or("discovery")
                    ));
                }
            }
            Edit::PortalAdd { address } => {
                let list = portals(doc, running_portals)?;
                if list.iter().any(|v| v.as_str() == Some(address)) {
                    return fail(format!("portal {address} is in portals already"));
                }
                list.push(address.as_str());
            }
            Edit::PortalRemove { address } => portal_remove(doc, running_portals, address)?,
        }
        renumber(doc);
        Ok(())
    }
}

/// Adds a `[[target]]` named `name` with `keys`.
fn target_add(
    doc: &mut DocumentMut,
    name: &str,
    keys: &[(String, Value)],
) -> Result<(), EditError> {
    if find_target(doc, name).is_some() {
        return fail(format!("a target named {name} exists already"));
    }
    let mut table = Table::new();
    table.insert("name", Item::Value(name.into()));
    for (k, v) in keys {
        table.insert(k, Item::Value(v.clone()));
    }
    targets(doc)?.push(table);
    Ok(())
}

/// Adds LUN `number` with `keys` to `target`.
fn lun_add(
    doc: &mut DocumentMut,
    target: &str,
    number: u16,
    keys: &[(String, Value)],
) -> Result<(), EditError> {
    let t = target_table(doc, target)?;
    if find_lun(t, number).is_some() {
        return fail(format!("{target} has a LUN {number} already"));
    }
    let mut table = Table::new();
    table.insert("number", Item::Value(i64::from(number).into()));
    for (k, v) in keys {
        table.insert(k, Item::Value(v.clone()));
    }
    luns(t, target)?.push(table);
    Ok(())
}

/// Takes LUN `number` of `target` offline, or brings it back.
fn lun_offline(
    doc: &mut DocumentMut,
    target: &str,
    number: u16,
    offline: bool,
) -> Result<(), EditError> {
    let t = target_table(doc, target)?;
    let Some(i) = find_lun(t, number) else {
        return fail(format!("{target} has no LUN {number}"));
    };
    let lun = luns(t, target)?.get_mut(i).expect("index from find_lun");
    if offline {
        lun.insert("offline", Item::Value(true.into()));
    } else {
        lun.remove("offline");
    }
    Ok(())
}

/// Removes `initiator` from the allowed initiators of `target`; the last
/// one only with `allow_all`.
fn acl_remove(
    doc: &mut DocumentMut,
    target: &str,
    initiator: &str,
    allow_all: bool,
) -> Result<(), EditError> {
    let t = target_table(doc, target)?;
    let list = string_array(t, "allowed_initiators", target)?;
    let Some(i) = list.iter().position(|v| v.as_str() == Some(initiator)) else {
        return fail(format!(
            "{initiator} is not in allowed_initiators of {target}"
        ));
    };
    if list.len() == 1 && !allow_all {
        return fail(format!(
            "{initiator} is the last entry of allowed_initiators of {target}; \
             an empty list lets every initiator in: confirm with --allow-all, \
             or add the initiator that should stay first"
        ));
    }
    list.remove(i);
    if list.is_empty() {
        t.remove("allowed_initiators");
    }
    Ok(())
}

/// Removes portal `address`; never the last one.
fn portal_remove(
    doc: &mut DocumentMut,
    running_portals: &[String],
    address: &str,
) -> Result<(), EditError> {
    let list = portals(doc, running_portals)?;
    let Some(i) = list.iter().position(|v| v.as_str() == Some(address)) else {
        return fail(format!("portal {address} is not in portals"));
    };
    if list.len() == 1 {
        return fail(format!(
            "{address} is the last portal; add another before removing it"
        ));
    }
    list.remove(i);
    Ok(())
}

/// The `[[target]]` array, made if the file has none.
fn targets(doc: &mut DocumentMut) -> Result<&mut ArrayOfTables, EditError> {
    let item = doc
        .as_table_mut()
        .entry("target")
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
    match item {
        Item::ArrayOfTables(a) => Ok(a),
        _ => fail("`target` in the file is not an array of [[target]] tables; edit it by hand"),
    }
}

fn find_target(doc: &DocumentMut, name: &str) -> Option<usize> {
    doc.get("target")?
        .as_array_of_tables()?
        .iter()
        .position(|t| t.get("name").and_then(Item::as_str) == Some(name))
}

fn target_table<'d>(doc: &'d mut DocumentMut, name: &str) -> Result<&'d mut Table, EditError> {
    let Some(i) = find_target(doc, name) else {
        return fail(format!("no target named {name}"));
    };
    Ok(targets(doc)?.get_mut(i).expect("index from find_target"))
}

fn luns<'t>(target: &'t mut Table, name: &str) -> Result<&'t mut ArrayOfTables, EditError> {
    match target
        .entry("lun")
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()))
    {
        Item::ArrayOfTables(a) => Ok(a),
        _ => fail(format!(
            "the LUNs of {name} are not written as [[target.lun]] tables; edit them by hand"
        )),
    }
}

fn find_lun(target: &Table, number: u16) -> Option<usize> {
    target
        .get("lun")?
        .as_array_of_tables()?
        .iter()
        .position(|l| l.get("number").and_then(Item::as_integer) == Some(i64::from(number)))
}

fn string_array<'t>(
    table: &'t mut Table,
    key: &str,
    owner: &str,
) -> Result<&'t mut Array, EditError> {
    match table
        .entry(key)
        .or_insert(Item::Value(Value::Array(Array::new())))
    {
        Item::Value(Value::Array(a)) => Ok(a),
        _ => fail(format!("{key} of {owner} is not an array")),
    }
}

fn chap_parent<'d>(
    doc: &'d mut DocumentMut,
    target: Option<&str>,
) -> Result<&'d mut Table, EditError> {
    match target {
        Some(name) => target_table(doc, name),
        None => match doc
            .as_table_mut()
            .entry("discovery")
            .or_insert(Item::Table(Table::new()))
        {
            Item::Table(t) => Ok(t),
            _ => fail("`discovery` in the file is not a table"),
        },
    }
}

fn portals<'d>(doc: &'d mut DocumentMut, running: &[String]) -> Result<&'d mut Array, EditError> {
    let root = doc.as_table_mut();
    if !root.contains_key("portals") {
        let mut list = Array::new();
        for p in running {
            list.push(p.as_str());
        }
        // Top-level keys must come before the first table.
        root.insert("portals", Item::Value(Value::Array(list)));
        root.sort_values_by(|k1, _, k2, _| {
            (k1.get() != "state_dir" && k1.get() != "portals")
                .cmp(&(k2.get() != "state_dir" && k2.get() != "portals"))
        });
    }
    string_array(root, "portals", "the file")
}

/// Puts every table's header where its place in the tree says, so that a
/// `[[target.lun]]` added to the first of two targets is written under
/// that target and not after the second (where it would belong to it).
fn renumber(doc: &mut DocumentMut) {
    fn walk(table: &mut Table, next: &mut usize) {
        for (_, item) in table.iter_mut() {
            match item {
                Item::Table(t) => {
                    t.set_position(*next);
                    *next += 1;
                    walk(t, next);
                }
                Item::ArrayOfTables(a) => {
                    for t in a.iter_mut() {
                        t.set_position(*next);
                        *next += 1;
                        walk(t, next);
                    }
                }
                _ => {}
            }
        }
    }
    let mut next = 1;
    walk(doc.as_table_mut(), &mut next);
}

/// The document with every inline secret replaced by "(hidden)": what
/// `isoe admin show` prints.
pub fn redacted(doc: &DocumentMut) -> String {
    fn walk(table: &mut Table) {
        for (key, item) in table.iter_mut() {
            match item {
                Item::Table(t) => walk(t),
                Item::ArrayOfTables(a) => a.iter_mut().for_each(walk),
                Item::Value(v) if key.get() == "secret" || key.get() == "mutual_secret" => {
                    let decor = v.decor().clone();
                    *v = Value::from("(hidden)");
                    *v.decor_mut() = decor;
                }
                _ => {}
            }
        }
    }
    let mut copy = doc.clone();
    walk(copy.as_table_mut());
    copy.to_string()
}

/// The text `key` of LUN `number` of `target` is written with in the
/// document (`"256 GB"`), to echo a size back in the unit it was given in.
pub fn lun_value_text(doc: &DocumentMut, target: &str, number: u16, key: &str) -> Option<String> {
    let t = doc
        .get("target")?
        .as_array_of_tables()?
        .get(find_target(doc, target)?)?;
    let lun = t
        .get("lun")?
        .as_array_of_tables()?
        .get(find_lun(t, number)?)?;
    lun.get(key)?.as_str().map(str::to_string)
}

/// Whether the document holds a CHAP secret written inline (not in a
/// `secret_file`), which makes the file itself a secret.
pub fn holds_inline_secret(doc: &DocumentMut) -> bool {
    redacted(doc) != doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# my SAN
portals = ["127.0.0.1:3260"]

[[target]]
name = "iqn.2026-11.io.isoe:a" # first
[[target.lun]]
number = 0
memory = "1GiB"

[[target]]
name = "iqn.2026-11.io.isoe:b"
allowed_initiators = ["iqn.2026-11.io.isoe:i1"]

[datapath]
workers = 2
"#;

    fn edit(e: Edit) -> String {
        let mut doc: DocumentMut = FILE.parse().unwrap();
        e.apply(&mut doc, &[]).unwrap();
        doc.to_string()
    }

    #[test]
    fn a_lun_added_to_the_first_target_is_written_under_it() {
        let text = edit(Edit::LunAdd {
            target: "iqn.2026-11.io.isoe:a".into(),
            number: 1,
            keys: vec![("memory".into(), "64MiB".into())],
        });
        let at_lun1 = text.find("number = 1").unwrap();
        let at_b = text.find("iqn.2026-11.io.isoe:b").unwrap();
        assert!(at_lun1 < at_b, "{text}");
        assert!(text.starts_with("# my SAN\n"), "{text}");
        assert!(text.contains("# first"), "{text}");
    }

    #[test]
    fn removing_the_last_acl_entry_needs_allow_all() {
        let mut doc: DocumentMut = FILE.parse().unwrap();
        let remove = |allow_all| Edit::AclRemove {
            target: "iqn.2026-11.io.isoe:b".into(),
            initiator: "iqn.2026-11.io.isoe:i1".into(),
            allow_all,
        };
        let err = remove(false).apply(&mut doc, &[]).unwrap_err();
        assert!(err.0.contains("--allow-all"), "{err}");
        remove(true).apply(&mut doc, &[]).unwrap();
        assert!(!doc.to_string().contains("allowed_initiators"));
    }

    #[test]
    fn edits_name_what_is_missing_or_there_already() {
        let mut doc: DocumentMut = FILE.parse().unwrap();
        let err = Edit::LunRemove {
            target: "iqn.2026-11.io.isoe:a".into(),
            number: 7,
        }
        .apply(&mut doc, &[])
        .unwrap_err();
        assert_eq!(err.0, "iqn.2026-11.io.isoe:a has no LUN 7");
        let err = Edit::TargetAdd {
            name: "iqn.2026-11.io.isoe:b".into(),
            keys: vec![],
        }
        .apply(&mut doc, &[])
        .unwrap_err();
        assert_eq!(err.0, "a target named iqn.2026-11.io.isoe:b exists already");
        let err = Edit::PortalRemove {
            address: "127.0.0.1:3260".into(),
        }
        .apply(&mut doc, &[])
        .unwrap_err();
        assert!(err.0.contains("last portal"), "{err}");
    }

    #[test]
    fn portals_are_written_before_the_first_table_when_the_file_had_none() {
        let mut doc: DocumentMut = "[[target]]\nname = \"iqn.2026-11.io.isoe:a\"\n"
            .parse()
            .unwrap();
        Edit::PortalAdd {
            address: "127.0.0.2:3260".into(),
        }
        .apply(&mut doc, &["127.0.0.1:3260".to_string()])
        .unwrap();
        let text = doc.to_string();
        assert!(
            text.starts_with("portals = [\"127.0.0.1:3260\", \"127.0.0.2:3260\"]\n"),
            "{text}"
        );
    }

    #[test]
    fn shown_configuration_hides_inline_secrets() {
        let mut doc: DocumentMut = FILE.parse().unwrap();
        Edit::ChapSet {
            target: Some("iqn.2026-11.io.isoe:a".into()),
            keys: vec![
                ("user".into(), "alice".into()),
                ("secret".into(), "alice-secret-12".into()),
            ],
        }
        .apply(&mut doc, &[])
        .unwrap();
        assert!(doc.to_string().contains("alice-secret-12"));
        let shown = redacted(&doc);
        assert!(!shown.contains("alice-secret-12"), "{shown}");
        assert!(shown.contains("secret = \"(hidden)\""), "{shown}");
    }

    #[test]
    fn described_edits_never_carry_a_secret() {
        let e = Edit::ChapSet {
            target: None,
            keys: vec![
                ("user".into(), "disc".into()),
                ("secret".into(), "top-secret-value".into()),
                ("mutual_secret".into(), "other-secret-value".into()),
            ],
        };
        let line = e.describe();
        assert!(!line.contains("top-secret-value") && !line.contains("other-secret-value"));
        assert!(line.contains("user=\"disc\""), "{line}");
    }
}
