//! Whether this kernel can give us a block device: the ublk and NBD
//! drivers, loaded on demand, and root. What is missing is said in words an
//! administrator can act on: the module, the kernel option, this kernel's
//! release, and the other front-end.

use std::path::Path;
use std::process::{Command, Stdio};

/// The kernel interface a device is made through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Ublk,
    Nbd,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ublk => "ublk",
            Kind::Nbd => "nbd",
        }
    }

    /// The module that provides it.
    pub fn module(self) -> &'static str {
        match self {
            Kind::Ublk => "ublk_drv",
            Kind::Nbd => "nbd",
        }
    }

    /// The device node that shows the module is loaded.
    fn node(self) -> &'static str {
        match self {
            Kind::Ublk => "/dev/ublk-control",
            Kind::Nbd => "/dev/nbd0",
        }
    }

    /// What a kernel needs for it.
    fn requirement(self) -> &'static str {
        match self {
            Kind::Ublk => {
                "ublk needs Linux 6.0 or later built with CONFIG_BLK_DEV_UBLK (Debian 12's own \
                 kernels lack it; bookworm-backports' linux-image-amd64, 6.12, has it)"
            }
            Kind::Nbd => "NBD needs a kernel built with CONFIG_BLK_DEV_NBD",
        }
    }
}

/// This kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs `program module` (`modprobe`, or a stand-in in tests). Err: what
/// went wrong, as a clause for a longer message.
pub fn modprobe_with(program: &Path, module: &str) -> Result<(), String> {
    let shown = format!("`{} {module}`", program.display());
    match Command::new(program)
        .arg(module)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr);
            match text.lines().next().map(str::trim).filter(|l| !l.is_empty()) {
                Some(line) => Err(format!("{shown} failed: {line}")),
                None => Err(format!("{shown} failed ({})", out.status)),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{} is not installed", program.display()))
        }
        Err(e) => Err(format!("{shown} could not run: {e}")),
    }
}

/// `modprobe module`, as [`modprobe_with`].
pub fn modprobe(module: &str) -> Result<(), String> {
    modprobe_with(Path::new("modprobe"), module)
}

/// Makes sure `kind`'s driver is there, loading its module once if its
/// device node is missing. Err: why not, in full.
pub fn ensure(kind: Kind) -> Result<(), String> {
    if Path::new(kind.node()).exists() {
        return Ok(());
    }
    let why = match modprobe(kind.module()) {
        Ok(()) => {
            // udev (or devtmpfs) makes the node right after the module loads.
            for _ in 0..50 {
                if Path::new(kind.node()).exists() {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            format!(
                "`modprobe {}` succeeded but {} did not appear",
                kind.module(),
                kind.node()
            )
        }
        Err(why) => why,
    };
    Err(format!(
        "{} is missing and the kernel module {} could not be loaded ({why}); {}; this kernel is {}",
        kind.node(),
        kind.module(),
        kind.requirement(),
        kernel_release()
    ))
}

/// Err when this process is not root: ublk and NBD devices are made through
/// /dev/ublk-control and /dev/nbdN, which only root may use.
pub fn ensure_root() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(
            "isoe attach needs root: block devices are made through /dev/ublk-control \
             (ublk) and /dev/nbdN (NBD), which only root may open"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_named_with_what_it_needs() {
        // Only meaningful where the driver is absent (this project's build
        // machines have neither ublk nor nbd); elsewhere it loads.
        for kind in [Kind::Ublk, Kind::Nbd] {
            if let Err(text) = ensure(kind) {
                assert!(text.contains(kind.module()), "{text}");
                assert!(text.contains(&kernel_release()), "{text}");
                assert!(text.contains(kind.node()), "{text}");
            }
        }
    }
}
