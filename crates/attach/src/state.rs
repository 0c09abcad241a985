//! What each running `isoe attach` tells the rest of the machine: one JSON
//! record per device in the state directory, which `isoe attach --list`,
//! `isoe detach` and a restarted attach read.
//!
//! The directory is `/run/isoe-attach/` ([`DEFAULT_DIR`]: gone at reboot,
//! like the devices), or `$ISOE_ATTACH_STATE_DIR` ([`DIR_ENV`]) where that
//! is set. The record of device `NAME` is `NAME.json`, written whole or
//! not at all ([`Record::save`]: a new file renamed over the old one), so
//! a reader never sees half of one. A record whose process is gone (killed
//! with SIGKILL, crashed) is stale: [`list`] leaves it out and removes it.
//! Records hold no secret (URLs never carry passwords), so they are
//! readable by all (0644).
//!
//! A record names its process by pid alone: after such a crash, a later
//! process with the same pid would pass for the attach until [`list`] next
//! runs after it ends. Pids are not reused soon (`pid_max` is 4 million on
//! 64-bit Linux), and /run starts empty at every boot.

use crate::serve::Stats;
use isoe_initiator::IscsiUrl;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// The state directory where [`DIR_ENV`] is not set.
pub const DEFAULT_DIR: &str = "/run/isoe-attach";
/// The environment variable that moves the state directory (tests set it).
pub const DIR_ENV: &str = "ISOE_ATTACH_STATE_DIR";
/// The longest device name.
pub const NAME_MAX: usize = 64;

/// [`Record::state`] while logging in and setting up the device.
pub const STARTING: &str = "starting";
/// [`Record::state`] once the device exists and serves.
pub const SERVING: &str = "serving";
/// [`Record::state`] after a stop request, while the device drains.
pub const STOPPING: &str = "stopping";
/// [`Record::state`] while the session's lost connections are logged in
/// again (within the replacement timeout): requests wait.
pub const RECONNECTING: &str = "reconnecting";
/// [`Record::state`] while the session has failed for good: requests fail
/// at once while it is logged in again in the background.
pub const OFFLINE: &str = "offline";
/// [`Record::state`] of a killed attach whose ublk disk waits to be resumed.
pub const ORPHANED: &str = "orphaned";

/// How often [`detach`] looks whether the process is gone.
const POLL: Duration = Duration::from_millis(50);

/// One attached device, as its `isoe attach` last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The device's name ([`valid_name`]); the file is `NAME.json`.
    pub name: String,
    /// The `isoe attach` process serving it.
    pub pid: u32,
    /// The block device, e.g. `/dev/ublkb0`, once it exists.
    #[serde(default)]
    pub device: Option<String>,
    /// `"ublk"` or `"nbd"`.
    pub transport: String,
    /// How request data moves between the kernel and the session:
    /// `"zero-copy"` or `"copy"` (`ublk::DataPath`); None until the device
    /// exists, and in records of older versions.
    #[serde(default)]
    pub data_path: Option<String>,
    /// The URLs logged in to, never with a password.
    pub urls: Vec<String>,
    /// The URLs are paths of one LU.
    #[serde(default)]
    pub multipath: bool,
    /// ublk's device id (`/dev/ublkcN`), for recovering the device after a
    /// restart.
    #[serde(default)]
    pub ublk_id: Option<u32>,
    /// [`STARTING`], [`SERVING`], [`RECONNECTING`], [`OFFLINE`] or [`STOPPING`] (and
    /// [`ORPHANED`] as [`list`] shows a killed attach's record).
    pub state: String,
    /// When the process started serving this device, in seconds since the
    /// Unix epoch.
    pub started_unix: u64,
    /// The counters as of the last save.
    #[serde(default)]
    pub stats: Stats,
}

impl Record {
    /// The record of a device this process starts now: [`STARTING`], no
    /// device yet, zero counters.
    pub fn new(name: &str, transport: &str, urls: Vec<String>, multipath: bool) -> Record {
        Record {
            name: name.to_string(),
            pid: std::process::id(),
            device: None,
            transport: transport.to_string(),
            data_path: None,
            urls,
            multipath,
            ublk_id: None,
            state: STARTING.to_string(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            stats: Stats::default(),
        }
    }

    /// Writes the record to [`dir`] as `NAME.json`, atomically: readers see
    /// the old record or the new one. Makes the directory (0755) if it is
    /// missing.
    pub fn save(&self) -> io::Result<()> {
        self.save_in(&dir())
    }

    fn save_in(&self, dir: &Path) -> io::Result<()> {
        if !valid_name(&self.name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                name_rule(&self.name),
            ));
        }
        make_dir(dir)?;
        let mut text = serde_json::to_vec_pretty(self)?;
        text.push(b'\n');
        // A name of this process's own (pid and a counter), made with
        // O_EXCL: two savers never share one. Not `*.json`, so [`list`]
        // never reads it.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let (temp, mut file) = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let temp = dir.join(format!(".{}.{}.{n}.tmp", self.name, std::process::id()));
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&temp)
            {
                Ok(file) => break (temp, file),
                // Left by an earlier process with this pid.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let written = file
            // The umask does not decide who may read `--list`'s records.
            .set_permissions(fs::Permissions::from_mode(0o644))
            .and_then(|()| file.write_all(&text))
            .and_then(|()| fs::rename(&temp, record_path(dir, &self.name)));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// The state directory: `$ISOE_ATTACH_STATE_DIR` if set and not empty,
/// else [`DEFAULT_DIR`].
pub fn dir() -> PathBuf {
    dir_from(std::env::var_os(DIR_ENV))
}

fn dir_from(env: Option<OsString>) -> PathBuf {
    match env {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(DEFAULT_DIR),
    }
}

fn record_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// `dir`, made with mode 0755 if missing.
fn make_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
}

/// True for a device name: 1 to 64 of `A-Z a-z 0-9 _ . -`. It names the
/// record file and the systemd instance (`isoe-attach@NAME`).
pub fn valid_name(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Why `name` is not a device name.
pub fn name_rule(name: &str) -> String {
    format!("{name:?} is not a device name: 1 to {NAME_MAX} of the characters A-Z a-z 0-9 _ . -")
}

/// The name of an attach that gives none: the part of the URL's target
/// name after its last `:` (`db` of `iqn.2026-11.io.isoe:db`; an `eui.`
/// or `naa.` name whole) and the LUN, `db-lun0`, every character a name
/// may not hold made `_`. Always a [`valid_name`].
pub fn default_name(url: &str) -> String {
    let Ok(url) = IscsiUrl::parse(url) else {
        return "lu".to_string();
    };
    let short = match url.target.rsplit_once(':') {
        Some((_, tail)) if !tail.is_empty() => tail,
        _ => url.target.as_str(),
    };
    let lun = format!("-lun{}", url.lun.unwrap_or(0));
    let mut name: String = short
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(NAME_MAX - lun.len())
        .collect();
    name.push_str(&lun);
    debug_assert!(valid_name(&name), "{name}");
    name
}

/// Removes the record of `name`; none there is no error.
pub fn remove(name: &str) -> io::Result<()> {
    remove_in(&dir(), name)
}

fn remove_in(dir: &Path, name: &str) -> io::Result<()> {
    if !valid_name(name) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, name_rule(name)));
    }
    match fs::remove_file(record_path(dir, name)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The records of running attaches, by name. A record whose process is
/// gone is left out and its file removed; a file that cannot be read or
/// parsed, or whose name is not its record's, is left out and left alone.
/// No state directory: no records.
pub fn list() -> io::Result<Vec<Record>> {
    list_in(&dir())
}

fn list_in(dir: &Path) -> io::Result<Vec<Record>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if !valid_name(name) {
            continue;
        }
        let Some(record) = read_record(&entry.path()) else {
            continue;
        };
        if record.name != name {
            continue;
        }
        if pid_alive(record.pid) {
            records.push(record);
        } else if holds_quiesced_ublk(&record) {
            // Killed, but its ublk disk waits for a new attach of this
            // name to resume it: keep the record that says which.
            records.push(Record {
                state: ORPHANED.into(),
                ..record
            });
        } else {
            remove_stale(&entry.path(), record.pid);
        }
    }
    records.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(records)
}

/// The record of `name` left by an attach that is gone (killed, crashed)
/// while its ublk disk still exists: what a new attach of that name
/// resumes. None when there is none, or its process lives.
pub fn orphan(name: &str) -> Option<Record> {
    let record = read_record(&record_path(&dir(), name))?;
    (!pid_alive(record.pid) && holds_quiesced_ublk(&record)).then_some(record)
}

/// The record names a ublk device that still exists (its server gone, the
/// kernel holds it quiesced until one resumes it).
fn holds_quiesced_ublk(record: &Record) -> bool {
    record
        .ublk_id
        .is_some_and(|id| Path::new(&format!("/sys/class/ublk-char/ublkc{id}")).exists())
}

fn read_record(path: &Path) -> Option<Record> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// Removes the record of `name` if it still names `pid` (the attach that
/// wrote it): a record another attach has taken over stays.
pub fn remove_if_pid(name: &str, pid: u32) {
    if valid_name(name) {
        remove_stale(&record_path(&dir(), name), pid);
    }
}

/// What names one LU whatever the spelling of its URL: the portal (host
/// as written, lower case; the port), the target name (lower case: iSCSI
/// names compare so, RFC 3722) and the LUN. None for a URL that does not
/// parse.
pub fn lu_key(url: &str) -> Option<String> {
    let u = IscsiUrl::parse(url).ok()?;
    Some(format!(
        "{}:{}/{}/{}",
        u.portal.host.to_ascii_lowercase(),
        u.portal.port,
        u.target.to_ascii_lowercase(),
        u.lun.unwrap_or(0)
    ))
}

/// The record (live or orphaned) that serves one of `urls`' LUs, if any.
pub fn serving_lu<'a>(records: &'a [Record], urls: &[String]) -> Option<(&'a Record, String)> {
    let wanted: Vec<(String, &String)> = urls
        .iter()
        .filter_map(|u| lu_key(u).map(|k| (k, u)))
        .collect();
    records.iter().find_map(|r| {
        r.urls.iter().find_map(|theirs| {
            let key = lu_key(theirs)?;
            wanted
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, mine)| (r, (*mine).clone()))
        })
    })
}

/// Removes the record at `path` if it still names `pid`: an attach that
/// has just taken the name over keeps its record. Best effort: whoever may
/// not remove it lists it as stale no more than the others.
fn remove_stale(path: &Path, pid: u32) {
    if read_record(path).is_some_and(|r| r.pid == pid) {
        let _ = fs::remove_file(path);
    }
}

/// The record of a running attach named `device_or_name`, or whose device
/// is that path (`/dev/ublkb0`, or a link to it such as a
/// `/dev/disk/by-*` name), or that path's basename (`ublkb0`).
pub fn find(device_or_name: &str) -> io::Result<Option<Record>> {
    find_in(&dir(), device_or_name)
}

fn find_in(dir: &Path, what: &str) -> io::Result<Option<Record>> {
    let records = list_in(dir)?;
    Ok(pick(records, what))
}

fn pick(records: Vec<Record>, what: &str) -> Option<Record> {
    let resolved = if what.starts_with('/') {
        fs::canonicalize(what).ok()
    } else {
        None
    };
    records.into_iter().find(|r| {
        r.name == what
            || r.device.as_deref().is_some_and(|d| {
                d == what
                    || Path::new(d).file_name().is_some_and(|base| base == what)
                    || resolved.as_deref().is_some_and(|p| p == Path::new(d))
            })
    })
}

/// Why [`detach`] did not detach.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DetachError {
    /// No running attach has that name or device.
    #[error("{}", not_attached(what, attached))]
    NotAttached {
        /// The name or device asked for.
        what: String,
        /// What is attached, as `NAME (DEVICE)`.
        attached: Vec<String>,
    },
    /// The process was told to stop and is still there.
    #[error(
        "{name} (pid {pid}) did not detach within {}; it may still be writing back \
         outstanding requests. `kill -9 {pid}` would end it at once and fail the I/O \
         still queued on the device",
        seconds(*waited)
    )]
    TimedOut {
        /// The device's name.
        name: String,
        /// Its `isoe attach`.
        pid: u32,
        /// How long detach waited.
        waited: Duration,
    },
    /// This user may not signal the attach's process.
    #[error(
        "not permitted to stop {name} (pid {pid}): detach as root or as the user who \
         attached it"
    )]
    Permission {
        /// The device's name.
        name: String,
        /// Its `isoe attach`.
        pid: u32,
    },
    /// The state directory could not be read.
    #[error("cannot read the attach records in {}: {source}", dir.display())]
    State {
        /// The state directory.
        dir: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
}

fn not_attached(what: &str, attached: &[String]) -> String {
    if attached.is_empty() {
        format!("{what} is not attached; nothing is")
    } else {
        format!("{what} is not attached; attached: {}", attached.join(", "))
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Detaches the device named `device_or_name` (as [`find`] matches it):
/// sends its `isoe attach` SIGTERM, which flushes and removes the device,
/// and waits up to `timeout` for the process to end. Returns its last
/// record.
pub fn detach(device_or_name: &str, timeout: Duration) -> Result<Record, DetachError> {
    detach_in(&dir(), device_or_name, timeout)
}

fn detach_in(dir: &Path, what: &str, timeout: Duration) -> Result<Record, DetachError> {
    let state_error = |source| DetachError::State {
        dir: dir.to_path_buf(),
        source,
    };
    let records = list_in(dir).map_err(state_error)?;
    let attached = records
        .iter()
        .map(|r| match &r.device {
            Some(device) => format!("{} ({device})", r.name),
            None => format!("{} ({})", r.name, r.state),
        })
        .collect();
    let Some(record) = pick(records, what) else {
        return Err(DetachError::NotAttached {
            what: what.to_string(),
            attached,
        });
    };
    match signal(record.pid, libc::SIGTERM) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            return Err(DetachError::Permission {
                name: record.name,
                pid: record.pid,
            })
        }
        Err(e) => return Err(state_error(e)),
    }
    let start = Instant::now();
    while pid_alive(record.pid) {
        if start.elapsed() >= timeout {
            return Err(DetachError::TimedOut {
                name: record.name,
                pid: record.pid,
                waited: timeout,
            });
        }
        std::thread::sleep(POLL);
    }
    // The attach removes its record on its way out; one killed before it
    // could is stale now.
    remove_stale(&record_path(dir, &record.name), record.pid);
    Ok(record)
}

/// kill(2) of `pid`, never of a process group: pids that are not a
/// single process's are refused as ESRCH.
fn signal(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    };
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: kill(2) reads no memory of ours.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// True while process `pid` exists and has not exited: kill(pid, 0)
/// finds it (or finds it someone else's) and it is not a zombie, which
/// still answers kill(2) until its parent reaps it.
pub fn pid_alive(pid: u32) -> bool {
    match signal(pid, 0) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return false,
        Err(_) => {} // EPERM: there, another user's.
    }
    !exited(pid)
}

/// True when /proc says `pid` has exited (state Z, zombie, or X, dead).
fn exited(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        // Gone between kill(2) and now, or no /proc: kill(2) decides.
        return signal(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH));
    };
    // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    fn record(name: &str, pid: u32, device: Option<&str>) -> Record {
        Record {
            pid,
            device: device.map(Into::into),
            ..Record::new(
                name,
                "ublk",
                vec!["iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0".into()],
                false,
            )
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// True when a live attach (not an orphan) has the name `name`.
    fn name_in_use_in(dir: &Path, name: &str) -> bool {
        list_in(dir).is_ok_and(|records| {
            records
                .iter()
                .any(|r| r.name == name && r.state != ORPHANED)
        })
    }

    /// A pid no process has: above any pid_max (2^22).
    const NO_PID: u32 = i32::MAX as u32;

    #[test]
    fn the_directory() {
        assert_eq!(dir_from(None), Path::new("/run/isoe-attach"));
        assert_eq!(dir_from(Some("".into())), Path::new("/run/isoe-attach"));
        assert_eq!(dir_from(Some("/tmp/x".into())), Path::new("/tmp/x"));
    }

    #[test]
    fn save_list_find() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run/isoe-attach");
        assert!(
            list_in(&dir).unwrap().is_empty(),
            "no directory, no records"
        );

        let me = std::process::id();
        let mut db = record("db", me, None);
        db.save_in(&dir).unwrap();
        assert_eq!(mode(&dir), 0o755);
        assert_eq!(mode(&dir.join("db.json")), 0o644);
        assert_eq!(list_in(&dir).unwrap(), vec![db.clone()]);
        assert_eq!(db.state, STARTING);
        assert_eq!(db.pid, me);
        assert!(db.started_unix > 1_700_000_000);

        // Saved again, as it serves: the new record replaces the old one
        // and no temporary file stays.
        db.state = SERVING.into();
        db.device = Some("/dev/ublkb0".into());
        db.ublk_id = Some(0);
        db.stats.reads = 7;
        db.save_in(&dir).unwrap();
        let logs = record("logs", me, Some("/dev/nbd3"));
        logs.save_in(&dir).unwrap();
        assert_eq!(files(&dir), ["db.json", "logs.json"]);
        assert_eq!(list_in(&dir).unwrap(), vec![db.clone(), logs.clone()]);
        let text = fs::read_to_string(dir.join("db.json")).unwrap();
        assert!(text.contains("\"device\": \"/dev/ublkb0\""), "{text}");
        assert!(text.contains("\"reads\": 7"), "{text}");

        for what in ["db", "/dev/ublkb0", "ublkb0"] {
            assert_eq!(find_in(&dir, what).unwrap().as_ref(), Some(&db), "{what}");
        }
        for what in ["logs", "/dev/nbd3", "nbd3"] {
            assert_eq!(find_in(&dir, what).unwrap().as_ref(), Some(&logs), "{what}");
        }
        for what in ["nope", "/dev/ublkb1", "ublkb", "", "/"] {
            assert_eq!(find_in(&dir, what).unwrap(), None, "{what}");
        }
        // A link to the device finds it too.
        let link = tmp.path().join("by-id");
        let device = tmp.path().join("ublkb9");
        fs::write(&device, "").unwrap();
        std::os::unix::fs::symlink(&device, &link).unwrap();
        let mut linked = record("linked", me, Some(device.to_str().unwrap()));
        linked.save_in(&dir).unwrap();
        assert_eq!(
            find_in(&dir, link.to_str().unwrap()).unwrap(),
            Some(linked.clone())
        );

        assert!(name_in_use_in(&dir, "db"));
        assert!(!name_in_use_in(&dir, "db2"));
        remove_in(&dir, "db").unwrap();
        remove_in(&dir, "db").unwrap();
        assert!(!name_in_use_in(&dir, "db"));
        assert_eq!(find_in(&dir, "ublkb0").unwrap(), None);
        linked.name = "../escape".into();
        let e = linked.save_in(&dir).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(remove_in(&dir, "../logs").is_err());
        assert_eq!(files(&dir), ["linked.json", "logs.json"]);
    }

    #[test]
    fn stale_and_garbled_records() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let me = std::process::id();
        record("live", me, None).save_in(dir).unwrap();
        record("gone", NO_PID, Some("/dev/ublkb1"))
            .save_in(dir)
            .unwrap();
        record("zero", 0, None).save_in(dir).unwrap();
        // A process that has ended and been reaped.
        let mut child = Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        record("reaped", child.id(), None).save_in(dir).unwrap();
        fs::write(dir.join("garbled.json"), "{\"name\": \"garbled\", ").unwrap();
        fs::write(dir.join("notes.txt"), "not a record").unwrap();
        fs::write(dir.join("bad name.json"), "{}").unwrap();
        // A record under another's name.
        fs::write(
            dir.join("other.json"),
            serde_json::to_string(&record("live", me, None)).unwrap(),
        )
        .unwrap();

        let names: Vec<String> = list_in(dir).unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["live"]);
        assert_eq!(
            files(dir),
            [
                "bad name.json",
                "garbled.json",
                "live.json",
                "notes.txt",
                "other.json"
            ]
        );
        assert!(!name_in_use_in(dir, "gone"));
        assert_eq!(find_in(dir, "ublkb1").unwrap(), None);
    }

    #[test]
    fn a_stale_record_taken_over_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("db.json");
        record("db", std::process::id(), None)
            .save_in(tmp.path())
            .unwrap();
        remove_stale(&path, NO_PID);
        assert!(path.exists());
        remove_stale(&path, std::process::id());
        assert!(!path.exists());
    }

    /// Waits until `child` runs `comm` (after its exec).
    fn wait_for_comm(child: &Child, comm: &str) {
        let path = format!("/proc/{}/comm", child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while fs::read_to_string(&path).unwrap_or_default().trim() != comm {
            assert!(Instant::now() < deadline, "{comm} did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn detach_stops_the_process() {
        use std::os::unix::process::ExitStatusExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let mut r = record("db", child.id(), Some("/dev/ublkb3"));
        r.state = SERVING.into();
        r.save_in(dir).unwrap();
        let started = Instant::now();
        // A child of this process stays a zombie until waited for: detach
        // sees it gone all the same.
        let detached = detach_in(dir, "ublkb3", Duration::from_secs(10)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(detached, r);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        // The process could not remove its record: detach did.
        assert!(files(dir).is_empty());
    }

    #[test]
    fn detach_says_what_is_attached() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let e = detach_in(dir, "db", Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.to_string(), "db is not attached; nothing is");
        let me = std::process::id();
        record("db", me, Some("/dev/ublkb0")).save_in(dir).unwrap();
        record("logs", me, None).save_in(dir).unwrap();
        let e = detach_in(dir, "/dev/nbd0", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(&e, DetachError::NotAttached { what, .. } if what == "/dev/nbd0"));
        assert_eq!(
            e.to_string(),
            "/dev/nbd0 is not attached; attached: db (/dev/ublkb0), logs (starting)"
        );
    }

    #[test]
    fn detach_times_out_on_a_process_that_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // SIGTERM ignored, across the exec.
        let mut child = Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 30"])
            .spawn()
            .unwrap();
        wait_for_comm(&child, "sleep");
        record("db", child.id(), Some("/dev/ublkb0"))
            .save_in(dir)
            .unwrap();
        let e = detach_in(dir, "db", Duration::from_millis(200)).unwrap_err();
        child.kill().unwrap();
        child.wait().unwrap();
        let pid = child.id();
        assert!(
            matches!(&e, DetachError::TimedOut { pid: p, .. } if *p == pid),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "db (pid {pid}) did not detach within 0.2 s; it may still be writing back \
                 outstanding requests. `kill -9 {pid}` would end it at once and fail the I/O \
                 still queued on the device"
            )
        );
        // Its record stays while it runs; now it is stale.
        assert!(list_in(dir).unwrap().is_empty());
        assert!(files(dir).is_empty());
    }

    #[test]
    fn liveness() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(NO_PID));
        assert!(!pid_alive(u32::MAX), "never kill(-1)");
        assert!(signal(u32::MAX, 0).is_err());
        let mut child = Command::new("true").spawn().unwrap();
        // Exited, not reaped: a zombie answers kill(2) but is gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while pid_alive(child.id()) {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(signal(child.id(), 0).is_ok(), "a zombie until reaped");
        child.wait().unwrap();
    }

    #[test]
    fn one_lu_whatever_the_spelling() {
        let key = |u: &str| lu_key(u).unwrap();
        assert_eq!(
            key("iscsi://Host.Example:3260/IQN.2026-11.io.isoe:DB/0"),
            key("iscsi://host.example/iqn.2026-11.io.isoe:db/0")
        );
        assert_eq!(
            key("iscsi://h/iqn.2026-11.io.isoe:db"),
            key("iscsi://alice@h/iqn.2026-11.io.isoe:db/0"),
            "no LUN is LUN 0, and the user is not the LU's"
        );
        assert_ne!(
            key("iscsi://h/iqn.2026-11.io.isoe:db/0"),
            key("iscsi://h/iqn.2026-11.io.isoe:db/1")
        );
        assert_ne!(
            key("iscsi://h:3261/iqn.2026-11.io.isoe:db/0"),
            key("iscsi://h/iqn.2026-11.io.isoe:db/0")
        );
        assert_eq!(lu_key("not a url"), None);

        let me = std::process::id();
        let mut mp = record("mp", me, Some("/dev/ublkb1"));
        mp.urls = vec![
            "iscsi://a/iqn.2026-11.io.isoe:mp/0".into(),
            "iscsi://b/iqn.2026-11.io.isoe:mp/0".into(),
        ];
        let records = vec![record("db", me, Some("/dev/ublkb0")), mp];
        let found = |urls: &[&str]| {
            let urls: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
            serving_lu(&records, &urls).map(|(r, url)| (r.name.clone(), url))
        };
        assert_eq!(
            found(&["iscsi://192.0.2.10:3260/IQN.2026-11.io.isoe:db/0"]),
            Some((
                "db".into(),
                "iscsi://192.0.2.10:3260/IQN.2026-11.io.isoe:db/0".into()
            ))
        );
        assert_eq!(
            found(&[
                "iscsi://c/iqn.2026-11.io.isoe:mp/0",
                "iscsi://B/iqn.2026-11.io.isoe:mp/0"
            ]),
            Some(("mp".into(), "iscsi://B/iqn.2026-11.io.isoe:mp/0".into())),
            "one path in common is the same LU"
        );
        assert_eq!(
            found(&["iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/1"]),
            None
        );
        assert_eq!(found(&["garbage"]), None);
    }

    #[test]
    fn names() {
        for ok in ["db", "a", "A-Z_a.z-09", &"x".repeat(64), ".", "..", "-x"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", &"x".repeat(65), "a/b", "a b", "é", "db\n", "a:b"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(
            name_rule("a/b"),
            "\"a/b\" is not a device name: 1 to 64 of the characters A-Z a-z 0-9 _ . -"
        );
        let cases = [
            ("iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0", "db-lun0"),
            (
                "iscsi://h:3261/iqn.2001-04.com.example:storage:disk1/12",
                "disk1-lun12",
            ),
            (
                "iscsi://h/iqn.2026-11.io.isoe/3",
                "iqn.2026-11.io.isoe-lun3",
            ),
            (
                "iscsi://h/iqn.2026-11.io.isoe:/3",
                "iqn.2026-11.io.isoe_-lun3",
            ),
            (
                "iscsi://h/eui.02004567a425678d/1",
                "eui.02004567a425678d-lun1",
            ),
            ("iscsi://h/iqn.2026-11.io.isoe:a+b%c/0", "a_b_c-lun0"),
            ("iscsi://h/iqn.2026-11.io.isoe:db", "db-lun0"),
            ("iscsi://alice@h/iqn.2026-11.io.isoe:db/2", "db-lun2"),
            ("not a url", "lu"),
        ];
        for (url, name) in cases {
            assert_eq!(default_name(url), name, "{url}");
        }
        let long = format!("iscsi://h/iqn.2026-11.io.isoe:{}/16383", "y".repeat(100));
        let name = default_name(&long);
        assert!(
            valid_name(&name) && name.len() == 64 && name.ends_with("y-lun16383"),
            "{name}"
        );
    }
}
