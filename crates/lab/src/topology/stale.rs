//! Leftovers of runs that died: every lab namespace carries its creator's
//! PID (`isoe-lab-<PID>-<n>-<role>`), so one whose creator is gone is
//! stale and can be removed at the next start without touching a lab
//! that is still running.

use crate::netcmd;
use std::path::Path;

/// The start of every lab namespace's name.
pub const NAMESPACE_PREFIX: &str = "isoe-lab-";

/// Where `ip netns` keeps named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// The PID of the process that made a lab namespace, from its name
/// (`isoe-lab-<PID>-<n>-<role>`, or the older `isoe-lab-<PID>-<role>`);
/// None for a name that is not a lab namespace.
pub fn owner_pid(namespace: &str) -> Option<u32> {
    let rest = namespace.strip_prefix(NAMESPACE_PREFIX)?;
    let (pid, tail) = rest.split_once('-')?;
    if tail.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Every lab namespace on the machine, by name, sorted.
pub fn lab_namespaces() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| owner_pid(n).is_some())
        .collect();
    names.sort();
    names
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Delete every lab namespace whose creating process is gone; returns the
/// names removed. Failures are printed to stderr and the name is left out.
///
/// A PID reused by an unrelated process keeps its namespaces alive until
/// that process exits too: harmless, and never wrong about a live lab.
pub fn cleanup_stale() -> Vec<String> {
    remove_where(|pid| !alive(pid))
}

/// Delete every lab namespace this process made: for a Ctrl-C handler that
/// cannot wait for every [`super::Topology`] to drop. Namespaces of other
/// topologies still in use in this process go too.
pub fn cleanup_own() -> Vec<String> {
    let me = std::process::id();
    remove_where(|pid| pid == me)
}

fn remove_where(doomed: impl Fn(u32) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    for ns in lab_namespaces() {
        let Some(pid) = owner_pid(&ns) else { continue };
        if !doomed(pid) {
            continue;
        }
        match netcmd::run(&netcmd::netns_del(&ns)) {
            Ok(_) => removed.push(ns),
            Err(e) => eprintln!("isoe-lab: removing stale namespace: {e}"),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_both_name_forms_and_nothing_else() {
        assert_eq!(owner_pid("isoe-lab-1234-0-host"), Some(1234));
        assert_eq!(owner_pid("isoe-lab-1234-tgt"), Some(1234));
        assert_eq!(owner_pid("isoe-lab-1234-"), None);
        assert_eq!(owner_pid("isoe-lab-12a4-0-host"), None);
        assert_eq!(owner_pid("isoe-lab--0-host"), None);
        assert_eq!(owner_pid("other-1234-0-host"), None);
        assert_eq!(owner_pid("isoe-lab-1234"), None);
    }

    #[test]
    fn this_process_is_alive() {
        assert!(alive(std::process::id()));
    }
}
