//! Reservations: SPC-2 RESERVE/RELEASE and persistent reservations, from
//! several I_T nexuses, as libiscsi's Reserve6, Prin* and Prout* suites and
//! cluster software use them.

use isoe_scsi::{Completion, LogicalUnit, LunConfig, Nexus, NoUnits, Status};

use crate::harness::*;

const UNIT_ATTENTION: u8 = 0x06;

fn nexus(name: &str, last_isid_byte: u8) -> Nexus {
    Nexus::new(
        format!("iqn.2026-11.io.isoe:{name}"),
        [0x40, 0, 0, 0, 0, last_isid_byte],
    )
}

fn exec(unit: &LogicalUnit, from: &Nexus, cdb: &[u8], data_out: &[u8]) -> (Completion, Vec<u8>) {
    let mut data_in = Vec::new();
    let completion = unit.execute(from, &NoUnits, cdb, data_out, &mut data_in);
    (completion, data_in)
}

fn prout_cdb(action: u8, kind: u8, length: u32) -> Vec<u8> {
    let mut cdb = vec![0x5f, action, kind, 0, 0, 0, 0, 0, 0, 0];
    cdb[5..9].copy_from_slice(&length.to_be_bytes());
    cdb
}

fn prout_parameters(key: u64, action_key: u64, flags: u8) -> Vec<u8> {
    let mut p = vec![0u8; 24];
    p[0..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&action_key.to_be_bytes());
    p[20] = flags;
    p
}

fn prout(
    unit: &LogicalUnit,
    from: &Nexus,
    action: u8,
    kind: u8,
    key: u64,
    action_key: u64,
) -> Completion {
    let parameters = prout_parameters(key, action_key, 0);
    exec(unit, from, &prout_cdb(action, kind, 24), &parameters).0
}

fn prin(unit: &LogicalUnit, from: &Nexus, action: u8) -> Vec<u8> {
    let (completion, data) = exec(unit, from, &[0x5e, action, 0, 0, 0, 0, 0, 0x10, 0, 0], &[]);
    assert_good(completion);
    data
}

const REGISTER: u8 = 0;
const RESERVE: u8 = 1;
const RELEASE: u8 = 2;
const CLEAR: u8 = 3;
const PREEMPT: u8 = 4;
const PREEMPT_AND_ABORT: u8 = 5;
const REGISTER_AND_MOVE: u8 = 7;
const WRITE_EXCLUSIVE: u8 = 1;
const EXCLUSIVE_ACCESS: u8 = 3;
const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 6;

fn read10() -> Vec<u8> {
    block_cdb(0x28, 10, 0, 1, 0)
}

fn write10() -> Vec<u8> {
    block_cdb(0x2a, 10, 0, 1, 0)
}

fn conflict(completion: Completion) {
    assert_eq!(completion, Completion::reservation_conflict());
}

#[test]
fn write_exclusive_lets_others_read_but_not_write() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xaa));
    assert_good(prout(&unit, &a, RESERVE, WRITE_EXCLUSIVE, 0xaa, 0));
    let block = vec![7u8; BLOCK_SIZE];
    assert_good(exec(&unit, &a, &write10(), &block).0);
    assert_good(exec(&unit, &b, &read10(), &[]).0);
    conflict(exec(&unit, &b, &write10(), &block).0);
    // INQUIRY, TEST UNIT READY and PR IN stay allowed.
    assert_good(exec(&unit, &b, &[0x12, 0, 0, 0, 36, 0], &[]).0);
    assert_good(exec(&unit, &b, &[0, 0, 0, 0, 0, 0], &[]).0);
    prin(&unit, &b, 0);
    // Reserving with a key it does not hold is a conflict.
    conflict(prout(&unit, &b, RESERVE, WRITE_EXCLUSIVE, 0xaa, 0));
}

#[test]
fn exclusive_access_registrants_only_admits_registered_nexuses() {
    let unit = unit();
    let (a, b, c) = (nexus("a", 1), nexus("b", 2), nexus("c", 3));
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_good(prout(&unit, &b, REGISTER, 0, 0, 0xb));
    assert_good(prout(
        &unit,
        &a,
        RESERVE,
        EXCLUSIVE_ACCESS_REGISTRANTS_ONLY,
        0xa,
        0,
    ));
    assert_good(exec(&unit, &b, &read10(), &[]).0);
    conflict(exec(&unit, &c, &read10(), &[]).0);
    // RESERVE of the same type by another registrant is a conflict: only
    // the all-registrants types make every registrant a holder.
    conflict(prout(
        &unit,
        &b,
        RESERVE,
        EXCLUSIVE_ACCESS_REGISTRANTS_ONLY,
        0xb,
        0,
    ));
    // The holder unregisters: the reservation goes and b hears of it.
    unit.attach(&b);
    assert_good(prout(&unit, &a, REGISTER, 0, 0xa, 0));
    assert_sense(
        exec(&unit, &b, &read10(), &[]).0,
        UNIT_ATTENTION,
        0x2a,
        0x04,
    );
    assert_good(exec(&unit, &c, &read10(), &[]).0);
}

#[test]
fn read_keys_and_reservation_report_the_state_and_generation() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    let empty = prin(&unit, &a, 0);
    assert_eq!(empty, [0, 0, 0, 0, 0, 0, 0, 0]);
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0x1122));
    assert_good(prout(&unit, &b, REGISTER, 0, 0, 0x3344));
    let keys = prin(&unit, &a, 0);
    assert_eq!(&keys[0..4], &2u32.to_be_bytes(), "PRgeneration");
    assert_eq!(&keys[4..8], &16u32.to_be_bytes());
    assert_eq!(&keys[8..16], &0x1122u64.to_be_bytes());
    assert_eq!(&keys[16..24], &0x3344u64.to_be_bytes());
    assert_good(prout(&unit, &b, RESERVE, EXCLUSIVE_ACCESS, 0x3344, 0));
    let reservation = prin(&unit, &a, 1);
    assert_eq!(&reservation[4..8], &16u32.to_be_bytes());
    assert_eq!(&reservation[8..16], &0x3344u64.to_be_bytes());
    assert_eq!(reservation[21], EXCLUSIVE_ACCESS);
    // A reservation does not change the generation.
    assert_eq!(&reservation[0..4], &2u32.to_be_bytes());
    // READ FULL STATUS names b as holder with its iSCSI TransportID.
    let full = prin(&unit, &a, 3);
    let text = String::from_utf8_lossy(&full);
    assert!(
        text.contains("iqn.2026-11.io.isoe:b,i,0x400000000002"),
        "{text}"
    );
    // Releasing with the wrong type: INVALID RELEASE OF PERSISTENT RESERVATION.
    assert_sense(
        prout(&unit, &b, RELEASE, WRITE_EXCLUSIVE, 0x3344, 0),
        ILLEGAL_REQUEST,
        0x26,
        0x04,
    );
    assert_good(prout(&unit, &b, RELEASE, EXCLUSIVE_ACCESS, 0x3344, 0));
    assert_eq!(&prin(&unit, &a, 1)[4..8], &0u32.to_be_bytes());
}

#[test]
fn preempt_takes_the_reservation_and_clear_ends_everything() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    unit.attach(&a);
    unit.attach(&b);
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_good(prout(&unit, &b, REGISTER, 0, 0, 0xb));
    assert_good(prout(&unit, &a, RESERVE, EXCLUSIVE_ACCESS, 0xa, 0));
    assert_good(prout(&unit, &b, PREEMPT, WRITE_EXCLUSIVE, 0xb, 0xa));
    // a lost its registration and hears REGISTRATIONS PREEMPTED.
    assert_sense(
        exec(&unit, &a, &read10(), &[]).0,
        UNIT_ATTENTION,
        0x2a,
        0x05,
    );
    let keys = prin(&unit, &a, 0);
    assert_eq!(&keys[4..8], &8u32.to_be_bytes());
    assert_eq!(&keys[8..16], &0xbu64.to_be_bytes());
    assert_eq!(prin(&unit, &a, 1)[21], WRITE_EXCLUSIVE);
    // Preempting a key nobody holds is a conflict; key zero is invalid here.
    conflict(prout(&unit, &b, PREEMPT, WRITE_EXCLUSIVE, 0xb, 0x99));
    assert_sense(
        prout(&unit, &b, PREEMPT, WRITE_EXCLUSIVE, 0xb, 0),
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa2));
    assert_good(prout(&unit, &b, CLEAR, 0, 0xb, 0));
    assert_sense(
        exec(&unit, &a, &read10(), &[]).0,
        UNIT_ATTENTION,
        0x2a,
        0x03,
    );
    assert_eq!(prin(&unit, &a, 0), [0, 0, 0, 5, 0, 0, 0, 0]);
}

#[test]
fn register_and_move_hands_the_reservation_to_another_nexus() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_good(prout(&unit, &a, RESERVE, EXCLUSIVE_ACCESS, 0xa, 0));
    let port = b"iqn.2026-11.io.isoe:b,i,0x400000000002\0\0";
    let mut parameters = prout_parameters(0xa, 0xb, 0);
    parameters[18..20].copy_from_slice(&1u16.to_be_bytes());
    let transport_id_length = 4 + port.len();
    parameters[20..24].copy_from_slice(&(transport_id_length as u32).to_be_bytes());
    parameters.extend_from_slice(&[0x45, 0, 0, port.len() as u8]);
    parameters.extend_from_slice(port);
    let cdb = prout_cdb(REGISTER_AND_MOVE, EXCLUSIVE_ACCESS, parameters.len() as u32);
    assert_good(exec(&unit, &a, &cdb, &parameters).0);
    assert_good(exec(&unit, &b, &read10(), &[]).0);
    conflict(exec(&unit, &a, &read10(), &[]).0);
    assert_eq!(&prin(&unit, &a, 1)[8..16], &0xbu64.to_be_bytes());
}

#[test]
fn reserve6_is_exclusive_until_released_reset_or_nexus_loss() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    let reserve6 = [0x16, 0, 0, 0, 0, 0];
    let release6 = [0x17, 0, 0, 0, 0, 0];
    unit.attach(&a);
    unit.attach(&b);
    assert_good(exec(&unit, &a, &reserve6, &[]).0);
    assert_good(exec(&unit, &a, &reserve6, &[]).0);
    conflict(exec(&unit, &b, &reserve6, &[]).0);
    conflict(exec(&unit, &b, &[0x1a, 0, 0x3f, 0, 0xff, 0], &[]).0);
    // RELEASE from another nexus is a GOOD no-op.
    assert_good(exec(&unit, &b, &release6, &[]).0);
    conflict(exec(&unit, &b, &read10(), &[]).0);
    // PR OUT under someone else's RESERVE is a conflict too.
    conflict(prout(&unit, &b, REGISTER, 0, 0, 0xb));
    // A LOGICAL UNIT RESET ends it and tells everyone.
    unit.reset(isoe_scsi::attention::RESET_OCCURRED);
    assert_sense(
        exec(&unit, &b, &reserve6, &[]).0,
        UNIT_ATTENTION,
        0x29,
        0x03,
    );
    assert_good(exec(&unit, &b, &reserve6, &[]).0);
    // b's last session ends: its reservation goes with the I_T nexus.
    unit.detach(&b);
    assert_sense(
        exec(&unit, &a, &reserve6, &[]).0,
        UNIT_ATTENTION,
        0x29,
        0x03,
    );
    assert_good(exec(&unit, &a, &reserve6, &[]).0);
    assert_good(exec(&unit, &a, &release6, &[]).0);
    // Registrations make RESERVE(6) conflict.
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    conflict(exec(&unit, &a, &reserve6, &[]).0);
}

/// A target whose transport reports one I_T nexus's connections as closed
/// by its initiator, not yet ended.
struct ClosedNexus(Nexus);

impl isoe_scsi::UnitDirectory for ClosedNexus {
    fn unit_by_naa(&self, _naa: &[u8]) -> Option<std::sync::Arc<LogicalUnit>> {
        None
    }

    fn nexus_closed(&self, nexus: &Nexus) -> bool {
        *nexus == self.0
    }
}

#[test]
fn a_reserve6_whose_holder_already_closed_its_connections_ends_at_the_next_conflict() {
    let unit = unit();
    let (a, b) = (nexus("a", 1), nexus("b", 2));
    let reserve6 = [0x16, 0, 0, 0, 0, 0];
    unit.attach(&a);
    unit.attach(&b);
    assert_good(exec(&unit, &a, &reserve6, &[]).0);
    let run = |from: &Nexus, units: &dyn isoe_scsi::UnitDirectory| {
        unit.execute(from, units, &write10(), &[0; BLOCK_SIZE], &mut Vec::new())
    };
    // b's write conflicts while a's connection is open, or closed only as
    // far as nobody can tell yet.
    conflict(run(&b, &NoUnits));
    conflict(run(&b, &ClosedNexus(nexus("c", 3))));
    // The holder asking about itself changes nothing.
    assert_good(run(&a, &ClosedNexus(a.clone())));
    // a's initiator closed its connections: the nexus, and with it the
    // reservation, ends now, and b's write runs.
    assert_good(run(&b, &ClosedNexus(a.clone())));
    assert_good(exec(&unit, &b, &reserve6, &[]).0);
    // Persistent reservations outlive their I_T nexus: no such shortcut.
    assert_good(exec(&unit, &b, &[0x17, 0, 0, 0, 0, 0], &[]).0);
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_good(prout(&unit, &a, RESERVE, WRITE_EXCLUSIVE, 0xa, 0));
    conflict(run(&b, &ClosedNexus(a.clone())));
}

#[test]
fn aptpl_keeps_registrations_and_the_reservation_across_a_restart() {
    let unit = unit();
    let a = nexus("a", 1);
    // No reservations file: APTPL=1 is an invalid field (PTPL_C=0).
    let aptpl = prout_parameters(0, 0xa, 0x01);
    assert_sense(
        exec(&unit, &a, &prout_cdb(REGISTER, 0, 24), &aptpl).0,
        ILLEGAL_REQUEST,
        0x26,
        0x00,
    );

    let path = std::env::temp_dir().join(format!("isoe-pr-test-{}.pr", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let config = LunConfig {
        reservations_file: Some(path.clone()),
        ..config()
    };
    let first = unit_with(config.clone(), BLOCKS);
    let capabilities = prin(&first, &a, 2);
    assert_eq!(capabilities[2] & 0x01, 1, "PTPL_C");
    assert_good(exec(&first, &a, &prout_cdb(REGISTER, 0, 24), &aptpl).0);
    let reserve = prout_parameters(0xa, 0, 0x01);
    assert_good(
        exec(
            &first,
            &a,
            &prout_cdb(RESERVE, WRITE_EXCLUSIVE, 24),
            &reserve,
        )
        .0,
    );
    drop(first);

    let restarted = unit_with(config.clone(), BLOCKS);
    let keys = prin(&restarted, &a, 0);
    assert_eq!(&keys[8..16], &0xau64.to_be_bytes());
    assert_eq!(prin(&restarted, &a, 1)[21], WRITE_EXCLUSIVE);
    conflict(
        exec(
            &restarted,
            &nexus("b", 2),
            &write10(),
            &vec![0u8; BLOCK_SIZE],
        )
        .0,
    );
    // Unregistering with APTPL=0 forgets the file.
    assert_good(
        exec(
            &restarted,
            &a,
            &prout_cdb(REGISTER, 0, 24),
            &prout_parameters(0xa, 0, 0),
        )
        .0,
    );
    assert!(!path.exists());
    let again = unit_with(config, BLOCKS);
    assert_eq!(prin(&again, &a, 0)[4..8], [0, 0, 0, 0]);
    assert_eq!(
        Status::Good,
        exec(&again, &nexus("b", 2), &write10(), &vec![0u8; BLOCK_SIZE])
            .0
            .status
    );
}

#[test]
fn malformed_persistent_reserve_out_is_refused_with_sense() {
    let unit = unit();
    let a = nexus("a", 1);
    // Parameter list shorter than 24 bytes.
    assert_sense(
        exec(&unit, &a, &prout_cdb(REGISTER, 0, 8), &[0; 8]).0,
        ILLEGAL_REQUEST,
        0x1a,
        0x00,
    );
    // Unknown service action.
    assert_sense(
        exec(&unit, &a, &prout_cdb(0x1f, 0, 24), &[0; 24]).0,
        ILLEGAL_REQUEST,
        0x24,
        0x00,
    );
    // Unknown type.
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_sense(
        prout(&unit, &a, RESERVE, 0x2, 0xa, 0),
        ILLEGAL_REQUEST,
        0x24,
        0x00,
    );
    // Unknown PR IN service action.
    let (completion, _) = exec(&unit, &a, &[0x5e, 0x09, 0, 0, 0, 0, 0, 0x10, 0, 0], &[]);
    assert_sense(completion, ILLEGAL_REQUEST, 0x24, 0x00);
}

/// Two gateways' units of one medium, their reservations shared through a
/// state kept "in the cluster" (here a mutex) and messages delivered at
/// once, as a watched RADOS object does.
mod shared {
    use super::*;
    use isoe_scsi::UnitPeers;
    use std::sync::{Arc, Mutex, Weak};

    #[derive(Default)]
    struct Cluster {
        state: Mutex<(Vec<u8>, u64)>,
        units: Mutex<Vec<(usize, Weak<LogicalUnit>)>>,
    }

    struct Link {
        cluster: Arc<Cluster>,
        gateway: usize,
    }

    impl UnitPeers for Link {
        fn load(&self) -> Result<(Vec<u8>, u64), String> {
            Ok(self.cluster.state.lock().unwrap().clone())
        }
        fn store(&self, state: &[u8], expected: u64) -> Result<Option<u64>, String> {
            let mut stored = self.cluster.state.lock().unwrap();
            if stored.1 != expected {
                return Ok(None);
            }
            *stored = (state.to_vec(), expected + 1);
            Ok(Some(expected + 1))
        }
        fn publish(&self, message: &[u8]) -> Result<(), String> {
            let units = self.cluster.units.lock().unwrap().clone();
            for (gateway, unit) in units {
                if let (true, Some(unit)) = (gateway != self.gateway, unit.upgrade()) {
                    // As the cluster does: the notify returns once each
                    // gateway has acknowledged.
                    let (acked, ack) = std::sync::mpsc::channel();
                    unit.peer_message(
                        Some(message),
                        Box::new(move || {
                            let _ = acked.send(());
                        }),
                    );
                    ack.recv_timeout(std::time::Duration::from_secs(10))
                        .map_err(|_| "a gateway never acknowledged".to_string())?;
                }
            }
            Ok(())
        }
    }

    fn gateways(cluster: &Arc<Cluster>) -> (Arc<LogicalUnit>, Arc<LogicalUnit>) {
        let shared: Arc<dyn isoe_store::Store> =
            Arc::new(isoe_store::MemoryStore::new(BLOCKS * BLOCK_SIZE as u64));
        let make = |gateway: usize| {
            let unit = Arc::new(LogicalUnit::new(Arc::clone(&shared), config()));
            cluster
                .units
                .lock()
                .unwrap()
                .push((gateway, Arc::downgrade(&unit)));
            let first = gateway == 0;
            let link = Arc::new(Link {
                cluster: Arc::clone(cluster),
                gateway,
            });
            unit.share_reservations(link, first).unwrap();
            unit
        };
        (make(0), make(1))
    }

    /// The same initiator port name through gateway A (port 1) and B (port 2).
    fn through(port: u16, name: &str) -> Nexus {
        Nexus {
            relative_target_port: port,
            ..super::nexus(name, 1)
        }
    }

    /// Two gateways, a nexus attached through each, their power-on unit
    /// attentions taken.
    pub(super) fn two_attached() -> (Arc<LogicalUnit>, Arc<LogicalUnit>, Nexus, Nexus) {
        let cluster = Arc::new(Cluster::default());
        let (a, b) = gateways(&cluster);
        // The cluster lives as long as the units' links hold it.
        let owner = through(1, "owner");
        let other = through(2, "other");
        for (unit, n) in [(&a, &owner), (&b, &other)] {
            unit.attach(n);
            let _ = exec(unit, n, &[0, 0, 0, 0, 0, 0], &[]);
        }
        (a, b, owner, other)
    }

    #[test]
    fn a_reservation_through_one_gateway_conflicts_through_the_other() {
        let (a, b, owner, other) = two_attached();
        assert_good(prout(&a, &owner, REGISTER, 0, 0, 0xaa));
        assert_good(prout(&a, &owner, RESERVE, WRITE_EXCLUSIVE, 0xaa, 0));
        let (write, _) = exec(&b, &other, &write10(), &[0; 512]);
        assert_eq!(
            write.status,
            Status::ReservationConflict,
            "B sees A's reservation"
        );
        let (read, _) = exec(&b, &other, &read10(), &[]);
        assert_good(read);
        let keys = prin(&b, &other, 0);
        assert_eq!(
            (be32(&keys, 4), be64(&keys, 8)),
            (8, 0xaa),
            "B reads A's key"
        );

        // B registers and preempts A: A's nexus hears REGISTRATIONS PREEMPTED.
        assert_good(prout(&b, &other, REGISTER, 0, 0, 0xbb));
        assert_good(prout(&b, &other, PREEMPT, WRITE_EXCLUSIVE, 0xbb, 0xaa));
        let (tur, _) = exec(&a, &owner, &[0, 0, 0, 0, 0, 0], &[]);
        assert_sense(tur, UNIT_ATTENTION, 0x2a, 0x05);
        let (write, _) = exec(&a, &owner, &write10(), &[0; 512]);
        assert_eq!(write.status, Status::ReservationConflict, "A is preempted");
        let (write, _) = exec(&b, &other, &write10(), &[0; 512]);
        assert_good(write);

        // SPC-2 RESERVE is shared too.
        assert_good(prout(&b, &other, CLEAR, 0, 0xbb, 0));
        let (tur, _) = exec(&a, &owner, &[0, 0, 0, 0, 0, 0], &[]);
        assert_good(tur);
        let (reserve, _) = exec(&a, &owner, &[0x16, 0, 0, 0, 0, 0], &[]);
        assert_good(reserve);
        let (write, _) = exec(&b, &other, &write10(), &[0; 512]);
        assert_eq!(write.status, Status::ReservationConflict);
    }

    #[test]
    fn a_gateway_that_wrote_second_redoes_its_change_on_the_new_state() {
        let cluster = Arc::new(Cluster::default());
        let (a, b) = gateways(&cluster);
        let (x, y) = (through(1, "x"), through(2, "y"));
        assert_good(prout(&a, &x, REGISTER, 0, 0, 0x1));
        // B's copy is current through the message; make it stale by
        // changing the shared state behind its back.
        {
            let mut stored = cluster.state.lock().unwrap();
            let text = String::from_utf8(stored.0.clone()).unwrap();
            stored.0 = text.replace("generation 1", "generation 7").into_bytes();
            stored.1 += 1;
        }
        assert_good(prout(&b, &y, REGISTER, 0, 0, 0x2));
        let keys = prin(&a, &x, 0);
        assert_eq!(
            be32(&keys, 0),
            8,
            "the change was made on the newer state (generation 7, then 8)"
        );
        assert_eq!(be32(&keys, 4), 16, "both keys are registered");
    }

    #[test]
    fn the_first_gateway_drops_what_did_not_persist_and_keeps_what_did() {
        let cluster = Arc::new(Cluster::default());
        let (a, _b) = gateways(&cluster);
        let x = through(1, "x");
        assert_good(prout(&a, &x, REGISTER, 0, 0, 0x1));
        drop((a, _b));
        // Every gateway went (power loss); the next first one starts clean.
        cluster.units.lock().unwrap().clear();
        let (a, _b) = gateways(&cluster);
        assert_eq!(
            be32(&prin(&a, &x, 0), 4),
            0,
            "no APTPL: the registration went"
        );

        // With APTPL the registration survives.
        let parameters = prout_parameters(0, 0x5, 0x01);
        let (aptpl, _) = exec(&a, &x, &prout_cdb(REGISTER, 0, 24), &parameters);
        assert_good(aptpl);
        drop((a, _b));
        cluster.units.lock().unwrap().clear();
        let (a, _b) = gateways(&cluster);
        let keys = prin(&a, &x, 0);
        assert_eq!((be32(&keys, 4), be64(&keys, 8)), (8, 0x5));
    }

    /// Both gateways' groups, as a shared unit lists them: port 1 is
    /// gateway A's, port 2 gateway B's.
    fn span_both(units: [&LogicalUnit; 2]) {
        use isoe_scsi::{AccessState, PortGroup, PortGroups};
        for unit in units {
            let group = |id: u16| PortGroup {
                id,
                state: AccessState::ActiveOptimized,
                preferred: false,
                relative_ports: vec![id],
            };
            unit.set_port_groups(Arc::new(PortGroups::new(vec![group(1), group(2)])));
        }
    }

    #[test]
    fn the_holder_through_another_gateway_of_an_all_target_ports_registrant_stays_that_nexus() {
        let cluster = Arc::new(Cluster::default());
        let (a, b) = gateways(&cluster);
        span_both([&a, &b]);
        // One initiator port, through A (port 1) and through B (port 2).
        let (via_a, via_b) = (through(1, "port"), through(2, "port"));
        a.attach(&via_a);
        b.attach(&via_b);
        let parameters = prout_parameters(0, 0x7, 0x04);
        let (registered, _) = exec(&a, &via_a, &prout_cdb(REGISTER, 0, 24), &parameters);
        assert_good(registered);
        assert_eq!(be32(&prin(&b, &via_b, 0), 4), 16, "a key per target port");
        assert_good(prout(&b, &via_b, RESERVE, WRITE_EXCLUSIVE, 0x7, 0));
        // The holder is the nexus through B on both gateways (SPC-5
        // 5.13.10), not the first registration of its initiator port.
        conflict(exec(&a, &via_a, &write10(), &[0; 512]).0);
        assert_good(exec(&b, &via_b, &write10(), &[0; 512]).0);
        // B's next change starts from the state in the cluster.
        assert_good(prout(&b, &via_b, REGISTER, 0, 0x7, 0x8));
        assert_good(exec(&b, &via_b, &write10(), &[0; 512]).0);
        conflict(exec(&a, &via_a, &write10(), &[0; 512]).0);
    }
}

/// A transport's task sets as a unit sees them: what it was asked to end.
#[derive(Debug, Default)]
struct Ended {
    /// Each call: the nexuses (None: all).
    calls: std::sync::Mutex<Vec<Option<Vec<Nexus>>>>,
}

impl isoe_scsi::TaskSets for Ended {
    fn abort(
        &self,
        _unit: &LogicalUnit,
        nexuses: Option<&[Nexus]>,
        done: Box<dyn FnOnce() + Send>,
    ) {
        self.calls
            .lock()
            .unwrap()
            .push(nexuses.map(<[Nexus]>::to_vec));
        done();
    }
}

impl Ended {
    fn on(unit: &LogicalUnit) -> std::sync::Arc<Ended> {
        let ended = std::sync::Arc::new(Ended::default());
        unit.set_task_sets(ended.clone());
        ended
    }

    fn calls(&self) -> Vec<Option<Vec<Nexus>>> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

#[test]
fn preempt_and_abort_ends_the_preempted_nexus_tasks_and_preempt_does_not() {
    let unit = unit();
    let ended = Ended::on(&unit);
    let (a, b, c) = (nexus("a", 1), nexus("b", 1), nexus("c", 1));
    for n in [&a, &b, &c] {
        unit.attach(n);
        let _ = exec(&unit, n, &[0, 0, 0, 0, 0, 0], &[]);
    }
    assert_good(prout(&unit, &a, REGISTER, 0, 0, 0xa));
    assert_good(prout(&unit, &b, REGISTER, 0, 0, 0xb));
    assert_good(prout(&unit, &c, REGISTER, 0, 0, 0xc));
    assert_good(prout(&unit, &b, RESERVE, WRITE_EXCLUSIVE, 0xb, 0));
    assert_good(prout(&unit, &a, PREEMPT, WRITE_EXCLUSIVE, 0xa, 0xc));
    assert_eq!(ended.calls(), vec![], "PREEMPT ends no task");

    // The completion waits for the tasks to end: the command is left for
    // later, and only its work answers.
    let parameters = prout_parameters(0xa, 0xb, 0);
    let mut data_in = Vec::new();
    let outcome = unit.start(
        &a,
        &NoUnits,
        &prout_cdb(PREEMPT_AND_ABORT, WRITE_EXCLUSIVE, 24),
        &parameters,
        &mut data_in,
    );
    let isoe_scsi::Outcome::Later(work) = outcome else {
        panic!("PREEMPT AND ABORT answered before its tasks ended: {outcome:?}");
    };
    assert_eq!(ended.calls(), vec![Some(vec![b.clone()])], "b's tasks end");
    assert_good(work.run());
    let (tur, _) = exec(&unit, &b, &[0, 0, 0, 0, 0, 0], &[]);
    assert_sense(tur, UNIT_ATTENTION, 0x2a, 0x05);
    let (write, _) = exec(&unit, &b, &write10(), &[0; 512]);
    assert_eq!(write.status, Status::ReservationConflict, "a holds it now");

    // Preempting a key nobody holds ends nothing and conflicts.
    assert_eq!(
        prout(&unit, &a, PREEMPT_AND_ABORT, WRITE_EXCLUSIVE, 0xa, 0x99).status,
        Status::ReservationConflict
    );
    assert_eq!(ended.calls(), vec![]);
}

mod shared_abort {
    use super::*;

    #[test]
    fn preempt_and_abort_through_one_gateway_ends_the_tasks_through_the_other() {
        let (a, b, owner, other) = super::shared::two_attached();
        let (ended_a, ended_b) = (Ended::on(&a), Ended::on(&b));
        assert_good(prout(&a, &owner, REGISTER, 0, 0, 0xaa));
        assert_good(prout(&a, &owner, RESERVE, WRITE_EXCLUSIVE, 0xaa, 0));
        assert_good(prout(&b, &other, REGISTER, 0, 0, 0xbb));
        assert_good(prout(
            &b,
            &other,
            PREEMPT_AND_ABORT,
            WRITE_EXCLUSIVE,
            0xbb,
            0xaa,
        ));
        assert_eq!(
            ended_a.calls(),
            vec![Some(vec![owner.clone()])],
            "A ended the tasks of the nexus B preempted"
        );
        assert_eq!(
            ended_b.calls(),
            vec![],
            "the preempted nexus has no task through B"
        );
        let (tur, _) = exec(&a, &owner, &[0, 0, 0, 0, 0, 0], &[]);
        assert_sense(tur, UNIT_ATTENTION, 0x2a, 0x05);

        // A reset through B ends every task of the unit through A.
        b.reset(isoe_scsi::Sense::new(0x06, 0x29, 0x03));
        assert_eq!(ended_a.calls(), vec![None]);
    }
}

mod shared_reset {
    use super::*;

    #[test]
    fn a_reset_through_one_gateway_is_heard_through_the_other() {
        // Reuses the shared module's two gateways.
        let (a, b, owner, other) = super::shared::two_attached();
        a.reset(isoe_scsi::Sense::new(0x06, 0x29, 0x03));
        let (tur, _) = exec(&b, &other, &[0, 0, 0, 0, 0, 0], &[]);
        assert_sense(tur, UNIT_ATTENTION, 0x29, 0x03);
        let (tur, _) = exec(&a, &owner, &[0, 0, 0, 0, 0, 0], &[]);
        assert_sense(tur, UNIT_ATTENTION, 0x29, 0x03);
        let (tur, _) = exec(&b, &other, &[0, 0, 0, 0, 0, 0], &[]);
        assert_good(tur);
    }
}

mod shared_mode {
    use super::*;

    #[test]
    fn software_write_protect_set_through_one_gateway_holds_through_the_other() {
        let (a, b, owner, other) = super::shared::two_attached();
        // MODE SENSE(6) of the control page, SWP on, MODE SELECT(6) back.
        let (sensed, page) = exec(&a, &owner, &[0x1a, 0x08, 0x0a, 0, 0xff, 0], &[]);
        assert_good(sensed);
        let mut list = page.clone();
        list[0] = 0;
        list[4 + 4] |= 0x08;
        let (selected, _) = exec(&a, &owner, &[0x15, 0x10, 0, 0, list.len() as u8, 0], &list);
        assert_good(selected);
        let (tur, _) = exec(&b, &other, &[0, 0, 0, 0, 0, 0], &[]);
        assert_sense(tur, UNIT_ATTENTION, 0x2a, 0x01);
        let (write, _) = exec(&b, &other, &write10(), &[0; 512]);
        assert_sense(write, DATA_PROTECT, 0x27, 0x02);
    }
}
