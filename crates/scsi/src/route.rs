//! The task router of a SCSI target device (SAM-5 4.6): a command goes to
//! the logical unit its LUN names; REPORT LUNS is answered for the whole
//! target; a command to a LUN the target lacks is answered by the device
//! server of no unit (`no_lun.rs`). For commands with data out, the router
//! also works out the residual between what the CDB moves and what the
//! transport announced, which the transport reports (RFC 7143 §11.4.5).

use crate::opcode::REPORT_LUNS;
use crate::{
    execute_no_lun, report_luns, DataDirection, LogicalUnit, Nexus, Outcome, UnitDirectory,
};
use std::cell::Cell;
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
    /// Where a READ copied from a store that keeps page CRCs leaves them,
    /// for a transport that sends a data digest (None: not wanted).
    pub page_digests: Option<&'a PageDigests<'a>>,
}

/// Most pages ([`isoe_store::CRC_PAGE_BYTES`]) whose CRCs a copied READ
/// hands back: 64 KiB. A longer READ from a store that keeps them is lent
/// ([`isoe_store::Lent::page_crcs`]) or gets its digest computed.
pub const PAGE_CRCS_MAX: usize = 16;

/// The CRC32C of each page of a READ's Data-In, in order, from the store
/// (so the transport's data digest needs no pass over the data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCrcs {
    count: u8,
    crcs: [u32; PAGE_CRCS_MAX],
}

impl PageCrcs {
    /// The CRCs, one per page from the first byte of the Data-In.
    pub fn as_slice(&self) -> &[u32] {
        &self.crcs[..usize::from(self.count)]
    }

    /// These CRCs; None if there are more than [`PAGE_CRCS_MAX`].
    pub fn from_slice(crcs: &[u32]) -> Option<PageCrcs> {
        if crcs.len() > PAGE_CRCS_MAX {
            return None;
        }
        let mut out = PageCrcs::slots(crcs.len());
        out.as_mut_slice().copy_from_slice(crcs);
        Some(out)
    }

    /// `count` slots to fill (at most [`PAGE_CRCS_MAX`]).
    pub(crate) fn slots(count: usize) -> PageCrcs {
        debug_assert!(count <= PAGE_CRCS_MAX);
        PageCrcs {
            count: count.min(PAGE_CRCS_MAX) as u8,
            crcs: [0; PAGE_CRCS_MAX],
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u32] {
        &mut self.crcs[..usize::from(self.count)]
    }
}

/// A transport's request for the page CRCs of READ data it copies
/// ([`Request::page_digests`]).
pub struct PageDigests<'a> {
    /// Computes a CRC32C the store does not have yet.
    pub crc: &'a dyn Fn(&[u8]) -> u32,
    /// Set to the READ's page CRCs when the store had them for its whole
    /// Data-In; left as it was otherwise. The caller clears it first.
    pub crcs: &'a Cell<Option<PageCrcs>>,
}

impl std::fmt::Debug for PageDigests<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageDigests")
            .field("crcs", &self.crcs.get())
            .finish_non_exhaustive()
    }
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
    let writes = request.write || (request.expected_length == 0 && moves_data_out(lu, cdb));
    if !writes {
        let outcome = lu.start_with_digests(
            nexus,
            directory,
            cdb,
            request.data_out,
            data_in,
            request.page_digests,
        );
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

/// Whether `cdb` moves data out. Asked only of commands that announce no
/// data at all (EDTL 0, which reads never do), so that a WRITE sent
/// without the W bit is taken as what it is: a write that transferred
/// none of its data, an overflow of its whole length (RFC 7143
/// §11.4.5.1), never a GOOD that wrote nothing.
fn moves_data_out(lu: &LogicalUnit, cdb: &[u8]) -> bool {
    matches!(lu.transfer_length(cdb), Ok((DataDirection::Out, bytes)) if bytes > 0)
}
