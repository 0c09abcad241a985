//! The measured window second by second, without touching the command path
//! more than a worker already does.
//!
//! Each worker counts the commands of the current second in a
//! [`SecondTally`] of its own (plain integers and a latency histogram, no
//! atomics). When a batch of completions falls into a later second, the
//! worker sends the finished tally down a channel, once per second, and
//! starts a fresh one. The main thread's [`Collector`] merges the workers'
//! tallies of a second once every worker has sent it, and reduces them to
//! a [`SecondMeasurements`]: counts and a latency summary, no histogram.
//! At most two merged histograms are held at a time besides those in the
//! channel, so memory stays bounded whatever the duration; the series has at
//! most [`SERIES_MAX`] entries.

use crate::latency::{LatencyRecorder, LatencySummary};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Most entries a series has: one a second for a day. A longer window's
/// last entry covers the rest of it.
pub const SERIES_MAX: u32 = 86_400;

/// Complete seconds the collector keeps whole behind the latest.
const HELD_COMPLETE: usize = 2;

/// Commands that completed in one second, of one worker or of all.
#[derive(Debug, Clone, Default)]
pub struct SecondTally {
    /// Reads completed with GOOD status.
    pub read_ios: u64,
    /// Bytes they moved.
    pub read_bytes: u64,
    /// Writes completed with GOOD status.
    pub write_ios: u64,
    /// Bytes they moved.
    pub write_bytes: u64,
    /// Commands that failed.
    pub errors: u64,
    /// Latencies of the good commands, reads and writes together.
    pub latency: LatencyRecorder,
}

impl SecondTally {
    /// Counts one good command.
    pub fn record(&mut self, write: bool, bytes: u64, latency_ns: u64) {
        if write {
            self.write_ios += 1;
            self.write_bytes += bytes;
        } else {
            self.read_ios += 1;
            self.read_bytes += bytes;
        }
        self.latency.record_ns(latency_ns);
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &SecondTally) {
        self.read_ios += other.read_ios;
        self.read_bytes += other.read_bytes;
        self.write_ios += other.write_ios;
        self.write_bytes += other.write_bytes;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
    }
}

/// One second (or so) of the measured window, as the runner collected it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SecondMeasurements {
    /// Its start, seconds since the measured window began.
    pub start_s: f64,
    /// Its end: one second later, or the end of the window for the last.
    pub end_s: f64,
    /// Reads completed with GOOD status.
    pub read_ios: u64,
    /// Bytes they moved.
    pub read_bytes: u64,
    /// Writes completed with GOOD status.
    pub write_ios: u64,
    /// Bytes they moved.
    pub write_bytes: u64,
    /// Commands that failed.
    pub errors: u64,
    /// Latency of the good commands, µs.
    pub lat_us: LatencySummary,
}

/// One entry of a result's `series`: the report's own type (see
/// [`crate::latency::LatencySummary`]), computed by [`point`].
pub use isoe_report::record::SeriesPoint;

/// The rates of `s`, as an entry of a result's `series`.
pub fn point(s: &SecondMeasurements) -> SeriesPoint {
    let span_s = (s.end_s - s.start_s).max(0.0);
    let iops = |ios: u64| crate::demand::iops(ios, span_s).unwrap_or(0.0);
    let mb = |bytes: u64| crate::demand::mb_per_s(bytes, span_s).unwrap_or(0.0);
    let ios = s.read_ios + s.write_ios;
    SeriesPoint {
        t_s: s.start_s,
        span_s,
        ios,
        iops: iops(ios),
        mb_per_s: mb(s.read_bytes + s.write_bytes),
        read_iops: iops(s.read_ios),
        read_mb_per_s: mb(s.read_bytes),
        write_iops: iops(s.write_ios),
        write_mb_per_s: mb(s.write_bytes),
        errors: s.errors,
        lat_us: s.lat_us,
    }
}

/// Entries in the series of a window of `duration_s`: its length rounded to
/// whole seconds, 1 to [`SERIES_MAX`].
pub fn seconds_in(duration_s: f64) -> u32 {
    let n = duration_s.round();
    if n.is_nan() || n < 1.0 {
        1
    } else if n >= f64::from(SERIES_MAX) {
        SERIES_MAX
    } else {
        n as u32
    }
}

/// The entry that `since_start` into the window falls in, of `n`: its whole
/// seconds, the last entry taking whatever is beyond it.
pub fn index_of(since_start: Duration, n: u32) -> u32 {
    let last = u64::from(n.max(1) - 1);
    since_start.as_secs().min(last) as u32
}

/// What a worker tells the collector.
#[derive(Debug)]
pub enum SecondMessage {
    /// Its tally of second `index` (each index once, in order).
    Second {
        /// The worker.
        worker: u32,
        /// The entry.
        index: u32,
        /// What completed in it.
        tally: SecondTally,
    },
    /// The worker sends nothing more.
    Done {
        /// The worker.
        worker: u32,
    },
}

/// A worker's side: which second it is in, and the channel.
#[derive(Debug)]
pub struct SecondSampler {
    tx: mpsc::Sender<SecondMessage>,
    worker: u32,
    n: u32,
    t0: Option<Instant>,
    index: u32,
}

impl SecondSampler {
    /// A sampler for `worker` of a window with `n` entries.
    pub fn new(tx: mpsc::Sender<SecondMessage>, worker: u32, n: u32) -> SecondSampler {
        SecondSampler {
            tx,
            worker,
            n: n.max(1),
            t0: None,
            index: 0,
        }
    }

    /// Called with each batch in the window, before its commands are counted
    /// in `tally`: sends the seconds that ended before `now` (an empty one
    /// for a second the worker saw nothing in). `t0` is when the window
    /// began, the same for every worker.
    pub fn at(&mut self, now: Instant, t0: Instant, tally: &mut SecondTally) {
        let t0 = *self.t0.get_or_insert(t0);
        let index = index_of(now.saturating_duration_since(t0), self.n);
        while self.index < index {
            self.send(std::mem::take(tally));
        }
    }

    /// At the end of the window: sends the second in progress, if the
    /// window began for this worker.
    pub fn finish(&mut self, tally: &mut SecondTally) {
        if self.t0.is_some() && self.index < self.n {
            self.send(std::mem::take(tally));
            // Nothing more: a later call sends nothing.
            self.index = self.n;
        }
    }

    fn send(&mut self, tally: SecondTally) {
        let _ = self.tx.send(SecondMessage::Second {
            worker: self.worker,
            index: self.index,
            tally,
        });
        self.index += 1;
    }
}

impl Drop for SecondSampler {
    /// Also on a panic, so that the collector does not wait for the worker.
    fn drop(&mut self) {
        let _ = self.tx.send(SecondMessage::Done {
            worker: self.worker,
        });
    }
}

/// The main thread's side: merges the workers' seconds.
#[derive(Debug)]
pub struct Collector {
    /// Per worker, the next index it will send.
    next: Vec<u32>,
    /// Per worker, whether it said Done.
    done: Vec<bool>,
    /// Seconds not yet reduced: every worker's share so far.
    pending: BTreeMap<u32, SecondTally>,
    /// Seconds reduced to counts and a summary, in order (`end_s` is set by
    /// [`Collector::finish`]).
    reduced: Vec<SecondMeasurements>,
}

impl Collector {
    /// A collector for `workers` workers.
    pub fn new(workers: u32) -> Collector {
        Collector {
            next: vec![0; workers as usize],
            done: vec![false; workers as usize],
            pending: BTreeMap::new(),
            reduced: Vec::new(),
        }
    }

    /// Takes every message waiting in `rx`.
    pub fn drain(&mut self, rx: &mpsc::Receiver<SecondMessage>) {
        for message in rx.try_iter() {
            self.take(message);
        }
    }

    /// Seconds held whole (with their histogram), for tests of the bound.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// Takes one message; reduces the seconds every worker has sent but the
    /// latest of them (kept whole until the end: see [`Collector::finish`]).
    pub fn take(&mut self, message: SecondMessage) {
        match message {
            SecondMessage::Second {
                worker,
                index,
                tally,
            } => {
                if let Some(next) = self.next.get_mut(worker as usize) {
                    *next = (*next).max(index + 1);
                }
                match self.pending.get_mut(&index) {
                    Some(sum) => sum.merge(&tally),
                    None => {
                        self.pending.insert(index, tally);
                    }
                }
            }
            SecondMessage::Done { worker } => {
                if let Some(done) = self.done.get_mut(worker as usize) {
                    *done = true;
                }
            }
        }
        // Every worker still running has sent every second below this.
        let complete_below = self
            .next
            .iter()
            .zip(&self.done)
            .filter(|(_, done)| !**done)
            .map(|(next, _)| *next)
            .min()
            .unwrap_or(u32::MAX);
        // Keep the two latest complete seconds whole: the window may end in
        // the later one, and a worker that saw the end a little late may
        // still add a sliver beyond it, to be added to the one the window
        // ended in.
        while let Some((&first, _)) = self.pending.first_key_value() {
            let later_complete = self
                .pending
                .range(first + 1..)
                .take_while(|(&k, _)| k < complete_below)
                .count();
            if first >= complete_below || later_complete < HELD_COMPLETE {
                break;
            }
            if let Some((index, tally)) = self.pending.pop_first() {
                self.reduced.push(reduce(index, &tally));
            }
        }
    }

    /// The series of a window that lasted `elapsed_s`, once every worker has
    /// ended. A second that begins at or after the end (a worker saw the
    /// end a little late) is added to the one before it, and so is a last
    /// one shorter than half a second (a window cut short by a signal): the
    /// last entry ends with the window and lasts 0.5 to 1.5 s, unless the
    /// whole window was shorter.
    pub fn finish(
        mut self,
        rx: &mpsc::Receiver<SecondMessage>,
        elapsed_s: f64,
    ) -> Vec<SecondMeasurements> {
        self.drain(rx);
        let mut kept: Vec<(u32, SecondTally)> = Vec::new();
        let last = self.pending.keys().next_back().copied();
        for (index, tally) in std::mem::take(&mut self.pending) {
            let start = f64::from(index);
            let sliver = Some(index) == last && elapsed_s - start < 0.5;
            let late = index > 0 && (start >= elapsed_s || sliver);
            match (kept.last_mut(), self.reduced.last_mut()) {
                (Some((_, before)), _) if late => before.merge(&tally),
                // Over a second late: its counts still count; its latencies
                // are left out of that second's summary, reduced already.
                (None, Some(before)) if late => {
                    before.read_ios += tally.read_ios;
                    before.read_bytes += tally.read_bytes;
                    before.write_ios += tally.write_ios;
                    before.write_bytes += tally.write_bytes;
                    before.errors += tally.errors;
                }
                _ => kept.push((index, tally)),
            }
        }
        let mut all = self.reduced;
        all.extend(kept.iter().map(|(index, tally)| reduce(*index, tally)));
        let count = all.len();
        for (i, s) in all.iter_mut().enumerate() {
            let end = elapsed_s.max(s.start_s);
            s.end_s = if i + 1 == count {
                end
            } else {
                (s.start_s + 1.0).min(end)
            };
        }
        all
    }
}

/// Second `index`'s counts and latency summary, its histogram dropped.
fn reduce(index: u32, t: &SecondTally) -> SecondMeasurements {
    let start_s = f64::from(index);
    SecondMeasurements {
        start_s,
        end_s: start_s + 1.0,
        read_ios: t.read_ios,
        read_bytes: t.read_bytes,
        write_ios: t.write_ios,
        write_bytes: t.write_bytes,
        errors: t.errors,
        lat_us: t.latency.summary(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `reads` reads and `writes` writes of 4 KiB, each taking `us` µs.
    fn tally(reads: u64, writes: u64, us: u64) -> SecondTally {
        let mut t = SecondTally::default();
        for _ in 0..reads {
            t.record(false, 4096, us * 1000);
        }
        for _ in 0..writes {
            t.record(true, 4096, us * 1000);
        }
        t
    }

    fn second(worker: u32, index: u32, t: SecondTally) -> SecondMessage {
        SecondMessage::Second {
            worker,
            index,
            tally: t,
        }
    }

    #[test]
    fn a_window_has_one_entry_per_whole_second_within_the_bound() {
        assert_eq!(seconds_in(10.0), 10);
        assert_eq!(seconds_in(2.4), 2);
        assert_eq!(seconds_in(2.5), 3);
        assert_eq!(seconds_in(0.3), 1);
        assert_eq!(seconds_in(f64::NAN), 1);
        assert_eq!(seconds_in(1e12), SERIES_MAX);
        assert_eq!(index_of(Duration::from_millis(999), 10), 0);
        assert_eq!(index_of(Duration::from_millis(9_900), 10), 9);
        // Beyond the last entry: the last entry.
        assert_eq!(index_of(Duration::from_secs(12), 10), 9);
        assert_eq!(index_of(Duration::from_secs(3), 0), 0);
    }

    #[test]
    fn a_point_is_the_rates_of_its_span() {
        let s = SecondMeasurements {
            start_s: 4.0,
            end_s: 4.5,
            read_ios: 1000,
            read_bytes: 1000 * 4096,
            write_ios: 500,
            write_bytes: 500 * 4096,
            errors: 2,
            lat_us: LatencySummary::default(),
        };
        let p = point(&s);
        assert_eq!((p.t_s, p.span_s, p.ios, p.errors), (4.0, 0.5, 1500, 2));
        assert_eq!(p.iops, 3000.0);
        assert_eq!(p.read_iops, 2000.0);
        assert_eq!(p.write_iops, 1000.0);
        // 1500 × 4096 bytes in 0.5 s = 12.288 MB/s.
        assert!((p.mb_per_s - 12.288).abs() < 1e-9, "{}", p.mb_per_s);
        assert!((p.read_mb_per_s - 8.192).abs() < 1e-9);
        assert!((p.write_mb_per_s - 4.096).abs() < 1e-9);
        // Nothing to divide by: zeros, not infinities.
        let empty = point(&SecondMeasurements::default());
        assert_eq!((empty.iops, empty.mb_per_s), (0.0, 0.0));
    }

    #[test]
    fn the_collector_merges_each_second_of_every_worker() {
        let (_tx, rx) = mpsc::channel();
        let mut c = Collector::new(2);
        // Worker 1 runs a second behind worker 0.
        c.take(second(0, 0, tally(100, 0, 10)));
        c.take(second(0, 1, tally(200, 0, 10)));
        c.take(second(1, 0, tally(50, 50, 30)));
        c.take(second(0, 2, tally(300, 0, 10)));
        c.take(second(1, 1, tally(0, 100, 30)));
        c.take(second(1, 2, SecondTally::default()));
        c.take(SecondMessage::Done { worker: 0 });
        c.take(SecondMessage::Done { worker: 1 });
        let series = c.finish(&rx, 3.0004);
        assert_eq!(series.len(), 3);
        let s0 = &series[0];
        assert_eq!((s0.start_s, s0.end_s), (0.0, 1.0));
        assert_eq!((s0.read_ios, s0.write_ios), (150, 50));
        assert_eq!(s0.read_bytes, 150 * 4096);
        // 100 commands of 10 µs and 100 of 30 µs: mean 20 µs, p99 30 µs,
        // this second's alone.
        assert_eq!(s0.lat_us.count, 200);
        assert!((s0.lat_us.mean_us - 20.0).abs() < 0.02, "{:?}", s0.lat_us);
        assert!((s0.lat_us.p99_us - 30.0).abs() < 0.03, "{:?}", s0.lat_us);
        assert_eq!((series[1].read_ios, series[1].write_ios), (200, 100));
        assert!((series[1].lat_us.p99_us - 30.0).abs() < 0.03);
        assert_eq!((series[2].read_ios, series[2].write_ios), (300, 0));
        // The last entry runs to the end of the window.
        assert_eq!((series[2].start_s, series[2].end_s), (2.0, 3.0004));
        assert_eq!(series[2].lat_us.max_us.round(), 10.0);
    }

    #[test]
    fn the_collector_holds_few_histograms_whatever_the_duration() {
        let (_tx, rx) = mpsc::channel();
        let mut c = Collector::new(3);
        // Worker 2 ended before the window (it says Done, sends nothing).
        c.take(SecondMessage::Done { worker: 2 });
        for index in 0..100 {
            c.take(second(0, index, tally(1, 0, 10)));
            c.take(second(1, index, tally(0, 1, 10)));
            assert!(c.held() <= 3, "{} held at second {index}", c.held());
        }
        let series = c.finish(&rx, 100.2);
        assert_eq!(series.len(), 100);
        assert!(series
            .iter()
            .all(|s| s.read_ios == 1 && s.write_ios == 1 && s.lat_us.count == 2));
        assert_eq!(series[99].end_s, 100.2);
        assert_eq!(series[98].end_s, 99.0);
    }

    #[test]
    fn a_sliver_after_an_interrupted_end_joins_the_second_before() {
        let (_tx, rx) = mpsc::channel();
        let mut c = Collector::new(2);
        for index in 0..3 {
            c.take(second(0, index, tally(10, 0, 10)));
            c.take(second(1, index, tally(10, 0, 10)));
        }
        // The window was cut at 2.98 s; worker 0 counted a batch at 3.01 s.
        c.take(second(0, 3, tally(4, 0, 50)));
        let series = c.finish(&rx, 2.98);
        assert_eq!(series.len(), 3);
        assert_eq!(series[2].read_ios, 24);
        assert_eq!(series[2].lat_us.count, 24);
        assert_eq!((series[2].start_s, series[2].end_s), (2.0, 2.98));
        let total: u64 = series.iter().map(|s| s.read_ios).sum();
        assert_eq!(total, 64);
    }

    #[test]
    fn a_last_second_shorter_than_half_joins_the_one_before() {
        let (_tx, rx) = mpsc::channel();
        let mut c = Collector::new(1);
        for index in 0..4 {
            c.take(second(0, index, tally(10, 0, 10 * u64::from(index + 1))));
        }
        // Cut at 3.2 s: [3, 3.2) is added to [2, 3).
        let series = c.finish(&rx, 3.2);
        assert_eq!(series.len(), 3);
        assert_eq!((series[2].start_s, series[2].end_s), (2.0, 3.2));
        assert_eq!(series[2].read_ios, 20);
        assert!((series[2].lat_us.mean_us - 35.0).abs() < 0.05);
        let iops = point(&series[2]).iops;
        assert!((iops - 20.0 / 1.2).abs() < 1e-9, "{iops}");
        // A window shorter than half a second keeps its one entry.
        let mut c = Collector::new(1);
        c.take(second(0, 0, tally(3, 0, 10)));
        let series = c.finish(&rx, 0.3);
        assert_eq!(series.len(), 1);
        assert_eq!((series[0].end_s, series[0].read_ios), (0.3, 3));
    }

    #[test]
    fn a_worker_sends_each_second_once_then_says_done() {
        let (tx, rx) = mpsc::channel();
        let mut s = SecondSampler::new(tx, 7, 10);
        let mut t = SecondTally::default();
        let t0 = Instant::now();
        // 100 ms in: still second 0, nothing sent.
        s.at(t0 + Duration::from_millis(100), t0, &mut t);
        t.record(false, 512, 1_000);
        // A batch 2.5 s in: second 0 (with the read) and second 1 (empty).
        s.at(t0 + Duration::from_millis(2_500), t0, &mut t);
        assert_eq!(t.read_ios, 0, "the tally starts afresh");
        t.record(true, 512, 1_000);
        s.finish(&mut t);
        s.finish(&mut t);
        drop(s);
        let got: Vec<(u32, u64, u64)> = rx
            .try_iter()
            .map(|m| match m {
                SecondMessage::Second {
                    worker,
                    index,
                    tally,
                } => {
                    assert_eq!(worker, 7);
                    (index, tally.read_ios, tally.write_ios)
                }
                SecondMessage::Done { worker } => (u32::MAX, u64::from(worker), 0),
            })
            .collect();
        assert_eq!(got, vec![(0, 1, 0), (1, 0, 0), (2, 0, 1), (u32::MAX, 7, 0)]);
        // A worker whose window never began sends only Done.
        let (tx, rx) = mpsc::channel();
        let mut s = SecondSampler::new(tx, 1, 10);
        s.finish(&mut SecondTally::default());
        drop(s);
        let got: Vec<SecondMessage> = rx.try_iter().collect();
        assert!(
            matches!(got[..], [SecondMessage::Done { worker: 1 }]),
            "{got:?}"
        );
    }
}
