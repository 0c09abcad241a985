//! The types of a configuration: what the file says once read, each table
//! a type. [`super::parse`] reads them, [`crate::provision`] checks what
//! they say of the disk and RAM before the LUNs are built.

use super::chap::ChapConfig;
use super::log::LogConfig;
use super::places::{PortalPlaces, StorePlaces};
use super::portal_groups::{PortalGroup, DEFAULT_PORT, DEFAULT_PORTAL_GROUP_TAG};
use isoe_scsi::AccessState;
use isoe_wire::digest::Crc32cImpl;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The highest LUN number a configuration may use: SAM-5 flat space
/// addressing has 14 bits of LUN.
pub const MAX_LUN_NUMBER: u16 = 16383;

/// The most connections per session isoe accepts (RFC 7143 §13.2 allows 65535).
pub const MAX_CONNECTIONS: u16 = 8;

/// RFC 7143 §13.12-§13.14: the largest MaxRecvDataSegmentLength,
/// MaxBurstLength and FirstBurstLength, 2^24 - 1.
pub const MAX_LENGTH_BYTES: u32 = (1 << 24) - 1;

/// RFC 7143 §13.12-§13.14: the smallest of the same three lengths.
pub const MIN_LENGTH_BYTES: u32 = 512;

/// The longest NOP-In interval or timeout isoe accepts, in seconds.
pub const MAX_NOP_IN_S: u32 = 3600;

/// The largest memory LUN, whatever the machine's RAM and `overcommit`:
/// 16 TiB. Memory LUNs commit RAM only as they are written, but their chunk
/// table (64 bytes per MiB) is allocated at once: 1 GiB at this size.
pub const MEMORY_LUN_MAX_BYTES: u64 = 1 << 44;

/// The embedded default target's name.
pub const DEFAULT_TARGET_NAME: &str = "iqn.2026-11.io.isoe:target0";

/// How long a login may take from the connection's first byte to full
/// feature phase, continued requests and all; `[limits]
/// first_pdu_timeout_ms` is at most this.
pub const LOGIN_DEADLINE: Duration = Duration::from_secs(30);

/// A whole `isoe target` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// Where generated LUN identities and APTPL reservations persist (see
    /// [`crate::identity`]).
    pub state_dir: Option<PathBuf>,
    /// The addresses to listen on, never empty: the top-level `portals`,
    /// then each `[[portal_group]]`'s, in file order.
    pub portals: Vec<SocketAddr>,
    /// The portal groups, by ascending tag; each portal of `portals` is in
    /// one (see [`Config::portal_group_tag`]). Change `portals` with
    /// [`Config::set_portals`], which keeps the two together.
    pub portal_groups: Vec<PortalGroup>,
    /// The `[defaults]` parameters, before any target's overrides.
    pub defaults: Params,
    /// The targets, in file order; never empty, names unique.
    pub targets: Vec<TargetConfig>,
    /// The `[datapath]` options, for every connection of the process.
    pub datapath: Datapath,
    /// The `[discovery]` table: what discovery sessions require.
    pub discovery: Discovery,
    /// The `[limits]` table: bounds on what peers may make the target hold.
    pub limits: Limits,
    /// The `[control]` table: where `isoe admin` reaches the running target.
    pub control: Control,
    /// The `[metrics]` table: counting, and the Prometheus listener.
    pub metrics: Metrics,
    /// The `[log]` table: what the `isoe` binary writes to stderr.
    pub log: LogConfig,
    /// Where each LUN's store was written, for the checks that look past
    /// the file when the LUNs are provisioned.
    pub store_places: StorePlaces,
    /// Where each portal was written, for the errors of binding it.
    pub portal_places: PortalPlaces,
}

/// The `[metrics]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metrics {
    /// Count commands, bytes, latencies and errors per connection (on by
    /// default; `isoe admin stats` and the listener read them). Off, the
    /// command path counts nothing: what a benchmark of the cost compares.
    pub enabled: bool,
    /// Serve the counts in Prometheus's text format over HTTP here
    /// (`GET /metrics`); None (the default): no listener.
    pub listen: Option<SocketAddr>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            enabled: true,
            listen: None,
        }
    }
}

/// The `[control]` table: the local socket `isoe admin` talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// The Unix socket's path; `None` (`socket = ""`): no control socket.
    pub socket: Option<PathBuf>,
}

impl Default for Control {
    fn default() -> Control {
        Control {
            socket: default_control_socket(),
        }
    }
}

/// Where the control socket is when `[control] socket` is not set: for
/// root, `/run/isoe/isoe.sock` (systemd's `RuntimeDirectory=isoe` makes
/// `/run/isoe` for the service); for other users,
/// `$XDG_RUNTIME_DIR/isoe/isoe.sock`, or none without `XDG_RUNTIME_DIR`.
/// `isoe admin` looks in the same place.
pub fn default_control_socket() -> Option<PathBuf> {
    if rustix::process::geteuid().is_root() {
        return Some(PathBuf::from("/run/isoe/isoe.sock"));
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty())?;
    Some(PathBuf::from(runtime).join("isoe").join("isoe.sock"))
}

/// The `[limits]` table: everything a peer can make the target allocate or
/// hold has a bound (ARCHITECTURE.md, correctness rules). Reaching one
/// refuses or delays new work; it never spins and never kills the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `connections`: TCP connections at once, logged in or not. The
    /// target lowers it at start to what the open-files limit leaves after a
    /// reserve for its own files, and says so.
    pub connections: usize,
    /// `connections_per_initiator`: connections at once from one IP address.
    pub connections_per_initiator: usize,
    /// `sessions`: sessions at once, normal and discovery; a login beyond it
    /// fails with "out of resources" (status 0x0302).
    pub sessions: usize,
    /// `logins`: connections at once that have not finished logging in.
    pub logins: usize,
    /// `logins_per_initiator`: of those, from one IP address, so that one
    /// address's idle connections cannot keep others from logging in.
    pub logins_per_initiator: usize,
    /// `first_pdu_timeout_ms`: how long a new connection may wait before
    /// its first complete PDU; then it is closed (checked once a second).
    /// A connection that has sent one has the whole login deadline
    /// ([`LOGIN_DEADLINE`]), which also bounds this.
    pub first_pdu_timeout_ms: u64,
    /// `write_buffer`: write data solicited (R2T) and not yet stored, all
    /// connections together; beyond it R2Ts wait, and a write whose data
    /// would come unasked is answered TASK SET FULL.
    pub write_buffer: usize,
    /// `response_buffer`: responses built and not yet taken by their
    /// sockets, all connections together; beyond it a connection with
    /// output waiting takes no new command until some is sent.
    pub response_buffer: usize,
    /// `receive_buffer`: receive buffers beyond each connection's first
    /// 16 KiB, all connections together; beyond it buffers no longer grow
    /// for batching (one still grows to hold a PDU longer than itself), and
    /// idle ones shrink back.
    pub receive_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 4096,
            connections_per_initiator: 256,
            sessions: 1024,
            logins: 256,
            logins_per_initiator: 16,
            first_pdu_timeout_ms: 5000,
            write_buffer: 256 << 20,
            response_buffer: 256 << 20,
            receive_buffer: 256 << 20,
        }
    }
}

/// The `[discovery]` table: the policy of discovery sessions
/// (SessionType=Discovery, RFC 7143 §4.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// `[discovery.chap]`: CHAP required of every discovery session; `None`:
    /// discovery is open (SendTargets still lists only the targets each
    /// initiator's name may log into).
    pub chap: Option<ChapConfig>,
}

/// The `[datapath]` table: isoe's datapath options, each on by default.
/// Turning one off costs CPU and nothing else: the bytes on the wire, the
/// data stored and the protocol behaviour stay the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datapath {
    /// `batching` (ARCHITECTURE.md, datapath rule 2). On: a read takes
    /// everything the socket has (up to the 512 KiB receive buffer), every
    /// complete PDU in it is handled, and the responses they produced go
    /// out together in one vectored write. Off: one PDU per system call
    /// both ways. Each read asks for no more than the rest of the PDU being
    /// assembled (first its header: the BHS, plus the header digest when one
    /// is negotiated; then the AHS, data segment and digests the header
    /// announces), so a PDU with a data segment or AHS costs two reads and
    /// one without costs one; and every PDU the target produces is sent with
    /// a write call of its own (its header, data and digest as one vectored
    /// write) before the next incoming PDU is read.
    pub batching: bool,
    /// `crc` (datapath rule 5): which CRC32C computes and checks header and
    /// data digests: `"hardware"` (the fastest the CPU offers: 512-bit
    /// carry-less-multiply folding where x86-64 has AVX-512 VPCLMULQDQ, else
    /// the CRC32C instruction), `"instruction"` (the CRC32C instruction
    /// alone, through the `crc32c` crate) or `"software"` (a portable
    /// slicing-by-8 table implementation). Matters only on connections that
    /// negotiated a digest.
    pub crc: Crc32cImpl,
    /// `buffer_pool` (datapath rule 3). On: each connection reuses the
    /// buffers of Data-In and of write data (up to
    /// [`crate::buffer_pool::POOL_BUFFERS_MAX`] of them idle). Off: every
    /// command gets a freshly allocated buffer, freed once it is sent or
    /// written to the store.
    pub buffer_pool: bool,
    /// `workers`: the event-loop threads that serve connections (each
    /// connection stays on one); 0, the default, runs one per CPU.
    pub workers: usize,
    /// `io_threads`: threads that make the store calls which may wait on
    /// a device (reads, writes and cache flushes of file and block LUNs,
    /// SANITIZE, persisting reservations), so that a slow disk holds up
    /// only the commands that wait for it, never a worker's other
    /// connections. 0 makes those calls on the workers themselves, which
    /// saves two thread hand-offs per command when the data is in the page
    /// cache and stalls every connection of the worker when it is not.
    /// Memory LUNs never use them.
    pub io_threads: usize,
}

/// Most `[datapath] workers` and `io_threads`.
pub const THREADS_MAX: usize = 256;

/// Default `[datapath] io_threads`.
pub const DEFAULT_IO_THREADS: usize = 4;

impl Default for Datapath {
    /// The efficient datapath: batching, hardware CRC32C, pooled buffers,
    /// a worker per CPU, and store calls that may block off the workers.
    fn default() -> Self {
        Datapath {
            batching: true,
            crc: Crc32cImpl::Hardware,
            buffer_pool: true,
            workers: 0,
            io_threads: DEFAULT_IO_THREADS,
        }
    }
}

impl Datapath {
    /// The `crc` value as written in the configuration.
    pub fn crc_name(&self) -> &'static str {
        match self.crc {
            Crc32cImpl::Hardware => "hardware",
            Crc32cImpl::Instruction => "instruction",
            Crc32cImpl::Software => "software",
        }
    }
}

/// A target's iSCSI operational parameters (RFC 7143 §13): the values the
/// target declares or accepts during login negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// RFC 7143 §13.12 MaxRecvDataSegmentLength the target declares, 512..=2^24-1.
    pub max_recv_data_segment_length: u32,
    /// RFC 7143 §13.13 MaxBurstLength, 512..=2^24-1.
    pub max_burst_length: u32,
    /// RFC 7143 §13.14 FirstBurstLength, 512..=2^24-1 and at most `max_burst_length`.
    pub first_burst_length: u32,
    /// RFC 7143 §13.11 ImmediateData.
    pub immediate_data: bool,
    /// RFC 7143 §13.10 InitialR2T.
    pub initial_r2t: bool,
    /// RFC 7143 §13.2 MaxConnections, 1..=[`MAX_CONNECTIONS`].
    pub max_connections: u16,
    /// RFC 7143 §13.17 MaxOutstandingR2T, 1..=65535.
    pub max_outstanding_r2t: u16,
    /// RFC 7143 §13.1 HeaderDigest values the target accepts, in its order of
    /// preference; never empty, no repeats.
    pub header_digest: Vec<DigestChoice>,
    /// RFC 7143 §13.1 DataDigest values, as for `header_digest`.
    pub data_digest: Vec<DigestChoice>,
    /// Seconds between target-initiated NOP-In pings on an idle connection;
    /// 0 turns them off. At most [`MAX_NOP_IN_S`].
    pub nop_in_interval_s: u32,
    /// Seconds to wait for the NOP-Out answering a ping before dropping the
    /// connection, 1..=[`MAX_NOP_IN_S`].
    pub nop_in_timeout_s: u32,
}

impl Default for Params {
    /// The values of `examples/target.toml`'s `[defaults]`; both digests are
    /// offered so that the initiator decides.
    fn default() -> Self {
        Params {
            max_recv_data_segment_length: 262_144,
            max_burst_length: 1_048_576,
            first_burst_length: 262_144,
            immediate_data: true,
            initial_r2t: false,
            max_connections: MAX_CONNECTIONS,
            max_outstanding_r2t: 1,
            header_digest: vec![DigestChoice::None, DigestChoice::Crc32c],
            data_digest: vec![DigestChoice::None, DigestChoice::Crc32c],
            nop_in_interval_s: 30,
            nop_in_timeout_s: 30,
        }
    }
}

/// One HeaderDigest or DataDigest value (RFC 7143 §13.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestChoice {
    /// No digest: `None`.
    None,
    /// CRC32C: `CRC32C`.
    Crc32c,
}

impl DigestChoice {
    /// The value as written in the configuration and in login text: `None` or `CRC32C`.
    pub fn as_str(self) -> &'static str {
        match self {
            DigestChoice::None => "None",
            DigestChoice::Crc32c => "CRC32C",
        }
    }
}

impl fmt::Display for DigestChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[target]]`: an iSCSI target node and its logical units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// The target's iSCSI name (TargetName, RFC 7143 §13.4), lower case.
    pub name: String,
    /// TargetAlias (RFC 7143 §13.6), if any.
    pub alias: Option<String>,
    /// Initiator names allowed to see and log into the target; empty: all.
    pub allowed_initiators: Vec<String>,
    /// `[target.chap]`: CHAP required of every login to the target; `None`: none.
    pub chap: Option<ChapConfig>,
    /// `[defaults]` with this target's `[target.params]` overrides applied.
    pub params: Params,
    /// The logical units, in file order; numbers unique.
    pub luns: Vec<LunSpec>,
}

/// One `[[target.lun]]`: a logical unit and its backing store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunSpec {
    /// The LUN, 0..=[`MAX_LUN_NUMBER`].
    pub number: u16,
    /// Where the data lives.
    pub store: StoreSpec,
    /// Refuse writes (the unit reports itself write-protected).
    pub read_only: bool,
    /// Logical block size in bytes: 512 (the default) or 4096.
    pub block_size: u32,
    /// Physical block size reported to initiators (a power of two from
    /// `block_size` to 64 KiB); `None`: the logical block size.
    pub physical_block_size: Option<u32>,
    /// Bytes per second a SANITIZE OVERWRITE may write; `None`: no limit.
    pub sanitize_bytes_per_s: Option<u64>,
    /// Unit serial number (VPD page 0x80) if configured; else see [`crate::identity`].
    pub serial: Option<String>,
    /// NAA type 6 designator (VPD page 0x83) if configured; else see [`crate::identity`].
    pub naa: Option<[u8; 16]>,
    /// `offline = true`: the LUN is listed and keeps its identity, but
    /// every command that would touch it ends in NOT READY, OFFLINE.
    pub offline: bool,
}

/// The backing store of a LUN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Volatile memory of the given size.
    Memory {
        /// Size in bytes, a multiple of the block size, at most
        /// [`MEMORY_LUN_MAX_BYTES`].
        size_bytes: u64,
        /// `overcommit = true`: the LUN may take the memory LUNs of the
        /// file past the machine's RAM (see [`crate::provision::check_stores`]).
        overcommit: bool,
    },
    /// A regular file, created sparse with `size_bytes` if it does not exist.
    File {
        /// The file; relative paths are already resolved against the config's directory.
        path: PathBuf,
        /// Size in bytes (a multiple of the block size), or `None` to use the existing file's.
        size_bytes: Option<u64>,
    },
    /// A block device, used at its own size.
    Block {
        /// The device node; relative paths are already resolved against the config's directory.
        path: PathBuf,
    },
    /// A Ceph RBD image (`rbd = "pool/image"`), created with `size` if it
    /// does not exist; the cluster is reached through `ceph_conf`
    /// (`/etc/ceph/ceph.conf` by default) as `client.<ceph_id>` (`admin`),
    /// with `ceph_keyring` if the configuration file does not name one.
    Rbd(isoe_rbd::RbdSpec),
}

impl StoreSpec {
    /// The store in a few words, for the startup report and the control
    /// plane: "memory 64 MiB", "file /srv/a.img", "rbd rbd/disk1".
    pub fn describe(&self) -> String {
        match self {
            StoreSpec::Memory {
                size_bytes,
                overcommit,
            } => {
                let overcommitted = if *overcommit { ", overcommitted" } else { "" };
                format!("memory {} MiB{overcommitted}", size_bytes >> 20)
            }
            StoreSpec::File { path, .. } => format!("file {}", path.display()),
            StoreSpec::Block { path } => format!("block {}", path.display()),
            StoreSpec::Rbd(spec) => format!("rbd {}", spec.name()),
        }
    }
}

impl Config {
    /// The embedded default: portal 127.0.0.1:3260, target
    /// iqn.2026-11.io.isoe:target0, LUN 0 = 1 GiB memory, default parameters,
    /// no state directory (memory LUN identities need none).
    pub fn embedded_default() -> Config {
        Config {
            source: None,
            state_dir: None,
            portals: vec![SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                DEFAULT_PORT,
            )],
            portal_groups: vec![PortalGroup::default_group(1)],
            defaults: Params::default(),
            targets: vec![TargetConfig {
                name: DEFAULT_TARGET_NAME.to_string(),
                alias: None,
                allowed_initiators: Vec::new(),
                chap: None,
                params: Params::default(),
                luns: vec![LunSpec {
                    number: 0,
                    store: StoreSpec::Memory {
                        size_bytes: 1 << 30,
                        overcommit: false,
                    },
                    read_only: false,
                    block_size: 512,
                    physical_block_size: None,
                    sanitize_bytes_per_s: None,
                    serial: None,
                    naa: None,
                    offline: false,
                }],
            }],
            datapath: Datapath::default(),
            discovery: Discovery::default(),
            limits: Limits::default(),
            control: Control::default(),
            metrics: Metrics::default(),
            log: LogConfig::default(),
            store_places: StorePlaces::default(),
            portal_places: PortalPlaces::default(),
        }
    }
}

impl Config {
    /// The tag of the portal group holding `portals[index]`;
    /// [`DEFAULT_PORTAL_GROUP_TAG`] for a portal no group lists.
    pub fn portal_group_tag(&self, index: usize) -> u16 {
        self.portal_groups
            .iter()
            .find(|g| g.portals.contains(&index))
            .map_or(DEFAULT_PORTAL_GROUP_TAG, |g| g.tag)
    }

    /// Replaces every portal by `portals`, all in group 1, active/optimized
    /// (what `isoe target --listen` does to a configuration's portals).
    pub fn set_portals(&mut self, portals: Vec<SocketAddr>) {
        self.portal_groups = vec![PortalGroup::default_group(portals.len())];
        self.portals = portals;
        // Those of the command line were written in no file.
        self.portal_places = PortalPlaces::default();
    }

    /// Where portal `addr` was written, as errors name it:
    /// `target.toml:3: portals[1]`; None for a portal of no file.
    pub fn portal_place(&self, addr: SocketAddr) -> Option<String> {
        let place = self.portal_places.get(addr)?;
        let file = super::error::file_label(self.source.as_deref());
        Some(format!("{file}:{}: {}", place.line, place.key))
    }

    /// The ALUA target port groups the SCSI layer reports: one per portal
    /// group, holding one target port numbered as the group. A portal that
    /// no group lists (portals replaced by hand) counts in group 1.
    pub fn port_groups(&self) -> Vec<isoe_scsi::PortGroup> {
        let mut groups: Vec<_> = self
            .portal_groups
            .iter()
            .map(|g| isoe_scsi::PortGroup {
                id: g.tag,
                state: g.alua_state,
                preferred: g.preferred,
                relative_ports: vec![g.tag],
            })
            .collect();
        let ungrouped = (0..self.portals.len())
            .map(|i| self.portal_group_tag(i))
            .any(|tag| !groups.iter().any(|g| g.id == tag));
        if ungrouped {
            groups.push(isoe_scsi::PortGroup {
                id: DEFAULT_PORTAL_GROUP_TAG,
                state: AccessState::ActiveOptimized,
                preferred: false,
                relative_ports: vec![DEFAULT_PORTAL_GROUP_TAG],
            });
        }
        groups
    }
}
