//! A fixed set of threads for store work that may block for long (a
//! SANITIZE's overwrite): workers hand it over ([`crate::connection::Action::Run`])
//! and get the completion back in their mailbox, so that no event loop
//! waits on a disk.

use super::mailbox::{Mailbox, Msg};
use crate::connection::Work;
use isoe_sync::MutexExt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// Work waiting for a thread at most; beyond it, the worker runs the work
/// itself (its other connections wait, but memory stays bounded).
const QUEUED_MAX: usize = 256;

/// One piece of work and where its completion goes.
pub(crate) struct Job {
    pub(crate) worker: usize,
    pub(crate) serial: u64,
    pub(crate) token: u64,
    pub(crate) work: Work,
}

/// The threads and their queue.
pub(crate) struct IoPool {
    sender: Mutex<Option<SyncSender<Job>>>,
}

impl IoPool {
    /// Starts `threads` threads that post completions to `mailboxes`.
    pub(crate) fn start(threads: usize, mailboxes: Vec<Arc<Mailbox>>) -> IoPool {
        let (sender, receiver) = sync_channel::<Job>(QUEUED_MAX);
        let receiver = Arc::new(Mutex::new(receiver));
        let mailboxes: Arc<[Arc<Mailbox>]> = mailboxes.into();
        for _ in 0..threads.max(1) {
            let receiver = Arc::clone(&receiver);
            let mailboxes = Arc::clone(&mailboxes);
            // A thread that cannot be had leaves the others (or, with none,
            // the workers running the work themselves).
            let _ = std::thread::Builder::new()
                .name("isoe-io".into())
                .spawn(move || serve(&receiver, &mailboxes));
        }
        IoPool {
            sender: Mutex::new(Some(sender)),
        }
    }

    /// Queues `job`; gives it back when the queue is full or the pool stopped.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let sender = self.sender.lock_unpoisoned();
        let Some(sender) = sender.as_ref() else {
            return Err(job);
        };
        sender.try_send(job).map_err(|e| match e {
            TrySendError::Full(job) | TrySendError::Disconnected(job) => job,
        })
    }

    /// No more work is taken; threads end when the queue is empty (work
    /// under way runs to its end: a sanitize survives the target's stop as
    /// it survives resets).
    pub(crate) fn stop(&self) {
        self.sender.lock_unpoisoned().take();
    }
}

fn serve(receiver: &Mutex<Receiver<Job>>, mailboxes: &[Arc<Mailbox>]) {
    loop {
        let job = {
            let receiver = receiver.lock_unpoisoned();
            receiver.recv()
        };
        let Ok(job) = job else { return };
        let finished = job.work.run();
        if let Some(mailbox) = mailboxes.get(job.worker) {
            mailbox.post(Msg::Done {
                serial: job.serial,
                token: job.token,
                finished,
            });
        }
    }
}
