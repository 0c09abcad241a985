//! The few socket calls std does not offer: per-call blocking mode
//! (`MSG_DONTWAIT`), vectored sends and receives with flags, epoll, and
//! TCP options.
//!
//! Sockets stay in blocking mode, so a lone connection with nothing to send
//! waits in `recv` itself: one system call per batch of responses instead of
//! `poll` + `recv`. Sends always pass `MSG_DONTWAIT`, so a full send buffer
//! never blocks the loop that must drain the receive side.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `recv(2)` into `buf`; `wait` false adds `MSG_DONTWAIT`. Ok(0) is end of stream.
pub fn recv(fd: RawFd, buf: &mut [u8], wait: bool) -> io::Result<usize> {
    let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
    // SAFETY: `buf` is a valid, writable region of `buf.len()` bytes for the
    // duration of the call; the kernel writes at most that many.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recvmsg(2)` into `slices`, filled in order; `wait` false adds
/// `MSG_DONTWAIT`. Ok(0) is end of stream, so `slices` must hold a byte.
pub fn recv_vectored(fd: RawFd, slices: &mut [IoSliceMut<'_>], wait: bool) -> io::Result<usize> {
    let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSliceMut is ABI-compatible with iovec on Unix (std guarantees it).
    msg.msg_iov = slices.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = slices.len() as _;
    // SAFETY: msg points at `slices`, writable regions that outlive the call
    // and that nothing else references while it runs (they are `&mut`); the
    // kernel writes at most each one's length.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `sendmsg(2)` of `slices` without blocking and without SIGPIPE.
pub fn send_vectored(fd: RawFd, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix (std guarantees it).
    msg.msg_iov = slices.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = slices.len() as _;
    // SAFETY: msg points at `slices`, which outlive the call; the kernel only reads them.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// An epoll set, closed when dropped.
pub struct Epoll {
    fd: OwnedFd,
    /// The kernel's answer to the last wait.
    raw: Vec<libc::epoll_event>,
}

impl std::fmt::Debug for Epoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoll").field("fd", &self.fd).finish()
    }
}

/// What an epoll registration waits for: input, and output when
/// `want_write` (level-triggered both).
pub fn interest(want_write: bool) -> u32 {
    let mut events = libc::EPOLLIN as u32;
    if want_write {
        events |= libc::EPOLLOUT as u32;
    }
    events
}

/// True when an epoll event says a recv will not block: input, hang-up or
/// an error.
pub fn readable(events: u32) -> bool {
    events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
}

impl Epoll {
    /// A new, empty set.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            // SAFETY: `fd` was just opened and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            raw: Vec::with_capacity(EVENTS_PER_WAIT),
        })
    }

    fn ctl(&self, op: i32, fd: RawFd, key: u64, events: u32) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: key };
        // SAFETY: `event` is a live epoll_event for the call's duration.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Adds `fd`, reported with `key`.
    pub fn add(&self, fd: RawFd, key: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, key, events)
    }

    /// Changes what `fd` is reported for, and with which key.
    pub fn modify(&self, fd: RawFd, key: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, key, events)
    }

    /// Takes `fd` out (a closed descriptor leaves by itself).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout` and puts (key, events) of the ready
    /// descriptors in `ready`, at most [`EVENTS_PER_WAIT`] of them; an
    /// interrupted wait is an empty one.
    pub fn wait(&mut self, ready: &mut Vec<(u64, u32)>, timeout: Duration) -> io::Result<()> {
        self.raw.clear();
        let n = self.wait_raw(timeout);
        ready.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(e);
        }
        // SAFETY: the kernel wrote the first `n` (at most the capacity).
        unsafe { self.raw.set_len(n as usize) };
        // Copied out by value: the struct is packed on x86-64.
        ready.extend(self.raw.iter().map(|e| ({ e.u64 }, { e.events })));
        Ok(())
    }
}

impl Epoll {
    /// `epoll_pwait2`, whose timeout is a timespec: `epoll_wait` counts in
    /// whole milliseconds, so a wait of less than one (the engine holds
    /// completions for one) returned at once and the loop spun, 27 system
    /// calls per I/O against a target slower than it. Kernels before 5.11
    /// (and seccomp filters that predate it) refuse it: there `epoll_wait`
    /// with the timeout rounded up.
    fn wait_raw(&mut self, timeout: Duration) -> i32 {
        static PWAIT2_MISSING: AtomicBool = AtomicBool::new(false);
        if !PWAIT2_MISSING.load(Ordering::Relaxed) {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `raw` has room for EVENTS_PER_WAIT epoll_event
            // structs, which the kernel writes; `ts` outlives the call; no
            // signal mask.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    self.raw.as_mut_ptr(),
                    EVENTS_PER_WAIT as libc::c_int,
                    &ts as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            } as i32;
            // ENOSYS before 5.11; EPERM from a seccomp filter that does
            // not know the call (container runtimes answer so).
            let missing = matches!(
                io::Error::last_os_error().raw_os_error(),
                Some(libc::ENOSYS | libc::EPERM)
            );
            if n >= 0 || !missing {
                return n;
            }
            PWAIT2_MISSING.store(true, Ordering::Relaxed);
        }
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        // SAFETY: as above.
        unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.raw.as_mut_ptr(),
                EVENTS_PER_WAIT as i32,
                ms,
            )
        }
    }
}

/// The most events one [`Epoll::wait`] takes.
pub const EVENTS_PER_WAIT: usize = 256;

/// Sets an integer socket option.
pub fn set_int_option(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is a live i32 and its size is given exactly.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// TCP_QUICKACK: acknowledge at once (the kernel clears it again, so it is set after each receive).
pub fn set_quickack(fd: RawFd) -> io::Result<()> {
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
}

/// SO_RCVLOWAT: a blocking receive, and `poll`, wake once this many bytes
/// are in (or the timeout passes); the kernel caps it at half the buffer.
pub fn set_rcvlowat(fd: RawFd, bytes: usize) -> io::Result<()> {
    let bytes = i32::try_from(bytes).unwrap_or(i32::MAX).max(1);
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn a_wait_shorter_than_a_millisecond_waits_rather_than_returning_at_once() {
        let mut epoll = Epoll::new().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        epoll.add(b.as_raw_fd(), 7, interest(false)).unwrap();
        let mut ready = Vec::new();
        // Nothing to read: each 300 µs wait sleeps out its time. Rounded
        // down to 0 ms it returned at once, thousands of times in 5 ms.
        let start = Instant::now();
        let mut waits = 0;
        while start.elapsed() < Duration::from_millis(5) {
            epoll.wait(&mut ready, Duration::from_micros(300)).unwrap();
            assert!(ready.is_empty());
            waits += 1;
        }
        assert!(waits <= 20, "{waits} waits in 5 ms");
        // Readable: reported with its key.
        std::io::Write::write_all(&mut &a, b"x").unwrap();
        epoll.wait(&mut ready, Duration::from_secs(5)).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].0, 7);
        assert!(readable(ready[0].1));
    }
}
