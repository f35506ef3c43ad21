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
    #[serde(default)]
    pub status: RunEnd,
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
    /// What it is for.
    pub goal: String,
    /// open, succeeded, failed or abandoned.
    pub status: String,
    /// What came of it.
    pub summary: String,
    /// Started.
    pub started_at: String,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// False when the call found the run already in that state.
    pub changed: bool,
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
}
