//! The task router of a SCSI target device (SAM-5 4.6): a command goes to
//! the logical unit its LUN names; REPORT LUNS is answered for the whole
//! target; a command to a LUN the target lacks is answered by the device
//! server of no unit (`no_lun.rs`). For commands with data out, the router
//! also works out the residual between what the CDB moves and what the
//! transport announced, which the transport reports (RFC 7143 §11.4.5).

use crate::opcode::REPORT_LUNS;
use crate::{execute_no_lun, report_luns, LogicalUnit, Nexus, Outcome, UnitDirectory};
use std::sync::Arc;

/// The logical units of one target, as the router needs them.
pub trait Luns: UnitDirectory {
    /// The unit `lun` names, if the target has it.
    fn unit(&self, lun: u16) -> Option<&Arc<LogicalUnit>>;
    /// Every LUN the target has, in ascending order.
    fn numbers(&self) -> &[u16];
    /// The same, as the directory a unit's commands may consult
    /// (`self`; spelled out so as not to need trait upcasting).
    fn as_directory(&self) -> &dyn UnitDirectory;
}

/// One command as the transport delivers it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The LUN, if the transport's LUN field names one this router can address.
    pub lun: Option<u16>,
    /// Whether data moves out (the write bit).
    pub write: bool,
    /// Bytes the transport announced (iSCSI's Expected Data Transfer Length).
    pub expected_length: u32,
    /// The CDB.
    pub cdb: &'a [u8],
    /// The data out received.
    pub data_out: &'a [u8],
}

/// Residual over- or underflow of one command (SAM-5 5.4.3; RFC 7143
/// §11.4.5 carries it in the O and U bits and the residual count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residual {
    /// The command wanted more than announced.
    pub overflow: bool,
    /// Less than announced was transferred.
    pub underflow: bool,
    /// The count that goes with the bit.
    pub count: u32,
}

impl Residual {
    /// Residual of a transfer of `actual` bytes against `expected` announced.
    pub fn between(actual: u32, expected: u32) -> Residual {
        if actual > expected {
            Residual {
                overflow: true,
                underflow: false,
                count: actual - expected,
            }
        } else if actual < expected {
            Residual {
                overflow: false,
                underflow: true,
                count: expected - actual,
            }
        } else {
            Residual::default()
        }
    }
}

/// Starts `request` where its LUN routes it; returns its outcome and, for
/// commands with data out, the residual between the CDB's transfer and the
/// announced length (data beyond what the CDB moves is not used).
pub fn route(
    nexus: &Nexus,
    luns: &dyn Luns,
    request: &Request<'_>,
    data_in: &mut Vec<u8>,
) -> (Outcome, Residual) {
    let cdb = request.cdb;
    if cdb.first() == Some(&REPORT_LUNS) {
        let completion = report_luns(cdb, luns.numbers(), data_in);
        return (Outcome::Done(completion), Residual::default());
    }
    let Some(lu) = request.lun.and_then(|n| luns.unit(n)) else {
        let completion = execute_no_lun(cdb, luns.numbers(), data_in);
        return (Outcome::Done(completion), Residual::default());
    };
    let directory: &dyn UnitDirectory = luns.as_directory();
    if !request.write {
        let outcome = lu.start(nexus, directory, cdb, request.data_out, data_in);
        return (outcome, Residual::default());
    }
    let wanted = match lu.transfer_length(cdb) {
        Ok((_, bytes)) => bytes,
        Err(completion) => return (Outcome::Done(completion), Residual::default()),
    };
    let announced = request.expected_length;
    let residual = Residual::between(wanted, announced);
    if let Err(completion) = lu.check_data_out_length(cdb, announced) {
        return (Outcome::Done(completion), residual);
    }
    let data_out = request.data_out;
    let usable = &data_out[..data_out.len().min(wanted as usize)];
    (lu.start(nexus, directory, cdb, usable, data_in), residual)
}
