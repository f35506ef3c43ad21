//! MCP sessions' implicit runs: begun by a session's first run-scoped call,
//! closed by `DELETE /mcp` or by the idle sweep. Every statement is one
//! conditional write, so replicas on one database never begin two runs for
//! a session nor close one twice.

use loom_core::OpResult;

use super::{Store, db_error, now_ms};

/// Who a session's run belongs to and where it is filed.
#[derive(Clone, Debug)]
pub struct SessionRunKey<'a> {
    /// The org.
    pub org: &'a str,
    /// The caller's default namespace (where the run is filed).
    pub namespace: &'a str,
    /// The token subject.
    pub subject: &'a str,
    /// The agent (from the client's name).
    pub agent: &'a str,
    /// The MCP session.
    pub session_id: &'a str,
}

impl Store {
    /// The open run of (org, subject, session), begun now if there is none;
    /// `None` when the namespace it would be filed in does not exist (a run
    /// no `run.list` or `run.get` could show: the calls go without one).
    pub async fn session_run(&self, key: &SessionRunKey<'_>) -> OpResult<Option<String>> {
        if let Some(id) = self.open_session_run(key).await? {
            return Ok(Some(id));
        }
        let run_id = uuid::Uuid::now_v7().to_string();
        sqlx::query(
            "INSERT INTO runs (org, namespace, run_id, agent, subject, goal, status, summary, started_ms, session_id) \
             SELECT $1, $2, $3, $4, $5, $6, 'open', '', $7, $8 \
             WHERE EXISTS (SELECT 1 FROM namespaces WHERE org = $1 AND namespace = $2) \
             ON CONFLICT (org, subject, session_id) WHERE session_id IS NOT NULL AND status = 'open' DO NOTHING",
        )
        .bind(key.org)
        .bind(key.namespace)
        .bind(&run_id)
        .bind(key.agent)
        .bind(key.subject)
        .bind(format!("MCP session of {}", key.agent))
        .bind(now_ms())
        .bind(key.session_id)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        // Another call (or replica) may have begun it first: read the winner.
        self.open_session_run(key).await
    }

    async fn open_session_run(&self, key: &SessionRunKey<'_>) -> OpResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT run_id FROM runs WHERE org = $1 AND subject = $2 AND session_id = $3 AND status = 'open'",
        )
        .bind(key.org)
        .bind(key.subject)
        .bind(key.session_id)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        Ok(row.map(|(id,)| id))
    }

    /// Closes the session's open runs, one per org it acted in (the session
    /// ended), in `org` only when given (a caller bound to one org);
    /// `true` when one was open.
    pub async fn close_session_runs(
        &self,
        org: Option<&str>,
        subject: &str,
        session_id: &str,
    ) -> OpResult<bool> {
        // Without an org the statement walks the open session runs
        // (runs_open_sessions, migration 0006), whatever their org.
        let done = sqlx::query(
            "UPDATE runs SET status = 'closed', close_reason = 'session_ended', completed_ms = $1 \
             WHERE session_id = $2 AND subject = $3 AND status = 'open' \
             AND ($4 IS NULL OR org = $4)",
        )
        .bind(now_ms())
        .bind(session_id)
        .bind(subject)
        .bind(org)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
    }

    /// Closes every open session run with no call in the `idle_ms` before
    /// `now_ms` (its calls are its `agent_events` rows); returns the runs closed.
    pub async fn sweep_idle_session_runs(
        &self,
        now_ms: i64,
        idle_ms: i64,
    ) -> OpResult<Vec<String>> {
        let cutoff = now_ms.saturating_sub(idle_ms);
        let closed: Vec<(String,)> = sqlx::query_as(
            "UPDATE runs SET status = 'closed', close_reason = 'idle', completed_ms = $1 \
             WHERE status = 'open' AND session_id IS NOT NULL AND started_ms < $2 \
             AND NOT EXISTS (SELECT 1 FROM agent_events e \
                             WHERE e.org = runs.org AND e.run_id = runs.run_id AND e.at_ms >= $2) \
             RETURNING run_id",
        )
        .bind(now_ms)
        .bind(cutoff)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(closed.into_iter().map(|(id,)| id).collect())
    }
}
