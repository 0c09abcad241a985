//! isoe-store
