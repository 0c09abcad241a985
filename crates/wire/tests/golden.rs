//! Golden bytes: what `Pdu::emit` wrote and what `Pdu::parse` read before
//! the BHS became a checked view with one parser per PDU kind, kept so
//! that the wire stays byte for byte what it was.
//!
//! Three tables, all captured from the position-named code:
//! - [`EMITTED`]: one PDU of every kind, every field a distinct value and
//!   every flag set, then again with every flag clear, emitted with
//!   TotalAHSLength 3 and DataSegmentLength 0xabcdef; each must also parse
//!   back to the same PDU;
//! - [`MASKED`]: sub-byte fields past their bit widths (task attribute, TMF
//!   function, logout reason, SNACK type, CSG, NSG), which emit masks;
//! - [`PARSED`]: every opcode over three patterns of bytes (all ones,
//!   counting up, 0x5a), as `Pdu::parse` reads them, reserved bits included.

use isoe_wire::pdu::*;
use isoe_wire::{Pdu, BHS_LEN};

const LUN: Lun = Lun([0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88]);

/// One PDU of every kind with every field distinct; `flag` sets every flag.
fn every_kind(flag: bool) -> Vec<Pdu> {
    let mut pdus = requests(flag);
    pdus.extend(requests_from_text(flag));
    pdus.extend(responses(flag));
    pdus.extend(responses_from_data_in(flag));
    pdus
}

/// The PDUs an initiator sends (RFC 7143 §11.2.1.2), opcodes 0x00 to 0x03.
fn requests(flag: bool) -> Vec<Pdu> {
    vec![
        Pdu::NopOut(NopOut {
            immediate: flag,
            lun: LUN,
            initiator_task_tag: 0x1011_1213,
            target_transfer_tag: 0x1415_1617,
            cmd_sn: 0x1819_1a1b,
            exp_stat_sn: 0x1c1d_1e1f,
        }),
        Pdu::ScsiCommand(ScsiCommand {
            immediate: flag,
            final_bit: flag,
            read: flag,
            write: flag,
            attr: 5,
            lun: LUN,
            initiator_task_tag: 0x2021_2223,
            expected_data_transfer_length: 0x2425_2627,
            cmd_sn: 0x2829_2a2b,
            exp_stat_sn: 0x2c2d_2e2f,
            cdb: [
                0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd,
                0xce, 0xcf,
            ],
        }),
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: flag,
            function: TmfFunction::from_u8(0x55),
            lun: LUN,
            initiator_task_tag: 0x3031_3233,
            referenced_task_tag: 0x3435_3637,
            cmd_sn: 0x3839_3a3b,
            exp_stat_sn: 0x3c3d_3e3f,
            ref_cmd_sn: 0x4041_4243,
            exp_data_sn: 0x4445_4647,
        }),
        Pdu::LoginRequest(LoginRequest {
            transit: flag,
            continue_bit: flag,
            csg: 1,
            nsg: 3,
            version_max: 0x4a,
            version_min: 0x4b,
            isid: [0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5],
            tsih: 0x4c4d,
            initiator_task_tag: 0x5051_5253,
            cid: 0x5455,
            cmd_sn: 0x5859_5a5b,
            exp_stat_sn: 0x5c5d_5e5f,
        }),
    ]
}

/// The PDUs an initiator sends from opcode 0x04 (Text Request) on.
fn requests_from_text(flag: bool) -> Vec<Pdu> {
    vec![
        Pdu::TextRequest(TextRequest {
            immediate: flag,
            final_bit: flag,
            continue_bit: flag,
            lun: LUN,
            initiator_task_tag: 0x6061_6263,
            target_transfer_tag: 0x6465_6667,
            cmd_sn: 0x6869_6a6b,
            exp_stat_sn: 0x6c6d_6e6f,
        }),
        Pdu::DataOut(DataOut {
            final_bit: flag,
            lun: LUN,
            initiator_task_tag: 0x7071_7273,
            target_transfer_tag: 0x7475_7677,
            exp_stat_sn: 0x7879_7a7b,
            data_sn: 0x7c7d_7e7f,
            buffer_offset: 0x8081_8283,
        }),
        Pdu::LogoutRequest(LogoutRequest {
            immediate: flag,
            reason_code: LogoutReason::from_u8(0x62),
            initiator_task_tag: 0x9091_9293,
            cid: 0x9495,
            cmd_sn: 0x9899_9a9b,
            exp_stat_sn: 0x9c9d_9e9f,
        }),
        Pdu::SnackRequest(SnackRequest {
            snack_type: SnackType::from_u8(0x0b),
            lun: LUN,
            initiator_task_tag: 0xa0a1_a2a3,
            target_transfer_tag: 0xa4a5_a6a7,
            exp_stat_sn: 0xa8a9_aaab,
            beg_run: 0xacad_aeaf,
            run_length: 0xb0b1_b2b3,
        }),
    ]
}

/// The PDUs a target sends (RFC 7143 §11.2.1.2), opcodes 0x20 to 0x24.
fn responses(flag: bool) -> Vec<Pdu> {
    vec![
        Pdu::NopIn(NopIn {
            lun: LUN,
            initiator_task_tag: 0xb4b5_b6b7,
            target_transfer_tag: 0xb8b9_babb,
            stat_sn: 0xbcbd_bebf,
            exp_cmd_sn: 0xc0c1_c2c3,
            max_cmd_sn: 0xc4c5_c6c7,
        }),
        Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: flag,
            bidi_underflow: flag,
            overflow: flag,
            underflow: flag,
            response: 0x01,
            status: 0x02,
            initiator_task_tag: 0xd0d1_d2d3,
            snack_tag: 0xd4d5_d6d7,
            stat_sn: 0xd8d9_dadb,
            exp_cmd_sn: 0xdcdd_dedf,
            max_cmd_sn: 0xe0e1_e2e3,
            exp_data_sn: 0xe4e5_e6e7,
            bidi_read_residual_count: 0xe8e9_eaeb,
            residual_count: 0xeced_eeef,
        }),
        Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: TmfResponse::NotSupported,
            initiator_task_tag: 0xf0f1_f2f3,
            stat_sn: 0xf4f5_f6f7,
            exp_cmd_sn: 0xf8f9_fafb,
            max_cmd_sn: 0xfcfd_feff,
        }),
        Pdu::LoginResponse(LoginResponse {
            transit: flag,
            continue_bit: flag,
            csg: 1,
            nsg: 3,
            version_max: 0x0a,
            version_active: 0x0b,
            isid: [0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5],
            tsih: 0x0c0d,
            initiator_task_tag: 0x0102_0304,
            stat_sn: 0x0506_0708,
            exp_cmd_sn: 0x090a_0b0c,
            max_cmd_sn: 0x0d0e_0f10,
            status_class: 0x02,
            status_detail: 0x07,
        }),
        Pdu::TextResponse(TextResponse {
            final_bit: flag,
            continue_bit: flag,
            lun: LUN,
            initiator_task_tag: 0x1112_1314,
            target_transfer_tag: 0x1516_1718,
            stat_sn: 0x191a_1b1c,
            exp_cmd_sn: 0x1d1e_1f20,
            max_cmd_sn: 0x2122_2324,
        }),
    ]
}

/// The PDUs a target sends from opcode 0x25 (Data-In) on.
fn responses_from_data_in(flag: bool) -> Vec<Pdu> {
    vec![
        Pdu::DataIn(DataIn {
            final_bit: flag,
            acknowledge: flag,
            overflow: flag,
            underflow: flag,
            status_present: flag,
            status: if flag { 0x08 } else { 0 },
            lun: LUN,
            initiator_task_tag: 0x2526_2728,
            target_transfer_tag: 0x292a_2b2c,
            stat_sn: 0x2d2e_2f30,
            exp_cmd_sn: 0x3132_3334,
            max_cmd_sn: 0x3536_3738,
            data_sn: 0x393a_3b3c,
            buffer_offset: 0x3d3e_3f40,
            residual_count: 0x4142_4344,
        }),
        Pdu::LogoutResponse(LogoutResponse {
            response: LogoutResponseCode::CleanupFailed,
            initiator_task_tag: 0x4546_4748,
            stat_sn: 0x494a_4b4c,
            exp_cmd_sn: 0x4d4e_4f50,
            max_cmd_sn: 0x5152_5354,
            time2wait: 0x5556,
            time2retain: 0x5758,
        }),
        Pdu::R2t(R2t {
            lun: LUN,
            initiator_task_tag: 0x595a_5b5c,
            target_transfer_tag: 0x5d5e_5f60,
            stat_sn: 0x6162_6364,
            exp_cmd_sn: 0x6566_6768,
            max_cmd_sn: 0x696a_6b6c,
            r2t_sn: 0x6d6e_6f70,
            buffer_offset: 0x7172_7374,
            desired_data_transfer_length: 0x7576_7778,
        }),
        Pdu::AsyncMessage(AsyncMessage {
            lun: LUN,
            stat_sn: 0x797a_7b7c,
            exp_cmd_sn: 0x7d7e_7f80,
            max_cmd_sn: 0x8182_8384,
            async_event: AsyncEvent::NegotiationRequest,
            async_vcode: 0x85,
            parameter1: 0x8687,
            parameter2: 0x8889,
            parameter3: 0x8a8b,
        }),
        Pdu::Reject(Reject {
            reason: RejectReason::InvalidPduField,
            stat_sn: 0x8c8d_8e8f,
            exp_cmd_sn: 0x9091_9293,
            max_cmd_sn: 0x9495_9697,
            data_sn_or_r2t_sn: 0x9899_9a9b,
        }),
    ]
}

/// Sub-byte fields past their widths, which emit masks to the field.
fn masked() -> Vec<Pdu> {
    vec![
        Pdu::ScsiCommand(ScsiCommand {
            attr: 0xff,
            ..Default::default()
        }),
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            function: TmfFunction::from_u8(0xff),
            ..Default::default()
        }),
        Pdu::LoginRequest(LoginRequest {
            csg: 0xfd,
            nsg: 0xfe,
            ..Default::default()
        }),
        Pdu::LogoutRequest(LogoutRequest {
            reason_code: LogoutReason::from_u8(0xff),
            ..Default::default()
        }),
        Pdu::SnackRequest(SnackRequest {
            snack_type: SnackType::from_u8(0xff),
            ..Default::default()
        }),
        Pdu::LoginResponse(LoginResponse {
            csg: 0xfd,
            nsg: 0xfe,
            ..Default::default()
        }),
        Pdu::DataIn(DataIn {
            status_present: false,
            status: 0x02,
            ..Default::default()
        }),
    ]
}

/// The opcodes of RFC 7143 §11.2.1.2.
const OPCODES: [u8; 18] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31,
    0x32, 0x3f,
];

/// Three BHSs per opcode: all ones, byte `i` holding `i`, and every byte
/// 0x5a (a CSG of 2, which a Login Request refuses); byte 0 always has the
/// reserved top bit and the immediate bit set.
fn patterns() -> Vec<[u8; BHS_LEN]> {
    let mut out = Vec::new();
    for opcode in OPCODES {
        let ones = [0xffu8; BHS_LEN];
        let counting: [u8; BHS_LEN] = std::array::from_fn(|i| i as u8);
        let alternating = [0x5au8; BHS_LEN];
        for mut bhs in [ones, counting, alternating] {
            bhs[0] = 0xc0 | opcode;
            out.push(bhs);
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn emit(pdu: &Pdu) -> [u8; BHS_LEN] {
    let mut bhs = [0x5au8; BHS_LEN];
    pdu.emit(3, 0x00ab_cdef, &mut bhs);
    bhs
}

const EMITTED: &[&str] = &[
    "4080000003abcdef8182838485868788101112131415161718191a1b1c1d1e1f00000000000000000000000000000000",
    "41e5000003abcdef8182838485868788202122232425262728292a2b2c2d2e2fc0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
    "42d5000003abcdef8182838485868788303132333435363738393a3b3c3d3e3f40414243444546470000000000000000",
    "43c74a4b03abcdefa0a1a2a3a4a54c4d505152535455000058595a5b5c5d5e5f00000000000000000000000000000000",
    "44c0000003abcdef8182838485868788606162636465666768696a6b6c6d6e6f00000000000000000000000000000000",
    "0580000003abcdef818283848586878870717273747576770000000078797a7b000000007c7d7e7f8081828300000000",
    "46e2000003abcdef0000000000000000909192939495000098999a9b9c9d9e9f00000000000000000000000000000000",
    "108b000003abcdef8182838485868788a0a1a2a3a4a5a6a700000000a8a9aaab0000000000000000acadaeafb0b1b2b3",
    "2080000003abcdef8182838485868788b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7000000000000000000000000",
    "219e010203abcdef0000000000000000d0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef",
    "2280050003abcdef0000000000000000f0f1f2f300000000f4f5f6f7f8f9fafbfcfdfeff000000000000000000000000",
    "23c70a0b03abcdefb0b1b2b3b4b50c0d010203040000000005060708090a0b0c0d0e0f10020700000000000000000000",
    "24c0000003abcdef81828384858687881112131415161718191a1b1c1d1e1f2021222324000000000000000000000000",
    "25c7000803abcdef818283848586878825262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041424344",
    "2680030003abcdef00000000000000004546474800000000494a4b4c4d4e4f5051525354000000005556575800000000",
    "3180000003abcdef8182838485868788595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778",
    "3280000003abcdef8182838485868788ffffffff00000000797a7b7c7d7e7f80818283840485868788898a8b00000000",
    "3f80090003abcdef0000000000000000ffffffff000000008c8d8e8f909192939495969798999a9b0000000000000000",
    "0080000003abcdef8182838485868788101112131415161718191a1b1c1d1e1f00000000000000000000000000000000",
    "0105000003abcdef8182838485868788202122232425262728292a2b2c2d2e2fc0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
    "02d5000003abcdef8182838485868788303132333435363738393a3b3c3d3e3f40414243444546470000000000000000",
    "43074a4b03abcdefa0a1a2a3a4a54c4d505152535455000058595a5b5c5d5e5f00000000000000000000000000000000",
    "0400000003abcdef8182838485868788606162636465666768696a6b6c6d6e6f00000000000000000000000000000000",
    "0500000003abcdef818283848586878870717273747576770000000078797a7b000000007c7d7e7f8081828300000000",
    "06e2000003abcdef0000000000000000909192939495000098999a9b9c9d9e9f00000000000000000000000000000000",
    "108b000003abcdef8182838485868788a0a1a2a3a4a5a6a700000000a8a9aaab0000000000000000acadaeafb0b1b2b3",
    "2080000003abcdef8182838485868788b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7000000000000000000000000",
    "2180010203abcdef0000000000000000d0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef",
    "2280050003abcdef0000000000000000f0f1f2f300000000f4f5f6f7f8f9fafbfcfdfeff000000000000000000000000",
    "23070a0b03abcdefb0b1b2b3b4b50c0d010203040000000005060708090a0b0c0d0e0f10020700000000000000000000",
    "2400000003abcdef81828384858687881112131415161718191a1b1c1d1e1f2021222324000000000000000000000000",
    "2500000003abcdef818283848586878825262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041424344",
    "2680030003abcdef00000000000000004546474800000000494a4b4c4d4e4f5051525354000000005556575800000000",
    "3180000003abcdef8182838485868788595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778",
    "3280000003abcdef8182838485868788ffffffff00000000797a7b7c7d7e7f80818283840485868788898a8b00000000",
    "3f80090003abcdef0000000000000000ffffffff000000008c8d8e8f909192939495969798999a9b0000000000000000",
];
const MASKED: &[&str] = &[
    "0107000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "02ff000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "4306000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "06ff000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "108f000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "2306000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "2500000003abcdef00000000000000000000000000000000000000000000000000000000000000000000000000000000",
];
const PARSED: &[&str] = &[
    "Ok(NopOut(NopOut { immediate: true, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, cmd_sn: 4294967295, exp_stat_sn: 4294967295 }))",
    "Ok(NopOut(NopOut { immediate: true, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, cmd_sn: 404298267, exp_stat_sn: 471670303 }))",
    "Ok(NopOut(NopOut { immediate: true, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, cmd_sn: 1515870810, exp_stat_sn: 1515870810 }))",
    "Ok(ScsiCommand(ScsiCommand { immediate: true, final_bit: true, read: true, write: true, attr: 7, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, expected_data_transfer_length: 4294967295, cmd_sn: 4294967295, exp_stat_sn: 4294967295, cdb: [255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255] }))",
    "Ok(ScsiCommand(ScsiCommand { immediate: true, final_bit: false, read: false, write: false, attr: 1, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, expected_data_transfer_length: 336926231, cmd_sn: 404298267, exp_stat_sn: 471670303, cdb: [32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47] }))",
    "Ok(ScsiCommand(ScsiCommand { immediate: true, final_bit: false, read: true, write: false, attr: 2, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, expected_data_transfer_length: 1515870810, cmd_sn: 1515870810, exp_stat_sn: 1515870810, cdb: [90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90] }))",
    "Ok(TaskMgmtRequest(TaskMgmtRequest { immediate: true, function: Unknown(127), lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, referenced_task_tag: 4294967295, cmd_sn: 4294967295, exp_stat_sn: 4294967295, ref_cmd_sn: 4294967295, exp_data_sn: 4294967295 }))",
    "Ok(TaskMgmtRequest(TaskMgmtRequest { immediate: true, function: AbortTask, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, referenced_task_tag: 336926231, cmd_sn: 404298267, exp_stat_sn: 471670303, ref_cmd_sn: 539042339, exp_data_sn: 606414375 }))",
    "Ok(TaskMgmtRequest(TaskMgmtRequest { immediate: true, function: Unknown(90), lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, referenced_task_tag: 1515870810, cmd_sn: 1515870810, exp_stat_sn: 1515870810, ref_cmd_sn: 1515870810, exp_data_sn: 1515870810 }))",
    "Ok(LoginRequest(LoginRequest { transit: true, continue_bit: true, csg: 3, nsg: 3, version_max: 255, version_min: 255, isid: [255, 255, 255, 255, 255, 255], tsih: 65535, initiator_task_tag: 4294967295, cid: 65535, cmd_sn: 4294967295, exp_stat_sn: 4294967295 }))",
    "Ok(LoginRequest(LoginRequest { transit: false, continue_bit: false, csg: 0, nsg: 1, version_max: 2, version_min: 3, isid: [8, 9, 10, 11, 12, 13], tsih: 3599, initiator_task_tag: 269554195, cid: 5141, cmd_sn: 404298267, exp_stat_sn: 471670303 }))",
    "Err(InvalidField { field: \"CSG\", value: 2 })",
    "Ok(TextRequest(TextRequest { immediate: true, final_bit: true, continue_bit: true, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, cmd_sn: 4294967295, exp_stat_sn: 4294967295 }))",
    "Ok(TextRequest(TextRequest { immediate: true, final_bit: false, continue_bit: false, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, cmd_sn: 404298267, exp_stat_sn: 471670303 }))",
    "Ok(TextRequest(TextRequest { immediate: true, final_bit: false, continue_bit: true, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, cmd_sn: 1515870810, exp_stat_sn: 1515870810 }))",
    "Ok(DataOut(DataOut { final_bit: true, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, exp_stat_sn: 4294967295, data_sn: 4294967295, buffer_offset: 4294967295 }))",
    "Ok(DataOut(DataOut { final_bit: false, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, exp_stat_sn: 471670303, data_sn: 606414375, buffer_offset: 673786411 }))",
    "Ok(DataOut(DataOut { final_bit: false, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, exp_stat_sn: 1515870810, data_sn: 1515870810, buffer_offset: 1515870810 }))",
    "Ok(LogoutRequest(LogoutRequest { immediate: true, reason_code: Unknown(127), initiator_task_tag: 4294967295, cid: 65535, cmd_sn: 4294967295, exp_stat_sn: 4294967295 }))",
    "Ok(LogoutRequest(LogoutRequest { immediate: true, reason_code: CloseConnection, initiator_task_tag: 269554195, cid: 5141, cmd_sn: 404298267, exp_stat_sn: 471670303 }))",
    "Ok(LogoutRequest(LogoutRequest { immediate: true, reason_code: Unknown(90), initiator_task_tag: 1515870810, cid: 23130, cmd_sn: 1515870810, exp_stat_sn: 1515870810 }))",
    "Ok(SnackRequest(SnackRequest { snack_type: Unknown(15), lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, exp_stat_sn: 4294967295, beg_run: 4294967295, run_length: 4294967295 }))",
    "Ok(SnackRequest(SnackRequest { snack_type: Status, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, exp_stat_sn: 471670303, beg_run: 673786411, run_length: 741158447 }))",
    "Ok(SnackRequest(SnackRequest { snack_type: Unknown(10), lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, exp_stat_sn: 1515870810, beg_run: 1515870810, run_length: 1515870810 }))",
    "Ok(NopIn(NopIn { lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295 }))",
    "Ok(NopIn(NopIn { lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339 }))",
    "Ok(NopIn(NopIn { lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810 }))",
    "Ok(ScsiResponse(ScsiResponse { bidi_overflow: true, bidi_underflow: true, overflow: true, underflow: true, response: 255, status: 255, initiator_task_tag: 4294967295, snack_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, exp_data_sn: 4294967295, bidi_read_residual_count: 4294967295, residual_count: 4294967295 }))",
    "Ok(ScsiResponse(ScsiResponse { bidi_overflow: false, bidi_underflow: false, overflow: false, underflow: false, response: 2, status: 3, initiator_task_tag: 269554195, snack_tag: 336926231, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, exp_data_sn: 606414375, bidi_read_residual_count: 673786411, residual_count: 741158447 }))",
    "Ok(ScsiResponse(ScsiResponse { bidi_overflow: true, bidi_underflow: true, overflow: false, underflow: true, response: 90, status: 90, initiator_task_tag: 1515870810, snack_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, exp_data_sn: 1515870810, bidi_read_residual_count: 1515870810, residual_count: 1515870810 }))",
    "Ok(TaskMgmtResponse(TaskMgmtResponse { response: Rejected, initiator_task_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295 }))",
    "Ok(TaskMgmtResponse(TaskMgmtResponse { response: NoLun, initiator_task_tag: 269554195, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339 }))",
    "Ok(TaskMgmtResponse(TaskMgmtResponse { response: Unknown(90), initiator_task_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810 }))",
    "Ok(LoginResponse(LoginResponse { transit: true, continue_bit: true, csg: 3, nsg: 3, version_max: 255, version_active: 255, isid: [255, 255, 255, 255, 255, 255], tsih: 65535, initiator_task_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, status_class: 255, status_detail: 255 }))",
    "Ok(LoginResponse(LoginResponse { transit: false, continue_bit: false, csg: 0, nsg: 1, version_max: 2, version_active: 3, isid: [8, 9, 10, 11, 12, 13], tsih: 3599, initiator_task_tag: 269554195, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, status_class: 36, status_detail: 37 }))",
    "Ok(LoginResponse(LoginResponse { transit: false, continue_bit: true, csg: 2, nsg: 2, version_max: 90, version_active: 90, isid: [90, 90, 90, 90, 90, 90], tsih: 23130, initiator_task_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, status_class: 90, status_detail: 90 }))",
    "Ok(TextResponse(TextResponse { final_bit: true, continue_bit: true, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295 }))",
    "Ok(TextResponse(TextResponse { final_bit: false, continue_bit: false, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339 }))",
    "Ok(TextResponse(TextResponse { final_bit: false, continue_bit: true, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810 }))",
    "Ok(DataIn(DataIn { final_bit: true, acknowledge: true, overflow: true, underflow: true, status_present: true, status: 255, lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, data_sn: 4294967295, buffer_offset: 4294967295, residual_count: 4294967295 }))",
    "Ok(DataIn(DataIn { final_bit: false, acknowledge: false, overflow: false, underflow: false, status_present: true, status: 3, lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, data_sn: 606414375, buffer_offset: 673786411, residual_count: 741158447 }))",
    "Ok(DataIn(DataIn { final_bit: false, acknowledge: true, overflow: false, underflow: true, status_present: false, status: 90, lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, data_sn: 1515870810, buffer_offset: 1515870810, residual_count: 1515870810 }))",
    "Ok(LogoutResponse(LogoutResponse { response: Unknown(255), initiator_task_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, time2wait: 65535, time2retain: 65535 }))",
    "Ok(LogoutResponse(LogoutResponse { response: RecoveryUnsupported, initiator_task_tag: 269554195, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, time2wait: 10281, time2retain: 10795 }))",
    "Ok(LogoutResponse(LogoutResponse { response: Unknown(90), initiator_task_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, time2wait: 23130, time2retain: 23130 }))",
    "Ok(R2t(R2t { lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), initiator_task_tag: 4294967295, target_transfer_tag: 4294967295, stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, r2t_sn: 4294967295, buffer_offset: 4294967295, desired_data_transfer_length: 4294967295 }))",
    "Ok(R2t(R2t { lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), initiator_task_tag: 269554195, target_transfer_tag: 336926231, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, r2t_sn: 606414375, buffer_offset: 673786411, desired_data_transfer_length: 741158447 }))",
    "Ok(R2t(R2t { lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), initiator_task_tag: 1515870810, target_transfer_tag: 1515870810, stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, r2t_sn: 1515870810, buffer_offset: 1515870810, desired_data_transfer_length: 1515870810 }))",
    "Ok(AsyncMessage(AsyncMessage { lun: Lun([255, 255, 255, 255, 255, 255, 255, 255]), stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, async_event: VendorSpecific, async_vcode: 255, parameter1: 65535, parameter2: 65535, parameter3: 65535 }))",
    "Ok(AsyncMessage(AsyncMessage { lun: Lun([8, 9, 10, 11, 12, 13, 14, 15]), stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, async_event: Unknown(36), async_vcode: 37, parameter1: 9767, parameter2: 10281, parameter3: 10795 }))",
    "Ok(AsyncMessage(AsyncMessage { lun: Lun([90, 90, 90, 90, 90, 90, 90, 90]), stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, async_event: Unknown(90), async_vcode: 90, parameter1: 23130, parameter2: 23130, parameter3: 23130 }))",
    "Ok(Reject(Reject { reason: Unknown(255), stat_sn: 4294967295, exp_cmd_sn: 4294967295, max_cmd_sn: 4294967295, data_sn_or_r2t_sn: 4294967295 }))",
    "Ok(Reject(Reject { reason: DataDigestError, stat_sn: 404298267, exp_cmd_sn: 471670303, max_cmd_sn: 539042339, data_sn_or_r2t_sn: 606414375 }))",
    "Ok(Reject(Reject { reason: Unknown(90), stat_sn: 1515870810, exp_cmd_sn: 1515870810, max_cmd_sn: 1515870810, data_sn_or_r2t_sn: 1515870810 }))",
];

#[test]
fn every_kind_emits_its_golden_bytes_and_parses_back() {
    let pdus: Vec<Pdu> = every_kind(true)
        .into_iter()
        .chain(every_kind(false))
        .collect();
    assert_eq!(pdus.len(), EMITTED.len());
    for (pdu, golden) in pdus.iter().zip(EMITTED) {
        let bhs = emit(pdu);
        assert_eq!(hex(&bhs), *golden, "{pdu:?}");
        assert_eq!(Pdu::parse(&bhs), Ok(*pdu), "{golden}");
    }
}

#[test]
fn fields_past_their_widths_emit_masked() {
    let pdus = masked();
    assert_eq!(pdus.len(), MASKED.len());
    for (pdu, golden) in pdus.iter().zip(MASKED) {
        assert_eq!(hex(&emit(pdu)), *golden, "{pdu:?}");
    }
}

#[test]
fn every_opcode_parses_as_before() {
    let bhss = patterns();
    assert_eq!(bhss.len(), PARSED.len());
    for (bhs, golden) in bhss.iter().zip(PARSED) {
        assert_eq!(format!("{:?}", Pdu::parse(bhs)), *golden, "{}", hex(bhs));
    }
}
