//! What a multipath initiator reads from the logical unit through each
//! path: who the LU is and which target port the path reaches (VPD page
//! 83h), the states of the target port groups (REPORT TARGET PORT GROUPS),
//! and the sense data by which a path says it cannot serve (SPC-5 5.16).

use crate::command::{Outcome, ScsiStatus};
use std::fmt;

/// CHECK CONDITION.
const CHECK_CONDITION: u8 = 0x02;
/// BUSY.
const BUSY: u8 = 0x08;
/// TASK SET FULL.
const TASK_SET_FULL: u8 = 0x28;
/// Sense key NOT READY.
const NOT_READY: u8 = 0x02;
/// Sense key ILLEGAL REQUEST.
const ILLEGAL_REQUEST: u8 = 0x05;
/// Sense key UNIT ATTENTION.
const UNIT_ATTENTION: u8 = 0x06;

/// An ALUA asymmetric access state (SPC-5 6.37, REPORT TARGET PORT GROUPS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessState {
    /// 0h: every command, at full speed.
    ActiveOptimized,
    /// 1h: every command, maybe slower.
    ActiveNonOptimized,
    /// 2h: only the commands that report or manage; I/O is refused (02/04/0B).
    Standby,
    /// 3h: almost nothing (02/04/0C).
    Unavailable,
    /// 4h: some LBAs through this group only. isoe sends no I/O there.
    LbaDependent,
    /// Eh: the port is offline.
    Offline,
    /// Fh: between states (02/04/0A).
    Transitioning,
}

impl AccessState {
    /// The state of an ASYMMETRIC ACCESS STATE field; None for a reserved code.
    pub fn from_code(code: u8) -> Option<AccessState> {
        Some(match code & 0x0f {
            0x0 => AccessState::ActiveOptimized,
            0x1 => AccessState::ActiveNonOptimized,
            0x2 => AccessState::Standby,
            0x3 => AccessState::Unavailable,
            0x4 => AccessState::LbaDependent,
            0xe => AccessState::Offline,
            0xf => AccessState::Transitioning,
            _ => return None,
        })
    }

    /// The name SPC gives it, as isoe's target configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            AccessState::ActiveOptimized => "active/optimized",
            AccessState::ActiveNonOptimized => "active/non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
            AccessState::LbaDependent => "lba-dependent",
            AccessState::Offline => "offline",
            AccessState::Transitioning => "transitioning",
        }
    }

    /// True for the two states that serve I/O.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            AccessState::ActiveOptimized | AccessState::ActiveNonOptimized
        )
    }
}

impl fmt::Display for AccessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A logical unit's name: the designator of VPD page 83h with logical unit
/// association by which two paths are told to reach one LU or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuName {
    /// DESIGNATOR TYPE: 3 NAA, 2 EUI-64, 8 SCSI name string, 1 T10 vendor ID.
    pub designator_type: u8,
    /// The designator's bytes.
    pub value: Vec<u8>,
}

impl fmt::Display for LuName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex =
            |f: &mut fmt::Formatter<'_>| self.value.iter().try_for_each(|b| write!(f, "{b:02x}"));
        match self.designator_type {
            3 => {
                f.write_str("NAA 0x")?;
                hex(f)
            }
            2 => {
                f.write_str("EUI-64 0x")?;
                hex(f)
            }
            _ => {
                let text: String = self
                    .value
                    .iter()
                    .take_while(|b| **b != 0)
                    .map(|&b| {
                        if (0x20..0x7f).contains(&b) {
                            char::from(b)
                        } else {
                            '.'
                        }
                    })
                    .collect();
                write!(f, "designator type {} {text:?}", self.designator_type)
            }
        }
    }
}

/// What VPD page 83h says through one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathIdentity {
    /// The LU.
    pub lu: LuName,
    /// The RELATIVE TARGET PORT IDENTIFIER of the port the path reaches.
    pub relative_port: Option<u16>,
    /// The TARGET PORT GROUP the port is in.
    pub port_group: Option<u16>,
}

/// Parses VPD page 83h (SPC-5 7.7.6): the LU's designator (NAA first, then
/// EUI-64, SCSI name string, T10 vendor ID, all of logical unit
/// association) and the target port's relative port and port group
/// designators (target port association).
pub fn parse_device_identification(page: &[u8]) -> Result<PathIdentity, String> {
    if page.len() < 4 || page[1] != 0x83 {
        return Err(format!(
            "VPD page 83h came back as {} bytes, not a device identification page",
            page.len()
        ));
    }
    let end = (4 + usize::from(u16::from_be_bytes([page[2], page[3]]))).min(page.len());
    let mut lu: Option<LuName> = None;
    let mut relative_port = None;
    let mut port_group = None;
    let mut at = 4;
    while at + 4 <= end {
        let association = page[at + 1] >> 4 & 0x03;
        let kind = page[at + 1] & 0x0f;
        let length = usize::from(page[at + 3]);
        let Some(value) = page.get(at + 4..at + 4 + length) else {
            break;
        };
        match (association, kind) {
            (0, 3 | 2 | 8 | 1) => {
                let rank = |t: u8| match t {
                    3 => 0,
                    2 => 1,
                    8 => 2,
                    _ => 3,
                };
                if lu
                    .as_ref()
                    .is_none_or(|l| rank(kind) < rank(l.designator_type))
                {
                    lu = Some(LuName {
                        designator_type: kind,
                        value: value.to_vec(),
                    });
                }
            }
            (1, 4) if length >= 4 => {
                relative_port = Some(u16::from_be_bytes([value[2], value[3]]));
            }
            (1, 5) if length >= 4 => {
                port_group = Some(u16::from_be_bytes([value[2], value[3]]));
            }
            _ => {}
        }
        at += 4 + length;
    }
    let lu = lu.ok_or_else(|| {
        "VPD page 83h names the logical unit by no NAA, EUI-64, SCSI name or T10 \
         designator, so its paths cannot be told to reach one LU"
            .to_string()
    })?;
    Ok(PathIdentity {
        lu,
        relative_port,
        port_group,
    })
}

/// One target port group descriptor of REPORT TARGET PORT GROUPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortGroup {
    /// TARGET PORT GROUP.
    pub group: u16,
    /// ASYMMETRIC ACCESS STATE (None: a reserved code).
    pub state: Option<AccessState>,
    /// PREF: the preferred group.
    pub preferred: bool,
    /// Its ports' relative target port identifiers.
    pub ports: Vec<u16>,
}

/// Parses REPORT TARGET PORT GROUPS parameter data (SPC-5 6.36.2), either
/// header format. Descriptors cut short by the allocation length are left out.
pub fn parse_report_target_port_groups(data: &[u8]) -> Result<Vec<PortGroup>, String> {
    if data.len() < 4 {
        return Err(format!(
            "REPORT TARGET PORT GROUPS returned {} bytes, less than its header",
            data.len()
        ));
    }
    let length = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let end = length.saturating_add(4).min(data.len());
    // The extended header says FORMAT TYPE 001b in byte 4; the length-only
    // one starts its first descriptor there, whose byte 0 holds PREF and
    // the state, never 0x10 exactly with a valid state.
    let mut at = if data.len() >= 8 && data[4] & 0x70 == 0x10 {
        8
    } else {
        4
    };
    let mut groups = Vec::new();
    while at + 8 <= end {
        let d = &data[at..end];
        let count = usize::from(d[7]);
        if d.len() < 8 + 4 * count {
            break;
        }
        groups.push(PortGroup {
            group: u16::from_be_bytes([d[2], d[3]]),
            state: AccessState::from_code(d[0]),
            preferred: d[0] & 0x80 != 0,
            ports: (0..count)
                .map(|i| u16::from_be_bytes([d[8 + 4 * i + 2], d[8 + 4 * i + 3]]))
                .collect(),
        });
        at += 8 + 4 * count;
    }
    Ok(groups)
}

/// What a command's outcome says of the path it went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing about the path: the answer goes to the caller.
    Done,
    /// 06/2A/06 ASYMMETRIC ACCESS STATE CHANGED or 06/2A/07 IMPLICIT
    /// ASYMMETRIC ACCESS STATE TRANSITION FAILED: the command was not run;
    /// the states are read again and it is sent again.
    StatesChanged,
    /// 02/04/0A: the port is changing state; the command is sent again
    /// after a short wait, through whichever path serves by then.
    Transitioning,
    /// 02/04/0B (standby) or 02/04/0C (unavailable): this path serves no
    /// I/O; the command goes through another.
    Inaccessible(AccessState),
}

/// Reads a command's outcome for the sense SPC-5 5.16 gives a multipath
/// initiator to act on.
pub fn classify(outcome: &Outcome) -> Verdict {
    let Outcome::Scsi(status) = outcome else {
        return Verdict::Done;
    };
    if status.response != 0 || status.status != CHECK_CONDITION {
        return Verdict::Done;
    }
    match status.sense_key() {
        Some((UNIT_ATTENTION, 0x2a, 0x06 | 0x07)) => Verdict::StatesChanged,
        Some((NOT_READY, 0x04, 0x0a)) => Verdict::Transitioning,
        Some((NOT_READY, 0x04, 0x0b)) => Verdict::Inaccessible(AccessState::Standby),
        Some((NOT_READY, 0x04, 0x0c)) => Verdict::Inaccessible(AccessState::Unavailable),
        _ => Verdict::Done,
    }
}

/// A status worth asking again for a probe: a unit attention (a power-on or
/// reset reported once per I_T nexus), BUSY, TASK SET FULL.
pub(crate) fn retry_probe(status: &ScsiStatus) -> bool {
    status.response == 0
        && (matches!(status.status, BUSY | TASK_SET_FULL)
            || (status.status == CHECK_CONDITION
                && status.sense_key().is_some_and(|k| k.0 == UNIT_ATTENTION)))
}

/// True when the target does not know the command (ILLEGAL REQUEST): a
/// target without ALUA refusing REPORT TARGET PORT GROUPS.
pub(crate) fn illegal_request(status: &ScsiStatus) -> bool {
    status.response == 0
        && status.status == CHECK_CONDITION
        && status.sense_key().is_some_and(|k| k.0 == ILLEGAL_REQUEST)
}
