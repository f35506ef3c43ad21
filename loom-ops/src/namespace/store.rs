//! Namespaces in SQL.

use loom_core::{OpCx, OpResult};
use sqlx::AnyConnection;

use super::model::Namespace;
use crate::store::{db_error, now_ms, rfc3339};

#[derive(sqlx::FromRow)]
struct Row {
    namespace: String,
    kind: String,
    restricted: i64,
    description: String,
    memories: i64,
    created_ms: i64,
}

/// Namespaces of the org after `after` by name, optionally only `names` and
/// one kind. A restricted namespace is left out for a caller of another org
/// (an org-wide token, a platform admin), which the access rule shuts out
/// of it ([`loom_core::access`]): a listing shows no more than naming each
/// namespace would.
pub async fn list(
    conn: &mut AnyConnection,
    cx: &OpCx,
    names: Option<&[String]>,
    kind: Option<&str>,
    after: &str,
    limit: i64,
) -> OpResult<Vec<Namespace>> {
    // `restricted` is a BOOLEAN column; read through CASE it decodes as an
    // integer on both backends.
    let mut sql =
        "SELECT n.namespace, n.kind, CASE WHEN n.restricted THEN 1 ELSE 0 END AS restricted, \
         n.description, n.created_ms, \
         (SELECT COUNT(*) FROM memories m WHERE m.org = n.org AND m.namespace = n.namespace \
          AND m.deleted = 0 AND (m.expires_ms IS NULL OR m.expires_ms > $1)) AS memories \
         FROM namespaces n WHERE n.org = $2 AND n.namespace > $3 AND ($4 = '' OR n.kind = $4) \
         AND ($6 = 0 OR NOT n.restricted)"
            .to_owned();
    let names = names.map(|n| n.to_vec());
    if let Some(names) = &names {
        let marks: Vec<String> = (0..names.len()).map(|i| format!("${}", i + 7)).collect();
        if marks.is_empty() {
            return Ok(Vec::new());
        }
        sql.push_str(&format!(" AND n.namespace IN ({})", marks.join(", ")));
    }
    sql.push_str(" ORDER BY n.namespace LIMIT $5");
    let mut q = sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(sql))
        .bind(now_ms())
        .bind(&cx.scope.org)
        .bind(after)
        .bind(kind.unwrap_or(""))
        .bind(limit)
        .bind(i64::from(cx.caller.outside_restricted_of(&cx.scope.org)));
    for n in names.unwrap_or_default() {
        q = q.bind(n);
    }
    let rows = q.fetch_all(conn).await.map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|r| Namespace {
            namespace: r.namespace,
            kind: r.kind,
            restricted: r.restricted != 0,
            description: r.description,
            memories: r.memories,
            created_at: rfc3339(r.created_ms),
        })
        .collect())
}
