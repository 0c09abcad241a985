//! isoe-iovec: the slices of one vectored write (`writev`), on the stack.
//!
//! [`IoSlices`] holds up to `N` [`IoSlice`]s in an array whose slots are
//! left uninitialized until one is pushed: a target's batched flush makes
//! room for 512 slices (8 KiB on x86-64) and usually fills a few, and
//! initializing all of them on every write cost more than the write's own
//! work. Nothing is allocated.
//!
//! This crate owns that one use of `unsafe`, for the target (which forbids
//! it) and the initiator: [`IoSlices::as_slice`] reads the slots pushed so
//! far as initialized. It knows nothing of sockets, PDUs or buffers.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(unsafe_code)]

use std::io::IoSlice;
use std::mem::MaybeUninit;

/// Up to `N` slices for one vectored write, in the order pushed.
pub struct IoSlices<'a, const N: usize> {
    /// Slots `..len` are initialized; the rest never read.
    slots: [MaybeUninit<IoSlice<'a>>; N],
    len: usize,
}

impl<'a, const N: usize> IoSlices<'a, N> {
    /// No slices; no slot is written.
    #[inline]
    pub fn new() -> IoSlices<'a, N> {
        IoSlices {
            slots: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Appends `bytes`.
    ///
    /// # Panics
    ///
    /// When `N` slices are there already ([`IoSlices::is_full`]).
    #[inline]
    pub fn push(&mut self, bytes: &'a [u8]) {
        assert!(self.len < N, "IoSlices holds at most {N} slices");
        self.slots[self.len].write(IoSlice::new(bytes));
        self.len += 1;
    }

    /// Appends the slices `slices` gives while there is room, and returns
    /// how many it took; the rest are left (a vectored write takes what it
    /// can, and the caller writes on from where it stopped). One pass with
    /// no check per slice but the room left: the datapath's way to fill it.
    #[inline]
    pub fn extend<I: IntoIterator<Item = &'a [u8]>>(&mut self, slices: I) -> usize {
        let start = self.len;
        let mut len = start;
        for (slot, bytes) in self.slots[start..].iter_mut().zip(slices) {
            slot.write(IoSlice::new(bytes));
            len += 1;
        }
        self.len = len;
        len - start
    }

    /// Slices pushed.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when none was pushed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `N` were pushed: [`IoSlices::push`] takes no more.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// The slices pushed, in order, for [`std::io::Write::write_vectored`].
    #[inline]
    #[allow(unsafe_code)]
    pub fn as_slice(&self) -> &[IoSlice<'a>] {
        debug_assert!(self.len <= N);
        // SAFETY: `push` and `extend` wrote slots `..len` (and only they
        // grow `len`, never past N), so they are initialized; `MaybeUninit<T>` has the
        // layout of `T`, so the pointer to the first slot is a valid
        // pointer to `len` consecutive `IoSlice`s, borrowed for as long as
        // `self` is.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr().cast::<IoSlice<'a>>(), self.len) }
    }
}

impl<const N: usize> Default for IoSlices<'_, N> {
    fn default() -> Self {
        IoSlices::new()
    }
}

impl<const N: usize> std::fmt::Debug for IoSlices<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.as_slice().iter().map(|s| s.len()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slices_pushed_come_back_in_order() {
        let (a, b) = (b"head".to_vec(), vec![7u8; 4096]);
        let mut slices = IoSlices::<'_, 4>::new();
        assert!(slices.is_empty() && slices.as_slice().is_empty());
        slices.push(&a);
        slices.push(&b[1..]);
        assert_eq!(slices.len(), 2);
        let got: Vec<&[u8]> = slices.as_slice().iter().map(|s| &s[..]).collect();
        assert_eq!(got, [&a[..], &b[1..]]);
        assert_eq!(format!("{slices:?}"), "[4, 4095]");
    }

    #[test]
    #[should_panic(expected = "IoSlices holds at most 2 slices")]
    fn a_full_array_says_so_and_refuses_more() {
        let bytes = [1u8, 2, 3];
        let mut slices = IoSlices::<'_, 2>::new();
        slices.push(&bytes[..1]);
        slices.push(&bytes[1..]);
        assert!(slices.is_full());
        slices.push(&bytes);
    }

    #[test]
    fn extend_takes_what_fits_and_says_how_many() {
        let parts = [b"a".as_slice(), b"bc", b"def", b"g"];
        let mut slices = IoSlices::<'_, 3>::new();
        slices.push(parts[0]);
        assert_eq!(slices.extend(parts[1..].iter().copied()), 2);
        assert!(slices.is_full());
        assert_eq!(slices.extend(parts.iter().copied()), 0);
        let got: Vec<&[u8]> = slices.as_slice().iter().map(|s| &s[..]).collect();
        assert_eq!(got, [&b"a"[..], b"bc", b"def"]);
    }

    #[test]
    fn a_vectored_write_takes_them_whole() {
        use std::io::Write;
        let parts = [b"abc".as_slice(), b"", b"de"];
        let mut slices = IoSlices::<'_, 512>::new();
        for part in parts {
            slices.push(part);
        }
        let mut sink = Vec::new();
        let written = sink.write_vectored(slices.as_slice()).unwrap();
        assert_eq!((written, &sink[..]), (5, &b"abcde"[..]));
    }
}
