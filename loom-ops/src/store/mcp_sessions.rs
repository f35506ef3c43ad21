//! MCP sessions in the store (`mcp_sessions`): written once a bearer holds
//! one, read by a server that does not hold it in memory (another
//! replica's, or its own from before a restart), ended by `DELETE /mcp`.
//! The transport keeps what it read for a few seconds; every change here
//! is one conditional statement, so replicas never disagree on who holds
//! a session or whether it ended.

use loom_core::OpResult;

use super::{Store, db_error, now_ms};

/// A session as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct McpSessionRow {
    /// The id `initialize` gave it.
    pub session_id: String,
    /// The agent its client's name gives.
    pub agent: String,
    /// The protocol revision `initialize` agreed.
    pub revision: String,
    /// Who holds it: the token's org and subject; none until a bearer acts
    /// in a session opened without one.
    pub org: Option<String>,
    /// See `org`.
    pub subject: Option<String>,
    /// When `DELETE /mcp` ended it.
    pub ended_ms: Option<i64>,
}

impl Store {
    /// Keeps session `s`, held by its principal: `false` when the store
    /// keeps it already, held by another principal. Sessions are kept once
    /// a bearer holds them (at `initialize` with a token, or at the first
    /// call with one in a session opened without), so no caller without a
    /// token adds rows.
    pub async fn mcp_session_keep(&self, s: &McpSessionRow) -> OpResult<bool> {
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO mcp_sessions (session_id, agent, revision, org, subject, created_ms, seen_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(&s.session_id)
        .bind(&s.agent)
        .bind(&s.revision)
        .bind(s.org.as_deref())
        .bind(s.subject.as_deref())
        .bind(now)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        if done.rows_affected() > 0 {
            return Ok(true);
        }
        // Kept already: by this principal (another replica, a retry), or not.
        Ok(self
            .mcp_session(&s.session_id)
            .await?
            .is_some_and(|kept| kept.org == s.org && kept.subject == s.subject))
    }

    /// The session of `id`, ended or not; `None` when the store does not
    /// keep it.
    pub async fn mcp_session(&self, id: &str) -> OpResult<Option<McpSessionRow>> {
        sqlx::query_as(
            "SELECT session_id, agent, revision, org, subject, ended_ms \
             FROM mcp_sessions WHERE session_id = $1",
        )
        .bind(id)
        .fetch_optional(self.reader())
        .await
        .map_err(db_error)
    }

    /// Notes that session `id` is in use (retention keeps it by this).
    pub async fn mcp_session_seen(&self, id: &str) -> OpResult<()> {
        sqlx::query("UPDATE mcp_sessions SET seen_ms = $2 WHERE session_id = $1")
            .bind(id)
            .bind(now_ms())
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Ends session `id`; false when it was not live.
    pub async fn mcp_session_end(&self, id: &str) -> OpResult<bool> {
        let done = sqlx::query(
            "UPDATE mcp_sessions SET ended_ms = $2 WHERE session_id = $1 AND ended_ms IS NULL",
        )
        .bind(id)
        .bind(now_ms())
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn a_session_is_kept_once_by_its_holder_and_ended() {
        for test in testing::all().await {
            let (store, n) = (&test.store, test.name());
            let row = |subject: &str| McpSessionRow {
                session_id: "s1".into(),
                agent: "cursor".into(),
                revision: "2025-11-25".into(),
                org: Some("o".into()),
                subject: Some(subject.into()),
                ended_ms: None,
            };
            assert!(store.mcp_session_keep(&row("ana")).await.unwrap(), "{n}");
            assert_eq!(
                store.mcp_session("s1").await.unwrap(),
                Some(row("ana")),
                "{n}"
            );
            assert_eq!(store.mcp_session("s2").await.unwrap(), None, "{n}");
            // Kept again by its holder (another replica): still theirs;
            // by another principal: refused, and left as it was.
            assert!(store.mcp_session_keep(&row("ana")).await.unwrap(), "{n}");
            assert!(!store.mcp_session_keep(&row("bob")).await.unwrap(), "{n}");
            assert_eq!(
                store.mcp_session("s1").await.unwrap(),
                Some(row("ana")),
                "{n}"
            );
            store.mcp_session_seen("s1").await.unwrap();
            assert!(store.mcp_session_end("s1").await.unwrap(), "{n}");
            assert!(!store.mcp_session_end("s1").await.unwrap(), "{n}");
            let ended = store.mcp_session("s1").await.unwrap().unwrap();
            assert!(ended.ended_ms.is_some(), "{n}");
        }
    }
}
