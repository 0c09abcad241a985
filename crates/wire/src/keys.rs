//! The text keys of RFC 7143 §12 and §13: how each is negotiated, its values,
//! default, scope, when it may be sent and by whom.
//!
//! One table, [`KEYS`], read by the text parser (value length limits), the
//! negotiation engine and the login state machines.

/// RFC 7143 §6.1: a simple value is at most 255 bytes unless its key says otherwise.
pub const SIMPLE_VALUE_MAX_BYTES: usize = 255;
/// The longest value we accept for keys that carry large values (CHAP_C,
/// CHAP_R, SendTargets): RFC 7143 §6.1 requires accepting 8192 bytes of text.
pub const LARGE_VALUE_MAX_BYTES: usize = 8192;

/// Key names, spelled as in RFC 7143 (keys are case-sensitive, §6.1).
pub mod name {
    /// RFC 7143 §13.1.
    pub const HEADER_DIGEST: &str = "HeaderDigest";
    /// RFC 7143 §13.1.
    pub const DATA_DIGEST: &str = "DataDigest";
    /// RFC 7143 §13.2.
    pub const MAX_CONNECTIONS: &str = "MaxConnections";
    /// RFC 7143 §13.3.
    pub const SEND_TARGETS: &str = "SendTargets";
    /// RFC 7143 §13.4.
    pub const TARGET_NAME: &str = "TargetName";
    /// RFC 7143 §13.5.
    pub const INITIATOR_NAME: &str = "InitiatorName";
    /// RFC 7143 §13.6.
    pub const TARGET_ALIAS: &str = "TargetAlias";
    /// RFC 7143 §13.7.
    pub const INITIATOR_ALIAS: &str = "InitiatorAlias";
    /// RFC 7143 §13.8.
    pub const TARGET_ADDRESS: &str = "TargetAddress";
    /// RFC 7143 §13.9.
    pub const TARGET_PORTAL_GROUP_TAG: &str = "TargetPortalGroupTag";
    /// RFC 7143 §13.10.
    pub const INITIAL_R2T: &str = "InitialR2T";
    /// RFC 7143 §13.11.
    pub const IMMEDIATE_DATA: &str = "ImmediateData";
    /// RFC 7143 §13.12.
    pub const MAX_RECV_DATA_SEGMENT_LENGTH: &str = "MaxRecvDataSegmentLength";
    /// RFC 7143 §13.13.
    pub const MAX_BURST_LENGTH: &str = "MaxBurstLength";
    /// RFC 7143 §13.14.
    pub const FIRST_BURST_LENGTH: &str = "FirstBurstLength";
    /// RFC 7143 §13.15.
    pub const DEFAULT_TIME2WAIT: &str = "DefaultTime2Wait";
    /// RFC 7143 §13.16.
    pub const DEFAULT_TIME2RETAIN: &str = "DefaultTime2Retain";
    /// RFC 7143 §13.17.
    pub const MAX_OUTSTANDING_R2T: &str = "MaxOutstandingR2T";
    /// RFC 7143 §13.18.
    pub const DATA_PDU_IN_ORDER: &str = "DataPDUInOrder";
    /// RFC 7143 §13.19.
    pub const DATA_SEQUENCE_IN_ORDER: &str = "DataSequenceInOrder";
    /// RFC 7143 §13.20.
    pub const ERROR_RECOVERY_LEVEL: &str = "ErrorRecoveryLevel";
    /// RFC 7143 §13.21.
    pub const SESSION_TYPE: &str = "SessionType";
    /// RFC 7143 §13.23.
    pub const TASK_REPORTING: &str = "TaskReporting";
    /// RFC 7143 §13.24 (levels defined by RFC 7144).
    pub const ISCSI_PROTOCOL_LEVEL: &str = "iSCSIProtocolLevel";
    /// RFC 7143 §13.26 (from RFC 4850).
    pub const NODE_ARCHITECTURE: &str = "X#NodeArchitecture";
    /// RFC 7143 §12.1.
    pub const AUTH_METHOD: &str = "AuthMethod";
    /// RFC 7143 §12.1.3: CHAP algorithm list / choice.
    pub const CHAP_A: &str = "CHAP_A";
    /// RFC 7143 §12.1.3: CHAP identifier.
    pub const CHAP_I: &str = "CHAP_I";
    /// RFC 7143 §12.1.3: CHAP challenge.
    pub const CHAP_C: &str = "CHAP_C";
    /// RFC 7143 §12.1.3: CHAP name.
    pub const CHAP_N: &str = "CHAP_N";
    /// RFC 7143 §12.1.3: CHAP response.
    pub const CHAP_R: &str = "CHAP_R";
}

/// The special answers of RFC 7143 §6.2 (never valid as offers).
pub mod answer {
    /// The responder does not know the key.
    pub const NOT_UNDERSTOOD: &str = "NotUnderstood";
    /// The key does not apply in this context (e.g. a discovery session).
    pub const IRRELEVANT: &str = "Irrelevant";
    /// The offered value is not acceptable.
    pub const REJECT: &str = "Reject";
}

/// How a key's result is reached (RFC 7143 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The responder picks the first offered value it supports (§6.2.1).
    List,
    /// Boolean; the result is the AND of both values (§6.2.2).
    BooleanAnd,
    /// Boolean; the result is the OR of both values (§6.2.2).
    BooleanOr,
    /// Number; the result is the smaller of both values (§6.2.2).
    NumericalMin,
    /// Number; the result is the larger of both values (§6.2.2).
    NumericalMax,
    /// Declared by one side, never answered (§6.2).
    Declarative,
}

/// Whether a key's value holds for the session or one connection (RFC 7143 §13: "Scope").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// SW: session-wide.
    Session,
    /// CO: connection-only.
    Connection,
}

/// When a key may be sent (RFC 7143 §13: "Use").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// LO: only in the login of the leading connection of a session.
    LeadingOnly,
    /// IO: only in the login of a connection ("initialize only").
    InitializeOnly,
    /// ALL: in the login and in full feature phase.
    All,
    /// FFPO: only in full feature phase (Text Requests).
    FullFeatureOnly,
    /// Only in the security negotiation stage of a login (RFC 7143 §12).
    SecurityOnly,
}

/// The login stage in which a key may be carried (RFC 7143 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Security negotiation stage (CSG 0).
    Security,
    /// Operational parameter negotiation stage (CSG 1) or full feature phase.
    Operational,
    /// Declarative keys marked "Any-Stage": either stage.
    Any,
}

/// Which side may send a key (RFC 7143 §13: "Senders").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Senders {
    /// Only the initiator.
    Initiator,
    /// Only the target.
    Target,
    /// Either side.
    Both,
}

/// The values a key admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// A numerical-value within an inclusive range.
    Number {
        /// Smallest admissible value.
        min: u64,
        /// Largest admissible value.
        max: u64,
    },
    /// A boolean-value, `Yes` or `No`.
    Boolean,
    /// One (or, as an offer, a list) of these defined values.
    Values(&'static [&'static str]),
    /// A list of numbers (CHAP_A).
    Numbers,
    /// Free text (names, aliases, addresses).
    Text,
    /// A binary-value, `0x` hex or `0b` base64.
    Binary,
}

/// One key of RFC 7143 §12/§13.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDef {
    /// The key name, as sent.
    pub name: &'static str,
    /// How the result is reached.
    pub kind: KeyKind,
    /// Session-wide or connection-only.
    pub scope: Scope,
    /// When it may be sent.
    pub usage: Usage,
    /// The login stage that may carry it.
    pub stage: Stage,
    /// Who may send it.
    pub senders: Senders,
    /// Admissible values.
    pub value: ValueType,
    /// The value in force when the key is not negotiated.
    pub default: Option<&'static str>,
    /// RFC 7143 §13: "Irrelevant when: SessionType=Discovery".
    pub irrelevant_in_discovery: bool,
    /// Longest value accepted, in bytes.
    pub max_value_bytes: usize,
    /// Where the key is defined.
    pub rfc: &'static str,
}

const MIN_512: u64 = 512;
const MAX_2_24: u64 = (1 << 24) - 1;
const DIGESTS: &[&str] = &["CRC32C", "None"];
const SESSION_TYPES: &[&str] = &["Discovery", "Normal"];
const TASK_REPORTING_VALUES: &[&str] = &["RFC3720", "ResponseFence", "FastAbort"];
const AUTH_METHODS: &[&str] = &["KRB5", "SPKM1", "SPKM2", "SRP", "CHAP", "None"];

// One argument per column of the RFC 7143 §13 table.
#[allow(clippy::too_many_arguments)]
const fn key(
    name: &'static str,
    kind: KeyKind,
    scope: Scope,
    usage: Usage,
    stage: Stage,
    senders: Senders,
    value: ValueType,
    default: Option<&'static str>,
    rfc: &'static str,
) -> KeyDef {
    KeyDef {
        name,
        kind,
        scope,
        usage,
        stage,
        senders,
        value,
        default,
        irrelevant_in_discovery: false,
        max_value_bytes: SIMPLE_VALUE_MAX_BYTES,
        rfc,
    }
}

const fn discovery_irrelevant(mut def: KeyDef) -> KeyDef {
    def.irrelevant_in_discovery = true;
    def
}

const fn large(mut def: KeyDef) -> KeyDef {
    def.max_value_bytes = LARGE_VALUE_MAX_BYTES;
    def
}

use KeyKind::*;
use Scope::{Connection as CO, Session as SW};
use Senders::{Both, Initiator as I, Target as T};
use Stage::{Any, Operational as Op, Security as Sec};
use Usage::*;

/// Every key of RFC 7143 §12 and §13 (and TaskReporting, iSCSIProtocolLevel,
/// X#NodeArchitecture), in the order of the RFC.
pub static KEYS: &[KeyDef] = &[
    key(
        name::HEADER_DIGEST,
        List,
        CO,
        InitializeOnly,
        Op,
        Both,
        ValueType::Values(DIGESTS),
        Some("None"),
        "RFC 7143 §13.1",
    ),
    key(
        name::DATA_DIGEST,
        List,
        CO,
        InitializeOnly,
        Op,
        Both,
        ValueType::Values(DIGESTS),
        Some("None"),
        "RFC 7143 §13.1",
    ),
    discovery_irrelevant(key(
        name::MAX_CONNECTIONS,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 1, max: 65535 },
        Some("1"),
        "RFC 7143 §13.2",
    )),
    large(key(
        name::SEND_TARGETS,
        Declarative,
        SW,
        FullFeatureOnly,
        Op,
        I,
        ValueType::Text,
        None,
        "RFC 7143 §13.3",
    )),
    // IO by the initiator; by the target only in SendTargets responses.
    key(
        name::TARGET_NAME,
        Declarative,
        SW,
        InitializeOnly,
        Any,
        Both,
        ValueType::Text,
        None,
        "RFC 7143 §13.4",
    ),
    key(
        name::INITIATOR_NAME,
        Declarative,
        SW,
        InitializeOnly,
        Any,
        I,
        ValueType::Text,
        None,
        "RFC 7143 §13.5",
    ),
    key(
        name::TARGET_ALIAS,
        Declarative,
        SW,
        All,
        Any,
        T,
        ValueType::Text,
        None,
        "RFC 7143 §13.6",
    ),
    key(
        name::INITIATOR_ALIAS,
        Declarative,
        SW,
        All,
        Any,
        I,
        ValueType::Text,
        None,
        "RFC 7143 §13.7",
    ),
    key(
        name::TARGET_ADDRESS,
        Declarative,
        SW,
        All,
        Any,
        T,
        ValueType::Text,
        None,
        "RFC 7143 §13.8",
    ),
    key(
        name::TARGET_PORTAL_GROUP_TAG,
        Declarative,
        SW,
        InitializeOnly,
        Any,
        T,
        ValueType::Number { min: 0, max: 65535 },
        None,
        "RFC 7143 §13.9",
    ),
    discovery_irrelevant(key(
        name::INITIAL_R2T,
        BooleanOr,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Boolean,
        Some("Yes"),
        "RFC 7143 §13.10",
    )),
    discovery_irrelevant(key(
        name::IMMEDIATE_DATA,
        BooleanAnd,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Boolean,
        Some("Yes"),
        "RFC 7143 §13.11",
    )),
    key(
        name::MAX_RECV_DATA_SEGMENT_LENGTH,
        Declarative,
        CO,
        All,
        Op,
        Both,
        ValueType::Number {
            min: MIN_512,
            max: MAX_2_24,
        },
        Some("8192"),
        "RFC 7143 §13.12",
    ),
    discovery_irrelevant(key(
        name::MAX_BURST_LENGTH,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number {
            min: MIN_512,
            max: MAX_2_24,
        },
        Some("262144"),
        "RFC 7143 §13.13",
    )),
    discovery_irrelevant(key(
        name::FIRST_BURST_LENGTH,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number {
            min: MIN_512,
            max: MAX_2_24,
        },
        Some("65536"),
        "RFC 7143 §13.14",
    )),
    key(
        name::DEFAULT_TIME2WAIT,
        NumericalMax,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 0, max: 3600 },
        Some("2"),
        "RFC 7143 §13.15",
    ),
    key(
        name::DEFAULT_TIME2RETAIN,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 0, max: 3600 },
        Some("20"),
        "RFC 7143 §13.16",
    ),
    discovery_irrelevant(key(
        name::MAX_OUTSTANDING_R2T,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 1, max: 65535 },
        Some("1"),
        "RFC 7143 §13.17",
    )),
    discovery_irrelevant(key(
        name::DATA_PDU_IN_ORDER,
        BooleanOr,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Boolean,
        Some("Yes"),
        "RFC 7143 §13.18",
    )),
    discovery_irrelevant(key(
        name::DATA_SEQUENCE_IN_ORDER,
        BooleanOr,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Boolean,
        Some("Yes"),
        "RFC 7143 §13.19",
    )),
    key(
        name::ERROR_RECOVERY_LEVEL,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 0, max: 2 },
        Some("0"),
        "RFC 7143 §13.20",
    ),
    key(
        name::SESSION_TYPE,
        Declarative,
        SW,
        LeadingOnly,
        Any,
        I,
        ValueType::Values(SESSION_TYPES),
        Some("Normal"),
        "RFC 7143 §13.21",
    ),
    discovery_irrelevant(key(
        name::TASK_REPORTING,
        List,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Values(TASK_REPORTING_VALUES),
        Some("RFC3720"),
        "RFC 7143 §13.23",
    )),
    discovery_irrelevant(key(
        name::ISCSI_PROTOCOL_LEVEL,
        NumericalMin,
        SW,
        LeadingOnly,
        Op,
        Both,
        ValueType::Number { min: 0, max: 31 },
        Some("1"),
        "RFC 7143 §13.24, RFC 7144 §2",
    )),
    key(
        name::NODE_ARCHITECTURE,
        Declarative,
        SW,
        LeadingOnly,
        Any,
        Both,
        ValueType::Text,
        None,
        "RFC 7143 §13.26",
    ),
    key(
        name::AUTH_METHOD,
        List,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Values(AUTH_METHODS),
        Some("None"),
        "RFC 7143 §12.1",
    ),
    key(
        name::CHAP_A,
        List,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Numbers,
        None,
        "RFC 7143 §12.1.3",
    ),
    key(
        name::CHAP_I,
        Declarative,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Number { min: 0, max: 255 },
        None,
        "RFC 7143 §12.1.3",
    ),
    large(key(
        name::CHAP_C,
        Declarative,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Binary,
        None,
        "RFC 7143 §12.1.3",
    )),
    key(
        name::CHAP_N,
        Declarative,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Text,
        None,
        "RFC 7143 §12.1.3",
    ),
    large(key(
        name::CHAP_R,
        Declarative,
        CO,
        SecurityOnly,
        Sec,
        Both,
        ValueType::Binary,
        None,
        "RFC 7143 §12.1.3",
    )),
];

/// RFC 7143 §13.25: keys of RFC 3720 that no longer exist. A responder
/// answers the marker keys with `No` (allowed in place of `Reject`, and what
/// RFC 3720 peers expect) and the interval keys with `Reject` (mandatory).
pub static OBSOLETE_KEYS: &[(&str, &str)] = &[
    ("IFMarker", "No"),
    ("OFMarker", "No"),
    ("IFMarkInt", answer::REJECT),
    ("OFMarkInt", answer::REJECT),
];

/// The definition of a key, if RFC 7143 defines it.
pub fn lookup(key: &str) -> Option<&'static KeyDef> {
    KEYS.iter().find(|d| d.name == key)
}

/// The answer RFC 7143 §13.25 prescribes for an obsolete key, if `key` is one.
pub fn obsolete_answer(key: &str) -> Option<&'static str> {
    OBSOLETE_KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, a)| *a)
}

/// True for private (`X-`) and public (`X#`) extension keys (RFC 7143 §13.22).
pub fn is_extension(key: &str) -> bool {
    key.starts_with("X-") || key.starts_with("X#")
}

/// True for keys of the security stage: AuthMethod and the keys of the
/// authentication methods (RFC 7143 §12: CHAP_*, SRP_*, KRB_*, SPKM_*).
pub fn is_security_key(key: &str) -> bool {
    key == name::AUTH_METHOD
        || ["CHAP_", "SRP_", "KRB_", "SPKM_"]
            .iter()
            .any(|p| key.starts_with(p))
}

/// The longest value accepted for `key`: 255 bytes (RFC 7143 §6.1) unless
/// the key carries large binary values or lists (CHAP_C, CHAP_R, SendTargets).
pub fn max_value_bytes(key: &str) -> usize {
    lookup(key).map_or(SIMPLE_VALUE_MAX_BYTES, |d| d.max_value_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_listed_once() {
        for (i, d) in KEYS.iter().enumerate() {
            assert!(
                KEYS[i + 1..].iter().all(|e| e.name != d.name),
                "{} twice",
                d.name
            );
            assert!(d.name.len() <= crate::text::KEY_NAME_MAX_BYTES);
        }
        assert_eq!(KEYS.len(), 31);
    }

    #[test]
    fn defaults_are_admissible_values() {
        for d in KEYS {
            let Some(default) = d.default else { continue };
            match d.value {
                ValueType::Number { min, max } => {
                    let v: u64 = default.parse().unwrap();
                    assert!((min..=max).contains(&v), "{}", d.name);
                }
                ValueType::Boolean => assert!(default == "Yes" || default == "No"),
                ValueType::Values(vals) => assert!(vals.contains(&default), "{}", d.name),
                _ => {}
            }
        }
    }

    #[test]
    fn the_table_matches_rfc_7143_section_13() {
        let mbl = lookup("MaxBurstLength").unwrap();
        assert_eq!(
            (mbl.kind, mbl.scope, mbl.usage, mbl.default),
            (NumericalMin, SW, LeadingOnly, Some("262144"))
        );
        assert!(mbl.irrelevant_in_discovery);
        assert_eq!(lookup("InitialR2T").unwrap().kind, BooleanOr);
        assert_eq!(lookup("ImmediateData").unwrap().kind, BooleanAnd);
        assert_eq!(lookup("DefaultTime2Wait").unwrap().kind, NumericalMax);
        let mrdsl = lookup("MaxRecvDataSegmentLength").unwrap();
        assert_eq!((mrdsl.kind, mrdsl.scope), (Declarative, CO));
        assert_eq!(
            mrdsl.value,
            ValueType::Number {
                min: 512,
                max: 16_777_215
            }
        );
        assert!(!lookup("HeaderDigest").unwrap().irrelevant_in_discovery);
        assert_eq!(lookup("TargetPortalGroupTag").unwrap().senders, T);
        assert_eq!(lookup("CHAP_C").unwrap().max_value_bytes, 8192);
        assert!(lookup("headerdigest").is_none(), "keys are case-sensitive");
    }

    #[test]
    fn classifiers() {
        assert!(is_extension("X-com.example.foo"));
        assert!(is_extension("X#NodeArchitecture"));
        assert!(!is_extension("MaxBurstLength"));
        assert!(is_security_key("AuthMethod"));
        assert!(is_security_key("CHAP_R"));
        assert!(is_security_key("SRP_U"));
        assert!(!is_security_key("InitiatorName"));
        assert_eq!(obsolete_answer("IFMarkInt"), Some("Reject"));
        assert_eq!(obsolete_answer("OFMarker"), Some("No"));
        assert_eq!(max_value_bytes("X-anything"), 255);
    }
}
