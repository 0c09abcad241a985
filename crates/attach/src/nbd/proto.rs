//! Our end of the NBD socket pair: the requests the kernel's `nbd` driver
//! writes (the "simple" transmission protocol of NBD's spec, without the
//! handshake, which the ioctls replace) and the replies we write back.
//!
//! Everything here is non-blocking and runs on the serving thread. Nothing
//! is allocated per request once the slots' buffers have their size: the
//! headers go through one fixed staging buffer, a write's payload lands in
//! its slot's buffer, and the reply queue reuses its ring.

use std::collections::VecDeque;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::device::{Op, Request};

pub(crate) const REQUEST_MAGIC: u32 = 0x2560_9513;
pub(crate) const REPLY_MAGIC: u32 = 0x6744_6698;
/// magic, u16 flags, u16 type, u64 handle, u64 offset, u32 length.
pub(crate) const REQUEST_LEN: usize = 28;
/// magic, u32 error, u64 handle.
pub(crate) const REPLY_LEN: usize = 16;

pub(crate) const CMD_READ: u16 = 0;
pub(crate) const CMD_WRITE: u16 = 1;
pub(crate) const CMD_DISC: u16 = 2;
pub(crate) const CMD_FLUSH: u16 = 3;
pub(crate) const CMD_TRIM: u16 = 4;
pub(crate) const CMD_WRITE_ZEROES: u16 = 6;

pub(crate) const CMD_FLAG_FUA: u16 = 1 << 0;
pub(crate) const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// The driver's `max_hw_sectors` (65536 sectors): no read or write it sends
/// is longer, whatever `max_sectors_kb` says. Longer ones are refused.
pub(crate) const DRIVER_MAX_IO_BYTES: u32 = 65536 * 512;

/// Headers (and small payloads) are read through this many bytes at a time.
const STAGE_BYTES: usize = 64 << 10;
/// A payload at least this long is read straight into its slot's buffer
/// once the staging buffer is empty; a shorter one goes through staging,
/// with the headers after it, in one read.
const DIRECT_READ_BYTES: u32 = 16 << 10;
/// Replies per `sendmsg` (two iovecs each).
const IOV_BATCH: usize = 64;
const NO_SLOT: u16 = u16::MAX;

/// One request header as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub flags: u16,
    pub kind: u16,
    /// Opaque to us (the kernel puts a cookie and its tag there, in its own
    /// byte order); it goes back unchanged in the reply.
    pub handle: [u8; 8],
    pub offset: u64,
    pub len: u32,
}

impl Header {
    /// None when the magic is wrong: the stream is out of step.
    pub(crate) fn parse(b: &[u8; REQUEST_LEN]) -> Option<Header> {
        let magic = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        if magic != REQUEST_MAGIC {
            return None;
        }
        let mut handle = [0u8; 8];
        handle.copy_from_slice(&b[8..16]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&b[16..24]);
        Some(Header {
            flags: u16::from_be_bytes([b[4], b[5]]),
            kind: u16::from_be_bytes([b[6], b[7]]),
            handle,
            offset: u64::from_be_bytes(offset),
            len: u32::from_be_bytes([b[24], b[25], b[26], b[27]]),
        })
    }

    #[cfg(test)]
    pub(crate) fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.handle);
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

pub(crate) fn encode_reply(handle: [u8; 8], error: u32) -> [u8; REPLY_LEN] {
    let mut b = [0u8; REPLY_LEN];
    b[0..4].copy_from_slice(&REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&handle);
    b
}

/// A reply's error field for a completion's errno. The kernel fails the
/// request with BLK_STS_IOERR for any nonzero value, so the errno itself
/// only shows in traces; 0 or negative (a caller's slip) becomes EIO, never
/// success.
fn reply_error(errno: i32) -> u32 {
    if errno > 0 {
        errno as u32
    } else {
        libc::EIO as u32
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// A write whose payload is still arriving.
    Receiving,
    /// Handed to the serving loop.
    Held,
    /// Its reply is queued; the buffer holds a read's data until sent.
    Replying,
}

struct Slot {
    buf: Vec<u8>,
    /// How many bytes of `buf`'s allocation we have initialized: the
    /// length to give it back when it returns shortened.
    init: usize,
    /// The address of the buffer lent to the loop (0: none).
    lent: usize,
    handle: [u8; 8],
    state: SlotState,
    op: Op,
    len: u32,
}

/// Where the bytes of a write's payload go.
#[derive(Debug, Clone, Copy)]
enum Sink {
    /// Into the slot's buffer; the request goes out once it is all there.
    Slot(Request),
    /// Nowhere: a refused write; its error reply follows the payload (the
    /// driver takes a reply only once it has sent the whole request).
    Refuse { handle: [u8; 8], errno: i32 },
}

#[derive(Debug, Clone, Copy)]
enum Rx {
    Header,
    Payload { sink: Sink, done: u32, len: u32 },
}

struct Reply {
    header: [u8; REPLY_LEN],
    slot: u16,
    data_len: u32,
}

/// What the protocol needs to know of the device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub capacity_bytes: u64,
    pub read_only: bool,
    /// Discards were advertised (NBD_FLAG_SEND_TRIM); unadvertised ones
    /// are refused. (Not so write-zeroes: see the module's notes.)
    pub discard: bool,
    /// The size each slot's buffer starts with (and is kept at, at least).
    pub buffer_bytes: u32,
    pub queue_depth: u16,
}

/// Our end of the socket pair, with the slots and queues behind it.
pub(crate) struct Conn {
    sock: OwnedFd,
    /// The wake fd: an epoll set holding `sock` for input always, and for
    /// output while replies wait for room, so a full socket wakes the loop
    /// as soon as it drains.
    epoll: OwnedFd,
    wants_out: bool,
    limits: Limits,
    slots: Vec<Slot>,
    /// Free slots, most recently freed last (its buffer is warmest).
    free: Vec<u16>,
    /// Slots not free.
    busy: usize,
    rx: Rx,
    stage: Box<[u8]>,
    stage_start: usize,
    stage_end: usize,
    replies: VecDeque<Reply>,
    /// Bytes of the first queued reply already written.
    head_sent: usize,
    /// NBD_CMD_DISC came: finish what is in flight, then close.
    disconnecting: bool,
    /// We shut the socket down after the disconnect.
    shut: bool,
    /// The kernel's end is gone (EOF, or a reset).
    eof: bool,
}

impl Conn {
    /// `sock` must be our end of a stream socket pair; it is made
    /// non-blocking here.
    pub(crate) fn new(sock: OwnedFd, limits: Limits) -> io::Result<Conn> {
        let fd = sock.as_raw_fd();
        // SAFETY: plain fcntl on a descriptor we own.
        let fl = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
        // SAFETY: as above; only the flags change.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
        // SAFETY: epoll_create1 returns a fresh descriptor or -1.
        let epoll = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: it is ours and open.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        epoll_set(&epoll, fd, libc::EPOLL_CTL_ADD, false)?;
        let depth = limits.queue_depth.clamp(1, NO_SLOT - 1);
        let slots = (0..depth)
            .map(|_| Slot {
                buf: vec![0u8; limits.buffer_bytes as usize],
                init: limits.buffer_bytes as usize,
                lent: 0,
                handle: [0; 8],
                state: SlotState::Free,
                op: Op::Flush,
                len: 0,
            })
            .collect();
        Ok(Conn {
            sock,
            epoll,
            wants_out: false,
            limits,
            slots,
            free: (0..depth).rev().collect(),
            busy: 0,
            rx: Rx::Header,
            stage: vec![0u8; STAGE_BYTES].into_boxed_slice(),
            stage_start: 0,
            stage_end: 0,
            replies: VecDeque::with_capacity(depth as usize * 2),
            head_sent: 0,
            disconnecting: false,
            shut: false,
            eof: false,
        })
    }

    pub(crate) fn wake_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    #[cfg(test)]
    pub(crate) fn sock_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The kernel's end is gone, or we closed after a disconnect.
    pub(crate) fn ended(&self) -> bool {
        self.eof || self.shut
    }

    /// Replies written to the queue but not yet to the socket.
    #[cfg(test)]
    pub(crate) fn queued_replies(&self) -> usize {
        self.replies.len()
    }

    /// Shuts our end down both ways: the driver's receiver sees EOF and
    /// stops (NBD_DO_IT returns), and our end reads EOF from now on.
    pub(crate) fn shutdown(&mut self) {
        if !self.shut {
            // SAFETY: shutdown on a descriptor we own.
            unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR) };
            self.shut = true;
        }
    }

    pub(crate) fn take_requests(&mut self, out: &mut Vec<Request>) -> io::Result<bool> {
        if self.ended() {
            return Ok(false);
        }
        // Replies the socket would not take last time go first: the wake
        // that brought us here may be the room for them.
        self.flush()?;
        let before = out.len();
        let queued = self.replies.len();
        let received = self.receive(out);
        if self.eof {
            // The driver is gone and has failed whatever it had sent; none
            // of this needs serving.
            out.truncate(before);
            return Ok(false);
        }
        received?;
        if self.replies.len() > queued {
            // Refusals of our own: out with them now.
            self.flush()?;
        }
        self.finish_disconnect();
        Ok(!self.ended())
    }

    pub(crate) fn take_buffer(&mut self, tag: u16) -> Vec<u8> {
        match self.slots.get_mut(tag as usize) {
            Some(slot) => {
                debug_assert_eq!(
                    slot.state,
                    SlotState::Held,
                    "nbd: buffer of tag {tag} lent while not held"
                );
                let buf = mem::take(&mut slot.buf);
                slot.lent = buf.as_ptr() as usize;
                buf
            }
            None => Vec::new(),
        }
    }

    pub(crate) fn complete(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>) {
        let ended = self.ended();
        let Some(slot) = self.slots.get_mut(tag as usize) else {
            tracing::warn!(tag, "nbd: completion for a tag beyond the queue depth");
            return;
        };
        let mut buffer = buffer;
        if slot.lent != 0
            && buffer.as_ptr() as usize == slot.lent
            && buffer.len() < slot.init
            && buffer.capacity() >= slot.init
        {
            // Shortened to the data: its full length back without touching
            // a byte (a resize would clear the tail on every request).
            // SAFETY: it is the allocation we lent, whose first `init`
            // bytes we initialized, and the loop keeps its bytes
            // initialized (BlockDevice::complete's contract).
            unsafe { buffer.set_len(slot.init) };
        }
        slot.lent = 0;
        // The buffer comes back unless the loop never took it: keep
        // whichever is the real one.
        if buffer.capacity() >= slot.buf.capacity() {
            slot.buf = buffer;
        }
        if slot.state != SlotState::Held {
            tracing::warn!(tag, state = ?slot.state, "nbd: completion for a tag not in flight");
            return;
        }
        if ended {
            // Nobody to answer: the slot is simply free again.
            slot.state = SlotState::Free;
            self.busy -= 1;
            self.free.push(tag);
            return;
        }
        let (error, data_len) = match result {
            Ok(()) if slot.op == Op::Read => {
                if slot.buf.len() >= slot.len as usize {
                    (0, slot.len)
                } else {
                    tracing::warn!(
                        tag,
                        len = slot.len,
                        buffer = slot.buf.len(),
                        "nbd: read completed with a short buffer"
                    );
                    (libc::EIO as u32, 0)
                }
            }
            Ok(()) => (0, 0),
            Err(errno) => (reply_error(errno), 0),
        };
        slot.state = SlotState::Replying;
        let header = encode_reply(slot.handle, error);
        self.replies.push_back(Reply {
            header,
            slot: tag,
            data_len,
        });
    }

    /// Writes queued replies until the socket takes no more; what it won't
    /// take stays queued and the wake fd fires when there is room.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        while !self.replies.is_empty() && !self.eof {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; IOV_BATCH * 2];
            let mut n = 0;
            let mut skip = self.head_sent;
            for reply in self.replies.iter().take(IOV_BATCH) {
                let data: &[u8] = if reply.slot == NO_SLOT {
                    &[]
                } else {
                    &self.slots[reply.slot as usize].buf[..reply.data_len as usize]
                };
                for part in [&reply.header[..], data] {
                    if skip >= part.len() {
                        skip -= part.len();
                        continue;
                    }
                    let part = &part[skip..];
                    skip = 0;
                    iov[n] = libc::iovec {
                        iov_base: part.as_ptr() as *mut libc::c_void,
                        iov_len: part.len(),
                    };
                    n += 1;
                }
            }
            // SAFETY: an all-zero msghdr is valid; the iovecs point into
            // buffers that live, unchanged, across the call.
            let mut msg: libc::msghdr = unsafe { mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = n as _;
            // SAFETY: as above; MSG_NOSIGNAL: a closed peer is EPIPE, not a
            // SIGPIPE that kills the process.
            let sent = unsafe {
                libc::sendmsg(
                    self.sock.as_raw_fd(),
                    &msg,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if sent < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    Some(libc::EPIPE) | Some(libc::ECONNRESET) => {
                        self.lost();
                        break;
                    }
                    _ => return Err(err),
                }
            }
            self.advance(sent as usize);
        }
        self.want_output(!self.replies.is_empty() && !self.eof)?;
        self.finish_disconnect();
        Ok(())
    }

    /// Drops `n` written bytes off the front of the reply queue, freeing
    /// the slots whose replies are all out.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(head) = self.replies.front() else {
                break;
            };
            let left = REPLY_LEN + head.data_len as usize - self.head_sent;
            if n < left {
                self.head_sent += n;
                return;
            }
            n -= left;
            let slot = head.slot;
            self.replies.pop_front();
            self.head_sent = 0;
            if slot != NO_SLOT {
                self.release(slot);
            }
        }
    }

    fn release(&mut self, tag: u16) {
        let slot = &mut self.slots[tag as usize];
        if slot.state != SlotState::Free {
            slot.state = SlotState::Free;
            self.busy -= 1;
            self.free.push(tag);
        }
    }

    /// The kernel's end is gone: nothing queued can go out.
    fn lost(&mut self) {
        self.eof = true;
        while let Some(reply) = self.replies.pop_front() {
            if reply.slot != NO_SLOT {
                self.release(reply.slot);
            }
        }
        self.head_sent = 0;
    }

    /// After NBD_CMD_DISC, once nothing is in flight and every reply is
    /// out: close our end, which lets NBD_DO_IT return (the spec's "the
    /// server closes the connection"), and makes the wake fd fire so the
    /// loop sees the end.
    fn finish_disconnect(&mut self) {
        if self.disconnecting && !self.ended() && self.busy == 0 && self.replies.is_empty() {
            self.shutdown();
        }
    }

    fn want_output(&mut self, want: bool) -> io::Result<()> {
        if want != self.wants_out {
            epoll_set(
                &self.epoll,
                self.sock.as_raw_fd(),
                libc::EPOLL_CTL_MOD,
                want,
            )?;
            self.wants_out = want;
        }
        Ok(())
    }

    fn staged(&self) -> usize {
        self.stage_end - self.stage_start
    }

    /// Reads what the socket has into the staging buffer. Ok(false): it
    /// has nothing now (or is at its end, and `eof` says so).
    fn fill_stage(&mut self) -> io::Result<bool> {
        if self.stage_start > 0 {
            self.stage.copy_within(self.stage_start..self.stage_end, 0);
            self.stage_end -= self.stage_start;
            self.stage_start = 0;
        }
        let end = self.stage_end;
        let got = read_some(&self.sock, &mut self.stage[end..])?;
        match got {
            Some(0) => {
                self.lost();
                Ok(false)
            }
            Some(n) => {
                self.stage_end += n;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Reads requests until the socket has no more.
    fn receive(&mut self, out: &mut Vec<Request>) -> io::Result<()> {
        loop {
            match self.rx {
                Rx::Header => {
                    if self.staged() >= REQUEST_LEN {
                        let mut raw = [0u8; REQUEST_LEN];
                        raw.copy_from_slice(
                            &self.stage[self.stage_start..self.stage_start + REQUEST_LEN],
                        );
                        self.stage_start += REQUEST_LEN;
                        let Some(header) = Header::parse(&raw) else {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "nbd: a request without the request magic ({:02x?})",
                                    &raw[..8]
                                ),
                            ));
                        };
                        self.on_header(header, out);
                        continue;
                    }
                    if !self.fill_stage()? {
                        return Ok(());
                    }
                }
                Rx::Payload { sink, done, len } => {
                    if done == len {
                        self.rx = Rx::Header;
                        match sink {
                            Sink::Slot(request) => {
                                self.slots[request.tag as usize].state = SlotState::Held;
                                out.push(request);
                            }
                            Sink::Refuse { handle, errno } => self.refuse(handle, errno),
                        }
                        continue;
                    }
                    let want = (len - done) as usize;
                    let staged = self.staged();
                    if staged > 0 {
                        let n = staged.min(want);
                        if let Sink::Slot(request) = sink {
                            let at = done as usize;
                            self.slots[request.tag as usize].buf[at..at + n].copy_from_slice(
                                &self.stage[self.stage_start..self.stage_start + n],
                            );
                        }
                        self.stage_start += n;
                        self.rx = Rx::Payload {
                            sink,
                            done: done + n as u32,
                            len,
                        };
                        continue;
                    }
                    let got = match sink {
                        Sink::Slot(request) if want >= DIRECT_READ_BYTES as usize => {
                            let at = done as usize;
                            let buf = &mut self.slots[request.tag as usize].buf[at..at + want];
                            match read_some(&self.sock, buf)? {
                                Some(0) => {
                                    self.lost();
                                    false
                                }
                                Some(n) => {
                                    self.rx = Rx::Payload {
                                        sink,
                                        done: done + n as u32,
                                        len,
                                    };
                                    true
                                }
                                None => false,
                            }
                        }
                        _ => self.fill_stage()?,
                    };
                    if !got {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn on_header(&mut self, h: Header, out: &mut Vec<Request>) {
        let op = match h.kind {
            CMD_READ => Op::Read,
            CMD_WRITE => Op::Write,
            CMD_FLUSH => Op::Flush,
            CMD_TRIM => Op::Discard,
            CMD_WRITE_ZEROES => Op::WriteZeroes,
            CMD_DISC => {
                // No reply: finish what is in flight, then close.
                self.disconnecting = true;
                return;
            }
            other => {
                tracing::warn!(kind = other, "nbd: unknown request type");
                self.refuse(h.handle, libc::EINVAL);
                return;
            }
        };
        let (offset, len) = if op == Op::Flush {
            (0, 0)
        } else {
            (h.offset, h.len)
        };
        let payload = if op == Op::Write { len } else { 0 };
        let writes = op != Op::Read && op != Op::Flush;
        let errno = if self.disconnecting {
            Some(libc::ESHUTDOWN)
        } else if writes && self.limits.read_only {
            Some(libc::EPERM)
        } else if op == Op::Discard && !self.limits.discard {
            Some(libc::EOPNOTSUPP)
        } else if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.limits.capacity_bytes)
        {
            Some(if writes { libc::ENOSPC } else { libc::EINVAL })
        } else if (op == Op::Read || op == Op::Write)
            && len > DRIVER_MAX_IO_BYTES.max(self.limits.buffer_bytes)
        {
            Some(libc::EINVAL)
        } else if self.free.is_empty() {
            // Only when Options::queue_depth is below the driver's depth.
            Some(libc::ENOMEM)
        } else {
            None
        };
        if let Some(errno) = errno {
            tracing::debug!(kind = h.kind, offset, len, errno, "nbd: request refused");
            if payload > 0 {
                self.rx = Rx::Payload {
                    sink: Sink::Refuse {
                        handle: h.handle,
                        errno,
                    },
                    done: 0,
                    len: payload,
                };
            } else {
                self.refuse(h.handle, errno);
            }
            return;
        }
        let tag = self.free.pop().expect("a free slot");
        self.busy += 1;
        let slot = &mut self.slots[tag as usize];
        slot.handle = h.handle;
        slot.op = op;
        slot.len = len;
        if op == Op::Read || op == Op::Write {
            let want = (len.max(self.limits.buffer_bytes)) as usize;
            if slot.buf.len() < want {
                if slot.buf.capacity() < want {
                    // Longer than any before (max_sectors_kb raised past
                    // max_io_bytes): grow once, never shrink.
                    tracing::debug!(tag, len, "nbd: slot buffer grows");
                    slot.buf = vec![0u8; want];
                } else {
                    // Not the buffer we lent (or shortened before we could
                    // tell): clear what we cannot vouch for.
                    slot.buf.resize(want, 0);
                }
                slot.init = want;
            }
        }
        let request = Request {
            tag,
            op,
            offset,
            len,
            fua: h.flags & CMD_FLAG_FUA != 0,
            no_unmap: op == Op::WriteZeroes && h.flags & CMD_FLAG_NO_HOLE != 0,
        };
        if payload > 0 {
            slot.state = SlotState::Receiving;
            self.rx = Rx::Payload {
                sink: Sink::Slot(request),
                done: 0,
                len: payload,
            };
        } else {
            slot.state = SlotState::Held;
            out.push(request);
        }
    }

    fn refuse(&mut self, handle: [u8; 8], errno: i32) {
        self.replies.push_back(Reply {
            header: encode_reply(handle, reply_error(errno)),
            slot: NO_SLOT,
            data_len: 0,
        });
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn epoll_set(epoll: &OwnedFd, fd: RawFd, op: libc::c_int, output: bool) -> io::Result<()> {
    let mut events = libc::EPOLLIN | libc::EPOLLRDHUP;
    if output {
        events |= libc::EPOLLOUT;
    }
    let mut ev = libc::epoll_event {
        events: events as u32,
        u64: fd as u64,
    };
    // SAFETY: both descriptors are open; ev lives across the call.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut ev) })?;
    Ok(())
}

/// One non-blocking read: Some(n) (0 at the end), None when there is
/// nothing now. A reset counts as the end.
fn read_some(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::read(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(None),
            Some(libc::ECONNRESET) => return Ok(Some(0)),
            _ => return Err(err),
        }
    }
}
