//! Connections to Ceph clusters, one per (configuration file, client,
//! keyring) in the process, shared by every image opened through it.
//!
//! The cluster blocklists a client instance, not an image: once one image
//! learns that its connection was fenced, every image opened through it is
//! fenced, and the connection is never handed out again; the next image
//! opened gets a new connection, a new client instance the blocklist does
//! not name.

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::fence::Fence;
use crate::ffi::{self, Rados};
use crate::RbdError;

/// How to reach a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterSpec {
    /// The cluster's configuration file (`ceph.conf`): monitors, auth.
    pub conf: PathBuf,
    /// The client's id (`admin` for `client.admin`).
    pub id: String,
    /// The client's keyring, when the configuration file does not name it.
    pub keyring: Option<PathBuf>,
}

/// A connected cluster handle (`rados_t`).
pub(crate) struct Cluster {
    pub(crate) rados: Rados,
    /// What it was made from (counted in [`connections`] until shut down).
    spec: ClusterSpec,
    /// The cluster's fsid, which makes identities derived from an image
    /// unique across clusters.
    pub(crate) fsid: String,
    /// Raised when the cluster blocklisted this client; held by each image
    /// opened through it too, whose requests it ends.
    pub(crate) fence: Arc<Fence>,
}

impl Cluster {
    /// Whether the cluster blocklisted this client.
    pub(crate) fn is_fenced(&self) -> bool {
        self.fence.is_raised()
    }
}

// SAFETY: a rados_t is used from any thread (librados is thread-safe); it
// is shut down once, when the last image that uses it is closed.
unsafe impl Send for Cluster {}
// SAFETY: as for Send, shared as well as moved.
unsafe impl Sync for Cluster {}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(api) = ffi::api() {
            // SAFETY: connected by us, used by no image any more.
            unsafe { (api.rados_shutdown)(self.rados) };
        }
        let mut open = OPEN.lock_unpoisoned();
        if let Some(count) = open.as_mut().and_then(|o| o.get_mut(&self.spec)) {
            *count = count.saturating_sub(1);
        }
    }
}

/// Client instances made and not shut down yet, by how they reach their
/// cluster.
static OPEN: Mutex<Option<HashMap<ClusterSpec, usize>>> = Mutex::new(None);

/// How many client instances (`rados_t`) this process holds for `spec`:
/// the one images are opened through, and fenced ones whose images have
/// not closed yet (each holds its threads and sockets until then).
pub fn connections(spec: &ClusterSpec) -> usize {
    OPEN.lock_unpoisoned()
        .as_ref()
        .and_then(|o| o.get(spec).copied())
        .unwrap_or(0)
}

/// Options set on every connection, after the configuration file (so that
/// they win over it):
/// - no client-side cache: several gateways serve one image, and a cache
///   in one of them would return data another has overwritten (and would
///   acknowledge writes before they are in the cluster);
/// - discards that cover part of an object zero that part (librbd skips
///   them by default, leaving the data), so that UNMAP and WRITE SAME
///   with UNMAP read back as zeros, as the unit reports (LBPRZ);
/// - writes not copied by librbd (`rbd_disable_zero_copy_writes = false`):
///   a request's buffer stays untouched until its completion runs, which
///   librbd calls once it let go of the buffer (measured: -17% target CPU
///   per 256 KiB write);
/// - bounded waits: a cluster that does not answer fails the start, or a
///   command, within 30 s rather than librados's default of never (or 300 s
///   for the first connection).
const OPTIONS: &[(&str, &str)] = &[
    ("rbd_cache", "false"),
    ("rbd_skip_partial_discard", "false"),
    ("rbd_disable_zero_copy_writes", "false"),
    ("client_mount_timeout", "30"),
    ("rados_osd_op_timeout", "30"),
    ("rados_mon_op_timeout", "30"),
];

static CLUSTERS: Mutex<Option<HashMap<ClusterSpec, Weak<Cluster>>>> = Mutex::new(None);

/// The connection for `spec`: the live one if an image holds it and the
/// cluster has not fenced it, else a new one (which takes its place here;
/// the fenced one is shut down once the last image through it has closed).
pub(crate) fn connect(spec: &ClusterSpec) -> Result<Arc<Cluster>, RbdError> {
    let mut clusters = CLUSTERS.lock_unpoisoned();
    let clusters = clusters.get_or_insert_with(HashMap::new);
    let live = clusters.get(spec).and_then(Weak::upgrade);
    if let Some(cluster) = live.filter(|c| !c.is_fenced()) {
        return Ok(cluster);
    }
    clusters.retain(|_, weak| weak.strong_count() > 0);
    let cluster = Arc::new(open(spec)?);
    clusters.insert(spec.clone(), Arc::downgrade(&cluster));
    Ok(cluster)
}

fn open(spec: &ClusterSpec) -> Result<Cluster, RbdError> {
    let api = ffi::api().map_err(RbdError::Library)?;
    let failed = |step: &str, code: i32| RbdError::Cluster {
        conf: spec.conf.clone(),
        message: format!("{step}: {}", crate::errno_text(code)),
    };
    let name = c_string(&format!("client.{}", spec.id))?;
    let cluster_name = c_string("ceph")?;
    let mut rados: Rados = std::ptr::null_mut();
    // SAFETY: out-pointer to a handle; the strings outlive the call.
    let r = unsafe { (api.rados_create2)(&mut rados, cluster_name.as_ptr(), name.as_ptr(), 0) };
    if r < 0 {
        return Err(failed("rados_create2", r));
    }
    // From here the handle is shut down on every path by Cluster's Drop.
    *OPEN
        .lock_unpoisoned()
        .get_or_insert_with(HashMap::new)
        .entry(spec.clone())
        .or_default() += 1;
    let mut cluster = Cluster {
        rados,
        spec: spec.clone(),
        fsid: String::new(),
        fence: Arc::default(),
    };
    let conf = path_c_string(&spec.conf)?;
    // SAFETY: a created handle and a NUL-terminated path.
    let r = unsafe { (api.rados_conf_read_file)(rados, conf.as_ptr()) };
    if r < 0 {
        return Err(failed("reading the configuration file", r));
    }
    if let Some(keyring) = &spec.keyring {
        set_option(&cluster, "keyring", &keyring.to_string_lossy())
            .map_err(|r| failed("setting the keyring", r))?;
    }
    for (option, value) in OPTIONS {
        set_option(&cluster, option, value).map_err(|r| failed(option, r))?;
    }
    // SAFETY: a configured handle.
    let r = unsafe { (api.rados_connect)(rados) };
    if r < 0 {
        return Err(failed("connecting", r));
    }
    let mut fsid = [0 as c_char; 64];
    // SAFETY: the buffer's length is passed.
    let r = unsafe { (api.rados_cluster_fsid)(rados, fsid.as_mut_ptr(), fsid.len()) };
    if r < 0 {
        return Err(failed("reading the fsid", r));
    }
    cluster.fsid = crate::c_buffer_text(&fsid);
    Ok(cluster)
}

fn set_option(cluster: &Cluster, option: &str, value: &str) -> Result<(), i32> {
    let api = ffi::api().map_err(|_| -libc::ENOSYS)?;
    let (option, value) = (
        CString::new(option).map_err(|_| -libc::EINVAL)?,
        CString::new(value).map_err(|_| -libc::EINVAL)?,
    );
    // SAFETY: a created handle and NUL-terminated strings.
    let r = unsafe { (api.rados_conf_set)(cluster.rados, option.as_ptr(), value.as_ptr()) };
    if r < 0 {
        return Err(r);
    }
    Ok(())
}

pub(crate) fn c_string(text: &str) -> Result<CString, RbdError> {
    CString::new(text).map_err(|_| RbdError::Name(text.to_string()))
}

fn path_c_string(path: &Path) -> Result<CString, RbdError> {
    c_string(&path.to_string_lossy())
}
