//! Reject (RFC 7143 §11.17) and its reasons (§11.17.1).

use crate::bhs::Bhs;
use crate::code::wire_code;
use crate::fields::{Opcode, RESERVED_TAG};

wire_code! {
    /// Why a PDU was rejected (RFC 7143 §11.17.1).
    pub enum RejectReason {
        /// Data (payload) digest error.
        DataDigestError = 0x02,
        /// SNACK Reject.
        SnackReject = 0x03,
        /// Protocol error.
        ProtocolError = 0x04,
        /// Command not supported.
        CommandNotSupported = 0x05,
        /// Immediate command reject: too many immediate commands.
        ImmediateCommandReject = 0x06,
        /// Task in progress.
        TaskInProgress = 0x07,
        /// Invalid data ack.
        InvalidDataAck = 0x08,
        /// Invalid PDU field.
        InvalidPduField = 0x09,
        /// Long operation reject: out of resources to make a Target
        /// Transfer Tag.
        LongOperationReject = 0x0a,
        /// Deprecated (negotiation reset).
        DeprecatedNegotiationReset = 0x0b,
        /// Waiting for Logout.
        WaitingForLogout = 0x0c,
    }
}

/// Reject (RFC 7143 §11.17). The data segment is the rejected PDU's header;
/// the Initiator Task Tag is always 0xffffffff (no field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reject {
    /// Reason (§11.17.1).
    pub reason: RejectReason,
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
            reason: RejectReason::from_u8(bhs.reason()),
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
        bhs.set_reason(self.reason.to_u8());
        bhs.set_initiator_task_tag(RESERVED_TAG);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_data_sn_or_r2t_sn(self.data_sn_or_r2t_sn);
    }
}
