//! Every knob a test case may set (METHODOLOGY.md "Knobs"), and how each one
//! reaches the process or device that honours it.
//!
//! A [`KnobSet`] holds optional values: `None` means "as the baseline", and
//! in the baseline "as the peer's default". A case's set is laid over the
//! baseline with [`KnobSet::overlay`]. The set is then turned into:
//!
//! - `isoe bench` options for the isoe initiator ([`KnobSet::bench_args`]),
//!   and the fewer `isoe attach` takes for isoe's initiator as a block
//!   device ([`KnobSet::attach_args`]);
//! - a `[defaults]` table for `isoe target --config`
//!   ([`KnobSet::target_defaults_toml`]) and a `[datapath]` table
//!   ([`KnobSet::target_datapath_toml`]);
//! - and the list of knobs the chosen peers cannot apply, with the reason
//!   ([`KnobSet::unsupported`], in `limits.rs`), so that a run reports them
//!   as skipped instead of ignoring them.
//!
//! Each peer translates the set its own way, in `peers/` (tgt's
//! parameters, LIO's configfs attributes, what libiscsi and the kernel
//! initiator fix themselves); this file knows none of them.
//!
//! Link knobs ([`LinkKnobs`]: MTU, rate, ethtool offloads, rings,
//! coalescing, queues, flow control) and sysctls are applied by the
//! topology, or on real machines by [`crate::hostknobs`], not here.
//!
//! Where the knobs act:
//!
//! - **Socket knobs** (`nodelay`, `quickack`, `rcvbuf`, `sndbuf`,
//!   `busy_poll_us`) are set on the initiator's sockets, the storage host's
//!   TCP stack that seed 001 tuned. Both targets set TCP_NODELAY themselves
//!   and take no other socket option.
//! - **iSCSI parameters** are negotiated (RFC 7143 §13), so each is given to
//!   both ends in the form that makes the negotiated value the one asked
//!   for: digests are offered alone by the target (`["CRC32C"]`, or
//!   `["None"]`), because the responder picks the first value of the
//!   initiator's list that it supports; ImmediateData is the AND of both
//!   offers (§13.11) and InitialR2T the OR (§13.10), so both ends say the
//!   same; burst lengths are the smaller offer (§13.13, §13.14), so both
//!   offer the value; MaxRecvDataSegmentLength is declared by each end for
//!   its own receiving (§13.12), and the knob makes both declare it.
//! - **Datapath knobs** (`batching`, `crc`, `buffer_pool`) belong to isoe's
//!   target, which reads them from the `[datapath]` table of its
//!   configuration (`isoe_target::config::Datapath` says what each one
//!   turns off); they do not apply to tgt. `crc` only matters where a digest
//!   is negotiated.

use crate::attach_device::AttachKind;
use crate::link::{LinkKnobs, NicKnobs, Offload, Offloads, Side};
use isoe_bench::profiles::block_label;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Whether `isoe target --config` accepts the `[datapath]` table. While
/// false, every datapath knob is reported as not applied
/// ([`KnobSet::unsupported`]); it does since the target learned the table.
pub const ISOE_TARGET_ACCEPTS_DATAPATH: bool = true;

/// What libiscsi offers for the burst lengths and declares as its
/// MaxRecvDataSegmentLength, fixed in `iscsi_create_context`.
pub const LIBISCSI_FIXED_LENGTH_BYTES: u32 = 262_144;

/// The isoe target's FirstBurstLength when the knob is not set
/// (`examples/target.toml`).
pub const ISOE_TARGET_FIRST_BURST_LENGTH: u32 = 262_144;

/// The isoe target's MaxBurstLength when the knob is not set.
pub const ISOE_TARGET_MAX_BURST_LENGTH: u32 = 1_048_576;

/// The most connections per session the isoe target accepts.
pub const ISOE_TARGET_MAX_CONNECTIONS: u32 = 8;

/// What isoe's initiator declares as its MaxRecvDataSegmentLength and
/// offers as FirstBurstLength and MaxBurstLength unless told otherwise
/// (`isoe_initiator::config::default_params`): what an `isoe attach`
/// session negotiates with, having no options for them.
pub const ISOE_INITIATOR_MAX_RECV_DATA_SEGMENT_LENGTH: u32 = 262_144;
/// isoe's initiator's FirstBurstLength offer (see above).
pub const ISOE_INITIATOR_FIRST_BURST_LENGTH: u32 = 262_144;
/// isoe's initiator's MaxBurstLength offer (see above).
pub const ISOE_INITIATOR_MAX_BURST_LENGTH: u32 = 1_048_576;

/// The initiator a case runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitiatorImpl {
    /// isoe's own initiator, as `isoe bench`.
    #[default]
    Isoe,
    /// libiscsi through fio's `libiscsi` engine (fio built by `crates/lab/fio-libiscsi`).
    Libiscsi,
    /// The Linux kernel's initiator (open-iscsi, `iscsi_tcp` or an offload
    /// transport) on a test bed's initiator host, driven by fio with libaio
    /// on the block device its session made ([`crate::peers::kernel`]).
    Kernel,
    /// isoe's initiator as a Linux block device through ublk (`isoe attach
    /// --ublk`) on a test bed's initiator host, driven by fio with libaio
    /// as the kernel's is ([`crate::attach_device`]).
    #[serde(rename = "isoe-ublk")]
    IsoeUblk,
    /// isoe's initiator as a Linux block device through NBD (`isoe attach
    /// --nbd`), as [`InitiatorImpl::IsoeUblk`] is.
    #[serde(rename = "isoe-nbd")]
    IsoeNbd,
}

impl InitiatorImpl {
    /// Every initiator, in the order plans list them.
    pub const ALL: [InitiatorImpl; 5] = [
        InitiatorImpl::Isoe,
        InitiatorImpl::Libiscsi,
        InitiatorImpl::Kernel,
        InitiatorImpl::IsoeUblk,
        InitiatorImpl::IsoeNbd,
    ];

    /// The name plans and reports use: `isoe`, `libiscsi`, `kernel`,
    /// `isoe-ublk` or `isoe-nbd`.
    pub fn as_str(self) -> &'static str {
        match self {
            InitiatorImpl::Isoe => "isoe",
            InitiatorImpl::Libiscsi => "libiscsi",
            InitiatorImpl::Kernel => "kernel",
            InitiatorImpl::IsoeUblk => "isoe-ublk",
            InitiatorImpl::IsoeNbd => "isoe-nbd",
        }
    }

    /// Whether it gives the initiator host a block device that fio drives
    /// with libaio and O_DIRECT: the kernel's, and isoe's through `isoe
    /// attach`. These need a whole machine (root, kernel modules): they
    /// run on a test bed only.
    pub fn makes_block_device(self) -> bool {
        matches!(
            self,
            InitiatorImpl::Kernel | InitiatorImpl::IsoeUblk | InitiatorImpl::IsoeNbd
        )
    }

    /// isoe's initiator as a block device through `kind`.
    pub fn of_attach(kind: AttachKind) -> InitiatorImpl {
        match kind {
            AttachKind::Ublk => InitiatorImpl::IsoeUblk,
            AttachKind::Nbd => InitiatorImpl::IsoeNbd,
        }
    }

    /// The `isoe attach` front-end it uses, if it is isoe's initiator as a
    /// block device.
    pub fn attach_kind(self) -> Option<AttachKind> {
        match self {
            InitiatorImpl::IsoeUblk => Some(AttachKind::Ublk),
            InitiatorImpl::IsoeNbd => Some(AttachKind::Nbd),
            InitiatorImpl::Isoe | InitiatorImpl::Libiscsi | InitiatorImpl::Kernel => None,
        }
    }
}

/// The file system an application runs on (the `filesystem` knob).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Filesystem {
    /// ext4, the default.
    #[default]
    Ext4,
    /// XFS.
    Xfs,
}

impl Filesystem {
    /// Every file system, the default first.
    pub const ALL: [Filesystem; 2] = [Filesystem::Ext4, Filesystem::Xfs];

    /// Its name in plans and for `mkfs.NAME`.
    pub fn as_str(self) -> &'static str {
        match self {
            Filesystem::Ext4 => "ext4",
            Filesystem::Xfs => "xfs",
        }
    }
}

/// The target a case runs against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetImpl {
    /// isoe's own target, as `isoe target`.
    #[default]
    Isoe,
    /// tgt, the userspace target from Linux distributions, run by
    /// [`crate::peers::tgt`].
    Tgt,
    /// LIO, the Linux kernel's target, configured through configfs on a
    /// test bed's target host ([`crate::peers::lio`]).
    Lio,
    /// An existing array a test bed names by URL: the lab starts nothing,
    /// sets nothing on it and cannot see its CPU.
    External,
}

impl TargetImpl {
    /// Every target, in the order plans list them.
    pub const ALL: [TargetImpl; 4] = [
        TargetImpl::Isoe,
        TargetImpl::Tgt,
        TargetImpl::Lio,
        TargetImpl::External,
    ];

    /// The name plans and reports use: `isoe`, `tgt`, `lio` or `external`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetImpl::Isoe => "isoe",
            TargetImpl::Tgt => "tgt",
            TargetImpl::Lio => "lio",
            TargetImpl::External => "external",
        }
    }
}

/// Which CRC32C implementation isoe's datapath uses for digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrcImpl {
    /// The fastest the CPU offers: 512-bit carry-less-multiply folding
    /// where x86-64 has AVX-512 VPCLMULQDQ, else the CRC32C instruction.
    Hardware,
    /// The CPU's CRC32C instruction alone (SSE 4.2, ARMv8 CRC).
    Instruction,
    /// A table-driven software CRC32C.
    Software,
}

impl CrcImpl {
    /// The name plans and the target's `[datapath]` table use.
    pub fn as_str(self) -> &'static str {
        match self {
            CrcImpl::Hardware => "hardware",
            CrcImpl::Instruction => "instruction",
            CrcImpl::Software => "software",
        }
    }
}

/// The open-iscsi iface transport the kernel initiator logs in through:
/// `tcp` is the software initiator (`iscsi_tcp`), the others are offload
/// adapters' drivers, the seeds' comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `iscsi_tcp`: the kernel's software initiator over any NIC.
    Tcp,
    /// Chelsio T4 and later (`cxgb4i`).
    Cxgb4i,
    /// Broadcom NetXtreme II (`bnx2i`).
    Bnx2i,
    /// QLogic/Marvell FastLinQ 41000/45000 (`qedi`).
    Qedi,
    /// Emulex OneConnect (`be2iscsi`).
    Be2iscsi,
    /// QLogic 4xxx HBAs (`qla4xxx`).
    Qla4xxx,
}

impl Transport {
    /// Every transport, software first.
    pub const ALL: [Transport; 6] = [
        Transport::Tcp,
        Transport::Cxgb4i,
        Transport::Bnx2i,
        Transport::Qedi,
        Transport::Be2iscsi,
        Transport::Qla4xxx,
    ];

    /// open-iscsi's name for it (`iface.transport_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Cxgb4i => "cxgb4i",
            Transport::Bnx2i => "bnx2i",
            Transport::Qedi => "qedi",
            Transport::Be2iscsi => "be2iscsi",
            Transport::Qla4xxx => "qla4xxx",
        }
    }

    /// Whether this is an offload adapter's transport.
    pub fn is_offload(self) -> bool {
        self != Transport::Tcp
    }
}

/// Every knob a case may set; `None` leaves it as the baseline has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobSet {
    /// MTU, rate limit, ethtool offloads and NIC queue settings, applied
    /// by the topology.
    pub link: LinkKnobs,
    /// Kernel settings by sysctl name (`net.ipv4.tcp_timestamps` → `0`),
    /// written on both sides' machines (in a topology's namespaces, only
    /// the per-namespace `net.` ones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
    /// TCP_NODELAY on the initiator's sockets (true = Nagle off).
    pub nodelay: Option<bool>,
    /// TCP_QUICKACK after every receive on the initiator (true = delayed ACK off).
    pub quickack: Option<bool>,
    /// A fixed SO_RCVBUF on the initiator's sockets; setting it turns the
    /// kernel's receive-window auto-tuning off.
    pub rcvbuf_bytes: Option<u32>,
    /// A fixed SO_SNDBUF on the initiator's sockets.
    pub sndbuf_bytes: Option<u32>,
    /// SO_BUSY_POLL on the initiator's sockets, microseconds.
    pub busy_poll_us: Option<u32>,
    /// HeaderDigest: true = CRC32C, false = None.
    pub header_digest: Option<bool>,
    /// DataDigest: true = CRC32C, false = None.
    pub data_digest: Option<bool>,
    /// ImmediateData.
    pub immediate_data: Option<bool>,
    /// InitialR2T.
    pub initial_r2t: Option<bool>,
    /// MaxRecvDataSegmentLength both ends declare, bytes.
    pub max_recv_data_segment_length: Option<u32>,
    /// FirstBurstLength both ends offer, bytes.
    pub first_burst_length: Option<u32>,
    /// MaxBurstLength both ends offer, bytes.
    pub max_burst_length: Option<u32>,
    /// TCP connections per session (MC/S).
    pub connections: Option<u32>,
    /// Sessions per worker per URL.
    pub sessions: Option<u32>,
    /// Initiator worker threads; wins over the workload's worker count.
    pub workers: Option<u32>,
    /// Which initiator runs.
    pub initiator: Option<InitiatorImpl>,
    /// Which target serves.
    pub target: Option<TargetImpl>,
    /// The kernel initiator's iface transport (only with `initiator = kernel`).
    pub transport: Option<Transport>,
    /// The file system an application workload runs on (ext4 by default).
    pub filesystem: Option<Filesystem>,
    /// isoe target datapath: batch events and sends.
    pub batching: Option<bool>,
    /// isoe target datapath: CRC32C implementation.
    pub crc: Option<CrcImpl>,
    /// isoe target datapath: reuse buffers from a pool.
    pub buffer_pool: Option<bool>,
    /// Raw TCP exchanges of each workload's sizes at its connections and
    /// depth instead of iSCSI: the floor under both ends ([`crate::floor`]).
    pub floor: Option<bool>,
}

fn on_off(v: bool) -> &'static str {
    if v {
        "on"
    } else {
        "off"
    }
}

fn yes_no(v: bool) -> &'static str {
    if v {
        "yes"
    } else {
        "no"
    }
}

pub(crate) fn digest(v: bool) -> &'static str {
    if v {
        "CRC32C"
    } else {
        "None"
    }
}

fn overlay_offloads(base: &Offloads, case: &Offloads) -> Offloads {
    Offloads {
        tso: case.tso.or(base.tso),
        gso: case.gso.or(base.gso),
        gro: case.gro.or(base.gro),
        tx: case.tx.or(base.tx),
        rx: case.rx.or(base.rx),
        sg: case.sg.or(base.sg),
    }
}

fn overlay_nic(base: &NicKnobs, case: &NicKnobs) -> NicKnobs {
    NicKnobs {
        rx_ring: case.rx_ring.or(base.rx_ring),
        tx_ring: case.tx_ring.or(base.tx_ring),
        rx_usecs: case.rx_usecs.or(base.rx_usecs),
        tx_usecs: case.tx_usecs.or(base.tx_usecs),
        channels: case.channels.or(base.channels),
        flow_control: case.flow_control.or(base.flow_control),
    }
}

/// The NIC queue knobs as `(plan key, value for people)`, in the plan's order.
pub fn nic_entries(n: &NicKnobs) -> [(&'static str, Option<String>); 6] {
    let num = |v: Option<u32>| v.map(|v| v.to_string());
    [
        ("rx_ring", num(n.rx_ring)),
        ("tx_ring", num(n.tx_ring)),
        ("rx_usecs", num(n.rx_usecs)),
        ("tx_usecs", num(n.tx_usecs)),
        ("channels", num(n.channels)),
        ("flow_control", n.flow_control.map(|b| on_off(b).into())),
    ]
}

/// The name [`KnobSet::describe`] and skipped-knob lists give sysctl `name`.
pub fn sysctl_knob(name: &str) -> String {
    format!("sysctl.{name}")
}

impl KnobSet {
    /// This set with every knob `case` sets replaced by the case's value.
    pub fn overlay(&self, case: &KnobSet) -> KnobSet {
        KnobSet {
            link: LinkKnobs {
                mtu: case.link.mtu.or(self.link.mtu),
                rate_mbit: case.link.rate_mbit.or(self.link.rate_mbit),
                initiator: overlay_offloads(&self.link.initiator, &case.link.initiator),
                target: overlay_offloads(&self.link.target, &case.link.target),
                nic: overlay_nic(&self.link.nic, &case.link.nic),
            },
            sysctl: {
                let mut m = self.sysctl.clone();
                m.extend(case.sysctl.iter().map(|(k, v)| (k.clone(), v.clone())));
                m
            },
            nodelay: case.nodelay.or(self.nodelay),
            quickack: case.quickack.or(self.quickack),
            rcvbuf_bytes: case.rcvbuf_bytes.or(self.rcvbuf_bytes),
            sndbuf_bytes: case.sndbuf_bytes.or(self.sndbuf_bytes),
            busy_poll_us: case.busy_poll_us.or(self.busy_poll_us),
            header_digest: case.header_digest.or(self.header_digest),
            data_digest: case.data_digest.or(self.data_digest),
            immediate_data: case.immediate_data.or(self.immediate_data),
            initial_r2t: case.initial_r2t.or(self.initial_r2t),
            max_recv_data_segment_length: case
                .max_recv_data_segment_length
                .or(self.max_recv_data_segment_length),
            first_burst_length: case.first_burst_length.or(self.first_burst_length),
            max_burst_length: case.max_burst_length.or(self.max_burst_length),
            connections: case.connections.or(self.connections),
            sessions: case.sessions.or(self.sessions),
            workers: case.workers.or(self.workers),
            initiator: case.initiator.or(self.initiator),
            target: case.target.or(self.target),
            transport: case.transport.or(self.transport),
            filesystem: case.filesystem.or(self.filesystem),
            batching: case.batching.or(self.batching),
            crc: case.crc.or(self.crc),
            buffer_pool: case.buffer_pool.or(self.buffer_pool),
            floor: case.floor.or(self.floor),
        }
    }

    /// True when the case runs raw TCP instead of iSCSI.
    pub fn is_floor(&self) -> bool {
        self.floor == Some(true)
    }

    /// True when no knob is set.
    pub fn is_empty(&self) -> bool {
        *self == KnobSet::default()
    }

    /// The initiator in force (isoe unless set).
    pub fn initiator_impl(&self) -> InitiatorImpl {
        self.initiator.unwrap_or_default()
    }

    /// The target in force (isoe unless set).
    pub fn target_impl(&self) -> TargetImpl {
        self.target.unwrap_or_default()
    }

    /// Every knob that is set, by a stable name, with its value for people:
    /// `mtu` → `9000`, `initiator.tso` → `off`, `rcvbuf` → `64 KiB`,
    /// `header_digest` → `CRC32C`, `initiator` → `libiscsi`, `rx_ring` →
    /// `512`, `sysctl.net.ipv4.tcp_timestamps` → `0`.
    pub fn describe(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        };
        put("mtu", self.link.mtu.map(|v| v.to_string()));
        put("rate_mbit", self.link.rate_mbit.map(|v| v.to_string()));
        for side in [Side::Initiator, Side::Target] {
            for offload in Offload::ALL {
                let v = self.link.offloads(side).get(offload);
                put(
                    &format!("{}.{offload}", side.name()),
                    v.map(|b| on_off(b).into()),
                );
            }
        }
        for (name, v) in nic_entries(&self.link.nic) {
            put(name, v);
        }
        for (name, v) in &self.sysctl {
            put(&sysctl_knob(name), Some(v.clone()));
        }
        put("nodelay", self.nodelay.map(|b| on_off(b).into()));
        put("quickack", self.quickack.map(|b| on_off(b).into()));
        put("rcvbuf", self.rcvbuf_bytes.map(block_label));
        put("sndbuf", self.sndbuf_bytes.map(block_label));
        put("busy_poll_us", self.busy_poll_us.map(|v| v.to_string()));
        put(
            "header_digest",
            self.header_digest.map(|b| digest(b).into()),
        );
        put("data_digest", self.data_digest.map(|b| digest(b).into()));
        put(
            "immediate_data",
            self.immediate_data.map(|b| yes_no(b).into()),
        );
        put("initial_r2t", self.initial_r2t.map(|b| yes_no(b).into()));
        put(
            "max_recv_data_segment_length",
            self.max_recv_data_segment_length.map(block_label),
        );
        put(
            "first_burst_length",
            self.first_burst_length.map(block_label),
        );
        put("max_burst_length", self.max_burst_length.map(block_label));
        put("connections", self.connections.map(|v| v.to_string()));
        put("sessions", self.sessions.map(|v| v.to_string()));
        put("workers", self.workers.map(|v| v.to_string()));
        put("initiator", self.initiator.map(|v| v.as_str().into()));
        put("target", self.target.map(|v| v.as_str().into()));
        put("transport", self.transport.map(|v| v.as_str().into()));
        put("filesystem", self.filesystem.map(|v| v.as_str().into()));
        put("batching", self.batching.map(|b| on_off(b).into()));
        put("crc", self.crc.map(|v| v.as_str().into()));
        put("buffer_pool", self.buffer_pool.map(|b| on_off(b).into()));
        put("floor", self.floor.map(|b| on_off(b).into()));
        m
    }

    /// The `isoe bench` options for the initiator-side knobs, in a fixed
    /// order. Sizes are written in bytes. A knob set to bench's own default
    /// where bench has only a flag (digests off, quickack off) adds nothing.
    pub fn bench_args(&self) -> Vec<String> {
        let mut args = Args(self.digest_args());
        args.yes_no("--immediate-data", self.immediate_data);
        args.yes_no("--initial-r2t", self.initial_r2t);
        args.num(
            "--max-recv-data-segment-length",
            self.max_recv_data_segment_length,
        );
        args.num("--first-burst-length", self.first_burst_length);
        args.num("--max-burst-length", self.max_burst_length);
        args.yes_no("--nodelay", self.nodelay);
        args.flag("--quickack", self.quickack == Some(true));
        args.num("--rcvbuf", self.rcvbuf_bytes);
        args.num("--sndbuf", self.sndbuf_bytes);
        args.num("--busy-poll", self.busy_poll_us);
        args.num("--connections", self.connections);
        args.num("--sessions", self.sessions);
        args.num("--workers", self.workers);
        args.0
    }

    /// The `isoe attach` options for the session knobs it takes: the
    /// digests (flags, as `isoe bench`'s: set to false they add nothing,
    /// and the target's offer decides) and the connections per session.
    /// The rest of the initiator's knobs `isoe attach` has no option for
    /// ([`KnobSet::unsupported`] lists them); the load's shape (workers,
    /// queue depth) is fio's, as for the kernel initiator.
    pub fn attach_args(&self) -> Vec<String> {
        let mut args = Args(self.digest_args());
        args.num("--connections", self.connections);
        args.0
    }

    /// The digests asked for, as flags `isoe bench`, its fill and `isoe
    /// attach` all take (set to false they add nothing, and the target's
    /// offer decides).
    pub fn digest_args(&self) -> Vec<String> {
        let mut args = Args::default();
        args.flag("--header-digest", self.header_digest == Some(true));
        args.flag("--data-digest", self.data_digest == Some(true));
        args.0
    }
}

/// Command-line options as separate words (`--qd`, `8`).
#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn flag(&mut self, name: &str, on: bool) {
        if on {
            self.0.push(name.into());
        }
    }
    fn yes_no(&mut self, name: &str, v: Option<bool>) {
        if let Some(b) = v {
            self.0.push(name.into());
            self.0.push(yes_no(b).into());
        }
    }
    fn num(&mut self, name: &str, v: Option<u32>) {
        if let Some(n) = v {
            self.0.push(name.into());
            self.0.push(n.to_string());
        }
    }
}

impl KnobSet {
    /// The `[defaults]` table of an `isoe target --config` file that makes
    /// the target negotiate what this set asks for (see the module doc).
    /// Knobs that are not set are left out, so the target keeps its
    /// defaults; with none set the table is empty.
    pub fn target_defaults_toml(&self) -> String {
        let mut t = String::from("[defaults]\n");
        for (key, v) in [
            ("header_digest", self.header_digest),
            ("data_digest", self.data_digest),
        ] {
            if let Some(on) = v {
                let _ = writeln!(t, "{key} = [\"{}\"]", digest(on));
            }
        }
        for (key, v) in [
            ("immediate_data", self.immediate_data),
            ("initial_r2t", self.initial_r2t),
        ] {
            if let Some(b) = v {
                let _ = writeln!(t, "{key} = {b}");
            }
        }
        for (key, v) in [
            (
                "max_recv_data_segment_length",
                self.max_recv_data_segment_length,
            ),
            ("first_burst_length", self.first_burst_length),
            ("max_burst_length", self.max_burst_length),
        ] {
            if let Some(n) = v {
                let _ = writeln!(t, "{key} = {n}");
            }
        }
        t
    }

    /// The `[datapath]` table for `isoe target --config`, or an empty string
    /// when no datapath knob is set (the target's defaults: batching,
    /// hardware CRC, pooled buffers). A runner appends it to the target's
    /// configuration; it is a top-level table, so it may follow any other.
    pub fn target_datapath_toml(&self) -> String {
        if self.batching.is_none() && self.crc.is_none() && self.buffer_pool.is_none() {
            return String::new();
        }
        let mut t = String::from("[datapath]\n");
        if let Some(b) = self.batching {
            let _ = writeln!(t, "batching = {b}");
        }
        if let Some(c) = self.crc {
            let _ = writeln!(t, "crc = \"{}\"", c.as_str());
        }
        if let Some(b) = self.buffer_pool {
            let _ = writeln!(t, "buffer_pool = {b}");
        }
        t
    }

    /// Knobs `isoe attach` cannot honour: it has no socket options nor
    /// the iSCSI parameters a target's offer alone cannot bring about
    /// (its initiator keeps isoe's defaults), and it makes one device, one
    /// session, per portal. What [`KnobSet::attach_args`] passes is not
    /// listed; nor are ImmediateData and InitialR2T, which the target's
    /// offer decides (the AND and the OR of both offers; isoe offers
    /// ImmediateData=Yes and InitialR2T=No).
    pub(crate) fn attach_limits(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut no = |key: &str, why: String| out.push((key.to_string(), why));
        let sockets = "isoe attach has no option for it (isoe bench has); its session keeps \
                       isoe's default";
        if self.nodelay == Some(false) {
            no("nodelay", format!("{sockets}, TCP_NODELAY on"));
        }
        if self.quickack == Some(true) {
            no("quickack", format!("{sockets}, no TCP_QUICKACK"));
        }
        for (key, v, default) in [
            (
                "rcvbuf",
                self.rcvbuf_bytes,
                "the kernel's auto-tuned buffer",
            ),
            (
                "sndbuf",
                self.sndbuf_bytes,
                "the kernel's auto-tuned buffer",
            ),
            ("busy_poll_us", self.busy_poll_us, "no busy polling"),
        ] {
            if v.is_some() {
                no(key, format!("{sockets}, {default}"));
            }
        }
        if let Some(v) = self.max_recv_data_segment_length {
            if v != ISOE_INITIATOR_MAX_RECV_DATA_SEGMENT_LENGTH {
                no(
                    "max_recv_data_segment_length",
                    format!(
                        "isoe attach declares isoe's MaxRecvDataSegmentLength={ISOE_INITIATOR_MAX_RECV_DATA_SEGMENT_LENGTH} and has no option for it; only the target's declaration changes"
                    ),
                );
            }
        }
        for (key, param, offer, v) in [
            (
                "first_burst_length",
                "FirstBurstLength",
                ISOE_INITIATOR_FIRST_BURST_LENGTH,
                self.first_burst_length,
            ),
            (
                "max_burst_length",
                "MaxBurstLength",
                ISOE_INITIATOR_MAX_BURST_LENGTH,
                self.max_burst_length,
            ),
        ] {
            if v.is_some_and(|v| v > offer) {
                no(
                    key,
                    format!(
                        "isoe attach offers isoe's {param}={offer} and the smaller offer wins (RFC 7143 §13.13, §13.14)"
                    ),
                );
            }
        }
        if self.sessions.is_some_and(|n| n > 1) {
            no(
                "sessions",
                "the lab attaches one device (one session) per portal; use workers for more load"
                    .into(),
            );
        }
        out
    }

    /// Why a case with these knobs runs on a test bed of machines only
    /// (topology `physical`, `isoe lab --testbed FILE`), if it does: the
    /// initiators that make a block device of the machine, and the targets
    /// that are the machine's (LIO) or the bed's (an external array). The
    /// namespace topologies refuse such a case with this reason rather
    /// than run isoe in its place.
    pub fn needs_test_bed(&self) -> Option<String> {
        let bed =
            "runs on a test bed of machines only (topology \"physical\", isoe lab --testbed FILE)";
        let initiator = self.initiator_impl();
        let why = match initiator {
            InitiatorImpl::Kernel => Some(
                "open-iscsi logs the whole machine in and fio drives the block device it makes",
            ),
            InitiatorImpl::IsoeUblk | InitiatorImpl::IsoeNbd => Some(
                "isoe attach needs root and a kernel module to make a block device of the \
                 machine, which fio drives",
            ),
            InitiatorImpl::Isoe | InitiatorImpl::Libiscsi => None,
        };
        if let Some(why) = why {
            return Some(format!("initiator = {} {bed}: {why}", initiator.as_str()));
        }
        let target = self.target_impl();
        let why = match target {
            TargetImpl::Lio => Some("LIO is the kernel's target, configured for the whole machine"),
            TargetImpl::External => Some("the test bed file names the array"),
            TargetImpl::Isoe | TargetImpl::Tgt => None,
        }?;
        Some(format!("target = {} {bed}: {why}", target.as_str()))
    }
}

impl KnobSet {
    /// The knobs a floor case cannot apply: everything iSCSI, the target's
    /// datapath and the initiator's socket options (`isoe netprobe` sets
    /// TCP_NODELAY and nothing else). The link's knobs apply: the floor is
    /// measured over the same path.
    pub(crate) fn floor_limits(&self) -> Vec<(String, String)> {
        let why = "the floor is raw TCP: no iSCSI, no target datapath, no socket options";
        let set = [
            ("nodelay", self.nodelay.is_some()),
            ("quickack", self.quickack.is_some()),
            ("rcvbuf", self.rcvbuf_bytes.is_some()),
            ("sndbuf", self.sndbuf_bytes.is_some()),
            ("busy_poll_us", self.busy_poll_us.is_some()),
            ("header_digest", self.header_digest.is_some()),
            ("data_digest", self.data_digest.is_some()),
            ("immediate_data", self.immediate_data.is_some()),
            ("initial_r2t", self.initial_r2t.is_some()),
            (
                "max_recv_data_segment_length",
                self.max_recv_data_segment_length.is_some(),
            ),
            ("first_burst_length", self.first_burst_length.is_some()),
            ("max_burst_length", self.max_burst_length.is_some()),
            ("transport", self.transport.is_some()),
            ("batching", self.batching.is_some()),
            ("crc", self.crc.is_some()),
            ("buffer_pool", self.buffer_pool.is_some()),
        ];
        set.iter()
            .filter(|(_, on)| *on)
            .map(|(key, _)| (key.to_string(), why.to_string()))
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Every knob set to something other than its default.
    pub(crate) fn everything() -> KnobSet {
        KnobSet {
            link: LinkKnobs {
                mtu: Some(9000),
                rate_mbit: Some(4000),
                initiator: Offloads {
                    tso: Some(false),
                    gro: Some(true),
                    ..Offloads::default()
                },
                target: Offloads {
                    tx: Some(false),
                    ..Offloads::default()
                },
                nic: NicKnobs {
                    rx_ring: Some(512),
                    tx_ring: Some(1024),
                    rx_usecs: Some(8),
                    tx_usecs: Some(16),
                    channels: Some(4),
                    flow_control: Some(false),
                },
            },
            sysctl: [("net.ipv4.tcp_timestamps".to_string(), "0".to_string())].into(),
            nodelay: Some(false),
            quickack: Some(true),
            rcvbuf_bytes: Some(65_536),
            sndbuf_bytes: Some(1 << 20),
            busy_poll_us: Some(50),
            header_digest: Some(true),
            data_digest: Some(true),
            immediate_data: Some(false),
            initial_r2t: Some(true),
            max_recv_data_segment_length: Some(65_536),
            first_burst_length: Some(65_536),
            max_burst_length: Some(524_288),
            connections: Some(2),
            sessions: Some(3),
            workers: Some(4),
            initiator: Some(InitiatorImpl::Libiscsi),
            target: Some(TargetImpl::Isoe),
            transport: Some(Transport::Tcp),
            filesystem: Some(Filesystem::Xfs),
            batching: Some(false),
            crc: Some(CrcImpl::Software),
            buffer_pool: Some(false),
            floor: Some(false),
        }
    }

    #[test]
    fn overlay_lets_the_case_win_and_keeps_the_rest() {
        let base = KnobSet {
            link: LinkKnobs {
                mtu: Some(9000),
                initiator: Offloads {
                    tso: Some(true),
                    gro: Some(true),
                    ..Offloads::default()
                },
                ..LinkKnobs::default()
            },
            nodelay: Some(false),
            workers: Some(2),
            ..KnobSet::default()
        };
        let case = KnobSet {
            link: LinkKnobs {
                initiator: Offloads {
                    tso: Some(false),
                    ..Offloads::default()
                },
                ..LinkKnobs::default()
            },
            nodelay: Some(true),
            header_digest: Some(true),
            ..KnobSet::default()
        };
        let merged = base.overlay(&case);
        assert_eq!(merged.link.mtu, Some(9000));
        assert_eq!(merged.link.initiator.tso, Some(false), "case wins");
        assert_eq!(merged.link.initiator.gro, Some(true), "baseline kept");
        assert_eq!(merged.nodelay, Some(true));
        assert_eq!(merged.workers, Some(2));
        assert_eq!(merged.header_digest, Some(true));
        assert_eq!(merged.target, None);
        // Identities.
        assert_eq!(base.overlay(&KnobSet::default()), base);
        assert_eq!(KnobSet::default().overlay(&base), base);
        assert!(KnobSet::default().is_empty());
        assert!(!merged.is_empty());
    }

    #[test]
    fn overlay_merges_nic_knobs_and_sysctls_by_name() {
        let sysctls = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let base = KnobSet {
            link: LinkKnobs {
                nic: NicKnobs {
                    rx_ring: Some(256),
                    flow_control: Some(true),
                    ..NicKnobs::default()
                },
                ..LinkKnobs::default()
            },
            sysctl: sysctls(&[("net.ipv4.tcp_sack", "1"), ("net.ipv4.tcp_timestamps", "1")]),
            ..KnobSet::default()
        };
        let case = KnobSet {
            link: LinkKnobs {
                nic: NicKnobs {
                    rx_ring: Some(4096),
                    channels: Some(2),
                    ..NicKnobs::default()
                },
                ..LinkKnobs::default()
            },
            sysctl: sysctls(&[("net.ipv4.tcp_timestamps", "0"), ("vm.swappiness", "10")]),
            ..KnobSet::default()
        };
        let merged = base.overlay(&case);
        assert_eq!(
            merged.link.nic,
            NicKnobs {
                rx_ring: Some(4096),
                channels: Some(2),
                flow_control: Some(true),
                ..NicKnobs::default()
            }
        );
        assert_eq!(
            merged.sysctl,
            sysctls(&[
                ("net.ipv4.tcp_sack", "1"),
                ("net.ipv4.tcp_timestamps", "0"),
                ("vm.swappiness", "10")
            ])
        );
        assert!(!case.is_empty());
        assert!(NicKnobs::default().is_empty());
    }

    #[test]
    fn the_floor_keeps_the_link_and_the_shape_and_names_every_iscsi_knob() {
        let floor = KnobSet {
            floor: Some(true),
            initiator: None,
            target: None,
            ..everything()
        };
        assert!(floor.is_floor() && !everything().is_floor());
        let keys: Vec<String> = floor
            .unsupported_here()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
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
                "transport",
                "batching",
                "crc",
                "buffer_pool",
            ]
        );
        // The case's `floor = false` wins over a baseline's `true`.
        let off = floor.overlay(&KnobSet {
            floor: Some(false),
            ..KnobSet::default()
        });
        assert!(!off.is_floor());
    }

    #[test]
    fn describe_names_every_knob_stably() {
        let d = everything().describe();
        let expected: BTreeMap<String, String> = [
            ("batching", "off"),
            ("buffer_pool", "off"),
            ("busy_poll_us", "50"),
            ("channels", "4"),
            ("connections", "2"),
            ("crc", "software"),
            ("data_digest", "CRC32C"),
            ("first_burst_length", "64 KiB"),
            ("floor", "off"),
            ("flow_control", "off"),
            ("header_digest", "CRC32C"),
            ("immediate_data", "no"),
            ("initial_r2t", "yes"),
            ("initiator", "libiscsi"),
            ("initiator.gro", "on"),
            ("initiator.tso", "off"),
            ("max_burst_length", "512 KiB"),
            ("max_recv_data_segment_length", "64 KiB"),
            ("mtu", "9000"),
            ("nodelay", "off"),
            ("quickack", "on"),
            ("rate_mbit", "4000"),
            ("rcvbuf", "64 KiB"),
            ("rx_ring", "512"),
            ("rx_usecs", "8"),
            ("sessions", "3"),
            ("sndbuf", "1 MiB"),
            ("sysctl.net.ipv4.tcp_timestamps", "0"),
            ("target", "isoe"),
            ("target.tx", "off"),
            ("transport", "tcp"),
            ("filesystem", "xfs"),
            ("tx_ring", "1024"),
            ("tx_usecs", "16"),
            ("workers", "4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(d, expected);
        assert!(KnobSet::default().describe().is_empty());
    }

    #[test]
    fn bench_args_are_the_exact_isoe_bench_options() {
        assert_eq!(
            everything().bench_args(),
            s(&[
                "--header-digest",
                "--data-digest",
                "--immediate-data",
                "no",
                "--initial-r2t",
                "yes",
                "--max-recv-data-segment-length",
                "65536",
                "--first-burst-length",
                "65536",
                "--max-burst-length",
                "524288",
                "--nodelay",
                "no",
                "--quickack",
                "--rcvbuf",
                "65536",
                "--sndbuf",
                "1048576",
                "--busy-poll",
                "50",
                "--connections",
                "2",
                "--sessions",
                "3",
                "--workers",
                "4",
            ])
        );
        // Defaults that bench has only as flags add nothing; link, peer and
        // datapath knobs are not bench's.
        let quiet = KnobSet {
            header_digest: Some(false),
            data_digest: Some(false),
            quickack: Some(false),
            nodelay: Some(true),
            link: LinkKnobs {
                mtu: Some(1500),
                ..LinkKnobs::default()
            },
            initiator: Some(InitiatorImpl::Isoe),
            batching: Some(true),
            ..KnobSet::default()
        };
        assert_eq!(quiet.bench_args(), s(&["--nodelay", "yes"]));
        assert!(KnobSet::default().bench_args().is_empty());
    }

    #[test]
    fn target_defaults_make_the_negotiation_land_on_the_knob() {
        assert_eq!(
            everything().target_defaults_toml(),
            "[defaults]\n\
             header_digest = [\"CRC32C\"]\n\
             data_digest = [\"CRC32C\"]\n\
             immediate_data = false\n\
             initial_r2t = true\n\
             max_recv_data_segment_length = 65536\n\
             first_burst_length = 65536\n\
             max_burst_length = 524288\n"
        );
        let off = KnobSet {
            header_digest: Some(false),
            immediate_data: Some(true),
            ..KnobSet::default()
        };
        assert_eq!(
            off.target_defaults_toml(),
            "[defaults]\nheader_digest = [\"None\"]\nimmediate_data = true\n"
        );
        assert_eq!(KnobSet::default().target_defaults_toml(), "[defaults]\n");
        // The text is TOML the target's schema reads.
        let parsed: toml::Table = toml::from_str(&everything().target_defaults_toml()).unwrap();
        assert_eq!(
            parsed["defaults"]["header_digest"],
            toml::Value::Array(vec!["CRC32C".into()])
        );
    }

    #[test]
    fn datapath_table() {
        assert_eq!(
            everything().target_datapath_toml(),
            "[datapath]\nbatching = false\ncrc = \"software\"\nbuffer_pool = false\n"
        );
        assert_eq!(KnobSet::default().target_datapath_toml(), "");
        let hw = KnobSet {
            crc: Some(CrcImpl::Hardware),
            ..KnobSet::default()
        };
        assert_eq!(
            hw.target_datapath_toml(),
            "[datapath]\ncrc = \"hardware\"\n"
        );
    }

    #[test]
    fn isoe_attach_takes_digests_and_connections_and_names_the_rest() {
        assert_eq!(
            everything().attach_args(),
            s(&["--header-digest", "--data-digest", "--connections", "2"])
        );
        let off = KnobSet {
            header_digest: Some(false),
            data_digest: Some(false),
            workers: Some(4),
            immediate_data: Some(false),
            ..KnobSet::default()
        };
        assert!(off.attach_args().is_empty(), "{:?}", off.attach_args());
        for initiator in [InitiatorImpl::IsoeUblk, InitiatorImpl::IsoeNbd] {
            let skipped = everything().unsupported(initiator, TargetImpl::Isoe);
            let keys: Vec<&str> = skipped.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                keys,
                [
                    "nodelay",
                    "quickack",
                    "rcvbuf",
                    "sndbuf",
                    "busy_poll_us",
                    "max_recv_data_segment_length",
                    "sessions",
                    "transport",
                ],
                "{initiator:?}"
            );
            assert!(skipped[..6]
                .iter()
                .all(|(_, why)| why.contains("isoe attach")));
            assert!(skipped[6].1.contains("one device (one session) per portal"));
            // The transport is open-iscsi's, and the bursts only fail above
            // isoe's own offers.
            let other = KnobSet {
                transport: Some(Transport::Tcp),
                first_burst_length: Some(524_288),
                max_burst_length: Some(1_048_576),
                max_recv_data_segment_length: Some(262_144),
                nodelay: Some(true),
                connections: Some(4),
                ..KnobSet::default()
            };
            let skipped = other.unsupported(initiator, TargetImpl::Isoe);
            assert_eq!(
                skipped.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                ["first_burst_length", "transport"]
            );
            assert_eq!(
                skipped[1].1,
                format!(
                    "an open-iscsi iface transport; the initiator is {}",
                    initiator.as_str()
                )
            );
        }
    }

    #[test]
    fn block_device_initiators_and_bed_targets_need_a_test_bed() {
        let with = |initiator, target| KnobSet {
            initiator: Some(initiator),
            target: Some(target),
            ..KnobSet::default()
        };
        for initiator in InitiatorImpl::ALL {
            let why = with(initiator, TargetImpl::Isoe).needs_test_bed();
            assert_eq!(
                why.is_some(),
                initiator.makes_block_device(),
                "{initiator:?}: {why:?}"
            );
            if let Some(why) = why {
                assert!(
                    why.starts_with(&format!(
                        "initiator = {} runs on a test bed of machines only (topology \"physical\", isoe lab --testbed FILE): ",
                        initiator.as_str()
                    )),
                    "{why}"
                );
            }
        }
        assert!(with(InitiatorImpl::IsoeNbd, TargetImpl::Isoe)
            .needs_test_bed()
            .unwrap()
            .contains("isoe attach needs root and a kernel module"));
        assert!(with(InitiatorImpl::Isoe, TargetImpl::Lio)
            .needs_test_bed()
            .unwrap()
            .starts_with("target = lio runs on a test bed"));
        assert!(with(InitiatorImpl::Libiscsi, TargetImpl::External)
            .needs_test_bed()
            .is_some());
        assert_eq!(
            with(InitiatorImpl::Libiscsi, TargetImpl::Tgt).needs_test_bed(),
            None
        );
        assert_eq!(KnobSet::default().needs_test_bed(), None);
        assert_eq!(
            InitiatorImpl::ALL
                .iter()
                .filter_map(|i| i.attach_kind())
                .map(InitiatorImpl::of_attach)
                .collect::<Vec<_>>(),
            [InitiatorImpl::IsoeUblk, InitiatorImpl::IsoeNbd]
        );
    }

    #[test]
    fn unsupported_depends_on_the_peers() {
        let datapath = KnobSet {
            batching: Some(true),
            crc: Some(CrcImpl::Hardware),
            buffer_pool: Some(true),
            ..KnobSet::default()
        };
        // The isoe target reads [datapath]: every datapath knob applies,
        // whatever the initiator.
        assert_eq!(
            datapath.unsupported(InitiatorImpl::Isoe, TargetImpl::Isoe),
            []
        );
        assert_eq!(
            datapath.unsupported(InitiatorImpl::Libiscsi, TargetImpl::Isoe),
            []
        );
        let off = KnobSet {
            batching: Some(false),
            crc: Some(CrcImpl::Software),
            buffer_pool: Some(false),
            ..KnobSet::default()
        };
        assert_eq!(off.unsupported_here(), [], "isoe is the default target");
        // tgt has no such options: each knob is reported, by name.
        let on_tgt = datapath.unsupported(InitiatorImpl::Isoe, TargetImpl::Tgt);
        assert_eq!(
            on_tgt.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["batching", "crc", "buffer_pool"]
        );
        assert!(on_tgt
            .iter()
            .all(|(_, why)| why == "an isoe target datapath option; the target is tgt"));
        // Socket knobs apply with isoe's initiator, not with libiscsi.
        let socket = KnobSet {
            rcvbuf_bytes: Some(65_536),
            quickack: Some(true),
            ..KnobSet::default()
        };
        assert!(socket
            .unsupported(InitiatorImpl::Isoe, TargetImpl::Tgt)
            .is_empty());
        let skipped = socket.unsupported(InitiatorImpl::Libiscsi, TargetImpl::Isoe);
        assert_eq!(
            skipped.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["quickack", "rcvbuf"]
        );
        assert!(KnobSet::default()
            .unsupported(InitiatorImpl::Libiscsi, TargetImpl::Tgt)
            .is_empty());
    }
}
