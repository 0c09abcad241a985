//! Malformed and hostile input gets the RFC's answer (Reject, login failure
//! status or a dropped connection), never a crash, and never harms another
//! session: each case runs beside a healthy session that does a WRITE and a
//! READ before and after it.

mod support;

use isoe_wire::frame::{self, FrameLimits};
use isoe_wire::pdu::{self, reject, DataOut, Lun, NopOut, RejectReason, ScsiCommand, RESERVED_TAG};
use isoe_wire::{Pdu, BHS_LEN};
use std::time::Duration;
use support::client::{
    key, push_text, read16, Client, ClientError, LoginParams, Received, TEST_UNIT_READY,
};
use support::{first_difference, pattern, Target, DEFAULT_TARGET};

/// How long "no answer" is waited for.
const SILENCE: Duration = Duration::from_secs(1);
/// How long a target may take to drop a connection it must drop.
const DROP_TIMEOUT: Duration = Duration::from_secs(10);

/// A target with one healthy session beside the misbehaving connections.
struct Fixture {
    target: Target,
    healthy: Client,
    round: u64,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::on(Target::start())
    }

    /// As [`Fixture::new`], on a target the test started.
    fn on(target: Target) -> Fixture {
        let mut healthy = Client::login_normal(target.addr(), DEFAULT_TARGET);
        healthy.ready(0);
        let mut fixture = Fixture {
            target,
            healthy,
            round: 0,
        };
        fixture.check("before the case");
        fixture
    }

    /// A new session on its own connection, ready for I/O.
    fn session(&self, params: &LoginParams) -> Client {
        let mut client =
            Client::login(self.target.addr(), params).unwrap_or_else(|e| panic!("login: {e}"));
        client.ready(0);
        client
    }

    /// The target process is alive and the healthy session still writes and reads.
    fn check(&mut self, when: &str) {
        self.target.assert_running(when);
        self.round += 1;
        let lba = self.round * 64;
        let data = pattern(self.round as u32, 32 << 10);
        let w = self
            .healthy
            .command(0, &support::client::write16(lba, 64), &data, 0);
        let w = w.unwrap_or_else(|e| panic!("healthy session WRITE {when}: {e}"));
        w.assert_good(&format!("healthy session WRITE {when}"));
        let r = self
            .healthy
            .command(0, &read16(lba, 64), &[], data.len() as u32);
        let r = r.unwrap_or_else(|e| panic!("healthy session READ {when}: {e}"));
        r.assert_good(&format!("healthy session READ {when}"));
        if let Some(d) = first_difference(&data, &r.data) {
            panic!("healthy session read back other data {when}: {d}");
        }
        self.target.assert_running(when);
    }
}

/// A NOP-Out asking for an answer, as a raw BHS.
fn nop_out_bhs(client: &mut Client, data_len: u32) -> [u8; BHS_LEN] {
    let itt = client.next_itt();
    let pdu = Pdu::NopOut(NopOut {
        immediate: true,
        lun: Lun::default(),
        initiator_task_tag: itt,
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: client.cmd_sn,
        exp_stat_sn: client.exp_stat_sn,
    });
    let mut bhs = [0u8; BHS_LEN];
    pdu.emit(0, data_len, &mut bhs);
    bhs
}

/// Waits for the connection to close; Rejects with `allowed_reject` may come first.
fn expect_dropped(
    client: &mut Client,
    allowed_reject: Option<RejectReason>,
    case: &str,
) -> Vec<RejectReason> {
    let mut rejects = Vec::new();
    loop {
        match client.recv(DROP_TIMEOUT) {
            Ok(Received::Closed) | Err(ClientError::Io(_)) => return rejects,
            Ok(Received::Timeout) => {
                panic!("{case}: the target kept the connection open for {DROP_TIMEOUT:?}")
            }
            Ok(Received::Pdu {
                pdu: Pdu::Reject(r),
                ..
            }) if Some(r.reason) == allowed_reject => rejects.push(r.reason),
            Ok(Received::Pdu { pdu, .. }) => {
                panic!("{case}: expected the connection to be dropped, got {pdu:?}")
            }
            Err(e) => panic!("{case}: {e}"),
        }
    }
}

/// Reads the next PDU, which must be a Reject with `reason`; returns its data (the rejected BHS).
fn expect_reject(client: &mut Client, reason: RejectReason, case: &str) -> Vec<u8> {
    match client.recv(Duration::from_secs(10)) {
        Ok(Received::Pdu {
            pdu: Pdu::Reject(r),
            data,
            ..
        }) => {
            assert_eq!(r.reason, reason, "{case}: Reject reason");
            data
        }
        other => panic!("{case}: expected a Reject with reason {reason:?}, got {other:?}"),
    }
}

#[test]
fn truncated_header_then_close() {
    let mut f = Fixture::new();

    // During login: 20 bytes of a Login Request, then end of file.
    let mut raw = Client::connect(f.target.addr()).expect("connect");
    raw.send_raw(&[
        0x43, 0x87, 0, 0, 0, 0, 0, 0x40, 0x80, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
    ])
    .expect("send");
    raw.shutdown_write();
    assert!(
        matches!(raw.recv(DROP_TIMEOUT), Ok(Received::Closed) | Err(_)),
        "a truncated login header then EOF should end the connection"
    );
    f.check("after a truncated login header");

    // In full feature phase: half a SCSI Command BHS, then end of file.
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let itt = s.next_itt();
    let cmd = Pdu::ScsiCommand(ScsiCommand {
        final_bit: true,
        read: true,
        attr: 1,
        initiator_task_tag: itt,
        expected_data_transfer_length: 512,
        cmd_sn: s.cmd_sn,
        exp_stat_sn: s.exp_stat_sn,
        cdb: read16(0, 1),
        ..Default::default()
    });
    let mut bytes = Vec::new();
    frame::encode(&mut bytes, &cmd, &[], &[], &FrameLimits::LOGIN);
    s.send_raw(&bytes[..30]).expect("send half a header");
    s.shutdown_write();
    assert!(
        matches!(s.recv(DROP_TIMEOUT), Ok(Received::Closed) | Err(_)),
        "half a BHS then EOF should end the connection"
    );
    f.check("after a truncated SCSI Command header");

    // A whole header announcing 4 KiB of data, 10 bytes of it, then end of file.
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let bhs = nop_out_bhs(&mut s, 4096);
    s.send_raw(&bhs).expect("send header");
    s.send_raw(&[0xaa; 10]).expect("send part of the data");
    s.shutdown_write();
    assert!(
        matches!(s.recv(DROP_TIMEOUT), Ok(Received::Closed) | Err(_)),
        "a short data segment then EOF should end the connection"
    );
    f.check("after a truncated data segment");
}

#[test]
fn unknown_opcode_is_rejected_and_connection_survives() {
    let mut f = Fixture::new();
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let mut bhs = nop_out_bhs(&mut s, 0);
    // 0x1c: an initiator opcode RFC 7143 §11.1.1 does not define.
    bhs[0] = 0x1c;
    s.send_raw(&bhs).expect("send");
    let data = expect_reject(
        &mut s,
        reject::RejectReason::CommandNotSupported,
        "unknown opcode 0x1c",
    );
    assert_eq!(
        data,
        bhs.to_vec(),
        "RFC 7143 §11.17: a Reject carries the rejected PDU's header as data"
    );
    // The same connection still works.
    let r = s
        .command(0, &TEST_UNIT_READY, &[], 0)
        .expect("TEST UNIT READY after the Reject");
    r.assert_good("TEST UNIT READY on the connection that got the Reject");
    s.nop().expect("NOP-Out after the Reject");
    f.check("after an unknown opcode");
}

#[test]
fn data_segment_longer_than_negotiated_is_refused() {
    let mut f = Fixture::new();
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let limit = s.negotiated.max_send_data_segment_length;
    let bhs = nop_out_bhs(&mut s, limit + 4);
    s.send_raw(&bhs).expect("send header");
    // The data may or may not be taken before the target closes.
    let _ = s.send_raw(&vec![0x55; limit as usize + 4]);
    let rejects = expect_dropped(
        &mut s,
        Some(reject::RejectReason::ProtocolError),
        "DataSegmentLength above MaxRecvDataSegmentLength",
    );
    eprintln!(
        "oversized segment: {} Reject(s) with reason 0x04 before the close",
        rejects.len()
    );
    f.check("after an oversized data segment");
}

#[test]
fn wrong_header_digest_drops_the_connection() {
    let mut f = Fixture::new();
    let mut s = f.session(&LoginParams {
        header_digest: true,
        ..LoginParams::normal(DEFAULT_TARGET)
    });
    assert!(
        s.negotiated.header_digest,
        "HeaderDigest=CRC32C was not negotiated: {:?}",
        s.login_keys
    );
    // A well-formed read works with digests on.
    let r = s
        .command(0, &read16(0, 8), &[], 4096)
        .expect("READ with header digests");
    r.assert_good("READ with header digests");

    let itt = s.next_itt();
    let nop = Pdu::NopOut(NopOut {
        immediate: true,
        initiator_task_tag: itt,
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: s.cmd_sn,
        exp_stat_sn: s.exp_stat_sn,
        ..Default::default()
    });
    let mut bytes = Vec::new();
    frame::encode(&mut bytes, &nop, &[], &[], &s.send_limits);
    assert_eq!(bytes.len(), BHS_LEN + 4, "BHS and header digest");
    bytes[BHS_LEN] ^= 0x01;
    s.send_raw(&bytes).expect("send");
    // RFC 7143 §7.8: at ErrorRecoveryLevel 0 the connection must end.
    expect_dropped(&mut s, None, "wrong header digest");
    f.check("after a wrong header digest");
}

#[test]
fn cmd_sn_outside_the_window_is_ignored() {
    let mut f = Fixture::new();
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let in_window = s.cmd_sn;
    for (what, cmd_sn) in [
        ("beyond MaxCmdSN", s.max_cmd_sn.wrapping_add(1000)),
        ("below ExpCmdSN", s.exp_cmd_sn.wrapping_sub(1000)),
    ] {
        let itt = s.next_itt();
        let cmd = Pdu::ScsiCommand(ScsiCommand {
            final_bit: true,
            read: true,
            attr: 1,
            initiator_task_tag: itt,
            expected_data_transfer_length: 512,
            cmd_sn,
            exp_stat_sn: s.exp_stat_sn,
            cdb: read16(0, 1),
            ..Default::default()
        });
        s.send_pdu(&cmd, &[]).expect("send");
        // RFC 7143 §3.2.2.1: a command outside the window is silently ignored.
        match s.recv(SILENCE).expect("recv") {
            Received::Timeout => {}
            other => panic!(
                "CmdSN {cmd_sn} ({what}, window {}..={}): expected silence, got {other:?}",
                s.exp_cmd_sn, s.max_cmd_sn
            ),
        }
    }
    assert_eq!(
        s.cmd_sn, in_window,
        "the ignored commands consumed no CmdSN"
    );
    let r = s
        .command(0, &read16(0, 1), &[], 512)
        .expect("in-window READ after the ignored ones");
    r.assert_good("in-window READ after the ignored commands");
    assert_eq!(r.data.len(), 512);
    f.check("after commands outside the CmdSN window");
}

#[test]
fn data_out_for_an_unknown_task_is_rejected() {
    let mut f = Fixture::new();
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let data_out = Pdu::DataOut(DataOut {
        final_bit: true,
        lun: Lun::default(),
        initiator_task_tag: 0x00de_ad00,
        target_transfer_tag: 0x0000_1234,
        exp_stat_sn: s.exp_stat_sn,
        data_sn: 0,
        buffer_offset: 0,
    });
    let mut bytes = Vec::new();
    frame::encode(&mut bytes, &data_out, &[], &[0x77; 512], &s.send_limits);
    s.send_raw(&bytes).expect("send");
    let data = expect_reject(
        &mut s,
        reject::RejectReason::InvalidPduField,
        "Data-Out for an unknown task",
    );
    assert_eq!(
        &data[..],
        &bytes[..BHS_LEN],
        "the Reject carries the Data-Out's header"
    );
    let r = s
        .command(0, &TEST_UNIT_READY, &[], 0)
        .expect("TEST UNIT READY after the Reject");
    r.assert_good("TEST UNIT READY after the Reject");
    f.check("after a Data-Out for an unknown task");
}

/// Security-stage keys of a normal login to the default target.
fn security_keys() -> Vec<u8> {
    let mut text = Vec::new();
    push_text(&mut text, "InitiatorName", support::client::INITIATOR_NAME);
    push_text(&mut text, "SessionType", "Normal");
    push_text(&mut text, "TargetName", DEFAULT_TARGET);
    push_text(&mut text, "AuthMethod", "None");
    text
}

/// One Login Request with `text` on a new connection; asserts status class 2
/// (or, where `reject_key` allows, that key answered `Reject`).
fn expect_login_refused(f: &Fixture, csg: u8, text: &[u8], reject_key: Option<&str>, case: &str) {
    let mut c = Client::connect(f.target.addr()).expect("connect");
    if csg == pdu::stage::OPERATIONAL {
        let (r, keys) = c
            .login_step(
                pdu::stage::SECURITY,
                pdu::stage::OPERATIONAL,
                true,
                &security_keys(),
            )
            .expect("security stage");
        assert_eq!(
            r.status_class, 0,
            "{case}: the security stage itself failed: {keys:?}"
        );
    }
    let nsg = if csg == pdu::stage::SECURITY {
        pdu::stage::OPERATIONAL
    } else {
        pdu::stage::FULL_FEATURE
    };
    match c.login_step(csg, nsg, true, text) {
        Ok((r, keys)) => {
            let rejected = reject_key.is_some_and(|k| key(&keys, k) == Some("Reject"));
            assert!(
                r.status_class == pdu::login_status::INITIATOR_ERROR || rejected,
                "{case}: expected login status class 2 (initiator error), got class {} detail {:#04x}, keys {keys:?}",
                r.status_class,
                r.status_detail
            );
            eprintln!(
                "{case}: class {} detail {:#04x} keys {keys:?}",
                r.status_class, r.status_detail
            );
        }
        Err(e) => panic!("{case}: expected a Login Response with status class 2, got {e}"),
    }
}

#[test]
fn login_with_garbage_keys() {
    let mut f = Fixture::new();

    // RFC 7143 §6.2: a key the target does not understand is answered NotUnderstood,
    // and the login proceeds.
    let params = LoginParams {
        extra_keys: vec![
            ("Foo".into(), "Bar".into()),
            ("X-org.example.Thing".into(), "1".into()),
        ],
        ..LoginParams::normal(DEFAULT_TARGET)
    };
    let mut s = Client::login(f.target.addr(), &params)
        .unwrap_or_else(|e| panic!("login with unknown keys: {e}"));
    assert_eq!(
        key(&s.login_keys, "Foo"),
        Some("NotUnderstood"),
        "answers: {:?}",
        s.login_keys
    );
    s.ready(0);
    s.read(0, 0, 8);
    f.check("after a login with unknown keys");

    // A text segment that is not key=value pairs.
    let mut text = security_keys();
    text.extend_from_slice(b"this is not a key value pair\0");
    expect_login_refused(&f, pdu::stage::SECURITY, &text, None, "a pair without '='");
    f.check("after a malformed login text");

    let mut text = security_keys();
    text.extend_from_slice(&[0xff, 0xfe, b'=', 0x80, 0]);
    expect_login_refused(
        &f,
        pdu::stage::SECURITY,
        &text,
        None,
        "a key that is not UTF-8",
    );
    f.check("after a non-UTF-8 login key");

    // Invalid values.
    let mut text = Vec::new();
    push_text(&mut text, "InitiatorName", support::client::INITIATOR_NAME);
    push_text(&mut text, "SessionType", "Bogus");
    push_text(&mut text, "TargetName", DEFAULT_TARGET);
    expect_login_refused(
        &f,
        pdu::stage::SECURITY,
        &text,
        Some("SessionType"),
        "SessionType=Bogus",
    );
    f.check("after SessionType=Bogus");

    let mut text = Vec::new();
    push_text(&mut text, "MaxRecvDataSegmentLength", "lots");
    expect_login_refused(
        &f,
        pdu::stage::OPERATIONAL,
        &text,
        Some("MaxRecvDataSegmentLength"),
        "MaxRecvDataSegmentLength=lots",
    );
    f.check("after MaxRecvDataSegmentLength=lots");

    let mut text = Vec::new();
    push_text(&mut text, "MaxBurstLength", "1");
    expect_login_refused(
        &f,
        pdu::stage::OPERATIONAL,
        &text,
        Some("MaxBurstLength"),
        "MaxBurstLength=1 (below 512)",
    );
    f.check("after MaxBurstLength=1");

    // A missing InitiatorName: RFC 7143 §13.5, the first Login Request must carry it.
    let mut text = Vec::new();
    push_text(&mut text, "SessionType", "Normal");
    push_text(&mut text, "TargetName", DEFAULT_TARGET);
    expect_login_refused(&f, pdu::stage::SECURITY, &text, None, "no InitiatorName");
    f.check("after a login without InitiatorName");

    // A target that does not exist: class 2, detail 0x03 "not found".
    let mut c = Client::connect(f.target.addr()).expect("connect");
    let mut text = Vec::new();
    push_text(&mut text, "InitiatorName", support::client::INITIATOR_NAME);
    push_text(&mut text, "SessionType", "Normal");
    push_text(
        &mut text,
        "TargetName",
        "iqn.2026-11.io.isoe:no-such-target",
    );
    push_text(&mut text, "AuthMethod", "None");
    let (r, keys) = c
        .login_step(pdu::stage::SECURITY, pdu::stage::OPERATIONAL, true, &text)
        .expect("login response");
    assert_eq!(
        (r.status_class, r.status_detail),
        (
            pdu::login_status::INITIATOR_ERROR,
            pdu::login_status::NOT_FOUND
        ),
        "unknown TargetName: keys {keys:?}"
    );
    f.check("after a login to an unknown target");
}

#[test]
fn a_write_sent_without_its_data_is_an_overflow_not_a_silent_good() {
    let mut f = Fixture::new();
    let mut client = Client::login_normal(f.target.addr(), DEFAULT_TARGET);
    client.ready(0);
    let before = client.read(0, 4096, 8);
    let ones = vec![0xa5u8; 8 * 512];
    client.write(0, 4096, &ones);
    // WRITE (16) of 8 blocks, no W bit, Expected Data Transfer Length 0.
    let r = client
        .command(0, &support::client::write16(4096, 8), &[], 0)
        .unwrap();
    assert!(
        r.status != 0 || (r.residual.overflow && r.residual.count == 8 * 512),
        "a WRITE of 4096 bytes that carried none was answered GOOD without the \
         overflow: {:?}",
        r.residual
    );
    // Nothing was written by it: the blocks hold what was written before.
    assert_eq!(client.read(0, 4096, 8), ones);
    assert_ne!(before, ones);
    f.check("after a WRITE without its data");
}

#[test]
fn a_text_request_of_too_many_keys_is_rejected_not_answered_empty() {
    let mut f = Fixture::new();
    let mut client = Client::login_normal(f.target.addr(), DEFAULT_TARGET);
    client.ready(0);
    let mut text = Vec::new();
    for i in 0..1025 {
        push_text(&mut text, &format!("a{i}"), "1");
    }
    let request = Pdu::TextRequest(pdu::TextRequest {
        immediate: false,
        final_bit: true,
        continue_bit: false,
        lun: Lun::default(),
        initiator_task_tag: client.next_itt(),
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: client.cmd_sn,
        exp_stat_sn: client.exp_stat_sn,
    });
    client.cmd_sn = client.cmd_sn.wrapping_add(1);
    client.send_pdu(&request, &text).unwrap();
    expect_reject(
        &mut client,
        reject::RejectReason::ProtocolError,
        "1,025 keys",
    );
    // The session goes on.
    client.nop().unwrap();
    f.check("after a text request of 1,025 keys");
}

/// The next PDU within 5 s, whatever it is; panics on silence or close.
fn next_pdu(s: &mut Client, what: &str) -> Pdu {
    match s.recv(Duration::from_secs(5)).expect("recv") {
        Received::Pdu { pdu, .. } => pdu,
        other => panic!("{what}: expected a PDU within 5 s, got {other:?}"),
    }
}

#[test]
fn immediate_pdus_are_delivered_past_a_command_waiting_for_a_cmd_sn_gap() {
    let mut f = Fixture::new();
    let mut params = LoginParams::normal(DEFAULT_TARGET);
    params.extra_keys = vec![("MaxConnections".into(), "2".into())];
    let mut s = f.session(&params);
    // A second connection of the session, to fill the gap from.
    let mut other = Client::connect(f.target.addr()).unwrap();
    other.isid = s.isid;
    other.tsih = s.tsih;
    other.cid = 1;
    other.cmd_sn = s.cmd_sn;
    other.do_login(&params).expect("second connection");
    let gap = s.cmd_sn;
    // A READ with the CmdSN after the gap: it waits for CmdSN `gap`.
    let waiting = s.next_itt();
    let read = Pdu::ScsiCommand(ScsiCommand {
        final_bit: true,
        read: true,
        attr: 1,
        initiator_task_tag: waiting,
        expected_data_transfer_length: 512,
        cmd_sn: gap.wrapping_add(1),
        exp_stat_sn: s.exp_stat_sn,
        cdb: read16(0, 1),
        ..Default::default()
    });
    s.send_pdu(&read, &[]).unwrap();
    // RFC 7143 §3.2.2.1: an immediate ping is answered now.
    let ping = s.next_itt();
    let nop = Pdu::NopOut(NopOut {
        immediate: true,
        lun: Lun::default(),
        initiator_task_tag: ping,
        target_transfer_tag: RESERVED_TAG,
        cmd_sn: gap.wrapping_add(2),
        exp_stat_sn: s.exp_stat_sn,
    });
    s.send_pdu(&nop, &[]).unwrap();
    match next_pdu(&mut s, "an immediate NOP-Out behind the gap") {
        Pdu::NopIn(n) => assert_eq!(n.initiator_task_tag, ping),
        other => panic!("expected the NOP-In, got {other:?}"),
    }
    // And the waiting READ can be aborted.
    let abort = Pdu::TaskMgmtRequest(pdu::TaskMgmtRequest {
        immediate: true,
        function: pdu::tmf::TmfFunction::AbortTask,
        lun: Lun::default(),
        initiator_task_tag: s.next_itt(),
        referenced_task_tag: waiting,
        cmd_sn: gap.wrapping_add(2),
        exp_stat_sn: s.exp_stat_sn,
        ref_cmd_sn: gap.wrapping_add(1),
        exp_data_sn: 0,
    });
    s.send_pdu(&abort, &[]).unwrap();
    match next_pdu(&mut s, "an immediate ABORT TASK behind the gap") {
        Pdu::TaskMgmtResponse(r) => assert_eq!(r.response, pdu::tmf::TmfResponse::Complete),
        other => panic!("expected the function's response, got {other:?}"),
    }
    // The gap fills through the other connection: its command runs, and
    // the aborted READ, now taken in order, never answers; the window it
    // moved is said in an unsolicited NOP-In (RFC 7143 §11.19.1).
    other.cmd_sn = gap;
    other
        .command(0, &TEST_UNIT_READY, &[], 0)
        .expect("the command that fills the gap")
        .assert_good("the command that fills the gap");
    match next_pdu(&mut s, "the window after the aborted READ") {
        Pdu::NopIn(n) => {
            assert_eq!(
                (n.initiator_task_tag, n.target_transfer_tag),
                (RESERVED_TAG, RESERVED_TAG),
                "unsolicited, no answer asked"
            );
            assert_eq!(n.exp_cmd_sn, gap.wrapping_add(2), "past the READ");
        }
        other => panic!("the aborted READ answered: {other:?}"),
    }
    match s.recv(SILENCE).expect("recv") {
        Received::Timeout => {}
        other => panic!("the aborted READ answered: {other:?}"),
    }
    s.cmd_sn = gap.wrapping_add(2);
    s.nop().expect("a ping after the gap");
    f.check("after immediate PDUs past a CmdSN gap");
}

/// A peer sends a command that waits for a CmdSN gap, more behind it than
/// the connection's receive buffer holds (the rest stays in the socket),
/// then closes its socket: the target lets the connection go at once, not
/// when the gap's deadline (30 s) gives up on the waiting command.
#[test]
fn a_peer_that_closes_behind_a_full_buffer_of_waiting_commands_is_let_go_at_once() {
    let config = support::TargetConfig::memory_lun("64MiB");
    let mut f = Fixture::on(Target::with_config_and_env(
        &config,
        &[("RUST_LOG", "info")],
    ));
    let mut s = f.session(&LoginParams::normal(DEFAULT_TARGET));
    let closed = "INFO isoe_target::connection: connection closed";
    let before = f.target.output().matches(closed).count();
    let gap = s.cmd_sn;
    // Non-immediate pings of 80 KiB each, all behind the gap: 640 KiB,
    // over the 512 KiB the target reads while they wait, but within what
    // its socket takes, so that the end of the stream reaches its host
    // (behind more unsent data, a FIN would wait in the peer's host).
    for i in 1..=8u32 {
        let nop = Pdu::NopOut(NopOut {
            immediate: false,
            lun: Lun::default(),
            initiator_task_tag: s.next_itt(),
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: gap.wrapping_add(i),
            exp_stat_sn: s.exp_stat_sn,
        });
        s.send_pdu(&nop, &vec![0x5a; 80 << 10]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while f.target.output().matches(closed).count() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the close went unnoticed for 5 s; the target's output:\n{}",
            f.target.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    f.check("after a peer closed behind waiting commands");
}
