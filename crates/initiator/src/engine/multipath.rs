//! The engine's side of a multipath LU ([`crate::multipath`]): its paths
//! are sessions of this engine; their completions go to the LU, which
//! answers the caller; a path whose connection is lost gives its commands
//! to the LU at once, to go through another path, and is logged in again
//! on a thread of its own, so that the paths that serve never wait for it.
//!
//! An LU's index is `LU_INDEX_BASE` plus its place in `Engine::lus`, in the
//! space of session indices: `submit`, `execute`, `poll` and `logout` take
//! either.

use super::{connect_session, Engine, Refused, Sock, TICK};
use crate::command::{Command, Completion, TaskError};
use crate::config::SessionConfig;
use crate::error::InitiatorError;
use crate::multipath::{LuName, MultipathCore, MultipathOptions, MultipathStats, PathReport};
use crate::session::SessionCore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// The first index of a multipath LU: far above any session's.
const LU_INDEX_BASE: usize = 1 << 30;
/// A background login checks that its LU is still open this often while
/// it waits between attempts.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// The LU an index names, if it names one.
pub(super) fn lu_slot(index: usize) -> Option<usize> {
    index.checked_sub(LU_INDEX_BASE)
}

/// One multipath LU of an engine.
#[derive(Debug)]
pub(super) struct LuEntry {
    core: MultipathCore,
    /// The session of each path.
    sessions: Vec<usize>,
    /// Which LU this is, for late answers of background logins.
    generation: u64,
    /// Set when the LU closes: background logins stop.
    cancel: Arc<AtomicBool>,
}

impl LuEntry {
    pub(super) fn stop_reconnecting(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// The end of a background login of a lost path.
#[derive(Debug)]
pub(super) struct Reconnected {
    lu: usize,
    generation: u64,
    path: usize,
    result: Result<(SessionCore, Vec<Sock>, u16), String>,
}

impl Engine {
    /// Opens a multipath LU through every one of `paths`, each a session
    /// (one portal of the LU; its keepalive replaced by the options'
    /// `path_keepalive`) and the LU's number there (the LUN of the
    /// commands submitted to the LU is replaced by it). Logs in every path, reads VPD page 83h and REPORT
    /// TARGET PORT GROUPS through each, and refuses, naming them, paths
    /// that reach different LUs, paths that fail, and an LU none of whose
    /// paths serves I/O. Returns the LU's index, which `submit`, `execute`,
    /// `poll`'s completions and `logout` use as a session's.
    pub fn open_multipath(
        &mut self,
        paths: Vec<(SessionConfig, u16)>,
        options: MultipathOptions,
    ) -> Result<usize, InitiatorError> {
        if paths.is_empty() {
            return Err(InitiatorError::Usage(
                "a multipath LU needs at least one path".into(),
            ));
        }
        let labels: Vec<(String, u16)> = paths
            .iter()
            .map(|(c, lun)| {
                (
                    format!("iscsi://{}/{}/{lun}", c.portal, c.target_name),
                    *lun,
                )
            })
            .collect();
        let timeout = paths
            .iter()
            .map(|(c, _)| c.timeout)
            .max()
            .unwrap_or(Duration::from_secs(15));
        let mut sessions = Vec::with_capacity(paths.len());
        for (mut config, _) in paths {
            config.keepalive = options.path_keepalive;
            match self.login(config) {
                Ok(s) => sessions.push(s),
                Err(e) => {
                    for s in sessions {
                        let _ = self.logout(s);
                    }
                    return Err(e);
                }
            }
        }
        let slot = self
            .lus
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.lus.len());
        for (p, &s) in sessions.iter().enumerate() {
            if let Some(entry) = self.sessions[s].as_mut() {
                entry.path_of = Some((slot, p));
            }
        }
        self.lu_generation += 1;
        let entry = LuEntry {
            core: MultipathCore::new(LU_INDEX_BASE + slot, labels, options),
            sessions,
            generation: self.lu_generation,
            cancel: Arc::new(AtomicBool::new(false)),
        };
        if slot == self.lus.len() {
            self.lus.push(Some(entry));
        } else {
            self.lus[slot] = Some(entry);
        }
        match self.probe_paths(slot, Instant::now() + timeout) {
            Ok(()) => Ok(LU_INDEX_BASE + slot),
            Err(e) => {
                let _ = self.close_multipath(slot);
                Err(e)
            }
        }
    }

    /// Runs until every path of LU `slot` was probed (or `deadline`), then
    /// checks what the paths said.
    fn probe_paths(&mut self, slot: usize, deadline: Instant) -> Result<(), InitiatorError> {
        let mut done = Vec::new();
        while self.lu(slot).is_some_and(|lu| lu.core.probing()) && Instant::now() < deadline {
            self.run(&mut done, TICK, 1, None)?;
            self.stash.append(&mut done);
        }
        let lu = self.lus[slot]
            .as_mut()
            .ok_or_else(|| InitiatorError::Usage("the multipath LU went away".into()))?;
        lu.core.check_paths().map_err(InitiatorError::Multipath)
    }

    fn lu(&self, slot: usize) -> Option<&LuEntry> {
        self.lus.get(slot)?.as_ref()
    }

    /// What each path of the multipath LU `index` is now.
    pub fn multipath_paths(&self, index: usize) -> Option<Vec<PathReport>> {
        Some(self.lu(lu_slot(index)?)?.core.paths())
    }

    /// The multipath LU's counters (failovers, commands sent again, ...).
    pub fn multipath_stats(&self, index: usize) -> Option<MultipathStats> {
        Some(self.lu(lu_slot(index)?)?.core.stats())
    }

    /// The name its paths agreed on (VPD page 83h).
    pub fn multipath_identity(&self, index: usize) -> Option<LuName> {
        self.lu(lu_slot(index)?)?.core.identity().cloned()
    }

    pub(super) fn multipath_connections(&self, slot: usize) -> usize {
        let Some(lu) = self.lu(slot) else {
            return 0;
        };
        lu.sessions
            .iter()
            .filter_map(|&s| self.sessions.get(s)?.as_ref())
            .map(|e| e.socks.len())
            .filter(|&n| n > 0)
            .min()
            .unwrap_or(0)
    }

    pub(super) fn submit_multipath(
        &mut self,
        slot: usize,
        command: Command,
        token: u64,
    ) -> Result<(), Box<Refused>> {
        let Some(lu) = self.lus.get_mut(slot).and_then(Option::as_mut) else {
            return Err(Refused::new(format!("no multipath LU {slot}"), command));
        };
        lu.core
            .submit(command, token)
            .map_err(|(e, c)| Refused::new(e.to_string(), c))?;
        dispatch(lu, &mut self.sessions);
        Ok(())
    }

    /// `wait`, or less when an LU has something to do sooner.
    pub(super) fn multipath_wait(&self, now: Instant, wait: Duration) -> Duration {
        self.lus
            .iter()
            .flatten()
            .filter_map(|lu| lu.core.next_wakeup())
            .map(|t| {
                t.saturating_duration_since(now)
                    .max(Duration::from_millis(1))
            })
            .fold(wait, Duration::min)
    }

    /// Moves what the paths did to their LUs and what the LUs want to the
    /// paths: completions, lost connections, background logins that ended,
    /// the LUs' timers.
    pub(super) fn service_multipath(&mut self, out: &mut Vec<Completion>) {
        let now = Instant::now();
        self.take_reconnections(now);
        for slot in 0..self.lus.len() {
            let Some(lu) = self.lus[slot].as_mut() else {
                continue;
            };
            let mut lost = Vec::new();
            for (p, &s) in lu.sessions.iter().enumerate() {
                let Some(entry) = self.sessions.get_mut(s).and_then(Option::as_mut) else {
                    continue;
                };
                entry.core.drain_completions(&mut self.mp_completions);
                for c in self.mp_completions.drain(..) {
                    lu.core.handle_completion(p, c, now);
                }
                let Some(why) = entry.broken.take() else {
                    continue;
                };
                entry.socks.clear();
                entry.core.connections_lost();
                entry.core.drain_completions(&mut self.mp_completions);
                for c in self.mp_completions.drain(..) {
                    lu.core.handle_completion(p, c, now);
                }
                entry.core.take_commands(&mut self.mp_commands);
                lu.core.path_lost(p, &why, self.mp_commands.drain(..), now);
                lost.push(p);
            }
            lu.core.handle_tick(now);
            dispatch(lu, &mut self.sessions);
            lu.core.drain_completions(out);
            for p in lost {
                self.start_reconnect(slot, p, now);
            }
        }
    }

    /// Logs path `path` of LU `slot` in again on a thread of its own, with
    /// its session's retry delays, for as long as the LU is open (as
    /// multipathd's path checker does), unless the target refuses in a
    /// way it will repeat. Its session's `RetryPolicy::attempts` = 0 turns
    /// this off: the path is then out for good.
    fn start_reconnect(&mut self, slot: usize, path: usize, now: Instant) {
        let Some(lu) = self.lus.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let s = lu.sessions[path];
        let Some(entry) = self.sessions.get(s).and_then(Option::as_ref) else {
            return;
        };
        let policy = entry.config.retry;
        if policy.attempts == 0 {
            lu.core
                .path_failed(path, "its session does not reconnect (no attempts)", now);
            return;
        }
        let config = entry.config.clone();
        let cmd_sn = entry.core.cmd_sn();
        let tx = self.reconnected.get_or_insert_with(mpsc::channel).0.clone();
        let cancel = lu.cancel.clone();
        let generation = lu.generation;
        let spawned = thread::Builder::new()
            .name("isoe-path-login".into())
            .spawn(move || {
                let mut attempt = 0u32;
                loop {
                    if sleep_unless(&cancel, policy.delay(attempt)) {
                        return;
                    }
                    let result = match connect_session(s, &config, cmd_sn, Instant::now()) {
                        Ok(fresh) => Ok(fresh),
                        Err(e) if e.is_transient() => {
                            attempt = attempt.saturating_add(1);
                            continue;
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    let _ = tx.send(Reconnected {
                        lu: slot,
                        generation,
                        path,
                        result,
                    });
                    return;
                }
            });
        if let Err(e) = spawned {
            lu.core.path_failed(
                path,
                &format!("cannot start a thread to log it in again: {e}"),
                now,
            );
        }
    }

    /// Paths the background logins brought back (they are probed before
    /// they serve) or gave up on.
    fn take_reconnections(&mut self, now: Instant) {
        let Some((_, rx)) = &self.reconnected else {
            return;
        };
        let results: Vec<Reconnected> = rx.try_iter().collect();
        for r in results {
            let Some(lu) = self.lus.get_mut(r.lu).and_then(Option::as_mut) else {
                continue;
            };
            if lu.generation != r.generation {
                continue;
            }
            let s = lu.sessions[r.path];
            let Some(entry) = self.sessions.get_mut(s).and_then(Option::as_mut) else {
                continue;
            };
            match r.result {
                Ok((fresh, socks, tsih)) => {
                    entry.core.adopt(fresh);
                    entry.socks = socks;
                    entry.tsih = tsih;
                    entry.broken = None;
                    self.stats.reconnects += 1;
                    lu.core.path_reconnected(r.path);
                    dispatch(lu, &mut self.sessions);
                }
                Err(why) => {
                    lu.core
                        .path_failed(r.path, &format!("logging in again failed: {why}"), now)
                }
            }
        }
    }

    /// Closes LU `slot`: background logins stop, every connected path is
    /// logged out. Commands still in the LU are dropped with it.
    pub(super) fn close_multipath(&mut self, slot: usize) -> Result<(), InitiatorError> {
        let lu = self
            .lus
            .get_mut(slot)
            .and_then(Option::take)
            .ok_or_else(|| InitiatorError::Usage(format!("no multipath LU {slot}")))?;
        lu.stop_reconnecting();
        let mut first_error = None;
        for s in lu.sessions {
            let Some(entry) = self.sessions.get_mut(s).and_then(Option::as_mut) else {
                continue;
            };
            entry.path_of = None;
            if entry.socks.is_empty() || entry.broken.is_some() {
                self.sessions[s] = None;
                continue;
            }
            // Its completions were the LU's: they go with it.
            entry.core.drain_completions(&mut self.mp_completions);
            self.mp_completions.clear();
            if let Err(e) = self.logout(s) {
                first_error.get_or_insert(e);
            }
            self.stash.retain(|c| c.session != s);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Hands what the LU wants sent to its paths' sessions.
fn dispatch(lu: &mut LuEntry, sessions: &mut [Option<super::Entry>]) {
    while let Some(d) = lu.core.poll_dispatch() {
        let entry = lu
            .sessions
            .get(d.path)
            .and_then(|&s| sessions.get_mut(s))
            .and_then(Option::as_mut);
        let refused = match entry {
            Some(entry) => match entry.core.submit(d.command, d.token) {
                Ok(()) => None,
                Err((e, command)) => Some((e, command)),
            },
            None => Some((
                TaskError::SessionFailed("the path's session is gone".into()),
                d.command,
            )),
        };
        if let Some((e, command)) = refused {
            lu.core
                .dispatch_refused(d.path, d.token, command, e, Instant::now());
        }
    }
}

/// Sleeps `total` unless `cancel` is set meanwhile; true when it was.
fn sleep_unless(cancel: &AtomicBool, total: Duration) -> bool {
    let end = Instant::now() + total;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        thread::sleep((end - now).min(CANCEL_POLL));
    }
}
