//! One test per PDU kind: a typed PDU goes through `frame::encode`, lands at
//! the byte offsets of its RFC 7143 §11 figure, and comes back unchanged
//! through `frame::decode` and `Pdu::parse`.

use isoe_wire::frame::{decode, encode, Decoded, FrameLimits};
use isoe_wire::pdu::*;
use isoe_wire::Pdu;

const DIGESTS: FrameLimits = FrameLimits {
    max_recv_data_segment_length: 65536,
    header_digest: true,
    data_digest: true,
    crc: isoe_wire::digest::Crc32cImpl::Hardware,
};

/// Encodes with and without digests, checks both decode to the same PDU and
/// data, and returns the plain encoding for byte checks.
fn wire(pdu: Pdu, data: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    for limits in [FrameLimits::LOGIN, DIGESTS] {
        let mut out = Vec::new();
        encode(&mut out, &pdu, &[], data, &limits);
        match decode(&out, &limits) {
            Ok(Decoded::Frame { frame, len }) => {
                assert_eq!(len, out.len());
                assert_eq!(frame.pdu(), Ok(pdu));
                assert_eq!(frame.data, data);
            }
            other => panic!("{pdu:?} did not decode: {other:?}"),
        }
        if limits == FrameLimits::LOGIN {
            plain = out;
        }
    }
    plain
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

fn dsl(b: &[u8]) -> u32 {
    be32(b, 4) & 0x00ff_ffff
}

const LUN5: Lun = Lun([0, 5, 0, 0, 0, 0, 0, 0]);

#[test]
fn nop_out() {
    // RFC 7143 §11.18
    let b = wire(
        Pdu::NopOut(NopOut {
            immediate: true,
            lun: LUN5,
            initiator_task_tag: 0x1111_1111,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: 0x2222_2222,
            exp_stat_sn: 0x3333_3333,
        }),
        b"ping",
    );
    assert_eq!(b[0], 0x40);
    assert_eq!(b[1], 0x80);
    assert_eq!(dsl(&b), 4);
    assert_eq!(&b[8..16], &LUN5.0);
    assert_eq!(
        (be32(&b, 16), be32(&b, 20), be32(&b, 24), be32(&b, 28)),
        (0x1111_1111, RESERVED_TAG, 0x2222_2222, 0x3333_3333)
    );
    assert_eq!(&b[48..52], b"ping");
}

#[test]
fn scsi_command() {
    // RFC 7143 §11.3
    let mut cdb = [0u8; 16];
    cdb[..10].copy_from_slice(&[0x2a, 0, 0, 0, 0x10, 0, 0, 0, 8, 0]);
    let b = wire(
        Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: false,
            write: true,
            attr: 2,
            lun: LUN5,
            initiator_task_tag: 7,
            expected_data_transfer_length: 4096,
            cmd_sn: 9,
            exp_stat_sn: 10,
            cdb,
        }),
        &[0x5a; 512],
    );
    assert_eq!(b[0], 0x01);
    assert_eq!(b[1], 0x80 | 0x20 | 2);
    assert_eq!(dsl(&b), 512);
    assert_eq!(
        (be32(&b, 16), be32(&b, 20), be32(&b, 24), be32(&b, 28)),
        (7, 4096, 9, 10)
    );
    assert_eq!(&b[32..48], &cdb);
}

#[test]
fn task_mgmt_request() {
    // RFC 7143 §11.5
    let b = wire(
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: tmf::TmfFunction::AbortTask,
            lun: LUN5,
            initiator_task_tag: 0x10,
            referenced_task_tag: 0x0f,
            cmd_sn: 0x20,
            exp_stat_sn: 0x30,
            ref_cmd_sn: 0x1f,
            exp_data_sn: 0x40,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x42, 0x81));
    assert_eq!(
        (
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32),
            be32(&b, 36)
        ),
        (0x10, 0x0f, 0x20, 0x30, 0x1f, 0x40)
    );
}

#[test]
fn login_request() {
    // RFC 7143 §11.12
    let b = wire(
        Pdu::LoginRequest(LoginRequest {
            transit: true,
            continue_bit: false,
            csg: stage::SECURITY,
            nsg: stage::OPERATIONAL,
            version_max: 0,
            version_min: 0,
            isid: [0x80, 1, 2, 3, 4, 5],
            tsih: 0x1234,
            initiator_task_tag: 0xabcd,
            cid: 0x0102,
            cmd_sn: 1,
            exp_stat_sn: 2,
        }),
        b"InitiatorName=iqn.x\0AuthMethod=None\0",
    );
    // RFC 7143 §11.12: the I bit is always 1.
    assert_eq!(b[0], 0x43);
    assert_eq!(b[1], 0x80 | 0x01);
    assert_eq!(&b[8..14], &[0x80, 1, 2, 3, 4, 5]);
    assert_eq!(be16(&b, 14), 0x1234);
    assert_eq!(
        (be32(&b, 16), be16(&b, 20), be32(&b, 24), be32(&b, 28)),
        (0xabcd, 0x0102, 1, 2)
    );
}

#[test]
fn text_request() {
    // RFC 7143 §11.10
    let b = wire(
        Pdu::TextRequest(TextRequest {
            immediate: true,
            final_bit: false,
            continue_bit: true,
            lun: Lun::default(),
            initiator_task_tag: 3,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: 4,
            exp_stat_sn: 5,
        }),
        b"SendTargets=All\0",
    );
    assert_eq!((b[0], b[1]), (0x44, 0x40));
    assert_eq!(
        (be32(&b, 16), be32(&b, 20), be32(&b, 24), be32(&b, 28)),
        (3, RESERVED_TAG, 4, 5)
    );
}

#[test]
fn data_out() {
    // RFC 7143 §11.7
    let b = wire(
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: LUN5,
            initiator_task_tag: 0x11,
            target_transfer_tag: 0x22,
            exp_stat_sn: 0x33,
            data_sn: 0x44,
            buffer_offset: 0x5500,
        }),
        &[1, 2, 3],
    );
    assert_eq!((b[0], b[1]), (0x05, 0x80));
    assert_eq!(
        (
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 36),
            be32(&b, 40)
        ),
        (0x11, 0x22, 0, 0x33, 0x44, 0x5500)
    );
    // Three data bytes, one zero byte of padding (RFC 7143 §11.2.3).
    assert_eq!(b.len(), 52);
    assert_eq!(&b[48..], &[1, 2, 3, 0]);
}

#[test]
fn logout_request() {
    // RFC 7143 §11.14
    let b = wire(
        Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason_code: logout::LogoutReason::RemoveConnectionForRecovery,
            initiator_task_tag: 8,
            cid: 3,
            cmd_sn: 9,
            exp_stat_sn: 10,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x46, 0x82));
    assert_eq!(
        (be32(&b, 16), be16(&b, 20), be32(&b, 24), be32(&b, 28)),
        (8, 3, 9, 10)
    );
}

#[test]
fn snack_request() {
    // RFC 7143 §11.16
    let b = wire(
        Pdu::SnackRequest(SnackRequest {
            snack_type: SnackType::Status,
            lun: LUN5,
            initiator_task_tag: 0x10,
            target_transfer_tag: 0x20,
            exp_stat_sn: 0x30,
            beg_run: 0x40,
            run_length: 0x50,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x10, 0x81));
    assert_eq!(
        (
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 28),
            be32(&b, 40),
            be32(&b, 44)
        ),
        (0x10, 0x20, 0x30, 0x40, 0x50)
    );
}

#[test]
fn nop_in() {
    // RFC 7143 §11.19
    let b = wire(
        Pdu::NopIn(NopIn {
            lun: LUN5,
            initiator_task_tag: RESERVED_TAG,
            target_transfer_tag: 0x99,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 3,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x20, 0x80));
    assert_eq!(
        (
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32)
        ),
        (RESERVED_TAG, 0x99, 1, 2, 3)
    );
}

#[test]
fn scsi_response() {
    // RFC 7143 §11.4
    let sense = [
        0, 18, 0x70, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0, 0, 0, 0, 0,
    ];
    let b = wire(
        Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: true,
            bidi_underflow: false,
            overflow: false,
            underflow: true,
            response: 0,
            status: 2,
            initiator_task_tag: 0x10,
            snack_tag: 0x20,
            stat_sn: 0x30,
            exp_cmd_sn: 0x40,
            max_cmd_sn: 0x50,
            exp_data_sn: 0x60,
            bidi_read_residual_count: 0x70,
            residual_count: 0x80,
        }),
        &sense,
    );
    assert_eq!((b[0], b[1], b[2], b[3]), (0x21, 0x80 | 0x10 | 0x02, 0, 2));
    assert_eq!(
        [
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32),
            be32(&b, 36),
            be32(&b, 40),
            be32(&b, 44)
        ],
        [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80]
    );
}

#[test]
fn task_mgmt_response() {
    // RFC 7143 §11.6
    let b = wire(
        Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: tmf::TmfResponse::Rejected,
            initiator_task_tag: 4,
            stat_sn: 5,
            exp_cmd_sn: 6,
            max_cmd_sn: 7,
        }),
        &[],
    );
    assert_eq!((b[0], b[1], b[2]), (0x22, 0x80, 255));
    assert_eq!(
        (be32(&b, 16), be32(&b, 24), be32(&b, 28), be32(&b, 32)),
        (4, 5, 6, 7)
    );
}

#[test]
fn login_response() {
    // RFC 7143 §11.13
    let b = wire(
        Pdu::LoginResponse(LoginResponse {
            transit: false,
            continue_bit: true,
            csg: stage::SECURITY,
            nsg: 0,
            version_max: 0,
            version_active: 0,
            isid: [0x40, 0, 0, 1, 0, 2],
            tsih: 0,
            initiator_task_tag: 0x77,
            stat_sn: 0,
            exp_cmd_sn: 1,
            max_cmd_sn: 1,
            status_class: login_status::INITIATOR_ERROR,
            status_detail: login_status::AUTHENTICATION_FAILURE,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x23, 0x40));
    assert_eq!(&b[8..14], &[0x40, 0, 0, 1, 0, 2]);
    assert_eq!((be32(&b, 16), be32(&b, 28), be32(&b, 32)), (0x77, 1, 1));
    assert_eq!((b[36], b[37]), (2, 1));
}

#[test]
fn text_response() {
    // RFC 7143 §11.11
    let b = wire(
        Pdu::TextResponse(TextResponse {
            final_bit: true,
            continue_bit: false,
            lun: Lun::default(),
            initiator_task_tag: 1,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: 2,
            exp_cmd_sn: 3,
            max_cmd_sn: 4,
        }),
        b"TargetName=iqn.2026-11.test:t\0",
    );
    assert_eq!((b[0], b[1]), (0x24, 0x80));
    assert_eq!(
        (
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32)
        ),
        (1, RESERVED_TAG, 2, 3, 4)
    );
}

#[test]
fn data_in() {
    // RFC 7143 §11.7
    let b = wire(
        Pdu::DataIn(DataIn {
            final_bit: true,
            acknowledge: false,
            overflow: false,
            underflow: true,
            status_present: true,
            status: 0,
            lun: LUN5,
            initiator_task_tag: 0x10,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: 0x20,
            exp_cmd_sn: 0x30,
            max_cmd_sn: 0x40,
            data_sn: 0x50,
            buffer_offset: 0x60,
            residual_count: 0x70,
        }),
        &[0xee; 96],
    );
    assert_eq!((b[0], b[1], b[3]), (0x25, 0x80 | 0x02 | 0x01, 0));
    assert_eq!(
        [
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32),
            be32(&b, 36),
            be32(&b, 40),
            be32(&b, 44)
        ],
        [0x10, RESERVED_TAG, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70]
    );
}

#[test]
fn data_in_without_status_zeroes_the_status_byte() {
    // RFC 7143 §11.7: the status field is only meaningful with the S bit.
    let mut out = Vec::new();
    let pdu = Pdu::DataIn(DataIn {
        status: 0x02,
        acknowledge: true,
        ..Default::default()
    });
    encode(&mut out, &pdu, &[], &[1], &FrameLimits::LOGIN);
    assert_eq!((out[1], out[3]), (0x40, 0));
}

#[test]
fn logout_response() {
    // RFC 7143 §11.15
    let b = wire(
        Pdu::LogoutResponse(LogoutResponse {
            response: logout::LogoutResponseCode::CleanupFailed,
            initiator_task_tag: 1,
            stat_sn: 2,
            exp_cmd_sn: 3,
            max_cmd_sn: 4,
            time2wait: 5,
            time2retain: 20,
        }),
        &[],
    );
    assert_eq!((b[0], b[1], b[2]), (0x26, 0x80, 3));
    assert_eq!(
        (be32(&b, 16), be32(&b, 24), be32(&b, 28), be32(&b, 32)),
        (1, 2, 3, 4)
    );
    assert_eq!((be16(&b, 40), be16(&b, 42)), (5, 20));
}

#[test]
fn r2t() {
    // RFC 7143 §11.8
    let b = wire(
        Pdu::R2t(R2t {
            lun: LUN5,
            initiator_task_tag: 0x10,
            target_transfer_tag: 0x20,
            stat_sn: 0x30,
            exp_cmd_sn: 0x40,
            max_cmd_sn: 0x50,
            r2t_sn: 0x60,
            buffer_offset: 0x10000,
            desired_data_transfer_length: 0x40000,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x31, 0x80));
    assert_eq!(
        [
            be32(&b, 16),
            be32(&b, 20),
            be32(&b, 24),
            be32(&b, 28),
            be32(&b, 32),
            be32(&b, 36),
            be32(&b, 40),
            be32(&b, 44)
        ],
        [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x10000, 0x40000]
    );
}

#[test]
fn async_message() {
    // RFC 7143 §11.9
    let b = wire(
        Pdu::AsyncMessage(AsyncMessage {
            lun: LUN5,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 3,
            async_event: AsyncEvent::LogoutRequest,
            async_vcode: 0,
            parameter1: 0x1111,
            parameter2: 2,
            parameter3: 20,
        }),
        &[],
    );
    assert_eq!((b[0], b[1]), (0x32, 0x80));
    // RFC 7143 §11.9: bytes 16..20 are 0xffffffff.
    assert_eq!(be32(&b, 16), RESERVED_TAG);
    assert_eq!((be32(&b, 24), be32(&b, 28), be32(&b, 32)), (1, 2, 3));
    assert_eq!(
        (b[36], b[37], be16(&b, 38), be16(&b, 40), be16(&b, 42)),
        (1, 0, 0x1111, 2, 20)
    );
}

#[test]
fn reject() {
    // RFC 7143 §11.17: the data segment is the rejected PDU's header.
    let rejected = [0x1cu8; 48];
    let b = wire(
        Pdu::Reject(Reject {
            reason: reject::RejectReason::CommandNotSupported,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 3,
            data_sn_or_r2t_sn: 4,
        }),
        &rejected,
    );
    assert_eq!((b[0], b[1], b[2]), (0x3f, 0x80, 0x05));
    assert_eq!(be32(&b, 16), RESERVED_TAG);
    assert_eq!(
        (be32(&b, 24), be32(&b, 28), be32(&b, 32), be32(&b, 36)),
        (1, 2, 3, 4)
    );
    assert_eq!(dsl(&b), 48);
    assert_eq!(&b[48..96], &rejected);
}

#[test]
fn every_opcode_is_covered() {
    // The 18 kinds above, by opcode byte, against Opcode::from_u8.
    let covered = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26,
        0x31, 0x32, 0x3f,
    ];
    let defined: Vec<u8> = (0u8..64)
        .filter(|&op| Opcode::from_u8(op).is_some())
        .collect();
    assert_eq!(defined, covered);
}

#[test]
fn login_request_with_csg_2_is_refused() {
    // RFC 7143 §11.12.3: stage 2 is reserved.
    let mut bhs = [0u8; 48];
    bhs[0] = 0x43;
    bhs[1] = 0x80 | (2 << 2) | 3;
    assert!(matches!(
        Pdu::parse(&bhs),
        Err(ParseError::InvalidField {
            field: "CSG",
            value: 2
        })
    ));
}
