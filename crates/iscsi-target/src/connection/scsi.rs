//! SCSI Command and Data-Out (RFC 7143 §11.3, §11.7, §11.8): admitting a
//! command, soliciting its write data within the write budget, running it,
//! and building its Data-In and SCSI Response.

use super::execute::DataOutBytes;
use super::*;

/// Whether a write's data is worth asking for: the LUN exists, the CDB is
/// whole, it moves data out, and the amount fits what the command must
/// carry. Anything else is answered before any data is solicited.
fn worth_soliciting(lu: Option<&Arc<LogicalUnit>>, cdb: &[u8], edtl: u32) -> bool {
    let Some(lu) = lu else {
        return false;
    };
    matches!(lu.transfer_length(cdb), Ok((isoe_scsi::DataDirection::Out, wanted)) if wanted > 0)
        && lu.check_data_out_length(cdb, edtl).is_ok()
}

/// Bytes of sense data carried at most (fixed format with SKS fits in 18).
const SENSE_BYTES_MAX: usize = 252;

/// What a completed command moved, as its LUN's figures count it.
#[derive(Clone, Copy)]
struct Moved {
    /// Data-In bytes sent.
    send_len: u32,
    /// What a write left of its expected length.
    write_residual: Residual,
    /// The medium an UNMAP or WRITE SAME covered.
    range_bytes: u64,
}
impl Connection {
    pub(super) fn scsi_command(
        &mut self,
        session: &Arc<Session>,
        cmd: &ScsiCommand,
        frame: &Frame<'_>,
    ) -> Flow {
        // Borrowed from the caller's session handle, not cloned: no atomic
        // reference-count traffic per command.
        let Some(target) = session.target.as_deref() else {
            // RFC 7143 §4.3: a discovery session carries no SCSI commands.
            self.reject(reject::RejectReason::ProtocolError, frame.bhs);
            return Flow::Continue;
        };
        let task = (&cmd.lun, cmd.initiator_task_tag);
        if let Some(flow) = self.admit(session, cmd.immediate, cmd.cmd_sn, Some(task)) {
            return flow;
        }
        self.command_started = self.last_rx;
        let cdb = frame.cdb();
        // The LUN table as it is now: one load, no lock, no shared count.
        let luns = target.luns();
        let lu = cmd.lun.number().and_then(|n| luns.lun(n));
        let edtl = cmd.expected_data_transfer_length;
        if !cmd.write && ((edtl > 0 && !cmd.read) || !frame.data.is_empty()) {
            // RFC 7143 §11.3.1: the R and W bits say which way the data
            // flows; data announced with neither, or sent without W, is a
            // protocol error (as LIO answers too), not a command to run.
            self.reject(reject::RejectReason::ProtocolError, frame.bhs);
            return Flow::Continue;
        }
        if frame.data.len() as u32 > edtl
            || (!frame.data.is_empty() && !session.params.immediate_data)
        {
            // RFC 7143 §11.3: immediate data beyond EDTL, or when ImmediateData=No, is a protocol error.
            self.reject(reject::RejectReason::ProtocolError, frame.bhs);
            return Flow::Continue;
        }
        let all_in = frame.data.len() as u32 == edtl;
        if !cmd.write || edtl == 0 || all_in || !worth_soliciting(lu, &cdb, edtl) {
            // Data is asked for only once the LUN and the command are known
            // good: a command that will fail (or wants no data) is answered
            // now, and whatever data the peer still sends unasked is dropped.
            let data_out = if cmd.write { frame.data } else { &[][..] };
            if cmd.write && !all_in {
                self.bury(cmd.initiator_task_tag);
            }
            self.execute(session, &luns, cmd, &cdb, DataOutBytes::Borrowed(data_out));
            return Flow::Continue;
        }
        if edtl > WRITE_TRANSFER_BYTES_MAX
            || self.writes.len() >= WRITE_TASKS_MAX
            || self.writes.contains_key(&cmd.initiator_task_tag)
        {
            self.reject(reject::RejectReason::ProtocolError, frame.bhs);
            return Flow::Close;
        }
        let params = &session.params;
        let buffer = self.take_buffer();
        let mut task = WriteTask::new(
            *cmd,
            cdb.into_owned(),
            buffer,
            frame.data,
            params.initial_r2t,
            params.first_burst_length,
            params.max_burst_length,
            params.max_outstanding_r2t,
        );
        // The immediate data is here already; what the peer may still send
        // unasked (up to FirstBurstLength) must fit the budget, or the
        // command is answered TASK SET FULL (SAM-5 5.3) now and that data is
        // dropped as it comes, never buffered.
        let immediate = frame.data.len();
        let unasked = (task.unsolicited_len() as usize).saturating_sub(immediate);
        let peer = self.peer.ip();
        if unasked > 0 && !self.server.write_budget.try_take(peer, unasked) {
            let (command, _, buffer) = task.into_parts();
            self.recycle(buffer);
            self.bury(command.initiator_task_tag);
            let full = Completion {
                status: Status::TaskSetFull,
                sense: None,
            };
            let empty = Payload::Pooled(Vec::new());
            self.complete(session, &command, full, empty, Residual::default());
            return Flow::Continue;
        }
        self.server.write_budget.force_take(peer, immediate);
        task.started = Some(self.last_rx);
        task.charged = immediate + unasked;
        task.last_data = Some(self.last_rx);
        if self.writes.insert(cmd.initiator_task_tag, task).is_none() {
            self.waiting_writes.add(session);
        }
        self.solicit(session, cmd.initiator_task_tag);
        Flow::Continue
    }

    /// Sends R2Ts for a write task up to MaxOutstandingR2T, as far as the
    /// process's write budget allows; a task that gets none waits in
    /// `starved` for budget given back.
    pub(super) fn solicit(&mut self, session: &Session, itt: u32) {
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        loop {
            let Some(task) = self.writes.get_mut(&itt) else {
                return;
            };
            let Some(len) = task.next_r2t_len() else {
                return;
            };
            if !self
                .server
                .write_budget
                .try_take(self.peer.ip(), len as usize)
            {
                if !task.awaits_data() && !self.starved.contains(&itt) {
                    self.starved.push_back(itt);
                }
                return;
            }
            task.charged += len as usize;
            task.last_data = Some(self.last_rx);
            let ttt = self.next_target_transfer_tag();
            let Some(task) = self.writes.get_mut(&itt) else {
                return;
            };
            let Some(r2t) = task.next_r2t(ttt) else {
                return;
            };
            let pdu = Pdu::R2t(pdu::R2t {
                lun: task.command.lun,
                initiator_task_tag: itt,
                target_transfer_tag: r2t.target_transfer_tag,
                // RFC 7143 §11.8.4: an R2T carries the next StatSN without advancing it.
                stat_sn: self.stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                r2t_sn: r2t.r2t_sn,
                buffer_offset: r2t.buffer_offset,
                desired_data_transfer_length: r2t.desired_data_transfer_length,
            });
            let limits = self.send_limits;
            self.out.push(&pdu, &[], &limits);
            if let Some(info) = &self.info {
                info.stats.r2t.add(1);
            }
        }
    }

    pub(super) fn data_out(
        &mut self,
        session: &Arc<Session>,
        d: &DataOut,
        frame: &Frame<'_>,
    ) -> Flow {
        let Some(task) = self.writes.get_mut(&d.initiator_task_tag) else {
            if self.buried.contains(&d.initiator_task_tag) {
                return Flow::Continue;
            }
            // RFC 7143 §11.7: Data-Out for a task we don't know: Reject, "Invalid PDU field".
            self.reject(reject::RejectReason::InvalidPduField, frame.bhs);
            return Flow::Continue;
        };
        task.last_data = Some(self.last_rx);
        match task.accept(d, frame.data) {
            Ok(false) => {
                self.solicit(session, d.initiator_task_tag);
                Flow::Continue
            }
            Ok(true) => {
                let task = self.take_write(d.initiator_task_tag).expect("task present");
                let Some(target) = session.target.as_deref() else {
                    return Flow::Close;
                };
                self.command_started = task.started.unwrap_or(self.last_rx);
                let (command, cdb, buffer) = task.into_parts();
                let luns = target.luns();
                self.execute(session, &luns, &command, &cdb, DataOutBytes::Owned(buffer));
                Flow::Continue
            }
            Err(DataOutError::UnknownTransferTag(_)) => {
                self.reject(reject::RejectReason::InvalidPduField, frame.bhs);
                Flow::Continue
            }
            Err(error) => {
                // At ERL 0 a task whose Data-Out sequence is broken can't be
                // recovered: end it with CHECK CONDITION (SAM-5 ABORTED
                // COMMAND, iSCSI ASCs of SPC-5 table 49) and keep the
                // connection for the session's other tasks.
                let (asc, ascq) = match error {
                    DataOutError::DataSn { .. } => (0x4b, 0x00),
                    DataOutError::Offset { .. } => (0x4b, 0x05),
                    DataOutError::Overrun | DataOutError::Unsolicited => (0x4b, 0x02),
                    DataOutError::UnknownTransferTag(_) => (0x4b, 0x01),
                };
                if let Some(task) = self.take_write(d.initiator_task_tag) {
                    let (command, _, buffer) = task.into_parts();
                    self.recycle(buffer);
                    self.bury(command.initiator_task_tag);
                    let sense = isoe_scsi::Sense::new(
                        isoe_scsi::sense::sense_key::ABORTED_COMMAND,
                        asc,
                        ascq,
                    );
                    let completion = Completion {
                        status: Status::CheckCondition,
                        sense: Some(sense),
                    };
                    let empty = Payload::Pooled(Vec::new());
                    self.complete(session, &command, completion, empty, Residual::default());
                }
                Flow::Continue
            }
        }
    }

    /// Removes a write task, giving its bytes back to the write budget.
    pub(super) fn take_write(&mut self, itt: u32) -> Option<WriteTask> {
        let task = self.writes.remove(&itt)?;
        self.waiting_writes.remove();
        self.server.write_budget.give(self.peer.ip(), task.charged);
        Some(task)
    }

    /// Solicits data for tasks that waited for write budget, oldest first,
    /// while there is budget.
    pub(super) fn feed_starved(&mut self) {
        let Phase::Full(session) = &self.phase else {
            return;
        };
        let session = Arc::clone(session);
        for _ in 0..self.starved.len() {
            let Some(itt) = self.starved.pop_front() else {
                return;
            };
            self.solicit(&session, itt);
            if self.starved.back() == Some(&itt) {
                // Still no budget: the others wait too.
                return;
            }
        }
    }

    /// Remembers a task that ended early, so the rest of its Data-Out is dropped quietly.
    pub(super) fn bury(&mut self, initiator_task_tag: u32) {
        if self.buried.len() >= BURIED_TASKS_MAX {
            self.buried.pop_front();
        }
        self.buried.push_back(initiator_task_tag);
    }

    pub(super) fn recycle(&mut self, buffer: Vec<u8>) {
        self.pool.give(buffer);
    }

    /// Counts a completed command in its LUN's figures (or as a command to
    /// no LUN), with its latency and, where the store was called, its
    /// sampled stages.
    #[inline]
    fn count(
        &mut self,
        session: &Session,
        cmd: &ScsiCommand,
        completion: &Completion,
        moved: Moved,
        store_called: Option<Instant>,
    ) {
        let Moved {
            send_len,
            write_residual,
            range_bytes,
        } = moved;
        let edtl = cmd.expected_data_transfer_length;
        if let (Some(info), Some(lun)) = (&self.info, cmd.lun.number()) {
            let op = crate::metrics::Op::of(cmd.cdb[0]);
            let bytes = match op {
                crate::metrics::Op::Read => u64::from(send_len),
                crate::metrics::Op::Unmap | crate::metrics::Op::WriteSame => range_bytes,
                _ if cmd.write && !write_residual.underflow => u64::from(edtl),
                _ if cmd.write => u64::from(edtl.saturating_sub(write_residual.count)),
                _ => 0,
            };
            let sense_key = completion.sense.as_ref().map(|s| s.key);
            let exists = || {
                session
                    .target
                    .as_ref()
                    .is_some_and(|t| t.luns().lun(lun).is_some())
            };
            match self.lun_stats.slot(&info.stats, lun, exists) {
                Some(slot) => {
                    self.lun_stats
                        .at(slot)
                        .count(op, bytes, completion.status as u8, sense_key);
                    match store_called {
                        Some(called) => {
                            // Set only where the driver gave a clock.
                            let answered = self.stage_clock.map_or(called, |clock| clock());
                            let store = (called, answered);
                            self.latencies
                                .push_sampled(slot, op, self.command_started, store);
                        }
                        None => self.latencies.push(slot, op, self.command_started),
                    }
                }
                None => info.stats.commands_no_lun.add(1),
            }
        }
    }

    pub(super) fn complete(
        &mut self,
        session: &Session,
        cmd: &ScsiCommand,
        completion: Completion,
        data_in: Payload,
        write_residual: Residual,
    ) {
        let edtl = cmd.expected_data_transfer_length;
        let produced = data_in.len() as u32;
        let send_len = if cmd.read { produced.min(edtl) } else { 0 };
        let residual = if cmd.read {
            Residual::between(produced, edtl)
        } else if produced > 0 {
            // Data to send without the R bit (RFC 7143 §11.3.1: the
            // initiator expects none): nothing goes, and the residual
            // says so (§11.4.5.1: overflow).
            Residual::between(produced, 0)
        } else {
            write_residual
        };
        let good = completion.status == Status::Good && completion.sense.is_none();
        let range_bytes = std::mem::take(&mut self.command_range_bytes);
        let store_called = self.store_called.take();
        if self.counting {
            let moved = Moved {
                send_len,
                write_residual,
                range_bytes,
            };
            self.count(session, cmd, &completion, moved, store_called);
        }
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        let limits = self.send_limits;
        if send_len == 0 {
            data_in.recycle(&mut self.pool);
        } else {
            let index = self.out.adopt(data_in);
            let segment = self.max_send_segment.max(512);
            let mut offset = 0u32;
            let mut data_sn = 0u32;
            while offset < send_len {
                let len = segment.min(send_len - offset);
                let last = offset + len == send_len;
                let with_status = last && good;
                let pdu = Pdu::DataIn(DataIn {
                    final_bit: last,
                    acknowledge: false,
                    overflow: with_status && residual.overflow,
                    underflow: with_status && residual.underflow,
                    status_present: with_status,
                    status: completion.status as u8,
                    lun: cmd.lun,
                    initiator_task_tag: cmd.initiator_task_tag,
                    target_transfer_tag: RESERVED_TAG,
                    stat_sn: if with_status {
                        self.take_stat_sn()
                    } else {
                        self.stat_sn
                    },
                    exp_cmd_sn,
                    max_cmd_sn,
                    data_sn,
                    buffer_offset: offset,
                    residual_count: if with_status { residual.count } else { 0 },
                });
                self.out.push_with_data(
                    &pdu,
                    index,
                    offset as usize..(offset + len) as usize,
                    &limits,
                );
                offset += len;
                data_sn += 1;
            }
            if good {
                return;
            }
        }
        let mut sense_segment = [0u8; 2 + SENSE_BYTES_MAX];
        let sense_len = match &completion.sense {
            Some(sense) => {
                let fixed = sense.to_fixed();
                let n = fixed.len().min(SENSE_BYTES_MAX);
                sense_segment[..2].copy_from_slice(&(n as u16).to_be_bytes());
                sense_segment[2..2 + n].copy_from_slice(&fixed[..n]);
                2 + n
            }
            None => 0,
        };
        let pdu = Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            overflow: residual.overflow,
            underflow: residual.underflow,
            response: 0,
            status: completion.status as u8,
            initiator_task_tag: cmd.initiator_task_tag,
            snack_tag: 0,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
            exp_data_sn: 0,
            bidi_read_residual_count: 0,
            residual_count: residual.count,
        });
        self.out.push(&pdu, &sense_segment[..sense_len], &limits);
    }
}
