//! Fuzzes the target's login state machine (RFC 7143 §6.3, §11.12, §11.13)
//! with a sequence of Login Requests derived from the input, under a policy
//! with no authentication, one-way CHAP, mutual CHAP, or CHAP on discovery.
//!
//! Input layout: one byte picks the policy; then records, each a 4-byte
//! header (flags: T, C, CSG, NSG; misc: TSIH, Version-min, field changes;
//! a big-endian data length) followed by that many bytes of text.
//!
//! Random bytes never hold a right CHAP response, so the harness computes
//! one: the text `CHAP_R=*` is replaced by the correct response to the last
//! challenge the target sent. That lets the fuzzer get past authentication,
//! and gives the strongest check here: a login that requires CHAP may reach
//! full feature phase only after such a correct response.
//!
//! Also checked: the policy is asked only about well-formed iSCSI names
//! (`isoe_wire::name::validate`, once case is folded), and every failure's
//! reason is free of control characters, so that it can go into a log line
//! as it is.
#![no_main]

use isoe_wire::chap::{ChapAlgorithm, Secret};
use isoe_wire::login::{
    Admission, AuthPolicy, LoginFailure, LoginOutcome, LoginPolicy, TargetLogin, TargetLoginConfig,
    LOGIN_DATA_SEGMENT_MAX_BYTES,
};
use isoe_wire::name::validate;
use isoe_wire::negotiate::SessionType;
use isoe_wire::pdu::{login_status, LoginRequest};
use isoe_wire::text::{decode_binary, decode_number, encode_hex, parse_pairs};
use libfuzzer_sys::fuzz_target;

const TARGET: &str = "iqn.2026-11.test:tgt";
const USER: &str = "alice";
const SECRET: &str = "alice-secret-12";
const PLACEHOLDER: &[u8] = b"CHAP_R=*";

struct Policy {
    normal: AuthPolicy,
    discovery: AuthPolicy,
}

impl LoginPolicy for Policy {
    fn admit(
        &self,
        session_type: SessionType,
        initiator_name: &str,
        target_name: Option<&str>,
    ) -> Result<Admission, LoginFailure> {
        // The login machine refuses malformed names before asking; upper
        // case passes, as a name its initiator did not fold (RFC 3722).
        for name in std::iter::once(initiator_name).chain(target_name) {
            assert_eq!(validate(&name.to_ascii_lowercase()), Ok(()), "{name:?}");
        }
        if session_type == SessionType::Discovery {
            return Ok(Admission {
                target_alias: None,
                auth: self.discovery.clone(),
                overrides: None,
            });
        }
        if target_name != Some(TARGET) {
            return Err(LoginFailure::initiator(
                login_status::NOT_FOUND,
                "no such target",
            ));
        }
        Ok(Admission {
            target_alias: Some("disk".into()),
            auth: self.normal.clone(),
            overrides: None,
        })
    }
}

fn chap(mutual: bool, algorithms: Vec<ChapAlgorithm>) -> AuthPolicy {
    AuthPolicy::Chap {
        initiator_user: USER.into(),
        initiator_secret: Secret::from(SECRET),
        mutual: mutual.then(|| ("tgt".to_string(), Secret::from("target-secret-34"))),
        algorithms,
    }
}

fn policy(selector: u8) -> Policy {
    let algorithms = match (selector >> 2) & 3 {
        0 => vec![ChapAlgorithm::Md5],
        1 => vec![ChapAlgorithm::Sha256, ChapAlgorithm::Md5],
        2 => vec![ChapAlgorithm::Sha3_256],
        _ => vec![
            ChapAlgorithm::Md5,
            ChapAlgorithm::Sha256,
            ChapAlgorithm::Sha3_256,
        ],
    };
    match selector & 3 {
        0 => Policy {
            normal: AuthPolicy::None,
            discovery: AuthPolicy::None,
        },
        1 => Policy {
            normal: chap(false, algorithms),
            discovery: AuthPolicy::None,
        },
        2 => Policy {
            normal: chap(true, algorithms),
            discovery: AuthPolicy::None,
        },
        _ => Policy {
            normal: AuthPolicy::None,
            discovery: chap(false, algorithms),
        },
    }
}

/// The last challenge the target sent: algorithm, identifier, challenge.
#[derive(Default)]
struct SeenChallenge {
    algorithm: Option<ChapAlgorithm>,
    identifier: Option<u8>,
    challenge: Option<Vec<u8>>,
}

impl SeenChallenge {
    fn update(&mut self, text: &[u8]) {
        let Ok(pairs) = parse_pairs(text) else {
            return;
        };
        for (key, value) in pairs {
            match key {
                "CHAP_A" => {
                    self.algorithm = decode_number(value).ok().and_then(ChapAlgorithm::from_code)
                }
                "CHAP_I" => self.identifier = decode_number(value).ok().map(|i| i as u8),
                "CHAP_C" => self.challenge = decode_binary(value).ok(),
                _ => {}
            }
        }
    }

    fn response(&self) -> Option<String> {
        let algorithm = self.algorithm?;
        let response = algorithm.response(
            self.identifier?,
            &Secret::from(SECRET),
            self.challenge.as_ref()?,
        );
        Some(encode_hex(&response))
    }
}

/// `data` with every `CHAP_R=*` replaced by the right response, if a
/// challenge was seen; and whether a replacement was made.
fn substitute(data: &[u8], seen: &SeenChallenge) -> (Vec<u8>, bool) {
    let Some(response) = seen.response() else {
        return (data.to_vec(), false);
    };
    let mut out = Vec::with_capacity(data.len() + response.len());
    let mut replaced = false;
    let mut at = 0;
    while at < data.len() {
        if data[at..].starts_with(PLACEHOLDER) {
            out.extend_from_slice(b"CHAP_R=");
            out.extend_from_slice(response.as_bytes());
            at += PLACEHOLDER.len();
            replaced = true;
        } else {
            out.push(data[at]);
            at += 1;
        }
    }
    (out, replaced)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let policy = policy(selector);
    let mut login = TargetLogin::new(TargetLoginConfig::default());
    let mut seen = SeenChallenge::default();
    let mut authenticated = false;
    let mut ended = false;
    let mut n = 0u8;
    while rest.len() >= 4 {
        let (flags, misc) = (rest[0], rest[1]);
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]])).min(rest.len() - 4);
        let raw = &rest[4..4 + len];
        rest = &rest[4 + len..];
        let changed = misc & 8 != 0;
        let req = LoginRequest {
            transit: flags & 0x80 != 0,
            continue_bit: flags & 0x40 != 0,
            csg: (flags >> 2) & 3,
            nsg: flags & 3,
            version_max: 0,
            version_min: (misc >> 1) & 3,
            isid: [0x80, 0, 0, 0, 0, if changed { 2 } else { 1 }],
            tsih: u16::from(misc & 1),
            initiator_task_tag: if misc & 0x10 != 0 { 9 } else { 7 },
            cid: 1,
            cmd_sn: u32::from(n),
            exp_stat_sn: 0,
        };
        let (text, replaced) = substitute(raw, &seen);
        authenticated |= replaced;
        n = n.wrapping_add(1);
        let random = [n; 32];
        let step = login.handle_request(&req, &text, &policy, &random);

        let r = &step.response;
        assert_eq!(r.isid, req.isid);
        assert_eq!(r.initiator_task_tag, req.initiator_task_tag);
        assert!(step.data.len() <= LOGIN_DATA_SEGMENT_MAX_BYTES);
        assert!(!(r.transit && r.continue_bit), "T and C both set");
        match &step.outcome {
            LoginOutcome::Failed(f) => {
                assert_ne!(f.status_class, login_status::SUCCESS);
                assert_eq!(
                    (r.status_class, r.status_detail),
                    (f.status_class, f.status_detail)
                );
                assert!(step.data.is_empty() && !r.transit);
                assert!(
                    !f.reason.chars().any(char::is_control),
                    "a failure reason unfit for a log line: {:?}",
                    f.reason
                );
                ended = true;
            }
            LoginOutcome::Continue => {
                assert!(!ended, "a login went on after it ended");
                assert_eq!(r.status_class, login_status::SUCCESS);
            }
            LoginOutcome::Complete(negotiated) => {
                assert!(!ended, "a login completed twice or after failing");
                assert_eq!(r.status_class, login_status::SUCCESS);
                assert!(r.transit);
                let chap_required = match negotiated.session.session_type {
                    SessionType::Discovery => &policy.discovery,
                    SessionType::Normal => &policy.normal,
                };
                if matches!(chap_required, AuthPolicy::Chap { .. }) {
                    assert!(authenticated, "full feature phase without a CHAP response");
                }
                let s = &negotiated.session;
                assert!(s.first_burst_length <= s.max_burst_length);
                let c = &negotiated.connection;
                assert!((512..1 << 24).contains(&c.max_send_data_segment_length));
                ended = true;
            }
        }
        seen.update(&step.data);
    }
});
