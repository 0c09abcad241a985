//! SCSI status codes (SAM-5 5.3).

/// Status of one command, as carried in the iSCSI SCSI Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// The command completed without error.
    Good = 0x00,
    /// Sense data describes why the command failed.
    CheckCondition = 0x02,
    /// PRE-FETCH: the requested blocks fit in the cache.
    ConditionMet = 0x04,
    /// The logical unit is busy; retry later.
    Busy = 0x08,
    /// A reservation held by another I_T nexus blocks the command.
    ReservationConflict = 0x18,
    /// The task set has no room for this command.
    TaskSetFull = 0x28,
    /// An ACA condition exists for another I_T nexus.
    AcaActive = 0x30,
    /// The command was aborted by another I_T nexus.
    TaskAborted = 0x40,
}

impl Status {
    /// The status byte on the wire.
    pub fn code(self) -> u8 {
        self as u8
    }
}
