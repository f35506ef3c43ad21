//! Inputs and outputs of the working memory ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `working_memory.set` and `working_memory.append`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingMemoryWrite {
    /// The text (append adds it as a new line).
    pub content: String,
    /// Which note of the run (default "main").
    pub name: Option<String>,
    /// The run, from run.begin (in progress).
    pub run_id: String,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// A run's working memory note after the call.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct WorkingMemory {
    /// The run.
    pub run_id: String,
    /// The note's name.
    pub name: String,
    /// Its whole text now.
    pub content: String,
    /// Its size in bytes (at most 64 KiB).
    pub bytes: i64,
    /// Last written.
    pub updated_at: String,
}
