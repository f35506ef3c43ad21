//! The JSON manifest: the MCP tools/list shape for every op, plus a `loom`
//! block with what a policy engine needs and MCP has no field for.

use serde_json::{Value, json};

use crate::registry::{Op, Registry};

/// `listed` (some roster lists it, or it is a synthetic tool), `callable`
/// (by name only) or `hidden`.
pub fn mcp_visibility(op: &Op) -> &'static str {
    if op.mcp_hidden().is_some() {
        "hidden"
    } else if op.toolsets().is_empty() {
        "callable"
    } else {
        "listed"
    }
}

/// The manifest: `{"tools": [...]}`, in op-name order.
pub fn json_manifest(registry: &Registry) -> Value {
    let tools: Vec<Value> = registry
        .ops()
        .iter()
        .map(|op| {
            let mut loom = json!({
                "op": op.name,
                "http_path": op.http_path(),
                "required_role": op.meta.role.as_str(),
                "effect": op.effect.as_str(),
                "idempotent": op.meta.idempotent,
                "audit": op.meta.audit,
                "run_scoped": op.meta.run_scoped,
                "mcp_visibility": mcp_visibility(op),
                "toolsets": op.listing_names(),
                "maturity": op.meta.maturity.as_str(),
                "input_model": op.input_model,
                "output_model": op.output_model,
                "cedar_input_type": super::cedar::type_ident(&op.input_model),
                "cedar_output_type": super::cedar::type_ident(&op.output_model),
            });
            if let Some(instead) = op.mcp_hidden() {
                loom["mcp_instead"] = instead.into();
            }
            json!({
                "name": op.tool_name,
                "description": op.description,
                "inputSchema": op.listed_input,
                "outputSchema": op.output_schema,
                "annotations": op.annotations,
                "loom": loom,
            })
        })
        .collect();
    json!({ "tools": tools })
}
