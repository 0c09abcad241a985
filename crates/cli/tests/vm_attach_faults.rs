//! `isoe attach` in the test bed's VM when things go wrong, as a new user
//! meets them: an attach killed and its name taken by another LU, a disk
//! whose attach is gone for good, a target that comes back after the
//! replacement timeout, a detach of a mounted disk, a LUN that does not
//! exist, one LU attached under two names. Each case checks what the user
//! sees (exit status, message, `--list`, the log) and that no process is
//! left in uninterruptible sleep. The VM runs the newest kernel, whose
//! ublk has zero copy: a last case checks that path's data against the
//! copying path's.
//!
//! The cases run in one VM (a boot under TCG takes most of a minute) and
//! each records its failures instead of stopping the test, so that one run
//! tells every case that fails. `ISOE_VM_ATTACH_BINARY` names another
//! `isoe` binary to copy in (an older build, to see these cases fail).

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::attach::{attach, free_port, ok, stripped_isoe, wait_for_exit};
use support::vm::Vm;
use support::{Target, TargetConfig, DEFAULT_TARGET};

/// The failures of every case, reported together at the end.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, case: &str, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            let text = format!("[{case}] {}", what());
            eprintln!("FAILED {text}");
            self.0.push(text);
        }
    }
}

/// Processes in uninterruptible sleep (D state), as `ps` shows them; the
/// kernel's own threads are left out (they sleep so while idle).
fn d_state(vm: &Vm) -> String {
    ok(
        vm,
        "ps -eo stat=,pid=,comm=,args= | awk '$1 ~ /^D/ && $4 !~ /^\\[/'",
    )
}

/// Runs `command` in the VM; its exit status and its output, stdout then
/// stderr.
fn run(vm: &Vm, command: &str) -> (i32, String) {
    let out = vm.ssh(&format!("{command}; echo \"exit=$?\""));
    let text = format!("{}{}", out.stdout, out.stderr);
    let code = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("exit="))
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(-1);
    (code, text)
}

/// Waits up to `limit` for `command` to succeed in the VM.
fn eventually(vm: &Vm, command: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if vm.ssh(command).success() {
            return true;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    false
}

fn binary(dir: &std::path::Path) -> PathBuf {
    match std::env::var_os("ISOE_VM_ATTACH_BINARY") {
        Some(path) => PathBuf::from(path),
        None => stripped_isoe(dir),
    }
}

#[test]
fn attach_faults_end_in_bounded_time_with_clear_words() {
    let Some(vm) = Vm::start_or_skip("vm_attach_faults") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    vm.copy_in(&binary(tmp.path()), "/usr/local/bin/isoe");
    ok(&vm, "modprobe ublk_drv && modprobe nbd");

    let port = free_port();
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nfile = \"lun0.img\"\nsize = \"64MiB\"\n\n\
         [[target.lun]]\nnumber = 1\nfile = \"lun1.img\"\nsize = \"64MiB\"\n"
    ));
    let mut target = Target::with_config_on(&config, &[&format!("127.0.0.1:{port}")]);
    let url = |lun: u16| format!("iscsi://10.0.2.2:{port}/{DEFAULT_TARGET}/{lun}");
    let mut failures = Failures::default();

    orphans(&vm, &url(0), &url(1), &mut failures);
    no_login_after_the_timeout(&vm, &url(0), &mut target, &mut failures);
    // (It ends with the target back: the cases below need it.)
    detach_of_a_mounted_disk(&vm, &url(0), &mut failures);
    wrong_lun_and_two_names(&vm, &url(0), &url(7), &mut failures);
    zero_copy(&vm, &url(1), &mut failures);

    let stuck = d_state(&vm);
    failures.check("end", stuck.trim().is_empty(), || {
        format!("processes left in D state:\n{stuck}")
    });
    // Whatever a failed case left: its processes and disks go with the VM.
    assert!(
        failures.0.is_empty(),
        "{} check(s) failed:\n{}",
        failures.0.len(),
        failures.0.join("\n")
    );
}

/// An attach killed (SIGKILL) while a reader waits on its ublk disk: the
/// name stays the orphan's, `--list` and `detach` reach it, and its I/O
/// ends within the replacement timeout when no attach resumes it.
fn orphans(vm: &Vm, lun0: &str, lun1: &str, f: &mut Failures) {
    let case = "orphan";
    let dev = attach(vm, lun0, "vol", "--ublk --replacement-timeout 20");
    ok(
        vm,
        &format!(
            "nohup sh -c 'while dd if={dev} of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; \
             do sleep 0.2; done; echo reader-ended' >/tmp/reader.out 2>&1 </dev/null & \
             echo $! >/tmp/reader.pid; sleep 2; kill -9 $(cat /tmp/vol.pid)"
        ),
    );
    let killed = Instant::now();
    // The name of an orphan is not another LU's.
    let (code, text) = run(
        vm,
        &format!("timeout 60 isoe attach {lun1} --name vol --ublk </dev/null"),
    );
    f.check(case, code == 2 && text.contains("orphaned"), || {
        format!("attaching another LU as vol refused with exit 2, naming the orphan: exit {code}\n{text}")
    });
    // Nor does one LU take a second name while its orphan waits.
    let (code, text) = run(
        vm,
        &format!("timeout 60 isoe attach {lun0} --name vol2 --ublk </dev/null"),
    );
    f.check(
        case,
        code == 2 && text.contains("attached already as vol"),
        || format!("attaching the orphan's LU as vol2 refused with exit 2: exit {code}\n{text}"),
    );
    let listed = ok(vm, "isoe attach --list");
    eprintln!("--list with an orphan:\n{listed}");
    f.check(
        case,
        listed
            .lines()
            .any(|l| l.starts_with("vol ") && l.contains("orphaned") && l.contains(&dev)),
        || format!("--list shows vol orphaned on {dev}:\n{listed}"),
    );
    // Nobody resumes it: the guard deletes it within the replacement
    // timeout (20 s) and the reader's I/O fails instead of hanging.
    let ended = eventually(
        vm,
        "grep -q reader-ended /tmp/reader.out",
        Duration::from_secs(90),
    );
    let waited = killed.elapsed();
    f.check(case, ended, || {
        format!(
            "the reader of an orphan nobody resumes ends within 90 s; D state:\n{}",
            d_state(vm)
        )
    });
    eprintln!(
        "the orphan's reader ended {:.0} s after the kill",
        waited.as_secs_f64()
    );
    let listed = ok(vm, "isoe attach --list; ls /dev/ublkb* 2>&1 || true");
    f.check(case, !listed.contains("vol "), || {
        format!("the deleted orphan is no longer listed:\n{listed}")
    });
    let err = ok(vm, "cat /tmp/vol.err");
    f.check(case, err.contains("deleted it"), || {
        format!("the guard says it deleted the disk:\n{err}")
    });

    // An orphan with a long timeout: `isoe detach` by its path deletes it
    // and the held read fails.
    let dev = attach(vm, lun0, "long", "--ublk --replacement-timeout 600");
    ok(
        vm,
        &format!(
            "kill -9 $(cat /tmp/long.pid); sleep 1; nohup dd if={dev} of=/dev/null bs=4k count=1 \
             iflag=direct >/tmp/held.out 2>&1 </dev/null & echo $! >/tmp/held.pid"
        ),
    );
    std::thread::sleep(Duration::from_secs(3));
    let (code, text) = run(vm, &format!("isoe detach {dev}"));
    f.check(case, code == 0 && text.contains("deleted"), || {
        format!("isoe detach {dev} deletes the orphan: exit {code}\n{text}")
    });
    let ended = eventually(
        vm,
        "! kill -0 $(cat /tmp/held.pid)",
        Duration::from_secs(30),
    );
    f.check(case, ended, || {
        format!(
            "the held read ends once the orphan is deleted; D state:\n{}",
            d_state(vm)
        )
    });
}

/// The target away for longer than the replacement timeout: requests fail
/// at once while it is away, the attach says so in `--list` and in its
/// log, and logs in again by itself once the target is back.
fn no_login_after_the_timeout(vm: &Vm, lun0: &str, target: &mut Target, f: &mut Failures) {
    let case = "timeout";
    let dev = attach(vm, lun0, "t", "--ublk --replacement-timeout 5");
    ok(
        vm,
        &format!("dd if=/dev/urandom of={dev} bs=64k count=16 oflag=direct 2>/dev/null"),
    );
    target.kill();
    // A read issued while the target is away waits for the timeout, then
    // fails.
    let (code, text) = run(
        vm,
        &format!("timeout 60 dd if={dev} of=/dev/null bs=4k count=1 iflag=direct"),
    );
    f.check(case, code != 0 && code != 124, || {
        format!("a read past the replacement timeout fails (not hangs): exit {code}\n{text}")
    });
    let listed = ok(vm, "isoe attach --list");
    f.check(
        case,
        listed
            .lines()
            .any(|l| l.starts_with("t ") && l.contains("offline")),
        || format!("--list says the device is offline:\n{listed}"),
    );
    target.start_again();
    // It logs in again by itself (every 5 s): reads work again.
    let back = eventually(
        vm,
        &format!("dd if={dev} of=/dev/null bs=4k count=1 iflag=direct"),
        Duration::from_secs(60),
    );
    f.check(case, back, || {
        "reads succeed again within 60 s of the target's return".into()
    });
    let log = ok(vm, "cat /tmp/t.err");
    eprintln!("the attach's log:\n{log}");
    for words in [
        "connection lost",
        "session failed",
        "request(s) failed",
        "logged in again",
    ] {
        f.check(case, log.contains(words), || {
            format!("the log says {words:?}:\n{log}")
        });
    }
    let listed = ok(vm, "isoe attach --list");
    f.check(
        case,
        listed
            .lines()
            .any(|l| l.starts_with("t ") && l.contains("serving")),
        || format!("--list says serving again:\n{listed}"),
    );
    let (code, text) = run(vm, "isoe detach t");
    f.check(case, code == 0, || {
        format!("isoe detach t: exit {code}\n{text}")
    });

    // Detached while the target is away, with a read waiting and a long
    // replacement timeout: the read fails and the device goes at once,
    // well within detach's own wait (20 s, where the timeout is 90 s).
    let case = "detach-away";
    let dev = attach(vm, lun0, "w", "--ublk --replacement-timeout 90");
    target.kill();
    ok(
        vm,
        &format!(
            "nohup dd if={dev} of=/dev/null bs=4k count=1 skip=100 iflag=direct \
             >/tmp/w-dd.out 2>&1 </dev/null & echo $! >/tmp/w-dd.pid"
        ),
    );
    let lost = eventually(
        vm,
        "grep -q 'connection lost' /tmp/w.err",
        Duration::from_secs(30),
    );
    f.check(case, lost, || "the attach saw the target go".into());
    let reconnecting = eventually(
        vm,
        "isoe attach --list | grep '^w ' | grep -q reconnecting",
        Duration::from_secs(10),
    );
    f.check(case, reconnecting, || {
        format!(
            "--list says reconnecting:\n{}",
            ok(vm, "isoe attach --list")
        )
    });
    let (code, text) = run(vm, "isoe detach w --timeout 20");
    f.check(case, code == 0, || {
        format!("isoe detach while the target is away: exit {code}\n{text}")
    });
    let ended = eventually(
        vm,
        "! kill -0 $(cat /tmp/w-dd.pid)",
        Duration::from_secs(10),
    );
    f.check(case, ended, || "the waiting read ended".into());
    let log = ok(vm, "cat /tmp/w.err");
    f.check(case, log.contains("no longer logging in again"), || {
        format!("the log says the reconnection was given up:\n{log}")
    });
    target.start_again();
}

/// `isoe detach` of a mounted disk is refused without `--force`, and the
/// file system stays sound.
fn detach_of_a_mounted_disk(vm: &Vm, lun0: &str, f: &mut Failures) {
    let case = "mounted";
    let dev = attach(vm, lun0, "m", "--ublk");
    ok(
        vm,
        &format!(
            "mkfs.ext4 -q -F {dev} && mkdir -p /mnt/m && mount {dev} /mnt/m && \
             echo kept >/mnt/m/file && sync"
        ),
    );
    let (code, text) = run(vm, "isoe detach m");
    f.check(
        case,
        code != 0 && text.contains("mounted on /mnt/m") && text.contains("--force"),
        || format!("detach of a mounted disk refused, naming the mount: exit {code}\n{text}"),
    );
    let (code, text) = run(vm, "cat /mnt/m/file && umount /mnt/m && isoe detach m");
    f.check(case, code == 0 && text.contains("kept"), || {
        format!("the file system is intact, then unmounted and detached: exit {code}\n{text}")
    });
    let waited = eventually(vm, "! kill -0 $(cat /tmp/m.pid)", Duration::from_secs(30));
    f.check(case, waited, || "the attach of m ended".into());
    // A clean detach leaves the guard nothing to say.
    std::thread::sleep(Duration::from_secs(2));
    let err = ok(vm, "cat /tmp/m.err");
    f.check(case, !err.contains("ended without removing"), || {
        format!("the guard of a cleanly detached disk stays quiet:\n{err}")
    });
}

/// A LUN the target does not have, and one LU under two names.
fn wrong_lun_and_two_names(vm: &Vm, lun0: &str, lun7: &str, f: &mut Failures) {
    let case = "input";
    let (code, text) = run(
        vm,
        &format!("timeout 60 isoe attach {lun7} --name seven </dev/null"),
    );
    f.check(
        case,
        code == 1 && text.contains("no LUN 7") && text.contains("LUN 0, 1"),
        || format!("a missing LUN is named with the LUNs there are: exit {code}\n{text}"),
    );
    let dev = attach(vm, lun0, "first", "--ublk");
    let (code, text) = run(
        vm,
        &format!("timeout 60 isoe attach {lun0} --name second </dev/null"),
    );
    f.check(
        case,
        code == 2 && text.contains("attached already as first"),
        || format!("one LU under a second name refused: exit {code}\n{text}"),
    );
    let (code, text) = run(vm, "isoe detach first");
    f.check(case, code == 0, || {
        format!("isoe detach first: exit {code}\n{text}")
    });
    wait_for_exit(vm, "/tmp/first.pid", Duration::from_secs(30));
    let gone = ok(vm, &format!("ls {dev} 2>&1 || true"));
    f.check(case, gone.contains("No such file"), || {
        format!("{dev} is gone after detach: {gone}")
    });
}

/// Zero copy where the kernel has it (6.16+), the copying path elsewhere
/// and with `--no-zero-copy`: each says so in `--list`, fio's verify holds
/// over reads and writes of every size (placed reads, writes sent from the
/// request's pages and small ones copied), and both paths read the same
/// bytes.
fn zero_copy(vm: &Vm, lun: &str, f: &mut Failures) {
    let case = "zero-copy";
    let release = ok(vm, "uname -r");
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let want = if version >= (6, 16) {
        "zero-copy"
    } else {
        "copy"
    };
    let dev = attach(vm, lun, "z", "--ublk");
    let listed = ok(vm, "isoe attach --list");
    f.check(case, listed.contains(&format!("ublk/{want}")), || {
        format!("Linux {release}: --list says ublk/{want}:\n{listed}")
    });
    let (code, text) = run(
        vm,
        &format!(
            "fio --name=zc --filename={dev} --direct=1 --ioengine=libaio --iodepth=16 \
             --rw=randrw --bsrange=4k-1m --size=48m --verify=crc32c --verify_fatal=1 \
             --do_verify=1 --randseed=7 2>&1 | tail -3 && \
             fio --name=seq --filename={dev} --direct=1 --ioengine=libaio --iodepth=8 \
             --rw=write --bs=256k --size=48m --offset=0 --verify=md5 --verify_fatal=1 \
             --do_verify=1 2>&1 | tail -3 && md5sum <{dev}"
        ),
    );
    f.check(case, code == 0 && !text.contains("verify:"), || {
        format!("fio verify on the {want} path: exit {code}\n{text}")
    });
    // md5sum's line: the sum and "-" for its standard input.
    let md5 = |text: &str| {
        let line = text.lines().find(|l| l.trim_end().ends_with(" -"));
        line.unwrap_or_default().trim().to_string()
    };
    let sum_zero_copy = md5(&text);
    let json = ok(vm, "isoe attach --list --json");
    let placed = json
        .split("\"zero_copy_read_bytes\":")
        .nth(1)
        .and_then(|t| t.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    f.check(case, (placed > 0) == (want == "zero-copy"), || {
        format!(
            "reads received into the requests' pages on the {want} path: {placed} bytes\n{json}"
        )
    });
    let (code, text) = run(vm, "isoe detach z");
    f.check(case, code == 0, || {
        format!("isoe detach z: exit {code}\n{text}")
    });
    wait_for_exit(vm, "/tmp/z.pid", Duration::from_secs(30));

    let dev = attach(vm, lun, "zcopy", "--ublk --no-zero-copy");
    let listed = ok(vm, "isoe attach --list");
    f.check(case, listed.contains("ublk/copy"), || {
        format!("--no-zero-copy: --list says ublk/copy:\n{listed}")
    });
    let sum_copy = md5(&ok(vm, &format!("md5sum <{dev}")));
    f.check(
        case,
        !sum_copy.is_empty() && sum_copy == sum_zero_copy,
        || format!("both paths read the same bytes: {sum_zero_copy} vs {sum_copy}"),
    );
    let (code, text) = run(vm, "isoe detach zcopy");
    f.check(case, code == 0, || {
        format!("isoe detach zcopy: exit {code}\n{text}")
    });
    wait_for_exit(vm, "/tmp/zcopy.pid", Duration::from_secs(30));
}
