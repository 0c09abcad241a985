//! `isoe attach` in the test bed's VM, on its older kernel (Debian 12 on
//! bookworm-backports' 6.12, which has ublk_drv and nbd but no ublk zero
//! copy, so that this path stays tested while the other VM suites run on
//! 6.18) against `isoe target` on this host: for ublk and for NBD, a file system made, mounted, written with
//! verified fio jobs and fsync-heavy writes, trimmed, checked clean; then
//! the target killed and restarted under a verifying fio, and `isoe attach`
//! itself killed mid-write. One VM serves every part (booting it under TCG
//! takes most of a minute).
//!
//! The VM reaches this host's loopback as 10.0.2.2 (QEMU's user network).

mod support;

use std::time::Duration;
use support::attach::{attach, detach, free_port, ok, stripped_isoe, wait_for_exit};
use support::ceph::Ceph;
use support::vm::Vm;
use support::{Target, TargetConfig, DEFAULT_TARGET};

/// mkfs, mount, verified random writes at 4 and 64 KiB (QD 32),
/// fsync-heavy writes, fstrim, unmount, fsck; then blkdiscard -z.
fn file_system_workout(vm: &Vm, dev: &str) -> String {
    let fio = |name: &str, extra: &str| {
        format!(
            "fio --name={name} --directory=/mnt/t --size=24m --ioengine=libaio --direct=1 \
             --iodepth=32 --verify=crc32c --do_verify=1 --verify_fatal=1 --output-format=terse {extra}"
        )
    };
    let script = [
        format!("mkfs.ext4 -q -F {dev}"),
        "mkdir -p /mnt/t".into(),
        format!("mount {dev} /mnt/t"),
        fio("rw4k", "--rw=randwrite --bs=4k"),
        fio("rw64k", "--rw=randwrite --bs=64k"),
        "fio --name=fsync --directory=/mnt/t --size=2m --rw=write --bs=4k --fsync=1 \
         --ioengine=sync --output-format=terse"
            .into(),
        "rm -f /mnt/t/rw4k* /mnt/t/rw64k*".into(),
        "fstrim -v /mnt/t".into(),
        "umount /mnt/t".into(),
        format!("e2fsck -fn {dev}"),
        format!("blkdiscard -z {dev}"),
        format!("head -c 1048576 {dev} | tr -d '\\0' | wc -c"),
    ]
    .join(" && ");
    ok(vm, &format!("set -e; {script}"))
}

#[test]
fn attach_serves_file_systems_through_ublk_and_nbd_and_survives_a_target_restart() {
    let Some(vm) = Vm::start_on_kernel_or_skip("vm_attach", Some("6.12")) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    vm.copy_in(&stripped_isoe(tmp.path()), "/usr/local/bin/isoe");
    let release = ok(&vm, "modprobe ublk_drv && modprobe nbd && uname -r");
    assert!(
        release.starts_with("6.12."),
        "booted the 6.12 kernel: {release}"
    );

    let port = free_port();
    let config = TargetConfig::new("");
    let socket = config.dir().join("control.sock").display().to_string();
    std::fs::write(
        config.path(),
        format!(
            "portals = [\"127.0.0.1:0\"]\n[control]\nsocket = \"{socket}\"\n\n\
             [[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
             [[target.lun]]\nnumber = 0\nfile = \"lun0.img\"\nsize = \"1GiB\"\n"
        ),
    )
    .unwrap();
    let mut target = Target::with_config_on(&config, &[&format!("127.0.0.1:{port}")]);
    let url = format!("iscsi://10.0.2.2:{port}/{DEFAULT_TARGET}/0");

    // ublk: the queue limits from the LU's pages, then a file system.
    let dev = attach(&vm, &url, "t-ublk", "--ublk");
    assert!(dev.starts_with("/dev/ublkb"), "{dev}");
    let base = dev.trim_start_matches("/dev/");
    let limits = ok(
        &vm,
        &format!(
            "cd /sys/block/{base}/queue && grep -H . logical_block_size physical_block_size \
             max_sectors_kb discard_granularity discard_max_bytes write_zeroes_max_bytes \
             optimal_io_size write_cache fua rotational"
        ),
    );
    eprintln!("{dev} queue limits:\n{limits}");
    assert!(limits.contains("logical_block_size:512"), "{limits}");
    assert!(
        !limits.contains("discard_max_bytes:0\n"),
        "discard is on: {limits}"
    );
    assert!(!limits.contains("write_zeroes_max_bytes:0\n"), "{limits}");
    let listed = ok(&vm, "isoe attach --list --json");
    assert!(
        listed.contains(&dev) && listed.contains("t-ublk"),
        "{listed}"
    );
    // 6.12's ublk has no zero copy: the copying path serves.
    assert!(listed.contains(r#""data_path": "copy""#), "{listed}");
    let before = lun_counters(&socket);
    let out = file_system_workout(&vm, &dev);
    assert!(
        out.trim_end().ends_with('0'),
        "blkdiscard -z left data:\n{out}"
    );
    let after = lun_counters(&socket);
    eprintln!("the LU's counters over the ublk work-out: {before:?} -> {after:?}");
    for (what, b, a) in [
        ("UNMAP (fstrim)", before.0, after.0),
        ("WRITE SAME (blkdiscard -z)", before.1, after.1),
        ("SYNCHRONIZE CACHE (fsync)", before.2, after.2),
    ] {
        assert!(a > b, "{what} reached the target: {b} -> {a}");
    }
    detach(&vm, "t-ublk", &dev);

    // NBD: the same, with the LU's largest discard as ublk has it (set
    // by a thread once the device runs: give it a moment).
    let ublk_discard_max = limits
        .lines()
        .find_map(|l| l.strip_prefix("discard_max_bytes:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    let dev = attach(&vm, &url, "t-nbd", "--nbd");
    assert!(dev.starts_with("/dev/nbd"), "{dev}");
    let nbd_discard_max = ok(
        &vm,
        &format!(
            "q=/sys/block/{}/queue; for i in $(seq 50); do \
             [ \"$(cat $q/discard_max_bytes)\" = {ublk_discard_max} ] && break; sleep 0.1; done; \
             cat $q/discard_max_bytes",
            dev.trim_start_matches("/dev/")
        ),
    );
    assert_eq!(
        nbd_discard_max.trim(),
        ublk_discard_max,
        "the NBD device takes the LU's discard limit, as ublk does"
    );
    let out = file_system_workout(&vm, &dev);
    assert!(
        out.trim_end().ends_with('0'),
        "blkdiscard -z left data:\n{out}"
    );
    detach(&vm, "t-nbd", &dev);

    // The target killed and back 10 s later, under a verifying fio: the
    // session is reinstated and the commands sent again; fio sees no error.
    for (name, flag) in [("r-ublk", "--ublk"), ("r-nbd", "--nbd")] {
        let dev = attach(&vm, &url, name, flag);
        ok(
            &vm,
            &format!(
                "nohup fio --name=v --filename={dev} --size=256m --ioengine=libaio --direct=1 \
                 --iodepth=32 --rw=randwrite --bs=4k --verify=crc32c --do_verify=1 \
                 --verify_fatal=1 >/tmp/{name}.fio 2>&1 </dev/null & \
                 echo $! >/tmp/{name}.fiopid"
            ),
        );
        std::thread::sleep(Duration::from_secs(8));
        target.kill();
        assert!(
            vm.ssh(&format!("kill -0 $(cat /tmp/{name}.fiopid)"))
                .success(),
            "fio still runs when the target goes: {}",
            ok(&vm, &format!("cat /tmp/{name}.fio"))
        );
        std::thread::sleep(Duration::from_secs(10));
        target.start_again();
        wait_for_exit(
            &vm,
            &format!("/tmp/{name}.fiopid"),
            Duration::from_secs(600),
        );
        let log = ok(&vm, &format!("cat /tmp/{name}.fio; cat /tmp/{name}.err"));
        assert!(
            log.contains("err= 0") && !log.contains("verify:") && !log.contains("io_u error"),
            "fio through the restart:\n{log}"
        );
        let listed = ok(&vm, "isoe attach --list --json");
        let records: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let record = records
            .as_array()
            .and_then(|all| all.iter().find(|r| r["name"] == name))
            .unwrap_or_else(|| panic!("{name} is listed: {listed}"));
        assert!(
            record["stats"]["reconnects"].as_u64() >= Some(1)
                && record["stats"]["errors"].as_u64() == Some(0),
            "the session was reinstated under fio, and no request failed: {record}"
        );
        detach(&vm, name, &dev);
    }

    // isoe attach killed mid-write: ublk keeps the device (user recovery)
    // and a new attach with the same name resumes it; nothing hangs.
    let dev = attach(&vm, &url, "k-ublk", "--ublk");
    ok(
        &vm,
        &format!(
            "nohup dd if=/dev/urandom of={dev} bs=64k count=400 oflag=direct >/tmp/dd.out 2>&1 \
             </dev/null & echo $! >/tmp/dd.pid; sleep 3; kill -9 $(cat /tmp/k-ublk.pid)"
        ),
    );
    std::thread::sleep(Duration::from_secs(3));
    let again = attach(&vm, &url, "k-ublk", "--ublk");
    assert_eq!(again, dev, "the restarted attach resumes the same device");
    wait_for_exit(&vm, "/tmp/dd.pid", Duration::from_secs(300));
    let log = ok(&vm, "cat /tmp/dd.out");
    assert!(
        log.contains("400+0 records out"),
        "dd across the attach's restart:\n{log}"
    );
    detach(&vm, "k-ublk", &dev);

    // NBD has no recovery: its I/O fails at once, the device is freed, and
    // the next attach gets a device again.
    let dev = attach(&vm, &url, "k-nbd", "--nbd");
    ok(
        &vm,
        &format!(
            "nohup dd if=/dev/urandom of={dev} bs=64k count=4000 oflag=direct >/tmp/dd.out 2>&1 \
             </dev/null & echo $! >/tmp/dd.pid; sleep 3; kill -9 $(cat /tmp/k-nbd.pid)"
        ),
    );
    wait_for_exit(&vm, "/tmp/dd.pid", Duration::from_secs(60));
    let log = ok(
        &vm,
        &format!("cat /tmp/dd.out; cat /sys/block/{}/size", &dev[5..]),
    );
    assert!(
        log.contains("error") && log.trim_end().ends_with('0'),
        "dd fails and the device is cleared:\n{log}"
    );
    let again = attach(&vm, &url, "k-nbd2", "--nbd");
    ok(
        &vm,
        &format!("dd if={again} of=/dev/null bs=64k count=16 iflag=direct"),
    );
    detach(&vm, "k-nbd2", &again);

    multipath_through_two_gateways(&vm);
}

/// One RBD image served by two gateways (two `isoe target`s on this host,
/// port groups 1 and 2), attached in the VM with `--multipath` through
/// both; the owner killed with SIGKILL under a verifying fio: the other
/// gateway takes the unit over, the I/O fails over to it, fio sees no
/// error. Needs the test Ceph cluster (CI starts one).
fn multipath_through_two_gateways(vm: &Vm) {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("attach-mp");
    let gateway = |tag: u16| {
        TargetConfig::new(&format!(
            "[[portal_group]]\ntag = {tag}\nportals = [\"127.0.0.1:0\"]\n\n\
             [[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
             [[target.lun]]\nnumber = 0\n{}",
            ceph.lun_keys(&image, "512MiB")
        ))
    };
    let configs = [gateway(1), gateway(2)];
    let mut owner = Target::with_config_portals(&configs[0], 1);
    let other = Target::with_config_portals(&configs[1], 1);
    let urls: Vec<String> = [&owner, &other]
        .iter()
        .map(|t| format!("iscsi://10.0.2.2:{}/{DEFAULT_TARGET}/0", t.port()))
        .collect();
    let dev = attach(vm, &urls.join(" "), "mp", "--ublk --multipath");
    ok(
        vm,
        &format!(
            "nohup fio --name=v --filename={dev} --size=256m --ioengine=libaio --direct=1 \
             --iodepth=32 --rw=randwrite --bs=4k --verify=crc32c --do_verify=1 \
             --verify_fatal=1 >/tmp/mp.fio 2>&1 </dev/null & echo $! >/tmp/mp.fiopid"
        ),
    );
    std::thread::sleep(Duration::from_secs(8));
    owner.kill();
    assert!(
        vm.ssh("kill -0 $(cat /tmp/mp.fiopid)").success(),
        "fio still runs when the owner dies: {}",
        ok(vm, "cat /tmp/mp.fio")
    );
    wait_for_exit(vm, "/tmp/mp.fiopid", Duration::from_secs(600));
    let log = ok(vm, "cat /tmp/mp.fio; cat /tmp/mp.err");
    assert!(
        log.contains("err= 0") && !log.contains("verify:") && !log.contains("io_u error"),
        "fio through the owner's death:\n{log}"
    );
    let listed = ok(vm, "isoe attach --list --json");
    let records: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let stats = &records[0]["stats"];
    assert!(
        stats["errors"] == 0 && stats["failovers"].as_u64() >= Some(1),
        "the commands failed over to the other gateway, none failed: {listed}"
    );
    eprintln!("multipath through two gateways, owner killed: {listed}");
    detach(vm, "mp", &dev);
    drop(other);
}

/// The LU's UNMAP, WRITE SAME and SYNCHRONIZE CACHE commands so far, from
/// the target's `isoe admin stats`.
fn lun_counters(socket: &str) -> (u64, u64, u64) {
    let stats = support::cli::isoe_json(&["admin", "--json", "--socket", socket, "stats"]);
    let lun = &stats["stats"]["luns"][DEFAULT_TARGET]["0"];
    (
        lun["unmap"]["commands"].as_u64().unwrap_or(0),
        lun["write_same"]["commands"].as_u64().unwrap_or(0),
        lun["sync_cache"].as_u64().unwrap_or(0),
    )
}
