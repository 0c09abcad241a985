//! Installing what a plan needs on this machine ([`crate::preflight`]
//! decides when): Debian packages with apt-get, and fio with the libiscsi
//! engine by `crates/lab/fio-libiscsi`, run from the copy built into this
//! binary so that no checkout has to be around.

use crate::peers::fio;
use crate::preflight::Installer;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// How long apt-get waits for another apt or dpkg to finish, seconds.
const APT_LOCK_TIMEOUT_S: u32 = 300;

/// The real installer: apt-get and the fio script, on this machine.
#[derive(Debug, Default)]
pub struct SystemInstaller;

fn apt_get(args: &[&str]) -> Result<Output, String> {
    let program = crate::netcmd::find_program("apt-get").ok_or("apt-get not found")?;
    Command::new(program)
        .arg("-o")
        .arg(format!("DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}"))
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run apt-get: {e}"))
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
    fn apt_install(&mut self, packages: &[&str]) -> Result<(), String> {
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
            return Err(format!("{}: {}", first.status, tail(&first)));
        }
        let update = apt_get(&["update"])?;
        if !update.status.success() {
            return Err(format!(
                "apt-get update {}: {}",
                update.status,
                tail(&update)
            ));
        }
        let second = apt_get(&args)?;
        if second.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} (after apt-get update): {}",
                second.status,
                tail(&second)
            ))
        }
    }

    fn build_fio(&mut self) -> Result<PathBuf, String> {
        let path = build_fio_libiscsi()?;
        fio::usable_fio().map_err(|e| {
            format!(
                "crates/lab/fio-libiscsi printed {}, but the lab finds no usable fio: {e}",
                path.display()
            )
        })
    }
}

/// Runs `crates/lab/fio-libiscsi` (the copy in this binary, from a temporary
/// file, with bash): its progress goes to stderr, its output is the path.
pub fn build_fio_libiscsi() -> Result<PathBuf, String> {
    let bash = crate::netcmd::find_program("bash").ok_or("bash not found")?;
    let script = std::env::temp_dir().join(format!("isoe-fio-libiscsi-{}.sh", std::process::id()));
    let written =
        std::fs::File::create(&script).and_then(|mut f| f.write_all(fio::BUILD_SCRIPT.as_bytes()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&script);
        return Err(format!("writing {}: {e}", script.display()));
    }
    let ran = Command::new(bash)
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output();
    let _ = std::fs::remove_file(&script);
    let out = ran.map_err(|e| format!("cannot run bash: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "crates/lab/fio-libiscsi {} (what it printed is above)",
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| PathBuf::from(l.trim()))
        .ok_or_else(|| "crates/lab/fio-libiscsi printed no path".to_string())
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
