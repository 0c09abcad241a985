//! A target and an initiator login machine wired back to back in memory
//! (in the manner of quinn-proto's `tests/util.rs`), with every PDU header
//! going through `Pdu::emit` and `Pdu::parse` so the bits on the wire are
//! exercised too.
#![allow(dead_code)]

use isoe_wire::chap::{ChallengeLog, ChapAlgorithm, Secret};
use isoe_wire::login::{
    Admission, AuthPolicy, InitiatorChap, InitiatorLogin, InitiatorLoginConfig,
    InitiatorLoginError, InitiatorStep, LoginFailure, LoginOutcome, LoginPolicy, Negotiated,
    TargetLogin, TargetLoginConfig,
};
use isoe_wire::negotiate::{LocalParams, SessionType};
use isoe_wire::pdu::{login_status, LoginRequest, LoginResponse};
use isoe_wire::{Pdu, BHS_LEN};
use std::cell::RefCell;
use std::rc::Rc;

pub const TARGET: &str = "iqn.2026-11.test:tgt";
pub const OTHER_TARGET: &str = "iqn.2026-11.test:other";
pub const INITIATOR: &str = "iqn.2026-11.test:init";

/// One target the test policy knows.
#[derive(Clone)]
pub struct TestTarget {
    pub name: String,
    pub alias: Option<String>,
    /// None: every initiator may log in.
    pub allowed: Option<Vec<String>>,
    pub auth: AuthPolicy,
    pub overrides: Option<TargetLoginConfig>,
}

/// A policy over a list of targets, like the target crate's registry.
#[derive(Clone)]
pub struct TestPolicy {
    pub targets: Vec<TestTarget>,
    pub discovery_auth: AuthPolicy,
    /// Issued challenges, shared by every login of this policy (and its
    /// clones), when the test wants replay and reflection checks.
    pub challenges: Option<Rc<RefCell<ChallengeLog>>>,
}

impl TestPolicy {
    /// One open target, `TARGET`, alias "disk", no authentication.
    pub fn open() -> TestPolicy {
        TestPolicy {
            targets: vec![TestTarget {
                name: TARGET.into(),
                alias: Some("disk".into()),
                allowed: None,
                auth: AuthPolicy::None,
                overrides: None,
            }],
            discovery_auth: AuthPolicy::None,
            challenges: None,
        }
    }

    /// This policy keeping a log of issued challenges, as the target crate does.
    pub fn logging_challenges(mut self) -> TestPolicy {
        self.challenges = Some(Rc::new(RefCell::new(ChallengeLog::default())));
        self
    }

    /// `TARGET` requiring `auth`.
    pub fn with_auth(auth: AuthPolicy) -> TestPolicy {
        let mut p = TestPolicy::open();
        p.targets[0].auth = auth;
        p
    }
}

impl LoginPolicy for TestPolicy {
    fn admit(
        &self,
        session_type: SessionType,
        initiator_name: &str,
        target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure> {
        if session_type == SessionType::Discovery {
            return Ok(Admission {
                target_alias: None,
                auth: self.discovery_auth.clone(),
                overrides: None,
            });
        }
        let name = target_name.expect("the login machine checks TargetName before asking");
        let Some(t) = self.targets.iter().find(|t| t.name == name) else {
            return Err(LoginFailure::initiator(
                login_status::NOT_FOUND,
                format!("no target named {name}"),
            ));
        };
        if let Some(allowed) = &t.allowed {
            if !allowed.iter().any(|a| a == initiator_name) {
                return Err(LoginFailure::initiator(
                    login_status::AUTHORIZATION_FAILURE,
                    format!("{initiator_name} is not in the ACL of {name}"),
                ));
            }
        }
        Ok(Admission {
            target_alias: t.alias.clone(),
            auth: t.auth.clone(),
            overrides: t.overrides.clone(),
        })
    }

    fn record_challenge(&self, challenge: &[u8]) -> bool {
        match &self.challenges {
            Some(log) => log.borrow_mut().insert(challenge),
            None => true,
        }
    }

    fn is_own_challenge(&self, challenge: &[u8]) -> bool {
        self.challenges
            .as_ref()
            .is_some_and(|log| log.borrow().contains(challenge))
    }
}

/// CHAP required, with the given algorithms, optionally mutual.
pub fn chap_policy(algorithms: Vec<ChapAlgorithm>, mutual: bool) -> AuthPolicy {
    AuthPolicy::Chap {
        initiator_user: "alice".into(),
        initiator_secret: Secret::from("alice-secret-12"),
        mutual: mutual.then(|| ("tgt".to_string(), Secret::from("target-secret-34"))),
        algorithms,
    }
}

/// The initiator's side of `chap_policy`.
pub fn chap_credentials(algorithms: Vec<ChapAlgorithm>, mutual: bool) -> InitiatorChap {
    InitiatorChap {
        user: "alice".into(),
        secret: Secret::from("alice-secret-12"),
        mutual: mutual.then(|| ("tgt".to_string(), Secret::from("target-secret-34"))),
        algorithms,
    }
}

/// A normal-session login to `TARGET`, no CHAP, RFC defaults but MRDSL 65536.
pub fn initiator_config() -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        initiator_name: INITIATOR.into(),
        initiator_alias: Some("host1".into()),
        target_name: Some(TARGET.into()),
        session_type: SessionType::Normal,
        isid: [0x80, 0x12, 0x34, 0x56, 0x00, 0x01],
        tsih: 0,
        cid: 7,
        initiator_task_tag: 0x0000_1000,
        cmd_sn: 1,
        params: LocalParams {
            max_recv_data_segment_length: 65_536,
            ..LocalParams::default()
        },
        chap: None,
    }
}

/// Deterministic "randomness" for step `n`.
pub fn random(n: u32) -> [u8; 32] {
    let mut r = [0u8; 32];
    for (i, b) in r.iter_mut().enumerate() {
        *b = (n as u8)
            .wrapping_mul(31)
            .wrapping_add(i as u8)
            .wrapping_mul(17);
    }
    r
}

/// Emits a request header to its 48 bytes and parses it back.
pub fn wire_request(req: &LoginRequest, data_len: usize) -> LoginRequest {
    let mut raw = [0u8; BHS_LEN];
    Pdu::LoginRequest(*req).emit(0, data_len as u32, &mut raw);
    assert_eq!(raw[0], 0x43, "Login Request opcode with the immediate bit");
    match Pdu::parse(&raw).expect("our own requests parse") {
        Pdu::LoginRequest(back) => back,
        other => panic!("parsed as {other:?}"),
    }
}

/// Emits a response header to its 48 bytes and parses it back.
pub fn wire_response(resp: &LoginResponse, data_len: usize) -> LoginResponse {
    let mut raw = [0u8; BHS_LEN];
    Pdu::LoginResponse(*resp).emit(0, data_len as u32, &mut raw);
    assert_eq!(raw[0], 0x23);
    match Pdu::parse(&raw).expect("our own responses parse") {
        Pdu::LoginResponse(back) => back,
        other => panic!("parsed as {other:?}"),
    }
}

/// One request and its response, as they crossed the wire.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub request: LoginRequest,
    pub request_data: Vec<u8>,
    pub response: LoginResponse,
    pub response_data: Vec<u8>,
}

impl Exchange {
    /// The request text with NULs shown as '|'.
    pub fn request_text(&self) -> String {
        String::from_utf8_lossy(&self.request_data).replace('\0', "|")
    }

    /// The response text with NULs shown as '|'.
    pub fn response_text(&self) -> String {
        String::from_utf8_lossy(&self.response_data).replace('\0', "|")
    }
}

/// How a pair run ended.
#[derive(Debug)]
pub enum End {
    /// Both sides reached full feature phase.
    Complete {
        target: Box<Negotiated>,
        initiator: Box<Negotiated>,
        tsih: u16,
    },
    /// The target refused; the initiator's view of it.
    TargetRefused {
        failure: LoginFailure,
        initiator: InitiatorLoginError,
    },
    /// The initiator gave up while the target was still willing.
    InitiatorFailed(InitiatorLoginError),
}

impl End {
    /// The two results of a completed login.
    pub fn complete(self) -> (Negotiated, Negotiated, u16) {
        match self {
            End::Complete {
                target,
                initiator,
                tsih,
            } => (*target, *initiator, tsih),
            other => panic!("login did not complete: {other:?}"),
        }
    }

    /// The target's failure and the initiator's error.
    pub fn refused(self) -> (LoginFailure, InitiatorLoginError) {
        match self {
            End::TargetRefused { failure, initiator } => (failure, initiator),
            other => panic!("the target did not refuse: {other:?}"),
        }
    }
}

/// A target login and an initiator login talking to each other.
pub struct Pair {
    pub target: TargetLogin,
    pub initiator: InitiatorLogin,
    pub policy: TestPolicy,
    pub transcript: Vec<Exchange>,
    stat_sn: u32,
}

impl Pair {
    pub fn new(
        target_config: TargetLoginConfig,
        policy: TestPolicy,
        initiator_config: InitiatorLoginConfig,
    ) -> Pair {
        Pair {
            target: TargetLogin::new(target_config),
            initiator: InitiatorLogin::new(initiator_config, random(1000)),
            policy,
            transcript: Vec::new(),
            stat_sn: 0x100,
        }
    }

    /// Runs the login to its end (bounded).
    pub fn run(&mut self) -> End {
        let mut step = self.initiator.start();
        for n in 0..100 {
            let (request, data) = match step {
                InitiatorStep::Send { request, data } => (request, data),
                InitiatorStep::Complete { .. } => unreachable!("handled below"),
            };
            assert!(data.len() <= 8192, "login PDUs carry at most 8192 bytes");
            let request = wire_request(&request, data.len());
            let out = self
                .target
                .handle_request(&request, &data, &self.policy, &random(n));
            assert!(out.data.len() <= 8192);
            let mut response = out.response;
            // What the target crate fills: sequence numbers, and the TSIH of a new session.
            response.stat_sn = self.stat_sn;
            self.stat_sn += 1;
            response.exp_cmd_sn = request.cmd_sn;
            response.max_cmd_sn = request.cmd_sn;
            if let LoginOutcome::Complete(n) = &out.outcome {
                if n.tsih_requested == 0 {
                    response.tsih = 0x0042;
                }
            }
            let response = wire_response(&response, out.data.len());
            self.transcript.push(Exchange {
                request,
                request_data: data,
                response,
                response_data: out.data.clone(),
            });
            match self.initiator.handle_response(&response, &out.data) {
                Ok(InitiatorStep::Complete { negotiated, tsih }) => {
                    let LoginOutcome::Complete(target) = out.outcome else {
                        panic!("initiator completed but the target says {:?}", out.outcome);
                    };
                    return End::Complete {
                        target: Box::new(target),
                        initiator: Box::new(negotiated),
                        tsih,
                    };
                }
                Ok(next) => {
                    assert_eq!(
                        out.outcome,
                        LoginOutcome::Continue,
                        "target ended but the initiator goes on"
                    );
                    assert_eq!(
                        match &next {
                            InitiatorStep::Send { request, .. } => request.exp_stat_sn,
                            _ => unreachable!(),
                        },
                        response.stat_sn + 1,
                        "ExpStatSN follows the last StatSN"
                    );
                    step = next;
                }
                Err(initiator) => {
                    return match out.outcome {
                        LoginOutcome::Failed(failure) => End::TargetRefused { failure, initiator },
                        _ => End::InitiatorFailed(initiator),
                    };
                }
            }
        }
        panic!("login did not end within 100 exchanges");
    }
}
