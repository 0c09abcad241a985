//! What a command may ask of the target beyond its own unit, as the SCSI
//! layer sees it ([`isoe_scsi::Luns`], [`isoe_scsi::UnitDirectory`]).

use crate::lun_table::LunTable;
use crate::registry::Server;
use isoe_scsi::{LogicalUnit, Nexus};
use std::sync::Arc;

/// What a command may ask of the target beyond its own unit: the target's
/// other units, whether another I_T nexus's connections are closed, and
/// the target's port groups (ALUA).
pub(super) struct TargetView<'a> {
    /// The LUN table the command started with.
    pub(super) luns: &'a LunTable,
    /// The server, for other nexuses and the port groups.
    pub(super) server: &'a Server,
}

impl isoe_scsi::Luns for TargetView<'_> {
    fn unit(&self, lun: u16) -> Option<&Arc<LogicalUnit>> {
        self.luns.lun(lun)
    }

    fn numbers(&self) -> &[u16] {
        self.luns.numbers()
    }

    fn as_directory(&self) -> &dyn isoe_scsi::UnitDirectory {
        self
    }
}

impl isoe_scsi::UnitDirectory for TargetView<'_> {
    fn unit_by_naa(&self, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        self.luns.unit_by_naa(naa)
    }

    fn nexus_closed(&self, nexus: &Nexus) -> bool {
        self.server.nexus_closed(nexus)
    }

    fn port_groups(&self) -> &isoe_scsi::PortGroups {
        self.server.port_groups()
    }
}
