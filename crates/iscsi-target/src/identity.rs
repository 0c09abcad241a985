//! The identity of a logical unit across restarts: its unit serial number
//! (VPD page 0x80) and NAA designator (VPD page 0x83).
//!
//! Initiators and multipath tools recognise a logical unit by these two
//! values, so they must not change when the target restarts. [`resolve`]
//! picks them in this order:
//!
//! 1. values configured on the LUN (`serial`, `naa`) win;
//! 2. a memory LUN derives them from (target name, LUN number): stable with no
//!    file, and unique as long as target names are, which RFC 7143 §4.2.7
//!    requires world-wide;
//! 3. a file or block LUN reads `<state_dir>/<target dir>/lun-<n>.toml`, or
//!    draws random values once and writes that file atomically.
//!
//! A file LUN whose record exists but whose backing file is gone is refused
//! ([`check_backing_file`]): the file is created only when the LUN is first
//! provisioned, so a blank disk never appears under a known identity.
//!
//! Generated designators are NAA type 6 (IEEE Registered Extended, SPC-4
//! 7.8.6.6.5) under [`OUI`], and the generated serial is the designator's 100
//! vendor-specific bits in hex, so the two can be matched by eye.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{parse_naa, LunSpec, StoreSpec};

/// The IEEE company_id in generated NAA designators: 0x02150E. Its first
/// octet, 0x02, has the U/L bit set and the SLAP Y and Z bits clear, which
/// marks an administratively assigned (local) identifier that the IEEE never
/// hands to a vendor, so generated designators cannot collide with any
/// vendor's; "150E" spells isoe.
pub const OUI: u32 = 0x02_15_0E;

/// The longest serial number isoe generates or accepts, in characters.
pub const SERIAL_LEN_MAX: usize = 32;

/// A logical unit's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunIdentity {
    /// Unit serial number for VPD page 0x80: printable ASCII, at most
    /// [`SERIAL_LEN_MAX`] characters.
    pub serial: String,
    /// NAA type 6 designator for VPD page 0x83, 16 bytes.
    pub naa: [u8; 16],
}

/// Why a LUN's identity could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// A file or block LUN needs a generated identity but there is nowhere to keep it.
    #[error(
        "LUN {lun} of {target}: no state directory to keep its generated serial and NAA in; \
         set state_dir, or give the LUN both serial and naa"
    )]
    NoStateDir {
        /// Target name.
        target: String,
        /// LUN number.
        lun: u16,
    },
    /// Reading or writing the state file or its directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The state file exists but cannot be used; it is never overwritten,
    /// because that would silently change the LUN's identity.
    #[error(
        "{}: {message}; repair it, or remove it to give the LUN a new identity",
        path.display()
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The operating system's random source failed.
    #[error("cannot generate a LUN identity: the random source failed: {0}")]
    Random(getrandom::Error),
    /// A file LUN's identity record exists but its backing file does not:
    /// the LUN was provisioned, and its data are gone. Creating an empty
    /// file would serve a blank disk under the identity initiators know.
    #[error(
        "the backing file {} is missing, but the identity record {}{} says this LUN \
         was provisioned with it; restore the file (from a backup, or mount the file \
         system that holds it), or remove the identity record to provision a new, \
         empty LUN with a new identity",
        file.display(),
        record.display(),
        serial.as_ref().map_or(String::new(), |s| format!(" (serial {s})"))
    )]
    BackingFileMissing {
        /// The LUN's backing file.
        file: PathBuf,
        /// The identity record, `<state_dir>/<target dir>/lun-<n>.toml`.
        record: PathBuf,
        /// The serial the record holds, if it can be read.
        serial: Option<String>,
    },
}

/// The serial and NAA designator of LUN `lun` of target `target_name`; may
/// create the LUN's state file under `state_dir` (see the module doc).
pub fn resolve(
    state_dir: Option<&Path>,
    target_name: &str,
    lun: &LunSpec,
    medium: Option<&str>,
) -> Result<LunIdentity, IdentityError> {
    if let (Some(serial), Some(naa)) = (&lun.serial, lun.naa) {
        return Ok(LunIdentity {
            serial: serial.clone(),
            naa,
        });
    }
    let generated = match (&lun.store, medium) {
        // Every gateway that opens the image presents one logical unit.
        (_, Some(medium)) => derived_from(&[b"isoe medium identity v1\0", medium.as_bytes()]),
        (StoreSpec::Memory { .. }, None) => derived(target_name, lun.number),
        (StoreSpec::File { .. } | StoreSpec::Block { .. } | StoreSpec::Rbd(_), None) => {
            let state_dir = state_dir.ok_or_else(|| IdentityError::NoStateDir {
                target: target_name.to_string(),
                lun: lun.number,
            })?;
            persisted(state_dir, target_name, lun.number)?
        }
    };
    let identity = LunIdentity {
        serial: lun.serial.clone().unwrap_or(generated.serial),
        naa: lun.naa.unwrap_or(generated.naa),
    };
    debug_assert!(serial_problem(&identity.serial).is_none());
    debug_assert_eq!(identity.naa[0] >> 4, 6);
    Ok(identity)
}

/// Refuses to let a file LUN's backing file be created anew when the LUN
/// was provisioned before: its identity comes from its record under
/// `state_dir` (not both `serial` and `naa` configured), the record exists,
/// and the file does not. A file is created only when the LUN is first
/// provisioned, with no identity yet. Anything but a missing file LUN
/// passes.
pub fn check_backing_file(
    state_dir: Option<&Path>,
    target_name: &str,
    lun: &LunSpec,
) -> Result<(), IdentityError> {
    let (StoreSpec::File { path, .. }, Some(state_dir)) = (&lun.store, state_dir) else {
        return Ok(());
    };
    if (lun.serial.is_some() && lun.naa.is_some()) || path.exists() {
        return Ok(());
    }
    let record = state_file(state_dir, target_name, lun.number);
    let serial = match fs::read_to_string(&record) {
        Ok(text) => read_state(&text, &record, target_name, lun.number)
            .ok()
            .map(|identity| identity.serial),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => None,
    };
    Err(IdentityError::BackingFileMissing {
        file: path.clone(),
        record,
        serial,
    })
}

/// Where a LUN's persistent reservations are kept when an initiator asks
/// for APTPL: `<state_dir>/<target dir>/lun-<n>.pr`.
pub fn reservations_file(state_dir: &Path, target_name: &str, lun_number: u16) -> PathBuf {
    state_dir
        .join(target_dir_name(target_name))
        .join(format!("lun-{lun_number}.pr"))
}

/// The state file of a LUN: `<state_dir>/<target dir>/lun-<n>.toml`.
pub fn state_file(state_dir: &Path, target_name: &str, lun_number: u16) -> PathBuf {
    state_dir
        .join(target_dir_name(target_name))
        .join(format!("lun-{lun_number}.toml"))
}

/// A directory name for a target: iSCSI names keep their letters, digits,
/// '-' and '.', ':' becomes '_', anything else (including '_') becomes %XX,
/// so that distinct names never share a directory.
fn target_dir_name(target_name: &str) -> String {
    if target_name.is_empty() {
        return "%".to_string();
    }
    let mut out = String::with_capacity(target_name.len());
    for (i, b) in target_name.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => out.push(char::from(b)),
            b'.' if i > 0 => out.push('.'),
            b':' => out.push('_'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The identity whose designator carries the low 100 bits of `bits`.
fn from_bits(bits: u128) -> LunIdentity {
    // SPC-4 7.8.6.6.5: NAA (4 bits) | IEEE company_id (24) | vendor specific
    // identifier (36) | vendor specific identifier extension (64).
    let vendor = bits & ((1u128 << 100) - 1);
    let naa = (6u128 << 124) | (u128::from(OUI) << 100) | vendor;
    LunIdentity {
        serial: format!("{vendor:025x}"),
        naa: naa.to_be_bytes(),
    }
}

/// A memory LUN's identity: a fixed function of (target name, LUN number),
/// FNV-1a 128 followed by a bijective mixer so that neighbouring LUNs do not
/// share digits. Changing this function changes every memory LUN's identity.
fn derived(target_name: &str, lun_number: u16) -> LunIdentity {
    derived_from(&[
        b"isoe lun identity v1\0",
        target_name.as_bytes(),
        b"\0",
        &lun_number.to_be_bytes(),
    ])
}

/// The identity hashed from `input`'s parts (see [`derived`]).
fn derived_from(input: &[&[u8]]) -> LunIdentity {
    const FNV_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const FNV_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = FNV_OFFSET;
    for byte in input.iter().flat_map(|part| part.iter()) {
        h = (h ^ u128::from(*byte)).wrapping_mul(FNV_PRIME);
    }
    h ^= h >> 64;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    h ^= h >> 61;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9_94d0_49bb_1331_11eb);
    h ^= h >> 67;
    from_bits(h)
}

/// What a state file holds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    target: String,
    lun: u16,
    serial: String,
    naa: String,
}

/// Reads the LUN's state file, or creates it with fresh random values.
fn persisted(
    state_dir: &Path,
    target_name: &str,
    lun_number: u16,
) -> Result<LunIdentity, IdentityError> {
    let path = state_file(state_dir, target_name, lun_number);
    match fs::read_to_string(&path) {
        Ok(text) => read_state(&text, &path, target_name, lun_number),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 16];
            getrandom::getrandom(&mut bytes).map_err(IdentityError::Random)?;
            let identity = from_bits(u128::from_be_bytes(bytes));
            write_state(state_dir, &path, target_name, lun_number, &identity)?;
            Ok(identity)
        }
        Err(source) => Err(IdentityError::Io { path, source }),
    }
}

fn read_state(
    text: &str,
    path: &Path,
    target_name: &str,
    lun_number: u16,
) -> Result<LunIdentity, IdentityError> {
    let corrupt = |message: String| IdentityError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let state: StateFile =
        toml::from_str(text).map_err(|e| corrupt(e.message().trim().to_string()))?;
    if state.target != target_name || state.lun != lun_number {
        return Err(corrupt(format!(
            "it belongs to LUN {} of {}, not LUN {lun_number} of {target_name}",
            state.lun, state.target
        )));
    }
    if let Some(problem) = serial_problem(&state.serial) {
        return Err(corrupt(format!("serial: {problem}")));
    }
    let naa = parse_naa(&state.naa).map_err(|message| corrupt(format!("naa: {message}")))?;
    Ok(LunIdentity {
        serial: state.serial,
        naa,
    })
}

/// Why `serial` is not a usable VPD page 0x80 serial, if it is not.
fn serial_problem(serial: &str) -> Option<&'static str> {
    if serial.is_empty() || serial.len() > SERIAL_LEN_MAX {
        return Some("must be 1 to 32 characters");
    }
    if !serial.bytes().all(|b| (0x20..=0x7e).contains(&b)) || serial.trim() != serial {
        return Some("must be printable ASCII without leading or trailing spaces");
    }
    None
}

/// Writes the state file so that a crash leaves either no file or a whole
/// one: write a temporary file, fsync it, rename it into place, fsync the
/// directories whose entries changed.
fn write_state(
    state_dir: &Path,
    path: &Path,
    target_name: &str,
    lun_number: u16,
    identity: &LunIdentity,
) -> Result<(), IdentityError> {
    let dir = path
        .parent()
        .expect("state files live in a target directory");
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IdentityError::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let naa = u128::from_be_bytes(identity.naa);
    let text = format!(
        "# isoe: the generated identity of one logical unit. Initiators and multipath\n\
         # tools recognise the unit by these values: keep this file with the unit's data,\n\
         # and remove it only to give the unit a new identity.\n\
         target = {target_name:?}\nlun = {lun_number}\nserial = {:?}\nnaa = \"0x{naa:032x}\"\n",
        identity.serial,
    );
    let temp = dir.join(format!("lun-{lun_number}.toml.tmp-{}", std::process::id()));
    let mut file = fs::File::create(&temp).map_err(io_err(&temp))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err(&temp))?;
    drop(file);
    fs::rename(&temp, path).map_err(io_err(path))?;
    sync_dir(dir)?;
    sync_dir(state_dir)
}

fn sync_dir(dir: &Path) -> Result<(), IdentityError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| IdentityError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn designator_layout_is_naa_6_under_our_oui() {
        let id = from_bits(u128::MAX);
        assert_eq!(id.naa[0], 0x60);
        assert_eq!(&id.naa[..4], &[0x60, 0x21, 0x50, 0xef]);
        assert_eq!(id.serial, "f".repeat(25));
        let id = from_bits(0x1_2345_6789_abcd_ef01_2345_6789);
        assert_eq!(id.serial, "123456789abcdef0123456789");
    }

    #[test]
    fn target_dir_names_are_injective_and_safe() {
        assert_eq!(
            target_dir_name("iqn.2026-11.io.isoe:db"),
            "iqn.2026-11.io.isoe_db"
        );
        assert_ne!(target_dir_name("iqn.x:a_b"), target_dir_name("iqn.x:a:b"));
        assert_eq!(target_dir_name(".."), "%2E.");
        assert_eq!(target_dir_name("a/b"), "a%2Fb");
        assert_eq!(target_dir_name(""), "%");
    }

    #[test]
    fn derived_identity_is_a_fixed_function() {
        let a = derived("iqn.2026-11.io.isoe:target0", 0);
        assert_eq!(a, derived("iqn.2026-11.io.isoe:target0", 0));
        assert_ne!(a, derived("iqn.2026-11.io.isoe:target0", 1));
        assert_ne!(a, derived("iqn.2026-11.io.isoe:target1", 0));
    }
}
