//! What the gateways of one image share besides its data: one RADOS object
//! beside the image (`isoe.lu.<image id>`, in the image's pool and
//! namespace) that holds a small state (the logical unit's reservations)
//! under compare-and-set on the object's version, and that every gateway
//! watches, so that one can tell the others of a change and wait until each
//! has taken it in (watch/notify).
//!
//! The notifier hears its own notifications too; each message carries the
//! sending channel's random id so that the handler can tell.

use isoe_sync::{CondvarExt, MutexExt};
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::cluster::{c_string, Cluster};
use crate::ffi::{self, Api, IoCtx};
use crate::image::RbdStore;
use crate::RbdError;

/// What runs when another gateway (or this one) notifies: the payload,
/// whether it came from this channel, and the [`Reply`] that acknowledges
/// it, with an answer, now or later from another thread. A lost watch (the
/// cluster dropped it) calls it with `None` once the watch is back:
/// whatever was notified meanwhile was missed, so the state must be read
/// again.
pub type Handler = Arc<dyn Fn(Option<&[u8]>, bool, Reply) + Send + Sync>;

/// The acknowledgement a notification waits for. The notifier hears it
/// when it is sent or dropped (with an empty answer then), so a handler
/// that must finish something first (end tasks) keeps it until then.
pub struct Reply {
    to: Option<(Arc<Acks>, u64, u64)>,
}

/// What acknowledging needs, kept alive by the replies still out: the
/// channel's ioctx is destroyed only when the last of them has gone.
struct Acks {
    api: &'static Api,
    ioctx: IoCtx,
    object: CString,
    _cluster: Arc<Cluster>,
}

// SAFETY: librados's notify_ack is thread-safe; the ioctx lives until Drop.
unsafe impl Send for Acks {}
// SAFETY: as for Send, shared as well as moved.
unsafe impl Sync for Acks {}

impl Drop for Acks {
    fn drop(&mut self) {
        // SAFETY: the channel's watch is gone and no reply is left.
        unsafe { (self.api.rados_ioctx_destroy)(self.ioctx) };
    }
}

impl Reply {
    /// A reply to nobody: for the handler's call after a lost watch.
    fn none() -> Reply {
        Reply { to: None }
    }

    /// Acknowledges with `answer`.
    pub fn send(mut self, answer: &[u8]) {
        self.ack(answer);
    }

    fn ack(&mut self, answer: &[u8]) {
        let Some((acks, notify_id, cookie)) = self.to.take() else {
            return;
        };
        // SAFETY: an open ioctx and an answer of the length passed.
        unsafe {
            (acks.api.rados_notify_ack)(
                acks.ioctx,
                acks.object.as_ptr(),
                notify_id,
                cookie,
                answer.as_ptr().cast(),
                answer.len() as c_int,
            );
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.ack(&[]);
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("pending", &self.to.is_some())
            .finish()
    }
}

/// What a notification brought back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notified {
    /// The answer of each watcher that acknowledged (this channel's too).
    pub answers: Vec<Vec<u8>>,
    /// Watchers that did not acknowledge in time.
    pub missed: usize,
}

/// The largest state the object may hold.
const STATE_MAX_BYTES: usize = 4 << 20;

/// One image's shared object, watched.
pub struct Channel {
    api: &'static Api,
    cluster: Arc<Cluster>,
    ioctx: IoCtx,
    object: CString,
    /// The random id this channel's notifications carry.
    id: u64,
    watcher: *mut Watcher,
    /// Watches again when the cluster drops the watch; joined in Drop.
    rewatcher: Option<std::thread::JoinHandle<()>>,
    /// Serializes reads and writes: the version of a read is the ioctx's
    /// last version, which another thread's call would overwrite.
    io: Mutex<()>,
    /// Owns the ioctx, with the replies still out.
    _acks: Arc<Acks>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("object", &self.object)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

// SAFETY: the ioctx is used under `io` or by librados's thread-safe watch
// and notify calls; `watcher` is freed only in Drop after the watch ended.
unsafe impl Send for Channel {}
// SAFETY: as for Send, shared as well as moved.
unsafe impl Sync for Channel {}

/// The watch callback's state.
struct Watcher {
    acks: Arc<Acks>,
    id: u64,
    handler: Handler,
    /// Set by the error callback; a thread of the channel watches again.
    lost: Arc<(Mutex<Lost>, Condvar)>,
}

#[derive(Default)]
struct Lost {
    cookie: Option<u64>,
    closing: bool,
}

/// What a write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Stored; the object's new version.
    Stored(u64),
    /// Someone wrote first: read again and redo.
    Conflict,
}

impl Channel {
    /// Opens and watches the shared object of `image`; `handler` hears
    /// every notification from then on.
    pub fn open(image: &RbdStore, handler: Handler) -> Result<Channel, RbdError> {
        let api = ffi::api().map_err(RbdError::Library)?;
        let (cluster, pool, namespace, image_id) = image.location();
        let name = format!("isoe.lu.{image_id}");
        let failed = |step: &str, r: i32| RbdError::Image {
            name: image.name().to_string(),
            message: format!("{step} {name}: {}", crate::errno_text(r)),
        };
        let pool_c = c_string(pool)?;
        let mut ioctx: IoCtx = std::ptr::null_mut();
        // SAFETY: a connected cluster, a NUL-terminated name, an out-pointer.
        let r = unsafe { (api.rados_ioctx_create)(cluster.rados, pool_c.as_ptr(), &mut ioctx) };
        if r < 0 {
            return Err(failed("opening the pool of", r));
        }
        if let Some(namespace) = namespace {
            let namespace = c_string(namespace)?;
            // SAFETY: an open ioctx; the name is copied.
            unsafe { (api.rados_ioctx_set_namespace)(ioctx, namespace.as_ptr()) };
        }
        let object = c_string(&name)?;
        let id = random_id();
        let lost = Arc::new((Mutex::new(Lost::default()), Condvar::new()));
        let acks = Arc::new(Acks {
            api,
            ioctx,
            object: object.clone(),
            _cluster: Arc::clone(cluster),
        });
        let watcher = Box::into_raw(Box::new(Watcher {
            acks: Arc::clone(&acks),
            id,
            handler,
            lost: Arc::clone(&lost),
        }));
        let mut channel = Channel {
            api,
            cluster: Arc::clone(cluster),
            ioctx,
            object,
            id,
            watcher,
            rewatcher: None,
            io: Mutex::new(()),
            _acks: acks,
        };
        // From here Drop unwatches, frees the watcher and the ioctx.
        // A watch needs the object: made empty if it is not there.
        channel.create().map_err(|r| failed("creating", r))?;
        let cookie =
            watch(api, ioctx, &channel.object, watcher).map_err(|r| failed("watching", r))?;
        lost.0.lock_unpoisoned().cookie = Some(cookie);
        channel.rewatcher = spawn_rewatcher(
            api,
            ioctx,
            channel.object.clone(),
            watcher as usize,
            lost,
            Arc::clone(image.requests()),
        );
        Ok(channel)
    }

    /// The id this channel's notifications carry.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Makes the object, empty, unless it exists.
    fn create(&self) -> Result<(), i32> {
        let api = self.api;
        // SAFETY: a new op, released at once after operate.
        let r = unsafe {
            let op = (api.rados_create_write_op)();
            if op.is_null() {
                return Err(-libc::ENOMEM);
            }
            (api.rados_write_op_create)(op, 0, std::ptr::null());
            let r = (api.rados_write_op_operate)(
                op,
                self.ioctx,
                self.object.as_ptr(),
                std::ptr::null_mut(),
                0,
            );
            (api.rados_release_write_op)(op);
            r
        };
        if r < 0 {
            return Err(r);
        }
        Ok(())
    }

    /// The object's content (empty until a state was written) and version.
    pub fn read(&self) -> Result<(Vec<u8>, u64), String> {
        let _io = self.io.lock_unpoisoned();
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            // SAFETY: an open ioctx and a buffer of the length passed.
            let r = unsafe {
                (self.api.rados_read)(
                    self.ioctx,
                    self.object.as_ptr(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            };
            if r < 0 {
                return Err(format!(
                    "reading {:?}: {}",
                    self.object,
                    crate::errno_text(r)
                ));
            }
            if (r as usize) < buffer.len() {
                // SAFETY: an open ioctx; its last operation was this read.
                let version = unsafe { (self.api.rados_get_last_version)(self.ioctx) };
                buffer.truncate(r as usize);
                return Ok((buffer, version));
            }
            if buffer.len() >= STATE_MAX_BYTES {
                return Err(format!(
                    "{:?} holds more than {STATE_MAX_BYTES} bytes",
                    self.object
                ));
            }
            buffer.resize(buffer.len() * 4, 0);
        }
    }

    /// Replaces the content if the object is still at version `expected`
    /// (the version [`Channel::read`] gave).
    pub fn write(&self, content: &[u8], expected: u64) -> Result<Written, String> {
        if content.len() > STATE_MAX_BYTES {
            return Err(format!("a state of {} bytes is too large", content.len()));
        }
        let _io = self.io.lock_unpoisoned();
        let api = self.api;
        // SAFETY: a new op, released below on every path.
        let op = unsafe { (api.rados_create_write_op)() };
        if op.is_null() {
            return Err("cannot make a write operation".into());
        }
        // SAFETY: a live op; the content outlives operate.
        let r = unsafe {
            (api.rados_write_op_assert_version)(op, expected);
            (api.rados_write_op_write_full)(op, content.as_ptr().cast(), content.len());
            let r = (api.rados_write_op_operate)(
                op,
                self.ioctx,
                self.object.as_ptr(),
                std::ptr::null_mut(),
                0,
            );
            (api.rados_release_write_op)(op);
            r
        };
        match r {
            // The object moved past the version (or was made again).
            r if r == -libc::ERANGE || r == -libc::EOVERFLOW => Ok(Written::Conflict),
            r if r < 0 => Err(format!(
                "writing {:?}: {}",
                self.object,
                crate::errno_text(r)
            )),
            // SAFETY: an open ioctx; its last operation was this write.
            _ => Ok(Written::Stored(unsafe {
                (api.rados_get_last_version)(self.ioctx)
            })),
        }
    }

    /// Sends `payload` to every watcher (this channel too) and waits until
    /// each acknowledged it or `timeout` passed.
    pub fn notify(&self, payload: &[u8], timeout: Duration) -> Result<Notified, String> {
        let mut message = self.id.to_be_bytes().to_vec();
        message.extend_from_slice(payload);
        let mut reply: *mut c_char = std::ptr::null_mut();
        let mut reply_len = 0usize;
        // SAFETY: an open ioctx, a message of the length passed, out-pointers.
        let r = unsafe {
            (self.api.rados_notify2)(
                self.ioctx,
                self.object.as_ptr(),
                message.as_ptr().cast(),
                message.len() as c_int,
                timeout.as_millis() as u64,
                &mut reply,
                &mut reply_len,
            )
        };
        let notified = if reply.is_null() {
            Notified::default()
        } else {
            // SAFETY: the reply librados gave; freed once, here.
            unsafe { decode_reply(self.api, reply, reply_len) }
        };
        match r {
            0 => Ok(notified),
            r if r == -libc::ETIMEDOUT => Ok(notified),
            r => Err(format!(
                "notifying {:?}: {}",
                self.object,
                crate::errno_text(r)
            )),
        }
    }
}

/// `struct notify_ack_t` of `rados/rados_types.h`.
#[repr(C)]
struct NotifyAck {
    notifier_id: u64,
    cookie: u64,
    payload: *mut c_char,
    payload_len: u64,
}

/// The answers and timeouts of a notify reply; frees it.
///
/// # Safety
/// `reply` is a reply buffer from `rados_notify2` of `len` bytes.
unsafe fn decode_reply(api: &Api, reply: *mut c_char, len: usize) -> Notified {
    let (mut acks, mut timeouts) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut acked, mut timed_out) = (0usize, 0usize);
    let r = (api.rados_decode_notify_response)(
        reply,
        len,
        &mut acks,
        &mut acked,
        &mut timeouts,
        &mut timed_out,
    );
    let mut notified = Notified::default();
    if r == 0 {
        if !acks.is_null() {
            let list = std::slice::from_raw_parts(acks.cast::<NotifyAck>(), acked);
            for ack in list {
                let answer = if ack.payload.is_null() || ack.payload_len == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(ack.payload.cast::<u8>(), ack.payload_len as usize)
                        .to_vec()
                };
                notified.answers.push(answer);
            }
        }
        notified.missed = timed_out;
        (api.rados_free_notify_response)(acks, acked, timeouts);
    }
    (api.rados_buffer_free)(reply);
    notified
}

fn watch(api: &Api, ioctx: IoCtx, object: &CString, watcher: *mut Watcher) -> Result<u64, i32> {
    let mut cookie = 0u64;
    // SAFETY: `watcher` stays alive until the watch is removed and flushed.
    let r = unsafe {
        (api.rados_watch2)(
            ioctx,
            object.as_ptr(),
            &mut cookie,
            on_notify,
            on_watch_error,
            watcher.cast(),
        )
    };
    if r < 0 {
        return Err(r);
    }
    Ok(cookie)
}

extern "C" fn on_notify(
    arg: *mut c_void,
    notify_id: u64,
    cookie: u64,
    _notifier: u64,
    data: *mut c_void,
    len: usize,
) {
    // SAFETY: `arg` is the channel's Watcher, alive while it watches.
    let watcher = unsafe { &*arg.cast::<Watcher>() };
    let bytes: &[u8] = if data.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: librados passes `len` bytes at `data` for this call.
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
    };
    // Acknowledging once the handler is done with the message (the reply
    // sent or dropped) is what lets the notifier know it is in force here.
    let reply = Reply {
        to: Some((Arc::clone(&watcher.acks), notify_id, cookie)),
    };
    if let Some((sender, payload)) = bytes.split_first_chunk::<8>() {
        let own = *sender == watcher.id.to_be_bytes();
        (watcher.handler)(Some(payload), own, reply);
    }
}

extern "C" fn on_watch_error(arg: *mut c_void, cookie: u64, err: c_int) {
    // SAFETY: as in `on_notify`.
    let watcher = unsafe { &*arg.cast::<Watcher>() };
    tracing::warn!(object = ?watcher.acks.object, error = %crate::errno_text(err), "watch lost; watching again");
    let (lost, wake) = &*watcher.lost;
    let mut lost = lost.lock_unpoisoned();
    if lost.cookie == Some(cookie) {
        lost.cookie = None;
        wake.notify_all();
    }
}

/// A thread that watches again after the cluster dropped the watch (a
/// callback may not remove and add watches itself), then tells the handler
/// that notifications may have been missed.
fn spawn_rewatcher(
    api: &'static Api,
    ioctx: IoCtx,
    object: CString,
    watcher: usize,
    lost: Arc<(Mutex<Lost>, Condvar)>,
    requests: Arc<crate::image::Requests>,
) -> Option<std::thread::JoinHandle<()>> {
    let ioctx = ioctx as usize;
    std::thread::Builder::new()
        .name("isoe-rbd-watch".into())
        .spawn(move || {
            let ioctx = ioctx as IoCtx;
            let (state, wake) = &*lost;
            loop {
                let mut guard = state.lock_unpoisoned();
                while guard.cookie.is_some() && !guard.closing {
                    guard = wake.wait_unpoisoned(guard);
                }
                // A pause before each attempt, cut short by the close.
                guard = wake
                    .wait_timeout_unpoisoned(guard, Duration::from_millis(500))
                    .0;
                if guard.closing {
                    return;
                }
                drop(guard);
                match watch(api, ioctx, &object, watcher as *mut Watcher) {
                    Ok(cookie) => {
                        let mut guard = state.lock_unpoisoned();
                        if guard.closing {
                            // SAFETY: our own new watch, removed at once.
                            unsafe { (api.rados_unwatch2)(ioctx, cookie) };
                            return;
                        }
                        guard.cookie = Some(cookie);
                        drop(guard);
                        // SAFETY: the Watcher lives until `closing` is seen.
                        let handler = unsafe { &(*(watcher as *mut Watcher)).handler };
                        handler(None, false, Reply::none());
                    }
                    Err(r) if r == -libc::ESHUTDOWN => {
                        // Blocklisted: nothing through this client will
                        // succeed again, and librbd may hold the image's
                        // requests for good: they end now.
                        tracing::error!(object = ?object, "watching again failed: this client was fenced (blocklisted) by the cluster");
                        requests.fence();
                        return;
                    }
                    Err(r) => tracing::warn!(object = ?object, error = %crate::errno_text(r), "watching again failed; retrying"),
                }
            }
        })
        .ok()
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: the watcher outlives every callback: the watch is removed
        // and librados's callbacks flushed before it is freed.
        unsafe {
            let lost = Arc::clone(&(*self.watcher).lost);
            let cookie = {
                let mut guard = lost.0.lock_unpoisoned();
                guard.closing = true;
                lost.1.notify_all();
                guard.cookie.take()
            };
            if let Some(rewatcher) = self.rewatcher.take() {
                let _ = rewatcher.join();
            }
            if let Some(cookie) = cookie {
                (self.api.rados_unwatch2)(self.ioctx, cookie);
            }
            (self.api.rados_watch_flush)(self.cluster.rados);
            drop(Box::from_raw(self.watcher));
            // The ioctx goes with the last reply still out (`Acks`).
        }
    }
}

/// A random 64-bit id (the kernel's).
fn random_id() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        // Unique enough within one host: time and process.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return nanos ^ (u64::from(std::process::id()) << 32);
    }
    u64::from_ne_bytes(bytes)
}
