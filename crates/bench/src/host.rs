//! The machine a result was measured on.

use serde::{Deserialize, Serialize};

use crate::cpu::CpuTimes;

const OSRELEASE: &str = "/proc/sys/kernel/osrelease";

/// Kernel and CPU count, recorded with every result.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Host {
    /// `uname -r`, from `/proc/sys/kernel/osrelease`; "unknown" if unreadable.
    pub kernel_release: String,
    /// CPUs in `/proc/stat`; the denominator of every CPU%.
    pub ncpus: u32,
}

impl Host {
    /// Reads this machine's kernel release and CPU count. What cannot be
    /// read is recorded as "unknown" / 0 rather than failing a finished run.
    pub fn read() -> Host {
        let kernel_release = std::fs::read_to_string(OSRELEASE)
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".to_string());
        let ncpus = CpuTimes::read().map(|t| t.ncpus).unwrap_or(0);
        Host {
            kernel_release,
            ncpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_machine() {
        let h = Host::read();
        assert!(h.ncpus >= 1);
        assert_ne!(h.kernel_release, "unknown");
        assert!(!h.kernel_release.contains('\n'));
    }
}
