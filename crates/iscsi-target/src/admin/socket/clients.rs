//! The control socket's clients served at once, a thread each, at most a
//! fixed number: a client that hangs holds one thread, not the socket, and
//! stopping wakes every one of them at once.

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The clients being served.
pub struct Clients {
    max: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    running: HashMap<u64, Running>,
    stopping: bool,
}

struct Running {
    /// The client's stream, another handle of it, to shut it down.
    stream: UnixStream,
    thread: Option<JoinHandle<()>>,
}

impl Clients {
    /// Room for `max` clients at once.
    pub fn new(max: usize) -> Arc<Clients> {
        Arc::new(Clients {
            max,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock_unpoisoned()
    }

    /// Serves `stream` with `serve` on a thread of its own; gives the
    /// stream back when `max` clients are served already or the set is
    /// stopping. A thread the OS refuses drops the stream: the client
    /// sees its connection closed.
    pub fn spawn(
        self: &Arc<Self>,
        stream: UnixStream,
        serve: impl FnOnce(&UnixStream) + Send + 'static,
    ) -> Result<(), UnixStream> {
        let mut state = self.state();
        if state.stopping || state.running.len() >= self.max {
            return Err(stream);
        }
        let Ok(handle) = stream.try_clone() else {
            return Err(stream);
        };
        let id = state.next_id;
        state.next_id += 1;
        state.running.insert(
            id,
            Running {
                stream: handle,
                thread: None,
            },
        );
        let clients = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("isoe-control-client".into())
            .spawn(move || {
                serve(&stream);
                // Done: the slot is free (the handle left detaches this
                // thread, which ends now).
                clients.state().running.remove(&id);
            });
        match spawned {
            Ok(thread) => {
                if let Some(running) = state.running.get_mut(&id) {
                    running.thread = Some(thread);
                }
            }
            Err(_) => {
                state.running.remove(&id);
            }
        }
        Ok(())
    }

    /// How many clients are being served.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.state().running.len()
    }

    /// Shuts every client's stream down, so that a read or write it waits
    /// in returns at once, and waits for their threads; no client is taken
    /// after.
    pub fn stop(&self) {
        let running: Vec<Running> = {
            let mut state = self.state();
            state.stopping = true;
            state.running.drain().map(|(_, r)| r).collect()
        };
        for r in &running {
            let _ = r.stream.shutdown(std::net::Shutdown::Both);
        }
        for r in running {
            if let Some(thread) = r.thread {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::{Duration, Instant};

    #[test]
    fn at_most_max_clients_and_stop_wakes_the_hung_ones() {
        let clients = Clients::new(2);
        let mut peers = Vec::new();
        for _ in 0..2 {
            let (ours, theirs) = UnixStream::pair().unwrap();
            peers.push(theirs);
            // A client that never sends: the read waits until stop.
            let served = clients.spawn(ours, |s| {
                let _ = (&*s).read(&mut [0u8; 1]);
            });
            assert!(served.is_ok());
        }
        let (third, _peer) = UnixStream::pair().unwrap();
        assert!(clients.spawn(third, |_| {}).is_err(), "a third is refused");
        assert_eq!(clients.len(), 2);
        let started = Instant::now();
        clients.stop();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(clients.len(), 0);
        let (late, _peer) = UnixStream::pair().unwrap();
        assert!(clients.spawn(late, |_| {}).is_err(), "none after stop");
    }

    #[test]
    fn a_finished_client_frees_its_slot() {
        let clients = Clients::new(1);
        let (ours, _theirs) = UnixStream::pair().unwrap();
        assert!(clients.spawn(ours, |_| {}).is_ok());
        let deadline = Instant::now() + Duration::from_secs(5);
        while clients.len() > 0 {
            assert!(Instant::now() < deadline, "the slot was never freed");
            std::thread::sleep(Duration::from_millis(5));
        }
        let (next, _theirs) = UnixStream::pair().unwrap();
        assert!(clients.spawn(next, |_| {}).is_ok());
        clients.stop();
    }
}
