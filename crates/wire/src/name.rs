//! iSCSI names (RFC 7143 §4.2.7, RFC 3720 §3.2.6.3, RFC 3722), and text
//! made safe for a log line.
//!
//! An iSCSI name has one of three forms, and at most [`NAME_MAX_BYTES`]:
//!
//! - `iqn.` + a date `yyyy-mm` + `.` + a reversed domain name, optionally
//!   followed by `:` and anything the naming authority chooses:
//!   `iqn.2001-04.com.example:storage:diskarrays-sn-a8675309`;
//! - `eui.` + 16 hex digits (an EUI-64): `eui.02004567a425678d`;
//! - `naa.` + 16 or 32 hex digits (an NAA identifier): `naa.52004567ba64678d`.
//!
//! Names travel already normalised by the stringprep profile of RFC 3722,
//! which folds case, so they hold lower-case letters, digits, `-`, `.` and
//! `:`, and the non-ASCII letters the profile allows. isoe accepts only the
//! ASCII subset: a name with any non-ASCII character is refused with a
//! message that says so, as is one with an upper-case letter (a login
//! lets upper-case ASCII pass, see `login.rs`). Names are then compared
//! byte for byte.

use std::borrow::Cow;
use std::fmt;

/// RFC 7143 §4.2.7.1: an iSCSI name is at most 223 bytes.
pub const NAME_MAX_BYTES: usize = 223;

/// Why a string is not an iSCSI name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// Nothing at all.
    #[error("an iSCSI name cannot be empty")]
    Empty,
    /// More than [`NAME_MAX_BYTES`].
    #[error("an iSCSI name is at most {NAME_MAX_BYTES} bytes, this one has {len}")]
    TooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// A character no name holds after RFC 3722's normalisation, or that
    /// isoe does not accept (non-ASCII).
    #[error("{}", BadCharacter { byte_offset: *byte_offset, character: *character })]
    BadCharacter {
        /// Where the character starts, in bytes from the name's start.
        byte_offset: usize,
        /// The character.
        character: char,
    },
    /// Neither `iqn.`, `eui.` nor `naa.`.
    #[error(
        "expected an iSCSI name: iqn.yyyy-mm.reversed.domain[:id], \
         eui. and 16 hex digits, or naa. and 16 or 32 hex digits"
    )]
    BadPrefix,
    /// The part after the prefix does not have that form's shape.
    #[error("{why}")]
    BadForm {
        /// What the form asks for.
        why: &'static str,
    },
}

/// The message of [`NameError::BadCharacter`].
struct BadCharacter {
    byte_offset: usize,
    character: char,
}

impl fmt::Display for BadCharacter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = String::new();
        push_escaped(&mut shown, self.character);
        let why = if self.character.is_ascii_uppercase() {
            "iSCSI names are lower case (RFC 3722 folds case)"
        } else if !self.character.is_ascii() {
            "isoe accepts only ASCII in iSCSI names: a-z, 0-9, '-', '.' and ':'"
        } else {
            "an iSCSI name holds only a-z, 0-9, '-', '.' and ':' (RFC 7143 §4.2.7)"
        };
        write!(f, "character '{shown}' at byte {}: {why}", self.byte_offset)
    }
}

/// Checks that `name` is an iSCSI name in the ASCII subset isoe accepts
/// (see the module documentation); the error says what is wrong first:
/// emptiness, length, a character, the prefix, then the form.
pub fn validate(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > NAME_MAX_BYTES {
        return Err(NameError::TooLong { len: name.len() });
    }
    if let Some((byte_offset, character)) = name
        .char_indices()
        .find(|&(_, c)| !matches!(c, 'a'..='z' | '0'..='9' | '-' | '.' | ':'))
    {
        return Err(NameError::BadCharacter {
            byte_offset,
            character,
        });
    }
    let hex = |digits: &str, lengths: &[usize]| {
        lengths.contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let form_error = |why| Err(NameError::BadForm { why });
    if let Some(digits) = name.strip_prefix("eui.") {
        return if hex(digits, &[16]) {
            Ok(())
        } else {
            form_error("eui. is followed by 16 hex digits")
        };
    }
    if let Some(digits) = name.strip_prefix("naa.") {
        return if hex(digits, &[16, 32]) {
            Ok(())
        } else {
            form_error("naa. is followed by 16 or 32 hex digits")
        };
    }
    match name.strip_prefix("iqn.") {
        Some(rest) => check_iqn(rest).or_else(form_error),
        None => Err(NameError::BadPrefix),
    }
}

/// The part of an `iqn.` name after `iqn.`: `yyyy-mm.authority[:unique]`,
/// its characters already checked.
fn check_iqn(rest: &str) -> Result<(), &'static str> {
    let date_error = "iqn. is followed by a date yyyy-mm (iqn.2001-04.com.example)";
    let date = rest.get(..7).ok_or(date_error)?;
    let (year, dash, month) = (&date[..4], &date[4..5], &date[5..]);
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(year) || dash != "-" || !digits(month) || !("01"..="12").contains(&month) {
        return Err(date_error);
    }
    let authority_and_unique = rest[7..].strip_prefix('.').ok_or(
        "the date is followed by '.' and a reversed domain name (iqn.2001-04.com.example)",
    )?;
    let authority = authority_and_unique
        .split_once(':')
        .map_or(authority_and_unique, |(authority, _)| authority);
    if authority.split('.').any(str::is_empty) {
        return Err(
            "the naming authority is a reversed domain name: labels of a-z, 0-9 and '-' \
             separated by single dots",
        );
    }
    Ok(())
}

/// Whether `c` would disturb a log line or hide what follows it: control
/// characters (C0, DEL, C1, which include newline, ESC and NUL), line and
/// paragraph separators, and the invisible format characters that reorder
/// or hide text (bidirectional overrides and isolates, zero-width
/// characters, the byte order mark).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}')
}

/// Appends `c`, escaped if [`needs_escape`] says so, the way Rust's
/// `char::escape_default` writes it: `\n`, `\r`, `\t`, else `\u{N}` in hex
/// (`\u{1b}` for ESC, `\u{0}` for NUL).
fn push_escaped(out: &mut String, c: char) {
    if !needs_escape(c) {
        out.push(c);
        return;
    }
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
    }
}

/// `text` fit for one log line: every control character and every
/// invisible character that could fake or hide log content is replaced by
/// a visible escape (`\n`, `\u{1b}`, `\u{0}`, `\u{202e}`, ...). Everything else,
/// non-ASCII letters included, is kept; text with nothing to escape is
/// returned as it is, without a copy. Meant for what peers send (names,
/// keys, values); the escapes are for reading, not for undoing.
pub fn escape_for_log(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_are_names() {
        for good in [
            "iqn.2026-11.io.isoe:db",
            "iqn.1994-05.com.redhat:client1",
            "iqn.2001-04.com.example",
            "iqn.2001-04.com.example:storage:diskarrays-sn-a8675309",
            "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test",
            "iqn.2026-11.io.isoe:a..b::c-",
            "eui.02004567a425678d",
            "naa.52004567ba64678d",
            "naa.52004567ba64678d52004567ba64678d",
        ] {
            assert_eq!(validate(good), Ok(()), "{good}");
        }
        let longest = format!("iqn.2026-11.io.isoe:{}", "a".repeat(223 - 20));
        assert_eq!(longest.len(), NAME_MAX_BYTES);
        assert_eq!(validate(&longest), Ok(()));
    }

    #[test]
    fn each_error_is_specific() {
        assert_eq!(validate(""), Err(NameError::Empty));
        let long = format!("iqn.2026-11.io.isoe:{}", "a".repeat(204));
        assert_eq!(validate(&long), Err(NameError::TooLong { len: 224 }));
        assert_eq!(validate("target0"), Err(NameError::BadPrefix));
        assert_eq!(validate("iqn"), Err(NameError::BadPrefix));
        let bad = |byte_offset, character| {
            Err(NameError::BadCharacter {
                byte_offset,
                character,
            })
        };
        assert_eq!(validate("iqn.2026-11.io.isoe:DB"), bad(20, 'D'));
        assert_eq!(validate("iqn.2026-11.io.is_oe"), bad(17, '_'));
        assert_eq!(validate("iqn.2026-11.io.isoe:a b"), bad(21, ' '));
        assert_eq!(validate("iqn.2026-11.io.isoe:caf\u{e9}"), bad(23, '\u{e9}'));
        assert_eq!(validate("iqn.2026-11.io.isoe:x\ny"), bad(21, '\n'));
        assert_eq!(validate("IQN.2026-11.io.isoe"), bad(0, 'I'));
        let form = |name| match validate(name) {
            Err(NameError::BadForm { why }) => why,
            other => panic!("{name}: {other:?}"),
        };
        for (name, needle) in [
            ("iqn.2026.io.isoe", "yyyy-mm"),
            ("iqn.2026-13.io.isoe", "yyyy-mm"),
            ("iqn.2026-00.io.isoe", "yyyy-mm"),
            ("iqn.2026-1", "yyyy-mm"),
            ("iqn.2026-11", "reversed domain"),
            ("iqn.2026-11:db", "reversed domain"),
            ("iqn.2026-11.", "reversed domain"),
            ("iqn.2026-11.io..isoe", "reversed domain"),
            ("iqn.2026-11.io.isoe.:db", "reversed domain"),
            ("iqn.2026-11.:db", "reversed domain"),
            ("eui.0200", "16 hex digits"),
            ("eui.02004567a425678d00", "16 hex digits"),
            ("eui.", "16 hex digits"),
            ("naa.123", "16 or 32 hex digits"),
            ("naa.52004567ba64678g", "16 or 32 hex digits"),
        ] {
            assert!(form(name).contains(needle), "{name}: {}", form(name));
        }
    }

    #[test]
    fn messages_name_the_character_escaped_and_its_place() {
        let shown = |name| validate(name).unwrap_err().to_string();
        assert_eq!(
            shown("iqn.2026-11.io.isoe:DB"),
            "character 'D' at byte 20: iSCSI names are lower case (RFC 3722 folds case)"
        );
        assert!(
            shown("iqn.2026-11.io.isoe:x\u{1b}[2J").starts_with("character '\\u{1b}' at byte 21:")
        );
        assert!(shown("iqn.2026-11.io.isoe:\0").starts_with("character '\\u{0}' at byte 20:"));
        assert!(shown("iqn.2026-11.io.isoe:caf\u{e9}").contains("only ASCII"));
        assert!(shown("iqn.2026-11.io.isoe:a/b").contains("only a-z, 0-9, '-', '.' and ':'"));
        assert!(shown("db").starts_with("expected an iSCSI name"));
        assert!(shown(&"a".repeat(300)).contains("at most 223 bytes, this one has 300"));
    }

    #[test]
    fn log_escaping_makes_controls_visible_and_keeps_the_rest() {
        assert!(matches!(
            escape_for_log("iqn.2026-11.io.isoe:db caf\u{e9}"),
            Cow::Borrowed("iqn.2026-11.io.isoe:db caf\u{e9}")
        ));
        assert_eq!(escape_for_log("a\nisoe: fake line"), "a\\nisoe: fake line");
        assert_eq!(escape_for_log("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape_for_log("nul\0byte"), "nul\\u{0}byte");
        assert_eq!(escape_for_log("\r\t\u{7f}"), "\\r\\t\\u{7f}");
        assert_eq!(escape_for_log("c1\u{85}"), "c1\\u{85}");
        assert_eq!(escape_for_log("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape_for_log("\u{feff}x\u{200b}"), "\\u{feff}x\\u{200b}");
        // Control characters come out as Rust's char::escape_default writes them.
        let forged = "iqn.x\nisoe: login accepted\u{1b}[2J\0\u{7f}\u{85}\t";
        let expected: String = forged
            .chars()
            .map(|c| match c.is_control() {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            })
            .collect();
        assert_eq!(escape_for_log(forged), expected);
        let escaped = escape_for_log("\n\u{1b}\0\u{2028}");
        assert!(!escaped.chars().any(needs_escape), "{escaped}");
    }
}
