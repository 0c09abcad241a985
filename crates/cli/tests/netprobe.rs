//! `isoe netprobe` as an administrator runs it: a server on one end, a
//! probe or a load on the other, over loopback; what it refuses, and how
//! it stops.

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
        Server::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_isoe"))
            .args(["netprobe", "--serve", "127.0.0.1:0"])
            .args(extra)
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
fn a_load_keeps_many_connections_busy_and_reports_both_ends_cpu() {
    let server = Server::start();
    let f = isoe_json(&[
        "netprobe",
        &server.addr,
        "--duration",
        "0.6",
        "--ramp",
        "0.2",
        "--connections",
        "6",
        "--depth",
        "2",
        "--json",
    ]);
    assert_eq!(
        (
            &f["connections"],
            &f["depth"],
            &f["request"],
            &f["response"]
        ),
        (&6.into(), &2.into(), &48.into(), &4144.into()),
        "{f}"
    );
    let exchanges = f["exchanges"].as_u64().unwrap();
    assert!(exchanges > 0, "{f}");
    assert_eq!(f["latency"]["count"].as_u64(), Some(exchanges), "{f}");
    // The server on this machine is found by its port and measured.
    assert_eq!(
        f["server_pid"].as_u64(),
        Some(u64::from(server.child.id())),
        "{f}"
    );
    assert!(
        f["server_cpu_us_per_exchange"].as_f64().unwrap() >= 0.0,
        "{f}"
    );
    assert!(
        f["client_cpu_us_per_exchange"].as_f64().unwrap() >= 0.0,
        "{f}"
    );
    // The text form names the shape and both ends.
    let out = isoe(&[
        "netprobe",
        &server.addr,
        "--duration",
        "0.3",
        "--ramp",
        "0",
        "--connections",
        "2",
        "--request",
        "4144",
        "--response",
        "48",
    ]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains("2 connections x 1 in flight")
            && out.stdout.contains("4144 B out and 48 B back")
            && out.stdout.contains("CPU-µs per exchange: client"),
        "{}",
        out.stdout
    );
    assert!(server.stop().success());
}

#[test]
fn streams_go_each_way_over_tcp_and_udp_and_report_both_ends() {
    let server = Server::start();
    let pid = u64::from(server.child.id());
    for (kind, direction) in [
        ("tcp", "client-to-server"),
        ("tcp", "server-to-client"),
        ("udp", "client-to-server"),
        ("udp", "server-to-client"),
    ] {
        let f = isoe_json(&[
            "netprobe",
            &server.addr,
            "--stream",
            kind,
            "--direction",
            direction,
            "--duration",
            "1",
            "--ramp",
            "0.2",
            "--json",
        ]);
        assert_eq!(
            (f["stream"].as_str(), f["direction"].as_str()),
            (Some(kind), Some(direction)),
            "{f}"
        );
        let bytes = f["bytes"].as_u64().unwrap();
        let seconds = f["seconds"].as_f64().unwrap();
        assert!(bytes > 0 && seconds > 0.8, "{f}");
        let mb_per_s = f["mb_per_s"].as_f64().unwrap();
        assert!(
            (mb_per_s - bytes as f64 / seconds / 1e6).abs() < 1e-6,
            "{f}"
        );
        // The server on this machine is found by its port and measured.
        assert_eq!(f["server_pid"].as_u64(), Some(pid), "{f}");
        for side in ["client", "server", "system"] {
            let per_mb = &f[format!("{side}_cpu_us_per_mb")];
            assert!(per_mb.as_f64().unwrap() >= 0.0, "{side}: {f}");
        }
        if kind == "tcp" {
            assert_eq!(f["msg"], 128 * 1024, "{f}");
            assert!(
                f["loss_pct"].is_null() && f["datagrams_sent"].is_null(),
                "{f}"
            );
        } else {
            // Loopback's MTU takes the largest datagram.
            assert_eq!(f["msg"], 65_507, "{f}");
            let sent = f["datagrams_sent"].as_u64().unwrap();
            let received = f["datagrams_received"].as_u64().unwrap();
            assert!(received > 0 && received <= sent, "{f}");
            let loss = f["loss_pct"].as_f64().unwrap();
            assert!((0.0..100.0).contains(&loss), "{f}");
        }
    }
    // The text form names the stream and both ends; --msg sets the datagram.
    let out = isoe(&[
        "netprobe",
        &server.addr,
        "--stream",
        "udp",
        "--msg",
        "1472",
        "--duration",
        "0.3",
        "--ramp",
        "0",
    ]);
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains("udp stream client-to-server")
            && out.stdout.contains("1472 B messages")
            && out.stdout.contains("datagrams received")
            && out.stdout.contains("CPU-µs per MB: client"),
        "{}",
        out.stdout
    );
    // Usage errors: a datagram too small, a stream without a duration,
    // a stream with an exchange's sizes.
    for args in [
        &["--stream", "udp", "--msg", "8", "--duration", "1"][..],
        &["--stream", "tcp"][..],
        &["--stream", "tcp", "--duration", "1", "--request", "4144"][..],
    ] {
        let mut argv = vec!["netprobe", server.addr.as_str()];
        argv.extend_from_slice(args);
        assert_eq!(exit_code(&isoe(&argv)), 2, "{args:?}");
    }
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
    // A request smaller than its header.
    let out = isoe(&["netprobe", "127.0.0.1:9", "--request", "4"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(out.stderr.contains("8-byte header"), "{}", out.stderr);
    // A load's shape without a load, and a load with a count.
    let out = isoe(&["netprobe", "127.0.0.1:9", "--connections", "4"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    let out = isoe(&["netprobe", "127.0.0.1:9", "--duration", "1", "--count", "5"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    let out = isoe(&["netprobe", "127.0.0.1:9", "--duration", "0"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(out.stderr.contains("more than 0 seconds"), "{}", out.stderr);
    // A span is the server's, and whole pages up to 64 GiB.
    let out = isoe(&["netprobe", "127.0.0.1:9", "--span", "1MiB"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    let out = isoe(&["netprobe", "--serve", "127.0.0.1:0", "--span", "1k"]);
    assert_eq!(exit_code(&out), 2, "{}", out.describe());
    assert!(
        out.stderr.contains("a span from 4KiB to 64GiB"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_server_with_a_span_answers_a_load_of_the_read_shape() {
    let server = Server::start_with(&["--span", "8MiB"]);
    let out = isoe_json(&[
        "netprobe",
        &server.addr,
        "--duration",
        "0.3",
        "--ramp",
        "0.1",
        "--connections",
        "4",
        "--depth",
        "2",
        "--response",
        "4144",
        "--json",
    ]);
    assert!(out["exchanges"].as_u64().unwrap() > 0, "{out}");
    assert!(server.stop().success());
}
