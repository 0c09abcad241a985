//! Asynchronous Message (RFC 7143 §11.9): an event the target tells
//! without being asked.

use crate::bhs::Bhs;
use crate::code::wire_code;
use crate::fields::{Lun, Opcode, RESERVED_TAG};

wire_code! {
    /// What an Asynchronous Message tells (RFC 7143 §11.9.1).
    pub enum AsyncEvent {
        /// A SCSI asynchronous event; its sense data is in the data segment.
        ScsiEvent = 0,
        /// The target asks for a Logout within Parameter3 seconds.
        LogoutRequest = 1,
        /// The target will drop the connection Parameter1 names.
        ConnectionDrop = 2,
        /// The target will drop every connection of the session.
        SessionDrop = 3,
        /// The target asks for a negotiation of operational parameters.
        NegotiationRequest = 4,
        /// The target will end every task of the session.
        TaskTermination = 5,
        /// Vendor specific: AsyncVCode says what.
        VendorSpecific = 255,
    }
}

/// Asynchronous Message (RFC 7143 §11.9). Its Initiator Task Tag is
/// always 0xffffffff (no field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AsyncMessage {
    /// The LUN the event concerns, if it concerns one (§11.9.3).
    pub lun: Lun,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// AsyncEvent: what happened (§11.9.1).
    pub async_event: AsyncEvent,
    /// AsyncVCode: the vendor's code, for AsyncEvent 255 (§11.9.2).
    pub async_vcode: u8,
    /// Parameter1: the CID of the connection to be dropped (AsyncEvent 2).
    pub parameter1: u16,
    /// Parameter2: Time2Wait, in seconds (AsyncEvents 2 and 3).
    pub parameter2: u16,
    /// Parameter3: Time2Retain (AsyncEvents 2 and 3), or the seconds left
    /// for a Logout (1) or a negotiation (4), by event.
    pub parameter3: u16,
}

impl AsyncMessage {
    /// The opcode an Asynchronous Message is sent with.
    pub const OPCODE: Opcode = Opcode::AsyncMessage;

    /// Reads an Asynchronous Message's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> AsyncMessage {
        AsyncMessage {
            lun: bhs.lun(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            async_event: AsyncEvent::from_u8(bhs.async_event()),
            async_vcode: bhs.async_vcode(),
            parameter1: bhs.parameter1(),
            parameter2: bhs.parameter2(),
            parameter3: bhs.parameter3(),
        }
    }

    /// Writes an Asynchronous Message's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.9: bit 0 of byte 1, the F bit, is always 1.
        bhs.set_final_bit(true);
        bhs.set_lun(self.lun);
        bhs.set_initiator_task_tag(RESERVED_TAG);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_async_event(self.async_event.to_u8());
        bhs.set_async_vcode(self.async_vcode);
        bhs.set_parameter1(self.parameter1);
        bhs.set_parameter2(self.parameter2);
        bhs.set_parameter3(self.parameter3);
    }
}
