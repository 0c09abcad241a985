//! CPU time: system-wide from `/proc/stat`, per process from `/proc/PID/stat`.
//!
//! Both files count in clock ticks of `USER_HZ` (proc(5)), which
//! [`ticks_per_second`] reports. The system-wide split is what METHODOLOGY.md
//! calls CPU utilization: 0–100% of all CPUs, split user / system / softirq.

use serde::{Deserialize, Serialize};

use crate::proc_error::ProcError;

const PROC_STAT: &str = "/proc/stat";
const PROC_PID_STAT: &str = "/proc/PID/stat";

/// The kernel's tick rate for `/proc` CPU times (`sysconf(_SC_CLK_TCK)`).
///
/// Falls back to 100, the `USER_HZ` of every Linux architecture, if sysconf
/// fails.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// The aggregate `cpu ` line of `/proc/stat`: ticks summed over all CPUs
/// since boot, plus the number of CPUs (`cpuN` lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Normal processes in user mode, ticks.
    pub user: u64,
    /// Niced processes in user mode, ticks.
    pub nice: u64,
    /// Kernel mode on behalf of processes (syscalls), ticks.
    pub system: u64,
    /// Idle, ticks.
    pub idle: u64,
    /// Idle while an I/O was outstanding, ticks.
    pub iowait: u64,
    /// Hard interrupts, ticks.
    pub irq: u64,
    /// Soft interrupts (where loopback and veth TCP does its work), ticks.
    pub softirq: u64,
    /// Time a hypervisor ran something else while we were runnable, ticks.
    pub steal: u64,
    /// Running a guest; already included in `user` by the kernel, ticks.
    pub guest: u64,
    /// Running a niced guest; already included in `nice`, ticks.
    pub guest_nice: u64,
    /// CPUs listed (`cpu0`, `cpu1`, ... lines).
    pub ncpus: u32,
}

impl CpuTimes {
    /// Parses the text of `/proc/stat`.
    ///
    /// Fields the running kernel does not provide (kernels before 2.6.33 have
    /// fewer than ten) read as 0; fewer than four fields is an error.
    pub fn parse(text: &str) -> Result<CpuTimes, ProcError> {
        let mut aggregate: Option<&str> = None;
        let mut ncpus: u32 = 0;
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(label) = words.next() else { continue };
            if label == "cpu" {
                aggregate = Some(line);
            } else if let Some(index) = label.strip_prefix("cpu") {
                if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
                    ncpus = ncpus.saturating_add(1);
                }
            }
        }
        let line = aggregate.ok_or_else(|| ProcError::missing(PROC_STAT, "the \"cpu \" line"))?;
        if ncpus == 0 {
            return Err(ProcError::missing(PROC_STAT, "any \"cpuN\" line"));
        }
        const NAMES: [&str; 10] = [
            "user",
            "nice",
            "system",
            "idle",
            "iowait",
            "irq",
            "softirq",
            "steal",
            "guest",
            "guest_nice",
        ];
        let mut ticks = [0u64; 10];
        let values: Vec<&str> = line.split_whitespace().skip(1).collect();
        if values.len() < 4 {
            return Err(ProcError::missing(
                PROC_STAT,
                "user, nice, system and idle on the \"cpu \" line",
            ));
        }
        for ((slot, name), text) in ticks.iter_mut().zip(NAMES).zip(&values) {
            *slot = ProcError::parse_u64(PROC_STAT, name, text)?;
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice] = ticks;
        Ok(CpuTimes {
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
            ncpus,
        })
    }

    /// Reads and parses `/proc/stat`.
    pub fn read() -> Result<CpuTimes, ProcError> {
        CpuTimes::parse(&ProcError::read_to_string(PROC_STAT)?)
    }
}

/// System-wide CPU use between two [`CpuTimes`] samples, each part in percent
/// of the time of ALL CPUs (0–100; 50% on two CPUs is one CPU busy).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuSplit {
    /// User mode, including niced and guest time (user + nice).
    pub user_pct: f64,
    /// Kernel mode on behalf of processes.
    pub system_pct: f64,
    /// Hard interrupts.
    pub irq_pct: f64,
    /// Soft interrupts: on loopback and veth most of TCP is done here,
    /// charged to no process.
    pub softirq_pct: f64,
    /// Stolen by a hypervisor; above a few percent the other figures are
    /// unreliable.
    pub steal_pct: f64,
    /// Idle with I/O outstanding.
    pub iowait_pct: f64,
    /// Idle.
    pub idle_pct: f64,
    /// Work done: everything except idle, iowait and steal. Steal is time
    /// taken from us, not work we did, so it is not counted as busy.
    pub busy_pct: f64,
    /// Busy CPU-seconds summed over all CPUs (busy ticks / ticks per second).
    pub busy_cpu_s: f64,
    /// CPU-seconds that passed, summed over all CPUs (all ticks / ticks per
    /// second): about wall time × CPUs.
    pub elapsed_cpu_s: f64,
}

impl CpuSplit {
    /// The split between `earlier` and `later`, with `hz` ticks per second.
    ///
    /// A counter that went backwards (iowait can, on some kernels) counts as
    /// 0. With no ticks between the samples every field is 0.
    pub fn between(earlier: &CpuTimes, later: &CpuTimes, hz: u64) -> CpuSplit {
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
        let user = d(earlier.user, later.user) + d(earlier.nice, later.nice);
        let system = d(earlier.system, later.system);
        let idle = d(earlier.idle, later.idle);
        let iowait = d(earlier.iowait, later.iowait);
        let irq = d(earlier.irq, later.irq);
        let softirq = d(earlier.softirq, later.softirq);
        let steal = d(earlier.steal, later.steal);
        // guest and guest_nice are already inside user and nice: not added.
        let total = user + system + idle + iowait + irq + softirq + steal;
        if total <= 0.0 {
            return CpuSplit::default();
        }
        let busy = total - idle - iowait - steal;
        let pct = |ticks: f64| ticks * 100.0 / total;
        let hz = hz.max(1) as f64;
        CpuSplit {
            user_pct: pct(user),
            system_pct: pct(system),
            irq_pct: pct(irq),
            softirq_pct: pct(softirq),
            steal_pct: pct(steal),
            iowait_pct: pct(iowait),
            idle_pct: pct(idle),
            busy_pct: pct(busy),
            busy_cpu_s: busy / hz,
            elapsed_cpu_s: total / hz,
        }
    }
}

/// CPU time of one process (all its threads) from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessCpu {
    /// User-mode time, ticks (field 14).
    pub utime_ticks: u64,
    /// Kernel-mode time, ticks (field 15).
    pub stime_ticks: u64,
}

impl ProcessCpu {
    /// Parses the text of `/proc/PID/stat`.
    ///
    /// The command name (field 2) is in parentheses and may itself contain
    /// spaces and parentheses, so the fields are counted from the LAST `)`.
    pub fn parse(text: &str) -> Result<ProcessCpu, ProcError> {
        let close = text.rfind(')').ok_or_else(|| {
            ProcError::missing(PROC_PID_STAT, "the \")\" closing the command name")
        })?;
        // Field 3 (state) is the first after the command name, so field N is
        // at index N - 3 of what follows.
        let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
        let field = |number: usize, name: &str| -> Result<u64, ProcError> {
            let text = fields.get(number - 3).ok_or_else(|| {
                ProcError::missing(PROC_PID_STAT, format!("field {number} ({name})"))
            })?;
            ProcError::parse_u64(PROC_PID_STAT, name, text)
        };
        Ok(ProcessCpu {
            utime_ticks: field(14, "utime")?,
            stime_ticks: field(15, "stime")?,
        })
    }

    /// User plus kernel time, ticks.
    pub fn total_ticks(&self) -> u64 {
        self.utime_ticks.saturating_add(self.stime_ticks)
    }

    /// Ticks used between `self` and `later` (0 if `later` is smaller, which
    /// happens only if the PID was reused).
    pub fn delta_ticks(&self, later: &ProcessCpu) -> u64 {
        later.total_ticks().saturating_sub(self.total_ticks())
    }

    /// CPU-seconds used between `self` and `later`.
    pub fn delta_s(&self, later: &ProcessCpu) -> f64 {
        self.delta_ticks(later) as f64 / ticks_per_second() as f64
    }
}

/// Reads and parses `/proc/PID/stat` of `pid`.
pub fn read_process(pid: u32) -> Result<ProcessCpu, ProcError> {
    ProcessCpu::parse(&ProcError::read_to_string(&format!("/proc/{pid}/stat"))?)
}

/// CPU time of this process so far.
pub fn self_cpu() -> Result<ProcessCpu, ProcError> {
    ProcessCpu::parse(&ProcError::read_to_string("/proc/self/stat")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two CPUs. Deltas from EARLIER to LATER, in ticks:
    //   user 250, nice 50, system 150, idle 400, iowait 20, irq 10,
    //   softirq 90, steal 30 -> total 1000; guest +40 (inside user already).
    const EARLIER: &str = "cpu  1000 200 500 5000 50 10 40 5 7 0\n\
        cpu0 500 100 250 2500 25 5 20 3 4 0\n\
        cpu1 500 100 250 2500 25 5 20 2 3 0\n\
        intr 12345 0 0\n\
        ctxt 999\n";
    const LATER: &str = "cpu  1250 250 650 5400 70 20 130 35 47 0\n\
        cpu0 625 125 325 2700 35 10 65 18 24 0\n\
        cpu1 625 125 325 2700 35 10 65 17 23 0\n\
        intr 22345 0 0\n";

    #[test]
    fn parses_the_aggregate_line_and_counts_cpus() {
        let t = CpuTimes::parse(EARLIER).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                user: 1000,
                nice: 200,
                system: 500,
                idle: 5000,
                iowait: 50,
                irq: 10,
                softirq: 40,
                steal: 5,
                guest: 7,
                guest_nice: 0,
                ncpus: 2,
            }
        );
    }

    #[test]
    fn split_is_percent_of_all_cpus_time() {
        let a = CpuTimes::parse(EARLIER).unwrap();
        let b = CpuTimes::parse(LATER).unwrap();
        let s = CpuSplit::between(&a, &b, 100);
        // (250 + 50) / 1000 = 30%; guest's 40 is not added again.
        assert_eq!(s.user_pct, 30.0);
        assert_eq!(s.system_pct, 15.0); // 150 / 1000
        assert_eq!(s.irq_pct, 1.0); // 10 / 1000
        assert_eq!(s.softirq_pct, 9.0); // 90 / 1000
        assert_eq!(s.steal_pct, 3.0); // 30 / 1000
        assert_eq!(s.iowait_pct, 2.0); // 20 / 1000
        assert_eq!(s.idle_pct, 40.0); // 400 / 1000
                                      // busy = 1000 - idle 400 - iowait 20 - steal 30 = 550 -> 55%
        assert_eq!(s.busy_pct, 55.0);
        assert_eq!(s.busy_cpu_s, 5.5); // 550 ticks / 100 Hz
        assert_eq!(s.elapsed_cpu_s, 10.0); // 1000 ticks / 100 Hz = 5 s × 2 CPUs
    }

    #[test]
    fn backwards_counter_counts_as_zero() {
        let a = CpuTimes {
            user: 100,
            idle: 100,
            iowait: 50,
            ncpus: 1,
            ..CpuTimes::default()
        };
        // iowait went from 50 to 40: delta 0, not a huge wrapped number.
        let b = CpuTimes {
            user: 150,
            idle: 150,
            iowait: 40,
            ncpus: 1,
            ..CpuTimes::default()
        };
        let s = CpuSplit::between(&a, &b, 100);
        assert_eq!(s.iowait_pct, 0.0);
        assert_eq!(s.user_pct, 50.0); // 50 / (50 + 50)
        assert_eq!(s.busy_pct, 50.0);
    }

    #[test]
    fn identical_samples_give_zeros() {
        let a = CpuTimes::parse(EARLIER).unwrap();
        assert_eq!(CpuSplit::between(&a, &a, 100), CpuSplit::default());
    }

    #[test]
    fn short_old_kernel_line_reads_missing_fields_as_zero() {
        let t = CpuTimes::parse("cpu 1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            (t.user, t.idle, t.iowait, t.steal, t.ncpus),
            (1, 4, 0, 0, 1)
        );
    }

    #[test]
    fn bad_stat_text_is_an_error_not_a_panic() {
        assert!(matches!(
            CpuTimes::parse("cpu0 1 2 3 4\n"),
            Err(ProcError::Missing { .. })
        ));
        assert!(matches!(
            CpuTimes::parse("cpu 1 2 3\ncpu0 1 2 3\n"),
            Err(ProcError::Missing { .. })
        ));
        assert!(matches!(CpuTimes::parse("cpu 1 2 x 4\ncpu0 1 2 3 4\n"),
            Err(ProcError::BadNumber { field, text, .. }) if field == "system" && text == "x"));
        assert!(matches!(
            CpuTimes::parse("cpu 1 2 3 4\n"),
            Err(ProcError::Missing { .. })
        ));
        assert!(CpuTimes::parse("").is_err());
        assert!(CpuTimes::parse("cpu -1 2 3 4\ncpu0 1 2 3 4").is_err());
    }

    #[test]
    fn process_stat_with_parentheses_and_spaces_in_the_name() {
        // Fields after the name: 3 state, 4 ppid, ..., 14 utime, 15 stime.
        let text = "4242 (my (weird) proc) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    731 289 0 0 20 0 5 0 98765 123456789 2048 18446744073709551615\n";
        let p = ProcessCpu::parse(text).unwrap();
        assert_eq!(
            p,
            ProcessCpu {
                utime_ticks: 731,
                stime_ticks: 289
            }
        );
        assert_eq!(p.total_ticks(), 1020);
    }

    #[test]
    fn process_delta_in_ticks_and_seconds() {
        let a = ProcessCpu {
            utime_ticks: 100,
            stime_ticks: 50,
        };
        let b = ProcessCpu {
            utime_ticks: 350,
            stime_ticks: 100,
        };
        // (350 + 100) - (100 + 50) = 300 ticks
        assert_eq!(a.delta_ticks(&b), 300);
        assert_eq!(a.delta_s(&b), 300.0 / ticks_per_second() as f64);
        assert_eq!(b.delta_ticks(&a), 0);
    }

    #[test]
    fn bad_process_stat_is_an_error() {
        assert!(ProcessCpu::parse("4242 (truncated").is_err());
        assert!(ProcessCpu::parse("4242 (short) S 1 2 3").is_err());
        assert!(ProcessCpu::parse("1 (x) S 1 1 1 0 -1 0 0 0 0 0 ab 2").is_err());
        assert!(ProcessCpu::parse("").is_err());
    }

    #[test]
    fn reads_this_machines_proc_files() {
        let a = CpuTimes::read().unwrap();
        assert!(a.ncpus >= 1);
        let own = self_cpu().unwrap();
        let by_pid = read_process(std::process::id()).unwrap();
        assert!(by_pid.total_ticks() >= own.total_ticks());
        let b = CpuTimes::read().unwrap();
        let s = CpuSplit::between(&a, &b, ticks_per_second());
        assert!((0.0..=100.0).contains(&s.busy_pct));
        assert!(ticks_per_second() >= 1);
    }
}
