//! `isoe lab --report DIR` on a stored run (a fixture: three cases of a
//! sessions-sweep run, its records and its report input as the lab wrote
//! them): the reports are the ones the report crate draws from those files,
//! byte for byte, again and again, and the same from the files gzipped as
//! docs/results keeps them; a directory that is not a run, a run
//! without its report input and a line that is not a record are refused
//! with the file, the line and what is wrong, and nothing is written.
//! Needs neither root nor network namespaces: it runs nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-report")
}

/// A copy of the fixture, to draw reports into.
fn stored_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["results.jsonl", "report-input.json"] {
        std::fs::copy(fixture().join(f), dir.path().join(f)).unwrap();
    }
    dir
}

fn report(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isoe"))
        .arg("lab")
        .args(args)
        .output()
        .expect("run isoe lab")
}

fn rebuild(dir: &Path) -> Output {
    report(&["--report".as_ref(), dir.as_os_str()])
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_stored_run_is_drawn_again_byte_for_byte() {
    let dir = stored_run();
    let out = rebuild(dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let md_path = dir.path().join("report.md");
    let html_path = dir.path().join("report.html");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "report:  {}\nhtml:    {}\n",
            md_path.display(),
            html_path.display()
        )
    );
    let md = std::fs::read(&md_path).unwrap();
    let html = std::fs::read(&html_path).unwrap();
    // What the report crate draws from the same two files.
    let input = isoe_report::stored::load(&fixture()).unwrap();
    assert!(md == isoe_report::render_markdown(&input).into_bytes());
    assert!(html == isoe_report::render_html(&input).into_bytes());
    let md_text = String::from_utf8(md.clone()).unwrap();
    assert!(md_text.starts_with("# isoe lab report: sessions-sweep\n"));
    assert!(md_text.contains("- **Host:** vm — Intel(R) Xeon(R) Processor, 2 CPUs"));
    assert!(md_text.contains("9 valid runs of 9"), "{md_text}");
    // Again: the same bytes, over the reports already there.
    let again = rebuild(dir.path());
    assert!(again.status.success(), "{}", text(&again));
    assert!(std::fs::read(&md_path).unwrap() == md);
    assert!(std::fs::read(&html_path).unwrap() == html);
}

/// `dir`'s file `name` replaced by `name.gz`, as `gzip -9 name` leaves it.
fn gzip(dir: &Path, name: &str) {
    use std::io::Write;
    let plain = dir.join(name);
    let file = std::fs::File::create(dir.join(format!("{name}.gz"))).unwrap();
    let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    encoder.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    encoder.finish().unwrap();
    std::fs::remove_file(&plain).unwrap();
}

#[test]
fn a_stored_run_gzipped_is_drawn_as_the_plain_one() {
    let plain = stored_run();
    let out = rebuild(plain.path());
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read(plain.path().join("report.md")).unwrap();
    let html = std::fs::read(plain.path().join("report.html")).unwrap();
    for names in [
        &["results.jsonl"][..],
        &["results.jsonl", "report-input.json"][..],
    ] {
        let dir = stored_run();
        for name in names {
            gzip(dir.path(), name);
        }
        let out = rebuild(dir.path());
        assert!(out.status.success(), "{names:?}: {}", text(&out));
        let md_gz = std::fs::read(dir.path().join("report.md")).unwrap();
        assert!(
            md_gz == md,
            "{names:?}: report.md differs:\n{}",
            String::from_utf8_lossy(&md_gz)
        );
        let html_gz = std::fs::read(dir.path().join("report.html")).unwrap();
        assert!(html_gz == html, "{names:?}: report.html differs");
    }
}

/// `isoe lab --report dir` fails with status 1 and `message` alone on
/// stderr, and writes no report.
fn refused(dir: &Path, message: &str) {
    let out = rebuild(dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("isoe lab: error: {message}\n"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty(), "{}", text(&out));
    assert!(!dir.join("report.md").exists());
}

#[test]
fn a_directory_without_results_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &format!(
            "{}: no results.jsonl or results.jsonl.gz here: not the directory of an `isoe lab` \
             run",
            dir.path().display()
        ),
    );
}

#[test]
fn a_run_without_its_report_input_is_refused() {
    let dir = stored_run();
    std::fs::remove_file(dir.path().join("report-input.json")).unwrap();
    refused(
        dir.path(),
        &format!(
            "{}: missing: `isoe lab` writes it beside results.jsonl at the end of a run, so \
             this run is older than that (running its plan again with the same --out resumes it \
             and writes one)",
            dir.path().join("report-input.json").display()
        ),
    );
}

#[test]
fn a_malformed_line_is_named_with_its_file_and_number() {
    let dir = stored_run();
    let path = dir.path().join("results.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[6] = r#"{"plan":"sessions-sweep","case":"baseline","run":"#;
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    refused(
        dir.path(),
        &format!(
            "{}:7: not a run record: EOF while parsing a value (column 49)",
            path.display()
        ),
    );
}

#[test]
fn report_runs_nothing_else() {
    let dir = stored_run();
    let out = report(&[
        "--report".as_ref(),
        dir.path().as_os_str(),
        "--plan".as_ref(),
        "quick".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the argument '--report <DIR>' cannot be used with '--plan <NAME|FILE>'"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("report.md").exists());
}
