//! SendTargets discovery (RFC 7143 §4.3, Appendix C).

use crate::channel::Channel;
use crate::config::{SocketOptions, DEFAULT_INITIATOR_NAME};
use crate::error::InitiatorError;
use crate::url::Portal;
use isoe_wire::login::{InitiatorChap, InitiatorLoginConfig};
use isoe_wire::negotiate::{LocalParams, SessionType};
use isoe_wire::pdu::{logout, LogoutRequest, TextRequest, RESERVED_TAG};
use isoe_wire::text::{parse_pairs_with_repeats, push_pair};
use isoe_wire::Pdu;
use std::time::Duration;

/// Text Response PDUs of one SendTargets answer we follow at most.
const TEXT_PDUS_MAX: u32 = 64;
/// The whole SendTargets answer we accept, in bytes.
const TEXT_MAX_BYTES: usize = 1 << 20;

/// One target a portal reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredTarget {
    /// TargetName.
    pub name: String,
    /// Its portals: address (`host:port` or `[v6]:port`) and portal group tag.
    pub portals: Vec<(String, u16)>,
}

/// What a discovery session needs.
#[derive(Debug, Clone)]
pub struct DiscoveryConfig {
    /// Where to ask.
    pub portal: Portal,
    /// InitiatorName.
    pub initiator_name: String,
    /// CHAP for the discovery session.
    pub chap: Option<InitiatorChap>,
    /// Per-step timeout.
    pub timeout: Duration,
}

impl DiscoveryConfig {
    /// Asks `portal` with isoe's initiator name and no CHAP.
    pub fn new(portal: Portal) -> DiscoveryConfig {
        DiscoveryConfig {
            portal,
            initiator_name: DEFAULT_INITIATOR_NAME.into(),
            chap: None,
            timeout: Duration::from_secs(15),
        }
    }
}

/// Logs in a discovery session, asks SendTargets=All, logs out.
pub fn send_targets(config: &DiscoveryConfig) -> Result<Vec<DiscoveredTarget>, InitiatorError> {
    let mut ch = Channel::connect(&config.portal, config.timeout, &SocketOptions::default())?;
    let cmd_sn = 1;
    let login = ch.login(InitiatorLoginConfig {
        initiator_name: config.initiator_name.clone(),
        initiator_alias: None,
        target_name: None,
        session_type: SessionType::Discovery,
        isid: crate::config::random_isid(),
        tsih: 0,
        cid: 0,
        initiator_task_tag: 0,
        cmd_sn,
        params: LocalParams::default(),
        chap: config.chap.clone(),
    })?;
    let mut exp_stat_sn = login.exp_stat_sn;
    let mut text = Vec::new();
    let mut request = Vec::new();
    push_pair(&mut request, "SendTargets", "All");
    let mut ttt = RESERVED_TAG;
    let mut cmd_sn = cmd_sn;
    for _ in 0..TEXT_PDUS_MAX {
        let req = TextRequest {
            immediate: false,
            final_bit: true,
            continue_bit: false,
            lun: Default::default(),
            initiator_task_tag: 1,
            target_transfer_tag: ttt,
            cmd_sn,
            exp_stat_sn,
        };
        cmd_sn = cmd_sn.wrapping_add(1);
        ch.send(&Pdu::TextRequest(req), &std::mem::take(&mut request))?;
        let (pdu, data) = ch.recv("waiting for the SendTargets answer")?;
        let resp = match pdu {
            Pdu::TextResponse(r) => r,
            Pdu::Reject(r) => {
                return Err(protocol(
                    &ch,
                    format!("SendTargets rejected, reason {:#04x}", r.reason.to_u8()),
                ))
            }
            other => {
                return Err(protocol(
                    &ch,
                    format!("{:?} in answer to SendTargets", other.opcode()),
                ))
            }
        };
        exp_stat_sn = resp.stat_sn.wrapping_add(1);
        if text.len() + data.len() > TEXT_MAX_BYTES {
            return Err(protocol(
                &ch,
                format!("SendTargets answer exceeds {TEXT_MAX_BYTES} bytes"),
            ));
        }
        text.extend_from_slice(&data);
        if !resp.continue_bit && resp.final_bit {
            let _ = logout_session(&mut ch, cmd_sn, exp_stat_sn);
            return parse_send_targets(&text).map_err(|what| protocol(&ch, what));
        }
        // RFC 7143 §11.11.4: fetch the rest with an empty request carrying the target's TTT.
        ttt = resp.target_transfer_tag;
    }
    Err(protocol(
        &ch,
        format!("SendTargets answer spans more than {TEXT_PDUS_MAX} PDUs"),
    ))
}

fn protocol(ch: &Channel, what: String) -> InitiatorError {
    InitiatorError::Protocol {
        portal: ch.portal().to_string(),
        what,
    }
}

/// Closes the discovery session politely; errors only mean the target hung up first.
fn logout_session(ch: &mut Channel, cmd_sn: u32, exp_stat_sn: u32) -> Result<(), InitiatorError> {
    let req = LogoutRequest {
        immediate: true,
        reason_code: logout::LogoutReason::CloseSession,
        initiator_task_tag: 2,
        cid: 0,
        cmd_sn,
        exp_stat_sn,
    };
    ch.send(&Pdu::LogoutRequest(req), &[])?;
    ch.recv("waiting for the Logout Response").map(|_| ())
}

/// Parses `TargetName=`/`TargetAddress=` pairs (RFC 7143 Appendix C).
pub fn parse_send_targets(text: &[u8]) -> Result<Vec<DiscoveredTarget>, String> {
    let pairs =
        parse_pairs_with_repeats(text).map_err(|e| format!("malformed SendTargets text: {e}"))?;
    let mut targets: Vec<DiscoveredTarget> = Vec::new();
    for (key, value) in pairs {
        match key {
            "TargetName" => targets.push(DiscoveredTarget {
                name: value.to_string(),
                portals: Vec::new(),
            }),
            "TargetAddress" => {
                let target = targets
                    .last_mut()
                    .ok_or("TargetAddress before any TargetName")?;
                // "domainname[:port],portal-group-tag"
                let (addr, tag) = match value.rsplit_once(',') {
                    Some((a, t)) => (
                        a,
                        t.parse::<u16>()
                            .map_err(|_| format!("bad portal group tag in {value:?}"))?,
                    ),
                    None => (value, 1),
                };
                target.portals.push((addr.to_string(), tag));
            }
            _ => {}
        }
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_targets_text_parses() {
        let text = b"TargetName=iqn.a:x\0TargetAddress=127.0.0.1:3260,1\0TargetAddress=[::1]:3260,2\0TargetName=iqn.a:y\0";
        let t = parse_send_targets(text).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].portals,
            vec![
                ("127.0.0.1:3260".to_string(), 1),
                ("[::1]:3260".to_string(), 2)
            ]
        );
        assert!(t[1].portals.is_empty());
        assert!(parse_send_targets(b"TargetAddress=1.2.3.4,1\0").is_err());
        assert!(parse_send_targets(b"TargetName=a\0TargetAddress=1.2.3.4,x\0").is_err());
    }
}
