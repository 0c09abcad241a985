//! A seeded simulation of the target's core: sessions of one to three
//! connections (MC/S) drive the real connections in virtual time through
//! the pair of `pair/harness.rs`, with random reads and writes on two
//! LUNs, CmdSN gaps (one connection's deliveries held while the others
//! go on) and their fills, every task management function on any
//! connection, store work held back and released, the clock moved, and a
//! session that loses every connection at once and logs in again
//! (session reinstatement; the commands it had sent go again), one that
//! loses one connection while its others go on and is then reinstated, a session
//! that logs out and in again, and reloads while commands run (a LUN added or removed, a unit replaced
//! over the same medium). After every step it checks what an initiator must be able to trust:
//!
//! - every task ends exactly once, with a status or aborted by a function
//!   whose answer said so, and none is left hanging once the holds end;
//! - a write aborted by a function never reaches the medium after the
//!   initiator took in the function's answer, nor does a write answered
//!   GOOD after its answer (the store's writes are watched as they happen,
//!   on one clock with the initiator's intake);
//! - a block holds only data written to it, and a read returns, for each
//!   block, what the medium held at some moment while the read was out;
//! - each unit attention (a reset's, a changed LUN inventory's, a
//!   replaced unit's) reaches each session at most once per event;
//! - at every step, the write budget and the responses not yet sent are
//!   within their bounds; at rest, every bound's count is back to nothing
//!   (the write budget, the unsent responses, the store work);
//! - the initiator's side never finds the target's PDUs out of order
//!   (the pair checks StatSN and ExpCmdSN on every PDU) or unknown.
//!
//! A seed fixes everything, so a failure replays exactly: the failing
//! test prints the one line that reruns its seed with the step trace.
//! `cargo test` runs [`SEEDS_SHORT`] seeds; `ISOE_SIM_SEEDS=N` runs N
//! (the ignored `simulation_long` runs 10,000 unless told otherwise);
//! `ISOE_SIM_SEED=S` runs seed S alone and prints its steps; with
//! `ISOE_SIM_DEBUG=1` also every PDU the initiators send, and at the end
//! each session's next CmdSN and tasks, and each link's last PDUs.

#[allow(dead_code)]
#[path = "pair/harness.rs"]
mod harness;

use harness::{session_config, Pair, BLOCK, TARGET};
use isoe_initiator::{cdb, Command, Completion, Outcome, TaskError, TaskManagement};
use isoe_store::{Store, StoreError};
use isoe_target::{Config, Server};
use isoe_wire::negotiate::LocalParams;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Seeds a plain `cargo test` runs.
const SEEDS_SHORT: u64 = 150;
/// Steps of one seed.
const STEPS: usize = 120;
/// LUNs of the target, and the blocks of each the commands touch.
const LUNS: u16 = 2;
const BLOCKS: u64 = 48;
/// What one connection may hold unsent past the process's bound: one
/// response that carries no Data-In (a status, an R2T, a reject), or the
/// headers of its Data-In.
const RESPONSE_BOUND: usize = 64 << 10;
/// The process's response bound, small enough that reads held in the
/// store reach it (a few dozen of at most 4 blocks): the Data-In budget
/// then pauses connections' input. Below what a configuration may set
/// (1 MiB), so set on the parsed configuration.
const RESPONSE_BUFFER: usize = 8 << 10;
/// The CmdSN window the target gives a session, which bounds the store
/// work of its commands.
const WINDOW: usize = isoe_target::session::COMMAND_WINDOW as usize;

// ---- the watched store ---------------------------------------------------

/// One block's write as the store saw it: when (on the pair's clock), where
/// and which write's data (the id each block of a write starts with).
#[derive(Debug, Clone, Copy)]
struct Landing {
    at: u64,
    lun: u16,
    lba: u64,
    id: u32,
}

/// A store that reports each block written to it, as it happens, and
/// fails the reads and writes the simulation asks it to.
#[derive(Debug)]
struct Watched {
    inner: Arc<dyn Store>,
    lun: u16,
    clock: Arc<AtomicU64>,
    landings: Arc<Mutex<Vec<Landing>>>,
    /// How many of the next reads and writes (of every LUN) fail with EIO.
    faults: Arc<AtomicU64>,
}

impl Watched {
    /// EIO, when a fault is due.
    fn fault(&self, op: &'static str, offset: u64) -> Result<(), StoreError> {
        let due = self
            .faults
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if due {
            // EIO, as the kernel gives it.
            let eio = std::io::Error::from_raw_os_error(5);
            return Err(StoreError::io(op, offset, eio));
        }
        Ok(())
    }

    fn note(&self, offset: u64, buf: &[u8]) {
        let mut landings = self.landings.lock().unwrap();
        for (i, block) in buf.chunks(BLOCK).enumerate() {
            let at = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
            landings.push(Landing {
                at,
                lun: self.lun,
                lba: offset / BLOCK as u64 + i as u64,
                id: u32::from_le_bytes(block[..4].try_into().unwrap()),
            });
        }
    }
}

impl Store for Watched {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        if self.lun == LUNS - 1 {
            // The last LUN's reads wait, as a file's not in the page cache:
            // they go to the I/O threads, where the pair can hold them.
            if let Some(refused) = isoe_store::refuse_to_wait("pread") {
                return Err(refused);
            }
        }
        self.fault("pread", offset)?;
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.fault("pwrite", offset)?;
        self.note(offset, buf);
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }
    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.note(offset, &vec![0; len as usize]);
        self.inner.unmap(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.note(offset, &vec![0; len as usize]);
        self.inner.write_zeroes(offset, len)
    }
    fn kind(&self) -> &'static str {
        "watched"
    }
    /// Its work goes to the I/O threads, where the pair can hold it.
    fn may_block(&self) -> bool {
        true
    }
}

/// What the watched stores share with the simulation.
struct Watch {
    clock: Arc<AtomicU64>,
    landings: Arc<Mutex<Vec<Landing>>>,
    faults: Arc<AtomicU64>,
}

/// The target: `LUNS` memory LUNs, each watched, their work handed out.
fn server(watch: &Watch) -> Arc<Server> {
    let mut text = format!(
        "portals = [\"127.0.0.1:0\"]\n[datapath]\nio_threads = 2\n[defaults]\n\
         nop_in_interval_s = 0\n[[target]]\nname = \"{TARGET}\"\n"
    );
    for lun in 0..LUNS {
        text += &format!("[[target.lun]]\nnumber = {lun}\nmemory = \"1MiB\"\n");
    }
    let mut config = Config::parse(&text, None).expect("config");
    config.limits.response_buffer = RESPONSE_BUFFER;
    let server = Arc::new(Server::new(config).expect("server"));
    let target = server.target(TARGET).expect("the target");
    target.replace_luns(|table| {
        table
            .entries()
            .iter()
            .map(|(n, lu)| {
                let store = Arc::new(Watched {
                    inner: Arc::clone(lu.store()),
                    lun: *n,
                    clock: Arc::clone(&watch.clock),
                    landings: Arc::clone(&watch.landings),
                    faults: Arc::clone(&watch.faults),
                });
                let unit = isoe_scsi::LogicalUnit::new(store, lu.config().clone());
                (*n, Arc::new(unit))
            })
            .collect()
    });
    server
}

// ---- the model -------------------------------------------------------------

/// What the simulation sent and must see answered.
#[derive(Debug, Clone)]
enum Sent {
    Read {
        session: usize,
        lun: u16,
        lba: u64,
        blocks: u64,
        /// The clock when it was submitted.
        at: u64,
    },
    Write {
        session: usize,
        id: u32,
    },
    Function {
        session: usize,
        what: TaskManagement,
    },
}

/// A write's place, by its id.
#[derive(Debug, Clone, Copy)]
struct WriteInfo {
    lun: u16,
    lba: u64,
    blocks: u64,
}

/// The block of write `id` at `lba`: the id, the LBA, then bytes of both.
fn block_of(id: u32, lba: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[..4].copy_from_slice(&id.to_le_bytes());
    b[4..12].copy_from_slice(&lba.to_le_bytes());
    for (i, x) in b[12..].iter_mut().enumerate() {
        *x = (id as usize * 31 + lba as usize * 7 + i) as u8;
    }
    b
}

struct Sim {
    rng: StdRng,
    pair: Pair,
    sessions: Vec<usize>,
    /// Connections of each session.
    connections: Vec<usize>,
    /// How each session logs in (again, to reinstate it).
    configs: Vec<isoe_initiator::SessionConfig>,
    landings: Arc<Mutex<Vec<Landing>>>,
    faults: Arc<AtomicU64>,
    /// Every landing so far, by (LUN, LBA): (clock, id), in order.
    history: HashMap<(u16, u64), Vec<(u64, u32)>>,
    writes: HashMap<u32, WriteInfo>,
    /// Writes that must not land after the clock given: aborted, or
    /// answered with a status other than GOOD.
    settled: HashMap<u32, u64>,
    /// Writes answered GOOD, with the clock then.
    good: HashMap<u32, u64>,
    out: HashMap<u64, Sent>,
    /// Unit attentions each (session, LUN) may still be given, by their
    /// additional sense code and qualifier: one per reset, per change of
    /// the LUN inventory, per unit replaced.
    attentions: HashMap<(usize, u16, u8, u8), u32>,
    /// Tasks another session's reset may have ended without a word to
    /// this one (SAM-5 5.6: with TAS 0 they get no status; the
    /// initiator learns of it from the unit attention).
    orphans: std::collections::HashSet<u64>,
    next_id: u32,
    /// Steps after which some connection's input was paused on its
    /// output (the Data-In budget): the run reached the bound.
    paused_steps: u64,
    trace: Option<Vec<String>>,
}

impl Sim {
    fn new(seed: u64, trace: bool) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let watch = Watch {
            clock: Arc::new(AtomicU64::new(0)),
            landings: Arc::new(Mutex::new(Vec::new())),
            faults: Arc::new(AtomicU64::new(0)),
        };
        let mut pair = Pair::new(server(&watch));
        pair.clock = Arc::clone(&watch.clock);
        pair.print_to_target = trace && debugging();
        let count = rng.random_range(1..=3usize);
        let mut sessions = Vec::new();
        let mut connections = Vec::new();
        let mut configs = Vec::new();
        for i in 0..count {
            let conns = rng.random_range(1..=3u16);
            let params = LocalParams {
                max_connections: 4,
                immediate_data: rng.random_bool(0.5),
                initial_r2t: rng.random_bool(0.5),
                max_burst_length: 4096,
                first_burst_length: 2048,
                ..LocalParams::default()
            };
            let config = session_config(params, conns, i as u8 + 1);
            let s = pair.login(&config);
            pair.session(s).set_run_slack(rng.random_range(0..3));
            sessions.push(s);
            connections.push(conns as usize);
            configs.push(config);
        }
        Sim {
            rng,
            pair,
            sessions,
            connections,
            configs,
            landings: watch.landings,
            faults: watch.faults,
            history: HashMap::new(),
            writes: HashMap::new(),
            settled: HashMap::new(),
            good: HashMap::new(),
            out: HashMap::new(),
            attentions: HashMap::new(),
            orphans: Default::default(),
            next_id: 1,
            paused_steps: 0,
            trace: trace.then(Vec::new),
        }
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(trace) = &mut self.trace {
            trace.push(line());
        }
    }

    fn now(&self) -> u64 {
        self.pair.clock.load(Ordering::SeqCst)
    }

    // ---- steps -------------------------------------------------------------

    /// One random step, then everything runs until quiet and is checked.
    fn step(&mut self) -> Result<(), String> {
        match self.rng.random_range(0..100) {
            0..40 => self.burst(),
            40..52 => self.toggle_hold(),
            52..62 => self.function(),
            62..70 => {
                let hold = !self.pair.hold_work;
                self.pair.hold_work = hold;
                self.note(|| format!("hold work: {hold}"));
            }
            70..78 => {
                self.note(|| "release work".into());
                self.pair.release_work();
            }
            78..84 => {
                self.note(|| "tick".into());
                self.pair.advance(harness::TICK);
            }
            84..88 => {
                let n = self.rng.random_range(1..=3);
                self.note(|| format!("the next {n} reads or writes fail"));
                self.faults.store(n, Ordering::SeqCst);
            }
            90..92 => self.reload(),
            92..94 => {
                let s = self.rng.random_range(0..self.sessions.len());
                // A Logout behind a held delivery gets no answer: the
                // initiator gives up on the connections, as on a timeout.
                let outcome = self.pair.log_out(self.sessions[s]);
                self.note(|| format!("session {s} logs out: {outcome:?}; logs in again"));
                if !matches!(
                    outcome,
                    None | Some(Outcome::Logout(isoe_initiator::LogoutResponseCode::Closed))
                ) {
                    return Err(format!("session {s}'s Logout: {outcome:?}"));
                }
                let config = self.configs[s].clone();
                self.pair.reinstate(self.sessions[s], &config);
            }
            88..90 => {
                let s = self.rng.random_range(0..self.sessions.len());
                self.note(|| format!("session {s} loses its connections and is reinstated"));
                let config = self.configs[s].clone();
                self.pair.reinstate(self.sessions[s], &config);
            }
            94..96 => {
                // One connection of an MC/S session is lost while the
                // others go on; the initiator then reinstates the session
                // (ErrorRecoveryLevel 0 recovers a session, not a connection).
                let s = self.rng.random_range(0..self.sessions.len());
                let conns = self.pair.session(self.sessions[s]).conns.len();
                if conns > 1 {
                    let c = self.rng.random_range(0..conns);
                    self.note(|| format!("session {s} loses connection {c}; the others go on"));
                    self.pair.lose_connection(self.sessions[s], c);
                    self.mark_orphans();
                    self.pair.run();
                    self.check()?;
                    self.note(|| format!("session {s} is reinstated"));
                    let config = self.configs[s].clone();
                    self.pair.reinstate(self.sessions[s], &config);
                }
            }
            _ => {}
        }
        self.mark_orphans();
        self.pair.run();
        self.check()
    }

    /// A run of commands on one session.
    fn burst(&mut self) {
        let s = self.rng.random_range(0..self.sessions.len());
        let n = self.rng.random_range(1..=24);
        for _ in 0..n {
            let lun = self.rng.random_range(0..LUNS);
            let blocks = self.rng.random_range(1..=4u64);
            let lba = self.rng.random_range(0..=BLOCKS - blocks);
            // Some go for immediate delivery: taken as they come, out of
            // CmdSN order, their CmdSN the next command's.
            let immediate = self.rng.random_bool(0.1);
            let token = if self.rng.random_bool(0.5) {
                let id = self.next_id;
                self.next_id += 1;
                let data: Vec<u8> = (lba..lba + blocks).flat_map(|b| block_of(id, b)).collect();
                let cdb = cdb::write16(lba, blocks as u32, false);
                self.writes.insert(id, WriteInfo { lun, lba, blocks });
                let mut command = Command::write(lun, &cdb, data);
                command.immediate = immediate;
                let token = self.pair.submit(self.sessions[s], command);
                self.out.insert(token, Sent::Write { session: s, id });
                token
            } else {
                let cdb = cdb::read16(lba, blocks as u32);
                let mut command = Command::read(lun, &cdb, (blocks as usize * BLOCK) as u32);
                command.immediate = immediate;
                let token = self.pair.submit(self.sessions[s], command);
                let at = self.now();
                let read = Sent::Read {
                    session: s,
                    lun,
                    lba,
                    blocks,
                    at,
                };
                self.out.insert(token, read);
                token
            };
            let sent = self.out[&token].clone();
            let place = (lun, lba, blocks);
            self.note(|| {
                format!(
                    "submit {token}: {sent:?} (LUN, LBA, blocks) {place:?} immediate {immediate}"
                )
            });
        }
    }

    /// Holds (or lets go) one connection's deliveries to the target: the
    /// commands behind it wait for a CmdSN that does not come.
    fn toggle_hold(&mut self) {
        let s = self.rng.random_range(0..self.sessions.len());
        let c = self.rng.random_range(0..self.connections[s]);
        let link = self.pair.link(self.sessions[s], c);
        let hold = !self.pair.held_to_target(link);
        self.note(|| format!("session {s} connection {c}: hold {hold}"));
        self.pair.hold_to_target(link, hold);
    }

    /// A task management function, on any connection of its session.
    fn function(&mut self) {
        let s = self.rng.random_range(0..self.sessions.len());
        let lun = self.rng.random_range(0..LUNS);
        let what = match self.rng.random_range(0..5) {
            0 => match self.victim(s) {
                Some(token) => TaskManagement::AbortTask { lun, token },
                None => return,
            },
            1 => TaskManagement::AbortTaskSet(lun),
            2 => TaskManagement::ClearTaskSet(lun),
            3 => TaskManagement::LogicalUnitReset(lun),
            _ => TaskManagement::TargetWarmReset,
        };
        let on = self.rng.random_range(0..self.connections[s]);
        self.expect_attention(&what);
        let token = self
            .pair
            .task_management_on(self.sessions[s], what, Some(on));
        self.note(|| format!("function {token}: {what:?} on session {s} connection {on}"));
        self.out.insert(token, Sent::Function { session: s, what });
    }

    /// The tasks out that a reset from another session, sent and not yet
    /// answered, may end without a word: any it reaches on the units it
    /// resets, between its sending and its answer.
    fn mark_orphans(&mut self) {
        let resets: Vec<(usize, TaskManagement)> = self
            .out
            .values()
            .filter_map(|sent| match sent {
                Sent::Function { session, what } => Some((*session, *what)),
                _ => None,
            })
            .filter(|(_, what)| {
                matches!(
                    what,
                    TaskManagement::LogicalUnitReset(_) | TaskManagement::TargetWarmReset
                )
            })
            .collect();
        for (from, what) in resets {
            for (token, sent) in &self.out {
                let (session, lun) = match sent {
                    Sent::Read { session, lun, .. } => (*session, *lun),
                    Sent::Write { session, id } => (*session, self.writes[id].lun),
                    Sent::Function { .. } => continue,
                };
                let covered = match what {
                    TaskManagement::LogicalUnitReset(l) => l == lun,
                    _ => true,
                };
                if session != from && covered {
                    self.orphans.insert(*token);
                }
            }
        }
    }

    /// A command of session `s` still out, to abort.
    fn victim(&mut self, s: usize) -> Option<u64> {
        let mut mine: Vec<u64> = self
            .out
            .iter()
            .filter(|(_, sent)| match sent {
                Sent::Read { session, .. } | Sent::Write { session, .. } => *session == s,
                Sent::Function { .. } => false,
            })
            .map(|(t, _)| *t)
            .collect();
        mine.sort_unstable();
        (!mine.is_empty()).then(|| mine[self.rng.random_range(0..mine.len())])
    }

    /// A reset may give each session one unit attention per LUN it resets.
    fn expect_attention(&mut self, what: &TaskManagement) {
        let luns: Vec<u16> = match what {
            TaskManagement::LogicalUnitReset(lun) => vec![*lun],
            TaskManagement::TargetWarmReset => (0..LUNS).collect(),
            _ => return,
        };
        self.allow_attention(&luns, (0x29, 0x03));
    }

    /// Each session may hear `code` (ASC, ASCQ) once more on each of `luns`.
    fn allow_attention(&mut self, luns: &[u16], code: (u8, u8)) {
        for s in 0..self.sessions.len() {
            for &lun in luns {
                *self.attentions.entry((s, lun, code.0, code.1)).or_default() += 1;
            }
        }
    }

    /// A reload while commands run: LUN 2 (which no command addresses)
    /// comes or goes, and LUNs 0 and 1 tell every session REPORTED LUNS
    /// DATA HAS CHANGED; or LUN 0 or 1 is replaced by a new unit over the
    /// same medium (its keys changed), which tells every session INQUIRY
    /// DATA HAS CHANGED.
    fn reload(&mut self) {
        let server = Arc::clone(&self.pair.server);
        let target = server.target(TARGET).expect("the target");
        if self.rng.random_bool(0.5) {
            let present = target.luns().lun(2).is_some();
            self.note(|| {
                format!(
                    "reload: LUN 2 {}",
                    if present { "removed" } else { "added" }
                )
            });
            if present {
                server.remove_lun(&target, 2);
            } else {
                let lu = Arc::clone(target.luns().lun(0).expect("LUN 0"));
                let store = Arc::new(isoe_store::MemoryStore::new(1 << 20));
                let config = isoe_scsi::LunConfig {
                    lun_number: 2,
                    ..lu.config().clone()
                };
                server.add_lun(
                    &target,
                    2,
                    Arc::new(isoe_scsi::LogicalUnit::new(store, config)),
                );
            }
            self.allow_attention(&[0, 1], (0x3f, 0x0e));
        } else {
            let lun = self.rng.random_range(0..LUNS);
            self.note(|| format!("reload: LUN {lun} replaced"));
            let old = Arc::clone(target.luns().lun(lun).expect("the LUN"));
            let lu = isoe_scsi::LogicalUnit::new(Arc::clone(old.store()), old.config().clone());
            let changed = [isoe_scsi::Sense::inquiry_data_changed()];
            server.replace_lun(&target, lun, Arc::new(lu), &changed);
            self.allow_attention(&[lun], (0x3f, 0x03));
        }
    }

    // ---- checks --------------------------------------------------------------

    fn check(&mut self) -> Result<(), String> {
        for link in 0..self.pair.links() {
            if self.pair.abandoned(link) {
                continue;
            }
            if let Some(why) = self.pair.failure(link) {
                return Err(format!("the initiator failed link {link}: {why}"));
            }
            if let Some(at) = self.pair.closed_at(link) {
                return Err(format!("the target closed link {link} at {at:?}"));
            }
        }
        // Landings first into the history (a read judges them by time),
        // then the answers, then the landings against the answers: one
        // that came after its write settled in this very step is caught.
        let landings = self.take_landings();
        let done: Vec<u64> = self
            .out
            .keys()
            .copied()
            .filter(|t| self.pair.completed_at(*t).is_some())
            .collect();
        for token in done {
            let sent = self.out.remove(&token).expect("sent");
            let completion = self
                .pair
                .take(token)
                .ok_or("a stamp without a completion")?;
            let at = self.pair.completed_at(token).expect("stamped");
            self.note(|| format!("done {token} at {at}: {:?}", completion.outcome));
            let good = matches!(&completion.outcome, Outcome::Scsi(s) if s.is_good());
            if self.orphans.contains(&token) && !good {
                // Ended by another session's reset: any end will do.
                continue;
            }
            self.check_completion(&sent, &completion, at)
                .map_err(|e| format!("task {token} ({sent:?}): {e}"))?;
        }
        self.check_landings(&landings)?;
        self.check_bounds()
    }

    /// What the target holds is within its stated bounds at every step
    /// (docs/ARCHITECTURE.md, "What a peer can make the target hold").
    fn check_bounds(&mut self) -> Result<(), String> {
        let server = &self.pair.server;
        let (held, limit) = (server.write_budget.held(), server.write_budget.limit());
        if held > limit {
            return Err(format!(
                "the write budget holds {held} bytes, past its {limit}"
            ));
        }
        let (held, limit) = (server.data_in_budget.held(), RESPONSE_BUFFER);
        if held > limit {
            return Err(format!(
                "the Data-In budget holds {held} bytes, past its {limit}"
            ));
        }
        if (0..self.pair.links()).any(|link| self.pair.paused(link)) {
            self.paused_steps += 1;
        }
        let unsent = server.output_bytes.load(Ordering::SeqCst);
        let bound = RESPONSE_BUFFER + self.pair.links() * RESPONSE_BOUND;
        if unsent > bound {
            return Err(format!("{unsent} bytes of responses unsent, past {bound}"));
        }
        for (s, session) in server.sessions().iter().enumerate() {
            let work = session.store_work();
            if work > WINDOW {
                return Err(format!(
                    "session {s} has {work} pieces of store work out, past the window ({WINDOW})"
                ));
            }
        }
        Ok(())
    }

    /// The store's writes since the last look, into the history.
    fn take_landings(&mut self) -> Vec<Landing> {
        let landings = std::mem::take(&mut *self.landings.lock().unwrap());
        for l in &landings {
            self.note(|| format!("landing {l:?}"));
            self.history
                .entry((l.lun, l.lba))
                .or_default()
                .push((l.at, l.id));
        }
        landings
    }

    /// Each block written holds a write's data for that very block; no
    /// settled write lands after it settled, and none answered GOOD lands
    /// again after its answer (a copy of it left behind, say, by a lost
    /// connection, would overwrite what came after).
    fn check_landings(&self, landings: &[Landing]) -> Result<(), String> {
        for l in landings.iter().filter(|l| l.id != 0) {
            let w = self
                .writes
                .get(&l.id)
                .ok_or_else(|| format!("{l:?}: no write has this id"))?;
            if w.lun != l.lun || l.lba < w.lba || l.lba >= w.lba + w.blocks {
                return Err(format!("{l:?}: write {} was for {w:?}", l.id));
            }
            if let Some(&settled) = self.settled.get(&l.id) {
                if l.at > settled {
                    return Err(format!(
                        "{l:?}: write {} landed after it was aborted or failed (at {settled})",
                        l.id
                    ));
                }
            }
            if let Some(&good) = self.good.get(&l.id) {
                if l.at > good {
                    return Err(format!(
                        "{l:?}: write {} landed after its GOOD answer (at {good})",
                        l.id
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_completion(&mut self, sent: &Sent, done: &Completion, at: u64) -> Result<(), String> {
        match (sent, &done.outcome) {
            (Sent::Function { .. }, Outcome::TaskManagement(_)) => Ok(()),
            // Its connection was lost before the answer came.
            (Sent::Function { .. }, Outcome::Failed(TaskError::SessionFailed(_))) => Ok(()),
            (Sent::Write { id, .. }, Outcome::Scsi(status)) if status.is_good() => {
                self.good.insert(*id, at);
                self.check_written(*id, at)
            }
            (Sent::Read { .. }, Outcome::Scsi(status)) if status.is_good() => {
                self.check_read(sent, &done.buffer, at)
            }
            (_, Outcome::Scsi(status)) => {
                if let Sent::Write { id, .. } = sent {
                    self.settled.insert(*id, at);
                }
                self.check_status(sent, status)
            }
            (Sent::Write { id, .. }, Outcome::Failed(TaskError::Aborted)) => {
                self.settled.insert(*id, at);
                Ok(())
            }
            (Sent::Read { .. }, Outcome::Failed(TaskError::Aborted)) => Ok(()),
            (_, outcome) => Err(format!("ended {outcome:?}")),
        }
    }

    /// A write answered GOOD: every block of it landed before the answer.
    fn check_written(&self, id: u32, at: u64) -> Result<(), String> {
        let w = self.writes[&id];
        for lba in w.lba..w.lba + w.blocks {
            let landed = self
                .history
                .get(&(w.lun, lba))
                .is_some_and(|h| h.iter().any(|&(when, i)| i == id && when <= at));
            if !landed {
                return Err(format!("GOOD, but block {lba} never landed"));
            }
        }
        Ok(())
    }

    /// A read answered GOOD: each block is what the medium held at some
    /// moment between the read's submission and its answer.
    fn check_read(&self, sent: &Sent, data: &[u8], at: u64) -> Result<(), String> {
        let Sent::Read {
            lun,
            lba,
            blocks,
            at: from,
            ..
        } = *sent
        else {
            unreachable!()
        };
        for (i, got) in data.chunks(BLOCK).take(blocks as usize).enumerate() {
            let b = lba + i as u64;
            let id = u32::from_le_bytes(got[..4].try_into().unwrap());
            let history = self.history.get(&(lun, b)).map_or(&[][..], |h| &h[..]);
            let before = history
                .iter()
                .rev()
                .find(|(when, _)| *when <= from)
                .map_or(0, |h| h.1);
            let during = history
                .iter()
                .any(|&(when, i)| when > from && when <= at && i == id);
            if id != before && !during {
                return Err(format!("block {b} read as write {id}, held {before}"));
            }
            let expected = if id == 0 {
                vec![0; BLOCK]
            } else {
                block_of(id, b)
            };
            if got != &expected[..] {
                return Err(format!("block {b} of write {id} came back changed"));
            }
        }
        Ok(())
    }

    /// A status other than GOOD: only a reset's unit attention, given at
    /// most once per reset to each session, or a full task set.
    fn check_status(
        &mut self,
        sent: &Sent,
        status: &isoe_initiator::ScsiStatus,
    ) -> Result<(), String> {
        let (session, lun) = match sent {
            Sent::Read { session, lun, .. } => (*session, *lun),
            Sent::Write { session, id } => (*session, self.writes[id].lun),
            Sent::Function { .. } => return Err(format!("a function got {status:?}")),
        };
        if status.status == 0x28 || status.status == 0x08 {
            return Ok(());
        }
        if status.sense_key().is_some_and(|(key, _, _)| key == 3) {
            // A store fault (EIO): MEDIUM ERROR.
            return Ok(());
        }
        let Some((6, asc, ascq)) = status.sense_key() else {
            return Err(format!(
                "status {:#04x}, sense {:?}",
                status.status,
                status.sense_key()
            ));
        };
        let left = self
            .attentions
            .entry((session, lun, asc, ascq))
            .or_default();
        if *left == 0 {
            return Err(format!(
                "unit attention {asc:02x}/{ascq:02x} given once more than its events came"
            ));
        }
        *left -= 1;
        Ok(())
    }

    /// Every hold let go, every piece of work run, time moved on: nothing
    /// may be left out.
    fn finish(&mut self) -> Result<(), String> {
        for link in 0..self.pair.links() {
            self.pair.hold_to_target(link, false);
        }
        self.pair.hold_work = false;
        self.faults.store(0, Ordering::SeqCst);
        self.pair.release_work();
        self.pair.advance(harness::TICK);
        // A connection paused on Data-In budget that others gave back
        // resumes at its next tick (the budget wakes no one): each tick
        // lets at least one more go.
        let mut ticks = 0;
        while (0..self.pair.links()).any(|link| self.pair.paused(link)) {
            ticks += 1;
            if ticks > 4 * WINDOW {
                return Err(format!(
                    "still paused on the Data-In budget after {ticks} ticks"
                ));
            }
            self.pair.advance(harness::TICK);
        }
        self.check()?;
        self.out.retain(|token, _| !self.orphans.contains(token));
        if let Some((token, sent)) = self.out.iter().min_by_key(|(t, _)| **t) {
            let waiting: Vec<usize> = (0..self.pair.links())
                .filter(|&l| self.pair.waiting(l))
                .collect();
            let mut left: Vec<&u64> = self.out.keys().collect();
            left.sort_unstable();
            return Err(format!(
                "task {token} ({sent:?}) never ended, nor the others of {left:?}; links \
                 waiting behind a CmdSN gap: {waiting:?}"
            ));
        }
        // Every bound's count back to nothing: what each task held was
        // given back however it ended.
        let server = &self.pair.server;
        let held = server.write_budget.held();
        let unsent = server.output_bytes.load(Ordering::SeqCst);
        let work: usize = server.sessions().iter().map(|s| s.store_work()).sum();
        if (held, unsent, work) != (0, 0, 0) {
            return Err(format!(
                "at rest, still held: {held} bytes of the write budget, {unsent} bytes of \
                 responses, {work} pieces of store work"
            ));
        }
        Ok(())
    }
}

/// Runs one seed: Ok, or what broke, at which step.
/// What one seed gave: its outcome, its trace, and the steps after
/// which a connection was paused on the Data-In budget.
fn run_seed(seed: u64, trace: bool) -> (Result<(), String>, Vec<String>, u64) {
    let mut sim = Sim::new(seed, trace);
    let mut result = Ok(());
    for step in 0..STEPS {
        if let Err(e) = sim.step() {
            result = Err(format!("step {step}: {e}"));
            break;
        }
    }
    if result.is_ok() {
        result = sim.finish().map_err(|e| format!("at the end: {e}"));
    }
    if trace && debugging() {
        for s in sim.sessions.clone() {
            let core = sim.pair.session(s);
            println!(
                "DEBUG session {s} cmd_sn {} in flight {}",
                core.cmd_sn(),
                core.tasks_in_flight()
            );
        }
        for link in 0..sim.pair.links() {
            println!(
                "DEBUG link {link} unread {} held {}",
                sim.pair.unread(link),
                sim.pair.held_to_target(link)
            );
            for (t, p) in sim.pair.sent_by_target(link).iter().rev().take(4) {
                println!("DEBUG link {link} {t:?} {p:?}");
            }
        }
    }
    let paused = sim.paused_steps;
    (result, sim.trace.unwrap_or_default(), paused)
}

/// Whether a replay prints the PDUs too (`ISOE_SIM_DEBUG`).
fn debugging() -> bool {
    std::env::var_os("ISOE_SIM_DEBUG").is_some()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a whole number"))
    })
}

/// Runs `count` seeds from `first`; panics at the first that fails, with
/// the line that replays it.
fn run_seeds(first: u64, count: u64) {
    let mut paused_seeds = 0;
    for seed in first..first + count {
        let (result, _, paused) = run_seed(seed, false);
        if let Err(e) = result {
            panic!(
                "seed {seed}: {e}\nreplay: ISOE_SIM_SEED={seed} cargo test -p isoe-target \
                 --test simulation -- --exact simulation --nocapture"
            );
        }
        paused_seeds += u64::from(paused > 0);
    }
    println!("{count} seeds clean; in {paused_seeds} a connection paused on the Data-In budget");
    // The bound is reached, not only stated: with the store's work held,
    // reads out fill the budget and input waits for it.
    assert!(
        count < 50 || paused_seeds > 0,
        "no seed of {count} paused a connection on the Data-In budget"
    );
}

#[test]
fn simulation() {
    if let Some(seed) = env_u64("ISOE_SIM_SEED") {
        let (result, trace, _) = run_seed(seed, true);
        for line in trace {
            println!("{line}");
        }
        if let Err(e) = result {
            panic!("seed {seed}: {e}");
        }
        return;
    }
    run_seeds(0, env_u64("ISOE_SIM_SEEDS").unwrap_or(SEEDS_SHORT));
}

#[test]
#[ignore = "10,000 seeds: run by name, in release"]
fn simulation_long() {
    let first = env_u64("ISOE_SIM_FIRST").unwrap_or(0);
    run_seeds(first, env_u64("ISOE_SIM_SEEDS").unwrap_or(10_000));
}
