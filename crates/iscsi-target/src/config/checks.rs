//! The checks of values that the reading itself makes, which look at
//! nothing but the text: iSCSI names, NAA designators, the largest memory
//! LUN. What a LUN's store is on the disk or in RAM is checked when the
//! LUNs are provisioned ([`crate::provision::check_stores`]).

use super::types::MEMORY_LUN_MAX_BYTES;

/// Why a memory LUN of `size_bytes` is refused whatever the machine's RAM
/// and `overcommit`, if it is.
pub(super) fn memory_lun_too_large(size_bytes: u64) -> Option<String> {
    (size_bytes > MEMORY_LUN_MAX_BYTES).then(|| {
        format!(
            "a memory LUN is at most {} (its chunk table alone would take {}), \
             this one is {}",
            show_bytes(MEMORY_LUN_MAX_BYTES),
            show_bytes(MEMORY_LUN_MAX_BYTES >> 14),
            show_bytes(size_bytes)
        )
    })
}

/// `bytes` for a message: exact in the largest power-of-1024 unit that
/// divides it, else to a tenth of the largest unit it reaches.
pub(crate) fn show_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let Some(power) = (1..=UNITS.len()).rev().find(|p| bytes >> (10 * p) > 0) else {
        return format!("{bytes} bytes");
    };
    let unit = 1u64 << (10 * power);
    let name = UNITS[power - 1];
    if bytes.is_multiple_of(unit) {
        format!("{} {name}", bytes / unit)
    } else {
        format!("{:.1} {name}", bytes as f64 / unit as f64)
    }
}

/// Parses a configured NAA designator: 32 hex digits, optionally after `0x`,
/// whose first digit is the NAA type, 6 (IEEE Registered Extended, SPC-4 7.8.6.6.5).
pub(crate) fn parse_naa(text: &str) -> Result<[u8; 16], String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let expected = "expected 32 hex digits of an NAA type 6 designator \
                    like \"0x6001405abcdef0123456789abcdef012\"";
    if digits.len() != 32 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{expected}, found {text:?}"));
    }
    let value =
        u128::from_str_radix(digits, 16).map_err(|_| format!("{expected}, found {text:?}"))?;
    if value >> 124 != 6 {
        return Err(format!(
            "NAA type {} is not supported; the first hex digit must be 6",
            value >> 124
        ));
    }
    Ok(value.to_be_bytes())
}

/// Checks an iSCSI name with [`isoe_wire::name::validate`]; the message
/// quotes the name, and for a name that is only wrong in case, gives the
/// lower-case form to write instead.
pub(crate) fn check_iscsi_name(name: &str) -> Result<(), String> {
    let error = match isoe_wire::name::validate(name) {
        Ok(()) => return Ok(()),
        Err(error) => error,
    };
    let lower = name.to_ascii_lowercase();
    if lower != name && isoe_wire::name::validate(&lower).is_ok() {
        return Err(format!("{error}; write {lower:?}"));
    }
    Err(format!("{error}, found {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_by_the_wire_validator_with_the_name_quoted() {
        assert_eq!(check_iscsi_name("iqn.2026-11.io.isoe:db"), Ok(()));
        assert_eq!(check_iscsi_name("eui.02004567a425678d"), Ok(()));
        assert_eq!(
            check_iscsi_name("iqn.2026-11.io.isoe:DB").unwrap_err(),
            "character 'D' at byte 20: iSCSI names are lower case (RFC 3722 folds case); \
             write \"iqn.2026-11.io.isoe:db\""
        );
        assert_eq!(
            check_iscsi_name("db").unwrap_err(),
            "expected an iSCSI name: iqn.yyyy-mm.reversed.domain[:id], eui. and 16 hex \
             digits, or naa. and 16 or 32 hex digits, found \"db\""
        );
        // Upper case and something else: no suggestion that would fail too.
        assert!(check_iscsi_name("IQN.2026-11.io.is_oe")
            .unwrap_err()
            .ends_with("found \"IQN.2026-11.io.is_oe\""));
        assert!(check_iscsi_name("iqn.2026-11.io.isoe:a\u{1b}b")
            .unwrap_err()
            .contains("'\\u{1b}' at byte 21"));
    }

    #[test]
    fn sizes_in_messages_are_short_and_exact_when_whole() {
        assert_eq!(show_bytes(0), "0 bytes");
        assert_eq!(show_bytes(1000), "1000 bytes");
        assert_eq!(show_bytes(4096), "4 KiB");
        assert_eq!(show_bytes(1 << 44), "16 TiB");
        assert_eq!(show_bytes(3 << 29), "1.5 GiB");
        assert_eq!(show_bytes(24_683_656 * 1024), "23.5 GiB");
        assert_eq!(show_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn naa_is_type_6() {
        let naa = parse_naa("0x6001405abcdef0123456789abcdef012").unwrap();
        assert_eq!(naa[0], 0x60);
        assert_eq!(naa[15], 0x12);
        assert_eq!(parse_naa("6001405ABCDEF0123456789ABCDEF012"), Ok(naa));
        assert!(parse_naa("0x5001405abcdef0123456789abcdef012")
            .unwrap_err()
            .contains("type 5"));
        assert!(parse_naa("0x6001405abcdef0").is_err());
        assert!(parse_naa("0x6001405abcdef0123456789abcdef01g").is_err());
    }

    #[test]
    fn the_largest_memory_lun_is_16_tib() {
        assert_eq!(memory_lun_too_large(MEMORY_LUN_MAX_BYTES), None);
        assert!(memory_lun_too_large(MEMORY_LUN_MAX_BYTES + 512)
            .is_some_and(|m| m.starts_with("a memory LUN is at most 16 TiB")));
    }
}
