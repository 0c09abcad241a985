//! Where the kernel has no ublk, creating a device fails with an error
//! that says what is missing, and nothing panics.

use std::path::Path;

use isoe_attach::ublk::{self, Options, UblkDevice, UblkError};
use isoe_attach::Geometry;

/// Whether this kernel could have ublk at all (loaded, or a module that
/// modprobe would find): then this test has nothing to show.
fn ublk_possible() -> bool {
    if Path::new(ublk::CONTROL_PATH).exists() || Path::new("/sys/module/ublk_drv").exists() {
        return true;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let dir = format!("/lib/modules/{}", release.trim());
    ["modules.dep", "modules.builtin"].iter().any(|f| {
        std::fs::read_to_string(Path::new(&dir).join(f)).is_ok_and(|s| s.contains("ublk_drv"))
    })
}

#[test]
fn create_without_ublk_says_what_is_missing() {
    if ublk_possible() {
        eprintln!("skipped: this kernel has ublk_drv (or can load it)");
        return;
    }
    let geometry = Geometry {
        block_bytes: 512,
        physical_block_bytes: 512,
        capacity_bytes: 1 << 30,
        max_io_bytes: 1 << 20,
        optimal_io_bytes: 0,
        discard: false,
        discard_granularity_bytes: 0,
        discard_alignment_bytes: 0,
        max_discard_bytes: 0,
        max_write_zeroes_bytes: 0,
        read_only: false,
        volatile_cache: false,
        fua: false,
    };
    let err = match UblkDevice::create(&geometry, Options::default()) {
        Ok(_) => panic!("a ublk device was made on a kernel without ublk_drv"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(matches!(err, UblkError::ModuleMissing { .. }), "{msg}");
    for part in ["ublk_drv", "Linux 6.0", "CONFIG_BLK_DEV_UBLK", "--nbd"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    // Listing finds nothing, and is no error.
    assert!(ublk::list().unwrap().is_empty());
}
