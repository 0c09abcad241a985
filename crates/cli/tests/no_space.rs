//! A file LUN on a file system that fills up: the initiator
//! sees DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (07/27/07), as
//! SBC-4 asks of a thin-provisioned unit that cannot allocate; the target
//! says so in its log, naming the LUN and the operating system's error; and
//! the unit keeps serving reads, and writes once space is freed.
//!
//! The file system is a 1 MiB tmpfs mounted for the test, under a 16 MiB
//! sparse backing file. Mounting needs root (CAP_SYS_ADMIN); elsewhere the
//! test says why it was skipped and passes.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use support::client::{read16, write16};
use support::{Client, Target, TargetConfig, DEFAULT_TARGET};

/// The size of the tmpfs; writes beyond it find no space.
const FILE_SYSTEM_BYTES: u64 = 1 << 20;
/// Bytes per WRITE(16).
const WRITE_BYTES: usize = 64 * 1024;
const BLOCK_BYTES: usize = 512;

/// A tmpfs mounted on a temporary directory, unmounted on Drop.
struct Tmpfs {
    mount_point: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes`, or says why it cannot be done here.
    fn mount(bytes: u64) -> Result<Tmpfs, String> {
        let dir = tempfile::Builder::new()
            .prefix("isoe-no-space-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mount_point = dir.path().join("fs");
        std::fs::create_dir(&mount_point).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "isoe-test"])
            .arg(&mount_point)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            mount_point,
            _dir: dir,
        })
    }

    fn path(&self) -> &Path {
        &self.mount_point
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.mount_point)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a target that did not exit): detach it anyway.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mount_point)
                .status();
        }
    }
}

/// (key, ASC, ASCQ) of fixed-format sense data.
fn sense_codes(sense: &[u8]) -> Option<(u8, u8, u8)> {
    (sense.len() >= 14 && sense[0] & 0x7f == 0x70).then(|| (sense[2] & 0x0f, sense[12], sense[13]))
}

/// UNMAP (SBC-4 5.32) of one range.
fn unmap(client: &mut Client, lba: u64, blocks: u32) {
    let mut parameters = vec![0, 22, 0, 16, 0, 0, 0, 0];
    parameters.extend_from_slice(&lba.to_be_bytes());
    parameters.extend_from_slice(&blocks.to_be_bytes());
    parameters.extend_from_slice(&[0; 4]);
    let cdb = [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    client
        .command(0, &cdb, &parameters, 0)
        .expect("UNMAP")
        .assert_good("UNMAP");
}

/// Waits until the target's output contains `needle`.
fn wait_for_output(target: &Target, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let output = target.output();
        if output.contains(needle) || Instant::now() > deadline {
            return output;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_full_file_system_is_space_allocation_failed_and_logged() {
    let fs = match Tmpfs::mount(FILE_SYSTEM_BYTES) {
        Ok(fs) => fs,
        Err(why) => {
            // Straight to fd 2: the test harness captures eprintln! of passing tests.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED a_full_file_system_is_space_allocation_failed_and_logged: {why}"
            );
            return;
        }
    };
    let lun_file = fs.path().join("lun0.img");
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nfile = \"{}\"\nsize = \"16MiB\"\n",
        lun_file.display()
    ));
    let mut target = Target::with_config(&config);
    let mut client = Client::login_normal(target.addr(), DEFAULT_TARGET);
    client.ready(0);

    // Fill the file system: 16 MiB of LUN over 1 MiB of tmpfs.
    let data = vec![0x5au8; WRITE_BYTES];
    let blocks = (WRITE_BYTES / BLOCK_BYTES) as u32;
    let mut lba = 0u64;
    let refused = loop {
        assert!(
            lba * (BLOCK_BYTES as u64) < 2 * FILE_SYSTEM_BYTES,
            "writes went on past the file system's size"
        );
        let result = client
            .command(0, &write16(lba, blocks), &data, 0)
            .expect("WRITE(16) is answered");
        if result.status != 0 {
            break result;
        }
        lba += u64::from(blocks);
    };
    assert!(lba > 0, "the first writes fit");
    assert_eq!(refused.status, 0x02, "CHECK CONDITION");
    assert_eq!(
        sense_codes(&refused.sense),
        Some((0x07, 0x27, 0x07)),
        "DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT; sense {:02x?}",
        refused.sense
    );

    let needle = "SPACE ALLOCATION FAILED WRITE PROTECT (07/27/07)";
    let output = wait_for_output(&target, needle);
    let line = output
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("the target logged no line with {needle:?}:\n{output}"));
    assert!(
        line.contains(&format!(
            " ERROR isoe_scsi::media: LUN 0 of {DEFAULT_TARGET} (serial "
        )),
        "{line}"
    );
    assert!(line.contains("No space left on device"), "{line}");

    // The unit still reads what it wrote, and writes again once space is freed.
    let back = client
        .command(0, &read16(0, blocks), &[], WRITE_BYTES as u32)
        .expect("READ(16)");
    back.assert_good("READ(16) after the file system filled up");
    assert_eq!(back.data, data);
    unmap(&mut client, 0, (lba as u32).max(blocks));
    client
        .command(0, &write16(lba, blocks), &data, 0)
        .expect("WRITE(16)")
        .assert_good("WRITE(16) after UNMAP freed space");

    client.logout().expect("logout");
    target.stop_cleanly();
    drop(fs);
}
