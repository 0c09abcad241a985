//! What holds a block device: a mounted file system on it or on one of its
//! partitions, swap, or a device stacked on it (device-mapper, md). `isoe
//! detach` refuses to pull such a disk from under its user unless forced:
//! a file system whose disk vanishes aborts its journal and loses what it
//! had not written back.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The users of block device `disk` (`/dev/ublkb0`), each in words
/// ("/dev/ublkb0p1 mounted on /srv (ext4)", "held by dm-0", "swap"):
/// empty when nothing holds it. Reads /sys/class/block, /proc/self/mountinfo
/// and /proc/swaps; what cannot be read is taken as no holder.
pub fn holders(disk: &Path) -> Vec<String> {
    let Some(base) = disk.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    // The disk and its partitions: (name, "major:minor").
    let mut nodes = Vec::new();
    let sys = Path::new("/sys/class/block").join(base);
    if let Some(dev) = read_trimmed(&sys.join("dev")) {
        nodes.push((base.to_string(), dev));
    } else if let Ok(meta) = fs::metadata(disk) {
        if meta.file_type().is_block_device() {
            let rdev = meta.rdev();
            nodes.push((
                base.to_string(),
                format!("{}:{}", libc::major(rdev), libc::minor(rdev)),
            ));
        }
    }
    if let Ok(entries) = fs::read_dir(&sys) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(base) {
                if let Some(dev) = read_trimmed(&entry.path().join("dev")) {
                    nodes.push((name, dev));
                }
            }
        }
    }
    let mut found = Vec::new();
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for (name, dev) in &nodes {
        for (point, fstype) in mounts_of(&mountinfo, dev) {
            found.push(format!("/dev/{name} mounted on {point} ({fstype})"));
        }
        let holders_dir = Path::new("/sys/class/block").join(name).join("holders");
        if let Ok(entries) = fs::read_dir(holders_dir) {
            for entry in entries.flatten() {
                found.push(format!(
                    "/dev/{name} held by {}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let Some(file) = line.split_whitespace().next() else {
            continue;
        };
        if nodes.iter().any(|(name, _)| file == format!("/dev/{name}")) {
            found.push(format!("{file} in use as swap"));
        }
    }
    found
}

/// The mount points and file system types of device `dev` ("major:minor")
/// in `mountinfo` (proc(5)'s format: field 3 the device, field 5 the mount
/// point, the type after the " - " separator).
fn mounts_of(mountinfo: &str, dev: &str) -> Vec<(String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            let fields: Vec<&str> = fields.split(' ').collect();
            if fields.get(2) != Some(&dev) {
                return None;
            }
            let point = unescape(fields.get(4)?);
            let fstype = rest.split(' ').next().unwrap_or("?").to_string();
            Some((point, fstype))
        })
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
                out.push(v as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_found_by_device_number() {
        let info = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 259:0 / /mnt/my\\040data rw shared:5 - xfs /dev/ublkb0 rw
41 22 259:1 /sub /srv rw - ext4 /dev/ublkb0p1 rw
42 22 259:0 / /again rw - xfs /dev/ublkb0 rw
";
        assert_eq!(
            mounts_of(info, "259:0"),
            vec![
                ("/mnt/my data".to_string(), "xfs".to_string()),
                ("/again".to_string(), "xfs".to_string())
            ]
        );
        assert_eq!(
            mounts_of(info, "259:1"),
            vec![("/srv".to_string(), "ext4".to_string())]
        );
        assert!(mounts_of(info, "259:2").is_empty());
        assert!(mounts_of("garbage\n\n", "259:0").is_empty());
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/bad\\09"), "/bad\\09");
    }

    #[test]
    fn a_path_that_is_no_disk_has_no_holders() {
        assert!(holders(Path::new("/nonexistent/ublkb999")).is_empty());
        assert!(holders(Path::new("/")).is_empty());
    }
}
