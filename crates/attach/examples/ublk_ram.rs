//! A RAM disk on ublk, served the way `isoe attach` serves an LU: poll the
//! device's wake fd, take the requests, copy, complete, flush. For trying
//! the ublk front-end on a real kernel (root, ublk_drv).
//!
//! ```text
//! ublk_ram [--size MIB] [--depth N] [--max-io BYTES] [--file PATH]
//!          [--recover ID] [--keep] [--panic-after N]
//! ublk_ram --list | --delete ID | --features
//! ```
//!
//! `--file` keeps the disk's bytes in a file (say on /dev/shm) instead of
//! this process's memory, so that they survive a crash and `--recover ID`
//! resumes the same disk. SIGTERM or SIGINT stops and removes the device;
//! with `--keep`, it is left quiesced for `--recover`. `--panic-after N`
//! panics while holding requests, after N: the device is left quiesced,
//! as after a crash, and `--recover` gets the held requests again.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use isoe_attach::ublk::{self, Options, UblkDevice};
use isoe_attach::{BlockDevice, Geometry, Op, Request};

enum Store {
    Ram(Vec<u8>),
    File(File),
}

impl Store {
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), i32> {
        match self {
            Store::Ram(v) => {
                buf.copy_from_slice(&v[off as usize..off as usize + buf.len()]);
                Ok(())
            }
            Store::File(f) => f.read_exact_at(buf, off).map_err(errno),
        }
    }

    fn write(&mut self, off: u64, buf: &[u8]) -> Result<(), i32> {
        match self {
            Store::Ram(v) => {
                v[off as usize..off as usize + buf.len()].copy_from_slice(buf);
                Ok(())
            }
            Store::File(f) => f.write_all_at(buf, off).map_err(errno),
        }
    }

    fn zero(&mut self, off: u64, len: u64) -> Result<(), i32> {
        match self {
            Store::Ram(v) => {
                v[off as usize..(off + len) as usize].fill(0);
                Ok(())
            }
            Store::File(f) => {
                let zeros = vec![0u8; 1 << 20];
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(zeros.len() as u64);
                    f.write_all_at(&zeros[..n as usize], off + done)
                        .map_err(errno)?;
                    done += n;
                }
                Ok(())
            }
        }
    }

    fn flush(&self) -> Result<(), i32> {
        match self {
            Store::Ram(_) => Ok(()),
            Store::File(f) => f.sync_data().map_err(errno),
        }
    }
}

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

struct Args {
    size_mib: u64,
    depth: u16,
    max_io: u32,
    file: Option<String>,
    recover: Option<u32>,
    keep: bool,
    panic_after: Option<u64>,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: ublk_ram [--size MIB] [--depth N] [--max-io BYTES] [--file PATH] [--recover ID] [--keep] [--panic-after N]\n\
         \x20      ublk_ram --list | --delete ID | --features"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = Args {
        size_mib: 256,
        depth: 128,
        max_io: 512 << 10,
        file: None,
        recover: None,
        keep: false,
        panic_after: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_default();
        match a.as_str() {
            "--size" => args.size_mib = value().parse().unwrap_or(0),
            "--depth" => args.depth = value().parse().unwrap_or(0),
            "--max-io" => args.max_io = value().parse().unwrap_or(0),
            "--file" => args.file = Some(value()),
            "--recover" => match value().parse() {
                Ok(id) => args.recover = Some(id),
                Err(_) => return usage(),
            },
            "--keep" => args.keep = true,
            "--panic-after" => args.panic_after = value().parse().ok(),
            "--list" => return list(),
            "--delete" => {
                let Ok(id) = value().parse() else {
                    return usage();
                };
                return match ublk::delete_dead(id) {
                    Ok(()) => {
                        println!("ublk_ram: deleted device {id}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(&e),
                };
            }
            "--features" => return features(),
            _ => return usage(),
        }
    }
    if args.size_mib == 0 || args.max_io == 0 {
        return usage();
    }
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("ublk_ram: {e}");
    ExitCode::FAILURE
}

fn list() -> ExitCode {
    match ublk::list() {
        Ok(devs) => {
            println!(
                "{:>4} {:>9} {:>8} {:>5} {:>8}  flags",
                "id", "state", "pid", "depth", "max_io"
            );
            for d in devs {
                println!(
                    "{:>4} {:>9} {:>8} {:>5} {:>8}  {}",
                    d.id,
                    d.state,
                    if d.pid_alive {
                        d.pid.to_string()
                    } else {
                        format!("({})", d.pid)
                    },
                    d.queue_depth,
                    d.max_io_bytes,
                    d.flag_names
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn features() -> ExitCode {
    match ublk::features() {
        Ok(f) => println!("GET_FEATURES: {f:#x} ({})", ublk::sys::flag_names(f)),
        Err(e) => {
            println!("GET_FEATURES: {e}");
            if !ublk::available() {
                return ExitCode::FAILURE;
            }
        }
    }
    let probes = [
        ("zero copy", ublk::sys::UBLK_F_SUPPORT_ZERO_COPY),
        ("auto buf reg", ublk::sys::UBLK_F_AUTO_BUF_REG),
        ("recovery fail io", ublk::sys::UBLK_F_USER_RECOVERY_FAIL_IO),
        ("user copy", ublk::sys::UBLK_F_USER_COPY),
    ];
    for (name, flag) in probes {
        match ublk::probe_flags(flag) {
            Ok(got) => println!(
                "ADD_DEV asking for {name} ({flag:#x}): accepted {got:#x} ({}): {}",
                ublk::sys::flag_names(got),
                if got & flag != 0 { "kept" } else { "CLEARED" }
            ),
            Err(e) => println!("ADD_DEV asking for {name}: {e}"),
        }
    }
    ExitCode::SUCCESS
}

fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let size = args.size_mib << 20;
    let mut store = open_store(&args, size)?;
    let geometry = geometry(size, args.max_io);
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;

    let mut dev = UblkDevice::create(
        &geometry,
        Options {
            queue_depth: args.depth,
            recover: args.recover,
            // This server reads and writes the tags' buffers itself.
            zero_copy: false,
        },
    )?;
    if args.keep {
        dev.keep_on_drop();
    }
    println!(
        "ublk_ram: device {} ({}), depth {}, flags {:#x} ({})",
        dev.dev_id(),
        if args.recover.is_some() {
            "resuming"
        } else {
            "new"
        },
        dev.queue_depth(),
        dev.flags(),
        ublk::sys::flag_names(dev.flags())
    );

    let mut reqs: Vec<Request> = Vec::new();
    let mut reported = false;
    let mut stopping = false;
    let mut served: u64 = 0;
    loop {
        if stop.load(Ordering::Relaxed) && args.keep {
            // Close the queue only: the kernel holds the disk quiesced.
            eprintln!("ublk_ram: leaving device {} for --recover", dev.dev_id());
            break;
        }
        if stop.load(Ordering::Relaxed) && !stopping {
            stopping = true;
            eprintln!("ublk_ram: stopping device {}", dev.dev_id());
            dev.stop()?;
        }
        if !reported {
            if let Some(r) = dev.ready() {
                reported = true;
                let path = r?;
                println!("ublk_ram: ready: {}", path.display());
            }
        }
        reqs.clear();
        if !dev.take_requests(&mut reqs)? {
            break;
        }
        for r in &reqs {
            let mut buf = dev.take_buffer(r.tag);
            if args.panic_after.is_some_and(|n| served >= n) {
                panic!("--panic-after: panicking with request {:?} held", r);
            }
            let result = answer(&mut store, size, r, &mut buf);
            dev.complete(r.tag, buf, result);
        }
        served += reqs.len() as u64;
        dev.flush()?;
        if reqs.is_empty() {
            let mut pfd = libc::pollfd {
                fd: dev.wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call. EINTR
            // (a signal) simply goes round the loop.
            unsafe { libc::poll(&mut pfd, 1, 1000) };
        }
    }
    let id = dev.dev_id();
    drop(dev);
    println!(
        "ublk_ram: device {id} {} after {served} requests",
        if args.keep {
            "left for --recover"
        } else {
            "stopped and deleted"
        }
    );
    Ok(())
}

/// The device's memory, or the file that backs it.
fn open_store(args: &Args, size: u64) -> Result<Store, Box<dyn std::error::Error>> {
    Ok(match &args.file {
        None => Store::Ram(vec![0u8; size as usize]),
        Some(path) => {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            if f.metadata()?.len() < size {
                f.set_len(size)?;
            }
            Store::File(f)
        }
    })
}

/// A disk of `size` bytes taking requests of at most `max_io` bytes.
fn geometry(size: u64, max_io: u32) -> Geometry {
    Geometry {
        block_bytes: 512,
        physical_block_bytes: 4096,
        capacity_bytes: size,
        max_io_bytes: max_io,
        optimal_io_bytes: 0,
        discard: true,
        discard_granularity_bytes: 4096,
        discard_alignment_bytes: 0,
        max_discard_bytes: 64 << 20,
        max_write_zeroes_bytes: 64 << 20,
        read_only: false,
        volatile_cache: true,
        fua: true,
    }
}

/// Does request `r` on `store` with `buf`: EIO past the end.
fn answer(store: &mut Store, size: u64, r: &Request, buf: &mut Vec<u8>) -> Result<(), i32> {
    let end = r.offset + u64::from(r.len);
    if end > size {
        return Err(libc::EIO);
    }
    match r.op {
        Op::Read => {
            let res = store.read(r.offset, &mut buf[..r.len as usize]);
            // As the serving loop does: the buffer comes back
            // holding just the data.
            buf.truncate(r.len as usize);
            res
        }
        Op::Write => store.write(r.offset, &buf[..r.len as usize]),
        Op::Flush => store.flush(),
        Op::Discard | Op::WriteZeroes => store.zero(r.offset, u64::from(r.len)),
    }
    .and_then(|()| if r.fua { store.flush() } else { Ok(()) })
}
