//! Who holds a claim this process could not take: the processes whose
//! `flock(2)` lock on the file `/proc/locks` lists, with their command
//! lines, so that the refusal names them instead of leaving the
//! administrator to find them.
//!
//! `/proc/locks` names a lock's file by its file system's device and its
//! inode. A file system may show `stat(2)` another device number than its
//! locks carry (btrfs subvolumes, overlayfs); a lock on an inode of the
//! same number is then taken as the file's only when the process has a
//! descriptor of the file. Another user's descriptors and working
//! directory are unreadable without privilege: such a holder is found only
//! by its device, and its relative arguments stay relative.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Lines of `/proc/locks` read, at most: a bound on the scan.
const LINES_MAX: usize = 65_536;

/// Holders named, at most.
const HOLDERS_MAX: usize = 8;

/// Descriptors of one process looked at, at most.
const FDS_MAX: usize = 65_536;

/// A process that holds a file another wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id, in this process's namespace.
    pub pid: u32,
    /// Its command line (`/proc/PID/cmdline`), one string per argument;
    /// empty when it cannot be read.
    pub command: Vec<String>,
    /// Its working directory (`/proc/PID/cwd`), which its relative
    /// arguments start from; None when it cannot be read.
    pub cwd: Option<PathBuf>,
}

impl Holder {
    fn of(pid: u32) -> Holder {
        let process = PathBuf::from(format!("/proc/{pid}"));
        let command = std::fs::read(process.join("cmdline"))
            .map(|bytes| {
                bytes
                    .split(|b| *b == 0)
                    .filter(|arg| !arg.is_empty())
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let cwd = std::fs::read_link(process.join("cwd")).ok();
        Holder { pid, command, cwd }
    }
}

/// The device's major and minor numbers, as the kernel splits a `dev_t`
/// (glibc's `major` and `minor`).
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    (major, minor)
}

/// A `/proc/locks` line's flock(2) lock: its process and its file's
/// device (major, minor) and inode. None for other kinds of lock and for
/// waiters (`->`).
fn flock_entry(line: &str) -> Option<(u32, (u64, u64), u64)> {
    // "1: FLOCK  ADVISORY  WRITE 3711 fe:00:5324826 0 EOF"
    let mut fields = line.split_whitespace().skip(1);
    if fields.next()? != "FLOCK" {
        return None;
    }
    let pid = fields.nth(2)?.parse().ok()?;
    let mut file = fields.next()?.split(':');
    let major = u64::from_str_radix(file.next()?, 16).ok()?;
    let minor = u64::from_str_radix(file.next()?, 16).ok()?;
    let inode = file.next()?.parse().ok()?;
    Some((pid, (major, minor), inode))
}

/// Whether process `pid` has a descriptor of the file `meta` describes.
fn has_open(pid: u32, meta: &std::fs::Metadata) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().take(FDS_MAX).any(|fd| {
        std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    })
}

/// The processes that hold a flock(2) lock on the file `meta` describes,
/// at most [`HOLDERS_MAX`], in `/proc/locks`'s order.
pub(super) fn holders(meta: &std::fs::Metadata) -> Vec<Holder> {
    holders_in(Path::new("/proc/locks"), meta)
}

fn holders_in(locks: &Path, meta: &std::fs::Metadata) -> Vec<Holder> {
    let Ok(text) = std::fs::read_to_string(locks) else {
        return Vec::new();
    };
    let device = major_minor(meta.dev());
    let mut pids: Vec<u32> = Vec::new();
    for (pid, dev, inode) in text.lines().take(LINES_MAX).filter_map(flock_entry) {
        // pid 0: a process of a namespace this one cannot see.
        if inode != meta.ino() || pid == 0 || pids.contains(&pid) || pids.len() == HOLDERS_MAX {
            continue;
        }
        if dev == device || has_open(pid, meta) {
            pids.push(pid);
        }
    }
    pids.into_iter().map(Holder::of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flock_lines_are_read_and_others_left() {
        assert_eq!(
            flock_entry("1: FLOCK  ADVISORY  WRITE 3711 fe:00:5324826 0 EOF"),
            Some((3711, (0xfe, 0), 5_324_826))
        );
        assert_eq!(
            flock_entry("7: FLOCK  ADVISORY  READ 12 103:02:77 0 EOF"),
            Some((12, (0x103, 2), 77))
        );
        let ofd =
            "2: OFDLCK ADVISORY  READ -1 fe:00:5324826 2305843009213693952 2305843009213693952";
        assert_eq!(flock_entry(ofd), None);
        assert_eq!(
            flock_entry("1: -> FLOCK  ADVISORY  WRITE 3712 fe:00:5324826 0 EOF"),
            None
        );
        assert_eq!(flock_entry(""), None);
    }

    #[test]
    fn device_numbers_split_as_the_kernel_does() {
        assert_eq!(major_minor(0xfe00), (0xfe, 0));
        assert_eq!(major_minor(0x0803), (8, 3));
        // Large numbers keep their high bits in the upper half: glibc's
        // makedev(0x1234, 0x56789).
        assert_eq!(major_minor(0x1000_5672_3489), (0x1234, 0x56789));
    }

    #[test]
    fn a_lock_on_another_device_is_not_taken_for_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let (major, minor) = major_minor(meta.dev());
        let me = std::process::id();
        let locks = dir.path().join("locks");
        // This process has no descriptor of the file: only the line that
        // names its device counts.
        let text = format!(
            "1: FLOCK  ADVISORY  WRITE {me} {:02x}:{:02x}:{} 0 EOF\n\
             2: FLOCK  ADVISORY  WRITE 1 {:02x}:{:02x}:{} 0 EOF\n",
            major + 1,
            minor,
            meta.ino(),
            major,
            minor,
            meta.ino()
        );
        std::fs::write(&locks, text).unwrap();
        let pids: Vec<u32> = holders_in(&locks, &meta).iter().map(|h| h.pid).collect();
        assert_eq!(pids, [1]);
    }
}
