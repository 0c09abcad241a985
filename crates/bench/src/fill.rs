//! `isoe bench --fill`: writes every block of each URL's LU once, in LBA
//! order, with data that is neither zeros nor one block repeated.
//!
//! A read benchmark must read written data: a memory LU answers a read of
//! a block never written with zeros it makes on the fly, and a thin file
//! or device with a hole, both cheaper than what a user reads. The lab
//! fills a LU before it reads it. Every 512-byte piece carries its byte
//! offset and [`SEED`], then words of the xorshift [`Rng`], so a reader
//! can recompute what any byte holds ([`first_mismatch`]), and no two
//! blocks are alike (which a deduplicating or compressing store would
//! otherwise fold).
//!
//! One thread and one initiator [`Engine`] drive every LU at once, each
//! through its own session, with `queue_depth` writes in flight and one
//! buffer per write in flight, reused: memory stays at
//! `queue_depth` × `write_bytes` per LU whatever the LU's size.

use crate::address::Rng;
use crate::run::{self, RunError, SessionTemplate, SENSE_UNIT_ATTENTION};
use crate::workload::redact_url;
use isoe_initiator::{cdb, Command, Completion, Engine, IscsiUrl, Outcome, UrlError};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Bytes each piece of the pattern covers: the smallest logical block, so
/// that every block of any LU holds data of its own.
pub const PIECE_BYTES: usize = 512;

/// Mixed into every piece: the same for every fill, so that what a fill
/// wrote can be recomputed from the offset alone.
pub const SEED: u64 = 0x6973_6f65_6669_6c6c; // "isoefill"

/// The write size when none is given: large enough that the commands'
/// own cost is small beside the data's.
pub const DEFAULT_WRITE_BYTES: u32 = 1 << 20;

/// Writes in flight per LU when not told.
pub const DEFAULT_QUEUE_DEPTH: u32 = 8;

/// The most buffer memory one LU's writes in flight may take
/// (`queue_depth` × `write_bytes`): a typo must not exhaust the host.
pub const BUFFER_BYTES_MAX: u64 = 1 << 30;

/// Times one write is sent again after UNIT ATTENTION before it counts as
/// failed: each clears one condition (SAM-5 5.14), and a LU that keeps
/// raising them is broken.
const UNIT_ATTENTION_RETRIES: u32 = 8;

/// How long the writes in flight may take to finish after a failure or
/// an interruption.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Fills `buf`, the bytes at byte `offset` of a LU, with the pattern:
/// each [`PIECE_BYTES`] piece holds its own byte offset (little-endian),
/// [`SEED`], then words of an [`Rng`] seeded by both. `offset` is a
/// multiple of [`PIECE_BYTES`] for the pieces to line up with blocks.
pub fn pattern(buf: &mut [u8], offset: u64) {
    for (i, piece) in buf.chunks_mut(PIECE_BYTES).enumerate() {
        let at = offset + (i * PIECE_BYTES) as u64;
        piece_pattern(piece, at);
    }
}

/// One piece (or the start of one) at byte `at`.
fn piece_pattern(piece: &mut [u8], at: u64) {
    let mut header = [0u8; 16];
    header[..8].copy_from_slice(&at.to_le_bytes());
    header[8..].copy_from_slice(&SEED.to_le_bytes());
    let head = piece.len().min(16);
    piece[..head].copy_from_slice(&header[..head]);
    let mut rng = Rng::new(at ^ SEED);
    for word in piece[head..].chunks_mut(8) {
        word.copy_from_slice(&rng.next_u64().to_le_bytes()[..word.len()]);
    }
}

/// The byte offset of the first piece of `buf`, read from byte `offset`
/// of a LU, that is not what [`pattern`] writes there; None when all are.
pub fn first_mismatch(buf: &[u8], offset: u64) -> Option<u64> {
    let mut expected = [0u8; PIECE_BYTES];
    buf.chunks(PIECE_BYTES).enumerate().find_map(|(i, piece)| {
        let at = offset + (i * PIECE_BYTES) as u64;
        let expected = &mut expected[..piece.len()];
        piece_pattern(expected, at);
        (piece != expected).then_some(at)
    })
}

/// The blocks a fill writes of an LU of `lu_blocks` blocks of
/// `block_size` bytes: the span's, rounded up to whole blocks, at most the
/// LU's; all of them without a span.
fn span_blocks(lu_blocks: u64, block_size: u32, span_bytes: Option<u64>) -> u64 {
    span_bytes.map_or(lu_blocks, |span| {
        span.div_ceil(u64::from(block_size)).min(lu_blocks)
    })
}

/// The writes that cover `blocks` blocks once, in LBA order: (first LBA,
/// blocks) of `per_write` blocks each, the last shortened to what is left.
#[derive(Debug, Clone)]
struct Writes {
    next: u64,
    end: u64,
    per_write: u32,
}

impl Writes {
    fn new(blocks: u64, per_write: u32) -> Writes {
        Writes {
            next: 0,
            end: blocks,
            per_write: per_write.max(1),
        }
    }
}

impl Iterator for Writes {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        let left = self.end.checked_sub(self.next).filter(|&n| n > 0)?;
        let blocks = u64::from(self.per_write).min(left) as u32;
        let lba = self.next;
        self.next += u64::from(blocks);
        Some((lba, blocks))
    }
}

/// One LU to fill: its URL, and how the report names it.
#[derive(Debug, Clone)]
pub struct FillUrl {
    /// The URL, with its credentials.
    pub url: IscsiUrl,
    /// The URL as given, password removed ([`redact_url`]).
    pub name: String,
}

impl FillUrl {
    /// `text` parsed; named as given, password removed.
    pub fn parse(text: &str) -> Result<FillUrl, UrlError> {
        Ok(FillUrl {
            url: IscsiUrl::parse(text)?,
            name: redact_url(text),
        })
    }
}

/// What a fill needs.
#[derive(Debug, Clone)]
pub struct FillConfig {
    /// The LUs, each filled through its own session.
    pub urls: Vec<FillUrl>,
    /// How sessions log in (CHAP, digests, burst lengths, socket knobs),
    /// as for a run.
    pub session: SessionTemplate,
    /// Connections per session (MC/S).
    pub connections: u16,
    /// Bytes per write, a multiple of every LU's block size.
    pub write_bytes: u32,
    /// Writes in flight per LU.
    pub queue_depth: u32,
    /// Bytes from each LU's start to write (rounded up to whole blocks,
    /// at most the LU); None: the whole LU.
    pub span_bytes: Option<u64>,
    /// Print a live progress line to stderr once a second.
    pub progress: bool,
    /// Set to stop sending (Ctrl-C): the fill then ends with
    /// [`FillError::Interrupted`] once the writes in flight are answered.
    pub stop: Arc<AtomicBool>,
}

impl FillConfig {
    /// The default fill of `urls`: [`DEFAULT_WRITE_BYTES`] writes,
    /// [`DEFAULT_QUEUE_DEPTH`] in flight, one connection per session.
    pub fn new(urls: Vec<FillUrl>, session: SessionTemplate) -> FillConfig {
        FillConfig {
            urls,
            session,
            connections: 1,
            write_bytes: DEFAULT_WRITE_BYTES,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            span_bytes: None,
            progress: false,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Why these options cannot fill anything, before any login.
    fn check(&self) -> Result<(), FillError> {
        let refuse = |what: String| Err(FillError::Options(what));
        if self.urls.is_empty() {
            return refuse("no URL to fill".into());
        }
        if self.write_bytes == 0 || !self.write_bytes.is_multiple_of(PIECE_BYTES as u32) {
            return refuse(format!(
                "the write size {} is not a positive multiple of 512",
                self.write_bytes
            ));
        }
        if self.queue_depth == 0 || self.connections == 0 {
            return refuse("the queue depth and connections must be at least 1".into());
        }
        let buffers = u64::from(self.queue_depth) * u64::from(self.write_bytes);
        if buffers > BUFFER_BYTES_MAX {
            return refuse(format!(
                "{} writes of {} bytes in flight take {buffers} bytes of buffers per LU, \
                 more than {BUFFER_BYTES_MAX}",
                self.queue_depth, self.write_bytes
            ));
        }
        for u in &self.urls {
            if u.url.lun.is_none() {
                return refuse(format!("{}: the URL names no LUN (…/IQN/LUN)", u.name));
            }
        }
        Ok(())
    }
}

/// What `isoe bench --fill --json` prints: one line, this object, which
/// the lab reads back as this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FillOutput {
    /// The fill.
    pub fill: FillReport,
}

/// What a fill wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FillReport {
    /// Bytes written, every LU together.
    pub bytes: u64,
    /// Seconds from the first write to the last LU's cache flushed.
    pub seconds: f64,
    /// Each LU, in the order of the URLs.
    pub luns: Vec<FilledLun>,
}

/// One LU a fill wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilledLun {
    /// The URL as given, password removed.
    pub url: String,
    /// Bytes written: `blocks` × `block_size`.
    pub bytes: u64,
    /// The LU's logical block size, bytes.
    pub block_size: u32,
    /// The LU's blocks, every one written.
    pub blocks: u64,
}

impl FillReport {
    /// The line for people, e.g. `filled 512 MiB on 1 LU in 1.23 s (436 MB/s)`
    /// (MB = 10^6 bytes, as every rate of isoe bench).
    pub fn summary(&self) -> String {
        let rate = crate::demand::mb_per_s(self.bytes, self.seconds).unwrap_or(0.0);
        let n = self.luns.len();
        format!(
            "filled {} on {n} LU{} in {:.2} s ({rate:.0} MB/s)",
            binary_size(self.bytes),
            if n == 1 { "" } else { "s" },
            self.seconds
        )
    }
}

/// `512 MiB`, `1.5 GiB`, `700 B`: a size as people read it.
fn binary_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let (mut value, mut unit) = (bytes as f64, "B");
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// Why a fill did not write every block.
#[derive(Debug, Error)]
pub enum FillError {
    /// The options cannot fill (no URL, no LUN in one, a write size that
    /// is not whole blocks, buffers past [`BUFFER_BYTES_MAX`]).
    #[error("{0}")]
    Options(String),
    /// Logging in to a URL or sizing its LU failed, as a run's setup fails.
    #[error(transparent)]
    Setup(#[from] RunError),
    /// A write failed (CHECK CONDITION, a lost session): the fill stopped.
    #[error("{url}: write at LBA {lba}: {what}")]
    Write {
        /// The URL, password removed.
        url: String,
        /// The write's first LBA.
        lba: u64,
        /// The status and sense in words, or what the initiator saw.
        what: String,
    },
    /// Flushing a LU's cache after its writes failed.
    #[error("{url}: SYNCHRONIZE CACHE after the writes: {what}")]
    Flush {
        /// The URL, password removed.
        url: String,
        /// Why.
        what: String,
    },
    /// The initiator could not wait for the sessions' answers.
    #[error("{urls}: {what}")]
    Engine {
        /// Every URL being filled, password removed.
        urls: String,
        /// What the initiator said.
        what: String,
    },
    /// The stop flag was set before every block was written.
    #[error("interrupted after {written} of {total} bytes")]
    Interrupted {
        /// Bytes written.
        written: u64,
        /// Bytes the LUs hold.
        total: u64,
    },
}

/// Fills every LU of `config` at once: logs in to each, writes every block
/// once, flushes each LU's cache (the read benchmark that follows must not
/// share the disk with the fill's write-back) and logs out.
pub fn fill(config: &FillConfig) -> Result<FillReport, FillError> {
    config.check()?;
    let mut filler = Filler::open(config)?;
    let start = Instant::now();
    let result = filler.write_all().and_then(|()| filler.flush());
    let seconds = start.elapsed().as_secs_f64();
    filler.logout();
    result?;
    let luns: Vec<FilledLun> = filler.lus.iter().map(Lu::report).collect();
    Ok(FillReport {
        bytes: luns.iter().map(|l| l.bytes).sum(),
        seconds,
        luns,
    })
}

/// One LU being filled.
struct Lu {
    name: String,
    lun: u16,
    session: usize,
    block_size: u32,
    blocks: u64,
    /// The writes not sent yet.
    writes: Writes,
    /// Bytes the target acknowledged.
    written: u64,
}

impl Lu {
    fn report(&self) -> FilledLun {
        FilledLun {
            url: self.name.clone(),
            bytes: self.written,
            block_size: self.block_size,
            blocks: self.blocks,
        }
    }
}

/// One write in flight, or ready to be; its buffer is kept between writes.
struct Slot {
    lu: usize,
    lba: u64,
    blocks: u32,
    buffer: Vec<u8>,
    busy: bool,
    unit_attentions: u32,
}

/// The sessions, the slots and how far the fill has got.
struct Filler<'a> {
    config: &'a FillConfig,
    engine: Engine,
    lus: Vec<Lu>,
    slots: Vec<Slot>,
    /// Slots with a write in flight.
    busy: usize,
    /// The first failure: nothing more is sent once it is set.
    failure: Option<FillError>,
    progress: Progress,
}

impl<'a> Filler<'a> {
    /// Logs in to every URL and sizes its LU; on a failure, logs out of
    /// those already open.
    fn open(config: &'a FillConfig) -> Result<Filler<'a>, FillError> {
        let mut filler = Filler {
            config,
            engine: Engine::new(),
            lus: Vec::new(),
            slots: Vec::new(),
            busy: 0,
            failure: None,
            progress: Progress::new(config.progress),
        };
        for u in &config.urls {
            if let Err(e) = filler.open_lu(u) {
                filler.logout();
                return Err(e);
            }
        }
        let qd = config.queue_depth as usize;
        filler.slots = (0..filler.lus.len() * qd)
            .map(|i| Slot {
                lu: i / qd,
                lba: 0,
                blocks: 0,
                // Allocated at its first write: a small LU needs fewer.
                buffer: Vec::new(),
                busy: false,
                unit_attentions: 0,
            })
            .collect();
        Ok(filler)
    }

    /// Logs in to `u` and learns its LU's block size and capacity; logs
    /// out again when the LU cannot be filled.
    fn open_lu(&mut self, u: &FillUrl) -> Result<(), FillError> {
        let lun = u.url.lun.unwrap_or(0);
        let config = self.config.session.config(&u.url, self.config.connections);
        let session = self
            .engine
            .login(config)
            .map_err(|source| RunError::Login {
                url: u.url.to_string(),
                source: Box::new(source),
            })?;
        let sized = self.size(u, session, lun);
        let Ok((block_size, lu_blocks)) = sized else {
            let _ = self.engine.logout(session);
            return sized.map(|_| ());
        };
        let blocks = span_blocks(lu_blocks, block_size, self.config.span_bytes);
        self.lus.push(Lu {
            name: u.name.clone(),
            lun,
            session,
            block_size,
            blocks,
            writes: Writes::new(blocks, self.config.write_bytes / block_size),
            written: 0,
        });
        Ok(())
    }

    /// The block size and blocks of `u`'s LU, through `session`, when the
    /// write size is whole blocks of it.
    fn size(&mut self, u: &FillUrl, session: usize, lun: u16) -> Result<(u32, u64), FillError> {
        let cap =
            run::capacity(&mut self.engine, session, lun).map_err(|what| RunError::Setup {
                url: u.url.to_string(),
                what,
            })?;
        let bs = cap.block_size_bytes;
        if bs == 0 || !self.config.write_bytes.is_multiple_of(bs) {
            return Err(FillError::Options(format!(
                "{}: the write size {} is not a multiple of the LU's {bs}-byte blocks",
                u.name, self.config.write_bytes
            )));
        }
        Ok((bs, cap.blocks()))
    }

    /// Keeps `queue_depth` writes in flight per LU until every block is
    /// written, a write fails or the stop flag is set; then waits for the
    /// writes in flight (at most [`DRAIN_TIMEOUT`]).
    fn write_all(&mut self) -> Result<(), FillError> {
        for token in 0..self.slots.len() {
            self.send_next(token);
        }
        let mut done: Vec<Completion> = Vec::new();
        let mut drain_deadline = None;
        while self.busy > 0 {
            if self.stopping() {
                let deadline =
                    *drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_TIMEOUT);
                if Instant::now() > deadline {
                    break;
                }
            }
            if let Err(e) = self.engine.poll(&mut done, Duration::from_millis(50)) {
                self.fail(FillError::Engine {
                    urls: self.names(),
                    what: e.to_string(),
                });
                break;
            }
            for c in done.drain(..) {
                self.complete(c);
            }
            self.progress.tick();
        }
        self.progress.finish();
        self.outcome()
    }

    /// The first failure, the interruption, or Ok when all is written.
    fn outcome(&mut self) -> Result<(), FillError> {
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        let written = self.lus.iter().map(|l| l.written).sum();
        let total = self
            .lus
            .iter()
            .map(|l| l.blocks * u64::from(l.block_size))
            .sum();
        if written < total {
            return Err(FillError::Interrupted { written, total });
        }
        Ok(())
    }

    /// Sends slot `token`'s LU's next write, if one is left and nothing
    /// stops the fill.
    fn send_next(&mut self, token: usize) {
        if self.stopping() {
            return;
        }
        let slot = &mut self.slots[token];
        let Some((lba, blocks)) = self.lus[slot.lu].writes.next() else {
            return;
        };
        (slot.lba, slot.blocks, slot.unit_attentions) = (lba, blocks, 0);
        self.issue(token);
    }

    /// Sends slot `token`'s write (again, after a UNIT ATTENTION), its
    /// buffer filled with the pattern of its place.
    fn issue(&mut self, token: usize) {
        let slot = &mut self.slots[token];
        let lu = &self.lus[slot.lu];
        let bytes = slot.blocks as usize * lu.block_size as usize;
        slot.buffer.resize(bytes, 0);
        pattern(&mut slot.buffer, slot.lba * u64::from(lu.block_size));
        let cdb = cdb::write16(slot.lba, slot.blocks, false);
        let command = Command::write(lu.lun, &cdb, std::mem::take(&mut slot.buffer));
        match self
            .engine
            .submit_or_return(lu.session, command, token as u64)
        {
            Ok(()) => {
                slot.busy = true;
                self.busy += 1;
            }
            Err(refused) => {
                slot.buffer = refused.command.buffer;
                let e = FillError::Write {
                    url: lu.name.clone(),
                    lba: slot.lba,
                    what: refused.error.to_string(),
                };
                self.fail(e);
            }
        }
    }

    /// Takes one answered write: counts it and sends the slot's next, sends
    /// it again after a UNIT ATTENTION, or stops the fill on a failure.
    fn complete(&mut self, c: Completion) {
        let failure = run::failure_in_words(&c);
        let unit_attention = matches!(&c.outcome, Outcome::Scsi(st)
            if st.sense_key().is_some_and(|k| k.0 == SENSE_UNIT_ATTENTION));
        // Tokens are slot indices; anything else is none of ours.
        let token = c.token as usize;
        let Some(slot) = self.slots.get_mut(token).filter(|s| s.busy) else {
            return;
        };
        slot.busy = false;
        slot.buffer = c.buffer;
        self.busy -= 1;
        let (lu, lba, blocks) = (slot.lu, slot.lba, slot.blocks);
        match failure {
            // SAM-5 5.14: not executed, and the condition is now cleared.
            Some(_) if unit_attention && slot.unit_attentions < UNIT_ATTENTION_RETRIES => {
                slot.unit_attentions += 1;
                if !self.stopping() {
                    self.issue(token);
                }
            }
            Some((what, _)) => {
                let url = self.lus[lu].name.clone();
                self.fail(FillError::Write { url, lba, what });
            }
            None => {
                let lu = &mut self.lus[lu];
                let bytes = u64::from(blocks) * u64::from(lu.block_size);
                lu.written += bytes;
                self.progress.add(bytes);
                self.send_next(token);
            }
        }
    }

    /// True once nothing more is to be sent: a write failed, or the
    /// caller said stop.
    fn stopping(&self) -> bool {
        self.failure.is_some() || self.config.stop.load(Ordering::Relaxed)
    }

    /// Keeps the first failure: the others follow from it.
    fn fail(&mut self, e: FillError) {
        self.failure.get_or_insert(e);
    }

    /// SYNCHRONIZE CACHE (10) of every LU, whole: what was written is on
    /// the LU's medium before the fill says it is done.
    fn flush(&mut self) -> Result<(), FillError> {
        for lu in &self.lus {
            let sync = Command::new(lu.lun, &cdb::synchronize_cache10());
            let flushed = match self.engine.execute(lu.session, sync) {
                Ok(done) => done.good().map(|_| ()),
                Err(e) => Err(e.to_string()),
            };
            flushed.map_err(|what| FillError::Flush {
                url: lu.name.clone(),
                what,
            })?;
        }
        Ok(())
    }

    /// Every URL's name, for a failure of them all.
    fn names(&self) -> String {
        let names: Vec<&str> = self.lus.iter().map(|l| l.name.as_str()).collect();
        names.join(", ")
    }

    fn logout(&mut self) {
        for lu in &self.lus {
            let _ = self.engine.logout(lu.session);
        }
    }
}

/// The live line, once a second on stderr, when asked for.
struct Progress {
    enabled: bool,
    start: Instant,
    /// When the last line was printed, and the writes and bytes since.
    last: Instant,
    ios: u64,
    bytes: u64,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            enabled,
            start: now,
            last: now,
            ios: 0,
            bytes: 0,
        }
    }

    fn add(&mut self, bytes: u64) {
        self.ios += 1;
        self.bytes += bytes;
    }

    fn tick(&mut self) {
        let now = Instant::now();
        let window = now.duration_since(self.last).as_secs_f64();
        if self.enabled && window >= 1.0 {
            let elapsed = now.duration_since(self.start).as_secs_f64();
            let line = crate::table::progress_line(elapsed, self.ios, self.bytes, window);
            eprint!("\r{line}");
            (self.last, self.ios, self.bytes) = (now, 0, 0);
        }
    }

    fn finish(&self) {
        if self.enabled && self.last != self.start {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_not_zeros_and_differs_from_block_to_block() {
        let mut buf = vec![0u8; 64 * 1024];
        pattern(&mut buf, 4096);
        let pieces: Vec<&[u8]> = buf.chunks(PIECE_BYTES).collect();
        for (i, piece) in pieces.iter().enumerate() {
            assert!(piece.iter().any(|&b| b != 0), "piece {i} is zeros");
            let at = u64::from_le_bytes(piece[..8].try_into().unwrap());
            assert_eq!(at, 4096 + (i * PIECE_BYTES) as u64);
        }
        let mut sorted = pieces.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), pieces.len(), "two pieces are alike");
        // Beyond the header too: the filler differs (no dedup on the tail).
        let tails: std::collections::HashSet<&[u8]> = pieces.iter().map(|p| &p[16..]).collect();
        assert_eq!(tails.len(), pieces.len());
        // 4 KiB blocks differ as well, and are not one piece repeated.
        let blocks: std::collections::HashSet<&[u8]> = buf.chunks(4096).collect();
        assert_eq!(blocks.len(), buf.len() / 4096);
    }

    #[test]
    fn the_pattern_depends_only_on_the_offset_and_checks_back() {
        // One 8 KiB write, or the same bytes written 512 at a time.
        let mut whole = vec![0u8; 8192];
        pattern(&mut whole, 1 << 20);
        let mut pieces = vec![0u8; 8192];
        for (i, p) in pieces.chunks_mut(512).enumerate() {
            pattern(p, (1 << 20) + 512 * i as u64);
        }
        assert_eq!(whole, pieces);
        assert_eq!(first_mismatch(&whole, 1 << 20), None);
        // Read back from the wrong place, or with a byte flipped, or zeros.
        assert_eq!(first_mismatch(&whole, 0), Some(0));
        whole[3 * 512 + 100] ^= 0x40;
        assert_eq!(first_mismatch(&whole, 1 << 20), Some((1 << 20) + 3 * 512));
        assert_eq!(first_mismatch(&[0u8; 1024], 512), Some(512));
        // A short tail is checked as far as it goes.
        let mut short = vec![0u8; 700];
        pattern(&mut short, 0);
        assert_eq!(first_mismatch(&short, 0), None);
        assert_eq!(short[..700], whole_at(0)[..700]);
    }

    fn whole_at(offset: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 1024];
        pattern(&mut buf, offset);
        buf
    }

    /// Every LBA of `blocks`, covered by `writes`, exactly once and in order.
    fn assert_covers_once(writes: &[(u64, u32)], blocks: u64, per_write: u32) {
        let mut next = 0;
        for &(lba, n) in writes {
            assert_eq!(lba, next, "{writes:?}");
            assert!(n >= 1 && n <= per_write, "{writes:?}");
            next += u64::from(n);
        }
        assert_eq!(next, blocks, "{writes:?}");
    }

    #[test]
    fn the_writes_cover_every_lba_once_the_last_shortened() {
        let w: Vec<(u64, u32)> = Writes::new(10, 4).collect();
        assert_eq!(w, vec![(0, 4), (4, 4), (8, 2)]);
        assert_covers_once(&w, 10, 4);
        // A LU that is whole writes: none shortened.
        let w: Vec<(u64, u32)> = Writes::new(2048, 256).collect();
        assert_eq!(w.len(), 8);
        assert!(w.iter().all(|&(_, n)| n == 256));
        // A LU smaller than one write: one write of all of it.
        assert_eq!(Writes::new(3, 2048).collect::<Vec<_>>(), vec![(0, 3)]);
        // No blocks, no writes; a zero write size still advances.
        assert_eq!(Writes::new(0, 8).count(), 0);
        assert_covers_once(&Writes::new(5, 0).collect::<Vec<_>>(), 5, 1);
        for (blocks, per) in [(1, 1), (7, 3), (1000, 7), (16_384, 2048), (16_385, 2048)] {
            assert_covers_once(&Writes::new(blocks, per).collect::<Vec<_>>(), blocks, per);
        }
        // Near the end of the LBA space nothing overflows.
        let w: Vec<(u64, u32)> = Writes {
            next: u64::MAX - 5,
            end: u64::MAX,
            per_write: 4,
        }
        .collect();
        assert_eq!(w, vec![(u64::MAX - 5, 4), (u64::MAX - 1, 1)]);
    }

    #[test]
    fn a_span_fills_its_whole_blocks_from_the_start_and_never_past_the_lu() {
        assert_eq!(span_blocks(1000, 512, None), 1000);
        assert_eq!(span_blocks(1000, 512, Some(4096)), 8);
        // A span ending inside a block writes that block whole.
        assert_eq!(span_blocks(1000, 4096, Some(4097)), 2);
        assert_eq!(span_blocks(1000, 512, Some(1 << 40)), 1000);
    }

    #[test]
    fn bad_options_are_refused_before_any_login() {
        let url = || FillUrl::parse("iscsi://u%secret@127.0.0.1:1/iqn.x:t/0").unwrap();
        let config = |f: &dyn Fn(&mut FillConfig)| {
            let mut c = FillConfig::new(vec![url()], SessionTemplate::default());
            f(&mut c);
            fill(&c).unwrap_err().to_string()
        };
        assert!(config(&|c| c.urls.clear()).contains("no URL"));
        assert!(config(&|c| c.write_bytes = 1000).contains("multiple of 512"));
        assert!(config(&|c| c.write_bytes = 0).contains("multiple of 512"));
        assert!(config(&|c| c.queue_depth = 0).contains("at least 1"));
        let big = config(&|c| (c.queue_depth, c.write_bytes) = (4096, 1 << 20));
        assert!(big.contains("buffers"), "{big}");
        let no_lun = config(&|c| c.urls = vec![FillUrl::parse("iscsi://h/iqn.x:t").unwrap()]);
        assert!(no_lun.contains("names no LUN"), "{no_lun}");
        // The name keeps the URL as given, less its password.
        assert_eq!(url().name, "iscsi://u@127.0.0.1:1/iqn.x:t/0");
    }

    #[test]
    fn the_report_reads_back_and_sums_up_for_people() {
        let report = FillReport {
            bytes: 512 << 20,
            seconds: 1.23,
            luns: vec![FilledLun {
                url: "iscsi://127.0.0.1:3260/iqn.x:t/0".into(),
                bytes: 512 << 20,
                block_size: 512,
                blocks: 1 << 20,
            }],
        };
        assert_eq!(
            report.summary(),
            "filled 512 MiB on 1 LU in 1.23 s (436 MB/s)"
        );
        let out = FillOutput { fill: report };
        let line = serde_json::to_string(&out).unwrap();
        assert!(
            line.starts_with("{\"fill\":{\"bytes\":536870912,\"seconds\":1.23,\"luns\":[{\"url\":"),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<FillOutput>(&line).unwrap(), out);
        assert_eq!(binary_size(700), "700 B");
        assert_eq!(binary_size(3 << 29), "1.5 GiB");
    }
}
