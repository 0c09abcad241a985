//! NOP-Out and NOP-In (RFC 7143 §11.18, §11.19): pings either way.

use crate::bhs::Bhs;
use crate::fields::{Lun, Opcode};

/// NOP-Out (RFC 7143 §11.18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NopOut {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// The LUN the ping concerns, echoed in the NOP-In.
    pub lun: Lun,
    /// 0xffffffff when answering a NOP-In, which needs no answer (§11.18.1).
    pub initiator_task_tag: u32,
    /// The NOP-In's tag when answering one, else 0xffffffff (§11.18.2).
    pub target_transfer_tag: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl NopOut {
    /// The opcode a NOP-Out is sent with.
    pub const OPCODE: Opcode = Opcode::NopOut;

    /// Reads a NOP-Out's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> NopOut {
        NopOut {
            immediate: bhs.immediate(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
        }
    }

    /// Writes a NOP-Out's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_immediate(self.immediate);
        // RFC 7143 §11.18: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
    }
}

/// NOP-In (RFC 7143 §11.19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NopIn {
    /// The LUN of the NOP-Out answered, or the one the target asks about.
    pub lun: Lun,
    /// The NOP-Out's tag when answering one, else 0xffffffff.
    pub initiator_task_tag: u32,
    /// 0xffffffff unless the target wants an answer (§11.19.1).
    pub target_transfer_tag: u32,
    /// StatSN (§11.19.2).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl NopIn {
    /// The opcode a NOP-In is sent with.
    pub const OPCODE: Opcode = Opcode::NopIn;

    /// Reads a NOP-In's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> NopIn {
        NopIn {
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
        }
    }

    /// Writes a NOP-In's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.19: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
    }
}
