//! isoe-config: the one reader of the TOML files people write for isoe,
//! `isoe target`'s configuration and `isoe lab`'s plans, so that both point
//! at a problem the same way: the file, the 1-based line, the key path with
//! array indices from 0, and what is wrong,
//! `isoe.toml:14: target[1].lun[0].size: expected a size like 4k, 256KiB or
//! 1MiB, found "ten"`.
//!
//! The crate knows no schema; each schema keeps its own code and its own
//! public error type. What it gives them:
//!
//! - [`Node`]: the document as a tree that remembers where every key (and
//!   every array element) was written;
//! - [`Table`] and [`Field`]: the schema takes a table's fields out one by
//!   one, each with its key path ([`join_key`]) and position;
//! - [`Reader`]: turns positions into lines and fields into typed values, or
//!   into the schema's error through [`ReadError`]: [`FileError`], the one
//!   error every file gives (read, syntax, invalid key), or a schema's own
//!   that wraps it ([`impl_read_error!`]);
//!   refuses unknown keys with a hint at the key that was probably meant
//!   ([`closest`]), missing keys, and lists with a value twice.
//!
//! ```
//! use isoe_config::{ReadError, Reader};
//!
//! #[derive(Debug)]
//! struct Problem(String);
//!
//! impl ReadError for Problem {
//!     fn syntax(file: String, line: usize, column: usize, message: String) -> Self {
//!         Problem(format!("{file}:{line}:{column}: {message}"))
//!     }
//!     fn invalid(file: String, line: usize, key: String, message: String) -> Self {
//!         Problem(format!("{file}:{line}: {key}: {message}"))
//!     }
//! }
//!
//! let text = "[[disk]]\nsize = 1\n[[disk]]\nsise = 2\n";
//! let r: Reader<Problem> = Reader::new(text, "disks.toml");
//! let mut root = r.root(text)?;
//! r.deny_unknown(&root, &["disk"])?;
//! let disks = r.tables(root.take("disk").expect("written"), &["size"]);
//! assert_eq!(
//!     disks.unwrap_err().0,
//!     "disks.toml:4: disk[1].sise: unknown key (did you mean `size`?); expected one of: size"
//! );
//! # Ok::<(), Problem>(())
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod error;
mod hint;
mod reader;
mod tree;

pub use error::FileError;
pub use hint::closest;
pub use reader::{join_key, Field, ReadError, Reader, Table};
pub use toml::Spanned;
pub use tree::Node;
