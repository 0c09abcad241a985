//! A logical unit over a memory store, CDB builders, and sense assertions.

use std::sync::Arc;

use isoe_scsi::{Completion, LogicalUnit, LunConfig, Nexus, NoUnits, Sense, Status};
use isoe_store::{MemoryStore, Store};

/// Blocks in the unit most tests use: small, but past READ6's 256-block reach.
pub const BLOCKS: u64 = 4096;
pub const BLOCK_SIZE: usize = 512;

pub const ILLEGAL_REQUEST: u8 = 0x05;
pub const DATA_PROTECT: u8 = 0x07;
pub const MISCOMPARE: u8 = 0x0e;

pub fn config() -> LunConfig {
    LunConfig {
        unit_serial: "SERIAL0001".to_owned(),
        naa: [
            0x60, 0x01, 0x40, 0x5f, 0xd0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        ],
        target_name: "iqn.2024-01.org.isoe:disk".to_owned(),
        ..LunConfig::default()
    }
}

pub fn unit() -> LogicalUnit {
    unit_with(config(), BLOCKS)
}

pub fn unit_with(config: LunConfig, blocks: u64) -> LogicalUnit {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new(blocks * u64::from(config.block_size)));
    LogicalUnit::new(store, config)
}

pub fn read_only_unit() -> LogicalUnit {
    unit_with(
        LunConfig {
            read_only: true,
            ..config()
        },
        BLOCKS,
    )
}

/// The I_T nexus the harness sends from.
pub fn nexus() -> Nexus {
    Nexus::new("iqn.2026-11.io.isoe:harness", [0x40, 0, 0, 0, 0, 1])
}

/// Runs one command with no Data-Out.
pub fn run(unit: &LogicalUnit, cdb: &[u8]) -> (Completion, Vec<u8>) {
    run_out(unit, cdb, &[])
}

/// Runs one command with Data-Out.
pub fn run_out(unit: &LogicalUnit, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
    let mut data_in = Vec::new();
    let completion = unit.execute(&nexus(), &NoUnits, cdb, data_out, &mut data_in);
    (completion, data_in)
}

#[track_caller]
pub fn assert_good(completion: Completion) {
    assert_eq!(completion, Completion::good(), "expected GOOD");
}

/// Asserts CHECK CONDITION with exactly this key/ASC/ASCQ.
#[track_caller]
pub fn assert_sense(completion: Completion, key: u8, asc: u8, ascq: u8) -> Sense {
    assert_eq!(
        completion.status,
        Status::CheckCondition,
        "expected CHECK CONDITION, got {completion:?}"
    );
    let sense = completion.sense.expect("CHECK CONDITION carries sense");
    assert_eq!(
        (sense.key, sense.asc, sense.ascq),
        (key, asc, ascq),
        "sense {sense:?}"
    );
    sense
}

#[track_caller]
pub fn assert_invalid_field_in_cdb(completion: Completion) -> Sense {
    assert_sense(completion, ILLEGAL_REQUEST, 0x24, 0x00)
}

#[track_caller]
pub fn assert_lba_out_of_range(completion: Completion) {
    assert_sense(completion, ILLEGAL_REQUEST, 0x21, 0x00);
}

#[track_caller]
pub fn assert_invalid_opcode(completion: Completion) {
    assert_sense(completion, ILLEGAL_REQUEST, 0x20, 0x00);
}

pub fn be16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

pub fn be32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(data[at..at + 4].try_into().unwrap())
}

pub fn be64(data: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(data[at..at + 8].try_into().unwrap())
}

/// A block-addressed CDB of `length` 6, 10, 12 or 16 bytes.
pub fn block_cdb(
    opcode: u8,
    length: usize,
    logical_block_address: u64,
    blocks: u32,
    byte1: u8,
) -> Vec<u8> {
    let mut cdb = vec![0u8; length];
    cdb[0] = opcode;
    match length {
        6 => {
            cdb[1] = (logical_block_address >> 16) as u8 & 0x1f;
            cdb[2] = (logical_block_address >> 8) as u8;
            cdb[3] = logical_block_address as u8;
            cdb[4] = blocks as u8;
        }
        10 => {
            cdb[1] = byte1;
            cdb[2..6].copy_from_slice(&(logical_block_address as u32).to_be_bytes());
            cdb[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
        }
        12 => {
            cdb[1] = byte1;
            cdb[2..6].copy_from_slice(&(logical_block_address as u32).to_be_bytes());
            cdb[6..10].copy_from_slice(&blocks.to_be_bytes());
        }
        16 => {
            cdb[1] = byte1;
            cdb[2..10].copy_from_slice(&logical_block_address.to_be_bytes());
            cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
        }
        _ => unreachable!(),
    }
    cdb
}

pub fn inquiry(evpd: bool, page_code: u8, allocation_length: u16) -> Vec<u8> {
    let [high, low] = allocation_length.to_be_bytes();
    vec![0x12, u8::from(evpd), page_code, high, low, 0]
}

pub fn mode_sense6(
    dbd: bool,
    page_control: u8,
    page_code: u8,
    subpage: u8,
    allocation_length: u8,
) -> Vec<u8> {
    vec![
        0x1a,
        if dbd { 0x08 } else { 0 },
        page_control << 6 | page_code,
        subpage,
        allocation_length,
        0,
    ]
}

pub fn read_capacity16(allocation_length: u32) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x10;
    cdb[10..14].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

pub fn report_supported_opcodes(
    rctd: bool,
    options: u8,
    opcode: u8,
    service_action: u16,
    allocation_length: u32,
) -> Vec<u8> {
    let mut cdb = vec![0u8; 12];
    cdb[0] = 0xa3;
    cdb[1] = 0x0c;
    cdb[2] = if rctd { 0x80 } else { 0 } | options;
    cdb[3] = opcode;
    cdb[4..6].copy_from_slice(&service_action.to_be_bytes());
    cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

pub fn start_stop_unit(
    immed: bool,
    power_condition: u8,
    no_flush: bool,
    loej: bool,
    start: bool,
) -> Vec<u8> {
    let byte4 =
        power_condition << 4 | u8::from(no_flush) << 2 | u8::from(loej) << 1 | u8::from(start);
    vec![0x1b, u8::from(immed), 0, 0, byte4, 0]
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// A memory store that counts flushes, to see FUA and SYNCHRONIZE CACHE reach the media.
#[derive(Debug)]
pub struct CountingStore {
    inner: MemoryStore,
    pub flushes: std::sync::atomic::AtomicU64,
}

impl Store for CountingStore {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), isoe_store::StoreError> {
        self.inner.read_at(offset, buf)
    }
    fn unwritten_read_bytes(&self) -> Option<u64> {
        self.inner.unwritten_read_bytes()
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), isoe_store::StoreError> {
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), isoe_store::StoreError> {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    fn unmap(&self, offset: u64, len: u64) -> Result<(), isoe_store::StoreError> {
        self.inner.unmap(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), isoe_store::StoreError> {
        self.inner.write_zeroes(offset, len)
    }
    fn kind(&self) -> &'static str {
        "memory"
    }
}

impl CountingStore {
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

pub fn counting_unit() -> (LogicalUnit, Arc<CountingStore>) {
    let store = Arc::new(CountingStore {
        inner: MemoryStore::new(BLOCKS * BLOCK_SIZE as u64),
        flushes: std::sync::atomic::AtomicU64::new(0),
    });
    let unit = LogicalUnit::new(store.clone(), config());
    (unit, store)
}

/// Writes `blocks` blocks of `byte` from `lba` with WRITE(16), expecting GOOD.
pub fn fill(unit: &LogicalUnit, lba: u64, blocks: u32, byte: u8) {
    let cdb = block_cdb(0x8a, 16, lba, blocks, 0);
    assert_good(run_out(unit, &cdb, &vec![byte; blocks as usize * BLOCK_SIZE]).0);
}

/// Reads `blocks` blocks from `lba` with READ(16), expecting GOOD.
pub fn read(unit: &LogicalUnit, lba: u64, blocks: u32) -> Vec<u8> {
    let (completion, data) = run(unit, &block_cdb(0x88, 16, lba, blocks, 0));
    assert_good(completion);
    data
}

/// COMPARE AND WRITE: `blocks` to compare and as many to write at `lba`.
pub fn caw_cdb(lba: u64, blocks: u8, byte1: u8) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x89;
    cdb[1] = byte1;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[13] = blocks;
    cdb
}

/// WRITE ATOMIC (16) of `blocks` at `lba`, with an ATOMIC BOUNDARY.
pub fn atomic_cdb(lba: u64, blocks: u16, byte1: u8, boundary: u16) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x9c;
    cdb[1] = byte1;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..12].copy_from_slice(&boundary.to_be_bytes());
    cdb[12..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// GET LBA STATUS from `lba`.
pub fn get_lba_status_cdb(lba: u64, allocation_length: u32) -> Vec<u8> {
    let mut cdb = vec![0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x12;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

/// UNMAP with a parameter list of `parameter_list_length` bytes.
pub fn unmap_cdb(anchor: bool, parameter_list_length: u16) -> Vec<u8> {
    let mut cdb = vec![0x42, u8::from(anchor), 0, 0, 0, 0, 0, 0, 0, 0];
    cdb[7..9].copy_from_slice(&parameter_list_length.to_be_bytes());
    cdb
}

/// The UNMAP parameter list of (LBA, blocks) block descriptors.
pub fn unmap_parameters(ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut data = vec![0u8; 8];
    data[0..2].copy_from_slice(&((6 + 16 * ranges.len()) as u16).to_be_bytes());
    data[2..4].copy_from_slice(&((16 * ranges.len()) as u16).to_be_bytes());
    for &(lba, blocks) in ranges {
        data.extend_from_slice(&lba.to_be_bytes());
        data.extend_from_slice(&blocks.to_be_bytes());
        data.extend_from_slice(&[0; 4]);
    }
    data
}

/// SANITIZE with `byte1` (IMMED, AUSE, service action) and a parameter list length.
pub fn sanitize_cdb(byte1: u8, parameter_list_length: u16) -> Vec<u8> {
    let [high, low] = parameter_list_length.to_be_bytes();
    vec![0x48, byte1, 0, 0, 0, 0, 0, high, low, 0]
}

/// The SANITIZE OVERWRITE parameter list: `count` passes of `pattern`.
pub fn overwrite_list(count: u8, pattern: &[u8]) -> Vec<u8> {
    let mut list = vec![count, 0];
    list.extend_from_slice(&(pattern.len() as u16).to_be_bytes());
    list.extend_from_slice(pattern);
    list
}
