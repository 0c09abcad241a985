//! Behaviour every store must show, run against each implementation.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use isoe_store::{BlockStore, FailingStore, Fault, FileStore, MemoryStore, Ops, Store, StoreError};

const MIB: u64 = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Writes across chunk (1 MiB) boundaries and reads back in different cuts.
fn round_trip(store: &dyn Store) {
    let data = pattern((2 * MIB + 1000) as usize, 7);
    let offset = MIB - 500;
    store.write_at(offset, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    store.read_at(offset, &mut back).unwrap();
    assert_eq!(back, data);
    let mut piece = vec![0u8; 1000];
    store.read_at(MIB - 100, &mut piece).unwrap();
    assert_eq!(piece, data[400..1400]);
    let mut before = vec![1u8; 100];
    store.read_at(offset - 100, &mut before).unwrap();
    assert!(
        before.iter().all(|&b| b == 0),
        "bytes before the write read as zeros"
    );
    // read_append: after what the Vec holds, never-written bytes as zeros,
    // across chunk boundaries, the same bytes as read_at.
    let mut out = vec![9u8; 3];
    store
        .read_append(offset - 100, data.len() + 200, &mut out)
        .unwrap();
    assert_eq!(out.len(), 3 + data.len() + 200);
    assert_eq!(out[..3], [9, 9, 9]);
    assert!(out[3..103].iter().all(|&b| b == 0));
    assert_eq!(out[103..103 + data.len()], data[..]);
    assert!(out[103 + data.len()..].iter().all(|&b| b == 0));
}

fn out_of_range(store: &dyn Store) {
    let mut kept = vec![5u8; 2];
    assert!(store
        .read_append(store.size_bytes() - 8, 16, &mut kept)
        .is_err());
    assert_eq!(
        kept,
        [5, 5],
        "a failed read_append leaves the Vec as it was"
    );
    let size = store.size_bytes();
    let mut buf = [0u8; 16];
    assert!(matches!(
        store.read_at(size - 8, &mut buf),
        Err(StoreError::OutOfRange { .. })
    ));
    assert!(matches!(
        store.write_at(size, &buf[..1]),
        Err(StoreError::OutOfRange { .. })
    ));
    assert!(matches!(
        store.read_at(u64::MAX - 4, &mut buf),
        Err(StoreError::OutOfRange { .. })
    ));
    assert!(matches!(
        store.unmap(size - 1, 2),
        Err(StoreError::OutOfRange { .. })
    ));
    assert!(matches!(
        store.write_zeroes(size + 1, 0),
        Err(StoreError::OutOfRange { .. })
    ));
    store.read_at(size - 16, &mut buf).unwrap();
    store.read_at(size, &mut []).unwrap();
}

fn unmap_and_zeroes_read_zeros(store: &dyn Store) {
    store.write_at(0, &vec![0xaa; (3 * MIB) as usize]).unwrap();
    store.unmap(100, 2 * MIB).unwrap();
    store.write_zeroes(2 * MIB + 200, 1000).unwrap();
    let mut back = vec![0u8; (3 * MIB) as usize];
    store.read_at(0, &mut back).unwrap();
    for (i, &b) in back.iter().enumerate() {
        let i = i as u64;
        let zero =
            (100..100 + 2 * MIB).contains(&i) || (2 * MIB + 200..2 * MIB + 1200).contains(&i);
        assert_eq!(b, if zero { 0 } else { 0xaa }, "byte {i}");
    }
}

fn concurrent(store: Arc<dyn Store>) {
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                // Each thread owns a 700 KiB stripe that straddles chunk edges.
                let offset = u64::from(t) * 700 * 1024;
                for round in 0..20u8 {
                    let data = pattern(700 * 1024, t.wrapping_mul(50).wrapping_add(round));
                    store.write_at(offset, &data).unwrap();
                    let mut back = vec![0u8; data.len()];
                    store.read_at(offset, &mut back).unwrap();
                    assert_eq!(back, data);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn memory_store_behaviour() {
    let store = MemoryStore::new(4 * MIB + 512);
    assert_eq!(store.size_bytes(), 4 * MIB + 512);
    assert_eq!(store.kind(), "memory");
    round_trip(&store);
    out_of_range(&store);
    unmap_and_zeroes_read_zeros(&store);
    store.flush().unwrap();
    concurrent(Arc::new(MemoryStore::new(4 * MIB)));
}

#[test]
fn large_memory_store_is_lazy() {
    // 64 GiB would be impossible to allocate eagerly on a 24 GiB machine.
    let store = MemoryStore::new(64 << 30);
    let mut buf = [1u8; 4096];
    store.read_at((64 << 30) - 4096, &mut buf).unwrap();
    assert_eq!(buf, [0u8; 4096]);
    store.write_at(12345 << 20, &buf).unwrap();
}

#[test]
fn file_store_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun0.img");
    let store = FileStore::open(&path, Some(4 * MIB + 512)).unwrap();
    assert_eq!(store.size_bytes(), 4 * MIB + 512);
    assert_eq!(store.kind(), "file");
    assert_eq!(store.unwritten_read_bytes(), None, "a file cannot tell");
    round_trip(&store);
    out_of_range(&store);
    unmap_and_zeroes_read_zeros(&store);
    store.flush().unwrap();
    let path2 = dir.path().join("lun1.img");
    concurrent(Arc::new(FileStore::open(&path2, Some(4 * MIB)).unwrap()));
}

#[test]
fn file_store_persists_across_reopen_and_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun.img");
    assert!(matches!(
        FileStore::open(&path, None),
        Err(StoreError::SizeRequired { .. })
    ));
    {
        let store = FileStore::open(&path, Some(MIB)).unwrap();
        store.write_at(4096, b"durable bytes").unwrap();
        store.flush().unwrap();
    }
    let store = FileStore::open(&path, None).unwrap();
    assert_eq!(store.size_bytes(), MIB);
    let mut back = [0u8; 13];
    store.read_at(4096, &mut back).unwrap();
    assert_eq!(&back, b"durable bytes");
    drop(store);

    // A smaller size never shrinks an existing file; a larger one grows it.
    assert_eq!(
        FileStore::open(&path, Some(4096)).unwrap().size_bytes(),
        MIB
    );
    let grown = FileStore::open(&path, Some(2 * MIB)).unwrap();
    assert_eq!(grown.size_bytes(), 2 * MIB);
    grown.read_at(4096, &mut back).unwrap();
    assert_eq!(&back, b"durable bytes");
    drop(grown);

    let read_only = FileStore::open_read_only(&path).unwrap();
    read_only.read_at(4096, &mut back).unwrap();
    assert_eq!(&back, b"durable bytes");
    assert!(matches!(
        read_only.write_at(0, b"x"),
        Err(StoreError::ReadOnly)
    ));
    assert!(matches!(
        read_only.unmap(0, 4096),
        Err(StoreError::ReadOnly)
    ));
    read_only.flush().unwrap();
}

#[test]
fn file_store_new_file_is_sparse_and_unmap_punches_holes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.img");
    let store = FileStore::open(&path, Some(64 * MIB)).unwrap();
    let blocks_empty = std::fs::metadata(&path).unwrap().blocks();
    assert!(
        blocks_empty < 64,
        "a new file is sparse (st_blocks {blocks_empty})"
    );

    store.write_at(0, &vec![0x55; (8 * MIB) as usize]).unwrap();
    store.flush().unwrap();
    let blocks_written = std::fs::metadata(&path).unwrap().blocks();
    assert!(
        blocks_written >= 8 * MIB / 512,
        "writes allocate (st_blocks {blocks_written})"
    );

    store.unmap(0, 8 * MIB).unwrap();
    let blocks_unmapped = std::fs::metadata(&path).unwrap().blocks();
    assert!(
        blocks_unmapped < blocks_written / 2,
        "unmap frees blocks: {blocks_written} -> {blocks_unmapped}"
    );
    let mut back = vec![1u8; (8 * MIB) as usize];
    store.read_at(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0));
}

#[test]
fn block_store_on_a_regular_file() {
    // A real block device needs privileges; a regular file exercises the same
    // positional I/O and the size-by-seek path.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    std::fs::write(&path, vec![0u8; (4 * MIB + 512) as usize]).unwrap();
    let store = BlockStore::open(&path, false).unwrap();
    assert_eq!(store.size_bytes(), 4 * MIB + 512);
    assert_eq!(store.kind(), "block");
    round_trip(&store);
    out_of_range(&store);
    unmap_and_zeroes_read_zeros(&store);
    store.flush().unwrap();

    let read_only = BlockStore::open(&path, true).unwrap();
    assert!(matches!(
        read_only.write_at(0, b"x"),
        Err(StoreError::ReadOnly)
    ));
    assert!(BlockStore::open(&dir.path().join("missing"), true).is_err());
}

/// What `allocation` reports after writes and unmaps, at 4 KiB granularity
/// (memory pages; file system blocks on tmpfs, ext4 and xfs alike).
fn allocation_tracks_holes(store: &dyn Store) {
    let size = store.size_bytes();
    let first = store.allocation(0, size).unwrap();
    assert!(!first.mapped && first.len_bytes == size, "{first:?}");
    store.write_at(MIB, &[7u8; 64 * 1024]).unwrap();
    let hole = store.allocation(0, size).unwrap();
    assert!(!hole.mapped && hole.len_bytes == MIB, "{hole:?}");
    let data = store.allocation(MIB, size - MIB).unwrap();
    assert!(data.mapped && data.len_bytes == 64 * 1024, "{data:?}");
    store.unmap(MIB + 16 * 1024, 16 * 1024).unwrap();
    let data = store.allocation(MIB, size - MIB).unwrap();
    assert!(data.mapped && data.len_bytes == 16 * 1024, "{data:?}");
    let punched = store.allocation(MIB + 16 * 1024, 4096).unwrap();
    assert!(!punched.mapped && punched.len_bytes == 4096, "{punched:?}");
    assert!(store.allocation(size, 1).is_err());
}

#[test]
fn memory_and_file_stores_report_holes() {
    allocation_tracks_holes(&MemoryStore::new(4 * MIB));
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(&dir.path().join("holes.img"), Some(4 * MIB)).unwrap();
    allocation_tracks_holes(&store);
}

#[test]
fn block_store_reports_everything_mapped_or_its_holes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    std::fs::write(&path, vec![1u8; (2 * MIB) as usize]).unwrap();
    let store = BlockStore::open(&path, false).unwrap();
    let all = store.allocation(0, 2 * MIB).unwrap();
    assert!(all.mapped && all.len_bytes == 2 * MIB, "{all:?}");
}

#[test]
fn failing_store_passes_everything_through_before_its_countdown_ends() {
    let store = FailingStore::new(
        MemoryStore::new(4 * MIB + 512),
        Ops::ALL,
        u64::MAX,
        Fault::Io,
    );
    assert_eq!(store.size_bytes(), 4 * MIB + 512);
    assert_eq!(store.kind(), "memory");
    round_trip(&store);
    out_of_range(&store);
    unmap_and_zeroes_read_zeros(&store);
    allocation_tracks_holes(&FailingStore::new(
        MemoryStore::new(8 * MIB),
        Ops::ALL,
        u64::MAX,
        Fault::Io,
    ));
    // The inner store's count of never-written bytes read, passed through.
    let before = store.unwritten_read_bytes().expect("memory knows");
    store.read_at(4 * MIB, &mut [0u8; 512]).unwrap();
    assert_eq!(store.unwritten_read_bytes(), Some(before + 512));
    store.flush().unwrap();
    assert_eq!(store.failures(), 0);
}

#[test]
fn failing_store_counts_only_the_watched_operations() {
    let store = FailingStore::new(MemoryStore::new(MIB), Ops::WRITE, 2, Fault::Io);
    let mut buf = [0u8; 512];
    for _ in 0..5 {
        store.read_at(0, &mut buf).unwrap();
        store.flush().unwrap();
        store.unmap(0, 512).unwrap();
    }
    store.write_at(0, &[1; 512]).unwrap();
    store.write_at(512, &[2; 512]).unwrap();
    assert_eq!(store.failures(), 0);
    let error = store.write_at(1024, &[3; 512]).unwrap_err();
    assert!(
        matches!(error, StoreError::Io { op: "write", offset: 1024, ref source }
            if source.raw_os_error() == Some(libc::EIO)),
        "{error:?}"
    );
    // A full or broken medium stays so: every later write fails too, and
    // none reaches the inner store.
    assert!(store.write_at(0, &[9; 512]).is_err());
    assert_eq!(store.failures(), 2);
    store.read_at(0, &mut buf).unwrap();
    assert_eq!(buf, [1; 512], "a failed write changed nothing");
    store.read_at(1024, &mut buf).unwrap();
    assert_eq!(buf, [0; 512]);
    store.recover();
    store.write_at(1024, &[3; 512]).unwrap();
    store.read_at(1024, &mut buf).unwrap();
    assert_eq!(buf, [3; 512]);
    assert_eq!(store.failures(), 2);
}

#[test]
fn failing_store_faults_are_the_operating_system_errors() {
    for (fault, errno, no_space) in [
        (Fault::Io, libc::EIO, false),
        (Fault::NoSpace, libc::ENOSPC, true),
        (Fault::QuotaExceeded, libc::EDQUOT, true),
    ] {
        let store = FailingStore::new(MemoryStore::new(MIB), Ops::ALL, 0, fault);
        let mut buf = [0u8; 512];
        let mut appended = vec![7u8];
        let errors = [
            store.read_at(0, &mut buf).unwrap_err(),
            store.read_append(0, 512, &mut appended).unwrap_err(),
            store.write_at(0, &buf).unwrap_err(),
            store.flush().unwrap_err(),
            store.unmap(0, 512).unwrap_err(),
            store.write_zeroes(0, 512).unwrap_err(),
            store.allocation(0, 512).unwrap_err(),
        ];
        assert_eq!(
            appended,
            [7],
            "a failed read_append leaves the Vec as it was"
        );
        for error in &errors {
            assert_eq!(error.is_no_space(), no_space, "{fault:?}: {error:?}");
            let source = std::error::Error::source(error).expect("the OS error");
            let source = source
                .downcast_ref::<std::io::Error>()
                .expect("an io::Error");
            assert_eq!(source.raw_os_error(), Some(errno), "{fault:?}: {error}");
        }
        assert_eq!(store.failures(), errors.len() as u64);
    }
}

#[test]
fn failing_store_watches_each_kind_of_operation_on_its_own() {
    let cases = [
        (Ops::READ, "read"),
        (Ops::FLUSH, "flush"),
        (Ops::UNMAP, "unmap"),
        (Ops::WRITE_ZEROES, "write_zeroes"),
    ];
    for (ops, failing) in cases {
        let store = FailingStore::new(MemoryStore::new(MIB), ops, 0, Fault::NoSpace);
        let mut buf = [0u8; 512];
        let outcomes = [
            ("read", store.read_at(0, &mut buf).is_err()),
            ("write", store.write_at(0, &buf).is_err()),
            ("flush", store.flush().is_err()),
            ("unmap", store.unmap(0, 512).is_err()),
            ("write_zeroes", store.write_zeroes(0, 512).is_err()),
        ];
        for (op, failed) in outcomes {
            assert_eq!(failed, op == failing, "{ops:?}: {op}");
        }
    }
    assert!((Ops::READ | Ops::WRITE).contains(Ops::WRITE));
    assert!(!(Ops::READ | Ops::WRITE).contains(Ops::FLUSH));
}

/// `without_waiting`: a file's cached pages are read at once; pages the
/// kernel dropped from its cache, a write and a flush would wait, so they
/// fail with WouldBlock and the mode says so; the same calls outside the
/// mode go through. A memory store never waits.
#[test]
fn calls_made_without_waiting_on_the_device() {
    use isoe_store::without_waiting;
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lun.img");
    let store = FileStore::open(&path, Some(1 << 20)).unwrap();
    let data = pattern(64 << 10, 9);
    store.write_at(0, &data).unwrap();
    let mut buf = vec![0u8; data.len()];
    let (result, blocked) = without_waiting(|| store.read_at(0, &mut buf));
    result.unwrap();
    assert!(!blocked, "the pages just written are in the cache");
    assert_eq!(buf, data);
    for (op, result) in [
        ("pwrite", without_waiting(|| store.write_at(0, &data))),
        ("fdatasync", without_waiting(|| store.flush())),
        ("fallocate", without_waiting(|| store.unmap(0, 4096))),
    ] {
        assert!(result.1, "{op} would wait");
        assert!(
            matches!(result.0, Err(StoreError::WouldBlock { op: o }) if o == op),
            "{op}"
        );
    }
    // Clean pages dropped from the cache must come from the device.
    store.flush().unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: a valid descriptor; the call only advises the kernel.
    let advised = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(advised, 0);
    let (result, blocked) = without_waiting(|| store.read_at(0, &mut buf));
    if blocked {
        assert!(result.unwrap_err().is_would_block());
    } else {
        // A file system that keeps the pages anyway (tmpfs) reads them.
        result.unwrap();
    }
    buf.fill(0);
    store.read_at(0, &mut buf).unwrap();
    assert_eq!(buf, data, "outside the mode the read waits and succeeds");
    let memory = MemoryStore::new(1 << 20);
    let ((), blocked) = without_waiting(|| {
        memory.write_at(0, &data).unwrap();
        memory.flush().unwrap();
    });
    assert!(!blocked);
}
