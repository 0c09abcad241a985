//! The floor: a case with `floor = true` runs raw TCP exchanges of each
//! workload's sizes (`isoe netprobe`, [`crate::rr`]) instead of iSCSI, at
//! the connections and depth the workload's iSCSI run has: what the network
//! alone costs each end, beside what the targets and initiators cost on
//! top of it (METHODOLOGY.md, "the floor").
//!
//! The shape: `isoe bench` opens `sessions` sessions of `connections`
//! connections per URL (one URL per portal), and the sessions share the
//! queue depth; so the floor opens as many connections and keeps `qd /
//! (sessions x connections)` exchanges in flight on each, all to the first
//! portal from one thread. A read is a 48-byte command out and the data
//! with its 48-byte header back; a write the reverse. A mix of the two, an
//! application or more than one worker has no raw-TCP equivalent here, and
//! the plan says so.

use crate::knobs::KnobSet;
use crate::record::{FloorShape, RunResult};
use crate::rr::LoadFigures;
use crate::sampled::{sampled_result, Rates, Sample};
use crate::shape::WorkloadShape;
use isoe_bench::{DirectionResult, LatencySummary};

/// A PDU's Basic Header Segment, what a command or a status costs on the wire.
pub const BHS_BYTES: u32 = 48;

/// Why a workload has no raw-TCP equivalent ([`FloorJob::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoFloor {
    /// More than one worker: the floor loads from one thread.
    #[error("the floor loads from one thread, as one worker does; this workload has {0} workers")]
    Workers(u32),
    /// Reads and writes mixed: the floor has one exchange size.
    #[error("the floor has one exchange size; a workload of {0}% reads mixes two")]
    Mixed(u8),
    /// The queue depth does not share evenly over the connections.
    #[error("QD {queue_depth} does not share evenly over {connections} connections")]
    UnevenDepth {
        /// The workload's queue depth.
        queue_depth: u32,
        /// The connections of a portal.
        connections: u32,
    },
}

/// One floor run: what `isoe netprobe` is asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloorJob {
    /// TCP connections, all driven by one thread.
    pub connections: u32,
    /// Exchanges in flight on each.
    pub depth: u32,
    /// Bytes out per exchange.
    pub request: u32,
    /// Bytes back per exchange.
    pub response: u32,
    /// Data bytes per exchange (the command's transfer).
    pub data_bytes: u32,
    /// True when the data goes out (a write).
    pub write: bool,
    pub duration_s: f64,
    pub ramp_s: f64,
}

impl FloorJob {
    /// The job of a workload of `shape` under `knobs` against `portals`
    /// portals, or why it has none.
    pub fn new(
        shape: &WorkloadShape,
        knobs: &KnobSet,
        portals: u32,
        duration_s: f64,
        ramp_s: f64,
    ) -> Result<FloorJob, NoFloor> {
        if shape.workers != 1 {
            return Err(NoFloor::Workers(shape.workers));
        }
        let write = match shape.read_pct {
            100 => false,
            0 => true,
            pct => return Err(NoFloor::Mixed(pct)),
        };
        let per_portal = knobs.sessions.unwrap_or(1) * knobs.connections.unwrap_or(1);
        if !shape.queue_depth.is_multiple_of(per_portal) {
            return Err(NoFloor::UnevenDepth {
                queue_depth: shape.queue_depth,
                connections: per_portal,
            });
        }
        let data = shape.block_size_bytes;
        let (request, response) = if write {
            (BHS_BYTES + data, BHS_BYTES)
        } else {
            (BHS_BYTES, BHS_BYTES + data)
        };
        Ok(FloorJob {
            connections: per_portal * portals.max(1),
            depth: shape.queue_depth / per_portal,
            request,
            response,
            data_bytes: data,
            write,
            duration_s,
            ramp_s,
        })
    }

    /// `isoe netprobe`'s arguments after the binary, to the server at `addr`.
    pub fn args(&self, addr: &str) -> Vec<String> {
        [
            "netprobe",
            addr,
            "--duration",
            &self.duration_s.to_string(),
            "--ramp",
            &self.ramp_s.to_string(),
            "--connections",
            &self.connections.to_string(),
            "--depth",
            &self.depth.to_string(),
            "--request",
            &self.request.to_string(),
            "--response",
            &self.response.to_string(),
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// An `isoe bench` result of `isoe netprobe`'s figures, with the CPU
    /// and TCP counters the lab sampled over the window (`first`, `last`;
    /// the server as the target): each exchange counts as an I/O of the
    /// workload's size, in its direction; the other direction did nothing
    /// (no commands, so bench's zeros for their latency).
    pub fn result(
        &self,
        netprobe: &LoadFigures,
        first: &Sample,
        last: &Sample,
        server_pid: Option<u32>,
    ) -> RunResult {
        let rate = netprobe.exchanges_per_s;
        let exchanges = netprobe.exchanges;
        let bytes = exchanges * u64::from(self.data_bytes);
        let mb_per_s = rate * f64::from(self.data_bytes) / 1e6;
        let latency = netprobe.latency;
        let active = DirectionResult {
            ios: exchanges,
            bytes,
            iops: rate,
            mb_per_s,
            lat_us: latency,
        };
        let idle = DirectionResult {
            ios: 0,
            bytes: 0,
            iops: 0.0,
            mb_per_s: 0.0,
            lat_us: LatencySummary::default(),
        };
        let (read, write) = if self.write {
            (idle, active)
        } else {
            (active, idle)
        };
        let rates = Rates {
            iops: rate,
            mb_per_s,
            lat_us: latency,
            read,
            write,
            elapsed_s: netprobe.seconds,
            // netprobe ends with an error, and gives no figures, when an
            // exchange fails: those it gives had none.
            errors: 0,
        };
        let mut result = sampled_result(rates, first, last, server_pid);
        result.bench.ios = Some(exchanges);
        result.bench.bytes = Some(bytes);
        result.bench.interrupted = Some(false);
        result.lab.floor = Some(FloorShape {
            connections: self.connections,
            depth: self.depth,
            request: self.request,
            response: self.response,
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(read_pct: u8, qd: u32, workers: u32) -> WorkloadShape {
        WorkloadShape {
            block_size_bytes: 4096,
            read_pct,
            random_pct: 100,
            queue_depth: qd,
            workers,
        }
    }

    fn knobs(sessions: u32, connections: u32) -> KnobSet {
        KnobSet {
            sessions: Some(sessions),
            connections: Some(connections),
            floor: Some(true),
            ..KnobSet::default()
        }
    }

    #[test]
    fn the_shape_is_the_iscsi_runs_connections_and_depth() {
        let j = FloorJob::new(&shape(100, 64, 1), &knobs(32, 1), 1, 6.0, 2.0).unwrap();
        assert_eq!((j.connections, j.depth), (32, 2));
        assert_eq!((j.request, j.response, j.write), (48, 4144, false));
        let j = FloorJob::new(&shape(0, 64, 1), &knobs(2, 2), 2, 6.0, 2.0).unwrap();
        // Two portals, each with 2 sessions of 2 connections: 16 in flight on each.
        assert_eq!((j.connections, j.depth), (8, 16));
        assert_eq!((j.request, j.response, j.write), (4144, 48, true));
        assert_eq!(
            j.args("10.0.0.1:3260"),
            [
                "netprobe",
                "10.0.0.1:3260",
                "--duration",
                "6",
                "--ramp",
                "2",
                "--connections",
                "8",
                "--depth",
                "16",
                "--request",
                "4144",
                "--response",
                "48",
                "--json"
            ]
        );
    }

    #[test]
    fn what_has_no_raw_tcp_equivalent_is_refused_with_the_reason() {
        let err = FloorJob::new(&shape(70, 64, 1), &knobs(2, 1), 1, 6.0, 2.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("70% reads"), "{err}");
        let err = FloorJob::new(&shape(100, 64, 2), &knobs(2, 1), 1, 6.0, 2.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 workers"), "{err}");
        let err = FloorJob::new(&shape(100, 64, 1), &knobs(3, 1), 1, 6.0, 2.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not share evenly over 3"), "{err}");
    }

    #[test]
    fn the_result_reads_as_a_bench_result_of_the_workload() {
        let job = FloorJob::new(&shape(100, 64, 1), &knobs(32, 1), 1, 6.0, 2.0).unwrap();
        let netprobe: LoadFigures = serde_json::from_value(serde_json::json!({
            "connections": 32, "depth": 2, "request": 48, "response": 4144,
            "seconds": 6.0, "exchanges": 600_000, "exchanges_per_s": 100_000.0,
            "client_cpu_us_per_exchange": 2.0, "server_pid": 1,
            "server_cpu_us_per_exchange": 1.0, "system_cpu_us_per_exchange": 4.0,
            "steal_pct": 0.0,
            "latency": {"count": 600_000, "min": 10.0, "mean": 600.0, "p50": 550.0,
                        "p90": 800.0, "p99": 1200.0, "p999": 2000.0, "max": 5000.0},
        }))
        .unwrap();
        let (first, last) = crate::sampled::four_seconds_apart();
        let b = job.result(&netprobe, &first, &last, Some(1)).to_json();
        assert_eq!(b["iops"], 100_000.0);
        assert_eq!(b["read"]["ios"], 600_000);
        assert_eq!(b["write"]["ios"], 0);
        assert_eq!(b["read"]["lat_us"]["p99"], 1200.0);
        assert!((b["mb_per_s"].as_f64().unwrap() - 409.6).abs() < 1e-9);
        assert_eq!(b["floor"]["depth"], 2);
        // CPU over the window, per exchange: 2 s of the client's, 1 s of the
        // server's, in 4 s at 100,000 a second.
        let per = |k: &str| b[k].as_f64().unwrap();
        assert!((per("initiator_cpu_us_per_io") - 5.0).abs() < 1e-6, "{b}");
        assert!((per("target_cpu_us_per_io") - 2.5).abs() < 1e-6, "{b}");
    }
}
