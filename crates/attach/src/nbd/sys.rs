//! Where the host keeps its nbd devices: /sys/block/nbdN, /dev/nbdN, the
//! module. Paths are parameters so that tests can stand up a fake host.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The host's nbd side.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    pub sys_block: PathBuf,
    /// /sys/module/nbd: there once the driver is loaded (or built in).
    pub sys_module: PathBuf,
    pub dev: PathBuf,
    /// The program to load modules with; None: don't try.
    pub modprobe: Option<PathBuf>,
}

impl Host {
    pub(crate) fn real() -> Host {
        Host {
            sys_block: "/sys/block".into(),
            sys_module: "/sys/module/nbd".into(),
            dev: "/dev".into(),
            modprobe: Some("modprobe".into()),
        }
    }

    pub(crate) fn sys(&self, index: u32) -> PathBuf {
        self.sys_block.join(format!("nbd{index}"))
    }

    pub(crate) fn dev_path(&self, index: u32) -> PathBuf {
        self.dev.join(format!("nbd{index}"))
    }

    /// The nbd devices that exist, in index order.
    pub(crate) fn indexes(&self) -> io::Result<Vec<u32>> {
        let mut out = Vec::new();
        let dir = match fs::read_dir(&self.sys_block) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", self.sys_block.display()),
                ))
            }
        };
        for entry in dir {
            let name = entry?.file_name();
            if let Some(index) = name
                .to_str()
                .and_then(|n| n.strip_prefix("nbd"))
                .and_then(|n| n.parse::<u32>().ok())
            {
                out.push(index);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Whether a server holds the device: the driver makes `pid` while it
    /// is configured (from NBD_DO_IT, or netlink's connect, until the last
    /// reference to its configuration goes).
    pub(crate) fn in_use(&self, index: u32) -> bool {
        self.sys(index).join("pid").exists()
    }

    /// The thread serving the device (the one in NBD_DO_IT), as `pid` says.
    pub(crate) fn server_tid(&self, index: u32) -> Option<i32> {
        read_trimmed(&self.sys(index).join("pid")).and_then(|s| s.parse().ok())
    }

    /// The device's size in 512-byte sectors, as the block layer has it.
    pub(crate) fn sectors(&self, index: u32) -> Option<u64> {
        read_trimmed(&self.sys(index).join("size")).and_then(|s| s.parse().ok())
    }

    pub(crate) fn queue_attr(&self, index: u32, name: &str) -> Option<String> {
        read_trimmed(&self.sys(index).join("queue").join(name))
    }

    pub(crate) fn set_queue_attr(&self, index: u32, name: &str, value: &str) -> io::Result<()> {
        fs::write(self.sys(index).join("queue").join(name), value)
    }

    /// Makes sure there are nbd devices, loading the module once if there
    /// are none. The error says what is missing: the module (and the
    /// kernel option behind it), on which kernel, and that it takes root.
    pub(crate) fn ensure_devices(&self) -> io::Result<Vec<u32>> {
        let found = self.indexes()?;
        if !found.is_empty() {
            return Ok(found);
        }
        let mut tried = String::new();
        if !self.sys_module.exists() {
            if let Some(modprobe) = &self.modprobe {
                match crate::modules::modprobe_with(modprobe, "nbd") {
                    Ok(()) => {
                        let found = self.indexes()?;
                        if !found.is_empty() {
                            return Ok(found);
                        }
                        tried = "; `modprobe nbd` succeeded but no /sys/block/nbd* appeared".into();
                    }
                    Err(why) => tried = format!("; {why}"),
                }
            }
        }
        let release = crate::modules::kernel_release();
        if self.sys_module.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the nbd driver is loaded on kernel {release} but has no devices (/sys/block/nbd*): \
                     it was loaded with nbds_max=0; reload it with `modprobe -r nbd && modprobe nbd nbds_max=16` (as root)"
                ),
            ));
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no nbd devices: the kernel module nbd (CONFIG_BLK_DEV_NBD) is not loaded on this kernel ({release}){tried}; \
                 attaching through NBD needs that module, and root to load it and to configure its devices"
            ),
        ))
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// The process a thread belongs to (its Tgid), and that process's name.
pub(crate) fn owner_of(tid: i32) -> Option<(i32, String)> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()?;
    let comm = read_trimmed(Path::new(&format!("/proc/{tgid}/comm"))).unwrap_or_default();
    Some((tgid, comm))
}
