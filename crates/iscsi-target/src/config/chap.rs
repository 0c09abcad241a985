//! The `chap` tables of the configuration: `[target.chap]` for logins to
//! one target, `[discovery.chap]` for discovery sessions (RFC 7143 §12.1.3).
//!
//! Secrets are read here, once, at startup: written in the file (`secret`)
//! or in a file of their own (`secret_file`). They live in
//! [`isoe_wire::chap::Secret`], whose `Debug` shows nothing, and no error
//! message quotes one.

use super::error::ConfigError;
use super::reader::Reader;
use isoe_config::{Field, Node, Table};
use isoe_wire::chap::{ChapAlgorithm, Secret, SECRET_MIN_BYTES};
use std::io::Read;
use std::path::Path;

/// The longest secret isoe accepts, in bytes. isoe's bound: initiators keep
/// secrets in fixed buffers (libiscsi holds 255 bytes), and a longer secret
/// adds nothing to a 256-bit hash.
pub const SECRET_MAX_BYTES: usize = 255;

/// The longest CHAP_N isoe accepts, in bytes (isoe's bound; RFC 7143
/// §12.1.3 sets none, libiscsi holds 255 bytes).
pub const USER_MAX_BYTES: usize = 255;

/// CHAP required of the initiators of a target or of discovery sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChapConfig {
    /// `user`: the CHAP_N the initiator must present.
    pub user: String,
    /// `secret` or `secret_file`: the initiator's secret.
    pub secret: Secret,
    /// `mutual_user` with `mutual_secret` or `mutual_secret_file`: the name
    /// and secret the target proves itself with when the initiator asks
    /// (mutual CHAP). Never equal to any initiator secret of the file.
    pub mutual: Option<(String, Secret)>,
    /// `algorithms`: the CHAP_A values accepted; the initiator's order
    /// decides among them (RFC 7143 §6.2.1). Never empty, no repeats.
    pub algorithms: Vec<ChapAlgorithm>,
}

/// Where a `chap` table's secrets were written, for the checks that span
/// the whole file (RFC 7143 §9.2.1: one secret, one direction).
pub(super) struct ChapPlaces {
    /// The `secret`/`secret_file` key and its offset.
    pub secret_at: Place,
    /// The `mutual_secret`/`mutual_secret_file` key and its offset.
    pub mutual_at: Option<Place>,
}

/// A key path and the byte offset where it was written.
type Place = (String, usize);

pub(super) const CHAP_KEYS: &[&str] = &[
    "user",
    "secret",
    "secret_file",
    "mutual_user",
    "mutual_secret",
    "mutual_secret_file",
    "algorithms",
];

/// The names of `algorithms` values, as written in the configuration.
pub fn algorithm_name(a: ChapAlgorithm) -> &'static str {
    a.name()
}

/// Reads one `chap` table.
pub(super) fn read_chap(r: &Reader, field: Field) -> Result<(ChapConfig, ChapPlaces), ConfigError> {
    let mut t = r.table(field, CHAP_KEYS)?;
    let user_field = r.required(
        &mut t,
        "user",
        "CHAP needs the user name (CHAP_N) the initiator logs in with",
    )?;
    let user = read_user(r, &user_field)?;
    let (secret, secret_at) =
        read_secret(r, &mut t, "secret", "secret_file")?.ok_or_else(|| {
            r.missing(
                &t,
                "secret",
                "give the initiator's CHAP secret as `secret` or `secret_file`",
            )
        })?;
    let mutual_user = t.take("mutual_user");
    let mutual_secret = read_secret(r, &mut t, "mutual_secret", "mutual_secret_file")?;
    let (mutual, mutual_at) = match (mutual_user, mutual_secret) {
        (None, None) => (None, None),
        (Some(u), Some((s, at))) => {
            let name = read_user(r, &u)?;
            if s.ct_eq(&secret) {
                return Err(r.invalid(
                    at.1,
                    &at.0,
                    "the mutual secret equals the initiator's secret; RFC 7143 §9.2.1 \
                     forbids one secret for both directions",
                ));
            }
            (Some((name, s)), Some(at))
        }
        (Some(u), None) => return Err(r.at(
            &u,
            "mutual CHAP needs the target's secret too: `mutual_secret` or `mutual_secret_file`",
        )),
        (None, Some((_, at))) => {
            return Err(r.invalid(
                at.1,
                &at.0,
                "a mutual secret needs `mutual_user`, the name the target answers with",
            ))
        }
    };
    let algorithms = match t.take("algorithms") {
        Some(f) => read_algorithms(r, f)?,
        None => ChapAlgorithm::ALL.to_vec(),
    };
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    debug_assert!(!algorithms.is_empty());
    let config = ChapConfig {
        user,
        secret,
        mutual,
        algorithms,
    };
    Ok((
        config,
        ChapPlaces {
            secret_at,
            mutual_at,
        },
    ))
}

/// A CHAP_N: 1 to [`USER_MAX_BYTES`] bytes of text without control characters.
fn read_user(r: &Reader, field: &Field) -> Result<String, ConfigError> {
    let user = r.string(field)?;
    if user.is_empty() || user.len() > USER_MAX_BYTES || user.chars().any(char::is_control) {
        return Err(r.at(
            field,
            format!("a CHAP user name is 1 to {USER_MAX_BYTES} bytes of text without control characters"),
        ));
    }
    Ok(user)
}

/// Exactly one of `inline` (the secret as a string) and `file` (a path to
/// read it from), or neither. Returns the secret and where it was written.
fn read_secret(
    r: &Reader,
    t: &mut Table,
    inline: &str,
    file: &str,
) -> Result<Option<(Secret, Place)>, ConfigError> {
    let (inline_field, file_field) = (t.take(inline), t.take(file));
    let (secret, field) = match (inline_field, file_field) {
        (None, None) => return Ok(None),
        (Some(a), Some(b)) => {
            let second = if a.offset > b.offset { a } else { b };
            return Err(r.at(
                &second,
                format!("give the secret once: `{inline}` or `{file}`, not both"),
            ));
        }
        (Some(f), None) => {
            // The value itself is never quoted back, whatever is wrong with it.
            let Node::Str(text) = &f.node else {
                return Err(r.at(&f, "expected the secret as a string"));
            };
            (Secret::new(text.as_bytes()), f)
        }
        (None, Some(f)) => {
            let path = r.path(&f)?;
            let secret = read_secret_file(&path).map_err(|why| r.at(&f, why))?;
            (secret, f)
        }
    };
    if secret.len() < SECRET_MIN_BYTES || secret.len() > SECRET_MAX_BYTES {
        return Err(r.at(
            &field,
            format!(
                "the secret has {} bytes; {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} are required \
                 (RFC 7143 §9.2.1: at least 96 bits)",
                secret.len()
            ),
        ));
    }
    Ok(Some((secret, (field.key, field.offset))))
}

/// Reads a secret file: its bytes without one trailing newline. Refused
/// when other users may read or write it, like ssh's private keys.
fn read_secret_file(path: &Path) -> Result<Secret, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o007 != 0 {
        return Err(format!(
            "{shown} is accessible to other users (mode {mode:03o}); a secret file must not \
             be: chmod o-rwx {shown}"
        ));
    }
    let mut bytes = Vec::new();
    // One byte past the limit tells "too long" from "exactly the limit".
    let limit = (SECRET_MAX_BYTES + 3) as u64;
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.truncate(bytes.len() - 1);
    }
    let secret = Secret::new(bytes);
    if secret.len() < SECRET_MIN_BYTES || secret.len() > SECRET_MAX_BYTES {
        let found = if secret.len() > SECRET_MAX_BYTES {
            "more".to_string()
        } else {
            secret.len().to_string()
        };
        return Err(format!(
            "{shown} holds {found} bytes; a secret is {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} \
             bytes (RFC 7143 §9.2.1: at least 96 bits), one trailing newline not counted"
        ));
    }
    Ok(secret)
}

/// `algorithms = ["SHA3-256", "SHA-256", "MD5"]`: names, no repeats, not empty.
fn read_algorithms(r: &Reader, field: Field) -> Result<Vec<ChapAlgorithm>, ConfigError> {
    let read_algorithm = |item: &Field| -> Result<ChapAlgorithm, ConfigError> {
        let name = r.string(item)?;
        ChapAlgorithm::ALL
            .into_iter()
            .find(|a| algorithm_name(*a) == name)
            .ok_or_else(|| {
                r.at(
                    item,
                    format!(
                        "expected \"SHA3-256\", \"SHA-256\" or \"MD5\" (CHAP_A 8, 7, 5), found {name:?}"
                    ),
                )
            })
    };
    r.distinct(
        field,
        "a list like [\"SHA3-256\", \"SHA-256\", \"MD5\"]",
        "at least one of \"SHA3-256\", \"SHA-256\" and \"MD5\" is needed",
        read_algorithm,
        |a| algorithm_name(*a).to_string(),
    )
}

/// RFC 7143 §9.2.1: a secret that authenticates initiators is never one
/// that authenticates a target, anywhere in the file.
pub(super) fn check_directions(
    r: &Reader,
    all: &[(&ChapConfig, &ChapPlaces)],
) -> Result<(), ConfigError> {
    for (a, a_at) in all {
        let (Some((_, mutual)), Some((key, offset))) = (&a.mutual, &a_at.mutual_at) else {
            continue;
        };
        if let Some((_, b_at)) = all.iter().find(|(b, _)| b.secret.ct_eq(mutual)) {
            return Err(r.invalid(
                *offset,
                key,
                format!(
                    "this target secret is also the initiator secret {} (line {}); RFC 7143 \
                     §9.2.1 forbids one secret for both directions",
                    b_at.secret_at.0,
                    r.line(b_at.secret_at.1)
                ),
            ));
        }
    }
    Ok(())
}
