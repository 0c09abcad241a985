//! What the session core's unit tests share: a session with connections
//! and no sockets, and the PDUs a connection sent.

use super::{ConnCore, SessionCore};
use crate::config::Keepalive;
use isoe_wire::frame::{self, Decoded, FrameLimits};
use isoe_wire::negotiate::SessionParams;
use isoe_wire::pdu::Pdu;
use std::time::{Duration, Instant};

pub(crate) const MAX_PDU: usize = 256 * 1024;

pub(crate) fn limits(digests: bool) -> FrameLimits {
    FrameLimits {
        max_recv_data_segment_length: MAX_PDU as u32,
        header_digest: digests,
        data_digest: digests,
        crc: isoe_wire::digest::Crc32cImpl::Hardware,
    }
}

/// A session with `conns` connections, window [1, 64].
pub(crate) fn session(conns: u16, digests: bool) -> SessionCore {
    let now = Instant::now();
    let keepalive = Keepalive {
        interval: None,
        timeout: Duration::from_secs(15),
    };
    let mut core = SessionCore::new(0, SessionParams::default(), keepalive, 1, 1, 64);
    for cid in 0..conns {
        let conn = ConnCore::new(cid, limits(digests), limits(digests), 1, now);
        core.add_connection(conn, 1, 64);
    }
    core
}

/// Sends what connection `c` has queued; returns the PDUs.
pub(crate) fn sent(core: &mut SessionCore, c: usize) -> Vec<Pdu> {
    let mut bytes = Vec::new();
    core.flush(c, |iov| {
        let before = bytes.len();
        for s in iov {
            bytes.extend_from_slice(s);
        }
        Ok(bytes.len() - before)
    })
    .unwrap();
    let limits = core.conns[c].send_limits;
    let mut pdus = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match frame::decode(&bytes[at..], &limits) {
            Ok(Decoded::Frame { frame, len }) => {
                pdus.push(frame.pdu().unwrap());
                at += len;
            }
            other => panic!("{other:?}"),
        }
    }
    pdus
}
