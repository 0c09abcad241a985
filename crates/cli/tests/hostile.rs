//! Hostile and careless peers against the real target, each beside a
//! normal session that writes and reads throughout:
//! idle connections by the ten thousand, the open-files limit, idle
//! connections from the normal initiator's own address (which must not
//! lock it out), a thousand idle sessions, writes announced and never sent, and reads whose data the
//! peer does not read or reads slowly. For each the target's resident
//! memory, threads and descriptors are printed (run with --nocapture to see
//! them) and held to a bound.

mod support;

use isoe_wire::frame::{self, FrameLimits};
use isoe_wire::pdu::{Lun, ScsiCommand};
use isoe_wire::Pdu;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::client::{read16, write16, Client, LoginParams};
use support::target::TargetConfig;
use support::{pattern, Target, DEFAULT_TARGET};

/// The target's resident memory, threads and open descriptors.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    rss_bytes: u64,
    threads: u64,
    fds: u64,
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RSS {:.1} MiB, {} threads, {} descriptors",
            self.rss_bytes as f64 / (1 << 20) as f64,
            self.threads,
            self.fds
        )
    }
}

fn footprint(target: &Target) -> Footprint {
    let pid = target.pid().expect("target running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count() as u64;
    Footprint {
        rss_bytes: field("VmRSS:") * 1024,
        threads: field("Threads:"),
        fds,
    }
}

/// Threads the target may run whatever the load: a worker per CPU, an
/// acceptor, the I/O pool, the main thread, with room to spare.
fn threads_max() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    cpus + 8
}

/// Raises this process's open-files limit to its hard limit (the target
/// inherits it); returns the new soft limit.
fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    limit.rlim_cur
}

/// A normal session that writes a pattern and reads it back at each check.
struct Normal {
    client: Client,
    round: u32,
}

impl Normal {
    fn login(target: &Target) -> Normal {
        let mut params = LoginParams::normal(DEFAULT_TARGET);
        params.initiator_name.push_str("-normal");
        let mut client = Client::login(target.addr(), &params).expect("normal login");
        client.ready(0);
        Normal { client, round: 0 }
    }

    fn check(&mut self, target: &mut Target, when: &str) {
        target.assert_running(when);
        self.round += 1;
        let lba = u64::from(self.round) * 64;
        let data = pattern(self.round, 32 << 10);
        self.client.write(0, lba, &data);
        let back = self
            .client
            .command(0, &read16(lba, 64), &[], 32 << 10)
            .unwrap_or_else(|e| panic!("normal session READ {when}: {e}"));
        back.assert_good(&format!("normal session READ {when}"));
        assert_eq!(back.data, data, "normal session data {when}");
    }
}

fn target_with(limits: &str, lun: &str) -> Target {
    Target::with_config(&TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[limits]\n{limits}\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"{lun}\"\n"
    )))
}

#[test]
fn ten_thousand_idle_connections_cost_little_and_leave_the_normal_session_alone() {
    let files = raise_open_files();
    let wanted = 10_000u64;
    let count = wanted.min(files.saturating_sub(512));
    let mut target = target_with(
        // The longest first-PDU timeout: connecting ten thousand may take
        // a while on a busy machine.
        "connections = 20000\nconnections_per_initiator = 20000\nlogins = 20000\n\
         logins_per_initiator = 20000\nfirst_pdu_timeout_ms = 30000",
        "64MiB",
    );
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let before = footprint(&target);
    let started = Instant::now();
    let idle: Vec<TcpStream> = (0..count)
        .map(|i| {
            TcpStream::connect(target.addr())
                .unwrap_or_else(|e| panic!("idle connection {i} of {count}: {e}"))
        })
        .collect();
    // The acceptor hands each to a worker asynchronously: wait until the
    // target holds them all.
    while footprint(&target).fds < before.fds + count && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = footprint(&target);
    normal.check(&mut target, "with the idle connections");
    println!("{count} idle connections (of {wanted} wanted; open-files limit {files}): before: {before}; with them: {during}");
    assert!(
        during.fds >= before.fds + count,
        "the target holds every idle connection: {during}"
    );
    assert!(
        during.threads <= threads_max(),
        "threads do not grow with connections: {during}"
    );
    let per_connection = during.rss_bytes.saturating_sub(before.rss_bytes) / count;
    println!("resident memory per idle connection: {per_connection} bytes");
    assert!(
        per_connection <= 24 << 10,
        "at most 24 KiB resident per idle connection, got {per_connection}"
    );
    drop(idle);
    normal.check(&mut target, "after the idle connections closed");
}

#[test]
fn at_the_open_files_limit_connections_make_room_without_spinning() {
    // Logins are not what binds here: the connection limit the open-files
    // limit sets is, and each new connection past it closes the oldest
    // that has sent nothing.
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[limits]\nlogins = 1000\nlogins_per_initiator = 1000\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    ));
    let mut target = Target::with_config_and_open_files(&config, 256);
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    target.wait_for_output("limits.connections lowered");
    assert!(
        target
            .output()
            .contains("limits.connections lowered from 4096 to 192"),
        "the target says it lowered its connection limit:\n{}",
        target.output()
    );
    let pid = target.pid().expect("running");
    let cpu = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .expect("comm")
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let held: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect(target.addr()).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (ticks0, at) = (cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let ticks = cpu() - ticks0;
    let hz = 100.0; // USER_HZ on Linux
    let busy = ticks as f64 / hz / at.elapsed().as_secs_f64();
    let during = footprint(&target);
    println!("400 connections against an open-files limit of 256: {during}, target CPU {:.1}% of a core while at the limit", busy * 100.0);
    assert!(
        during.fds <= 256,
        "never past the open-files limit: {during}"
    );
    assert!(
        busy < 0.2,
        "no spinning at the limit: {:.0}% of a core",
        busy * 100.0
    );
    normal.check(&mut target, "at the open-files limit");
    drop(held);
    std::thread::sleep(Duration::from_millis(500));
    let mut again = Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET))
        .expect("a new login once the connections closed");
    again.ready(0);
    // The log is read on another thread: the line may trail the login.
    target.wait_for_output("(limits.connections)");
    let log = target.output();
    assert!(
        log.contains("to make room") && log.contains("(limits.connections)"),
        "evictions are logged with the limit that bound:\n{log}"
    );
}

#[test]
fn a_thousand_idle_sessions_cost_little() {
    let files = raise_open_files();
    assert!(
        files > 2200,
        "open-files limit {files} too low for 1000 sessions"
    );
    let mut target = target_with("connections_per_initiator = 2000", "16MiB");
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let before = footprint(&target);
    let sessions: Vec<Client> = (0..1000)
        .map(|i| {
            let mut params = LoginParams::normal(DEFAULT_TARGET);
            params.initiator_name.push_str(&format!("-idle{i}"));
            let mut client = Client::login(target.addr(), &params)
                .unwrap_or_else(|e| panic!("session {i}: {e}"));
            client.ready(0);
            client
        })
        .collect();
    let during = footprint(&target);
    normal.check(&mut target, "with 1000 idle sessions");
    let per_session = during.rss_bytes.saturating_sub(before.rss_bytes) / 1000;
    println!("1000 idle sessions: before: {before}; with them: {during}; {per_session} bytes resident per session");
    assert!(during.threads <= threads_max(), "{during}");
    assert!(
        per_session <= 64 << 10,
        "at most 64 KiB resident per idle session, got {per_session}"
    );
    drop(sessions);
    normal.check(&mut target, "after");
}

/// Sends one command with no data (the header only), in CmdSN order.
fn send_bare_command(client: &mut Client, read: bool, edtl: u32, cdb: [u8; 16]) {
    let itt = client.next_itt();
    let cmd = Pdu::ScsiCommand(ScsiCommand {
        final_bit: true,
        read,
        write: !read,
        attr: 1,
        lun: Lun::from_number(0),
        initiator_task_tag: itt,
        expected_data_transfer_length: edtl,
        cmd_sn: client.cmd_sn,
        exp_stat_sn: client.exp_stat_sn,
        cdb,
        ..Default::default()
    });
    client.cmd_sn = client.cmd_sn.wrapping_add(1);
    let mut bytes = Vec::new();
    frame::encode(&mut bytes, &cmd, &[], &[], &FrameLimits::LOGIN);
    client.send_raw(&bytes).expect("send a command");
}

/// Sends `count` WRITE(16)s of `edtl` bytes each and never their data.
fn announce_writes(client: &mut Client, count: u32, edtl: u32) {
    for _ in 0..count {
        send_bare_command(client, false, edtl, write16(0, edtl / 512));
    }
}

#[test]
fn writes_announced_and_never_sent_hold_no_more_than_the_budget() {
    let files = raise_open_files();
    assert!(files > 512);
    let mut target = target_with("", "64MiB");
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let before = footprint(&target);
    let mut hostile: Vec<Client> = (0..32)
        .map(|i| {
            let mut params = LoginParams::normal(DEFAULT_TARGET);
            params.initiator_name.push_str(&format!("-writer{i}"));
            params.immediate_data = false;
            params.initial_r2t = true;
            let mut client = Client::login(target.addr(), &params).expect("login");
            client.ready(0);
            client
        })
        .collect();
    // 32 connections x 64 WRITEs of 64 MiB: 128 GiB announced, one
    // MaxBurstLength (1 MiB) solicited per task as the budget allows.
    for client in &mut hostile {
        announce_writes(client, 64, 64 << 20);
    }
    std::thread::sleep(Duration::from_secs(1));
    let during = footprint(&target);
    normal.check(&mut target, "with 128 GiB of writes announced");
    println!("2048 WRITEs of 64 MiB announced, no data sent: before: {before}; during: {during}");
    assert!(
        during.rss_bytes < before.rss_bytes + (64 << 20),
        "announced writes hold no memory beyond the budget's bursts: {before} -> {during}"
    );
    drop(hostile);
    normal.check(&mut target, "after");
}

/// Sends `count` READ(16)s of 32 MiB each (the most the target allows),
/// reading nothing back.
fn request_large_reads(client: &mut Client, count: u32) {
    let len = 32u32 << 20;
    for _ in 0..count {
        send_bare_command(client, true, len, read16(0, len / 512));
    }
}

#[test]
fn a_window_of_the_largest_reads_unread_or_read_slowly_stays_bounded() {
    let mut target = target_with("", "64MiB");
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let before = footprint(&target);
    let mut stalled =
        Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET)).expect("login");
    stalled.ready(0);
    request_large_reads(&mut stalled, 128);
    std::thread::sleep(Duration::from_secs(2));
    let unread = footprint(&target);
    normal.check(&mut target, "beside a peer that does not read");
    println!("128 READs of 32 MiB, peer not reading: before: {before}; during: {unread}");
    // One 32 MiB response built at most, 8 MiB of output ahead, and the
    // LUN's pages: well under the 4 GiB the window asks for.
    assert!(
        unread.rss_bytes < before.rss_bytes + (112 << 20),
        "read data built ahead is bounded: {before} -> {unread}"
    );

    // Now it reads, slowly: 64 KiB every 5 ms (about 12 MiB/s).
    let until = Instant::now() + Duration::from_secs(3);
    let mut got = 0usize;
    let mut peak = unread;
    while Instant::now() < until {
        got += stalled
            .discard_some(64 << 10, Duration::from_millis(5))
            .expect("read slowly");
        std::thread::sleep(Duration::from_millis(5));
        let now = footprint(&target);
        if now.rss_bytes > peak.rss_bytes {
            peak = now;
        }
    }
    normal.check(&mut target, "beside a peer that reads slowly");
    println!("slow reader took {} MiB in 3 s; peak {peak}", got >> 20);
    assert!(got > 0, "the slow reader gets data");
    assert!(
        peak.rss_bytes < before.rss_bytes + (112 << 20),
        "bounded while read slowly: {before} -> {peak}"
    );
    drop(stalled);
    normal.check(&mut target, "after");
}

/// Opens `count` TCP connections to the target that never send a byte.
fn idle_connections(target: &Target, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|i| {
            TcpStream::connect(target.addr())
                .unwrap_or_else(|e| panic!("idle connection {i} of {count}: {e}"))
        })
        .collect()
}

/// Logs in `count` normal sessions, one attempt each, and returns those
/// that logged in with the first failure, if any.
fn normal_sessions(target: &Target, count: usize) -> (Vec<Client>, Option<String>) {
    let mut sessions = Vec::new();
    let mut failure = None;
    for i in 0..count {
        let mut params = LoginParams::normal(DEFAULT_TARGET);
        params.initiator_name.push_str(&format!("-beside-idle{i}"));
        match Client::login(target.addr(), &params) {
            Ok(client) => sessions.push(client),
            Err(e) => {
                failure.get_or_insert(format!("session {i}: {e}"));
            }
        }
    }
    (sessions, failure)
}

/// Asserts that all `count` normal sessions log in beside `idle`, and that
/// each works.
fn all_log_in_beside(target: &mut Target, idle: usize, count: usize) {
    let (mut sessions, failure) = normal_sessions(target, count);
    println!(
        "{} of {count} normal sessions logged in beside {idle} idle connections",
        sessions.len()
    );
    assert_eq!(
        sessions.len(),
        count,
        "every normal session logs in beside {idle} idle connections from its address; {}",
        failure.unwrap_or_default()
    );
    for client in &mut sessions {
        client.ready(0);
    }
    target.assert_running("after the logins");
}

#[test]
fn idle_connections_from_its_own_address_do_not_lock_an_initiator_out() {
    let mut target = target_with("", "16MiB");
    let idle = idle_connections(&target, 200);
    all_log_in_beside(&mut target, idle.len(), 8);
    target.wait_for_output("to make room");
    assert!(
        target.output().contains("to make room"),
        "evictions are logged:\n{}",
        target.output()
    );
}

#[test]
fn idle_connections_up_to_the_open_files_limit_do_not_lock_an_initiator_out() {
    let files = raise_open_files();
    assert!(
        files > 2048,
        "open-files limit {files} too low for the test"
    );
    let config = TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    ));
    let mut target = Target::with_config_and_open_files(&config, 1024);
    let idle = idle_connections(&target, 600);
    all_log_in_beside(&mut target, idle.len(), 8);
    let during = footprint(&target);
    assert!(
        during.fds <= 1024,
        "never past the open-files limit: {during}"
    );
}

/// Sends, behind a CmdSN gap, `count` non-immediate pings of `len` bytes
/// each: they all wait in the target's receive buffer (and its socket).
fn pings_behind_a_gap(client: &mut Client, count: u32, len: usize) {
    let gap = client.cmd_sn;
    for i in 1..=count {
        let nop = Pdu::NopOut(isoe_wire::pdu::NopOut {
            immediate: false,
            lun: Lun::default(),
            initiator_task_tag: client.next_itt(),
            target_transfer_tag: isoe_wire::pdu::RESERVED_TAG,
            cmd_sn: gap.wrapping_add(i),
            exp_stat_sn: client.exp_stat_sn,
        });
        client
            .send_pdu(&nop, &vec![0x5a; len])
            .expect("send a ping");
    }
}

#[test]
fn commands_waiting_behind_gaps_on_many_connections_hold_no_more_than_the_receive_bound() {
    let mut target = target_with("receive_buffer = \"4MiB\"", "64MiB");
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let before = footprint(&target);
    // 64 sessions, each with 600 KiB waiting for CmdSN 1 (75 pings of
    // 8 KiB): unbounded, each buffer would grow to 512 KiB (32 MiB).
    let mut stuffed = Vec::new();
    for _ in 0..64 {
        let mut client =
            Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET)).expect("login");
        pings_behind_a_gap(&mut client, 75, 8 << 10);
        stuffed.push(client);
    }
    std::thread::sleep(Duration::from_secs(1));
    let during = footprint(&target);
    normal.check(&mut target, "beside 64 connections waiting on gaps");
    println!("64 x 600 KiB waiting behind gaps: before: {before}; during: {during}");
    // 64 x 16 KiB + the 4 MiB bound, with room for the allocator.
    assert!(
        during.rss_bytes < before.rss_bytes + (16 << 20),
        "receive buffers are bounded: {before} -> {during}"
    );
    drop(stuffed);
    normal.check(&mut target, "after");
}

/// A memory cgroup of its own for a process the test started, removed
/// (with the process ended first by its owner) when dropped: cgroup v2
/// where the memory controller is on, else v1's memory hierarchy.
struct MemoryCgroup {
    dir: std::path::PathBuf,
    v2: bool,
}

impl MemoryCgroup {
    /// A cgroup limited to `bytes`, or why none can be made here.
    fn new(bytes: u64) -> Result<MemoryCgroup, String> {
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // One per test: the tests of this file run at once.
        let name = format!("isoe-test-{}-{made}", std::process::id());
        let v2_root = std::path::Path::new("/sys/fs/cgroup");
        let v2 = std::fs::read_to_string(v2_root.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let (dir, limit_file) = if v2 {
            (v2_root.join(&name), "memory.max")
        } else {
            (v2_root.join("memory").join(&name), "memory.limit_in_bytes")
        };
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cgroup = MemoryCgroup { dir, v2 };
        std::fs::write(cgroup.dir.join(limit_file), bytes.to_string())
            .map_err(|e| format!("{limit_file}: {e}"))?;
        if !v2 {
            // Swap would hide the bound: none (where swap accounting exists).
            let _ = std::fs::write(
                cgroup.dir.join("memory.memsw.limit_in_bytes"),
                bytes.to_string(),
            );
        }
        Ok(cgroup)
    }

    /// Moves process `pid` into the cgroup, or says why it cannot.
    fn add(&self, pid: u32) -> Result<(), String> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("{}: {e}", self.dir.join("cgroup.procs").display()))
    }

    /// The most the cgroup used, in bytes (memory.peak where the kernel has
    /// it, else the usage now), and how often it hit its limit.
    fn peak_and_failures(&self) -> (u64, u64) {
        let read = |file: &str| {
            std::fs::read_to_string(self.dir.join(file))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        if self.v2 {
            let peak = read("memory.peak")
                .or_else(|| read("memory.current"))
                .unwrap_or(0);
            let events =
                std::fs::read_to_string(self.dir.join("memory.events")).unwrap_or_default();
            let oom = events
                .lines()
                .find_map(|l| l.strip_prefix("oom_kill "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            (peak, oom)
        } else {
            (
                read("memory.max_usage_in_bytes").unwrap_or(0),
                read("memory.failcnt").unwrap_or(0),
            )
        }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Empty once the test's process ended; a retry covers the moment
        // the kernel takes to let it go.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("left behind: {}", self.dir.display());
    }
}

/// The target's peak resident memory (VmHWM).
fn peak_rss(target: &Target) -> u64 {
    let pid = target.pid().expect("target running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

/// A target with a 1 GiB memory LUN in a 1 GiB memory cgroup of its own;
/// `None`, having said why, where none can be made.
fn target_in_a_1_gib_cgroup() -> Option<(MemoryCgroup, Target)> {
    let cgroup = match MemoryCgroup::new(1 << 30) {
        Ok(c) => c,
        Err(why) => {
            println!("skipped: no memory cgroup can be made here ({why})");
            return None;
        }
    };
    let target = target_with("", "1GiB");
    if let Err(why) = cgroup.add(target.pid().expect("running")) {
        println!("skipped: the target cannot join a memory cgroup here ({why})");
        return None;
    }
    Some((cgroup, target))
}

/// Writes the 32 MiB at LBA 0 that the large READs read: what they send
/// is data.
fn write_32_mib(client: &mut Client) {
    for piece in 0..32u64 {
        client.write(0, piece * 2048, &pattern(piece as u32, 1 << 20));
    }
}

#[test]
fn a_burst_of_128_reads_of_32_mib_in_a_1_gib_cgroup_leaves_the_target_serving() {
    let Some((cgroup, mut target)) = target_in_a_1_gib_cgroup() else {
        return;
    };
    let mut normal = Normal::login(&target);
    normal.check(&mut target, "before");
    let mut burst =
        Client::login(target.addr(), &LoginParams::normal(DEFAULT_TARGET)).expect("login");
    burst.ready(0);
    write_32_mib(&mut burst);
    // 128 READs of 32 MiB in one burst, then every byte read.
    request_large_reads(&mut burst, 128);
    let mut got = 0usize;
    let want = 128usize << 25;
    let until = Instant::now() + Duration::from_secs(120);
    while got < want && Instant::now() < until {
        got += burst
            .discard_some(4 << 20, Duration::from_millis(200))
            .expect("read the burst's data");
    }
    let (peak, failures) = cgroup.peak_and_failures();
    println!(
        "128 READs of 32 MiB in a 1 GiB cgroup: {} MiB read; cgroup peak {:.1} MiB, \
         limit hits/OOM kills {failures}",
        got >> 20,
        peak as f64 / (1 << 20) as f64
    );
    target.assert_running("after 128 READs of 32 MiB in a 1 GiB cgroup");
    let peak_rss = peak_rss(&target);
    println!(
        "the target's peak RSS: {:.1} MiB",
        peak_rss as f64 / (1 << 20) as f64
    );
    // The LUN's 32 MiB written, 8 MiB of responses unsent and the one
    // being queued, the next being built: well under what the window asks
    // (4 GiB), whatever the pace of the reads.
    assert!(
        peak_rss < 256 << 20,
        "Data-In held is bounded: peak RSS {} MiB",
        peak_rss >> 20
    );
    assert!(got >= want, "the burst's data came: {got} of {want} bytes");
    normal.check(&mut target, "after the burst");
    drop(burst);
    target.stop();
}

#[test]
fn reads_of_32_mib_on_many_connections_left_unread_hold_one_address_s_share_in_a_1_gib_cgroup() {
    let Some((cgroup, mut target)) = target_in_a_1_gib_cgroup() else {
        return;
    };
    let mut normal = Normal::login(&target);
    write_32_mib(&mut normal.client);
    normal.check(&mut target, "before");
    // 40 connections from a second address, each with one READ of the
    // 32 MiB written, and nothing read: 1.25 GiB of Data-In asked.
    let source = std::net::Ipv4Addr::new(127, 0, 0, 2);
    let mut readers: Vec<Client> = (0..40)
        .map(|i| {
            let mut params = LoginParams::normal(DEFAULT_TARGET);
            params.initiator_name.push_str(&format!("-reader{i}"));
            let mut client = Client::connect_from(target.addr(), source).expect("connect");
            client.do_login(&params).expect("login");
            client.ready(0);
            request_large_reads(&mut client, 1);
            client
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    target.assert_running("with 40 READs of 32 MiB unread");
    normal.check(
        &mut target,
        "beside 40 unread READs of 32 MiB from another address",
    );
    let unread = footprint(&target);
    // Then each reads its data: every one is served in turn.
    let want = 32usize << 20;
    let mut got = vec![0usize; readers.len()];
    let until = Instant::now() + Duration::from_secs(120);
    while got.iter().any(|&g| g < want) && Instant::now() < until {
        for (client, got) in readers.iter_mut().zip(&mut got) {
            if *got < want {
                *got += client
                    .discard_some(8 << 20, Duration::from_millis(5))
                    .expect("read a READ's data");
            }
        }
    }
    let (peak, failures) = cgroup.peak_and_failures();
    let peak_rss = peak_rss(&target);
    println!(
        "40 READs of 32 MiB on 40 connections from 127.0.0.2, unread for 2 s: {unread}; \
         then read: {} of 40 served; cgroup peak {:.1} MiB, limit hits/OOM kills {failures}; \
         the target's peak RSS {:.1} MiB",
        got.iter().filter(|&&g| g >= want).count(),
        peak as f64 / (1 << 20) as f64,
        peak_rss as f64 / (1 << 20) as f64
    );
    target.assert_running("after 40 READs of 32 MiB on 40 connections");
    // The LUN's 32 MiB written, one address's share of the Data-In
    // budget (128 MiB of `response_buffer`'s 256 MiB) and the idle
    // buffers kept for reuse: under half the 1.25 GiB the reads ask for.
    assert!(
        peak_rss < 512 << 20,
        "Data-In held is bounded across connections: peak RSS {} MiB",
        peak_rss >> 20
    );
    assert!(
        got.iter().all(|&g| g >= want),
        "every READ was served once its peer read: {got:?}"
    );
    normal.check(&mut target, "after");
    drop(readers);
    target.stop();
}
