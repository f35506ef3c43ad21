//! Inputs and outputs of `search.query`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::memory::rank::MemoryHit;

/// Arguments of `search.query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    /// What to look for, in words.
    pub query: String,
    /// Hits per section (default 10; values outside 1-50 are clamped).
    pub top_k: Option<i64>,
    /// Add why each memory hit ranked where it did.
    #[serde(default)]
    pub explain: bool,
}

/// A profile section the query matched.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ProfileHit {
    /// persona, preferences or goals.
    pub section: String,
    /// Its text.
    pub content: String,
    /// Query terms it contains.
    pub matched: Vec<String>,
}

/// Every plane's hits, one section each (empty for planes with nothing to offer).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The top_k used after clamping.
    pub top_k: i64,
    /// Memories, best first.
    pub memory: Vec<MemoryHit>,
    /// Profile sections.
    pub profile: Vec<ProfileHit>,
    /// Document passages (none yet: the knowledge plane is not built).
    pub knowledge: Vec<serde_json::Value>,
    /// Conversation turns (none yet: the conversations plane is not built).
    pub conversations: Vec<serde_json::Value>,
}
