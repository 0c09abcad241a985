//! Plans: what `isoe lab` runs. A plan names a topology, a baseline knob
//! set, test cases that each change one or more knobs (seed 001 Tables 1–5),
//! workloads by profile name, the run length and the statistical rules.
//! Plans are TOML files; the ones in `crates/lab/plans/` are embedded in
//! the binary ([`Plan::embedded`]), and a user can write their own
//! ([`Plan::load`]). `crates/lab/plans/example.toml` is a commented example
//! of every key.
//!
//! # Schema
//!
//! ```toml
//! name = "jumbo-check"          # required: [a-z0-9][a-z0-9._-]*, at most 64 characters
//! description = "MTU 9000 vs 1500 on the base SAN"   # optional
//! question = "Do jumbo frames pay on the base SAN?"   # optional: what the plan asks, one
//!                               # line of at most 300 characters; the report opens with
//!                               # its answer (without one, a question made from the cases)
//! seeds = ["001"]               # optional: the seed evaluations it reproduces
//! topology = "base"             # optional: loopback (default) | base | congested | vxlan | physical
//!
//! [run]                         # optional
//! duration_s = 10.0             # measured seconds per run (default 10), 0 < d <= 3600
//! ramp_s = 2.0                  # load before measuring (default 2), 0 <= r <= 600
//! pin_cpus = false              # initiator on the first CPU, target on the last (default false)
//! span = "512MiB"               # the lab's LUN size, the region every initiator reads and
//!                               # writes; the lab writes it before the reads (default 512MiB)
//!
//! [stats]                       # optional; defaults are stats::Rules::default()
//! min_runs = 3                  # rounds at least, 1..=100
//! max_runs = 6                  # rounds at most while a comparison is inconclusive, min_runs..=100
//! rsd_target_pct = 1.0          # the seeds' RSD target, shown per cell, (0, 100]
//! significance_pct = 5.0        # an effect counts above this (and when the t-test rejects 0), [0, 100]
//! steal_max_pct = 5.0           # repeat a run with more host CPU steal, [0, 100]
//! foreign_max_pct = 5.0         # repeat a run while other processes used more, % of one CPU
//!
//! [baseline]                    # optional: knob keys (below)
//! mtu = 1500
//!
//! [baseline.sysctl]             # optional: sysctls of both sides' machines
//! "net.ipv4.tcp_timestamps" = 1
//!
//! [[workload]]                  # at least one
//! profile = "seq-read-256k"     # required: an `isoe bench` profile or a matrix cell name
//! name = "seq-read-qd8"         # optional, default the profile; unique
//! qd = 8                        # optional overrides: qd, bs, workers, read_pct, random_pct
//! metric = "mb_per_s"           # optional: iops | mb_per_s (default: the profile's)
//! # in_flight = 40              # instead of qd: commands in flight in all, over every
//!                               # path (portal: URL or block device) and worker, as a
//!                               # seed states them; each case's depth per path and
//!                               # worker is in_flight / (paths x workers), which must
//!                               # divide evenly (checked at load for the namespace
//!                               # topologies, when a case starts on a test bed)
//!
//! [[workload]]                  # or an application, on a file system on the
//! name = "oltp"                 # initiator's block device (a test bed, an
//! application = "oltp"          # initiator that makes one): "oltp" (pgbench,
//! mix = "tpcb-like"             # metric TPS; mix "tpcb-like" | "select-only",
//! scale = 10                    # scale 1..=10000, clients 1..=256, memory: the
//! clients = 4                   # server's cgroup limit, >= 64 MiB; a plan's OLTP
//! memory = "128MiB"             # workloads share one scale) or "mail" (fio;
//!                               # database >= 16 MiB, log >= 1 MiB, threads 1..=256)
//!
//! [[workload]]                  # or a stream (seed 002's TCP_STREAM and UDP_STREAM):
//! name = "tcp-stream-tx"        # `isoe netprobe --stream` from the initiator's side
//! stream = "tcp"                # to a server on the target's, bytes one way;
//! direction = "initiator-to-target"  # or "target-to-initiator" (default the first);
//! msg = "128KiB"                # TCP 1 B..=16 MiB (default 128 KiB), UDP 16..=65507
//!                               # (default: the largest datagram the path MTU carries
//!                               # whole); metric mb_per_s; namespace topologies only
//!
//! [[case]]                      # any number, run in file order after the baseline
//! name = "jumbo"                # required, unique, not "baseline"
//! description = "MTU 9000"      # optional
//! topology = "congested"        # optional: run this case on another topology
//! compare_to = "baseline"       # optional: the case its effect is measured against
//! workloads = ["seq-read-qd8"]  # optional: a subset of the plan's workloads
//! mtu = 9000                    # knob keys; at least one knob or a topology
//!
//! [case.sysctl]                 # optional: this case's sysctls, over the baseline's
//! "net.ipv4.tcp_timestamps" = 0
//! ```
//!
//! # Knob keys
//!
//! Flat, in `[baseline]` and in each `[[case]]` (see [`crate::knobs`] for
//! what each does and where it acts):
//!
//! | key | value |
//! |---|---|
//! | `mtu` | 68..=65535 (the largest a veth takes is 65535) |
//! | `rate_mbit` | host port rate limit, 1..=1000000 |
//! | `tso` `gso` `gro` `tx` `rx` `sg` | ethtool offload on both sides, bool |
//! | `initiator_tso` ... `target_sg` | one side only; not together with the both-sides key |
//! | `rx_ring` `tx_ring` | ring entries on both sides' ports (`ethtool -G`), 1..=65536 |
//! | `rx_usecs` `tx_usecs` | interrupt coalescing (`ethtool -C`), microseconds, 0..=100000 |
//! | `channels` | combined queues for RSS (`ethtool -L`), 1..=1024 |
//! | `flow_control` | Ethernet pause, bool (`ethtool -A`, autonegotiation off) |
//! | `nodelay` `quickack` | bool |
//! | `rcvbuf` `sndbuf` | size, 1 KiB..=1 GiB (a fixed SO_RCVBUF turns auto-tuning off) |
//! | `busy_poll_us` | 0..=1000000 |
//! | `header_digest` `data_digest` | bool, or "CRC32C" / "None" |
//! | `immediate_data` `initial_r2t` | bool |
//! | `max_recv_data_segment_length` `first_burst_length` `max_burst_length` | size, 512..=16777215 |
//! | `connections` | 1..=8 |
//! | `sessions` | 1..=64; they share each worker's queue depth, each keeping its share (fio: a job each) |
//! | `workers` | 1..=64; wins over the workload's |
//! | `initiator` | "isoe", "libiscsi", "kernel" (open-iscsi), "isoe-ublk" or "isoe-nbd" (isoe's initiator as a block device, `isoe attach --ublk` or `--nbd`); the last three on a `physical` test bed, driven by fio with libaio |
//! | `target` | "isoe", "tgt", "lio" or "external" (the last two on a `physical` test bed) |
//! | `transport` | the kernel initiator's iface: "tcp", "cxgb4i", "bnx2i", "qedi", "be2iscsi" or "qla4xxx" |
//! | `filesystem` | "ext4" (the default) or "xfs": what application workloads run on |
//! | `batching` `buffer_pool` | bool |
//! | `crc` | "hardware", "instruction" or "software" |
//! | `floor` | bool: raw TCP exchanges of each workload's sizes at its connections x depth (`isoe netprobe`) in place of both ends, on the namespace topologies; names neither `initiator` nor `target` |
//!
//! Sysctls are a table, `[baseline.sysctl]` or `[case.sysctl]`, of quoted
//! names (`[a-z0-9_.-]+` under `net.`, `vm.` or `kernel.`) to values, a
//! string or an integer: `"net.ipv4.tcp_rmem" = "4096 131072 6291456"`. A
//! case's table is laid over the baseline's name by name. In a topology's
//! namespaces only `net.` sysctls apply (the others are the whole
//! machine's); a device without a NIC knob's setting (a veth has no rings)
//! reports it skipped with ethtool's reason.
//!
//! Sizes are an integer number of bytes or a string in the grammar of
//! [`isoe_size`], the same as `isoe bench`'s flags and `isoe target`'s
//! configuration: `"4k"`, `"4KiB"`, `"4KB"` and `"4096"` are all 4096 bytes,
//! `"1MiB"` = `"1m"`; every unit is a power of 1024, in any case.
//!
//! # Errors
//!
//! Reading stops at the first problem and names the file, the 1-based line
//! and the key path, array indices from 0, as `isoe target`'s configuration
//! errors do: `plan.toml:14: case[2].mtu: 100000 is out of range 68..=65535`.

mod read;
mod seed_lengths;
#[cfg(test)]
mod tests;

pub use seed_lengths::{SeedRunLength, SEED_RUN_LENGTHS};

use crate::application::Application;
use crate::knobs::{InitiatorImpl, KnobSet};
pub use crate::shape::WorkloadShape;
use crate::stream::StreamWorkload;
use isoe_bench::profiles;
use isoe_report::record::Metric;
use isoe_report::stats::Rules;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The plan `isoe lab` runs when given none.
pub const DEFAULT_PLAN: &str = "quick";

/// Seconds a run costs besides its ramp and measurement: starting the
/// initiator, logging in, writing the record. Used only for estimates.
pub const RUN_OVERHEAD_S: f64 = 2.0;

/// Seconds an application run costs besides its ramp and measurement (a
/// checkpoint, the block trace read back, the network probed), on a VM
/// under emulation. Used only for estimates.
pub const APPLICATION_RUN_OVERHEAD_S: f64 = 20.0;

/// Seconds a case takes, each round, to make the file system and the
/// database its application workloads run on, on a VM under emulation.
/// Used only for estimates.
pub const APPLICATION_PREPARE_S: f64 = 90.0;

/// The plans shipped in `crates/lab/plans/`, by name.
const EMBEDDED: &[(&str, &str)] = &[
    ("quick", include_str!("../plans/quick.toml")),
    ("qsan-2012", include_str!("../plans/qsan-2012.toml")),
    ("dell-2013", include_str!("../plans/dell-2013.toml")),
    (
        "openstack-offloads",
        include_str!("../plans/openstack-offloads.toml"),
    ),
    ("pt-2009", include_str!("../plans/pt-2009.toml")),
    ("demartek-2016", include_str!("../plans/demartek-2016.toml")),
    (
        "software-vs-offload",
        include_str!("../plans/software-vs-offload.toml"),
    ),
    ("block-devices", include_str!("../plans/block-devices.toml")),
    ("applications", include_str!("../plans/applications.toml")),
    (
        "sessions-sweep",
        include_str!("../plans/sessions-sweep.toml"),
    ),
    ("peers", include_str!("../plans/peers.toml")),
];

/// The test bed a plan (or a case) runs on (METHODOLOGY.md "Topologies").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyKind {
    /// Target and initiator on 127.0.0.1.
    #[default]
    Loopback,
    /// Seed 001 Figure 1: two host ports, two portals, 1:1.
    Base,
    /// Seed 001 Figure 2: four portals into one rate-limited host port, 4:1.
    Congested,
    /// Seed 002: the base path over a VxLAN overlay.
    Vxlan,
    /// Real machines (or VMs) a test bed file names (`isoe lab --testbed`,
    /// [`crate::testbed`]): the initiator's host, the target's host, and
    /// the interfaces that carry the portals.
    Physical,
}

impl TopologyKind {
    /// Every topology, in METHODOLOGY.md's order.
    pub const ALL: [TopologyKind; 5] = [
        TopologyKind::Loopback,
        TopologyKind::Base,
        TopologyKind::Congested,
        TopologyKind::Vxlan,
        TopologyKind::Physical,
    ];

    /// The paths (target portals, each an initiator's URL or block device)
    /// an initiator has on it: 1 on loopback and VxLAN, 2 on the base SAN,
    /// 4 on the congested one; None on a test bed, whose file names its
    /// portals (an external target's one), known only when a case runs.
    pub fn paths(self) -> Option<u32> {
        match self {
            TopologyKind::Loopback | TopologyKind::Vxlan => Some(1),
            TopologyKind::Base => Some(2),
            TopologyKind::Congested => Some(4),
            TopologyKind::Physical => None,
        }
    }

    /// The name plans use: `loopback`, `base`, `congested`, `vxlan`.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyKind::Loopback => "loopback",
            TopologyKind::Base => "base",
            TopologyKind::Congested => "congested",
            TopologyKind::Vxlan => "vxlan",
            TopologyKind::Physical => "physical",
        }
    }
}

impl fmt::Display for TopologyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long each run lasts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunLength {
    /// Measured seconds.
    pub duration_s: f64,
    /// Seconds of load before measuring.
    pub ramp_s: f64,
    /// The initiator's processes on the first CPU and the target's on the
    /// last, so that they do not trade places on a CPU mid-run.
    #[serde(default)]
    pub pin_cpus: bool,
    /// The size of the LUN the lab makes (isoe's and tgt's; LIO's RAM disk
    /// up to 512 MiB) and the region every initiator's runs address from
    /// each LU's start (`isoe bench --span`, fio's `--size`), which the lab
    /// writes before a case's first read. The whole LU, so that what the
    /// operating system reads of a new block device (its last blocks) is
    /// written too.
    #[serde(default = "default_span_bytes")]
    pub span_bytes: u64,
}

/// [`RunLength::span_bytes`] unless a plan says otherwise: 512 MiB, more
/// than any CPU's cache.
pub const DEFAULT_SPAN_BYTES: u64 = 512 << 20;

fn default_span_bytes() -> u64 {
    DEFAULT_SPAN_BYTES
}

impl Default for RunLength {
    /// `isoe bench`'s defaults: 10 s measured after a 2 s ramp.
    fn default() -> Self {
        RunLength {
            duration_s: 10.0,
            ramp_s: 2.0,
            pin_cpus: false,
            span_bytes: DEFAULT_SPAN_BYTES,
        }
    }
}

/// One test case: a change from the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Unique within the plan; never "baseline".
    pub name: String,
    /// For people.
    pub description: String,
    /// The knobs it sets, over the baseline's.
    pub knobs: KnobSet,
    /// Another topology than the plan's, if any.
    pub topology: Option<TopologyKind>,
    /// The case its effect is measured against: "baseline" (the default) or
    /// an earlier case, e.g. the MTU 9000 case for a series at MTU 9000.
    pub compare_to: Option<String>,
    /// The plan workloads it runs, by name; None = all.
    pub workloads: Option<Vec<String>>,
}

impl Case {
    /// The baseline as a case: named "baseline", changing nothing.
    pub fn baseline(plan: &Plan) -> Case {
        Case {
            name: "baseline".into(),
            description: format!("the baseline of {}", plan.name),
            knobs: KnobSet::default(),
            topology: None,
            compare_to: None,
            workloads: None,
        }
    }
}

/// Overrides of a profile's shape; None keeps the profile's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadOverrides {
    /// Commands outstanding per worker and path (URL or block device).
    pub qd: Option<u32>,
    /// Commands in flight in all, over every path and worker, as a seed
    /// states them ("8 volumes x 5 threads"): the depth per path and
    /// worker is derived from it for the paths a case runs on
    /// ([`WorkloadSpec::shape`]); never together with `qd`.
    #[serde(default)]
    pub in_flight: Option<u32>,
    /// Bytes per command.
    pub bs: Option<u32>,
    /// Worker threads (a case's `workers` knob wins over this).
    pub workers: Option<u32>,
    /// Percent reads.
    pub read_pct: Option<u8>,
    /// Percent random.
    pub random_pct: Option<u8>,
}

/// A workload of a plan: a named profile or matrix cell, maybe reshaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// Unique within the plan; the profile's name unless given.
    pub name: String,
    /// An [`isoe_bench::profiles::find`] name, or a
    /// [`isoe_bench::profiles::matrix`] cell name.
    pub profile: String,
    /// Changes to the profile's shape.
    pub overrides: WorkloadOverrides,
    /// What the statistics are computed on.
    pub metric: Metric,
    /// An application run on a file system on the initiator's block
    /// device instead of the profile (whose name is then the
    /// application's kind).
    #[serde(default)]
    pub application: Option<Application>,
    /// A stream (`isoe netprobe --stream`) instead of the profile (whose
    /// name is then "tcp-stream" or "udp-stream").
    #[serde(default)]
    pub stream: Option<StreamWorkload>,
}

/// The shape of a profile or matrix cell by name, and whether the seed
/// reported it in MB/s.
fn named_shape(profile: &str) -> Option<(WorkloadShape, bool)> {
    if let Some(p) = profiles::find(profile) {
        return Some((
            WorkloadShape {
                block_size_bytes: p.block_size_bytes,
                read_pct: p.read_pct,
                random_pct: p.random_pct,
                queue_depth: p.queue_depth,
                workers: p.workers,
            },
            p.large_block,
        ));
    }
    profiles::matrix()
        .into_iter()
        .find(|c| c.name() == profile)
        .map(|c| {
            (
                WorkloadShape {
                    block_size_bytes: c.block_size_bytes,
                    read_pct: c.read_pct,
                    random_pct: c.random_pct,
                    queue_depth: c.queue_depth,
                    workers: c.workers,
                },
                false,
            )
        })
}

impl WorkloadSpec {
    /// True when the statistics use MB/s (the seeds' large-block workloads).
    pub fn large_block(&self) -> bool {
        self.metric == Metric::MbPerS
    }

    /// True when `profile` names a matrix cell rather than a profile.
    pub fn is_matrix_cell(&self) -> bool {
        self.application.is_none()
            && self.stream.is_none()
            && profiles::find(&self.profile).is_none()
    }

    /// Whether a case whose knobs are `knobs` can run it on `paths` paths
    /// ([`WorkloadSpec::cannot_run_with`]).
    pub fn runs_with(&self, knobs: &KnobSet, paths: Option<u32>) -> bool {
        self.cannot_run_with(knobs, paths).is_none()
    }

    /// Why a case whose knobs are `knobs` cannot run it on `paths` paths
    /// (None: a test bed's, not known yet), if it cannot: an application
    /// needs an initiator that makes a block device; the floor needs a
    /// workload it has a raw-TCP shape for ([`crate::floor::FloorJob`]);
    /// sessions share a worker's depth. A depth derived from `in_flight`
    /// is checked only where the paths are known. A stream runs with any
    /// knobs (it has neither initiator nor target).
    pub fn cannot_run_with(&self, knobs: &KnobSet, paths: Option<u32>) -> Option<String> {
        let depth_known = paths.is_some() || self.overrides.in_flight.is_none();
        let paths = paths.unwrap_or(1);
        if self.stream.is_some() {
            // Raw TCP or UDP between the two sides: no initiator, target
            // or floor is in it, and every case's link knobs act on it.
            return None;
        }
        if knobs.is_floor() {
            if self.application.is_some() {
                return Some(format!(
                    "workload {:?} is an application, which needs a block device; the floor (floor = true) is raw TCP",
                    self.name
                ));
            }
            return crate::floor::FloorJob::new(&self.shape(knobs, paths), knobs, 1, 1.0, 0.0)
                .err()
                .map(|why| format!("workload {:?} has no floor: {why}", self.name));
        }
        if self.application.is_some() {
            return (!knobs.initiator_impl().makes_block_device()).then(|| {
                format!(
                    "workload {:?} is an application, which runs on a file system on a block device, and initiator = {} makes none: use kernel, isoe-ublk or isoe-nbd",
                    self.name,
                    knobs.initiator_impl().as_str()
                )
            });
        }
        if !depth_known {
            return None;
        }
        // The sessions share a worker's depth, each keeping its share.
        let sessions = knobs.sessions.unwrap_or(1);
        let qd = self.shape(knobs, paths).queue_depth;
        let uneven = match knobs.initiator_impl() {
            InitiatorImpl::Isoe => qd < sessions,
            InitiatorImpl::Libiscsi => !qd.is_multiple_of(sessions),
            _ => false,
        };
        uneven.then(|| {
            format!(
                "workload {:?}: QD {qd} does not share evenly over {sessions} sessions",
                self.name
            )
        })
    }

    /// The shape it runs with under `knobs` (whose `workers` wins) on
    /// `paths` paths (URLs or block devices, one per portal); an
    /// application's nominal one. With `in_flight` the depth per path and
    /// worker is `in_flight / (paths x workers)`: callers check
    /// [`WorkloadSpec::in_flight_uneven`] first (the plan reader does for
    /// the namespace topologies, the runners for the paths a case really
    /// has), and the record's `in_flight`, counted from what ran, shows
    /// any departure.
    pub fn shape(&self, knobs: &KnobSet, paths: u32) -> WorkloadShape {
        if let Some(app) = &self.application {
            return app.nominal_shape();
        }
        if let Some(stream) = &self.stream {
            return stream.nominal_shape();
        }
        let (base, _) = named_shape(&self.profile).expect("profile checked when the plan was read");
        let o = &self.overrides;
        let workers = knobs.workers.or(o.workers).unwrap_or(base.workers);
        let queue_depth = match o.in_flight {
            Some(total) => (total / (paths.max(1) * workers)).max(1),
            None => o.qd.unwrap_or(base.queue_depth),
        };
        WorkloadShape {
            block_size_bytes: o.bs.unwrap_or(base.block_size_bytes),
            read_pct: o.read_pct.unwrap_or(base.read_pct),
            random_pct: o.random_pct.unwrap_or(base.random_pct),
            queue_depth,
            workers,
        }
    }

    /// Percent reads, whatever the case (an application's nominal share).
    pub fn read_pct(&self) -> u8 {
        self.shape(&KnobSet::default(), 1).read_pct
    }

    /// Why `in_flight` cannot be kept on `paths` paths under `knobs`: the
    /// total does not share evenly over paths x workers. None without
    /// `in_flight`, or when it shares.
    pub fn in_flight_uneven(&self, knobs: &KnobSet, paths: u32) -> Option<String> {
        let total = self.overrides.in_flight?;
        let workers = self.shape(knobs, paths).workers;
        let ways = paths.max(1) * workers;
        (!total.is_multiple_of(ways)).then(|| {
            format!(
                "workload {:?}: in_flight = {total} does not share evenly over {paths} path(s) x {workers} worker(s) ({ways})",
                self.name
            )
        })
    }

    /// The `isoe bench` options selecting this workload as it runs in
    /// `shape` (its [`WorkloadSpec::shape`] for the case's knobs and
    /// paths): `--profile NAME` and its overrides, the depth derived from
    /// `in_flight`, or for a matrix cell its whole shape. `--workers` is
    /// left to [`KnobSet::bench_args`] when the knob sets it, so that the
    /// two lists can be concatenated.
    pub fn bench_args(&self, knobs: &KnobSet, shape: &WorkloadShape) -> Vec<String> {
        let mut args = Vec::new();
        let mut opt = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                args.push(name.to_string());
                args.push(v);
            }
        };
        let o = &self.overrides;
        let workers = if knobs.workers.is_some() {
            None
        } else {
            o.workers
        };
        if self.is_matrix_cell() {
            opt("--bs", Some(shape.block_size_bytes.to_string()));
            opt("--read-pct", Some(shape.read_pct.to_string()));
            opt("--random-pct", Some(shape.random_pct.to_string()));
            opt("--qd", Some(shape.queue_depth.to_string()));
            let workers = knobs.workers.is_none().then_some(shape.workers);
            opt("--workers", workers.map(|w| w.to_string()));
        } else {
            let qd = (o.qd.is_some() || o.in_flight.is_some()).then_some(shape.queue_depth);
            opt("--profile", Some(self.profile.clone()));
            opt("--bs", o.bs.map(|v| v.to_string()));
            opt("--read-pct", o.read_pct.map(|v| v.to_string()));
            opt("--random-pct", o.random_pct.map(|v| v.to_string()));
            opt("--qd", qd.map(|v| v.to_string()));
            opt("--workers", workers.map(|v| v.to_string()));
        }
        args
    }
}

/// A case as it runs: the baseline first, then each case with the
/// baseline's knobs under its own.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCase {
    /// "baseline" or the case's name.
    pub name: String,
    /// For people.
    pub description: String,
    /// What the case itself sets (empty for the baseline).
    pub changes: KnobSet,
    /// Every knob in force: the baseline overlaid with the case.
    pub knobs: KnobSet,
    /// The topology it runs on.
    pub topology: TopologyKind,
    /// What its effects are measured against; None for the baseline.
    pub compare_to: Option<String>,
    /// The workloads it runs, by name, in plan order.
    pub workloads: Vec<String>,
}

/// A whole plan, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Its name (an embedded plan's name is its file stem).
    pub name: String,
    /// For people; the shipped plans state their estimated duration here.
    pub description: String,
    /// The question the plan asks, which its report opens by answering
    /// (None: the report makes one from the cases).
    pub question: Option<String>,
    /// The seed evaluations it reproduces ("000" ... "004").
    pub seeds: Vec<String>,
    /// The topology of the baseline and of every case that names none.
    pub topology: TopologyKind,
    /// Run length.
    pub run: RunLength,
    /// Statistical rules.
    pub rules: Rules,
    /// The baseline's knobs.
    pub baseline: KnobSet,
    /// The cases, in run order.
    pub cases: Vec<Case>,
    /// The workloads, in run order; never empty.
    pub workloads: Vec<WorkloadSpec>,
    /// The file it was read from, or `embedded:NAME`.
    pub source: String,
}

/// A plan that could not be found, read or accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The file could not be read, is not TOML, or has a key or value
    /// plans do not accept (the key's path as `case[2].mtu`).
    #[error(transparent)]
    File(#[from] isoe_config::FileError),
    /// Neither an embedded plan nor a file.
    #[error("no plan {name:?}: not an embedded plan ({}) nor a file", available.join(", "))]
    NotFound {
        /// What was asked for.
        name: String,
        /// The embedded plans.
        available: Vec<String>,
    },
}

impl PlanError {
    /// The 1-based line the error points at, if it points into a file.
    pub fn line(&self) -> Option<usize> {
        match self {
            PlanError::File(e) => e.line(),
            PlanError::NotFound { .. } => None,
        }
    }
}

// Syntax and Invalid are the problems the shared reader finds.
isoe_config::impl_read_error!(PlanError);

impl Plan {
    /// Reads and checks the plan file at `path`.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| isoe_config::FileError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Plan::parse(&text, &path.display().to_string())
    }

    /// Checks plan `text`; `source_name` names it in errors and in
    /// [`Plan::source`].
    pub fn parse(text: &str, source_name: &str) -> Result<Plan, PlanError> {
        let plan = read::read_plan(text, source_name)?;
        debug_assert!(!plan.workloads.is_empty());
        debug_assert!(plan.rules.min_runs <= plan.rules.max_runs);
        Ok(plan)
    }

    /// The text of the shipped plan called `name` (for the report's appendix).
    pub fn embedded_text(name: &str) -> Option<&'static str> {
        EMBEDDED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| *text)
    }

    /// The shipped plan called `name`, if there is one.
    pub fn embedded(name: &str) -> Option<Plan> {
        let (_, text) = EMBEDDED.iter().find(|(n, _)| *n == name)?;
        let source = format!("embedded:{name}");
        Some(Plan::parse(text, &source).expect("shipped plans parse (tested)"))
    }

    /// Every shipped plan's name and description, default first.
    pub fn list_embedded() -> Vec<(String, String)> {
        EMBEDDED
            .iter()
            .map(|(name, _)| {
                let plan = Plan::embedded(name).expect("listed");
                (plan.name, plan.description)
            })
            .collect()
    }

    /// A shipped plan by name, else a plan file by path.
    pub fn from_arg(name_or_path: &str) -> Result<Plan, PlanError> {
        if let Some(plan) = Plan::embedded(name_or_path) {
            return Ok(plan);
        }
        let path = Path::new(name_or_path);
        if path.exists() {
            return Plan::load(path);
        }
        Err(PlanError::NotFound {
            name: name_or_path.to_string(),
            available: EMBEDDED.iter().map(|(n, _)| n.to_string()).collect(),
        })
    }

    /// The baseline then every case, each with its knobs resolved.
    pub fn resolved_cases(&self) -> Vec<ResolvedCase> {
        // Without a list, a case runs every workload its initiator can.
        let all = |knobs: &KnobSet, topology: TopologyKind| -> Vec<String> {
            self.workloads
                .iter()
                .filter(|w| w.runs_with(knobs, topology.paths()))
                .map(|w| w.name.clone())
                .collect()
        };
        let baseline = Case::baseline(self);
        let mut out = vec![ResolvedCase {
            name: baseline.name,
            description: baseline.description,
            changes: KnobSet::default(),
            knobs: self.baseline.clone(),
            topology: self.topology,
            compare_to: None,
            workloads: all(&self.baseline, self.topology),
        }];
        for case in &self.cases {
            let knobs = self.baseline.overlay(&case.knobs);
            let topology = case.topology.unwrap_or(self.topology);
            out.push(ResolvedCase {
                name: case.name.clone(),
                description: case.description.clone(),
                changes: case.knobs.clone(),
                topology,
                compare_to: Some(case.compare_to.clone().unwrap_or_else(|| "baseline".into())),
                workloads: case
                    .workloads
                    .clone()
                    .unwrap_or_else(|| all(&knobs, topology)),
                knobs,
            });
        }
        out
    }

    /// Why a case with `knobs` cannot run `workloads` on `paths` paths, if
    /// it cannot: a workload's `in_flight` does not share evenly over them,
    /// or its depth over the sessions ([`WorkloadSpec::cannot_run_with`]).
    /// The runners ask once a case's paths are known (a test bed's
    /// portals, an external target's one).
    pub fn uneven_depth(
        &self,
        knobs: &KnobSet,
        workloads: &[String],
        paths: u32,
    ) -> Option<String> {
        workloads
            .iter()
            .filter_map(|w| self.workload(w))
            .find_map(|w| {
                w.in_flight_uneven(knobs, paths)
                    .or_else(|| w.cannot_run_with(knobs, Some(paths)))
            })
    }

    /// The workload called `name`.
    pub fn workload(&self, name: &str) -> Option<&WorkloadSpec> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// How many case × workload cells the plan runs (the baseline included).
    pub fn cell_count(&self) -> usize {
        self.resolved_cases()
            .iter()
            .map(|c| c.workloads.len())
            .sum()
    }

    /// Estimated seconds to run the plan, (fewest, most): every cell runs
    /// `min_runs` times, or `max_runs` times when the RSD never converges;
    /// each run costs its ramp, its duration and [`RUN_OVERHEAD_S`] (an
    /// application's [`APPLICATION_RUN_OVERHEAD_S`]), and a case with
    /// application workloads [`APPLICATION_PREPARE_S`] a round. Runs
    /// repeated for host CPU steal are not counted.
    pub fn estimated_duration_s(&self) -> (f64, f64) {
        let measured = self.run.ramp_s + self.run.duration_s;
        let mut per_round_s = 0.0;
        for case in self.resolved_cases() {
            let mut prepares = false;
            for w in case.workloads.iter().filter_map(|w| self.workload(w)) {
                prepares |= w.application.is_some();
                per_round_s += measured
                    + if w.application.is_some() {
                        APPLICATION_RUN_OVERHEAD_S
                    } else {
                        RUN_OVERHEAD_S
                    };
            }
            if prepares {
                per_round_s += APPLICATION_PREPARE_S;
            }
        }
        (
            per_round_s * f64::from(self.rules.min_runs),
            per_round_s * f64::from(self.rules.max_runs),
        )
    }
}
