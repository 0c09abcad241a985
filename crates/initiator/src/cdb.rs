//! CDBs the CLI and the benchmark send, and the parsing of their answers.
//! Only what an initiator needs to build requests and read replies: the
//! device server logic lives in the target's `scsi` crate, never here.

/// TEST UNIT READY (SPC-4 6.47).
pub fn test_unit_ready() -> [u8; 6] {
    [0; 6]
}

/// INQUIRY (SPC-4 6.6): standard data, or a VPD page when `page` is given.
pub fn inquiry(page: Option<u8>, allocation_length: u16) -> [u8; 6] {
    let [hi, lo] = allocation_length.to_be_bytes();
    match page {
        Some(p) => [0x12, 0x01, p, hi, lo, 0],
        None => [0x12, 0, 0, hi, lo, 0],
    }
}

/// READ CAPACITY (16) (SBC-4 5.20), allocation length 32.
pub fn read_capacity16() -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x10;
    cdb[13] = 32;
    cdb
}

/// REPORT LUNS (SPC-4 6.33), all LUNs.
pub fn report_luns(allocation_length: u32) -> [u8; 12] {
    let mut cdb = [0u8; 12];
    cdb[0] = 0xa0;
    cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

/// REPORT TARGET PORT GROUPS (SPC-5 6.36), the length-only header
/// format (every ALUA target serves it).
pub fn report_target_port_groups(allocation_length: u32) -> [u8; 12] {
    let mut cdb = [0u8; 12];
    cdb[0] = 0xa3;
    cdb[1] = 0x0a;
    cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

/// READ (16) (SBC-4 5.16).
pub fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    rw16(0x88, lba, blocks, false)
}

/// WRITE (16) (SBC-4 5.40), with FUA when asked.
pub fn write16(lba: u64, blocks: u32, fua: bool) -> [u8; 16] {
    rw16(0x8a, lba, blocks, fua)
}

/// READ (10) (SBC-4 5.13): what most initiators send for small LBAs.
pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    rw10(0x28, lba, blocks)
}

/// WRITE (10) (SBC-4 5.37).
pub fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    rw10(0x2a, lba, blocks)
}

/// SYNCHRONIZE CACHE (10) (SBC-4 5.25), the whole medium.
pub fn synchronize_cache10() -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x35;
    cdb
}

fn rw16(opcode: u8, lba: u64, blocks: u32, fua: bool) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode;
    if fua {
        cdb[1] = 0x08;
    }
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

fn rw10(opcode: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = opcode;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// READ CAPACITY (16) parameter data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// The last LBA.
    pub last_lba: u64,
    /// Logical block length in bytes.
    pub block_size_bytes: u32,
    /// LBPME: logical block provisioning (thin) enabled.
    pub thin_provisioning: bool,
}

impl Capacity {
    /// Parses SBC-4 Table 65; None when shorter than 12 bytes.
    pub fn parse(data: &[u8]) -> Option<Capacity> {
        let last_lba = u64::from_be_bytes(data.get(0..8)?.try_into().ok()?);
        let block_size_bytes = u32::from_be_bytes(data.get(8..12)?.try_into().ok()?);
        let thin_provisioning = data.get(14).is_some_and(|b| b & 0x80 != 0);
        Some(Capacity {
            last_lba,
            block_size_bytes,
            thin_provisioning,
        })
    }

    /// Logical blocks on the medium.
    pub fn blocks(&self) -> u64 {
        self.last_lba.saturating_add(1)
    }

    /// Medium size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks()
            .saturating_mul(u64::from(self.block_size_bytes))
    }
}

/// Standard INQUIRY data, the fields people look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inquiry {
    /// Peripheral qualifier (bits 7..5 of byte 0).
    pub peripheral_qualifier: u8,
    /// Peripheral device type (0 = direct access block device).
    pub device_type: u8,
    /// RMB: removable medium.
    pub removable: bool,
    /// VERSION (6 = SPC-4).
    pub version: u8,
    /// T10 VENDOR IDENTIFICATION, trimmed.
    pub vendor: String,
    /// PRODUCT IDENTIFICATION, trimmed.
    pub product: String,
    /// PRODUCT REVISION LEVEL, trimmed.
    pub revision: String,
}

impl Inquiry {
    /// Parses SPC-4 Table 139; None when shorter than 36 bytes.
    pub fn parse(data: &[u8]) -> Option<Inquiry> {
        if data.len() < 36 {
            return None;
        }
        let text =
            |r: std::ops::Range<usize>| String::from_utf8_lossy(&data[r]).trim_end().to_string();
        Some(Inquiry {
            peripheral_qualifier: data[0] >> 5,
            device_type: data[0] & 0x1f,
            removable: data[1] & 0x80 != 0,
            version: data[2],
            vendor: text(8..16),
            product: text(16..32),
            revision: text(32..36),
        })
    }

    /// The device type as SPC-4 Table 140 names it.
    pub fn device_type_name(&self) -> &'static str {
        match self.device_type {
            0x00 => "direct access block device",
            0x01 => "sequential access device",
            0x05 => "CD/DVD device",
            0x07 => "optical memory device",
            0x08 => "media changer",
            0x0c => "storage array controller",
            0x0d => "enclosure services device",
            0x1f => "unknown or no device type",
            _ => "other device type",
        }
    }
}

/// The LUNs of a REPORT LUNS answer (SPC-4 6.33.2), as numbers (flat and
/// peripheral addressing; other methods are skipped).
pub fn parse_report_luns(data: &[u8]) -> Option<Vec<u16>> {
    let list_len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let entries = data.get(8..)?;
    let n = (list_len / 8).min(entries.len() / 8);
    let mut luns = Vec::with_capacity(n);
    for entry in entries.chunks_exact(8).take(n) {
        let method = entry[0] >> 6;
        let number = u16::from(entry[0] & 0x3f) << 8 | u16::from(entry[1]);
        if method <= 1 {
            luns.push(number);
        }
    }
    Some(luns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read16_and_write16_carry_lba_and_length() {
        let c = write16(0x0102_0304_0506_0708, 0x10, true);
        assert_eq!(c[0], 0x8a);
        assert_eq!(c[1], 0x08);
        assert_eq!(c[2..10], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c[10..14], [0, 0, 0, 0x10]);
        assert_eq!(read16(5, 1)[0], 0x88);
        assert_eq!(read10(0x01020304, 8), [0x28, 0, 1, 2, 3, 4, 0, 0, 8, 0]);
    }

    #[test]
    fn capacity_parses() {
        let mut d = [0u8; 32];
        d[0..8].copy_from_slice(&2097151u64.to_be_bytes());
        d[8..12].copy_from_slice(&512u32.to_be_bytes());
        d[14] = 0x80;
        let c = Capacity::parse(&d).unwrap();
        assert_eq!(c.blocks(), 2097152);
        assert_eq!(c.size_bytes(), 1 << 30);
        assert!(c.thin_provisioning);
        assert_eq!(Capacity::parse(&d[..8]), None);
    }

    #[test]
    fn inquiry_and_report_luns_parse() {
        let mut d = vec![0u8; 36];
        d[2] = 6;
        d[8..16].copy_from_slice(b"ISOE    ");
        d[16..32].copy_from_slice(b"MEMORY          ");
        d[32..36].copy_from_slice(b"0.1 ");
        let i = Inquiry::parse(&d).unwrap();
        assert_eq!(
            (i.vendor.as_str(), i.product.as_str(), i.revision.as_str()),
            ("ISOE", "MEMORY", "0.1")
        );
        assert_eq!(i.device_type_name(), "direct access block device");
        let mut r = vec![0u8; 24];
        r[3] = 16;
        r[9] = 0; // LUN 0
        r[16] = 0x40 | 0x01; // flat space LUN 0x0102
        r[17] = 0x02;
        assert_eq!(parse_report_luns(&r).unwrap(), vec![0, 0x0102]);
        assert_eq!(parse_report_luns(&r[..3]), None);
    }
}
