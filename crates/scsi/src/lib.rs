//! isoe-scsi
