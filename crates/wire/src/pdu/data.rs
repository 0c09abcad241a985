//! The data of a command: SCSI Data-Out, SCSI Data-In and Ready To
//! Transfer (RFC 7143 §11.7, §11.8).

use crate::bhs::Bhs;
use crate::fields::{Lun, Opcode};

/// SCSI Data-Out (RFC 7143 §11.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataOut {
    /// F: the last Data-Out of the burst (§11.7.1).
    pub final_bit: bool,
    /// LUN, as the R2T gave it (§11.7.4).
    pub lun: Lun,
    /// The command's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// The R2T's tag, or 0xffffffff for unsolicited data (§11.7.4).
    pub target_transfer_tag: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// DataSN, counted within the burst (§11.7.5).
    pub data_sn: u32,
    /// Buffer Offset, in bytes from the start of the command's data (§11.7.6).
    pub buffer_offset: u32,
}

impl DataOut {
    /// The opcode a Data-Out is sent with.
    pub const OPCODE: Opcode = Opcode::DataOut;

    /// Reads a Data-Out's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> DataOut {
        DataOut {
            final_bit: bhs.final_bit(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            exp_stat_sn: bhs.exp_stat_sn(),
            data_sn: bhs.data_sn(),
            buffer_offset: bhs.buffer_offset(),
        }
    }

    /// Writes a Data-Out's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_final_bit(self.final_bit);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
        bhs.set_data_sn(self.data_sn);
        bhs.set_buffer_offset(self.buffer_offset);
    }
}

/// SCSI Data-In (RFC 7143 §11.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataIn {
    /// F: the last Data-In of the sequence (§11.7.1).
    pub final_bit: bool,
    /// A: the target asks for a DataACK SNACK (§11.7.2).
    pub acknowledge: bool,
    /// O: Residual Overflow, with S (§11.7.3).
    pub overflow: bool,
    /// U: Residual Underflow, with S (§11.7.3).
    pub underflow: bool,
    /// S bit: the status is in this PDU (only with F).
    pub status_present: bool,
    /// The SCSI status, with S; written as 0 without it.
    pub status: u8,
    /// LUN, with A (§11.7.4).
    pub lun: Lun,
    /// The command's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// A tag for the DataACK SNACK, with A, else 0xffffffff (§11.7.4).
    pub target_transfer_tag: u32,
    /// StatSN, with S.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// DataSN, counted through the command (§11.7.5).
    pub data_sn: u32,
    /// Buffer Offset, in bytes from the start of the command's data (§11.7.6).
    pub buffer_offset: u32,
    /// Residual Count, in bytes, with S (§11.7.3).
    pub residual_count: u32,
}

impl DataIn {
    /// The opcode a Data-In is sent with.
    pub const OPCODE: Opcode = Opcode::DataIn;

    /// Reads a Data-In's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> DataIn {
        DataIn {
            final_bit: bhs.final_bit(),
            acknowledge: bhs.acknowledge(),
            overflow: bhs.overflow(),
            underflow: bhs.underflow(),
            status_present: bhs.status_present(),
            status: bhs.status(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            data_sn: bhs.data_sn(),
            buffer_offset: bhs.buffer_offset(),
            residual_count: bhs.residual_count(),
        }
    }

    /// Writes a Data-In's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_final_bit(self.final_bit);
        bhs.set_acknowledge(self.acknowledge);
        bhs.set_overflow(self.overflow);
        bhs.set_underflow(self.underflow);
        bhs.set_status_present(self.status_present);
        // RFC 7143 §11.7.3: the status byte means something only with S.
        bhs.set_status(if self.status_present { self.status } else { 0 });
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_data_sn(self.data_sn);
        bhs.set_buffer_offset(self.buffer_offset);
        bhs.set_residual_count(self.residual_count);
    }
}

/// Ready To Transfer (RFC 7143 §11.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct R2t {
    /// The command's LUN.
    pub lun: Lun,
    /// The command's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// The tag the Data-Out PDUs answering it carry (§11.8.5).
    pub target_transfer_tag: u32,
    /// StatSN: the next one, not advanced by the R2T (§11.8.3).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// R2TSN, counted through the command (§11.8.2).
    pub r2t_sn: u32,
    /// Buffer Offset of the data asked for, in bytes (§11.8.4).
    pub buffer_offset: u32,
    /// Desired Data Transfer Length, in bytes (§11.8.4).
    pub desired_data_transfer_length: u32,
}

impl R2t {
    /// The opcode an R2T is sent with.
    pub const OPCODE: Opcode = Opcode::R2t;

    /// Reads an R2T's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> R2t {
        R2t {
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            r2t_sn: bhs.r2t_sn(),
            buffer_offset: bhs.buffer_offset(),
            desired_data_transfer_length: bhs.desired_data_transfer_length(),
        }
    }

    /// Writes an R2T's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.8: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_r2t_sn(self.r2t_sn);
        bhs.set_buffer_offset(self.buffer_offset);
        bhs.set_desired_data_transfer_length(self.desired_data_transfer_length);
    }
}
