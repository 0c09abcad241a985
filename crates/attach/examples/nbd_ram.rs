//! A RAM disk through the NBD front-end: the smallest serving loop, to try
//! the kernel's nbd driver against isoe-attach without a target.
//!
//!   nbd_ram [--size-mib N] [--block 512|4096] [--max-io-kib N] [--index N]
//!           [--read-only] [--no-discard] [--no-cache]
//!   nbd_ram --list      the nbd devices in use on this host, as JSON
//!
//! Needs root and the nbd module (it runs `modprobe nbd` if no device is
//! there). Prints the device's path once it serves; SIGTERM or SIGINT
//! detaches (NBD_DISCONNECT: requests in flight complete first) and exits
//! when the device says it has stopped, printing what it served.

use std::io::{self, Write};
use std::os::fd::RawFd;
use std::time::Instant;

use isoe_attach::nbd::{Nbd, Options};
use isoe_attach::{BlockDevice, Geometry, Op, Request};

struct Args {
    size_mib: u64,
    block: u32,
    max_io_kib: u32,
    index: Option<u32>,
    read_only: bool,
    discard: bool,
    cache: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        size_mib: 256,
        block: 512,
        max_io_kib: 512,
        index: None,
        read_only: false,
        discard: true,
        cache: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} wants a value"));
        match arg.as_str() {
            "--size-mib" => {
                a.size_mib = value("--size-mib")?
                    .parse()
                    .map_err(|e| format!("--size-mib: {e}"))?
            }
            "--block" => {
                a.block = value("--block")?
                    .parse()
                    .map_err(|e| format!("--block: {e}"))?
            }
            "--max-io-kib" => {
                a.max_io_kib = value("--max-io-kib")?
                    .parse()
                    .map_err(|e| format!("--max-io-kib: {e}"))?
            }
            "--index" => {
                a.index = Some(
                    value("--index")?
                        .parse()
                        .map_err(|e| format!("--index: {e}"))?,
                )
            }
            "--read-only" => a.read_only = true,
            "--no-discard" => a.discard = false,
            "--no-cache" => a.cache = false,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

#[derive(Default, Debug)]
struct Served {
    reads: u64,
    writes: u64,
    flushes: u64,
    discards: u64,
    write_zeroes: u64,
    fua: u64,
    no_unmap: u64,
    /// The longest read or write.
    largest_io: u32,
    /// The longest discard or write-zeroes.
    largest_zeroing: u32,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("nbd_ram: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--list") {
        println!(
            "{}",
            serde_json::to_string_pretty(&isoe_attach::nbd::list()?)?
        );
        return Ok(());
    }
    let args = parse_args().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let signals = signal_fd()?;
    let capacity = args.size_mib << 20;
    let geometry = Geometry {
        block_bytes: args.block,
        physical_block_bytes: args.block,
        capacity_bytes: capacity,
        max_io_bytes: args.max_io_kib << 10,
        optimal_io_bytes: 0,
        discard: args.discard,
        discard_granularity_bytes: args.block,
        discard_alignment_bytes: 0,
        max_discard_bytes: u32::MAX,
        max_write_zeroes_bytes: if args.discard { u32::MAX } else { 0 },
        read_only: args.read_only,
        volatile_cache: args.cache,
        fua: args.cache,
    };
    let mut ram = vec![0u8; capacity as usize];
    let mut dev = Nbd::open(
        &geometry,
        Options {
            index: args.index,
            ..Options::default()
        },
    )?;
    let started = Instant::now();
    let mut served = Served::default();
    let mut requests: Vec<Request> = Vec::with_capacity(256);
    let mut announced = false;
    let mut stopping = false;
    loop {
        if !announced {
            match dev.ready() {
                Some(Ok(path)) => {
                    println!("{}", path.display());
                    io::stdout().flush()?;
                    eprintln!(
                        "nbd_ram: serving {} MiB on {} after {:?}",
                        args.size_mib,
                        path.display(),
                        started.elapsed()
                    );
                    announced = true;
                }
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        // Until it serves, look again every 10 ms.
        let (woke, signalled) = wait(dev.wake_fd(), signals, if announced { -1 } else { 10 })?;
        if signalled {
            drain_signals(signals);
            if !stopping {
                eprintln!("nbd_ram: signal: detaching");
                dev.stop()?;
                stopping = true;
            }
        }
        if !woke && !signalled {
            continue;
        }
        requests.clear();
        let alive = dev.take_requests(&mut requests)?;
        for r in &requests {
            serve(&mut dev, &mut ram, r, &mut served);
        }
        dev.flush()?;
        if !alive {
            break;
        }
    }
    let result = dev.finish();
    eprintln!("nbd_ram: stopped ({:?}); served {:?}", result, served);
    result
}

fn serve(dev: &mut Nbd, ram: &mut [u8], r: &Request, served: &mut Served) {
    let start = r.offset as usize;
    let end = start + r.len as usize;
    if matches!(r.op, Op::Read | Op::Write) {
        served.largest_io = served.largest_io.max(r.len);
    } else {
        served.largest_zeroing = served.largest_zeroing.max(r.len);
    }
    served.fua += r.fua as u64;
    served.no_unmap += r.no_unmap as u64;
    if end > ram.len() {
        dev.complete(r.tag, Vec::new(), Err(libc::EINVAL));
        return;
    }
    match r.op {
        Op::Read => {
            served.reads += 1;
            let mut buf = dev.take_buffer(r.tag);
            // Shortened to the data, as the serving loop hands it to its
            // command.
            buf.truncate(r.len as usize);
            buf.copy_from_slice(&ram[start..end]);
            dev.complete(r.tag, buf, Ok(()));
        }
        Op::Write => {
            served.writes += 1;
            let mut buf = dev.take_buffer(r.tag);
            buf.truncate(r.len as usize);
            ram[start..end].copy_from_slice(&buf);
            dev.complete(r.tag, buf, Ok(()));
        }
        Op::Flush => {
            served.flushes += 1;
            dev.complete(r.tag, Vec::new(), Ok(()));
        }
        Op::Discard | Op::WriteZeroes => {
            if r.op == Op::Discard {
                served.discards += 1;
            } else {
                served.write_zeroes += 1;
            }
            ram[start..end].fill(0);
            dev.complete(r.tag, Vec::new(), Ok(()));
        }
    }
}

/// SIGTERM and SIGINT, blocked and read from a signalfd (before any thread
/// starts, so that every thread has them blocked).
fn signal_fd() -> io::Result<RawFd> {
    // SAFETY: plain libc calls on a local sigset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn drain_signals(fd: RawFd) {
    let mut info = [0u8; 128];
    // SAFETY: reads into a local buffer of the signalfd_siginfo size.
    while unsafe { libc::read(fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

fn wait(wake: RawFd, signals: RawFd, timeout_ms: i32) -> io::Result<(bool, bool)> {
    let mut fds = [
        libc::pollfd {
            fd: wake,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: signals,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: two valid pollfds.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok((false, false))
        } else {
            Err(e)
        };
    }
    Ok((fds[0].revents != 0, fds[1].revents != 0))
}
