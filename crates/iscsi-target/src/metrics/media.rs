//! What each LUN's medium says of itself, beside what the connections
//! counted: read from the stores when a snapshot is taken, never on the
//! command path.

use crate::registry::Server;
use std::collections::BTreeMap;

/// What one LUN's store counts of its own.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MediaTotals {
    /// Bytes the store has served to reads from blocks never written (or
    /// deallocated since) since it was created: zeros made on the fly, not
    /// the medium. None (left out of the JSON) where the store cannot tell:
    /// files, block devices, RBD images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwritten_read_bytes: Option<u64>,
}

/// Per target, per LUN it has now, what its store counts. A LUN removed
/// has no store left to ask, so it is not here, though its command totals
/// stay in the snapshot's `luns`.
pub fn media(server: &Server) -> BTreeMap<String, BTreeMap<u16, MediaTotals>> {
    server
        .targets()
        .iter()
        .map(|target| {
            let luns = target
                .luns()
                .entries()
                .iter()
                .map(|(number, unit)| {
                    let totals = MediaTotals {
                        unwritten_read_bytes: unit.store().unwritten_read_bytes(),
                    };
                    (*number, totals)
                })
                .collect();
            (target.name.clone(), luns)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lun_s_store_says_what_it_served_unwritten() {
        let dir = tempfile::tempdir().unwrap();
        // A file LUN's identity is kept in the state directory.
        let text = format!(
            "state_dir = \"{}\"\n[[target]]\nname = \"iqn.2026-11.io.isoe:m\"\n\
             [[target.lun]]\nnumber = 0\nmemory = \"4MiB\"\n\
             [[target.lun]]\nnumber = 3\nfile = \"{}\"\nsize = \"1MiB\"\n",
            dir.path().display(),
            dir.path().join("lun3.img").display()
        );
        let config = crate::config::Config::parse(&text, None).expect("config");
        let server = Server::new(config).expect("server");
        let target = server.target("iqn.2026-11.io.isoe:m").unwrap();
        let store = target.luns().lun(0).unwrap().store().clone();
        store.read_at(0, &mut [0u8; 8192]).unwrap();
        store.write_at(1 << 20, &[1u8; 4096]).unwrap();
        store.read_at(1 << 20, &mut [0u8; 4096]).unwrap();
        let luns = &media(&server)["iqn.2026-11.io.isoe:m"];
        assert_eq!(luns[&0].unwritten_read_bytes, Some(8192));
        assert_eq!(luns[&3].unwritten_read_bytes, None, "a file cannot tell");
        assert_eq!(luns.len(), 2);
        // None is left out of the JSON, and what is left out reads as None.
        assert_eq!(
            serde_json::to_string(&luns[&3]).unwrap(),
            "{}",
            "nothing to say"
        );
        assert_eq!(
            serde_json::to_string(&luns[&0]).unwrap(),
            r#"{"unwritten_read_bytes":8192}"#
        );
        let read: MediaTotals = serde_json::from_str("{}").unwrap();
        assert_eq!(read, MediaTotals::default());
    }
}
