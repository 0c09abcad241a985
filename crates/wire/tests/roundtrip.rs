//! Property tests: encode → decode round trips for every PDU kind, incremental
//! decoding at arbitrary split points, digests on and off, corruption, and
//! garbage that must never panic the decoder.
//!
//! The strategies generate only values `Pdu::emit` can represent; the quirks
//! of pdu.rs they respect:
//! - Login Request always carries the immediate bit (no field for it), and
//!   CSG 2 is reserved (RFC 7143 §11.12.3) so it would not parse back;
//! - Reject and Asynchronous Message have a fixed 0xffffffff ITT (no field);
//! - Data-In writes its status byte only with the S bit, so without S the
//!   status is 0;
//! - sub-byte fields (task attribute, TMF function, logout reason, SNACK type,
//!   CSG/NSG) stay within their bit widths.

use isoe_wire::digest::Crc32cImpl;
use isoe_wire::frame::{
    begin_pdu, data_trailer, decode, encode, encode_header, finish_pdu, Decoded, FrameError,
    FrameLimits,
};
use isoe_wire::pdu::*;
use isoe_wire::Pdu;
use proptest::collection::vec;
use proptest::prelude::*;

fn lun() -> impl Strategy<Value = Lun> {
    any::<[u8; 8]>().prop_map(Lun)
}

fn nop_out() -> impl Strategy<Value = Pdu> {
    (
        any::<bool>(),
        lun(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(immediate, lun, initiator_task_tag, target_transfer_tag, cmd_sn, exp_stat_sn)| {
                Pdu::NopOut(NopOut {
                    immediate,
                    lun,
                    initiator_task_tag,
                    target_transfer_tag,
                    cmd_sn,
                    exp_stat_sn,
                })
            },
        )
}

fn scsi_command() -> impl Strategy<Value = Pdu> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u8..8,
        lun(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<[u8; 16]>(),
    )
        .prop_map(
            |(
                immediate,
                final_bit,
                read,
                write,
                attr,
                lun,
                itt,
                edtl,
                cmd_sn,
                exp_stat_sn,
                cdb,
            )| {
                Pdu::ScsiCommand(ScsiCommand {
                    immediate,
                    final_bit,
                    read,
                    write,
                    attr,
                    lun,
                    initiator_task_tag: itt,
                    expected_data_transfer_length: edtl,
                    cmd_sn,
                    exp_stat_sn,
                    cdb,
                })
            },
        )
}

fn task_mgmt_request() -> impl Strategy<Value = Pdu> {
    (any::<bool>(), 0u8..128, lun(), any::<[u32; 6]>()).prop_map(|(immediate, function, lun, w)| {
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate,
            // Named and unknown codes alike (the field is 7 bits).
            function: TmfFunction::from_u8(function),
            lun,
            initiator_task_tag: w[0],
            referenced_task_tag: w[1],
            cmd_sn: w[2],
            exp_stat_sn: w[3],
            ref_cmd_sn: w[4],
            exp_data_sn: w[5],
        })
    })
}

fn login_request() -> impl Strategy<Value = Pdu> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u8), Just(1), Just(3)],
        0u8..4,
        any::<[u8; 2]>(),
        any::<[u8; 6]>(),
        any::<u16>(),
        any::<u32>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(transit, continue_bit, csg, nsg, v, isid, tsih, itt, cid, cmd_sn, exp_stat_sn)| {
                Pdu::LoginRequest(LoginRequest {
                    transit,
                    continue_bit,
                    csg,
                    nsg,
                    version_max: v[0],
                    version_min: v[1],
                    isid,
                    tsih,
                    initiator_task_tag: itt,
                    cid,
                    cmd_sn,
                    exp_stat_sn,
                })
            },
        )
}

fn text_request() -> impl Strategy<Value = Pdu> {
    (any::<[bool; 3]>(), lun(), any::<[u32; 4]>()).prop_map(|(b, lun, w)| {
        Pdu::TextRequest(TextRequest {
            immediate: b[0],
            final_bit: b[1],
            continue_bit: b[2],
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            cmd_sn: w[2],
            exp_stat_sn: w[3],
        })
    })
}

fn data_out() -> impl Strategy<Value = Pdu> {
    (any::<bool>(), lun(), any::<[u32; 5]>()).prop_map(|(final_bit, lun, w)| {
        Pdu::DataOut(DataOut {
            final_bit,
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            exp_stat_sn: w[2],
            data_sn: w[3],
            buffer_offset: w[4],
        })
    })
}

fn logout_request() -> impl Strategy<Value = Pdu> {
    (
        any::<bool>(),
        0u8..128,
        any::<u32>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(immediate, reason_code, initiator_task_tag, cid, cmd_sn, exp_stat_sn)| {
                Pdu::LogoutRequest(LogoutRequest {
                    immediate,
                    reason_code: LogoutReason::from_u8(reason_code),
                    initiator_task_tag,
                    cid,
                    cmd_sn,
                    exp_stat_sn,
                })
            },
        )
}

fn snack_request() -> impl Strategy<Value = Pdu> {
    (0u8..16, lun(), any::<[u32; 5]>()).prop_map(|(snack_type, lun, w)| {
        Pdu::SnackRequest(SnackRequest {
            snack_type: SnackType::from_u8(snack_type),
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            exp_stat_sn: w[2],
            beg_run: w[3],
            run_length: w[4],
        })
    })
}

fn nop_in() -> impl Strategy<Value = Pdu> {
    (lun(), any::<[u32; 5]>()).prop_map(|(lun, w)| {
        Pdu::NopIn(NopIn {
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            stat_sn: w[2],
            exp_cmd_sn: w[3],
            max_cmd_sn: w[4],
        })
    })
}

fn scsi_response() -> impl Strategy<Value = Pdu> {
    (
        any::<[bool; 4]>(),
        any::<u8>(),
        any::<u8>(),
        any::<[u32; 8]>(),
    )
        .prop_map(|(b, response, status, w)| {
            Pdu::ScsiResponse(ScsiResponse {
                bidi_overflow: b[0],
                bidi_underflow: b[1],
                overflow: b[2],
                underflow: b[3],
                response,
                status,
                initiator_task_tag: w[0],
                snack_tag: w[1],
                stat_sn: w[2],
                exp_cmd_sn: w[3],
                max_cmd_sn: w[4],
                exp_data_sn: w[5],
                bidi_read_residual_count: w[6],
                residual_count: w[7],
            })
        })
}

fn task_mgmt_response() -> impl Strategy<Value = Pdu> {
    (any::<u8>(), any::<[u32; 4]>()).prop_map(|(response, w)| {
        Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: TmfResponse::from_u8(response),
            initiator_task_tag: w[0],
            stat_sn: w[1],
            exp_cmd_sn: w[2],
            max_cmd_sn: w[3],
        })
    })
}

fn login_response() -> impl Strategy<Value = Pdu> {
    (
        any::<[bool; 2]>(),
        0u8..4,
        0u8..4,
        any::<[u8; 4]>(),
        any::<[u8; 6]>(),
        any::<u16>(),
        any::<[u32; 4]>(),
    )
        .prop_map(|(b, csg, nsg, v, isid, tsih, w)| {
            Pdu::LoginResponse(LoginResponse {
                transit: b[0],
                continue_bit: b[1],
                csg,
                nsg,
                version_max: v[0],
                version_active: v[1],
                isid,
                tsih,
                initiator_task_tag: w[0],
                stat_sn: w[1],
                exp_cmd_sn: w[2],
                max_cmd_sn: w[3],
                status_class: v[2],
                status_detail: v[3],
            })
        })
}

fn text_response() -> impl Strategy<Value = Pdu> {
    (any::<[bool; 2]>(), lun(), any::<[u32; 5]>()).prop_map(|(b, lun, w)| {
        Pdu::TextResponse(TextResponse {
            final_bit: b[0],
            continue_bit: b[1],
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            stat_sn: w[2],
            exp_cmd_sn: w[3],
            max_cmd_sn: w[4],
        })
    })
}

fn data_in() -> impl Strategy<Value = Pdu> {
    (any::<[bool; 5]>(), any::<u8>(), lun(), any::<[u32; 8]>()).prop_map(|(b, status, lun, w)| {
        Pdu::DataIn(DataIn {
            final_bit: b[0],
            acknowledge: b[1],
            overflow: b[2],
            underflow: b[3],
            status_present: b[4],
            // pdu.rs writes the status byte only with S.
            status: if b[4] { status } else { 0 },
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            stat_sn: w[2],
            exp_cmd_sn: w[3],
            max_cmd_sn: w[4],
            data_sn: w[5],
            buffer_offset: w[6],
            residual_count: w[7],
        })
    })
}

fn logout_response() -> impl Strategy<Value = Pdu> {
    (any::<u8>(), any::<[u32; 4]>(), any::<[u16; 2]>()).prop_map(|(response, w, t)| {
        Pdu::LogoutResponse(LogoutResponse {
            response: LogoutResponseCode::from_u8(response),
            initiator_task_tag: w[0],
            stat_sn: w[1],
            exp_cmd_sn: w[2],
            max_cmd_sn: w[3],
            time2wait: t[0],
            time2retain: t[1],
        })
    })
}

fn r2t() -> impl Strategy<Value = Pdu> {
    (lun(), any::<[u32; 8]>()).prop_map(|(lun, w)| {
        Pdu::R2t(R2t {
            lun,
            initiator_task_tag: w[0],
            target_transfer_tag: w[1],
            stat_sn: w[2],
            exp_cmd_sn: w[3],
            max_cmd_sn: w[4],
            r2t_sn: w[5],
            buffer_offset: w[6],
            desired_data_transfer_length: w[7],
        })
    })
}

fn async_message() -> impl Strategy<Value = Pdu> {
    (
        lun(),
        any::<[u32; 3]>(),
        any::<[u8; 2]>(),
        any::<[u16; 3]>(),
    )
        .prop_map(|(lun, w, e, p)| {
            Pdu::AsyncMessage(AsyncMessage {
                lun,
                stat_sn: w[0],
                exp_cmd_sn: w[1],
                max_cmd_sn: w[2],
                async_event: AsyncEvent::from_u8(e[0]),
                async_vcode: e[1],
                parameter1: p[0],
                parameter2: p[1],
                parameter3: p[2],
            })
        })
}

fn reject() -> impl Strategy<Value = Pdu> {
    (any::<u8>(), any::<[u32; 4]>()).prop_map(|(reason, w)| {
        Pdu::Reject(Reject {
            reason: RejectReason::from_u8(reason),
            stat_sn: w[0],
            exp_cmd_sn: w[1],
            max_cmd_sn: w[2],
            data_sn_or_r2t_sn: w[3],
        })
    })
}

/// Any of the 18 PDU kinds.
fn pdu() -> impl Strategy<Value = Pdu> {
    prop_oneof![
        nop_out(),
        scsi_command(),
        task_mgmt_request(),
        login_request(),
        text_request(),
        data_out(),
        logout_request(),
        snack_request(),
        nop_in(),
        scsi_response(),
        task_mgmt_response(),
        login_response(),
        text_response(),
        data_in(),
        logout_response(),
        r2t(),
        async_message(),
        reject(),
    ]
}

/// A well-formed AHS chain (RFC 7143 §11.2.2): up to three segments.
fn ahs() -> impl Strategy<Value = Vec<u8>> {
    vec((any::<u8>(), vec(any::<u8>(), 1..40)), 0..3).prop_map(|segments| {
        let mut out = Vec::new();
        for (ahs_type, body) in segments {
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
            out.push(ahs_type);
            out.extend_from_slice(&body);
            out.resize(isoe_wire::padded_len(out.len()), 0);
        }
        out
    })
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..600)
}

fn limits() -> impl Strategy<Value = FrameLimits> {
    // Either CRC32C implementation: the bytes on the wire are the same.
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(header_digest, data_digest, software)| FrameLimits {
            max_recv_data_segment_length: 65536,
            header_digest,
            data_digest,
            crc: if software {
                Crc32cImpl::Software
            } else {
                Crc32cImpl::Hardware
            },
        },
    )
}

/// Runs the decoder over `buf` until it needs more or fails; never panics.
fn drain_garbage(mut buf: &[u8], limits: &FrameLimits) -> usize {
    let mut frames = 0;
    // Each iteration consumes at least one byte, so this is bounded by buf.len().
    loop {
        match decode(buf, limits) {
            Ok(Decoded::Frame { frame, len }) => {
                assert!(len >= 48 && len <= buf.len());
                let _ = frame.pdu();
                let _ = frame.cdb();
                let _ = frame.bidi_read_length();
                frames += 1;
                buf = &buf[len..];
            }
            Ok(Decoded::NeedMore { total_len }) => {
                assert!(total_len > buf.len());
                return frames;
            }
            Err(FrameError::HeaderDigest { .. }) => return frames,
            Err(
                FrameError::DataSegmentTooLong { frame_len, .. }
                | FrameError::DataDigest { frame_len, .. }
                | FrameError::Ahs { frame_len, .. },
            ) => {
                assert!(frame_len >= 48);
                if frame_len > buf.len() {
                    return frames;
                }
                buf = &buf[frame_len..];
            }
        }
    }
}

proptest! {
    #[test]
    fn encode_then_decode_gives_the_same_pdu(pdu in pdu(), ahs in ahs(), data in data(), limits in limits()) {
        let mut out = Vec::new();
        encode(&mut out, &pdu, &ahs, &data, &limits);
        prop_assert_eq!(out.len() % 4, 0);
        match decode(&out, &limits) {
            Ok(Decoded::Frame { frame, len }) => {
                prop_assert_eq!(len, out.len());
                prop_assert_eq!(frame.pdu(), Ok(pdu));
                prop_assert_eq!(frame.ahs, &ahs[..]);
                prop_assert_eq!(frame.data, &data[..]);
                // Re-encoding the decoded frame gives the same bytes.
                let mut again = Vec::new();
                encode(&mut again, &frame.pdu().unwrap(), frame.ahs, frame.data, &limits);
                prop_assert_eq!(again, out);
            }
            other => prop_assert!(false, "did not decode: {:?}", other),
        }
    }

    #[test]
    fn split_points_do_not_matter(
        pdus in vec((pdu(), data()), 1..6),
        limits in limits(),
        chunks in vec(1usize..300, 1..40),
    ) {
        let mut stream = Vec::new();
        for (pdu, data) in &pdus {
            encode(&mut stream, pdu, &[], data, &limits);
        }
        let mut buf: Vec<u8> = Vec::new();
        let mut got = Vec::new();
        let mut fed = 0;
        let mut chunk = chunks.iter().cycle();
        while fed < stream.len() {
            let n = (*chunk.next().unwrap()).min(stream.len() - fed);
            buf.extend_from_slice(&stream[fed..fed + n]);
            fed += n;
            loop {
                match decode(&buf, &limits).expect("valid stream") {
                    Decoded::Frame { frame, len } => {
                        got.push((frame.pdu().unwrap(), frame.data.to_vec()));
                        buf.drain(..len);
                    }
                    Decoded::NeedMore { total_len } => {
                        prop_assert!(total_len > buf.len());
                        break;
                    }
                }
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, pdus);
    }

    #[test]
    fn need_more_is_exact_once_the_bhs_is_in(pdu in pdu(), ahs in ahs(), data in data(), limits in limits(), cut in 0usize..2000) {
        let mut out = Vec::new();
        encode(&mut out, &pdu, &ahs, &data, &limits);
        let cut = cut % out.len();
        match decode(&out[..cut], &limits) {
            Ok(Decoded::NeedMore { total_len }) => {
                let expected = if cut < 48 { 48 } else { out.len() };
                prop_assert_eq!(total_len, expected);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn two_step_and_vectored_encoders_agree(pdu in pdu(), ahs in ahs(), data in data(), limits in limits()) {
        let mut whole = Vec::new();
        encode(&mut whole, &pdu, &ahs, &data, &limits);

        let mut two_step = vec![0xaa; 5]; // not at offset 0: data_start is absolute
        let start = begin_pdu(&mut two_step, &pdu, &ahs, data.len() as u32, &limits);
        two_step.extend_from_slice(&data);
        finish_pdu(&mut two_step, start, &limits);
        prop_assert_eq!(&two_step[5..], &whole[..]);

        let mut vectored = Vec::new();
        encode_header(&mut vectored, &pdu, &ahs, data.len() as u32, &limits);
        vectored.extend_from_slice(&data);
        let (trailer, n) = data_trailer(&data, &limits);
        vectored.extend_from_slice(&trailer[..n]);
        prop_assert_eq!(vectored, whole);
    }

    #[test]
    fn any_single_byte_corruption_is_caught_with_both_digests(
        pdu in pdu(),
        data in vec(any::<u8>(), 1..600),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let limits = FrameLimits { max_recv_data_segment_length: 65536, header_digest: true, data_digest: true, crc: Crc32cImpl::Hardware };
        let mut out = Vec::new();
        encode(&mut out, &pdu, &[], &data, &limits);
        let at = at.index(out.len());
        out[at] ^= flip;
        let framed = matches!(decode(&out, &limits), Ok(Decoded::Frame { .. }));
        prop_assert!(!framed, "corruption at byte {} went unnoticed", at);
    }

    #[test]
    fn oversized_segment_is_refused_from_48_bytes(pdu in pdu(), max in 0u32..100_000, excess in 1u32..1000) {
        let limits = FrameLimits { max_recv_data_segment_length: max, header_digest: false, data_digest: false, crc: Crc32cImpl::Hardware };
        let mut out = Vec::new();
        encode_header(&mut out, &pdu, &[], max + excess, &limits);
        match decode(&out[..48], &limits) {
            Err(FrameError::DataSegmentTooLong { len, max: m, frame_len, .. }) => {
                prop_assert_eq!(len, max + excess);
                prop_assert_eq!(m, max);
                prop_assert_eq!(frame_len, 48 + isoe_wire::padded_len((max + excess) as usize));
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn garbage_never_panics(
        bytes in vec(any::<u8>(), 0..3000),
        max in 0u32..70_000,
        hd in any::<bool>(),
        dd in any::<bool>(),
    ) {
        let limits = FrameLimits { max_recv_data_segment_length: max, header_digest: hd, data_digest: dd, crc: Crc32cImpl::Hardware };
        drain_garbage(&bytes, &limits);
    }

    #[test]
    fn garbage_with_plausible_headers_never_panics(
        mut bytes in vec(any::<u8>(), 48..3000),
        ahs_words in 0u8..8,
        dsl in 0u32..2048,
        opcode in any::<u8>(),
        hd in any::<bool>(),
        dd in any::<bool>(),
    ) {
        // Small lengths make the decoder get past the BHS into AHS and data.
        bytes[0] = opcode;
        bytes[4] = ahs_words;
        bytes[5..8].copy_from_slice(&dsl.to_be_bytes()[1..]);
        let limits = FrameLimits { max_recv_data_segment_length: 8192, header_digest: hd, data_digest: dd, crc: Crc32cImpl::Hardware };
        drain_garbage(&bytes, &limits);
    }
}
