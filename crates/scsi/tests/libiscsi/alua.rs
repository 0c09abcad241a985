//! Implicit ALUA through the device server: a target of two port groups
//! (1 active/optimized and preferred, 2 standby), a unit reached through
//! each. What each path sees in INQUIRY and VPD page 83h, what REPORT
//! TARGET PORT GROUPS lists in both formats, and what a standby or
//! unavailable port refuses.

use std::sync::Arc;

use isoe_scsi::{
    AccessState, Completion, LogicalUnit, Nexus, PortGroup, PortGroups, UnitDirectory,
};

use crate::harness::*;

/// The target around the unit: its port groups, no other units.
struct TwoGroups(PortGroups);

impl TwoGroups {
    fn new(second: AccessState) -> TwoGroups {
        TwoGroups(PortGroups::new(vec![
            PortGroup {
                id: 1,
                state: AccessState::ActiveOptimized,
                preferred: true,
                relative_ports: vec![1],
            },
            PortGroup {
                id: 2,
                state: second,
                preferred: false,
                relative_ports: vec![2],
            },
        ]))
    }
}

impl UnitDirectory for TwoGroups {
    fn unit_by_naa(&self, _naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        None
    }

    fn port_groups(&self) -> &PortGroups {
        &self.0
    }
}

/// The harness's initiator port, through target port `port`.
fn through(port: u16) -> Nexus {
    Nexus {
        relative_target_port: port,
        ..nexus()
    }
}

fn run_via(unit: &LogicalUnit, target: &TwoGroups, port: u16, cdb: &[u8]) -> (Completion, Vec<u8>) {
    let mut data_in = Vec::new();
    let completion = unit.execute(&through(port), target, cdb, &[], &mut data_in);
    (completion, data_in)
}

fn rtpg(parameter_data_format: u8, allocation_length: u32) -> Vec<u8> {
    let mut cdb = vec![0u8; 12];
    cdb[0] = 0xa3;
    cdb[1] = parameter_data_format << 5 | 0x0a;
    cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
    cdb
}

/// The designators of a VPD page 83h, as (byte 0, byte 1, designator).
fn designators(page: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut found = Vec::new();
    let mut at = 4;
    while at + 4 <= page.len() {
        let length = usize::from(page[at + 3]);
        found.push((
            page[at],
            page[at + 1],
            page[at + 4..at + 4 + length].to_vec(),
        ));
        at += 4 + length;
    }
    assert_eq!(at, page.len(), "designators fill the page exactly");
    found
}

#[test]
fn each_path_sees_its_own_target_port_in_vpd_page_83() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Standby);
    for port in [1u16, 2] {
        let (completion, page) = run_via(&unit, &target, port, &inquiry(true, 0x83, 512));
        assert_good(completion);
        let found = designators(&page);
        assert_eq!(found.len(), 4, "NAA, name, relative port, port group");
        assert_eq!((found[0].0, found[0].1), (0x01, 0x03));
        assert_eq!(
            found[0].2,
            unit.config().naa,
            "the unit is the same on both paths"
        );
        let name = format!("iqn.2024-01.org.isoe:disk,t,0x{port:04x}\0");
        assert_eq!((found[1].0, found[1].1), (0x53, 0x98));
        assert!(found[1].2.starts_with(name.as_bytes()), "{:?}", found[1].2);
        assert_eq!(found[1].2.len() % 4, 0);
        let [high, low] = port.to_be_bytes();
        assert_eq!(found[2], (0x51, 0x94, vec![0, 0, high, low]), "type 4");
        assert_eq!(found[3], (0x51, 0x95, vec![0, 0, high, low]), "type 5");
    }
}

#[test]
fn a_port_in_no_group_has_no_port_group_designator() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Standby);
    let (completion, page) = run_via(&unit, &target, 9, &inquiry(true, 0x83, 512));
    assert_good(completion);
    let found = designators(&page);
    assert_eq!(found.len(), 3);
    assert!(found.iter().all(|d| d.1 & 0x0f != 5));
}

#[test]
fn standard_inquiry_claims_implicit_alua_and_several_ports_on_every_path() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Unavailable);
    for port in [1, 2] {
        let (completion, data) = run_via(&unit, &target, port, &inquiry(false, 0, 96));
        assert_good(completion);
        assert_eq!(data[5] >> 4 & 0x03, 0b01, "TPGS");
        assert_eq!(data[6] & 0x10, 0x10, "MULTIP: two target ports");
    }
    let (_, data) = run(&unit, &inquiry(false, 0, 96));
    assert_eq!(data[6] & 0x10, 0, "MULTIP clear with one port");
}

#[test]
fn report_target_port_groups_length_only_header() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Standby);
    let (completion, data) = run_via(&unit, &target, 2, &rtpg(0b000, 1024));
    assert_good(completion);
    #[rustfmt::skip]
    let expected = [
        0x00, 0x00, 0x00, 0x18,
        0x80, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
        0x02, 0x04, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
    ];
    assert_eq!(data, expected);
}

#[test]
fn report_target_port_groups_extended_header() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::ActiveNonOptimized);
    let (completion, data) = run_via(&unit, &target, 1, &rtpg(0b001, 1024));
    assert_good(completion);
    #[rustfmt::skip]
    let expected = [
        0x00, 0x00, 0x00, 0x1c,
        0x10, 0x00, 0x00, 0x00,
        0x80, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
        0x01, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
    ];
    assert_eq!(data, expected);
    let (completion, data) = run_via(&unit, &target, 1, &rtpg(0b001, 10));
    assert_good(completion);
    assert_eq!(data, expected[..10], "truncated to the allocation length");
    let completion = run_via(&unit, &target, 1, &rtpg(0b111, 1024)).0;
    let sense = assert_invalid_field_in_cdb(completion);
    assert_eq!(sense.field_pointer.unwrap().byte, 1);
}

#[test]
fn a_standby_port_refuses_io_but_reports_state() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Standby);
    let read10 = block_cdb(0x28, 10, 0, 1, 0);
    let write10 = block_cdb(0x2a, 10, 0, 1, 0);
    for cdb in [vec![0u8; 6], read10.clone(), write10] {
        let completion = run_via(&unit, &target, 2, &cdb).0;
        assert_sense(completion, 0x02, 0x04, 0x0b);
    }
    for cdb in [
        inquiry(false, 0, 96),
        inquiry(true, 0x83, 255),
        rtpg(0, 256),
        mode_sense6(false, 0, 0x3f, 0, 255),
        vec![0x03, 0, 0, 0, 18, 0],
        // Served as LIO does, so that Linux learns a standby path's size.
        read_capacity16(32),
        vec![0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        assert_good(run_via(&unit, &target, 2, &cdb).0);
    }
    // The other path serves I/O as ever.
    assert_good(run_via(&unit, &target, 1, &read10).0);
}

#[test]
fn an_unavailable_port_serves_only_inquiry_rtpg_and_request_sense() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Unavailable);
    for cdb in [
        vec![0u8; 6],
        block_cdb(0x28, 10, 0, 1, 0),
        mode_sense6(false, 0, 0x3f, 0, 255),
        read_capacity16(32),
    ] {
        assert_sense(run_via(&unit, &target, 2, &cdb).0, 0x02, 0x04, 0x0c);
    }
    for cdb in [
        inquiry(false, 0, 96),
        rtpg(1, 256),
        vec![0x03, 0, 0, 0, 18, 0],
    ] {
        assert_good(run_via(&unit, &target, 2, &cdb).0);
    }
}

#[test]
fn a_state_changed_at_run_time_takes_effect_at_the_next_command() {
    let unit = unit();
    let target = TwoGroups::new(AccessState::Standby);
    let tur = vec![0u8; 6];
    assert_sense(run_via(&unit, &target, 2, &tur).0, 0x02, 0x04, 0x0b);
    assert!(target.0.set_state(2, AccessState::ActiveOptimized));
    assert_good(run_via(&unit, &target, 2, &tur).0);
    let (_, data) = run_via(&unit, &target, 2, &rtpg(0, 256));
    assert_eq!(&data[16..18], [0x00, 0x05], "A/O now; S_SUP and AO_SUP");
}

#[test]
fn report_supported_operation_codes_lists_report_target_port_groups() {
    let cdb = report_supported_opcodes(false, 0b010, 0xa3, 0x0a, 64);
    let (completion, data) = run(&unit(), &cdb);
    assert_good(completion);
    assert_eq!(data[1] & 0x07, 0x03, "supported, as the standard says");
    assert_eq!(be16(&data, 2), 12, "CDB SIZE");
    assert_eq!(
        &data[4..6],
        [0xa3, 0xea],
        "opcode, format bits and service action"
    );
}

/// Explicit ALUA: a unit with its own groups and a handler for SET TARGET
/// PORT GROUPS (what the gateways of a shared unit install).
mod explicit {
    use super::*;
    use isoe_scsi::{ExplicitAlua, Sense};
    use std::sync::Mutex;

    /// A request: the port it came through, and (group, state) pairs.
    type Request = (u16, Vec<(u16, AccessState)>);

    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<Request>>);

    impl ExplicitAlua for Recorder {
        fn set_target_port_groups(
            &self,
            relative_port: u16,
            requests: &[(u16, AccessState)],
        ) -> Result<(), Sense> {
            self.0
                .lock()
                .unwrap()
                .push((relative_port, requests.to_vec()));
            Ok(())
        }
    }

    fn stpg_cdb(length: u32) -> Vec<u8> {
        let mut cdb = vec![0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[6..10].copy_from_slice(&length.to_be_bytes());
        cdb
    }

    fn send(unit: &LogicalUnit, port: u16, cdb: &[u8], data_out: &[u8]) -> Completion {
        let target = TwoGroups::new(AccessState::Standby);
        let mut data_in = Vec::new();
        unit.execute(&through(port), &target, cdb, data_out, &mut data_in)
    }

    #[test]
    fn without_a_handler_there_is_no_set_target_port_groups() {
        let unit = unit();
        let list = [0, 0, 0, 0, 0x0, 0, 0, 1];
        assert_invalid_opcode(send(&unit, 1, &stpg_cdb(8), &list));
        let (_, data) = run_via(
            &unit,
            &TwoGroups::new(AccessState::Standby),
            1,
            &inquiry(false, 0, 96),
        );
        assert_eq!(data[5] & 0x30, 0x10, "TPGS = 01b: implicit only");
    }

    #[test]
    fn set_target_port_groups_reaches_the_handler_with_the_port_it_came_through() {
        let unit = unit();
        let recorder = Arc::new(Recorder::default());
        unit.set_explicit_alua(recorder.clone());
        // The unit's own groups override the target's: both active here.
        unit.set_port_groups(Arc::new(PortGroups::new(vec![
            PortGroup {
                id: 1,
                state: AccessState::ActiveNonOptimized,
                preferred: false,
                relative_ports: vec![1],
            },
            PortGroup {
                id: 2,
                state: AccessState::ActiveOptimized,
                preferred: false,
                relative_ports: vec![2],
            },
        ])));
        let (_, data) = run_via(
            &unit,
            &TwoGroups::new(AccessState::Standby),
            2,
            &inquiry(false, 0, 96),
        );
        assert_eq!(data[5] & 0x30, 0x30, "TPGS = 11b");
        // Port 2 is standby in the target's groups, active in the unit's own.
        let (read, _) = run_via(
            &unit,
            &TwoGroups::new(AccessState::Standby),
            2,
            &block_cdb(0x28, 10, 0, 1, 0),
        );
        assert_good(read);

        let list = [0, 0, 0, 0, 0x0, 0, 0, 2, 0x1, 0, 0, 1];
        assert_good(send(&unit, 2, &stpg_cdb(12), &list));
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![(
                2,
                vec![
                    (2, AccessState::ActiveOptimized),
                    (1, AccessState::ActiveNonOptimized)
                ]
            )]
        );
        // A group the unit does not have, a state code past unavailable, a
        // list that is not whole descriptors.
        let unknown = [0, 0, 0, 0, 0x0, 0, 0, 9];
        assert_sense(
            send(&unit, 2, &stpg_cdb(8), &unknown),
            ILLEGAL_REQUEST,
            0x26,
            0x00,
        );
        let transitioning = [0, 0, 0, 0, 0xf, 0, 0, 1];
        assert_sense(
            send(&unit, 2, &stpg_cdb(8), &transitioning),
            ILLEGAL_REQUEST,
            0x26,
            0x00,
        );
        assert_sense(
            send(&unit, 2, &stpg_cdb(6), &list[..6]),
            ILLEGAL_REQUEST,
            0x1a,
            0x00,
        );
        assert_eq!(
            recorder.0.lock().unwrap().len(),
            1,
            "refused lists reach no handler"
        );

        unit.attach(&through(1));
        let _ = run_via(
            &unit,
            &TwoGroups::new(AccessState::Standby),
            1,
            &[0, 0, 0, 0, 0, 0],
        );
        unit.access_states_changed();
        let (tur, _) = run_via(
            &unit,
            &TwoGroups::new(AccessState::Standby),
            1,
            &[0, 0, 0, 0, 0, 0],
        );
        assert_sense(tur, 0x06, 0x2a, 0x06);
    }
}
