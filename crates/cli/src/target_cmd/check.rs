//! `isoe target --check`: everything a start would find wrong with a
//! configuration, found without starting: the file read and validated,
//! each LUN's store looked at (never created, grown or opened for
//! writing), each portal and the metrics address bound and let go, the
//! control socket's directory checked. One line per finding; exit status 0
//! when nothing is wrong, 2 otherwise.

use isoe_size::describe_bytes;
use isoe_target::admin::socket;
use isoe_target::config::{LunSpec, StoreSpec};
use isoe_target::Config;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::ExitCode;

/// What the check found: lines that pass, lines that fail.
#[derive(Default)]
struct Findings {
    ok: Vec<String>,
    wrong: Vec<String>,
}

impl Findings {
    fn note(&mut self, what: String, result: Result<String, String>) {
        match result {
            Ok(detail) => self.ok.push(format!("{what}: {detail}")),
            Err(why) => self.wrong.push(format!("{what}: {why}")),
        }
    }
}

/// Checks the configuration at `path` (None: the embedded default) with
/// `listen` replacing its portals, as `isoe target` would start it.
pub fn run(path: Option<&Path>, listen: &[SocketAddr]) -> ExitCode {
    let config = match path {
        Some(path) => Config::read_file(path).and_then(|(_, config)| super::checked(config)),
        None => Ok(Config::embedded_default()),
    };
    let mut config = match config {
        Ok(config) => config,
        Err(e) => {
            println!("isoe target --check: {e}");
            return ExitCode::from(2);
        }
    };
    if !listen.is_empty() {
        config.set_portals(listen.to_vec());
    }
    let mut findings = Findings::default();
    findings.ok.push(match path {
        Some(p) => format!("{} reads as a valid configuration", p.display()),
        None => "the embedded default configuration".into(),
    });
    for t in &config.targets {
        for lun in &t.luns {
            findings.note(format!("{} LUN {}", t.name, lun.number), store(lun));
        }
    }
    for portal in &config.portals {
        let what = match config.portal_place(*portal) {
            Some(place) => format!("portal {portal} ({place})"),
            None => format!("portal {portal}"),
        };
        findings.note(what, bind_test(*portal));
    }
    if let Some(addr) = config.metrics.listen {
        findings.note(format!("metrics {addr}"), bind_test(addr));
    }
    if let Some(path) = &config.control.socket {
        let result = socket::check_directory(path)
            .map(|()| "its directory is safe".to_string())
            .map_err(|e| e.to_string());
        findings.note(format!("control socket {}", path.display()), result);
    }
    for line in &findings.ok {
        println!("ok: {line}");
    }
    for line in &findings.wrong {
        println!("wrong: {line}");
    }
    if findings.wrong.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// Binds `addr` and lets it go: whether a start could listen there.
fn bind_test(addr: SocketAddr) -> Result<String, String> {
    match TcpListener::bind(addr) {
        Ok(_) => Ok("free".into()),
        Err(e) => Err(format!(
            "cannot listen: {e}{}",
            isoe_target::driver::in_use_by(addr, &e)
        )),
    }
}

/// What a start would do with the LUN's store, said without doing it.
fn store(lun: &LunSpec) -> Result<String, String> {
    match &lun.store {
        StoreSpec::Memory { size_bytes, .. } => {
            Ok(format!("memory, {}", describe_bytes(*size_bytes)))
        }
        StoreSpec::File { path, size_bytes } => file(path, *size_bytes, lun.read_only),
        StoreSpec::Block { path } => open(path, lun.read_only).map(|()| "block device".into()),
        StoreSpec::Rbd(spec) => Ok(format!(
            "rbd image {}: not opened by --check (a start connects to the cluster)",
            spec.name()
        )),
    }
}

fn file(path: &Path, size_bytes: Option<u64>, read_only: bool) -> Result<String, String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return match size_bytes {
            Some(size) => Ok(format!(
                "{} does not exist; a start creates it, {}",
                path.display(),
                describe_bytes(size)
            )),
            None => Err(format!(
                "{} does not exist and no size is given to create it",
                path.display()
            )),
        };
    };
    open(path, read_only)?;
    match size_bytes {
        Some(size) if size < meta.len() => Err(format!(
            "size {} is smaller than the file, {}: a start refuses it",
            describe_bytes(size),
            describe_bytes(meta.len())
        )),
        Some(size) if size > meta.len() => Ok(format!(
            "{}, a start grows it from {} to {}",
            path.display(),
            describe_bytes(meta.len()),
            describe_bytes(size)
        )),
        _ => Ok(format!(
            "{}, {}",
            path.display(),
            describe_bytes(meta.len())
        )),
    }
}

/// Whether `path` opens as a start would open it (for writing unless
/// `read_only`), without writing to it.
fn open(path: &Path, read_only: bool) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(!read_only)
        .open(path)
        .map(drop)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}
