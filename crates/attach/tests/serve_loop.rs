//! The serving loop against isoe's own target, in this process, with a
//! scripted front-end in place of the kernel: what a block device's
//! requests become on the LU and what comes back to the kernel. (The real
//! front-ends, ublk and NBD, run in the test bed's VM.)

use isoe_attach::device::{BlockDevice, Op, Request};
use isoe_attach::scsi;
use isoe_attach::serve::{self, Observer, Stats};
use isoe_initiator::{Engine, IscsiUrl, SessionConfig};
use isoe_target::config::Config;
use isoe_target::driver::{self, Running};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

const TARGET: &str = "iqn.2026-11.io.isoe:target0";
const MAX_IO: usize = 1 << 20;

fn start_target() -> Running {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[[target]]\nname = \"{TARGET}\"\n\n\
         [[target.lun]]\nnumber = 0\nmemory = \"64MiB\"\n\n\
         [[target.lun]]\nnumber = 1\nmemory = \"16MiB\"\nread_only = true\n"
    );
    let config = Config::parse(&text, None).expect("test config parses");
    driver::start(config).expect("target starts")
}

/// What the kernel got back for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    tag: u16,
    result: Result<(), i32>,
    /// A read's data.
    data: Vec<u8>,
}

/// Plays the kernel: hands out one batch of requests at a time, the next
/// once every answer of the last is in, and stops after the last batch.
struct Scripted {
    batches: VecDeque<Vec<(Request, Vec<u8>)>>,
    buffers: Vec<Vec<u8>>,
    in_flight: usize,
    answers: Vec<Answer>,
    requests: Vec<Request>,
    wake_ours: UnixStream,
    wake_theirs: UnixStream,
    stop_called: bool,
}

impl Scripted {
    fn new(batches: Vec<Vec<(Request, Vec<u8>)>>) -> Scripted {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.set_nonblocking(true).unwrap();
        let mut s = Scripted {
            batches: batches.into(),
            buffers: (0..128).map(|_| vec![0u8; MAX_IO]).collect(),
            in_flight: 0,
            answers: Vec::new(),
            requests: Vec::new(),
            wake_ours: ours,
            wake_theirs: theirs,
            stop_called: false,
        };
        s.wake();
        s
    }

    fn wake(&mut self) {
        let _ = self.wake_ours.write(b"w");
    }
}

impl BlockDevice for Scripted {
    fn wake_fd(&self) -> RawFd {
        self.wake_theirs.as_raw_fd()
    }

    fn take_requests(&mut self, out: &mut Vec<Request>) -> io::Result<bool> {
        let mut sink = [0u8; 64];
        while self.wake_theirs.read(&mut sink).is_ok_and(|n| n > 0) {}
        if self.in_flight > 0 {
            return Ok(true);
        }
        let Some(batch) = self.batches.pop_front() else {
            return Ok(false);
        };
        for (request, data) in batch {
            self.buffers[usize::from(request.tag)][..data.len()].copy_from_slice(&data);
            self.in_flight += 1;
            self.requests.push(request);
            out.push(request);
        }
        Ok(true)
    }

    fn take_buffer(&mut self, tag: u16) -> Vec<u8> {
        std::mem::take(&mut self.buffers[usize::from(tag)])
    }

    fn complete(&mut self, tag: u16, mut buffer: Vec<u8>, result: Result<(), i32>) {
        let request = self
            .requests
            .iter()
            .rev()
            .find(|r| r.tag == tag)
            .copied()
            .expect("a request with that tag was handed out");
        let data = match (request.op, result) {
            (Op::Read, Ok(())) => buffer[..request.len as usize].to_vec(),
            _ => Vec::new(),
        };
        self.answers.push(Answer { tag, result, data });
        buffer.resize(MAX_IO, 0);
        self.buffers[usize::from(tag)] = buffer;
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.wake();
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn ready(&mut self) -> Option<io::Result<PathBuf>> {
        Some(Ok(PathBuf::from("/dev/scripted0")))
    }

    fn stop(&mut self) -> io::Result<()> {
        self.stop_called = true;
        Ok(())
    }
}

#[derive(Default)]
struct Watch {
    ready: Option<PathBuf>,
    ticks: usize,
}

impl Observer for Watch {
    fn ready(&mut self, path: &Path) -> io::Result<()> {
        self.ready = Some(path.to_owned());
        Ok(())
    }
    fn tick(&mut self, _: &Stats) {
        self.ticks += 1;
    }
    fn stop_requested(&self) -> bool {
        false
    }
}

fn request(tag: u16, op: Op, offset: u64, len: u32) -> Request {
    Request {
        tag,
        op,
        offset,
        len,
        fua: false,
        no_unmap: false,
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i * 31 % 251) as u8))
        .collect()
}

/// Runs `batches` against LUN `lun` of a fresh target; the answers, sorted
/// by tag within each batch's order of completion.
fn run(lun: u16, batches: Vec<Vec<(Request, Vec<u8>)>>) -> (Vec<Answer>, Stats, scsi::Lu) {
    let target = start_target();
    let url = IscsiUrl::parse(&format!("iscsi://{}/{TARGET}/{lun}", target.portals()[0])).unwrap();
    let mut engine = Engine::new();
    let session = engine.login(SessionConfig::from_url(&url)).unwrap();
    let lu = scsi::probe(&mut engine, session, lun).unwrap();
    let mut device = Scripted::new(batches);
    let mut watch = Watch::default();
    let (stats, path) = serve::serve(&mut engine, session, &lu, &mut device, &mut watch).unwrap();
    assert_eq!(path.as_deref(), Some(Path::new("/dev/scripted0")));
    assert_eq!(watch.ready.as_deref(), Some(Path::new("/dev/scripted0")));
    assert!(watch.ticks >= 1, "the final counters reach the observer");
    assert!(!device.stop_called);
    (device.answers, stats, lu)
}

#[test]
fn the_lu_reads_back_what_was_written_through_every_operation() {
    let a = pattern(1, 64 * 1024);
    let b = pattern(9, 4096);
    let big = pattern(17, MAX_IO);
    let batches = vec![
        // Writes side by side, one with FUA, one as large as a request gets.
        vec![
            (request(0, Op::Write, 0, a.len() as u32), a.clone()),
            (
                Request {
                    fua: true,
                    ..request(1, Op::Write, 1 << 20, b.len() as u32)
                },
                b.clone(),
            ),
            (request(2, Op::Write, 8 << 20, MAX_IO as u32), big.clone()),
        ],
        vec![(request(3, Op::Flush, 0, 0), Vec::new())],
        vec![
            (request(0, Op::Read, 0, a.len() as u32), Vec::new()),
            (request(1, Op::Read, 1 << 20, 4096), Vec::new()),
            (request(2, Op::Read, 8 << 20, MAX_IO as u32), Vec::new()),
        ],
        // Discard the first 32 KiB, zero the 4 KiB at 1 MiB (keeping it
        // allocated), then read both back.
        vec![
            (request(4, Op::Discard, 0, 32 * 1024), Vec::new()),
            (
                Request {
                    no_unmap: true,
                    ..request(5, Op::WriteZeroes, 1 << 20, 4096)
                },
                Vec::new(),
            ),
        ],
        vec![
            (request(6, Op::Read, 0, 64 * 1024), Vec::new()),
            (request(7, Op::Read, 1 << 20, 4096), Vec::new()),
        ],
        // Past the end of the 64 MiB LU.
        vec![(request(8, Op::Read, 64 << 20, 4096), Vec::new())],
    ];
    let (answers, stats, lu) = run(0, batches);
    assert_eq!(lu.geometry.capacity_bytes, 64 << 20);
    assert!(lu.geometry.discard, "isoe's memory LUs unmap: {lu:?}");
    assert!(lu.geometry.max_write_zeroes_bytes > 0);
    let find = |tag: u16, nth: usize| {
        answers
            .iter()
            .filter(|x| x.tag == tag)
            .nth(nth)
            .unwrap_or_else(|| panic!("no answer #{nth} for tag {tag}: {answers:?}"))
            .clone()
    };
    for tag in 0..=7 {
        let first = find(tag, 0);
        assert_eq!(first.result, Ok(()), "tag {tag}");
    }
    assert_eq!(find(0, 1).data, a);
    assert_eq!(find(1, 1).data, b);
    assert!(find(2, 1).data == big, "1 MiB read back intact");
    let after = find(6, 0).data;
    assert!(
        after[..32 * 1024].iter().all(|&x| x == 0),
        "discarded blocks read as zeros"
    );
    assert_eq!(after[32 * 1024..], a[32 * 1024..]);
    assert!(
        find(7, 0).data.iter().all(|&x| x == 0),
        "write-zeroes zeroed"
    );
    assert_eq!(find(8, 0).result, Err(libc::EIO), "LBA out of range");
    assert_eq!(stats.commands, 12);
    assert_eq!((stats.reads, stats.writes), (6, 3));
    assert_eq!(
        (stats.flushes, stats.discards, stats.write_zeroes),
        (1, 1, 1)
    );
    assert_eq!(stats.errors, 1);
    assert_eq!(stats.write_bytes, (a.len() + b.len() + MAX_IO) as u64);
    assert_eq!(stats.in_flight, 0);
}

#[test]
fn a_write_protected_lu_is_a_read_only_device_whose_writes_fail() {
    let batches = vec![vec![(request(0, Op::Write, 0, 4096), pattern(3, 4096))]];
    let (answers, stats, lu) = run(1, batches);
    assert!(lu.geometry.read_only, "{lu:?}");
    assert_eq!(answers.len(), 1);
    assert_eq!(
        answers[0].result,
        Err(libc::EIO),
        "DATA PROTECT, write protected"
    );
    assert_eq!(stats.errors, 1);
}
