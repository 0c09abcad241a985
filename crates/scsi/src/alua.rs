//! Asymmetric logical unit access (ALUA, SPC-5 5.16): the target port
//! groups of a SCSI target device, the asymmetric access state of each, and
//! what a command may do through a port whose group is in standby or
//! unavailable.
//!
//! A target's units have implicit ALUA (INQUIRY TPGS = 01b): the states are
//! the target's to set. A unit several gateways serve has its own groups
//! (every gateway's) and explicit ALUA as well (TPGS = 11b): SET TARGET
//! PORT GROUPS asks its [`ExplicitAlua`] to move the states. Each iSCSI
//! target portal group is one SCSI target port and one target port group,
//! so in isoe a group holds one relative target port, numbered as the
//! group, though [`PortGroups`] allows more. The states live in atomics so
//! that a running target can change them (several gateways)
//! without a lock on the command path; the groups and their ports are fixed
//! when the target starts. A gateway that is taking a shared unit over
//! reports its groups transitioning until it owns the unit.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::opcode::{
    INQUIRY, MAINTENANCE_IN, MAINTENANCE_OUT, MODE_SELECT_10, MODE_SELECT_6, MODE_SENSE_10,
    MODE_SENSE_6, PERSISTENT_RESERVE_IN, PERSISTENT_RESERVE_OUT, READ_CAPACITY_10,
    READ_CAPACITY_16_SA, REPORT_LUNS, REPORT_TARGET_PORT_GROUPS_SA, REQUEST_SENSE,
    SERVICE_ACTION_IN_16, SET_TARGET_PORT_GROUPS_SA,
};
use crate::{cdb, Sense};

/// A primary target port asymmetric access state (SPC-5 5.16.2.4): the
/// four isoe can be configured in, and transitioning, which a gateway
/// reports while it takes a shared unit over. Offline and logical block
/// dependent are never reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessState {
    /// Active/optimized (0h): every command, at full performance.
    ActiveOptimized,
    /// Active/non-optimized (1h): every command, the initiator should
    /// prefer an optimized path.
    ActiveNonOptimized,
    /// Standby (2h): only commands that report or manage state.
    Standby,
    /// Unavailable (3h): only INQUIRY, REPORT LUNS, REPORT TARGET PORT
    /// GROUPS and REQUEST SENSE.
    Unavailable,
    /// Transitioning (Fh): between two states; as unavailable, but the
    /// other commands end in 02/04/0A, which initiators retry, and SET
    /// TARGET PORT GROUPS waits for the transition too. Never configured,
    /// never asked for.
    Transitioning,
}

impl AccessState {
    /// Every state, in code order.
    pub const ALL: [AccessState; 5] = [
        AccessState::ActiveOptimized,
        AccessState::ActiveNonOptimized,
        AccessState::Standby,
        AccessState::Unavailable,
        AccessState::Transitioning,
    ];

    /// The ASYMMETRIC ACCESS STATE code (SPC-5 6.36.2, table 203).
    pub const fn code(self) -> u8 {
        match self {
            AccessState::ActiveOptimized => 0x0,
            AccessState::ActiveNonOptimized => 0x1,
            AccessState::Standby => 0x2,
            AccessState::Unavailable => 0x3,
            AccessState::Transitioning => 0xf,
        }
    }

    /// The state with `code`, if it is one of ours.
    pub fn from_code(code: u8) -> Option<AccessState> {
        AccessState::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Its name in configuration files and logs: `"active/optimized"`,
    /// `"active/non-optimized"`, `"standby"`, `"unavailable"`; and
    /// `"transitioning"`, in logs only.
    pub const fn name(self) -> &'static str {
        match self {
            AccessState::ActiveOptimized => "active/optimized",
            AccessState::ActiveNonOptimized => "active/non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
            AccessState::Transitioning => "transitioning",
        }
    }

    /// The state named `name` (see [`AccessState::name`]).
    pub fn from_name(name: &str) -> Option<AccessState> {
        AccessState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Its bit in byte 1 of a target port group descriptor: AO_SUP,
    /// AN_SUP, S_SUP, U_SUP or T_SUP (SPC-5 6.36.2).
    pub const fn supported_bit(self) -> u8 {
        match self {
            AccessState::Transitioning => T_SUP,
            _ => 1 << self.code(),
        }
    }
}

impl std::fmt::Display for AccessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// T_SUP: the group may be reported transitioning (bit 7 of byte 1 of a
/// target port group descriptor).
const T_SUP: u8 = 0x80;

/// One target port group as configured, or as [`PortGroups::snapshot`]
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortGroup {
    /// TARGET PORT GROUP identifier; in isoe the iSCSI target portal group tag.
    pub id: u16,
    /// Its asymmetric access state.
    pub state: AccessState,
    /// PREF: the initiator should prefer this group's ports.
    pub preferred: bool,
    /// The RELATIVE TARGET PORT IDENTIFIERs of its ports; nonzero.
    pub relative_ports: Vec<u16>,
}

/// One group as the device server keeps it.
#[derive(Debug)]
struct Group {
    id: u16,
    preferred: bool,
    relative_ports: Vec<u16>,
    state: AtomicU8,
    /// The states the group may be in, as supported-state bits: those it
    /// was configured in and has been set to. A group whose state never
    /// changes supports that one state only.
    supported: AtomicU8,
}

/// The target port groups of a SCSI target device: what REPORT TARGET PORT
/// GROUPS lists and what the access-state checks consult. Shared by every
/// logical unit of the target (each of isoe's portal groups reaches every
/// LUN); states may change while the target runs ([`PortGroups::set_state`]).
#[derive(Debug)]
pub struct PortGroups {
    /// By ascending identifier.
    groups: Vec<Group>,
    /// IMPLICIT TRANSITION TIME of REPORT TARGET PORT GROUPS' extended
    /// header, in seconds; 0: not specified.
    implicit_transition_time_s: u8,
    /// Whether any group is in a state that refuses commands (standby,
    /// unavailable): while none is, a command does not look its port up.
    restricted: AtomicBool,
}

impl PortGroups {
    /// The groups `groups` describe, listed by ascending identifier. The
    /// caller (the target's configuration) keeps identifiers and relative
    /// ports unique; a port listed twice belongs to the first group.
    pub fn new(mut groups: Vec<PortGroup>) -> PortGroups {
        groups.sort_by_key(|g| g.id);
        let groups = groups
            .into_iter()
            .map(|g| Group {
                id: g.id,
                preferred: g.preferred,
                relative_ports: g.relative_ports,
                state: AtomicU8::new(g.state.code()),
                supported: AtomicU8::new(g.state.supported_bit()),
            })
            .collect();
        let groups = PortGroups {
            groups,
            // isoe makes no implicit transitions yet: there is no time to
            // announce, and initiators use their own (Linux: 60 s).
            implicit_transition_time_s: 0,
            restricted: AtomicBool::new(false),
        };
        groups.note_restrictions();
        groups
    }

    fn note_restrictions(&self) {
        let any = self.groups.iter().any(|g| {
            !matches!(
                AccessState::from_code(g.state.load(Ordering::Acquire)),
                Some(AccessState::ActiveOptimized | AccessState::ActiveNonOptimized)
            )
        });
        self.restricted.store(any, Ordering::Release);
    }

    /// Whether some port may refuse commands: false while every group is
    /// active, the common case, which then costs a command one load.
    #[inline]
    pub fn may_refuse(&self) -> bool {
        self.restricted.load(Ordering::Relaxed)
    }

    /// One group, 1, holding one port, 1, active/optimized: a target with
    /// one portal group, and what a unit served alone reports.
    pub fn single() -> &'static PortGroups {
        static SINGLE: OnceLock<PortGroups> = OnceLock::new();
        SINGLE.get_or_init(|| {
            PortGroups::new(vec![PortGroup {
                id: 1,
                state: AccessState::ActiveOptimized,
                preferred: false,
                relative_ports: vec![1],
            }])
        })
    }

    /// Every target port of every group: the ports a registration with
    /// ALL_TG_PT covers (SPC-5 5.13.7).
    pub fn relative_ports(&self) -> Vec<u16> {
        self.groups
            .iter()
            .flat_map(|g| g.relative_ports.iter().copied())
            .collect()
    }

    fn group_with_port(&self, relative_port: u16) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.relative_ports.contains(&relative_port))
    }

    /// How many target ports the groups hold together.
    pub fn port_count(&self) -> usize {
        self.groups.iter().map(|g| g.relative_ports.len()).sum()
    }

    /// The identifier of the group holding `relative_port`, if any does.
    pub fn group_of_port(&self, relative_port: u16) -> Option<u16> {
        self.group_with_port(relative_port).map(|g| g.id)
    }

    /// The access state of the port `relative_port`; a port no group
    /// holds is treated as active/optimized.
    pub fn state_of_port(&self, relative_port: u16) -> AccessState {
        self.group_with_port(relative_port)
            .and_then(|g| AccessState::from_code(g.state.load(Ordering::Acquire)))
            .unwrap_or(AccessState::ActiveOptimized)
    }

    /// Sets the state of group `id`; false if there is no such group. The
    /// state joins the states the group reports as supported. Nothing else
    /// happens yet: SPC-5 5.16.2.6 also wants a unit attention, ASYMMETRIC
    /// ACCESS STATE CHANGED (2Ah/06h), for every I_T nexus, which whoever
    /// changes states at run time raises on the units.
    pub fn set_state(&self, id: u16, state: AccessState) -> bool {
        let Some(group) = self.groups.iter().find(|g| g.id == id) else {
            return false;
        };
        group
            .supported
            .fetch_or(state.supported_bit(), Ordering::AcqRel);
        group.state.store(state.code(), Ordering::Release);
        self.note_restrictions();
        true
    }

    /// Every group may also be in `states` (besides those it was created
    /// in and set to): what REPORT TARGET PORT GROUPS says it supports,
    /// for groups whose states move without the target's configuration
    /// (a shared unit's: every one may become the owner, go unavailable,
    /// be transitioning).
    pub fn support(&self, states: &[AccessState]) {
        let bits = states.iter().fold(0, |bits, s| bits | s.supported_bit());
        for group in &self.groups {
            group.supported.fetch_or(bits, Ordering::AcqRel);
        }
    }

    /// Every group with its current state, by ascending identifier.
    pub fn snapshot(&self) -> Vec<PortGroup> {
        self.groups
            .iter()
            .map(|g| PortGroup {
                id: g.id,
                state: AccessState::from_code(g.state.load(Ordering::Acquire))
                    .unwrap_or(AccessState::ActiveOptimized),
                preferred: g.preferred,
                relative_ports: g.relative_ports.clone(),
            })
            .collect()
    }

    /// Appends the target port group descriptors (SPC-5 6.36.2, table 202).
    fn push_descriptors(&self, data_in: &mut Vec<u8>) {
        for g in &self.groups {
            let state = g.state.load(Ordering::Acquire);
            data_in.push(u8::from(g.preferred) << 7 | state & 0x0f);
            // O_SUP, LBD_SUP zero: never offline or LBA dependent;
            // T_SUP and AO/AN/S/U_SUP for the states it may be in.
            data_in.push(g.supported.load(Ordering::Acquire) & (T_SUP | 0x0f));
            data_in.extend_from_slice(&g.id.to_be_bytes());
            data_in.push(0); // reserved
            data_in.push(STATUS_NONE);
            data_in.push(0); // vendor specific
                             // TARGET PORT COUNT is one byte: a group lists at most 255 ports.
            let ports = &g.relative_ports[..g.relative_ports.len().min(255)];
            data_in.push(ports.len() as u8);
            for port in ports {
                data_in.extend_from_slice(&[0, 0]); // obsolete
                data_in.extend_from_slice(&port.to_be_bytes());
            }
        }
    }
}

/// STATUS CODE 00h: no status available (no state was altered by SET
/// TARGET PORT GROUPS or by an implicit transition).
const STATUS_NONE: u8 = 0x00;

/// PARAMETER DATA FORMAT (CDB byte 1, bits 7:5) of REPORT TARGET PORT GROUPS.
const LENGTH_ONLY_HEADER: u8 = 0b000;
const EXTENDED_HEADER: u8 = 0b001;

/// REPORT TARGET PORT GROUPS (SPC-5 6.36): every group of the target, in
/// the length-only header format (000b) or the extended header format
/// (001b), which adds FORMAT TYPE and IMPLICIT TRANSITION TIME.
pub(crate) fn report_target_port_groups(
    groups: &PortGroups,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<(), Sense> {
    let format = cdb[1] >> 5;
    let allocation_length = cdb::u32_at(cdb, 6);
    let start = data_in.len();
    data_in.extend_from_slice(&[0; 4]); // RETURN DATA LENGTH
    match format {
        LENGTH_ONLY_HEADER => {}
        EXTENDED_HEADER => {
            data_in.push(EXTENDED_HEADER << 4); // FORMAT TYPE
            data_in.push(groups.implicit_transition_time_s);
            data_in.extend_from_slice(&[0, 0]);
        }
        _ => return Err(Sense::invalid_field_in_cdb(1, 7)),
    }
    groups.push_descriptors(data_in);
    // RETURN DATA LENGTH: the bytes that follow it, header and all (n - 3).
    let length = (data_in.len() - start - 4) as u32;
    data_in[start..start + 4].copy_from_slice(&length.to_be_bytes());
    crate::data_in::truncate_to_allocation_length(data_in, allocation_length);
    Ok(())
}

/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE (04h/0Bh).
pub const fn standby_sense() -> Sense {
    Sense::new(crate::sense::sense_key::NOT_READY, 0x04, 0x0b)
}

/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE (04h/0Ch).
pub const fn unavailable_sense() -> Sense {
    Sense::new(crate::sense::sense_key::NOT_READY, 0x04, 0x0c)
}

/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE
/// TRANSITION (04h/0Ah).
pub const fn transitioning_sense() -> Sense {
    Sense::new(crate::sense::sense_key::NOT_READY, 0x04, 0x0a)
}

/// Whether `cdb` may run through a port in `state`; else the NOT READY
/// sense to end it with. SPC-5 5.16.2.4.4 lists what a port in standby
/// serves, 5.16.2.4.5 what one in unavailable serves, 5.16.2.4.6 what one
/// transitioning serves; of those isoe has INQUIRY, REPORT LUNS, REPORT
/// TARGET PORT GROUPS and REQUEST SENSE, and in standby also MODE SENSE,
/// MODE SELECT and PERSISTENT RESERVE IN and OUT. In standby READ CAPACITY (10) and (16) are served too, as LIO
/// does: Linux reads the capacity of every path when it scans, and a path
/// whose capacity came back empty is refused by multipathd when it should
/// take over. Everything else, TEST UNIT READY included, is refused: that
/// is how an initiator learns the path is not for I/O.
pub(crate) fn check_access(state: AccessState, cdb: &[u8]) -> Result<(), Sense> {
    let opcode = cdb[0];
    let service_action = cdb::service_action(cdb);
    let reports = matches!(opcode, INQUIRY | REPORT_LUNS | REQUEST_SENSE)
        || (opcode == MAINTENANCE_IN && service_action == REPORT_TARGET_PORT_GROUPS_SA);
    // SPC-5 5.16.2.4.4-5: SET TARGET PORT GROUPS too, so that a path in
    // standby can be made active through itself.
    let reporting =
        reports || (opcode == MAINTENANCE_OUT && service_action == SET_TARGET_PORT_GROUPS_SA);
    match state {
        AccessState::ActiveOptimized | AccessState::ActiveNonOptimized => Ok(()),
        AccessState::Standby => {
            let allowed = reporting
                || matches!(
                    opcode,
                    MODE_SENSE_6
                        | MODE_SENSE_10
                        | MODE_SELECT_6
                        | MODE_SELECT_10
                        | PERSISTENT_RESERVE_IN
                        | PERSISTENT_RESERVE_OUT
                        | READ_CAPACITY_10
                )
                || (opcode == SERVICE_ACTION_IN_16 && service_action == READ_CAPACITY_16_SA);
            if allowed {
                Ok(())
            } else {
                Err(standby_sense())
            }
        }
        AccessState::Unavailable if reporting => Ok(()),
        AccessState::Unavailable => Err(unavailable_sense()),
        // A new SET TARGET PORT GROUPS waits until the transition under
        // way has decided the states.
        AccessState::Transitioning if reports => Ok(()),
        AccessState::Transitioning => Err(transitioning_sense()),
    }
}

/// Whoever moves a unit's access states when an initiator asks (SET TARGET
/// PORT GROUPS, explicit ALUA): the gateways of a shared unit.
pub trait ExplicitAlua: Send + Sync + std::fmt::Debug {
    /// Puts each group in the state asked, the request coming through the
    /// port `relative_port`; or the sense that refuses it. Only the
    /// active/optimized request of a group is acted on: the other groups
    /// follow from which one owns the unit.
    fn set_target_port_groups(
        &self,
        relative_port: u16,
        requests: &[(u16, AccessState)],
    ) -> Result<(), Sense>;
}

/// SET TARGET PORT GROUPS (SPC-5 6.46): a four-byte header, then one
/// four-byte descriptor per group (ASYMMETRIC ACCESS STATE in byte 0's
/// low nibble, TARGET PORT GROUP in bytes 2-3).
pub(crate) fn set_target_port_groups(
    groups: &PortGroups,
    handler: &dyn ExplicitAlua,
    relative_port: u16,
    cdb: &[u8],
    data_out: &[u8],
) -> Result<(), Sense> {
    let length = cdb::u32_at(cdb, 6) as usize;
    if length == 0 {
        return Ok(());
    }
    let Some(list) = data_out.get(..length) else {
        return Err(Sense::parameter_list_length_error());
    };
    if length < 4 || !(length - 4).is_multiple_of(4) {
        return Err(Sense::parameter_list_length_error());
    }
    let mut requests = Vec::new();
    for (index, descriptor) in list[4..].chunks(4).enumerate() {
        let at = (4 + index * 4) as u16;
        // SPC-5 6.46: transitioning is the device server's, never asked for.
        let state = AccessState::from_code(descriptor[0] & 0x0f)
            .filter(|s| *s != AccessState::Transitioning);
        let Some(state) = state else {
            return Err(Sense::invalid_field_in_parameter_list(at, Some(3)));
        };
        let id = u16::from_be_bytes([descriptor[2], descriptor[3]]);
        if !groups.groups.iter().any(|g| g.id == id) {
            return Err(Sense::invalid_field_in_parameter_list(at + 2, None));
        }
        requests.push((id, state));
    }
    handler.set_target_port_groups(relative_port, &requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtpg(format: u8, allocation_length: u32) -> [u8; 12] {
        let mut cdb = [0u8; 12];
        cdb[0] = MAINTENANCE_IN;
        cdb[1] = format << 5 | REPORT_TARGET_PORT_GROUPS_SA as u8;
        cdb[6..10].copy_from_slice(&allocation_length.to_be_bytes());
        cdb
    }

    fn two_groups() -> PortGroups {
        PortGroups::new(vec![
            PortGroup {
                id: 2,
                state: AccessState::Standby,
                preferred: false,
                relative_ports: vec![2],
            },
            PortGroup {
                id: 1,
                state: AccessState::ActiveOptimized,
                preferred: true,
                relative_ports: vec![1],
            },
        ])
    }

    #[test]
    fn length_only_header_lists_every_group_by_identifier() {
        let mut data = Vec::new();
        report_target_port_groups(&two_groups(), &rtpg(0, 4096), &mut data).unwrap();
        #[rustfmt::skip]
        let expected = [
            0, 0, 0, 24, // RETURN DATA LENGTH
            0x80, 0x01, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, // PREF, A/O; AO_SUP; group 1; port 1
            0x02, 0x04, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, // standby; S_SUP; group 2; port 2
        ];
        assert_eq!(data, expected);
    }

    #[test]
    fn extended_header_has_format_type_and_transition_time() {
        let mut data = Vec::new();
        report_target_port_groups(PortGroups::single(), &rtpg(1, 4096), &mut data).unwrap();
        #[rustfmt::skip]
        let expected = [
            0, 0, 0, 16, // RETURN DATA LENGTH: header bytes 4..8 and one descriptor
            0x10, 0, 0, 0, // FORMAT TYPE 001b, IMPLICIT TRANSITION TIME 0
            0x00, 0x01, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
        ];
        assert_eq!(data, expected);
    }

    #[test]
    fn other_formats_are_refused_and_short_allocations_truncate() {
        let mut data = Vec::new();
        let sense =
            report_target_port_groups(PortGroups::single(), &rtpg(2, 4096), &mut data).unwrap_err();
        assert_eq!((sense.key, sense.asc, sense.ascq), (0x05, 0x24, 0x00));
        let pointer = sense.field_pointer.unwrap();
        assert_eq!((pointer.byte, pointer.bit_pointer), (1, Some(7)));
        let mut data = Vec::new();
        report_target_port_groups(&two_groups(), &rtpg(0, 6), &mut data).unwrap();
        assert_eq!(data, [0, 0, 0, 24, 0x80, 0x01]);
    }

    #[test]
    fn a_state_set_at_run_time_is_reported_and_supported() {
        let groups = two_groups();
        assert_eq!(groups.state_of_port(2), AccessState::Standby);
        assert!(groups.set_state(2, AccessState::ActiveNonOptimized));
        assert!(!groups.set_state(3, AccessState::Standby));
        assert_eq!(groups.state_of_port(2), AccessState::ActiveNonOptimized);
        let mut data = Vec::new();
        report_target_port_groups(&groups, &rtpg(0, 4096), &mut data).unwrap();
        assert_eq!(&data[16..18], [0x01, 0x06], "A/N now; S_SUP and AN_SUP");
        assert_eq!(groups.snapshot()[1].state, AccessState::ActiveNonOptimized);
    }

    #[test]
    fn ports_map_to_their_groups() {
        let groups = two_groups();
        assert_eq!(groups.group_of_port(1), Some(1));
        assert_eq!(groups.group_of_port(2), Some(2));
        assert_eq!(groups.group_of_port(7), None);
        assert_eq!(groups.state_of_port(7), AccessState::ActiveOptimized);
    }

    #[test]
    fn standby_and_unavailable_serve_only_their_lists() {
        let tur = [0u8; 6];
        let read10 = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        let mode_sense = [MODE_SENSE_6, 0, 0x3f, 0, 255, 0];
        let inquiry = [INQUIRY, 0, 0, 0, 96, 0];
        let rsoc = [MAINTENANCE_IN, 0x0c, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
        let mut read_capacity16 = [0u8; 16];
        read_capacity16[..2].copy_from_slice(&[SERVICE_ACTION_IN_16, 0x10]);
        let mut get_lba_status = read_capacity16;
        get_lba_status[1] = 0x12;
        for state in [
            AccessState::ActiveOptimized,
            AccessState::ActiveNonOptimized,
        ] {
            assert_eq!(check_access(state, &read10), Ok(()));
        }
        let standby = AccessState::Standby;
        assert_eq!(check_access(standby, &tur), Err(standby_sense()));
        assert_eq!(check_access(standby, &read10), Err(standby_sense()));
        assert_eq!(check_access(standby, &rsoc), Err(standby_sense()));
        assert_eq!(check_access(standby, &mode_sense), Ok(()));
        assert_eq!(check_access(standby, &inquiry), Ok(()));
        assert_eq!(check_access(standby, &rtpg(0, 8)), Ok(()));
        assert_eq!(check_access(standby, &read_capacity16), Ok(()));
        assert_eq!(check_access(standby, &[READ_CAPACITY_10; 10]), Ok(()));
        assert_eq!(check_access(standby, &get_lba_status), Err(standby_sense()));
        let unavailable = AccessState::Unavailable;
        assert_eq!(check_access(unavailable, &tur), Err(unavailable_sense()));
        assert_eq!(
            check_access(unavailable, &mode_sense),
            Err(unavailable_sense())
        );
        assert_eq!(check_access(unavailable, &inquiry), Ok(()));
        assert_eq!(check_access(unavailable, &rtpg(1, 8)), Ok(()));
        assert_eq!(check_access(unavailable, &[REPORT_LUNS; 12]), Ok(()));
        assert_eq!(
            check_access(unavailable, &read_capacity16),
            Err(unavailable_sense())
        );
    }

    #[test]
    fn transitioning_serves_only_what_reports_state() {
        let transitioning = AccessState::Transitioning;
        let stpg = [MAINTENANCE_OUT, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0];
        for cdb in [&[0u8; 6][..], &[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], &stpg] {
            assert_eq!(check_access(transitioning, cdb), Err(transitioning_sense()));
        }
        let sense = transitioning_sense();
        assert_eq!((sense.key, sense.asc, sense.ascq), (0x02, 0x04, 0x0a));
        assert_eq!(
            check_access(transitioning, &[INQUIRY, 0, 0, 0, 96, 0]),
            Ok(())
        );
        assert_eq!(check_access(transitioning, &[REPORT_LUNS; 12]), Ok(()));
        assert_eq!(
            check_access(transitioning, &[REQUEST_SENSE, 0, 0, 0, 18, 0]),
            Ok(())
        );
        assert_eq!(check_access(transitioning, &rtpg(0, 8)), Ok(()));
    }

    #[test]
    fn a_transitioning_group_is_reported_fh_with_t_sup() {
        let groups = two_groups();
        assert!(groups.set_state(1, AccessState::Transitioning));
        assert!(groups.may_refuse());
        assert_eq!(groups.state_of_port(1), AccessState::Transitioning);
        let mut data = Vec::new();
        report_target_port_groups(&groups, &rtpg(0, 4096), &mut data).unwrap();
        assert_eq!(&data[4..6], [0x8f, 0x81], "PREF, Fh; T_SUP and AO_SUP");
        assert!(groups.set_state(1, AccessState::ActiveOptimized));
        let mut data = Vec::new();
        report_target_port_groups(&groups, &rtpg(0, 4096), &mut data).unwrap();
        assert_eq!(&data[4..6], [0x80, 0x81], "A/O again; T_SUP stays");
    }

    #[test]
    fn supported_states_are_declared_for_every_group() {
        let groups = two_groups();
        groups.support(&[AccessState::Unavailable, AccessState::Transitioning]);
        let mut data = Vec::new();
        report_target_port_groups(&groups, &rtpg(0, 4096), &mut data).unwrap();
        assert_eq!(data[5], 0x80 | 0x08 | 0x01, "group 1: T_SUP, U_SUP, AO_SUP");
        assert_eq!(data[17], 0x80 | 0x08 | 0x04, "group 2: T_SUP, U_SUP, S_SUP");
    }

    #[derive(Debug)]
    struct Accepts;

    impl ExplicitAlua for Accepts {
        fn set_target_port_groups(&self, _: u16, _: &[(u16, AccessState)]) -> Result<(), Sense> {
            Ok(())
        }
    }

    #[test]
    fn set_target_port_groups_refuses_to_be_asked_for_transitioning() {
        let stpg = [MAINTENANCE_OUT, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0];
        let groups = two_groups();
        let asked = [0, 0, 0, 0, 0x0f, 0, 0, 1];
        let sense = set_target_port_groups(&groups, &Accepts, 1, &stpg, &asked).unwrap_err();
        assert_eq!((sense.key, sense.asc, sense.ascq), (0x05, 0x26, 0x00));
        let asked = [0, 0, 0, 0, 0x01, 0, 0, 1];
        assert_eq!(
            set_target_port_groups(&groups, &Accepts, 1, &stpg, &asked),
            Ok(())
        );
    }

    #[test]
    fn names_and_codes_round_trip() {
        for state in AccessState::ALL {
            assert_eq!(AccessState::from_name(state.name()), Some(state));
            assert_eq!(AccessState::from_code(state.code()), Some(state));
        }
        assert_eq!(AccessState::from_name("optimized"), None);
    }
}
