//! The receive buffer: bytes read from a socket, decoded in place.

/// Bytes read but not yet decoded live in `buf[start..end]`.
#[derive(Debug)]
pub struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// The buffer's size: several 256 KiB Data-In PDUs per `recv`.
pub const RECV_BUF_BYTES: usize = 1 << 20;

impl Default for RecvBuf {
    fn default() -> Self {
        RecvBuf::with_capacity(RECV_BUF_BYTES)
    }
}

impl RecvBuf {
    /// A buffer of `bytes` (grown on demand for a larger frame).
    pub fn with_capacity(bytes: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; bytes],
            start: 0,
            end: 0,
        }
    }

    /// The undecoded bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` bytes decoded.
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start, "consumed past the data");
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Room to read into, at least `need_total` bytes counting the undecoded
    /// ones (a partial frame of that size must fit whole).
    pub fn spare(&mut self, need_total: usize) -> &mut [u8] {
        let held = self.end - self.start;
        // Always leave room for one byte: an empty read would look like end of stream.
        let need = need_total.max(held + 1);
        if self.buf.len() < need {
            self.buf.resize(need.next_power_of_two(), 0);
        }
        // Move a partial frame to the front when the tail is short of room for it.
        if self.buf.len() - self.start < need || self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = held;
        }
        &mut self.buf[self.end..]
    }

    /// Records `n` bytes read into [`RecvBuf::spare`].
    pub fn filled(&mut self, n: usize) {
        assert!(self.end + n <= self.buf.len(), "filled past the buffer");
        self.end += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_frames_move_to_the_front_and_large_frames_grow_it() {
        let mut b = RecvBuf::with_capacity(16);
        b.spare(0)[..10].copy_from_slice(b"0123456789");
        b.filled(10);
        b.consume(8);
        assert_eq!(b.data(), b"89");
        // Needs 12 in all; only 6 left after end, so the 2 held bytes move.
        let room = b.spare(12).len();
        assert_eq!(room, 14);
        assert_eq!(b.data(), b"89");
        let room = b.spare(40).len();
        assert!(room >= 38, "{room}");
        assert_eq!(b.data(), b"89");
        b.consume(2);
        assert!(b.data().is_empty());
    }
}
