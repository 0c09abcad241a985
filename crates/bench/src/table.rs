//! Text for people: the result table and the live progress line.

use std::fmt::Write as _;

use crate::foreign::FOREIGN_MAX_PCT;
use crate::latency::LatencySummary;
use crate::profiles::block_label;
use crate::report::BenchResult;

/// One live progress line, e.g. `  12.0s  115.2k IOPS   471.9 MB/s`, for the
/// `window_ios` commands and `window_bytes` bytes completed in the last
/// `window_s` seconds, `elapsed_s` into the run. Fixed width, so a runner can
/// overwrite it in place with `\r`.
pub fn progress_line(elapsed_s: f64, window_ios: u64, window_bytes: u64, window_s: f64) -> String {
    let rate_iops = crate::demand::iops(window_ios, window_s).unwrap_or(0.0);
    let rate_mb_per_s = crate::demand::mb_per_s(window_bytes, window_s).unwrap_or(0.0);
    format!(
        "{elapsed_s:>6.1}s  {:>6} IOPS  {rate_mb_per_s:>7.1} MB/s",
        count_label(rate_iops)
    )
}

/// 950, 115.2k, 1.23M: a rate short enough for a column.
fn count_label(value: f64) -> String {
    if value >= 999_950.0 {
        format!("{:.2}M", value / 1e6)
    } else if value >= 999.95 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// `1 worker`, `4 workers`.
fn counted(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `value` to `decimals` places, or `-` when unknown.
fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

impl BenchResult {
    /// The result as a table for people: throughput and latency by
    /// direction, and by URL when there are several, CPU split, each side's
    /// CPU cost, effectiveness, TCP retransmissions, errors, and a warning
    /// when steal exceeds 5%.
    /// A run that stopped itself shows why instead of its figures.
    pub fn table(&self) -> String {
        let mut out = String::new();
        self.write_title(&mut out);
        if let Some(why) = &self.stopped {
            self.write_stopped(&mut out, why);
            return out;
        }
        self.write_result(&mut out);
        self.write_io(&mut out);
        self.write_urls(&mut out);
        self.write_cpu(&mut out);
        self.write_tcp_and_errors(&mut out);
        out
    }

    /// The measured window second by second: one row per entry of
    /// `series` (empty when it has none).
    pub fn series_table(&self) -> String {
        let mut out = String::new();
        let series = self.series.as_deref().unwrap_or_default();
        if series.is_empty() {
            return out;
        }
        let _ = writeln!(
            out,
            "\n{:>7} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>6}  latency µs",
            "second", "span", "commands", "MB/s", "IOPS", "mean", "p99", "errors"
        );
        for p in series {
            let (mean, p99) = if p.lat_us.count == 0 {
                ("-".to_string(), "-".to_string())
            } else {
                (
                    format!("{:.1}", p.lat_us.mean_us),
                    format!("{:.1}", p.lat_us.p99_us),
                )
            };
            let _ = writeln!(
                out,
                "{:>7.0} {:>6.2} {:>10} {:>9.1} {:>9} {mean:>9} {p99:>9} {:>6}",
                p.t_s,
                p.span_s,
                p.ios,
                p.mb_per_s,
                count_label(p.iops),
                p.errors
            );
        }
        out
    }

    /// The profile, the machine and the workload (what of them the result
    /// reports: `isoe bench`'s own report all of it).
    fn write_title(&self, out: &mut String) {
        let unknown = || "unknown".to_string();
        let _ = writeln!(
            out,
            "isoe bench {}  started {}  kernel {}  {} CPUs",
            self.workload.as_ref().map_or_else(unknown, |w| w
                .profile
                .clone()
                .unwrap_or_else(|| "(custom)".to_string())),
            self.started_at.clone().unwrap_or_else(unknown),
            self.host
                .as_ref()
                .map_or_else(unknown, |h| h.kernel_release.clone()),
            self.ncpus_label()
        );
        let Some(w) = &self.workload else {
            return;
        };
        let _ = writeln!(
            out,
            "workload  {}, {}% read, {}% random, QD {} x {}, {} x {}, {}, {:.1} s after {:.1} s \
             ramp, verify {}",
            block_label(w.block_size_bytes),
            w.read_pct,
            w.random_pct,
            w.queue_depth,
            counted(u64::from(w.workers), "worker"),
            counted(u64::from(w.sessions), "session"),
            counted(u64::from(w.connections), "connection"),
            if w.multipath {
                format!("{} as paths of one LU", counted(w.urls.len() as u64, "URL"))
            } else {
                counted(w.urls.len() as u64, "URL")
            },
            w.duration_s,
            w.ramp_s,
            if w.verify { "on" } else { "off" }
        );
    }

    /// Why the run stopped, and what it did until then: counts only, for
    /// its rates are not those of the workload.
    fn write_stopped(&self, out: &mut String, why: &str) {
        let _ = writeln!(
            out,
            "STOPPED after {:.2} s of {:.1} s: {why}\n\
             {} commands completed, {} failed; no throughput or latency is reported: \
             the run did not measure its workload",
            self.elapsed_s,
            self.duration_s(),
            self.ios.map_or_else(|| "-".to_string(), |n| n.to_string()),
            self.errors
        );
    }

    /// Throughput over the window, and whether a signal cut it short.
    fn write_result(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "result    {:.1} MB/s  {} IOPS  over {:.2} s   (MB = 10^6 bytes, KiB = 1024 bytes)",
            self.mb_per_s,
            count_label(self.iops),
            self.elapsed_s
        );
        if self.interrupted == Some(true) {
            let _ = writeln!(
                out,
                "INTERRUPTED: the window was cut short after {:.2} s of {:.1} s; the figures cover \
                 what was measured",
                self.elapsed_s,
                self.duration_s()
            );
        }
    }

    /// Each URL's share, when there are several.
    fn write_urls(&self, out: &mut String) {
        let per_url = self.per_url.as_deref().unwrap_or_default();
        if per_url.len() < 2 {
            return;
        }
        let _ = writeln!(
            out,
            "\n{:<3} {:>12} {:>9} {:>9}  {:>8} {:>8} {:>7}  URL",
            "URL", "commands", "MB/s", "IOPS", "mean µs", "p99 µs", "errors"
        );
        for (i, u) in per_url.iter().enumerate() {
            let (mean, p99) = if u.lat_us.count == 0 {
                ("-".to_string(), "-".to_string())
            } else {
                (
                    format!("{:.1}", u.lat_us.mean_us),
                    format!("{:.1}", u.lat_us.p99_us),
                )
            };
            let _ = writeln!(
                out,
                "{:<3} {:>12} {:>9.1} {:>9}  {mean:>8} {p99:>8} {:>7}  {}",
                i + 1,
                u.ios,
                u.mb_per_s,
                count_label(u.iops),
                u.errors,
                u.url
            );
        }
    }

    fn write_io(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n{:<7} {:>12} {:>9} {:>9}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  latency µs",
            "", "commands", "MB/s", "IOPS", "min", "mean", "p50", "p90", "p99", "p99.9", "max"
        );
        let rows = [
            (
                "read",
                self.read.ios,
                self.read.mb_per_s,
                self.read.iops,
                &self.read.lat_us,
            ),
            (
                "write",
                self.write.ios,
                self.write.mb_per_s,
                self.write.iops,
                &self.write.lat_us,
            ),
            (
                "all",
                self.ios.unwrap_or(self.read.ios + self.write.ios),
                self.mb_per_s,
                self.iops,
                &self.lat_us,
            ),
        ];
        for (name, ios, mb_per_s, iops, lat) in rows {
            let _ = writeln!(
                out,
                "{name:<7} {ios:>12} {mb_per_s:>9.1} {:>9}  {}",
                count_label(iops),
                latency_cells(lat)
            );
        }
    }

    fn write_cpu(&self, out: &mut String) {
        let c = &self.cpu;
        let _ = writeln!(
            out,
            "\nCPU, % of all {} CPUs: user {:.1}  system {:.1}  irq {:.1}  softirq {:.1}  \
             iowait {:.1}  steal {:.1}  idle {:.1}  busy {:.1}",
            self.ncpus_label(),
            c.user_pct,
            c.system_pct,
            c.irq_pct,
            c.softirq_pct,
            c.iowait_pct,
            c.steal_pct,
            c.idle_pct,
            c.busy_pct
        );
        let _ = writeln!(
            out,
            "{:<13} {:>7} {:>11} {:>11} {:>14} {:>14}",
            "", "CPU%", "CPU-µs/IO", "CPU-µs/KiB", "MB/s per CPU%", "IOPS per CPU%"
        );
        let rows = [
            (
                "initiator",
                self.initiator_cpu_pct,
                self.initiator_cpu_us_per_io,
                self.initiator_cpu_us_per_kib,
                self.initiator_mb_per_s_per_cpu_pct,
                self.initiator_iops_per_cpu_pct,
            ),
            (
                "target",
                self.target_cpu_pct,
                self.target_cpu_us_per_io,
                self.target_cpu_us_per_kib,
                self.target_mb_per_s_per_cpu_pct,
                self.target_cpu_pct
                    .and_then(|p| crate::demand::iops_per_cpu_pct(self.iops, p)),
            ),
            (
                "system busy",
                Some(c.busy_pct),
                self.system_cpu_us_per_io,
                self.system_cpu_us_per_kib,
                self.mb_per_s_per_cpu_pct,
                self.iops_per_cpu_pct,
            ),
        ];
        for (name, pct, per_io, per_kib, mb_eff, iops_eff) in rows {
            let _ = writeln!(
                out,
                "{name:<13} {:>7} {:>11} {:>11} {:>14} {:>14}",
                opt(pct, 1),
                opt(per_io, 2),
                opt(per_kib, 3),
                opt(mb_eff, 2),
                opt(iops_eff, 0)
            );
        }
        if self.target_pid.is_none() {
            let _ = writeln!(out, "(target CPU unknown: no target PID)");
        }
        let _ = writeln!(
            out,
            "other processes {}",
            self.foreign.as_ref().map_or_else(
                || "unknown (/proc unreadable)".to_string(),
                |f| format!(
                    "{}; kernel threads {:.1}%, interrupts {:.1}% (% of one CPU; \
                     not the initiator's or the target's)",
                    f.describe(),
                    f.kernel_threads_pct,
                    f.interrupts_pct
                )
            )
        );
    }

    fn write_tcp_and_errors(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nTCP       {} of {} segments retransmitted ({:.3}%), {} D-SACK segments received \
             (retransmits the peer found needless)",
            self.retrans_segs, self.out_segs, self.retrans_pct, self.dsack_segs
        );
        let _ = writeln!(
            out,
            "errors    {} failed commands, {} verify mismatches",
            self.errors,
            self.verify_errors
                .map_or_else(|| "-".to_string(), |n| n.to_string())
        );
        if self.steal_warning() {
            let _ = writeln!(
                out,
                "WARNING: steal {:.1}% > {:.0}%: the hypervisor took CPU from this machine; \
                 CPU figures are unreliable",
                self.steal_pct,
                BenchResult::STEAL_PCT_WARN
            );
        }
        if let Some(f) = self
            .foreign
            .as_ref()
            .filter(|_| self.foreign_warning == Some(true))
        {
            let _ = writeln!(
                out,
                "WARNING: other processes used {} > {FOREIGN_MAX_PCT:.0}% of a CPU: they \
                 competed for the CPUs, so every figure may be moved (the lab repeats such a run)",
                f.describe()
            );
        }
    }
}

impl BenchResult {
    /// The workload's duration, s, for the lines that compare the window
    /// with it (NaN, printed as such, when the result names no workload).
    fn duration_s(&self) -> f64 {
        self.workload.as_ref().map_or(f64::NAN, |w| w.duration_s)
    }

    /// The machine's CPUs, or "unknown".
    fn ncpus_label(&self) -> String {
        self.host
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |h| h.ncpus.to_string())
    }
}

fn latency_cells(lat: &LatencySummary) -> String {
    if lat.count == 0 {
        return format!("{:>8}", "-");
    }
    [
        lat.min_us,
        lat.mean_us,
        lat.p50_us,
        lat.p90_us,
        lat.p99_us,
        lat.p999_us,
        lat.max_us,
    ]
    .iter()
    .map(|v| format!("{v:>8.1}"))
    .collect::<Vec<_>>()
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_shape() {
        // 1_152_000 commands and 4_719_000_000 bytes in 10 s:
        // 115200 IOPS -> "115.2k"; 471.9 MB/s.
        assert_eq!(
            progress_line(12.0, 1_152_000, 4_719_000_000, 10.0),
            "  12.0s  115.2k IOPS    471.9 MB/s"
        );
        assert_eq!(
            progress_line(0.5, 0, 0, 0.0),
            "   0.5s       0 IOPS      0.0 MB/s"
        );
        // Same width whatever the rate, so \r overwrites cleanly.
        assert_eq!(
            progress_line(1.0, 950, 1, 1.0).len(),
            progress_line(1.0, 1_200_000, 1, 1.0).len()
        );
    }

    #[test]
    fn count_labels() {
        assert_eq!(count_label(950.0), "950");
        assert_eq!(count_label(115_200.0), "115.2k");
        assert_eq!(count_label(999_999.0), "1.00M");
        assert_eq!(count_label(1_234_567.0), "1.23M");
    }

    #[test]
    fn unknown_is_a_dash() {
        assert_eq!(opt(None, 2), "-");
        assert_eq!(opt(Some(7.5), 2), "7.50");
    }
}
