//! Direct placement of Data-In against isoe's own target, started in this
//! process: large reads received straight into the command's buffer, with
//! and without digests, over one connection (blocking receives) and over
//! two (non-blocking receives after `poll`), through a relay that hands the
//! data over in small uneven pieces (headers split across receives), and
//! with the read aborted or the connection cut while its data arrives.

use isoe_initiator::cdb;
use isoe_initiator::{
    Command, Completion, Engine, IscsiUrl, Outcome, SessionConfig, TaskError, TaskManagement,
    TmfResponse,
};
use isoe_target::config::Config;
use isoe_target::driver::{self, Running};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:target0";
const BLOCK: usize = 512;
const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn start_target() -> Running {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"32MiB\"\n"
    );
    driver::start(Config::parse(&text, None).expect("test config parses")).expect("target starts")
}

/// 256 KiB PDUs each way, digests as asked.
fn config_for(addr: SocketAddr, digests: bool) -> SessionConfig {
    let url = IscsiUrl::parse(&format!("iscsi://{addr}/{TARGET}/0")).unwrap();
    let mut config = SessionConfig::from_url(&url);
    config.params.max_recv_data_segment_length = 256 * KIB as u32;
    config.set_digests(digests, digests);
    config
}

fn pattern(lba: u64, len: usize, seed: u8) -> Vec<u8> {
    let mut data = vec![0u8; len];
    for (i, chunk) in data.chunks_mut(BLOCK).enumerate() {
        chunk[..8].copy_from_slice(&(lba + i as u64).to_be_bytes());
        for (j, b) in chunk[8..].iter_mut().enumerate() {
            *b = seed.wrapping_add((i * 7 + j) as u8);
        }
    }
    data
}

fn write_cmd(lba: u64, data: Vec<u8>) -> Command {
    let blocks = (data.len() / BLOCK) as u32;
    Command::write(0, &cdb::write16(lba, blocks, false), data)
}

fn read_cmd(lba: u64, len: usize) -> Command {
    Command::read(0, &cdb::read16(lba, (len / BLOCK) as u32), len as u32)
}

fn write(engine: &mut Engine, s: usize, lba: u64, data: Vec<u8>) {
    engine
        .execute(s, write_cmd(lba, data))
        .unwrap()
        .good()
        .unwrap();
}

fn read(engine: &mut Engine, s: usize, lba: u64, len: usize) -> Vec<u8> {
    let done = engine.execute(s, read_cmd(lba, len)).unwrap();
    let status = done.good().unwrap();
    assert_eq!(status.data_in_len as usize, len);
    done.buffer
}

/// Waits until `n` completions are in `done`.
fn collect(engine: &mut Engine, done: &mut Vec<Completion>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} completions",
            done.len()
        );
        engine.poll(done, Duration::from_millis(100)).unwrap();
    }
}

#[test]
fn large_reads_are_received_straight_into_the_command_buffer() {
    let target = start_target();
    let addr = target.portals()[0];
    for digests in [false, true] {
        let mut engine = Engine::new();
        let s = engine.login(config_for(addr, digests)).unwrap();
        let (_, recv_max, hd, dd) = engine.connection_limits(s).unwrap();
        assert_eq!((recv_max, hd, dd), (256 * KIB as u32, digests, digests));
        let seed = 40 + u8::from(digests);
        let data = pattern(0, 4 * MIB, seed);
        write(&mut engine, s, 0, data.clone());

        let before = engine.stats();
        let mut read_bytes = 0;
        for (lba, len) in [
            (0u64, MIB),
            (0, 4 * MIB),
            (2048, 300 * KIB),
            (100, 64 * KIB),
        ] {
            let start = lba as usize * BLOCK;
            assert_eq!(
                read(&mut engine, s, lba, len),
                &data[start..start + len],
                "digests {digests}: {len} bytes at LBA {lba}"
            );
            read_bytes += len as u64;
        }
        // 4 KiB reads stay on the buffered path.
        assert_eq!(read(&mut engine, s, 8, 4 * KIB), &data[4 * KIB..8 * KIB]);
        let after = engine.stats();
        let placed = after.placed_bytes - before.placed_bytes;
        assert!(
            after.placed_pdus - before.placed_pdus >= 16,
            "digests {digests}: {after:?}"
        );
        // Most bytes skip the receive buffer (the rest came with a header).
        assert!(
            placed * 4 >= read_bytes * 3,
            "digests {digests}: {placed} of {read_bytes} bytes placed"
        );
        engine.logout(s).unwrap();
    }
    target.shutdown().unwrap();
}

/// A TCP relay that hands the target's bytes over in small uneven pieces,
/// pausing after each, and can cut every connection it carries.
struct Relay {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
}

impl Relay {
    fn start(upstream: SocketAddr, piece_max: usize, pause: Duration) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (cut2, gen2) = (cut.clone(), generation.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                client.set_nodelay(true).unwrap();
                server.set_nodelay(true).unwrap();
                let my_gen = gen2.load(Ordering::SeqCst);
                // Requests pass whole; responses in pieces.
                for (from, to, piece_max) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap(), 0),
                    (server, client, piece_max),
                ] {
                    let (cut, gen) = (cut2.clone(), gen2.clone());
                    thread::spawn(move || {
                        relay_one_way(from, to, piece_max, pause, || {
                            cut.load(Ordering::SeqCst) && gen.load(Ordering::SeqCst) == my_gen
                        })
                    });
                }
            }
        });
        Relay {
            addr,
            cut,
            generation,
        }
    }

    /// Cuts the current connections; later ones pass.
    fn cut_now(&self) {
        self.cut.store(true, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(100));
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to`; with `piece_max` > 0, in pieces of 1 to
/// `piece_max` bytes (a different size each time), pausing after each.
fn relay_one_way(
    mut from: TcpStream,
    mut to: TcpStream,
    piece_max: usize,
    pause: Duration,
    cut: impl Fn() -> bool,
) {
    from.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut pieces = 0usize;
    loop {
        if cut() {
            let _ = from.shutdown(std::net::Shutdown::Both);
            let _ = to.shutdown(std::net::Shutdown::Both);
            return;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(std::net::Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        let mut at = 0;
        while at < n {
            let len = if piece_max == 0 {
                n - at
            } else {
                pieces += 1;
                (1 + pieces.wrapping_mul(7919) % piece_max).min(n - at)
            };
            if to.write_all(&buf[at..at + len]).is_err() {
                return;
            }
            at += len;
            if piece_max > 0 && !pause.is_zero() {
                thread::sleep(pause);
            }
        }
    }
}

#[test]
fn reads_are_placed_while_their_data_trickles_in() {
    let target = start_target();
    // One connection (blocking receives) and two (poll, then non-blocking).
    for (connections, digests) in [(1u16, true), (2, true), (2, false)] {
        let relay = Relay::start(target.portals()[0], 3000, Duration::from_micros(20));
        let mut engine = Engine::new();
        let mut config = config_for(relay.addr, digests);
        config.connections = connections;
        let s = engine.login(config).unwrap();
        assert_eq!(engine.connections(s), usize::from(connections));
        let seed = 60 + connections as u8 * 2 + u8::from(digests);
        let data = pattern(0, 2 * MIB, seed);
        write(&mut engine, s, 0, data.clone());

        // Reads of every size in flight together, and a write among them.
        let reads = [
            (0u64, MIB),
            (512, 512 * KIB),
            (8, 4 * KIB),
            (1024, 272 * KIB),
            (3000, 8 * KIB),
            (2048, 40 * KIB),
        ];
        let before = engine.stats();
        for (token, &(lba, len)) in reads.iter().enumerate() {
            engine.submit(s, read_cmd(lba, len), token as u64).unwrap();
        }
        let extra = pattern(8192, 128 * KIB, seed);
        engine
            .submit(s, write_cmd(8192, extra.clone()), 100)
            .unwrap();
        let mut done = Vec::new();
        collect(&mut engine, &mut done, reads.len() + 1);
        for c in &done {
            c.good().unwrap();
            if c.token == 100 {
                continue;
            }
            let (lba, len) = reads[c.token as usize];
            let start = lba as usize * BLOCK;
            assert!(
                c.buffer == data[start..start + len],
                "{connections} connection(s), digests {digests}: read {} differs",
                c.token
            );
        }
        let after = engine.stats();
        assert!(
            after.placed_pdus > before.placed_pdus,
            "{connections} connection(s): nothing placed: {after:?}"
        );
        assert_eq!(read(&mut engine, s, 8192, 128 * KIB), extra);
        engine.logout(s).unwrap();
    }
    target.shutdown().unwrap();
}

#[test]
fn a_read_aborted_while_its_data_is_placed_leaves_the_session_sound() {
    let target = start_target();
    let relay = Relay::start(target.portals()[0], 4096, Duration::from_micros(500));
    let mut engine = Engine::new();
    let mut config = config_for(relay.addr, true);
    config.connections = 2;
    let s = engine.login(config).unwrap();
    assert_eq!(engine.connections(s), 2);
    let data = pattern(0, 4 * MIB, 77);
    write(&mut engine, s, 0, data.clone());

    // The read goes out on one connection; its 4 MiB trickle in for about a second.
    engine.submit(s, read_cmd(0, 4 * MIB), 1).unwrap();
    let mut done = Vec::new();
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        engine.poll(&mut done, Duration::from_millis(20)).unwrap();
    }
    assert!(done.is_empty(), "the read ended too soon: {done:?}");
    assert!(engine.stats().placed_pdus >= 1, "{:?}", engine.stats());
    // The reset goes out on the other, idle connection and its answer comes
    // back there long before the read's last data.
    engine
        .task_management(s, TaskManagement::LogicalUnitReset(0), 2)
        .unwrap();
    collect(&mut engine, &mut done, 2);
    let read_done = done.iter().find(|c| c.token == 1).unwrap();
    assert_eq!(read_done.outcome, Outcome::Failed(TaskError::Aborted));
    let reset = done.iter().find(|c| c.token == 2).unwrap();
    assert_eq!(
        reset.outcome,
        Outcome::TaskManagement(TmfResponse::Complete)
    );
    // The aborted read's buffer came back, whatever was placed before the end.
    assert_eq!(read_done.buffer.len(), 4 * MIB);
    drop(done);

    // The rest of its data drains into the sink while new reads go on.
    let _ = engine
        .execute(s, Command::new(0, &cdb::test_unit_ready()))
        .unwrap();
    for (lba, len) in [(0u64, MIB), (4096, 2 * MIB)] {
        let start = lba as usize * BLOCK;
        assert_eq!(read(&mut engine, s, lba, len), &data[start..start + len]);
    }
    assert_eq!(engine.stats().reconnects, 0);
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}

#[test]
fn a_connection_cut_while_data_is_placed_is_reinstated_and_the_read_reissued() {
    let target = start_target();
    let relay = Relay::start(target.portals()[0], 4096, Duration::from_micros(500));
    let mut engine = Engine::new();
    let s = engine.login(config_for(relay.addr, true)).unwrap();
    let data = pattern(0, 4 * MIB, 91);
    write(&mut engine, s, 0, data.clone());

    engine.submit(s, read_cmd(0, 4 * MIB), 1).unwrap();
    let mut done = Vec::new();
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        engine.poll(&mut done, Duration::from_millis(20)).unwrap();
    }
    assert!(done.is_empty(), "the read ended too soon: {done:?}");
    assert!(engine.stats().placed_pdus >= 1, "{:?}", engine.stats());
    relay.cut_now();
    collect(&mut engine, &mut done, 1);
    done[0].good().unwrap();
    assert!(done[0].buffer == data, "the reissued read's data differs");
    assert!(engine.stats().reconnects >= 1, "{:?}", engine.stats());
    engine.logout(s).unwrap();
    target.shutdown().unwrap();
}
