//! A session that failed for good, logged in again on request.
//!
//! Once reconnection gives up (its `RetryPolicy`, the replacement timeout
//! of a block device), the session refuses commands: they fail at once, as
//! open-iscsi fails I/O past `replacement_timeout`. open-iscsi keeps
//! trying to log in meanwhile, and so may a caller here: each
//! [`Engine::relogin`] starts one login (ERL 0 reinstatement, as the
//! reconnection's) on a thread of its own, and a later wait of the engine
//! takes its outcome. The session takes commands again once it is back.
//! At most one login per session is under way, so the threads are bounded
//! by the sessions.

use super::{connect_session, Engine, Sock};
use crate::error::InitiatorError;
use crate::session::SessionCore;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

/// The end of a background login of a failed session.
#[derive(Debug)]
pub(super) struct Relogin {
    session: usize,
    result: Result<(SessionCore, Vec<Sock>, u16), String>,
}

/// What [`Engine::relogin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloginStart {
    /// A login started; a later wait takes its outcome.
    Started,
    /// One is under way already.
    UnderWay,
    /// The session has not failed: nothing to do.
    Alive,
}

impl Engine {
    /// Why session `session` failed for good (reconnection gave up), if it
    /// did; None for a live session, a multipath LU or no session.
    pub fn failure(&self, session: usize) -> Option<&str> {
        self.sessions.get(session)?.as_ref()?.core.failure()
    }

    /// The error of the last background login of `session` that failed.
    pub fn relogin_error(&self, session: usize) -> Option<&str> {
        self.sessions
            .get(session)?
            .as_ref()?
            .relogin_error
            .as_deref()
    }

    /// Starts one login of failed session `session` in the background
    /// (see the module's doc). Not for a path of a multipath LU, whose
    /// engine logs it in again by itself.
    pub fn relogin(&mut self, session: usize) -> Result<ReloginStart, InitiatorError> {
        let tx = self.relogins.get_or_insert_with(mpsc::channel).0.clone();
        let entry = self.entry(session)?;
        if entry.path_of.is_some() {
            return Err(InitiatorError::Usage(
                "a path of a multipath LU is logged in again by its LU".into(),
            ));
        }
        if entry.core.failure().is_none() {
            return Ok(ReloginStart::Alive);
        }
        if entry.relogging {
            return Ok(ReloginStart::UnderWay);
        }
        let config = entry.config.clone();
        let cmd_sn = entry.core.cmd_sn();
        thread::Builder::new()
            .name("isoe-relogin".into())
            .spawn(move || {
                let result = connect_session(session, &config, cmd_sn, Instant::now())
                    .map_err(|e| e.to_string());
                // The engine may be gone: nobody to tell.
                let _ = tx.send(Relogin { session, result });
            })
            .map_err(|e| {
                InitiatorError::Usage(format!("cannot start a thread to log in again: {e}"))
            })?;
        entry.relogging = true;
        Ok(ReloginStart::Started)
    }

    /// Sessions the background logins brought back, or did not.
    pub(super) fn take_relogins(&mut self) {
        let Some((_, rx)) = &self.relogins else {
            return;
        };
        let results: Vec<Relogin> = rx.try_iter().collect();
        for r in results {
            let Some(entry) = self.sessions.get_mut(r.session).and_then(Option::as_mut) else {
                continue;
            };
            // A session closed meanwhile, its index taken by another.
            if !entry.relogging || entry.core.failure().is_none() {
                continue;
            }
            entry.relogging = false;
            match r.result {
                Ok((fresh, socks, tsih)) => {
                    entry.core.revive(fresh);
                    entry.socks = socks;
                    entry.tsih = tsih;
                    entry.broken = None;
                    entry.relogin_error = None;
                    self.stats.reconnects += 1;
                    session_log!(
                        info,
                        entry.config,
                        "session logged in again; it takes commands again"
                    );
                }
                Err(why) => {
                    session_log!(
                        info,
                        entry.config,
                        "logging the failed session in again: {why}"
                    );
                    entry.relogin_error = Some(why);
                }
            }
        }
    }
}
