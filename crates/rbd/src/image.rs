//! An RBD image as a store: blocking calls for the rare operations, and
//! librbd's asynchronous reads, writes and flushes for the datapath.

use isoe_sync::MutexExt;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isoe_store::{AsyncStore, Extent, Io, IoDone, IoKind, Store, StoreError};

use crate::cluster::{self, c_string, Cluster, ClusterSpec};
use crate::fence::{Fence, Member};
use crate::ffi::{self, Api, IoCtx};
use crate::RbdError;

/// Which image, in which cluster, and how to make it if it is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbdSpec {
    /// How to reach the cluster.
    pub cluster: ClusterSpec,
    /// The pool.
    pub pool: String,
    /// The RADOS namespace in the pool, if any.
    pub namespace: Option<String>,
    /// The image's name.
    pub image: String,
    /// Creates the image with this size when it does not exist; an
    /// existing image is served at its own size.
    pub create_bytes: Option<u64>,
}

impl RbdSpec {
    /// Splits `pool/image` or `pool/namespace/image`.
    pub fn parse_name(name: &str) -> Result<(String, Option<String>, String), String> {
        let parts: Vec<&str> = name.split('/').collect();
        let (pool, namespace, image) = match parts.as_slice() {
            [pool, image] => (*pool, None, *image),
            [pool, namespace, image] => (*pool, Some(*namespace), *image),
            _ => {
                return Err(format!(
                    "expected \"pool/image\" or \"pool/namespace/image\", found {name:?}"
                ))
            }
        };
        if [pool, image]
            .iter()
            .chain(namespace.iter())
            .any(|p| p.is_empty())
        {
            return Err(format!(
                "an empty pool, namespace or image name in {name:?}"
            ));
        }
        if image.contains('@') {
            return Err(format!(
                "{name:?} names a snapshot; isoe serves images, not snapshots"
            ));
        }
        if name.contains('\0') {
            return Err(format!("{name:?} holds a NUL character"));
        }
        Ok((
            pool.to_string(),
            namespace.map(str::to_string),
            image.to_string(),
        ))
    }

    /// `pool/image` or `pool/namespace/image`.
    pub fn name(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{}/{namespace}/{}", self.pool, self.image),
            None => format!("{}/{}", self.pool, self.image),
        }
    }
}

/// An open RBD image.
pub struct RbdStore {
    /// What it was opened from, to open it again ([`RbdStore::reopen`]).
    spec: RbdSpec,
    api: &'static Api,
    image: ffi::Image,
    ioctx: IoCtx,
    /// Keeps the connection up while the image is open.
    cluster: Arc<Cluster>,
    pool: String,
    namespace: Option<String>,
    image_id: String,
    name: String,
    size_bytes: u64,
    /// `fsid/pool id/namespace/image id`: the same from every process that
    /// opens this image, different for any other image anywhere.
    identity: String,
    /// Requests under way, and whether the cluster fenced this client.
    requests: Arc<Requests>,
}

/// What a store's requests share with it.
pub(crate) struct Requests {
    /// The client's fence, raised when this image learns of a blocklist:
    /// the cluster fenced the client, so every image through it.
    fence: Arc<Fence>,
    /// Asynchronous requests librbd has and has not called back; the image
    /// closes only when none is.
    in_flight: AtomicUsize,
    /// The cluster refused a call with ESHUTDOWN: this client was
    /// blocklisted (another gateway broke its lock), and no call through
    /// it will succeed again.
    fenced: AtomicBool,
    /// The completion of each request not answered yet, by id: taken by
    /// librbd's callback, or by [`Requests::fence`], which answers them
    /// all at once (librbd may hold a fenced client's writes forever).
    waiting: Mutex<HashMap<u64, (IoKind, IoDone)>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requests")
            .field("in_flight", &self.in_flight)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

/// The librbd call of a request, and where it starts.
fn op_of(kind: IoKind) -> (&'static str, u64) {
    match kind {
        IoKind::Read { offset, .. } => ("rbd_aio_read", offset),
        IoKind::Write { offset, .. } => ("rbd_aio_write", offset),
        IoKind::Flush => ("rbd_aio_flush", 0),
    }
}

/// What a fenced client's requests end with.
fn fenced_error(op: &str, offset: u64) -> StoreError {
    StoreError::Unavailable {
        what: format!("{op} at offset {offset}"),
        message: "this client was fenced (blocklisted) by the cluster".into(),
    }
}

impl Requests {
    /// The requests of an image opened through `cluster`.
    fn new(cluster: &Arc<Cluster>) -> Arc<Requests> {
        let requests = Arc::new(Requests {
            fence: Arc::clone(&cluster.fence),
            in_flight: AtomicUsize::new(0),
            fenced: AtomicBool::new(false),
            waiting: Mutex::default(),
            next_id: AtomicU64::new(0),
        });
        cluster.fence.enroll(requests.clone());
        requests
    }

    /// The error of a call that returned `r`; ESHUTDOWN fences the store.
    fn failed(&self, op: &'static str, offset: u64, r: isize) -> StoreError {
        if r == -(libc::ESHUTDOWN as isize) {
            self.fence();
            return fenced_error(op, offset);
        }
        errno_error(op, offset, r)
    }

    /// The cluster blocklisted this client: every image opened through
    /// it is fenced ([`Fence::raise`], [`Member::end_all`]).
    pub(crate) fn fence(&self) {
        self.fence.raise();
    }

    fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// Keeps `done` until the request `id` is answered.
    fn hold(&self, id: u64, kind: IoKind, done: IoDone) {
        self.waiting.lock_unpoisoned().insert(id, (kind, done));
    }

    /// The completion of request `id`, unless it was answered already.
    fn take(&self, id: u64) -> Option<IoDone> {
        self.waiting
            .lock_unpoisoned()
            .remove(&id)
            .map(|(_, done)| done)
    }
}

impl Member for Requests {
    /// Nothing this image sends lands any more: every request not answered
    /// yet is answered now as unavailable (its buffer stays with librbd
    /// until librbd lets go of it), and later ones are refused at once.
    fn end_all(&self) {
        if !self.fenced.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "the cluster fenced (blocklisted) this client: its requests end as unavailable"
            );
        }
        let waiting: Vec<(IoKind, IoDone)> = self
            .waiting
            .lock_unpoisoned()
            .drain()
            .map(|(_, request)| request)
            .collect();
        for (kind, done) in waiting {
            let (op, offset) = op_of(kind);
            let buffer = Vec::new();
            done(Io { kind, buffer }, Err(fenced_error(op, offset)));
        }
    }
}

// SAFETY: librbd's image handles are used from any number of threads at
// once (its API is thread-safe); the handle is closed once, in Drop, after
// every request on it ended.
unsafe impl Send for RbdStore {}
// SAFETY: as for Send, shared as well as moved.
unsafe impl Sync for RbdStore {}

impl std::fmt::Debug for RbdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbdStore")
            .field("name", &self.name)
            .field("size_bytes", &self.size_bytes)
            .finish_non_exhaustive()
    }
}

impl RbdStore {
    /// Connects (or shares the process's connection) and opens the image,
    /// creating it when it is missing and `spec.create_bytes` is set.
    pub fn open(spec: &RbdSpec) -> Result<RbdStore, RbdError> {
        let api = ffi::api().map_err(RbdError::Library)?;
        let cluster = cluster::connect(&spec.cluster)?;
        let name = spec.name();
        let failed = |step: &str, code: i32| RbdError::Image {
            name: name.clone(),
            message: format!("{step}: {}", crate::errno_text(code)),
        };
        let pool = c_string(&spec.pool)?;
        let mut ioctx: IoCtx = std::ptr::null_mut();
        // SAFETY: a connected cluster, a NUL-terminated name, an out-pointer.
        let r = unsafe { (api.rados_ioctx_create)(cluster.rados, pool.as_ptr(), &mut ioctx) };
        if r < 0 {
            return Err(failed(&format!("pool {:?}", spec.pool), r));
        }
        let ioctx = IoCtxGuard { api, ioctx };
        if let Some(namespace) = &spec.namespace {
            let namespace = c_string(namespace)?;
            // SAFETY: an open ioctx and a NUL-terminated name (copied).
            unsafe { (api.rados_ioctx_set_namespace)(ioctx.ioctx, namespace.as_ptr()) };
        }
        let image_name = c_string(&spec.image)?;
        let mut image: ffi::Image = std::ptr::null_mut();
        // SAFETY: an open ioctx, a NUL-terminated name, an out-pointer, no snapshot.
        let open = |image: &mut ffi::Image| unsafe {
            (api.rbd_open)(ioctx.ioctx, image_name.as_ptr(), image, std::ptr::null())
        };
        let mut r = open(&mut image);
        if r == -libc::ENOENT {
            let Some(size) = spec.create_bytes else {
                return Err(RbdError::Image {
                    name,
                    message: "it does not exist and no size was given to create it".into(),
                });
            };
            let mut order: c_int = 0;
            // SAFETY: as above; order 0 asks for the default object size.
            let c = unsafe { (api.rbd_create)(ioctx.ioctx, image_name.as_ptr(), size, &mut order) };
            if c < 0 && c != -libc::EEXIST {
                return Err(failed("creating it", c));
            }
            tracing::info!(image = %name, size_bytes = size, "created the RBD image");
            r = open(&mut image);
        }
        if r < 0 {
            return Err(failed("opening it", r));
        }
        let mut store = RbdStore {
            spec: spec.clone(),
            api,
            image,
            ioctx: ioctx.into_raw(),
            cluster: Arc::clone(&cluster),
            pool: spec.pool.clone(),
            namespace: spec.namespace.clone(),
            image_id: String::new(),
            name: name.clone(),
            size_bytes: 0,
            identity: String::new(),
            requests: Requests::new(&cluster),
        };
        // From here Drop closes the image and the ioctx.
        let mut size = 0u64;
        // SAFETY: an open image.
        let r = unsafe { (api.rbd_get_size)(store.image, &mut size) };
        if r < 0 {
            return Err(failed("reading its size", r));
        }
        let mut id = [0 as c_char; 64];
        // SAFETY: the buffer's length is passed.
        let r = unsafe { (api.rbd_get_id)(store.image, id.as_mut_ptr(), id.len()) };
        if r < 0 {
            return Err(failed("reading its id (a format 1 image?)", r));
        }
        // SAFETY: an open ioctx.
        let pool_id = unsafe { (api.rados_ioctx_get_id)(store.ioctx) };
        store.size_bytes = size;
        store.image_id = crate::c_buffer_text(&id);
        store.identity = format!(
            "{}/{pool_id}/{}/{}",
            cluster.fsid,
            spec.namespace.as_deref().unwrap_or(""),
            store.image_id
        );
        Ok(store)
    }

    /// Whether the cluster fenced this client (blocklisted it when another
    /// gateway took the image over): nothing through it lands any more.
    pub fn is_fenced(&self) -> bool {
        self.requests.is_fenced()
    }

    /// The same image opened again, through a connection the cluster has
    /// not fenced (a new one when this image's was): how a fenced gateway
    /// serves again. Never creates it: an image removed meanwhile stays
    /// removed.
    pub fn reopen(&self) -> Result<RbdStore, RbdError> {
        RbdStore::open(&RbdSpec {
            create_bytes: None,
            ..self.spec.clone()
        })
    }

    /// What this store's requests share, for the image's channel, which
    /// may learn of a fence first.
    pub(crate) fn requests(&self) -> &Arc<Requests> {
        &self.requests
    }

    /// `pool/image` or `pool/namespace/image`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this handle holds the image's exclusive lock, which librbd
    /// passes to whichever handle writes (asking the holder to release
    /// it, or breaking the lock of one that died and blocklisting it).
    /// Asks the cluster (an OSD round trip).
    pub fn is_lock_owner(&self) -> Result<bool, String> {
        let mut owner: c_int = 0;
        // SAFETY: an open image and an out-pointer.
        let r = unsafe { (self.api.rbd_is_exclusive_lock_owner)(self.image, &mut owner) };
        if r < 0 {
            return Err(format!(
                "rbd image {}: is_exclusive_lock_owner: {}",
                self.name,
                crate::errno_text(r)
            ));
        }
        Ok(owner != 0)
    }

    /// Takes the image's exclusive lock the way a write does (the holder
    /// is asked to release it; a dead one's is broken): by a write that
    /// changes nothing, a compare-and-write of the first sector with its
    /// own content, atomic in the cluster, so that no other writer's data
    /// can be overwritten (done again if the sector changed between the
    /// read and the compare). librbd keeps managing the lock as before: a
    /// write through another handle takes it back. (Maintenance calls such
    /// as metadata changes do not move the lock: librbd hands them to the
    /// holder.) The first sector counts as written afterwards.
    pub fn take_lock(&self) -> Result<(), String> {
        let failed = |what: &str| format!("rbd image {}: taking the lock: {what}", self.name);
        let len = COMPARE_AND_WRITE_BYTES.min(self.size_bytes) as usize;
        let mut sector = vec![0u8; len];
        for _ in 0..8 {
            self.read_at(0, &mut sector)
                .map_err(|e| failed(&e.to_string()))?;
            match Store::compare_and_write(self, 0, &sector, &sector) {
                Some(Ok(None)) => return Ok(()),
                Some(Ok(Some(_))) => continue,
                Some(Err(e)) => return Err(failed(&e.to_string())),
                None => return Err(failed("the first sector cannot be compared and written")),
            }
        }
        Err(failed("the first sector kept changing"))
    }

    /// The connection, pool, namespace and image id, for objects kept
    /// beside the image.
    pub(crate) fn location(&self) -> (&Arc<Cluster>, &str, Option<&str>, &str) {
        (
            &self.cluster,
            &self.pool,
            self.namespace.as_deref(),
            &self.image_id,
        )
    }

    /// Refuses a range outside the image, and any call once the client
    /// is fenced (librbd may wait for good on a fenced client's calls).
    fn check(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        if self.requests.is_fenced() {
            return Err(fenced_error("rbd", offset));
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.size_bytes => Ok(()),
            _ => Err(StoreError::OutOfRange {
                offset,
                len,
                size: self.size_bytes,
            }),
        }
    }

    /// Runs `call` on ranges of at most 1 GiB: librbd returns the length
    /// done in an `int`, which a longer range overflows.
    fn in_pieces(
        &self,
        op: &'static str,
        offset: u64,
        len: u64,
        call: impl Fn(u64, u64) -> isize,
    ) -> Result<(), StoreError> {
        const PIECE: u64 = 1 << 30;
        self.check(offset, len)?;
        let mut done = 0;
        while done < len {
            let piece = (len - done).min(PIECE);
            let r = call(offset + done, piece);
            if r < 0 {
                return Err(self.requests.failed(op, offset + done, r));
            }
            done += piece;
        }
        Ok(())
    }

    fn start(&self, io: Io, done: IoDone) -> Result<(), (Io, IoDone, StoreError)> {
        let api = self.api;
        let (op, offset) = op_of(io.kind);
        let len = match io.kind {
            IoKind::Read { len, .. } => len,
            IoKind::Write { .. } => io.buffer.len(),
            IoKind::Flush => 0,
        };
        if let Err(error) = self.check(offset, len as u64) {
            return Err((io, done, error));
        }
        let id = self.requests.next_id.fetch_add(1, Ordering::Relaxed);
        self.requests.hold(id, io.kind, done);
        let mut pending = Box::new(Pending {
            api,
            io,
            id,
            op,
            offset,
            len,
            requests: Arc::clone(&self.requests),
        });
        let start = pending.io.buffer.len();
        if let IoKind::Read { len, .. } = pending.io.kind {
            pending.io.buffer.reserve(len);
        }
        // The buffer's heap memory does not move when the Box does.
        let data = pending.io.buffer.as_mut_ptr();
        let arg = Box::into_raw(pending);
        let mut completion: ffi::Completion = std::ptr::null_mut();
        // SAFETY: `arg` is handed to librbd, which passes it to `complete`
        // exactly once; `complete` takes the Box back.
        let r = unsafe { (api.rbd_aio_create_completion)(arg.cast(), complete, &mut completion) };
        if r < 0 {
            // SAFETY: librbd did not take `arg`.
            let pending = unsafe { Box::from_raw(arg) };
            return self.refused(*pending, r);
        }
        self.requests.in_flight.fetch_add(1, Ordering::AcqRel);
        // SAFETY: the buffer (`len` bytes from `data`, spare capacity for a
        // read) stays alive and untouched in `arg` until `complete` runs.
        let r = unsafe {
            match (*arg).io.kind {
                IoKind::Read { .. } => (api.rbd_aio_read2)(
                    self.image,
                    offset,
                    len,
                    data.add(start).cast(),
                    completion,
                    0,
                ),
                IoKind::Write { fua, .. } => {
                    let flags = if fua { ffi::OP_FLAG_FUA } else { 0 };
                    (api.rbd_aio_write2)(self.image, offset, len, data.cast(), completion, flags)
                }
                IoKind::Flush => (api.rbd_aio_flush)(self.image, completion),
            }
        };
        if r < 0 {
            self.requests.in_flight.fetch_sub(1, Ordering::AcqRel);
            // SAFETY: the request was refused, so librbd will not call back.
            let pending = unsafe {
                (api.rbd_aio_release)(completion);
                Box::from_raw(arg)
            };
            return self.refused(*pending, r);
        }
        Ok(())
    }

    /// A request librbd refused at once with `r`: its completion back to
    /// the caller (or, if a fence answered it meanwhile, nothing to do).
    fn refused(&self, pending: Pending, r: c_int) -> Result<(), (Io, IoDone, StoreError)> {
        let error = self.requests.failed(pending.op, pending.offset, r as isize);
        match self.requests.take(pending.id) {
            Some(done) => Err((pending.io, done, error)),
            None => Ok(()),
        }
    }
}

/// One request under way: everything `complete` needs.
struct Pending {
    api: &'static Api,
    io: Io,
    /// Its completion waits in `requests`, under this id.
    id: u64,
    op: &'static str,
    offset: u64,
    len: usize,
    requests: Arc<Requests>,
}

/// librbd's completion callback, on one of its threads.
extern "C" fn complete(completion: ffi::Completion, arg: *mut c_void) {
    // SAFETY: `arg` is the Box `start` leaked for this request, given back once.
    let pending = unsafe { Box::from_raw(arg.cast::<Pending>()) };
    let Pending {
        api,
        mut io,
        id,
        op,
        offset,
        len,
        requests,
    } = *pending;
    // SAFETY: the completion is ours and is released once, here.
    let r = unsafe {
        let r = (api.rbd_aio_get_return_value)(completion);
        (api.rbd_aio_release)(completion);
        r
    };
    let result = if r < 0 {
        Err(requests.failed(op, offset, r))
    } else if let IoKind::Read { .. } = io.kind {
        if r as usize == len {
            let filled = io.buffer.len() + len;
            // SAFETY: librbd wrote `len` bytes into the spare capacity
            // reserved for them.
            unsafe { io.buffer.set_len(filled) };
            Ok(())
        } else {
            Err(StoreError::io(
                op,
                offset,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("read {r} of {len} bytes"),
                ),
            ))
        }
    } else {
        Ok(())
    };
    requests.in_flight.fetch_sub(1, Ordering::AcqRel);
    // A fence may have answered it already.
    if let Some(done) = requests.take(id) {
        done(io, result);
    }
}

impl AsyncStore for RbdStore {
    fn submit(&self, io: Io, done: IoDone) {
        if let Err((io, done, error)) = self.start(io, done) {
            done(io, Err(error));
        }
    }
}

impl Store for RbdStore {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.check(offset, buf.len() as u64)?;
        // SAFETY: an open image and a buffer of the length passed.
        let r = unsafe {
            (self.api.rbd_read2)(self.image, offset, buf.len(), buf.as_mut_ptr().cast(), 0)
        };
        if r < 0 {
            return Err(self.requests.failed("rbd_read", offset, r));
        }
        if r as usize != buf.len() {
            let short = io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read {r} of {} bytes", buf.len()),
            );
            return Err(StoreError::io("rbd_read", offset, short));
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.check(offset, buf.len() as u64)?;
        // SAFETY: an open image and a buffer of the length passed.
        let r =
            unsafe { (self.api.rbd_write2)(self.image, offset, buf.len(), buf.as_ptr().cast(), 0) };
        if r < 0 {
            return Err(self.requests.failed("rbd_write", offset, r));
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.check(0, 0)?;
        // SAFETY: an open image.
        let r = unsafe { (self.api.rbd_flush)(self.image) };
        if r < 0 {
            return Err(self.requests.failed("rbd_flush", 0, r as isize));
        }
        Ok(())
    }

    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        // SAFETY: an open image; the range is checked.
        self.in_pieces("rbd_discard", offset, len, |offset, len| unsafe {
            (self.api.rbd_discard)(self.image, offset, len) as isize
        })
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        // SAFETY: an open image; the range is checked.
        self.in_pieces("rbd_write_zeroes", offset, len, |offset, len| unsafe {
            (self.api.rbd_write_zeroes)(self.image, offset, len as usize, 0, 0)
        })
    }

    fn kind(&self) -> &'static str {
        "rbd"
    }

    fn asynchronous(&self) -> Option<&dyn AsyncStore> {
        Some(self)
    }

    /// The cluster's fsid, the pool's id, the namespace and the image's id
    /// (which stays when the image is renamed).
    fn identity(&self) -> Option<&str> {
        Some(&self.identity)
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        self.check(offset, len)?;
        let mut first = FirstExtent::default();
        // SAFETY: an open image; `first` outlives the call, and the
        // callback only writes it.
        let r = unsafe {
            (self.api.rbd_diff_iterate2)(
                self.image,
                std::ptr::null(),
                offset,
                len,
                1,
                0,
                first_extent,
                (&mut first as *mut FirstExtent).cast(),
            )
        };
        if r < 0 && r != STOP {
            return Err(self.requests.failed("rbd_diff_iterate", offset, r as isize));
        }
        Ok(match first.found {
            // Nothing written in the range: all of it reads as zeros.
            None => Extent {
                mapped: false,
                len_bytes: len,
            },
            Some((start, _, _)) if start > offset => Extent {
                mapped: false,
                len_bytes: (start - offset).min(len),
            },
            Some((start, length, exists)) => Extent {
                mapped: exists,
                len_bytes: (start + length - offset).min(len),
            },
        })
    }

    /// librbd of Ceph 16 compares and writes within one 512-byte sector
    /// (later versions within a stripe unit).
    fn compare_and_write_max_bytes(&self) -> u64 {
        COMPARE_AND_WRITE_BYTES
    }

    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        write: &[u8],
    ) -> Option<Result<Option<u64>, StoreError>> {
        let len = write.len() as u64;
        if len == 0 || offset % COMPARE_AND_WRITE_BYTES + len > COMPARE_AND_WRITE_BYTES {
            return None;
        }
        if compare.len() != write.len() {
            return Some(Err(StoreError::io(
                "rbd_compare_and_write",
                offset,
                io::Error::from_raw_os_error(libc::EINVAL),
            )));
        }
        if let Err(error) = self.check(offset, write.len() as u64) {
            return Some(Err(error));
        }
        let mut mismatch = 0u64;
        // SAFETY: an open image; both buffers are `len` bytes.
        let r = unsafe {
            (self.api.rbd_compare_and_write)(
                self.image,
                offset,
                write.len(),
                compare.as_ptr().cast(),
                write.as_ptr().cast(),
                &mut mismatch,
                0,
            )
        };
        Some(match r {
            // librbd gives the offset within the range.
            r if r == -(libc::EILSEQ as isize) => Ok(Some(mismatch)),
            r if r < 0 => Err(self.requests.failed("rbd_compare_and_write", offset, r)),
            _ => Ok(None),
        })
    }
}

/// The range librbd compares and writes atomically: one sector.
const COMPARE_AND_WRITE_BYTES: u64 = 512;

/// What `rbd_diff_iterate2` returns when `first_extent` stopped it.
const STOP: c_int = -libc::ECANCELED;

#[derive(Default)]
struct FirstExtent {
    /// Offset, length, and whether it holds data.
    found: Option<(u64, u64, bool)>,
}

extern "C" fn first_extent(offset: u64, len: usize, exists: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `FirstExtent` `allocation` passed, alive for the call.
    let first = unsafe { &mut *arg.cast::<FirstExtent>() };
    first.found = Some((offset, len as u64, exists != 0));
    STOP
}

impl Drop for RbdStore {
    fn drop(&mut self) {
        if self.requests.is_fenced() {
            // librbd may hold a fenced client's requests for a long time,
            // and rbd_close waits for them (a gateway fenced with a write
            // under way stayed in rbd_close): the image is closed, and its
            // connection shut down, once librbd has let go of them all.
            close_later(Closing {
                api: self.api,
                image: self.image,
                ioctx: self.ioctx,
                requests: Arc::clone(&self.requests),
                name: std::mem::take(&mut self.name),
                since: Instant::now(),
                warned: false,
                _cluster: Arc::clone(&self.cluster),
            });
            return;
        }
        // A request's callback uses the image: wait for all of them (each
        // ends within librados's operation timeout).
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.requests.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: opened by us, no request under way; closed once.
        unsafe {
            (self.api.rbd_close)(self.image);
            (self.api.rados_ioctx_destroy)(self.ioctx);
        }
    }
}

/// How often the closing thread looks at the fenced images it holds.
const CLOSING_POLL: Duration = Duration::from_millis(100);
/// A fenced image whose requests librbd still holds after this long is
/// reported (once).
const CLOSING_HELD_WARNING: Duration = Duration::from_secs(60);

/// A fenced image dropped while librbd may still hold requests of it: it
/// is closed when librbd has called every one back, and its connection
/// (`_cluster`) shut down with the last image through it.
struct Closing {
    api: &'static Api,
    image: ffi::Image,
    ioctx: IoCtx,
    requests: Arc<Requests>,
    name: String,
    since: Instant,
    warned: bool,
    _cluster: Arc<Cluster>,
}

// SAFETY: the image and ioctx handles are used by one thread from here on
// (the closing thread), and librbd's API is thread-safe.
unsafe impl Send for Closing {}

impl Closing {
    /// Closes the image if librbd has let go of every request of it;
    /// whether it did.
    fn try_close(&mut self) -> bool {
        let held = self.requests.in_flight.load(Ordering::Acquire);
        if held > 0 {
            if !self.warned && self.since.elapsed() >= CLOSING_HELD_WARNING {
                self.warned = true;
                tracing::warn!(image = %self.name, requests_held = held, "librbd still holds requests of a fenced image; it is closed when it lets go of them");
            }
            return false;
        }
        // SAFETY: opened by us, no request under way, dropped by its store;
        // closed once (the caller drops this Closing, which has no Drop).
        unsafe {
            (self.api.rbd_close)(self.image);
            (self.api.rados_ioctx_destroy)(self.ioctx);
        }
        tracing::info!(image = %self.name, after_ms = self.since.elapsed().as_millis() as u64, "a fenced image was closed");
        true
    }
}

/// Hands fenced images to the process's closing thread.
static CLOSER: Mutex<Option<std::sync::mpsc::Sender<Closing>>> = Mutex::new(None);

/// Closes `closing` on the closing thread (started by the first fence), so
/// that no caller waits on librbd; the thread is one per process however
/// many images are fenced.
fn close_later(closing: Closing) {
    let mut closer = CLOSER.lock_unpoisoned();
    let closing = match closer.as_ref() {
        Some(tx) => match tx.send(closing) {
            Ok(()) => return,
            Err(std::sync::mpsc::SendError(closing)) => closing,
        },
        None => closing,
    };
    let (tx, rx) = std::sync::mpsc::channel::<Closing>();
    let spawned = std::thread::Builder::new()
        .name("isoe-rbd-close".into())
        .spawn(move || {
            let mut pending: Vec<Closing> = Vec::new();
            loop {
                let next = if pending.is_empty() {
                    rx.recv().ok()
                } else {
                    rx.recv_timeout(CLOSING_POLL).ok()
                };
                pending.extend(next);
                pending.retain_mut(|closing| !closing.try_close());
            }
        });
    match spawned {
        Ok(_) => {
            // The receiver lives as long as the thread, which never ends.
            let _ = tx.send(closing);
            *closer = Some(tx);
        }
        Err(e) => {
            // Left open with its connection: a shutdown under an open image
            // is not safe, and closing here could wait on librbd for good.
            tracing::warn!(image = %closing.name, error = %e, "a fenced image is left open: no thread to close it");
            std::mem::forget(closing);
        }
    }
}

/// Destroys an ioctx unless it was handed on.
struct IoCtxGuard {
    api: &'static Api,
    ioctx: IoCtx,
}

impl IoCtxGuard {
    fn into_raw(self) -> IoCtx {
        let ioctx = self.ioctx;
        std::mem::forget(self);
        ioctx
    }
}

impl Drop for IoCtxGuard {
    fn drop(&mut self) {
        // SAFETY: created by us and not handed on.
        unsafe { (self.api.rados_ioctx_destroy)(self.ioctx) };
    }
}

fn errno_error(op: &'static str, offset: u64, r: isize) -> StoreError {
    StoreError::io(op, offset, io::Error::from_raw_os_error(-(r as i32)))
}
