//! The `ops` plane: what the server itself can do.

use loom_core::{OpCapability, OpCx, OpResult, Registry, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// No arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesInput {}

/// Every op the server runs.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Capabilities {
    /// One row per op, in name order.
    pub ops: Vec<OpCapability>,
}

/// Lists every op this server runs with its minimum role, effect, flags
/// (idempotent, audit, writes), rate class, latency budget, toolsets,
/// maturity and MCP visibility (listed, callable by name, or hidden). Use it
/// to find an op loom_op can run; to call one, use its tool or loom_op.
#[loom_op(role = "viewer", idempotent)]
async fn capabilities(_cx: &OpCx, _input: CapabilitiesInput) -> OpResult<Capabilities> {
    let registry = Registry::global().map_err(|errors| {
        loom_core::LoomError::internal(format!("registry is invalid: {errors:?}"))
    })?;
    Ok(Capabilities {
        ops: loom_core::capabilities(registry),
    })
}
