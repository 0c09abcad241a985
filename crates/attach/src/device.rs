//! What every kernel front-end (ublk, NBD) offers the serving loop: the
//! requests the block layer sends, the buffers their data lives in, and the
//! completions that go back.
//!
//! A front-end owns one buffer per tag (as many as its queue depth), each
//! [`Geometry::max_io_bytes`] long. A request's buffer is lent to the
//! iSCSI command that carries it ([`BlockDevice::take_buffer`]) and comes
//! back with the completion ([`BlockDevice::complete`]); moving a `Vec`
//! never moves its bytes, so the address the kernel knows stays valid.

use isoe_initiator::DataPlane;
use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;

/// What the block layer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    /// Write back the volatile cache (REQ_OP_FLUSH).
    Flush,
    /// Deallocate a range (REQ_OP_DISCARD).
    Discard,
    /// Make a range read as zeros (REQ_OP_WRITE_ZEROES).
    WriteZeroes,
}

/// One request from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The front-end's slot for it: below the queue depth.
    pub tag: u16,
    pub op: Op,
    /// Byte offset on the device (a multiple of the logical block size).
    pub offset: u64,
    /// Bytes; 0 for a flush.
    pub len: u32,
    /// Forced unit access: on stable media before it completes (REQ_FUA).
    pub fua: bool,
    /// A write-zeroes that must leave the range allocated (REQ_NOUNMAP).
    pub no_unmap: bool,
}

/// The disk as the kernel should see it, from the LU's READ CAPACITY (16),
/// VPD pages and mode pages ([`crate::scsi::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    /// Logical block size in bytes (512 or 4096, a power of two).
    pub block_bytes: u32,
    /// Physical block size in bytes (a power-of-two multiple of the logical).
    pub physical_block_bytes: u32,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// The largest request the kernel may send, in bytes (the LU's
    /// MAXIMUM TRANSFER LENGTH, capped by the front-end's buffers).
    pub max_io_bytes: u32,
    /// The LU's OPTIMAL TRANSFER LENGTH in bytes; 0 when it gives none.
    pub optimal_io_bytes: u32,
    /// UNMAP works (VPD B2h LBPU); the fields below it then say how.
    pub discard: bool,
    /// OPTIMAL UNMAP GRANULARITY in bytes (at least one logical block).
    pub discard_granularity_bytes: u32,
    /// UNMAP GRANULARITY ALIGNMENT in bytes.
    pub discard_alignment_bytes: u32,
    /// MAXIMUM UNMAP LBA COUNT in bytes (capped to what fits a request).
    pub max_discard_bytes: u32,
    /// WRITE SAME (16) works (VPD B2h LBPWS, or B0h's MAXIMUM WRITE SAME
    /// LENGTH); the largest one in bytes, 0 when it does not.
    pub max_write_zeroes_bytes: u32,
    /// The LU is write-protected (MODE SENSE's WP bit).
    pub read_only: bool,
    /// The LU has a volatile write cache (caching mode page WCE): the
    /// kernel sends flushes, which become SYNCHRONIZE CACHE.
    pub volatile_cache: bool,
    /// The LU honours FUA (MODE SENSE's DPOFUA bit).
    pub fua: bool,
}

/// A kernel block device front-end, served by one thread.
///
/// The thread that first calls [`BlockDevice::ready`],
/// [`BlockDevice::take_requests`] or [`BlockDevice::flush`] is the serving
/// thread from then on (ublk binds its queue to the thread that fetches on
/// it); the device may be created on another.
pub trait BlockDevice {
    /// Readable when requests (or the end) may be waiting: the serving loop
    /// waits on it beside the iSCSI sockets.
    fn wake_fd(&self) -> RawFd;

    /// Appends the requests that arrived, without blocking; a write's data
    /// is in its tag's buffer by then. Ok(false): the kernel stopped the
    /// device (detach, or removal): no request will come any more, and
    /// those still held need no completion.
    fn take_requests(&mut self, out: &mut Vec<Request>) -> io::Result<bool>;

    /// Lends `tag`'s buffer, [`Geometry::max_io_bytes`] long, a write's
    /// data at its front (unless the write is [`BlockDevice::external`]).
    fn take_buffer(&mut self, tag: u16) -> Vec<u8>;

    /// Finishes request `tag`: its buffer back (a read's data at its
    /// front), and the result: Ok, or Err(errno) (positive, as in
    /// `libc::EIO`). Completions may be held until [`BlockDevice::flush`].
    ///
    /// The buffer is the same `Vec` [`BlockDevice::take_buffer`] lent; its
    /// length may have changed (shortened to the data, say), but not its
    /// allocation, and its bytes stay initialized.
    fn complete(&mut self, tag: u16, buffer: Vec<u8>, result: Result<(), i32>);

    /// Hands the completions held to the kernel.
    fn flush(&mut self) -> io::Result<()>;

    /// What moves data to and from the requests' own pages (ublk zero
    /// copy), for the requests [`BlockDevice::external`] names. None:
    /// every byte goes through the buffers.
    fn data_plane(&mut self) -> Option<&mut dyn DataPlane> {
        None
    }

    /// True when `request`'s data moves through [`BlockDevice::data_plane`]:
    /// its command names the tag as its external buffer
    /// ([`isoe_initiator::Command::external`]). A read's large Data-In is
    /// then received straight into the request's pages (the rest still
    /// lands in the tag's buffer); a write's data is sent from them and is
    /// not in the tag's buffer.
    fn external(&self, _request: &Request) -> bool {
        false
    }

    /// Once the device exists and serves: its path (`/dev/ublkb0`,
    /// `/dev/nbd0`). None while it is being started; Some(Err) if starting
    /// failed. Called by the loop until it says Some.
    fn ready(&mut self) -> Option<io::Result<PathBuf>>;

    /// Asks the kernel to remove the device (detach): requests in flight
    /// still complete, then [`BlockDevice::take_requests`] says Ok(false).
    /// Until then the loop must complete every request it holds, failing
    /// them if it cannot serve them: the kernel waits for them.
    fn stop(&mut self) -> io::Result<()>;
}
