//! SCSI Command and SCSI Response (RFC 7143 §11.3, §11.4).

use crate::bhs::Bhs;
use crate::fields::{Lun, Opcode};

/// SCSI Command (RFC 7143 §11.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScsiCommand {
    /// I: for delivery on arrival, outside CmdSN order (RFC 7143 §11.2.1.1).
    pub immediate: bool,
    /// F: no unsolicited Data-Out follows (§11.3.1).
    pub final_bit: bool,
    /// R: data goes to the initiator (§11.3.1).
    pub read: bool,
    /// W: data goes to the target (§11.3.1).
    pub write: bool,
    /// Task attribute (0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA).
    pub attr: u8,
    /// The logical unit addressed.
    pub lun: Lun,
    /// Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// Expected Data Transfer Length, in bytes (§11.3.4).
    pub expected_data_transfer_length: u32,
    /// CmdSN (§11.3.2).
    pub cmd_sn: u32,
    /// ExpStatSN (§11.3.3).
    pub exp_stat_sn: u32,
    /// The first 16 CDB bytes; longer CDBs continue in an extended-CDB AHS.
    pub cdb: [u8; 16],
}

impl ScsiCommand {
    /// The opcode a SCSI Command is sent with.
    pub const OPCODE: Opcode = Opcode::ScsiCommand;

    /// Reads a SCSI Command's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> ScsiCommand {
        let mut cdb = [0u8; 16];
        cdb.copy_from_slice(bhs.cdb());
        ScsiCommand {
            immediate: bhs.immediate(),
            final_bit: bhs.final_bit(),
            read: bhs.read(),
            write: bhs.write(),
            attr: bhs.task_attr(),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            expected_data_transfer_length: bhs.expected_data_transfer_length(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
            cdb,
        }
    }

    /// Writes a SCSI Command's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_immediate(self.immediate);
        bhs.set_final_bit(self.final_bit);
        bhs.set_read(self.read);
        bhs.set_write(self.write);
        bhs.set_task_attr(self.attr);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_expected_data_transfer_length(self.expected_data_transfer_length);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
        bhs.set_cdb(&self.cdb);
    }
}

/// SCSI Response (RFC 7143 §11.4). The data segment carries SenseLength + sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScsiResponse {
    /// o: Bidirectional Read Residual Overflow (§11.4.1).
    pub bidi_overflow: bool,
    /// u: Bidirectional Read Residual Underflow (§11.4.1).
    pub bidi_underflow: bool,
    /// O: Residual Overflow (§11.4.1).
    pub overflow: bool,
    /// U: Residual Underflow (§11.4.1).
    pub underflow: bool,
    /// iSCSI service response: 0 command completed at target, 1 target failure.
    pub response: u8,
    /// The SCSI status (§11.4.2), valid when `response` is 0.
    pub status: u8,
    /// The command's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// SNACK Tag (§11.4.4).
    pub snack_tag: u32,
    /// StatSN (§11.4.9).
    pub stat_sn: u32,
    /// ExpCmdSN (§11.4.10).
    pub exp_cmd_sn: u32,
    /// MaxCmdSN (§11.4.11).
    pub max_cmd_sn: u32,
    /// ExpDataSN: the Data-In PDUs sent for the command (§11.4.8).
    pub exp_data_sn: u32,
    /// Bidirectional Read Residual Count, in bytes (§11.4.6).
    pub bidi_read_residual_count: u32,
    /// Residual Count, in bytes (§11.4.5).
    pub residual_count: u32,
}

impl ScsiResponse {
    /// The opcode a SCSI Response is sent with.
    pub const OPCODE: Opcode = Opcode::ScsiResponse;

    /// Reads a SCSI Response's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> ScsiResponse {
        ScsiResponse {
            bidi_overflow: bhs.bidi_overflow(),
            bidi_underflow: bhs.bidi_underflow(),
            overflow: bhs.overflow(),
            underflow: bhs.underflow(),
            response: bhs.response(),
            status: bhs.status(),
            initiator_task_tag: bhs.initiator_task_tag(),
            snack_tag: bhs.snack_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            exp_data_sn: bhs.exp_data_sn(),
            bidi_read_residual_count: bhs.bidi_read_residual_count(),
            residual_count: bhs.residual_count(),
        }
    }

    /// Writes a SCSI Response's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.4.1: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_bidi_overflow(self.bidi_overflow);
        bhs.set_bidi_underflow(self.bidi_underflow);
        bhs.set_overflow(self.overflow);
        bhs.set_underflow(self.underflow);
        bhs.set_response(self.response);
        bhs.set_status(self.status);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_snack_tag(self.snack_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_exp_data_sn(self.exp_data_sn);
        bhs.set_bidi_read_residual_count(self.bidi_read_residual_count);
        bhs.set_residual_count(self.residual_count);
    }
}
