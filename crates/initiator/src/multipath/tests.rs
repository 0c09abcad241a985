//! The multipath LU with no sessions: each test plays the paths, answering
//! the probes and commands the core dispatches, in virtual time.

use super::*;
use crate::command::ScsiStatus;

const NAA: [u8; 16] = [
    0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01,
];
const OTHER_NAA: [u8; 16] = [
    0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x02,
];
const AO: u8 = 0x0;
const ANO: u8 = 0x1;
const STANDBY: u8 = 0x2;
const UNAVAILABLE: u8 = 0x3;
const TRANSITIONING: u8 = 0xf;

/// VPD page 83h as isoe's target writes it: the NAA, then the port's
/// relative target port and target port group designators.
fn vpd83(naa: &[u8; 16], port: u16, group: u16) -> Vec<u8> {
    let mut page = vec![0x00, 0x83, 0, 0];
    page.extend_from_slice(&[0x01, 0x03, 0x00, 16]);
    page.extend_from_slice(naa);
    page.extend_from_slice(&[0x51, 0x94, 0x00, 4, 0, 0]);
    page.extend_from_slice(&port.to_be_bytes());
    page.extend_from_slice(&[0x51, 0x95, 0x00, 4, 0, 0]);
    page.extend_from_slice(&group.to_be_bytes());
    let len = (page.len() - 4) as u16;
    page[2..4].copy_from_slice(&len.to_be_bytes());
    page
}

/// REPORT TARGET PORT GROUPS data, length-only header: (group, state,
/// PREF, ports).
fn rtpg(groups: &[(u16, u8, bool, &[u16])]) -> Vec<u8> {
    let mut data = vec![0u8; 4];
    for &(group, state, pref, ports) in groups {
        data.push(state | if pref { 0x80 } else { 0 });
        data.push(0x8f);
        data.extend_from_slice(&group.to_be_bytes());
        data.extend_from_slice(&[0, 0, 0, ports.len() as u8]);
        for port in ports {
            data.extend_from_slice(&[0, 0]);
            data.extend_from_slice(&port.to_be_bytes());
        }
    }
    let len = (data.len() - 4) as u32;
    data[..4].copy_from_slice(&len.to_be_bytes());
    data
}

fn good(data_in_len: usize) -> Outcome {
    Outcome::Scsi(ScsiStatus {
        data_in_len: data_in_len as u32,
        ..ScsiStatus::default()
    })
}

/// CHECK CONDITION with fixed-format sense.
fn sense(key: u8, asc: u8, ascq: u8) -> Outcome {
    let mut s = vec![0u8; 18];
    s[0] = 0x70;
    s[2] = key;
    s[7] = 10;
    s[12] = asc;
    s[13] = ascq;
    Outcome::Scsi(ScsiStatus {
        status: 0x02,
        sense: s,
        ..ScsiStatus::default()
    })
}

/// The answer to a dispatch, as its path's session gives it.
fn answer(d: Dispatch, outcome: Outcome, data: &[u8]) -> (usize, Completion) {
    let mut buffer = d.command.buffer;
    if !data.is_empty() {
        buffer.resize(buffer.len().max(data.len()), 0);
        buffer[..data.len()].copy_from_slice(data);
    }
    (
        d.path,
        Completion {
            session: 100 + d.path,
            token: d.token,
            outcome,
            buffer,
        },
    )
}

fn drain(core: &mut MultipathCore) -> Vec<Dispatch> {
    std::iter::from_fn(|| core.poll_dispatch()).collect()
}

fn is_probe(d: &Dispatch) -> bool {
    d.token & PROBE_TOKEN != 0
}

fn is_rtpg(d: &Dispatch) -> bool {
    d.command.cdb[0] == 0xa3
}

/// A path as a gateway serves it: its NAA, and its group's state as its
/// own REPORT TARGET PORT GROUPS says (group = relative port = path + 1).
#[derive(Clone, Copy)]
struct Gateway {
    naa: [u8; 16],
    state: u8,
    pref: bool,
}

fn gw(state: u8) -> Gateway {
    Gateway {
        naa: NAA,
        state,
        pref: false,
    }
}

/// Answers every probe in `dispatches` as `gateways` would; returns the
/// other dispatches.
fn answer_probes(
    core: &mut MultipathCore,
    gateways: &[Gateway],
    dispatches: Vec<Dispatch>,
    now: Instant,
) -> Vec<Dispatch> {
    let mut rest = Vec::new();
    for d in dispatches {
        if !is_probe(&d) {
            rest.push(d);
            continue;
        }
        let g = gateways[d.path];
        let tag = d.path as u16 + 1;
        let data = if is_rtpg(&d) {
            rtpg(&[(tag, g.state, g.pref, &[tag])])
        } else {
            vpd83(&g.naa, tag, tag)
        };
        let (p, c) = answer(d, good(data.len()), &data);
        core.handle_completion(p, c, now);
    }
    rest
}

/// Answers probes until none is left; returns the other dispatches.
fn settle(core: &mut MultipathCore, gateways: &[Gateway], now: Instant) -> Vec<Dispatch> {
    let mut rest = Vec::new();
    loop {
        let batch = drain(core);
        if batch.is_empty() {
            return rest;
        }
        rest.extend(answer_probes(core, gateways, batch, now));
    }
}

fn lu(gateways: &[Gateway], now: Instant) -> MultipathCore {
    let paths = (0..gateways.len())
        .map(|i| {
            (
                format!("iscsi://10.0.0.{}:3260/iqn.2026-11.io.isoe:t/{i}", i + 1),
                i as u16,
            )
        })
        .collect();
    let mut core = MultipathCore::new(7, paths, MultipathOptions::default());
    assert!(settle(&mut core, gateways, now).is_empty());
    assert!(!core.probing());
    core
}

fn read(token: u64) -> (Command, u64) {
    (Command::read(0, &cdb::read16(token, 1), 512), token)
}

fn submit(core: &mut MultipathCore, token: u64) {
    let (c, t) = read(token);
    core.submit(c, t).expect("the LU takes the command");
}

fn completions(core: &mut MultipathCore) -> Vec<Completion> {
    let mut out = Vec::new();
    core.drain_completions(&mut out);
    out
}

#[test]
fn commands_go_to_the_optimized_path_and_never_to_standby_or_unavailable() {
    let now = Instant::now();
    let mut core = lu(&[gw(STANDBY), gw(ANO), gw(AO), gw(UNAVAILABLE)], now);
    core.check_paths().unwrap();
    assert_eq!(core.identity().unwrap().value, NAA);
    for token in 0..20 {
        submit(&mut core, token);
    }
    let sent = drain(&mut core);
    assert_eq!(sent.len(), 20);
    assert!(
        sent.iter().all(|d| d.path == 2),
        "all to the optimized path"
    );
    let reports = core.paths();
    assert_eq!(
        reports.iter().map(|r| r.state).collect::<Vec<_>>(),
        [
            Some(AccessState::Standby),
            Some(AccessState::ActiveNonOptimized),
            Some(AccessState::ActiveOptimized),
            Some(AccessState::Unavailable)
        ]
    );
    assert_eq!(
        reports.iter().map(|r| r.port_group).collect::<Vec<_>>(),
        [Some(1), Some(2), Some(3), Some(4)]
    );
    // Answers come back to the caller with its tokens and the LU's index.
    for d in sent {
        let (p, c) = answer(d, good(512), &[]);
        core.handle_completion(p, c, now);
    }
    let done = completions(&mut core);
    assert_eq!(done.len(), 20);
    assert!(done.iter().all(|c| c.session == 7 && c.good().is_ok()));
    let mut tokens: Vec<u64> = done.iter().map(|c| c.token).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..20).collect::<Vec<_>>());
    assert_eq!(core.paths()[2].commands, 20);
    assert_eq!(core.tasks_in_flight(), 0);
}

#[test]
fn non_optimized_serves_when_no_path_is_optimized() {
    let now = Instant::now();
    let mut core = lu(&[gw(STANDBY), gw(ANO)], now);
    core.check_paths().unwrap();
    submit(&mut core, 1);
    assert_eq!(drain(&mut core)[0].path, 1);
}

#[test]
fn preferred_wins_a_tie_and_equal_paths_share_the_load() {
    let now = Instant::now();
    let mut pref = gw(AO);
    pref.pref = true;
    let mut core = lu(&[gw(AO), pref], now);
    for token in 0..6 {
        submit(&mut core, token);
    }
    assert!(drain(&mut core).iter().all(|d| d.path == 1), "PREF first");

    let mut core = lu(&[gw(AO), gw(AO)], now);
    for token in 0..6 {
        submit(&mut core, token);
    }
    let paths: Vec<usize> = drain(&mut core).iter().map(|d| d.path).collect();
    assert_eq!(paths, [0, 1, 0, 1, 0, 1], "the one with fewer outstanding");
}

#[test]
fn paths_to_different_logical_units_are_refused() {
    let now = Instant::now();
    let mut other = gw(ANO);
    other.naa = OTHER_NAA;
    let mut core = lu(&[gw(AO), other], now);
    let err = core.check_paths().unwrap_err();
    assert!(
        err.contains("are not paths of one logical unit")
            && err.contains("NAA 0x6001405abcdef0123456789abcdef001")
            && err.contains("NAA 0x6001405abcdef0123456789abcdef002")
            && err.contains("iscsi://10.0.0.1:3260")
            && err.contains("iscsi://10.0.0.2:3260"),
        "{err}"
    );
}

#[test]
fn an_lu_with_no_active_path_is_refused_naming_each_state() {
    let now = Instant::now();
    let mut core = lu(&[gw(STANDBY), gw(UNAVAILABLE)], now);
    let err = core.check_paths().unwrap_err();
    assert!(
        err.contains("no path serves I/O")
            && err.contains("(group 1, standby)")
            && err.contains("(group 2, unavailable)"),
        "{err}"
    );
}

#[test]
fn a_lost_path_gives_its_commands_to_the_other_at_once() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO), gw(ANO)], t0);
    // One answered before the loss: the gap is measured from it.
    submit(&mut core, 100);
    let first = drain(&mut core).pop().unwrap();
    let (p, c) = answer(first, good(512), &[]);
    core.handle_completion(p, c, t0);
    assert_eq!(completions(&mut core).len(), 1);

    for token in 0..4 {
        submit(&mut core, token);
    }
    let sent = drain(&mut core);
    assert!(sent.iter().all(|d| d.path == 0));
    // The session gives back what it held, as take_commands does.
    let lost_at = t0 + Duration::from_secs(1);
    let held: Vec<(u64, Command)> = sent.into_iter().map(|d| (d.token, d.command)).collect();
    core.path_lost(0, "the target closed the connection", held, lost_at);
    let again = drain(&mut core);
    assert_eq!(again.len(), 4, "reissued at once");
    assert!(again.iter().all(|d| d.path == 1));
    let stats = core.stats();
    assert_eq!((stats.failovers, stats.reissued), (1, 4));
    let reports = core.paths();
    assert_eq!(reports[0].status, PathStatus::Down);
    assert_eq!(reports[0].downs, 1);
    assert!(reports[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("the target closed the connection"));

    let answered_at = t0 + Duration::from_millis(1500);
    for d in again {
        let (p, c) = answer(d, good(512), &[]);
        core.handle_completion(p, c, answered_at);
    }
    let done = completions(&mut core);
    assert_eq!(done.len(), 4);
    assert!(done.iter().all(|c| c.good().is_ok()));
    let stats = core.stats();
    assert_eq!(stats.failover_gap_last, Some(Duration::from_millis(1500)));
    assert_eq!(stats.failover_gap_max, Duration::from_millis(1500));
    // New commands go to the survivor.
    submit(&mut core, 9);
    assert_eq!(drain(&mut core)[0].path, 1);
}

#[test]
fn with_no_path_left_commands_wait_the_failover_time_then_fail_saying_why() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO)], t0);
    submit(&mut core, 1);
    let sent = drain(&mut core);
    core.path_lost(
        0,
        "receive failed: Connection reset by peer",
        sent.into_iter().map(|d| (d.token, d.command)),
        t0,
    );
    submit(&mut core, 2);
    assert!(drain(&mut core).is_empty());
    core.handle_tick(t0 + Duration::from_millis(9_900));
    assert!(
        completions(&mut core).is_empty(),
        "within the failover time"
    );
    assert!(core.next_wakeup().unwrap() <= t0 + Duration::from_secs(10));
    core.handle_tick(t0 + Duration::from_secs(10));
    let done = completions(&mut core);
    // The first waited from the loss; the second from the tick that saw it.
    assert_eq!(done.len(), 1, "{done:?}");
    let Outcome::Failed(TaskError::NoPath(why)) = &done[0].outcome else {
        panic!("{:?}", done[0].outcome);
    };
    assert!(
        why.contains("within 10.0 s")
            && why.contains("down: connection lost: receive failed: Connection reset by peer"),
        "{why}"
    );
    core.handle_tick(t0 + Duration::from_millis(19_900));
    assert_eq!(completions(&mut core).len(), 1);
    assert_eq!(core.stats().expired, 2);
    assert_eq!(core.tasks_in_flight(), 0);
}

#[test]
fn commands_chosen_for_a_path_lost_before_they_were_handed_over_wait_too() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO), gw(ANO)], t0);
    submit(&mut core, 1);
    let sent = drain(&mut core);
    // Both paths fail in one pass of the driver: the command path 0 gave
    // back is chosen for path 1 before the driver learns path 1 is lost
    // too, and never reaches its session.
    core.path_lost(
        0,
        "gone",
        sent.into_iter().map(|d| (d.token, d.command)),
        t0,
    );
    core.path_lost(1, "gone too", Vec::new(), t0);
    assert!(drain(&mut core).is_empty(), "nothing for a lost path");
    assert_eq!(core.stats().reissued, 2);
    core.handle_tick(t0 + Duration::from_secs(10));
    let done = completions(&mut core);
    assert_eq!(done.len(), 1);
    assert!(matches!(
        done[0].outcome,
        Outcome::Failed(TaskError::NoPath(_))
    ));
}

#[test]
fn a_path_back_from_a_loss_is_probed_then_serves_again() {
    let t0 = Instant::now();
    let gateways = [gw(AO), gw(ANO)];
    let mut core = lu(&gateways, t0);
    core.check_paths().unwrap();
    core.path_lost(0, "gone", Vec::new(), t0);
    core.path_reconnected(0);
    assert_eq!(core.paths()[0].status, PathStatus::Probing);
    // While it is probed, commands go to the other.
    submit(&mut core, 1);
    let sent = drain(&mut core);
    assert!(sent.iter().any(|d| is_probe(d) && d.path == 0));
    assert!(sent.iter().any(|d| !is_probe(d) && d.path == 1));
    let rest = answer_probes(&mut core, &gateways, sent, t0);
    assert_eq!(rest.len(), 1);
    assert!(settle(&mut core, &gateways, t0).is_empty());
    assert_eq!(core.paths()[0].status, PathStatus::Ready);
    submit(&mut core, 2);
    assert_eq!(drain(&mut core)[0].path, 0, "back to the optimized path");
}

#[test]
fn a_path_that_comes_back_as_another_lu_is_out_for_good() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO), gw(ANO)], t0);
    core.check_paths().unwrap();
    core.path_lost(0, "gone", Vec::new(), t0);
    core.path_reconnected(0);
    let mut changed = gw(AO);
    changed.naa = OTHER_NAA;
    assert!(settle(&mut core, &[changed, gw(ANO)], t0).is_empty());
    let report = &core.paths()[0];
    assert_eq!(report.status, PathStatus::Failed);
    let why = report.reason.as_deref().unwrap();
    assert!(why.contains("another logical unit"), "{why}");
    submit(&mut core, 1);
    assert_eq!(drain(&mut core)[0].path, 1);
}

#[test]
fn a_state_change_rereads_every_paths_state_before_the_command_goes_again() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO), gw(ANO)], t0);
    submit(&mut core, 1);
    let d = drain(&mut core).pop().unwrap();
    assert_eq!(d.path, 0);
    let (p, c) = answer(d, sense(0x06, 0x2a, 0x06), &[]);
    core.handle_completion(p, c, t0);
    let sent = drain(&mut core);
    assert_eq!(sent.len(), 2, "one REPORT TARGET PORT GROUPS per path");
    assert!(sent.iter().all(is_rtpg));
    assert!(
        completions(&mut core).is_empty(),
        "not the caller's business"
    );
    // The gateways swapped roles meanwhile.
    let swapped = [gw(ANO), gw(AO)];
    assert!(answer_probes(&mut core, &swapped, sent, t0).is_empty());
    let rest = drain(&mut core);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].path, 1, "sent again, to the path now optimized");
    let (p, c) = answer(rest.into_iter().next().unwrap(), good(512), &[]);
    core.handle_completion(p, c, t0);
    let done = completions(&mut core);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].token, 1);
    assert_eq!(core.stats().retried, 1);

    // 2A/07 (implicit transition failed) does the same.
    submit(&mut core, 2);
    let d = drain(&mut core).pop().unwrap();
    let (p, c) = answer(d, sense(0x06, 0x2a, 0x07), &[]);
    core.handle_completion(p, c, t0);
    assert!(drain(&mut core).iter().all(is_rtpg));
}

#[test]
fn standby_or_unavailable_sense_sends_the_command_elsewhere() {
    for (ascq, state) in [
        (0x0b, AccessState::Standby),
        (0x0c, AccessState::Unavailable),
    ] {
        let t0 = Instant::now();
        let mut core = lu(&[gw(AO), gw(ANO)], t0);
        submit(&mut core, 1);
        let d = drain(&mut core).pop().unwrap();
        let (p, c) = answer(d, sense(0x02, 0x04, ascq), &[]);
        core.handle_completion(p, c, t0);
        assert_eq!(core.paths()[0].state, Some(state));
        // The gateway of path 0 says the same of itself when asked.
        let now_state = if ascq == 0x0b { STANDBY } else { UNAVAILABLE };
        let rest = settle(&mut core, &[gw(now_state), gw(ANO)], t0);
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].path, 1);
        let stats = core.stats();
        assert_eq!((stats.failovers, stats.retried), (1, 1));
    }
}

#[test]
fn a_transitioning_path_is_asked_again_and_its_commands_wait_a_bounded_time() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO)], t0);
    submit(&mut core, 1);
    let d = drain(&mut core).pop().unwrap();
    let (p, c) = answer(d, sense(0x02, 0x04, 0x0a), &[]);
    core.handle_completion(p, c, t0);
    assert_eq!(core.paths()[0].state, Some(AccessState::Transitioning));
    assert!(drain(&mut core).is_empty(), "no retry at once");
    core.handle_tick(t0 + Duration::from_millis(100));
    assert!(
        drain(&mut core).is_empty(),
        "the path is not asked before 200 ms"
    );
    core.handle_tick(t0 + TRANSITION_POLL);
    let polls = drain(&mut core);
    assert_eq!(polls.len(), 1);
    assert!(is_rtpg(&polls[0]));
    // Still transitioning: asked again later, the command still waits.
    let t1 = t0 + TRANSITION_POLL;
    assert!(answer_probes(&mut core, &[gw(TRANSITIONING)], polls, t1).is_empty());
    core.handle_tick(t1 + TRANSITION_POLL);
    let polls = drain(&mut core);
    assert_eq!(polls.len(), 1);
    // Now active: the command goes.
    let t2 = t1 + TRANSITION_POLL;
    assert!(answer_probes(&mut core, &[gw(AO)], polls, t2).is_empty());
    let rest = drain(&mut core);
    assert_eq!(rest.len(), 1, "sent again once the path serves");
    assert_eq!(rest[0].path, 0);

    // A path that never ends its transition: the command fails at the
    // failover time, naming the state.
    let mut core = lu(&[gw(AO)], t0);
    submit(&mut core, 1);
    let d = drain(&mut core).pop().unwrap();
    let (p, c) = answer(d, sense(0x02, 0x04, 0x0a), &[]);
    core.handle_completion(p, c, t0);
    let mut t = t0;
    while t < t0 + Duration::from_secs(11) {
        t += Duration::from_millis(100);
        core.handle_tick(t);
        let polls = drain(&mut core);
        assert!(answer_probes(&mut core, &[gw(TRANSITIONING)], polls, t).is_empty());
    }
    let done = completions(&mut core);
    assert_eq!(done.len(), 1);
    let Outcome::Failed(TaskError::NoPath(why)) = &done[0].outcome else {
        panic!("{:?}", done[0].outcome);
    };
    assert!(why.contains("transitioning"), "{why}");
}

#[test]
fn other_sense_goes_to_the_caller_untouched() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO), gw(ANO)], t0);
    for (token, outcome) in [
        (1, sense(0x06, 0x29, 0x00)),
        (2, sense(0x03, 0x11, 0x00)),
        (3, sense(0x05, 0x24, 0x00)),
    ] {
        submit(&mut core, token);
        let d = drain(&mut core).pop().unwrap();
        let (p, c) = answer(d, outcome.clone(), &[]);
        core.handle_completion(p, c, t0);
        let done = completions(&mut core);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].outcome, outcome);
        assert!(drain(&mut core).is_empty());
    }
    assert_eq!(core.stats(), MultipathStats::default());
}

#[test]
fn probes_are_asked_again_after_a_unit_attention() {
    let t0 = Instant::now();
    let paths = vec![("iscsi://a/t/0".to_string(), 0)];
    let mut core = MultipathCore::new(0, paths, MultipathOptions::default());
    let d = drain(&mut core).pop().unwrap();
    let (p, c) = answer(d, sense(0x06, 0x29, 0x00), &[]);
    core.handle_completion(p, c, t0);
    let again = drain(&mut core);
    assert_eq!(again.len(), 1, "the VPD probe once more");
    assert!(answer_probes(&mut core, &[gw(AO)], again, t0).is_empty());
    let rtpg_probe = drain(&mut core).pop().unwrap();
    let (p, c) = answer(rtpg_probe, sense(0x05, 0x20, 0x00), &[]);
    core.handle_completion(p, c, t0);
    // A target without REPORT TARGET PORT GROUPS: the path serves as any.
    core.check_paths().unwrap();
    assert_eq!(core.paths()[0].state, Some(AccessState::ActiveOptimized));
}

#[test]
fn a_refused_dispatch_fails_its_command() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO)], t0);
    submit(&mut core, 5);
    let d = drain(&mut core).pop().unwrap();
    core.dispatch_refused(
        d.path,
        d.token,
        d.command,
        TaskError::Invalid("full".into()),
        t0,
    );
    let done = completions(&mut core);
    assert_eq!(done[0].token, 5);
    assert_eq!(
        done[0].outcome,
        Outcome::Failed(TaskError::Invalid("full".into()))
    );
}

#[test]
fn every_path_failed_refuses_at_once() {
    let t0 = Instant::now();
    let mut core = lu(&[gw(AO)], t0);
    core.path_lost(0, "gone", Vec::new(), t0);
    core.path_failed(0, "login refused: target not found", t0);
    let (c, t) = read(1);
    let Err((TaskError::NoPath(why), _)) = core.submit(c, t) else {
        panic!("accepted with no path");
    };
    assert!(why.contains("login refused: target not found"), "{why}");
}

#[test]
fn sense_is_classified_as_spc_says() {
    assert_eq!(classify(&sense(0x06, 0x2a, 0x06)), Verdict::StatesChanged);
    assert_eq!(classify(&sense(0x06, 0x2a, 0x07)), Verdict::StatesChanged);
    assert_eq!(classify(&sense(0x02, 0x04, 0x0a)), Verdict::Transitioning);
    assert_eq!(
        classify(&sense(0x02, 0x04, 0x0b)),
        Verdict::Inaccessible(AccessState::Standby)
    );
    assert_eq!(
        classify(&sense(0x02, 0x04, 0x0c)),
        Verdict::Inaccessible(AccessState::Unavailable)
    );
    for other in [
        sense(0x06, 0x29, 0x00),
        sense(0x06, 0x2a, 0x01),
        sense(0x02, 0x04, 0x01),
        good(0),
        Outcome::Failed(TaskError::Aborted),
    ] {
        assert_eq!(classify(&other), Verdict::Done, "{other:?}");
    }
    // Descriptor-format sense reads the same.
    let descriptor = Outcome::Scsi(ScsiStatus {
        status: 0x02,
        sense: vec![0x72, 0x02, 0x04, 0x0b, 0, 0, 0, 0],
        ..ScsiStatus::default()
    });
    assert_eq!(
        classify(&descriptor),
        Verdict::Inaccessible(AccessState::Standby)
    );
}

#[test]
fn vpd_page_83h_gives_the_lu_and_the_port() {
    let id = parse_device_identification(&vpd83(&NAA, 2, 7)).unwrap();
    assert_eq!(id.lu.designator_type, 3);
    assert_eq!(id.lu.value, NAA);
    assert_eq!(id.lu.to_string(), "NAA 0x6001405abcdef0123456789abcdef001");
    assert_eq!((id.relative_port, id.port_group), (Some(2), Some(7)));
    // A SCSI name string of target port association is not the LU's name;
    // an EUI-64 of LU association is, when there is no NAA.
    let mut page = vec![0x00, 0x83, 0, 0];
    page.extend_from_slice(&[0x53, 0x98, 0x00, 8]);
    page.extend_from_slice(b"iqn.x\0\0\0");
    page.extend_from_slice(&[0x01, 0x02, 0x00, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
    page[3] = (page.len() - 4) as u8;
    let id = parse_device_identification(&page).unwrap();
    assert_eq!(id.lu.designator_type, 2);
    assert_eq!(id.lu.to_string(), "EUI-64 0x0102030405060708");
    assert_eq!((id.relative_port, id.port_group), (None, None));
    let err = parse_device_identification(&[0, 0x83, 0, 0]).unwrap_err();
    assert!(err.contains("no NAA"), "{err}");
    let err = parse_device_identification(&[0, 0x80, 0, 0]).unwrap_err();
    assert!(err.contains("not a device identification page"), "{err}");
}

#[test]
fn report_target_port_groups_parses_both_header_formats() {
    let data = rtpg(&[(1, AO, true, &[1]), (2, STANDBY, false, &[2, 3])]);
    let groups = parse_report_target_port_groups(&data).unwrap();
    assert_eq!(
        groups,
        [
            PortGroup {
                group: 1,
                state: Some(AccessState::ActiveOptimized),
                preferred: true,
                ports: vec![1]
            },
            PortGroup {
                group: 2,
                state: Some(AccessState::Standby),
                preferred: false,
                ports: vec![2, 3]
            }
        ]
    );
    // Extended header: FORMAT TYPE 001b, then the same descriptors.
    let mut extended = vec![0, 0, 0, 0, 0x10, 0, 0, 0];
    extended.extend_from_slice(&data[4..]);
    let len = (extended.len() - 4) as u32;
    extended[..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(parse_report_target_port_groups(&extended).unwrap(), groups);
    // Cut short by the allocation length: the whole descriptors only.
    let cut = &data[..data.len() - 2];
    assert_eq!(parse_report_target_port_groups(cut).unwrap().len(), 1);
    assert!(parse_report_target_port_groups(&[0, 0]).is_err());
}
