//! The initiator's errors.

use crate::url::UrlError;
use isoe_wire::frame::FrameError;
use isoe_wire::login::InitiatorLoginError;
use std::io;
use thiserror::Error;

/// Why an initiator operation failed.
#[derive(Debug, Error)]
pub enum InitiatorError {
    /// The URL or portal is malformed or does not resolve.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The TCP connection could not be made.
    #[error("cannot connect to {portal}: {source}")]
    Connect {
        /// host:port.
        portal: String,
        /// The socket error.
        source: io::Error,
    },
    /// A socket operation failed.
    #[error("{portal}: {source}")]
    Io {
        /// host:port.
        portal: String,
        /// The socket error.
        source: io::Error,
    },
    /// The target closed the connection.
    #[error("{portal}: the target closed the connection {during}")]
    Closed {
        /// host:port.
        portal: String,
        /// What we were doing.
        during: &'static str,
    },
    /// No answer in time.
    #[error("{portal}: no answer within {seconds} s {during}")]
    Timeout {
        /// host:port.
        portal: String,
        /// The limit.
        seconds: u64,
        /// What we were waiting for.
        during: &'static str,
    },
    /// The login failed: refused by the target, or CHAP or negotiation failed.
    #[error("login to {target} at {portal} failed: {source}")]
    Login {
        /// host:port.
        portal: String,
        /// TargetName (or "discovery").
        target: String,
        /// What the login engine said.
        source: InitiatorLoginError,
    },
    /// A PDU from the target could not be framed.
    #[error("{portal}: bad PDU from the target: {source}")]
    Frame {
        /// host:port.
        portal: String,
        /// The decoder's complaint.
        source: FrameError,
    },
    /// The target broke the protocol.
    #[error("{portal}: target protocol violation: {what}")]
    Protocol {
        /// host:port.
        portal: String,
        /// What it did.
        what: String,
    },
    /// The session failed and reconnection gave up.
    #[error("session to {target} failed after {attempts} reconnection attempts: {last}")]
    SessionFailed {
        /// TargetName.
        target: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        last: String,
    },
    /// A multipath LU cannot be opened as given: its paths reach different
    /// LUs, one failed, or none serves I/O (the text names them).
    #[error("multipath: {0}")]
    Multipath(String),
    /// A request the engine cannot serve as asked.
    #[error("{0}")]
    Usage(String),
}

impl InitiatorError {
    /// True when the login was refused for authentication (status 0x0201) or CHAP failed.
    pub fn is_authentication_failure(&self) -> bool {
        match self {
            InitiatorError::Login { source, .. } => matches!(
                source,
                InitiatorLoginError::Refused {
                    status_class: 2,
                    status_detail: 1,
                    ..
                } | InitiatorLoginError::Chap(_)
                    | InitiatorLoginError::TargetAuthentication(_)
            ),
            _ => false,
        }
    }

    /// True when an attempt to reconnect makes sense: the network or the
    /// target went away, not a refusal the target will repeat.
    pub fn is_transient(&self) -> bool {
        match self {
            InitiatorError::Connect { .. }
            | InitiatorError::Io { .. }
            | InitiatorError::Closed { .. }
            | InitiatorError::Timeout { .. }
            | InitiatorError::Frame { .. }
            | InitiatorError::Protocol { .. } => true,
            // Class 3 (target error: out of resources, service unavailable) may pass.
            InitiatorError::Login { source, .. } => matches!(
                source,
                InitiatorLoginError::Refused {
                    status_class: 3,
                    ..
                } | InitiatorLoginError::Redirected {
                    status_detail: 1,
                    ..
                }
            ),
            _ => false,
        }
    }
}
