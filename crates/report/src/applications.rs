//! Seed 003's application tables: an OLTP database (pgbench here) and a
//! mail server's database (fio in a Jetstress-like profile here) on a file
//! system on each initiator's disk, one row per figure, one column per
//! initiator, each change against the reference column with its interval.

use super::document::{para, Block, Cell};
use super::effects::effect_cell;
use super::numbers::num;
use super::summary::{field, samples, valid_runs};
use super::{ReportInput, WorkloadInfo};
use crate::stats::Sample;
use serde_json::Value;

/// Which application a workload's runs ran (`bench.application.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// PostgreSQL's pgbench.
    Oltp,
    /// fio in a Jetstress-like profile.
    Mail,
}

impl Kind {
    /// The kind `application` names; None for one the report does not know.
    fn of(application: &Value) -> Option<Kind> {
        match application.get("kind")?.as_str()? {
            "oltp" => Some(Kind::Oltp),
            "mail" => Some(Kind::Mail),
            _ => None,
        }
    }

    /// The table's rows.
    fn rows(self) -> &'static [Row] {
        match self {
            Kind::Oltp => &OLTP_ROWS,
            Kind::Mail => &MAIL_ROWS,
        }
    }
}

/// One row of an application table: what it shows, and where each run's
/// value of it is in the run's bench JSON.
struct Row {
    /// The figure and its unit, for people.
    label: &'static str,
    /// The path to the figure.
    path: &'static [&'static str],
    /// For a block I/O figure of one direction: that direction, whose runs
    /// without I/O in it are left out (they report zeros).
    direction: Option<&'static str>,
}

impl Row {
    /// This row's figure in one run's bench JSON.
    fn value(&self, bench: &Value) -> Option<f64> {
        if let Some(d) = self.direction {
            if field(bench, &[d, "ios"]).is_some_and(|n| n <= 0.0) {
                return None;
            }
        }
        field(bench, self.path)
    }
}

/// A row of a figure the application reports itself.
const fn app(label: &'static str, path: &'static [&'static str]) -> Row {
    Row {
        label,
        path,
        direction: None,
    }
}

const OLTP_ROWS: [Row; 15] = [
    app("transactions/s", &["application", "tps"]),
    app(
        "transaction latency min (ms)",
        &["application", "latency_ms", "min"],
    ),
    app(
        "transaction latency mean (ms)",
        &["application", "latency_ms", "mean"],
    ),
    app(
        "transaction latency p50 (ms)",
        &["application", "latency_ms", "p50"],
    ),
    app(
        "transaction latency p99 (ms)",
        &["application", "latency_ms", "p99"],
    ),
    app(
        "transaction latency p99.9 (ms)",
        &["application", "latency_ms", "p999"],
    ),
    app("block I/O per second", &["iops"]),
    Row {
        label: "block read latency mean (µs)",
        path: &["read", "lat_us", "mean"],
        direction: Some("read"),
    },
    Row {
        label: "block write latency mean (µs)",
        path: &["write", "lat_us", "mean"],
        direction: Some("write"),
    },
    app("processor time (%)", &["application", "processor_time_pct"]),
    PROCESSOR_MIN,
    PROCESSOR_MAX,
    app(
        "CPU-µs per transaction",
        &["application", "cpu_us_per_transaction"],
    ),
    MEMORY_USED,
    INITIATOR_RSS,
];

/// The host second by second (seed 003's processor time minimum and
/// maximum, and its memory utilization), in both tables.
const PROCESSOR_MIN: Row = app(
    "processor time, least second (%)",
    &["application", "processor_time_min_pct"],
);
const PROCESSOR_MAX: Row = app(
    "processor time, most second (%)",
    &["application", "processor_time_max_pct"],
);
const MEMORY_USED: Row = app(
    "host memory used, most (MiB)",
    &["application", "memory_used_max_mib"],
);
const INITIATOR_RSS: Row = app(
    "initiator process memory, most (MiB)",
    &["application", "initiator_rss_max_mib"],
);

const MAIL_ROWS: [Row; 9] = [
    app("transactional IOPS", &["application", "transactional_iops"]),
    app(
        "database read average latency (ms)",
        &["application", "db_read_avg_ms"],
    ),
    app(
        "database write average latency (ms)",
        &["application", "db_write_avg_ms"],
    ),
    app(
        "log write average latency (ms)",
        &["application", "log_write_avg_ms"],
    ),
    app("processor time (%)", &["application", "processor_time_pct"]),
    PROCESSOR_MIN,
    PROCESSOR_MAX,
    MEMORY_USED,
    INITIATOR_RSS,
];

/// The plan's application workloads, in its order, each with the
/// `application` object of its first valid run that carries one.
pub(super) fn workloads(input: &ReportInput) -> Vec<(&WorkloadInfo, &Value)> {
    input
        .workloads
        .iter()
        .filter_map(|w| {
            let app = input
                .records
                .iter()
                .filter(|r| r.valid && r.workload == w.name)
                .find_map(|r| r.bench.get("application").filter(|a| a.is_object()))?;
            Some((w, app))
        })
        .collect()
}

/// The application tables, after the latency section; nothing when no
/// workload ran an application.
pub(super) fn section(input: &ReportInput) -> Vec<Block> {
    let apps = workloads(input);
    if apps.is_empty() {
        return Vec::new();
    }
    let mut b = vec![
        Block::Heading(2, "Applications".into(), Some("applications")),
        para(
            "Seed 003's application tests: a database on a file system on each initiator's disk, \
             the figures the application reports about itself beside the block I/O it made. \
             Each cell is the mean over the case's valid runs; beside it, for every case but \
             the baseline, its change against its reference (the baseline, or the case named \
             after \"vs\"), paired round by round, with the 95% confidence interval.",
        ),
    ];
    for (w, app) in apps {
        b.push(Block::Heading(
            3,
            format!("{}: {}", w.name, title(app)),
            None,
        ));
        if !w.description.is_empty() {
            b.push(para(w.description.clone()));
        }
        b.extend(workload_table(input, w, app));
    }
    b
}

/// One workload's table and what it means; a sentence instead when the
/// report does not know its application.
fn workload_table(input: &ReportInput, w: &WorkloadInfo, app: &Value) -> Vec<Block> {
    let Some(kind) = Kind::of(app) else {
        let named = app.get("kind").and_then(Value::as_str).unwrap_or("none");
        return vec![para(format!(
            "Not tabulated: the runs name an application kind this report does not know \
             ({named:?})."
        ))];
    };
    let cases: Vec<&str> = input
        .cases
        .iter()
        .filter(|c| c.runs(&w.name))
        .map(|c| c.name.as_str())
        .collect();
    let rows = kind
        .rows()
        .iter()
        // A figure no run has (results from before the lab read it) is
        // left out rather than shown as a row of dashes.
        .filter(|row| {
            cases
                .iter()
                .any(|case| !row_samples(input, w, case, row).is_empty())
        })
        .map(|row| {
            let mut cells: Vec<Cell> = vec![row.label.into()];
            cells.extend(cases.iter().map(|case| figure(input, w, case, row)));
            cells
        })
        .collect();
    let mut head = vec!["figure".to_string()];
    head.extend(cases.iter().map(|c| c.to_string()));
    let mut right = vec![false];
    right.extend(cases.iter().map(|_| true));
    vec![
        Block::Table { head, right, rows },
        para(format!(
            "Higher is better for transactions and I/O per second; lower is better for \
             latencies and CPU. A change whose interval crosses 0 is not significant; bold: \
             significant and conclusive (beyond ±{}% of the reference).",
            input.rules.significance_pct
        )),
    ]
}

/// One figure of one case: its mean, and for a case with a reference its
/// change against the reference's, paired by round.
fn figure(input: &ReportInput, w: &WorkloadInfo, case: &str, row: &Row) -> Cell {
    let own = row_samples(input, w, case, row);
    let Some(mean) = sample_mean(&own) else {
        return "–".into();
    };
    let baseline = input.baseline().map_or("baseline", |b| b.name.as_str());
    if case == baseline {
        return num(Some(mean)).into();
    }
    let reference = input.reference_of(case);
    let theirs = row_samples(input, w, reference, row);
    let against = if reference == baseline {
        String::new()
    } else {
        format!(" vs {reference}")
    };
    match input.rules.compare(&theirs, &own) {
        Some(e) => {
            let change = effect_cell(Some(e), &against);
            Cell {
                text: format!("{}, {}", num(Some(mean)), change.text),
                strong: change.strong,
            }
        }
        None => num(Some(mean)).into(),
    }
}

/// The figure of each valid run of `case` × `w`, with its round.
fn row_samples(input: &ReportInput, w: &WorkloadInfo, case: &str, row: &Row) -> Vec<Sample> {
    samples(&valid_runs(input, case, &w.name), |b| row.value(b))
}

fn sample_mean(samples: &[Sample]) -> Option<f64> {
    (!samples.is_empty())
        .then(|| samples.iter().map(|s| s.value).sum::<f64>() / samples.len() as f64)
}

/// The application as seed 003 names its tests: "OLTP (pgbench
/// tpcb-like, scale 10, 4 clients, ext4)", "Mail database (fio, a
/// Jetstress-like profile: 32 KiB database I/O 60% reads, 8 KiB
/// synchronous log writes, ext4)"; what a run did not record is left out.
pub(super) fn title(app: &Value) -> String {
    let text = |key: &str| app.get(key).and_then(Value::as_str).map(str::to_string);
    let filesystem = text("filesystem");
    match Kind::of(app) {
        Some(Kind::Oltp) => {
            let mut parts = vec![text("mix").map_or("pgbench".into(), |m| format!("pgbench {m}"))];
            parts.extend(whole(app, "scale").map(|s| format!("scale {s}")));
            parts.extend(whole(app, "clients").map(|c| match c.as_str() {
                "1" => "1 client".to_string(),
                _ => format!("{c} clients"),
            }));
            parts.extend(filesystem);
            format!("OLTP ({})", parts.join(", "))
        }
        Some(Kind::Mail) => {
            let mut parts = vec![mail_profile(app)];
            parts.extend(filesystem);
            format!("Mail database ({})", parts.join(", "))
        }
        None => format!(
            "application {}",
            text("kind").unwrap_or_else(|| "of an unknown kind".into())
        ),
    }
}

/// "fio, a Jetstress-like profile: 32 KiB database I/O 60% reads, 8 KiB
/// synchronous log writes", from the profile's sizes where the run
/// recorded them (`db_block_bytes`, `read_pct`, `log_block_bytes`).
fn mail_profile(app: &Value) -> String {
    let kib = |key: &str| {
        let bytes = app.get(key)?.as_f64().filter(|b| *b > 0.0)?;
        Some(whole_number(bytes / 1024.0))
    };
    let mut shape = Vec::new();
    if let Some(db) = kib("db_block_bytes") {
        let reads = whole(app, "read_pct").map_or(String::new(), |p| format!(" {p}% reads"));
        shape.push(format!("{db} KiB database I/O{reads}"));
    }
    if let Some(log) = kib("log_block_bytes") {
        shape.push(format!("{log} KiB synchronous log writes"));
    }
    let profile = "fio, a Jetstress-like profile";
    if shape.is_empty() {
        profile.to_string()
    } else {
        format!("{profile}: {}", shape.join(", "))
    }
}

/// The number `app[key]`, written without a fraction when it has none.
fn whole(app: &Value, key: &str) -> Option<String> {
    app.get(key)?
        .as_f64()
        .filter(|v| v.is_finite())
        .map(whole_number)
}

/// "10" for 10.0, "2.5" for 2.5.
fn whole_number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn titles_name_the_application_as_seed_003_does() {
        let oltp = json!({"kind": "oltp", "filesystem": "ext4", "mix": "tpcb-like",
                          "scale": 10.0, "clients": 4.0});
        assert_eq!(
            title(&oltp),
            "OLTP (pgbench tpcb-like, scale 10, 4 clients, ext4)"
        );
        let mail = json!({"kind": "mail", "filesystem": "xfs", "db_block_bytes": 32768,
                          "read_pct": 60, "log_block_bytes": 8192.0});
        assert_eq!(
            title(&mail),
            "Mail database (fio, a Jetstress-like profile: 32 KiB database I/O 60% reads, \
             8 KiB synchronous log writes, xfs)"
        );
        // What a run did not record is left out, not made up.
        assert_eq!(
            title(&json!({"kind": "mail"})),
            "Mail database (fio, a Jetstress-like profile)"
        );
        assert_eq!(
            title(&json!({"kind": "oltp", "clients": 1})),
            "OLTP (pgbench, 1 client)"
        );
        assert_eq!(title(&json!({"kind": "web"})), "application web");
    }

    #[test]
    fn a_direction_without_io_has_no_block_latency() {
        let read = OLTP_ROWS
            .iter()
            .find(|r| r.direction == Some("read"))
            .unwrap();
        let idle = json!({"read": {"ios": 0, "lat_us": {"mean": 0.0}}});
        let busy = json!({"read": {"ios": 10, "lat_us": {"mean": 120.0}}});
        assert_eq!(read.value(&idle), None);
        assert_eq!(read.value(&busy), Some(120.0));
    }
}
