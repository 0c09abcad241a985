//! The wire side against a socket pair whose other end the test plays as
//! the kernel's driver would, and the setup's error paths on a fake host.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::proto::*;
use super::sys::Host;
use super::*;
use crate::device::Op;

fn limits(depth: u16, buffer: u32) -> Limits {
    Limits {
        capacity_bytes: 1 << 30,
        read_only: false,
        discard: true,
        buffer_bytes: buffer,
        queue_depth: depth,
    }
}

/// Our end as a Conn, the kernel's as a blocking stream.
fn pair(limits: Limits) -> (Conn, UnixStream) {
    let (ours, kernel) = UnixStream::pair().unwrap();
    let conn = Conn::new(OwnedFd::from(ours), limits).unwrap();
    kernel
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (conn, kernel)
}

fn header(kind: u16, flags: u16, handle: u64, offset: u64, len: u32) -> [u8; REQUEST_LEN] {
    Header {
        flags,
        kind,
        handle: handle.to_be_bytes(),
        offset,
        len,
    }
    .encode()
}

fn take(conn: &mut Conn) -> Vec<Request> {
    let mut out = Vec::new();
    assert!(conn.take_requests(&mut out).unwrap(), "the device ended");
    out
}

/// Reads one reply: (error, handle).
fn read_reply(kernel: &mut UnixStream) -> (u32, u64) {
    let mut b = [0u8; REPLY_LEN];
    kernel.read_exact(&mut b).unwrap();
    assert_eq!(u32::from_be_bytes(b[0..4].try_into().unwrap()), REPLY_MAGIC);
    (
        u32::from_be_bytes(b[4..8].try_into().unwrap()),
        u64::from_be_bytes(b[8..16].try_into().unwrap()),
    )
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn readable(fd: std::os::fd::RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

#[test]
fn header_round_trips_and_checks_its_magic() {
    let h = Header {
        flags: CMD_FLAG_FUA,
        kind: CMD_WRITE,
        handle: *b"handle!!",
        offset: 0x1234_5678_9abc,
        len: 65536,
    };
    let raw = h.encode();
    assert_eq!(&raw[0..4], &[0x25, 0x60, 0x95, 0x13]);
    assert_eq!(&raw[4..8], &[0, 1, 0, 1], "flags then type, big-endian");
    assert_eq!(Header::parse(&raw), Some(h));
    let mut bad = raw;
    bad[0] ^= 1;
    assert_eq!(Header::parse(&bad), None);
    let reply = encode_reply(*b"handle!!", 5);
    assert_eq!(
        &reply[..],
        &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 5, b'h', b'a', b'n', b'd', b'l', b'e', b'!', b'!']
    );
}

#[test]
fn several_requests_in_one_read_map_to_slots_with_their_flags() {
    let (mut conn, mut kernel) = pair(limits(8, 4096));
    let mut burst = Vec::new();
    burst.extend_from_slice(&header(CMD_READ, 0, 1, 4096, 4096));
    burst.extend_from_slice(&header(CMD_FLUSH, 0, 2, 0, 0));
    burst.extend_from_slice(&header(CMD_TRIM, 0, 3, 1 << 20, 1 << 20));
    burst.extend_from_slice(&header(
        CMD_WRITE_ZEROES,
        CMD_FLAG_NO_HOLE | CMD_FLAG_FUA,
        4,
        8192,
        512,
    ));
    burst.extend_from_slice(&header(CMD_WRITE_ZEROES, 0, 5, 0, 512));
    burst.extend_from_slice(&header(CMD_WRITE, CMD_FLAG_FUA, 6, 512, 512));
    burst.extend_from_slice(&[0xaa; 512]);
    kernel.write_all(&burst).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 6);
    let ops: Vec<Op> = got.iter().map(|r| r.op).collect();
    assert_eq!(
        ops,
        [
            Op::Read,
            Op::Flush,
            Op::Discard,
            Op::WriteZeroes,
            Op::WriteZeroes,
            Op::Write
        ]
    );
    let mut tags: Vec<u16> = got.iter().map(|r| r.tag).collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), 6, "one slot each");
    assert!(tags.iter().all(|&t| t < 8));
    assert_eq!((got[0].offset, got[0].len, got[0].fua), (4096, 4096, false));
    assert_eq!((got[1].offset, got[1].len), (0, 0));
    assert_eq!((got[2].offset, got[2].len), (1 << 20, 1 << 20));
    assert!(got[3].no_unmap && got[3].fua);
    assert!(!got[4].no_unmap && !got[4].fua);
    assert!(got[5].fua && !got[5].no_unmap);
    let buf = conn.take_buffer(got[5].tag);
    assert!(buf.len() >= 4096, "buffers are max_io_bytes long");
    assert_eq!(&buf[..512], &[0xaa; 512][..]);
}

#[test]
fn partial_headers_wait_for_the_rest() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    let raw = header(CMD_READ, 0, 7, 0, 512);
    kernel.write_all(&raw[..5]).unwrap();
    assert!(take(&mut conn).is_empty());
    kernel.write_all(&raw[5..27]).unwrap();
    assert!(take(&mut conn).is_empty());
    // The last byte, and half of the next header.
    let next = header(CMD_FLUSH, 0, 8, 0, 0);
    kernel.write_all(&raw[27..]).unwrap();
    kernel.write_all(&next[..14]).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].op, got[0].len), (Op::Read, 512));
    kernel.write_all(&next[14..]).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].op, Op::Flush);
}

#[test]
fn a_write_payload_split_across_reads_lands_whole_in_its_slot() {
    for len in [4096usize, 256 << 10] {
        let (mut conn, mut kernel) = pair(limits(4, 256 << 10));
        let data = pattern(3, len);
        kernel
            .write_all(&header(CMD_WRITE, 0, 9, 8192, len as u32))
            .unwrap();
        kernel.write_all(&data[..100]).unwrap();
        assert!(take(&mut conn).is_empty(), "not before the whole payload");
        kernel.write_all(&data[100..len / 2]).unwrap();
        assert!(take(&mut conn).is_empty());
        // The rest, then a read behind it in the same write.
        let mut tail = data[len / 2..].to_vec();
        tail.extend_from_slice(&header(CMD_READ, 0, 10, 0, 512));
        let writer = {
            let mut k = kernel.try_clone().unwrap();
            std::thread::spawn(move || k.write_all(&tail).unwrap())
        };
        let mut got = Vec::new();
        while got.len() < 2 {
            assert!(readable(conn.wake_fd(), 5000));
            assert!(conn.take_requests(&mut got).unwrap());
        }
        writer.join().unwrap();
        assert_eq!(
            (got[0].op, got[0].offset, got[0].len),
            (Op::Write, 8192, len as u32)
        );
        assert_eq!(got[1].op, Op::Read);
        let buf = conn.take_buffer(got[0].tag);
        assert_eq!(&buf[..len], &data[..], "payload of {len} bytes");
        conn.complete(got[0].tag, buf, Ok(()));
        conn.flush().unwrap();
        assert_eq!(read_reply(&mut kernel), (0, 9));
    }
}

#[test]
fn replies_carry_the_handle_the_error_and_a_reads_data() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    kernel
        .write_all(&header(CMD_READ, 0, 0x1111, 0, 1024))
        .unwrap();
    kernel
        .write_all(&header(CMD_READ, 0, 0x2222, 0, 1024))
        .unwrap();
    kernel
        .write_all(&header(CMD_FLUSH, 0, 0x3333, 0, 0))
        .unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 3);
    // Out of order, one failing, one never taking the buffer.
    conn.complete(got[2].tag, Vec::new(), Ok(()));
    let mut buf = conn.take_buffer(got[1].tag);
    buf[..4].copy_from_slice(b"junk");
    conn.complete(got[1].tag, buf, Err(libc::ENOSPC));
    let mut buf = conn.take_buffer(got[0].tag);
    let data = pattern(7, 1024);
    buf[..1024].copy_from_slice(&data);
    conn.complete(got[0].tag, buf, Ok(()));
    conn.flush().unwrap();
    assert_eq!(read_reply(&mut kernel), (0, 0x3333));
    assert_eq!(
        read_reply(&mut kernel),
        (libc::ENOSPC as u32, 0x2222),
        "no data after an error"
    );
    assert_eq!(read_reply(&mut kernel), (0, 0x1111));
    let mut back = vec![0u8; 1024];
    kernel.read_exact(&mut back).unwrap();
    assert_eq!(back, data);
    // The slots are free again: four more fit.
    for h in 0..4 {
        kernel.write_all(&header(CMD_FLUSH, 0, h, 0, 0)).unwrap();
    }
    assert_eq!(take(&mut conn).len(), 4);
}

#[test]
fn a_full_socket_keeps_replies_queued_and_wakes_when_it_drains() {
    const READS: usize = 16;
    const LEN: usize = 256 << 10;
    let (mut conn, mut kernel) = pair(limits(READS as u16, LEN as u32));
    for h in 0..READS {
        kernel
            .write_all(&header(CMD_READ, 0, h as u64, (h * LEN) as u64, LEN as u32))
            .unwrap();
    }
    let mut got = Vec::new();
    while got.len() < READS {
        assert!(conn.take_requests(&mut got).unwrap());
    }
    for r in &got {
        let mut buf = conn.take_buffer(r.tag);
        buf[..LEN].copy_from_slice(&pattern(r.offset as u8 ^ 0x5a, LEN));
        conn.complete(r.tag, buf, Ok(()));
    }
    // 4 MiB of replies: more than a unix socket holds.
    conn.flush().unwrap();
    assert!(
        conn.queued_replies() > 0,
        "the socket took everything at once"
    );
    assert!(
        !readable(conn.wake_fd(), 50),
        "no wake while the socket is full"
    );
    let reader = std::thread::spawn(move || {
        let mut replies = Vec::new();
        for _ in 0..READS {
            let (err, handle) = read_reply(&mut kernel);
            let mut data = vec![0u8; LEN];
            kernel.read_exact(&mut data).unwrap();
            replies.push((err, handle, data));
        }
        (replies, kernel)
    });
    // What a serving loop does: wait on the wake fd, flush again.
    while conn.queued_replies() > 0 {
        assert!(
            readable(conn.wake_fd(), 5000),
            "stalled with replies queued"
        );
        let mut none = Vec::new();
        assert!(conn.take_requests(&mut none).unwrap());
        assert!(none.is_empty());
        conn.flush().unwrap();
    }
    let (replies, _kernel) = reader.join().unwrap();
    assert_eq!(replies.len(), READS);
    for (err, handle, data) in replies {
        assert_eq!(err, 0);
        let offset = handle as usize * LEN;
        assert_eq!(
            data,
            pattern(offset as u8 ^ 0x5a, LEN),
            "reply {handle} intact"
        );
    }
    assert!(
        !readable(conn.wake_fd(), 50),
        "nothing queued, nothing to wake for"
    );
}

#[test]
fn unknown_types_and_requests_past_the_end_are_refused_at_once() {
    let (mut conn, mut kernel) = pair(Limits {
        capacity_bytes: 1 << 20,
        ..limits(4, 4096)
    });
    kernel.write_all(&header(5, 0, 1, 0, 0)).unwrap(); // NBD_CMD_CACHE: not ours
    kernel
        .write_all(&header(CMD_READ, 0, 2, (1 << 20) - 512, 1024))
        .unwrap();
    kernel
        .write_all(&header(CMD_WRITE, 0, 3, 1 << 20, 512))
        .unwrap();
    kernel.write_all(&[1u8; 512]).unwrap();
    kernel.write_all(&header(CMD_READ, 0, 4, 0, 512)).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 1, "only the good read gets through");
    assert_eq!(got[0].offset, 0);
    assert_eq!(read_reply(&mut kernel), (libc::EINVAL as u32, 1));
    assert_eq!(read_reply(&mut kernel), (libc::EINVAL as u32, 2));
    assert_eq!(
        read_reply(&mut kernel),
        (libc::ENOSPC as u32, 3),
        "after its payload was consumed"
    );
}

#[test]
fn beyond_the_queue_depth_requests_get_an_error_and_the_stream_stays_in_step() {
    let (mut conn, mut kernel) = pair(limits(2, 4096));
    for h in 0..3u64 {
        kernel
            .write_all(&header(CMD_WRITE, 0, h, h * 4096, 4096))
            .unwrap();
        kernel.write_all(&pattern(h as u8, 4096)).unwrap();
    }
    kernel.write_all(&header(CMD_FLUSH, 0, 99, 0, 0)).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 2);
    assert_eq!(read_reply(&mut kernel), (libc::ENOMEM as u32, 2));
    assert_eq!(
        read_reply(&mut kernel),
        (libc::ENOMEM as u32, 99),
        "the flush after it parsed, and refused too"
    );
    for r in &got {
        let buf = conn.take_buffer(r.tag);
        assert_eq!(
            &buf[..4096],
            &pattern((r.offset / 4096) as u8, 4096)[..],
            "payload {}",
            r.offset
        );
        conn.complete(r.tag, buf, Ok(()));
    }
    conn.flush().unwrap();
    let mut handles = [read_reply(&mut kernel).1, read_reply(&mut kernel).1];
    handles.sort_unstable();
    assert_eq!(handles, [0, 1]);
}

#[test]
fn a_request_longer_than_the_buffers_grows_its_slot() {
    let (mut conn, mut kernel) = pair(limits(2, 4096));
    let data = pattern(1, 64 << 10);
    kernel
        .write_all(&header(CMD_WRITE, 0, 1, 0, data.len() as u32))
        .unwrap();
    let writer = {
        let mut k = kernel.try_clone().unwrap();
        let data = data.clone();
        std::thread::spawn(move || k.write_all(&data).unwrap())
    };
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(readable(conn.wake_fd(), 5000));
        assert!(conn.take_requests(&mut got).unwrap());
    }
    writer.join().unwrap();
    assert_eq!(got[0].len, 64 << 10);
    let buf = conn.take_buffer(got[0].tag);
    assert_eq!(&buf[..data.len()], &data[..]);
    conn.complete(got[0].tag, buf, Ok(()));
    // Beyond the driver's own limit: refused.
    kernel
        .write_all(&header(CMD_READ, 0, 2, 0, DRIVER_MAX_IO_BYTES + 512))
        .unwrap();
    assert!(take(&mut conn).is_empty());
    assert_eq!(read_reply(&mut kernel), (0, 1));
    assert_eq!(read_reply(&mut kernel), (libc::EINVAL as u32, 2));
}

#[test]
fn disconnect_waits_for_requests_in_flight_then_ends() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    kernel.write_all(&header(CMD_READ, 0, 1, 0, 512)).unwrap();
    kernel.write_all(&header(CMD_DISC, 0, 0, 0, 0)).unwrap();
    // A request after the disconnect is refused.
    kernel.write_all(&header(CMD_FLUSH, 0, 2, 0, 0)).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 1, "still serving what is in flight");
    assert_eq!(read_reply(&mut kernel), (libc::ESHUTDOWN as u32, 2));
    let buf = conn.take_buffer(got[0].tag);
    conn.complete(got[0].tag, buf, Ok(()));
    conn.flush().unwrap();
    assert_eq!(read_reply(&mut kernel), (0, 1));
    let mut data = [0u8; 512];
    kernel.read_exact(&mut data).unwrap();
    // Then we close: the driver's receiver sees EOF, and our loop wakes.
    assert_eq!(kernel.read(&mut data).unwrap(), 0);
    assert!(readable(conn.wake_fd(), 1000), "the end wakes the loop");
    let mut out = Vec::new();
    assert!(!conn.take_requests(&mut out).unwrap());
    assert!(!conn.take_requests(&mut out).unwrap());
}

#[test]
fn disconnect_with_nothing_in_flight_ends_at_once() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    kernel.write_all(&header(CMD_DISC, 0, 0, 0, 0)).unwrap();
    let mut out = Vec::new();
    assert!(!conn.take_requests(&mut out).unwrap());
    assert!(out.is_empty());
    let mut b = [0u8; 1];
    assert_eq!(kernel.read(&mut b).unwrap(), 0);
}

#[test]
fn eof_ends_the_device_and_completions_after_it_are_dropped() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    kernel.write_all(&header(CMD_READ, 0, 1, 0, 512)).unwrap();
    let got = take(&mut conn);
    kernel.write_all(&header(CMD_READ, 0, 2, 0, 512)).unwrap();
    drop(kernel);
    let mut out = Vec::new();
    assert!(!conn.take_requests(&mut out).unwrap());
    assert!(out.is_empty(), "no requests handed out with the end");
    let buf = conn.take_buffer(got[0].tag);
    conn.complete(got[0].tag, buf, Ok(()));
    conn.flush().unwrap();
}

#[test]
fn a_reset_peer_while_replying_is_the_end_not_an_error() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    kernel.write_all(&header(CMD_FLUSH, 0, 1, 0, 0)).unwrap();
    let got = take(&mut conn);
    drop(kernel);
    conn.complete(got[0].tag, Vec::new(), Ok(()));
    conn.flush().unwrap();
    let mut out = Vec::new();
    assert!(!conn.take_requests(&mut out).unwrap());
}

#[test]
fn a_wrong_magic_is_an_error() {
    let (mut conn, mut kernel) = pair(limits(4, 4096));
    let mut raw = header(CMD_READ, 0, 1, 0, 512);
    raw[3] = 0;
    kernel.write_all(&raw).unwrap();
    let err = conn.take_requests(&mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}

#[test]
fn writes_to_a_read_only_device_are_refused() {
    let (mut conn, mut kernel) = pair(Limits {
        read_only: true,
        ..limits(4, 4096)
    });
    kernel.write_all(&header(CMD_WRITE, 0, 1, 0, 512)).unwrap();
    kernel.write_all(&[0u8; 512]).unwrap();
    kernel.write_all(&header(CMD_TRIM, 0, 2, 0, 512)).unwrap();
    kernel.write_all(&header(CMD_READ, 0, 3, 0, 512)).unwrap();
    let got = take(&mut conn);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].op, Op::Read);
    assert_eq!(read_reply(&mut kernel), (libc::EPERM as u32, 1));
    assert_eq!(read_reply(&mut kernel), (libc::EPERM as u32, 2));
}

fn fake_host(dir: &std::path::Path) -> Host {
    Host {
        sys_block: dir.join("sys/block"),
        sys_module: dir.join("sys/module/nbd"),
        dev: dir.join("dev"),
        modprobe: Some(dir.join("no-such-modprobe")),
    }
}

fn geometry() -> Geometry {
    Geometry {
        block_bytes: 512,
        physical_block_bytes: 4096,
        capacity_bytes: 1 << 30,
        max_io_bytes: 1 << 20,
        optimal_io_bytes: 0,
        discard: true,
        discard_granularity_bytes: 4096,
        discard_alignment_bytes: 0,
        max_discard_bytes: 1 << 30,
        max_write_zeroes_bytes: 1 << 30,
        read_only: false,
        volatile_cache: true,
        fua: true,
    }
}

#[test]
fn without_the_module_the_error_names_it_the_kernel_and_root() {
    let dir = tempfile::tempdir().unwrap();
    let host = fake_host(dir.path());
    let err = match Nbd::open_on(host, &geometry(), Options::default()) {
        Ok(_) => panic!("a device on an empty host"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(msg.contains("module nbd (CONFIG_BLK_DEV_NBD)"), "{msg}");
    assert!(msg.contains(&crate::modules::kernel_release()), "{msg}");
    assert!(msg.contains("root"), "{msg}");
    assert!(msg.contains("modprobe"), "{msg}");
}

/// On this very host: where the kernel has no nbd, opening fails with the
/// module's message (after one `modprobe nbd`), and nothing panics.
#[test]
fn on_this_host_without_nbd_open_says_why() {
    if std::path::Path::new("/sys/module/nbd").exists()
        || !Host::real().indexes().unwrap().is_empty()
    {
        eprintln!("this host has the nbd driver: nothing to check here");
        return;
    }
    let err = match Nbd::open(&geometry(), Options::default()) {
        Ok(_) => panic!("a device without the driver"),
        Err(e) => e,
    };
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains("CONFIG_BLK_DEV_NBD")
            && msg.contains(&crate::modules::kernel_release())
            && msg.contains("root"),
        "{msg}"
    );
    assert!(list().unwrap().is_empty());
}

#[test]
fn with_every_device_in_use_the_error_says_so_and_list_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let host = fake_host(dir.path());
    for index in [0, 1, 10] {
        let sys = host.sys(index);
        fs::create_dir_all(sys.join("queue")).unwrap();
        fs::write(sys.join("size"), "2048\n").unwrap();
    }
    fs::create_dir_all(&host.dev).unwrap();
    fs::write(host.sys(0).join("pid"), "1\n").unwrap();
    fs::write(host.sys(10).join("pid"), "999999999\n").unwrap();
    fs::write(host.sys(1).join("pid"), "1\n").unwrap();
    let err = match Nbd::open_on(host.clone(), &geometry(), Options::default()) {
        Ok(_) => panic!("a device on a full host"),
        Err(e) => e,
    };
    assert!(
        err.to_string().contains("all 3 nbd devices are in use"),
        "{err}"
    );
    let err = match Nbd::open_on(
        host.clone(),
        &geometry(),
        Options {
            index: Some(10),
            ..Options::default()
        },
    ) {
        Ok(_) => panic!("a busy device"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("/dev/nbd10 is in use"), "{err}");

    let listed = list_on(&host).unwrap();
    let indexes: Vec<u32> = listed.iter().map(|d| d.index).collect();
    assert_eq!(indexes, [0, 1, 10], "in index order, 10 after 1");
    assert_eq!(listed[0].size_bytes, 2048 * 512);
    assert_eq!(listed[0].server_pid, Some(1));
    assert_eq!(listed[2].server_tid, Some(999999999));
    assert_eq!(listed[2].server_pid, None, "its server is gone");

    // One free, but its node is missing.
    fs::remove_file(host.sys(1).join("pid")).unwrap();
    let err = match Nbd::open_on(host, &geometry(), Options::default()) {
        Ok(_) => panic!("a device without a node"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("nbd1 missing"), "{err}");
}

#[test]
fn a_block_size_the_driver_refuses_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let g = Geometry {
        block_bytes: 8192,
        ..geometry()
    };
    let err = match Nbd::open_on(fake_host(dir.path()), &g, Options::default()) {
        Ok(_) => panic!("8 KiB blocks"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn the_socket_pair_is_non_blocking_on_our_side() {
    let (conn, _kernel) = pair(limits(1, 512));
    // SAFETY: F_GETFL on an open descriptor.
    let fl = unsafe { libc::fcntl(conn.sock_fd(), libc::F_GETFL) };
    assert!(fl & libc::O_NONBLOCK != 0);
}

#[test]
fn the_request_cap_keeps_the_drivers_queue_within_the_send_buffer() {
    let two_gib = (i32::MAX as usize / 2) * 2;
    assert_eq!(
        super::max_sectors_kb(1 << 20, two_gib),
        1024,
        "1 MiB requests fit"
    );
    assert_eq!(
        super::max_sectors_kb(32 << 20, two_gib),
        4096,
        "32 MiB ones do not: 128 of them, twice over, fit 2 GiB below 8 MiB"
    );
    assert_eq!(
        super::max_sectors_kb(1 << 20, 416 << 10),
        1024,
        "a small buffer caps nothing"
    );
    assert_eq!(super::max_sectors_kb(512, two_gib), 4, "at least a page");
    let (_ours, theirs) = super::socketpair().unwrap();
    let got = super::grow_send_buffer(&theirs);
    assert!(got >= 4096, "{got}");
}

#[test]
fn unadvertised_discards_are_refused_but_not_write_zeroes() {
    let (mut conn, mut kernel) = pair(Limits {
        discard: false,
        ..limits(4, 4096)
    });
    kernel.write_all(&header(CMD_TRIM, 0, 1, 0, 4096)).unwrap();
    kernel
        .write_all(&header(CMD_WRITE_ZEROES, 0, 2, 0, 4096))
        .unwrap();
    let got = take(&mut conn);
    assert_eq!(
        got.len(),
        1,
        "a write-zeroes may come from a limit the driver kept: the loop zeroes"
    );
    assert_eq!(got[0].op, Op::WriteZeroes);
    assert_eq!(read_reply(&mut kernel), (libc::EOPNOTSUPP as u32, 1));
}

#[test]
fn without_write_zeroes_a_device_without_a_leftover_limit_is_tried_first() {
    let dir = tempfile::tempdir().unwrap();
    let host = fake_host(dir.path());
    fs::create_dir_all(&host.dev).unwrap();
    for (index, wz) in [(0, "4294966784"), (1, "4294966784"), (2, "0")] {
        fs::create_dir_all(host.sys(index).join("queue")).unwrap();
        fs::write(
            host.sys(index).join("queue/write_zeroes_max_bytes"),
            format!("{wz}\n"),
        )
        .unwrap();
        // A plain file: the first ioctl on it fails, naming the device tried.
        fs::write(host.dev_path(index), "").unwrap();
    }
    let first_tried = |g: &Geometry| match Nbd::open_on(host.clone(), g, Options::default()) {
        Ok(_) => panic!("a device made of plain files"),
        Err(e) => e.to_string(),
    };
    let err = first_tried(&Geometry {
        max_write_zeroes_bytes: 0,
        ..geometry()
    });
    assert!(
        err.contains("NBD_SET_SOCK on") && err.contains("nbd2"),
        "{err}"
    );
    let err = first_tried(&geometry());
    assert!(
        err.contains("nbd0"),
        "with write-zeroes of its own, index order: {err}"
    );
}

#[test]
fn a_buffer_shortened_to_its_data_comes_back_whole_and_untouched() {
    let (mut conn, mut kernel) = pair(limits(1, 64 << 10));
    kernel.write_all(&header(CMD_READ, 0, 1, 0, 4096)).unwrap();
    let got = take(&mut conn);
    let mut buf = conn.take_buffer(got[0].tag);
    let (ptr, len) = (buf.as_ptr(), buf.len());
    assert_eq!(len, 64 << 10);
    buf.fill(0x77);
    // What the serving loop does with a read's buffer.
    buf.truncate(4096);
    conn.complete(got[0].tag, buf, Ok(()));
    conn.flush().unwrap();
    assert_eq!(read_reply(&mut kernel), (0, 1));
    let mut data = vec![0u8; 4096];
    kernel.read_exact(&mut data).unwrap();
    assert!(data.iter().all(|&b| b == 0x77));
    // The next request on the slot: the same allocation, full length, the
    // tail as it was (not cleared again).
    kernel.write_all(&header(CMD_FLUSH, 0, 2, 0, 0)).unwrap();
    let got = take(&mut conn);
    let buf = conn.take_buffer(got[0].tag);
    assert_eq!((buf.as_ptr(), buf.len()), (ptr, len));
    assert!(buf[4096..].iter().all(|&b| b == 0x77));
    // A different, short buffer handed back: it is made long enough.
    conn.complete(got[0].tag, vec![1u8; 100], Ok(()));
    conn.flush().unwrap();
    assert_eq!(read_reply(&mut kernel), (0, 2));
    kernel.write_all(&header(CMD_WRITE, 0, 3, 0, 512)).unwrap();
    kernel.write_all(&[9u8; 512]).unwrap();
    let got = take(&mut conn);
    let buf = conn.take_buffer(got[0].tag);
    assert!(buf.len() >= 64 << 10);
    assert_eq!(&buf[..512], &[9u8; 512][..]);
}

#[test]
fn the_device_can_move_to_its_serving_thread() {
    fn send<T: Send>() {}
    send::<Nbd>();
}
