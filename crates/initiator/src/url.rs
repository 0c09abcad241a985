//! libiscsi-style URLs: `iscsi://[user[%password]@]host[:port]/IQN/LUN`,
//! and bare portals `HOST[:PORT]` for discovery.

use isoe_wire::chap::Secret;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// The iSCSI port assigned by IANA (RFC 7143 §13.8 default for TargetAddress).
pub const DEFAULT_PORT: u16 = 3260;

/// Why a URL or portal does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UrlError {
    /// The text does not start with `iscsi://`.
    #[error("{0:?} is not an iSCSI URL: expected iscsi://[user[%password]@]host[:port]/IQN/LUN")]
    Scheme(String),
    /// No host between `//` (or `@`) and the port or path.
    #[error("{0:?}: the host is missing")]
    MissingHost(String),
    /// The port is not a number from 1 to 65535.
    #[error("{url:?}: port {port:?} is not a number from 1 to 65535")]
    Port {
        /// The whole text.
        url: String,
        /// The port text.
        port: String,
    },
    /// The path lacks the target name.
    #[error("{0:?}: the target name (IQN) is missing after the host")]
    MissingTarget(String),
    /// The LUN is not a number from 0 to 16383.
    #[error("{url:?}: LUN {lun:?} is not a number from 0 to 16383")]
    Lun {
        /// The whole text.
        url: String,
        /// The LUN text.
        lun: String,
    },
    /// A `[` without a closing `]` in an IPv6 host.
    #[error("{0:?}: an IPv6 address must be written [addr]")]
    Ipv6(String),
    /// The host name did not resolve.
    #[error("{host}:{port} does not resolve to an address: {why}")]
    Resolve {
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// The resolver's answer.
        why: String,
    },
}

/// A host and port, as written (resolved on use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Portal {
    /// Host name or address, without IPv6 brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Portal {
    /// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`; the port defaults to 3260.
    pub fn parse(text: &str) -> Result<Portal, UrlError> {
        let (host, port) = split_host_port(text, text)?;
        Ok(Portal { host, port })
    }

    /// The first address the host resolves to.
    pub fn resolve(&self) -> Result<SocketAddr, UrlError> {
        let resolve_error = |why: String| UrlError::Resolve {
            host: self.host.clone(),
            port: self.port,
            why,
        };
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| resolve_error(e.to_string()))?
            .next()
            .ok_or_else(|| resolve_error("no address".into()))
    }
}

impl fmt::Display for Portal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed `iscsi://` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct IscsiUrl {
    /// CHAP user name, if given.
    pub user: Option<String>,
    /// CHAP secret, if given (never printed).
    pub password: Option<Secret>,
    /// Where the target listens.
    pub portal: Portal,
    /// TargetName.
    pub target: String,
    /// The LUN; `None` when the URL ends at the target name.
    pub lun: Option<u16>,
}

impl fmt::Debug for IscsiUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IscsiUrl({self})")
    }
}

impl fmt::Display for IscsiUrl {
    /// The URL with any password left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iscsi://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        write!(f, "{}/{}", self.portal, self.target)?;
        if let Some(lun) = self.lun {
            write!(f, "/{lun}")?;
        }
        Ok(())
    }
}

impl IscsiUrl {
    /// Parses `iscsi://[user[%password]@]host[:port]/IQN[/LUN]`.
    pub fn parse(text: &str) -> Result<IscsiUrl, UrlError> {
        // Errors quote the URL, and a CHAP secret must never show.
        let shown = &without_password(text);
        let rest = text
            .strip_prefix("iscsi://")
            .ok_or_else(|| UrlError::Scheme(shown.clone()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        // The user part ends at the last '@': a password may contain '@'.
        let (user, password, hostport) = match authority.rfind('@') {
            Some(i) => {
                let userinfo = &authority[..i];
                let (user, password) = match userinfo.find('%') {
                    Some(p) => (&userinfo[..p], Some(Secret::new(&userinfo[p + 1..]))),
                    None => (userinfo, None),
                };
                (Some(user.to_string()), password, &authority[i + 1..])
            }
            None => (None, None, authority),
        };
        let (host, port) = split_host_port(hostport, shown)?;
        let path = path.trim_end_matches('/');
        let (target, lun) = match path.rfind('/') {
            Some(i) => (&path[..i], Some(&path[i + 1..])),
            None => (path, None),
        };
        if target.is_empty() {
            return Err(UrlError::MissingTarget(shown.clone()));
        }
        let lun = match lun {
            Some(l) => Some(
                l.parse::<u16>()
                    .ok()
                    .filter(|n| *n < 16384)
                    .ok_or_else(|| UrlError::Lun {
                        url: shown.clone(),
                        lun: l.into(),
                    })?,
            ),
            None => None,
        };
        Ok(IscsiUrl {
            user,
            password,
            portal: Portal { host, port },
            target: target.into(),
            lun,
        })
    }
}

/// `text` with the password of a `scheme://user%password@` part replaced by `***`.
fn without_password(text: &str) -> String {
    let start = text.find("://").map_or(0, |i| i + 3);
    let authority_end = text[start..].find('/').map_or(text.len(), |i| start + i);
    let authority = &text[start..authority_end];
    match authority
        .rfind('@')
        .and_then(|at| Some((authority[..at].find('%')?, at)))
    {
        Some((percent, at)) => format!("{}%***{}", &text[..start + percent], &text[start + at..]),
        None => text.to_string(),
    }
}

fn split_host_port(hostport: &str, whole: &str) -> Result<(String, u16), UrlError> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let end = v6.find(']').ok_or_else(|| UrlError::Ipv6(whole.into()))?;
        let after = &v6[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(UrlError::Ipv6(whole.into())),
        };
        (&v6[..end], port)
    } else {
        match hostport.rfind(':') {
            Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(UrlError::MissingHost(whole.into()));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| UrlError::Port {
                url: whole.into(),
                port: p.into(),
            })?,
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let u =
            IscsiUrl::parse("iscsi://alice%s3cr%t@10.0.0.1:3261/iqn.2026-11.io.isoe:t0/3").unwrap();
        assert_eq!(u.user.as_deref(), Some("alice"));
        assert_eq!(u.password, Some(Secret::new("s3cr%t")));
        assert_eq!(
            u.portal,
            Portal {
                host: "10.0.0.1".into(),
                port: 3261
            }
        );
        assert_eq!(u.target, "iqn.2026-11.io.isoe:t0");
        assert_eq!(u.lun, Some(3));
        // The password never shows.
        assert_eq!(
            u.to_string(),
            "iscsi://alice@10.0.0.1:3261/iqn.2026-11.io.isoe:t0/3"
        );
        assert!(!format!("{u:?}").contains("s3cr"));
    }

    #[test]
    fn defaults_and_ipv6() {
        let u = IscsiUrl::parse("iscsi://host/iqn.x:y").unwrap();
        assert_eq!(u.portal.port, 3260);
        assert_eq!(u.lun, None);
        let u = IscsiUrl::parse("iscsi://[::1]:3270/iqn.x:y/0").unwrap();
        assert_eq!(u.portal.host, "::1");
        assert_eq!(u.portal.to_string(), "[::1]:3270");
        assert_eq!(Portal::parse("127.0.0.1").unwrap().port, 3260);
        assert_eq!(Portal::parse("[::1]:99").unwrap().port, 99);
    }

    #[test]
    fn errors_name_the_part() {
        assert!(matches!(
            IscsiUrl::parse("http://x/y/0"),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi:///iqn/0"),
            Err(UrlError::MissingHost(_))
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi://h:0/iqn/0"),
            Err(UrlError::Port { .. })
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi://h:x/iqn/0"),
            Err(UrlError::Port { .. })
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi://h/"),
            Err(UrlError::MissingTarget(_))
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi://h/iqn/99999"),
            Err(UrlError::Lun { .. })
        ));
        assert!(matches!(
            IscsiUrl::parse("iscsi://[::1/iqn/0"),
            Err(UrlError::Ipv6(_))
        ));
        for bad in [
            "iscsi://u%s3cr3t@h:x/iqn/0",
            "iscsi://u%s3cr3t@h/iqn/abc",
            "iscsi://u%s3cr3t@/iqn/0",
            "iscsi://u%s3cr3t@h",
            "iscsi://u%s3cr3t@[::1/iqn/0",
            "http://u%s3cr3t@h/iqn/0",
        ] {
            let e = IscsiUrl::parse(bad).unwrap_err().to_string();
            assert!(!e.contains("s3cr3t"), "{e}");
            assert!(e.contains("u%***@"), "{e}");
        }
        let e = IscsiUrl::parse("iscsi://h/iqn/abc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("LUN \"abc\""), "{e}");
    }
}
