//! The configuration of `isoe target --config FILE`: a TOML file an
//! administrator writes by hand, read into [`Config`].
//!
//! ```toml
//! state_dir = "/var/lib/isoe"     # optional
//! portals = ["0.0.0.0:3260", "[::]:3260"]   # portal group 1
//!
//! [[portal_group]]                 # optional: more portal groups (ALUA)
//! tag = 2
//! portals = ["10.0.1.1:3260"]
//! alua_state = "standby"           # default "active/optimized"
//! preferred = false
//!
//! [defaults]                       # iSCSI parameters, RFC 7143 §13 names in snake_case
//! max_burst_length = 1048576
//!
//! [discovery.chap]                 # optional: CHAP for discovery sessions
//! user = "discover"
//! secret_file = "discovery.secret"
//!
//! [[target]]
//! name = "iqn.2026-11.io.isoe:db"
//! allowed_initiators = ["iqn.1994-05.com.redhat:client1"]
//! [target.chap]                    # optional: CHAP for logins to this target
//! user = "alice"
//! secret = "alice-secret-12"       # or secret_file = "PATH"
//! mutual_user = "db-target"        # optional: the target proves itself too
//! mutual_secret_file = "db-target.secret"
//! algorithms = ["SHA3-256", "SHA-256", "MD5"]
//! [target.params]                  # overrides of [defaults] for this target
//! immediate_data = false
//! [[target.lun]]
//! number = 0
//! memory = "1GiB"                  # exactly one of memory / file / block
//!
//! [datapath]                       # optional; isoe's own datapath options
//! batching = true
//! crc = "hardware"                 # or "instruction", "software"
//! buffer_pool = true
//! workers = 0                      # event-loop threads; 0: one per CPU
//! io_threads = 4                   # threads for file and block LUN I/O; 0: none
//!
//! [limits]                         # optional; what peers may make us hold
//! connections = 4096
//! connections_per_initiator = 256  # per initiator IP address
//! sessions = 1024
//! logins = 256                     # connections not yet logged in
//! logins_per_initiator = 16        # of those, from one IP address
//! first_pdu_timeout_ms = 5000      # a connection's first PDU must come within this
//! write_buffer = "256MiB"          # solicited write data, all connections
//! response_buffer = "256MiB"       # responses built, not yet sent, all connections
//!
//! [log]                            # optional; what the target logs on stderr
//! level = "info"                   # error, warn, info, debug, trace; RUST_LOG wins when set
//! timestamps = true                # false under journald, which stamps lines itself
//! format = "text"                  # or "json", one object per line
//! ```
//!
//! `examples/target.toml` at the top of the repository documents every key.
//! The rules that are not obvious from the key names:
//!
//! - **Sizes** are an integer number of bytes or a string in the grammar of
//!   [`isoe_size`], the same as `isoe bench`'s flags and `isoe lab`'s plans: a
//!   number, optionally with a fraction, and a case-insensitive unit, every
//!   multiple a power of 1024 (`"4k"`, `"4KiB"` and `"4KB"` are 4096 bytes,
//!   `"1GB"` is 1 GiB), `B` or no unit is bytes. `"1.5TiB"` is fine as long as
//!   the result is a whole number of bytes. A size must be positive, and a
//!   LUN's a multiple of its block size.
//! - **Relative paths** (`state_dir`, `file`, `block`) are relative to the
//!   directory holding the configuration file; with no file (see
//!   [`Config::parse`]) they stay relative to the working directory.
//! - **`state_dir`** defaults to `<config file dir>/.isoe-state`; with no
//!   configuration file there is no default and [`Config::state_dir`] is `None`.
//!   Besides generated LUN identities it keeps persistent reservations that an
//!   initiator asked to survive a restart (APTPL), in
//!   `<target dir>/lun-<n>.pr`; with no `state_dir`, APTPL is refused.
//! - **What a LUN's store is** is checked too, not only what the file says:
//!   - `size` of a `file` LUN may be left out only when the file exists;
//!   - a LUN holds at least one block: an existing file used at its own size
//!     (no `size`), or a block device, smaller than `block_size` is refused;
//!   - a `file` LUN whose file is missing while its identity record exists
//!     in `state_dir` was provisioned before and lost its data: it is
//!     refused (see [`crate::identity::check_backing_file`]) rather than
//!     created empty under the same serial and NAA;
//!   - a `memory` LUN is at most [`MEMORY_LUN_MAX_BYTES`] (16 TiB), and the
//!     memory LUNs of the file together at most the machine's RAM (MemTotal
//!     in /proc/meminfo), since a memory LUN written full holds its whole
//!     size in RAM. `overcommit = true` on a memory LUN leaves it out of that
//!     sum, for a LUN that will never be written full; the 16 TiB bound
//!     stays.
//! - **Portals** are socket addresses; an address without a port gets 3260.
//!   Port 0 (an ephemeral port) is accepted for tests. An address is
//!   listed once in the whole file.
//! - **Portal groups**: each is one iSCSI target portal group, so one SCSI
//!   target port and one ALUA target port group, all three numbered by its
//!   `tag` (1..=65535): logins through its portals are told
//!   TargetPortalGroupTag = tag, SendTargets lists its portals as
//!   `ip:port,tag`, and REPORT TARGET PORT GROUPS reports its `alua_state`
//!   (`"active/optimized"`, the default, `"active/non-optimized"`,
//!   `"standby"` or `"unavailable"`) and `preferred` (the PREF bit). The
//!   top-level `portals` are group 1, active/optimized, not preferred; with
//!   them present no `[[portal_group]]` may use tag 1. With neither,
//!   127.0.0.1:3260 is group 1. A session's connections all come through
//!   one group; the same ISID through another group is another session.
//!   `isoe target --listen` replaces all of it by its portals in group 1
//!   ([`Config::set_portals`]). See [`PortalGroup`].
//! - **Names** (target names, `allowed_initiators`) follow RFC 7143 §4.2.7 and
//!   RFC 3720 §3.2.6.3: `iqn.yyyy-mm.reversed.domain[:anything]`, `eui.` and
//!   16 hex digits, `naa.` and 16 or 32 hex digits; at most 223 bytes. They must
//!   be written in lower case, the form RFC 3722 normalises them to, because
//!   the target compares names byte for byte, and in ASCII: a-z, 0-9, `-`,
//!   `.` and `:` (RFC 3722 also allows some non-ASCII letters; isoe does
//!   not). The check is [`isoe_wire::name::validate`], the same as logins get.
//!
//! - **`allowed_initiators`** is the target's ACL: an initiator whose
//!   InitiatorName is not listed neither sees the target in SendTargets nor
//!   logs into it (Login Response status 0x0202, authorization failure).
//!   An unknown TargetName gets 0x0203 (target not found).
//! - **`chap`** (`[target.chap]` per target, `[discovery.chap]` for
//!   discovery sessions) makes CHAP (RFC 7143 §12.1.3) mandatory there:
//!   a login without it, or with a wrong user or response, gets 0x0201
//!   (authentication failure). `user` is the CHAP_N the initiator presents;
//!   the secret is given once, as `secret` or as `secret_file`, a file read
//!   at startup whose content (without one trailing newline) is the secret
//!   and which other users may not read or write. Secrets are 12 to 255
//!   bytes (RFC 7143 §9.2.1: at least 96 bits). `mutual_user` with
//!   `mutual_secret` or `mutual_secret_file` lets an initiator that asks
//!   authenticate the target (mutual CHAP). RFC 7143 §9.2.1 forbids a secret
//!   that authenticates initiators anywhere in the file to authenticate a
//!   target too: such a file is refused. `algorithms` lists the CHAP_A
//!   values accepted, from `"SHA3-256"` (8), `"SHA-256"` (7) and `"MD5"`
//!   (5); all three by default, and the initiator's order decides among
//!   them. Secrets never appear in `Debug` output, logs or error messages.
//!   Challenges are 32 bytes from the operating system's CSPRNG, never
//!   issued twice, and a challenge of ours sent back by an initiator is
//!   refused as reflection (see [`crate::registry`]).
//!
//! - **`[datapath]`** switches off, one at a time, what isoe's datapath does
//!   to save CPU (ARCHITECTURE.md, datapath rules 2, 3 and 5), so that a
//!   benchmark can show what each saves; see [`Datapath`]. The defaults are
//!   the efficient datapath; the options never change what goes on the wire
//!   or what reaches the store.
//!
//! - **`[log]`** sets what the `isoe` binary writes to stderr (see
//!   [`LogConfig`] and [`crate::log`] for the events): `level` is the least
//!   severe level written, unless the `RUST_LOG` environment variable is
//!   set, whose filter (`tracing-subscriber`'s syntax, e.g.
//!   `isoe_target=debug`) then decides instead.
//!
//! Reading stops at the first problem and reports it as a [`ConfigError`] that
//! names the file, the 1-based line and the key path, with array indices
//! counted from 0: `isoe.toml:14: target[1].lun[0].size: expected a size like
//! 4k, 256KiB or 1MiB, found "ten"`. The reading itself (lines, key paths,
//! types, unknown keys and their "did you mean" hints) is [`isoe_config`]'s,
//! shared with `isoe lab`'s plans; this module holds the schema.

mod chap;
mod log;
mod portal_groups;

pub use chap::{algorithm_name, ChapConfig, SECRET_MAX_BYTES, USER_MAX_BYTES};
pub use log::{LogConfig, LogFormat, LogLevel};
pub use portal_groups::{PortalGroup, DEFAULT_PORTAL_GROUP_TAG};

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::path::{Path, PathBuf};

use isoe_config::{Field, Node, Table};
use isoe_wire::digest::Crc32cImpl;

/// The IANA-assigned iSCSI port, used for portals written without a port.
pub const DEFAULT_PORT: u16 = 3260;

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
    /// ([`crate::connection::LOGIN_DEADLINE`]), which also bounds this.
    pub first_pdu_timeout_ms: u64,
    /// `write_buffer`: write data solicited (R2T) and not yet stored, all
    /// connections together; beyond it R2Ts wait, and a write whose data
    /// would come unasked is answered TASK SET FULL.
    pub write_buffer: usize,
    /// `response_buffer`: responses built and not yet taken by their
    /// sockets, all connections together; beyond it a connection with
    /// output waiting takes no new command until some is sent.
    pub response_buffer: usize,
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
        /// file past the machine's RAM (see the module doc).
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

/// A configuration that could not be read or is not acceptable; the message
/// names the file, the line and the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The text is not well-formed TOML.
    #[error("{file}:{line}:{column}: TOML syntax error: {message}")]
    Syntax {
        /// The file as given, or `<config>` for text with no file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What the TOML parser said.
        message: String,
    },
    /// Well-formed TOML with a key or value isoe does not accept.
    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        /// The file as given, or `<config>` for text with no file.
        file: String,
        /// 1-based line of the key (or of the table that lacks it).
        line: usize,
        /// Path of the key, e.g. `target[1].lun[0].size` (indices from 0).
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

impl ConfigError {
    /// The 1-based line the error points at, if it points into a file.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { line, .. } | ConfigError::Invalid { line, .. } => Some(*line),
        }
    }
}

// Syntax and Invalid are the problems the shared reader finds.
isoe_config::impl_read_error!(ConfigError);

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::read_file(path).map(|(_, config)| config)
    }

    /// [`Config::load`], returning the text read as well.
    pub fn read_file(path: &Path) -> Result<(String, Config), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config = Config::parse(&text, Some(path))?;
        Ok((text, config))
    }

    /// Validates configuration `text`; `source` names it in errors and anchors
    /// relative paths and the default `state_dir`. Memory LUNs are held to
    /// this machine's RAM ([`memory_total_bytes`]).
    pub fn parse(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        Config::parse_with_ram(text, source, memory_total_bytes())
    }

    /// As [`Config::parse`], on a machine with `ram_bytes` of RAM; `None`
    /// (RAM unknown) checks memory LUNs against [`MEMORY_LUN_MAX_BYTES`] only.
    pub fn parse_with_ram(
        text: &str,
        source: Option<&Path>,
        ram_bytes: Option<u64>,
    ) -> Result<Config, ConfigError> {
        let mut reader = Reader::new(text, source);
        reader.ram_bytes = ram_bytes;
        let root = reader.root(text)?;
        let config = read_config(&reader, root, source)?;
        debug_assert!(!config.portals.is_empty() && !config.targets.is_empty());
        Ok(config)
    }

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
        }
    }
}

/// The shared reader ([`isoe_config::Reader`]: lines, key paths, typed
/// values, [`ConfigError`]s) and what only the target's schema needs: where
/// relative paths start and how much RAM memory LUNs may take.
struct Reader {
    shared: isoe_config::Reader<ConfigError>,
    /// The configuration file's directory, which relative paths start from;
    /// `None` for text with no file.
    base_dir: Option<PathBuf>,
    /// The machine's RAM, which memory LUNs without `overcommit` must fit in.
    ram_bytes: Option<u64>,
}

impl Deref for Reader {
    type Target = isoe_config::Reader<ConfigError>;

    fn deref(&self) -> &Self::Target {
        &self.shared
    }
}

impl Reader {
    fn new(text: &str, source: Option<&Path>) -> Reader {
        let file = source.map_or_else(|| "<config>".to_string(), |p| p.display().to_string());
        Reader {
            shared: isoe_config::Reader::new(text, file),
            base_dir: source.map(|p| p.parent().unwrap_or(Path::new("")).to_path_buf()),
            ram_bytes: None,
        }
    }

    /// A size in bytes: an integer or a string with a unit (see the module doc).
    fn size(&self, field: &Field) -> Result<u64, ConfigError> {
        let bytes = match &field.node {
            Node::Int(v) if *v > 0 => *v as u64,
            Node::Int(v) => {
                return Err(self.at(field, format!("a size must be positive, found {v}")))
            }
            Node::Str(s) => isoe_size::parse_bytes(s).map_err(|e| self.at(field, e.to_string()))?,
            _ => return Err(self.wrong_type(field, "a size like \"10GiB\" or a number of bytes")),
        };
        if bytes == 0 {
            return Err(self.at(field, "a size must be positive"));
        }
        Ok(bytes)
    }

    /// A non-empty path, resolved against the configuration file's directory.
    fn path(&self, field: &Field) -> Result<PathBuf, ConfigError> {
        let text = self.string(field)?;
        if text.is_empty() {
            return Err(self.at(field, "expected a path, found an empty string"));
        }
        let path = PathBuf::from(text);
        Ok(match &self.base_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        })
    }
}

const ROOT_KEYS: &[&str] = &[
    "state_dir",
    "portals",
    "portal_group",
    "defaults",
    "target",
    "datapath",
    "discovery",
    "limits",
    "control",
    "metrics",
    "log",
];
const CONTROL_KEYS: &[&str] = &["socket"];
const METRICS_KEYS: &[&str] = &["enabled", "listen", "allow_remote"];
const LIMITS_KEYS: &[&str] = &[
    "connections",
    "connections_per_initiator",
    "sessions",
    "logins",
    "logins_per_initiator",
    "first_pdu_timeout_ms",
    "write_buffer",
    "response_buffer",
];
const DISCOVERY_KEYS: &[&str] = &["chap"];
const DATAPATH_KEYS: &[&str] = &["batching", "crc", "buffer_pool", "workers", "io_threads"];
const TARGET_KEYS: &[&str] = &[
    "name",
    "alias",
    "allowed_initiators",
    "chap",
    "params",
    "lun",
];
const LUN_KEYS: &[&str] = &[
    "number",
    "memory",
    "file",
    "block",
    "rbd",
    "size",
    "ceph_conf",
    "ceph_id",
    "ceph_keyring",
    "read_only",
    "block_size",
    "physical_block_size",
    "sanitize_bytes_per_s",
    "serial",
    "naa",
    "overcommit",
    "offline",
];
const PARAM_KEYS: &[&str] = &[
    "max_recv_data_segment_length",
    "max_burst_length",
    "first_burst_length",
    "immediate_data",
    "initial_r2t",
    "max_connections",
    "max_outstanding_r2t",
    "header_digest",
    "data_digest",
    "nop_in_interval_s",
    "nop_in_timeout_s",
];

fn read_config(r: &Reader, mut root: Table, source: Option<&Path>) -> Result<Config, ConfigError> {
    r.deny_unknown(&root, ROOT_KEYS)?;
    let state_dir = match root.take("state_dir") {
        Some(field) => Some(r.path(&field)?),
        None => r.base_dir.as_ref().map(|dir| dir.join(".isoe-state")),
    };
    let (portals, portal_groups) =
        portal_groups::read_portals_and_groups(r, root.take("portals"), root.take("portal_group"))?;
    let defaults = match root.take("defaults") {
        Some(field) => read_params(r, r.table(field, PARAM_KEYS)?, &Params::default())?,
        None => Params::default(),
    };
    let Some(field) = root.take("target") else {
        return Err(r.invalid(0, "target", "no targets: add at least one [[target]] table"));
    };
    let mut targets = Vec::new();
    let mut chap_places = Vec::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut memory = MemoryTally::default();
    for table in r.tables(field, TARGET_KEYS)? {
        let (target, name_field, places) =
            read_target(r, table, &defaults, state_dir.as_deref(), &mut memory)?;
        chap_places.push(places);
        if let Some(line) = first_line_of.get(&target.name) {
            return Err(r.at(
                &name_field,
                format!(
                    "duplicate target name {:?} (first at line {line})",
                    target.name
                ),
            ));
        }
        first_line_of.insert(target.name.clone(), r.line(name_field.offset));
        targets.push(target);
    }
    if targets.is_empty() {
        return Err(r.invalid(0, "target", "no targets: add at least one [[target]] table"));
    }
    let datapath = match root.take("datapath") {
        Some(field) => read_datapath(r, r.table(field, DATAPATH_KEYS)?)?,
        None => Datapath::default(),
    };
    let limits = match root.take("limits") {
        Some(field) => read_limits(r, r.table(field, LIMITS_KEYS)?)?,
        None => Limits::default(),
    };
    let control = match root.take("control") {
        Some(field) => read_control(r, r.table(field, CONTROL_KEYS)?)?,
        None => Control::default(),
    };
    let metrics = match root.take("metrics") {
        Some(field) => read_metrics(r, r.table(field, METRICS_KEYS)?)?,
        None => Metrics::default(),
    };
    let log = match root.take("log") {
        Some(field) => log::read_log(r, r.table(field, log::LOG_KEYS)?)?,
        None => LogConfig::default(),
    };
    let (discovery, discovery_places) = match root.take("discovery") {
        Some(field) => read_discovery(r, r.table(field, DISCOVERY_KEYS)?)?,
        None => (Discovery::default(), None),
    };
    let all_chap: Vec<_> = targets
        .iter()
        .map(|t| t.chap.as_ref())
        .zip(chap_places.iter().map(Option::as_ref))
        .chain(std::iter::once((
            discovery.chap.as_ref(),
            discovery_places.as_ref(),
        )))
        .filter_map(|(c, p)| Some((c?, p?)))
        .collect();
    chap::check_directions(r, &all_chap)?;
    Ok(Config {
        source: source.map(Path::to_path_buf),
        state_dir,
        portals,
        portal_groups,
        defaults,
        targets,
        datapath,
        discovery,
        limits,
        control,
        metrics,
        log,
    })
}

/// The `[metrics]` table. The listener serves anyone who can reach it, so
/// an address other than loopback must be asked for with `allow_remote`.
fn read_metrics(r: &Reader, mut t: Table) -> Result<Metrics, ConfigError> {
    let enabled = match t.take("enabled") {
        Some(f) => r.bool(&f)?,
        None => true,
    };
    let allow_remote = match t.take("allow_remote") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let listen = match t.take("listen") {
        Some(f) => {
            let text = r.string(&f)?;
            let addr: SocketAddr = text.parse().map_err(|_| {
                r.at(
                    &f,
                    format!("expected an address and port like \"127.0.0.1:9470\", found {text:?}"),
                )
            })?;
            if !addr.ip().is_loopback() && !allow_remote {
                return Err(r.at(
                    &f,
                    format!(
                        "{addr} is reachable from other machines, and the metrics name your \
                         initiators and LUNs: use 127.0.0.1 or [::1], or set allow_remote = true"
                    ),
                ));
            }
            if !enabled {
                return Err(r.at(&f, "a metrics listener needs enabled = true"));
            }
            Some(addr)
        }
        None => None,
    };
    Ok(Metrics { enabled, listen })
}

/// The `[control]` table: `socket = ""` turns the control socket off.
fn read_control(r: &Reader, mut t: Table) -> Result<Control, ConfigError> {
    let socket = match t.take("socket") {
        Some(field) if matches!(&field.node, Node::Str(s) if s.is_empty()) => None,
        Some(field) => Some(r.path(&field)?),
        None => default_control_socket(),
    };
    Ok(Control { socket })
}

/// The shortest `first_pdu_timeout_ms`: connections' timers run once a
/// second, so a shorter one would not be kept.
const FIRST_PDU_TIMEOUT_MIN_MS: i64 = 1000;

/// The `[limits]` table; a key left out keeps its default.
fn read_limits(r: &Reader, mut t: Table) -> Result<Limits, ConfigError> {
    let mut l = Limits::default();
    for (key, slot) in [
        ("connections", &mut l.connections),
        (
            "connections_per_initiator",
            &mut l.connections_per_initiator,
        ),
        ("sessions", &mut l.sessions),
        ("logins", &mut l.logins),
        ("logins_per_initiator", &mut l.logins_per_initiator),
    ] {
        if let Some(f) = t.take(key) {
            *slot = r.int_in(&f, 1, 1_000_000)? as usize;
        }
    }
    if let Some(f) = t.take("first_pdu_timeout_ms") {
        let most = crate::connection::LOGIN_DEADLINE.as_millis() as i64;
        l.first_pdu_timeout_ms = r.int_in(&f, FIRST_PDU_TIMEOUT_MIN_MS, most)? as u64;
    }
    for (key, slot) in [
        ("write_buffer", &mut l.write_buffer),
        ("response_buffer", &mut l.response_buffer),
    ] {
        if let Some(f) = t.take(key) {
            let bytes = r.size(&f)?;
            *slot = usize::try_from(bytes)
                .ok()
                .filter(|&b| b >= 1 << 20)
                .ok_or_else(|| r.wrong_type(&f, "a size of at least 1 MiB"))?;
        }
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok(l)
}

/// The `[discovery]` table; also returns where its CHAP secrets were written.
fn read_discovery(
    r: &Reader,
    mut t: Table,
) -> Result<(Discovery, Option<chap::ChapPlaces>), ConfigError> {
    let (chap, places) = match t.take("chap") {
        Some(f) => {
            let (c, p) = chap::read_chap(r, f)?;
            (Some(c), Some(p))
        }
        None => (None, None),
    };
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok((Discovery { chap }, places))
}

/// The `[datapath]` table; a key left out keeps its default.
fn read_datapath(r: &Reader, mut t: Table) -> Result<Datapath, ConfigError> {
    let mut d = Datapath::default();
    if let Some(f) = t.take("batching") {
        d.batching = r.bool(&f)?;
    }
    if let Some(f) = t.take("crc") {
        d.crc = match r.string(&f)?.as_str() {
            "hardware" => Crc32cImpl::Hardware,
            "instruction" => Crc32cImpl::Instruction,
            "software" => Crc32cImpl::Software,
            other => {
                return Err(r.at(
                    &f,
                    format!(
                        "expected \"hardware\", \"instruction\" or \"software\", found {other:?}"
                    ),
                ))
            }
        };
    }
    if let Some(f) = t.take("buffer_pool") {
        d.buffer_pool = r.bool(&f)?;
    }
    if let Some(f) = t.take("workers") {
        d.workers = r.int_in(&f, 0, THREADS_MAX as i64)? as usize;
    }
    if let Some(f) = t.take("io_threads") {
        d.io_threads = r.int_in(&f, 0, THREADS_MAX as i64)? as usize;
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok(d)
}

/// Applies the parameters of `table` over `base`, then checks the
/// FirstBurstLength <= MaxBurstLength rule against the result.
fn read_params(r: &Reader, mut t: Table, base: &Params) -> Result<Params, ConfigError> {
    let mut p = base.clone();
    let (min, max) = (MIN_LENGTH_BYTES, MAX_LENGTH_BYTES);
    if let Some(f) = t.take("max_recv_data_segment_length") {
        p.max_recv_data_segment_length = r.u32_in(&f, min, max)?;
    }
    let max_burst = t.take("max_burst_length");
    if let Some(f) = &max_burst {
        p.max_burst_length = r.u32_in(f, min, max)?;
    }
    let first_burst = t.take("first_burst_length");
    if let Some(f) = &first_burst {
        p.first_burst_length = r.u32_in(f, min, max)?;
    }
    if let Some(f) = t.take("immediate_data") {
        p.immediate_data = r.bool(&f)?;
    }
    if let Some(f) = t.take("initial_r2t") {
        p.initial_r2t = r.bool(&f)?;
    }
    if let Some(f) = t.take("max_connections") {
        p.max_connections = r.u16_in(&f, 1, MAX_CONNECTIONS)?;
    }
    if let Some(f) = t.take("max_outstanding_r2t") {
        p.max_outstanding_r2t = r.u16_in(&f, 1, u16::MAX)?;
    }
    if let Some(f) = t.take("header_digest") {
        p.header_digest = read_digests(r, f)?;
    }
    if let Some(f) = t.take("data_digest") {
        p.data_digest = read_digests(r, f)?;
    }
    if let Some(f) = t.take("nop_in_interval_s") {
        p.nop_in_interval_s = r.u32_in(&f, 0, MAX_NOP_IN_S)?;
    }
    if let Some(f) = t.take("nop_in_timeout_s") {
        p.nop_in_timeout_s = r.u32_in(&f, 1, MAX_NOP_IN_S)?;
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    if p.first_burst_length > p.max_burst_length {
        // Blame the key this table set; `base` satisfied the rule on its own.
        let (key, offset) = match first_burst.as_ref().or(max_burst.as_ref()) {
            Some(f) => (f.key.clone(), f.offset),
            None => (t.key.clone(), t.offset),
        };
        return Err(r.invalid(
            offset,
            &key,
            format!(
                "first_burst_length {} exceeds max_burst_length {} (RFC 7143 §13.14)",
                p.first_burst_length, p.max_burst_length
            ),
        ));
    }
    Ok(p)
}

/// `"CRC32C"`, or a list like `["None", "CRC32C"]` in order of preference.
fn read_digests(r: &Reader, field: Field) -> Result<Vec<DigestChoice>, ConfigError> {
    let read_digest = |item: &Field| -> Result<DigestChoice, ConfigError> {
        match r.string(item)?.as_str() {
            "None" => Ok(DigestChoice::None),
            "CRC32C" => Ok(DigestChoice::Crc32c),
            other => Err(r.at(
                item,
                format!("expected \"None\" or \"CRC32C\", found {other:?}"),
            )),
        }
    };
    if let Node::Str(_) = field.node {
        return Ok(vec![read_digest(&field)?]);
    }
    r.distinct(
        field,
        "a list like [\"None\", \"CRC32C\"]",
        "at least one of \"None\" and \"CRC32C\" is needed",
        read_digest,
        DigestChoice::to_string,
    )
}

/// Reads one `[[target]]`; also returns its `name` field for duplicate checks
/// and where its CHAP secrets were written.
fn read_target(
    r: &Reader,
    mut t: Table,
    defaults: &Params,
    state_dir: Option<&Path>,
    memory: &mut MemoryTally,
) -> Result<(TargetConfig, Field, Option<chap::ChapPlaces>), ConfigError> {
    let name_field = r.required(&mut t, "name", "every target needs an iSCSI name")?;
    let name = r.string(&name_field)?;
    check_iscsi_name(&name).map_err(|message| r.at(&name_field, message))?;
    let alias = match t.take("alias") {
        Some(f) => Some(read_alias(r, &f)?),
        None => None,
    };
    let mut allowed_initiators = Vec::new();
    if let Some(f) = t.take("allowed_initiators") {
        for item in r.array(f, "an array of initiator names")? {
            let initiator = r.string(&item)?;
            check_iscsi_name(&initiator).map_err(|message| r.at(&item, message))?;
            allowed_initiators.push(initiator);
        }
    }
    let (chap, chap_places) = match t.take("chap") {
        Some(f) => {
            let (c, p) = chap::read_chap(r, f)?;
            (Some(c), Some(p))
        }
        None => (None, None),
    };
    let params = match t.take("params") {
        Some(f) => read_params(r, r.table(f, PARAM_KEYS)?, defaults)?,
        None => defaults.clone(),
    };
    let mut luns: Vec<LunSpec> = Vec::new();
    let mut first_line_of: HashMap<u16, usize> = HashMap::new();
    if let Some(f) = t.take("lun") {
        for table in r.tables(f, LUN_KEYS)? {
            let (lun, number_field, store_place) = read_lun(r, table)?;
            check_store(r, &lun, &store_place, state_dir, &name, memory)?;
            if let Some(line) = first_line_of.get(&lun.number) {
                return Err(r.at(
                    &number_field,
                    format!("LUN {} is already defined at line {line}", lun.number),
                ));
            }
            first_line_of.insert(lun.number, r.line(number_field.offset));
            luns.push(lun);
        }
    }
    Ok((
        TargetConfig {
            name,
            alias,
            allowed_initiators,
            chap,
            params,
            luns,
        },
        name_field,
        chap_places,
    ))
}

/// RFC 7143 §13.6: TargetAlias is UTF-8 text of at most 255 bytes.
fn read_alias(r: &Reader, field: &Field) -> Result<String, ConfigError> {
    let alias = r.string(field)?;
    if alias.is_empty() || alias.len() > 255 || alias.chars().any(char::is_control) {
        return Err(r.at(
            field,
            "an alias is 1 to 255 bytes of text without control characters",
        ));
    }
    Ok(alias)
}

/// Reads one `[[target.lun]]`; also returns its `number` field for
/// duplicate checks and where its store key is, for [`check_store`].
fn read_lun(r: &Reader, mut t: Table) -> Result<(LunSpec, Field, Place), ConfigError> {
    let number_field = r.required(
        &mut t,
        "number",
        &format!("every LUN needs a number, 0..={MAX_LUN_NUMBER}"),
    )?;
    let number = r.u16_in(&number_field, 0, MAX_LUN_NUMBER)?;
    let block_size = match t.take("block_size") {
        Some(f) => match f.node {
            Node::Int(512) => 512,
            Node::Int(4096) => 4096,
            _ => return Err(r.wrong_type(&f, "a block size of 512 or 4096")),
        },
        None => 512,
    };
    let physical_block_size = match t.take("physical_block_size") {
        Some(f) => match f.node {
            Node::Int(v)
                if (i64::from(block_size)..=1 << 16).contains(&v) && v.count_ones() == 1 =>
            {
                Some(v as u32)
            }
            _ => {
                return Err(r.wrong_type(
                    &f,
                    &format!("a power of two from the block size {block_size} to 65536"),
                ))
            }
        },
        None => None,
    };
    let sanitize_bytes_per_s = match t.take("sanitize_bytes_per_s") {
        Some(f) => Some(r.size(&f)?),
        None => None,
    };
    let read_only = match t.take("read_only") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let serial = match t.take("serial") {
        Some(f) => Some(read_serial(r, &f)?),
        None => None,
    };
    let naa = match t.take("naa") {
        Some(f) => Some(parse_naa(&r.string(&f)?).map_err(|message| r.at(&f, message))?),
        None => None,
    };
    let offline = match t.take("offline") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let overcommit = match t.take("overcommit") {
        Some(f) => Some((r.bool(&f)?, f)),
        None => None,
    };
    let (mut store, store_place) = read_store(r, &mut t, block_size)?;
    match (&mut store, overcommit) {
        (StoreSpec::Memory { overcommit, .. }, Some((value, _))) => *overcommit = value,
        (_, Some((_, f))) => {
            return Err(r.at(
                &f,
                "`overcommit` applies only to a memory LUN: a file or block LUN \
                 takes no RAM",
            ))
        }
        (_, None) => {}
    }
    let lun = LunSpec {
        number,
        store,
        read_only,
        block_size,
        physical_block_size,
        sanitize_bytes_per_s,
        serial,
        naa,
        offline,
    };
    Ok((lun, number_field, store_place))
}

/// Exactly one of `memory`, `file`, `block`, and the `size` that goes with
/// it; also returns where that key is. What the store is on disk or in RAM
/// is [`check_store`]'s business.
fn read_store(
    r: &Reader,
    t: &mut Table,
    block_size: u32,
) -> Result<(StoreSpec, Place), ConfigError> {
    let mut kinds: Vec<Field> = ["memory", "file", "block", "rbd"]
        .iter()
        .filter_map(|k| t.take(k))
        .collect();
    let size = t.take("size");
    let ceph: Vec<Field> = ["ceph_conf", "ceph_id", "ceph_keyring"]
        .iter()
        .filter_map(|k| t.take(k))
        .collect();
    // Report the one written second, in file order.
    kinds.sort_by_key(|f| f.offset);
    let field = match kinds.len() {
        0 => {
            return Err(r.invalid(
                t.offset,
                &t.key,
                "a LUN needs exactly one of `memory = \"1GiB\"`, \
                 `file = \"PATH\"`, `block = \"/dev/...\"` or `rbd = \"pool/image\"`",
            ))
        }
        1 => kinds.pop().expect("one"),
        _ => {
            let first = kinds[0].key.rsplit('.').next().unwrap_or("").to_string();
            let second = &kinds[1];
            let this = second.key.rsplit('.').next().unwrap_or("");
            let message =
                format!("a LUN has exactly one store, but both {first} and {this} are given");
            return Err(r.at(second, message));
        }
    };
    let sized = |f: &Field| -> Result<u64, ConfigError> {
        let bytes = r.size(f)?;
        if bytes % u64::from(block_size) != 0 {
            return Err(r.at(
                f,
                format!("{bytes} bytes is not a multiple of the block size {block_size}"),
            ));
        }
        Ok(bytes)
    };
    let kind = field.key.rsplit('.').next().unwrap_or("");
    if let (Some(size), "memory" | "block") = (&size, kind) {
        let why = if kind == "memory" {
            "`memory` is the size"
        } else {
            "a block device has its own size"
        };
        return Err(r.at(
            size,
            format!("`size` does not apply to a {kind} LUN: {why}"),
        ));
    }
    if let (Some(f), false) = (ceph.first(), kind == "rbd") {
        let key = f.key.rsplit('.').next().unwrap_or("");
        return Err(r.at(f, format!("`{key}` applies only to an rbd LUN")));
    }
    let place = Place {
        key: field.key.clone(),
        offset: field.offset,
    };
    let store = match kind {
        "rbd" => StoreSpec::Rbd(read_rbd(
            r,
            &field,
            &ceph,
            size.as_ref().map(sized).transpose()?,
        )?),
        "memory" => StoreSpec::Memory {
            size_bytes: sized(&field)?,
            overcommit: false,
        },
        "file" => StoreSpec::File {
            path: r.path(&field)?,
            size_bytes: size.as_ref().map(sized).transpose()?,
        },
        _ => StoreSpec::Block {
            path: r.path(&field)?,
        },
    };
    Ok((store, place))
}

/// An rbd LUN's image and cluster.
fn read_rbd(
    r: &Reader,
    field: &Field,
    ceph: &[Field],
    create_bytes: Option<u64>,
) -> Result<isoe_rbd::RbdSpec, ConfigError> {
    let (pool, namespace, image) =
        isoe_rbd::RbdSpec::parse_name(&r.string(field)?).map_err(|message| r.at(field, message))?;
    let mut cluster = isoe_rbd::ClusterSpec {
        conf: PathBuf::from("/etc/ceph/ceph.conf"),
        id: "admin".to_string(),
        keyring: None,
    };
    for f in ceph {
        match f.key.rsplit('.').next().unwrap_or("") {
            "ceph_conf" => cluster.conf = r.path(f)?,
            "ceph_keyring" => cluster.keyring = Some(r.path(f)?),
            _ => {
                let id = r.string(f)?;
                let printable = id.bytes().all(|b| b.is_ascii_graphic());
                if id.is_empty() || !printable || id.starts_with("client.") {
                    return Err(r.at(
                        f,
                        format!("expected a client id such as \"admin\" (for client.admin), found {id:?}"),
                    ));
                }
                cluster.id = id;
            }
        }
    }
    Ok(isoe_rbd::RbdSpec {
        cluster,
        pool,
        namespace,
        image,
        create_bytes,
    })
}

/// Where a key was, for errors found after its field was read.
struct Place {
    key: String,
    offset: usize,
}

/// The memory LUNs read so far that count against the machine's RAM.
#[derive(Default)]
struct MemoryTally {
    bytes: u64,
}

/// The checks of a LUN's store that look past the file: at the file system
/// (a missing file, a file or device smaller than one block, an identity
/// record whose file is gone) and at the machine's RAM (memory LUNs).
fn check_store(
    r: &Reader,
    lun: &LunSpec,
    place: &Place,
    state_dir: Option<&Path>,
    target_name: &str,
    memory: &mut MemoryTally,
) -> Result<(), ConfigError> {
    let fail = |message: String| Err(r.invalid(place.offset, &place.key, message));
    let block_size = u64::from(lun.block_size);
    let too_small = |path: &Path, len: u64| {
        format!(
            "{} holds {len} bytes, less than one block of {block_size}: \
             a LUN needs at least one block",
            path.display()
        )
    };
    match &lun.store {
        StoreSpec::Memory {
            size_bytes,
            overcommit,
        } => {
            if *size_bytes > MEMORY_LUN_MAX_BYTES {
                return fail(format!(
                    "a memory LUN is at most {} (its chunk table alone would take {}), \
                     this one is {}",
                    show_bytes(MEMORY_LUN_MAX_BYTES),
                    show_bytes(MEMORY_LUN_MAX_BYTES >> 14),
                    show_bytes(*size_bytes)
                ));
            }
            if *overcommit {
                return Ok(());
            }
            memory.bytes += size_bytes;
            match r.ram_bytes {
                Some(ram) if memory.bytes > ram => fail(format!(
                    "the memory LUNs up to this one take {}, more than this machine's {} \
                     of RAM (MemTotal in /proc/meminfo): written full, they would exhaust \
                     it; make them smaller, or set `overcommit = true` on the LUN if it \
                     will never be written full",
                    show_bytes(memory.bytes),
                    show_bytes(ram)
                )),
                _ => Ok(()),
            }
        }
        StoreSpec::File { path, size_bytes } => {
            if !path.exists() {
                if let Err(e) = crate::identity::check_backing_file(state_dir, target_name, lun) {
                    return fail(e.to_string());
                }
                if size_bytes.is_none() {
                    return fail(format!(
                        "{} does not exist; give `size` to create it (sparse)",
                        path.display()
                    ));
                }
                return Ok(());
            }
            match std::fs::metadata(path) {
                Ok(m) if size_bytes.is_none() && m.len() < block_size => fail(format!(
                    "{}; give `size` to grow it",
                    too_small(path, m.len())
                )),
                _ => Ok(()),
            }
        }
        // The cluster is asked when the target opens the image.
        StoreSpec::Rbd(_) => Ok(()),
        StoreSpec::Block { path } => {
            // A device that cannot be opened here is left for the target's
            // start, which says why.
            let len = std::fs::File::open(path)
                .and_then(|mut device| std::io::Seek::seek(&mut device, std::io::SeekFrom::End(0)));
            match len {
                Ok(len) if len < block_size => fail(too_small(path, len)),
                _ => Ok(()),
            }
        }
    }
}

/// `bytes` for a message: exact in the largest power-of-1024 unit that
/// divides it, else to a tenth of the largest unit it reaches.
fn show_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let Some(power) = (1..=UNITS.len()).rev().find(|p| bytes >> (10 * p) > 0) else {
        return format!("{bytes} bytes");
    };
    let unit = 1u64 << (10 * power);
    let name = UNITS[power - 1];
    if bytes.is_multiple_of(unit) {
        format!("{} {name}", bytes / unit)
    } else {
        format!("{:.1} {name}", bytes as f64 / unit as f64)
    }
}

/// The machine's RAM: MemTotal of /proc/meminfo, or None where it cannot be read.
pub fn memory_total_bytes() -> Option<u64> {
    parse_mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// MemTotal of a /proc/meminfo text, in bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => kib.checked_mul(1024),
        _ => None,
    }
}

/// VPD page 0x80 serial: printable ASCII, 1 to 32 characters, no edge spaces.
fn read_serial(r: &Reader, field: &Field) -> Result<String, ConfigError> {
    let serial = r.string(field)?;
    let printable = serial.bytes().all(|b| (0x20..=0x7e).contains(&b));
    if serial.is_empty() || serial.len() > 32 || !printable || serial.trim() != serial {
        return Err(r.at(
            field,
            format!(
                "a serial is 1 to 32 printable ASCII characters \
                 without leading or trailing spaces, found {serial:?}"
            ),
        ));
    }
    Ok(serial)
}

/// Parses a configured NAA designator: 32 hex digits, optionally after `0x`,
/// whose first digit is the NAA type, 6 (IEEE Registered Extended, SPC-4 7.8.6.6.5).
pub(crate) fn parse_naa(text: &str) -> Result<[u8; 16], String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let expected = "expected 32 hex digits of an NAA type 6 designator \
                    like \"0x6001405abcdef0123456789abcdef012\"";
    if digits.len() != 32 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{expected}, found {text:?}"));
    }
    let value =
        u128::from_str_radix(digits, 16).map_err(|_| format!("{expected}, found {text:?}"))?;
    if value >> 124 != 6 {
        return Err(format!(
            "NAA type {} is not supported; the first hex digit must be 6",
            value >> 124
        ));
    }
    Ok(value.to_be_bytes())
}

/// Checks an iSCSI name with [`isoe_wire::name::validate`]; the message
/// quotes the name, and for a name that is only wrong in case, gives the
/// lower-case form to write instead.
pub(crate) fn check_iscsi_name(name: &str) -> Result<(), String> {
    let error = match isoe_wire::name::validate(name) {
        Ok(()) => return Ok(()),
        Err(error) => error,
    };
    let lower = name.to_ascii_lowercase();
    if lower != name && isoe_wire::name::validate(&lower).is_ok() {
        return Err(format!("{error}; write {lower:?}"));
    }
    Err(format!("{error}, found {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_by_the_wire_validator_with_the_name_quoted() {
        assert_eq!(check_iscsi_name("iqn.2026-11.io.isoe:db"), Ok(()));
        assert_eq!(check_iscsi_name("eui.02004567a425678d"), Ok(()));
        assert_eq!(
            check_iscsi_name("iqn.2026-11.io.isoe:DB").unwrap_err(),
            "character 'D' at byte 20: iSCSI names are lower case (RFC 3722 folds case); \
             write \"iqn.2026-11.io.isoe:db\""
        );
        assert_eq!(
            check_iscsi_name("db").unwrap_err(),
            "expected an iSCSI name: iqn.yyyy-mm.reversed.domain[:id], eui. and 16 hex \
             digits, or naa. and 16 or 32 hex digits, found \"db\""
        );
        // Upper case and something else: no suggestion that would fail too.
        assert!(check_iscsi_name("IQN.2026-11.io.is_oe")
            .unwrap_err()
            .ends_with("found \"IQN.2026-11.io.is_oe\""));
        assert!(check_iscsi_name("iqn.2026-11.io.isoe:a\u{1b}b")
            .unwrap_err()
            .contains("'\\u{1b}' at byte 21"));
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:       24683656 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_683_656 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 12 MB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert!(memory_total_bytes().is_some_and(|bytes| bytes > 1 << 20));
    }

    #[test]
    fn sizes_in_messages_are_short_and_exact_when_whole() {
        assert_eq!(show_bytes(0), "0 bytes");
        assert_eq!(show_bytes(1000), "1000 bytes");
        assert_eq!(show_bytes(4096), "4 KiB");
        assert_eq!(show_bytes(1 << 44), "16 TiB");
        assert_eq!(show_bytes(3 << 29), "1.5 GiB");
        assert_eq!(show_bytes(24_683_656 * 1024), "23.5 GiB");
        assert_eq!(show_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn naa_is_type_6() {
        let naa = parse_naa("0x6001405abcdef0123456789abcdef012").unwrap();
        assert_eq!(naa[0], 0x60);
        assert_eq!(naa[15], 0x12);
        assert_eq!(parse_naa("6001405ABCDEF0123456789ABCDEF012"), Ok(naa));
        assert!(parse_naa("0x5001405abcdef0123456789abcdef012")
            .unwrap_err()
            .contains("type 5"));
        assert!(parse_naa("0x6001405abcdef0").is_err());
        assert!(parse_naa("0x6001405abcdef0123456789abcdef01g").is_err());
    }

    #[test]
    fn lines_are_one_based() {
        let r = Reader::new("a\nbb\n\nc", None);
        assert_eq!(
            [
                r.line(0),
                r.line(1),
                r.line(2),
                r.line(4),
                r.line(5),
                r.line(6)
            ],
            [1, 1, 2, 2, 3, 4]
        );
    }

    #[test]
    fn embedded_default_is_valid_config() {
        let c = Config::embedded_default();
        assert_eq!(c.portals, vec!["127.0.0.1:3260".parse().unwrap()]);
        assert_eq!(check_iscsi_name(&c.targets[0].name), Ok(()));
        assert_eq!(
            c.targets[0].luns[0].store,
            StoreSpec::Memory {
                size_bytes: 1 << 30,
                overcommit: false,
            }
        );
    }
}
