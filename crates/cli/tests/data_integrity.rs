//! Data written through one session reads back identical through another,
//! over every write path the target offers (immediate data, unsolicited
//! Data-Out, R2T-solicited Data-Out, digests), on the memory and the file
//! store, and on the file store across a restart of the target.

mod support;

use std::net::SocketAddr;
use support::client::{Client, LoginParams, BLOCK_SIZE};
use support::{first_difference, pattern, Target, TargetConfig, DEFAULT_TARGET};

/// One write a scenario performs, kept to be read back.
struct Written {
    what: &'static str,
    lba: u64,
    data: Vec<u8>,
}

fn params(change: impl FnOnce(&mut LoginParams)) -> LoginParams {
    let mut p = LoginParams::normal(DEFAULT_TARGET);
    change(&mut p);
    p
}

fn login(addr: SocketAddr, p: &LoginParams) -> Client {
    let mut client = Client::login(addr, p).unwrap_or_else(|e| panic!("login with {p:?}: {e}"));
    client.ready(0);
    client
}

/// Writes through four sessions, one per write path; returns what was written.
fn write_every_way(addr: SocketAddr) -> Vec<Written> {
    let mut written = Vec::new();

    // Defaults: ImmediateData=Yes, InitialR2T=No, FirstBurstLength 256 KiB.
    let mut s = login(addr, &LoginParams::normal(DEFAULT_TARGET));
    let small = pattern(1, 8 * BLOCK_SIZE);
    let r = s.write(0, 0, &small);
    assert_eq!(
        r.r2ts, 0,
        "a 4 KiB write fits in immediate data and needs no R2T"
    );
    written.push(Written {
        what: "4 KiB immediate data",
        lba: 0,
        data: small,
    });

    // 1 MiB > FirstBurstLength: immediate data, then R2T-solicited Data-Out.
    let big = pattern(2, 1 << 20);
    let r = s.write(0, 2048, &big);
    assert!(
        r.r2ts >= 1,
        "a 1 MiB write beyond FirstBurstLength needs R2Ts, got {}",
        r.r2ts
    );
    written.push(Written {
        what: "1 MiB immediate + R2T",
        lba: 2048,
        data: big,
    });
    assert_eq!(s.logout().expect("logout"), 0);

    // ImmediateData=No, InitialR2T=Yes, MaxBurstLength 64 KiB: R2Ts only, many of them.
    let mut s = login(
        addr,
        &params(|p| {
            p.immediate_data = false;
            p.initial_r2t = true;
            p.first_burst_length = 65_536;
            p.max_burst_length = 65_536;
        }),
    );
    assert!(
        !s.negotiated.immediate_data && s.negotiated.initial_r2t,
        "negotiated {:?}",
        s.negotiated
    );
    let solicited = pattern(3, 1 << 20);
    let r = s.write(0, 8192, &solicited);
    assert!(
        r.r2ts >= 16,
        "1 MiB in bursts of at most 64 KiB needs at least 16 R2Ts, got {}",
        r.r2ts
    );
    written.push(Written {
        what: "1 MiB R2T only",
        lba: 8192,
        data: solicited,
    });

    // ImmediateData=No, InitialR2T=No: unsolicited Data-Out up to FirstBurstLength, then R2Ts.
    let mut s = login(
        addr,
        &params(|p| {
            p.immediate_data = false;
            p.initial_r2t = false;
        }),
    );
    let unsolicited = pattern(4, 512 << 10);
    s.write(0, 12_288, &unsolicited);
    written.push(Written {
        what: "512 KiB unsolicited Data-Out",
        lba: 12_288,
        data: unsolicited,
    });

    // Header and data digests, small segments both ways.
    let mut s = login(
        addr,
        &params(|p| {
            p.header_digest = true;
            p.data_digest = true;
            p.max_recv_data_segment_length = 4096;
        }),
    );
    assert!(
        s.negotiated.header_digest && s.negotiated.data_digest,
        "digests not negotiated: {:?}",
        s.negotiated
    );
    let digested = pattern(5, 300 << 10);
    s.write(0, 16_384, &digested);
    let back = s.read(0, 16_384, (digested.len() / BLOCK_SIZE) as u32);
    assert_same(
        "300 KiB with CRC32C digests, read on the writing session",
        &digested,
        &back,
    );
    written.push(Written {
        what: "300 KiB with CRC32C digests",
        lba: 16_384,
        data: digested,
    });
    written
}

fn assert_same(what: &str, expected: &[u8], actual: &[u8]) {
    if let Some(difference) = first_difference(expected, actual) {
        panic!("{what}: read back differs from what was written: {difference}");
    }
}

/// Reads every write back through a new session whose MaxRecvDataSegmentLength
/// is smaller than the reads, so each read arrives in several Data-In PDUs.
fn read_back(addr: SocketAddr, written: &[Written]) {
    for digests in [false, true] {
        let mut s = login(
            addr,
            &params(|p| {
                p.max_recv_data_segment_length = 65_536;
                p.header_digest = digests;
                p.data_digest = digests;
            }),
        );
        for w in written {
            let blocks = (w.data.len() / BLOCK_SIZE) as u32;
            let r = s
                .command(
                    0,
                    &support::client::read16(w.lba, blocks),
                    &[],
                    w.data.len() as u32,
                )
                .expect("READ(16)");
            r.assert_good(w.what);
            assert_same(&format!("{} (digests {digests})", w.what), &w.data, &r.data);
            let min_pdus = w.data.len().div_ceil(65_536) as u32;
            assert!(
                r.data_in_pdus >= min_pdus,
                "{}: {} bytes came in {} Data-In PDUs, more than our MaxRecvDataSegmentLength 65536 allows",
                w.what,
                w.data.len(),
                r.data_in_pdus
            );
            assert!(
                !r.residual.overflow && !r.residual.underflow,
                "{}: unexpected residual {:?}",
                w.what,
                r.residual
            );
        }
        // Blocks never written read as zeros.
        let zeros = s.read(0, 100_000, 16);
        assert!(
            zeros.iter().all(|&b| b == 0),
            "unwritten blocks at LBA 100000 are not zero"
        );
    }
}

#[test]
fn memory_store_round_trip_across_sessions() {
    let config = TargetConfig::memory_lun("64MiB");
    let mut target = Target::with_config(&config);
    let written = write_every_way(target.addr());
    read_back(target.addr(), &written);
    target.assert_running("after the round trip");
}

#[test]
fn embedded_default_target_round_trip() {
    let mut target = Target::start();
    let mut writer = Client::login_normal(target.addr(), DEFAULT_TARGET);
    writer.ready(0);
    // Near the end of the 1 GiB LUN: 2097152 blocks, write the last 256.
    let data = pattern(9, 256 * BLOCK_SIZE);
    writer.write(0, 2_097_152 - 256, &data);
    let mut reader = Client::login_normal(target.addr(), DEFAULT_TARGET);
    reader.ready(0);
    assert_same(
        "last 128 KiB of the default LUN",
        &data,
        &reader.read(0, 2_097_152 - 256, 256),
    );
    target.assert_running("after the round trip");
}

#[test]
fn file_store_round_trip_and_restart() {
    let config = TargetConfig::file_lun("64MiB");
    let mut target = Target::with_config(&config);
    let written = write_every_way(target.addr());
    read_back(target.addr(), &written);

    // SIGTERM: the target syncs its stores and exits 0.
    target.stop_cleanly();
    let file = std::fs::read(config.lun_file()).expect("read the LUN's backing file");
    assert_eq!(file.len(), 64 << 20, "backing file size");
    for w in &written {
        let at = w.lba as usize * BLOCK_SIZE;
        assert_same(
            &format!("{} (backing file at byte {at})", w.what),
            &w.data,
            &file[at..at + w.data.len()],
        );
    }

    // The same configuration again: the data is still there.
    target.restart();
    read_back(target.addr(), &written);
    target.assert_running("after the restart");
}

/// ARCHITECTURE.md: a write answered GOOD after FUA or SYNCHRONIZE CACHE is
/// on the file store and survives `kill -9` of the target.
#[test]
fn file_store_keeps_synced_and_fua_writes_across_kill_9() {
    let config = TargetConfig::file_lun("16MiB");
    let mut target = Target::with_config(&config);
    let mut s = Client::login_normal(target.addr(), DEFAULT_TARGET);
    s.ready(0);

    let synced = pattern(21, 256 << 10);
    s.write(0, 1000, &synced);
    // SYNCHRONIZE CACHE (10) of the whole unit (SBC-4 5.22).
    let r = s
        .command(0, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[], 0)
        .expect("SYNCHRONIZE CACHE");
    r.assert_good("SYNCHRONIZE CACHE (10)");

    let fua = pattern(22, 64 << 10);
    let mut cdb = support::client::write16(3000, (fua.len() / BLOCK_SIZE) as u32);
    cdb[1] |= 0x08; // FUA (SBC-4 5.40)
    let r = s.command(0, &cdb, &fua, 0).expect("WRITE(16) FUA");
    r.assert_good("WRITE(16) with FUA");

    target.kill();
    target.start_again();
    let mut s = login(target.addr(), &LoginParams::normal(DEFAULT_TARGET));
    assert_same(
        "synced write after kill -9",
        &synced,
        &s.read(0, 1000, (synced.len() / BLOCK_SIZE) as u32),
    );
    assert_same(
        "FUA write after kill -9",
        &fua,
        &s.read(0, 3000, (fua.len() / BLOCK_SIZE) as u32),
    );
}
