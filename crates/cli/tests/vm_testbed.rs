//! The test bed's virtual machine: the lab's SSH host against
//! it, the Linux kernel's iSCSI initiator in a QEMU VM against isoe's target
//! on the host, and LIO in the VM, configured by the lab's
//! [`LioTarget`], against the kernel initiator there and isoe's initiator
//! on the host. One VM serves every part (booting it under TCG takes half
//! a minute).
//!
//! The VM reaches the host's loopback as 10.0.2.2 (QEMU's user network), so
//! the kernel initiator adds its node by hand rather than from SendTargets,
//! whose answer names the target's own 127.0.0.1 portal.

mod support;

use isoe_lab::host::Host;
use isoe_lab::knobs::KnobSet;
use isoe_lab::peers::kernel::{KernelSession, NodeSettings};
use isoe_lab::peers::lio::{self, Backstore, LioTarget};
use isoe_lab::ssh::HostError;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;
use support::cli::isoe;
use support::tools::run;
use support::vm::Vm;
use support::{pattern, Target, TargetConfig, DEFAULT_TARGET};

const LIO_TARGET: &str = "iqn.2026-11.io.isoe:lio";

fn sha256_of(path: &std::path::Path) -> String {
    let out = run(
        "sha256sum",
        &[path.to_str().expect("a UTF-8 path")],
        Duration::from_secs(30),
    );
    assert!(out.success(), "sha256sum:\n{}", out.describe());
    out.stdout
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// `isoe read URL --lba LBA --blocks BLOCKS -o OUT`, which must succeed.
fn read_blocks(url: &str, lba: u64, blocks: u64, out: &std::path::Path) {
    let read = isoe(&[
        "read",
        url,
        "--lba",
        &lba.to_string(),
        "--blocks",
        &blocks.to_string(),
        "-o",
        out.to_str().expect("a UTF-8 path"),
    ]);
    assert!(read.success(), "isoe read {url}:\n{}", read.describe());
}

#[test]
fn the_vm_is_a_lab_ssh_host_a_kernel_initiator_and_a_lio_target() {
    let Some(vm) =
        Vm::start_or_skip("the_vm_is_a_lab_ssh_host_a_kernel_initiator_and_a_lio_target")
    else {
        return;
    };
    eprintln!("VM up ({})", vm.accel());

    // The lab's SSH host: a command, a file, a program started and ended
    // by its remote PID, and a failure that says what failed.
    let host = Host::parse(&vm.ssh_url(), Some(vm.key()), vm.run_dir()).expect("the VM's URL");
    let kernel = host.run(&["uname", "-r"]).expect("uname over SSH");
    assert!(kernel.contains("cloud-amd64"), "{kernel}");
    let stat = host.read("/proc/stat").expect("/proc/stat over SSH");
    assert!(stat.starts_with("cpu "), "{stat}");
    let sleeper = host
        .spawn(&["sleep", "600"], Stdio::null())
        .expect("start sleep");
    let pid = sleeper.pid().to_string();
    assert!(sleeper.pid() > 1);
    host.run(&["kill", "-0", &pid])
        .expect("the remote sleep runs");
    sleeper
        .stop(std::time::Duration::from_secs(5))
        .expect("stop the remote sleep");
    match host.run(&["kill", "-0", &pid]) {
        Err(HostError::Failed { .. }) => {}
        other => panic!("the remote sleep is still there: {other:?}"),
    }
    match host.run(&["ls", "/no such dir"]) {
        Err(e @ HostError::Failed { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("'/no such dir'") && text.contains("No such file"),
                "{text}"
            );
        }
        other => panic!("a failing command is an error: {other:?}"),
    }

    // The kernel initiator against isoe's target, through the lab's
    // KernelSession with settings written into its node record: login,
    // fio writing and verifying 16 MiB at queue depth 8, then 4 MiB of
    // random bytes written with dd, whose SHA-256 the host compares with
    // what it reads back.
    let config = TargetConfig::memory_lun("64MiB");
    let mut target = Target::with_config(&config);
    let portal = format!("10.0.2.2:{}", target.port());
    let settings = NodeSettings {
        header_digest: Some(true),
        immediate_data: Some(false),
        initial_r2t: Some(true),
        first_burst_length: Some(65536),
        ..NodeSettings::default()
    };
    let session = KernelSession::login(&host, &portal, DEFAULT_TARGET, "default", 0, &settings)
        .expect("kernel login");
    let negotiated = session.describe().expect("iscsiadm -m session -P 2");
    for setting in [
        "HeaderDigest: CRC32C",
        "ImmediateData: No",
        "InitialR2T: Yes",
    ] {
        assert!(negotiated.contains(setting), "{setting} in:\n{negotiated}");
    }
    let dev = session.device.clone();
    let name = dev.trim_start_matches("/dev/");
    let vendor = host
        .read(&format!("/sys/block/{name}/device/vendor"))
        .expect("the device's vendor");
    assert_eq!(vendor.trim(), "ISOE");
    host.run(&[
        "fio",
        "--name=verify",
        &format!("--filename={dev}"),
        "--direct=1",
        "--ioengine=libaio",
        "--rw=randwrite",
        "--bs=16k",
        "--iodepth=8",
        "--size=16m",
        "--verify=crc32c",
        "--do_verify=1",
        "--minimal",
    ])
    .expect("fio writes and verifies through the kernel initiator");
    let written = host
        .run(&[
            "sh",
            "-c",
            "head -c 4194304 /dev/urandom >/tmp/data && \
             dd if=/tmp/data of=\"$1\" bs=1M seek=32 oflag=direct status=none && \
             sha256sum /tmp/data | cut -d' ' -f1",
            "sh",
            &dev,
        ])
        .expect("dd through the kernel initiator")
        .trim()
        .to_owned();
    session.logout().expect("kernel logout");
    target.assert_running("after the kernel initiator's session");
    let log = target.output();
    assert!(
        log.contains("login accepted: new normal session initiator=iqn.2026-11.io.isoe:vm ")
            && log
                .contains("logout to close the session: closed initiator=iqn.2026-11.io.isoe:vm "),
        "the target logged the VM's login and logout:\n{log}"
    );
    let back = config.dir().join("back.bin");
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let lba = (32 << 20) / 512;
    read_blocks(&url, lba, (4 << 20) / 512, &back);
    assert_eq!(
        sha256_of(&back),
        written,
        "what the kernel wrote reads back whole"
    );

    kernel_sees_the_port_groups(&host);
    dm_multipath_fails_over_between_rbd_gateways(&host);

    // LIO in the VM, configured by the lab through configfs with knobs
    // that differ from LIO's defaults (HeaderDigest CRC32C,None and
    // ImmediateData Yes), so that the negotiation shows they took.
    let lab_host = host.clone();
    assert_eq!(lio::unavailable(&lab_host), None, "LIO in the VM");
    let knobs = KnobSet {
        header_digest: Some(true),
        immediate_data: Some(false),
        ..KnobSet::default()
    };
    let any: SocketAddr = "0.0.0.0:3260".parse().expect("an address");
    // A portal LIO cannot bind: the error names it, and nothing is left.
    let unbound: SocketAddr = "192.0.2.7:3260".parse().expect("an address");
    match LioTarget::start(&lab_host, LIO_TARGET, 32 << 20, &[any, unbound], &knobs) {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!("/iscsi/{LIO_TARGET}/tpgt_1/np/192.0.2.7:3260")),
                "{text}"
            );
        }
        Ok(_) => panic!("LIO bound 192.0.2.7, which the VM does not have"),
    }
    assert_lio_gone(&lab_host);
    // A run that died leaves its target behind; the next start removes it.
    std::mem::forget(
        LioTarget::start(&lab_host, LIO_TARGET, 32 << 20, &[any], &knobs)
            .expect("LIO target (to be left behind)"),
    );
    let lio = LioTarget::start(&lab_host, LIO_TARGET, 32 << 20, &[any], &knobs)
        .expect("LIO target over a leftover");
    assert_eq!((lio.lun(), lio.size_bytes()), (0, 32 << 20));
    let param = |name: &str| format!("{}/param/{name}", lio.tpg_dir());
    let offered = lab_host
        .read_many(&[param("HeaderDigest"), param("ImmediateData")])
        .expect("LIO's parameters");
    assert_eq!(
        offered,
        [Some("CRC32C\n".to_owned()), Some("No\n".to_owned())]
    );

    // The kernel initiator in the VM against it: open-iscsi offers
    // ImmediateData=Yes, so "No" is LIO's offer taking effect.
    let settings = NodeSettings {
        header_digest: Some(true),
        ..NodeSettings::default()
    };
    let session =
        KernelSession::login(&host, "127.0.0.1:3260", LIO_TARGET, "default", 0, &settings)
            .expect("kernel login to LIO");
    let negotiated = session.describe().expect("iscsiadm -m session -P 2");
    for setting in ["HeaderDigest: CRC32C", "ImmediateData: No"] {
        assert!(negotiated.contains(setting), "{setting} in:\n{negotiated}");
    }
    session.logout().expect("kernel logout from LIO");

    // isoe's initiator against LIO: its INQUIRY (requiring the header
    // digest LIO now insists on), and a pattern written and read back.
    let url = format!("iscsi://127.0.0.1:{}/{LIO_TARGET}/0", vm.iscsi_port());
    let inquiry = isoe(&["inquiry", &url, "--header-digest"]);
    assert!(
        inquiry.success(),
        "isoe inquiry against LIO:\n{}",
        inquiry.describe()
    );
    assert!(inquiry.stdout.contains("LIO-ORG"), "{}", inquiry.describe());
    let data = pattern(14, 1 << 20);
    let input = config.dir().join("pattern.bin");
    std::fs::write(&input, &data).expect("write the pattern");
    let write = isoe(&[
        "write",
        &url,
        "--lba",
        "8",
        "--input",
        input.to_str().expect("a UTF-8 path"),
    ]);
    assert!(write.success(), "isoe write to LIO:\n{}", write.describe());
    let back = config.dir().join("lio-back.bin");
    read_blocks(&url, 8, (1 << 20) / 512, &back);
    assert_eq!(
        sha256_of(&back),
        sha256_of(&input),
        "LIO gives back the pattern"
    );
    lio.stop().expect("take LIO down");
    assert_lio_gone(&lab_host);
    host.close();
}

/// ALUA as Linux sees it: isoe's target with two portal groups (1
/// active/optimized and preferred, 2 active/non-optimized), a kernel
/// session through each, and sg3-utils on each path's SCSI device:
/// TPGS in INQUIRY, the path's relative target port in VPD 0x83, and both
/// groups in REPORT TARGET PORT GROUPS (`sg_rtpg`).
fn kernel_sees_the_port_groups(host: &Host) {
    const ALUA_TARGET: &str = "iqn.2026-11.io.isoe:alua";
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let (p1, p2) = (free_port(), free_port());
    let config = TargetConfig::new(&format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:{p1}\"]\npreferred = true\n\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.1:{p2}\"]\n\
         alua_state = \"active/non-optimized\"\n\n\
         [[target]]\nname = \"{ALUA_TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    ));
    let target = Target::with_config_portals(&config, 2);
    let settings = NodeSettings::default();
    let first = KernelSession::login(
        host,
        &format!("10.0.2.2:{p1}"),
        ALUA_TARGET,
        "default",
        0,
        &settings,
    )
    .expect("kernel login through portal group 1");
    let second = KernelSession::login(
        host,
        &format!("10.0.2.2:{p2}"),
        ALUA_TARGET,
        "default",
        0,
        &settings,
    )
    .expect("kernel login through portal group 2");
    for (session, port) in [(&first, 1), (&second, 2)] {
        let dev = &session.device;
        let inq = host.run(&["sg_inq", dev]).expect("sg_inq");
        assert!(inq.contains("TPGS=1"), "implicit ALUA in INQUIRY:\n{inq}");
        let vpd = host.run(&["sg_vpd", "--page=di", dev]).expect("sg_vpd");
        assert!(
            vpd.contains(&format!("Relative target port: 0x{port}")),
            "{dev} is relative port {port}:\n{vpd}"
        );
        let rtpg = host.run(&["sg_rtpg", "--decode", dev]).expect("sg_rtpg");
        for expected in [
            "target port group id : 0x1 , Pref=1",
            "target port group id : 0x2 , Pref=0",
            "0x00 (active/optimized)",
            "0x01 (active/non optimized)",
            "Relative target port ids:\n      0x02",
        ] {
            assert!(
                rtpg.contains(expected),
                "{expected:?} in sg_rtpg on {dev}:\n{rtpg}"
            );
        }
        eprintln!("sg_rtpg --decode {dev} (through portal group {port}):\n{rtpg}");
    }
    first.logout().expect("kernel logout (group 1)");
    second.logout().expect("kernel logout (group 2)");
    drop(target);
}

/// Failover across RBD gateways with the Linux kernel: two isoe gateways of one RBD
/// image (portal groups 1 and 2), the VM logged in through both, and
/// dm-multipath with `prio alua` grouping the paths by priority: gateway
/// A's path (active/optimized) in the group I/O goes to. fio writes with
/// verification through the multipath device while A is killed with
/// SIGKILL; its I/O moves to B's path and every block reads back as
/// written. Skipped without a Ceph cluster (CEPH_CONF), except under CI.
fn dm_multipath_fails_over_between_rbd_gateways(host: &Host) {
    const GATEWAYS: &str = "iqn.2026-11.io.isoe:gateways";
    let Some(ceph) = support::ceph::Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("vm-multipath");
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let gateway = |tag: u16, port: u16| {
        TargetConfig::new(&format!(
            "[[portal_group]]\ntag = {tag}\nportals = [\"127.0.0.1:{port}\"]\n\n\
             [[target]]\nname = \"{GATEWAYS}\"\n[[target.lun]]\nnumber = 0\n{}",
            ceph.lun_keys(&image, "256MiB")
        ))
    };
    let (p1, p2) = (free_port(), free_port());
    let configs = [gateway(1, p1), gateway(2, p2)];
    let mut a = Target::with_config_portals(&configs[0], 1);
    let b = Target::with_config_portals(&configs[1], 1);

    // dm-multipath as a storage administrator sets it up for an ALUA
    // array: paths grouped by priority, the ALUA handler, failback.
    host.write(
        "/etc/multipath.conf",
        "defaults {\n  user_friendly_names no\n  find_multipaths no\n  polling_interval 1\n}\n\
         blacklist {\n  devnode \"^vd\"\n}\n\
         devices {\n  device {\n    vendor \"ISOE\"\n    product \".*\"\n\
             path_grouping_policy group_by_prio\n    prio alua\n\
             hardware_handler \"1 alua\"\n    path_checker tur\n    failback immediate\n\
             no_path_retry 30\n  }\n}\n"
            .as_bytes(),
    )
    .expect("write multipath.conf");
    host.run(&["systemctl", "restart", "multipathd"])
        .expect("restart multipathd");
    // A lost connection fails its I/O over after 5 s rather than 120.
    let settings = NodeSettings {
        replacement_timeout: Some(5),
        ..NodeSettings::default()
    };
    let through_a = KernelSession::login(
        host,
        &format!("10.0.2.2:{p1}"),
        GATEWAYS,
        "default",
        0,
        &settings,
    )
    .expect("kernel login through gateway A");
    let through_b = KernelSession::login(
        host,
        &format!("10.0.2.2:{p2}"),
        GATEWAYS,
        "default",
        0,
        &settings,
    )
    .expect("kernel login through gateway B");
    let (dev_a, dev_b) = (through_a.device.clone(), through_b.device.clone());
    let wwid = host
        .run(&["/lib/udev/scsi_id", "-g", "-u", "-d", &dev_a])
        .expect("scsi_id")
        .trim()
        .to_string();
    let wwid_b = host
        .run(&["/lib/udev/scsi_id", "-g", "-u", "-d", &dev_b])
        .expect("scsi_id");
    assert_eq!(
        wwid,
        wwid_b.trim(),
        "one logical unit through both gateways"
    );
    let mapped = format!("/dev/mapper/{wwid}");
    let mut listing = String::new();
    for _ in 0..30 {
        let _ = host.run(&["multipath", "-r"]);
        listing = host.run(&["multipath", "-ll", &wwid]).unwrap_or_default();
        if listing.contains("prio=50") && listing.contains("prio=10") {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("multipath -ll before the kill:\n{listing}");
    let name_a = dev_a.trim_start_matches("/dev/");
    let optimized = listing
        .split("policy=")
        .find(|group| group.contains("prio=50"))
        .unwrap_or_default();
    assert!(
        optimized.contains(name_a),
        "A's path {name_a} is in the active/optimized group (prio 50):\n{listing}"
    );

    // fio writes 32 MiB at random with CRC32C in every block, then reads
    // it all back; A dies while it writes.
    let fio = host
        .spawn(
            &[
                "fio",
                "--name=failover",
                &format!("--filename={mapped}"),
                "--rw=randwrite",
                "--bs=4k",
                "--size=32M",
                "--ioengine=libaio",
                "--direct=1",
                "--iodepth=8",
                "--verify=crc32c",
                "--verify_fatal=1",
                "--output=/tmp/fio-failover.txt",
            ],
            Stdio::null(),
        )
        .expect("start fio");
    std::thread::sleep(Duration::from_secs(5));
    a.kill();
    let killed = std::time::Instant::now();
    let mut fio = fio;
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let status = loop {
        match fio.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(500));
            }
            _ => break None,
        }
    };
    let report = host.read("/tmp/fio-failover.txt").unwrap_or_default();
    eprintln!(
        "fio through dm-multipath ended {:?} after A was killed:\n{report}",
        killed.elapsed()
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "fio failed across the failover ({status:?}):\n{report}"
    );
    assert!(report.contains("err= 0"), "{report}");
    let after = host.run(&["multipath", "-ll", &wwid]).unwrap_or_default();
    eprintln!("multipath -ll after the kill:\n{after}");
    let name_b = dev_b.trim_start_matches("/dev/");
    assert!(
        after
            .lines()
            .any(|l| l.contains(name_b) && l.contains("active ready")),
        "B's path serves:\n{after}"
    );

    let _ = host.run(&["multipath", "-f", &wwid]);
    let _ = through_a.logout();
    through_b.logout().expect("kernel logout (gateway B)");
    let _ = host.run(&["rm", "-f", "/etc/multipath.conf"]);
    let _ = host.run(&["systemctl", "restart", "multipathd"]);
    drop(b);
}

/// Nothing of [`LIO_TARGET`] is left in the VM's configfs: no target, no
/// backstore.
fn assert_lio_gone(host: &Host) {
    let listed = host
        .run(&[
            "ls",
            "/sys/kernel/config/target/iscsi",
            "/sys/kernel/config/target/core",
        ])
        .expect("ls configfs");
    let backstore = Backstore::for_target(LIO_TARGET);
    assert!(
        !listed.contains(LIO_TARGET) && !listed.contains(&backstore.hba),
        "LIO target or backstore left behind:\n{listed}"
    );
}
