//! What a session is opened with.

use crate::url::{IscsiUrl, Portal};
use isoe_wire::chap::{ChapAlgorithm, Secret};
use isoe_wire::login::{InitiatorChap, InitiatorLoginConfig};
use isoe_wire::negotiate::{Digest, LocalParams, SessionType};
use std::time::Duration;

/// The InitiatorName isoe uses unless told otherwise.
pub const DEFAULT_INITIATOR_NAME: &str = "iqn.2026-11.io.isoe:initiator";

/// How hard to try to get a failed session back (ERL 0 session reinstatement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Reconnection attempts before the session is declared failed; 0 = never reconnect.
    pub attempts: u32,
    /// Wait before the first attempt; doubled after each failure.
    pub initial_delay: Duration,
    /// The longest wait between attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(16)).unwrap_or(u32::MAX);
        self.initial_delay
            .saturating_mul(factor)
            .min(self.max_delay)
    }
}

/// NOP-Out keepalives (RFC 7143 §11.18): a ping after `interval` of silence,
/// the connection declared dead when no answer comes within `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence before a ping; `None` sends no pings.
    pub interval: Option<Duration>,
    /// How long a ping may go unanswered.
    pub timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            interval: Some(Duration::from_secs(5)),
            timeout: Duration::from_secs(15),
        }
    }
}

/// SO_SNDBUF unless asked otherwise: what the socket takes before a send
/// returns short and the rest of the Data-Out waits in the engine for the
/// socket to drain (the kernel doubles it for its own overhead). With the
/// kernel's send auto-tuning (up to `net.ipv4.tcp_wmem`'s 4 MiB) a
/// connection put a whole window of writes on the wire at once, and the
/// receiving side dropped part of it: on the lab's veth topology, 256 KiB
/// sequential writes QD8 over two portals retransmitted 1,300 to 1,600
/// segments per run against 300 to 540 for libiscsi through fio; at
/// 256 KiB, 106 to 408 at 1.05x to 1.2x the MB/s of auto-tuning and less
/// CPU on both sides (512 KiB: 435 to 847, 768 KiB: 884 to 1,740). At a
/// 50 µs round trip it still allows some 10 GB/s per connection; a long,
/// fast path wants `sndbuf` larger, or 0 for auto-tuning.
pub const DEFAULT_SNDBUF_BYTES: u32 = 256 * 1024;

/// TCP options the lab toggles (METHODOLOGY.md "Knobs").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// TCP_NODELAY (Nagle off). On by default, as every iSCSI initiator does.
    pub nodelay: bool,
    /// TCP_QUICKACK after every receive (delayed ACK off).
    pub quickack: bool,
    /// A fixed SO_RCVBUF in bytes (stops receive auto-tuning).
    pub rcvbuf_bytes: Option<u32>,
    /// A fixed SO_SNDBUF in bytes ([`DEFAULT_SNDBUF_BYTES`] by default);
    /// None leaves the kernel's send auto-tuning.
    pub sndbuf_bytes: Option<u32>,
    /// SO_BUSY_POLL in microseconds.
    pub busy_poll_us: Option<u32>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            nodelay: true,
            quickack: false,
            rcvbuf_bytes: None,
            sndbuf_bytes: Some(DEFAULT_SNDBUF_BYTES),
            busy_poll_us: None,
        }
    }
}

/// Everything a normal session needs.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Where to connect.
    pub portal: Portal,
    /// TargetName.
    pub target_name: String,
    /// InitiatorName.
    pub initiator_name: String,
    /// ISID (RFC 7143 §11.12.5); distinct per session to the same target.
    pub isid: [u8; 6],
    /// CHAP credentials.
    pub chap: Option<InitiatorChap>,
    /// Operational parameters we ask for.
    pub params: LocalParams,
    /// Connections in the session (MC/S); asks MaxConnections for at least this many.
    pub connections: u16,
    /// Reconnection.
    pub retry: RetryPolicy,
    /// NOP-Out keepalives.
    pub keepalive: Keepalive,
    /// Socket knobs.
    pub socket: SocketOptions,
    /// How long a login or a synchronous request may take.
    pub timeout: Duration,
}

impl SessionConfig {
    /// A session to the target of `url`, with CHAP if the URL carries a user,
    /// and isoe's default parameters (the ones libiscsi offers: immediate
    /// data on, InitialR2T off, 256 KiB PDUs and bursts).
    pub fn from_url(url: &IscsiUrl) -> SessionConfig {
        let chap = match (&url.user, &url.password) {
            (Some(user), Some(secret)) => Some(chap(user, secret.clone(), None)),
            _ => None,
        };
        SessionConfig {
            portal: url.portal.clone(),
            target_name: url.target.clone(),
            initiator_name: DEFAULT_INITIATOR_NAME.into(),
            isid: random_isid(),
            chap,
            params: default_params(),
            connections: 1,
            retry: RetryPolicy::default(),
            keepalive: Keepalive::default(),
            socket: SocketOptions::default(),
            timeout: Duration::from_secs(15),
        }
    }

    /// What connection `cid` of the session logs in with: a new session
    /// when `tsih` is 0, else a connection joining it; the login's CmdSN is
    /// the session's next, `cmd_sn`. MaxConnections asks for at least
    /// [`SessionConfig::connections`].
    pub fn login_config(&self, cid: u16, tsih: u16, cmd_sn: u32) -> InitiatorLoginConfig {
        let mut params = self.params.clone();
        params.max_connections = params.max_connections.max(self.connections);
        InitiatorLoginConfig {
            initiator_name: self.initiator_name.clone(),
            initiator_alias: None,
            target_name: Some(self.target_name.clone()),
            session_type: SessionType::Normal,
            isid: self.isid,
            tsih,
            cid,
            initiator_task_tag: u32::from(cid),
            cmd_sn,
            params,
            chap: self.chap.clone(),
        }
    }

    /// Turns digests on or off (offering only CRC32C, or only None).
    pub fn set_digests(&mut self, header: bool, data: bool) {
        let pick = |on: bool| vec![if on { Digest::Crc32c } else { Digest::None }];
        self.params.header_digest = pick(header);
        self.params.data_digest = pick(data);
    }
}

/// CHAP credentials offering MD5 first, then SHA-256 and SHA3-256, with
/// optional mutual CHAP.
///
/// MD5 leads because tgt (and IET and SCST, whose CHAP code it shares) takes
/// CHAP_A=7 for SHA-1, not SHA-256 as IANA assigns it: offered SHA-256
/// first, tgt picks 7 and every login fails. SHA3-256 (8) comes last: a
/// target that does not know it skips it (RFC 7143 §6.2.1), and one that
/// accepts only it (an isoe target with `algorithms = ["SHA3-256"]`) gets
/// it. A caller that knows its target can reorder
/// [`InitiatorChap::algorithms`].
pub fn chap(user: &str, secret: Secret, mutual: Option<(String, Secret)>) -> InitiatorChap {
    InitiatorChap {
        user: user.into(),
        secret,
        mutual,
        algorithms: vec![
            ChapAlgorithm::Md5,
            ChapAlgorithm::Sha256,
            ChapAlgorithm::Sha3_256,
        ],
    }
}

/// isoe's operational defaults.
pub fn default_params() -> LocalParams {
    LocalParams {
        header_digest: vec![Digest::None, Digest::Crc32c],
        data_digest: vec![Digest::None, Digest::Crc32c],
        max_connections: 8,
        initial_r2t: false,
        immediate_data: true,
        max_recv_data_segment_length: 262_144,
        max_burst_length: 1_048_576,
        first_burst_length: 262_144,
        ..LocalParams::default()
    }
}

/// A random ISID (RFC 7143 §11.12.5, type 10b: 22 random bits... here the
/// A/B/C fields random, the qualifier D random too).
pub fn random_isid() -> [u8; 6] {
    let mut isid = [0u8; 6];
    if getrandom::getrandom(&mut isid).is_err() {
        // No entropy source: fall back to the time and PID, still distinct per session.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        isid[1..5].copy_from_slice(&(nanos ^ std::process::id()).to_be_bytes());
    }
    // T = 10b: random format.
    isid[0] = 0x80 | (isid[0] & 0x3f);
    isid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_up_to_the_cap() {
        let r = RetryPolicy::default();
        assert_eq!(r.delay(0), Duration::from_millis(100));
        assert_eq!(r.delay(1), Duration::from_millis(200));
        assert_eq!(r.delay(4), Duration::from_millis(1600));
        assert_eq!(r.delay(5), Duration::from_secs(2));
        assert_eq!(r.delay(40), Duration::from_secs(2));
    }

    #[test]
    fn isids_are_random_format_and_distinct() {
        let a = random_isid();
        let b = random_isid();
        assert_eq!(a[0] & 0xc0, 0x80);
        assert_ne!(a, b);
    }

    #[test]
    fn chap_offers_md5_first_for_targets_that_misread_chap_a_7() {
        let c = chap("u", Secret::new("secretsecret12"), None);
        assert_eq!(
            c.algorithms,
            vec![
                ChapAlgorithm::Md5,
                ChapAlgorithm::Sha256,
                ChapAlgorithm::Sha3_256
            ]
        );
        assert_eq!(ChapAlgorithm::list(&c.algorithms), "5,7,8");
    }

    #[test]
    fn url_with_user_gets_chap() {
        let url = IscsiUrl::parse("iscsi://u%secretsecret12@h/iqn.x:y/0").unwrap();
        let c = SessionConfig::from_url(&url);
        let chap = c.chap.unwrap();
        assert_eq!(chap.user, "u");
        assert_eq!(chap.secret, Secret::new("secretsecret12"));
        assert!(
            SessionConfig::from_url(&IscsiUrl::parse("iscsi://h/iqn.x:y/0").unwrap())
                .chap
                .is_none()
        );
    }
}
