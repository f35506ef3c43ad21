//! Retention on a running server: rows past what the deployment keeps (a
//! ledger row, an exposure row, an audit row, a stored idempotent answer
//! past its time to live) are deleted by the sweep the server starts with,
//! and rows inside their retention stay. On SQLite and, when
//! `LOOM_TEST_DATABASE_URL` is set, on PostgreSQL.

use std::time::Duration;

use loom_ops::store::{Pruned, Store, now_ms, testing};
use loom_server::Config;
use sqlx::AssertSqlSafe;

const DAY_MS: i64 = 86_400_000;

/// One row of `pruned`'s table written at `at_ms`, with `id` as its
/// request id (or idempotency key).
async fn insert(store: &Store, pruned: Pruned, at_ms: i64, id: &str) {
    let sql = match pruned {
        Pruned::Ledger => {
            "INSERT INTO agent_events (org, namespace, subject, agent, op, transport, \
             request_id, outcome, status, latency_ms, at_ms) \
             VALUES ('default', 'default', 's', 'a', 'memory.get', 'http', $1, 'ok', 200, 1, $2)"
        }
        Pruned::Exposures => {
            "INSERT INTO memory_exposures (org, namespace, agent, memory_key, version, \
             served_to, subject, op, request_id, at_ms) \
             VALUES ('default', 'default', 'a', 'k', 1, 'a', 's', 'memory.get', $1, $2)"
        }
        Pruned::Audit => {
            "INSERT INTO audit_log (org, namespace, subject, agent, op, args_digest, outcome, \
             request_id, at_ms) \
             VALUES ('default', 'default', 's', 'a', 'memory.set', '', 'ok', $1, $2)"
        }
        Pruned::Idempotency => {
            "INSERT INTO idempotency_keys (org, subject, idem_key, op, request_hash, state, \
             created_ms) VALUES ('default', 's', $1, 'memory.set', '', 'done', $2)"
        }
        Pruned::McpSessions => {
            "INSERT INTO mcp_sessions (session_id, agent, revision, created_ms, seen_ms) \
             VALUES ($1, 'a', '2025-11-25', $2, $2)"
        }
    };
    sqlx::query(sql)
        .bind(id)
        .bind(at_ms)
        .execute(store.writer())
        .await
        .expect("a row");
}

/// The ids (request ids, idempotency keys) of `pruned`'s rows, sorted.
async fn ids(store: &Store, pruned: Pruned) -> Vec<String> {
    let column = match pruned {
        Pruned::Idempotency => "idem_key",
        Pruned::McpSessions => "session_id",
        _ => "request_id",
    };
    let sql = format!("SELECT {column} FROM {} ORDER BY {column}", pruned.table());
    let rows: Vec<(String,)> = sqlx::query_as(AssertSqlSafe(sql))
        .fetch_all(store.reader())
        .await
        .expect("rows");
    rows.into_iter().map(|(id,)| id).collect()
}

#[tokio::test]
async fn a_server_deletes_rows_past_their_retention_and_keeps_the_rest() {
    loom_tests::link();
    for db in testing::all().await {
        let now = now_ms();
        // Written before the server starts: its first sweep is at start.
        for pruned in Pruned::ALL {
            insert(&db.store, pruned, now - 40 * DAY_MS, "old").await;
            insert(&db.store, pruned, now - 2 * DAY_MS, "days-ago").await;
            insert(&db.store, pruned, now - 60_000, "recent").await;
        }
        let config = Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: db.options.url.clone(),
            pg_schema: db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            // The ledger and exposures as shipped (30 days); the audit
            // log kept 10 days; answers replayed for a day.
            audit_retention: Some(Duration::from_secs(10 * 86_400)),
            idempotency_ttl: Duration::from_secs(86_400),
            ..Config::default()
        };
        let server = loom_server::spawn(config).await.expect("server starts");

        let expected = |pruned: Pruned| match pruned {
            Pruned::Idempotency => vec!["recent".to_owned()],
            _ => vec!["days-ago".to_owned(), "recent".to_owned()],
        };
        // The sweep runs in the background: polled, up to a bound far past
        // what it takes.
        let want: Vec<_> = Pruned::ALL.into_iter().map(|p| (p, expected(p))).collect();
        let tables = || async {
            let mut seen = Vec::new();
            for pruned in Pruned::ALL {
                seen.push((pruned, ids(&db.store, pruned).await));
            }
            seen
        };
        let seen = loom_tests::poll_until(Duration::from_secs(30), want, tables).await;
        for (pruned, there) in seen {
            assert_eq!(
                there,
                expected(pruned),
                "{} on {}",
                pruned.table(),
                db.name()
            );
        }
        server.shutdown().await;
    }
}
