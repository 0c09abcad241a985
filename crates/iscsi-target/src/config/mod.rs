//! The configuration of `isoe target --config FILE`: a TOML file an
//! administrator writes by hand, read into [`Config`].
//!
//! `examples/target.toml` at the top of the repository shows and explains
//! every key; `examples/minimal.toml` is the embedded default
//! ([`Config::embedded_default`]). What the example does not say:
//!
//! - **Sizes** follow [`isoe_size`]'s grammar, the same as `isoe bench`'s
//!   flags and `isoe lab`'s plans. A size must be positive, and a LUN's a
//!   multiple of its block size.
//! - **Relative paths** (`state_dir`, `file`, `block`, `secret_file`) start
//!   from the configuration file's directory; with no file (see
//!   [`Config::parse`]) they stay relative to the working directory.
//! - **`state_dir`** has no default without a configuration file
//!   ([`Config::state_dir`] is `None`). Besides generated LUN identities
//!   ([`crate::identity`]) it keeps the persistent reservations an initiator
//!   asked to survive a restart (APTPL), in `<target dir>/lun-<n>.pr`; with
//!   no `state_dir`, APTPL is refused.
//! - **Reading looks at the text only** (and at the CHAP secret files it
//!   names). What a LUN's store is on this machine (a file that must exist
//!   or have a `size`, a file or device of at least one block, a file whose
//!   identity record says it was provisioned, the memory LUNs against the
//!   RAM) is checked when the LUNs are provisioned, before anything is
//!   bound or applied ([`crate::provision::check_stores`]), with errors
//!   that name the file, the line and the key as the reading's do.
//! - **Portals**: port 0 (an ephemeral port) is accepted, for tests. The
//!   same ISID through another portal group is another session, and
//!   `isoe target --listen` replaces every portal and group by its portals
//!   in group 1 ([`Config::set_portals`]). See [`PortalGroup`].
//! - **Names** (target names, `allowed_initiators`) follow RFC 7143 §4.2.7
//!   and RFC 3720 §3.2.6.3, at most 223 bytes, in lower case (the form
//!   RFC 3722 normalises to: the target compares names byte for byte) and
//!   in ASCII (a-z, 0-9, `-`, `.`, `:`; RFC 3722 also allows some non-ASCII
//!   letters, isoe does not). The check is [`isoe_wire::name::validate`],
//!   the same as logins get.
//! - **Logins**: an unknown TargetName gets 0x0203 (target not found). CHAP
//!   challenges are 32 bytes from the operating system's CSPRNG, never
//!   issued twice, and a challenge of ours sent back by an initiator is
//!   refused as reflection (see [`crate::registry`]).
//! - **`[datapath]`** and **`[log]`**: see [`Datapath`], [`LogConfig`] and
//!   [`crate::log`] for the events.
//!
//! Reading stops at the first problem and reports it as a [`ConfigError`]
//! that names the file, the 1-based line and the key path, with array
//! indices counted from 0: `isoe.toml:14: target[1].lun[0].size: expected a
//! size like 4k, 256KiB or 1MiB, found "ten"`. The reading itself (lines,
//! key paths, types, unknown keys and their "did you mean" hints) is
//! [`isoe_config`]'s, shared with `isoe lab`'s plans; this module holds the
//! schema, a file per job: its types (`types.rs`, `error.rs`), the reader's
//! additions (`reader.rs`: sizes, paths), the reading table by table
//! (`parse.rs`, and a file per table with more to it: `chap.rs`, `log.rs`,
//! `portal_groups.rs`) and the checks of values (`checks.rs`).

mod chap;
mod checks;
mod error;
mod log;
mod parse;
mod places;
mod portal_groups;
mod reader;
mod types;

pub use chap::{algorithm_name, ChapConfig, SECRET_MAX_BYTES, USER_MAX_BYTES};
pub(crate) use checks::{parse_naa, show_bytes};
pub use error::{file_label, ConfigError};
pub use log::{LogConfig, LogFormat, LogLevel};
pub use places::{KeyPlace, PortalPlaces, StorePlaces};
pub use portal_groups::{PortalGroup, DEFAULT_PORT, DEFAULT_PORTAL_GROUP_TAG};
pub use types::{
    default_control_socket, Config, Control, Datapath, DigestChoice, Discovery, Limits, LunSpec,
    Metrics, Params, StoreSpec, TargetConfig, DEFAULT_IO_THREADS, DEFAULT_TARGET_NAME,
    LOGIN_DEADLINE, MAX_CONNECTIONS, MAX_LENGTH_BYTES, MAX_LUN_NUMBER, MAX_NOP_IN_S,
    MEMORY_LUN_MAX_BYTES, MIN_LENGTH_BYTES, THREADS_MAX,
};
