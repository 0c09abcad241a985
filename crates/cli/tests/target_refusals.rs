//! Configurations `isoe target` refuses before it binds a portal, with exit
//! status 2 and a message naming the file, the line and the key: a memory
//! LUN no machine could hold (it used to abort the process after binding),
//! and a provisioned file LUN whose backing file has vanished (it used to
//! be recreated empty under the same serial and NAA).

mod support;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{Target, TargetConfig, DEFAULT_TARGET};

/// How long a refused start may take.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `isoe target --config PATH` and returns its exit status and all
/// it printed; fails the test if it is still running after the timeout.
fn run_target(config: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["target", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn isoe target");
    let deadline = Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for isoe target") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("isoe target did not exit within {EXIT_TIMEOUT:?}: it served the configuration");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut output = String::new();
    for stream in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn Read>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut stream = stream;
        stream.read_to_string(&mut output).expect("read the output");
    }
    (status.code(), output)
}

/// Runs the target on `config`, which must be refused at line `line`, key
/// `key`, before any portal is bound; returns the message after the key.
fn refused(config: &TargetConfig, line: usize, key: &str) -> String {
    let (code, output) = run_target(config.path());
    assert_eq!(code, Some(2), "{output}");
    assert!(
        !output.contains("listening on"),
        "a portal was bound:\n{output}"
    );
    let prefix = format!("isoe target: {}:{line}: {key}: ", config.path().display());
    match output.strip_prefix(&prefix) {
        Some(message) => message.to_string(),
        None => panic!("{output:?} does not start with {prefix:?}"),
    }
}

#[test]
fn a_memory_lun_of_an_exbibyte_is_a_configuration_error() {
    let config = TargetConfig::memory_lun("1EiB");
    let message = refused(&config, 8, "target[0].lun[0].memory");
    assert!(
        message.starts_with("a memory LUN is at most 16 TiB"),
        "{message}"
    );
}

#[test]
fn a_provisioned_file_lun_whose_file_vanished_is_refused_at_restart() {
    let config = TargetConfig::file_lun("1MiB");
    let mut target = Target::with_config(&config);
    target.stop_cleanly();
    drop(target);
    std::fs::remove_file(config.lun_file()).expect("remove the backing file");

    let message = refused(&config, 8, "target[0].lun[0].file");
    let record = config
        .dir()
        .join(".isoe-state")
        .join(DEFAULT_TARGET.replace(':', "_"))
        .join("lun-0.toml");
    let expected = format!(
        "the backing file {} is missing, but the identity record {} (serial ",
        config.lun_file().display(),
        record.display()
    );
    assert!(message.starts_with(&expected), "{message}");
    assert!(message.contains("restore the file"), "{message}");
    assert!(!config.lun_file().exists(), "an empty file was created");
}

/// `isoe target ARGS...` until it exits (or the timeout): status and output.
fn run_isoe(args: &[&str]) -> (Option<i32>, String) {
    let out = support::cli::isoe(args);
    (
        out.status.and_then(|s| s.code()),
        format!("{}{}", out.stdout, out.stderr),
    )
}

#[test]
fn a_busy_portal_or_metrics_port_names_what_holds_it() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap().to_string();
    let me = format!("held by pid {} (", std::process::id());
    let config = TargetConfig::memory_lun("16MiB");
    let path = config.path().to_str().unwrap();
    let (status, output) = run_isoe(&["target", "--listen", &busy, "--config", path]);
    assert_ne!(status, Some(0), "{output}");
    assert!(
        output.contains(&format!("cannot listen on {busy}")),
        "{output}"
    );
    assert!(output.contains(&me), "the holder is not named:\n{output}");

    let text = std::fs::read_to_string(config.path()).unwrap();
    std::fs::write(
        config.path(),
        format!("{text}\n[metrics]\nlisten = \"{busy}\"\n"),
    )
    .unwrap();
    let (status, output) = run_isoe(&["target", "--listen", "127.0.0.1:0", "--config", path]);
    assert_ne!(status, Some(0), "{output}");
    assert!(output.contains(&me), "the holder is not named:\n{output}");
    assert!(output.contains("[metrics] listen"), "{output}");
    assert!(
        !output.contains("isoe target started"),
        "said started, then failed:\n{output}"
    );
}

#[test]
fn check_finds_what_a_start_would_refuse_without_starting() {
    let config = TargetConfig::memory_lun("16MiB");
    let path = config.path().to_str().unwrap();
    let (status, output) = run_isoe(&[
        "target",
        "--check",
        "--listen",
        "127.0.0.1:0",
        "--config",
        path,
    ]);
    assert_eq!(status, Some(0), "{output}");
    assert!(output.contains("ok: portal 127.0.0.1:0: free"), "{output}");
    assert!(
        output.contains("memory, 16777216 bytes (16 MiB)"),
        "{output}"
    );

    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap().to_string();
    let image = config.dir().join("new.img");
    let text = std::fs::read_to_string(config.path()).unwrap();
    std::fs::write(
        config.path(),
        format!(
            "{text}\n[[target.lun]]\nnumber = 1\nfile = \"{}\"\nsize = \"4MiB\"\n",
            image.display()
        ),
    )
    .unwrap();
    let (status, output) = run_isoe(&["target", "--check", "--listen", &busy, "--config", path]);
    assert_eq!(status, Some(2), "{output}");
    assert!(
        output.contains(&format!("wrong: portal {busy}: cannot listen")),
        "{output}"
    );
    assert!(
        output.contains("a start creates it, 4194304 bytes (4 MiB)"),
        "{output}"
    );
    assert!(!image.exists(), "--check created the LUN's file");

    std::fs::write(config.path(), "[[target]]\nname = 7\n").unwrap();
    let (status, output) = run_isoe(&["target", "--check", "--config", path]);
    assert_eq!(status, Some(2), "{output}");
    assert!(output.contains(":2: "), "no file:line in\n{output}");
}

#[test]
fn a_file_lun_in_a_missing_directory_is_refused_at_check_and_at_start() {
    let config = TargetConfig::file_lun("1MiB");
    let text = std::fs::read_to_string(config.path()).unwrap();
    std::fs::write(config.path(), text.replace("lun0.img", "gone/lun0.img")).unwrap();
    let gone = config.dir().join("gone");
    let said = format!("the directory {} does not exist", gone.display());

    let path = config.path().to_str().unwrap();
    let (status, output) = run_isoe(&["target", "--check", "--config", path]);
    assert_eq!(status, Some(2), "{output}");
    let prefix = format!("{path}:8: target[0].lun[0].file: ");
    assert!(output.contains(&prefix), "no file:line: key in\n{output}");
    assert!(output.contains(&said), "{output}");

    let message = refused(&config, 8, "target[0].lun[0].file");
    assert!(message.contains(&said), "{message}");
    assert!(!gone.exists(), "the directory was made");
}

#[test]
fn a_busy_portal_of_the_file_is_named_at_its_line_and_key() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap().to_string();
    let config = TargetConfig::memory_lun("16MiB");
    let text = std::fs::read_to_string(config.path()).unwrap();
    let text = text.replace(
        "portals = [\"127.0.0.1:0\"]",
        &format!("portals = [\n  \"127.0.0.1:0\",\n  \"{busy}\",\n]"),
    );
    std::fs::write(config.path(), text).unwrap();
    let path = config.path().to_str().unwrap();
    let (status, output) = run_isoe(&["target", "--config", path]);
    assert_ne!(status, Some(0), "{output}");
    let place = format!("{path}:3: portals[1]: cannot listen on {busy}");
    assert!(output.contains(&place), "{place:?} not in\n{output}");
    let me = format!("held by pid {} (", std::process::id());
    assert!(output.contains(&me), "the holder is not named:\n{output}");

    let (status, output) = run_isoe(&["target", "--check", "--config", path]);
    assert_eq!(status, Some(2), "{output}");
    let wrong = format!("wrong: portal {busy} ({path}:3: portals[1]): cannot listen");
    assert!(output.contains(&wrong), "{wrong:?} not in\n{output}");
}
