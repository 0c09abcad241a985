//! Properties: whatever a peer sends, the login machines answer within the
//! RFC's bounds and never panic, only iSCSI names log in, and a failure's
//! reason is fit for a log line; text and binary encodings round-trip.

mod login_util;

use isoe_wire::chap::ChapAlgorithm;
use isoe_wire::login::{
    InitiatorLogin, InitiatorStep, LoginOutcome, TargetLogin, TargetLoginConfig,
};
use isoe_wire::name::validate;
use isoe_wire::pdu::{LoginRequest, LoginResponse};
use isoe_wire::text::{decode_binary, encode_base64, encode_hex, parse_pairs, push_pair};
use login_util::*;
use proptest::prelude::*;

/// Keys a hostile or confused initiator might send: real ones, near misses, extensions.
const KEYS: &[&str] = &[
    "InitiatorName",
    "TargetName",
    "SessionType",
    "AuthMethod",
    "CHAP_A",
    "CHAP_N",
    "CHAP_R",
    "CHAP_I",
    "CHAP_C",
    "HeaderDigest",
    "DataDigest",
    "MaxBurstLength",
    "FirstBurstLength",
    "MaxRecvDataSegmentLength",
    "ImmediateData",
    "InitialR2T",
    "MaxConnections",
    "ErrorRecoveryLevel",
    "DefaultTime2Wait",
    "TargetPortalGroupTag",
    "TaskReporting",
    "iSCSIProtocolLevel",
    "SendTargets",
    "IFMarkInt",
    "X-com.example.k",
    "X#Foo",
    "Unknown",
];

const VALUES: &[&str] = &[
    "",
    "Yes",
    "No",
    "None",
    "CRC32C,None",
    "CHAP,None",
    "CHAP",
    "5",
    "7,5",
    "Normal",
    "Discovery",
    "0",
    "512",
    "65536",
    "16777216",
    "0x10",
    "0xffffffffffffffffff",
    "Reject",
    "NotUnderstood",
    "alice",
    "0x00112233445566778899aabbccddeeff",
    "0bAAAA",
    "iqn.2026-11.test:tgt",
    "iqn.2026-11.test:init",
    // Names that are not iSCSI names, some with what a log must not take in.
    "iqn.2026-11.test:Init",
    "iqn.2026-11.test:in\nit",
    "\u{1b}[2Jiqn.2026-11.test:tgt",
    "iqn.2026-11.test:tgt\r",
];

fn text_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Well-formed texts of plausible pairs (repeats included).
        prop::collection::vec((0..KEYS.len(), 0..VALUES.len()), 0..12).prop_map(|pairs| {
            let mut out = Vec::new();
            for (k, v) in pairs {
                push_pair(&mut out, KEYS[k], VALUES[v]);
            }
            out
        }),
        // Raw bytes, sometimes longer than a login PDU may carry.
        prop::collection::vec(any::<u8>(), 0..9000),
    ]
}

fn request_strategy() -> impl Strategy<Value = LoginRequest> {
    (
        any::<bool>(),
        any::<bool>(),
        0u8..4,
        0u8..4,
        0u8..2,
        0u8..2,
        0u16..2,
        0u16..2,
        0u32..2,
    )
        .prop_map(
            |(transit, continue_bit, csg, nsg, version_max, version_min, tsih, cid, itt)| {
                LoginRequest {
                    transit,
                    continue_bit,
                    csg,
                    nsg,
                    version_max,
                    version_min,
                    isid: [0x80, 0, 0, 0, 0, 1],
                    tsih,
                    initiator_task_tag: itt,
                    cid,
                    cmd_sn: 1,
                    exp_stat_sn: 0,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_target_answers_anything_within_bounds(
        requests in prop::collection::vec((request_strategy(), text_strategy()), 1..12),
        chap in any::<bool>(),
    ) {
        let policy = if chap { TestPolicy::with_auth(chap_policy(ChapAlgorithm::ALL.to_vec(), true)) } else { TestPolicy::open() };
        let mut login = TargetLogin::new(TargetLoginConfig::default());
        let mut ended = false;
        for (n, (request, data)) in requests.iter().enumerate() {
            let step = login.handle_request(request, data, &policy, &random(n as u32));
            prop_assert!(step.data.len() <= 8192);
            prop_assert!(!(step.response.transit && step.response.continue_bit));
            prop_assert_eq!(step.response.initiator_task_tag, request.initiator_task_tag);
            // The target never transits unless asked (RFC 7143 §11.13.6).
            prop_assert!(!step.response.transit || request.transit);
            // Whatever it says parses as text.
            prop_assert!(parse_pairs(&step.data).is_ok());
            match &step.outcome {
                LoginOutcome::Continue => prop_assert!(!ended && step.response.status_class == 0),
                LoginOutcome::Complete(negotiated) => {
                    prop_assert!(!ended);
                    // Only iSCSI names get through.
                    let session = &negotiated.session;
                    prop_assert!(validate(&session.initiator_name).is_ok());
                    prop_assert!(session.target_name.as_deref().is_none_or(|n| validate(n).is_ok()));
                    prop_assert!(step.response.transit && step.response.nsg == 3);
                    ended = true;
                }
                LoginOutcome::Failed(f) => {
                    prop_assert!(f.status_class == 2 || f.status_class == 3);
                    prop_assert_eq!((step.response.status_class, step.response.status_detail), (f.status_class, f.status_detail));
                    prop_assert!(!f.reason.contains("alice-secret") && !f.reason.contains("target-secret"));
                    // The reason is fit for one log line.
                    prop_assert!(!f.reason.chars().any(char::is_control), "{:?}", f.reason);
                    ended = true;
                }
            }
        }
    }

    #[test]
    fn the_initiator_survives_any_response(
        responses in prop::collection::vec(
            (any::<bool>(), any::<bool>(), 0u8..4, 0u8..4, 0u8..4, 0u8..2, text_strategy()),
            1..10,
        ),
        chap in any::<bool>(),
    ) {
        let mut config = initiator_config();
        if chap {
            config.chap = Some(chap_credentials(vec![ChapAlgorithm::Md5], true));
        }
        let mut login = InitiatorLogin::new(config.clone(), random(9));
        let InitiatorStep::Send { .. } = login.start() else { panic!() };
        for (transit, continue_bit, csg, nsg, status_class, detail, data) in responses {
            let response = LoginResponse {
                transit,
                continue_bit,
                csg,
                nsg,
                isid: config.isid,
                initiator_task_tag: config.initiator_task_tag,
                status_class: status_class % 4,
                status_detail: detail,
                ..LoginResponse::default()
            };
            match login.handle_response(&response, &data) {
                Ok(InitiatorStep::Send { request, data }) => {
                    prop_assert!(data.len() <= 8192);
                    prop_assert!(!(request.transit && request.continue_bit));
                }
                Ok(InitiatorStep::Complete { .. }) | Err(_) => break,
            }
        }
    }

    #[test]
    fn pairs_round_trip(pairs in prop::collection::btree_map("[A-Za-z][A-Za-z0-9.+@_-]{0,62}", "[ -~]{0,255}", 0..20)) {
        let mut out = Vec::new();
        for (k, v) in &pairs {
            push_pair(&mut out, k, v);
        }
        let parsed = parse_pairs(&out).unwrap();
        let expected: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        prop_assert_eq!(parsed, expected);
    }

    #[test]
    fn binary_values_round_trip(bytes in prop::collection::vec(any::<u8>(), 1..1100)) {
        prop_assert_eq!(decode_binary(&encode_hex(&bytes)).unwrap(), bytes.clone());
        prop_assert_eq!(decode_binary(&encode_base64(&bytes)).unwrap(), bytes);
    }

    #[test]
    fn arbitrary_text_never_panics_the_parser(data in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_pairs(&data);
        if let Ok(s) = std::str::from_utf8(&data) {
            let _ = decode_binary(s);
            let _ = isoe_wire::text::decode_number(s);
        }
    }
}
