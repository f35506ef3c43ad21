#![allow(unused_imports, dead_code)]
use loom_core::{OpCx, OpResult, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct In {}
#[derive(Serialize, JsonSchema)]
struct Out {}

mod memory {
    use super::*;
    /// Reads one memory.
    #[loom_op(
        name = "memory.read_one",
        role = "writer",
        idempotent,
        audit,
        writes,
        destructive,
        toolsets(core, coding, tracker, tasks, atomic, assistant),
        maturity = "experimental",
        budget_ms = 250,
        rate = "heavy",
        run_scoped = false
    )]
    pub async fn get(_cx: &OpCx, _input: In) -> OpResult<Out> {
        Ok(Out {})
    }

    #[loom_op(role = "admin", mcp_hidden = "use loom_search", toolsets(assistant))]
    pub async fn search(_cx: &OpCx, _input: In) -> OpResult<Out> {
        Ok(Out {})
    }
}

fn main() {}
