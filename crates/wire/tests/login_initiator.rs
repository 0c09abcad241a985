//! The initiator login machine driven by hand-made Login Responses.

mod login_util;

use isoe_wire::chap::{ChapAlgorithm, ChapError};
use isoe_wire::login::{InitiatorLogin, InitiatorLoginConfig, InitiatorLoginError, InitiatorStep};
use isoe_wire::negotiate::NegotiationError;
use isoe_wire::pdu::{stage, LoginRequest, LoginResponse};
use isoe_wire::text::{encode_hex, push_pair};
use login_util::*;

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

fn resp(csg: u8, transit: bool, nsg: u8) -> LoginResponse {
    let c = initiator_config();
    LoginResponse {
        transit,
        csg,
        nsg,
        isid: c.isid,
        initiator_task_tag: c.initiator_task_tag,
        stat_sn: 9,
        ..LoginResponse::default()
    }
}

fn sent(step: Result<InitiatorStep, InitiatorLoginError>) -> (LoginRequest, Vec<u8>) {
    match step {
        Ok(InitiatorStep::Send { request, data }) => (request, data),
        other => panic!("expected a request, got {other:?}"),
    }
}

fn error(step: Result<InitiatorStep, InitiatorLoginError>) -> InitiatorLoginError {
    match step {
        Err(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A plain login, started: the first request is in the operational stage, T=1 NSG=3.
fn started() -> InitiatorLogin {
    let mut login = InitiatorLogin::new(initiator_config(), random(1));
    let InitiatorStep::Send { request, .. } = login.start() else {
        panic!()
    };
    assert_eq!(
        (request.csg, request.transit, request.nsg),
        (stage::OPERATIONAL, true, stage::FULL_FEATURE)
    );
    login
}

#[test]
fn refusals_are_decoded_into_words() {
    let mut r = resp(stage::OPERATIONAL, false, 0);
    (r.status_class, r.status_detail) = (3, 2);
    let e = error(started().handle_response(&r, &[]));
    assert_eq!(
        e,
        InitiatorLoginError::Refused {
            status_class: 3,
            status_detail: 2,
            description: "out of resources"
        }
    );
    assert_eq!(
        e.to_string(),
        "target refused the login: out of resources (status 0x0302)"
    );
    (r.status_class, r.status_detail) = (1, 1);
    let e = error(started().handle_response(&r, &text(&[("TargetAddress", "10.0.0.2:3260,1")])));
    assert_eq!(
        e,
        InitiatorLoginError::Redirected {
            status_detail: 1,
            description: "target moved temporarily",
            target_address: Some("10.0.0.2:3260,1".into())
        }
    );
}

#[test]
fn a_refusal_with_a_zeroed_isid_still_reports_its_status() {
    // tgt answers a failed CHAP response with ISID 0: the user must still
    // learn that authentication failed, not see a protocol violation.
    let mut r = resp(stage::OPERATIONAL, false, 0);
    (r.status_class, r.status_detail) = (2, 1);
    r.isid = [0; 6];
    assert_eq!(
        error(started().handle_response(&r, &[])).to_string(),
        "target refused the login: authentication failure (status 0x0201)"
    );
}

#[test]
fn responses_must_match_the_request() {
    let mut r = resp(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    r.initiator_task_tag += 1;
    assert!(matches!(
        error(started().handle_response(&r, &[])),
        InitiatorLoginError::Protocol(_)
    ));
    let mut r = resp(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    r.version_active = 1;
    assert!(matches!(
        error(started().handle_response(&r, &[])),
        InitiatorLoginError::Protocol(_)
    ));
    // A response in another stage.
    let r = resp(stage::SECURITY, false, 0);
    assert!(matches!(
        error(started().handle_response(&r, &[])),
        InitiatorLoginError::Protocol(_)
    ));
}

#[test]
fn the_target_transits_only_where_asked() {
    // The first request of a CHAP login does not ask to transit.
    let config = InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], false)),
        ..initiator_config()
    };
    let mut login = InitiatorLogin::new(config, random(1));
    let InitiatorStep::Send { request, .. } = login.start() else {
        panic!()
    };
    assert_eq!((request.csg, request.transit), (stage::SECURITY, false));
    let e = error(login.handle_response(
        &resp(stage::SECURITY, true, stage::OPERATIONAL),
        &text(&[("AuthMethod", "None")]),
    ));
    assert!(e.to_string().contains("not asked for"), "{e}");
}

#[test]
fn a_complete_login_reports_what_was_negotiated_and_then_ends() {
    let mut login = started();
    let mut r = resp(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    r.tsih = 0x1234;
    let answers = text(&[
        ("HeaderDigest", "None"),
        ("MaxBurstLength", "131072"),
        ("TargetPortalGroupTag", "3"),
        ("MaxRecvDataSegmentLength", "32768"),
    ]);
    let Ok(InitiatorStep::Complete { negotiated, tsih }) = login.handle_response(&r, &answers)
    else {
        panic!()
    };
    assert_eq!(tsih, 0x1234);
    assert_eq!(negotiated.session.max_burst_length, 131_072);
    assert_eq!(negotiated.session.target_portal_group_tag, Some(3));
    assert_eq!(negotiated.connection.max_send_data_segment_length, 32_768);
    assert_eq!(negotiated.connection.max_recv_data_segment_length, 65_536);
    assert_eq!(
        login.handle_response(&r, &[]),
        Err(InitiatorLoginError::Ended)
    );
}

#[test]
fn answers_that_contradict_the_offer_end_the_login() {
    let r = resp(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    let e = error(started().handle_response(&r, &text(&[("MaxBurstLength", "1048576")])));
    assert!(
        matches!(
            e,
            InitiatorLoginError::Negotiation(NegotiationError::InvalidAnswer { .. })
        ),
        "{e}"
    );
    let e = error(started().handle_response(&r, &text(&[("HeaderDigest", "CRC32C")])));
    assert!(
        matches!(
            e,
            InitiatorLoginError::Negotiation(NegotiationError::InvalidAnswer { .. })
        ),
        "{e}"
    );
}

#[test]
fn target_offers_are_answered_in_the_next_request() {
    let mut login = started();
    let r = resp(stage::OPERATIONAL, false, 0);
    let offers = text(&[
        ("X-com.example.Turbo", "Yes"),
        ("TaskReporting", "FastAbort,RFC3720"),
        ("MaxRecvDataSegmentLength", "8192"),
    ]);
    let (request, data) = sent(login.handle_response(&r, &offers));
    assert_eq!(
        show(&data),
        "X-com.example.Turbo=NotUnderstood|TaskReporting=RFC3720|"
    );
    assert_eq!(
        (request.csg, request.transit, request.nsg),
        (stage::OPERATIONAL, true, stage::FULL_FEATURE)
    );
    assert_eq!(request.exp_stat_sn, 10, "ExpStatSN = StatSN + 1");
    // A target that transits while its offers are unanswered breaks RFC 7143 §6.2.
    let mut login = started();
    let r = resp(stage::OPERATIONAL, true, stage::FULL_FEATURE);
    let e = error(login.handle_response(&r, &text(&[("X-com.example.Turbo", "Yes")])));
    assert!(matches!(e, InitiatorLoginError::Protocol(_)), "{e}");
}

#[test]
fn a_key_repeated_by_the_target_ends_the_login() {
    let mut login = started();
    let r = resp(stage::OPERATIONAL, false, 0);
    sent(login.handle_response(&r, &text(&[("TargetAlias", "a")])));
    let e = error(login.handle_response(&r, &text(&[("TargetAlias", "b")])));
    assert_eq!(
        e,
        InitiatorLoginError::Negotiation(NegotiationError::DuplicateKey {
            key: "TargetAlias".into()
        })
    );
}

#[test]
fn response_text_continues_with_empty_requests() {
    let mut login = started();
    let whole = text(&[
        ("MaxBurstLength", "65536"),
        ("TargetAlias", "disk"),
        ("MaxRecvDataSegmentLength", "16384"),
    ]);
    let mut r = resp(stage::OPERATIONAL, false, 0);
    r.continue_bit = true;
    let (request, data) = sent(login.handle_response(&r, &whole[..7]));
    // The empty request keeps the stage and the T bit it asked with.
    assert!(data.is_empty());
    assert_eq!(
        (
            request.csg,
            request.transit,
            request.nsg,
            request.continue_bit
        ),
        (1, true, 3, false)
    );
    let Ok(InitiatorStep::Complete { negotiated, .. }) = login.handle_response(
        &resp(stage::OPERATIONAL, true, stage::FULL_FEATURE),
        &whole[7..],
    ) else {
        panic!()
    };
    assert_eq!(negotiated.session.max_burst_length, 65_536);
    assert_eq!(negotiated.session.target_alias.as_deref(), Some("disk"));
    assert_eq!(negotiated.connection.max_send_data_segment_length, 16_384);
}

#[test]
fn request_text_longer_than_8192_bytes_continues() {
    let config = InitiatorLoginConfig {
        initiator_alias: Some("a".repeat(20_000)),
        ..initiator_config()
    };
    let mut login = InitiatorLogin::new(config, random(1));
    let InitiatorStep::Send { request, data } = login.start() else {
        panic!()
    };
    let mut whole = data.clone();
    assert_eq!(
        (data.len(), request.continue_bit, request.transit),
        (8192, true, false)
    );
    let mut pieces = 1;
    let mut last = request;
    while last.continue_bit {
        // RFC 7143 §11.12.2: the target answers each piece with an empty response.
        let (request, data) = sent(login.handle_response(&resp(stage::OPERATIONAL, false, 0), &[]));
        assert!(data.len() <= 8192);
        whole.extend_from_slice(&data);
        last = request;
        pieces += 1;
    }
    assert_eq!(pieces, 3);
    assert_eq!(
        (last.transit, last.nsg),
        (true, stage::FULL_FEATURE),
        "the last piece asks to transit"
    );
    assert!(show(&whole).contains(&format!("InitiatorAlias={}|", "a".repeat(20_000))));
    assert!(show(&whole).ends_with("MaxRecvDataSegmentLength=65536|"));
    // Text from the target while ours is continuing is a protocol error.
    let mut login = InitiatorLogin::new(
        InitiatorLoginConfig {
            initiator_alias: Some("a".repeat(20_000)),
            ..initiator_config()
        },
        random(1),
    );
    login.start();
    let e =
        error(login.handle_response(&resp(stage::OPERATIONAL, false, 0), &text(&[("X-a", "1")])));
    assert!(matches!(e, InitiatorLoginError::Protocol(_)));
}

#[test]
fn mutual_chap_catches_a_target_that_skips_authenticating_itself() {
    let config = InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], true)),
        ..initiator_config()
    };
    let mut login = InitiatorLogin::new(config, random(1));
    let InitiatorStep::Send { data, .. } = login.start() else {
        panic!()
    };
    assert!(show(&data).ends_with("AuthMethod=CHAP|"));
    let (_, data) = sent(login.handle_response(
        &resp(stage::SECURITY, false, 0),
        &text(&[("AuthMethod", "CHAP")]),
    ));
    assert_eq!(show(&data), "CHAP_A=5|");
    let challenge = encode_hex(&[0x5a; 16]);
    let (request, data) = sent(login.handle_response(
        &resp(stage::SECURITY, false, 0),
        &text(&[("CHAP_A", "5"), ("CHAP_I", "3"), ("CHAP_C", &challenge)]),
    ));
    assert_eq!((request.transit, request.nsg), (true, stage::OPERATIONAL));
    let shown = show(&data);
    assert!(
        shown.starts_with("CHAP_N=alice|CHAP_R=0x")
            && shown.contains("|CHAP_I=")
            && shown.contains("|CHAP_C=0x")
    );
    // The target lets us through without CHAP_N/CHAP_R: not authenticated.
    let e = error(login.handle_response(&resp(stage::SECURITY, true, stage::OPERATIONAL), &[]));
    assert_eq!(
        e,
        InitiatorLoginError::TargetAuthentication(ChapError::Missing { key: "CHAP_R" })
    );
}

#[test]
fn a_chap_algorithm_we_did_not_offer_is_refused() {
    let config = InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Sha256], false)),
        ..initiator_config()
    };
    let mut login = InitiatorLogin::new(config, random(1));
    login.start();
    sent(login.handle_response(
        &resp(stage::SECURITY, false, 0),
        &text(&[("AuthMethod", "CHAP")]),
    ));
    let e = error(login.handle_response(
        &resp(stage::SECURITY, false, 0),
        &text(&[
            ("CHAP_A", "5"),
            ("CHAP_I", "3"),
            ("CHAP_C", &encode_hex(&[1; 32])),
        ]),
    ));
    assert_eq!(
        e,
        InitiatorLoginError::Chap(ChapError::UnexpectedAlgorithm { value: "5".into() })
    );
}

#[test]
fn secrets_stay_out_of_debug_output() {
    let config = InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], true)),
        ..initiator_config()
    };
    let login = InitiatorLogin::new(config.clone(), random(1));
    let shown = format!("{config:?} {login:?}");
    assert!(
        !shown.contains("alice-secret") && !shown.contains("target-secret"),
        "{shown}"
    );
}
