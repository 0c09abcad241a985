//! RbdStore against a real cluster: `scripts/ceph-cluster start` prints the
//! variables these tests read (CEPH_CONF, CEPH_KEYRING, CEPH_ID, CEPH_POOL);
//! `.ci/run` starts one and exports them. Without them the tests say so and
//! pass, except under CI, where they fail.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;

use isoe_rbd::{ClusterSpec, RbdSpec, RbdStore};
use isoe_store::{Io, IoKind, Store};

fn cluster() -> Option<(ClusterSpec, String)> {
    let Ok(conf) = std::env::var("CEPH_CONF") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run these against a cluster: CEPH_CONF is not set (scripts/ceph-cluster start)"
        );
        eprintln!("skipped: no CEPH_CONF (scripts/ceph-cluster start prints it)");
        return None;
    };
    let spec = ClusterSpec {
        conf: PathBuf::from(conf),
        id: std::env::var("CEPH_ID").unwrap_or_else(|_| "admin".into()),
        keyring: std::env::var_os("CEPH_KEYRING").map(PathBuf::from),
    };
    Some((
        spec,
        std::env::var("CEPH_POOL").unwrap_or_else(|_| "rbd".into()),
    ))
}

/// A new image name for each test, so that reruns and parallel tests do not meet.
fn fresh(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("isoe-test-{tag}-{}-{nanos}", std::process::id())
}

fn open(cluster: &ClusterSpec, pool: &str, image: &str, create_bytes: Option<u64>) -> RbdStore {
    RbdStore::open(&RbdSpec {
        cluster: cluster.clone(),
        pool: pool.into(),
        namespace: None,
        image: image.into(),
        create_bytes,
    })
    .unwrap_or_else(|e| panic!("open {pool}/{image}: {e}"))
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i / 512) as u8) ^ (i as u8))
        .collect()
}

#[test]
fn an_image_is_created_once_and_keeps_its_identity() {
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let name = fresh("identity");
    let missing = RbdStore::open(&RbdSpec {
        cluster: cluster.clone(),
        pool: pool.clone(),
        namespace: None,
        image: name.clone(),
        create_bytes: None,
    })
    .expect_err("a missing image without a size is refused");
    assert!(
        missing.to_string().contains("no size was given"),
        "{missing}"
    );
    let first = open(&cluster, &pool, &name, Some(64 << 20));
    assert_eq!(first.size_bytes(), 64 << 20);
    assert_eq!(first.kind(), "rbd");
    // A second opener (another gateway) with another size sees the same image.
    let second = open(&cluster, &pool, &name, Some(128 << 20));
    assert_eq!(
        second.size_bytes(),
        64 << 20,
        "an existing image keeps its size"
    );
    assert_eq!(first.identity(), second.identity());
    assert_eq!(
        first.identity().unwrap().split('/').count(),
        4,
        "{:?}",
        first.identity()
    );
    let other = open(&cluster, &pool, &fresh("other"), Some(1 << 20));
    assert_ne!(first.identity(), other.identity());
}

#[test]
fn bad_pools_and_names_are_refused_with_the_reason() {
    let Some((cluster, _)) = cluster() else {
        return;
    };
    let error = RbdStore::open(&RbdSpec {
        cluster: cluster.clone(),
        pool: "no-such-pool".into(),
        namespace: None,
        image: "x".into(),
        create_bytes: Some(1 << 20),
    })
    .expect_err("a missing pool");
    let text = error.to_string();
    assert!(
        text.contains("no-such-pool") && text.contains("No such file"),
        "{text}"
    );
    assert!(RbdSpec::parse_name("rbd/img@snap").is_err());
    assert!(RbdSpec::parse_name("rbd//img").is_err());
    assert!(RbdSpec::parse_name("img").is_err());
    assert_eq!(
        RbdSpec::parse_name("rbd/ns/img").unwrap(),
        ("rbd".into(), Some("ns".into()), "img".into())
    );
    let bad_conf = ClusterSpec {
        conf: "/nonexistent/ceph.conf".into(),
        ..cluster
    };
    let error = RbdStore::open(&RbdSpec {
        cluster: bad_conf,
        pool: "rbd".into(),
        namespace: None,
        image: "x".into(),
        create_bytes: None,
    })
    .expect_err("a missing configuration file");
    assert!(
        error.to_string().contains("/nonexistent/ceph.conf"),
        "{error}"
    );
}

#[test]
fn blocking_calls_read_what_was_written_and_deallocate() {
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let store = open(&cluster, &pool, &fresh("sync"), Some(16 << 20));
    let data = pattern(7, 64 << 10);
    store.write_at(4 << 20, &data).unwrap();
    let mut back = vec![0; data.len()];
    store.read_at(4 << 20, &mut back).unwrap();
    assert_eq!(back, data);
    store.flush().unwrap();

    // Never written: a hole; written: mapped.
    let hole = store.allocation(0, 1 << 20).unwrap();
    assert!(!hole.mapped, "{hole:?}");
    let mapped = store.allocation(4 << 20, 64 << 10).unwrap();
    assert!(mapped.mapped, "{mapped:?}");
    let before = store.allocation(3 << 20, 2 << 20).unwrap();
    assert_eq!((before.mapped, before.len_bytes), (false, 1 << 20));

    store.write_zeroes(4 << 20, 4096).unwrap();
    store.read_at(4 << 20, &mut back[..8192]).unwrap();
    assert!(back[..4096].iter().all(|&b| b == 0));
    assert_eq!(back[4096..8192], data[4096..8192]);
    store.unmap(4 << 20, 4 << 20).unwrap();
    store.read_at(4 << 20, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0), "unmapped data reads as zeros");
    assert!(!store.allocation(4 << 20, 4 << 20).unwrap().mapped);

    let outside = store.read_at((16 << 20) - 512, &mut back[..1024]);
    assert!(matches!(
        outside,
        Err(isoe_store::StoreError::OutOfRange { .. })
    ));
}

#[test]
fn compare_and_write_writes_on_a_match_and_names_the_first_difference() {
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let store = open(&cluster, &pool, &fresh("caw"), Some(16 << 20));
    let len = 512;
    let old = pattern(1, len);
    let new = pattern(2, len);
    store.write_at(8192, &old).unwrap();
    let too_long = pattern(3, 1024);
    assert!(
        store
            .compare_and_write(8192, &too_long, &too_long)
            .is_none(),
        "librbd 16 compares one 512-byte sector at most"
    );
    let written = store
        .compare_and_write(8192, &old, &new)
        .expect("rbd has it");
    assert_eq!(written.unwrap(), None);
    let mut back = vec![0; len];
    store.read_at(8192, &mut back).unwrap();
    assert_eq!(back, new);
    let mut stale = new.clone();
    stale[100] ^= 0xff;
    let refused = store
        .compare_and_write(8192, &stale, &old)
        .unwrap()
        .unwrap();
    assert_eq!(refused, Some(100), "the offset within the range");
    store.read_at(8192, &mut back).unwrap();
    assert_eq!(back, new, "nothing written on a mismatch");
}

#[test]
fn many_asynchronous_requests_in_flight_complete_each_once() {
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let store = Arc::new(open(&cluster, &pool, &fresh("aio"), Some(32 << 20)));
    let asynchronous = store.asynchronous().expect("rbd is asynchronous");
    let (tx, rx) = mpsc::channel();
    const COUNT: usize = 64;
    for i in 0..COUNT {
        let tx = tx.clone();
        let io = Io {
            kind: IoKind::Write {
                offset: (i as u64) * (256 << 10),
                fua: i % 2 == 0,
            },
            buffer: pattern(i as u8, 256 << 10),
        };
        asynchronous.submit(
            io,
            Box::new(move |io, result| tx.send((i, io, result)).unwrap()),
        );
    }
    let mut seen = [false; COUNT];
    for _ in 0..COUNT {
        let (i, io, result) = rx.recv().unwrap();
        result.unwrap();
        assert!(!seen[i], "request {i} completed twice");
        seen[i] = true;
        assert_eq!(io.buffer.len(), 256 << 10, "the buffer comes back");
    }
    let flush = Io {
        kind: IoKind::Flush,
        buffer: Vec::new(),
    };
    let tx2 = tx.clone();
    asynchronous.submit(
        flush,
        Box::new(move |io, result| tx2.send((usize::MAX, io, result)).unwrap()),
    );
    rx.recv().unwrap().2.unwrap();
    for i in 0..COUNT {
        let tx = tx.clone();
        // A read appends after what the buffer already holds.
        let io = Io {
            kind: IoKind::Read {
                offset: (i as u64) * (256 << 10),
                len: 256 << 10,
            },
            buffer: vec![0xee; 3],
        };
        asynchronous.submit(
            io,
            Box::new(move |io, result| tx.send((i, io, result)).unwrap()),
        );
    }
    for _ in 0..COUNT {
        let (i, io, result) = rx.recv().unwrap();
        result.unwrap();
        assert_eq!(&io.buffer[..3], &[0xee; 3]);
        assert!(
            io.buffer[3..] == pattern(i as u8, 256 << 10),
            "read {i} differs"
        );
    }
    // A request outside the image ends at once, with the error.
    let io = Io {
        kind: IoKind::Read {
            offset: 32 << 20,
            len: 512,
        },
        buffer: Vec::new(),
    };
    asynchronous.submit(
        io,
        Box::new(move |io, result| tx.send((0, io, result)).unwrap()),
    );
    let (_, io, result) = rx.recv().unwrap();
    assert!(matches!(
        result,
        Err(isoe_store::StoreError::OutOfRange { .. })
    ));
    assert!(
        io.buffer.is_empty(),
        "a failed read leaves the buffer as it was"
    );
}

#[test]
fn a_channel_keeps_a_state_under_compare_and_set_and_notifies_every_watcher() {
    use isoe_rbd::{Channel, Written};
    use std::sync::Mutex;
    use std::time::Duration;
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let store = open(&cluster, &pool, &fresh("channel"), Some(1 << 20));
    type Heard = Arc<Mutex<Vec<(Option<Vec<u8>>, bool)>>>;
    let listener = |heard: &Heard| -> isoe_rbd::Handler {
        let heard = Arc::clone(heard);
        Arc::new(
            move |payload: Option<&[u8]>, own: bool, reply: isoe_rbd::Reply| {
                heard
                    .lock()
                    .unwrap()
                    .push((payload.map(<[u8]>::to_vec), own));
                if own {
                    reply.send(b"me");
                } else if payload == Some(b"later") {
                    // Acknowledged from another thread, a while after.
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(700));
                        reply.send(b"done later");
                    });
                } else {
                    reply.send(b"other");
                }
            },
        )
    };
    let (heard_a, heard_b): (Heard, Heard) = Default::default();
    let a = Channel::open(&store, listener(&heard_a)).expect("channel a");
    let b = Channel::open(&store, listener(&heard_b)).expect("channel b");
    assert_ne!(a.id(), b.id());

    let (empty, v0) = a.read().unwrap();
    assert!(empty.is_empty(), "nothing stored yet");
    let Written::Stored(v1) = a.write(b"one", v0).unwrap() else {
        panic!("a wrote at the version it read");
    };
    assert_eq!(
        b.write(b"two", v0).unwrap(),
        Written::Conflict,
        "a wrote first"
    );
    assert_eq!(b.read().unwrap(), (b"one".to_vec(), v1));
    let Written::Stored(v2) = b.write(b"two", v1).unwrap() else {
        panic!("b wrote at the version it read");
    };
    assert!(v2 > v1);
    assert_eq!(a.write(b"stale", v1).unwrap(), Written::Conflict);
    assert_eq!(a.read().unwrap(), (b"two".to_vec(), v2));

    // Both watchers acknowledge before notify returns, and have heard it.
    let notified = a.notify(b"changed", Duration::from_secs(10)).unwrap();
    assert_eq!(notified.missed, 0);
    let mut answers = notified.answers.clone();
    answers.sort();
    assert_eq!(
        answers,
        vec![b"me".to_vec(), b"other".to_vec()],
        "each watcher's answer"
    );
    assert_eq!(
        *heard_a.lock().unwrap(),
        vec![(Some(b"changed".to_vec()), true)]
    );
    assert_eq!(
        *heard_b.lock().unwrap(),
        vec![(Some(b"changed".to_vec()), false)]
    );
    // A reply kept and sent later from another thread: notify waits for it.
    let started = std::time::Instant::now();
    let notified = a.notify(b"later", Duration::from_secs(10)).unwrap();
    assert_eq!(notified.missed, 0);
    assert!(
        notified.answers.contains(&b"done later".to_vec()),
        "the late answer came back: {:?}",
        notified.answers
    );
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "notify returned before the reply was sent"
    );
    drop(b);
    let notified = a.notify(b"again", Duration::from_secs(10)).unwrap();
    assert_eq!(
        notified.answers.len(),
        1,
        "a closed channel no longer watches"
    );
}

#[test]
fn the_exclusive_lock_follows_writes_and_can_be_taken() {
    let Some((cluster, pool)) = cluster() else {
        return;
    };
    let name = fresh("lock");
    let a = open(&cluster, &pool, &name, Some(1 << 20));
    let b = open(&cluster, &pool, &name, None);
    assert!(
        !a.is_lock_owner().unwrap() && !b.is_lock_owner().unwrap(),
        "nobody wrote yet"
    );
    a.write_at(0, &[1; 512]).unwrap();
    assert!(a.is_lock_owner().unwrap());
    b.take_lock().unwrap();
    assert!(b.is_lock_owner().unwrap(), "b took it");
    assert!(!a.is_lock_owner().unwrap(), "a released it when asked");
    a.write_at(512, &[2; 512]).unwrap();
    assert!(a.is_lock_owner().unwrap(), "a write takes it back");
    let mut back = [0u8; 1024];
    b.read_at(0, &mut back).unwrap();
    assert!(back[..512].iter().all(|&x| x == 1) && back[512..].iter().all(|&x| x == 2));
}

/// Runs a Ceph command-line tool against the test cluster; its stdout.
fn ceph_tool(cluster: &ClusterSpec, tool: &str, args: &[&str]) -> String {
    let mut command = std::process::Command::new(tool);
    command
        .arg("-c")
        .arg(&cluster.conf)
        .args(["--id", &cluster.id]);
    if let Some(keyring) = &cluster.keyring {
        command.arg("-k").arg(keyring);
    }
    let out = command.args(args).output().expect("run a ceph tool");
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The address of the one client watching image `pool/name`.
fn watcher(cluster: &ClusterSpec, pool: &str, name: &str) -> String {
    let status = ceph_tool(
        cluster,
        "rbd",
        &["status", "--format", "json", &format!("{pool}/{name}")],
    );
    let start = status.find("\"address\":\"").expect("a watcher") + "\"address\":\"".len();
    let end = start + status[start..].find('"').expect("the address ends");
    status[start..end].to_string()
}

/// A connection of its own for one test (the process's other tests share
/// theirs): the same configuration, read from another path.
fn own_connection(shared: ClusterSpec, tag: &str) -> ClusterSpec {
    let conf = std::env::temp_dir().join(format!("{}.conf", fresh(tag)));
    std::fs::copy(&shared.conf, &conf).expect("copy ceph.conf");
    ClusterSpec { conf, ..shared }
}

/// Blocklists the client watching `image` (`pool/name`) and writes until
/// the OSDs refuse it (once the new map reaches them); its address.
fn blocklist(cluster: &ClusterSpec, pool: &str, name: &str, image: &RbdStore) -> String {
    let address = watcher(cluster, pool, name);
    ceph_tool(cluster, "ceph", &["osd", "blocklist", "add", &address]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while image.write_at(0, &[2; 512]).is_ok() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    address
}

/// The cluster blocklists a client instance: once one image learns it was
/// fenced, every image opened through that connection is, and an image
/// opened afterwards (or [`RbdStore::reopen`]) gets a new connection that
/// the blocklist does not name, and serves.
#[test]
fn a_fenced_connection_is_never_handed_out_again() {
    let Some((shared, pool)) = cluster() else {
        return;
    };
    let cluster = own_connection(shared, "fence");
    let (name, other_name) = (fresh("fence"), fresh("fence-other"));
    let image = open(&cluster, &pool, &name, Some(1 << 20));
    let other = open(&cluster, &pool, &other_name, Some(1 << 20));
    image.write_at(0, &[1; 512]).unwrap();
    let address = blocklist(&cluster, &pool, &name, &image);
    assert!(image.is_fenced(), "the blocklisted client is fenced");
    assert!(
        other.is_fenced(),
        "so is every image through its connection"
    );

    let again = open(&cluster, &pool, &name, None);
    assert!(!again.is_fenced());
    again
        .write_at(0, &[3; 512])
        .expect("a write through a new connection");
    let reopened = image.reopen().expect("reopen");
    let mut back = [0u8; 512];
    reopened.read_at(0, &mut back).unwrap();
    assert!(
        back.iter().all(|&x| x == 3),
        "reads what the new connection wrote"
    );
    assert_ne!(
        watcher(&cluster, &pool, &name),
        address,
        "the image is watched through another client instance"
    );
    ceph_tool(&cluster, "ceph", &["osd", "blocklist", "rm", &address]);
    let _ = std::fs::remove_file(&cluster.conf);
}

/// A fenced image's client instance is not kept for the life of the
/// process: once the image is dropped, and librbd holds none of its
/// requests (one sent after the fence is refused at once), the image is
/// closed and the connection shut down, while the new connection serves.
#[test]
fn a_fenced_image_is_closed_and_its_connection_shut_down() {
    let Some((shared, pool)) = cluster() else {
        return;
    };
    let cluster = own_connection(shared, "closed");
    let name = fresh("closed");
    let image = open(&cluster, &pool, &name, Some(1 << 20));
    image.write_at(0, &[1; 512]).unwrap();
    assert_eq!(isoe_rbd::connections(&cluster), 1);
    let address = blocklist(&cluster, &pool, &name, &image);
    assert!(image.is_fenced(), "the blocklisted client is fenced");
    let (tx, rx) = mpsc::channel();
    image.asynchronous().expect("rbd is asynchronous").submit(
        Io {
            kind: IoKind::Write {
                offset: 512,
                fua: false,
            },
            buffer: vec![2; 512],
        },
        Box::new(move |_, result| tx.send(result).unwrap()),
    );
    let refused = rx
        .recv_timeout(std::time::Duration::from_secs(1))
        .expect("a write sent after the fence is answered at once");
    assert!(refused.is_err(), "as failed: {refused:?}");

    let again = open(&cluster, &pool, &name, None);
    assert_eq!(
        isoe_rbd::connections(&cluster),
        2,
        "a new client instance beside the fenced one"
    );
    let dropped = std::time::Instant::now();
    drop(image);
    let deadline = dropped + std::time::Duration::from_secs(120);
    while isoe_rbd::connections(&cluster) > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eprintln!(
        "fenced connection shut down {:?} after its image was dropped",
        dropped.elapsed()
    );
    assert_eq!(
        isoe_rbd::connections(&cluster),
        1,
        "the fenced client instance was shut down"
    );
    again
        .write_at(0, &[3; 512])
        .expect("the new connection serves");
    ceph_tool(&cluster, "ceph", &["osd", "blocklist", "rm", &address]);
    let _ = std::fs::remove_file(&cluster.conf);
}
