//! The login phase (RFC 7143 §6.3, §11.12, §11.13) as two sans-IO state
//! machines: [`TargetLogin`] answers Login Requests, [`InitiatorLogin`]
//! makes them. Both are fed one PDU (typed header + data segment) at a time
//! and give back the PDU to send; neither touches sockets, clocks or
//! randomness of its own (CHAP challenges are drawn from bytes the caller
//! passes in).
//!
//! Stages: SECURITY (0) → OPERATIONAL (1) → FULL FEATURE (3), moved by the
//! T bit and CSG/NSG; either negotiation stage may be skipped where the RFC
//! allows. Long texts travel in several PDUs with the C bit, both ways.
//! Failures carry the Status-Class/Status-Detail of RFC 7143 §11.13.5 and a
//! reason naming the rule (never a secret), with control characters
//! escaped. InitiatorName and TargetName must be iSCSI names
//! ([`crate::name::validate`]) before the policy is asked about them.
//!
//! Sequence numbers (StatSN, ExpCmdSN, MaxCmdSN) and the TSIH of a new
//! session are the caller's: the target crate owns sessions.

use crate::chap::{parse_challenge, Challenge, ChapAlgorithm, ChapError, Secret};
use crate::keys::{self, answer, name};
use crate::name::escape_for_log;
use crate::negotiate::{
    ConnectionParams, Digest, LocalParams, NegotiationError, Negotiator, OfferPolicy, Role,
    SessionParams, SessionType, DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
};
use crate::pdu::{login_status as status, stage, LoginRequest, LoginResponse};
use crate::text::{decode_number, encode_hex, parse_pairs, push_pair, split_list, TextError};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use thiserror::Error;

/// RFC 7143 §11.12.4: the only version there is, 0x00.
pub const VERSION: u8 = 0x00;
/// RFC 7143 §13.12: during login every data segment is at most 8192 bytes.
pub const LOGIN_DATA_SEGMENT_MAX_BYTES: usize = DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH as usize;
/// Bound on one text spread over several PDUs with the C bit (RFC 7143 §6.1
/// asks for at least 8192; 64 KiB covers long authentication items).
pub const LOGIN_TEXT_MAX_BYTES: usize = 65_536;
/// Bound on the PDUs of one login, each direction.
pub const LOGIN_PDUS_MAX: u32 = 64;

/// The target's fixed settings for logins on a portal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetLoginConfig {
    /// The MaxRecvDataSegmentLength we declare (RFC 7143 §13.12).
    pub max_recv_data_segment_length: u32,
    /// Our MaxBurstLength (§13.13).
    pub max_burst_length: u32,
    /// Our FirstBurstLength (§13.14).
    pub first_burst_length: u32,
    /// Our MaxConnections (§13.2).
    pub max_connections: u16,
    /// Our MaxOutstandingR2T (§13.17).
    pub max_outstanding_r2t: u16,
    /// Our InitialR2T (§13.10).
    pub initial_r2t: bool,
    /// Our ImmediateData (§13.11).
    pub immediate_data: bool,
    /// HeaderDigest values we accept, in preference order (§13.1).
    pub header_digest: Vec<Digest>,
    /// DataDigest values we accept, in preference order (§13.1).
    pub data_digest: Vec<Digest>,
    /// Our DefaultTime2Wait (§13.15).
    pub default_time2wait: u16,
    /// Our DefaultTime2Retain (§13.16).
    pub default_time2retain: u16,
    /// The TargetPortalGroupTag declared in the first response (§13.9).
    pub target_portal_group_tag: u16,
    /// Our ErrorRecoveryLevel (§13.20); isoe implements 0.
    pub error_recovery_level: u8,
}

impl Default for TargetLoginConfig {
    fn default() -> Self {
        TargetLoginConfig {
            max_recv_data_segment_length: 262_144,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            max_connections: 8,
            max_outstanding_r2t: 1,
            initial_r2t: true,
            immediate_data: true,
            header_digest: vec![Digest::None, Digest::Crc32c],
            data_digest: vec![Digest::None, Digest::Crc32c],
            default_time2wait: 2,
            default_time2retain: 20,
            target_portal_group_tag: 1,
            error_recovery_level: 0,
        }
    }
}

impl TargetLoginConfig {
    /// Our local values for the negotiation engine, clamped to the ranges of
    /// RFC 7143 §13 so that a bad configuration cannot produce bad offers.
    pub fn local_params(&self) -> LocalParams {
        let len = |v: u32| v.clamp(512, (1 << 24) - 1);
        let max_burst_length = len(self.max_burst_length);
        let non_empty = |v: &Vec<Digest>| {
            if v.is_empty() {
                vec![Digest::None]
            } else {
                v.clone()
            }
        };
        LocalParams {
            header_digest: non_empty(&self.header_digest),
            data_digest: non_empty(&self.data_digest),
            max_connections: self.max_connections.max(1),
            initial_r2t: self.initial_r2t,
            immediate_data: self.immediate_data,
            max_recv_data_segment_length: len(self.max_recv_data_segment_length),
            max_burst_length,
            first_burst_length: len(self.first_burst_length).min(max_burst_length),
            default_time2wait: self.default_time2wait.min(3600),
            default_time2retain: self.default_time2retain.min(3600),
            max_outstanding_r2t: self.max_outstanding_r2t.max(1),
            error_recovery_level: self.error_recovery_level.min(2),
            ..LocalParams::default()
        }
    }
}

/// What the target's policy asks of a login.
#[derive(Debug, Clone)]
pub enum AuthPolicy {
    /// No authentication (AuthMethod=None, or the security stage skipped).
    None,
    /// CHAP required (RFC 7143 §12.1.3).
    Chap {
        /// The CHAP_N the initiator must present.
        initiator_user: String,
        /// The initiator's secret.
        initiator_secret: Secret,
        /// Our name and secret, for an initiator that asks to authenticate us.
        mutual: Option<(String, Secret)>,
        /// Algorithms we accept; the initiator's order decides among them.
        algorithms: Vec<ChapAlgorithm>,
    },
}

/// What the target's policy says about the initiator's login, asked once InitiatorName/TargetName/SessionType are known.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The TargetAlias declared in the first response (normal sessions).
    pub target_alias: Option<String>,
    /// Whether and how the initiator must authenticate.
    pub auth: AuthPolicy,
    /// Per-target settings that replace the portal's [`TargetLoginConfig`].
    pub overrides: Option<TargetLoginConfig>,
}

/// A refused login: the status of the final Login Response and why. The
/// reason of a failure from [`TargetLogin`] has its control characters
/// escaped ([`crate::name::escape_for_log`]), so it is fit for a log line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct LoginFailure {
    /// Status-Class (RFC 7143 §11.13.5): 1 redirection, 2 initiator error, 3 target error.
    pub status_class: u8,
    /// Status-Detail within the class.
    pub status_detail: u8,
    /// a human-readable reason naming the rule that refused it (no secrets!)
    pub reason: String,
}

impl fmt::Display for LoginFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = status_description(self.status_class, self.status_detail);
        write!(
            f,
            "{} (status 0x{:02x}{:02x}, {words})",
            self.reason, self.status_class, self.status_detail
        )
    }
}

impl LoginFailure {
    /// A failure with any class and detail.
    pub fn new(status_class: u8, status_detail: u8, reason: impl Into<String>) -> LoginFailure {
        LoginFailure {
            status_class,
            status_detail,
            reason: reason.into(),
        }
    }

    /// Class 2 (initiator error) with `detail`.
    pub fn initiator(detail: u8, reason: impl Into<String>) -> LoginFailure {
        LoginFailure::new(status::INITIATOR_ERROR, detail, reason)
    }

    /// 0x0201: authentication failure.
    pub fn authentication(reason: impl Into<String>) -> LoginFailure {
        LoginFailure::initiator(status::AUTHENTICATION_FAILURE, reason)
    }

    /// 0x0200: initiator error, protocol violations included.
    pub fn protocol(reason: impl Into<String>) -> LoginFailure {
        LoginFailure::initiator(status::INITIATOR_ERROR_DETAIL, reason)
    }

    fn from_negotiation(e: NegotiationError) -> LoginFailure {
        match e {
            NegotiationError::UnsupportedSessionType { .. } => {
                LoginFailure::initiator(status::SESSION_TYPE_NOT_SUPPORTED, e.to_string())
            }
            _ => LoginFailure::protocol(e.to_string()),
        }
    }

    fn from_chap(e: ChapError) -> LoginFailure {
        LoginFailure::authentication(format!("CHAP: {e} (RFC 7143 §12.1.3)"))
    }
}

/// The words for a login status (RFC 7143 §11.13.5).
pub fn status_description(status_class: u8, status_detail: u8) -> &'static str {
    match (status_class, status_detail) {
        (0, 0) => "success",
        (1, 1) => "target moved temporarily",
        (1, 2) => "target moved permanently",
        (1, _) => "redirection",
        (2, 0x00) => "initiator error",
        (2, 0x01) => "authentication failure",
        (2, 0x02) => "authorization failure",
        (2, 0x03) => "target not found",
        (2, 0x04) => "target removed",
        (2, 0x05) => "unsupported version",
        (2, 0x06) => "too many connections",
        (2, 0x07) => "missing parameter",
        (2, 0x08) => "can't include in session",
        (2, 0x09) => "session type not supported",
        (2, 0x0a) => "session does not exist",
        (2, 0x0b) => "invalid request during login",
        (2, _) => "initiator error (unknown detail)",
        (3, 0x00) => "target error",
        (3, 0x01) => "service unavailable",
        (3, 0x02) => "out of resources",
        (3, _) => "target error (unknown detail)",
        _ => "unknown status class",
    }
}

/// The target's login policy: who may log in to what, and how they authenticate.
pub trait LoginPolicy {
    /// Err(LoginFailure) refuses (target not found, not authorized...). Ok gives what the session requires: the target's alias and whether CHAP is required with which secrets.
    fn admit(
        &self,
        session_type: SessionType,
        initiator_name: &str,
        target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure>;

    /// Records a CHAP challenge the target is about to send. False refuses
    /// it as one issued before (RFC 1994 §2.3: a repeated challenge lets a
    /// recorded response be replayed); the login then fails with a target
    /// error. A policy that keeps no record accepts every challenge.
    fn record_challenge(&self, _challenge: &[u8]) -> bool {
        true
    }

    /// True when `challenge`, received from an initiator for mutual CHAP,
    /// is one the target issued on any connection: answering it would make
    /// the target compute a response for the peer (reflection, RFC 7143
    /// §9.2.1). The challenge of the same login is checked regardless.
    fn is_own_challenge(&self, _challenge: &[u8]) -> bool {
        false
    }
}

/// The result of a successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Session-wide parameters. On a connection joining a session
    /// (`tsih_requested != 0`) leading-only keys were not negotiated: the
    /// session's own parameters stay in force.
    pub session: SessionParams,
    /// This connection's parameters.
    pub connection: ConnectionParams,
    /// The initiator's ISID.
    pub isid: [u8; 6],
    /// The TSIH the initiator sent: 0 for a new session.
    pub tsih_requested: u16,
    /// The connection ID.
    pub cid: u16,
}

/// What a Login Response does to the login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginOutcome {
    /// More Login PDUs follow.
    Continue,
    /// the response moves to full feature phase
    Complete(Negotiated),
    /// the response carries a failure status; close the connection after sending
    Failed(LoginFailure),
}

/// One Login Response to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginStep {
    /// Fields of the Login Response besides the sequence numbers and TSIH, which the caller fills: transit, continue_bit, csg, nsg, version_max/active, isid, itt, status_class/detail.
    /// `tsih` holds the request's TSIH; a new session's is set by the caller
    /// in the final response only (RFC 7143 §11.13.3).
    pub response: LoginResponse,
    /// The text data segment of the response (at most 8192 bytes; longer
    /// texts continue over several responses with the C bit).
    pub data: Vec<u8>,
    /// What this response does to the login.
    pub outcome: LoginOutcome,
}

/// The target's progress in the security stage.
#[derive(Debug)]
enum TargetAuth {
    /// AuthMethod not negotiated yet.
    Start,
    /// AuthMethod=CHAP agreed; waiting for CHAP_A.
    ChapAgreed,
    /// Challenge sent; waiting for CHAP_N/CHAP_R.
    Challenged(Challenge),
    /// Authentication done, or not required.
    Done,
}

/// Everything that exists once the policy has admitted the login.
#[derive(Debug)]
struct Admitted {
    auth_policy: AuthPolicy,
    auth: TargetAuth,
    target_alias: Option<String>,
    target_portal_group_tag: u16,
    negotiator: Negotiator,
    /// Security keys already received (RFC 7143 §6.2: none twice).
    security_keys: BTreeSet<String>,
}

/// The target side of one connection's login (RFC 7143 §6.3).
///
/// Feed each Login Request to [`TargetLogin::handle_request`] and send the
/// [`LoginStep`] it returns; after `Complete` the connection is in full
/// feature phase, after `Failed` it is closed once the response is sent.
#[derive(Debug)]
pub struct TargetLogin {
    config: TargetLoginConfig,
    /// The first request's header: ISID, TSIH, CID, ITT and versions may not change.
    first: Option<LoginRequest>,
    /// The current stage (CSG of the next request).
    stage: u8,
    pdus: u32,
    text_in: Vec<u8>,
    text_out: Vec<u8>,
    /// The stage change decided for the text in `text_out`, made when its last piece goes.
    transit_out: Option<u8>,
    admitted: Option<Admitted>,
    ended: bool,
}

impl TargetLogin {
    /// A login on a portal with `config`; per-target overrides come from the policy.
    pub fn new(config: TargetLoginConfig) -> Self {
        TargetLogin {
            config,
            first: None,
            stage: stage::SECURITY,
            pdus: 0,
            text_in: Vec::new(),
            text_out: Vec::new(),
            transit_out: None,
            admitted: None,
            ended: false,
        }
    }

    /// Feeds one Login Request (header + its data segment) and randomness for CHAP challenges; returns the response to send.
    pub fn handle_request(
        &mut self,
        req: &LoginRequest,
        data: &[u8],
        policy: &dyn LoginPolicy,
        random: &[u8; 32],
    ) -> LoginStep {
        match self.step(req, data, policy, random) {
            Ok(step) => step,
            Err(failure) => self.fail(req, failure),
        }
    }

    fn step(
        &mut self,
        req: &LoginRequest,
        data: &[u8],
        policy: &dyn LoginPolicy,
        random: &[u8; 32],
    ) -> Result<LoginStep, LoginFailure> {
        if self.ended {
            return Err(LoginFailure::initiator(
                status::INVALID_DURING_LOGIN,
                "login request after the login ended",
            ));
        }
        self.pdus += 1;
        if self.pdus > LOGIN_PDUS_MAX {
            return Err(LoginFailure::protocol(format!(
                "login did not finish within {LOGIN_PDUS_MAX} PDUs"
            )));
        }
        self.check_header(req)?;
        if data.len() > LOGIN_DATA_SEGMENT_MAX_BYTES {
            return Err(LoginFailure::protocol(format!(
                "login data segment of {} bytes exceeds 8192 (RFC 7143 §13.12: MaxRecvDataSegmentLength during login)",
                data.len()
            )));
        }
        if !self.text_out.is_empty() {
            // RFC 7143 §6.3: while our text continues, the initiator sends empty requests.
            if !data.is_empty() || req.continue_bit {
                return Err(LoginFailure::protocol(
                    "text sent while the target's response text was continuing",
                ));
            }
            return Ok(self.emit(req));
        }
        if self.text_in.len() + data.len() > LOGIN_TEXT_MAX_BYTES {
            return Err(LoginFailure::protocol(format!(
                "login text exceeds {LOGIN_TEXT_MAX_BYTES} bytes"
            )));
        }
        self.text_in.extend_from_slice(data);
        if req.continue_bit {
            // RFC 7143 §11.12.2: each partial text is answered with an empty response.
            return Ok(LoginStep {
                response: self.response_header(req),
                data: Vec::new(),
                outcome: LoginOutcome::Continue,
            });
        }
        let text = std::mem::take(&mut self.text_in);
        let pairs = parse_pairs(&text)
            .map_err(|e| LoginFailure::protocol(format!("malformed login text: {e}")))?;
        let (out, transit) = self.process(req, &pairs, policy, random)?;
        self.text_out = out;
        self.transit_out = transit;
        Ok(self.emit(req))
    }

    /// RFC 7143 §11.12: what a Login Request's header may hold, and what may
    /// not change between the requests of one login.
    fn check_header(&mut self, req: &LoginRequest) -> Result<(), LoginFailure> {
        if req.transit && req.continue_bit {
            return Err(LoginFailure::protocol(
                "T and C bits both set (RFC 7143 §11.12.2)",
            ));
        }
        if req.transit
            && !(req.nsg > req.csg
                && (req.nsg == stage::OPERATIONAL || req.nsg == stage::FULL_FEATURE))
        {
            return Err(LoginFailure::protocol(format!(
                "transit from stage {} to NSG {} (RFC 7143 §11.12.3)",
                req.csg, req.nsg
            )));
        }
        let Some(first) = &self.first else {
            // RFC 7143 §11.12.4: Version-min above ours means no common version.
            if req.version_min > VERSION {
                return Err(LoginFailure::initiator(
                    status::UNSUPPORTED_VERSION,
                    format!(
                        "Version-min 0x{:02x}; only 0x00 is supported",
                        req.version_min
                    ),
                ));
            }
            if req.csg != stage::SECURITY && req.csg != stage::OPERATIONAL {
                return Err(LoginFailure::protocol(format!(
                    "a login cannot start in stage {}",
                    req.csg
                )));
            }
            self.first = Some(*req);
            self.stage = req.csg;
            return Ok(());
        };
        let changed = [
            (req.isid != first.isid, "ISID"),
            (req.tsih != first.tsih, "TSIH"),
            (req.cid != first.cid, "CID"),
            (
                req.initiator_task_tag != first.initiator_task_tag,
                "Initiator Task Tag",
            ),
            (
                req.version_max != first.version_max || req.version_min != first.version_min,
                "version",
            ),
        ];
        if let Some((_, field)) = changed.iter().find(|(c, _)| *c) {
            return Err(LoginFailure::initiator(
                status::INVALID_DURING_LOGIN,
                format!("{field} changed during the login (RFC 7143 §11.12)"),
            ));
        }
        if req.csg != self.stage {
            return Err(LoginFailure::protocol(format!(
                "request in stage {} while the login is in stage {} (RFC 7143 §6.3)",
                req.csg, self.stage
            )));
        }
        Ok(())
    }

    /// Answers one complete text; returns the response text and the stage to move to.
    fn process(
        &mut self,
        req: &LoginRequest,
        pairs: &[(&str, &str)],
        policy: &dyn LoginPolicy,
        random: &[u8; 32],
    ) -> Result<(Vec<u8>, Option<u8>), LoginFailure> {
        let first_text = self.admitted.is_none();
        if first_text {
            self.admit(req, pairs, policy)?;
        }
        let stage_now = self.stage;
        let adm = self.admitted.as_mut().expect("admitted above");
        let (security, others): (Vec<_>, Vec<_>) = pairs
            .iter()
            .copied()
            .partition(|(k, _)| keys::is_security_key(k));
        let mut out = Vec::new();
        let mut progressed = false;
        if stage_now == stage::SECURITY {
            progressed = adm.handle_security(&security, policy, random, &mut out)?;
        } else if let Some((key, _)) = security.first() {
            return Err(LoginFailure::protocol(format!(
                "{key} in the operational stage (RFC 7143 §6.3)"
            )));
        }
        adm.negotiator
            .handle_text(stage_now, &others, &mut out)
            .map_err(LoginFailure::from_negotiation)?;
        if first_text {
            // RFC 7143 §13.9: the tag goes in the first Login Response.
            let tag = adm.target_portal_group_tag.to_string();
            adm.negotiator
                .declare(name::TARGET_PORTAL_GROUP_TAG, &tag, &mut out);
            if let (Some(alias), SessionType::Normal) =
                (&adm.target_alias, adm.negotiator.session().session_type)
            {
                adm.negotiator.declare(name::TARGET_ALIAS, alias, &mut out);
            }
        }
        if stage_now == stage::OPERATIONAL {
            adm.negotiator
                .declare_max_recv_data_segment_length(&mut out);
            // RFC 7143 §6.2: offers of ours that this text left unanswered.
            if adm.negotiator.has_pending_offers() {
                let keys: Vec<_> = adm.negotiator.pending_offers().collect();
                return Err(LoginFailure::protocol(format!(
                    "the initiator did not answer {}",
                    keys.join(", ")
                )));
            }
        }
        let transit = adm.decide_transit(req, stage_now, progressed, &mut out)?;
        Ok((out, transit))
    }

    /// Reads the names of the first complete text and asks the policy.
    fn admit(
        &mut self,
        req: &LoginRequest,
        pairs: &[(&str, &str)],
        policy: &dyn LoginPolicy,
    ) -> Result<(), LoginFailure> {
        let find = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let session_type = match find(name::SESSION_TYPE) {
            None => SessionType::Normal,
            Some(v) => SessionType::from_value(v).ok_or_else(|| {
                LoginFailure::initiator(
                    status::SESSION_TYPE_NOT_SUPPORTED,
                    format!("SessionType={v:?} is not supported (RFC 7143 §13.21)"),
                )
            })?,
        };
        let Some(initiator_name) = find(name::INITIATOR_NAME).filter(|n| !n.is_empty()) else {
            return Err(LoginFailure::initiator(
                status::MISSING_PARAMETER,
                "InitiatorName missing from the first login text (RFC 7143 §13.5)",
            ));
        };
        let target_name = find(name::TARGET_NAME).filter(|n| !n.is_empty());
        if session_type == SessionType::Normal && target_name.is_none() {
            return Err(LoginFailure::initiator(
                status::MISSING_PARAMETER,
                "TargetName missing from the first login text of a normal session (RFC 7143 §13.4)",
            ));
        }
        check_name(
            name::INITIATOR_NAME,
            initiator_name,
            status::INITIATOR_ERROR_DETAIL,
        )?;
        if let Some(target_name) = target_name {
            check_name(name::TARGET_NAME, target_name, status::NOT_FOUND)?;
        }
        let admission = policy.admit(session_type, initiator_name, target_name)?;
        check_auth_policy(&admission.auth)?;
        if matches!(admission.auth, AuthPolicy::Chap { .. }) && req.csg != stage::SECURITY {
            return Err(LoginFailure::authentication(
                "authentication is required but the login skipped the security stage (RFC 7143 §6.3)",
            ));
        }
        let config = admission.overrides.as_ref().unwrap_or(&self.config);
        let mut negotiator = Negotiator::new(Role::Target, config.local_params(), req.tsih == 0);
        negotiator.set_session_type(session_type);
        self.admitted = Some(Admitted {
            auth: if matches!(admission.auth, AuthPolicy::None) {
                TargetAuth::Done
            } else {
                TargetAuth::Start
            },
            auth_policy: admission.auth,
            target_alias: admission.target_alias,
            target_portal_group_tag: config.target_portal_group_tag,
            negotiator,
            security_keys: BTreeSet::new(),
        });
        Ok(())
    }

    /// Takes the next piece of the response text (at most 8192 bytes) and,
    /// with the last piece, makes the stage change decided for it.
    fn emit(&mut self, req: &LoginRequest) -> LoginStep {
        let mut response = self.response_header(req);
        let piece = self.text_out.len().min(LOGIN_DATA_SEGMENT_MAX_BYTES);
        let data: Vec<u8> = self.text_out.drain(..piece).collect();
        if !self.text_out.is_empty() {
            response.continue_bit = true;
            return LoginStep {
                response,
                data,
                outcome: LoginOutcome::Continue,
            };
        }
        // The initiator's T bit on the request answered now decides: the
        // target never transits unless asked (RFC 7143 §11.13.6).
        let transit = self.transit_out.take().filter(|_| req.transit);
        let mut outcome = LoginOutcome::Continue;
        if let Some(nsg) = transit {
            response.transit = true;
            response.nsg = nsg;
            self.stage = nsg;
            if nsg == stage::FULL_FEATURE {
                self.ended = true;
                outcome = LoginOutcome::Complete(self.negotiated());
            }
        }
        LoginStep {
            response,
            data,
            outcome,
        }
    }

    fn negotiated(&mut self) -> Negotiated {
        let adm = self
            .admitted
            .as_ref()
            .expect("only an admitted login completes");
        let first = self.first.expect("only a started login completes");
        let (mut session, connection) = adm.negotiator.clone().finish();
        session.target_alias = adm.target_alias.clone();
        session.target_portal_group_tag = Some(adm.target_portal_group_tag);
        Negotiated {
            session,
            connection,
            isid: first.isid,
            tsih_requested: first.tsih,
            cid: first.cid,
        }
    }

    fn response_header(&self, req: &LoginRequest) -> LoginResponse {
        // Before the first request is accepted its CSG may be invalid.
        let csg = match self.first {
            Some(_) => self.stage,
            None if req.csg == stage::OPERATIONAL => stage::OPERATIONAL,
            None => stage::SECURITY,
        };
        LoginResponse {
            csg,
            version_max: VERSION,
            version_active: VERSION,
            isid: req.isid,
            tsih: req.tsih,
            initiator_task_tag: req.initiator_task_tag,
            ..LoginResponse::default()
        }
    }

    fn fail(&mut self, req: &LoginRequest, mut failure: LoginFailure) -> LoginStep {
        if failure.status_class == status::SUCCESS {
            // A policy that refuses with "success" still refuses.
            failure.status_class = status::TARGET_ERROR;
        }
        // The reason goes to logs; whatever of the peer's text it quotes
        // must not start a line of its own or hide what follows.
        if let Cow::Owned(escaped) = escape_for_log(&failure.reason) {
            failure.reason = escaped;
        }
        self.ended = true;
        self.text_out.clear();
        let mut response = self.response_header(req);
        response.status_class = failure.status_class;
        response.status_detail = failure.status_detail;
        LoginStep {
            response,
            data: Vec::new(),
            outcome: LoginOutcome::Failed(failure),
        }
    }
}

/// Refuses a login whose `key` (InitiatorName or TargetName) is not an
/// iSCSI name, with class 2 and `detail`: 0x0200 (initiator error) for the
/// initiator's own name, 0x0203 (not found) for a TargetName, since no
/// target here can have a malformed name. The name is quoted escaped.
///
/// Upper-case ASCII letters pass: RFC 3722's stringprep profile folds case,
/// so such a name is one an initiator failed to fold, not a different or
/// malformed one, and refusing it would lock out initiators that send it.
/// The name is then used as sent (an access list written in lower case
/// does not match it, and the refusal says which name was sent).
fn check_name(key: &str, value: &str, detail: u8) -> Result<(), LoginFailure> {
    crate::name::validate(&value.to_ascii_lowercase()).map_err(|error| {
        LoginFailure::initiator(
            detail,
            format!(
                "{key} \"{}\" is not an iSCSI name: {error}",
                escape_for_log(value)
            ),
        )
    })
}

/// Refuses CHAP policies the RFC warns against: no algorithm, an empty
/// secret, or one secret for both directions (RFC 7143 §9.2.1).
fn check_auth_policy(auth: &AuthPolicy) -> Result<(), LoginFailure> {
    let AuthPolicy::Chap {
        initiator_secret,
        mutual,
        algorithms,
        ..
    } = auth
    else {
        return Ok(());
    };
    let refuse = |why: &str| {
        Err(LoginFailure::new(
            status::TARGET_ERROR,
            status::TARGET_ERROR_DETAIL,
            why,
        ))
    };
    if algorithms.is_empty() {
        return refuse("CHAP is required but no CHAP algorithm is enabled");
    }
    if initiator_secret.is_empty() || mutual.as_ref().is_some_and(|(_, s)| s.is_empty()) {
        return refuse("a CHAP secret is empty");
    }
    if mutual
        .as_ref()
        .is_some_and(|(_, s)| s.ct_eq(initiator_secret))
    {
        return refuse("the mutual CHAP secret equals the initiator's secret (RFC 7143 §9.2.1)");
    }
    Ok(())
}

impl Admitted {
    fn auth_complete(&self) -> bool {
        matches!(self.auth, TargetAuth::Done)
    }

    /// The stage a request asking to transit moves to, if it may move now.
    /// `progressed`: the CHAP exchange advanced in this request.
    fn decide_transit(
        &mut self,
        req: &LoginRequest,
        stage_now: u8,
        progressed: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<u8>, LoginFailure> {
        if !req.transit {
            return Ok(None);
        }
        if stage_now == stage::SECURITY {
            if !self.auth_complete() {
                if progressed {
                    // The exchange moved on in this PDU; stay until it ends.
                    return Ok(None);
                }
                return Err(LoginFailure::authentication(
                    "the initiator left the security stage before authenticating (RFC 7143 §6.3.2)",
                ));
            }
            // RFC 7143 §6.3, §11.13.6: the target transits no further than
            // asked, and may stop short of it; it does so (NSG 1 for a requested
            // 3) when it still has operational keys to declare or offer.
            let stop_short = req.nsg == stage::FULL_FEATURE
                && self
                    .negotiator
                    .has_something_to_offer(OfferPolicy::NonDefault);
            return Ok(Some(if stop_short {
                stage::OPERATIONAL
            } else {
                req.nsg
            }));
        }
        // RFC 7143 §6.3: keys the initiator left out whose default we
        // cannot accept are offered now; transit waits for the answers.
        if self.negotiator.write_offers(OfferPolicy::NonDefault, out) > 0 {
            return Ok(None);
        }
        Ok(Some(stage::FULL_FEATURE))
    }

    /// RFC 7143 §12.1: AuthMethod, then CHAP_A, then CHAP_N/CHAP_R (and, for
    /// mutual CHAP, CHAP_I/CHAP_C). Returns true when the exchange advanced.
    fn handle_security(
        &mut self,
        pairs: &[(&str, &str)],
        policy: &dyn LoginPolicy,
        random: &[u8; 32],
        out: &mut Vec<u8>,
    ) -> Result<bool, LoginFailure> {
        let get = |key: &'static str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let (auth_method, chap_a) = (get(name::AUTH_METHOD), get(name::CHAP_A));
        let (chap_n, chap_r, chap_i, chap_c) = (
            get(name::CHAP_N),
            get(name::CHAP_R),
            get(name::CHAP_I),
            get(name::CHAP_C),
        );
        for (key, _) in pairs {
            if !self.security_keys.insert(key.to_string()) {
                return Err(LoginFailure::protocol(format!(
                    "{key} sent twice in one login (RFC 7143 §6.2)"
                )));
            }
            let known = [
                name::AUTH_METHOD,
                name::CHAP_A,
                name::CHAP_N,
                name::CHAP_R,
                name::CHAP_I,
                name::CHAP_C,
            ];
            if !known.contains(key) {
                // RFC 7143 §6.2: other methods' keys (SRP_*, KRB_*...) are not understood.
                push_pair(out, key, answer::NOT_UNDERSTOOD);
            }
        }
        let mut progressed = false;
        if let Some(offer) = auth_method {
            progressed |= self.choose_auth_method(offer, out)?;
        }
        if let Some(offer) = chap_a {
            let TargetAuth::ChapAgreed = self.auth else {
                return Err(LoginFailure::authentication(
                    "CHAP_A before AuthMethod=CHAP was agreed (RFC 7143 §12.1.3)",
                ));
            };
            let AuthPolicy::Chap { algorithms, .. } = &self.auth_policy else {
                unreachable!("CHAP agreed")
            };
            let algorithm = ChapAlgorithm::choose(offer, algorithms).ok_or_else(|| {
                LoginFailure::from_chap(ChapError::NoCommonAlgorithm {
                    offered: offer.to_string(),
                })
            })?;
            let challenge = Challenge::from_random(algorithm, random);
            if !policy.record_challenge(challenge.value()) {
                return Err(LoginFailure::new(
                    status::TARGET_ERROR,
                    status::TARGET_ERROR_DETAIL,
                    format!("CHAP: {} (RFC 1994 §2.3)", ChapError::RepeatedChallenge),
                ));
            }
            push_pair(out, name::CHAP_A, &algorithm.code().to_string());
            challenge.write(out);
            self.auth = TargetAuth::Challenged(challenge);
            return Ok(true);
        }
        if chap_n.is_some() || chap_r.is_some() || chap_i.is_some() || chap_c.is_some() {
            self.verify_chap(chap_n, chap_r, chap_i, chap_c, policy, out)?;
            progressed = true;
        }
        Ok(progressed)
    }

    /// RFC 7143 §6.2.1: the first method of the initiator's list that the
    /// policy allows. Returns true when CHAP was chosen (the exchange goes on).
    fn choose_auth_method(&mut self, offer: &str, out: &mut Vec<u8>) -> Result<bool, LoginFailure> {
        let ours = match self.auth_policy {
            AuthPolicy::None => "None",
            AuthPolicy::Chap { .. } => "CHAP",
        };
        let agreed = split_list(offer).any(|m| m == ours);
        match (&self.auth_policy, agreed) {
            (AuthPolicy::Chap { .. }, true) => {
                push_pair(out, name::AUTH_METHOD, "CHAP");
                self.auth = TargetAuth::ChapAgreed;
                Ok(true)
            }
            (AuthPolicy::Chap { .. }, false) => Err(LoginFailure::authentication(format!(
                "AuthMethod={offer:?} does not include CHAP, which this target requires"
            ))),
            (AuthPolicy::None, true) => {
                push_pair(out, name::AUTH_METHOD, "None");
                Ok(false)
            }
            // The initiator may still go on without authentication.
            (AuthPolicy::None, false) => {
                push_pair(out, name::AUTH_METHOD, answer::REJECT);
                Ok(false)
            }
        }
    }

    fn verify_chap(
        &mut self,
        chap_n: Option<&str>,
        chap_r: Option<&str>,
        chap_i: Option<&str>,
        chap_c: Option<&str>,
        policy: &dyn LoginPolicy,
        out: &mut Vec<u8>,
    ) -> Result<(), LoginFailure> {
        let TargetAuth::Challenged(challenge) = &mut self.auth else {
            return Err(LoginFailure::authentication(
                "CHAP_N/CHAP_R/CHAP_I/CHAP_C before a challenge was sent",
            ));
        };
        let AuthPolicy::Chap {
            initiator_user,
            initiator_secret,
            mutual,
            ..
        } = &self.auth_policy
        else {
            unreachable!("a challenge implies CHAP")
        };
        let n = chap_n
            .ok_or(ChapError::Missing { key: name::CHAP_N })
            .map_err(LoginFailure::from_chap)?;
        let r = chap_r
            .ok_or(ChapError::Missing { key: name::CHAP_R })
            .map_err(LoginFailure::from_chap)?;
        challenge
            .verify(initiator_user, initiator_secret, n, r)
            .map_err(LoginFailure::from_chap)?;
        match (chap_i, chap_c) {
            (None, None) => {}
            (Some(i), Some(c)) => {
                let Some((target_user, target_secret)) = mutual else {
                    return Err(LoginFailure::authentication(
                        "the initiator asked for mutual CHAP but no target credentials are configured",
                    ));
                };
                let algorithm = challenge.algorithm();
                let (id, value) =
                    parse_challenge(algorithm, i, c).map_err(LoginFailure::from_chap)?;
                // Ours from this login, or from any other connection's.
                if challenge.is_reflected_by(&value) || policy.is_own_challenge(&value) {
                    return Err(LoginFailure::from_chap(ChapError::ReflectedChallenge));
                }
                push_pair(out, name::CHAP_N, target_user);
                push_pair(
                    out,
                    name::CHAP_R,
                    &encode_hex(&algorithm.response(id, target_secret, &value)),
                );
            }
            (None, Some(_)) => {
                return Err(LoginFailure::from_chap(ChapError::Missing {
                    key: name::CHAP_I,
                }))
            }
            (Some(_), None) => {
                return Err(LoginFailure::from_chap(ChapError::Missing {
                    key: name::CHAP_C,
                }))
            }
        }
        self.auth = TargetAuth::Done;
        Ok(())
    }
}

/// CHAP credentials of an initiator.
#[derive(Debug, Clone)]
pub struct InitiatorChap {
    /// Our CHAP_N.
    pub user: String,
    /// Our secret.
    pub secret: Secret,
    /// For mutual CHAP: the name and secret the target must prove.
    pub mutual: Option<(String, Secret)>,
    /// Algorithms we offer in CHAP_A, preferred first.
    pub algorithms: Vec<ChapAlgorithm>,
}

/// What an initiator logs in with.
#[derive(Debug, Clone)]
pub struct InitiatorLoginConfig {
    /// InitiatorName (RFC 7143 §13.5).
    pub initiator_name: String,
    /// InitiatorAlias (§13.7).
    pub initiator_alias: Option<String>,
    /// TargetName (§13.4); required for a normal session.
    pub target_name: Option<String>,
    /// SessionType (§13.21).
    pub session_type: SessionType,
    /// ISID (§11.12.5).
    pub isid: [u8; 6],
    /// TSIH: 0 for a new session, the session's to add a connection.
    pub tsih: u16,
    /// CID.
    pub cid: u16,
    /// The Initiator Task Tag of every request of this login.
    pub initiator_task_tag: u32,
    /// CmdSN of the login requests (RFC 7143 §11.12.8).
    pub cmd_sn: u32,
    /// The parameters we want.
    pub params: LocalParams,
    /// CHAP credentials, if we authenticate.
    pub chap: Option<InitiatorChap>,
}

/// What the initiator does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitiatorStep {
    /// Send this Login Request.
    Send {
        /// The header.
        request: LoginRequest,
        /// Its text data segment.
        data: Vec<u8>,
    },
    /// The login succeeded; the connection is in full feature phase.
    Complete {
        /// What was negotiated.
        negotiated: Negotiated,
        /// The session's TSIH from the final response.
        tsih: u16,
    },
}

/// Why an initiator's login failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InitiatorLoginError {
    /// The target answered with a failure status (class 2 or 3).
    #[error(
        "target refused the login: {description} (status 0x{status_class:02x}{status_detail:02x})"
    )]
    Refused {
        /// Status-Class.
        status_class: u8,
        /// Status-Detail.
        status_detail: u8,
        /// The status in words (RFC 7143 §11.13.5).
        description: &'static str,
    },
    /// The target redirects the login elsewhere (class 1).
    #[error("target redirects the login to {target_address:?}: {description}")]
    Redirected {
        /// Status-Detail: 1 temporary, 2 permanent.
        status_detail: u8,
        /// The status in words.
        description: &'static str,
        /// The TargetAddress the response carried.
        target_address: Option<String>,
    },
    /// The target accepted no authentication method we offered.
    #[error("target answered AuthMethod={0:?} to our offer")]
    AuthMethodRefused(String),
    /// Our side of the CHAP exchange failed.
    #[error("CHAP: {0}")]
    Chap(ChapError),
    /// The target failed to prove its identity (mutual CHAP).
    #[error("the target failed mutual CHAP authentication: {0}")]
    TargetAuthentication(ChapError),
    /// The key negotiation failed.
    #[error("negotiation: {0}")]
    Negotiation(NegotiationError),
    /// The target's text is malformed.
    #[error("malformed login text from the target: {0}")]
    Text(TextError),
    /// The target broke a rule of RFC 7143 §11.13 or §6.3.
    #[error("target protocol violation: {0}")]
    Protocol(String),
    /// The login ended already.
    #[error("the login has already ended")]
    Ended,
}

/// The initiator's progress in the security stage.
#[derive(Debug)]
enum InitiatorAuth {
    /// No authentication configured.
    NotUsed,
    /// AuthMethod offered.
    MethodOffered,
    /// CHAP_A offered.
    AlgorithmsOffered,
    /// CHAP_N/CHAP_R sent; for mutual CHAP, our challenge to the target.
    Responded(Option<Challenge>),
    /// Done (or AuthMethod=None agreed).
    Done,
}

/// The initiator side of one connection's login (RFC 7143 §6.3).
///
/// [`InitiatorLogin::start`] gives the first Login Request; each Login
/// Response goes to [`InitiatorLogin::handle_response`], which gives the next
/// request or the result.
#[derive(Debug)]
pub struct InitiatorLogin {
    config: InitiatorLoginConfig,
    random: [u8; 32],
    stage: u8,
    negotiator: Negotiator,
    auth: InitiatorAuth,
    security_keys: BTreeSet<String>,
    exp_stat_sn: u32,
    pdus: u32,
    text_in: Vec<u8>,
    text_out: Vec<u8>,
    /// The NSG asked for with the text in `text_out`, once its last piece goes.
    transit_out: Option<u8>,
    /// The NSG asked for in the last request sent (T=1), if any.
    asked: Option<u8>,
    ended: bool,
}

impl InitiatorLogin {
    /// A login with `config`; `random` seeds our mutual CHAP challenge.
    pub fn new(config: InitiatorLoginConfig, random: [u8; 32]) -> Self {
        let mut negotiator =
            Negotiator::new(Role::Initiator, config.params.clone(), config.tsih == 0);
        negotiator.set_session_type(config.session_type);
        let session = negotiator.session_mut();
        session.initiator_name = config.initiator_name.clone();
        session.initiator_alias = config.initiator_alias.clone();
        session.target_name = config.target_name.clone();
        let auth = if config.chap.is_some() {
            InitiatorAuth::MethodOffered
        } else {
            InitiatorAuth::NotUsed
        };
        InitiatorLogin {
            config,
            random,
            stage: stage::SECURITY,
            negotiator,
            auth,
            security_keys: BTreeSet::new(),
            exp_stat_sn: 0,
            pdus: 0,
            text_in: Vec::new(),
            text_out: Vec::new(),
            transit_out: None,
            asked: None,
            ended: false,
        }
    }

    /// The first Login Request: the names, then either AuthMethod (security
    /// stage) or, without CHAP, every operational offer (operational stage).
    pub fn start(&mut self) -> InitiatorStep {
        let mut out = Vec::new();
        let c = &self.config;
        self.negotiator
            .declare(name::INITIATOR_NAME, &c.initiator_name, &mut out);
        if let Some(alias) = &c.initiator_alias {
            self.negotiator
                .declare(name::INITIATOR_ALIAS, alias, &mut out);
        }
        if c.tsih == 0 {
            self.negotiator
                .declare(name::SESSION_TYPE, c.session_type.as_str(), &mut out);
        }
        if let Some(target) = &c.target_name {
            self.negotiator.declare(name::TARGET_NAME, target, &mut out);
        }
        match &c.chap {
            Some(chap) => {
                self.stage = stage::SECURITY;
                // Without mutual CHAP we accept a target that needs no authentication.
                let offer = if chap.mutual.is_some() {
                    "CHAP"
                } else {
                    "CHAP,None"
                };
                push_pair(&mut out, name::AUTH_METHOD, offer);
                self.send(out, None)
            }
            None => {
                // RFC 7143 §6.3: with no security negotiation, login starts in the operational stage.
                self.stage = stage::OPERATIONAL;
                self.negotiator.write_offers(OfferPolicy::All, &mut out);
                self.negotiator
                    .declare_max_recv_data_segment_length(&mut out);
                self.send(out, Some(stage::FULL_FEATURE))
            }
        }
    }

    /// Feeds one Login Response (header + data segment).
    pub fn handle_response(
        &mut self,
        resp: &LoginResponse,
        data: &[u8],
    ) -> Result<InitiatorStep, InitiatorLoginError> {
        if self.ended {
            return Err(InitiatorLoginError::Ended);
        }
        let result = self.step(resp, data);
        if !matches!(result, Ok(InitiatorStep::Send { .. })) {
            self.ended = true;
        }
        result
    }

    fn step(
        &mut self,
        resp: &LoginResponse,
        data: &[u8],
    ) -> Result<InitiatorStep, InitiatorLoginError> {
        let protocol = |why: String| Err(InitiatorLoginError::Protocol(why));
        self.pdus += 1;
        if self.pdus > LOGIN_PDUS_MAX {
            return protocol(format!("login did not finish within {LOGIN_PDUS_MAX} PDUs"));
        }
        // A refusal ends the login whatever else the response says, and its
        // status is what the user needs: tgt zeroes the ISID of its refusals.
        if resp.status_class != status::SUCCESS {
            return Err(self.refusal(resp, data));
        }
        if resp.initiator_task_tag != self.config.initiator_task_tag
            || resp.isid != self.config.isid
        {
            return protocol("Initiator Task Tag or ISID differs from the request's".into());
        }
        if resp.version_active != VERSION {
            return protocol(format!(
                "Version-active 0x{:02x}; only 0x00 exists",
                resp.version_active
            ));
        }
        if resp.csg != self.stage {
            return protocol(format!(
                "response in stage {} while the login is in stage {}",
                resp.csg, self.stage
            ));
        }
        if resp.transit
            && (resp.continue_bit || !transit_asked(self.asked, resp.nsg) || resp.nsg <= self.stage)
        {
            return protocol(format!(
                "transit to NSG {} that was not asked for (RFC 7143 §11.13.6)",
                resp.nsg
            ));
        }
        if data.len() > LOGIN_DATA_SEGMENT_MAX_BYTES {
            return protocol(format!(
                "login data segment of {} bytes exceeds 8192",
                data.len()
            ));
        }
        self.exp_stat_sn = resp.stat_sn.wrapping_add(1);
        if !self.text_out.is_empty() {
            if !data.is_empty() || resp.continue_bit || resp.transit {
                return protocol(
                    "the target sent text while our request text was continuing".into(),
                );
            }
            let transit = self.transit_out;
            return Ok(self.send(Vec::new(), transit));
        }
        if self.text_in.len() + data.len() > LOGIN_TEXT_MAX_BYTES {
            return protocol(format!("login text exceeds {LOGIN_TEXT_MAX_BYTES} bytes"));
        }
        self.text_in.extend_from_slice(data);
        if resp.continue_bit {
            // The empty request that fetches the rest repeats our T bit, so
            // the target can transit with the last piece.
            let asked = self.asked;
            return Ok(self.send(Vec::new(), asked));
        }
        let text = std::mem::take(&mut self.text_in);
        let pairs = parse_pairs(&text).map_err(InitiatorLoginError::Text)?;
        self.process(resp, &pairs)
    }

    fn process(
        &mut self,
        resp: &LoginResponse,
        pairs: &[(&str, &str)],
    ) -> Result<InitiatorStep, InitiatorLoginError> {
        let (security, others): (Vec<_>, Vec<_>) = pairs
            .iter()
            .copied()
            .partition(|(k, _)| keys::is_security_key(k));
        let mut out = Vec::new();
        if self.stage == stage::SECURITY {
            self.handle_security(&security, &mut out)?;
        } else if let Some((key, _)) = security.first() {
            return Err(InitiatorLoginError::Protocol(format!(
                "{key} in the operational stage"
            )));
        }
        let stage_now = self.stage;
        self.negotiator
            .handle_text(stage_now, &others, &mut out)
            .map_err(InitiatorLoginError::Negotiation)?;
        if resp.transit {
            if !self.auth_complete() {
                return Err(InitiatorLoginError::TargetAuthentication(
                    ChapError::Missing { key: name::CHAP_R },
                ));
            }
            if resp.nsg == stage::FULL_FEATURE {
                if !out.is_empty() {
                    return Err(InitiatorLoginError::Protocol(
                        "the target ended the login with keys still to answer".into(),
                    ));
                }
                return Ok(self.complete(resp));
            }
            // Into the operational stage: every offer of ours goes now.
            self.stage = resp.nsg;
            self.negotiator.write_offers(OfferPolicy::All, &mut out);
            self.negotiator
                .declare_max_recv_data_segment_length(&mut out);
            return Ok(self.send(out, Some(stage::FULL_FEATURE)));
        }
        let transit = match (self.stage, &self.auth) {
            // Still negotiating CHAP: T=1 only with our response.
            (stage::SECURITY, InitiatorAuth::MethodOffered | InitiatorAuth::AlgorithmsOffered) => {
                None
            }
            (stage::SECURITY, _) => Some(stage::OPERATIONAL),
            _ => Some(stage::FULL_FEATURE),
        };
        Ok(self.send(out, transit))
    }

    /// The CHAP exchange as the initiator sees it (RFC 7143 §12.1.3).
    fn handle_security(
        &mut self,
        pairs: &[(&str, &str)],
        out: &mut Vec<u8>,
    ) -> Result<(), InitiatorLoginError> {
        let get = |key: &'static str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        for (key, _) in pairs {
            if !self.security_keys.insert(key.to_string()) {
                return Err(InitiatorLoginError::Protocol(format!(
                    "{key} sent twice (RFC 7143 §6.2)"
                )));
            }
        }
        if self.config.chap.is_none() {
            if let Some((key, _)) = pairs.first() {
                return Err(InitiatorLoginError::Protocol(format!(
                    "{key} although we offered no authentication"
                )));
            }
            return Ok(());
        }
        if let Some(method) = get(name::AUTH_METHOD) {
            self.answer_auth_method(method, out)?;
        }
        if let Some(a) = get(name::CHAP_A) {
            self.answer_challenge(a, get(name::CHAP_I), get(name::CHAP_C), out)?;
        }
        let (n, r) = (get(name::CHAP_N), get(name::CHAP_R));
        if n.is_some() || r.is_some() {
            self.verify_target(n, r)?;
        }
        let known = [
            name::AUTH_METHOD,
            name::CHAP_A,
            name::CHAP_I,
            name::CHAP_C,
            name::CHAP_N,
            name::CHAP_R,
        ];
        for (key, _) in pairs.iter().filter(|(k, _)| !known.contains(k)) {
            push_pair(out, key, answer::NOT_UNDERSTOOD);
        }
        Ok(())
    }

    /// The target's AuthMethod answer: CHAP goes on with CHAP_A; None is
    /// accepted only when we offered it (no mutual CHAP).
    fn answer_auth_method(
        &mut self,
        method: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), InitiatorLoginError> {
        let chap = self.config.chap.as_ref().expect("checked by the caller");
        if !matches!(self.auth, InitiatorAuth::MethodOffered) {
            return Err(InitiatorLoginError::Protocol(
                "AuthMethod answered out of turn".into(),
            ));
        }
        match method {
            "CHAP" => {
                push_pair(out, name::CHAP_A, &ChapAlgorithm::list(&chap.algorithms));
                self.auth = InitiatorAuth::AlgorithmsOffered;
            }
            "None" if chap.mutual.is_none() => self.auth = InitiatorAuth::Done,
            other => return Err(InitiatorLoginError::AuthMethodRefused(other.to_string())),
        }
        Ok(())
    }

    /// The target's CHAP_A, CHAP_I and CHAP_C: our CHAP_N and CHAP_R, and for
    /// mutual CHAP our own challenge.
    fn answer_challenge(
        &mut self,
        a: &str,
        i: Option<&str>,
        c: Option<&str>,
        out: &mut Vec<u8>,
    ) -> Result<(), InitiatorLoginError> {
        let chap = self.config.chap.as_ref().expect("checked by the caller");
        if !matches!(self.auth, InitiatorAuth::AlgorithmsOffered) {
            return Err(InitiatorLoginError::Protocol(
                "CHAP_A from the target out of turn".into(),
            ));
        }
        let algorithm = decode_number(a)
            .ok()
            .and_then(ChapAlgorithm::from_code)
            .filter(|alg| chap.algorithms.contains(alg))
            .ok_or_else(|| {
                InitiatorLoginError::Chap(ChapError::UnexpectedAlgorithm {
                    value: a.to_string(),
                })
            })?;
        let i = i.ok_or(InitiatorLoginError::Chap(ChapError::Missing {
            key: name::CHAP_I,
        }))?;
        let c = c.ok_or(InitiatorLoginError::Chap(ChapError::Missing {
            key: name::CHAP_C,
        }))?;
        let (id, challenge) =
            parse_challenge(algorithm, i, c).map_err(InitiatorLoginError::Chap)?;
        push_pair(out, name::CHAP_N, &chap.user);
        push_pair(
            out,
            name::CHAP_R,
            &encode_hex(&algorithm.response(id, &chap.secret, &challenge)),
        );
        let ours = chap
            .mutual
            .as_ref()
            .map(|_| Challenge::from_random(algorithm, &self.random));
        if let Some(ours) = &ours {
            // RFC 7143 §9.2.1: never reuse the other direction's challenge.
            if ours.is_reflected_by(&challenge) {
                return Err(InitiatorLoginError::Chap(ChapError::ReflectedChallenge));
            }
            ours.write(out);
        }
        self.auth = InitiatorAuth::Responded(ours);
        Ok(())
    }

    /// Mutual CHAP: the target's CHAP_N and CHAP_R against our challenge.
    fn verify_target(
        &mut self,
        n: Option<&str>,
        r: Option<&str>,
    ) -> Result<(), InitiatorLoginError> {
        let chap = self.config.chap.as_ref().expect("checked by the caller");
        let InitiatorAuth::Responded(Some(ours)) = &mut self.auth else {
            return Err(InitiatorLoginError::Protocol(
                "CHAP_N/CHAP_R from the target without our challenge".into(),
            ));
        };
        let (user, secret) = chap
            .mutual
            .as_ref()
            .expect("our challenge implies mutual CHAP");
        let missing = |key| InitiatorLoginError::TargetAuthentication(ChapError::Missing { key });
        let n = n.ok_or_else(|| missing(name::CHAP_N))?;
        let r = r.ok_or_else(|| missing(name::CHAP_R))?;
        ours.verify(user, secret, n, r)
            .map_err(InitiatorLoginError::TargetAuthentication)?;
        self.auth = InitiatorAuth::Done;
        Ok(())
    }

    /// True when the target may let us out of the security stage: our
    /// response has gone (the target verifies it) and a mutual check passed.
    fn auth_complete(&self) -> bool {
        match &self.auth {
            InitiatorAuth::NotUsed | InitiatorAuth::Done | InitiatorAuth::Responded(None) => true,
            InitiatorAuth::MethodOffered
            | InitiatorAuth::AlgorithmsOffered
            | InitiatorAuth::Responded(Some(_)) => self.stage != stage::SECURITY,
        }
    }

    fn complete(&mut self, resp: &LoginResponse) -> InitiatorStep {
        let (session, connection) = self.negotiator.clone().finish();
        let c = &self.config;
        let negotiated = Negotiated {
            session,
            connection,
            isid: c.isid,
            tsih_requested: c.tsih,
            cid: c.cid,
        };
        InitiatorStep::Complete {
            negotiated,
            tsih: resp.tsih,
        }
    }

    /// Builds the next request, splitting texts longer than 8192 bytes with the C bit.
    fn send(&mut self, mut text: Vec<u8>, transit: Option<u8>) -> InitiatorStep {
        if !self.text_out.is_empty() {
            text = std::mem::take(&mut self.text_out);
        }
        let piece = text.len().min(LOGIN_DATA_SEGMENT_MAX_BYTES);
        let rest = text.split_off(piece);
        let more = !rest.is_empty();
        self.text_out = rest;
        self.transit_out = if more { transit } else { None };
        let transit = if more { None } else { transit };
        self.asked = transit;
        let c = &self.config;
        let request = LoginRequest {
            transit: transit.is_some(),
            continue_bit: more,
            csg: self.stage,
            nsg: transit.unwrap_or(0),
            version_max: VERSION,
            version_min: VERSION,
            isid: c.isid,
            tsih: c.tsih,
            initiator_task_tag: c.initiator_task_tag,
            cid: c.cid,
            cmd_sn: c.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        };
        InitiatorStep::Send {
            request,
            data: text,
        }
    }

    fn refusal(&self, resp: &LoginResponse, data: &[u8]) -> InitiatorLoginError {
        let description = status_description(resp.status_class, resp.status_detail);
        if resp.status_class == status::REDIRECTION {
            // RFC 7143 §11.13.5: a redirection carries TargetAddress.
            let target_address = parse_pairs(data).ok().and_then(|p| {
                p.iter()
                    .find(|(k, _)| *k == name::TARGET_ADDRESS)
                    .map(|(_, v)| v.to_string())
            });
            return InitiatorLoginError::Redirected {
                status_detail: resp.status_detail,
                description,
                target_address,
            };
        }
        InitiatorLoginError::Refused {
            status_class: resp.status_class,
            status_detail: resp.status_detail,
            description,
        }
    }
}

/// RFC 7143 §11.13.6: the target transits only when asked, and never
/// beyond the stage asked for.
fn transit_asked(asked: Option<u8>, nsg: u8) -> bool {
    asked.is_some_and(|a| nsg <= a)
}
