//! How the serving thread is scheduled.
//!
//! The kernel's initiator finishes a command in softirq, the moment its
//! answer arrives, ahead of every process; `isoe attach` finishes it in its
//! serving thread, which waits its turn on a busy CPU, at every request and
//! again at every answer. [`Scheduling::Realtime`] runs that thread at
//! SCHED_FIFO's lowest priority, so that it takes the CPU as soon as
//! something wakes it, as softirq work does, bounded by the kernel's
//! real-time throttling (`sched_rt_runtime_us`, 95% of a CPU by default).
//!
//! It is not the default, because it measured worse: in the test bed's VM
//! (Linux 6.18 under TCG, 2 vCPUs), 4 KiB random reads at QD 1 took a p50
//! of 1.63-1.71 ms with it and 1.47-1.50 ms without, and beside two CPU
//! hogs 3.92-3.95 ms against 2.28-2.38 ms (two interleaved rounds; the
//! kernel initiator: 0.73-0.79 ms idle, 0.82-2.57 ms beside the hogs).
//! What the serving thread waits for is its own system calls and wakeups,
//! not the CPU (docs/ADMINISTRATION.md, "Latency beside busy
//! applications"). It stays an option for hosts where it measures better.
//!
//! The policy is set with SCHED_RESET_ON_FORK: the threads and processes
//! the serving thread starts (a background login, a control command) run
//! as ordinary ones.

use crate::settings::Scheduling;
use std::io;

/// Applies `policy` to the calling thread. An error (no CAP_SYS_NICE, a
/// container's limit, `RestrictRealtime=`) leaves the thread as it was.
pub fn apply(policy: Scheduling) -> io::Result<()> {
    let (class, priority) = match policy {
        Scheduling::Realtime => (libc::SCHED_FIFO, 1),
        Scheduling::Normal => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is the
    // calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, class | libc::SCHED_RESET_ON_FORK, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_is_always_allowed_and_realtime_needs_the_privilege() {
        // On a thread of its own, so that the test harness's is untouched.
        std::thread::spawn(|| {
            apply(Scheduling::Normal).unwrap();
            // SAFETY: asks the calling thread's policy; no memory.
            let policy = unsafe { libc::sched_getscheduler(0) };
            assert_eq!(policy & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
            match apply(Scheduling::Realtime) {
                Ok(()) => {
                    // SAFETY: as above.
                    let policy = unsafe { libc::sched_getscheduler(0) };
                    assert_eq!(policy, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK);
                }
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
            }
        })
        .join()
        .unwrap();
    }
}
