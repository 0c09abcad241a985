//! The initiator against isoe's own target, started in this process on an
//! ephemeral loopback port: discovery, login, every write path, reads larger
//! than a PDU, deep pipelining, MC/S, digests, task management, logout, and
//! session reinstatement after the connection is cut.

mod common;
use common::Proxy;
use isoe_initiator::cdb::{self, Capacity, Inquiry};
use isoe_initiator::{
    send_targets, Command, Completion, DiscoveryConfig, Engine, IscsiUrl, Outcome, Portal,
    ReloginStart, SessionConfig, TaskManagement,
};
use isoe_target::config::Config;
use isoe_target::driver::{self, Running};
use isoe_wire::negotiate::LocalParams;
use std::net::SocketAddr;
use std::time::Duration;

const TARGET: &str = "iqn.2026-11.io.isoe:target0";
const BLOCK: usize = 512;

fn start_target(extra: &str) -> Running {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n{extra}\n[[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n"
    );
    let config = Config::parse(&text, None).expect("test config parses");
    driver::start(config).expect("target starts")
}

fn config_for(addr: SocketAddr) -> SessionConfig {
    let url = IscsiUrl::parse(&format!("iscsi://{addr}/{TARGET}/0")).unwrap();
    SessionConfig::from_url(&url)
}

fn pattern(lba: u64, blocks: usize, seed: u8) -> Vec<u8> {
    let mut data = vec![0u8; blocks * BLOCK];
    for (i, chunk) in data.chunks_mut(BLOCK).enumerate() {
        chunk[..8].copy_from_slice(&(lba + i as u64).to_be_bytes());
        for (j, b) in chunk[8..].iter_mut().enumerate() {
            *b = seed.wrapping_add((i * 7 + j) as u8);
        }
    }
    data
}

fn write(engine: &mut Engine, s: usize, lba: u64, data: Vec<u8>) {
    let blocks = (data.len() / BLOCK) as u32;
    let done = engine
        .execute(
            s,
            Command::write(0, &cdb::write16(lba, blocks, false), data),
        )
        .unwrap();
    done.good().unwrap();
}

fn read(engine: &mut Engine, s: usize, lba: u64, blocks: usize) -> Vec<u8> {
    let done = engine
        .execute(
            s,
            Command::read(0, &cdb::read16(lba, blocks as u32), (blocks * BLOCK) as u32),
        )
        .unwrap();
    let status = done.good().unwrap();
    assert_eq!(status.data_in_len as usize, blocks * BLOCK);
    done.buffer
}

#[test]
fn discovery_lists_the_target_and_its_portal() {
    let target = start_target("");
    let addr = target.portals()[0];
    let found = send_targets(&DiscoveryConfig::new(
        Portal::parse(&addr.to_string()).unwrap(),
    ))
    .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, TARGET);
    assert_eq!(found[0].portals, vec![(addr.to_string(), 1)]);
    target.shutdown().unwrap();
}

#[test]
fn inquiry_capacity_and_every_write_path_round_trip() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let s = engine.login(config_for(addr)).unwrap();

    let inq = engine
        .execute(s, Command::read(0, &cdb::inquiry(None, 96), 96))
        .unwrap();
    inq.good().unwrap();
    let inq = Inquiry::parse(&inq.buffer).unwrap();
    assert_eq!(inq.vendor, "ISOE");
    assert_eq!(inq.device_type, 0);

    let cap = engine
        .execute(s, Command::read(0, &cdb::read_capacity16(), 32))
        .unwrap();
    cap.good().unwrap();
    let cap = Capacity::parse(&cap.buffer).unwrap();
    assert_eq!(cap.size_bytes(), 64 << 20);
    assert_eq!(cap.block_size_bytes, 512);

    // Immediate data only (4 KiB), immediate + unsolicited (the default
    // FirstBurstLength is 256 KiB, PDUs 256 KiB... so 1 MiB needs R2Ts too).
    for (lba, blocks, seed) in [
        (0u64, 8usize, 1u8),
        (100, 512, 2),
        (2000, 2048, 3),
        (9000, 4096, 4),
    ] {
        let data = pattern(lba, blocks, seed);
        write(&mut engine, s, lba, data.clone());
        assert_eq!(
            read(&mut engine, s, lba, blocks),
            data,
            "lba {lba} blocks {blocks}"
        );
    }
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn small_pdus_r2t_only_and_digests() {
    // The target asks for 8 KiB PDUs and InitialR2T; we turn digests on and
    // immediate data off: every write goes by R2T in many Data-Out PDUs.
    let target = start_target("[defaults]\nmax_recv_data_segment_length = 8192\nmax_burst_length = 65536\nfirst_burst_length = 65536\ninitial_r2t = true\nimmediate_data = false\n");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let mut config = config_for(addr);
    config.set_digests(true, true);
    config.params.max_recv_data_segment_length = 16384;
    let s = engine.login(config).unwrap();
    let (send_max, recv_max, hd, dd) = engine.connection_limits(s).unwrap();
    assert_eq!((send_max, recv_max, hd, dd), (8192, 16384, true, true));
    let p = engine.params(s).unwrap();
    assert!(p.initial_r2t);
    assert!(!p.immediate_data);
    let data = pattern(77, 1024, 9); // 512 KiB: 8 bursts of 64 KiB, 64 Data-Out PDUs
    write(&mut engine, s, 77, data.clone());
    assert_eq!(read(&mut engine, s, 77, 1024), data);
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

/// Keeps `depth` commands in flight until `total` completed, writing then reading back.
fn pipelined(engine: &mut Engine, sessions: &[usize], depth: usize, total: u64) {
    let mut next = 0u64;
    let mut done = Vec::<Completion>::new();
    let mut completed = 0u64;
    let mut inflight = 0usize;
    let submit = |engine: &mut Engine, n: u64| {
        let s = sessions[(n as usize) % sessions.len()];
        let lba = (n % 4096) * 8;
        let data = pattern(lba, 8, n as u8);
        engine
            .submit(s, Command::write(0, &cdb::write16(lba, 8, false), data), n)
            .unwrap();
    };
    while completed < total {
        while inflight < depth && next < total {
            submit(engine, next);
            next += 1;
            inflight += 1;
        }
        engine.poll(&mut done, Duration::from_secs(1)).unwrap();
        for c in done.drain(..) {
            c.good().unwrap();
            completed += 1;
            inflight -= 1;
        }
    }
}

#[test]
fn deep_queue_over_several_connections_and_sessions() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let mut mcs = config_for(addr);
    mcs.connections = 4;
    let a = engine.login(mcs).unwrap();
    assert_eq!(engine.connections(a), 4);
    let b = engine.login(config_for(addr)).unwrap();
    pipelined(&mut engine, &[a, b], 128, 5000);
    // Every LBA written last by command n = the highest n with that LBA.
    for lba_index in [0u64, 1, 4095] {
        let lba = lba_index * 8;
        let last = (0..5000u64)
            .filter(|n| n % 4096 == lba_index)
            .max()
            .unwrap();
        assert_eq!(read(&mut engine, b, lba, 8), pattern(lba, 8, last as u8));
    }
    engine.logout(a).unwrap();
    engine.logout(b).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn task_management_and_residuals() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let s = engine.login(config_for(addr)).unwrap();
    assert_eq!(
        engine
            .execute_task_management(s, TaskManagement::LogicalUnitReset(0))
            .unwrap(),
        isoe_initiator::TmfResponse::Complete
    );
    // The LU reset leaves a unit attention; clear it.
    let _ = engine
        .execute(s, Command::new(0, &cdb::test_unit_ready()))
        .unwrap();
    // Asking for 512 bytes of a 4 KiB read: residual overflow.
    let done = engine
        .execute(s, Command::read(0, &cdb::read16(0, 8), 512))
        .unwrap();
    match &done.outcome {
        Outcome::Scsi(st) => {
            assert!(st.residual.overflow, "{st:?}");
            assert_eq!(st.residual.count, 4096 - 512);
        }
        other => panic!("{other:?}"),
    }
    // Abort a task the target no longer has.
    let r = engine
        .execute_task_management(
            s,
            TaskManagement::AbortTask {
                lun: 0,
                token: 12345,
            },
        )
        .unwrap();
    assert_eq!(r, isoe_initiator::TmfResponse::NoTask);
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn login_to_an_unknown_target_says_so() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut config = config_for(addr);
    config.target_name = "iqn.2026-11.io.isoe:nosuch".into();
    let err = Engine::new().login(config).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("iqn.2026-11.io.isoe:nosuch"), "{text}");
    assert!(
        text.contains("0x0203") || text.to_lowercase().contains("not found"),
        "{text}"
    );
    assert!(!err.is_transient());
    target.shutdown().unwrap();
}

#[test]
fn a_cut_connection_is_reinstated_and_outstanding_commands_reissued() {
    let target = start_target("");
    let proxy = Proxy::start(target.portals()[0]);
    let mut engine = Engine::new();
    let s = engine.login(config_for(proxy.addr)).unwrap();
    let mut done = Vec::new();
    // Forty 64 KiB writes in flight, then the cut, then all must complete
    // GOOD. The relay holds them until the cut: without the hold the target
    // could answer them all before the cut, and nothing would be reissued.
    proxy.hold(true);
    for n in 0..40u64 {
        let data = pattern(n * 128, 128, n as u8);
        engine
            .submit(
                s,
                Command::write(0, &cdb::write16(n * 128, 128, false), data),
                n,
            )
            .unwrap();
    }
    engine.poll(&mut done, Duration::from_millis(1)).unwrap();
    assert!(done.is_empty(), "{done:?}");
    proxy.cut_now();
    proxy.hold(false);
    while done.len() < 40 {
        engine.poll(&mut done, Duration::from_secs(1)).unwrap();
    }
    for c in &done {
        c.good().unwrap();
    }
    assert!(engine.stats().reconnects >= 1, "{:?}", engine.stats());
    for n in [0u64, 17, 39] {
        assert_eq!(
            read(&mut engine, s, n * 128, 128),
            pattern(n * 128, 128, n as u8)
        );
    }
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn reconnection_gives_up_after_the_retry_budget() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let mut config = config_for(addr);
    config.retry.attempts = 2;
    config.retry.initial_delay = Duration::from_millis(10);
    let s = engine.login(config).unwrap();
    target.shutdown().unwrap();
    let err = engine.execute(s, Command::new(0, &cdb::test_unit_ready()));
    let text = match err {
        Ok(c) => format!("{:?}", c.outcome),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("2 reconnection attempt"), "{text}");
    let _ = LocalParams::default();
}

/// Past the retry budget the session refuses commands at once; a
/// relogin asked for while the target is away fails and says why, and one
/// asked for once it is back revives the session, which takes commands
/// again (what `isoe attach` does every 5 s past its replacement timeout).
#[test]
fn a_failed_session_logs_in_again_when_asked() {
    let target = start_target("");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let mut config = config_for(addr);
    config.retry.attempts = 1;
    config.retry.initial_delay = Duration::from_millis(10);
    let s = engine.login(config).unwrap();
    write(&mut engine, s, 8, pattern(8, 4, 3));
    assert_eq!(engine.relogin(s).unwrap(), ReloginStart::Alive);
    target.shutdown().unwrap();
    let text = match engine.execute(s, Command::new(0, &cdb::test_unit_ready())) {
        Ok(c) => format!("{:?}", c.outcome),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("reconnection attempt"), "{text}");
    assert!(engine.failure(s).is_some());
    let refused = engine.submit(s, Command::new(0, &cdb::test_unit_ready()), 1);
    assert!(
        refused.is_err(),
        "a failed session refuses commands at once"
    );

    let reconnects = engine.stats().reconnects;
    let mut done = Vec::new();
    let wait_for = |engine: &mut Engine,
                    done: &mut Vec<Completion>,
                    what: &str,
                    until: &dyn Fn(&Engine) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !until(engine) {
            assert!(std::time::Instant::now() < deadline, "{what}");
            engine.poll(done, Duration::from_millis(50)).unwrap();
        }
    };
    assert_eq!(engine.relogin(s).unwrap(), ReloginStart::Started);
    assert_eq!(engine.relogin(s).unwrap(), ReloginStart::UnderWay);
    wait_for(
        &mut engine,
        &mut done,
        "the relogin to a target that is away fails",
        &|e| e.relogin_error(s).is_some(),
    );
    assert!(engine.failure(s).is_some());

    let again = Config::parse(
        &format!(
            "portals = [\"{addr}\"]\n[[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n"
        ),
        None,
    )
    .unwrap();
    let target = driver::start(again).expect("the target starts again on its port");
    assert_eq!(engine.relogin(s).unwrap(), ReloginStart::Started);
    wait_for(
        &mut engine,
        &mut done,
        "the relogin to the target that is back revives the session",
        &|e| e.failure(s).is_none(),
    );
    assert!(engine.relogin_error(s).is_none());
    assert_eq!(engine.stats().reconnects, reconnects + 1);
    // A new memory LUN: zeros where the old one had data, but it answers.
    assert_eq!(read(&mut engine, s, 8, 4), vec![0u8; 4 * BLOCK]);
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

/// While a lost session is being logged in again the engine's waits end
/// as asked (its caller serves its own events meanwhile: `isoe detach`
/// of a device whose target is away); once the target is back the
/// session is reinstated and the command waiting on it completes.
/// A session on a target at `addr` that retries for 10 s, with LBAs 8-11
/// written; the target then goes, and a read of them waits while the
/// session is being reinstated. Returns the engine and the session.
fn lost_session(target: Running, addr: SocketAddr) -> (Engine, usize) {
    let mut engine = Engine::new();
    let mut config = config_for(addr);
    config.retry.attempts = 100;
    config.retry.initial_delay = Duration::from_millis(100);
    config.retry.max_delay = Duration::from_millis(100);
    let s = engine.login(config).unwrap();
    write(&mut engine, s, 8, pattern(8, 4, 3));
    assert!(!engine.give_up(s, "not being reinstated"));
    target.shutdown().unwrap();
    engine
        .submit(s, Command::read(0, &cdb::read16(8, 4), 4 * BLOCK as u32), 7)
        .unwrap();
    let mut done = Vec::new();
    // The loss is seen, and the reinstatement starts, within a few waits.
    let mut waits = 0;
    while !engine.reinstating(s) {
        waits += 1;
        assert!(waits < 200, "the loss of the target was never seen");
        engine.poll(&mut done, Duration::from_millis(50)).unwrap();
    }
    assert!(done.is_empty(), "{done:?}");
    (engine, s)
}

#[test]
fn a_session_being_reinstated_leaves_the_engine_to_its_caller() {
    let target = start_target("");
    let addr = target.portals()[0];
    let (mut engine, s) = lost_session(target, addr);
    let mut done = Vec::new();
    // Each wait comes back with the session still being reinstated.
    for _ in 0..3 {
        engine.poll(&mut done, Duration::from_millis(50)).unwrap();
        assert!(engine.reinstating(s), "a wait ran the whole reinstatement");
        assert!(done.is_empty() && engine.failure(s).is_none(), "{done:?}");
    }
    let again = Config::parse(
        &format!(
            "portals = [\"{addr}\"]\n[[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n"
        ),
        None,
    )
    .unwrap();
    let target = driver::start(again).expect("the target starts again on its port");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while done.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the read never completed"
        );
        engine.poll(&mut done, Duration::from_millis(100)).unwrap();
    }
    done[0].good().unwrap();
    assert!(!engine.reinstating(s));
    assert!(engine.stats().reconnects >= 1);
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

/// A session given up while it is being reinstated fails its waiting
/// commands at once and stays failed (its login, when it ends, is
/// dropped).
#[test]
fn a_session_given_up_while_being_reinstated_fails_its_commands() {
    let target = start_target("");
    let addr = target.portals()[0];
    let (mut engine, s) = lost_session(target, addr);
    let mut done = Vec::new();
    assert!(engine.give_up(s, "the device is being detached"));
    assert!(!engine.reinstating(s));
    engine.poll(&mut done, Duration::from_millis(50)).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    let text = format!("{:?}", done[0].outcome);
    assert!(text.contains("the device is being detached"), "{text}");
    assert!(engine.failure(s).is_some());
}

#[test]
fn target_pings_are_answered_and_idle_sessions_send_keepalives() {
    // The target pings a connection silent for a second and drops it when a
    // ping goes unanswered for two. Session `quiet` sends no keepalives, so
    // the target pings it; session `chatty` pings after 300 ms of silence.
    let target = start_target("[defaults]\nnop_in_interval_s = 1\nnop_in_timeout_s = 2\n");
    let addr = target.portals()[0];
    let mut engine = Engine::new();
    let mut quiet = config_for(addr);
    quiet.keepalive.interval = None;
    let mut chatty = config_for(addr);
    chatty.keepalive.interval = Some(Duration::from_millis(300));
    chatty.keepalive.timeout = Duration::from_secs(2);
    let q = engine.login(quiet).unwrap();
    let c = engine.login(chatty).unwrap();
    let mut done = Vec::new();
    let idle_until = std::time::Instant::now() + Duration::from_millis(3500);
    while std::time::Instant::now() < idle_until {
        engine.poll(&mut done, Duration::from_millis(100)).unwrap();
    }
    assert!(done.is_empty());
    let q_nops = engine.nop_counters(q).unwrap();
    assert!(q_nops.target_pings_echoed >= 2, "{q_nops:?}");
    assert_eq!(q_nops.pings_sent, 0, "{q_nops:?}");
    let c_nops = engine.nop_counters(c).unwrap();
    assert!(c_nops.pings_sent >= 5, "{c_nops:?}");
    assert!(c_nops.pings_answered + 1 >= c_nops.pings_sent, "{c_nops:?}");
    // Nobody dropped a connection: no reinstatement was needed.
    assert_eq!(engine.stats().reconnects, 0);
    for s in [q, c] {
        engine
            .execute(s, Command::new(0, &cdb::test_unit_ready()))
            .unwrap()
            .good()
            .unwrap();
        engine.logout(s).unwrap();
    }
    target.shutdown().unwrap();
}

/// `poll_or_wake` returns as soon as the caller's descriptor is readable,
/// with a lone connection too (which otherwise waits in `recv`), and
/// completions still come back through it.
#[test]
fn poll_or_wake_returns_for_the_callers_descriptor() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    let target = start_target("");
    let mut engine = Engine::new();
    let s = engine.login(config_for(target.portals()[0])).unwrap();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut done = Vec::new();

    // Nothing readable: the wait runs to its timeout and says so.
    let woken = engine
        .poll_or_wake(&mut done, Duration::from_millis(50), theirs.as_raw_fd())
        .unwrap();
    assert!(!woken);
    assert!(done.is_empty());

    // Readable: back at once, long before the timeout.
    ours.write_all(b"x").unwrap();
    let start = Instant::now();
    let woken = engine
        .poll_or_wake(&mut done, Duration::from_secs(30), theirs.as_raw_fd())
        .unwrap();
    assert!(woken, "the wake descriptor was readable");
    assert!(start.elapsed() < Duration::from_secs(20));

    // A command's completion still arrives while the descriptor is watched
    // (it stays readable, so each call also says woken).
    engine
        .submit(s, Command::read(0, &cdb::read16(0, 1), BLOCK as u32), 7)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while done.is_empty() && Instant::now() < deadline {
        engine
            .poll_or_wake(&mut done, Duration::from_millis(100), theirs.as_raw_fd())
            .unwrap();
    }
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].token, 7);
    done[0].good().unwrap();

    // A wait without the descriptor (a synchronous command) is not ended
    // by it, though it is still readable: the command's answer comes back.
    let read = engine
        .execute(s, Command::read(0, &cdb::read16(0, 1), BLOCK as u32))
        .unwrap();
    read.good().unwrap();
    // And given again, it is watched again.
    let woken = engine
        .poll_or_wake(&mut done, Duration::from_secs(30), theirs.as_raw_fd())
        .unwrap();
    assert!(woken);
}
