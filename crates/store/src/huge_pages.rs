//! Memory for a memory LUN's chunks: anonymous mappings aligned to 2 MiB
//! and advised for transparent huge pages (`MADV_HUGEPAGE`), so that the
//! kernel can back each chunk with one huge page. A large read sent
//! straight from a chunk is then one TLB entry for the socket's copy
//! rather than 512, which a virtual machine's two-level page walk makes
//! dear. Where the kernel gives no huge page (THP off, memory too
//! fragmented) the mapping works as ordinary pages.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The huge page size the mappings are aligned to (x86-64, arm64 with 4 KiB pages).
pub(crate) const HUGE_PAGE_BYTES: usize = 2 << 20;

/// `len` zeroed bytes of their own anonymous mapping, which starts on a
/// huge page boundary.
#[derive(Debug)]
pub(crate) struct HugeBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone, as a Box's memory is.
unsafe impl Send for HugeBytes {}
// SAFETY: shared access only reads (`Deref`); writes need `&mut`.
unsafe impl Sync for HugeBytes {}

impl HugeBytes {
    /// Zeroed memory of `len` bytes; pages are committed as they are first
    /// written. Out of address space, it aborts as a failed allocation does.
    pub(crate) fn zeroed(len: usize) -> HugeBytes {
        Self::try_zeroed(len).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(mapping_len(len), HUGE_PAGE_BYTES)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            )
        })
    }

    fn try_zeroed(len: usize) -> Option<HugeBytes> {
        let mapped = mapping_len(len);
        // Map a huge page more than needed, then unmap what lies before the
        // first boundary and after the end.
        let span = mapped + HUGE_PAGE_BYTES;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
        let head = aligned - start;
        let tail = span - head - mapped;
        // SAFETY: both ranges lie inside the mapping just made and outside
        // the part kept; advice on the part kept is only a hint.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + mapped) as *mut libc::c_void, tail);
            }
            libc::madvise(aligned as *mut libc::c_void, mapped, libc::MADV_HUGEPAGE);
        }
        Some(HugeBytes {
            ptr: NonNull::new(aligned as *mut u8)?,
            len,
        })
    }

    /// A copy of `bytes` in memory of its own.
    pub(crate) fn copy_of(bytes: &[u8]) -> HugeBytes {
        let mut copy = HugeBytes::zeroed(bytes.len());
        copy.copy_from_slice(bytes);
        copy
    }
}

/// Bytes mapped for `len`: whole pages, at least one.
fn mapping_len(len: usize) -> usize {
    len.max(1).next_multiple_of(4096)
}

impl Deref for HugeBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes mapped readable and writable, zeroed at first,
        // owned by self for its lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for HugeBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for Deref, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HugeBytes {
    fn drop(&mut self) {
        // SAFETY: the mapping this value made and owns; nothing refers to it
        // once self is gone.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), mapping_len(self.len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_start_on_a_huge_page_and_read_as_zeros_until_written() {
        for len in [1, 4096, 100_000, HUGE_PAGE_BYTES] {
            let mut bytes = HugeBytes::zeroed(len);
            assert_eq!(bytes.as_ptr() as usize % HUGE_PAGE_BYTES, 0);
            assert_eq!(bytes.len(), len);
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[len - 1] = 7;
            let copy = HugeBytes::copy_of(&bytes);
            assert_eq!(copy[len - 1], 7);
            assert_eq!(copy.len(), len);
        }
    }
}
