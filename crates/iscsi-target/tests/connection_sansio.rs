//! The target's connection state machine driven without sockets: bytes in,
//! bytes out, time passed in (ARCHITECTURE.md, "Sans-IO core").

use isoe_target::connection::Finished as WorkDone;
use isoe_target::connection::{Action, Connection, Endpoint, Flow};
use isoe_target::{Config, Server};
use isoe_wire::digest::Crc32cImpl;
use isoe_wire::frame::{decode, encode, Decoded, FrameError, FrameLimits};
use isoe_wire::login::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
use isoe_wire::negotiate::{Digest, LocalParams, SessionType};
use isoe_wire::pdu::{self, DataOut, Lun, NopOut, ScsiCommand, RESERVED_TAG};
use isoe_wire::Pdu;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TARGET: &str = "iqn.2026-11.io.isoe:sansio";

fn server() -> Arc<Server> {
    server_with("")
}

/// The test target with `extra` (more TOML tables) appended to its configuration.
fn server_with(extra: &str) -> Arc<Server> {
    let text = format!(
        "portals = [\"127.0.0.1:0\"]\n[defaults]\nnop_in_interval_s = 5\nnop_in_timeout_s = 5\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"16MiB\"\n{extra}"
    );
    Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
}

/// What the test initiator logs in with.
fn initiator(
    session_type: SessionType,
    isid: [u8; 6],
    tsih: u16,
    cid: u16,
    params: LocalParams,
) -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        initiator_name: "iqn.2026-11.io.isoe:test-initiator".into(),
        initiator_alias: None,
        target_name: (session_type == SessionType::Normal).then(|| TARGET.to_string()),
        session_type,
        isid,
        tsih,
        cid,
        initiator_task_tag: 1,
        cmd_sn: 10,
        params,
        chap: None,
    }
}

/// Store work that finished: its token and completion.
type Finished = (u64, WorkDone);

/// Serials of the test connections, unique in the process.
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// One side of a connection: the target's state machine plus the bytes it
/// sent; it plays the driver's part for the actions the connection asks.
struct Wire {
    conn: Connection,
    limits: FrameLimits,
    now: Instant,
    /// Connections this one asked to wake ([`Action::Wake`]), in order.
    woken: Vec<u64>,
    /// Store work runs on threads of its own, as the driver's pool would
    /// run it; completions come back here.
    done: (Sender<Finished>, Receiver<Finished>),
    /// The TargetPortalGroupTag the last completed login declared.
    declared_tag: Option<u16>,
    /// How many pieces of store work went to threads.
    runs: usize,
}

impl Wire {
    fn new(server: &Arc<Server>) -> Wire {
        Wire::in_group(server, 1)
    }

    /// A connection accepted on a portal of portal group `tag`.
    fn in_group(server: &Arc<Server>, tag: u16) -> Wire {
        let now = Instant::now();
        let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
        let endpoint = Endpoint {
            serial,
            local: "127.0.0.1:3260".parse().unwrap(),
            portal_group_tag: tag,
            peer: "127.0.0.1:40000".parse().unwrap(),
            peer_gone: None,
        };
        Wire {
            conn: Connection::new(server.clone(), endpoint, now, [serial as u8; 32]),
            limits: FrameLimits::LOGIN,
            now,
            woken: Vec::new(),
            done: channel(),
            declared_tag: None,
            runs: 0,
        }
    }

    /// Feeds one PDU; returns what the target sent in answer, decoded.
    fn send(&mut self, pdu: &Pdu, data: &[u8]) -> (Flow, Vec<(Pdu, Vec<u8>)>) {
        let mut bytes = Vec::new();
        encode(&mut bytes, pdu, &[], data, &self.limits);
        // The answer to the last Login Request still goes without digests.
        let limits = self.conn.recv_limits();
        let flow = match decode(&bytes, &limits).expect("frame") {
            Decoded::Frame { frame, .. } => self.conn.handle_frame(&frame, self.now),
            Decoded::NeedMore { .. } => panic!("whole PDU given"),
        };
        self.take_actions();
        (flow, self.take_output_with(limits))
    }

    /// Carries out what the connection asked: wake-ups are recorded, store
    /// work starts on a thread.
    fn take_actions(&mut self) {
        while let Some(action) = self.conn.poll_action() {
            match action {
                Action::Wake(serial) => self.woken.push(serial),
                Action::Run { token, work } => {
                    self.runs += 1;
                    let done = self.done.0.clone();
                    std::thread::spawn(move || {
                        let _ = done.send((token, work.run()));
                    });
                }
            }
        }
    }

    /// Hands the connection the store work that has finished.
    fn complete_finished_work(&mut self) {
        while let Ok((token, completion)) = self.done.1.try_recv() {
            self.conn.complete_work(token, completion);
        }
    }

    fn take_output(&mut self) -> Vec<(Pdu, Vec<u8>)> {
        let limits = self.conn.recv_limits();
        self.take_output_with(limits)
    }

    /// What the target sent, decoded with the digests of `limits`.
    fn take_output_with(&mut self, limits: FrameLimits) -> Vec<(Pdu, Vec<u8>)> {
        let mut sent = Vec::new();
        self.conn
            .flush(&mut sent, self.now)
            .expect("flush to a Vec");
        let mut rest = &sent[..];
        let mut pdus = Vec::new();
        while !rest.is_empty() {
            // The test initiator checks digests with the crc32c crate,
            // whichever implementation the target computed them with.
            match decode(
                rest,
                &FrameLimits {
                    max_recv_data_segment_length: 1 << 24,
                    crc: Crc32cImpl::Hardware,
                    ..limits
                },
            )
            .expect("target output decodes")
            {
                Decoded::Frame { frame, len } => {
                    pdus.push((frame.pdu().expect("known opcode"), frame.data.to_vec()));
                    rest = &rest[len..];
                }
                Decoded::NeedMore { .. } => panic!("truncated output"),
            }
        }
        pdus
    }

    /// Logs in (new session when `tsih` is 0) and returns the TSIH.
    fn login(&mut self, params: LocalParams, isid: [u8; 6], tsih: u16, cid: u16) -> u16 {
        let config = initiator(SessionType::Normal, isid, tsih, cid, params);
        let mut login = InitiatorLogin::new(config, [7; 32]);
        let mut step = login.start();
        for _ in 0..8 {
            match step {
                InitiatorStep::Send { request, data } => {
                    let (flow, out) = self.send(&Pdu::LoginRequest(request), &data);
                    assert_eq!(flow, Flow::Continue);
                    let (Pdu::LoginResponse(resp), text) = &out[0] else {
                        panic!("expected a login response, got {out:?}")
                    };
                    step = login.handle_response(resp, text).expect("login accepted");
                }
                InitiatorStep::Complete { negotiated, tsih } => {
                    self.declared_tag = negotiated.session.target_portal_group_tag;
                    let c = negotiated.connection;
                    self.limits = FrameLimits {
                        max_recv_data_segment_length: c.max_send_data_segment_length,
                        header_digest: c.header_digest,
                        data_digest: c.data_digest,
                        crc: Crc32cImpl::Hardware,
                    };
                    return tsih;
                }
            }
        }
        panic!("login did not complete");
    }
}

fn write10(lba: u32, blocks: u16) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x2a;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

fn read10(lba: u32, blocks: u16) -> [u8; 16] {
    let mut cdb = write10(lba, blocks);
    cdb[0] = 0x28;
    cdb
}

fn command(itt: u32, cmd_sn: u32, cdb: [u8; 16], edtl: u32, read: bool) -> ScsiCommand {
    ScsiCommand {
        final_bit: true,
        read,
        write: !read && edtl > 0,
        attr: 1,
        lun: Lun::from_number(0),
        initiator_task_tag: itt,
        expected_data_transfer_length: edtl,
        cmd_sn,
        cdb,
        ..Default::default()
    }
}

fn no_immediate_data() -> LocalParams {
    LocalParams {
        immediate_data: false,
        initial_r2t: true,
        max_burst_length: 8192,
        ..LocalParams::default()
    }
}

#[test]
fn solicited_write_then_read_back_through_the_state_machine() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(no_immediate_data(), [0x80, 0, 0, 0, 0, 1], 0, 1);
    let payload: Vec<u8> = (0..16384u32).map(|i| (i * 7) as u8).collect();
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(0x100, 10, write10(8, 32), 16384, false)),
        &[],
    );
    // MaxBurstLength 8192, MaxOutstandingR2T 1: one R2T for the first 8 KiB.
    let r2ts: Vec<_> = out
        .iter()
        .filter_map(|(p, _)| if let Pdu::R2t(r) = p { Some(*r) } else { None })
        .collect();
    assert_eq!(r2ts.len(), 1, "{out:?}");
    assert_eq!(
        (
            r2ts[0].buffer_offset,
            r2ts[0].desired_data_transfer_length,
            r2ts[0].r2t_sn
        ),
        (0, 8192, 0)
    );
    let mut r2t = r2ts[0];
    for burst in 0..2u32 {
        assert_eq!(r2t.buffer_offset, burst * 8192);
        let mut last = Vec::new();
        for (i, chunk) in payload[(burst * 8192) as usize..((burst + 1) * 8192) as usize]
            .chunks(8192)
            .enumerate()
        {
            let d = DataOut {
                final_bit: true,
                lun: Lun::from_number(0),
                initiator_task_tag: 0x100,
                target_transfer_tag: r2t.target_transfer_tag,
                data_sn: i as u32,
                buffer_offset: r2t.buffer_offset,
                ..Default::default()
            };
            last = w.send(&Pdu::DataOut(d), chunk).1;
        }
        if burst == 0 {
            let Some((Pdu::R2t(next), _)) = last.first() else {
                panic!("second R2T expected, got {last:?}")
            };
            r2t = *next;
            assert_eq!(r2t.r2t_sn, 1);
        } else {
            let Some((Pdu::ScsiResponse(resp), _)) = last.first() else {
                panic!("status expected, got {last:?}")
            };
            assert_eq!(resp.status, 0);
            assert!(!resp.overflow && !resp.underflow);
        }
    }
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(0x101, 11, read10(8, 32), 16384, true)),
        &[],
    );
    let mut data = Vec::new();
    for (p, d) in &out {
        let Pdu::DataIn(di) = p else {
            panic!("Data-In expected, got {p:?}")
        };
        assert_eq!(di.buffer_offset as usize, data.len());
        data.extend_from_slice(d);
    }
    let Some((Pdu::DataIn(last), _)) = out.last() else {
        unreachable!()
    };
    assert!(
        last.final_bit && last.status_present && last.status == 0,
        "status collapsed into the last Data-In"
    );
    assert_eq!(data, payload);
}

#[test]
fn commands_of_one_session_on_two_connections_run_in_cmd_sn_order() {
    let server = server();
    let isid = [0x80, 0, 0, 0, 0, 2];
    let params = LocalParams {
        max_connections: 2,
        ..LocalParams::default()
    };
    let mut a = Wire::new(&server);
    let tsih = a.login(params.clone(), isid, 0, 1);
    let mut b = Wire::new(&server);
    assert_eq!(
        b.login(params, isid, tsih, 2),
        tsih,
        "second connection joins the session"
    );
    assert_eq!(server.session_count(), 1);

    // CmdSN 11 (write 0xbb) reaches connection B before CmdSN 10 (write 0xaa)
    // reaches A. B must wait for 10 to be delivered: it does not take the
    // PDU, and nothing blocks.
    let eleven = Pdu::ScsiCommand(command(0x201, 11, write10(0, 1), 512, false));
    let pdus_in = b.conn.stats.pdus_in;
    let (flow, out_b) = b.send(&eleven, &[0xbb; 512]);
    assert_eq!(flow, Flow::Wait, "CmdSN 11 must wait for CmdSN 10");
    assert_eq!(
        b.conn.stats.pdus_in, pdus_in,
        "a PDU not taken is not counted"
    );
    assert!(out_b.is_empty(), "{out_b:?}");
    assert_eq!(
        b.conn.handle_tick(b.now),
        Flow::Continue,
        "waiting is not an error"
    );
    let out_a = a
        .send(
            &Pdu::ScsiCommand(command(0x200, 10, write10(0, 1), 512, false)),
            &[0xaa; 512],
        )
        .1;
    assert!(matches!(out_a[0].0, Pdu::ScsiResponse(r) if r.status == 0));
    assert_eq!(a.woken, [b.conn.serial()], "delivering 10 wakes B");
    assert_eq!(b.conn.handle_wake(), Flow::Continue);
    let (flow, out_b) = b.send(&eleven, &[0xbb; 512]);
    assert_eq!(flow, Flow::Continue);
    assert_eq!(b.conn.stats.pdus_in, pdus_in + 1, "taken, it counts once");
    let Pdu::ScsiResponse(resp) = out_b[0].0 else {
        panic!("{out_b:?}")
    };
    assert_eq!(resp.status, 0);
    assert_eq!(resp.exp_cmd_sn, 12, "both commands consumed");
    let out = a
        .send(
            &Pdu::ScsiCommand(command(0x202, 12, read10(0, 1), 512, true)),
            &[],
        )
        .1;
    // Delivery is in CmdSN order (asserted above: 11 waited for 10), but both
    // are SIMPLE tasks, which SAM-5 lets the device server run in any order
    // once delivered: either write may land last, never a mix of the two.
    let block = &out[0].1;
    assert!(
        *block == vec![0xbb; 512] || *block == vec![0xaa; 512],
        "a whole write lands last, not a mix: {block:?}"
    );
}

#[test]
fn a_third_connection_beyond_max_connections_is_refused() {
    let server = server();
    let isid = [0x80, 0, 0, 0, 0, 3];
    let params = LocalParams {
        max_connections: 1,
        ..LocalParams::default()
    };
    let mut a = Wire::new(&server);
    let tsih = a.login(params.clone(), isid, 0, 1);
    let mut b = Wire::new(&server);
    let config = initiator(SessionType::Normal, isid, tsih, 2, params);
    let mut login = InitiatorLogin::new(config, [1; 32]);
    let mut step = login.start();
    loop {
        let InitiatorStep::Send { request, data } = step else {
            panic!("must not complete")
        };
        let (flow, out) = b.send(&Pdu::LoginRequest(request), &data);
        let (Pdu::LoginResponse(resp), text) = &out[0] else {
            panic!()
        };
        if resp.status_class != 0 {
            assert_eq!(
                (resp.status_class, resp.status_detail),
                (2, pdu::login_status::TOO_MANY_CONNECTIONS)
            );
            assert_eq!(flow, Flow::Close);
            break;
        }
        step = login
            .handle_response(resp, text)
            .expect("still negotiating");
    }
}

#[test]
fn idle_connection_is_pinged_and_dropped_when_the_ping_goes_unanswered() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 4], 0, 1);
    let start = w.now;
    assert_eq!(
        w.conn.handle_tick(start + Duration::from_secs(1)),
        Flow::Continue
    );
    assert!(w.take_output().is_empty(), "no ping before the interval");
    assert_eq!(
        w.conn.handle_tick(start + Duration::from_secs(6)),
        Flow::Continue
    );
    let out = w.take_output();
    let Some((Pdu::NopIn(ping), _)) = out.first() else {
        panic!("ping expected, got {out:?}")
    };
    assert_eq!(ping.initiator_task_tag, RESERVED_TAG);
    assert_ne!(ping.target_transfer_tag, RESERVED_TAG);
    // Answered: the connection lives on.
    let answer = NopOut {
        immediate: true,
        initiator_task_tag: RESERVED_TAG,
        target_transfer_tag: ping.target_transfer_tag,
        cmd_sn: 10,
        ..Default::default()
    };
    w.now = start + Duration::from_secs(7);
    assert!(
        w.send(&Pdu::NopOut(answer), &[]).1.is_empty(),
        "a ping answer gets no response"
    );
    assert_eq!(
        w.conn.handle_tick(start + Duration::from_secs(13)),
        Flow::Continue
    );
    let out = w.take_output();
    assert!(
        matches!(out.first(), Some((Pdu::NopIn(_), _))),
        "pinged again after another idle interval"
    );
    // Unanswered for the timeout: dropped.
    assert_eq!(
        w.conn.handle_tick(start + Duration::from_secs(19)),
        Flow::Close
    );
}

#[test]
fn isid_reuse_reinstates_the_session_and_closes_the_old_one() {
    let server = server();
    let isid = [0x80, 0, 0, 0, 0, 5];
    let mut old = Wire::new(&server);
    let first = old.login(LocalParams::default(), isid, 0, 1);
    let mut new = Wire::new(&server);
    let second = new.login(LocalParams::default(), isid, 0, 1);
    assert_ne!(first, second, "a new TSIH for the reinstated session");
    assert_eq!(
        server.session_count(),
        1,
        "the old session is gone from the registry"
    );
    assert_eq!(
        old.conn.handle_tick(old.now),
        Flow::Close,
        "the old connection ends"
    );
    assert_eq!(new.conn.handle_tick(new.now), Flow::Continue);
    let out = new
        .send(
            &Pdu::ScsiCommand(command(0x300, 10, read10(0, 1), 512, true)),
            &[],
        )
        .1;
    assert!(matches!(out[0].0, Pdu::DataIn(d) if d.status_present && d.status == 0));
}

#[test]
fn send_targets_lists_only_the_targets_an_initiator_may_use() {
    let text = "portals = [\"0.0.0.0:3260\"]\n\
        [[target]]\nname = \"iqn.2026-11.io.isoe:open\"\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n[[target.lun]]\nnumber = 7\nmemory = \"1MiB\"\n\
        [[target]]\nname = \"iqn.2026-11.io.isoe:closed\"\nallowed_initiators = [\"iqn.2026-11.io.isoe:someone-else\"]\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n";
    let server = Arc::new(Server::new(Config::parse(text, None).unwrap()).unwrap());
    let mut w = Wire::new(&server);
    let config = initiator(
        SessionType::Discovery,
        [0x80, 0, 0, 0, 0, 6],
        0,
        1,
        LocalParams::default(),
    );
    let mut login = InitiatorLogin::new(config, [3; 32]);
    let mut step = login.start();
    while let InitiatorStep::Send { request, data } = step {
        let (_, out) = w.send(&Pdu::LoginRequest(request), &data);
        let (Pdu::LoginResponse(resp), text) = &out[0] else {
            panic!()
        };
        step = login.handle_response(resp, text).expect("discovery login");
    }
    let request = isoe_wire::pdu::TextRequest {
        immediate: true,
        final_bit: true,
        initiator_task_tag: 2,
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: 10,
        ..Default::default()
    };
    let out = w.send(&Pdu::TextRequest(request), b"SendTargets=All\0").1;
    let (Pdu::TextResponse(resp), text) = &out[0] else {
        panic!("{out:?}")
    };
    assert!(resp.final_bit);
    let text = String::from_utf8(text.clone()).unwrap();
    assert_eq!(
        text, "TargetName=iqn.2026-11.io.isoe:open\0TargetAddress=127.0.0.1:3260,1\0",
        "the wildcard portal is reported as the address reached, the ACL hides the closed target"
    );
    // SCSI commands have no place in a discovery session.
    let out = w
        .send(
            &Pdu::ScsiCommand(command(3, 10, read10(0, 1), 512, true)),
            &[],
        )
        .1;
    assert!(
        matches!(out[0].0, Pdu::Reject(r) if r.reason == isoe_wire::pdu::reject::RejectReason::ProtocolError)
    );
}

/// Reads `blocks` at `lba` and returns the data of its Data-In PDUs, checking
/// that the status came with the last one.
fn read_back(w: &mut Wire, itt: u32, cmd_sn: u32, lba: u32, blocks: u16) -> Vec<u8> {
    let len = u32::from(blocks) * 512;
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(itt, cmd_sn, read10(lba, blocks), len, true)),
        &[],
    );
    let mut data = Vec::new();
    for (p, d) in &out {
        let Pdu::DataIn(di) = p else {
            panic!("Data-In expected, got {p:?}")
        };
        assert_eq!(di.buffer_offset as usize, data.len());
        data.extend_from_slice(d);
    }
    assert!(
        matches!(out.last(), Some((Pdu::DataIn(d), _)) if d.status_present && d.status == 0),
        "GOOD in the last Data-In: {out:?}"
    );
    data
}

/// Each `[datapath]` option off, alone and all together: with header and
/// data digests on both ways, writes (immediate data, and R2T-solicited
/// Data-Out) and reads round trip, digests computed by the target check
/// out with the crc32c crate, and a damaged data digest is still caught.
#[test]
fn every_datapath_option_off_serves_reads_and_writes_with_digests() {
    for datapath in [
        "batching = false",
        "crc = \"software\"",
        "buffer_pool = false",
        "batching = false\ncrc = \"software\"\nbuffer_pool = false",
    ] {
        let server = server_with(&format!("[datapath]\n{datapath}\n"));
        let mut w = Wire::new(&server);
        let params = LocalParams {
            header_digest: vec![Digest::Crc32c],
            data_digest: vec![Digest::Crc32c],
            max_recv_data_segment_length: 4096,
            first_burst_length: 8192,
            max_burst_length: 8192,
            ..LocalParams::default()
        };
        w.login(params, [0x80, 0, 0, 0, 0, 9], 0, 1);
        assert!(
            w.limits.header_digest && w.limits.data_digest,
            "{datapath}: digests negotiated"
        );

        // 4 KiB of immediate data.
        let small: Vec<u8> = (0..4096u32).map(|i| (i * 11 + 3) as u8).collect();
        let (_, out) = w.send(
            &Pdu::ScsiCommand(command(0x300, 10, write10(0, 8), 4096, false)),
            &small,
        );
        assert!(
            matches!(out[..], [(Pdu::ScsiResponse(r), _)] if r.status == 0),
            "{datapath}: {out:?}"
        );

        // 16 KiB: 4 KiB immediate, then R2Ts for the rest in 4 KiB Data-Outs.
        let big: Vec<u8> = (0..16384u32).map(|i| (i * 7 + 1) as u8).collect();
        let (_, mut out) = w.send(
            &Pdu::ScsiCommand(command(0x301, 11, write10(64, 32), 16384, false)),
            &big[..4096],
        );
        let mut data_sn = 0;
        while let Some((Pdu::R2t(r2t), _)) = out.first().cloned() {
            let start = r2t.buffer_offset as usize;
            let end = start + r2t.desired_data_transfer_length as usize;
            for (i, at) in (start..end).step_by(4096).enumerate() {
                let last = at + 4096 >= end;
                let d = DataOut {
                    final_bit: last,
                    lun: Lun::from_number(0),
                    initiator_task_tag: 0x301,
                    target_transfer_tag: r2t.target_transfer_tag,
                    data_sn: i as u32,
                    buffer_offset: at as u32,
                    ..Default::default()
                };
                out = w.send(&Pdu::DataOut(d), &big[at..(at + 4096).min(end)]).1;
                data_sn += 1;
            }
        }
        assert!(data_sn >= 3, "{datapath}: R2T-solicited Data-Out sent");
        assert!(
            matches!(out[..], [(Pdu::ScsiResponse(r), _)] if r.status == 0),
            "{datapath}: {out:?}"
        );

        // Read both back: 4 KiB Data-In segments, digested by the target.
        assert_eq!(read_back(&mut w, 0x302, 12, 0, 8), small, "{datapath}");
        assert_eq!(read_back(&mut w, 0x303, 13, 64, 32), big, "{datapath}");

        // The options took effect where the connection shows them.
        let software = datapath.contains("software");
        let expected_crc = if software {
            Crc32cImpl::Software
        } else {
            Crc32cImpl::Hardware
        };
        assert_eq!(w.conn.recv_limits().crc, expected_crc, "{datapath}");
        let pooled = !datapath.contains("buffer_pool = false");
        assert_eq!(
            w.conn.idle_buffers() > 0,
            pooled,
            "{datapath}: buffers kept for reuse"
        );

        // A damaged data digest is refused with a Reject (RFC 7143 §7.8).
        let mut bytes = Vec::new();
        let ping = Pdu::NopOut(NopOut {
            initiator_task_tag: 0x304,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: 14,
            ..Default::default()
        });
        encode(&mut bytes, &ping, &[], b"ping", &w.limits);
        let n = bytes.len();
        bytes[n - 1] ^= 0x01;
        let error = match decode(&bytes, &w.conn.recv_limits()) {
            Err(e @ FrameError::DataDigest { .. }) => e,
            other => panic!("{datapath}: the target's decoder must see the damage: {other:?}"),
        };
        let (flow, _) = w.conn.handle_frame_error(&error);
        assert_eq!(flow, Flow::Continue);
        let out = w.take_output();
        assert!(
            matches!(out[..], [(Pdu::Reject(r), _)] if r.reason == pdu::reject::RejectReason::DataDigestError),
            "{datapath}: {out:?}"
        );
        // And the undamaged ping is echoed.
        let (_, out) = w.send(&ping, b"ping");
        assert!(
            matches!(&out[..], [(Pdu::NopIn(_), d)] if d == b"ping"),
            "{datapath}: {out:?}"
        );
    }
}

/// SANITIZE OVERWRITE (one pass of 0x5a) without IMMED, parameter list as
/// immediate data.
fn sanitize_overwrite(itt: u32, cmd_sn: u32) -> (Pdu, [u8; 5]) {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x48;
    cdb[1] = 0x01;
    cdb[8] = 5;
    let list = [0x01, 0x00, 0x00, 0x01, 0x5a];
    (
        Pdu::ScsiCommand(command(itt, cmd_sn, cdb, list.len() as u32, false)),
        list,
    )
}

/// A SCSI Response as the tests compare it: ITT, status, and sense key,
/// ASC and ASCQ if sense came.
type Answer = (u32, u8, Option<(u8, u8, u8)>);

/// The SCSI Responses among `out`.
fn responses(out: &[(Pdu, Vec<u8>)]) -> Vec<Answer> {
    out.iter()
        .filter_map(|(p, data)| match p {
            Pdu::ScsiResponse(r) => {
                let sense = (data.len() >= 2 + 14)
                    .then(|| (data[2 + 2] & 0x0f, data[2 + 12], data[2 + 13]));
                Some((r.initiator_task_tag, r.status, sense))
            }
            _ => None,
        })
        .collect()
}

/// Polls the connection for finished background commands until `itt`'s
/// response comes (or `give_up` passes); returns what came.
fn wait_for(w: &mut Wire, itt: u32) -> Vec<Answer> {
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while Instant::now() < give_up {
        w.complete_finished_work();
        seen.extend(responses(&w.take_output()));
        if seen.iter().any(|r| r.0 == itt) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no response for ITT {itt} in 60 s: {seen:?}");
}

fn test_unit_ready(itt: u32, cmd_sn: u32) -> Pdu {
    Pdu::ScsiCommand(command(itt, cmd_sn, [0; 16], 0, false))
}

/// A SANITIZE without IMMED runs off the connection's thread: commands sent
/// after it are answered first (TEST UNIT READY with SANITIZE IN PROGRESS),
/// its GOOD comes when the overwrite ends. An ABORT TASK ends the command
/// without a response while the sanitize itself runs on, as SBC-4 asks.
#[test]
fn a_sanitize_without_immed_answers_later_while_other_commands_go_on() {
    // 16 MiB at 32 MiB/s: half a second of overwriting at least.
    let server = server_with("sanitize_bytes_per_s = \"32MiB\"\n");
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 0x51], 0, 1);
    assert!(read_back(&mut w, 1, 10, 0, 1).iter().all(|&b| b == 0));

    let (sanitize, list) = sanitize_overwrite(2, 11);
    let (_, out) = w.send(&sanitize, &list);
    assert!(responses(&out).is_empty(), "no response yet: {out:?}");
    assert!(w.conn.has_background());
    let (_, out) = w.send(&test_unit_ready(3, 12), &[]);
    assert_eq!(
        responses(&out),
        [(3, 0x02, Some((0x02, 0x04, 0x1b)))],
        "TEST UNIT READY answered while the sanitize runs: NOT READY, SANITIZE IN PROGRESS"
    );
    let seen = wait_for(&mut w, 2);
    assert_eq!(seen, [(2, 0x00, None)], "the sanitize ends GOOD");
    assert!(!w.conn.has_background());
    let (_, out) = w.send(&test_unit_ready(4, 13), &[]);
    assert_eq!(responses(&out), [(4, 0x00, None)]);
    let block = read_back(&mut w, 5, 14, 0, 1);
    assert!(block.iter().all(|&b| b == 0x5a), "overwritten");

    // Aborted: FUNCTION COMPLETE, never a response, the overwrite goes on.
    let (sanitize, list) = sanitize_overwrite(6, 15);
    w.send(&sanitize, &list);
    let abort = Pdu::TaskMgmtRequest(pdu::TaskMgmtRequest {
        function: pdu::tmf::TmfFunction::AbortTask,
        lun: Lun::from_number(0),
        initiator_task_tag: 7,
        referenced_task_tag: 6,
        cmd_sn: 16,
        ref_cmd_sn: 15,
        ..Default::default()
    });
    let (_, out) = w.send(&abort, &[]);
    assert!(
        matches!(&out[..], [(Pdu::TaskMgmtResponse(r), _)] if r.response == pdu::tmf::TmfResponse::Complete),
        "{out:?}"
    );
    assert!(!w.conn.has_background());
    let (_, out) = w.send(&test_unit_ready(8, 17), &[]);
    assert_eq!(responses(&out), [(8, 0x02, Some((0x02, 0x04, 0x1b)))]);
    let mut cmd_sn = 18;
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out) = w.send(&test_unit_ready(100 + cmd_sn, cmd_sn), &[]);
        cmd_sn += 1;
        let got = responses(&out);
        assert!(
            got.iter().all(|r| r.0 != 6),
            "an aborted task is never answered"
        );
        if got == [(100 + cmd_sn - 1, 0x00, None)] {
            break;
        }
        assert!(Instant::now() < give_up, "the aborted sanitize never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The aborted sanitize's completion comes back and is dropped.
    std::thread::sleep(Duration::from_millis(100));
    w.complete_finished_work();
    assert!(responses(&w.take_output()).is_empty());
}

/// RESERVE (6) (SPC-2 7.21): the whole logical unit for this I_T nexus.
fn reserve6(itt: u32, cmd_sn: u32) -> Pdu {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x16;
    Pdu::ScsiCommand(command(itt, cmd_sn, cdb, 0, false))
}

/// SCSI status of the response to `itt` among `out`.
fn status_of(out: &[(Pdu, Vec<u8>)], itt: u32) -> Option<u8> {
    out.iter().find_map(|(p, _)| match p {
        Pdu::ScsiResponse(r) if r.initiator_task_tag == itt => Some(r.status),
        Pdu::DataIn(d) if d.initiator_task_tag == itt && d.status_present => Some(d.status),
        _ => None,
    })
}

/// RFC 7143 11.15: a Logout Response says the session is cleaned up. An
/// initiator that logs out a session holding a reservation and goes on at
/// once through another (libiscsi's Sanitize.Reservations then
/// Sanitize.Reset) must not meet the old reservation, whenever the target
/// gets round to closing the old connection.
#[test]
fn a_reservation_ends_with_the_logout_response_of_its_session() {
    let server = server();
    let mut holder = Wire::new(&server);
    holder.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 7], 0, 1);
    let out = holder.send(&reserve6(0x10, 10), &[]).1;
    assert_eq!(status_of(&out, 0x10), Some(0), "RESERVE (6) granted");

    let mut other = Wire::new(&server);
    other.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 8], 0, 1);
    let out = other
        .send(
            &Pdu::ScsiCommand(command(0x20, 10, read10(0, 1), 512, true)),
            &[],
        )
        .1;
    assert_eq!(
        status_of(&out, 0x20),
        Some(0x18),
        "RESERVATION CONFLICT while held"
    );

    let logout = Pdu::LogoutRequest(pdu::LogoutRequest {
        immediate: true,
        reason_code: pdu::logout::LogoutReason::CloseSession,
        initiator_task_tag: 0x11,
        cid: 1,
        cmd_sn: 11,
        exp_stat_sn: 0,
    });
    let (flow, out) = holder.send(&logout, &[]);
    assert_eq!(flow, Flow::Close);
    assert!(
        matches!(out[0].0, Pdu::LogoutResponse(r) if r.response == pdu::logout::LogoutResponseCode::Closed)
    );
    // The holder's connection is not yet detached (its driver has not run).
    let out = other
        .send(
            &Pdu::ScsiCommand(command(0x21, 11, read10(0, 1), 512, true)),
            &[],
        )
        .1;
    assert_eq!(
        status_of(&out, 0x21),
        Some(0),
        "the reservation ended with the logout"
    );
}

/// Write data is solicited only for a command that will use it: a TEST
/// UNIT READY with the write bit and 64 MiB announced, or a WRITE to a LUN
/// the target lacks, is answered at once with no R2T and holds no buffer.
#[test]
fn no_data_is_solicited_for_a_command_that_wants_none_or_will_fail() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(no_immediate_data(), [0x80, 0, 0, 0, 0, 0x61], 0, 1);
    let mut tur = command(0x30, 10, [0; 16], 64 << 20, false);
    tur.write = true;
    let out = w.send(&Pdu::ScsiCommand(tur), &[]).1;
    assert!(
        matches!(&out[..], [(Pdu::ScsiResponse(r), _)] if r.status == 0 && r.underflow && r.residual_count == 64 << 20),
        "GOOD at once, all 64 MiB unused: {out:?}"
    );
    let mut elsewhere = command(0x31, 11, write10(0, 8), 4096, false);
    elsewhere.lun = Lun::from_number(7);
    let out = w.send(&Pdu::ScsiCommand(elsewhere), &[]).1;
    assert!(
        matches!(&out[..], [(Pdu::ScsiResponse(r), _)] if r.status == 0x02),
        "CHECK CONDITION at once, no R2T: {out:?}"
    );
    assert_eq!(server.write_budget.held(), 0, "nothing charged");
    // A write that will run gets its R2T and is charged for it.
    let out = w
        .send(
            &Pdu::ScsiCommand(command(0x32, 12, write10(0, 8), 4096, false)),
            &[],
        )
        .1;
    assert!(matches!(&out[..], [(Pdu::R2t(_), _)]), "{out:?}");
    assert_eq!(server.write_budget.held(), 4096);
}

/// ERL 0: a peer that is asked for write data and never sends it fails
/// its connection once the wait passes, and the budget comes back.
#[test]
fn solicited_data_that_never_comes_ends_the_connection() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(no_immediate_data(), [0x80, 0, 0, 0, 0, 0x62], 0, 1);
    let out = w
        .send(
            &Pdu::ScsiCommand(command(0x40, 10, write10(0, 8), 4096, false)),
            &[],
        )
        .1;
    assert!(matches!(&out[..], [(Pdu::R2t(_), _)]), "{out:?}");
    let later = w.now + isoe_target::connection::DATA_OUT_WAIT - Duration::from_secs(1);
    assert_eq!(w.conn.handle_tick(later), Flow::Continue);
    let late = w.now + isoe_target::connection::DATA_OUT_WAIT;
    assert_eq!(w.conn.handle_tick(late), Flow::Close);
    w.conn.detach(late);
    assert_eq!(server.write_budget.held(), 0, "the budget is given back");
}

/// Sends the first Login Request of a login that offers no CHAP to a
/// target that requires it; returns the flow and what came back at once.
fn unauthenticated_login(w: &mut Wire, isid: [u8; 6]) -> (Flow, Vec<(Pdu, Vec<u8>)>) {
    let config = initiator(SessionType::Normal, isid, 0, 1, LocalParams::default());
    let mut login = InitiatorLogin::new(config, [7; 32]);
    let InitiatorStep::Send { request, data } = login.start() else {
        panic!("a login starts with a request")
    };
    w.send(&Pdu::LoginRequest(request), &data)
}

/// The status class and detail of the Login Response among `out`.
fn login_status_of(out: &[(Pdu, Vec<u8>)]) -> Option<(u8, u8)> {
    out.iter().find_map(|(p, _)| match p {
        Pdu::LoginResponse(r) => Some((r.status_class, r.status_detail)),
        _ => None,
    })
}

/// Guessing CHAP secrets goes at a crawl: after three failed
/// authentications from one address, the answer to each further one waits
/// (1 s, doubling), the connection reading nothing meanwhile.
#[test]
fn repeated_authentication_failures_from_one_address_are_answered_later() {
    let server = server_with("[target.chap]\nuser = \"alice\"\nsecret = \"alice-secret-12\"\n");
    for attempt in 0..3u8 {
        let mut w = Wire::new(&server);
        let (flow, out) = unauthenticated_login(&mut w, [0x80, 0, 0, 0, 1, attempt]);
        assert_eq!(flow, Flow::Close, "attempt {attempt}");
        assert_eq!(
            login_status_of(&out),
            Some((2, 1)),
            "authentication failure at once"
        );
    }
    let mut w = Wire::new(&server);
    let (flow, out) = unauthenticated_login(&mut w, [0x80, 0, 0, 0, 1, 9]);
    assert_eq!(flow, Flow::Wait, "the fourth answer is held back");
    assert!(out.is_empty(), "{out:?}");
    let half = w.now + Duration::from_millis(500);
    assert_eq!(w.conn.handle_tick(half), Flow::Wait);
    assert!(w.take_output().is_empty());
    let due = w.now + Duration::from_secs(1);
    assert_eq!(w.conn.handle_tick(due), Flow::Close);
    assert_eq!(
        login_status_of(&w.take_output_with(FrameLimits::LOGIN)),
        Some((2, 1))
    );
}

/// Data a write may send unasked (InitialR2T=No, up to FirstBurstLength)
/// cannot be refused once the command is taken, so a command whose unasked
/// data would not fit the write budget is answered TASK SET FULL at once,
/// and the data that still comes is dropped, never buffered.
#[test]
fn a_write_whose_unsolicited_data_would_overrun_the_budget_is_answered_task_set_full() {
    let server = server_with("[limits]\nwrite_buffer = \"1MiB\"\n");
    let mut w = Wire::new(&server);
    let params = LocalParams {
        immediate_data: false,
        initial_r2t: false,
        first_burst_length: 256 << 10,
        max_burst_length: 256 << 10,
        ..LocalParams::default()
    };
    w.login(params, [0x80, 0, 0, 0, 0, 0x71], 0, 1);
    // One address holds half the budget, 512 KiB: the first write's
    // unsolicited burst and its one R2T.
    let out = w
        .send(
            &Pdu::ScsiCommand(command(0x50, 10, write10(0, 1024), 512 << 10, false)),
            &[],
        )
        .1;
    assert!(
        matches!(&out[..], [(Pdu::R2t(r), _)] if r.buffer_offset == 256 << 10),
        "taken: the rest solicited after the unsolicited burst: {out:?}"
    );
    assert_eq!(server.write_budget.held(), 512 << 10);
    let out = w
        .send(
            &Pdu::ScsiCommand(command(0x52, 11, write10(0, 1024), 512 << 10, false)),
            &[],
        )
        .1;
    assert_eq!(status_of(&out, 0x52), Some(0x28), "TASK SET FULL: {out:?}");
    assert_eq!(
        server.write_budget.held(),
        512 << 10,
        "nothing more charged"
    );
    // Its unsolicited Data-Out is dropped without a Reject.
    let data = Pdu::DataOut(DataOut {
        final_bit: true,
        lun: Lun::from_number(0),
        initiator_task_tag: 0x52,
        target_transfer_tag: RESERVED_TAG,
        data_sn: 0,
        buffer_offset: 0,
        ..Default::default()
    });
    let out = w.send(&data, &[0u8; 4096]).1;
    assert!(out.is_empty(), "dropped quietly: {out:?}");
}

/// A target with two portal groups: 1 (active/optimized, preferred) and
/// 2 (standby).
fn two_group_server() -> Arc<Server> {
    let text = format!(
        "[[portal_group]]\ntag = 1\nportals = [\"127.0.0.1:3260\"]\npreferred = true\n\
         [[portal_group]]\ntag = 2\nportals = [\"127.0.0.2:3261\"]\nalua_state = \"standby\"\n\
         [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nnumber = 0\nmemory = \"1MiB\"\n"
    );
    Arc::new(Server::new(Config::parse(&text, None).expect("config")).expect("server"))
}

fn report_target_port_groups(itt: u32, cmd_sn: u32, format: u8) -> Pdu {
    let mut cdb = [0u8; 16];
    cdb[0] = 0xa3;
    cdb[1] = format << 5 | 0x0a;
    cdb[6..10].copy_from_slice(&256u32.to_be_bytes());
    Pdu::ScsiCommand(command(itt, cmd_sn, cdb, 256, true))
}

/// The Data-In bytes and status of the response to one read-like command.
fn data_and_status(out: &[(Pdu, Vec<u8>)]) -> (Vec<u8>, Option<u8>) {
    let mut data = Vec::new();
    let mut status = None;
    for (p, d) in out {
        match p {
            Pdu::DataIn(di) => {
                data.extend_from_slice(d);
                if di.status_present {
                    status = Some(di.status);
                }
            }
            Pdu::ScsiResponse(r) => status = Some(r.status),
            _ => {}
        }
    }
    (data, status)
}

/// A login through a portal of group 2 is told TargetPortalGroupTag=2, and
/// its session is the I_T nexus through relative target port 2: the state
/// of group 2 (standby) applies to its commands, REPORT TARGET PORT GROUPS
/// lists both groups, and the same ISID through group 1 is another session.
#[test]
fn a_login_through_portal_group_2_is_a_session_through_target_port_2() {
    let server = two_group_server();
    let isid = [0x80, 0, 0, 0, 0, 0x70];
    let mut standby = Wire::in_group(&server, 2);
    standby.login(LocalParams::default(), isid, 0, 1);
    assert_eq!(standby.declared_tag, Some(2), "TargetPortalGroupTag");
    let mut active = Wire::in_group(&server, 1);
    active.login(LocalParams::default(), isid, 0, 1);
    assert_eq!(active.declared_tag, Some(1));
    let mut ports: Vec<u16> = server
        .sessions()
        .iter()
        .map(|s| s.nexus.relative_target_port)
        .collect();
    ports.sort();
    assert_eq!(ports, [1, 2], "same ISID, two portal groups: two sessions");
    assert_eq!(standby.conn.handle_tick(standby.now), Flow::Continue);

    let out = standby.send(&test_unit_ready(1, 10), &[]).1;
    assert_eq!(
        responses(&out),
        [(1, 2, Some((0x02, 0x04, 0x0b)))],
        "NOT READY, TARGET PORT IN STANDBY STATE"
    );
    let out = active.send(&test_unit_ready(1, 10), &[]).1;
    assert_eq!(responses(&out), [(1, 0, None)]);

    let out = standby.send(&report_target_port_groups(2, 11, 0), &[]).1;
    let (data, status) = data_and_status(&out);
    assert_eq!(status, Some(0));
    #[rustfmt::skip]
    let expected = [
        0, 0, 0, 24,
        0x80, 0x01, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
        0x02, 0x04, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2,
    ];
    assert_eq!(data, expected);
}

/// RFC 7143 §4.4.1: the connections of a session are all in one portal
/// group. A connection that asks to join a session through another group
/// finds no such session (0x020A) and ends; the session goes on.
#[test]
fn a_connection_through_another_portal_group_cannot_join_the_session() {
    let server = two_group_server();
    let isid = [0x80, 0, 0, 0, 0, 0x71];
    let params = LocalParams {
        max_connections: 2,
        ..LocalParams::default()
    };
    let mut first = Wire::in_group(&server, 1);
    let tsih = first.login(params.clone(), isid, 0, 1);
    let mut second = Wire::in_group(&server, 2);
    let config = initiator(SessionType::Normal, isid, tsih, 2, params.clone());
    let mut login = InitiatorLogin::new(config, [2; 32]);
    let mut step = login.start();
    loop {
        let InitiatorStep::Send { request, data } = step else {
            panic!("the join must not complete")
        };
        let (flow, out) = second.send(&Pdu::LoginRequest(request), &data);
        let (Pdu::LoginResponse(resp), text) = &out[0] else {
            panic!("{out:?}")
        };
        if resp.status_class != 0 {
            assert_eq!(
                (resp.status_class, resp.status_detail),
                (2, pdu::login_status::SESSION_DOES_NOT_EXIST)
            );
            assert_eq!(flow, Flow::Close);
            break;
        }
        step = login
            .handle_response(resp, text)
            .expect("still negotiating");
    }
    assert_eq!(server.session_count(), 1);
    assert_eq!(first.conn.handle_tick(first.now), Flow::Continue);
    // Through its own group the second connection joins.
    let mut third = Wire::in_group(&server, 1);
    assert_eq!(third.login(params, isid, tsih, 2), tsih);
}

#[test]
fn send_targets_gives_each_portal_the_tag_of_its_group() {
    let server = two_group_server();
    let mut w = Wire::in_group(&server, 2);
    let config = initiator(
        SessionType::Discovery,
        [0x80, 0, 0, 0, 0, 0x72],
        0,
        1,
        LocalParams::default(),
    );
    let mut login = InitiatorLogin::new(config, [3; 32]);
    let mut step = login.start();
    while let InitiatorStep::Send { request, data } = step {
        let (_, out) = w.send(&Pdu::LoginRequest(request), &data);
        let (Pdu::LoginResponse(resp), text) = &out[0] else {
            panic!()
        };
        step = login.handle_response(resp, text).expect("discovery login");
    }
    let request = isoe_wire::pdu::TextRequest {
        immediate: true,
        final_bit: true,
        initiator_task_tag: 2,
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: 10,
        ..Default::default()
    };
    let out = w.send(&Pdu::TextRequest(request), b"SendTargets=All\0").1;
    let (Pdu::TextResponse(_), text) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        String::from_utf8(text.clone()).unwrap(),
        format!(
            "TargetName={TARGET}\0TargetAddress=127.0.0.1:3260,1\0\
             TargetAddress=127.0.0.2:3261,2\0"
        )
    );
}

/// The read stages the target has sampled on its test LUN.
fn read_stages_sampled(server: &Server) -> u64 {
    let snapshot = isoe_target::metrics::snapshot::snapshot(server);
    snapshot.luns[TARGET][&0].read.stages.store.count
}

#[test]
fn a_slow_load_has_its_stages_sampled_and_a_fast_one_one_command_in_64() {
    let server = server();
    let mut w = Wire::new(&server);
    w.conn.set_stage_clock(Instant::now);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 9], 0, 1);
    let mut cmd_sn = 10;
    let mut read = |w: &mut Wire| {
        let (_, out) = w.send(
            &Pdu::ScsiCommand(command(0x200 + cmd_sn, cmd_sn, read10(0, 1), 512, true)),
            &[],
        );
        assert!(!out.is_empty(), "answered");
        w.conn.record_latencies(w.now);
        cmd_sn += 1;
    };
    // Eight reads 150 ms apart, slower than one sample each 100 ms: each
    // is sampled, though the count alone would sample none of them.
    for _ in 0..8 {
        w.now += Duration::from_millis(150);
        read(&mut w);
    }
    assert_eq!(read_stages_sampled(&server), 8);
    // 100 more at once: only the connection's 64th command.
    for _ in 0..100 {
        read(&mut w);
    }
    assert_eq!(read_stages_sampled(&server), 9);
}

/// A READ that asks for no data (R bit clear, Expected Data Transfer
/// Length 0) is answered without Data-In, and its status says what was
/// not sent: residual overflow of the 512 bytes the command reads (RFC
/// 7143 §11.4.5.1).
#[test]
fn a_read_with_no_data_expected_reports_the_bytes_it_did_not_send() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 11], 0, 1);
    let mut cmd = command(0x300, 10, read10(0, 1), 0, true);
    cmd.read = false;
    let (_, out) = w.send(&Pdu::ScsiCommand(cmd), &[]);
    let [(Pdu::ScsiResponse(r), _)] = &out[..] else {
        panic!("one SCSI Response, no Data-In: {out:?}")
    };
    assert_eq!(r.status, 0, "GOOD");
    assert!(r.overflow && !r.underflow, "residual overflow: {r:?}");
    assert_eq!(r.residual_count, 512);
}

/// A command that announces data (Expected Data Transfer Length 512)
/// without a direction (R and W bits clear) is a protocol error (RFC 7143
/// §11.3.1: the bits say which way the data flows): rejected, not run, so a
/// WRITE sent that way changes nothing on the medium.
#[test]
fn a_command_with_data_but_no_direction_is_rejected_and_writes_nothing() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 12], 0, 1);
    let pattern = vec![0x5au8; 512];
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(0x400, 10, write10(0, 1), 512, false)),
        &pattern,
    );
    assert!(
        matches!(&out[..], [(Pdu::ScsiResponse(r), _)] if r.status == 0),
        "{out:?}"
    );
    let mut cmd = command(0x401, 11, write10(0, 1), 512, false);
    cmd.write = false;
    let (_, out) = w.send(&Pdu::ScsiCommand(cmd), &[]);
    let [(Pdu::Reject(r), _)] = &out[..] else {
        panic!("a Reject: {out:?}")
    };
    assert_eq!(
        r.reason,
        isoe_wire::pdu::reject::RejectReason::ProtocolError
    );
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(0x402, 12, read10(0, 1), 512, true)),
        &[],
    );
    let [(Pdu::DataIn(_), data)] = &out[..] else {
        panic!("the block back: {out:?}")
    };
    assert_eq!(data, &pattern, "the medium is as it was");
}

/// A Task Management Function Request with a data segment (RFC 7143
/// §11.5: it has none) is rejected as a protocol error and its function is
/// not performed: the unit is not reset, so no unit attention follows.
#[test]
fn a_function_with_a_data_segment_is_rejected_and_not_performed() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 13], 0, 1);
    let reset = Pdu::TaskMgmtRequest(isoe_wire::pdu::TaskMgmtRequest {
        immediate: true,
        function: isoe_wire::pdu::tmf::TmfFunction::LogicalUnitReset,
        lun: Lun::from_number(0),
        initiator_task_tag: 0x500,
        referenced_task_tag: RESERVED_TAG,
        cmd_sn: 10,
        exp_stat_sn: 0,
        ref_cmd_sn: 0,
        exp_data_sn: 0,
    });
    let (_, out) = w.send(&reset, &[1, 2, 3, 4]);
    let [(Pdu::Reject(r), _)] = &out[..] else {
        panic!("a Reject: {out:?}")
    };
    assert_eq!(
        r.reason,
        isoe_wire::pdu::reject::RejectReason::ProtocolError
    );
    let (_, out) = w.send(
        &Pdu::ScsiCommand(command(0x501, 10, read10(0, 1), 512, true)),
        &[],
    );
    assert!(
        matches!(&out[..], [(Pdu::DataIn(d), _)] if d.status_present && d.status == 0),
        "GOOD, no unit attention of a reset: {out:?}"
    );
}

/// A Text Request continued past 64 KiB is rejected (RFC 7143 §11.17.1)
/// and the exchange ends, but the connection goes on.
#[test]
fn a_text_request_over_64_kib_is_rejected_and_the_connection_goes_on() {
    let server = server();
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 0, 14], 0, 1);
    let piece = |ttt: u32| {
        Pdu::TextRequest(isoe_wire::pdu::TextRequest {
            immediate: true,
            final_bit: false,
            continue_bit: true,
            initiator_task_tag: 0x600,
            target_transfer_tag: ttt,
            cmd_sn: 10,
            ..Default::default()
        })
    };
    let key = |i: usize| format!("X-isoe-{i:05}={}\0", "v".repeat(990)).into_bytes();
    let mut out = Vec::new();
    for i in 0..80 {
        out = w.send(&piece(RESERVED_TAG), &key(i)).1;
        if matches!(out.first(), Some((Pdu::Reject(_), _))) {
            break;
        }
    }
    let [(Pdu::Reject(r), _)] = &out[..] else {
        panic!("a Reject once past 64 KiB: {out:?}")
    };
    assert_eq!(
        r.reason,
        isoe_wire::pdu::reject::RejectReason::ProtocolError
    );
    let (flow, out) = w.send(
        &Pdu::ScsiCommand(command(0x601, 10, read10(0, 1), 512, true)),
        &[],
    );
    assert_eq!(flow, Flow::Continue);
    assert!(
        matches!(&out[..], [(Pdu::DataIn(_), _)]),
        "the session goes on: {out:?}"
    );
}

/// Reads whose store work is out count as the output they will be: a
/// burst of 1 MiB READs on a file LUN (its reads go to the I/O threads)
/// is taken only up to the connection's own output bound (8 MiB), and the
/// rest waits in the input until the work is back and sent.
#[test]
fn reads_whose_work_is_out_count_against_the_output_bound() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let path = dir.path().join("lun.img");
    // Written, then out of the page cache, so that the reads wait on the
    // device and go to threads.
    std::fs::write(&path, vec![0x5a; 64 << 20]).expect("write the LUN's file");
    let file = std::fs::File::open(&path).expect("open the LUN's file");
    file.sync_all().expect("sync");
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
    let server = server_with(&format!(
        "[[target.lun]]\nnumber = 1\nfile = \"{}\"\nsize = \"64MiB\"\nserial = \"sansio1\"\nnaa = \"0x6001405abcdef0123456789abcdef012\"\n",
        path.display()
    ));
    let mut w = Wire::new(&server);
    w.login(LocalParams::default(), [0x80, 0, 0, 0, 9, 1], 0, 1);
    const READS: u32 = 16;
    const BLOCKS: u16 = 2048; // 1 MiB, 4 MiB apart (past readahead)
    let mut burst = Vec::new();
    for i in 0..READS {
        let mut read = command(
            100 + i,
            10 + i,
            read10(4 * u32::from(BLOCKS) * i, BLOCKS),
            1 << 20,
            true,
        );
        read.lun = Lun::from_number(1);
        encode(&mut burst, &Pdu::ScsiCommand(read), &[], &[], &w.limits);
    }
    let input = w.conn.handle_input(&burst, w.now);
    w.take_actions();
    if w.runs == 0 {
        eprintln!(
            "skipped: the reads were served from the page cache (a file system that keeps it?)"
        );
        return;
    }
    assert_eq!(w.runs, 8, "each read taken went to a thread");
    let pdu_len = burst.len() / READS as usize;
    assert!(input.output_full, "input stopped at the bound");
    assert_eq!(
        input.consumed / pdu_len,
        8,
        "8 MiB of reads taken, the rest left in the input"
    );
    // Once the work is back and its Data-In sent, the rest is taken.
    let mut rest = &burst[input.consumed..];
    let mut answered = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while answered < READS as usize {
        assert!(Instant::now() < deadline, "{answered} reads answered");
        std::thread::sleep(Duration::from_millis(5));
        w.complete_finished_work();
        answered += w
            .take_output()
            .iter()
            .filter(|(p, _)| match p {
                Pdu::DataIn(d) => d.status_present,
                Pdu::ScsiResponse(_) => true,
                _ => false,
            })
            .count();
        if !rest.is_empty() {
            let input = w.conn.handle_input(rest, w.now);
            w.take_actions();
            rest = &rest[input.consumed..];
        }
    }
}

#[test]
fn reads_on_connections_of_one_address_wait_for_its_share_of_the_data_in_budget() {
    // 1 MiB of Data-In for the process: 512 KiB for one address.
    let server = server_with("[limits]\nresponse_buffer = \"1MiB\"\n");
    let mut first = Wire::new(&server);
    first.login(LocalParams::default(), [0x80, 0, 0, 0, 9, 2], 0, 1);
    let mut second = Wire::new(&server);
    second.login(LocalParams::default(), [0x80, 0, 0, 0, 9, 3], 0, 1);
    let read = |w: &Wire, itt: u32, blocks: u16| {
        let mut bytes = Vec::new();
        let cmd = command(itt, 10, read10(0, blocks), u32::from(blocks) * 512, true);
        encode(&mut bytes, &Pdu::ScsiCommand(cmd), &[], &[], &w.limits);
        bytes
    };
    // The first takes its share whole, and its peer reads nothing yet.
    let big = read(&first, 200, 1024);
    let input = first.conn.handle_input(&big, first.now);
    assert_eq!(input.consumed, big.len(), "the first read is taken");
    assert!(server.data_in_budget.held() >= 512 << 10);
    // The second's read waits in its input: no budget is left for the
    // address, though the second has nothing unsent.
    let small = read(&second, 300, 8);
    let input = second.conn.handle_input(&small, second.now);
    assert_eq!(input.consumed, 0, "the second read waits for budget");
    assert!(input.output_full && second.conn.output_full());
    assert!(second.take_output().is_empty());
    // The first's Data-In goes out: the budget comes back, and the second
    // read is taken and answered.
    let sent = first.take_output();
    assert!(sent
        .iter()
        .any(|(p, _)| matches!(p, Pdu::DataIn(d) if d.status_present)));
    assert_eq!(server.data_in_budget.held(), 0, "sent, given back");
    assert!(!second.conn.output_full(), "the second may go on");
    let input = second.conn.handle_input(&small, second.now);
    assert_eq!(input.consumed, small.len());
    let answer = second.take_output();
    let data: usize = answer
        .iter()
        .filter_map(|(p, d)| matches!(p, Pdu::DataIn(_)).then_some(d.len()))
        .sum();
    assert_eq!(data, 8 * 512, "the second read's data");
}
