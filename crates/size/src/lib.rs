//! isoe-size: the one grammar for sizes in bytes, shared by `isoe bench`'s
//! flags (`--bs 4k`), `isoe lab` plan files (`bs = "4k"`) and `isoe target`
//! configurations (`size = "10GiB"`), so that `4k`, `4KiB` and `4KB` mean
//! the same everywhere.
//!
//! # Grammar
//!
//! A size is digits, an optional fraction (`.` and digits), optional white
//! space, and an optional unit; white space around it is ignored. The unit is
//! case-insensitive, and every multiple is a power of 1024, as in LIO, tgt and
//! fio: `k`, `K`, `Ki`, `KiB` and `KB` all mean 1024 bytes.
//!
//! | unit | bytes |
//! | --- | --- |
//! | none, `B` | 1 |
//! | `K` `KB` `Ki` `KiB` | 1024 |
//! | `M` `MB` `Mi` `MiB` | 1024² |
//! | `G` `GB` `Gi` `GiB` | 1024³ |
//! | `T` `TB` `Ti` `TiB` | 1024⁴ |
//! | `P` `PB` `Pi` `PiB` | 1024⁵ |
//! | `E` `EB` `Ei` `EiB` | 1024⁶ |
//!
//! So `4k`, `4 KiB`, `4KB`, `4096B` and `4096` are 4096 bytes, and `1.5KiB`
//! is 1536. Refused: an empty text, a negative number, a fraction that does
//! not come to a whole number of bytes (`0.3B`, `1.0000001KiB`), 2^64 bytes
//! (16 EiB) or more, and anything else (`1e9`, `1_000`, `.5K`, `12x`).
//! Zero is a size; callers that need a positive one (a LUN) check that
//! themselves, as they check their other limits.
//!
//! The units and the arithmetic are the `parse-size` crate's, configured for
//! powers of 1024. This crate narrows its input to the grammar above and
//! refuses what it would round.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use parse_size::Config;

/// Why a text is not a size. Every message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// The text is empty or only white space.
    #[error("expected a size like 4k, 256KiB or 1MiB, found {text:?}")]
    Empty {
        /// The text as given.
        text: String,
    },
    /// The text starts with a minus sign.
    #[error("a size cannot be negative, found {text:?}")]
    Negative {
        /// The text as given.
        text: String,
    },
    /// The text is not digits, an optional fraction and an optional unit.
    #[error("expected a size like 4k, 256KiB or 1MiB, found {text:?}")]
    Invalid {
        /// The text as given.
        text: String,
    },
    /// The fraction does not come to a whole number of bytes (`0.3B`).
    #[error("{text:?} is not a whole number of bytes")]
    NotWholeBytes {
        /// The text as given.
        text: String,
    },
    /// The size is 2^64 bytes (16 EiB) or more.
    #[error("{text:?} is too large: a size is less than 16EiB (2^64 bytes)")]
    TooLarge {
        /// The text as given.
        text: String,
    },
}

/// `parse-size` with every multiple a power of 1024 (`KB` = `KiB` = 1024).
const BINARY: Config = Config::new().with_binary();

/// Parses a size (see the crate doc for the grammar) into bytes.
///
/// ```
/// assert_eq!(isoe_size::parse_bytes("4k"), Ok(4096));
/// assert_eq!(isoe_size::parse_bytes("1.5 MiB"), Ok(3 << 19));
/// assert!(isoe_size::parse_bytes("12x").is_err());
/// ```
///
/// # Errors
///
/// A [`SizeError`] for a text that is not a size, or is a negative,
/// fractional or too large one.
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let owned = || text.to_string();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(SizeError::Empty { text: owned() });
    }
    if trimmed.starts_with('-') {
        return Err(SizeError::Negative { text: owned() });
    }
    let number_end = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(trimmed.len());
    let (number, rest) = trimmed.split_at(number_end);
    let unit = rest.trim_start();
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // parse-size also takes `_` and spaces between digits, exponents (`1e9`)
    // and a bare binary marker as a unit (`4iB` = 4): none of them is a size
    // here.
    if !digits(whole)
        || fraction.is_some_and(|f| !digits(f))
        || !unit.bytes().all(|b| b.is_ascii_alphabetic())
        || unit.starts_with(['i', 'I'])
    {
        return Err(SizeError::Invalid { text: owned() });
    }
    let parse = |s: &str| {
        BINARY.parse_size(s).map_err(|e| match e {
            parse_size::Error::PosOverflow => SizeError::TooLarge { text: owned() },
            _ => SizeError::Invalid { text: owned() },
        })
    };
    let Some(fraction) = fraction else {
        return parse(&format!("{whole}{unit}"));
    };
    // parse-size rounds a fraction to the nearest byte and keeps only the
    // digits that fit in 64 bits; a size must be exact, so a fractional one
    // is computed here from its digits, with parse-size's unit.
    let unit_bytes = parse(&format!("1{unit}"))?;
    let whole = parse(whole)?;
    let part = fraction_bytes(fraction, unit_bytes.trailing_zeros())
        .ok_or_else(|| SizeError::NotWholeBytes { text: owned() })?;
    whole
        .checked_mul(unit_bytes)
        .and_then(|w| w.checked_add(part))
        .ok_or_else(|| SizeError::TooLarge { text: owned() })
}

/// `0.fraction × 2^shift` when that is a whole number, exactly: the decimal
/// fraction is doubled `shift` times, each carry out of it going to the
/// whole part, and the size is whole when no fraction digit is left.
/// `shift` is at most 60 (EiB), so the whole part stays below 2^60.
fn fraction_bytes(fraction: &str, shift: u32) -> Option<u64> {
    let mut digits: Vec<u8> = fraction.bytes().map(|b| b - b'0').collect();
    let mut whole = 0u64;
    for _ in 0..shift {
        let mut carry = 0;
        for d in digits.iter_mut().rev() {
            let doubled = *d * 2 + carry;
            *d = doubled % 10;
            carry = doubled / 10;
        }
        whole = whole * 2 + u64::from(carry);
    }
    digits.iter().all(|&d| d == 0).then_some(whole)
}

/// `bytes` as an administrator reads it back: the exact count, and the
/// largest power-of-1024 unit that divides it (`268435456 bytes (256 MiB)`),
/// or one decimal of the largest that fits (`1610612737 bytes (1.5 GiB)`).
///
/// ```
/// assert_eq!(isoe_size::describe_bytes(256 << 20), "268435456 bytes (256 MiB)");
/// assert_eq!(isoe_size::describe_bytes(1000), "1000 bytes");
/// ```
pub fn describe_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let Some(power) = (1..=UNITS.len() as u32)
        .rev()
        .find(|p| bytes >= 1u64 << (10 * p))
    else {
        return format!("{bytes} bytes");
    };
    let unit = UNITS[power as usize - 1];
    let scale = 1u64 << (10 * power);
    if bytes.is_multiple_of(scale) {
        format!("{bytes} bytes ({} {unit})", bytes / scale)
    } else {
        format!("{bytes} bytes ({:.1} {unit})", bytes as f64 / scale as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_k_is_written_many_ways() {
        for text in [
            "4k", "4K", "4KiB", "4KB", "4 KiB", "4096", "4096B", "4kib", "4Ki", " 4k ", "4.0k",
            "4\tKiB",
        ] {
            assert_eq!(parse_bytes(text), Ok(4096), "{text:?}");
        }
    }

    #[test]
    fn every_unit_is_a_power_of_1024() {
        assert_eq!(parse_bytes("1MiB"), Ok(1_048_576));
        assert_eq!(parse_bytes("1m"), Ok(1_048_576));
        assert_eq!(parse_bytes("1MB"), Ok(1_048_576));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_bytes("1GB"), Ok(1 << 30));
        assert_eq!(parse_bytes("2TiB"), Ok(2 << 40));
        assert_eq!(parse_bytes("3pb"), Ok(3 << 50));
        assert_eq!(parse_bytes("15EiB"), Ok(15 << 60));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn fractions_that_come_to_whole_bytes() {
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("1.5TiB"), Ok(3 << 39));
        assert_eq!(parse_bytes("0.25 g"), Ok(1 << 28));
        assert_eq!(parse_bytes("2.000B"), Ok(2));
        assert_eq!(parse_bytes("0.0009765625KiB"), Ok(1));
        // 2^60 + 1 bytes: more digits than parse-size keeps, exact all the same.
        assert_eq!(
            parse_bytes("1.000000000000000000867361737988403547205962240695953369140625EiB"),
            Ok((1 << 60) + 1)
        );
        assert_eq!(
            parse_bytes("15.999999999999999999132638262011596452794037759304046630859375EiB"),
            Ok(u64::MAX)
        );
    }

    fn refused(text: &str) -> SizeError {
        let err = parse_bytes(text).expect_err(text);
        let shown = err.to_string();
        assert!(shown.contains(&format!("{text:?}")), "{shown}");
        err
    }

    #[test]
    fn refusals_quote_the_text() {
        assert!(matches!(refused("0.3B"), SizeError::NotWholeBytes { .. }));
        assert!(matches!(
            refused("1.0000001KiB"),
            SizeError::NotWholeBytes { .. }
        ));
        assert!(matches!(
            refused("0.00048828125KiB"),
            SizeError::NotWholeBytes { .. }
        ));
        assert!(matches!(refused("abc"), SizeError::Invalid { .. }));
        assert!(matches!(refused(""), SizeError::Empty { .. }));
        assert!(matches!(refused("  "), SizeError::Empty { .. }));
        assert!(matches!(refused("-1"), SizeError::Negative { .. }));
        assert!(matches!(refused("99999EiB"), SizeError::TooLarge { .. }));
        assert!(matches!(refused("16EiB"), SizeError::TooLarge { .. }));
        assert!(matches!(
            refused("18446744073709551616"),
            SizeError::TooLarge { .. }
        ));
        assert!(matches!(
            refused("15.99999999999999999999EiB"),
            SizeError::NotWholeBytes { .. }
        ));
        assert!(matches!(refused("16.0EiB"), SizeError::TooLarge { .. }));
        for bad in [
            "12x", "GiB", "1.GiB", ".5GiB", "1.2.3GiB", "1e9", "1_000", "1 000", "+1", "4iB", "4i",
            "1KiBB", "1Bi", "1ZiB", "1 k i b", "4k!",
        ] {
            assert!(matches!(refused(bad), SizeError::Invalid { .. }), "{bad:?}");
        }
        assert_eq!(
            refused("12x").to_string(),
            "expected a size like 4k, 256KiB or 1MiB, found \"12x\""
        );
    }

    #[test]
    fn described_sizes_name_the_bytes_and_a_binary_unit() {
        assert_eq!(describe_bytes(0), "0 bytes");
        assert_eq!(describe_bytes(1023), "1023 bytes");
        assert_eq!(describe_bytes(4096), "4096 bytes (4 KiB)");
        assert_eq!(describe_bytes(256 << 30), "274877906944 bytes (256 GiB)");
        assert_eq!(describe_bytes((3 << 29) + 1), "1610612737 bytes (1.5 GiB)");
        assert_eq!(
            describe_bytes(u64::MAX),
            "18446744073709551615 bytes (16.0 EiB)"
        );
    }
}
