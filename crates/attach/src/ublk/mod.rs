//! The ublk front-end: the kernel's `ublk_drv` turns block requests on
//! /dev/ublkbN into io_uring completions on /dev/ublkcN; we answer them
//! with commands on the same ring.
//!
//! One hardware queue, its depth from [`Options`], one buffer per tag (the
//! kernel copies a write's data into it before handing us the request,
//! and a read's data out of it when we commit). Devices are created with
//! `UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE`: when the serving
//! process dies (SIGKILL included) the kernel holds the disk quiesced,
//! requeues the requests in flight, and a new process can resume it
//! ([`Options::recover`]); nothing the disk's users did is failed.
//!
//! Threads: everything but the long control commands happens on the one
//! thread that serves the queue (the kernel binds the queue to the thread
//! that fetched on it; see `queue.rs`). START_DEV, END_USER_RECOVERY and
//! STOP_DEV block in the kernel until requests were served (the partition
//! scan, the requeued requests, the drain), so each is sent from a short
//! control thread that reports back over a channel and wakes the serving
//! thread's ring (MSG_RING).
//!
//! Zero copy: Linux 6.12 clears `UBLK_F_SUPPORT_ZERO_COPY` in ADD_DEV's
//! answer (zero copy by registered buffers and `UBLK_F_AUTO_BUF_REG` came
//! with 6.15 and 6.16), so data is copied once each way between the
//! request's pages and the tag's buffer. The test bed's 6.18 accepts
//! either beside [`FLAGS`] (and refuses `UBLK_F_USER_RECOVERY_FAIL_IO`
//! with reissue); devices do not ask for them yet, so they copy there
//! too.

mod ctrl;
mod queue;
pub mod sys;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use ctrl::{delete_dead, features, info, list, UblkInfo, CONTROL_PATH};

use crate::device::{BlockDevice, Geometry, Op, Request};
use ctrl::Control;
use isoe_initiator::DataPlane;
pub use queue::DataPath;
use queue::{page_size, Queue, WAKE};
use sys::{DevInfo, UblkParams};

/// The flags every device is created with: ioctl-encoded commands (the
/// only ones newer kernels may accept), and user recovery with reissue.
pub const FLAGS: u64 =
    sys::UBLK_F_CMD_IOCTL_ENCODE | sys::UBLK_F_USER_RECOVERY | sys::UBLK_F_USER_RECOVERY_REISSUE;

/// How long a recovery waits for the dead server's device to be quiesced
/// and its char device released.
const RECOVER_WAIT: Duration = Duration::from_secs(10);

/// How long Drop serves (failing) requests while the device stops.
const DROP_DRAIN: Duration = Duration::from_secs(30);

/// How a ublk device is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Requests in flight at most (tags; 1 to 4096).
    pub queue_depth: u16,
    /// Resume this existing device, whose server died (quiesced), instead
    /// of adding a new one.
    pub recover: Option<u32>,
    /// Zero copy where the kernel offers it (6.16+); the copying path
    /// when false. A resumed device keeps the path it was made with.
    pub zero_copy: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            queue_depth: 128,
            recover: None,
            zero_copy: true,
        }
    }
}

/// What went wrong; each says what to do where something can be done.
#[derive(Debug, thiserror::Error)]
pub enum UblkError {
    #[error(
        "ublk is not available: {} is missing. It needs the kernel module ublk_drv, from \
         Linux 6.0 or later built with CONFIG_BLK_DEV_UBLK (this kernel is {release}){modprobe}. \
         Load the module, or use --nbd",
        path.display()
    )]
    ModuleMissing {
        path: PathBuf,
        release: String,
        modprobe: String,
    },
    #[error(
        "ublk_drv is loaded but {} is missing (no devtmpfs or udev made the node); or use --nbd",
        path.display()
    )]
    NodeMissing { path: PathBuf },
    #[error("ublk needs root (CAP_SYS_ADMIN): {what} was refused")]
    NeedsRoot { what: String },
    #[error(
        "cannot set up an io_uring ({0}); ublk needs io_uring \
         (is it off? sysctl kernel.io_uring_disabled); or use --nbd"
    )]
    IoUring(#[source] io::Error),
    #[error("ublk {cmd} for device {dev_id}: the kernel refused it: {}", io::Error::from_raw_os_error(*errno))]
    Kernel {
        cmd: &'static str,
        dev_id: u32,
        errno: i32,
    },
    #[error("ublk cannot present this disk: {0}")]
    Geometry(String),
    #[error("{} did not appear within {} s (no devtmpfs, and udev did not make it)", path.display(), waited.as_secs())]
    CharDeviceMissing { path: PathBuf, waited: Duration },
    #[error("cannot open {}: {source}", path.display())]
    CharDevice { path: PathBuf, source: io::Error },
    #[error("cannot resume ublk device {dev_id}: {reason}")]
    Recover { dev_id: u32, reason: String },
    #[error("ublk device {dev_id} is {state} and served by process {pid}, which is alive: not deleting it")]
    InUse {
        dev_id: u32,
        state: &'static str,
        pid: i32,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl UblkError {
    fn kernel(cmd: &'static str, dev_id: u32, errno: i32) -> UblkError {
        UblkError::Kernel { cmd, dev_id, errno }
    }

    /// The io::ErrorKind that fits.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            UblkError::ModuleMissing { .. }
            | UblkError::NodeMissing { .. }
            | UblkError::CharDeviceMissing { .. } => io::ErrorKind::NotFound,
            UblkError::NeedsRoot { .. } => io::ErrorKind::PermissionDenied,
            UblkError::IoUring(e) => e.kind(),
            UblkError::Kernel { errno, .. } => match *errno {
                libc::EPERM | libc::EACCES => io::ErrorKind::PermissionDenied,
                e => io::Error::from_raw_os_error(e).kind(),
            },
            UblkError::Geometry(_) => io::ErrorKind::InvalidInput,
            UblkError::CharDevice { source, .. } | UblkError::Io { source, .. } => source.kind(),
            UblkError::Recover { .. } | UblkError::InUse { .. } => io::ErrorKind::Other,
        }
    }

    /// The kernel's errno, if the kernel refused a command.
    pub fn errno(&self) -> Option<i32> {
        match self {
            UblkError::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl From<UblkError> for io::Error {
    fn from(e: UblkError) -> io::Error {
        match e {
            // Keep the errno where there is one, with the words.
            UblkError::Kernel { errno, .. } => {
                let raw = io::Error::from_raw_os_error(errno);
                io::Error::new(raw.kind(), e.to_string())
            }
            e => io::Error::new(e.kind(), e.to_string()),
        }
    }
}

fn log2(n: u32) -> u8 {
    (31 - n.leading_zeros()) as u8
}

/// The parameters SET_PARAMS gets for `g`, on a device whose buffers are
/// `max_io_buf_bytes` (as ADD_DEV answered: a multiple of the page).
pub fn params(g: &Geometry, max_io_buf_bytes: u32) -> Result<UblkParams, UblkError> {
    let page = page_size() as u32;
    let block = g.block_bytes;
    if !block.is_power_of_two() || block < 512 || block > page {
        return Err(UblkError::Geometry(format!(
            "logical block size {block}: ublk takes a power of two from 512 to {page}"
        )));
    }
    let physical = g.physical_block_bytes.max(block);
    if !physical.is_power_of_two() {
        return Err(UblkError::Geometry(format!(
            "physical block size {physical} is not a power of two"
        )));
    }
    if max_io_buf_bytes < page || max_io_buf_bytes < block {
        return Err(UblkError::Geometry(format!(
            "largest request {max_io_buf_bytes} bytes: ublk needs at least a page ({page})"
        )));
    }
    let block_sectors = block / 512;
    let mut basic = sys::ParamBasic {
        logical_bs_shift: log2(block),
        physical_bs_shift: log2(physical),
        io_min_shift: log2(physical),
        // The kernel takes 1 << shift: with no OPTIMAL TRANSFER LENGTH,
        // say the physical block.
        io_opt_shift: if g.optimal_io_bytes >= physical {
            log2(g.optimal_io_bytes)
        } else {
            log2(physical)
        },
        max_sectors: max_io_buf_bytes / 512 / block_sectors * block_sectors,
        dev_sectors: g.capacity_bytes / u64::from(block) * u64::from(block_sectors),
        ..sys::ParamBasic::default()
    };
    if g.read_only {
        basic.attrs |= sys::UBLK_ATTR_READ_ONLY;
    }
    if g.volatile_cache {
        basic.attrs |= sys::UBLK_ATTR_VOLATILE_CACHE;
    }
    if g.fua {
        basic.attrs |= sys::UBLK_ATTR_FUA;
    }
    let mut p = UblkParams {
        len: std::mem::size_of::<UblkParams>() as u32,
        types: sys::UBLK_PARAM_TYPE_BASIC,
        basic,
        ..UblkParams::default()
    };
    let discard = g.discard && g.max_discard_bytes >= block;
    let zeroes = g.max_write_zeroes_bytes >= block;
    if discard || zeroes {
        // The kernel wants a granularity even for write-zeroes alone.
        let granularity = if discard {
            g.discard_granularity_bytes.max(block)
        } else {
            block
        };
        p.types |= sys::UBLK_PARAM_TYPE_DISCARD;
        p.discard = sys::ParamDiscard {
            discard_alignment: if discard {
                g.discard_alignment_bytes % granularity
            } else {
                0
            },
            discard_granularity: granularity,
            max_discard_sectors: if discard {
                g.max_discard_bytes / 512 / block_sectors * block_sectors
            } else {
                0
            },
            max_write_zeroes_sectors: if zeroes {
                g.max_write_zeroes_bytes / 512 / block_sectors * block_sectors
            } else {
                0
            },
            // The only value the kernel takes.
            max_discard_segments: 1,
            reserved0: 0,
        };
    }
    Ok(p)
}

/// A long control command, sent from its own thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Start,
    EndRecovery,
    Stop,
}

struct CtlThread {
    job: Job,
    handle: JoinHandle<()>,
    rx: mpsc::Receiver<Result<(), UblkError>>,
}

/// Sends `job` for `dev_id` from a new thread; when the kernel answered,
/// the answer goes into the channel and a CQE into the queue's ring (a
/// duplicate of `ring` keeps it valid for that).
fn spawn_ctl(job: Job, dev_id: u32, ring: RawFd) -> Result<CtlThread, UblkError> {
    let mut ctl = Control::open()?;
    // SAFETY: `ring` is the queue's ring fd, open for the duration of this
    // call (the caller holds the queue); the duplicate is owned.
    let ring: OwnedFd = unsafe { BorrowedFd::borrow_raw(ring) }
        .try_clone_to_owned()
        .map_err(|e| UblkError::Io {
            what: "duplicating the queue's ring fd".into(),
            source: e,
        })?;
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("ublk{dev_id}-ctl"))
        .spawn(move || {
            let pid = std::process::id() as i32;
            let result = match job {
                Job::Start => ctl.start_dev(dev_id, pid),
                Job::EndRecovery => ctl.end_user_recovery(dev_id, pid),
                Job::Stop => ctl.stop_dev(dev_id),
            };
            if result.is_ok() && job != Job::Stop {
                // add_disk made the node already with devtmpfs; give udev
                // a moment otherwise.
                let disk = disk_path(dev_id);
                let deadline = Instant::now() + Duration::from_secs(3);
                while !disk.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = tx.send(result);
            if let Err(e) = ctl.wake(ring.as_raw_fd(), WAKE) {
                tracing::warn!(dev_id, %e, "ublk: cannot wake the serving thread");
            }
        })
        .map_err(|e| UblkError::Io {
            what: "starting the ublk control thread".into(),
            source: e,
        })?;
    Ok(CtlThread { job, handle, rx })
}

fn disk_path(dev_id: u32) -> PathBuf {
    PathBuf::from(format!("/dev/ublkb{dev_id}"))
}

/// A ublk device served by this process. See the module doc.
pub struct UblkDevice {
    dev_id: u32,
    /// None once dropped (Drop closes it before DEL_DEV).
    queue: Option<Queue>,
    /// The flags the kernel accepted.
    flags: u64,
    recovering: bool,
    /// FETCH_REQs sent (from the serving thread) and the start sent.
    active: bool,
    ctl: Option<CtlThread>,
    /// START_DEV's (or END_USER_RECOVERY's) answer, once it came.
    started: Option<Result<PathBuf, UblkError>>,
    stop_wanted: bool,
    stop_sent: bool,
    /// A failed STOP_DEV, for the next take_requests.
    stop_error: Option<UblkError>,
    /// Delete the kernel device in Drop (not when it was never ours).
    delete: bool,
}

impl UblkDevice {
    /// Adds a ublk device for `geometry` (or resumes `options.recover`),
    /// ready to be served: the first [`BlockDevice::ready`] or
    /// [`BlockDevice::take_requests`] call, on the thread that serves it,
    /// fetches and starts it. Needs root.
    pub fn create(geometry: &Geometry, options: Options) -> Result<UblkDevice, UblkError> {
        if options.queue_depth == 0 || options.queue_depth > sys::UBLK_MAX_QUEUE_DEPTH {
            return Err(UblkError::Geometry(format!(
                "queue depth {}: ublk takes 1 to {}",
                options.queue_depth,
                sys::UBLK_MAX_QUEUE_DEPTH
            )));
        }
        let mut ctl = Control::open()?;
        match options.recover {
            None => UblkDevice::add(&mut ctl, geometry, options),
            Some(id) => UblkDevice::recover(&mut ctl, geometry, id),
        }
    }

    fn add(ctl: &mut Control, g: &Geometry, options: Options) -> Result<UblkDevice, UblkError> {
        let page = page_size() as u32;
        let max_io = g.max_io_bytes / page * page;
        // Check what can be checked before the kernel has a device.
        params(g, max_io)?;
        // Zero copy only where every part of it is there: a kernel that
        // lacks one drops its flag and would leave a half path.
        let zero_copy = options.zero_copy
            && ctl
                .get_features()
                .is_ok_and(|f| f & sys::ZERO_COPY_FLAGS == sys::ZERO_COPY_FLAGS);
        let mut info = DevInfo {
            nr_hw_queues: 1,
            queue_depth: options.queue_depth,
            max_io_buf_bytes: max_io,
            dev_id: u32::MAX,
            flags: if zero_copy {
                FLAGS | sys::ZERO_COPY_FLAGS
            } else {
                FLAGS
            },
            ..DevInfo::default()
        };
        ctl.add_dev(&mut info)?;
        let dev_id = info.dev_id;
        tracing::debug!(dev_id, flags = %sys::flag_names(info.flags), "ublk: device added");
        let mut rest = || -> Result<Queue, UblkError> {
            if info.nr_hw_queues != 1 || info.queue_depth != options.queue_depth {
                return Err(UblkError::Geometry(format!(
                    "the kernel made {} queues of depth {}",
                    info.nr_hw_queues, info.queue_depth
                )));
            }
            ctl.set_params(dev_id, &params(g, info.max_io_buf_bytes)?)?;
            let buf_bytes = g.max_io_bytes.max(info.max_io_buf_bytes) as usize;
            Queue::open(
                dev_id,
                info.queue_depth,
                buf_bytes,
                DataPath::of_flags(info.flags),
            )
        };
        match rest() {
            Ok(queue) => Ok(UblkDevice::new(dev_id, queue, info.flags, false)),
            Err(e) => {
                // The queue (and /dev/ublkcN) is closed: DEL_DEV need not wait.
                if let Err(del) = ctl.del_dev(dev_id) {
                    tracing::warn!(dev_id, %del, "ublk: cannot delete the half-made device");
                }
                Err(e)
            }
        }
    }

    fn recover(ctl: &mut Control, g: &Geometry, dev_id: u32) -> Result<UblkDevice, UblkError> {
        let fail = |reason: String| UblkError::Recover { dev_id, reason };
        // The kernel quiesces the device once the dead server's ring is
        // torn down: give it a moment.
        let deadline = Instant::now() + RECOVER_WAIT;
        let info = loop {
            let info = ctl.get_dev_info(dev_id).map_err(|e| match e {
                UblkError::Kernel {
                    errno: libc::ENODEV,
                    ..
                } => fail("no such device".into()),
                e => e,
            })?;
            let alive = ctrl::pid_alive(info.ublksrv_pid);
            match info.state {
                sys::UBLK_S_DEV_QUIESCED => break info,
                sys::UBLK_S_DEV_LIVE if !alive && Instant::now() < deadline => {}
                sys::UBLK_S_DEV_LIVE if alive => {
                    return Err(fail(format!(
                        "it is live, served by process {}",
                        info.ublksrv_pid
                    )))
                }
                state => {
                    return Err(fail(format!(
                        "it is {} (only a quiesced device, whose server died, can be resumed)",
                        sys::state_name(state)
                    )))
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if info.flags & sys::UBLK_F_USER_RECOVERY == 0 {
            return Err(fail("it was made without user recovery".into()));
        }
        if info.nr_hw_queues != 1 {
            return Err(fail(format!(
                "it has {} queues; isoe serves one",
                info.nr_hw_queues
            )));
        }
        let p = ctl.get_params(dev_id)?;
        let want = params(g, info.max_io_buf_bytes)?;
        if p.basic.logical_bs_shift != want.basic.logical_bs_shift
            || p.basic.dev_sectors != want.basic.dev_sectors
        {
            return Err(fail(format!(
                "it has {} sectors of {} bytes, the LU {} of {}",
                p.basic.dev_sectors,
                1u32 << p.basic.logical_bs_shift,
                want.basic.dev_sectors,
                g.block_bytes
            )));
        }
        let device_max = u64::from(p.basic.max_sectors) * 512;
        if device_max > u64::from(g.max_io_bytes) {
            return Err(fail(format!(
                "it takes requests of up to {device_max} bytes, the LU {}",
                g.max_io_bytes
            )));
        }
        // START_USER_RECOVERY is refused (EBUSY) until the dead server's
        // /dev/ublkcN is released.
        loop {
            match ctl.start_user_recovery(dev_id) {
                Ok(()) => break,
                Err(UblkError::Kernel {
                    errno: libc::EBUSY, ..
                }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
        let buf_bytes = g.max_io_bytes.max(info.max_io_buf_bytes) as usize;
        let path = DataPath::of_flags(info.flags);
        let queue = Queue::open(dev_id, info.queue_depth, buf_bytes, path).map_err(|e| {
            fail(format!(
                "{e} (recovery started: `isoe detach /dev/ublkb{dev_id}` deletes the device)"
            ))
        })?;
        tracing::info!(dev_id, "ublk: resuming the device");
        Ok(UblkDevice::new(dev_id, queue, info.flags, true))
    }

    fn new(dev_id: u32, queue: Queue, flags: u64, recovering: bool) -> UblkDevice {
        UblkDevice {
            dev_id,
            queue: Some(queue),
            flags,
            recovering,
            active: false,
            ctl: None,
            started: None,
            stop_wanted: false,
            stop_sent: false,
            stop_error: None,
            delete: true,
        }
    }

    /// The device's number (N of /dev/ublkbN); what [`Options::recover`]
    /// takes after a crash.
    pub fn dev_id(&self) -> u32 {
        self.dev_id
    }

    /// The UBLK_F_* flags the kernel accepted.
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// How request data moves: zero copy or the copying path.
    pub fn data_path(&self) -> DataPath {
        DataPath::of_flags(self.flags)
    }

    /// Tags: requests in flight at most.
    pub fn queue_depth(&self) -> u16 {
        self.queue.as_ref().map_or(0, |q| q.depth())
    }

    /// /dev/ublkbN.
    pub fn disk_path(&self) -> PathBuf {
        disk_path(self.dev_id)
    }

    fn queue(&mut self) -> &mut Queue {
        self.queue.as_mut().expect("the queue lives until Drop")
    }

    /// On the serving thread's first call: FETCH_REQ every tag, then start
    /// (or end the recovery) from a control thread.
    fn activate(&mut self) {
        if self.active || self.stop_wanted {
            return;
        }
        self.active = true;
        let job = if self.recovering {
            Job::EndRecovery
        } else {
            Job::Start
        };
        let result = self
            .queue()
            .fetch_all()
            .map_err(|e| UblkError::Io {
                what: "sending FETCH_REQ".into(),
                source: e,
            })
            .and_then(|()| spawn_ctl(job, self.dev_id, self.queue().ring_fd()));
        match result {
            Ok(t) => self.ctl = Some(t),
            Err(e) => self.started = Some(Err(e)),
        }
    }

    /// Collects a control thread's answer; sends STOP_DEV when wanted and
    /// nothing else is in flight.
    fn poll_ctl(&mut self) {
        if let Some(t) = &self.ctl {
            let answer = match t.rx.try_recv() {
                Ok(r) => Some(r),
                Err(mpsc::TryRecvError::Empty) => None,
                Err(mpsc::TryRecvError::Disconnected) => Some(Err(UblkError::Io {
                    what: "the ublk control thread".into(),
                    source: io::Error::other("ended without an answer"),
                })),
            };
            if let Some(result) = answer {
                let t = self.ctl.take().expect("checked above");
                let _ = t.handle.join();
                match t.job {
                    Job::Start | Job::EndRecovery => {
                        if let Err(e) = &result {
                            tracing::warn!(dev_id = self.dev_id, %e, "ublk: the device did not start");
                        }
                        self.started = Some(result.map(|()| disk_path(self.dev_id)));
                    }
                    Job::Stop => {
                        if let Err(e) = result {
                            tracing::warn!(dev_id = self.dev_id, %e, "ublk: STOP_DEV failed");
                            self.stop_error = Some(e);
                        }
                    }
                }
            }
        }
        if self.stop_wanted && !self.stop_sent && self.ctl.is_none() && self.active {
            // A device that never started has no disk to stop: its fetches
            // are cancelled when the queue closes.
            if matches!(self.started, Some(Ok(_))) {
                self.stop_sent = true;
                let ring = self.queue().ring_fd();
                match spawn_ctl(Job::Stop, self.dev_id, ring) {
                    Ok(t) => self.ctl = Some(t),
                    Err(e) => self.stop_error = Some(e),
                }
            }
        }
    }

    /// Whether requests can still come: not once the start failed, or a
    /// stop was asked for a device that never started.
    fn finished(&self) -> bool {
        matches!(self.started, Some(Err(_))) || (self.stop_wanted && !self.active)
    }

    /// Leaves the kernel device in place when this is dropped (for a
    /// later [`Options::recover`], or `--delete`): only the queue closes,
    /// and the kernel holds the disk quiesced as after a crash.
    pub fn keep_on_drop(&mut self) {
        self.delete = false;
    }
}

impl BlockDevice for UblkDevice {
    fn wake_fd(&self) -> RawFd {
        self.queue
            .as_ref()
            .expect("the queue lives until Drop")
            .ring_fd()
    }

    fn take_requests(&mut self, out: &mut Vec<Request>) -> io::Result<bool> {
        self.activate();
        self.poll_ctl();
        if let Some(e) = self.stop_error.take() {
            return Err(e.into());
        }
        if self.finished() {
            return Ok(false);
        }
        self.queue().take(out)
    }

    fn take_buffer(&mut self, tag: u16) -> Vec<u8> {
        self.queue().take_buffer(tag)
    }

    fn complete(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>) {
        self.queue().complete(tag, buffer, result)
    }

    fn external(&self, request: &Request) -> bool {
        let Some(q) = self.queue.as_ref() else {
            return false;
        };
        match request.op {
            Op::Read => q.path() == DataPath::ZeroCopy,
            Op::Write => q.sends_from_pages(Op::Write, request.len),
            _ => false,
        }
    }

    fn data_plane(&mut self) -> Option<&mut dyn DataPlane> {
        match self.queue.as_mut() {
            Some(q) if q.path() == DataPath::ZeroCopy => Some(q),
            _ => None,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.activate();
        self.queue().flush()
    }

    fn ready(&mut self) -> Option<io::Result<PathBuf>> {
        self.activate();
        self.poll_ctl();
        match &self.started {
            None => None,
            Some(Ok(path)) => Some(Ok(path.clone())),
            Some(Err(e)) => Some(Err(io::Error::new(e.kind(), e.to_string()))),
        }
    }

    /// Sends STOP_DEV from a control thread. The serving loop must keep
    /// completing every request until take_requests says Ok(false), failing
    /// them if need be: with user recovery on, Linux 6.12's STOP_DEV first
    /// waits, with no timeout and unkillably, for every request handed out
    /// to be completed.
    fn stop(&mut self) -> io::Result<()> {
        self.stop_wanted = true;
        self.poll_ctl();
        Ok(())
    }
}

impl Drop for UblkDevice {
    fn drop(&mut self) {
        if std::thread::panicking() && self.delete && self.active {
            // Whatever went wrong, the disk's users need not see it: leave
            // the device as a crash would (quiesced, its requests held for
            // a new server) rather than fail what is in flight.
            tracing::error!(
                dev_id = self.dev_id,
                "ublk: panicking; device {} is left quiesced: resume it with --recover {}, or delete it",
                self.dev_id,
                self.dev_id
            );
            self.delete = false;
        }
        if self.active && self.delete {
            // Nobody can complete the requests handed out any more: fail
            // them, for with user recovery on, STOP_DEV waits (unkillably)
            // until every request handed out is completed.
            let failed = self.queue().fail_held();
            if failed > 0 {
                tracing::warn!(
                    dev_id = self.dev_id,
                    failed,
                    "ublk: requests failed on drop"
                );
            }
            // Stop the disk and serve (failing) what still comes until the
            // kernel aborted every fetch, so that no request is left with a
            // buffer about to be freed and DEL_DEV does not wait on it.
            self.stop_wanted = true;
            let deadline = Instant::now() + DROP_DRAIN;
            let mut reqs = Vec::new();
            loop {
                self.poll_ctl();
                let queue = self.queue();
                if queue.all_aborted() && self.ctl.is_none() {
                    break;
                }
                if (matches!(self.started, Some(Err(_))) || self.stop_error.is_some())
                    && self.ctl.is_none()
                {
                    break;
                }
                if Instant::now() >= deadline {
                    tracing::warn!(
                        dev_id = self.dev_id,
                        "ublk: the device did not stop in time"
                    );
                    break;
                }
                let queue = self.queue();
                reqs.clear();
                if queue.take(&mut reqs).is_err() {
                    // A refused command: nothing more to learn here.
                }
                for r in &reqs {
                    let buf = queue.take_buffer(r.tag);
                    queue.complete(r.tag, buf, Err(libc::EIO));
                }
                let _ = queue.flush();
                let _ = queue.wait(Duration::from_millis(100));
            }
        }
        if let Some(t) = self.ctl.take() {
            if t.handle.is_finished() {
                let _ = t.handle.join();
            }
        }
        // Close the ring, the mapping and /dev/ublkcN first: DEL_DEV waits
        // for the char device's release.
        self.queue.take();
        if self.delete {
            let result = Control::open().and_then(|mut c| c.del_dev_nowait(self.dev_id));
            match result {
                Ok(()) => tracing::debug!(dev_id = self.dev_id, "ublk: device deleted"),
                Err(UblkError::Kernel {
                    errno: libc::ENODEV,
                    ..
                }) => {}
                Err(e) => {
                    tracing::warn!(dev_id = self.dev_id, %e, "ublk: cannot delete the device")
                }
            }
        }
    }
}

/// Adds a throwaway device asking for [`FLAGS`]` | extra` and deletes it at
/// once: the flags this kernel accepted (ADD_DEV clears those it does not
/// know or support, such as zero copy on 6.12).
pub fn probe_flags(extra: u64) -> Result<u64, UblkError> {
    let mut ctl = Control::open()?;
    let mut info = DevInfo {
        nr_hw_queues: 1,
        queue_depth: 1,
        max_io_buf_bytes: page_size() as u32,
        dev_id: u32::MAX,
        flags: FLAGS | extra,
        ..DevInfo::default()
    };
    ctl.add_dev(&mut info)?;
    let accepted = info.flags;
    ctl.del_dev(info.dev_id)?;
    Ok(accepted)
}

/// Whether /dev/ublk-control exists (ublk_drv loaded).
pub fn available() -> bool {
    Path::new(CONTROL_PATH).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ram_geometry() -> Geometry {
        Geometry {
            block_bytes: 512,
            physical_block_bytes: 4096,
            capacity_bytes: 256 << 20,
            max_io_bytes: 1 << 20,
            optimal_io_bytes: 0,
            discard: true,
            discard_granularity_bytes: 4096,
            discard_alignment_bytes: 0,
            max_discard_bytes: 64 << 20,
            max_write_zeroes_bytes: 32 << 20,
            read_only: false,
            volatile_cache: true,
            fua: true,
        }
    }

    #[test]
    fn params_from_a_geometry() {
        let p = params(&ram_geometry(), 1 << 20).unwrap();
        assert_eq!(p.len, 112);
        assert_eq!(
            p.types,
            sys::UBLK_PARAM_TYPE_BASIC | sys::UBLK_PARAM_TYPE_DISCARD
        );
        assert_eq!(p.basic.logical_bs_shift, 9);
        assert_eq!(p.basic.physical_bs_shift, 12);
        assert_eq!(p.basic.io_min_shift, 12);
        assert_eq!(p.basic.io_opt_shift, 12);
        assert_eq!(p.basic.max_sectors, 2048);
        assert_eq!(p.basic.dev_sectors, 512 * 1024);
        assert_eq!(
            p.basic.attrs,
            sys::UBLK_ATTR_VOLATILE_CACHE | sys::UBLK_ATTR_FUA
        );
        assert_eq!(p.discard.discard_granularity, 4096);
        assert_eq!(p.discard.discard_alignment, 0);
        assert_eq!(p.discard.max_discard_sectors, 128 * 1024);
        assert_eq!(p.discard.max_write_zeroes_sectors, 64 * 1024);
        assert_eq!(p.discard.max_discard_segments, 1);
    }

    #[test]
    fn params_of_a_read_only_4k_disk_without_discard() {
        let g = Geometry {
            block_bytes: 4096,
            physical_block_bytes: 4096,
            capacity_bytes: (10 << 30) + 4096 + 100,
            max_io_bytes: 512 << 10,
            optimal_io_bytes: 192 << 10,
            discard: false,
            max_write_zeroes_bytes: 0,
            read_only: true,
            volatile_cache: false,
            fua: false,
            ..ram_geometry()
        };
        let p = params(&g, 512 << 10).unwrap();
        assert_eq!(p.types, sys::UBLK_PARAM_TYPE_BASIC);
        assert_eq!(p.basic.logical_bs_shift, 12);
        // 192 KiB is no power of two: the one below.
        assert_eq!(p.basic.io_opt_shift, 17);
        // Whole blocks only.
        assert_eq!(p.basic.dev_sectors, ((10 << 30) + 4096) / 512);
        assert_eq!(p.basic.max_sectors, 1024);
        assert_eq!(p.basic.attrs, sys::UBLK_ATTR_READ_ONLY);
        assert_eq!(p.discard, sys::ParamDiscard::default());
    }

    #[test]
    fn write_zeroes_alone_still_gives_a_granularity() {
        let g = Geometry {
            discard: false,
            ..ram_geometry()
        };
        let p = params(&g, 1 << 20).unwrap();
        assert_eq!(
            p.types & sys::UBLK_PARAM_TYPE_DISCARD,
            sys::UBLK_PARAM_TYPE_DISCARD
        );
        assert_eq!(p.discard.max_discard_sectors, 0);
        assert_eq!(p.discard.discard_granularity, 512);
        assert_eq!(p.discard.max_write_zeroes_sectors, 64 * 1024);
    }

    #[test]
    fn geometries_ublk_cannot_take() {
        let bad = |g: Geometry, max| matches!(params(&g, max), Err(UblkError::Geometry(_)));
        assert!(bad(
            Geometry {
                block_bytes: 520,
                ..ram_geometry()
            },
            1 << 20
        ));
        assert!(bad(
            Geometry {
                block_bytes: 256,
                ..ram_geometry()
            },
            1 << 20
        ));
        assert!(bad(
            Geometry {
                block_bytes: 65536,
                ..ram_geometry()
            },
            1 << 20
        ));
        assert!(bad(
            Geometry {
                physical_block_bytes: 3 * 4096,
                ..ram_geometry()
            },
            1 << 20
        ));
        assert!(bad(ram_geometry(), 0));
    }

    #[test]
    fn errors_become_io_errors_with_their_words() {
        let e: io::Error = UblkError::kernel("START_DEV", 3, libc::EINVAL).into();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e
            .to_string()
            .starts_with("ublk START_DEV for device 3: the kernel refused it"));
        let e: io::Error = UblkError::NeedsRoot {
            what: "opening /dev/ublk-control".into(),
        }
        .into();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            "ublk needs root (CAP_SYS_ADMIN): opening /dev/ublk-control was refused"
        );
    }

    #[test]
    fn bad_queue_depths_are_refused_before_the_kernel() {
        for depth in [0, 4097] {
            let r = UblkDevice::create(
                &ram_geometry(),
                Options {
                    queue_depth: depth,
                    ..Options::default()
                },
            );
            assert!(matches!(r, Err(UblkError::Geometry(_))));
        }
    }
}
