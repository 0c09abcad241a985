//! An application run's host second by second: the initiator host's busy
//! CPU and used memory, and the resident memory of the initiator's own
//! processes (`isoe attach`), read once a second over the measured window
//! by a small program on that host. Seed 003 reports Jetstress's processor
//! time as an average, a minimum and a maximum, and says the two
//! initiators' memory use was "nearly identical": these are the figures
//! for both.

use crate::host::{self, Host, Running};
use crate::record::HostSeconds;
use isoe_bench::cpu::{self, CpuSplit, CpuTimes};
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// Reads the counters `$2 + 1` times a second apart, the first `$1`
/// seconds from now; the PIDs after them are the processes whose resident
/// memory it reads. Each reading ends with a marker line.
const SCRIPT: &str = r#"a=$1 n=$2; shift 2
sleep "$a"
i=0
while [ "$i" -le "$n" ]; do
    grep '^cpu' /proc/stat
    grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
    for p; do grep '^VmRSS:' "/proc/$p/status" 2>/dev/null; done
    echo @@isoe-second@@
    i=$((i + 1))
    sleep 1
done
"#;

/// The marker that ends one reading.
const MARK: &str = "@@isoe-second@@";

/// How long after the window the lab waits for the readings.
const WAIT: Duration = Duration::from_secs(30);

/// The program reading a host's counters once a second.
pub(super) struct SecondsSampler {
    running: Option<Running>,
    output: Option<Receiver<String>>,
}

impl SecondsSampler {
    /// Starts reading `host`'s counters `start_s` seconds from now, for
    /// `seconds` seconds (one reading more than that), with the resident
    /// memory of `pids` on it. A sampler that cannot start gives no
    /// figures rather than failing the run: they are the report's extras.
    pub(super) fn start(host: &Host, start_s: f64, seconds: u32, pids: &[u32]) -> SecondsSampler {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            SCRIPT.to_owned(),
            "sh".to_owned(),
            format!("{:.3}", start_s.max(0.0)),
            seconds.to_string(),
        ];
        argv.extend(pids.iter().map(u32::to_string));
        match host.spawn(&argv, Stdio::null()) {
            Ok(mut running) => {
                let output = running.take_stdout().map(host::collect);
                SecondsSampler {
                    running: Some(running),
                    output,
                }
            }
            Err(_) => SecondsSampler {
                running: None,
                output: None,
            },
        }
    }

    /// What the seconds showed; None when fewer than two readings came.
    pub(super) fn finish(mut self) -> Option<HostSeconds> {
        let text = self.output.take().and_then(|rx| rx.recv_timeout(WAIT).ok());
        if let Some(running) = self.running.take() {
            let _ = running.stop(Duration::from_secs(1));
        }
        parse(&text?, cpu::ticks_per_second())
    }
}

/// The figures of the readings in `text` ([`SCRIPT`]'s output): the
/// busy share of all CPUs over each second, its least and most; the
/// host's used memory (MemTotal less MemAvailable) and the processes'
/// resident memory added up, each at its most. None with fewer than two
/// whole readings.
pub(crate) fn parse(text: &str, hz: u64) -> Option<HostSeconds> {
    let mut cpus: Vec<CpuTimes> = Vec::new();
    let mut used_max_kib: Option<u64> = None;
    let mut rss_max_kib: Option<u64> = None;
    for reading in text.split(MARK).filter(|r| !r.trim().is_empty()) {
        let Ok(times) = CpuTimes::parse(reading) else {
            continue;
        };
        cpus.push(times);
        let kib = |key: &str| {
            reading
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        };
        if let (Some(total), Some(available)) = (kib("MemTotal:"), kib("MemAvailable:")) {
            let used = total.saturating_sub(available);
            used_max_kib = Some(used_max_kib.map_or(used, |m| m.max(used)));
        }
        let rss: Vec<u64> = reading
            .lines()
            .filter_map(|l| l.strip_prefix("VmRSS:"))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .collect();
        if !rss.is_empty() {
            let sum = rss.iter().sum::<u64>();
            rss_max_kib = Some(rss_max_kib.map_or(sum, |m| m.max(sum)));
        }
    }
    let busy: Vec<f64> = cpus
        .windows(2)
        .map(|w| CpuSplit::between(&w[0], &w[1], hz))
        .filter(|s| s.elapsed_cpu_s > 0.0)
        .map(|s| s.busy_pct)
        .collect();
    if busy.is_empty() {
        return None;
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    Some(HostSeconds {
        seconds: busy.len() as u32,
        processor_time_min_pct: busy.iter().copied().fold(f64::INFINITY, f64::min),
        processor_time_max_pct: busy.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        memory_used_max_mib: used_max_kib.map(mib),
        initiator_rss_max_mib: rss_max_kib.map(mib),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reading: `busy` and `idle` ticks so far, memory in KiB, the
    /// processes' resident KiB.
    fn reading(busy: u64, idle: u64, used_kib: u64, rss: &[u64]) -> String {
        let mut s = format!(
            "cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n\
             MemTotal:       1000000 kB\nMemAvailable:   {} kB\n",
            1_000_000 - used_kib
        );
        for r in rss {
            s.push_str(&format!("VmRSS:\t   {r} kB\n"));
        }
        s.push_str(MARK);
        s.push('\n');
        s
    }

    #[test]
    fn each_second_s_busy_share_gives_the_least_and_the_most() {
        // Seconds of 25%, 75% and 50% busy; memory peaks in the second
        // reading, the two processes' sum in the third.
        let text = [
            reading(0, 0, 100_000, &[1024, 2048]),
            reading(25, 75, 300_000, &[1024, 2048]),
            reading(100, 100, 200_000, &[2048, 2048]),
            reading(150, 150, 200_000, &[1024, 1024]),
        ]
        .concat();
        let s = parse(&text, 100).unwrap();
        assert_eq!(s.seconds, 3);
        assert_eq!(s.processor_time_min_pct, 25.0);
        assert_eq!(s.processor_time_max_pct, 75.0);
        assert_eq!(s.memory_used_max_mib, Some(300_000.0 / 1024.0));
        assert_eq!(s.initiator_rss_max_mib, Some(4.0));
    }

    #[test]
    fn too_few_readings_or_none_whole_give_nothing() {
        assert!(parse("", 100).is_none());
        assert!(parse(&reading(0, 0, 1, &[]), 100).is_none());
        // A reading cut short (the program stopped) is left out.
        let text = [reading(0, 0, 1, &[]), "cpu  5 0".to_owned()].concat();
        assert!(parse(&text, 100).is_none());
        // Without processes there is no resident memory figure.
        let text = [reading(0, 10, 1, &[]), reading(5, 15, 1, &[])].concat();
        let s = parse(&text, 100).unwrap();
        assert_eq!(s.initiator_rss_max_mib, None);
        assert_eq!(s.processor_time_max_pct, 50.0);
    }
}
