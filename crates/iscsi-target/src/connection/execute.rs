//! Store work that runs off the event loop ([`Action::Run`]) and its one
//! completion path ([`Connection::complete_work`]).
//!
//! Two kinds go out: the rest of a command the device server left for later
//! (SANITIZE without IMMED, [`isoe_scsi::Outcome::Later`]), and a whole
//! command to a unit whose store may wait on a device
//! ([`LogicalUnit::may_block`]: a read or write of a file or block LUN, a
//! SYNCHRONIZE CACHE), which the driver runs on its I/O threads so that its
//! worker goes on serving its other connections. A command's response goes
//! out when its work comes back, unless a task management function ended
//! the task meanwhile. Ending such a task waits for its work: a write under
//! way cannot be called back, so the function's response is held until the
//! store call returned (SAM-5 7.1: no aborted command changes the medium
//! once the function has completed). Work left for later is different: a
//! sanitize survives aborts and resets (SBC-4 4.11), so its task ends at
//! once and the work goes on.

use super::target_view::TargetView;
use super::work::{CommandJob, Job};
use super::*;
use crate::session::StoreWork;
use isoe_scsi::opcode::{UNMAP, WRITE_SAME_10, WRITE_SAME_16};
use isoe_wire::pdu::TmfResponse;
use std::cell::Cell;

/// Write data as it reaches [`Connection::execute`].
pub(super) enum DataOutBytes<'a> {
    /// Immediate data, still in the receive buffer.
    Borrowed(&'a [u8]),
    /// Solicited data gathered in a buffer of the connection's pool.
    Owned(Vec<u8>),
}

impl DataOutBytes<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            DataOutBytes::Borrowed(bytes) => bytes,
            DataOutBytes::Owned(buffer) => buffer,
        }
    }
}

impl Connection {
    /// Runs a command and queues its Data-In and status, or hands it to the
    /// driver when its unit's store may block.
    pub(super) fn execute(
        &mut self,
        session: &Arc<Session>,
        luns: &Arc<LunTable>,
        cmd: &ScsiCommand,
        cdb: &[u8],
        data_out: DataOutBytes<'_>,
    ) {
        self.stats.commands += 1;
        let mask = u64::from(crate::metrics::STAGE_SAMPLE_EVERY - 1);
        if self.counting && (self.stats.commands & mask == 0 || self.sample_now) {
            // Sampled for its stages. Taken by `complete` or `hand_out` of
            // this very command, so an unsampled one needs no write here.
            self.store_called = self.stage_clock.map(|clock| clock());
            self.sample_due = self.command_started + crate::metrics::STAGE_SAMPLE_GAP;
            self.sample_now = false;
        }
        let lun = cmd.lun.number();
        // Known only from the parameter list (UNMAP) or the unit's
        // capacity (WRITE SAME of 0 blocks): read now, while both are here.
        self.command_range_bytes = match cdb[0] {
            UNMAP | WRITE_SAME_10 | WRITE_SAME_16 if self.counting => lun
                .and_then(|n| luns.lun(n))
                .map_or(0, |lu| lu.range_bytes(cdb, data_out.as_slice())),
            _ => 0,
        };
        let offload = self.server.config.datapath.io_threads > 0
            && lun
                .and_then(|n| luns.lun(n))
                .is_some_and(|lu| lu.may_block(cdb));
        let mut data_in = self.take_buffer();
        let view = TargetView {
            luns,
            server: &self.server,
        };
        // With a data digest, a READ copied from a memory LUN also brings
        // the pages' CRCs the store keeps, and the digest is folded from them.
        let crc_impl = self.send_limits.crc;
        let crc = move |bytes: &[u8]| crc_impl.crc32c(bytes);
        let page_crcs = Cell::new(None);
        let page_digests = isoe_scsi::PageDigests {
            crc: &crc,
            crcs: &page_crcs,
        };
        let request = isoe_scsi::Request {
            lun,
            write: cmd.write,
            expected_length: cmd.expected_data_transfer_length,
            cdb,
            data_out: data_out.as_slice(),
            page_digests: self.send_limits.data_digest.then_some(&page_digests),
        };
        if offload && isoe_scsi::opcode::is_read(cdb[0]) {
            // Data in the page cache is read here, as from memory; a read
            // that would wait on the device goes to the I/O threads whole.
            let ((outcome, residual), blocked) = isoe_store::without_waiting(|| {
                isoe_scsi::route(&session.nexus, &view, &request, &mut data_in)
            });
            if !blocked {
                let data_in = (data_in, page_crcs.take());
                return self.finish_inline(session, cmd, outcome, residual, data_in, data_out);
            }
            data_in.clear();
            page_crcs.take();
        }
        if offload {
            let data_out = self.own_data_out(data_out);
            let job = CommandJob {
                session: Arc::clone(session),
                luns: Arc::clone(luns),
                server: Arc::clone(&self.server),
                lun,
                write: cmd.write,
                expected_length: cmd.expected_data_transfer_length,
                cdb: cdb.to_vec(),
                data_out,
                data_in,
            };
            self.hand_out(cmd, Job::Command(Box::new(job)), Residual::default(), true);
            return;
        }
        let (outcome, write_residual) =
            isoe_scsi::route(&session.nexus, &view, &request, &mut data_in);
        let data_in = (data_in, page_crcs.take());
        self.finish_inline(session, cmd, outcome, write_residual, data_in, data_out);
    }

    /// Queues the response of a command run here, or hands out the work it
    /// left for later. `data_in` comes with its pages' CRCs when the store
    /// gave them.
    fn finish_inline(
        &mut self,
        session: &Session,
        cmd: &ScsiCommand,
        outcome: Outcome,
        write_residual: Residual,
        (data_in, page_crcs): (Vec<u8>, Option<isoe_scsi::PageCrcs>),
        data_out: DataOutBytes<'_>,
    ) {
        if let Outcome::Medium(io) = outcome {
            // The store reads into the Data-In buffer or writes from an
            // owned copy of the Data-Out; the response goes out when it ends.
            let buffer = if io.is_read() {
                self.recycle_data_out(data_out);
                data_in
            } else {
                self.recycle(data_in);
                self.own_data_out(data_out)
            };
            self.hand_out(cmd, Job::Medium(io, buffer), write_residual, true);
            return;
        }
        self.recycle_data_out(data_out);
        match outcome {
            Outcome::Done(completion) => {
                let data_in = match page_crcs {
                    Some(crcs) if completion.is_good() => Payload::Paged(data_in, crcs),
                    _ => Payload::Pooled(data_in),
                };
                self.complete(session, cmd, completion, data_in, write_residual);
            }
            Outcome::Lent(lent) => {
                // Sent straight from the store's memory: the buffer is not needed.
                self.recycle(data_in);
                let good = Completion::good();
                self.complete(session, cmd, good, Payload::Lent(lent), write_residual);
            }
            Outcome::Later(background) => {
                self.recycle(data_in);
                self.hand_out(cmd, Job::Later(background), write_residual, false);
            }
            Outcome::Medium(_) => unreachable!("handed out above"),
        }
    }

    fn recycle_data_out(&mut self, data_out: DataOutBytes<'_>) {
        if let DataOutBytes::Owned(buffer) = data_out {
            self.recycle(buffer);
        }
    }

    /// The Data-Out in a buffer of the connection's own, for work that
    /// outlives the receive buffer.
    fn own_data_out(&mut self, data_out: DataOutBytes<'_>) -> Vec<u8> {
        match data_out {
            DataOutBytes::Owned(buffer) => buffer,
            DataOutBytes::Borrowed([]) => Vec::new(),
            DataOutBytes::Borrowed(bytes) => {
                let mut buffer = self.take_buffer();
                buffer.extend_from_slice(bytes);
                buffer
            }
        }
    }

    /// Hands a command's work to the driver ([`Action::Run`]); its
    /// response goes out from [`Connection::complete_work`].
    fn hand_out(&mut self, cmd: &ScsiCommand, job: Job, residual: Residual, holds: bool) {
        let work = Work {
            job,
            counted: self
                .bound
                .as_ref()
                .map(|session| StoreWork::begin(session, &self.conn_work)),
        };
        let token = self.next_token;
        self.next_token += 1;
        self.reads_out += read_bytes(cmd);
        self.background.push(BackgroundTask {
            token,
            command: *cmd,
            residual,
            holds,
            aborted: false,
            started: self.command_started,
            range_bytes: std::mem::take(&mut self.command_range_bytes),
            store_called: self.store_called.take(),
        });
        self.runs.push_back((token, work));
    }

    /// Whether commands are running in the background.
    pub fn has_background(&self) -> bool {
        !self.background.is_empty()
    }

    /// Ends the background tasks `which` picks without a response. Work
    /// left for later goes on and its task ends now; a whole command's
    /// task ends when its work returns. Returns whether any such work is
    /// still out, so that a task management response must wait for it.
    pub(super) fn abort_background(&mut self, which: &dyn Fn(&ScsiCommand) -> bool) -> bool {
        self.background
            .retain(|task| task.holds || !which(&task.command));
        self.reads_out = self.background.iter().map(|t| read_bytes(&t.command)).sum();
        let mut waiting = false;
        for task in &mut self.background {
            if which(&task.command) {
                task.aborted = true;
            }
            waiting |= task.aborted;
        }
        waiting
    }

    /// Queues a task management response once the aborted work still out
    /// has returned, here and on the connections `barrier` counts.
    pub(super) fn answer_task_management(
        &mut self,
        initiator_task_tag: u32,
        response: TmfResponse,
        barrier: Option<Arc<AbortBarrier>>,
        unless_found: bool,
    ) {
        self.held_tmf.push(HeldTmf {
            initiator_task_tag,
            response,
            barrier,
            unless_found,
        });
        self.release_held();
    }

    /// Queues a task management response at once.
    pub(super) fn answer_now(&mut self, initiator_task_tag: u32, response: TmfResponse) {
        self.send_task_management_response(HeldTmf {
            initiator_task_tag,
            response,
            barrier: None,
            unless_found: false,
        });
    }

    /// Ends the tasks other connections' task management functions ordered
    /// ended here ([`Action::Wake`] brought them).
    pub(super) fn take_orders(&mut self, session: &Session) {
        let orders = session.take_orders(self.serial);
        for order in orders {
            let (scope, below) = (order.scope, order.below);
            let found = self.abort_tasks(|command| {
                scope.covers(&command.lun, command.initiator_task_tag)
                    && below.is_none_or(|below| isoe_wire::serial::sn_lt(command.cmd_sn, below))
            });
            if found {
                order.barrier.found_task();
            }
            self.owed.push(order.barrier);
        }
        self.release_held();
    }

    /// Once no aborted work is out: tells the functions from other
    /// connections that their tasks here have ended, and sends, in order,
    /// the responses whose functions have nothing more to wait for.
    pub(super) fn release_held(&mut self) {
        if self.background.iter().any(|task| task.aborted) {
            return;
        }
        for barrier in std::mem::take(&mut self.owed) {
            if let Some(origin) = barrier.done(self.serial) {
                self.wake.push(origin);
            }
        }
        while self
            .held_tmf
            .first()
            .is_some_and(|held| held.barrier.as_ref().is_none_or(|b| b.is_done()))
        {
            let held = self.held_tmf.remove(0);
            self.send_task_management_response(held);
        }
    }

    fn send_task_management_response(&mut self, held: HeldTmf) {
        let (exp_cmd_sn, max_cmd_sn) = self.window();
        let found = held.barrier.as_ref().is_some_and(|b| b.any_found());
        let pdu = Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: if held.unless_found && !found {
                TmfResponse::NoTask
            } else {
                held.response
            },
            initiator_task_tag: held.initiator_task_tag,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
    }

    /// Work handed out by [`Action::Run`] is done: its response is queued,
    /// unless the command was aborted meanwhile; task management responses
    /// that waited for it go out once no aborted work is left.
    pub fn complete_work(&mut self, token: u64, finished: Finished) {
        let Finished {
            completion,
            data_in,
            data_out,
            residual,
        } = finished;
        self.recycle(data_out);
        let Some(index) = self.background.iter().position(|b| b.token == token) else {
            self.recycle(data_in);
            return;
        };
        let task = self.background.remove(index);
        self.reads_out = self.reads_out.saturating_sub(read_bytes(&task.command));
        if task.aborted {
            self.recycle(data_in);
            self.release_held();
            return;
        }
        let Phase::Full(session) = &self.phase else {
            self.recycle(data_in);
            return;
        };
        let session = Arc::clone(session);
        let residual = residual.unwrap_or(task.residual);
        self.command_started = task.started;
        self.command_range_bytes = task.range_bytes;
        self.store_called = task.store_called;
        self.complete(
            &session,
            &task.command,
            completion,
            data_in.into(),
            residual,
        );
    }
}

/// The Data-In a command's work will bring back: a read's expected length.
fn read_bytes(command: &ScsiCommand) -> usize {
    if command.read {
        command.expected_data_transfer_length as usize
    } else {
        0
    }
}
