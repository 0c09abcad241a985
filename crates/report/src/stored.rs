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
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The records of a run, one JSON object per line.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The rest of what a run's report is drawn from ([`ReportInput`] without
/// its records), as pretty-printed JSON.
pub const INPUT_FILE: &str = "report-input.json";

/// Why a run's report could not be drawn again.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoredError {
    /// The directory holds no `results.jsonl`.
    #[error("{}: no {RESULTS_FILE} here: not the directory of an `isoe lab` run", .dir.display())]
    NoResults {
        /// The directory.
        dir: PathBuf,
    },
    /// The run has no `report-input.json`: the lab that made it did not
    /// write one yet.
    #[error(
        "{}: missing: `isoe lab` writes it beside {RESULTS_FILE} at the end of a run, so this run \
         is older than that (running its plan again with the same --out resumes it and writes one)",
        .path.display()
    )]
    NoInput {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A file or directory could not be read or written.
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
/// records of `results.jsonl`.
pub fn load(dir: &Path) -> Result<ReportInput, StoredError> {
    std::fs::metadata(dir).map_err(|source| StoredError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let results = dir.join(RESULTS_FILE);
    if !results.exists() {
        return Err(StoredError::NoResults {
            dir: dir.to_path_buf(),
        });
    }
    let mut input = read_input(&dir.join(INPUT_FILE))?;
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

/// The report input of `path`, without records.
pub fn read_input(path: &Path) -> Result<ReportInput, StoredError> {
    let text = match std::fs::read(path) {
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
    std::fs::read(path).map_err(|source| StoredError::Io {
        path: path.to_path_buf(),
        source,
    })
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
