//! A connection's pool of data buffers (ARCHITECTURE.md, datapath rule 3:
//! no allocation per command in steady state).
//!
//! Data-In and write data live in `Vec<u8>`s that go back to the pool once
//! sent or stored, keeping their capacity, so that a connection in steady
//! state allocates nothing per command. With the pool off (the `[datapath]`
//! option `buffer_pool = false`) every [`BufferPool::take`] is a fresh
//! allocation and every [`BufferPool::give`] frees: what a datapath without
//! the pool costs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Buffers kept per connection for reuse (bounds memory a peer can make us hold idle).
pub const POOL_BUFFERS_MAX: usize = 64;
/// Largest buffer kept: a larger one (a 32 MiB READ's Data-In) is freed
/// once used, so a few large commands leave nothing behind on an idle
/// connection.
pub const POOL_BUFFER_BYTES_MAX: usize = 1 << 20;
/// Capacity kept idle per connection at most.
pub const POOL_BYTES_MAX: usize = 8 << 20;
/// Capacity kept idle by every connection's pool together at most: past
/// it a buffer given back is freed, so that many connections that each
/// moved data once and went quiet do not keep 8 MiB each.
pub const PROCESS_POOL_BYTES_MAX: usize = 256 << 20;

/// Idle buffers of one connection, or none when pooling is off.
#[derive(Debug)]
pub struct BufferPool {
    idle: Vec<Vec<u8>>,
    /// Capacity of the idle buffers.
    idle_bytes: usize,
    enabled: bool,
    /// Idle capacity reserved by every pool that shares it, against
    /// [`PROCESS_POOL_BYTES_MAX`].
    shared: Option<Arc<AtomicUsize>>,
    /// What this pool reserved of it, in steps of [`RESERVE_STEP`]: the
    /// shared count moves only when the idle capacity leaves the steps
    /// around it, not per buffer.
    reserved: usize,
}

/// The shared count is taken and given back in steps of this many bytes.
const RESERVE_STEP: usize = POOL_BUFFER_BYTES_MAX;

impl Drop for BufferPool {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.fetch_sub(self.reserved, Ordering::Relaxed);
        }
    }
}

impl Default for BufferPool {
    /// A pool that reuses buffers.
    fn default() -> Self {
        BufferPool::new(true)
    }
}

impl BufferPool {
    /// A pool that reuses buffers when `enabled`, or allocates every time.
    pub fn new(enabled: bool) -> BufferPool {
        BufferPool {
            idle: Vec::new(),
            idle_bytes: 0,
            enabled,
            shared: None,
            reserved: 0,
        }
    }

    /// As [`BufferPool::new`], its idle capacity counted in `shared`
    /// with every other pool's, against [`PROCESS_POOL_BYTES_MAX`].
    pub fn shared(enabled: bool, shared: Arc<AtomicUsize>) -> BufferPool {
        let mut pool = BufferPool::new(enabled);
        pool.shared = Some(shared);
        pool
    }

    /// An empty buffer: a reused one (capacity kept) or a new one.
    #[inline]
    pub fn take(&mut self) -> Vec<u8> {
        debug_assert!(self.enabled || self.idle.is_empty());
        let buffer = self.idle.pop().unwrap_or_default();
        self.idle_bytes -= buffer.capacity();
        if self.reserved > self.idle_bytes + 2 * RESERVE_STEP {
            self.give_back_reserve();
        }
        buffer
    }

    /// Returns a buffer once its contents are no longer needed: kept for
    /// reuse, or freed when pooling is off, the buffer is larger than
    /// [`POOL_BUFFER_BYTES_MAX`], or the pool holds its bound already.
    #[inline]
    pub fn give(&mut self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if self.enabled
            && capacity > 0
            && self.idle.len() < POOL_BUFFERS_MAX
            && capacity <= POOL_BUFFER_BYTES_MAX
            && self.idle_bytes + capacity <= POOL_BYTES_MAX
            && (self.idle_bytes + capacity <= self.reserved || self.reserve(capacity))
        {
            buffer.clear();
            self.idle_bytes += capacity;
            self.idle.push(buffer);
        }
        debug_assert!(self.idle.len() <= POOL_BUFFERS_MAX);
    }

    /// Reserves of the shared count what keeping `capacity` more needs
    /// (all it needs without a shared count); whether it could.
    #[cold]
    fn reserve(&mut self, capacity: usize) -> bool {
        let need = (self.idle_bytes + capacity - self.reserved).next_multiple_of(RESERVE_STEP);
        let Some(shared) = &self.shared else {
            self.reserved += need;
            return true;
        };
        let taken = shared
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (held + need <= PROCESS_POOL_BYTES_MAX).then_some(held + need)
            })
            .is_ok();
        if taken {
            self.reserved += need;
        }
        taken
    }

    /// Gives back the whole steps of the reservation idle buffers no
    /// longer need.
    #[cold]
    fn give_back_reserve(&mut self) {
        let keep = self.idle_bytes.next_multiple_of(RESERVE_STEP);
        let spare = self.reserved - keep;
        self.reserved = keep;
        if let Some(shared) = &self.shared {
            shared.fetch_sub(spare, Ordering::Relaxed);
        }
    }

    /// Capacity held by idle buffers.
    pub fn idle_bytes(&self) -> usize {
        self.idle_bytes
    }

    /// Buffers waiting for reuse.
    pub fn idle(&self) -> usize {
        self.idle.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_buffer_comes_back_with_its_capacity() {
        let mut pool = BufferPool::new(true);
        let mut b = pool.take();
        b.resize(4096, 7);
        let at = b.as_ptr();
        pool.give(b);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the same allocation is reused");
        assert!(again.capacity() >= 4096);
    }

    #[test]
    fn without_pooling_every_buffer_is_new() {
        let mut pool = BufferPool::new(false);
        let mut b = pool.take();
        b.resize(4096, 7);
        pool.give(b);
        assert_eq!(pool.idle(), 0, "nothing is kept");
        assert_eq!(pool.take().capacity(), 0, "a fresh, unallocated Vec");
    }

    #[test]
    fn large_buffers_are_freed_and_idle_bytes_are_bounded() {
        let mut pool = BufferPool::new(true);
        pool.give(Vec::with_capacity(POOL_BUFFER_BYTES_MAX + 1));
        assert_eq!(pool.idle(), 0, "a buffer beyond the size bound is freed");
        for _ in 0..POOL_BUFFERS_MAX {
            pool.give(Vec::with_capacity(POOL_BUFFER_BYTES_MAX));
        }
        assert_eq!(
            pool.idle_bytes(),
            POOL_BYTES_MAX,
            "no more than the byte bound"
        );
        assert_eq!(pool.idle(), POOL_BYTES_MAX / POOL_BUFFER_BYTES_MAX);
        let taken = pool.take();
        assert_eq!(pool.idle_bytes(), POOL_BYTES_MAX - taken.capacity());
    }

    #[test]
    fn pools_that_share_a_count_keep_no_more_than_the_process_bound() {
        let shared = Arc::new(AtomicUsize::new(0));
        let mut pools: Vec<BufferPool> = (0..PROCESS_POOL_BYTES_MAX / POOL_BYTES_MAX + 2)
            .map(|_| BufferPool::shared(true, Arc::clone(&shared)))
            .collect();
        for pool in &mut pools {
            for _ in 0..POOL_BYTES_MAX / POOL_BUFFER_BYTES_MAX {
                pool.give(Vec::with_capacity(POOL_BUFFER_BYTES_MAX));
            }
        }
        assert_eq!(shared.load(Ordering::Relaxed), PROCESS_POOL_BYTES_MAX);
        let kept: usize = pools.iter().map(BufferPool::idle_bytes).sum();
        assert_eq!(kept, PROCESS_POOL_BYTES_MAX, "the last pools kept nothing");
        // Pool 0 hands all its buffers out: its reservation goes back but
        // for the steps it may want again soon.
        for _ in 0..POOL_BYTES_MAX / POOL_BUFFER_BYTES_MAX {
            pools[0].take();
        }
        assert!(
            shared.load(Ordering::Relaxed)
                <= PROCESS_POOL_BYTES_MAX - POOL_BYTES_MAX + 2 * RESERVE_STEP
        );
        let last = pools.len() - 1;
        pools[last].give(Vec::with_capacity(POOL_BUFFER_BYTES_MAX));
        assert_eq!(pools[last].idle(), 1, "room again for another pool");
        pools.clear();
        assert_eq!(shared.load(Ordering::Relaxed), 0, "dropped pools give back");
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut pool = BufferPool::new(true);
        for _ in 0..POOL_BUFFERS_MAX + 10 {
            pool.give(vec![0u8; 16]);
        }
        assert_eq!(pool.idle(), POOL_BUFFERS_MAX);
    }
}
