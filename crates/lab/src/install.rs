//! Installing what a plan needs on this machine ([`crate::preflight`]
//! decides when): Debian packages with apt-get, and fio with the libiscsi
//! engine by `crates/lab/fio-libiscsi`, run from the copy built into this
//! binary so that no checkout has to be around.

use crate::peers::fio::{self, FioUnusable};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Output, Stdio};
use thiserror::Error;

/// How long apt-get waits for another apt or dpkg to finish, seconds.
const APT_LOCK_TIMEOUT_S: u32 = 300;

/// Installs what the lab needs; [`crate::preflight`] asks it.
/// [`SystemInstaller`] is the real one, tests have their own.
pub trait Installer {
    /// `apt-get install` these Debian packages.
    fn apt_install(&mut self, packages: &[&str]) -> Result<(), AptError>;
    /// Build fio with the libiscsi engine; where it is.
    fn build_fio(&mut self) -> Result<PathBuf, FioBuildError>;
}

/// The real installer: apt-get and the fio script, on this machine.
#[derive(Debug, Default)]
pub struct SystemInstaller;

/// Why apt-get installed nothing.
#[derive(Debug, Error)]
pub enum AptError {
    /// No apt-get here.
    #[error("apt-get not found")]
    NotFound,
    /// It could not be run.
    #[error("cannot run apt-get: {0}")]
    CannotRun(#[source] std::io::Error),
    /// `apt-get install` failed (its last lines).
    #[error("{status}: {said}")]
    Install {
        /// How it ended.
        status: ExitStatus,
        /// Its last lines.
        said: String,
    },
    /// `apt-get update`, run because the index looked missing, failed.
    #[error("apt-get update {status}: {said}")]
    Update {
        /// How it ended.
        status: ExitStatus,
        /// Its last lines.
        said: String,
    },
    /// `apt-get install` failed again after `apt-get update`.
    #[error("{status} (after apt-get update): {said}")]
    InstallAfterUpdate {
        /// How it ended.
        status: ExitStatus,
        /// Its last lines.
        said: String,
    },
}

/// Why fio with the libiscsi engine was not built.
#[derive(Debug, Error)]
pub enum FioBuildError {
    /// No bash here.
    #[error("bash not found")]
    NoBash,
    /// The script could not be written out.
    #[error("writing {}: {source}", script.display())]
    WritingScript {
        /// The temporary file.
        script: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// bash could not be run.
    #[error("cannot run bash: {0}")]
    CannotRunBash(#[source] std::io::Error),
    /// The script failed.
    #[error("crates/lab/fio-libiscsi {0} (what it printed is above)")]
    Failed(ExitStatus),
    /// The script printed no path.
    #[error("crates/lab/fio-libiscsi printed no path")]
    NoPath,
    /// What it built is not a usable fio.
    #[error(
        "crates/lab/fio-libiscsi printed {}, but the lab finds no usable fio: {source}",
        path.display()
    )]
    Unusable {
        /// What it printed.
        path: PathBuf,
        /// Why the lab finds no usable fio.
        source: FioUnusable,
    },
}

fn apt_get(args: &[&str]) -> Result<Output, AptError> {
    let program = crate::netcmd::find_program("apt-get").ok_or(AptError::NotFound)?;
    Command::new(program)
        .arg("-o")
        .arg(format!("DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}"))
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(AptError::CannotRun)
}

/// The last lines apt-get printed, for an error message.
fn tail(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}

/// Whether apt-get failed because its package index is missing or stale,
/// which `apt-get update` mends (a fresh container has no index at all).
pub fn index_missing(apt_output: &str) -> bool {
    [
        "Unable to locate package",
        "has no installation candidate",
        "Failed to fetch",
        "404  Not Found",
    ]
    .iter()
    .any(|s| apt_output.contains(s))
}

impl Installer for SystemInstaller {
    fn apt_install(&mut self, packages: &[&str]) -> Result<(), AptError> {
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend_from_slice(packages);
        let first = apt_get(&args)?;
        if first.status.success() {
            return Ok(());
        }
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&first.stdout),
            String::from_utf8_lossy(&first.stderr)
        );
        if !index_missing(&said) {
            return Err(AptError::Install {
                status: first.status,
                said: tail(&first),
            });
        }
        let update = apt_get(&["update"])?;
        if !update.status.success() {
            return Err(AptError::Update {
                status: update.status,
                said: tail(&update),
            });
        }
        let second = apt_get(&args)?;
        if second.status.success() {
            Ok(())
        } else {
            Err(AptError::InstallAfterUpdate {
                status: second.status,
                said: tail(&second),
            })
        }
    }

    fn build_fio(&mut self) -> Result<PathBuf, FioBuildError> {
        let path = build_fio_libiscsi()?;
        fio::usable_fio().map_err(|source| FioBuildError::Unusable { path, source })
    }
}

/// Runs `crates/lab/fio-libiscsi` (the copy in this binary, from a temporary
/// file, with bash): its progress goes to stderr, its output is the path.
pub fn build_fio_libiscsi() -> Result<PathBuf, FioBuildError> {
    let bash = crate::netcmd::find_program("bash").ok_or(FioBuildError::NoBash)?;
    let script = std::env::temp_dir().join(format!("isoe-fio-libiscsi-{}.sh", std::process::id()));
    let written =
        std::fs::File::create(&script).and_then(|mut f| f.write_all(fio::BUILD_SCRIPT.as_bytes()));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&script);
        return Err(FioBuildError::WritingScript { script, source });
    }
    let ran = Command::new(bash)
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output();
    let _ = std::fs::remove_file(&script);
    let out = ran.map_err(FioBuildError::CannotRunBash)?;
    if !out.status.success() {
        return Err(FioBuildError::Failed(out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| PathBuf::from(l.trim()))
        .ok_or(FioBuildError::NoPath)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_index_is_told_from_other_failures() {
        assert!(index_missing("E: Unable to locate package ethtool\n"));
        assert!(index_missing(
            "E: Package 'tgt' has no installation candidate"
        ));
        assert!(!index_missing(
            "E: Could not get lock /var/lib/dpkg/lock-frontend"
        ));
    }

    #[test]
    fn the_built_in_script_is_the_repository_s() {
        let text = fio::BUILD_SCRIPT;
        assert!(text.starts_with("#!/usr/bin/env bash\n"));
        assert!(text.contains("--enable-libiscsi"));
        assert!(text.contains("isoe-tools}/fio-libiscsi/fio") || text.contains("fio-libiscsi/fio"));
    }
}
