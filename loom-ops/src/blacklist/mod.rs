//! The blacklist plane: content patterns a namespace refuses to store.

pub mod model;
pub mod pattern;
pub mod store;

use loom_core::{OpCx, OpResult, loom_op};

use self::model::{BlacklistAdd, BlacklistAdded, SweptMemory};
use crate::memory::store::{self as memories, Row};
use crate::memory::validate::invalid;
use crate::outcome::audited;
use crate::scope::require_namespace;
use crate::store::{Store, db_error, now_ms};

/// Adds a pattern the namespace refuses: a later memory.set or
/// memory.update whose content matches fails with BLACKLISTED.
/// Case-insensitive; with * or ? a glob over the whole content, else a
/// substring. sweep: true also soft-deletes the matching memories and
/// reports them.
#[loom_op(role = "writer", audit, toolsets(core))]
async fn add(cx: &OpCx, input: BlacklistAdd) -> OpResult<BlacklistAdded> {
    let store = cx.service::<Store>()?;
    audited(store, cx, add_pattern(store, cx, input).await).await
}

async fn add_pattern(store: &Store, cx: &OpCx, input: BlacklistAdd) -> OpResult<BlacklistAdded> {
    let pattern = input.pattern.trim();
    if pattern.chars().all(|c| c == '*' || c == '?') {
        return Err(invalid("pattern", "pattern is empty or matches everything"));
    }
    if pattern.len() > 256 {
        return Err(invalid(
            "pattern",
            format!("pattern is {} bytes; at most 256", pattern.len()),
        ));
    }
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    // Matching ignores case, so a pattern differing from one held only in
    // case adds nothing.
    let folded = pattern.to_lowercase();
    let held = store::patterns(tx.conn(), cx)
        .await?
        .iter()
        .any(|p| p.to_lowercase() == folded);
    let added = !held && store::insert(tx.conn(), cx, pattern, now).await?;
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    if input.sweep {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM memories WHERE org = $1 AND namespace = $2 AND deleted = 0 \
             AND (expires_ms IS NULL OR expires_ms > $3) ORDER BY memory_key, agent",
            memories::COLUMNS
        )))
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(now)
        .fetch_all(tx.conn())
        .await
        .map_err(db_error)?;
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
    })
}
