//! `[limits]` through the real target: a connection that has sent nothing
//! makes room for a new one, connections beyond a limit are otherwise
//! closed at once and counted, sessions beyond one are refused with "out
//! of resources", room comes back when connections close, and a connection
//! that sends nothing is closed after `first_pdu_timeout_ms`.

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;
use support::client::{Client, ClientError, LoginParams};
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
    let log = target.output();
    assert!(
        log.contains("closed before its first PDU to make room")
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
