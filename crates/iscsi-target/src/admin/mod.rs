//! The control plane: what `isoe admin` and SIGHUP change on a running
//! target, and what they show of it.
//!
//! Every change goes the same way, whether it comes from `isoe admin` or
//! from an edited file and SIGHUP:
//!
//! 1. the configuration file's text is edited as a TOML document
//!    ([`edit`]), keeping its comments and layout (a reload reads the file
//!    instead);
//! 2. the new text is read by the same reader as at start, so a change that
//!    would break the file is refused with the same `file:line: key:`
//!    error, and nothing changes;
//! 3. the file on disk is checked to be the text last read or written (a
//!    hand edit not yet reloaded is never overwritten), and the new text is
//!    written to a new file beside it, with its owner and mode, and made
//!    durable ([`save`]);
//! 4. the difference is put into force ([`apply`]); if that fails (a store
//!    cannot be opened, a portal cannot be bound), the temporary file goes
//!    and nothing changed;
//! 5. the temporary file is renamed over the configuration file (and the
//!    directory synced), so a restart comes back with what runs, and a
//!    crash at any point leaves either the old file or the new one.
//!
//! One change runs at a time (a lock held from 1 to 5); the command path
//! never takes it.

pub mod apply;
pub mod edit;
pub mod lun_change;
pub mod protocol;
pub mod save;
pub mod socket;

use crate::config::{Config, ConfigError, TargetConfig};
use crate::driver::Handle;
use crate::registry::Server;
use crate::session::Session;
use crate::target::Target;
use edit::Edit;
use isoe_sync::MutexExt;
use protocol::{
    to_json, Answer, Changed, ConnectionDetail, ConnectionStatus, Counted, Keys, Listed, LoggedOut,
    LunStatus, Nothing, PortalStatus, Request, SessionParameters, SessionStatus, Shown, Status,
    TargetStatus,
};
use save::{SaveError, Staged};
use serde_json::Value as Json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use toml_edit::DocumentMut;

/// The embedded default configuration, as a file would say it.
const EMBEDDED_DEFAULT: &str = include_str!("../../../../examples/minimal.toml");

/// Why a change was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request is not one the control plane knows, or lacks a field.
    #[error("{0}")]
    Request(String),
    /// The edit does not fit the file (no such target, LUN there already...).
    #[error(transparent)]
    Edit(#[from] edit::EditError),
    /// The file after the change would not be a valid configuration.
    #[error("the change would make the configuration invalid: {0}")]
    Config(ConfigError),
    /// The new configuration could not be put into force.
    #[error("{0}")]
    Apply(#[from] apply::ApplyError),
    /// The configuration file could not be saved (changed on disk since
    /// it was read, a link in its place, or the OS refused).
    #[error(transparent)]
    Save(#[from] SaveError),
}

/// What a change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What was put into force, a line each.
    pub applied: apply::Applied,
    /// The file written, or None when nothing was written.
    pub saved: Option<PathBuf>,
    /// What became of the configuration file, in one line.
    pub file: String,
}

struct State {
    /// What runs, as configured (portals before binding).
    config: Config,
    doc: DocumentMut,
    path: Option<PathBuf>,
    /// The file's text as last read or written: a save first checks that
    /// the file still holds it.
    loaded: String,
    /// Portals given with `--listen`, which replace the file's.
    listen: Option<Vec<SocketAddr>>,
}

/// The control plane of one running target.
pub struct Admin {
    server: Arc<Server>,
    handle: Arc<Handle>,
    state: Mutex<State>,
}

impl Admin {
    /// The control plane of a target started from `config`, read from
    /// `file` (its path and the text read; None: the embedded default);
    /// `listen` are the portals given on the command line, if any, which
    /// stay whatever the file says.
    pub fn new(
        server: Arc<Server>,
        handle: Arc<Handle>,
        config: Config,
        file: Option<(&Path, &str)>,
        listen: Option<Vec<SocketAddr>>,
    ) -> Result<Admin, ConfigError> {
        let path = file.map(|(path, _)| path);
        let text = file.map_or(EMBEDDED_DEFAULT, |(_, text)| text);
        let doc = parse_document(text, path)?;
        Ok(Admin {
            server,
            handle,
            state: Mutex::new(State {
                config,
                doc,
                path: path.map(Path::to_path_buf),
                loaded: text.to_string(),
                listen,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock_unpoisoned()
    }

    /// Makes `edit` to the configuration, puts it into force and saves it.
    pub fn edit(&self, edit: &Edit) -> Result<Outcome, AdminError> {
        let mut state = self.state();
        let mut doc = state.doc.clone();
        let running: Vec<String> = state.config.portals.iter().map(|p| p.to_string()).collect();
        if state.listen.is_some()
            && matches!(edit, Edit::PortalAdd { .. } | Edit::PortalRemove { .. })
        {
            return Err(AdminError::Request(
                "the portals were given with --listen on the command line; \
                 restart without it to manage them here"
                    .into(),
            ));
        }
        edit.apply(&mut doc, &running)?;
        let outcome = self.put_in_force(&mut state, doc, true, false)?;
        let mut lines = vec![edit.describe()];
        lines.extend(outcome.applied.changes.iter().cloned());
        log_changes("isoe admin", &lines, &outcome);
        Ok(outcome)
    }

    /// Reads the configuration file again and puts what changed into
    /// force (SIGHUP). On an error the running configuration stays.
    /// `force`: a LUN's change may discard its data (see [`lun_change`]).
    pub fn reload(&self, force: bool) -> Result<Outcome, AdminError> {
        let mut state = self.state();
        let Some(path) = state.path.clone() else {
            return Err(AdminError::Request(
                "the target was started without --config: there is no file to reload".into(),
            ));
        };
        let text = read_text(&path).map_err(AdminError::Config)?;
        let doc = parse_document(&text, Some(&path)).map_err(AdminError::Config)?;
        let outcome = self.put_in_force(&mut state, doc, false, force)?;
        state.loaded = text;
        log_changes("reload", &outcome.applied.changes, &outcome);
        Ok(outcome)
    }

    /// Steps 2 to 5 of the module doc, for `doc`; `save`: write it to the
    /// file (an edit), or not (a reload, which read it from there);
    /// `force`: a LUN's change may discard data.
    fn put_in_force(
        &self,
        state: &mut State,
        doc: DocumentMut,
        save: bool,
        force: bool,
    ) -> Result<Outcome, AdminError> {
        let text = doc.to_string();
        let mut new = Config::parse(&text, state.path.as_deref()).map_err(AdminError::Config)?;
        crate::provision::check_stores(&new).map_err(AdminError::Config)?;
        if let Some(listen) = &state.listen {
            new.set_portals(listen.clone());
        }
        let unchanged_text = text == state.doc.to_string();
        let staged = match (&state.path, save && !unchanged_text) {
            (Some(path), true) => {
                let secret = edit::holds_inline_secret(&doc);
                Some(Staged::write(path, &state.loaded, &text, secret)?)
            }
            _ => None,
        };
        let mode_note = staged.as_ref().and_then(|s| s.mode_note.clone());
        let mut applied = apply::apply(
            &self.server,
            &self.handle,
            &state.config,
            &new,
            apply::Asked { force, doc: &doc },
        )?;
        applied.changes.extend(mode_note);
        let saved = match staged {
            Some(staged) => Some(staged.commit()?),
            None => None,
        };
        let file = file_note(state.path.as_deref(), save, saved.is_some(), unchanged_text);
        if saved.is_some() {
            state.loaded.clone_from(&text);
        }
        state.config = new;
        state.doc = doc;
        Ok(Outcome {
            applied,
            saved,
            file,
        })
    }

    /// The configuration file as it is now, inline secrets hidden.
    pub fn show(&self) -> String {
        edit::redacted(&self.state().doc)
    }

    /// Targets, LUNs, portals, sessions and connections, for `isoe admin list`.
    pub fn list(&self) -> Status {
        let state = self.state();
        let now = std::time::Instant::now();
        let sessions = self.server.sessions();
        let targets = self
            .server
            .targets()
            .iter()
            .map(|t| {
                let specs = state.config.targets.iter().find(|c| c.name == t.name);
                target_status(t, specs, &sessions)
            })
            .collect();
        let sessions = sessions.iter().map(|s| session_status(s, now)).collect();
        let portals = self
            .handle
            .bound()
            .iter()
            .map(|(configured, local)| PortalStatus {
                configured: configured.to_string(),
                listening: local.to_string(),
            })
            .collect();
        Status {
            config_file: state.path.as_ref().map(|p| p.display().to_string()),
            portals,
            targets,
            sessions,
        }
    }

    /// Ends the session with `tsih` (its connections close; the initiator
    /// may log in again, as after a connection loss).
    pub fn logout(&self, tsih: u16) -> Result<(), AdminError> {
        let mut wake = Vec::new();
        if !self.server.close_session(tsih, &mut wake) {
            return Err(AdminError::Request(format!("no session with TSIH {tsih}")));
        }
        self.handle.wake(&wake);
        crate::log::config_change("isoe admin", format_args!("session TSIH {tsih} logged out"));
        Ok(())
    }

    /// Answers one request of the control socket's protocol (see
    /// [`protocol`]); the socket adds who answered.
    pub fn answer(&self, request: &Request) -> Json {
        match self.dispatch(request) {
            Ok(reply) => reply,
            Err(e) => to_json(&Answer::refused(e.to_string())),
        }
    }

    fn dispatch(&self, request: &Request) -> Result<Json, AdminError> {
        let changed = |outcome: Outcome| {
            to_json(&Answer::ok(Changed {
                changes: outcome.applied.changes,
                at_restart: outcome.applied.at_restart,
                saved: outcome.saved.map(|p| p.display().to_string()),
                file: outcome.file,
            }))
        };
        let edit = match request {
            Request::Hello => return Ok(to_json(&Answer::ok(Nothing {}))),
            Request::Show => {
                return Ok(to_json(&Answer::ok(Shown {
                    config: self.show(),
                })))
            }
            Request::Stats => {
                return Ok(to_json(&Answer::ok(Counted {
                    counting: self.server.config.metrics.enabled,
                    stats: crate::metrics::snapshot::snapshot(&self.server),
                })))
            }
            Request::List { .. } => {
                return Ok(to_json(&Answer::ok(Listed {
                    status: self.list(),
                })))
            }
            Request::Reload { force } => return self.reload(*force).map(changed),
            Request::Logout { tsih } => {
                self.logout(*tsih)?;
                return Ok(to_json(&Answer::ok(LoggedOut {
                    changes: vec![format!("session TSIH {tsih} logged out")],
                })));
            }
            Request::TargetAdd { name, keys } => Edit::TargetAdd {
                name: name.clone(),
                keys: toml_keys(keys)?,
            },
            Request::TargetRemove { name } => Edit::TargetRemove { name: name.clone() },
            Request::LunAdd {
                target: t,
                number,
                keys,
            } => Edit::LunAdd {
                target: t.clone(),
                number: *number,
                keys: toml_keys(keys)?,
            },
            Request::LunRemove { target: t, number } => Edit::LunRemove {
                target: t.clone(),
                number: *number,
            },
            Request::LunOffline { target: t, number }
            | Request::LunOnline { target: t, number } => Edit::LunOffline {
                target: t.clone(),
                number: *number,
                offline: matches!(request, Request::LunOffline { .. }),
            },
            Request::AclAdd {
                target: t,
                initiator,
            } => Edit::AclAdd {
                target: t.clone(),
                initiator: initiator.clone(),
            },
            Request::AclRemove {
                target: t,
                initiator,
                allow_all,
            } => Edit::AclRemove {
                target: t.clone(),
                initiator: initiator.clone(),
                allow_all: *allow_all,
            },
            Request::ChapSet { target: t, keys } => Edit::ChapSet {
                target: t.clone(),
                keys: toml_keys(keys)?,
            },
            Request::ChapClear { target: t } => Edit::ChapClear { target: t.clone() },
            Request::PortalAdd { address } => Edit::PortalAdd {
                address: address.clone(),
            },
            Request::PortalRemove { address } => Edit::PortalRemove {
                address: address.clone(),
            },
        };
        self.edit(&edit).map(changed)
    }
}

/// Target `t` for `isoe admin list`: its policy now, its LUNs (with the
/// store its configuration `specs` gives each), its sessions among
/// `sessions`.
fn target_status(
    t: &Arc<Target>,
    specs: Option<&TargetConfig>,
    sessions: &[Arc<Session>],
) -> TargetStatus {
    let policy = t.policy();
    let luns = t
        .luns()
        .units()
        .map(|lu| {
            let c = lu.config();
            let spec = specs.and_then(|s| s.luns.iter().find(|l| l.number == c.lun_number));
            LunStatus {
                number: c.lun_number,
                store: spec.map(|spec| spec.store.describe()),
                size_bytes: lu.store().size_bytes(),
                block_size: c.block_size,
                read_only: c.read_only,
                offline: lu.is_offline(),
                serial: c.unit_serial.clone(),
                naa: hex(&c.naa),
            }
        })
        .collect();
    TargetStatus {
        name: t.name.clone(),
        alias: policy.alias.clone(),
        allowed_initiators: policy.allowed_initiators.clone(),
        chap_user: policy.chap.as_ref().map(|c| c.user.clone()),
        mutual_chap: policy.chap.as_ref().is_some_and(|c| c.mutual.is_some()),
        luns,
        sessions: sessions.iter().filter(|s| s.is_on(t)).count(),
    }
}

/// Session `s` and its connections for `isoe admin list`, their ages as
/// of `now`.
fn session_status(s: &Session, now: std::time::Instant) -> SessionStatus {
    let digest = |on: bool| if on { "CRC32C" } else { "None" }.to_string();
    let connections = s
        .connections()
        .into_iter()
        .map(|(cid, info)| ConnectionStatus {
            cid,
            detail: info.map(|i| ConnectionDetail {
                initiator_address: i.peer.to_string(),
                portal: i.local.to_string(),
                age_s: now.saturating_duration_since(i.since).as_secs(),
                header_digest: digest(i.header_digest),
                data_digest: digest(i.data_digest),
                max_recv_data_segment_length: i.max_recv_data_segment_length,
                max_send_data_segment_length: i.max_send_data_segment_length,
                commands_in_flight: i.in_flight.load(std::sync::atomic::Ordering::Relaxed),
            }),
        })
        .collect();
    let p = &s.params;
    SessionStatus {
        tsih: s.tsih,
        isid: hex(&s.isid),
        initiator: s.initiator_name.clone(),
        target: s.target.as_ref().map(|t| t.name.clone()),
        kind: if s.target.is_some() {
            "normal"
        } else {
            "discovery"
        }
        .into(),
        parameters: SessionParameters {
            max_connections: p.max_connections,
            initial_r2t: p.initial_r2t,
            immediate_data: p.immediate_data,
            max_burst_length: p.max_burst_length,
            first_burst_length: p.first_burst_length,
            max_outstanding_r2t: p.max_outstanding_r2t,
            error_recovery_level: p.error_recovery_level,
        },
        connections,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A request's `keys` as TOML values (strings, integers, floats, booleans
/// and arrays of them).
fn toml_keys(keys: &Keys) -> Result<Vec<(String, toml_edit::Value)>, AdminError> {
    keys.iter()
        .map(|(k, v)| Ok((k.clone(), toml_value(k, v)?)))
        .collect()
}

fn toml_value(key: &str, v: &Json) -> Result<toml_edit::Value, AdminError> {
    Ok(match v {
        Json::String(s) => s.as_str().into(),
        Json::Bool(b) => (*b).into(),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.into(),
            (None, Some(f)) => f.into(),
            _ => {
                return Err(AdminError::Request(format!(
                    "{key}: {n} is not a TOML number"
                )))
            }
        },
        Json::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(key, item)?);
            }
            toml_edit::Value::Array(array)
        }
        _ => {
            return Err(AdminError::Request(format!(
                "{key}: only strings, numbers, booleans and arrays are configuration values"
            )))
        }
    })
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The file as a TOML document; the configuration reader reports syntax
/// errors first, with their line, so this only fails on text it accepted.
fn parse_document(text: &str, path: Option<&Path>) -> Result<DocumentMut, ConfigError> {
    Config::parse(text, path)?;
    text.parse::<DocumentMut>().map_err(|e| ConfigError::Read {
        path: path.map_or_else(|| PathBuf::from("<config>"), Path::to_path_buf),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
    })
}

fn log_changes(source: &str, lines: &[String], outcome: &Outcome) {
    for line in lines {
        crate::log::config_change(source, line);
    }
    for key in &outcome.applied.at_restart {
        crate::log::config_change(
            source,
            format_args!("{key} changed; it takes effect at the next start"),
        );
    }
    if let Some(path) = &outcome.saved {
        crate::log::config_change(source, format_args!("saved to {}", path.display()));
    }
}

/// What a change did to the configuration file, for the answer.
fn file_note(path: Option<&Path>, save: bool, saved: bool, unchanged: bool) -> String {
    match path {
        None => "not saved: the target runs without a configuration file".into(),
        Some(p) if saved => format!("saved to {}", p.display()),
        Some(p) if !save && unchanged => format!("{} unchanged since it was loaded", p.display()),
        Some(p) if !save => format!("reloaded from {}", p.display()),
        Some(p) => format!("{} unchanged: the change was there already", p.display()),
    }
}
