//! Where the target's driver places connections: a session's connections
//! end up on one worker (its first connection's), so that the wake-ups
//! that deliver its commands in CmdSN order across them stay within one
//! thread; and data written through every connection of several such
//! sessions reads back whole.

use isoe_initiator::{cdb, Command, Completion, Engine, IscsiUrl, SessionConfig};
use isoe_target::{Config, Running};
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:placement";
const BLOCK: usize = 512;

fn start() -> Running {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\
         [defaults]\nnop_in_interval_s = 0\n\
         [datapath]\nworkers = 2\n\
         [[target]]\nname = \"{TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n"
    );
    isoe_target::start(Config::parse(&text, None).expect("config")).expect("target starts")
}

fn login(engine: &mut Engine, running: &Running, connections: u16) -> usize {
    let url = format!("iscsi://{}/{TARGET}/0", running.portals()[0]);
    let mut config = SessionConfig::from_url(&IscsiUrl::parse(&url).expect("url"));
    config.connections = connections;
    let session = engine.login(config).expect("login");
    assert_eq!(engine.connections(session), usize::from(connections));
    session
}

fn block(lba: u64, session: usize) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| (lba as u8).wrapping_mul(31) ^ (i as u8) ^ (session as u8 * 0x55))
        .collect()
}

/// Submits every command, then polls until all have completed GOOD.
fn run_all(engine: &mut Engine, commands: Vec<(usize, Command)>) -> Vec<Completion> {
    let count = commands.len();
    for (token, (session, command)) in commands.into_iter().enumerate() {
        engine
            .submit(session, command, token as u64)
            .expect("submit");
    }
    let mut done = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while done.len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} answered",
            done.len()
        );
        engine
            .poll(&mut done, Duration::from_millis(100))
            .expect("poll");
    }
    for c in &done {
        if let Err(why) = c.good() {
            panic!("token {}: {why}", c.token);
        }
    }
    done.sort_by_key(|c| c.token);
    done
}

#[test]
fn a_sessions_connections_share_one_worker_and_carry_its_commands() {
    let running = start();
    let mut engine = Engine::new();
    let sessions = [
        login(&mut engine, &running, 3),
        login(&mut engine, &running, 3),
    ];
    // Placement follows the login; wait for it to settle.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let by_worker = running.connections_by_worker();
        assert_eq!(by_worker.iter().sum::<usize>(), 6, "{by_worker:?}");
        let placed = running.session_workers();
        assert_eq!(placed.len(), 2);
        if placed
            .iter()
            .all(|(_, workers)| workers.len() == 3 && workers.iter().all(|&w| w == workers[0]))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "each session's three connections on one worker: {placed:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Many commands at once, spread by the initiator over each session's
    // connections, delivered in CmdSN order by the target.
    let blocks = 96u64;
    let writes = sessions
        .iter()
        .flat_map(|&s| {
            (0..blocks).map(move |lba| {
                let lba = lba + s as u64 * blocks;
                (
                    s,
                    Command::write(0, &cdb::write16(lba, 1, false), block(lba, s)),
                )
            })
        })
        .collect();
    run_all(&mut engine, writes);
    let reads = sessions
        .iter()
        .flat_map(|&s| {
            (0..blocks).map(move |lba| {
                let lba = lba + s as u64 * blocks;
                (s, Command::read(0, &cdb::read16(lba, 1), BLOCK as u32))
            })
        })
        .collect::<Vec<_>>();
    let expected: Vec<Vec<u8>> = reads
        .iter()
        .enumerate()
        .map(|(i, (s, _))| block(i as u64 % blocks + *s as u64 * blocks, *s))
        .collect();
    let done = run_all(&mut engine, reads);
    for (c, want) in done.iter().zip(&expected) {
        assert_eq!(&c.buffer, want, "token {}", c.token);
    }
    running.shutdown().unwrap();
}
