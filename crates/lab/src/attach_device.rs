//! isoe's own initiator as a Linux block device on a test bed's initiator
//! host, as the lab drives it (`initiator = "isoe-ublk"` or `"isoe-nbd"`):
//! `isoe attach URL --ublk|--nbd --name NAME --queue-depth N [session
//! options]` started in the background there, the device's path
//! (`/dev/ublkb0`, `/dev/nbd0`) read from the one line it prints on stdout
//! once the device exists, fio with libaio and O_DIRECT on that device as
//! on the kernel initiator's, and at the end of the case SIGTERM, on which
//! it flushes, removes the device and exits 0: the lifecycle of
//! [`crate::peers::kernel::KernelSession`]'s login and logout.
//!
//! `isoe attach` exits 2 when it cannot run on the host (no ublk or NBD
//! driver, not root) or is called wrongly, saying why on stderr, and 1
//! when the login or the target failed. Whether the host can is checked before a case
//! ([`AttachKind::driver_check`]: the driver's device node, or its module
//! loaded), so that a host without the driver skips the case with the
//! reason instead of failing its runs.

use crate::host::{self, Ending, Host, Running};
use crate::ssh::HostError;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long `isoe attach` may take to print its device: a login and a
/// device made on a VM under emulation (TCG) take seconds.
pub const ATTACH_START: Duration = Duration::from_secs(60);
/// How long it may take, after SIGTERM, to flush, remove its device and
/// exit; past it, SIGKILL.
pub const DETACH_GRACE: Duration = Duration::from_secs(60);
/// How long the lab waits for its exit status once its stdout has closed.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// The kernel interface `isoe attach` makes the device through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachKind {
    /// ublk (`ublk_drv`): `/dev/ublkbN`.
    Ublk,
    /// NBD (`nbd`): `/dev/nbdN`.
    Nbd,
}

impl AttachKind {
    /// Both, in the order plans list their initiators.
    pub const ALL: [AttachKind; 2] = [AttachKind::Ublk, AttachKind::Nbd];

    /// `isoe attach`'s option for it.
    pub fn flag(self) -> &'static str {
        match self {
            AttachKind::Ublk => "--ublk",
            AttachKind::Nbd => "--nbd",
        }
    }

    /// The kernel module that provides it.
    pub fn module(self) -> &'static str {
        match self {
            AttachKind::Ublk => "ublk_drv",
            AttachKind::Nbd => "nbd",
        }
    }

    /// The device node that is there once the module is loaded.
    pub fn node(self) -> &'static str {
        match self {
            AttachKind::Ublk => "/dev/ublk-control",
            AttachKind::Nbd => "/dev/nbd0",
        }
    }

    /// What a kernel needs for it.
    pub fn requirement(self) -> &'static str {
        match self {
            AttachKind::Ublk => "Linux 6.0+ with CONFIG_BLK_DEV_UBLK",
            AttachKind::Nbd => "a kernel with CONFIG_BLK_DEV_NBD",
        }
    }

    /// The initiator as a result names it (`bench.initiator`).
    pub fn label(self) -> &'static str {
        match self {
            AttachKind::Ublk => "isoe attach --ublk (isoe's initiator; fio libaio O_DIRECT)",
            AttachKind::Nbd => "isoe attach --nbd (isoe's initiator; fio libaio O_DIRECT)",
        }
    }

    /// The command that succeeds on a host where the driver is there:
    /// its device node, or else its module loaded by modprobe (which
    /// needs root, as `isoe attach` does).
    pub fn driver_check(self) -> Vec<String> {
        [
            "sh",
            "-c",
            "test -e \"$1\" || modprobe \"$2\"",
            "sh",
            self.node(),
            self.module(),
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

/// One `isoe attach` to start: the LU, the front-end, and the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    /// `isoe` on the host.
    pub isoe: String,
    /// `iscsi://PORTAL/IQN/LUN`.
    pub url: String,
    /// ublk or NBD.
    pub kind: AttachKind,
    /// The device's name (`isoe detach NAME`, `isoe attach --list`).
    pub name: String,
    /// Requests in flight the device takes, deep enough for the workload.
    pub queue_depth: u32,
    /// Session options ([`crate::knobs::KnobSet::attach_args`]).
    pub options: Vec<String>,
}

impl Attach {
    /// The command line: `ISOE attach URL --ublk|--nbd --name NAME
    /// --queue-depth N OPTIONS...`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![
            self.isoe.clone(),
            "attach".to_owned(),
            self.url.clone(),
            self.kind.flag().to_owned(),
            "--name".to_owned(),
            self.name.clone(),
            "--queue-depth".to_owned(),
            self.queue_depth.to_string(),
        ];
        argv.extend(self.options.iter().cloned());
        argv
    }
}

/// The device path in a line `isoe attach` printed, if the line is one.
fn device_in(line: &str) -> Option<&str> {
    let line = line.trim();
    (line.len() > "/dev/".len() && line.starts_with("/dev/") && !line.contains(char::is_whitespace))
        .then_some(line)
}

/// What an exit of `isoe attach` before it printed a device means.
fn exit_meaning(status: ExitStatus) -> String {
    match status.code() {
        Some(2) => "refused to run (exit status 2: the host lacks the driver or root, or the \
                    command line is wrong)"
            .to_owned(),
        Some(1) => "could not log in, or the target failed (exit status 1)".to_owned(),
        Some(255) => "ended with status 255 (ssh's own: the host may be gone)".to_owned(),
        _ => format!("ended ({status}) before printing a device"),
    }
}

/// Why `isoe attach` made no device.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// Its stderr's log file could not be made.
    #[error("{}: {source}", log.display())]
    Log {
        /// The file.
        log: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It could not be started.
    #[error("{what}: {source}")]
    Spawn {
        /// `isoe attach FLAG URL on HOST`.
        what: String,
        /// Why.
        source: HostError,
    },
    /// It printed no device: how it went, and what it said.
    #[error("{what} {failure}: {said}")]
    NoDevice {
        /// `isoe attach FLAG URL on HOST`.
        what: String,
        /// How it went (timed out, or its exit in words).
        failure: String,
        /// The last of its stderr, and its stdout.
        said: String,
    },
}

/// Why `isoe attach` did not end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum DetachError {
    /// Its host could not be told.
    #[error("detaching {device}: {source}")]
    Ending {
        /// The device.
        device: String,
        /// Why.
        source: HostError,
    },
    /// It exited with an error.
    #[error("{what} ended with {status}: {said}")]
    Exited {
        /// `isoe attach of DEVICE (URL) on HOST`.
        what: String,
        /// How it ended.
        status: ExitStatus,
        /// The last of its stderr.
        said: String,
    },
    /// It had to be killed.
    #[error(
        "{what} did not exit within {} s of SIGTERM and was killed; the device may be \
         left there (isoe detach {name}): {said}",
        DETACH_GRACE.as_secs()
    )]
    Killed {
        /// `isoe attach of DEVICE (URL) on HOST`.
        what: String,
        /// The name it was attached with.
        name: String,
        /// The last of its stderr.
        said: String,
    },
}

/// A block device `isoe attach` serves on a host, for fio; ended by
/// [`AttachedDevice::detach`] (or, failing that, when dropped).
pub struct AttachedDevice<'h> {
    host: &'h Host,
    /// The `isoe attach` process; None once ended.
    running: Option<Running>,
    /// Its stdout, held open: were it closed, its next line would end it
    /// with SIGPIPE.
    _stdout: Receiver<String>,
    stderr_log: PathBuf,
    url: String,
    /// The block device (`/dev/ublkb0`, `/dev/nbd0`).
    pub device: String,
    /// The name it was attached with.
    pub name: String,
}

impl std::fmt::Debug for AttachedDevice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedDevice")
            .field("host", &self.host.name())
            .field("url", &self.url)
            .field("device", &self.device)
            .field("name", &self.name)
            .finish()
    }
}

/// The last lines of a log file, which is then removed.
fn take_log(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let _ = std::fs::remove_file(path);
    crate::ssh::tail(&bytes)
}

impl<'h> AttachedDevice<'h> {
    /// Starts `attach` on `host`, its stderr in `stderr_log` (on this
    /// machine), and waits up to `timeout` for the device it prints. On
    /// failure it is ended, and the error says how it went and what it
    /// said.
    pub fn attach(
        host: &'h Host,
        attach: &Attach,
        stderr_log: &Path,
        timeout: Duration,
    ) -> Result<AttachedDevice<'h>, AttachError> {
        let what = format!(
            "isoe attach {} {} on {}",
            attach.kind.flag(),
            attach.url,
            host.name()
        );
        let stderr = File::create(stderr_log).map_err(|source| AttachError::Log {
            log: stderr_log.to_path_buf(),
            source,
        })?;
        let mut running = match host.spawn(&attach.argv(), Stdio::from(stderr)) {
            Ok(running) => running,
            Err(source) => return Err(AttachError::Spawn { what, source }),
        };
        let lines = host::lines(running.take_stdout().expect("stdout is piped"));
        let deadline = Instant::now() + timeout;
        let mut printed: Vec<String> = Vec::new();
        let failure = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(device) = device_in(&line) {
                        return Ok(AttachedDevice {
                            host,
                            running: Some(running),
                            _stdout: lines,
                            stderr_log: stderr_log.to_path_buf(),
                            url: attach.url.clone(),
                            device: device.to_owned(),
                            name: attach.name.clone(),
                        });
                    }
                    printed.push(line);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = running.end(DETACH_GRACE);
                    break format!("printed no device within {} s", timeout.as_secs_f64());
                }
                Err(RecvTimeoutError::Disconnected) => break ended(running),
            }
        };
        let mut said = take_log(stderr_log);
        if !printed.is_empty() {
            said = format!("{said}\n(stdout: {})", printed.join(" | "))
                .trim()
                .to_owned();
        }
        Err(AttachError::NoDevice {
            what,
            failure,
            said,
        })
    }

    /// The `isoe attach` process's PID on its host, while it runs: the
    /// initiator's own process, whose CPU a run samples beside the host's.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(Running::pid)
    }

    /// Ends `isoe attach` with SIGTERM and waits up to [`DETACH_GRACE`]
    /// for it to flush, remove the device and exit 0; an error when it
    /// exits otherwise, needs SIGKILL, or the host cannot be told.
    pub fn detach(mut self) -> Result<(), DetachError> {
        let running = self.running.take().expect("attached until detached");
        let ending = running.end(DETACH_GRACE);
        let said = take_log(&self.stderr_log);
        let what = format!(
            "isoe attach of {} ({}) on {}",
            self.device,
            self.url,
            self.host.name()
        );
        let ending = ending.map_err(|source| DetachError::Ending {
            device: self.device.clone(),
            source,
        })?;
        match ending {
            Ending::Exited(status) if status.success() => Ok(()),
            Ending::Exited(status) => Err(DetachError::Exited { what, status, said }),
            Ending::Killed => Err(DetachError::Killed {
                what,
                name: self.name.clone(),
                said,
            }),
        }
    }
}

impl Drop for AttachedDevice<'_> {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.end(DETACH_GRACE);
            let _ = std::fs::remove_file(&self.stderr_log);
        }
    }
}

/// Why `isoe attach` closed its stdout without printing a device: its
/// exit, once it comes.
fn ended(mut running: Running) -> String {
    let deadline = Instant::now() + EXIT_WAIT;
    while Instant::now() < deadline {
        match running.try_wait() {
            Ok(Some(status)) => return exit_meaning(status),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return format!("could not be waited for: {e}"),
        }
    }
    match running.end(DETACH_GRACE) {
        Ok(Ending::Exited(status)) => exit_meaning(status),
        _ => "closed its stdout without printing a device, and was ended".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_command_line_is_url_front_end_name_depth_then_session_options() {
        let attach = Attach {
            isoe: "/tmp/isoe-lab.x/isoe".into(),
            url: "iscsi://10.0.2.2:3260/iqn.2026-11.io.isoe:lab/0".into(),
            kind: AttachKind::Ublk,
            name: "isoe-lab-7-0".into(),
            queue_depth: 128,
            options: s(&["--header-digest", "--connections", "2"]),
        };
        assert_eq!(
            attach.argv(),
            s(&[
                "/tmp/isoe-lab.x/isoe",
                "attach",
                "iscsi://10.0.2.2:3260/iqn.2026-11.io.isoe:lab/0",
                "--ublk",
                "--name",
                "isoe-lab-7-0",
                "--queue-depth",
                "128",
                "--header-digest",
                "--connections",
                "2",
            ])
        );
        let nbd = Attach {
            kind: AttachKind::Nbd,
            options: Vec::new(),
            ..attach
        };
        assert_eq!(nbd.argv()[3], "--nbd");
        assert_eq!(nbd.argv().len(), 8);
    }

    #[test]
    fn each_front_end_names_its_driver_and_initiator() {
        assert_eq!(
            AttachKind::Ublk.driver_check(),
            s(&[
                "sh",
                "-c",
                "test -e \"$1\" || modprobe \"$2\"",
                "sh",
                "/dev/ublk-control",
                "ublk_drv"
            ])
        );
        assert_eq!(
            AttachKind::Nbd.driver_check()[4..],
            s(&["/dev/nbd0", "nbd"])
        );
        for kind in AttachKind::ALL {
            let initiator = crate::knobs::InitiatorImpl::of_attach(kind);
            assert_eq!(initiator.attach_kind(), Some(kind));
            assert!(initiator.makes_block_device());
            assert!(kind.label().contains(kind.flag()), "{}", kind.label());
        }
    }

    #[test]
    fn only_a_device_path_is_a_device() {
        assert_eq!(device_in("/dev/ublkb0\n"), Some("/dev/ublkb0"));
        assert_eq!(device_in("  /dev/nbd3 "), Some("/dev/nbd3"));
        assert_eq!(device_in("/dev/"), None);
        assert_eq!(device_in("logged in to /dev/sda"), None);
        assert_eq!(device_in("/dev/ublkb0 ready"), None);
        assert_eq!(device_in(""), None);
    }

    /// A stand-in for `isoe` on this machine: records its arguments,
    /// then runs `body` (a shell script).
    fn fake_isoe(dir: &Path, body: &str) -> String {
        let path = dir.join("isoe");
        let args = dir.join("args");
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n{body}\n",
            args.display()
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn request(isoe: String) -> Attach {
        Attach {
            isoe,
            url: "iscsi://127.0.0.1:3260/iqn.2026-11.io.isoe:lab/0".into(),
            kind: AttachKind::Nbd,
            name: "isoe-lab-1-0".into(),
            queue_depth: 128,
            options: s(&["--data-digest"]),
        }
    }

    #[test]
    fn a_device_is_read_from_stdout_and_detached_by_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        // Says something first, then the device; on SIGTERM, exits 0.
        let isoe = fake_isoe(
            dir.path(),
            "trap 'echo flushed >&2; exit 0' TERM\necho 'attaching'\necho /dev/nbd7\n\
             while :; do sleep 0.05; done",
        );
        let host = Host::Local;
        let log = dir.path().join("attach.log");
        let device =
            AttachedDevice::attach(&host, &request(isoe), &log, Duration::from_secs(20)).unwrap();
        assert_eq!(device.device, "/dev/nbd7");
        assert_eq!(device.name, "isoe-lab-1-0");
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert_eq!(
            args.lines().collect::<Vec<_>>(),
            [
                "attach",
                "iscsi://127.0.0.1:3260/iqn.2026-11.io.isoe:lab/0",
                "--nbd",
                "--name",
                "isoe-lab-1-0",
                "--queue-depth",
                "128",
                "--data-digest"
            ]
        );
        device.detach().unwrap();
        assert!(!log.exists(), "its log goes with it");
    }

    #[test]
    fn a_refusal_says_what_the_exit_status_means_and_what_attach_said() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::Local;
        let log = dir.path().join("attach.log");
        let isoe = fake_isoe(dir.path(), "echo 'nbd: module not found' >&2\nexit 2");
        let e = AttachedDevice::attach(&host, &request(isoe), &log, Duration::from_secs(20))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("isoe attach --nbd iscsi://127.0.0.1:3260/")
                && e.contains("refused to run (exit status 2: the host lacks the driver")
                && e.contains("nbd: module not found"),
            "{e}"
        );
        let isoe = fake_isoe(dir.path(), "echo 'login refused' >&2\nexit 1");
        let e = AttachedDevice::attach(&host, &request(isoe), &log, Duration::from_secs(20))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("could not log in") && e.contains("login refused"),
            "{e}"
        );
    }

    #[test]
    fn no_device_in_time_ends_it_and_a_bad_exit_on_sigterm_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::Local;
        let log = dir.path().join("attach.log");
        let isoe = fake_isoe(dir.path(), "echo 'logging in' >&2\nexec sleep 30");
        let t = Instant::now();
        let e = AttachedDevice::attach(&host, &request(isoe), &log, Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(t.elapsed() < Duration::from_secs(10), "SIGTERM ended it");
        assert!(
            e.contains("printed no device within 0.3 s") && e.contains("logging in"),
            "{e}"
        );
        let isoe = fake_isoe(
            dir.path(),
            "trap 'echo cannot flush >&2; exit 3' TERM\necho /dev/ublkb2\nwhile :; do sleep 0.05; done",
        );
        let device =
            AttachedDevice::attach(&host, &request(isoe), &log, Duration::from_secs(20)).unwrap();
        let e = device.detach().unwrap_err().to_string();
        assert!(
            e.contains("/dev/ublkb2") && e.contains("3") && e.contains("cannot flush"),
            "{e}"
        );
    }
}
