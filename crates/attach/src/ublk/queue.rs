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
//!
//! Two data paths, chosen when the device is added ([`DataPath`]):
//! - **copy**: the kernel copies a write's data into the tag's buffer
//!   before the request shows, and a read's data out of it when the
//!   request is committed. A read thus costs two copies (socket to
//!   buffer, buffer to the request's pages), one more than the kernel's
//!   own initiator makes.
//! - **zero copy** (6.16+: `UBLK_F_AUTO_BUF_REG`): the kernel registers
//!   each request's pages in the ring's buffer table at the tag's index
//!   while the request is ours. The large Data-In of a read is received
//!   from the socket straight into them (`READ_FIXED` on the socket,
//!   [`DataPlane`]): one copy, as in the kernel's initiator. Bytes that
//!   reached the tag's buffer instead (small PDUs, or the first bytes that
//!   came with a header) are written to the request with `pwrite` on the
//!   char device when it completes (`UBLK_F_USER_COPY`). A large write's
//!   data is sent from the request's pages (`WRITE_FIXED` on the socket
//!   after the header's `sendmsg`): one copy, never into the tag's buffer.
//!   A small one is read into the tag's buffer with `pread` when it comes
//!   ([`SEND_FROM_PAGES_MIN`]).

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
use isoe_initiator::{Chunk, DataPlane};

/// user_data of the CQEs that only wake the serving thread (the NOP
/// posted at creation, the control thread's MSG_RING); a tag's commands
/// carry the tag.
pub(crate) const WAKE: u64 = 1 << 32;
/// user_data of a socket receive into a request's pages.
const RECEIVE: u64 = 2 << 32;
/// user_data of a send from a request's pages.
const SEND: u64 = 3 << 32;
/// Zero copy: a write at least this long is sent from the request's pages;
/// a shorter one is read into the tag's buffer when it comes (one
/// `pread`) and goes out with the other PDUs of its turn in one vectored
/// send, which costs less than a send of its own.
pub(crate) const SEND_FROM_PAGES_MIN: u32 = 64 * 1024;

/// How a request's data moves between the kernel and the tag's buffer
/// (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// The kernel copies to and from the tag's buffer.
    Copy,
    /// The request's pages are registered with the ring; Data-In is
    /// received into them.
    ZeroCopy,
}

impl DataPath {
    /// The path of a device with these UBLK_F_* flags.
    pub fn of_flags(flags: u64) -> DataPath {
        if flags & sys::ZERO_COPY_FLAGS == sys::ZERO_COPY_FLAGS {
            DataPath::ZeroCopy
        } else {
            DataPath::Copy
        }
    }

    /// As `isoe attach --list` shows it.
    pub fn name(self) -> &'static str {
        match self {
            DataPath::Copy => "copy",
            DataPath::ZeroCopy => "zero-copy",
        }
    }
}

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
    /// Tags whose request is refused (an op we do not serve, data that
    /// could not be read), with the result, committed once the CQ is
    /// drained.
    refuse: Vec<(u16, i32)>,
    /// A failure in complete() (which cannot return one), for the next
    /// flush or take.
    deferred: Option<io::Error>,
    path: DataPath,
    /// Zero copy: per tag, the byte ranges of the request's pages that
    /// Data-In was received into; the rest of a read comes from the tag's
    /// buffer when it completes.
    placed: Vec<Vec<(u32, u32)>>,
    /// CQEs read while waiting for a receive into a request's pages, for
    /// the next take.
    stash: Vec<cqueue::Entry>,
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
    pub(crate) fn open(
        dev_id: u32,
        depth: u16,
        buf_bytes: usize,
        data_path: DataPath,
    ) -> Result<Queue, UblkError> {
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
        if data_path == DataPath::ZeroCopy {
            // A table with a free slot per tag, for the kernel to register
            // each request's pages in.
            ring.submitter()
                .register_buffers_sparse(u32::from(depth))
                .map_err(UblkError::IoUring)?;
        }
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
            path: data_path,
            placed: vec![Vec::new(); depth as usize],
            stash: Vec::new(),
        })
    }

    pub(crate) fn path(&self) -> DataPath {
        self.path
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
        // Zero copy: no buffer address (the kernel refuses one), and the
        // tag's slot in the buffer table for the next request's pages.
        let (addr, sqe_addr) = match self.path {
            DataPath::Copy => (self.bufs[tag as usize].as_mut_ptr() as u64, None),
            DataPath::ZeroCopy => (0, Some(sys::auto_buf_reg_addr(tag))),
        };
        let cmd = IoCmd {
            q_id: 0,
            tag,
            result,
            addr,
        };
        let sqe = opcode::UringCmd16::new(types::Fd(self.cdev.as_raw_fd()), op)
            .cmd(cmd.to_sqe_cmd())
            .addr(sqe_addr)
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
        let mut cqes = std::mem::take(&mut self.stash);
        cqes.extend(self.ring.completion());
        for cqe in cqes.drain(..) {
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
                self.placed[tag as usize].clear();
                if let Some(Op::Write) = op.filter(|_| fits && self.path == DataPath::ZeroCopy) {
                    if !self.sends_from_pages(Op::Write, bytes as u32) {
                        if let Err(e) = self.copy_in(tag, bytes as usize) {
                            tracing::warn!(tag, %e, "ublk: cannot read a write's data from its request");
                            self.refuse.push((tag, -libc::EIO));
                            continue;
                        }
                    }
                }
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
                        self.refuse.push((tag, -libc::EOPNOTSUPP));
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
        self.stash = cqes;
        while let Some((tag, res)) = self.refuse.pop() {
            self.commit(tag, res);
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
        let result = match result {
            Ok(()) if op == sys::UBLK_IO_OP_READ && self.path == DataPath::ZeroCopy => {
                self.copy_out(tag, bytes).map_err(|e| {
                    tracing::warn!(tag, %e, "ublk: cannot write a read's data to its request");
                    libc::EIO
                })
            }
            other => other,
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

    /// Zero copy: whether a write of `bytes` is sent from the request's
    /// pages (else its data is read into the tag's buffer when it comes).
    pub(crate) fn sends_from_pages(&self, op: Op, bytes: u32) -> bool {
        self.path == DataPath::ZeroCopy && op == Op::Write && bytes >= SEND_FROM_PAGES_MIN
    }

    /// Zero copy: a write's `bytes` from the request's pages into the
    /// tag's buffer (user copy).
    fn copy_in(&mut self, tag: u16, bytes: usize) -> io::Result<()> {
        let pos = sys::io_buf_pos(0, tag, 0);
        let buf = &mut self.bufs[tag as usize][..bytes];
        let mut done = 0;
        while done < bytes {
            // SAFETY: pread into the tag's buffer, of its length less what
            // is done; the buffer is ours (not lent: the request just came).
            let n = unsafe {
                libc::pread(
                    self.cdev.as_raw_fd(),
                    buf[done..].as_mut_ptr().cast(),
                    bytes - done,
                    (pos + done as u64) as libc::off_t,
                )
            };
            match n {
                n if n > 0 => done += n as usize,
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "short request",
                    ))
                }
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs one operation on this ring and waits for its completion;
    /// completions of requests that come meanwhile are kept for the next
    /// take.
    fn run_one(&mut self, sqe: squeue::Entry, user_data: u64) -> io::Result<i32> {
        let sqe = sqe.user_data(user_data);
        loop {
            // SAFETY: the caller keeps the operation's memory alive until
            // this returns, which is after its completion.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                break;
            }
            self.submit()?;
        }
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
            let mut result = None;
            for cqe in self.ring.completion() {
                if cqe.user_data() == user_data {
                    result = Some(cqe.result());
                } else {
                    self.stash.push(cqe);
                }
            }
            if let Some(res) = result {
                return Ok(res);
            }
        }
    }

    /// The tag of `buffer` when it holds a request of `op` (zero copy)
    /// whose pages have `len` bytes at `offset` (at least one).
    fn pages(&self, buffer: u32, op: u8, offset: usize, len: usize) -> io::Result<u16> {
        let tag = u16::try_from(buffer).unwrap_or(u16::MAX);
        let fits = self.path == DataPath::ZeroCopy
            && len > 0
            && matches!(
                self.tags.get(usize::from(tag)),
                Some(Tag::Serving { op: o, bytes })
                    if *o == op && offset.checked_add(len).is_some_and(|end| end <= *bytes as usize)
            );
        if !fits {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("tag {buffer} holds no request of op {op} with {len} bytes at {offset}"),
            ));
        }
        Ok(tag)
    }

    /// `len` bytes at `offset` of the write on tag `buffer`, from its
    /// registered pages to socket `fd`, without waiting for room.
    fn send_pages(
        &mut self,
        buffer: u32,
        offset: usize,
        len: usize,
        fd: RawFd,
    ) -> io::Result<usize> {
        let tag = self.pages(buffer, sys::UBLK_IO_OP_WRITE, offset, len)?;
        // A registered kernel buffer is addressed by offset, not address.
        let sqe = opcode::WriteFixed::new(types::Fd(fd), offset as *const u8, len as u32, tag)
            .rw_flags(libc::RWF_NOWAIT)
            .build();
        match self.run_one(sqe, SEND)? {
            n if n >= 0 => Ok(n as usize),
            errno => Err(io::Error::from_raw_os_error(-errno)),
        }
    }

    /// Zero copy: the bytes of a read's first `bytes` that were not
    /// received into the request's pages, from the tag's buffer (user
    /// copy). A range placed and then received again through the buffer
    /// (a command sent again) keeps the placed bytes: both came from the
    /// same blocks.
    fn copy_out(&mut self, tag: u16, bytes: u32) -> io::Result<()> {
        let placed = &mut self.placed[tag as usize];
        placed.sort_unstable();
        let buf = &self.bufs[tag as usize];
        let fd = self.cdev.as_raw_fd();
        let mut at = 0u32;
        let mut gaps = placed
            .iter()
            .copied()
            .chain(std::iter::once((bytes, bytes)))
            .filter_map(|(start, end)| {
                let gap = (at < start.min(bytes)).then_some((at, start.min(bytes)));
                at = at.max(end);
                gap
            });
        gaps.try_for_each(|(start, end)| {
            let mut done = start;
            while done < end {
                let from = &buf[done as usize..end as usize];
                // SAFETY: pwrite from the tag's buffer, inside its length
                // (end <= bytes <= buf_bytes, checked when the request came).
                let n = unsafe {
                    libc::pwrite(
                        fd,
                        from.as_ptr().cast(),
                        from.len(),
                        sys::io_buf_pos(0, tag, done) as libc::off_t,
                    )
                };
                match n {
                    n if n > 0 => done += n as u32,
                    0 => return Err(io::Error::new(io::ErrorKind::WriteZero, "short request")),
                    _ => {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    }
                }
            }
            Ok(())
        })
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

impl DataPlane for Queue {
    /// Receives from `fd` into the pages of the read on tag `buffer`
    /// (registered at the tag's index), with `READ_FIXED` on this ring and
    /// `RWF_NOWAIT`, waiting for its completion; other completions that
    /// come meanwhile are kept for the next take.
    fn receive(&mut self, buffer: u32, offset: usize, len: usize, fd: RawFd) -> io::Result<usize> {
        let tag = self.pages(buffer, sys::UBLK_IO_OP_READ, offset, len)?;
        // A registered kernel buffer is addressed by offset, not address.
        let sqe = opcode::ReadFixed::new(types::Fd(fd), offset as *mut u8, len as u32, tag)
            .rw_flags(libc::RWF_NOWAIT)
            .build();
        // The read goes into the request's pages, which the kernel
        // registered for the tag and keeps until the tag's commit, which
        // cannot be sent before this returns.
        match self.run_one(sqe, RECEIVE)? {
            n if n >= 0 => {
                let n = n as usize;
                if n > 0 {
                    self.placed[usize::from(tag)].push((offset as u32, (offset + n) as u32));
                }
                Ok(n)
            }
            errno => Err(io::Error::from_raw_os_error(-errno)),
        }
    }

    /// Sends the chunks in order, each as it comes: a run of bytes with
    /// `sendmsg` (`MSG_MORE` while more follows), a range of a write's
    /// pages with `WRITE_FIXED` on this ring; neither waits for room, and
    /// the first that does not go whole ends the send. (Not one linked
    /// chain: a short send does not break an io_uring link, and the next
    /// operation would then send bytes out of order.)
    fn send(&mut self, chunks: &[Chunk<'_>], fd: RawFd) -> io::Result<usize> {
        let mut sent = 0;
        for (i, chunk) in chunks.iter().enumerate() {
            let more = i + 1 < chunks.len();
            let (result, wanted) = match *chunk {
                Chunk::Bytes(iov) => {
                    // SAFETY: msghdr is plain old data; zeroed is an empty one.
                    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                    h.msg_iov = iov.as_ptr().cast_mut().cast();
                    h.msg_iovlen = iov.len();
                    let flags = libc::MSG_DONTWAIT
                        | libc::MSG_NOSIGNAL
                        | if more { libc::MSG_MORE } else { 0 };
                    // SAFETY: the header names `iov`, slices that live
                    // across the call; the kernel only reads them.
                    let n = unsafe { libc::sendmsg(fd, &h, flags) };
                    let result = if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(n as usize)
                    };
                    (result, iov.iter().map(|s| s.len()).sum())
                }
                Chunk::External {
                    buffer,
                    offset,
                    len,
                } => (self.send_pages(buffer, offset, len, fd), len),
            };
            match result {
                Ok(n) => {
                    sent += n;
                    if n < wanted {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    fn woken(&self) -> bool {
        !self.stash.is_empty()
    }
}
