//! Where each key of a configuration file was written (line and key path),
//! so that an error found after parsing (a busy portal, a file two LUNs
//! share) names the place: kept beside the configuration, never part of
//! what it says.

use std::collections::HashMap;
use std::net::SocketAddr;

/// Where a key was written: the 1-based line and the key's path
/// (`target[0].lun[1].file`), as a [`crate::config::ConfigError`] names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPlace {
    /// 1-based line of the key.
    pub line: usize,
    /// Path of the key, array indices from 0.
    pub key: String,
}

/// Where each LUN's store key (`memory`, `file`, `block` or `rbd`) was
/// written, by target name and LUN number: what the checks made when the
/// LUNs are provisioned ([`crate::provision::check_stores`]) name in their
/// errors. Where a key was written is not what the configuration says, so
/// two `StorePlaces` are always equal.
#[derive(Debug, Clone, Default)]
pub struct StorePlaces {
    by_lun: HashMap<(String, u16), KeyPlace>,
}

impl StorePlaces {
    /// Where the store of LUN `lun` of target `target` was written, if it
    /// was read from a file.
    pub fn get(&self, target: &str, lun: u16) -> Option<&KeyPlace> {
        self.by_lun.get(&(target.to_string(), lun))
    }

    /// Records where the store of LUN `lun` of target `target` was written.
    pub(super) fn insert(&mut self, target: &str, lun: u16, place: KeyPlace) {
        self.by_lun.insert((target.to_string(), lun), place);
    }
}

impl PartialEq for StorePlaces {
    fn eq(&self, _other: &StorePlaces) -> bool {
        true
    }
}

impl Eq for StorePlaces {}

/// Where each portal was written (`portals[1]`,
/// `portal_group[0].portals[0]`), by address: what an error of binding it
/// names. Equal, as [`StorePlaces`], whatever they hold.
#[derive(Debug, Clone, Default)]
pub struct PortalPlaces {
    by_addr: HashMap<SocketAddr, KeyPlace>,
}

impl PortalPlaces {
    /// Where portal `addr` was written, if it was read from a file.
    pub fn get(&self, addr: SocketAddr) -> Option<&KeyPlace> {
        self.by_addr.get(&addr)
    }

    /// Records where portal `addr` was written.
    pub(super) fn insert(&mut self, addr: SocketAddr, place: KeyPlace) {
        self.by_addr.insert(addr, place);
    }
}

impl PartialEq for PortalPlaces {
    fn eq(&self, _other: &PortalPlaces) -> bool {
        true
    }
}

impl Eq for PortalPlaces {}
