//! The top-level `portals` and the `[[portal_group]]` tables: what they
//! parse into, and what is refused, with the file, line and key.

use isoe_scsi::{AccessState, PortGroup};
use isoe_target::config::{Config, PortalGroup, DEFAULT_PORTAL_GROUP_TAG};
use std::net::SocketAddr;

mod common;

const TARGET: &str = "[[target]]\nname = \"iqn.2026-11.io.isoe:t\"\n";

fn parse(text: &str) -> Config {
    Config::parse(&format!("{text}{TARGET}"), None).unwrap()
}

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// Checks that `text` (followed by a target) is refused at `line`, `key`.
fn refused(text: &str, line: usize, key: &str, needle: &str) -> String {
    common::refused_at(&format!("{text}{TARGET}"), line, key, needle)
}

#[test]
fn without_groups_every_portal_is_in_group_1_active_optimized() {
    let config = parse("portals = [\"10.0.0.1\", \"10.0.0.2:3261\"]\n");
    assert_eq!(
        config.portals,
        [addr("10.0.0.1:3260"), addr("10.0.0.2:3261")]
    );
    assert_eq!(config.portal_groups, [PortalGroup::default_group(2)]);
    assert_eq!(config.portal_group_tag(0), 1);
    assert_eq!(config.portal_group_tag(1), 1);
    let default = parse("");
    assert_eq!(default.portals, [addr("127.0.0.1:3260")]);
    assert_eq!(default.portal_groups, [PortalGroup::default_group(1)]);
    assert_eq!(
        default.port_groups(),
        [PortGroup {
            id: 1,
            state: AccessState::ActiveOptimized,
            preferred: false,
            relative_ports: vec![1],
        }]
    );
}

#[test]
fn groups_parse_with_their_states_and_portals_in_file_order() {
    let config = parse(
        "portals = [\"10.0.0.1:3260\"]\n\
         [[portal_group]]\n\
         tag = 7\n\
         portals = [\"10.0.1.1:3260\", \"[fd00::1]:3260\"]\n\
         alua_state = \"standby\"\n\
         [[portal_group]]\n\
         tag = 2\n\
         portals = [\"10.0.2.1\"]\n\
         alua_state = \"active/non-optimized\"\n\
         preferred = true\n",
    );
    assert_eq!(
        config.portals,
        [
            addr("10.0.0.1:3260"),
            addr("10.0.1.1:3260"),
            addr("[fd00::1]:3260"),
            addr("10.0.2.1:3260"),
        ]
    );
    assert_eq!(
        config.portal_groups,
        [
            PortalGroup::default_group(1),
            PortalGroup {
                tag: 2,
                portals: vec![3],
                alua_state: AccessState::ActiveNonOptimized,
                preferred: true,
            },
            PortalGroup {
                tag: 7,
                portals: vec![1, 2],
                alua_state: AccessState::Standby,
                preferred: false,
            },
        ],
        "by ascending tag"
    );
    let tags: Vec<u16> = (0..4).map(|i| config.portal_group_tag(i)).collect();
    assert_eq!(tags, [1, 7, 7, 2]);
    let ids: Vec<(u16, AccessState, Vec<u16>)> = config
        .port_groups()
        .into_iter()
        .map(|g| (g.id, g.state, g.relative_ports))
        .collect();
    assert_eq!(
        ids,
        [
            (1, AccessState::ActiveOptimized, vec![1]),
            (2, AccessState::ActiveNonOptimized, vec![2]),
            (7, AccessState::Standby, vec![7]),
        ]
    );
}

#[test]
fn groups_alone_replace_the_default_portal_and_may_use_tag_1() {
    let config = parse(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:0\"]\n\
         [[portal_group]]\ntag = 65535\nportals = [\"127.0.0.2:0\"]\nalua_state = \"unavailable\"\n",
    );
    assert_eq!(config.portals, [addr("127.0.0.1:0"), addr("127.0.0.2:0")]);
    assert_eq!(config.portal_group_tag(1), 65535);
    assert_eq!(config.portal_groups[1].alua_state, AccessState::Unavailable);
}

#[test]
fn set_portals_puts_every_portal_in_group_1() {
    let mut config = parse(
        "[[portal_group]]\ntag = 3\nportals = [\"10.0.0.1\"]\nalua_state = \"standby\"\n\
         [[portal_group]]\ntag = 4\nportals = [\"10.0.0.2\"]\n",
    );
    config.set_portals(vec![addr("127.0.0.1:0")]);
    assert_eq!(config.portals, [addr("127.0.0.1:0")]);
    assert_eq!(config.portal_groups, [PortalGroup::default_group(1)]);
    assert_eq!(config.portal_group_tag(0), DEFAULT_PORTAL_GROUP_TAG);
}

#[test]
fn a_portal_no_group_lists_counts_in_group_1() {
    let mut config = parse("[[portal_group]]\ntag = 3\nportals = [\"10.0.0.1\"]\n");
    // Replaced by hand, not through set_portals: the new portal is in no group.
    config.portals.push(addr("10.0.0.9:3260"));
    assert_eq!(config.portal_group_tag(1), 1);
    let ids: Vec<u16> = config.port_groups().iter().map(|g| g.id).collect();
    assert_eq!(ids, [3, 1]);
}

#[test]
fn tags_are_checked() {
    refused(
        "[[portal_group]]\nportals = [\"10.0.0.1\"]\n",
        1,
        "portal_group[0].tag",
        "missing: every portal group needs a tag",
    );
    refused(
        "[[portal_group]]\ntag = 0\nportals = [\"10.0.0.1\"]\n",
        2,
        "portal_group[0].tag",
        "out of range 1..=65535",
    );
    refused(
        "[[portal_group]]\ntag = 65536\nportals = [\"10.0.0.1\"]\n",
        2,
        "portal_group[0].tag",
        "out of range 1..=65535",
    );
    let shown = refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.1\"]\n\
         [[portal_group]]\ntag = 2\nportals = [\"10.0.0.2\"]\n",
        5,
        "portal_group[1].tag",
        "portal group 2 is already defined at line 2",
    );
    assert_eq!(
        shown,
        "isoe.toml:5: portal_group[1].tag: portal group 2 is already defined at line 2"
    );
    refused(
        "portals = [\"10.0.0.1\"]\n[[portal_group]]\ntag = 1\nportals = [\"10.0.0.2\"]\n",
        3,
        "portal_group[0].tag",
        "portal group 1 is the group of the top-level `portals`",
    );
}

#[test]
fn a_portal_belongs_to_one_group() {
    let shown = refused(
        "portals = [\"10.0.0.1\"]\n\
         [[portal_group]]\ntag = 2\nportals = [\"10.0.0.2:3260\",\n  \"10.0.0.1:3260\"]\n",
        5,
        "portal_group[0].portals[1]",
        "",
    );
    assert_eq!(
        shown,
        "isoe.toml:5: portal_group[0].portals[1]: portal 10.0.0.1:3260 is already in \
         portal group 1 (line 1): a portal belongs to one group"
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.2\", \"10.0.0.2:3260\"]\n",
        3,
        "portal_group[0].portals[1]",
        "portal 10.0.0.2:3260 is listed twice",
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.2\"]\n\
         [[portal_group]]\ntag = 3\nportals = [\"10.0.0.2\"]\n",
        6,
        "portal_group[1].portals[0]",
        "already in portal group 2 (line 3)",
    );
}

#[test]
fn portals_and_states_are_checked() {
    refused(
        "[[portal_group]]\ntag = 2\n",
        1,
        "portal_group[0].portals",
        "missing: every portal group needs its portals",
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = []\n",
        3,
        "portal_group[0].portals",
        "at least one portal is needed in every portal group",
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"localhost\"]\n",
        3,
        "portal_group[0].portals[0]",
        "expected an address like",
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.1\"]\nalua_state = \"optimized\"\n",
        4,
        "portal_group[0].alua_state",
        "expected one of \"active/optimized\", \"active/non-optimized\", \"standby\", \
         \"unavailable\", found \"optimized\"",
    );
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.1\"]\npreferred = \"yes\"\n",
        4,
        "portal_group[0].preferred",
        "true or false",
    );
    refused("portal_group = []\n", 1, "portal_group", "an empty list");
}

#[test]
fn unknown_keys_are_refused_with_a_hint() {
    refused(
        "[[portal_group]]\ntag = 2\nportals = [\"10.0.0.1\"]\nalua = \"standby\"\n",
        4,
        "portal_group[0].alua",
        "alua_state",
    );
    refused(
        "[[portal_groups]]\ntag = 2\n",
        1,
        "portal_groups",
        "portal_group",
    );
}

#[test]
fn each_portal_keeps_where_it_was_written_for_the_errors_of_binding_it() {
    let mut config = parse(
        "portals = [\n  \"10.0.0.1\",\n  \"10.0.0.2\",\n]\n\n\
         [[portal_group]]\ntag = 2\nportals = [\"10.0.1.1\"]\n",
    );
    let at = |config: &Config, a: &str| config.portal_place(addr(a));
    assert_eq!(
        at(&config, "10.0.0.1:3260").as_deref(),
        Some("<config>:2: portals[0]")
    );
    assert_eq!(
        at(&config, "10.0.0.2:3260").as_deref(),
        Some("<config>:3: portals[1]")
    );
    assert_eq!(
        at(&config, "10.0.1.1:3260").as_deref(),
        Some("<config>:8: portal_group[0].portals[0]")
    );
    assert_eq!(at(&config, "10.9.9.9:3260"), None);
    assert_eq!(
        at(&parse(""), "127.0.0.1:3260"),
        None,
        "the default is in no file"
    );
    // `--listen`'s portals are in no file either.
    config.set_portals(vec![addr("10.0.0.1:3260")]);
    assert_eq!(at(&config, "10.0.0.1:3260"), None);
}
