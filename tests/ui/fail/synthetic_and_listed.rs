#![allow(unused_imports, dead_code)]
use loom_core::{OpCx, OpResult, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct In {}
#[derive(Serialize, JsonSchema)]
struct Out {}

mod search {
    use super::*;
    #[loom_op(role = "viewer", tool = "loom_search", synthetic, toolsets(core))]
    async fn query(_cx: &OpCx, _input: In) -> OpResult<Out> {
        Ok(Out {})
    }
}

fn main() {}
