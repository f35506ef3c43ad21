//! The memory plane: keyed memories with versions, pins, locks, soft
//! delete and bulk changes. Handlers only; the logic is in the submodules.

mod apply;
pub mod ask;
mod chain;
pub mod doc_freq;
mod insight;
pub mod model;
pub mod rank;
pub mod read;
pub mod store;
pub mod usage;
pub mod validate;
mod write;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{
    Aggregates, Applied, MemoryAggregate, MemoryAnswer, MemoryApply, MemoryAsk, MemoryGet,
    MemoryGot, MemoryHistory, MemoryHistoryPage, MemoryInspection, MemoryKey, MemoryList,
    MemoryLookup, MemoryPage, MemoryProvenance, MemorySearch, MemorySearchResult, MemorySet,
    MemoryUpdate, MemoryWritten, ProvenanceLookup,
};
use self::write::Change;
use crate::outcome::audited;
use crate::store::Store;

/// The most memories one bulk change (`memory.apply`, `blacklist.add`'s
/// sweep) changes in a call. Why: the change runs in one transaction,
/// which holds every other write of the store while it runs (SQLite's one
/// writer; on PostgreSQL the rows it plans on), at ~0.25 ms a memory on
/// SQLite: 11,111 memories held writes for 2.8 s, and 100,000 ran past the
/// call's budget, a refusal that retrying only repeated. A change that
/// matches more makes the first this many in key order and says `more`;
/// the same call again goes on from there, as what it changed no longer
/// matches (deleted, expired) or is left the same (labelled, locked,
/// demoted).
pub const MAX_BULK_CHANGES: usize = 1_000;

/// Stores a memory under memory_key, creating it or writing a new version;
/// setting the content it already holds changes nothing. Fields left out
/// keep their values (expires_at null removes the expiry). Use it to remember
/// a fact, decision, procedure or preference; to change part of an existing
/// memory (or guard against concurrent edits with if_version) use
/// memory.update.
#[loom_op(role = "writer", audit, idempotent, toolsets(core, coding, atomic))]
async fn set(cx: &OpCx, input: MemorySet) -> OpResult<MemoryWritten> {
    let store = cx.service::<Store>()?;
    audited(store, cx, write::set(store, cx, input).await).await
}

/// Changes part of an existing memory (content, kind, labels, source,
/// expires_at; expires_at null removes the expiry) as a new version. Pass
/// if_version to refuse with VERSION_CONFLICT when someone changed it since
/// you read it. To create a memory use memory.set.
#[loom_op(role = "writer", audit, idempotent, toolsets(core, coding))]
async fn update(cx: &OpCx, input: MemoryUpdate) -> OpResult<MemoryWritten> {
    let store = cx.service::<Store>()?;
    audited(store, cx, write::update(store, cx, input).await).await
}

/// Reads one memory by memory_key: the caller's own, else any agent's.
/// as_of returns the version current at a time, fields trims the answer,
/// follow adds the memories it links as [[key]]. To find memories without
/// knowing the key use loom_search.
#[loom_op(role = "viewer", idempotent, toolsets(core, coding, atomic, assistant))]
async fn get(cx: &OpCx, input: MemoryGet) -> OpResult<MemoryGot> {
    read::get(cx.service::<Store>()?, cx, input).await
}

/// Lists a memory's versions, newest first, each with what changed, who
/// changed it and in which run; deleted memories keep theirs. Use it to see
/// how a memory evolved or to pick a version for memory.get as_of.
#[loom_op(role = "viewer", idempotent, toolsets(core, assistant))]
async fn history(cx: &OpCx, input: MemoryHistory) -> OpResult<MemoryHistoryPage> {
    read::history(cx.service::<Store>()?, cx, input).await
}

/// Soft-deletes a memory: it is no longer served, its history stays. A
/// pinned memory refuses (PINNED_CONFLICT) until memory.unpin; a locked one
/// refuses (LOCKED). For many memories at once use memory.apply.
#[loom_op(role = "writer", audit, toolsets(core, coding, atomic))]
async fn delete(cx: &OpCx, input: MemoryKey) -> OpResult<MemoryWritten> {
    audited_change(cx, input, Change::Delete).await
}

/// Pins a memory: it ranks higher in search and context packs (a fixed
/// boost, ahead of unpinned matches as good or a little better) and cannot
/// be deleted or expired until memory.unpin (pinning removes its expiry).
#[loom_op(role = "writer", audit, toolsets(core))]
async fn pin(cx: &OpCx, input: MemoryKey) -> OpResult<MemoryWritten> {
    audited_change(cx, input, Change::Pin).await
}

/// Unpins a memory pinned with memory.pin.
#[loom_op(role = "writer", audit)]
async fn unpin(cx: &OpCx, input: MemoryKey) -> OpResult<MemoryWritten> {
    audited_change(cx, input, Change::Unpin).await
}

/// Locks a memory: every change to its key (memory.set, update, delete,
/// pin) is refused with LOCKED until memory.unlock. Use it to freeze a fact
/// others must not overwrite.
#[loom_op(role = "writer", audit, toolsets(core))]
async fn lock(cx: &OpCx, input: MemoryKey) -> OpResult<MemoryWritten> {
    audited_change(cx, input, Change::Lock).await
}

/// Unlocks a memory locked with memory.lock.
#[loom_op(role = "writer", audit)]
async fn unlock(cx: &OpCx, input: MemoryKey) -> OpResult<MemoryWritten> {
    audited_change(cx, input, Change::Unlock).await
}

/// A one-field change of one memory, with its audit row.
async fn audited_change(cx: &OpCx, input: MemoryKey, change: Change) -> OpResult<MemoryWritten> {
    let store = cx.service::<Store>()?;
    audited(store, cx, write::change(store, cx, input, change).await).await
}

/// Lists live memories in key order, filtered by key_prefix, kind or
/// labels, across every agent unless agent is named. To find memories by
/// meaning use loom_search.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn list(cx: &OpCx, input: MemoryList) -> OpResult<MemoryPage> {
    read::list(cx.service::<Store>()?, cx, input).await
}

/// Applies one action (delete, expire, lock, label, demote) to every memory
/// a filter matches, in one transaction; pinned and locked memories are
/// kept and reported. Run it with dry_run first: it returns exactly the
/// memory_keys the real run changes. It changes at most 1,000 memories a
/// call; more: true means call it again for the rest. For one memory use
/// memory.delete or memory.lock.
#[loom_op(role = "writer", audit, destructive, rate = "heavy", toolsets(core))]
async fn apply(cx: &OpCx, input: MemoryApply) -> OpResult<Applied> {
    let store = cx.service::<Store>()?;
    audited(store, cx, apply::apply(store, cx, input).await).await
}

/// Searches this namespace's memories by words, ranked by text match,
/// recency, pins and recall counts (explain shows the parts). Across every
/// agent unless agent is named.
#[loom_op(
    role = "viewer",
    idempotent,
    toolsets(assistant),
    mcp_hidden = "use loom_search, which searches memory, profile, knowledge and conversations at once"
)]
async fn search(cx: &OpCx, input: MemorySearch) -> OpResult<MemorySearchResult> {
    read::search(cx.service::<Store>()?, cx, input).await
}

/// Answers a question from memory, extractively: the evidence rows (key,
/// version, content hash) and a sentence quoted from the best one, or
/// abstain: true when no memory supports an answer. For ranked hits
/// without an answer use loom_search.
#[loom_op(role = "viewer", idempotent, toolsets(atomic, assistant))]
async fn ask(cx: &OpCx, input: MemoryAsk) -> OpResult<MemoryAnswer> {
    ask::ask(cx.service::<Store>()?, cx, input).await
}

/// Reports on one memory, deleted or not: its current row, how many
/// versions and exposures it has, how many agents it was served to and
/// which other agents hold the same key. To read its content use memory.get.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn inspect(cx: &OpCx, input: MemoryLookup) -> OpResult<MemoryInspection> {
    insight::inspect(cx.service::<Store>()?, cx, input).await
}

/// Shows where a memory came from: its source, the runs that changed it and
/// every change with its agent, subject and request, oldest first. For the
/// content of each version use memory.history.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn provenance(cx: &OpCx, input: ProvenanceLookup) -> OpResult<MemoryProvenance> {
    insight::provenance(cx.service::<Store>()?, cx, input).await
}

/// Counts the namespace's live memories by kind, agent or label, with pins,
/// locks and recalls per group. To list the memories themselves use
/// memory.list.
#[loom_op(role = "viewer", idempotent, toolsets(assistant))]
async fn aggregate(cx: &OpCx, input: MemoryAggregate) -> OpResult<Aggregates> {
    insight::aggregate(cx.service::<Store>()?, cx, input).await
}
