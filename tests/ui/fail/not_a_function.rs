#![allow(unused_imports, dead_code)]
use loom_core::{OpCx, OpResult, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct In {}
#[derive(Serialize, JsonSchema)]
struct Out {}

#[loom_op(role = "viewer")]
struct Memory;

fn main() {}
