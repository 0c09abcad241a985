//! Direct placement of Data-In (RFC 7143 §11.7): a large data segment is
//! received straight into the buffer of the task it belongs to, as an
//! offload adapter's direct data placement does, so its bytes are copied
//! once (kernel to task buffer) instead of twice (kernel to receive buffer,
//! receive buffer to task buffer).
//!
//! The driver finds a Data-In header in its receive buffer with most of the
//! data still to come and asks [`SessionCore::begin_placement`]. Until the
//! PDU is whole, each receive on that connection fills the buffers
//! [`SessionCore::placement_buffers`] names (the rest of the data segment in
//! the task's buffer, the padding and data digest in the [`Placement`], then
//! whatever follows the PDU in the driver's own buffer) and is accounted
//! with [`SessionCore::placement_received`]. [`SessionCore::finish_placement`]
//! checks the data digest and handles the PDU as a buffered one is handled.
//!
//! The destination is looked up by Initiator Task Tag at every receive,
//! never held as a pointer. A task that ends meanwhile (a task management
//! function answered on another connection, a failed session) is therefore
//! never written once its buffer went back to the caller: the rest of its
//! data goes to a sink and is dropped, as late data of an ended task always
//! is. A placement begun before the connections were lost goes to the sink
//! too: its task may have been reissued, under the same tag, meanwhile.

use super::{ConnFailure, Kind, SessionCore};
use isoe_wire::digest;
use isoe_wire::frame::{self, Header};
use isoe_wire::pdu::DataIn;
use isoe_wire::Pdu;
use std::io::IoSliceMut;
use std::time::Instant;

/// Padding (up to 3 bytes) and data digest (4).
const TRAILER_MAX: usize = 7;
/// The sink for data of ended tasks, received through in pieces this large.
const SINK_BYTES: usize = 64 * 1024;

/// A Data-In PDU whose data segment is being received into its task's
/// buffer. Made by [`SessionCore::begin_placement`]; the driver keeps it with
/// the connection's socket until [`Placement::is_complete`].
#[derive(Debug)]
pub struct Placement {
    conn: usize,
    /// `SessionCore::conns_epoch` when the placement began.
    epoch: u32,
    header: Header,
    data_in: DataIn,
    /// Data-segment bytes received so far (including those copied at the start).
    data_done: usize,
    /// CRC32C of those bytes, kept only with a data digest.
    crc: u32,
    trailer: [u8; TRAILER_MAX],
    trailer_done: usize,
    /// Some data went to the sink: the task had ended.
    sunk: bool,
    /// What the last [`SessionCore::placement_buffers`] handed out.
    offer: Offer,
}

/// Byte counts of the buffers handed out for one receive, in order.
#[derive(Debug, Default, Clone, Copy)]
struct Offer {
    data: usize,
    data_to_sink: bool,
    trailer: usize,
    tail: usize,
}

impl Placement {
    /// The connection whose byte stream carries the PDU.
    pub fn conn(&self) -> usize {
        self.conn
    }

    /// Data-segment bytes still to come.
    pub fn data_left(&self) -> usize {
        self.header.data_len() - self.data_done
    }

    /// Data-segment, padding and digest bytes still to come: the rest of the PDU.
    pub fn bytes_left(&self) -> usize {
        self.data_left() + self.header.trailer_len() - self.trailer_done
    }

    /// True once the data segment, its padding and its digest are all in.
    pub fn is_complete(&self) -> bool {
        self.bytes_left() == 0
    }
}

impl SessionCore {
    /// Starts placing the PDU at the start of `data` (bytes received on
    /// connection `c`, nothing before them undecoded) when it is a Data-In
    /// whose header is in and at least `min_direct_bytes` of whose data
    /// segment are still to come, for a live read whose buffer holds it.
    ///
    /// On Some the data bytes already in `data` are in the task's buffer and
    /// all of `data` is consumed. On None nothing changed: the PDU takes the
    /// buffered path, which also reports anything wrong with it.
    pub fn begin_placement(
        &mut self,
        c: usize,
        data: &[u8],
        min_direct_bytes: usize,
    ) -> Option<Placement> {
        let limits = self.conns.get(c)?.recv_limits;
        let header = frame::peek_header(data, &limits).ok()??;
        let present = data.len() - header.header_len();
        // At least one data byte must be still to come, or the PDU could
        // be whole with nothing left to place.
        if header.data_len() < present.saturating_add(min_direct_bytes.max(1)) {
            return None;
        }
        let Ok(Pdu::DataIn(data_in)) = header.pdu() else {
            return None;
        };
        let slot = self.data_in_task(&data_in, header.data_len()).ok()??;
        let start = data_in.buffer_offset as usize;
        let task = self.task_mut(slot)?;
        let landed = &mut task.buffer[start..start + present];
        landed.copy_from_slice(&data[header.header_len()..]);
        let crc = if header.has_data_digest() {
            digest::crc32c(landed)
        } else {
            0
        };
        Some(Placement {
            conn: c,
            epoch: self.conns_epoch,
            header,
            data_in,
            data_done: present,
            crc,
            trailer: [0; TRAILER_MAX],
            trailer_done: 0,
            sunk: false,
            offer: Offer::default(),
        })
    }

    /// The buffers the next receive on the placement's connection fills,
    /// in order, and how many of the three are used: the rest of the data
    /// segment, in the task's buffer; the padding and data digest; then
    /// `tail`, the driver's room for what follows the PDU.
    ///
    /// When the task has ended, the data goes to a sink instead, at most
    /// 64 KiB per receive and then without the trailer and `tail`. The
    /// buffers always hold at least one byte. Call
    /// [`SessionCore::placement_received`] right after the receive.
    pub fn placement_buffers<'a>(
        &'a mut self,
        p: &'a mut Placement,
        tail: &'a mut [u8],
    ) -> ([IoSliceMut<'a>; 3], usize) {
        assert!(
            !p.is_complete(),
            "placement_buffers: the PDU is whole already"
        );
        let mut iov = [
            IoSliceMut::new(&mut []),
            IoSliceMut::new(&mut []),
            IoSliceMut::new(&mut []),
        ];
        let mut count = 0;
        p.offer = Offer::default();
        let data_left = p.data_left();
        if data_left > 0 {
            let live = !p.sunk && p.epoch == self.conns_epoch;
            let slot = live
                .then(|| self.slot_of(p.data_in.initiator_task_tag))
                .flatten();
            let start = p.data_in.buffer_offset as usize + p.data_done;
            let SessionCore { slots, sink, .. } = self;
            let in_task = slot
                .and_then(|s| slots[s as usize].task.as_mut())
                .and_then(|t| t.buffer.get_mut(start..start + data_left));
            let dest = match in_task {
                Some(dest) => dest,
                None => {
                    p.sunk = true;
                    if sink.is_empty() {
                        sink.resize(SINK_BYTES, 0);
                    }
                    &mut sink[..data_left.min(SINK_BYTES)]
                }
            };
            p.offer.data = dest.len();
            p.offer.data_to_sink = p.sunk;
            iov[0] = IoSliceMut::new(dest);
            count = 1;
            if p.offer.data < data_left {
                return (iov, count);
            }
        }
        p.offer.tail = tail.len();
        p.offer.trailer = p.header.trailer_len() - p.trailer_done;
        let trailer = &mut p.trailer[p.trailer_done..p.header.trailer_len()];
        for part in [trailer, tail] {
            if !part.is_empty() {
                iov[count] = IoSliceMut::new(part);
                count += 1;
            }
        }
        (iov, count)
    }

    /// Where the rest of the placed PDU's data segment goes when its task
    /// reads into an external buffer ([`crate::Command::external`]):
    /// (buffer id, offset in it, bytes), for the driver to receive into
    /// through its [`crate::DataPlane`] and account with
    /// [`SessionCore::placement_received`]; the padding, the digest and
    /// what follows come with the next ordinary receive. None when the
    /// data goes where [`SessionCore::placement_buffers`] says: the task
    /// has no external buffer or has ended, the data is all in, or the
    /// PDU has a data digest (computed over the bytes as they land, which
    /// an external buffer does not show).
    pub fn placement_external(&mut self, p: &mut Placement) -> Option<(u32, usize, usize)> {
        let data_left = p.data_left();
        if data_left == 0 || p.sunk || p.epoch != self.conns_epoch || p.header.has_data_digest() {
            return None;
        }
        let slot = self.slot_of(p.data_in.initiator_task_tag)?;
        let Kind::Scsi {
            external: Some(id), ..
        } = self.task(slot)?.kind
        else {
            return None;
        };
        p.offer = Offer {
            data: data_left,
            ..Offer::default()
        };
        Some((
            id,
            p.data_in.buffer_offset as usize + p.data_done,
            data_left,
        ))
    }

    /// Accounts a receive of `n` bytes into the last
    /// [`SessionCore::placement_buffers`]; returns how many of them landed
    /// in `tail`.
    pub fn placement_received(&mut self, p: &mut Placement, n: usize, now: Instant) -> usize {
        let offer = std::mem::take(&mut p.offer);
        assert!(
            n <= offer.data + offer.trailer + offer.tail,
            "placement_received: {n} bytes into buffers of {offer:?}"
        );
        let data_n = n.min(offer.data);
        if data_n > 0 && p.header.has_data_digest() {
            // The digest is computed while the bytes are still in the
            // cache, one receive at a time (ARCHITECTURE.md, datapath rule 5).
            let start = p.data_in.buffer_offset as usize + p.data_done;
            let landed = if offer.data_to_sink {
                self.sink.get(..data_n)
            } else {
                self.slot_of(p.data_in.initiator_task_tag)
                    .and_then(|s| self.task(s))
                    .and_then(|t| t.buffer.get(start..start + data_n))
            };
            match landed {
                Some(bytes) => p.crc = digest::crc32c_append(p.crc, bytes),
                // Only a driver calling in between can get here; the digest
                // then fails and the connection is dropped, nothing worse.
                None => p.sunk = true,
            }
        }
        p.data_done += data_n;
        let trailer_n = (n - data_n).min(offer.trailer);
        p.trailer_done += trailer_n;
        if p.epoch == self.conns_epoch {
            if let Some(conn) = self.conns.get_mut(p.conn) {
                conn.last_rx = now;
            }
        }
        n - data_n - trailer_n
    }

    /// Handles a placed PDU once it is whole, as [`SessionCore::handle_input`]
    /// handles a buffered Data-In: a data digest mismatch fails the
    /// connection; otherwise the window, the data count and, with the S bit,
    /// the task's status. Data of a task that ended meanwhile is dropped.
    pub fn finish_placement(&mut self, p: Placement) -> Result<(), ConnFailure> {
        assert!(
            p.is_complete(),
            "finish_placement: {} data bytes and the trailer still to come",
            p.data_left()
        );
        if p.epoch != self.conns_epoch {
            // Its connection is gone, and everything it carried with it.
            return Ok(());
        }
        let trailer = &p.trailer[..p.header.trailer_len()];
        p.header
            .verify_data_digest(p.crc, trailer)
            .map_err(|e| ConnFailure(format!("bad PDU from the target: {e}")))?;
        let d = p.data_in;
        self.update_window(d.exp_cmd_sn, d.max_cmd_sn);
        if p.sunk {
            return Ok(());
        }
        let len = p.header.data_len();
        if let Some(slot) = self.data_in_task(&d, len)? {
            self.data_in_landed(p.conn, &d, slot, len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, Completion, Outcome, TaskError, TaskManagement};
    use crate::session::testing::{limits, sent, session, MAX_PDU};
    use crate::session::{Chunk, ConnCore, Output};
    use isoe_wire::pdu::{ScsiResponse, TaskMgmtResponse};

    /// Submits a read of `len` bytes and sends it; returns its ITT and connection.
    fn read(core: &mut SessionCore, len: u32, token: u64) -> (u32, usize) {
        core.submit(Command::read(0, &[0x88], len), token).unwrap();
        core.pump();
        for c in 0..core.conns.len() {
            if let Some(Pdu::ScsiCommand(cmd)) = sent(core, c).first() {
                return (cmd.initiator_task_tag, c);
            }
        }
        panic!("the read went nowhere");
    }

    fn data_in(itt: u32, offset: usize, data: &[u8], status: bool, digests: bool) -> Vec<u8> {
        let pdu = Pdu::DataIn(DataIn {
            final_bit: status,
            status_present: status,
            underflow: status,
            residual_count: if status { 2 } else { 0 },
            initiator_task_tag: itt,
            target_transfer_tag: 0xffff_ffff,
            stat_sn: 1,
            exp_cmd_sn: 3,
            max_cmd_sn: 70,
            data_sn: (offset / MAX_PDU) as u32,
            buffer_offset: offset as u32,
            ..Default::default()
        });
        let mut out = Vec::new();
        frame::encode(&mut out, &pdu, &[], data, &limits(digests));
        out
    }

    fn scsi_response(itt: u32, stat_sn: u32, digests: bool) -> Vec<u8> {
        let pdu = Pdu::ScsiResponse(ScsiResponse {
            initiator_task_tag: itt,
            stat_sn,
            exp_cmd_sn: 4,
            max_cmd_sn: 71,
            ..Default::default()
        });
        let mut out = Vec::new();
        frame::encode(&mut out, &pdu, &[], &[], &limits(digests));
        out
    }

    /// A read's Data-In, 256 KiB PDUs and an odd-sized last one with the status.
    fn read_stream(itt: u32, data: &[u8], digests: bool) -> Vec<u8> {
        let mut stream = Vec::new();
        for (i, chunk) in data.chunks(MAX_PDU).enumerate() {
            let last = (i + 1) * MAX_PDU >= data.len();
            stream.extend(data_in(itt, i * MAX_PDU, chunk, last, digests));
        }
        stream
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
            .collect()
    }

    /// What `recvmsg` does: fills the buffers in order from `src`.
    fn fill(iov: &mut [IoSliceMut<'_>], src: &[u8]) -> usize {
        let mut at = 0;
        for dest in iov.iter_mut() {
            let n = dest.len().min(src.len() - at);
            dest[..n].copy_from_slice(&src[at..at + n]);
            at += n;
        }
        at
    }

    /// A connection's receive side as the engine drives it, over `stream`
    /// arriving `piece` bytes per receive: Data-In with at least `min`
    /// bytes to come is placed. Returns the PDUs placed.
    struct Driver {
        c: usize,
        rbuf: Vec<u8>,
        placement: Option<Placement>,
        placed: usize,
    }

    impl Driver {
        fn new(c: usize) -> Driver {
            Driver {
                c,
                rbuf: Vec::new(),
                placement: None,
                placed: 0,
            }
        }

        /// One receive of at most `chunk.len()` bytes; returns how many it took.
        fn receive(
            &mut self,
            core: &mut SessionCore,
            chunk: &[u8],
            min: usize,
        ) -> Result<usize, ConnFailure> {
            let now = Instant::now();
            let taken = match self.placement.take() {
                Some(mut p) => {
                    let mut tail = [0u8; 52];
                    let (mut iov, count) = core.placement_buffers(&mut p, &mut tail);
                    assert!(count > 0 && iov[..count].iter().any(|s| !s.is_empty()));
                    let n = fill(&mut iov[..count], chunk);
                    let in_tail = core.placement_received(&mut p, n, now);
                    self.rbuf.extend_from_slice(&tail[..in_tail]);
                    if !p.is_complete() {
                        assert_eq!(in_tail, 0);
                        self.placement = Some(p);
                        return Ok(n);
                    }
                    core.finish_placement(p)?;
                    self.placed += 1;
                    n
                }
                None => {
                    self.rbuf.extend_from_slice(chunk);
                    chunk.len()
                }
            };
            let (used, _) = core.handle_input(self.c, &self.rbuf, now)?;
            self.rbuf.drain(..used);
            if !self.rbuf.is_empty() {
                if let Some(p) = core.begin_placement(self.c, &self.rbuf, min) {
                    self.rbuf.clear();
                    self.placement = Some(p);
                }
            }
            Ok(taken)
        }

        fn deliver(
            &mut self,
            core: &mut SessionCore,
            stream: &[u8],
            piece: usize,
            min: usize,
        ) -> Result<(), ConnFailure> {
            let mut at = 0;
            while at < stream.len() {
                let end = (at + piece).min(stream.len());
                at += self.receive(core, &stream[at..end], min)?;
            }
            Ok(())
        }
    }

    fn drain(core: &mut SessionCore) -> Vec<Completion> {
        let mut out = Vec::new();
        core.drain_completions(&mut out);
        out
    }

    #[test]
    fn placed_and_buffered_data_in_end_alike() {
        let data = pattern(600_001, 5);
        for digests in [false, true] {
            for piece in [1, 7, 1000, 65_536, 300_000, 1 << 20] {
                let mut outcomes = Vec::new();
                for min in [usize::MAX, 1, 16 * 1024] {
                    let mut core = session(1, digests);
                    let (itt, c) = read(&mut core, 600_003, 1);
                    core.submit(Command::new(0, &[0]), 2).unwrap();
                    core.pump();
                    let Some(Pdu::ScsiCommand(tur)) = sent(&mut core, c).first().cloned() else {
                        panic!("no second command");
                    };
                    let mut stream = read_stream(itt, &data, digests);
                    stream.extend(scsi_response(tur.initiator_task_tag, 2, digests));
                    let mut driver = Driver::new(c);
                    driver.deliver(&mut core, &stream, piece, min).unwrap();
                    assert!(driver.placement.is_none() && driver.rbuf.is_empty());
                    if min == usize::MAX || piece == 1 << 20 {
                        assert_eq!(driver.placed, 0);
                    } else {
                        assert!(driver.placed >= 1, "piece {piece} min {min}");
                    }
                    let mut done = drain(&mut core);
                    done.sort_by_key(|d| d.token);
                    assert_eq!(done.len(), 2, "piece {piece} min {min}");
                    assert_eq!(&done[0].buffer[..data.len()], &data[..]);
                    let conn = &core.conns[c];
                    let state = (conn.exp_stat_sn, core.exp_cmd_sn, core.max_cmd_sn);
                    outcomes.push((
                        done.iter().map(|d| d.outcome.clone()).collect::<Vec<_>>(),
                        state,
                    ));
                }
                let Outcome::Scsi(status) = &outcomes[0].0[0] else {
                    panic!("{:?}", outcomes[0]);
                };
                assert_eq!(status.data_in_len, 600_001);
                assert!(status.residual.underflow);
                assert_eq!(outcomes[0].1, (3, 4, 71));
                assert!(outcomes.iter().all(|o| *o == outcomes[0]), "{outcomes:?}");
            }
        }
    }

    /// A read of `data.len()` bytes into external buffer 9, sent; its
    /// session, its Data-In stream, and the placement its first `first`
    /// bytes begin.
    fn external_read(
        data: &[u8],
        digests: bool,
        first: usize,
    ) -> (SessionCore, Vec<u8>, Placement) {
        let mut core = session(1, digests);
        let mut cmd = Command::read(0, &[0x88], data.len() as u32);
        cmd.external = Some(9);
        core.submit(cmd, 1).unwrap();
        core.pump();
        let Some(Pdu::ScsiCommand(sc)) = sent(&mut core, 0).first().cloned() else {
            panic!("the read went nowhere");
        };
        let stream = read_stream(sc.initiator_task_tag, data, digests);
        let p = core
            .begin_placement(0, &stream[..first], 16 * 1024)
            .unwrap();
        (core, stream, p)
    }

    #[test]
    fn a_read_into_an_external_buffer_places_what_is_still_to_come_there() {
        let data = pattern(200_000, 3);
        let first = 4096;
        let (mut core, stream, mut p) = external_read(&data, false, first);
        let mut external = vec![0u8; data.len()];
        let mut at = first;
        let head = first - 48;
        let mut expect_offset = head;
        while let Some((id, offset, len)) = core.placement_external(&mut p) {
            assert_eq!(
                (id, offset, len),
                (9, expect_offset, data.len() - expect_offset)
            );
            let n = len.min(50_000);
            external[offset..offset + n].copy_from_slice(&stream[at..at + n]);
            at += n;
            expect_offset += n;
            assert_eq!(core.placement_received(&mut p, n, Instant::now()), 0);
        }
        assert!(p.is_complete());
        core.finish_placement(p).unwrap();
        let done = drain(&mut core);
        assert_eq!(done.len(), 1);
        // What came with the header is in the buffer; the rest only in the
        // external buffer.
        assert_eq!(&done[0].buffer[..head], &data[..head]);
        assert!(done[0].buffer[head..].iter().all(|&b| b == 0));
        assert_eq!(&external[head..], &data[head..]);
        let Outcome::Scsi(status) = &done[0].outcome else {
            panic!("{:?}", done[0].outcome);
        };
        assert_eq!(status.data_in_len, 200_000);

        // With a data digest the bytes must be seen: the buffer takes them.
        let (mut core, _, mut p) = external_read(&data, true, first);
        assert!(core.placement_external(&mut p).is_none());
    }

    #[test]
    fn a_write_from_an_external_buffer_goes_out_as_chunks_in_order() {
        let mut core = session(1, false);
        let mut cmd = Command::write(0, &[0x8a], vec![0; 8192]);
        cmd.external = Some(4);
        core.submit(cmd, 1).unwrap();
        core.pump();
        let mut seen = Vec::new();
        let all = core
            .flush_output(0, |out| {
                let Output::Chunks(chunks) = out else {
                    panic!("an external buffer's data as plain bytes");
                };
                let mut n = 0;
                for chunk in chunks {
                    let (what, len) = match *chunk {
                        Chunk::Bytes(iov) => ("bytes", iov.iter().map(|s| s.len()).sum()),
                        Chunk::External {
                            buffer,
                            offset,
                            len,
                        } => {
                            assert_eq!((buffer, offset), (4, 0));
                            ("external", len)
                        }
                    };
                    seen.push((what, len));
                    n += len;
                }
                Ok(n)
            })
            .unwrap();
        assert!(all);
        assert_eq!(seen, [("bytes", 48), ("external", 8192)]);
        // The flush sent it all: the command waits for its answer only.
        assert_eq!(core.conns[0].out.externals, 0);
        assert!(core.conns[0].out.is_empty());
        // Plain `flush` cannot send an external buffer's data.
        let mut cmd = Command::write(0, &[0x8a], vec![0; 8192]);
        cmd.external = Some(5);
        core.submit(cmd, 2).unwrap();
        core.pump();
        assert!(core.flush(0, |_| Ok(0)).is_err());

        // Nor is one sent with a data digest, computed over bytes it does
        // not show.
        let mut core = session(1, true);
        let mut cmd = Command::write(0, &[0x8a], vec![0; 8192]);
        cmd.external = Some(4);
        let (err, _) = core.submit(cmd, 1).unwrap_err();
        assert!(matches!(err, TaskError::Invalid(why) if why.contains("digest")));
    }

    #[test]
    fn a_damaged_placed_data_digest_fails_the_connection() {
        let data = pattern(MAX_PDU, 1);
        // A data byte; a digest byte (256 KiB needs no padding).
        for flip in [100_000usize, 52 + MAX_PDU + 2] {
            let mut core = session(1, true);
            let (itt, c) = read(&mut core, MAX_PDU as u32, 1);
            let mut stream = read_stream(itt, &data, true);
            stream[flip] ^= 0x20;
            let mut driver = Driver::new(c);
            // The first receive brings the header and starts the placement.
            driver
                .deliver(&mut core, &stream[..4096], 4096, 16 * 1024)
                .unwrap();
            assert!(driver.placement.is_some());
            let err = driver.deliver(&mut core, &stream[4096..], 4096, 16 * 1024);
            let ConnFailure(why) = err.unwrap_err();
            assert!(why.contains("data digest"), "{why}");
            assert!(drain(&mut core).is_empty());
        }
    }

    #[test]
    fn a_data_in_the_task_cannot_take_is_left_to_the_buffered_path() {
        let mut core = session(1, false);
        let (itt, c) = read(&mut core, 100_000, 1);
        // Ends past the 100 000 bytes the read expects.
        let stream = data_in(itt, 50_000, &pattern(60_000, 0), true, false);
        assert!(core.begin_placement(c, &stream[..1000], 1).is_none());
        let mut driver = Driver::new(c);
        let ConnFailure(why) = driver.deliver(&mut core, &stream, 1000, 1).unwrap_err();
        assert!(why.contains("past the expected"), "{why}");
        assert_eq!(driver.placed, 0);
    }

    #[test]
    fn a_task_aborted_during_placement_is_never_written_again() {
        let mut core = session(2, true);
        let (itt_a, c) = read(&mut core, MAX_PDU as u32, 1);
        assert_eq!(c, 0);
        let stream = read_stream(itt_a, &[0xab; MAX_PDU], true);
        let mut driver = Driver::new(c);
        driver
            .deliver(&mut core, &stream[..10_000], 5_000, 16 * 1024)
            .unwrap();
        assert!(driver.placement.is_some());

        // The LU reset goes out on the idle connection 1 and is answered
        // there: the read ends, and its buffer goes back to the caller.
        core.submit_task_management(TaskManagement::LogicalUnitReset(0), 7)
            .unwrap();
        let Some(Pdu::TaskMgmtRequest(tmf)) = sent(&mut core, 1).first().cloned() else {
            panic!("no TMF on connection 1");
        };
        let mut answer = Vec::new();
        let response = Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: isoe_wire::pdu::TmfResponse::Complete,
            initiator_task_tag: tmf.initiator_task_tag,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 70,
        });
        frame::encode(&mut answer, &response, &[], &[], &limits(true));
        core.handle_input(1, &answer, Instant::now()).unwrap();
        let done = drain(&mut core);
        assert_eq!(done.len(), 2);
        let a = done.iter().find(|d| d.token == 1).unwrap();
        assert_eq!(a.outcome, Outcome::Failed(TaskError::Aborted));
        assert_eq!(&a.buffer[..10_000 - 52], &[0xab; 10_000 - 52][..]);

        // A new read takes the freed slot, under a new tag.
        let (itt_b, _) = read(&mut core, MAX_PDU as u32, 2);
        assert_eq!(itt_b & 0xffff, itt_a & 0xffff, "the slot is reused");
        assert_ne!(itt_b, itt_a);

        // The rest of the aborted read's data goes to the sink, not to the new read.
        driver
            .deliver(&mut core, &stream[10_000..], 5_000, 16 * 1024)
            .unwrap();
        assert!(driver.placement.is_none());
        assert_eq!(driver.placed, 1);
        let b = core.task(itt_b & 0xffff).unwrap();
        assert_eq!(b.data_in_bytes, 0);
        assert!(b.buffer.iter().all(|&x| x == 0), "the new read was written");
        assert!(drain(&mut core).is_empty());

        // The new read's own data completes it.
        let data = pattern(MAX_PDU, 9);
        let c_b = core.task(itt_b & 0xffff).unwrap().conn.unwrap();
        let mut driver_b = Driver::new(c_b);
        driver_b
            .deliver(
                &mut core,
                &read_stream(itt_b, &data, true),
                9_000,
                16 * 1024,
            )
            .unwrap();
        let done = drain(&mut core);
        assert_eq!(done.len(), 1);
        done[0].good().unwrap();
        assert_eq!(done[0].buffer, data);
    }

    #[test]
    fn a_placement_from_before_a_connection_loss_lands_in_the_sink() {
        let mut core = session(1, false);
        let (itt, c) = read(&mut core, MAX_PDU as u32, 1);
        let stale = read_stream(itt, &[0xcd; MAX_PDU], false);
        let mut driver = Driver::new(c);
        driver
            .deliver(&mut core, &stale[..3_000], 3_000, 1)
            .unwrap();
        assert!(driver.placement.is_some());

        // ERL 0: the connection fails and the read is reissued, same tag,
        // on the connection of the reinstated session.
        core.connections_lost();
        let conn = ConnCore::new(0, limits(false), limits(false), 1, Instant::now());
        core.add_connection(conn, 1, 64);
        core.pump();
        let Some(Pdu::ScsiCommand(again)) = sent(&mut core, 0).first().cloned() else {
            panic!("not reissued");
        };
        assert_eq!(again.initiator_task_tag, itt);

        // A driver that kept the old placement writes only to the sink.
        let mut p = driver.placement.take().unwrap();
        let mut tail = [0u8; 48];
        while !p.is_complete() {
            let (mut iov, count) = core.placement_buffers(&mut p, &mut tail);
            let n = fill(&mut iov[..count], &[0xcd; 70_000]);
            core.placement_received(&mut p, n, Instant::now());
        }
        core.finish_placement(p).unwrap();
        // What arrived before the loss is there, as with buffered data; nothing after.
        let task = core.task(itt & 0xffff).unwrap();
        assert_eq!(task.data_in_bytes, 0);
        assert!(task.buffer[..3_000 - 48].iter().all(|&x| x == 0xcd));
        assert!(
            task.buffer[3_000 - 48..].iter().all(|&x| x == 0),
            "the reissued read was written"
        );
        assert!(drain(&mut core).is_empty());

        let data = pattern(MAX_PDU, 3);
        Driver::new(0)
            .deliver(&mut core, &read_stream(itt, &data, false), 60_000, 1)
            .unwrap();
        let done = drain(&mut core);
        done[0].good().unwrap();
        assert_eq!(done[0].buffer, data);
    }
}
