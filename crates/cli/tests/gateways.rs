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
