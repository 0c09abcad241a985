//! The few socket calls std does not offer: per-call blocking mode
//! (`MSG_DONTWAIT`), vectored sends and receives with flags, `poll(2)`,
//! and TCP options.
//!
//! Sockets stay in blocking mode, so a lone connection with nothing to send
//! waits in `recv` itself: one system call per batch of responses instead of
//! `poll` + `recv`. Sends always pass `MSG_DONTWAIT`, so a full send buffer
//! never blocks the loop that must drain the receive side.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::RawFd;
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

/// One descriptor's interest and readiness for [`poll`].
pub type PollFd = libc::pollfd;

/// A pollfd asking for input, and for output when `want_write`.
pub fn poll_fd(fd: RawFd, want_write: bool) -> PollFd {
    let mut events = libc::POLLIN;
    if want_write {
        events |= libc::POLLOUT;
    }
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// True when poll reported input, hang-up or an error (a recv will not block).
pub fn readable(p: &PollFd) -> bool {
    p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// `poll(2)` with a timeout; returns how many descriptors are ready.
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        Err(e)
    } else {
        Ok(n as usize)
    }
}

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
