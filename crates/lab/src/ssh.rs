//! A machine the lab reaches over SSH: `ssh://[USER@]HOST[:PORT]`,
//! key-based and never interactive. Programs run there as `argv` (quoted
//! for the remote shell, so an argument with spaces or `$` stays one
//! argument); one long-lived ControlMaster connection per host carries every
//! command of a run, so a command costs no new key exchange; a program
//! started with [`SshHost::spawn`] tells its remote PID first, so the lab
//! can end exactly the processes it started ([`Remote::stop`]).
//!
//! The `host` module puts this machine and SSH hosts behind one face.

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How a program the lab ended went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited, by itself or on SIGTERM within the grace, with this
    /// status (for a remote program, the ssh that carried it: 255 when ssh
    /// lost the host).
    Exited(ExitStatus),
    /// It outlived SIGTERM's grace and was killed.
    Killed,
}

/// What went wrong with an SSH host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The URL is not `ssh://[USER@]HOST[:PORT]`.
    #[error("{url:?} is not an SSH host: {why} (expected ssh://[USER@]HOST[:PORT])")]
    Url {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// ssh could not be started, or a remote program's output not read.
    #[error("{host}: {source}")]
    Io {
        /// The host, as `USER@HOST:PORT`.
        host: String,
        /// The error.
        source: io::Error,
    },
    /// A command on the host failed.
    #[error("on {host}: `{command}` failed ({status}): {stderr}")]
    Failed {
        /// The host, as `USER@HOST:PORT`.
        host: String,
        /// The command line as sent.
        command: String,
        /// Its exit status (255: ssh itself failed, e.g. the host is gone).
        status: String,
        /// The last of what it printed on stderr.
        stderr: String,
    },
}

/// A machine reached over SSH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// Login name (`root` unless the URL gives one).
    pub user: String,
    /// Host name or address.
    pub host: String,
    /// TCP port (22 unless the URL gives one).
    pub port: u16,
    /// Private key to log in with (else ssh's own choice).
    pub key: Option<PathBuf>,
    /// The ControlMaster socket: in the run's directory, one per host.
    control: PathBuf,
}

impl SshHost {
    /// Parses `ssh://[USER@]HOST[:PORT]`; the ControlMaster socket goes in
    /// `run_dir`.
    pub fn parse(url: &str, key: Option<PathBuf>, run_dir: &Path) -> Result<SshHost, HostError> {
        let bad = |why| HostError::Url {
            url: url.to_owned(),
            why,
        };
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| bad("no ssh:// scheme"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return Err(bad("a path after the host"));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((user, hostport)) if !user.is_empty() => (user.to_owned(), hostport),
            Some(_) => return Err(bad("an empty user name")),
            None => ("root".to_owned(), rest),
        };
        let (host, port) = match hostport.strip_prefix('[') {
            // [IPv6]:PORT
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed '['"))?;
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    None => return Err(bad("text after ']'")),
                }
            }
            None => match hostport.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (hostport, None),
            },
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if host.contains(':') && !hostport.starts_with('[') {
            return Err(bad("an IPv6 address not in [brackets]"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| bad("a port that is not 1 to 65535"))?,
            None => 22,
        };
        let control = run_dir.join(format!("ssh-{user}@{host}:{port}"));
        Ok(SshHost {
            user,
            host: host.to_owned(),
            port,
            key,
            control,
        })
    }

    /// `USER@HOST:PORT`, for messages.
    pub fn name(&self) -> String {
        format!("{}@{}:{}", self.user, self.host, self.port)
    }

    /// `ssh://USER@HOST:PORT`, which [`SshHost::parse`] reads back (an
    /// IPv6 address in brackets): how a journal names the host for a
    /// later run.
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("ssh://{}@[{}]:{}", self.user, self.host, self.port)
        } else {
            format!("ssh://{}@{}:{}", self.user, self.host, self.port)
        }
    }

    /// `ssh` with the options every command uses, up to the remote command.
    fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        // A process group of its own: Ctrl-C at the terminal goes to the
        // lab, which ends what runs on the host by its PID, rather than
        // killing the ssh that carries it (and losing its output).
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        if let Some(key) = &self.key {
            c.arg("-i").arg(key);
        }
        c.arg("-p").arg(self.port.to_string());
        for option in [
            "BatchMode=yes",
            "ConnectTimeout=10",
            "ServerAliveInterval=5",
            "ServerAliveCountMax=3",
            "LogLevel=ERROR",
            "ControlMaster=auto",
            "ControlPersist=60",
        ] {
            c.arg("-o").arg(option);
        }
        c.arg("-o")
            .arg(format!("ControlPath={}", self.control.display()));
        // A lab host is a test machine the user named; its key is taken
        // on first sight rather than asked about (no one is there to answer).
        c.args([
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ]);
        c.arg(format!("{}@{}", self.user, self.host));
        c.arg("--");
        c
    }

    /// A command running `argv` on the host; stdin, stdout and stderr are
    /// the caller's to set.
    pub fn command<S: AsRef<OsStr>>(&self, argv: &[S]) -> Command {
        let mut c = self.ssh();
        c.arg(remote_line(argv));
        c
    }

    /// Runs `argv` on the host and returns its stdout; a non-zero exit is
    /// an error that carries its stderr.
    pub fn run<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<String, HostError> {
        let output = self
            .command(argv)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| self.io(source))?;
        self.checked(argv, output)
    }

    /// The text of file `path` on the host (`/proc/stat`, say).
    pub fn read(&self, path: &str) -> Result<String, HostError> {
        self.run(&["cat", path])
    }

    /// Starts `argv` on the host in the background of this process: the
    /// remote shell prints its PID, then execs the program, whose stdout
    /// follows on [`Remote::stdout`] and whose stderr goes to `stderr` (a
    /// file, or null: a pipe no one reads would stop a chatty program).
    pub fn spawn<S: AsRef<OsStr>>(&self, argv: &[S], stderr: Stdio) -> Result<Remote, HostError> {
        let mut wrapped: Vec<&OsStr> = vec![
            OsStr::new("sh"),
            OsStr::new("-c"),
            OsStr::new("echo $$; exec \"$@\""),
            OsStr::new("sh"),
        ];
        wrapped.extend(argv.iter().map(AsRef::as_ref));
        let mut child = self
            .command(&wrapped)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|source| self.io(source))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let mut stdout = BufReader::new(stdout);
        let mut first = String::new();
        stdout
            .read_line(&mut first)
            .map_err(|source| self.io(source))?;
        let Ok(pid) = first.trim().parse::<u32>() else {
            // No PID: ssh failed (or the remote shell did not run).
            let _ = child.kill();
            let status = child.wait().map_err(|source| self.io(source))?;
            return Err(HostError::Failed {
                host: self.name(),
                command: remote_line(argv),
                status: status.to_string(),
                stderr: "(no PID line; see the spawn's stderr)".into(),
            });
        };
        Ok(Remote {
            host: self.clone(),
            pid,
            child,
            stdout: Some(stdout),
        })
    }

    /// Ends the ControlMaster connection (at the end of a run).
    pub fn close(&self) {
        let _ = self
            .ssh_control("exit")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    fn ssh_control(&self, op: &str) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-o")
            .arg(format!("ControlPath={}", self.control.display()))
            .args(["-O", op])
            .arg(format!("{}@{}", self.user, self.host));
        c
    }

    fn io(&self, source: io::Error) -> HostError {
        HostError::Io {
            host: format!("ssh to {}", self.name()),
            source,
        }
    }

    fn checked<S: AsRef<OsStr>>(&self, argv: &[S], output: Output) -> Result<String, HostError> {
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        Err(HostError::Failed {
            host: self.name(),
            command: remote_line(argv),
            status: output.status.to_string(),
            stderr: tail(&output.stderr),
        })
    }
}

/// A program started on an SSH host.
pub struct Remote {
    host: SshHost,
    /// Its PID on the host.
    pub pid: u32,
    child: Child,
    stdout: Option<BufReader<ChildStdout>>,
}

impl Remote {
    /// The program's stdout (after the PID line), to read in another
    /// thread; None once taken.
    pub fn take_stdout(&mut self) -> Option<BufReader<ChildStdout>> {
        self.stdout.take()
    }

    /// Ends the program on the host: SIGTERM to its PID, up to `grace` for
    /// it to go, then SIGKILL; then waits for the local ssh. An error when
    /// the host could not be told (it is gone); a program that had already
    /// ended is not one.
    pub fn stop(self, grace: Duration) -> Result<(), HostError> {
        self.end(grace).map(|_| ())
    }

    /// [`Remote::stop`], saying how the program went: its exit status
    /// (carried by the local ssh) when it ended within `grace` of SIGTERM
    /// or before, [`Ending::Killed`] when it took SIGKILL.
    pub fn end(mut self, grace: Duration) -> Result<Ending, HostError> {
        let pid = self.pid.to_string();
        // kill -0 fails for a PID that is gone: nothing to do then.
        let signal = |name: &str| {
            self.host.run(&[
                "sh",
                "-c",
                "kill -0 \"$2\" 2>/dev/null || exit 0; kill -\"$1\" \"$2\"",
                "sh",
                name,
                &pid,
            ])
        };
        let mut result = signal("TERM").map(|_| ());
        let deadline = Instant::now() + grace;
        while result.is_ok() && Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut killed = false;
        if result.is_ok() && matches!(self.child.try_wait(), Ok(None)) {
            killed = true;
            result = signal("KILL").map(|_| ());
        }
        if result.is_err() {
            let _ = self.child.kill();
        }
        let status = self.child.wait();
        result?;
        match status {
            Ok(_) if killed => Ok(Ending::Killed),
            Ok(status) => Ok(Ending::Exited(status)),
            Err(source) => Err(self.host.io(source)),
        }
    }

    /// The exit status of the local ssh once it has ended: the program's
    /// own, or 255 when ssh lost the host.
    pub fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

/// `argv` as one line for the remote shell: every argument single-quoted
/// (a `'` inside becomes `'\''`), so the remote shell gives the program
/// exactly these arguments, and `exec` so that no shell stays between.
pub fn remote_line<S: AsRef<OsStr>>(argv: &[S]) -> String {
    let mut line = String::from("exec");
    for arg in argv {
        let arg = arg.as_ref().to_string_lossy();
        line.push(' ');
        if !arg.is_empty()
            && arg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
        {
            line.push_str(&arg);
        } else {
            line.push('\'');
            line.push_str(&arg.replace('\'', r"'\''"));
            line.push('\'');
        }
    }
    line
}

/// The last lines of what a command printed on stderr, for an error.
pub(crate) fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<SshHost, HostError> {
        SshHost::parse(url, None, Path::new("/run/lab"))
    }

    #[test]
    fn urls_name_user_host_and_port() {
        let h = parse("ssh://root@10.0.0.2").unwrap();
        assert_eq!(
            (h.user.as_str(), h.host.as_str(), h.port),
            ("root", "10.0.0.2", 22)
        );
        let h = parse("ssh://lab@storage-a:2222/").unwrap();
        assert_eq!(
            (h.user.as_str(), h.host.as_str(), h.port),
            ("lab", "storage-a", 2222)
        );
        let h = parse("ssh://[fd00::2]:22").unwrap();
        assert_eq!(
            (h.user.as_str(), h.host.as_str(), h.port),
            ("root", "fd00::2", 22)
        );
        assert_eq!(h.name(), "root@fd00::2:22");
        assert_eq!(
            h.control,
            Path::new("/run/lab/ssh-root@fd00::2:22"),
            "one ControlMaster socket per host, in the run's directory"
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, why) in [
            ("root@host", "no ssh:// scheme"),
            ("ssh://", "no host"),
            ("ssh://@host", "an empty user name"),
            ("ssh://host:0", "a port that is not 1 to 65535"),
            ("ssh://host:99999", "a port that is not 1 to 65535"),
            ("ssh://host/path", "a path after the host"),
            ("ssh://[fd00::2", "an unclosed '['"),
            ("ssh://fd00::2", "an IPv6 address not in [brackets]"),
        ] {
            match parse(url) {
                Err(HostError::Url { why: got, .. }) => assert_eq!(got, why, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn arguments_reach_the_remote_program_as_given() {
        assert_eq!(
            remote_line(&["ethtool", "-K", "eth0", "tso", "off"]),
            "exec ethtool -K eth0 tso off"
        );
        assert_eq!(
            remote_line(&["sh", "-c", "echo $$; exec \"$@\"", "it's"]),
            r#"exec sh -c 'echo $$; exec "$@"' 'it'\''s'"#
        );
        assert_eq!(remote_line(&[""]), "exec ''");
    }

    #[test]
    fn the_quoting_survives_a_real_shell() {
        // What the remote shell does with the line, done by a local sh.
        let argv = ["printf", "[%s]", "a b", "$HOME", "it's", "", "*", "x\ny"];
        let line = remote_line(&argv);
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "[a b][$HOME][it's][][*][x\ny]"
        );
    }
}
