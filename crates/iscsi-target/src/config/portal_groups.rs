//! The portals and their groups: the top-level `portals` and the
//! `[[portal_group]]` tables.
//!
//! Each portal group is one iSCSI target portal group (its tag is the
//! TargetPortalGroupTag of logins and of SendTargets' `TargetAddress`), and
//! so one SCSI target port (RELATIVE TARGET PORT IDENTIFIER = tag) and one
//! ALUA target port group (identifier = tag) with an asymmetric access
//! state. The top-level `portals` are group 1, active/optimized; a
//! `[[portal_group]]` may not then use tag 1, so that the file says in one
//! place what group 1 is.

use super::error::ConfigError;
use super::places::{KeyPlace, PortalPlaces};
use super::reader::Reader;
use isoe_config::Field;
use isoe_scsi::AccessState;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The IANA-assigned iSCSI port, used for portals written without a port.
pub const DEFAULT_PORT: u16 = 3260;

/// The tag of the top-level `portals`, and of every portal when there is
/// no `[[portal_group]]`.
pub const DEFAULT_PORTAL_GROUP_TAG: u16 = 1;

pub(super) const PORTAL_GROUP_KEYS: &[&str] = &["tag", "portals", "alua_state", "preferred"];

/// The values of `alua_state`, as written in the configuration.
const ALUA_STATES: [&str; 4] = [
    AccessState::ActiveOptimized.name(),
    AccessState::ActiveNonOptimized.name(),
    AccessState::Standby.name(),
    AccessState::Unavailable.name(),
];

/// One portal group: a `[[portal_group]]`, or group 1 of the top-level
/// `portals`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalGroup {
    /// `tag`, 1..=65535: the target portal group tag, the relative target
    /// port identifier and the ALUA target port group of its portals.
    pub tag: u16,
    /// Its portals, as indices into [`crate::config::Config::portals`];
    /// never empty.
    pub portals: Vec<usize>,
    /// `alua_state`: what REPORT TARGET PORT GROUPS says of the group, and
    /// what commands through it may do; active/optimized by default.
    pub alua_state: AccessState,
    /// `preferred`: the PREF bit of REPORT TARGET PORT GROUPS; false by default.
    pub preferred: bool,
}

impl PortalGroup {
    /// Group 1 holding the portals `0..count`: active/optimized, not preferred.
    pub fn default_group(count: usize) -> PortalGroup {
        PortalGroup {
            tag: DEFAULT_PORTAL_GROUP_TAG,
            portals: (0..count).collect(),
            alua_state: AccessState::ActiveOptimized,
            preferred: false,
        }
    }
}

/// A portal read so far: its address, its group and where it was written.
struct Seen {
    addr: SocketAddr,
    tag: u16,
    place: KeyPlace,
}

/// The portals (top-level first, then each group's, in file order), their
/// groups (by ascending tag) and where each portal was written.
type Portals = (Vec<SocketAddr>, Vec<PortalGroup>, PortalPlaces);

/// Reads the top-level `portals` and the `[[portal_group]]` tables into
/// the flat list of portals, the groups and the portals' places. With
/// neither, 127.0.0.1:3260 in group 1, written nowhere.
pub(super) fn read_portals_and_groups(
    r: &Reader,
    top_level: Option<Field>,
    groups: Option<Field>,
) -> Result<Portals, ConfigError> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut portal_groups = Vec::new();
    // The line of each `[[portal_group]]`'s tag, for duplicates.
    let mut tag_lines: Vec<(u16, usize)> = Vec::new();
    let has_top_level = top_level.is_some();
    if let Some(field) = top_level {
        let empty = "at least one portal is needed (leave `portals` out for 127.0.0.1:3260)";
        let indices = read_group_portals(r, field, DEFAULT_PORTAL_GROUP_TAG, &mut seen, empty)?;
        portal_groups.push(PortalGroup::default_group(indices.len()));
    }
    if let Some(field) = groups {
        let (key, offset) = (field.key.clone(), field.offset);
        let tables = r.tables(field, PORTAL_GROUP_KEYS)?;
        if tables.is_empty() {
            return Err(r.invalid(
                offset,
                &key,
                "an empty list of portal groups: give at least one [[portal_group]], \
                 or leave `portal_group` out",
            ));
        }
        for mut t in tables {
            let tag_field = r.required(
                &mut t,
                "tag",
                "every portal group needs a tag, 1..=65535: its TargetPortalGroupTag",
            )?;
            let tag = r.u16_in(&tag_field, 1, u16::MAX)?;
            if tag == DEFAULT_PORTAL_GROUP_TAG && has_top_level {
                return Err(r.at(
                    &tag_field,
                    "portal group 1 is the group of the top-level `portals`: list those \
                     addresses in this [[portal_group]] instead, or give it another tag",
                ));
            }
            if let Some((_, line)) = tag_lines.iter().find(|(t, _)| *t == tag) {
                return Err(r.at(
                    &tag_field,
                    format!("portal group {tag} is already defined at line {line}"),
                ));
            }
            tag_lines.push((tag, r.line(tag_field.offset)));
            let portals_field = r.required(
                &mut t,
                "portals",
                "every portal group needs its portals, like portals = [\"10.0.0.1:3260\"]",
            )?;
            let empty = "at least one portal is needed in every portal group";
            let portals = read_group_portals(r, portals_field, tag, &mut seen, empty)?;
            let alua_state = match t.take("alua_state") {
                Some(f) => {
                    let name = r.choice(&f, &ALUA_STATES)?;
                    AccessState::from_name(name).unwrap_or(AccessState::ActiveOptimized)
                }
                None => AccessState::ActiveOptimized,
            };
            let preferred = match t.take("preferred") {
                Some(f) => r.bool(&f)?,
                None => false,
            };
            debug_assert!(t.entries.is_empty(), "tables() denied unknown keys");
            portal_groups.push(PortalGroup {
                tag,
                portals,
                alua_state,
                preferred,
            });
        }
    }
    if portal_groups.is_empty() {
        let localhost = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT);
        let groups = vec![PortalGroup::default_group(1)];
        return Ok((vec![localhost], groups, PortalPlaces::default()));
    }
    portal_groups.sort_by_key(|g| g.tag);
    let mut places = PortalPlaces::default();
    for s in &seen {
        places.insert(s.addr, s.place.clone());
    }
    Ok((
        seen.into_iter().map(|s| s.addr).collect(),
        portal_groups,
        places,
    ))
}

/// Reads one array of portals for group `tag`, appending them to `seen`;
/// returns their indices. An address already read (in this group or
/// another) is refused at its element.
fn read_group_portals(
    r: &Reader,
    field: Field,
    tag: u16,
    seen: &mut Vec<Seen>,
    empty: &str,
) -> Result<Vec<usize>, ConfigError> {
    let (key, offset) = (field.key.clone(), field.offset);
    let mut indices = Vec::new();
    for item in r.array(field, "an array of addresses like [\"0.0.0.0:3260\"]")? {
        let addr = read_portal(r, &item)?;
        if let Some(earlier) = seen.iter().find(|s| s.addr == addr) {
            let message = if earlier.tag == tag {
                format!("portal {addr} is listed twice")
            } else {
                format!(
                    "portal {addr} is already in portal group {} (line {}): \
                     a portal belongs to one group",
                    earlier.tag, earlier.place.line
                )
            };
            return Err(r.at(&item, message));
        }
        indices.push(seen.len());
        seen.push(Seen {
            addr,
            tag,
            place: KeyPlace {
                line: r.line(item.offset),
                key: item.key.clone(),
            },
        });
    }
    if indices.is_empty() {
        return Err(r.invalid(offset, &key, empty));
    }
    Ok(indices)
}

/// One portal: `"ADDRESS:PORT"`, or `"ADDRESS"` for port 3260.
fn read_portal(r: &Reader, item: &Field) -> Result<SocketAddr, ConfigError> {
    let text = r.string(item)?;
    text.parse::<SocketAddr>()
        .or_else(|_| {
            text.parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, DEFAULT_PORT))
        })
        .map_err(|_| {
            let example = "\"0.0.0.0:3260\" or \"[::]:3260\"";
            r.at(
                item,
                format!("expected an address like {example}, found {text:?}"),
            )
        })
}
