//! Inputs and outputs of `context.pack`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `context.pack`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextPackInput {
    /// The task the context is for, in words.
    pub task: String,
    /// Token budget (default 2000; clamped to 100-32000).
    pub budget_tokens: Option<i64>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// One item of a pack.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PackItem {
    /// memory, decision, procedure or run.
    pub section: String,
    /// The memory's key (memory sections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_key: Option<String>,
    /// The memory's version (memory sections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The agent whose row it is (memory sections): agents may each hold
    /// a row of one key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The run's id (run section).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The text.
    pub content: String,
    /// Its estimated tokens.
    pub tokens: i64,
    /// Why it was included.
    pub why: String,
}

/// A token-budgeted context pack.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ContextPack {
    /// The budget used after clamping.
    pub budget_tokens: i64,
    /// Tokens the items take.
    pub used_tokens: i64,
    /// How tokens are estimated.
    pub token_estimate: String,
    /// The items, most relevant first.
    pub items: Vec<PackItem>,
    /// Candidates left out for lack of budget.
    pub left_out: i64,
}
