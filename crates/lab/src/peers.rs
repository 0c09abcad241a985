//! The peers isoe is measured against, each in a file of its own with its
//! translation of a case's knobs: tgt as the target (`tgt`), LIO on a test
//! bed's target host (`lio`), libiscsi through fio as the initiator
//! (`fio`), and the Linux kernel's initiator on a test bed (`kernel`).

pub mod fio;
pub mod kernel;
pub mod lio;
pub mod tgt;
