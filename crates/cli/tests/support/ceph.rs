//! The Ceph cluster RBD tests use: the one `scripts/ceph-cluster start`
//! made, found through the variables it prints (`.ci/run` exports them).
//! Without them a test skips, saying so, except under CI, where it fails.

use std::path::PathBuf;

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct Ceph {
    pub conf: PathBuf,
    pub keyring: Option<PathBuf>,
    pub id: String,
    pub pool: String,
}

impl Ceph {
    /// The cluster of the environment, or None (and a note) to skip.
    pub fn from_env() -> Option<Ceph> {
        let Ok(conf) = std::env::var("CEPH_CONF") else {
            assert!(
                !super::ci(),
                "CI runs the RBD tests against a cluster: CEPH_CONF is not set \
                 (eval \"$(scripts/ceph-cluster start)\")"
            );
            eprintln!("skipped: no CEPH_CONF (eval \"$(scripts/ceph-cluster start)\" sets it)");
            return None;
        };
        Some(Ceph {
            conf: PathBuf::from(conf),
            keyring: std::env::var_os("CEPH_KEYRING").map(PathBuf::from),
            id: std::env::var("CEPH_ID").unwrap_or_else(|_| "admin".into()),
            pool: std::env::var("CEPH_POOL").unwrap_or_else(|_| "rbd".into()),
        })
    }

    /// A name no other test (or earlier run) has used: images outlive runs.
    pub fn fresh_image(&self, tag: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos();
        format!("isoe-{tag}-{}-{nanos}", std::process::id())
    }

    /// The LUN keys that serve `image` of the pool, created with `size`.
    pub fn lun_keys(&self, image: &str, size: &str) -> String {
        let mut keys = format!(
            "rbd = \"{}/{image}\"\nsize = \"{size}\"\nceph_conf = \"{}\"\nceph_id = \"{}\"\n",
            self.pool,
            self.conf.display(),
            self.id
        );
        if let Some(keyring) = &self.keyring {
            keys.push_str(&format!("ceph_keyring = \"{}\"\n", keyring.display()));
        }
        keys
    }
}
