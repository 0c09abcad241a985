//! Admission under `[limits]` with the connections' own reports of what
//! they received: logins that stall after their first request, and a
//! first request that comes in pieces, beside a crowd from one address.

use crate::harness::{server, session_config, Pair, TARGET};
use isoe_initiator::login::{LoginExchange, LoginStep};
use isoe_target::{Config, Server};
use isoe_wire::frame::{encode, FrameLimits};
use isoe_wire::negotiate::LocalParams;
use isoe_wire::pdu::LoginRequest;
use isoe_wire::Pdu;
use std::sync::Arc;
use std::time::Duration;

/// A target that asks for CHAP, beside the pair's open one.
const CHAP_TARGET: &str = "iqn.2026-11.io.isoe:pair-chap";
/// Logins in progress one address may hold by default
/// (`[limits] logins_per_initiator`).
const LOGINS_PER_INITIATOR: usize = 16;

/// The pair's server with [`CHAP_TARGET`] besides, no NOP-In pings and
/// `limits` (lines of its `[limits]` table).
fn server_with_a_chap_target(limits: &str) -> Arc<Server> {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[defaults]\nnop_in_interval_s = 0\n[limits]\n{limits}\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n\
         [[target]]\nname = \"{CHAP_TARGET}\"\n\
         [target.chap]\nuser = \"alice\"\nsecret = \"alice-secret-12\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n"
    );
    Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
}

/// The first Login Request of a login to [`CHAP_TARGET`] that offers
/// `auth_method`, encoded.
fn first_request(isid: u8, auth_method: &str) -> Vec<u8> {
    let request = LoginRequest {
        transit: true,
        continue_bit: false,
        csg: 0,
        nsg: 1,
        version_max: 0,
        version_min: 0,
        isid: [0x80, 0, 0, 0, 0x0c, isid],
        tsih: 0,
        initiator_task_tag: 0,
        cid: 0,
        cmd_sn: 1,
        exp_stat_sn: 0,
    };
    let text = format!(
        "InitiatorName=iqn.2026-11.io.isoe:staller\0SessionType=Normal\0\
         TargetName={CHAP_TARGET}\0AuthMethod={auth_method}\0"
    );
    let mut bytes = Vec::new();
    let pdu = Pdu::LoginRequest(request);
    encode(&mut bytes, &pdu, &[], text.as_bytes(), &FrameLimits::LOGIN);
    bytes
}

/// Admits a connection, sends the first request of a CHAP login on it,
/// takes the answer and sends nothing more.
fn stalled_chap_login(pair: &mut Pair, isid: u8) -> usize {
    let link = pair.connect_admitted().expect("room for a staller");
    pair.send_bytes(link, &first_request(isid, "CHAP"));
    pair.run();
    let (answer, _) = pair.take_pdu(link).expect("the first request is answered");
    assert!(
        matches!(answer, Pdu::LoginResponse(r) if r.status_class == 0),
        "{answer:?}"
    );
    link
}

/// Logins in progress that stalled after their first request, as many as
/// one address may hold, do not keep a normal login from that address
/// out: once they have kept the target waiting a while, the one that has
/// waited longest is closed to make room, and is counted.
#[test]
fn stalled_chap_logins_do_not_keep_a_normal_login_out() {
    let mut pair = Pair::new(server_with_a_chap_target(""));
    let stalled: Vec<usize> = (0..LOGINS_PER_INITIATOR)
        .map(|i| {
            let link = stalled_chap_login(&mut pair, i as u8);
            pair.advance(Duration::from_millis(100));
            link
        })
        .collect();
    pair.advance(Duration::from_secs(2));
    let link = pair
        .connect_admitted()
        .expect("a normal login's connection is admitted beside the stalled logins");
    let s = pair.login_on(link, &session_config(LocalParams::default(), 1, 1));
    assert_eq!(pair.read(s, 0, 1).len(), crate::harness::BLOCK);
    let closed: Vec<usize> = stalled
        .iter()
        .copied()
        .filter(|&l| pair.closed_at(l).is_some())
        .collect();
    assert_eq!(closed, [stalled[0]], "the one stalled longest made room");
    let evicted = &pair.server.gate.evicted;
    assert_eq!(evicted.logins.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// A login whose first request is in is not closed for connections that
/// send nothing from its address: they make room for each other.
#[test]
fn silent_connections_make_room_for_each_other_not_for_a_login_under_way() {
    assert!(first_request_beside_silent_connections(usize::MAX));
}

/// A first Login Request that comes in two pieces 2 s apart is served,
/// though connections that send nothing crowd its address meanwhile:
/// they, not the one that has sent part of a PDU, make room for each
/// other.
#[test]
fn a_first_request_in_two_pieces_is_served_beside_silent_connections() {
    assert!(first_request_beside_silent_connections(40));
}

/// Sends the first `first_piece` bytes of a login's first request, then
/// as many silent connections as the address may hold logins come, then 2
/// s after the first piece the rest: whether the login completes.
fn first_request_beside_silent_connections(first_piece: usize) -> bool {
    let mut pair = Pair::new(server("nop_in_interval_s = 0"));
    let link = pair.connect_admitted().expect("the first connection");
    let config = session_config(LocalParams::default(), 1, 2);
    let mut exchange = LoginExchange::new(config.login_config(0, 0, 1), [0; 32]);
    let LoginStep::Send { request, data } = exchange.start() else {
        panic!("a login starts with a request");
    };
    let mut first = Vec::new();
    let pdu = Pdu::LoginRequest(request);
    encode(&mut first, &pdu, &[], &data, &FrameLimits::LOGIN);
    let (piece, rest) = first.split_at(first_piece.min(first.len()));
    pair.send_bytes(link, piece);
    pair.run();
    pair.advance(Duration::from_secs(1));
    for i in 0..LOGINS_PER_INITIATOR {
        pair.connect_admitted()
            .unwrap_or_else(|why| panic!("silent connection {i} refused: {why}"));
    }
    pair.advance(Duration::from_secs(1));
    if !rest.is_empty() {
        pair.send_bytes(link, rest);
    }
    pair.run();
    let mut step = answer(&mut pair, link, &mut exchange);
    for _ in 0..8 {
        let LoginStep::Send { request, data } = step else {
            break;
        };
        pair.send(link, &Pdu::LoginRequest(request), &data);
        pair.run();
        step = answer(&mut pair, link, &mut exchange);
    }
    matches!(step, LoginStep::Done(_)) && pair.closed_at(link).is_none()
}

/// The target's answer on `link`, handed to `exchange`.
fn answer(pair: &mut Pair, link: usize, exchange: &mut LoginExchange) -> LoginStep {
    let (pdu, data) = pair
        .take_pdu(link)
        .expect("the target answers the login request");
    let Pdu::LoginResponse(response) = pdu else {
        panic!("a Login Response expected, got {pdu:?}");
    };
    exchange
        .handle_response(&response, &data)
        .expect("login accepted")
}

/// After failed authentications from an address, the answer to the next
/// is held back (1 s, doubling) and its login keeps its slot meanwhile,
/// however long: it waits on the target, not on its peer, and guessing
/// secrets stays at a crawl.
#[test]
fn a_login_whose_failure_answer_is_held_back_keeps_its_slot() {
    let mut pair = Pair::new(server_with_a_chap_target("logins_per_initiator = 1"));
    let fail = |pair: &mut Pair, isid: u8| {
        let link = pair.connect_admitted().expect("room for a login");
        pair.send_bytes(link, &first_request(isid, "None"));
        pair.run();
        link
    };
    for isid in 0..3 {
        let link = fail(&mut pair, isid);
        assert!(pair.closed_at(link).is_some(), "answered at once");
    }
    let fourth = fail(&mut pair, 3);
    pair.advance(Duration::from_secs(2));
    assert!(pair.closed_at(fourth).is_some(), "answered after 1 s");
    let fifth = fail(&mut pair, 4);
    pair.advance(Duration::from_millis(1500));
    assert_eq!(pair.closed_at(fifth), None, "its answer waits 2 s");
    assert!(
        pair.connect_admitted().is_err(),
        "the login whose answer waits keeps its slot"
    );
    pair.advance(Duration::from_secs(1));
    assert!(pair.closed_at(fifth).is_some());
    assert!(pair.connect_admitted().is_ok(), "its slot came back");
}
