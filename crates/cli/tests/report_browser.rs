//! The page a person opens: `report.html`, drawn by `isoe lab --report`
//! from a stored run, loaded in headless Chromium at a laptop's width
//! (1366 x 768): no script error and nothing on the console's error
//! channel, every chart (an `<svg>`) with a size, and nothing wider than
//! the window outside the boxes that scroll sideways on purpose (`.wide`
//! tables, `pre`). The checks run in the page itself (a script added to a
//! copy of it) and come back in the DOM Chromium prints.
//!
//! Drawn from two runs: the test fixture (three cases of a sessions
//! sweep) and the quick plan's sample run kept in docs/results, whose
//! first screen is kept beside it as `first-screen.png`
//! (`ISOE_SCREENSHOT=PATH` writes this run's to PATH).
//!
//! Needs `chromium` (Debian's package; `.ci/run` installs it); skipped with
//! the reason without it, unless CI is set.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The window: a common laptop screen.
const WIDTH: u32 = 1366;
const HEIGHT: u32 = 768;

/// Put first in `<head>`: records script errors and console.error calls
/// from the page's own scripts on.
const HOOKS: &str = r#"<script>
window.__isoeProblems = [];
window.addEventListener('error', function (e) {
  window.__isoeProblems.push('script error: ' + e.message);
});
(function () {
  var error = console.error;
  console.error = function () {
    window.__isoeProblems.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return error.apply(console, arguments);
  };
})();
</script>"#;

/// Put last in `<body>`: the checks once the page has loaded, their
/// outcome in `<body data-isoe-check="...">` ("ok", or the problems).
const CHECKS: &str = r#"<script>
window.addEventListener('load', function () {
  var problems = window.__isoeProblems;
  var width = document.documentElement.clientWidth;
  var charts = document.querySelectorAll('svg');
  charts.forEach(function (svg, i) {
    var r = svg.getBoundingClientRect();
    if (!(r.width > 0 && r.height > 0)) {
      problems.push('chart ' + i + ' has no size (' + r.width + ' x ' + r.height + ')');
    }
  });
  if (document.documentElement.scrollWidth > width) {
    problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + width + ' px window');
  }
  var overflowing = 0;
  document.querySelectorAll('body *').forEach(function (e) {
    if (e.closest('.wide, pre') || e.tagName === 'SCRIPT') { return; }
    var r = e.getBoundingClientRect();
    if (r.right > width + 1 && overflowing++ < 5) {
      problems.push('<' + e.tagName.toLowerCase() + '> reaches ' + Math.round(r.right) + ' px: ' + (e.textContent || '').trim().slice(0, 60));
    }
  });
  document.body.setAttribute('data-isoe-check',
    (problems.length ? problems.join(' | ') : 'ok') + ' [charts ' + charts.length + ']');
});
</script>"#;

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: CI installs chromium (.ci/run), but it is missing"
        );
        eprintln!("SKIPPED {test}: chromium is not installed (apt-get install chromium)");
    }
    found
}

/// `isoe lab --report` of a copy of `run` (a stored run's folder): the
/// folder with its report.html.
fn drawn(run: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(run).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("results.jsonl") || name.starts_with("report-input.json") {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_isoe"))
        .args(["lab", "--report"])
        .arg(dir.path())
        .output()
        .expect("run isoe lab --report");
    assert!(
        out.status.success(),
        "isoe lab --report {}: {}",
        run.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Chromium's common options: headless, its own profile, the window.
fn browser(chromium: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        &format!("--window-size={WIDTH},{HEIGHT}"),
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// What the checks in the page found: "ok [charts N]" or the problems.
fn check_in_browser(chromium: &Path, html: &Path) -> String {
    let page = std::fs::read_to_string(html).unwrap();
    let checked = page
        .replacen("<head>", &format!("<head>{HOOKS}"), 1)
        .replacen("</body>", &format!("{CHECKS}</body>"), 1);
    assert!(
        checked.contains(HOOKS) && checked.contains(CHECKS),
        "no <head> or </body>"
    );
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("checked.html");
    std::fs::write(&copy, checked).unwrap();
    let out = browser(chromium, &dir.path().join("profile"))
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", copy.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom
        .find("data-isoe-check=\"")
        .unwrap_or_else(|| panic!("the checks did not run: {}", &dom[..dom.len().min(2000)]))
        + "data-isoe-check=\"".len();
    let end = dom[start..].find('"').unwrap() + start;
    dom[start..end].replace("&lt;", "<").replace("&gt;", ">")
}

fn assert_sound(check: &str, what: &str, charts_at_least: usize) {
    let charts: usize = check
        .rsplit_once("[charts ")
        .and_then(|(_, n)| n.trim_end_matches(']').parse().ok())
        .unwrap_or(0);
    assert!(check.starts_with("ok "), "{what}: {check}");
    assert!(charts >= charts_at_least, "{what}: {check}");
}

fn results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results")
}

#[test]
fn the_fixture_s_report_loads_clean_and_fits_a_laptop() {
    let Some(chromium) = chromium_or_skip("the_fixture_s_report_loads_clean_and_fits_a_laptop")
    else {
        return;
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-report");
    let run = drawn(&fixture);
    let check = check_in_browser(&chromium, &run.path().join("report.html"));
    assert_sound(&check, "the fixture's report", 1);
}

#[test]
fn the_quick_sample_report_loads_clean_and_fits_a_laptop() {
    let Some(chromium) = chromium_or_skip("the_quick_sample_report_loads_clean_and_fits_a_laptop")
    else {
        return;
    };
    let sample = results().join("2026-12-02-lab-quick-filled");
    let run = drawn(&sample);
    let html = run.path().join("report.html");
    let check = check_in_browser(&chromium, &html);
    assert_sound(&check, "the quick plan's sample report", 2);
    if let Some(path) = std::env::var_os("ISOE_SCREENSHOT") {
        let profile = tempfile::tempdir().unwrap();
        let out = browser(&chromium, profile.path())
            .arg(format!("--screenshot={}", PathBuf::from(path).display()))
            .arg(format!("file://{}", html.display()))
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The checks can fail: a page with a script error, a console error, a
/// chart with no size and a block wider than the window gets each named.
#[test]
fn a_broken_page_fails_each_check() {
    let Some(chromium) = chromium_or_skip("a_broken_page_fails_each_check") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("broken.html");
    std::fs::write(
        &html,
        "<!doctype html><html><head><title>t</title></head><body>\
         <svg width=\"0\" height=\"0\"></svg>\
         <div style=\"width:3000px\">far too wide</div>\
         <div class=\"wide\"><table style=\"width:3000px\"><tr><td>scrolls</td></tr></table></div>\
         <script>console.error('drawn wrong'); no_such_function();</script>\
         </body></html>",
    )
    .unwrap();
    let check = check_in_browser(&chromium, &html);
    for problem in [
        "script error: Uncaught ReferenceError: no_such_function is not defined",
        "console.error: drawn wrong",
        "chart 0 has no size",
        "the page is ",
        "<div> reaches 3008 px: far too wide",
    ] {
        assert!(check.contains(problem), "{problem:?} not in {check}");
    }
    assert!(!check.contains("scrolls"), "{check}");
}
