//! The blacklist plane: content patterns a namespace refuses to store.

pub mod model;
pub mod pattern;
pub mod store;

use loom_core::{ErrorCode, LoomError, OpCx, OpResult, loom_op};

use self::model::{
    BlacklistAdd, BlacklistAdded, BlacklistList, BlacklistPattern, BlacklistPatterns,
    BlacklistRemove, BlacklistRemoved, SweptMemory,
};
use crate::memory::store as memories;
use crate::memory::validate::invalid;
use crate::outcome::audited;
use crate::scope::require_namespace;
use crate::store::{Store, now_ms, rfc3339};

/// The most patterns a namespace holds: every write of content checks
/// them all (on SQLite inside the store's one writer), so their number
/// bounds what a write can cost.
pub const MAX_PATTERNS: usize = 256;

/// Adds a pattern the namespace refuses: a later memory.set or
/// memory.update whose content matches fails with BLACKLISTED.
/// Case-insensitive; with * or ? a glob over the whole content, else a
/// substring. sweep: true also soft-deletes the matching memories and
/// reports them, at most 1,000 a call (more: true means call it again).
/// blacklist.list shows the patterns; an admin takes one off with
/// blacklist.remove.
#[loom_op(role = "writer", audit, idempotent, destructive, toolsets(core))]
async fn add(cx: &OpCx, input: BlacklistAdd) -> OpResult<BlacklistAdded> {
    let store = cx.service::<Store>()?;
    audited(store, cx, add_pattern(store, cx, input).await).await
}

/// The most bytes a pattern may have.
const MAX_PATTERN_BYTES: usize = 256;

fn within_bound(pattern: &str) -> OpResult<()> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(invalid(
            "pattern",
            format!(
                "pattern is {} bytes; at most {MAX_PATTERN_BYTES}",
                pattern.len()
            ),
        ));
    }
    Ok(())
}

async fn add_pattern(store: &Store, cx: &OpCx, input: BlacklistAdd) -> OpResult<BlacklistAdded> {
    let pattern = input.pattern.trim();
    // Wildcards alone with a `*` match every content at least as long as
    // their `?`s; `?`s alone match only content of their length.
    if pattern.is_empty() || pattern.chars().all(|c| c == '*' || c == '?') && pattern.contains('*')
    {
        return Err(invalid("pattern", "pattern is empty or matches everything"));
    }
    within_bound(pattern)?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    // No write of content is between its check of the patterns and its
    // commit while the pattern goes in and the sweep runs: those before
    // are swept, those after are refused (PostgreSQL; SQLite's writes run
    // one at a time, and its one-step writes check the patterns where they
    // land).
    memories::hold_blacklist(tx.conn(), store, cx, true).await?;
    let now = now_ms();
    // Matching ignores case, so a pattern differing from one held only in
    // case adds nothing.
    let patterns = store::patterns(tx.conn(), cx).await?;
    let count = patterns.len();
    let held = store::held_among(patterns, pattern).is_some();
    if !held && count >= MAX_PATTERNS {
        return Err(invalid(
            "pattern",
            format!(
                "namespace {:?} holds {MAX_PATTERNS} patterns, the most it can: remove one first",
                cx.scope.namespace
            ),
        ));
    }
    let added = !held && store::insert(tx.conn(), cx, pattern, now).await?;
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    let mut more = false;
    if input.sweep {
        // Held until the commit on PostgreSQL, as memory.apply holds its
        // rows: a write of one meanwhile waits instead of failing the sweep.
        let every_row = memories::ListFilter {
            for_update: true,
            ..Default::default()
        };
        let rows = memories::list_all(tx.conn(), cx, &every_row, now).await?;
        // A lock holds its key, whichever agent's row carries it.
        let locked = memories::locked_keys(tx.conn(), cx).await?;
        for row in rows
            .into_iter()
            .filter(|r| pattern::matches(pattern, &r.content))
        {
            let reason = if locked.contains(&row.memory_key) {
                Some("locked")
            } else if row.pinned != 0 {
                Some("pinned")
            } else {
                None
            };
            let swept = SweptMemory {
                memory_key: row.memory_key.clone(),
                agent: row.agent.clone(),
                reason: reason.map(str::to_owned),
            };
            if reason.is_some() {
                kept.push(swept);
                continue;
            }
            // A bulk change's bound; the same call again sweeps on.
            if removed.len() == crate::memory::MAX_BULK_CHANGES {
                more = true;
                break;
            }
            let mut new = row.clone();
            new.deleted = 1;
            new.updated_ms = now;
            if !memories::save(tx.conn(), cx, row.version, &new, "delete").await? {
                return Err(memories::conflict(tx.conn(), &row, row.version).await?);
            }
            removed.push(swept);
        }
    }
    if added || !removed.is_empty() {
        tx.commit(cx).await?;
    } else {
        tx.rollback().await?;
        store.audit_outcome(cx, "noop").await?;
    }
    Ok(BlacklistAdded {
        pattern: pattern.to_owned(),
        added,
        removed,
        kept,
        more,
    })
}

/// Lists the namespace's blacklist patterns, with who added each and when.
#[loom_op(role = "viewer", idempotent)]
async fn list(cx: &OpCx, _input: BlacklistList) -> OpResult<BlacklistPatterns> {
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    require_namespace(&mut conn, cx).await?;
    let patterns = store::listed(&mut conn, cx)
        .await?
        .into_iter()
        .map(|(pattern, added_by, at_ms)| BlacklistPattern {
            pattern,
            added_by,
            added_at: rfc3339(at_ms),
        })
        .collect();
    Ok(BlacklistPatterns {
        org: cx.scope.org.clone(),
        namespace: cx.scope.namespace.clone(),
        patterns,
    })
}

/// Takes a pattern off the namespace's blacklist (matched ignoring case),
/// so content it matched may be stored again; memories a sweep deleted
/// stay deleted. Admin only: it lifts a guard others rely on.
#[loom_op(role = "admin", audit)]
async fn remove(cx: &OpCx, input: BlacklistRemove) -> OpResult<BlacklistRemoved> {
    let store = cx.service::<Store>()?;
    audited(store, cx, remove_pattern(store, cx, input).await).await
}

async fn remove_pattern(
    store: &Store,
    cx: &OpCx,
    input: BlacklistRemove,
) -> OpResult<BlacklistRemoved> {
    let pattern = input.pattern.trim();
    // None longer is held; and the comparison ignoring case compiles the
    // pattern into a regular expression, which has a size bound of its own.
    within_bound(pattern)?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    match store::remove(tx.conn(), cx, pattern).await? {
        Some(held) => {
            tx.commit(cx).await?;
            Ok(BlacklistRemoved { pattern: held })
        }
        None => Err(LoomError::new(
            ErrorCode::ResourceNotFound,
            format!("{pattern:?} is not on this namespace's blacklist (blacklist.list shows it)"),
        )
        .with_detail("pattern", pattern)),
    }
}
