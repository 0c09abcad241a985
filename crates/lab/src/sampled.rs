//! A load generator's run as the lab samples it: the `/proc` counters at
//! the two ends of its window ([`Sample`]), the rates it reports itself
//! ([`Rates`]), and the `isoe bench` result made of them
//! ([`sampled_result`]), which fio, `isoe netprobe` and the applications
//! share.

use crate::record::{LabFigures, RunResult};
use isoe_bench::cpu::{self, CpuSplit, CpuTimes, ProcessCpu};
use isoe_bench::demand;
use isoe_bench::tcp::TcpCounters;
use isoe_bench::{BenchResult, DirectionResult, LatencySummary};

/// /proc counters at one instant of a load generator's run (fio, the
/// floor's `isoe netprobe`, an application's workload; the field keeps
/// fio's name, the first it sampled).
#[derive(Debug, Clone)]
pub struct Sample {
    /// /proc/stat.
    pub cpu: CpuTimes,
    /// The load generator's own CPU (all threads).
    pub fio: ProcessCpu,
    /// The target's CPU, when its PID is known.
    pub target: Option<ProcessCpu>,
    /// TCP counters of the load generator's network namespace.
    pub tcp: TcpCounters,
    /// TCP counters of the target's network namespace, when it has one of
    /// its own ([`target_tcp`]).
    pub target_tcp: Option<TcpCounters>,
    /// When.
    pub at: std::time::Instant,
}

impl Sample {
    /// Reads the counters; TCP ones through `/proc/FIO_PID/net`, which is
    /// the load generator's namespace.
    pub fn take(fio_pid: u32, target_pid: Option<u32>) -> Option<Sample> {
        let read = |path: String| std::fs::read_to_string(path).ok();
        let target = target_pid.and_then(|p| read(format!("/proc/{p}/stat")));
        let mut sample = Sample::parse(
            &read("/proc/stat".into())?,
            &read(format!("/proc/{fio_pid}/stat"))?,
            target.as_deref(),
            &read(format!("/proc/{fio_pid}/net/snmp"))?,
            &read(format!("/proc/{fio_pid}/net/netstat"))?,
            std::time::Instant::now(),
        )?;
        sample.target_tcp = target_pid.and_then(|p| target_tcp(p, fio_pid));
        Some(sample)
    }

    /// The counters from the texts of `/proc/stat`, the load generator's
    /// `/proc/PID/stat`, the target's (if known), and the load generator's
    /// `net/snmp` and `net/netstat`, read `at` (on another machine: when
    /// they were, on the lab's clock).
    pub fn parse(
        stat: &str,
        fio_stat: &str,
        target_stat: Option<&str>,
        snmp: &str,
        netstat: &str,
        at: std::time::Instant,
    ) -> Option<Sample> {
        Some(Sample {
            cpu: CpuTimes::parse(stat).ok()?,
            fio: ProcessCpu::parse(fio_stat).ok()?,
            target: target_stat.and_then(|t| ProcessCpu::parse(t).ok()),
            tcp: TcpCounters::parse(snmp, netstat).ok()?,
            target_tcp: None,
            at,
        })
    }
}

/// The TCP counters of `target_pid`'s network namespace (`/proc/PID/net`
/// shows the namespace of the process), or None when it is `load_pid`'s
/// too (the loopback topology: the figures would be the initiator's
/// again) or cannot be read.
pub fn target_tcp(target_pid: u32, load_pid: u32) -> Option<TcpCounters> {
    let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let target_ns = ns(target_pid)?;
    if ns(load_pid).is_none_or(|load_ns| load_ns == target_ns) {
        return None;
    }
    let read = |file: &str| std::fs::read_to_string(format!("/proc/{target_pid}/net/{file}")).ok();
    TcpCounters::parse(&read("snmp")?, &read("netstat")?).ok()
}

/// The rates, latencies and failures of a load generator's window: the
/// figures of an `isoe bench` result that are not the lab's CPU and TCP
/// samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// Commands per second (the run's metric for IOPS workloads).
    pub iops: f64,
    /// MB/s, MB = 10^6 bytes.
    pub mb_per_s: f64,
    /// Latency of all commands, µs.
    pub lat_us: LatencySummary,
    /// Reads alone.
    pub read: DirectionResult,
    /// Writes alone.
    pub write: DirectionResult,
    /// Length of the window the rates are of, s.
    pub elapsed_s: f64,
    /// Commands (or jobs) that failed.
    pub errors: u64,
}

/// An `isoe bench` result of `rates` with the CPU and TCP figures of two
/// samples, per I/O of `rates.iops` and per MB/s of its `mb_per_s`: the
/// initiator process's (the sampled process, fio or an application), the
/// target's when sampled, the host's split, TCP's segments; the window's
/// length as the lab's `cpu_window_s`. What the samples do not give (CPU
/// per KiB, IOPS per initiator CPU%, why a run stopped, the foreign load
/// as bench measures it) is None, and what a load generator other than
/// `isoe bench` does not report is absent.
pub fn sampled_result(
    rates: Rates,
    first: &Sample,
    last: &Sample,
    target_pid: Option<u32>,
) -> RunResult {
    let Rates {
        iops,
        mb_per_s,
        lat_us,
        read,
        write,
        elapsed_s,
        errors,
    } = rates;
    let window_s = last.at.duration_since(first.at).as_secs_f64();
    let split = CpuSplit::between(&first.cpu, &last.cpu, cpu::ticks_per_second());
    let ncpus = first.cpu.ncpus;
    // CPU-seconds per second of the window, times the measured rate: per I/O.
    let per_io = |cpu_s: f64| (iops > 0.0 && window_s > 0.0).then(|| cpu_s / window_s / iops * 1e6);
    let initiator_cpu_s = first.fio.delta_s(&last.fio);
    let target_cpu_s = match (&first.target, &last.target) {
        (Some(a), Some(b)) => Some(a.delta_s(b)),
        _ => None,
    };
    let pct = |cpu_s: f64| demand::cpu_pct_of_machine(cpu_s, window_s, ncpus);
    let efficiency = |p: f64| demand::effectiveness_mb_per_s_per_cpu_pct(mb_per_s, p);
    let tcp = first.tcp.delta(&last.tcp);
    let bench = BenchResult {
        iops,
        mb_per_s,
        ios: None,
        bytes: None,
        lat_us,
        read,
        write,
        per_url: None,
        initiator_cpu_s,
        initiator_cpu_pct: pct(initiator_cpu_s),
        initiator_cpu_us_per_io: per_io(initiator_cpu_s),
        initiator_cpu_us_per_kib: None,
        target_pid,
        target_cpu_s,
        target_cpu_pct: target_cpu_s.and_then(pct),
        target_cpu_us_per_io: target_cpu_s.and_then(per_io),
        target_cpu_us_per_kib: None,
        system_cpu_us_per_io: per_io(split.busy_cpu_s),
        system_cpu_us_per_kib: None,
        cpu: split,
        steal_pct: split.steal_pct,
        mb_per_s_per_cpu_pct: efficiency(split.busy_pct),
        iops_per_cpu_pct: demand::iops_per_cpu_pct(iops, split.busy_pct),
        initiator_mb_per_s_per_cpu_pct: pct(initiator_cpu_s).and_then(efficiency),
        initiator_iops_per_cpu_pct: None,
        target_mb_per_s_per_cpu_pct: target_cpu_s.and_then(pct).and_then(efficiency),
        out_segs: tcp.out_segs,
        retrans_segs: tcp.retrans_segs,
        retrans_pct: tcp.retrans_pct,
        dsack_segs: tcp.dsack_recv_segs,
        elapsed_s,
        interrupted: None,
        stopped: None,
        foreign: None,
        foreign_warning: None,
        errors,
        verify_errors: None,
        workload: None,
        units: None,
        started_at: None,
        host: None,
        series: None,
    };
    let mut result = RunResult {
        bench,
        runner: None,
        lab: LabFigures {
            cpu_window_s: Some(window_s),
            ..LabFigures::default()
        },
    };
    result.add_target_tcp(first.target_tcp.as_ref(), last.target_tcp.as_ref());
    result
}

/// For tests: two samples 4 s apart in which the machine was busy 3
/// CPU-seconds of 8 (two CPUs), the sampled process 2 CPU-seconds (100
/// user and 100 system ticks at 100 Hz) and the target 1, with no TCP
/// segments: what the floor's and the streams' results are checked on.
#[cfg(test)]
pub(crate) fn four_seconds_apart() -> (Sample, Sample) {
    let stat = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n";
    let later = "cpu  400 0 400 1200 0 0 0 0 0 0\ncpu0 200 0 200 600 0 0 0 0 0 0\n";
    let proc_stat =
        |ticks: u64| format!("1 (isoe) S 0 0 0 0 0 0 0 0 0 0 {ticks} {ticks} 0 0 20 0 1 0 0 0 0");
    let snmp = "Tcp: OutSegs RetransSegs\nTcp: 0 0\n";
    let netstat = "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n";
    let t0 = std::time::Instant::now();
    let first = Sample::parse(stat, &proc_stat(0), Some(&proc_stat(0)), snmp, netstat, t0)
        .expect("a sample");
    let last = Sample::parse(
        later,
        &proc_stat(100),
        Some(&proc_stat(50)),
        snmp,
        netstat,
        t0 + std::time::Duration::from_secs(4),
    )
    .expect("a sample");
    (first, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(out: u64, retrans: u64) -> TcpCounters {
        TcpCounters::parse(
            &format!("Tcp: OutSegs RetransSegs\nTcp: {out} {retrans}\n"),
            "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n",
        )
        .unwrap()
    }

    #[test]
    fn the_target_side_s_retransmissions_are_its_counters_delta() {
        let t0 = std::time::Instant::now();
        let stat = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n";
        let proc_stat = "1 (isoe) S 0 0 0 0 0 0 0 0 0 0 5 5 0 0 20 0 1 0 0 0 0";
        let snmp = "Tcp: OutSegs RetransSegs\nTcp: 10 0\n";
        let netstat = "TcpExt: TCPDSACKRecvSegs\nTcpExt: 0\n";
        let sample = |target: Option<TcpCounters>| {
            let mut s = Sample::parse(stat, proc_stat, None, snmp, netstat, t0).unwrap();
            s.target_tcp = target;
            s
        };
        let rates = Rates {
            iops: 1.0,
            mb_per_s: 1.0,
            lat_us: LatencySummary::default(),
            read: DirectionResult::default(),
            write: DirectionResult::default(),
            elapsed_s: 1.0,
            errors: 0,
        };
        let (a, b) = (
            sample(Some(counters(1_000, 7))),
            sample(Some(counters(21_000, 9))),
        );
        let json = sampled_result(rates.clone(), &a, &b, None).to_json();
        assert_eq!(json["target_tcp_out_segs"], 20_000);
        assert_eq!(json["target_tcp_retrans_segs"], 2);
        assert_eq!(json["target_tcp_retrans_pct"], 0.01);
        // Counters that went backwards (a namespace remade) count as none.
        let json = sampled_result(rates.clone(), &b, &a, None).to_json();
        assert_eq!(json["target_tcp_retrans_segs"], 0);
        // Not sampled at one end: no figure, not a zero.
        let json = sampled_result(rates, &a, &sample(None), None).to_json();
        assert!(json.get("target_tcp_retrans_pct").is_none(), "{json}");
    }

    #[test]
    fn a_target_in_the_load_s_own_namespace_gives_no_counters_of_its_own() {
        // This process as both: one namespace, whose figures are the load's.
        let me = std::process::id();
        assert_eq!(target_tcp(me, me), None);
        // A target that is gone.
        assert_eq!(target_tcp(u32::MAX, me), None);
    }
}
