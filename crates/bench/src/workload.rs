//! One run's workload, completely described, as it is recorded in results.

use serde::{Deserialize, Serialize, Serializer};

use crate::profiles::{MatrixCell, Profile};

/// Everything that defines a run. It goes into every result, so a result
/// can be reproduced from its JSON alone.
///
/// `urls` are serialized with passwords removed ([`redact_url`]), so a
/// workload holding the real URLs can be written out safely.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The profile's name, or `None` for a hand-made workload.
    pub profile: Option<String>,
    /// Bytes per command; a multiple of 512.
    pub block_size_bytes: u32,
    /// Percent of commands that are reads.
    pub read_pct: u8,
    /// Percent of commands at a random offset.
    pub random_pct: u8,
    /// Commands each worker keeps outstanding.
    pub queue_depth: u32,
    /// Worker threads.
    pub workers: u32,
    /// iSCSI sessions.
    pub sessions: u32,
    /// TCP connections per session (MC/S).
    pub connections: u32,
    /// Measured time, seconds.
    pub duration_s: f64,
    /// Warm-up before measuring, seconds.
    pub ramp_s: f64,
    /// The LUNs driven, as `iscsi://` URLs.
    #[serde(serialize_with = "serialize_redacted")]
    pub urls: Vec<String>,
    /// Data written is read back and compared.
    pub verify: bool,
    /// The URLs are paths of one logical unit (`isoe bench --multipath`),
    /// driven as one volume through the path ALUA chooses.
    #[serde(default)]
    pub multipath: bool,
    /// The region driven: the first this many bytes of each LU (whole I/O
    /// sizes), the span `isoe bench --fill --span` wrote; None: all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_bytes: Option<u64>,
}

/// Why a [`Workload`] cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// The block size is 0.
    #[error("block size must be more than 0 bytes")]
    BlockSizeZero,
    /// The block size is not a whole number of 512-byte sectors.
    #[error("block size {block_size_bytes} bytes is not a multiple of 512")]
    BlockSizeNotSectorMultiple {
        /// The block size given.
        block_size_bytes: u32,
    },
    /// A percentage is above 100.
    #[error("{field} is {value}%, more than 100%")]
    PercentOver100 {
        /// `read_pct` or `random_pct`.
        field: &'static str,
        /// The value given.
        value: u8,
    },
    /// A count that must be at least 1 is 0.
    #[error("{field} must be at least 1")]
    CountZero {
        /// `queue_depth`, `workers`, `sessions` or `connections`.
        field: &'static str,
    },
    /// The duration is not a positive number of seconds.
    #[error("duration must be more than 0 s, not {duration_s}")]
    DurationNotPositive {
        /// The duration given.
        duration_s: f64,
    },
    /// The ramp is negative or not a number.
    #[error("ramp must be 0 s or more, not {ramp_s}")]
    RampNegative {
        /// The ramp given.
        ramp_s: f64,
    },
    /// Fewer commands in flight than sessions: each session keeps its
    /// share of the queue depth, so some would send nothing.
    #[error("queue depth {queue_depth} is less than the {sessions} sessions it is shared by (each keeps its share; some would send nothing)")]
    DepthBelowSessions {
        /// The queue depth given.
        queue_depth: u32,
        /// The sessions given.
        sessions: u32,
    },
    /// No URL to drive.
    #[error("at least one iscsi:// URL is needed")]
    NoUrls,
}

impl Workload {
    /// A workload running `profile` against `urls`: one session of one
    /// connection, no verification.
    pub fn from_profile(
        profile: &Profile,
        urls: Vec<String>,
        duration_s: f64,
        ramp_s: f64,
    ) -> Workload {
        Workload {
            profile: Some(profile.name.to_string()),
            block_size_bytes: profile.block_size_bytes,
            read_pct: profile.read_pct,
            random_pct: profile.random_pct,
            queue_depth: profile.queue_depth,
            workers: profile.workers,
            sessions: 1,
            connections: 1,
            duration_s,
            ramp_s,
            urls,
            verify: false,
            multipath: false,
            span_bytes: None,
        }
    }

    /// A workload running one cell of seed 003's matrix against `urls`.
    pub fn from_matrix_cell(
        cell: &MatrixCell,
        urls: Vec<String>,
        duration_s: f64,
        ramp_s: f64,
    ) -> Workload {
        Workload {
            profile: Some(cell.name()),
            block_size_bytes: cell.block_size_bytes,
            read_pct: cell.read_pct,
            random_pct: cell.random_pct,
            queue_depth: cell.queue_depth,
            workers: cell.workers,
            sessions: 1,
            connections: 1,
            duration_s,
            ramp_s,
            urls,
            verify: false,
            multipath: false,
            span_bytes: None,
        }
    }

    /// Checks that the workload can be run; the error names the first field
    /// that is wrong.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.block_size_bytes == 0 {
            return Err(WorkloadError::BlockSizeZero);
        }
        if !self.block_size_bytes.is_multiple_of(512) {
            return Err(WorkloadError::BlockSizeNotSectorMultiple {
                block_size_bytes: self.block_size_bytes,
            });
        }
        for (field, value) in [("read_pct", self.read_pct), ("random_pct", self.random_pct)] {
            if value > 100 {
                return Err(WorkloadError::PercentOver100 { field, value });
            }
        }
        for (field, value) in [
            ("queue_depth", self.queue_depth),
            ("workers", self.workers),
            ("sessions", self.sessions),
            ("connections", self.connections),
        ] {
            if value == 0 {
                return Err(WorkloadError::CountZero { field });
            }
        }
        if self.queue_depth < self.sessions {
            return Err(WorkloadError::DepthBelowSessions {
                queue_depth: self.queue_depth,
                sessions: self.sessions,
            });
        }
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            return Err(WorkloadError::DurationNotPositive {
                duration_s: self.duration_s,
            });
        }
        if self.ramp_s.is_nan() || self.ramp_s < 0.0 {
            return Err(WorkloadError::RampNegative {
                ramp_s: self.ramp_s,
            });
        }
        if self.urls.is_empty() {
            return Err(WorkloadError::NoUrls);
        }
        Ok(())
    }
}

fn serialize_redacted<S: Serializer>(urls: &[String], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(urls.iter().map(|url| redact_url(url)))
}

/// Query parameters of libiscsi URLs that carry a secret.
const SECRET_PARAMS: [&str; 2] = ["password", "target_password"];

/// `url` without its password: `iscsi://user%secret@host/...` (libiscsi's
/// form) or `iscsi://user:secret@host/...` becomes `iscsi://user@host/...`,
/// and `password` / `target_password` query parameters are dropped.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(authority_end);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let user = &userinfo[..userinfo.find(['%', ':']).unwrap_or(userinfo.len())];
            if !user.is_empty() {
                out.push_str(user);
                out.push('@');
            }
            out.push_str(&authority[at + 1..]);
        }
        None => out.push_str(authority),
    }
    out.push_str(&redact_query(path_and_query));
    out
}

/// Drops secret parameters from the `?query` part of `path_and_query`.
fn redact_query(path_and_query: &str) -> String {
    let Some(q) = path_and_query.find('?') else {
        return path_and_query.to_string();
    };
    let (path, query_and_fragment) = path_and_query.split_at(q);
    let query_and_fragment = &query_and_fragment[1..];
    let (query, fragment) = match query_and_fragment.find('#') {
        Some(h) => query_and_fragment.split_at(h),
        None => (query_and_fragment, ""),
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|param| {
            let key = param.split('=').next().unwrap_or("");
            !SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(key))
        })
        .collect();
    let mut out = path.to_string();
    if kept.iter().any(|p| !p.is_empty()) {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    out.push_str(fragment);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::{find, matrix};

    fn valid() -> Workload {
        Workload::from_profile(
            find("oltp-8k").unwrap(),
            vec!["iscsi://127.0.0.1:3260/iqn.2026-11.io.isoe:target0/0".to_string()],
            30.0,
            5.0,
        )
    }

    #[test]
    fn from_profile_copies_the_profile() {
        let w = valid();
        assert_eq!(w.profile.as_deref(), Some("oltp-8k"));
        assert_eq!(
            (w.block_size_bytes, w.read_pct, w.random_pct, w.queue_depth),
            (8192, 67, 100, 5)
        );
        assert_eq!(
            (w.workers, w.sessions, w.connections, w.verify),
            (1, 1, 1, false)
        );
        assert_eq!(w.validate(), Ok(()));
        let cell = matrix()[5];
        let m = Workload::from_matrix_cell(&cell, w.urls.clone(), 10.0, 0.0);
        assert_eq!(m.profile.as_deref(), Some("matrix-read-4k-w2-qd4"));
        assert_eq!((m.workers, m.queue_depth), (2, 4));
        assert_eq!(m.validate(), Ok(()));
    }

    #[test]
    fn validation_names_what_is_wrong() {
        let check = |edit: fn(&mut Workload), expected: WorkloadError, message: &str| {
            let mut w = valid();
            edit(&mut w);
            let err = w.validate().unwrap_err();
            assert_eq!(err, expected);
            assert_eq!(err.to_string(), message);
        };
        check(
            |w| w.block_size_bytes = 0,
            WorkloadError::BlockSizeZero,
            "block size must be more than 0 bytes",
        );
        check(
            |w| w.block_size_bytes = 1000,
            WorkloadError::BlockSizeNotSectorMultiple {
                block_size_bytes: 1000,
            },
            "block size 1000 bytes is not a multiple of 512",
        );
        check(
            |w| w.read_pct = 101,
            WorkloadError::PercentOver100 {
                field: "read_pct",
                value: 101,
            },
            "read_pct is 101%, more than 100%",
        );
        check(
            |w| w.random_pct = 200,
            WorkloadError::PercentOver100 {
                field: "random_pct",
                value: 200,
            },
            "random_pct is 200%, more than 100%",
        );
        check(
            |w| w.queue_depth = 0,
            WorkloadError::CountZero {
                field: "queue_depth",
            },
            "queue_depth must be at least 1",
        );
        check(
            |w| w.workers = 0,
            WorkloadError::CountZero { field: "workers" },
            "workers must be at least 1",
        );
        check(
            |w| w.sessions = 0,
            WorkloadError::CountZero { field: "sessions" },
            "sessions must be at least 1",
        );
        check(
            |w| w.sessions = 8,
            WorkloadError::DepthBelowSessions {
                queue_depth: 5,
                sessions: 8,
            },
            "queue depth 5 is less than the 8 sessions it is shared by (each keeps its share; some would send nothing)",
        );
        check(
            |w| w.connections = 0,
            WorkloadError::CountZero {
                field: "connections",
            },
            "connections must be at least 1",
        );
        check(
            |w| w.duration_s = 0.0,
            WorkloadError::DurationNotPositive { duration_s: 0.0 },
            "duration must be more than 0 s, not 0",
        );
        check(
            |w| w.ramp_s = -1.0,
            WorkloadError::RampNegative { ramp_s: -1.0 },
            "ramp must be 0 s or more, not -1",
        );
        check(
            |w| w.urls.clear(),
            WorkloadError::NoUrls,
            "at least one iscsi:// URL is needed",
        );
        let mut w = valid();
        w.duration_s = f64::NAN;
        assert!(matches!(
            w.validate(),
            Err(WorkloadError::DurationNotPositive { .. })
        ));
        w.duration_s = 1.0;
        w.ramp_s = f64::NAN;
        assert!(matches!(
            w.validate(),
            Err(WorkloadError::RampNegative { .. })
        ));
        // Edges that are fine: 512 bytes, 100%, ramp 0.
        let mut w = valid();
        w.block_size_bytes = 512;
        w.read_pct = 100;
        w.random_pct = 0;
        w.ramp_s = 0.0;
        assert_eq!(w.validate(), Ok(()));
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_url("iscsi://user%secret@host/iqn.2026-11.io.isoe:t0/0"),
            "iscsi://user@host/iqn.2026-11.io.isoe:t0/0"
        );
        assert_eq!(
            redact_url("iscsi://user:secret@10.99.0.1:3260/iqn.x:y/1"),
            "iscsi://user@10.99.0.1:3260/iqn.x:y/1"
        );
        // An '@' inside the password: the host starts after the last '@'.
        assert_eq!(
            redact_url("iscsi://u%p@ss@[::1]:3260/t/0"),
            "iscsi://u@[::1]:3260/t/0"
        );
        // Only a password: nothing of the userinfo is left.
        assert_eq!(redact_url("iscsi://%secret@host/t/0"), "iscsi://host/t/0");
        assert_eq!(
            redact_url("iscsi://u%a@h/t/0?header_digest=crc32c&target_user=t&target_password=b"),
            "iscsi://u@h/t/0?header_digest=crc32c&target_user=t"
        );
        assert_eq!(
            redact_url("iscsi://h/t/0?target_password=b"),
            "iscsi://h/t/0"
        );
    }

    #[test]
    fn leaves_urls_without_secrets_alone() {
        for url in [
            "iscsi://127.0.0.1:3260/iqn.2026-11.io.isoe:target0/0",
            "iscsi://user@host/t/0",
            "iscsi://127.0.0.1:3261/?header_digest=crc32c",
            "iscsi://[::1]:3260/iqn.2026-11.io.isoe:a@b/0",
            "",
            "not a url",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }

    #[test]
    fn json_never_holds_the_password() {
        let mut w = valid();
        w.urls = vec!["iscsi://alice%hunter2@127.0.0.1/iqn.x:y/0".to_string()];
        let json = serde_json::to_string(&w).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains("iscsi://alice@127.0.0.1/iqn.x:y/0"), "{json}");
        let back: Workload = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.urls,
            vec!["iscsi://alice@127.0.0.1/iqn.x:y/0".to_string()]
        );
        assert_eq!(back.block_size_bytes, w.block_size_bytes);
    }
}
