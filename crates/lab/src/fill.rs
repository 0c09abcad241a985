//! Reads read written data: before a case's first read, the lab writes its
//! LUN once (`isoe bench --fill`), and after each run it asks an isoe
//! target how many bytes it served from blocks never written.
//!
//! A memory LUN that was never written answers a read with zeros made on
//! the fly: no trip to memory, nothing a user's read would cost. The fill
//! is sequential, large writes of data that is neither zeros nor one block
//! repeated, through the initiator host's `isoe bench` over iSCSI, so it
//! works alike for every target the lab starts (isoe, tgt, LIO) and for an
//! external one whose test bed allows writes. Its time is reported
//! ([`LunFill`]) and counted in no run.
//!
//! Applications are not filled for: they write what they read (pgbench
//! initializes its tables; the mail load lays out its files first).

use crate::knobs::{KnobSet, TargetImpl};
use crate::plan::Plan;
use crate::record::LunFill;
use isoe_bench::fill::FillOutput;
use std::time::Duration;

/// The longest a fill may take: 512 MiB at 5 MB/s (an emulated VM's
/// slowest runs) with room to spare.
pub const FILL_LIMIT: Duration = Duration::from_secs(300);

/// The write size and writes in flight of a fill: large sequential writes,
/// as deep as the lab's deepest sequential workload.
const FILL_ARGS: [&str; 4] = ["--bs", "1MiB", "--qd", "8"];

/// Whether a case with `knobs` running `workloads` of `plan` reads blocks
/// through a block workload (a floor or a stream reads none; an
/// application writes what it reads).
pub fn reads_blocks(plan: &Plan, knobs: &KnobSet, workloads: &[String]) -> bool {
    if knobs.is_floor() {
        return false;
    }
    workloads
        .iter()
        .filter_map(|name| plan.workload(name))
        .any(|w| w.application.is_none() && w.stream.is_none() && w.read_pct() > 0)
}

/// `isoe bench`'s option for the plan's span (`[run] span`), for its runs
/// and its fill: one region for every initiator, so that they all read
/// the same written memory.
pub fn span_args(plan: &Plan) -> [String; 2] {
    ["--span".to_owned(), plan.run.span_bytes.to_string()]
}

/// `isoe bench --fill` of the LU at `url`, as the initiator host runs it
/// (`isoe` there is `isoe`): the span every case's reads address, with the
/// session knobs a login needs.
pub fn fill_argv(isoe: &str, url: &str, plan: &Plan, knobs: &KnobSet) -> Vec<String> {
    let mut argv: Vec<String> = [isoe, "bench", "--fill", url]
        .into_iter()
        .chain(FILL_ARGS)
        .chain(["--json", "-"])
        .map(str::to_owned)
        .collect();
    argv.extend(span_args(plan));
    // One session of one connection writes a LU: MC/S is the runs' business.
    argv.extend(knobs.digest_args());
    argv
}

/// What a fill's output (`isoe bench --fill --json -`) says it wrote.
pub fn parse_fill(stdout: &str) -> Result<LunFill, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("isoe bench --fill printed no result: {}", stdout.trim()))?;
    let out: FillOutput = serde_json::from_str(line)
        .map_err(|e| format!("isoe bench --fill printed bad JSON: {e}"))?;
    Ok(LunFill {
        bytes: out.fill.bytes,
        seconds: out.fill.seconds,
    })
}

/// Whether the lab's counter query applies: only isoe's target counts
/// reads of never-written blocks.
pub fn target_counts_unwritten(knobs: &KnobSet) -> bool {
    knobs.target_impl() == TargetImpl::Isoe && !knobs.is_floor()
}

/// `isoe admin stats` for the target's control socket.
pub fn stats_argv(isoe: &str, socket: &str) -> Vec<String> {
    [isoe, "admin", "--socket", socket, "--json", "stats"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The bytes `target`'s LUN `lun` served from never-written blocks, from
/// `isoe admin --json stats`' answer (its `stats.media`); None when the
/// answer does not say.
pub fn unwritten_read_bytes(stats_json: &str, target: &str, lun: u16) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(stats_json.trim()).ok()?;
    // The control socket's answer: `{"ok": true, "stats": {...}}`.
    value
        .get("stats")?
        .get("media")?
        .get(target)?
        .get(lun.to_string())?
        .get("unwritten_read_bytes")?
        .as_u64()
}

/// A run's share of the target's count: what it added between `before`
/// and `after` the run (the kernel's probes of a new block device, which
/// read its last blocks, are not the run's).
pub fn during(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// The report's notes on the fills of `records`' runs: how much was
/// written and how long it took, and any run whose target served reads
/// from never-written blocks.
pub fn notes(records: &[isoe_report::record::RunRecord]) -> Vec<String> {
    let mut seconds: Vec<f64> = Vec::new();
    let mut sizes = std::collections::BTreeSet::new();
    let mut unwritten: Vec<String> = Vec::new();
    let mut unfilled = 0usize;
    let mut seen = std::collections::BTreeSet::new();
    for r in records.iter().filter(|r| !r.bench.is_null()) {
        let fill = r.bench.get("lun_fill");
        match fill {
            Some(f) => {
                let s = f.get("seconds").and_then(|v| v.as_f64()).unwrap_or(0.0);
                // Every run of one target start carries its fill: count it once.
                if seen.insert((r.case.clone(), r.round, s.to_bits())) {
                    seconds.push(s);
                    sizes.extend(f.get("bytes").and_then(|v| v.as_u64()));
                }
            }
            None if reads(r) => unfilled += 1,
            None => {}
        }
        if let Some(n) = r
            .bench
            .get("target_unwritten_read_bytes")
            .and_then(|v| v.as_u64())
        {
            if n > 0 {
                unwritten.push(format!(
                    "{} / {} run {} ({n} bytes)",
                    r.case, r.workload, r.run
                ));
            }
        }
    }
    let mut out = Vec::new();
    if !seconds.is_empty() {
        seconds.sort_by(f64::total_cmp);
        let mib: Vec<String> = sizes.iter().map(|b| (b >> 20).to_string()).collect();
        out.push(format!(
            "reads read written data: the LUN ({} MiB: what the case's reads address) was \
             written before each target start's first read, {} times, {:.1}-{:.1} s each \
             ({:.0} s in all), counted in no run",
            mib.join(" or "),
            seconds.len(),
            seconds[0],
            seconds[seconds.len() - 1],
            seconds.iter().sum::<f64>()
        ));
    }
    if unfilled > 0 {
        out.push(format!(
            "{unfilled} runs that read blocks predate the lab's fill (or ran on a target it \
             may not write): their reads may have read never-written blocks, zeros a memory \
             LUN makes on the fly"
        ));
    }
    if !unwritten.is_empty() {
        out.push(format!(
            "the target served reads from never-written blocks in: {}",
            unwritten.join(", ")
        ));
    }
    out
}

/// Whether a record's run read blocks (its workload's read share).
fn reads(r: &isoe_report::record::RunRecord) -> bool {
    if r.bench.get("application").is_some() || r.bench.get("floor").is_some() {
        return false;
    }
    let workload = r.bench.get("workload");
    workload
        .and_then(|w| w.get("read_pct"))
        .and_then(|v| v.as_u64())
        .is_some_and(|pct| pct > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_s_json_line_gives_its_bytes_and_time() {
        let out = "noise\n{\"fill\":{\"bytes\":536870912,\"seconds\":1.5,\"luns\":[{\"url\":\"iscsi://h/t/0\",\"bytes\":536870912,\"block_size\":512,\"blocks\":1048576}]}}\n";
        let fill = parse_fill(out).unwrap();
        assert_eq!(fill.bytes, 512 << 20);
        assert_eq!(fill.seconds, 1.5);
        assert!(parse_fill("no json here").is_err());
        assert!(parse_fill("{\"fill\": 3}").is_err());
    }

    #[test]
    fn the_unwritten_count_is_read_per_target_and_lun() {
        let json = r#"{"ok":true,"stats":{"luns":{},"media":{"iqn.t":{"0":{"unwritten_read_bytes":4096},"1":{}}}}}"#;
        assert_eq!(unwritten_read_bytes(json, "iqn.t", 0), Some(4096));
        assert_eq!(unwritten_read_bytes(json, "iqn.t", 1), None);
        assert_eq!(unwritten_read_bytes(json, "iqn.other", 0), None);
        assert_eq!(
            unwritten_read_bytes("{\"ok\":true,\"stats\":{}}", "iqn.t", 0),
            None
        );
        assert_eq!(unwritten_read_bytes("not json", "iqn.t", 0), None);
    }

    #[test]
    fn the_notes_count_each_fill_once_and_name_what_read_unwritten_blocks() {
        let record = |case: &str, round: u32, run: u32, bench: serde_json::Value| {
            serde_json::from_value::<isoe_report::record::RunRecord>(serde_json::json!({
                "plan": "p", "case": case, "workload": "w", "run": run, "round": round,
                "topology": "loopback", "knobs": {}, "skipped_knobs": {}, "metric": "iops", "value": 1.0,
                "steal_pct": 0.0, "valid": true, "bench": bench, "started_at": "t"
            }))
            .unwrap()
        };
        let fill =
            |bytes: u64, seconds: f64| serde_json::json!({"bytes": bytes, "seconds": seconds});
        let records = [
            // Two runs of one target start: one fill.
            record(
                "a",
                1,
                1,
                serde_json::json!({"lun_fill": fill(1 << 30, 2.0), "target_unwritten_read_bytes": 0}),
            ),
            record(
                "a",
                1,
                2,
                serde_json::json!({"lun_fill": fill(1 << 30, 2.0), "target_unwritten_read_bytes": 0}),
            ),
            record(
                "b",
                1,
                1,
                serde_json::json!({"lun_fill": fill(512 << 20, 1.0), "target_unwritten_read_bytes": 4096}),
            ),
            // A read from before the fill.
            record("c", 1, 1, serde_json::json!({"workload": {"read_pct": 70}})),
        ];
        let notes = notes(&records);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].contains("(512 or 1024 MiB"), "{}", notes[0]);
        assert!(
            notes[0].contains("2 times, 1.0-2.0 s each (3 s in all)"),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].starts_with("1 runs that read blocks predate"),
            "{}",
            notes[1]
        );
        assert!(
            notes[2].ends_with("b / w run 1 (4096 bytes)"),
            "{}",
            notes[2]
        );
    }

    #[test]
    fn a_fill_logs_in_with_the_digests_alone() {
        let knobs = KnobSet {
            header_digest: Some(true),
            connections: Some(4),
            ..KnobSet::default()
        };
        let plan = Plan::embedded("quick").unwrap();
        let argv = fill_argv("isoe", "iscsi://h:3260/iqn.t/0", &plan, &knobs);
        assert_eq!(
            argv,
            [
                "isoe",
                "bench",
                "--fill",
                "iscsi://h:3260/iqn.t/0",
                "--bs",
                "1MiB",
                "--qd",
                "8",
                "--json",
                "-",
                "--span",
                "536870912",
                "--header-digest"
            ]
        );
    }
}
