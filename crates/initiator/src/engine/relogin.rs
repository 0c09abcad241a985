//! Sessions logged in again in the background: one whose connections were
//! lost, reinstated within its retry policy ([`Engine::reinstate`]), and
//! one that failed for good, on request ([`Engine::relogin`]).
//!
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

/// The end of a background login of a failed session, or of the
/// reinstatement of a session whose connections were lost.
#[derive(Debug)]
pub(super) struct Relogin {
    session: usize,
    /// [`super::Entry::serial`] of the session it is for.
    serial: u64,
    result: Result<(SessionCore, Vec<Sock>, u16), String>,
    /// A reinstatement's ([`Engine::reinstate`]), not a relogin's.
    reinstatement: bool,
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
        let serial = entry.serial;
        thread::Builder::new()
            .name("isoe-relogin".into())
            .spawn(move || {
                let result = connect_session(session, &config, cmd_sn, Instant::now())
                    .map_err(|e| e.to_string());
                // The engine may be gone: nobody to tell.
                let _ = tx.send(Relogin {
                    session,
                    serial,
                    result,
                    reinstatement: false,
                });
            })
            .map_err(|e| {
                InitiatorError::Usage(format!("cannot start a thread to log in again: {e}"))
            })?;
        entry.relogging = true;
        Ok(ReloginStart::Started)
    }

    /// True while session `session`'s lost connections are being logged
    /// in again (its commands wait).
    pub fn reinstating(&self, session: usize) -> bool {
        self.sessions
            .get(session)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.reinstating)
    }

    /// Fails session `session` now if it is being reinstated (its login
    /// goes on and is dropped when it ends): its waiting commands fail,
    /// as they would have once the attempts ran out. For a caller that is
    /// going away (a device being detached while its target is away).
    /// True when it was being reinstated.
    pub fn give_up(&mut self, session: usize, why: &str) -> bool {
        match self.sessions.get_mut(session).and_then(Option::as_mut) {
            Some(entry) if entry.reinstating => {
                session_log!(warn, entry.config, "no longer logging in again: {why}");
                // Its thread's answer, when it comes, is dropped.
                entry.reinstating = false;
                entry.core.fail(why);
                true
            }
            _ => false,
        }
    }

    /// Logs session `session`, whose connections were lost (`why`), in
    /// again on a thread of its own: up to its retry policy's attempts,
    /// with its delays, each an ERL 0 reinstatement. A later wait takes
    /// the outcome: the session back with its commands sent again, or
    /// failed for good.
    pub(super) fn reinstate(&mut self, session: usize, why: String) {
        let tx = self.relogins.get_or_insert_with(mpsc::channel).0.clone();
        let Some(entry) = self.sessions.get_mut(session).and_then(Option::as_mut) else {
            return;
        };
        let policy = entry.config.retry;
        let waiting = entry.core.tasks_in_flight();
        session_log!(
            warn,
            entry.config,
            "connection lost ({why}); logging in again ({} attempt(s)), {waiting} command(s) waiting",
            policy.attempts
        );
        let config = entry.config.clone();
        let cmd_sn = entry.core.cmd_sn();
        let serial = entry.serial;
        let spawned = thread::Builder::new()
            .name("isoe-reinstate".into())
            .spawn(move || {
                let started = Instant::now();
                let mut last = why.clone();
                let mut attempts = 0;
                let mut result = None;
                while attempts < policy.attempts {
                    thread::sleep(policy.delay(attempts));
                    attempts += 1;
                    match connect_session(session, &config, cmd_sn, Instant::now()) {
                        Ok(fresh) => {
                            session_log!(
                                info,
                                config,
                                "session reinstated after {attempts} attempt(s) in {:.1} s; \
                                 {waiting} command(s) sent again",
                                started.elapsed().as_secs_f64()
                            );
                            result = Some(Ok(fresh));
                            break;
                        }
                        Err(e) => {
                            let transient = e.is_transient();
                            last = e.to_string();
                            session_log!(debug, config, "login attempt {attempts} failed: {last}");
                            if !transient {
                                break;
                            }
                        }
                    }
                }
                let result = result.unwrap_or_else(|| {
                    let reason = format!(
                        "connection lost ({why}); {attempts} reconnection attempt(s) failed, \
                         the last with: {last}"
                    );
                    session_log!(
                        error,
                        config,
                        "session failed after {:.1} s: {reason}; {waiting} command(s) fail",
                        started.elapsed().as_secs_f64()
                    );
                    Err(reason)
                });
                // The engine may be gone: nobody to tell.
                let _ = tx.send(Relogin {
                    session,
                    serial,
                    result,
                    reinstatement: true,
                });
            });
        match spawned {
            Ok(_) => entry.reinstating = true,
            Err(e) => entry
                .core
                .fail(&format!("cannot start a thread to log in again: {e}")),
        }
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
            if entry.serial != r.serial {
                continue;
            }
            if r.reinstatement {
                if !entry.reinstating {
                    continue;
                }
                entry.reinstating = false;
                match r.result {
                    // Failed meanwhile (logged out): the fresh login goes.
                    Ok(_) if entry.core.failure().is_some() => {}
                    Ok((fresh, socks, tsih)) => {
                        entry.core.adopt(fresh);
                        entry.socks = socks;
                        entry.tsih = tsih;
                        self.stats.reconnects += 1;
                    }
                    Err(reason) => entry.core.fail(&reason),
                }
                continue;
            }
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
