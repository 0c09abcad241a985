//! A run's directory as the report reads it back, so that the report can
//! be drawn again (`isoe lab --report DIR`), byte for byte, after a change
//! to the writer or where only the results were kept:
//!
//! - `results.jsonl` ([`RESULTS_FILE`]): the records, one per line, in the
//!   order the runs were made;
//! - `report-input.json` ([`INPUT_FILE`]): everything else the report is
//!   drawn from, as the lab assembled it at the run's end: the plan as it
//!   ran (its text, and its cases, workloads and rules after the command
//!   line's overrides), the machine, the runner's notes and the cases it
//!   skipped.
//!
//! Either may be kept gzipped instead, as `results.jsonl.gz` and
//! `report-input.json.gz` ([`GZ_SUFFIX`]): the runs committed under
//! `docs/results` are, their records being most of the repository's
//! size. The plain file is read where both are there: it is the one a
//! live run appends to. The lab itself always writes them plain.
//!
//! The second file exists because none of it can be found again later:
//! the machine may be another by then, a shipped plan may have changed,
//! and flags such as `--target` or `--testbed` change what ran without
//! showing in the plan's text.
//!
//! Reading is strict where the runner is lenient. A line that is not a run
//! record is an error naming the file and the line, never skipped: a report
//! drawn again must rest on the runs the first one did, and a corrupt or
//! hand-edited line would otherwise leave it without a word. (The runner,
//! resuming, drops a line cut short by a crash and makes that run again.)

use crate::record::RunRecord;
use crate::{write_reports, ReportInput, ReportPaths};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The records of a run, one JSON object per line.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The rest of what a run's report is drawn from ([`ReportInput`] without
/// its records), as pretty-printed JSON.
pub const INPUT_FILE: &str = "report-input.json";
/// What [`RESULTS_FILE`] or [`INPUT_FILE`] ends in when kept gzipped: read
/// in its place when the plain file is not there.
pub const GZ_SUFFIX: &str = ".gz";

/// Why a run's report could not be drawn again.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoredError {
    /// The directory holds no `results.jsonl`, plain or gzipped.
    #[error(
        "{}: no {RESULTS_FILE} or {RESULTS_FILE}{GZ_SUFFIX} here: not the directory of an \
         `isoe lab` run",
        .dir.display()
    )]
    NoResults {
        /// The directory.
        dir: PathBuf,
    },
    /// The run has no `report-input.json`, plain or gzipped: the lab that
    /// made it did not write one yet.
    #[error(
        "{}: missing: `isoe lab` writes it beside {RESULTS_FILE} at the end of a run, so this run \
         is older than that (running its plan again with the same --out resumes it and writes one)",
        .path.display()
    )]
    NoInput {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A file or directory could not be read or written, or a gzipped
    /// one is not gzip.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A line of `results.jsonl` is not a run record.
    #[error("{}:{line}: not a run record: {what}", .path.display())]
    Record {
        /// `results.jsonl`.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
    /// A line of `results.jsonl` records a run of another plan.
    #[error(
        "{}:{line}: a run of plan {found:?}, but {INPUT_FILE} is plan {expected:?}",
        .path.display()
    )]
    OtherPlan {
        /// `results.jsonl`.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The plan the line names.
        found: String,
        /// The plan of `report-input.json`.
        expected: String,
    },
    /// `report-input.json` is not what the lab writes.
    #[error("{}: not a report input: {what}", .path.display())]
    Input {
        /// `report-input.json`.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
}

/// Saves `input` but its records as `dir`'s `report-input.json`, then
/// draws `report.md` and `report.html` from it as it reads back, so that
/// [`rebuild`] draws the same bytes later. `input.records` must be as
/// `results.jsonl` gives them back, each parsed from its line, not as
/// measured: serde_json reads a float back a unit in the last place off
/// now and then, and the two reports must rest on the same values.
pub fn write(input: ReportInput, dir: &Path) -> Result<ReportPaths, StoredError> {
    let path = save_input(&input, dir).map_err(|source| StoredError::Io {
        path: dir.join(INPUT_FILE),
        source,
    })?;
    let mut back = read_input(&path)?;
    back.records = input.records;
    write_reports(&back, dir).map_err(|source| StoredError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `input` but its records into `dir`'s `report-input.json`; the
/// records are `results.jsonl`'s.
pub fn save_input(input: &ReportInput, dir: &Path) -> io::Result<PathBuf> {
    let path = dir.join(INPUT_FILE);
    let mut text = serde_json::to_string_pretty(input).map_err(io::Error::other)?;
    text.push('\n');
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Everything `dir`'s report is drawn from: `report-input.json` with the
/// records of `results.jsonl`, each plain or gzipped.
pub fn load(dir: &Path) -> Result<ReportInput, StoredError> {
    std::fs::metadata(dir).map_err(|source| StoredError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let Some(results) = kept(dir, RESULTS_FILE) else {
        return Err(StoredError::NoResults {
            dir: dir.to_path_buf(),
        });
    };
    // Neither there: the plain name, which read_input calls missing.
    let input_path = kept(dir, INPUT_FILE).unwrap_or_else(|| dir.join(INPUT_FILE));
    let mut input = read_input(&input_path)?;
    let records = numbered_records(&results)?;
    if let Some((line, r)) = records.iter().find(|(_, r)| r.plan != input.plan_name) {
        return Err(StoredError::OtherPlan {
            path: results,
            line: *line,
            found: r.plan.clone(),
            expected: input.plan_name.clone(),
        });
    }
    input.records = records.into_iter().map(|(_, r)| r).collect();
    Ok(input)
}

/// Draws `dir`'s `report.md` and `report.html` again from what the run
/// stored there.
pub fn rebuild(dir: &Path) -> Result<ReportPaths, StoredError> {
    let input = load(dir)?;
    write_reports(&input, dir).map_err(|source| StoredError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// `dir`'s file `name`, plain if it is there, else gzipped if that is;
/// `None` if neither is.
pub fn kept(dir: &Path, name: &str) -> Option<PathBuf> {
    let plain = dir.join(name);
    if plain.exists() {
        return Some(plain);
    }
    let gzipped = dir.join(format!("{name}{GZ_SUFFIX}"));
    gzipped.exists().then_some(gzipped)
}

/// The report input of `path`, without records; `path` is gunzipped if
/// its name ends in [`GZ_SUFFIX`].
pub fn read_input(path: &Path) -> Result<ReportInput, StoredError> {
    let text = match contents(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(StoredError::NoInput {
                path: path.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(StoredError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_slice(&text).map_err(|e| StoredError::Input {
        path: path.to_path_buf(),
        what: e.to_string(),
    })
}

/// The records of `path`, in its order; blank lines are passed over.
/// `path` is gunzipped if its name ends in [`GZ_SUFFIX`]; a line's number
/// in an error is then its number in the gunzipped text.
pub fn read_records(path: &Path) -> Result<Vec<RunRecord>, StoredError> {
    Ok(numbered_records(path)?
        .into_iter()
        .map(|(_, r)| r)
        .collect())
}

/// The records of `path` with the numbers of their lines, from 1.
fn numbered_records(path: &Path) -> Result<Vec<(usize, RunRecord)>, StoredError> {
    let bytes = read(path)?;
    let mut records = Vec::new();
    for (i, line) in lines(&bytes) {
        let record = serde_json::from_slice(line).map_err(|e| StoredError::Record {
            path: path.to_path_buf(),
            line: i,
            what: without_position(&e),
        })?;
        records.push((i, record));
    }
    Ok(records)
}

fn read(path: &Path) -> Result<Vec<u8>, StoredError> {
    contents(path).map_err(|source| StoredError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The bytes of `path`, gunzipped if its name ends in [`GZ_SUFFIX`]
/// (every member, as `gunzip` reads a file of several).
fn contents(path: &Path) -> io::Result<Vec<u8>> {
    let bytes = std::fs::read(path)?;
    if !path.to_string_lossy().ends_with(GZ_SUFFIX) {
        return Ok(bytes);
    }
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes.as_slice()).read_to_end(&mut text)?;
    Ok(text)
}

/// The lines of `bytes` that are not blank, with their numbers from 1.
fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
}

/// serde_json's message without its "at line 1 column N", which counts
/// within the one line: the column alone.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => format!("{message} (column {})", e.column()),
        None => text,
    }
}
