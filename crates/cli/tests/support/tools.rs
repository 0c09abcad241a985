//! libiscsi's command-line tools (Debian package libiscsi-bin), run with a
//! timeout so that a hung tool fails its test instead of the whole run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The output of a finished tool.
#[derive(Debug)]
pub struct ToolOutput {
    /// Exit status; None if the tool was killed at the timeout.
    pub status: Option<ExitStatus>,
    /// Standard output (as UTF-8, lossily).
    pub stdout: String,
    /// Standard output, byte for byte.
    pub stdout_bytes: Vec<u8>,
    /// Standard error.
    pub stderr: String,
}

impl ToolOutput {
    /// True when the tool exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Both streams, for assertion messages.
    pub fn describe(&self) -> String {
        let status = match self.status {
            Some(s) => s.to_string(),
            None => "killed at the timeout".into(),
        };
        format!(
            "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }
}

/// The path of `name` in PATH; panics with how to install it if missing.
pub fn require(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{name}` is not installed (not found in PATH). It comes with Debian's libiscsi-bin package: \
         `apt-get install -y libiscsi-bin` (.ci/run installs it)."
    );
}

/// Runs `name args...` and waits at most `timeout`, killing it then.
pub fn run(name: &str, args: &[&str], timeout: Duration) -> ToolOutput {
    run_program(&require(name), args, &[], timeout)
}

/// Runs `program args...` with `env` added to the environment, and waits at
/// most `timeout`, killing it then.
pub fn run_program(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> ToolOutput {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stdout_bytes = out_reader.join().unwrap_or_default();
    ToolOutput {
        status,
        stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
        stdout_bytes,
        stderr: err_reader.join().unwrap_or_default(),
    }
}
