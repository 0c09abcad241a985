//! The control device, /dev/ublk-control: adding, starting, stopping,
//! recovering and deleting ublk devices, one command at a time through an
//! io_uring of 128-byte SQEs (the kernel refuses control commands in
//! smaller ones).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::sys::{self, CtrlCmd, DevInfo, UblkParams};
use super::UblkError;

/// The control device's node.
pub const CONTROL_PATH: &str = "/dev/ublk-control";

/// How long to wait for /dev/ublk-control after loading the module.
const NODE_WAIT: Duration = Duration::from_secs(3);

/// One open control device with its ring.
pub(crate) struct Control {
    file: File,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
}

impl Control {
    /// Opens /dev/ublk-control, loading ublk_drv (once) when the node is
    /// missing.
    pub(crate) fn open() -> Result<Control, UblkError> {
        Control::open_at(Path::new(CONTROL_PATH), true)
    }

    /// Opens the control device at `path`; `modprobe`: try
    /// `modprobe ublk_drv` when it is missing.
    pub(crate) fn open_at(path: &Path, modprobe: bool) -> Result<Control, UblkError> {
        if !path.exists() {
            let mut tried = String::new();
            if modprobe {
                tried = crate::modules::modprobe("ublk_drv")
                    .err()
                    .unwrap_or_default();
                // Loaded: devtmpfs or udev makes the node.
                let deadline = Instant::now() + NODE_WAIT;
                while tried.is_empty() && !path.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            if !path.exists() {
                return Err(missing(path, tried));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => UblkError::NeedsRoot {
                    what: format!("opening {}", path.display()),
                },
                _ => UblkError::Io {
                    what: format!("opening {}", path.display()),
                    source: e,
                },
            })?;
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .build(4)
            .map_err(UblkError::IoUring)?;
        Ok(Control { file, ring })
    }

    /// Sends one command and waits for its answer: the CQE's result, or
    /// the errno as an error naming the command.
    fn command(&mut self, name: &'static str, op: u32, cmd: CtrlCmd) -> Result<i32, UblkError> {
        let sqe = opcode::UringCmd80::new(types::Fd(self.file.as_raw_fd()), op)
            .cmd(cmd.to_sqe_cmd())
            .build()
            .user_data(1);
        self.submit_and_wait(sqe)
            .map_err(|e| UblkError::Io {
                what: format!("sending ublk {name}"),
                source: e,
            })
            .and_then(|res| {
                if res < 0 {
                    Err(UblkError::kernel(name, cmd.dev_id, -res))
                } else {
                    Ok(res)
                }
            })
    }

    /// Pushes `sqe`, waits for the one CQE and returns its result. The
    /// caller keeps whatever `sqe` points at alive across the call.
    fn submit_and_wait(&mut self, sqe: squeue::Entry128) -> io::Result<i32> {
        // SAFETY: the command's buffers (dev info, params, features) are
        // borrowed by the caller for the whole call, and this call does not
        // return before the kernel completed the command (its CQE below),
        // so they outlive the kernel's use.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("the control ring's submission queue is full"))?;
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
            if let Some(cqe) = self.ring.completion().next() {
                return Ok(cqe.result());
            }
        }
    }

    /// Posts a CQE with `user_data` into the ring `target` (MSG_RING), so
    /// that a thread polling that ring's fd wakes up.
    pub(crate) fn wake(&mut self, target: RawFd, user_data: u64) -> io::Result<()> {
        let sqe = opcode::MsgRingData::new(types::Fd(target), 0, user_data, None)
            .build()
            .user_data(2)
            .into();
        let res = self.submit_and_wait(sqe)?;
        if res < 0 {
            return Err(io::Error::from_raw_os_error(-res));
        }
        Ok(())
    }

    fn header(dev_id: u32) -> CtrlCmd {
        CtrlCmd {
            dev_id,
            queue_id: u16::MAX,
            ..CtrlCmd::default()
        }
    }

    /// ADD_DEV: `info` in (dev_id u32::MAX: the kernel picks), the
    /// device as the kernel made it out (its id, the flags it accepted).
    pub(crate) fn add_dev(&mut self, info: &mut DevInfo) -> Result<(), UblkError> {
        let mut cmd = Control::header(info.dev_id);
        cmd.addr = info as *mut DevInfo as u64;
        cmd.len = std::mem::size_of::<DevInfo>() as u16;
        self.command("ADD_DEV", sys::UBLK_U_CMD_ADD_DEV, cmd)
            .map(drop)
    }

    pub(crate) fn get_dev_info(&mut self, dev_id: u32) -> Result<DevInfo, UblkError> {
        let mut info = DevInfo::default();
        let mut cmd = Control::header(dev_id);
        cmd.addr = &mut info as *mut DevInfo as u64;
        cmd.len = std::mem::size_of::<DevInfo>() as u16;
        self.command("GET_DEV_INFO", sys::UBLK_U_CMD_GET_DEV_INFO, cmd)?;
        Ok(info)
    }

    pub(crate) fn set_params(&mut self, dev_id: u32, params: &UblkParams) -> Result<(), UblkError> {
        let mut cmd = Control::header(dev_id);
        cmd.addr = params as *const UblkParams as u64;
        cmd.len = std::mem::size_of::<UblkParams>() as u16;
        self.command("SET_PARAMS", sys::UBLK_U_CMD_SET_PARAMS, cmd)
            .map(drop)
    }

    pub(crate) fn get_params(&mut self, dev_id: u32) -> Result<UblkParams, UblkError> {
        let mut params = UblkParams {
            len: std::mem::size_of::<UblkParams>() as u32,
            ..UblkParams::default()
        };
        let mut cmd = Control::header(dev_id);
        cmd.addr = &mut params as *mut UblkParams as u64;
        cmd.len = std::mem::size_of::<UblkParams>() as u16;
        self.command("GET_PARAMS", sys::UBLK_U_CMD_GET_PARAMS, cmd)?;
        Ok(params)
    }

    /// START_DEV: blocks until the disk is added, partition scan included
    /// (whose reads the queue's thread must serve meanwhile).
    pub(crate) fn start_dev(&mut self, dev_id: u32, pid: i32) -> Result<(), UblkError> {
        let mut cmd = Control::header(dev_id);
        cmd.data[0] = pid as u64;
        self.command("START_DEV", sys::UBLK_U_CMD_START_DEV, cmd)
            .map(drop)
    }

    /// STOP_DEV: removes the disk; blocks until its requests drained.
    pub(crate) fn stop_dev(&mut self, dev_id: u32) -> Result<(), UblkError> {
        self.command(
            "STOP_DEV",
            sys::UBLK_U_CMD_STOP_DEV,
            Control::header(dev_id),
        )
        .map(drop)
    }

    /// DEL_DEV: stops the device if it runs, removes it, and waits until
    /// it is released (its char device closed, its disk no longer open).
    pub(crate) fn del_dev(&mut self, dev_id: u32) -> Result<(), UblkError> {
        self.command("DEL_DEV", sys::UBLK_U_CMD_DEL_DEV, Control::header(dev_id))
            .map(drop)
    }

    /// DEL_DEV without waiting for the release (Linux 6.9+; older kernels
    /// answer EOPNOTSUPP or EINVAL, and then the waiting DEL_DEV is sent).
    pub(crate) fn del_dev_nowait(&mut self, dev_id: u32) -> Result<(), UblkError> {
        match self.command(
            "DEL_DEV_ASYNC",
            sys::UBLK_U_CMD_DEL_DEV_ASYNC,
            Control::header(dev_id),
        ) {
            Err(UblkError::Kernel { errno, .. })
                if errno == libc::EOPNOTSUPP || errno == libc::EINVAL =>
            {
                self.del_dev(dev_id)
            }
            other => other.map(drop),
        }
    }

    pub(crate) fn start_user_recovery(&mut self, dev_id: u32) -> Result<(), UblkError> {
        self.command(
            "START_USER_RECOVERY",
            sys::UBLK_U_CMD_START_USER_RECOVERY,
            Control::header(dev_id),
        )
        .map(drop)
    }

    /// END_USER_RECOVERY: blocks until every tag is fetched again, then
    /// lets the held requests through.
    pub(crate) fn end_user_recovery(&mut self, dev_id: u32, pid: i32) -> Result<(), UblkError> {
        let mut cmd = Control::header(dev_id);
        cmd.data[0] = pid as u64;
        self.command("END_USER_RECOVERY", sys::UBLK_U_CMD_END_USER_RECOVERY, cmd)
            .map(drop)
    }

    /// GET_FEATURES (6.5+): the UBLK_F_* this kernel supports.
    pub(crate) fn get_features(&mut self) -> Result<u64, UblkError> {
        let mut features = 0u64;
        let mut cmd = Control::header(0);
        cmd.addr = &mut features as *mut u64 as u64;
        cmd.len = 8;
        self.command("GET_FEATURES", sys::UBLK_U_CMD_GET_FEATURES, cmd)?;
        Ok(features)
    }
}

/// The error for a missing control node: the module, or only the node.
pub(crate) fn missing(path: &Path, modprobe: String) -> UblkError {
    if Path::new("/sys/class/misc/ublk-control").exists() {
        return UblkError::NodeMissing {
            path: path.to_path_buf(),
        };
    }
    UblkError::ModuleMissing {
        path: path.to_path_buf(),
        release: crate::modules::kernel_release(),
        modprobe: if modprobe.is_empty() {
            String::new()
        } else {
            format!("; {modprobe}")
        },
    }
}

/// Whether a process `pid` exists (as seen from this PID namespace).
pub(crate) fn pid_alive(pid: i32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// A ublk device as GET_DEV_INFO describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UblkInfo {
    pub id: u32,
    /// "live", "quiesced" (its server died; it can be resumed), "dead"
    /// (stopped), "fail-io".
    pub state: &'static str,
    /// The server's pid (-1 or a dead one when it has none).
    pub pid: i32,
    /// Whether that process exists.
    pub pid_alive: bool,
    pub queues: u16,
    pub queue_depth: u16,
    pub max_io_bytes: u32,
    /// The UBLK_F_* flags, and their names.
    pub flags: u64,
    pub flag_names: String,
    /// /dev/ublkbN when the disk exists.
    pub disk: Option<PathBuf>,
}

impl UblkInfo {
    fn new(info: &DevInfo) -> UblkInfo {
        let disk = PathBuf::from(format!("/dev/ublkb{}", info.dev_id));
        let has_disk = Path::new(&format!("/sys/block/ublkb{}", info.dev_id)).exists();
        UblkInfo {
            id: info.dev_id,
            state: sys::state_name(info.state),
            pid: info.ublksrv_pid,
            pid_alive: pid_alive(info.ublksrv_pid),
            queues: info.nr_hw_queues,
            queue_depth: info.queue_depth,
            max_io_bytes: info.max_io_buf_bytes,
            flags: info.flags,
            flag_names: sys::flag_names(info.flags),
            disk: has_disk.then_some(disk),
        }
    }

    /// Its server is gone: it serves nothing and can only be resumed
    /// (quiesced) or deleted.
    pub fn orphaned(&self) -> bool {
        !self.pid_alive
    }
}

/// The ids of the ublk devices that exist: /sys/class/ublk-char/ublkcN,
/// else /dev/ublkcN.
fn device_ids() -> Vec<u32> {
    let mut ids = Vec::new();
    for dir in ["/sys/class/ublk-char", "/dev"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("ublkc"))
                .and_then(|n| n.parse().ok())
            {
                ids.push(id);
            }
        }
        if !ids.is_empty() {
            break;
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The ublk devices that exist, whoever serves them. Empty (not an error)
/// when ublk_drv is not loaded.
pub fn list() -> Result<Vec<UblkInfo>, UblkError> {
    let ids = device_ids();
    if ids.is_empty() && !Path::new(CONTROL_PATH).exists() {
        return Ok(Vec::new());
    }
    let mut ctl = Control::open_at(Path::new(CONTROL_PATH), false)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match ctl.get_dev_info(id) {
            Ok(info) => out.push(UblkInfo::new(&info)),
            // Deleted since the directory was read.
            Err(UblkError::Kernel {
                errno: libc::ENODEV,
                ..
            }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// One device's description.
pub fn info(dev_id: u32) -> Result<UblkInfo, UblkError> {
    let mut ctl = Control::open_at(Path::new(CONTROL_PATH), false)?;
    Ok(UblkInfo::new(&ctl.get_dev_info(dev_id)?))
}

/// Deletes device `dev_id` whose server is gone (dead, or quiesced with no
/// live server process); refuses one that a live process serves.
pub fn delete_dead(dev_id: u32) -> Result<(), UblkError> {
    let mut ctl = Control::open_at(Path::new(CONTROL_PATH), false)?;
    let info = ctl.get_dev_info(dev_id)?;
    if pid_alive(info.ublksrv_pid) && info.state != sys::UBLK_S_DEV_DEAD {
        return Err(UblkError::InUse {
            dev_id,
            state: sys::state_name(info.state),
            pid: info.ublksrv_pid,
        });
    }
    ctl.del_dev_nowait(dev_id)
}

/// The UBLK_F_* features this kernel's ublk_drv supports (GET_FEATURES,
/// Linux 6.5+).
pub fn features() -> Result<u64, UblkError> {
    Control::open()?.get_features()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_control_node_names_the_module_the_kernel_and_nbd() {
        let path = Path::new("/nonexistent/ublk-control");
        let Err(err) = Control::open_at(path, false) else {
            panic!("a nonexistent control node opened");
        };
        let msg = err.to_string();
        if Path::new("/sys/class/misc/ublk-control").exists() {
            // This machine has ublk_drv loaded: the node alone is missing.
            assert!(matches!(err, UblkError::NodeMissing { .. }), "{msg}");
            return;
        }
        assert!(matches!(err, UblkError::ModuleMissing { .. }), "{msg}");
        assert!(msg.contains("/nonexistent/ublk-control"), "{msg}");
        assert!(msg.contains("ublk_drv"), "{msg}");
        assert!(msg.contains("Linux 6.0"), "{msg}");
        assert!(msg.contains("CONFIG_BLK_DEV_UBLK"), "{msg}");
        assert!(msg.contains(&crate::modules::kernel_release()), "{msg}");
        assert!(msg.contains("--nbd"), "{msg}");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_missing_module_message_reads_whole() {
        let err = UblkError::ModuleMissing {
            path: PathBuf::from("/dev/ublk-control"),
            release: "6.1.0-18-amd64".into(),
            modprobe: "; `modprobe ublk_drv` failed: modprobe: FATAL: Module ublk_drv not found"
                .into(),
        };
        assert_eq!(
            err.to_string(),
            "ublk is not available: /dev/ublk-control is missing. It needs the kernel module \
             ublk_drv, from Linux 6.0 or later built with CONFIG_BLK_DEV_UBLK (this kernel is \
             6.1.0-18-amd64); `modprobe ublk_drv` failed: modprobe: FATAL: Module ublk_drv not \
             found. Load the module, or use --nbd"
        );
    }

    #[test]
    fn pids() {
        assert!(pid_alive(std::process::id() as i32));
        assert!(!pid_alive(-1));
        assert!(!pid_alive(0));
    }
}
