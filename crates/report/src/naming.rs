//! A case in words, for sentences that name both sides of a comparison:
//! who runs each end ("libiscsi through fio", "isoe's target", "the
//! floor's server"), and what a case sets that its reference does not
//! ("MTU 9000", "both sides' TSO, GSO and GRO off"), from the knobs the
//! report input carries (`name = value`, as the lab describes them).

use super::ReportInput;

/// The knobs that say who runs the ends rather than how: a change of one
/// of them compares two programs, not two settings of one.
const END_KNOBS: [&str; 3] = ["initiator", "target", "floor"];

/// The NIC offloads as the lab names them (`initiator.tso`, ...), in
/// METHODOLOGY.md's order, with their names for people.
const OFFLOADS: [(&str, &str); 6] = [
    ("tso", "TSO"),
    ("gso", "GSO"),
    ("gro", "GRO"),
    ("tx", "Tx checksumming"),
    ("rx", "Rx checksumming"),
    ("sg", "scatter-gather"),
];

/// One end of an iSCSI path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The initiator (or the floor's client).
    Initiator,
    /// The target (or the floor's server).
    Target,
}

/// Whether `case` runs raw TCP in place of both ends (`floor = on`).
pub(super) fn is_floor(input: &ReportInput, case: &str) -> bool {
    input.value_in(case, "floor") == "on"
}

/// Whether `workload`'s runs are raw TCP or UDP streams (`isoe netprobe`
/// between the two sides), whose ends are no initiator and no target.
pub(super) fn is_stream(input: &ReportInput, workload: &str) -> bool {
    input
        .records
        .iter()
        .any(|r| r.workload == workload && r.bench.get("stream").is_some_and(|s| s.is_object()))
}

/// Who runs `end` of `workload` in `case`: [`end_name`], or the stream's
/// end on that side for a stream workload.
pub(super) fn end_name_on(input: &ReportInput, case: &str, end: End, workload: &str) -> String {
    if is_stream(input, workload) {
        return match end {
            End::Initiator => "the stream's end on the initiator's side",
            End::Target => "the stream's end on the target's side",
        }
        .to_string();
    }
    end_name(input, case, end)
}

/// Who runs `end` in `case`: "isoe's initiator", "libiscsi through fio",
/// "tgt", "the floor's server".
pub(super) fn end_name(input: &ReportInput, case: &str, end: End) -> String {
    if is_floor(input, case) {
        return match end {
            End::Initiator => "the floor's client",
            End::Target => "the floor's server",
        }
        .to_string();
    }
    match end {
        End::Initiator => match input.value_in(case, "initiator").as_str() {
            "default" | "isoe" => "isoe's initiator".to_string(),
            "libiscsi" => "libiscsi through fio".to_string(),
            "kernel" => "the kernel's initiator (open-iscsi)".to_string(),
            "isoe-ublk" => "isoe's initiator as a ublk device".to_string(),
            "isoe-nbd" => "isoe's initiator as an NBD device".to_string(),
            other => format!("the {other} initiator"),
        },
        End::Target => match input.value_in(case, "target").as_str() {
            "default" | "isoe" => "isoe's target".to_string(),
            "tgt" => "tgt".to_string(),
            "lio" => "LIO".to_string(),
            "external" => "the external array".to_string(),
            other => format!("the {other} target"),
        },
    }
}

/// Both ends of `case` at once: "the raw-TCP floor", "isoe's initiator and
/// target", "libiscsi through fio with tgt".
pub(super) fn pair_name(input: &ReportInput, case: &str) -> String {
    if is_floor(input, case) {
        return "the raw-TCP floor".to_string();
    }
    let (i, t) = (
        end_name(input, case, End::Initiator),
        end_name(input, case, End::Target),
    );
    if i == "isoe's initiator" && t == "isoe's target" {
        "isoe's initiator and target".to_string()
    } else {
        format!("{i} with {t}")
    }
}

/// The ends whose program differs between `case` and its reference,
/// target first (what a SAN's many hosts share).
pub(super) fn changed_ends(input: &ReportInput, case: &str) -> Vec<End> {
    let reference = input.reference_of(case);
    [End::Target, End::Initiator]
        .into_iter()
        .filter(|&end| end_name(input, case, end) != end_name(input, reference, end))
        .collect()
}

/// What `case` sets that its reference does not, in words, beside the
/// reference's values: ("MTU 9000", "MTU 1500"); None when the two differ
/// only in who runs the ends.
pub(super) fn settings(input: &ReportInput, case: &str) -> Option<(String, String)> {
    let reference = input.reference_of(case);
    let mut changes: Vec<(String, String, String)> = input
        .changes_from_reference(case)
        .into_iter()
        .filter(|(knob, _, _)| !END_KNOBS.contains(&knob.as_str()))
        .collect();
    let topology = input.topology_change(case);
    if changes.is_empty() && topology.is_none() {
        return None;
    }
    changes.sort();
    let from: Vec<(String, String)> = changes
        .iter()
        .map(|(k, from, _)| (k.clone(), from.clone()))
        .collect();
    let to: Vec<(String, String)> = changes
        .iter()
        .map(|(k, _, to)| (k.clone(), to.clone()))
        .collect();
    let mut words = (
        phrases(&to, is_floor(input, case)),
        phrases(&from, is_floor(input, reference)),
    );
    if let Some((own, theirs)) = topology {
        words.0.push(format!("the {own} topology"));
        words.1.push(format!("the {theirs} topology"));
    }
    Some((join(&words.0), join(&words.1)))
}

/// What `case` and its reference share that a sentence about them needs,
/// as phrases: the sessions ("at 2 sessions") and an end that is not
/// isoe's ("with libiscsi through fio as the initiator").
pub(super) fn shared(input: &ReportInput, case: &str) -> Vec<String> {
    let reference = input.reference_of(case);
    let mut out = Vec::new();
    let sessions = input.value_in(case, "sessions");
    if sessions != "default" && sessions == input.value_in(reference, "sessions") {
        out.push(format!("at {}", count(&sessions, "session")));
    }
    let changed = changed_ends(input, case);
    if !is_floor(input, case) && !is_floor(input, reference) {
        for (end, default, role) in [
            (End::Initiator, "isoe's initiator", "the initiator"),
            (End::Target, "isoe's target", "the target"),
        ] {
            let name = end_name(input, case, end);
            if !changed.contains(&end) && name != default {
                out.push(format!("with {name} as {role}"));
            }
        }
    }
    out
}

/// "a, b and c".
pub(super) fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// "1 session", "32 sessions".
fn count(n: &str, noun: &str) -> String {
    if n == "1" {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Each knob (name, value) of one side of a change in words; the offloads
/// and the two digests, which plans set together, as one phrase each.
fn phrases(knobs: &[(String, String)], floor: bool) -> Vec<String> {
    let get = |name: &str| knobs.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut out = offload_phrases(knobs);
    match (get("header_digest"), get("data_digest")) {
        (Some(h), Some(d)) if h == d => out.push(if h == "CRC32C" {
            "CRC32C header and data digests".to_string()
        } else {
            "no digests".to_string()
        }),
        (h, d) => {
            for (v, what) in [(h, "header"), (d, "data")] {
                match v.map(String::as_str) {
                    Some("CRC32C") => out.push(format!("a CRC32C {what} digest")),
                    Some(_) => out.push(format!("no {what} digest")),
                    None => {}
                }
            }
        }
    }
    for (knob, value) in knobs {
        if knob.ends_with("_digest") || offload_of(knob).is_some() {
            continue;
        }
        let v = value.as_str();
        out.push(match (knob.as_str(), v) {
            ("mtu", "default") => "the default MTU".to_string(),
            ("mtu", _) => format!("MTU {v}"),
            ("sessions", "default") if floor => "1 connection".to_string(),
            ("sessions", "default") => "1 session".to_string(),
            ("sessions", _) if floor => count(v, "connection"),
            ("sessions", _) => count(v, "session"),
            ("connections", "default") => "1 connection per session".to_string(),
            ("connections", _) => format!("{} per session", count(v, "connection")),
            ("workers", "default") => "the workload's workers".to_string(),
            ("workers", _) => count(v, "worker"),
            ("rate_mbit", "default") => "an unlimited host port".to_string(),
            ("rate_mbit", _) => format!("a {v} Mbit/s host port"),
            ("transport", "default") => "the default transport".to_string(),
            ("transport", _) => format!("the {v} transport"),
            (_, "default") => format!("{knob} at its default"),
            _ => format!("{knob} = {v}"),
        });
    }
    out
}

/// The offload of a knob such as `initiator.tso`: (side, offload).
fn offload_of(knob: &str) -> Option<(&str, &str)> {
    let (side, offload) = knob.split_once('.')?;
    let side = ["initiator", "target"].into_iter().find(|s| *s == side)?;
    let offload = OFFLOADS.iter().find(|(k, _)| *k == offload)?.0;
    Some((side, offload))
}

/// The offload knobs among `knobs` as phrases, one per value and sides:
/// "both sides' TSO, GSO and GRO off", "the target's GRO on",
/// "TSO at the devices' defaults" (a side's default is its device's).
fn offload_phrases(knobs: &[(String, String)]) -> Vec<String> {
    let mut values: Vec<&str> = Vec::new();
    for (knob, value) in knobs {
        if offload_of(knob).is_some() && !values.contains(&value.as_str()) {
            values.push(value);
        }
    }
    let mut out = Vec::new();
    for value in values {
        let has = |side: &str, offload: &str| {
            knobs
                .iter()
                .any(|(k, v)| v == value && offload_of(k) == Some((side, offload)))
        };
        if value == "default" {
            // A side's default is its device's: one phrase for both.
            let names: Vec<String> = OFFLOADS
                .iter()
                .filter(|(k, _)| has("initiator", k) || has("target", k))
                .map(|(_, name)| name.to_string())
                .collect();
            out.push(format!("{} at the devices' defaults", join(&names)));
            continue;
        }
        for (where_, sides) in [
            ("both sides'", (true, true)),
            ("the initiator's", (true, false)),
            ("the target's", (false, true)),
        ] {
            let names: Vec<String> = OFFLOADS
                .iter()
                .filter(|(k, _)| (has("initiator", k), has("target", k)) == sides)
                .map(|(_, name)| name.to_string())
                .collect();
            if names.is_empty() {
                continue;
            }
            out.push(format!("{where_} {} {value}", join(&names)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaseInfo;
    use std::collections::BTreeMap;

    fn case(name: &str, compare_to: Option<&str>, knobs: &[(&str, &str)]) -> CaseInfo {
        CaseInfo {
            name: name.into(),
            compare_to: compare_to.map(str::to_string),
            knobs_changed: knobs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..CaseInfo::default()
        }
    }

    fn input(baseline: &[(&str, &str)], cases: Vec<CaseInfo>) -> ReportInput {
        ReportInput {
            baseline_knobs: baseline
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cases: [vec![case("baseline", None, &[])], cases].concat(),
            ..ReportInput::default()
        }
    }

    #[test]
    fn ends_are_named_by_their_programs_and_the_floor_by_its_roles() {
        let i = input(
            &[("floor", "on"), ("sessions", "2")],
            vec![
                case("isoe", None, &[("floor", "off")]),
                case(
                    "tgt-libiscsi",
                    Some("isoe"),
                    &[
                        ("floor", "off"),
                        ("target", "tgt"),
                        ("initiator", "libiscsi"),
                    ],
                ),
            ],
        );
        assert_eq!(pair_name(&i, "baseline"), "the raw-TCP floor");
        assert_eq!(end_name(&i, "baseline", End::Target), "the floor's server");
        assert_eq!(pair_name(&i, "isoe"), "isoe's initiator and target");
        assert_eq!(changed_ends(&i, "isoe"), [End::Target, End::Initiator]);
        assert_eq!(
            pair_name(&i, "tgt-libiscsi"),
            "libiscsi through fio with tgt"
        );
        assert_eq!(
            changed_ends(&i, "tgt-libiscsi"),
            [End::Target, End::Initiator]
        );
        // Only who runs the ends differs: no settings, the sessions shared.
        assert_eq!(settings(&i, "isoe"), None);
        assert_eq!(shared(&i, "isoe"), ["at 2 sessions"]);
    }

    #[test]
    fn a_stream_s_ends_are_the_stream_s_not_isoe_s() {
        let mut i = input(&[], vec![]);
        let record = |workload: &str, bench: serde_json::Value| -> crate::record::RunRecord {
            serde_json::from_value(serde_json::json!({
                "plan": "p", "case": "baseline", "workload": workload, "run": 1,
                "topology": "base", "knobs": {}, "skipped_knobs": {}, "metric": "mb_per_s",
                "value": 1.0, "steal_pct": 0.0, "valid": true, "invalid_reason": null,
                "bench": bench, "started_at": "2026-12-02T10:00:00Z",
            }))
            .unwrap()
        };
        i.records.push(record(
            "tcp-stream-tx",
            serde_json::json!({"stream": {"kind": "tcp"}}),
        ));
        i.records
            .push(record("seq-read", serde_json::json!({"mb_per_s": 1.0})));
        assert!(is_stream(&i, "tcp-stream-tx") && !is_stream(&i, "seq-read"));
        assert_eq!(
            end_name_on(&i, "baseline", End::Target, "tcp-stream-tx"),
            "the stream's end on the target's side"
        );
        assert_eq!(
            end_name_on(&i, "baseline", End::Target, "seq-read"),
            "isoe's target"
        );
    }

    #[test]
    fn settings_read_as_words_on_both_sides() {
        let i = input(
            &[("mtu", "1500")],
            vec![
                case(
                    "offloads-off",
                    None,
                    &[
                        ("initiator.tso", "off"),
                        ("initiator.gro", "off"),
                        ("target.tso", "off"),
                        ("target.gro", "off"),
                        ("initiator.gso", "off"),
                    ],
                ),
                case("jumbo", None, &[("mtu", "9000")]),
                case(
                    "digests",
                    None,
                    &[("header_digest", "CRC32C"), ("data_digest", "CRC32C")],
                ),
                case("libiscsi", None, &[("initiator", "libiscsi")]),
            ],
        );
        assert_eq!(
            settings(&i, "offloads-off").unwrap(),
            (
                "both sides' TSO and GRO off and the initiator's GSO off".to_string(),
                "TSO, GSO and GRO at the devices' defaults".to_string()
            )
        );
        assert_eq!(
            settings(&i, "jumbo").unwrap(),
            ("MTU 9000".to_string(), "MTU 1500".to_string())
        );
        assert_eq!(
            settings(&i, "digests").unwrap(),
            (
                "CRC32C header and data digests".to_string(),
                "no digests".to_string()
            )
        );
        assert_eq!(settings(&i, "libiscsi"), None);
        assert_eq!(changed_ends(&i, "libiscsi"), [End::Initiator]);
        assert_eq!(
            end_name(&i, "libiscsi", End::Initiator),
            "libiscsi through fio"
        );
        assert_eq!(end_name(&i, "baseline", End::Initiator), "isoe's initiator");
    }
}
