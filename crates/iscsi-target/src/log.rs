//! What the target logs, and the one entry point for configuration changes.
//!
//! The target emits [`tracing`] events and installs nothing: the `isoe`
//! binary's subscriber writes them to stderr, one line each, at the level
//! `[log] level` or `RUST_LOG` sets ([`crate::config::LogConfig`]). Each
//! event's target is the module that emits it (`isoe_target::...`), so that
//! `RUST_LOG=isoe_target::connection=debug` picks them out.
//!
//! Events carry what identifies the peer as fields, where known:
//! `initiator` (the InitiatorName, passed through
//! [`isoe_wire::name::escape_for_log`] whenever it comes from the peer),
//! `addr` (the initiator's socket address), `portal` (the address it
//! connected to), `target`, `tsih`, `cid`, `lun`.
//!
//! | level | event | emitted in |
//! |---|---|---|
//! | info | login accepted (normal or discovery; new session, added connection) | `connection::login` |
//! | debug | the login's negotiated digests and lengths | `connection::login` |
//! | warn | login refused, with the status and the rule that refused it | `connection::login` |
//! | warn | login abandoned (not done within 30 s) | `connection` |
//! | info | session reinstated: the old session of the same initiator and ISID closed | `registry` |
//! | info | logout, with its reason and response | `connection::logout_request` |
//! | info | connection closed (debug before login), whether the peer closed it, whether the session ended | `connection` |
//! | warn | connection dropped: NOP-In unanswered, write data or CmdSN gap timed out, protocol error | `connection` |
//! | warn | LOGICAL UNIT RESET, TARGET WARM/COLD RESET | `connection::task_management` |
//! | info | ABORT TASK SET, CLEAR TASK SET | `connection::task_management` |
//! | debug | ABORT TASK, and the other functions | `connection::task_management` |
//! | warn | connection refused by `[limits]` (at most one line in 10 s, with a count) | `driver` |
//! | warn | `limits.connections` lowered to the open-files limit; accept paused | `driver` |
//! | error | a worker's event loop failed | `driver::worker` |
//! | debug | connection accepted | `driver::worker` |
//! | error | store errors (`isoe_scsi::media`: at most one line per LUN and kind in 10 s) | `isoe_scsi::media` |
//! | info | configuration changed ([`config_change`]) | `isoe_target::config` |
//! | warn | a file or block LUN's file on a file system that takes no locks: served unclaimed | `file_users` |
//!
//! No event is emitted per SCSI command at info or above. Secrets never
//! reach an event: CHAP secrets live in [`isoe_wire::chap::Secret`], whose
//! `Debug` shows nothing, login failure reasons name users and rules, never
//! values, and no event records a login's text keys.

use isoe_wire::pdu::{LogoutReason, LogoutResponseCode, TmfFunction, TmfResponse};
use std::fmt;

/// The `tracing` target of configuration changes.
pub const CONFIG_TARGET: &str = "isoe_target::config";

/// Logs a change of the running target's configuration, at info: `what`
/// names what changed (a key path such as `target[0].lun[1]`, or `reload`),
/// `detail` says how (`added: memory 64 MiB`, `from /etc/isoe/target.toml`).
/// Neither may hold a secret: name CHAP users, never their secrets.
///
/// ```text
/// 2026-11-02T10:00:00.000000Z  INFO isoe_target::config: configuration changed: added: memory 64 MiB what=target[0].lun[1]
/// ```
pub fn config_change(what: &str, detail: impl fmt::Display) {
    tracing::info!(target: CONFIG_TARGET, what, "configuration changed: {detail}");
}

/// Logs a configuration change that was refused (a reload whose file has
/// an error, a change the running target cannot make), at warn; the
/// running configuration stays. Same rules as [`config_change`].
pub fn config_change_refused(what: &str, why: impl fmt::Display) {
    tracing::warn!(target: CONFIG_TARGET, what, "configuration change refused: {why}");
}

/// A login status as the log shows it, `0x0201`; its words go in the
/// message ([`isoe_wire::login::status_description`]).
pub(crate) struct LoginStatus(pub u8, pub u8);

impl fmt::Display for LoginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:02x}{:02x}", self.0, self.1)
    }
}

/// The name of a task management function (RFC 7143 §11.5.1).
pub(crate) fn tmf_name(function: TmfFunction) -> &'static str {
    match function {
        TmfFunction::AbortTask => "ABORT TASK",
        TmfFunction::AbortTaskSet => "ABORT TASK SET",
        TmfFunction::ClearAca => "CLEAR ACA",
        TmfFunction::ClearTaskSet => "CLEAR TASK SET",
        TmfFunction::LogicalUnitReset => "LOGICAL UNIT RESET",
        TmfFunction::TargetWarmReset => "TARGET WARM RESET",
        TmfFunction::TargetColdReset => "TARGET COLD RESET",
        TmfFunction::TaskReassign => "TASK REASSIGN",
        TmfFunction::Unknown(_) => "unknown function",
    }
}

/// The words of a task management response (RFC 7143 §11.6.1).
pub(crate) fn tmf_response(code: TmfResponse) -> &'static str {
    match code {
        TmfResponse::Complete => "function complete",
        TmfResponse::NoTask => "task does not exist",
        TmfResponse::NoLun => "LUN does not exist",
        TmfResponse::StillAllegiant => "task still allegiant",
        TmfResponse::ReassignUnsupported => "task reassignment not supported",
        TmfResponse::NotSupported => "function not supported",
        TmfResponse::AuthFailed => "function authorization failed",
        TmfResponse::Rejected | TmfResponse::Unknown(_) => "function rejected",
    }
}

/// The name of a logout reason code (RFC 7143 §11.14.1).
pub(crate) fn logout_reason(code: LogoutReason) -> &'static str {
    match code {
        LogoutReason::CloseSession => "close the session",
        LogoutReason::CloseConnection => "close the connection",
        LogoutReason::RemoveConnectionForRecovery => "remove the connection for recovery",
        LogoutReason::Unknown(_) => "unknown reason",
    }
}

/// The name of a logout response (RFC 7143 §11.15.1).
pub(crate) fn logout_response(code: LogoutResponseCode) -> &'static str {
    match code {
        LogoutResponseCode::Closed => "closed",
        LogoutResponseCode::CidNotFound => "CID not found",
        LogoutResponseCode::RecoveryUnsupported => "recovery not supported",
        LogoutResponseCode::CleanupFailed => "cleanup failed",
        LogoutResponseCode::Unknown(_) => "unknown response",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_names_read_as_the_rfc_says() {
        assert_eq!(LoginStatus(2, 1).to_string(), "0x0201");
        assert_eq!(LoginStatus(3, 2).to_string(), "0x0302");
        assert_eq!(tmf_name(TmfFunction::from_u8(5)), "LOGICAL UNIT RESET");
        assert_eq!(tmf_name(TmfFunction::from_u8(9)), "unknown function");
        assert_eq!(tmf_response(TmfResponse::from_u8(255)), "function rejected");
        assert_eq!(tmf_response(TmfResponse::from_u8(7)), "function rejected");
        assert_eq!(logout_reason(LogoutReason::from_u8(0)), "close the session");
        assert_eq!(logout_reason(LogoutReason::from_u8(3)), "unknown reason");
        assert_eq!(
            logout_response(LogoutResponseCode::from_u8(1)),
            "CID not found"
        );
    }
}
