//! Where the lab runs a program of a test bed: this machine, or a machine
//! reached over SSH ([`crate::ssh`]). Both offer the same operations, so a
//! test bed's code does not ask which it has: run a command and read what
//! it printed, read a file (`/proc/stat`), write a file (a target's
//! configuration), and start a program in the background that the lab ends
//! later by its PID on that host ([`Running`]).
//!
//! The namespaces of the single-machine topologies stay with
//! [`crate::topology::Topology::command`]; a [`Host`] is a whole machine.

pub use crate::ssh::Ending;
use crate::ssh::{remote_line, HostError, Remote, SshHost};
use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A machine of a test bed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// The machine `isoe lab` runs on.
    Local,
    /// A machine reached over SSH.
    Ssh(SshHost),
}

/// What [`Host::Local`] is called in messages.
pub const LOCAL_NAME: &str = "this machine";

impl Host {
    /// `local`, or an `ssh://` URL (see [`SshHost::parse`]); SSH control
    /// sockets go in `run_dir`.
    pub fn parse(text: &str, key: Option<PathBuf>, run_dir: &Path) -> Result<Host, HostError> {
        if text == "local" {
            return Ok(Host::Local);
        }
        SshHost::parse(text, key, run_dir).map(Host::Ssh)
    }

    /// `this machine` or `USER@HOST:PORT`, for messages.
    pub fn name(&self) -> String {
        match self {
            Host::Local => LOCAL_NAME.to_owned(),
            Host::Ssh(h) => h.name(),
        }
    }

    /// `local` or `ssh://USER@HOST:PORT`: what [`Host::parse`] reads back.
    pub fn url(&self) -> String {
        match self {
            Host::Local => "local".to_owned(),
            Host::Ssh(h) => h.url(),
        }
    }

    /// The private key an SSH host is logged into with, if one was given.
    pub fn key(&self) -> Option<&Path> {
        match self {
            Host::Local => None,
            Host::Ssh(h) => h.key.as_deref(),
        }
    }

    /// Whether this is the machine the lab runs on.
    pub fn is_local(&self) -> bool {
        matches!(self, Host::Local)
    }

    fn local_command<S: AsRef<OsStr>>(argv: &[S]) -> Command {
        let mut c = Command::new(argv[0].as_ref());
        c.args(&argv[1..]);
        c
    }

    /// Runs `argv` and returns its stdout; a non-zero exit is an error
    /// carrying its stderr.
    pub fn run<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<String, HostError> {
        assert!(!argv.is_empty(), "an empty command line");
        match self {
            Host::Ssh(h) => h.run(argv),
            Host::Local => {
                let output = Host::local_command(argv)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|source| self.io(argv, source))?;
                if output.status.success() {
                    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
                } else {
                    Err(HostError::Failed {
                        host: self.name(),
                        command: remote_line(argv),
                        status: output.status.to_string(),
                        stderr: crate::ssh::tail(&output.stderr),
                    })
                }
            }
        }
    }

    /// The text of file `path` on the host.
    pub fn read(&self, path: &str) -> Result<String, HostError> {
        match self {
            Host::Ssh(h) => h.read(path),
            Host::Local => std::fs::read_to_string(path).map_err(|source| HostError::Io {
                host: format!("{} reading {path}", self.name()),
                source,
            }),
        }
    }

    /// Several files at once, in one round trip on an SSH host: each
    /// file's text, or None for one that could not be read (a process
    /// that has ended).
    pub fn read_many(&self, paths: &[String]) -> Result<Vec<Option<String>>, HostError> {
        match self {
            Host::Local => Ok(paths
                .iter()
                .map(|p| std::fs::read_to_string(p).ok())
                .collect()),
            Host::Ssh(h) => {
                // Each file, then a marker line saying whether it was read.
                let script = "for f; do if cat \"$f\" 2>/dev/null; then echo; echo @@isoe-ok@@; \
                              else echo; echo @@isoe-missing@@; fi; done";
                let mut argv: Vec<&str> = vec!["sh", "-c", script, "sh"];
                argv.extend(paths.iter().map(String::as_str));
                let out = h.run(&argv)?;
                Ok(split_many(&out, paths.len()))
            }
        }
    }

    /// Writes `contents` to `path` on the host (replacing it).
    pub fn write(&self, path: &str, contents: &[u8]) -> Result<(), HostError> {
        match self {
            Host::Local => std::fs::write(path, contents).map_err(|source| HostError::Io {
                host: format!("{} writing {path}", self.name()),
                source,
            }),
            Host::Ssh(h) => {
                let argv = ["sh", "-c", "cat > \"$1\"", "sh", path];
                let mut child = h
                    .command(&argv)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|source| self.io(&argv, source))?;
                let mut stdin = child.stdin.take().expect("stdin was piped");
                let written = stdin.write_all(contents);
                drop(stdin);
                let output = child
                    .wait_with_output()
                    .map_err(|source| self.io(&argv, source))?;
                if let (Err(source), true) = (written, output.status.success()) {
                    return Err(self.io(&argv, source));
                }
                if output.status.success() {
                    Ok(())
                } else {
                    Err(HostError::Failed {
                        host: self.name(),
                        command: format!("writing {path}"),
                        status: output.status.to_string(),
                        stderr: crate::ssh::tail(&output.stderr),
                    })
                }
            }
        }
    }

    /// Starts `argv` in the background, its stdout piped to the lab and
    /// its stderr to `stderr`.
    pub fn spawn<S: AsRef<OsStr>>(&self, argv: &[S], stderr: Stdio) -> Result<Running, HostError> {
        assert!(!argv.is_empty(), "an empty command line");
        match self {
            Host::Ssh(h) => {
                let mut remote = h.spawn(argv, stderr)?;
                let stdout = remote.take_stdout();
                Ok(Running {
                    inner: Inner::Remote(remote),
                    stdout,
                })
            }
            Host::Local => {
                let mut child = Host::local_command(argv)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(stderr)
                    .spawn()
                    .map_err(|source| self.io(argv, source))?;
                let stdout = child.stdout.take().map(BufReader::new);
                Ok(Running {
                    inner: Inner::Local(child),
                    stdout,
                })
            }
        }
    }

    /// Ends the SSH connection the host's commands shared.
    pub fn close(&self) {
        if let Host::Ssh(h) = self {
            h.close();
        }
    }

    fn io<S: AsRef<OsStr>>(&self, argv: &[S], source: io::Error) -> HostError {
        HostError::Io {
            host: format!("{} running {}", self.name(), remote_line(argv)),
            source,
        }
    }
}

/// Splits [`Host::read_many`]'s output into the files' texts.
pub(crate) fn split_many(out: &str, n: usize) -> Vec<Option<String>> {
    let mut files = Vec::with_capacity(n);
    let mut current = String::new();
    for line in out.split_inclusive('\n') {
        match line.trim_end_matches('\n') {
            "@@isoe-ok@@" | "@@isoe-missing@@" => {
                // The `echo` before the marker added one newline.
                let ok = line.starts_with("@@isoe-ok");
                let text = current.strip_suffix('\n').unwrap_or(&current).to_owned();
                files.push(ok.then_some(text));
                current.clear();
            }
            _ => current.push_str(line),
        }
    }
    files.resize(n, None);
    files
}

/// A program a [`Host`] started: on this machine, or on an SSH host.
pub struct Running {
    inner: Inner,
    stdout: Option<BufReader<ChildStdout>>,
}

enum Inner {
    /// A child of this process.
    Local(Child),
    /// A program on an SSH host, carried by a local `ssh`.
    Remote(Remote),
}

impl Running {
    /// Its PID on its host.
    pub fn pid(&self) -> u32 {
        match &self.inner {
            Inner::Local(child) => child.id(),
            Inner::Remote(r) => r.pid,
        }
    }

    /// Its stdout, to read in another thread (a pipe no one reads stops a
    /// chatty program); None once taken.
    pub fn take_stdout(&mut self) -> Option<BufReader<ChildStdout>> {
        self.stdout.take()
    }

    /// Its exit status when it has ended (for a remote program: when the
    /// `ssh` carrying it has; 255 is ssh's own failure, a host gone).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &mut self.inner {
            Inner::Local(child) => child.try_wait(),
            Inner::Remote(r) => r.try_wait(),
        }
    }

    /// SIGTERM, up to `grace` for it to end, then SIGKILL; by its PID on its
    /// host. Errors only when a remote host could not be told.
    pub fn stop(self, grace: Duration) -> Result<(), HostError> {
        self.end(grace).map(|_| ())
    }

    /// [`Running::stop`], saying how it went: its exit status when it ended
    /// by itself or within `grace` of SIGTERM, or that it took SIGKILL. For
    /// a program that must finish its work on SIGTERM (`isoe attach`
    /// flushing and removing its device), where the status is the verdict.
    pub fn end(self, grace: Duration) -> Result<Ending, HostError> {
        match self.inner {
            Inner::Local(mut child) => Ok(end_local(&mut child, grace)),
            Inner::Remote(r) => r.end(grace),
        }
    }
}

/// Reads `stdout` to its end in a thread; the text arrives when the
/// program closes it.
pub fn collect(stdout: BufReader<ChildStdout>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = stdout;
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

/// Sends `stdout`'s lines from a thread as they come, until the program
/// closes it or the receiver is dropped.
pub fn lines(stdout: BufReader<ChildStdout>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// SIGTERM, a grace period, then SIGKILL: only to a child we started, by its PID.
pub fn stop_local(child: &mut Child, grace: Duration) {
    end_local(child, grace);
}

/// [`stop_local`], saying how the child went.
fn end_local(child: &mut Child, grace: Duration) -> Ending {
    if let Ok(Some(status)) = child.try_wait() {
        return Ending::Exited(status);
    }
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on the PID of our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Ending::Exited(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ending::Killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_files_split_at_their_markers() {
        let out = "cpu 1 2\ncpu0 1\n\n@@isoe-ok@@\n\n@@isoe-missing@@\nno newline\n@@isoe-ok@@\n";
        assert_eq!(
            split_many(out, 3),
            [
                Some("cpu 1 2\ncpu0 1\n".to_owned()),
                None,
                Some("no newline".to_owned())
            ]
        );
        assert_eq!(split_many("", 2), [None, None]);
    }

    #[test]
    fn the_local_host_runs_reads_writes_and_stops() {
        let host = Host::parse("local", None, Path::new("/nonexistent")).unwrap();
        assert!(host.is_local());
        assert_eq!(host.url(), "local");
        for url in ["ssh://me@box:2222", "ssh://root@[fe80::1]:22"] {
            let h = Host::parse(url, Some("/k".into()), Path::new("/run")).unwrap();
            assert_eq!(h.url(), url, "read back");
            assert_eq!(h.key(), Some(Path::new("/k")));
        }
        assert_eq!(host.run(&["echo", "a b"]).unwrap(), "a b\n");
        let e = host
            .run(&["sh", "-c", "echo nope >&2; exit 3"])
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("this machine") && text.contains("nope") && text.contains('3'),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f").display().to_string();
        host.write(&path, b"hello\n").unwrap();
        assert_eq!(host.read(&path).unwrap(), "hello\n");
        let missing = dir.path().join("missing").display().to_string();
        assert_eq!(
            host.read_many(&[path.clone(), missing]).unwrap(),
            [Some("hello\n".to_owned()), None]
        );
        let mut sleeper = host.spawn(&["sleep", "30"], Stdio::null()).unwrap();
        assert!(sleeper.pid() > 0);
        assert!(sleeper.try_wait().unwrap().is_none());
        let t = Instant::now();
        sleeper.stop(Duration::from_secs(5)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "SIGTERM ended it");
        // How a program took SIGTERM: its exit status, or SIGKILL.
        let flushing = host
            .spawn(
                &[
                    "sh",
                    "-c",
                    "trap 'exit 3' TERM; while :; do sleep 0.05; done",
                ],
                Stdio::null(),
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        match flushing.end(Duration::from_secs(5)).unwrap() {
            Ending::Exited(status) => assert_eq!(status.code(), Some(3)),
            Ending::Killed => panic!("it exited on SIGTERM"),
        }
        let stubborn = host
            .spawn(
                &["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"],
                Stdio::null(),
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let ending = stubborn.end(Duration::from_millis(300)).unwrap();
        assert_eq!(ending, Ending::Killed);
        let mut echo = host.spawn(&["echo", "out"], Stdio::null()).unwrap();
        let text = collect(echo.take_stdout().unwrap());
        assert_eq!(text.recv().unwrap(), "out\n");
        assert!(echo.take_stdout().is_none(), "taken once");
    }
}
