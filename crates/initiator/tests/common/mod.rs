//! What the initiator's tests against isoe's target share.
#![allow(dead_code)] // each test file uses a different part of it

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// A TCP relay that can hold and cut every connection it carries.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let hold = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (cut2, hold2, gen2) = (cut.clone(), hold.clone(), generation.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let my_gen = gen2.load(Ordering::SeqCst);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let (cut, hold, gen) = (cut2.clone(), hold2.clone(), gen2.clone());
                    from.set_read_timeout(Some(Duration::from_millis(20)))
                        .unwrap();
                    thread::spawn(move || {
                        let mut buf = vec![0u8; 1 << 16];
                        loop {
                            if cut.load(Ordering::SeqCst) && gen.load(Ordering::SeqCst) == my_gen {
                                let _ = from.shutdown(std::net::Shutdown::Both);
                                let _ = to.shutdown(std::net::Shutdown::Both);
                                return;
                            }
                            if hold.load(Ordering::SeqCst) {
                                thread::sleep(Duration::from_millis(1));
                                continue;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => {
                                    let _ = to.shutdown(std::net::Shutdown::Write);
                                    return;
                                }
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        return;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => return,
                            }
                        }
                    });
                }
            }
        });
        Proxy {
            addr,
            cut,
            hold,
            generation,
        }
    }

    /// Stops (or restarts) forwarding, so that what is in flight stays there.
    pub fn hold(&self, on: bool) {
        self.hold.store(on, Ordering::SeqCst);
    }

    /// Cuts the current connections; later ones pass.
    pub fn cut_now(&self) {
        self.cut.store(true, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(100));
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.cut.store(false, Ordering::SeqCst);
    }
}
