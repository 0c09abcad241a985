//! A plan file as a tree that remembers where every key was written, and a
//! reader that takes typed values out of it and turns positions into
//! `file:line: key: message` errors.
//!
//! Table entries carry the span of their key; array elements carry their
//! own span. Nothing here knows the plan schema.

use super::PlanError;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use toml::Spanned;

/// One TOML value with the positions of what it contains.
#[derive(Debug)]
pub(super) enum Value {
    Table(Vec<(Spanned<String>, Value)>),
    Array(Vec<Spanned<Value>>),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A date or time: no plan key takes one.
    Datetime,
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any TOML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Value>>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        loop {
            // The toml crate presents a datetime as a one-entry map whose
            // private key carries no span: the only key that fails to load.
            let key = match map.next_key::<Spanned<String>>() {
                Ok(Some(key)) => key,
                Ok(None) => break,
                Err(_) if entries.is_empty() => return Ok(Value::Datetime),
                Err(e) => return Err(e),
            };
            entries.push((key, map.next_value::<Value>()?));
        }
        Ok(Value::Table(entries))
    }
}

/// A short description of a value for "expected X, found Y".
pub(super) fn what(v: &Value) -> String {
    match v {
        Value::Table(_) => "a table".into(),
        Value::Array(_) => "an array".into(),
        Value::Str(s) if s.chars().count() > 40 => {
            format!("a string ({:?}...)", s.chars().take(40).collect::<String>())
        }
        Value::Str(s) => format!("a string ({s:?})"),
        Value::Int(v) => format!("an integer ({v})"),
        Value::Float(v) => format!("a float ({v})"),
        Value::Bool(v) => format!("a boolean ({v})"),
        Value::Datetime => "a date/time".into(),
    }
}

/// A value taken out of a table: its key path, where it was written, and it.
pub(super) struct Item {
    pub path: String,
    pub at: usize,
    pub value: Value,
}

/// A table whose entries are taken out one by one.
pub(super) struct Table {
    pub path: String,
    pub at: usize,
    pub entries: Vec<(Spanned<String>, Value)>,
}

impl Table {
    /// Removes the entry `name`, if present.
    pub fn take(&mut self, name: &str) -> Option<Item> {
        let i = self.entries.iter().position(|(k, _)| k.get_ref() == name)?;
        let (key, value) = self.entries.remove(i);
        Some(Item {
            path: child_path(&self.path, name),
            at: key.span().start,
            value,
        })
    }

    /// Where the entry `name` was written, without taking it.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|(k, _)| k.get_ref() == name)
            .map(|(k, _)| k.span().start)
    }
}

/// `parent.name`, quoting a name that is not a bare TOML key.
pub(super) fn child_path(parent: &str, name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let name = if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    };
    if parent.is_empty() {
        name
    } else {
        format!("{parent}.{name}")
    }
}

/// Positions to lines, values to types, problems to [`PlanError`]s.
pub(super) struct Reader {
    pub file: String,
    line_starts: Vec<usize>,
}

impl Reader {
    pub fn new(text: &str, file: &str) -> Reader {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Reader {
            file: file.to_string(),
            line_starts,
        }
    }

    /// The 1-based line holding byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset).max(1)
    }

    /// The document's root table, or the syntax error.
    pub fn root(&self, text: &str) -> Result<Table, PlanError> {
        match toml::from_str::<Value>(text) {
            Ok(Value::Table(entries)) => Ok(Table {
                path: String::new(),
                at: 0,
                entries,
            }),
            Ok(other) => {
                Err(self.error(0, "", format!("expected a table, found {}", what(&other))))
            }
            Err(e) => {
                let offset = e.span().map_or(0, |s| s.start);
                let line = self.line(offset);
                Err(PlanError::Syntax {
                    file: self.file.clone(),
                    line,
                    column: text[self.line_starts[line - 1]..offset.min(text.len())]
                        .chars()
                        .count()
                        + 1,
                    message: e.message().trim().lines().collect::<Vec<_>>().join("; "),
                })
            }
        }
    }

    pub fn error(&self, at: usize, path: &str, message: impl Into<String>) -> PlanError {
        PlanError::Invalid {
            file: self.file.clone(),
            line: self.line(at),
            key: path.to_string(),
            message: message.into(),
        }
    }

    pub fn at(&self, item: &Item, message: impl Into<String>) -> PlanError {
        self.error(item.at, &item.path, message)
    }

    pub fn expected(&self, item: &Item, expected: &str) -> PlanError {
        self.at(
            item,
            format!("expected {expected}, found {}", what(&item.value)),
        )
    }

    /// Refuses the first key of `table` that is not in `allowed`.
    pub fn deny_unknown(&self, table: &Table, allowed: &[&str]) -> Result<(), PlanError> {
        let Some((key, _)) = table
            .entries
            .iter()
            .find(|(k, _)| !allowed.contains(&k.get_ref().as_str()))
        else {
            return Ok(());
        };
        let name = key.get_ref();
        let hint = closest(name, allowed.iter().copied())
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        Err(self.error(
            key.span().start,
            &child_path(&table.path, name),
            format!("unknown key{hint}; expected one of: {}", allowed.join(", ")),
        ))
    }

    /// `item` as a table with only `allowed` keys.
    pub fn table(&self, item: Item, allowed: &[&str]) -> Result<Table, PlanError> {
        match item.value {
            Value::Table(entries) => {
                let t = Table {
                    path: item.path,
                    at: item.at,
                    entries,
                };
                self.deny_unknown(&t, allowed)?;
                Ok(t)
            }
            _ => Err(self.expected(&item, "a table")),
        }
    }

    /// The elements of an array, each with its path (`key[i]`) and position.
    pub fn array(&self, item: Item, expected: &str) -> Result<Vec<Item>, PlanError> {
        match item.value {
            Value::Array(values) => Ok(values
                .into_iter()
                .enumerate()
                .map(|(i, v)| Item {
                    path: format!("{}[{i}]", item.path),
                    at: v.span().start,
                    value: v.into_inner(),
                })
                .collect()),
            _ => Err(self.expected(&item, expected)),
        }
    }

    /// An array of tables (`[[name]]`), each with only `allowed` keys.
    pub fn tables(&self, item: Item, allowed: &[&str]) -> Result<Vec<Table>, PlanError> {
        let name = item.path.rsplit('.').next().unwrap_or_default().to_string();
        let expected = format!("an array of tables ([[{name}]])");
        self.array(item, &expected)?
            .into_iter()
            .map(|element| match element.value {
                Value::Table(_) => self.table(element, allowed),
                _ => Err(self.expected(&element, &expected)),
            })
            .collect()
    }

    pub fn string(&self, item: &Item) -> Result<String, PlanError> {
        match &item.value {
            Value::Str(s) => Ok(s.clone()),
            _ => Err(self.expected(item, "a string")),
        }
    }

    pub fn bool(&self, item: &Item) -> Result<bool, PlanError> {
        match item.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.expected(item, "true or false")),
        }
    }

    /// An integer in `min..=max`.
    pub fn u32_in(&self, item: &Item, min: u32, max: u32) -> Result<u32, PlanError> {
        match item.value {
            Value::Int(v) if (i64::from(min)..=i64::from(max)).contains(&v) => {
                Ok(u32::try_from(v).expect("range checked"))
            }
            Value::Int(v) => Err(self.at(item, format!("{v} is out of range {min}..={max}"))),
            _ => Err(self.expected(item, "an integer")),
        }
    }

    /// A number (integer or float) in `min..=max`.
    pub fn f64_in(&self, item: &Item, min: f64, max: f64) -> Result<f64, PlanError> {
        let v = match item.value {
            Value::Int(v) => v as f64,
            Value::Float(v) => v,
            _ => return Err(self.expected(item, "a number")),
        };
        if v.is_finite() && (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.at(item, format!("{v} is out of range {min}..={max}")))
        }
    }

    /// A size in bytes in `min..=max`: an integer, or a string such as
    /// `"256KiB"` or `"4k"` in the grammar of [`isoe_size`].
    pub fn size_in(&self, item: &Item, min: u32, max: u32) -> Result<u32, PlanError> {
        let bytes = match &item.value {
            Value::Int(v) => i128::from(*v),
            Value::Str(s) => isoe_size::parse_bytes(s)
                .map_err(|e| self.at(item, e.to_string()))?
                .into(),
            _ => return Err(self.expected(item, "a size like \"256KiB\" or a number of bytes")),
        };
        if (i128::from(min)..=i128::from(max)).contains(&bytes) {
            Ok(u32::try_from(bytes).expect("range checked"))
        } else {
            Err(self.at(item, format!("{bytes} bytes is out of range {min}..={max}")))
        }
    }

    /// A string that must be one of `choices`.
    pub fn choice<'c>(&self, item: &Item, choices: &[&'c str]) -> Result<&'c str, PlanError> {
        let s = match &item.value {
            Value::Str(s) => s,
            _ => return Err(self.expected(item, &format!("one of \"{}\"", choices.join("\", \"")))),
        };
        choices.iter().copied().find(|c| c == s).ok_or_else(|| {
            self.at(
                item,
                format!(
                    "expected one of \"{}\", found {s:?}",
                    choices.join("\", \"")
                ),
            )
        })
    }
}

/// The candidate closest to `name` when it is a likely typo.
pub(super) fn closest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, c)| d <= 2.max(c.len() / 5))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
