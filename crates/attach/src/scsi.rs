//! The SCSI side of a block device: what the LU says it is (the
//! [`Geometry`] the kernel gets), the command each block request becomes,
//! and what each SCSI answer means to the block layer.
//!
//! The answers map as Linux's own SCSI disk (`sd` and the SCSI midlayer)
//! maps them, so that a file system on `isoe attach` sees the errno it
//! would see on `/dev/sdX`:
//!
//! | SCSI answer | block status | errno |
//! |---|---|---|
//! | RESERVATION CONFLICT | BLK_STS_RESV_CONFLICT | EBADE |
//! | DATA PROTECT, 27/07 space allocation failed | BLK_STS_NOSPC | ENOSPC |
//! | MEDIUM ERROR, 11/xx, 13/xx, 14/xx (unrecovered read, no address mark, record not found) | BLK_STS_MEDIUM | ENODATA |
//! | ILLEGAL REQUEST, 20/xx invalid opcode or 24/xx invalid field | BLK_STS_TARGET | EREMOTEIO |
//! | no session or no path left (past the replacement or failover timeout) | BLK_STS_TRANSPORT | ENOLINK |
//! | any other CHECK CONDITION, iSCSI response or status | BLK_STS_IOERR | EIO |
//!
//! UNIT ATTENTION, ABORTED COMMAND, BUSY, TASK SET FULL, TASK ABORTED and
//! NOT READY 04/01 (becoming ready) are retried, as the midlayer retries
//! them; a command is tried [`MAX_TRIES`] times (NOT READY: for up to
//! [`NOT_READY_PATIENCE`]) before it fails with EIO.

use crate::device::{Geometry, Op, Request};
use isoe_initiator::cdb::{self, BlockLimits, Capacity, Provisioning, WriteModes};
use isoe_initiator::{Command, Direction, Engine, InitiatorError, Outcome, TaskError};
use std::time::Duration;
use thiserror::Error;

/// Tries per command before a retryable answer becomes EIO (as `sd`'s
/// SD_MAX_RETRIES).
pub const MAX_TRIES: u8 = 5;
/// How long a command keeps being retried while the LU is becoming ready.
pub const NOT_READY_PATIENCE: Duration = Duration::from_secs(30);
/// The wait before a command goes again after BUSY, TASK SET FULL or
/// NOT READY (becoming ready).
pub const BUSY_DELAY: Duration = Duration::from_millis(20);
/// The most a request may carry when the LU sets no limit, and in any case:
/// each of the front-end's buffers is this long.
pub const MAX_IO_BYTES: u32 = 1024 * 1024;
/// Tries of each probing command (a fresh session's UNIT ATTENTIONs).
const PROBE_TRIES: u32 = 6;

/// The logical unit behind a device: its geometry and how to speak to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lu {
    /// The LUN the commands go to.
    pub lun: u16,
    pub geometry: Geometry,
    /// WRITE SAME (16) may carry UNMAP for a write-zeroes that allows it:
    /// the LU deallocates with it (LBPWS) and deallocated blocks read as
    /// zeros (LBPRZ).
    pub write_same_unmap: bool,
}

/// Why the LU could not be probed.
#[derive(Debug, Error)]
pub enum ProbeError {
    #[error(transparent)]
    Initiator(#[from] InitiatorError),
    #[error("{what} failed: {why}")]
    Command { what: &'static str, why: String },
    #[error("{0}")]
    Unusable(String),
    /// The target has no such LU (ILLEGAL REQUEST, LOGICAL UNIT NOT
    /// SUPPORTED), and these are the LUNs REPORT LUNS lists, if it answered.
    #[error("{}", no_such_lun(*lun, luns.as_deref()))]
    NoSuchLun { lun: u16, luns: Option<Vec<u16>> },
}

fn no_such_lun(lun: u16, luns: Option<&[u16]>) -> String {
    match luns {
        Some([]) => format!("the target has no LUN {lun}: it offers none to this initiator"),
        Some(luns) => {
            let list: Vec<String> = luns.iter().map(u16::to_string).collect();
            format!(
                "the target has no LUN {lun}; it offers LUN {}",
                list.join(", ")
            )
        }
        None => format!("the target has no LUN {lun}"),
    }
}

/// SPC-5's additional sense code LOGICAL UNIT NOT SUPPORTED.
const ASC_LUN_NOT_SUPPORTED: u8 = 0x25;

/// Reads what the LU is: READ CAPACITY (16), the Block Limits and Logical
/// Block Provisioning VPD pages, and MODE SENSE (the WP and DPOFUA bits, the
/// Caching page's WCE). A page the LU lacks leaves its fields at their
/// conservative defaults (no discard, no write-zeroes, write cache on so
/// that flushes are sent).
pub fn probe(engine: &mut Engine, session: usize, lun: u16) -> Result<Lu, ProbeError> {
    let capacity = match run(
        engine,
        session,
        Command::read(lun, &cdb::read_capacity16(), 32),
        "READ CAPACITY (16)",
    ) {
        Err(ProbeError::NoSuchLun { .. }) => {
            return Err(ProbeError::NoSuchLun {
                lun,
                luns: report_luns(engine, session),
            })
        }
        other => other?,
    }
    .ok_or_else(|| ProbeError::Command {
        what: "READ CAPACITY (16)",
        why: "the LU does not support it".into(),
    })?;
    let capacity = Capacity::parse(&capacity).ok_or_else(|| ProbeError::Command {
        what: "READ CAPACITY (16)",
        why: format!("its answer is {} bytes long", capacity.len()),
    })?;
    let limits = vpd(engine, session, lun, 0xb0)?
        .and_then(|page| BlockLimits::parse(&page))
        .unwrap_or_default();
    let provisioning = vpd(engine, session, lun, 0xb2)?.and_then(|page| Provisioning::parse(&page));
    let modes = run(
        engine,
        session,
        Command::read(lun, &cdb::mode_sense10(0x3f, 4096), 4096),
        "MODE SENSE (10)",
    )?
    .and_then(|data| WriteModes::parse(&data))
    .unwrap_or_default();
    geometry(lun, &capacity, &limits, provisioning, &modes)
}

/// The geometry from what the LU answered.
fn geometry(
    lun: u16,
    capacity: &Capacity,
    limits: &BlockLimits,
    provisioning: Option<Provisioning>,
    modes: &WriteModes,
) -> Result<Lu, ProbeError> {
    let block = capacity.block_size_bytes;
    if !(512..=65536).contains(&block) || !block.is_power_of_two() {
        return Err(ProbeError::Unusable(format!(
            "LUN {lun} has {block}-byte logical blocks; a Linux block device needs a power of two from 512 to 65536"
        )));
    }
    let blocks_to_bytes = |blocks: u64, cap: u32| -> u32 {
        u32::try_from(blocks.saturating_mul(u64::from(block)))
            .unwrap_or(u32::MAX)
            .min(cap)
    };
    let exponent = u32::from(capacity.blocks_per_physical_exponent.min(8));
    let physical = block << exponent;
    let max_io = match limits.maximum_transfer_length {
        0 => MAX_IO_BYTES,
        n => blocks_to_bytes(u64::from(n), MAX_IO_BYTES),
    };
    // Whole blocks, at least one, so that the kernel's limits stay valid.
    let max_io = (max_io / block * block).max(block);
    let optimal = blocks_to_bytes(u64::from(limits.optimal_transfer_length), max_io);
    let provisioning = provisioning.unwrap_or_default();
    let discard = provisioning.unmap && limits.maximum_unmap_lba_count > 0;
    let granularity_blocks = u64::from(limits.optimal_unmap_granularity.max(1));
    let max_write_same = if provisioning.write_same16_unmap || limits.maximum_write_same_length > 0
    {
        match limits.maximum_write_same_length {
            0 => MAX_IO_BYTES,
            n => blocks_to_bytes(n, u32::MAX),
        }
    } else {
        0
    };
    Ok(Lu {
        lun,
        geometry: Geometry {
            block_bytes: block,
            physical_block_bytes: physical,
            capacity_bytes: capacity.size_bytes(),
            max_io_bytes: max_io,
            optimal_io_bytes: optimal / block * block,
            discard,
            discard_granularity_bytes: blocks_to_bytes(granularity_blocks, u32::MAX),
            discard_alignment_bytes: limits
                .unmap_granularity_alignment
                .map_or(0, |a| blocks_to_bytes(u64::from(a), u32::MAX)),
            max_discard_bytes: if discard {
                // The kernel's discard limit is in 512-byte sectors, a u32.
                blocks_to_bytes(u64::from(limits.maximum_unmap_lba_count), u32::MAX - 511) / block
                    * block
            } else {
                0
            },
            max_write_zeroes_bytes: max_write_same / block * block,
            read_only: modes.write_protected,
            volatile_cache: modes.write_cache.unwrap_or(true),
            fua: modes.fua,
        },
        write_same_unmap: provisioning.write_same16_unmap && provisioning.reads_zeros,
    })
}

/// A VPD page, or None when the LU does not have it.
fn vpd(
    engine: &mut Engine,
    session: usize,
    lun: u16,
    page: u8,
) -> Result<Option<Vec<u8>>, ProbeError> {
    run(
        engine,
        session,
        Command::read(lun, &cdb::inquiry(Some(page), 255), 255),
        "INQUIRY (VPD)",
    )
}

/// Runs a probing command to GOOD, past UNIT ATTENTIONs. Ok(None): the LU
/// refused it as unsupported (ILLEGAL REQUEST).
fn run(
    engine: &mut Engine,
    session: usize,
    command: Command,
    what: &'static str,
) -> Result<Option<Vec<u8>>, ProbeError> {
    let (lun, cdb, direction) = (command.lun, command.cdb, command.direction);
    let mut command = Some(command);
    for _ in 0..PROBE_TRIES {
        let c = command.take().unwrap_or_else(|| Command {
            lun,
            cdb,
            direction,
            attr: isoe_initiator::TaskAttr::Simple,
            buffer: Vec::new(),
            external: None,
            immediate: false,
        });
        let done = engine.execute(session, c)?;
        match &done.outcome {
            Outcome::Scsi(s) if s.is_good() => {
                let mut data = done.buffer;
                let len = (s.data_in_len as usize).min(data.len());
                data.truncate(len);
                return Ok(Some(data));
            }
            Outcome::Scsi(s) => match s.sense_key() {
                Some((0x06, _, _)) | Some((0x0b, _, _)) => continue,
                Some((0x05, ASC_LUN_NOT_SUPPORTED, _)) => {
                    return Err(ProbeError::NoSuchLun {
                        lun: lun.number().unwrap_or_default(),
                        luns: None,
                    })
                }
                Some((0x05, _, _)) => return Ok(None),
                _ => {}
            },
            _ => {}
        }
        return Err(ProbeError::Command {
            what,
            why: done.good().err().unwrap_or_default(),
        });
    }
    Err(ProbeError::Command {
        what,
        why: format!("still UNIT ATTENTION after {PROBE_TRIES} tries"),
    })
}

/// The LUNs the target offers (REPORT LUNS, sent to LUN 0 as SPC-5
/// allows of any), or None if it did not answer.
fn report_luns(engine: &mut Engine, session: usize) -> Option<Vec<u16>> {
    const ALLOCATION: u32 = 4096;
    let data = run(
        engine,
        session,
        Command::read(0, &cdb::report_luns(ALLOCATION), ALLOCATION),
        "REPORT LUNS",
    )
    .ok()??;
    cdb::parse_report_luns(&data)
}

/// The part of `request` its next command carries, `done` bytes in:
/// (byte offset, bytes). A discard or write-zeroes longer than the LU takes
/// in one command (NBD's driver sends up to 4 GiB at once, whatever the
/// LU's limits) goes in pieces of the LU's limit; a write-zeroes on an LU
/// without WRITE SAME goes as writes of zeros, a buffer at a time. Reads
/// and writes go whole (the front-end's buffers are as long as the
/// largest). None: nothing is left; Some((_, 0)) for a flush.
pub fn piece(lu: &Lu, request: &Request, done: u32) -> Option<(u64, u32)> {
    let g = &lu.geometry;
    let limit = match request.op {
        Op::Discard => g.max_discard_bytes,
        Op::WriteZeroes if g.max_write_zeroes_bytes > 0 => g.max_write_zeroes_bytes,
        Op::WriteZeroes => g.max_io_bytes,
        Op::Read | Op::Write | Op::Flush => u32::MAX,
    };
    let left = request.len.saturating_sub(done);
    if left == 0 && (done > 0 || request.op != Op::Flush) {
        return None;
    }
    let len = left.min(limit / g.block_bytes * g.block_bytes);
    (len > 0 || request.op == Op::Flush).then_some((request.offset + u64::from(done), len))
}

/// The command that carries bytes `offset..offset + len` of `request`
/// ([`piece`]), in `buffer` (the tag's, at least [`Geometry::max_io_bytes`]
/// long and never shorter than a block). A write keeps its data at the
/// front; a discard and a write-zeroes write their parameter list, zero
/// block or zeros there.
pub fn command(lu: &Lu, request: &Request, offset: u64, len: u32, mut buffer: Vec<u8>) -> Command {
    let block = u64::from(lu.geometry.block_bytes);
    let lba = offset / block;
    let blocks = (u64::from(len) / block) as u32;
    let lun = lu.lun;
    match request.op {
        Op::Read => {
            buffer.truncate(len as usize);
            Command::with(lun, &cdb::read16(lba, blocks), Direction::Read(len), buffer)
        }
        Op::Write => {
            buffer.truncate(len as usize);
            let fua = request.fua && lu.geometry.fua;
            Command::with(
                lun,
                &cdb::write16(lba, blocks, fua),
                Direction::Write(len),
                buffer,
            )
        }
        Op::Flush => Command::with(lun, &cdb::synchronize_cache16(), Direction::None, buffer),
        Op::Discard => {
            cdb::unmap_parameters(lba, blocks, &mut buffer);
            let len = buffer.len() as u16;
            Command::with(lun, &cdb::unmap(len), Direction::Write(len.into()), buffer)
        }
        Op::WriteZeroes if lu.geometry.max_write_zeroes_bytes == 0 => {
            buffer.truncate(len as usize);
            buffer.fill(0);
            Command::with(
                lun,
                &cdb::write16(lba, blocks, false),
                Direction::Write(len),
                buffer,
            )
        }
        Op::WriteZeroes => {
            let one = block as usize;
            buffer.truncate(one);
            buffer.fill(0);
            buffer.resize(one, 0);
            let unmap = lu.write_same_unmap && !request.no_unmap;
            Command::with(
                lun,
                &cdb::write_same16(lba, blocks, unmap),
                Direction::Write(one as u32),
                buffer,
            )
        }
    }
}

/// What a command's answer means for its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Done, successfully.
    Good,
    /// Send it again, after this long (zero: at once).
    Retry(Duration),
    /// Send it again while the LU is becoming ready (up to
    /// [`NOT_READY_PATIENCE`]).
    NotReady,
    /// Failed with this errno.
    Fail(i32),
}

/// The verdict on a completion's outcome (see the module's table).
pub fn judge(outcome: &Outcome) -> Verdict {
    let status = match outcome {
        Outcome::Scsi(s) => s,
        Outcome::Failed(TaskError::SessionFailed(_) | TaskError::NoPath(_)) => {
            return Verdict::Fail(libc::ENOLINK)
        }
        Outcome::Failed(TaskError::Aborted) => return Verdict::Retry(Duration::ZERO),
        Outcome::Failed(_) | Outcome::TaskManagement(_) | Outcome::Logout(_) => {
            return Verdict::Fail(libc::EIO)
        }
    };
    if status.response != 0 {
        return Verdict::Fail(libc::EIO);
    }
    match status.status {
        0x00 | 0x04 => Verdict::Good,
        0x18 => Verdict::Fail(libc::EBADE),
        0x08 | 0x28 => Verdict::Retry(BUSY_DELAY),
        0x40 => Verdict::Retry(Duration::ZERO),
        0x02 => match status.sense_key() {
            Some((key, asc, ascq)) => judge_sense(key, asc, ascq),
            None => Verdict::Fail(libc::EIO),
        },
        _ => Verdict::Fail(libc::EIO),
    }
}

fn judge_sense(key: u8, asc: u8, ascq: u8) -> Verdict {
    match (key, asc, ascq) {
        // RECOVERED ERROR: the command did complete.
        (0x01, _, _) => Verdict::Good,
        (0x06, _, _) | (0x0b, _, _) => Verdict::Retry(Duration::ZERO),
        (0x02, 0x04, 0x01) => Verdict::NotReady,
        (0x03, 0x11 | 0x13 | 0x14, _) => Verdict::Fail(libc::ENODATA),
        (0x07, 0x27, 0x07) => Verdict::Fail(libc::ENOSPC),
        (0x05, 0x20 | 0x24, _) => Verdict::Fail(libc::EREMOTEIO),
        _ => Verdict::Fail(libc::EIO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isoe_initiator::ScsiStatus;

    fn check(key: u8, asc: u8, ascq: u8) -> Outcome {
        let mut sense = vec![0u8; 18];
        sense[0] = 0x70;
        sense[2] = key;
        sense[7] = 10;
        sense[12] = asc;
        sense[13] = ascq;
        Outcome::Scsi(ScsiStatus {
            status: 0x02,
            sense,
            ..ScsiStatus::default()
        })
    }

    fn status(code: u8) -> Outcome {
        Outcome::Scsi(ScsiStatus {
            status: code,
            ..ScsiStatus::default()
        })
    }

    #[test]
    fn answers_map_to_what_sd_gives() {
        assert_eq!(judge(&status(0)), Verdict::Good);
        assert_eq!(judge(&status(0x18)), Verdict::Fail(libc::EBADE));
        assert_eq!(judge(&status(0x08)), Verdict::Retry(BUSY_DELAY));
        assert_eq!(judge(&status(0x28)), Verdict::Retry(BUSY_DELAY));
        assert_eq!(judge(&check(0x07, 0x27, 0x07)), Verdict::Fail(libc::ENOSPC));
        assert_eq!(judge(&check(0x07, 0x27, 0x00)), Verdict::Fail(libc::EIO));
        assert_eq!(
            judge(&check(0x03, 0x11, 0x00)),
            Verdict::Fail(libc::ENODATA)
        );
        assert_eq!(judge(&check(0x03, 0x0c, 0x00)), Verdict::Fail(libc::EIO));
        assert_eq!(
            judge(&check(0x05, 0x20, 0x00)),
            Verdict::Fail(libc::EREMOTEIO)
        );
        assert_eq!(judge(&check(0x05, 0x21, 0x00)), Verdict::Fail(libc::EIO));
        assert_eq!(
            judge(&check(0x06, 0x29, 0x00)),
            Verdict::Retry(Duration::ZERO)
        );
        assert_eq!(judge(&check(0x02, 0x04, 0x01)), Verdict::NotReady);
        assert_eq!(judge(&check(0x02, 0x3a, 0x00)), Verdict::Fail(libc::EIO));
        assert_eq!(
            judge(&Outcome::Failed(TaskError::SessionFailed("gone".into()))),
            Verdict::Fail(libc::ENOLINK)
        );
        assert_eq!(
            judge(&Outcome::Failed(TaskError::NoPath("none".into()))),
            Verdict::Fail(libc::ENOLINK)
        );
        let response = ScsiStatus {
            response: 1,
            ..ScsiStatus::default()
        };
        assert_eq!(judge(&Outcome::Scsi(response)), Verdict::Fail(libc::EIO));
    }

    fn capacity(blocks: u64, block: u32, exponent: u8) -> Capacity {
        Capacity {
            last_lba: blocks - 1,
            block_size_bytes: block,
            thin_provisioning: true,
            blocks_per_physical_exponent: exponent,
        }
    }

    #[test]
    fn geometry_follows_the_lu() {
        let limits = BlockLimits {
            maximum_transfer_length: 2048,
            optimal_transfer_length: 256,
            maximum_unmap_lba_count: 0x40_0000,
            optimal_unmap_granularity: 8,
            unmap_granularity_alignment: Some(0),
            maximum_write_same_length: 0x1_0000,
            ..BlockLimits::default()
        };
        let provisioning = Provisioning {
            unmap: true,
            write_same16_unmap: true,
            reads_zeros: true,
        };
        let modes = WriteModes {
            write_protected: false,
            fua: true,
            write_cache: Some(true),
        };
        let lu = geometry(
            0,
            &capacity(1 << 21, 512, 3),
            &limits,
            Some(provisioning),
            &modes,
        )
        .unwrap();
        let g = lu.geometry;
        assert_eq!(g.capacity_bytes, 1 << 30);
        assert_eq!(g.physical_block_bytes, 4096);
        assert_eq!(g.max_io_bytes, MAX_IO_BYTES);
        assert_eq!(g.optimal_io_bytes, 128 * 1024);
        assert!(g.discard);
        assert_eq!(g.discard_granularity_bytes, 4096);
        assert_eq!(g.max_discard_bytes, 0x40_0000 * 512);
        assert_eq!(g.max_write_zeroes_bytes, 0x1_0000 * 512);
        assert!(g.fua && g.volatile_cache && !g.read_only);
        assert!(lu.write_same_unmap);

        // No pages, write-protected: no discard, no write-zeroes, read-only,
        // flushes sent.
        let lu = geometry(
            3,
            &capacity(1000, 4096, 0),
            &BlockLimits::default(),
            None,
            &WriteModes {
                write_protected: true,
                ..WriteModes::default()
            },
        )
        .unwrap();
        let g = lu.geometry;
        assert!(!g.discard && g.max_write_zeroes_bytes == 0 && g.read_only && g.volatile_cache);
        assert_eq!(g.max_io_bytes, MAX_IO_BYTES);
        assert!(!lu.write_same_unmap);

        let odd = geometry(0, &capacity(10, 520, 0), &limits, None, &modes);
        assert!(matches!(odd, Err(ProbeError::Unusable(text)) if text.contains("520-byte")));
    }

    #[test]
    fn requests_become_their_commands() {
        let lu = geometry(
            2,
            &capacity(1 << 20, 512, 0),
            &BlockLimits::default(),
            Some(Provisioning {
                unmap: true,
                write_same16_unmap: true,
                reads_zeros: true,
            }),
            &WriteModes {
                fua: true,
                ..WriteModes::default()
            },
        )
        .unwrap();
        let request = |op, len, fua, no_unmap| Request {
            tag: 0,
            op,
            offset: 4096,
            len,
            fua,
            no_unmap,
        };
        let buffer = || vec![7u8; MAX_IO_BYTES as usize];
        let r = request(Op::Write, 8192, true, false);
        let c = command(&lu, &r, r.offset, r.len, buffer());
        assert_eq!(c.cdb[0], 0x8a);
        assert_eq!(c.cdb[1], 0x08, "FUA passes through");
        assert_eq!(c.cdb[2..10], 8u64.to_be_bytes());
        assert_eq!(c.cdb[10..14], 16u32.to_be_bytes());
        assert_eq!(
            (c.direction, c.buffer.len()),
            (Direction::Write(8192), 8192)
        );
        let r = request(Op::Read, 4096, false, false);
        let c = command(&lu, &r, r.offset, r.len, buffer());
        assert_eq!((c.cdb[0], c.direction), (0x88, Direction::Read(4096)));
        let r = request(Op::Flush, 0, false, false);
        assert_eq!(piece(&lu, &r, 0), Some((4096, 0)));
        let c = command(&lu, &r, 0, 0, buffer());
        assert_eq!((c.cdb[0], c.direction), (0x91, Direction::None));
        let r = request(Op::Discard, 1 << 20, false, false);
        let c = command(&lu, &r, r.offset, r.len, buffer());
        assert_eq!((c.cdb[0], c.direction), (0x42, Direction::Write(24)));
        assert_eq!(c.buffer[16..20], 2048u32.to_be_bytes());
        let r = request(Op::WriteZeroes, 1 << 20, false, false);
        let c = command(&lu, &r, r.offset, r.len, buffer());
        assert_eq!((c.cdb[0], c.cdb[1]), (0x93, 0x08));
        assert_eq!(c.direction, Direction::Write(512));
        assert!(c.buffer.iter().all(|&b| b == 0) && c.buffer.len() == 512);
        let r = request(Op::WriteZeroes, 1 << 20, false, true);
        let c = command(&lu, &r, r.offset, r.len, buffer());
        assert_eq!(c.cdb[1], 0, "REQ_NOUNMAP keeps the blocks allocated");
    }

    #[test]
    fn long_discards_and_write_zeroes_go_in_pieces_of_the_lus_limit() {
        let limits = BlockLimits {
            maximum_unmap_lba_count: 2048,
            maximum_write_same_length: 4096,
            ..BlockLimits::default()
        };
        let thin = Provisioning {
            unmap: true,
            write_same16_unmap: true,
            reads_zeros: true,
        };
        let lu = geometry(
            0,
            &capacity(1 << 24, 512, 0),
            &limits,
            Some(thin),
            &WriteModes::default(),
        )
        .unwrap();
        let request = |op, len| Request {
            tag: 0,
            op,
            offset: 512,
            len,
            fua: false,
            no_unmap: false,
        };
        // 3 MiB of discard at 1 MiB (2048 blocks) a command.
        let r = request(Op::Discard, 3 << 20);
        assert_eq!(piece(&lu, &r, 0), Some((512, 1 << 20)));
        assert_eq!(piece(&lu, &r, 2 << 20), Some((512 + (2 << 20), 1 << 20)));
        assert_eq!(piece(&lu, &r, 3 << 20), None);
        // Write-zeroes at 2 MiB (4096 blocks) a WRITE SAME.
        let r = request(Op::WriteZeroes, 3 << 20);
        assert_eq!(piece(&lu, &r, 0), Some((512, 2 << 20)));
        assert_eq!(piece(&lu, &r, 2 << 20), Some((512 + (2 << 20), 1 << 20)));
        // Reads go whole.
        assert_eq!(
            piece(&lu, &request(Op::Read, 8 << 20), 0),
            Some((512, 8 << 20))
        );

        // No WRITE SAME: zeros written, a buffer at a time.
        let plain = geometry(
            0,
            &capacity(1 << 24, 512, 0),
            &BlockLimits::default(),
            None,
            &WriteModes::default(),
        )
        .unwrap();
        let r = request(Op::WriteZeroes, 3 << 20);
        assert_eq!(piece(&plain, &r, 0), Some((512, MAX_IO_BYTES)));
        let c = command(
            &plain,
            &r,
            512,
            MAX_IO_BYTES,
            vec![9u8; MAX_IO_BYTES as usize],
        );
        assert_eq!(
            (c.cdb[0], c.direction),
            (0x8a, Direction::Write(MAX_IO_BYTES))
        );
        assert!(c.buffer.iter().all(|&b| b == 0));
    }
}
