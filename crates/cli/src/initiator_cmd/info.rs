//! The commands that describe: `discover`, `inquiry`, `capacity`, `luns`.

use super::display::{size_binary, size_decimal};
use super::login::{chap_config, login_failure, parse_url, require_lun};
use super::session::{report_luns, with_session};
use super::{failure_text, DiscoverArgs, Failure, LunArgs, Report};
use isoe_initiator::cdb::{Capacity, Inquiry};
use isoe_initiator::{send_targets, DiscoveryConfig, Portal};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;

pub(super) fn discover(args: &DiscoverArgs) -> Result<Report, Failure> {
    let text = args.portal.as_str();
    let (portal, user, password) = match text.strip_prefix("iscsi://") {
        Some(rest) if rest.trim_end_matches('/').contains('/') => {
            let url = parse_url(text)?;
            (url.portal, url.user, url.password)
        }
        Some(rest) => {
            // iscsi://[user[%password]@]host[:port] with no target: parse it as a URL with one.
            let url = parse_url(&format!("iscsi://{}/-", rest.trim_end_matches('/')))?;
            (url.portal, url.user, url.password)
        }
        None => (
            Portal::parse(text).map_err(|e| Failure::Usage(e.to_string()))?,
            None,
            None,
        ),
    };
    let mut config = DiscoveryConfig::new(portal);
    config.initiator_name = args.login.initiator_name.clone();
    config.timeout = Duration::from_secs(args.login.timeout);
    config.chap = chap_config(user.as_deref(), password.as_ref(), &args.login)?;
    let targets = send_targets(&config).map_err(|e| login_failure(e, config.chap.as_ref()))?;

    let mut human = String::new();
    if targets.is_empty() {
        let _ = writeln!(
            human,
            "{} reports no targets (none, or none this initiator may see)",
            config.portal
        );
    }
    for t in &targets {
        let _ = writeln!(human, "{}", t.name);
        for (address, tag) in &t.portals {
            let _ = writeln!(human, "    {address}  (portal group {tag})");
        }
    }
    let json = json!({
        "portal": config.portal.to_string(),
        "targets": targets.iter().map(|t| json!({
            "name": t.name,
            "portals": t.portals.iter().map(|(address, tag)| json!({
                "address": address,
                "portal_group_tag": tag,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    Ok(Report {
        human: Some(human),
        json,
    })
}

pub(super) fn inquiry(args: &LunArgs) -> Result<Report, Failure> {
    let url = parse_url(&args.url)?;
    let lun = require_lun(&url)?;
    let (inq, serial) = with_session("inquiry", args, &url, |s| {
        let inq = s.inquiry(lun)?;
        let serial = s.serial(lun)?;
        Ok((inq, serial))
    })?;
    let mut human = String::new();
    let mut line = |label: &str, value: &str| {
        let _ = writeln!(human, "{:<14}{value}", format!("{label}:"));
    };
    line("vendor", &inq.vendor);
    line("product", &inq.product);
    line("revision", &inq.revision);
    line(
        "device type",
        &format!("{:#04x} ({})", inq.device_type, inq.device_type_name()),
    );
    line(
        "qualifier",
        &format!("{} ({})", inq.peripheral_qualifier, qualifier_name(&inq)),
    );
    line(
        "version",
        &format!("{:#04x} ({})", inq.version, version_name(inq.version)),
    );
    line("removable", if inq.removable { "yes" } else { "no" });
    line(
        "serial",
        serial
            .as_deref()
            .unwrap_or("(the LUN has no unit serial number page)"),
    );
    let json = json!({
        "url": url.to_string(),
        "lun": lun,
        "vendor": inq.vendor,
        "product": inq.product,
        "revision": inq.revision,
        "device_type": inq.device_type,
        "device_type_name": inq.device_type_name(),
        "peripheral_qualifier": inq.peripheral_qualifier,
        "version": inq.version,
        "version_name": version_name(inq.version),
        "removable": inq.removable,
        "serial": serial,
    });
    Ok(Report {
        human: Some(human),
        json,
    })
}

/// SPC-4 Table 138.
fn qualifier_name(inq: &Inquiry) -> &'static str {
    match inq.peripheral_qualifier {
        0 => "connected",
        1 => "not connected now",
        3 => "no device at this LUN",
        _ => "reserved",
    }
}

/// SPC-4 Table 142, VERSION.
fn version_name(version: u8) -> &'static str {
    match version {
        0x00 => "no standard claimed",
        0x03 => "SPC",
        0x04 => "SPC-2",
        0x05 => "SPC-3",
        0x06 => "SPC-4",
        0x07 => "SPC-5",
        _ => "unknown",
    }
}

pub(super) fn capacity(args: &LunArgs) -> Result<Report, Failure> {
    let url = parse_url(&args.url)?;
    let lun = require_lun(&url)?;
    let cap = with_session("capacity", args, &url, |s| s.capacity(lun))?;
    let size = cap.size_bytes();
    let human = format!(
        "blocks:             {} (LBA 0 to {})\n\
         block size:         {} bytes\n\
         size:               {size} bytes = {} = {}\n\
         thin provisioning:  {}\n",
        cap.blocks(),
        cap.last_lba,
        cap.block_size_bytes,
        size_binary(size),
        size_decimal(size),
        if cap.thin_provisioning { "yes" } else { "no" },
    );
    let json = json!({
        "url": url.to_string(),
        "lun": lun,
        "blocks": cap.blocks(),
        "last_lba": cap.last_lba,
        "block_size_bytes": cap.block_size_bytes,
        "size_bytes": size,
        "size_binary": size_binary(size),
        "size_decimal": size_decimal(size),
        "thin_provisioning": cap.thin_provisioning,
    });
    Ok(Report {
        human: Some(human),
        json,
    })
}

/// What `luns` learned about one LUN.
struct LunInfo {
    lun: u16,
    inquiry: Result<Inquiry, String>,
    capacity: Option<Result<Capacity, String>>,
}

pub(super) fn luns(args: &LunArgs) -> Result<Report, Failure> {
    let url = parse_url(&args.url)?;
    let report_lun = url.lun.unwrap_or(0);
    let infos = with_session("luns", args, &url, |s| {
        let numbers = report_luns(s, report_lun)?;
        let mut infos = Vec::with_capacity(numbers.len());
        for lun in numbers {
            let inquiry = s.inquiry(lun).map_err(failure_text);
            // Only block devices have a capacity; a controller (tgt's LUN 0) has none.
            let capacity = match &inquiry {
                Ok(i) if i.device_type != 0 => None,
                _ => Some(s.capacity(lun).map_err(failure_text)),
            };
            infos.push(LunInfo {
                lun,
                inquiry,
                capacity,
            });
        }
        Ok(infos)
    })?;
    let mut human = format!(
        "{:<5} {:<28} {:<9} {:<17} SIZE\n",
        "LUN", "TYPE", "VENDOR", "PRODUCT"
    );
    for info in &infos {
        let (kind, vendor, product) = match &info.inquiry {
            Ok(i) => (i.device_type_name(), i.vendor.as_str(), i.product.as_str()),
            Err(_) => ("(INQUIRY failed)", "", ""),
        };
        let size = match &info.capacity {
            None => "-".to_string(),
            Some(Ok(c)) => format!(
                "{} = {} ({} blocks of {} bytes)",
                size_binary(c.size_bytes()),
                size_decimal(c.size_bytes()),
                c.blocks(),
                c.block_size_bytes
            ),
            Some(Err(e)) => format!("unknown: {e}"),
        };
        let _ = writeln!(
            human,
            "{:<5} {kind:<28} {vendor:<9} {product:<17} {size}",
            info.lun
        );
        if let Err(e) = &info.inquiry {
            let _ = writeln!(human, "      {e}");
        }
    }
    let json = json!({
        "url": url.to_string(),
        "target": url.target,
        "luns": infos.iter().map(lun_json).collect::<Vec<_>>(),
    });
    Ok(Report {
        human: Some(human),
        json,
    })
}

fn lun_json(info: &LunInfo) -> Value {
    let mut v = json!({ "lun": info.lun });
    match &info.inquiry {
        Ok(i) => {
            v["device_type"] = json!(i.device_type);
            v["device_type_name"] = json!(i.device_type_name());
            v["vendor"] = json!(i.vendor);
            v["product"] = json!(i.product);
            v["revision"] = json!(i.revision);
        }
        Err(e) => v["inquiry_error"] = json!(e),
    }
    match &info.capacity {
        None => v["capacity"] = Value::Null,
        Some(Ok(c)) => {
            v["capacity"] = json!({
                "blocks": c.blocks(),
                "block_size_bytes": c.block_size_bytes,
                "size_bytes": c.size_bytes(),
                "thin_provisioning": c.thin_provisioning,
            });
        }
        Some(Err(e)) => {
            v["capacity"] = Value::Null;
            v["capacity_error"] = json!(e);
        }
    }
    v
}
