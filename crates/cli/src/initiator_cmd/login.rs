//! From the command line to a session configuration: the URL, CHAP from
//! flags, environment and URL, digests; and what a failed login tells the user.

use super::{DigestArgs, Failure, LoginArgs};
use crate::chap_args;
use isoe_initiator::{InitiatorError, IscsiUrl, SessionConfig};
use isoe_wire::chap::Secret;
use isoe_wire::login::InitiatorChap;
use isoe_wire::negotiate::Digest;
use std::time::Duration;

pub(super) fn parse_url(text: &str) -> Result<IscsiUrl, Failure> {
    IscsiUrl::parse(text).map_err(|e| Failure::Usage(e.to_string()))
}

pub(super) fn require_lun(url: &IscsiUrl) -> Result<u16, Failure> {
    url.lun.ok_or_else(|| {
        Failure::Usage(format!(
            "{url} names no LUN: add /LUN after the target name, e.g. {url}/0"
        ))
    })
}

/// CHAP from the flags, the environment and the URL's user part (see
/// [`crate::chap_args`], which `isoe bench` shares).
pub(super) fn chap_config(
    url_user: Option<&str>,
    url_password: Option<&Secret>,
    args: &LoginArgs,
) -> Result<Option<InitiatorChap>, Failure> {
    chap_args::chap_config(url_user, url_password, &args.chap).map_err(Failure::Usage)
}

pub(super) fn session_config(
    url: &IscsiUrl,
    login: &LoginArgs,
    digests: &DigestArgs,
) -> Result<SessionConfig, Failure> {
    let mut config = SessionConfig::from_url(url);
    config.initiator_name = login.initiator_name.clone();
    config.chap = chap_config(url.user.as_deref(), url.password.as_ref(), login)?;
    config.timeout = Duration::from_secs(login.timeout);
    if digests.header_digest {
        config.params.header_digest = vec![Digest::Crc32c];
    }
    if digests.data_digest {
        config.params.data_digest = vec![Digest::Crc32c];
    }
    Ok(config)
}

/// A failed login, with what to do about it when authentication failed.
pub(super) fn login_failure(e: InitiatorError, chap: Option<&InitiatorChap>) -> Failure {
    match chap_args::login_hint(&e, chap, chap_args::Secrets::Flags) {
        Some(_) => Failure::Operational(chap_args::login_failure_text(
            &e,
            chap,
            chap_args::Secrets::Flags,
        )),
        None => Failure::from(e),
    }
}
