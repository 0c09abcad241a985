//! How a command reaches its handler: the unit attention and access
//! checks every command meets, then the dispatch on its operation code to
//! the file that implements it. The top of the device server: it knows
//! every command, and no command's file knows it.

use std::cell::Cell;

use crate::attention::Delivery;
use crate::logical_unit::Context;
use crate::opcode::*;
use crate::{cdb, Background, Completion, LogicalUnit, Nexus, Outcome, Sense, UnitDirectory};

/// How long PREEMPT AND ABORT waits for the tasks it ends: as long as the
/// store calls under way may take (a network store bounds each call).
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl LogicalUnit {
    /// The bytes of the medium `cdb` covers without carrying them, once it
    /// has completed GOOD: the blocks an UNMAP deallocates (its
    /// descriptors' sum, read from `data_out`) or a WRITE SAME writes or
    /// deallocates, times the block size. 0 for any other command. For the
    /// target's counters: a few reads of the CDB and the parameter list.
    pub fn range_bytes(&self, cdb: &[u8], data_out: &[u8]) -> u64 {
        let Ok(length) = cdb::checked_length(cdb) else {
            return 0;
        };
        let cdb = &cdb[..length];
        let blocks = match cdb[0] {
            UNMAP => crate::unmap::block_count(cdb, data_out),
            WRITE_SAME_10 | WRITE_SAME_16 => crate::write_same::block_count(self, cdb),
            _ => 0,
        };
        blocks.saturating_mul(self.block_size())
    }

    /// Executes one command from `nexus` to its end, on this thread: as
    /// [`LogicalUnit::start`], then any work left for later runs here.
    pub fn execute(
        &self,
        nexus: &Nexus,
        units: &dyn UnitDirectory,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Completion {
        match self.start(nexus, units, cdb, data_out, data_in) {
            Outcome::Done(completion) => completion,
            Outcome::Later(work) => work.run(),
            Outcome::Lent(lent) => crate::copy_lent(&lent, data_in),
            Outcome::Medium(io) => {
                let buffer = if io.is_read() {
                    std::mem::take(data_in)
                } else {
                    data_out.to_vec()
                };
                let (buffer, completion) = io.run(buffer);
                if completion.is_good() && !buffer.is_empty() {
                    *data_in = buffer;
                }
                completion
            }
        }
    }

    /// Starts one command from `nexus`. data_out holds what the initiator
    /// sent (may be shorter than the CDB implies if the transport got less).
    /// Appends Data-In bytes to data_in (which the caller gives already
    /// cleared), honouring the allocation length; the transport truncates to
    /// EDTL and computes residuals. `units` are the target's other units.
    /// A long command (SANITIZE without IMMED) comes back as
    /// [`Outcome::Later`]: admitted, its effect on later commands already in
    /// place, its work to be run by the caller, on another thread if it
    /// wants this one free meanwhile.
    pub fn start(
        &self,
        nexus: &Nexus,
        units: &dyn UnitDirectory,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Outcome {
        self.start_with_digests(nexus, units, cdb, data_out, data_in, None)
    }

    /// As [`LogicalUnit::start`]; a READ copied from a store that keeps
    /// page CRCs also leaves them in `page_digests`.
    pub fn start_with_digests(
        &self,
        nexus: &Nexus,
        units: &dyn UnitDirectory,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
        page_digests: Option<&crate::PageDigests<'_>>,
    ) -> Outcome {
        // The caller hands over a cleared pooled buffer; clearing again makes
        // allocation-length truncation independent of that promise.
        data_in.clear();
        let Some(&opcode) = cdb.first() else {
            return Outcome::Done(Completion::check_condition(Sense::invalid_opcode()));
        };
        match self.attentions.deliver(nexus, opcode) {
            Delivery::Run => {}
            Delivery::AsSense(condition) => {
                let result = cdb::checked_length(cdb).and_then(|length| {
                    crate::request_sense::request_sense(&cdb[..length], &condition, data_in)
                });
                if result.is_err() {
                    data_in.clear();
                }
                return Outcome::Done(result.into());
            }
            Delivery::Report(condition) => {
                return Outcome::Done(Completion::check_condition(condition))
            }
        }
        let context = Context {
            nexus,
            units,
            later: Cell::new(None),
            medium: Cell::new(None),
            lent: Cell::new(None),
            page_digests,
        };
        let completion = self.run(&context, cdb, data_out, data_in);
        if !completion.is_good() {
            data_in.clear();
        }
        if !completion.is_good() {
            return Outcome::Done(completion);
        }
        if let Some(work) = context.later.into_inner() {
            return Outcome::Later(work);
        }
        if let Some(lent) = context.lent.into_inner() {
            return Outcome::Lent(lent);
        }
        // Only a unit with an asynchronous store leaves a medium operation.
        match self
            .is_asynchronous()
            .then(|| context.medium.into_inner())
            .flatten()
        {
            Some(io) => Outcome::Medium(io),
            None => Outcome::Done(completion),
        }
    }

    /// Runs a command no unit attention stopped: the access state of the
    /// port it came through first, then reservations, then the command.
    fn run(
        &self,
        context: &Context<'_>,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Completion {
        let checked = cdb::checked_length(cdb)
            .and_then(|length| cdb::check_control(cdb, length).map(|()| length));
        let cdb = match checked {
            Ok(length) => &cdb[..length],
            Err(sense) => return Completion::check_condition(sense),
        };
        if self.is_offline() && !matches!(cdb[0], INQUIRY | REPORT_LUNS | REQUEST_SENSE) {
            return Completion::check_condition(Sense::not_ready_offline());
        }
        let nexus = context.nexus;
        // SPC-5 5.16.2.4: a port in standby or unavailable serves only the
        // commands that report state.
        let port_groups = self.groups(context.units);
        if port_groups.may_refuse() {
            let state = port_groups.state_of_port(nexus.relative_target_port);
            if let Err(sense) = crate::alua::check_access(state, cdb) {
                return Completion::check_condition(sense);
            }
        }
        if !self.reservations.permits(nexus, cdb) && !self.holder_gone(context, cdb) {
            return Completion::reservation_conflict();
        }
        // SBC-4 4.34: while a sanitize runs (or after one failed) only the
        // commands that report state are served.
        if let Err(sense) = crate::sanitize::check_command(self, cdb) {
            return Completion::check_condition(sense);
        }
        match cdb[0] {
            RESERVE_6 | RESERVE_10 => self
                .reservations
                .reserve(&self.attentions, nexus, cdb)
                .into(),
            RELEASE_6 | RELEASE_10 => self
                .reservations
                .release(&self.attentions, nexus, cdb)
                .into(),
            PERSISTENT_RESERVE_OUT => {
                let target_ports = self.groups(context.units).relative_ports();
                match self.reservations.persistent_reserve_out(
                    nexus,
                    &self.attentions,
                    cdb,
                    data_out,
                    &target_ports,
                ) {
                    Ok(preempted) if !preempted.is_empty() => {
                        self.end_preempted_tasks(context, &preempted);
                        Completion::good()
                    }
                    result => result.map(|_| ()).into(),
                }
            }
            _ => self.dispatch(context, cdb, data_out, data_in).into(),
        }
    }

    /// PREEMPT AND ABORT (SPC-5 5.13.11.2.6): the tasks of the preempted
    /// nexuses end, here now; the command completes once they have (the
    /// other gateways' ended before the change was published), waiting
    /// off the transport's event loop as work left for later.
    fn end_preempted_tasks(&self, context: &Context<'_>, preempted: &[Nexus]) {
        let (ended, wait) = std::sync::mpsc::channel::<()>();
        self.abort_tasks(
            Some(preempted),
            Box::new(move || {
                let _ = ended.send(());
            }),
        );
        context.later.set(Some(Background::new(move || {
            match wait.recv_timeout(ABORT_WAIT) {
                Ok(()) => Completion::good(),
                Err(_) => {
                    tracing::error!(
                        "PREEMPT AND ABORT: the preempted tasks did not end within {ABORT_WAIT:?}"
                    );
                    Completion::check_condition(Sense::internal_target_failure())
                }
            }
        })));
    }

    /// A command met a reservation. An SPC-2 reservation ends with its I_T
    /// nexus (I_T nexus loss releases it), and the holder's initiator may have closed its
    /// connections an instant ago, before the target's thread for them
    /// noticed (an initiator that drops one session and at once goes on
    /// through another sees this). If the transport says so, the nexus ends
    /// now; true if `cdb` may then run.
    fn holder_gone(&self, context: &Context<'_>, cdb: &[u8]) -> bool {
        let Some(holder) = self.reservations.legacy_holder() else {
            return false;
        };
        if holder == *context.nexus || !context.units.nexus_closed(&holder) {
            return false;
        }
        self.reservations.nexus_lost(&self.attentions, &holder);
        self.reservations.permits(context.nexus, cdb)
    }

    fn dispatch(
        &self,
        context: &Context<'_>,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Result<(), Sense> {
        match cdb[0] {
            TEST_UNIT_READY => Ok(()),
            REQUEST_SENSE => {
                // SBC-4 4.11.2: during a sanitize, REQUEST SENSE reports it.
                let pending = if self.sanitize.in_progress() {
                    Sense::sanitize_in_progress()
                } else {
                    Sense::no_sense()
                };
                crate::request_sense::request_sense(cdb, &pending, data_in)
            }
            INQUIRY => crate::inquiry::inquiry(self, context, cdb, data_in),
            MODE_SENSE_6 | MODE_SENSE_10 => crate::mode_sense::mode_sense(self, cdb, data_in),
            MODE_SELECT_6 | MODE_SELECT_10 => {
                crate::mode_select::mode_select(self, context.nexus, cdb, data_out)
            }
            START_STOP_UNIT => crate::start_stop::start_stop_unit(self, cdb),
            PREVENT_ALLOW_MEDIUM_REMOVAL => crate::prevent_allow::prevent_allow_medium_removal(cdb),
            READ_CAPACITY_10 => crate::capacity::read_capacity_10(self, data_in),
            SERVICE_ACTION_IN_16 => match cdb::service_action(cdb) {
                READ_CAPACITY_16_SA => crate::capacity::read_capacity_16(self, cdb, data_in),
                GET_LBA_STATUS_SA => crate::get_lba_status::get_lba_status(self, cdb, data_in),
                _ => Err(Sense::invalid_field_in_cdb(1, 4)),
            },
            MAINTENANCE_IN => match cdb::service_action(cdb) {
                REPORT_SUPPORTED_OPERATION_CODES_SA => {
                    crate::supported_opcodes::report_supported_operation_codes(cdb, data_in)
                }
                REPORT_TARGET_PORT_GROUPS_SA => crate::alua::report_target_port_groups(
                    &self.groups(context.units),
                    cdb,
                    data_in,
                ),
                _ => Err(Sense::invalid_field_in_cdb(1, 4)),
            },
            MAINTENANCE_OUT => match (cdb::service_action(cdb), self.explicit_alua()) {
                (SET_TARGET_PORT_GROUPS_SA, Some(handler)) => crate::alua::set_target_port_groups(
                    &self.groups(context.units),
                    handler.as_ref(),
                    context.nexus.relative_target_port,
                    cdb,
                    data_out,
                ),
                _ => Err(Sense::invalid_opcode()),
            },
            REPORT_LUNS => {
                // The target answers REPORT LUNS with its whole LUN list before
                // routing to a unit; a unit asked directly knows only itself.
                crate::report_luns::report_luns_result(cdb, &[self.config.lun_number], data_in)
            }
            READ_6 | READ_10 | READ_12 | READ_16 => {
                crate::read_write::read(self, context, cdb, data_in)
            }
            WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16 => {
                crate::read_write::write(self, context, cdb, data_out)
            }
            WRITE_AND_VERIFY_10 | WRITE_AND_VERIFY_12 | WRITE_AND_VERIFY_16 => {
                crate::read_write::write_and_verify(self, cdb, data_out)
            }
            VERIFY_10 | VERIFY_12 | VERIFY_16 => crate::verify::verify(self, cdb, data_out),
            SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16 => {
                crate::sync_cache::synchronize_cache(self, context, cdb)
            }
            PRE_FETCH_10 | PRE_FETCH_16 => crate::prefetch::pre_fetch(self, cdb),
            WRITE_SAME_10 | WRITE_SAME_16 => crate::write_same::write_same(self, cdb, data_out),
            UNMAP => crate::unmap::unmap(self, cdb, data_out),
            PERSISTENT_RESERVE_IN => self.reservations.persistent_reserve_in(cdb, data_in),
            SANITIZE => crate::sanitize::sanitize(self, context, cdb, data_out),
            EXTENDED_COPY => crate::extended_copy::extended_copy(self, context, cdb, data_out),
            RECEIVE_COPY_RESULTS => {
                crate::copy_results::receive_copy_results(self, context.nexus, cdb, data_in)
            }
            READ_DEFECT_DATA_10 | READ_DEFECT_DATA_12 => {
                crate::defect_data::read_defect_data(cdb, data_in)
            }
            COMPARE_AND_WRITE => crate::compare_and_write::compare_and_write(self, cdb, data_out),
            ORWRITE_16 => crate::orwrite::orwrite(self, cdb, data_out),
            WRITE_ATOMIC_16 => crate::write_atomic::write_atomic(self, cdb, data_out),
            _ => Err(Sense::invalid_opcode()),
        }
    }
}
