//! Login phase (RFC 7143 §6): the login state machine's steps, binding
//! the connection to a new or existing session, and the answer held back
//! after repeated authentication failures.

use super::*;
use crate::log::LoginStatus;
use crate::registry::SessionRefused;
use isoe_wire::login::status_description;
use isoe_wire::login::{Admission, LoginFailure, LoginPolicy};

/// Longest iSCSI name (RFC 7143 §4.2.7.1); a longer one is cut in the log.
const NAME_BYTES_MAX: usize = 223;

/// The value of `key` (`b"InitiatorName="`, `b"TargetName="`) in a login
/// text segment, if it holds one; cut to the longest name.
fn name_in(data: &[u8], key: &[u8]) -> Option<String> {
    let value = data
        .split(|&b| b == 0)
        .find_map(|pair| pair.strip_prefix(key))?;
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

impl Connection {
    pub(super) fn login(&mut self, pdu: Pdu, data: &[u8], now: Instant) -> Flow {
        let Pdu::LoginRequest(req) = pdu else {
            // RFC 7143 §6.3: anything but a Login Request during login ends the connection.
            self.log_drop(format_args!(
                "protocol error: {:?} during login",
                pdu.opcode()
            ));
            return Flow::Close;
        };
        let mut random = [0u8; 32];
        self.random.fill_bytes(&mut random);
        let Phase::Login(phase) = &mut self.phase else {
            return Flow::Close;
        };
        // A login whose peer speaks is not closed to make room for others
        // (the bytes fed by `handle_input` tell so already; a PDU fed whole
        // by `handle_frame` does here).
        self.server.gate.heard(self.serial, now);
        let first = *phase.first_request.get_or_insert(req);
        if phase.initiator.is_none() {
            phase.initiator = name_in(data, b"InitiatorName=");
        }
        if phase.target.is_none() {
            phase.target = name_in(data, b"TargetName=");
        }
        let policy = ThroughPortalGroup {
            server: &self.server,
            tag: self.portal_group_tag,
        };
        let step = phase.machine.handle_request(&req, data, &policy, &random);
        let initiator = phase.initiator.clone();
        let target = phase.target.clone();
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
                self.server.stats.login(refusal_outcome(
                    response.status_class,
                    response.status_detail,
                ));
                let delay = if response.status_class == login_status::INITIATOR_ERROR
                    && response.status_detail == login_status::AUTHENTICATION_FAILURE
                {
                    self.server
                        .auth_failures
                        .failed(self.peer.ip(), self.last_rx)
                } else {
                    Duration::ZERO
                };
                tracing::warn!(
                    initiator = %escape_for_log(initiator.as_deref().unwrap_or("?")),
                    addr = %self.peer,
                    portal = %self.local,
                    target = target.as_deref().map(|t| display(escape_for_log(t))),
                    status = %LoginStatus(response.status_class, response.status_detail),
                    answer_delayed_s = (!delay.is_zero()).then_some(delay.as_secs()),
                    "login refused ({}): {}",
                    status_description(response.status_class, response.status_detail),
                    escape_for_log(&failure.reason)
                );
                self.phase = Phase::Closed;
                if !delay.is_zero() {
                    // Repeated failures from this address: the answer waits
                    // (handle_tick sends it), and nothing more is read; it
                    // waits on the target now, not on its peer.
                    self.server.gate.answer_held(self.serial);
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
                let bound = {
                    // What the registry logs (a reinstatement) says where from.
                    let _login = tracing::info_span!("login", addr = %self.peer).entered();
                    self.bind_session(&first, &negotiated, now)
                };
                match bound {
                    Ok(session) => {
                        response.tsih = session.tsih;
                        response.exp_cmd_sn = session.exp_cmd_sn();
                        response.max_cmd_sn = session.max_cmd_sn();
                        self.out
                            .push(&Pdu::LoginResponse(response), &step.data, &limits);
                        self.enter_full_feature(session, &negotiated);
                        Flow::Continue
                    }
                    Err((class, detail, why)) => {
                        self.refuse_session(response, (class, detail), &why, &negotiated)
                    }
                }
            }
        }
    }

    /// The login completed in `session`: the connection takes what it
    /// negotiated and goes to full feature phase.
    fn enter_full_feature(
        &mut self,
        session: Arc<Session>,
        negotiated: &isoe_wire::login::Negotiated,
    ) {
        let c = negotiated.connection;
        self.cid = negotiated.cid;
        self.server
            .stats
            .login(usize::from(session.target.is_none()));
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
            let params = &t.policy().params;
            self.nop_interval = Duration::from_secs(params.nop_in_interval_s as u64);
            self.nop_timeout = Duration::from_secs(params.nop_in_timeout_s as u64);
        }
        self.log_login(&session, negotiated);
        self.bound = Some(session.clone());
        self.phase = Phase::Full(session);
        self.end_login();
    }

    /// The login negotiated, but its session could not be made or joined
    /// (status `class` and `detail`, for `why`): the last response refuses it.
    fn refuse_session(
        &mut self,
        mut response: isoe_wire::pdu::LoginResponse,
        (class, detail): (u8, u8),
        why: &str,
        negotiated: &isoe_wire::login::Negotiated,
    ) -> Flow {
        response.transit = false;
        response.status_class = class;
        response.status_detail = detail;
        self.server
            .stats
            .login(refusal_outcome(response.status_class, detail));
        let params = &negotiated.session;
        tracing::warn!(
            initiator = %escape_for_log(&params.initiator_name),
            addr = %self.peer,
            portal = %self.local,
            target = params.target_name.as_deref().map(|t| display(escape_for_log(t))),
            status = %LoginStatus(response.status_class, detail),
            "login refused ({}): {}",
            status_description(response.status_class, detail),
            escape_for_log(why)
        );
        self.out
            .push(&Pdu::LoginResponse(response), &[], &FrameLimits::LOGIN);
        self.phase = Phase::Closed;
        Flow::Close
    }

    /// The login's line (info), and what it negotiated (debug).
    fn log_login(&self, session: &Session, negotiated: &isoe_wire::login::Negotiated) {
        let kind = match (negotiated.tsih_requested, &session.target) {
            (0, Some(_)) => "new normal session",
            (0, None) => "new discovery session",
            _ => "connection added to the session",
        };
        tracing::info!(
            initiator = %escape_for_log(&session.initiator_name),
            addr = %self.peer,
            portal = %self.local,
            target = session.target.as_ref().map(|t| display(&t.name)),
            tsih = session.tsih,
            cid = self.cid,
            "login accepted: {kind}"
        );
        let (c, s) = (&negotiated.connection, &session.params);
        let digest = |on: bool| if on { "CRC32C" } else { "None" };
        tracing::debug!(
            addr = %self.peer,
            tsih = session.tsih,
            cid = self.cid,
            header_digest = %digest(c.header_digest),
            data_digest = %digest(c.data_digest),
            max_recv_data_segment_length = c.max_recv_data_segment_length,
            max_send_data_segment_length = c.max_send_data_segment_length,
            max_burst_length = s.max_burst_length,
            first_burst_length = s.first_burst_length,
            immediate_data = s.immediate_data,
            initial_r2t = s.initial_r2t,
            max_outstanding_r2t = s.max_outstanding_r2t,
            max_connections = s.max_connections,
            "login negotiated"
        );
    }

    /// Creates the session (TSIH 0) or joins the existing one (MC/S), at
    /// `now`.
    pub(super) fn bind_session(
        &mut self,
        first: &LoginRequest,
        negotiated: &isoe_wire::login::Negotiated,
        now: Instant,
    ) -> Result<Arc<Session>, (u8, u8, String)> {
        let params = &negotiated.session;
        let target = match (&params.session_type, &params.target_name) {
            (SessionType::Normal, Some(name)) => match self.server.target(name) {
                Some(t) => Some(t.clone()),
                None => {
                    return Err((
                        login_status::INITIATOR_ERROR,
                        login_status::NOT_FOUND,
                        format!("no target named {name}"),
                    ))
                }
            },
            (SessionType::Normal, None) => {
                return Err((
                    login_status::INITIATOR_ERROR,
                    login_status::MISSING_PARAMETER,
                    "TargetName missing".into(),
                ))
            }
            (SessionType::Discovery, _) => None,
        };
        let c = &negotiated.connection;
        let info = Arc::new(crate::session::ConnInfo {
            peer: self.peer,
            local: self.local,
            since: now,
            header_digest: c.header_digest,
            data_digest: c.data_digest,
            max_recv_data_segment_length: c.max_recv_data_segment_length,
            max_send_data_segment_length: c.max_send_data_segment_length,
            in_flight: Default::default(),
            stats: Default::default(),
        });
        self.info = Some(Arc::clone(&info));
        let mut member = Member::new(negotiated.cid, self.serial, self.peer_gone.clone());
        member.info = Some(info);
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
                .map_err(|e| {
                    let detail = match e {
                        SessionRefused::Limit(_) => login_status::OUT_OF_RESOURCES,
                        SessionRefused::Draining { .. } => login_status::SERVICE_UNAVAILABLE,
                    };
                    (login_status::TARGET_ERROR, detail, e.to_string())
                })?;
            session.join(member, &mut self.wake).map_err(|e| {
                (
                    login_status::INITIATOR_ERROR,
                    login_status::TOO_MANY_CONNECTIONS,
                    e.to_string(),
                )
            })?;
            Ok(session)
        } else {
            let Some(session) = self.server.find_session(
                &params.initiator_name,
                first.isid,
                negotiated.tsih_requested,
            ) else {
                return Err((
                    login_status::INITIATOR_ERROR,
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
                    login_status::INITIATOR_ERROR,
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
                    login_status::INITIATOR_ERROR,
                    login_status::SESSION_DOES_NOT_EXIST,
                    format!(
                        "session TSIH {} is in portal group {group}, this connection \
                         came through portal group {}",
                        negotiated.tsih_requested, self.portal_group_tag
                    ),
                ));
            }
            session.join(member, &mut self.wake).map_err(|e| {
                (
                    login_status::INITIATOR_ERROR,
                    login_status::TOO_MANY_CONNECTIONS,
                    e.to_string(),
                )
            })?;
            Ok(session)
        }
    }

    /// The login is over (full feature phase, or the connection ends): it
    /// no longer counts against `[limits] logins`.
    pub(super) fn end_login(&mut self) {
        if std::mem::take(&mut self.logging_in) {
            self.server.gate.login_ended(self.serial);
        }
    }
}

/// The index in [`crate::metrics::LOGIN_OUTCOMES`] of a refusal with
/// status `class` and `detail`.
fn refusal_outcome(class: u8, detail: u8) -> usize {
    match (class, detail) {
        (login_status::INITIATOR_ERROR, login_status::AUTHENTICATION_FAILURE) => 2,
        (login_status::INITIATOR_ERROR, login_status::AUTHORIZATION_FAILURE) => 3,
        (login_status::INITIATOR_ERROR, login_status::NOT_FOUND) => 4,
        (login_status::TARGET_ERROR, login_status::OUT_OF_RESOURCES) => 5,
        _ => 6,
    }
}
