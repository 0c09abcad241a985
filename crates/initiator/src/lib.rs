//! isoe iSCSI initiator.
