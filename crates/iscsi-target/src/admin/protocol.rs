//! The control socket's protocol, for both ends: `isoe admin` sends one
//! [`Request`] and reads one [`Answer`], each a JSON object on one line.
//!
//! On the wire a request is an object whose `op` names it (`"lun-add"`),
//! beside its fields; an answer is `{"ok": true, ...}` with the fields of
//! its kind ([`Shown`], [`Listed`], [`Counted`], [`Changed`],
//! [`LoggedOut`]) or `{"ok": false, "error": "..."}` ([`Refusal`]; with
//! `"busy": true` when the socket had no room and the request may be sent
//! again), and the socket adds `"server"` ([`ServerInfo`]) to every one. Both ends write
//! JSON through [`to_json`], whose objects keep their keys sorted: the
//! bytes are what they were when each end built its objects by hand.
//!
//! A request is read leniently, as the target always did: a flag that is
//! not a boolean is false, a `target` of CHAP that is not a string is
//! `[discovery.chap]`, `keys` may be left out; a field it needs and lacks
//! is named in the refusal ("the request needs \"name\" (a string)").

use crate::metrics::snapshot::Snapshot;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// What a request's `keys` hold: the keys of a `[[target]]`, a
/// `[[target.lun]]` or a `chap` table, as JSON values (strings, numbers,
/// booleans and arrays of them).
pub type Keys = Map<String, Value>;

/// One request of `isoe admin`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Who answers here? (a target starting on a taken path asks it).
    Hello,
    /// The configuration file as it is now, inline secrets hidden.
    Show,
    /// Targets, LUNs, portals, sessions and connections.
    List {
        /// What the client will print of the answer (the answer is whole).
        what: ListWhat,
    },
    /// Every counter ([`Snapshot`]).
    Stats,
    /// Read the configuration file again and put what changed into force.
    Reload {
        /// A LUN's change may discard data.
        force: bool,
    },
    /// End the session with this TSIH.
    Logout {
        /// The session's TSIH.
        tsih: u16,
    },
    /// Add a `[[target]]`.
    TargetAdd {
        /// Its iSCSI name.
        name: String,
        /// Its other keys.
        keys: Keys,
    },
    /// Remove a target.
    TargetRemove {
        /// Its iSCSI name.
        name: String,
    },
    /// Add a LUN.
    LunAdd {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
        /// The keys of its `[[target.lun]]`.
        keys: Keys,
    },
    /// Remove a LUN.
    LunRemove {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// Take a LUN offline.
    LunOffline {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// Bring an offline LUN back.
    LunOnline {
        /// The target's name.
        target: String,
        /// The LUN.
        number: u16,
    },
    /// Add an initiator to a target's `allowed_initiators`.
    AclAdd {
        /// The target's name.
        target: String,
        /// The initiator's name.
        initiator: String,
    },
    /// Remove an initiator from a target's `allowed_initiators`.
    AclRemove {
        /// The target's name.
        target: String,
        /// The initiator's name.
        initiator: String,
        /// The last entry may go, which lets every initiator in.
        allow_all: bool,
    },
    /// Require CHAP of a target's logins, or (`None`) of discovery.
    ChapSet {
        /// The target's name; `None`: `[discovery.chap]`.
        target: Option<String>,
        /// The keys of its `chap` table.
        keys: Keys,
    },
    /// Stop requiring CHAP of a target's logins, or (`None`) of discovery.
    ChapClear {
        /// The target's name; `None`: `[discovery.chap]`.
        target: Option<String>,
    },
    /// Listen on one more portal.
    PortalAdd {
        /// The address as the file writes it.
        address: String,
    },
    /// Stop listening on a portal.
    PortalRemove {
        /// The address as the file writes it.
        address: String,
    },
}

/// What `isoe admin list` prints of the status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListWhat {
    /// Everything.
    #[default]
    All,
    /// Targets and their LUNs.
    Targets,
    /// Portals.
    Portals,
    /// Sessions and their connections.
    Sessions,
}

impl ListWhat {
    /// The value as written on the wire.
    fn from_name(name: &str) -> Option<ListWhat> {
        Some(match name {
            "all" => ListWhat::All,
            "targets" => ListWhat::Targets,
            "portals" => ListWhat::Portals,
            "sessions" => ListWhat::Sessions,
            _ => return None,
        })
    }
}

/// What a target answers to a request for `op: "hello"` as it probes a
/// socket path that is taken: the very bytes it always sent.
pub const HELLO: &[u8] = b"{\"op\": \"hello\"}\n";

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Request, D::Error> {
        let request = Value::deserialize(deserializer)?;
        Request::from_json(&request).map_err(D::Error::custom)
    }
}

impl Request {
    /// Reads `request` as the target always has: the fields each `op`
    /// needs in turn, each missing one named in the error.
    fn from_json(request: &Value) -> Result<Request, String> {
        let text = |name| field_str(request, name).map(str::to_string);
        let flag = |name| request.get(name).and_then(Value::as_bool).unwrap_or(false);
        let chap_target = || {
            request
                .get("target")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(match field_str(request, "op")? {
            "hello" => Request::Hello,
            "show" => Request::Show,
            "stats" => Request::Stats,
            "list" => Request::List {
                what: request
                    .get("what")
                    .and_then(Value::as_str)
                    .and_then(ListWhat::from_name)
                    .unwrap_or_default(),
            },
            "reload" => Request::Reload {
                force: flag("force"),
            },
            "logout" => {
                let tsih = field_u64(request, "tsih")?;
                let tsih =
                    u16::try_from(tsih).map_err(|_| format!("TSIH {tsih} is not 16 bits"))?;
                Request::Logout { tsih }
            }
            "target-add" => Request::TargetAdd {
                name: text("name")?,
                keys: keys(request)?,
            },
            "target-remove" => Request::TargetRemove {
                name: text("name")?,
            },
            "lun-add" => Request::LunAdd {
                target: text("target")?,
                number: lun_number(request)?,
                keys: keys(request)?,
            },
            "lun-remove" => Request::LunRemove {
                target: text("target")?,
                number: lun_number(request)?,
            },
            "lun-offline" => Request::LunOffline {
                target: text("target")?,
                number: lun_number(request)?,
            },
            "lun-online" => Request::LunOnline {
                target: text("target")?,
                number: lun_number(request)?,
            },
            "acl-add" => Request::AclAdd {
                target: text("target")?,
                initiator: text("initiator")?,
            },
            "acl-remove" => Request::AclRemove {
                target: text("target")?,
                initiator: text("initiator")?,
                allow_all: flag("allow_all"),
            },
            "chap-set" => Request::ChapSet {
                target: chap_target(),
                keys: keys(request)?,
            },
            "chap-clear" => Request::ChapClear {
                target: chap_target(),
            },
            "portal-add" => Request::PortalAdd {
                address: text("address")?,
            },
            "portal-remove" => Request::PortalRemove {
                address: text("address")?,
            },
            other => return Err(format!("unknown request {other:?}")),
        })
    }
}

fn field_str<'r>(request: &'r Value, name: &str) -> Result<&'r str, String> {
    request
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the request needs {name:?} (a string)"))
}

fn field_u64(request: &Value, name: &str) -> Result<u64, String> {
    request
        .get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("the request needs {name:?} (a number)"))
}

fn lun_number(request: &Value) -> Result<u16, String> {
    let n = field_u64(request, "number")?;
    u16::try_from(n).map_err(|_| format!("LUN {n} is out of range"))
}

/// The request's `keys` object; none: no keys.
fn keys(request: &Value) -> Result<Keys, String> {
    match request.get("keys") {
        None => Ok(Keys::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err("\"keys\" must be an object".into()),
    }
}

/// One answer: whether the request was carried out, the fields of its
/// kind beside that, and which target answered. Read back with
/// [`Answer::from_json`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer<T> {
    /// Whether the request was carried out.
    pub ok: bool,
    /// The fields of the answer's kind.
    #[serde(flatten)]
    pub body: T,
    /// Which target answered; every answer through the socket names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerInfo>,
}

impl<T: DeserializeOwned> Answer<T> {
    /// `answer`, as it came from the socket, read as an answer of this
    /// kind. The body is read from the whole object (its own fields; `ok`
    /// and `server` are passed over), not through serde's `flatten`, which
    /// cannot read the LUN numbers that key the counters of `stats`.
    pub fn from_json(answer: &Value) -> Result<Answer<T>, serde_json::Error> {
        #[derive(Deserialize)]
        struct Envelope {
            ok: bool,
            #[serde(default)]
            server: Option<ServerInfo>,
        }
        let Envelope { ok, server } = Envelope::deserialize(answer)?;
        let body = T::deserialize(answer)?;
        Ok(Answer { ok, body, server })
    }
}

impl<T> Answer<T> {
    /// A request carried out.
    pub fn ok(body: T) -> Answer<T> {
        Answer {
            ok: true,
            body,
            server: None,
        }
    }
}

impl Answer<Refusal> {
    /// A request refused, and why; nothing changed.
    pub fn refused(error: impl Into<String>) -> Answer<Refusal> {
        Answer {
            ok: false,
            body: Refusal {
                error: error.into(),
                busy: false,
            },
            server: None,
        }
    }

    /// The control socket had no room for the request, which was not
    /// looked at: the client may send it again shortly.
    pub fn busy(error: impl Into<String>) -> Answer<Refusal> {
        let mut answer = Answer::refused(error);
        answer.body.busy = true;
        answer
    }
}

/// Which target answered: `"server"` in every answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Its process id.
    pub pid: u32,
    /// Its configuration file; `None`: it runs the embedded default.
    pub config_file: Option<String>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// What went wrong, in one line.
    pub error: String,
    /// The socket was busy and nothing was done: trying again shortly
    /// may succeed. Sent only when true; a target older than it says
    /// nothing, and its busy answer is recognized by [`Refusal::is_busy`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
}

impl Refusal {
    /// Whether trying again shortly may succeed: `busy`, or the error a
    /// target older than `busy` gave when its clients were all served.
    pub fn is_busy(&self) -> bool {
        self.busy
            || self
                .error
                .ends_with("clients at once and all are busy; try again")
    }
}

/// The answer to `hello`: nothing but `ok` (and `server`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nothing {}

/// The answer to `show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shown {
    /// The configuration file's text, inline secrets hidden.
    pub config: String,
}

/// The answer to `stats`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Counted {
    /// `[metrics] enabled`: commands are counted.
    pub counting: bool,
    /// Every counter.
    pub stats: Snapshot,
}

/// The answer to a change (an edit, `reload`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    /// What was put into force, a line each.
    pub changes: Vec<String>,
    /// Keys changed that take effect at the next start.
    pub at_restart: Vec<String>,
    /// The file written, if one was.
    pub saved: Option<String>,
    /// What became of the configuration file, in one line.
    pub file: String,
}

/// The answer to `logout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedOut {
    /// What was done, in one line.
    pub changes: Vec<String>,
}

/// The answer to `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// What runs now.
    pub status: Status,
}

/// Targets, LUNs, portals, sessions and connections now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The configuration file; `None`: the embedded default.
    pub config_file: Option<String>,
    /// The portals bound.
    pub portals: Vec<PortalStatus>,
    /// The targets.
    pub targets: Vec<TargetStatus>,
    /// The sessions logged in, normal and discovery.
    pub sessions: Vec<SessionStatus>,
}

/// One portal as configured and as bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortalStatus {
    /// The address configured.
    pub configured: String,
    /// The address bound (port 0 resolved).
    pub listening: String,
}

/// One target now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatus {
    /// Its iSCSI name.
    pub name: String,
    /// Its TargetAlias.
    pub alias: Option<String>,
    /// Its ACL; empty: every initiator.
    pub allowed_initiators: Vec<String>,
    /// The CHAP user its logins must present, if CHAP is required.
    pub chap_user: Option<String>,
    /// Whether it proves itself to initiators that ask (mutual CHAP).
    pub mutual_chap: bool,
    /// Its LUNs.
    pub luns: Vec<LunStatus>,
    /// Sessions logged in to it.
    pub sessions: usize,
}

/// One LUN now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LunStatus {
    /// The LUN.
    pub number: u16,
    /// Its store in a few words ("memory 64 MiB").
    pub store: Option<String>,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Its logical block size.
    pub block_size: u32,
    /// Whether it refuses writes.
    pub read_only: bool,
    /// Whether it is offline.
    pub offline: bool,
    /// Its unit serial number (VPD page 80h).
    pub serial: String,
    /// Its NAA designator (VPD page 83h), in hex.
    pub naa: String,
}

/// One session now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Its TSIH.
    pub tsih: u16,
    /// Its ISID, in hex.
    pub isid: String,
    /// The initiator's name.
    pub initiator: String,
    /// The target's name; `None`: a discovery session.
    pub target: Option<String>,
    /// `"normal"` or `"discovery"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What its login negotiated.
    pub parameters: SessionParameters,
    /// Its connections.
    pub connections: Vec<ConnectionStatus>,
}

/// The session-wide parameters a login negotiated (RFC 7143 §13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionParameters {
    /// MaxConnections.
    pub max_connections: u16,
    /// InitialR2T.
    pub initial_r2t: bool,
    /// ImmediateData.
    pub immediate_data: bool,
    /// MaxBurstLength.
    pub max_burst_length: u32,
    /// FirstBurstLength.
    pub first_burst_length: u32,
    /// MaxOutstandingR2T.
    pub max_outstanding_r2t: u16,
    /// ErrorRecoveryLevel.
    pub error_recovery_level: u8,
}

/// One connection of a session now: its CID, and what its login said
/// once it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStatus {
    /// Its CID.
    pub cid: u16,
    /// The rest; left out for a connection that has not said it.
    #[serde(flatten)]
    pub detail: Option<ConnectionDetail>,
}

/// What a connection's login said, and what it has in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionDetail {
    /// The initiator's address.
    pub initiator_address: String,
    /// The portal it came in through.
    pub portal: String,
    /// Seconds since its login completed.
    pub age_s: u64,
    /// `"CRC32C"` or `"None"`.
    pub header_digest: String,
    /// `"CRC32C"` or `"None"`.
    pub data_digest: String,
    /// MaxRecvDataSegmentLength the target declared.
    pub max_recv_data_segment_length: u32,
    /// MaxRecvDataSegmentLength the initiator declared.
    pub max_send_data_segment_length: u32,
    /// Commands received and not yet answered.
    pub commands_in_flight: u32,
}

/// `value` as JSON, its objects' keys sorted; a value that cannot be
/// written (a map whose keys are not strings) becomes a refusal saying so.
pub fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| {
        let mut refusal = Map::new();
        refusal.insert("ok".into(), Value::Bool(false));
        refusal.insert(
            "error".into(),
            Value::String(format!("the answer cannot be written as JSON: {e}")),
        );
        Value::Object(refusal)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bytes a request goes out as.
    fn wire(request: &Request) -> String {
        to_json(request).to_string()
    }

    #[test]
    fn requests_go_out_as_the_objects_isoe_admin_built_by_hand() {
        let mut keys = Keys::new();
        keys.insert("memory".into(), json!("1GiB"));
        let cases = [
            (Request::Show, json!({"op": "show"})),
            (
                Request::List {
                    what: ListWhat::Sessions,
                },
                json!({"op": "list", "what": "sessions"}),
            ),
            (
                Request::Reload { force: false },
                json!({"op": "reload", "force": false}),
            ),
            (
                Request::Logout { tsih: 7 },
                json!({"op": "logout", "tsih": 7}),
            ),
            (
                Request::LunAdd {
                    target: "iqn.2026-11.io.isoe:t".into(),
                    number: 1,
                    keys: keys.clone(),
                },
                json!({"op": "lun-add", "target": "iqn.2026-11.io.isoe:t", "number": 1, "keys": {"memory": "1GiB"}}),
            ),
            (
                Request::AclRemove {
                    target: "t".into(),
                    initiator: "i".into(),
                    allow_all: true,
                },
                json!({"op": "acl-remove", "target": "t", "initiator": "i", "allow_all": true}),
            ),
            (
                Request::ChapSet {
                    target: None,
                    keys: keys.clone(),
                },
                json!({"op": "chap-set", "target": null, "keys": {"memory": "1GiB"}}),
            ),
            (
                Request::PortalRemove {
                    address: "127.0.0.1".into(),
                },
                json!({"op": "portal-remove", "address": "127.0.0.1"}),
            ),
        ];
        for (request, by_hand) in cases {
            assert_eq!(wire(&request), by_hand.to_string());
            assert_eq!(serde_json::from_value::<Request>(by_hand).unwrap(), request);
        }
    }

    #[test]
    fn requests_are_read_leniently_and_what_lacks_is_named() {
        let read = |v: Value| serde_json::from_value::<Request>(v).map_err(|e| e.to_string());
        assert_eq!(
            read(json!({"op": "list"})),
            Ok(Request::List {
                what: ListWhat::All
            })
        );
        assert_eq!(
            read(json!({"op": "chap-clear", "target": 5})),
            Ok(Request::ChapClear { target: None })
        );
        assert_eq!(
            read(json!({"op": "reload", "force": "yes"})),
            Ok(Request::Reload { force: false })
        );
        assert_eq!(
            read(json!({"op": "target-add", "name": "t"})),
            Ok(Request::TargetAdd {
                name: "t".into(),
                keys: Keys::new()
            })
        );
        for (request, error) in [
            (json!([1]), "the request needs \"op\" (a string)"),
            (json!({"op": "nap"}), "unknown request \"nap\""),
            (
                json!({"op": "target-remove"}),
                "the request needs \"name\" (a string)",
            ),
            (
                json!({"op": "logout", "tsih": 65536}),
                "TSIH 65536 is not 16 bits",
            ),
            (
                json!({"op": "lun-remove", "target": "t", "number": -1}),
                "the request needs \"number\" (a number)",
            ),
            (
                json!({"op": "lun-remove", "target": "t", "number": 70000}),
                "LUN 70000 is out of range",
            ),
            (
                json!({"op": "chap-set", "keys": []}),
                "\"keys\" must be an object",
            ),
        ] {
            assert_eq!(read(request), Err(error.to_string()));
        }
        assert_eq!(
            serde_json::from_slice::<Request>(HELLO).unwrap(),
            Request::Hello
        );
    }

    #[test]
    fn answers_keep_their_shapes() {
        let refused = to_json(&Answer::refused("no"));
        assert_eq!(refused.to_string(), r#"{"error":"no","ok":false}"#);
        let busy = to_json(&Answer::busy("full"));
        assert_eq!(
            busy.to_string(),
            r#"{"busy":true,"error":"full","ok":false}"#
        );
        let read = |v: Value| Answer::<Refusal>::from_json(&v).unwrap().body;
        assert!(read(busy).is_busy());
        assert!(!read(refused).is_busy());
        let older = json!({"ok": false, "error":
            "the control socket serves 8 clients at once and all are busy; try again"});
        assert!(read(older).is_busy());
        let mut named = Answer::ok(LoggedOut {
            changes: vec!["session TSIH 3 logged out".into()],
        });
        named.server = Some(ServerInfo {
            pid: 9,
            config_file: None,
        });
        assert_eq!(
            to_json(&named).to_string(),
            r#"{"changes":["session TSIH 3 logged out"],"ok":true,"server":{"config_file":null,"pid":9}}"#
        );
        let bare = ConnectionStatus {
            cid: 1,
            detail: None,
        };
        assert_eq!(to_json(&bare).to_string(), r#"{"cid":1}"#);
        assert_eq!(
            serde_json::from_value::<ConnectionStatus>(json!({"cid": 1})).unwrap(),
            bare
        );
        let hello = Answer::<Nothing>::from_json(
            &json!({"ok": true, "server": {"pid": 1, "config_file": "/x"}}),
        )
        .unwrap();
        assert_eq!(
            hello.server.and_then(|s| s.config_file).as_deref(),
            Some("/x")
        );
    }

    #[test]
    fn the_counters_of_stats_read_back_with_their_lun_numbers() {
        use crate::metrics::LunTotals;
        let mut stats: Snapshot = serde_json::from_value(json!({
            "luns": {}, "targets": {}, "sessions": [], "logins": {},
            "connection_refusals": {}, "connection_evictions": {}, "resources": [],
        }))
        .unwrap();
        assert!(stats.media.is_empty(), "a target older than media");
        let mut luns = std::collections::BTreeMap::new();
        luns.insert(10u16, LunTotals::default());
        stats.luns.insert("t".into(), luns);
        let media = [(10u16, Some(1 << 20)), (11, None)]
            .into_iter()
            .map(|(lun, bytes)| {
                let totals = crate::metrics::MediaTotals {
                    unwritten_read_bytes: bytes,
                };
                (lun, totals)
            })
            .collect();
        stats.media.insert("t".into(), media);
        let sent = to_json(&Answer::ok(Counted {
            counting: true,
            stats,
        }));
        assert_eq!(
            sent["stats"]["media"],
            json!({"t": {"10": {"unwritten_read_bytes": 1048576}, "11": {}}})
        );
        let read = Answer::<Counted>::from_json(&sent).unwrap();
        assert!(read.ok && read.body.counting);
        assert!(read.body.stats.luns["t"].contains_key(&10));
        let media = &read.body.stats.media["t"];
        assert_eq!(media[&10].unwritten_read_bytes, Some(1 << 20));
        assert_eq!(media[&11].unwritten_read_bytes, None);
    }
}
