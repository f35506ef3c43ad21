//! Inputs and outputs of the run ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `run.begin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBegin {
    /// What the run is for.
    pub goal: Option<String>,
    /// Your own id for it (letters, digits, `_ . : / -`); default: a new one.
    pub run_id: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller).
    pub agent: Option<String>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// It did what it set out to do.
    #[default]
    Succeeded,
    /// It failed.
    Failed,
    /// It was given up.
    Abandoned,
}

impl RunEnd {
    /// The stored status.
    pub fn as_str(self) -> &'static str {
        match self {
            RunEnd::Succeeded => "succeeded",
            RunEnd::Failed => "failed",
            RunEnd::Abandoned => "abandoned",
        }
    }
}

/// Arguments of `run.complete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunComplete {
    /// The run, as run.begin returned it.
    pub run_id: String,
    /// succeeded (default), failed or abandoned.
    pub status: Option<RunEnd>,
    /// What came of it.
    pub summary: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// A run.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Run {
    /// The run id.
    pub run_id: String,
    /// The namespace.
    pub namespace: String,
    /// The agent running it.
    pub agent: String,
    /// The token subject that began it.
    pub subject: String,
    /// What it is for.
    pub goal: String,
    /// open, succeeded, failed, abandoned, or closed (an MCP session's run).
    pub status: String,
    /// What came of it.
    pub summary: String,
    /// Started.
    pub started_at: String,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// The MCP session whose implicit run this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Why a session's run closed: session_ended or idle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close_reason: Option<String>,
    /// False when the call found the run already in that state.
    pub changed: bool,
}

/// One call made under a run (an `agent_events` row).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RunCall {
    /// The op.
    pub op: String,
    /// http or mcp.
    pub transport: String,
    /// ok, or the refusal's code.
    pub outcome: String,
    /// The request id.
    pub request_id: String,
    /// The agent.
    pub agent: String,
    /// The namespace it acted in (an MCP session's run carries its calls
    /// in every namespace).
    pub namespace: String,
    /// When.
    pub at: String,
}

/// Arguments of `run.get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunGet {
    /// The run.
    pub run_id: String,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// A memory change made in a run.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RunChange {
    /// The namespace of the memory.
    pub namespace: String,
    /// The key.
    pub memory_key: String,
    /// The agent holding the row.
    pub agent: String,
    /// The version the change made.
    pub version: i64,
    /// What changed.
    pub change: String,
    /// When.
    pub at: String,
}

/// A run with what it wrote.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RunDetail {
    /// The run.
    pub run: Run,
    /// Its working memory notes, by name.
    pub working_memory: Vec<crate::working_memory::model::WorkingMemory>,
    /// The memory changes made in it, oldest first (at most 200).
    pub changes: Vec<RunChange>,
    /// The calls made under it (its ledger rows), oldest first (at most 500).
    pub calls: Vec<RunCall>,
}

/// Arguments of `run.list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunList {
    /// Only runs in this status: open, succeeded, failed, abandoned or closed.
    pub status: Option<String>,
    /// At most this many (default 50; more than 500 is 500).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// From a previous answer's next_cursor.
    pub cursor: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// Runs, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Runs {
    /// The runs.
    pub runs: Vec<Run>,
    /// Pass as cursor for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
