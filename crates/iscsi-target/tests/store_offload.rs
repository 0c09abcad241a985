//! Store calls that may wait on a device run on the target's I/O threads
//! (`[datapath] io_threads`), not on the worker that serves the connection:
//! a store whose flush waits until the test lets it go stands in for a slow
//! disk, under a running target with one worker, and commands to a memory
//! LUN, on the same connection and on another session, are answered
//! meanwhile. With `io_threads = 0` the same flush holds up the worker,
//! which shows what the first test would catch. Task management functions
//! that end such a command answer only once its store call has returned.

use isoe_initiator::{
    cdb, Command, Completion, Engine, IscsiUrl, Outcome, SessionConfig, TaskError, TaskManagement,
};
use isoe_store::{Extent, Store, StoreError};
use isoe_target::{Config, Running};
use isoe_wire::pdu::tmf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:offload";
/// Long enough for any answer on a loopback connection; reached only when
/// the answer does not come.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long an answer that must not come is waited for.
const QUIET: Duration = Duration::from_millis(500);

/// A gate that holds every flush until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    /// Flushes that reached the gate.
    arrived: AtomicUsize,
}

impl Gate {
    fn pass(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// A store whose flush waits at the gate, and which says it may block.
#[derive(Debug)]
struct Slow {
    inner: Arc<dyn Store>,
    gate: Arc<Gate>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

impl Store for Slow {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.gate.pass();
        self.inner.flush()
    }
    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.unmap(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.write_zeroes(offset, len)
    }
    fn kind(&self) -> &'static str {
        "file"
    }
    fn may_block(&self) -> bool {
        true
    }
    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        self.inner.allocation(offset, len)
    }
}

/// A target with one worker: LUN 0 behind the gate, LUN 1 in memory.
fn start(io_threads: usize, gate: &Arc<Gate>) -> Running {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\
         [defaults]\nnop_in_interval_s = 0\n\
         [datapath]\nworkers = 1\nio_threads = {io_threads}\n\
         [[target]]\nname = \"{TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n\
         [[target.lun]]\nnumber = 1\nmemory = \"1MiB\"\n"
    );
    let config = Config::parse(&text, None).expect("config");
    let gate = Arc::clone(gate);
    isoe_target::driver::start_with_stores_wrapped(config, &move |_, lun, store| {
        if lun == 0 {
            Arc::new(Slow {
                inner: store,
                gate: Arc::clone(&gate),
            })
        } else {
            store
        }
    })
    .expect("target starts")
}

fn login(engine: &mut Engine, running: &Running) -> usize {
    let url = format!("iscsi://{}/{TARGET}/0", running.portals()[0]);
    let config = SessionConfig::from_url(&IscsiUrl::parse(&url).expect("url"));
    engine.login(config).expect("login")
}

/// Polls until the completion with `token` comes or `within` passes;
/// keeps every completion seen in `seen`.
fn wait_for(
    engine: &mut Engine,
    seen: &mut Vec<Completion>,
    token: u64,
    within: Duration,
) -> Option<usize> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(index) = seen.iter().position(|c| c.token == token) {
            return Some(index);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        engine
            .poll(seen, left.min(Duration::from_millis(50)))
            .expect("poll");
    }
}

/// Polls until `count` flushes wait at the gate.
fn until_arrived(engine: &mut Engine, seen: &mut Vec<Completion>, gate: &Gate, count: usize) {
    let deadline = Instant::now() + PATIENCE;
    while gate.arrived.load(Ordering::SeqCst) < count {
        assert!(
            Instant::now() < deadline,
            "the flush never reached the store"
        );
        engine.poll(seen, Duration::from_millis(10)).expect("poll");
    }
}

fn good(seen: &[Completion], index: usize) {
    if let Err(why) = seen[index].good() {
        panic!("token {}: {why}", seen[index].token);
    }
}

fn read_lun1() -> Command {
    Command::read(1, &cdb::read16(0, 8), 8 * 512)
}

/// A target with `io_threads`, two sessions (A and B) on its one worker,
/// and A's SYNCHRONIZE CACHE (token 1) held at the gate.
struct Held {
    gate: Arc<Gate>,
    running: Running,
    engine: Engine,
    a: usize,
    b: usize,
    seen: Vec<Completion>,
}

fn flush_held(io_threads: usize) -> Held {
    let gate = Arc::new(Gate::default());
    let running = start(io_threads, &gate);
    let mut engine = Engine::new();
    let a = login(&mut engine, &running);
    let b = login(&mut engine, &running);
    let mut seen = Vec::new();
    engine
        .submit(a, Command::new(0, &cdb::synchronize_cache10()), 1)
        .unwrap();
    until_arrived(&mut engine, &mut seen, &gate, 1);
    Held {
        gate,
        running,
        engine,
        a,
        b,
        seen,
    }
}

#[test]
fn a_slow_flush_holds_up_no_other_command_of_its_worker() {
    let Held {
        gate,
        running,
        mut engine,
        a,
        b,
        mut seen,
    } = flush_held(2);
    // Another session, on the same (only) worker.
    engine.submit(b, read_lun1(), 2).unwrap();
    let read_b = wait_for(&mut engine, &mut seen, 2, PATIENCE).expect("session B answered");
    good(&seen, read_b);
    // The same connection as the flush.
    engine.submit(a, read_lun1(), 3).unwrap();
    let read_a = wait_for(&mut engine, &mut seen, 3, PATIENCE).expect("session A answered");
    good(&seen, read_a);
    assert!(
        seen.iter().all(|c| c.token != 1),
        "the flush is still held at the gate"
    );
    gate.open();
    let flush = wait_for(&mut engine, &mut seen, 1, PATIENCE).expect("the flush answered");
    good(&seen, flush);
    running.shutdown().unwrap();
}

#[test]
fn with_no_io_threads_a_slow_flush_holds_up_its_worker() {
    let Held {
        gate,
        running,
        mut engine,
        b,
        mut seen,
        ..
    } = flush_held(0);
    engine.submit(b, read_lun1(), 2).unwrap();
    assert_eq!(
        wait_for(&mut engine, &mut seen, 2, QUIET),
        None,
        "the worker is making the flush itself"
    );
    gate.open();
    for token in [1, 2] {
        let index = wait_for(&mut engine, &mut seen, token, PATIENCE).expect("answered");
        good(&seen, index);
    }
    running.shutdown().unwrap();
}

#[test]
fn ending_a_task_waits_for_its_store_call() {
    for (function, lun) in [
        (TaskManagement::AbortTask { lun: 0, token: 1 }, 0),
        (TaskManagement::LogicalUnitReset(0), 0),
    ] {
        let gate = Arc::new(Gate::default());
        let running = start(2, &gate);
        let mut engine = Engine::new();
        let a = login(&mut engine, &running);
        let mut seen = Vec::new();
        engine
            .submit(a, Command::new(lun, &cdb::synchronize_cache10()), 1)
            .unwrap();
        until_arrived(&mut engine, &mut seen, &gate, 1);
        engine.task_management(a, function, 9).unwrap();
        assert_eq!(
            wait_for(&mut engine, &mut seen, 9, QUIET),
            None,
            "{function:?} answered while the store call it ends is under way"
        );
        // Other commands go on meanwhile.
        engine.submit(a, read_lun1(), 3).unwrap();
        let read = wait_for(&mut engine, &mut seen, 3, PATIENCE).expect("read answered");
        good(&seen, read);
        gate.open();
        let answer = wait_for(&mut engine, &mut seen, 9, PATIENCE).expect("TMF answered");
        assert_eq!(
            seen[answer].outcome,
            Outcome::TaskManagement(tmf::TmfResponse::Complete),
            "{function:?}"
        );
        let flush = wait_for(&mut engine, &mut seen, 1, PATIENCE).expect("flush ended");
        assert_eq!(
            seen[flush].outcome,
            Outcome::Failed(TaskError::Aborted),
            "{function:?}"
        );
        running.shutdown().unwrap();
    }
}
