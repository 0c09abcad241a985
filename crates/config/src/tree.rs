//! The document as a tree that keeps the position of every key, so that
//! every error can name its line. A table's values carry their key's
//! position; array elements carry their own.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use toml::Spanned;

/// One TOML value, with the positions of what it contains.
#[derive(Debug)]
pub enum Node {
    /// A table (`[name]`, an inline table, or the document): its entries in
    /// file order, each key with the byte span where it was written.
    Table(Vec<(Spanned<String>, Node)>),
    /// An array, or an array of tables (`[[name]]`): each element with its
    /// own byte span.
    Array(Vec<Spanned<Node>>),
    /// A string.
    Str(String),
    /// An integer; TOML's are 64-bit signed.
    Int(i64),
    /// A float.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A date or time. No isoe key takes one; it is kept only so that the
    /// error can say what was found.
    Datetime,
}

impl Node {
    /// A short description for "expected X, found Y" messages: the kind of
    /// value, and the value itself unless it is a table or an array (a
    /// string cut at 40 characters).
    pub fn describe(&self) -> String {
        match self {
            Node::Table(_) => "a table".to_string(),
            Node::Array(_) => "an array".to_string(),
            Node::Str(s) if s.chars().count() > 40 => {
                format!("a string ({:?}...)", s.chars().take(40).collect::<String>())
            }
            Node::Str(s) => format!("a string ({s:?})"),
            Node::Int(v) => format!("an integer ({v})"),
            Node::Float(v) => format!("a float ({v})"),
            Node::Bool(v) => format!("a boolean ({v})"),
            Node::Datetime => "a date/time".to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any TOML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Node, E> {
        i64::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        loop {
            // The toml crate presents a datetime as a one-entry map whose
            // private key carries no span: the only key that fails to load.
            let key = match map.next_key::<Spanned<String>>() {
                Ok(Some(key)) => key,
                Ok(None) => break,
                Err(_) if entries.is_empty() => return Ok(Node::Datetime),
                Err(e) => return Err(e),
            };
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Node::Table(entries))
    }
}
