//! A minimal blocking iSCSI initiator for tests, built on `isoe_wire`.
//!
//! One command at a time, ErrorRecoveryLevel 0, one connection per session.
//! Everything is public so a test can also step outside the protocol: send
//! any PDU with any sequence number, raw bytes, or a truncated header.

use isoe_wire::frame::{self, Decoded, FrameLimits};
use isoe_wire::pdu::{
    stage, DataOut, LoginRequest, LoginResponse, LogoutRequest, Lun, NopOut, ScsiCommand,
    RESERVED_TAG,
};
use isoe_wire::serial::sn_gt;
use isoe_wire::{Pdu, BHS_LEN};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The initiator name the test client logs in with.
pub const INITIATOR_NAME: &str = "iqn.2026-11.io.isoe:test-client";
/// How long the client waits for any single reply before giving up.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Logical block size the helpers assume (the target's default).
pub const BLOCK_SIZE: usize = 512;

/// What the client proposes at login (RFC 7143 §13).
#[derive(Debug, Clone)]
pub struct LoginParams {
    /// InitiatorName.
    pub initiator_name: String,
    /// TargetName; None logs into a discovery session.
    pub target_name: Option<String>,
    /// Offer HeaderDigest=CRC32C only (else None only).
    pub header_digest: bool,
    /// Offer DataDigest=CRC32C only (else None only).
    pub data_digest: bool,
    /// ImmediateData.
    pub immediate_data: bool,
    /// InitialR2T.
    pub initial_r2t: bool,
    /// The MaxRecvDataSegmentLength we declare.
    pub max_recv_data_segment_length: u32,
    /// FirstBurstLength we offer.
    pub first_burst_length: u32,
    /// MaxBurstLength we offer.
    pub max_burst_length: u32,
    /// More keys, sent in the operational stage as given.
    pub extra_keys: Vec<(String, String)>,
}

impl LoginParams {
    /// A normal session to `target`, with the keys listed in the test brief.
    pub fn normal(target: &str) -> LoginParams {
        LoginParams {
            initiator_name: INITIATOR_NAME.into(),
            target_name: Some(target.into()),
            header_digest: false,
            data_digest: false,
            immediate_data: true,
            initial_r2t: false,
            max_recv_data_segment_length: 262_144,
            first_burst_length: 262_144,
            max_burst_length: 1_048_576,
            extra_keys: Vec::new(),
        }
    }

    /// A discovery session.
    pub fn discovery() -> LoginParams {
        LoginParams {
            target_name: None,
            ..LoginParams::normal("")
        }
    }
}

/// What the session negotiated, as the client uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The target's MaxRecvDataSegmentLength: our largest outgoing segment.
    pub max_send_data_segment_length: u32,
    /// ImmediateData=Yes.
    pub immediate_data: bool,
    /// InitialR2T=Yes.
    pub initial_r2t: bool,
    /// FirstBurstLength.
    pub first_burst_length: u32,
    /// MaxBurstLength.
    pub max_burst_length: u32,
    /// HeaderDigest=CRC32C.
    pub header_digest: bool,
    /// DataDigest=CRC32C.
    pub data_digest: bool,
}

/// Why a client operation failed.
#[derive(Debug)]
pub enum ClientError {
    /// The socket failed.
    Io(io::Error),
    /// The target closed the connection.
    Closed,
    /// No reply within the timeout.
    Timeout,
    /// The target answered with a Reject PDU (reason, rejected BHS).
    Reject { reason: u8, bhs: Vec<u8> },
    /// Login refused (RFC 7143 §11.13.5).
    LoginFailed {
        class: u8,
        detail: u8,
        keys: Vec<(String, String)>,
    },
    /// Something the protocol does not allow here.
    Protocol(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
            ClientError::Closed => write!(f, "the target closed the connection"),
            ClientError::Timeout => write!(f, "no reply within the timeout"),
            ClientError::Reject { reason, .. } => {
                write!(f, "target sent Reject, reason {reason:#04x}")
            }
            ClientError::LoginFailed {
                class,
                detail,
                keys,
            } => {
                write!(
                    f,
                    "login failed: status class {class}, detail {detail:#04x}, keys {keys:?}"
                )
            }
            ClientError::Protocol(what) => write!(f, "protocol violation: {what}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// A received PDU: typed header, raw BHS, data segment.
pub type Incoming = (Pdu, [u8; BHS_LEN], Vec<u8>);

/// One thing read from the connection.
#[derive(Debug)]
pub enum Received {
    /// A whole PDU: typed header, raw BHS, data segment.
    Pdu {
        pdu: Pdu,
        bhs: [u8; BHS_LEN],
        data: Vec<u8>,
    },
    /// Nothing arrived in time.
    Timeout,
    /// The peer closed (or reset) the connection.
    Closed,
}

/// Residual of a SCSI response (RFC 7143 §11.4.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residual {
    /// O bit.
    pub overflow: bool,
    /// U bit.
    pub underflow: bool,
    /// Residual Count.
    pub count: u32,
}

/// The outcome of one SCSI command.
#[derive(Debug, Clone, Default)]
pub struct ScsiResult {
    /// iSCSI Response (0: command completed at target).
    pub response: u8,
    /// SCSI status (0 GOOD, 2 CHECK CONDITION, ...).
    pub status: u8,
    /// Sense data, without the 2-byte SenseLength.
    pub sense: Vec<u8>,
    /// Data-In, assembled by Buffer Offset.
    pub data: Vec<u8>,
    /// Residual over- or underflow.
    pub residual: Residual,
    /// R2Ts answered.
    pub r2ts: u32,
    /// Data-In PDUs received.
    pub data_in_pdus: u32,
    /// Data-Out PDUs sent (solicited and unsolicited).
    pub data_out_pdus: u32,
}

impl ScsiResult {
    /// The sense key (fixed or descriptor format), if there is sense data.
    pub fn sense_key(&self) -> Option<u8> {
        match self.sense.first()? & 0x7f {
            0x70 | 0x71 => self.sense.get(2).map(|b| b & 0x0f),
            0x72 | 0x73 => self.sense.get(1).map(|b| b & 0x0f),
            _ => None,
        }
    }

    /// Panics with the status and sense unless the command completed GOOD.
    pub fn assert_good(&self, what: &str) {
        assert!(
            self.response == 0 && self.status == 0,
            "{what}: response {:#04x}, status {:#04x}, sense key {:?}, sense {:02x?}",
            self.response,
            self.status,
            self.sense_key(),
            self.sense
        );
    }
}

/// Parses `key=value\0` pairs (RFC 7143 §6.1) leniently, for assertions.
pub fn parse_text(data: &[u8]) -> Vec<(String, String)> {
    data.split(|&b| b == 0)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let pair = String::from_utf8_lossy(pair);
            match pair.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (pair.to_string(), String::new()),
            }
        })
        .collect()
}

/// Appends `key=value\0`.
pub fn push_text(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value.as_bytes());
    out.push(0);
}

/// The value of `key` in `keys`, if present.
pub fn key<'a>(keys: &'a [(String, String)], key: &str) -> Option<&'a str> {
    keys.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A unique ISID per client (RFC 7143 §11.12.5, type 2 "random"), so that
/// no two test sessions reinstate each other.
fn next_isid() -> [u8; 6] {
    static COUNTER: AtomicU32 = AtomicU32::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    [
        0x80,
        (pid >> 8) as u8,
        pid as u8,
        (n >> 16) as u8,
        (n >> 8) as u8,
        n as u8,
    ]
}

/// A connection to a target: logged in or not.
pub struct Client {
    stream: TcpStream,
    rx: Vec<u8>,
    /// What incoming PDUs are checked against.
    pub recv_limits: FrameLimits,
    /// What outgoing PDUs are framed with (digests).
    pub send_limits: FrameLimits,
    /// The CmdSN the next non-immediate command carries.
    pub cmd_sn: u32,
    /// The StatSN we expect next.
    pub exp_stat_sn: u32,
    /// The highest ExpCmdSN seen.
    pub exp_cmd_sn: u32,
    /// The highest MaxCmdSN seen.
    pub max_cmd_sn: u32,
    /// The ISID of this connection's session.
    pub isid: [u8; 6],
    /// The TSIH the target assigned.
    pub tsih: u16,
    /// This connection's CID (a second connection of a session needs its own).
    pub cid: u16,
    /// Negotiation results (after login).
    pub negotiated: Negotiated,
    /// Every key the target sent during login.
    pub login_keys: Vec<(String, String)>,
    next_itt: u32,
}

impl Client {
    /// Reads and drops at most `max` bytes from the socket, waiting at most
    /// `timeout` for some: a peer that reads slowly. Returns the count.
    pub fn discard_some(&mut self, max: usize, timeout: Duration) -> std::io::Result<usize> {
        use std::io::Read;
        self.stream.set_read_timeout(Some(timeout))?;
        let mut sink = vec![0u8; max];
        match self.stream.read(&mut sink) {
            Ok(n) => Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Connects without logging in (frames with login limits).
    pub fn connect(addr: SocketAddr) -> Result<Client, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, REPLY_TIMEOUT)?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            rx: Vec::with_capacity(1 << 20),
            recv_limits: FrameLimits::LOGIN,
            send_limits: FrameLimits::LOGIN,
            cmd_sn: 1,
            exp_stat_sn: 0,
            exp_cmd_sn: 1,
            max_cmd_sn: 1,
            isid: next_isid(),
            tsih: 0,
            cid: 0,
            negotiated: Negotiated {
                max_send_data_segment_length: 8192,
                immediate_data: true,
                initial_r2t: true,
                first_burst_length: 65_536,
                max_burst_length: 262_144,
                header_digest: false,
                data_digest: false,
            },
            login_keys: Vec::new(),
            next_itt: 0x1000,
        })
    }

    /// As [`Client::connect`], from the IPv4 loopback address `source`
    /// (any of 127.0.0.0/8): a second initiator address on one machine.
    pub fn connect_from(
        addr: SocketAddr,
        source: std::net::Ipv4Addr,
    ) -> Result<Client, ClientError> {
        let mut client = Client::connect(addr)?;
        client.stream = tcp_from(addr, source)?;
        client.stream.set_nodelay(true)?;
        Ok(client)
    }

    /// Connects and logs in; fails unless the login succeeds.
    pub fn login(addr: SocketAddr, params: &LoginParams) -> Result<Client, ClientError> {
        let mut client = Client::connect(addr)?;
        client.do_login(params)?;
        Ok(client)
    }

    /// Logs into `target` with [`LoginParams::normal`].
    pub fn login_normal(addr: SocketAddr, target: &str) -> Client {
        Client::login(addr, &LoginParams::normal(target))
            .unwrap_or_else(|e| panic!("login to {target} at {addr}: {e}"))
    }

    /// A fresh Initiator Task Tag.
    pub fn next_itt(&mut self) -> u32 {
        let itt = self.next_itt;
        self.next_itt = self.next_itt.wrapping_add(1);
        if self.next_itt == RESERVED_TAG {
            self.next_itt = 0x1000;
        }
        itt
    }

    /// Sends one Login Request with `text` and returns the Login Response and its keys.
    pub fn login_step(
        &mut self,
        csg: u8,
        nsg: u8,
        transit: bool,
        text: &[u8],
    ) -> Result<(LoginResponse, Vec<(String, String)>), ClientError> {
        let request = Pdu::LoginRequest(LoginRequest {
            transit,
            continue_bit: false,
            csg,
            nsg: if transit { nsg } else { 0 },
            version_max: 0,
            version_min: 0,
            isid: self.isid,
            tsih: self.tsih,
            initiator_task_tag: 0,
            cid: self.cid,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        });
        self.send_pdu(&request, text)?;
        match self.recv(REPLY_TIMEOUT)? {
            Received::Pdu {
                pdu: Pdu::LoginResponse(response),
                data,
                ..
            } => {
                self.exp_stat_sn = response.stat_sn.wrapping_add(1);
                Ok((response, parse_text(&data)))
            }
            Received::Pdu { pdu, .. } => Err(ClientError::Protocol(format!(
                "expected a Login Response, got {pdu:?}"
            ))),
            Received::Timeout => Err(ClientError::Timeout),
            Received::Closed => Err(ClientError::Closed),
        }
    }

    /// Security stage with AuthMethod=None, then the operational stage to full feature phase.
    pub fn do_login(&mut self, params: &LoginParams) -> Result<(), ClientError> {
        let mut text = Vec::new();
        push_text(&mut text, "InitiatorName", &params.initiator_name);
        match &params.target_name {
            Some(name) => {
                push_text(&mut text, "SessionType", "Normal");
                push_text(&mut text, "TargetName", name);
            }
            None => push_text(&mut text, "SessionType", "Discovery"),
        }
        push_text(&mut text, "AuthMethod", "None");
        let mut rounds = 0;
        loop {
            rounds += 1;
            let (response, keys) =
                self.login_step(stage::SECURITY, stage::OPERATIONAL, true, &text)?;
            self.login_keys.extend(keys.iter().cloned());
            if response.status_class != 0 {
                return Err(ClientError::LoginFailed {
                    class: response.status_class,
                    detail: response.status_detail,
                    keys,
                });
            }
            self.tsih = response.tsih;
            if response.transit {
                break;
            }
            if rounds > 4 {
                return Err(ClientError::Protocol(
                    "security stage did not end after 4 rounds".into(),
                ));
            }
            text.clear();
        }

        text.clear();
        let digest = |on: bool| if on { "CRC32C" } else { "None" };
        push_text(&mut text, "HeaderDigest", digest(params.header_digest));
        push_text(&mut text, "DataDigest", digest(params.data_digest));
        push_text(
            &mut text,
            "MaxRecvDataSegmentLength",
            &params.max_recv_data_segment_length.to_string(),
        );
        if params.target_name.is_some() {
            let yes_no = |on: bool| if on { "Yes" } else { "No" };
            push_text(&mut text, "ImmediateData", yes_no(params.immediate_data));
            push_text(&mut text, "InitialR2T", yes_no(params.initial_r2t));
            push_text(
                &mut text,
                "FirstBurstLength",
                &params.first_burst_length.to_string(),
            );
            push_text(
                &mut text,
                "MaxBurstLength",
                &params.max_burst_length.to_string(),
            );
            if !params.extra_keys.iter().any(|(k, _)| k == "MaxConnections") {
                push_text(&mut text, "MaxConnections", "1");
            }
            push_text(&mut text, "MaxOutstandingR2T", "1");
            push_text(&mut text, "DataPDUInOrder", "Yes");
            push_text(&mut text, "DataSequenceInOrder", "Yes");
            push_text(&mut text, "ErrorRecoveryLevel", "0");
            push_text(&mut text, "DefaultTime2Wait", "2");
            push_text(&mut text, "DefaultTime2Retain", "0");
        }
        for (k, v) in &params.extra_keys {
            push_text(&mut text, k, v);
        }
        let mut answers: Vec<(String, String)> = Vec::new();
        for _ in 0..4 {
            let (response, keys) =
                self.login_step(stage::OPERATIONAL, stage::FULL_FEATURE, true, &text)?;
            self.login_keys.extend(keys.iter().cloned());
            answers.extend(keys.iter().cloned());
            if response.status_class != 0 {
                return Err(ClientError::LoginFailed {
                    class: response.status_class,
                    detail: response.status_detail,
                    keys,
                });
            }
            self.tsih = response.tsih;
            if response.transit && response.nsg == stage::FULL_FEATURE {
                self.exp_cmd_sn = response.exp_cmd_sn;
                self.max_cmd_sn = response.max_cmd_sn;
                self.finish_login(params, &answers);
                return Ok(());
            }
            // RFC 7143 §6.2: keys the target offered on its own need an answer; take its values.
            let offered: Vec<u8> = text.clone();
            text.clear();
            for (k, v) in &keys {
                let ours = parse_text(&offered).iter().any(|(o, _)| o == k);
                let declarative = matches!(
                    k.as_str(),
                    "MaxRecvDataSegmentLength"
                        | "TargetPortalGroupTag"
                        | "TargetAlias"
                        | "TargetAddress"
                );
                let answer = matches!(v.as_str(), "NotUnderstood" | "Irrelevant" | "Reject");
                if !ours && !declarative && !answer {
                    push_text(&mut text, k, v);
                }
            }
        }
        Err(ClientError::Protocol(
            "operational stage did not reach full feature phase after 4 rounds".into(),
        ))
    }

    /// Applies what the target answered (RFC 7143 §13: declarative, AND, OR, min).
    fn finish_login(&mut self, params: &LoginParams, answers: &[(String, String)]) {
        let number = |k: &str, ours: u32| {
            key(answers, k)
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(ours)
        };
        let yes = |k: &str, ours: bool| key(answers, k).map(|v| v == "Yes").unwrap_or(ours);
        let crc = |k: &str, ours: bool| key(answers, k).map(|v| v == "CRC32C").unwrap_or(ours);
        self.negotiated = Negotiated {
            // RFC 7143 §13.12: declarative; the target's default is 8192 if it sent none.
            max_send_data_segment_length: number("MaxRecvDataSegmentLength", 8192),
            immediate_data: yes("ImmediateData", params.immediate_data),
            initial_r2t: yes("InitialR2T", params.initial_r2t),
            first_burst_length: number("FirstBurstLength", params.first_burst_length),
            max_burst_length: number("MaxBurstLength", params.max_burst_length),
            header_digest: crc("HeaderDigest", params.header_digest),
            data_digest: crc("DataDigest", params.data_digest),
        };
        let n = self.negotiated;
        self.recv_limits = FrameLimits {
            max_recv_data_segment_length: params.max_recv_data_segment_length,
            header_digest: n.header_digest,
            data_digest: n.data_digest,
            crc: isoe_wire::digest::Crc32cImpl::Hardware,
        };
        self.send_limits = FrameLimits {
            max_recv_data_segment_length: n.max_send_data_segment_length,
            header_digest: n.header_digest,
            data_digest: n.data_digest,
            crc: isoe_wire::digest::Crc32cImpl::Hardware,
        };
    }

    /// Encodes and sends one PDU with the current send limits (digests).
    pub fn send_pdu(&mut self, pdu: &Pdu, data: &[u8]) -> Result<(), ClientError> {
        let mut out = Vec::with_capacity(BHS_LEN + 8 + data.len() + 8);
        frame::encode(&mut out, pdu, &[], data, &self.send_limits);
        self.send_raw(&out)
    }

    /// Sends bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// Closes our sending side (the target sees end of file).
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// Reads the next PDU. Answers target NOP-In pings on its own.
    pub fn recv(&mut self, timeout: Duration) -> Result<Received, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((pdu, bhs, data)) = self.decode_one()? {
                self.track(&pdu);
                if let Pdu::NopIn(ping) = &pdu {
                    if ping.initiator_task_tag == RESERVED_TAG
                        && ping.target_transfer_tag != RESERVED_TAG
                    {
                        // RFC 7143 §11.18: answer a ping with the TTT, reserved ITT, CmdSN not advanced.
                        let pong = Pdu::NopOut(NopOut {
                            immediate: true,
                            lun: ping.lun,
                            initiator_task_tag: RESERVED_TAG,
                            target_transfer_tag: ping.target_transfer_tag,
                            cmd_sn: self.cmd_sn,
                            exp_stat_sn: self.exp_stat_sn,
                        });
                        self.send_pdu(&pong, &[])?;
                        continue;
                    }
                }
                return Ok(Received::Pdu { pdu, bhs, data });
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Received::Timeout);
            }
            self.stream.set_read_timeout(Some(deadline - now))?;
            let start = self.rx.len();
            self.rx.resize(start + 256 * 1024, 0);
            let got = self.stream.read(&mut self.rx[start..]);
            self.rx.truncate(start + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => return Ok(Received::Closed),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Received::Timeout)
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Ok(Received::Closed)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Takes one whole PDU off the receive buffer, if one is there.
    fn decode_one(&mut self) -> Result<Option<Incoming>, ClientError> {
        let (pdu, bhs, data, len) = match frame::decode(&self.rx, &self.recv_limits) {
            Ok(Decoded::NeedMore { .. }) => return Ok(None),
            Ok(Decoded::Frame { frame, len }) => {
                let pdu = frame.pdu().map_err(|e| {
                    ClientError::Protocol(format!("target sent an unparsable BHS: {e}"))
                })?;
                (pdu, *frame.bhs, frame.data.to_vec(), len)
            }
            Err(e) => {
                return Err(ClientError::Protocol(format!(
                    "target sent a bad frame: {e}"
                )))
            }
        };
        self.rx.drain(..len);
        Ok(Some((pdu, bhs, data)))
    }

    /// Follows StatSN and the command window from every response.
    fn track(&mut self, pdu: &Pdu) {
        let (stat_sn, window, advances) = match pdu {
            Pdu::ScsiResponse(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            Pdu::DataIn(p) => (
                p.stat_sn,
                Some((p.exp_cmd_sn, p.max_cmd_sn)),
                p.status_present,
            ),
            Pdu::NopIn(p) => (
                p.stat_sn,
                Some((p.exp_cmd_sn, p.max_cmd_sn)),
                p.initiator_task_tag != RESERVED_TAG,
            ),
            Pdu::TaskMgmtResponse(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            Pdu::TextResponse(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            Pdu::LogoutResponse(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            Pdu::R2t(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), false),
            Pdu::Reject(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            Pdu::AsyncMessage(p) => (p.stat_sn, Some((p.exp_cmd_sn, p.max_cmd_sn)), true),
            _ => (0, None, false),
        };
        if advances {
            self.exp_stat_sn = stat_sn.wrapping_add(1);
        }
        if let Some((exp, max)) = window {
            if sn_gt(exp, self.exp_cmd_sn) {
                self.exp_cmd_sn = exp;
            }
            if sn_gt(max, self.max_cmd_sn) {
                self.max_cmd_sn = max;
            }
        }
    }

    /// Reads the next PDU, failing on timeout or close.
    pub fn expect_pdu(&mut self) -> Result<Incoming, ClientError> {
        match self.recv(REPLY_TIMEOUT)? {
            Received::Pdu { pdu, bhs, data } => Ok((pdu, bhs, data)),
            Received::Timeout => Err(ClientError::Timeout),
            Received::Closed => Err(ClientError::Closed),
        }
    }

    /// Runs one SCSI command: `data_out` is written (immediate data,
    /// unsolicited Data-Out and R2T-solicited Data-Out as negotiated), up to
    /// `read_len` bytes are read.
    pub fn command(
        &mut self,
        lun: u16,
        cdb: &[u8],
        data_out: &[u8],
        read_len: u32,
    ) -> Result<ScsiResult, ClientError> {
        assert!(
            cdb.len() <= 16,
            "the test client sends CDBs of at most 16 bytes"
        );
        assert!(
            data_out.is_empty() || read_len == 0,
            "the test client does not do bidirectional commands"
        );
        let mut cdb16 = [0u8; 16];
        cdb16[..cdb.len()].copy_from_slice(cdb);
        let write = !data_out.is_empty();
        let edtl = if write {
            data_out.len() as u32
        } else {
            read_len
        };
        let n = self.negotiated;
        let mut result = ScsiResult::default();

        // RFC 7143 §13.11/§13.14: immediate data, then unsolicited Data-Out, up to FirstBurstLength.
        let burst = (n.first_burst_length as usize).min(data_out.len());
        let immediate_len = if write && n.immediate_data {
            burst.min(n.max_send_data_segment_length as usize)
        } else {
            0
        };
        let unsolicited_end = if write && !n.initial_r2t {
            burst
        } else {
            immediate_len
        };
        let itt = self.next_itt();
        let command = Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: unsolicited_end == immediate_len,
            read: read_len > 0,
            write,
            attr: 1,
            lun: Lun::from_number(lun),
            initiator_task_tag: itt,
            expected_data_transfer_length: edtl,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            cdb: cdb16,
        });
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        self.send_pdu(&command, &data_out[..immediate_len])?;
        if unsolicited_end > immediate_len {
            result.data_out_pdus += self.send_data_out(
                lun,
                itt,
                RESERVED_TAG,
                data_out,
                immediate_len,
                unsolicited_end,
            )?;
        }

        let mut data = vec![0u8; read_len as usize];
        let mut data_end = 0usize;
        loop {
            let (pdu, bhs, segment) = self.expect_pdu()?;
            match pdu {
                Pdu::R2t(r2t) if r2t.initiator_task_tag == itt => {
                    let start = r2t.buffer_offset as usize;
                    let end = start + r2t.desired_data_transfer_length as usize;
                    if end > data_out.len() || r2t.desired_data_transfer_length == 0 {
                        return Err(ClientError::Protocol(format!(
                            "R2T for {start}..{end} of a {} byte write",
                            data_out.len()
                        )));
                    }
                    result.r2ts += 1;
                    result.data_out_pdus += self.send_data_out(
                        lun,
                        itt,
                        r2t.target_transfer_tag,
                        data_out,
                        start,
                        end,
                    )?;
                }
                Pdu::DataIn(d) if d.initiator_task_tag == itt => {
                    let start = d.buffer_offset as usize;
                    let end = start + segment.len();
                    if end > data.len() {
                        return Err(ClientError::Protocol(format!(
                            "Data-In for {start}..{end} beyond EDTL {read_len}"
                        )));
                    }
                    data[start..end].copy_from_slice(&segment);
                    data_end = data_end.max(end);
                    result.data_in_pdus += 1;
                    if d.status_present {
                        result.status = d.status;
                        result.residual = Residual {
                            overflow: d.overflow,
                            underflow: d.underflow,
                            count: d.residual_count,
                        };
                        break;
                    }
                }
                Pdu::ScsiResponse(r) if r.initiator_task_tag == itt => {
                    result.response = r.response;
                    result.status = r.status;
                    result.residual = Residual {
                        overflow: r.overflow,
                        underflow: r.underflow,
                        count: r.residual_count,
                    };
                    if segment.len() >= 2 {
                        let sense_len = u16::from_be_bytes([segment[0], segment[1]]) as usize;
                        result.sense = segment[2..(2 + sense_len).min(segment.len())].to_vec();
                    }
                    break;
                }
                Pdu::Reject(r) => {
                    return Err(ClientError::Reject {
                        reason: r.reason.to_u8(),
                        bhs: segment,
                    })
                }
                // A response to an earlier command a test abandoned (e.g. a NOP-Out answer).
                Pdu::NopIn(_) => {}
                other => {
                    return Err(ClientError::Protocol(format!(
                        "unexpected {other:?} (BHS {:02x?}) while running ITT {itt:#x}",
                        &bhs[..8]
                    )))
                }
            }
        }
        data.truncate(data_end);
        result.data = data;
        Ok(result)
    }

    /// Sends `data_out[start..end]` as one sequence of Data-Out PDUs; returns how many.
    fn send_data_out(
        &mut self,
        lun: u16,
        itt: u32,
        ttt: u32,
        data_out: &[u8],
        start: usize,
        end: usize,
    ) -> Result<u32, ClientError> {
        let segment = self.negotiated.max_send_data_segment_length as usize;
        let mut offset = start;
        let mut data_sn = 0u32;
        while offset < end {
            let len = segment.min(end - offset);
            let pdu = Pdu::DataOut(DataOut {
                final_bit: offset + len == end,
                lun: Lun::from_number(lun),
                initiator_task_tag: itt,
                target_transfer_tag: ttt,
                exp_stat_sn: self.exp_stat_sn,
                data_sn,
                buffer_offset: offset as u32,
            });
            self.send_pdu(&pdu, &data_out[offset..offset + len])?;
            offset += len;
            data_sn += 1;
        }
        Ok(data_sn)
    }

    /// READ (16) of `blocks` 512-byte blocks at `lba`; panics unless GOOD.
    pub fn read(&mut self, lun: u16, lba: u64, blocks: u32) -> Vec<u8> {
        let result = self
            .command(lun, &read16(lba, blocks), &[], blocks * BLOCK_SIZE as u32)
            .unwrap_or_else(|e| panic!("READ(16) lba {lba}: {e}"));
        result.assert_good(&format!("READ(16) lba {lba} blocks {blocks}"));
        assert_eq!(
            result.data.len(),
            blocks as usize * BLOCK_SIZE,
            "READ(16) lba {lba}: short data"
        );
        result.data
    }

    /// WRITE (16) of `data` (whole 512-byte blocks) at `lba`; panics unless GOOD.
    pub fn write(&mut self, lun: u16, lba: u64, data: &[u8]) -> ScsiResult {
        assert_eq!(data.len() % BLOCK_SIZE, 0, "whole blocks only");
        let blocks = (data.len() / BLOCK_SIZE) as u32;
        let result = self
            .command(lun, &write16(lba, blocks), data, 0)
            .unwrap_or_else(|e| panic!("WRITE(16) lba {lba}: {e}"));
        result.assert_good(&format!("WRITE(16) lba {lba} blocks {blocks}"));
        result
    }

    /// TEST UNIT READY until GOOD, consuming the UNIT ATTENTIONs a new I_T
    /// nexus may report (SAM-5 5.14: POWER ON, RESET); panics otherwise.
    pub fn ready(&mut self, lun: u16) {
        let mut last = ScsiResult::default();
        for _ in 0..4 {
            last = self
                .command(lun, &TEST_UNIT_READY, &[], 0)
                .unwrap_or_else(|e| panic!("TEST UNIT READY: {e}"));
            if last.status == 0 {
                return;
            }
            if last.sense_key() != Some(SENSE_KEY_UNIT_ATTENTION) {
                break;
            }
        }
        last.assert_good(&format!("TEST UNIT READY on LUN {lun}"));
    }

    /// NOP-Out ping with an ITT; returns once the NOP-In answer arrives.
    pub fn nop(&mut self) -> Result<(), ClientError> {
        let itt = self.next_itt();
        let ping = Pdu::NopOut(NopOut {
            immediate: false,
            lun: Lun::default(),
            initiator_task_tag: itt,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        });
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        self.send_pdu(&ping, &[])?;
        match self.expect_pdu()? {
            (Pdu::NopIn(n), ..) if n.initiator_task_tag == itt => Ok(()),
            (Pdu::Reject(r), _, data) => Err(ClientError::Reject {
                reason: r.reason.to_u8(),
                bhs: data,
            }),
            (other, ..) => Err(ClientError::Protocol(format!(
                "unexpected {other:?} awaiting NOP-In"
            ))),
        }
    }

    /// Logout (close the session); returns the Logout Response code.
    pub fn logout(&mut self) -> Result<u8, ClientError> {
        let itt = self.next_itt();
        let request = Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason_code: isoe_wire::pdu::LogoutReason::CloseSession,
            initiator_task_tag: itt,
            cid: self.cid,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        });
        self.send_pdu(&request, &[])?;
        loop {
            match self.expect_pdu()? {
                (Pdu::LogoutResponse(r), ..) if r.initiator_task_tag == itt => {
                    return Ok(r.response.to_u8())
                }
                (Pdu::NopIn(_), ..) => {}
                (other, ..) => {
                    return Err(ClientError::Protocol(format!(
                        "unexpected {other:?} awaiting Logout Response"
                    )))
                }
            }
        }
    }
}

/// READ (16) CDB (SBC-4 5.16).
pub fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x88;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// WRITE (16) CDB (SBC-4 5.40).
pub fn write16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x8a;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// Sense key UNIT ATTENTION (SPC-5 4.4.8).
pub const SENSE_KEY_UNIT_ATTENTION: u8 = 0x06;

/// TEST UNIT READY CDB (SPC-5 6.47).
pub const TEST_UNIT_READY: [u8; 6] = [0; 6];

/// A TCP connection to `addr` (IPv4) from `source`, port chosen by the
/// kernel: std has no way to bind a client socket's address.
fn tcp_from(addr: SocketAddr, source: std::net::Ipv4Addr) -> io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(addr) = addr else {
        return Err(io::Error::other("tcp_from connects to IPv4 addresses only"));
    };
    let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: socket(2) with constant arguments; the descriptor it returns
    // is owned by the TcpStream made from it below, or closed on error.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket this function just made and owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let (local, remote) = (sockaddr(source, 0), sockaddr(*addr.ip(), addr.port()));
    // SAFETY: both addresses are valid sockaddr_in of `len` bytes that
    // outlive the calls; `fd` is open (owned by `stream`).
    unsafe {
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(stream)
}
