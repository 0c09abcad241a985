//! Text-key negotiation (RFC 7143 §6.2–§6.6): answering offers, making
//! offers and checking the answers, and the parameters that result.
//!
//! A [`Negotiator`] serves one login (or one text negotiation) on one side.
//! As responder it turns each received `key=value` into the answer of §6.2
//! (a value, `NotUnderstood`, `Irrelevant` or `Reject`); as originator it
//! writes offers and checks what comes back. Security keys (AuthMethod,
//! CHAP_*) belong to the login state machine, not to this engine.
//!
//! The engine never fails on a key it does not know or a value it cannot
//! accept: those get the RFC's answers. It fails (and the login with it) only
//! where RFC 7143 makes the exchange itself invalid: a key sent twice, a key
//! in the wrong stage, an invalid declaration, an answer that contradicts
//! the offer.

use crate::keys::{self, answer, name, KeyDef, KeyKind, Senders, Usage, ValueType};
use crate::pdu::stage;
use crate::text::{decode_boolean, decode_number, encode_boolean, push_pair, split_list};
use std::collections::BTreeSet;
use thiserror::Error;

/// A digest HeaderDigest or DataDigest may select (RFC 7143 §13.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Digest {
    /// No digest.
    None,
    /// CRC32C (generator 0x11edc6f41).
    Crc32c,
}

impl Digest {
    /// The value as written in login text.
    pub fn as_str(self) -> &'static str {
        match self {
            Digest::None => "None",
            Digest::Crc32c => "CRC32C",
        }
    }

    /// Parses one value of the list.
    pub fn from_value(value: &str) -> Option<Digest> {
        match value {
            "None" => Some(Digest::None),
            "CRC32C" => Some(Digest::Crc32c),
            _ => None,
        }
    }
}

/// The kind of session (RFC 7143 §13.21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SessionType {
    /// Full SCSI service (the default).
    #[default]
    Normal,
    /// Only SendTargets text requests (RFC 7143 §4.3).
    Discovery,
}

impl SessionType {
    /// The value as written in login text.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionType::Normal => "Normal",
            SessionType::Discovery => "Discovery",
        }
    }

    /// Parses a SessionType value.
    pub fn from_value(value: &str) -> Option<SessionType> {
        match value {
            "Normal" => Some(SessionType::Normal),
            "Discovery" => Some(SessionType::Discovery),
            _ => None,
        }
    }
}

impl std::fmt::Display for SessionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Task completion reporting semantics (RFC 7143 §13.23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskReporting {
    /// The semantics of RFC 3720 (the default).
    #[default]
    Rfc3720,
    /// Response fence semantics (RFC 7143 §4.2.2.3.3).
    ResponseFence,
    /// Fast abort multi-task abort semantics (RFC 7143 §4.2.3.4).
    FastAbort,
}

impl TaskReporting {
    /// The value as written in login text.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskReporting::Rfc3720 => "RFC3720",
            TaskReporting::ResponseFence => "ResponseFence",
            TaskReporting::FastAbort => "FastAbort",
        }
    }

    /// Parses one value of the list.
    pub fn from_value(value: &str) -> Option<TaskReporting> {
        match value {
            "RFC3720" => Some(TaskReporting::Rfc3720),
            "ResponseFence" => Some(TaskReporting::ResponseFence),
            "FastAbort" => Some(TaskReporting::FastAbort),
            _ => None,
        }
    }
}

/// Parameters of a session and a connection after negotiation (RFC 7143 §13), with RFC defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionParams {
    /// MaxConnections (§13.2).
    pub max_connections: u16,
    /// InitialR2T (§13.10).
    pub initial_r2t: bool,
    /// ImmediateData (§13.11).
    pub immediate_data: bool,
    /// MaxBurstLength in bytes (§13.13).
    pub max_burst_length: u32,
    /// FirstBurstLength in bytes (§13.14), never above `max_burst_length`.
    pub first_burst_length: u32,
    /// DefaultTime2Wait in seconds (§13.15).
    pub default_time2wait: u16,
    /// DefaultTime2Retain in seconds (§13.16).
    pub default_time2retain: u16,
    /// MaxOutstandingR2T (§13.17).
    pub max_outstanding_r2t: u16,
    /// DataPDUInOrder (§13.18).
    pub data_pdu_in_order: bool,
    /// DataSequenceInOrder (§13.19).
    pub data_sequence_in_order: bool,
    /// ErrorRecoveryLevel (§13.20).
    pub error_recovery_level: u8,
    /// SessionType (§13.21).
    pub session_type: SessionType,
    /// InitiatorName (§13.5).
    pub initiator_name: String,
    /// InitiatorAlias (§13.7).
    pub initiator_alias: Option<String>,
    /// TargetName (§13.4); None on a discovery session that named none.
    pub target_name: Option<String>,
    /// TaskReporting (§13.23).
    pub task_reporting: TaskReporting,
    /// iSCSIProtocolLevel (§13.24; RFC 7144).
    pub iscsi_protocol_level: u8,
    /// TargetAlias (§13.6), as declared by the target.
    pub target_alias: Option<String>,
    /// TargetPortalGroupTag (§13.9), as declared by the target.
    pub target_portal_group_tag: Option<u16>,
}

impl Default for SessionParams {
    fn default() -> Self {
        SessionParams {
            max_connections: 1,
            initial_r2t: true,
            immediate_data: true,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            default_time2wait: 2,
            default_time2retain: 20,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            error_recovery_level: 0,
            session_type: SessionType::Normal,
            initiator_name: String::new(),
            initiator_alias: None,
            target_name: None,
            task_reporting: TaskReporting::Rfc3720,
            iscsi_protocol_level: 1,
            target_alias: None,
            target_portal_group_tag: None,
        }
    }
}

/// Parameters of one connection after negotiation (RFC 7143 §13.1, §13.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionParams {
    /// HeaderDigest=CRC32C was agreed.
    pub header_digest: bool,
    /// DataDigest=CRC32C was agreed.
    pub data_digest: bool,
    /// What the peer declared it can receive = our max send PDU
    pub max_send_data_segment_length: u32,
    /// What we declared
    pub max_recv_data_segment_length: u32,
}

impl Default for ConnectionParams {
    fn default() -> Self {
        // RFC 7143 §13.12: 8192 holds until a side declares otherwise.
        ConnectionParams {
            header_digest: false,
            data_digest: false,
            max_send_data_segment_length: DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
            max_recv_data_segment_length: DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
        }
    }
}

/// RFC 7143 §13.12: the MaxRecvDataSegmentLength default, also in force during login.
pub const DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH: u32 = 8192;
/// RFC 7143 §4.2.7.1: an iSCSI name is at most 223 bytes.
pub const ISCSI_NAME_MAX_BYTES: usize = 223;

/// Which end of the login this engine speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The initiator.
    Initiator,
    /// The target.
    Target,
}

impl Role {
    fn peer_may_send(self, senders: Senders) -> bool {
        matches!(
            (self, senders),
            (_, Senders::Both)
                | (Role::Target, Senders::Initiator)
                | (Role::Initiator, Senders::Target)
        )
    }
}

/// What one side supports and wants: its "local values" for every
/// negotiated key (RFC 7143 §13). Lists are in preference order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalParams {
    /// HeaderDigest values we accept, preferred first.
    pub header_digest: Vec<Digest>,
    /// DataDigest values we accept, preferred first.
    pub data_digest: Vec<Digest>,
    /// MaxConnections.
    pub max_connections: u16,
    /// InitialR2T.
    pub initial_r2t: bool,
    /// ImmediateData.
    pub immediate_data: bool,
    /// The MaxRecvDataSegmentLength we declare, in bytes.
    pub max_recv_data_segment_length: u32,
    /// MaxBurstLength in bytes.
    pub max_burst_length: u32,
    /// FirstBurstLength in bytes.
    pub first_burst_length: u32,
    /// DefaultTime2Wait in seconds.
    pub default_time2wait: u16,
    /// DefaultTime2Retain in seconds.
    pub default_time2retain: u16,
    /// MaxOutstandingR2T.
    pub max_outstanding_r2t: u16,
    /// DataPDUInOrder.
    pub data_pdu_in_order: bool,
    /// DataSequenceInOrder.
    pub data_sequence_in_order: bool,
    /// ErrorRecoveryLevel.
    pub error_recovery_level: u8,
    /// TaskReporting values we support, preferred first.
    pub task_reporting: Vec<TaskReporting>,
    /// iSCSIProtocolLevel (1 = RFC 7143).
    pub iscsi_protocol_level: u8,
}

impl Default for LocalParams {
    /// The RFC 7143 §13 defaults, digests off.
    fn default() -> Self {
        let s = SessionParams::default();
        LocalParams {
            header_digest: vec![Digest::None],
            data_digest: vec![Digest::None],
            max_connections: s.max_connections,
            initial_r2t: s.initial_r2t,
            immediate_data: s.immediate_data,
            max_recv_data_segment_length: DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
            max_burst_length: s.max_burst_length,
            first_burst_length: s.first_burst_length,
            default_time2wait: s.default_time2wait,
            default_time2retain: s.default_time2retain,
            max_outstanding_r2t: s.max_outstanding_r2t,
            data_pdu_in_order: s.data_pdu_in_order,
            data_sequence_in_order: s.data_sequence_in_order,
            error_recovery_level: s.error_recovery_level,
            task_reporting: vec![TaskReporting::Rfc3720],
            iscsi_protocol_level: s.iscsi_protocol_level,
        }
    }
}

/// The answer to one received key (RFC 7143 §6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `key=value`: the negotiated result.
    Value(String),
    /// `key=NotUnderstood`: an unknown key.
    NotUnderstood,
    /// `key=Irrelevant`: the key does not apply here (e.g. discovery session).
    Irrelevant,
    /// `key=Reject`: the offered value is not acceptable; the default stays.
    Reject,
    /// No answer: the key was a declaration.
    Silent,
}

impl Answer {
    /// The text written after `key=`, or None for [`Answer::Silent`].
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Answer::Value(v) => Some(v),
            Answer::NotUnderstood => Some(answer::NOT_UNDERSTOOD),
            Answer::Irrelevant => Some(answer::IRRELEVANT),
            Answer::Reject => Some(answer::REJECT),
            Answer::Silent => None,
        }
    }
}

/// Which keys an originator offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferPolicy {
    /// Every negotiable key that applies (what initiators do).
    All,
    /// Only keys whose RFC default we cannot live with (what a target does
    /// for keys the initiator left out, RFC 7143 §6.3).
    NonDefault,
}

/// Why a negotiation cannot go on; each ends the login.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NegotiationError {
    /// A key was sent twice in one negotiation (RFC 7143 §6.2: initiator error / drop).
    #[error("{key} was sent twice in one negotiation (RFC 7143 §6.2)")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// A key was sent in a stage that may not carry it (RFC 7143 §6.3).
    #[error("{key} may not be sent in the {stage} stage (RFC 7143 §6.3)")]
    WrongStage {
        /// The key.
        key: String,
        /// The stage it came in.
        stage: &'static str,
    },
    /// A declaration carries an invalid value (e.g. MaxRecvDataSegmentLength=100).
    #[error("invalid declaration {key}={value:?} ({rfc})")]
    InvalidDeclaration {
        /// The declared key.
        key: &'static str,
        /// The declared value (declarations hold no secrets).
        value: String,
        /// Where the key's values are defined.
        rfc: &'static str,
    },
    /// SessionType names no session type we know (RFC 7143 §13.21).
    #[error("SessionType={value:?} is not supported (RFC 7143 §13.21)")]
    UnsupportedSessionType {
        /// The value received.
        value: String,
    },
    /// None of the offered values is acceptable and the default is not either.
    #[error("{key}: none of the values {offered:?} is acceptable to us")]
    NoAcceptableValue {
        /// The key.
        key: &'static str,
        /// The peer's list.
        offered: String,
    },
    /// An answer contradicts our offer (RFC 7143 §6.2.1, §6.2.2).
    #[error("answer {key}={value:?} does not fit our offer {offered:?}")]
    InvalidAnswer {
        /// The key.
        key: String,
        /// The answer received.
        value: String,
        /// What we offered.
        offered: String,
    },
    /// The peer refused a key whose default we cannot work with.
    #[error("peer answered {key}={answer} and the default is not acceptable")]
    Refused {
        /// The key.
        key: String,
        /// The peer's answer (Reject, NotUnderstood, Irrelevant).
        answer: String,
    },
}

/// Keys an originator may offer, in the order they are written.
const OFFERABLE: &[&str] = &[
    name::HEADER_DIGEST,
    name::DATA_DIGEST,
    name::INITIAL_R2T,
    name::IMMEDIATE_DATA,
    name::MAX_BURST_LENGTH,
    name::FIRST_BURST_LENGTH,
    name::DEFAULT_TIME2WAIT,
    name::DEFAULT_TIME2RETAIN,
    name::MAX_OUTSTANDING_R2T,
    name::DATA_PDU_IN_ORDER,
    name::DATA_SEQUENCE_IN_ORDER,
    name::ERROR_RECOVERY_LEVEL,
    name::MAX_CONNECTIONS,
    name::TASK_REPORTING,
    name::ISCSI_PROTOCOL_LEVEL,
];

/// The negotiation of one login on one side (RFC 7143 §6.2–§6.6).
///
/// Inputs: [`Negotiator::handle_text`] (or [`Negotiator::respond`] per key)
/// for every text received. Outputs: answers written into the caller's text
/// buffer, offers from [`Negotiator::write_offers`], and the parameters from
/// [`Negotiator::finish`].
#[derive(Debug, Clone)]
pub struct Negotiator {
    role: Role,
    local: LocalParams,
    leading: bool,
    session: SessionParams,
    connection: ConnectionParams,
    /// Keys the peer has sent (offers, answers, declarations): §6.2 forbids repeats.
    peer_keys: BTreeSet<String>,
    /// Our offers still awaiting an answer, with the value offered.
    pending: Vec<(&'static str, String)>,
    /// Keys we have sent in any form.
    sent: BTreeSet<&'static str>,
}

impl Negotiator {
    /// A negotiator for `role` with our `local` values; `leading` is false
    /// for a connection joining an existing session (TSIH ≠ 0), where
    /// leading-only keys are irrelevant.
    pub fn new(role: Role, mut local: LocalParams, leading: bool) -> Negotiator {
        // RFC 7143 §13.14: FirstBurstLength MUST NOT exceed MaxBurstLength.
        local.first_burst_length = local.first_burst_length.min(local.max_burst_length);
        Negotiator {
            role,
            local,
            leading,
            session: SessionParams::default(),
            connection: ConnectionParams::default(),
            peer_keys: BTreeSet::new(),
            pending: Vec::new(),
            sent: BTreeSet::new(),
        }
    }

    /// Sets the session type before keys are judged (it decides which are irrelevant).
    pub fn set_session_type(&mut self, session_type: SessionType) {
        self.session.session_type = session_type;
    }

    /// Records a value we declare or that was validated elsewhere (names).
    pub fn session_mut(&mut self) -> &mut SessionParams {
        &mut self.session
    }

    /// The session parameters as negotiated so far.
    pub fn session(&self) -> &SessionParams {
        &self.session
    }

    /// The connection parameters as negotiated so far.
    pub fn connection(&self) -> &ConnectionParams {
        &self.connection
    }

    /// True while an offer of ours has had no answer.
    pub fn has_pending_offers(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The keys we offered that have had no answer yet.
    pub fn pending_offers(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.pending.iter().map(|(k, _)| *k)
    }

    /// True once the peer has sent `key` in this negotiation.
    pub fn peer_sent(&self, key: &str) -> bool {
        self.peer_keys.contains(key)
    }

    /// Handles every pair of one received text (not the security keys, which
    /// the login machine routes to CHAP): answers to our offers are checked,
    /// offers are answered into `out`, declarations recorded.
    pub fn handle_text(
        &mut self,
        stage: u8,
        pairs: &[(&str, &str)],
        out: &mut Vec<u8>,
    ) -> Result<(), NegotiationError> {
        for &(key, value) in pairs {
            if let Some(i) = self.pending.iter().position(|(k, _)| *k == key) {
                let (key, offered) = self.pending.swap_remove(i);
                self.peer_keys.insert(key.to_string());
                self.check_answer(key, &offered, value)?;
                continue;
            }
            let answer = self.respond(stage, key, value)?;
            if let Some(text) = answer.as_text() {
                push_pair(out, key, text);
            }
        }
        Ok(())
    }

    /// The responder's answer to one offered or declared key (RFC 7143 §6.2).
    /// `stage` is the login stage carrying it (`pdu::stage`).
    pub fn respond(
        &mut self,
        stage: u8,
        key: &str,
        value: &str,
    ) -> Result<Answer, NegotiationError> {
        // RFC 7143 §6.2: "Neither the initiator nor the target should attempt
        // to declare or negotiate a parameter more than once during login".
        if !self.peer_keys.insert(key.to_string()) {
            if self.repeats_identity(key, value) {
                return Ok(Answer::Silent);
            }
            return Err(NegotiationError::DuplicateKey {
                key: key.to_string(),
            });
        }
        let Some(def) = keys::lookup(key) else {
            // RFC 7143 §13.25: obsolete keys get their prescribed answer.
            if let Some(a) = keys::obsolete_answer(key) {
                return Ok(if a == answer::REJECT {
                    Answer::Reject
                } else {
                    Answer::Value(a.to_string())
                });
            }
            // RFC 7143 §6.2: unknown keys, X- and X# ones included.
            return Ok(Answer::NotUnderstood);
        };
        if def.usage == Usage::SecurityOnly {
            return Err(NegotiationError::WrongStage {
                key: key.to_string(),
                stage: stage_name(stage),
            });
        }
        if def.kind != KeyKind::Declarative
            && def.stage == keys::Stage::Operational
            && stage == stage::SECURITY
        {
            // RFC 7143 §6.3.3: operational negotiation starts after security negotiation.
            return Err(NegotiationError::WrongStage {
                key: key.to_string(),
                stage: stage_name(stage),
            });
        }
        if stage == stage::FULL_FEATURE
            && matches!(def.usage, Usage::LeadingOnly | Usage::InitializeOnly)
        {
            // RFC 7143 §13 "Use: LO/IO": login-only keys mean nothing in a Text Request.
            return Ok(Answer::Irrelevant);
        }
        if def.kind == KeyKind::Declarative {
            return self.record_declaration(def.name, value, stage);
        }
        if !self.role.peer_may_send(def.senders)
            || (def.usage == Usage::LeadingOnly && !self.leading)
            || (def.irrelevant_in_discovery && self.session.session_type == SessionType::Discovery)
        {
            return Ok(Answer::Irrelevant);
        }
        let result = self.result_of(def, value)?;
        Ok(match result {
            Some(v) => {
                self.apply(def.name, &v);
                Answer::Value(v)
            }
            None => Answer::Reject,
        })
    }

    /// The result of an offer by the key's result function (RFC 7143 §6.2.1,
    /// §6.2.2), or None (answer Reject) for a value outside the key's range.
    fn result_of(&self, def: &KeyDef, value: &str) -> Result<Option<String>, NegotiationError> {
        Ok(match def.kind {
            KeyKind::List => self.choose_from_list(def.name, value)?,
            KeyKind::BooleanAnd | KeyKind::BooleanOr => decode_boolean(value).ok().map(|theirs| {
                let ours = self.local_bool(def.name);
                let result = if def.kind == KeyKind::BooleanAnd {
                    ours && theirs
                } else {
                    ours || theirs
                };
                encode_boolean(result).to_string()
            }),
            KeyKind::NumericalMin | KeyKind::NumericalMax => {
                number_in_range(def.value, value).map(|theirs| {
                    let ours = self.local_number(def.name);
                    let mut result = if def.kind == KeyKind::NumericalMin {
                        ours.min(theirs)
                    } else {
                        ours.max(theirs)
                    };
                    if def.name == name::FIRST_BURST_LENGTH {
                        // RFC 7143 §13.14: FirstBurstLength MUST NOT exceed MaxBurstLength.
                        result = result.min(self.session.max_burst_length as u64);
                    }
                    result.to_string()
                })
            }
            KeyKind::Declarative => None,
        })
    }

    /// RFC 7143 §6.2.1: the first value of the offer that we support, or
    /// None (answer Reject) when the default is acceptable to us.
    fn choose_from_list(
        &self,
        key: &'static str,
        value: &str,
    ) -> Result<Option<String>, NegotiationError> {
        let chosen = match key {
            name::HEADER_DIGEST | name::DATA_DIGEST => {
                let ours = if key == name::HEADER_DIGEST {
                    &self.local.header_digest
                } else {
                    &self.local.data_digest
                };
                let chosen = split_list(value)
                    .filter_map(Digest::from_value)
                    .find(|d| ours.contains(d));
                if chosen.is_none() && !ours.contains(&Digest::None) {
                    return Err(NegotiationError::NoAcceptableValue {
                        key,
                        offered: value.to_string(),
                    });
                }
                chosen.map(Digest::as_str)
            }
            name::TASK_REPORTING => split_list(value)
                .filter_map(TaskReporting::from_value)
                .find(|t| self.local.task_reporting.contains(t))
                .map(TaskReporting::as_str),
            _ => None,
        };
        Ok(chosen.map(str::to_string))
    }

    fn record_declaration(
        &mut self,
        key: &'static str,
        value: &str,
        stage: u8,
    ) -> Result<Answer, NegotiationError> {
        let def = keys::lookup(key).expect("declarations come from the table");
        let invalid = || NegotiationError::InvalidDeclaration {
            key,
            value: value.to_string(),
            rfc: def.rfc,
        };
        if !self.role.peer_may_send(def.senders) {
            // A declaration the peer has no business making changes nothing.
            return Ok(Answer::Irrelevant);
        }
        if stage != stage::FULL_FEATURE && def.usage == Usage::FullFeatureOnly {
            return Ok(Answer::Irrelevant);
        }
        match key {
            name::MAX_RECV_DATA_SEGMENT_LENGTH => {
                let v = number_in_range(def.value, value).ok_or_else(invalid)?;
                self.connection.max_send_data_segment_length = v as u32;
            }
            name::INITIATOR_NAME => {
                self.session.initiator_name = iscsi_name(value).ok_or_else(invalid)?
            }
            name::TARGET_NAME => {
                self.session.target_name = Some(iscsi_name(value).ok_or_else(invalid)?)
            }
            name::INITIATOR_ALIAS => self.session.initiator_alias = Some(value.to_string()),
            name::TARGET_ALIAS => self.session.target_alias = Some(value.to_string()),
            name::SESSION_TYPE => {
                let t = SessionType::from_value(value).ok_or_else(|| {
                    NegotiationError::UnsupportedSessionType {
                        value: value.to_string(),
                    }
                })?;
                self.session.session_type = t;
            }
            name::TARGET_PORTAL_GROUP_TAG => {
                self.session.target_portal_group_tag =
                    Some(number_in_range(def.value, value).ok_or_else(invalid)? as u16);
            }
            // TargetAddress (redirection) is read by the login machine; X#NodeArchitecture is informative.
            _ => {}
        }
        Ok(Answer::Silent)
    }

    /// True when `key=value` declares again, unchanged, one of the names of
    /// the login (InitiatorName, InitiatorAlias, TargetName, SessionType).
    /// libiscsi 1.19 repeats them in the operational stage whenever it
    /// offered CHAP and the target answered AuthMethod=None; the same value
    /// changes nothing, so it is not the redeclaration RFC 7143 §6.2 forbids.
    /// Any other repeat, and a name repeated with another value, still fails.
    fn repeats_identity(&self, key: &str, value: &str) -> bool {
        let s = &self.session;
        match key {
            name::INITIATOR_NAME => s.initiator_name == value,
            name::INITIATOR_ALIAS => s.initiator_alias.as_deref() == Some(value),
            name::TARGET_NAME => s.target_name.as_deref() == Some(value),
            name::SESSION_TYPE => SessionType::from_value(value) == Some(s.session_type),
            _ => false,
        }
    }

    /// Checks the peer's answer to our offer of `key` and records the result
    /// (RFC 7143 §6.2.1 for lists, §6.2.2 for simple values).
    fn check_answer(
        &mut self,
        key: &'static str,
        offered: &str,
        value: &str,
    ) -> Result<(), NegotiationError> {
        let def = keys::lookup(key).expect("we offer only keys of the table");
        let invalid = || NegotiationError::InvalidAnswer {
            key: key.to_string(),
            value: value.to_string(),
            offered: offered.to_string(),
        };
        if matches!(
            value,
            answer::REJECT | answer::NOT_UNDERSTOOD | answer::IRRELEVANT
        ) {
            // The RFC default stays in force; refuse when we cannot live with it.
            if self.default_unacceptable(key) && value != answer::IRRELEVANT {
                return Err(NegotiationError::Refused {
                    key: key.to_string(),
                    answer: value.to_string(),
                });
            }
            return Ok(());
        }
        match def.kind {
            KeyKind::List => {
                if value.contains(',') || !split_list(offered).any(|o| o == value) {
                    return Err(invalid());
                }
            }
            KeyKind::BooleanAnd | KeyKind::BooleanOr => {
                let theirs = decode_boolean(value).map_err(|_| invalid())?;
                let ours = decode_boolean(offered).map_err(|_| invalid())?;
                let consistent = if def.kind == KeyKind::BooleanAnd {
                    theirs <= ours
                } else {
                    theirs >= ours
                };
                if !consistent {
                    return Err(invalid());
                }
            }
            KeyKind::NumericalMin | KeyKind::NumericalMax => {
                let theirs = number_in_range(def.value, value).ok_or_else(invalid)?;
                let ours = decode_number(offered).map_err(|_| invalid())?;
                let consistent = if def.kind == KeyKind::NumericalMin {
                    theirs <= ours
                } else {
                    theirs >= ours
                };
                if !consistent {
                    return Err(invalid());
                }
            }
            KeyKind::Declarative => return Err(invalid()),
        }
        self.apply(key, value);
        Ok(())
    }

    /// Writes offers for keys not yet negotiated in either direction, and
    /// returns how many. Keys irrelevant to this session are left out.
    pub fn write_offers(&mut self, policy: OfferPolicy, out: &mut Vec<u8>) -> usize {
        let keys = self.offer_candidates(policy);
        for &key in &keys {
            let value = self.local_value(key);
            push_pair(out, key, &value);
            self.sent.insert(key);
            self.pending.push((key, value));
        }
        keys.len()
    }

    /// True when [`Negotiator::write_offers`] would write something, or our
    /// MaxRecvDataSegmentLength still differs from the default the peer assumes.
    pub fn has_something_to_offer(&self, policy: OfferPolicy) -> bool {
        let undeclared_mrdsl = !self.sent.contains(name::MAX_RECV_DATA_SEGMENT_LENGTH)
            && self.local.max_recv_data_segment_length != DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH;
        undeclared_mrdsl || !self.offer_candidates(policy).is_empty()
    }

    fn offer_candidates(&self, policy: OfferPolicy) -> Vec<&'static str> {
        OFFERABLE
            .iter()
            .copied()
            .filter(|&key| {
                let def = keys::lookup(key).expect("offerable keys are in the table");
                let negotiated = self.sent.contains(key) || self.peer_keys.contains(key);
                let irrelevant = (def.usage == Usage::LeadingOnly && !self.leading)
                    || (def.irrelevant_in_discovery
                        && self.session.session_type == SessionType::Discovery);
                let optional = matches!(key, name::TASK_REPORTING | name::ISCSI_PROTOCOL_LEVEL);
                let wanted =
                    (policy == OfferPolicy::All && !optional) || self.default_unacceptable(key);
                !negotiated && !irrelevant && wanted
            })
            .collect()
    }

    /// Declares our MaxRecvDataSegmentLength once (RFC 7143 §13.12); true if written now.
    pub fn declare_max_recv_data_segment_length(&mut self, out: &mut Vec<u8>) -> bool {
        if !self.sent.insert(name::MAX_RECV_DATA_SEGMENT_LENGTH) {
            return false;
        }
        let v = self.local.max_recv_data_segment_length;
        push_pair(out, name::MAX_RECV_DATA_SEGMENT_LENGTH, &v.to_string());
        self.connection.max_recv_data_segment_length = v;
        true
    }

    /// Writes a declaration of ours once (names, aliases, TargetPortalGroupTag); true if written now.
    pub fn declare(&mut self, key: &'static str, value: &str, out: &mut Vec<u8>) -> bool {
        debug_assert!(keys::lookup(key)
            .filter(|d| d.kind != KeyKind::Declarative)
            .is_none());
        if !self.sent.insert(key) {
            return false;
        }
        push_pair(out, key, value);
        true
    }

    /// Ends the negotiation: unanswered offers whose value alone decides the
    /// result take it (RFC 7143 §6.2.2: "No" for AND, "Yes" for OR), others
    /// keep their default; FirstBurstLength is capped by MaxBurstLength.
    pub fn finish(mut self) -> (SessionParams, ConnectionParams) {
        for (key, offered) in std::mem::take(&mut self.pending) {
            let kind = keys::lookup(key).map(|d| d.kind);
            let decided = matches!(
                (kind, offered.as_str()),
                (Some(KeyKind::BooleanAnd), "No") | (Some(KeyKind::BooleanOr), "Yes")
            );
            if decided {
                self.apply(key, &offered);
            }
        }
        let s = &mut self.session;
        s.first_burst_length = s.first_burst_length.min(s.max_burst_length);
        (self.session, self.connection)
    }

    /// Our value for `key` as text (lists comma-joined, preferred first).
    fn local_value(&self, key: &str) -> String {
        let join = |v: Vec<&str>| v.join(",");
        match key {
            name::HEADER_DIGEST => join(
                self.local
                    .header_digest
                    .iter()
                    .map(|d| d.as_str())
                    .collect(),
            ),
            name::DATA_DIGEST => join(self.local.data_digest.iter().map(|d| d.as_str()).collect()),
            name::TASK_REPORTING => join(
                self.local
                    .task_reporting
                    .iter()
                    .map(|t| t.as_str())
                    .collect(),
            ),
            _ => match keys::lookup(key).map(|d| d.value) {
                Some(ValueType::Boolean) => encode_boolean(self.local_bool(key)).to_string(),
                _ => self.local_number(key).to_string(),
            },
        }
    }

    fn local_bool(&self, key: &str) -> bool {
        match key {
            name::INITIAL_R2T => self.local.initial_r2t,
            name::IMMEDIATE_DATA => self.local.immediate_data,
            name::DATA_PDU_IN_ORDER => self.local.data_pdu_in_order,
            name::DATA_SEQUENCE_IN_ORDER => self.local.data_sequence_in_order,
            _ => unreachable!("{key} is not a boolean key"),
        }
    }

    fn local_number(&self, key: &str) -> u64 {
        let l = &self.local;
        match key {
            name::MAX_CONNECTIONS => l.max_connections as u64,
            name::MAX_BURST_LENGTH => l.max_burst_length as u64,
            name::FIRST_BURST_LENGTH => l.first_burst_length as u64,
            name::DEFAULT_TIME2WAIT => l.default_time2wait as u64,
            name::DEFAULT_TIME2RETAIN => l.default_time2retain as u64,
            name::MAX_OUTSTANDING_R2T => l.max_outstanding_r2t as u64,
            name::ERROR_RECOVERY_LEVEL => l.error_recovery_level as u64,
            name::ISCSI_PROTOCOL_LEVEL => l.iscsi_protocol_level as u64,
            name::MAX_RECV_DATA_SEGMENT_LENGTH => l.max_recv_data_segment_length as u64,
            _ => unreachable!("{key} is not a numerical key"),
        }
    }

    /// True when the RFC default of `key` is outside what our local value allows.
    fn default_unacceptable(&self, key: &str) -> bool {
        let d = SessionParams::default();
        let l = &self.local;
        match key {
            name::HEADER_DIGEST => !l.header_digest.contains(&Digest::None),
            name::DATA_DIGEST => !l.data_digest.contains(&Digest::None),
            name::IMMEDIATE_DATA => d.immediate_data && !l.immediate_data,
            name::MAX_BURST_LENGTH => l.max_burst_length < d.max_burst_length,
            name::FIRST_BURST_LENGTH => l.first_burst_length < d.first_burst_length,
            name::DEFAULT_TIME2WAIT => l.default_time2wait > d.default_time2wait,
            name::DEFAULT_TIME2RETAIN => l.default_time2retain < d.default_time2retain,
            name::MAX_OUTSTANDING_R2T => l.max_outstanding_r2t < d.max_outstanding_r2t,
            name::ERROR_RECOVERY_LEVEL => l.error_recovery_level < d.error_recovery_level,
            name::MAX_CONNECTIONS => l.max_connections < d.max_connections,
            name::TASK_REPORTING => !l.task_reporting.contains(&TaskReporting::Rfc3720),
            name::ISCSI_PROTOCOL_LEVEL => l.iscsi_protocol_level < d.iscsi_protocol_level,
            // InitialR2T, DataPDUInOrder, DataSequenceInOrder: the default Yes is the strict side.
            _ => false,
        }
    }

    /// Records a validated result.
    fn apply(&mut self, key: &str, value: &str) {
        let s = &mut self.session;
        let n = || decode_number(value).unwrap_or(0);
        let b = || value == "Yes";
        match key {
            name::HEADER_DIGEST => self.connection.header_digest = value == Digest::Crc32c.as_str(),
            name::DATA_DIGEST => self.connection.data_digest = value == Digest::Crc32c.as_str(),
            name::MAX_CONNECTIONS => s.max_connections = n() as u16,
            name::INITIAL_R2T => s.initial_r2t = b(),
            name::IMMEDIATE_DATA => s.immediate_data = b(),
            name::MAX_BURST_LENGTH => s.max_burst_length = n() as u32,
            name::FIRST_BURST_LENGTH => s.first_burst_length = n() as u32,
            name::DEFAULT_TIME2WAIT => s.default_time2wait = n() as u16,
            name::DEFAULT_TIME2RETAIN => s.default_time2retain = n() as u16,
            name::MAX_OUTSTANDING_R2T => s.max_outstanding_r2t = n() as u16,
            name::DATA_PDU_IN_ORDER => s.data_pdu_in_order = b(),
            name::DATA_SEQUENCE_IN_ORDER => s.data_sequence_in_order = b(),
            name::ERROR_RECOVERY_LEVEL => s.error_recovery_level = n() as u8,
            name::TASK_REPORTING => {
                s.task_reporting = TaskReporting::from_value(value).unwrap_or_default()
            }
            name::ISCSI_PROTOCOL_LEVEL => s.iscsi_protocol_level = n() as u8,
            _ => debug_assert!(false, "apply({key}) has no field"),
        }
    }
}

/// A numerical value inside the key's range, or None (answer Reject).
fn number_in_range(value_type: ValueType, value: &str) -> Option<u64> {
    let ValueType::Number { min, max } = value_type else {
        return None;
    };
    decode_number(value)
        .ok()
        .filter(|v| (min..=max).contains(v))
}

/// An iSCSI name as declared: non-empty, at most 223 bytes (RFC 7143 §4.2.7.1).
fn iscsi_name(value: &str) -> Option<String> {
    (!value.is_empty() && value.len() <= ISCSI_NAME_MAX_BYTES).then(|| value.to_string())
}

/// The stage's name for messages.
pub fn stage_name(stage: u8) -> &'static str {
    match stage {
        stage::SECURITY => "security negotiation",
        stage::OPERATIONAL => "operational negotiation",
        _ => "full feature",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_pairs;

    fn target(local: LocalParams) -> Negotiator {
        Negotiator::new(Role::Target, local, true)
    }

    fn answers(n: &mut Negotiator, text: &[u8]) -> Result<String, NegotiationError> {
        let pairs = parse_pairs(text).unwrap();
        let mut out = Vec::new();
        n.handle_text(stage::OPERATIONAL, &pairs, &mut out)?;
        Ok(String::from_utf8(out).unwrap().replace('\0', "|"))
    }

    #[test]
    fn numbers_take_min_or_max_and_booleans_and_or() {
        let local = LocalParams {
            max_burst_length: 131_072,
            first_burst_length: 65_536,
            immediate_data: true,
            initial_r2t: false,
            default_time2wait: 5,
            ..LocalParams::default()
        };
        let mut n = target(local);
        let text = b"MaxBurstLength=262144\0FirstBurstLength=16384\0ImmediateData=No\0InitialR2T=Yes\0DefaultTime2Wait=2\0";
        assert_eq!(
            answers(&mut n, text).unwrap(),
            "MaxBurstLength=131072|FirstBurstLength=16384|ImmediateData=No|InitialR2T=Yes|DefaultTime2Wait=5|"
        );
        let (s, _) = n.finish();
        assert_eq!(
            (s.max_burst_length, s.first_burst_length),
            (131_072, 16_384)
        );
        assert!(!s.immediate_data && s.initial_r2t);
        assert_eq!(s.default_time2wait, 5);
    }

    #[test]
    fn lists_take_the_first_offered_value_we_support() {
        let local = LocalParams {
            header_digest: vec![Digest::None, Digest::Crc32c],
            ..LocalParams::default()
        };
        let mut n = target(local);
        assert_eq!(
            answers(
                &mut n,
                b"HeaderDigest=Foo,CRC32C,None\0DataDigest=CRC32C,None\0"
            )
            .unwrap(),
            "HeaderDigest=CRC32C|DataDigest=None|"
        );
        assert!(n.connection().header_digest);
        assert!(!n.connection().data_digest);
    }

    #[test]
    fn a_required_digest_that_is_not_offered_fails() {
        let local = LocalParams {
            data_digest: vec![Digest::Crc32c],
            ..LocalParams::default()
        };
        let mut n = target(local);
        assert!(matches!(
            answers(&mut n, b"DataDigest=None\0"),
            Err(NegotiationError::NoAcceptableValue { .. })
        ));
    }

    #[test]
    fn unknown_irrelevant_and_bad_values_get_the_rfc_answers() {
        let mut n = target(LocalParams::default());
        n.set_session_type(SessionType::Discovery);
        let text =
            b"X-com.example.Foo=1\0MaxBurstLength=512\0Bogus=1\0IFMarker=No\0OFMarkInt=1\0HeaderDigest=None\0X#Foo=1\0";
        assert_eq!(
            answers(&mut n, text).unwrap(),
            "X-com.example.Foo=NotUnderstood|MaxBurstLength=Irrelevant|Bogus=NotUnderstood|IFMarker=No|OFMarkInt=Reject|HeaderDigest=None|X#Foo=NotUnderstood|"
        );
        let mut n = target(LocalParams::default());
        let text = b"MaxBurstLength=511\0ErrorRecoveryLevel=3\0ImmediateData=maybe\0MaxConnections=0x10000\0DataDigest=Foo\0";
        assert_eq!(
            answers(&mut n, text).unwrap(),
            "MaxBurstLength=Reject|ErrorRecoveryLevel=Reject|ImmediateData=Reject|MaxConnections=Reject|DataDigest=Reject|"
        );
        assert_eq!(
            n.session().max_burst_length,
            262_144,
            "a rejected key keeps its default"
        );
    }

    #[test]
    fn keys_twice_fail() {
        let mut n = target(LocalParams::default());
        answers(&mut n, b"MaxBurstLength=8192\0").unwrap();
        assert_eq!(
            answers(&mut n, b"MaxBurstLength=8192\0"),
            Err(NegotiationError::DuplicateKey {
                key: "MaxBurstLength".into()
            })
        );
    }

    #[test]
    fn the_login_names_may_be_declared_again_unchanged_but_not_changed() {
        let mut n = target(LocalParams::default());
        let first = b"InitiatorName=iqn.2026-11.x:i\0SessionType=Discovery\0InitiatorAlias=h\0";
        answers(&mut n, first).unwrap();
        // libiscsi's operational-stage text after AuthMethod=None: accepted, unanswered.
        assert_eq!(answers(&mut n, first).unwrap(), "");
        assert_eq!(n.session().initiator_name, "iqn.2026-11.x:i");
        for changed in [
            &b"InitiatorName=iqn.2026-11.x:other\0"[..],
            b"SessionType=Normal\0",
            b"InitiatorAlias=h2\0",
        ] {
            assert!(
                matches!(
                    answers(&mut n, changed),
                    Err(NegotiationError::DuplicateKey { .. })
                ),
                "{}",
                String::from_utf8_lossy(changed)
            );
        }
        assert_eq!(n.session().session_type, SessionType::Discovery);
    }

    #[test]
    fn operational_keys_in_the_security_stage_fail_but_declarations_pass() {
        let mut n = target(LocalParams::default());
        let mut out = Vec::new();
        assert_eq!(
            n.respond(stage::SECURITY, "InitiatorName", "iqn.x"),
            Ok(Answer::Silent)
        );
        assert!(matches!(
            n.handle_text(stage::SECURITY, &[("ImmediateData", "No")], &mut out),
            Err(NegotiationError::WrongStage { .. })
        ));
    }

    #[test]
    fn declarations_are_validated_and_recorded() {
        let mut n = target(LocalParams::default());
        assert_eq!(
            answers(
                &mut n,
                b"MaxRecvDataSegmentLength=65536\0InitiatorAlias=host\0"
            )
            .unwrap(),
            ""
        );
        assert_eq!(n.connection().max_send_data_segment_length, 65_536);
        assert_eq!(n.session().initiator_alias.as_deref(), Some("host"));
        let mut n = target(LocalParams::default());
        assert!(matches!(
            answers(&mut n, b"MaxRecvDataSegmentLength=511\0"),
            Err(NegotiationError::InvalidDeclaration {
                key: "MaxRecvDataSegmentLength",
                ..
            })
        ));
        let mut n = target(LocalParams::default());
        assert!(matches!(
            answers(&mut n, b"SessionType=Weird\0"),
            Err(NegotiationError::UnsupportedSessionType { .. })
        ));
        let mut n = target(LocalParams::default());
        assert_eq!(
            answers(&mut n, b"TargetPortalGroupTag=1\0").unwrap(),
            "TargetPortalGroupTag=Irrelevant|"
        );
    }

    #[test]
    fn leading_only_keys_are_irrelevant_on_a_second_connection() {
        let mut n = Negotiator::new(Role::Target, LocalParams::default(), false);
        assert_eq!(
            answers(&mut n, b"MaxConnections=4\0HeaderDigest=None\0").unwrap(),
            "MaxConnections=Irrelevant|HeaderDigest=None|"
        );
    }

    #[test]
    fn login_only_keys_are_irrelevant_in_full_feature_phase() {
        let mut n = target(LocalParams::default());
        let mut out = Vec::new();
        let pairs = [
            ("MaxBurstLength", "8192"),
            ("HeaderDigest", "CRC32C"),
            ("MaxRecvDataSegmentLength", "16384"),
        ];
        n.handle_text(stage::FULL_FEATURE, &pairs, &mut out)
            .unwrap();
        assert_eq!(out, b"MaxBurstLength=Irrelevant\0HeaderDigest=Irrelevant\0");
        assert_eq!(
            n.connection().max_send_data_segment_length,
            16_384,
            "MRDSL (ALL) may change in FFP"
        );
    }

    #[test]
    fn first_burst_never_exceeds_max_burst() {
        let mut n = target(LocalParams::default());
        answers(&mut n, b"FirstBurstLength=65536\0MaxBurstLength=8192\0").unwrap();
        let (s, _) = n.finish();
        assert_eq!((s.first_burst_length, s.max_burst_length), (8192, 8192));
    }

    #[test]
    fn originator_offers_and_checks_answers() {
        let local = LocalParams {
            max_burst_length: 65_536,
            immediate_data: false,
            ..LocalParams::default()
        };
        let mut i = Negotiator::new(Role::Initiator, local.clone(), true);
        let mut out = Vec::new();
        let n = i.write_offers(OfferPolicy::All, &mut out);
        assert_eq!(n, 13);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HeaderDigest=None\0DataDigest=None\0InitialR2T=Yes\0ImmediateData=No\0MaxBurstLength=65536\0"));
        assert!(!text.contains("TaskReporting") && !text.contains("iSCSIProtocolLevel"));
        // A target answering more than the initiator offered is a protocol error.
        let mut bad = i.clone();
        let mut sink = Vec::new();
        assert!(matches!(
            bad.handle_text(
                stage::OPERATIONAL,
                &[("MaxBurstLength", "131072")],
                &mut sink
            ),
            Err(NegotiationError::InvalidAnswer { .. })
        ));
        let mut bad = i.clone();
        assert!(matches!(
            bad.handle_text(stage::OPERATIONAL, &[("ImmediateData", "Yes")], &mut sink),
            Err(NegotiationError::InvalidAnswer { .. })
        ));
        let mut bad = i.clone();
        assert!(matches!(
            bad.handle_text(stage::OPERATIONAL, &[("HeaderDigest", "CRC32C")], &mut sink),
            Err(NegotiationError::InvalidAnswer { .. })
        ));
        i.handle_text(
            stage::OPERATIONAL,
            &[("MaxBurstLength", "16384"), ("InitialR2T", "Reject")],
            &mut sink,
        )
        .unwrap();
        assert!(sink.is_empty());
        assert!(i.has_pending_offers());
        let (s, _) = i.finish();
        assert_eq!(s.max_burst_length, 16_384);
        assert!(
            !s.immediate_data,
            "an unanswered AND offer of No decides the result"
        );
        assert!(s.initial_r2t);
    }

    #[test]
    fn a_target_offers_only_what_the_defaults_do_not_give() {
        let local = LocalParams {
            max_burst_length: 65_536,
            first_burst_length: 65_536,
            immediate_data: false,
            default_time2retain: 0,
            header_digest: vec![Digest::Crc32c],
            ..LocalParams::default()
        };
        let mut t = target(local);
        answers(&mut t, b"MaxBurstLength=65536\0").unwrap();
        let mut out = Vec::new();
        t.write_offers(OfferPolicy::NonDefault, &mut out);
        assert_eq!(
            out,
            b"HeaderDigest=CRC32C\0ImmediateData=No\0DefaultTime2Retain=0\0"
        );
        assert_eq!(
            t.pending_offers().collect::<Vec<_>>(),
            ["HeaderDigest", "ImmediateData", "DefaultTime2Retain"]
        );
        // A peer that refuses a digest we require ends the negotiation.
        let mut sink = Vec::new();
        assert!(matches!(
            t.handle_text(stage::OPERATIONAL, &[("HeaderDigest", "Reject")], &mut sink),
            Err(NegotiationError::Refused { .. })
        ));
    }
}
