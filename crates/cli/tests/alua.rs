//! ALUA end to end: `isoe target` serving one LUN through three portal
//! groups, on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (ephemeral ports), in the
//! three states a multipath initiator tells apart: 1 active/optimized and
//! preferred, 2 active/non-optimized, 3 standby.
//!
//! `sg_rtpg` needs a SCSI device node, which a user-space initiator does
//! not make, so REPORT TARGET PORT GROUPS goes through isoe's own initiator
//! library, on one session per portal; what each path says of itself in
//! VPD page 83h is checked in the bytes, decoded by sg3_utils' `sg_vpd
//! --inhex` (when installed) and shown by libiscsi's `iscsi-inq`.

mod support;

use isoe_initiator::cdb;
use isoe_initiator::{Command, Engine, IscsiUrl, Portal, RetryPolicy, SessionConfig};
use std::net::SocketAddr;
use std::time::Duration;
use support::{cli, tools, Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:alua";

/// (tag, ASYMMETRIC ACCESS STATE, PREF) of the three groups, in file order.
const GROUPS: [(u16, u8, bool); 3] = [(1, 0x0, true), (2, 0x1, false), (3, 0x2, false)];

fn start() -> (TargetConfig, Target) {
    let config = TargetConfig::new(&format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\npreferred = true\n\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.2:0\"]\n\
         alua_state = \"active/non-optimized\"\n\n\
         [[portal_group]]\ntag = 3\nportals = [\"127.0.0.3:0\"]\nalua_state = \"standby\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n"
    ));
    let target = Target::with_config_portals(&config, 3);
    (config, target)
}

/// A session through `addr`, on `engine`.
fn login(engine: &mut Engine, addr: SocketAddr, isid: u8) -> usize {
    let url = IscsiUrl::parse(&format!("iscsi://{addr}/{TARGET}/0")).expect("a URL");
    let mut config = SessionConfig::from_url(&url);
    config.portal = Portal {
        host: addr.ip().to_string(),
        port: addr.port(),
    };
    config.initiator_name = "iqn.2026-11.io.isoe:alua-test".into();
    config.isid = [0x80, 0, 0, 0, 0x0a, isid];
    config.retry = RetryPolicy {
        attempts: 0,
        ..RetryPolicy::default()
    };
    config.timeout = Duration::from_secs(20);
    engine.login(config).expect("login")
}

/// Runs a command with data in; returns (status, sense key/ASC/ASCQ, data).
fn run(engine: &mut Engine, s: usize, cdb: &[u8]) -> (u8, Option<(u8, u8, u8)>, Vec<u8>) {
    let done = engine
        .execute(s, Command::read(0, cdb, 4096))
        .expect("a command completes");
    let isoe_initiator::Outcome::Scsi(status) = &done.outcome else {
        panic!("{cdb:02x?}: {:?}", done.outcome);
    };
    let data = done.buffer[..status.data_in_len as usize].to_vec();
    (status.status, status.sense_key(), data)
}

fn rtpg(format: u8) -> [u8; 12] {
    let mut cdb = [0u8; 12];
    cdb[0] = 0xa3;
    cdb[1] = format << 5 | 0x0a;
    cdb[6..10].copy_from_slice(&4096u32.to_be_bytes());
    cdb
}

/// The target port group descriptors of REPORT TARGET PORT GROUPS data as
/// (state, PREF, supported bits, group, relative ports), checking the
/// header of `format` and the RETURN DATA LENGTH.
fn groups_in(data: &[u8], format: u8) -> Vec<(u8, bool, u8, u16, Vec<u16>)> {
    let length = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    assert_eq!(length + 4, data.len(), "RETURN DATA LENGTH: {data:02x?}");
    let mut at = 4;
    if format == 1 {
        assert_eq!(data[4] & 0x70, 0x10, "FORMAT TYPE 001b");
        at = 8;
    }
    let mut groups = Vec::new();
    while at < data.len() {
        let d = &data[at..];
        let count = usize::from(d[7]);
        let ports = (0..count)
            .map(|i| u16::from_be_bytes([d[8 + 4 * i + 2], d[8 + 4 * i + 3]]))
            .collect();
        groups.push((
            d[0] & 0x0f,
            d[0] & 0x80 != 0,
            d[1],
            u16::from_be_bytes([d[2], d[3]]),
            ports,
        ));
        at += 8 + 4 * count;
    }
    assert_eq!(at, data.len(), "descriptors fill the data");
    groups
}

/// (designator type, designator) of each designator of VPD page 83h.
fn designators(page: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut found = Vec::new();
    let mut at = 4;
    while at + 4 <= page.len() {
        let length = usize::from(page[at + 3]);
        found.push((page[at + 1] & 0x0f, page[at + 4..at + 4 + length].to_vec()));
        at += 4 + length;
    }
    found
}

#[test]
fn each_path_reports_its_own_port_and_every_group() {
    let (config, mut target) = start();
    let addrs = target.addrs().to_vec();
    assert_eq!(addrs.len(), 3);
    let mut engine = Engine::new();
    let expected: Vec<_> = GROUPS
        .iter()
        .map(|&(tag, state, pref)| (state, pref, 1u8 << state, tag, vec![tag]))
        .collect();
    for (i, &(tag, _, _)) in GROUPS.iter().enumerate() {
        let s = login(&mut engine, addrs[i], tag as u8);
        let params = engine.params(s).expect("a session");
        assert_eq!(
            params.target_portal_group_tag,
            Some(tag),
            "TargetPortalGroupTag through {}",
            addrs[i]
        );

        let (status, _, standard) = run(&mut engine, s, &cdb::inquiry(None, 96));
        assert_eq!(status, 0);
        assert_eq!(standard[5] >> 4 & 0x03, 0b01, "TPGS: implicit ALUA");
        assert_eq!(standard[6] & 0x10, 0x10, "MULTIP: three target ports");

        let (status, _, page) = run(&mut engine, s, &cdb::inquiry(Some(0x83), 512));
        assert_eq!(status, 0, "INQUIRY is served in every state");
        let found = designators(&page);
        let port_name = format!("{TARGET},t,0x{tag:04x}");
        let value = |kind: u8| {
            found
                .iter()
                .find(|d| d.0 == kind)
                .unwrap_or_else(|| panic!("designator type {kind} in {found:02x?}"))
                .1
                .clone()
        };
        assert!(
            value(8).starts_with(port_name.as_bytes()),
            "SCSI name string"
        );
        let [high, low] = tag.to_be_bytes();
        assert_eq!(value(4), [0, 0, high, low], "relative target port");
        assert_eq!(value(5), [0, 0, high, low], "target port group");
        decode_with_sg_vpd(config.dir(), &page, tag);

        for format in [0, 1] {
            let (status, _, data) = run(&mut engine, s, &rtpg(format));
            assert_eq!(
                status, 0,
                "REPORT TARGET PORT GROUPS is served in every state"
            );
            assert_eq!(groups_in(&data, format), expected, "format {format}");
        }

        let read = cdb::read16(0, 1);
        let (status, sense, _) = run(&mut engine, s, &read);
        let (tur_status, tur_sense, _) = run(&mut engine, s, &cdb::test_unit_ready());
        if tag == 3 {
            let standby = Some((0x02, 0x04, 0x0b));
            assert_eq!((status, sense), (2, standby), "READ through standby");
            assert_eq!((tur_status, tur_sense), (2, standby), "TUR through standby");
        } else {
            assert_eq!((status, tur_status), (0, 0), "I/O through group {tag}");
        }
    }
    target.assert_running("after the commands of every path");
    for line in [
        "portal group 1 (active/optimized, preferred): ",
        "portal group 2 (active/non-optimized): ",
        "portal group 3 (standby): ",
    ] {
        assert!(
            target.output().contains(line),
            "{line:?} in\n{}",
            target.output()
        );
    }
}

/// Writes `page` as hex and has sg3_utils decode it; skipped where sg_vpd
/// is not installed (CI installs it).
fn decode_with_sg_vpd(dir: &std::path::Path, page: &[u8], tag: u16) {
    let installed = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("sg_vpd").is_file()));
    if !installed {
        assert!(!support::ci(), "sg_vpd (sg3-utils) is missing");
        eprintln!("sg_vpd is not installed: VPD page 83h not decoded by sg3_utils");
        return;
    }
    let hex: Vec<String> = page.iter().map(|b| format!("{b:02x}")).collect();
    let file = dir.join(format!("vpd83-{tag}.hex"));
    std::fs::write(&file, hex.join(" ") + "\n").expect("write the page");
    let inhex = format!("--inhex={}", file.display());
    let out = tools::run("sg_vpd", &[&inhex], Duration::from_secs(20));
    assert!(out.success(), "{}", out.describe());
    for line in [
        format!("Relative target port: 0x{tag:x}"),
        format!("Target port group: 0x{tag:x}"),
        format!("{TARGET},t,0x{tag:04x}"),
    ] {
        assert!(out.stdout.contains(&line), "{line:?} in {}", out.describe());
    }
}

#[test]
fn send_targets_gives_each_portal_its_group_tag() {
    let (_config, target) = start();
    let addrs = target.addrs().to_vec();
    let reply = cli::isoe_json(&["discover", "--json", &addrs[2].to_string()]);
    let portals = &reply["targets"][0]["portals"];
    let listed: Vec<(String, u64)> = portals
        .as_array()
        .expect("portals")
        .iter()
        .map(|p| {
            (
                p["address"].as_str().unwrap().to_string(),
                p["portal_group_tag"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = addrs
        .iter()
        .zip(GROUPS)
        .map(|(a, (tag, _, _))| (a.to_string(), u64::from(tag)))
        .collect();
    assert_eq!(listed, expected, "{reply}");
}

/// libiscsi's `iscsi-inq` shows each path's target port designators. Its
/// connect sends TEST UNIT READY after the login and gives up on any
/// answer but GOOD or a unit attention, so it cannot reach the LUN through
/// the standby group at all: that it fails there with 02/04/0B is checked too.
#[test]
fn iscsi_inq_shows_each_paths_designators() {
    let (_config, target) = start();
    let addrs = target.addrs().to_vec();
    for (i, &(tag, _, _)) in GROUPS.iter().enumerate() {
        let url = format!("iscsi://{}/{TARGET}/0", addrs[i]);
        let out = tools::run(
            "iscsi-inq",
            &["-e", "1", "-c", "131", &url],
            Duration::from_secs(30),
        );
        if tag == 3 {
            assert!(!out.success(), "{}", out.describe());
            assert!(
                out.stdout.contains("0x040b") || out.stderr.contains("0x040b"),
                "{}",
                out.describe()
            );
            continue;
        }
        assert!(out.success(), "{}", out.describe());
        for needle in [
            "Designator Type:(5) TARGET_PORT_GROUP".to_string(),
            "Designator Type:(4) RELATIVE_TARGET_PORT".to_string(),
            format!("Designator:[{TARGET},t,0x{tag:04x}]"),
        ] {
            assert!(
                out.stdout.contains(&needle),
                "{needle:?} in {}",
                out.describe()
            );
        }
    }
}
