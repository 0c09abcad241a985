//! Table-driven checks of the device server against what libiscsi's
//! iscsi-test-cu suites expect: CDB in, status + sense + data out; and, in
//! `store_failures`, what it answers when its store fails.

mod harness;

mod alua;
mod capacity;
mod compare_and_write;
mod defect_data;
mod extended_copy;
mod get_lba_status;
mod inquiry;
mod mode_select;
mod mode_sense;
mod no_lun;
mod orwrite;
mod prefetch_sync;
mod read_write;
mod reservations;
mod sanitize;
mod sense_format;
mod start_stop;
mod store_failures;
mod supported_opcodes;
mod transfer_length;
mod unmap_write_same;
mod verify;
mod write_atomic;
