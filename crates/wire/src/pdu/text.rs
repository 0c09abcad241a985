//! Text Request and Text Response (RFC 7143 §11.10, §11.11): key=value
//! text after login, such as SendTargets.

use crate::bhs::Bhs;
use crate::fields::{Lun, Opcode};

/// Text Request (RFC 7143 §11.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextRequest {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// F: the initiator's last Text Request of the exchange (§11.10.1).
    pub final_bit: bool,
    /// C: the text goes on in the next Text Request (§11.10.2).
    pub continue_bit: bool,
    /// LUN, if the text concerns one.
    pub lun: Lun,
    /// Initiator Task Tag, the same through the exchange (§11.10.3).
    pub initiator_task_tag: u32,
    /// The Text Response's tag when continuing, else 0xffffffff (§11.10.4).
    pub target_transfer_tag: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl TextRequest {
    /// The opcode a Text Request is sent with.
    pub const OPCODE: Opcode = Opcode::TextRequest;

    /// Reads a Text Request's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> TextRequest {
        TextRequest {
            immediate: bhs.immediate(),
            final_bit: bhs.final_bit(),
            continue_bit: bhs.continue_bit(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
        }
    }

    /// Writes a Text Request's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_immediate(self.immediate);
        bhs.set_final_bit(self.final_bit);
        bhs.set_continue_bit(self.continue_bit);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
    }
}

/// Text Response (RFC 7143 §11.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextResponse {
    /// F: the target's last Text Response of the exchange (§11.11.1).
    pub final_bit: bool,
    /// C: the text goes on in the next Text Response (§11.11.2).
    pub continue_bit: bool,
    /// LUN, as the request gave it.
    pub lun: Lun,
    /// The request's Initiator Task Tag (§11.11.3).
    pub initiator_task_tag: u32,
    /// A tag for the initiator to continue with, else 0xffffffff (§11.11.4).
    pub target_transfer_tag: u32,
    /// StatSN (§11.11.5).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl TextResponse {
    /// The opcode a Text Response is sent with.
    pub const OPCODE: Opcode = Opcode::TextResponse;

    /// Reads a Text Response's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> TextResponse {
        TextResponse {
            final_bit: bhs.final_bit(),
            continue_bit: bhs.continue_bit(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
        }
    }

    /// Writes a Text Response's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_final_bit(self.final_bit);
        bhs.set_continue_bit(self.continue_bit);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
    }
}
