//! Blacklist patterns in SQL.

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};
use sqlx::AnyConnection;

use super::pattern::matches;
use crate::store::db_error;

/// The namespace's patterns.
pub async fn patterns(conn: &mut AnyConnection, cx: &OpCx) -> OpResult<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT pattern FROM blacklist WHERE org = $1 AND namespace = $2 ORDER BY pattern",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows.into_iter().map(|(p,)| p).collect())
}

/// Refuses content a pattern of the namespace matches (`BLACKLISTED`).
pub async fn check(conn: &mut AnyConnection, cx: &OpCx, content: &str) -> OpResult<()> {
    refuse_matching(patterns(conn, cx).await?, content)
}

/// Refuses content one of `patterns` (the namespace's, in order) matches
/// (`BLACKLISTED`, naming the first).
pub fn refuse_matching(patterns: Vec<String>, content: &str) -> OpResult<()> {
    for pattern in patterns {
        if matches(&pattern, content) {
            return Err(LoomError::new(
                ErrorCode::Blacklisted,
                format!("the content matches the namespace's blacklist pattern {pattern:?}; nothing was written"),
            )
            .with_detail("pattern", pattern));
        }
    }
    Ok(())
}

/// Adds a pattern; false when it was already there.
pub async fn insert(
    conn: &mut AnyConnection,
    cx: &OpCx,
    pattern: &str,
    now: i64,
) -> OpResult<bool> {
    let done = sqlx::query(
        "INSERT INTO blacklist (org, namespace, pattern, subject, created_ms) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (org, namespace, pattern) DO NOTHING",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(pattern)
    .bind(&cx.caller.subject)
    .bind(now)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// The namespace's patterns with who added them and when (ms), in order.
pub async fn listed(conn: &mut AnyConnection, cx: &OpCx) -> OpResult<Vec<(String, String, i64)>> {
    sqlx::query_as(
        "SELECT pattern, subject, created_ms FROM blacklist \
         WHERE org = $1 AND namespace = $2 ORDER BY pattern",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// The held pattern equal to `pattern` ignoring case, as patterns match
/// (at most one is held: adding refuses a second).
pub async fn held(conn: &mut AnyConnection, cx: &OpCx, pattern: &str) -> OpResult<Option<String>> {
    Ok(held_among(patterns(conn, cx).await?, pattern))
}

/// The one of `patterns` (the namespace's) equal to `pattern` ignoring
/// case, as patterns match ([`super::pattern::same_ignoring_case`]).
pub fn held_among(patterns: Vec<String>, pattern: &str) -> Option<String> {
    let same = super::pattern::same_ignoring_case(pattern);
    patterns.into_iter().find(|p| same(p))
}

/// Removes the held pattern equal to `pattern` ignoring case; the one
/// removed, if any.
pub async fn remove(
    conn: &mut AnyConnection,
    cx: &OpCx,
    pattern: &str,
) -> OpResult<Option<String>> {
    let Some(held) = held(&mut *conn, cx, pattern).await? else {
        return Ok(None);
    };
    sqlx::query("DELETE FROM blacklist WHERE org = $1 AND namespace = $2 AND pattern = $3")
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(&held)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(Some(held))
}
