//! The bound on a ublk disk whose `isoe attach` died.
//!
//! ublk devices are made with user recovery ([`crate::ublk::FLAGS`]): when
//! the serving process dies (SIGKILL, a crash), the kernel holds the disk
//! quiesced, its requests queued, until a new server resumes it. That is
//! what lets a restarted attach resume the disk under a mounted file
//! system, but with nobody to resume it the requests wait for ever, and
//! the processes that issued them sit in uninterruptible sleep (D state),
//! which no signal ends.
//!
//! So each attach of a ublk disk starts a guard: a small process of its
//! own (`isoe attach-guard`, in a process group of its own, so that a
//! terminal's Ctrl-C reaches the attach alone) that waits for the attach
//! to end. An attach that ends cleanly has removed its disk, and the guard
//! ends too. One that died leaves the disk orphaned: the guard waits up to
//! the bound (the replacement timeout, the time requests may wait for a
//! lost session) for a new attach to resume it, and otherwise deletes it,
//! which fails the queued requests (EIO) and removes the disk, and removes
//! the dead attach's record. It never touches a disk that a live process
//! serves.

use crate::state;
use crate::ublk::{self, UblkError};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden subcommand of `isoe` that runs [`watch`].
pub const SUBCOMMAND: &str = "attach-guard";

/// How often the guard looks at the orphaned disk.
const POLL: Duration = Duration::from_millis(250);

/// What the guard watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// The ublk device (N of /dev/ublkbN).
    pub dev_id: u32,
    /// The attach serving it.
    pub pid: u32,
    /// The attach's name, whose record goes with the disk.
    pub name: String,
    /// How long the disk may wait, orphaned, for a new attach.
    pub bound: Duration,
}

/// How the watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The disk was gone when the attach ended, or went meanwhile (the
    /// attach removed it, or `isoe detach` deleted it).
    Gone,
    /// Another process serves it now (a new attach resumed it).
    Resumed { pid: i32 },
    /// Nobody resumed it within the bound: deleted.
    Deleted,
}

/// Starts the guard of `g` as `exe attach-guard ...`: stdin and stdout
/// closed, stderr (the log) shared with the attach.
pub fn spawn(exe: &Path, g: &Guarded) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    Command::new(exe)
        .arg(SUBCOMMAND)
        .args(["--ublk-id", &g.dev_id.to_string()])
        .args(["--pid", &g.pid.to_string()])
        .args(["--name", &g.name])
        .args(["--bound", &g.bound.as_secs().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
}

/// Waits for `g.pid` to end, then for the disk to be resumed or removed
/// within `g.bound`; deletes it past that.
pub fn watch(g: &Guarded) -> Result<Outcome, UblkError> {
    wait_for_exit(g.pid);
    let deadline = Instant::now() + g.bound;
    let mut said = false;
    loop {
        let info = match ublk::info(g.dev_id) {
            Ok(info) => info,
            Err(UblkError::Kernel {
                errno: libc::ENODEV,
                ..
            }) => return Ok(Outcome::Gone),
            Err(e) => return Err(e),
        };
        if info.pid_alive && info.pid != g.pid as i32 {
            tracing::info!(
                target: "isoe::attach",
                "ublk device {} ({}) was resumed by process {}",
                g.dev_id,
                g.name,
                info.pid
            );
            return Ok(Outcome::Resumed { pid: info.pid });
        }
        // Stopped (an attach that ended cleanly deletes its disk without
        // waiting for the kernel to finish): no request is held, and it
        // goes by itself.
        let stopped = info.state == ublk::sys::state_name(ublk::sys::UBLK_S_DEV_DEAD);
        if !said && !stopped {
            said = true;
            tracing::warn!(
                target: "isoe::attach",
                "the attach of {} (pid {}) ended without removing /dev/ublkb{}: its requests \
                 wait for an attach of that name to resume it, for {} s at most",
                g.name,
                g.pid,
                g.dev_id,
                g.bound.as_secs()
            );
        }
        if Instant::now() >= deadline {
            return delete(g, stopped);
        }
        std::thread::sleep(POLL);
    }
}

fn delete(g: &Guarded, stopped: bool) -> Result<Outcome, UblkError> {
    match ublk::delete_dead(g.dev_id) {
        Ok(()) => {}
        Err(UblkError::Kernel {
            errno: libc::ENODEV,
            ..
        }) => return Ok(Outcome::Gone),
        // Resumed in the last moment.
        Err(UblkError::InUse { pid, .. }) => return Ok(Outcome::Resumed { pid }),
        Err(e) => return Err(e),
    }
    state::remove_if_pid(&g.name, g.pid);
    if stopped {
        tracing::debug!(target: "isoe::attach", "deleted the stopped /dev/ublkb{}", g.dev_id);
        return Ok(Outcome::Deleted);
    }
    tracing::error!(
        target: "isoe::attach",
        "no attach resumed /dev/ublkb{} ({}) within {} s of its attach's end: deleted it, \
         and its queued requests failed",
        g.dev_id,
        g.name,
        g.bound.as_secs()
    );
    Ok(Outcome::Deleted)
}

/// Returns once process `pid` has ended: pidfd_open(2) and poll(2) where
/// the kernel has them (5.3+), else a look at /proc every [`POLL`].
fn wait_for_exit(pid: u32) {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor or -1; it reads no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    if let Ok(fd) = i32::try_from(fd) {
        if fd >= 0 {
            // SAFETY: the descriptor is new and nobody else owns it.
            let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut poll = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            loop {
                // SAFETY: `poll` is one valid pollfd, borrowed for the call.
                let n = unsafe { libc::poll(&mut poll, 1, -1) };
                if n > 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return;
                }
            }
        }
    }
    while state::pid_alive(pid) {
        std::thread::sleep(POLL);
    }
}
