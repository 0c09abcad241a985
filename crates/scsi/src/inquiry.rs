//! INQUIRY (SPC-5 6.7): standard data here, VPD pages in `vpd`.

use crate::data_in::{push_ascii_field, truncate_to_allocation_length};
use crate::logical_unit::Context;
use crate::{cdb, vpd, LogicalUnit, LunConfig, Sense};

/// SPC-5 6.7.2 VERSION: 06h claims SPC-4. libiscsi's conformance suite fails
/// any other nonzero value than 04h-06h.
const VERSION_SPC4: u8 = 0x06;

/// Version descriptors (SPC-5 6.7.2, table 149): SAM-5, iSCSI, SPC-4, SBC-3
/// (04C0h is the code libiscsi looks for before running SBC-3 tests).
const VERSION_DESCRIPTORS: [u16; 4] = [0x00a0, 0x0960, 0x0460, 0x04c0];

/// Length of our standard INQUIRY data.
const STANDARD_DATA_LEN: usize = 96;

/// TPGS 01b (SPC-5 6.7.2): implicit asymmetric logical unit access; the
/// target sets its ports' states, REPORT TARGET PORT GROUPS reports them,
/// and there is no SET TARGET PORT GROUPS.
const TPGS_IMPLICIT: u8 = 0b01 << 4;
/// TPGS 10b, with implicit 11b: SET TARGET PORT GROUPS is supported.
const TPGS_EXPLICIT: u8 = 0b10 << 4;

/// Executes INQUIRY for an existing logical unit; VPD pages describe the
/// target port of `context`'s I_T nexus.
pub(crate) fn inquiry(
    unit: &LogicalUnit,
    context: &Context<'_>,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let enable_vital_product_data = cdb[1] & 0x01 != 0;
    let page_code = cdb[2];
    let allocation_length = u32::from(cdb::u16_at(cdb, 3));
    if cdb[1] & 0x02 != 0 {
        // CMDDT is obsolete (SPC-5 6.7.1).
        return Err(Sense::invalid_field_in_cdb(1, 1));
    }
    if enable_vital_product_data {
        vpd::vital_product_data(unit, context, page_code, data_in)?;
    } else {
        if page_code != 0 {
            // SPC-5 6.7.1: with EVPD zero the PAGE CODE field shall be zero.
            return Err(Sense::invalid_field_in_cdb_byte(2));
        }
        let multiport = unit.groups(context.units).port_count() > 1;
        let start = data_in.len();
        standard_data(
            &unit.config,
            vpd::DIRECT_ACCESS_BLOCK_DEVICE,
            multiport,
            data_in,
        );
        if unit.has_explicit_alua() {
            // TPGS = 11b: SET TARGET PORT GROUPS too.
            data_in[start + 5] |= TPGS_EXPLICIT;
        }
    }
    truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// Appends standard INQUIRY data (SPC-5 6.7.2) with `peripheral` as byte 0
/// (qualifier and device type); `multiport`: the target device has two
/// target ports or more (MULTIP).
pub(crate) fn standard_data(
    config: &LunConfig,
    peripheral: u8,
    multiport: bool,
    data_in: &mut Vec<u8>,
) {
    let start = data_in.len();
    data_in.push(peripheral);
    data_in.push(0x00); // RMB=0: the medium is not removable.
    data_in.push(VERSION_SPC4);
    data_in.push(0x12); // HISUP=1, RESPONSE DATA FORMAT=2; NORMACA=0.
    data_in.push((STANDARD_DATA_LEN - 5) as u8); // ADDITIONAL LENGTH
    data_in.push(0x08 | TPGS_IMPLICIT); // 3PC=1, TPGS=01b; SCCS, ACC, PROTECT zero.
    data_in.push(u8::from(multiport) << 4); // MULTIP; ENCSERV zero.
    data_in.push(0x02); // CMDQUE=1: full task management.
    push_ascii_field(data_in, &config.vendor, 8);
    push_ascii_field(data_in, &config.product, 16);
    push_ascii_field(data_in, &config.revision, 4);
    data_in.resize(start + 58, 0); // vendor specific, CLOCKING/QAS/IUS, reserved
    for descriptor in VERSION_DESCRIPTORS {
        data_in.extend_from_slice(&descriptor.to_be_bytes());
    }
    data_in.resize(start + STANDARD_DATA_LEN, 0);
}
