//! Stream workloads: seed 002's TCP and UDP stream tests as a plan's
//! workload (`stream = "tcp"`, `direction`, `msg`), run by `isoe netprobe
//! --stream` from the initiator's side against an `isoe netprobe --serve`
//! on the target's (METHODOLOGY.md, "stream workloads"). No iSCSI is in
//! it: the bytes go one way as fast as they go, so a case's offloads act
//! on one sender and one receiver, and each side's CPU is that side's.
//!
//! The run's result reads as an `isoe bench` run of its direction: the
//! initiator sending is a write, the target sending a read; each message
//! (a TCP write, a datagram) counts as an I/O, so CPU per I/O is CPU per
//! message, and the CPU per KiB is filled in besides; the stream's own
//! figures (UDP's datagrams and loss, CPU per MB) are its `stream`.

use crate::record::RunResult;
use crate::rr::{Direction, StreamFigures, StreamKind};
use crate::sampled::{sampled_result, Rates, Sample};
use crate::shape::WorkloadShape;
pub use crate::stream_run::{StreamDirection, StreamRun};
use isoe_bench::{DirectionResult, LatencySummary};
use serde::{Deserialize, Serialize};

/// A plan's stream workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamWorkload {
    /// TCP or UDP.
    pub kind: StreamKind,
    /// Which side sends.
    pub direction: StreamDirection,
    /// Bytes per write or datagram; None: netprobe's default (TCP 128
    /// KiB, UDP the largest datagram the case's path MTU carries whole).
    pub msg: Option<u32>,
}

impl StreamWorkload {
    /// The shape it stands for: one sender, sequential, of its message
    /// size (0 for a default UDP one, whose size the path decides), read
    /// when the target sends.
    pub fn nominal_shape(&self) -> WorkloadShape {
        WorkloadShape {
            block_size_bytes: self.msg.unwrap_or(match self.kind {
                StreamKind::Tcp => crate::rr::stream::TCP_MSG_DEFAULT,
                StreamKind::Udp => 0,
            }),
            read_pct: match self.direction {
                StreamDirection::InitiatorToTarget => 0,
                StreamDirection::TargetToInitiator => 100,
            },
            random_pct: 0,
            queue_depth: 1,
            workers: 1,
        }
    }

    /// For people: "TCP stream, initiator to target, 128 KiB writes".
    pub fn describe(&self) -> String {
        let size = match (self.msg, self.kind) {
            (Some(msg), StreamKind::Tcp) => format!("{msg} B writes"),
            (Some(msg), StreamKind::Udp) => format!("{msg} B datagrams"),
            (None, StreamKind::Tcp) => "128 KiB writes".into(),
            (None, StreamKind::Udp) => "datagrams of the path MTU".into(),
        };
        format!(
            "{} stream, {}, {size}",
            self.kind.as_str().to_uppercase(),
            self.direction.as_str().replace('-', " ")
        )
    }
}

/// One stream run: what `isoe netprobe` is asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamJob {
    /// The workload.
    pub workload: StreamWorkload,
    /// Measured seconds.
    pub duration_s: f64,
    /// Seconds before the measured window.
    pub ramp_s: f64,
}

impl StreamJob {
    /// `isoe netprobe`'s arguments after the binary, to the server at `addr`.
    pub fn args(&self, addr: &str) -> Vec<String> {
        let direction = match self.workload.direction {
            StreamDirection::InitiatorToTarget => Direction::ClientToServer,
            StreamDirection::TargetToInitiator => Direction::ServerToClient,
        };
        let mut args: Vec<String> = [
            "netprobe",
            addr,
            "--stream",
            self.workload.kind.as_str(),
            "--direction",
            direction.as_str(),
            "--duration",
            &self.duration_s.to_string(),
            "--ramp",
            &self.ramp_s.to_string(),
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(msg) = self.workload.msg {
            args.extend(["--msg".to_owned(), msg.to_string()]);
        }
        args
    }

    /// An `isoe bench` result of `isoe netprobe`'s figures, with the CPU
    /// and TCP counters the lab sampled over the window (`first`, `last`;
    /// the server as the target): each message an I/O in the stream's
    /// direction, and the CPU per KiB and per MB of each side.
    pub fn result(
        &self,
        netprobe: &StreamFigures,
        first: &Sample,
        last: &Sample,
        server_pid: Option<u32>,
    ) -> RunResult {
        let msg = f64::from(netprobe.msg.max(1));
        let mb_per_s = netprobe.mb_per_s;
        let rate = mb_per_s * 1e6 / msg;
        let active = DirectionResult {
            ios: netprobe.bytes / u64::from(netprobe.msg.max(1)),
            bytes: netprobe.bytes,
            iops: rate,
            mb_per_s,
            lat_us: LatencySummary::default(),
        };
        let (read, write) = match self.workload.direction {
            StreamDirection::InitiatorToTarget => (DirectionResult::default(), active),
            StreamDirection::TargetToInitiator => (active, DirectionResult::default()),
        };
        let rates = Rates {
            iops: rate,
            mb_per_s,
            lat_us: LatencySummary::default(),
            read,
            write,
            elapsed_s: netprobe.seconds,
            // netprobe ends with an error, and gives no figures, when the
            // stream fails.
            errors: 0,
        };
        let mut result = sampled_result(rates, first, last, server_pid);
        let window_s = last.at.duration_since(first.at).as_secs_f64();
        let kib_per_s = mb_per_s * 1e6 / 1024.0;
        let per_kib = |cpu_s: f64| {
            (kib_per_s > 0.0 && window_s > 0.0).then(|| cpu_s / window_s / kib_per_s * 1e6)
        };
        let b = &mut result.bench;
        b.ios = Some(netprobe.bytes / u64::from(netprobe.msg.max(1)));
        b.bytes = Some(netprobe.bytes);
        b.interrupted = Some(false);
        b.initiator_cpu_us_per_kib = per_kib(b.initiator_cpu_s);
        b.target_cpu_us_per_kib = b.target_cpu_s.and_then(per_kib);
        b.system_cpu_us_per_kib = per_kib(b.cpu.busy_cpu_s);
        let per_mb = |per_kib: Option<f64>| per_kib.map(|us| us * 1e6 / 1024.0);
        result.lab.stream = Some(StreamRun {
            kind: netprobe.stream,
            direction: self.workload.direction,
            msg: netprobe.msg,
            datagrams_sent: netprobe.datagrams_sent,
            datagrams_received: netprobe.datagrams_received,
            loss_pct: netprobe.loss_pct,
            sent_mb_per_s: netprobe.sent_mb_per_s,
            initiator_cpu_us_per_mb: per_mb(b.initiator_cpu_us_per_kib),
            target_cpu_us_per_mb: per_mb(b.target_cpu_us_per_kib),
            system_cpu_us_per_mb: per_mb(b.system_cpu_us_per_kib),
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(kind: StreamKind, direction: StreamDirection, msg: Option<u32>) -> StreamWorkload {
        StreamWorkload {
            kind,
            direction,
            msg,
        }
    }

    #[test]
    fn the_job_asks_netprobe_for_the_stream_in_the_lab_s_direction() {
        let job = StreamJob {
            workload: workload(
                StreamKind::Udp,
                StreamDirection::TargetToInitiator,
                Some(1472),
            ),
            duration_s: 5.0,
            ramp_s: 1.0,
        };
        assert_eq!(
            job.args("10.0.0.1:40000"),
            [
                "netprobe",
                "10.0.0.1:40000",
                "--stream",
                "udp",
                "--direction",
                "server-to-client",
                "--duration",
                "5",
                "--ramp",
                "1",
                "--json",
                "--msg",
                "1472"
            ]
        );
        // Without msg, netprobe's default (the path's MTU for UDP).
        let job = StreamJob {
            workload: workload(StreamKind::Tcp, StreamDirection::InitiatorToTarget, None),
            ..job
        };
        assert!(!job.args("a:1").contains(&"--msg".to_owned()));
        assert!(job.args("a:1").contains(&"client-to-server".to_owned()));
        assert_eq!(
            job.workload.describe(),
            "TCP stream, initiator to target, 128 KiB writes"
        );
    }

    #[test]
    fn netprobe_s_stream_json_reads_as_a_run_in_its_direction() {
        let job = StreamJob {
            workload: workload(
                StreamKind::Udp,
                StreamDirection::InitiatorToTarget,
                Some(1000),
            ),
            duration_s: 4.0,
            ramp_s: 1.0,
        };
        // What `isoe netprobe --stream udp --json` prints.
        let netprobe: StreamFigures = serde_json::from_str(
            r#"{"stream":"udp","direction":"client-to-server","msg":1000,"seconds":4.0,
                "bytes":400000000,"mb_per_s":100.0,"datagrams_sent":500000,
                "datagrams_received":400000,"loss_pct":20.0,"sent_mb_per_s":125.0,
                "client_cpu_s":1.0,"client_cpu_us_per_mb":2500.0,"server_pid":7,
                "server_cpu_s":0.5,"server_cpu_us_per_mb":1250.0,
                "system_cpu_us_per_mb":5000.0,"steal_pct":0.0}"#,
        )
        .unwrap();
        assert_eq!(netprobe.direction, Direction::ClientToServer);
        let (first, last) = crate::sampled::four_seconds_apart();
        let b = job.result(&netprobe, &first, &last, Some(7)).to_json();
        let f = |k: &str| b[k].as_f64().unwrap();
        assert_eq!(f("mb_per_s"), 100.0);
        // The initiator sent: a write, one I/O a datagram.
        assert_eq!(b["write"]["bytes"], 400_000_000);
        assert_eq!(b["write"]["ios"], 400_000);
        assert_eq!(b["read"]["ios"], 0);
        assert!((f("iops") - 100_000.0).abs() < 1e-6, "{b}");
        // 2 s of the client's CPU and 1 s of the server's in 4 s at 100 MB/s.
        let stream = &b["stream"];
        assert_eq!(stream["loss_pct"], 20.0);
        assert_eq!(stream["datagrams_sent"], 500_000);
        let per_mb = |k: &str| stream[k].as_f64().unwrap();
        assert!(
            (per_mb("initiator_cpu_us_per_mb") - 5000.0).abs() < 1e-6,
            "{b}"
        );
        assert!(
            (per_mb("target_cpu_us_per_mb") - 2500.0).abs() < 1e-6,
            "{b}"
        );
        assert!(
            (f("initiator_cpu_us_per_kib") - 5000.0 * 1024.0 / 1e6).abs() < 1e-9,
            "{b}"
        );
    }
}
