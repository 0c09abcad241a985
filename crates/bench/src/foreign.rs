//! Foreign load: the CPU that processes other than the run's own used
//! while a run was measured (METHODOLOGY.md "A quiet machine"). Both
//! `isoe bench` (its own process and the target's) and the lab (itself and
//! every descendant) measure it here; the run's own processes are the
//! caller's roots and their descendants.
//!
//! Steal shows only the host's other tenants; a build or a browser on this
//! machine competes for the same two cores unseen and moves the results.
//! So every run takes two snapshots of `/proc` around its measured window
//! and splits the machine's busy time:
//!
//! - **ours**: the roots and every descendant (for the lab: itself, the
//!   target, tgtd, `isoe bench` or fio; for `isoe bench`: itself and the
//!   target), found through the parent links of the snapshots;
//! - **kernel threads** (`ksoftirqd`, `kworker`, ...): on a quiet machine
//!   they carry the runs' own network work, which the kernel charges to no
//!   process, so they are shown but not counted as foreign;
//! - **interrupts**: `irq` and `softirq` time of `/proc/stat`, likewise;
//! - **foreign**: the rest of the busy time. It is taken as a remainder,
//!   not only as a sum over the other processes, because a competing
//!   build's compiler processes start and end between the snapshots and
//!   would be missed by a sum; but when the sum over the other processes
//!   seen in both snapshots is larger (softirq work done on top of a
//!   competitor is subtracted from the remainder whole), the sum stands.
//!
//! The processes seen in both snapshots name the largest foreign users.

use crate::cpu::{CpuTimes, ProcessCpu};
use std::collections::{BTreeMap, BTreeSet};

/// The kernel's flag for a kernel thread in `/proc/PID/stat` field 9
/// (`PF_KTHREAD`, include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;
/// A run during which other processes used more than this, in % of one
/// CPU, is flagged by `isoe bench` and repeated by the lab (its
/// `foreign_max_pct`, which a plan may change): 5% of a CPU moves CPU
/// figures by more than the lab's 5% significance threshold on a machine
/// of few cores. One constant, the report's default of the plan's rule.
pub use isoe_report::stats::FOREIGN_MAX_PCT;
/// How many of the largest foreign processes a run names.
const TOP_PROCESSES: usize = 3;

/// One process in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEntry {
    /// Its command name (field 2).
    pub comm: String,
    /// Its parent (field 4).
    pub ppid: u32,
    /// A kernel thread (`PF_KTHREAD` in field 9).
    pub kernel_thread: bool,
    /// User plus system time of all its threads, ticks.
    pub ticks: u64,
}

impl ProcessEntry {
    /// Parses the text of `/proc/PID/stat`; None when it is not one.
    pub fn parse(text: &str) -> Option<ProcessEntry> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let comm = text.get(open + 1..close)?.to_string();
        // Field 3 (state) is the first after the command name.
        let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
        let ppid = fields.get(4 - 3)?.parse().ok()?;
        let flags: u64 = fields.get(9 - 3)?.parse().ok()?;
        let ticks = ProcessCpu::parse(text).ok()?.total_ticks();
        Some(ProcessEntry {
            comm,
            ppid,
            kernel_thread: flags & PF_KTHREAD != 0,
            ticks,
        })
    }
}

/// `/proc/stat` and every process's `/proc/PID/stat` at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The machine's CPU times.
    pub cpu: CpuTimes,
    /// Every process that could be read, by PID.
    pub processes: BTreeMap<u32, ProcessEntry>,
}

impl Snapshot {
    /// Reads `/proc` now; None when `/proc/stat` cannot be read.
    pub fn take() -> Option<Snapshot> {
        let cpu = CpuTimes::read().ok()?;
        let mut processes = BTreeMap::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            // A process may end between the listing and the read.
            if let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) {
                if let Some(p) = ProcessEntry::parse(&text) {
                    processes.insert(pid, p);
                }
            }
        }
        Some(Snapshot { cpu, processes })
    }

    /// A snapshot from texts: `/proc/stat`, and (PID, `/proc/PID/stat`).
    pub fn from_texts(proc_stat: &str, processes: &[(u32, &str)]) -> Option<Snapshot> {
        Some(Snapshot {
            cpu: CpuTimes::parse(proc_stat).ok()?,
            processes: processes
                .iter()
                .filter_map(|(pid, text)| Some((*pid, ProcessEntry::parse(text)?)))
                .collect(),
        })
    }

    /// `roots` and all their descendants in this snapshot.
    fn family(&self, roots: &[u32]) -> BTreeSet<u32> {
        let mut ours: BTreeSet<u32> = roots.iter().copied().collect();
        // Parents may have higher PIDs than children (PID reuse), so grow
        // the set until it stops growing; at most one pass per generation.
        for _ in 0..self.processes.len() {
            let before = ours.len();
            for (pid, p) in &self.processes {
                if ours.contains(&p.ppid) {
                    ours.insert(*pid);
                }
            }
            if ours.len() == before {
                break;
            }
        }
        ours
    }
}

/// What a run's window cost the machine outside the run's own processes:
/// the report's own type (see [`crate::latency::LatencySummary`]), measured
/// by [`between`].
pub use isoe_report::record::ForeignLoad;

/// The load between `earlier` and `later`, the run's own processes
/// being `roots` and their descendants; None when no time passed.
pub fn between(earlier: &Snapshot, later: &Snapshot, roots: &[u32]) -> Option<ForeignLoad> {
    let (a, b) = (&earlier.cpu, &later.cpu);
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let all = |c: &CpuTimes| {
        [
            c.user, c.nice, c.system, c.idle, c.iowait, c.irq, c.softirq, c.steal,
        ]
        .iter()
        .sum::<u64>()
    };
    let ncpus = f64::from(b.ncpus.max(1));
    // Ticks of one CPU that passed: all CPUs' ticks over their number.
    let elapsed = d(all(a), all(b)) / ncpus;
    if elapsed <= 0.0 {
        return None;
    }
    let busy = d(all(a), all(b)) - d(a.idle, b.idle) - d(a.iowait, b.iowait) - d(a.steal, b.steal);
    let interrupts = d(a.irq, b.irq) + d(a.softirq, b.softirq);
    let mut ours_set = earlier.family(roots);
    ours_set.extend(later.family(roots));
    let (mut ours, mut kernel) = (0.0, 0.0);
    let mut others: Vec<(String, f64)> = Vec::new();
    for (pid, now) in &later.processes {
        let Some(then) = earlier.processes.get(pid).filter(|t| t.comm == now.comm) else {
            continue;
        };
        let used = now.ticks.saturating_sub(then.ticks) as f64;
        if ours_set.contains(pid) {
            ours += used;
        } else if now.kernel_thread {
            kernel += used;
        } else if used > 0.0 {
            others.push((now.comm.clone(), used));
        }
    }
    // The remainder counts processes that came and went between the
    // snapshots; the sum over those seen in both counts a competitor
    // whose ticks the kernel shared with softirq work run on top of it
    // (the remainder subtracts that softirq time whole). Either alone
    // undercounts, so the larger stands.
    let seen: f64 = others.iter().map(|(_, t)| t).sum();
    let foreign = (busy - interrupts - ours - kernel).max(seen).max(0.0);
    let pct = |ticks: f64| 100.0 * ticks / elapsed;
    others.sort_by(|x, y| y.1.total_cmp(&x.1));
    others.truncate(TOP_PROCESSES);
    Some(ForeignLoad {
        cpu_pct: pct(foreign),
        kernel_threads_pct: pct(kernel),
        interrupts_pct: pct(interrupts),
        ours_pct: pct(ours),
        top: others.into_iter().map(|(c, t)| (c, pct(t))).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/PID/stat` line with the fields the accounting reads.
    fn stat(pid: u32, comm: &str, ppid: u32, flags: u64, utime: u64, stime: u64) -> String {
        format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 {flags} 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 0 0")
    }

    // Two CPUs, one second apart at USER_HZ 100: 200 ticks of all CPUs.
    //   user +120, system +30, idle +30, iowait 0, irq +2, softirq +12,
    //   steal +6 -> busy = 200 - 30 - 0 - 6 = 164.
    const EARLIER: &str = "cpu  1000 0 500 5000 10 10 40 5 0 0\ncpu0 1\ncpu1 1\n";
    const LATER: &str = "cpu  1120 0 530 5030 10 12 52 11 0 0\ncpu0 1\ncpu1 1\n";

    fn snapshots() -> (Snapshot, Snapshot) {
        let lab = 100;
        let before = [
            (1, stat(1, "systemd", 0, 0x400100, 50, 50)),
            (2, stat(2, "kthreadd", 0, PF_KTHREAD, 0, 0)),
            (lab, stat(lab, "isoe", 1, 0x400000, 10, 10)),
            (101, stat(101, "isoe", lab, 0x400000, 100, 100)), // target
            (102, stat(102, "isoe", lab, 0x400000, 200, 100)), // bench
            (14, stat(14, "ksoftirqd/0", 2, PF_KTHREAD | 0x40, 5, 5)),
            (300, stat(300, "stress-ng-cpu", 1, 0x400000, 1000, 0)),
            (301, stat(301, "cargo", 1, 0x400000, 10, 0)),
        ];
        let after = [
            (1, stat(1, "systemd", 0, 0x400100, 50, 50)),
            (2, stat(2, "kthreadd", 0, PF_KTHREAD, 0, 0)),
            (lab, stat(lab, "isoe", 1, 0x400000, 10, 11)), // +1
            (101, stat(101, "isoe", lab, 0x400000, 130, 120)), // +50
            (102, stat(102, "isoe", lab, 0x400000, 250, 110)), // +60
            (14, stat(14, "ksoftirqd/0", 2, PF_KTHREAD | 0x40, 5, 13)), // +8
            (300, stat(300, "stress-ng-cpu", 1, 0x400000, 1020, 0)), // +20
            (301, stat(301, "cargo", 1, 0x400000, 11, 0)), // +1
            // Started inside the window: not in both snapshots, named by no one.
            (302, stat(302, "rustc", 301, 0x400000, 3, 0)),
        ];
        fn view(v: &[(u32, String)]) -> Vec<(u32, &str)> {
            v.iter().map(|(p, t)| (*p, t.as_str())).collect()
        }
        (
            Snapshot::from_texts(EARLIER, &view(&before)).unwrap(),
            Snapshot::from_texts(LATER, &view(&after)).unwrap(),
        )
    }

    #[test]
    fn a_process_stat_line_gives_its_parent_flags_and_ticks() {
        let p = ProcessEntry::parse(&stat(7, "a (weird) name", 3, PF_KTHREAD, 4, 5)).unwrap();
        assert_eq!(
            p,
            ProcessEntry {
                comm: "a (weird) name".into(),
                ppid: 3,
                kernel_thread: true,
                ticks: 9
            }
        );
        assert_eq!(ProcessEntry::parse("garbage"), None);
    }

    #[test]
    fn foreign_load_is_what_is_neither_ours_nor_kernel_nor_interrupts() {
        let (earlier, later) = snapshots();
        let load = between(&earlier, &later, &[100]).unwrap();
        // Per CPU 100 ticks passed. Ours: 1 + 50 + 60 = 111 ticks -> 111%.
        assert!((load.ours_pct - 111.0).abs() < 1e-9, "{load:?}");
        assert!((load.kernel_threads_pct - 8.0).abs() < 1e-9, "{load:?}");
        assert!((load.interrupts_pct - 14.0).abs() < 1e-9, "{load:?}");
        // busy 164 - interrupts 14 - ours 111 - kernel 8 = 31: stress-ng's
        // 20, cargo's 1, and 10 from processes that came and went.
        assert!((load.cpu_pct - 31.0).abs() < 1e-9, "{load:?}");
        assert_eq!(load.top[0].0, "stress-ng-cpu");
        assert!((load.top[0].1 - 20.0).abs() < 1e-9);
        assert_eq!(load.top.len(), 2, "{load:?}");
        assert!(load
            .describe()
            .starts_with("31.0% of a CPU (stress-ng-cpu 20.0%"));
    }

    #[test]
    fn a_competitor_under_softirq_load_counts_whole() {
        let (earlier, mut later) = snapshots();
        // stress-ng's ticks say 60% of a CPU, but softirq ran on top of it:
        // busy 164 - interrupts 14 - ours 111 - kernel 8 leaves 31.
        later.processes.get_mut(&300).unwrap().ticks += 40;
        let load = between(&earlier, &later, &[100]).unwrap();
        // The processes seen in both: stress-ng 60 + cargo 1.
        assert!((load.cpu_pct - 61.0).abs() < 1e-9, "{load:?}");
        assert!(load
            .describe()
            .starts_with("61.0% of a CPU (stress-ng-cpu 60.0%"));
    }

    #[test]
    fn a_quiet_machine_has_no_foreign_load() {
        let (earlier, mut later) = snapshots();
        // Only our processes worked: the machine's busy time is theirs plus
        // the kernel's.
        later.cpu =
            CpuTimes::parse("cpu  1080 0 530 5070 10 12 52 11 0 0\ncpu0 1\ncpu1 1\n").unwrap();
        for pid in [300, 301] {
            let then = earlier.processes[&pid].clone();
            later.processes.insert(pid, then);
        }
        let load = between(&earlier, &later, &[100]).unwrap();
        // busy 124 - 14 - 111 - 8 = -9: clamped to nothing.
        assert_eq!(load.cpu_pct, 0.0, "{load:?}");
        assert!(load.top.is_empty());
        assert_eq!(between(&earlier, &earlier, &[100]), None);
    }

    #[test]
    fn the_lab_family_includes_grandchildren_and_nothing_else() {
        let (earlier, _) = snapshots();
        let ours = earlier.family(&[100]);
        assert_eq!(ours.into_iter().collect::<Vec<_>>(), vec![100, 101, 102]);
    }
}
