//! The target login machine driven by hand-made and captured Login Requests.

mod login_util;

use isoe_wire::chap::{ChapAlgorithm, Secret};
use isoe_wire::login::{
    Admission, AuthPolicy, LoginFailure, LoginOutcome, LoginPolicy, LoginStep, TargetLogin,
    TargetLoginConfig,
};
use isoe_wire::negotiate::SessionType;
use isoe_wire::pdu::{login_status, stage, LoginRequest};
use isoe_wire::text::{decode_binary, encode_hex, parse_pairs, push_pair};
use isoe_wire::{Pdu, BHS_LEN};
use login_util::*;

const ISID: [u8; 6] = [0x80, 0, 0, 0, 0, 9];

fn req(csg: u8, transit: bool, nsg: u8) -> LoginRequest {
    LoginRequest {
        transit,
        continue_bit: false,
        csg,
        nsg,
        isid: ISID,
        initiator_task_tag: 0x77,
        cid: 1,
        cmd_sn: 5,
        ..LoginRequest::default()
    }
}

fn text(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        push_pair(&mut out, k, v);
    }
    out
}

fn show(data: &[u8]) -> String {
    String::from_utf8_lossy(data).replace('\0', "|")
}

fn names() -> Vec<u8> {
    text(&[("InitiatorName", INITIATOR), ("TargetName", TARGET)])
}

struct Target {
    login: TargetLogin,
    policy: TestPolicy,
    n: u32,
}

impl Target {
    fn new(config: TargetLoginConfig, policy: TestPolicy) -> Target {
        Target {
            login: TargetLogin::new(config),
            policy,
            n: 0,
        }
    }

    fn open() -> Target {
        Target::new(TargetLoginConfig::default(), TestPolicy::open())
    }

    fn send(&mut self, request: &LoginRequest, data: &[u8]) -> LoginStep {
        self.n += 1;
        self.login.handle_request(
            &wire_request(request, data.len()),
            data,
            &self.policy,
            &random(self.n),
        )
    }
}

fn failure(step: &LoginStep) -> &LoginFailure {
    match &step.outcome {
        LoginOutcome::Failed(f) => {
            assert_eq!(
                (step.response.status_class, step.response.status_detail),
                (f.status_class, f.status_detail)
            );
            assert!(step.data.is_empty() && !step.response.transit);
            f
        }
        other => panic!(
            "expected a failure, got {other:?} with {}",
            show(&step.data)
        ),
    }
}

fn status(step: &LoginStep) -> (u8, u8) {
    let f = failure(step);
    (f.status_class, f.status_detail)
}

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .flat_map(|w| w.as_bytes().chunks(2))
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

/// iscsi-ls (libiscsi 1.19) discovery Login Request, from `captures.rs`.
const LIBISCSI_DISCOVERY_LOGIN: &str = "
    438700000000018b80b5cbd400000000763e2423000000000a4f94f500000001
    00000000000000000000000000000000496e69746961746f724e616d653d6971
    6e2e323030372d31302e636f6d2e6769746875623a7361686c626572673a6c69
    6269736373693a69736373692d6c730053657373696f6e547970653d44697363
    6f76657279004865616465724469676573743d4e6f6e65004461746144696765
    73743d4e6f6e6500496e697469616c5232543d4e6f00496d6d65646961746544
    6174613d596573004d617842757273744c656e6774683d323632313434004669
    72737442757273744c656e6774683d3236323134340044656661756c7454696d
    6532576169743d320044656661756c7454696d653252657461696e3d30004d61
    784f75747374616e64696e675232543d31004572726f725265636f766572794c
    6576656c3d300049464d61726b65723d4e6f004f464d61726b65723d4e6f004d
    6178436f6e6e656374696f6e733d31004d617852656376446174615365676d65
    6e744c656e6774683d3236323134340044617461504455496e4f726465723d59
    6573004461746153657175656e6365496e4f726465723d5965730000";

/// iscsi-inq (libiscsi 1.19) normal-session Login Request, from `captures.rs`.
const LIBISCSI_NORMAL_LOGIN: &str = "
    43870000000001b080c4b0cc000000002ececa9000000000587868ce00000001
    00000000000000000000000000000000496e69746961746f724e616d653d6971
    6e2e323030372d31302e636f6d2e6769746875623a7361686c626572673a6c69
    6269736373693a69736373692d696e71005461726765744e616d653d69716e2e
    323032362d31312e746573743a7467740053657373696f6e547970653d4e6f72
    6d616c004865616465724469676573743d4e6f6e652c43524333324300446174
    614469676573743d4e6f6e6500496e697469616c5232543d4e6f00496d6d6564
    69617465446174613d596573004d617842757273744c656e6774683d32363231
    343400466972737442757273744c656e6774683d323632313434004465666175
    6c7454696d6532576169743d320044656661756c7454696d653252657461696e
    3d30004d61784f75747374616e64696e675232543d31004572726f725265636f
    766572794c6576656c3d300049464d61726b65723d4e6f004f464d61726b6572
    3d4e6f004d6178436f6e6e656374696f6e733d31004d61785265637644617461
    5365676d656e744c656e6774683d3236323134340044617461504455496e4f72
    6465723d596573004461746153657175656e6365496e4f726465723d59657300";

/// Splits a captured PDU into its parsed header and data segment.
fn captured(hex_text: &str) -> (LoginRequest, Vec<u8>) {
    let raw = hex(hex_text);
    let bhs: [u8; BHS_LEN] = raw[..BHS_LEN].try_into().unwrap();
    let len = ((raw[5] as usize) << 16) | ((raw[6] as usize) << 8) | raw[7] as usize;
    let Pdu::LoginRequest(r) = Pdu::parse(&bhs).unwrap() else {
        panic!("not a login request")
    };
    (r, raw[BHS_LEN..BHS_LEN + len].to_vec())
}

#[test]
fn libiscsi_discovery_login_gets_the_rfc_answers_byte_for_byte() {
    let (request, data) = captured(LIBISCSI_DISCOVERY_LOGIN);
    assert_eq!(
        (request.csg, request.nsg, request.transit),
        (stage::OPERATIONAL, stage::FULL_FEATURE, true)
    );
    let mut t = Target::open();
    let step = t
        .login
        .handle_request(&request, &data, &t.policy, &random(0));
    // RFC 7143 §13: keys irrelevant to discovery are answered Irrelevant;
    // §13.25: IFMarker/OFMarker answered No.
    assert_eq!(
        show(&step.data),
        "HeaderDigest=None|DataDigest=None|InitialR2T=Irrelevant|ImmediateData=Irrelevant|\
MaxBurstLength=Irrelevant|FirstBurstLength=Irrelevant|DefaultTime2Wait=2|DefaultTime2Retain=0|\
MaxOutstandingR2T=Irrelevant|ErrorRecoveryLevel=0|IFMarker=No|OFMarker=No|MaxConnections=Irrelevant|\
DataPDUInOrder=Irrelevant|DataSequenceInOrder=Irrelevant|TargetPortalGroupTag=1|MaxRecvDataSegmentLength=262144|"
    );
    let r = step.response;
    assert_eq!(
        (r.transit, r.continue_bit, r.csg, r.nsg),
        (true, false, stage::OPERATIONAL, stage::FULL_FEATURE)
    );
    assert_eq!(
        (r.isid, r.initiator_task_tag, r.tsih),
        (request.isid, request.initiator_task_tag, 0)
    );
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!()
    };
    assert_eq!(n.session.session_type, SessionType::Discovery);
    assert_eq!(
        n.session.initiator_name,
        "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls"
    );
    assert_eq!(n.connection.max_send_data_segment_length, 262_144);
    assert_eq!(n.session.default_time2retain, 0);
}

#[test]
fn libiscsi_normal_login_is_answered_and_negotiated() {
    let (request, data) = captured(LIBISCSI_NORMAL_LOGIN);
    let mut policy = TestPolicy::open();
    policy.targets[0].alias = None;
    let mut t = Target::new(TargetLoginConfig::default(), policy);
    let step = t
        .login
        .handle_request(&request, &data, &t.policy, &random(0));
    assert_eq!(
        show(&step.data),
        "HeaderDigest=None|DataDigest=None|InitialR2T=Yes|ImmediateData=Yes|MaxBurstLength=262144|\
FirstBurstLength=65536|DefaultTime2Wait=2|DefaultTime2Retain=0|MaxOutstandingR2T=1|ErrorRecoveryLevel=0|\
IFMarker=No|OFMarker=No|MaxConnections=1|DataPDUInOrder=Yes|DataSequenceInOrder=Yes|TargetPortalGroupTag=1|\
MaxRecvDataSegmentLength=262144|"
    );
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!("{:?}", step.outcome)
    };
    assert!(n.session.initial_r2t, "InitialR2T=No OR Yes");
    assert_eq!(n.session.first_burst_length, 65_536);
    assert_eq!(n.session.target_name.as_deref(), Some(TARGET));
}

#[test]
fn missing_initiator_name_is_a_missing_parameter() {
    let mut t = Target::open();
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &text(&[("TargetName", TARGET)]),
    );
    assert_eq!(status(&step), (2, login_status::MISSING_PARAMETER));
    assert!(failure(&step).reason.contains("InitiatorName"));
    assert_eq!(
        failure(&step).to_string(),
        "InitiatorName missing from the first login text (RFC 7143 §13.5) (status 0x0207, missing parameter)"
    );
}

/// A policy that refuses every login with `reason` and notes that it was asked.
struct Refusing {
    reason: &'static str,
    asked: std::cell::Cell<bool>,
}

impl LoginPolicy for Refusing {
    fn admit(
        &self,
        _session_type: SessionType,
        _initiator_name: &str,
        _target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure> {
        self.asked.set(true);
        Err(LoginFailure::initiator(
            login_status::AUTHORIZATION_FAILURE,
            self.reason,
        ))
    }
}

/// Sends the first text with these names to a target whose policy refuses
/// everyone; returns the step and whether the policy was asked.
fn first_text_to_refusing(pairs: &[(&str, &str)], reason: &'static str) -> (LoginStep, bool) {
    let policy = Refusing {
        reason,
        asked: std::cell::Cell::new(false),
    };
    let mut login = TargetLogin::new(TargetLoginConfig::default());
    let data = text(pairs);
    let request = req(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    let step = login.handle_request(
        &wire_request(&request, data.len()),
        &data,
        &policy,
        &random(1),
    );
    (step, policy.asked.get())
}

#[test]
fn a_malformed_initiator_name_is_an_initiator_error_before_the_policy_is_asked() {
    for (bad, needle) in [
        ("iqn.2026-11.test:in\nit", "character '\\n' at byte 19"),
        (
            "iqn.2026-11.test:\u{1b}[2Jx",
            "character '\\u{1b}' at byte 17",
        ),
        (
            "iqn.2026-11.test:d\u{7f}el",
            "character '\\u{7f}' at byte 18",
        ),
        ("init", "expected an iSCSI name"),
        ("iqn.2026-13.test:init", "yyyy-mm"),
    ] {
        for session in [None, Some("Discovery")] {
            let mut pairs = vec![("InitiatorName", bad), ("TargetName", TARGET)];
            pairs.extend(session.map(|s| ("SessionType", s)));
            let (step, asked) = first_text_to_refusing(&pairs, "refused");
            assert_eq!(
                status(&step),
                (2, login_status::INITIATOR_ERROR_DETAIL),
                "{bad:?}"
            );
            assert!(!asked, "{bad:?}: the policy saw a malformed name");
            let reason = &failure(&step).reason;
            assert!(reason.starts_with("InitiatorName \""), "{reason}");
            assert!(reason.contains(needle), "{reason} lacks {needle}");
            assert!(
                !reason.chars().any(char::is_control),
                "the reason carries a control character: {reason:?}"
            );
        }
    }
}

#[test]
fn a_malformed_target_name_is_not_found() {
    let (step, asked) = first_text_to_refusing(
        &[
            ("InitiatorName", INITIATOR),
            ("TargetName", "iqn.2026-11.test:T\r\ngt"),
        ],
        "refused",
    );
    assert_eq!(status(&step), (2, login_status::NOT_FOUND));
    assert!(!asked);
    assert_eq!(
        failure(&step).reason,
                "TargetName \"iqn.2026-11.test:T\\r\\ngt\" is not an iSCSI name: character '\\r' at byte 18: \
         an iSCSI name holds only a-z, 0-9, '-', '.' and ':' (RFC 7143 §4.2.7)"
    );
    // Upper case is a name its initiator did not fold (RFC 3722), not a
    // malformed one: it reaches the policy.
    let (_, asked) = first_text_to_refusing(
        &[
            ("InitiatorName", "iqn.2026-11.test:Init"),
            ("TargetName", TARGET),
        ],
        "refused",
    );
    assert!(asked, "an upper-case initiator name reaches the policy");
    // Well-formed names reach the policy, which decides.
    let (step, asked) = first_text_to_refusing(
        &[("InitiatorName", INITIATOR), ("TargetName", TARGET)],
        "refused",
    );
    assert!(asked);
    assert_eq!(status(&step), (2, login_status::AUTHORIZATION_FAILURE));
}

#[test]
fn every_failure_reason_has_its_control_characters_escaped() {
    let (step, _) = first_text_to_refusing(
        &[("InitiatorName", INITIATOR), ("TargetName", TARGET)],
        "not allowed\nisoe: a forged line\u{1b}[0m",
    );
    assert_eq!(
        failure(&step).reason,
        "not allowed\\nisoe: a forged line\\u{1b}[0m"
    );
}

#[test]
fn an_unknown_session_type_is_not_supported() {
    let mut t = Target::open();
    let mut data = names();
    push_pair(&mut data, "SessionType", "Maintenance");
    let step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &data);
    assert_eq!(status(&step), (2, login_status::SESSION_TYPE_NOT_SUPPORTED));
}

#[test]
fn unknown_keys_are_not_understood_and_bad_values_rejected() {
    let mut t = Target::open();
    let mut data = names();
    data.extend(text(&[
        ("X-com.example.Knob", "7"),
        ("NoSuchKey", "x"),
        ("MaxBurstLength", "100"),
        ("FirstBurstLength", "0x1000000"),
        ("ImmediateData", "Perhaps"),
        ("IFMarkInt", "1~65535"),
        ("ErrorRecoveryLevel", "0x1"),
    ]));
    let step = t.send(&req(stage::OPERATIONAL, false, 0), &data);
    assert_eq!(step.outcome, LoginOutcome::Continue);
    assert_eq!(
        show(&step.data),
        "X-com.example.Knob=NotUnderstood|NoSuchKey=NotUnderstood|MaxBurstLength=Reject|FirstBurstLength=Reject|\
ImmediateData=Reject|IFMarkInt=Reject|ErrorRecoveryLevel=0|TargetPortalGroupTag=1|TargetAlias=disk|\
MaxRecvDataSegmentLength=262144|"
    );
    assert!(
        !step.response.transit,
        "the target never transits unless asked"
    );
    let step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &[]);
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!("{:?}", step.outcome)
    };
    assert_eq!(
        n.session.max_burst_length, 262_144,
        "rejected keys keep their defaults"
    );
}

#[test]
fn a_key_sent_twice_in_one_login_fails() {
    let mut t = Target::open();
    let mut data = names();
    push_pair(&mut data, "MaxBurstLength", "65536");
    assert_eq!(
        t.send(&req(stage::OPERATIONAL, false, 0), &data).outcome,
        LoginOutcome::Continue
    );
    let step = t.send(
        &req(stage::OPERATIONAL, false, 0),
        &text(&[("MaxBurstLength", "65536")]),
    );
    assert_eq!(status(&step), (2, 0));
    assert!(failure(&step).reason.contains("sent twice"));
    // Within one text too (the parser refuses it).
    let mut t = Target::open();
    let mut data = names();
    data.extend(text(&[("ImmediateData", "Yes"), ("ImmediateData", "No")]));
    assert_eq!(
        status(&t.send(&req(stage::OPERATIONAL, false, 0), &data)),
        (2, 0)
    );
}

#[test]
fn header_fields_may_not_change_during_the_login() {
    type Change = fn(&mut LoginRequest);
    let changes: [(&str, Change); 5] = [
        ("Initiator Task Tag", |r| r.initiator_task_tag += 1),
        ("CID", |r| r.cid += 1),
        ("ISID", |r| r.isid[5] ^= 1),
        ("TSIH", |r| r.tsih = 3),
        ("version", |r| r.version_max = 1),
    ];
    for (field, change) in changes {
        let mut t = Target::open();
        assert_eq!(
            t.send(&req(stage::OPERATIONAL, false, 0), &names()).outcome,
            LoginOutcome::Continue
        );
        let mut second = req(stage::OPERATIONAL, true, stage::FULL_FEATURE);
        change(&mut second);
        let step = t.send(&second, &[]);
        assert_eq!(
            status(&step),
            (2, login_status::INVALID_DURING_LOGIN),
            "{field}"
        );
        assert!(
            failure(&step).reason.starts_with(field),
            "{}",
            failure(&step).reason
        );
        // After a failure nothing more is accepted.
        assert_eq!(
            status(&t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &[])),
            (2, 0x0b)
        );
    }
}

#[test]
fn an_unsupported_version_is_refused() {
    let mut t = Target::open();
    let mut r = req(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    (r.version_max, r.version_min) = (2, 1);
    let step = t.send(&r, &names());
    assert_eq!(status(&step), (2, login_status::UNSUPPORTED_VERSION));
    assert_eq!(
        (step.response.version_max, step.response.version_active),
        (0, 0)
    );
}

#[test]
fn stage_rules_are_enforced() {
    // T and C together.
    let mut t = Target::open();
    let mut r = req(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    r.continue_bit = true;
    assert_eq!(status(&t.send(&r, &names())), (2, 0));
    // A transit backwards or to the reserved stage 2.
    for nsg in [stage::SECURITY, 2] {
        let mut t = Target::open();
        assert_eq!(
            status(&t.send(&req(stage::OPERATIONAL, true, nsg), &names())),
            (2, 0)
        );
    }
    // A request in a stage the login is not in.
    let mut t = Target::open();
    assert_eq!(
        t.send(&req(stage::SECURITY, false, 0), &names()).outcome,
        LoginOutcome::Continue
    );
    assert_eq!(
        status(&t.send(&req(stage::OPERATIONAL, false, 0), &[])),
        (2, 0)
    );
}

#[test]
fn keys_in_the_wrong_stage_fail() {
    let mut t = Target::open();
    let mut data = names();
    push_pair(&mut data, "MaxBurstLength", "65536");
    let step = t.send(&req(stage::SECURITY, false, 0), &data);
    assert_eq!(status(&step), (2, 0));
    assert!(
        failure(&step).reason.contains("security negotiation stage"),
        "{}",
        failure(&step).reason
    );
    let mut t = Target::open();
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "None");
    assert_eq!(
        status(&t.send(&req(stage::OPERATIONAL, false, 0), &data)),
        (2, 0)
    );
}

#[test]
fn request_text_continues_over_several_pdus() {
    let mut t = Target::open();
    let mut whole = names();
    whole.extend(text(&[("MaxBurstLength", "65536"), ("X-a", "1")]));
    // Cut in the middle of keys and values.
    let pieces = [&whole[..10], &whole[10..60], &whole[60..]];
    for piece in &pieces[..2] {
        let mut r = req(stage::OPERATIONAL, false, 0);
        r.continue_bit = true;
        let step = t.send(&r, piece);
        // RFC 7143 §11.12.2: each partial text gets an empty response.
        assert_eq!(step.outcome, LoginOutcome::Continue);
        assert!(step.data.is_empty() && !step.response.transit && !step.response.continue_bit);
    }
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        pieces[2],
    );
    assert!(
        show(&step.data).starts_with("MaxBurstLength=65536|X-a=NotUnderstood|"),
        "{}",
        show(&step.data)
    );
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!()
    };
    assert_eq!(n.session.max_burst_length, 65_536);
}

#[test]
fn response_text_longer_than_8192_bytes_continues() {
    let mut t = Target::open();
    let mut data = names();
    for i in 0..600 {
        push_pair(&mut data, &format!("X-com.example.key{i:04}"), "v");
    }
    // The request itself spans several PDUs.
    let chunks: Vec<&[u8]> = data.chunks(8000).collect();
    let (last, partial) = chunks.split_last().unwrap();
    assert!(!partial.is_empty());
    for chunk in partial {
        let mut r = req(stage::OPERATIONAL, false, 0);
        r.continue_bit = true;
        assert!(t.send(&r, chunk).data.is_empty());
    }
    let mut step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), last);
    let mut received = Vec::new();
    let mut continued = 0;
    while step.response.continue_bit {
        assert_eq!(step.data.len(), 8192);
        assert!(!step.response.transit);
        assert_eq!(step.outcome, LoginOutcome::Continue);
        received.extend_from_slice(&step.data);
        continued += 1;
        // The initiator fetches the rest with empty requests, keeping its T bit.
        step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &[]);
    }
    received.extend_from_slice(&step.data);
    assert_eq!(
        continued,
        received.len() / 8192,
        "{} bytes of answers",
        received.len()
    );
    assert!(continued >= 2);
    assert!(step.response.transit && matches!(step.outcome, LoginOutcome::Complete(_)));
    let answers = parse_pairs(&received).unwrap();
    assert_eq!(answers.len(), 600 + 3);
    assert_eq!(answers[0], ("X-com.example.key0000", "NotUnderstood"));
    assert_eq!(answers[599], ("X-com.example.key0599", "NotUnderstood"));
    assert_eq!(
        answers[600..],
        [
            ("TargetPortalGroupTag", "1"),
            ("TargetAlias", "disk"),
            ("MaxRecvDataSegmentLength", "262144")
        ]
    );
}

#[test]
fn text_sent_while_the_response_continues_is_a_protocol_error() {
    let mut t = Target::open();
    let mut data = names();
    for i in 0..400 {
        push_pair(&mut data, &format!("X-com.example.key{i:04}"), "v");
    }
    let mut r = req(stage::OPERATIONAL, false, 0);
    r.continue_bit = true;
    t.send(&r, &data[..8000]);
    assert!(
        t.send(&req(stage::OPERATIONAL, false, 0), &data[8000..])
            .response
            .continue_bit
    );
    assert_eq!(
        status(&t.send(&req(stage::OPERATIONAL, false, 0), &text(&[("X-b", "1")]))),
        (2, 0)
    );
}

#[test]
fn sizes_and_counts_are_bounded() {
    let mut t = Target::open();
    let big = vec![b'a'; 8193];
    assert_eq!(
        status(&t.send(&req(stage::OPERATIONAL, false, 0), &big)),
        (2, 0)
    );
    // A text that never ends: 64 KiB at most.
    let mut t = Target::open();
    let mut r = req(stage::OPERATIONAL, false, 0);
    r.continue_bit = true;
    let piece = vec![b'a'; 8192];
    let mut last = None;
    for _ in 0..9 {
        last = Some(t.send(&r, &piece));
    }
    assert!(failure(&last.unwrap()).reason.contains("65536"));
    // Empty requests forever: the PDU count is bounded.
    let mut t = Target::open();
    assert_eq!(
        t.send(&req(stage::OPERATIONAL, false, 0), &names()).outcome,
        LoginOutcome::Continue
    );
    let mut n = 1;
    let step = loop {
        let step = t.send(&req(stage::OPERATIONAL, false, 0), &[]);
        n += 1;
        if step.outcome != LoginOutcome::Continue {
            break step;
        }
        assert!(n < 1000);
    };
    assert_eq!(n, 65);
    assert!(failure(&step).reason.contains("64 PDUs"));
}

#[test]
fn the_target_offers_keys_whose_default_it_cannot_accept() {
    let config = TargetLoginConfig {
        immediate_data: false,
        max_burst_length: 65_536,
        ..TargetLoginConfig::default()
    };
    let mut t = Target::new(config.clone(), TestPolicy::open());
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &names(),
    );
    // RFC 7143 §6.3: the target stays in the stage until its offers are answered.
    assert!(!step.response.transit);
    assert_eq!(
        show(&step.data),
        "TargetPortalGroupTag=1|TargetAlias=disk|MaxRecvDataSegmentLength=262144|ImmediateData=No|MaxBurstLength=65536|"
    );
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &text(&[("ImmediateData", "No"), ("MaxBurstLength", "16384")]),
    );
    assert!(step.data.is_empty());
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!("{:?}", step.outcome)
    };
    assert!(!n.session.immediate_data);
    assert_eq!(n.session.max_burst_length, 16_384);
    assert_eq!(
        n.session.first_burst_length, 16_384,
        "capped by MaxBurstLength"
    );
    // An initiator that ignores the offers fails.
    let mut t = Target::new(config.clone(), TestPolicy::open());
    t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &names(),
    );
    let step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &[]);
    assert!(
        failure(&step)
            .reason
            .contains("did not answer ImmediateData, MaxBurstLength"),
        "{}",
        failure(&step).reason
    );
    // An answer above our offer contradicts the Min function.
    let mut t = Target::new(config, TestPolicy::open());
    t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &names(),
    );
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &text(&[("ImmediateData", "No"), ("MaxBurstLength", "262144")]),
    );
    assert_eq!(status(&step), (2, 0));
}

#[test]
fn security_to_full_feature_stops_in_operational_when_the_target_has_keys_to_declare() {
    let mut t = Target::open();
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "None");
    let step = t.send(&req(stage::SECURITY, true, stage::FULL_FEATURE), &data);
    assert_eq!(
        show(&step.data),
        "AuthMethod=None|TargetPortalGroupTag=1|TargetAlias=disk|"
    );
    // RFC 7143 §11.13.3: a lower NSG than asked.
    assert_eq!(
        (step.response.transit, step.response.csg, step.response.nsg),
        (true, stage::SECURITY, stage::OPERATIONAL)
    );
    let step = t.send(&req(stage::OPERATIONAL, true, stage::FULL_FEATURE), &[]);
    assert_eq!(show(&step.data), "MaxRecvDataSegmentLength=262144|");
    assert!(matches!(step.outcome, LoginOutcome::Complete(_)));

    // With nothing to declare the target goes straight to full feature phase.
    let plain = TargetLoginConfig {
        max_recv_data_segment_length: 8192,
        ..TargetLoginConfig::default()
    };
    let mut t = Target::new(plain, TestPolicy::open());
    let step = t.send(&req(stage::SECURITY, true, stage::FULL_FEATURE), &names());
    assert_eq!(
        (step.response.transit, step.response.nsg),
        (true, stage::FULL_FEATURE)
    );
    assert!(matches!(step.outcome, LoginOutcome::Complete(_)));
}

fn chap_target(mutual: bool) -> Target {
    Target::new(
        TargetLoginConfig::default(),
        TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], mutual)),
    )
}

/// Runs AuthMethod and CHAP_A; returns the target's CHAP_I and challenge.
fn challenged(t: &mut Target) -> (u8, Vec<u8>) {
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "SRP,CHAP,None");
    assert_eq!(
        show(&t.send(&req(stage::SECURITY, false, 0), &data).data),
        "AuthMethod=CHAP|TargetPortalGroupTag=1|TargetAlias=disk|"
    );
    let step = t.send(&req(stage::SECURITY, false, 0), &text(&[("CHAP_A", "7,5")]));
    let pairs = parse_pairs(&step.data).unwrap();
    assert_eq!(pairs[0], ("CHAP_A", "5"));
    (
        pairs[1].1.parse().unwrap(),
        decode_binary(pairs[2].1).unwrap(),
    )
}

fn chap_response(id: u8, secret: &str, challenge: &[u8]) -> String {
    encode_hex(&ChapAlgorithm::Md5.response(id, &Secret::from(secret), challenge))
}

#[test]
fn leaving_the_security_stage_before_chap_is_done_fails() {
    let mut t = chap_target(false);
    challenged(&mut t);
    let step = t.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &[]);
    assert_eq!(status(&step), (2, login_status::AUTHENTICATION_FAILURE));
    // Asking for transit while the exchange is moving is fine: the target stays.
    let mut t = chap_target(false);
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "CHAP");
    let step = t.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &data);
    assert_eq!(
        (step.outcome.clone(), step.response.transit),
        (LoginOutcome::Continue, false)
    );
}

#[test]
fn the_target_refuses_its_own_challenge_reflected() {
    let mut t = chap_target(true);
    let (id, challenge) = challenged(&mut t);
    let answer = text(&[
        ("CHAP_N", "alice"),
        ("CHAP_R", &chap_response(id, "alice-secret-12", &challenge)),
        ("CHAP_I", "1"),
        ("CHAP_C", &encode_hex(&challenge)),
    ]);
    let step = t.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &answer);
    assert_eq!(status(&step), (2, 1));
    assert!(failure(&step).reason.contains("reflection"));
}

#[test]
fn chap_messages_out_of_order_or_incomplete_fail() {
    // CHAP_A before AuthMethod=CHAP.
    let mut t = chap_target(false);
    let mut data = names();
    push_pair(&mut data, "CHAP_A", "5");
    assert_eq!(
        status(&t.send(&req(stage::SECURITY, false, 0), &data)),
        (2, 1)
    );
    // CHAP_R without CHAP_N.
    let mut t = chap_target(false);
    let (id, challenge) = challenged(&mut t);
    let step = t.send(
        &req(stage::SECURITY, true, 1),
        &text(&[("CHAP_R", &chap_response(id, "alice-secret-12", &challenge))]),
    );
    assert!(failure(&step).reason.contains("CHAP_N missing"));
    // A mutual challenge too short for the algorithm.
    let mut t = chap_target(true);
    let (id, challenge) = challenged(&mut t);
    let answer = text(&[
        ("CHAP_N", "alice"),
        ("CHAP_R", &chap_response(id, "alice-secret-12", &challenge)),
        ("CHAP_I", "1"),
        ("CHAP_C", "0x0102"),
    ]);
    assert!(failure(&t.send(&req(stage::SECURITY, true, 1), &answer))
        .reason
        .contains("CHAP_C of 2 bytes"));
    // Mutual CHAP asked of a target without credentials for it.
    let mut t = chap_target(false);
    let (id, challenge) = challenged(&mut t);
    let answer = text(&[
        ("CHAP_N", "alice"),
        ("CHAP_R", &chap_response(id, "alice-secret-12", &challenge)),
        ("CHAP_I", "1"),
        ("CHAP_C", &encode_hex(&[7; 16])),
    ]);
    assert_eq!(
        status(&t.send(&req(stage::SECURITY, true, 1), &answer)),
        (2, 1)
    );
}

/// A target whose policy logs the challenges it issues, as the target crate's does.
fn chap_target_with_log(policy: &TestPolicy) -> Target {
    Target::new(TargetLoginConfig::default(), policy.clone())
}

#[test]
fn a_challenge_is_never_issued_twice_so_a_recorded_response_cannot_be_replayed() {
    let policy =
        TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], false)).logging_challenges();
    // The first login: a challenge, answered right.
    let mut first = chap_target_with_log(&policy);
    let (id, challenge) = challenged(&mut first);
    let recorded = text(&[
        ("CHAP_N", "alice"),
        ("CHAP_R", &chap_response(id, "alice-secret-12", &challenge)),
    ]);
    let step = first.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &recorded);
    assert_eq!(step.outcome, LoginOutcome::Continue);
    assert!(step.response.transit, "{:?}", step.response);
    // A second login drawing the same randomness (a broken random source,
    // or an attacker who could make it repeat) would issue the same
    // challenge, and the recorded response would verify: the target refuses
    // to issue it.
    let mut second = chap_target_with_log(&policy);
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "CHAP");
    second.send(&req(stage::SECURITY, false, 0), &data);
    let step = second.send(&req(stage::SECURITY, false, 0), &text(&[("CHAP_A", "5")]));
    assert_eq!(status(&step), (login_status::TARGET_ERROR, 0));
    assert!(
        failure(&step).reason.contains("repeats one issued before"),
        "{:?}",
        failure(&step)
    );
    // Without the log the same randomness gives the same challenge: the
    // refusal above is the log's doing.
    let mut unlogged = chap_target(false);
    assert_eq!(challenged(&mut unlogged), (id, challenge));
}

#[test]
fn a_challenge_issued_on_another_connection_is_refused_as_reflection() {
    let policy =
        TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], true)).logging_challenges();
    // Connection A gets a challenge that an attacker wants answered.
    let mut a = chap_target_with_log(&policy);
    let (_, challenge_a) = challenged(&mut a);
    // On connection B the attacker authenticates (say, with a stolen
    // one-way secret) and asks the target to answer A's challenge.
    let mut b = chap_target_with_log(&policy);
    b.n = 100; // fresh randomness: B's own challenge differs from A's
    let (id_b, challenge_b) = challenged(&mut b);
    assert_ne!(challenge_a, challenge_b);
    let answer = text(&[
        ("CHAP_N", "alice"),
        (
            "CHAP_R",
            &chap_response(id_b, "alice-secret-12", &challenge_b),
        ),
        ("CHAP_I", "1"),
        ("CHAP_C", &encode_hex(&challenge_a)),
    ]);
    let step = b.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &answer);
    assert_eq!(status(&step), (2, login_status::AUTHENTICATION_FAILURE));
    assert!(failure(&step).reason.contains("reflection"));
    // Any other challenge is answered with the target's CHAP_N and CHAP_R.
    let mut c = chap_target_with_log(&policy);
    c.n = 200;
    let (id_c, challenge_c) = challenged(&mut c);
    let answer = text(&[
        ("CHAP_N", "alice"),
        (
            "CHAP_R",
            &chap_response(id_c, "alice-secret-12", &challenge_c),
        ),
        ("CHAP_I", "9"),
        ("CHAP_C", &encode_hex(&[0x5a; 16])),
    ]);
    let step = c.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &answer);
    let expected =
        encode_hex(&ChapAlgorithm::Md5.response(9, &Secret::from("target-secret-34"), &[0x5a; 16]));
    assert_eq!(
        show(&step.data),
        format!("CHAP_N=tgt|CHAP_R={expected}|"),
        "{:?}",
        step.outcome
    );
    assert!(step.response.transit);
}

/// Runs AuthMethod and CHAP_A=8,7,5 against a target accepting only
/// `algorithm`; returns the target, CHAP_I and the challenge.
fn challenged_with(algorithm: ChapAlgorithm) -> (Target, u8, Vec<u8>) {
    let policy = TestPolicy::with_auth(chap_policy(vec![algorithm], false));
    let mut t = Target::new(TargetLoginConfig::default(), policy);
    let mut data = names();
    push_pair(&mut data, "AuthMethod", "CHAP");
    t.send(&req(stage::SECURITY, false, 0), &data);
    let step = t.send(
        &req(stage::SECURITY, false, 0),
        &text(&[("CHAP_A", "8,7,5")]),
    );
    let pairs = parse_pairs(&step.data).unwrap();
    assert_eq!(pairs[0], ("CHAP_A", algorithm.code().to_string().as_str()));
    let id = pairs[1].1.parse().unwrap();
    let challenge = decode_binary(pairs[2].1).unwrap();
    assert_eq!(challenge.len(), 32);
    (t, id, challenge)
}

#[test]
fn each_algorithm_verifies_its_own_response_and_refuses_another_algorithms() {
    let secret = Secret::from("alice-secret-12");
    for algorithm in ChapAlgorithm::ALL {
        for other in ChapAlgorithm::ALL.into_iter().filter(|a| *a != algorithm) {
            // The same input hashed with another algorithm does not verify.
            let (mut t, id, challenge) = challenged_with(algorithm);
            let bad = text(&[
                ("CHAP_N", "alice"),
                (
                    "CHAP_R",
                    &encode_hex(&other.response(id, &secret, &challenge)),
                ),
            ]);
            let step = t.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &bad);
            assert_eq!(
                status(&step),
                (2, 1),
                "{algorithm:?} took {other:?}'s response"
            );
        }
        let (mut t, id, challenge) = challenged_with(algorithm);
        let good = text(&[
            ("CHAP_N", "alice"),
            (
                "CHAP_R",
                &encode_hex(&algorithm.response(id, &secret, &challenge)),
            ),
        ]);
        let step = t.send(&req(stage::SECURITY, true, stage::OPERATIONAL), &good);
        assert!(step.response.transit, "{algorithm:?}: {:?}", step.outcome);
        assert_eq!(step.response.nsg, stage::OPERATIONAL);
    }
}

#[test]
fn a_second_chap_response_is_refused() {
    let mut t = chap_target(false);
    let (id, challenge) = challenged(&mut t);
    let answer = text(&[
        ("CHAP_N", "alice"),
        ("CHAP_R", &chap_response(id, "alice-secret-12", &challenge)),
    ]);
    assert_eq!(
        t.send(&req(stage::SECURITY, false, 0), &answer).outcome,
        LoginOutcome::Continue
    );
    assert_eq!(
        status(&t.send(&req(stage::SECURITY, false, 0), &answer)),
        (2, 0)
    );
}

#[test]
fn other_methods_keys_are_not_understood() {
    let mut t = chap_target(false);
    challenged(&mut t);
    let step = t.send(
        &req(stage::SECURITY, false, 0),
        &text(&[("SRP_U", "alice")]),
    );
    assert_eq!(show(&step.data), "SRP_U=NotUnderstood|");
}

#[test]
fn a_policy_with_one_secret_for_both_directions_is_refused() {
    let auth = AuthPolicy::Chap {
        initiator_user: "alice".into(),
        initiator_secret: Secret::from("same-secret-123"),
        mutual: Some(("tgt".into(), Secret::from("same-secret-123"))),
        algorithms: vec![ChapAlgorithm::Md5],
    };
    let mut t = Target::new(TargetLoginConfig::default(), TestPolicy::with_auth(auth));
    let step = t.send(&req(stage::SECURITY, false, 0), &names());
    assert_eq!(status(&step), (login_status::TARGET_ERROR, 0));
    assert!(!failure(&step).reason.contains("same-secret"));
}

#[test]
fn overrides_replace_the_portal_settings() {
    let mut policy = TestPolicy::open();
    policy.targets[0].overrides = Some(TargetLoginConfig {
        max_recv_data_segment_length: 16_384,
        target_portal_group_tag: 5,
        ..TargetLoginConfig::default()
    });
    let mut t = Target::new(TargetLoginConfig::default(), policy);
    let step = t.send(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &names(),
    );
    assert_eq!(
        show(&step.data),
        "TargetPortalGroupTag=5|TargetAlias=disk|MaxRecvDataSegmentLength=16384|"
    );
    let LoginOutcome::Complete(n) = step.outcome else {
        panic!()
    };
    assert_eq!(n.connection.max_recv_data_segment_length, 16_384);
    assert_eq!(n.session.target_portal_group_tag, Some(5));
}

#[test]
fn a_policy_refusal_with_class_zero_is_still_a_refusal() {
    struct Odd;
    impl isoe_wire::login::LoginPolicy for Odd {
        fn admit(
            &self,
            _: SessionType,
            _: &str,
            _: Option<&str>,
        ) -> Result<isoe_wire::login::Admission, LoginFailure> {
            Err(LoginFailure::new(0, 0, "refused without a status"))
        }
    }
    let mut login = TargetLogin::new(TargetLoginConfig::default());
    let step = login.handle_request(
        &req(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &names(),
        &Odd,
        &random(0),
    );
    assert_eq!(status(&step), (login_status::TARGET_ERROR, 0));
}
