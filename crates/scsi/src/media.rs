//! What the device server answers when its store fails, and the log line
//! that says so.
//!
//! Every isoe logical unit is thin provisioned, whatever its store: READ
//! CAPACITY (16) reports LBPME=1 and the Logical Block Provisioning VPD page
//! PROVISIONING TYPE 010b. So a store that runs out of room
//! ([`StoreError::NoSpace`]: ENOSPC, EDQUOT) while writing, flushing or
//! deallocating is answered as SBC-4 4.7.3.6 asks of a thin-provisioned
//! unit that cannot allocate: DATA PROTECT, SPACE ALLOCATION FAILED WRITE
//! PROTECT (27h/07h). A store that refuses this process for good while
//! others reach the medium ([`StoreError::Unavailable`]: a gateway the
//! cluster fenced) makes the path unavailable: NOT READY, LOGICAL UNIT NOT
//! ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE (02h/04h/0Ch), which a
//! multipath initiator answers by retrying through another path. A store
//! that gave up waiting for its medium ([`StoreError::is_timed_out`]: an
//! RBD operation past `rados_osd_op_timeout` while an OSD stalls) has lost
//! nothing: ABORTED COMMAND, LOGICAL UNIT COMMUNICATION TIME-OUT
//! (0Bh/08h/01h), which initiators retry (Linux's SCSI layer does, then
//! multipath fails the path over), so a stall that ends rides through
//! instead of reaching the file system as lost data. Any other store
//! failure is MEDIUM ERROR: UNRECOVERED READ ERROR (11h/00h) when reading,
//! WRITE ERROR (0Ch/00h) otherwise.
//!
//! Each failure is logged (a `tracing` event at error level; the `isoe`
//! binary writes it to stderr) with the unit's identity and the
//! operating system's error. A failing disk fails every command, so the log
//! is held to one line per [`LOG_INTERVAL`] for each unit and each of the
//! two kinds (out of space, other): the first failure is logged at once,
//! and the next line after the interval counts those held back meanwhile
//! (there is no timer: a burst that ends within the interval leaves its
//! count to the next failure).
//! The clock is read only where the line is written ([`MediaLog::failed`]);
//! the decision itself ([`MediaLog::record`]) takes the time as an argument.

use isoe_sync::MutexExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use isoe_store::StoreError;

use crate::sense::sense_key;
use crate::{LunConfig, Sense};

/// At most one log line per unit and kind of failure in this time.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What the device server was doing with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading data or the allocation map.
    Read,
    /// Writing, flushing, unmapping or zeroing.
    Write,
}

/// The sense for a store failure during `access` (see the module doc).
pub(crate) fn sense_for(access: Access, error: &StoreError) -> Sense {
    match access {
        _ if error.is_unavailable() => crate::alua::unavailable_sense(),
        _ if error.is_timed_out() => Sense::new(sense_key::ABORTED_COMMAND, 0x08, 0x01),
        Access::Write if error.is_no_space() => Sense::space_allocation_failed_write_protect(),
        Access::Write => Sense::write_error(),
        Access::Read => Sense::unrecovered_read_error(),
    }
}

/// The words of the sense keys and codes [`sense_for`] gives, for log lines.
fn describe(sense: Sense) -> &'static str {
    match (sense.key, sense.asc, sense.ascq) {
        (sense_key::DATA_PROTECT, 0x27, 0x07) => {
            "DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT"
        }
        (sense_key::MEDIUM_ERROR, 0x0c, 0x00) => "MEDIUM ERROR, WRITE ERROR",
        (sense_key::MEDIUM_ERROR, 0x11, 0x00) => "MEDIUM ERROR, UNRECOVERED READ ERROR",
        (sense_key::ABORTED_COMMAND, 0x08, 0x01) => {
            "ABORTED COMMAND, LOGICAL UNIT COMMUNICATION TIME-OUT"
        }
        (sense_key::NOT_READY, 0x04, 0x0c) => {
            "NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE"
        }
        _ => "CHECK CONDITION",
    }
}

/// Whether a failure is logged now (see [`Limiter::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// The first failure of its kind: logged.
    First,
    /// Logged, after this many were held back since the last line.
    Again { held_back: u64 },
    /// Held back: a line of this kind was written less than an interval ago.
    HeldBack,
}

/// The rate limit of one kind of failure on one unit.
#[derive(Debug, Default)]
struct Limiter {
    last_line: Option<Instant>,
    held_back: u64,
}

impl Limiter {
    fn admit(&mut self, now: Instant) -> Admit {
        match self.last_line {
            Some(last) if now.saturating_duration_since(last) < LOG_INTERVAL => {
                self.held_back += 1;
                Admit::HeldBack
            }
            last => {
                self.last_line = Some(now);
                let held_back = std::mem::take(&mut self.held_back);
                match last {
                    None => Admit::First,
                    Some(_) => Admit::Again { held_back },
                }
            }
        }
    }
}

/// The store failures of one logical unit: their sense, and their log.
#[derive(Debug)]
pub(crate) struct MediaLog {
    /// Names the unit in log lines: LUN, target, serial.
    unit: String,
    /// Out of space, and every other failure.
    limiters: Mutex<[Limiter; 2]>,
}

impl MediaLog {
    /// The log of the unit `config` describes.
    pub(crate) fn new(config: &LunConfig) -> Self {
        let mut unit = format!("LUN {}", config.lun_number);
        if !config.target_name.is_empty() {
            unit.push_str(&format!(" of {}", config.target_name));
        }
        let serial = if config.unit_serial.is_empty() {
            config.naa_hex()
        } else {
            config.unit_serial.clone()
        };
        unit.push_str(&format!(" (serial {serial})"));
        Self {
            unit,
            limiters: Mutex::default(),
        }
    }

    /// The sense for `error` during `access`; logs the failure unless the
    /// rate limit holds it back.
    pub(crate) fn failed(&self, access: Access, error: &StoreError) -> Sense {
        let sense = sense_for(access, error);
        if error.is_would_block() {
            // Not a failure: the caller makes the call again where it may
            // wait (`isoe_store::without_waiting`) and drops this answer.
            return sense;
        }
        if let Some(line) = self.record(Instant::now(), error, sense) {
            tracing::error!("{line}");
        }
        sense
    }

    /// Counts a failure at `now` answered with `sense`; returns the line to
    /// log, or None if it is held back.
    fn record(&self, now: Instant, error: &StoreError, sense: Sense) -> Option<String> {
        let kind = usize::from(!error.is_no_space());
        let admit = self.limiters.lock_unpoisoned()[kind].admit(now);
        let suffix = match admit {
            Admit::HeldBack => return None,
            Admit::First => format!(
                "; later failures of this kind are logged at most every {} s, with a count",
                LOG_INTERVAL.as_secs()
            ),
            Admit::Again { held_back: 0 } => String::new(),
            Admit::Again { held_back } => {
                format!("; {held_back} more since the last line of this kind")
            }
        };
        Some(format!(
            "{}: {error}; answered {} ({:02X}/{:02X}/{:02X}){suffix}",
            self.unit,
            describe(sense),
            sense.key,
            sense.asc,
            sense.ascq,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(errno: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno)
    }

    fn no_space() -> StoreError {
        StoreError::io("pwrite", 4096, os(28))
    }

    fn eio() -> StoreError {
        StoreError::io("pread", 512, os(5))
    }

    fn log() -> MediaLog {
        MediaLog::new(&LunConfig {
            lun_number: 3,
            unit_serial: "SER1".into(),
            target_name: "iqn.2026-11.io.isoe:db".into(),
            ..LunConfig::default()
        })
    }

    #[test]
    fn out_of_space_is_data_protect_only_when_writing() {
        let sense = sense_for(Access::Write, &no_space());
        assert_eq!((sense.key, sense.asc, sense.ascq), (0x07, 0x27, 0x07));
        let sense = sense_for(Access::Write, &eio());
        assert_eq!((sense.key, sense.asc, sense.ascq), (0x03, 0x0c, 0x00));
        for error in [no_space(), eio()] {
            let sense = sense_for(Access::Read, &error);
            assert_eq!((sense.key, sense.asc, sense.ascq), (0x03, 0x11, 0x00));
        }
    }

    #[test]
    fn a_fenced_store_makes_the_path_unavailable_for_reads_and_writes() {
        let fenced = StoreError::Unavailable {
            what: "rbd_aio_write at offset 0".into(),
            message: "this client was fenced (blocklisted) by the cluster".into(),
        };
        for access in [Access::Read, Access::Write] {
            let sense = sense_for(access, &fenced);
            assert_eq!((sense.key, sense.asc, sense.ascq), (0x02, 0x04, 0x0c));
        }
        let line = log()
            .record(Instant::now(), &fenced, sense_for(Access::Write, &fenced))
            .unwrap();
        assert!(
            line.contains("answered NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE (02/04/0C)"),
            "{line}"
        );
    }

    #[test]
    fn a_store_that_timed_out_is_answered_with_a_retryable_sense_not_a_medium_error() {
        let timed_out = StoreError::io(
            "rbd_aio_read",
            0,
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        );
        for access in [Access::Read, Access::Write] {
            let sense = sense_for(access, &timed_out);
            assert_eq!(
                (sense.key, sense.asc, sense.ascq),
                (0x0b, 0x08, 0x01),
                "{access:?}"
            );
        }
        let line = log()
            .record(
                Instant::now(),
                &timed_out,
                sense_for(Access::Read, &timed_out),
            )
            .unwrap();
        assert!(
            line.contains(
                "answered ABORTED COMMAND, LOGICAL UNIT COMMUNICATION TIME-OUT (0B/08/01)"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_line_names_the_unit_the_os_error_and_the_answer() {
        let error = no_space();
        let line = log()
            .record(Instant::now(), &error, sense_for(Access::Write, &error))
            .expect("the first failure is logged");
        assert!(
            line.starts_with(
                "LUN 3 of iqn.2026-11.io.isoe:db (serial SER1): \
                 pwrite at offset 4096 failed: No space left on device (os error 28); \
                 answered DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (07/27/07); \
                 later failures of this kind are logged at most every 10 s"
            ),
            "{line}"
        );
        let anonymous = MediaLog::new(&LunConfig::default());
        let line = anonymous
            .record(Instant::now(), &eio(), Sense::unrecovered_read_error())
            .unwrap();
        assert!(
            line.starts_with("LUN 0 (serial 60000000000000000000000000000000): pread"),
            "{line}"
        );
        assert!(line.contains("MEDIUM ERROR, UNRECOVERED READ ERROR (03/11/00)"));
    }

    #[test]
    fn a_storm_is_one_line_per_interval_with_a_count_per_kind() {
        let log = log();
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let write = Sense::write_error();
        let full = Sense::space_allocation_failed_write_protect();
        assert!(log.record(at(0), &no_space(), full).is_some());
        for s in 0..10 {
            assert_eq!(log.record(at(s), &no_space(), full), None, "second {s}");
        }
        // Another kind of failure has a limit of its own.
        assert!(log.record(at(5), &eio(), write).is_some());
        assert_eq!(log.record(at(6), &eio(), write), None);
        let line = log.record(at(10), &no_space(), full).expect("after 10 s");
        assert!(
            line.ends_with("; 10 more since the last line of this kind"),
            "{line}"
        );
        assert_eq!(log.record(at(19), &no_space(), full), None);
        let line = log.record(at(20), &no_space(), full).unwrap();
        assert!(line.ends_with("; 1 more since the last line of this kind"));
        let line = log.record(at(40), &no_space(), full).unwrap();
        assert!(line.ends_with("(07/27/07)"), "nothing held back: {line}");
        let line = log.record(at(16), &eio(), write).unwrap();
        assert!(line.ends_with("; 1 more since the last line of this kind"));
    }
}
