//! The control socket against hostile or careless neighbours: a socket path
//! taken first by another user, clients that hang or trickle, more clients
//! than the socket serves at once, a request that is not UTF-8, and two
//! targets configured with one path. `isoe admin` must send nothing to a
//! socket another user answers on, and say which target it talks to.
//!
//! The test of a squatting user runs its squatter as uid 65534 (nobody),
//! which needs root; without root it skips and says so.

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cli::isoe;
use support::tools::ToolOutput;
use support::{Target, TargetConfig};

const TARGET: &str = "iqn.2026-11.io.isoe:control";

/// An unprivileged uid (nobody) for the squatter.
const OTHER_UID: u32 = 65534;

/// How long the target gives a client to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Clients whose requests the target reads at once.
const ARRIVING_MAX: usize = 8;

/// Requests the target carries out at once.
const CLIENTS_MAX: usize = 8;

/// A configuration file whose control socket is `socket`.
fn config_text(socket: &Path) -> String {
    format!(
        "portals = [\"127.0.0.1:0\"]\n[control]\nsocket = \"{}\"\n\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n",
        socket.display()
    )
}

/// A configuration in its own directory whose control socket is `socket`.
fn config_with_socket(socket: &Path) -> TargetConfig {
    TargetConfig::new(&config_text(socket))
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
    // A refusal may come, and the socket close, before the request is
    // all sent: the answer is still there to read.
    let _ = stream.write_all(request);
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

/// Binds `socket` as uid `OTHER_UID` and answers every request as a target
/// would, keeping what it was sent in `record`.
const SQUATTER: &str = r#"
import socket, sys
path, record = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    data = b""
    try:
        while not data.endswith(b"\n"):
            d = c.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    with open(record, "ab") as f:
        f.write(data)
    try:
        c.sendall(b'{"ok": true, "changes": ["CHAP of the target set"]}\n')
    except OSError:
        pass
    c.close()
"#;

/// The squatter, running as another user, once its socket is bound.
fn squatter(dir: &Path, socket: &Path, record: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let script = dir.join("squatter.py");
    std::fs::write(&script, SQUATTER).unwrap();
    let mut child = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(socket)
        .arg(record)
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let mut ready = [0u8; 6];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .expect("the squatter binds its socket");
    child
}

/// A directory in /tmp every user may write (mode 0777), as a careless
/// socket directory would be.
fn world_writable_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("isoe-open-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn admin_sends_nothing_to_a_socket_another_user_answers_on() {
    if !is_root() {
        eprintln!("SKIPPED: running a squatter as another user needs root");
        return;
    }
    let dir = world_writable_dir();
    let socket = dir.path().join("isoe.sock");
    let record = dir.path().join("received");
    let mut squatter = squatter(dir.path(), &socket, &record);
    let mut admin = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["admin", "--socket"])
        .arg(&socket)
        .args(["chap", "set", TARGET, "user=alice", "secret=-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    admin
        .stdin
        .take()
        .unwrap()
        .write_all(b"the-new-secret-1234\n")
        .unwrap();
    let out = admin.wait_with_output().unwrap();
    let _ = squatter.kill();
    let _ = squatter.wait();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let received = std::fs::read(&record).unwrap_or_default();
    assert!(
        received.is_empty(),
        "the squatter was sent {:?}",
        String::from_utf8_lossy(&received)
    );
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("CHAP of the target set"), "{stdout}");
    assert!(
        stderr.contains(&format!("uid {OTHER_UID}"))
            && stderr.contains(&format!("pid {}", squatter.id())),
        "the refusal names who answered: {stderr}"
    );
}

#[test]
fn a_socket_directory_other_users_can_write_is_refused_at_start() {
    let dir = world_writable_dir();
    let socket = dir.path().join("isoe.sock");
    let config = config_with_socket(&socket);
    let mut child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["target", "--config"])
        .arg(config.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the target served with its socket in a world-writable directory:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("{} is writable by", dir.path().display())),
        "{said}"
    );
    assert!(!said.contains("listening on"), "a portal was bound: {said}");
    assert!(!socket.exists());
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

/// The line `stream` has been sent, read within a few seconds; None when
/// it was closed without one.
fn line_of(stream: &UnixStream) -> Option<serde_json::Value> {
    use std::io::BufRead;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut line = String::new();
    match std::io::BufReader::new(stream).read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))),
    }
}

#[test]
fn one_silent_client_too_many_closes_the_oldest_as_busy() {
    let (_config, mut target, socket) = target();
    let silent: Vec<UnixStream> = (0..ARRIVING_MAX)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // One more, which sends its request at once, is served; the oldest
    // silent one is told the socket is busy.
    let answer = answer_to(&socket, b"{\"op\": \"list\"}\n", Duration::from_secs(5))
        .expect("the newest client gets an answer");
    assert_eq!(answer["ok"], true, "{answer}");
    let oldest = line_of(&silent[0]).expect("the oldest silent client is answered");
    assert_eq!(oldest["ok"], false, "{oldest}");
    assert_eq!(oldest["busy"], true, "{oldest}");
    let error = oldest["error"].as_str().unwrap();
    assert!(error.contains("busy"), "{error}");
    target.stop_cleanly();
}

/// A running target whose configuration file is over 1 MiB (a comment),
/// so that its `show` answer is more than a socket's buffer holds.
fn target_with_a_large_file() -> (TargetConfig, Target, PathBuf) {
    let config = TargetConfig::new("");
    let socket = config.dir().join("control.sock");
    let comment = format!("# {}\n", "x".repeat(1 << 20));
    std::fs::write(config.path(), comment + &config_text(&socket)).unwrap();
    let target = Target::with_config_portals(&config, 1);
    (config, target, socket)
}

#[test]
fn a_socket_busy_beyond_the_wait_is_a_clear_error() {
    let (_config, mut target, socket) = target_with_a_large_file();
    // Every serving thread waits for an answer its client does not take.
    let hogs: Vec<UnixStream> = (0..CLIENTS_MAX)
        .map(|_| {
            let mut s = UnixStream::connect(&socket).unwrap();
            s.write_all(b"{\"op\": \"show\"}\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let out = admin(&socket, &["--wait", "1", "list"]);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(2),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr.contains("stayed busy for 1."),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr.contains("nothing was done"),
        "{}",
        out.describe()
    );
    let out = admin(&socket, &["--wait", "0", "list"]);
    assert!(out.stderr.contains("tried once"), "{}", out.describe());
    // Once the hogs are gone, the socket serves again, within the wait.
    drop(hogs);
    let out = admin(&socket, &["list"]);
    assert!(out.success(), "{}", out.describe());
    target.stop_cleanly();
}

#[test]
fn a_wait_that_is_not_a_number_of_seconds_is_refused() {
    for wait in ["x", "-1", "1.5", "3601", ""] {
        let wait = format!("--wait={wait}");
        let out = isoe(&["admin", "--socket", "/nonexistent/isoe.sock", &wait, "list"]);
        assert_eq!(
            out.status.and_then(|s| s.code()),
            Some(2),
            "{}",
            out.describe()
        );
        assert!(out.stderr.contains("--wait"), "{}", out.describe());
        assert!(!out.stderr.contains("panicked"), "{}", out.describe());
    }
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

#[test]
fn admin_says_which_target_it_talks_to() {
    let (config, mut target, socket) = target();
    let pid = target.pid().unwrap();
    let file = std::fs::canonicalize(config.path()).unwrap();
    let out = admin(&socket, &["list"]);
    assert!(out.success(), "{}", out.describe());
    let said = format!("target pid {pid} (config {})", file.display());
    assert!(out.stderr.contains(&said), "{}", out.describe());
    // --json: stdout stays one JSON object, which names the target too.
    let out = admin(&socket, &["--json", "list"]);
    let reply: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}", out.describe()));
    assert_eq!(reply["server"]["pid"], pid, "{reply}");
    assert_eq!(
        reply["server"]["config_file"],
        file.display().to_string(),
        "{reply}"
    );
    assert!(out.stderr.contains(&said), "{}", out.describe());
    target.stop_cleanly();
}

#[test]
fn a_second_target_on_a_socket_in_use_says_loudly_whose_it_is() {
    let (config, mut first, socket) = target();
    let second_config = config_with_socket(&socket);
    let mut second = Target::with_config_portals(&second_config, 1);
    let said = format!(
        "no control socket: {} is in use by another running target (pid {}, config {})",
        socket.display(),
        first.pid().unwrap(),
        std::fs::canonicalize(config.path()).unwrap().display()
    );
    // In the log, and on stdout with the report.
    let deadline = Instant::now() + Duration::from_secs(10);
    let on_stdout = |output: &str| {
        output
            .lines()
            .any(|l| l.starts_with("isoe target: ") && l.contains(&said))
    };
    while !(second
        .output()
        .contains(&format!("ERROR isoe::target_cmd: {said}"))
        && on_stdout(&second.output()))
    {
        assert!(
            Instant::now() < deadline,
            "expected {said:?} in the log and on stdout:\n{}",
            second.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The socket is still the first one's; the second's stop leaves it.
    second.stop_cleanly();
    let out = admin(&socket, &["list"]);
    assert!(
        out.stderr
            .contains(&format!("target pid {}", first.pid().unwrap())),
        "{}",
        out.describe()
    );
    first.stop_cleanly();
}

/// Runs `args` of `isoe admin` from `count` threads at once, the `n`th
/// with `{n}` in its arguments replaced by `n` (1-based); the outputs of
/// those that failed.
fn admin_all_at_once(socket: &Path, count: u16, args: &[&str]) -> Vec<String> {
    let barrier = Arc::new(std::sync::Barrier::new(usize::from(count)));
    let threads: Vec<_> = (1..=count)
        .map(|n| {
            let socket = socket.to_path_buf();
            let barrier = Arc::clone(&barrier);
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("{n}", &n.to_string()))
                .collect();
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                barrier.wait();
                admin(&socket, &args)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|out| !out.success())
        .map(|out| out.describe())
        .collect()
}

#[test]
fn fifty_concurrent_changes_are_all_served() {
    let (config, mut target, socket) = target();
    let failed = admin_all_at_once(&socket, 50, &["lun", "add", TARGET, "{n}", "memory=1MiB"]);
    assert!(
        failed.is_empty(),
        "{} of 50 concurrent `lun add`s failed; the first:\n{}",
        failed.len(),
        failed[0]
    );
    let text = std::fs::read_to_string(config.path()).unwrap();
    assert_eq!(text.matches("[[target.lun]]").count(), 51, "{text}");
    let failed = admin_all_at_once(&socket, 50, &["lun", "remove", TARGET, "{n}"]);
    assert!(
        failed.is_empty(),
        "{} of 50 concurrent `lun remove`s failed; the first:\n{}",
        failed.len(),
        failed[0]
    );
    let text = std::fs::read_to_string(config.path()).unwrap();
    assert_eq!(text.matches("[[target.lun]]").count(), 1, "{text}");
    target.stop_cleanly();
}

/// How many threads process `pid` runs.
fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

#[test]
fn a_dozen_slow_clients_lock_no_one_out() {
    let (_config, mut target, socket) = target();
    let threads_before = threads_of(target.pid().unwrap());
    let _silent: Vec<UnixStream> = (0..6)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let tricklers: Vec<Trickler> = (0..6)
        .map(|_| Trickler::start(&socket, Duration::from_millis(200)))
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    // They are read by the thread that accepts them: none holds a
    // serving thread (one may be ending).
    let threads = threads_of(target.pid().unwrap());
    assert!(
        threads <= threads_before + 1,
        "{threads_before} threads, then {threads}"
    );
    let out = admin(&socket, &["list"]);
    assert!(out.success(), "{}", out.describe());
    assert!(out.stdout.contains(TARGET), "{}", out.describe());
    let out = admin(&socket, &["lun", "add", TARGET, "1", "memory=1MiB"]);
    assert!(out.success(), "{}", out.describe());
    // Each trickle is cut at the whole request's deadline.
    std::thread::sleep(
        (REQUEST_DEADLINE + Duration::from_secs(3)).saturating_sub(started.elapsed()),
    );
    for trickler in tricklers {
        let cut = trickler
            .finish()
            .expect("a trickling client was never cut off");
        assert!(cut.duration_since(started) <= REQUEST_DEADLINE + Duration::from_secs(2));
    }
    target.stop_cleanly();
}
