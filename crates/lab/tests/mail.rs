//! The mail workload's fio jobs and their figures, from a real fio 3.33
//! `json+` run of [`MailProfile::fio_args`] (tests/fixtures/fio; 64 MiB
//! database, 16 MiB log, 8 threads, 2 s, on this machine's disk).

use isoe_lab::mail::{MailError, MailProfile, MailResult};
use isoe_lab::peers::fio::FioOutput;
use serde_json::Value;

fn fixture() -> Value {
    let path = format!(
        "{}/tests/fixtures/fio/mail-json-plus.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// fio's output as the lab reads it.
fn read(v: &Value) -> FioOutput {
    serde_json::from_value(v.clone()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 1e-9
}

#[test]
fn the_figures_are_jetstress_s_names_for_fio_s_numbers() {
    let r = MailResult::from_fio(&read(&fixture())).unwrap();
    assert!(
        close(r.db_reads_per_s, 22463.268366),
        "{}",
        r.db_reads_per_s
    );
    assert!(close(r.db_writes_per_s, 14986.006997));
    assert!(close(r.transactional_iops, 22463.268366 + 14986.006997));
    assert!(
        close(r.db_read_avg_ms, 0.202863301344),
        "{}",
        r.db_read_avg_ms
    );
    assert!(close(r.db_write_avg_ms, 0.228366592478));
    assert!(close(r.log_writes_per_s, 2484.257871));
    assert!(close(r.log_write_avg_ms, 0.401782106015));
    assert_eq!(r.errors, 0);
}

#[test]
fn the_histograms_hold_every_completion_fio_binned() {
    let r = MailResult::from_fio(&read(&fixture())).unwrap();
    let reads = r.db_read_latency.summary();
    // fio's clat N for the db job's reads and writes.
    assert_eq!(reads.count, 44952);
    assert_eq!(r.db_write_latency.summary().count, 29991);
    // fio's own median, 185,344 ns, and maximum, 3,322,918 ns, within
    // the rounding of fio's bins and of the HdrHistogram.
    assert!(
        (reads.p50_us - 185.344).abs() < 185.344 * 0.02,
        "{}",
        reads.p50_us
    );
    assert!(
        (reads.max_us - 3322.918).abs() < 3322.918 * 0.02,
        "{}",
        reads.max_us
    );
}

#[test]
fn the_arguments_make_two_jobs_database_and_write_through_log() {
    let p = MailProfile {
        threads: 8,
        ..MailProfile::default()
    };
    let args = p.fio_args("/mnt/x");
    let at = |s: &str| {
        args.iter()
            .position(|a| a == s)
            .unwrap_or_else(|| panic!("{s}"))
    };
    let (db, log) = (at("--name=db"), at("--name=log"));
    assert!(at("--directory=/mnt/x") < db && db < log);
    // Job options follow their --name.
    for a in ["--rw=randrw", "--rwmixread=60", "--bs=32768", "--iodepth=8"] {
        assert!((db..log).contains(&at(a)), "{a}");
    }
    for a in ["--rw=write", "--bs=8192", "--iodepth=1", "--sync=dsync"] {
        assert!(at(a) > log, "{a}");
    }
    assert!(args.contains(&"--output-format=json+".to_string()));
}

#[test]
fn output_without_a_job_or_a_figure_is_an_error_naming_it() {
    let mut v = fixture();
    v["jobs"]
        .as_array_mut()
        .unwrap()
        .retain(|j| j["jobname"] != "log");
    assert_eq!(
        MailResult::from_fio(&read(&v)).unwrap_err(),
        MailError::NoJob("log")
    );
    let mut v = fixture();
    v["jobs"][0]["write"]["lat_ns"] = Value::Null;
    let err = MailResult::from_fio(&read(&v)).unwrap_err();
    assert_eq!(err.to_string(), "fio's job \"db\" has no write.lat_ns.mean");
}
