//! Task management (RFC 7143 §11.5, §11.6): the request, the response, and
//! their codes: the functions (§11.5.1) and the responses (§11.6.1).

use crate::bhs::Bhs;
use crate::code::wire_code;
use crate::fields::{Lun, Opcode};

wire_code! {
    /// A task management function (RFC 7143 §11.5.1).
    pub enum TmfFunction {
        /// ABORT TASK: the task `referenced_task_tag` names.
        AbortTask = 1,
        /// ABORT TASK SET: every task of this I_T nexus on the LU.
        AbortTaskSet = 2,
        /// CLEAR ACA.
        ClearAca = 3,
        /// CLEAR TASK SET: every task on the LU.
        ClearTaskSet = 4,
        /// LOGICAL UNIT RESET.
        LogicalUnitReset = 5,
        /// TARGET WARM RESET.
        TargetWarmReset = 6,
        /// TARGET COLD RESET.
        TargetColdReset = 7,
        /// TASK REASSIGN: move a task to this connection.
        TaskReassign = 8,
    }
}

wire_code! {
    /// A task management function's outcome (RFC 7143 §11.6.1).
    pub enum TmfResponse {
        /// Function complete.
        Complete = 0,
        /// Task does not exist.
        NoTask = 1,
        /// LUN does not exist.
        NoLun = 2,
        /// Task still allegiant.
        StillAllegiant = 3,
        /// Task allegiance reassignment not supported.
        ReassignUnsupported = 4,
        /// Task management function not supported.
        NotSupported = 5,
        /// Function authorization failed.
        AuthFailed = 6,
        /// Function rejected.
        Rejected = 255,
    }
}

/// SCSI Task Management Function Request (RFC 7143 §11.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskMgmtRequest {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// The function (§11.5.1).
    pub function: TmfFunction,
    /// The logical unit the function acts on (§11.5.3).
    pub lun: Lun,
    /// The request's own Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// The task to abort or reassign, else 0xffffffff (§11.5.4).
    pub referenced_task_tag: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// RefCmdSN: the CmdSN of the task referenced (§11.5.5).
    pub ref_cmd_sn: u32,
    /// ExpDataSN, for TASK REASSIGN (§11.5.6).
    pub exp_data_sn: u32,
}

impl TaskMgmtRequest {
    /// The opcode a Task Management Function Request is sent with.
    pub const OPCODE: Opcode = Opcode::TaskMgmtRequest;

    /// Reads a Task Management Function Request's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> TaskMgmtRequest {
        TaskMgmtRequest {
            immediate: bhs.immediate(),
            function: TmfFunction::from_u8(bhs.function()),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            referenced_task_tag: bhs.referenced_task_tag(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
            ref_cmd_sn: bhs.ref_cmd_sn(),
            exp_data_sn: bhs.exp_data_sn(),
        }
    }

    /// Writes a Task Management Function Request's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_immediate(self.immediate);
        // RFC 7143 §11.5: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_function(self.function.to_u8());
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_referenced_task_tag(self.referenced_task_tag);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
        bhs.set_ref_cmd_sn(self.ref_cmd_sn);
        bhs.set_exp_data_sn(self.exp_data_sn);
    }
}

/// SCSI Task Management Function Response (RFC 7143 §11.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskMgmtResponse {
    /// The outcome (§11.6.1).
    pub response: TmfResponse,
    /// The request's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl TaskMgmtResponse {
    /// The opcode a Task Management Function Response is sent with.
    pub const OPCODE: Opcode = Opcode::TaskMgmtResponse;

    /// Reads a Task Management Function Response's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> TaskMgmtResponse {
        TaskMgmtResponse {
            response: TmfResponse::from_u8(bhs.response()),
            initiator_task_tag: bhs.initiator_task_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
        }
    }

    /// Writes a Task Management Function Response's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.6: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_response(self.response.to_u8());
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bhs::BHS_LEN;

    #[test]
    fn a_request_with_an_unknown_function_parses_and_emits_unchanged() {
        let request = TaskMgmtRequest {
            immediate: true,
            function: TmfFunction::from_u8(0x42),
            initiator_task_tag: 7,
            ..Default::default()
        };
        assert_eq!(request.function, TmfFunction::Unknown(0x42));
        assert_eq!(TmfResponse::default(), TmfResponse::Complete);
        let mut bytes = [0u8; BHS_LEN];
        let mut bhs = Bhs::new_unchecked(&mut bytes[..]);
        request.emit(&mut bhs);
        let parsed = TaskMgmtRequest::parse(&Bhs::new_unchecked(&bytes[..]));
        assert_eq!(parsed, request);
    }
}
