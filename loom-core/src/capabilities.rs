//! What `ops.capabilities` reports: every op with its role, flags, toolsets,
//! maturity and MCP visibility, read from the registry.

use schemars::JsonSchema;
use serde::Serialize;

use crate::export::mcp_visibility;
use crate::registry::Registry;

/// One op as `ops.capabilities` describes it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OpCapability {
    /// The op name (`memory.get`).
    pub op: String,
    /// The MCP tool name (`loom_memory_get`).
    pub tool: String,
    /// The HTTP path.
    pub http_path: String,
    /// Minimum role: viewer, writer or admin.
    pub role: String,
    /// read, write or destructive.
    pub effect: String,
    /// Accepts an idempotency key.
    pub idempotent: bool,
    /// Writes an audit row.
    pub audit: bool,
    /// Changes state although its role is viewer.
    pub writes: bool,
    /// Rate-limit class: read, write or heavy.
    pub rate_class: String,
    /// Latency budget in milliseconds.
    pub budget_ms: u64,
    /// The listings that list it: the curated rosters that declare it (a
    /// synthetic tool such as `loom_search` is on every one but
    /// assistant), then `readonly` and `all`, derived, where they list it.
    pub toolsets: Vec<String>,
    /// stable or experimental.
    pub maturity: String,
    /// listed, callable (by name only) or hidden.
    pub mcp: String,
    /// For a hidden op: what to use instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instead: Option<String>,
    /// The arguments a call must name, as the listing names them.
    pub required: Vec<String>,
    /// The arguments a call may name.
    pub optional: Vec<String>,
}

/// Every op's capability row, in name order.
pub fn capabilities(registry: &Registry) -> Vec<OpCapability> {
    registry
        .ops()
        .iter()
        .map(|op| OpCapability {
            op: op.name.clone(),
            tool: op.tool_name.clone(),
            http_path: op.http_path(),
            role: op.meta.role.as_str().into(),
            effect: op.effect.as_str().into(),
            idempotent: op.meta.idempotent,
            audit: op.meta.audit,
            writes: op.meta.writes,
            rate_class: op.rate.as_str().into(),
            budget_ms: op.budget.as_millis() as u64,
            toolsets: op.listing_names().into_iter().map(str::to_owned).collect(),
            maturity: op.meta.maturity.as_str().into(),
            mcp: mcp_visibility(op).into(),
            instead: op.mcp_hidden().map(str::to_owned),
            required: op.validator().required().to_vec(),
            optional: op.validator().optional().to_vec(),
        })
        .collect()
}
