//! librados and librbd, loaded at run time.
//!
//! isoe links neither library: a machine without Ceph builds and runs isoe,
//! and only a LUN that names an RBD image needs them. The first such LUN
//! loads `librados.so.2` and `librbd.so.1` (Debian's `librados2` and
//! `librbd1`) and resolves every function below at once, so that a missing
//! symbol is one clear error at start rather than a failure mid-I/O. The
//! declarations follow `rados/librados.h` and `rbd/librbd.h` of Ceph 16
//! (Debian 12); every one of them is in those headers since Ceph 14.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;

pub(crate) type Rados = *mut c_void;
pub(crate) type IoCtx = *mut c_void;
pub(crate) type Image = *mut c_void;
pub(crate) type Completion = *mut c_void;
pub(crate) type Callback = extern "C" fn(Completion, *mut c_void);
pub(crate) type DiffCallback = extern "C" fn(u64, usize, c_int, *mut c_void) -> c_int;
pub(crate) type WriteOp = *mut c_void;
pub(crate) type WatchCallback = extern "C" fn(*mut c_void, u64, u64, u64, *mut c_void, usize);
pub(crate) type WatchErrorCallback = extern "C" fn(*mut c_void, u64, c_int);

/// `LIBRADOS_OP_FLAG_FADVISE_FUA`: the write is durable when acknowledged.
pub(crate) const OP_FLAG_FUA: c_int = 0x80;

/// Declares the functions and a loader that resolves them all.
macro_rules! api {
    ($( $lib:ident: fn $name:ident($($arg:ty),*) -> $ret:ty; )*) => {
        /// The resolved functions (and the libraries that keep them valid).
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            $( pub(crate) $name: unsafe extern "C" fn($($arg),*) -> $ret, )*
            _rados: Library,
            _rbd: Library,
        }

        impl Api {
            fn load() -> Result<Api, String> {
                // SAFETY: loading a shared library runs its initialisers;
                // librados and librbd are Ceph's own, meant to be loaded
                // into any process.
                let rados = unsafe { Library::new("librados.so.2") }
                    .map_err(|e| format!("cannot load librados.so.2 (Debian package librados2): {e}"))?;
                // SAFETY: as librados: Ceph's own library.
                let rbd = unsafe { Library::new("librbd.so.1") }
                    .map_err(|e| format!("cannot load librbd.so.1 (Debian package librbd1): {e}"))?;
                Ok(Api {
                    $( $name: {
                        let library = match stringify!($lib) {
                            "rados" => &rados,
                            _ => &rbd,
                        };
                        // SAFETY: the type is the one the header declares.
                        let symbol = unsafe {
                            library.get::<unsafe extern "C" fn($($arg),*) -> $ret>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        }
                        .map_err(|e| format!("{} lacks {}: {e}", stringify!($lib), stringify!($name)))?;
                        *symbol
                    }, )*
                    _rados: rados,
                    _rbd: rbd,
                })
            }
        }
    };
}

api! {
    rados: fn rados_create2(*mut Rados, *const c_char, *const c_char, u64) -> c_int;
    rados: fn rados_conf_read_file(Rados, *const c_char) -> c_int;
    rados: fn rados_conf_set(Rados, *const c_char, *const c_char) -> c_int;
    rados: fn rados_connect(Rados) -> c_int;
    rados: fn rados_shutdown(Rados) -> ();
    rados: fn rados_cluster_fsid(Rados, *mut c_char, usize) -> c_int;
    rados: fn rados_ioctx_create(Rados, *const c_char, *mut IoCtx) -> c_int;
    rados: fn rados_ioctx_destroy(IoCtx) -> ();
    rados: fn rados_ioctx_get_id(IoCtx) -> i64;
    rados: fn rados_ioctx_set_namespace(IoCtx, *const c_char) -> ();
    rados: fn rados_read(IoCtx, *const c_char, *mut c_char, usize, u64) -> c_int;
    rados: fn rados_get_last_version(IoCtx) -> u64;
    rados: fn rados_create_write_op() -> WriteOp;
    rados: fn rados_release_write_op(WriteOp) -> ();
    rados: fn rados_write_op_assert_version(WriteOp, u64) -> ();
    rados: fn rados_write_op_create(WriteOp, c_int, *const c_char) -> ();
    rados: fn rados_write_op_write_full(WriteOp, *const c_char, usize) -> ();
    rados: fn rados_write_op_operate(WriteOp, IoCtx, *const c_char, *mut libc::time_t, c_int) -> c_int;
    rados: fn rados_watch2(IoCtx, *const c_char, *mut u64, WatchCallback, WatchErrorCallback, *mut c_void) -> c_int;
    rados: fn rados_unwatch2(IoCtx, u64) -> c_int;
    rados: fn rados_watch_flush(Rados) -> c_int;
    rados: fn rados_notify2(IoCtx, *const c_char, *const c_char, c_int, u64, *mut *mut c_char, *mut usize) -> c_int;
    rados: fn rados_notify_ack(IoCtx, *const c_char, u64, u64, *const c_char, c_int) -> c_int;
    rados: fn rados_decode_notify_response(*mut c_char, usize, *mut *mut c_void, *mut usize, *mut *mut c_void, *mut usize) -> c_int;
    rados: fn rados_free_notify_response(*mut c_void, usize, *mut c_void) -> ();
    rados: fn rados_buffer_free(*mut c_char) -> ();
    rbd: fn rbd_create(IoCtx, *const c_char, u64, *mut c_int) -> c_int;
    rbd: fn rbd_open(IoCtx, *const c_char, *mut Image, *const c_char) -> c_int;
    rbd: fn rbd_close(Image) -> c_int;
    rbd: fn rbd_get_size(Image, *mut u64) -> c_int;
    rbd: fn rbd_get_id(Image, *mut c_char, usize) -> c_int;
    rbd: fn rbd_read2(Image, u64, usize, *mut c_char, c_int) -> isize;
    rbd: fn rbd_write2(Image, u64, usize, *const c_char, c_int) -> isize;
    rbd: fn rbd_flush(Image) -> c_int;
    rbd: fn rbd_discard(Image, u64, u64) -> c_int;
    rbd: fn rbd_write_zeroes(Image, u64, usize, c_int, c_int) -> isize;
    rbd: fn rbd_compare_and_write(Image, u64, usize, *const c_char, *const c_char, *mut u64, c_int) -> isize;
    rbd: fn rbd_diff_iterate2(Image, *const c_char, u64, u64, u8, u8, DiffCallback, *mut c_void) -> c_int;
    rbd: fn rbd_aio_create_completion(*mut c_void, Callback, *mut Completion) -> c_int;
    rbd: fn rbd_aio_get_return_value(Completion) -> isize;
    rbd: fn rbd_aio_release(Completion) -> ();
    rbd: fn rbd_aio_read2(Image, u64, usize, *mut c_char, Completion, c_int) -> c_int;
    rbd: fn rbd_aio_write2(Image, u64, usize, *const c_char, Completion, c_int) -> c_int;
    rbd: fn rbd_aio_flush(Image, Completion) -> c_int;
    rbd: fn rbd_is_exclusive_lock_owner(Image, *mut c_int) -> c_int;
}

// SAFETY: the struct holds function pointers into libraries that stay
// loaded for the process's life (the `OnceLock` below is never dropped);
// librados and librbd are thread-safe.
unsafe impl Send for Api {}
// SAFETY: as for Send, shared as well as moved.
unsafe impl Sync for Api {}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

/// The functions, loading the libraries on first use.
pub(crate) fn api() -> Result<&'static Api, String> {
    API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
}
