//! A connection's output: PDU headers held inline, data segments borrowed
//! from the task buffers they belong to, sent with one vectored send.

use std::collections::VecDeque;

/// Inline bytes one piece can hold: a BHS with its header digest (52), or a
/// padding-and-digest trailer (at most 7).
pub const INLINE_BYTES: usize = 56;

/// One contiguous run of output bytes.
#[derive(Debug)]
pub enum Piece {
    /// Bytes held in the piece itself.
    Inline {
        /// Storage.
        bytes: [u8; INLINE_BYTES],
        /// Bytes used.
        len: u8,
    },
    /// Bytes that did not fit inline (a NOP-In echo, a long header).
    Owned(Vec<u8>),
    /// `buffer[start..end]` of the task in slot `slot`.
    Task {
        /// The task's slot.
        slot: u32,
        /// First byte.
        start: u32,
        /// One past the last byte.
        end: u32,
    },
    /// Bytes `start..end` of external buffer `buffer` (a write's request
    /// pages, [`crate::Command::external`]), which only the data plane
    /// can send; held for the task in slot `slot`.
    External {
        /// The task's slot.
        slot: u32,
        /// The caller's buffer id.
        buffer: u32,
        /// First byte.
        start: u32,
        /// One past the last byte.
        end: u32,
    },
}

impl Piece {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Piece::Inline { len, .. } => usize::from(*len),
            Piece::Owned(v) => v.len(),
            Piece::Task { start, end, .. } | Piece::External { start, end, .. } => {
                (*end - *start) as usize
            }
        }
    }
}

/// The pieces waiting to be sent, and how much of the first one went already.
#[derive(Debug, Default)]
pub struct OutQueue {
    /// Pieces in send order.
    pub pieces: VecDeque<Piece>,
    /// Bytes of `pieces[0]` already sent.
    pub front_sent: usize,
    /// How many of `pieces` are [`Piece::External`].
    pub externals: usize,
}

impl OutQueue {
    /// Appends bytes, inline when they fit.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if bytes.len() <= INLINE_BYTES {
            let mut inline = [0u8; INLINE_BYTES];
            inline[..bytes.len()].copy_from_slice(bytes);
            self.pieces.push_back(Piece::Inline {
                bytes: inline,
                len: bytes.len() as u8,
            });
        } else {
            self.pieces.push_back(Piece::Owned(bytes.to_vec()));
        }
    }

    /// Appends a range of a task's buffer.
    pub fn push_task(&mut self, slot: u32, start: u32, end: u32) {
        debug_assert!(start <= end);
        if start < end {
            self.pieces.push_back(Piece::Task { slot, start, end });
        }
    }

    /// Appends a range of an external buffer, held for the task in `slot`.
    pub fn push_external(&mut self, slot: u32, buffer: u32, start: u32, end: u32) {
        debug_assert!(start <= end);
        if start < end {
            self.externals += 1;
            self.pieces.push_back(Piece::External {
                slot,
                buffer,
                start,
                end,
            });
        }
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Marks `n` bytes sent; calls `released` with the slot of every task
    /// piece that went out whole.
    pub fn advance(&mut self, mut n: usize, mut released: impl FnMut(u32)) {
        while n > 0 {
            let Some(front) = self.pieces.front() else {
                break;
            };
            let rest = front.len() - self.front_sent;
            if n < rest {
                self.front_sent += n;
                return;
            }
            n -= rest;
            self.front_sent = 0;
            match self.pieces.pop_front() {
                Some(Piece::Task { slot, .. }) => released(slot),
                Some(Piece::External { slot, .. }) => {
                    self.externals -= 1;
                    released(slot);
                }
                _ => {}
            }
        }
    }

    /// Drops everything (the connection is gone); `released` as in [`OutQueue::advance`].
    pub fn clear(&mut self, mut released: impl FnMut(u32)) {
        for piece in self.pieces.drain(..) {
            if let Piece::Task { slot, .. } | Piece::External { slot, .. } = piece {
                released(slot);
            }
        }
        self.front_sent = 0;
        self.externals = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_sends_release_task_pieces_only_when_whole() {
        let mut q = OutQueue::default();
        q.push_bytes(&[1; 48]);
        q.push_task(7, 0, 100);
        q.push_bytes(&[0; 2]);
        q.push_bytes(&[9; 300]);
        let mut released = Vec::new();
        q.advance(50, |s| released.push(s));
        assert!(released.is_empty());
        assert_eq!(q.front_sent, 2);
        q.advance(98, |s| released.push(s));
        assert_eq!(released, vec![7]);
        assert_eq!(q.pieces.len(), 2);
        q.advance(302, |_| {});
        assert!(q.is_empty());
        q.push_task(3, 0, 8);
        q.push_external(4, 9, 0, 4096);
        assert_eq!(q.externals, 1);
        q.clear(|s| released.push(s));
        assert_eq!(released, vec![7, 3, 4]);
        assert_eq!(q.externals, 0);
        q.push_bytes(&[1; 48]);
        q.push_external(5, 9, 100, 200);
        q.advance(98, |s| released.push(s));
        assert_eq!((q.externals, q.front_sent), (1, 50));
        q.advance(50, |s| released.push(s));
        assert_eq!((q.externals, released.last()), (0, Some(&5)));
    }
}
