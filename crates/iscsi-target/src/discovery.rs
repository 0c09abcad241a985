//! Text requests in full feature phase: SendTargets (RFC 7143 §4.3,
//! Appendix C) and answers to any other key. SendTargets lists every
//! portal with the tag of its portal group (`TargetAddress=ip:port,tag`).

use crate::registry::Server;
use crate::session::Session;
use isoe_wire::negotiate::SessionType;
use isoe_wire::text::{parse_pairs, push_pair, TextError};
use std::net::SocketAddr;

/// Formats a portal of the portal group `tag` for TargetAddress (RFC 7143
/// §13.8): IPv6 in brackets. A wildcard listen address is replaced by the
/// address the initiator reached.
pub fn target_address(portal: SocketAddr, tag: u16, local: SocketAddr) -> String {
    let ip = if portal.ip().is_unspecified() {
        local.ip()
    } else {
        portal.ip()
    };
    let host = match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    };
    format!("{host}:{},{tag}", portal.port())
}

/// The text of a Text Response answering `request` (key=value pairs), or
/// why the request is not a text (not pairs, a key twice, more than
/// [`isoe_wire::text::PAIRS_MAX`] pairs).
pub fn answer_text(
    server: &Server,
    session: &Session,
    request: &[u8],
    local: SocketAddr,
) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::new();
    let pairs = parse_pairs(request)?;
    for (key, value) in pairs {
        if key == "SendTargets" {
            send_targets(server, session, value, local, &mut out);
        } else {
            // RFC 7143 §6.2: a key we don't negotiate in full feature phase.
            push_pair(&mut out, key, "NotUnderstood");
        }
    }
    Ok(out)
}

fn send_targets(
    server: &Server,
    session: &Session,
    value: &str,
    local: SocketAddr,
    out: &mut Vec<u8>,
) {
    let initiator = session.initiator_name.as_str();
    let listed: Vec<_> = match (session.params.session_type, value) {
        (SessionType::Discovery, "All") => server
            .targets()
            .into_iter()
            .filter(|t| t.admits(initiator))
            .collect(),
        // RFC 7143 Appendix C: in a normal session, the session's own target.
        (SessionType::Normal, "" | "All") => session.target.iter().cloned().collect(),
        (_, name) => server
            .targets()
            .into_iter()
            .filter(|t| t.name == name && t.admits(initiator))
            .collect(),
    };
    let portals = server.portals();
    let portals: Vec<(SocketAddr, u16)> = if portals.is_empty() {
        vec![(local, crate::config::DEFAULT_PORTAL_GROUP_TAG)]
    } else {
        portals
    };
    for target in listed {
        push_pair(out, "TargetName", &target.name);
        for &(portal, tag) in &portals {
            if portal.is_ipv4() == local.is_ipv4() || !portal.ip().is_unspecified() {
                push_pair(out, "TargetAddress", &target_address(portal, tag, local));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_portals_take_the_local_address_and_ipv6_is_bracketed() {
        let local: SocketAddr = "10.1.2.3:3260".parse().unwrap();
        assert_eq!(
            target_address("0.0.0.0:3260".parse().unwrap(), 1, local),
            "10.1.2.3:3260,1"
        );
        assert_eq!(
            target_address("127.0.0.1:3261".parse().unwrap(), 2, local),
            "127.0.0.1:3261,2"
        );
        let local6: SocketAddr = "[::1]:3260".parse().unwrap();
        assert_eq!(
            target_address("[::]:3260".parse().unwrap(), 65535, local6),
            "[::1]:3260,65535"
        );
    }
}
