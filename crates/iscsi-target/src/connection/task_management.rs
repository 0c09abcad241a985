//! Task Management Function Requests (RFC 7143 §11.5): aborts and resets.

use super::*;
use isoe_wire::pdu::{TmfFunction, TmfResponse};

/// SAM-5 6.6: a LOGICAL UNIT RESET (one unit) or TARGET RESET (every unit
/// of the session's target) tells every I_T nexus with the `condition` unit
/// attention.
fn reset_units(session: &Session, lun: Option<&Lun>, condition: isoe_scsi::Sense) {
    let Some(target) = session.target.as_deref() else {
        return;
    };
    let luns = target.luns();
    match lun {
        Some(lun) => {
            if let Some(lu) = lun.number().and_then(|n| luns.lun(n)) {
                lu.reset(condition);
            }
        }
        None => luns.units().for_each(|lu| lu.reset(condition)),
    }
}

impl Connection {
    pub(super) fn task_management(
        &mut self,
        session: &Arc<Session>,
        t: &TaskMgmtRequest,
        frame: &Frame<'_>,
    ) -> Flow {
        let exp_before = session.exp_cmd_sn();
        if let Some(info) = &self.info {
            // Counted by code, 1 to 8; any other in slot 0.
            let slot = match t.function {
                TmfFunction::Unknown(_) => 0,
                known => usize::from(known.to_u8()),
            };
            info.stats.tmf[slot].add(1);
        }
        if let Some(flow) = self.admit(session, t.immediate, t.cmd_sn, None) {
            return flow;
        }
        if !frame.data.is_empty() {
            // RFC 7143 §11.5: a Task Management Function Request carries no
            // data segment; one that does is a protocol error, and its
            // function is not performed.
            self.reject(reject::RejectReason::ProtocolError, frame.bhs);
            return Flow::Continue;
        }
        let target = session.target.clone();
        let lun_exists = |lun: &Lun| {
            target
                .as_ref()
                .and_then(|tg| lun.number().and_then(|n| tg.luns().lun(n).cloned()))
                .is_some()
        };
        // RFC 7143 §11.5.1: a function acts on the commands of its session
        // with a CmdSN below its own; an immediate one that comes after
        // later commands leaves those be.
        let before = |command: &ScsiCommand| isoe_wire::serial::sn_lt(command.cmd_sn, t.cmd_sn);
        let mut close = false;
        // Tasks on other connections that the function ends too: which,
        // and whether every session of the target is reached.
        let mut elsewhere: Option<(AbortScope, bool)> = None;
        let mut unless_found = false;
        let response = match t.function {
            TmfFunction::AbortTask => {
                let referenced = t.referenced_task_tag;
                if let Some(task) = self.take_write(referenced) {
                    let (_, _, buffer) = task.into_parts();
                    self.recycle(buffer);
                    self.bury(referenced);
                    TmfResponse::Complete
                } else if self
                    .background
                    .iter()
                    .any(|b| b.command.initiator_task_tag == referenced)
                {
                    self.abort_background(&|command| command.initiator_task_tag == referenced);
                    TmfResponse::Complete
                } else if isoe_wire::serial::sn_in_window(
                    t.ref_cmd_sn,
                    exp_before,
                    session.max_cmd_sn(),
                ) && isoe_wire::serial::sn_lt(t.ref_cmd_sn, t.cmd_sn)
                {
                    // RFC 7143 §11.5.1 (a): RefCmdSN in the window and below the TMF's own: treat as received, "Function complete".
                    let scope = AbortScope::Task(referenced);
                    session.end_unreceived(scope, t.cmd_sn, Some(t.ref_cmd_sn));
                    if session.connection_count() > 1 {
                        // An immediate command's CmdSN lies in the window
                        // though it came already: another connection may
                        // run it, and ends it first.
                        elsewhere = Some((scope, false));
                    }
                    TmfResponse::Complete
                } else if session.connection_count() > 1 {
                    // The task may run on another connection of the
                    // session: each ends it if it has it, and the answer
                    // waits for them all ("Task does not exist" if none did).
                    elsewhere = Some((AbortScope::Task(referenced), false));
                    unless_found = true;
                    TmfResponse::Complete
                } else {
                    // RFC 7143 §11.5.1 (b): the task is gone (completed) or never was.
                    TmfResponse::NoTask
                }
            }
            TmfFunction::AbortTaskSet
            | TmfFunction::ClearTaskSet
            | TmfFunction::LogicalUnitReset => {
                if !lun_exists(&t.lun) {
                    TmfResponse::NoLun
                } else {
                    self.abort_tasks(|command| command.lun == t.lun && before(command));
                    // ABORT TASK SET and CLEAR TASK SET end the tasks of
                    // this I_T nexus (every connection of the session); a
                    // unit reset those of every nexus (SAM-5 7.4, 7.6).
                    let reset = t.function == TmfFunction::LogicalUnitReset;
                    session.end_unreceived(AbortScope::Lun(t.lun), t.cmd_sn, None);
                    elsewhere = Some((AbortScope::Lun(t.lun), reset));
                    if reset {
                        reset_units(session, Some(&t.lun), isoe_scsi::attention::RESET_OCCURRED);
                    }
                    TmfResponse::Complete
                }
            }
            TmfFunction::TargetWarmReset => {
                self.abort_tasks(before);
                session.end_unreceived(AbortScope::All, t.cmd_sn, None);
                elsewhere = Some((AbortScope::All, true));
                reset_units(session, None, isoe_scsi::attention::RESET_OCCURRED);
                TmfResponse::Complete
            }
            TmfFunction::TargetColdReset => {
                // The connection closes after the response: work still out
                // finds no connection to answer.
                self.abort_tasks(before);
                self.background.clear();
                self.reads_out = 0;
                session.end_unreceived(AbortScope::All, t.cmd_sn, None);
                elsewhere = Some((AbortScope::All, true));
                reset_units(session, None, isoe_scsi::attention::POWER_ON_OCCURRED);
                close = true;
                TmfResponse::Complete
            }
            TmfFunction::TaskReassign => TmfResponse::ReassignUnsupported,
            TmfFunction::ClearAca => TmfResponse::NotSupported,
            _ => TmfResponse::Rejected,
        };
        self.log_task_management(session, t, response);
        let barrier = elsewhere.map(|(scope, every_session)| {
            let barrier = AbortBarrier::new(self.serial);
            let sessions = match (&session.target, every_session) {
                (Some(target), true) => self.server.sessions_of(target),
                _ => vec![Arc::clone(session)],
            };
            for other in &sessions {
                let own = Arc::ptr_eq(other, session);
                let below = own.then_some(t.cmd_sn);
                other.order_abort(scope, below, self.serial, &barrier, &mut self.wake);
            }
            // The origin's own hold: no count could end before every
            // connection was counted.
            let _ = barrier.done(self.serial);
            barrier
        });
        if close {
            // The connection ends: nothing waits for the others.
            self.answer_now(t.initiator_task_tag, response);
            Flow::Close
        } else {
            self.answer_task_management(t.initiator_task_tag, response, barrier, unless_found);
            Flow::Continue
        }
    }

    /// One line per function: resets at warn, ABORT TASK SET and CLEAR
    /// TASK SET at info, ABORT TASK (frequent under load) and the rest at
    /// debug.
    fn log_task_management(&self, session: &Session, t: &TaskMgmtRequest, response: TmfResponse) {
        macro_rules! event {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    initiator = %escape_for_log(&session.initiator_name),
                    addr = %self.peer,
                    target = session.target.as_ref().map(|t| tracing::field::display(&t.name)),
                    tsih = session.tsih,
                    cid = self.cid,
                    lun = match t.function {
                        TmfFunction::TargetWarmReset | TmfFunction::TargetColdReset => None,
                        _ => t.lun.number(),
                    },
                    referenced_task_tag = (t.function == TmfFunction::AbortTask)
                        .then_some(t.referenced_task_tag),
                    response = response.to_u8(),
                    "task management: {}: {}",
                    crate::log::tmf_name(t.function),
                    crate::log::tmf_response(response)
                )
            };
        }
        match t.function {
            TmfFunction::LogicalUnitReset
            | TmfFunction::TargetWarmReset
            | TmfFunction::TargetColdReset => {
                event!(tracing::Level::WARN)
            }
            TmfFunction::AbortTaskSet | TmfFunction::ClearTaskSet => event!(tracing::Level::INFO),
            _ => event!(tracing::Level::DEBUG),
        }
    }

    /// Ends the commands `which` picks without a response: those waiting
    /// for Data-Out, and those whose work is out (see `execute.rs`);
    /// whether there was any.
    pub(super) fn abort_tasks(&mut self, which: impl Fn(&ScsiCommand) -> bool) -> bool {
        let found = self.background.iter().any(|b| which(&b.command))
            || self.writes.iter().any(|(_, t)| which(&t.command));
        self.abort_background(&which);
        let tags: Vec<u32> = self
            .writes
            .iter()
            .filter(|(_, t)| which(&t.command))
            .map(|(k, _)| *k)
            .collect();
        for tag in tags {
            if let Some(task) = self.take_write(tag) {
                let (_, _, buffer) = task.into_parts();
                self.recycle(buffer);
                self.bury(tag);
            }
        }
        found
    }
}
