//! Per-command latency, submit to status, in an HdrHistogram.

use hdrhistogram::Histogram;

/// Smallest latency tracked, ns.
const LATENCY_NS_MIN: u64 = 1;
/// Largest latency tracked, ns (60 s); longer ones are recorded as 60 s.
pub const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// Significant decimal digits kept: values are within 0.1% of what was
/// recorded.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Records command latencies in nanoseconds, 1 ns to 60 s, to 3 significant
/// digits. One per worker; merge them at the end.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

/// Latency statistics in microseconds: the report's own type (a run's
/// figures are the report's to read; `isoe-report` knows no host), so
/// that one definition is what `isoe bench` writes and what the report
/// reads back.
pub use isoe_report::record::LatencySummary;

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> LatencyRecorder {
        let histogram =
            Histogram::new_with_bounds(LATENCY_NS_MIN, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
                .expect("1 ns to 60 s at 3 significant digits is a valid HdrHistogram range");
        LatencyRecorder { histogram }
    }

    /// Records one command's latency; above 60 s it is recorded as 60 s.
    pub fn record_ns(&mut self, latency_ns: u64) {
        self.histogram.saturating_record(latency_ns);
    }

    /// Records `count` commands that each took `latency_ns` (a bin of
    /// another tool's histogram); above 60 s as 60 s.
    pub fn record_n(&mut self, latency_ns: u64, count: u64) {
        self.histogram.saturating_record_n(latency_ns, count);
    }

    /// Commands recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// Forgets everything recorded (e.g. at the end of the ramp).
    pub fn clear(&mut self) {
        self.histogram.reset();
    }

    /// Adds everything `other` recorded to `self`.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Both were made by `new` with the same bounds, so `add` cannot run
        // out of range; if it ever did, copy bin by bin, clamping.
        if self.histogram.add(&other.histogram).is_err() {
            for bin in other.histogram.iter_recorded() {
                self.histogram
                    .saturating_record_n(bin.value_iterated_to(), bin.count_at_value());
            }
        }
    }

    /// Count, min, mean, percentiles and max in µs; all zeros when empty.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.histogram;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }

    /// Counts in log2 buckets for a histogram chart: `(upper_us, count)`
    /// where a bucket holds latencies in (upper_us / 2, upper_us] and the
    /// first upper bound is 1 µs. Runs from the bucket of the smallest to
    /// the bucket of the largest latency, empty buckets between included;
    /// empty when nothing was recorded.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        let mut counts: Vec<u64> = Vec::new();
        for bin in self.histogram.iter_recorded() {
            // A bin spans a few equivalent values (1 ns wide below 2 µs, 0.05%
            // of the value above); place it by its lowest, so that a latency
            // recorded exactly on a bucket's upper bound stays in that bucket.
            let ns = self.histogram.lowest_equivalent(bin.value_iterated_to());
            let index = bucket_index(ns);
            if counts.len() <= index {
                counts.resize(index + 1, 0);
            }
            counts[index] = counts[index].saturating_add(bin.count_at_value());
        }
        let first = counts.iter().position(|&c| c > 0).unwrap_or(counts.len());
        counts
            .iter()
            .enumerate()
            .skip(first)
            .map(|(index, &count)| (bucket_upper_us(index), count))
            .collect()
    }
}

/// Index k of the log2 bucket holding `ns`: bucket 0 is [0, 1] µs, bucket k
/// is (2^(k-1), 2^k] µs.
fn bucket_index(ns: u64) -> usize {
    // 60 s is below 2^26 µs, so this loop runs at most 27 times.
    let mut index = 0;
    while ns > 1000u64 << index {
        index += 1;
    }
    index
}

fn bucket_upper_us(index: usize) -> f64 {
    (1u64 << index) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled_1_to_1000_us() -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record_ns(us * 1000);
        }
        r
    }

    /// Within HdrHistogram's 3-digit precision (0.1%) of `expected`.
    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected * 0.001
    }

    #[test]
    fn percentiles_of_1_to_1000_us() {
        let s = filled_1_to_1000_us().summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_us, 1.0); // 1000 ns is exact at 3 digits
                                   // mean of 1..=1000 = 1001 / 2 = 500.5 µs
        assert!(close(s.mean_us, 500.5), "mean {}", s.mean_us);
        // 500th of 1000 values is 500 µs; 900th 900; 990th 990; 999th 999.
        assert!(close(s.p50_us, 500.0), "p50 {}", s.p50_us);
        assert!(close(s.p90_us, 900.0), "p90 {}", s.p90_us);
        assert!(close(s.p99_us, 990.0), "p99 {}", s.p99_us);
        assert!(close(s.p999_us, 999.0), "p99.9 {}", s.p999_us);
        assert!(close(s.max_us, 1000.0), "max {}", s.max_us);
    }

    #[test]
    fn empty_recorder_summarises_to_zeros() {
        let r = LatencyRecorder::new();
        assert!(r.is_empty());
        assert_eq!(r.summary(), LatencySummary::default());
        assert_eq!(r.summary().count, 0);
        assert_eq!(r.summary().max_us, 0.0);
        assert!(r.buckets().is_empty());
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        a.record_ns(10_000);
        b.record_ns(20_000);
        b.record_ns(30_000);
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 3);
        assert_eq!(s.min_us, 10.0);
        assert!(close(s.max_us, 30.0));
        assert!(close(s.mean_us, 20.0));
        a.merge(&LatencyRecorder::new());
        assert_eq!(a.count(), 3);
        a.clear();
        assert!(a.is_empty());
    }

    #[test]
    fn too_long_is_recorded_as_the_maximum() {
        let mut r = LatencyRecorder::new();
        r.record_ns(u64::MAX);
        r.record_ns(0);
        let s = r.summary();
        assert_eq!(s.count, 2);
        assert_eq!(s.min_us, 0.0);
        assert!(close(s.max_us, 60_000_000.0), "max {}", s.max_us);
    }

    #[test]
    fn serialises_with_short_names() {
        let s = LatencySummary {
            count: 3,
            min_us: 1.0,
            mean_us: 2.0,
            p50_us: 2.0,
            p90_us: 3.0,
            p99_us: 3.0,
            p999_us: 3.0,
            max_us: 3.0,
        };
        let json = serde_json::to_value(s).unwrap();
        for key in ["count", "min", "mean", "p50", "p90", "p99", "p999", "max"] {
            assert!(json.get(key).is_some(), "missing {key} in {json}");
        }
        assert_eq!(json["p999"], 3.0);
        let back: LatencySummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn log2_buckets() {
        let mut r = LatencyRecorder::new();
        r.record_ns(1_500); // 1.5 µs -> (1, 2]
        r.record_ns(2_000); // 2 µs   -> (1, 2]
        r.record_ns(7_000); // 7 µs   -> (4, 8]
                            // Buckets (1,2], (2,4] (empty, kept), (4,8].
        assert_eq!(r.buckets(), vec![(2.0, 2), (4.0, 0), (8.0, 1)]);
        let all = filled_1_to_1000_us().buckets();
        // 1 µs in [0,1]; 2 in (1,2]; 3..4 in (2,4]; ...; 513..1000 in (512,1024].
        assert_eq!(all.len(), 11);
        assert_eq!(all[0], (1.0, 1));
        assert_eq!(all[1], (2.0, 1));
        assert_eq!(all[2], (4.0, 2));
        assert_eq!(all[10], (1024.0, 488));
        assert_eq!(all.iter().map(|b| b.1).sum::<u64>(), 1000);
    }

    #[test]
    fn bucket_index_edges() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(1000), 0);
        assert_eq!(bucket_index(1001), 1);
        assert_eq!(bucket_index(2000), 1);
        assert_eq!(bucket_index(LATENCY_NS_MAX), 26); // 2^25 < 60e6 <= 2^26 µs
    }
}
