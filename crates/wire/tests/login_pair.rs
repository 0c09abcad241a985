//! Target and initiator login machines against each other (RFC 7143 §6.3).

mod login_util;

use isoe_wire::chap::ChapAlgorithm;
use isoe_wire::chap::{ChapError, Secret};
use isoe_wire::login::{AuthPolicy, InitiatorLoginError, TargetLoginConfig};
use isoe_wire::negotiate::{Digest, LocalParams, SessionType};
use isoe_wire::pdu::{login_status, stage};
use login_util::*;

#[test]
fn no_auth_normal_login_completes_in_one_exchange() {
    let mut pair = Pair::new(
        TargetLoginConfig::default(),
        TestPolicy::open(),
        initiator_config(),
    );
    let (target, initiator, tsih) = pair.run().complete();
    assert_eq!(tsih, 0x42);
    assert_eq!(pair.transcript.len(), 1);
    let x = &pair.transcript[0];
    // RFC 7143 §6.3: no security negotiation, so the login starts in the operational stage.
    assert_eq!(
        (x.request.csg, x.request.transit, x.request.nsg),
        (stage::OPERATIONAL, true, stage::FULL_FEATURE)
    );
    assert_eq!(
        (x.response.csg, x.response.transit, x.response.nsg),
        (stage::OPERATIONAL, true, stage::FULL_FEATURE)
    );
    assert_eq!((x.response.version_max, x.response.version_active), (0, 0));
    assert_eq!(x.response.isid, [0x80, 0x12, 0x34, 0x56, 0x00, 0x01]);
    assert_eq!(x.response.initiator_task_tag, 0x1000);
    // Both sides agree on every session parameter, names and declarations included.
    assert_eq!(target.session, initiator.session);
    assert_eq!(target.session.initiator_name, INITIATOR);
    assert_eq!(target.session.initiator_alias.as_deref(), Some("host1"));
    assert_eq!(target.session.target_name.as_deref(), Some(TARGET));
    assert_eq!(target.session.target_alias.as_deref(), Some("disk"));
    assert_eq!(target.session.target_portal_group_tag, Some(1));
    assert_eq!(target.session.session_type, SessionType::Normal);
    // MaxRecvDataSegmentLength is declared by each side for its own receiving.
    assert_eq!(target.connection.max_recv_data_segment_length, 262_144);
    assert_eq!(target.connection.max_send_data_segment_length, 65_536);
    assert_eq!(initiator.connection.max_recv_data_segment_length, 65_536);
    assert_eq!(initiator.connection.max_send_data_segment_length, 262_144);
    assert_eq!(
        (target.isid, target.tsih_requested, target.cid),
        (initiator.isid, 0, 7)
    );
}

#[test]
fn the_texts_of_a_plain_login_byte_for_byte() {
    let mut pair = Pair::new(
        TargetLoginConfig::default(),
        TestPolicy::open(),
        initiator_config(),
    );
    pair.run().complete();
    let x = &pair.transcript[0];
    assert_eq!(
        x.request_data,
        b"InitiatorName=iqn.2026-11.test:init\0InitiatorAlias=host1\0SessionType=Normal\0TargetName=iqn.2026-11.test:tgt\0\
HeaderDigest=None\0DataDigest=None\0InitialR2T=Yes\0ImmediateData=Yes\0MaxBurstLength=262144\0FirstBurstLength=65536\0\
DefaultTime2Wait=2\0DefaultTime2Retain=20\0MaxOutstandingR2T=1\0DataPDUInOrder=Yes\0DataSequenceInOrder=Yes\0\
ErrorRecoveryLevel=0\0MaxConnections=1\0MaxRecvDataSegmentLength=65536\0"
    );
    assert_eq!(
        x.response_data,
        b"HeaderDigest=None\0DataDigest=None\0InitialR2T=Yes\0ImmediateData=Yes\0MaxBurstLength=262144\0\
FirstBurstLength=65536\0DefaultTime2Wait=2\0DefaultTime2Retain=20\0MaxOutstandingR2T=1\0DataPDUInOrder=Yes\0\
DataSequenceInOrder=Yes\0ErrorRecoveryLevel=0\0MaxConnections=1\0TargetPortalGroupTag=1\0TargetAlias=disk\0\
MaxRecvDataSegmentLength=262144\0"
    );
}

#[test]
fn discovery_login_negotiates_only_what_applies() {
    let config = isoe_wire::login::InitiatorLoginConfig {
        session_type: SessionType::Discovery,
        target_name: None,
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config);
    let (target, initiator, _) = pair.run().complete();
    assert_eq!(target.session, initiator.session);
    assert_eq!(target.session.session_type, SessionType::Discovery);
    assert_eq!(target.session.target_name, None);
    assert_eq!(
        target.session.target_alias, None,
        "no alias in a discovery session"
    );
    let text = pair.transcript[0].request_text();
    // RFC 7143 §13: keys irrelevant to discovery are not offered at all.
    assert!(
        !text.contains("MaxBurstLength") && !text.contains("ImmediateData"),
        "{text}"
    );
    assert!(text.contains("SessionType=Discovery|") && !text.contains("TargetName"));
}

#[test]
fn chap_logins_succeed_with_each_algorithm() {
    for algorithm in ChapAlgorithm::ALL {
        let policy = TestPolicy::with_auth(chap_policy(vec![algorithm], false));
        let config = isoe_wire::login::InitiatorLoginConfig {
            chap: Some(chap_credentials(ChapAlgorithm::ALL.to_vec(), false)),
            ..initiator_config()
        };
        let mut pair = Pair::new(TargetLoginConfig::default(), policy, config);
        let (target, initiator, _) = pair.run().complete();
        assert_eq!(target.session, initiator.session);
        let t = &pair.transcript;
        assert_eq!(t.len(), 4, "AuthMethod, CHAP_A, CHAP_N/R, operational");
        assert_eq!(t[0].request_text(), format!("InitiatorName={INITIATOR}|InitiatorAlias=host1|SessionType=Normal|TargetName={TARGET}|AuthMethod=CHAP,None|"));
        assert_eq!(
            t[0].response_text(),
            "AuthMethod=CHAP|TargetPortalGroupTag=1|TargetAlias=disk|"
        );
        assert_eq!(t[1].request_text(), "CHAP_A=8,7,5|");
        let code = algorithm.code();
        assert!(
            t[1].response_text()
                .starts_with(&format!("CHAP_A={code}|CHAP_I=")),
            "{}",
            t[1].response_text()
        );
        // The challenge: 32 bytes of hex.
        let c = t[1]
            .response_text()
            .split("CHAP_C=0x")
            .nth(1)
            .unwrap()
            .trim_end_matches('|')
            .to_string();
        assert_eq!(c.len(), 64);
        assert!(t[2].request_text().starts_with("CHAP_N=alice|CHAP_R=0x"));
        assert_eq!(
            (t[2].request.csg, t[2].request.transit, t[2].request.nsg),
            (stage::SECURITY, true, stage::OPERATIONAL)
        );
        assert_eq!(
            (t[2].response.csg, t[2].response.transit, t[2].response.nsg),
            (stage::SECURITY, true, stage::OPERATIONAL)
        );
        assert_eq!(t[3].request.csg, stage::OPERATIONAL);
        assert!(t[3].response.transit);
    }
}

/// RFC 1994 §4.1 computed here with the md-5 crate, independently of `chap.rs`.
#[test]
fn the_chap_response_on_the_wire_is_md5_of_id_secret_challenge() {
    use md5::{Digest as _, Md5};
    let policy = TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], false));
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], false)),
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), policy, config);
    pair.run().complete();
    let challenge_text = pair.transcript[1].response_data.clone();
    let pairs = isoe_wire::text::parse_pairs(&challenge_text).unwrap();
    let get = |k: &str| pairs.iter().find(|(key, _)| *key == k).unwrap().1;
    let id: u8 = get("CHAP_I").parse().unwrap();
    let challenge = isoe_wire::text::decode_binary(get("CHAP_C")).unwrap();
    let mut h = Md5::new();
    h.update([id]);
    h.update(b"alice-secret-12");
    h.update(&challenge);
    let expected = format!(
        "CHAP_N=alice\0CHAP_R={}\0",
        isoe_wire::text::encode_hex(&h.finalize())
    );
    assert_eq!(
        String::from_utf8(pair.transcript[2].request_data.clone()).unwrap(),
        expected
    );
}

#[test]
fn mutual_chap_authenticates_both_ways() {
    for algorithm in ChapAlgorithm::ALL {
        let policy = TestPolicy::with_auth(chap_policy(vec![algorithm], true));
        let config = isoe_wire::login::InitiatorLoginConfig {
            chap: Some(chap_credentials(vec![algorithm], true)),
            ..initiator_config()
        };
        let mut pair = Pair::new(TargetLoginConfig::default(), policy, config);
        pair.run().complete();
        let t = &pair.transcript;
        // Mutual CHAP offers CHAP alone: no fallback to None.
        assert!(t[0].request_text().contains("AuthMethod=CHAP|"));
        let third = t[2].request_text();
        assert!(
            third.starts_with("CHAP_N=alice|CHAP_R=0x")
                && third.contains("|CHAP_I=")
                && third.contains("|CHAP_C=0x")
        );
        assert!(
            t[2].response_text().starts_with("CHAP_N=tgt|CHAP_R=0x"),
            "{}",
            t[2].response_text()
        );
    }
}

#[test]
fn a_target_with_the_wrong_mutual_secret_is_refused_by_the_initiator() {
    let mut policy = TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Sha256], true));
    if let AuthPolicy::Chap { mutual, .. } = &mut policy.targets[0].auth {
        *mutual = Some(("tgt".into(), Secret::from("impostor-secret-9")));
    }
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Sha256], true)),
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), policy, config);
    match pair.run() {
        End::InitiatorFailed(InitiatorLoginError::TargetAuthentication(
            ChapError::WrongResponse { name },
        )) => {
            assert_eq!(name, "tgt")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wrong_secret_is_an_authentication_failure() {
    let policy = TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], false));
    let mut chap = chap_credentials(vec![ChapAlgorithm::Md5], false);
    chap.secret = Secret::from("not-the-secret!");
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap),
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), policy, config);
    let (failure, initiator) = pair.run().refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 0x01));
    assert!(
        failure.reason.contains("CHAP_R does not verify"),
        "{}",
        failure.reason
    );
    assert!(!failure.reason.contains("secret-12") && !failure.reason.contains("not-the-secret"));
    assert_eq!(
        initiator,
        InitiatorLoginError::Refused {
            status_class: 2,
            status_detail: 1,
            description: "authentication failure"
        }
    );
    assert_eq!(
        initiator.to_string(),
        "target refused the login: authentication failure (status 0x0201)"
    );
    let last = pair.transcript.last().unwrap();
    assert!(last.response_data.is_empty() && !last.response.transit);
}

#[test]
fn an_initiator_without_chap_is_refused_where_chap_is_required() {
    let policy = TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Md5], false));
    // No credentials: the initiator starts in the operational stage.
    let mut pair = Pair::new(TargetLoginConfig::default(), policy, initiator_config());
    let (failure, _) = pair.run().refused();
    assert_eq!(
        (failure.status_class, failure.status_detail),
        (2, login_status::AUTHENTICATION_FAILURE)
    );
    assert!(failure.reason.contains("skipped the security stage"));
}

#[test]
fn chap_offered_to_a_target_that_needs_none_falls_back_to_none() {
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], false)),
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config);
    pair.run().complete();
    assert!(pair.transcript[0]
        .response_text()
        .starts_with("AuthMethod=None|"));
    // Mutual CHAP cannot fall back: the initiator insists on authenticating the target.
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], true)),
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config);
    match pair.run() {
        End::InitiatorFailed(InitiatorLoginError::AuthMethodRefused(v)) => assert_eq!(v, "Reject"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_common_chap_algorithm_is_an_authentication_failure() {
    let policy = TestPolicy::with_auth(chap_policy(vec![ChapAlgorithm::Sha3_256], false));
    let config = isoe_wire::login::InitiatorLoginConfig {
        chap: Some(chap_credentials(vec![ChapAlgorithm::Md5], false)),
        ..initiator_config()
    };
    let (failure, _) = Pair::new(TargetLoginConfig::default(), policy, config)
        .run()
        .refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 1));
    assert!(failure.reason.contains("CHAP_A"), "{}", failure.reason);
}

#[test]
fn an_unknown_target_is_not_found() {
    let config = isoe_wire::login::InitiatorLoginConfig {
        target_name: Some(OTHER_TARGET.into()),
        ..initiator_config()
    };
    let (failure, initiator) = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config)
        .run()
        .refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 0x03));
    assert_eq!(
        initiator,
        InitiatorLoginError::Refused {
            status_class: 2,
            status_detail: 3,
            description: "target not found"
        }
    );
}

#[test]
fn an_initiator_outside_the_acl_is_not_authorized() {
    let mut policy = TestPolicy::open();
    policy.targets[0].allowed = Some(vec!["iqn.2026-11.test:someone-else".into()]);
    let (failure, initiator) = Pair::new(TargetLoginConfig::default(), policy, initiator_config())
        .run()
        .refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 0x02));
    assert!(failure.reason.contains("ACL"));
    assert!(matches!(
        initiator,
        InitiatorLoginError::Refused {
            status_detail: 2,
            ..
        }
    ));
}

#[test]
fn a_normal_session_without_target_name_misses_a_parameter() {
    let config = isoe_wire::login::InitiatorLoginConfig {
        target_name: None,
        ..initiator_config()
    };
    let (failure, initiator) = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config)
        .run()
        .refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 0x07));
    assert_eq!(
        initiator.to_string(),
        "target refused the login: missing parameter (status 0x0207)"
    );
}

#[test]
fn negotiation_results_follow_each_keys_result_function() {
    let target_config = TargetLoginConfig {
        max_burst_length: 1_048_576,
        first_burst_length: 262_144,
        initial_r2t: true,
        immediate_data: true,
        max_connections: 4,
        max_outstanding_r2t: 8,
        header_digest: vec![Digest::None, Digest::Crc32c],
        data_digest: vec![Digest::None, Digest::Crc32c],
        default_time2wait: 2,
        default_time2retain: 0,
        ..TargetLoginConfig::default()
    };
    let params = LocalParams {
        max_burst_length: 65_536,
        first_burst_length: 16_384,
        initial_r2t: false,
        immediate_data: false,
        max_connections: 16,
        max_outstanding_r2t: 2,
        header_digest: vec![Digest::Crc32c, Digest::None],
        data_digest: vec![Digest::None, Digest::Crc32c],
        default_time2wait: 10,
        default_time2retain: 60,
        error_recovery_level: 2,
        max_recv_data_segment_length: 8192,
        ..LocalParams::default()
    };
    let config = isoe_wire::login::InitiatorLoginConfig {
        params,
        ..initiator_config()
    };
    let (target, initiator, _) = Pair::new(target_config, TestPolicy::open(), config)
        .run()
        .complete();
    assert_eq!(target.session, initiator.session);
    let s = &target.session;
    assert_eq!(s.max_burst_length, 65_536, "MaxBurstLength: minimum");
    assert_eq!(s.first_burst_length, 16_384, "FirstBurstLength: minimum");
    assert!(!s.immediate_data, "ImmediateData: AND");
    assert!(s.initial_r2t, "InitialR2T: OR");
    assert_eq!(s.max_connections, 4);
    assert_eq!(s.max_outstanding_r2t, 2);
    assert_eq!(s.default_time2wait, 10, "DefaultTime2Wait: maximum");
    assert_eq!(s.default_time2retain, 0, "DefaultTime2Retain: minimum");
    assert_eq!(
        s.error_recovery_level, 0,
        "ErrorRecoveryLevel: minimum; isoe implements 0"
    );
    // Digests: the initiator's order decides among what the target accepts.
    assert!(target.connection.header_digest && initiator.connection.header_digest);
    assert!(!target.connection.data_digest && !initiator.connection.data_digest);
    assert_eq!(target.connection.max_send_data_segment_length, 8192);
}

#[test]
fn a_target_that_requires_digests_gets_them_or_refuses() {
    let target_config = TargetLoginConfig {
        header_digest: vec![Digest::Crc32c],
        ..TargetLoginConfig::default()
    };
    // The initiator prefers None but accepts CRC32C.
    let params = LocalParams {
        header_digest: vec![Digest::None, Digest::Crc32c],
        ..LocalParams::default()
    };
    let config = isoe_wire::login::InitiatorLoginConfig {
        params,
        ..initiator_config()
    };
    let (target, initiator, _) = Pair::new(target_config.clone(), TestPolicy::open(), config)
        .run()
        .complete();
    assert!(target.connection.header_digest && initiator.connection.header_digest);
    // An initiator that cannot do CRC32C cannot log in.
    let (failure, _) = Pair::new(target_config, TestPolicy::open(), initiator_config())
        .run()
        .refused();
    assert_eq!((failure.status_class, failure.status_detail), (2, 0));
    assert!(
        failure.reason.contains("HeaderDigest"),
        "{}",
        failure.reason
    );
}

#[test]
fn a_second_connection_does_not_negotiate_session_keys() {
    let config = isoe_wire::login::InitiatorLoginConfig {
        tsih: 0x42,
        cid: 8,
        ..initiator_config()
    };
    let mut pair = Pair::new(TargetLoginConfig::default(), TestPolicy::open(), config);
    let (target, _, tsih) = pair.run().complete();
    assert_eq!((target.tsih_requested, target.cid, tsih), (0x42, 8, 0x42));
    let text = pair.transcript[0].request_text();
    assert!(
        !text.contains("SessionType")
            && !text.contains("MaxBurstLength")
            && text.contains("HeaderDigest"),
        "{text}"
    );
}
