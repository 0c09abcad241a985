//! A write command collecting its Data-Out (RFC 7143 §4.2.4, §11.7, §11.8).
//!
//! Data arrives as immediate data, then an unsolicited burst (InitialR2T=No,
//! up to FirstBurstLength), then bursts the target solicits with R2Ts of at
//! most MaxBurstLength, at most MaxOutstandingR2T at a time. We negotiate
//! DataPDUInOrder=Yes and DataSequenceInOrder=Yes, so bytes arrive in offset
//! order and are appended: no zero-fill, one copy from the receive buffer.

use isoe_wire::pdu::{DataOut, ScsiCommand, RESERVED_TAG};
use std::collections::VecDeque;
use std::time::Instant;
use thiserror::Error;

/// Why a Data-Out PDU does not fit its task.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DataOutError {
    /// The Target Transfer Tag matches no outstanding R2T of the task.
    #[error("no outstanding R2T with target transfer tag {0:#x}")]
    UnknownTransferTag(u32),
    /// DataSN is not the next one in its sequence.
    #[error("DataSN {found}, expected {expected}")]
    DataSn {
        /// The DataSN we expected.
        expected: u32,
        /// The DataSN the PDU carried.
        found: u32,
    },
    /// The Buffer Offset is not where the sequence continues.
    #[error("buffer offset {found}, expected {expected}")]
    Offset {
        /// The offset we expected.
        expected: u32,
        /// The offset the PDU carried.
        found: u32,
    },
    /// The PDU runs past its burst (unsolicited burst or the R2T's length).
    #[error("data runs past the end of its burst")]
    Overrun,
    /// Unsolicited data was sent where none may be (InitialR2T=Yes, or beyond FirstBurstLength).
    #[error("unsolicited data not allowed here")]
    Unsolicited,
}

/// An R2T the target sent and awaits data for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solicitation {
    /// The tag the initiator echoes in its Data-Out.
    pub target_transfer_tag: u32,
    /// R2TSN within the task.
    pub r2t_sn: u32,
    /// Where the burst starts.
    pub buffer_offset: u32,
    /// How many bytes it asks for.
    pub desired_data_transfer_length: u32,
    next_data_sn: u32,
}

/// One write command waiting for its data.
#[derive(Debug)]
pub struct WriteTask {
    /// The command as received.
    pub command: ScsiCommand,
    cdb: Vec<u8>,
    buffer: Vec<u8>,
    edtl: u32,
    unsolicited_end: u32,
    unsolicited_next_data_sn: u32,
    unsolicited_open: bool,
    next_r2t_offset: u32,
    next_r2t_sn: u32,
    max_burst_length: u32,
    max_outstanding_r2t: usize,
    outstanding: VecDeque<Solicitation>,
    /// Bytes taken from the write budget for this task (see
    /// [`crate::budget::Budget`]): what it may receive unasked, plus each R2T.
    pub charged: usize,
    /// When data for the task last arrived, or it last asked for some.
    pub last_data: Option<Instant>,
    /// When the command was taken (its latency runs from here); the
    /// connection sets it, from the time its batch began, with no clock read.
    pub started: Option<Instant>,
}

impl WriteTask {
    /// A task for `command` whose immediate data (if any) is `immediate`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        command: ScsiCommand,
        cdb: Vec<u8>,
        mut buffer: Vec<u8>,
        immediate: &[u8],
        initial_r2t: bool,
        first_burst_length: u32,
        max_burst_length: u32,
        max_outstanding_r2t: u16,
    ) -> WriteTask {
        let edtl = command.expected_data_transfer_length;
        debug_assert!(immediate.len() as u32 <= edtl);
        buffer.clear();
        buffer.extend_from_slice(immediate);
        let imm = immediate.len() as u32;
        // RFC 7143 §13.14: unsolicited data (immediate plus Data-Out) is bounded by FirstBurstLength.
        let unsolicited_end = if initial_r2t {
            imm
        } else {
            edtl.min(first_burst_length.max(imm))
        };
        WriteTask {
            command,
            cdb,
            buffer,
            edtl,
            unsolicited_end,
            unsolicited_next_data_sn: 0,
            unsolicited_open: unsolicited_end > imm,
            next_r2t_offset: unsolicited_end,
            next_r2t_sn: 0,
            max_burst_length: max_burst_length.max(512),
            max_outstanding_r2t: max_outstanding_r2t.max(1) as usize,
            outstanding: VecDeque::new(),
            charged: 0,
            last_data: None,
            started: None,
        }
    }

    /// Bytes the initiator may send without an R2T (immediate data and
    /// the unsolicited burst).
    pub fn unsolicited_len(&self) -> u32 {
        self.unsolicited_end
    }

    /// How many bytes the next R2T would ask for, if the task wants more
    /// data and may have another outstanding.
    pub fn next_r2t_len(&self) -> Option<u32> {
        if self.next_r2t_offset >= self.edtl || self.outstanding.len() >= self.max_outstanding_r2t {
            return None;
        }
        Some(self.max_burst_length.min(self.edtl - self.next_r2t_offset))
    }

    /// True while the task waits for data the initiator owes: solicited,
    /// or unsolicited and not yet all in.
    pub fn awaits_data(&self) -> bool {
        !self.outstanding.is_empty() || self.unsolicited_open
    }

    /// The next R2T to send, if the task wants more data and may have another outstanding.
    pub fn next_r2t(&mut self, target_transfer_tag: u32) -> Option<Solicitation> {
        let len = self.next_r2t_len()?;
        // Room for the burst as it is asked for, not for the whole EDTL at
        // once: a write announced and never sent holds no memory.
        self.buffer.reserve(len as usize);
        let r2t = Solicitation {
            target_transfer_tag,
            r2t_sn: self.next_r2t_sn,
            buffer_offset: self.next_r2t_offset,
            desired_data_transfer_length: len,
            next_data_sn: 0,
        };
        self.next_r2t_sn = self.next_r2t_sn.wrapping_add(1);
        self.next_r2t_offset += len;
        self.outstanding.push_back(r2t);
        Some(r2t)
    }

    /// Accepts one Data-Out. Ok(true) when all EDTL bytes are in.
    pub fn accept(&mut self, d: &DataOut, data: &[u8]) -> Result<bool, DataOutError> {
        let received = self.buffer.len() as u32;
        let len = data.len() as u32;
        if d.target_transfer_tag == RESERVED_TAG {
            if !self.unsolicited_open {
                return Err(DataOutError::Unsolicited);
            }
            check_sequence(
                self.unsolicited_next_data_sn,
                d.data_sn,
                received,
                d.buffer_offset,
            )?;
            if received + len > self.unsolicited_end {
                return Err(DataOutError::Overrun);
            }
            self.unsolicited_next_data_sn += 1;
            if d.final_bit || received + len == self.unsolicited_end {
                self.unsolicited_open = false;
            }
        } else {
            // DataSequenceInOrder=Yes: bursts complete in R2T order, so the data belongs to the oldest one.
            let r2t = self
                .outstanding
                .iter_mut()
                .find(|r| r.target_transfer_tag == d.target_transfer_tag)
                .ok_or(DataOutError::UnknownTransferTag(d.target_transfer_tag))?;
            check_sequence(r2t.next_data_sn, d.data_sn, received, d.buffer_offset)?;
            let end = r2t.buffer_offset + r2t.desired_data_transfer_length;
            if received < r2t.buffer_offset || received + len > end {
                return Err(DataOutError::Overrun);
            }
            r2t.next_data_sn += 1;
            if received + len == end {
                self.outstanding
                    .retain(|r| r.target_transfer_tag != d.target_transfer_tag);
            }
        }
        self.buffer.extend_from_slice(data);
        Ok(self.buffer.len() as u32 == self.edtl)
    }

    /// The command, its CDB and the collected data.
    pub fn into_parts(self) -> (ScsiCommand, Vec<u8>, Vec<u8>) {
        (self.command, self.cdb, self.buffer)
    }
}

fn check_sequence(
    expected_sn: u32,
    data_sn: u32,
    expected_offset: u32,
    offset: u32,
) -> Result<(), DataOutError> {
    if data_sn != expected_sn {
        return Err(DataOutError::DataSn {
            expected: expected_sn,
            found: data_sn,
        });
    }
    if offset != expected_offset {
        return Err(DataOutError::Offset {
            expected: expected_offset,
            found: offset,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(edtl: u32) -> ScsiCommand {
        ScsiCommand {
            write: true,
            final_bit: true,
            expected_data_transfer_length: edtl,
            initiator_task_tag: 9,
            ..Default::default()
        }
    }

    fn data_out(ttt: u32, data_sn: u32, offset: u32, final_bit: bool) -> DataOut {
        DataOut {
            initiator_task_tag: 9,
            target_transfer_tag: ttt,
            data_sn,
            buffer_offset: offset,
            final_bit,
            ..Default::default()
        }
    }

    #[test]
    fn immediate_unsolicited_and_solicited_data_assemble_in_order() {
        // EDTL 10000, 1000 immediate, FirstBurstLength 4000, MaxBurstLength 4000, two R2Ts outstanding.
        let mut task = WriteTask::new(
            command(10_000),
            vec![0x2a],
            Vec::new(),
            &[1; 1000],
            false,
            4000,
            4000,
            2,
        );
        let r1 = task.next_r2t(100).unwrap();
        let r2 = task.next_r2t(101).unwrap();
        assert_eq!(
            (r1.buffer_offset, r1.desired_data_transfer_length, r1.r2t_sn),
            (4000, 4000, 0)
        );
        assert_eq!(
            (r2.buffer_offset, r2.desired_data_transfer_length, r2.r2t_sn),
            (8000, 2000, 1)
        );
        assert!(task.next_r2t(102).is_none(), "everything is solicited");
        assert_eq!(
            task.accept(&data_out(RESERVED_TAG, 0, 1000, false), &[2; 1500]),
            Ok(false)
        );
        assert_eq!(
            task.accept(&data_out(RESERVED_TAG, 1, 2500, true), &[3; 1500]),
            Ok(false)
        );
        assert_eq!(
            task.accept(&data_out(100, 0, 4000, true), &[4; 4000]),
            Ok(false)
        );
        assert_eq!(
            task.accept(&data_out(101, 0, 8000, false), &[5; 1000]),
            Ok(false)
        );
        assert_eq!(
            task.accept(&data_out(101, 1, 9000, true), &[6; 1000]),
            Ok(true)
        );
        let (_, cdb, data) = task.into_parts();
        assert_eq!(cdb, vec![0x2a]);
        assert_eq!(data.len(), 10_000);
        assert_eq!(
            (data[999], data[1000], data[2500], data[4000], data[8000], data[9999]),
            (1, 2, 3, 4, 5, 6)
        );
    }

    #[test]
    fn wrong_data_sn_offset_tag_and_overrun_are_refused() {
        let mut task = WriteTask::new(command(8192), vec![], Vec::new(), &[], true, 65536, 4096, 1);
        assert_eq!(
            task.accept(&data_out(RESERVED_TAG, 0, 0, true), &[0; 512]),
            Err(DataOutError::Unsolicited)
        );
        let r = task.next_r2t(7).unwrap();
        assert!(task.next_r2t(8).is_none(), "MaxOutstandingR2T=1");
        assert_eq!(
            task.accept(&data_out(8, 0, 0, false), &[0; 512]),
            Err(DataOutError::UnknownTransferTag(8))
        );
        assert_eq!(
            task.accept(&data_out(7, 1, 0, false), &[0; 512]),
            Err(DataOutError::DataSn {
                expected: 0,
                found: 1
            })
        );
        assert_eq!(
            task.accept(&data_out(7, 0, 512, false), &[0; 512]),
            Err(DataOutError::Offset {
                expected: 0,
                found: 512
            })
        );
        assert_eq!(
            task.accept(&data_out(7, 0, 0, false), &[0; 5000]),
            Err(DataOutError::Overrun)
        );
        assert_eq!(
            task.accept(&data_out(r.target_transfer_tag, 0, 0, true), &[0; 4096]),
            Ok(false)
        );
        let r = task.next_r2t(9).unwrap();
        assert_eq!((r.buffer_offset, r.r2t_sn), (4096, 1));
        assert_eq!(
            task.accept(&data_out(9, 0, 4096, true), &[0; 4096]),
            Ok(true)
        );
    }
}
