//! The `audit` plane: reading the audit log that audited ops write in the
//! same transaction as their change.

use loom_core::{OpCx, OpResult, loom_op};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scope::require_namespace;
use crate::store::{Store, db_error, rfc3339};

/// Reads the newest audit rows of a namespace.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditListInput {
    /// Only rows of this op.
    #[serde(default)]
    pub op: Option<String>,
    /// At most this many rows, newest first (1 to 1000, default 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
    /// Only rows older than this id (paging).
    #[serde(default)]
    pub before_id: Option<i64>,
    /// The namespace (default: the caller's default workspace).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The org (filled from the token).
    #[serde(default)]
    pub org: Option<String>,
    /// The agent acting (default: the client's agent, else the token subject).
    #[serde(default)]
    pub agent: Option<String>,
}

/// One audit row.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AuditRow {
    /// The row id (for paging with before_id).
    pub id: i64,
    /// Who called.
    pub subject: String,
    /// The agent.
    pub agent: String,
    /// The op.
    pub op: String,
    /// SHA-256 of the call's arguments.
    pub args_digest: String,
    /// `ok`; `noop` (it changed nothing), `dry_run` (a dry run) or
    /// `replayed` (an idempotency key's stored answer); else the error code
    /// the call was refused with.
    pub outcome: String,
    /// The request id.
    pub request_id: String,
    /// When (RFC 3339).
    pub at: String,
}

/// The audit rows, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AuditList {
    /// The org.
    pub org: String,
    /// The namespace.
    pub namespace: String,
    /// The rows.
    pub rows: Vec<AuditRow>,
}

/// id, subject, agent, op, args_digest, outcome, request_id, at_ms.
type AuditTuple = (i64, String, String, String, String, String, String, i64);

/// Lists the audit log of a namespace, newest first: who called which
/// audited op, with which arguments digest and outcome. Admin only.
#[loom_op(
    role = "admin",
    idempotent,
    rate = "read",
    mcp_hidden = "an administrator reads the audit log over HTTP: POST /v1/audit.list"
)]
async fn list(cx: &OpCx, input: AuditListInput) -> OpResult<AuditList> {
    let store = cx.service::<Store>()?;
    let mut conn = store.read().await?;
    // A namespace that does not exist has no log to list: 404, as for
    // every other op, not an empty page.
    require_namespace(&mut conn, cx).await?;
    let limit = i64::from(input.limit.unwrap_or(100).clamp(1, 1000));
    let rows: Vec<AuditTuple> = sqlx::query_as(
        "SELECT id, subject, agent, op, args_digest, outcome, request_id, at_ms FROM audit_log \
         WHERE org = $1 AND namespace = $2 AND ($3 = '' OR op = $3) AND id < $4 \
         ORDER BY id DESC LIMIT $5",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(input.op.unwrap_or_default())
    .bind(input.before_id.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(AuditList {
        org: cx.scope.org.clone(),
        namespace: cx.scope.namespace.clone(),
        rows: rows
            .into_iter()
            .map(
                |(id, subject, agent, op, args_digest, outcome, request_id, at_ms)| AuditRow {
                    id,
                    subject,
                    agent,
                    op,
                    args_digest,
                    outcome,
                    request_id,
                    at: rfc3339(at_ms),
                },
            )
            .collect(),
    })
}
