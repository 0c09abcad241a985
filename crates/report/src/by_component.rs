//! Seed 003's latency by component for the application workloads: where
//! a block I/O's time goes (the initiator's stack, the network, the
//! target's protocol work, the storage), per case and direction, as a
//! table and as stacked bars, from the means of the runs'
//! `breakdown.<read|write>` fields split by [`Breakdown::of`].

use super::applications;
use super::document::{para, Block, Cell, Span};
use super::numbers::{num, pct};
use super::stacked::{Segment, Stack, StackedBars};
use super::summary::{field, mean, valid_runs};
use super::svg::Series;
use super::{ReportInput, WorkloadInfo};
use crate::components::{Breakdown, Measured, Stages, MERGED_PART, PARTS};

/// The directions, as the runs' JSON and as people name them.
const DIRECTIONS: [(&str, &str); 2] = [("read", "Reads"), ("write", "Writes")];
/// The parts' colours, in [`PARTS`] order.
const PART_COLORS: [&str; 4] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"];
/// The colour of [`MERGED_PART`]: neither the initiator's nor the target's.
const MERGED_COLOR: &str = "#9c755f";
/// Marks an initiator's part that holds the target's too.
const MERGED_MARK: &str = "†";

/// One case's breakdown of one direction; None when its runs carry none.
type CaseParts<'a> = (&'a str, Option<Breakdown>);

/// The section, after the application tables; nothing when no workload
/// ran an application.
pub(super) fn section(input: &ReportInput) -> Vec<Block> {
    let apps = applications::workloads(input);
    if apps.is_empty() {
        return Vec::new();
    }
    let mut b = vec![
        Block::Heading(2, "Latency by component".into(), Some("components")),
        para(
            "Where an application's block I/O spends its time, as seed 003 splits it. The \
             initiator's part is the block layer's issue-to-complete time of the application's \
             I/O, less the others; the network is a raw TCP request and response of the same \
             sizes over the same path (both hosts' TCP stacks and the wire); the target's \
             protocol time is its receipt-to-store and store-to-sent stages, from its sampled \
             per-command stage histograms; storage is the target's store time. Each is the \
             mean over the case's valid runs; the parts add up to the initiator's mean. A \
             target that reports no stages (LIO, an external array) cannot be told apart \
             from the initiator's stack: that part is then the initiator's stack and the \
             target together.",
        ),
    ];
    for (w, _) in apps {
        b.push(Block::Heading(
            3,
            format!("{}: latency by component", w.name),
            None,
        ));
        let directions: Vec<(&str, Vec<CaseParts>)> = DIRECTIONS
            .iter()
            .map(|(key, name)| (*name, case_parts(input, w, key)))
            .collect();
        if directions.iter().all(|(_, parts)| none_measured(parts)) {
            b.push(para(format!(
                "Not measured: no valid run of {} carries a breakdown.",
                w.name
            )));
            continue;
        }
        for (name, parts) in &directions {
            b.extend(direction(w, name, parts));
        }
    }
    b
}

/// Each case's breakdown of `w`'s `key` direction, in the plan's order.
fn case_parts<'a>(input: &'a ReportInput, w: &WorkloadInfo, key: &str) -> Vec<CaseParts<'a>> {
    input
        .cases
        .iter()
        .filter(|c| c.runs(&w.name))
        .map(|c| {
            let m = measured(input, &c.name, w, key);
            (c.name.as_str(), m.as_ref().map(Breakdown::of))
        })
        .collect()
}

fn none_measured(parts: &[CaseParts]) -> bool {
    parts.iter().all(|(_, b)| b.is_none())
}

/// One direction of one workload: its table, its notes, its chart.
fn direction(w: &WorkloadInfo, name: &str, parts: &[CaseParts]) -> Vec<Block> {
    let lead = Block::Para(vec![Span::Strong(format!("{name}."))]);
    if none_measured(parts) {
        let what = name.to_lowercase();
        return vec![
            lead,
            para(format!(
                "Not measured: no valid run carries a breakdown of its {what}."
            )),
        ];
    }
    let mut b = vec![lead, table(parts)];
    b.extend(notes(parts));
    b.push(Block::Figure {
        svg: chart(w, name, parts),
        caption: format!(
            "{}: {} by component, µs, one bar per case, its end the initiator's mean \
             (past it when the other parts exceed it).",
            w.name,
            name.to_lowercase()
        ),
    });
    b
}

/// The means of a cell's `breakdown.<key>` fields; None without the
/// initiator's or the network's, the target None without all its stages.
fn measured(input: &ReportInput, case: &str, w: &WorkloadInfo, key: &str) -> Option<Measured> {
    let runs = valid_runs(input, case, &w.name);
    let m = |part: &str| mean(&runs, |b| field(b, &["breakdown", key, part]));
    let target = match (
        m("receipt_to_store_us"),
        m("store_us"),
        m("store_to_sent_us"),
    ) {
        (Some(receipt_to_store_us), Some(store_us), Some(store_to_sent_us)) => Some(Stages {
            receipt_to_store_us,
            store_us,
            store_to_sent_us,
        }),
        _ => None,
    };
    Some(Measured {
        initiator_us: m("initiator_us")?,
        network_us: m("network_us")?,
        target,
    })
}

/// Rows: the parts and the total; columns: each case's µs and share.
fn table(parts: &[CaseParts]) -> Block {
    let mut head = vec!["part".to_string()];
    for (case, _) in parts {
        head.push(format!("{case} µs"));
        head.push(format!("{case} %"));
    }
    let mut rows: Vec<Vec<Cell>> = (0..PARTS.len())
        .map(|i| {
            let mut row: Vec<Cell> = vec![PARTS[i].into()];
            for (_, b) in parts {
                row.extend(part_cells(b.as_ref(), i));
            }
            row
        })
        .collect();
    let mut total: Vec<Cell> = vec!["total = the initiator's mean".into()];
    for (_, b) in parts {
        let initiator = b.map(|b| b.total_us() - b.excess_us);
        total.extend([num(initiator).into(), "".into()]);
    }
    rows.push(total);
    let right = head.iter().enumerate().map(|(i, _)| i > 0).collect();
    Block::Table { head, right, rows }
}

/// Part `i` of one case: its µs (marked when it holds the target's too)
/// and its share, "–" where not known.
fn part_cells(b: Option<&Breakdown>, i: usize) -> [Cell; 2] {
    let Some(b) = b else {
        return ["–".into(), "–".into()];
    };
    let us = num(b.parts()[i]);
    let us = if i == 0 && b.target.is_none() {
        format!("{us} {MERGED_MARK}")
    } else {
        us
    };
    [us.into(), pct(b.shares_pct()[i]).into()]
}

/// What the table's numbers hide: the cases whose target is not split
/// out, and those whose parts exceed the initiator's mean.
fn notes(parts: &[CaseParts]) -> Vec<Block> {
    let merged: Vec<&str> = parts
        .iter()
        .filter(|(_, b)| b.is_some_and(|b| b.target.is_none()))
        .map(|(case, _)| *case)
        .collect();
    let excess: Vec<String> = parts
        .iter()
        .filter_map(|(case, b)| {
            let e = b.as_ref()?.excess_us;
            (e > 0.0).then(|| format!("{case} by {} µs", num(Some(e))))
        })
        .collect();
    let mut b = Vec::new();
    if !merged.is_empty() {
        b.push(para(format!(
            "{MERGED_MARK} {MERGED_PART}: the target's stages are unknown in {} (the target \
             reports none, or timed none of these commands: it samples one in 64), so its protocol time and storage are inside this part and their \
             rows show “–”.",
            merged.join(", ")
        )));
    }
    if !excess.is_empty() {
        b.push(para(format!(
            "The other parts exceed the initiator's mean in {}: the initiator's stack is shown \
             as 0 and the parts add up to more than the total (means measured at different \
             moments, or noise).",
            excess.join(", ")
        )));
    }
    b
}

/// The stacked bars of one direction: one bar per case.
fn chart(w: &WorkloadInfo, name: &str, parts: &[CaseParts]) -> String {
    let mut series: Vec<Series> = PARTS
        .iter()
        .zip(PART_COLORS)
        .map(|(p, color)| Series {
            name: p.to_string(),
            color,
        })
        .collect();
    let merged = parts
        .iter()
        .any(|(_, b)| b.is_some_and(|b| b.target.is_none()));
    if merged {
        series.push(Series {
            name: MERGED_PART.into(),
            color: MERGED_COLOR,
        });
    }
    StackedBars {
        title: format!("{}: {} by component, µs", w.name, name.to_lowercase()),
        unit: "µs, means over the valid runs".into(),
        series,
        stacks: parts
            .iter()
            .map(|(case, b)| stack(case, b.as_ref()))
            .collect(),
        empty_message: format!("No data: no case of {} has a breakdown.", w.name),
    }
    .render()
}

/// One case's bar: its known parts, the first [`MERGED_PART`]'s colour
/// when it holds the target's.
fn stack(case: &str, b: Option<&Breakdown>) -> Stack {
    let Some(b) = b else {
        return Stack {
            label: case.to_string(),
            segments: Vec::new(),
            end_label: "n/a".into(),
        };
    };
    let labels = b.labels();
    let segments = b
        .parts()
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let series = if i == 0 && b.target.is_none() {
                PARTS.len()
            } else {
                i
            };
            Some(Segment {
                series,
                value: (*v)?,
                tooltip: format!("{case}, {}: {} µs", labels[i], num(*v)),
            })
        })
        .collect();
    let initiator = num(Some(b.total_us() - b.excess_us));
    let end_label = if b.excess_us > 0.0 {
        format!("{initiator} µs, exceeded by {}", num(Some(b.excess_us)))
    } else {
        format!("{initiator} µs")
    };
    Stack {
        label: case.to_string(),
        segments,
        end_label,
    }
}
