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

/// SYNCHRONIZE CACHE (16) (SBC-4 5.26), the whole medium.
pub fn synchronize_cache16() -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x91;
    cdb
}

/// WRITE SAME (16) (SBC-4 5.48) of one block, the UNMAP bit when the
/// range may be deallocated.
pub fn write_same16(lba: u64, blocks: u32, unmap: bool) -> [u8; 16] {
    let mut cdb = rw16(0x93, lba, blocks, false);
    if unmap {
        cdb[1] = 0x08;
    }
    cdb
}

/// UNMAP (SBC-4 5.30) with a parameter list of `parameter_bytes`.
pub fn unmap(parameter_bytes: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x42;
    cdb[7..9].copy_from_slice(&parameter_bytes.to_be_bytes());
    cdb
}

/// UNMAP's parameter list (SBC-4 5.30.2) for one range, into `out`.
pub fn unmap_parameters(lba: u64, blocks: u32, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&22u16.to_be_bytes()); // UNMAP DATA LENGTH: all that follows
    out.extend_from_slice(&16u16.to_be_bytes()); // BLOCK DESCRIPTOR DATA LENGTH
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&lba.to_be_bytes());
    out.extend_from_slice(&blocks.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
}

/// MODE SENSE (10) (SPC-4 6.14) of `page` (0x3f: all), current values,
/// no block descriptors.
pub fn mode_sense10(page: u8, allocation_length: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x5a;
    cdb[1] = 0x08; // DBD
    cdb[2] = page & 0x3f;
    cdb[7..9].copy_from_slice(&allocation_length.to_be_bytes());
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
    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT.
    pub blocks_per_physical_exponent: u8,
}

impl Capacity {
    /// Parses SBC-4 Table 65; None when shorter than 12 bytes.
    pub fn parse(data: &[u8]) -> Option<Capacity> {
        let last_lba = u64::from_be_bytes(data.get(0..8)?.try_into().ok()?);
        let block_size_bytes = u32::from_be_bytes(data.get(8..12)?.try_into().ok()?);
        let thin_provisioning = data.get(14).is_some_and(|b| b & 0x80 != 0);
        let blocks_per_physical_exponent = data.get(13).map_or(0, |b| b & 0x0f);
        Some(Capacity {
            last_lba,
            block_size_bytes,
            thin_provisioning,
            blocks_per_physical_exponent,
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

/// The Block Limits VPD page (B0h, SBC-4 6.6.4): the fields a block
/// device's queue limits come from, in logical blocks; 0 = not reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockLimits {
    pub optimal_transfer_granularity: u16,
    pub maximum_transfer_length: u32,
    pub optimal_transfer_length: u32,
    pub maximum_unmap_lba_count: u32,
    pub maximum_unmap_descriptors: u32,
    pub optimal_unmap_granularity: u32,
    /// UNMAP GRANULARITY ALIGNMENT, when UGAVALID is set.
    pub unmap_granularity_alignment: Option<u32>,
    pub maximum_write_same_length: u64,
}

impl BlockLimits {
    /// Parses the page (its 4-byte header included); None when too short
    /// for the transfer lengths. Fields past the end read as 0 (the
    /// SBC-2 page is 16 bytes long).
    pub fn parse(data: &[u8]) -> Option<BlockLimits> {
        if data.get(1) != Some(&0xb0) || data.len() < 16 {
            return None;
        }
        let u32_at = |at: usize| {
            data.get(at..at + 4)
                .map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap_or_default()))
        };
        let alignment = u32_at(32);
        Some(BlockLimits {
            optimal_transfer_granularity: u16::from_be_bytes([data[6], data[7]]),
            maximum_transfer_length: u32_at(8),
            optimal_transfer_length: u32_at(12),
            maximum_unmap_lba_count: u32_at(20),
            maximum_unmap_descriptors: u32_at(24),
            optimal_unmap_granularity: u32_at(28),
            unmap_granularity_alignment: (alignment & 0x8000_0000 != 0)
                .then_some(alignment & 0x7fff_ffff),
            maximum_write_same_length: data
                .get(36..44)
                .map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or_default())),
        })
    }
}

/// The Logical Block Provisioning VPD page (B2h, SBC-4 6.6.6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Provisioning {
    /// LBPU: UNMAP deallocates.
    pub unmap: bool,
    /// LBPWS: WRITE SAME (16) with UNMAP deallocates.
    pub write_same16_unmap: bool,
    /// LBPRZ: deallocated blocks read as zeros.
    pub reads_zeros: bool,
}

impl Provisioning {
    /// Parses the page (header included); None when it is not B2h.
    pub fn parse(data: &[u8]) -> Option<Provisioning> {
        if data.get(1) != Some(&0xb2) {
            return None;
        }
        let flags = *data.get(5)?;
        Some(Provisioning {
            unmap: flags & 0x80 != 0,
            write_same16_unmap: flags & 0x40 != 0,
            reads_zeros: flags & 0x04 != 0,
        })
    }
}

/// What a MODE SENSE (10) answer says about writes (SBC-4 6.5.1, 7.5.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteModes {
    /// WP: the medium is write-protected.
    pub write_protected: bool,
    /// DPOFUA: the DPO and FUA bits are honoured.
    pub fua: bool,
    /// WCE of the Caching page (08h), when it came back: a volatile
    /// write cache is on.
    pub write_cache: Option<bool>,
}

impl WriteModes {
    /// Parses a MODE SENSE (10) answer; None when shorter than its header.
    pub fn parse(data: &[u8]) -> Option<WriteModes> {
        if data.len() < 8 {
            return None;
        }
        let specific = data[3];
        let end = (usize::from(u16::from_be_bytes([data[0], data[1]])) + 2).min(data.len());
        let descriptors = usize::from(u16::from_be_bytes([data[6], data[7]]));
        let mut at = 8 + descriptors;
        let mut write_cache = None;
        while at + 2 <= end {
            let page = data[at] & 0x3f;
            let subpage_format = data[at] & 0x40 != 0;
            let (header, len) = if subpage_format {
                if at + 4 > end {
                    break;
                }
                (
                    4,
                    usize::from(u16::from_be_bytes([data[at + 2], data[at + 3]])),
                )
            } else {
                (2, usize::from(data[at + 1]))
            };
            if page == 0x08 && !subpage_format && at + 2 < end {
                write_cache = Some(data[at + 2] & 0x04 != 0);
            }
            at += header + len;
        }
        Some(WriteModes {
            write_protected: specific & 0x80 != 0,
            fua: specific & 0x10 != 0,
            write_cache,
        })
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

    #[test]
    fn block_limits_provisioning_and_modes_parse() {
        let mut b0 = vec![0u8; 64];
        b0[1] = 0xb0;
        b0[3] = 0x3c;
        b0[6..8].copy_from_slice(&8u16.to_be_bytes());
        b0[8..12].copy_from_slice(&2048u32.to_be_bytes());
        b0[12..16].copy_from_slice(&256u32.to_be_bytes());
        b0[20..24].copy_from_slice(&0x40_0000u32.to_be_bytes());
        b0[24..28].copy_from_slice(&1u32.to_be_bytes());
        b0[28..32].copy_from_slice(&8u32.to_be_bytes());
        b0[32..36].copy_from_slice(&0x8000_0002u32.to_be_bytes());
        b0[36..44].copy_from_slice(&0x1_0000u64.to_be_bytes());
        let l = BlockLimits::parse(&b0).unwrap();
        assert_eq!(l.maximum_transfer_length, 2048);
        assert_eq!(l.optimal_transfer_length, 256);
        assert_eq!(l.maximum_unmap_lba_count, 0x40_0000);
        assert_eq!(l.optimal_unmap_granularity, 8);
        assert_eq!(l.unmap_granularity_alignment, Some(2));
        assert_eq!(l.maximum_write_same_length, 0x1_0000);
        // The 16-byte SBC-2 page: the rest reads as not reported.
        let short = BlockLimits::parse(&b0[..16]).unwrap();
        assert_eq!(short.maximum_unmap_lba_count, 0);
        assert_eq!(short.unmap_granularity_alignment, None);
        assert_eq!(BlockLimits::parse(&b0[..12]), None);

        let b2 = [0, 0xb2, 0, 4, 0, 0x80 | 0x40 | 0x04, 2, 0];
        let p = Provisioning::parse(&b2).unwrap();
        assert!(p.unmap && p.write_same16_unmap && p.reads_zeros);
        assert_eq!(Provisioning::parse(&b0), None);

        // Header (WP + DPOFUA), then the Caching page with WCE, after a
        // Control page.
        let mut m = vec![0u8; 8];
        m[3] = 0x80 | 0x10;
        m.extend_from_slice(&[0x0a, 2, 0, 0]);
        m.extend_from_slice(&[0x08, 0x12, 0x04]);
        m.resize(8 + 4 + 20, 0);
        let len = (m.len() - 2) as u16;
        m[0..2].copy_from_slice(&len.to_be_bytes());
        let w = WriteModes::parse(&m).unwrap();
        assert_eq!(
            w,
            WriteModes {
                write_protected: true,
                fua: true,
                write_cache: Some(true)
            }
        );
        m[3] = 0;
        m[14] = 0;
        let w = WriteModes::parse(&m).unwrap();
        assert!(!w.write_protected && !w.fua && w.write_cache == Some(false));
    }

    #[test]
    fn unmap_and_write_same_carry_the_range() {
        let mut p = Vec::new();
        unmap_parameters(0x10, 0x20, &mut p);
        assert_eq!(p.len(), 24);
        assert_eq!(p[0..4], [0, 22, 0, 16]);
        assert_eq!(p[8..16], 0x10u64.to_be_bytes());
        assert_eq!(p[16..20], 0x20u32.to_be_bytes());
        assert_eq!(unmap(24)[7..9], [0, 24]);
        let w = write_same16(7, 9, true);
        assert_eq!((w[0], w[1]), (0x93, 0x08));
        assert_eq!(w[10..14], 9u32.to_be_bytes());
        assert_eq!(write_same16(7, 9, false)[1], 0);
    }
}
