//! CHAP (RFC 1994) as iSCSI uses it (RFC 7143 §12.1.3): algorithms, secrets,
//! challenges and the verification of responses.
//!
//! The response is `H(identifier || secret || challenge)`. Algorithms are the
//! IANA "PPP Authentication Algorithms" numbers RFC 7143 §12.1.3 refers to:
//! 5 = MD5 (RFC 1994), 7 = SHA-256, 8 = SHA3-256 (registered by IANA in 2020
//! for iSCSI; no RFC defines them). SHA-1 (6) is not offered.
//!
//! Randomness comes from the caller; secrets never appear in `Debug` output
//! or error messages.

use crate::keys::name;
use crate::text::{decode_binary, decode_number, encode_hex, push_pair};
use md5::Md5;
use sha2::{Digest as _, Sha256};
use sha3::Sha3_256;
use std::fmt;
use thiserror::Error;

/// RFC 7143 §12.1.3: a CHAP challenge is at most 1024 bytes.
pub const CHALLENGE_MAX_BYTES: usize = 1024;
/// The shortest challenge we accept or send. isoe's rule, stricter than
/// the RFC's: a challenge is at least as long as the hash (16 bytes for MD5,
/// 32 for SHA-256 and SHA3-256), so it carries as much entropy as the response.
pub const CHALLENGE_MIN_BYTES: usize = 16;
/// The length of the challenges we send: the longest digest we support.
pub const CHALLENGE_SEND_BYTES: usize = 32;
/// RFC 7143 §9.2.1: CHAP secrets SHOULD be at least 96 bits (12 bytes).
pub const SECRET_MIN_BYTES: usize = 12;

/// A CHAP algorithm (CHAP_A values, IANA PPP Authentication Algorithms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChapAlgorithm {
    /// 5: MD5 (RFC 1994), the one every implementation supports.
    Md5,
    /// 7: SHA-256.
    Sha256,
    /// 8: SHA3-256.
    Sha3_256,
}

impl ChapAlgorithm {
    /// All algorithms we implement, strongest first.
    pub const ALL: [ChapAlgorithm; 3] = [
        ChapAlgorithm::Sha3_256,
        ChapAlgorithm::Sha256,
        ChapAlgorithm::Md5,
    ];

    /// The CHAP_A number.
    pub fn code(self) -> u8 {
        match self {
            ChapAlgorithm::Md5 => 5,
            ChapAlgorithm::Sha256 => 7,
            ChapAlgorithm::Sha3_256 => 8,
        }
    }

    /// The algorithm for a CHAP_A number, if we implement it.
    pub fn from_code(code: u64) -> Option<ChapAlgorithm> {
        match code {
            5 => Some(ChapAlgorithm::Md5),
            7 => Some(ChapAlgorithm::Sha256),
            8 => Some(ChapAlgorithm::Sha3_256),
            _ => None,
        }
    }

    /// Its name as people write it: `MD5`, `SHA-256`, `SHA3-256`.
    pub fn name(self) -> &'static str {
        match self {
            ChapAlgorithm::Md5 => "MD5",
            ChapAlgorithm::Sha256 => "SHA-256",
            ChapAlgorithm::Sha3_256 => "SHA3-256",
        }
    }

    /// The algorithm named `text` (see [`ChapAlgorithm::name`]; case does
    /// not matter) or numbered `text` (its CHAP_A value), if we implement it.
    pub fn from_name(text: &str) -> Option<ChapAlgorithm> {
        ChapAlgorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(text) || a.code().to_string() == text)
    }

    /// The length of its hash (= of a CHAP_R), in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            ChapAlgorithm::Md5 => 16,
            ChapAlgorithm::Sha256 | ChapAlgorithm::Sha3_256 => 32,
        }
    }

    /// RFC 1994 §4.1: the response is the hash of identifier, secret and challenge.
    pub fn response(self, identifier: u8, secret: &Secret, challenge: &[u8]) -> Vec<u8> {
        fn hash<D: sha2::Digest>(identifier: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
            let mut h = D::new();
            h.update([identifier]);
            h.update(secret);
            h.update(challenge);
            h.finalize().to_vec()
        }
        match self {
            ChapAlgorithm::Md5 => hash::<Md5>(identifier, &secret.0, challenge),
            ChapAlgorithm::Sha256 => hash::<Sha256>(identifier, &secret.0, challenge),
            ChapAlgorithm::Sha3_256 => hash::<Sha3_256>(identifier, &secret.0, challenge),
        }
    }

    /// The first algorithm of a CHAP_A list (an offer, in its order) that is
    /// also in `ours` (RFC 7143 §6.2.1 list negotiation). Non-numbers are skipped.
    pub fn choose(offer: &str, ours: &[ChapAlgorithm]) -> Option<ChapAlgorithm> {
        offer
            .split(',')
            .filter_map(|v| decode_number(v).ok())
            .filter_map(ChapAlgorithm::from_code)
            .find(|a| ours.contains(a))
    }

    /// A CHAP_A list value for `algorithms`, in their order.
    pub fn list(algorithms: &[ChapAlgorithm]) -> String {
        algorithms
            .iter()
            .map(|a| a.code().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A CHAP secret. Its bytes are shown nowhere and wiped on drop.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret from its bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }

    /// Its length in bytes (RFC 7143 §9.2.1 asks for at least [`SECRET_MIN_BYTES`]).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for an empty secret (never acceptable).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Compares two secrets in time independent of where they differ.
    pub fn ct_eq(&self, other: &Secret) -> bool {
        constant_time_eq(&self.0, &other.0)
    }
}

impl PartialEq for Secret {
    /// Constant-time, so comparing secrets leaks nothing through timing.
    fn eq(&self, other: &Secret) -> bool {
        self.ct_eq(other)
    }
}

impl Eq for Secret {}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.as_bytes().to_vec())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.iter_mut().for_each(|b| *b = 0);
        // Keeps the wipe from being optimised away as a dead store.
        std::hint::black_box(&self.0);
    }
}

/// A CHAP user name and its secret.
#[derive(Clone)]
pub struct Credentials {
    /// The CHAP_N name.
    pub user: String,
    /// The shared secret.
    pub secret: Secret,
}

impl Credentials {
    /// Credentials from a user name and secret.
    pub fn new(user: impl Into<String>, secret: impl Into<Secret>) -> Credentials {
        Credentials {
            user: user.into(),
            secret: secret.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("secret", &self.secret)
            .finish()
    }
}

/// Why a CHAP exchange failed. Messages name the rule, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChapError {
    /// No CHAP_A value offered is one we accept.
    #[error("none of the offered CHAP_A algorithms {offered:?} is enabled")]
    NoCommonAlgorithm {
        /// The offered list.
        offered: String,
    },
    /// CHAP_A named an algorithm we did not offer or do not implement.
    #[error("CHAP_A={value:?} is not one of the algorithms offered")]
    UnexpectedAlgorithm {
        /// The value received.
        value: String,
    },
    /// CHAP_I is not a number from 0 to 255.
    #[error("CHAP_I={value:?} is not a number from 0 to 255")]
    BadIdentifier {
        /// The value received.
        value: String,
    },
    /// A CHAP_C or CHAP_R value is not a `0x`/`0b` binary value.
    #[error("{key} is not a 0x/0b binary value")]
    BadEncoding {
        /// CHAP_C or CHAP_R.
        key: &'static str,
    },
    /// A challenge outside the admissible lengths (RFC 7143 §12.1.3).
    #[error("CHAP_C of {len} bytes; {min}..={max} required")]
    ChallengeLength {
        /// The challenge's length.
        len: usize,
        /// The smallest admissible length.
        min: usize,
        /// The largest admissible length.
        max: usize,
    },
    /// A required CHAP key is missing from the text.
    #[error("{key} missing")]
    Missing {
        /// The missing key.
        key: &'static str,
    },
    /// CHAP_N is not the user configured for this login.
    #[error("CHAP_N {name:?} is not the configured user")]
    WrongName {
        /// The name received (not a secret).
        name: String,
    },
    /// CHAP_R does not match the challenge and the configured secret.
    #[error("CHAP_R does not verify for user {name:?}")]
    WrongResponse {
        /// The name the response was for.
        name: String,
    },
    /// The peer sent back our own challenge (RFC 7143 §9.2.1: reflection).
    #[error("the peer's CHAP_C repeats our own challenge (reflection)")]
    ReflectedChallenge,
    /// A challenge we were about to issue was issued before (RFC 1994 §2.3):
    /// a recorded response to it could be replayed.
    #[error(
        "the challenge drawn repeats one issued before (replay risk); the random source is suspect"
    )]
    RepeatedChallenge,
    /// A response arrived for a challenge already answered.
    #[error("a second CHAP response for the same identifier and challenge")]
    ChallengeReused,
}

/// A challenge we issued, and its single verification (RFC 1994 §4.1).
#[derive(Clone)]
pub struct Challenge {
    algorithm: ChapAlgorithm,
    identifier: u8,
    challenge: Vec<u8>,
    answered: bool,
}

impl fmt::Debug for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Challenge")
            .field("algorithm", &self.algorithm)
            .field("identifier", &self.identifier)
            .field("challenge_len", &self.challenge.len())
            .field("answered", &self.answered)
            .finish()
    }
}

impl Challenge {
    /// A challenge with a chosen identifier and value (16..=1024 bytes and at
    /// least the digest length).
    pub fn new(
        algorithm: ChapAlgorithm,
        identifier: u8,
        challenge: Vec<u8>,
    ) -> Result<Challenge, ChapError> {
        check_challenge_len(algorithm, challenge.len())?;
        Ok(Challenge {
            algorithm,
            identifier,
            challenge,
            answered: false,
        })
    }

    /// A fresh challenge from 32 bytes of the caller's randomness: identifier
    /// and a 32-byte value are drawn from it with SHA-256 under distinct labels,
    /// so they are independent of each other.
    pub fn from_random(algorithm: ChapAlgorithm, random: &[u8; 32]) -> Challenge {
        let draw = |label: &[u8]| -> [u8; 32] {
            let mut h = Sha256::new();
            h.update(label);
            h.update(random);
            h.finalize().into()
        };
        let identifier = draw(b"isoe chap identifier")[0];
        let challenge = draw(b"isoe chap challenge").to_vec();
        debug_assert_eq!(challenge.len(), CHALLENGE_SEND_BYTES);
        Challenge {
            algorithm,
            identifier,
            challenge,
            answered: false,
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> ChapAlgorithm {
        self.algorithm
    }

    /// CHAP_I.
    pub fn identifier(&self) -> u8 {
        self.identifier
    }

    /// CHAP_C, raw.
    pub fn value(&self) -> &[u8] {
        &self.challenge
    }

    /// Writes `CHAP_I=<id>` and `CHAP_C=0x…` (RFC 7143 §12.1.3).
    pub fn write(&self, out: &mut Vec<u8>) {
        push_pair(out, name::CHAP_I, &self.identifier.to_string());
        push_pair(out, name::CHAP_C, &encode_hex(&self.challenge));
    }

    /// True when a challenge received from the peer equals ours: RFC 7143
    /// §9.2.1 forbids reusing the other direction's challenge; responders check.
    pub fn is_reflected_by(&self, peer_challenge: &[u8]) -> bool {
        constant_time_eq(&self.challenge, peer_challenge)
    }

    /// Checks CHAP_N and CHAP_R against the expected user and secret. A
    /// challenge verifies at most one response, right or wrong.
    pub fn verify(
        &mut self,
        user: &str,
        secret: &Secret,
        name: &str,
        response_value: &str,
    ) -> Result<(), ChapError> {
        if std::mem::replace(&mut self.answered, true) {
            return Err(ChapError::ChallengeReused);
        }
        let response = decode_binary(response_value)
            .map_err(|_| ChapError::BadEncoding { key: name::CHAP_R })?;
        let expected_response = self
            .algorithm
            .response(self.identifier, secret, &self.challenge);
        // Both comparisons run whatever the first gives.
        let name_ok = constant_time_eq(name.as_bytes(), user.as_bytes());
        let response_ok = constant_time_eq(&response, &expected_response);
        match (name_ok, response_ok) {
            (true, true) => Ok(()),
            (false, _) => Err(ChapError::WrongName {
                name: name.to_string(),
            }),
            (true, false) => Err(ChapError::WrongResponse {
                name: name.to_string(),
            }),
        }
    }
}

fn check_challenge_len(algorithm: ChapAlgorithm, len: usize) -> Result<(), ChapError> {
    let min = CHALLENGE_MIN_BYTES.max(algorithm.digest_len());
    if len < min || len > CHALLENGE_MAX_BYTES {
        return Err(ChapError::ChallengeLength {
            len,
            min,
            max: CHALLENGE_MAX_BYTES,
        });
    }
    Ok(())
}

/// The challenges a target has issued recently, so that none is issued twice
/// and none comes back from an initiator as its own (RFC 1994 §2.3: each
/// challenge value should be unique, since a repeated one lets a recorded
/// response be replayed; RFC 7143 §9.2.1: a challenge reflected to the
/// side that issued it makes that side compute the answer for the peer).
///
/// Bounded: the oldest entries are forgotten once [`ChallengeLog::capacity`]
/// are kept. Values are stored as SHA-256 fingerprints, never in the clear.
#[derive(Clone)]
pub struct ChallengeLog {
    seen: std::collections::HashSet<[u8; 32]>,
    order: std::collections::VecDeque<[u8; 32]>,
    capacity: usize,
}

impl fmt::Debug for ChallengeLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChallengeLog")
            .field("len", &self.order.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// How many issued challenges a [`ChallengeLog`] remembers by default: far
/// more than the logins that can be in flight at once.
pub const CHALLENGE_LOG_CAPACITY: usize = 4096;

impl Default for ChallengeLog {
    fn default() -> Self {
        ChallengeLog::new(CHALLENGE_LOG_CAPACITY)
    }
}

impl ChallengeLog {
    /// A log remembering up to `capacity` challenges (at least 1).
    pub fn new(capacity: usize) -> ChallengeLog {
        let capacity = capacity.max(1);
        ChallengeLog {
            seen: std::collections::HashSet::with_capacity(capacity.min(CHALLENGE_LOG_CAPACITY)),
            order: std::collections::VecDeque::with_capacity(capacity.min(CHALLENGE_LOG_CAPACITY)),
            capacity,
        }
    }

    fn fingerprint(challenge: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"isoe chap challenge log");
        h.update(challenge);
        h.finalize().into()
    }

    /// Records a challenge about to be issued. False when it was issued
    /// before (and is still remembered): it must not go out again.
    pub fn insert(&mut self, challenge: &[u8]) -> bool {
        let print = ChallengeLog::fingerprint(challenge);
        if !self.seen.insert(print) {
            return false;
        }
        self.order.push_back(print);
        if self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        debug_assert_eq!(self.seen.len(), self.order.len());
        true
    }

    /// True when `challenge` is one this log recorded (and still remembers).
    pub fn contains(&self, challenge: &[u8]) -> bool {
        self.seen.contains(&ChallengeLog::fingerprint(challenge))
    }

    /// How many challenges are remembered now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The most challenges remembered at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Decodes a received CHAP_I and CHAP_C pair for `algorithm`, checking the
/// identifier range and the challenge length.
pub fn parse_challenge(
    algorithm: ChapAlgorithm,
    identifier: &str,
    challenge: &str,
) -> Result<(u8, Vec<u8>), ChapError> {
    let id = decode_number(identifier)
        .ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| ChapError::BadIdentifier {
            value: identifier.to_string(),
        })?;
    let value =
        decode_binary(challenge).map_err(|_| ChapError::BadEncoding { key: name::CHAP_C })?;
    check_challenge_len(algorithm, value.len())?;
    Ok((id, value))
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        decode_binary(&format!("0x{s}")).unwrap()
    }

    #[test]
    fn responses_match_hand_computed_vectors() {
        // Computed with Python's hashlib over bytes([7]) + b"secretsecret" + bytes(range(16)).
        let secret = Secret::from("secretsecret");
        let challenge: Vec<u8> = (0u8..16).collect();
        assert_eq!(
            ChapAlgorithm::Md5.response(7, &secret, &challenge),
            hex("6ecf51cbe0f7ac32d9cd952f3fd639c0")
        );
        assert_eq!(
            ChapAlgorithm::Sha256.response(7, &secret, &challenge),
            hex("cf08f83eb6fac1778026846c2914297e19faa06ab011ae8fc9d51a3c10f20a49")
        );
        assert_eq!(
            ChapAlgorithm::Sha3_256.response(7, &secret, &challenge),
            hex("85bd8fa7050229b8748221b7994c5337dca98b37923b96a37e2eb75fc3cf9d15")
        );
    }

    #[test]
    fn codes_round_trip_and_lists_choose_the_first_of_the_offer() {
        for a in ChapAlgorithm::ALL {
            assert_eq!(ChapAlgorithm::from_code(a.code() as u64), Some(a));
        }
        assert_eq!(
            ChapAlgorithm::from_code(6),
            None,
            "SHA-1 is not implemented"
        );
        let ours = [ChapAlgorithm::Md5, ChapAlgorithm::Sha256];
        assert_eq!(
            ChapAlgorithm::choose("8,7,5", &ours),
            Some(ChapAlgorithm::Sha256)
        );
        assert_eq!(
            ChapAlgorithm::choose("x,0x5", &ours),
            Some(ChapAlgorithm::Md5)
        );
        assert_eq!(ChapAlgorithm::choose("8,6", &ours), None);
        assert_eq!(ChapAlgorithm::list(&ChapAlgorithm::ALL), "8,7,5");
        for a in ChapAlgorithm::ALL {
            assert_eq!(ChapAlgorithm::from_name(a.name()), Some(a));
            assert_eq!(ChapAlgorithm::from_name(&a.code().to_string()), Some(a));
        }
        assert_eq!(
            ChapAlgorithm::from_name("sha3-256"),
            Some(ChapAlgorithm::Sha3_256)
        );
        assert_eq!(ChapAlgorithm::from_name("SHA-1"), None);
        assert_eq!(ChapAlgorithm::from_name("6"), None);
    }

    #[test]
    fn a_challenge_verifies_one_response_only() {
        let creds = Credentials::new("alice", "0123456789ab");
        let mut c = Challenge::from_random(ChapAlgorithm::Md5, &[9; 32]);
        let r = ChapAlgorithm::Md5.response(c.identifier(), &creds.secret, c.value());
        assert_eq!(
            c.verify(&creds.user, &creds.secret, "alice", &encode_hex(&r)),
            Ok(())
        );
        assert_eq!(
            c.verify(&creds.user, &creds.secret, "alice", &encode_hex(&r)),
            Err(ChapError::ChallengeReused)
        );
    }

    #[test]
    fn wrong_name_secret_or_encoding_fail() {
        let creds = Credentials::new("alice", "0123456789ab");
        let fresh = || Challenge::from_random(ChapAlgorithm::Sha256, &[1; 32]);
        let c = fresh();
        let good =
            encode_hex(&ChapAlgorithm::Sha256.response(c.identifier(), &creds.secret, c.value()));
        let wrong = encode_hex(&ChapAlgorithm::Sha256.response(
            c.identifier(),
            &Secret::from("wrongwrongwr"),
            c.value(),
        ));
        assert_eq!(
            fresh().verify(&creds.user, &creds.secret, "bob", &good),
            Err(ChapError::WrongName { name: "bob".into() })
        );
        assert_eq!(
            fresh().verify(&creds.user, &creds.secret, "alice", &wrong),
            Err(ChapError::WrongResponse {
                name: "alice".into()
            })
        );
        assert_eq!(
            fresh().verify(&creds.user, &creds.secret, "alice", "nothex"),
            Err(ChapError::BadEncoding { key: "CHAP_R" })
        );
        assert_eq!(
            fresh().verify(&creds.user, &creds.secret, "alice", &good[..good.len() - 2]),
            Err(ChapError::WrongResponse {
                name: "alice".into()
            })
        );
    }

    #[test]
    fn from_random_is_deterministic_and_label_separated() {
        let a = Challenge::from_random(ChapAlgorithm::Md5, &[3; 32]);
        let b = Challenge::from_random(ChapAlgorithm::Md5, &[3; 32]);
        let c = Challenge::from_random(ChapAlgorithm::Md5, &[4; 32]);
        assert_eq!((a.identifier(), a.value()), (b.identifier(), b.value()));
        assert_ne!(a.value(), c.value());
        assert_eq!(a.value().len(), CHALLENGE_SEND_BYTES);
        assert_ne!(a.value(), &[3; 32][..]);
    }

    #[test]
    fn received_challenges_are_checked() {
        let c16 = encode_hex(&[1; 16]);
        assert_eq!(
            parse_challenge(ChapAlgorithm::Md5, "255", &c16),
            Ok((255, vec![1; 16]))
        );
        assert_eq!(
            parse_challenge(ChapAlgorithm::Sha256, "1", &c16),
            Err(ChapError::ChallengeLength {
                len: 16,
                min: 32,
                max: 1024
            })
        );
        assert!(parse_challenge(ChapAlgorithm::Md5, "256", &c16).is_err());
        assert!(parse_challenge(ChapAlgorithm::Md5, "1", &encode_hex(&[1; 1025])).is_err());
        assert_eq!(
            parse_challenge(ChapAlgorithm::Md5, "1", "0bAQEBAQEBAQEBAQEBAQEBAQ=="),
            Ok((1, vec![1; 16]))
        );
        assert_eq!(
            Challenge::new(ChapAlgorithm::Md5, 1, vec![0; 15]).unwrap_err(),
            ChapError::ChallengeLength {
                len: 15,
                min: 16,
                max: 1024
            }
        );
    }

    #[test]
    fn secrets_never_print() {
        let creds = Credentials::new("alice", "hunter2hunter2");
        let shown = format!("{creds:?} {:?}", creds.secret);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"));
        assert!(creds.secret.ct_eq(&Secret::from("hunter2hunter2")));
        assert!(!creds.secret.ct_eq(&Secret::from("hunter2hunter3")));
    }

    #[test]
    fn the_challenge_log_refuses_repeats_and_forgets_the_oldest() {
        let mut log = ChallengeLog::new(2);
        assert!(log.insert(&[1; 32]));
        assert!(!log.insert(&[1; 32]), "a repeat is refused");
        assert!(log.insert(&[2; 32]));
        assert!(log.contains(&[1; 32]) && log.contains(&[2; 32]));
        assert!(!log.contains(&[3; 32]));
        assert!(log.insert(&[3; 32]));
        assert_eq!(log.len(), 2);
        assert!(!log.contains(&[1; 32]), "the oldest is forgotten");
        assert!(log.insert(&[1; 32]));
        assert!(!format!("{log:?}").contains("[1"), "{log:?}");
        assert_eq!(ChallengeLog::default().capacity(), CHALLENGE_LOG_CAPACITY);
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
