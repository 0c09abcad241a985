//! The plan schema (see the module doc of [`super`]): reading a tree into a
//! [`Plan`], key by key, with every check that names a line. The tree and
//! the reader are [`isoe_config`]'s, shared with `isoe target`'s
//! configuration.

use super::{
    named_shape, Case, Plan, PlanError, RunLength, TopologyKind, WorkloadOverrides, WorkloadSpec,
};
use crate::application::{Application, Filesystem, Mail, Oltp, OltpMix};
use crate::knobs::{
    CrcImpl, InitiatorImpl, KnobSet, TargetImpl, Transport, ISOE_TARGET_FIRST_BURST_LENGTH,
    ISOE_TARGET_MAX_BURST_LENGTH, ISOE_TARGET_MAX_CONNECTIONS,
};
use crate::link::{NicKnobs, Offload};
use crate::rr::stream::{UDP_MSG_MAX, UDP_MSG_MIN};
use crate::rr::StreamKind;
use crate::stream::{StreamDirection, StreamWorkload};
use isoe_bench::profiles;
use isoe_config::{closest, join_key, Field, Node, Table};
use isoe_report::record::Metric;
use isoe_report::stats::Rules;
use std::collections::{BTreeMap, HashMap};

const ROOT_KEYS: &[&str] = &[
    "name",
    "description",
    "question",
    "seeds",
    "topology",
    "run",
    "stats",
    "baseline",
    "workload",
    "case",
];
const RUN_KEYS: &[&str] = &["duration_s", "ramp_s", "pin_cpus", "span"];
const STATS_KEYS: &[&str] = &[
    "min_runs",
    "max_runs",
    "rsd_target_pct",
    "significance_pct",
    "steal_max_pct",
    "foreign_max_pct",
];
/// A synthetic workload's keys besides its name.
const PROFILE_KEYS: &[&str] = &[
    "profile",
    "qd",
    "in_flight",
    "bs",
    "workers",
    "read_pct",
    "random_pct",
    "metric",
];
/// The keys of an application workload besides its name, by application.
const OLTP_KEYS: &[&str] = &["mix", "scale", "clients", "memory"];
const MAIL_KEYS: &[&str] = &["database", "log", "threads"];
/// A stream workload's keys besides its name and `stream`.
const STREAM_KEYS: &[&str] = &["direction", "msg"];
const CASE_OWN_KEYS: &[&str] = &["name", "description", "topology", "compare_to", "workloads"];

/// The shared reader, whose errors are [`PlanError`]s.
type Reader = isoe_config::Reader<PlanError>;

/// Every knob key of `[baseline]` and `[[case]]`.
pub(super) const KNOB_KEYS: &[&str] = &[
    "mtu",
    "rate_mbit",
    "tso",
    "gso",
    "gro",
    "tx",
    "rx",
    "sg",
    "initiator_tso",
    "initiator_gso",
    "initiator_gro",
    "initiator_tx",
    "initiator_rx",
    "initiator_sg",
    "target_tso",
    "target_gso",
    "target_gro",
    "target_tx",
    "target_rx",
    "target_sg",
    "nodelay",
    "quickack",
    "rcvbuf",
    "sndbuf",
    "busy_poll_us",
    "header_digest",
    "data_digest",
    "immediate_data",
    "initial_r2t",
    "max_recv_data_segment_length",
    "first_burst_length",
    "max_burst_length",
    "connections",
    "sessions",
    "workers",
    "initiator",
    "target",
    "transport",
    "filesystem",
    "batching",
    "crc",
    "buffer_pool",
    "floor",
    "rx_ring",
    "tx_ring",
    "rx_usecs",
    "tx_usecs",
    "channels",
    "flow_control",
    "sysctl",
];

/// RFC 7143 §13.12–§13.14: the range of the three length parameters.
const LENGTH_MIN_BYTES: u32 = 512;
const LENGTH_MAX_BYTES: u32 = (1 << 24) - 1;
/// Socket buffer sizes a plan may ask for.
const SOCKET_BUFFER_MIN_BYTES: u32 = 1 << 10;
const SOCKET_BUFFER_MAX_BYTES: u32 = 1 << 30;
/// The largest block size a workload may override to.
const BLOCK_SIZE_MAX_BYTES: u32 = 16 << 20;
/// Ring entries a plan may ask for: drivers take powers of two up to a few
/// thousand (mlx5 8192, ixgbe 4096); more is a typo.
const RING_MAX: u32 = 65_536;
/// Interrupt coalescing a plan may ask for, microseconds: beyond 100 ms a
/// NIC would hold packets longer than TCP waits for them.
const COALESCE_MAX_US: u32 = 100_000;
/// Combined queues a plan may ask for.
const CHANNELS_MAX: u32 = 1024;
/// The sysctl trees a plan may write: the network stack, memory and the
/// scheduler's, nothing that reboots, mounts or loads.
pub(crate) const SYSCTL_ROOTS: [&str; 3] = ["net.", "vm.", "kernel."];
/// The longest sysctl value a plan may write (`net.ipv4.tcp_rmem` takes three numbers).
const SYSCTL_VALUE_MAX_CHARS: usize = 256;

pub(super) fn read_plan(text: &str, source: &str) -> Result<Plan, PlanError> {
    let r = Reader::new(text, source);
    let mut root = r.root(text)?;
    r.deny_unknown(&root, ROOT_KEYS)?;
    let name_item = r.required(&mut root, "name", "every plan has a name")?;
    let name = read_name(&r, &name_item)?;
    let description = match root.take("description") {
        Some(item) => r.string(&item)?,
        None => String::new(),
    };
    let question = root
        .take("question")
        .map(|item| read_question(&r, &item))
        .transpose()?;
    let seeds = match root.take("seeds") {
        Some(item) => read_strings(&r, item)?,
        None => Vec::new(),
    };
    let topology = match root.take("topology") {
        Some(item) => read_topology(&r, &item)?,
        None => TopologyKind::default(),
    };
    let run = match root.take("run") {
        Some(item) => read_run(&r, r.table(item, RUN_KEYS)?)?,
        None => RunLength::default(),
    };
    let rules = match root.take("stats") {
        Some(item) => read_rules(&r, r.table(item, STATS_KEYS)?)?,
        None => Rules::default(),
    };
    let baseline = match root.take("baseline") {
        Some(item) => {
            let mut table = r.table(item, KNOB_KEYS)?;
            let bursts = BurstKeys::of(&table);
            let knobs = read_knobs(&r, &mut table)?;
            check_merged(&r, &bursts, &knobs)?;
            knobs
        }
        None => KnobSet::default(),
    };
    let (workloads, in_flight_at) = match root.take("workload") {
        Some(item) => read_workloads(&r, item)?,
        None => (Vec::new(), HashMap::new()),
    };
    if workloads.is_empty() {
        return Err(r.invalid(
            0,
            "workload",
            "no workloads: add at least one [[workload]] table",
        ));
    }
    let cases = match root.take("case") {
        Some(item) => read_cases(&r, item, topology, &baseline, &workloads)?,
        None => Vec::new(),
    };
    let plan = Plan {
        name,
        description,
        question,
        seeds,
        topology,
        run,
        rules,
        baseline,
        cases,
        workloads,
        source: source.to_string(),
    };
    check_in_flight(&r, &plan, &in_flight_at)?;
    Ok(plan)
}

/// Every case on a topology whose paths are known (not a test bed's) can
/// keep each of its workloads' `in_flight`: the total shares evenly over
/// the paths and workers it runs with. `at` holds each such workload's
/// `in_flight` key, which the error names.
fn check_in_flight(
    r: &Reader,
    plan: &Plan,
    at: &HashMap<String, (usize, String)>,
) -> Result<(), PlanError> {
    for case in plan.resolved_cases() {
        let Some(paths) = case.topology.paths() else {
            continue;
        };
        for workload in case.workloads.iter().filter_map(|w| plan.workload(w)) {
            let (Some(why), Some((offset, key))) = (
                workload.in_flight_uneven(&case.knobs, paths),
                at.get(&workload.name),
            ) else {
                continue;
            };
            return Err(r.invalid(
                *offset,
                key,
                format!(
                    "{why} in case {:?} on the {} topology: give a total that does",
                    case.name, case.topology
                ),
            ));
        }
    }
    Ok(())
}

/// A name for a plan, case or workload: it ends up in file names and reports.
fn read_name(r: &Reader, item: &Field) -> Result<String, PlanError> {
    let name = r.string(item)?;
    let first_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'));
    if !first_ok || !rest_ok || name.len() > 64 {
        return Err(r.at(
            item,
            format!(
                "{name:?}: a name is 1 to 64 of a-z 0-9 - _ . and starts with a letter or digit"
            ),
        ));
    }
    Ok(name)
}

/// The longest question a plan may ask: the report's first sentence.
const QUESTION_MAX_CHARS: usize = 300;

/// The plan's question: one line of text, which the report opens with.
fn read_question(r: &Reader, item: &Field) -> Result<String, PlanError> {
    let question = r.string(item)?;
    let trimmed = question.trim();
    if trimmed.is_empty() {
        return Err(r.at(
            item,
            "an empty question: ask what the plan answers, or leave the key out",
        ));
    }
    if trimmed.contains(['\n', '\r']) {
        return Err(r.at(
            item,
            "a question is one line: the report opens with it as a sentence",
        ));
    }
    let chars = trimmed.chars().count();
    if chars > QUESTION_MAX_CHARS {
        return Err(r.at(
            item,
            format!("a question of {chars} characters: at most {QUESTION_MAX_CHARS}, one sentence"),
        ));
    }
    Ok(trimmed.to_string())
}

fn read_strings(r: &Reader, item: Field) -> Result<Vec<String>, PlanError> {
    let mut out = Vec::new();
    for element in r.array(item, "an array of strings")? {
        let s = r.string(&element)?;
        if s.trim().is_empty() {
            return Err(r.at(&element, "expected a non-empty string"));
        }
        out.push(s);
    }
    Ok(out)
}

fn read_topology(r: &Reader, item: &Field) -> Result<TopologyKind, PlanError> {
    let names = TopologyKind::ALL.map(TopologyKind::as_str);
    let chosen = r.choice(item, &names)?;
    Ok(TopologyKind::ALL
        .into_iter()
        .find(|t| t.as_str() == chosen)
        .expect("one of ALL"))
}

fn read_run(r: &Reader, mut t: Table) -> Result<RunLength, PlanError> {
    let mut run = RunLength::default();
    if let Some(item) = t.take("duration_s") {
        run.duration_s = r.f64_in(&item, 0.0, 3600.0)?;
        if run.duration_s == 0.0 {
            return Err(r.at(&item, "a run must measure for more than 0 s"));
        }
    }
    if let Some(item) = t.take("ramp_s") {
        run.ramp_s = r.f64_in(&item, 0.0, 600.0)?;
    }
    if let Some(item) = t.take("pin_cpus") {
        run.pin_cpus = r.bool(&item)?;
    }
    if let Some(item) = t.take("span") {
        run.span_bytes = size_in(r, &item, 1 << 20, u32::MAX)?.into();
    }
    Ok(run)
}

fn read_rules(r: &Reader, mut t: Table) -> Result<Rules, PlanError> {
    let mut rules = Rules::default();
    if let Some(item) = t.take("min_runs") {
        rules.min_runs = r.u32_in(&item, 1, 100)?;
    }
    let max_item = t.take("max_runs");
    if let Some(item) = &max_item {
        rules.max_runs = r.u32_in(item, 1, 100)?;
    }
    if rules.max_runs < rules.min_runs {
        let message = format!(
            "max_runs {} is below min_runs {}",
            rules.max_runs, rules.min_runs
        );
        return Err(match &max_item {
            Some(item) => r.at(item, message),
            None => r.invalid(t.offset, &join_key(&t.key, "max_runs"), message),
        });
    }
    if let Some(item) = t.take("rsd_target_pct") {
        rules.rsd_target_pct = r.f64_in(&item, 0.0, 100.0)?;
        if rules.rsd_target_pct == 0.0 {
            return Err(r.at(&item, "an RSD target of 0% can never be met"));
        }
    }
    if let Some(item) = t.take("significance_pct") {
        rules.significance_pct = r.f64_in(&item, 0.0, 100.0)?;
    }
    if let Some(item) = t.take("steal_max_pct") {
        rules.steal_max_pct = r.f64_in(&item, 0.0, 100.0)?;
    }
    if let Some(item) = t.take("foreign_max_pct") {
        // % of one CPU: a machine of N CPUs can show up to N × 100%.
        rules.foreign_max_pct = r.f64_in(&item, 0.0, 100_000.0)?;
    }
    Ok(rules)
}

fn read_bool_or(r: &Reader, item: &Field, on: &str, off: &str) -> Result<bool, PlanError> {
    match &item.node {
        Node::Bool(b) => Ok(*b),
        Node::Str(s) if s.eq_ignore_ascii_case(on) => Ok(true),
        Node::Str(s) if s.eq_ignore_ascii_case(off) => Ok(false),
        _ => Err(r.wrong_type(item, &format!("true, false, \"{on}\" or \"{off}\""))),
    }
}

/// Takes every knob key out of `t` (which holds only allowed keys).
pub(super) fn read_knobs(r: &Reader, t: &mut Table) -> Result<KnobSet, PlanError> {
    let mut k = KnobSet::default();
    if let Some(item) = t.take("mtu") {
        // 68 is IPv4's minimum; 65535 is ETH_MAX_MTU, the most a veth takes.
        k.link.mtu = Some(r.u32_in(&item, 68, 65_535)?);
    }
    if let Some(item) = t.take("rate_mbit") {
        k.link.rate_mbit = Some(r.u32_in(&item, 1, 1_000_000)?);
    }
    read_offloads(r, t, &mut k)?;
    k.link.nic = read_nic(r, t)?;
    if let Some(item) = t.take("sysctl") {
        k.sysctl = read_sysctls(r, item)?;
    }
    let mut flag = |name: &str| -> Result<Option<bool>, PlanError> {
        t.take(name).map(|item| r.bool(&item)).transpose()
    };
    k.nodelay = flag("nodelay")?;
    k.quickack = flag("quickack")?;
    k.immediate_data = flag("immediate_data")?;
    k.initial_r2t = flag("initial_r2t")?;
    k.batching = flag("batching")?;
    k.buffer_pool = flag("buffer_pool")?;
    k.floor = flag("floor")?;
    let mut size = |name: &str, min: u32, max: u32| -> Result<Option<u32>, PlanError> {
        t.take(name)
            .map(|item| size_in(r, &item, min, max))
            .transpose()
    };
    k.rcvbuf_bytes = size("rcvbuf", SOCKET_BUFFER_MIN_BYTES, SOCKET_BUFFER_MAX_BYTES)?;
    k.sndbuf_bytes = size("sndbuf", SOCKET_BUFFER_MIN_BYTES, SOCKET_BUFFER_MAX_BYTES)?;
    k.max_recv_data_segment_length = size(
        "max_recv_data_segment_length",
        LENGTH_MIN_BYTES,
        LENGTH_MAX_BYTES,
    )?;
    k.first_burst_length = size("first_burst_length", LENGTH_MIN_BYTES, LENGTH_MAX_BYTES)?;
    k.max_burst_length = size("max_burst_length", LENGTH_MIN_BYTES, LENGTH_MAX_BYTES)?;
    let mut count = |name: &str, min: u32, max: u32| -> Result<Option<u32>, PlanError> {
        t.take(name)
            .map(|item| r.u32_in(&item, min, max))
            .transpose()
    };
    k.busy_poll_us = count("busy_poll_us", 0, 1_000_000)?;
    k.connections = count("connections", 1, ISOE_TARGET_MAX_CONNECTIONS)?;
    k.sessions = count("sessions", 1, 64)?;
    k.workers = count("workers", 1, 64)?;
    for (key, field) in [
        ("header_digest", &mut k.header_digest),
        ("data_digest", &mut k.data_digest),
    ] {
        if let Some(item) = t.take(key) {
            *field = Some(read_bool_or(r, &item, "CRC32C", "None")?);
        }
    }
    if let Some(item) = t.take("initiator") {
        let names = InitiatorImpl::ALL.map(InitiatorImpl::as_str);
        let chosen = r.choice(&item, &names)?;
        k.initiator = InitiatorImpl::ALL
            .into_iter()
            .find(|i| i.as_str() == chosen);
    }
    if let Some(item) = t.take("filesystem") {
        let names = Filesystem::ALL.map(Filesystem::as_str);
        let chosen = r.choice(&item, &names)?;
        k.filesystem = Filesystem::ALL.into_iter().find(|f| f.as_str() == chosen);
    }
    if let Some(item) = t.take("target") {
        let names = TargetImpl::ALL.map(TargetImpl::as_str);
        let chosen = r.choice(&item, &names)?;
        k.target = TargetImpl::ALL.into_iter().find(|i| i.as_str() == chosen);
    }
    if let Some(item) = t.take("transport") {
        let names = Transport::ALL.map(Transport::as_str);
        let chosen = r.choice(&item, &names)?;
        k.transport = Transport::ALL.into_iter().find(|i| i.as_str() == chosen);
    }
    if let Some(item) = t.take("crc") {
        k.crc = Some(
            match r.choice(&item, &["hardware", "instruction", "software"])? {
                "hardware" => CrcImpl::Hardware,
                "instruction" => CrcImpl::Instruction,
                _ => CrcImpl::Software,
            },
        );
    }
    Ok(k)
}

fn read_nic(r: &Reader, t: &mut Table) -> Result<NicKnobs, PlanError> {
    let mut count = |name: &str, min: u32, max: u32| -> Result<Option<u32>, PlanError> {
        t.take(name)
            .map(|item| r.u32_in(&item, min, max))
            .transpose()
    };
    let mut nic = NicKnobs {
        rx_ring: count("rx_ring", 1, RING_MAX)?,
        tx_ring: count("tx_ring", 1, RING_MAX)?,
        rx_usecs: count("rx_usecs", 0, COALESCE_MAX_US)?,
        tx_usecs: count("tx_usecs", 0, COALESCE_MAX_US)?,
        channels: count("channels", 1, CHANNELS_MAX)?,
        flow_control: None,
    };
    if let Some(item) = t.take("flow_control") {
        nic.flow_control = Some(r.bool(&item)?);
    }
    Ok(nic)
}

/// Whether `name` is a sysctl a plan may write: `[a-z0-9_.-]+` in one of
/// [`SYSCTL_ROOTS`], no empty component. The name becomes a path under
/// `/proc/sys` (dots as slashes), so nothing else may reach it.
pub(crate) fn sysctl_name_ok(name: &str) -> bool {
    SYSCTL_ROOTS.iter().any(|root| name.starts_with(root))
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
        && name.split('.').all(|part| !part.is_empty())
}

/// `[baseline.sysctl]` or `[case.sysctl]`: names to values, each value a
/// string or an integer (kept as the text the kernel is given).
fn read_sysctls(r: &Reader, item: Field) -> Result<BTreeMap<String, String>, PlanError> {
    let Node::Table(entries) = item.node else {
        return Err(r.wrong_type(
            &item,
            "a table of sysctl names and values ([baseline.sysctl] or [case.sysctl])",
        ));
    };
    let mut out = BTreeMap::new();
    for (key, node) in entries {
        let name = key.get_ref().clone();
        let field = Field {
            key: join_key(&item.key, &name),
            offset: key.span().start,
            node,
        };
        if !sysctl_name_ok(&name) {
            return Err(r.at(
                &field,
                format!(
                    "{name:?} is not a sysctl a plan may set: a-z 0-9 _ . - under {}",
                    SYSCTL_ROOTS.join(", ")
                ),
            ));
        }
        let value = match &field.node {
            Node::Int(v) => v.to_string(),
            Node::Str(s) => s.clone(),
            _ => return Err(r.wrong_type(&field, "a string or an integer")),
        };
        let printable = value.chars().all(|c| c == '\t' || (' '..='~').contains(&c));
        if value.trim().is_empty() || !printable || value.len() > SYSCTL_VALUE_MAX_CHARS {
            return Err(r.at(
                &field,
                format!(
                    "{value:?}: a sysctl value is 1 to {SYSCTL_VALUE_MAX_CHARS} printable ASCII characters"
                ),
            ));
        }
        out.insert(name, value);
    }
    Ok(out)
}

/// `tso` sets both sides; `initiator_tso` / `target_tso` one side. Saying
/// both for the same side would leave the reader guessing, so it is refused.
fn read_offloads(r: &Reader, t: &mut Table, k: &mut KnobSet) -> Result<(), PlanError> {
    for offload in Offload::ALL {
        let name = offload.name();
        let both_at = t.position(name);
        if let Some(item) = t.take(name) {
            let v = r.bool(&item)?;
            *k.link.initiator.slot(offload) = Some(v);
            *k.link.target.slot(offload) = Some(v);
        }
        for side in ["initiator", "target"] {
            let key = format!("{side}_{name}");
            let Some(item) = t.take(&key) else { continue };
            if let Some(at) = both_at {
                return Err(r.at(
                    &item,
                    format!(
                        "`{name}` (line {}) already sets both sides; keep one of the two",
                        r.line(at)
                    ),
                ));
            }
            let offloads = if side == "initiator" {
                &mut k.link.initiator
            } else {
                &mut k.link.target
            };
            *offloads.slot(offload) = Some(r.bool(&item)?);
        }
    }
    Ok(())
}

/// Where the burst-length keys of a table were written, taken before the
/// knobs are read out of it, for [`check_merged`].
struct BurstKeys {
    path: String,
    at: usize,
    first: Option<usize>,
    max: Option<usize>,
    /// Where `floor`, `initiator` and `target` are, if the table has them.
    floor: Option<usize>,
    ends: Option<usize>,
}

impl BurstKeys {
    fn of(t: &Table) -> BurstKeys {
        BurstKeys {
            path: t.key.clone(),
            at: t.offset,
            first: t.position("first_burst_length"),
            max: t.position("max_burst_length"),
            floor: t.position("floor"),
            ends: t.position("initiator").or_else(|| t.position("target")),
        }
    }
}

/// Checks that need the merged set: the isoe target refuses a
/// FirstBurstLength above its MaxBurstLength (RFC 7143 §13.14), and the
/// floor replaces both ends, so it names neither.
fn check_merged(r: &Reader, keys: &BurstKeys, merged: &KnobSet) -> Result<(), PlanError> {
    if merged.is_floor() && (merged.initiator.is_some() || merged.target.is_some()) {
        let (key, at) = match (keys.floor, keys.ends) {
            (Some(at), _) => ("floor", at),
            (None, Some(at)) => ("initiator", at),
            (None, None) => ("floor", keys.at),
        };
        return Err(r.invalid(
            at,
            &join_key(&keys.path, key),
            "floor = true runs raw TCP in place of both the initiator and the target: set neither with it",
        ));
    }
    let first = merged
        .first_burst_length
        .unwrap_or(ISOE_TARGET_FIRST_BURST_LENGTH);
    let max = merged
        .max_burst_length
        .unwrap_or(ISOE_TARGET_MAX_BURST_LENGTH);
    if first <= max {
        return Ok(());
    }
    let (key, at) = match (keys.first, keys.max) {
        (Some(at), _) => ("first_burst_length", at),
        (None, Some(at)) => ("max_burst_length", at),
        (None, None) => ("first_burst_length", keys.at),
    };
    Err(r.invalid(
        at,
        &join_key(&keys.path, key),
        format!("first_burst_length {first} would exceed max_burst_length {max} (RFC 7143 §13.14)"),
    ))
}

/// The workloads, and where each that has one sets `in_flight` (its
/// offset and key path, by workload name).
type Workloads = (Vec<WorkloadSpec>, HashMap<String, (usize, String)>);

fn read_workloads(r: &Reader, item: Field) -> Result<Workloads, PlanError> {
    let mut out: Vec<WorkloadSpec> = Vec::new();
    let mut in_flight_at = HashMap::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let keys: Vec<&str> = ["name", "application", "stream"]
        .iter()
        .chain(PROFILE_KEYS)
        .chain(OLTP_KEYS)
        .chain(MAIL_KEYS)
        .chain(STREAM_KEYS)
        .copied()
        .collect();
    for mut t in r.tables(item, &keys)? {
        if let Some(kind) = t.take("stream") {
            out.push(read_stream(r, &mut t, kind, &mut first_line)?);
            continue;
        }
        for key in STREAM_KEYS {
            if let Some(item) = t.take(key) {
                return Err(r.at(
                    &item,
                    format!("`{key}` belongs to a stream workload: add `stream = \"tcp\"` or `\"udp\"`, or remove it"),
                ));
            }
        }
        if let Some(app) = t.take("application") {
            let at = (app.offset, app.key.clone());
            let spec = read_application(r, &mut t, app, &mut first_line)?;
            // A case's OLTP workloads share the database it makes.
            let scale = |w: &WorkloadSpec| match w.application {
                Some(Application::Oltp(o)) => Some(o.scale),
                _ => None,
            };
            if let (Some(mine), Some(other)) =
                (scale(&spec), out.iter().find(|w| scale(w).is_some()))
            {
                if scale(other) != Some(mine) {
                    return Err(r.invalid(
                        at.0,
                        &at.1,
                        format!(
                            "workload {:?} has scale {mine} and {:?} scale {}: a case's OLTP workloads share one database, so give them one scale",
                            spec.name,
                            other.name,
                            scale(other).unwrap_or_default()
                        ),
                    ));
                }
            }
            out.push(spec);
            continue;
        }
        for key in OLTP_KEYS.iter().chain(MAIL_KEYS) {
            if let Some(item) = t.take(key) {
                return Err(r.at(
                    &item,
                    format!("`{key}` belongs to an application workload: add `application = \"oltp\"` or `\"mail\"`, or remove it"),
                ));
            }
        }
        let profile_item = r.required(
            &mut t,
            "profile",
            "name an `isoe bench` profile or a matrix cell",
        )?;
        let profile = r.string(&profile_item)?;
        let Some((_, large_block)) = named_shape(&profile) else {
            let cells: Vec<String> = profiles::matrix().iter().map(|c| c.name()).collect();
            let names = profiles::profiles()
                .iter()
                .map(|p| p.name)
                .chain(cells.iter().map(String::as_str));
            let hint = closest(&profile, names)
                .map(|c| format!(" (did you mean \"{c}\"?)"))
                .unwrap_or_default();
            return Err(r.at(
                &profile_item,
                format!(
                    "no profile or matrix cell named {profile:?}{hint}; `isoe bench --list-profiles` lists the profiles, and matrix cells are named like \"matrix-read-4k-w2-qd16\""
                ),
            ));
        };
        let name = unique_name(r, &mut t, &profile, &profile_item, &mut first_line)?;
        if let Some(offset) = t.position("in_flight") {
            in_flight_at.insert(name.clone(), (offset, join_key(&t.key, "in_flight")));
        }
        let overrides = read_overrides(r, &mut t)?;
        let metric = match t.take("metric") {
            Some(item) => match r.choice(&item, &["iops", "mb_per_s"])? {
                "iops" => Metric::Iops,
                _ => Metric::MbPerS,
            },
            None if large_block => Metric::MbPerS,
            None => Metric::Iops,
        };
        out.push(WorkloadSpec {
            name,
            profile,
            overrides,
            metric,
            application: None,
            stream: None,
        });
    }
    Ok((out, in_flight_at))
}

/// The workload's `name`, or `default` (from `default_item`) without one;
/// an error when an earlier workload has it.
fn unique_name(
    r: &Reader,
    t: &mut Table,
    default: &str,
    default_item: &Field,
    first_line: &mut HashMap<String, usize>,
) -> Result<String, PlanError> {
    let (name, name_at, name_path) = match t.take("name") {
        Some(item) => (read_name(r, &item)?, item.offset, item.key),
        None => (
            default.to_owned(),
            default_item.offset,
            default_item.key.clone(),
        ),
    };
    if let Some(line) = first_line.get(&name) {
        return Err(r.invalid(
            name_at,
            &name_path,
            format!("duplicate workload name {name:?} (first at line {line}); give each a `name`"),
        ));
    }
    first_line.insert(name.clone(), r.line(name_at));
    Ok(name)
}

/// An application workload: `application = "oltp"` with `mix`, `scale`,
/// `clients` and `memory`, or `"mail"` with `database`, `log` and
/// `threads`; none of a profile's keys.
fn read_application(
    r: &Reader,
    t: &mut Table,
    app_item: Field,
    first_line: &mut HashMap<String, usize>,
) -> Result<WorkloadSpec, PlanError> {
    let kind = r.choice(&app_item, &["oltp", "mail"])?;
    for key in PROFILE_KEYS {
        if let Some(item) = t.take(key) {
            return Err(r.at(
                &item,
                format!("`{key}` shapes a synthetic profile; an application workload (application = \"{kind}\") makes its own I/O"),
            ));
        }
    }
    let (own, other) = if kind == "oltp" {
        (OLTP_KEYS, MAIL_KEYS)
    } else {
        (MAIL_KEYS, OLTP_KEYS)
    };
    for key in other {
        if let Some(item) = t.take(key) {
            return Err(r.at(
                &item,
                format!(
                    "`{key}` is not a key of application = \"{kind}\", whose keys are {}",
                    own.join(", ")
                ),
            ));
        }
    }
    let name = unique_name(r, t, kind, &app_item, first_line)?;
    let mib = |t: &mut Table, key: &str, default: u64, min: u64| -> Result<u64, PlanError> {
        match t.take(key) {
            None => Ok(default),
            Some(item) => {
                let bytes = u64::from(size_in(r, &item, 1 << 20, !0xfffff)?);
                if bytes < min {
                    return Err(r.at(&item, format!("{bytes} bytes is below the least, {min}")));
                }
                Ok(bytes)
            }
        }
    };
    let application = if kind == "oltp" {
        let mix = match t.take("mix") {
            None => OltpMix::TpcbLike,
            Some(item) => {
                let names = OltpMix::ALL.map(OltpMix::as_str);
                let chosen = r.choice(&item, &names)?;
                OltpMix::ALL
                    .into_iter()
                    .find(|m| m.as_str() == chosen)
                    .expect("a choice")
            }
        };
        let scale = match t.take("scale") {
            Some(item) => r.u32_in(&item, 1, 10_000)?,
            None => 10,
        };
        let clients = match t.take("clients") {
            Some(item) => r.u32_in(&item, 1, 256)?,
            None => 4,
        };
        let memory_bytes = mib(t, "memory", 128 << 20, 64 << 20)?;
        Application::Oltp(Oltp {
            mix,
            scale,
            clients,
            memory_bytes,
        })
    } else {
        let database_bytes = mib(t, "database", 256 << 20, 16 << 20)?;
        let log_bytes = mib(t, "log", 32 << 20, 1 << 20)?;
        let threads = match t.take("threads") {
            Some(item) => r.u32_in(&item, 1, 256)?,
            None => 32,
        };
        Application::Mail(Mail {
            database_bytes,
            log_bytes,
            threads,
        })
    };
    Ok(WorkloadSpec {
        name,
        profile: kind.to_owned(),
        overrides: WorkloadOverrides::default(),
        metric: if kind == "oltp" {
            Metric::Tps
        } else {
            Metric::Iops
        },
        application: Some(application),
        stream: None,
    })
}

/// A stream workload: `stream = "tcp"` or `"udp"` with `direction` and
/// `msg`; none of a profile's or an application's keys.
fn read_stream(
    r: &Reader,
    t: &mut Table,
    kind_item: Field,
    first_line: &mut HashMap<String, usize>,
) -> Result<WorkloadSpec, PlanError> {
    let kind = match r.choice(&kind_item, &["tcp", "udp"])? {
        "tcp" => StreamKind::Tcp,
        _ => StreamKind::Udp,
    };
    for key in PROFILE_KEYS.iter().chain(OLTP_KEYS).chain(MAIL_KEYS) {
        if let Some(item) = t.take(key) {
            return Err(r.at(
                &item,
                format!("`{key}` is not a key of a stream workload (stream = \"{}\"), whose keys are {}", kind.as_str(), STREAM_KEYS.join(", ")),
            ));
        }
    }
    let direction = match t.take("direction") {
        None => StreamDirection::InitiatorToTarget,
        Some(item) => {
            let names = StreamDirection::ALL.map(StreamDirection::as_str);
            let chosen = r.choice(&item, &names)?;
            StreamDirection::ALL
                .into_iter()
                .find(|d| d.as_str() == chosen)
                .expect("a choice")
        }
    };
    let msg = match t.take("msg") {
        None => None,
        Some(item) => Some(match kind {
            StreamKind::Tcp => size_in(r, &item, 1, BLOCK_SIZE_MAX_BYTES)?,
            StreamKind::Udp => size_in(r, &item, UDP_MSG_MIN, UDP_MSG_MAX)?,
        }),
    };
    let profile = format!("{}-stream", kind.as_str());
    let name = unique_name(r, t, &profile, &kind_item, first_line)?;
    Ok(WorkloadSpec {
        name,
        profile,
        overrides: WorkloadOverrides::default(),
        metric: Metric::MbPerS,
        application: None,
        stream: Some(StreamWorkload {
            kind,
            direction,
            msg,
        }),
    })
}

fn read_overrides(r: &Reader, t: &mut Table) -> Result<WorkloadOverrides, PlanError> {
    let mut o = WorkloadOverrides::default();
    let qd = t.take("qd");
    if let Some(item) = &qd {
        o.qd = Some(r.u32_in(item, 1, 1024)?);
    }
    if let Some(item) = t.take("in_flight") {
        if qd.is_some() {
            return Err(r.at(
                &item,
                "`in_flight` (commands in flight in all) and `qd` (per path and worker) say the same thing twice: keep one",
            ));
        }
        // Up to the deepest `qd` on the most paths a plan can have.
        o.in_flight = Some(r.u32_in(&item, 1, 1024 * 64)?);
    }
    if let Some(item) = t.take("bs") {
        let bs = size_in(r, &item, 512, BLOCK_SIZE_MAX_BYTES)?;
        if bs % 512 != 0 {
            return Err(r.at(&item, format!("{bs} bytes is not a multiple of 512")));
        }
        o.bs = Some(bs);
    }
    if let Some(item) = t.take("workers") {
        o.workers = Some(r.u32_in(&item, 1, 64)?);
    }
    for (key, field) in [
        ("read_pct", &mut o.read_pct),
        ("random_pct", &mut o.random_pct),
    ] {
        if let Some(item) = t.take(key) {
            *field = Some(u8::try_from(r.u32_in(&item, 0, 100)?).expect("at most 100"));
        }
    }
    Ok(o)
}

fn read_cases(
    r: &Reader,
    item: Field,
    topology: TopologyKind,
    baseline: &KnobSet,
    workloads: &[WorkloadSpec],
) -> Result<Vec<Case>, PlanError> {
    let allowed: Vec<&str> = CASE_OWN_KEYS.iter().chain(KNOB_KEYS).copied().collect();
    let mut cases: Vec<Case> = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for mut t in r.tables(item, &allowed)? {
        let name_item = r.required(&mut t, "name", "every case has a name")?;
        let name = read_name(r, &name_item)?;
        if name == "baseline" {
            return Err(r.at(
                &name_item,
                "\"baseline\" is the plan's [baseline] table; give the case another name",
            ));
        }
        if let Some(line) = first_line.get(&name) {
            return Err(r.at(
                &name_item,
                format!("duplicate case name {name:?} (first at line {line})"),
            ));
        }
        first_line.insert(name.clone(), r.line(name_item.offset));
        let description = match t.take("description") {
            Some(item) => r.string(&item)?,
            None => String::new(),
        };
        let case_topology = t
            .take("topology")
            .map(|item| read_topology(r, &item))
            .transpose()?;
        let compare_to = match t.take("compare_to") {
            Some(item) => {
                let target = r.string(&item)?;
                if target != "baseline" && !cases.iter().any(|c| c.name == target) {
                    return Err(r.at(
                        &item,
                        format!("{target:?} is neither \"baseline\" nor an earlier case"),
                    ));
                }
                Some(target)
            }
            None => None,
        };
        let mut workloads_at = None;
        let case_workloads = match t.take("workloads") {
            Some(item) => {
                workloads_at = Some((item.offset, item.key.clone()));
                Some(read_case_workloads(r, item, workloads)?)
            }
            None => None,
        };
        let bursts = BurstKeys::of(&t);
        let knobs = read_knobs(r, &mut t)?;
        let merged = baseline.overlay(&knobs);
        let case_paths = case_topology.unwrap_or(topology);
        check_merged(r, &bursts, &merged)?;
        if let (Some((at, key)), Some(names)) = (&workloads_at, &case_workloads) {
            let cannot = names
                .iter()
                .filter_map(|n| workloads.iter().find(|w| &w.name == n))
                .find_map(|w| w.cannot_run_with(&merged, case_paths.paths()));
            if let Some(why) = cannot {
                return Err(r.invalid(*at, key, why));
            }
        }
        if knobs.is_empty() && case_topology.is_none_or(|c| c == topology) {
            return Err(r.at(
                &name_item,
                format!("case {name:?} changes nothing: set a knob or another topology"),
            ));
        }
        cases.push(Case {
            name,
            description,
            knobs,
            topology: case_topology,
            compare_to,
            workloads: case_workloads,
        });
    }
    Ok(cases)
}

fn read_case_workloads(
    r: &Reader,
    item: Field,
    workloads: &[WorkloadSpec],
) -> Result<Vec<String>, PlanError> {
    let read_workload = |element: &Field| -> Result<String, PlanError> {
        let name = r.string(element)?;
        if !workloads.iter().any(|w| w.name == name) {
            let known: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
            return Err(r.at(
                element,
                format!(
                    "no workload named {name:?} in this plan; it has: {}",
                    known.join(", ")
                ),
            ));
        }
        Ok(name)
    };
    r.distinct(
        item,
        "an array of workload names",
        "an empty list runs nothing; leave the key out to run every workload",
        read_workload,
        |name| format!("{name:?}"),
    )
}

/// A size in bytes in `min..=max`: an integer, or a string such as
/// `"256KiB"` or `"4k"` in the grammar of [`isoe_size`].
fn size_in(r: &Reader, item: &Field, min: u32, max: u32) -> Result<u32, PlanError> {
    let bytes = match &item.node {
        Node::Int(v) => i128::from(*v),
        Node::Str(s) => isoe_size::parse_bytes(s)
            .map_err(|e| r.at(item, e.to_string()))?
            .into(),
        _ => return Err(r.wrong_type(item, "a size like \"256KiB\" or a number of bytes")),
    };
    if (i128::from(min)..=i128::from(max)).contains(&bytes) {
        Ok(u32::try_from(bytes).expect("range checked"))
    } else {
        Err(r.at(item, format!("{bytes} bytes is out of range {min}..={max}")))
    }
}
