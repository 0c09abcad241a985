//! A multipath LU of the engine against isoe's target started in this
//! process, one LU through two portal groups (1 on 127.0.0.1,
//! active/optimized; 2 on 127.0.0.2, active/non-optimized or standby):
//! commands go through the optimized path; cut, its outstanding writes go
//! through the other and read back; the path comes back by itself and is
//! used again; a standby path is never used; paths of two LUs are refused.

mod common;
use common::Proxy;
use isoe_initiator::cdb;
use isoe_initiator::{
    AccessState, Command, Completion, Engine, InitiatorError, IscsiUrl, MultipathOptions,
    PathStatus, Portal, RetryPolicy, SessionConfig,
};
use isoe_target::config::Config;
use isoe_target::driver::{self, Running};
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:mpath";
const BLOCK: usize = 512;

/// A target with group 1 on 127.0.0.1 (active/optimized) and group 2 on
/// 127.0.0.2 in `second_state`, LUN 0 a memory store named `naa`.
fn start_target(second_state: &str, naa: &str) -> Running {
    let text = format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\n\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.2:0\"]\nalua_state = \"{second_state}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n\
         serial = \"MP0\"\nnaa = \"{naa}\"\n"
    );
    let config = Config::parse(&text, None).expect("test config parses");
    driver::start(config).expect("target starts")
}

const NAA: &str = "0x6001405abcdef0123456789abcdef001";

/// A path to LUN 0 through `addr`.
fn path(addr: SocketAddr) -> (SessionConfig, u16) {
    let url = IscsiUrl::parse(&format!("iscsi://{addr}/{TARGET}/0")).unwrap();
    let mut config = SessionConfig::from_url(&url);
    config.portal = Portal {
        host: addr.ip().to_string(),
        port: addr.port(),
    };
    config.retry = RetryPolicy {
        attempts: 3,
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
    };
    (config, 0)
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

fn read(engine: &mut Engine, lu: usize, lba: u64, blocks: usize) -> Vec<u8> {
    let done = engine
        .execute(
            lu,
            Command::read(0, &cdb::read16(lba, blocks as u32), (blocks * BLOCK) as u32),
        )
        .unwrap();
    done.good().unwrap();
    done.buffer
}

fn commands_through(engine: &Engine, lu: usize) -> Vec<u64> {
    engine
        .multipath_paths(lu)
        .unwrap()
        .iter()
        .map(|p| p.commands)
        .collect()
}

#[test]
fn commands_go_through_the_optimized_path_and_fail_over_when_it_is_cut() {
    let target = start_target("active/non-optimized", NAA);
    let portals = target.portals();
    let proxy = Proxy::start(portals[0]);
    let mut engine = Engine::new();
    let lu = engine
        .open_multipath(
            vec![path(proxy.addr), path(portals[1])],
            MultipathOptions::default(),
        )
        .unwrap();
    let reports = engine.multipath_paths(lu).unwrap();
    assert_eq!(
        reports
            .iter()
            .map(|p| (p.port_group, p.state))
            .collect::<Vec<_>>(),
        [
            (Some(1), Some(AccessState::ActiveOptimized)),
            (Some(2), Some(AccessState::ActiveNonOptimized))
        ]
    );
    assert_eq!(
        engine.multipath_identity(lu).unwrap().to_string(),
        "NAA 0x6001405abcdef0123456789abcdef001"
    );
    for n in 0..8u64 {
        read(&mut engine, lu, n, 1);
    }
    assert_eq!(commands_through(&engine, lu), [8, 0], "the optimized path");

    // Forty writes held in the relay, then the cut: they must all end GOOD
    // through the other path, and read back.
    let mut done: Vec<Completion> = Vec::new();
    proxy.hold(true);
    // The relay's threads see the hold within their 20 ms read timeout.
    thread::sleep(Duration::from_millis(100));
    for n in 0..40u64 {
        let data = pattern(n * 16, 16, n as u8);
        engine
            .submit(
                lu,
                Command::write(0, &cdb::write16(n * 16, 16, false), data),
                n,
            )
            .unwrap();
    }
    engine.poll(&mut done, Duration::from_millis(1)).unwrap();
    assert!(done.is_empty(), "{done:?}");
    let cut_at = Instant::now();
    proxy.cut_now();
    proxy.hold(false);
    while done.len() < 40 {
        engine.poll(&mut done, Duration::from_secs(1)).unwrap();
        assert!(cut_at.elapsed() < Duration::from_secs(30), "{done:?}");
    }
    for c in &done {
        c.good().unwrap();
    }
    // Each write was answered through the first path before the cut (had
    // the relay let it by) or reissued through the second.
    let stats = engine.multipath_stats(lu).unwrap();
    let through = commands_through(&engine, lu);
    assert!(stats.failovers >= 1, "{stats:?}");
    assert!(stats.reissued >= 1, "{stats:?}");
    assert_eq!(through[0] - 8 + stats.reissued, 40, "{stats:?} {through:?}");
    assert_eq!(through[1], stats.reissued, "{stats:?} {through:?}");
    for n in [0u64, 17, 39] {
        assert_eq!(
            read(&mut engine, lu, n * 16, 16),
            pattern(n * 16, 16, n as u8)
        );
    }

    // The relay lets new connections through: the path is logged in again
    // in the background, probed, and serves again.
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.multipath_paths(lu).unwrap()[0].status != PathStatus::Ready {
        engine.poll(&mut done, Duration::from_millis(100)).unwrap();
        assert!(
            Instant::now() < deadline,
            "{:?}",
            engine.multipath_paths(lu)
        );
    }
    let before = commands_through(&engine, lu);
    for n in 0..4u64 {
        read(&mut engine, lu, n, 1);
    }
    let after = commands_through(&engine, lu);
    assert_eq!(after[0], before[0] + 4, "back on the optimized path");
    assert_eq!(engine.multipath_paths(lu).unwrap()[0].downs, 1);
    assert!(engine.stats().reconnects >= 1);
    engine.logout(lu).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn a_standby_path_is_not_used_while_an_active_one_serves() {
    let target = start_target("standby", NAA);
    let portals = target.portals();
    let mut engine = Engine::new();
    // The standby path first: order given does not matter.
    let lu = engine
        .open_multipath(
            vec![path(portals[1]), path(portals[0])],
            MultipathOptions::default(),
        )
        .unwrap();
    for n in 0..10u64 {
        let data = pattern(n, 1, 3);
        engine
            .execute(lu, Command::write(0, &cdb::write16(n, 1, false), data))
            .unwrap()
            .good()
            .unwrap();
        assert_eq!(read(&mut engine, lu, n, 1), pattern(n, 1, 3));
    }
    let reports = engine.multipath_paths(lu).unwrap();
    assert_eq!(reports[0].state, Some(AccessState::Standby));
    assert_eq!(commands_through(&engine, lu), [0, 20]);
    engine.logout(lu).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn with_every_path_gone_commands_fail_after_the_failover_time_saying_why() {
    let target = start_target("active/non-optimized", NAA);
    let portals = target.portals();
    let mut engine = Engine::new();
    let options = MultipathOptions {
        failover_timeout: Duration::from_secs(1),
        ..MultipathOptions::default()
    };
    let lu = engine
        .open_multipath(vec![path(portals[0]), path(portals[1])], options)
        .unwrap();
    read(&mut engine, lu, 0, 1);
    target.shutdown().unwrap();
    let started = Instant::now();
    engine
        .submit(lu, Command::read(0, &cdb::read16(0, 1), BLOCK as u32), 77)
        .unwrap();
    let mut done = Vec::new();
    while done.is_empty() {
        engine.poll(&mut done, Duration::from_millis(100)).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            engine.multipath_paths(lu)
        );
    }
    let waited = started.elapsed();
    let done = done.pop().unwrap();
    assert_eq!(done.token, 77);
    let Err(why) = done.good() else {
        panic!("a read with no target: {:?}", done.outcome);
    };
    assert!(
        why.contains("no path to the logical unit: none served it within 1.0 s")
            && why.contains("(group 1, down: connection lost:")
            && why.contains("(group 2, down: connection lost:"),
        "{why}"
    );
    // Bounded: the failover time, and the engine's wake-ups around it.
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let reports = engine.multipath_paths(lu).unwrap();
    assert!(reports.iter().all(|p| p.status == PathStatus::Down));
    assert_eq!(engine.multipath_stats(lu).unwrap().expired, 1);
    engine.logout(lu).unwrap();
}

#[test]
fn paths_of_two_logical_units_are_refused() {
    let a = start_target("active/non-optimized", NAA);
    let b = start_target("active/non-optimized", "0x6001405abcdef0123456789abcdef002");
    let mut engine = Engine::new();
    let err = engine
        .open_multipath(
            vec![path(a.portals()[0]), path(b.portals()[1])],
            MultipathOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(err, InitiatorError::Multipath(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("are not paths of one logical unit")
            && text.contains("NAA 0x6001405abcdef0123456789abcdef001")
            && text.contains("NAA 0x6001405abcdef0123456789abcdef002"),
        "{text}"
    );
    // Its sessions were logged out: nothing is left on either target.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(a.server().sessions().is_empty() && b.server().sessions().is_empty()) {
        assert!(Instant::now() < deadline, "sessions left behind");
        thread::sleep(Duration::from_millis(20));
    }
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}
