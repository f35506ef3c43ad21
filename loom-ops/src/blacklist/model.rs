//! Inputs and outputs of the blacklist ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `blacklist.add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlacklistAdd {
    /// Case-insensitive; with `*` or `?` a glob over the whole content, else a substring.
    pub pattern: String,
    /// Also soft-delete the live memories it matches (pinned and locked ones are kept and reported).
    #[serde(default)]
    pub sweep: bool,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// A memory the sweep touched or kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SweptMemory {
    /// The key.
    pub memory_key: String,
    /// The agent holding the row.
    pub agent: String,
    /// Why it was kept (pinned, locked); absent when removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `blacklist.add` did.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BlacklistAdded {
    /// The pattern.
    pub pattern: String,
    /// False when the pattern was already on the list.
    pub added: bool,
    /// Memories the sweep soft-deleted.
    pub removed: Vec<SweptMemory>,
    /// Matching memories the sweep kept, with why.
    pub kept: Vec<SweptMemory>,
    /// The sweep matched more than one call deletes (1,000 memories, the
    /// first in key order): the same call again deletes the next.
    pub more: bool,
}

/// Arguments of `blacklist.list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlacklistList {
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// One pattern on a namespace's blacklist.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BlacklistPattern {
    /// The pattern, as added.
    pub pattern: String,
    /// Who added it (the token subject).
    pub added_by: String,
    /// When (RFC 3339).
    pub added_at: String,
}

/// A namespace's blacklist.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BlacklistPatterns {
    /// The org.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// Its patterns, in order.
    pub patterns: Vec<BlacklistPattern>,
}

/// Arguments of `blacklist.remove`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlacklistRemove {
    /// The pattern to take off the list (matched ignoring case, as patterns match).
    pub pattern: String,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
}

/// What `blacklist.remove` did.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BlacklistRemoved {
    /// The pattern removed, as it was held.
    pub pattern: String,
}
