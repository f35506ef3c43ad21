//! MCP sessions in the store (`mcp_sessions`): written when `initialize`
//! opens one, read by a server that does not hold it in memory (another
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
    /// Keeps a session `initialize` opened.
    pub async fn mcp_session_open(&self, s: &McpSessionRow) -> OpResult<()> {
        sqlx::query(
            "INSERT INTO mcp_sessions (session_id, agent, revision, org, subject, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&s.session_id)
        .bind(&s.agent)
        .bind(&s.revision)
        .bind(s.org.as_deref())
        .bind(s.subject.as_deref())
        .bind(now_ms())
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// The session of `id`, ended or not; `None` when no server opened it.
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

    /// Binds session `id`, opened with no token, to (`org`, `subject`);
    /// true when it is (now, or already) theirs, false when another
    /// principal holds it or it is not kept.
    pub async fn mcp_session_bind(&self, id: &str, org: &str, subject: &str) -> OpResult<bool> {
        let done = sqlx::query(
            "UPDATE mcp_sessions SET org = $2, subject = $3 \
             WHERE session_id = $1 AND (subject IS NULL OR (org = $2 AND subject = $3))",
        )
        .bind(id)
        .bind(org)
        .bind(subject)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
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
    async fn a_session_is_kept_bound_once_and_ended() {
        for test in testing::all().await {
            let (store, n) = (&test.store, test.name());
            let open = McpSessionRow {
                session_id: "s1".into(),
                agent: "cursor".into(),
                revision: "2025-11-25".into(),
                org: None,
                subject: None,
                ended_ms: None,
            };
            store.mcp_session_open(&open).await.unwrap();
            assert_eq!(store.mcp_session("s1").await.unwrap(), Some(open), "{n}");
            assert_eq!(store.mcp_session("s2").await.unwrap(), None, "{n}");
            // The first bearer binds it; the same again is still theirs,
            // another is refused.
            assert!(
                store.mcp_session_bind("s1", "o", "ana").await.unwrap(),
                "{n}"
            );
            assert!(
                store.mcp_session_bind("s1", "o", "ana").await.unwrap(),
                "{n}"
            );
            assert!(
                !store.mcp_session_bind("s1", "o", "bob").await.unwrap(),
                "{n}"
            );
            assert!(
                !store.mcp_session_bind("s2", "o", "ana").await.unwrap(),
                "{n}"
            );
            let bound = store.mcp_session("s1").await.unwrap().unwrap();
            assert_eq!(bound.subject.as_deref(), Some("ana"), "{n}");
            assert!(store.mcp_session_end("s1").await.unwrap(), "{n}");
            assert!(!store.mcp_session_end("s1").await.unwrap(), "{n}");
            let ended = store.mcp_session("s1").await.unwrap().unwrap();
            assert!(ended.ended_ms.is_some(), "{n}");
        }
    }
}
