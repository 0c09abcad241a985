//! Sense data in words, as SPC-5 names it (table 51 for the keys, Annex D
//! for the additional sense codes): what a storage administrator searches
//! for, e.g. `ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (05/25/00)`.

/// The additional sense codes an initiator meets on I/O, and the ones
/// isoe's target sends; others are shown by number.
const ASC_NAMES: &[(u8, u8, &str)] = &[
    (0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION"),
    (0x00, 0x16, "OPERATION IN PROGRESS"),
    (0x04, 0x00, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE"),
    (0x04, 0x01, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY"),
    (
        0x04,
        0x02,
        "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED",
    ),
    (
        0x04,
        0x03,
        "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED",
    ),
    (
        0x04,
        0x0a,
        "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION",
    ),
    (
        0x04,
        0x0b,
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE",
    ),
    (
        0x04,
        0x0c,
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE",
    ),
    (0x04, 0x12, "LOGICAL UNIT NOT READY, OFFLINE"),
    (0x04, 0x1b, "LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS"),
    (0x08, 0x01, "LOGICAL UNIT COMMUNICATION TIME-OUT"),
    (0x0c, 0x00, "WRITE ERROR"),
    (0x0e, 0x03, "INVALID FIELD IN COMMAND INFORMATION UNIT"),
    (0x11, 0x00, "UNRECOVERED READ ERROR"),
    (0x1a, 0x00, "PARAMETER LIST LENGTH ERROR"),
    (0x1d, 0x00, "MISCOMPARE DURING VERIFY OPERATION"),
    (0x20, 0x00, "INVALID COMMAND OPERATION CODE"),
    (0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE"),
    (0x24, 0x00, "INVALID FIELD IN CDB"),
    (0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED"),
    (0x26, 0x00, "INVALID FIELD IN PARAMETER LIST"),
    (0x27, 0x00, "WRITE PROTECTED"),
    (0x27, 0x02, "LOGICAL UNIT SOFTWARE WRITE PROTECTED"),
    (0x27, 0x07, "SPACE ALLOCATION FAILED WRITE PROTECT"),
    (
        0x28,
        0x00,
        "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED",
    ),
    (0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"),
    (0x29, 0x07, "I_T NEXUS LOSS OCCURRED"),
    (0x2a, 0x01, "MODE PARAMETERS CHANGED"),
    (0x2a, 0x03, "RESERVATIONS PREEMPTED"),
    (0x2a, 0x06, "ASYMMETRIC ACCESS STATE CHANGED"),
    (0x2a, 0x09, "CAPACITY DATA HAS CHANGED"),
    (0x2c, 0x00, "COMMAND SEQUENCE ERROR"),
    (0x31, 0x03, "SANITIZE COMMAND FAILED"),
    (0x39, 0x00, "SAVING PARAMETERS NOT SUPPORTED"),
    (0x3a, 0x00, "MEDIUM NOT PRESENT"),
    (0x3e, 0x02, "TIMEOUT ON LOGICAL UNIT"),
    (0x3f, 0x03, "INQUIRY DATA HAS CHANGED"),
    (0x3f, 0x0e, "REPORTED LUNS DATA HAS CHANGED"),
    (0x44, 0x00, "INTERNAL TARGET FAILURE"),
    (0x4b, 0x00, "DATA PHASE ERROR"),
    (0x55, 0x03, "INSUFFICIENT RESOURCES"),
];

/// The sense key's name (SPC-5 table 51).
pub fn sense_key_name(key: u8) -> &'static str {
    const NAMES: [&str; 16] = [
        "NO SENSE",
        "RECOVERED ERROR",
        "NOT READY",
        "MEDIUM ERROR",
        "HARDWARE ERROR",
        "ILLEGAL REQUEST",
        "UNIT ATTENTION",
        "DATA PROTECT",
        "BLANK CHECK",
        "VENDOR SPECIFIC",
        "COPY ABORTED",
        "ABORTED COMMAND",
        "RESERVED",
        "VOLUME OVERFLOW",
        "MISCOMPARE",
        "COMPLETED",
    ];
    NAMES[usize::from(key & 0x0f)]
}

/// The additional sense code's name, when it is one of [`ASC_NAMES`].
pub fn asc_name(asc: u8, ascq: u8) -> Option<&'static str> {
    ASC_NAMES
        .iter()
        .find(|(a, q, _)| (*a, *q) == (asc, ascq))
        .map(|(_, _, name)| *name)
}

/// Key, ASC and ASCQ in words with their numbers, e.g. `ILLEGAL REQUEST,
/// LOGICAL UNIT NOT SUPPORTED (05/25/00)`; an unnamed code reads
/// `ILLEGAL REQUEST, ASC/ASCQ 55h/01h (05/55/01)`.
pub fn sense_text(key: u8, asc: u8, ascq: u8) -> String {
    let numbers = format!("({:02X}/{asc:02X}/{ascq:02X})", key & 0x0f);
    match asc_name(asc, ascq) {
        Some(name) => format!("{}, {name} {numbers}", sense_key_name(key)),
        None => format!(
            "{}, ASC/ASCQ {asc:02X}h/{ascq:02X}h {numbers}",
            sense_key_name(key)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_read_as_words_and_others_by_number() {
        assert_eq!(
            sense_text(0x05, 0x25, 0x00),
            "ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (05/25/00)"
        );
        assert_eq!(
            sense_text(0x06, 0x3f, 0x0e),
            "UNIT ATTENTION, REPORTED LUNS DATA HAS CHANGED (06/3F/0E)"
        );
        assert_eq!(
            sense_text(0x05, 0x55, 0x01),
            "ILLEGAL REQUEST, ASC/ASCQ 55h/01h (05/55/01)"
        );
    }

    #[test]
    fn every_code_is_named_once() {
        for (i, (asc, ascq, _)) in ASC_NAMES.iter().enumerate() {
            let later = ASC_NAMES[i + 1..]
                .iter()
                .any(|(a, q, _)| (a, q) == (asc, ascq));
            assert!(!later, "{asc:02x}/{ascq:02x} twice");
        }
    }
}
