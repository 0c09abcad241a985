//! The two locks a claim holds on its file, as system calls: `flock(2)`
//! on the whole file (shared or exclusive), and an open file description
//! lock (`F_OFD_SETLK`) on one byte far past any data, the marker of the
//! identity that sharers present.
//!
//! Both belong to the open file description, not to the process: unlike
//! classic POSIX locks, closing another descriptor of the same file
//! elsewhere in the process drops neither, and both go when the last
//! descriptor of the description closes (the claim's, or the process's
//! end, even by SIGKILL).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The first byte of the markers' range: far past any file's data (files
/// are at most 2^63 bytes; locks are advisory and never touch data).
const MARKER_BASE: u64 = 1 << 61;

/// How many bytes the markers spread over.
const MARKER_SPAN: u64 = 1 << 48;

/// The byte whose read lock marks `identity`: one byte of the markers'
/// range chosen by the identity's FNV-1a hash, the same in every process
/// and every build.
pub(super) fn marker_of(identity: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in identity.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    MARKER_BASE + hash % MARKER_SPAN
}

/// `flock(2)` without waiting: an exclusive lock, a shared one, or none.
/// Converting a lock the description holds is not atomic: a conversion
/// that fails has dropped the lock held (flock(2)). False when another
/// description holds a conflicting lock.
pub(super) fn flock(file: &File, operation: libc::c_int) -> io::Result<bool> {
    debug_assert!(matches!(
        operation,
        libc::LOCK_EX | libc::LOCK_SH | libc::LOCK_UN
    ));
    loop {
        // SAFETY: the descriptor is open for as long as `file` is
        // borrowed; flock reads nothing else.
        let result = unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) };
        if result == 0 {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// A `struct flock` for one open file description lock of `kind` on
/// `len` bytes from `start`.
fn range(kind: libc::c_int, start: u64, len: u64) -> libc::flock {
    debug_assert!(start.checked_add(len).is_some_and(|end| end < 1 << 63));
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start as libc::off_t,
        l_len: len as libc::off_t,
        // Open file description locks take no process: 0 is required.
        l_pid: 0,
    }
}

/// Sets (`F_RDLCK`) or clears (`F_UNLCK`) the marker at byte `at`.
pub(super) fn set_marker(file: &File, at: u64, kind: libc::c_int) -> io::Result<()> {
    let lock = range(kind, at, 1);
    // SAFETY: `lock` is a valid struct flock for the duration of the
    // call, which reads it only; the descriptor is open while `file` is
    // borrowed.
    let result = unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_OFD_SETLK,
            &lock as *const libc::flock,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether another open file description than `file`'s marks any byte of
/// the markers' range but `own` (an identity other than `own`'s).
pub(super) fn other_marker(file: &File, own: u64) -> io::Result<bool> {
    let end = MARKER_BASE + MARKER_SPAN;
    for (start, len) in [(MARKER_BASE, own - MARKER_BASE), (own + 1, end - own - 1)] {
        if len == 0 {
            continue;
        }
        // A write lock is what a read lock conflicts with: asking whether
        // one could be set finds any marker; the description's own locks
        // never conflict with it.
        let mut probe = range(libc::F_WRLCK, start, len);
        // SAFETY: `probe` is a valid struct flock that the call reads and
        // fills in place; the descriptor is open while `file` is borrowed.
        let result = unsafe {
            libc::fcntl(
                file.as_raw_fd(),
                libc::F_OFD_GETLK,
                &mut probe as *mut libc::flock,
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        if probe.l_type != libc::F_UNLCK as libc::c_short {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_stable_and_inside_their_range() {
        let a = marker_of("MPATH-A1/6001405abcdef0123456789abcdef0a1");
        assert_eq!(a, marker_of("MPATH-A1/6001405abcdef0123456789abcdef0a1"));
        assert_ne!(a, marker_of("MPATH-A1/6001405abcdef0123456789abcdef0b2"));
        for identity in ["", "a", "MPATH-A1/6001405abcdef0123456789abcdef0a1"] {
            let at = marker_of(identity);
            assert!((MARKER_BASE..MARKER_BASE + MARKER_SPAN).contains(&at));
        }
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(
            marker_of(""),
            MARKER_BASE + 0xcbf2_9ce4_8422_2325 % MARKER_SPAN
        );
    }
}
