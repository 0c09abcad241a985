//! The control socket against careless neighbours: clients that hang or
//! trickle, more clients than the socket serves at once, and a request
//! that is not UTF-8.

mod support;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cli::isoe;
use support::tools::ToolOutput;
use support::{Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:control";

/// How long the target gives a client to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// A configuration file whose control socket is `socket`.
fn config_text(socket: &Path) -> String {
    format!(
        "portals = [\"127.0.0.1:0\"]\n[control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n",
        socket.display()
    )
}

/// A running target whose control socket is `control.sock` beside its file.
fn target() -> (TargetConfig, Target, PathBuf) {
    let config = TargetConfig::new("");
    let socket = config.dir().join("control.sock");
    std::fs::write(config.path(), config_text(&socket)).unwrap();
    let target = Target::with_config_portals(&config, 1);
    (config, target, socket)
}

fn admin(socket: &Path, args: &[&str]) -> ToolOutput {
    let socket = socket.display().to_string();
    let mut all = vec!["admin", "--socket", socket.as_str()];
    all.extend_from_slice(args);
    isoe(&all)
}

/// The answer line the socket sends to `request`, read within `wait`;
/// None when the target closed the connection without one.
fn answer_to(socket: &Path, request: &[u8], wait: Duration) -> Option<serde_json::Value> {
    use std::io::BufRead;
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    stream.write_all(request).unwrap();
    let mut line = String::new();
    match std::io::BufReader::new(&stream).read_line(&mut line) {
        Ok(0) => None,
        Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))),
        Err(e) => panic!("no answer within {wait:?}: {e}"),
    }
}

/// A client that sends one byte of a request every `every` until stopped or
/// cut off; says when the target closed it.
struct Trickler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<Instant>>>,
}

impl Trickler {
    fn start(socket: &Path, every: Duration) -> Trickler {
        let mut stream = UnixStream::connect(socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for byte in b"{\"op\": \"list\"".iter().cycle() {
                if flag.load(Ordering::Relaxed) {
                    return None;
                }
                if stream.write_all(&[*byte]).is_err() {
                    return Some(Instant::now());
                }
                std::thread::sleep(every);
            }
            None
        });
        Trickler {
            stop,
            thread: Some(thread),
        }
    }

    /// When the target cut the client off, if it did.
    fn finish(mut self) -> Option<Instant> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).flatten()
    }
}

impl Drop for Trickler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_silent_client_and_a_trickling_one_hold_up_no_one() {
    let (_config, mut target, socket) = target();
    let _silent = UnixStream::connect(&socket).unwrap();
    let trickler = Trickler::start(&socket, Duration::from_millis(500));
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let out = admin(&socket, &["list"]);
    let took = started.elapsed();
    assert!(out.success(), "{}", out.describe());
    assert!(out.stdout.contains(TARGET), "{}", out.describe());
    assert!(
        took < Duration::from_secs(5),
        "`isoe admin list` waited {took:?} behind two hung clients"
    );
    // The trickle does not stretch its deadline: it is cut off once the
    // whole request took longer than that.
    std::thread::sleep(REQUEST_DEADLINE + Duration::from_secs(3) - started.elapsed());
    let cut = trickler.finish();
    let cut = cut.expect("the trickling client was never cut off");
    assert!(cut.duration_since(started) <= REQUEST_DEADLINE + Duration::from_secs(2));
    target.stop_cleanly();
}

#[test]
fn hung_clients_do_not_delay_the_stop() {
    let (_config, mut target, socket) = target();
    let _silent = UnixStream::connect(&socket).unwrap();
    let _trickler = Trickler::start(&socket, Duration::from_millis(200));
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let status = target.stop().expect("the target ran");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}: {}", target.output());
    assert!(took < Duration::from_secs(5), "the stop took {took:?}");
    eprintln!("SIGTERM to exit with a silent and a trickling client: {took:?}");
    assert!(!socket.exists());
}

#[test]
fn clients_beyond_the_bound_are_refused_at_once() {
    let (_config, mut target, socket) = target();
    let silent: Vec<UnixStream> = (0..8)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let answer = answer_to(&socket, b"{\"op\": \"list\"}\n", Duration::from_secs(3))
        .expect("a client beyond the bound gets an answer");
    assert_eq!(answer["ok"], false, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("8 clients"), "{error}");
    drop(silent);
    // The silent clients' slots are free again once they are gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = admin(&socket, &["list"]);
        if out.success() {
            break;
        }
        assert!(Instant::now() < deadline, "{}", out.describe());
        std::thread::sleep(Duration::from_millis(100));
    }
    target.stop_cleanly();
}

#[test]
fn a_request_that_is_not_utf8_gets_an_error_that_says_so() {
    let (_config, mut target, socket) = target();
    let answer = answer_to(&socket, b"{\"op\": \"li\xffst\"}\n", Duration::from_secs(5))
        .expect("the target answers a request that is not UTF-8");
    assert_eq!(answer["ok"], false, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("not UTF-8"), "{error}");
    // The socket still serves.
    assert!(admin(&socket, &["list"]).success());
    target.stop_cleanly();
}
