//! Tables whose fields a schema takes out one by one, and the reader that
//! turns their positions into lines and their values into typed ones or
//! into `file:line: key: message` errors.

use crate::hint::closest;
use crate::tree::Node;
use std::marker::PhantomData;
use toml::Spanned;

/// The error type of a schema, as a [`Reader`] builds it: each schema keeps
/// its own public error, with these two kinds of problem among its variants.
pub trait ReadError {
    /// The text is not well-formed TOML. `file` is the name the reader was
    /// given; `line` and `column` are 1-based, the column in characters;
    /// `message` is the TOML parser's, on one line.
    fn syntax(file: String, line: usize, column: usize, message: String) -> Self;
    /// Well-formed TOML with a key or value the schema does not accept.
    /// `line` is the 1-based line of the key (or of the table that lacks
    /// it), `key` its path (`target[1].lun[0].size`), `message` what is
    /// wrong and what is expected.
    fn invalid(file: String, line: usize, key: String, message: String) -> Self;
}

/// Implements [`ReadError`] for a schema's error that wraps
/// [`crate::FileError`] (`From<FileError>`) beside kinds of its own, such as
/// `isoe_lab::plan::PlanError`: the reader's problems become its
/// `FileError`.
#[macro_export]
macro_rules! impl_read_error {
    ($error:ty) => {
        impl $crate::ReadError for $error {
            fn syntax(
                file: ::std::string::String,
                line: usize,
                column: usize,
                message: ::std::string::String,
            ) -> Self {
                <$error>::from(<$crate::FileError as $crate::ReadError>::syntax(
                    file, line, column, message,
                ))
            }

            fn invalid(
                file: ::std::string::String,
                line: usize,
                key: ::std::string::String,
                message: ::std::string::String,
            ) -> Self {
                <$error>::from(<$crate::FileError as $crate::ReadError>::invalid(
                    file, line, key, message,
                ))
            }
        }
    };
}

/// A value taken out of a [`Table`] or an array, with its key path and the
/// byte offset where it was written.
#[derive(Debug)]
pub struct Field {
    /// Path of the key, e.g. `target[1].lun[0].size` (indices from 0).
    pub key: String,
    /// Byte offset of the key (of the element, in an array).
    pub offset: usize,
    /// The value.
    pub node: Node,
}

/// A table being read: its fields are taken out one by one, so that what
/// is left at the end is what the schema did not ask for.
#[derive(Debug)]
pub struct Table {
    /// Path of the table, e.g. `target[1]`; empty for the document.
    pub key: String,
    /// Byte offset of the table's key or header (0 for the document).
    pub offset: usize,
    /// The entries not taken yet, in file order.
    pub entries: Vec<(Spanned<String>, Node)>,
}

impl Table {
    /// Removes and returns the field `name`, if present.
    pub fn take(&mut self, name: &str) -> Option<Field> {
        let i = self.entries.iter().position(|(k, _)| k.get_ref() == name)?;
        let (key, node) = self.entries.remove(i);
        Some(Field {
            key: join_key(&self.key, name),
            offset: key.span().start,
            node,
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

/// The path of key `name` in the table at path `parent`: `parent.name`, or
/// `name` in the document; a name that is not a bare TOML key is quoted
/// (`target[0]."odd key"`).
pub fn join_key(parent: &str, name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
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

/// Turns positions in one text into its file name and line, fields into
/// typed values, and problems into the schema's error `E`.
#[derive(Debug)]
pub struct Reader<E> {
    file: String,
    line_starts: Vec<usize>,
    error: PhantomData<fn() -> E>,
}

impl<E> Reader<E> {
    /// A reader of `text`, which errors call `file`.
    pub fn new(text: &str, file: impl Into<String>) -> Reader<E> {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Reader {
            file: file.into(),
            line_starts,
            error: PhantomData,
        }
    }

    /// The name errors give the file.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line holding byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.line_starts
            .partition_point(|&start| start <= offset)
            .max(1)
    }
}

impl<E: ReadError> Reader<E> {
    /// Parses `text` (the text the reader was made for) into the document's
    /// table, or the syntax error.
    pub fn root(&self, text: &str) -> Result<Table, E> {
        match toml::from_str::<Node>(text) {
            Ok(Node::Table(entries)) => Ok(Table {
                key: String::new(),
                offset: 0,
                entries,
            }),
            Ok(other) => Err(self.invalid(
                0,
                "",
                format!("expected a table, found {}", other.describe()),
            )),
            Err(e) => {
                let offset = e.span().map_or(0, |s| s.start).min(text.len());
                let line = self.line(offset);
                let start = self.line_starts[line - 1];
                let column = text
                    .get(start..offset)
                    .map_or(offset - start, |before| before.chars().count())
                    + 1;
                Err(E::syntax(
                    self.file.clone(),
                    line,
                    column,
                    e.message().trim().lines().collect::<Vec<_>>().join("; "),
                ))
            }
        }
    }

    /// The error for the key `key` written at byte `offset`.
    pub fn invalid(&self, offset: usize, key: &str, message: impl Into<String>) -> E {
        E::invalid(
            self.file.clone(),
            self.line(offset),
            key.to_string(),
            message.into(),
        )
    }

    /// The error for `field`.
    pub fn at(&self, field: &Field, message: impl Into<String>) -> E {
        self.invalid(field.offset, &field.key, message)
    }

    /// The error for `table` lacking the key `name`, at the table's line:
    /// "missing: `why`".
    pub fn missing(&self, table: &Table, name: &str, why: &str) -> E {
        self.invalid(
            table.offset,
            &join_key(&table.key, name),
            format!("missing: {why}"),
        )
    }

    /// Takes the field `name` out of `table`, which must have it; see
    /// [`Reader::missing`].
    pub fn required(&self, table: &mut Table, name: &str, why: &str) -> Result<Field, E> {
        table
            .take(name)
            .ok_or_else(|| self.missing(table, name, why))
    }

    /// "expected `expected`, found ..." for `field`.
    pub fn wrong_type(&self, field: &Field, expected: &str) -> E {
        self.at(
            field,
            format!("expected {expected}, found {}", field.node.describe()),
        )
    }

    /// Refuses the first key of `table` (in file order) that is not in
    /// `allowed`, with a hint at the allowed key it is probably a typo of.
    pub fn deny_unknown(&self, table: &Table, allowed: &[&str]) -> Result<(), E> {
        let Some((key, _)) = table
            .entries
            .iter()
            .find(|(k, _)| !allowed.contains(&k.get_ref().as_str()))
        else {
            return Ok(());
        };
        let name = key.get_ref();
        let hint = closest(name, allowed.iter().copied())
            .map(|close| format!(" (did you mean `{close}`?)"))
            .unwrap_or_default();
        Err(self.invalid(
            key.span().start,
            &join_key(&table.key, name),
            format!("unknown key{hint}; expected one of: {}", allowed.join(", ")),
        ))
    }

    /// `field` as a table with only `allowed` keys.
    pub fn table(&self, field: Field, allowed: &[&str]) -> Result<Table, E> {
        match field.node {
            Node::Table(entries) => {
                let table = Table {
                    key: field.key,
                    offset: field.offset,
                    entries,
                };
                self.deny_unknown(&table, allowed)?;
                Ok(table)
            }
            _ => Err(self.wrong_type(&field, "a table")),
        }
    }

    /// The elements of an array, each with its own key path (`key[i]`) and
    /// position; anything else is refused as not `expected`.
    pub fn array(&self, field: Field, expected: &str) -> Result<Vec<Field>, E> {
        match field.node {
            Node::Array(items) => Ok(items
                .into_iter()
                .enumerate()
                .map(|(i, item)| Field {
                    key: format!("{}[{i}]", field.key),
                    offset: item.span().start,
                    node: item.into_inner(),
                })
                .collect()),
            _ => Err(self.wrong_type(&field, expected)),
        }
    }

    /// The tables of an array of tables (`[[name]]`), each with only
    /// `allowed` keys.
    pub fn tables(&self, field: Field, allowed: &[&str]) -> Result<Vec<Table>, E> {
        let name = field.key.rsplit('.').next().unwrap_or_default();
        let expected = format!("an array of tables ([[{name}]])");
        self.array(field, &expected)?
            .into_iter()
            .map(|item| self.table(item, allowed))
            .collect()
    }

    /// The elements of the array `field`, each read by `read`, as a list
    /// that is not empty and holds no value twice. A value read again is
    /// refused at its element as "`shown(value)` is listed twice", an empty
    /// array at its key with `empty`, anything but an array as not
    /// `expected`.
    pub fn distinct<T: PartialEq>(
        &self,
        field: Field,
        expected: &str,
        empty: &str,
        mut read: impl FnMut(&Field) -> Result<T, E>,
        shown: impl Fn(&T) -> String,
    ) -> Result<Vec<T>, E> {
        let (key, offset) = (field.key.clone(), field.offset);
        let mut values: Vec<T> = Vec::new();
        for item in self.array(field, expected)? {
            let value = read(&item)?;
            if values.contains(&value) {
                return Err(self.at(&item, format!("{} is listed twice", shown(&value))));
            }
            values.push(value);
        }
        if values.is_empty() {
            return Err(self.invalid(offset, &key, empty));
        }
        Ok(values)
    }

    /// A string.
    pub fn string(&self, field: &Field) -> Result<String, E> {
        match &field.node {
            Node::Str(s) => Ok(s.clone()),
            _ => Err(self.wrong_type(field, "a string")),
        }
    }

    /// `true` or `false`.
    pub fn bool(&self, field: &Field) -> Result<bool, E> {
        match field.node {
            Node::Bool(b) => Ok(b),
            _ => Err(self.wrong_type(field, "true or false")),
        }
    }

    /// An integer in `min..=max`.
    pub fn int_in(&self, field: &Field, min: i64, max: i64) -> Result<i64, E> {
        match field.node {
            Node::Int(v) if (min..=max).contains(&v) => Ok(v),
            Node::Int(v) => Err(self.at(field, format!("{v} is out of range {min}..={max}"))),
            _ => Err(self.wrong_type(field, "an integer")),
        }
    }

    /// An integer in `min..=max`, as a `u32`.
    pub fn u32_in(&self, field: &Field, min: u32, max: u32) -> Result<u32, E> {
        let v = self.int_in(field, min.into(), max.into())?;
        Ok(u32::try_from(v).expect("range checked"))
    }

    /// An integer in `min..=max`, as a `u16`.
    pub fn u16_in(&self, field: &Field, min: u16, max: u16) -> Result<u16, E> {
        let v = self.int_in(field, min.into(), max.into())?;
        Ok(u16::try_from(v).expect("range checked"))
    }

    /// A number, integer or float, in `min..=max`.
    pub fn f64_in(&self, field: &Field, min: f64, max: f64) -> Result<f64, E> {
        let v = match field.node {
            Node::Int(v) => v as f64,
            Node::Float(v) => v,
            _ => return Err(self.wrong_type(field, "a number")),
        };
        if v.is_finite() && (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.at(field, format!("{v} is out of range {min}..={max}")))
        }
    }

    /// A string that must be one of `choices`.
    pub fn choice<'c>(&self, field: &Field, choices: &[&'c str]) -> Result<&'c str, E> {
        let listed = format!("one of \"{}\"", choices.join("\", \""));
        let Node::Str(s) = &field.node else {
            return Err(self.wrong_type(field, &listed));
        };
        choices
            .iter()
            .copied()
            .find(|c| c == s)
            .ok_or_else(|| self.at(field, format!("expected {listed}, found {s:?}")))
    }
}
