//! Task management (RFC 7143 §11.5, §11.6): the request, the response, and
//! their codes: the functions (§11.5.1) and the responses (§11.6.1).

use crate::bhs::Bhs;
use crate::fields::{Lun, Opcode};

/// ABORT TASK: the task `referenced_task_tag` names.
pub const ABORT_TASK: u8 = 1;
/// ABORT TASK SET: every task of this I_T nexus on the LU.
pub const ABORT_TASK_SET: u8 = 2;
/// CLEAR ACA.
pub const CLEAR_ACA: u8 = 3;
/// CLEAR TASK SET: every task on the LU.
pub const CLEAR_TASK_SET: u8 = 4;
/// LOGICAL UNIT RESET.
pub const LOGICAL_UNIT_RESET: u8 = 5;
/// TARGET WARM RESET.
pub const TARGET_WARM_RESET: u8 = 6;
/// TARGET COLD RESET.
pub const TARGET_COLD_RESET: u8 = 7;
/// TASK REASSIGN: move a task to this connection.
pub const TASK_REASSIGN: u8 = 8;
/// Response: function complete.
pub const RESP_COMPLETE: u8 = 0;
/// Response: task does not exist.
pub const RESP_NO_TASK: u8 = 1;
/// Response: LUN does not exist.
pub const RESP_NO_LUN: u8 = 2;
/// Response: task still allegiant.
pub const RESP_STILL_ALLEGIANT: u8 = 3;
/// Response: task allegiance reassignment not supported.
pub const RESP_REASSIGN_UNSUPPORTED: u8 = 4;
/// Response: function not supported.
pub const RESP_NOT_SUPPORTED: u8 = 5;
/// Response: function authorization failed.
pub const RESP_AUTH_FAILED: u8 = 6;
/// Response: function rejected.
pub const RESP_REJECTED: u8 = 255;

/// SCSI Task Management Function Request (RFC 7143 §11.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskMgmtRequest {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// The function, one of this module's codes (§11.5.1).
    pub function: u8,
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
            function: bhs.function(),
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
        bhs.set_function(self.function);
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
    /// The outcome, one of this module's `RESP_` codes (§11.6.1).
    pub response: u8,
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
            response: bhs.response(),
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
        bhs.set_response(self.response);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
    }
}
