//! PERSISTENT RESERVE OUT with ALL_TG_PT (SPC-5 5.13.7): REPORT
//! CAPABILITIES says ATP_C=1, so a registration made through one portal
//! group with ALL_TG_PT registers the initiator port through every target
//! port of the unit; a key change or an unregistration through any of them
//! applies to all.

mod support;

use support::client::{Client, LoginParams};
use support::{Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:ports";
const KEY: u64 = 0xabc0_0001;

fn start() -> (TargetConfig, Target) {
    let config = TargetConfig::new(&format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\n\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.2:0\"]\n\n\
         [[target]]\nname = \"{TARGET}\"\n\n[[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n"
    ));
    let target = Target::with_config_portals(&config, 2);
    (config, target)
}

/// A session through `addr` as the initiator port with `isid`.
fn session(addr: std::net::SocketAddr, isid: [u8; 6]) -> Client {
    let mut client = Client::connect(addr).expect("connect");
    client.isid = isid;
    client
        .do_login(&LoginParams::normal(TARGET))
        .expect("login");
    client.ready(0);
    client
}

/// PERSISTENT RESERVE OUT `action` with `key`, `action_key` and the flags
/// byte (ALL_TG_PT 0x04); returns the status.
fn pr_out(client: &mut Client, action: u8, kind: u8, key: u64, action_key: u64, flags: u8) -> u8 {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x5f;
    cdb[1] = action;
    cdb[2] = kind;
    cdb[5..9].copy_from_slice(&24u32.to_be_bytes());
    let mut parameters = vec![0u8; 24];
    parameters[0..8].copy_from_slice(&key.to_be_bytes());
    parameters[8..16].copy_from_slice(&action_key.to_be_bytes());
    parameters[20] = flags;
    client.command(0, &cdb, &parameters, 0).unwrap().status
}

/// The keys PERSISTENT RESERVE IN, READ KEYS lists.
fn read_keys(client: &mut Client) -> Vec<u64> {
    let cdb = [0x5e, 0x00, 0, 0, 0, 0, 0, 0x10, 0x00, 0];
    let r = client.command(0, &cdb, &[], 4096).unwrap();
    r.assert_good("READ KEYS");
    let length = u32::from_be_bytes(r.data[4..8].try_into().unwrap()) as usize;
    r.data[8..8 + length]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

#[test]
fn an_all_target_ports_registration_holds_through_every_portal_group() {
    let (_config, target) = start();
    let addrs = target.addrs().to_vec();
    let isid = [0x80, 0, 0, 0, 0x11, 0x22];
    let mut first = session(addrs[0], isid);
    let mut second = session(addrs[1], isid);

    // REGISTER with ALL_TG_PT through portal group 1.
    assert_eq!(pr_out(&mut first, 0x00, 0, 0, KEY, 0x04), 0);
    assert_eq!(read_keys(&mut second), [KEY, KEY], "one per target port");
    // Through portal group 2 the same initiator port is registered: it may
    // reserve with the key, and write under its reservation.
    assert_eq!(
        pr_out(&mut second, 0x01, 0x01, KEY, 0, 0),
        0,
        "RESERVE through the other target port"
    );
    second.write(0, 0, &[7u8; 512]);
    // A key change through either port changes both.
    assert_eq!(pr_out(&mut second, 0x00, 0, KEY, KEY + 1, 0), 0);
    assert_eq!(read_keys(&mut first), [KEY + 1, KEY + 1]);
    // Unregistering through one port unregisters through both.
    assert_eq!(pr_out(&mut first, 0x00, 0, KEY + 1, 0, 0), 0);
    assert!(read_keys(&mut second).is_empty());
    drop(target);
}

#[test]
fn without_all_target_ports_only_the_nexus_it_came_through_is_registered() {
    let (_config, target) = start();
    let addrs = target.addrs().to_vec();
    let isid = [0x80, 0, 0, 0, 0x11, 0x33];
    let mut first = session(addrs[0], isid);
    let mut second = session(addrs[1], isid);
    assert_eq!(pr_out(&mut first, 0x00, 0, 0, KEY, 0), 0);
    assert_eq!(read_keys(&mut second), [KEY]);
    // Not registered through group 2: its RESERVE conflicts.
    assert_eq!(pr_out(&mut second, 0x01, 0x01, KEY, 0, 0), 0x18);
    drop(target);
}
