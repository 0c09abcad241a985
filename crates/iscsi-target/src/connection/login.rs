//! Login phase (RFC 7143 §6): the login state machine's steps, binding
//! the connection to a new or existing session, and the answer held back
//! after repeated authentication failures.

use super::*;
use isoe_wire::login::{Admission, LoginFailure, LoginPolicy};

pub(super) struct LoginPhase {
    pub(super) machine: TargetLogin,
    pub(super) first_request: Option<LoginRequest>,
    /// The InitiatorName the login text gave, for the log.
    pub(super) initiator: Option<String>,
}

/// Longest iSCSI name (RFC 7143 §4.2.7.1); a longer one is cut in the log.
const NAME_BYTES_MAX: usize = 223;

/// The InitiatorName key of a login text segment, if it holds one.
fn initiator_name_in(data: &[u8]) -> Option<String> {
    let value = data
        .split(|&b| b == 0)
        .find_map(|pair| pair.strip_prefix(b"InitiatorName="))?;
    let value = &value[..value.len().min(NAME_BYTES_MAX)];
    Some(String::from_utf8_lossy(value).into_owned())
}

/// The server's login policy as one portal group applies it: a target's
/// own settings carry the group's TargetPortalGroupTag (RFC 7143 §13.9).
struct ThroughPortalGroup<'a> {
    server: &'a Server,
    tag: u16,
}

impl LoginPolicy for ThroughPortalGroup<'_> {
    fn admit(
        &self,
        session_type: SessionType,
        initiator_name: &str,
        target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure> {
        let mut admission = self
            .server
            .admit(session_type, initiator_name, target_name)?;
        if let Some(overrides) = &mut admission.overrides {
            overrides.target_portal_group_tag = self.tag;
        }
        Ok(admission)
    }

    fn record_challenge(&self, challenge: &[u8]) -> bool {
        self.server.record_challenge(challenge)
    }

    fn is_own_challenge(&self, challenge: &[u8]) -> bool {
        self.server.is_own_challenge(challenge)
    }
}

/// A login failure's answer held back ([`crate::admission::FailureLog`]).
pub(super) struct HeldAnswer {
    pub(super) response: isoe_wire::pdu::LoginResponse,
    pub(super) data: Vec<u8>,
    pub(super) until: Instant,
}

impl Connection {
    pub(super) fn login(&mut self, pdu: Pdu, data: &[u8]) -> Flow {
        let Pdu::LoginRequest(req) = pdu else {
            // RFC 7143 §6.3: anything but a Login Request during login ends the connection.
            return Flow::Close;
        };
        let mut random = [0u8; 32];
        self.random.fill_bytes(&mut random);
        let Phase::Login(phase) = &mut self.phase else {
            return Flow::Close;
        };
        let first = *phase.first_request.get_or_insert(req);
        if phase.initiator.is_none() {
            phase.initiator = initiator_name_in(data);
        }
        let policy = ThroughPortalGroup {
            server: &self.server,
            tag: self.portal_group_tag,
        };
        let step = phase.machine.handle_request(&req, data, &policy, &random);
        let initiator = phase.initiator.clone();
        let mut response = step.response;
        response.tsih = first.tsih;
        response.stat_sn = self.take_stat_sn();
        response.exp_cmd_sn = first.cmd_sn;
        response.max_cmd_sn = first.cmd_sn;
        let limits = FrameLimits::LOGIN;
        match step.outcome {
            LoginOutcome::Continue => {
                self.out
                    .push(&Pdu::LoginResponse(response), &step.data, &limits);
                Flow::Continue
            }
            LoginOutcome::Failed(failure) => {
                let delay = if response.status_class == login_status::INITIATOR_ERROR
                    && response.status_detail == login_status::AUTHENTICATION_FAILURE
                {
                    self.server
                        .auth_failures
                        .failed(self.peer.ip(), self.last_rx)
                } else {
                    Duration::ZERO
                };
                eprintln!(
                    "isoe: login from {} ({}) on {} refused: {}",
                    self.peer,
                    escape_for_log(initiator.as_deref().unwrap_or("?")),
                    self.local,
                    escape_for_log(&failure.reason)
                );
                self.phase = Phase::Closed;
                if !delay.is_zero() {
                    // Repeated failures from this address: the answer waits
                    // (handle_tick sends it), and nothing more is read.
                    self.held_answer = Some(HeldAnswer {
                        response,
                        data: step.data,
                        until: self.last_rx + delay,
                    });
                    return Flow::Wait;
                }
                self.out
                    .push(&Pdu::LoginResponse(response), &step.data, &limits);
                Flow::Close
            }
            LoginOutcome::Complete(negotiated) => {
                let bound = self.bind_session(&first, &negotiated);
                match bound {
                    Ok(session) => {
                        response.tsih = session.tsih;
                        response.exp_cmd_sn = session.exp_cmd_sn();
                        response.max_cmd_sn = session.max_cmd_sn();
                        self.out
                            .push(&Pdu::LoginResponse(response), &step.data, &limits);
                        let c = negotiated.connection;
                        self.cid = negotiated.cid;
                        self.recv_limits = FrameLimits {
                            max_recv_data_segment_length: c.max_recv_data_segment_length,
                            header_digest: c.header_digest,
                            data_digest: c.data_digest,
                            crc: self.server.config.datapath.crc,
                        };
                        self.send_limits = FrameLimits {
                            max_recv_data_segment_length: c.max_send_data_segment_length,
                            ..self.recv_limits
                        };
                        self.max_send_segment = c.max_send_data_segment_length;
                        if let Some(t) = &session.target {
                            self.nop_interval =
                                Duration::from_secs(t.params.nop_in_interval_s as u64);
                            self.nop_timeout =
                                Duration::from_secs(t.params.nop_in_timeout_s as u64);
                        }
                        eprintln!(
                            "isoe: login from {} ({}) on {}: {} session TSIH {}, CID {}{}",
                            self.peer,
                            escape_for_log(&session.initiator_name),
                            self.local,
                            if session.target.is_some() {
                                "normal"
                            } else {
                                "discovery"
                            },
                            session.tsih,
                            self.cid,
                            session
                                .target
                                .as_ref()
                                .map(|t| format!(", target {}", t.name))
                                .unwrap_or_default()
                        );
                        self.bound = Some(session.clone());
                        self.phase = Phase::Full(session);
                        self.end_login();
                        Flow::Continue
                    }
                    Err((detail, why)) => {
                        eprintln!(
                            "isoe: login from {} ({}) on {} refused: {}",
                            self.peer,
                            escape_for_log(&negotiated.session.initiator_name),
                            self.local,
                            escape_for_log(&why)
                        );
                        response.transit = false;
                        response.status_class = if detail == login_status::OUT_OF_RESOURCES {
                            login_status::TARGET_ERROR
                        } else {
                            login_status::INITIATOR_ERROR
                        };
                        response.status_detail = detail;
                        self.out.push(&Pdu::LoginResponse(response), &[], &limits);
                        self.phase = Phase::Closed;
                        Flow::Close
                    }
                }
            }
        }
    }

    /// Creates the session (TSIH 0) or joins the existing one (MC/S).
    pub(super) fn bind_session(
        &mut self,
        first: &LoginRequest,
        negotiated: &isoe_wire::login::Negotiated,
    ) -> Result<Arc<Session>, (u8, String)> {
        let params = &negotiated.session;
        let target = match (&params.session_type, &params.target_name) {
            (SessionType::Normal, Some(name)) => match self.server.target(name) {
                Some(t) => Some(t.clone()),
                None => return Err((login_status::NOT_FOUND, format!("no target named {name}"))),
            },
            (SessionType::Normal, None) => {
                return Err((login_status::MISSING_PARAMETER, "TargetName missing".into()))
            }
            (SessionType::Discovery, _) => None,
        };
        let member = Member::new(negotiated.cid, self.serial, self.peer_gone.clone());
        if negotiated.tsih_requested == 0 {
            let target_name = target.as_ref().map(|t| t.name.clone());
            let random = self.random.next_u32() as u16;
            let session = self
                .server
                .create_session(
                    (
                        &params.initiator_name,
                        first.isid,
                        target_name.as_deref(),
                        self.portal_group_tag,
                    ),
                    random,
                    &mut self.wake,
                    |tsih| {
                        Session::new(
                            tsih,
                            first.isid,
                            params.initiator_name.clone(),
                            target,
                            params.clone(),
                            first.cmd_sn,
                        )
                    },
                )
                .map_err(|e| (login_status::OUT_OF_RESOURCES, e.to_string()))?;
            session
                .join(member, &mut self.wake)
                .map_err(|e| (login_status::TOO_MANY_CONNECTIONS, e.to_string()))?;
            Ok(session)
        } else {
            let Some(session) = self.server.find_session(
                &params.initiator_name,
                first.isid,
                negotiated.tsih_requested,
            ) else {
                return Err((
                    login_status::SESSION_DOES_NOT_EXIST,
                    format!("no session with TSIH {}", negotiated.tsih_requested),
                ));
            };
            let same_target = match (&session.target, &target) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same_target {
                return Err((
                    login_status::CANT_INCLUDE_IN_SESSION,
                    "connection names another target than its session".into(),
                ));
            }
            let group = session.nexus.relative_target_port;
            if group != self.portal_group_tag {
                // RFC 7143 §4.4.1: a session's connections are all in one
                // portal group; its identifier holds the group's tag, so
                // through another group no such session exists (as LIO
                // answers too).
                return Err((
                    login_status::SESSION_DOES_NOT_EXIST,
                    format!(
                        "session TSIH {} is in portal group {group}, this connection \
                         came through portal group {}",
                        negotiated.tsih_requested, self.portal_group_tag
                    ),
                ));
            }
            session
                .join(member, &mut self.wake)
                .map_err(|e| (login_status::TOO_MANY_CONNECTIONS, e.to_string()))?;
            Ok(session)
        }
    }

    /// The login is over (full feature phase, or the connection ends): it
    /// no longer counts against `[limits] logins`.
    pub(super) fn end_login(&mut self) {
        if std::mem::take(&mut self.logging_in) {
            self.server.gate.login_ended(self.peer.ip());
        }
    }
}
