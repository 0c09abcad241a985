//! A [`Snapshot`] in Prometheus's text exposition format (version 0.0.4),
//! and the small HTTP listener that serves it ([`Listener`]).
//!
//! Names (every counter is cumulative since the target started; a target
//! is the sum of its LUNs: `sum by (target)`):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `isoe_lun_commands_total` | counter | target, lun, op (read, write, unmap, write_same, sync_cache, other) |
//! | `isoe_lun_bytes_total` | counter | target, lun, op (read, write) |
//! | `isoe_lun_range_bytes_total` | counter | target, lun, op (unmap, write_same) |
//! | `isoe_lun_latency_seconds` | histogram | target, lun, op (read, write) |
//! | `isoe_lun_stage_seconds` | histogram | target, lun, op (read, write), stage (receipt_to_store, store, store_to_sent) |
//! | `isoe_lun_errors_total` | counter | target, lun, error (a sense key, or reservation_conflict, busy, task_set_full) |
//! | `isoe_lun_unwritten_read_bytes_total` | counter | target, lun (only LUNs whose store counts it: memory) |
//! | `isoe_session_commands_total`, `isoe_session_bytes_total` | counter | target, initiator, tsih, op |
//! | `isoe_session_latency_seconds` | histogram | target, initiator, tsih, op |
//! | `isoe_connection_commands_total`, `isoe_connection_bytes_total` | counter | target, initiator, tsih, cid, address, op |
//! | `isoe_r2t_total` | counter | target |
//! | `isoe_task_management_total` | counter | target, function |
//! | `isoe_digest_errors_total` | counter | target, digest (header, data) |
//! | `isoe_rejects_total` | counter | target |
//! | `isoe_commands_no_lun_total` | counter | target |
//! | `isoe_logins_total` | counter | outcome (normal, discovery, authentication_failure, authorization_failure, not_found, out_of_resources, other_refusal) |
//! | `isoe_connection_refusals_total` | counter | limit |
//! | `isoe_connection_evictions_total` | counter | limit |
//! | `isoe_resource_in_use`, `isoe_resource_limit` | gauge | resource (connections, logins, sessions, write_buffer, response_buffer, receive_buffer) |

pub(crate) mod listener;

pub use listener::Listener;

use super::snapshot::Snapshot;
use super::{LunTotals, OpTotals, LATENCY_BUCKETS_US};
use std::fmt::Write as _;

/// Text being built, a family at a time.
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], t: &OpTotals) {
        self.buckets(
            name,
            labels,
            &t.latency_buckets,
            t.latency_sum_ns,
            t.commands,
        );
    }

    /// A histogram of [`LATENCY_BUCKETS_US`] counts (not cumulative).
    fn buckets(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        buckets: &[u64],
        sum_ns: u64,
        count: u64,
    ) {
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, bound) in LATENCY_BUCKETS_US.iter().enumerate() {
            cumulative += buckets.get(i).copied().unwrap_or(0);
            let le = format!("{}", *bound as f64 / 1e6);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, count);
        self.sample(&format!("{name}_sum"), labels, sum_ns as f64 / 1e9);
        self.sample(&format!("{name}_count"), labels, count);
    }
}

/// A label value as the text format writes it: `\`, `"` and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn ops(t: &LunTotals) -> [(&'static str, &OpTotals); 2] {
    [("read", &t.read), ("write", &t.write)]
}

/// What a family reports of an op's totals.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Figure {
    Commands,
    Bytes,
    Latency,
}

/// The per-op families: name suffix, type, help, figure.
const FIGURES: [(&str, &str, &str, Figure); 3] = [
    (
        "commands_total",
        "counter",
        "SCSI commands completed",
        Figure::Commands,
    ),
    (
        "bytes_total",
        "counter",
        "Bytes read (Data-In sent) and written (Data-Out taken)",
        Figure::Bytes,
    ),
    (
        "latency_seconds",
        "histogram",
        "From the batch that took a command to the send of its response",
        Figure::Latency,
    ),
];

impl Text {
    fn figure(&mut self, name: &str, labels: &[(&str, &str)], o: &OpTotals, figure: Figure) {
        match figure {
            Figure::Commands => self.sample(name, labels, o.commands),
            Figure::Bytes => self.sample(name, labels, o.bytes),
            Figure::Latency => self.histogram(name, labels, o),
        }
    }
}

/// `snapshot` in the text exposition format.
pub fn render(s: &Snapshot) -> String {
    let mut out = Text(String::new());
    lun_families(&mut out, s);
    media_families(&mut out, s);
    session_families(&mut out, s);
    target_families(&mut out, s);
    server_families(&mut out, s);
    out.0
}

/// The families by LUN: the figures of each operation, the sampled
/// stages, the ranges UNMAP and WRITE SAME covered, the errors.
fn lun_families(out: &mut Text, s: &Snapshot) {
    for (suffix, kind, help, figure) in FIGURES {
        let name = format!("isoe_lun_{suffix}");
        out.family(&name, kind, &format!("{help}, by LUN."));
        for (target, luns) in &s.luns {
            for (lun, t) in luns {
                let lun = lun.to_string();
                for (op, o) in ops(t) {
                    let labels = [("target", target.as_str()), ("lun", &lun), ("op", op)];
                    out.figure(&name, &labels, o, figure);
                }
                if figure == Figure::Commands {
                    for (op, n) in [
                        ("unmap", t.unmap.commands),
                        ("write_same", t.write_same.commands),
                        ("sync_cache", t.sync_cache),
                        ("other", t.other),
                    ] {
                        let labels = [("target", target.as_str()), ("lun", &lun), ("op", op)];
                        out.sample(&name, &labels, n);
                    }
                }
            }
        }
    }
    out.family(
        "isoe_lun_stage_seconds",
        "histogram",
        "A sample of commands (one in 64 per connection) split at the store: \
         receipt_to_store, store, store_to_sent, by LUN.",
    );
    for (target, luns) in &s.luns {
        for (lun, t) in luns {
            let lun = lun.to_string();
            for (op, o) in ops(t) {
                for (stage, h) in o.stages.named() {
                    let labels = [
                        ("target", target.as_str()),
                        ("lun", &lun),
                        ("op", op),
                        ("stage", stage),
                    ];
                    out.buckets(
                        "isoe_lun_stage_seconds",
                        &labels,
                        &h.buckets,
                        h.sum_ns,
                        h.count,
                    );
                }
            }
        }
    }
    // Apart from isoe_lun_bytes_total: a trim of a whole disk moves no
    // data, and must not read as throughput.
    out.family(
        "isoe_lun_range_bytes_total",
        "counter",
        "Bytes of the medium that UNMAP deallocated and WRITE SAME wrote or deallocated \
         (blocks times block size; commands that completed GOOD), by LUN.",
    );
    for (target, luns) in &s.luns {
        for (lun, t) in luns {
            let lun = lun.to_string();
            for (op, o) in [("unmap", &t.unmap), ("write_same", &t.write_same)] {
                let labels = [("target", target.as_str()), ("lun", &lun), ("op", op)];
                out.sample("isoe_lun_range_bytes_total", &labels, o.bytes);
            }
        }
    }
    out.family(
        "isoe_lun_errors_total",
        "counter",
        "Commands that ended in CHECK CONDITION (by sense key) or another error status.",
    );
    for (target, luns) in &s.luns {
        for (lun, t) in luns {
            let lun = lun.to_string();
            for (error, n) in t.sense.iter().chain(&t.status) {
                let labels = [("target", target.as_str()), ("lun", &lun), ("error", error)];
                out.sample("isoe_lun_errors_total", &labels, n);
            }
        }
    }
}

/// The families of what each LUN's store counts of its own. A store that
/// cannot tell (a file, an RBD image) has no series rather than a 0 that
/// would read as "none".
fn media_families(out: &mut Text, s: &Snapshot) {
    const NAME: &str = "isoe_lun_unwritten_read_bytes_total";
    out.family(
        NAME,
        "counter",
        "Bytes read from blocks never written (or deallocated since): zeros made on the fly, \
         not the medium; since the LUN's store was created, by LUN.",
    );
    for (target, luns) in &s.media {
        for (lun, m) in luns {
            if let Some(bytes) = m.unwritten_read_bytes {
                let lun = lun.to_string();
                out.sample(NAME, &[("target", target.as_str()), ("lun", &lun)], bytes);
            }
        }
    }
}

/// The families by session and by connection.
fn session_families(out: &mut Text, s: &Snapshot) {
    for (suffix, kind, help, figure) in FIGURES {
        let name = format!("isoe_session_{suffix}");
        out.family(
            &name,
            kind,
            &format!("{help}, by session (its connections now and those gone)."),
        );
        for session in &s.sessions {
            let tsih = session.tsih.to_string();
            for (op, o) in ops(&session.totals) {
                let labels = [
                    ("target", session.target.as_str()),
                    ("initiator", &session.initiator),
                    ("tsih", &tsih),
                    ("op", op),
                ];
                out.figure(&name, &labels, o, figure);
            }
        }
    }
    for (suffix, kind, help, figure) in &FIGURES[..2] {
        let name = format!("isoe_connection_{suffix}");
        out.family(&name, kind, &format!("{help}, by connection."));
        for session in &s.sessions {
            for c in &session.connections {
                let (tsih, cid) = (c.tsih.to_string(), c.cid.to_string());
                for (op, o) in ops(&c.totals) {
                    let labels = [
                        ("target", session.target.as_str()),
                        ("initiator", &session.initiator),
                        ("tsih", &tsih),
                        ("cid", &cid),
                        ("address", &c.address),
                        ("op", op),
                    ];
                    out.figure(&name, &labels, o, *figure);
                }
            }
        }
    }
}

/// The families by target: R2Ts, task management, digest errors,
/// rejects, commands to no LUN.
fn target_families(out: &mut Text, s: &Snapshot) {
    out.family("isoe_r2t_total", "counter", "R2Ts sent, by target.");
    for (target, t) in &s.targets {
        out.sample("isoe_r2t_total", &[("target", target)], t.r2t);
    }
    out.family(
        "isoe_task_management_total",
        "counter",
        "Task management requests, by target and function.",
    );
    for (target, t) in &s.targets {
        for (function, n) in &t.tmf {
            let labels = [("target", target.as_str()), ("function", function)];
            out.sample("isoe_task_management_total", &labels, n);
        }
    }
    out.family(
        "isoe_digest_errors_total",
        "counter",
        "PDUs whose header or data digest did not match, by target.",
    );
    for (target, t) in &s.targets {
        let header = [("target", target.as_str()), ("digest", "header")];
        out.sample("isoe_digest_errors_total", &header, t.header_digest_errors);
        let data = [("target", target.as_str()), ("digest", "data")];
        out.sample("isoe_digest_errors_total", &data, t.data_digest_errors);
    }
    out.family(
        "isoe_rejects_total",
        "counter",
        "Reject PDUs sent, by target.",
    );
    for (target, t) in &s.targets {
        out.sample("isoe_rejects_total", &[("target", target)], t.rejects);
    }
    out.family(
        "isoe_commands_no_lun_total",
        "counter",
        "Commands to a LUN the target does not have (never counted per LUN), by target.",
    );
    for (target, t) in &s.targets {
        out.sample(
            "isoe_commands_no_lun_total",
            &[("target", target)],
            t.commands_no_lun,
        );
    }
}

/// The server's own families: logins, refused and evicted connections,
/// the `[limits]` resources.
fn server_families(out: &mut Text, s: &Snapshot) {
    out.family(
        "isoe_logins_total",
        "counter",
        "Logins accepted (normal, discovery) and refused, by reason.",
    );
    for (outcome, n) in &s.logins {
        out.sample("isoe_logins_total", &[("outcome", outcome)], n);
    }
    out.family(
        "isoe_connection_refusals_total",
        "counter",
        "Connections closed before login, by the [limits] key that refused them.",
    );
    for (limit, n) in &s.connection_refusals {
        out.sample("isoe_connection_refusals_total", &[("limit", limit)], n);
    }
    out.family(
        "isoe_connection_evictions_total",
        "counter",
        "Connections closed while logging in (silent, or stalled on their peer) to make room for a new one, by the [limits] key that bound.",
    );
    for (limit, n) in &s.connection_evictions {
        out.sample("isoe_connection_evictions_total", &[("limit", limit)], n);
    }
    out.family(
        "isoe_resource_in_use",
        "gauge",
        "What a [limits] bound counts, now.",
    );
    for r in &s.resources {
        out.sample("isoe_resource_in_use", &[("resource", &r.name)], r.in_use);
    }
    out.family(
        "isoe_resource_limit",
        "gauge",
        "The [limits] bound of each resource.",
    );
    for r in &s.resources {
        out.sample("isoe_resource_limit", &[("resource", &r.name)], r.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evictions_are_served_beside_refusals() {
        let text =
            "[limits]\nlogins_per_initiator = 1\n[[target]]\nname = \"iqn.2026-11.io.isoe:m\"\n";
        let config = crate::config::Config::parse(text, None).expect("config");
        let server = crate::registry::Server::new(config).expect("server");
        let peer = "10.0.0.1".parse().unwrap();
        let now = std::time::Instant::now();
        assert_eq!(
            server.gate.admit_connection(peer, 1, now).map(|e| e.len()),
            Ok(0)
        );
        assert_eq!(
            server.gate.admit_connection(peer, 2, now).map(|e| e.len()),
            Ok(1)
        );
        let s = super::super::snapshot::snapshot(&server);
        assert_eq!(s.connection_evictions["logins"], 1);
        assert_eq!(s.connection_evictions["connections"], 0);
        let served = render(&s);
        assert!(
            served.contains("isoe_connection_evictions_total{limit=\"logins\"} 1\n"),
            "{served}"
        );
        assert!(served.contains("isoe_connection_refusals_total{limit=\"logins\"} 0\n"));
    }

    #[test]
    fn unmap_write_same_and_sync_cache_are_served_per_lun() {
        let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:m\"\n";
        let config = crate::config::Config::parse(text, None).expect("config");
        let server = crate::registry::Server::new(config).expect("server");
        let mut s = super::super::snapshot::snapshot(&server);
        let mut lun = crate::metrics::LunTotals::default();
        lun.unmap.commands = 3;
        lun.unmap.bytes = 5 << 20;
        lun.write_same.commands = 2;
        lun.write_same.bytes = 8192;
        lun.sync_cache = 7;
        lun.other = 1;
        s.luns
            .entry("iqn.2026-11.io.isoe:m".into())
            .or_default()
            .insert(4, lun);
        let served = render(&s);
        let t = "target=\"iqn.2026-11.io.isoe:m\",lun=\"4\"";
        for line in [
            format!("isoe_lun_commands_total{{{t},op=\"unmap\"}} 3\n"),
            format!("isoe_lun_commands_total{{{t},op=\"write_same\"}} 2\n"),
            format!("isoe_lun_commands_total{{{t},op=\"sync_cache\"}} 7\n"),
            format!("isoe_lun_commands_total{{{t},op=\"other\"}} 1\n"),
            format!("isoe_lun_range_bytes_total{{{t},op=\"unmap\"}} 5242880\n"),
            format!("isoe_lun_range_bytes_total{{{t},op=\"write_same\"}} 8192\n"),
        ] {
            assert!(served.contains(&line), "{line} not in:\n{served}");
        }
        assert!(served.contains("# TYPE isoe_lun_range_bytes_total counter\n"));
        assert!(
            !served.contains(
                "isoe_lun_bytes_total{target=\"iqn.2026-11.io.isoe:m\",lun=\"4\",op=\"unmap\"}"
            ),
            "an unmap moves no data"
        );
    }

    #[test]
    fn unwritten_reads_are_served_for_the_luns_whose_store_counts_them() {
        let text = "[[target]]\nname = \"iqn.2026-11.io.isoe:m\"\n";
        let config = crate::config::Config::parse(text, None).expect("config");
        let server = crate::registry::Server::new(config).expect("server");
        let mut s = super::super::snapshot::snapshot(&server);
        let luns = s.media.entry("iqn.2026-11.io.isoe:m".into()).or_default();
        let counted = |bytes| crate::metrics::MediaTotals {
            unwritten_read_bytes: bytes,
        };
        luns.insert(0, counted(Some(1 << 20)));
        luns.insert(1, counted(None));
        let served = render(&s);
        assert!(served.contains(
            "# HELP isoe_lun_unwritten_read_bytes_total Bytes read from blocks never written"
        ));
        assert!(served.contains("# TYPE isoe_lun_unwritten_read_bytes_total counter\n"));
        assert!(served.contains(
            "isoe_lun_unwritten_read_bytes_total{target=\"iqn.2026-11.io.isoe:m\",lun=\"0\"} 1048576\n"
        ));
        assert!(
            !served.contains(
                "isoe_lun_unwritten_read_bytes_total{target=\"iqn.2026-11.io.isoe:m\",lun=\"1\"}"
            ),
            "a store that cannot tell has no series: {served}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn a_histogram_is_cumulative_and_ends_at_its_count() {
        let mut t = Text(String::new());
        let mut o = OpTotals {
            commands: 3,
            bytes: 0,
            latency_buckets: vec![0; LATENCY_BUCKETS_US.len() + 1],
            latency_sum_ns: 1_500_000,
            stages: Default::default(),
        };
        o.latency_buckets[0] = 1;
        o.latency_buckets[2] = 1;
        o.latency_buckets[LATENCY_BUCKETS_US.len()] = 1;
        t.histogram("h", &[("op", "read")], &o);
        assert!(
            t.0.contains("h_bucket{op=\"read\",le=\"0.000025\"} 1\n"),
            "{}",
            t.0
        );
        assert!(
            t.0.contains("h_bucket{op=\"read\",le=\"0.0001\"} 2\n"),
            "{}",
            t.0
        );
        assert!(
            t.0.contains("h_bucket{op=\"read\",le=\"30\"} 2\n"),
            "{}",
            t.0
        );
        assert!(
            t.0.contains("h_bucket{op=\"read\",le=\"+Inf\"} 3\n"),
            "{}",
            t.0
        );
        assert!(t.0.contains("h_sum{op=\"read\"} 0.0015\n"), "{}", t.0);
        assert!(t.0.contains("h_count{op=\"read\"} 3\n"), "{}", t.0);
    }
}
