//! Reject (RFC 7143 §11.17) and its reasons (§11.17.1).

use crate::bhs::Bhs;
use crate::fields::{Opcode, RESERVED_TAG};

/// Reason: data (payload) digest error.
pub const DATA_DIGEST_ERROR: u8 = 0x02;
/// Reason: SNACK Reject.
pub const SNACK_REJECT: u8 = 0x03;
/// Reason: protocol error.
pub const PROTOCOL_ERROR: u8 = 0x04;
/// Reason: command not supported.
pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
/// Reason: immediate command reject, too many immediate commands.
pub const IMMEDIATE_COMMAND_REJECT: u8 = 0x06;
/// Reason: task in progress.
pub const TASK_IN_PROGRESS: u8 = 0x07;
/// Reason: invalid data ack.
pub const INVALID_DATA_ACK: u8 = 0x08;
/// Reason: invalid PDU field.
pub const INVALID_PDU_FIELD: u8 = 0x09;
/// Reason: long operation reject, out of resources to generate a Target Transfer Tag.
pub const LONG_OPERATION_REJECT: u8 = 0x0a;
/// Reason: deprecated (negotiation reset).
pub const DEPRECATED_NEGOTIATION_RESET: u8 = 0x0b;
/// Reason: waiting for Logout.
pub const WAITING_FOR_LOGOUT: u8 = 0x0c;

/// Reject (RFC 7143 §11.17). The data segment is the rejected PDU's header;
/// the Initiator Task Tag is always 0xffffffff (no field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reject {
    /// Reason, one of this module's codes (§11.17.1).
    pub reason: u8,
    /// StatSN (§11.17.3).
    pub stat_sn: u32,
    /// ExpCmdSN (§11.17.3).
    pub exp_cmd_sn: u32,
    /// MaxCmdSN (§11.17.3).
    pub max_cmd_sn: u32,
    /// DataSN/R2TSN: the next one expected, when a data SNACK is rejected (§11.17.2).
    pub data_sn_or_r2t_sn: u32,
}

impl Reject {
    /// The opcode a Reject is sent with.
    pub const OPCODE: Opcode = Opcode::Reject;

    /// Reads a Reject's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> Reject {
        Reject {
            reason: bhs.reason(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            data_sn_or_r2t_sn: bhs.data_sn_or_r2t_sn(),
        }
    }

    /// Writes a Reject's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.17: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_reason(self.reason);
        bhs.set_initiator_task_tag(RESERVED_TAG);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_data_sn_or_r2t_sn(self.data_sn_or_r2t_sn);
    }
}
