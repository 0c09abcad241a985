//! SCSI.ReportSupportedOpcodes (Simple, OneCommand, RCTD, SERVACTV) and the
//! consistency of the report with what `execute` actually does.

use crate::harness::*;

/// (opcode, service action, SERVACTV, CTDP, CDB length) of each descriptor.
fn descriptors(data: &[u8], with_timeouts: bool) -> Vec<(u8, u16, bool, bool, u16)> {
    let command_data_length = be32(data, 0) as usize;
    assert_eq!(command_data_length + 4, data.len(), "COMMAND DATA LENGTH");
    let step = if with_timeouts { 20 } else { 8 };
    data[4..]
        .chunks(step)
        .map(|d| {
            assert_eq!(d.len(), step);
            if with_timeouts {
                assert_eq!(be16(d, 8), 0x0a, "timeouts descriptor length");
            }
            (
                d[0],
                be16(d, 2),
                d[5] & 0x01 != 0,
                d[5] & 0x02 != 0,
                be16(d, 6),
            )
        })
        .collect()
}

#[test]
fn all_commands_report_is_well_formed_and_truncates() {
    let unit = unit();
    let (completion, full) = run(&unit, &report_supported_opcodes(false, 0, 0, 0, 65535));
    assert_good(completion);
    let list = descriptors(&full, false);
    assert!(list.len() > 20);
    for &(_, service_action, servactv, ctdp, _) in &list {
        assert!(
            servactv || service_action == 0,
            "SERVACTV clear means service action 0"
        );
        assert!(!ctdp, "no timeouts descriptor without RCTD");
    }
    let (completion, short) = run(&unit, &report_supported_opcodes(false, 0, 0, 0, 100));
    assert_good(completion);
    assert_eq!(short[..], full[..100]);
}

#[test]
fn rctd_adds_a_timeouts_descriptor_to_every_command() {
    let (completion, data) = run(&unit(), &report_supported_opcodes(true, 0, 0, 0, 65535));
    assert_good(completion);
    assert!(
        descriptors(&data, true).iter().all(|d| d.3),
        "CTDP set everywhere"
    );
}

#[test]
fn one_command_reporting_follows_servactv() {
    let unit = unit();
    let (_, data) = run(&unit, &report_supported_opcodes(false, 0, 0, 0, 65535));
    for (opcode, service_action, servactv, _, cdb_length) in descriptors(&data, false) {
        let by_opcode = run(
            &unit,
            &report_supported_opcodes(false, 1, opcode, service_action, 65535),
        );
        let by_service_action = run(
            &unit,
            &report_supported_opcodes(false, 2, opcode, service_action, 65535),
        );
        let (good, refused) = if servactv {
            (by_service_action, by_opcode)
        } else {
            (by_opcode, by_service_action)
        };
        let sense = assert_invalid_field_in_cdb(refused.0);
        // libiscsi takes a MAINTENANCE IN refusal pointing at byte 1 for
        // "REPORT SUPPORTED OPERATION CODES not implemented".
        assert_ne!(sense.field_pointer.unwrap().byte, 1);
        assert_good(good.0);
        let one = good.1;
        assert_eq!(
            one[1] & 0x07,
            0x03,
            "SUPPORT: supported as the standard says"
        );
        assert_eq!(be16(&one, 2), cdb_length);
        assert_ne!(cdb_length, 0);
        assert_eq!(one[4], opcode, "CDB USAGE DATA starts with the opcode");
        assert_eq!(one.len(), 4 + usize::from(cdb_length));
        let (completion, with_timeouts) = run(
            &unit,
            &report_supported_opcodes(
                true,
                if servactv { 2 } else { 1 },
                opcode,
                service_action,
                65535,
            ),
        );
        assert_good(completion);
        assert_eq!(with_timeouts[1] & 0x80, 0x80, "CTDP");
        assert_eq!(be16(&with_timeouts, 4 + usize::from(cdb_length)), 0x0a);
        let (completion, option3) = run(
            &unit,
            &report_supported_opcodes(false, 3, opcode, service_action, 65535),
        );
        assert_good(completion);
        assert_eq!(option3, one);
    }
}

#[test]
fn read_and_write_usage_data_shows_dpo_and_fua() {
    let unit = unit();
    for opcode in [0x28u8, 0x2a, 0xa8, 0xaa, 0x88, 0x8a] {
        let (completion, one) = run(&unit, &report_supported_opcodes(false, 1, opcode, 0, 65535));
        assert_good(completion);
        assert_eq!(one[5] & 0x18, 0x18, "opcode {opcode:#x}");
    }
}

#[test]
fn unsupported_commands_are_reported_as_not_supported() {
    let unit = unit();
    for opcode in [0x3bu8, 0x8c, 0x3c] {
        let (completion, one) = run(&unit, &report_supported_opcodes(false, 1, opcode, 0, 65535));
        assert_good(completion);
        assert_eq!(one[1] & 0x07, 0x01);
    }
    let (completion, one) = run(
        &unit,
        &report_supported_opcodes(false, 2, 0x9e, 0x11, 65535),
    );
    assert_good(completion);
    assert_eq!(one[1] & 0x07, 0x01);
    assert_invalid_field_in_cdb(run(&unit, &report_supported_opcodes(false, 4, 0, 0, 65535)).0);
}

#[test]
fn every_reported_command_is_executed_and_usage_data_is_honest() {
    let unit = unit();
    let (_, data) = run(&unit, &report_supported_opcodes(false, 0, 0, 0, 65535));
    for (opcode, service_action, servactv, _, cdb_length) in descriptors(&data, false) {
        let mut cdb = vec![0u8; usize::from(cdb_length)];
        cdb[0] = opcode;
        if servactv {
            cdb[1] = service_action as u8;
        }
        let (completion, _) = run(&unit, &cdb);
        if let Some(sense) = completion.sense {
            assert_ne!(
                (sense.asc, sense.ascq),
                (0x20, 0x00),
                "opcode {opcode:#x} reported but not executed"
            );
        }
        // Setting a bit the usage data leaves clear must never be needed: the
        // control byte is the last byte and is always reported as 00h here.
        let options = if servactv { 2 } else { 1 };
        let (_, one) = run(
            &unit,
            &report_supported_opcodes(false, options, opcode, service_action, 65535),
        );
        assert_eq!(
            *one.last().unwrap(),
            0x00,
            "opcode {opcode:#x} control byte usage"
        );
    }
}
