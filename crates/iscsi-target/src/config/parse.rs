//! Reading a configuration's text into a [`Config`], table by table, in
//! the order of the file's schema. Reading looks at the text only (and at
//! the CHAP secret files it names); what a LUN's store is on the disk or in
//! RAM is checked when the LUNs are provisioned
//! ([`crate::provision::check_stores`]).

use super::chap::{check_directions, read_chap, ChapPlaces};
use super::checks;
use super::error::ConfigError;
use super::log::{read_log, LogConfig, LOG_KEYS};
use super::places::{KeyPlace, StorePlaces};
use super::portal_groups::read_portals_and_groups;
use super::reader::Reader;
use super::types::{
    default_control_socket, Config, Control, Datapath, DigestChoice, Discovery, Limits, LunSpec,
    Metrics, Params, StoreSpec, TargetConfig, LOGIN_DEADLINE, MAX_CONNECTIONS, MAX_LENGTH_BYTES,
    MAX_LUN_NUMBER, MAX_NOP_IN_S, MIN_LENGTH_BYTES, THREADS_MAX,
};
use isoe_config::{Field, Node, Table};
use isoe_wire::digest::Crc32cImpl;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::read_file(path).map(|(_, config)| config)
    }

    /// [`Config::load`], returning the text read as well.
    pub fn read_file(path: &Path) -> Result<(String, Config), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config = Config::parse(&text, Some(path))?;
        Ok((text, config))
    }

    /// Validates configuration `text`; `source` names it in errors and anchors
    /// relative paths and the default `state_dir`. What the LUNs' stores are
    /// on this machine is not looked at here: see
    /// [`crate::provision::check_stores`].
    pub fn parse(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        let reader = Reader::new(text, source);
        let root = reader.root(text)?;
        let config = read_config(&reader, root, source)?;
        debug_assert!(!config.portals.is_empty() && !config.targets.is_empty());
        Ok(config)
    }
}

const ROOT_KEYS: &[&str] = &[
    "state_dir",
    "portals",
    "portal_group",
    "defaults",
    "target",
    "datapath",
    "discovery",
    "limits",
    "control",
    "metrics",
    "log",
];
const CONTROL_KEYS: &[&str] = &["socket"];
const METRICS_KEYS: &[&str] = &["enabled", "listen", "allow_remote"];
const LIMITS_KEYS: &[&str] = &[
    "connections",
    "connections_per_initiator",
    "sessions",
    "logins",
    "logins_per_initiator",
    "first_pdu_timeout_ms",
    "write_buffer",
    "response_buffer",
    "receive_buffer",
];
const DISCOVERY_KEYS: &[&str] = &["chap"];
const DATAPATH_KEYS: &[&str] = &["batching", "crc", "buffer_pool", "workers", "io_threads"];
const TARGET_KEYS: &[&str] = &[
    "name",
    "alias",
    "allowed_initiators",
    "chap",
    "params",
    "lun",
];
const LUN_KEYS: &[&str] = &[
    "number",
    "memory",
    "file",
    "block",
    "rbd",
    "size",
    "ceph_conf",
    "ceph_id",
    "ceph_keyring",
    "read_only",
    "block_size",
    "physical_block_size",
    "sanitize_bytes_per_s",
    "serial",
    "naa",
    "overcommit",
    "offline",
];
const PARAM_KEYS: &[&str] = &[
    "max_recv_data_segment_length",
    "max_burst_length",
    "first_burst_length",
    "immediate_data",
    "initial_r2t",
    "max_connections",
    "max_outstanding_r2t",
    "header_digest",
    "data_digest",
    "nop_in_interval_s",
    "nop_in_timeout_s",
];

fn read_config(r: &Reader, mut root: Table, source: Option<&Path>) -> Result<Config, ConfigError> {
    r.deny_unknown(&root, ROOT_KEYS)?;
    let state_dir = match root.take("state_dir") {
        Some(field) => Some(r.path(&field)?),
        None => r.base_dir.as_ref().map(|dir| dir.join(".isoe-state")),
    };
    let (portals, portal_groups, portal_places) =
        read_portals_and_groups(r, root.take("portals"), root.take("portal_group"))?;
    let defaults = match root.take("defaults") {
        Some(field) => read_params(r, r.table(field, PARAM_KEYS)?, &Params::default())?,
        None => Params::default(),
    };
    let Some(field) = root.take("target") else {
        return Err(r.invalid(0, "target", "no targets: add at least one [[target]] table"));
    };
    let mut targets = Vec::new();
    let mut chap_places = Vec::new();
    let mut store_places = StorePlaces::default();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    for table in r.tables(field, TARGET_KEYS)? {
        let (target, name_field, places) = read_target(r, table, &defaults, &mut store_places)?;
        chap_places.push(places);
        if let Some(line) = first_line_of.get(&target.name) {
            return Err(r.at(
                &name_field,
                format!(
                    "duplicate target name {:?} (first at line {line})",
                    target.name
                ),
            ));
        }
        first_line_of.insert(target.name.clone(), r.line(name_field.offset));
        targets.push(target);
    }
    if targets.is_empty() {
        return Err(r.invalid(0, "target", "no targets: add at least one [[target]] table"));
    }
    let datapath = match root.take("datapath") {
        Some(field) => read_datapath(r, r.table(field, DATAPATH_KEYS)?)?,
        None => Datapath::default(),
    };
    let limits = match root.take("limits") {
        Some(field) => read_limits(r, r.table(field, LIMITS_KEYS)?)?,
        None => Limits::default(),
    };
    let control = match root.take("control") {
        Some(field) => read_control(r, r.table(field, CONTROL_KEYS)?)?,
        None => Control::default(),
    };
    let metrics = match root.take("metrics") {
        Some(field) => read_metrics(r, r.table(field, METRICS_KEYS)?)?,
        None => Metrics::default(),
    };
    let log = match root.take("log") {
        Some(field) => read_log(r, r.table(field, LOG_KEYS)?)?,
        None => LogConfig::default(),
    };
    let (discovery, discovery_places) = match root.take("discovery") {
        Some(field) => read_discovery(r, r.table(field, DISCOVERY_KEYS)?)?,
        None => (Discovery::default(), None),
    };
    let all_chap: Vec<_> = targets
        .iter()
        .map(|t| t.chap.as_ref())
        .zip(chap_places.iter().map(Option::as_ref))
        .chain(std::iter::once((
            discovery.chap.as_ref(),
            discovery_places.as_ref(),
        )))
        .filter_map(|(c, p)| Some((c?, p?)))
        .collect();
    check_directions(r, &all_chap)?;
    Ok(Config {
        source: source.map(Path::to_path_buf),
        state_dir,
        portals,
        portal_groups,
        defaults,
        targets,
        datapath,
        discovery,
        limits,
        control,
        metrics,
        log,
        store_places,
        portal_places,
    })
}

/// The `[metrics]` table. The listener serves anyone who can reach it, so
/// an address other than loopback must be asked for with `allow_remote`.
fn read_metrics(r: &Reader, mut t: Table) -> Result<Metrics, ConfigError> {
    let enabled = match t.take("enabled") {
        Some(f) => r.bool(&f)?,
        None => true,
    };
    let allow_remote = match t.take("allow_remote") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let listen = match t.take("listen") {
        Some(f) => {
            let text = r.string(&f)?;
            let addr: SocketAddr = text.parse().map_err(|_| {
                r.at(
                    &f,
                    format!("expected an address and port like \"127.0.0.1:9470\", found {text:?}"),
                )
            })?;
            if !addr.ip().is_loopback() && !allow_remote {
                return Err(r.at(
                    &f,
                    format!(
                        "{addr} is reachable from other machines, and the metrics name your \
                         initiators and LUNs: use 127.0.0.1 or [::1], or set allow_remote = true"
                    ),
                ));
            }
            if !enabled {
                return Err(r.at(&f, "a metrics listener needs enabled = true"));
            }
            Some(addr)
        }
        None => None,
    };
    Ok(Metrics { enabled, listen })
}

/// The `[control]` table: `socket = ""` turns the control socket off.
fn read_control(r: &Reader, mut t: Table) -> Result<Control, ConfigError> {
    let socket = match t.take("socket") {
        Some(field) if matches!(&field.node, Node::Str(s) if s.is_empty()) => None,
        Some(field) => Some(r.path(&field)?),
        None => default_control_socket(),
    };
    Ok(Control { socket })
}

/// The shortest `first_pdu_timeout_ms`: connections' timers run once a
/// second, so a shorter one would not be kept.
const FIRST_PDU_TIMEOUT_MIN_MS: i64 = 1000;

/// The `[limits]` table; a key left out keeps its default.
fn read_limits(r: &Reader, mut t: Table) -> Result<Limits, ConfigError> {
    let mut l = Limits::default();
    for (key, slot) in [
        ("connections", &mut l.connections),
        (
            "connections_per_initiator",
            &mut l.connections_per_initiator,
        ),
        ("sessions", &mut l.sessions),
        ("logins", &mut l.logins),
        ("logins_per_initiator", &mut l.logins_per_initiator),
    ] {
        if let Some(f) = t.take(key) {
            *slot = r.int_in(&f, 1, 1_000_000)? as usize;
        }
    }
    if let Some(f) = t.take("first_pdu_timeout_ms") {
        let most = LOGIN_DEADLINE.as_millis() as i64;
        l.first_pdu_timeout_ms = r.int_in(&f, FIRST_PDU_TIMEOUT_MIN_MS, most)? as u64;
    }
    for (key, slot) in [
        ("write_buffer", &mut l.write_buffer),
        ("response_buffer", &mut l.response_buffer),
        ("receive_buffer", &mut l.receive_buffer),
    ] {
        if let Some(f) = t.take(key) {
            let bytes = r.size(&f)?;
            *slot = usize::try_from(bytes)
                .ok()
                .filter(|&b| b >= 1 << 20)
                .ok_or_else(|| r.wrong_type(&f, "a size of at least 1 MiB"))?;
        }
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok(l)
}

/// The `[discovery]` table; also returns where its CHAP secrets were written.
fn read_discovery(
    r: &Reader,
    mut t: Table,
) -> Result<(Discovery, Option<ChapPlaces>), ConfigError> {
    let (chap, places) = match t.take("chap") {
        Some(f) => {
            let (c, p) = read_chap(r, f)?;
            (Some(c), Some(p))
        }
        None => (None, None),
    };
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok((Discovery { chap }, places))
}

/// The `[datapath]` table; a key left out keeps its default.
fn read_datapath(r: &Reader, mut t: Table) -> Result<Datapath, ConfigError> {
    let mut d = Datapath::default();
    if let Some(f) = t.take("batching") {
        d.batching = r.bool(&f)?;
    }
    if let Some(f) = t.take("crc") {
        d.crc = match r.string(&f)?.as_str() {
            "hardware" => Crc32cImpl::Hardware,
            "instruction" => Crc32cImpl::Instruction,
            "software" => Crc32cImpl::Software,
            other => {
                return Err(r.at(
                    &f,
                    format!(
                        "expected \"hardware\", \"instruction\" or \"software\", found {other:?}"
                    ),
                ))
            }
        };
    }
    if let Some(f) = t.take("buffer_pool") {
        d.buffer_pool = r.bool(&f)?;
    }
    if let Some(f) = t.take("workers") {
        d.workers = r.int_in(&f, 0, THREADS_MAX as i64)? as usize;
    }
    if let Some(f) = t.take("io_threads") {
        d.io_threads = r.int_in(&f, 0, THREADS_MAX as i64)? as usize;
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    Ok(d)
}

/// Applies the parameters of `table` over `base`, then checks the
/// FirstBurstLength <= MaxBurstLength rule against the result.
fn read_params(r: &Reader, mut t: Table, base: &Params) -> Result<Params, ConfigError> {
    let mut p = base.clone();
    let (min, max) = (MIN_LENGTH_BYTES, MAX_LENGTH_BYTES);
    if let Some(f) = t.take("max_recv_data_segment_length") {
        p.max_recv_data_segment_length = r.u32_in(&f, min, max)?;
    }
    let max_burst = t.take("max_burst_length");
    if let Some(f) = &max_burst {
        p.max_burst_length = r.u32_in(f, min, max)?;
    }
    let first_burst = t.take("first_burst_length");
    if let Some(f) = &first_burst {
        p.first_burst_length = r.u32_in(f, min, max)?;
    }
    if let Some(f) = t.take("immediate_data") {
        p.immediate_data = r.bool(&f)?;
    }
    if let Some(f) = t.take("initial_r2t") {
        p.initial_r2t = r.bool(&f)?;
    }
    if let Some(f) = t.take("max_connections") {
        p.max_connections = r.u16_in(&f, 1, MAX_CONNECTIONS)?;
    }
    if let Some(f) = t.take("max_outstanding_r2t") {
        p.max_outstanding_r2t = r.u16_in(&f, 1, u16::MAX)?;
    }
    if let Some(f) = t.take("header_digest") {
        p.header_digest = read_digests(r, f)?;
    }
    if let Some(f) = t.take("data_digest") {
        p.data_digest = read_digests(r, f)?;
    }
    if let Some(f) = t.take("nop_in_interval_s") {
        p.nop_in_interval_s = r.u32_in(&f, 0, MAX_NOP_IN_S)?;
    }
    if let Some(f) = t.take("nop_in_timeout_s") {
        p.nop_in_timeout_s = r.u32_in(&f, 1, MAX_NOP_IN_S)?;
    }
    debug_assert!(t.entries.is_empty(), "deny_unknown ran on the table");
    if p.first_burst_length > p.max_burst_length {
        // Blame the key this table set; `base` satisfied the rule on its own.
        let (key, offset) = match first_burst.as_ref().or(max_burst.as_ref()) {
            Some(f) => (f.key.clone(), f.offset),
            None => (t.key.clone(), t.offset),
        };
        return Err(r.invalid(
            offset,
            &key,
            format!(
                "first_burst_length {} exceeds max_burst_length {} (RFC 7143 §13.14)",
                p.first_burst_length, p.max_burst_length
            ),
        ));
    }
    Ok(p)
}

/// `"CRC32C"`, or a list like `["None", "CRC32C"]` in order of preference.
fn read_digests(r: &Reader, field: Field) -> Result<Vec<DigestChoice>, ConfigError> {
    let read_digest = |item: &Field| -> Result<DigestChoice, ConfigError> {
        match r.string(item)?.as_str() {
            "None" => Ok(DigestChoice::None),
            "CRC32C" => Ok(DigestChoice::Crc32c),
            other => Err(r.at(
                item,
                format!("expected \"None\" or \"CRC32C\", found {other:?}"),
            )),
        }
    };
    if let Node::Str(_) = field.node {
        return Ok(vec![read_digest(&field)?]);
    }
    r.distinct(
        field,
        "a list like [\"None\", \"CRC32C\"]",
        "at least one of \"None\" and \"CRC32C\" is needed",
        read_digest,
        DigestChoice::to_string,
    )
}

/// Reads one `[[target]]`; also returns its `name` field for duplicate checks
/// and where its CHAP secrets were written.
fn read_target(
    r: &Reader,
    mut t: Table,
    defaults: &Params,
    store_places: &mut StorePlaces,
) -> Result<(TargetConfig, Field, Option<ChapPlaces>), ConfigError> {
    let name_field = r.required(&mut t, "name", "every target needs an iSCSI name")?;
    let name = r.string(&name_field)?;
    checks::check_iscsi_name(&name).map_err(|message| r.at(&name_field, message))?;
    let alias = match t.take("alias") {
        Some(f) => Some(read_alias(r, &f)?),
        None => None,
    };
    let mut allowed_initiators = Vec::new();
    if let Some(f) = t.take("allowed_initiators") {
        for item in r.array(f, "an array of initiator names")? {
            let initiator = r.string(&item)?;
            checks::check_iscsi_name(&initiator).map_err(|message| r.at(&item, message))?;
            allowed_initiators.push(initiator);
        }
    }
    let (chap, chap_places) = match t.take("chap") {
        Some(f) => {
            let (c, p) = read_chap(r, f)?;
            (Some(c), Some(p))
        }
        None => (None, None),
    };
    let params = match t.take("params") {
        Some(f) => read_params(r, r.table(f, PARAM_KEYS)?, defaults)?,
        None => defaults.clone(),
    };
    let mut luns: Vec<LunSpec> = Vec::new();
    let mut first_line_of: HashMap<u16, usize> = HashMap::new();
    if let Some(f) = t.take("lun") {
        for table in r.tables(f, LUN_KEYS)? {
            let (lun, number_field, store_field) = read_lun(r, table)?;
            if let StoreSpec::Memory { size_bytes, .. } = lun.store {
                if let Some(message) = checks::memory_lun_too_large(size_bytes) {
                    return Err(r.invalid(store_field.offset, &store_field.key, message));
                }
            }
            if let Some(line) = first_line_of.get(&lun.number) {
                return Err(r.at(
                    &number_field,
                    format!("LUN {} is already defined at line {line}", lun.number),
                ));
            }
            first_line_of.insert(lun.number, r.line(number_field.offset));
            let place = KeyPlace {
                line: r.line(store_field.offset),
                key: store_field.key,
            };
            store_places.insert(&name, lun.number, place);
            luns.push(lun);
        }
    }
    Ok((
        TargetConfig {
            name,
            alias,
            allowed_initiators,
            chap,
            params,
            luns,
        },
        name_field,
        chap_places,
    ))
}

/// RFC 7143 §13.6: TargetAlias is UTF-8 text of at most 255 bytes.
fn read_alias(r: &Reader, field: &Field) -> Result<String, ConfigError> {
    let alias = r.string(field)?;
    if alias.is_empty() || alias.len() > 255 || alias.chars().any(char::is_control) {
        return Err(r.at(
            field,
            "an alias is 1 to 255 bytes of text without control characters",
        ));
    }
    Ok(alias)
}

/// Reads one `[[target.lun]]`; also returns its `number` field for
/// duplicate checks and where its store key is, for the checks made later.
fn read_lun(r: &Reader, mut t: Table) -> Result<(LunSpec, Field, StoreField), ConfigError> {
    let number_field = r.required(
        &mut t,
        "number",
        &format!("every LUN needs a number, 0..={MAX_LUN_NUMBER}"),
    )?;
    let number = r.u16_in(&number_field, 0, MAX_LUN_NUMBER)?;
    let block_size = match t.take("block_size") {
        Some(f) => match f.node {
            Node::Int(512) => 512,
            Node::Int(4096) => 4096,
            _ => return Err(r.wrong_type(&f, "a block size of 512 or 4096")),
        },
        None => 512,
    };
    let physical_block_size = match t.take("physical_block_size") {
        Some(f) => match f.node {
            Node::Int(v)
                if (i64::from(block_size)..=1 << 16).contains(&v) && v.count_ones() == 1 =>
            {
                Some(v as u32)
            }
            _ => {
                return Err(r.wrong_type(
                    &f,
                    &format!("a power of two from the block size {block_size} to 65536"),
                ))
            }
        },
        None => None,
    };
    let sanitize_bytes_per_s = match t.take("sanitize_bytes_per_s") {
        Some(f) => Some(r.size(&f)?),
        None => None,
    };
    let read_only = match t.take("read_only") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let serial = match t.take("serial") {
        Some(f) => Some(read_serial(r, &f)?),
        None => None,
    };
    let naa = match t.take("naa") {
        Some(f) => Some(checks::parse_naa(&r.string(&f)?).map_err(|message| r.at(&f, message))?),
        None => None,
    };
    let offline = match t.take("offline") {
        Some(f) => r.bool(&f)?,
        None => false,
    };
    let overcommit = match t.take("overcommit") {
        Some(f) => Some((r.bool(&f)?, f)),
        None => None,
    };
    let (mut store, store_place) = read_store(r, &mut t, block_size)?;
    match (&mut store, overcommit) {
        (StoreSpec::Memory { overcommit, .. }, Some((value, _))) => *overcommit = value,
        (_, Some((_, f))) => {
            return Err(r.at(
                &f,
                "`overcommit` applies only to a memory LUN: a file or block LUN \
                 takes no RAM",
            ))
        }
        (_, None) => {}
    }
    let lun = LunSpec {
        number,
        store,
        read_only,
        block_size,
        physical_block_size,
        sanitize_bytes_per_s,
        serial,
        naa,
        offline,
    };
    Ok((lun, number_field, store_place))
}

/// Exactly one of `memory`, `file`, `block`, and the `size` that goes with
/// it; also returns where that key is. What the store is on disk or in RAM
/// is checked when the LUNs are provisioned
/// ([`crate::provision::check_stores`]).
fn read_store(
    r: &Reader,
    t: &mut Table,
    block_size: u32,
) -> Result<(StoreSpec, StoreField), ConfigError> {
    let mut kinds: Vec<Field> = ["memory", "file", "block", "rbd"]
        .iter()
        .filter_map(|k| t.take(k))
        .collect();
    let size = t.take("size");
    let ceph: Vec<Field> = ["ceph_conf", "ceph_id", "ceph_keyring"]
        .iter()
        .filter_map(|k| t.take(k))
        .collect();
    // Report the one written second, in file order.
    kinds.sort_by_key(|f| f.offset);
    let field = match kinds.len() {
        0 => {
            return Err(r.invalid(
                t.offset,
                &t.key,
                "a LUN needs exactly one of `memory = \"1GiB\"`, \
                 `file = \"PATH\"`, `block = \"/dev/...\"` or `rbd = \"pool/image\"`",
            ))
        }
        1 => kinds.pop().expect("one"),
        _ => {
            let first = kinds[0].key.rsplit('.').next().unwrap_or("").to_string();
            let second = &kinds[1];
            let this = second.key.rsplit('.').next().unwrap_or("");
            let message =
                format!("a LUN has exactly one store, but both {first} and {this} are given");
            return Err(r.at(second, message));
        }
    };
    let sized = |f: &Field| -> Result<u64, ConfigError> {
        let bytes = r.size(f)?;
        if bytes % u64::from(block_size) != 0 {
            return Err(r.at(
                f,
                format!("{bytes} bytes is not a multiple of the block size {block_size}"),
            ));
        }
        Ok(bytes)
    };
    let kind = field.key.rsplit('.').next().unwrap_or("");
    if let (Some(size), "memory" | "block") = (&size, kind) {
        let why = if kind == "memory" {
            "`memory` is the size"
        } else {
            "a block device has its own size"
        };
        return Err(r.at(
            size,
            format!("`size` does not apply to a {kind} LUN: {why}"),
        ));
    }
    if let (Some(f), false) = (ceph.first(), kind == "rbd") {
        let key = f.key.rsplit('.').next().unwrap_or("");
        return Err(r.at(f, format!("`{key}` applies only to an rbd LUN")));
    }
    let place = StoreField {
        key: field.key.clone(),
        offset: field.offset,
    };
    let store = match kind {
        "rbd" => StoreSpec::Rbd(read_rbd(
            r,
            &field,
            &ceph,
            size.as_ref().map(sized).transpose()?,
        )?),
        "memory" => StoreSpec::Memory {
            size_bytes: sized(&field)?,
            overcommit: false,
        },
        "file" => StoreSpec::File {
            path: r.path(&field)?,
            size_bytes: size.as_ref().map(sized).transpose()?,
        },
        _ => StoreSpec::Block {
            path: r.path(&field)?,
        },
    };
    Ok((store, place))
}

/// An rbd LUN's image and cluster.
fn read_rbd(
    r: &Reader,
    field: &Field,
    ceph: &[Field],
    create_bytes: Option<u64>,
) -> Result<isoe_rbd::RbdSpec, ConfigError> {
    let (pool, namespace, image) =
        isoe_rbd::RbdSpec::parse_name(&r.string(field)?).map_err(|message| r.at(field, message))?;
    let mut cluster = isoe_rbd::ClusterSpec {
        conf: PathBuf::from("/etc/ceph/ceph.conf"),
        id: "admin".to_string(),
        keyring: None,
    };
    for f in ceph {
        match f.key.rsplit('.').next().unwrap_or("") {
            "ceph_conf" => cluster.conf = r.path(f)?,
            "ceph_keyring" => cluster.keyring = Some(r.path(f)?),
            _ => {
                let id = r.string(f)?;
                let printable = id.bytes().all(|b| b.is_ascii_graphic());
                if id.is_empty() || !printable || id.starts_with("client.") {
                    return Err(r.at(
                        f,
                        format!("expected a client id such as \"admin\" (for client.admin), found {id:?}"),
                    ));
                }
                cluster.id = id;
            }
        }
    }
    Ok(isoe_rbd::RbdSpec {
        cluster,
        pool,
        namespace,
        image,
        create_bytes,
    })
}

/// VPD page 0x80 serial: printable ASCII, 1 to 32 characters, no edge spaces.
fn read_serial(r: &Reader, field: &Field) -> Result<String, ConfigError> {
    let serial = r.string(field)?;
    let printable = serial.bytes().all(|b| (0x20..=0x7e).contains(&b));
    if serial.is_empty() || serial.len() > 32 || !printable || serial.trim() != serial {
        return Err(r.at(
            field,
            format!(
                "a serial is 1 to 32 printable ASCII characters \
                 without leading or trailing spaces, found {serial:?}"
            ),
        ));
    }
    Ok(serial)
}

/// Where a LUN's store key was, for the errors found after it was read.
struct StoreField {
    key: String,
    offset: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let r = Reader::new("a\nbb\n\nc", None);
        assert_eq!(
            [
                r.line(0),
                r.line(1),
                r.line(2),
                r.line(4),
                r.line(5),
                r.line(6)
            ],
            [1, 1, 2, 2, 3, 4]
        );
    }

    #[test]
    fn embedded_default_is_valid_config() {
        let c = Config::embedded_default();
        assert_eq!(c.portals, vec!["127.0.0.1:3260".parse().unwrap()]);
        assert_eq!(checks::check_iscsi_name(&c.targets[0].name), Ok(()));
        assert_eq!(
            c.targets[0].luns[0].store,
            StoreSpec::Memory {
                size_bytes: 1 << 30,
                overcommit: false,
            }
        );
    }
}
