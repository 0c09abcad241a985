//! isoe bench.
