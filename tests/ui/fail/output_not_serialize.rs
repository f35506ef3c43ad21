#![allow(unused_imports, dead_code)]
use loom_core::{OpCx, OpResult, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct In {}
#[derive(Serialize, JsonSchema)]
struct Out {}

#[derive(JsonSchema)]
struct NotSerialize {}

mod memory {
    use super::*;
    #[loom_op(role = "viewer")]
    async fn get(_cx: &OpCx, _input: In) -> OpResult<NotSerialize> {
        Ok(NotSerialize {})
    }
}

fn main() {}
