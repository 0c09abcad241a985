//! The commands that move data: `read` and `write`, in commands of at most
//! 1 MiB, refused before anything is sent when they do not fit the LUN.

use super::display::{hex, hex_dump};
use super::login::{parse_url, require_lun};
use super::session::{with_session, Session};
use super::{operational, Failure, ReadArgs, Report, WriteArgs};
use isoe_initiator::cdb::{self, Capacity};
use isoe_initiator::Command;
use serde_json::json;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

/// The most data one READ (16) or WRITE (16) carries.
const CHUNK_BYTES_MAX: usize = 1 << 20;
/// What a terminal is shown of a read.
const HEX_DUMP_BYTES_MAX: usize = 512;
/// The most read data `--json` carries inline, as hex.
const JSON_DATA_BYTES_MAX: usize = 1 << 20;

/// Where read data goes.
enum Sink {
    /// A file we opened; `created` when it did not exist before (removed on failure).
    File {
        file: io::BufWriter<File>,
        path: PathBuf,
        created: bool,
    },
    /// Raw bytes on stdout.
    Stdout(io::BufWriter<io::Stdout>),
    /// Kept for a hex dump or the JSON object.
    Memory {
        data: Vec<u8>,
        keep_bytes_max: usize,
    },
}

impl Sink {
    fn choose(args: &ReadArgs, total_bytes: u64) -> Result<Sink, Failure> {
        let json = args.lun.login.json;
        match &args.output {
            Some(p) if p.as_os_str() == "-" => Ok(Sink::stdout()),
            Some(path) => {
                let created = !path.exists();
                let file = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|e| operational(format!("cannot create {}: {e}", path.display())))?;
                Ok(Sink::File {
                    file: io::BufWriter::new(file),
                    path: path.clone(),
                    created,
                })
            }
            None if json => {
                if total_bytes > JSON_DATA_BYTES_MAX as u64 {
                    return Err(Failure::Usage(format!(
                        "--json without -o carries the data inline, at most {JSON_DATA_BYTES_MAX} bytes; \
                         this read is {total_bytes} bytes: add -o FILE"
                    )));
                }
                Ok(Sink::Memory {
                    data: Vec::new(),
                    keep_bytes_max: JSON_DATA_BYTES_MAX,
                })
            }
            None if io::stdout().is_terminal() => Ok(Sink::Memory {
                data: Vec::new(),
                keep_bytes_max: HEX_DUMP_BYTES_MAX,
            }),
            None => Ok(Sink::stdout()),
        }
    }

    fn stdout() -> Sink {
        Sink::Stdout(io::BufWriter::with_capacity(CHUNK_BYTES_MAX, io::stdout()))
    }

    fn put(&mut self, chunk: &[u8]) -> Result<(), Failure> {
        match self {
            Sink::File { file, path, .. } => file
                .write_all(chunk)
                .map_err(|e| operational(format!("writing {}: {e}", path.display()))),
            Sink::Stdout(out) => out
                .write_all(chunk)
                .map_err(|e| operational(format!("writing to stdout: {e}"))),
            Sink::Memory {
                data,
                keep_bytes_max,
            } => {
                let room = keep_bytes_max.saturating_sub(data.len());
                data.extend_from_slice(&chunk[..room.min(chunk.len())]);
                Ok(())
            }
        }
    }

    fn finish(&mut self) -> Result<(), Failure> {
        match self {
            Sink::File { file, path, .. } => file
                .flush()
                .and_then(|()| file.get_ref().sync_all())
                .map_err(|e| operational(format!("writing {}: {e}", path.display()))),
            Sink::Stdout(out) => out
                .flush()
                .map_err(|e| operational(format!("writing to stdout: {e}"))),
            Sink::Memory { .. } => Ok(()),
        }
    }

    /// After a failure: a file we created holds partial data, so it goes.
    fn discard(self) {
        if let Sink::File {
            file,
            path,
            created: true,
        } = self
        {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
    }
}

pub(super) fn read(args: &ReadArgs) -> Result<Report, Failure> {
    let url = parse_url(&args.lun.url)?;
    let lun = require_lun(&url)?;
    if args.lun.login.json && args.output.as_ref().is_some_and(|p| p.as_os_str() == "-") {
        return Err(Failure::Usage(
            "--json and -o - both want stdout: give -o FILE, or drop one of them".into(),
        ));
    }
    let (cap, sink) = with_session("read", &args.lun, &url, |s| {
        let cap = s.capacity(lun)?;
        check_range(lun, &cap, args.lba, u64::from(args.blocks), "reading")?;
        let total = u64::from(args.blocks) * u64::from(cap.block_size_bytes);
        let mut sink = Sink::choose(args, total)?;
        match read_into(s, lun, &cap, args, &mut sink).and_then(|()| sink.finish()) {
            Ok(()) => Ok((cap, sink)),
            Err(e) => {
                sink.discard();
                Err(e)
            }
        }
    })?;
    let bytes = u64::from(args.blocks) * u64::from(cap.block_size_bytes);
    let what = format!(
        "read {} block(s) of {} bytes ({bytes} bytes) from LBA {} of {url}",
        args.blocks, cap.block_size_bytes, args.lba
    );
    let mut json = json!({
        "url": url.to_string(),
        "lun": lun,
        "lba": args.lba,
        "blocks": args.blocks,
        "block_size_bytes": cap.block_size_bytes,
        "bytes": bytes,
    });
    let human = match sink {
        Sink::File { path, .. } => {
            json["output"] = json!(path.display().to_string());
            Some(format!("{what} into {}\n", path.display()))
        }
        Sink::Stdout(_) => {
            json["output"] = json!("-");
            None
        }
        Sink::Memory { data, .. } => {
            json["data_hex"] = json!(hex(&data));
            let mut text = hex_dump(&data);
            if (data.len() as u64) < bytes {
                let _ = writeln!(
                    text,
                    "({what}; shown: the first {} bytes, as stdout is a terminal; \
                     use -o FILE, or redirect stdout, for the raw data)",
                    data.len()
                );
            }
            Some(text)
        }
    };
    Ok(Report { human, json })
}

fn read_into(
    s: &mut Session,
    lun: u16,
    cap: &Capacity,
    args: &ReadArgs,
    sink: &mut Sink,
) -> Result<(), Failure> {
    let block_bytes = cap.block_size_bytes;
    let chunk_blocks = chunk_blocks(block_bytes);
    let mut lba = args.lba;
    let mut left = args.blocks;
    while left > 0 {
        let n = left.min(chunk_blocks);
        let len = n * block_bytes;
        let what = format!("READ (16) of {n} block(s) at LBA {lba} on LUN {lun}");
        let data = s.read_data(lun, &cdb::read16(lba, n), len, &what)?;
        if data.len() != len as usize {
            return Err(operational(format!(
                "{what}: the target sent {} bytes of {len}",
                data.len()
            )));
        }
        sink.put(&data)?;
        lba += u64::from(n);
        left -= n;
    }
    Ok(())
}

/// Blocks per command: as many as fit in 1 MiB, at least one.
fn chunk_blocks(block_bytes: u32) -> u32 {
    (CHUNK_BYTES_MAX as u32 / block_bytes).max(1)
}

/// Refuses a transfer that does not fit on the LUN, before anything is sent.
fn check_range(
    lun: u16,
    cap: &Capacity,
    lba: u64,
    blocks: u64,
    doing: &str,
) -> Result<(), Failure> {
    let fits = lba
        .checked_add(blocks)
        .is_some_and(|end| end <= cap.blocks());
    if fits {
        return Ok(());
    }
    Err(operational(format!(
        "{doing} {blocks} block(s) at LBA {lba} would pass the end of LUN {lun}, \
         which has {} blocks of {} bytes (the last LBA is {}); nothing was sent",
        cap.blocks(),
        cap.block_size_bytes,
        cap.last_lba
    )))
}

pub(super) fn write(args: &WriteArgs) -> Result<Report, Failure> {
    let url = parse_url(&args.lun.url)?;
    let lun = require_lun(&url)?;
    let input = &args.input;
    let file_bytes = std::fs::metadata(input)
        .map_err(|e| operational(format!("cannot read {}: {e}", input.display())))?
        .len();
    if file_bytes == 0 {
        return Err(operational(format!(
            "{} is empty: there is nothing to write",
            input.display()
        )));
    }
    let (cap, blocks) = with_session("write", &args.lun, &url, |s| {
        let cap = s.capacity(lun)?;
        let block_bytes = u64::from(cap.block_size_bytes);
        if file_bytes % block_bytes != 0 {
            return Err(operational(format!(
                "{} is {file_bytes} bytes, not a whole number of the LUN's {block_bytes}-byte \
                 blocks ({} block(s) and {} bytes over); nothing was sent",
                input.display(),
                file_bytes / block_bytes,
                file_bytes % block_bytes
            )));
        }
        let blocks = file_bytes / block_bytes;
        check_range(lun, &cap, args.lba, blocks, "writing")?;
        write_from(s, lun, &cap, args, input, blocks)?;
        if !args.fua {
            let what = format!("SYNCHRONIZE CACHE (10) on LUN {lun} after the writes");
            s.execute(Command::new(lun, &cdb::synchronize_cache10()), &what)?;
        }
        Ok((cap, blocks))
    })?;
    let human = format!(
        "wrote {blocks} block(s) of {} bytes ({file_bytes} bytes) from {} at LBA {} of {url}{}\n",
        cap.block_size_bytes,
        input.display(),
        args.lba,
        if args.fua {
            " (FUA)"
        } else {
            ", then synchronized the cache"
        }
    );
    let json = json!({
        "url": url.to_string(),
        "lun": lun,
        "lba": args.lba,
        "blocks": blocks,
        "block_size_bytes": cap.block_size_bytes,
        "bytes": file_bytes,
        "input": input.display().to_string(),
        "fua": args.fua,
        "synchronized": !args.fua,
    });
    Ok(Report {
        human: Some(human),
        json,
    })
}

fn write_from(
    s: &mut Session,
    lun: u16,
    cap: &Capacity,
    args: &WriteArgs,
    input: &Path,
    blocks: u64,
) -> Result<(), Failure> {
    let mut file = File::open(input)
        .map_err(|e| operational(format!("cannot read {}: {e}", input.display())))?;
    let block_bytes = cap.block_size_bytes as usize;
    let chunk_blocks = u64::from(chunk_blocks(cap.block_size_bytes));
    let mut buffer = Vec::new();
    let mut lba = args.lba;
    let mut left = blocks;
    while left > 0 {
        let n = left.min(chunk_blocks) as u32;
        buffer.resize(n as usize * block_bytes, 0);
        file.read_exact(&mut buffer).map_err(|e| {
            operational(format!(
                "reading {} at byte {}: {e} (did the file change?)",
                input.display(),
                (lba - args.lba) * block_bytes as u64
            ))
        })?;
        let what = format!("WRITE (16) of {n} block(s) at LBA {lba} on LUN {lun}");
        let done = s.execute(
            Command::write(lun, &cdb::write16(lba, n, args.fua), buffer),
            &what,
        )?;
        buffer = done.buffer;
        lba += u64::from(n);
        left -= u64::from(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_past_the_end_are_refused() {
        let cap = Capacity {
            last_lba: 99,
            block_size_bytes: 512,
            thin_provisioning: false,
            blocks_per_physical_exponent: 0,
        };
        assert!(check_range(0, &cap, 90, 10, "writing").is_ok());
        let Err(Failure::Operational(text)) = check_range(0, &cap, 91, 10, "writing") else {
            panic!("a write past the end passed");
        };
        assert!(text.contains("would pass the end of LUN 0"), "{text}");
        assert!(check_range(0, &cap, u64::MAX, 2, "reading").is_err());
    }

    #[test]
    fn chunks_hold_at_most_one_mebibyte() {
        assert_eq!(chunk_blocks(512), 2048);
        assert_eq!(chunk_blocks(4096), 256);
        assert_eq!(chunk_blocks(4 << 20), 1);
    }
}
