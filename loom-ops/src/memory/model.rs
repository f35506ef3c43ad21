//! Inputs and outputs of the memory ops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One memory as stored now.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Memory {
    /// The key.
    pub memory_key: String,
    /// The namespace.
    pub namespace: String,
    /// The agent that holds the row.
    pub agent: String,
    /// The content.
    pub content: String,
    /// fact, decision, procedure, preference, …
    pub kind: String,
    /// Labels, sorted.
    pub labels: Vec<String>,
    /// Where the content came from.
    pub source: String,
    /// The current version (every change adds one).
    pub version: i64,
    /// Pinned: ranks higher in search and packs, refuses delete.
    pub pinned: bool,
    /// Locked: refuses every change but unlock.
    pub locked: bool,
    /// Soft-deleted (history kept).
    pub deleted: bool,
    /// When it stops being served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// How many times it was served.
    pub recall_count: i64,
    /// SHA-256 of the content.
    pub content_hash: String,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

/// What a write did.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryWritten {
    /// The key.
    pub memory_key: String,
    /// The namespace.
    pub namespace: String,
    /// The agent that holds the row.
    pub agent: String,
    /// The version after the call.
    pub version: i64,
    /// False when the call changed nothing.
    pub changed: bool,
    /// SHA-256 of the content.
    pub content_hash: String,
}

/// A field where `null` (remove the value) is told apart from leaving the
/// field out (keep it): `Some(None)` and `None`.
fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Arguments of `memory.set`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySet {
    /// The key: 1-256 of letters, digits and `_ . : / -`.
    pub memory_key: String,
    /// The content (at most 64 KiB).
    pub content: String,
    /// fact (default), decision, procedure, preference, …
    pub kind: Option<String>,
    /// Labels (replace the current ones).
    pub labels: Option<Vec<String>>,
    /// Where the content came from (at most 2 KiB).
    pub source: Option<String>,
    /// RFC 3339 time after which it is no longer served; null removes the
    /// expiry, left out keeps the current one. A pinned memory takes none.
    #[serde(default, deserialize_with = "nullable")]
    #[schemars(with = "Option<String>")]
    pub expires_at: Option<Option<String>>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller).
    pub agent: Option<String>,
}

/// Arguments of `memory.update`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryUpdate {
    /// The key.
    pub memory_key: String,
    /// Refuse with VERSION_CONFLICT unless this is the current version.
    #[schemars(range(min = 1))]
    pub if_version: Option<i64>,
    /// New content.
    pub content: Option<String>,
    /// New kind.
    pub kind: Option<String>,
    /// New labels (replace the current ones).
    pub labels: Option<Vec<String>>,
    /// New source (at most 2 KiB).
    pub source: Option<String>,
    /// New expiry (RFC 3339); null removes the expiry. A pinned memory
    /// takes none.
    #[serde(default, deserialize_with = "nullable")]
    #[schemars(with = "Option<String>")]
    pub expires_at: Option<Option<String>>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller).
    pub agent: Option<String>,
}

/// Arguments of ops that name one memory (`memory.delete`, `memory.pin`, …).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryKey {
    /// The key.
    pub memory_key: String,
    /// Refuse with VERSION_CONFLICT unless this is the current version.
    #[schemars(range(min = 1))]
    pub if_version: Option<i64>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller, else any agent holding the key).
    pub agent: Option<String>,
}

/// Arguments of `memory.get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGet {
    /// The key.
    pub memory_key: String,
    /// Refuse with VERSION_CONFLICT unless this is the current version (not with as_of).
    #[schemars(range(min = 1))]
    pub if_version: Option<i64>,
    /// Add who was served it and how often.
    pub include_recall_breakdown: Option<bool>,
    /// RFC 3339: return the version current at that time (not with if_version).
    pub as_of: Option<String>,
    /// Only these output fields (memory_key is always returned).
    pub fields: Option<Vec<String>>,
    /// Also return the memories its content links as `[[memory_key]]`
    /// (the first 10 links).
    pub follow: Option<bool>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller, else any agent holding the key).
    pub agent: Option<String>,
}

/// How often a memory was served, by whom.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RecallBreakdown {
    /// Times served in all.
    pub total: i64,
    /// Last served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_recalled_at: Option<String>,
    /// Times served per calling agent.
    pub by_agent: Vec<AgentCount>,
}

/// A count for one agent.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct AgentCount {
    /// The agent.
    pub agent: String,
    /// The count.
    pub count: i64,
}

/// The answer of `memory.get`: the memory's fields (only those asked for with `fields`).
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
pub struct MemoryGot {
    /// The key.
    pub memory_key: String,
    /// The namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The agent that holds the row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The run the served version was written in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The version served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Pinned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    /// Locked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked: Option<bool>,
    /// Expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Times served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall_count: Option<i64>,
    /// SHA-256 of the content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Last changed (for as_of: when that version was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// With include_recall_breakdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall_breakdown: Option<RecallBreakdown>,
    /// With follow: the linked memories that exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub followed: Option<Vec<Memory>>,
}

/// Arguments of `memory.history`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryHistory {
    /// The key.
    pub memory_key: String,
    /// Versions per page (default 20, at most 100).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// From a previous answer's next_cursor.
    pub cursor: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent (default: the caller, else any agent holding the key).
    pub agent: Option<String>,
}

/// One version of a memory.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryVersion {
    /// The version.
    pub version: i64,
    /// What changed: create, set, update, delete, pin, unpin, lock, unlock, expire, label, demote.
    pub change: String,
    /// The content after it.
    pub content: String,
    /// The kind after it.
    pub kind: String,
    /// Labels after it.
    pub labels: Vec<String>,
    /// Pinned after it.
    pub pinned: bool,
    /// Locked after it.
    pub locked: bool,
    /// Deleted after it.
    pub deleted: bool,
    /// SHA-256 of the content.
    pub content_hash: String,
    /// The agent that made the change.
    pub changed_by: String,
    /// The run the change belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// When.
    pub at: String,
}

/// The answer of `memory.history`, newest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryHistoryPage {
    /// The key.
    pub memory_key: String,
    /// The agent whose row it is.
    pub agent: String,
    /// Versions, newest first.
    pub versions: Vec<MemoryVersion>,
    /// Pass as cursor for older versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Arguments of `memory.list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryList {
    /// Only keys starting with this.
    pub key_prefix: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only memories carrying all these labels.
    pub labels: Option<Vec<String>>,
    /// Memories per page (default 50, at most 200).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// From a previous answer's next_cursor.
    pub cursor: Option<String>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// Only this agent's rows (default: every agent's).
    pub agent: Option<String>,
}

/// A page of memories, in key order.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryPage {
    /// The memories.
    pub memories: Vec<Memory>,
    /// Pass as cursor for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What `memory.apply` does to each matching memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApplyAction {
    /// Soft-delete (pinned and locked kept).
    Delete,
    /// Expire now: no longer served, history kept (pinned and locked kept).
    Expire,
    /// Lock.
    Lock,
    /// Add `labels` (locked kept, and one they would take past 32 labels).
    Label,
    /// Unpin and reset the recall count, so it ranks lower (locked kept).
    Demote,
}

impl ApplyAction {
    /// The lowercase name, as version history records it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyAction::Delete => "delete",
            ApplyAction::Expire => "expire",
            ApplyAction::Lock => "lock",
            ApplyAction::Label => "label",
            ApplyAction::Demote => "demote",
        }
    }
}

/// Which memories `memory.apply` acts on: all criteria must hold; at least one is required.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyFilter {
    /// Memories carrying all these labels.
    pub labels: Option<Vec<String>>,
    /// Keys starting with this.
    pub key_prefix: Option<String>,
    /// This kind.
    pub kind: Option<String>,
    /// Last changed before this RFC 3339 time.
    pub updated_before: Option<String>,
}

/// Arguments of `memory.apply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryApply {
    /// delete, expire, lock, label or demote.
    pub action: ApplyAction,
    /// Which memories: at least one of labels, key_prefix, kind or
    /// updated_before.
    #[schemars(example = serde_json::json!({"key_prefix": "drafts/"}))]
    pub filter: ApplyFilter,
    /// For action label: the labels to add.
    pub labels: Option<Vec<String>>,
    /// Report what would change without changing it.
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// Only this agent's rows (default: every agent's).
    pub agent: Option<String>,
}

/// One memory `memory.apply` changed or kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AppliedMemory {
    /// The key.
    pub memory_key: String,
    /// The agent holding the row.
    pub agent: String,
    /// Why it was kept (pinned, locked, too many labels); absent when changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `memory.apply` changed (or, with dry_run, would change).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Applied {
    /// The action.
    pub action: String,
    /// True when nothing was changed.
    pub dry_run: bool,
    /// The affected keys, sorted, without repeats.
    pub memory_keys: Vec<String>,
    /// The affected rows.
    pub changed: Vec<AppliedMemory>,
    /// Matching rows left alone, with why.
    pub skipped: Vec<AppliedMemory>,
    /// The filter matched more than one call changes (1,000 memories, the
    /// first in key order): the same call again changes the next.
    pub more: bool,
}

/// Arguments of `memory.search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearch {
    /// What to look for, in words.
    pub query: String,
    /// Hits to return (default 10, at most 50).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Add each hit's score parts.
    #[serde(default)]
    pub explain: bool,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// Only this agent's rows (default: every agent's).
    pub agent: Option<String>,
}

/// The answer of `memory.search`, best first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemorySearchResult {
    /// The hits.
    pub hits: Vec<super::rank::MemoryHit>,
}

/// Arguments of `memory.ask`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryAsk {
    /// The question, in words.
    pub question: String,
    /// Evidence rows to return (default 5, at most 20).
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// Only this agent's rows (default: every agent's).
    pub agent: Option<String>,
}

/// A memory offered as evidence.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Evidence {
    /// The key.
    pub memory_key: String,
    /// The agent holding the row.
    pub agent: String,
    /// The version read.
    pub version: i64,
    /// SHA-256 of the content, to cite.
    pub content_hash: String,
    /// The content.
    pub content: String,
    /// Question terms it contains.
    pub matched: Vec<String>,
    /// The search score.
    pub score: f64,
}

/// The answer of `memory.ask`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryAnswer {
    /// A sentence taken verbatim from the best evidence; absent when abstaining.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// True when no memory supports an answer.
    pub abstain: bool,
    /// The memory the answer is drawn from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cited: Option<String>,
    /// The evidence rows, best first.
    pub evidence: Vec<Evidence>,
}

/// Arguments of `memory.inspect`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryLookup {
    /// The key.
    pub memory_key: String,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent holding the row (default: the caller, else any agent).
    pub agent: Option<String>,
}

/// Arguments of `memory.provenance`: a read of one writer's row.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceLookup {
    /// The key.
    pub memory_key: String,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// The agent holding the row (default: the caller; on the assistant
    /// toolset required: a search hit's agent).
    #[schemars(extend("x-loom-writer" = true))]
    pub agent: Option<String>,
}

/// What `memory.inspect` reports about one memory.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryInspection {
    /// The row now, deleted or not.
    pub memory: Memory,
    /// Versions written.
    pub versions: i64,
    /// Times it was served (exposure rows).
    pub exposures: i64,
    /// Distinct agents it was served to.
    pub served_agents: i64,
    /// Other agents holding a row under the same key.
    pub other_agents: Vec<String>,
    /// Whether it is served now (not deleted, not expired).
    pub live: bool,
}

/// One change, with who made it and from where.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ProvenanceStep {
    /// The version it made.
    pub version: i64,
    /// What changed.
    pub change: String,
    /// The agent that made it.
    pub changed_by: String,
    /// The token subject behind it.
    pub subject: String,
    /// The run it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The request that made it.
    pub request_id: String,
    /// SHA-256 of the content after it.
    pub content_hash: String,
    /// When.
    pub at: String,
}

/// Where a memory came from.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryProvenance {
    /// The key.
    pub memory_key: String,
    /// The agent holding the row.
    pub agent: String,
    /// The source recorded with it.
    pub source: String,
    /// The runs that changed it, in order of first change.
    pub runs: Vec<String>,
    /// Every change, oldest first.
    pub changes: Vec<ProvenanceStep>,
}

/// What `memory.aggregate` groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The kind.
    Kind,
    /// The agent holding the row.
    Agent,
    /// Each label (a memory counts once per label).
    Label,
}

/// Arguments of `memory.aggregate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryAggregate {
    /// kind, agent or label.
    pub group_by: GroupBy,
    /// The namespace (default: the caller's).
    pub namespace: Option<String>,
    /// Only this agent's rows (default: every agent's; on the assistant
    /// toolset required: the writer whose rows to count).
    #[schemars(extend("x-loom-writer" = true))]
    pub agent: Option<String>,
}

/// One group's counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Group {
    /// The kind, agent or label.
    pub value: String,
    /// Live memories.
    pub memories: i64,
    /// Of which pinned.
    pub pinned: i64,
    /// Of which locked.
    pub locked: i64,
    /// Their recalls in all.
    pub recalls: i64,
}

/// The answer of `memory.aggregate`, largest group first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Aggregates {
    /// The groups.
    pub groups: Vec<Group>,
    /// Live memories in all.
    pub total: i64,
}
