//! A target's login policy: who may log in (`allowed_initiators`), what a
//! login must prove (CHAP), and the parameters its sessions negotiate from.
//! The control plane and a reload replace it while sessions run; logins and
//! discovery read it, never the command path.

use crate::config::{ChapConfig, DigestChoice, Params, TargetConfig};
use isoe_wire::login::{AuthPolicy, TargetLoginConfig};
use isoe_wire::negotiate::Digest;

/// Who may log into a target and how its sessions are set up: what the
/// control plane and a reload change while sessions run. Read at login and
/// discovery only, never on the command path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// TargetAlias, if any.
    pub alias: Option<String>,
    /// Initiators allowed to see and log into it (empty: all).
    pub allowed_initiators: Vec<String>,
    /// CHAP required of logins to it, if any.
    pub chap: Option<ChapConfig>,
    /// iSCSI parameters for sessions to it.
    pub params: Params,
}

impl Policy {
    /// True when `initiator` may see and use the target.
    pub fn admits(&self, initiator: &str) -> bool {
        self.allowed_initiators.is_empty() || self.allowed_initiators.iter().any(|a| a == initiator)
    }
}

/// The [`Policy`] a target's configuration asks for.
pub fn policy_of(t: &TargetConfig) -> Policy {
    Policy {
        alias: t.alias.clone(),
        allowed_initiators: t.allowed_initiators.clone(),
        chap: t.chap.clone(),
        params: t.params.clone(),
    }
}

fn digest_list(choices: &[DigestChoice]) -> Vec<Digest> {
    choices
        .iter()
        .map(|c| match c {
            DigestChoice::None => Digest::None,
            DigestChoice::Crc32c => Digest::Crc32c,
        })
        .collect()
}

/// Builds the login settings of a target's sessions from its parameters.
pub fn login_config(params: &Params, portal_group_tag: u16) -> TargetLoginConfig {
    TargetLoginConfig {
        max_recv_data_segment_length: params.max_recv_data_segment_length,
        max_burst_length: params.max_burst_length,
        first_burst_length: params.first_burst_length,
        max_connections: params.max_connections,
        max_outstanding_r2t: params.max_outstanding_r2t,
        initial_r2t: params.initial_r2t,
        immediate_data: params.immediate_data,
        header_digest: digest_list(&params.header_digest),
        data_digest: digest_list(&params.data_digest),
        default_time2wait: 2,
        default_time2retain: 0,
        target_portal_group_tag: portal_group_tag,
        error_recovery_level: 0,
    }
}

/// What a login must prove under `chap` (RFC 7143 §12.1.3).
pub fn auth_policy(chap: Option<&ChapConfig>) -> AuthPolicy {
    match chap {
        None => AuthPolicy::None,
        Some(c) => AuthPolicy::Chap {
            initiator_user: c.user.clone(),
            initiator_secret: c.secret.clone(),
            mutual: c.mutual.clone(),
            algorithms: c.algorithms.clone(),
        },
    }
}
