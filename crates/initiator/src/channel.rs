//! One PDU at a time over a blocking socket: the login phase of every
//! connection, and discovery sessions. Full feature phase of normal sessions
//! runs in [`crate::engine`], which takes the socket over afterwards.

use crate::config::SocketOptions;
use crate::error::InitiatorError;
pub use crate::login::LoginResult;
use crate::login::{LoginExchange, LoginStep};
use crate::recv_buf::RecvBuf;
use crate::sys;
use crate::url::Portal;
use isoe_wire::frame::{self, Decoded, FrameLimits};
use isoe_wire::login::InitiatorLoginConfig;
use isoe_wire::Pdu;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A connected socket exchanging one PDU at a time.
#[derive(Debug)]
pub struct Channel {
    stream: TcpStream,
    rbuf: RecvBuf,
    portal: String,
    /// What we accept (MaxRecvDataSegmentLength we declared, digests).
    pub recv_limits: FrameLimits,
    /// How we send (digests).
    pub send_limits: FrameLimits,
    timeout: Duration,
}

impl Channel {
    /// Connects to `portal` with the socket options given.
    pub fn connect(
        portal: &Portal,
        timeout: Duration,
        options: &SocketOptions,
    ) -> Result<Channel, InitiatorError> {
        let name = portal.to_string();
        let addr = portal.resolve()?;
        let connect_error = |source| InitiatorError::Connect {
            portal: name.clone(),
            source,
        };
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(connect_error)?;
        apply_options(&stream, options).map_err(connect_error)?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(connect_error)?;
        Ok(Channel {
            stream,
            rbuf: RecvBuf::default(),
            portal: name,
            recv_limits: FrameLimits::LOGIN,
            send_limits: FrameLimits::LOGIN,
            timeout,
        })
    }

    /// host:port, for messages.
    pub fn portal(&self) -> &str {
        &self.portal
    }

    fn io_error(&self, source: io::Error) -> InitiatorError {
        InitiatorError::Io {
            portal: self.portal.clone(),
            source,
        }
    }

    /// Sends one PDU with its data segment.
    pub fn send(&mut self, pdu: &Pdu, data: &[u8]) -> Result<(), InitiatorError> {
        let mut out = Vec::with_capacity(64 + data.len());
        frame::encode(&mut out, pdu, &[], data, &self.send_limits);
        self.stream.write_all(&out).map_err(|e| self.io_error(e))
    }

    /// Receives one PDU and its data segment.
    pub fn recv(&mut self, during: &'static str) -> Result<(Pdu, Vec<u8>), InitiatorError> {
        loop {
            let need = match frame::decode(self.rbuf.data(), &self.recv_limits) {
                Ok(Decoded::Frame { frame, len }) => {
                    let pdu = frame.pdu().map_err(|e| InitiatorError::Protocol {
                        portal: self.portal.clone(),
                        what: format!("undecodable PDU header: {e}"),
                    })?;
                    let data = frame.data.to_vec();
                    self.rbuf.consume(len);
                    return Ok((pdu, data));
                }
                Ok(Decoded::NeedMore { total_len }) => total_len,
                Err(source) => {
                    return Err(InitiatorError::Frame {
                        portal: self.portal.clone(),
                        source,
                    })
                }
            };
            let spare = self.rbuf.spare(need);
            match self.stream.read(spare) {
                Ok(0) => {
                    return Err(InitiatorError::Closed {
                        portal: self.portal.clone(),
                        during,
                    })
                }
                Ok(n) => self.rbuf.filled(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(InitiatorError::Timeout {
                        portal: self.portal.clone(),
                        seconds: self.timeout.as_secs(),
                        during,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
    }

    /// Runs a login (RFC 7143 §6.3) to full feature phase; afterwards the
    /// channel frames PDUs with the negotiated digests and segment length.
    pub fn login(&mut self, config: InitiatorLoginConfig) -> Result<LoginResult, InitiatorError> {
        let target = config
            .target_name
            .clone()
            .unwrap_or_else(|| "discovery".to_string());
        let mut random = [0u8; 32];
        // Without entropy the mutual CHAP challenge would be predictable; refuse rather than weaken it.
        if config.chap.as_ref().is_some_and(|c| c.mutual.is_some()) {
            getrandom::getrandom(&mut random).map_err(|e| {
                InitiatorError::Usage(format!(
                    "no random source for the mutual CHAP challenge: {e}"
                ))
            })?;
        }
        let mut login = LoginExchange::new(config, random);
        let mut step = login.start();
        loop {
            match step {
                LoginStep::Send { request, data } => {
                    self.send(&Pdu::LoginRequest(request), &data)?;
                    let (pdu, data) = self.recv("during login")?;
                    let Pdu::LoginResponse(response) = pdu else {
                        return Err(InitiatorError::Protocol {
                            portal: self.portal.clone(),
                            what: format!("{:?} PDU during login", pdu.opcode()),
                        });
                    };
                    step = login.handle_response(&response, &data).map_err(|source| {
                        InitiatorError::Login {
                            portal: self.portal.clone(),
                            target: target.clone(),
                            source,
                        }
                    })?;
                }
                LoginStep::Done(result) => {
                    (self.recv_limits, self.send_limits) = result.limits();
                    return Ok(result);
                }
            }
        }
    }

    /// The socket and whatever was read past the last PDU.
    pub fn into_parts(self) -> (TcpStream, RecvBuf) {
        (self.stream, self.rbuf)
    }
}

/// Applies the TCP knobs to a fresh socket.
pub fn apply_options(stream: &TcpStream, options: &SocketOptions) -> io::Result<()> {
    stream.set_nodelay(options.nodelay)?;
    let fd = stream.as_raw_fd();
    if let Some(bytes) = options.rcvbuf_bytes {
        sys::set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, clamp_i32(bytes))?;
    }
    if let Some(bytes) = options.sndbuf_bytes {
        sys::set_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, clamp_i32(bytes))?;
    }
    if let Some(us) = options.busy_poll_us {
        sys::set_int_option(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, clamp_i32(us))?;
    }
    if options.quickack {
        sys::set_quickack(fd)?;
    }
    Ok(())
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}
