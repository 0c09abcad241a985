//! What the target counts, and how it is read without slowing the command
//! path.
//!
//! Each connection counts its own commands, bytes, latencies, errors, R2Ts
//! and task management functions, per LUN, in counters that only its own
//! worker thread writes ([`Counter::add`] is a plain load and store, no
//! locked instruction, no cache line shared with another writer; datapath
//! rule 4). A reader (`isoe admin stats`, the Prometheus listener) sums
//! them: per connection, per session, per LUN of a target. When a
//! connection ends, its counts are folded into the totals of what outlives
//! it (its session, its LUNs) under the lock the readers take, so that no
//! total ever goes down.
//!
//! Logins, refusals and resource use are counted where they happen (the
//! login path, the admission gate), never on the command path.

mod media;
pub mod prometheus;
pub mod snapshot;

pub use media::MediaTotals;

use isoe_sync::MutexExt;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A count written by one thread only, read by any.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the thread that owns the counter calls it: a plain
    /// load and store, which no other writer can interleave with.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// The count now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds of the latency histogram's buckets, in microseconds; a
/// last bucket takes everything above.
pub const LATENCY_BUCKETS_US: [u64; 16] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    1_000_000, 5_000_000, 30_000_000,
];

const BUCKETS: usize = LATENCY_BUCKETS_US.len() + 1;

/// A latency histogram with [`LATENCY_BUCKETS_US`] (not cumulative).
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [Counter; BUCKETS],
    sum_ns: Counter,
}

impl Histogram {
    /// Records one latency (owner thread only).
    #[inline]
    pub fn record(&self, ns: u64) {
        self.record_many(ns, 1);
    }

    /// Records `n` commands that each took `ns` (owner thread only).
    #[inline]
    pub fn record_many(&self, ns: u64, n: u64) {
        let us = ns / 1_000;
        let i = LATENCY_BUCKETS_US.partition_point(|&bound| bound < us);
        self.buckets[i].add(n);
        self.sum_ns.add(ns * n);
    }
}

/// Reads or writes to one LUN through one connection.
#[derive(Debug, Default)]
pub struct OpStats {
    /// Commands completed.
    pub commands: Counter,
    /// Bytes moved (Data-In sent, or Data-Out taken).
    pub bytes: Counter,
    /// From the batch that took the command to the send of its response.
    pub latency: Histogram,
    /// The same time split at the store, for one command in
    /// [`STAGE_SAMPLE_EVERY`].
    pub stages: StageStats,
}

/// Commands per connection for each one whose time is split into stages
/// (a power of two: the test is a mask of the connection's command count).
/// A sampled command costs two clock reads, an entry of its own in the
/// batch's pending latencies and three histogram updates: one in 16 cost
/// 1.2% of a 4 KiB read's target instructions (callgrind), one in 64 with
/// the test 0.55% (reads) and 0.85% (writes), and it still gives a 10,000
/// IOPS LUN about 150 samples a second.
pub const STAGE_SAMPLE_EVERY: u32 = 64;
const _: () = assert!(STAGE_SAMPLE_EVERY.is_power_of_two());

/// A connection also samples the first command of a batch taken this long
/// after its last sample, so that a slow load (an application's few
/// hundred I/Os a second, a short window) still has its stages measured:
/// at most 10 more samples a second on each connection, and none on a
/// connection of more than 640 commands a second, where one in
/// [`STAGE_SAMPLE_EVERY`] already samples that often (so the first
/// commands of batches, which wait less behind others, do not weigh on a
/// busy connection's figures).
pub const STAGE_SAMPLE_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// Where a sampled command's time went, receipt to response.
#[derive(Debug, Default)]
pub struct StageStats {
    /// From the batch that took the command (its last Data-Out, for a
    /// solicited write) to the call of its store: the protocol's receive
    /// side, and the wait for an I/O thread.
    pub receipt_to_store: Histogram,
    /// The store's work: a memory copy, or a file's or an RBD image's I/O.
    pub store: Histogram,
    /// From the store's answer to the send of the response (Data-In and
    /// status): the protocol's send side.
    pub store_to_sent: Histogram,
}

/// UNMAP or WRITE SAME to one LUN through one connection: commands that
/// cover a range of the medium without carrying its data.
#[derive(Debug, Default)]
pub struct RangeStats {
    /// Commands completed.
    pub commands: Counter,
    /// Bytes of the medium the commands that completed GOOD covered
    /// (deallocated, or written with one block's pattern): their blocks
    /// times the LUN's block size, not the parameter list or pattern sent.
    pub bytes: Counter,
}

/// Statuses other than GOOD and CHECK CONDITION that count as errors.
pub const ERROR_STATUSES: [(u8, &str); 3] = [
    (0x18, "reservation_conflict"),
    (0x08, "busy"),
    (0x28, "task_set_full"),
];

/// SPC-5 sense key names, by value, for the `sense_key` label.
pub const SENSE_KEYS: [&str; 16] = [
    "no_sense",
    "recovered_error",
    "not_ready",
    "medium_error",
    "hardware_error",
    "illegal_request",
    "unit_attention",
    "data_protect",
    "blank_check",
    "vendor_specific",
    "copy_aborted",
    "aborted_command",
    "reserved_0c",
    "volume_overflow",
    "miscompare",
    "completed",
];

/// One LUN as one connection used it.
#[derive(Debug, Default)]
pub struct LunStats {
    /// READ and the like.
    pub read: OpStats,
    /// WRITE and the like.
    pub write: OpStats,
    /// UNMAP.
    pub unmap: RangeStats,
    /// WRITE SAME (10, 16).
    pub write_same: RangeStats,
    /// SYNCHRONIZE CACHE (10, 16).
    pub sync_cache: Counter,
    /// Every other command.
    pub other: Counter,
    /// CHECK CONDITION by sense key.
    pub sense: [Counter; 16],
    /// The statuses of [`ERROR_STATUSES`].
    pub status: [Counter; 3],
}

/// Task management function names by function code (RFC 7143 §11.5.1).
pub const TMF_NAMES: [&str; 9] = [
    "unknown",
    "abort_task",
    "abort_task_set",
    "clear_aca",
    "clear_task_set",
    "logical_unit_reset",
    "target_warm_reset",
    "target_cold_reset",
    "task_reassign",
];

/// What one connection counts.
#[derive(Debug, Default)]
pub struct ConnStats {
    luns: Mutex<Vec<(u16, Arc<LunStats>)>>,
    /// R2Ts sent.
    pub r2t: Counter,
    /// Task management requests, by [`TMF_NAMES`].
    pub tmf: [Counter; 9],
    /// PDUs whose header digest did not match.
    pub header_digest_errors: Counter,
    /// PDUs whose data digest did not match.
    pub data_digest_errors: Counter,
    /// Rejects sent.
    pub rejects: Counter,
    /// Commands to a LUN the target does not have: counted here, never
    /// per LUN, so that probes cannot grow the metrics' label set.
    pub commands_no_lun: Counter,
    /// Folded into the totals: readers skip it (see the module doc).
    retired: AtomicBool,
}

impl ConnStats {
    /// The counters of LUN `lun`, made the first time the connection uses
    /// it (the connection keeps its own handle; see [`LunCache`]).
    pub fn lun(&self, lun: u16) -> Arc<LunStats> {
        let mut luns = self.luns.lock_unpoisoned();
        if let Some((_, s)) = luns.iter().find(|(n, _)| *n == lun) {
            return Arc::clone(s);
        }
        let stats = Arc::new(LunStats::default());
        luns.push((lun, Arc::clone(&stats)));
        stats
    }

    fn luns(&self) -> Vec<(u16, Arc<LunStats>)> {
        self.luns.lock_unpoisoned().clone()
    }
}

/// A connection's own handles to its LUN counters: a command finds its
/// LUN's without a lock, and the last LUN's without a search.
#[derive(Debug, Default)]
pub struct LunCache(Vec<(u16, Arc<LunStats>)>, Option<(u16, usize)>);

impl LunCache {
    /// Where the counters of `lun` on `conn` are in this cache (a slot
    /// never moves); None, without making one, for a LUN that `exists`
    /// says the target does not have (asked only of a LUN not cached).
    #[inline]
    pub fn slot(
        &mut self,
        conn: &ConnStats,
        lun: u16,
        exists: impl FnOnce() -> bool,
    ) -> Option<usize> {
        if let Some((last, slot)) = self.1 {
            if last == lun {
                return Some(slot);
            }
        }
        let slot = match self.0.iter().position(|(n, _)| *n == lun) {
            Some(i) => i,
            None if exists() => {
                self.0.push((lun, conn.lun(lun)));
                self.0.len() - 1
            }
            None => return None,
        };
        self.1 = Some((lun, slot));
        Some(slot)
    }

    /// The counters in `slot`.
    #[inline]
    pub fn at(&self, slot: usize) -> &LunStats {
        &self.0[slot].1
    }
}

/// Latencies of commands answered in the batch under way, recorded once
/// its output is sent, with the clock read the worker makes anyway before
/// it waits again (a clock read per command would cost more than the rest
/// of the counting together). Commands of one LUN and kind taken by the
/// same read share an entry.
#[derive(Debug, Default)]
pub struct PendingLatencies(Vec<Pending>, Vec<Sampled>);

#[derive(Debug)]
struct Pending {
    slot: u32,
    op: Op,
    count: u32,
    started: std::time::Instant,
}

/// A command sampled for its stages: kept apart, so that the entries of
/// the others stay as small as they were.
#[derive(Debug)]
struct Sampled {
    slot: u32,
    op: Op,
    started: std::time::Instant,
    /// When its store was called and answered.
    store: (std::time::Instant, std::time::Instant),
}

impl PendingLatencies {
    /// A READ or WRITE counted in `slot` of a [`LunCache`], taken at
    /// `started`; the latencies of other commands are not kept.
    #[inline]
    pub fn push(&mut self, slot: usize, op: Op, started: std::time::Instant) {
        if !matches!(op, Op::Read | Op::Write) {
            return;
        }
        let slot = slot as u32;
        if let Some(last) = self.0.last_mut() {
            if last.slot == slot && last.op == op && last.started == started {
                last.count += 1;
                return;
            }
        }
        self.0.push(Pending {
            slot,
            op,
            count: 1,
            started,
        });
    }

    /// [`PendingLatencies::push`] for a command sampled for its stages:
    /// its store was called at `store.0` and answered at `store.1`.
    pub fn push_sampled(
        &mut self,
        slot: usize,
        op: Op,
        started: std::time::Instant,
        store: (std::time::Instant, std::time::Instant),
    ) {
        if !matches!(op, Op::Read | Op::Write) {
            return;
        }
        self.1.push(Sampled {
            slot: slot as u32,
            op,
            started,
            store,
        });
    }

    /// How many entries wait.
    pub fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_empty()
    }

    /// Records every pending latency as ending at `now`.
    pub fn record(&mut self, cache: &LunCache, now: std::time::Instant) {
        let ns = |from: std::time::Instant, to: std::time::Instant| {
            to.saturating_duration_since(from).as_nanos() as u64
        };
        let op_stats = |slot: u32, op: Op| {
            let stats = cache.at(slot as usize);
            if op == Op::Read {
                &stats.read
            } else {
                &stats.write
            }
        };
        for p in self.0.drain(..) {
            let s = op_stats(p.slot, p.op);
            s.latency
                .record_many(ns(p.started, now), u64::from(p.count));
        }
        for p in self.1.drain(..) {
            let s = op_stats(p.slot, p.op);
            s.latency.record(ns(p.started, now));
            // Clamped in order, so the three stages add up to the latency.
            let (called, answered) = p.store;
            let called = called.clamp(p.started, now);
            let answered = answered.clamp(called, now);
            s.stages.receipt_to_store.record(ns(p.started, called));
            s.stages.store.record(ns(called, answered));
            s.stages.store_to_sent.record(ns(answered, now));
        }
    }
}

/// Which of a LUN's counters a command goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// READ (6, 10, 12, 16).
    Read,
    /// WRITE (6, 10, 12, 16), WRITE AND VERIFY, WRITE ATOMIC, COMPARE AND
    /// WRITE, ORWRITE: the commands that carry data to the medium.
    Write,
    /// UNMAP: what a file system's discard and `fstrim` send.
    Unmap,
    /// WRITE SAME (10, 16), with or without its UNMAP bit.
    WriteSame,
    /// SYNCHRONIZE CACHE (10, 16): a file system's flushes.
    SyncCache,
    /// Everything else.
    Other,
}

impl Op {
    /// The counters of operation code `op`.
    #[inline]
    pub fn of(op: u8) -> Op {
        use isoe_scsi::opcode::*;
        match op {
            READ_6 | READ_10 | READ_12 | READ_16 => Op::Read,
            WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16 | WRITE_AND_VERIFY_10
            | WRITE_AND_VERIFY_12 | WRITE_AND_VERIFY_16 | WRITE_ATOMIC_16 | COMPARE_AND_WRITE
            | ORWRITE_16 => Op::Write,
            UNMAP => Op::Unmap,
            WRITE_SAME_10 | WRITE_SAME_16 => Op::WriteSame,
            SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16 => Op::SyncCache,
            _ => Op::Other,
        }
    }
}

impl LunStats {
    /// Counts one command that ended with `status` (and `sense_key` for
    /// CHECK CONDITION), moving `bytes` (a READ or WRITE's data; for an
    /// UNMAP or WRITE SAME, the bytes of the medium it covers, counted only
    /// if it completed GOOD); its latency comes later ([`PendingLatencies`]).
    #[inline]
    pub fn count(&self, op: Op, bytes: u64, status: u8, sense_key: Option<u8>) {
        match op {
            Op::Read | Op::Write => {
                let s = if op == Op::Read {
                    &self.read
                } else {
                    &self.write
                };
                s.commands.add(1);
                s.bytes.add(bytes);
            }
            Op::Unmap | Op::WriteSame => {
                let s = if op == Op::Unmap {
                    &self.unmap
                } else {
                    &self.write_same
                };
                s.commands.add(1);
                if status == 0 && sense_key.is_none() {
                    s.bytes.add(bytes);
                }
            }
            Op::SyncCache => self.sync_cache.add(1),
            Op::Other => self.other.add(1),
        }
        if let Some(key) = sense_key {
            self.sense[usize::from(key & 0x0f)].add(1);
        } else if status != 0 {
            if let Some(i) = ERROR_STATUSES.iter().position(|(s, _)| *s == status) {
                self.status[i].add(1);
            }
        }
    }
}

/// A name a snapshot counts by (a sense key, a status, a function, a
/// limit): one of the target's constants where it counts, owned where an
/// answer of `isoe admin stats` is read back.
pub type Name = Cow<'static, str>;

/// A snapshot of [`OpStats`], or a sum of them.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpTotals {
    /// Commands completed.
    pub commands: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Per bucket of [`LATENCY_BUCKETS_US`] and one above (not cumulative).
    pub latency_buckets: Vec<u64>,
    /// Sum of latencies, nanoseconds.
    pub latency_sum_ns: u64,
    /// The sampled commands' stages.
    pub stages: StageTotals,
}

/// A snapshot of a [`Histogram`], or a sum of them.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistogramTotals {
    /// Latencies recorded.
    pub count: u64,
    /// Per bucket of [`LATENCY_BUCKETS_US`] and one above (not cumulative).
    pub buckets: Vec<u64>,
    /// Sum, nanoseconds.
    pub sum_ns: u64,
}

/// Adds `counts` bucket by bucket to `into` (made [`BUCKETS`] long).
fn add_buckets(into: &mut Vec<u64>, counts: impl IntoIterator<Item = u64>) {
    into.resize(BUCKETS, 0);
    for (t, b) in into.iter_mut().zip(counts) {
        *t += b;
    }
}

impl HistogramTotals {
    fn add(&mut self, h: &Histogram) {
        add_buckets(&mut self.buckets, h.buckets.iter().map(Counter::get));
        self.count = self.buckets.iter().sum();
        self.sum_ns += h.sum_ns.get();
    }

    fn merge(&mut self, o: &HistogramTotals) {
        add_buckets(&mut self.buckets, o.buckets.iter().copied());
        self.count = self.buckets.iter().sum();
        self.sum_ns += o.sum_ns;
    }

    /// The mean, nanoseconds (0 with nothing recorded).
    pub fn mean_ns(&self) -> u64 {
        self.sum_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// A snapshot of [`StageStats`], or a sum of them.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StageTotals {
    pub receipt_to_store: HistogramTotals,
    pub store: HistogramTotals,
    pub store_to_sent: HistogramTotals,
}

impl StageTotals {
    fn add(&mut self, s: &StageStats) {
        self.receipt_to_store.add(&s.receipt_to_store);
        self.store.add(&s.store);
        self.store_to_sent.add(&s.store_to_sent);
    }

    fn merge(&mut self, o: &StageTotals) {
        self.receipt_to_store.merge(&o.receipt_to_store);
        self.store.merge(&o.store);
        self.store_to_sent.merge(&o.store_to_sent);
    }

    /// The stages by name, in a command's order.
    pub fn named(&self) -> [(&'static str, &HistogramTotals); 3] {
        [
            ("receipt_to_store", &self.receipt_to_store),
            ("store", &self.store),
            ("store_to_sent", &self.store_to_sent),
        ]
    }
}

impl OpTotals {
    fn add(&mut self, s: &OpStats) {
        self.commands += s.commands.get();
        self.bytes += s.bytes.get();
        add_buckets(
            &mut self.latency_buckets,
            s.latency.buckets.iter().map(Counter::get),
        );
        self.latency_sum_ns += s.latency.sum_ns.get();
        self.stages.add(&s.stages);
    }

    fn merge(&mut self, o: &OpTotals) {
        self.commands += o.commands;
        self.bytes += o.bytes;
        add_buckets(&mut self.latency_buckets, o.latency_buckets.iter().copied());
        self.latency_sum_ns += o.latency_sum_ns;
        self.stages.merge(&o.stages);
    }
}

/// A snapshot of [`RangeStats`], or a sum of them.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RangeTotals {
    /// Commands completed.
    pub commands: u64,
    /// Bytes of the medium covered by those that completed GOOD (blocks
    /// times block size).
    pub bytes: u64,
}

impl RangeTotals {
    fn add(&mut self, s: &RangeStats) {
        self.commands += s.commands.get();
        self.bytes += s.bytes.get();
    }

    fn merge(&mut self, o: &RangeTotals) {
        self.commands += o.commands;
        self.bytes += o.bytes;
    }
}

/// A snapshot of [`LunStats`], or a sum of them.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LunTotals {
    /// Reads.
    pub read: OpTotals,
    /// Writes.
    pub write: OpTotals,
    /// UNMAP: commands, and bytes deallocated.
    pub unmap: RangeTotals,
    /// WRITE SAME: commands, and bytes written or deallocated.
    pub write_same: RangeTotals,
    /// SYNCHRONIZE CACHE commands.
    pub sync_cache: u64,
    /// Other commands.
    pub other: u64,
    /// CHECK CONDITION by sense key name.
    pub sense: BTreeMap<Name, u64>,
    /// Error statuses by name.
    pub status: BTreeMap<Name, u64>,
}

impl LunTotals {
    fn add(&mut self, s: &LunStats) {
        self.read.add(&s.read);
        self.write.add(&s.write);
        self.unmap.add(&s.unmap);
        self.write_same.add(&s.write_same);
        self.sync_cache += s.sync_cache.get();
        self.other += s.other.get();
        for (name, c) in SENSE_KEYS.iter().zip(&s.sense) {
            if c.get() > 0 {
                *self.sense.entry(Name::Borrowed(name)).or_default() += c.get();
            }
        }
        for ((_, name), c) in ERROR_STATUSES.iter().zip(&s.status) {
            if c.get() > 0 {
                *self.status.entry(Name::Borrowed(name)).or_default() += c.get();
            }
        }
    }

    fn merge(&mut self, o: &LunTotals) {
        self.read.merge(&o.read);
        self.write.merge(&o.write);
        self.unmap.merge(&o.unmap);
        self.write_same.merge(&o.write_same);
        self.sync_cache += o.sync_cache;
        self.other += o.other;
        for (k, v) in &o.sense {
            *self.sense.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.status {
            *self.status.entry(k.clone()).or_default() += v;
        }
    }
}

/// A snapshot of the rest of [`ConnStats`], or a sum.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConnTotals {
    /// R2Ts sent.
    pub r2t: u64,
    /// Task management requests by function name.
    pub tmf: BTreeMap<Name, u64>,
    /// Header digest errors.
    pub header_digest_errors: u64,
    /// Data digest errors.
    pub data_digest_errors: u64,
    /// Rejects sent.
    pub rejects: u64,
    /// Commands to a LUN the target does not have.
    pub commands_no_lun: u64,
}

impl ConnTotals {
    fn add(&mut self, s: &ConnStats) {
        self.r2t += s.r2t.get();
        for (name, c) in TMF_NAMES.iter().zip(&s.tmf) {
            if c.get() > 0 {
                *self.tmf.entry(Name::Borrowed(name)).or_default() += c.get();
            }
        }
        self.header_digest_errors += s.header_digest_errors.get();
        self.data_digest_errors += s.data_digest_errors.get();
        self.rejects += s.rejects.get();
        self.commands_no_lun += s.commands_no_lun.get();
    }

    fn merge(&mut self, o: &ConnTotals) {
        self.r2t += o.r2t;
        for (k, v) in &o.tmf {
            *self.tmf.entry(k.clone()).or_default() += v;
        }
        self.header_digest_errors += o.header_digest_errors;
        self.data_digest_errors += o.data_digest_errors;
        self.rejects += o.rejects;
        self.commands_no_lun += o.commands_no_lun;
    }
}

/// Everything one connection (or a sum of connections) counted.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    /// Per LUN.
    pub luns: BTreeMap<u16, LunTotals>,
    /// The rest.
    pub connection: ConnTotals,
}

impl Totals {
    /// The counts of `conn` now.
    pub fn of(conn: &ConnStats) -> Totals {
        let mut t = Totals::default();
        t.add(conn);
        t
    }

    fn add(&mut self, conn: &ConnStats) {
        for (lun, s) in conn.luns() {
            self.luns.entry(lun).or_default().add(&s);
        }
        self.connection.add(conn);
    }

    /// Adds `other` into these.
    pub fn merge(&mut self, other: &Totals) {
        for (lun, t) in &other.luns {
            self.luns.entry(*lun).or_default().merge(t);
        }
        self.connection.merge(&other.connection);
    }

    /// Every LUN's counts summed.
    pub fn all_luns(&self) -> LunTotals {
        let mut sum = LunTotals::default();
        for t in self.luns.values() {
            sum.merge(t);
        }
        sum
    }
}

/// Login outcomes by reason, for `isoe_logins_total`.
pub const LOGIN_OUTCOMES: [&str; 7] = [
    "normal",
    "discovery",
    "authentication_failure",
    "authorization_failure",
    "not_found",
    "out_of_resources",
    "other_refusal",
];

/// What the whole target counts besides its connections.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Logins by outcome, [`LOGIN_OUTCOMES`] (the login path only).
    pub logins: [AtomicU64; 7],
    /// Counts of connections gone, by target name: what outlives them.
    retired: Mutex<BTreeMap<String, Totals>>,
}

impl ServerStats {
    /// Counts one login outcome by index in [`LOGIN_OUTCOMES`].
    pub fn login(&self, outcome: usize) {
        if let Some(c) = self.logins.get(outcome) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The lock readers hold while they sum (see the module doc).
    pub fn lock_retired(&self) -> MutexGuard<'_, BTreeMap<String, Totals>> {
        self.retired.lock_unpoisoned()
    }

    /// A connection to `target` (and, for its session, `session_retired`)
    /// ends: its counts go into the totals, once.
    pub fn retire(&self, target: &str, conn: &ConnStats, session_retired: &Mutex<Totals>) {
        let mut retired = self.lock_retired();
        if conn.retired.swap(true, Ordering::AcqRel) {
            return;
        }
        let totals = Totals::of(conn);
        retired
            .entry(target.to_string())
            .or_default()
            .merge(&totals);
        session_retired.lock_unpoisoned().merge(&totals);
    }
}

/// Whether `conn` was folded into the totals already (readers skip it).
pub fn is_retired(conn: &ConnStats) -> bool {
    conn.retired.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_their_bucket() {
        let h = Histogram::default();
        h.record(10_000); // 10 µs
        h.record(25_000); // 25 µs: the bound is inclusive
        h.record(26_000);
        h.record(40_000_000_000); // 40 s: above every bound
        let mut t = OpTotals::default();
        let s = OpStats::default();
        t.add(&s);
        assert_eq!(h.buckets[0].get(), 2);
        assert_eq!(h.buckets[1].get(), 1);
        assert_eq!(h.buckets[BUCKETS - 1].get(), 1);
        assert_eq!(h.sum_ns.get(), 40_000_061_000);
    }

    #[test]
    fn unmap_write_same_and_sync_cache_have_their_own_counters() {
        use isoe_scsi::opcode::*;
        assert_eq!(Op::of(UNMAP), Op::Unmap);
        assert_eq!(Op::of(WRITE_SAME_10), Op::WriteSame);
        assert_eq!(Op::of(WRITE_SAME_16), Op::WriteSame);
        assert_eq!(Op::of(SYNCHRONIZE_CACHE_10), Op::SyncCache);
        assert_eq!(Op::of(SYNCHRONIZE_CACHE_16), Op::SyncCache);
        assert_eq!(Op::of(TEST_UNIT_READY), Op::Other);
        assert_eq!(Op::of(WRITE_16), Op::Write);

        let conn = ConnStats::default();
        let lun = conn.lun(0);
        lun.count(Op::of(UNMAP), 1 << 20, 0, None);
        lun.count(Op::of(UNMAP), 4096, 0, None);
        // Refused: a command, no bytes deallocated.
        lun.count(Op::of(UNMAP), 8192, 0x02, Some(0x05));
        lun.count(Op::of(WRITE_SAME_16), 512 * 8, 0, None);
        lun.count(Op::of(WRITE_SAME_10), 512, 0x18, None);
        lun.count(Op::of(SYNCHRONIZE_CACHE_10), 0, 0, None);
        lun.count(Op::of(SYNCHRONIZE_CACHE_16), 0, 0, None);
        lun.count(Op::of(TEST_UNIT_READY), 0, 0, None);
        let totals = Totals::of(&conn);
        let t = &totals.luns[&0];
        let range = |commands, bytes| RangeTotals { commands, bytes };
        assert_eq!(t.unmap, range(3, (1 << 20) + 4096));
        assert_eq!(t.write_same, range(2, 4096));
        assert_eq!(t.sync_cache, 2);
        assert_eq!(t.other, 1);
        assert_eq!((t.read.commands, t.write.commands), (0, 0));
        assert_eq!(t.sense["illegal_request"], 1);
        assert_eq!(t.status["reservation_conflict"], 1);

        // Sums, as a session's and a target's totals are made.
        let mut twice = totals.clone();
        twice.merge(&totals);
        let sum = twice.all_luns();
        assert_eq!(sum.unmap, range(6, 2 * ((1 << 20) + 4096)));
        assert_eq!(sum.write_same, range(4, 8192));
        assert_eq!((sum.sync_cache, sum.other), (4, 2));
        let json = serde_json::to_value(&sum).unwrap();
        assert_eq!(json["unmap"]["commands"], 6);
        assert_eq!(json["write_same"]["bytes"], 8192);
        assert_eq!(json["sync_cache"], 4);

        // Their latencies are not kept: nothing waits to be recorded.
        let mut pending = PendingLatencies::default();
        let now = std::time::Instant::now();
        for op in [Op::Unmap, Op::WriteSame, Op::SyncCache, Op::Other] {
            pending.push(0, op, now);
        }
        assert!(pending.is_empty());
    }

    #[test]
    fn a_sampled_command_s_stages_add_up_to_its_latency() {
        use std::time::{Duration, Instant};
        let conn = ConnStats::default();
        let mut cache = LunCache::default();
        let slot = cache.slot(&conn, 3, || true).unwrap();
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        let mut pending = PendingLatencies::default();
        // Two unsampled reads of one batch share an entry; a sampled read
        // and a sampled write get their own.
        pending.push(slot, Op::Read, t0);
        pending.push(slot, Op::Read, t0);
        pending.push_sampled(slot, Op::Read, t0, (us(30), us(130)));
        pending.push(slot, Op::Read, t0);
        // A store answer stamped after the batch's send (clocks read in
        // another order) is clamped: the stages still add up.
        pending.push_sampled(slot, Op::Write, us(10), (us(20), us(900)));
        // Not a read or a write: no stages kept.
        pending.push_sampled(slot, Op::SyncCache, t0, (us(1), us(2)));
        // The unsampled reads share one entry; the sync cache has none.
        assert_eq!(pending.len(), 3);
        pending.record(&cache, us(400));
        let totals = Totals::of(&conn);
        let read = &totals.luns[&3].read;
        assert_eq!(read.latency_buckets.iter().sum::<u64>(), 4);
        assert_eq!(read.latency_sum_ns, 4 * 400_000);
        let s = &read.stages;
        assert_eq!(s.receipt_to_store.count, 1);
        assert_eq!(s.receipt_to_store.sum_ns, 30_000);
        assert_eq!(s.store.sum_ns, 100_000);
        assert_eq!(s.store_to_sent.sum_ns, 270_000);
        let write = &totals.luns[&3].write.stages;
        assert_eq!(write.receipt_to_store.mean_ns(), 10_000);
        assert_eq!(write.store.mean_ns(), 380_000);
        assert_eq!(write.store_to_sent.mean_ns(), 0);
        // 270 µs lands in the (250, 500] µs bucket.
        assert_eq!(s.store_to_sent.buckets[4], 1);
        let json = serde_json::to_value(read).unwrap();
        assert_eq!(json["stages"]["store"]["count"], 1);
        assert_eq!(json["stages"]["store"]["sum_ns"], 100_000);
    }

    #[test]
    fn a_retired_connection_is_counted_once() {
        let stats = ServerStats::default();
        let conn = ConnStats::default();
        conn.lun(3).read.commands.add(5);
        let session = Mutex::new(Totals::default());
        stats.retire("t", &conn, &session);
        stats.retire("t", &conn, &session);
        assert!(is_retired(&conn));
        assert_eq!(stats.lock_retired()["t"].luns[&3].read.commands, 5);
        assert_eq!(session.lock().unwrap().luns[&3].read.commands, 5);
    }
}
