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
    /// Idle capacity of every pool that shares it, against
    /// [`PROCESS_POOL_BYTES_MAX`].
    shared: Option<Arc<AtomicUsize>>,
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.fetch_sub(self.idle_bytes, Ordering::Relaxed);
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
    pub fn take(&mut self) -> Vec<u8> {
        debug_assert!(self.enabled || self.idle.is_empty());
        let buffer = self.idle.pop().unwrap_or_default();
        self.idle_bytes -= buffer.capacity();
        if let Some(shared) = &self.shared {
            shared.fetch_sub(buffer.capacity(), Ordering::Relaxed);
        }
        buffer
    }

    /// Returns a buffer once its contents are no longer needed: kept for
    /// reuse, or freed when pooling is off, the buffer is larger than
    /// [`POOL_BUFFER_BYTES_MAX`], or the pool holds its bound already.
    pub fn give(&mut self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if self.enabled
            && capacity > 0
            && self.idle.len() < POOL_BUFFERS_MAX
            && capacity <= POOL_BUFFER_BYTES_MAX
            && self.idle_bytes + capacity <= POOL_BYTES_MAX
            && self.shared.as_ref().is_none_or(|shared| {
                shared
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                        (held + capacity <= PROCESS_POOL_BYTES_MAX).then_some(held + capacity)
                    })
                    .is_ok()
            })
        {
            buffer.clear();
            self.idle_bytes += capacity;
            self.idle.push(buffer);
        }
        debug_assert!(self.idle.len() <= POOL_BUFFERS_MAX);
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
        let taken = pools[0].take();
        assert_eq!(
            shared.load(Ordering::Relaxed),
            PROCESS_POOL_BYTES_MAX - taken.capacity()
        );
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
