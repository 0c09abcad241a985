//! SANITIZE (SBC-4 5.30) and the sanitize state of a logical unit (SBC-4
//! 4.11): OVERWRITE writes a pattern over every block, BLOCK ERASE
//! deallocates every block, CRYPTOGRAPHIC ERASE (no encryption key exists
//! on this medium) writes zeros over every block. While one runs, media
//! access fails with SANITIZE IN PROGRESS; after one fails, with SANITIZE
//! COMMAND FAILED until a SANITIZE succeeds or EXIT FAILURE MODE is allowed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use isoe_store::{Store, StoreError};

use crate::logical_unit::Context;
use crate::media::{Access, MediaLog};
use crate::opcode::*;
use crate::{cdb, Background, LogicalUnit, Sense};

/// SANITIZE service actions (SBC-4 table 59).
pub(crate) const OVERWRITE_SA: u8 = 0x01;
/// BLOCK ERASE.
pub(crate) const BLOCK_ERASE_SA: u8 = 0x02;
/// CRYPTOGRAPHIC ERASE.
pub(crate) const CRYPTOGRAPHIC_ERASE_SA: u8 = 0x03;
/// EXIT FAILURE MODE.
pub(crate) const EXIT_FAILURE_MODE_SA: u8 = 0x1f;

/// Byte 1 of the CDB: IMMED, reserved bit 6, AUSE.
const IMMED: u8 = 0x80;
const AUSE: u8 = 0x20;
/// OVERWRITE parameter list header (SBC-4 5.30.3).
const OVERWRITE_HEADER_LEN: usize = 4;
/// Bytes written per store call: bounds the pattern buffer.
const OVERWRITE_CHUNK_BYTES: usize = 1 << 20;

/// Commands that do not touch the medium and so run whatever the sanitize
/// state (SBC-4 4.11.2 lists INQUIRY, REPORT LUNS and REQUEST SENSE as
/// allowed during a sanitize; after a failure only media access is refused).
fn touches_no_medium(cdb: &[u8]) -> bool {
    matches!(
        cdb[0],
        INQUIRY | REPORT_LUNS | REQUEST_SENSE | MAINTENANCE_IN
    )
}

/// Commands that read or write the medium, refused after a failed sanitize.
fn accesses_medium(opcode: u8) -> bool {
    !matches!(
        opcode,
        TEST_UNIT_READY
            | REQUEST_SENSE
            | INQUIRY
            | MODE_SELECT_6
            | MODE_SENSE_6
            | MODE_SELECT_10
            | MODE_SENSE_10
            | START_STOP_UNIT
            | PREVENT_ALLOW_MEDIUM_REMOVAL
            | READ_CAPACITY_10
            | SERVICE_ACTION_IN_16
            | MAINTENANCE_IN
            | REPORT_LUNS
            | SANITIZE
            | RECEIVE_COPY_RESULTS
            | READ_DEFECT_DATA_10
            | READ_DEFECT_DATA_12
    )
}

/// The sanitize gate in front of every command: Err(sense) if `cdb` may not
/// run now. REQUEST SENSE during a sanitize is answered by the caller.
pub(crate) fn check_command(unit: &LogicalUnit, cdb: &[u8]) -> Result<(), Sense> {
    match unit.sanitize.check_medium() {
        Ok(()) => Ok(()),
        Err(_) if touches_no_medium(cdb) => Ok(()),
        Err(sense) if unit.sanitize.in_progress() => Err(sense),
        Err(sense) if accesses_medium(cdb[0]) => Err(sense),
        Err(_) => Ok(()),
    }
}

/// What to write over the medium.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Operation {
    Overwrite {
        passes: u8,
        invert: bool,
        pattern: Vec<u8>,
    },
    BlockErase,
    CryptographicErase,
}

/// SANITIZE: checks the CDB and parameter list and enters SANITIZE IN
/// PROGRESS; the medium is then sanitized by a thread of its own with
/// IMMED=1 (GOOD now), else by work handed back to the caller (GOOD when it
/// ends; see [`crate::Outcome::Later`]). Once started, the operation runs
/// to its end whatever happens to the command: SBC-4 has a sanitize
/// operation survive aborts, resets and I_T nexus loss.
pub(crate) fn sanitize(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    if cdb[1] & 0x40 != 0 {
        return Err(Sense::invalid_field_in_cdb(1, 6));
    }
    if let Some(reserved) = (2..=6).find(|&i| cdb[i] != 0) {
        return Err(Sense::invalid_field_in_cdb_byte(reserved as u16));
    }
    let immediate = cdb[1] & IMMED != 0;
    let allow_exit = cdb[1] & AUSE != 0;
    let service_action = cdb[1] & 0x1f;
    let parameter_list_length = usize::from(cdb::u16_at(cdb, 7));
    let operation = match service_action {
        OVERWRITE_SA => overwrite_parameters(unit, parameter_list_length, data_out)?,
        BLOCK_ERASE_SA | CRYPTOGRAPHIC_ERASE_SA | EXIT_FAILURE_MODE_SA => {
            if parameter_list_length != 0 {
                return Err(Sense::invalid_field_in_cdb_byte(7));
            }
            match service_action {
                BLOCK_ERASE_SA => Operation::BlockErase,
                CRYPTOGRAPHIC_ERASE_SA => Operation::CryptographicErase,
                _ => return exit_failure_mode(unit),
            }
        }
        _ => return Err(Sense::invalid_field_in_cdb(1, 4)),
    };
    unit.check_writable()?;
    if !unit.sanitize.start() {
        return Err(Sense::sanitize_in_progress());
    }
    let store = Arc::clone(&unit.store);
    let state = Arc::clone(&unit.sanitize);
    let medium = Medium {
        length_bytes: unit.capacity_blocks * unit.block_size(),
        block_size: unit.block_size() as usize,
        bytes_per_s: unit.config.sanitize_bytes_per_s,
        log: Arc::clone(&unit.media_log),
    };
    let work = move || {
        let result = run(&*store, &operation, &medium);
        state.finish(result.is_ok(), allow_exit);
        result
    };
    if immediate {
        let spawned = std::thread::Builder::new()
            .name("isoe-sanitize".to_owned())
            .spawn(move || {
                let _ = work();
            });
        if spawned.is_err() {
            unit.sanitize.finish(false, allow_exit);
            return Err(Sense::internal_target_failure());
        }
        return Ok(());
    }
    context
        .later
        .set(Some(Background::new(move || work().into())));
    Ok(())
}

/// The medium a sanitize covers and how fast it may write it.
struct Medium {
    length_bytes: u64,
    block_size: usize,
    bytes_per_s: Option<u64>,
    /// Where store failures get their sense and are logged.
    log: Arc<MediaLog>,
}

impl Medium {
    fn write_failed(&self, error: StoreError) -> Sense {
        self.log.failed(Access::Write, &error)
    }
}

/// Holds writes to a rate: after each piece, sleeps until the bytes written
/// so far are no more than the rate allows for the time gone.
struct Pace {
    started: Instant,
    written: u64,
    bytes_per_s: Option<u64>,
}

impl Pace {
    fn new(bytes_per_s: Option<u64>) -> Self {
        Self {
            started: Instant::now(),
            written: 0,
            bytes_per_s,
        }
    }

    fn wrote(&mut self, bytes: u64) {
        self.written += bytes;
        let Some(rate) = self.bytes_per_s else {
            return;
        };
        let due = Duration::from_secs_f64(self.written as f64 / rate as f64);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}

/// SBC-4 5.30.2.4 EXIT FAILURE MODE: leaves the failed state if the failed
/// SANITIZE allowed it (AUSE=1); nothing to do on a unit that did not fail.
fn exit_failure_mode(unit: &LogicalUnit) -> Result<(), Sense> {
    unit.sanitize.exit_failure_mode()
}

/// SBC-4 5.30.3 OVERWRITE parameter list: INVERT, TEST, OVERWRITE COUNT,
/// INITIALIZATION PATTERN LENGTH and the pattern, at most one block long.
fn overwrite_parameters(
    unit: &LogicalUnit,
    parameter_list_length: usize,
    data_out: &[u8],
) -> Result<Operation, Sense> {
    let block_size = unit.block_size() as usize;
    if parameter_list_length <= OVERWRITE_HEADER_LEN
        || parameter_list_length > block_size + OVERWRITE_HEADER_LEN
    {
        return Err(Sense::invalid_field_in_cdb_byte(7));
    }
    let Some(list) = data_out.get(..parameter_list_length) else {
        return Err(Sense::parameter_list_length_error());
    };
    let invert = list[0] & 0x80 != 0;
    if list[0] & 0x60 != 0 {
        // TEST: vendor test modes; none exist here.
        return Err(Sense::invalid_field_in_parameter_list(0, Some(6)));
    }
    let passes = list[0] & 0x1f;
    if passes == 0 {
        return Err(Sense::invalid_field_in_parameter_list(0, Some(4)));
    }
    let pattern_length = usize::from(cdb::u16_at(list, 2));
    if pattern_length == 0
        || pattern_length > block_size
        || pattern_length != parameter_list_length - OVERWRITE_HEADER_LEN
    {
        return Err(Sense::invalid_field_in_parameter_list(2, None));
    }
    Ok(Operation::Overwrite {
        passes,
        invert,
        pattern: list[OVERWRITE_HEADER_LEN..].to_vec(),
    })
}

/// Sanitizes the whole `medium` of `store` and makes the result durable.
/// Only OVERWRITE is paced: it writes every byte, where erasing is the
/// store's cheap deallocate or zero-range.
fn run(store: &dyn Store, operation: &Operation, medium: &Medium) -> Result<(), Sense> {
    let mut pace = Pace::new(medium.bytes_per_s);
    match operation {
        Operation::Overwrite {
            passes,
            invert,
            pattern,
        } => {
            for pass in 0..*passes {
                // SBC-4 5.30.3: INVERT flips the pattern between passes.
                let inverted = *invert && pass % 2 == 1;
                overwrite_pass(store, pattern, inverted, medium, &mut pace)?;
            }
        }
        Operation::BlockErase => store
            .unmap(0, medium.length_bytes)
            .map_err(|e| medium.write_failed(e))?,
        Operation::CryptographicErase => store
            .write_zeroes(0, medium.length_bytes)
            .map_err(|e| medium.write_failed(e))?,
    }
    store.flush().map_err(|e| medium.write_failed(e))
}

/// One overwrite pass: every block starts with the pattern, repeated to
/// fill the block.
fn overwrite_pass(
    store: &dyn Store,
    pattern: &[u8],
    inverted: bool,
    medium: &Medium,
    pace: &mut Pace,
) -> Result<(), Sense> {
    debug_assert!(!pattern.is_empty() && pattern.len() <= medium.block_size);
    let block: Vec<u8> = pattern
        .iter()
        .cycle()
        .take(medium.block_size)
        .map(|&b| if inverted { !b } else { b })
        .collect();
    let chunk_blocks = (OVERWRITE_CHUNK_BYTES / medium.block_size).max(1);
    let chunk = block.repeat(chunk_blocks);
    let mut offset = 0u64;
    while offset < medium.length_bytes {
        let len = (chunk.len() as u64).min(medium.length_bytes - offset) as usize;
        store
            .write_at(offset, &chunk[..len])
            .map_err(|e| medium.write_failed(e))?;
        offset += len as u64;
        pace.wrote(len as u64);
    }
    Ok(())
}
