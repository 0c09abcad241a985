//! A LUN whose store is asynchronous (a network store such as Ceph RBD):
//! READ, WRITE and SYNCHRONIZE CACHE are started on the store and answered
//! when it calls back, from a thread of its own and in any order, while the
//! worker serves everything else. The store here is a memory store whose
//! requests wait in a queue until the test completes them, in the order it
//! chooses; the target runs one worker and no I/O threads, so that any wait
//! on the store would hold everything up.

use isoe_initiator::{
    cdb, Command, Completion, Engine, IscsiUrl, Outcome, SessionConfig, TaskError, TaskManagement,
};
use isoe_store::{AsyncStore, Extent, Io, IoDone, IoKind, Store, StoreError};
use isoe_target::{Config, Running};
use isoe_wire::pdu::tmf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:async";
const PATIENCE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_millis(500);

/// A memory store whose asynchronous requests wait until released.
struct Queued {
    inner: Arc<dyn Store>,
    waiting: Mutex<Vec<(Io, IoDone)>>,
    /// Fail the next released request with EIO.
    fail_next: Mutex<bool>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queued")
    }
}

impl Queued {
    fn waiting(&self) -> Vec<IoKind> {
        self.waiting
            .lock()
            .unwrap()
            .iter()
            .map(|(io, _)| io.kind)
            .collect()
    }

    /// Carries out the waiting request at `index` and calls its completion
    /// on this (the test's) thread, as a store's own thread would.
    fn release(&self, index: usize) {
        let (mut io, done) = self.waiting.lock().unwrap().remove(index);
        if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
            let eio = std::io::Error::from_raw_os_error(5);
            return done(io, Err(StoreError::io("test", 0, eio)));
        }
        let result = match io.kind {
            IoKind::Read { offset, len } => self.inner.read_append(offset, len, &mut io.buffer),
            IoKind::Write { offset, .. } => self.inner.write_at(offset, &io.buffer),
            IoKind::Flush => self.inner.flush(),
        };
        done(io, result);
    }
}

impl AsyncStore for Queued {
    fn submit(&self, io: Io, done: IoDone) {
        self.waiting.lock().unwrap().push((io, done));
    }
}

impl Store for Queued {
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
        self.inner.flush()
    }
    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.unmap(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.inner.write_zeroes(offset, len)
    }
    fn kind(&self) -> &'static str {
        "rbd"
    }
    fn asynchronous(&self) -> Option<&dyn AsyncStore> {
        Some(self)
    }
    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        self.inner.allocation(offset, len)
    }
}

struct Bench {
    store: Arc<Queued>,
    running: Running,
    engine: Engine,
    session: usize,
    seen: Vec<Completion>,
}

/// One worker, no I/O threads; LUN 0 queued, LUN 1 plain memory.
fn start() -> Bench {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n\
         [defaults]\nnop_in_interval_s = 0\n\
         [datapath]\nworkers = 1\nio_threads = 0\n\
         [[target]]\nname = \"{TARGET}\"\n\
         [[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n\
         [[target.lun]]\nnumber = 1\nmemory = \"1MiB\"\n"
    );
    let config = Config::parse(&text, None).expect("config");
    let slot: Arc<Mutex<Option<Arc<Queued>>>> = Arc::default();
    let made = Arc::clone(&slot);
    let running = isoe_target::driver::start_with_stores_wrapped(config, &move |_, lun, store| {
        if lun != 0 {
            return store;
        }
        let queued = Arc::new(Queued {
            inner: store,
            waiting: Mutex::default(),
            fail_next: Mutex::default(),
        });
        *made.lock().unwrap() = Some(Arc::clone(&queued));
        queued
    })
    .expect("target starts");
    let store = slot.lock().unwrap().take().expect("LUN 0 wrapped");
    let mut engine = Engine::new();
    let url = format!("iscsi://{}/{TARGET}/0", running.portals()[0]);
    let config = SessionConfig::from_url(&IscsiUrl::parse(&url).expect("url"));
    let session = engine.login(config).expect("login");
    Bench {
        store,
        running,
        engine,
        session,
        seen: Vec::new(),
    }
}

impl Bench {
    fn wait_for(&mut self, token: u64, within: Duration) -> Option<Completion> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(index) = self.seen.iter().position(|c| c.token == token) {
                return Some(self.seen.remove(index));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.engine
                .poll(&mut self.seen, left.min(Duration::from_millis(20)))
                .expect("poll");
        }
    }

    fn answered(&mut self, token: u64) -> Completion {
        self.wait_for(token, PATIENCE)
            .unwrap_or_else(|| panic!("token {token} never answered"))
    }

    /// Polls until `count` requests wait in the store.
    fn until_waiting(&mut self, count: usize) {
        let deadline = Instant::now() + PATIENCE;
        while self.store.waiting().len() < count {
            assert!(
                Instant::now() < deadline,
                "requests never reached the store"
            );
            self.engine
                .poll(&mut self.seen, Duration::from_millis(10))
                .expect("poll");
        }
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed ^ (i as u8).wrapping_mul(31))
        .collect()
}

#[test]
fn requests_end_out_of_order_while_the_worker_serves_others() {
    let mut t = start();
    let (a, b) = (pattern(1, 4096), pattern(2, 4096));
    let s = t.session;
    t.engine
        .submit(
            s,
            Command::write(0, &cdb::write16(0, 8, false), a.clone()),
            1,
        )
        .unwrap();
    t.engine
        .submit(
            s,
            Command::write(0, &cdb::write16(8, 8, true), b.clone()),
            2,
        )
        .unwrap();
    t.until_waiting(2);
    assert_eq!(
        t.store.waiting(),
        vec![
            IoKind::Write {
                offset: 0,
                fua: false
            },
            IoKind::Write {
                offset: 4096,
                fua: true
            }
        ]
    );
    // The one worker answers other commands, on this connection, meanwhile.
    t.engine
        .submit(s, Command::new(1, &cdb::test_unit_ready()), 3)
        .unwrap();
    t.engine
        .submit(s, Command::read(1, &cdb::read16(0, 8), 4096), 4)
        .unwrap();
    for token in [3, 4] {
        t.answered(token).good().unwrap();
    }
    assert!(
        t.seen.iter().all(|c| c.token > 2),
        "no write answered before its store call ended"
    );
    // The second write ends first, and is answered first.
    t.store.release(1);
    t.answered(2).good().unwrap();
    assert_eq!(t.wait_for(1, QUIET).map(|c| c.token), None);
    t.store.release(0);
    t.answered(1).good().unwrap();

    t.engine
        .submit(s, Command::read(0, &cdb::read16(0, 8), 4096), 5)
        .unwrap();
    t.engine
        .submit(s, Command::read(0, &cdb::read16(8, 8), 4096), 6)
        .unwrap();
    t.engine
        .submit(s, Command::new(0, &cdb::synchronize_cache10()), 7)
        .unwrap();
    t.until_waiting(3);
    assert_eq!(t.store.waiting()[2], IoKind::Flush);
    for index in [2, 1, 0] {
        t.store.release(index);
    }
    let (second, first) = (t.answered(6), t.answered(5));
    first.good().unwrap();
    second.good().unwrap();
    assert!(first.buffer == a, "read 1 carries write 1's data");
    assert!(second.buffer == b, "read 2 carries write 2's data");
    t.answered(7).good().unwrap();
    t.running.shutdown().unwrap();
}

#[test]
fn a_failed_request_gives_the_sense_of_a_medium_error() {
    let mut t = start();
    let s = t.session;
    t.engine
        .submit(
            s,
            Command::write(0, &cdb::write16(0, 8, false), pattern(3, 4096)),
            1,
        )
        .unwrap();
    t.engine
        .submit(s, Command::read(0, &cdb::read16(0, 8), 4096), 2)
        .unwrap();
    t.until_waiting(2);
    for token in [1, 2] {
        *t.store.fail_next.lock().unwrap() = true;
        t.store.release(0);
        let failed = t.answered(token);
        let Outcome::Scsi(status) = failed.outcome else {
            panic!("token {token}: {:?}", failed.outcome);
        };
        assert!(!status.is_good(), "token {token} succeeded");
        let (key, asc, _) = status.sense_key().expect("sense");
        assert_eq!(key, 0x03, "MEDIUM ERROR");
        let want = if token == 1 { 0x0c } else { 0x11 };
        assert_eq!(asc, want, "WRITE ERROR, UNRECOVERED READ ERROR");
    }
    t.running.shutdown().unwrap();
}

#[test]
fn ending_a_task_waits_for_its_request() {
    let mut t = start();
    let s = t.session;
    t.engine
        .submit(
            s,
            Command::write(0, &cdb::write16(0, 8, false), pattern(4, 4096)),
            1,
        )
        .unwrap();
    t.until_waiting(1);
    t.engine
        .task_management(s, TaskManagement::AbortTask { lun: 0, token: 1 }, 9)
        .unwrap();
    assert!(
        t.wait_for(9, QUIET).is_none(),
        "ABORT TASK answered while the write it ends is under way"
    );
    t.store.release(0);
    let answer = t.answered(9);
    assert_eq!(
        answer.outcome,
        Outcome::TaskManagement(tmf::TmfResponse::Complete)
    );
    assert_eq!(t.answered(1).outcome, Outcome::Failed(TaskError::Aborted));
    t.running.shutdown().unwrap();
}

/// PERSISTENT RESERVE OUT with a 24-byte parameter list.
fn prout(action: u8, kind: u8, key: u64, action_key: u64) -> Command {
    let cdb = [0x5f, action, kind, 0, 0, 0, 0, 0, 24, 0];
    let mut parameters = vec![0u8; 24];
    parameters[0..8].copy_from_slice(&key.to_be_bytes());
    parameters[8..16].copy_from_slice(&action_key.to_be_bytes());
    Command::write(0, &cdb, parameters)
}

#[test]
fn preempt_and_abort_ends_the_preempted_write_before_it_completes() {
    const REGISTER: u8 = 0;
    const RESERVE: u8 = 1;
    const PREEMPT_AND_ABORT: u8 = 5;
    const WRITE_EXCLUSIVE: u8 = 1;
    let mut t = start();
    let holder = t.session;
    // A second initiator, the preempting one.
    let url = format!("iscsi://{}/{TARGET}/0", t.running.portals()[0]);
    let mut config = SessionConfig::from_url(&IscsiUrl::parse(&url).expect("url"));
    config.initiator_name = "iqn.2026-11.io.isoe:preempter".into();
    let preempter = t.engine.login(config).expect("second login");
    // The first login's unit attention (power on) goes to a TUR each.
    for (token, session) in [(20, holder), (21, preempter)] {
        t.engine
            .submit(session, Command::new(0, &cdb::test_unit_ready()), token)
            .unwrap();
        let _ = t.answered(token);
    }
    for (token, session, key) in [(22, holder, 0xb), (23, preempter, 0xa)] {
        t.engine
            .submit(session, prout(REGISTER, 0, 0, key), token)
            .unwrap();
        t.answered(token).good().unwrap();
    }
    t.engine
        .submit(holder, prout(RESERVE, WRITE_EXCLUSIVE, 0xb, 0), 24)
        .unwrap();
    t.answered(24).good().unwrap();

    // The holder's write is under way in the store when it is preempted.
    t.engine
        .submit(
            holder,
            Command::write(0, &cdb::write16(0, 8, false), pattern(5, 4096)),
            1,
        )
        .unwrap();
    t.until_waiting(1);
    t.engine
        .submit(
            preempter,
            prout(PREEMPT_AND_ABORT, WRITE_EXCLUSIVE, 0xa, 0xb),
            2,
        )
        .unwrap();
    assert!(
        t.wait_for(2, QUIET).is_none(),
        "PREEMPT AND ABORT answered while the write it ends is under way"
    );
    t.store.release(0);
    t.answered(2).good().unwrap();
    assert!(
        t.wait_for(1, QUIET).is_none(),
        "the aborted write got a response"
    );
    // The holder hears REGISTRATIONS PREEMPTED, then conflicts.
    t.engine
        .submit(holder, Command::new(0, &cdb::test_unit_ready()), 3)
        .unwrap();
    let Outcome::Scsi(status) = t.answered(3).outcome else {
        panic!("TEST UNIT READY has a status");
    };
    assert_eq!(
        status.sense_key(),
        Some((0x06, 0x2a, 0x05)),
        "REGISTRATIONS PREEMPTED"
    );
    t.running.shutdown().unwrap();
}
