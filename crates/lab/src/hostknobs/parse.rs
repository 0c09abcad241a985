//! What `ethtool -g`, `-c`, `-l` and `-a`, `ip -j link show` and
//! `tc -j qdisc show` print, read into values the lab compares and puts
//! back. ethtool's own parsing is ours: its output is for people and has
//! no machine-readable form in the versions Debian 12 ships (6.1's `--json`
//! covers neither `-g` nor `-a`).
//!
//! The four ethtool formats share one shape, `key: value` lines under
//! section lines that end in a colon:
//!
//! ```text
//! Ring parameters for eth0:        a title
//! Pre-set maximums:                a section: what the device allows
//! RX:             4096
//! Current hardware settings:       a section: what it has now
//! RX:             256
//! RX Mini:        n/a              a setting the device does not have
//! ```
//!
//! `-c` puts two settings on some lines (`Adaptive RX: off  TX: n/a`),
//! read as `Adaptive RX` and `Adaptive TX`.

use serde::{Deserialize, Serialize};

/// The section of `-g` and `-l` that holds what the device allows.
pub const MAXIMUMS: &str = "Pre-set maximums";

/// One `key: value` line of ethtool's output, with the section it is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// The last section line above it (the title for `-c` and `-a`).
    pub section: String,
    /// The key as printed: `RX`, `rx-usecs`, `Autonegotiate`.
    pub key: String,
    /// The value as printed: `256`, `off`, `n/a`.
    pub value: String,
}

/// What one ethtool query printed, as settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings(pub Vec<Setting>);

impl Settings {
    /// The current value of `key`: in `-g` and `-l` the current hardware
    /// settings come after the maximums, so the last line with the key.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|s| s.key == key)
            .map(|s| s.value.as_str())
    }

    /// The current value of `key` as a number; None for `n/a` (the device
    /// has no such setting) or no such line.
    pub fn number(&self, key: &str) -> Option<u32> {
        self.value(key).and_then(|v| v.parse().ok())
    }

    /// The device's maximum for `key` (`-g`, `-l`); None for `n/a`.
    pub fn maximum(&self, key: &str) -> Option<u32> {
        self.0
            .iter()
            .find(|s| s.section == MAXIMUMS && s.key == key)
            .and_then(|s| s.value.parse().ok())
    }

    /// The current value of an on/off `key`; None for `n/a` or no such line.
    pub fn on(&self, key: &str) -> Option<bool> {
        match self.value(key)? {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    }
}

/// Reads the output of `ethtool -g`, `-c`, `-l` or `-a`.
pub fn parse_settings(output: &str) -> Settings {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in output.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if let Some(title) = line.strip_suffix(':') {
            if !title.contains(':') {
                section = title.trim().to_string();
                continue;
            }
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        // "Adaptive RX: off  TX: n/a": a second setting after two spaces,
        // named with the first one's prefix ("Adaptive ").
        if let Some((first, second)) = value.split_once("  ") {
            if let Some((key2, value2)) = second.trim().split_once(':') {
                let prefix = key
                    .rsplit_once(' ')
                    .map_or(String::new(), |(p, _)| format!("{p} "));
                out.push(setting(&section, key, first.trim()));
                out.push(setting(
                    &section,
                    &format!("{prefix}{}", key2.trim()),
                    value2.trim(),
                ));
                continue;
            }
        }
        out.push(setting(&section, key, value));
    }
    Settings(out)
}

fn setting(section: &str, key: &str, value: &str) -> Setting {
    Setting {
        section: section.to_string(),
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// Ethernet pause (flow control) as `ethtool -a` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// Pause negotiated with the link partner.
    pub autoneg: bool,
    /// Honour pause frames received.
    pub rx: bool,
    /// Send pause frames.
    pub tx: bool,
}

impl Pause {
    /// From `ethtool -a`'s settings; None when a line is missing.
    pub fn from_settings(s: &Settings) -> Option<Pause> {
        Some(Pause {
            autoneg: s.on("Autonegotiate")?,
            rx: s.on("RX")?,
            tx: s.on("TX")?,
        })
    }
}

/// A device's root qdisc as `tc -j qdisc show dev DEV` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootQdisc {
    /// `noqueue`, `pfifo_fast`, `fq_codel`, `mq`, `tbf`, ...
    pub kind: String,
    /// `0:` for the one the kernel attaches itself; `8001:` and up for
    /// one that `tc` added.
    pub handle: String,
    /// A `tbf`'s rate in bytes per second.
    pub rate_bytes_per_s: Option<u64>,
}

impl RootQdisc {
    /// Whether it is the kernel's own (handle 0), which `tc qdisc del dev
    /// DEV root` brings back.
    pub fn is_default(&self) -> bool {
        self.handle == "0:"
    }

    /// Whether it is a `tbf` at `rate_mbit`.
    pub fn is_tbf_at(&self, rate_mbit: u32) -> bool {
        self.kind == "tbf" && self.rate_bytes_per_s == Some(u64::from(rate_mbit) * 125_000)
    }
}

/// What `tc -j` or `ip -j` printed that the lab cannot read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// `tc -j qdisc show` printed no JSON.
    #[error("tc -j qdisc show: {0}")]
    QdiscJson(#[source] serde_json::Error),
    /// `tc -j qdisc show` printed JSON, but no list.
    #[error("tc -j qdisc show printed no list")]
    QdiscNotAList,
    /// `ip -j link show` printed no JSON.
    #[error("ip -j link show: {0}")]
    LinkJson(#[source] serde_json::Error),
    /// `ip -j link show` gave no MTU.
    #[error("ip -j link show has no mtu")]
    NoMtu,
}

/// The root qdisc in `tc -j qdisc show dev DEV`'s output.
pub fn parse_root_qdisc(json: &str) -> Result<RootQdisc, ParseError> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(ParseError::QdiscJson)?;
    let all = v.as_array().ok_or(ParseError::QdiscNotAList)?;
    let Some(root) = all.iter().find(|q| q["root"].as_bool() == Some(true)) else {
        // A device that is down has no qdisc until it comes up and the
        // kernel attaches its own.
        return Ok(RootQdisc {
            kind: "none".to_string(),
            handle: "0:".to_string(),
            rate_bytes_per_s: None,
        });
    };
    Ok(RootQdisc {
        kind: root["kind"].as_str().unwrap_or_default().to_string(),
        handle: root["handle"].as_str().unwrap_or_default().to_string(),
        rate_bytes_per_s: root["options"]["rate"].as_u64(),
    })
}

/// A device's MTU and whether it is administratively up, from
/// `ip -j link show dev DEV`.
pub fn parse_link(json: &str) -> Result<(u32, bool), ParseError> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(ParseError::LinkJson)?;
    let link = &v[0];
    let mtu = link["mtu"]
        .as_u64()
        .and_then(|m| u32::try_from(m).ok())
        .ok_or(ParseError::NoMtu)?;
    let up = link["flags"]
        .as_array()
        .is_some_and(|flags| flags.iter().any(|f| f.as_str() == Some("UP")));
    Ok((mtu, up))
}
