//! `isoe netprobe` as an administrator runs it: a server on one end, a
//! probe on the other, over loopback; what it refuses, and how it stops.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::cli::{exit_code, isoe, isoe_json};

/// A `isoe netprobe --serve` on a free loopback port, ended by SIGTERM
/// (by its PID) when dropped.
struct Server {
    child: std::process::Child,
    addr: String,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_isoe"))
            .args(["netprobe", "--serve", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("isoe netprobe: serving on ")
            .unwrap_or_else(|| panic!("first line: {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on the PID of a child this test started and has
        // not reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    /// A test that failed early still ends its server.
    fn drop(&mut self) {
        self.terminate();
    }
}

#[test]
fn a_probe_times_each_exchange_and_the_server_stops_on_sigterm() {
    let server = Server::start();
    let s = isoe_json(&[
        "netprobe",
        &server.addr,
        "--request",
        "4144",
        "--response",
        "48",
        "--count",
        "300",
        "--warmup",
        "10",
        "--json",
    ]);
    assert_eq!(s["count"], 300, "{s}");
    let (min, p50, max) = (
        s["min"].as_f64().unwrap(),
        s["p50"].as_f64().unwrap(),
        s["max"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= p50 && p50 <= max, "{s}");
    // The text form says what was measured.
    let out = isoe(&["netprobe", &server.addr, "--count", "20"]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains("20 exchanges with") && out.stdout.contains("48 B out and 4144 B back"),
        "{}",
        out.stdout
    );
    assert!(server.stop().success());
}

#[test]
fn nothing_listening_is_an_error_naming_the_address_and_bad_sizes_are_usage_errors() {
    // A port that was free a moment ago: bound, then released.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = isoe(&[
        "netprobe",
        &free.to_string(),
        "--count",
        "1",
        "--timeout",
        "2",
    ]);
    assert_eq!(exit_code(&out), 1, "{}", out.describe());
    assert!(out.stderr.contains(&free.to_string()), "{}", out.stderr);
    let out = isoe(&["netprobe", "127.0.0.1:9", "--request", "17MiB"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(out.stderr.contains("at most 16MiB"), "{}", out.stderr);
    let out = isoe(&["netprobe"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    let out = isoe(&["netprobe", "127.0.0.1:9", "--serve", "127.0.0.1:0"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
}
