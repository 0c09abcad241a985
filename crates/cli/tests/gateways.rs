//! Two `isoe target` processes (gateways A and B) serving one Ceph RBD image
//! as one logical unit (`scripts/ceph-cluster`; skipped without CEPH_CONF,
//! except under CI): the identity is the image's, data written through one
//! reads back through the other, and a persistent reservation taken through
//! A refuses writes through B, and survives both gateways restarting when
//! taken with APTPL.

mod support;

use support::ceph::Ceph;
use support::{Client, LoginParams, Target, TargetConfig, DEFAULT_TARGET};

const RESERVATION_CONFLICT: u8 = 0x18;
const REGISTER: u8 = 0x00;
const RESERVE: u8 = 0x01;
const WRITE_EXCLUSIVE: u8 = 0x1;
const APTPL: u8 = 0x01;

/// Gateway `tag` of `image`, its one portal on `address`.
fn gateway(ceph: &Ceph, image: &str, tag: u16, address: &str) -> TargetConfig {
    TargetConfig::new(&format!(
        "[[portal_group]]\ntag = {tag}\nportals = [\"{address}:0\"]\n\n\
         [[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\n{}",
        ceph.lun_keys(image, "64MiB")
    ))
}

/// A session of `initiator` through `target`; with `isid`, as the same
/// initiator port (I_T nexus) as an earlier session.
fn login(target: &Target, initiator: &str, isid: Option<[u8; 6]>) -> Client {
    let params = LoginParams {
        initiator_name: initiator.into(),
        ..LoginParams::normal(DEFAULT_TARGET)
    };
    let mut client = Client::connect(target.addr()).expect("connect");
    if let Some(isid) = isid {
        client.isid = isid;
    }
    client.do_login(&params).expect("login");
    client.ready(0);
    client
}

fn prout(client: &mut Client, action: u8, kind: u8, key: u64, action_key: u64, flags: u8) {
    let mut cdb = [0x5f, action, kind, 0, 0, 0, 0, 0, 24, 0];
    cdb[2] = kind;
    let mut parameters = [0u8; 24];
    parameters[0..8].copy_from_slice(&key.to_be_bytes());
    parameters[8..16].copy_from_slice(&action_key.to_be_bytes());
    parameters[20] = flags;
    let result = client.command(0, &cdb, &parameters, 0).expect("PR OUT");
    result.assert_good(&format!("PERSISTENT RESERVE OUT action {action}"));
}

/// READ RESERVATION: the holder's key and the type, if reserved.
fn reservation(client: &mut Client) -> Option<(u64, u8)> {
    let result = client
        .command(0, &[0x5e, 0x01, 0, 0, 0, 0, 0, 0, 0x20, 0], &[], 0x20)
        .expect("PR IN");
    result.assert_good("PERSISTENT RESERVE IN, READ RESERVATION");
    let length = u32::from_be_bytes(result.data[4..8].try_into().unwrap());
    (length >= 16).then(|| {
        let key = u64::from_be_bytes(result.data[8..16].try_into().unwrap());
        (key, result.data[21] & 0x0f)
    })
}

fn write_status(client: &mut Client, byte: u8) -> u8 {
    let block = [byte; 512];
    let cdb = support::client::write16(0, 1);
    client.command(0, &cdb, &block, 0).expect("WRITE").status
}

#[test]
fn a_reservation_through_one_gateway_holds_through_the_other_and_across_restarts() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("gateways");
    let configs = [
        gateway(&ceph, &image, 1, "127.0.0.1"),
        gateway(&ceph, &image, 2, "127.0.0.2"),
    ];
    let mut a = Target::with_config_portals(&configs[0], 1);
    let mut b = Target::with_config_portals(&configs[1], 1);

    let mut owner = login(&a, "iqn.2026-11.io.isoe:owner", None);
    let mut other = login(&b, "iqn.2026-11.io.isoe:other", None);
    let owner_isid = owner.isid;
    // One logical unit: the same serial (VPD 80h) through both.
    let serial = |c: &mut Client| {
        let result = c
            .command(0, &[0x12, 0x01, 0x80, 0, 0xff, 0], &[], 0xff)
            .expect("INQUIRY");
        result.assert_good("INQUIRY VPD 80h");
        result.data[4..].to_vec()
    };
    assert_eq!(serial(&mut owner), serial(&mut other));
    // Data written through B reads back through A.
    let data = support::pattern(7, 4096);
    other.write(0, 64, &data);
    assert!(owner.read(0, 64, 8) == data, "A reads what B wrote");

    prout(&mut owner, REGISTER, 0, 0, 0xa1, APTPL);
    prout(&mut owner, RESERVE, WRITE_EXCLUSIVE, 0xa1, 0, APTPL);
    assert_eq!(
        write_status(&mut other, 1),
        RESERVATION_CONFLICT,
        "B refuses: A reserved"
    );
    assert_eq!(write_status(&mut owner, 2), 0, "the holder writes");
    assert_eq!(reservation(&mut other), Some((0xa1, WRITE_EXCLUSIVE)));
    drop((owner, other));

    // Both gateways go and come back: the reservation persisted (APTPL).
    a.stop_cleanly();
    b.stop_cleanly();
    a.start_again();
    b.start_again();
    let mut other = login(&b, "iqn.2026-11.io.isoe:other", None);
    assert_eq!(reservation(&mut other), Some((0xa1, WRITE_EXCLUSIVE)));
    assert_eq!(
        write_status(&mut other, 3),
        RESERVATION_CONFLICT,
        "after both restarted"
    );
    // The holder is an I_T nexus: the same initiator port through A.
    let mut owner = login(&a, "iqn.2026-11.io.isoe:owner", Some(owner_isid));
    assert_eq!(write_status(&mut owner, 4), 0, "the holder still writes");
}

/// REPORT TARGET PORT GROUPS: (group, state code) of each descriptor.
fn port_groups(client: &mut Client) -> Vec<(u16, u8)> {
    let result = client
        .command(0, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[], 256)
        .expect("REPORT TARGET PORT GROUPS");
    result.assert_good("REPORT TARGET PORT GROUPS");
    let mut groups = Vec::new();
    let mut at = 4;
    while at + 8 <= result.data.len() {
        let d = &result.data[at..];
        groups.push((u16::from_be_bytes([d[2], d[3]]), d[0] & 0x0f));
        at += 8 + 4 * usize::from(d[7]);
    }
    groups
}

/// Polls (TEST UNIT READY, which also takes unit attentions) until the
/// groups read `want`, for at most `seconds`.
fn until_groups(client: &mut Client, want: &[(u16, u8)], seconds: u64) -> Vec<(u16, u8)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        let _ = client.command(0, &[0, 0, 0, 0, 0, 0], &[], 0);
        let groups = port_groups(client);
        if groups == want || std::time::Instant::now() > deadline {
            return groups;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

const AO: u8 = 0x0;
const ANO: u8 = 0x1;
const UNAVAILABLE: u8 = 0x3;
const UNIT_ATTENTION: u8 = 0x06;

#[test]
fn alua_follows_the_gateway_that_holds_the_image() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("alua");
    let a = Target::with_config_portals(&gateway(&ceph, &image, 1, "127.0.0.1"), 1);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let mut through_a = login(&a, "iqn.2026-11.io.isoe:host", None);
    let mut through_b = login(&b, "iqn.2026-11.io.isoe:host", None);

    // The first gateway took the image: group 1 active/optimized, and both
    // gateways list both groups, with explicit ALUA (TPGS = 11b).
    let started = [(1, AO), (2, ANO)];
    assert_eq!(until_groups(&mut through_a, &started, 5), started);
    assert_eq!(until_groups(&mut through_b, &started, 5), started);
    let inquiry = through_b
        .command(0, &[0x12, 0, 0, 0, 96, 0], &[], 96)
        .expect("INQUIRY");
    assert_eq!(inquiry.data[5] & 0x30, 0x30, "TPGS = 11b");

    // SET TARGET PORT GROUPS through B makes B's group active/optimized.
    let stpg = [0, 0, 0, 0, AO, 0, 0, 2];
    let result = through_b
        .command(0, &[0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0], &stpg, 0)
        .expect("SET TARGET PORT GROUPS");
    result.assert_good("SET TARGET PORT GROUPS");
    let moved = [(1, ANO), (2, AO)];
    // Every path hears ASYMMETRIC ACCESS STATE CHANGED.
    let tur = through_a
        .command(0, &[0, 0, 0, 0, 0, 0], &[], 0)
        .expect("TUR");
    assert_eq!(tur.sense_key(), Some(UNIT_ATTENTION));
    assert_eq!((tur.sense[12], tur.sense[13]), (0x2a, 0x06));
    assert_eq!(until_groups(&mut through_a, &moved, 5), moved);
    assert_eq!(until_groups(&mut through_b, &moved, 5), moved);

    // Writes through A move the image's lock to A (librbd's), not the
    // states: B still owns the unit, and nobody hears a unit attention.
    let _ = through_b.command(0, &[0, 0, 0, 0, 0, 0], &[], 0);
    through_a.write(0, 8, &[5; 512]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let tur = through_b
        .command(0, &[0, 0, 0, 0, 0, 0], &[], 0)
        .expect("TUR");
    assert_eq!(tur.status, 0, "no state moved: {:?}", tur.sense);
    assert_eq!(port_groups(&mut through_b), moved);

    // SET TARGET PORT GROUPS through A gives the unit back to A.
    let back = [0, 0, 0, 0, AO, 0, 0, 1];
    let result = through_a
        .command(0, &[0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0], &back, 0)
        .expect("SET TARGET PORT GROUPS");
    result.assert_good("SET TARGET PORT GROUPS");
    assert_eq!(until_groups(&mut through_a, &started, 5), started);
    assert_eq!(until_groups(&mut through_b, &started, 5), started);

    // A state the gateway cannot give is refused.
    let standby = [0, 0, 0, 0, 0x2, 0, 0, 2];
    let refused = through_b
        .command(0, &[0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0], &standby, 0)
        .expect("SET TARGET PORT GROUPS");
    assert_eq!(refused.sense_key(), Some(0x05), "ILLEGAL REQUEST");
}

#[test]
fn a_killed_owner_is_taken_over_and_its_group_leaves_active_optimized() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("takeover");
    let mut a = Target::with_config_portals(&gateway(&ceph, &image, 1, "127.0.0.1"), 1);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let mut through_a = login(&a, "iqn.2026-11.io.isoe:host", None);
    let mut through_b = login(&b, "iqn.2026-11.io.isoe:host", None);
    let data = support::pattern(11, 4096);
    through_a.write(0, 16, &data);
    assert_eq!(
        until_groups(&mut through_b, &[(1, AO), (2, ANO)], 5),
        [(1, AO), (2, ANO)]
    );

    a.kill();
    let started = std::time::Instant::now();
    // The first write through B waits until the cluster lets B break the
    // dead gateway's lock (osd_client_watch_timeout: 10 s in scripts/ceph-cluster).
    through_b.write(0, 32, &support::pattern(12, 4096));
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(30),
        "took over in {waited:?}"
    );
    assert!(
        through_b.read(0, 16, 8) == data,
        "what A acknowledged is there"
    );
    let taken = [(1, ANO), (2, AO)];
    assert_eq!(until_groups(&mut through_b, &taken, 5), taken);
    eprintln!("gateway B took the image over {waited:?} after A was killed");
}

/// Failover across RBD gateways: `isoe bench --verify --multipath` through two
/// gateways of one image, `kill -9` of the owner in the measured window;
/// the I/O goes on through the other gateway within 30 s, no command
/// fails, no read differs from what was acknowledged, and the other
/// gateway takes the unit over (its path becomes active/optimized).
#[test]
fn a_verified_bench_through_two_gateways_survives_kill_9_of_the_owner() {
    use support::bench::{bench_args, num, result, run_bench};
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("failover");
    let configs = [
        gateway(&ceph, &image, 1, "127.0.0.1"),
        gateway(&ceph, &image, 2, "127.0.0.2"),
    ];
    let mut a = Target::with_config_portals(&configs[0], 1);
    let b = Target::with_config_portals(&configs[1], 1);
    let urls: Vec<String> = [&a, &b]
        .iter()
        .map(|t| t.lun_urls(DEFAULT_TARGET, 0).remove(0))
        .collect();
    let json = configs[1].dir().join("run.jsonl");
    let args = bench_args(&urls, "30", &json);
    let bench = std::thread::spawn(move || run_bench(&args, std::time::Duration::from_secs(180)));
    std::thread::sleep(std::time::Duration::from_secs(8));
    a.kill();
    let out = bench.join().expect("the bench thread");
    assert!(out.success(), "{}", out.describe());
    let run = result(&json, &out);
    assert_eq!(num(&run, &["errors"]), 0.0, "{run}");
    assert_eq!(num(&run, &["verify_errors"]), 0.0, "{run}");
    assert!(num(&run, &["verified_reads"]) > 100.0, "{run}");
    let gap = num(&run, &["io_gap_max_s"]);
    assert!(gap < 30.0, "I/O stopped for {gap} s");
    let multipath = &run["multipath"];
    assert!(num(multipath, &["failovers"]) >= 1.0, "{run}");
    assert_eq!(multipath["paths"][0]["status"], "down", "{run}");
    assert_eq!(
        multipath["paths"][1]["alua_state"], "active/optimized",
        "{run}"
    );
    let series = run["series"].as_array().expect("series");
    for second in &series[series.len() - 3..] {
        assert!(
            num(second, &["ios"]) > 0.0,
            "a second without I/O: {second}"
        );
    }
    eprintln!(
        "RBD failover: longest time without an answer {gap:.3} s, {} verified reads, \
         {} reissued, 0 errors, 0 mismatches",
        num(&run, &["verified_reads"]),
        num(multipath, &["reissued"])
    );
}

/// "No stale write from the old owner lands after the new owner has taken
/// over": the owner is frozen (SIGSTOP), as a gateway cut off from the
/// cluster would be; the other gateway's write waits until the cluster
/// drops the frozen one's watch, then breaks its lock, which blocklists it.
/// Thawed, the old owner's writes fail rather than land over the new data.
#[test]
fn a_frozen_owner_is_fenced_and_its_writes_never_land_after_the_takeover() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("fence");
    let a = Target::with_config_portals(&gateway(&ceph, &image, 1, "127.0.0.1"), 1);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let mut through_a = login(&a, "iqn.2026-11.io.isoe:host", None);
    let mut through_b = login(&b, "iqn.2026-11.io.isoe:host", None);
    through_a.write(0, 100, &[0xaa; 512]);

    a.signal(libc::SIGSTOP);
    let started = std::time::Instant::now();
    through_b.write(0, 100, &[0xbb; 512]);
    let waited = started.elapsed();
    a.signal(libc::SIGCONT);
    let thawed = std::time::Instant::now();

    let stale = through_a
        .command(0, &support::client::write16(100, 1), &[0xcc; 512], 0)
        .expect("WRITE through the old owner");
    eprintln!(
        "fenced: B's write waited {waited:?}; A's write after the thaw ended with status {:#04x}, sense {:02x?}",
        stale.status,
        stale.sense.get(..14)
    );
    assert_ne!(stale.status, 0, "the fenced gateway's write was refused");
    // Refused as a path that is unavailable, which a multipath initiator
    // retries through another path, not as a medium error.
    assert_eq!(
        (stale.sense_key(), stale.sense[12], stale.sense[13]),
        (Some(0x02), 0x04, 0x0c),
        "NOT READY, TARGET PORT IN UNAVAILABLE STATE"
    );
    // B took the unit over meanwhile: its initiator hears of it first.
    for _ in 0..3 {
        let tur = through_b.command(0, &[0, 0, 0, 0, 0, 0], &[], 0);
        if tur.is_ok_and(|t| t.status == 0) {
            break;
        }
    }
    assert!(
        through_b.read(0, 100, 1).iter().all(|&x| x == 0xbb),
        "the new owner's data stands"
    );
    // The fenced gateway reports its group unavailable (it heard nothing
    // of the takeover: B's state is B's to report), its unit attentions
    // taken (a TUR refused as unavailable has none left before it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = (None, Err((0, Vec::new())));
    while std::time::Instant::now() < deadline {
        let tur = through_a
            .command(0, &[0, 0, 0, 0, 0, 0], &[], 0)
            .expect("TUR");
        seen = (sense_of(&tur), groups_or_sense(&mut through_a));
        if seen.0 == Some((0x02, 0x04, 0x0c))
            && seen.1.as_ref().is_ok_and(|g| g.contains(&(1, UNAVAILABLE)))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(seen.0, Some((0x02, 0x04, 0x0c)), "A unavailable: {seen:?}");
    assert!(
        seen.1.as_ref().is_ok_and(|g| g.contains(&(1, UNAVAILABLE))),
        "A's groups: {seen:?}"
    );

    // Then it reconnects with a new client by itself and serves again:
    // active/non-optimized (B owns the unit now), its initiator told, the
    // data B wrote read through it.
    let fenced = std::time::Instant::now();
    let back = [(1, ANO), (2, AO)];
    let (groups, heard) = until_back(&mut through_a, &back, 30);
    let took = fenced.elapsed();
    assert_eq!(groups, Ok(back.to_vec()), "A back in service within 30 s");
    assert!(heard, "ASYMMETRIC ACCESS STATE CHANGED through A");
    assert!(
        through_a.read(0, 100, 1).iter().all(|&x| x == 0xbb),
        "A reads what B wrote"
    );
    through_a.write(0, 101, &[0xdd; 512]);
    // B's own takeover may still be unheard through B.
    through_b.ready(0);
    assert!(
        through_b.read(0, 101, 1).iter().all(|&x| x == 0xdd),
        "B reads what A wrote"
    );
    eprintln!(
        "fenced gateway back in service {took:?} after it was seen unavailable, {:?} after its thaw",
        thawed.elapsed()
    );
}

/// (sense key, ASC, ASCQ) of a command that ended in CHECK CONDITION.
fn sense_of(result: &support::client::ScsiResult) -> Option<(u8, u8, u8)> {
    Some((
        result.sense_key()?,
        *result.sense.get(12)?,
        *result.sense.get(13)?,
    ))
}

/// Polls (TEST UNIT READY, REPORT TARGET PORT GROUPS) until the groups
/// read `want` and a TUR is GOOD, for at most `seconds`: the last groups,
/// and whether ASYMMETRIC ACCESS STATE CHANGED (06/2A/06) was heard.
fn until_back(client: &mut Client, want: &[(u16, u8)], seconds: u64) -> (Groups, bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut heard = false;
    loop {
        let tur = client.command(0, &[0, 0, 0, 0, 0, 0], &[], 0).expect("TUR");
        heard |= sense_of(&tur) == Some((UNIT_ATTENTION, 0x2a, 0x06));
        let groups = groups_or_sense(client);
        if let Err((_, sense)) = &groups {
            heard |= sense.get(2).map(|k| k & 0x0f) == Some(UNIT_ATTENTION)
                && sense.get(12..14) == Some(&[0x2a, 0x06][..]);
        }
        let done = tur.status == 0 && groups.as_deref().ok() == Some(want);
        if done || std::time::Instant::now() > deadline {
            return (groups, heard);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `isoe admin lun add ... rbd=POOL/IMAGE`: the image is created with the
/// size given, served at once (data written through the new LUN is in the
/// image: another gateway serving it from its file reads it back, and
/// reports the same serial), and the LUN is written back to the file.
#[test]
fn an_rbd_lun_added_by_the_administrator_serves_the_image() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("admin");
    let config = TargetConfig::new("");
    let socket = config.dir().join("control.sock");
    std::fs::write(
        config.path(),
        format!(
            "[control]\nsocket = \"{}\"\n\n\
             [[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\n\n\
             [[target]]\nname = \"{DEFAULT_TARGET}\"\n\n\
             [[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let a = Target::with_config_portals(&config, 1);
    let mut args = vec![
        "admin".to_string(),
        "--socket".into(),
        socket.display().to_string(),
        "lun".into(),
        "add".into(),
        DEFAULT_TARGET.into(),
        "1".into(),
        format!("rbd={}/{image}", ceph.pool),
        "size=64MiB".into(),
        format!("ceph_conf={}", ceph.conf.display()),
        format!("ceph_id={}", ceph.id),
    ];
    if let Some(keyring) = &ceph.keyring {
        args.push(format!("ceph_keyring={}", keyring.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = support::cli::isoe(&args);
    assert!(out.success(), "isoe admin lun add: {}", out.describe());
    let written = std::fs::read_to_string(config.path()).unwrap();
    assert!(
        written.contains(&format!("rbd = \"{}/{image}\"", ceph.pool)),
        "the LUN is written back to the file:\n{written}"
    );

    let mut through_a = login(&a, "iqn.2026-11.io.isoe:host", None);
    through_a.ready(1);
    through_a.write(1, 7, &[0x5a; 512]);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let mut through_b = login(&b, "iqn.2026-11.io.isoe:host", None);
    assert!(
        through_b.read(0, 7, 1).iter().all(|&x| x == 0x5a),
        "what A wrote through the added LUN is in the image"
    );
    let serial = |client: &mut Client, lun: u16| {
        let page = client
            .command(lun, &[0x12, 0x01, 0x80, 0, 255, 0], &[], 255)
            .expect("INQUIRY VPD 80h");
        page.assert_good("INQUIRY VPD 80h");
        page.data[4..].to_vec()
    };
    assert_eq!(
        serial(&mut through_a, 1),
        serial(&mut through_b, 0),
        "one logical unit: the serial is the image's"
    );
}

/// PERSISTENT RESERVE OUT through `client`: its status.
fn prout_status(
    client: &mut Client,
    action: u8,
    kind: u8,
    key: u64,
    action_key: u64,
    flags: u8,
) -> u8 {
    let mut parameters = [0u8; 24];
    parameters[0..8].copy_from_slice(&key.to_be_bytes());
    parameters[8..16].copy_from_slice(&action_key.to_be_bytes());
    parameters[20] = flags;
    let cdb = [0x5f, action, kind, 0, 0, 0, 0, 0, 24, 0];
    client
        .command(0, &cdb, &parameters, 0)
        .expect("PR OUT")
        .status
}

/// PERSISTENT RESERVE IN, READ KEYS: every registered key, once per I_T nexus.
fn read_keys(client: &mut Client) -> Vec<u64> {
    let result = client
        .command(0, &[0x5e, 0x00, 0, 0, 0, 0, 0, 0x10, 0x00, 0], &[], 0x1000)
        .expect("PR IN");
    result.assert_good("PERSISTENT RESERVE IN, READ KEYS");
    let length = u32::from_be_bytes(result.data[4..8].try_into().unwrap()) as usize;
    result.data[8..8 + length]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

const ALL_TG_PT: u8 = 0x04;

/// One initiator port (same name, same ISID) logged in through gateway A
/// (port 1) and gateway B (port 2): a registration with ALL_TG_PT through A
/// registers it through B as well, and the reservation, the key change and
/// the unregistration are one state through both gateways. The holder is
/// the I_T nexus the RESERVE came through (SPC-5 5.13.10), on both.
#[test]
fn an_all_target_ports_registration_through_one_gateway_holds_through_the_other() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("all-tg-pt");
    let a = Target::with_config_portals(&gateway(&ceph, &image, 1, "127.0.0.1"), 1);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let isid = [0x80, 0, 0, 0, 0x21, 0x43];
    let mut through_a = login(&a, "iqn.2026-11.io.isoe:port", Some(isid));
    let mut through_b = login(&b, "iqn.2026-11.io.isoe:port", Some(isid));
    // A knows B's group, and so its port, before it registers.
    let started = [(1, AO), (2, ANO)];
    assert_eq!(until_groups(&mut through_a, &started, 5), started);
    assert_eq!(until_groups(&mut through_b, &started, 5), started);
    const KEY: u64 = 0x7e57_0001;

    assert_eq!(
        prout_status(&mut through_a, REGISTER, 0, 0, KEY, ALL_TG_PT),
        0
    );
    assert_eq!(read_keys(&mut through_b), [KEY, KEY], "one per target port");
    assert_eq!(
        prout_status(&mut through_b, RESERVE, WRITE_EXCLUSIVE, KEY, 0, 0),
        0,
        "RESERVE through B with the key registered through A"
    );
    assert_eq!(reservation(&mut through_a), Some((KEY, WRITE_EXCLUSIVE)));
    assert_eq!(
        write_status(&mut through_b, 1),
        0,
        "the holder writes through B"
    );
    assert_eq!(
        write_status(&mut through_a, 2),
        RESERVATION_CONFLICT,
        "through A the same initiator port is a registrant, not the holder"
    );

    // A key change through B is seen through A; the holder stays B's nexus.
    assert_eq!(
        prout_status(&mut through_b, REGISTER, 0, KEY, KEY + 1, 0),
        0
    );
    assert_eq!(read_keys(&mut through_a), [KEY + 1, KEY + 1]);
    assert_eq!(
        reservation(&mut through_a),
        Some((KEY + 1, WRITE_EXCLUSIVE))
    );
    assert_eq!(
        write_status(&mut through_b, 3),
        0,
        "still the holder through B"
    );
    assert_eq!(write_status(&mut through_a, 4), RESERVATION_CONFLICT);

    // Unregistering through A unregisters through both, and releases.
    assert_eq!(prout_status(&mut through_a, REGISTER, 0, KEY + 1, 0, 0), 0);
    assert!(
        read_keys(&mut through_b).is_empty(),
        "no key left through B"
    );
    assert_eq!(reservation(&mut through_b), None);
    assert_eq!(write_status(&mut through_a, 5), 0, "released");
}

const TRANSITIONING: u8 = 0xf;

/// REPORT TARGET PORT GROUPS as (group, state code), or the status and
/// sense of a command that was not GOOD (a unit attention first).
type Groups = Result<Vec<(u16, u8)>, (u8, Vec<u8>)>;

/// REPORT TARGET PORT GROUPS through `client` (see [`Groups`]).
fn groups_or_sense(client: &mut Client) -> Groups {
    let result = client
        .command(0, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[], 256)
        .expect("REPORT TARGET PORT GROUPS");
    if result.status != 0 {
        return Err((result.status, result.sense));
    }
    let mut groups = Vec::new();
    let mut at = 4;
    while at + 8 <= result.data.len() {
        let d = &result.data[at..];
        groups.push((u16::from_be_bytes([d[2], d[3]]), d[0] & 0x0f));
        at += 8 + 4 * usize::from(d[7]);
    }
    Ok(groups)
}

/// The supported-states byte of group `id` in REPORT TARGET PORT GROUPS.
fn supported_states(client: &mut Client, id: u16) -> u8 {
    let result = client
        .command(0, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[], 256)
        .expect("REPORT TARGET PORT GROUPS");
    result.assert_good("REPORT TARGET PORT GROUPS");
    let mut at = 4;
    while at + 8 <= result.data.len() {
        let d = &result.data[at..];
        if u16::from_be_bytes([d[2], d[3]]) == id {
            return d[1];
        }
        at += 8 + 4 * usize::from(d[7]);
    }
    panic!("no group {id}: {:02x?}", result.data);
}

/// SET TARGET PORT GROUPS through B while A, the owner, is frozen: B must
/// wait until the cluster lets it break A's lock (its watch timeout), and
/// meanwhile B's group is transitioning (Fh) as B reports it, its commands
/// end in NOT READY, ASYMMETRIC ACCESS STATE TRANSITION (02/04/0A), and
/// T_SUP says so. Then B owns the unit: active/optimized.
#[test]
fn a_gateway_taking_the_unit_over_reports_its_group_transitioning() {
    let Some(ceph) = Ceph::from_env() else {
        return;
    };
    let image = ceph.fresh_image("transition");
    let a = Target::with_config_portals(&gateway(&ceph, &image, 1, "127.0.0.1"), 1);
    let b = Target::with_config_portals(&gateway(&ceph, &image, 2, "127.0.0.2"), 1);
    let mut asks = login(&b, "iqn.2026-11.io.isoe:asks", None);
    let mut watches = login(&b, "iqn.2026-11.io.isoe:watches", None);
    let started = [(1, AO), (2, ANO)];
    assert_eq!(until_groups(&mut watches, &started, 5), started);
    assert_eq!(supported_states(&mut watches, 2) & 0x80, 0x80, "T_SUP");

    a.signal(libc::SIGSTOP);
    let stpg = std::thread::spawn(move || {
        let result = asks
            .command(
                0,
                &[0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0],
                &[0, 0, 0, 0, AO, 0, 0, 2],
                0,
            )
            .expect("SET TARGET PORT GROUPS");
        (result.status, result.sense)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = groups_or_sense(&mut watches);
    while seen != Ok(vec![(1, AO), (2, TRANSITIONING)]) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = groups_or_sense(&mut watches);
    }
    let tur = watches
        .command(0, &[0, 0, 0, 0, 0, 0], &[], 0)
        .expect("TUR");
    let (status, sense) = stpg.join().expect("the SET TARGET PORT GROUPS thread");
    a.signal(libc::SIGCONT);
    assert_eq!(
        seen,
        Ok(vec![(1, AO), (2, TRANSITIONING)]),
        "during the takeover"
    );
    assert_eq!(
        (tur.sense_key(), tur.sense.get(12), tur.sense.get(13)),
        (Some(0x02), Some(&0x04), Some(&0x0a)),
        "TUR while transitioning: {tur:?}"
    );
    assert_eq!(status, 0, "SET TARGET PORT GROUPS: {sense:02x?}");
    let taken = [(1, ANO), (2, AO)];
    assert_eq!(until_groups(&mut watches, &taken, 5), taken);
}
