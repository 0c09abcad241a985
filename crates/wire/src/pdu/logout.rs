//! Logout (RFC 7143 §11.14, §11.15): the request, the response, and their
//! codes: the reasons (§11.14.1) and the responses (§11.15.1).

use crate::bhs::Bhs;
use crate::code::wire_code;
use crate::fields::Opcode;

wire_code! {
    /// Why a logout is asked (RFC 7143 §11.14.1).
    pub enum LogoutReason {
        /// Close the session.
        CloseSession = 0,
        /// Close the connection.
        CloseConnection = 1,
        /// Remove the connection for recovery.
        RemoveConnectionForRecovery = 2,
    }
}

wire_code! {
    /// A logout's outcome (RFC 7143 §11.15.1).
    pub enum LogoutResponseCode {
        /// Connection or session closed successfully.
        Closed = 0,
        /// CID not found.
        CidNotFound = 1,
        /// Connection recovery is not supported.
        RecoveryUnsupported = 2,
        /// Cleanup failed.
        CleanupFailed = 3,
    }
}

/// Logout Request (RFC 7143 §11.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogoutRequest {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// Reason Code (§11.14.1).
    pub reason_code: LogoutReason,
    /// Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// CID of the connection to close or remove (§11.14.3).
    pub cid: u16,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN (§11.14.4).
    pub exp_stat_sn: u32,
}

impl LogoutRequest {
    /// The opcode a Logout Request is sent with.
    pub const OPCODE: Opcode = Opcode::LogoutRequest;

    /// Reads a Logout Request's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> LogoutRequest {
        LogoutRequest {
            immediate: bhs.immediate(),
            reason_code: LogoutReason::from_u8(bhs.reason_code()),
            initiator_task_tag: bhs.initiator_task_tag(),
            cid: bhs.cid(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
        }
    }

    /// Writes a Logout Request's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_immediate(self.immediate);
        // RFC 7143 §11.14: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_reason_code(self.reason_code.to_u8());
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_cid(self.cid);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
    }
}

/// Logout Response (RFC 7143 §11.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogoutResponse {
    /// Response (§11.15.1).
    pub response: LogoutResponseCode,
    /// The request's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// Time2Wait, in seconds (§11.15.3).
    pub time2wait: u16,
    /// Time2Retain, in seconds (§11.15.4).
    pub time2retain: u16,
}

impl LogoutResponse {
    /// The opcode a Logout Response is sent with.
    pub const OPCODE: Opcode = Opcode::LogoutResponse;

    /// Reads a Logout Response's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> LogoutResponse {
        LogoutResponse {
            response: LogoutResponseCode::from_u8(bhs.response()),
            initiator_task_tag: bhs.initiator_task_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            time2wait: bhs.time2wait(),
            time2retain: bhs.time2retain(),
        }
    }

    /// Writes a Logout Response's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.15: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_response(self.response.to_u8());
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_time2wait(self.time2wait);
        bhs.set_time2retain(self.time2retain);
    }
}
