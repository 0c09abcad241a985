//! SNACK Request (RFC 7143 §11.16): the initiator asks again for PDUs it
//! missed, or acknowledges data.

use crate::bhs::Bhs;
use crate::code::wire_code;
use crate::fields::{Lun, Opcode};

wire_code! {
    /// What a SNACK asks for (RFC 7143 §11.16.1).
    pub enum SnackType {
        /// Data/R2T: Data-In or R2T PDUs again.
        DataR2t = 0,
        /// Status: responses again.
        Status = 1,
        /// DataACK: Data-In received, up to a point.
        DataAck = 2,
        /// R-Data: the Data-In of a command again, resegmented.
        RData = 3,
    }
}

/// SNACK Request (RFC 7143 §11.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnackRequest {
    /// Type: Data/R2T, Status, DataACK or R-Data (§11.16.1).
    pub snack_type: SnackType,
    /// LUN, with a DataACK.
    pub lun: Lun,
    /// The command's Initiator Task Tag, or 0xffffffff for a Status SNACK (§11.16.4).
    pub initiator_task_tag: u32,
    /// The Data-In's tag of a DataACK, or the SNACK Tag of an R-Data (§11.16.5).
    pub target_transfer_tag: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// BegRun: the first PDU number asked for or acknowledged (§11.16.6).
    pub beg_run: u32,
    /// RunLength: how many PDUs, 0 for all from BegRun on (§11.16.7).
    pub run_length: u32,
}

impl SnackRequest {
    /// The opcode a SNACK Request is sent with.
    pub const OPCODE: Opcode = Opcode::SnackRequest;

    /// Reads a SNACK Request's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> SnackRequest {
        SnackRequest {
            snack_type: SnackType::from_u8(bhs.snack_type()),
            lun: bhs.lun(),
            initiator_task_tag: bhs.initiator_task_tag(),
            target_transfer_tag: bhs.target_transfer_tag(),
            exp_stat_sn: bhs.exp_stat_sn(),
            beg_run: bhs.beg_run(),
            run_length: bhs.run_length(),
        }
    }

    /// Writes a SNACK Request's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.16: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_snack_type(self.snack_type.to_u8());
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_target_transfer_tag(self.target_transfer_tag);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
        bhs.set_beg_run(self.beg_run);
        bhs.set_run_length(self.run_length);
    }
}
