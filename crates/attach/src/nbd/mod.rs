//! The NBD front-end: the kernel's `nbd` driver, fed through a socket pair.
//!
//! No nbd-client and no handshake: one end of an AF_UNIX stream pair goes to
//! a free `/dev/nbdN` with the driver's ioctls (NBD_SET_SOCK, then the
//! geometry: NBD_SET_BLKSIZE, NBD_SET_SIZE, NBD_SET_FLAGS, NBD_SET_TIMEOUT),
//! and a dedicated thread sits in NBD_DO_IT, which blocks until the device
//! stops. The other end is ours, non-blocking, read and written by the
//! serving loop through [`BlockDevice`] (the `proto` module has the wire side).
//!
//! # Why the ioctls, not netlink
//!
//! The generic netlink interface (NBD_CMD_CONNECT) can pick or create a free
//! index itself and has a dead-connection timeout for reconnecting servers.
//! We need neither, and it has the wrong failure mode: a netlink-connected
//! device keeps its configuration until someone sends NBD_CMD_DISCONNECT, so
//! a server killed with SIGKILL leaves `/dev/nbdN` configured and dead until
//! an operator clears it. With the ioctls the configuration belongs to our
//! open descriptor: when the process dies, NBD_DO_IT is interrupted, the
//! driver fails what is in flight with EIO, and closing the descriptor frees
//! the device for the next attach. Index races are handled by the driver
//! too: NBD_SET_SOCK answers EBUSY when another task is setting the device
//! up, and we try the next one. The cost: only the devices the module made
//! at load (`nbds_max`, 16 by default) can be used, and NBD_DO_IT needs a
//! thread of its own (with every signal blocked: a signal would interrupt
//! it, and the driver then tears the connection down).
//!
//! # A send buffer as large as the driver's queue
//!
//! The driver sends requests from the submitting task (its queue is
//! BLK_MQ_F_BLOCKING), holding the connection's `tx_lock` while it blocks on
//! a full socket. If this process is killed with SIGKILL while a writer is
//! so blocked, the NBD_DO_IT thread, interrupted, shuts the sockets down,
//! which wants that `tx_lock`; the writer waits for room that only our
//! reading (or our end closing) makes; and our end closes only when every
//! thread of the process has exited, that one included. Everything hangs
//! until the writer is killed too. So the kernel's end gets a send buffer
//! (SO_SNDBUFFORCE, as root: 2 GiB) that the driver's 128 requests can never
//! fill, its `max_sectors_kb` capped to keep it so (to under half of each
//! request's share, 4 MiB, for the skbs' overhead): sends never block, the
//! shutdown takes
//! the lock at once, the driver fails what is in flight with EIO, and the
//! process exits. (Nothing is kept in that buffer while we serve: we read
//! it as fast as it comes.)
//!
//! # What the driver cannot be told
//!
//! The ioctl interface (and netlink's) carries a block size, a size and
//! the flags, nothing else, so the driver's own limits stand:
//! - the physical block size is the logical one; there is no optimal I/O
//!   size of the LU's (the driver says 128 KiB);
//! - `max_hw_sectors` is 65536 (32 MiB) whatever the LU's MAXIMUM TRANSFER
//!   LENGTH. We write [`Geometry::max_io_bytes`] into the queue's
//!   `max_sectors_kb` before NBD_DO_IT, so the block layer splits to it, but
//!   root may raise it again: a longer read or write then grows its slot's
//!   buffer (once; it never shrinks) and reaches the serving loop longer
//!   than `max_io_bytes`, which must then split it into several commands;
//! - discards: granularity and alignment are the logical block size and the
//!   largest is about 4 GiB (the protocol's u32 length), whatever the LU's
//!   UNMAP limits ([`Geometry::discard_granularity_bytes`]). The LU's
//!   [`Geometry::max_discard_bytes`] goes into the queue's
//!   `discard_max_bytes` (a user limit the block layer keeps) once the
//!   device runs: written before NBD_DO_IT it does not hold (the driver
//!   sets its limits as it starts), and the write freezes the queue until
//!   the requests in flight are done, so a thread of its own makes it
//!   while the serving loop serves them. At the end, the device idle, the
//!   user limit goes back to none (the largest value the attribute takes;
//!   not 0, which would turn discard off for the device's next user). The
//!   serving loop still splits and aligns what comes longer or unaligned;
//! - write-zeroes likewise (and only a driver that knows
//!   NBD_CMD_WRITE_ZEROES sends them: Debian's 6.12 does; an older one
//!   ignores the flag and the block layer zeroes with writes). The 6.12
//!   driver also never clears the queue's write-zeroes limit once a
//!   configuration set it (discard's it does clear), so a device
//!   configured with the flag once sends write-zeroes to every later
//!   server. Refusing them would not help: the block layer falls back to
//!   writing zeroes only when a device has dropped its write-zeroes limit,
//!   so BLKZEROOUT and the filesystems would get EIO. Instead, without
//!   write-zeroes of our own, we prefer a free device that has no such
//!   limit left, and on one that has, WriteZeroes requests reach the
//!   serving loop although [`Geometry::max_write_zeroes_bytes`] is 0: it
//!   zeroes with writes;
//! - the reply carries an errno, but the driver turns any nonzero one into
//!   BLK_STS_IOERR: every failure is EIO to the block layer;
//! - the queue depth is the driver's tag-set depth, 128.

mod proto;
mod sys;

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use crate::device::{BlockDevice, Geometry, Request};
use proto::{Conn, Limits};
use sys::Host;

// The driver's ioctls: _IO(0xab, n).
const NBD_SET_SOCK: u64 = 0xab00;
const NBD_SET_BLKSIZE: u64 = 0xab01;
const NBD_SET_SIZE: u64 = 0xab02;
const NBD_DO_IT: u64 = 0xab03;
const NBD_CLEAR_SOCK: u64 = 0xab04;
const NBD_DISCONNECT: u64 = 0xab08;
const NBD_SET_TIMEOUT: u64 = 0xab09;
const NBD_SET_FLAGS: u64 = 0xab0a;

// Transmission flags (NBD_SET_FLAGS).
const NBD_FLAG_HAS_FLAGS: u64 = 1 << 0;
const NBD_FLAG_READ_ONLY: u64 = 1 << 1;
const NBD_FLAG_SEND_FLUSH: u64 = 1 << 2;
const NBD_FLAG_SEND_FUA: u64 = 1 << 3;
const NBD_FLAG_SEND_TRIM: u64 = 1 << 5;
const NBD_FLAG_SEND_WRITE_ZEROES: u64 = 1 << 6;

/// The driver's tag-set depth: it never has more requests out than this.
pub const DRIVER_QUEUE_DEPTH: u16 = 128;

/// How to set the device up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Slots (tags) for requests in flight. The driver sends up to its
    /// tag-set depth, [`DRIVER_QUEUE_DEPTH`]; requests beyond the slots are
    /// refused with an error reply.
    pub queue_depth: u16,
    /// The driver's request timeout in seconds; 0: none (it only logs a
    /// "possible stuck request" every 30 s). A timeout makes the driver
    /// shut the connection down and fail everything, which the iSCSI side's
    /// own recovery would rather decide.
    pub timeout_secs: u32,
    /// Use `/dev/nbdN` with this N rather than the first free one.
    pub index: Option<u32>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            queue_depth: DRIVER_QUEUE_DEPTH,
            timeout_secs: 0,
            index: None,
        }
    }
}

/// An NBD device served by this process.
pub struct Nbd {
    conn: Conn,
    host: Host,
    index: u32,
    path: PathBuf,
    /// Our descriptor of /dev/nbdN: the device's configuration lives as long
    /// as it is open. Shared with the NBD_DO_IT thread and the stopper.
    dev: Option<Arc<OwnedFd>>,
    /// The NBD_DO_IT thread's id: /sys/block/nbdN/pid shows it once the
    /// device runs.
    tid: i32,
    sectors: u64,
    /// We advertised write-zeroes.
    write_zeroes: bool,
    serving: Option<JoinHandle<io::Result<()>>>,
    stopping: Option<JoinHandle<io::Result<()>>>,
    ready: bool,
    failed: Option<(io::ErrorKind, String)>,
    /// max_sectors_kb as it was before we set it, put back at the end.
    saved_max_sectors_kb: Option<String>,
    /// The LU's largest discard in bytes, for the queue's
    /// `discard_max_bytes` once the device runs; 0: none to set.
    discard_limit: u32,
    /// The thread writing it (see the module's notes).
    discard_limiter: Option<JoinHandle<io::Result<()>>>,
}

/// What the setup thread hands back once the device is claimed.
struct Claimed {
    index: u32,
    dev: Arc<OwnedFd>,
    tid: i32,
    saved_max_sectors_kb: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Setup {
    block_bytes: u32,
    capacity_bytes: u64,
    flags: u64,
    timeout_secs: u32,
    max_sectors_kb: u32,
    index: Option<u32>,
}

impl Nbd {
    /// Claims a free `/dev/nbdN` (loading the module once if there is none)
    /// and starts it with `geometry`. The device serves once
    /// [`BlockDevice::ready`] says so; requests may come before (the
    /// partition scan).
    pub fn open(geometry: &Geometry, options: Options) -> io::Result<Nbd> {
        Nbd::open_on(Host::real(), geometry, options)
    }

    fn open_on(host: Host, geometry: &Geometry, options: Options) -> io::Result<Nbd> {
        let block = geometry.block_bytes;
        if !block.is_power_of_two() || !(512..=4096).contains(&block) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("nbd: a logical block of {block} bytes: the driver takes powers of two from 512 to the page size (4096)"),
            ));
        }
        let max_io_bytes = geometry.max_io_bytes.max(block);
        let indexes = host.ensure_devices()?;

        let (ours, theirs) = socketpair()?;
        let conn = Conn::new(
            ours,
            Limits {
                capacity_bytes: geometry.capacity_bytes,
                read_only: geometry.read_only,
                discard: geometry.discard,
                buffer_bytes: max_io_bytes,
                queue_depth: options.queue_depth,
            },
        )?;
        let mut flags = NBD_FLAG_HAS_FLAGS;
        if geometry.volatile_cache {
            flags |= NBD_FLAG_SEND_FLUSH;
        }
        if geometry.fua {
            flags |= NBD_FLAG_SEND_FUA;
        }
        if geometry.discard {
            flags |= NBD_FLAG_SEND_TRIM;
        }
        if geometry.max_write_zeroes_bytes > 0 {
            flags |= NBD_FLAG_SEND_WRITE_ZEROES;
        }
        if geometry.read_only {
            flags |= NBD_FLAG_READ_ONLY;
        }
        let send_buffer = grow_send_buffer(&theirs);
        let setup = Setup {
            block_bytes: block,
            capacity_bytes: geometry.capacity_bytes,
            flags,
            timeout_secs: options.timeout_secs,
            max_sectors_kb: max_sectors_kb(max_io_bytes, send_buffer),
            index: options.index,
        };

        let (tx, rx) = mpsc::channel();
        let thread_host = host.clone();
        let serving = thread::Builder::new()
            .name("isoe-nbd-do-it".into())
            .spawn(move || device_thread(thread_host, indexes, theirs, setup, tx))?;
        let claimed = match rx.recv() {
            Ok(Ok(claimed)) => claimed,
            Ok(Err(e)) => {
                let _ = serving.join();
                return Err(e);
            }
            Err(_) => {
                let result = serving.join();
                return Err(io::Error::other(format!(
                    "nbd: the device thread ended before setting up: {result:?}"
                )));
            }
        };
        tracing::info!(device = %host.dev_path(claimed.index).display(), "nbd: device claimed");
        Ok(Nbd {
            conn,
            path: host.dev_path(claimed.index),
            index: claimed.index,
            host,
            dev: Some(claimed.dev),
            tid: claimed.tid,
            sectors: geometry.capacity_bytes >> 9,
            write_zeroes: geometry.max_write_zeroes_bytes > 0,
            serving: Some(serving),
            stopping: None,
            ready: false,
            failed: None,
            saved_max_sectors_kb: claimed.saved_max_sectors_kb,
            discard_limit: if geometry.discard {
                geometry.max_discard_bytes / block * block
            } else {
                0
            },
            discard_limiter: None,
        })
    }

    /// Starts the thread that writes the LU's discard limit into the
    /// running device's queue (see the module's notes).
    fn limit_discards(&mut self) {
        if self.discard_limit == 0 {
            return;
        }
        let (host, index, bytes) = (self.host.clone(), self.index, self.discard_limit);
        let spawned = thread::Builder::new()
            .name("isoe-nbd-discard-limit".into())
            .spawn(move || {
                block_signals();
                host.set_queue_attr(index, "discard_max_bytes", &bytes.to_string())
            });
        match spawned {
            Ok(t) => self.discard_limiter = Some(t),
            Err(e) => tracing::debug!(error = %e, "nbd: no thread to set discard_max_bytes"),
        }
    }

    /// `/dev/nbdN`.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Closes the device: shuts our end of the socket (the driver fails
    /// whatever is still in flight), waits for NBD_DO_IT to return and
    /// clears the socket, then lets go of `/dev/nbdN`, which frees it for
    /// the next attach. Drop does the same; this says how NBD_DO_IT ended.
    pub fn finish(&mut self) -> io::Result<()> {
        self.conn.shutdown();
        if let Some(stopper) = self.stopping.take() {
            if let Ok(Err(e)) = stopper.join() {
                tracing::debug!(error = %e, "nbd: NBD_DISCONNECT");
            }
        }
        let result = match self.serving.take() {
            Some(serving) => serving
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("nbd: the NBD_DO_IT thread panicked"))),
            None => Ok(()),
        };
        if let Some(limiter) = self.discard_limiter.take() {
            // The device is idle now: the write, if it still waited for
            // the queue to freeze, is done; then the limit goes.
            match limiter.join() {
                Ok(Ok(())) => {
                    if let Err(e) = self.host.set_queue_attr(
                        self.index,
                        "discard_max_bytes",
                        DISCARD_MAX_BYTES_NONE,
                    ) {
                        tracing::debug!(error = %e, "nbd: clearing discard_max_bytes");
                    }
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "nbd: setting discard_max_bytes"),
                Err(_) => tracing::debug!("nbd: the discard_max_bytes thread panicked"),
            }
        }
        if let Some(saved) = self.saved_max_sectors_kb.take() {
            // Still ours (the descriptor is open, so nobody else can have
            // claimed the device): back to the kernel's default (0 says so
            // from 6.9 on) rather than to what we found, which a killed
            // attach may have left; the old value where 0 is refused.
            let reset = self.host.set_queue_attr(self.index, "max_sectors_kb", "0");
            if reset.is_err() {
                if let Err(e) = self
                    .host
                    .set_queue_attr(self.index, "max_sectors_kb", &saved)
                {
                    tracing::debug!(error = %e, "nbd: restoring max_sectors_kb");
                }
            }
        }
        self.dev = None;
        result
    }
}

impl Drop for Nbd {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!(device = %self.path.display(), error = %e, "nbd: NBD_DO_IT ended with an error");
        }
    }
}

impl BlockDevice for Nbd {
    /// Not the socket itself but an epoll set holding it: readable when
    /// requests (or the end) arrive, and also when replies that a full
    /// socket refused can go on.
    fn wake_fd(&self) -> RawFd {
        self.conn.wake_fd()
    }

    /// A write longer than [`Geometry::max_io_bytes`] can come only if root
    /// raised the queue's `max_sectors_kb`; see the module's notes.
    fn take_requests(&mut self, out: &mut Vec<Request>) -> io::Result<bool> {
        self.conn.take_requests(out)
    }

    /// At least [`Geometry::max_io_bytes`] long, and at least the request.
    fn take_buffer(&mut self, tag: u16) -> Vec<u8> {
        self.conn.take_buffer(tag)
    }

    fn complete(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>) {
        self.conn.complete(tag, buffer, result)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.conn.flush()
    }

    fn ready(&mut self) -> Option<io::Result<PathBuf>> {
        if self.ready {
            return Some(Ok(self.path.clone()));
        }
        if let Some((kind, msg)) = &self.failed {
            return Some(Err(io::Error::new(*kind, msg.clone())));
        }
        if self.serving.as_ref().is_some_and(|t| t.is_finished()) {
            let result = self.serving.take().map(|t| t.join());
            let msg = match result {
                Some(Ok(Err(e))) => format!("{}: NBD_DO_IT failed: {e}", self.path.display()),
                _ => format!(
                    "{}: NBD_DO_IT returned before the device started",
                    self.path.display()
                ),
            };
            self.failed = Some((io::ErrorKind::Other, msg.clone()));
            return Some(Err(io::Error::other(msg)));
        }
        // The driver writes `pid` when NBD_DO_IT starts the device and sets
        // the size last: both there, it serves.
        let running = self.host.server_tid(self.index) == Some(self.tid)
            && (self.sectors == 0 || self.host.sectors(self.index) == Some(self.sectors));
        if !running {
            return None;
        }
        self.ready = true;
        self.limit_discards();
        if let Some(kb) = self.host.queue_attr(self.index, "max_sectors_kb") {
            tracing::debug!(device = %self.path.display(), max_sectors_kb = %kb, "nbd: serving");
        }
        if !self.write_zeroes
            && self
                .host
                .queue_attr(self.index, "write_zeroes_max_bytes")
                .is_some_and(|v| v != "0")
        {
            tracing::info!(
                device = %self.path.display(),
                "nbd: the driver kept a write-zeroes limit from an earlier use of this device: \
                 write-zeroes will come although the LU has none"
            );
        }
        Some(Ok(self.path.clone()))
    }

    /// NBD_DISCONNECT, from a short thread of its own: the driver writes
    /// NBD_CMD_DISC into the socket, blocking while it is full, and only
    /// the serving loop drains it. Requests in flight still complete; then
    /// we close our end, NBD_DO_IT returns, and `take_requests` says
    /// Ok(false).
    fn stop(&mut self) -> io::Result<()> {
        if self.stopping.is_some() || self.conn.ended() {
            return Ok(());
        }
        let Some(dev) = self.dev.clone() else {
            return Ok(());
        };
        self.stopping = Some(
            thread::Builder::new()
                .name("isoe-nbd-disconnect".into())
                .spawn(move || {
                    block_signals();
                    ioctl(&dev, NBD_DISCONNECT, 0).map(|_| ())
                })?,
        );
        Ok(())
    }
}

/// A device this host serves through NBD (whoever serves it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InUse {
    pub path: PathBuf,
    pub index: u32,
    pub size_bytes: u64,
    /// The thread in NBD_DO_IT (or, for a netlink device, the one that
    /// connected it), as /sys/block/nbdN/pid says.
    pub server_tid: Option<i32>,
    /// Its process, and that process's name, while it lives.
    pub server_pid: Option<i32>,
    pub server: Option<String>,
}

/// The nbd devices in use on this host: those with /sys/block/nbdN/pid.
/// Empty when the module is not loaded.
pub fn list() -> io::Result<Vec<InUse>> {
    list_on(&Host::real())
}

fn list_on(host: &Host) -> io::Result<Vec<InUse>> {
    let mut out = Vec::new();
    for index in host.indexes()? {
        if !host.in_use(index) {
            continue;
        }
        let server_tid = host.server_tid(index);
        let owner = server_tid.and_then(sys::owner_of);
        out.push(InUse {
            path: host.dev_path(index),
            index,
            size_bytes: host.sectors(index).unwrap_or(0) * 512,
            server_tid,
            server_pid: owner.as_ref().map(|o| o.0),
            server: owner.map(|o| o.1),
        });
    }
    Ok(out)
}

/// The NBD_DO_IT thread: claims a device, reports, then serves until the
/// device stops.
fn device_thread(
    host: Host,
    indexes: Vec<u32>,
    kernel_end: OwnedFd,
    setup: Setup,
    tx: mpsc::Sender<io::Result<Claimed>>,
) -> io::Result<()> {
    block_signals();
    let claimed = match claim(&host, &indexes, &kernel_end, &setup) {
        Ok(claimed) => claimed,
        Err(e) => {
            let _ = tx.send(Err(e));
            return Ok(());
        }
    };
    // The driver holds its own reference to the socket now; ours would keep
    // it open after the driver lets go, and our end would never see EOF.
    drop(kernel_end);
    let dev = Arc::clone(&claimed.dev);
    let path = host.dev_path(claimed.index);
    if tx.send(Ok(claimed)).is_err() {
        let _ = ioctl(&dev, NBD_CLEAR_SOCK, 0);
        return Ok(());
    }
    let result = ioctl(&dev, NBD_DO_IT, 0);
    // However it ended: let go of the socket and of the requests left.
    if let Err(e) = ioctl(&dev, NBD_CLEAR_SOCK, 0) {
        tracing::debug!(device = %path.display(), error = %e, "nbd: NBD_CLEAR_SOCK");
    }
    tracing::info!(device = %path.display(), ?result, "nbd: NBD_DO_IT returned");
    result.map(|_| ())
}

/// Finds a free device and gives it the socket and the geometry.
fn claim(host: &Host, indexes: &[u32], kernel_end: &OwnedFd, setup: &Setup) -> io::Result<Claimed> {
    let mut candidates: Vec<u32> = match setup.index {
        Some(index) => vec![index],
        None => indexes.to_vec(),
    };
    if setup.flags & NBD_FLAG_SEND_WRITE_ZEROES == 0 {
        // Those without a write-zeroes limit left from an earlier use first
        // (a stable sort: in index order otherwise).
        candidates.sort_by_key(|&i| {
            host.queue_attr(i, "write_zeroes_max_bytes")
                .is_some_and(|v| v != "0")
        });
    }
    let mut busy = 0;
    let mut refused = String::new();
    let mut missing = Vec::new();
    for &index in &candidates {
        if host.in_use(index) {
            busy += 1;
            continue;
        }
        let path = host.dev_path(index);
        let dev = match open_rw(&path) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(path.display().to_string());
                continue;
            }
            Err(e) => return Err(with_root_hint(e, &format!("opening {}", path.display()))),
        };
        match ioctl(&dev, NBD_SET_SOCK, kernel_end.as_raw_fd() as u64) {
            Ok(_) => {}
            // EBUSY: another task is setting it up (we raced it); EINVAL:
            // it belongs to a netlink connection.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EINVAL)) => {
                tracing::debug!(device = %path.display(), error = %e, "nbd: device taken, trying the next");
                refused = format!(" (NBD_SET_SOCK on {}: {e})", path.display());
                busy += 1;
                continue;
            }
            Err(e) => {
                return Err(with_root_hint(
                    e,
                    &format!("NBD_SET_SOCK on {}", path.display()),
                ))
            }
        }
        let configured = (|| {
            ioctl(&dev, NBD_SET_BLKSIZE, setup.block_bytes as u64)
                .map_err(|e| ctx(e, "NBD_SET_BLKSIZE"))?;
            ioctl(&dev, NBD_SET_SIZE, setup.capacity_bytes).map_err(|e| ctx(e, "NBD_SET_SIZE"))?;
            ioctl(&dev, NBD_SET_FLAGS, setup.flags).map_err(|e| ctx(e, "NBD_SET_FLAGS"))?;
            ioctl(&dev, NBD_SET_TIMEOUT, setup.timeout_secs as u64)
                .map_err(|e| ctx(e, "NBD_SET_TIMEOUT"))?;
            Ok::<(), io::Error>(())
        })();
        if let Err(e) = configured {
            let _ = ioctl(&dev, NBD_CLEAR_SOCK, 0);
            return Err(with_root_hint(e, &path.display().to_string()));
        }
        let saved_max_sectors_kb = cap_max_sectors(host, index, setup.max_sectors_kb);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        return Ok(Claimed {
            index,
            dev: Arc::new(dev),
            tid,
            saved_max_sectors_kb,
        });
    }
    let msg = match setup.index {
        Some(index) if busy > 0 => format!("/dev/nbd{index} is in use (see `isoe attach --list`){refused}"),
        _ if !missing.is_empty() => format!(
            "no usable nbd device: {} missing (/sys/block has them: no devtmpfs or udev here?)",
            missing.join(", ")
        ),
        _ => format!(
            "all {} nbd devices are in use{refused}; load the module with more (`modprobe nbd nbds_max=N`, after removing it)",
            candidates.len()
        ),
    };
    Err(io::Error::new(
        if busy > 0 {
            io::ErrorKind::ResourceBusy
        } else {
            io::ErrorKind::NotFound
        },
        msg,
    ))
}

/// Caps the block layer's request size to our buffers; returns the old
/// value to restore. Best effort: the slots grow if it does not hold.
fn cap_max_sectors(host: &Host, index: u32, want_kb: u32) -> Option<String> {
    let old = host.queue_attr(index, "max_sectors_kb")?;
    let hw: u32 = host
        .queue_attr(index, "max_hw_sectors_kb")
        .and_then(|s| s.parse().ok())
        .unwrap_or(want_kb);
    let kb = want_kb.min(hw);
    if old.parse::<u32>().ok() == Some(kb) {
        return None;
    }
    match host.set_queue_attr(index, "max_sectors_kb", &kb.to_string()) {
        Ok(()) => Some(old),
        Err(e) => {
            tracing::warn!(index, kb, error = %e, "nbd: could not set max_sectors_kb; longer requests will grow the buffers");
            None
        }
    }
}

/// `discard_max_bytes` with no user limit: the largest the attribute
/// takes (under 2^32 sectors) that is a multiple of any block size the
/// driver has (up to 4096, which the value must be a multiple of); the
/// kernel caps it to the driver's own limit.
const DISCARD_MAX_BYTES_NONE: &str = "2199023251456";

/// Gives the kernel's end of the pair the largest send buffer it can have
/// (see the module's notes); returns what it got.
fn grow_send_buffer(kernel_end: &OwnedFd) -> usize {
    let fd = kernel_end.as_raw_fd();
    let want: libc::c_int = libc::c_int::MAX / 2;
    let set = |opt| {
        // SAFETY: an int option, passed by pointer with its size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&want as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as _,
            )
        }
    };
    if set(libc::SO_SNDBUFFORCE) != 0 {
        // Without CAP_NET_ADMIN: as far as net.core.wmem_max allows.
        set(libc::SO_SNDBUF);
    }
    let mut got: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above, for reading.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    got.max(0) as usize
}

/// The request size to cap the queue to: the buffers' size, or less so
/// that the driver's whole queue fits the kernel end's send buffer, with
/// room for the skbs' overhead (half of each request's share of the buffer
/// for its data). When the buffer is too small for
/// that to be reasonable (no CAP_NET_ADMIN), the buffers' size, and a
/// warning.
fn max_sectors_kb(max_io_bytes: u32, send_buffer: usize) -> u32 {
    let want_kb = (max_io_bytes / 1024).max(4);
    let fits_kb = send_buffer / (DRIVER_QUEUE_DEPTH as usize * 2) / 1024;
    if fits_kb >= want_kb as usize {
        return want_kb;
    }
    if fits_kb >= 64 {
        // A power of two: aligned for any block size.
        return 1 << fits_kb.ilog2();
    }
    tracing::warn!(
        send_buffer,
        "nbd: the kernel end's send buffer stays small (no CAP_NET_ADMIN?): should this process be killed \
         with SIGKILL while writes are queued, the writers hang until they are killed too"
    );
    want_kb
}

fn ctx(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// EPERM and EACCES say that this takes root.
fn with_root_hint(e: io::Error, what: &str) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
            e.kind(),
            format!("{what}: {e}: attaching through NBD needs root (CAP_SYS_ADMIN, and access to /dev/nbd*)"),
        ),
        _ => io::Error::new(e.kind(), format!("{what}: {e}")),
    }
}

fn open_rw(path: &std::path::Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

fn ioctl(fd: &OwnedFd, request: u64, arg: u64) -> io::Result<libc::c_int> {
    // SAFETY: the nbd ioctls take an integer argument, never a pointer.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg as libc::c_ulong) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Blocks every signal on the calling thread: NBD_DO_IT waits
/// interruptibly, and a signal handled there would make the driver shut
/// the connection down. (SIGKILL still ends it, as it should.)
fn block_signals() {
    // SAFETY: sigfillset initialises the set; pthread_sigmask only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests;
