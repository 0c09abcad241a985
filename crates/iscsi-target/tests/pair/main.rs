//! The target's connections against the initiator's session core in
//! virtual time (`harness.rs`): CmdSN order across the connections of a
//! session, R2T, task management, the target's timers, MC/S logout,
//! store work that runs in the background and admission under `[limits]`
//! (`admission.rs`), each with its outcome asserted.

mod admission;
#[allow(dead_code)]
mod harness;

use harness::{server, session_config, Pair, BLOCK, TICK};
use isoe_initiator::cdb;
use isoe_initiator::{Command, Outcome, TaskError, TaskManagement};
use isoe_target::connection::{DATA_OUT_WAIT, LOGIN_DEADLINE};
use isoe_target::session::CMD_SN_GAP_WAIT;
use isoe_wire::negotiate::{Digest, LocalParams};
use isoe_wire::pdu::{self, logout, tmf, LogoutRequest, NopOut};
use isoe_wire::Pdu;
use std::time::Duration;

/// `[defaults]` with no NOP-In pings, so that a connection held silent by
/// a test ends for the reason under test and no other.
const NO_PINGS: &str = "nop_in_interval_s = 0";

/// `blocks` blocks of bytes that differ from block to block and from `seed` to seed.
fn pattern(blocks: usize, seed: u8) -> Vec<u8> {
    (0..blocks * BLOCK)
        .map(|i| seed.wrapping_add((i % 251) as u8) ^ (i / BLOCK) as u8)
        .collect()
}

fn write_command(lba: u64, data: Vec<u8>) -> Command {
    let blocks = (data.len() / BLOCK) as u32;
    Command::write(0, &cdb::write16(lba, blocks, false), data)
}

/// Every write solicited by R2T, in bursts of 4 KiB.
fn solicited_writes() -> LocalParams {
    LocalParams {
        initial_r2t: true,
        immediate_data: false,
        max_burst_length: 4096,
        first_burst_length: 4096,
        ..LocalParams::default()
    }
}

/// The ExpCmdSN of each SCSI Response the target sent on `link`.
fn response_exp_cmd_sns(pair: &Pair, link: usize) -> Vec<u32> {
    pair.sent_by_target(link)
        .iter()
        .filter_map(|(_, p)| match p {
            Pdu::ScsiResponse(r) => Some(r.exp_cmd_sn),
            _ => None,
        })
        .collect()
}

/// The R2Ts the target sent on `link`: (R2TSN, offset, length).
fn r2ts(pair: &Pair, link: usize) -> Vec<(u32, u32, u32)> {
    pair.sent_by_target(link)
        .iter()
        .filter_map(|(_, p)| match p {
            Pdu::R2t(r) => Some((r.r2t_sn, r.buffer_offset, r.desired_data_transfer_length)),
            _ => None,
        })
        .collect()
}

/// Moves the clock to `at` and asserts that the target ended `link` then,
/// and not a tick before.
fn ends_at(pair: &mut Pair, link: usize, at: Duration) {
    pair.advance(at - TICK - pair.elapsed());
    assert_eq!(pair.closed_at(link), None, "open a tick before {at:?}");
    pair.advance(TICK);
    assert_eq!(pair.closed_at(link), Some(at));
}

/// A session of two connections with one write submitted on each, the
/// first (CmdSN 1, on connection 0) held back on its way, so that the
/// second (CmdSN 2, on connection 1) arrives ahead of a gap. Returns the
/// pair, the session, its two links and the writes' tokens.
fn two_writes_across_a_gap() -> (Pair, usize, [usize; 2], [u64; 2]) {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(LocalParams::default(), 2, 1));
    let links = [pair.link(s, 0), pair.link(s, 1)];
    pair.hold_to_target(links[0], true);
    let first = pair.submit(s, write_command(0, pattern(1, 0xa0)));
    let second = pair.submit(s, write_command(1, pattern(1, 0xb0)));
    pair.run();
    assert!(pair.waiting(links[1]), "CmdSN 2 waits for CmdSN 1");
    assert!(pair.take(second).is_none(), "and is not answered");
    assert!(response_exp_cmd_sns(&pair, links[1]).is_empty());
    (pair, s, links, [first, second])
}

#[test]
fn a_command_ahead_of_a_cmd_sn_gap_runs_once_the_gap_fills() {
    let (mut pair, s, links, [first, second]) = two_writes_across_a_gap();
    pair.advance(Duration::from_secs(10));
    assert!(pair.waiting(links[1]), "still waiting, not failed");
    pair.hold_to_target(links[0], false);
    pair.run();
    assert!(!pair.waiting(links[1]));
    for token in [first, second] {
        pair.take(token).expect("answered").good().expect("GOOD");
    }
    assert_eq!(
        (
            response_exp_cmd_sns(&pair, links[0]),
            response_exp_cmd_sns(&pair, links[1])
        ),
        (vec![2], vec![3]),
        "CmdSN 1 answered on connection 0, then CmdSN 2 on connection 1"
    );
    assert_eq!(pair.read(s, 0, 1), pattern(1, 0xa0));
    assert_eq!(pair.read(s, 1, 1), pattern(1, 0xb0));
}

#[test]
fn a_cmd_sn_gap_that_never_fills_ends_the_waiting_connection() {
    let (mut pair, _, links, _) = two_writes_across_a_gap();
    ends_at(&mut pair, links[1], CMD_SN_GAP_WAIT);
    assert_eq!(pair.closed_at(links[0]), None, "the other connection stays");
    let session = pair.server.session_count();
    assert_eq!(session, 1, "so does the session");
}

#[test]
fn a_large_write_is_solicited_burst_by_burst_and_lands() {
    let mut pair = Pair::new(server(NO_PINGS));
    // Every delivery in odd pieces: PDUs reach both sides a few bytes at a time.
    pair.set_chunks(&[1, 47, 3, 1500, 48, 9000]);
    let s = pair.login(&session_config(solicited_writes(), 1, 2));
    let data = pattern(128, 0x11);
    pair.write(s, 8, data.clone());
    let expected: Vec<_> = (0..16).map(|n| (n, n * 4096, 4096)).collect();
    assert_eq!(r2ts(&pair, pair.link(s, 0)), expected, "16 bursts of 4 KiB");
    assert_eq!(pair.read(s, 8, 128), data);
    assert_eq!(pair.server.write_budget.held(), 0);
}

#[test]
fn solicited_data_that_never_comes_ends_the_connection_and_frees_the_budget() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(solicited_writes(), 1, 3));
    let link = pair.link(s, 0);
    // The R2T never reaches the initiator, so no data comes.
    pair.hold_to_initiator(link, true);
    pair.submit(s, write_command(0, pattern(64, 0x22)));
    pair.run();
    assert_eq!(r2ts(&pair, link), [(0, 0, 4096)]);
    assert_eq!(pair.server.write_budget.held(), 4096, "one burst charged");
    ends_at(&mut pair, link, DATA_OUT_WAIT);
    assert_eq!(
        pair.server.write_budget.held(),
        0,
        "the budget is given back"
    );
}

/// Immediate data, unsolicited Data-Out (InitialR2T=No) and then R2Ts,
/// with header and data digests, every PDU arriving in odd pieces.
#[test]
fn a_write_by_every_path_with_digests_lands_in_pieces() {
    let mut pair = Pair::new(server(NO_PINGS));
    pair.set_chunks(&[5, 4096, 13, 700]);
    let params = LocalParams {
        header_digest: vec![Digest::Crc32c],
        data_digest: vec![Digest::Crc32c],
        immediate_data: true,
        initial_r2t: false,
        max_recv_data_segment_length: 8192,
        first_burst_length: 16384,
        max_burst_length: 32768,
        ..LocalParams::default()
    };
    let s = pair.login(&session_config(params, 1, 12));
    let data = pattern(256, 0x77);
    pair.write(s, 100, data.clone());
    assert_eq!(
        r2ts(&pair, pair.link(s, 0)),
        [
            (0, 16384, 32768),
            (1, 49152, 32768),
            (2, 81920, 32768),
            (3, 114_688, 16384)
        ],
        "R2Ts for what the first burst left"
    );
    assert_eq!(pair.read(s, 100, 256), data);
}

/// With a data digest, reads of a memory LUN send digests folded from the
/// page CRCs the store keeps (copied reads up to 64 KiB, lent ones from
/// 128 KiB). The initiator checks every digest, so a wrong fold fails the
/// read: before and after the pages are rewritten, in part and whole, for
/// ranges that are whole pages and ranges that are not, and for pages never
/// written.
#[test]
fn reads_with_digests_folded_from_kept_page_crcs_check_out() {
    let mut pair = Pair::new(server(NO_PINGS));
    let params = LocalParams {
        header_digest: vec![Digest::Crc32c],
        data_digest: vec![Digest::Crc32c],
        max_recv_data_segment_length: 8192,
        ..LocalParams::default()
    };
    let s = pair.login(&session_config(params, 1, 13));
    // 2 MiB from LBA 8 (one page in), across the 2 MiB chunk boundary.
    let mut medium = vec![0u8; 4 << 20];
    let data = pattern(4096, 0x5a);
    pair.write(s, 8, data.clone());
    medium[4096..4096 + data.len()].copy_from_slice(&data);
    let reads = [
        (8, 8),     // one page
        (8, 128),   // 64 KiB: eight 8 KiB Data-In PDUs, each whole pages
        (4088, 64), // 32 KiB across the chunk boundary
        (9, 16),    // not on a page boundary: computed
        (8, 512),   // 256 KiB: lent, folded per PDU
        (4104, 24), // 12 KiB, partly never written
        (8000, 64), // never written: the zero page's CRC
    ];
    for round in 0..3 {
        for &(lba, blocks) in &reads {
            let start = lba as usize * BLOCK;
            let got = pair.read(s, lba, blocks);
            assert!(
                got == medium[start..start + blocks * BLOCK],
                "round {round}: {blocks} blocks at {lba}"
            );
        }
        // A block in one page, then a whole page, are written anew.
        let block = pattern(1, round as u8);
        pair.write(s, 8 + 3, block.clone());
        medium[(8 + 3) * BLOCK..(8 + 4) * BLOCK].copy_from_slice(&block);
        let page = pattern(8, 0x30 + round as u8);
        pair.write(s, 4088, page.clone());
        medium[4088 * BLOCK..4096 * BLOCK].copy_from_slice(&page);
    }
}

/// ABORT TASK reaches the target while the write waits for its data; the
/// initiator, which got the R2T just before the TMF's answer, sends the
/// data anyway, and the target drops it quietly.
#[test]
fn abort_task_ends_a_write_that_waits_for_its_data() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(solicited_writes(), 1, 4));
    let link = pair.link(s, 0);
    pair.hold_to_initiator(link, true);
    let write = pair.submit(s, write_command(0, pattern(8, 0x33)));
    pair.run();
    assert_eq!(pair.server.write_budget.held(), 4096);
    let abort = pair.task_management(
        s,
        TaskManagement::AbortTask {
            lun: 0,
            token: write,
        },
    );
    pair.run();
    assert_eq!(pair.server.write_budget.held(), 0, "aborted at the target");
    pair.hold_to_initiator(link, false);
    pair.run();
    let abort = pair.take(abort).expect("answered").outcome;
    assert_eq!(abort, Outcome::TaskManagement(tmf::TmfResponse::Complete));
    let write = pair.take(write).expect("ended").outcome;
    assert_eq!(write, Outcome::Failed(TaskError::Aborted));
    let answers: Vec<_> = pair.sent_by_target(link).iter().map(|(_, p)| p).collect();
    assert!(
        !answers
            .iter()
            .any(|p| matches!(p, Pdu::Reject(_) | Pdu::ScsiResponse(_))),
        "the late data is dropped quietly, the aborted write never answered: {answers:?}"
    );
    assert_eq!(pair.failure(link), None);
    assert_eq!(pair.read(s, 0, 8), vec![0; 8 * BLOCK], "nothing written");
}

#[test]
fn a_logical_unit_reset_is_reported_next_to_the_other_session() {
    let mut pair = Pair::new(server(NO_PINGS));
    let resetting = pair.login(&session_config(LocalParams::default(), 1, 5));
    let other = pair.login(&session_config(LocalParams::default(), 1, 6));
    let tur = || Command::new(0, &cdb::test_unit_ready());
    assert!(pair.status(other, tur()).is_good(), "no attention yet");
    let reset = pair.task_management(resetting, TaskManagement::LogicalUnitReset(0));
    pair.run();
    let reset = pair.take(reset).expect("answered").outcome;
    assert_eq!(reset, Outcome::TaskManagement(tmf::TmfResponse::Complete));
    let status = pair.status(other, tur());
    assert_eq!(status.status, 0x02, "CHECK CONDITION");
    assert_eq!(
        status.sense_key(),
        Some((0x06, 0x29, 0x03)),
        "UNIT ATTENTION, BUS DEVICE RESET FUNCTION OCCURRED"
    );
    assert!(pair.status(other, tur()).is_good(), "reported once");
}

#[test]
fn an_unanswered_nop_in_ping_ends_the_connection() {
    let mut pair = Pair::new(server("nop_in_interval_s = 5\nnop_in_timeout_s = 5"));
    let s = pair.login(&session_config(LocalParams::default(), 1, 7));
    let link = pair.link(s, 0);
    pair.advance(Duration::from_secs(12));
    assert_eq!(pair.closed_at(link), None, "pings answered keep it");
    let answered = pair.session(s).nops.target_pings_echoed;
    assert_eq!(answered, 2, "pinged at 5 s and 10 s");
    pair.hold_to_initiator(link, true);
    pair.advance(Duration::from_secs(10));
    let pings: Vec<Duration> = pair
        .sent_by_target(link)
        .iter()
        .filter(|(_, p)| matches!(p, Pdu::NopIn(n) if n.target_transfer_tag != pdu::RESERVED_TAG))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(pings, [5, 10, 15].map(Duration::from_secs));
    assert_eq!(
        pair.closed_at(link),
        Some(Duration::from_secs(20)),
        "ended nop_in_timeout_s after the unanswered ping"
    );
}

/// A connection that sends nothing is closed once the first-PDU timeout
/// (5 s by default, `[limits] first_pdu_timeout_ms`) has passed, at the
/// next tick, and no longer counts as a login in progress.
#[test]
fn a_connection_that_sends_nothing_ends_at_the_first_pdu_timeout() {
    let mut pair = Pair::new(server(NO_PINGS));
    let link = pair.connect();
    assert_eq!(pair.server.gate.logins(), 1);
    pair.advance(Duration::from_secs(10));
    assert_eq!(
        pair.closed_at(link),
        Some(Duration::from_secs(5) + TICK),
        "closed at the first tick past 5 s"
    );
    assert_eq!(pair.server.gate.logins(), 0, "its login slot came back");
}

/// A login whose first request's text comes in pieces (the C bit), one
/// every 5 s, is answered piece by piece, and ends anyway once the whole
/// login has taken longer than LOGIN_DEADLINE.
#[test]
fn a_login_kept_alive_by_slow_continued_requests_ends_at_its_deadline() {
    let mut pair = Pair::new(server(""));
    let link = pair.connect();
    let config = session_config(LocalParams::default(), 1, 8);
    let mut login =
        isoe_initiator::login::LoginExchange::new(config.login_config(0, 0, 1), [0; 32]);
    let isoe_initiator::login::LoginStep::Send { request, data } = login.start() else {
        panic!("a login starts with a request");
    };
    let mut pieces = data.chunks(data.len().div_ceil(12));
    assert_eq!(pair.server.gate.logins(), 1);
    while pair.closed_at(link).is_none() {
        let piece = pieces
            .next()
            .expect("more pieces than the deadline lets in");
        let partial = pdu::LoginRequest {
            transit: false,
            continue_bit: true,
            ..request
        };
        pair.send(link, &Pdu::LoginRequest(partial), piece);
        pair.run();
        let (answer, _) = pair.take_pdu(link).expect("each piece is answered");
        assert!(
            matches!(answer, Pdu::LoginResponse(r) if r.status_class == 0 && !r.transit),
            "{answer:?}"
        );
        pair.advance(Duration::from_secs(5));
    }
    assert_eq!(pair.closed_at(link), Some(LOGIN_DEADLINE + TICK));
    assert_eq!(
        pair.server.gate.logins(),
        0,
        "no longer a login in progress"
    );
}

/// An immediate Logout Request that closes connection 1 of session `s`
/// (RFC 7143 §11.14: CLOSE_CONNECTION) sent on `link` and run: it is
/// answered "closed" there.
fn logout_of_connection_1_on(pair: &mut Pair, s: usize, link: usize) {
    let logout = LogoutRequest {
        immediate: true,
        reason_code: logout::LogoutReason::CloseConnection,
        initiator_task_tag: 0x7fff_0000,
        cid: 1,
        cmd_sn: pair.session(s).cmd_sn(),
        exp_stat_sn: 0,
    };
    pair.send(link, &Pdu::LogoutRequest(logout), &[]);
    pair.run();
    assert!(
        pair.sent_by_target(link)
            .iter()
            .any(|(_, p)| matches!(p, Pdu::LogoutResponse(r) if r.response == logout::LogoutResponseCode::Closed)),
        "answered closed: {:?}",
        pair.sent_by_target(link)
    );
}

/// A Logout Request on connection 0 that closes connection 1 (RFC 7143
/// §11.14: CLOSE_CONNECTION with the other CID) wakes connection 1, which
/// closes; the session goes on on connection 0.
#[test]
fn logout_of_one_connection_by_another_closes_it() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(LocalParams::default(), 2, 9));
    let links = [pair.link(s, 0), pair.link(s, 1)];
    logout_of_connection_1_on(&mut pair, s, links[0]);
    assert_eq!(pair.closed_at(links[1]), Some(Duration::ZERO));
    assert_eq!(pair.closed_at(links[0]), None);
    assert!(
        !pair.session(s).conns[1].alive,
        "the initiator saw it close"
    );
    let data = pattern(2, 0x44);
    pair.write(s, 4, data.clone());
    assert_eq!(pair.read(s, 4, 2), data, "the session goes on");
    assert_eq!(response_exp_cmd_sns(&pair, links[1]), [] as [u32; 0]);
}

/// SANITIZE OVERWRITE (one pass of 0x5a) without IMMED: its work comes out
/// as Action::Run, and commands sent meanwhile are answered (NOT READY,
/// SANITIZE IN PROGRESS) until the work is done and its GOOD comes.
#[test]
fn a_sanitize_without_immed_completes_through_its_work_while_others_are_answered() {
    let mut pair = Pair::new(server(NO_PINGS));
    pair.hold_work = true;
    let s = pair.login(&session_config(LocalParams::default(), 1, 10));
    pair.write(s, 0, pattern(1, 0x55));
    let list = vec![0x01, 0x00, 0x00, 0x01, 0x5a];
    let sanitize = [0x48, 0x01, 0, 0, 0, 0, 0, 0, list.len() as u8, 0];
    let sanitize = pair.submit(s, Command::write(0, &sanitize, list));
    pair.run();
    assert_eq!(pair.held_work(), 1);
    assert!(
        pair.take(sanitize).is_none(),
        "not answered before its work ran"
    );
    let status = pair.status(s, Command::new(0, &cdb::test_unit_ready()));
    assert_eq!(
        status.sense_key(),
        Some((0x02, 0x04, 0x1b)),
        "SANITIZE IN PROGRESS"
    );
    pair.release_work();
    pair.take(sanitize).expect("answered").good().expect("GOOD");
    assert!(pair
        .status(s, Command::new(0, &cdb::test_unit_ready()))
        .is_good());
    assert_eq!(pair.read(s, 0, 1), vec![0x5a; BLOCK], "overwritten");
}

/// A session of two connections (ISID tag `isid`) with an 8-block write
/// at LBA 0 waiting for its data on connection 1: a TEST UNIT READY on
/// connection 0 first, so that the write goes on the less busy one, where
/// its R2T is held back. The pair, the session, its links, the write.
fn a_write_waiting_on_connection_1(isid: u8) -> (Pair, usize, [usize; 2], u64) {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(solicited_writes(), 2, isid));
    let links = [pair.link(s, 0), pair.link(s, 1)];
    pair.hold_to_initiator(links[1], true);
    let tur = pair.submit(s, Command::new(0, &cdb::test_unit_ready()));
    let write = pair.submit(s, write_command(0, pattern(8, 0x66)));
    pair.run();
    pair.take(tur).expect("answered on connection 0");
    assert_eq!(
        r2ts(&pair, links[1]),
        [(0, 0, 4096)],
        "the write is on connection 1"
    );
    (pair, s, links, write)
}

/// A LOGICAL UNIT RESET ends every task of its unit (SAM-5 6.6), not only
/// those of the connection it came on: a write waiting for its data on the
/// session's other connection ends too, its budget given back, and that
/// connection lives on.
#[test]
fn a_logical_unit_reset_ends_a_write_waiting_on_another_connection() {
    let (mut pair, s, links, write) = a_write_waiting_on_connection_1(11);
    let reset = pair.task_management(s, TaskManagement::LogicalUnitReset(0));
    pair.run();
    let reset = pair.take(reset).expect("answered").outcome;
    assert_eq!(reset, Outcome::TaskManagement(tmf::TmfResponse::Complete));
    assert_eq!(
        pair.take(write).expect("ended").outcome,
        Outcome::Failed(TaskError::Aborted)
    );
    assert_eq!(
        pair.server.write_budget.held(),
        0,
        "the write ended at the target too"
    );
    pair.hold_to_initiator(links[1], false);
    pair.advance(DATA_OUT_WAIT);
    assert_eq!(
        pair.closed_at(links[1]),
        None,
        "no data is owed on connection 1"
    );
}

/// ABORT TASK may come on any connection of the session (RFC 7143
/// §11.5.1): a write waiting for its data on connection 1 is ended by an
/// ABORT TASK on connection 0, answered "Function complete" once it has
/// ended; its data, sent anyway, is dropped, and nothing is written.
#[test]
fn an_abort_task_on_one_connection_ends_a_write_waiting_on_another() {
    let (mut pair, s, links, write) = a_write_waiting_on_connection_1(12);
    let abort = pair.task_management_on(
        s,
        TaskManagement::AbortTask {
            lun: 0,
            token: write,
        },
        Some(0),
    );
    pair.run();
    assert_eq!(pair.server.write_budget.held(), 0, "ended at the target");
    pair.hold_to_initiator(links[1], false);
    pair.run();
    let abort = pair.take(abort).expect("answered").outcome;
    assert_eq!(abort, Outcome::TaskManagement(tmf::TmfResponse::Complete));
    assert_eq!(
        pair.take(write).expect("ended").outcome,
        Outcome::Failed(TaskError::Aborted)
    );
    assert_eq!(pair.failure(links[1]), None);
    assert_eq!(pair.read(s, 0, 8), vec![0; 8 * BLOCK], "nothing written");
}

/// A LOGICAL UNIT RESET ends the unit's tasks in every session (SAM-5
/// 7.6), while an ABORT TASK SET ends only those of its own I_T nexus:
/// another session's write waiting for its data survives the one and not
/// the other, and is answered once its data comes.
#[test]
fn a_unit_reset_reaches_other_sessions_and_an_abort_task_set_does_not() {
    for (function, ends) in [
        (TaskManagement::AbortTaskSet(0), false),
        (TaskManagement::ClearTaskSet(0), false),
        (TaskManagement::LogicalUnitReset(0), true),
    ] {
        let mut pair = Pair::new(server(NO_PINGS));
        let first = pair.login(&session_config(solicited_writes(), 1, 21));
        let second = pair.login(&session_config(solicited_writes(), 1, 22));
        let held = pair.link(second, 0);
        // The second session's write waits for its data: the R2T is held
        // back on its way to the initiator.
        pair.hold_to_initiator(held, true);
        let write = pair.submit(second, write_command(0, pattern(8, 0x21)));
        pair.run();
        assert_eq!(r2ts(&pair, held), [(0, 0, 4096)], "{function:?}");
        let answer = pair.task_management(first, function);
        pair.run();
        assert_eq!(
            pair.take(answer).expect("answered").outcome,
            Outcome::TaskManagement(tmf::TmfResponse::Complete),
            "{function:?}"
        );
        assert_eq!(
            pair.server.write_budget.held() == 0,
            ends,
            "{function:?}: the other session's write ended at the target"
        );
        pair.hold_to_initiator(held, false);
        pair.run();
        if ends {
            // The task is gone at the target: its late data is dropped and
            // nothing answers it; the session hears of the reset through a
            // unit attention on its next command (SAM-5 6.6).
            assert!(pair.take(write).is_none(), "{function:?}");
            let tur = pair.submit(second, Command::new(0, &cdb::test_unit_ready()));
            pair.run();
            let outcome = pair.take(tur).expect("answered").outcome;
            assert!(
                matches!(&outcome, Outcome::Scsi(status) if status.status == 2),
                "{function:?}: {outcome:?}"
            );
        } else {
            let outcome = pair.take(write).expect("the write ended").outcome;
            assert!(
                matches!(&outcome, Outcome::Scsi(status) if status.is_good()),
                "{function:?}: {outcome:?}"
            );
        }
    }
}

/// Data-Out the initiator sent in time but the target did not read,
/// because a later command on the same connection waits behind a CmdSN
/// gap, is not late: the connection lives while the gap is within
/// CMD_SN_GAP_WAIT, and everything completes once it fills.
#[test]
fn write_data_held_up_behind_a_cmd_sn_gap_is_not_late() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(solicited_writes(), 2, 13));
    let links = [pair.link(s, 0), pair.link(s, 1)];
    // A TEST UNIT READY on connection 0 so that the write (CmdSN 2) goes on
    // connection 1, its R2T held back there for 20 s.
    pair.hold_to_initiator(links[1], true);
    let mut tokens = vec![
        pair.submit(s, Command::new(0, &cdb::test_unit_ready())),
        pair.submit(s, write_command(0, pattern(8, 0x88))),
    ];
    pair.run();
    pair.advance(Duration::from_secs(20));
    // CmdSN 3 and 4 on connection 0, held back; CmdSN 5 on connection 1
    // waits for them, and the write's Data-Out arrives behind it.
    pair.hold_to_target(links[0], true);
    for _ in 0..3 {
        tokens.push(pair.submit(s, Command::new(0, &cdb::test_unit_ready())));
    }
    pair.hold_to_initiator(links[1], false);
    pair.run();
    assert!(pair.waiting(links[1]));
    pair.advance(Duration::from_secs(15));
    assert_eq!(
        pair.closed_at(links[1]),
        None,
        "the gap is 15 s old, the data was sent"
    );
    pair.hold_to_target(links[0], false);
    pair.run();
    for token in tokens {
        pair.take(token).expect("answered").good().expect("GOOD");
    }
    assert_eq!(pair.read(s, 0, 8), pattern(8, 0x88));
}

/// An immediate NOP-Out ping of session `s` with `data`, sent on `link`.
fn send_ping(pair: &mut Pair, s: usize, link: usize, data: &[u8]) {
    let ping = NopOut {
        immediate: true,
        initiator_task_tag: 0x7fff_0001,
        target_transfer_tag: pdu::RESERVED_TAG,
        cmd_sn: pair.session(s).cmd_sn(),
        ..NopOut::default()
    };
    pair.send(link, &Pdu::NopOut(ping), data);
}

/// RFC 7143 §11.19 and §13.12: the target echoes a ping's data in its
/// NOP-In, but sends no data segment longer than the initiator's
/// MaxRecvDataSegmentLength; a longer ping is refused (or its echo cut),
/// never echoed whole. Found by the `full_feature` fuzz target.
#[test]
fn a_ping_is_never_echoed_beyond_the_initiators_segment_length() {
    let mut pair = Pair::new(server(NO_PINGS));
    let params = LocalParams {
        max_recv_data_segment_length: 4096,
        ..LocalParams::default()
    };
    let s = pair.login(&session_config(params, 1, 14));
    let link = pair.link(s, 0);
    send_ping(&mut pair, s, link, &[0x5a; 5000]);
    pair.run();
    assert_eq!(pair.failure(link), None);
    assert!(
        matches!(
            pair.sent_by_target(link).last(),
            Some((_, Pdu::NopIn(_) | Pdu::Reject(_)))
        ),
        "the ping is answered: {:?}",
        pair.sent_by_target(link)
    );
}

/// A target with portal group 1 (active/optimized) and 2 (standby).
fn two_portal_groups() -> std::sync::Arc<isoe_target::Server> {
    let text = format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.2:0\"]\nalua_state = \"standby\"\n\
         [[target]]\nname = \"{}\"\n[[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n",
        harness::TARGET
    );
    let config = isoe_target::Config::parse(&text, None).expect("config");
    std::sync::Arc::new(isoe_target::Server::new(config).expect("server"))
}

/// The RELATIVE TARGET PORT IDENTIFIER of VPD page 83h (designator type 4).
fn relative_port_in(page: &[u8]) -> Option<u16> {
    let mut at = 4;
    while at + 4 <= page.len() {
        let length = usize::from(page[at + 3]);
        if page[at + 1] & 0x0f == 4 && length == 4 {
            return Some(u16::from_be_bytes([page[at + 6], page[at + 7]]));
        }
        at += 4 + length;
    }
    None
}

/// The initiator's sessions through two portal groups, with real logins:
/// each sees its own target port in VPD page 83h, both see the same two
/// groups in REPORT TARGET PORT GROUPS, and the one through the standby
/// group is refused I/O with NOT READY, TARGET PORT IN STANDBY STATE.
#[test]
fn sessions_through_two_portal_groups_see_their_own_port_and_state() {
    let mut pair = Pair::new(two_portal_groups());
    let active = pair.login(&session_config(LocalParams::default(), 1, 20));
    pair.portal_group = 2;
    let standby = pair.login(&session_config(LocalParams::default(), 1, 21));
    let vpd83 = [0x12, 0x01, 0x83, 0x01, 0x00, 0x00];
    let rtpg = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0, 0];
    for (s, port) in [(active, 1), (standby, 2)] {
        let done = pair.execute(s, Command::read(0, &vpd83, 256));
        done.good().expect("INQUIRY GOOD on every path");
        assert_eq!(relative_port_in(&done.buffer), Some(port));
        let done = pair.execute(s, Command::read(0, &rtpg, 256));
        done.good()
            .expect("REPORT TARGET PORT GROUPS GOOD on every path");
        let data = &done.buffer[..done.good().unwrap().data_in_len as usize];
        let length = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        assert_eq!(length + 4, data.len(), "RETURN DATA LENGTH");
        let groups: Vec<(u8, u16)> = data[4..]
            .chunks(12)
            .map(|d| (d[0] & 0x0f, u16::from_be_bytes([d[2], d[3]])))
            .collect();
        assert_eq!(groups, [(0x0, 1), (0x2, 2)], "A/O group 1, standby group 2");
    }
    assert_eq!(pair.read(active, 0, 1), vec![0; BLOCK]);
    let status = pair.status(standby, Command::read(0, &cdb::read16(0, 1), BLOCK as u32));
    assert_eq!(status.status, 2, "CHECK CONDITION");
    assert_eq!(status.sense_key(), Some((0x02, 0x04, 0x0b)));
}

/// `per_connection` one-block writes on each of a session's two
/// connections (LBA = CmdSN - 1) queued, connection 0's to be held back
/// on their way so that connection 1's wait behind a CmdSN gap: the pair,
/// the session, its two links and the writes' tokens.
fn writes_waiting_on_connection_1(per_connection: u64) -> (Pair, usize, [usize; 2], Vec<u64>) {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(LocalParams::default(), 2, 1));
    pair.session(s).set_run_slack(0);
    let links = [pair.link(s, 0), pair.link(s, 1)];
    pair.hold_to_target(links[0], true);
    let writes: Vec<u64> = (0..2 * per_connection)
        .map(|lba| pair.submit(s, write_command(lba, pattern(1, lba as u8))))
        .collect();
    pair.session(s).pump();
    (pair, s, links, writes)
}

/// `per_connection` one-block writes on each of a session's two
/// connections (LBA = CmdSN - 1), connection 0's held back on their way,
/// so that connection 1's wait behind a CmdSN gap; then `function` on
/// connection 1, behind them, and the gap filled. None of the writes has
/// a CmdSN at or above the function's: every one is in its scope.
fn a_function_behind_waiting_writes(
    function: TaskManagement,
    per_connection: u64,
) -> (Pair, usize) {
    let (mut pair, s, links, writes) = writes_waiting_on_connection_1(per_connection);
    let answer = pair.task_management_on(s, function, Some(1));
    pair.run();
    assert!(
        pair.waiting(links[1]),
        "connection 1's writes wait for CmdSN 1"
    );
    assert_eq!(
        pair.take(answer).map(|c| c.outcome),
        Some(Outcome::TaskManagement(tmf::TmfResponse::Complete)),
        "answered ahead of the gap"
    );
    pair.hold_to_target(links[0], false);
    pair.run();
    for token in writes {
        let done = pair.take(token).expect("ended");
        assert_eq!(
            done.outcome,
            Outcome::Failed(TaskError::Aborted),
            "write {token}"
        );
    }
    (pair, s)
}

#[test]
fn an_abort_task_set_ahead_of_40_waiting_writes_ends_them_all_and_the_fill() {
    let (mut pair, s) = a_function_behind_waiting_writes(TaskManagement::AbortTaskSet(0), 40);
    for lba in 0..80 {
        assert_eq!(
            pair.read(s, lba, 1),
            vec![0; BLOCK],
            "LBA {lba} was written"
        );
    }
}

#[test]
fn a_unit_reset_ahead_of_50_waiting_writes_ends_them_all_and_the_fill() {
    let function = TaskManagement::LogicalUnitReset(0);
    let (mut pair, s) = a_function_behind_waiting_writes(function, 50);
    // The reset's unit attention first, then the medium as it was.
    let status = pair.status(s, Command::read(0, &cdb::test_unit_ready(), 0));
    assert_eq!(status.sense_key(), Some((6, 0x29, 0x03)));
    for lba in 0..100 {
        assert_eq!(
            pair.read(s, lba, 1),
            vec![0; BLOCK],
            "LBA {lba} was written"
        );
    }
}

/// 128 writes fill the whole window, so the initiator may send nothing
/// more; a function ends them all before they come, and the writes are
/// dropped unanswered as they arrive: the target must still say that the
/// window moved, or the initiator waits for ever.
#[test]
fn commands_ended_unanswered_that_filled_the_window_reopen_it() {
    let (mut pair, s) = a_function_behind_waiting_writes(TaskManagement::AbortTaskSet(0), 64);
    assert_eq!(pair.read(s, 0, 1), vec![0; BLOCK], "a read after them");
}

/// An immediate Logout behind 64 commands that wait for a CmdSN gap
/// (RFC 7143 §3.2.2.1) is answered at once and its connection closes,
/// not when the wait gives up.
#[test]
fn an_immediate_logout_behind_64_waiting_commands_is_answered_at_once() {
    let (mut pair, s, links, _) = writes_waiting_on_connection_1(64);
    logout_of_connection_1_on(&mut pair, s, links[1]);
    assert_eq!(pair.closed_at(links[1]), Some(Duration::ZERO));
}

/// A ping behind 64 waiting commands whose data segment exceeds the
/// target's MaxRecvDataSegmentLength breaks the protocol: the connection
/// is rejected and closed when it arrives, not when the wait gives up.
#[test]
fn an_oversized_ping_behind_64_waiting_commands_ends_the_connection_at_once() {
    let (mut pair, s, links, _) = writes_waiting_on_connection_1(64);
    send_ping(&mut pair, s, links[1], &vec![0x5a; 300 << 10]);
    pair.run();
    assert_eq!(pair.closed_at(links[1]), Some(Duration::ZERO));
    assert!(
        matches!(pair.sent_by_target(links[1]).last(), Some((_, Pdu::Reject(r))) if r.reason == pdu::reject::RejectReason::ProtocolError),
        "rejected: {:?}",
        pair.sent_by_target(links[1]).last()
    );
}

/// A session lost with a write still in the store (a SANITIZE OVERWRITE,
/// whose work goes to the I/O threads), and logged in again at once with
/// the same ISID (session reinstatement, RFC 7143 §6.3.5): the login is
/// refused as "service unavailable" until that write returned, so that it
/// cannot land over what the new session writes.
#[test]
fn a_reinstating_login_waits_for_the_old_sessions_store_work() {
    let mut pair = Pair::new(server(NO_PINGS));
    let config = session_config(LocalParams::default(), 1, 30);
    let s = pair.login(&config);
    pair.hold_work = true;
    let list = vec![0x01, 0x00, 0x00, 0x01, 0x5a];
    let sanitize = [0x48, 0x01, 0, 0, 0, 0, 0, 0, list.len() as u8, 0];
    let first = pair.submit(s, Command::write(0, &sanitize, list));
    pair.run();
    assert_eq!(pair.held_work(), 1, "the overwrite is in the store");
    pair.hold_work = false;
    pair.reinstate(s, &config);
    assert_eq!(
        pair.reinstate_refusals.len(),
        1,
        "refused while the old write was out"
    );
    assert!(
        pair.reinstate_refusals[0].contains("0x0301"),
        "{:?}",
        pair.reinstate_refusals
    );
    pair.run();
    let done = pair
        .take(first)
        .expect("the overwrite, sent again, answered");
    assert!(done.good().is_ok(), "{:?}", done.outcome);
    let data = pattern(1, 2);
    pair.write(s, 0, data.clone());
    assert_eq!(pair.read(s, 0, 1), data, "the new session's write stays");
}

/// A unit attention still pending on a unit that a reload replaces (its
/// keys changed, the medium the same) is not lost with the old unit: the
/// session hears the reset's, then the replacement's, each once.
#[test]
fn unit_attentions_pending_on_a_replaced_unit_reach_the_session_once() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(LocalParams::default(), 1, 31));
    let reset = pair.task_management(s, TaskManagement::LogicalUnitReset(0));
    pair.run();
    assert_eq!(
        pair.take(reset).map(|c| c.outcome),
        Some(Outcome::TaskManagement(tmf::TmfResponse::Complete))
    );
    let server = std::sync::Arc::clone(&pair.server);
    let target = server.target(harness::TARGET).expect("the target");
    let old = std::sync::Arc::clone(target.luns().lun(0).expect("LUN 0"));
    let new = isoe_scsi::LogicalUnit::new(std::sync::Arc::clone(old.store()), old.config().clone());
    let changed = [isoe_scsi::Sense::inquiry_data_changed()];
    server.replace_lun(&target, 0, std::sync::Arc::new(new), &changed);
    let tur = || Command::read(0, &cdb::test_unit_ready(), 0);
    let heard: Vec<_> = (0..3).map(|_| pair.status(s, tur()).sense_key()).collect();
    assert_eq!(
        heard,
        [Some((6, 0x29, 0x03)), Some((6, 0x3f, 0x03)), None],
        "the reset's, the replacement's, then nothing"
    );
}

/// A PERSISTENT RESERVE OUT of `action` with `key` and `service_key`
/// (type WRITE EXCLUSIVE where it reserves) on LUN 0.
fn pr_out(action: u8, key: u64, service_key: u64) -> Command {
    let mut params = vec![0u8; 24];
    params[..8].copy_from_slice(&key.to_be_bytes());
    params[8..16].copy_from_slice(&service_key.to_be_bytes());
    let cdb = [0x5f, action, 0x01, 0, 0, 0, 0, 0, 24, 0];
    Command::write(0, &cdb, params)
}

/// A reload plans a new unit over the same medium (its keys changed) and
/// copies the reservations; a PERSISTENT RESERVE OUT still reaches the old
/// unit before the swap. It is not lost: the new unit has it.
#[test]
fn a_reservation_made_while_a_unit_is_replaced_is_not_lost() {
    let mut pair = Pair::new(server(NO_PINGS));
    let s = pair.login(&session_config(LocalParams::default(), 1, 32));
    let key = 0x1234;
    assert!(pair.status(s, pr_out(0x00, 0, key)).is_good(), "REGISTER");
    let server = std::sync::Arc::clone(&pair.server);
    let target = server.target(harness::TARGET).expect("the target");
    let old = std::sync::Arc::clone(target.luns().lun(0).expect("LUN 0"));
    let new = isoe_scsi::LogicalUnit::new(std::sync::Arc::clone(old.store()), old.config().clone());
    new.take_over(&old);
    // Between the plan's copy and the swap: RESERVE on the old unit.
    assert!(pair.status(s, pr_out(0x01, key, 0)).is_good(), "RESERVE");
    let new = std::sync::Arc::new(new);
    server.replace_lun(&target, 0, std::sync::Arc::clone(&new), &[]);
    // READ RESERVATION on the new unit: the reservation is there.
    let read_reservation = [0x5e, 0x01, 0, 0, 0, 0, 0, 0, 64, 0];
    let done = pair.execute(s, Command::read(0, &read_reservation, 64));
    let data = &done.buffer;
    assert!(done.good().is_ok());
    assert_eq!(
        u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
        16,
        "one reservation"
    );
    assert_eq!(u64::from_be_bytes(data[8..16].try_into().unwrap()), key);
}

/// An immediate command carries the next command's CmdSN and may come
/// after ExpCmdSN passed it, on a slower connection: one sent before an
/// ABORT TASK SET that came after the function's answer is dropped unrun,
/// as the initiator took it for aborted (RFC 7143 §3.2.2.1, §11.5.1).
#[test]
fn an_immediate_write_that_comes_after_an_abort_task_set_s_answer_is_not_run() {
    let mut pair = Pair::new(server(NO_PINGS));
    let params = LocalParams {
        max_connections: 2,
        ..LocalParams::default()
    };
    let s = pair.login(&session_config(params, 2, 31));
    let slow = pair.link(s, 0);
    pair.hold_to_target(slow, true);
    let mut write = write_command(0, pattern(8, 0x31));
    write.immediate = true;
    let write = pair.submit(s, write);
    // The next command goes on the other connection with the same CmdSN,
    // and moves ExpCmdSN past it.
    let ready = pair.submit(s, Command::new(0, &cdb::test_unit_ready()));
    pair.run();
    let ready = pair.take(ready).expect("answered").outcome;
    assert!(matches!(&ready, Outcome::Scsi(status) if status.is_good()));
    assert!(
        pair.take(write).is_none(),
        "the write is on the held connection"
    );
    let abort = pair.task_management_on(s, TaskManagement::AbortTaskSet(0), Some(1));
    pair.run();
    assert_eq!(
        pair.take(abort).expect("answered").outcome,
        Outcome::TaskManagement(tmf::TmfResponse::Complete)
    );
    assert_eq!(
        pair.take(write)
            .expect("ended by the function's answer")
            .outcome,
        Outcome::Failed(TaskError::Aborted)
    );
    // Now the write comes: it is not run.
    pair.hold_to_target(slow, false);
    pair.run();
    assert_eq!(pair.failure(slow), None);
    let medium = pair.read(s, 0, 8);
    assert!(medium.iter().all(|&b| b == 0), "nothing written");
}

/// An immediate command's CmdSN lies in the window though the target has
/// it: an ABORT TASK of one running on another connection of the session,
/// while the command after it (same CmdSN) has not come, waits for that
/// connection to end it, rather than taking it for a command still to
/// come and answering at once.
#[test]
fn an_abort_task_of_an_immediate_write_in_the_store_on_another_connection_waits_for_it() {
    // A file LUN: its writes go to the I/O threads, where the pair holds
    // them.
    let dir = tempfile::tempdir().expect("scratch directory");
    let mut pair = Pair::new(file_lun_server(dir.path(), NO_PINGS));
    let params = LocalParams {
        max_connections: 3,
        ..LocalParams::default()
    };
    let s = pair.login(&session_config(params, 3, 32));
    pair.hold_work = true;
    let mut write = write_command(0, pattern(8, 0x32));
    write.immediate = true;
    let write = pair.submit(s, write);
    pair.run();
    assert_eq!(pair.held_work(), 1, "the write is in the store");
    // A command after it moves the CmdSN on, so that the function covers
    // the write's CmdSN; it goes on the next connection, and is held
    // there: ExpCmdSN stays at the write's CmdSN.
    pair.hold_to_target(pair.link(s, 1), true);
    let ready = pair.submit(s, Command::new(0, &cdb::test_unit_ready()));
    pair.run();
    assert!(pair.take(ready).is_none());
    let abort = pair.task_management_on(
        s,
        TaskManagement::AbortTask {
            lun: 0,
            token: write,
        },
        Some(2),
    );
    pair.run();
    assert!(
        pair.take(abort).is_none(),
        "answered while the write was still in the store"
    );
    pair.hold_work = false;
    pair.release_work();
    pair.run();
    assert_eq!(
        pair.take(abort).expect("answered").outcome,
        Outcome::TaskManagement(tmf::TmfResponse::Complete)
    );
}

/// A server whose LUN 0 is a 32 MiB file in `dir`, written and then out
/// of the page cache, so that its reads wait on the device and go to the
/// I/O threads, as its writes do, where the pair can hold them;
/// `defaults` as for [`server`].
fn file_lun_server(dir: &std::path::Path, defaults: &str) -> std::sync::Arc<isoe_target::Server> {
    let path = dir.join("lun.img");
    std::fs::write(&path, vec![0x5a; 32 << 20]).expect("write the LUN's file");
    let file = std::fs::File::open(&path).expect("open the LUN's file");
    file.sync_all().expect("sync");
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[defaults]\n{defaults}\n[[target]]\nname = \"{}\"\n\
         [[target.lun]]\nnumber = 0\nfile = \"{}\"\nsize = \"32MiB\"\nserial = \"pairfile\"\n\
         naa = \"0x6001405abcdef0123456789abcdef032\"\n",
        harness::TARGET,
        path.display()
    );
    let config = isoe_target::Config::parse(&text, None).expect("config");
    std::sync::Arc::new(isoe_target::Server::new(config).expect("server"))
}

/// A connection whose input pauses on its own reads in the store (8 MiB
/// of them) cannot read the answer to a ping meanwhile: it is not pinged,
/// nor ended for a ping unanswered, however long the store takes.
#[test]
fn a_connection_paused_on_its_reads_in_the_store_is_not_ended_for_an_unanswered_ping() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let mut pair = Pair::new(file_lun_server(
        dir.path(),
        "nop_in_interval_s = 1\nnop_in_timeout_s = 1",
    ));
    let s = pair.login(&session_config(LocalParams::default(), 1, 33));
    let link = pair.link(s, 0);
    pair.hold_work = true;
    let reads: Vec<u64> = (0..16u64)
        .map(|i| {
            let cdb = cdb::read16(i * 4096, 2048);
            pair.submit(s, Command::read(0, &cdb, 1 << 20))
        })
        .collect();
    pair.run();
    if pair.held_work() == 0 {
        eprintln!("skipped: the reads were served from the page cache");
        return;
    }
    assert_eq!(pair.held_work(), 8, "8 MiB of reads out, the rest waits");
    pair.advance(Duration::from_secs(10));
    assert_eq!(pair.closed_at(link), None, "{:?}", pair.failure(link));
    pair.hold_work = false;
    pair.release_work();
    pair.run();
    for read in reads {
        let done = pair.take(read).expect("answered");
        assert!(matches!(&done.outcome, Outcome::Scsi(status) if status.is_good()));
    }
}
