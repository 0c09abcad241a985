//! A device file: what one `isoe attach` serves and how, written once per
//! device as `/etc/isoe/attach/NAME.toml` (the `isoe-attach@NAME` unit
//! reads it with `--config`).
//!
//! ```toml
//! url = "iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0"
//! # or several paths of one LU:
//! # urls = ["iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0",
//! #         "iscsi://198.51.100.10/iqn.2026-11.io.isoe:db/0"]
//! # multipath = true
//! transport = "auto"          # "ublk", "nbd"; auto: ublk, NBD where ublk is missing
//! queue_depth = 128           # 1..=4096
//! replacement_timeout = 120   # seconds a lost session may take to come back; 0: fail at once
//! connections = 1             # 1..=16 per session
//! scheduling = "normal"       # the serving thread's: "normal", or "realtime" (SCHED_FIFO 1)
//! zero_copy = true            # ublk: Data-In straight into the request's pages where the kernel allows
//! header_digest = false
//! data_digest = false
//! initiator_name = "iqn.2026-11.io.isoe:host1"
//! chap_user = "db-host"
//! chap_secret_file = "/etc/isoe/attach/db.secret"
//! target_user = "array"
//! target_secret_file = "/etc/isoe/attach/db.target-secret"
//! ```
//!
//! Only `url` (or `urls`) is required. Secrets never live in the device
//! file: a URL with a password (`user%secret@`) is refused, and the CHAP
//! secrets come from files of their own ([`read_secret`]: mode 600, like
//! ssh's keys) or, for the command line, from `ISOE_CHAP_SECRET` and
//! `ISOE_TARGET_SECRET`. Relative paths start from the device file's
//! directory. Every error names the file, the line, the key and what is
//! expected; an unknown key gets a hint at the key it is probably a typo of.

use isoe_config::{Field, Node, Reader, Table};
use isoe_initiator::IscsiUrl;
use isoe_wire::chap::Secret;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// The environment variable the command line takes the CHAP secret from.
pub const ENV_CHAP_SECRET: &str = "ISOE_CHAP_SECRET";
/// The environment variable the command line takes the mutual CHAP
/// (target's) secret from.
pub const ENV_TARGET_SECRET: &str = "ISOE_TARGET_SECRET";

/// The default `queue_depth`: requests the kernel may have outstanding.
pub const DEFAULT_QUEUE_DEPTH: u16 = 128;
/// The largest `queue_depth` (ublk's own bound, UBLK_MAX_QUEUE_DEPTH).
pub const MAX_QUEUE_DEPTH: u16 = 4096;
/// The default `replacement_timeout`: how long requests wait for a lost
/// session to come back before they fail (open-iscsi's
/// `node.session.timeo.replacement_timeout` has the same default).
pub const DEFAULT_REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest `replacement_timeout`, in seconds (a day).
pub const MAX_REPLACEMENT_TIMEOUT_S: u32 = 86_400;
/// The most `connections` per session.
pub const MAX_CONNECTIONS: u16 = 16;
/// The longest CHAP user name, in bytes (the target's bound too).
pub const USER_MAX_BYTES: usize = 255;
/// The largest secret file read, in bytes: anything longer is not a secret.
const SECRET_FILE_MAX_BYTES: u64 = 4096;

/// Which kernel front-end serves the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Transport {
    /// ublk where the kernel has it (`ublk_drv`), NBD otherwise.
    #[default]
    Auto,
    /// ublk (`/dev/ublkbN`): requests through io_uring.
    Ublk,
    /// NBD (`/dev/nbdN`): the kernel's `nbd` driver on a socket pair.
    Nbd,
}

impl Transport {
    /// Every transport, in the order error messages list them.
    pub const ALL: [Transport; 3] = [Transport::Auto, Transport::Ublk, Transport::Nbd];

    /// The name as written in a device file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Ublk => "ublk",
            Transport::Nbd => "nbd",
        }
    }

    /// The transport called `name`, if any.
    pub fn from_name(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// How the serving thread is scheduled ([`crate::scheduling`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Scheduling {
    /// SCHED_OTHER: the thread takes its turn beside the applications.
    #[default]
    Normal,
    /// SCHED_FIFO at the lowest real-time priority: the thread runs as
    /// soon as a request or an answer wakes it, ahead of every ordinary
    /// process, as the kernel initiator's softirq work does.
    Realtime,
}

impl Scheduling {
    /// Every policy, in the order error messages list them.
    pub const ALL: [Scheduling; 2] = [Scheduling::Normal, Scheduling::Realtime];

    /// The name as written in a device file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scheduling::Normal => "normal",
            Scheduling::Realtime => "realtime",
        }
    }

    /// The policy called `name`, if any.
    pub fn from_name(name: &str) -> Option<Scheduling> {
        Scheduling::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl std::fmt::Display for Scheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One device file, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `url`, or the `urls`, as written: never empty, no two naming the
    /// same path, none with a password, each naming its LUN.
    pub urls: Vec<String>,
    /// `multipath`: the URLs are paths of one LU. Required (true) with more
    /// than one URL.
    pub multipath: bool,
    /// `transport`.
    pub transport: Transport,
    /// `queue_depth`, 1..=[`MAX_QUEUE_DEPTH`].
    pub queue_depth: u16,
    /// `replacement_timeout` (whole seconds); zero fails requests at once
    /// when the session is lost.
    pub replacement_timeout: Duration,
    /// `connections` per session, 1..=[`MAX_CONNECTIONS`].
    pub connections: u16,
    /// `scheduling` of the serving thread.
    pub scheduling: Scheduling,
    /// `zero_copy`: ublk receives a read's data straight into the
    /// request's pages where the kernel offers it (6.16+) and no data
    /// digest is on; false keeps the copying path.
    pub zero_copy: bool,
    /// `header_digest`: CRC32C on PDU headers.
    pub header_digest: bool,
    /// `data_digest`: CRC32C on data segments.
    pub data_digest: bool,
    /// `initiator_name`, an iSCSI name; `None`: the initiator's default.
    pub initiator_name: Option<String>,
    /// `chap_user`: the CHAP_N to log in with (overrides a URL's user).
    pub chap_user: Option<String>,
    /// `chap_secret_file`, resolved against the device file's directory;
    /// read it with [`read_secret`].
    pub chap_secret_file: Option<PathBuf>,
    /// `target_user`: mutual CHAP, the name the target must answer with.
    pub target_user: Option<String>,
    /// `target_secret_file`: mutual CHAP, the target's secret, resolved as
    /// `chap_secret_file`.
    pub target_secret_file: Option<PathBuf>,
}

impl Default for Settings {
    /// No URL; every other key at its default.
    fn default() -> Settings {
        Settings {
            urls: Vec::new(),
            multipath: false,
            transport: Transport::Auto,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            replacement_timeout: DEFAULT_REPLACEMENT_TIMEOUT,
            connections: 1,
            scheduling: Scheduling::Normal,
            zero_copy: true,
            header_digest: false,
            data_digest: false,
            initiator_name: None,
            chap_user: None,
            chap_secret_file: None,
            target_user: None,
            target_secret_file: None,
        }
    }
}

/// Why a device file or a secret file was refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file could not be read, is not TOML, or has a key or value
    /// `isoe attach` does not accept.
    #[error(transparent)]
    File(#[from] isoe_config::FileError),
    /// A secret file that cannot be used: unreadable, open to other users,
    /// empty. The message names the file; the secret never shows.
    #[error("{message}")]
    Secret {
        /// The secret file.
        path: PathBuf,
        /// What is wrong and how to mend it.
        message: String,
    },
}

impl SettingsError {
    /// The 1-based line of the device file the error points at, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            SettingsError::File(e) => e.line(),
            SettingsError::Secret { .. } => None,
        }
    }
}

isoe_config::impl_read_error!(SettingsError);

/// Every key of a device file.
pub const KEYS: &[&str] = &[
    "url",
    "urls",
    "multipath",
    "transport",
    "queue_depth",
    "replacement_timeout",
    "connections",
    "scheduling",
    "zero_copy",
    "header_digest",
    "data_digest",
    "initiator_name",
    "chap_user",
    "chap_secret_file",
    "target_user",
    "target_secret_file",
];

type R = Reader<SettingsError>;

/// Reads and checks the device file at `path`. Secret files are named, not
/// read: [`read_secret`] reads them when the login needs them.
pub fn read(path: &Path) -> Result<Settings, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| isoe_config::FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Checks device-file `text`; `path` names it in errors and anchors
/// relative paths.
pub fn parse(text: &str, path: &Path) -> Result<Settings, SettingsError> {
    let r = R::new(text, path.display().to_string());
    let base = path.parent().unwrap_or(Path::new(""));
    let mut root = r.root(text)?;
    r.deny_unknown(&root, KEYS)?;
    read_settings(&r, &mut root, base)
}

fn read_settings(r: &R, root: &mut Table, base: &Path) -> Result<Settings, SettingsError> {
    let mut s = Settings::default();
    let urls = read_urls(r, root)?;
    s.urls = urls.parsed.iter().map(|(text, _)| text.clone()).collect();
    let multipath = root.take("multipath");
    if let Some(f) = &multipath {
        s.multipath = r.bool(f)?;
    }
    if s.urls.len() > 1 && !s.multipath {
        let why = format!(
            "{} URLs are paths of one LU only with `multipath = true`: set it, or give one URL",
            s.urls.len(),
        );
        return Err(match &multipath {
            Some(f) => r.at(f, why),
            None => r.invalid(urls.offset, &urls.key, why),
        });
    }
    if let Some(f) = root.take("transport") {
        let names = Transport::ALL.map(Transport::name);
        let name = r.choice(&f, &names)?;
        s.transport = Transport::from_name(name).expect("one of the names");
    }
    if let Some(f) = root.take("queue_depth") {
        s.queue_depth = r.u16_in(&f, 1, MAX_QUEUE_DEPTH)?;
    }
    if let Some(f) = root.take("replacement_timeout") {
        if let Node::Float(_) = f.node {
            return Err(r.wrong_type(&f, "whole seconds, an integer"));
        }
        let seconds = r.u32_in(&f, 0, MAX_REPLACEMENT_TIMEOUT_S)?;
        s.replacement_timeout = Duration::from_secs(seconds.into());
    }
    if let Some(f) = root.take("connections") {
        s.connections = r.u16_in(&f, 1, MAX_CONNECTIONS)?;
    }
    if let Some(f) = root.take("scheduling") {
        let names = Scheduling::ALL.map(Scheduling::name);
        let name = r.choice(&f, &names)?;
        s.scheduling = Scheduling::from_name(name).expect("one of the names");
    }
    if let Some(f) = root.take("zero_copy") {
        s.zero_copy = r.bool(&f)?;
    }
    if let Some(f) = root.take("header_digest") {
        s.header_digest = r.bool(&f)?;
    }
    if let Some(f) = root.take("data_digest") {
        s.data_digest = r.bool(&f)?;
    }
    if let Some(f) = root.take("initiator_name") {
        let name = r.string(&f)?;
        isoe_wire::name::validate(&name).map_err(|e| r.at(&f, e.to_string()))?;
        s.initiator_name = Some(name);
    }
    let chap_user = root.take("chap_user");
    if let Some(f) = &chap_user {
        s.chap_user = Some(read_user(r, f)?);
    }
    let chap_secret_file = root.take("chap_secret_file");
    if let Some(f) = &chap_secret_file {
        s.chap_secret_file = Some(read_path(r, f, base)?);
    }
    let target_user = root.take("target_user");
    if let Some(f) = &target_user {
        s.target_user = Some(read_user(r, f)?);
    }
    let target_secret_file = root.take("target_secret_file");
    if let Some(f) = &target_secret_file {
        s.target_secret_file = Some(read_path(r, f, base)?);
    }
    debug_assert!(root.entries.is_empty(), "deny_unknown ran on the document");

    // Keys that mean something only beside others.
    let has_user = s.chap_user.is_some() || urls.parsed.iter().all(|(_, u)| u.user.is_some());
    if let (Some(f), false) = (&chap_secret_file, has_user) {
        return Err(r.at(
            f,
            "a CHAP secret needs a CHAP user: set `chap_user` (or write iscsi://USER@... in \
             every URL)",
        ));
    }
    if let (Some(f), None) = (&target_secret_file, &target_user) {
        return Err(r.at(
            f,
            "the target's secret needs `target_user`, the name the target answers with",
        ));
    }
    if let (Some(f), false) = (&target_user, has_user) {
        return Err(r.at(
            f,
            "mutual CHAP needs the initiator's CHAP user too: set `chap_user` (or write \
             iscsi://USER@... in every URL)",
        ));
    }
    Ok(s)
}

/// The URLs of a device file, as written and parsed, and the key
/// (`url` or `urls`) they were written at.
struct Urls {
    key: String,
    offset: usize,
    parsed: Vec<(String, IscsiUrl)>,
}

/// `url` or `urls`, exactly one of them.
fn read_urls(r: &R, root: &mut Table) -> Result<Urls, SettingsError> {
    match (root.take("url"), root.take("urls")) {
        (Some(a), Some(b)) => {
            let second = if a.offset > b.offset { a } else { b };
            Err(r.at(
                &second,
                "give `url` (one path) or `urls` (several), not both",
            ))
        }
        (None, None) => Err(r.missing(
            root,
            "url",
            "the LU to attach, as url = \"iscsi://HOST[:PORT]/IQN/LUN\" (or urls = [...] with \
             multipath = true)",
        )),
        (Some(f), None) => {
            let url = read_url(r, &f)?;
            Ok(Urls {
                key: f.key,
                offset: f.offset,
                parsed: vec![url],
            })
        }
        (None, Some(f)) => {
            let (key, offset) = (f.key.clone(), f.offset);
            let mut texts = Vec::new();
            // Compared by what they name (the default port written or
            // not), shown without a password.
            let parsed = r.distinct(
                f,
                "a list of URLs like [\"iscsi://HOST/IQN/0\", \"iscsi://HOST2/IQN/0\"]",
                "at least one URL is needed",
                |item| {
                    let (text, url) = read_url(r, item)?;
                    texts.push(text);
                    Ok(url)
                },
                |u| u.to_string(),
            )?;
            Ok(Urls {
                key,
                offset,
                parsed: texts.into_iter().zip(parsed).collect(),
            })
        }
    }
}

/// One `iscsi://` URL that names its LUN and carries no password.
fn read_url(r: &R, f: &Field) -> Result<(String, IscsiUrl), SettingsError> {
    let Node::Str(text) = &f.node else {
        return Err(r.wrong_type(f, "a URL like \"iscsi://HOST[:PORT]/IQN/LUN\""));
    };
    // UrlError's text masks a password, and nothing here quotes `text`.
    let url = IscsiUrl::parse(text).map_err(|e| r.at(f, e.to_string()))?;
    if url.password.is_some() {
        return Err(r.at(
            f,
            format!(
                "the URL carries a CHAP secret (user%secret@), which a device file must not: \
                 secrets belong in chap_secret_file (mode 600) or the environment variable \
                 {ENV_CHAP_SECRET}"
            ),
        ));
    }
    if url.lun.is_none() {
        return Err(r.at(f, format!("{url}: name the LUN at the end, as in {url}/0")));
    }
    Ok((text.clone(), url))
}

/// A CHAP name: 1 to [`USER_MAX_BYTES`] bytes without control characters.
fn read_user(r: &R, f: &Field) -> Result<String, SettingsError> {
    let user = r.string(f)?;
    if user.is_empty() || user.len() > USER_MAX_BYTES || user.chars().any(char::is_control) {
        return Err(r.at(
            f,
            format!(
                "a CHAP user name is 1 to {USER_MAX_BYTES} bytes of text without control \
                 characters"
            ),
        ));
    }
    Ok(user)
}

/// A non-empty path, relative ones from the device file's directory.
fn read_path(r: &R, f: &Field, base: &Path) -> Result<PathBuf, SettingsError> {
    let text = r.string(f)?;
    if text.is_empty() {
        return Err(r.at(f, "expected a path, found an empty string"));
    }
    let path = PathBuf::from(text);
    Ok(if path.is_relative() {
        base.join(path)
    } else {
        path
    })
}

/// Reads a secret file: its bytes without one trailing newline (`\n` or
/// `\r\n`). Refused when its group or other users have any access to it
/// (like ssh's private keys), when it is not a regular file, and when it
/// holds no secret. No message quotes the secret.
pub fn read_secret(path: &Path) -> Result<Secret, SettingsError> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let refuse = |message: String| SettingsError::Secret {
        path: path.to_path_buf(),
        message,
    };
    let file =
        std::fs::File::open(path).map_err(|e| refuse(format!("cannot read {shown}: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot read {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(format!("{shown} is not a regular file")));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(refuse(format!(
            "{shown} is open to other users (mode {mode:04o}); a secret file must be its \
             owner's alone: chmod 600 {shown}"
        )));
    }
    let mut bytes = Vec::new();
    file.take(SECRET_FILE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read {shown}: {e}")))?;
    if bytes.len() as u64 > SECRET_FILE_MAX_BYTES {
        return Err(refuse(format!(
            "{shown} holds more than {SECRET_FILE_MAX_BYTES} bytes: not a CHAP secret"
        )));
    }
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.truncate(bytes.len() - 1);
    }
    if bytes.is_empty() {
        return Err(refuse(format!(
            "{shown} is empty: it should hold the CHAP secret (one trailing newline is not \
             part of it)"
        )));
    }
    Ok(Secret::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const URL: &str = "iscsi://192.0.2.10/iqn.2026-11.io.isoe:db/0";
    const URL2: &str = "iscsi://198.51.100.10:3261/iqn.2026-11.io.isoe:db/0";
    const FILE: &str = "/etc/isoe/attach/db.toml";

    fn parse_at(text: &str) -> Result<Settings, SettingsError> {
        parse(text, Path::new(FILE))
    }

    fn error(text: &str) -> String {
        parse_at(text).expect_err("refused").to_string()
    }

    #[test]
    fn a_url_alone_gets_every_default() {
        let s = parse_at(&format!("url = {URL:?}\n")).unwrap();
        assert_eq!(
            s,
            Settings {
                urls: vec![URL.into()],
                ..Settings::default()
            }
        );
        assert_eq!(s.transport, Transport::Auto);
        assert_eq!(s.queue_depth, 128);
        assert_eq!(s.replacement_timeout, Duration::from_secs(120));
        assert_eq!(s.connections, 1);
        assert_eq!(s.scheduling, Scheduling::Normal);
        assert!(!s.multipath && !s.header_digest && !s.data_digest);
        assert!(s.initiator_name.is_none() && s.chap_user.is_none());
    }

    #[test]
    fn every_key() {
        let text = format!(
            "urls = [{URL:?}, {URL2:?}]\n\
             multipath = true\n\
             transport = \"nbd\"\n\
             queue_depth = 4096\n\
             replacement_timeout = 0\n\
             connections = 16\n\
             scheduling = \"realtime\"\n\
             zero_copy = false\n\
             header_digest = true\n\
             data_digest = true\n\
             initiator_name = \"iqn.2026-11.io.isoe:host1\"\n\
             chap_user = \"db-host\"\n\
             chap_secret_file = \"db.secret\"\n\
             target_user = \"array\"\n\
             target_secret_file = \"/root/array.secret\"\n"
        );
        let s = parse_at(&text).unwrap();
        assert_eq!(
            s,
            Settings {
                urls: vec![URL.into(), URL2.into()],
                multipath: true,
                transport: Transport::Nbd,
                queue_depth: 4096,
                replacement_timeout: Duration::ZERO,
                connections: 16,
                scheduling: Scheduling::Realtime,
                zero_copy: false,
                header_digest: true,
                data_digest: true,
                initiator_name: Some("iqn.2026-11.io.isoe:host1".into()),
                chap_user: Some("db-host".into()),
                // Relative to the device file's directory.
                chap_secret_file: Some("/etc/isoe/attach/db.secret".into()),
                target_user: Some("array".into()),
                target_secret_file: Some("/root/array.secret".into()),
            }
        );
        for p in Scheduling::ALL {
            let s = parse_at(&format!("url = {URL:?}\nscheduling = {:?}\n", p.name())).unwrap();
            assert_eq!(s.scheduling, p);
        }
        assert_eq!(
            error(&format!("url = {URL:?}\nscheduling = \"fifo\"\n")),
            "/etc/isoe/attach/db.toml:2: scheduling: expected one of \"normal\", \"realtime\", found \"fifo\""
        );
        for t in Transport::ALL {
            let s = parse_at(&format!("url = {URL:?}\ntransport = {:?}\n", t.name())).unwrap();
            assert_eq!(s.transport, t);
            assert_eq!(Transport::from_name(&t.to_string()), Some(t));
        }
        assert_eq!(Transport::from_name("iscsi"), None);
        let s = parse_at(&format!(
            "url = {URL:?}\nmultipath = true\nqueue_depth = 1\n"
        ))
        .unwrap();
        assert!(s.multipath);
        assert_eq!(s.queue_depth, 1);
        let s = parse_at(&format!("url = {URL:?}\nreplacement_timeout = 86400\n")).unwrap();
        assert_eq!(s.replacement_timeout, Duration::from_secs(86_400));
        // A user in every URL is the CHAP user the secret file goes with.
        let s = parse_at(
            "url = \"iscsi://alice@192.0.2.10/iqn.2026-11.io.isoe:db/0\"\n\
             chap_secret_file = \"/etc/isoe/attach/db.secret\"\n\
             target_user = \"array\"\n",
        )
        .unwrap();
        assert_eq!(s.chap_user, None);
        assert!(s.chap_secret_file.is_some() && s.target_user.is_some());
        // The user alone: the secret comes from the environment.
        let s = parse_at(&format!("url = {URL:?}\nchap_user = \"u\"\n")).unwrap();
        assert_eq!(s.chap_user.as_deref(), Some("u"));
    }

    #[test]
    fn bad_values_name_the_file_the_line_and_the_key() {
        let cases: &[(&str, &str)] = &[
            (
                "transport = \"iscsi\"",
                "db.toml:2: transport: expected one of \"auto\", \"ublk\", \"nbd\", found \"iscsi\"",
            ),
            (
                "transport = 1",
                "db.toml:2: transport: expected one of \"auto\", \"ublk\", \"nbd\", found an integer (1)",
            ),
            (
                "queue_depth = 0",
                "db.toml:2: queue_depth: 0 is out of range 1..=4096",
            ),
            (
                "queue_depth = 4097",
                "db.toml:2: queue_depth: 4097 is out of range 1..=4096",
            ),
            (
                "queue_depth = \"128\"",
                "db.toml:2: queue_depth: expected an integer, found a string (\"128\")",
            ),
            (
                "replacement_timeout = -1",
                "db.toml:2: replacement_timeout: -1 is out of range 0..=86400",
            ),
            (
                "replacement_timeout = 1.5",
                "db.toml:2: replacement_timeout: expected whole seconds, an integer, found a float (1.5)",
            ),
            (
                "replacement_timeout = \"2m\"",
                "db.toml:2: replacement_timeout: expected an integer, found a string (\"2m\")",
            ),
            (
                "connections = 0",
                "db.toml:2: connections: 0 is out of range 1..=16",
            ),
            (
                "connections = 17",
                "db.toml:2: connections: 17 is out of range 1..=16",
            ),
            (
                "header_digest = \"yes\"",
                "db.toml:2: header_digest: expected true or false, found a string (\"yes\")",
            ),
            (
                "data_digest = 1",
                "db.toml:2: data_digest: expected true or false, found an integer (1)",
            ),
            (
                "multipath = \"true\"",
                "db.toml:2: multipath: expected true or false",
            ),
            (
                "initiator_name = \"host1\"",
                "db.toml:2: initiator_name: expected an iSCSI name",
            ),
            (
                "initiator_name = \"iqn.2026-11.io.isoe:Host1\"",
                "db.toml:2: initiator_name: character 'H' at byte 20",
            ),
            (
                "chap_user = \"\"",
                "db.toml:2: chap_user: a CHAP user name is 1 to 255 bytes",
            ),
            (
                "chap_user = \"a\"\nchap_secret_file = \"\"",
                "db.toml:3: chap_secret_file: expected a path, found an empty string",
            ),
            (
                "chap_user = \"a\"\nchap_secret_file = 600",
                "db.toml:3: chap_secret_file: expected a string, found an integer (600)",
            ),
            (
                "chap_secret_file = \"/etc/isoe/attach/db.secret\"",
                "db.toml:2: chap_secret_file: a CHAP secret needs a CHAP user: set `chap_user`",
            ),
            (
                "chap_user = \"a\"\ntarget_user = \"\"",
                "db.toml:3: target_user: a CHAP user name is 1 to 255 bytes",
            ),
            (
                "chap_user = \"a\"\ntarget_secret_file = \"t.secret\"",
                "db.toml:3: target_secret_file: the target's secret needs `target_user`",
            ),
            (
                "target_user = \"array\"",
                "db.toml:2: target_user: mutual CHAP needs the initiator's CHAP user too",
            ),
        ];
        for (line, expected) in cases {
            let e = error(&format!("url = {URL:?}\n{line}\n"));
            assert!(
                e.starts_with(&format!("/etc/isoe/attach/{expected}")),
                "{line}: {e}"
            );
        }
    }

    #[test]
    fn the_urls() {
        assert_eq!(
            error("transport = \"ublk\"\n"),
            "/etc/isoe/attach/db.toml:1: url: missing: the LU to attach, as url = \
             \"iscsi://HOST[:PORT]/IQN/LUN\" (or urls = [...] with multipath = true)"
        );
        assert_eq!(
            error(&format!("url = {URL:?}\nurls = [{URL2:?}]\n")),
            "/etc/isoe/attach/db.toml:2: urls: give `url` (one path) or `urls` (several), not both"
        );
        // Several paths need multipath = true: said at `urls`, or at
        // `multipath` where it is written false.
        assert_eq!(
            error(&format!("urls = [{URL:?}, {URL2:?}]\n")),
            "/etc/isoe/attach/db.toml:1: urls: 2 URLs are paths of one LU only with \
             `multipath = true`: set it, or give one URL"
        );
        let e = error(&format!(
            "urls = [{URL:?}, {URL2:?}]\n\nmultipath = false\n"
        ));
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:3: multipath: 2 URLs"),
            "{e}"
        );
        // One in a list is one path.
        let s = parse_at(&format!("urls = [{URL:?}]\n")).unwrap();
        assert_eq!(s.urls, vec![URL.to_string()]);
        // The same path twice, even written differently.
        assert_eq!(
            error(&format!(
                "multipath = true\nurls = [\n  {URL:?},\n  \
                 \"iscsi://192.0.2.10:3260/iqn.2026-11.io.isoe:db/0\",\n]\n"
            )),
            "/etc/isoe/attach/db.toml:4: urls[1]: \
             iscsi://192.0.2.10:3260/iqn.2026-11.io.isoe:db/0 is listed twice"
        );
        assert_eq!(
            error("urls = []\n"),
            "/etc/isoe/attach/db.toml:1: urls: at least one URL is needed"
        );
        assert_eq!(
            error("url = \"http://x/y\"\n"),
            "/etc/isoe/attach/db.toml:1: url: \"http://x/y\" is not an iSCSI URL: expected \
             iscsi://[user[%password]@]host[:port]/IQN/LUN"
        );
        assert_eq!(
            error("url = \"iscsi://192.0.2.10/iqn.2026-11.io.isoe:db\"\n"),
            "/etc/isoe/attach/db.toml:1: url: iscsi://192.0.2.10:3260/iqn.2026-11.io.isoe:db: \
             name the LUN at the end, as in iscsi://192.0.2.10:3260/iqn.2026-11.io.isoe:db/0"
        );
        let e = error("url = 3\n");
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:1: url: expected a URL like"),
            "{e}"
        );
        let e = error("urls = \"iscsi://h/iqn.2026-11.io.isoe:db/0\"\n");
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:1: urls: expected a list of URLs"),
            "{e}"
        );
    }

    #[test]
    fn a_password_in_a_url_is_refused_and_never_quoted() {
        let with_password = "iscsi://alice%hunter2hunter2@192.0.2.10/iqn.2026-11.io.isoe:db/0";
        assert_eq!(
            error(&format!("url = {with_password:?}\n")),
            "/etc/isoe/attach/db.toml:1: url: the URL carries a CHAP secret (user%secret@), \
             which a device file must not: secrets belong in chap_secret_file (mode 600) or \
             the environment variable ISOE_CHAP_SECRET"
        );
        let e = error(&format!(
            "multipath = true\nurls = [{URL:?}, {with_password:?}]\n"
        ));
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:2: urls[1]: the URL carries a CHAP secret"),
            "{e}"
        );
        // Wrong in another way too: the error still hides the password.
        let e = error(
            "url = \"iscsi://alice%hunter2hunter2@192.0.2.10:99999/iqn.2026-11.io.isoe:db/0\"\n",
        );
        assert!(e.starts_with("/etc/isoe/attach/db.toml:1: url: "), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn unknown_keys_get_a_typo_hint() {
        assert_eq!(
            error(&format!("url = {URL:?}\n\nqueue_dpeth = 64\n")),
            format!(
                "/etc/isoe/attach/db.toml:3: queue_dpeth: unknown key (did you mean \
                 `queue_depth`?); expected one of: {}",
                KEYS.join(", ")
            )
        );
        let e = error(&format!("url = {URL:?}\ntransprot = \"nbd\"\n"));
        assert!(
            e.starts_with(
                "/etc/isoe/attach/db.toml:2: transprot: unknown key (did you mean `transport`?)"
            ),
            "{e}"
        );
        let e = error(&format!("url = {URL:?}\n[options]\nx = 1\n"));
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:2: options: unknown key; expected one of"),
            "{e}"
        );
    }

    #[test]
    fn syntax_errors_and_missing_files() {
        let e =
            parse_at("url = \"iscsi://h/iqn.2026-11.io.isoe:db/0\nqueue_depth = 1\n").unwrap_err();
        assert_eq!(e.line(), Some(1));
        let e = e.to_string();
        assert!(
            e.starts_with("/etc/isoe/attach/db.toml:1:") && e.contains("TOML syntax error"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        let e = read(&missing).unwrap_err();
        assert!(
            matches!(e, SettingsError::File(isoe_config::FileError::Read { .. })),
            "{e}"
        );
        assert_eq!(e.line(), None);
        assert!(e
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())));
    }

    #[test]
    fn read_resolves_secret_files_beside_the_device_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.toml");
        std::fs::write(
            &path,
            format!("url = {URL:?}\nchap_user = \"u\"\nchap_secret_file = \"db.secret\"\n"),
        )
        .unwrap();
        let s = read(&path).unwrap();
        assert_eq!(s.chap_secret_file, Some(dir.path().join("db.secret")));
    }

    fn secret_file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn secret_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let p = secret_file(d, "a", b"0123456789ab\n", 0o600);
        assert_eq!(read_secret(&p).unwrap(), Secret::new("0123456789ab"));
        let p = secret_file(d, "b", b"0123456789ab\r\n", 0o400);
        assert_eq!(read_secret(&p).unwrap(), Secret::new("0123456789ab"));
        // One newline goes; the bytes are the secret otherwise.
        let p = secret_file(d, "c", b" s e c r e t \n\n", 0o600);
        assert_eq!(read_secret(&p).unwrap(), Secret::new(" s e c r e t \n"));
        let p = secret_file(d, "d", b"no newline", 0o600);
        assert_eq!(read_secret(&p).unwrap(), Secret::new("no newline"));

        for (mode, shown) in [
            (0o640, "0640"),
            (0o604, "0604"),
            (0o620, "0620"),
            (0o610, "0610"),
            (0o666, "0666"),
        ] {
            let p = secret_file(d, "open", b"0123456789ab\n", mode);
            let e = read_secret(&p).unwrap_err();
            assert!(matches!(&e, SettingsError::Secret { path, .. } if *path == p));
            assert_eq!(
                e.to_string(),
                format!(
                    "{0} is open to other users (mode {shown}); a secret file must be its \
                     owner's alone: chmod 600 {0}",
                    p.display()
                )
            );
        }

        for bytes in [&b""[..], b"\n", b"\r\n"] {
            let p = secret_file(d, "empty", bytes, 0o600);
            let e = read_secret(&p).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{} is empty", p.display())), "{e}");
        }
        let p = secret_file(d, "big", &[b'x'; 4097], 0o600);
        let e = read_secret(&p).unwrap_err().to_string();
        assert!(e.contains("holds more than 4096 bytes"), "{e}");
        let p = secret_file(d, "just", &[b'x'; 4096], 0o600);
        assert_eq!(read_secret(&p).unwrap().len(), 4096);
        let absent = d.join("absent");
        let e = read_secret(&absent).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot read {}: ", absent.display())),
            "{e}"
        );
        let sub = d.join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = read_secret(&sub).unwrap_err().to_string();
        assert_eq!(e, format!("{} is not a regular file", sub.display()));
    }
}
