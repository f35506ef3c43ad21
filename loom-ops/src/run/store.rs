//! Runs in SQL.

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};
use sqlx::AnyConnection;

use super::model::Run;
use crate::store::{db_error, rfc3339};

/// A `runs` row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Row {
    pub run_id: String,
    pub namespace: String,
    pub agent: String,
    pub goal: String,
    pub status: String,
    pub summary: String,
    pub started_ms: i64,
    pub completed_ms: Option<i64>,
    pub session_id: Option<String>,
    pub close_reason: Option<String>,
    /// The token subject that began it.
    pub subject: String,
}

const COLUMNS: &str = "run_id, namespace, agent, goal, status, summary, started_ms, completed_ms, session_id, close_reason, subject";

impl Row {
    /// The API shape.
    pub fn to_run(&self, changed: bool) -> Run {
        Run {
            run_id: self.run_id.clone(),
            namespace: self.namespace.clone(),
            agent: self.agent.clone(),
            subject: self.subject.clone(),
            goal: self.goal.clone(),
            status: self.status.clone(),
            summary: self.summary.clone(),
            started_at: rfc3339(self.started_ms),
            completed_at: self.completed_ms.map(rfc3339),
            session_id: self.session_id.clone(),
            close_reason: self.close_reason.clone(),
            changed,
        }
    }
}

/// One run of the namespace.
pub async fn get(conn: &mut AnyConnection, cx: &OpCx, run_id: &str) -> OpResult<Option<Row>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM runs WHERE org = $1 AND namespace = $2 AND run_id = $3"
    )))
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(run_id)
    .fetch_optional(conn)
    .await
    .map_err(db_error)
}

/// Refuses unless `run_id` is a run begun with run.begin and in progress
/// in the call's namespace: RESOURCE_NOT_FOUND when none began there,
/// RUN_ENDED when it has ended, INVALID_ARGUMENTS (`run_id`) for an MCP
/// session's implicit run. What a call keeps for a run (working memory, a
/// write's run label) is kept only for one that began and has not ended:
/// no read would find it otherwise. And an implicit run is its session's
/// own: its calls carry it without naming it, and a call naming it would
/// add to another principal's run (and keep it from closing when idle).
pub async fn require_open(conn: &mut AnyConnection, cx: &OpCx, run_id: &str) -> OpResult<()> {
    match get(conn, cx, run_id).await? {
        Some(run) if run.session_id.is_some() => Err(crate::memory::validate::invalid(
            "run_id",
            format!(
                "run {run_id:?} is an MCP session's implicit run, which that session's calls carry without naming it; name a run begun with run.begin"
            ),
        )),
        None => Err(LoomError::new(
            ErrorCode::ResourceNotFound,
            format!(
                "no run {run_id:?} in namespace {:?}: begin one with run.begin",
                cx.scope.namespace
            ),
        )
        .with_detail("run_id", run_id)),
        Some(run) if run.status != "open" => Err(LoomError::new(
            ErrorCode::RunEnded,
            format!(
                "run {run_id:?} has ended ({}): only a run in progress takes what is kept for it",
                run.status
            ),
        )
        .with_detail("run_id", run_id)
        .with_detail("run_status", run.status)),
        Some(_) => Ok(()),
    }
}

/// [`require_open`] for a write that keeps something for the run, holding
/// the run's row (PostgreSQL: `FOR UPDATE`) until the write's transaction
/// ends: `run.complete` ([`close`]) waits for the write instead of ending
/// the run between its check and its commit, which left a note written
/// into a run already ended; and two such writes of one run take turns,
/// so what one counts of the run's notes the other cannot change
/// meanwhile. SQLite's writes run one at a time already.
pub async fn hold_open(conn: &mut AnyConnection, cx: &OpCx, run_id: &str) -> OpResult<()> {
    hold(conn, cx, run_id, "FOR UPDATE").await?;
    require_open(conn, cx, run_id).await
}

/// [`require_open`] inside a write stamped with the run, at its commit
/// ([`crate::store::WriteTx::commit`]): the pipeline checked the run
/// before the op ran, and a `run.complete` landing between that check and
/// this commit left a change stamped into a run already ended. On
/// PostgreSQL the run's row is held (`FOR SHARE`: writes of one run still
/// run side by side) until the write commits, so a `run.complete` waits
/// for it, or this finds the run ended; SQLite's writes run one at a time
/// already.
pub async fn require_open_until_commit(
    conn: &mut AnyConnection,
    cx: &OpCx,
    run_id: &str,
) -> OpResult<()> {
    hold(conn, cx, run_id, "FOR SHARE").await?;
    require_open(conn, cx, run_id).await
}

/// Locks the run's row until the transaction ends (`lock`: `FOR UPDATE`
/// or `FOR SHARE`), on PostgreSQL; nothing on SQLite.
async fn hold(conn: &mut AnyConnection, cx: &OpCx, run_id: &str, lock: &str) -> OpResult<()> {
    if conn.backend_name() == "PostgreSQL" {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT 1 FROM runs WHERE org = $1 AND namespace = $2 AND run_id = $3 {lock}"
        )))
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(run_id)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// The namespace's most recent runs, newest first.
pub async fn recent(conn: &mut AnyConnection, cx: &OpCx, limit: i64) -> OpResult<Vec<Row>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM runs WHERE org = $1 AND namespace = $2 ORDER BY started_ms DESC, run_id LIMIT $3"
    )))
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(limit)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}

/// Inserts an open run; false when the id is taken.
pub async fn insert(conn: &mut AnyConnection, cx: &OpCx, row: &Row) -> OpResult<bool> {
    let done = sqlx::query(
        "INSERT INTO runs (org, namespace, run_id, agent, subject, goal, status, summary, started_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, 'open', '', $7) ON CONFLICT (org, namespace, run_id) DO NOTHING",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(&row.run_id)
    .bind(&row.agent)
    .bind(&cx.caller.subject)
    .bind(&row.goal)
    .bind(row.started_ms)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// Closes an open run; false when it is not open.
pub async fn close(
    conn: &mut AnyConnection,
    cx: &OpCx,
    run_id: &str,
    status: &str,
    summary: &str,
    now: i64,
) -> OpResult<bool> {
    let done = sqlx::query(
        "UPDATE runs SET status = $1, summary = $2, completed_ms = $3 \
         WHERE org = $4 AND namespace = $5 AND run_id = $6 AND status = 'open'",
    )
    .bind(status)
    .bind(summary)
    .bind(now)
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(run_id)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// The run's working memory notes, by name.
pub async fn notes(
    conn: &mut AnyConnection,
    cx: &OpCx,
    run_id: &str,
) -> OpResult<Vec<crate::working_memory::model::WorkingMemory>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT name, content, updated_ms FROM working_memory WHERE org = $1 AND namespace = $2 AND run_id = $3 \
         ORDER BY name",
    )
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(run_id)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(
            |(name, content, updated_ms)| crate::working_memory::model::WorkingMemory {
                run_id: run_id.to_owned(),
                name,
                bytes: content.len() as i64,
                content,
                updated_at: rfc3339(updated_ms),
            },
        )
        .collect())
}

/// The memory changes made in the run, oldest first, at most 200: those
/// in the run's namespace and, to the subject whose MCP session it is,
/// those its session made in other namespaces, as [`calls`] lists them.
pub async fn changes(
    conn: &mut AnyConnection,
    cx: &OpCx,
    run: &Row,
) -> OpResult<Vec<super::model::RunChange>> {
    let mut namespaces = vec![run.namespace.clone()];
    if let Some(session) = own_session(cx, run) {
        let others: Vec<(String,)> = sqlx::query_as(
            "SELECT DISTINCT namespace FROM agent_events \
             WHERE org = $1 AND run_id = $2 AND session_id = $3 AND subject = $4 AND namespace <> $5",
        )
        .bind(&cx.scope.org)
        .bind(&run.run_id)
        .bind(session)
        .bind(&run.subject)
        .bind(&run.namespace)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        namespaces.extend(others.into_iter().map(|(n,)| n));
    }
    let mut changes = Vec::new();
    // A namespace at a time, each through the index of its runs' versions.
    for namespace in namespaces {
        let rows: Vec<(String, String, i64, String, i64)> = sqlx::query_as(
            "SELECT memory_key, agent, version, change, at_ms FROM memory_versions \
             WHERE org = $1 AND namespace = $2 AND run_id = $3 ORDER BY at_ms, memory_key, version LIMIT 200",
        )
        .bind(&cx.scope.org)
        .bind(&namespace)
        .bind(&run.run_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        changes.extend(
            rows.into_iter()
                .map(|(memory_key, agent, version, change, at_ms)| {
                    (at_ms, namespace.clone(), memory_key, version, agent, change)
                }),
        );
    }
    changes.sort();
    changes.truncate(200);
    Ok(changes
        .into_iter()
        .map(
            |(at_ms, namespace, memory_key, version, agent, change)| super::model::RunChange {
                namespace,
                memory_key,
                agent,
                version,
                change,
                at: rfc3339(at_ms),
            },
        )
        .collect())
}

/// The run's MCP session, when the caller is the subject whose session it
/// is: only that subject sees what the session did in other namespaces.
fn own_session<'r>(cx: &OpCx, run: &'r Row) -> Option<&'r str> {
    run.session_id
        .as_deref()
        .filter(|_| cx.caller.subject == run.subject)
}

/// The calls made under a run (its `agent_events` rows), oldest first, at
/// most 500: those in the run's namespace (another namespace's run of the
/// same id is another run, whose calls this caller may not be allowed to
/// see) and, to the subject whose MCP session it is, that session's calls
/// in other namespaces (an implicit run carries every call of its session).
pub async fn calls(
    conn: &mut AnyConnection,
    cx: &OpCx,
    run: &Row,
) -> OpResult<Vec<super::model::RunCall>> {
    let session = own_session(cx, run);
    let rows: Vec<(String, String, String, String, i64, String, String)> = sqlx::query_as(
        "SELECT op, transport, outcome, request_id, at_ms, agent, namespace FROM agent_events \
         WHERE org = $1 AND run_id = $2 \
         AND (namespace = $3 OR (session_id = $4 AND subject = $5)) \
         ORDER BY at_ms, id LIMIT 500",
    )
    .bind(&cx.scope.org)
    .bind(&run.run_id)
    .bind(&run.namespace)
    .bind(session)
    .bind(&run.subject)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(
            |(op, transport, outcome, request_id, at_ms, agent, namespace)| super::model::RunCall {
                op,
                transport,
                outcome,
                request_id,
                agent,
                namespace,
                at: rfc3339(at_ms),
            },
        )
        .collect())
}

/// The namespace's runs, newest first, optionally of one status, after
/// `after` (a page's last run: its start and id) when given.
pub async fn list(
    conn: &mut AnyConnection,
    cx: &OpCx,
    status: Option<&str>,
    after: Option<(i64, &str)>,
    limit: i64,
) -> OpResult<Vec<Row>> {
    let (after_ms, after_id) = after.unwrap_or((i64::MAX, ""));
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM runs WHERE org = $1 AND namespace = $2 AND ($3 = '' OR status = $3) \
         AND (started_ms < $4 OR (started_ms = $4 AND run_id > $5)) \
         ORDER BY started_ms DESC, run_id LIMIT $6"
    )))
    .bind(&cx.scope.org)
    .bind(&cx.scope.namespace)
    .bind(status.unwrap_or(""))
    .bind(after_ms)
    .bind(after_id)
    .bind(limit)
    .fetch_all(conn)
    .await
    .map_err(db_error)
}
