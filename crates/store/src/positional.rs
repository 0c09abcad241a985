//! Positional I/O on an open file or block device (pread/pwrite, fdatasync,
//! fallocate), shared by `FileStore` and `BlockStore`.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::range::check_range;
use crate::{Claim, Extent, Store, StoreError};

/// Largest zero buffer used when fallocate cannot zero a range for us.
const ZERO_BUFFER_BYTES: u64 = 1 << 20;

/// How many times an interrupted fallocate is retried before giving up.
const FALLOCATE_RETRIES_MAX: u32 = 16;

/// An open file with a fixed size, addressed by offset only (no seek pointer),
/// so any number of threads can use it at once.
#[derive(Debug)]
pub(crate) struct PositionalFile {
    file: File,
    size_bytes: u64,
    read_only: bool,
    /// The claim on the file, held for as long as the store is.
    claim: Option<Claim>,
}

impl PositionalFile {
    /// Wraps an open file whose usable size is `size_bytes`.
    pub(crate) fn new(file: File, size_bytes: u64, read_only: bool) -> Self {
        Self {
            file,
            size_bytes,
            read_only,
            claim: None,
        }
    }

    /// Holds `claim` for as long as the store lives.
    pub(crate) fn hold(&mut self, claim: Claim) {
        debug_assert!(self.claim.is_none(), "a store claims its file once");
        self.claim = Some(claim);
    }

    pub(crate) fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        check_range(offset, buf.len() as u64, self.size_bytes)?;
        if crate::nowait::must_not_wait() {
            return self.read_without_waiting(offset, buf);
        }
        // read_exact_at loops on short reads and retries EINTR.
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| StoreError::io("pread", offset, source))
    }

    /// A read of pages that are all in the page cache (`preadv2` with
    /// `RWF_NOWAIT`), or [`StoreError::WouldBlock`].
    fn read_without_waiting(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let iov = libc::iovec {
                iov_base: rest.as_mut_ptr().cast(),
                iov_len: rest.len(),
            };
            let at = offset + done as u64;
            // SAFETY: `iov` describes `rest`, a live exclusive borrow of
            // writable bytes, for the duration of the call; the descriptor
            // is open for as long as `self.file` is.
            let n = unsafe {
                libc::preadv2(
                    self.file.as_raw_fd(),
                    &iov,
                    1,
                    at as libc::off_t,
                    libc::RWF_NOWAIT,
                )
            };
            match n {
                n if n > 0 => done += n as usize,
                0 => {
                    let eof = std::io::Error::from(ErrorKind::UnexpectedEof);
                    return Err(StoreError::io("pread", at, eof));
                }
                _ => {
                    let error = std::io::Error::last_os_error();
                    match error.raw_os_error() {
                        Some(libc::EINTR) => {}
                        // EAGAIN: a page is not in the cache; EOPNOTSUPP:
                        // the file system has no RWF_NOWAIT.
                        Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) => {
                            return Err(crate::nowait::would_block("pread"))
                        }
                        _ => return Err(StoreError::io("pread", at, error)),
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.check_writable()?;
        if crate::nowait::must_not_wait() {
            return Err(crate::nowait::would_block("pwrite"));
        }
        check_range(offset, buf.len() as u64, self.size_bytes)?;
        // write_all_at loops on short writes and retries EINTR.
        self.file
            .write_all_at(buf, offset)
            .map_err(|source| StoreError::io("pwrite", offset, source))
    }

    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Ok(());
        }
        if crate::nowait::must_not_wait() {
            return Err(crate::nowait::would_block("fdatasync"));
        }
        self.file
            .sync_data()
            .map_err(|source| StoreError::io("fdatasync", 0, source))
    }

    /// Deallocates a range so it reads back as zeros.
    pub(crate) fn punch_hole(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.zero_with(
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    }

    /// Zeros a range, keeping it allocated.
    pub(crate) fn zero_range(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.zero_with(
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    }

    /// The allocation state at `offset` from SEEK_DATA/SEEK_HOLE (holes in a
    /// sparse file; a block device is all data). Where the file system cannot
    /// say, everything is reported mapped.
    pub(crate) fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        check_range(offset, len, self.size_bytes)?;
        let end = offset + len;
        let extent = |mapped, until: u64| Extent {
            mapped,
            len_bytes: until.min(end) - offset,
        };
        if len == 0 {
            return Ok(extent(true, offset));
        }
        let Some(data) = self.seek(offset, libc::SEEK_DATA)? else {
            // ENXIO: no data at or after `offset`.
            return Ok(extent(false, end));
        };
        if data > offset {
            return Ok(extent(false, data));
        }
        // Data at `offset`; SEEK_HOLE finds at worst the implicit hole at EOF.
        let hole = self.seek(offset, libc::SEEK_HOLE)?.unwrap_or(end);
        Ok(extent(true, hole.max(offset + 1)))
    }

    /// lseek(2) with `whence`: Ok(None) for ENXIO (no such data or hole past
    /// `offset`); a file system without SEEK_DATA/SEEK_HOLE (EINVAL) is
    /// treated as all data.
    fn seek(&self, offset: u64, whence: libc::c_int) -> Result<Option<u64>, StoreError> {
        let io_error = |source| StoreError::io("lseek", offset, source);
        let offset_signed =
            libc::off_t::try_from(offset).map_err(|_| io_error(ErrorKind::InvalidInput.into()))?;
        // SAFETY: lseek takes a file descriptor and two integers and touches
        // no memory of ours; the descriptor is owned by `self.file` and stays
        // open for the call. The file position it moves is unused: every read
        // and write here is positional (pread/pwrite).
        let position = unsafe { libc::lseek(self.file.as_raw_fd(), offset_signed, whence) };
        if position >= 0 {
            return Ok(Some(position as u64));
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            Some(libc::EINVAL) if whence == libc::SEEK_DATA => Ok(Some(offset)),
            Some(libc::EINVAL) => Ok(Some(self.size_bytes)),
            _ => Err(io_error(error)),
        }
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            Err(StoreError::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// Tries fallocate with `mode`; where the file system or device cannot do
    /// it, writes zeros instead.
    fn zero_with(&self, mode: libc::c_int, offset: u64, len: u64) -> Result<(), StoreError> {
        self.check_writable()?;
        check_range(offset, len, self.size_bytes)?;
        if len == 0 {
            return Ok(());
        }
        match self.fallocate(mode, offset, len) {
            Ok(()) => Ok(()),
            Err(error) if fallocate_unsupported(&error) => self.write_zero_bytes(offset, len),
            Err(source) => Err(StoreError::io("fallocate", offset, source)),
        }
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> std::io::Result<()> {
        // Both fit: check_range bounded them by a size the kernel reported.
        let offset_signed = libc::off_t::try_from(offset).map_err(|_| ErrorKind::InvalidInput)?;
        let len_signed = libc::off_t::try_from(len).map_err(|_| ErrorKind::InvalidInput)?;
        for _ in 0..FALLOCATE_RETRIES_MAX {
            // SAFETY: fallocate takes a file descriptor and three integers and
            // touches no memory of ours; the descriptor is owned by
            // `self.file` and stays open for the duration of the call.
            let rc =
                unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset_signed, len_signed) };
            if rc == 0 {
                return Ok(());
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != ErrorKind::Interrupted {
                return Err(error);
            }
        }
        Err(ErrorKind::Interrupted.into())
    }

    fn write_zero_bytes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        let zeros = vec![0u8; len.min(ZERO_BUFFER_BYTES) as usize];
        let end = offset + len;
        let mut position = offset;
        while position < end {
            let piece = (end - position).min(zeros.len() as u64) as usize;
            self.write_at(position, &zeros[..piece])?;
            position += piece as u64;
        }
        Ok(())
    }
}

/// Whether fallocate failed because this file system or device lacks the mode
/// (rather than because of a real I/O error).
fn fallocate_unsupported(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) | Some(libc::ENODEV)
    )
}

/// Media backed by a [`PositionalFile`]: files and block devices share every
/// operation and differ only in how they are opened.
pub(crate) trait Positional: Send + Sync + std::fmt::Debug {
    /// The open file.
    fn positional(&self) -> &PositionalFile;
    /// "file" or "block".
    fn kind(&self) -> &'static str;
}

impl<T: Positional> Store for T {
    fn size_bytes(&self) -> u64 {
        self.positional().size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.positional().read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.positional().write_at(offset, buf)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.positional().flush()
    }

    fn unmap(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        if crate::nowait::must_not_wait() {
            return Err(crate::nowait::would_block("fallocate"));
        }
        self.positional().punch_hole(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        if crate::nowait::must_not_wait() {
            return Err(crate::nowait::would_block("fallocate"));
        }
        self.positional().zero_range(offset, len)
    }

    fn kind(&self) -> &'static str {
        Positional::kind(self)
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Extent, StoreError> {
        if crate::nowait::must_not_wait() {
            return Err(crate::nowait::would_block("lseek"));
        }
        self.positional().allocation(offset, len)
    }
}
