//! LIO, the Linux kernel's iSCSI target, on a test bed's [`Host`] (issue
//! 14): configured through configfs (`/sys/kernel/config/target`) with
//! plain `mkdir`, `ln -s` and writes, because targetcli-fb, LIO's usual
//! front end, wants D-Bus, which a minimal test machine may not run.
//!
//! [`LioTarget::start`] serves one target name: LUN [`LIO_LUN`] a RAM disk
//! (`rd_mcp`), every initiator accepted without CHAP (LIO's "demo mode":
//! node ACLs generated on login), listening on the portals given, with the
//! case's iSCSI parameters written to the portal group's `param/` files
//! ([`params`]) before the group is enabled. [`LioTarget::stop`] takes it
//! all down again, in reverse order.
//!
//! Each phase is one shell script run on the host (`sh -c SCRIPT sh
//! ARGS...`), so that a configuration costs one SSH round trip, not one per
//! configfs file; the scripts are fixed text and everything that varies is
//! an argument, so no value is ever parsed as shell code. A failure names
//! the configfs path and the value written.
//!
//! How LIO negotiates what the knobs set (`iscsi_target_parameters.c`),
//! so that the value negotiated is the knob's whenever the initiator offers
//! the same ([`KnobSet`] makes isoe's initiator do so):
//!
//! - **Digests** are offered alone (`CRC32C` or `None`): LIO answers with
//!   the first value of the initiator's list that its own list holds.
//! - **ImmediateData** is the AND of both offers and **InitialR2T** the OR.
//! - **FirstBurstLength, MaxBurstLength, MaxConnections**: the smaller
//!   offer wins. LIO also lowers FirstBurstLength to MaxBurstLength when it
//!   is larger, so a first burst above the maximum burst cannot be had
//!   ([`unsupported`] says so).
//! - **MaxRecvDataSegmentLength** is what LIO declares for its own
//!   receiving; what it sends per PDU is the smaller of the initiator's
//!   declaration and LIO's own `MaxXmitDataSegmentLength`, which the knob
//!   sets too, so that both directions use it (as with tgt).
//!
//! A RAM disk takes all its memory when it is enabled, unlike tgt's sparse
//! file: size it for the host.
//!
//! The backstore is named after the target (`core/rd_mcp_<N>/isoe-<IQN>`,
//! with an HBA number `N` from a hash of the IQN), so that a configuration
//! a run that died left behind is found and removed by the next
//! [`LioTarget::start`] of the same target. Two labs serving the same IQN on
//! one host at once would take each other's target down: give each its own.
//! The module stays loaded and configfs's `target/iscsi` directory stays
//! after [`LioTarget::stop`]: other targets on the host may be using them.

use crate::host::Host;
use crate::knobs::KnobSet;
use crate::ssh::HostError;
use std::collections::BTreeSet;
use std::net::SocketAddr;

/// Where LIO's configfs tree lives.
pub const CONFIGFS_TARGET: &str = "/sys/kernel/config/target";

/// The LUN the RAM disk is served as.
pub const LIO_LUN: u16 = 0;

/// The target portal group tag: one group per target.
const TPGT: &str = "tpgt_1";

/// The smallest and largest data segment and burst lengths LIO takes
/// (RFC 7143 §13.12 to §13.14: 512 to 2^24 - 1).
const LENGTH_RANGE: std::ops::RangeInclusive<u32> = 512..=16_777_215;

/// The connections per session LIO takes (MaxConnections, 1 to 65535).
const CONNECTIONS_RANGE: std::ops::RangeInclusive<u32> = 1..=65_535;

/// LIO's MaxBurstLength when the knob is not set (`INITIAL_MAXBURSTLENGTH`).
pub const LIO_DEFAULT_MAX_BURST_LENGTH: u32 = 262_144;

/// The portal group attributes that make LIO accept every initiator
/// without CHAP: ACLs generated at login and kept, LUNs writable, no
/// authentication.
const DEMO_MODE: [(&str, &str); 4] = [
    ("attrib/authentication", "0"),
    ("attrib/generate_node_acls", "1"),
    ("attrib/cache_dynamic_acls", "1"),
    ("attrib/demo_mode_write_protect", "0"),
];

/// Helpers both scripts use. `first` keeps the first failure of a
/// teardown, which tries every step whatever failed before.
const COMMON: &str = r#"
c=/sys/kernel/config/target
first= more=0
# Writes $2 to configfs file $1. Not dash's printf: it reports every
# failed write as "I/O error", coreutils' printf names the errno.
put() {
    e=$( { env printf '%s' "$2" >"$1"; } 2>&1 ) || {
        echo "writing '$2' to $1: ${e##*: }"
        return 1
    }
}
# Runs a command of the teardown; a failure is kept, and the next step runs.
try() {
    if ! e=$("$@" 2>&1); then
        if [ -z "$first" ]; then first="$*: ${e##*: }"; else more=$((more + 1)); fi
    fi
}
try_put() {
    if ! e=$(put "$1" "$2"); then
        if [ -z "$first" ]; then first=$e; else more=$((more + 1)); fi
    fi
}
# Takes target $t and backstore $d (in HBA $h) down, whatever is there:
# portal groups disabled (which ends their sessions), portals, ACLs and
# LUNs removed, then the groups, the target and the backstore.
teardown() {
    if [ -d "$t" ]; then
        for g in "$t"/tpgt_*; do
            [ -d "$g" ] || continue
            [ "$(cat "$g/enable" 2>/dev/null)" = 0 ] || try_put "$g/enable" 0
            for np in "$g"/np/*; do
                [ -d "$np" ] && try rmdir "$np"
            done
            for acl in "$g"/acls/*; do
                [ -d "$acl" ] || continue
                for m in "$acl"/lun_*; do
                    [ -d "$m" ] || continue
                    for l in "$m"/*; do
                        [ -L "$l" ] && try rm "$l"
                    done
                    try rmdir "$m"
                done
                try rmdir "$acl"
            done
            for lun in "$g"/lun/lun_*; do
                [ -d "$lun" ] || continue
                for l in "$lun"/*; do
                    [ -L "$l" ] && try rm "$l"
                done
                try rmdir "$lun"
            done
            try rmdir "$g"
        done
        try rmdir "$t"
    fi
    if [ -d "$d" ]; then try rmdir "$d"; fi
    if [ -d "$h" ]; then try rmdir "$h"; fi
}
"#;

/// `sh -c START sh IQN HBA DEV SIZE NPORTALS PORTAL... FILE=VALUE...`:
/// loads LIO, removes a leftover of the same target, makes the backstore,
/// target, portal group, LUN (its link to the backstore may have any name:
/// `isoe`) and portals, writes each FILE (relative to
/// the portal group) and reads it back, then enables the group. Prints
/// `size BYTES` (the RAM disk rounded up to whole pages) and, when a
/// leftover was removed, `leftover`. Exits at the first failure, saying
/// what failed on stderr; removing what it made is the caller's.
const START: &str = r#"
set -u
iqn=$1 hba=$2 dev=$3 size=$4 nps=$5
shift 5
fail() { echo "$*" >&2; exit 1; }
mk() { e=$(mkdir "$1" 2>&1) || fail "mkdir $1: ${e##*: }"; }
e=$(modprobe iscsi_target_mod 2>&1) || fail "modprobe iscsi_target_mod: $e"
[ -d "$c" ] || fail "no $c after modprobe iscsi_target_mod (is configfs mounted?)"
# The fabric's directory is made on demand, and left: other targets may use it.
[ -d "$c/iscsi" ] || mk "$c/iscsi"
t=$c/iscsi/$iqn h=$c/core/$hba
d=$h/$dev g=$t/tpgt_1
if [ -e "$t" ] || [ -e "$d" ]; then
    teardown
    [ -z "$first" ] || fail "removing the leftover of a run that died: $first"
    echo leftover
fi
ps=$(getconf PAGESIZE) || fail "getconf PAGESIZE failed"
pages=$(( (size + ps - 1) / ps ))
[ "$pages" -le 2147483647 ] || fail "a RAM disk of $size bytes is more than rd_mcp's 2^31 - 1 pages"
[ -d "$h" ] || mk "$h"
mk "$d"
put "$d/control" "rd_pages=$pages" >&2 || exit 1
put "$d/enable" 1 >&2 || exit 1
echo "size $((pages * ps))"
mk "$t"
mk "$g"
mk "$g/lun/lun_0"
e=$(ln -s "$d" "$g/lun/lun_0/isoe" 2>&1) || fail "linking $g/lun/lun_0/isoe to $d: ${e##*: }"
i=0
while [ "$i" -lt "$nps" ]; do
    mk "$g/np/$1"
    shift
    i=$((i + 1))
done
for kv; do
    f=$g/${kv%%=*} v=${kv#*=}
    put "$f" "$v" >&2 || exit 1
    got=$(cat "$f") || fail "reading $f back failed"
    [ "$got" = "$v" ] || fail "$f reads '$got' after '$v' was written to it"
done
put "$g/enable" 1 >&2 || exit 1
"#;

/// `sh -c STOP sh IQN HBA DEV`: the teardown; the first failure (and how
/// many more there were) on stderr.
const STOP: &str = r#"
t=$c/iscsi/$1 h=$c/core/$2
d=$h/$3
teardown
if [ -n "$first" ]; then
    [ "$more" -eq 0 ] || first="$first (and $more more failures)"
    echo "$first" >&2
    exit 1
fi
"#;

/// `sh -c CHECK sh`: why LIO cannot run here, or nothing. The `iscsi`
/// fabric directory appears only when made (LIO then loads the fabric), so
/// a host where it cannot be made cannot serve.
const CHECK: &str = r#"
[ "$(id -u)" = 0 ] || { echo "not root (configfs writes need it)"; exit 0; }
e=$(modprobe iscsi_target_mod 2>&1) || { echo "modprobe iscsi_target_mod failed: $e"; exit 0; }
[ -d "$c" ] || { echo "no $c after modprobe iscsi_target_mod (is configfs mounted?)"; exit 0; }
[ -d "$c/iscsi" ] || e=$(mkdir "$c/iscsi" 2>&1) || echo "mkdir $c/iscsi: ${e##*: }"
"#;

/// LIO serving one target on a host; taken down by [`LioTarget::stop`],
/// or on Drop.
#[derive(Debug)]
pub struct LioTarget<'h> {
    host: &'h Host,
    iqn: String,
    backstore: Backstore,
    size_bytes: u64,
    /// Set once the configuration is gone (or [`LioTarget::stop`] tried).
    stopped: bool,
}

impl<'h> LioTarget<'h> {
    /// Serves `iqn` on `host` through configfs: LUN [`LIO_LUN`] a RAM disk
    /// (`rd_mcp`) of `size_bytes` (rounded up to whole pages), listening on
    /// each of `listen`, no CHAP, any initiator, with `knobs`' iSCSI
    /// parameters ([`params`]) written before the portal group is enabled,
    /// so the negotiated value is the knob's. Loads `iscsi_target_mod`
    /// first; a leftover configuration of the same target (from a run that
    /// died) is removed first. On failure, what was made is removed again.
    pub fn start(
        host: &'h Host,
        iqn: &str,
        size_bytes: u64,
        listen: &[SocketAddr],
        knobs: &KnobSet,
    ) -> Result<LioTarget<'h>, HostError> {
        let refuse = |why: String| HostError::Failed {
            host: host.name(),
            command: format!("starting LIO target {iqn}"),
            status: "not run".into(),
            stderr: why,
        };
        check_iqn(iqn).map_err(|e| refuse(e.to_string()))?;
        if size_bytes == 0 {
            return Err(refuse("a RAM disk of 0 bytes".into()));
        }
        if listen.is_empty() {
            return Err(refuse("no portal to listen on".into()));
        }
        let backstore = Backstore::for_target(iqn);
        let mut args = vec![
            iqn.to_owned(),
            backstore.hba.clone(),
            backstore.device.clone(),
            size_bytes.to_string(),
            listen.len().to_string(),
        ];
        args.extend(listen.iter().map(|a| portal_dir(*a)));
        args.extend(settings(knobs).into_iter().map(|(f, v)| format!("{f}={v}")));
        let mut target = LioTarget {
            host,
            iqn: iqn.to_owned(),
            backstore,
            size_bytes: 0,
            stopped: false,
        };
        // On an error from here on, `target` drops and tears down.
        let out = run_script(host, &format!("configuring LIO target {iqn}"), START, &args)?;
        for line in out.lines() {
            if line == "leftover" {
                eprintln!(
                    "isoe-lab: removed LIO target {iqn} left on {} by a run that died",
                    host.name()
                );
            } else if let Some(n) = line.strip_prefix("size ") {
                target.size_bytes = n.parse().unwrap_or(0);
            }
        }
        Ok(target)
    }

    /// The LUN initiators should address: [`LIO_LUN`].
    pub fn lun(&self) -> u16 {
        LIO_LUN
    }

    /// The target's name.
    pub fn iqn(&self) -> &str {
        &self.iqn
    }

    /// The RAM disk's size: the size asked for, rounded up to the host's pages.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The portal group's configfs directory (its `param/` files hold the
    /// parameters LIO offers).
    pub fn tpg_dir(&self) -> String {
        format!("{CONFIGFS_TARGET}/iscsi/{}/{TPGT}", self.iqn)
    }

    /// Tears the configuration down in reverse order: the portal group
    /// disabled (ending its sessions), portals removed, the LUN unlinked and
    /// removed, then the group, the target and the backstore. Every step is
    /// tried; the first failure is returned.
    pub fn stop(mut self) -> Result<(), HostError> {
        self.stopped = true;
        teardown(self.host, &self.iqn, &self.backstore)
    }
}

impl Drop for LioTarget<'_> {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        if let Err(e) = teardown(self.host, &self.iqn, &self.backstore) {
            eprintln!("isoe-lab: taking LIO target {} down: {e}", self.iqn);
        }
    }
}

/// Why LIO is not available on `host` (not root, the module missing, no
/// configfs target directory after loading it), or None. Loads
/// `iscsi_target_mod` and makes LIO's `iscsi` directory in configfs to
/// find out, as [`LioTarget::start`] would.
pub fn unavailable(host: &Host) -> Option<String> {
    match run_script(host, "checking for LIO", CHECK, &[]) {
        Ok(out) if out.trim().is_empty() => None,
        Ok(out) => Some(format!("LIO on {}: {}", host.name(), out.trim())),
        Err(e) => Some(format!("LIO on {}: {e}", host.name())),
    }
}

/// The knobs of `knobs` LIO cannot apply, by [`KnobSet::describe`] name,
/// with the reason: isoe's datapath knobs, lengths and connection counts
/// outside what LIO takes, and a first burst above the maximum burst. The
/// knobs LIO does not serve (link, socket and initiator knobs) are not
/// its to report. [`params`] leaves out what is listed here.
pub fn unsupported(knobs: &KnobSet) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut no = |key: &str, why: String| out.push((key.to_owned(), why));
    for (key, set) in [
        ("batching", knobs.batching.is_some()),
        ("crc", knobs.crc.is_some()),
        ("buffer_pool", knobs.buffer_pool.is_some()),
    ] {
        if set {
            no(
                key,
                "an isoe target datapath option; the target is LIO".into(),
            );
        }
    }
    for (key, param, v) in [
        (
            "max_recv_data_segment_length",
            "MaxRecvDataSegmentLength",
            knobs.max_recv_data_segment_length,
        ),
        (
            "first_burst_length",
            "FirstBurstLength",
            knobs.first_burst_length,
        ),
        ("max_burst_length", "MaxBurstLength", knobs.max_burst_length),
    ] {
        if v.is_some_and(|v| !LENGTH_RANGE.contains(&v)) {
            no(
                key,
                format!(
                    "LIO takes {param} from {} to {} bytes",
                    LENGTH_RANGE.start(),
                    LENGTH_RANGE.end()
                ),
            );
        }
    }
    if let Some(first) = knobs
        .first_burst_length
        .filter(|v| LENGTH_RANGE.contains(v))
    {
        let max = knobs
            .max_burst_length
            .filter(|v| LENGTH_RANGE.contains(v))
            .unwrap_or(LIO_DEFAULT_MAX_BURST_LENGTH);
        if first > max {
            no(
                "first_burst_length",
                format!("LIO lowers FirstBurstLength to MaxBurstLength ({max})"),
            );
        }
    }
    if knobs
        .connections
        .is_some_and(|n| !CONNECTIONS_RANGE.contains(&n))
    {
        no(
            "connections",
            format!(
                "LIO takes MaxConnections from {} to {}",
                CONNECTIONS_RANGE.start(),
                CONNECTIONS_RANGE.end()
            ),
        );
    }
    out
}

/// The portal group's `param/` files and the values that make LIO offer
/// what `knobs` asks for (see the module doc), in a fixed order; a knob
/// [`unsupported`] lists is left out, so LIO keeps its default for it.
pub fn params(knobs: &KnobSet) -> Vec<(&'static str, String)> {
    let skipped: BTreeSet<String> = unsupported(knobs).into_iter().map(|(k, _)| k).collect();
    let applies = |key: &str| !skipped.contains(key);
    let digest = |on: bool| if on { "CRC32C" } else { "None" }.to_owned();
    let yes_no = |on: bool| if on { "Yes" } else { "No" }.to_owned();
    let mut p = Vec::new();
    if let Some(v) = knobs.header_digest {
        p.push(("param/HeaderDigest", digest(v)));
    }
    if let Some(v) = knobs.data_digest {
        p.push(("param/DataDigest", digest(v)));
    }
    if let Some(v) = knobs.immediate_data {
        p.push(("param/ImmediateData", yes_no(v)));
    }
    if let Some(v) = knobs.initial_r2t {
        p.push(("param/InitialR2T", yes_no(v)));
    }
    if let Some(n) = knobs
        .max_recv_data_segment_length
        .filter(|_| applies("max_recv_data_segment_length"))
    {
        p.push(("param/MaxRecvDataSegmentLength", n.to_string()));
        p.push(("param/MaxXmitDataSegmentLength", n.to_string()));
    }
    if let Some(n) = knobs
        .first_burst_length
        .filter(|_| applies("first_burst_length"))
    {
        p.push(("param/FirstBurstLength", n.to_string()));
    }
    if let Some(n) = knobs
        .max_burst_length
        .filter(|_| applies("max_burst_length"))
    {
        p.push(("param/MaxBurstLength", n.to_string()));
    }
    if let Some(n) = knobs.connections.filter(|_| applies("connections")) {
        p.push(("param/MaxConnections", n.to_string()));
    }
    p
}

/// Everything written under the portal group before it is enabled: the
/// demo-mode attributes, then [`params`].
pub fn settings(knobs: &KnobSet) -> Vec<(&'static str, String)> {
    DEMO_MODE
        .iter()
        .map(|&(f, v)| (f, v.to_owned()))
        .chain(params(knobs))
        .collect()
}

/// The `np/` directory name of a portal: `ADDR:PORT`, an IPv6 address in
/// brackets. A scope id is not kept: LIO does not take one.
pub fn portal_dir(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
    }
}

/// Why a name cannot name an LIO target ([`check_iqn`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IqnError {
    /// Not an `iqn.`, `eui.` or `naa.` name.
    #[error("{0:?} is not an iqn., eui. or naa. name")]
    NotAName(String),
    /// More than 223 bytes.
    #[error("{0:?} is longer than 223 bytes")]
    TooLong(String),
    /// A `/` or white space, which a configfs directory cannot hold.
    #[error("{0:?} contains '/' or white space")]
    BadCharacter(String),
}

/// Whether `iqn` can name a configfs directory and LIO would take it: an
/// `iqn.`, `eui.` or `naa.` name, at most 223 bytes, no `/` or white space.
pub fn check_iqn(iqn: &str) -> Result<(), IqnError> {
    if !["iqn.", "eui.", "naa."].iter().any(|p| iqn.starts_with(p)) {
        return Err(IqnError::NotAName(iqn.to_owned()));
    }
    if iqn.len() > 223 {
        return Err(IqnError::TooLong(iqn.to_owned()));
    }
    if iqn.contains('/') || iqn.chars().any(char::is_whitespace) {
        return Err(IqnError::BadCharacter(iqn.to_owned()));
    }
    Ok(())
}

/// Where a target's RAM disk lives in configfs: `core/HBA/DEVICE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backstore {
    /// `rd_mcp_N`: an HBA of its own, so that removing it never races
    /// another target's.
    pub hba: String,
    /// `isoe-IQN`: named after the target, so a leftover is recognised.
    pub device: String,
}

impl Backstore {
    /// The backstore of target `iqn`, the same on every run.
    pub fn for_target(iqn: &str) -> Backstore {
        // FNV-1a: stable across runs and builds, unlike std's hasher.
        let hash = iqn.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        Backstore {
            hba: format!("rd_mcp_{hash}"),
            device: format!("isoe-{iqn}"),
        }
    }
}

fn teardown(host: &Host, iqn: &str, backstore: &Backstore) -> Result<(), HostError> {
    run_script(
        host,
        &format!("taking LIO target {iqn} down"),
        STOP,
        &[
            iqn.to_owned(),
            backstore.hba.clone(),
            backstore.device.clone(),
        ],
    )
    .map(|_| ())
}

/// Runs `script` (after [`COMMON`]) with `args` on `host`; an error names
/// the script by `what` rather than by its text.
fn run_script(host: &Host, what: &str, script: &str, args: &[String]) -> Result<String, HostError> {
    let text = format!("{COMMON}{script}");
    let mut argv = vec!["sh", "-c", &text, "sh"];
    argv.extend(args.iter().map(String::as_str));
    host.run(&argv).map_err(|e| match e {
        HostError::Failed {
            host,
            status,
            stderr,
            ..
        } => HostError::Failed {
            host,
            command: what.to_owned(),
            status,
            stderr,
        },
        HostError::Io { source, .. } => HostError::Io {
            host: format!("{} {what}", host.name()),
            source,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::CrcImpl;
    use std::process::Command;

    fn pairs(v: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        v.iter().map(|&(f, v)| (f, v.to_owned())).collect()
    }

    #[test]
    fn every_iscsi_knob_reaches_its_param_file() {
        let knobs = KnobSet {
            header_digest: Some(true),
            data_digest: Some(false),
            immediate_data: Some(false),
            initial_r2t: Some(true),
            max_recv_data_segment_length: Some(65_536),
            first_burst_length: Some(65_536),
            max_burst_length: Some(524_288),
            connections: Some(2),
            // Not LIO's: the initiator's, the topology's or isoe's target's.
            nodelay: Some(false),
            workers: Some(4),
            batching: Some(false),
            ..KnobSet::default()
        };
        assert_eq!(
            params(&knobs),
            pairs(&[
                ("param/HeaderDigest", "CRC32C"),
                ("param/DataDigest", "None"),
                ("param/ImmediateData", "No"),
                ("param/InitialR2T", "Yes"),
                ("param/MaxRecvDataSegmentLength", "65536"),
                ("param/MaxXmitDataSegmentLength", "65536"),
                ("param/FirstBurstLength", "65536"),
                ("param/MaxBurstLength", "524288"),
                ("param/MaxConnections", "2"),
            ])
        );
        assert!(params(&KnobSet::default()).is_empty());
        let flipped = KnobSet {
            header_digest: Some(false),
            immediate_data: Some(true),
            initial_r2t: Some(false),
            connections: Some(1),
            ..KnobSet::default()
        };
        assert_eq!(
            params(&flipped),
            pairs(&[
                ("param/HeaderDigest", "None"),
                ("param/ImmediateData", "Yes"),
                ("param/InitialR2T", "No"),
                ("param/MaxConnections", "1"),
            ])
        );
    }

    #[test]
    fn settings_are_demo_mode_then_the_parameters() {
        let knobs = KnobSet {
            header_digest: Some(true),
            ..KnobSet::default()
        };
        assert_eq!(
            settings(&knobs),
            pairs(&[
                ("attrib/authentication", "0"),
                ("attrib/generate_node_acls", "1"),
                ("attrib/cache_dynamic_acls", "1"),
                ("attrib/demo_mode_write_protect", "0"),
                ("param/HeaderDigest", "CRC32C"),
            ])
        );
    }

    #[test]
    fn unsupported_names_what_lio_cannot_take() {
        let datapath = KnobSet {
            batching: Some(true),
            crc: Some(CrcImpl::Software),
            buffer_pool: Some(false),
            ..KnobSet::default()
        };
        let got = unsupported(&datapath);
        assert_eq!(
            got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["batching", "crc", "buffer_pool"]
        );
        assert!(got
            .iter()
            .all(|(_, why)| why == "an isoe target datapath option; the target is LIO"));

        let out_of_range = KnobSet {
            max_recv_data_segment_length: Some(16 << 20),
            first_burst_length: Some(256),
            max_burst_length: Some(16_777_215),
            connections: Some(0),
            ..KnobSet::default()
        };
        let got = unsupported(&out_of_range);
        assert_eq!(
            got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            [
                "max_recv_data_segment_length",
                "first_burst_length",
                "connections"
            ]
        );
        assert_eq!(
            got[0].1,
            "LIO takes MaxRecvDataSegmentLength from 512 to 16777215 bytes"
        );
        // What is listed is not written; the rest is.
        assert_eq!(
            params(&out_of_range),
            pairs(&[("param/MaxBurstLength", "16777215")])
        );

        // A first burst above the maximum burst: LIO would lower it.
        let above = KnobSet {
            first_burst_length: Some(1 << 20),
            max_burst_length: Some(1 << 19),
            ..KnobSet::default()
        };
        assert_eq!(
            unsupported(&above),
            [(
                "first_burst_length".to_owned(),
                "LIO lowers FirstBurstLength to MaxBurstLength (524288)".to_owned()
            )]
        );
        // Against LIO's default maximum burst when the knob leaves it.
        let alone = KnobSet {
            first_burst_length: Some(1 << 20),
            ..KnobSet::default()
        };
        assert_eq!(unsupported(&alone).len(), 1);
        assert!(params(&alone).is_empty());
        let fits = KnobSet {
            first_burst_length: Some(LIO_DEFAULT_MAX_BURST_LENGTH),
            max_recv_data_segment_length: Some(512),
            connections: Some(65_535),
            header_digest: Some(true),
            nodelay: Some(false),
            rcvbuf_bytes: Some(65_536),
            ..KnobSet::default()
        };
        assert!(unsupported(&fits).is_empty());
        assert!(unsupported(&KnobSet::default()).is_empty());
    }

    #[test]
    fn portals_are_named_as_lio_parses_them() {
        assert_eq!(portal_dir("0.0.0.0:3260".parse().unwrap()), "0.0.0.0:3260");
        assert_eq!(
            portal_dir("10.99.1.2:3261".parse().unwrap()),
            "10.99.1.2:3261"
        );
        assert_eq!(portal_dir("[::]:3260".parse().unwrap()), "[::]:3260");
        assert_eq!(
            portal_dir("[fe80::1%2]:3260".parse().unwrap()),
            "[fe80::1]:3260"
        );
    }

    #[test]
    fn target_names_that_cannot_be_a_directory_are_refused() {
        assert!(check_iqn("iqn.2026-11.io.isoe:lio").is_ok());
        assert!(check_iqn("naa.6001405abcdef012").is_ok());
        for bad in [
            "",
            "lio",
            "iqn.2026-11.io.isoe:a/b",
            "iqn.2026-11.io.isoe:a b",
            &format!("iqn.{}", "x".repeat(220)),
        ] {
            assert!(check_iqn(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_target_has_the_same_backstore_every_run() {
        let a = Backstore::for_target("iqn.2026-11.io.isoe:lio");
        assert_eq!(a, Backstore::for_target("iqn.2026-11.io.isoe:lio"));
        assert_eq!(a.device, "isoe-iqn.2026-11.io.isoe:lio");
        // rd_mcp_<decimal>: the kernel reads the number with base 0, so it
        // must not start with a 0 (octal) unless it is 0.
        let n = a.hba.strip_prefix("rd_mcp_").unwrap();
        assert!(n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0')));
        assert_ne!(a.hba, Backstore::for_target("iqn.2026-11.io.isoe:lab").hba);
    }

    #[test]
    fn the_scripts_are_valid_sh() {
        for script in [START, STOP, CHECK] {
            let out = Command::new("sh")
                .args(["-n", "-c", &format!("{COMMON}{script}")])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn refusals_come_before_the_host_is_asked() {
        // An SSH host that does not exist: any command would fail with 255.
        let host = Host::parse(
            "ssh://nobody@192.0.2.1:9",
            None,
            std::path::Path::new("/nonexistent"),
        )
        .unwrap();
        let listen = ["0.0.0.0:3260".parse().unwrap()];
        let knobs = KnobSet::default();
        for (iqn, size, listen, why) in [
            ("lio", 1 << 20, &listen[..], "not an iqn."),
            ("iqn.2026-11.io.isoe:lio", 0, &listen[..], "0 bytes"),
            ("iqn.2026-11.io.isoe:lio", 1 << 20, &[][..], "no portal"),
        ] {
            match LioTarget::start(&host, iqn, size, listen, &knobs) {
                Err(HostError::Failed { stderr, status, .. }) => {
                    assert_eq!(status, "not run");
                    assert!(stderr.contains(why), "{stderr}");
                }
                other => panic!("{iqn} {size}: {other:?}"),
            }
        }
    }
}
