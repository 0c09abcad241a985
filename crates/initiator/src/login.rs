//! One connection's login (RFC 7143 §6.3) from the initiator's side, with
//! no I/O: the Login Requests to send, the responses taken, and what the
//! login leaves for full feature phase. [`crate::channel::Channel::login`]
//! runs it over a socket; a test can run it against a target in memory.

use isoe_wire::digest::Crc32cImpl;
use isoe_wire::frame::FrameLimits;
use isoe_wire::login::{
    InitiatorLogin, InitiatorLoginConfig, InitiatorLoginError, InitiatorStep, Negotiated,
};
use isoe_wire::pdu::{LoginRequest, LoginResponse};

/// A finished login and the sequence numbers it left.
#[derive(Debug, Clone)]
pub struct LoginResult {
    /// What was negotiated.
    pub negotiated: Negotiated,
    /// The session's TSIH.
    pub tsih: u16,
    /// StatSN of the final Login Response + 1.
    pub exp_stat_sn: u32,
    /// ExpCmdSN of the final Login Response.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN of the final Login Response.
    pub max_cmd_sn: u32,
}

impl LoginResult {
    /// How the connection frames PDUs from now on: what it accepts (the
    /// MaxRecvDataSegmentLength it declared, the digests) and how it sends
    /// (the same digests, the target's MaxRecvDataSegmentLength).
    pub fn limits(&self) -> (FrameLimits, FrameLimits) {
        let c = self.negotiated.connection;
        let recv = FrameLimits {
            max_recv_data_segment_length: c.max_recv_data_segment_length,
            header_digest: c.header_digest,
            data_digest: c.data_digest,
            crc: Crc32cImpl::Hardware,
        };
        let send = FrameLimits {
            max_recv_data_segment_length: c.max_send_data_segment_length,
            ..recv
        };
        (recv, send)
    }
}

/// What the initiator does next in a login.
#[derive(Debug, Clone)]
pub enum LoginStep {
    /// Send this Login Request with its text, then hand the response to
    /// [`LoginExchange::handle_response`].
    Send {
        /// The header.
        request: LoginRequest,
        /// Its text data segment.
        data: Vec<u8>,
    },
    /// The connection is in full feature phase.
    Done(LoginResult),
}

/// The initiator's side of one login.
#[derive(Debug)]
pub struct LoginExchange {
    login: InitiatorLogin,
    last: LoginResponse,
}

impl LoginExchange {
    /// A login with `config`; `random` seeds a mutual CHAP challenge.
    pub fn new(config: InitiatorLoginConfig, random: [u8; 32]) -> LoginExchange {
        LoginExchange {
            login: InitiatorLogin::new(config, random),
            last: LoginResponse::default(),
        }
    }

    /// The first request.
    pub fn start(&mut self) -> LoginStep {
        let step = self.login.start();
        self.step(step)
    }

    /// The target's answer to the last request.
    pub fn handle_response(
        &mut self,
        response: &LoginResponse,
        data: &[u8],
    ) -> Result<LoginStep, InitiatorLoginError> {
        self.last = *response;
        let step = self.login.handle_response(response, data)?;
        Ok(self.step(step))
    }

    fn step(&self, step: InitiatorStep) -> LoginStep {
        match step {
            InitiatorStep::Send { request, data } => LoginStep::Send { request, data },
            InitiatorStep::Complete { negotiated, tsih } => LoginStep::Done(LoginResult {
                negotiated,
                tsih,
                exp_stat_sn: self.last.stat_sn.wrapping_add(1),
                exp_cmd_sn: self.last.exp_cmd_sn,
                max_cmd_sn: self.last.max_cmd_sn,
            }),
        }
    }
}
