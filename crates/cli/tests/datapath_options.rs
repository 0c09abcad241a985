//! `isoe target` with each `[datapath]` option off, over real sockets: data
//! written every way reads back identical, digests computed by the target
//! (with the software CRC32C too) check out at the initiator, and `isoe
//! bench --verify` finds nothing wrong with many commands in flight. The
//! configurations come from the lab's knobs, so the lab and the target
//! agree on the table.

mod support;

use isoe_lab::knobs::{CrcImpl, KnobSet};
use std::net::SocketAddr;
use std::process::Command;
use support::client::{read16, Client, LoginParams, BLOCK_SIZE};
use support::{first_difference, pattern, Target, TargetConfig, DEFAULT_TARGET};

/// Each option off alone, then all three together.
fn cases() -> Vec<(&'static str, KnobSet)> {
    let off = |change: fn(&mut KnobSet)| {
        let mut k = KnobSet::default();
        change(&mut k);
        k
    };
    vec![
        ("batching off", off(|k| k.batching = Some(false))),
        ("software CRC", off(|k| k.crc = Some(CrcImpl::Software))),
        ("buffer pool off", off(|k| k.buffer_pool = Some(false))),
        (
            "all off",
            off(|k| {
                k.batching = Some(false);
                k.crc = Some(CrcImpl::Software);
                k.buffer_pool = Some(false);
            }),
        ),
    ]
}

/// A memory LUN with the knobs' `[datapath]` table appended, as the lab's
/// runner appends it.
fn config(knobs: &KnobSet) -> TargetConfig {
    let table = knobs.target_datapath_toml();
    assert!(table.starts_with("[datapath]\n"), "{table}");
    TargetConfig::new(&format!(
        "portals = [\"127.0.0.1:0\"]\n\n[[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n{table}"
    ))
}

/// The target's line about its datapath, printed before "listening on".
fn datapath_line(target: &Target) -> Option<String> {
    // The test support records a line before it reads the next, so a line
    // printed before "listening on" is in the output once the target is up.
    let said = target.output();
    let line = said
        .lines()
        .find(|l| l.starts_with("isoe target: datapath "))?;
    Some(line.to_string())
}

fn login(addr: SocketAddr, change: impl FnOnce(&mut LoginParams)) -> Client {
    let mut p = LoginParams::normal(DEFAULT_TARGET);
    change(&mut p);
    let mut client = Client::login(addr, &p).unwrap_or_else(|e| panic!("login with {p:?}: {e}"));
    client.ready(0);
    client
}

fn assert_same(what: &str, expected: &[u8], actual: &[u8]) {
    if let Some(difference) = first_difference(expected, actual) {
        panic!("{what}: read back differs from what was written: {difference}");
    }
}

/// Writes by immediate data, by R2T, and with digests in 4 KiB segments,
/// then reads all of it back with and without digests in 64 KiB Data-Ins.
fn round_trip(case: &str, addr: SocketAddr) {
    let mut writes: Vec<(&str, u64, Vec<u8>)> = Vec::new();

    let mut s = login(addr, |_| {});
    let small = pattern(31, 8 * BLOCK_SIZE);
    s.write(0, 0, &small);
    writes.push(("4 KiB immediate data", 0, small));
    let big = pattern(32, 1 << 20);
    let r = s.write(0, 2048, &big);
    assert!(r.r2ts >= 1, "{case}: 1 MiB needs R2Ts");
    writes.push(("1 MiB immediate + R2T", 2048, big));

    let mut s = login(addr, |p| {
        p.header_digest = true;
        p.data_digest = true;
        p.max_recv_data_segment_length = 4096;
    });
    assert!(
        s.negotiated.header_digest && s.negotiated.data_digest,
        "{case}: digests negotiated"
    );
    let digested = pattern(33, 300 << 10);
    s.write(0, 8192, &digested);
    assert_same(
        &format!("{case}: 300 KiB with digests, same session"),
        &digested,
        &s.read(0, 8192, (digested.len() / BLOCK_SIZE) as u32),
    );
    writes.push(("300 KiB with CRC32C digests", 8192, digested));

    for digests in [false, true] {
        let mut s = login(addr, |p| {
            p.max_recv_data_segment_length = 65_536;
            p.header_digest = digests;
            p.data_digest = digests;
        });
        for (what, lba, data) in &writes {
            let blocks = (data.len() / BLOCK_SIZE) as u32;
            let r = s
                .command(0, &read16(*lba, blocks), &[], data.len() as u32)
                .expect("READ(16)");
            r.assert_good(what);
            assert_same(
                &format!("{case}: {what} (digests {digests})"),
                data,
                &r.data,
            );
            assert!(r.data_in_pdus >= data.len().div_ceil(65_536) as u32);
        }
    }
}

/// `isoe bench --verify`: 32 commands in flight, half writes, with digests.
fn bench_verify(case: &str, target: &Target) {
    let url = target.lun_url(DEFAULT_TARGET, 0);
    let out = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args([
            "bench",
            &url,
            "--bs",
            "8k",
            "--read-pct",
            "50",
            "--random-pct",
            "100",
            "--qd",
            "32",
            "--duration",
            "1.5",
            "--ramp",
            "0.2",
            "--header-digest",
            "--data-digest",
            "--verify",
            "--no-progress",
            "--json",
            "-",
        ])
        .output()
        .expect("run isoe bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{case}: bench failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{case}: not JSON ({e}): {stdout}"));
    assert_eq!(run["verify_errors"].as_f64(), Some(0.0), "{case}: {run}");
    assert_eq!(run["errors"].as_f64(), Some(0.0), "{case}: {run}");
    assert!(
        run["read"]["ios"].as_f64().unwrap_or(0.0) > 100.0
            && run["write"]["ios"].as_f64().unwrap_or(0.0) > 100.0,
        "{case}: reads and writes ran: {run}"
    );
}

#[test]
fn each_datapath_option_off_keeps_data_and_digests_right() {
    for (case, knobs) in cases() {
        let config = config(&knobs);
        let mut target = Target::with_config(&config);
        // The target says which datapath it runs, so that a slow run is not
        // mistaken for the default one.
        let line = datapath_line(&target)
            .unwrap_or_else(|| panic!("{case}: no datapath line in:\n{}", target.output()));
        for (knob, value) in knobs.describe() {
            assert!(
                line.contains(&format!("{knob} {value}")),
                "{case}: {line:?} lacks {knob} {value}"
            );
        }
        round_trip(case, target.addr());
        bench_verify(case, &target);
        target.assert_running(case);
        target.stop_cleanly();
    }
}

#[test]
fn the_default_datapath_says_nothing() {
    let target = Target::with_config(&TargetConfig::memory_lun("16MiB"));
    let mut client = Client::login_normal(target.addr(), DEFAULT_TARGET);
    client.ready(0);
    assert_eq!(datapath_line(&target), None, "{}", target.output());
}
