//! isoe-lab: the seeds' test beds rebuilt on one Linux machine and their
//! evaluations rerun (METHODOLOGY.md).
//!
//! Owns topologies (network namespaces, veth pairs, bridges, VxLAN, `tc`),
//! knobs (ethtool offloads, rings, coalescing, queues and flow control,
//! MTU, rate, sysctls, socket options, iSCSI parameters, initiator and
//! target choice), the same link knobs on real machines' interfaces, read
//! before a run and put back after it ([`hostknobs`]), plans, the run loop,
//! `results.jsonl`, and what the report says of the machine
//! ([`report_input`]). It drives `isoe target`, `isoe bench` and `isoe
//! attach` as processes, uses `isoe-bench` for its result types and its
//! measure of foreign load, and `isoe-report` for the records, their
//! statistics and the reports (Markdown, HTML with SVG charts).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod application;
pub mod applied;
pub mod attach_device;
pub mod bed;
pub mod error;
pub mod fill;
pub mod floor;
/// Foreign load: measured by `isoe-bench`, which both use.
pub use isoe_bench::foreign;
pub mod host;
pub mod hostknobs;
pub mod install;
pub mod knobs;
pub mod limits;
pub mod link;
pub mod mail;
pub mod netcmd;
pub mod peers;
pub mod pgbench;
pub mod plan;
pub mod preflight;
pub mod record;
pub mod report_input;
pub mod rounds;
pub mod rr;
pub mod run;
pub mod runner;
pub mod sampled;
pub mod shape;
mod site;
pub mod ssh;
pub mod stream;
pub mod stream_run;
pub mod testbed;
pub mod topology;
