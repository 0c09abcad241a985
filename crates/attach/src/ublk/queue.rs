//! One ublk I/O queue: /dev/ublkcN, the request descriptors the kernel
//! shares (mmapped read-only), one buffer per tag, and the io_uring that
//! carries FETCH_REQ and COMMIT_AND_FETCH_REQ.
//!
//! The kernel binds a queue to the thread that sent its FETCH_REQs (its
//! "daemon"): every later command for the queue must come from that
//! thread, and the kernel copies a write's data into our buffer in that
//! thread's task work (on its way back from a system call) before the CQE
//! shows. [`Queue::fetch_all`] is therefore called from the serving thread,
//! not from the one that created the queue.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::sys::{self, IoCmd, IoDesc};
use super::UblkError;
use crate::device::{Op, Request};

/// user_data of the CQEs that only wake the serving thread (the NOP
/// posted at creation, the control thread's MSG_RING); a tag's commands
/// carry the tag.
pub(crate) const WAKE: u64 = 1 << 32;

/// How long to wait for /dev/ublkcN to appear (devtmpfs makes it at once;
/// a system without it waits for udev).
const CDEV_WAIT: Duration = Duration::from_secs(5);

/// Where a tag is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// No FETCH_REQ sent yet.
    Idle,
    /// FETCH_REQ or COMMIT_AND_FETCH_REQ queued or in the kernel: waiting
    /// for a request.
    InKernel,
    /// A request handed out and not completed: its op and length.
    Serving { op: u8, bytes: u32 },
    /// The kernel aborted the fetch (device stopping): no more requests.
    Aborted,
}

/// The descriptor array, mapped read-only from /dev/ublkcN.
struct Descs {
    ptr: NonNull<IoDesc>,
    map_len: usize,
    depth: u16,
}

// SAFETY: the mapping is owned by Descs alone (unmapped in its Drop) and
// only read; moving it to another thread moves nothing the kernel relies on.
unsafe impl Send for Descs {}

impl Descs {
    fn map(cdev: &File, depth: u16) -> io::Result<Descs> {
        let page = page_size();
        let bytes = depth as usize * std::mem::size_of::<IoDesc>();
        let map_len = bytes.div_ceil(page) * page;
        // SAFETY: a new shared read-only mapping of the char device's
        // descriptor area for queue 0 (offset UBLKSRV_CMD_BUF_OFFSET), of
        // the size the kernel requires (the descriptors rounded up to a
        // page); no existing memory is touched. It is unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                cdev.as_raw_fd(),
                sys::UBLKSRV_CMD_BUF_OFFSET,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<IoDesc>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Descs {
            ptr,
            map_len,
            depth,
        })
    }

    /// The kernel's description of the request now on `tag`.
    fn get(&self, tag: u16) -> IoDesc {
        assert!(tag < self.depth);
        // SAFETY: tag < depth, so the descriptor lies inside the mapping
        // (depth descriptors, rounded up to pages), which stays mapped while
        // self lives; IoDesc is plain old data, properly aligned (the
        // mapping is page-aligned, descriptors 24 bytes with 8-byte
        // fields). The kernel wrote it before completing the fetch whose
        // CQE we just read (the CQ tail is read with acquire ordering), and
        // does not write it again before our next command for the tag; the
        // read is volatile since the memory is shared with the kernel.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(tag as usize)) }
    }
}

impl Drop for Descs {
    fn drop(&mut self) {
        // SAFETY: ptr and map_len are exactly what mmap returned and was
        // given; nothing refers into the mapping after this.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.map_len);
        }
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Opens /dev/ublkcN, waiting for the node to appear.
fn open_cdev(path: &Path) -> Result<File, UblkError> {
    let deadline = Instant::now() + CDEV_WAIT;
    loop {
        match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(UblkError::CharDeviceMissing {
                    path: path.to_path_buf(),
                    waited: CDEV_WAIT,
                })
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
                return Err(UblkError::NeedsRoot {
                    what: format!("opening {}", path.display()),
                })
            }
            Err(e) => {
                return Err(UblkError::CharDevice {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
        }
    }
}

pub(crate) struct Queue {
    // Field order is drop order: the ring goes first (cancelling our
    // commands), then the mapping, then the char device.
    ring: IoUring<squeue::Entry, cqueue::Entry>,
    descs: Descs,
    cdev: File,
    depth: u16,
    /// Bytes per tag's buffer.
    buf_bytes: usize,
    bufs: Vec<Vec<u8>>,
    /// Each tag's allocation as made: (address, capacity).
    allocs: Vec<(usize, usize)>,
    tags: Vec<Tag>,
    aborted: u16,
    /// Tags whose request has an op we do not serve: completed with
    /// EOPNOTSUPP once the CQ is drained.
    refuse: Vec<u16>,
    /// A failure in complete() (which cannot return one), for the next
    /// flush or take.
    deferred: Option<io::Error>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if self.tags.contains(&Tag::InKernel) {
            // Fetches still in the kernel (the device did not stop): the
            // ring's teardown cancels them asynchronously, and a request
            // racing it could still be copied into its tag's buffer. Leak the
            // buffers rather than free memory the kernel may write.
            std::mem::forget(std::mem::take(&mut self.bufs));
        }
    }
}

impl Queue {
    /// Opens /dev/ublkc`dev_id`, maps its descriptors, allocates the
    /// buffers and the ring. Sends nothing to the device yet; the ring's
    /// fd is readable at once (a NOP's completion), so that a loop that
    /// polls it first comes round to fetch.
    pub(crate) fn open(dev_id: u32, depth: u16, buf_bytes: usize) -> Result<Queue, UblkError> {
        let path = PathBuf::from(format!("/dev/ublkc{dev_id}"));
        let cdev = open_cdev(&path)?;
        let descs = Descs::map(&cdev, depth).map_err(|e| UblkError::Io {
            what: format!("mapping the request descriptors of {}", path.display()),
            source: e,
        })?;
        let entries = u32::from(depth).next_power_of_two().max(8);
        let mut ring = IoUring::<squeue::Entry, cqueue::Entry>::builder()
            .setup_submit_all()
            .setup_cqsize(entries * 2)
            .build(entries)
            .map_err(UblkError::IoUring)?;
        let mut bufs = Vec::with_capacity(depth as usize);
        let mut allocs = Vec::with_capacity(depth as usize);
        for _ in 0..depth {
            // Zeroed (calloc: pages come on first touch) and allocated once:
            // the kernel is told each one's address with every command.
            let buf = vec![0u8; buf_bytes];
            allocs.push((buf.as_ptr() as usize, buf.capacity()));
            bufs.push(buf);
        }
        let nop = opcode::Nop::new().build().user_data(WAKE);
        // SAFETY: a NOP refers to no memory.
        unsafe { ring.submission().push(&nop) }.expect("an empty ring has room");
        ring.submit().map_err(UblkError::IoUring)?;
        Ok(Queue {
            ring,
            descs,
            cdev,
            depth,
            buf_bytes,
            bufs,
            allocs,
            tags: vec![Tag::Idle; depth as usize],
            aborted: 0,
            refuse: Vec::new(),
            deferred: None,
        })
    }

    pub(crate) fn ring_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    pub(crate) fn depth(&self) -> u16 {
        self.depth
    }

    /// Every tag aborted: the device stopped.
    pub(crate) fn all_aborted(&self) -> bool {
        self.aborted == self.depth
    }

    /// Sends FETCH_REQ for every tag, from the thread that will serve the
    /// queue (see the module doc).
    pub(crate) fn fetch_all(&mut self) -> io::Result<()> {
        for tag in 0..self.depth {
            debug_assert_eq!(self.tags[tag as usize], Tag::Idle);
            self.push_cmd(sys::UBLK_U_IO_FETCH_REQ, tag, 0)?;
            self.tags[tag as usize] = Tag::InKernel;
        }
        self.submit()
    }

    /// Queues a FETCH or COMMIT_AND_FETCH for `tag` with `result`.
    fn push_cmd(&mut self, op: u32, tag: u16, result: i32) -> io::Result<()> {
        let cmd = IoCmd {
            q_id: 0,
            tag,
            result,
            addr: self.bufs[tag as usize].as_mut_ptr() as u64,
        };
        let sqe = opcode::UringCmd16::new(types::Fd(self.cdev.as_raw_fd()), op)
            .cmd(cmd.to_sqe_cmd())
            .build()
            .user_data(u64::from(tag));
        loop {
            // SAFETY: the command's only pointer is the tag's buffer, which
            // the queue owns and keeps (allocated once, never freed or
            // shrunk while the tag is in the kernel: take_buffer is only
            // allowed between the request's CQE and complete()) until the
            // ring is dropped, which is before the buffers.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            // Full (cannot happen with one entry per tag, but be safe).
            self.submit()?;
        }
    }

    /// Submits what is queued, without waiting for anything.
    fn submit(&mut self) -> io::Result<()> {
        while !self.ring.submission().is_empty() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// See [`crate::BlockDevice::take_requests`]; Ok(false) once every tag
    /// is aborted.
    pub(crate) fn take(&mut self, out: &mut Vec<Request>) -> io::Result<bool> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        self.submit()?;
        let mut failure = None;
        let cq = self.ring.completion();
        for cqe in cq {
            let ud = cqe.user_data();
            if ud >= WAKE {
                continue;
            }
            let tag = ud as u16;
            let res = cqe.result();
            let slot = &mut self.tags[tag as usize];
            if res == sys::UBLK_IO_RES_OK {
                let d = self.descs.get(tag);
                let bytes = u64::from(d.nr_sectors) * 512;
                let op = match d.op() {
                    sys::UBLK_IO_OP_READ => Some(Op::Read),
                    sys::UBLK_IO_OP_WRITE => Some(Op::Write),
                    sys::UBLK_IO_OP_FLUSH => Some(Op::Flush),
                    sys::UBLK_IO_OP_DISCARD => Some(Op::Discard),
                    sys::UBLK_IO_OP_WRITE_ZEROES => Some(Op::WriteZeroes),
                    _ => None,
                };
                // A flush has no position (the block layer leaves its
                // sector at -1): say 0.
                let offset = match op {
                    Some(Op::Flush) => Some(0),
                    _ => d.start_sector.checked_mul(512),
                };
                let fits = offset.is_some()
                    && match op {
                        Some(Op::Read | Op::Write) => bytes <= self.buf_bytes as u64,
                        _ => bytes <= u64::from(u32::MAX),
                    };
                *slot = Tag::Serving {
                    op: d.op(),
                    bytes: bytes as u32,
                };
                match op {
                    Some(op) if fits => out.push(Request {
                        tag,
                        op,
                        offset: offset.unwrap_or(0),
                        len: bytes as u32,
                        fua: d.op_flags & sys::UBLK_IO_F_FUA != 0,
                        no_unmap: d.op_flags & sys::UBLK_IO_F_NOUNMAP != 0,
                    }),
                    _ => {
                        tracing::debug!(tag, op = d.op(), bytes, "ublk: refusing a request");
                        self.refuse.push(tag);
                    }
                }
            } else if res == sys::UBLK_IO_RES_ABORT {
                if *slot != Tag::Aborted {
                    *slot = Tag::Aborted;
                    self.aborted += 1;
                }
            } else {
                // The kernel refused our command (a bug of ours, or a
                // command from the wrong thread): this tag is lost.
                let err = io::Error::from_raw_os_error(-res);
                tracing::error!(tag, %err, "ublk: an I/O command failed");
                if *slot != Tag::Aborted {
                    *slot = Tag::Aborted;
                    self.aborted += 1;
                }
                failure.get_or_insert(io::Error::new(
                    err.kind(),
                    format!("ublk: the kernel refused the I/O command for tag {tag}: {err}"),
                ));
            }
        }
        while let Some(tag) = self.refuse.pop() {
            self.commit(tag, -libc::EOPNOTSUPP);
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(!self.all_aborted())
    }

    /// Fails (EIO) every request handed out and not completed: for Drop,
    /// when whoever held them is gone. A buffer that was lent and not
    /// returned is replaced.
    pub(crate) fn fail_held(&mut self) -> usize {
        let mut n = 0;
        for tag in 0..self.depth {
            if let Tag::Serving { .. } = self.tags[tag as usize] {
                let buf = std::mem::take(&mut self.bufs[tag as usize]);
                self.complete(tag, buf, Err(libc::EIO));
                n += 1;
            }
        }
        n
    }

    /// See [`crate::BlockDevice::take_buffer`].
    pub(crate) fn take_buffer(&mut self, tag: u16) -> Vec<u8> {
        debug_assert!(
            matches!(self.tags[tag as usize], Tag::Serving { .. }),
            "take_buffer({tag}) with no request on the tag"
        );
        std::mem::take(&mut self.bufs[tag as usize])
    }

    /// See [`crate::BlockDevice::complete`].
    pub(crate) fn complete(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>) {
        self.restore(tag, buffer);
        let Tag::Serving { op, bytes } = self.tags[tag as usize] else {
            debug_assert!(false, "complete({tag}) with no request on the tag");
            tracing::error!(tag, "ublk: completion for a tag with no request");
            return;
        };
        let res = match result {
            // The kernel wants the bytes done for a read or write (0 would
            // fail a read), and 0 for the others.
            Ok(()) if op == sys::UBLK_IO_OP_READ || op == sys::UBLK_IO_OP_WRITE => {
                i32::try_from(bytes).unwrap_or(i32::MAX)
            }
            Ok(()) => 0,
            Err(errno) if errno > 0 => -errno,
            Err(errno) if errno < 0 => errno,
            Err(_) => -libc::EIO,
        };
        self.commit(tag, res);
    }

    fn commit(&mut self, tag: u16, res: i32) {
        self.tags[tag as usize] = Tag::InKernel;
        if let Err(e) = self.push_cmd(sys::UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, res) {
            self.deferred.get_or_insert(e);
        }
    }

    /// Puts `tag`'s buffer back, `buf_bytes` long again.
    fn restore(&mut self, tag: u16, mut buf: Vec<u8>) {
        let (addr, cap) = self.allocs[tag as usize];
        debug_assert!(
            buf.as_ptr() as usize == addr || buf.capacity() == 0,
            "tag {tag}'s buffer came back as another allocation"
        );
        if buf.len() >= self.buf_bytes {
            buf.truncate(self.buf_bytes);
        } else if buf.as_ptr() as usize == addr && buf.capacity() == cap {
            // SAFETY: this is the allocation made for the tag by
            // `vec![0u8; buf_bytes]`: its first buf_bytes (<= cap) bytes were
            // initialized then, and since then have only been written with
            // initialized bytes (by the kernel, or by safe code through the
            // Vec; shortening a Vec leaves its bytes as they are). The
            // serving code may have truncated it; this restores the length.
            unsafe { buf.set_len(self.buf_bytes) };
        } else {
            // Some other allocation: make it whole the safe way (this also
            // tells the kernel its address with the next command).
            buf.resize(self.buf_bytes, 0);
            self.allocs[tag as usize] = (buf.as_ptr() as usize, buf.capacity());
        }
        self.bufs[tag as usize] = buf;
    }

    /// See [`crate::BlockDevice::flush`].
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        self.submit()
    }

    /// Waits up to `timeout` for a CQE (for Drop's drain; runs our task
    /// work too).
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
