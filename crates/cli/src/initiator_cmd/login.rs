//! From the command line to a session configuration: the URL, CHAP from
//! flags, environment and URL, digests; and what a failed login tells the user.

use super::{DigestArgs, Failure, LoginArgs};
use isoe_initiator::config::chap;
use isoe_initiator::{InitiatorError, IscsiUrl, SessionConfig};
use isoe_wire::chap::Secret;
use isoe_wire::login::{InitiatorChap, InitiatorLoginError};
use isoe_wire::negotiate::Digest;
use std::time::Duration;

/// Environment variables that carry secrets, so they need not be on a command line.
const ENV_CHAP_SECRET: &str = "ISOE_CHAP_SECRET";
const ENV_TARGET_SECRET: &str = "ISOE_TARGET_SECRET";

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

/// A secret from the command line, else from the environment.
fn secret_from(flag: &Option<String>, env: &str) -> Option<Secret> {
    match flag {
        Some(s) => Some(Secret::new(s.as_bytes())),
        None => std::env::var_os(env).map(|s| Secret::new(s.into_encoded_bytes())),
    }
}

/// CHAP from the flags, the environment and the URL's user part, in that order.
pub(super) fn chap_config(
    url_user: Option<&str>,
    url_password: Option<&Secret>,
    args: &LoginArgs,
) -> Result<Option<InitiatorChap>, Failure> {
    let user = args.chap_user.as_deref().or(url_user);
    let mutual = mutual_config(args)?;
    let Some(user) = user else {
        if args.chap_secret.is_some() {
            return Err(Failure::Usage(
                "--chap-secret needs a CHAP user: --chap-user USER or iscsi://USER@...".into(),
            ));
        }
        if mutual.is_some() {
            return Err(Failure::Usage(
                "mutual CHAP (--target-user) needs the initiator's CHAP user and secret too".into(),
            ));
        }
        if args.chap_algorithms.is_some() {
            return Err(Failure::Usage(
                "--chap-algorithms needs a CHAP user: --chap-user USER or iscsi://USER@...".into(),
            ));
        }
        return Ok(None);
    };
    if user.is_empty() {
        return Err(Failure::Usage("the CHAP user name is empty".into()));
    }
    let secret = secret_from(&args.chap_secret, ENV_CHAP_SECRET).or_else(|| url_password.cloned());
    let Some(secret) = secret else {
        return Err(Failure::Usage(format!(
            "CHAP user {user:?} has no secret: give --chap-secret, set {ENV_CHAP_SECRET}, \
             or write iscsi://{user}%SECRET@..."
        )));
    };
    if secret.is_empty() {
        return Err(Failure::Usage(format!(
            "the CHAP secret of {user:?} is empty"
        )));
    }
    let mut chap = chap(user, secret, mutual);
    if let Some(algorithms) = &args.chap_algorithms {
        chap.algorithms = algorithms.0.clone();
    }
    Ok(Some(chap))
}

fn mutual_config(args: &LoginArgs) -> Result<Option<(String, Secret)>, Failure> {
    let Some(user) = &args.target_user else {
        if args.target_secret.is_some() {
            return Err(Failure::Usage(
                "--target-secret needs --target-user, the name the target authenticates with"
                    .into(),
            ));
        }
        return Ok(None);
    };
    match secret_from(&args.target_secret, ENV_TARGET_SECRET) {
        Some(secret) if !secret.is_empty() => Ok(Some((user.clone(), secret))),
        Some(_) => Err(Failure::Usage(format!(
            "the mutual CHAP secret of {user:?} is empty"
        ))),
        None => Err(Failure::Usage(format!(
            "mutual CHAP user {user:?} has no secret: give --target-secret or set {ENV_TARGET_SECRET}"
        ))),
    }
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
    let hint = match (&e, chap) {
        (
            InitiatorError::Login {
                source: InitiatorLoginError::TargetAuthentication(_),
                ..
            },
            _,
        ) => {
            "the target did not prove its identity: check --target-user and \
              --target-secret (or ISOE_TARGET_SECRET)"
        }
        _ if !e.is_authentication_failure() => "",
        (_, Some(_)) => "authentication failed: check the CHAP user name and secret",
        (_, None) => {
            "the target requires CHAP: give iscsi://USER%SECRET@..., or --chap-user \
             with --chap-secret or ISOE_CHAP_SECRET"
        }
    };
    if hint.is_empty() {
        Failure::from(e)
    } else {
        Failure::Operational(format!("{e}; {hint}"))
    }
}
