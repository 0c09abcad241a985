//! The arithmetic of METHODOLOGY.md's metrics, as pure functions.
//!
//! Units: MB = 10^6 bytes (not MiB), KiB = 1024 bytes, CPU% is percent of
//! ALL CPUs (0–100). Every function returns `None` when its divisor is zero,
//! negative or not a number, rather than an infinity that would poison a
//! JSON file or a mean over runs.

const BYTES_PER_MB: f64 = 1_000_000.0;
const BYTES_PER_KIB: f64 = 1024.0;
const US_PER_S: f64 = 1_000_000.0;

/// `Some(numerator / divisor)` when the divisor is a positive number.
fn ratio(numerator: f64, divisor: f64) -> Option<f64> {
    (divisor > 0.0).then(|| numerator / divisor)
}

/// Service demand per I/O (netperf's definition): CPU-µs per command =
/// busy CPU-seconds × 10^6 ÷ commands.
pub fn service_demand_us_per_io(cpu_s: f64, ios: u64) -> Option<f64> {
    ratio(cpu_s * US_PER_S, ios as f64)
}

/// Service demand per KiB moved: CPU-µs per KiB = busy CPU-seconds × 10^6 ÷
/// (bytes ÷ 1024).
pub fn service_demand_us_per_kib(cpu_s: f64, bytes: u64) -> Option<f64> {
    ratio(cpu_s * US_PER_S, bytes as f64 / BYTES_PER_KIB)
}

/// Throughput in MB/s, MB = 10^6 bytes.
pub fn mb_per_s(bytes: u64, elapsed_s: f64) -> Option<f64> {
    ratio(bytes as f64 / BYTES_PER_MB, elapsed_s)
}

/// Completed commands per second.
pub fn iops(ios: u64, elapsed_s: f64) -> Option<f64> {
    ratio(ios as f64, elapsed_s)
}

/// CPU effectiveness as seed 000 defines it: MB/s per percent of CPU.
pub fn effectiveness_mb_per_s_per_cpu_pct(mb_per_s: f64, cpu_pct: f64) -> Option<f64> {
    ratio(mb_per_s, cpu_pct)
}

/// Iometer's "IOPS per % CPU".
pub fn iops_per_cpu_pct(iops: f64, cpu_pct: f64) -> Option<f64> {
    ratio(iops, cpu_pct)
}

/// CPU-seconds as percent of the whole machine over `elapsed_s`:
/// cpu_s ÷ (elapsed_s × ncpus) × 100, so one CPU busy on a 4-CPU machine is
/// 25%.
pub fn cpu_pct_of_machine(cpu_s: f64, elapsed_s: f64, ncpus: u32) -> Option<f64> {
    ratio(cpu_s * 100.0, elapsed_s * f64::from(ncpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_demand_per_io() {
        // 1.5 CPU-s × 10^6 / 300000 I/Os = 1.5e6 / 3e5 = 5.0 µs per I/O
        assert_eq!(service_demand_us_per_io(1.5, 300_000), Some(5.0));
        assert_eq!(service_demand_us_per_io(1.5, 0), None);
        assert_eq!(service_demand_us_per_io(0.0, 10), Some(0.0));
    }

    #[test]
    fn service_demand_per_kib() {
        // 300000 I/Os of 8 KiB = 2_457_600_000 bytes = 2_400_000 KiB;
        // 1.5e6 CPU-µs / 2.4e6 KiB = 0.625 µs per KiB
        assert_eq!(service_demand_us_per_kib(1.5, 300_000 * 8192), Some(0.625));
        // 1 CPU-s over 1 MiB = 1e6 µs / 1024 KiB = 976.5625
        assert_eq!(service_demand_us_per_kib(1.0, 1 << 20), Some(976.5625));
        assert_eq!(service_demand_us_per_kib(1.0, 0), None);
    }

    #[test]
    fn throughput_is_decimal_megabytes() {
        // 2^30 bytes in 2 s = 1_073_741_824 / 10^6 / 2 = 536.870912 MB/s
        assert_eq!(mb_per_s(1 << 30, 2.0), Some(536.870912));
        assert_eq!(mb_per_s(1000, 0.0), None);
        assert_eq!(mb_per_s(1000, -1.0), None);
        assert_eq!(mb_per_s(1000, f64::NAN), None);
    }

    #[test]
    fn iops_per_second() {
        // 300000 / 2.5 s = 120000
        assert_eq!(iops(300_000, 2.5), Some(120_000.0));
        assert_eq!(iops(1, 0.0), None);
    }

    #[test]
    fn effectiveness() {
        // 471.9 MB/s at 25% CPU = 18.876 MB/s per CPU%
        let e = effectiveness_mb_per_s_per_cpu_pct(471.9, 25.0).unwrap();
        assert!((e - 18.876).abs() < 1e-12);
        assert_eq!(iops_per_cpu_pct(120_000.0, 40.0), Some(3000.0));
        assert_eq!(effectiveness_mb_per_s_per_cpu_pct(1.0, 0.0), None);
        assert_eq!(iops_per_cpu_pct(1.0, 0.0), None);
    }

    #[test]
    fn cpu_percent_of_machine() {
        // 3 CPU-s over 10 s on 4 CPUs = 3 / 40 × 100 = 7.5%
        assert_eq!(cpu_pct_of_machine(3.0, 10.0, 4), Some(7.5));
        // one CPU fully busy on two CPUs = 50%
        assert_eq!(cpu_pct_of_machine(10.0, 10.0, 2), Some(50.0));
        assert_eq!(cpu_pct_of_machine(1.0, 10.0, 0), None);
        assert_eq!(cpu_pct_of_machine(1.0, 0.0, 2), None);
    }
}
