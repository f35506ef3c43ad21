//! # loom-ops: Loom's operations, grouped by plane
//!
//! Each plane is a module whose `#[loom_op]` handlers take their op name
//! from it (`fn capabilities` in `mod ops` → `ops.capabilities`).

pub mod audit;
pub mod blacklist;
pub mod context;
pub mod grants;
pub mod memory;
pub mod namespace;
pub mod ops;
pub mod outcome;
pub mod profile;
pub mod run;
pub mod scope;
pub mod search;
pub mod store;
pub mod working_memory;

/// Forces the linker to keep this crate, so `inventory` sees its ops.
/// Call it from every binary and test that builds a registry: a crate that
/// nothing references is never linked, and its ops would silently vanish.
pub fn link() {}
