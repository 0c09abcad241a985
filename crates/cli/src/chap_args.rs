//! CHAP on the command line, one way for every command that logs in
//! (`discover`, `inquiry`, ..., and `isoe bench`): the flags, the
//! environment variables that keep secrets out of `ps`, the URL's user and
//! password, and what a failed authentication tells the user.

use clap::Args;
use isoe_initiator::config::chap;
use isoe_initiator::InitiatorError;
use isoe_wire::chap::{ChapAlgorithm, Secret};
use isoe_wire::login::{InitiatorChap, InitiatorLoginError};

/// Environment variables that carry secrets, so they need not be on a command line.
const ENV_CHAP_SECRET: &str = "ISOE_CHAP_SECRET";
const ENV_TARGET_SECRET: &str = "ISOE_TARGET_SECRET";

/// The CHAP flags of every command that logs in.
#[derive(Args, Debug, Default)]
pub struct ChapArgs {
    /// CHAP user name; overrides the URL's user.
    #[arg(long, value_name = "USER")]
    pub chap_user: Option<String>,
    /// CHAP secret; overrides the URL's password. The environment variable
    /// ISOE_CHAP_SECRET does the same and keeps the secret out of `ps`.
    #[arg(long, value_name = "SECRET")]
    pub chap_secret: Option<String>,
    /// Mutual CHAP: the name the target must authenticate with.
    #[arg(long, value_name = "USER")]
    pub target_user: Option<String>,
    /// Mutual CHAP: the target's secret (or the environment variable ISOE_TARGET_SECRET).
    #[arg(long, value_name = "SECRET")]
    pub target_secret: Option<String>,
    /// CHAP algorithms to offer, preferred first: a comma-separated list of
    /// MD5, SHA-256, SHA3-256 (or their CHAP_A numbers 5, 7, 8). Default:
    /// MD5,SHA-256,SHA3-256 (MD5 first for targets that read 7 as SHA-1).
    #[arg(long, value_name = "LIST", value_parser = parse_chap_algorithms)]
    pub chap_algorithms: Option<ChapAlgorithms>,
}

/// The value of `--chap-algorithms`, in the order given.
#[derive(Debug, Clone)]
pub struct ChapAlgorithms(Vec<ChapAlgorithm>);

/// `--chap-algorithms`: names or CHAP_A numbers, comma-separated, no repeats.
fn parse_chap_algorithms(text: &str) -> Result<ChapAlgorithms, String> {
    let mut algorithms = Vec::new();
    for item in text.split(',').map(str::trim) {
        let a = ChapAlgorithm::from_name(item).ok_or_else(|| {
            format!("{item:?} is not a CHAP algorithm: expected MD5, SHA-256 or SHA3-256")
        })?;
        if algorithms.contains(&a) {
            return Err(format!("{} is listed twice", a.name()));
        }
        algorithms.push(a);
    }
    Ok(ChapAlgorithms(algorithms))
}

/// A secret from the command line, else from the environment.
fn secret_from(flag: &Option<String>, env: &str) -> Option<Secret> {
    match flag {
        Some(s) => Some(Secret::new(s.as_bytes())),
        None => std::env::var_os(env).map(|s| Secret::new(s.into_encoded_bytes())),
    }
}

/// CHAP from the flags, the environment and the URL's user part, in that
/// order; None when no user is named anywhere. Err: the command line is
/// wrong, and the text says how.
pub fn chap_config(
    url_user: Option<&str>,
    url_password: Option<&Secret>,
    args: &ChapArgs,
) -> Result<Option<InitiatorChap>, String> {
    let mutual = mutual_config(args)?;
    let Some(user) = args.chap_user.as_deref().or(url_user) else {
        no_user_needed(args, mutual.is_some())?;
        return Ok(None);
    };
    if user.is_empty() {
        return Err("the CHAP user name is empty".into());
    }
    let secret = secret_from(&args.chap_secret, ENV_CHAP_SECRET).or_else(|| url_password.cloned());
    let Some(secret) = secret else {
        return Err(format!(
            "CHAP user {user:?} has no secret: give --chap-secret, set {ENV_CHAP_SECRET}, \
             or write iscsi://{user}%SECRET@..."
        ));
    };
    if secret.is_empty() {
        return Err(format!("the CHAP secret of {user:?} is empty"));
    }
    let mut chap = chap(user, secret, mutual);
    if let Some(algorithms) = &args.chap_algorithms {
        chap.algorithms = algorithms.0.clone();
    }
    Ok(Some(chap))
}

/// Refuses the flags that mean something only with a CHAP user. The
/// environment's secret alone is no such flag: it may be set for other
/// targets than this one.
fn no_user_needed(args: &ChapArgs, mutual: bool) -> Result<(), String> {
    let flag = if args.chap_secret.is_some() {
        "--chap-secret"
    } else if mutual {
        return Err(
            "mutual CHAP (--target-user) needs the initiator's CHAP user and secret too".into(),
        );
    } else if args.chap_algorithms.is_some() {
        "--chap-algorithms"
    } else {
        return Ok(());
    };
    Err(format!(
        "{flag} needs a CHAP user: --chap-user USER or iscsi://USER@..."
    ))
}

fn mutual_config(args: &ChapArgs) -> Result<Option<(String, Secret)>, String> {
    let Some(user) = &args.target_user else {
        if args.target_secret.is_some() {
            return Err(
                "--target-secret needs --target-user, the name the target authenticates with"
                    .into(),
            );
        }
        return Ok(None);
    };
    match secret_from(&args.target_secret, ENV_TARGET_SECRET) {
        Some(secret) if !secret.is_empty() => Ok(Some((user.clone(), secret))),
        Some(_) => Err(format!("the mutual CHAP secret of {user:?} is empty")),
        None => Err(format!(
            "mutual CHAP user {user:?} has no secret: give --target-secret or set {ENV_TARGET_SECRET}"
        )),
    }
}

/// Where a command takes its CHAP secrets from, which decides the advice
/// a failed authentication gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    /// The flags (`--chap-secret`), the environment or the URL: the
    /// commands with [`ChapArgs`].
    Flags,
    /// Secret files or the environment, never a flag nor the URL: `isoe
    /// attach` and its device file.
    Files,
}

/// What to do about a failed login, when authentication failed: None for
/// other failures. `chap` is what the login offered.
pub fn login_hint(
    e: &InitiatorError,
    chap: Option<&InitiatorChap>,
    secrets: Secrets,
) -> Option<&'static str> {
    if let InitiatorError::Login {
        source: InitiatorLoginError::TargetAuthentication(_),
        ..
    } = e
    {
        return Some(match secrets {
            Secrets::Flags => {
                "the target did not prove its identity: check --target-user and \
                 --target-secret (or ISOE_TARGET_SECRET)"
            }
            Secrets::Files => {
                "the target did not prove its identity: check --target-user and \
                 --target-secret-file (target_user and target_secret_file in the device \
                 file, or ISOE_TARGET_SECRET)"
            }
        });
    }
    if !e.is_authentication_failure() {
        return None;
    }
    Some(match (chap, secrets) {
        (Some(_), _) => "authentication failed: check the CHAP user name and secret",
        (None, Secrets::Flags) => {
            "the target requires CHAP: give iscsi://USER%SECRET@..., or --chap-user \
             with --chap-secret or ISOE_CHAP_SECRET"
        }
        (None, Secrets::Files) => {
            "the target requires CHAP: give --chap-user USER with --chap-secret-file FILE \
             or ISOE_CHAP_SECRET (chap_user and chap_secret_file in the device file)"
        }
    })
}

/// The failed login's text, with [`login_hint`]'s advice after it.
pub fn login_failure_text(
    e: &InitiatorError,
    chap: Option<&InitiatorChap>,
    secrets: Secrets,
) -> String {
    match login_hint(e, chap, secrets) {
        Some(hint) => format!("{e}; {hint}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(user: Option<&str>, secret: Option<&str>) -> ChapArgs {
        ChapArgs {
            chap_user: user.map(Into::into),
            chap_secret: secret.map(Into::into),
            ..ChapArgs::default()
        }
    }

    #[test]
    fn the_flags_override_the_url_and_a_user_without_secret_is_refused() {
        let url_secret = Secret::new(b"from-the-url");
        let c = chap_config(
            Some("alice"),
            Some(&url_secret),
            &args(Some("bob"), Some("s")),
        )
        .unwrap()
        .expect("CHAP");
        assert_eq!(c.user, "bob");
        let c = chap_config(Some("alice"), Some(&url_secret), &args(None, None))
            .unwrap()
            .expect("CHAP");
        assert_eq!(c.user, "alice");
        assert!(chap_config(None, None, &args(None, None))
            .unwrap()
            .is_none());
        let e = chap_config(None, None, &args(None, Some("s"))).unwrap_err();
        assert!(e.contains("--chap-secret needs a CHAP user"), "{e}");
        let e = chap_config(Some(""), None, &args(None, None)).unwrap_err();
        assert_eq!(e, "the CHAP user name is empty");
    }

    #[test]
    fn algorithms_parse_by_name_or_number_and_repeats_are_refused() {
        let a = parse_chap_algorithms("SHA3-256, 5").unwrap();
        assert_eq!(a.0, vec![ChapAlgorithm::Sha3_256, ChapAlgorithm::Md5]);
        assert!(parse_chap_algorithms("MD5,5")
            .unwrap_err()
            .contains("listed twice"));
        assert!(parse_chap_algorithms("SHA-1")
            .unwrap_err()
            .contains("not a CHAP algorithm"));
    }
}
