//! Who sends a command: the I_T nexus (SAM-5 4.6).

/// One I_T nexus as the device server sees it: the initiator port and the
/// target port a command came through. Reservations and unit attentions are
/// kept per initiator port name, so an initiator that logs in again with the
/// same ISID is the same I_T nexus (SAM-5 4.6, RFC 7143 §4.4.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Nexus {
    /// iSCSI initiator name (the TransportID's name, SPC-5 7.6.4.6).
    pub initiator_name: String,
    /// The session's ISID: with the name it makes the initiator port name
    /// `<name>,i,0x<isid>`.
    pub isid: [u8; 6],
    /// RELATIVE TARGET PORT IDENTIFIER of the target port: in iSCSI the
    /// target portal group tag of the session (each portal group is one
    /// SCSI target port). It names the port in VPD page 83h and, through
    /// [`UnitDirectory::port_groups`], the port's ALUA group and state.
    pub relative_target_port: u16,
}

impl Nexus {
    /// A nexus for `initiator_name` with `isid` through target port 1.
    pub fn new(initiator_name: impl Into<String>, isid: [u8; 6]) -> Self {
        Self {
            initiator_name: initiator_name.into(),
            isid,
            relative_target_port: 1,
        }
    }

    /// The iSCSI initiator port name, `<name>,i,0x<isid in hex>` (RFC 7143 §4.4.1).
    pub fn initiator_port_name(&self) -> String {
        let mut name = format!("{},i,0x", self.initiator_name);
        for byte in self.isid {
            name.push_str(&format!("{byte:02x}"));
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initiator_port_name_has_the_isid_in_hex() {
        let nexus = Nexus::new(
            "iqn.2026-11.io.isoe:host",
            [0x80, 0x12, 0x34, 0x56, 0x00, 0x01],
        );
        assert_eq!(
            nexus.initiator_port_name(),
            "iqn.2026-11.io.isoe:host,i,0x801234560001"
        );
    }
}
