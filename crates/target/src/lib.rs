//! isoe-target
