//! `[limits]` through the real target: a connection that has sent nothing
//! makes room for a new one, connections beyond a limit are otherwise
//! closed at once and counted, sessions beyond one are refused with "out
//! of resources", room comes back when connections close, and a connection
//! that sends nothing is closed after `first_pdu_timeout_ms`, logins that
//! stall after their first request do not keep an address's next login
//! out, and a first request in pieces is served beside silent connections.

mod support;

use isoe_wire::frame::{encode, FrameLimits};
use isoe_wire::pdu::{stage, LoginRequest};
use isoe_wire::Pdu;
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;
use support::client::{key, push_text, Client, ClientError, LoginParams, Received};
use support::target::TargetConfig;
use support::{Target, DEFAULT_TARGET};

/// How long a refused connection may take to be closed.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

fn target_with(limits: &str) -> Target {
    Target::with_config(&TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[limits]\n{limits}\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    )))
}

/// True when the target closes `stream` without a byte sent.
fn closed_at_once(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(CLOSE_WITHIN))
        .expect("timeout");
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0) | Err(_))
}

#[test]
fn an_idle_connection_makes_room_then_connections_beyond_the_limit_are_closed() {
    let mut target = target_with("connections_per_initiator = 2");
    let mut healthy = Client::login_normal(target.addr(), DEFAULT_TARGET);
    healthy.ready(0);
    let mut idle = TcpStream::connect(target.addr()).expect("second connection");
    // A login from the same address: the idle connection makes room.
    let mut params = LoginParams::normal(DEFAULT_TARGET);
    params.initiator_name.push_str("-second");
    let mut second = Client::login(target.addr(), &params).expect("a login beside the idle one");
    second.ready(0);
    assert!(closed_at_once(&mut idle), "the idle connection is closed");
    // Both connections are logged in: nothing makes room for a third.
    let mut third = TcpStream::connect(target.addr()).expect("connect");
    assert!(closed_at_once(&mut third), "a third connection is closed");
    target.assert_running("after a refused connection");
    healthy.ready(0);
    drop(second);
    // The second session's close reaches the target asynchronously.
    let mut logged_in = None;
    for _ in 0..50 {
        match Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET)) {
            Ok(client) => {
                logged_in = Some(client);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    logged_in
        .expect("a login once the second session closed")
        .ready(0);
    // The log is read on another thread: the line may trail the login.
    target.wait_for_output("(limits.connections_per_initiator)");
    let log = target.output();
    assert!(
        log.contains("closed while logging in, to make room")
            && log.contains(
                "refused: 2 connections from this address already (limits.connections_per_initiator)"
            ),
        "{log}"
    );
}

#[test]
fn a_session_beyond_the_limit_is_refused_out_of_resources() {
    let mut target = target_with("sessions = 1");
    let mut first = Client::login_normal(target.addr(), DEFAULT_TARGET);
    first.ready(0);
    let mut params = LoginParams::normal(DEFAULT_TARGET);
    params.initiator_name.push_str("-second");
    match Client::login(target.addr(), &params) {
        Ok(_) => panic!("a second session was let in past limits.sessions = 1"),
        Err(ClientError::LoginFailed { class, detail, .. }) => assert_eq!(
            (class, detail),
            (3, 2),
            "target error, out of resources (RFC 7143 11.13.5)"
        ),
        Err(e) => panic!("expected a login failure, got {e}"),
    }
    first.ready(0);
    target.assert_running("after the refused session");
    assert!(target
        .output()
        .contains("1 sessions already (limits.sessions)"));
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_first_pdu_timeout_ms() {
    let mut target = target_with("first_pdu_timeout_ms = 1000");
    let mut silent = TcpStream::connect(target.addr()).expect("connect");
    assert!(
        closed_at_once(&mut silent),
        "a connection that sends nothing is closed"
    );
    // Its slot came back: a login from the same address gets in.
    let mut client = Client::login_normal(target.addr(), DEFAULT_TARGET);
    client.ready(0);
    target.assert_running("after the timeouts");
}

/// A target that asks for CHAP, beside [`DEFAULT_TARGET`].
const CHAP_TARGET: &str = "iqn.2026-11.io.isoe:limits-chap";
/// Logins in progress one address may hold by default
/// (`[limits] logins_per_initiator`).
const LOGINS_PER_INITIATOR: usize = 16;
/// Longer than the target lets a login that waits on its peer keep its
/// slot against a newcomer.
const STALLED_FOR: Duration = Duration::from_secs(2);

/// Sends the first request of a CHAP login to [`CHAP_TARGET`], takes the
/// answer, and sends nothing more.
fn stalled_chap_login(target: &Target) -> Client {
    let mut client = Client::connect(target.addr()).expect("connect");
    let mut text = Vec::new();
    push_text(&mut text, "InitiatorName", "iqn.2026-11.io.isoe:staller");
    push_text(&mut text, "SessionType", "Normal");
    push_text(&mut text, "TargetName", CHAP_TARGET);
    push_text(&mut text, "AuthMethod", "CHAP");
    let (response, keys) = client
        .login_step(stage::SECURITY, stage::OPERATIONAL, true, &text)
        .expect("the first request of a CHAP login is answered");
    assert_eq!(response.status_class, 0, "{keys:?}");
    assert_eq!(key(&keys, "AuthMethod"), Some("CHAP"));
    client
}

#[test]
fn stalled_chap_logins_do_not_keep_a_normal_login_from_their_address_out() {
    let mut target = Target::with_config(&TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n\n\
         [[target]]\nname = \"{CHAP_TARGET}\"\n\n\
         [target.chap]\nuser = \"alice\"\nsecret = \"alice-secret-12\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    )));
    let stalled: Vec<Client> = (0..LOGINS_PER_INITIATOR)
        .map(|_| stalled_chap_login(&target))
        .collect();
    std::thread::sleep(STALLED_FOR);
    let mut client = Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET))
        .expect("a normal login beside the stalled ones, at the first try");
    client.ready(0);
    target.assert_running("after the stalled logins");
    // The log is read on another thread: the line may trail the login.
    target.wait_for_output("(limits.logins_per_initiator)");
    let log = target.output();
    assert!(
        log.contains("to make room") && log.contains("(limits.logins_per_initiator)"),
        "{log}"
    );
    drop(stalled);
}

#[test]
fn a_first_login_request_in_two_pieces_is_served_beside_silent_connections() {
    let mut target = target_with("");
    let mut client = Client::connect(target.addr()).expect("connect");
    let request = LoginRequest {
        transit: true,
        continue_bit: false,
        csg: stage::SECURITY,
        nsg: stage::OPERATIONAL,
        version_max: 0,
        version_min: 0,
        isid: client.isid,
        tsih: 0,
        initiator_task_tag: 0,
        cid: 0,
        cmd_sn: client.cmd_sn,
        exp_stat_sn: 0,
    };
    let mut text = Vec::new();
    push_text(&mut text, "InitiatorName", "iqn.2026-11.io.isoe:in-pieces");
    push_text(&mut text, "SessionType", "Normal");
    push_text(&mut text, "TargetName", DEFAULT_TARGET);
    push_text(&mut text, "AuthMethod", "None");
    let mut bytes = Vec::new();
    encode(
        &mut bytes,
        &Pdu::LoginRequest(request),
        &[],
        &text,
        &FrameLimits::LOGIN,
    );
    let half = bytes.len() / 2;
    client.send_raw(&bytes[..half]).expect("first piece");
    std::thread::sleep(Duration::from_millis(200));
    // As many connections again from the same address, silent: they, not
    // the one with part of a PDU in, make room for each other.
    let silent: Vec<TcpStream> = (0..LOGINS_PER_INITIATOR)
        .map(|_| TcpStream::connect(target.addr()).expect("silent connection"))
        .collect();
    std::thread::sleep(STALLED_FOR);
    client.send_raw(&bytes[half..]).expect("second piece");
    match client.recv(Duration::from_secs(10)) {
        Ok(Received::Pdu {
            pdu: Pdu::LoginResponse(r),
            ..
        }) => {
            assert_eq!((r.status_class, r.transit), (0, true), "{r:?}");
            client.exp_stat_sn = r.stat_sn.wrapping_add(1);
            client.tsih = r.tsih;
        }
        Ok(Received::Pdu { pdu, .. }) => panic!("a Login Response expected, got {pdu:?}"),
        Ok(_) => panic!("the first request, sent in two pieces, was not answered"),
        Err(e) => panic!("the first request, sent in two pieces, was not answered: {e}"),
    }
    assert!(
        operational_stage_completes(&mut client),
        "the login in pieces reaches full feature phase"
    );
    target.assert_running("after the login in pieces");
    drop(silent);
}

/// Runs the operational stage of a login whose security stage is done,
/// taking the target's values for the keys it offers; whether it reaches
/// full feature phase within four rounds.
fn operational_stage_completes(client: &mut Client) -> bool {
    let mut text = Vec::new();
    push_text(&mut text, "MaxRecvDataSegmentLength", "8192");
    for _ in 0..4 {
        let (response, keys) = client
            .login_step(stage::OPERATIONAL, stage::FULL_FEATURE, true, &text)
            .expect("the operational stage is answered");
        assert_eq!(response.status_class, 0, "{keys:?}");
        if response.transit && response.nsg == stage::FULL_FEATURE {
            return true;
        }
        // RFC 7143 §6.2: keys the target offered on its own need an answer;
        // declarative ones (its MaxRecvDataSegmentLength, its portal group
        // tag) do not.
        text.clear();
        for (k, v) in &keys {
            if !matches!(
                k.as_str(),
                "MaxRecvDataSegmentLength" | "TargetPortalGroupTag" | "TargetAlias"
            ) {
                push_text(&mut text, k, v);
            }
        }
    }
    false
}
