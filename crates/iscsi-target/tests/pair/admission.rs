//! Admission under `[limits]`, the connections admitted as the target's
//! accept thread admits them: a login beside a crowd from its address.

use crate::harness::{server, session_config, Pair};
use isoe_initiator::login::{LoginExchange, LoginStep};
use isoe_wire::frame::{encode, FrameLimits};
use isoe_wire::negotiate::LocalParams;
use isoe_wire::Pdu;
use std::time::Duration;

/// Logins in progress one address may hold by default
/// (`[limits] logins_per_initiator`).
const LOGINS_PER_INITIATOR: usize = 16;

/// A login whose first request is in is not closed for connections that
/// send nothing from its address: they make room for each other.
#[test]
fn silent_connections_make_room_for_each_other_not_for_a_login_under_way() {
    assert!(first_request_beside_silent_connections(usize::MAX));
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
