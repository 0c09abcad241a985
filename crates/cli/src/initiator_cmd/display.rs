//! Sizes in binary and decimal units, bytes as hex.

use std::fmt::Write as _;

/// `bytes` in powers of 1024: "64 MiB", "1.50 GiB".
pub(super) fn size_binary(bytes: u64) -> String {
    scaled(
        bytes,
        1024,
        &["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"],
    )
}

/// `bytes` in powers of 1000: "67.11 MB".
pub(super) fn size_decimal(bytes: u64) -> String {
    scaled(bytes, 1000, &["bytes", "kB", "MB", "GB", "TB", "PB", "EB"])
}

fn scaled(bytes: u64, base: u64, units: &[&str]) -> String {
    let mut unit = 0;
    let mut divisor = 1u64;
    while unit + 1 < units.len() && bytes / divisor >= base {
        divisor *= base;
        unit += 1;
    }
    if bytes.is_multiple_of(divisor) {
        format!("{} {}", bytes / divisor, units[unit])
    } else {
        format!("{:.2} {}", bytes as f64 / divisor as f64, units[unit])
    }
}

pub(super) fn hex(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `hexdump -C` layout: offset, 16 bytes in two groups, printable ASCII.
pub(super) fn hex_dump(data: &[u8]) -> String {
    let mut out = String::new();
    for (i, row) in data.chunks(16).enumerate() {
        let _ = write!(out, "{:08x} ", i * 16);
        for j in 0..16 {
            if j == 8 {
                out.push(' ');
            }
            match row.get(j) {
                Some(b) => {
                    let _ = write!(out, " {b:02x}");
                }
                None => out.push_str("   "),
            }
        }
        out.push_str("  |");
        out.extend(row.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        }));
        out.push_str("|\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_name_binary_and_decimal_units() {
        assert_eq!(size_binary(64 << 20), "64 MiB");
        assert_eq!(size_decimal(64 << 20), "67.11 MB");
        assert_eq!(size_binary(1536 << 20), "1.50 GiB");
        assert_eq!(size_decimal(1_000_000_000), "1 GB");
        assert_eq!(size_binary(512), "512 bytes");
        assert_eq!(size_binary(u64::MAX), "16.00 EiB");
    }

    #[test]
    fn hex_dump_has_offsets_and_ascii() {
        let dump = hex_dump(b"ISOE\x00\x01abcdefghijklmnopq");
        let lines: Vec<&str> = dump.lines().collect();
        assert_eq!(
            lines[0],
            "00000000  49 53 4f 45 00 01 61 62  63 64 65 66 67 68 69 6a  |ISOE..abcdefghij|"
        );
        assert_eq!(
            lines[1],
            "00000010  6b 6c 6d 6e 6f 70 71                              |klmnopq|"
        );
    }
}
